//! Retries of model calls, and the gate all tasks of a run pass through to
//! reach the model API.
//!
//! Owns the backoff (exponential with jitter, or the server's
//! `Retry-After`), which errors are worth another try, and [`Gate`]: at
//! most `--max-connections` calls at once for the whole run, and a shared
//! pause when the server says 429, so the run slows down as one instead of
//! every task hammering the API on its own.

use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, SystemTime};

use tokio::sync::{Mutex, Semaphore, SemaphorePermit};
use tokio::time::Instant;

use crate::agent::http::TIMED_OUT;
use crate::agent::types::ModelError;

/// How a run retries model calls.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Tries after the first; `--max-retries`.
    pub max_retries: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl RetryPolicy {
    pub fn new(max_retries: u32, base_delay: Duration) -> RetryPolicy {
        RetryPolicy {
            max_retries,
            base_delay,
            max_delay: Duration::from_secs(60).max(base_delay),
        }
    }

    /// How long to wait before try number `retry` (1-based): the server's
    /// `Retry-After` when it gave one (capped at ten minutes), else
    /// `base * 2^(retry-1)` capped at `max_delay`, with jitter taking it down
    /// to as little as half, so that tasks that failed together do not come
    /// back together.
    pub fn delay(&self, retry: u32, error: &ModelError) -> Duration {
        if let Some(after) = error.retry_after() {
            return after.min(Duration::from_secs(600));
        }
        let exponential = self
            .base_delay
            .saturating_mul(1u32 << (retry.saturating_sub(1)).min(16))
            .min(self.max_delay);
        exponential.mul_f64(0.5 + 0.5 * random_unit())
    }
}

impl ModelError {
    /// Whether the same request may succeed if sent again: rate limits,
    /// server errors, lost connections, timeouts, garbled answers. Never a
    /// client error (400, 401, 403, 404...): the answer would be the same.
    pub fn is_retryable(&self) -> bool {
        match self {
            ModelError::Http { status, .. } => {
                matches!(*status, 408 | 409 | 425 | 429) || (*status >= 500 && *status != 501)
            }
            ModelError::Transport(_) | ModelError::Malformed(_) => true,
            ModelError::ContextOverflow(_)
            | ModelError::Repeated { .. }
            | ModelError::RecordingEnded { .. } => false,
        }
    }

    /// Whether this error, answered to the same request right after
    /// `before`, shows a server that refuses the request rather than one
    /// that is overloaded: the same status and the same message, a status
    /// that does not mean load (500 and the like, not 429, 502, 503, 504,
    /// 529 or a timeout), no `Retry-After`, and no word of load or of
    /// trying again in the message. Such a refusal (llama-cpp-python's
    /// server answers a request it cannot validate with a 500) would be the
    /// same on every try, so retrying it only burns the backoff.
    pub fn repeats(&self, before: &ModelError) -> bool {
        let (
            ModelError::Http {
                status,
                message,
                retry_after: None,
            },
            ModelError::Http {
                status: status_before,
                message: message_before,
                ..
            },
        ) = (self, before)
        else {
            return false;
        };
        status == status_before
            && message == message_before
            && *status >= 500
            && !matches!(*status, 502 | 503 | 504 | 529)
            && !speaks_of_load(message)
    }

    /// A call that got no answer in time: the server may only be slow.
    pub fn is_timeout(&self) -> bool {
        match self {
            ModelError::Transport(message) => message.starts_with(TIMED_OUT),
            ModelError::Http { status, .. } => matches!(*status, 408 | 504),
            _ => false,
        }
    }

    /// A [`ModelError::Http`] as a [`ModelError::Repeated`]; anything else as it is.
    pub fn into_repeated(self) -> ModelError {
        match self {
            ModelError::Http {
                status, message, ..
            } => ModelError::Repeated { status, message },
            other => other,
        }
    }
}

/// Whether an error message says the server is busy, out of capacity or
/// asks to be tried again: then its repeating says nothing of the request.
fn speaks_of_load(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    [
        "overload",
        "capacity",
        "rate limit",
        "too many",
        "try again",
        "retry",
        "unavailable",
        "busy",
        "timeout",
        "timed out",
        "temporar",
        "exhausted",
        "out of memory",
    ]
    .iter()
    .any(|word| message.contains(word))
}

/// A uniform random number in [0, 1), from the standard library's randomly
/// seeded hasher: jitter needs no better randomness than that.
fn random_unit() -> f64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// What every model call of a run passes through.
#[derive(Debug)]
pub struct Gate {
    slots: Semaphore,
    /// No call starts before this instant: set by rate limits.
    paused_until: Mutex<Option<Instant>>,
}

impl Gate {
    pub fn new(max_connections: usize) -> Gate {
        Gate {
            slots: Semaphore::new(max_connections.max(1)),
            paused_until: Mutex::new(None),
        }
    }

    /// Waits for a free connection and for any shared pause to end.
    pub async fn enter(&self) -> Option<SemaphorePermit<'_>> {
        loop {
            let pause = *self.paused_until.lock().await;
            if let Some(until) = pause
                && until > Instant::now()
            {
                tokio::time::sleep_until(until).await;
                continue;
            }
            let permit = self.slots.acquire().await.ok()?;
            // A pause may have begun while we waited for the slot.
            let pause = *self.paused_until.lock().await;
            if pause.is_some_and(|until| until > Instant::now()) {
                drop(permit);
                continue;
            }
            return Some(permit);
        }
    }

    /// Holds every task's next call until `wait` from now (rate limited).
    pub async fn pause_all(&self, wait: Duration) {
        let until = Instant::now() + wait;
        let mut paused = self.paused_until.lock().await;
        if paused.is_none_or(|current| current < until) {
            *paused = Some(until);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_errors_are_retried() {
        let http = |status| ModelError::Http {
            status,
            message: String::new(),
            retry_after: None,
        };
        for status in [429, 500, 502, 503, 504, 529, 408] {
            assert!(http(status).is_retryable(), "{status}");
        }
        for status in [400, 401, 403, 404, 422, 501] {
            assert!(!http(status).is_retryable(), "{status}");
        }
        assert!(ModelError::Transport("reset".into()).is_retryable());
        assert!(ModelError::Malformed("not json".into()).is_retryable());
        assert!(!ModelError::ContextOverflow("too long".into()).is_retryable());
    }

    #[test]
    fn the_same_refusal_twice_is_not_retried_but_an_overload_is() {
        let http = |status, message: &str, retry_after| ModelError::Http {
            status,
            message: message.to_owned(),
            retry_after,
        };
        let validation = "1 validation error: messages.2.content: Input should be a valid string";
        let refusal = http(500, validation, None);
        assert!(refusal.repeats(&refusal.clone()));
        assert!(http(505, "no", None).repeats(&http(505, "no", None)));
        // Not the same answer: a server that fails in changing ways may be
        // in trouble, and is tried again.
        assert!(!refusal.repeats(&http(500, "another error", None)));
        assert!(!refusal.repeats(&http(502, validation, None)));
        assert!(!refusal.repeats(&ModelError::Transport("reset".into())));
        // Overloads repeat themselves too and are still retried.
        for status in [502, 503, 504, 529] {
            assert!(
                !http(status, "x", None).repeats(&http(status, "x", None)),
                "{status}"
            );
        }
        for message in [
            "The server is overloaded, please try again later",
            "Service Unavailable",
            "model busy",
            "upstream request timeout",
            "Resource has been exhausted (e.g. check quota).",
        ] {
            assert!(
                !http(500, message, None).repeats(&http(500, message, None)),
                "{message}"
            );
        }
        let later = http(500, "x", Some(Duration::from_secs(1)));
        assert!(
            !later.repeats(&later.clone()),
            "a Retry-After asks for another try"
        );
        // Client errors are never retried in the first place.
        assert!(!http(400, "bad", None).is_retryable());

        let repeated = refusal.into_repeated();
        assert!(!repeated.is_retryable());
        assert_eq!(repeated.status(), Some(500));
        assert!(repeated.to_string().contains(validation), "{repeated}");
        assert!(
            repeated.to_string().contains("HTTP 500 twice"),
            "{repeated}"
        );
    }

    #[test]
    fn backoff_grows_with_jitter_and_honours_retry_after() {
        let policy = RetryPolicy::new(10, Duration::from_secs(1));
        let plain = ModelError::Transport("x".into());
        for retry in 1..=8 {
            let full = Duration::from_secs(1 << (retry - 1)).min(Duration::from_secs(60));
            let delay = policy.delay(retry, &plain);
            assert!(delay >= full / 2 && delay <= full, "{retry}: {delay:?}");
        }
        let limited = ModelError::Http {
            status: 429,
            message: String::new(),
            retry_after: Some(Duration::from_secs(3)),
        };
        assert_eq!(policy.delay(1, &limited), Duration::from_secs(3));
    }

    #[tokio::test]
    async fn a_pause_holds_every_caller() {
        let gate = Gate::new(2);
        // The clock starts before the pause, and timers never fire early,
        // so however the thread is scheduled the wait is at least the pause.
        let started = std::time::Instant::now();
        gate.pause_all(Duration::from_millis(200)).await;
        let permit = gate.enter().await;
        assert!(permit.is_some());
        assert!(
            started.elapsed() >= Duration::from_millis(200),
            "{:?}",
            started.elapsed()
        );
    }
}
