//! What every request of an API model sends besides the conversation:
//! [`RequestSettings`] (sampling, output cap, reasoning effort, extra
//! fields, thinking), as `--temperature` and its kin give them and run.json
//! records them. A leaf the protocol files import.

use std::time::Duration;

use serde::Serialize;

/// `--reasoning-effort`: how hard a reasoning model thinks, in OpenAI's
/// words (Chat Completions' `reasoning_effort`, Responses' `reasoning.effort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningEffort {
    Minimal,
    Low,
    Medium,
    High,
}

/// Sampling and request settings sent with every call, recorded in run.json.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct RequestSettings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// `--model-arg KEY=JSON`: added to the request body as given.
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub extra: serde_json::Map<String, serde_json::Value>,
    #[serde(serialize_with = "seconds")]
    pub request_timeout: Duration,
    /// Anthropic: prompt-cache breakpoints in each request (on unless
    /// `--no-prompt-cache`).
    pub prompt_cache: bool,
    /// Anthropic: `--thinking-budget`, extended thinking's budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u64>,
    /// Anthropic: `--interleaved-thinking`, the beta header sent.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interleaved_thinking: bool,
}

/// A duration as run.json writes it: seconds, fractions allowed.
pub(crate) fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}
