//! How a task ended, the types every layer shares: [`Status`] (serialized
//! as docs/results.md's words), and the agent phase's [`Usage`] (token
//! counts) and [`ExitReason`]. A leaf: it imports nothing of the crate.
//! The protocols and the loop produce `Usage` and `ExitReason`, the runner
//! the `Status`; the trajectory, the CSV row and the reports record them.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    Passed,
    Failed,
    /// The harness, the API or the task's own setup failed: no verdict.
    Error,
}

impl Status {
    /// The CSV word.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::Failed => "failed",
            Status::Error => "error",
        }
    }
}

/// Token counts of one model call, or summed over a task.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Usage {
    /// Every input token, cached reads and cache writes included.
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    /// Input tokens read from the provider's prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_tokens: u64,
    /// Input tokens written to the prompt cache (Anthropic).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    /// Output tokens the model spent reasoning (part of
    /// `completion_tokens`, as every API counts them).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.total_tokens += other.total_tokens;
        self.cached_tokens += other.cached_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
    }
}

/// Why the agent phase ended; serialized as docs/results.md's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitReason {
    Completed,
    MaxTurns,
    MaxTokens,
    MaxCost,
    TaskTimeout,
    Length,
    ContextOverflow,
    ApiError,
    CheckoutError,
    SetupError,
    Interrupted,
    /// `--model predictions:FILE`: the task's prediction is empty or
    /// null; nothing ran, and it counts as unresolved (status `failed`).
    EmptyPatch,
    /// `--model predictions:FILE`: the prediction's patch applies in no
    /// way its rule set tries; not graded (status `error`), as SWE-bench
    /// counts an error instance.
    PatchError,
    /// onebash itself failed (a bug): the row says so rather than vanish.
    InternalError,
}

impl ExitReason {
    /// Whether the agent's work can be graded: the phase ended for a reason
    /// that says something about the model, not about the harness or API.
    pub fn is_gradable(self) -> bool {
        !matches!(
            self,
            ExitReason::ApiError
                | ExitReason::CheckoutError
                | ExitReason::SetupError
                | ExitReason::Interrupted
                | ExitReason::PatchError
                | ExitReason::InternalError
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ExitReason::Completed => "completed",
            ExitReason::MaxTurns => "max_turns",
            ExitReason::MaxTokens => "max_tokens",
            ExitReason::MaxCost => "max_cost",
            ExitReason::TaskTimeout => "task_timeout",
            ExitReason::Length => "length",
            ExitReason::ContextOverflow => "context_overflow",
            ExitReason::ApiError => "api_error",
            ExitReason::CheckoutError => "checkout_error",
            ExitReason::SetupError => "setup_error",
            ExitReason::Interrupted => "interrupted",
            ExitReason::EmptyPatch => "empty_patch",
            ExitReason::PatchError => "patch_error",
            ExitReason::InternalError => "internal_error",
        }
    }
}
