//! `onebash report RUN --format swebench`: the run summary SWE-bench's
//! harness writes, of one epoch. This file reads the run folder's files
//! the summary needs (each row's patch.diff, report.json, test log and
//! trajectory, run.json's predictions and rules); the summary itself is
//! `grade::run_report`'s.

use crate::config::manifest::RunManifest;
use crate::grade::run_report::{self, ReportFile, Row, RunFiles, RunReport};
use crate::run_folder::trajectory::{Event, read_trajectory};
use crate::run_folder::{ExitReason, ResultRow, RunFolder};
use crate::task::TaskId;

/// The summary of `epoch`'s rows.
pub(crate) fn build(
    folder: &RunFolder,
    rows: &[ResultRow],
    manifest: Option<&RunManifest>,
    epoch: u32,
) -> RunReport {
    let rows: Vec<Row<'_>> = rows
        .iter()
        .filter(|row| row.epoch == epoch)
        .map(|row| Row {
            id: row.task_id.as_str(),
            empty_patch: row.exit_reason == ExitReason::EmptyPatch,
        })
        .collect();
    let predictions = manifest.and_then(|m| m.settings.other.get("predictions"));
    let grading = manifest.and_then(RunManifest::grading);
    run_report::build(&rows, predictions, grading, &EpochFiles { folder, epoch })
}

/// The files of one epoch of a run folder.
struct EpochFiles<'a> {
    folder: &'a RunFolder,
    epoch: u32,
}

impl EpochFiles<'_> {
    fn id(id: &str) -> Option<TaskId> {
        TaskId::parse(id).ok()
    }
}

impl RunFiles for EpochFiles<'_> {
    fn patch_empty(&self, id: &str) -> bool {
        Self::id(id).is_none_or(|task| {
            std::fs::metadata(self.folder.patch_diff(&task, self.epoch))
                .map_or(true, |m| m.len() == 0)
        })
    }

    fn report_json(&self, id: &str) -> ReportFile {
        let Some(task) = Self::id(id) else {
            return ReportFile::Absent;
        };
        let path = self.folder.report_json(&task, self.epoch);
        if !path.exists() {
            return ReportFile::Absent;
        }
        match std::fs::read_to_string(&path) {
            Ok(text) => ReportFile::Text(text),
            Err(_) => ReportFile::Unreadable,
        }
    }

    /// The test log, and the line run_evaluation appends when the tests
    /// timed out, with the timeout in whole seconds as its `--timeout` is
    /// (from the trajectory).
    fn test_output(&self, id: &str) -> String {
        let Some(task) = Self::id(id) else {
            return String::new();
        };
        let (folder, epoch) = (self.folder, self.epoch);
        let mut text = std::fs::read_to_string(folder.test_log(&task, epoch)).unwrap_or_default();
        let events = read_trajectory(&folder.trajectory(&task, epoch)).unwrap_or_default();
        let timeout = events.iter().find_map(|event| match event {
            Event::Header { settings, .. } => settings.get("test_timeout_s")?.as_f64(),
            _ => None,
        });
        let timed_out = events
            .iter()
            .any(|event| matches!(event, Event::Test { record, .. } if record.timed_out));
        if timed_out {
            let seconds = timeout.unwrap_or_default().round();
            text.push_str(&format!("\n\nTimeout error: {seconds} seconds exceeded."));
        }
        text
    }
}
