//! `export --format atif`: Harbor's Agent Trajectory Interchange Format
//! (RFC 0001), one trajectory a line. `schema_version` ATIF-v1.6;
//! `agent` names onebash, the model and the tools (`tool_definitions`, in
//! OpenAI's function form, as ATIF asks); `steps` are the system prompt
//! (source `system`), the task (`user`), then one `agent` step per model
//! answer with its text, its `tool_calls` (arguments as an object), the
//! `observation` of their outputs (each result names its call) and the
//! call's `metrics`; `final_metrics` sums the agent phase. The row's
//! outcome and the prompt variant go in the root's `extra.onebash`.

use serde_json::{Map, Value, json};

use super::conversation::{Example, Message, ToolSpec};

pub(super) const SCHEMA_VERSION: &str = "ATIF-v1.6";

pub(super) fn line(example: &Example) -> Value {
    let (meta, c) = (&example.meta, &example.conversation);
    let mut steps: Vec<Value> = Vec::new();
    let mut step = |mut fields: Map<String, Value>| {
        fields.insert("step_id".into(), json!(steps.len() + 1));
        steps.push(Value::Object(fields));
        steps.len() - 1
    };
    let mut last_agent_step = None;
    if let Some(system) = &c.system {
        step(object(json!({"source": "system", "message": system})));
    }
    // The outputs of an agent step's calls, gathered until the next step.
    let mut results: Vec<Value> = Vec::new();
    let mut pending: Vec<(usize, Vec<Value>)> = Vec::new();
    for message in &c.messages {
        match message {
            Message::Tool { call_id, content } => {
                results.push(json!({"source_call_id": call_id, "content": content}));
                continue;
            }
            _ => {
                if let Some(index) = last_agent_step.take() {
                    pending.push((index, std::mem::take(&mut results)));
                }
            }
        }
        match message {
            Message::User(text) => {
                step(object(json!({"source": "user", "message": text})));
            }
            Message::Assistant { text, calls, usage } => {
                let mut fields = object(json!({
                    "source": "agent",
                    "message": text.as_deref().unwrap_or(""),
                }));
                if !calls.is_empty() {
                    let calls: Vec<Value> = calls
                        .iter()
                        .map(|call| {
                            json!({
                                "tool_call_id": call.id,
                                "function_name": call.name,
                                "arguments": arguments(&call.arguments),
                            })
                        })
                        .collect();
                    fields.insert("tool_calls".into(), Value::Array(calls));
                }
                if let Some(usage) = usage {
                    fields.insert(
                        "metrics".into(),
                        json!({
                            "prompt_tokens": usage.prompt_tokens,
                            "completion_tokens": usage.completion_tokens,
                            "cached_tokens": usage.cached_tokens,
                        }),
                    );
                }
                last_agent_step = Some(step(fields));
            }
            Message::Tool { .. } => {}
        }
    }
    if let Some(index) = last_agent_step {
        pending.push((index, results));
    }
    for (index, results) in pending {
        if !results.is_empty() {
            steps[index]["observation"] = json!({ "results": results });
        }
    }
    let mut final_metrics = json!({"total_steps": steps.len()});
    if let Some(usage) = &c.usage {
        final_metrics["total_prompt_tokens"] = json!(usage.prompt_tokens);
        final_metrics["total_completion_tokens"] = json!(usage.completion_tokens);
        final_metrics["total_cached_tokens"] = json!(usage.cached_tokens);
    }
    if let Some(cost) = c.cost_usd {
        final_metrics["total_cost_usd"] = json!(cost);
    }
    let tools: Vec<Value> = c.tools.iter().map(ToolSpec::openai_form).collect();
    json!({
        "schema_version": SCHEMA_VERSION,
        "session_id": format!("{}/{}/epoch-{}", meta.run, meta.task_id, meta.epoch),
        "agent": {
            "name": "onebash",
            "version": meta.onebash_version,
            "model_name": meta.model,
            "tool_definitions": tools,
            "extra": {"provider": meta.provider, "prompt": {"name": meta.prompt, "sha256": meta.prompt_sha256}},
        },
        "steps": steps,
        "final_metrics": final_metrics,
        "extra": {"onebash": meta},
    })
}

/// ATIF wants the arguments as an object: a model's arguments that are no
/// JSON object are kept whole under `raw`.
fn arguments(text: &str) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Value::Object(map),
        _ => json!({ "raw": text }),
    }
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::export::conversation::sample;

    #[test]
    fn steps_carry_calls_their_observations_and_metrics() {
        let line = line(&sample::example());
        let metrics = |p: u64, c: u64| json!({"prompt_tokens": p, "completion_tokens": c, "cached_tokens": 4});
        let call = |id: &str, command: &str| json!({"tool_call_id": id, "function_name": "bash", "arguments": {"command": command}});
        let result = |id: &str, content: &str| json!({"source_call_id": id, "content": content});
        let want_steps = json!([
            {"step_id": 1, "source": "system", "message": "You fix bugs."},
            {"step_id": 2, "source": "user", "message": "Fix add."},
            {"step_id": 3, "source": "agent", "message": "Looking.",
             "tool_calls": [call("c1", "ls"), call("c2", "cat calc.py")],
             "observation": {"results": [result("c1", "calc.py\n"), result("c2", "def add(a, b): return a - b\n[exit code 0]")]},
             "metrics": metrics(100, 10)},
            {"step_id": 4, "source": "agent", "message": "",
             "tool_calls": [call("c3", "sed -i s/-/+/ calc.py")],
             "observation": {"results": [result("c3", "")]},
             "metrics": metrics(200, 20)},
            {"step_id": 5, "source": "agent", "message": "Fixed.", "metrics": metrics(300, 5)},
        ]);
        assert_eq!(line["steps"], want_steps);
        assert_eq!(line["schema_version"], "ATIF-v1.6");
        assert_eq!(line["session_id"], "results/r1/calc-add/epoch-2");
        assert_eq!(
            line["final_metrics"],
            json!({"total_steps": 5, "total_prompt_tokens": 600, "total_completion_tokens": 35,
                   "total_cached_tokens": 4, "total_cost_usd": 0.0125})
        );
        assert_eq!(line["agent"]["name"], "onebash");
        assert_eq!(line["agent"]["model_name"], "gpt-test");
        assert_eq!(
            line["agent"]["tool_definitions"][0]["function"]["name"],
            "bash"
        );
        assert_eq!(line["agent"]["extra"]["prompt"]["name"], "default");
        assert_eq!(line["extra"]["onebash"]["exit_reason"], "completed");
    }

    #[test]
    fn arguments_that_are_no_object_are_kept_under_raw() {
        assert_eq!(arguments(r#"{"command":"ls"}"#), json!({"command": "ls"}));
        assert_eq!(arguments("ls -la"), json!({"raw": "ls -la"}));
        assert_eq!(arguments("[1]"), json!({"raw": "[1]"}));
    }
}
