//! Stage 5: outcomes, the CSV row and the run folder.
//!
//! Owns [`Status`] (serialized as docs/results.md's words; the exit reason
//! beside it is the agent phase's, `agent::types::ExitReason`),
//! [`ResultRow`] with the CSV columns in order, the append-only
//! `results.csv` writer (one `write` per row, so a row is whole or absent),
//! `run.json`, and where each (task, epoch)'s files go.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::agent::types::ExitReason;
use crate::task::TaskId;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Passed,
    Failed,
    /// The harness, the API or the task's own setup failed: no verdict.
    Error,
}

impl Status {
    /// The CSV word.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::Failed => "failed",
            Status::Error => "error",
        }
    }
}

/// One row of results.csv; fields in docs/results.md's column order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResultRow {
    pub task_id: TaskId,
    pub epoch: u32,
    pub model: String,
    pub prompt: String,
    pub status: Status,
    pub exit_reason: ExitReason,
    pub passed: bool,
    pub turns: u32,
    pub tool_calls: u32,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    pub cost_usd: Option<f64>,
    pub agent_seconds: f64,
    pub test_seconds: Option<f64>,
    pub wall_seconds: f64,
    pub test_exit_code: Option<i32>,
    pub error: String,
    /// Model calls retried (429, 5xx, lost connections...).
    pub model_retries: u32,
    /// Seconds spent waiting before those retries.
    pub retry_wait_seconds: f64,
    /// Replaying: commands whose output differs from the recording.
    #[serde(default)]
    pub replay_divergences: u32,
    /// The agent's commands that probed the repo's history past the base
    /// or fetched the project's source (`audit`). `None`: the row comes
    /// from a results.csv written before the column existed.
    #[serde(default)]
    pub history_probes: Option<u32>,
    /// The reward a Harbor task's verifier wrote (1 passes; fractions
    /// are kept as they are); empty for other tasks.
    #[serde(default)]
    pub reward: Option<f64>,
    /// Output tokens spent reasoning, part of `completion_tokens`, where
    /// the API counts them apart (OpenAI; Anthropic bills thinking as
    /// output without a count). 0 in rows from before the column.
    #[serde(default)]
    pub reasoning_tokens: u64,
    /// Input tokens read from the provider's prompt cache, part of
    /// `prompt_tokens`.
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// Input tokens written to the prompt cache (Anthropic), part of
    /// `prompt_tokens`: they cost more than plain input, so the cost is
    /// not known from the reads alone.
    #[serde(default)]
    pub cache_write_tokens: u64,
}

impl ResultRow {
    /// A row with nothing counted yet: status `error`, no turns, tokens or
    /// times. A task fills it in as its stages end; one that never got far
    /// keeps it as it is.
    pub fn blank(
        task_id: TaskId,
        epoch: u32,
        model: String,
        prompt: String,
        exit_reason: ExitReason,
    ) -> ResultRow {
        ResultRow {
            task_id,
            epoch,
            model,
            prompt,
            status: Status::Error,
            exit_reason,
            passed: false,
            turns: 0,
            tool_calls: 0,
            prompt_tokens: 0,
            completion_tokens: 0,
            total_tokens: 0,
            cost_usd: None,
            agent_seconds: 0.0,
            test_seconds: None,
            wall_seconds: 0.0,
            test_exit_code: None,
            error: String::new(),
            model_retries: 0,
            retry_wait_seconds: 0.0,
            replay_divergences: 0,
            history_probes: Some(0),
            reward: None,
            reasoning_tokens: 0,
            cached_input_tokens: 0,
            cache_write_tokens: 0,
        }
    }
}

/// Rounds seconds to milliseconds for the CSV.
pub fn round_seconds(seconds: f64) -> f64 {
    (seconds * 1000.0).round() / 1000.0
}

/// Makes an error message fit one CSV cell on one line.
pub fn one_line(message: &str) -> String {
    let joined = message.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() > 1000 {
        let cut: String = joined.chars().take(1000).collect();
        format!("{cut}...")
    } else {
        joined
    }
}

/// Names of the files in a (task, epoch) folder. The trajectory's `diff`
/// and `test` events give the last two relative to that folder.
pub const TRAJECTORY: &str = "trajectory.jsonl";
/// A Harbor task's image build output, when this task built it.
pub const BUILD_LOG: &str = "build.log";
pub const PATCH_DIFF: &str = "patch.diff";
pub const TEST_LOG: &str = "test.log";
pub const TESTS_JSON: &str = "tests.json";

/// The run folder's layout: the one place that knows where each file of a
/// run lives (docs/results.md), for the run that writes them and for every
/// command that reads them back.
#[derive(Debug, Clone)]
pub struct RunFolder {
    root: PathBuf,
}

impl RunFolder {
    pub fn create(root: &Path) -> std::io::Result<RunFolder> {
        let folder = RunFolder::at(root);
        folder.create_dir()?;
        Ok(folder)
    }

    /// The run folder at `root`, which may not exist yet.
    pub fn at(root: &Path) -> RunFolder {
        RunFolder {
            root: root.to_owned(),
        }
    }

    /// An existing run folder, to read. A run (and a merge) writes run.json
    /// before anything else, so a folder without one is not a run folder,
    /// or not yet one.
    pub fn open(root: &Path) -> Result<RunFolder, String> {
        let folder = RunFolder::at(root);
        if !root.is_dir() {
            return Err(format!(
                "{} is not a run folder: no such folder\nhint: name the folder `onebash run -o` wrote",
                root.display()
            ));
        }
        if !folder.run_json().is_file() {
            return Err(format!(
                "{} is not a run folder (no run.json)\nhint: name the folder `onebash run -o` wrote",
                root.display()
            ));
        }
        Ok(folder)
    }

    /// Makes the folder, and its parents, where missing.
    pub fn create_dir(&self) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.root)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn results_csv(&self) -> PathBuf {
        self.root.join("results.csv")
    }

    pub fn run_json(&self) -> PathBuf {
        self.root.join("run.json")
    }

    /// `run.lock`: held by the one onebash that runs in the folder (a run,
    /// or its resume), so that a second cannot interleave its rows or
    /// tear down the first one's containers.
    pub fn lock_file(&self) -> PathBuf {
        self.root.join("run.lock")
    }

    /// `tasks/`: a folder per task, one per epoch inside.
    pub fn tasks_dir(&self) -> PathBuf {
        self.root.join("tasks")
    }

    /// `tasks/<id>/epoch-<k>/`: trajectory, diff and test log of one (task, epoch).
    pub fn task_dir(&self, task: &TaskId, epoch: u32) -> PathBuf {
        self.tasks_dir()
            .join(task.as_str())
            .join(format!("epoch-{epoch}"))
    }

    pub fn trajectory(&self, task: &TaskId, epoch: u32) -> PathBuf {
        self.task_dir(task, epoch).join(TRAJECTORY)
    }

    pub fn patch_diff(&self, task: &TaskId, epoch: u32) -> PathBuf {
        self.task_dir(task, epoch).join(PATCH_DIFF)
    }

    /// The SWE-bench predictions of one epoch: `predictions.jsonl` for the
    /// first, `predictions.epoch-<k>.jsonl` for the others.
    pub fn predictions(&self, epoch: u32) -> PathBuf {
        if epoch == 1 {
            self.root.join("predictions.jsonl")
        } else {
            self.root.join(format!("predictions.epoch-{epoch}.jsonl"))
        }
    }
}

/// Appends rows to results.csv, the header first when the file is new.
pub struct ResultsWriter {
    file: File,
}

impl ResultsWriter {
    fn open_truncated(path: &Path) -> std::io::Result<ResultsWriter> {
        File::create(path)?;
        ResultsWriter::open(path)
    }

    pub fn open(path: &Path) -> std::io::Result<ResultsWriter> {
        let mut file = File::options().create(true).append(true).open(path)?;
        if file.metadata()?.len() == 0 {
            let mut header = csv::Writer::from_writer(Vec::new());
            header
                .write_record(COLUMNS)
                .map_err(std::io::Error::other)?;
            file.write_all(
                &header
                    .into_inner()
                    .map_err(|e| std::io::Error::other(e.to_string()))?,
            )?;
        }
        Ok(ResultsWriter { file })
    }

    /// Writes one row with a single `write` and syncs it to disk.
    pub fn append(&mut self, row: &ResultRow) -> std::io::Result<()> {
        let mut writer = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(Vec::new());
        writer.serialize(row).map_err(std::io::Error::other)?;
        let bytes = writer
            .into_inner()
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        self.file.write_all(&bytes)?;
        self.file.sync_data()
    }
}

/// results.csv written on a thread of its own. A row's write and sync
/// waits for the disk, tens of milliseconds while other tasks' checkouts
/// fill it: on an async worker that wait delayed the timers and output
/// reads of every task on it. Rows are written in the order they are
/// sent; a row sent is on disk once [`RowSink::finish`] returns.
pub struct RowSink {
    rows: std::sync::mpsc::Sender<ResultRow>,
    thread: std::thread::JoinHandle<Option<String>>,
}

impl RowSink {
    /// Starts the thread that appends to `writer` (results.csv at `path`,
    /// for messages).
    pub fn start(mut writer: ResultsWriter, path: PathBuf) -> std::io::Result<RowSink> {
        let (rows, received) = std::sync::mpsc::channel::<ResultRow>();
        let thread = std::thread::Builder::new()
            .name("results.csv".to_owned())
            .spawn(move || {
                let mut first_error = None;
                for row in received {
                    if let Err(err) = writer.append(&row)
                        && first_error.is_none()
                    {
                        first_error = Some(format!("failed to write {}: {err}", path.display()));
                    }
                }
                first_error
            })?;
        Ok(RowSink { rows, thread })
    }

    /// Queues `row` (never waits).
    pub fn send(&self, row: ResultRow) {
        // The thread ends only when this sink is dropped or finished.
        let _ = self.rows.send(row);
    }

    /// Waits until every row sent is written (a blocking wait: call it off
    /// the async workers); the first write error, if any.
    pub fn finish(self) -> Option<String> {
        drop(self.rows);
        self.thread
            .join()
            .unwrap_or_else(|_| Some("the results.csv writer failed".to_owned()))
    }
}

/// Reads results.csv back. A last line without its newline is a row torn
/// by a crash: it is not returned, and `torn_at` says where it starts so
/// the caller can cut it off.
pub fn read_rows(path: &Path) -> Result<RowsRead, String> {
    let bytes =
        std::fs::read(path).map_err(|err| format!("failed to read {}: {err}", path.display()))?;
    let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let torn_at = (whole < bytes.len()).then_some(whole as u64);
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(&bytes[..whole]);
    // An empty file has no header: nothing to line up with.
    let header_is_current = whole == 0
        || reader
            .headers()
            .is_ok_and(|header| header.iter().eq(COLUMNS.iter().copied()));
    let mut rows = Vec::new();
    for (index, record) in reader.deserialize::<ResultRow>().enumerate() {
        let row = record.map_err(|err| {
            format!(
                "{}: row {} cannot be read: {err}",
                path.display(),
                index + 1
            )
        })?;
        rows.push(row);
    }
    Ok(RowsRead {
        rows,
        torn_at,
        header_is_current,
    })
}

/// What [`read_rows`] found.
#[derive(Debug)]
pub struct RowsRead {
    pub rows: Vec<ResultRow>,
    /// Byte offset of a torn last line, if there is one.
    pub torn_at: Option<u64>,
    /// Whether the header is [`COLUMNS`]. A file written by an older
    /// onebash lacks the newer columns (its rows read them as empty);
    /// rows appended to it would not line up with its header, so a resume
    /// rewrites it first.
    pub header_is_current: bool,
}

/// Writes a whole results.csv (header and rows) through a temporary file
/// and a rename: the file is complete before and after, never half.
pub fn write_rows_atomically(path: &Path, rows: &[ResultRow]) -> std::io::Result<()> {
    let tmp = path.with_extension("csv.tmp");
    {
        let mut writer = ResultsWriter::open_truncated(&tmp)?;
        for row in rows {
            writer.append(row)?;
        }
    }
    std::fs::rename(&tmp, path)
}

/// Writes the predictions of a run in SWE-bench's format, one JSON line per
/// task: `instance_id`, `model_name_or_path`, `model_patch` (the agent's
/// diff against base_commit). Epoch 1 goes to `predictions.jsonl`, epoch k
/// to `predictions.epoch-<k>.jsonl`, so each file has one line per task as
/// the official evaluation expects. Rewritten whole from the rows.
pub fn write_predictions(folder: &RunFolder, rows: &[ResultRow]) -> std::io::Result<()> {
    let mut by_epoch: std::collections::BTreeMap<u32, Vec<&ResultRow>> = Default::default();
    for row in rows {
        by_epoch.entry(row.epoch).or_default().push(row);
    }
    for (epoch, rows) in by_epoch {
        let mut text = String::new();
        for row in rows {
            let patch =
                std::fs::read_to_string(folder.patch_diff(&row.task_id, epoch)).unwrap_or_default();
            let line = serde_json::json!({
                "instance_id": row.task_id,
                "model_name_or_path": row.model,
                "model_patch": patch,
            });
            text.push_str(&line.to_string());
            text.push('\n');
        }
        let path = folder.predictions(epoch);
        let tmp = path.with_extension("jsonl.tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, &path)?;
    }
    Ok(())
}

/// The CSV header, in docs/results.md's order.
pub const COLUMNS: &[&str] = &[
    "task_id",
    "epoch",
    "model",
    "prompt",
    "status",
    "exit_reason",
    "passed",
    "turns",
    "tool_calls",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "cost_usd",
    "agent_seconds",
    "test_seconds",
    "wall_seconds",
    "test_exit_code",
    "error",
    "model_retries",
    "retry_wait_seconds",
    "replay_divergences",
    "history_probes",
    "reward",
    "reasoning_tokens",
    "cached_input_tokens",
    "cache_write_tokens",
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Every reader opens a run folder the same way: one with run.json is
    /// one, anything else is refused with a message that says why.
    #[test]
    fn only_a_folder_with_run_json_opens_as_a_run_folder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = RunFolder::open(&dir.path().join("nope")).expect_err("no folder");
        assert!(missing.contains("no such folder"), "{missing}");
        let empty = RunFolder::open(dir.path()).expect_err("no run.json");
        assert!(empty.contains("not a run folder (no run.json)"), "{empty}");
        std::fs::write(dir.path().join("run.json"), "{}").expect("write");
        let folder = RunFolder::open(dir.path()).expect("a run folder");
        let task = TaskId::parse("t1").expect("id");
        assert_eq!(
            folder.trajectory(&task, 2),
            dir.path().join("tasks/t1/epoch-2/trajectory.jsonl")
        );
        assert_eq!(folder.predictions(1), dir.path().join("predictions.jsonl"));
        assert_eq!(
            folder.predictions(3),
            dir.path().join("predictions.epoch-3.jsonl")
        );
        // run.json that is not a manifest opens, but does not read.
        assert!(crate::manifest::RunManifest::read(&folder).is_err());
    }

    fn row() -> ResultRow {
        let id = TaskId::parse("t1").expect("id");
        let blank = ResultRow::blank(
            id,
            1,
            "m".into(),
            "default@abc".into(),
            ExitReason::CheckoutError,
        );
        ResultRow {
            wall_seconds: 1.25,
            error: "failed to fetch x: \"quoted\", comma".into(),
            model_retries: 2,
            retry_wait_seconds: 1.5,
            ..blank
        }
    }

    #[test]
    fn rows_follow_the_contract_columns() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("results.csv");
        let mut writer = ResultsWriter::open(&path).expect("open");
        writer.append(&row()).expect("append");
        drop(writer);
        // Reopening appends without a second header.
        ResultsWriter::open(&path)
            .expect("reopen")
            .append(&row())
            .expect("append");
        let text = std::fs::read_to_string(&path).expect("read");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], COLUMNS.join(","));
        assert_eq!(
            lines[1],
            "t1,1,m,default@abc,error,checkout_error,false,0,0,0,0,0,,0.0,,1.25,,\"failed to fetch x: \"\"quoted\"\", comma\",2,1.5,0,0,,0,0,0"
        );
    }

    #[test]
    fn the_row_sink_writes_rows_in_order_and_reports_the_first_failure() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("results.csv");
        let sink =
            RowSink::start(ResultsWriter::open(&path).expect("open"), path.clone()).expect("start");
        for epoch in 1..=50 {
            sink.send(ResultRow { epoch, ..row() });
        }
        assert_eq!(sink.finish(), None);
        let read = read_rows(&path).expect("read back");
        let epochs: Vec<u32> = read.rows.iter().map(|row| row.epoch).collect();
        assert_eq!(epochs, (1..=50).collect::<Vec<_>>());

        // A disk that is full: every write fails, the run is told once.
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let sink = RowSink::start(ResultsWriter { file: full }, PathBuf::from("/dev/full"))
            .expect("start");
        sink.send(row());
        sink.send(row());
        let error = sink.finish().expect("an error");
        assert!(error.starts_with("failed to write /dev/full: "), "{error}");
    }

    /// A results.csv from before `history_probes` (and `replay_divergences`,
    /// and the token columns after them) reads: the missing columns are
    /// empty, and the header is reported as not current, so a resume
    /// rewrites the file before appending.
    #[test]
    fn an_older_header_reads_with_the_new_columns_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("results.csv");
        let header = &COLUMNS[..COLUMNS.len() - 6];
        let text = format!(
            "{}\nt1,1,m,p@1,passed,completed,true,2,1,10,5,15,,1.0,0.5,2.0,0,,0,0.0\n",
            header.join(",")
        );
        std::fs::write(&path, text).expect("write");
        let read = read_rows(&path).expect("read");
        assert!(!read.header_is_current);
        assert_eq!(read.rows.len(), 1);
        assert_eq!(read.rows[0].history_probes, None);
        assert_eq!(read.rows[0].replay_divergences, 0);
        write_rows_atomically(&path, &read.rows).expect("rewrite");
        let read = read_rows(&path).expect("read again");
        assert!(read.header_is_current);
        assert_eq!(read.rows[0].history_probes, None);
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(
            text.lines()
                .nth(1)
                .is_some_and(|l| l.ends_with(",0,,,0,0,0")),
            "{text}"
        );
        assert_eq!(read.rows[0].cached_input_tokens, 0);
    }

    #[test]
    fn rows_read_back_and_a_torn_last_line_is_found() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("results.csv");
        let mut writer = ResultsWriter::open(&path).expect("open");
        writer.append(&row()).expect("append");
        let mut second = row();
        second.task_id = TaskId::parse("t2").expect("id");
        second.cost_usd = Some(0.25);
        second.test_seconds = Some(2.0);
        writer.append(&second).expect("append");
        drop(writer);
        let whole = std::fs::metadata(&path).expect("meta").len();
        let read = read_rows(&path).expect("read");
        assert_eq!(read.rows.len(), 2);
        assert_eq!(read.rows[1].task_id.as_str(), "t2");
        assert_eq!(read.rows[1].cost_usd, Some(0.25));
        assert_eq!(read.rows[0].cost_usd, None);
        assert_eq!(read.torn_at, None);
        // A crash in the middle of a row leaves a line without its newline.
        let mut file = File::options().append(true).open(&path).expect("open");
        file.write_all(b"t3,1,m,default@abc,pass").expect("write");
        let read = read_rows(&path).expect("read");
        assert_eq!(read.rows.len(), 2);
        assert_eq!(read.torn_at, Some(whole));
        write_rows_atomically(&path, &read.rows[..1]).expect("rewrite");
        assert_eq!(read_rows(&path).expect("read").rows.len(), 1);
    }

    #[test]
    fn serde_words_match_as_str() {
        for reason in [
            ExitReason::Completed,
            ExitReason::MaxTurns,
            ExitReason::ContextOverflow,
            ExitReason::Interrupted,
        ] {
            let json = serde_json::to_string(&reason).expect("serialize");
            assert_eq!(json, format!("\"{}\"", reason.as_str()));
        }
    }

    #[test]
    fn one_line_flattens_whitespace() {
        assert_eq!(one_line("a\n  b\tc "), "a b c");
        assert_eq!(one_line(&"x".repeat(2000)).len(), 1003);
    }
}
