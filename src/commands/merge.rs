//! `onebash merge OUT_DIR RUN_DIR...`: joins the run folders of shards
//! (`--shard K/N` on several machines) into one.
//!
//! Refuses runs whose settings differ (the same fingerprint `--resume`
//! checks), a (task, epoch) present in two runs, a torn results.csv and an
//! existing non-empty OUT_DIR. Copies every task folder and writes one
//! results.csv and one run.json. Synchronous: nothing here waits.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::results::{
    ResultRow, RunFolder, Status, read_rows, write_predictions, write_rows_atomically,
};
use crate::resume::compare_fingerprints;
use crate::task::TaskId;

/// Why the runs cannot be merged: bad input, exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct MergeError(String);

pub fn merge(out: &Path, runs: &[PathBuf]) -> Result<usize, MergeError> {
    if out.exists() && std::fs::read_dir(out).map_or(true, |mut d| d.next().is_some()) {
        return Err(MergeError(format!(
            "the merged run folder {} exists and is not empty\nhint: choose a new OUT_DIR",
            out.display()
        )));
    }
    let mut first: Option<(PathBuf, Value, Value)> = None;
    let mut rows: Vec<ResultRow> = Vec::new();
    let mut owner: HashMap<(TaskId, u32), &Path> = HashMap::new();
    for run in runs {
        let run_json = read_json(&run.join("run.json"))?;
        let fingerprint = run_json["fingerprint"].clone();
        match &first {
            None => first = Some((run.clone(), fingerprint, run_json["settings"].clone())),
            Some((first_run, first_fingerprint, _)) => {
                let differences = compare_fingerprints(first_fingerprint, &fingerprint);
                if !differences.is_empty() {
                    return Err(MergeError(format!(
                        "refusing to merge {} with {}: their settings differ:\n{}",
                        run.display(),
                        first_run.display(),
                        differences.join("\n")
                    )));
                }
            }
        }
        let read = read_rows(&run.join("results.csv")).map_err(MergeError)?;
        if read.torn_at.is_some() {
            return Err(MergeError(format!(
                "{} ends in a torn row (the run was killed)\nhint: finish it first with `onebash run ... -o {} --resume`",
                run.join("results.csv").display(),
                run.display()
            )));
        }
        for row in read.rows {
            let key = (row.task_id.clone(), row.epoch);
            if let Some(other) = owner.insert(key, run) {
                return Err(MergeError(format!(
                    "{} epoch {} is in both {} and {}: the shards overlap",
                    row.task_id,
                    row.epoch,
                    other.display(),
                    run.display()
                )));
            }
            rows.push(row);
        }
    }
    let Some((_, fingerprint, mut settings)) = first else {
        return Err(MergeError("no run folder to merge".to_owned()));
    };

    // The settings are the first shard's, less what was its own.
    if let Some(map) = settings.as_object_mut() {
        map.insert("shard".to_owned(), Value::Null);
        map.insert("out_dir".to_owned(), json!(out.display().to_string()));
    }
    let folder = RunFolder::create(out).map_err(|err| io_error(out, err))?;
    for run in runs {
        let tasks = run.join("tasks");
        if tasks.is_dir() {
            copy_tree(&tasks, &out.join("tasks"))?;
        }
    }
    write_rows_atomically(&folder.results_csv(), &rows)
        .map_err(|err| io_error(&folder.results_csv(), err))?;
    write_predictions(&folder, &rows)
        .map_err(|err| io_error(&folder.root().join("predictions.jsonl"), err))?;
    let count = |status: Status| rows.iter().filter(|r| r.status == status).count();
    let run_json = json!({
        "onebash_version": env!("CARGO_PKG_VERSION"),
        "merged_at": humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        "merged_from": runs.iter().map(|r| r.display().to_string()).collect::<Vec<_>>(),
        "settings": settings,
        "fingerprint": fingerprint,
        "summary": {
            "rows": rows.len(),
            "passed": count(Status::Passed),
            "failed": count(Status::Failed),
            "error": count(Status::Error),
        },
    });
    folder
        .write_run_json(&run_json)
        .map_err(|err| io_error(&folder.run_json(), err))?;
    Ok(rows.len())
}

fn read_json(path: &Path) -> Result<Value, MergeError> {
    let text = std::fs::read_to_string(path).map_err(|err| {
        MergeError(format!(
            "failed to read {}: {err}\nhint: is it a onebash run folder?",
            path.display()
        ))
    })?;
    serde_json::from_str(&text)
        .map_err(|err| MergeError(format!("failed to read {}: {err}", path.display())))
}

fn io_error(path: &Path, err: std::io::Error) -> MergeError {
    MergeError(format!("failed to write {}: {err}", path.display()))
}

/// Copies a folder tree; refuses to overwrite a file (the shards' task
/// folders never overlap once their rows do not).
fn copy_tree(from: &Path, to: &Path) -> Result<(), MergeError> {
    std::fs::create_dir_all(to).map_err(|err| io_error(to, err))?;
    let entries = std::fs::read_dir(from)
        .map_err(|err| MergeError(format!("failed to read {}: {err}", from.display())))?;
    for entry in entries {
        let entry =
            entry.map_err(|err| MergeError(format!("failed to read {}: {err}", from.display())))?;
        let source = entry.path();
        let target = to.join(entry.file_name());
        if source.is_dir() {
            copy_tree(&source, &target)?;
        } else if target.exists() {
            return Err(MergeError(format!(
                "{} would overwrite {}: the shards overlap",
                source.display(),
                target.display()
            )));
        } else {
            std::fs::copy(&source, &target).map_err(|err| io_error(&target, err))?;
        }
    }
    Ok(())
}
