//! The trajectory: one JSONL event log per (task, epoch).
//!
//! Owns the event types and the writer, which writes each event as one line
//! with one `write` call, on a thread of its own, in order, so a crash loses
//! at most the lines in flight. The format is documented in docs/trajectory.md; bump
//! [`FORMAT_VERSION`] when it changes incompatibly. It does not decide what
//! happens, only records it.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::audit::{Probe, ProbedCommand, RecordedCommand};
use crate::checkout::History;
use crate::exec::CommandOutcome;
use crate::results::{ExitReason, Status};

pub const FORMAT_VERSION: u32 = 1;

/// Token counts of one model call, or summed over a task.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Every input token, cached reads and cache writes included.
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    /// Input tokens read from the provider's prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_tokens: u64,
    /// Input tokens written to the prompt cache (Anthropic).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.total_tokens += other.total_tokens;
        self.cached_tokens += other.cached_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
    }
}

/// A command's record: what ran and how it ended.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CommandRecord {
    pub command: String,
    pub exit_code: i32,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub duration_s: f64,
    /// The output as kept (up to 1 MiB: head and tail, with a marker where
    /// bytes were omitted), stdout and stderr interleaved.
    pub output: String,
    pub output_bytes: u64,
    pub output_lines: u64,
}

impl CommandRecord {
    pub fn new(command: &str, outcome: &CommandOutcome) -> CommandRecord {
        CommandRecord {
            command: command.to_owned(),
            exit_code: outcome.exit_code,
            signal: outcome.signal,
            timed_out: outcome.timed_out,
            duration_s: outcome.duration.as_secs_f64(),
            output: outcome.output.to_text(),
            output_bytes: outcome.output.total_bytes(),
            output_lines: outcome.output.total_lines(),
        }
    }
}

/// One line of the trajectory.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// Always first.
    Header {
        format_version: u32,
        onebash_version: String,
        task: Value,
        epoch: u32,
        model: String,
        provider: String,
        prompt: PromptInfo,
        repo: String,
        base_commit: String,
        /// The request's fields other than `messages`: with the message
        /// events, enough to rebuild every request.
        request_template: Value,
        settings: Value,
    },
    Checkout {
        commit: String,
        /// The working copy's HEAD, when it is not `commit` (`--history none`).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        head: Option<String>,
        /// `full` or `none`; absent in trajectories from before `--history`.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        history: Option<History>,
        /// Objects in the working copy's store, each reachable from HEAD:
        /// what the check before any command found (it has no refs, no
        /// alternates, and nothing HEAD does not reach).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        objects: Option<u64>,
        duration_s: f64,
        /// Whether this task fetched the repo (the first of the run to need it).
        fetched: bool,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        warning: Option<String>,
    },
    Setup(CommandRecord),
    /// A message appended to the conversation, exactly as sent or received.
    /// `turn` 0 is the initial system and user messages.
    Message {
        turn: u32,
        message: Value,
    },
    /// A completed model call.
    ModelCall {
        turn: u32,
        latency_s: f64,
        usage: Usage,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        finish_reason: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        response_id: Option<String>,
    },
    /// The system prompt, for protocols that send it apart from the
    /// messages (Anthropic); written before the turn-0 messages.
    System {
        content: String,
    },
    /// A model call failed in a way worth retrying; the retry follows
    /// after `wait_s`.
    ModelRetry {
        turn: u32,
        retry: u32,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        status: Option<u16>,
        error: String,
        wait_s: f64,
    },
    /// A model call that failed.
    ModelError {
        turn: u32,
        latency_s: f64,
        error: String,
    },
    /// A tool call that was run as a command.
    Command {
        turn: u32,
        tool_call_id: String,
        #[serde(flatten)]
        record: CommandRecord,
        /// How many characters of the output the model was shown.
        shown_chars: usize,
    },
    /// Replaying: a command's output differs from the recorded one.
    ReplayDivergence {
        turn: u32,
        tool_call_id: String,
        recorded_output: String,
        output: String,
    },
    /// A tool call that could not be run (bad arguments, unknown tool); the
    /// model was answered with `error`.
    ToolError {
        turn: u32,
        tool_call_id: String,
        error: String,
    },
    AgentEnd {
        exit_reason: ExitReason,
        turns: u32,
        tool_calls: u32,
        usage: Usage,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        cost_usd: Option<f64>,
        retries: u32,
        retry_wait_s: f64,
        duration_s: f64,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        error: Option<String>,
    },
    /// What the agent's commands tried to learn of the repo's history
    /// past the base (`audit`): written after `agent_end`.
    Audit {
        /// The commands with at least one probe, in order; the row's
        /// `history_probes` is their number.
        history_probes: Vec<ProbedCommand>,
        /// What `setup_command` matched: the task author's, not counted.
        #[serde(skip_serializing_if = "Vec::is_empty", default)]
        setup_probes: Vec<Probe>,
    },
    /// The agent's change against the base commit, saved as a file.
    Diff {
        path: String,
        bytes: usize,
    },
    Test {
        #[serde(skip_serializing_if = "Option::is_none", default)]
        test_patch_files: Option<Vec<String>>,
        /// How the test patch went in: `git apply`, `git apply --3way`,
        /// `patch --fuzz=5`.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        test_patch_method: Option<String>,
        #[serde(flatten)]
        record: CommandRecord,
        log_path: String,
        /// Per-test statuses and the SWE-bench verdict, when the task
        /// lists its tests (also in tests.json).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        per_test: Option<Value>,
    },
    End {
        status: Status,
        passed: bool,
        exit_reason: ExitReason,
        wall_s: f64,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        error: Option<String>,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PromptInfo {
    pub name: String,
    pub sha256: String,
}

/// A line as written: the event plus the time it was written.
#[derive(Serialize)]
struct Line<'a> {
    /// Seconds since the Unix epoch.
    ts: f64,
    #[serde(flatten)]
    event: &'a Event,
}

/// Appends events to a trajectory file. A failed write is remembered, not
/// fatal: the task goes on and reports it at its end.
///
/// The file belongs to a writer on a blocking thread, fed through a bounded
/// channel: a line of a command's output can be a megabyte, and writing it
/// on an async worker would delay other tasks' timers and output reads.
/// Lines reach the file in the order they were sent, one `write` each.
pub struct TrajectoryWriter {
    lines: tokio::sync::mpsc::Sender<ToFile>,
    writer: tokio::task::JoinHandle<Option<String>>,
    path: PathBuf,
    first_error: Option<String>,
    /// Lines from [`Self::write_soon`] that found the queue full.
    pending: std::collections::VecDeque<ToFile>,
    /// The agent's commands written so far (not their output), for the
    /// audit at the end of the agent phase: it then needs no re-reading
    /// of the file, whose outputs may run to megabytes.
    commands: Vec<RecordedCommand>,
}

/// What the trajectory's writer thread is sent.
enum ToFile {
    Line(Vec<u8>),
    /// Answered once every line sent before is written: the first write
    /// error so far.
    Sync(tokio::sync::oneshot::Sender<Option<String>>),
}

/// Lines that may wait for the writer before `write` waits too.
const QUEUED_LINES: usize = 64;

impl TrajectoryWriter {
    /// Opens `path` for appending (making its folder), on a blocking thread.
    pub async fn create(path: &Path) -> std::io::Result<TrajectoryWriter> {
        let owned = path.to_owned();
        let file = crate::blocking::spawn(move || {
            if let Some(dir) = owned.parent() {
                std::fs::create_dir_all(dir)?;
            }
            File::options().create(true).append(true).open(&owned)
        })
        .await
        .map_err(std::io::Error::other)??;
        let (lines, mut queued) = tokio::sync::mpsc::channel(QUEUED_LINES);
        let shown = path.display().to_string();
        let writer = crate::blocking::spawn(move || {
            let mut file = file;
            let mut first_error = None;
            while let Some(message) = queued.blocking_recv() {
                match message {
                    ToFile::Line(line) => {
                        // One write per line: a crash leaves whole lines behind.
                        if let Err(err) = file.write_all(&line) {
                            first_error.get_or_insert_with(|| {
                                format!("failed to write the trajectory {shown}: {err}")
                            });
                        }
                    }
                    ToFile::Sync(answer) => {
                        let _ = answer.send(first_error.clone());
                    }
                }
            }
            first_error
        });
        Ok(TrajectoryWriter {
            lines,
            writer,
            path: path.to_owned(),
            first_error: None,
            pending: Default::default(),
            commands: Vec::new(),
        })
    }

    pub async fn write(&mut self, event: &Event) {
        self.send_pending().await;
        if let Some(line) = self.line(event) {
            let sent = self.lines.send(ToFile::Line(line)).await;
            if sent.is_err() {
                self.note_error("its writer stopped".to_owned());
            }
        }
    }

    /// As [`Self::write`], from code that cannot wait (a callback): when
    /// the queue is full, the line waits here and goes first with the next
    /// `write`, so the order holds.
    pub fn write_soon(&mut self, event: &Event) {
        let Some(line) = self.line(event) else {
            return;
        };
        let line = ToFile::Line(line);
        if !self.pending.is_empty() {
            self.pending.push_back(line);
            return;
        }
        match self.lines.try_send(line) {
            Ok(()) => {}
            Err(tokio::sync::mpsc::error::TrySendError::Full(line)) => self.pending.push_back(line),
            Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => {
                self.note_error("its writer stopped".to_owned());
            }
        }
    }

    async fn send_pending(&mut self) {
        while let Some(line) = self.pending.pop_front() {
            if self.lines.send(line).await.is_err() {
                self.note_error("its writer stopped".to_owned());
            }
        }
    }

    /// The event as a line of the file (remembering a command for the audit).
    fn line(&mut self, event: &Event) -> Option<Vec<u8>> {
        if let Event::Command {
            turn,
            tool_call_id,
            record,
            ..
        } = event
        {
            self.commands.push(RecordedCommand {
                turn: *turn,
                tool_call_id: tool_call_id.clone(),
                command: record.command.clone(),
            });
        }
        let ts = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or_default();
        match serde_json::to_vec(&Line { ts, event }) {
            Ok(mut line) => {
                line.push(b'\n');
                Some(line)
            }
            Err(err) => {
                self.note_error(err.to_string());
                None
            }
        }
    }

    fn note_error(&mut self, err: String) {
        self.first_error.get_or_insert_with(|| {
            format!(
                "failed to write the trajectory {}: {err}",
                self.path.display()
            )
        });
    }

    /// The agent's commands written so far (`command` events), in order.
    pub fn commands(&self) -> &[RecordedCommand] {
        &self.commands
    }

    /// The first write error so far, once every event written before this
    /// call is in the file.
    pub async fn error(&mut self) -> Option<String> {
        self.send_pending().await;
        let (answer, answered) = tokio::sync::oneshot::channel();
        if self.lines.send(ToFile::Sync(answer)).await.is_err() {
            self.note_error("its writer stopped".to_owned());
        } else if let Ok(Some(err)) = answered.await {
            self.first_error.get_or_insert(err);
        }
        self.first_error.clone()
    }

    /// Waits until every event is in the file; the first write error.
    pub async fn finish(mut self) -> Option<String> {
        self.send_pending().await;
        let TrajectoryWriter {
            lines,
            writer,
            first_error,
            ..
        } = self;
        drop(lines);
        let written = writer.await.unwrap_or_else(|join| Some(join.to_string()));
        first_error.or(written)
    }
}

/// Reads a trajectory back as raw JSON events (one per line), skipping a
/// torn last line.
pub fn read_events(path: &Path) -> std::io::Result<Vec<Value>> {
    let text = std::fs::read_to_string(path)?;
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn events_are_tagged_lines_with_timestamps() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.jsonl");
        let mut writer = TrajectoryWriter::create(&path).await.expect("create");
        writer
            .write(&Event::Message {
                turn: 1,
                message: serde_json::json!({"role": "user", "content": "hi"}),
            })
            .await;
        writer
            .write(&Event::AgentEnd {
                exit_reason: ExitReason::MaxTurns,
                turns: 3,
                tool_calls: 2,
                usage: Usage::default(),
                cost_usd: None,
                retries: 0,
                retry_wait_s: 0.0,
                duration_s: 1.5,
                error: None,
            })
            .await;
        assert!(writer.error().await.is_none());
        // Every line is in the file once the writer answers.
        assert_eq!(read_events(&path).expect("read").len(), 2);
        assert!(writer.finish().await.is_none());
        let events = read_events(&path).expect("read");
        assert_eq!(events.len(), 2);
        assert_eq!(events[0]["event"], "message");
        assert_eq!(events[0]["message"]["content"], "hi");
        assert!(events[0]["ts"].as_f64().is_some_and(|ts| ts > 1.6e9));
        assert_eq!(events[1]["exit_reason"], "max_turns");
        let parsed: Event = serde_json::from_value(events[1].clone()).expect("round trip");
        assert!(matches!(parsed, Event::AgentEnd { turns: 3, .. }));
    }
}
