//! `export --format sharegpt`: ShareGPT as LLaMA-Factory's `sharegpt`
//! formatting reads it, with tools: `conversations` of `{from, value}`
//! turns that alternate human/observation with gpt/function_call, `system`,
//! and `tools` (a JSON text of the function definitions), plus `metadata`.
//!
//! A turn's tool calls are one `function_call` turn (a JSON text of
//! `{name, arguments}`, or a list of them for several calls) and their
//! outputs one `observation` turn (the output, or a JSON list of outputs
//! for several calls): the alternation leaves room for nothing else. So
//! the text a model wrote beside its tool calls is not kept here (the
//! openai-chat and atif formats keep it), and a conversation that ends on
//! an observation (stopped by a limit) ends on the calls before it.

use serde_json::{Value, json};

use super::conversation::{Call, Example, Message};

pub(super) fn line(example: &Example) -> Value {
    let c = &example.conversation;
    let mut turns: Vec<Value> = Vec::new();
    let mut outputs: Vec<&str> = Vec::new();
    for message in &c.messages {
        if !matches!(message, Message::Tool { .. }) && !outputs.is_empty() {
            turns.push(observation(&outputs));
            outputs.clear();
        }
        match message {
            Message::User(text) => turns.push(json!({"from": "human", "value": text})),
            Message::Assistant { text, calls, .. } if calls.is_empty() => {
                turns.push(json!({"from": "gpt", "value": text.as_deref().unwrap_or("")}));
            }
            Message::Assistant { calls, .. } => {
                turns.push(json!({"from": "function_call", "value": function_call(calls)}));
            }
            Message::Tool { content, .. } => outputs.push(content),
        }
    }
    // A last observation has no answer after it: left out, so the turns
    // end on the model's side as the trainer wants.
    let tools: Vec<Value> = c
        .tools
        .iter()
        .map(|tool| json!({"name": tool.name, "description": tool.description, "parameters": tool.parameters}))
        .collect();
    let mut line = json!({
        "conversations": turns,
        "tools": Value::Array(tools).to_string(),
        "metadata": example.meta,
    });
    if let Some(system) = &c.system {
        line["system"] = json!(system);
    }
    line
}

fn function_call(calls: &[Call]) -> String {
    let one = |call: &Call| {
        // Arguments that are not JSON (a model's slip) stay a string.
        let arguments = serde_json::from_str::<Value>(&call.arguments)
            .unwrap_or_else(|_| Value::String(call.arguments.clone()));
        json!({"name": call.name, "arguments": arguments})
    };
    match calls {
        [call] => one(call).to_string(),
        _ => Value::Array(calls.iter().map(one).collect()).to_string(),
    }
}

fn observation(outputs: &[&str]) -> Value {
    let value = match outputs {
        [output] => (*output).to_owned(),
        _ => json!(outputs).to_string(),
    };
    json!({"from": "observation", "value": value})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::export::conversation::sample;

    #[test]
    fn turns_alternate_and_tools_are_a_json_text() {
        let line = line(&sample::example());
        let want_turns = json!([
            {"from": "human", "value": "Fix add."},
            {"from": "function_call", "value": r#"[{"arguments":{"command":"ls"},"name":"bash"},{"arguments":{"command":"cat calc.py"},"name":"bash"}]"#},
            {"from": "observation", "value": r#"["calc.py\n","def add(a, b): return a - b\n[exit code 0]"]"#},
            {"from": "function_call", "value": r#"{"arguments":{"command":"sed -i s/-/+/ calc.py"},"name":"bash"}"#},
            {"from": "observation", "value": ""},
            {"from": "gpt", "value": "Fixed."},
        ]);
        assert_eq!(line["conversations"], want_turns);
        assert_eq!(line["system"], "You fix bugs.");
        assert_eq!(
            line["tools"],
            r#"[{"description":"Run one bash command.","name":"bash","parameters":{"properties":{"command":{"type":"string"}},"required":["command"],"type":"object"}}]"#
        );
        assert_eq!(line["metadata"]["prompt"], "default");
        assert_eq!(line["metadata"]["task_id"], "calc-add");
    }

    #[test]
    fn a_conversation_stopped_after_a_command_ends_on_its_call() {
        let mut example = sample::example();
        example.conversation.messages.pop();
        let line = line(&example);
        let turns = line["conversations"].as_array().expect("turns");
        assert_eq!(turns.len(), 4);
        assert_eq!(turns[3]["from"], "function_call");
    }
}
