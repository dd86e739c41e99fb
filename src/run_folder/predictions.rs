//! SWE-bench predictions of a run, one file per epoch.

use super::error::RunFolderError;
use super::paths::RunFolder;
use super::row::ResultRow;

/// Writes the predictions of a run in SWE-bench's format, one JSON line per
/// task: `instance_id`, `model_name_or_path`, `model_patch` (the agent's
/// diff against base_commit). Epoch 1 goes to `predictions.jsonl`, epoch k
/// to `predictions.epoch-<k>.jsonl`, so each file has one line per task as
/// the official evaluation expects. Rewritten whole from the rows.
pub(crate) fn write_predictions(
    folder: &RunFolder,
    rows: &[ResultRow],
) -> Result<(), RunFolderError> {
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
        std::fs::write(&tmp, text).map_err(RunFolderError::write(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(RunFolderError::write(&path))?;
    }
    Ok(())
}
