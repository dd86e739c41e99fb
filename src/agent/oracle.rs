//! `--model oracle`: a model that applies the task's gold patch with one bash
//! call and then stops. It checks that a task is solvable and that the
//! harness grades a right answer as right, with no API. `--model noop`, its
//! opposite, changes nothing: every task must fail under it.

use serde_json::{Value, json};

use crate::agent::types::{ModelError, ModelReply, ToolCall};
use crate::run_folder::Usage;
use crate::task::TaskSpec;

/// The oracle's answer to a history: a tool call that applies the gold patch
/// when it has not answered yet, else a final text.
pub(crate) fn complete(task: &TaskSpec, messages: &[Value]) -> Result<ModelReply, ModelError> {
    let answered = messages
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .count();
    if answered > 0 {
        return Ok(reply(
            json!({"role": "assistant", "content": "Applied the gold patch."}),
            Vec::new(),
            "stop",
        ));
    }
    // A Harbor task's oracle is its solution/solve.sh, run in place.
    let command = match &task.harbor {
        Some(harbor) => crate::task::harbor::oracle_command(harbor).ok_or_else(|| {
            ModelError::Malformed(format!(
                "task {} has no solution/solve.sh for the oracle",
                task.id
            ))
        })?,
        None => apply_command(task.gold_patch.as_deref().ok_or_else(|| {
            ModelError::Malformed(format!("task {} has no gold_patch for the oracle", task.id))
        })?),
    };
    let call = ToolCall {
        id: "oracle-1".to_owned(),
        name: "bash".to_owned(),
        arguments: json!({"command": command}).to_string(),
    };
    let message = json!({
        "role": "assistant",
        "content": null,
        "tool_calls": [{
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }],
    });
    Ok(reply(message, vec![call], "tool_calls"))
}

/// The `noop` model's answer: no tool call, nothing changed.
pub(crate) fn nothing() -> ModelReply {
    reply(
        json!({"role": "assistant", "content": "I change nothing."}),
        Vec::new(),
        "stop",
    )
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

/// Writes the patch to a file with a quoted heredoc (whose delimiter is
/// chosen so it cannot occur in the patch), then applies it with the
/// fallbacks SWE-bench uses: `git apply`, `git apply --3way`, `patch
/// --fuzz=5`. The output says which worked.
fn apply_command(patch: &str) -> String {
    let mut delimiter = "ONEBASH_GOLD_PATCH".to_owned();
    while patch.lines().any(|line| line == delimiter) {
        delimiter.push('_');
    }
    let newline = if patch.ends_with('\n') { "" } else { "\n" };
    format!(
        "gold=$(mktemp) && cat > \"$gold\" <<'{delimiter}'\n{patch}{newline}{delimiter}\n\
         if git apply --whitespace=nowarn \"$gold\"; then echo 'onebash: applied with git apply'\n\
         elif git apply --whitespace=nowarn --3way \"$gold\"; then echo 'onebash: applied with git apply --3way'\n\
         elif patch --batch --no-backup-if-mismatch --fuzz=5 -p1 -i \"$gold\"; then echo 'onebash: applied with patch --fuzz=5'\n\
         else echo 'onebash: the gold patch does not apply' >&2; rm -f \"$gold\"; exit 1; fi\n\
         rm -f \"$gold\""
    )
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
