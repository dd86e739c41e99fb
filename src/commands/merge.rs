//! `onebash merge OUT_DIR RUN_DIR...`: joins the run folders of shards
//! (`--shard K/N` on several machines) into one.
//!
//! Refuses runs whose settings differ (the same fingerprint `--resume`
//! checks), a (task, epoch) present in two runs, a torn results.csv and an
//! existing non-empty OUT_DIR. Copies every task folder and writes one
//! results.csv and one run.json. Synchronous: nothing here waits.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::config::manifest::RunManifest;
use crate::run_folder::{
    ResultRow, RunFolder, RunFolderError, Status, read_rows, write_predictions,
    write_rows_atomically,
};
use crate::runner::resume::compare_fingerprints;
use crate::task::TaskId;

/// Why the runs cannot be merged: bad input, exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error(
        "the merged run folder {} exists and is not empty\nhint: choose a new OUT_DIR",
        out.display()
    )]
    OutTaken { out: PathBuf },
    /// Two runs whose fingerprints differ: `differences` one line each.
    #[error(
        "refusing to merge {} with {}: their settings differ:\n{}",
        run.display(),
        first.display(),
        differences.join("\n")
    )]
    Settings {
        run: PathBuf,
        first: PathBuf,
        differences: Vec<String>,
    },
    #[error(
        "{} ends in a torn row (the run was killed)\nhint: finish it first with `onebash run ... -o {} --resume`",
        csv.display(),
        run.display()
    )]
    Torn { csv: PathBuf, run: PathBuf },
    #[error(
        "{task} epoch {epoch} is in both {} and {}: the shards overlap",
        first.display(),
        run.display()
    )]
    Overlap {
        task: TaskId,
        epoch: u32,
        first: PathBuf,
        run: PathBuf,
    },
    #[error("no run folder to merge")]
    NoRuns,
    /// A task folder's file that the copy would write over.
    #[error("{} would overwrite {}: the shards overlap", from.display(), to.display())]
    Overwrite { from: PathBuf, to: PathBuf },
    /// A file or folder of the task folders being copied.
    #[error("failed to {action} {}: {source}", path.display())]
    Copy {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// A run folder, or a file in one, that cannot be read or written.
    #[error(transparent)]
    Folder(#[from] RunFolderError),
}

pub(crate) fn merge(out: &Path, runs: &[PathBuf]) -> Result<usize, MergeError> {
    if out.exists() && std::fs::read_dir(out).map_or(true, |mut d| d.next().is_some()) {
        return Err(MergeError::OutTaken {
            out: out.to_owned(),
        });
    }
    let mut first: Option<(PathBuf, RunManifest)> = None;
    let mut rows: Vec<ResultRow> = Vec::new();
    let mut owner: HashMap<(TaskId, u32), &Path> = HashMap::new();
    let mut shards = ShardSettings::default();
    for run in runs {
        let folder = RunFolder::open(run)?;
        let manifest = crate::config::manifest::RunManifest::read(&folder)?;
        shards.add(&manifest);
        match &first {
            None => first = Some((run.clone(), manifest)),
            Some((first_run, first_manifest)) => {
                let differences =
                    compare_fingerprints(&first_manifest.fingerprint, &manifest.fingerprint);
                if !differences.is_empty() {
                    return Err(MergeError::Settings {
                        run: run.clone(),
                        first: first_run.clone(),
                        differences,
                    });
                }
            }
        }
        let read = read_rows(&folder.results_csv())?;
        if read.torn_at.is_some() {
            return Err(MergeError::Torn {
                csv: folder.results_csv(),
                run: run.clone(),
            });
        }
        for row in read.rows {
            let key = (row.task_id.clone(), row.epoch);
            if let Some(other) = owner.insert(key, run) {
                return Err(MergeError::Overlap {
                    task: row.task_id.clone(),
                    epoch: row.epoch,
                    first: other.to_owned(),
                    run: run.clone(),
                });
            }
            rows.push(row);
        }
    }
    let Some((_, first)) = first else {
        return Err(MergeError::NoRuns);
    };

    // The settings are the first shard's, less what was its own.
    let mut settings = first.settings;
    settings.shard = None;
    settings.out_dir = out.to_owned();
    shards.apply(&mut settings.other);
    let folder = RunFolder::create(out)?;
    for run in runs {
        let tasks = RunFolder::at(run).tasks_dir();
        if tasks.is_dir() {
            copy_tree(&tasks, &folder.tasks_dir())?;
        }
    }
    write_rows_atomically(&folder.results_csv(), &rows)?;
    write_predictions(&folder, &rows)?;
    let count = |status: Status| rows.iter().filter(|r| r.status == status).count();
    let manifest = RunManifest {
        onebash_version: env!("CARGO_PKG_VERSION").to_owned(),
        started_at: None,
        resumed_at: Vec::new(),
        merged_at: Some(
            humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        ),
        merged_from: runs.iter().map(|r| r.display().to_string()).collect(),
        settings,
        fingerprint: first.fingerprint,
        finished_at: None,
        interrupted: None,
        stopped: None,
        summary: Some(json!({
            "rows": rows.len(),
            "passed": count(Status::Passed),
            "failed": count(Status::Failed),
            "error": count(Status::Error),
        })),
        peak_rss_bytes: None,
    };
    manifest.write(&folder)?;
    Ok(rows.len())
}

/// The settings that are each shard's own part of the whole, added up:
/// the tasks it ran, and (a predictions run) its tasks without a
/// prediction. The predictions that name no task are the same in every
/// shard (they are found among all the task file's tasks).
#[derive(Default)]
struct ShardSettings {
    task_count: Option<u64>,
    missing: Vec<Value>,
}

impl ShardSettings {
    fn add(&mut self, manifest: &RunManifest) {
        let other = &manifest.settings.other;
        if let Some(count) = other.get("task_count").and_then(Value::as_u64) {
            *self.task_count.get_or_insert(0) += count;
        }
        let missing = other
            .get("predictions")
            .and_then(|p| p.get("missing"))
            .and_then(Value::as_array);
        for id in missing.into_iter().flatten() {
            if !self.missing.contains(id) {
                self.missing.push(id.clone());
            }
        }
    }

    fn apply(self, settings: &mut Map<String, Value>) {
        if let Some(count) = self.task_count {
            settings.insert("task_count".to_owned(), json!(count));
        }
        if let Some(predictions) = settings
            .get_mut("predictions")
            .and_then(Value::as_object_mut)
        {
            predictions.insert("missing".to_owned(), Value::Array(self.missing));
        }
    }
}

/// `Copy` of `path`, for `map_err`.
fn copy_error(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> MergeError {
    let path = path.to_owned();
    move |source| MergeError::Copy {
        action,
        path,
        source,
    }
}

/// Copies a folder tree; refuses to overwrite a file (the shards' task
/// folders never overlap once their rows do not).
fn copy_tree(from: &Path, to: &Path) -> Result<(), MergeError> {
    std::fs::create_dir_all(to).map_err(copy_error("write", to))?;
    let entries = std::fs::read_dir(from).map_err(copy_error("read", from))?;
    for entry in entries {
        let entry = entry.map_err(copy_error("read", from))?;
        let source = entry.path();
        let target = to.join(entry.file_name());
        if source.is_dir() {
            copy_tree(&source, &target)?;
        } else if target.exists() {
            return Err(MergeError::Overwrite {
                from: source,
                to: target,
            });
        } else {
            std::fs::copy(&source, &target).map_err(copy_error("write", &target))?;
        }
    }
    Ok(())
}
