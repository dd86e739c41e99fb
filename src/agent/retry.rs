//! Retries of model calls, and the gate all tasks of a run pass through to
//! reach the model API.
//!
//! Owns the backoff (exponential with jitter, or the server's
//! `Retry-After`), which errors are worth another try, what an error
//! answer says of its request ([`ErrorClass`]: when the same answer again
//! is a refusal and when it is load), and [`Gate`]: at
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
pub(crate) struct RetryPolicy {
    /// Tries after the first; `--max-retries`.
    pub max_retries: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl RetryPolicy {
    pub(crate) fn new(max_retries: u32, base_delay: Duration) -> RetryPolicy {
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
    pub(crate) fn delay(&self, retry: u32, error: &ModelError) -> Duration {
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
    pub(crate) fn is_retryable(&self) -> bool {
        match self {
            ModelError::Http { status, .. } => {
                matches!(*status, 408 | 409 | 425 | 429) || (*status >= 500 && *status != 501)
            }
            ModelError::Transport(_) | ModelError::Malformed(_) => true,
            ModelError::ContextOverflow(_)
            | ModelError::Repeated { .. }
            | ModelError::PatchDoesNotApply(_)
            | ModelError::RecordingEnded { .. } => false,
        }
    }

    /// Whether this error is the very answer `before` was: both HTTP
    /// errors with the same status and the same message.
    pub(crate) fn same_answer(&self, before: &ModelError) -> bool {
        match (self, before) {
            (
                ModelError::Http {
                    status, message, ..
                },
                ModelError::Http {
                    status: status_before,
                    message: message_before,
                    ..
                },
            ) => status == status_before && message == message_before,
            _ => false,
        }
    }

    /// Whether this error, the same answer to the same request `in_a_row`
    /// times in a row (this one included), shows a server that refuses the
    /// request rather than one in trouble: see [`ErrorClass`] for how
    /// many times each kind of answer takes. Such a refusal (llama-cpp-python
    /// answers a request it cannot validate with a 500) would be the same
    /// on every try, so retrying it only burns the backoff.
    pub(crate) fn refused(&self, in_a_row: u32) -> bool {
        self.class()
            .and_then(ErrorClass::stops_after)
            .is_some_and(|times| in_a_row >= times)
    }

    /// What an HTTP error's answer says of the request; `None` for every
    /// other error.
    pub(crate) fn class(&self) -> Option<ErrorClass> {
        match self {
            ModelError::Http {
                status,
                message,
                kind,
                retry_after,
            } => Some(classify(
                *status,
                message,
                kind.as_deref(),
                retry_after.is_some(),
            )),
            _ => None,
        }
    }

    /// A call that got no answer in time: the server may only be slow.
    pub(crate) fn is_timeout(&self) -> bool {
        match self {
            ModelError::Transport(message) => message.starts_with(TIMED_OUT),
            ModelError::Http { status, .. } => matches!(*status, 408 | 504),
            _ => false,
        }
    }

    /// A [`ModelError::Http`] answered `times` times in a row as a
    /// [`ModelError::Repeated`]; anything else as it is.
    pub(crate) fn into_repeated(self, times: u32) -> ModelError {
        match self {
            ModelError::Http {
                status, message, ..
            } => ModelError::Repeated {
                status,
                message,
                times,
            },
            other => other,
        }
    }
}

/// What an error answer shows of the request it answers, read from the
/// status, the server's message and the name it gave the error. The words
/// come from what real servers send: tests/fixtures/model-errors.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorClass {
    /// A request the server will never take: a validation error
    /// (pydantic's "validation error", "Input should be", "Field
    /// required"), an unexpected argument, something not supported. The
    /// same answer twice in a row ends the call.
    Refusal,
    /// Says nothing either way (a bare crash message, an empty body): only
    /// [`UNCLEAR_REPEATS`] identical answers in a row end the call.
    Unclear,
    /// Load or a passing fault of the server (429, 502, 503, 504, 529, a
    /// `Retry-After`, OpenAI's `server_error`, Anthropic's `api_error`,
    /// "Internal server error", "overloaded", "try again"): never a
    /// refusal, retried up to `--max-retries` however often it repeats.
    Load,
}

/// Identical answers in a row that end a call whose answer is a
/// [`ErrorClass::Refusal`].
pub(crate) const REFUSAL_REPEATS: u32 = 2;

/// Identical answers in a row that end a call whose answer is
/// [`ErrorClass::Unclear`]: enough that a server in an incident has had
/// its backoff (1 + 2 + 4 s from the default `--retry-delay`), few enough
/// that a server that fails one request for good does not hold the task
/// through every retry.
pub(crate) const UNCLEAR_REPEATS: u32 = 4;

impl ErrorClass {
    /// How many identical answers in a row end the call; `None`: never.
    pub(crate) fn stops_after(self) -> Option<u32> {
        match self {
            ErrorClass::Refusal => Some(REFUSAL_REPEATS),
            ErrorClass::Unclear => Some(UNCLEAR_REPEATS),
            ErrorClass::Load => None,
        }
    }
}

/// The class of an HTTP error answer. The status decides first: a client
/// error refuses the request (it is never retried at all), but for 408,
/// 409, 425 and 429; those, the gateways' 502, 503 and 504, Anthropic's 529
/// and any answer with a `Retry-After` are load. Otherwise the words
/// decide, and words of refusal win: llama-cpp-python names every error it
/// answers `internal_server_error`, its validation errors too, and
/// LiteLLM's proxy wraps an unexpected argument in
/// `litellm.InternalServerError`.
pub(crate) fn classify(
    status: u16,
    message: &str,
    kind: Option<&str>,
    retry_after: bool,
) -> ErrorClass {
    if retry_after || matches!(status, 408 | 409 | 425 | 429 | 502 | 503 | 504 | 529) {
        return ErrorClass::Load;
    }
    if status < 500 {
        return ErrorClass::Refusal;
    }
    let message = normalized(message);
    if REFUSAL_WORDS.iter().any(|word| message.contains(word)) {
        return ErrorClass::Refusal;
    }
    let load_kind =
        kind.is_some_and(|kind| LOAD_KINDS.contains(&kind.to_ascii_lowercase().as_str()));
    if load_kind || LOAD_WORDS.iter().any(|word| message.contains(word)) {
        return ErrorClass::Load;
    }
    ErrorClass::Unclear
}

/// A message in lowercase with `_` and `-` as spaces, so that
/// `internal_server_error`, `Internal server error` and `server-error`
/// read alike.
fn normalized(message: &str) -> String {
    message
        .chars()
        .map(|c| match c {
            '_' | '-' => ' ',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

/// Words of a request the server will never take, in [`normalized`] form:
/// pydantic's (llama-cpp-python, vLLM, LiteLLM), Python's own for an
/// argument a function does not take, and "not supported" in its forms.
const REFUSAL_WORDS: &[&str] = &[
    "validation error",
    "input should be",
    "field required",
    "extra inputs are not permitted",
    "unexpected keyword argument",
    "not supported",
    "does not support",
    "unsupported",
];

/// Words of load or of a passing server fault, in [`normalized`] form: then
/// an answer's repeating says nothing of the request.
const LOAD_WORDS: &[&str] = &[
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
    "internal server error",
    "internalservererror",
    "server error",
    "server had an error",
    "api error",
];

/// The error names (`type`, `code`, `error_type`), lowercase and whole,
/// that mean a fault of the server and never a refusal: OpenAI's and
/// llama.cpp's server's `server_error`, Anthropic's `api_error` and
/// `overloaded_error`, vLLM's `InternalServerError`, TGI's `overloaded`.
/// Not llama-cpp-python's `internal_server_error`, which names every error
/// it answers.
const LOAD_KINDS: &[&str] = &[
    "server_error",
    "api_error",
    "overloaded_error",
    "internalservererror",
    "overloaded",
];

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
pub(crate) struct Gate {
    slots: Semaphore,
    /// No call starts before this instant: set by rate limits.
    paused_until: Mutex<Option<Instant>>,
}

impl Gate {
    pub(crate) fn new(max_connections: usize) -> Gate {
        Gate {
            slots: Semaphore::new(max_connections.max(1)),
            paused_until: Mutex::new(None),
        }
    }

    /// Waits for a free connection and for any shared pause to end.
    pub(crate) async fn enter(&self) -> Option<SemaphorePermit<'_>> {
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
    pub(crate) async fn pause_all(&self, wait: Duration) {
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

    fn http(
        status: u16,
        message: &str,
        kind: Option<&str>,
        retry_after: Option<Duration>,
    ) -> ModelError {
        ModelError::Http {
            status,
            message: message.to_owned(),
            kind: kind.map(str::to_owned),
            retry_after,
        }
    }

    #[test]
    fn which_errors_are_retried() {
        for status in [429, 500, 502, 503, 504, 529, 408] {
            assert!(http(status, "", None, None).is_retryable(), "{status}");
        }
        for status in [400, 401, 403, 404, 422, 501] {
            assert!(!http(status, "", None, None).is_retryable(), "{status}");
        }
        assert!(ModelError::Transport("reset".into()).is_retryable());
        assert!(ModelError::Malformed("not json".into()).is_retryable());
        assert!(!ModelError::ContextOverflow("too long".into()).is_retryable());
    }

    /// Every body of tests/fixtures/model-errors.json, read as the client
    /// reads it, gives the message and the class the table says.
    #[test]
    fn every_real_error_body_is_classified_as_the_table_says() {
        let table: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/fixtures/model-errors.json"))
                .expect("the table is JSON");
        let errors = table["errors"].as_array().expect("errors");
        let mut servers = std::collections::BTreeSet::new();
        let mut classes = std::collections::BTreeSet::new();
        for entry in errors {
            let field = |name: &str| {
                entry[name]
                    .as_str()
                    .unwrap_or_else(|| panic!("{name}: {entry}"))
            };
            let status = u16::try_from(entry["status"].as_u64().expect("status")).expect("u16");
            let at = format!("{} {status}: {}", field("server"), field("body"));
            assert!(!field("source").is_empty(), "{at}: no source");
            let err = crate::agent::http::http_error(status, field("body"), None);
            let ModelError::Http { message, .. } = &err else {
                panic!("{at}: {err:?}");
            };
            assert_eq!(message, field("message"), "{at}");
            let expected = match field("class") {
                "refusal" => ErrorClass::Refusal,
                "unclear" => ErrorClass::Unclear,
                "load" => ErrorClass::Load,
                other => panic!("{at}: no class {other}"),
            };
            assert_eq!(err.class(), Some(expected), "{at}");
            // What the class means for the same answer again and again.
            let stops = (1..=10).find(|&n| err.is_retryable() && err.refused(n));
            let expected_stop = match expected {
                _ if !err.is_retryable() => None,
                ErrorClass::Refusal => Some(REFUSAL_REPEATS),
                ErrorClass::Unclear => Some(UNCLEAR_REPEATS),
                ErrorClass::Load => None,
            };
            assert_eq!(stops, expected_stop, "{at}");
            servers.insert(field("server").to_owned());
            classes.insert(field("class").to_owned());
        }
        for server in [
            "OpenAI",
            "Anthropic",
            "vLLM",
            "llama-cpp-python",
            "Ollama",
            "LiteLLM proxy",
            "TGI",
        ] {
            assert!(servers.contains(server), "no body of {server}");
        }
        assert_eq!(classes.len(), 3, "{classes:?}");
    }

    #[test]
    fn a_refusal_stops_after_two_identical_answers_and_an_unclear_one_after_four() {
        let validation = "1 validation error: messages.2.content: Input should be a valid string";
        let refusal = http(500, validation, Some("internal_server_error"), None);
        assert_eq!(refusal.class(), Some(ErrorClass::Refusal));
        assert!(!refusal.refused(1));
        assert!(refusal.refused(2));
        let unclear = http(500, "llama_decode returned -1", None, None);
        assert_eq!(unclear.class(), Some(ErrorClass::Unclear));
        assert!(!unclear.refused(3));
        assert!(unclear.refused(4));
        assert!(http(505, "no", None, None).refused(4));

        // Only the very same answer counts as a repeat.
        assert!(refusal.same_answer(&refusal.clone()));
        assert!(!refusal.same_answer(&http(500, "another error", None, None)));
        assert!(!refusal.same_answer(&http(502, validation, None, None)));
        assert!(!refusal.same_answer(&ModelError::Transport("reset".into())));

        // Load repeats itself too and is still retried, however often.
        for status in [502, 503, 504, 529] {
            assert_eq!(
                http(status, validation, None, None).class(),
                Some(ErrorClass::Load),
                "{status}"
            );
        }
        for (message, kind) in [
            ("The server is overloaded, please try again later", None),
            ("Service Unavailable", None),
            ("model busy", None),
            ("upstream request timeout", None),
            ("Resource has been exhausted (e.g. check quota).", None),
            ("Internal server error", Some("api_error")),
            ("Internal Server Error", None),
            (
                "The server had an error while processing your request. Sorry about that!",
                Some("server_error"),
            ),
            ("anything at all", Some("server_error")),
            ("anything at all", Some("InternalServerError")),
        ] {
            let err = http(500, message, kind, None);
            assert_eq!(err.class(), Some(ErrorClass::Load), "{message} {kind:?}");
            assert!(!err.refused(100), "{message}");
        }
        // llama-cpp-python names every error internal_server_error: that
        // alone is no word of load.
        assert_eq!(
            http(500, "boom", Some("internal_server_error"), None).class(),
            Some(ErrorClass::Unclear)
        );
        let later = http(500, validation, None, Some(Duration::from_secs(1)));
        assert_eq!(
            later.class(),
            Some(ErrorClass::Load),
            "a Retry-After asks for another try"
        );
        assert_eq!(ModelError::Transport("reset".into()).class(), None);

        let repeated = refusal.into_repeated(2);
        assert!(!repeated.is_retryable());
        assert_eq!(repeated.status(), Some(500));
        assert!(repeated.to_string().contains(validation), "{repeated}");
        assert!(
            repeated.to_string().contains("HTTP 500 twice"),
            "{repeated}"
        );
        let repeated = unclear.into_repeated(4);
        assert!(
            repeated.to_string().contains("HTTP 500 4 times"),
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
        let limited = http(429, "", None, Some(Duration::from_secs(3)));
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
