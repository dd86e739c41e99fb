//! `onebash show RUN_DIR TASK_ID [--epoch K]` (or a trajectory file): one
//! task's conversation, readable in a terminal. Turn numbers, the model's
//! text (its reasoning marked and cut short), each command with its exit code and duration, output shortened
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

use crate::agent::{reasoning, responses};
use crate::audit::Probe;
use crate::commands::show_facts::{CheckoutOrigin, TestVerdict};
use crate::run_folder::trajectory::{CommandRecord, Event, ReadError, read_trajectory};
use crate::run_folder::{RunFolder, RunFolderError};
use crate::sys::words::count;
use crate::task::{IdError, TaskId};

/// Lines of a command's output shown from its start and from its end.
const SHOWN_LINES: usize = 12;
/// Characters of one line `show` prints: a longer line (a problem
/// statement of megabytes on one line, a minified file) is cut there, with
/// a count of what was left out.
const SHOWN_LINE_CHARS: usize = 1000;
/// Lines of a model's reasoning `show` prints.
const REASONING_LINES: usize = 4;

/// Why `show` has nothing to print.
#[derive(Debug, thiserror::Error)]
pub enum ShowError {
    /// Not a run folder: the message (from [`RunFolder::open`]) names it.
    #[error(transparent)]
    RunFolder(#[from] RunFolderError),
    #[error(
        "{} is a run folder: name the task too (onebash show RUN_DIR TASK_ID)",
        .0.display()
    )]
    NoTask(PathBuf),
    /// Not a task id: the message (from [`TaskId::parse`]) quotes it.
    #[error(transparent)]
    TaskId(#[from] IdError),
    #[error(
        "no trajectory for task {task} epoch {epoch} in {} (looked for {})\nhint: {}",
        folder.display(),
        path.display(),
        known_tasks(known, *epoch)
    )]
    NoTrajectory {
        task: String,
        epoch: u32,
        folder: PathBuf,
        path: PathBuf,
        /// The tasks of the folder with a trajectory of that epoch, sorted.
        known: Vec<String>,
    },
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("{} holds no event", .0.display())]
    NoEvent(PathBuf),
}

/// The conversation of `target` (a trajectory file, or a run folder with
/// the `task` and `epoch` to show), painted on a terminal without NO_COLOR.
pub(crate) fn show(target: &Path, task: Option<&str>, epoch: u32) -> Result<String, ShowError> {
    let path = trajectory_path(target, task, epoch)?;
    let events = read_trajectory(&path)?;
    if events.is_empty() {
        return Err(ShowError::NoEvent(path));
    }
    let colors = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    Ok(render(&events, colors))
}

fn trajectory_path(target: &Path, task: Option<&str>, epoch: u32) -> Result<PathBuf, ShowError> {
    if target.is_file() {
        return Ok(target.to_owned());
    }
    let folder = RunFolder::open(target)?;
    let task = task.ok_or_else(|| ShowError::NoTask(target.to_owned()))?;
    let path = folder.trajectory(&TaskId::parse(task)?, epoch);
    if path.is_file() {
        Ok(path)
    } else {
        Err(ShowError::NoTrajectory {
            task: task.to_owned(),
            epoch,
            folder: target.to_owned(),
            path,
            known: tasks_with_trajectory(&folder, epoch),
        })
    }
}

/// Task ids the hint lists before it counts the rest.
const LISTED_TASKS: usize = 20;

/// The tasks of `folder` that have a trajectory of `epoch`, sorted.
fn tasks_with_trajectory(folder: &RunFolder, epoch: u32) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(folder.tasks_dir()) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = entries
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|id| TaskId::parse(id).is_ok_and(|task| folder.trajectory(&task, epoch).is_file()))
        .collect();
    ids.sort();
    ids
}

/// The hint after a task with no trajectory: the ids there are.
fn known_tasks(known: &[String], epoch: u32) -> String {
    if known.is_empty() {
        return format!("the run has no trajectory of epoch {epoch}");
    }
    let mut list = known[..known.len().min(LISTED_TASKS)].join(", ");
    if known.len() > LISTED_TASKS {
        list.push_str(&format!(" and {} more", known.len() - LISTED_TASKS));
    }
    format!("the tasks with a trajectory of epoch {epoch}: {list}")
}

/// One thing a transcript shows, read from one trajectory event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Entry {
    Header {
        /// The task line's `id`, `?` when it has none.
        task: String,
        epoch: u32,
        model: String,
        prompt: String,
        repo: String,
        base_commit: String,
    },
    Checkout {
        commit: String,
        seconds: f64,
        /// The image's repo or onebash's cache.
        origin: CheckoutOrigin,
    },
    Setup(CommandRun),
    /// The task's problem as the model was given it (the first user message).
    Problem(String),
    /// A model call: it starts a turn.
    Turn {
        turn: u32,
        prompt_tokens: u64,
        completion_tokens: u64,
        seconds: f64,
    },
    ModelText(String),
    /// What the model reasoned before it answered (shown folded).
    Reasoning(String),
    Retry {
        retry: u32,
        wait_seconds: f64,
        error: String,
    },
    ModelError(String),
    Command(CommandRun),
    ToolError(String),
    AgentEnd {
        exit_reason: String,
        turns: u32,
        tool_calls: u32,
        total_tokens: u64,
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
    /// What an allowlist's proxy was asked: hosts, requests refused, and
    /// the refused repository hosts (the audit's flag).
    Hosts {
        hosts: usize,
        refused: u64,
        refused_repo_host: Vec<String>,
    },
    Test {
        run: CommandRun,
        /// As graded: the test lists when the task has them, else the
        /// exit code.
        verdict: TestVerdict,
    },
    End {
        status: String,
        exit_reason: String,
        error: Option<String>,
    },
}

/// A command of the agent, the setup or the tests, as it ran.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CommandRun {
    pub command: String,
    pub exit_code: i32,
    pub timed_out: bool,
    pub seconds: f64,
    pub output: String,
    /// Why the audit flagged it (`git log --all`); empty when it did not.
    pub probes: Vec<String>,
}

/// A text cut to its first and last [`SHOWN_LINES`] lines.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Shortened {
    pub head: String,
    /// Lines left out between `head` and `tail`; 0 when nothing was cut.
    pub cut: usize,
    pub tail: String,
}

/// A line cut to its first [`SHOWN_LINE_CHARS`] characters, with the
/// count of those left out.
fn cut_line(line: &str) -> std::borrow::Cow<'_, str> {
    match line.char_indices().nth(SHOWN_LINE_CHARS) {
        None => line.into(),
        Some((at, _)) => {
            let rest = line[at..].chars().count();
            format!("{} [... {rest} more characters ...]", &line[..at]).into()
        }
    }
}

/// Cuts a command's output (or a long problem) to what a reader scans:
/// its first and last lines, each cut to its first characters.
pub(crate) fn shorten(text: &str) -> Shortened {
    let lines: Vec<std::borrow::Cow<'_, str>> = text.lines().map(cut_line).collect();
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

fn command_run(record: &CommandRecord, probes: Vec<String>) -> CommandRun {
    CommandRun {
        command: record.command.clone(),
        exit_code: record.exit_code,
        timed_out: record.timed_out,
        seconds: record.duration_s,
        output: record.output.clone(),
        probes,
    }
}

/// The reasons of a list of probes.
fn reasons(probes: &[Probe]) -> Vec<String> {
    probes.iter().map(|p| p.reason.clone()).collect()
}

/// The kinds of a list of probes, each once, sorted.
fn kinds<'a>(probes: impl Iterator<Item = &'a Probe>) -> Vec<String> {
    let kinds: BTreeSet<&str> = probes.map(|p| p.kind.as_str()).collect();
    kinds.into_iter().map(str::to_owned).collect()
}

/// The reasons the audit gave, by (turn, tool call id) of the command.
type Flags = HashMap<(u32, String), Vec<String>>;

/// The audit's flags of the agent's commands, and those of the setup:
/// read first, since the `audit` event follows the commands it flags.
fn audit_flags(events: &[Event]) -> (Flags, Vec<String>) {
    let audit = events.iter().rev().find_map(|event| match event {
        Event::Audit {
            history_probes,
            setup_probes,
        } => Some((history_probes, setup_probes)),
        _ => None,
    });
    let Some((history_probes, setup_probes)) = audit else {
        return (HashMap::new(), Vec::new());
    };
    let commands = history_probes
        .iter()
        .map(|c| ((c.turn, c.tool_call_id.clone()), reasons(&c.probes)))
        .collect();
    (commands, reasons(setup_probes))
}

/// `[history probe: git log --all; ...]` after a flagged command.
pub(crate) fn probe_marker(probes: &[String]) -> Option<String> {
    (!probes.is_empty()).then(|| format!("[history probe: {}]", probes.join("; ")))
}

/// The audit's summary line.
pub(crate) fn audit_summary(commands: usize, kinds: &[String], setup_kinds: &[String]) -> String {
    let mut line = match commands {
        0 => "history probes: none".to_owned(),
        n => format!(
            "history probes: {} ({})",
            count(n, "command", "commands"),
            kinds.join(", ")
        ),
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
/// of unknown kinds, the system prompt, retries' details beyond the line,
/// replay divergences, the diff and the tool answers (already shown with
/// their commands) are left out.
pub(crate) fn entries(events: &[Event]) -> Vec<Entry> {
    let (flagged, setup_flags) = audit_flags(events);
    let mut out = Vec::new();
    for event in events {
        match event {
            Event::Header { .. } | Event::Checkout { .. } | Event::Setup(_) => {
                out.extend(start_entry(event, &setup_flags));
            }
            Event::Message { turn, message } => out.extend(message_entries(*turn, message)),
            Event::ModelCall { .. }
            | Event::ModelRetry { .. }
            | Event::ModelError { .. }
            | Event::Command { .. }
            | Event::ToolError { .. } => out.extend(turn_entry(event, &flagged)),
            Event::AgentEnd { .. }
            | Event::Audit { .. }
            | Event::Hosts { .. }
            | Event::Test { .. }
            | Event::End { .. } => {
                out.extend(end_entry(event));
            }
            Event::System { .. }
            | Event::ReplayDivergence { .. }
            | Event::Diff { .. }
            | Event::Unknown => {}
        }
    }
    out
}

/// What comes before the agent: the task, its checkout, its setup command
/// (with what the audit flagged in it). `None` for the other events.
fn start_entry(event: &Event, setup_flags: &[String]) -> Option<Entry> {
    Some(match event {
        Event::Header {
            task,
            epoch,
            model,
            prompt,
            repo,
            base_commit,
            ..
        } => Entry::Header {
            task: task["id"].as_str().unwrap_or("?").to_owned(),
            epoch: *epoch,
            model: model.clone(),
            prompt: prompt.name.clone(),
            repo: repo.clone(),
            base_commit: base_commit.clone(),
        },
        Event::Checkout {
            commit,
            duration_s,
            setup_commits,
            fetched,
            from_image,
            ..
        } => Entry::Checkout {
            commit: commit.clone(),
            seconds: *duration_s,
            origin: CheckoutOrigin::of(*from_image, setup_commits, *fetched),
        },
        Event::Setup(record) => Entry::Setup(command_run(record, setup_flags.to_vec())),
        _ => return None,
    })
}

/// A message's entries: the problem (the first user message), or the
/// model's reasoning and text. Tool answers and empty texts give none.
fn message_entries(turn: u32, message: &Value) -> Vec<Entry> {
    match message["role"].as_str().unwrap_or("") {
        "user" if turn == 0 => vec![Entry::Problem(text_of(&message["content"]))],
        "assistant" => {
            let mut out = Vec::new();
            if let Some(reasoning) = reasoning::reasoning_of(message) {
                out.push(Entry::Reasoning(reasoning));
            }
            let text =
                responses::output_text(message).unwrap_or_else(|| text_of(&message["content"]));
            if !text.trim().is_empty() {
                out.push(Entry::ModelText(text.trim().to_owned()));
            }
            out
        }
        _ => Vec::new(),
    }
}

/// What happens in a turn besides the messages: the model call that starts
/// it, retries and errors, the commands (with what the audit flagged in
/// them). `None` for the other events.
fn turn_entry(event: &Event, flagged: &Flags) -> Option<Entry> {
    Some(match event {
        Event::ModelCall {
            turn,
            latency_s,
            usage,
            ..
        } => Entry::Turn {
            turn: *turn,
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            seconds: *latency_s,
        },
        Event::ModelRetry {
            retry,
            wait_s,
            error,
            ..
        } => Entry::Retry {
            retry: *retry,
            wait_seconds: *wait_s,
            error: error.clone(),
        },
        Event::ModelError { error, .. } => Entry::ModelError(error.clone()),
        Event::Command {
            turn,
            tool_call_id,
            record,
            ..
        } => {
            let key = (*turn, tool_call_id.clone());
            let probes = flagged.get(&key).cloned().unwrap_or_default();
            Entry::Command(command_run(record, probes))
        }
        Event::ToolError { error, .. } => Entry::ToolError(error.clone()),
        _ => return None,
    })
}

/// What comes after the agent: its end, the audit, the test, the result.
/// `None` for the other events.
fn end_entry(event: &Event) -> Option<Entry> {
    Some(match event {
        Event::AgentEnd {
            exit_reason,
            turns,
            tool_calls,
            usage,
            ..
        } => Entry::AgentEnd {
            exit_reason: exit_reason.as_str().to_owned(),
            turns: *turns,
            tool_calls: *tool_calls,
            total_tokens: usage.total_tokens,
        },
        Event::Audit {
            history_probes,
            setup_probes,
        } => Entry::Audit {
            commands: history_probes.len(),
            kinds: kinds(history_probes.iter().flat_map(|c| &c.probes)),
            setup_kinds: kinds(setup_probes.iter()),
        },
        Event::Hosts {
            asked,
            refused_repo_host,
        } => Entry::Hosts {
            hosts: asked.len(),
            refused: asked.iter().map(|a| a.refused).sum(),
            refused_repo_host: refused_repo_host.clone(),
        },
        Event::Test {
            record, per_test, ..
        } => Entry::Test {
            verdict: TestVerdict::of(record.exit_code, record.timed_out, per_test.as_ref()),
            run: command_run(record, Vec::new()),
        },
        Event::End {
            status,
            exit_reason,
            error,
            ..
        } => Entry::End {
            status: status.as_str().to_owned(),
            exit_reason: exit_reason.as_str().to_owned(),
            error: error.clone(),
        },
        _ => return None,
    })
}

/// Seconds, for display.
pub(crate) fn seconds(s: f64) -> String {
    format!("{s:.2} s")
}

/// `[exit CODE, timed out, SECONDS]` after a command.
pub(crate) fn command_status(run: &CommandRun) -> String {
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

/// Reasoning as `show` prints it: marked, and cut to its first
/// [`REASONING_LINES`] lines, since it is often longer than all the rest.
fn folded_reasoning(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let shown = lines.len().min(REASONING_LINES);
    let mut out = format!("reasoning ({}):\n", count(lines.len(), "line", "lines"));
    out.push_str(&indent(&lines[..shown].join("\n")));
    if lines.len() > shown {
        out.push_str(&format!(
            "\n    [... {} of reasoning ...]",
            count(lines.len() - shown, "more line", "more lines")
        ));
    }
    out
}

fn shortened_text(text: &str) -> String {
    let s = shorten(text);
    if s.cut == 0 {
        s.head
    } else {
        format!(
            "{}\n[... {} cut ...]\n{}",
            s.head,
            count(s.cut, "line", "lines"),
            s.tail
        )
    }
}

/// The conversation as `show` prints it, painted when `colors`.
pub(crate) fn render(events: &[Event], colors: bool) -> String {
    let s = Style { on: colors };
    let mut out = Vec::new();
    for entry in entries(events) {
        // A blank line before the problem, each turn and the agent's end.
        if matches!(
            entry,
            Entry::Problem(_) | Entry::Turn { .. } | Entry::AgentEnd { .. }
        ) {
            out.push(String::new());
        }
        out.extend(entry_lines(entry, &s));
    }
    out.join("\n") + "\n"
}

/// One entry's lines in the terminal.
fn entry_lines(entry: Entry, s: &Style) -> Vec<String> {
    match entry {
        Entry::Header {
            task,
            epoch,
            model,
            prompt,
            repo,
            base_commit,
        } => vec![
            s.bold(&format!(
                "task {task}  epoch {epoch}  model {model}  prompt {prompt}"
            )),
            s.dim(&format!("repo {repo} at {base_commit}")),
        ],
        Entry::Checkout {
            commit,
            seconds: t,
            origin,
        } => vec![s.dim(&origin.line(&commit, &seconds(t)))],
        Entry::Setup(run) => vec![command_line(s, "setup $", &run, command_status(&run))],
        Entry::Problem(text) => vec![s.bold("problem:"), indent(&shortened_text(&text))],
        Entry::ModelText(text) => vec![format!("{} {text}", s.bold("model:"))],
        Entry::Reasoning(text) => vec![s.dim(&folded_reasoning(&text))],
        Entry::Turn {
            turn,
            prompt_tokens,
            completion_tokens,
            seconds: t,
        } => {
            let tokens = format!("{prompt_tokens} + {completion_tokens} tokens");
            vec![s.bold(&format!("--- turn {turn} ---  {tokens}, {}", seconds(t)))]
        }
        Entry::Retry {
            retry,
            wait_seconds,
            error,
        } => vec![s.dim(&format!(
            "(retry {retry} after {}: {error})",
            seconds(wait_seconds)
        ))],
        Entry::ModelError(error) => vec![s.red(&format!("model error: {error}"))],
        Entry::Command(run) => agent_command_lines(s, &run),
        Entry::ToolError(error) => vec![s.red(&format!("bad tool call: {error}"))],
        Entry::AgentEnd {
            exit_reason,
            turns,
            tool_calls,
            total_tokens,
        } => {
            let counts = format!(
                "{}, {}, {total_tokens} tokens",
                count(turns as usize, "turn", "turns"),
                count(tool_calls as usize, "tool call", "tool calls")
            );
            vec![s.bold(&format!("agent ended: {exit_reason} after {counts}"))]
        }
        Entry::Audit {
            commands,
            kinds,
            setup_kinds,
        } => vec![audit_line(s, commands, &kinds, &setup_kinds)],
        Entry::Hosts {
            hosts,
            refused,
            refused_repo_host,
        } => {
            let mut line = format!(
                "hosts: {} asked through the allowlist, {} refused",
                count(hosts, "host", "hosts"),
                count(refused as usize, "request", "requests")
            );
            if !refused_repo_host.is_empty() {
                let flag = format!(
                    "  refused the repository's host: {}",
                    refused_repo_host.join(", ")
                );
                line.push_str(&s.red(&flag));
            }
            vec![line]
        }
        Entry::Test { run, verdict } => test_lines(s, &run, &verdict),
        Entry::End {
            status,
            exit_reason,
            error,
        } => vec![result_line(s, &status, &exit_reason, error.as_deref())],
    }
}

/// `PROMPT COMMAND  STATUS`, then the audit's marker when it flagged the
/// command.
fn command_line(s: &Style, prompt: &str, run: &CommandRun, status: String) -> String {
    let mut line = format!("{} {}  {status}", s.cyan(prompt), run.command);
    if let Some(marker) = probe_marker(&run.probes) {
        line.push_str(&format!("  {}", s.red(&marker)));
    }
    line
}

/// An agent's command, its status red when it failed, then its shortened
/// output.
fn agent_command_lines(s: &Style, run: &CommandRun) -> Vec<String> {
    let status = command_status(run);
    let status = if run.exit_code == 0 {
        s.dim(&status)
    } else {
        s.red(&status)
    };
    let mut lines = vec![command_line(s, "$", run, status)];
    if !run.output.is_empty() {
        lines.push(indent(&shortened_text(&run.output)));
    }
    lines
}

/// The test command with its verdict as graded, then its shortened
/// output.
fn test_lines(s: &Style, run: &CommandRun, verdict: &TestVerdict) -> Vec<String> {
    let verdict = if verdict.passed {
        s.green(&verdict.text())
    } else {
        s.red(&verdict.text())
    };
    vec![
        format!(
            "{} {}  [exit {}, {}] {verdict}",
            s.cyan("test $"),
            run.command,
            run.exit_code,
            seconds(run.seconds)
        ),
        indent(&shortened_text(&run.output)),
    ]
}

/// The audit's summary, red when it found a history probe.
fn audit_line(s: &Style, commands: usize, kinds: &[String], setup_kinds: &[String]) -> String {
    let line = audit_summary(commands, kinds, setup_kinds);
    if commands == 0 {
        s.dim(&line)
    } else {
        s.red(&line)
    }
}

/// `result: STATUS (EXIT_REASON)  ERROR`.
fn result_line(s: &Style, status: &str, exit_reason: &str, error: Option<&str>) -> String {
    let painted = match status {
        "passed" => s.green(status),
        _ => s.red(status),
    };
    let mut line = format!("{} {painted} ({exit_reason})", s.bold("result:"));
    if let Some(error) = error {
        line.push_str(&format!("  {error}"));
    }
    line
}

/// Typed events for the tests of the transcript walk, here and in
/// `commands::html::transcript`: each with the fields a test sets, the
/// rest as a real trajectory would have them.
#[cfg(test)]
pub(crate) mod sample {
    use serde_json::{Value, json};

    use crate::audit::{Probe, ProbeKind, ProbedCommand};
    use crate::run_folder::Status;
    use crate::run_folder::trajectory::{CommandRecord, Event, FORMAT_VERSION, PromptInfo};
    use crate::run_folder::{ExitReason, Usage};

    pub(crate) fn header() -> Event {
        Event::Header {
            format_version: FORMAT_VERSION,
            onebash_version: "0.1.0".to_owned(),
            task: json!({"id": "t1"}),
            epoch: 1,
            model: "m".to_owned(),
            provider: "openai".to_owned(),
            prompt: PromptInfo {
                name: "default".to_owned(),
                sha256: String::new(),
            },
            repo: "r".to_owned(),
            base_commit: "abc".to_owned(),
            request_template: Value::Null,
            settings: Value::Null,
        }
    }

    pub(crate) fn message(turn: u32, role: &str, content: &str) -> Event {
        Event::Message {
            turn,
            message: json!({"role": role, "content": content}),
        }
    }

    pub(crate) fn model_call(turn: u32, latency_s: f64, prompt: u64, completion: u64) -> Event {
        Event::ModelCall {
            turn,
            latency_s,
            usage: Usage {
                prompt_tokens: prompt,
                completion_tokens: completion,
                total_tokens: prompt + completion,
                ..Usage::default()
            },
            finish_reason: None,
            response_id: None,
        }
    }

    pub(crate) fn record(
        command: &str,
        exit_code: i32,
        duration_s: f64,
        output: &str,
    ) -> CommandRecord {
        CommandRecord {
            command: command.to_owned(),
            exit_code,
            signal: None,
            timed_out: false,
            duration_s,
            output: output.to_owned(),
            output_bytes: output.len() as u64,
            output_lines: output.lines().count() as u64,
            notice: None,
        }
    }

    /// An agent command that took 0.01 s.
    pub(crate) fn command(
        turn: u32,
        id: &str,
        command: &str,
        exit_code: i32,
        output: &str,
    ) -> Event {
        Event::Command {
            turn,
            tool_call_id: id.to_owned(),
            record: record(command, exit_code, 0.01, output),
            shown_chars: output.len(),
        }
    }

    pub(crate) fn agent_end(turns: u32, tool_calls: u32, total_tokens: u64) -> Event {
        Event::AgentEnd {
            exit_reason: ExitReason::Completed,
            turns,
            tool_calls,
            usage: Usage {
                total_tokens,
                ..Usage::default()
            },
            cost_usd: None,
            retries: 0,
            retry_wait_s: 0.0,
            duration_s: 1.0,
            error: None,
        }
    }

    pub(crate) fn probe(kind: ProbeKind, reason: &str) -> Probe {
        Probe {
            kind,
            reason: reason.to_owned(),
        }
    }

    pub(crate) fn probed(turn: u32, id: &str, command: &str, probes: Vec<Probe>) -> ProbedCommand {
        ProbedCommand {
            turn,
            tool_call_id: id.to_owned(),
            command: command.to_owned(),
            probes,
        }
    }

    /// The test command `true`, passed in 0.2 s.
    pub(crate) fn passed_test() -> Event {
        Event::Test {
            test_patch_files: None,
            test_patch_method: None,
            record: record("true", 0, 0.2, "ok"),
            log_path: "test.log".to_owned(),
            per_test: None,
            rules: None,
            graded_by_recipe: None,
            model_patch_empty: None,
            bare_reset: false,
        }
    }

    /// The start of a conversation: the header, the problem, one turn
    /// with a long-output command and a failing one, the agent's end.
    pub(crate) fn conversation(problem: &str, answer: &str, first_command: &str) -> Vec<Event> {
        let long: String = (0..40).map(|i| format!("line {i}\n")).collect();
        vec![
            header(),
            message(0, "user", problem),
            model_call(1, 0.5, 10, 5),
            message(1, "assistant", answer),
            command(1, "c1", first_command, 0, &long),
            command(1, "c2", "false", 1, ""),
            agent_end(1, 2, 15),
        ]
    }

    pub(crate) fn passed_end() -> Event {
        Event::End {
            status: Status::Passed,
            passed: true,
            exit_reason: ExitReason::Completed,
            wall_s: 2.0,
            error: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::sample::*;
    use super::*;
    use crate::audit::ProbeKind;
    use serde_json::json;

    /// Reasoning is marked and cut to its first lines, before the text of
    /// its answer, whichever protocol recorded it.
    #[test]
    fn reasoning_is_shown_folded_before_the_answer() {
        let thoughts: String = (1..=6).map(|i| format!("thought {i}\n")).collect();
        let chat = json!({"role": "assistant", "content": "Done.", "reasoning_content": thoughts});
        let responses = json!({"role": "assistant", "output": [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": thoughts}]},
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}]});
        for message in [chat, responses] {
            let events = vec![
                header(),
                model_call(1, 0.5, 10, 5),
                Event::Message { turn: 1, message },
            ];
            let text = render(&events, false);
            let expected = "reasoning (6 lines):\n    thought 1\n    thought 2\n    thought 3\n    thought 4\n    [... 2 more lines of reasoning ...]\nmodel: Done.";
            assert!(text.contains(expected), "{text}");
            assert!(!text.contains("thought 5"), "{text}");
        }
    }

    /// `show RUN nosuch`: the ids there are, so a typo is one look away.
    #[test]
    fn an_unknown_task_lists_the_tasks_there_are() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("run.json"), "{}").expect("write");
        let missing = show(dir.path(), Some("nosuch"), 1)
            .expect_err("no task")
            .to_string();
        assert!(
            missing.ends_with("\nhint: the run has no trajectory of epoch 1"),
            "{missing}"
        );
        for i in 0..22 {
            let epoch = dir.path().join(format!("tasks/t{i:02}/epoch-1"));
            std::fs::create_dir_all(&epoch).expect("mkdir");
            std::fs::write(epoch.join("trajectory.jsonl"), "").expect("write");
        }
        // A task folder without that epoch's trajectory is not listed.
        std::fs::create_dir_all(dir.path().join("tasks/zz/epoch-2")).expect("mkdir");
        let missing = show(dir.path(), Some("nosuch"), 1)
            .expect_err("no task")
            .to_string();
        assert!(
            missing.contains("no trajectory for task nosuch epoch 1 in "),
            "{missing}"
        );
        assert!(
            missing.ends_with("\nhint: the tasks with a trajectory of epoch 1: t00, t01, t02, t03, t04, t05, t06, t07, t08, t09, t10, t11, t12, t13, t14, t15, t16, t17, t18, t19 and 2 more"),
            "{missing}"
        );
    }

    /// A problem statement of megabytes on one line is cut as long outputs
    /// are, with the count of what was left out.
    #[test]
    fn a_long_line_is_cut_with_a_count() {
        let problem = "x".repeat(5_000_000);
        let events = vec![header(), message(0, "user", &problem)];
        let text = render(&events, false);
        assert!(text.len() < 2_000, "{} bytes", text.len());
        assert!(
            text.contains(&format!(
                "{} [... 4999000 more characters ...]",
                "x".repeat(1000)
            )),
            "{text}"
        );
        // Multi-byte characters are cut on their boundaries.
        let s = shorten(&"é".repeat(1001));
        assert_eq!(
            s.head,
            format!("{} [... 1 more characters ...]", "é".repeat(1000))
        );
    }

    /// pytest-dev__pytest-7373: the eval script exited 0 and the task
    /// failed; the test line says what was graded, not `PASSED`.
    #[test]
    fn test_line_shows_the_graded_lists_not_the_exit_code() {
        let mut test = passed_test();
        if let Event::Test { per_test, .. } = &mut test {
            *per_test = Some(json!({"statuses": {}, "verdict": {"resolved": false,
                "fail_to_pass": [{"name": "test_x", "status": "FAILED", "ok": false}],
                "pass_to_pass": [{"name": "test_y", "status": "PASSED", "ok": true}]}}));
        }
        let text = render(&[test], false);
        assert!(
            text.contains("test $ true  [exit 0, 0.20 s] not resolved: FAIL_TO_PASS 0/1 (test_x FAILED), PASS_TO_PASS 1/1"),
            "{text}"
        );
        assert!(!text.contains("PASSED\n"), "{text}");
    }

    #[test]
    fn renders_a_conversation_without_colours() {
        let mut events = conversation("Fix it.", "Looking.", "cat big");
        events.extend([passed_test(), passed_end()]);
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
        let events = vec![
            Event::Setup(record("git fetch origin", 0, 0.1, "")),
            command(1, "c1", "git log --all --oneline", 0, ""),
            command(1, "c2", "git status", 0, ""),
            // The same id in another turn is another command.
            command(2, "c1", "git show 9999999", 0, ""),
            agent_end(2, 3, 15),
            Event::Audit {
                history_probes: vec![
                    probed(
                        1,
                        "c1",
                        "git log --all --oneline",
                        vec![probe(ProbeKind::AllRefs, "git log --all")],
                    ),
                    probed(
                        2,
                        "c1",
                        "git show 9999999",
                        vec![
                            probe(
                                ProbeKind::ForeignCommit,
                                "git show 9999999: not in the base's history",
                            ),
                            probe(ProbeKind::AllRefs, "other"),
                        ],
                    ),
                ],
                setup_probes: vec![probe(ProbeKind::GitFetch, "git fetch")],
            },
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
            command(1, "c1", "git status", 0, ""),
            Event::Audit {
                history_probes: Vec::new(),
                setup_probes: Vec::new(),
            },
        ];
        let text = render(&clean, false);
        assert!(text.contains("\nhistory probes: none\n"), "{text}");
        assert!(!text.contains("[history probe"), "{text}");
    }
}
