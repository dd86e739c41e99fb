//! What the loop needs from a model, whatever the wire protocol: the first
//! messages, the answer to a conversation, the shape of tool results, and
//! what a call cost.
//!
//! Owns [`ModelClient`] (a protocol, the run's retry policy and gate, the
//! price) and [`Protocol`]: an API model (`api.rs` dispatches to the wire
//! protocol its provider speaks) or one that needs no API. What they answer ([`ModelReply`], [`ModelError`]) is in
//! `types.rs`, which they import instead of this file. Each protocol keeps
//! its native message format in the history: the loop treats messages as
//! opaque JSON.

use std::sync::{Arc, PoisonError};
use std::time::Duration;

use serde_json::Value;

use crate::agent::anthropic::AnthropicClient;
use crate::agent::api::{ApiClient, ApiModel};
use crate::agent::oracle;
use crate::agent::predictions;
use crate::agent::pricing::Price;
use crate::agent::provider::Wire;
use crate::agent::replay::ReplayStore;
use crate::agent::responses::ResponsesClient;
use crate::agent::retry::{Gate, RetryPolicy};
use crate::agent::types::{ModelError, ModelReply};
use crate::grade::Rules;
use crate::run_folder::Usage;
use crate::task::TaskSpec;
use crate::task::predictions::PredictionFile;
use crate::task::prompt::RenderedPrompt;

/// A retry about to happen, for the trajectory.
#[derive(Debug, Clone)]
pub(crate) struct RetryNote {
    /// 1 for the first retry.
    pub retry: u32,
    pub status: Option<u16>,
    pub error: String,
    pub wait: Duration,
}

/// What answers: a model behind an API, or one that needs none.
pub(crate) enum Protocol {
    /// A provider's API, in its wire protocol.
    Api(ApiClient),
    Oracle,
    /// Answers at once, without a tool call: changes nothing.
    Noop,
    Replay(ReplayStore),
    /// Another agent's patches, each put in by its task's rule set
    /// (`--grading`, else the task's format's).
    Predictions {
        file: Arc<PredictionFile>,
        grading: Option<Rules>,
    },
}

/// A model: a protocol, and how the run reaches it.
pub(crate) struct ModelClient {
    protocol: Protocol,
    retry: RetryPolicy,
    gate: Gate,
    price: Option<Price>,
    health: std::sync::Mutex<Health>,
}

/// How many tasks in a row must end on the same refusal, before the API
/// ever answered, for the run to stop: one could be a fluke of that task,
/// three with the same words are the endpoint.
pub(crate) const REFUSALS_TO_STOP: usize = 3;

/// What the run has seen of the API so far, to stop a run against an
/// endpoint that refuses everything instead of failing every task in turn.
#[derive(Debug, Default)]
struct Health {
    /// Some call got an answer (or an answer about the conversation, such
    /// as a context overflow): the endpoint works.
    answered: bool,
    /// The last error a task ended on, and how many tasks in a row ended on
    /// exactly that error.
    last_refusal: Option<String>,
    refusals: usize,
}

impl ModelClient {
    pub(crate) fn new(
        protocol: Protocol,
        retry: RetryPolicy,
        gate: Gate,
        price: Option<Price>,
    ) -> ModelClient {
        ModelClient {
            protocol,
            retry,
            gate,
            price,
            health: std::sync::Mutex::new(Health::default()),
        }
    }

    /// The URL and model of an API model, for messages about it.
    pub(crate) fn endpoint(&self) -> Option<String> {
        match &self.protocol {
            Protocol::Api(client) => Some(client.url().to_owned()),
            Protocol::Oracle
            | Protocol::Noop
            | Protocol::Replay(_)
            | Protocol::Predictions { .. } => None,
        }
    }

    /// One cheap request before any task starts (see `http::preflight`):
    /// an error only when the API surely cannot be used.
    pub(crate) async fn preflight(&self) -> Result<(), ModelError> {
        match &self.protocol {
            Protocol::Api(client) => client.preflight().await,
            Protocol::Oracle
            | Protocol::Noop
            | Protocol::Replay(_)
            | Protocol::Predictions { .. } => Ok(()),
        }
    }

    /// The error on which the last [`REFUSALS_TO_STOP`] tasks in a row
    /// ended, when no call of the run ever got an answer: the endpoint
    /// refuses the run (a wrong URL, key or model name), and every task
    /// still to start would end the same way.
    pub(crate) fn refused_run(&self) -> Option<String> {
        let health = self.health.lock().unwrap_or_else(PoisonError::into_inner);
        (!health.answered && health.refusals >= REFUSALS_TO_STOP)
            .then(|| health.last_refusal.clone())
            .flatten()
    }

    /// Notes how a task's model call ended, for [`ModelClient::refused_run`].
    /// A timeout is never a refusal: a slow model is not a broken one.
    fn note(&self, result: &Result<ModelReply, ModelError>) {
        // The oracle, noop and replay make no call: their errors are the
        // task's or the recording's.
        if !matches!(self.protocol, Protocol::Api(_)) {
            return;
        }
        let mut health = self.health.lock().unwrap_or_else(PoisonError::into_inner);
        match result {
            Ok(_) | Err(ModelError::ContextOverflow(_)) => health.answered = true,
            Err(ModelError::RecordingEnded { .. }) => {}
            Err(err) if err.is_timeout() => {
                health.last_refusal = None;
                health.refusals = 0;
            }
            Err(err) => {
                let error = err.to_string();
                if health.last_refusal.as_deref() == Some(error.as_str()) {
                    health.refusals += 1;
                } else {
                    health.last_refusal = Some(error);
                    health.refusals = 1;
                }
            }
        }
    }

    pub(crate) fn noop() -> ModelClient {
        ModelClient::new(
            Protocol::Noop,
            RetryPolicy::new(0, Duration::ZERO),
            Gate::new(1),
            Some(Price::FREE),
        )
    }

    pub(crate) fn oracle() -> ModelClient {
        ModelClient::new(
            Protocol::Oracle,
            RetryPolicy::new(0, Duration::ZERO),
            Gate::new(1),
            Some(Price::FREE),
        )
    }

    /// Answers with each task's prediction; costs nothing.
    pub(crate) fn predictions(file: Arc<PredictionFile>, grading: Option<Rules>) -> ModelClient {
        ModelClient::new(
            Protocol::Predictions { file, grading },
            RetryPolicy::new(0, Duration::ZERO),
            Gate::new(1),
            Some(Price::FREE),
        )
    }

    /// A model behind an API: its provider's protocol, behind the run's
    /// retries, gate and price.
    pub(crate) fn api(api: &ApiModel) -> Result<ModelClient, reqwest::Error> {
        Ok(ModelClient::new(
            Protocol::Api(ApiClient::new(api)?),
            RetryPolicy::new(api.max_retries, api.retry_delay),
            Gate::new(api.max_connections),
            api.price,
        ))
    }

    /// Plays back a recorded run; costs nothing.
    pub(crate) fn replay(store: ReplayStore) -> ModelClient {
        ModelClient::new(
            Protocol::Replay(store),
            RetryPolicy::new(0, Duration::ZERO),
            Gate::new(1),
            None,
        )
    }

    /// `openai`, `anthropic`, `openai-responses`, `oracle`, `noop`,
    /// `replay` or `predictions`: recorded in
    /// the trajectory header.
    pub(crate) fn provider(&self) -> &'static str {
        match self.protocol {
            Protocol::Api(ref client) => client.provider(),
            Protocol::Oracle => "oracle",
            Protocol::Noop => "noop",
            Protocol::Replay(_) => "replay",
            Protocol::Predictions { .. } => "predictions",
        }
    }

    /// Whether the system prompt travels apart from the messages
    /// (Anthropic's `system`, Responses' `instructions`).
    pub(crate) fn system_apart(&self) -> bool {
        self.format() != Wire::Chat
    }

    /// Whether messages are in Anthropic's format (its own client, or a
    /// replay of a run that used it).
    fn speaks_anthropic(&self) -> bool {
        self.format() == Wire::Messages
    }

    /// The format of the messages: the protocol's own, or a replayed run's.
    fn format(&self) -> Wire {
        match &self.protocol {
            Protocol::Api(client) => client.wire(),
            Protocol::Replay(store) => store.format,
            Protocol::Oracle | Protocol::Noop | Protocol::Predictions { .. } => Wire::Chat,
        }
    }

    /// The recorded output of a tool call, when replaying.
    pub(crate) fn recorded_output(
        &self,
        task: &TaskSpec,
        epoch: u32,
        tool_call_id: &str,
    ) -> Option<String> {
        match &self.protocol {
            Protocol::Replay(store) => store
                .recording(&task.id, epoch)
                .ok()?
                .output_of(tool_call_id)
                .map(str::to_owned),
            _ => None,
        }
    }

    /// The first messages of a task, in the protocol's format.
    pub(crate) fn initial_messages(&self, prompt: &RenderedPrompt) -> Vec<Value> {
        if self.system_apart() {
            return anthropic_user(&prompt.instance);
        }
        vec![
            serde_json::json!({"role": "system", "content": prompt.system}),
            serde_json::json!({"role": "user", "content": prompt.instance}),
        ]
    }

    /// The answers to one reply's tool calls, in order, as the messages the
    /// protocol wants: one `tool` message per call (OpenAI), one user
    /// message of `tool_result` blocks (Anthropic), or one
    /// `function_call_output` item per call (Responses).
    pub(crate) fn tool_results(&self, results: &[(String, String)]) -> Vec<Value> {
        if self.speaks_anthropic() {
            return AnthropicClient::tool_results(results);
        }
        if self.format() == Wire::Responses {
            return ResponsesClient::tool_results(results);
        }
        results
            .iter()
            .map(|(id, content)| {
                serde_json::json!({"role": "tool", "tool_call_id": id, "content": content})
            })
            .collect()
    }

    /// The request's fields other than `messages` (and `system`), for the
    /// trajectory.
    pub(crate) fn request_template(&self) -> Value {
        match &self.protocol {
            Protocol::Api(client) => client.request_template(),
            Protocol::Oracle
            | Protocol::Noop
            | Protocol::Replay(_)
            | Protocol::Predictions { .. } => serde_json::json!({}),
        }
    }

    /// What `usage` cost in USD, when the price is known.
    pub(crate) fn cost(&self, usage: &Usage) -> Option<f64> {
        self.price.map(|price| price.cost(usage))
    }

    /// Asks for the next answer given the whole history, retrying what is
    /// worth retrying; `on_retry` hears of each retry before its wait.
    pub(crate) async fn complete(
        &self,
        task: &TaskSpec,
        epoch: u32,
        system: &str,
        messages: &[Value],
        on_retry: &mut (dyn FnMut(&RetryNote) + Send),
    ) -> Result<ModelReply, ModelError> {
        let result = self
            .complete_with_retries(task, epoch, system, messages, on_retry)
            .await;
        self.note(&result);
        result
    }

    async fn complete_with_retries(
        &self,
        task: &TaskSpec,
        epoch: u32,
        system: &str,
        messages: &[Value],
        on_retry: &mut (dyn FnMut(&RetryNote) + Send),
    ) -> Result<ModelReply, ModelError> {
        let mut retry = 0;
        // The error of the try before and how many tries in a row gave that
        // very answer, to tell a refusal (the same answer again) from an
        // overload.
        let mut previous: Option<ModelError> = None;
        let mut in_a_row = 0;
        loop {
            let result = {
                let _slot = self.gate.enter().await;
                match &self.protocol {
                    Protocol::Api(client) => client.complete(system, messages).await,
                    Protocol::Oracle => return oracle::complete(task, messages),
                    Protocol::Noop => return Ok(oracle::nothing()),
                    Protocol::Predictions { file, grading } => {
                        return predictions::complete(file, *grading, task, messages);
                    }
                    Protocol::Replay(store) => {
                        let recording = store
                            .load(&task.id, epoch)
                            .await
                            .map_err(|err| ModelError::Malformed(err.to_string()))?;
                        let answered = messages
                            .iter()
                            .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
                            .count();
                        return store.answer(&recording, answered);
                    }
                }
            };
            let err = match result {
                Ok(reply) => return Ok(reply),
                Err(err) => err,
            };
            in_a_row = match &previous {
                Some(before) if err.same_answer(before) => in_a_row + 1,
                _ => 1,
            };
            if err.refused(in_a_row) {
                return Err(err.into_repeated(in_a_row));
            }
            if !err.is_retryable() || retry >= self.retry.max_retries {
                return Err(err);
            }
            retry += 1;
            let wait = self.retry.delay(retry, &err);
            // A rate limit is about the whole run: every task waits.
            if matches!(err.status(), Some(429)) {
                self.gate.pause_all(wait).await;
            }
            on_retry(&RetryNote {
                retry,
                status: err.status(),
                error: err.to_string(),
                wait,
            });
            tokio::time::sleep(wait).await;
            previous = Some(err);
        }
    }
}

fn anthropic_user(text: &str) -> Vec<Value> {
    vec![serde_json::json!({"role": "user", "content": text})]
}
