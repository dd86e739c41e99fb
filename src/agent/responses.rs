//! OpenAI's Responses API (`POST /responses`), spoken statelessly: every
//! request carries the whole conversation, `store: false` asks the server
//! to keep nothing, and `include: ["reasoning.encrypted_content"]` makes it
//! hand back its reasoning encrypted, so that onebash can send it back. No
//! request names a `previous_response_id`: a run depends on no state of the
//! server's, exactly as with Chat Completions.
//!
//! Owns the request (the model, the system prompt as `instructions`, the
//! history flattened into `input` items, the one `bash` tool in the
//! Responses' function shape), the HTTP call, and the parsing of a response
//! into a [`ModelReply`]. One call is one attempt: retries are
//! `ModelClient::complete`'s; error answers are `http.rs`'s.
//!
//! The history keeps one entry per model call, `{"role": "assistant",
//! "output": [...]}`, holding the response's output items (reasoning,
//! message, function calls) exactly as received. So the loop, the
//! trajectory and a replay see one assistant message per turn, as with the
//! other protocols; on the wire that entry becomes its items again, in
//! order (see [`input_items`]). A tool result is a `function_call_output`
//! item with the call's `call_id`.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use crate::agent::openai::{self, Endpoint};
use crate::agent::request::RequestSettings;
use crate::agent::types::{ModelError, ModelReply, ToolCall};
use crate::run_folder::Usage;

/// What the request asks the server to add to its answer: the reasoning,
/// encrypted, since the server stores none of it.
const ENCRYPTED_REASONING: &str = "reasoning.encrypted_content";

pub(crate) struct ResponsesClient {
    endpoint: Endpoint,
}

/// The one tool in the Responses' shape: Chat Completions' function, with
/// its name, description and parameters one level up.
pub(crate) fn bash_tool_schema() -> Value {
    let mut tool = Map::new();
    tool.insert("type".into(), json!("function"));
    if let Some(function) = openai::bash_tool_schema()
        .get("function")
        .and_then(Value::as_object)
    {
        tool.extend(function.clone());
    }
    Value::Object(tool)
}

impl ResponsesClient {
    pub(crate) fn new(
        base_url: &str,
        model: &str,
        api_key: Option<String>,
        settings: RequestSettings,
    ) -> Result<ResponsesClient, reqwest::Error> {
        let endpoint = Endpoint::new(base_url, "responses", model, api_key, settings)?;
        Ok(ResponsesClient { endpoint })
    }

    /// The request body without `instructions` and `input`.
    fn body_template(&self) -> Map<String, Value> {
        let mut body = Map::new();
        body.insert("model".into(), json!(self.endpoint.model));
        body.insert("tools".into(), json!([bash_tool_schema()]));
        body.insert("store".into(), json!(false));
        body.insert("include".into(), json!([ENCRYPTED_REASONING]));
        let s = &self.endpoint.settings;
        let optional = [
            (
                "reasoning",
                s.reasoning_effort.map(|v| json!({"effort": v})),
            ),
            ("temperature", s.temperature.map(|v| json!(v))),
            ("top_p", s.top_p.map(|v| json!(v))),
            ("max_output_tokens", s.max_output_tokens.map(|v| json!(v))),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                body.insert(key.into(), value);
            }
        }
        // --model-arg goes in last: it may override anything above, but
        // the prompt and the history are onebash's.
        body.extend(s.extra.clone());
        body.remove("instructions");
        body.remove("input");
        body
    }

    pub(crate) fn request_template(&self) -> Value {
        self.endpoint.with_url(self.body_template())
    }

    /// Where the requests go (its URL, the preflight).
    pub(crate) fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    pub(crate) async fn complete(
        &self,
        system: &str,
        messages: &[Value],
    ) -> Result<ModelReply, ModelError> {
        let body = RequestBody {
            template: &self.body_template(),
            instructions: system,
            input: input_items(messages),
        };
        parse_response(&self.endpoint.post(&body).await?)
    }

    /// The answers to one reply's function calls, in order: one
    /// `function_call_output` item per call, paired by `call_id`.
    pub(crate) fn tool_results(results: &[(String, String)]) -> Vec<Value> {
        results
            .iter()
            .map(|(call_id, output)| {
                json!({"type": "function_call_output", "call_id": call_id, "output": output})
            })
            .collect()
    }
}

/// A request body: the template's fields, then the prompt and the history.
#[derive(serde::Serialize)]
struct RequestBody<'a> {
    #[serde(flatten)]
    template: &'a Map<String, Value>,
    /// The system prompt. `instructions` rather than a developer item at
    /// the head of `input`: it is the API's own place for it, it keeps the
    /// prompt out of the history as Anthropic's `system` does, and with
    /// `store: false` it is sent on every request anyway.
    instructions: &'a str,
    input: Vec<Cow<'a, Value>>,
}

/// The history as `input` items: each recorded answer becomes its output
/// items, in order, each without its `id`; the user's message and the
/// `function_call_output` items go as they are.
///
/// The ids go because with `store: false` the server kept no item: it
/// answers an item that names an id with "Item with id '...' not found".
/// What the item holds (the encrypted reasoning above all) is carried
/// whole, so the id is not needed.
pub(crate) fn input_items(messages: &[Value]) -> Vec<Cow<'_, Value>> {
    let mut items = Vec::with_capacity(messages.len());
    for message in messages {
        match answer_items(message) {
            Some(output) => items.extend(output.iter().map(without_id)),
            None => items.push(Cow::Borrowed(message)),
        }
    }
    items
}

/// The output items of a recorded answer; `None` for any other entry.
fn answer_items(message: &Value) -> Option<&Vec<Value>> {
    if message.get("role").and_then(Value::as_str) != Some("assistant") {
        return None;
    }
    message.get("output").and_then(Value::as_array)
}

fn without_id(item: &Value) -> Cow<'_, Value> {
    match item.as_object() {
        Some(map) if map.contains_key("id") => {
            let mut map = map.clone();
            map.remove("id");
            Cow::Owned(Value::Object(map))
        }
        _ => Cow::Borrowed(item),
    }
}

/// Parses a successful Responses body.
pub(crate) fn parse_response(body: &str) -> Result<ModelReply, ModelError> {
    let mut value: Value = serde_json::from_str(body).map_err(|err| {
        let start: String = body.chars().take(200).collect();
        ModelError::Malformed(format!("the body is not valid JSON ({err}): {start:?}"))
    })?;
    let status = value
        .get("status")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let error = value.get("error").filter(|e| !e.is_null());
    if let Some(error) = error.filter(|_| status.as_deref() != Some("completed")) {
        return Err(failed_response(error));
    }
    match status.as_deref() {
        // A server that omits the status answered in full.
        None | Some("completed" | "incomplete") => {}
        Some(other) => {
            return Err(ModelError::Malformed(format!(
                "the response is {other:?}, neither completed nor incomplete"
            )));
        }
    }
    let output = match value.get_mut("output").map(Value::take) {
        Some(Value::Array(items)) => items,
        _ => {
            return Err(ModelError::Malformed(
                "the answer has no `output` list".to_owned(),
            ));
        }
    };
    let tool_calls = function_calls(&output);
    let incomplete = status.as_deref() == Some("incomplete");
    let reason = value
        .pointer("/incomplete_details/reason")
        .and_then(Value::as_str);
    // The finish reason is the API's word: `completed`, or why the
    // response is incomplete (`max_output_tokens`, `content_filter`).
    let finish_reason = if incomplete {
        Some(reason.unwrap_or("incomplete").to_owned())
    } else {
        status
    };
    Ok(ModelReply {
        message: json!({"role": "assistant", "output": output}),
        tool_calls,
        cut: incomplete && reason == Some("max_output_tokens"),
        finish_reason,
        usage: value.get("usage").map(parse_usage).unwrap_or_default(),
        response_id: value.get("id").and_then(Value::as_str).map(str::to_owned),
    })
}

/// A response that says it failed: a context overflow in its own words,
/// or a garbled answer (retried, as a server's hiccup is).
fn failed_response(error: &Value) -> ModelError {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| error.to_string());
    let code = error.get("code").and_then(Value::as_str).unwrap_or("none");
    if code == "context_length_exceeded" {
        return ModelError::ContextOverflow(message);
    }
    ModelError::Malformed(format!("the response failed (code {code}): {message}"))
}

/// The text of a recorded answer's `message` items, for a reader.
pub(crate) fn output_text(message: &Value) -> Option<String> {
    let items = answer_items(message)?;
    let texts: Vec<&str> = items
        .iter()
        .filter(|item| item.get("type").and_then(Value::as_str) == Some("message"))
        .filter_map(|item| item.get("content").and_then(Value::as_array))
        .flatten()
        .filter_map(|part| {
            part.get("text")
                .or_else(|| part.get("refusal"))
                .and_then(Value::as_str)
        })
        .collect();
    Some(texts.join("\n"))
}

/// The tool calls of a recorded answer (`{"role": "assistant", "output": [...]}`).
pub(crate) fn tool_calls_of(message: &Value) -> Vec<ToolCall> {
    answer_items(message)
        .map(|items| function_calls(items))
        .unwrap_or_default()
}

/// The `function_call` items, in order. As in Chat Completions, a call
/// never fails to parse: what is missing is left empty and the bash tool
/// tells the model what was wrong.
fn function_calls(items: &[Value]) -> Vec<ToolCall> {
    let text = |item: &Value, key: &str| {
        item.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    items
        .iter()
        .filter(|item| item.get("type").and_then(Value::as_str) == Some("function_call"))
        .map(|item| ToolCall {
            id: text(item, "call_id"),
            name: text(item, "name"),
            arguments: match item.get("arguments") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            },
        })
        .collect()
}

/// Responses' usage: `input_tokens` (cached ones included, as
/// [`Usage::prompt_tokens`] counts them) and `output_tokens` (reasoning
/// included), with their details.
fn parse_usage(usage: &Value) -> Usage {
    let count = |pointer: &str| usage.pointer(pointer).and_then(Value::as_u64).unwrap_or(0);
    let (input, output) = (count("/input_tokens"), count("/output_tokens"));
    Usage {
        prompt_tokens: input,
        completion_tokens: output,
        total_tokens: usage
            .get("total_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(input + output),
        cached_tokens: count("/input_tokens_details/cached_tokens"),
        cache_write_tokens: 0,
        reasoning_tokens: count("/output_tokens_details/reasoning_tokens"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(status: &str, extra: Value) -> String {
        let mut body = json!({
            "id": "resp_1",
            "object": "response",
            "status": status,
            "error": null,
            "incomplete_details": null,
            "output": [
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
                {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "bash",
                 "arguments": "{\"command\":\"ls\"}", "status": "completed"},
            ],
            "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 64},
                      "output_tokens": 30, "output_tokens_details": {"reasoning_tokens": 20},
                      "total_tokens": 130},
        });
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            body.extend(extra.clone());
        }
        body.to_string()
    }

    #[test]
    fn a_response_becomes_one_answer_with_its_calls_and_usage() {
        let reply = parse_response(&response("completed", json!({}))).expect("parses");
        assert_eq!(
            reply.tool_calls,
            vec![ToolCall {
                id: "call_a".into(),
                name: "bash".into(),
                arguments: r#"{"command":"ls"}"#.into()
            }]
        );
        assert_eq!(reply.message["role"], "assistant");
        assert_eq!(reply.message["output"].as_array().map(Vec::len), Some(2));
        assert_eq!(reply.message["output"][0]["encrypted_content"], "gAAA");
        assert_eq!(reply.finish_reason.as_deref(), Some("completed"));
        assert!(!reply.cut);
        assert_eq!(reply.response_id.as_deref(), Some("resp_1"));
        let usage = reply.usage;
        assert_eq!(
            (
                usage.prompt_tokens,
                usage.cached_tokens,
                usage.completion_tokens,
                usage.reasoning_tokens,
                usage.total_tokens
            ),
            (100, 64, 30, 20, 130)
        );
        assert_eq!(tool_calls_of(&reply.message), reply.tool_calls);
    }

    #[test]
    fn incomplete_responses_say_why_and_only_max_output_tokens_cuts() {
        let cases = [("max_output_tokens", true), ("content_filter", false)];
        for (reason, cut) in cases {
            let body = response(
                "incomplete",
                json!({"incomplete_details": {"reason": reason}}),
            );
            let reply = parse_response(&body).expect("parses");
            assert_eq!(reply.finish_reason.as_deref(), Some(reason));
            assert_eq!(reply.cut, cut, "{reason}");
        }
    }

    #[test]
    fn failed_and_malformed_responses_are_errors_not_panics() {
        let overflow = response(
            "failed",
            json!({"error": {"code": "context_length_exceeded",
                             "message": "Your input exceeds the context window of this model."}}),
        );
        assert!(matches!(
            parse_response(&overflow),
            Err(ModelError::ContextOverflow(_))
        ));
        let failed = response(
            "failed",
            json!({"error": {"code": "server_error", "message": "boom"}}),
        );
        let err = parse_response(&failed).expect_err("failed");
        assert!(
            err.to_string().contains("code server_error): boom"),
            "{err}"
        );
        for body in [
            "",
            "[]",
            r#"{"status":"completed"}"#,
            r#"{"status":"completed","output":{}}"#,
            r#"{"status":"in_progress","output":[]}"#,
        ] {
            assert!(
                matches!(parse_response(body), Err(ModelError::Malformed(_))),
                "{body}"
            );
        }
    }

    #[test]
    fn the_history_goes_as_input_items_in_order_without_ids() {
        let answer = parse_response(&response("completed", json!({})))
            .expect("parses")
            .message;
        let history = vec![json!({"role": "user", "content": "fix it"}), answer.clone()]
            .into_iter()
            .chain(ResponsesClient::tool_results(&[(
                "call_a".into(),
                "out".into(),
            )]))
            .collect::<Vec<_>>();
        let items: Vec<Value> = input_items(&history)
            .into_iter()
            .map(Cow::into_owned)
            .collect();
        assert_eq!(
            items,
            vec![
                json!({"role": "user", "content": "fix it"}),
                json!({"type": "reasoning", "summary": [], "encrypted_content": "gAAA"}),
                json!({"type": "function_call", "call_id": "call_a", "name": "bash",
                       "arguments": "{\"command\":\"ls\"}", "status": "completed"}),
                json!({"type": "function_call_output", "call_id": "call_a", "output": "out"}),
            ]
        );
        // The history itself (and so the trajectory) keeps the ids.
        assert_eq!(history[1], answer);
        assert_eq!(answer["output"][0]["id"], "rs_1");
    }

    #[test]
    fn the_request_is_stateless_and_a_model_arg_cannot_replace_the_history() {
        let mut settings = RequestSettings {
            reasoning_effort: Some(crate::agent::request::ReasoningEffort::High),
            max_output_tokens: Some(512),
            ..RequestSettings::default()
        };
        settings
            .extra
            .insert("input".into(), json!("from a model-arg"));
        settings.extra.insert("top_logprobs".into(), json!(2));
        let client =
            ResponsesClient::new("http://127.0.0.1:1/v1/", "m", None, settings).expect("a client");
        assert_eq!(client.endpoint().url(), "http://127.0.0.1:1/v1/responses");
        let history = [json!({"role": "user", "content": "hi"})];
        let body = RequestBody {
            template: &client.body_template(),
            instructions: "be brief",
            input: input_items(&history),
        };
        let text = serde_json::to_string(&body).expect("serializes");
        assert_eq!(text.matches("\"input\"").count(), 1, "{text}");
        let sent: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(sent["store"], false);
        assert_eq!(sent["include"], json!([ENCRYPTED_REASONING]));
        assert_eq!(sent["reasoning"], json!({"effort": "high"}));
        assert_eq!(sent["max_output_tokens"], 512);
        assert_eq!(sent["top_logprobs"], 2);
        assert_eq!(sent["instructions"], "be brief");
        assert_eq!(sent["input"], json!(history));
        assert_eq!(sent["tools"][0]["type"], "function");
        assert_eq!(sent["tools"][0]["name"], "bash");
        assert_eq!(
            sent["tools"][0]["parameters"]["required"],
            json!(["command"])
        );
        assert!(sent.get("previous_response_id").is_none());
    }
}
