//! The HTTP side shared by the model protocols: one client per run with
//! the request timeout, sending a request, and turning an error answer
//! (status, `Retry-After`, the server's message, a context-window error in
//! any dialect) or a lost connection into a [`ModelError`].

use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::agent::types::ModelError;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the preflight request may take before the run goes on without
/// its answer: a server busy with other work is not a dead one.
const PREFLIGHT_TIMEOUT: Duration = Duration::from_secs(30);
/// How a [`ModelError::Transport`] message starts when no connection could
/// be made at all (refused, no route, no such host).
const COULD_NOT_CONNECT: &str = "could not connect";
/// How a [`ModelError::Transport`] message starts when the call timed out.
pub(crate) const TIMED_OUT: &str = "timed out";
/// How much of an unparseable error body goes into a message.
const MAX_ERROR_BODY_CHARS: usize = 500;

/// The HTTP client of a model: one per run, so connections are reused.
pub(crate) fn client(request_timeout: Duration) -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .timeout(request_timeout)
        .connect_timeout(CONNECT_TIMEOUT)
        .user_agent(concat!("onebash/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// Sends a request; the body of a successful answer, or what went wrong.
pub(crate) async fn send(request: reqwest::RequestBuilder) -> Result<String, ModelError> {
    let response = request.send().await.map_err(transport_error)?;
    let status = response.status();
    let wait = retry_after(response.headers());
    let text = response.text().await.map_err(transport_error)?;
    if !status.is_success() {
        return Err(http_error(status.as_u16(), &text, wait));
    }
    Ok(text)
}

/// One cheap request (a list of models) before any task starts, to find an
/// API that cannot be used at all: nothing listens at the address, or the
/// key is refused (401, 403). Every other answer, a timeout included, says
/// nothing sure (a server without a models list, a busy one) and lets the
/// run go on.
pub(crate) async fn preflight(request: reqwest::RequestBuilder) -> Result<(), ModelError> {
    match send(request.timeout(PREFLIGHT_TIMEOUT)).await {
        Err(
            err @ ModelError::Http {
                status: 401 | 403, ..
            },
        ) => Err(err),
        Err(ModelError::Transport(message)) if message.starts_with(COULD_NOT_CONNECT) => {
            Err(ModelError::Transport(message))
        }
        Ok(_) | Err(_) => Ok(()),
    }
}

/// The `Retry-After` header, as seconds or an HTTP date.
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    parse_retry_after(value, SystemTime::now())
}

pub(crate) fn transport_error(err: reqwest::Error) -> ModelError {
    let kind = if err.is_timeout() {
        TIMED_OUT
    } else if err.is_connect() {
        COULD_NOT_CONNECT
    } else {
        "the connection failed"
    };
    // reqwest's Display hides the cause; the chain says what happened.
    let mut message = format!("{kind}: {err}");
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    ModelError::Transport(message)
}

/// An error status: the server's message and the name it gave the error,
/// from the usual `{"error": {"message", "type", "code"}}` (OpenAI,
/// Anthropic, vLLM, llama.cpp, LiteLLM's proxy, Ollama's `/v1`), Ollama's
/// `{"error": "..."}`, TGI's `{"error": "...", "error_type": ...}`, older
/// vLLM's top-level `{"object": "error", "message", "type"}` or FastAPI's
/// `{"detail": "..."}`; else the start of the body.
pub(crate) fn http_error(status: u16, body: &str, retry_after: Option<Duration>) -> ModelError {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let (message, kind) = match &parsed {
        Some(value) => read_error(value),
        None => (None, None),
    };
    let message = message.unwrap_or_else(|| body.chars().take(MAX_ERROR_BODY_CHARS).collect());
    if is_context_overflow(status, kind.as_deref(), &message) {
        return ModelError::ContextOverflow(message);
    }
    ModelError::Http {
        status,
        message,
        kind,
        retry_after,
    }
}

/// The message and the error's name in an error body, each when it has one.
fn read_error(value: &Value) -> (Option<String>, Option<String>) {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    let error = value.get("error");
    let message = text(error.and_then(|e| e.get("message")))
        .or_else(|| text(error))
        .or_else(|| text(value.get("message")))
        .or_else(|| text(value.get("detail")));
    // OpenAI names the error in `code` (or `type`), Anthropic and llama.cpp
    // in `type`, TGI beside the message in `error_type`; an Anthropic body's
    // top-level `type` is always "error" and says nothing.
    let kind = text(error.and_then(|e| e.get("code")))
        .or_else(|| text(error.and_then(|e| e.get("type"))))
        .or_else(|| text(value.get("error_type")))
        .or_else(|| text(value.get("type")).filter(|t| t != "error"));
    (message, kind)
}

/// Whether an error answer says the conversation is too long for the
/// model, in the words of OpenAI, vLLM, llama.cpp, Ollama or Anthropic.
fn is_context_overflow(status: u16, code: Option<&str>, message: &str) -> bool {
    if !matches!(status, 400 | 413 | 422) {
        return false;
    }
    if matches!(
        code,
        Some("context_length_exceeded" | "exceed_context_size_error")
    ) {
        return true;
    }
    let message = message.to_ascii_lowercase();
    [
        "maximum context length",
        "context length exceeded",
        "context_length_exceeded",
        "exceeds the available context size",
        "exceed context limit",
        "longer than the maximum model length",
        "prompt is too long",
        "context window",
    ]
    .iter()
    .any(|needle| message.contains(needle))
}

/// Parses a `Retry-After` value: seconds, or an HTTP date (RFC 9110
/// IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`).
fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds));
    }
    let at = parse_http_date(value)?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

fn parse_http_date(value: &str) -> Option<SystemTime> {
    // "Sun, 06 Nov 1994 08:49:37 GMT"
    let rest = value.split_once(", ")?.1;
    let mut parts = rest.split_whitespace();
    let day: i64 = parts.next()?.parse().ok()?;
    let month = match parts.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: i64 = parts.next()?.parse().ok()?;
    let mut clock = parts.next()?.split(':').map(|p| p.parse::<i64>().ok());
    let (h, m, s) = (clock.next()??, clock.next()??, clock.next()??);
    if parts.next()? != "GMT" || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 {
        return None;
    }
    let seconds = days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + s;
    let seconds = u64::try_from(seconds).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_seconds_and_http_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_770);
        assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after(" 0.5 ", now),
            Some(Duration::from_millis(500))
        );
        // 784111777 is Sun, 06 Nov 1994 08:49:37 GMT.
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now),
            Some(Duration::from_secs(7))
        );
        // A date in the past means now.
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:00 GMT", now),
            Some(Duration::ZERO)
        );
        for bad in [
            "",
            "-1",
            "soon",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 25:00:00 GMT",
        ] {
            assert_eq!(parse_retry_after(bad, now), None, "{bad}");
        }
    }

    #[test]
    fn context_overflow_in_every_dialect() {
        let cases = [
            (400, Some("context_length_exceeded"), "anything"),
            (
                400,
                None,
                "This model's maximum context length is 32768 tokens. However, you requested 40000 tokens",
            ),
            (
                400,
                None,
                "The decoder prompt (length 9000) is longer than the maximum model length of 8192.",
            ),
            (
                400,
                Some("exceed_context_size_error"),
                "the request exceeds the available context size, try increasing it",
            ),
            (
                400,
                None,
                "prompt is too long: 208310 tokens > 200000 maximum",
            ),
            (
                400,
                None,
                "input length and `max_tokens` exceed context limit: 199000 + 8192 > 200000",
            ),
        ];
        for (status, code, message) in cases {
            assert!(is_context_overflow(status, code, message), "{message}");
        }
        assert!(!is_context_overflow(400, None, "invalid model"));
        assert!(!is_context_overflow(500, None, "maximum context length"));
    }
}
