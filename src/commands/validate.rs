//! `onebash validate TASKS.jsonl [--runs N]`: which tasks are broken or
//! flaky, before money is spent on them.
//!
//! Two runs through the ordinary pipeline, into `OUT/noop` and
//! `OUT/oracle`: the `noop` model (changes nothing) once, and the oracle
//! (applies the gold patch) N times. A task is flagged when its tests pass
//! before any change (nothing to fix), its test_patch does not apply, its
//! gold patch fails, its verdict changes between runs (flaky), or it cannot
//! be checked out or set up. Writes `validation.json` and `exclude.txt` (one
//! id a line, for `--filter` or to edit the task file).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Parser;
use serde::Serialize;

use crate::cli::{Cli, Command};
use crate::commands::error::{CommandError, EXIT_INTERRUPTED, ValidateError};
use crate::commands::run::run_with;
use crate::config::RunConfig;
use crate::run_folder::ExitReason;
use crate::run_folder::{ResultRow, RunFolder, RunFolderError, Status, read_rows};

/// What validate found about one task.
#[derive(Debug, Default, Serialize)]
pub(crate) struct TaskCheck {
    pub problems: Vec<String>,
    /// The noop run's status.
    pub noop: Option<Status>,
    pub oracle_passed: usize,
    pub oracle_runs: usize,
    /// Oracle runs without a verdict (status error).
    pub oracle_errors: usize,
}

/// The two runs' settings, checked before anything runs, each with what
/// the machine allows it (probed before the async runtime starts: the
/// probes run bwrap and look at cgroups, blocking work).
pub(crate) fn configs(
    tasks: &Path,
    runs: u32,
    out: &Path,
    extra: &[String],
    secrets: &crate::config::Secrets,
) -> Result<Vec<RunConfig>, CommandError> {
    let mut configs = Vec::new();
    for (model, phase_runs) in [("noop", 1), ("oracle", runs)] {
        let mut argv: Vec<String> = vec![
            "onebash".into(),
            "run".into(),
            tasks.display().to_string(),
            "--model".into(),
            model.into(),
            "--runs".into(),
            phase_runs.to_string(),
            "-o".into(),
            out.join(model).display().to_string(),
        ];
        argv.extend(extra.iter().cloned());
        // clap's message starts with its own `error: `, and main adds one.
        let cli = Cli::try_parse_from(&argv).map_err(ValidateError::Args)?;
        let Command::Run(args) = cli.command else {
            return Err(ValidateError::NotRun.into());
        };
        if args.dry_run {
            return Err(ValidateError::DryRun.into());
        }
        configs.push(RunConfig::from_options(&args.options(), secrets).and_then(RunConfig::probe)?);
    }
    Ok(configs)
}

/// Runs both phases and writes the verdicts; the exit code is 0 when no
/// task is flagged, 1 when some are.
pub(crate) async fn validate(
    configs: Vec<RunConfig>,
    runs: u32,
    out: &Path,
) -> anyhow::Result<i32> {
    for config in configs {
        eprintln!(
            "validate: the {} run ({} per task) into {}",
            config.model.name(),
            config.runs,
            config.out_dir.display()
        );
        let code = run_with(config, false).await?;
        if code == EXIT_INTERRUPTED {
            return Ok(EXIT_INTERRUPTED);
        }
    }
    let rows_of = |phase: &str| {
        read_rows(&RunFolder::at(&out.join(phase)).results_csv()).map(|read| read.rows)
    };
    let (noop, oracle) = (rows_of("noop")?, rows_of("oracle")?);
    let checks = judge(&noop, &oracle);
    let exclude: Vec<&String> = checks
        .iter()
        .filter(|(_, c)| !c.problems.is_empty())
        .map(|(id, _)| id)
        .collect();
    let report = serde_json::json!({"runs": runs, "tasks": &checks, "exclude": &exclude});
    let written = out.join("validation.json");
    std::fs::write(&written, serde_json::to_string_pretty(&report)? + "\n")
        .map_err(RunFolderError::write(written))?;
    let list: String = exclude.iter().map(|id| format!("{id}\n")).collect();
    let written = out.join("exclude.txt");
    std::fs::write(&written, list).map_err(RunFolderError::write(written))?;
    print!("{}", render(&checks, runs, out));
    Ok(if exclude.is_empty() { 0 } else { 1 })
}

/// The verdict on every task from the rows of both runs.
pub(crate) fn judge(noop: &[ResultRow], oracle: &[ResultRow]) -> BTreeMap<String, TaskCheck> {
    let mut checks: BTreeMap<String, TaskCheck> = BTreeMap::new();
    let broken = |row: &ResultRow| -> Option<String> {
        if row.status != Status::Error {
            return None;
        }
        Some(match row.exit_reason {
            ExitReason::CheckoutError => format!("cannot be checked out: {}", row.error),
            ExitReason::SetupError => format!("its setup_command fails: {}", row.error),
            _ if row.error.contains("test_patch") => {
                format!("its test_patch does not apply: {}", row.error)
            }
            _ => format!("no verdict: {}", row.error),
        })
    };
    for row in noop {
        let check = checks.entry(row.task_id.to_string()).or_default();
        check.noop = Some(row.status);
        if row.status == Status::Passed {
            check
                .problems
                .push("its tests pass before any change: nothing to fix".to_owned());
        }
        if let Some(problem) = broken(row) {
            check.problems.push(problem);
        }
    }
    for row in oracle {
        let check = checks.entry(row.task_id.to_string()).or_default();
        check.oracle_runs += 1;
        check.oracle_passed += usize::from(row.status == Status::Passed);
        check.oracle_errors += usize::from(row.status == Status::Error);
        if let Some(problem) = broken(row)
            && !check.problems.contains(&problem)
        {
            check.problems.push(problem);
        }
    }
    // Among the oracle runs with a verdict: none passed, or some did not.
    for check in checks.values_mut() {
        let graded = check.oracle_runs - check.oracle_errors;
        if graded == 0 {
            continue;
        }
        if check.oracle_passed == 0 {
            check
                .problems
                .push("its gold patch fails the tests".to_owned());
        } else if check.oracle_passed < graded {
            check.problems.push(format!(
                "flaky: the gold patch passed {} of {graded} runs",
                check.oracle_passed
            ));
        }
    }
    checks
}

fn render(checks: &BTreeMap<String, TaskCheck>, runs: u32, out: &Path) -> String {
    let flagged: Vec<(&String, &TaskCheck)> = checks
        .iter()
        .filter(|(_, c)| !c.problems.is_empty())
        .collect();
    let mut text = format!(
        "validated {} tasks (noop once, oracle {runs} times): {} fine, {} flagged\n",
        checks.len(),
        checks.len() - flagged.len(),
        flagged.len()
    );
    for (id, check) in &flagged {
        text.push_str(&format!("  {id}: {}\n", check.problems.join("; ")));
    }
    let out: PathBuf = out.to_owned();
    text.push_str(&format!(
        "details: {}\nexclude list: {}\n",
        out.join("validation.json").display(),
        out.join("exclude.txt").display()
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::TaskId;

    #[test]
    fn a_flag_validate_sets_itself_is_refused_in_one_message() {
        let extra = ["--model".to_owned(), "other".to_owned()];
        let Err(err) = configs(
            Path::new("tasks.jsonl"),
            1,
            Path::new("out"),
            &extra,
            &crate::config::Secrets::default(),
        ) else {
            panic!("--model twice was taken");
        };
        assert_eq!(err.exit_code(), 2, "{err}");
        let err = err.to_string();
        assert!(
            err.contains("'--model <MODEL>' cannot be used multiple times"),
            "{err}"
        );
        assert!(!err.starts_with("error:"), "main adds the prefix: {err}");
        let extra = ["--dry-run".to_owned()];
        let Err(err) = configs(
            Path::new("tasks.jsonl"),
            1,
            Path::new("out"),
            &extra,
            &crate::config::Secrets::default(),
        ) else {
            panic!("--dry-run was taken");
        };
        assert!(err.to_string().starts_with("--dry-run is run's"), "{err}");
    }

    fn row(task: &str, status: Status, exit_reason: ExitReason, error: &str) -> ResultRow {
        let id = TaskId::parse(task).expect("id");
        ResultRow {
            status,
            passed: status == Status::Passed,
            error: error.into(),
            ..ResultRow::blank(id, 1, "m".into(), "p".into(), exit_reason)
        }
    }

    #[test]
    fn every_kind_of_broken_task_is_named() {
        use ExitReason::*;
        use Status::*;
        let noop = vec![
            row("good", Failed, Completed, ""),
            row("nothing-to-fix", Passed, Completed, ""),
            row("bad-gold", Failed, Completed, ""),
            row("flaky", Failed, Completed, ""),
            row(
                "bad-test-patch",
                Error,
                Completed,
                "failed to apply the test_patch: x",
            ),
            row("no-repo", Error, CheckoutError, "failed to check out r@c"),
        ];
        let oracle = vec![
            row("good", Passed, Completed, ""),
            row("good", Passed, Completed, ""),
            row("nothing-to-fix", Passed, Completed, ""),
            row("nothing-to-fix", Passed, Completed, ""),
            row("bad-gold", Failed, Completed, ""),
            row("bad-gold", Failed, Completed, ""),
            row("flaky", Passed, Completed, ""),
            row("flaky", Failed, Completed, ""),
            row(
                "bad-test-patch",
                Error,
                Completed,
                "failed to apply the test_patch: x",
            ),
            row(
                "bad-test-patch",
                Error,
                Completed,
                "failed to apply the test_patch: x",
            ),
            row("no-repo", Error, CheckoutError, "failed to check out r@c"),
            row("no-repo", Error, CheckoutError, "failed to check out r@c"),
        ];
        let checks = judge(&noop, &oracle);
        assert!(checks["good"].problems.is_empty());
        assert_eq!(
            checks["nothing-to-fix"].problems,
            vec!["its tests pass before any change: nothing to fix"]
        );
        assert_eq!(
            checks["bad-gold"].problems,
            vec!["its gold patch fails the tests"]
        );
        assert_eq!(
            checks["flaky"].problems,
            vec!["flaky: the gold patch passed 1 of 2 runs"]
        );
        assert_eq!(checks["bad-test-patch"].problems.len(), 1);
        assert!(checks["bad-test-patch"].problems[0].starts_with("its test_patch does not apply"));
        assert_eq!(
            checks["no-repo"].problems.len(),
            1,
            "{:?}",
            checks["no-repo"].problems
        );
        assert!(checks["no-repo"].problems[0].starts_with("cannot be checked out"));
    }
}
