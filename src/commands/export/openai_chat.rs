//! `export --format openai-chat`: OpenAI's fine-tuning chat format, one
//! training example a line: `messages` (system, user, assistant with
//! `tool_calls`, `tool` with `tool_call_id`), `tools` (function form) and
//! `parallel_tool_calls`. The format has no room for metadata: the line
//! holds those three keys only, as OpenAI's validation of an upload wants.

use serde_json::{Map, Value, json};

use super::conversation::{Example, Message, ToolSpec};

pub(super) fn line(example: &Example) -> Value {
    let c = &example.conversation;
    let mut messages = Vec::new();
    if let Some(system) = &c.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    for message in &c.messages {
        messages.push(match message {
            Message::User(text) => json!({"role": "user", "content": text}),
            Message::Assistant { text, calls, .. } => {
                let mut m = Map::new();
                m.insert("role".into(), json!("assistant"));
                // Content may be left out beside tool calls, never alone.
                if text.is_some() || calls.is_empty() {
                    m.insert("content".into(), json!(text.as_deref().unwrap_or("")));
                }
                if !calls.is_empty() {
                    let calls: Vec<Value> = calls
                        .iter()
                        .map(|call| {
                            json!({
                                "id": call.id,
                                "type": "function",
                                "function": {"name": call.name, "arguments": call.arguments},
                            })
                        })
                        .collect();
                    m.insert("tool_calls".into(), Value::Array(calls));
                }
                Value::Object(m)
            }
            Message::Tool { call_id, content } => {
                json!({"role": "tool", "tool_call_id": call_id, "content": content})
            }
        });
    }
    let tools: Vec<Value> = c.tools.iter().map(ToolSpec::openai_form).collect();
    // The value the examples were made under: what the requests sent, else
    // the Chat Completions default (true), which they then ran with.
    json!({
        "messages": messages,
        "tools": tools,
        "parallel_tool_calls": c.parallel_tool_calls.unwrap_or(true),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::export::conversation::sample;

    #[test]
    fn a_conversation_is_one_fine_tuning_example() {
        let want = json!({
            "messages": [
                {"role": "system", "content": "You fix bugs."},
                {"role": "user", "content": "Fix add."},
                {"role": "assistant", "content": "Looking.", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}},
                    {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"cat calc.py\"}"}},
                ]},
                {"role": "tool", "tool_call_id": "c1", "content": "calc.py\n"},
                {"role": "tool", "tool_call_id": "c2", "content": "def add(a, b): return a - b\n[exit code 0]"},
                {"role": "assistant", "tool_calls": [
                    {"id": "c3", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"sed -i s/-/+/ calc.py\"}"}},
                ]},
                {"role": "tool", "tool_call_id": "c3", "content": ""},
                {"role": "assistant", "content": "Fixed."},
            ],
            "tools": [{"type": "function", "function": {
                "name": "bash",
                "description": "Run one bash command.",
                "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
            }}],
            "parallel_tool_calls": true,
        });
        assert_eq!(line(&sample::example()), want);
        let mut off = sample::example();
        off.conversation.parallel_tool_calls = Some(false);
        assert_eq!(line(&off)["parallel_tool_calls"], false);
    }
}
