//! What a model reasoned, read out of one recorded assistant message in any
//! protocol's format, for `show` and the HTML transcript.
//!
//! The loop never needs this: it keeps every assistant message as received
//! and sends it back as it came (docs/trajectory.md, "Reasoning"), so what a
//! server needs returned is returned. This file only reads. It is a leaf:
//! plain JSON in, text out.
//!
//! Where reasoning is found:
//! - Chat Completions servers: `reasoning_content` (vLLM, SGLang, DeepSeek,
//!   llama.cpp), `reasoning` (OpenRouter, newer vLLM) and `reasoning_details`
//!   (OpenRouter: `reasoning.text` and `reasoning.summary` entries; a
//!   `reasoning.encrypted` one has nothing readable).
//! - Responses: the `reasoning` output items' `summary` and `content` texts.
//! - Anthropic: `thinking` blocks (`redacted_thinking` has nothing readable).

use serde_json::Value;

/// Shown in place of reasoning the provider sent encrypted only.
pub(crate) const ENCRYPTED: &str = "(encrypted: not readable)";

/// The reasoning of an assistant message, its parts joined by blank lines;
/// `None` when it has none.
pub(crate) fn reasoning_of(message: &Value) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    // OpenRouter sends the same text as `reasoning` and in
    // `reasoning_details`, and some servers fill both `reasoning` and
    // `reasoning_content`: the first that has text is shown, once.
    let chat = ["reasoning_content", "reasoning"]
        .iter()
        .filter_map(|key| message.get(key).and_then(Value::as_str))
        .find(|text| !text.trim().is_empty())
        .map(str::to_owned)
        .or_else(|| details_text(message.get("reasoning_details")));
    parts.extend(chat);
    if let Some(items) = message.get("output").and_then(Value::as_array) {
        let reasoning = items
            .iter()
            .filter(|item| item.get("type").and_then(Value::as_str) == Some("reasoning"));
        parts.extend(reasoning.filter_map(responses_item_text));
    }
    if let Some(blocks) = message.get("content").and_then(Value::as_array) {
        parts.extend(blocks.iter().filter_map(thinking_text));
    }
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

/// OpenRouter's `reasoning_details` as text.
fn details_text(details: Option<&Value>) -> Option<String> {
    let details = details?.as_array()?;
    let mut encrypted = false;
    let texts: Vec<&str> = details
        .iter()
        .filter_map(|detail| match detail.get("type").and_then(Value::as_str) {
            Some("reasoning.text") => detail.get("text").and_then(Value::as_str),
            Some("reasoning.summary") => detail.get("summary").and_then(Value::as_str),
            Some("reasoning.encrypted") => {
                encrypted = true;
                None
            }
            _ => None,
        })
        .filter(|text| !text.trim().is_empty())
        .collect();
    if texts.is_empty() {
        return encrypted.then(|| ENCRYPTED.to_owned());
    }
    Some(texts.join("\n"))
}

/// A Responses `reasoning` item's summary and reasoning texts.
fn responses_item_text(item: &Value) -> Option<String> {
    let texts: Vec<&str> = ["summary", "content"]
        .iter()
        .filter_map(|key| item.get(key).and_then(Value::as_array))
        .flatten()
        .filter_map(|part| part.get("text").and_then(Value::as_str))
        .filter(|text| !text.trim().is_empty())
        .collect();
    if texts.is_empty() {
        let encrypted = item
            .get("encrypted_content")
            .is_some_and(|c| c.as_str().is_some_and(|s| !s.is_empty()));
        return encrypted.then(|| ENCRYPTED.to_owned());
    }
    Some(texts.join("\n"))
}

/// An Anthropic `thinking` block's text.
fn thinking_text(block: &Value) -> Option<String> {
    match block.get("type").and_then(Value::as_str) {
        Some("thinking") => block
            .get("thinking")
            .and_then(Value::as_str)
            .filter(|text| !text.trim().is_empty())
            .map(str::to_owned),
        Some("redacted_thinking") => Some(ENCRYPTED.to_owned()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reasoning_is_read_in_every_dialect() {
        let cases = [
            (
                json!({"role": "assistant", "content": "x", "reasoning_content": "vllm thinks"}),
                Some("vllm thinks"),
            ),
            // OpenRouter: the same text twice is shown once.
            (
                json!({"role": "assistant", "reasoning": "router thinks",
                       "reasoning_details": [{"type": "reasoning.text", "text": "router thinks"}]}),
                Some("router thinks"),
            ),
            (
                json!({"role": "assistant", "reasoning": null, "reasoning_details": [
                    {"type": "reasoning.summary", "summary": "in short"},
                    {"type": "reasoning.encrypted", "data": "xyz"}]}),
                Some("in short"),
            ),
            (
                json!({"role": "assistant", "reasoning_details": [
                    {"type": "reasoning.encrypted", "data": "xyz"}]}),
                Some(ENCRYPTED),
            ),
            (
                json!({"role": "assistant", "output": [
                    {"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}],
                     "encrypted_content": "gAAA"},
                    {"type": "function_call", "call_id": "c", "name": "bash", "arguments": "{}"}]}),
                Some("plan"),
            ),
            (
                json!({"role": "assistant", "output": [
                    {"type": "reasoning", "summary": [], "encrypted_content": "gAAA"}]}),
                Some(ENCRYPTED),
            ),
            (
                json!({"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "claude thinks", "signature": "s"},
                    {"type": "text", "text": "done"}]}),
                Some("claude thinks"),
            ),
            (
                json!({"role": "assistant", "content": "plain", "reasoning_content": "  "}),
                None,
            ),
            (json!({"role": "assistant", "content": null}), None),
        ];
        for (message, expected) in cases {
            assert_eq!(reasoning_of(&message).as_deref(), expected, "{message}");
        }
    }
}
