//! `onebash regrade RUN [-o OUT] [--grading RULES]`: a run folder graded
//! again from what it saved, with no model, no environment, no network
//! and no probe.
//!
//! Each row's (task, epoch) folder gives the task (its trajectory's header:
//! the task line, read back by the task loading code), the tests' command
//! record (the `test` event), their output (test.log) and, for a task whose
//! statuses came from a JUnit file, the statuses read then (tests.json);
//! the test stage's own decision (`runner::test_run::decide`, which runs
//! nothing) grades them again by the rules asked for. A row without a test
//! log (an error before the tests, an empty patch) and a Harbor task's
//! (its verifier's reward decides) stay as they are; a row whose files are
//! damaged is named and kept, and the rest is regraded.
//!
//! With `-o OUT` the regraded run is a new folder (the task folders hard
//! linked where the file system allows, else copied; every file regrade
//! rewrites goes in by rename, so a link never changes the source); without,
//! the folder is rewritten in place, its old rows kept beside it. Every row
//! is graded before anything is written; then, in an order that lets a
//! second `regrade` with the same flags complete one that was killed:
//! run.json (the rules asked for, so the second regrade takes them from
//! it), each task's tests.json and report.json staged beside it
//! (`NAME.regrade-tmp`), results.csv (by rename), the staged files renamed
//! in (or the old ones removed), predictions.jsonl. Synchronous: nothing
//! here waits.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::config::manifest::RunManifest;
use crate::grade::Rules;
use crate::grade::testlog::{PerTestVerdict, TestResults};
use crate::run_folder::trajectory::{CommandRecord, Event, ReadError, read_trajectory};
use crate::run_folder::{
    ResultRow, RunFolder, RunFolderError, Status, one_line, read_rows, replace_rows,
    write_atomically, write_predictions, write_rows_atomically,
};
use crate::runner::report_json;
use crate::runner::test_run::{GradeError, decide, reads_junit};
use crate::sys::lock::FileLock;
use crate::task::{LineError, TaskSpec};

/// Why a run folder cannot be regraded at all: exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum RegradeError {
    /// The folder's rows cannot be taken as they are (a torn results.csv,
    /// a run still running), or OUT is taken.
    #[error("{0}")]
    Refused(String),
    /// A run folder, or a file in one, that cannot be read or written.
    #[error(transparent)]
    Folder(#[from] RunFolderError),
}

/// What a regrade did, for `dispatch` to print.
#[derive(Debug)]
pub(crate) struct Regraded {
    /// The folder written: OUT, or the run itself.
    pub folder: PathBuf,
    /// The rules asked for (`--grading`, else run.json's); `None`: each
    /// row's format decided, as in the run.
    pub rules: Option<Rules>,
    /// `TASK epoch K: passed -> failed (why)`, one per verdict changed.
    pub changes: Vec<String>,
    /// Rows that could not be regraded, with why; they are kept as they were.
    pub problems: Vec<String>,
    /// Rows regraded with a doubt (a grader the trajectory does not name).
    pub warnings: Vec<String>,
    /// Where the old results.csv was kept (in place only).
    pub backup: Option<PathBuf>,
    pub rows: usize,
    /// Rows with no test log to grade (kept as they were).
    pub untested: usize,
}

impl Regraded {
    /// The count line.
    pub(crate) fn line(&self) -> String {
        let rules = self
            .rules
            .map_or_else(|| "each row's format's rules".to_owned(), |r| r.to_string());
        let graded = self.rows - self.untested - self.problems.len();
        format!(
            "regraded {graded} of {} rows by {rules} into {}: {} verdicts changed, {} rows without test results kept, {} rows could not be regraded",
            self.rows,
            self.folder.display(),
            self.changes.len(),
            self.untested,
            self.problems.len(),
        )
    }
}

/// Regrades the run folder `run` into `out` (a new folder), or in place.
pub(crate) fn regrade(
    run: &Path,
    out: Option<&Path>,
    grading: Option<Rules>,
) -> Result<Regraded, RegradeError> {
    let source = RunFolder::open(run)?;
    let manifest = RunManifest::read(&source)?;
    // A run still going (or a resume) holds the lock: its rows are not
    // final, and an in-place rewrite would race its appends.
    let _lock = lock(&source, out.is_none())?;
    let read = read_rows(&source.results_csv())?;
    if read.torn_at.is_some() {
        return Err(RegradeError::Refused(format!(
            "{} ends in a torn row (the run was killed)\nhint: finish it first with `onebash run ... -o {} --resume`",
            source.results_csv().display(),
            run.display()
        )));
    }
    let rules = grading.or_else(|| manifest.grading());
    let junit = manifest
        .settings
        .other
        .get("junit_path")
        .is_some_and(|value| !value.is_null());
    let target = match out {
        Some(out) => new_folder(&source, out)?,
        None => source.clone(),
    };
    let mut regraded = Regraded {
        folder: target.root().to_owned(),
        rules,
        changes: Vec::new(),
        problems: Vec::new(),
        warnings: Vec::new(),
        backup: None,
        rows: read.rows.len(),
        untested: 0,
    };
    let mut rows = Vec::with_capacity(read.rows.len());
    let mut files = Vec::new();
    for row in read.rows.iter() {
        let label = format!("{} epoch {}", row.task_id, row.epoch);
        let mut warning = None;
        match regrade_row(&source, row, rules, junit, &mut warning) {
            Ok(None) => {
                regraded.untested += 1;
                rows.push(row.clone());
            }
            Ok(Some(again)) => {
                if let Some(change) = change(row, &again) {
                    regraded.changes.push(format!("{label}: {change}"));
                }
                files.push(TaskFiles::of(&target, &again));
                rows.push(again.row);
            }
            Err(problem) => {
                regraded
                    .problems
                    .push(format!("{label}: {problem}; its row is kept as it was"));
                rows.push(row.clone());
            }
        }
        if let Some(warning) = warning {
            regraded.warnings.push(format!("{label}: {warning}"));
        }
    }
    // From here on a crash leaves a folder that a second regrade with the
    // same flags completes: run.json first (its rules are the ones asked
    // for), the task files staged, then the rows, then the files in.
    regraded_manifest(manifest, run, &target, rules, &rows).write(&target)?;
    for task in &files {
        task.stage()?;
    }
    if out.is_some() {
        write_rows_atomically(&target.results_csv(), &rows)?;
    } else {
        let backup = target.regrade_backup();
        replace_rows(&target.results_csv(), &backup, &rows)?;
        regraded.backup = Some(backup);
    }
    for task in &files {
        task.commit()?;
    }
    // What an earlier, killed regrade staged for a row not regraded now.
    for row in &read.rows {
        for path in [
            target.tests_json(&row.task_id, row.epoch),
            target.report_json(&row.task_id, row.epoch),
        ] {
            remove_if_there(&staged(&path))?;
        }
    }
    write_predictions(&target, &rows)?;
    Ok(regraded)
}

/// The run folder's lock, or a refusal when another onebash holds it.
/// Reading it into another folder (`!in_place`) also works where the lock
/// cannot be taken (a read-only copy of a run: nothing runs in it).
fn lock(folder: &RunFolder, in_place: bool) -> Result<Option<FileLock>, RegradeError> {
    let path = folder.lock_file();
    match FileLock::try_acquire(&path) {
        Ok(Some(lock)) => Ok(Some(lock)),
        Err(_) if !in_place => Ok(None),
        Ok(None) => Err(RegradeError::Refused(format!(
            "the run folder {} is in use by another onebash (it holds {})\nhint: wait for that run to end",
            folder.root().display(),
            path.display()
        ))),
        Err(source) => Err(RunFolderError::Lock { path, source }.into()),
    }
}

/// OUT, new or empty, with the task folders of `source` in it.
fn new_folder(source: &RunFolder, out: &Path) -> Result<RunFolder, RegradeError> {
    if out.exists() && std::fs::read_dir(out).map_or(true, |mut d| d.next().is_some()) {
        return Err(RegradeError::Refused(format!(
            "the regraded run folder {} exists and is not empty\nhint: choose a new -o DIR, or leave -o out to regrade in place",
            out.display()
        )));
    }
    let target = RunFolder::create(out)?;
    let tasks = source.tasks_dir();
    if tasks.is_dir() {
        link_tree(&tasks, &target.tasks_dir())?;
    }
    Ok(target)
}

/// Hard links every file of `from` into `to`, copying where the file
/// system cannot link (another device).
fn link_tree(from: &Path, to: &Path) -> Result<(), RunFolderError> {
    std::fs::create_dir_all(to).map_err(RunFolderError::write(to))?;
    for entry in std::fs::read_dir(from).map_err(RunFolderError::read(from))? {
        let entry = entry.map_err(RunFolderError::read(from))?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        if source.is_dir() {
            link_tree(&source, &target)?;
        } else if std::fs::hard_link(&source, &target).is_err() {
            std::fs::copy(&source, &target).map_err(RunFolderError::write(&target))?;
        }
    }
    Ok(())
}

/// A row graded again, and the task folder's files that say so.
struct Again {
    row: ResultRow,
    /// tests.json's text; `None`: the task has no per-test statuses.
    tests_json: Option<String>,
    /// report.json's text; `None`: run_evaluation would write none.
    report_json: Option<String>,
    /// Why the verdict is what it is, when the rules say.
    why: Option<String>,
}

/// Why one row cannot be regraded: the row is kept as it was and named.
#[derive(Debug, thiserror::Error)]
enum RowError {
    #[error(transparent)]
    Trajectory(#[from] ReadError),
    #[error("{} has no header", .0.display())]
    NoHeader(PathBuf),
    #[error("the task in the header of {} cannot be read: {source}", path.display())]
    Header {
        path: PathBuf,
        #[source]
        source: LineError,
    },
    /// The run graded it by a recipe this onebash cannot build: the
    /// benchmark's words.
    #[error("{0}")]
    Recipe(String),
    #[error(
        "failed to read {}: {source}; hint: the test log is what is graded, restore it from a copy of the run",
        path.display()
    )]
    TestLog {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to read {}: {source}", path.display())]
    Saved {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to read {}: {source}", path.display())]
    SavedJson {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{} holds no statuses", .0.display())]
    NoStatuses(PathBuf),
    #[error("{}: {name} has no status: {status}", path.display())]
    NoStatus {
        path: PathBuf,
        name: String,
        status: Value,
    },
}

/// What the run saved of a row's tests: the task read back from its
/// trajectory's header, the tests' record with test.log's output, whether
/// a recipe graded it, and whether the patch SWE-bench grades was empty.
struct Saved {
    task: TaskSpec,
    record: CommandRecord,
    model_patch_empty: bool,
}

/// The row of `row`'s (task, epoch) graded again; `None` when it has no
/// test results to grade (no `test` event, or a reward decided it).
fn regrade_row(
    folder: &RunFolder,
    row: &ResultRow,
    rules: Option<Rules>,
    junit: bool,
    warning: &mut Option<String>,
) -> Result<Option<Again>, RowError> {
    let (id, epoch) = (&row.task_id, row.epoch);
    if row.reward.is_some() {
        return Ok(None);
    }
    let Some(Saved {
        task,
        record,
        model_patch_empty,
    }) = saved_tests(folder, row, warning)?
    else {
        return Ok(None);
    };
    let statuses = if junit && reads_junit(&task) {
        Some(saved_statuses(&folder.tests_json(id, epoch))?)
    } else {
        None
    };
    let rules = task.rules(rules);
    let mut again = row.clone();
    match grade_again(&task, rules, &record, statuses, model_patch_empty) {
        Ok(graded) => {
            again.passed = graded.passed;
            again.status = if graded.passed {
                Status::Passed
            } else {
                Status::Failed
            };
            Ok(Some(Again {
                row: again,
                tests_json: graded.tests_json,
                report_json: graded.report_json,
                why: graded.why,
            }))
        }
        Err(error) => {
            // As in the run: tests that give no verdict are the row's error.
            let error = error.to_string();
            again.passed = false;
            again.status = Status::Error;
            if !again.error.contains(&error) {
                again.error = one_line(&if again.error.is_empty() {
                    error.clone()
                } else {
                    format!("{}; then: {error}", again.error)
                });
            }
            Ok(Some(Again {
                row: again,
                tests_json: None,
                report_json: None,
                why: Some(error),
            }))
        }
    }
}

/// What the run saved of `row`'s tests; `None` when they did not run (no
/// `test` event). A doubt about how the run graded it goes to `warning`.
fn saved_tests(
    folder: &RunFolder,
    row: &ResultRow,
    warning: &mut Option<String>,
) -> Result<Option<Saved>, RowError> {
    let (id, epoch) = (&row.task_id, row.epoch);
    let path = folder.trajectory(id, epoch);
    let events = read_trajectory(&path)?;
    let header = events.iter().find_map(|event| match event {
        Event::Header { task, .. } => Some(task),
        _ => None,
    });
    let test = events.iter().find_map(|event| match event {
        Event::Test {
            record,
            graded_by_recipe,
            model_patch_empty,
            ..
        } => Some((record, *graded_by_recipe, *model_patch_empty)),
        _ => None,
    });
    let Some((record, recipe, model_patch_empty)) = test else {
        return Ok(None);
    };
    let Some(task) = header else {
        return Err(RowError::NoHeader(path));
    };
    let (task, doubt) =
        TaskSpec::from_header(task, recipe).map_err(|source| RowError::Header { path, source })?;
    *warning = doubt;
    if recipe == Some(true)
        && let Some(why) = task.benchmark.cannot_regrade()
    {
        return Err(RowError::Recipe(why));
    }
    let log_path = folder.test_log(id, epoch);
    let log = std::fs::read(&log_path).map_err(|source| RowError::TestLog {
        path: log_path,
        source,
    })?;
    let record = CommandRecord {
        output: String::from_utf8_lossy(&log).into_owned(),
        ..record.clone()
    };
    // The patch SWE-bench grades: as the run recorded it, else patch.diff.
    let model_patch_empty = model_patch_empty.unwrap_or_else(|| {
        std::fs::metadata(folder.patch_diff(id, epoch)).map_or(true, |meta| meta.len() == 0)
    });
    Ok(Some(Saved {
        task,
        record,
        model_patch_empty,
    }))
}

/// The statuses a JUnit file gave in the run, as tests.json saved them.
fn saved_statuses(path: &Path) -> Result<TestResults, RowError> {
    let text = std::fs::read_to_string(path).map_err(|source| RowError::Saved {
        path: path.to_owned(),
        source,
    })?;
    let saved: Value = serde_json::from_str(&text).map_err(|source| RowError::SavedJson {
        path: path.to_owned(),
        source,
    })?;
    let Some(Value::Object(statuses)) = saved.get("statuses") else {
        return Err(RowError::NoStatuses(path.to_owned()));
    };
    statuses
        .iter()
        .map(|(name, status)| {
            let word = status.as_str().unwrap_or_default();
            match crate::grade::testlog::status_word(word) {
                Some(status) => Ok((name.clone(), status)),
                None => Err(RowError::NoStatus {
                    path: path.to_owned(),
                    name: name.clone(),
                    status: status.clone(),
                }),
            }
        })
        .collect()
}

/// What the rules decided of a saved test log.
struct Graded {
    passed: bool,
    tests_json: Option<String>,
    report_json: Option<String>,
    why: Option<String>,
}

/// The test stage's decision on a saved log (`runner::test_run::decide`),
/// and the files the run would have written for it.
fn grade_again(
    task: &TaskSpec,
    rules: Rules,
    record: &CommandRecord,
    statuses: Option<TestResults>,
    model_patch_empty: bool,
) -> Result<Graded, GradeError> {
    let decision = decide(task, rules, record, statuses)?;
    let tests_json = decision
        .tests_json()
        .map(|value| serde_json::to_string_pretty(&value).unwrap_or_default());
    let report_json = report_json(task, &decision, model_patch_empty, record);
    Ok(Graded {
        passed: decision.passed,
        why: decision
            .per_test
            .as_ref()
            .and_then(|(_, verdict)| why(verdict)),
        tests_json,
        report_json,
    })
}

/// Why a verdict is what it is: why the rules did not take the log, else
/// the listed tests that count as failed.
fn why(verdict: &PerTestVerdict) -> Option<String> {
    if let Some(invalid) = &verdict.invalid {
        return Some(invalid.clone());
    }
    let failing: Vec<&str> = verdict
        .fail_to_pass
        .iter()
        .chain(&verdict.pass_to_pass)
        .filter(|test| !test.ok)
        .map(|test| test.name.as_str())
        .collect();
    (!failing.is_empty()).then(|| format!("failing: {}", failing.join(", ")))
}

/// A regraded row's tests.json and report.json: each path with its new
/// text, or `None` where the file goes.
struct TaskFiles(Vec<(PathBuf, Option<String>)>);

impl TaskFiles {
    fn of(folder: &RunFolder, again: &Again) -> TaskFiles {
        let (id, epoch) = (&again.row.task_id, again.row.epoch);
        TaskFiles(vec![
            (folder.tests_json(id, epoch), again.tests_json.clone()),
            (folder.report_json(id, epoch), again.report_json.clone()),
        ])
    }

    /// Writes each new text beside its file ([`staged`]).
    fn stage(&self) -> Result<(), RunFolderError> {
        for (path, text) in &self.0 {
            if let Some(text) = text {
                write_atomically(&staged(path), text.as_bytes())?;
            }
        }
        Ok(())
    }

    /// Renames each staged text over its file, or removes the file.
    fn commit(&self) -> Result<(), RunFolderError> {
        for (path, text) in &self.0 {
            match text {
                Some(_) => {
                    std::fs::rename(staged(path), path).map_err(RunFolderError::write(path))?
                }
                None => remove_if_there(path)?,
            }
        }
        Ok(())
    }
}

/// Where a task file's new text waits for results.csv: `NAME.regrade-tmp`.
fn staged(path: &Path) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(".regrade-tmp");
    PathBuf::from(name)
}

fn remove_if_there(path: &Path) -> Result<(), RunFolderError> {
    match std::fs::remove_file(path) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(RunFolderError::Write {
            path: path.to_owned(),
            source: err,
        }),
        _ => Ok(()),
    }
}

/// `passed -> failed (why)`, when the verdict changed.
fn change(before: &ResultRow, again: &Again) -> Option<String> {
    if before.status == again.row.status && before.passed == again.row.passed {
        return None;
    }
    let word = |row: &ResultRow| row.status.as_str();
    Some(match &again.why {
        Some(why) => format!("{} -> {} ({why})", word(before), word(&again.row)),
        None => format!("{} -> {}", word(before), word(&again.row)),
    })
}

/// run.json of the regraded run: the run's, with `settings.grading` the
/// rules asked for, where it was regraded from and when, and the new counts.
fn regraded_manifest(
    mut manifest: RunManifest,
    run: &Path,
    target: &RunFolder,
    rules: Option<Rules>,
    rows: &[ResultRow],
) -> RunManifest {
    let settings = &mut manifest.settings;
    settings.out_dir = target.root().to_owned();
    settings
        .other
        .insert("grading".to_owned(), serde_json::json!(rules));
    // The rules decide outcomes, so a resume or a merge of the regraded
    // run must agree on them as on the run's other settings.
    if let Some(fingerprint) = manifest.fingerprint.as_object_mut() {
        match rules {
            Some(rules) => {
                fingerprint.insert("grading".to_owned(), serde_json::json!(rules));
            }
            None => {
                fingerprint.remove("grading");
            }
        }
    }
    let source = std::fs::canonicalize(run).unwrap_or_else(|_| run.to_owned());
    settings.other.insert(
        "regraded".to_owned(),
        serde_json::json!({
            "from": source.display().to_string(),
            "at": humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            "onebash_version": env!("CARGO_PKG_VERSION"),
        }),
    );
    let mut counts = BTreeMap::new();
    for row in rows {
        *counts.entry(row.status.as_str()).or_insert(0usize) += 1;
    }
    // Only the counts the rows give change: the rest of the run's summary
    // (tokens, a predictions run's counts) is the run's, kept.
    let mut summary = match manifest.summary.take() {
        Some(Value::Object(summary)) => summary,
        _ => serde_json::Map::new(),
    };
    summary.insert("rows".to_owned(), rows.len().into());
    for status in ["passed", "failed", "error"] {
        let count = counts.get(status).copied().unwrap_or(0);
        summary.insert(status.to_owned(), count.into());
    }
    manifest.summary = Some(Value::Object(summary));
    manifest
}
