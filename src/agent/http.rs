//! The HTTP side shared by the model protocols: one client per run with
//! the request timeout, sending a request, and turning an error answer
//! (status, `Retry-After`, the server's message, a context-window error in
//! any dialect) or a lost connection into a [`ModelError`].

use std::time::Duration;

use serde_json::Value;

use crate::agent::model::{ModelError, is_context_overflow};
use crate::agent::retry::parse_retry_after;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the preflight request may take before the run goes on without
/// its answer: a server busy with other work is not a dead one.
const PREFLIGHT_TIMEOUT: Duration = Duration::from_secs(30);
/// How a [`ModelError::Transport`] message starts when no connection could
/// be made at all (refused, no route, no such host).
const COULD_NOT_CONNECT: &str = "could not connect";
/// How a [`ModelError::Transport`] message starts when the call timed out.
pub const TIMED_OUT: &str = "timed out";
/// How much of an unparseable error body goes into a message.
const MAX_ERROR_BODY_CHARS: usize = 500;

/// The HTTP client of a model: one per run, so connections are reused.
pub fn client(request_timeout: Duration) -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .timeout(request_timeout)
        .connect_timeout(CONNECT_TIMEOUT)
        .user_agent(concat!("onebash/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// Sends a request; the body of a successful answer, or what went wrong.
pub async fn send(request: reqwest::RequestBuilder) -> Result<String, ModelError> {
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
pub async fn preflight(request: reqwest::RequestBuilder) -> Result<(), ModelError> {
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
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    parse_retry_after(value, std::time::SystemTime::now())
}

pub fn transport_error(err: reqwest::Error) -> ModelError {
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

/// An error status: the server's message when it sent the usual
/// `{"error": {"message": ...}}`, else the start of the body.
pub fn http_error(status: u16, body: &str, retry_after: Option<Duration>) -> ModelError {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    let message = error
        .and_then(|e| {
            e.get("message")
                .and_then(Value::as_str)
                .or_else(|| e.as_str())
        })
        .map(str::to_owned)
        .unwrap_or_else(|| body.chars().take(MAX_ERROR_BODY_CHARS).collect());
    // OpenAI names the error in `code`, llama.cpp and Anthropic in `type`.
    let code = error
        .and_then(|e| {
            e.get("code")
                .filter(|c| c.is_string())
                .or_else(|| e.get("type"))
        })
        .and_then(Value::as_str);
    if is_context_overflow(status, code, &message) {
        return ModelError::ContextOverflow(message);
    }
    ModelError::Http {
        status,
        message,
        retry_after,
    }
}
