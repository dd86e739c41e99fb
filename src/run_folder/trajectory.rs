//! The trajectory: one JSONL event log per (task, epoch).
//!
//! Owns the event types and the writer, which writes each event as one line
//! with one `write` call, on a thread of its own, in order, so a crash loses
//! at most the lines in flight. The format is documented in docs/trajectory.md; bump
//! [`FORMAT_VERSION`] when it changes incompatibly. It does not decide what
//! happens, only records it.
//!
//! Also owns the one reader of a trajectory ([`read_trajectory`]): every
//! command that looks back at a run (`show`, `report`, replay, the HTML
//! transcripts) gets typed [`Event`]s from it, never raw JSON.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::audit::{Probe, ProbedCommand, RecordedCommand};
use crate::checkout::History;
use crate::grade::Rules;
use crate::run_folder::Status;
use crate::run_folder::{ExitReason, Usage};
use crate::sys::exec::CommandOutcome;

pub(crate) const FORMAT_VERSION: u32 = 1;

/// A command's record: what ran and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct CommandRecord {
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
    /// What the environment had to do around the command (the channel
    /// into its container lost and reopened, or one exec per command
    /// instead); absent when nothing, and in trajectories from before it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub notice: Option<String>,
}

impl CommandRecord {
    pub(crate) fn new(command: &str, outcome: &CommandOutcome) -> CommandRecord {
        CommandRecord {
            command: command.to_owned(),
            exit_code: outcome.exit_code,
            signal: outcome.signal,
            timed_out: outcome.timed_out,
            duration_s: outcome.duration.as_secs_f64(),
            output: outcome.output.to_text(),
            output_bytes: outcome.output.total_bytes(),
            output_lines: outcome.output.total_lines(),
            notice: outcome.notice.clone(),
        }
    }
}

/// One line of the trajectory.
///
/// Read back as well as written: a field added after the first version
/// must be optional or `#[serde(default)]` (docs/trajectory.md says what
/// older files lack), and the golden files of `tests/fixtures/` must still
/// read (the tests below).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub(crate) enum Event {
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
        /// The working copy's HEAD, when it is not `commit` (`--history
        /// none`, or the image's setup commit).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        head: Option<String>,
        /// The commits the repo an image holds had on top of `commit`,
        /// oldest first, the last being where the agent started
        /// (SWE-bench's setup commit); absent when there are none, and in
        /// trajectories from before them.
        #[serde(skip_serializing_if = "Vec::is_empty", default)]
        setup_commits: Vec<String>,
        /// `full` or `none`; absent in trajectories from before `--history`.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        history: Option<History>,
        /// Objects in the working copy's store, each reachable from HEAD:
        /// what the check before any command found (it has no refs, no
        /// alternates, and nothing HEAD does not reach).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        objects: Option<u64>,
        duration_s: f64,
        /// Whether this task fetched the repo (the first of the run to need
        /// it); absent in the first trajectories.
        #[serde(default)]
        fetched: bool,
        /// Whether the working copy is the repo the task's image holds
        /// (SWE-bench's), not onebash's checkout; absent when false, and
        /// in trajectories from before it was recorded.
        #[serde(skip_serializing_if = "std::ops::Not::not", default)]
        from_image: bool,
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
        /// Absent in trajectories from before retries.
        #[serde(default)]
        retries: u32,
        #[serde(default)]
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
    /// The hosts the agent's commands asked for through an allowlist's
    /// proxy (`--allow-hosts`, a Harbor task's `allowed_hosts`), with the
    /// requests refused: written after `audit`, only under an allowlist.
    Hosts {
        asked: Vec<crate::task::HostAsked>,
        /// The refused ones that are the task's repository host (or under
        /// it): the audit's flag.
        #[serde(skip_serializing_if = "Vec::is_empty", default)]
        refused_repo_host: Vec<String>,
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
        /// The rule set the output was graded by (none for a Harbor task,
        /// and in trajectories written before there were two).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        rules: Option<Rules>,
        /// Whether SWE-bench's recipe graded the output (its eval script
        /// and log parser), so that `regrade` grades it so again whatever
        /// today's recipe is; `None` in trajectories from before it was
        /// recorded.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        graded_by_recipe: Option<bool>,
        /// Whether the patch SWE-bench grades is empty (then its
        /// run_evaluation writes no report.json): a prediction's
        /// `model_patch`, else the agent's diff; `None` in trajectories
        /// from before it was recorded (patch.diff tells then).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        model_patch_empty: Option<bool>,
        /// Whether the recipe's bare reset ran before the test patch
        /// (swebench 4.1.0's `git checkout BASE` of an instance whose test
        /// patch only adds files, under 4.1's rules: docs/results.md);
        /// absent when it did not, and in trajectories from before it was
        /// recorded.
        #[serde(skip_serializing_if = "std::ops::Not::not", default)]
        bare_reset: bool,
    },
    End {
        status: Status,
        passed: bool,
        exit_reason: ExitReason,
        wall_s: f64,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        error: Option<String>,
    },
    /// Read only: an event of a kind this version does not know, written
    /// by a newer onebash. Readers skip it; it is never written.
    #[serde(other, skip_serializing)]
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PromptInfo {
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
/// A line of a command's output can be a megabyte, and writing it on an
/// async worker would delay other tasks' timers and output reads: long
/// lines go to a writer on a thread of its own, fed through a bounded
/// channel. A short line is written where it is made when that thread has
/// nothing left to write (a page-cache copy: a thread's wake-up for it
/// cost more than the write, several times a model call). Lines reach the
/// file in the order they were sent, one `write` each.
pub(crate) struct TrajectoryWriter {
    lines: tokio::sync::mpsc::Sender<ToFile>,
    file: std::sync::Arc<File>,
    /// Lines sent to the writer thread and not yet written: a short line
    /// is written here only when none is, so the order holds.
    queued: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// The writer thread's first error, sent when it ends.
    writer: tokio::sync::oneshot::Receiver<Option<String>>,
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

/// The longest line written on the async worker that made it (see
/// [`TrajectoryWriter`]).
const INLINE_LINE_BYTES: usize = 16 * 1024;

impl TrajectoryWriter {
    /// Opens `path` for appending (making its folder), on a blocking thread.
    pub(crate) async fn create(path: &Path) -> std::io::Result<TrajectoryWriter> {
        let owned = path.to_owned();
        let file = crate::sys::blocking::spawn(move || {
            if let Some(dir) = owned.parent() {
                std::fs::create_dir_all(dir)?;
            }
            File::options().create(true).append(true).open(&owned)
        })
        .await
        .map_err(std::io::Error::other)??;
        let file = std::sync::Arc::new(file);
        let queued = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (lines, mut to_write) = tokio::sync::mpsc::channel(QUEUED_LINES);
        let shown = path.display().to_string();
        let (ended, writer) = tokio::sync::oneshot::channel();
        // A thread of its own, not one of tokio's blocking pool: it lives
        // as long as the task, and at -j 512 the writers would take every
        // thread of the pool and leave none for the checkouts.
        let thread = std::thread::Builder::new().name("onebash-trajectory".to_owned());
        let (theirs, written) = (std::sync::Arc::clone(&file), std::sync::Arc::clone(&queued));
        thread.spawn(move || {
            let mut first_error = None;
            while let Some(message) = to_write.blocking_recv() {
                match message {
                    ToFile::Line(line) => {
                        // One write per line: a crash leaves whole lines behind.
                        if let Err(err) = (&*theirs).write_all(&line) {
                            first_error.get_or_insert_with(|| {
                                format!("failed to write the trajectory {shown}: {err}")
                            });
                        }
                        written.fetch_sub(1, std::sync::atomic::Ordering::Release);
                    }
                    ToFile::Sync(answer) => {
                        let _ = answer.send(first_error.clone());
                    }
                }
            }
            let _ = ended.send(first_error);
        })?;
        Ok(TrajectoryWriter {
            lines,
            file,
            queued,
            writer,
            path: path.to_owned(),
            first_error: None,
            pending: Default::default(),
            commands: Vec::new(),
        })
    }

    /// Cancel-safe: until a place in the queue is free nothing changes,
    /// and after that nothing waits.
    pub(crate) async fn write(&mut self, event: &Event) {
        self.send_pending().await;
        let Some(line) = self.line(event) else {
            return;
        };
        let Some(line) = self.write_here(line) else {
            return;
        };
        let lines = self.lines.clone();
        let Ok(place) = lines.reserve().await else {
            self.note_error("its writer stopped".to_owned());
            return;
        };
        self.queued
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        place.send(line);
    }

    /// Writes `line` now when it is short and nothing waits for the
    /// writer thread; else gives it back, for the thread.
    fn write_here(&mut self, line: Vec<u8>) -> Option<ToFile> {
        let drained =
            self.pending.is_empty() && self.queued.load(std::sync::atomic::Ordering::Acquire) == 0;
        if !drained || line.len() > INLINE_LINE_BYTES {
            return Some(ToFile::Line(line));
        }
        if let Err(err) = (&*self.file).write_all(&line) {
            self.note_error(err.to_string());
        }
        None
    }

    /// As [`Self::write`], from code that cannot wait (a callback): when
    /// the queue is full, the line waits here and goes first with the next
    /// `write`, so the order holds.
    pub(crate) fn write_soon(&mut self, event: &Event) {
        let Some(line) = self.line(event) else {
            return;
        };
        let Some(line) = self.write_here(line) else {
            return;
        };
        if !self.pending.is_empty() {
            self.pending.push_back(line);
            return;
        }
        self.queued
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match self.lines.try_send(line) {
            Ok(()) => {}
            Err(tokio::sync::mpsc::error::TrySendError::Full(line)) => {
                self.queued
                    .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                self.pending.push_back(line);
            }
            Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => {
                self.queued
                    .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                self.note_error("its writer stopped".to_owned());
            }
        }
    }

    async fn send_pending(&mut self) {
        while !self.pending.is_empty() {
            let Ok(place) = self.lines.reserve().await else {
                self.note_error("its writer stopped".to_owned());
                self.pending.clear();
                return;
            };
            if let Some(line) = self.pending.pop_front() {
                self.queued
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                place.send(line);
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
    pub(crate) fn commands(&self) -> &[RecordedCommand] {
        &self.commands
    }

    /// The first write error so far, once every event written before this
    /// call is in the file.
    pub(crate) async fn error(&mut self) -> Option<String> {
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
    pub(crate) async fn finish(mut self) -> Option<String> {
        self.send_pending().await;
        let TrajectoryWriter {
            lines,
            writer,
            first_error,
            ..
        } = self;
        drop(lines);
        let written = writer
            .await
            .unwrap_or_else(|_| Some("the trajectory's writer thread ended early".to_owned()));
        first_error.or(written)
    }
}

/// Why a trajectory cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("failed to read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A line of a known kind that does not fit its event: written by
    /// something other than onebash, or a field was renamed.
    #[error("failed to read {}:{line}: {source}", path.display())]
    Event {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
}

/// Reads a trajectory back, in file order. A line that is not JSON (the
/// last one, torn by a crash) is skipped; an event of an unknown kind reads
/// as [`Event::Unknown`]; a line of a known kind that does not fit it is an
/// error naming the line, so a mismatch between writer and reader shows.
pub(crate) fn read_trajectory(path: &Path) -> Result<Vec<Event>, ReadError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReadError::Io {
        path: path.to_owned(),
        source,
    })?;
    let mut events = Vec::new();
    for (index, line) in text.lines().enumerate() {
        events.extend(parse_line(path, index, line)?);
    }
    Ok(events)
}

/// Line `index` (from 0) of the trajectory at `path`: its event, or none
/// for a torn line (JSON cut short by a crash), which is skipped.
fn parse_line(path: &Path, index: usize, line: &str) -> Result<Option<Event>, ReadError> {
    match serde_json::from_str::<Event>(line) {
        Ok(event) => Ok(Some(event)),
        Err(_) if serde_json::from_str::<serde::de::IgnoredAny>(line).is_err() => Ok(None),
        Err(source) => Err(ReadError::Event {
            path: path.to_owned(),
            line: index + 1,
            source,
        }),
    }
}

/// The last `test` event of the trajectory at `path`, if it has one.
/// Only lines that may be one are parsed: `report` asks it of every row,
/// and the rest of a trajectory (the model's messages, the commands'
/// output) is most of its bytes. A torn line is skipped, as
/// [`read_trajectory`] skips it.
pub(crate) fn read_test_event(path: &Path) -> Result<Option<Event>, ReadError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReadError::Io {
        path: path.to_owned(),
        source,
    })?;
    let mut last = None;
    for (index, line) in text.lines().enumerate() {
        // The tag's value, however the line is spaced.
        if !line.contains("\"test\"") {
            continue;
        }
        if let Some(event @ Event::Test { .. }) = parse_line(path, index, line)? {
            last = Some(event);
        }
    }
    Ok(last)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::audit::ProbeKind;
    use serde_json::json;

    /// A trajectory written by the onebash of the first typed reader: one
    /// event of every kind, every optional field given.
    const GOLDEN: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/trajectory.jsonl"
    );
    /// A whole run that version made (an Anthropic run against a scripted
    /// server): the events as a real run writes them.
    const GOLDEN_RUN: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/run/tasks/calc-divide-by-zero/epoch-1/trajectory.jsonl"
    );

    fn record(command: &str) -> CommandRecord {
        CommandRecord {
            command: command.to_owned(),
            exit_code: 137,
            signal: Some(9),
            timed_out: true,
            duration_s: 1.25,
            output: "out\n".to_owned(),
            output_bytes: 4,
            output_lines: 1,
            notice: None,
        }
    }

    fn usage() -> Usage {
        Usage {
            prompt_tokens: 100,
            completion_tokens: 20,
            total_tokens: 120,
            cached_tokens: 40,
            cache_write_tokens: 10,
            reasoning_tokens: 5,
        }
    }

    fn probe(kind: ProbeKind, reason: &str) -> Probe {
        Probe {
            kind,
            reason: reason.to_owned(),
        }
    }

    /// One event of every kind with every optional field set, so that a
    /// field renamed on one side only is missed by the other.
    fn every_event() -> Vec<Event> {
        vec![
            Event::Header {
                format_version: FORMAT_VERSION,
                onebash_version: "0.1.0".to_owned(),
                task: json!({"id": "t1", "repo": "r"}),
                epoch: 2,
                model: "m".to_owned(),
                provider: "anthropic".to_owned(),
                prompt: PromptInfo {
                    name: "default".to_owned(),
                    sha256: "abc".to_owned(),
                },
                repo: "/repos/r".to_owned(),
                base_commit: "HEAD~1".to_owned(),
                request_template: json!({"url": "http://x", "model": "m"}),
                settings: json!({"max_turns": 5}),
            },
            Event::Checkout {
                commit: "c0ffee".to_owned(),
                head: Some("beef".to_owned()),
                setup_commits: vec!["cafe".to_owned()],
                history: Some(History::None),
                objects: Some(42),
                duration_s: 0.5,
                fetched: true,
                from_image: false,
                warning: Some("stale mirror".to_owned()),
            },
            Event::Setup(record("make setup")),
            Event::System {
                content: "You fix bugs.".to_owned(),
            },
            Event::Message {
                turn: 0,
                message: json!({"role": "user", "content": "Fix it."}),
            },
            Event::ModelRetry {
                turn: 1,
                retry: 1,
                status: Some(529),
                error: "overloaded".to_owned(),
                wait_s: 2.5,
            },
            Event::ModelCall {
                turn: 1,
                latency_s: 0.75,
                usage: usage(),
                finish_reason: Some("tool_use".to_owned()),
                response_id: Some("msg_1".to_owned()),
            },
            Event::Message {
                turn: 1,
                message: json!({"role": "assistant", "content": [{"type": "text", "text": "Looking."}]}),
            },
            Event::Command {
                turn: 1,
                tool_call_id: "call_1".to_owned(),
                record: record("git log --all"),
                shown_chars: 3,
            },
            Event::ReplayDivergence {
                turn: 1,
                tool_call_id: "call_1".to_owned(),
                recorded_output: "a\n".to_owned(),
                output: "b\n".to_owned(),
            },
            Event::ToolError {
                turn: 1,
                tool_call_id: "call_2".to_owned(),
                error: "unknown tool".to_owned(),
            },
            Event::ModelError {
                turn: 2,
                latency_s: 3.5,
                error: "HTTP 500".to_owned(),
            },
            Event::AgentEnd {
                exit_reason: ExitReason::ApiError,
                turns: 2,
                tool_calls: 2,
                usage: usage(),
                cost_usd: Some(0.25),
                retries: 1,
                retry_wait_s: 2.5,
                duration_s: 9.5,
                error: Some("HTTP 500".to_owned()),
            },
            Event::Audit {
                history_probes: vec![ProbedCommand {
                    turn: 1,
                    tool_call_id: "call_1".to_owned(),
                    command: "git log --all".to_owned(),
                    probes: vec![probe(ProbeKind::AllRefs, "git log --all")],
                }],
                setup_probes: vec![probe(ProbeKind::GitFetch, "git fetch")],
            },
            Event::Hosts {
                asked: vec![
                    crate::task::HostAsked {
                        host: "github.com".to_owned(),
                        requests: 1,
                        refused: 1,
                    },
                    crate::task::HostAsked {
                        host: "pypi.org".to_owned(),
                        requests: 3,
                        refused: 0,
                    },
                ],
                refused_repo_host: vec!["github.com".to_owned()],
            },
            Event::Diff {
                path: "patch.diff".to_owned(),
                bytes: 10,
            },
            Event::Test {
                test_patch_files: Some(vec!["tests/test_a.py".to_owned()]),
                test_patch_method: Some("git apply --3way".to_owned()),
                record: record("pytest"),
                log_path: "test.log".to_owned(),
                per_test: Some(json!({"statuses": {"test_a": "passed"}, "verdict": "resolved"})),
                rules: Some(Rules::Swebench50),
                graded_by_recipe: Some(true),
                model_patch_empty: Some(false),
                bare_reset: false,
            },
            Event::End {
                status: Status::Error,
                passed: false,
                exit_reason: ExitReason::ApiError,
                wall_s: 12.5,
                error: Some("HTTP 500".to_owned()),
            },
        ]
    }

    /// The `event` word of each kind. The match has no catch-all, so a new
    /// variant does not compile until it is named here, and
    /// `every_kind_is_documented_and_in_the_golden_file` then wants it in
    /// docs/trajectory.md and in `every_event`.
    fn kind(event: &Event) -> &'static str {
        match event {
            Event::Header { .. } => "header",
            Event::Checkout { .. } => "checkout",
            Event::Setup(_) => "setup",
            Event::Message { .. } => "message",
            Event::ModelCall { .. } => "model_call",
            Event::System { .. } => "system",
            Event::ModelRetry { .. } => "model_retry",
            Event::ModelError { .. } => "model_error",
            Event::Command { .. } => "command",
            Event::ReplayDivergence { .. } => "replay_divergence",
            Event::ToolError { .. } => "tool_error",
            Event::AgentEnd { .. } => "agent_end",
            Event::Audit { .. } => "audit",
            Event::Hosts { .. } => "hosts",
            Event::Diff { .. } => "diff",
            Event::Test { .. } => "test",
            Event::End { .. } => "end",
            Event::Unknown => "unknown",
        }
    }

    /// The event kinds docs/trajectory.md's table lists.
    fn documented_kinds() -> BTreeSet<String> {
        let doc = include_str!("../../docs/trajectory.md");
        let table = &doc[doc.find("## Events").expect("an Events section")..];
        table
            .lines()
            .filter_map(|line| line.strip_prefix("| `"))
            .filter_map(|rest| rest.split_once('`'))
            .map(|(kind, _)| kind.to_owned())
            .collect()
    }

    /// Each line of a file as JSON, without the `ts` the writer adds.
    fn lines_without_ts(path: &str) -> Vec<Value> {
        std::fs::read_to_string(path)
            .expect("golden file")
            .lines()
            .map(|line| {
                let mut value: Value = serde_json::from_str(line).expect("a JSON line");
                value.as_object_mut().expect("an object").remove("ts");
                value
            })
            .collect()
    }

    #[test]
    fn every_kind_is_documented_and_in_the_golden_file() {
        let sampled: BTreeSet<String> = every_event()
            .iter()
            .map(|event| {
                assert_eq!(
                    serde_json::to_value(event).expect("serialize")["event"],
                    kind(event)
                );
                kind(event).to_owned()
            })
            .collect();
        assert_eq!(sampled, documented_kinds());
        let golden: BTreeSet<String> = read_trajectory(Path::new(GOLDEN))
            .expect("golden trajectory")
            .iter()
            .map(|event| kind(event).to_owned())
            .collect();
        assert_eq!(golden, documented_kinds());
    }

    /// What the writer writes, the reader reads back whole.
    #[tokio::test]
    async fn every_event_round_trips_through_the_writer_and_the_reader() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.jsonl");
        let mut writer = TrajectoryWriter::create(&path).await.expect("create");
        for event in &every_event() {
            writer.write(event).await;
        }
        // Every line is in the file, in order, once the writer answers.
        assert!(writer.error().await.is_none());
        assert_eq!(read_trajectory(&path).expect("read"), every_event());
        assert!(writer.finish().await.is_none());
    }

    /// Short lines written where they are made and long ones through the
    /// writer thread keep the order they were sent in, through `write` and
    /// `write_soon` alike, however the two interleave.
    #[tokio::test]
    async fn short_and_long_lines_keep_their_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.jsonl");
        let mut writer = TrajectoryWriter::create(&path).await.expect("create");
        let mut sent = Vec::new();
        for i in 0..300 {
            // Every third line is longer than a line written in place; runs
            // of long lines fill the queue, so `write_soon` keeps some back.
            let long = i % 3 == 0 || (100..180).contains(&i);
            let event = Event::Diff {
                path: "p".repeat(if long { INLINE_LINE_BYTES + 1 } else { 8 }),
                bytes: i,
            };
            if i % 2 == 0 {
                writer.write(&event).await;
            } else {
                writer.write_soon(&event);
            }
            sent.push(event);
        }
        assert!(writer.finish().await.is_none());
        assert_eq!(read_trajectory(&path).expect("read"), sent);
    }

    /// `bare_reset` is written when the reset ran and read back, and left
    /// out when it did not, as in the trajectories from before it.
    #[test]
    fn a_bare_reset_is_written_only_when_it_ran() {
        let mut test = every_event()
            .into_iter()
            .find(|event| matches!(event, Event::Test { .. }))
            .expect("a test event");
        let line = serde_json::to_string(&test).expect("serialize");
        assert!(!line.contains("bare_reset"), "{line}");
        if let Event::Test { bare_reset, .. } = &mut test {
            *bare_reset = true;
        }
        let line = serde_json::to_string(&test).expect("serialize");
        assert!(line.contains(r#""bare_reset":true"#), "{line}");
        assert_eq!(serde_json::from_str::<Event>(&line).expect("read"), test);
    }

    /// The golden file reads as the events it was written from: a field
    /// renamed (or made required) since breaks this test, as it would break
    /// `show`, `report` and replay on every run folder made before.
    #[test]
    fn the_golden_trajectory_still_reads_field_for_field() {
        assert_eq!(read_whole(GOLDEN), every_event());
    }

    /// A real run's trajectory has no event the reader does not know and
    /// loses nothing of any line.
    #[test]
    fn a_real_run_trajectory_reads_whole() {
        let events = read_whole(GOLDEN_RUN);
        assert!(!events.contains(&Event::Unknown), "{events:?}");
    }

    /// The events of a file, checked to be its lines (less the time) when
    /// written again: no field of the file was dropped on the way in.
    fn read_whole(path: &str) -> Vec<Event> {
        let events = read_trajectory(Path::new(path)).expect("a trajectory");
        let written: Vec<Value> = events
            .iter()
            .map(|event| serde_json::to_value(event).expect("serialize"))
            .collect();
        assert_eq!(written, lines_without_ts(path));
        events
    }

    /// Older files lack what was added since, newer ones may hold kinds
    /// this version does not know, and a crash tears the last line: all
    /// read. A known kind that does not fit is an error naming its line.
    #[test]
    fn older_newer_and_torn_trajectories_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.jsonl");
        let lines = [
            r#"{"ts":1.0,"event":"checkout","commit":"abc","duration_s":0.5}"#,
            r#"{"ts":1.0,"event":"agent_end","exit_reason":"completed","turns":1,"tool_calls":0,"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2},"duration_s":1.0}"#,
            r#"{"ts":1.0,"event":"sparkle","turn":3}"#,
            r#"{"ts":1.0,"event":"end","status":"pass"#,
        ];
        std::fs::write(&path, lines.join("\n")).expect("write");
        let events = read_trajectory(&path).expect("read");
        assert_eq!(events.len(), 3, "{events:?}");
        assert!(matches!(
            &events[0],
            Event::Checkout {
                head: None,
                setup_commits,
                history: None,
                objects: None,
                fetched: false,
                ..
            } if setup_commits.is_empty()
        ));
        assert!(matches!(&events[1], Event::AgentEnd { retries: 0, .. }));
        assert_eq!(events[2], Event::Unknown);

        std::fs::write(
            &path,
            format!("{}\n{{\"event\":\"diff\",\"bytes\":3}}\n", lines[0]),
        )
        .expect("write");
        let err = read_trajectory(&path).expect_err("a diff without its path");
        assert!(
            err.to_string().contains("t.jsonl:2: missing field `path`"),
            "{err}"
        );
    }
}
