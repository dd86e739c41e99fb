//! The one tool, `bash`: checks a tool call, runs its command through the
//! executor and writes what the model reads. It never fails: a bad call or a
//! command that cannot start becomes a text the model reads.

use std::time::Duration;

use serde_json::Value;

use crate::agent::types::ToolCall;
use crate::env::Shell;
use crate::run_folder::trajectory::CommandRecord;
use crate::sys::exec::CommandOutcome;

/// About how many characters of output the model sees: half from the start,
/// half from the end.
pub(crate) const MODEL_VIEW_CHARS: usize = 10_000;

/// What a tool call produced.
pub(crate) enum ToolAnswer {
    /// The command ran: the model reads `content`.
    Ran {
        content: String,
        record: CommandRecord,
        shown_chars: usize,
    },
    /// The call could not be run: the model reads `content`, an error.
    Rejected { content: String },
}

impl ToolAnswer {
    pub(crate) fn content(&self) -> &str {
        match self {
            ToolAnswer::Ran { content, .. } | ToolAnswer::Rejected { content } => content,
        }
    }
}

/// Checks the call and runs it.
pub(crate) async fn answer(call: &ToolCall, shell: Shell<'_>, timeout: Duration) -> ToolAnswer {
    let command = match command_of(call) {
        Ok(command) => command,
        Err(bad) => {
            return ToolAnswer::Rejected {
                content: bad.to_string(),
            };
        }
    };
    match shell.run(&command, timeout).await {
        Ok(outcome) => {
            let (content, shown_chars) = model_view(&outcome, timeout);
            ToolAnswer::Ran {
                content,
                shown_chars,
                record: CommandRecord::new(&command, &outcome),
            }
        }
        Err(err) => ToolAnswer::Rejected {
            content: format!("error: the command could not be started: {err}"),
        },
    }
}

/// Why a tool call cannot be run; the text is what the model reads
/// instead, saying how to call the tool.
#[derive(Debug, thiserror::Error)]
enum BadCall {
    #[error(
        "error: there is no tool named {0:?}; the only tool is `bash`, called with {{\"command\": \"...\"}}"
    )]
    NoSuchTool(String),
    /// `start` is the arguments' first 200 characters.
    #[error(
        "error: the arguments of this call are not valid JSON ({source}): {start:?}; call `bash` with a JSON object such as {{\"command\": \"ls\"}}"
    )]
    NotJson {
        source: serde_json::Error,
        start: String,
    },
    #[error("error: `command` is empty; give the command to run")]
    EmptyCommand,
    #[error(
        "error: `command` must be a string, got {0}; call `bash` with {{\"command\": \"...\"}}"
    )]
    NotAString(Value),
    #[error("error: the call has no `command` argument; call `bash` with {{\"command\": \"...\"}}")]
    NoCommand,
}

/// The `command` argument, or why the call cannot be run.
fn command_of(call: &ToolCall) -> Result<String, BadCall> {
    if call.name != "bash" {
        return Err(BadCall::NoSuchTool(call.name.clone()));
    }
    let arguments: Value =
        serde_json::from_str(&call.arguments).map_err(|source| BadCall::NotJson {
            source,
            start: call.arguments.chars().take(200).collect(),
        })?;
    match arguments.get("command") {
        Some(Value::String(command)) if !command.trim().is_empty() => Ok(command.clone()),
        Some(Value::String(_)) => Err(BadCall::EmptyCommand),
        Some(other) => Err(BadCall::NotAString(other.clone())),
        None => Err(BadCall::NoCommand),
    }
}

/// What the model reads: the output (shortened in the middle when long, with
/// a line saying how much was cut and how to see it), then the exit code and
/// a note if the command timed out. Returns the text and how many characters
/// of output it shows.
fn model_view(outcome: &CommandOutcome, timeout: Duration) -> (String, usize) {
    let output = &outcome.output;
    let half = MODEL_VIEW_CHARS / 2;
    let (head, tail) = if output.omitted_bytes() == 0 {
        let text = output.to_text();
        if text.chars().count() <= MODEL_VIEW_CHARS {
            (text, String::new())
        } else {
            (first_chars(&text, half), last_chars(&text, half))
        }
    } else {
        (
            first_chars(&output.head_text(), half),
            last_chars(&output.tail_text(), half),
        )
    };
    let shown_chars = head.chars().count() + tail.chars().count();
    let mut content = head.clone();
    if !tail.is_empty() {
        let shown_bytes = (head.len() + tail.len()) as u64;
        let shown_lines = (head.matches('\n').count() + tail.matches('\n').count()) as u64;
        let cut_bytes = output.total_bytes().saturating_sub(shown_bytes);
        let cut_lines = output.total_lines().saturating_sub(shown_lines);
        if !content.ends_with('\n') {
            content.push('\n');
        }
        content.push_str(&format!(
            "[... output shortened: {cut_bytes} of {} bytes ({cut_lines} lines) cut here. \
             To see them, send the output to a file and read it in parts with head, tail, grep or sed -n ...]\n",
            output.total_bytes()
        ));
        content.push_str(&tail);
    }
    if content.is_empty() {
        content.push_str("(no output)");
    }
    if !content.ends_with('\n') {
        content.push('\n');
    }
    if outcome.timed_out {
        content.push_str(&format!(
            "[the command timed out after {} s and was killed, with every process it started; \
             run long jobs with a shorter scope or in the background]\n",
            format_seconds(timeout)
        ));
    }
    content.push_str(&format!("[exit code: {}]", outcome.exit_code));
    (content, shown_chars)
}

fn format_seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0}")
    } else {
        format!("{s:.1}")
    }
}

fn first_chars(text: &str, n: usize) -> String {
    text.chars().take(n).collect()
}

fn last_chars(text: &str, n: usize) -> String {
    let count = text.chars().count();
    text.chars().skip(count.saturating_sub(n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::exec::CapturedOutput;

    fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn bad_calls_become_error_texts() {
        let cases = [
            (
                call("python", r#"{"command":"ls"}"#),
                "there is no tool named \"python\"",
            ),
            (call("bash", "{not json"), "not valid JSON"),
            (call("bash", r#"{"cmd":"ls"}"#), "no `command` argument"),
            (
                call("bash", r#"{"command":5}"#),
                "`command` must be a string, got 5",
            ),
            (call("bash", r#"{"command":"  "}"#), "`command` is empty"),
            (call("bash", r#""ls""#), "no `command` argument"),
        ];
        for (call, expected) in cases {
            let err = command_of(&call).expect_err(expected).to_string();
            assert!(err.contains(expected), "{err}");
            assert!(err.starts_with("error: "));
        }
        assert_eq!(
            command_of(&call("bash", r#"{"command":"ls -la"}"#)).expect("ok"),
            "ls -la"
        );
    }

    fn outcome(text: &str, timed_out: bool) -> CommandOutcome {
        let mut output = CapturedOutput::new(1 << 20, 1 << 20);
        output.push(text.as_bytes());
        CommandOutcome {
            exit_code: if timed_out { 137 } else { 0 },
            signal: None,
            timed_out,
            duration: Duration::from_millis(5),
            output,
            notice: None,
        }
    }

    #[test]
    fn short_output_is_shown_whole_with_the_exit_code() {
        let (text, shown) = model_view(&outcome("hello\n", false), Duration::from_secs(5));
        assert_eq!(text, "hello\n[exit code: 0]");
        assert_eq!(shown, 6);
        let (text, _) = model_view(&outcome("", false), Duration::from_secs(5));
        assert_eq!(text, "(no output)\n[exit code: 0]");
    }

    #[test]
    fn long_output_keeps_head_and_tail_and_says_what_was_cut() {
        let long: String = (0..5000).map(|i| format!("line {i}\n")).collect();
        let (text, shown) = model_view(&outcome(&long, false), Duration::from_secs(5));
        assert_eq!(shown, MODEL_VIEW_CHARS);
        assert!(text.starts_with("line 0\n"));
        assert!(text.contains("line 4999\n[exit code: 0]"));
        assert!(text.contains("bytes ("));
        assert!(text.contains("lines) cut here"));
        assert!(text.len() < MODEL_VIEW_CHARS + 400);
    }

    #[test]
    fn timeouts_are_said_clearly() {
        let (text, _) = model_view(&outcome("partial", true), Duration::from_secs(3));
        assert!(text.contains("partial\n[the command timed out after 3 s and was killed"));
        assert!(text.ends_with("[exit code: 137]"));
    }
}
