//! `onebash show RUN_DIR TASK_ID [--epoch K]` (or a trajectory file): one
//! task's conversation, readable in a terminal. Turn numbers, the model's
//! text, each command with its exit code and duration, output shortened
//! with a count of what was cut, tokens per turn, the test verdict.
//! Colours on a terminal, none with NO_COLOR or a pipe.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::trajectory::read_events;

/// Lines of a command's output shown from its start and from its end.
const SHOWN_LINES: usize = 12;

pub fn show(target: &Path, task: Option<&str>, epoch: u32) -> Result<String, String> {
    let path = trajectory_path(target, task, epoch)?;
    let events =
        read_events(&path).map_err(|err| format!("failed to read {}: {err}", path.display()))?;
    if events.is_empty() {
        return Err(format!("{} holds no event", path.display()));
    }
    let colors = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    Ok(render(&events, colors))
}

fn trajectory_path(target: &Path, task: Option<&str>, epoch: u32) -> Result<PathBuf, String> {
    if target.is_file() {
        return Ok(target.to_owned());
    }
    let task = task.ok_or_else(|| {
        format!(
            "{} is a run folder: name the task too (onebash show RUN_DIR TASK_ID)",
            target.display()
        )
    })?;
    let path = target
        .join("tasks")
        .join(task)
        .join(format!("epoch-{epoch}"))
        .join("trajectory.jsonl");
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "no trajectory for task {task} epoch {epoch} in {} (looked for {})",
            target.display(),
            path.display()
        ))
    }
}

struct Style {
    on: bool,
}

impl Style {
    fn paint(&self, code: &str, text: &str) -> String {
        if self.on {
            format!("\u{1b}[{code}m{text}\u{1b}[0m")
        } else {
            text.to_owned()
        }
    }
    fn bold(&self, t: &str) -> String {
        self.paint("1", t)
    }
    fn dim(&self, t: &str) -> String {
        self.paint("2", t)
    }
    fn green(&self, t: &str) -> String {
        self.paint("32", t)
    }
    fn red(&self, t: &str) -> String {
        self.paint("31", t)
    }
    fn cyan(&self, t: &str) -> String {
        self.paint("36", t)
    }
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        // Anthropic's blocks: the text ones.
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn shorten(output: &str) -> String {
    let lines: Vec<&str> = output.lines().collect();
    if lines.len() <= 2 * SHOWN_LINES {
        return lines.join("\n");
    }
    format!(
        "{}\n[... {} lines cut ...]\n{}",
        lines[..SHOWN_LINES].join("\n"),
        lines.len() - 2 * SHOWN_LINES,
        lines[lines.len() - SHOWN_LINES..].join("\n")
    )
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn seconds(v: &Value) -> String {
    format!("{:.2} s", v.as_f64().unwrap_or(0.0))
}

pub fn render(events: &[Value], colors: bool) -> String {
    let s = Style { on: colors };
    let mut out = Vec::new();
    for event in events {
        match event["event"].as_str().unwrap_or("") {
            "header" => {
                out.push(s.bold(&format!(
                    "task {}  epoch {}  model {}  prompt {}",
                    event["task"]["id"].as_str().unwrap_or("?"),
                    event["epoch"],
                    event["model"].as_str().unwrap_or("?"),
                    event["prompt"]["name"].as_str().unwrap_or("?"),
                )));
                out.push(s.dim(&format!(
                    "repo {} at {}",
                    event["repo"].as_str().unwrap_or("?"),
                    event["base_commit"].as_str().unwrap_or("?")
                )));
            }
            "checkout" => out.push(s.dim(&format!(
                "checked out {} in {}",
                event["commit"].as_str().unwrap_or("?"),
                seconds(&event["duration_s"])
            ))),
            "setup" => out.push(format!(
                "{} {}  [exit {}, {}]",
                s.cyan("setup $"),
                event["command"].as_str().unwrap_or(""),
                event["exit_code"],
                seconds(&event["duration_s"])
            )),
            "system" => {}
            "message" => {
                let message = &event["message"];
                let role = message["role"].as_str().unwrap_or("");
                let turn = event["turn"].as_u64().unwrap_or(0);
                match role {
                    "user" if turn == 0 => {
                        out.push(String::new());
                        out.push(s.bold("problem:"));
                        out.push(indent(&shorten(&text_of(&message["content"]))));
                    }
                    "assistant" => {
                        let text = text_of(&message["content"]);
                        if !text.trim().is_empty() {
                            out.push(format!("{} {}", s.bold("model:"), text.trim()));
                        }
                    }
                    _ => {}
                }
            }
            "model_call" => {
                let usage = &event["usage"];
                out.push(String::new());
                out.push(s.bold(&format!(
                    "--- turn {} ---  {} + {} tokens, {}",
                    event["turn"],
                    usage["prompt_tokens"],
                    usage["completion_tokens"],
                    seconds(&event["latency_s"])
                )));
            }
            "model_retry" => out.push(s.dim(&format!(
                "(retry {} after {}: {})",
                event["retry"],
                seconds(&event["wait_s"]),
                event["error"].as_str().unwrap_or("")
            ))),
            "model_error" => out.push(s.red(&format!(
                "model error: {}",
                event["error"].as_str().unwrap_or("")
            ))),
            "command" => {
                let code = event["exit_code"].as_i64().unwrap_or(-1);
                let status = format!(
                    "[exit {code}{}, {}]",
                    if event["timed_out"].as_bool() == Some(true) {
                        ", timed out"
                    } else {
                        ""
                    },
                    seconds(&event["duration_s"])
                );
                out.push(format!(
                    "{} {}  {}",
                    s.cyan("$"),
                    event["command"].as_str().unwrap_or(""),
                    if code == 0 {
                        s.dim(&status)
                    } else {
                        s.red(&status)
                    }
                ));
                let output = event["output"].as_str().unwrap_or("");
                if !output.is_empty() {
                    out.push(indent(&shorten(output)));
                }
            }
            "tool_error" => out.push(s.red(&format!(
                "bad tool call: {}",
                event["error"].as_str().unwrap_or("")
            ))),
            "agent_end" => {
                out.push(String::new());
                out.push(s.bold(&format!(
                    "agent ended: {} after {} turns, {} tool calls, {} tokens",
                    event["exit_reason"].as_str().unwrap_or("?"),
                    event["turns"],
                    event["tool_calls"],
                    event["usage"]["total_tokens"]
                )));
            }
            "test" => {
                let code = event["exit_code"].as_i64().unwrap_or(-1);
                let verdict = if code == 0 && event["timed_out"].as_bool() != Some(true) {
                    s.green("PASSED")
                } else {
                    s.red("FAILED")
                };
                out.push(format!(
                    "{} {}  [exit {code}, {}] {verdict}",
                    s.cyan("test $"),
                    event["command"].as_str().unwrap_or(""),
                    seconds(&event["duration_s"])
                ));
                out.push(indent(&shorten(event["output"].as_str().unwrap_or(""))));
            }
            "end" => {
                let status = event["status"].as_str().unwrap_or("?");
                let painted = match status {
                    "passed" => s.green(status),
                    _ => s.red(status),
                };
                let mut line = format!(
                    "{} {painted} ({})",
                    s.bold("result:"),
                    event["exit_reason"].as_str().unwrap_or("?")
                );
                if let Some(error) = event["error"].as_str() {
                    line.push_str(&format!("  {error}"));
                }
                out.push(line);
            }
            _ => {}
        }
    }
    out.join("\n") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_a_conversation_without_colours() {
        let long: String = (0..40).map(|i| format!("line {i}\n")).collect();
        let events = vec![
            json!({"event":"header","task":{"id":"t1"},"epoch":1,"model":"m","prompt":{"name":"default"},"repo":"r","base_commit":"abc"}),
            json!({"event":"message","turn":0,"message":{"role":"user","content":"Fix it."}}),
            json!({"event":"model_call","turn":1,"latency_s":0.5,"usage":{"prompt_tokens":10,"completion_tokens":5}}),
            json!({"event":"message","turn":1,"message":{"role":"assistant","content":"Looking."}}),
            json!({"event":"command","turn":1,"command":"cat big","exit_code":0,"timed_out":false,"duration_s":0.01,"output":long}),
            json!({"event":"command","turn":1,"command":"false","exit_code":1,"timed_out":false,"duration_s":0.01,"output":""}),
            json!({"event":"agent_end","exit_reason":"completed","turns":1,"tool_calls":2,"usage":{"total_tokens":15}}),
            json!({"event":"test","command":"true","exit_code":0,"timed_out":false,"duration_s":0.2,"output":"ok"}),
            json!({"event":"end","status":"passed","exit_reason":"completed"}),
        ];
        let text = render(&events, false);
        assert!(
            text.contains("task t1  epoch 1  model m  prompt default"),
            "{text}"
        );
        assert!(
            text.contains("--- turn 1 ---  10 + 5 tokens, 0.50 s"),
            "{text}"
        );
        assert!(text.contains("model: Looking."), "{text}");
        assert!(text.contains("$ cat big  [exit 0, 0.01 s]"), "{text}");
        assert!(text.contains("[... 16 lines cut ...]"), "{text}");
        assert!(text.contains("$ false  [exit 1, 0.01 s]"), "{text}");
        assert!(
            text.contains("test $ true  [exit 0, 0.20 s] PASSED"),
            "{text}"
        );
        assert!(text.contains("result: passed (completed)"), "{text}");
        assert!(!text.contains('\u{1b}'));
        assert!(render(&events, true).contains('\u{1b}'));
    }
}
