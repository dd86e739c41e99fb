//! Stage 3: the agent. The loop (`run.rs`) asks a model (`model.rs`, with
//! the wire protocols in `openai.rs`, `responses.rs`, `anthropic.rs`, `oracle.rs` and `replay.rs`,
//! the HTTP side in `http.rs`, retries in `retry.rs` and prices in
//! `config/pricing.rs`) for its next answer and answers every tool call with the
//! one tool, `bash` (`bash_tool.rs`). What a model call and the phase
//! produce (tool calls, replies, errors, usage, the exit reason) is in
//! `types.rs`, the leaf the others import.

pub mod anthropic;
pub mod bash_tool;
pub mod http;
pub mod model;
pub mod openai;
pub mod oracle;
pub mod reasoning;
pub mod replay;
pub mod responses;
pub mod retry;
pub mod run;
pub mod types;

pub use model::ModelClient;
pub use run::{AgentLimits, AgentOutcome, run_agent};
