//! The OpenAI Chat Completions protocol, spoken by OpenAI and by vLLM,
//! llama.cpp, Ollama, OpenRouter and most local servers.
//!
//! Owns the request (model, the whole history, the one `bash` tool), the
//! HTTP call and the parsing of the answer into a [`ModelReply`]. One call is
//! one attempt: retries are `ModelClient::complete`'s.

use std::borrow::Cow;

use serde_json::{Value, json};

use crate::agent::http;
use crate::agent::request::RequestSettings;
use crate::agent::types::{ModelError, ModelReply, ToolCall};
use crate::run_folder::Usage;

pub(crate) struct OpenAiClient {
    endpoint: Endpoint,
}

/// What OpenAI's two protocols (Chat Completions here, Responses in
/// `responses.rs`) share: the HTTP client, the endpoint and the models list
/// beside it, the model, the key sent as a bearer token, the settings.
pub(crate) struct Endpoint {
    http: reqwest::Client,
    url: String,
    models_url: String,
    pub model: String,
    api_key: Option<String>,
    pub settings: RequestSettings,
}

impl Endpoint {
    /// The endpoint `path` (`chat/completions`, `responses`) under `base_url`.
    pub(crate) fn new(
        base_url: &str,
        path: &str,
        model: &str,
        api_key: Option<String>,
        settings: RequestSettings,
    ) -> Result<Endpoint, reqwest::Error> {
        let http = http::client(settings.request_timeout)?;
        let base = base_url.trim_end_matches('/');
        Ok(Endpoint {
            http,
            url: format!("{base}/{path}"),
            models_url: format!("{base}/models"),
            model: model.to_owned(),
            api_key,
            settings,
        })
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// A request body's template with the URL, for the trajectory.
    pub(crate) fn with_url(&self, mut template: serde_json::Map<String, Value>) -> Value {
        template.insert("url".into(), json!(self.url));
        Value::Object(template)
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.api_key {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }

    /// Asks for the list of models: see [`http::preflight`].
    pub(crate) async fn preflight(&self) -> Result<(), ModelError> {
        http::preflight(self.authorized(self.http.get(&self.models_url))).await
    }

    /// Posts `body` to the endpoint; the answer's body, or what went wrong.
    pub(crate) async fn post(&self, body: &impl serde::Serialize) -> Result<String, ModelError> {
        http::send(self.authorized(self.http.post(&self.url).json(body))).await
    }
}

/// The one tool, as the model is told about it.
pub(crate) fn bash_tool_schema() -> Value {
    json!({
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run one bash command in a fresh shell in the root of the repository and return its output (stdout and stderr) and exit code.",
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The bash command to run."}
                },
                "required": ["command"]
            }
        }
    })
}

impl OpenAiClient {
    pub(crate) fn new(
        base_url: &str,
        model: &str,
        api_key: Option<String>,
        settings: RequestSettings,
    ) -> Result<OpenAiClient, reqwest::Error> {
        let endpoint = Endpoint::new(base_url, "chat/completions", model, api_key, settings)?;
        Ok(OpenAiClient { endpoint })
    }

    /// The request body without `messages`.
    fn body_template(&self) -> serde_json::Map<String, Value> {
        let mut body = serde_json::Map::new();
        body.insert("model".into(), json!(self.endpoint.model));
        body.insert("tools".into(), json!([bash_tool_schema()]));
        let s = &self.endpoint.settings;
        let optional = [
            ("temperature", s.temperature.map(|v| json!(v))),
            ("top_p", s.top_p.map(|v| json!(v))),
            ("seed", s.seed.map(|v| json!(v))),
            (
                "max_completion_tokens",
                s.max_output_tokens.map(|v| json!(v)),
            ),
            ("reasoning_effort", s.reasoning_effort.map(|v| json!(v))),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                body.insert(key.into(), value);
            }
        }
        // --model-arg goes in last: it may override anything above.
        body.extend(s.extra.clone());
        body
    }

    pub(crate) fn request_template(&self) -> Value {
        self.endpoint.with_url(self.body_template())
    }

    /// The chat completions URL.
    pub(crate) fn url(&self) -> &str {
        self.endpoint.url()
    }

    /// Asks for the list of models: see [`http::preflight`].
    pub(crate) async fn preflight(&self) -> Result<(), ModelError> {
        self.endpoint.preflight().await
    }

    pub(crate) async fn complete(&self, messages: &[Value]) -> Result<ModelReply, ModelError> {
        let body = RequestBody {
            template: &self.body_template(),
            messages,
        };
        parse_response(&self.endpoint.post(&body).await?)
    }
}

/// A request body: the template's fields and the history, serialized
/// straight to bytes with each message as [`outgoing_message`] makes it, so
/// the history (the bulk of a request) is never copied whole.
struct RequestBody<'a> {
    template: &'a serde_json::Map<String, Value>,
    messages: &'a [Value],
}

impl serde::Serialize for RequestBody<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};

        struct Messages<'a>(&'a [Value]);
        impl serde::Serialize for Messages<'_> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
                for message in self.0 {
                    seq.serialize_element(&outgoing_message(message))?;
                }
                seq.end()
            }
        }

        // `messages` is ours, even when a --model-arg named it too.
        let fields = self.template.iter().filter(|(key, _)| *key != "messages");
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in fields {
            map.serialize_entry(key, value)?;
        }
        map.serialize_entry("messages", &Messages(self.messages))?;
        map.end()
    }
}

/// A message of the history as it is sent back. The history (and the
/// trajectory) keeps each assistant reply exactly as it came; on the wire an
/// assistant message gets `content: ""` where it had `null` or none, and
/// loses the legacy `function_call` next to `tool_calls`. OpenAI accepts
/// either form, but llama-cpp-python's server answers 500 to a `null` or
/// missing content, and a server that reads both `function_call` and
/// `tool_calls` may run the call twice.
pub(crate) fn outgoing_message(message: &Value) -> Cow<'_, Value> {
    let Some(map) = message.as_object() else {
        return Cow::Borrowed(message);
    };
    if map.get("role").and_then(Value::as_str) != Some("assistant") {
        return Cow::Borrowed(message);
    }
    let has_tool_calls = map
        .get("tool_calls")
        .and_then(Value::as_array)
        .is_some_and(|calls| !calls.is_empty());
    let null_content = map.get("content").is_none_or(Value::is_null);
    let stray_function_call = has_tool_calls && map.contains_key("function_call");
    if !null_content && !stray_function_call {
        return Cow::Borrowed(message);
    }
    let mut map = map.clone();
    if null_content {
        map.insert("content".into(), Value::String(String::new()));
    }
    if stray_function_call {
        map.remove("function_call");
    }
    Cow::Owned(Value::Object(map))
}

/// Parses a successful Chat Completions body.
pub(crate) fn parse_response(body: &str) -> Result<ModelReply, ModelError> {
    let value: Value = serde_json::from_str(body).map_err(|err| {
        let start: String = body.chars().take(200).collect();
        ModelError::Malformed(format!("the body is not valid JSON ({err}): {start:?}"))
    })?;
    // Some gateways (OpenRouter among them) answer 200 with an error body.
    if value.get("choices").is_none()
        && let Some(error) = value.get("error")
    {
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| error.to_string());
        let status = error
            .get("code")
            .and_then(Value::as_u64)
            .and_then(|code| u16::try_from(code).ok())
            .filter(|code| (400..600).contains(code));
        return Err(match status {
            Some(status) => ModelError::Http {
                status,
                message,
                kind: error.get("type").and_then(Value::as_str).map(str::to_owned),
                retry_after: None,
            },
            None => ModelError::Malformed(format!("the answer holds an error: {message}")),
        });
    }
    let choice = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|choices| choices.first())
        .ok_or_else(|| ModelError::Malformed("the answer has no `choices[0]`".to_owned()))?;
    let message = choice
        .get("message")
        .filter(|m| m.is_object())
        .cloned()
        .ok_or_else(|| ModelError::Malformed("`choices[0].message` is missing".to_owned()))?;
    let tool_calls = match message.get("tool_calls") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(calls)) => calls.iter().map(parse_tool_call).collect(),
        Some(_) => {
            return Err(ModelError::Malformed(
                "`tool_calls` is not a list".to_owned(),
            ));
        }
    };
    let usage = value.get("usage").map(parse_usage).unwrap_or_default();
    let finish_reason = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(ModelReply {
        message,
        tool_calls,
        cut: finish_reason.as_deref() == Some("length"),
        finish_reason,
        usage,
        response_id: value.get("id").and_then(Value::as_str).map(str::to_owned),
    })
}

/// The tool calls of an assistant message in this protocol's format.
pub(crate) fn tool_calls_of(message: &Value) -> Vec<ToolCall> {
    message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| calls.iter().map(parse_tool_call).collect())
        .unwrap_or_default()
}

/// A tool call never fails to parse: what is missing or odd is kept as is
/// and the bash tool answers the model with what was wrong.
fn parse_tool_call(call: &Value) -> ToolCall {
    let function = call.get("function");
    let arguments = match function.and_then(|f| f.get("arguments")) {
        Some(Value::String(s)) => s.clone(),
        // Some servers send the arguments as an object instead of a string.
        Some(other) => other.to_string(),
        None => String::new(),
    };
    ToolCall {
        id: call
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        name: function
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        arguments,
    }
}

fn parse_usage(usage: &Value) -> Usage {
    let get = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    let prompt_tokens = get("prompt_tokens");
    let completion_tokens = get("completion_tokens");
    let total_tokens = usage
        .get("total_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(prompt_tokens + completion_tokens);
    let cached_tokens = usage
        .pointer("/prompt_tokens_details/cached_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let reasoning_tokens = usage
        .pointer("/completion_tokens_details/reasoning_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    Usage {
        prompt_tokens,
        completion_tokens,
        total_tokens,
        cached_tokens,
        cache_write_tokens: 0,
        reasoning_tokens,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::http::http_error;
    use std::time::Duration;

    #[test]
    fn parses_tool_calls_usage_and_keeps_the_message() {
        let body = r#"{"id":"c1","choices":[{"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
            "tool_calls":[{"id":"a","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}},
                          {"id":"b","type":"function","function":{"name":"bash","arguments":{"command":"pwd"}}}]}}],
            "usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}"#;
        let reply = parse_response(body).expect("parses");
        assert_eq!(reply.tool_calls.len(), 2);
        assert_eq!(reply.tool_calls[0].arguments, r#"{"command":"ls"}"#);
        assert_eq!(reply.tool_calls[1].arguments, r#"{"command":"pwd"}"#);
        assert_eq!(reply.usage.total_tokens, 15);
        assert_eq!(reply.response_id.as_deref(), Some("c1"));
        assert_eq!(reply.message["role"], "assistant");
        assert!(!reply.cut);
    }

    #[test]
    fn cached_and_reasoning_tokens_come_from_their_details() {
        let body = r#"{"choices":[{"finish_reason":"stop","message":{"role":"assistant","content":"x"}}],
            "usage":{"prompt_tokens":100,"completion_tokens":50,"total_tokens":150,
                     "prompt_tokens_details":{"cached_tokens":60},
                     "completion_tokens_details":{"reasoning_tokens":30}}}"#;
        let usage = parse_response(body).expect("parses").usage;
        assert_eq!((usage.cached_tokens, usage.reasoning_tokens), (60, 30));
        assert_eq!(usage.completion_tokens, 50);
    }

    #[test]
    fn missing_total_is_summed_and_missing_usage_is_zero() {
        let body = r#"{"choices":[{"finish_reason":"length","message":{"role":"assistant","content":"x"}}],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#;
        let reply = parse_response(body).expect("parses");
        assert_eq!(reply.usage.total_tokens, 7);
        assert!(reply.cut);
        let body = r#"{"choices":[{"message":{"role":"assistant","content":"x"}}]}"#;
        assert_eq!(
            parse_response(body).expect("parses").usage,
            Usage::default()
        );
    }

    #[test]
    fn assistant_messages_go_back_with_a_string_content_and_no_stray_function_call() {
        let call = json!([{"id": "a", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]);
        let cases = [
            (
                json!({"role": "assistant", "content": null, "tool_calls": call}),
                json!({"role": "assistant", "content": "", "tool_calls": call}),
            ),
            (
                json!({"role": "assistant", "tool_calls": call}),
                json!({"role": "assistant", "content": "", "tool_calls": call}),
            ),
            (
                json!({"role": "assistant", "content": null, "tool_calls": call,
                       "function_call": {"name": "bash", "arguments": "{}"}}),
                json!({"role": "assistant", "content": "", "tool_calls": call}),
            ),
            (
                json!({"role": "assistant", "content": null}),
                json!({"role": "assistant", "content": ""}),
            ),
        ];
        for (received, sent) in cases {
            let out = outgoing_message(&received);
            assert!(matches!(out, Cow::Owned(_)), "{received}");
            assert_eq!(*out, sent, "{received}");
        }
        // What needs no change is sent as it is, without a copy: a legacy
        // `function_call` alone is the call itself and stays.
        for message in [
            json!({"role": "assistant", "content": "thinking", "tool_calls": call}),
            json!({"role": "assistant", "content": "", "function_call": {"name": "bash"}}),
            json!({"role": "tool", "tool_call_id": "a", "content": "out"}),
            json!({"role": "user", "content": null}),
        ] {
            let out = outgoing_message(&message);
            assert!(matches!(out, Cow::Borrowed(_)), "{message}");
            assert_eq!(*out, message);
        }
    }

    #[test]
    fn the_request_body_is_the_template_and_the_history_as_sent() {
        let mut template = serde_json::Map::new();
        template.insert("model".into(), json!("m"));
        // A --model-arg cannot replace the history.
        template.insert("messages".into(), json!("from a model-arg"));
        let history = [
            json!({"role": "user", "content": "hi"}),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "a"}]}),
        ];
        let body = RequestBody {
            template: &template,
            messages: &history,
        };
        let text = serde_json::to_string(&body).expect("serializes");
        assert_eq!(text.matches("\"messages\"").count(), 1, "{text}");
        let sent: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(
            sent,
            json!({"model": "m", "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "a"}]},
            ]})
        );
    }

    #[test]
    fn malformed_bodies_are_errors_not_panics() {
        for body in [
            "",
            "{",
            "[]",
            r#"{"choices":[]}"#,
            r#"{"choices":[{"message":"x"}]}"#,
            r#"{"choices":[{"message":{"tool_calls":5}}]}"#,
        ] {
            assert!(
                matches!(parse_response(body), Err(ModelError::Malformed(_))),
                "{body}"
            );
        }
    }

    #[test]
    fn an_error_body_with_status_200_keeps_its_message() {
        let err = parse_response(r#"{"error":{"message":"Rate limit exceeded","code":429}}"#)
            .expect_err("error body");
        assert!(
            matches!(err, ModelError::Http { status: 429, .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("Rate limit exceeded"));
        let err = parse_response(r#"{"error":"boom"}"#).expect_err("error body");
        assert!(err.to_string().contains("boom"), "{err}");
    }

    #[test]
    fn http_errors_carry_the_server_message() {
        let err = http_error(
            401,
            r#"{"error":{"message":"Incorrect API key","code":"invalid_api_key"}}"#,
            None,
        );
        assert_eq!(
            err.to_string(),
            "the model API answered HTTP 401: Incorrect API key"
        );
        let err = http_error(
            502,
            "<html>bad gateway</html>",
            Some(Duration::from_secs(2)),
        );
        assert!(
            err.to_string()
                .contains("HTTP 502: <html>bad gateway</html>")
        );
        assert!(err.is_retryable());
        assert_eq!(err.retry_after(), Some(Duration::from_secs(2)));
        let err = http_error(
            400,
            r#"{"error":{"message":"too long","code":"context_length_exceeded"}}"#,
            None,
        );
        assert!(matches!(err, ModelError::ContextOverflow(_)));
    }
}
