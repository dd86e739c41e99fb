//! Stage 4: the test phase and the verdict.
//!
//! Restores the files the hidden `test_patch` touches to the base commit,
//! applies it, runs `test_command` through the executor (with TZ=UTC and a
//! fixed PYTHONHASHSEED, so runs repeat) and decides: pass is exit code 0,
//! or, when the task lists `fail_to_pass`/`pass_to_pass`, SWE-bench's
//! per-test rules over the statuses parsed from the output or a JUnit XML
//! file (see testlog.rs). It does not know about the agent or the CSV.

use std::path::Path;
use std::time::Duration;

use crate::checkout::Checkout;
use crate::exec::{CommandContext, CommandSpec, run_command};
use crate::task::TaskSpec;
use crate::testlog::{PerTestVerdict, TestResults, grade, parse_junit, parse_output};
use crate::trajectory::CommandRecord;

/// Settings every test command runs with, so that a verdict repeats.
pub const TEST_SETTINGS: &[(&str, &str)] = &[("TZ", "UTC"), ("PYTHONHASHSEED", "0")];

/// The tests ran; this is what they said.
#[derive(Debug)]
pub struct TestOutcome {
    pub passed: bool,
    pub record: CommandRecord,
    /// Files the test patch touched, when there was one.
    pub test_patch_files: Option<Vec<String>>,
    /// How the test patch went in: `git apply`, `git apply --3way` or
    /// `patch --fuzz=5`, SWE-bench's fallbacks in order.
    pub test_patch_method: Option<&'static str>,
    /// Per-test statuses and verdict, when the task lists its tests.
    pub per_test: Option<(TestResults, PerTestVerdict)>,
}

/// The tests could not run: no verdict.
#[derive(Debug, thiserror::Error)]
pub enum GradeError {
    #[error("failed to apply the test_patch: {0}")]
    TestPatch(String),
    #[error("failed to run the test command: {0}")]
    Exec(String),
    /// The task lists its tests but none could be read from the run.
    #[error(
        "no test result could be read from the test output{0}; hint: run pytest with -rA, unittest or Django with -v, or write JUnit XML and pass --junit-path"
    )]
    NoTests(String),
}

/// The test timeout of a task: its own `test_timeout_s`, else the run's.
pub fn test_timeout(task: &TaskSpec, default: Duration) -> Duration {
    task.test_timeout_s
        .map(Duration::from_secs_f64)
        .unwrap_or(default)
}

/// Restores the files the test patch touches, then applies it with the
/// fallbacks SWE-bench uses: `git apply` (libgit2, strict), `git apply
/// --3way`, `patch --fuzz=5`, each on freshly restored files. Returns the
/// files and the attempt that worked.
async fn apply_test_patch(
    checkout: &Checkout,
    patch: &str,
    context: CommandContext<'_>,
) -> Result<(Vec<String>, &'static str), GradeError> {
    let restore = || {
        let (checkout, patch) = (checkout.clone(), patch.to_owned());
        async move {
            tokio::task::spawn_blocking(move || checkout.restore(&patch))
                .await
                .map_err(|join| GradeError::TestPatch(join.to_string()))?
                .map_err(|err| GradeError::TestPatch(err.to_string()))
        }
    };
    let files = restore().await?;
    let strict = {
        let (checkout, patch) = (checkout.clone(), patch.to_owned());
        tokio::task::spawn_blocking(move || checkout.apply(&patch))
            .await
            .map_err(|join| GradeError::TestPatch(join.to_string()))?
    };
    let first_error = match strict {
        Ok(()) => return Ok((files, "git apply")),
        Err(err) => err.to_string(),
    };
    // The fallbacks read the patch from a file outside the checkout and run
    // as the harness, not in the sandbox.
    let file = std::env::temp_dir().join(format!(
        "onebash-test-patch-{}-{}.diff",
        std::process::id(),
        checkout
            .dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("task")
    ));
    std::fs::write(&file, patch).map_err(|err| GradeError::TestPatch(err.to_string()))?;
    let quoted = format!("'{}'", file.display().to_string().replace('\'', "'\\''"));
    let attempts: [(&'static str, String); 2] = [
        (
            "git apply --3way",
            format!("git apply --whitespace=nowarn --3way {quoted}"),
        ),
        (
            "patch --fuzz=5",
            format!("patch --batch --no-backup-if-mismatch --fuzz=5 -p1 -i {quoted}"),
        ),
    ];
    let harness = CommandContext {
        confinement: crate::sandbox::Confinement {
            sandbox: &crate::sandbox::NONE,
            ..context.confinement
        },
        ..context
    };
    let mut worked = None;
    for (method, command) in &attempts {
        restore().await?;
        let spec = CommandSpec {
            command,
            timeout: Duration::from_secs(120),
            context: harness,
        };
        if let Ok(outcome) = run_command(spec).await
            && outcome.exit_code == 0
        {
            worked = Some(*method);
            break;
        }
    }
    let _ = std::fs::remove_file(&file);
    match worked {
        Some(method) => Ok((files, method)),
        None => Err(GradeError::TestPatch(format!(
            "{first_error}; git apply --3way and patch --fuzz=5 failed too"
        ))),
    }
}

pub async fn run_tests(
    task: &TaskSpec,
    checkout: &Checkout,
    context: CommandContext<'_>,
    timeout: Duration,
    junit_path: Option<&Path>,
) -> Result<TestOutcome, GradeError> {
    let (test_patch_files, test_patch_method) = match &task.test_patch {
        Some(patch) => {
            let (files, method) = apply_test_patch(checkout, patch, context).await?;
            (Some(files), Some(method))
        }
        None => (None, None),
    };
    let env = TEST_SETTINGS
        .iter()
        .fold(context.env.clone(), |env, (k, v)| env.with(k, v));
    let spec = CommandSpec {
        command: &task.test_command,
        timeout,
        context: CommandContext {
            env: &env,
            ..context
        },
    };
    let outcome = run_command(spec)
        .await
        .map_err(|err| GradeError::Exec(err.to_string()))?;
    let record = CommandRecord::new(&task.test_command, &outcome);
    // Per-test grading when the task names tests; empty lists name none.
    let lists_tests = |list: &Option<Vec<String>>| list.as_ref().is_some_and(|l| !l.is_empty());
    let per_test = if lists_tests(&task.fail_to_pass) || lists_tests(&task.pass_to_pass) {
        let results = match junit_path {
            Some(rel) => {
                let path = checkout.dir.join(rel);
                let xml = std::fs::read_to_string(&path).map_err(|err| {
                    GradeError::NoTests(format!(
                        " (the JUnit file {} could not be read: {err})",
                        path.display()
                    ))
                })?;
                parse_junit(&xml).map_err(|err| {
                    GradeError::NoTests(format!(
                        " (the JUnit file {} could not be parsed: {err})",
                        path.display()
                    ))
                })?
            }
            None => parse_output(&record.output),
        };
        if results.is_empty() {
            return Err(GradeError::NoTests(String::new()));
        }
        let verdict = grade(
            &results,
            task.fail_to_pass.as_deref().unwrap_or_default(),
            task.pass_to_pass.as_deref().unwrap_or_default(),
        );
        Some((results, verdict))
    } else {
        None
    };
    Ok(TestOutcome {
        test_patch_method,
        passed: match &per_test {
            Some((_, verdict)) => verdict.resolved,
            None => outcome.exit_code == 0 && !outcome.timed_out,
        },
        record,
        test_patch_files,
        per_test,
    })
}
