//! What the loop needs from a model: the first messages, one answer per
//! call, and the shape of a tool result, whatever the wire protocol.
//!
//! Owns [`ModelClient`] (one variant per protocol, dispatched by `match`),
//! [`ModelReply`] and [`ModelError`]. Each protocol keeps its native message
//! format in the history: the loop treats messages as opaque JSON.

use serde_json::Value;

use crate::agent::openai::OpenAiClient;
use crate::agent::oracle;
use crate::prompt::RenderedPrompt;
use crate::task::TaskSpec;
use crate::trajectory::Usage;

/// A tool call as the model sent it; `arguments` is the raw JSON text.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// One answer of the model.
#[derive(Debug, Clone)]
pub struct ModelReply {
    /// The assistant message exactly as received, to append to the history.
    pub message: Value,
    pub tool_calls: Vec<ToolCall>,
    /// `stop`, `length`, `tool_calls`... as the server said it.
    pub finish_reason: Option<String>,
    pub usage: Usage,
    pub response_id: Option<String>,
}

impl ModelReply {
    /// The answer was cut by the output-token limit.
    pub fn was_cut(&self) -> bool {
        self.finish_reason.as_deref() == Some("length")
    }
}

/// A model call that gave no usable answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ModelError {
    /// The server answered with an error status.
    #[error("the model API answered HTTP {status}: {message}")]
    Http { status: u16, message: String },
    /// No answer: connection refused or dropped, timeout.
    #[error("failed to reach the model API: {0}")]
    Transport(String),
    /// An answer that is not what the protocol promises.
    #[error("the model API sent a malformed answer: {0}")]
    Malformed(String),
    /// The conversation no longer fits the model's context window.
    #[error("the conversation exceeds the model's context window: {0}")]
    ContextOverflow(String),
}

impl ModelError {
    /// Whether trying the same request again may succeed. Not used for
    /// retries yet; the retrying layer will ask this.
    pub fn is_transient(&self) -> bool {
        match self {
            ModelError::Http { status, .. } => *status == 429 || *status >= 500,
            ModelError::Transport(_) => true,
            ModelError::Malformed(_) | ModelError::ContextOverflow(_) => false,
        }
    }
}

/// A model, by protocol.
pub enum ModelClient {
    OpenAi(OpenAiClient),
    Oracle,
}

impl ModelClient {
    /// `openai` or `oracle`: recorded in the trajectory header.
    pub fn provider(&self) -> &'static str {
        match self {
            ModelClient::OpenAi(_) => "openai",
            ModelClient::Oracle => "oracle",
        }
    }

    /// The first messages of a task, in the protocol's format.
    pub fn initial_messages(&self, prompt: &RenderedPrompt) -> Vec<Value> {
        // Both protocols here speak the Chat Completions format.
        vec![
            serde_json::json!({"role": "system", "content": prompt.system}),
            serde_json::json!({"role": "user", "content": prompt.instance}),
        ]
    }

    /// The answer to one tool call, in the protocol's format.
    pub fn tool_result(&self, tool_call_id: &str, content: &str) -> Value {
        serde_json::json!({"role": "tool", "tool_call_id": tool_call_id, "content": content})
    }

    /// The request's fields other than `messages`, for the trajectory.
    pub fn request_template(&self) -> Value {
        match self {
            ModelClient::OpenAi(client) => client.request_template(),
            ModelClient::Oracle => serde_json::json!({}),
        }
    }

    /// Asks for the next answer given the whole history.
    pub async fn complete(
        &self,
        task: &TaskSpec,
        messages: &[Value],
    ) -> Result<ModelReply, ModelError> {
        match self {
            ModelClient::OpenAi(client) => client.complete(messages).await,
            ModelClient::Oracle => oracle::complete(task, messages),
        }
    }
}
