//! Which tasks a run runs: the task file, Harbor folder or dataset read
//! (`source.rs`), then `--shard` (`shard.rs`), `--filter` and `--limit`, and with `--model predictions:FILE` the tasks that have a
//! prediction, with the warnings of what did not meet; and the oracle's
//! check that every selected task has a solution.

use std::path::Path;

use regex::Regex;

use crate::config::error::ConfigError;
use crate::config::options::RunOptions;
use crate::config::source::{DatasetContext, Loaded};
use crate::sys::words::{count, plural};
use crate::task::predictions::{PredictionFile, PredictionsRecord};
use crate::task::{LoadOptions, TaskSpec};

/// The tasks of the task file, Harbor folder or dataset that `--shard`,
/// `--filter` and `--limit` select, in order, with what identifies them;
/// with predictions, only those that have one, and how the predictions
/// met the tasks.
pub(crate) fn select_tasks(
    args: &RunOptions,
    context: &DatasetContext,
    predictions: Option<&PredictionFile>,
) -> Result<(Loaded, Option<PredictionsRecord>), ConfigError> {
    let options = LoadOptions {
        repo_base: args.repo_base.clone(),
        test_command: args.test_command.clone(),
        image: args.image.clone(),
    };
    let mut loaded = crate::config::source::load(&args.tasks, &options, context)?;
    let all_tasks = std::mem::take(&mut loaded.tasks);
    let all_ids: Vec<String> = match predictions {
        Some(_) => all_tasks.iter().map(|t| t.id.as_str().to_owned()).collect(),
        None => Vec::new(),
    };
    let shard = args.shard;
    let filter = args
        .filter
        .as_deref()
        .map(|raw| {
            Regex::new(raw).map_err(|err| {
                ConfigError::Usage(format!(
                    "--filter {raw:?} is not a valid regular expression: {err}"
                ))
            })
        })
        .transpose()?;
    let mut tasks: Vec<TaskSpec> = all_tasks
        .into_iter()
        .enumerate()
        .filter(|(i, _)| shard.is_none_or(|s| s.contains(*i)))
        .map(|(_, task)| task)
        .filter(|task| {
            filter
                .as_ref()
                .is_none_or(|re| re.is_match(task.id.as_str()))
        })
        .collect();
    if let Some(limit) = args.limit {
        tasks.truncate(limit);
    }
    if tasks.is_empty() {
        return Err(ConfigError::Usage(
            "no task is selected; hint: check --filter, --shard and --limit".to_owned(),
        ));
    }
    let Some(file) = predictions else {
        loaded.tasks = tasks;
        return Ok((loaded, None));
    };
    let selected = tasks.len();
    let (tasks, record) = file.match_tasks(all_ids.iter().map(String::as_str), tasks);
    if tasks.is_empty() {
        return Err(ConfigError::Usage(format!(
            "none of the {} has a prediction in {}\nhint: its `instance_id`s must be the tasks' ids; check the file, --filter, --shard and --limit",
            count(selected, "selected task", "selected tasks"),
            file.path.display()
        )));
    }
    loaded.tasks = tasks;
    Ok((loaded, Some(record)))
}

/// How many ids a warning lists before it only counts the rest.
const LISTED_IDS: usize = 5;

/// The warnings of a predictions run: the selected tasks that have no
/// prediction (not run), and every prediction that names no task, one
/// line each, or a count and the first few.
pub(crate) fn prediction_warnings(
    record: &PredictionsRecord,
    tasks: &Path,
    warnings: &mut Vec<String>,
) {
    let file = record.path.display();
    if !record.missing.is_empty() {
        warnings.push(format!(
            "{} {} no prediction in {file} and {} not run: {}",
            count(record.missing.len(), "selected task", "selected tasks"),
            plural(record.missing.len(), "has", "have"),
            plural(record.missing.len(), "is", "are"),
            listed(&record.missing)
        ));
    }
    if record.unknown.len() <= LISTED_IDS {
        for id in &record.unknown {
            warnings.push(format!(
                "{file}: the prediction for {id:?} names no task of {}; it is not run",
                tasks.display()
            ));
        }
    } else {
        warnings.push(format!(
            "{file}: {} predictions name no task of {} and are not run: {}",
            record.unknown.len(),
            tasks.display(),
            listed(&record.unknown)
        ));
    }
}

/// The instances with more than one prediction, on one line: as
/// run_evaluation does, the last one is graded.
pub(crate) fn duplicate_warning(file: &PredictionFile, warnings: &mut Vec<String>) {
    if !file.duplicated.is_empty() {
        warnings.push(format!(
            "{}: {} more than one prediction; the last one of each is graded: {}",
            file.path.display(),
            count(file.duplicated.len(), "instance has", "instances have"),
            listed(&file.duplicated)
        ));
    }
}

/// `a, b, c` or `a, b, c, d, e and 7 more`.
fn listed(ids: &[String]) -> String {
    let shown = ids
        .iter()
        .take(LISTED_IDS)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    match ids.len().saturating_sub(LISTED_IDS) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// `--model oracle` (or `gold`, `name`) needs every task's solution.
pub(crate) fn check_gold_patches(tasks: &[TaskSpec], name: &str) -> Result<(), ConfigError> {
    let missing: Vec<&str> = tasks
        .iter()
        // A task that cannot run at all is a setup error of its own, and
        // is not asked for a solution it will never run.
        .filter(|t| {
            t.benchmark.cannot_run().is_none()
                && matches!(
                    t.benchmark.oracle(t.gold_patch.as_deref()),
                    crate::task::Oracle::Missing(_)
                )
        })
        .map(|t| t.id.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(ConfigError::Usage(format!(
            "--model {name} needs {} in every task; these have none: {}",
            crate::task::oracle_needs(),
            missing.join(", ")
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::options::TASK_LINE;
    use crate::config::{RunConfig, RunOptions, Secrets};
    use crate::sys::sandbox::SandboxMode;

    /// A predictions file that names none of the one selected task: the
    /// error counts it as one (it said "none of the 1 selected tasks").
    #[test]
    fn no_prediction_for_the_one_selected_task_is_counted_as_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tasks = dir.path().join("tasks.jsonl");
        std::fs::write(&tasks, format!("{TASK_LINE}\n")).expect("write");
        let predictions = dir.path().join("preds.jsonl");
        std::fs::write(
            &predictions,
            r#"{"instance_id": "other", "model_name_or_path": "m", "model_patch": ""}"#,
        )
        .expect("write");
        let model = format!("predictions:{}", predictions.display());
        let args = RunOptions {
            sandbox: SandboxMode::None,
            out: Some(dir.path().join("out")),
            ..RunOptions::defaults(&tasks, &model)
        };
        let text = RunConfig::from_options(&args, &Secrets::default())
            .expect_err("no prediction")
            .to_string();
        assert!(
            text.starts_with("none of the 1 selected task has a prediction in"),
            "{text}"
        );
    }
}
