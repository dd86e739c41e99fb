//! [`ResultRow`], one per (task, epoch), with the CSV columns in order
//! ([`COLUMNS`]), and the cell helpers.

use serde::{Deserialize, Serialize};

use crate::task::TaskId;

use super::outcome::{ExitReason, Status};

/// One row of results.csv; fields in docs/results.md's column order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ResultRow {
    pub task_id: TaskId,
    pub epoch: u32,
    pub model: String,
    pub prompt: String,
    pub status: Status,
    pub exit_reason: ExitReason,
    pub passed: bool,
    pub turns: u32,
    pub tool_calls: u32,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    pub cost_usd: Option<f64>,
    pub agent_seconds: f64,
    pub test_seconds: Option<f64>,
    pub wall_seconds: f64,
    pub test_exit_code: Option<i32>,
    pub error: String,
    /// Model calls retried (429, 5xx, lost connections...).
    pub model_retries: u32,
    /// Seconds spent waiting before those retries.
    pub retry_wait_seconds: f64,
    /// Replaying: commands whose output differs from the recording.
    #[serde(default)]
    pub replay_divergences: u32,
    /// The agent's commands that probed the repo's history past the base
    /// or fetched the project's source (`audit`). `None`: the row comes
    /// from a results.csv written before the column existed.
    #[serde(default)]
    pub history_probes: Option<u32>,
    /// The reward a Harbor task's verifier wrote (1 passes; fractions
    /// are kept as they are); empty for other tasks.
    #[serde(default)]
    pub reward: Option<f64>,
    /// Output tokens spent reasoning, part of `completion_tokens`, where
    /// the API counts them apart (OpenAI; Anthropic bills thinking as
    /// output without a count). 0 in rows from before the column.
    #[serde(default)]
    pub reasoning_tokens: u64,
    /// Input tokens read from the provider's prompt cache, part of
    /// `prompt_tokens`.
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// Input tokens written to the prompt cache (Anthropic), part of
    /// `prompt_tokens`: they cost more than plain input, so the cost is
    /// not known from the reads alone.
    #[serde(default)]
    pub cache_write_tokens: u64,
}

impl ResultRow {
    /// A row with nothing counted yet: status `error`, no turns, tokens or
    /// times. A task fills it in as its stages end; one that never got far
    /// keeps it as it is.
    pub(crate) fn blank(
        task_id: TaskId,
        epoch: u32,
        model: String,
        prompt: String,
        exit_reason: ExitReason,
    ) -> ResultRow {
        ResultRow {
            task_id,
            epoch,
            model,
            prompt,
            status: Status::Error,
            exit_reason,
            passed: false,
            turns: 0,
            tool_calls: 0,
            prompt_tokens: 0,
            completion_tokens: 0,
            total_tokens: 0,
            cost_usd: None,
            agent_seconds: 0.0,
            test_seconds: None,
            wall_seconds: 0.0,
            test_exit_code: None,
            error: String::new(),
            model_retries: 0,
            retry_wait_seconds: 0.0,
            replay_divergences: 0,
            history_probes: Some(0),
            reward: None,
            reasoning_tokens: 0,
            cached_input_tokens: 0,
            cache_write_tokens: 0,
        }
    }
}

/// Rounds seconds to milliseconds for the CSV.
pub(crate) fn round_seconds(seconds: f64) -> f64 {
    (seconds * 1000.0).round() / 1000.0
}

/// Makes an error message fit one CSV cell on one line.
pub(crate) fn one_line(message: &str) -> String {
    let joined = message.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() > 1000 {
        let cut: String = joined.chars().take(1000).collect();
        format!("{cut}...")
    } else {
        joined
    }
}

/// The CSV header, in docs/results.md's order.
pub(crate) const COLUMNS: &[&str] = &[
    "task_id",
    "epoch",
    "model",
    "prompt",
    "status",
    "exit_reason",
    "passed",
    "turns",
    "tool_calls",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "cost_usd",
    "agent_seconds",
    "test_seconds",
    "wall_seconds",
    "test_exit_code",
    "error",
    "model_retries",
    "retry_wait_seconds",
    "replay_divergences",
    "history_probes",
    "reward",
    "reasoning_tokens",
    "cached_input_tokens",
    "cache_write_tokens",
];
