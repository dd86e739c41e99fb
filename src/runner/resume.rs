//! `--resume`: continuing a run folder after a crash, a Ctrl-C or a
//! `--retry-errors`.
//!
//! Owns the plan: which (task, epoch) pairs already have a row and are
//! skipped, which rows are dropped to be redone (`interrupted` always,
//! `error` with `--retry-errors`), the refusal when settings differ, and
//! setting aside the files of unfinished or redone pairs, so a pair's
//! folder only ever holds one attempt. results.csv is compacted here, once,
//! through a rename: whole before, whole after.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::config::RunConfig;
use crate::run_folder::ExitReason;
use crate::run_folder::{
    ResultRow, RunFolder, RunFolderError, Status, read_rows, write_rows_atomically,
};
use crate::task::TaskId;

/// What a resumed run does.
#[derive(Debug, Default)]
pub(crate) struct ResumePlan {
    /// Rows kept from before: their pairs are not run again.
    pub kept: Vec<ResultRow>,
    /// Rows dropped to be redone.
    pub dropped: usize,
    /// Folders of unfinished or redone pairs moved aside.
    pub set_aside: usize,
}

impl ResumePlan {
    pub(crate) fn is_done(&self, task: &TaskId, epoch: u32) -> bool {
        self.kept
            .iter()
            .any(|row| &row.task_id == task && row.epoch == epoch)
    }
}

/// Checks the earlier run's settings, reads its rows and prepares the
/// folder. `work` is every (task id, epoch) this run selects.
/// Whether the run in `folder` may be resumed with `config`: its run.json
/// can be read and its settings that decide outcomes are this run's. Reads
/// only, so it can come before anything else a run does.
pub(crate) fn check_settings(folder: &RunFolder, config: &RunConfig) -> Result<(), ResumeError> {
    check_fingerprint(folder, &config.fingerprint())
}

/// [`check_settings`] against a fingerprint (`run --dry-run`'s, made with
/// the sandbox it would use).
pub(crate) fn check_fingerprint(
    folder: &RunFolder,
    fingerprint: &serde_json::Value,
) -> Result<(), ResumeError> {
    let before = crate::config::manifest::RunManifest::read(folder)?;
    let differences = compare_fingerprints(&before.fingerprint, fingerprint);
    if !differences.is_empty() {
        return Err(ResumeError::Settings {
            folder: folder.root().to_owned(),
            differences,
        });
    }
    Ok(())
}

/// Why a run folder cannot be resumed: exit code 2.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ResumeError {
    /// Its run.json or results.csv cannot be read, or results.csv cannot
    /// be rewritten.
    #[error(transparent)]
    Folder(#[from] RunFolderError),
    #[error(
        "refusing to resume {}: its settings differ from this run's:\n{}\nhint: resume with the same settings, or start a new run folder",
        folder.display(),
        differences.join("\n")
    )]
    Settings {
        folder: PathBuf,
        /// `key: was A, now B`, one a setting ([`compare_fingerprints`]).
        differences: Vec<String>,
    },
    #[error(
        "{} holds two rows for {task} epoch {epoch}; it was not written by onebash alone",
        csv.display()
    )]
    TwoRows {
        csv: PathBuf,
        task: TaskId,
        epoch: u32,
    },
    /// An unfinished attempt's folder could not be moved aside.
    #[error("failed to set aside {} as {}: {source}", from.display(), to.display())]
    SetAside {
        from: PathBuf,
        to: PathBuf,
        source: std::io::Error,
    },
    /// The dropped row could not be written beside its attempt.
    #[error("failed to keep the old row in {}: {source}", folder.display())]
    OldRow {
        folder: PathBuf,
        source: std::io::Error,
    },
}

/// What a resume keeps and redoes; sets unfinished attempts aside. The
/// caller has passed [`check_settings`].
pub(crate) fn prepare(
    folder: &RunFolder,
    config: &RunConfig,
    work: &[(TaskId, u32)],
) -> Result<ResumePlan, ResumeError> {
    let csv = folder.results_csv();
    let (rows, torn_at, header_is_current) = if csv.exists() {
        let read = read_rows(&csv)?;
        (read.rows, read.torn_at, read.header_is_current)
    } else {
        (Vec::new(), None, true)
    };
    // Only pairs this run selects are redone: a row outside the selection
    // stays, whatever its status.
    let selected: HashSet<(&TaskId, u32)> =
        work.iter().map(|(task, epoch)| (task, *epoch)).collect();
    let redo = |row: &ResultRow| {
        selected.contains(&(&row.task_id, row.epoch))
            && (row.exit_reason == ExitReason::Interrupted
                || (config.retry_errors && row.status == Status::Error))
    };
    let mut plan = ResumePlan::default();
    let mut seen: HashSet<(TaskId, u32)> = HashSet::new();
    let mut dropped_rows = Vec::new();
    for row in rows {
        if !seen.insert((row.task_id.clone(), row.epoch)) {
            return Err(ResumeError::TwoRows {
                csv,
                task: row.task_id,
                epoch: row.epoch,
            });
        }
        if redo(&row) {
            dropped_rows.push(row);
        } else {
            plan.kept.push(row);
        }
    }
    plan.dropped = dropped_rows.len();

    for (task, epoch) in work {
        if plan.is_done(task, *epoch) {
            continue;
        }
        let dir = folder.task_dir(task, *epoch);
        if !dir.exists() {
            continue;
        }
        let old_row = dropped_rows
            .iter()
            .find(|row| &row.task_id == task && row.epoch == *epoch);
        set_aside(&dir, old_row)?;
        plan.set_aside += 1;
    }
    // Last, once every dropped row is safe beside its old files: a kill
    // before this line leaves the rows in place for the next resume. A
    // file written by an older onebash is rewritten with today's header
    // (its rows get the new columns empty), so the rows appended next
    // line up with it.
    if !dropped_rows.is_empty() || torn_at.is_some() || !header_is_current {
        write_rows_atomically(&csv, &plan.kept)?;
    }
    Ok(plan)
}

/// Moves `tasks/<id>/epoch-<k>` to `tasks/<id>/epoch-<k>.attempt-<n>` (the
/// first free n), with the old row beside it when there was one.
fn set_aside(dir: &Path, old_row: Option<&ResultRow>) -> Result<PathBuf, ResumeError> {
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("epoch")
        .to_owned();
    let target = (1..)
        .map(|n| dir.with_file_name(format!("{name}.attempt-{n}")))
        .find(|candidate| !candidate.exists())
        .unwrap_or_else(|| dir.with_file_name(format!("{name}.attempt")));
    std::fs::rename(dir, &target).map_err(|source| ResumeError::SetAside {
        from: dir.to_owned(),
        to: target.clone(),
        source,
    })?;
    if let Some(row) = old_row {
        let text = serde_json::to_string_pretty(row).unwrap_or_default();
        std::fs::write(target.join("row.json"), text).map_err(|source| ResumeError::OldRow {
            folder: target.clone(),
            source,
        })?;
    }
    Ok(target)
}

/// `key: was A, now B` for every setting that differs.
pub(crate) fn compare_fingerprints(before: &Value, now: &Value) -> Vec<String> {
    let (Some(before), Some(now)) = (before.as_object(), now.as_object()) else {
        return vec!["the earlier run.json has no settings fingerprint".to_owned()];
    };
    let mut keys: Vec<&String> = before.keys().chain(now.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|key| before.get(*key) != now.get(*key))
        .map(|key| {
            let show = |v: Option<&Value>| v.map_or("(absent)".to_owned(), Value::to_string);
            format!(
                "  {key}: was {}, now {}",
                show(before.get(key)),
                show(now.get(key))
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_differences_name_the_setting() {
        let before = serde_json::json!({"model": "a", "max_turns": 50, "prompt": "p@1"});
        let now = serde_json::json!({"model": "b", "max_turns": 50, "prompt": "p@1", "extra": 1});
        assert_eq!(
            compare_fingerprints(&before, &now),
            vec![
                "  extra: was (absent), now 1",
                "  model: was \"a\", now \"b\""
            ]
        );
        assert!(compare_fingerprints(&before, &before).is_empty());
        assert_eq!(compare_fingerprints(&Value::Null, &now).len(), 1);
    }

    #[test]
    fn set_aside_finds_a_free_name_and_keeps_the_row() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("epoch-1");
        std::fs::create_dir(&dir).expect("mkdir");
        std::fs::create_dir(root.path().join("epoch-1.attempt-1")).expect("mkdir");
        let target = set_aside(&dir, None).expect("set aside");
        assert_eq!(target, root.path().join("epoch-1.attempt-2"));
        assert!(!dir.exists());
    }
}
