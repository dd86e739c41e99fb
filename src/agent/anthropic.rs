//! The Anthropic Messages protocol: the system prompt apart from the
//! messages, `tool_use` blocks in the assistant's content answered by
//! `tool_result` blocks in one user message, `stop_reason`, and usage with
//! prompt-cache tokens. Same loop, same CSV; the trajectory keeps these
//! native messages.

use serde_json::{Value, json};

use crate::agent::http;
use crate::agent::request::RequestSettings;
use crate::agent::types::{ModelError, ModelReply, ToolCall};
use crate::run_folder::Usage;

const API_VERSION: &str = "2023-06-01";
/// The beta that lets Claude 4 models think between tool calls
/// (`--interleaved-thinking`).
pub(crate) const INTERLEAVED_THINKING_BETA: &str = "interleaved-thinking-2025-05-14";
/// How many of the newest user messages carry a breakpoint: the newest
/// writes the conversation so far to the cache, the one before reads what
/// the previous request wrote (mini-swe-agent and SWE-agent do the same).
const ROLLING_BREAKPOINTS: usize = 2;
/// The Messages API requires `max_tokens`; this is used when
/// `--max-output-tokens` is not given (the registry's entry, which the
/// thinking budget is checked against).
pub(crate) const DEFAULT_MAX_OUTPUT_TOKENS: u64 =
    crate::agent::provider::ANTHROPIC_MAX_OUTPUT_TOKENS;

pub(crate) struct AnthropicClient {
    http: reqwest::Client,
    url: String,
    models_url: String,
    model: String,
    api_key: Option<String>,
    settings: RequestSettings,
}

/// The one tool, in Anthropic's shape.
fn bash_tool() -> Value {
    json!({
        "name": "bash",
        "description": "Run one bash command in a fresh shell in the root of the repository and return its output (stdout and stderr) and exit code.",
        "input_schema": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The bash command to run."}
            },
            "required": ["command"]
        }
    })
}

/// `https://api.anthropic.com`, with or without `/v1`, to the messages URL.
pub(crate) fn messages_url(base_url: &str) -> String {
    format!("{}/messages", v1_url(base_url))
}

fn v1_url(base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    let base = base.strip_suffix("/v1").unwrap_or(base);
    format!("{base}/v1")
}

impl AnthropicClient {
    pub(crate) fn new(
        base_url: &str,
        model: &str,
        api_key: Option<String>,
        settings: RequestSettings,
    ) -> Result<AnthropicClient, reqwest::Error> {
        let http = http::client(settings.request_timeout)?;
        Ok(AnthropicClient {
            http,
            url: messages_url(base_url),
            models_url: format!("{}/models", v1_url(base_url)),
            model: model.to_owned(),
            api_key,
            settings,
        })
    }

    /// The request body without `system` and `messages`.
    fn body_template(&self) -> serde_json::Map<String, Value> {
        let s = &self.settings;
        let mut body = serde_json::Map::new();
        body.insert("model".into(), json!(self.model));
        body.insert(
            "max_tokens".into(),
            json!(s.max_output_tokens.unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS)),
        );
        body.insert("tools".into(), json!([bash_tool()]));
        if let Some(budget) = s.thinking_budget {
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget}),
            );
        }
        if let Some(t) = s.temperature {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(p) = s.top_p {
            body.insert("top_p".into(), json!(p));
        }
        // The Messages API has no seed; config/run_config.rs warns when one
        // is given.
        body.extend(s.extra.clone());
        body
    }

    pub(crate) fn request_template(&self) -> Value {
        let mut template = self.body_template();
        template.insert("url".into(), json!(self.url));
        Value::Object(template)
    }

    /// The messages URL.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// Asks for the list of models: see [`http::preflight`].
    pub(crate) async fn preflight(&self) -> Result<(), ModelError> {
        let mut request = self
            .http
            .get(&self.models_url)
            .header("anthropic-version", API_VERSION);
        if let Some(key) = &self.api_key {
            request = request.header("x-api-key", key);
        }
        http::preflight(request).await
    }

    pub(crate) async fn complete(
        &self,
        system: &str,
        messages: &[Value],
    ) -> Result<ModelReply, ModelError> {
        let mut body = self.body_template();
        if self.settings.prompt_cache {
            add_cache_breakpoints(&mut body, system, messages);
        } else {
            body.insert("system".into(), json!(system));
            body.insert("messages".into(), json!(messages));
        }
        let mut request = self
            .http
            .post(&self.url)
            .header("anthropic-version", API_VERSION)
            .json(&body);
        if self.settings.interleaved_thinking {
            request = request.header("anthropic-beta", INTERLEAVED_THINKING_BETA);
        }
        if let Some(key) = &self.api_key {
            request = request.header("x-api-key", key);
        }
        let text = http::send(request).await?;
        parse_response(&text)
    }

    /// All answers to one reply's tool calls, as one user message.
    pub(crate) fn tool_results(results: &[(String, String)]) -> Vec<Value> {
        let blocks: Vec<Value> = results
            .iter()
            .map(|(id, content)| json!({"type": "tool_result", "tool_use_id": id, "content": content}))
            .collect();
        vec![json!({"role": "user", "content": blocks})]
    }
}

/// Puts the system prompt and the messages into `body` with prompt-cache
/// breakpoints: one on the system prompt (the tools come before it in the
/// cache's order, so it caches them too; on the tool itself when there is
/// no system prompt) and one on the last block of each of the newest
/// [`ROLLING_BREAKPOINTS`] user messages. At most three, under the API's
/// limit of four in one request.
///
/// The markers go on copies made for this request only: the history the
/// loop keeps (and the trajectory records) stays as the model and the
/// tools produced it, so the markers of old requests never pile up. They
/// go only on user messages (tool results, the task's text), never on an
/// assistant's `thinking` block, which must come back exactly as sent.
pub(crate) fn add_cache_breakpoints(
    body: &mut serde_json::Map<String, Value>,
    system: &str,
    messages: &[Value],
) {
    let marker = json!({"type": "ephemeral"});
    if system.is_empty() {
        // The API refuses an empty text block: mark the tool instead.
        if let Some(tool) = body
            .get_mut("tools")
            .and_then(Value::as_array_mut)
            .and_then(|tools| tools.last_mut())
            .and_then(Value::as_object_mut)
        {
            tool.insert("cache_control".into(), marker.clone());
        }
        body.insert("system".into(), json!(system));
    } else {
        body.insert(
            "system".into(),
            json!([{"type": "text", "text": system, "cache_control": marker}]),
        );
    }
    let mut marked = messages.to_vec();
    let newest_users: Vec<usize> = marked
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, m)| m.get("role").and_then(Value::as_str) == Some("user"))
        .map(|(index, _)| index)
        .take(ROLLING_BREAKPOINTS)
        .collect();
    for index in newest_users {
        mark_last_block(&mut marked[index], &marker);
    }
    body.insert("messages".into(), Value::Array(marked));
}

/// Marks the last content block of a user message; text content becomes
/// one text block, which the API reads the same.
fn mark_last_block(message: &mut Value, marker: &Value) {
    let Some(content) = message.get_mut("content") else {
        return;
    };
    if let Some(text) = content.as_str() {
        if text.is_empty() {
            return;
        }
        *content = json!([{"type": "text", "text": text}]);
    }
    if let Some(block) = content
        .as_array_mut()
        .and_then(|blocks| blocks.last_mut())
        .and_then(Value::as_object_mut)
    {
        block.insert("cache_control".into(), marker.clone());
    }
}

/// The `tool_use` blocks of an assistant message's content.
pub(crate) fn tool_calls_of(content: &[Value]) -> Vec<ToolCall> {
    content
        .iter()
        .filter(|block| block.get("type").and_then(Value::as_str) == Some("tool_use"))
        .map(|block| ToolCall {
            id: block
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            name: block
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            arguments: block.get("input").map(Value::to_string).unwrap_or_default(),
        })
        .collect()
}

/// Parses a successful Messages API body.
pub(crate) fn parse_response(body: &str) -> Result<ModelReply, ModelError> {
    let value: Value = serde_json::from_str(body).map_err(|err| {
        let start: String = body.chars().take(200).collect();
        ModelError::Malformed(format!("the body is not valid JSON ({err}): {start:?}"))
    })?;
    if value.get("type").and_then(Value::as_str) == Some("error") {
        let message = value
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap_or("an error without a message");
        return Err(ModelError::Malformed(format!(
            "the answer holds an error: {message}"
        )));
    }
    let content = value
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| ModelError::Malformed("the answer has no `content` list".to_owned()))?;
    let tool_calls = tool_calls_of(content);
    let stop_reason = value
        .get("stop_reason")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let usage = value.get("usage").map(parse_usage).unwrap_or_default();
    Ok(ModelReply {
        // The history keeps the assistant's content exactly as received.
        message: json!({"role": "assistant", "content": content}),
        tool_calls,
        cut: stop_reason.as_deref() == Some("max_tokens"),
        finish_reason: stop_reason,
        usage,
        response_id: value.get("id").and_then(Value::as_str).map(str::to_owned),
    })
}

/// Anthropic's `input_tokens` excludes cache reads and writes; onebash's
/// `prompt_tokens` counts every input token.
fn parse_usage(usage: &Value) -> Usage {
    let get = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    let cached_tokens = get("cache_read_input_tokens");
    let cache_write_tokens = get("cache_creation_input_tokens");
    let prompt_tokens = get("input_tokens") + cached_tokens + cache_write_tokens;
    let completion_tokens = get("output_tokens");
    Usage {
        prompt_tokens,
        completion_tokens,
        total_tokens: prompt_tokens + completion_tokens,
        cached_tokens,
        cache_write_tokens,
        // The Messages API bills thinking as output and does not count it
        // apart.
        reasoning_tokens: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The most `cache_control` breakpoints the API takes in one request.
    const MAX_CACHE_BREAKPOINTS: usize = 4;
    use crate::agent::http::http_error;

    #[test]
    fn base_urls_with_or_without_v1() {
        for base in [
            "https://api.anthropic.com",
            "https://api.anthropic.com/",
            "https://api.anthropic.com/v1",
            "https://api.anthropic.com/v1/",
        ] {
            assert_eq!(
                messages_url(base),
                "https://api.anthropic.com/v1/messages",
                "{base}"
            );
        }
    }

    #[test]
    fn parses_tool_use_blocks_stop_reason_and_cache_usage() {
        let body = r#"{"id":"msg_1","type":"message","role":"assistant","stop_reason":"tool_use",
            "content":[{"type":"text","text":"Let me look."},
                       {"type":"tool_use","id":"toolu_1","name":"bash","input":{"command":"ls"}}],
            "usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":100,"cache_creation_input_tokens":20}}"#;
        let reply = parse_response(body).expect("parses");
        assert_eq!(
            reply.tool_calls,
            vec![ToolCall {
                id: "toolu_1".into(),
                name: "bash".into(),
                arguments: r#"{"command":"ls"}"#.into()
            }]
        );
        assert_eq!(reply.finish_reason.as_deref(), Some("tool_use"));
        assert!(!reply.cut);
        assert_eq!(reply.usage.prompt_tokens, 130);
        assert_eq!(reply.usage.cached_tokens, 100);
        assert_eq!(reply.usage.cache_write_tokens, 20);
        assert_eq!(reply.usage.total_tokens, 135);
        assert_eq!(reply.message["content"][0]["text"], "Let me look.");
        let cut = parse_response(
            r#"{"content":[{"type":"text","text":"x"}],"stop_reason":"max_tokens"}"#,
        )
        .expect("parses");
        assert!(cut.cut);
    }

    /// Every `cache_control` in a request body, as JSON pointers.
    fn markers(value: &Value, at: String, found: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, inner) in map {
                    if key == "cache_control" {
                        found.push(at.clone());
                    }
                    markers(inner, format!("{at}/{key}"), found);
                }
            }
            Value::Array(items) => {
                for (index, inner) in items.iter().enumerate() {
                    markers(inner, format!("{at}/{index}"), found);
                }
            }
            _ => {}
        }
    }

    /// A conversation of `turns` answers, each with a signed thinking
    /// block and a tool call, each answered by a tool result.
    fn conversation(turns: usize) -> Vec<Value> {
        let mut messages = vec![json!({"role": "user", "content": "Fix the bug."})];
        for turn in 0..turns {
            messages.push(json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": format!("step {turn}"), "signature": format!("sig{turn}")},
                {"type": "tool_use", "id": format!("t{turn}"), "name": "bash", "input": {"command": "ls"}}
            ]}));
            messages.extend(AnthropicClient::tool_results(&[(
                format!("t{turn}"),
                format!("out {turn}"),
            )]));
        }
        messages
    }

    #[test]
    fn breakpoints_mark_the_system_prompt_and_the_two_newest_user_turns_only() {
        for turns in [0, 1, 2, 5, 30] {
            let messages = conversation(turns);
            let before = messages.clone();
            let mut body = serde_json::Map::new();
            body.insert("tools".into(), json!([bash_tool()]));
            add_cache_breakpoints(&mut body, "You are a coder.", &messages);
            let body = Value::Object(body);
            let mut found = Vec::new();
            markers(&body, String::new(), &mut found);
            let last = messages.len() - 1;
            let mut expected = vec!["/system/0".to_owned()];
            if turns == 0 {
                expected.push("/messages/0/content/0".to_owned());
            } else {
                expected.push(format!("/messages/{}/content/0", last - 2));
                expected.push(format!("/messages/{last}/content/0"));
            }
            expected.sort();
            found.sort();
            assert_eq!(found, expected, "{turns} turns");
            assert!(found.len() <= MAX_CACHE_BREAKPOINTS);
            // The history itself is untouched, thinking blocks included.
            assert_eq!(messages, before);
            for message in body["messages"].as_array().expect("messages") {
                if message["role"] == "assistant" {
                    let original = before.iter().find(|m| m["content"] == message["content"]);
                    assert!(original.is_some(), "assistant content changed: {message}");
                }
            }
        }
    }

    #[test]
    fn without_a_system_prompt_the_tool_carries_the_breakpoint() {
        let mut body = serde_json::Map::new();
        body.insert("tools".into(), json!([bash_tool()]));
        add_cache_breakpoints(&mut body, "", &conversation(0));
        assert_eq!(body["system"], "");
        assert_eq!(body["tools"][0]["cache_control"]["type"], "ephemeral");
        assert_eq!(body["messages"][0]["content"][0]["text"], "Fix the bug.");
    }

    fn settings(prompt_cache: bool, thinking_budget: Option<u64>) -> RequestSettings {
        RequestSettings {
            temperature: None,
            top_p: None,
            seed: None,
            max_output_tokens: Some(16_000),
            extra: serde_json::Map::new(),
            request_timeout: std::time::Duration::from_secs(5),
            prompt_cache,
            thinking_budget,
            interleaved_thinking: false,
            reasoning_effort: None,
        }
    }

    #[test]
    fn the_thinking_budget_goes_into_the_body() {
        let client =
            AnthropicClient::new("http://127.0.0.1:1", "m", None, settings(true, Some(4096)))
                .expect("client");
        let template = client.request_template();
        assert_eq!(
            template["thinking"],
            json!({"type": "enabled", "budget_tokens": 4096})
        );
        assert!(template.get("temperature").is_none());
        let client = AnthropicClient::new("http://127.0.0.1:1", "m", None, settings(false, None))
            .expect("client");
        assert!(client.request_template().get("thinking").is_none());
    }

    #[test]
    fn tool_results_share_one_user_message() {
        let messages = AnthropicClient::tool_results(&[
            ("a".into(), "one".into()),
            ("b".into(), "two".into()),
        ]);
        assert_eq!(messages.len(), 1);
        assert_eq!(messages[0]["role"], "user");
        assert_eq!(messages[0]["content"][1]["tool_use_id"], "b");
        assert_eq!(messages[0]["content"][1]["type"], "tool_result");
    }

    #[test]
    fn errors_and_overflow_in_anthropic_words() {
        let err = http_error(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            None,
        );
        assert!(err.is_retryable(), "{err:?}");
        assert!(err.to_string().contains("Overloaded"));
        let err = http_error(
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}"#,
            None,
        );
        assert!(matches!(err, ModelError::ContextOverflow(_)), "{err:?}");
        assert!(parse_response("{}").is_err());
    }
}
