//! `report --by FIELD`: the rows grouped by a field of their task line
//! (repo, difficulty, language, any other; found at the top of the line or
//! under its `metadata`, where users keep their own fields, and reached by
//! a dotted path: `metadata.source.name`), each group with its counts by
//! status and its pass rate with the Wilson 95% interval that the whole
//! run's pass rate has. The task line is in each trajectory's `header`
//! event (`task`: every field of the line, unknown ones included), written
//! since the first trajectory format, so run folders of any age group.
//! This file builds the groups; `commands::report` renders them as text
//! and `commands::html` draws them on the page.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;

use serde::Serialize;
use serde_json::Value;

use crate::commands::stats::wilson95;
use crate::run_folder::trajectory::Event;
use crate::run_folder::{ResultRow, RunFolder, Status};

/// The group of rows whose task line lacks the field.
pub(crate) const NO_VALUE: &str = "(none)";
/// The group of rows without a readable trajectory header.
pub(crate) const NO_TRAJECTORY: &str = "(no trajectory)";

/// The groups of `report --by FIELD`, also their JSON form (`by`).
#[derive(Debug, Serialize)]
pub(crate) struct Groups {
    pub field: String,
    /// By value, in order.
    pub groups: Vec<Group>,
}

#[derive(Debug, Serialize)]
pub(crate) struct Group {
    pub value: String,
    pub rows: usize,
    pub tasks: usize,
    pub passed: usize,
    pub failed: usize,
    pub error: usize,
    /// passed / (passed + failed), as the run's.
    pub pass_rate: Option<f64>,
    pub pass_rate_ci95: (f64, f64),
}

impl Group {
    /// The pass rate and its interval as two table cells (`n/a` and `-`
    /// without a verdict), each percentage written by `percent`.
    pub(crate) fn rate_cells(&self, percent: fn(f64) -> String) -> (String, String) {
        match self.pass_rate {
            Some(rate) => (
                percent(rate),
                format!(
                    "[{}, {}]",
                    percent(self.pass_rate_ci95.0),
                    percent(self.pass_rate_ci95.1)
                ),
            ),
            None => ("n/a".to_owned(), "-".to_owned()),
        }
    }
}

/// Why rows cannot be grouped by a field.
#[derive(Debug, thiserror::Error)]
pub enum ByError {
    #[error(
        "failed to group by `{field}`: no task of the run has that field\nhint: its tasks have {}{}",
        fields.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", "),
        metadata_hint(metadata)
    )]
    UnknownField {
        field: String,
        fields: BTreeSet<String>,
        /// The keys of the tasks' `metadata` objects.
        metadata: BTreeSet<String>,
    },
}

/// The hint's second part: the `metadata` keys, when the tasks have any.
fn metadata_hint(keys: &BTreeSet<String>) -> String {
    if keys.is_empty() {
        return String::new();
    }
    let keys: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
    format!("; under `metadata`: {}", keys.join(", "))
}

/// Groups `rows` by `field` of their task lines, read from `run`.
pub(crate) fn group(run: &RunFolder, rows: &[ResultRow], field: &str) -> Result<Groups, ByError> {
    let tasks: Vec<Option<Value>> = rows.iter().map(|row| task_line(run, row)).collect();
    let seen = tasks
        .iter()
        .flatten()
        .any(|task| lookup(task, field).is_some());
    if !seen && tasks.iter().any(Option::is_some) {
        let objects = || tasks.iter().flatten().filter_map(Value::as_object);
        let fields = objects().flat_map(|task| task.keys().cloned()).collect();
        let metadata = objects()
            .filter_map(|task| task.get("metadata")?.as_object())
            .flat_map(|metadata| metadata.keys().cloned())
            .collect();
        return Err(ByError::UnknownField {
            field: field.to_owned(),
            fields,
            metadata,
        });
    }
    Ok(groups(field, rows, &tasks))
}

/// `field` of a task line: a key at its top (whole, even with dots in
/// it), else a dotted path from the top, else the same under `metadata`.
/// Top level first, so that `repo` is the line's own and never a
/// metadata key of the same name.
fn lookup<'a>(task: &'a Value, field: &str) -> Option<&'a Value> {
    let path = |from: &'a Value| {
        from.get(field).or_else(|| {
            field
                .split('.')
                .try_fold(from, |value, key| value.as_object()?.get(key))
        })
    };
    path(task).or_else(|| path(task.get("metadata")?))
}

/// The groups of `rows`, whose task lines are `tasks` (same order; `None`
/// where the trajectory could not be read).
pub(crate) fn groups(field: &str, rows: &[ResultRow], tasks: &[Option<Value>]) -> Groups {
    let mut by_value: BTreeMap<String, Vec<&ResultRow>> = BTreeMap::new();
    for (row, task) in rows.iter().zip(tasks) {
        let value = match task {
            None => NO_TRAJECTORY.to_owned(),
            Some(task) => match lookup(task, field) {
                None | Some(Value::Null) => NO_VALUE.to_owned(),
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
            },
        };
        by_value.entry(value).or_default().push(row);
    }
    let groups = by_value
        .into_iter()
        .map(|(value, rows)| {
            let count = |status| rows.iter().filter(|r| r.status == status).count();
            let (passed, failed) = (count(Status::Passed), count(Status::Failed));
            let graded = passed + failed;
            Group {
                value,
                rows: rows.len(),
                tasks: rows
                    .iter()
                    .map(|r| r.task_id.as_str())
                    .collect::<BTreeSet<_>>()
                    .len(),
                passed,
                failed,
                error: count(Status::Error),
                pass_rate: (graded > 0).then(|| passed as f64 / graded as f64),
                pass_rate_ci95: wilson95(passed as u64, graded as u64),
            }
        })
        .collect();
    Groups {
        field: field.to_owned(),
        groups,
    }
}

/// The task line of a row: the `task` of its trajectory's header, the
/// first line (read alone: the rest may run to megabytes).
fn task_line(run: &RunFolder, row: &ResultRow) -> Option<Value> {
    let file = std::fs::File::open(run.trajectory(&row.task_id, row.epoch)).ok()?;
    let mut first = String::new();
    std::io::BufReader::new(file).read_line(&mut first).ok()?;
    match serde_json::from_str::<Event>(&first).ok()? {
        Event::Header { task, .. } => Some(task),
        _ => None,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::*;
    use crate::run_folder::ExitReason;
    use crate::run_folder::read_rows;
    use crate::task::TaskId;

    fn row(task: &str, status: Status) -> ResultRow {
        ResultRow {
            status,
            passed: status == Status::Passed,
            ..ResultRow::blank(
                TaskId::parse(task).expect("id"),
                1,
                "m".into(),
                "p@1".into(),
                ExitReason::Completed,
            )
        }
    }

    /// A mixed run: two repos, a task without the field, a row without a
    /// trajectory, errors that are left out of the rate.
    pub(crate) fn mixed_by_repo() -> Groups {
        use Status::*;
        let rows = vec![
            row("calc-1", Passed),
            row("calc-2", Failed),
            row("calc-3", Passed),
            row("calc-4", Error),
            row("text-1", Passed),
            row("text-2", Passed),
            row("misc", Failed),
            row("lost", Passed),
        ];
        let task = |repo: Value| Some(json!({"id": "x", "repo": repo}));
        let tasks = vec![
            task(json!("acme/calc")),
            task(json!("acme/calc")),
            task(json!("acme/calc")),
            task(json!("acme/calc")),
            task(json!("acme/text")),
            task(json!("acme/text")),
            Some(json!({"id": "misc"})),
            None,
        ];
        groups("repo", &rows, &tasks)
    }

    #[test]
    fn mixed_rows_group_by_repo() {
        let g = mixed_by_repo();
        let calc = &g.groups[2];
        assert_eq!(calc.value, "acme/calc");
        assert_eq!(
            (calc.rows, calc.passed, calc.failed, calc.error),
            (4, 2, 1, 1)
        );
        assert_eq!(calc.pass_rate, Some(2.0 / 3.0));
        assert_eq!(calc.pass_rate_ci95, wilson95(2, 3));
        // The text of these groups: `report`'s snapshot test of `--by`.
        assert_eq!(g.groups.len(), 4);
    }

    #[test]
    fn numbers_and_lists_group_by_their_json() {
        let rows = vec![row("a", Status::Passed), row("b", Status::Failed)];
        let tasks = vec![
            Some(json!({"difficulty": 3})),
            Some(json!({"difficulty": ["x", 1]})),
        ];
        let values: Vec<String> = groups("difficulty", &rows, &tasks)
            .groups
            .into_iter()
            .map(|g| g.value)
            .collect();
        assert_eq!(values, ["3", r#"["x",1]"#]);
    }

    /// Users' own fields live under `metadata` (docs/tasks.md): `--by`
    /// finds them there by name or by a dotted path, after the top level.
    #[test]
    fn fields_are_found_under_metadata_and_by_dotted_paths() {
        let rows: Vec<ResultRow> = ["a", "b", "c", "d"]
            .iter()
            .map(|id| row(id, Status::Passed))
            .collect();
        let tasks = vec![
            Some(
                json!({"repo": "top", "metadata": {"difficulty": "easy", "repo": "meta",
                "source": {"name": "swe"}}}),
            ),
            Some(json!({"metadata": {"difficulty": "hard", "source": {"name": "gym"}}})),
            Some(json!({"difficulty": "top-level", "metadata": {"difficulty": "hidden"}})),
            Some(json!({"id": "d", "a.b": "dotted key"})),
        ];
        let values = |field: &str| -> Vec<String> {
            groups(field, &rows, &tasks)
                .groups
                .into_iter()
                .map(|g| format!("{}={}", g.value, g.rows))
                .collect()
        };
        assert_eq!(
            values("difficulty"),
            ["(none)=1", "easy=1", "hard=1", "top-level=1"]
        );
        assert_eq!(
            values("metadata.difficulty"),
            ["(none)=1", "easy=1", "hard=1", "hidden=1"]
        );
        assert_eq!(values("source.name"), ["(none)=2", "gym=1", "swe=1"]);
        assert_eq!(
            values("metadata.source.name"),
            ["(none)=2", "gym=1", "swe=1"]
        );
        assert_eq!(values("repo"), ["(none)=3", "top=1"]);
        assert_eq!(values("a.b"), ["(none)=3", "dotted key=1"]);
    }

    /// The run folder of an older onebash (tests/fixtures/run) groups by
    /// its task lines; a field none of them has is refused, naming those
    /// they have.
    #[test]
    fn an_old_run_folder_groups_and_an_unknown_field_is_refused() {
        let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/run"));
        let run = RunFolder::at(root);
        let rows = read_rows(&run.results_csv()).expect("rows").rows;
        let g = group(&run, &rows, "id").expect("grouped");
        assert_eq!(g.groups.len(), 1);
        assert_eq!(g.groups[0].value, "calc-divide-by-zero");
        // Its line keeps `difficulty` under `metadata`.
        let g = group(&run, &rows, "difficulty").expect("grouped");
        assert_eq!(g.groups[0].value, "easy");
        let err = group(&run, &rows, "size").expect_err("no such field");
        let message = err.to_string();
        assert!(
            message.starts_with("failed to group by `size`: no task of the run has that field\nhint: its tasks have `base_commit`, "),
            "{message}"
        );
        assert!(
            message.ends_with("; under `metadata`: `difficulty`, `language`"),
            "{message}"
        );
    }
}
