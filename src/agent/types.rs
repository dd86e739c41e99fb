//! What a model call and the agent phase produce, shared by every layer
//! that handles them: [`ToolCall`], [`ModelReply`], [`ModelError`],
//! [`Usage`] and [`ExitReason`].
//!
//! A leaf: it imports nothing from the crate. The protocols build these
//! types, `model.rs` dispatches to the protocols and hands them to the
//! loop, and the trajectory and the CSV row record them; so none of those
//! files has to import another for its types, and none depends back on a
//! file that depends on it (`tests/it/layers.rs`). What a type does for one
//! layer stays in that layer: which errors are retried is `retry.rs`'s,
//! how an error answer is read is `http.rs`'s.

use std::time::Duration;

use crate::run_folder::{ExitReason, Usage};
use serde_json::Value;

/// A tool call as the model sent it; `arguments` is the raw JSON text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// One answer of the model.
#[derive(Debug, Clone)]
pub(crate) struct ModelReply {
    /// The assistant message exactly as received, to append to the history.
    pub message: Value,
    pub tool_calls: Vec<ToolCall>,
    /// Why the model stopped, as the server said it (`stop`, `length`,
    /// `tool_calls`; Anthropic's `end_turn`, `max_tokens`, `tool_use`).
    pub finish_reason: Option<String>,
    /// The answer was cut by the output-token limit.
    pub cut: bool,
    pub usage: Usage,
    pub response_id: Option<String>,
}

/// A model call that gave no usable answer.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum ModelError {
    /// The server answered with an error status.
    #[error("the model API answered HTTP {status}: {message}")]
    Http {
        status: u16,
        message: String,
        /// What the server named the error (OpenAI's `code` or `type`,
        /// Anthropic's `error.type`, TGI's `error_type`), when it did.
        kind: Option<String>,
        /// The server's `Retry-After`, when it sent one.
        retry_after: Option<Duration>,
    },
    /// No answer: connection refused or dropped, timeout.
    #[error("failed to reach the model API: {0}")]
    Transport(String),
    /// An answer that is not what the protocol promises.
    #[error("the model API sent a malformed answer: {0}")]
    Malformed(String),
    /// The conversation no longer fits the model's context window.
    #[error("the conversation exceeds the model's context window: {0}")]
    ContextOverflow(String),
    /// The server gave the same error to the same request `times` times in
    /// a row, in words that show a request it will never take (a
    /// validation error, twice) or say nothing either way (four times):
    /// it refuses this request and would go on refusing it.
    #[error(
        "the model API answered HTTP {status} {} with the same error to the same request, so it refuses the request rather than being overloaded (not retried again): {message}",
        in_words(*.times)
    )]
    Repeated {
        status: u16,
        message: String,
        times: u32,
    },
    /// `--model predictions:FILE`: the task's patch went in by none of
    /// its rule set's commands; the last attempt's output.
    #[error("the prediction's patch does not apply: {0}")]
    PatchDoesNotApply(String),
    /// A replayed recording has no more answers: the loop ends as the
    /// recording did.
    #[error("the recording ended ({})", reason.as_str())]
    RecordingEnded {
        reason: ExitReason,
        error: Option<String>,
    },
}

impl ModelError {
    pub(crate) fn retry_after(&self) -> Option<Duration> {
        match self {
            ModelError::Http { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    pub(crate) fn status(&self) -> Option<u16> {
        match self {
            ModelError::Http { status, .. } | ModelError::Repeated { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// "twice", "4 times": how often an answer came.
fn in_words(times: u32) -> String {
    match times {
        1 => "once".to_owned(),
        2 => "twice".to_owned(),
        n => format!("{n} times"),
    }
}
