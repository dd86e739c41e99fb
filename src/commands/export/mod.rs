//! `onebash export`: rows selected, trajectories read, redacted, deduped,
//! written as JSONL (command.rs); one trajectory as a neutral conversation
//! (conversation.rs), the secret patterns (redact.rs), and one file per
//! format (openai_chat.rs, sharegpt.rs, atif.rs).

mod atif;
mod command;
mod conversation;
mod openai_chat;
mod redact;
mod sharegpt;

pub(crate) use command::{ExportError, run};
