//! `--model oracle`: a model that applies the task's gold patch with one bash
//! call and then stops. It checks that a task is solvable and that the
//! harness grades a right answer as right, with no API. `--model noop`, its
//! opposite, changes nothing: every task must fail under it. The pieces
//! of a scripted answer (bash calls, a final text) are shared with
//! `predictions.rs`; both write their patch by `patch_file.rs`.

use serde_json::{Value, json};

use crate::agent::patch_file::patch_commands;
use crate::agent::types::{ModelError, ModelReply, ToolCall};
use crate::run_folder::Usage;
use crate::task::{Oracle, TaskSpec};

/// The oracle's answer to a history: a tool call that applies the gold patch
/// when it has not answered yet, else a final text.
pub(crate) fn complete(task: &TaskSpec, messages: &[Value]) -> Result<ModelReply, ModelError> {
    if answered(messages) > 0 {
        return Ok(final_text("Applied the gold patch."));
    }
    // What the oracle runs is the task's benchmark's answer: its gold
    // patch applied, or a command of its own run in place.
    let commands = match task.benchmark.oracle(task.gold_patch.as_deref()) {
        Oracle::Patch(patch) => apply_commands(patch),
        Oracle::Command(command) => vec![command],
        Oracle::Missing(what) => {
            return Err(ModelError::Malformed(format!(
                "task {} has no {what} for the oracle",
                task.id
            )));
        }
    };
    Ok(bash_calls("oracle", &commands))
}

/// The `noop` model's answer: no tool call, nothing changed.
pub(crate) fn nothing() -> ModelReply {
    final_text("I change nothing.")
}

fn reply(message: Value, tool_calls: Vec<ToolCall>, finish_reason: &str) -> ModelReply {
    ModelReply {
        message,
        tool_calls,
        cut: false,
        finish_reason: Some(finish_reason.to_owned()),
        usage: Usage::default(),
        response_id: None,
    }
}

/// Writes the patch to a file ([`patch_commands`]: one call, or several
/// for a large patch), then applies it with the fallbacks SWE-bench uses:
/// `git apply`, `git apply --3way`, `patch --fuzz=5`. The output says
/// which worked.
fn apply_commands(patch: &str) -> Vec<String> {
    let script = "\
         if git apply --whitespace=nowarn \"$gold\"; then echo 'onebash: applied with git apply'\n\
         elif git apply --whitespace=nowarn --3way \"$gold\"; then echo 'onebash: applied with git apply --3way'\n\
         elif patch --batch --no-backup-if-mismatch --fuzz=5 -p1 -i \"$gold\"; then echo 'onebash: applied with patch --fuzz=5'\n\
         else echo 'onebash: the gold patch does not apply' >&2; rm -f \"$gold\"; exit 1; fi\n\
         rm -f \"$gold\"";
    patch_commands("gold", "ONEBASH_GOLD_PATCH", patch, script)
}

/// A reply of bash tool calls, one a command, run in order; the calls'
/// ids are `{prefix}-1`, `{prefix}-2`...
pub(crate) fn bash_calls(prefix: &str, commands: &[String]) -> ModelReply {
    let calls: Vec<ToolCall> = commands
        .iter()
        .enumerate()
        .map(|(i, command)| ToolCall {
            id: format!("{prefix}-{}", i + 1),
            name: "bash".to_owned(),
            arguments: json!({"command": command}).to_string(),
        })
        .collect();
    let message = json!({
        "role": "assistant",
        "content": null,
        "tool_calls": calls.iter().map(|call| json!({
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        })).collect::<Vec<_>>(),
    });
    reply(message, calls, "tool_calls")
}

/// A final reply of `text`, with no tool call.
pub(crate) fn final_text(text: &str) -> ModelReply {
    reply(
        json!({"role": "assistant", "content": text}),
        Vec::new(),
        "stop",
    )
}

/// How many answers the model gave in `messages` (the oracle's and the
/// predictions' answers are counted, not remembered).
pub(crate) fn answered(messages: &[Value]) -> usize {
    messages
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::parse_tasks;
    use std::path::Path;

    #[test]
    fn applies_then_stops() {
        let line = r#"{"id":"t","repo":"r","base_commit":"c","problem_statement":"p","test_command":"t","gold_patch":"diff\nONEBASH_GOLD_PATCH\n"}"#;
        let task = parse_tasks(line, "f", Path::new("/"))
            .expect("valid")
            .remove(0);
        let first = complete(&task, &[]).expect("reply");
        assert_eq!(first.tool_calls.len(), 1);
        let args: Value = serde_json::from_str(&first.tool_calls[0].arguments).expect("json");
        let command = args["command"].as_str().expect("command");
        assert!(command.starts_with("gold=$(mktemp) && cat > \"$gold\" <<'ONEBASH_GOLD_PATCH_'\n"));
        assert!(command.contains("\nONEBASH_GOLD_PATCH_\nif git apply"));
        assert!(command.contains("--3way") && command.contains("patch --batch"));
        let second = complete(&task, &[first.message]).expect("reply");
        assert!(second.tool_calls.is_empty());
    }
}
