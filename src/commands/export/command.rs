//! `onebash export RUN... [--format openai-chat|sharegpt|atif] [-o FILE]`:
//! the conversations of one or more runs as training data, one JSONL line
//! per (task, epoch). It selects rows (`--passed`, `--exit-reason`,
//! `--task`, `--epoch`), reads each row's trajectory into a neutral
//! conversation (`export/conversation.rs`), redacts secret-looking strings
//! (`export/redact.rs`), drops conversations identical to one already
//! written, and hands the rest to the chosen format (`export/openai_chat.rs`,
//! `sharegpt.rs`, `atif.rs`). Plain synchronous code over run folders.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::cli::{ExportArgs, ExportFormat};
use crate::run_folder::ExitReason;
use crate::run_folder::trajectory::read_trajectory;
use crate::run_folder::{ResultRow, RunFolder, Status, read_rows};
use crate::sys::words::count;

use conversation::{Conversation, Example, Meta};

use super::{atif, conversation, openai_chat, redact, sharegpt};

/// Why an export could not be made at all (exit 2): nothing was written
/// that a reader could mistake for a whole export.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// A run folder or its results.csv cannot be read.
    #[error(transparent)]
    Run(#[from] crate::run_folder::RunFolderError),
    /// A `--task` that no run given has a row of: a typo, most likely.
    #[error(
        "failed to select task {0}: no run given has a row of it\nhint: the task ids are the first column of each run's results.csv"
    )]
    UnknownTask(String),
    #[error("failed to write {what}: {source}")]
    Write {
        what: String,
        source: std::io::Error,
    },
    /// A selected row whose trajectory cannot be read: counted as
    /// unreadable, the export goes on.
    #[error("failed to export task {task} epoch {epoch} of {}: {source}", run.display())]
    Trajectory {
        task: String,
        epoch: u32,
        run: PathBuf,
        source: crate::run_folder::trajectory::ReadError,
    },
}

/// Which rows to export.
#[derive(Debug, Default)]
pub(crate) struct Selection {
    pub passed_only: bool,
    /// Empty: every exit reason.
    pub exit_reasons: Vec<ExitReason>,
    /// Empty: every task.
    pub tasks: Vec<String>,
    pub epoch: Option<u32>,
}

impl Selection {
    fn takes(&self, row: &ResultRow) -> bool {
        (!self.passed_only || row.status == Status::Passed)
            && (self.exit_reasons.is_empty() || self.exit_reasons.contains(&row.exit_reason))
            && (self.tasks.is_empty() || self.tasks.iter().any(|t| t == row.task_id.as_str()))
            && self.epoch.is_none_or(|epoch| row.epoch == epoch)
    }
}

/// What an export did, for the summary on stderr.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Summary {
    /// Rows the selection took.
    pub selected: usize,
    pub written: usize,
    /// Conversations identical to one written before (see
    /// [`Conversation::identity`]).
    pub duplicates: usize,
    /// Rows without a conversation: oracle and noop runs, a first model
    /// call that failed.
    pub without_conversation: usize,
    /// Secret-looking strings replaced by `[REDACTED]`.
    pub redacted: usize,
    /// Rows whose trajectory could not be read: one message each.
    pub failed: Vec<String>,
}

/// `onebash export` as main calls it: to `-o FILE` or stdout.
pub(crate) fn run(args: &ExportArgs) -> Result<Summary, ExportError> {
    let selection = Selection {
        passed_only: args.passed,
        exit_reasons: args.exit_reason.clone(),
        tasks: args.task.clone(),
        epoch: args.epoch,
    };
    let runs = open_runs(&args.runs)?;
    if let Some(unknown) = selection.tasks.iter().find(|task| {
        !runs
            .iter()
            .any(|(_, _, rows)| rows.iter().any(|row| row.task_id.as_str() == task.as_str()))
    }) {
        return Err(ExportError::UnknownTask(unknown.clone()));
    }
    match &args.output {
        Some(path) => {
            let written = |source| ExportError::Write {
                what: path.display().to_string(),
                source,
            };
            // A temporary file renamed into place: FILE is whole or absent.
            let tmp = path.with_extension("jsonl.tmp");
            let file = std::fs::File::create(&tmp).map_err(written)?;
            let mut out = std::io::BufWriter::new(file);
            let done = export(&runs, args.format, &selection, &mut out).and_then(|summary| {
                out.flush().map_err(written)?;
                std::fs::rename(&tmp, path).map_err(written)?;
                Ok(summary)
            });
            if done.is_err() {
                // Nothing half-written stays behind.
                let _ = std::fs::remove_file(&tmp);
            }
            done
        }
        None => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let summary = export(&runs, args.format, &selection, &mut out)?;
            match out.flush() {
                // The reader has all it wanted (`| head`): not a failure.
                Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(summary),
                Err(source) => Err(ExportError::Write {
                    what: "stdout".to_owned(),
                    source,
                }),
                Ok(()) => Ok(summary),
            }
        }
    }
}

/// Every run folder and its rows, read before anything is written: a bad
/// folder name stops the export before it starts.
fn open_runs(paths: &[PathBuf]) -> Result<Vec<(PathBuf, RunFolder, Vec<ResultRow>)>, ExportError> {
    paths
        .iter()
        .map(|path| {
            let folder = RunFolder::open(path)?;
            let mut rows = read_rows(&folder.results_csv())?.rows;
            rows.sort_by(|a, b| (&a.task_id, a.epoch).cmp(&(&b.task_id, b.epoch)));
            Ok((path.clone(), folder, rows))
        })
        .collect()
}

/// Writes the selected rows of `runs`, in the order given (rows by task
/// and epoch), as JSONL lines of `format`.
pub(crate) fn export(
    runs: &[(PathBuf, RunFolder, Vec<ResultRow>)],
    format: ExportFormat,
    selection: &Selection,
    out: &mut dyn Write,
) -> Result<Summary, ExportError> {
    let mut summary = Summary::default();
    let mut seen: HashSet<[u8; 32]> = HashSet::new();
    for (path, folder, rows) in runs {
        for row in rows.iter().filter(|row| selection.takes(row)) {
            summary.selected += 1;
            let example = match example_of(path, folder, row) {
                Ok(Some(example)) => example,
                Ok(None) => {
                    summary.without_conversation += 1;
                    continue;
                }
                Err(err) => {
                    summary.failed.push(err.to_string());
                    continue;
                }
            };
            let mut example = example;
            for text in example.conversation.texts_mut() {
                summary.redacted += redact::redact(text);
            }
            if !seen.insert(example.conversation.identity()) {
                summary.duplicates += 1;
                continue;
            }
            let line = match format {
                ExportFormat::OpenaiChat => openai_chat::line(&example),
                ExportFormat::Sharegpt => sharegpt::line(&example),
                ExportFormat::Atif => atif::line(&example),
            };
            match writeln!(out, "{line}") {
                // The reader closed the pipe (`| head`): it has what it
                // wanted, as `yes | head` has; stop without an error.
                Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => return Ok(summary),
                Err(source) => {
                    return Err(ExportError::Write {
                        what: "the export".to_owned(),
                        source,
                    });
                }
                Ok(()) => summary.written += 1,
            }
        }
    }
    Ok(summary)
}

/// The row's conversation; `None` when it has none to give; an error
/// when its trajectory cannot be read.
fn example_of(
    path: &Path,
    folder: &RunFolder,
    row: &ResultRow,
) -> Result<Option<Example>, ExportError> {
    let file = folder.trajectory(&row.task_id, row.epoch);
    let events = read_trajectory(&file).map_err(|source| ExportError::Trajectory {
        task: row.task_id.as_str().to_owned(),
        epoch: row.epoch,
        run: path.to_owned(),
        source,
    })?;
    let Ok(conversation) = Conversation::from_events(&events) else {
        return Ok(None);
    };
    let Some(meta) = Meta::of_header(&events) else {
        return Ok(None);
    };
    Ok(Some(Example {
        meta: Meta {
            run: path.display().to_string(),
            task_id: row.task_id.as_str().to_owned(),
            epoch: row.epoch,
            status: row.status.as_str().to_owned(),
            passed: row.passed,
            exit_reason: row.exit_reason.as_str().to_owned(),
            ..meta
        },
        conversation,
    }))
}

impl Summary {
    /// The line main prints on stderr after the export.
    pub(crate) fn line(&self) -> String {
        let mut parts = vec![format!(
            "exported {} of {}",
            count(self.written, "conversation", "conversations"),
            count(self.selected, "selected row", "selected rows"),
        )];
        for (n, one, many) in [
            (self.duplicates, "duplicate dropped", "duplicates dropped"),
            (
                self.without_conversation,
                "without a model conversation",
                "without a model conversation",
            ),
            (self.failed.len(), "unreadable", "unreadable"),
            (
                self.redacted,
                "secret-looking string redacted",
                "secret-looking strings redacted",
            ),
        ] {
            if n > 0 {
                parts.push(count(n, one, many));
            }
        }
        parts.join(", ")
    }
}
