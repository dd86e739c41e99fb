//! `onebash show RUN_DIR TASK_ID [--epoch K]` (or a trajectory file): one
//! task's conversation, readable in a terminal. Turn numbers, the model's
//! text, each command with its exit code and duration, output shortened
//! with a count of what was cut, tokens per turn, the test verdict.
//! Colours on a terminal, none with NO_COLOR or a pipe.
//!
//! The walk over the trajectory's events ([`entries`]) is shared with the
//! HTML transcript pages of `report --format html` (`commands::html`); this
//! file owns the walk and the terminal rendering, not the HTML.

use std::collections::{BTreeSet, HashMap};
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

/// One thing a transcript shows, read from one trajectory event. Numbers
/// the event lacks are `None` and shown as `?`.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    Header {
        task: String,
        epoch: Option<u64>,
        model: String,
        prompt: String,
        repo: String,
        base_commit: String,
    },
    Checkout {
        commit: String,
        seconds: f64,
    },
    Setup(CommandRun),
    /// The task's problem as the model was given it (the first user message).
    Problem(String),
    /// A model call: it starts a turn.
    Turn {
        turn: Option<u64>,
        prompt_tokens: Option<u64>,
        completion_tokens: Option<u64>,
        seconds: f64,
    },
    ModelText(String),
    Retry {
        retry: Option<u64>,
        wait_seconds: f64,
        error: String,
    },
    ModelError(String),
    Command(CommandRun),
    ToolError(String),
    AgentEnd {
        exit_reason: String,
        turns: Option<u64>,
        tool_calls: Option<u64>,
        total_tokens: Option<u64>,
    },
    /// The audit of the agent's commands (docs/results.md, "History probes").
    Audit {
        /// Agent commands with at least one probe.
        commands: usize,
        /// Their probes' kinds, each once.
        kinds: Vec<String>,
        /// The kinds `setup_command` matched (not counted).
        setup_kinds: Vec<String>,
    },
    Test {
        run: CommandRun,
        passed: bool,
    },
    End {
        status: String,
        exit_reason: String,
        error: Option<String>,
    },
}

/// A command of the agent, the setup or the tests, as it ran.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandRun {
    pub command: String,
    /// -1 when the event has none.
    pub exit_code: i64,
    pub timed_out: bool,
    pub seconds: f64,
    pub output: String,
    /// Why the audit flagged it (`git log --all`); empty when it did not.
    pub probes: Vec<String>,
}

/// A text cut to its first and last [`SHOWN_LINES`] lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Shortened {
    pub head: String,
    /// Lines left out between `head` and `tail`; 0 when nothing was cut.
    pub cut: usize,
    pub tail: String,
}

/// Cuts a command's output (or a long problem) to what a reader scans.
pub fn shorten(text: &str) -> Shortened {
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= 2 * SHOWN_LINES {
        return Shortened {
            head: lines.join("\n"),
            cut: 0,
            tail: String::new(),
        };
    }
    Shortened {
        head: lines[..SHOWN_LINES].join("\n"),
        cut: lines.len() - 2 * SHOWN_LINES,
        tail: lines[lines.len() - SHOWN_LINES..].join("\n"),
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

fn string(v: &Value) -> String {
    v.as_str().unwrap_or("?").to_owned()
}

fn command_run(event: &Value) -> CommandRun {
    CommandRun {
        command: event["command"].as_str().unwrap_or("").to_owned(),
        exit_code: event["exit_code"].as_i64().unwrap_or(-1),
        timed_out: event["timed_out"].as_bool() == Some(true),
        seconds: event["duration_s"].as_f64().unwrap_or(0.0),
        output: event["output"].as_str().unwrap_or("").to_owned(),
        probes: Vec::new(),
    }
}

/// The reasons of a list of probes (`[{kind, reason}]`).
fn reasons(probes: &Value) -> Vec<String> {
    probes
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["reason"].as_str().map(str::to_owned))
        .collect()
}

/// The kinds of a list of probes, each once, sorted.
fn kinds(probes: impl Iterator<Item = Value>) -> Vec<String> {
    let kinds: BTreeSet<String> = probes
        .filter_map(|p| p["kind"].as_str().map(str::to_owned))
        .collect();
    kinds.into_iter().collect()
}

/// The reasons the audit gave, by (turn, tool call id) of the command.
type Flags = HashMap<(u64, String), Vec<String>>;

/// The audit's flags of the agent's commands, and those of the setup:
/// read first, since the `audit` event follows the commands it flags.
fn audit_flags(events: &[Value]) -> (Flags, Vec<String>) {
    let Some(audit) = events.iter().rev().find(|e| e["event"] == "audit") else {
        return (HashMap::new(), Vec::new());
    };
    let commands = audit["history_probes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let key = (
                c["turn"].as_u64().unwrap_or(0),
                c["tool_call_id"].as_str().unwrap_or("").to_owned(),
            );
            (key, reasons(&c["probes"]))
        })
        .collect();
    (commands, reasons(&audit["setup_probes"]))
}

/// `[history probe: git log --all; ...]` after a flagged command.
pub fn probe_marker(probes: &[String]) -> Option<String> {
    (!probes.is_empty()).then(|| format!("[history probe: {}]", probes.join("; ")))
}

/// The audit's summary line.
pub fn audit_summary(commands: usize, kinds: &[String], setup_kinds: &[String]) -> String {
    let mut line = match commands {
        0 => "history probes: none".to_owned(),
        1 => format!("history probes: 1 command ({})", kinds.join(", ")),
        n => format!("history probes: {n} commands ({})", kinds.join(", ")),
    };
    if !setup_kinds.is_empty() {
        line.push_str(&format!(
            "; setup_command: {} (the task's, not counted)",
            setup_kinds.join(", ")
        ));
    }
    line
}

/// The walk: what a reader of the conversation is shown, in order. Events
/// of unknown kinds, the system prompt and the tool answers (already shown
/// with their commands) are left out.
pub fn entries(events: &[Value]) -> Vec<Entry> {
    let (flagged, setup_flags) = audit_flags(events);
    let mut out = Vec::new();
    for event in events {
        let entry = match event["event"].as_str().unwrap_or("") {
            "header" => Entry::Header {
                task: string(&event["task"]["id"]),
                epoch: event["epoch"].as_u64(),
                model: string(&event["model"]),
                prompt: string(&event["prompt"]["name"]),
                repo: string(&event["repo"]),
                base_commit: string(&event["base_commit"]),
            },
            "checkout" => Entry::Checkout {
                commit: string(&event["commit"]),
                seconds: event["duration_s"].as_f64().unwrap_or(0.0),
            },
            "setup" => Entry::Setup(CommandRun {
                probes: setup_flags.clone(),
                ..command_run(event)
            }),
            "message" => {
                let message = &event["message"];
                match message["role"].as_str().unwrap_or("") {
                    "user" if event["turn"].as_u64().unwrap_or(0) == 0 => {
                        Entry::Problem(text_of(&message["content"]))
                    }
                    "assistant" => {
                        let text = text_of(&message["content"]);
                        if text.trim().is_empty() {
                            continue;
                        }
                        Entry::ModelText(text.trim().to_owned())
                    }
                    _ => continue,
                }
            }
            "model_call" => Entry::Turn {
                turn: event["turn"].as_u64(),
                prompt_tokens: event["usage"]["prompt_tokens"].as_u64(),
                completion_tokens: event["usage"]["completion_tokens"].as_u64(),
                seconds: event["latency_s"].as_f64().unwrap_or(0.0),
            },
            "model_retry" => Entry::Retry {
                retry: event["retry"].as_u64(),
                wait_seconds: event["wait_s"].as_f64().unwrap_or(0.0),
                error: event["error"].as_str().unwrap_or("").to_owned(),
            },
            "model_error" => Entry::ModelError(event["error"].as_str().unwrap_or("").to_owned()),
            "command" => {
                let key = (
                    event["turn"].as_u64().unwrap_or(0),
                    event["tool_call_id"].as_str().unwrap_or("").to_owned(),
                );
                Entry::Command(CommandRun {
                    probes: flagged.get(&key).cloned().unwrap_or_default(),
                    ..command_run(event)
                })
            }
            "tool_error" => Entry::ToolError(event["error"].as_str().unwrap_or("").to_owned()),
            "agent_end" => Entry::AgentEnd {
                exit_reason: string(&event["exit_reason"]),
                turns: event["turns"].as_u64(),
                tool_calls: event["tool_calls"].as_u64(),
                total_tokens: event["usage"]["total_tokens"].as_u64(),
            },
            "audit" => {
                let commands = event["history_probes"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                Entry::Audit {
                    commands: commands.len(),
                    kinds: kinds(
                        commands
                            .into_iter()
                            .flat_map(|c| c["probes"].as_array().cloned().unwrap_or_default()),
                    ),
                    setup_kinds: kinds(
                        event["setup_probes"]
                            .as_array()
                            .cloned()
                            .unwrap_or_default()
                            .into_iter(),
                    ),
                }
            }
            "test" => {
                let run = command_run(event);
                Entry::Test {
                    passed: run.exit_code == 0 && !run.timed_out,
                    run,
                }
            }
            "end" => Entry::End {
                status: string(&event["status"]),
                exit_reason: string(&event["exit_reason"]),
                error: event["error"].as_str().map(str::to_owned),
            },
            _ => continue,
        };
        out.push(entry);
    }
    out
}

/// A number an event may lack, for display.
pub fn number(n: Option<u64>) -> String {
    n.map_or_else(|| "?".to_owned(), |n| n.to_string())
}

/// Seconds, for display.
pub fn seconds(s: f64) -> String {
    format!("{s:.2} s")
}

/// `[exit CODE, timed out, SECONDS]` after a command.
pub fn command_status(run: &CommandRun) -> String {
    format!(
        "[exit {}{}, {}]",
        run.exit_code,
        if run.timed_out { ", timed out" } else { "" },
        seconds(run.seconds)
    )
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

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn shortened_text(text: &str) -> String {
    let s = shorten(text);
    if s.cut == 0 {
        s.head
    } else {
        format!("{}\n[... {} lines cut ...]\n{}", s.head, s.cut, s.tail)
    }
}

pub fn render(events: &[Value], colors: bool) -> String {
    let s = Style { on: colors };
    let mut out = Vec::new();
    for entry in entries(events) {
        match entry {
            Entry::Header {
                task,
                epoch,
                model,
                prompt,
                repo,
                base_commit,
            } => {
                out.push(s.bold(&format!(
                    "task {task}  epoch {}  model {model}  prompt {prompt}",
                    number(epoch)
                )));
                out.push(s.dim(&format!("repo {repo} at {base_commit}")));
            }
            Entry::Checkout { commit, seconds: t } => {
                out.push(s.dim(&format!("checked out {commit} in {}", seconds(t))))
            }
            Entry::Setup(run) => {
                let mut line = format!(
                    "{} {}  {}",
                    s.cyan("setup $"),
                    run.command,
                    command_status(&run)
                );
                if let Some(marker) = probe_marker(&run.probes) {
                    line.push_str(&format!("  {}", s.red(&marker)));
                }
                out.push(line);
            }
            Entry::Problem(text) => {
                out.push(String::new());
                out.push(s.bold("problem:"));
                out.push(indent(&shortened_text(&text)));
            }
            Entry::ModelText(text) => out.push(format!("{} {text}", s.bold("model:"))),
            Entry::Turn {
                turn,
                prompt_tokens,
                completion_tokens,
                seconds: t,
            } => {
                out.push(String::new());
                out.push(s.bold(&format!(
                    "--- turn {} ---  {} + {} tokens, {}",
                    number(turn),
                    number(prompt_tokens),
                    number(completion_tokens),
                    seconds(t)
                )));
            }
            Entry::Retry {
                retry,
                wait_seconds,
                error,
            } => out.push(s.dim(&format!(
                "(retry {} after {}: {error})",
                number(retry),
                seconds(wait_seconds)
            ))),
            Entry::ModelError(error) => out.push(s.red(&format!("model error: {error}"))),
            Entry::Command(run) => {
                let status = command_status(&run);
                let mut line = format!(
                    "{} {}  {}",
                    s.cyan("$"),
                    run.command,
                    if run.exit_code == 0 {
                        s.dim(&status)
                    } else {
                        s.red(&status)
                    }
                );
                if let Some(marker) = probe_marker(&run.probes) {
                    line.push_str(&format!("  {}", s.red(&marker)));
                }
                out.push(line);
                if !run.output.is_empty() {
                    out.push(indent(&shortened_text(&run.output)));
                }
            }
            Entry::ToolError(error) => out.push(s.red(&format!("bad tool call: {error}"))),
            Entry::AgentEnd {
                exit_reason,
                turns,
                tool_calls,
                total_tokens,
            } => {
                out.push(String::new());
                out.push(s.bold(&format!(
                    "agent ended: {exit_reason} after {} turns, {} tool calls, {} tokens",
                    number(turns),
                    number(tool_calls),
                    number(total_tokens)
                )));
            }
            Entry::Audit {
                commands,
                kinds,
                setup_kinds,
            } => {
                let line = audit_summary(commands, &kinds, &setup_kinds);
                out.push(if commands == 0 {
                    s.dim(&line)
                } else {
                    s.red(&line)
                });
            }
            Entry::Test { run, passed } => {
                let verdict = if passed {
                    s.green("PASSED")
                } else {
                    s.red("FAILED")
                };
                out.push(format!(
                    "{} {}  [exit {}, {}] {verdict}",
                    s.cyan("test $"),
                    run.command,
                    run.exit_code,
                    seconds(run.seconds)
                ));
                out.push(indent(&shortened_text(&run.output)));
            }
            Entry::End {
                status,
                exit_reason,
                error,
            } => {
                let painted = match status.as_str() {
                    "passed" => s.green(&status),
                    _ => s.red(&status),
                };
                let mut line = format!("{} {painted} ({exit_reason})", s.bold("result:"));
                if let Some(error) = error {
                    line.push_str(&format!("  {error}"));
                }
                out.push(line);
            }
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
        insta::assert_snapshot!(text);
    }

    /// The `audit` event comes after the commands: each flagged command is
    /// marked where it ran, the setup too, and a summary line follows.
    #[test]
    fn audited_commands_are_marked_and_summed_up() {
        let command = |turn: u64, id: &str, command: &str| json!({"event":"command","turn":turn,"tool_call_id":id,"command":command,"exit_code":0,"timed_out":false,"duration_s":0.01,"output":""});
        let events = vec![
            json!({"event":"setup","command":"git fetch origin","exit_code":0,"timed_out":false,"duration_s":0.1,"output":""}),
            command(1, "c1", "git log --all --oneline"),
            command(1, "c2", "git status"),
            // The same id in another turn is another command.
            command(2, "c1", "git show 9999999"),
            json!({"event":"agent_end","exit_reason":"completed","turns":2,"tool_calls":3,"usage":{"total_tokens":15}}),
            json!({"event":"audit","history_probes":[
                {"turn":1,"tool_call_id":"c1","command":"git log --all --oneline","probes":[{"kind":"all_refs","reason":"git log --all"}]},
                {"turn":2,"tool_call_id":"c1","command":"git show 9999999","probes":[
                    {"kind":"foreign_commit","reason":"git show 9999999: not in the base's history"},
                    {"kind":"all_refs","reason":"other"}]}],
                "setup_probes":[{"kind":"git_fetch","reason":"git fetch"}]}),
        ];
        let text = render(&events, false);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines.contains(
                &"setup $ git fetch origin  [exit 0, 0.10 s]  [history probe: git fetch]"
            ),
            "{text}"
        );
        assert!(
            lines.contains(
                &"$ git log --all --oneline  [exit 0, 0.01 s]  [history probe: git log --all]"
            ),
            "{text}"
        );
        assert!(lines.contains(&"$ git status  [exit 0, 0.01 s]"), "{text}");
        assert!(lines.contains(&"$ git show 9999999  [exit 0, 0.01 s]  [history probe: git show 9999999: not in the base's history; other]"), "{text}");
        assert!(lines.contains(&"history probes: 2 commands (all_refs, foreign_commit); setup_command: git_fetch (the task's, not counted)"), "{text}");
        let clean = vec![
            command(1, "c1", "git status"),
            json!({"event":"audit","history_probes":[]}),
        ];
        let text = render(&clean, false);
        assert!(text.contains("\nhistory probes: none\n"), "{text}");
        assert!(!text.contains("[history probe"), "{text}");
    }
}
