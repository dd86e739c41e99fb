//! Stage 3: the agent. The loop (`run.rs`) asks a model (`model.rs`: an API
//! model, `api.rs`, whose provider's data is in the registry `provider.rs`
//! and whose request settings are `request.rs`'s, spoken in one of the wire
//! protocols `openai.rs`, `responses.rs`, `anthropic.rs`; or `oracle.rs`,
//! `predictions.rs` (another agent's patches; both write a patch by
//! `patch_file.rs`) and `replay.rs`; the HTTP side in `http.rs`, retries in
//! `retry.rs` and prices in `pricing.rs`) for its next answer and answers every tool call with the
//! one tool, `bash` (`bash_tool.rs`). What a model call and the phase
//! produce (tool calls, replies, errors, usage, the exit reason) is in
//! `types.rs`, the leaf the others import.

pub(crate) mod anthropic;
pub(crate) mod api;
pub(crate) mod bash_tool;
pub(crate) mod http;
pub(crate) mod model;
pub(crate) mod openai;
pub(crate) mod oracle;
pub(crate) mod patch_file;
pub(crate) mod predictions;
pub(crate) mod pricing;
pub(crate) mod provider;
pub(crate) mod reasoning;
pub(crate) mod replay;
pub(crate) mod request;
pub(crate) mod responses;
pub(crate) mod retry;
pub(crate) mod run;
pub(crate) mod types;

pub(crate) use model::ModelClient;
pub(crate) use run::{AgentLimits, AgentOutcome, run_agent};
