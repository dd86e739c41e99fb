//! One (task, epoch) as a conversation, whatever protocol recorded it: the
//! neutral form that `export`'s formats write out. Owns the reading of the
//! trajectory's `message` (OpenAI Chat Completions, Anthropic Messages or
//! OpenAI Responses form), `system`, `model_call` and `agent_end` events and of the
//! tools in the header's `request_template`; it knows no output format.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::agent::responses;
use crate::run_folder::Usage;
use crate::run_folder::trajectory::Event;

/// What the model was given and what it did, in order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(super) struct Conversation {
    pub system: Option<String>,
    /// The tools of the requests, in OpenAI's function form (`name`,
    /// `description`, `parameters`): an Anthropic `input_schema` is the
    /// same JSON schema under another name.
    pub tools: Vec<ToolSpec>,
    /// `parallel_tool_calls` as the requests carried it (`--model-arg`);
    /// `None` when they left it to the API's default.
    pub parallel_tool_calls: Option<bool>,
    pub messages: Vec<Message>,
    /// Tokens and cost of the whole agent phase (`agent_end`).
    pub usage: Option<Usage>,
    pub cost_usd: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(super) struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

impl ToolSpec {
    /// The tool in OpenAI's function form, which openai-chat and ATIF's
    /// `tool_definitions` both use.
    pub(super) fn openai_form(&self) -> Value {
        json!({
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(super) enum Message {
    User(String),
    Assistant {
        /// The model's text; `None` when it only called tools.
        text: Option<String>,
        calls: Vec<Call>,
        /// The usage of the model call that produced it.
        usage: Option<Usage>,
    },
    Tool {
        call_id: String,
        content: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(super) struct Call {
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them: a JSON text.
    pub arguments: String,
}

/// Why a trajectory gives no conversation to export.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum Unusable {
    #[error("its trajectory has no header")]
    NoHeader,
    #[error("its model sent no answer (oracle, noop, or a first call that failed)")]
    NoAnswer,
}

impl Conversation {
    /// The conversation a trajectory recorded. A last assistant message
    /// whose calls were not all answered (the task timed out in a command,
    /// or onebash was stopped) is left out with what follows it: every
    /// format wants a call's answer beside it.
    pub(super) fn from_events(events: &[Event]) -> Result<Conversation, Unusable> {
        let template = events
            .iter()
            .find_map(|event| match event {
                Event::Header {
                    request_template, ..
                } => Some(request_template),
                _ => None,
            })
            .ok_or(Unusable::NoHeader)?;
        let mut usage_of_turn: HashMap<u32, Usage> = HashMap::new();
        let mut conversation = Conversation {
            system: None,
            tools: tools_of(template),
            parallel_tool_calls: template.get("parallel_tool_calls").and_then(Value::as_bool),
            messages: Vec::new(),
            usage: None,
            cost_usd: None,
        };
        for event in events {
            match event {
                Event::System { content } => conversation.system = Some(content.clone()),
                Event::ModelCall { turn, usage, .. } => {
                    usage_of_turn.insert(*turn, *usage);
                }
                Event::Message { turn, message } => {
                    conversation.read_message(message, usage_of_turn.get(turn));
                }
                Event::AgentEnd {
                    usage, cost_usd, ..
                } => {
                    conversation.usage = Some(*usage);
                    conversation.cost_usd = *cost_usd;
                }
                _ => {}
            }
        }
        conversation.drop_unanswered_tail();
        if !conversation
            .messages
            .iter()
            .any(|m| matches!(m, Message::Assistant { .. }))
        {
            return Err(Unusable::NoAnswer);
        }
        Ok(conversation)
    }

    /// One `message` event, in any protocol's form.
    fn read_message(&mut self, message: &Value, usage: Option<&Usage>) {
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        let content = message.get("content").unwrap_or(&Value::Null);
        // The Responses API's answer (`{"role": "assistant", "output":
        // [items]}`) and its answer to a call (a `function_call_output`
        // item, which has no role).
        if role == "assistant" && message.get("output").is_some() {
            let text = responses::output_text(message).unwrap_or_default();
            let calls = responses::tool_calls_of(message)
                .into_iter()
                .map(|call| Call {
                    id: call.id,
                    name: call.name,
                    arguments: call.arguments,
                })
                .collect();
            self.messages.push(Message::Assistant {
                text: (!text.is_empty()).then_some(text),
                calls,
                usage: usage.copied(),
            });
            return;
        }
        if message.get("type").and_then(Value::as_str) == Some("function_call_output") {
            self.messages.push(Message::Tool {
                call_id: string(message, "call_id"),
                content: text_of(message.get("output").unwrap_or(&Value::Null)),
            });
            return;
        }
        match role {
            "system" => self.system = Some(text_of(content)),
            "user" => {
                // Anthropic answers tool calls in a user message of
                // `tool_result` blocks; anything else is the user's text.
                let results: Vec<&Value> = blocks(content, "tool_result").collect();
                if results.is_empty() {
                    self.messages.push(Message::User(text_of(content)));
                }
                for block in results {
                    self.messages.push(Message::Tool {
                        call_id: string(block, "tool_use_id"),
                        content: text_of(block.get("content").unwrap_or(&Value::Null)),
                    });
                }
            }
            "assistant" => {
                let mut calls: Vec<Call> = blocks(content, "tool_use")
                    .map(|block| Call {
                        id: string(block, "id"),
                        name: string(block, "name"),
                        arguments: block
                            .get("input")
                            .map_or_else(String::new, Value::to_string),
                    })
                    .collect();
                for call in message
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let function = call.get("function").unwrap_or(&Value::Null);
                    calls.push(Call {
                        id: string(call, "id"),
                        name: string(function, "name"),
                        arguments: string(function, "arguments"),
                    });
                }
                let text = text_of(content);
                self.messages.push(Message::Assistant {
                    text: (!text.is_empty()).then_some(text),
                    calls,
                    usage: usage.copied(),
                });
            }
            "tool" => self.messages.push(Message::Tool {
                call_id: string(message, "tool_call_id"),
                content: text_of(content),
            }),
            _ => {}
        }
    }

    fn drop_unanswered_tail(&mut self) {
        let Some(last) = self
            .messages
            .iter()
            .rposition(|m| matches!(m, Message::Assistant { .. }))
        else {
            return;
        };
        if let Message::Assistant { calls, .. } = &self.messages[last] {
            let answered = |id: &str| {
                self.messages[last..]
                    .iter()
                    .any(|m| matches!(m, Message::Tool { call_id, .. } if call_id == id))
            };
            if !calls.iter().all(|call| answered(&call.id)) {
                self.messages.truncate(last);
            }
        }
    }

    /// What makes two conversations the same for `export`'s dedupe: the
    /// system prompt, the tools, and every message (texts, tool names,
    /// arguments, outputs), hashed with SHA-256. Tool call ids are left
    /// out: a model makes them up anew on each run, and two runs that said
    /// and did the same are the same training example.
    pub(super) fn identity(&self) -> [u8; 32] {
        let mut ids: HashMap<String, usize> = HashMap::new();
        let mut index = |id: &str| -> usize {
            let next = ids.len();
            *ids.entry(id.to_owned()).or_insert(next)
        };
        let messages: Vec<Value> = self
            .messages
            .iter()
            .map(|m| match m {
                Message::User(text) => json!(["user", text]),
                Message::Assistant { text, calls, .. } => {
                    let calls: Vec<Value> = calls
                        .iter()
                        .map(|c| json!([index(&c.id), c.name, c.arguments]))
                        .collect();
                    json!(["assistant", text, calls])
                }
                Message::Tool { call_id, content } => json!(["tool", index(call_id), content]),
            })
            .collect();
        let key = json!([self.system, self.tools, messages]);
        Sha256::digest(key.to_string().as_bytes()).into()
    }

    /// Every text of the conversation, to rewrite in place (redaction).
    pub(super) fn texts_mut(&mut self) -> impl Iterator<Item = &mut String> {
        let system = self.system.iter_mut();
        let messages = self.messages.iter_mut().flat_map(|m| {
            let texts: Vec<&mut String> = match m {
                Message::User(text) => vec![text],
                Message::Assistant { text, calls, .. } => text
                    .iter_mut()
                    .chain(calls.iter_mut().map(|c| &mut c.arguments))
                    .collect(),
                Message::Tool { content, .. } => vec![content],
            };
            texts
        });
        system.chain(messages)
    }
}

/// The tools of a request template, in either wire form.
fn tools_of(template: &Value) -> Vec<ToolSpec> {
    template
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|tool| {
            // OpenAI nests the function; Anthropic has it at the top with
            // `input_schema` for `parameters`.
            let function = tool.get("function").unwrap_or(tool);
            ToolSpec {
                name: string(function, "name"),
                description: string(function, "description"),
                parameters: function
                    .get("parameters")
                    .or_else(|| function.get("input_schema"))
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
            }
        })
        .collect()
}

fn string(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The blocks of one type in a content array (none in a string content).
fn blocks<'a>(content: &'a Value, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    content
        .as_array()
        .into_iter()
        .flatten()
        .filter(move |block| block.get("type").and_then(Value::as_str) == Some(kind))
}

/// A content's text: a string as it is, the `text` blocks of an array
/// joined by blank lines (thinking and tool blocks are not text).
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(_) => blocks(content, "text")
            .filter_map(|block| block.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n\n"),
        _ => String::new(),
    }
}

/// Where a conversation comes from and how it ended: the metadata the
/// formats that have room for it carry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(super) struct Meta {
    /// The run folder, as given on the command line.
    pub run: String,
    pub task_id: String,
    pub epoch: u32,
    pub model: String,
    pub provider: String,
    /// The prompt variant's name and the sha256 of its file.
    pub prompt: String,
    pub prompt_sha256: String,
    pub onebash_version: String,
    pub status: String,
    pub passed: bool,
    pub exit_reason: String,
}

impl Meta {
    /// The header's part; the row's outcome is filled in by the caller.
    pub(super) fn of_header(events: &[Event]) -> Option<Meta> {
        events.iter().find_map(|event| match event {
            Event::Header {
                onebash_version,
                epoch,
                model,
                provider,
                prompt,
                ..
            } => Some(Meta {
                run: String::new(),
                task_id: String::new(),
                epoch: *epoch,
                model: model.clone(),
                provider: provider.clone(),
                prompt: prompt.name.clone(),
                prompt_sha256: prompt.sha256.clone(),
                onebash_version: onebash_version.clone(),
                status: String::new(),
                passed: false,
                exit_reason: String::new(),
            }),
            _ => None,
        })
    }
}

/// One exported line: a conversation and where it comes from.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Example {
    pub meta: Meta,
    pub conversation: Conversation,
}

/// A conversation of every kind of message, for the formats' tests.
#[cfg(test)]
pub(super) mod sample {
    use super::*;

    fn usage(prompt: u64, completion: u64) -> Option<Usage> {
        Some(Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            cached_tokens: 4,
            ..Usage::default()
        })
    }

    /// A system prompt, the task, a turn with two calls, a turn with one,
    /// and a final answer.
    pub(crate) fn example() -> Example {
        let call = |id: &str, command: &str| Call {
            id: id.to_owned(),
            name: "bash".to_owned(),
            arguments: json!({ "command": command }).to_string(),
        };
        let tool = |id: &str, content: &str| Message::Tool {
            call_id: id.to_owned(),
            content: content.to_owned(),
        };
        Example {
            meta: Meta {
                run: "results/r1".to_owned(),
                task_id: "calc-add".to_owned(),
                epoch: 2,
                model: "gpt-test".to_owned(),
                provider: "openai".to_owned(),
                prompt: "default".to_owned(),
                prompt_sha256: "69db3d003ca9ff".to_owned(),
                onebash_version: "0.1.0".to_owned(),
                status: "passed".to_owned(),
                passed: true,
                exit_reason: "completed".to_owned(),
            },
            conversation: Conversation {
                system: Some("You fix bugs.".to_owned()),
                tools: vec![ToolSpec {
                    name: "bash".to_owned(),
                    description: "Run one bash command.".to_owned(),
                    parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
                }],
                parallel_tool_calls: None,
                messages: vec![
                    Message::User("Fix add.".to_owned()),
                    Message::Assistant {
                        text: Some("Looking.".to_owned()),
                        calls: vec![call("c1", "ls"), call("c2", "cat calc.py")],
                        usage: usage(100, 10),
                    },
                    tool("c1", "calc.py\n"),
                    tool("c2", "def add(a, b): return a - b\n[exit code 0]"),
                    Message::Assistant {
                        text: None,
                        calls: vec![call("c3", "sed -i s/-/+/ calc.py")],
                        usage: usage(200, 20),
                    },
                    tool("c3", ""),
                    Message::Assistant {
                        text: Some("Fixed.".to_owned()),
                        calls: Vec::new(),
                        usage: usage(300, 5),
                    },
                ],
                usage: usage(600, 35),
                cost_usd: Some(0.0125),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_folder::trajectory::PromptInfo;

    fn header(tools: Value) -> Event {
        Event::Header {
            format_version: 1,
            onebash_version: "0.1.0".to_owned(),
            task: json!({"id": "t"}),
            epoch: 1,
            model: "m".to_owned(),
            provider: "openai".to_owned(),
            prompt: PromptInfo {
                name: "default".to_owned(),
                sha256: "abc".to_owned(),
            },
            repo: "r".to_owned(),
            base_commit: "HEAD".to_owned(),
            request_template: json!({"url": "http://x", "model": "m", "tools": tools}),
            settings: json!({}),
        }
    }

    fn message(turn: u32, message: Value) -> Event {
        Event::Message { turn, message }
    }

    fn call(turn: u32, prompt_tokens: u64) -> Event {
        Event::ModelCall {
            turn,
            latency_s: 0.1,
            usage: Usage {
                prompt_tokens,
                ..Usage::default()
            },
            finish_reason: None,
            response_id: None,
        }
    }

    fn openai_tools() -> Value {
        json!([{"type": "function", "function": {"name": "bash", "description": "d", "parameters": {"type": "object"}}}])
    }

    /// The same work recorded by the three protocols reads as the same
    /// conversation, ids aside.
    #[test]
    fn openai_anthropic_and_responses_wire_forms_read_alike() {
        let openai = vec![
            header(openai_tools()),
            message(0, json!({"role": "system", "content": "S"})),
            message(0, json!({"role": "user", "content": "U"})),
            call(1, 10),
            message(
                1,
                json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}]}),
            ),
            message(
                1,
                json!({"role": "tool", "tool_call_id": "call_1", "content": "a\n"}),
            ),
            call(2, 20),
            message(2, json!({"role": "assistant", "content": "Done."})),
        ];
        let anthropic = vec![
            header(
                json!([{"name": "bash", "description": "d", "input_schema": {"type": "object"}}]),
            ),
            Event::System {
                content: "S".to_owned(),
            },
            message(0, json!({"role": "user", "content": "U"})),
            call(1, 10),
            message(
                1,
                json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_9", "name": "bash", "input": {"command": "ls"}}]}),
            ),
            message(
                1,
                json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_9", "content": "a\n"}]}),
            ),
            call(2, 20),
            message(
                2,
                json!({"role": "assistant", "content": [{"type": "text", "text": "Done."}]}),
            ),
        ];
        // OpenAI's Responses API: the answer's output items as received
        // (reasoning first), the call answered by a function_call_output.
        let responses = vec![
            header(
                json!([{"type": "function", "name": "bash", "description": "d", "parameters": {"type": "object"}}]),
            ),
            Event::System {
                content: "S".to_owned(),
            },
            message(0, json!({"role": "user", "content": "U"})),
            call(1, 10),
            message(
                1,
                json!({"role": "assistant", "output": [
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e"},
                {"type": "function_call", "id": "fc_1", "call_id": "call_r", "name": "bash", "arguments": "{\"command\":\"ls\"}"}]}),
            ),
            message(
                1,
                json!({"type": "function_call_output", "call_id": "call_r", "output": "a\n"}),
            ),
            call(2, 20),
            message(
                2,
                json!({"role": "assistant", "output": [{"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}]}),
            ),
        ];
        let r = Conversation::from_events(&responses).expect("responses");
        assert!(
            matches!(&r.messages[1], Message::Assistant { text: None, calls, usage: Some(u) }
            if calls[0].id == "call_r" && calls[0].arguments == r#"{"command":"ls"}"# && u.prompt_tokens == 10),
            "{r:?}"
        );
        assert!(
            matches!(&r.messages[2], Message::Tool { call_id, content } if call_id == "call_r" && content == "a\n")
        );
        assert!(matches!(&r.messages[3], Message::Assistant { text: Some(t), .. } if t == "Done."));
        let a = Conversation::from_events(&openai).expect("openai");
        assert_eq!(r.identity(), a.identity());
        assert_eq!(r.tools, a.tools);
        let b = Conversation::from_events(&anthropic).expect("anthropic");
        assert_eq!(a.system.as_deref(), Some("S"));
        assert_eq!(a.tools, b.tools);
        assert_eq!(a.tools[0].parameters, json!({"type": "object"}));
        assert_eq!(a.messages.len(), 4);
        assert!(
            matches!(&a.messages[1], Message::Assistant { text: None, calls, usage: Some(u) }
            if calls[0].arguments == r#"{"command":"ls"}"# && u.prompt_tokens == 10)
        );
        assert!(
            matches!(&b.messages[2], Message::Tool { call_id, content } if call_id == "toolu_9" && content == "a\n")
        );
        assert_eq!(a.identity(), b.identity());
        // One output more and they differ.
        let mut c = b.clone();
        c.messages[2] = Message::Tool {
            call_id: "toolu_9".to_owned(),
            content: "b\n".to_owned(),
        };
        assert_ne!(a.identity(), c.identity());
    }

    #[test]
    fn an_unanswered_last_call_is_cut_and_no_answer_is_unusable() {
        let events = vec![
            header(openai_tools()),
            message(0, json!({"role": "user", "content": "U"})),
            message(
                1,
                json!({"role": "assistant", "content": "Hm.", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}),
            ),
            message(
                1,
                json!({"role": "tool", "tool_call_id": "c1", "content": "x"}),
            ),
            message(
                2,
                json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}),
            ),
        ];
        let conversation = Conversation::from_events(&events).expect("usable");
        assert_eq!(conversation.messages.len(), 3);
        assert_eq!(
            Conversation::from_events(&events[..2]),
            Err(Unusable::NoAnswer)
        );
        assert_eq!(
            Conversation::from_events(&events[1..]),
            Err(Unusable::NoHeader)
        );
    }
}
