//! The run summary SWE-bench's
//! `run_evaluation` writes at its end (`make_run_report`,
//! swebench/harness/reporting.py, `schema_version` 2), of one epoch, from
//! the rows and each (task, epoch)'s report.json.
//!
//! The package's reading, over onebash's files: the instances are the
//! run's tasks (those of the epoch's rows) and the tasks a predictions run
//! had no prediction for (run.json `settings.predictions.missing`:
//! `incomplete`); a row whose patch is empty (exit reason `empty_patch`, or
//! an empty or absent patch.diff) is an empty patch whatever else it has;
//! a row with a report.json is `completed`, resolved or not as the file
//! says (an empty one, one that is not JSON or lacks the instance's
//! `resolved`: completed and an error too, as the package counts it); any
//! other row is an error. The keys are those of the package version whose
//! rules graded the run, as its local run_evaluation (which passes a
//! Docker client) writes them: 5.0 adds the infrastructure and ambiguous
//! failure counts and `failure_reasons` (its `classify_logs` over the test
//! log: grade/swebench/infra.rs) and the container and image lists, empty
//! (onebash leaves no container behind); 4.1 writes those lists only
//! without a client (a slip of its `if not client:`), so not here.
//! It does not know how a row was graded (runner/) nor how the report.json
//! files are shaped beyond `resolved` (report.rs).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::{Rules, classify, to_package_json};

/// Why `--format swebench` is refused by a command other than `report`.
pub(crate) const ONLY_FOR_REPORT: &str =
    "--format swebench is report's only: it is SWE-bench's summary of one run";

/// `make_run_report`'s JSON, keys in the package's order; the fields one
/// version does not write are `None` and left out.
#[derive(Debug, Serialize)]
pub(crate) struct RunReport {
    pub total_instances: usize,
    pub submitted_instances: usize,
    pub completed_instances: usize,
    pub resolved_instances: usize,
    pub unresolved_instances: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub infra_failure_instances: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ambiguous_failure_instances: Option<usize>,
    pub empty_patch_instances: usize,
    pub error_instances: usize,
    pub completed_ids: BTreeSet<String>,
    pub incomplete_ids: BTreeSet<String>,
    pub empty_patch_ids: BTreeSet<String>,
    pub submitted_ids: BTreeSet<String>,
    pub resolved_ids: BTreeSet<String>,
    pub unresolved_ids: BTreeSet<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub infra_failure_ids: Option<BTreeSet<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ambiguous_failure_ids: Option<BTreeSet<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_reasons: Option<BTreeMap<String, String>>,
    pub error_ids: BTreeSet<String>,
    pub schema_version: u32,
    /// 5.0 writes these three with a Docker client (run_evaluation's
    /// local run has one); 4.1 only without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unstopped_instances: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unstopped_containers: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unremoved_images: Option<Vec<String>>,
}

impl RunReport {
    /// The file's text as the package writes it (`json.dumps(report,
    /// indent=4)` and a newline).
    pub(crate) fn to_json(&self) -> String {
        to_package_json(self) + "\n"
    }
}

/// What one instance came to, in `make_run_report`'s order of questions.
enum Outcome {
    EmptyPatch,
    Resolved,
    Unresolved,
    Error,
    /// A report.json that is empty, not JSON or has no `resolved`: the
    /// package counts it completed, then an error.
    BrokenReport,
}

/// One row of the epoch summarised: its task id, and whether the row
/// says its patch was empty (exit reason `empty_patch`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Row<'a> {
    pub id: &'a str,
    pub empty_patch: bool,
}

/// A task's report.json, as the run folder holds it.
#[derive(Debug)]
pub(crate) enum ReportFile {
    Absent,
    Unreadable,
    Text(String),
}

/// What the summary reads of a run folder, by task id (of the epoch
/// summarised).
pub(crate) trait RunFiles {
    /// Whether the task's patch.diff is empty or absent.
    fn patch_empty(&self, id: &str) -> bool;
    /// The task's report.json.
    fn report_json(&self, id: &str) -> ReportFile;
    /// The test output as run_evaluation's test_output.txt would hold it:
    /// the test log, and the line it appends when the tests timed out.
    fn test_output(&self, id: &str) -> String;
}

/// The summary of one epoch's rows. `predictions` is run.json's
/// `settings.predictions` (a predictions run), `grading` the rules the run
/// was graded by, when run.json says.
pub(crate) fn build(
    rows: &[Row<'_>],
    predictions: Option<&serde_json::Value>,
    grading: Option<Rules>,
    files: &dyn RunFiles,
) -> RunReport {
    let missing: BTreeSet<String> = id_list(predictions, "missing");
    let mut seen_5_0 = false;
    let mut outcomes = BTreeMap::new();
    for row in rows {
        let (outcome, is_5_0) = outcome(files, row, predictions.is_some());
        seen_5_0 |= is_5_0;
        outcomes.insert(row.id.to_owned(), outcome);
    }
    let rules = grading.unwrap_or(Rules::by_format(seen_5_0));

    let ids_where = |wanted: fn(&Outcome) -> bool| -> BTreeSet<String> {
        outcomes
            .iter()
            .filter(|(_, outcome)| wanted(outcome))
            .map(|(id, _)| id.clone())
            .collect()
    };
    let empty_patch_ids = ids_where(|o| matches!(o, Outcome::EmptyPatch));
    let resolved_ids = ids_where(|o| matches!(o, Outcome::Resolved));
    let unresolved_ids = ids_where(|o| matches!(o, Outcome::Unresolved));
    let error_ids = ids_where(|o| matches!(o, Outcome::Error | Outcome::BrokenReport));
    let completed_ids = ids_where(|o| {
        matches!(
            o,
            Outcome::Resolved | Outcome::Unresolved | Outcome::BrokenReport
        )
    });
    let submitted_ids: BTreeSet<String> = outcomes.keys().cloned().collect();
    let incomplete_ids: BTreeSet<String> = missing.difference(&submitted_ids).cloned().collect();
    let mut report = RunReport {
        total_instances: submitted_ids.len() + incomplete_ids.len(),
        submitted_instances: submitted_ids.len(),
        completed_instances: completed_ids.len(),
        resolved_instances: resolved_ids.len(),
        unresolved_instances: unresolved_ids.len(),
        infra_failure_instances: None,
        ambiguous_failure_instances: None,
        empty_patch_instances: empty_patch_ids.len(),
        error_instances: error_ids.len(),
        completed_ids,
        incomplete_ids,
        empty_patch_ids,
        submitted_ids,
        resolved_ids,
        unresolved_ids,
        infra_failure_ids: None,
        ambiguous_failure_ids: None,
        failure_reasons: None,
        error_ids,
        schema_version: 2,
        unstopped_instances: None,
        unstopped_containers: None,
        unremoved_images: None,
    };
    match rules {
        Rules::Swebench41 => {}
        Rules::Swebench50 => {
            report.unstopped_instances = Some(0);
            report.unstopped_containers = Some(Vec::new());
            report.unremoved_images = Some(Vec::new());
            let (mut infra, mut ambiguous, mut reasons) =
                (BTreeSet::new(), BTreeSet::new(), BTreeMap::new());
            for id in report.unresolved_ids.iter().chain(&report.error_ids) {
                if !outcomes.contains_key(id) {
                    continue;
                }
                if let Some(class) = classify(&files.test_output(id)) {
                    reasons.insert(id.clone(), class.reason.to_owned());
                    if class.environment {
                        infra.insert(id.clone());
                    } else {
                        ambiguous.insert(id.clone());
                    }
                }
            }
            report.infra_failure_instances = Some(infra.len());
            report.ambiguous_failure_instances = Some(ambiguous.len());
            report.infra_failure_ids = Some(infra);
            report.ambiguous_failure_ids = Some(ambiguous);
            report.failure_reasons = Some(reasons);
        }
    }
    report
}

/// The ids of `settings.predictions.<key>`, when the run had predictions.
fn id_list(predictions: Option<&serde_json::Value>, key: &str) -> BTreeSet<String> {
    predictions
        .and_then(|p| p.get(key))
        .and_then(serde_json::Value::as_array)
        .map(|ids| {
            ids.iter()
                .filter_map(|id| id.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// What a row came to, and whether its report.json is in 5.0's shape
/// (it has `infra_failure`). The patch of a `predictions` run's row is its
/// prediction, empty exactly when the row says `empty_patch` (one that
/// did not apply, or whose checkout failed, left no patch.diff but was not
/// empty: the package's error); any other run's is its patch.diff, as its
/// predictions.jsonl has it.
fn outcome(files: &dyn RunFiles, row: &Row<'_>, predictions_run: bool) -> (Outcome, bool) {
    if row.empty_patch || (!predictions_run && files.patch_empty(row.id)) {
        return (Outcome::EmptyPatch, false);
    }
    let text = match files.report_json(row.id) {
        ReportFile::Absent => return (Outcome::Error, false),
        ReportFile::Unreadable => return (Outcome::BrokenReport, false),
        ReportFile::Text(text) => text,
    };
    let report: Option<serde_json::Value> = serde_json::from_str(text.trim()).ok();
    let instance = report.as_ref().and_then(|r| r.get(row.id));
    let is_5_0 = instance.is_some_and(|i| i.get("infra_failure").is_some());
    match instance.and_then(|i| i.get("resolved")) {
        // Python's truthiness of the value, as `if report[id]["resolved"]`.
        Some(resolved) if truthy(resolved) => (Outcome::Resolved, is_5_0),
        Some(_) => (Outcome::Unresolved, is_5_0),
        None => (Outcome::BrokenReport, is_5_0),
    }
}

fn truthy(value: &serde_json::Value) -> bool {
    use serde_json::Value;
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|n| n != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run folder with no file.
    struct NoFiles;

    impl RunFiles for NoFiles {
        fn patch_empty(&self, _: &str) -> bool {
            true
        }
        fn report_json(&self, _: &str) -> ReportFile {
            ReportFile::Absent
        }
        fn test_output(&self, _: &str) -> String {
            String::new()
        }
    }

    #[test]
    fn the_keys_are_in_the_order_of_each_version() {
        let report = build(&[], None, None, &NoFiles);
        let text = report.to_json();
        let keys: Vec<&str> = text
            .lines()
            .filter(|line| line.starts_with("    \""))
            .map(|line| line.trim().split('"').nth(1).unwrap_or_default())
            .collect();
        assert_eq!(keys.first(), Some(&"total_instances"));
        // No grading known and no 5.0 report.json: 4.1's keys.
        assert_eq!(keys.last(), Some(&"schema_version"));
        assert!(text.contains("\"completed_ids\": [],"));
    }
}
