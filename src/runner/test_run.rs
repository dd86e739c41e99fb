//! Stage 4: the test phase and the verdict.
//!
//! Restores the files the hidden `test_patch` touches to the base commit,
//! applies it, runs `test_command` through the executor (with TZ=UTC and a
//! fixed PYTHONHASHSEED, so runs repeat) and decides: pass is exit code 0,
//! or, when the task lists `fail_to_pass`/`pass_to_pass`, SWE-bench's
//! per-test rules over the statuses parsed from the output or a JUnit XML
//! file (see grade/testlog.rs). A SWE-bench instance with an eval spec runs
//! SWE-bench's eval script and is read by its repo's parser and graded by
//! the package's rules (grade/swebench/: spec.rs, log.rs, grading.rs). It does not
//! know about the agent or the CSV.

use std::path::Path;
use std::time::Duration;

use crate::env::{Shell, Trust};
use crate::grade::swebench;
use crate::grade::testlog::{PerTestVerdict, TestResults, grade, parse_junit, parse_output};
use crate::run_folder::trajectory::CommandRecord;
use crate::task::TaskSpec;

/// Settings every test command runs with, so that a verdict repeats.
pub(crate) const TEST_SETTINGS: &[(&str, &str)] = &[("TZ", "UTC"), ("PYTHONHASHSEED", "0")];

/// The tests ran; this is what they said.
#[derive(Debug)]
pub(crate) struct TestOutcome {
    pub passed: bool,
    pub record: CommandRecord,
    /// Files the test patch touched, when there was one.
    pub test_patch_files: Option<Vec<String>>,
    /// How the test patch went in: `git apply`, `git apply --3way` or
    /// `patch --fuzz=5`, SWE-bench's fallbacks in order.
    pub test_patch_method: Option<&'static str>,
    /// Per-test statuses and verdict, when the task lists its tests.
    pub per_test: Option<(TestResults, PerTestVerdict)>,
    /// A Harbor task's reward, which decides its verdict.
    pub reward: Option<f64>,
}

/// The tests could not run: no verdict.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GradeError {
    #[error("failed to apply the test_patch: {0}")]
    TestPatch(String),
    #[error("failed to run the test command: {0}")]
    Exec(String),
    /// The environment could not be readied for the tests (a container
    /// environment's fresh container).
    #[error("failed to prepare the tests' environment: {0}")]
    Environment(#[source] crate::env::EnvError),
    /// The task lists its tests but none could be read from the run.
    #[error(
        "no test result could be read from the test output{0}; hint: run pytest with -rA, unittest or Django with -v, or write JUnit XML and pass --junit-path"
    )]
    NoTests(String),
    /// A Harbor task's verifier ran but its reward cannot be read.
    #[error(
        "failed to read the verifier's reward: {0}; hint: test.sh must write a number to /logs/verifier/reward.txt or {{\"reward\": N}} to reward.json"
    )]
    Reward(String),
}

/// The test patch, for the fallbacks, in the working copy's `.git`.
const FALLBACK_PATCH: &str = "onebash-test-patch.diff";

/// The test timeout of a task: its own `test_timeout_s`, else the run's.
pub(crate) fn test_timeout(task: &TaskSpec, default: Duration) -> Duration {
    task.test_timeout_s
        .map(Duration::from_secs_f64)
        .unwrap_or(default)
}

/// Restores the files the test patch touches, then applies it with the
/// fallbacks SWE-bench uses: `git apply` (libgit2, strict), `git apply
/// --3way`, `patch --fuzz=5`, each on freshly restored files. Returns the
/// files and the attempt that worked.
async fn apply_test_patch(
    shell: Shell<'_>,
    patch: &str,
) -> Result<(Vec<String>, &'static str), GradeError> {
    let workspace = shell.workspace;
    let restore = || async {
        workspace
            .restore(patch)
            .await
            .map_err(|err| GradeError::TestPatch(err.to_string()))
    };
    let files = restore().await?;
    let first_error = match workspace.apply(patch).await {
        Ok(()) => return Ok((files, "git apply")),
        Err(err) => err.to_string(),
    };
    // The fallbacks read the patch from a file in the working copy's .git
    // (the agent is done; the diff was saved), by a relative path that
    // holds wherever the workspace runs its commands (the host, a
    // container), and run as the harness, not in the sandbox.
    let file = Path::new(".git").join(FALLBACK_PATCH);
    workspace
        .write(&file, patch.as_bytes().to_vec())
        .await
        .map_err(|err| {
            GradeError::TestPatch(format!("failed to write {}: {err}", file.display()))
        })?;
    let quoted = format!(".git/{FALLBACK_PATCH}");
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
    let harness = Shell {
        trust: Trust::Harness,
        ..shell
    };
    let mut worked = None;
    for (method, command) in &attempts {
        restore().await?;
        if let Ok(outcome) = harness.run(command, Duration::from_secs(120)).await
            && outcome.exit_code == 0
        {
            worked = Some(*method);
            break;
        }
    }
    let _ = harness
        .run(&format!("rm -f {quoted}"), Duration::from_secs(120))
        .await;
    match worked {
        Some(method) => Ok((files, method)),
        None => Err(GradeError::TestPatch(format!(
            "{first_error}; git apply --3way and patch --fuzz=5 failed too"
        ))),
    }
}

/// Puts the hidden tests in, runs `test_command` through `shell` (the
/// agent's sandbox, no network) and decides.
pub(crate) async fn run_tests(
    task: &TaskSpec,
    shell: Shell<'_>,
    timeout: Duration,
    junit_path: Option<&Path>,
) -> Result<TestOutcome, GradeError> {
    let (test_patch_files, test_patch_method) = match &task.test_patch {
        Some(patch) => {
            let (files, method) = apply_test_patch(shell, patch).await?;
            (Some(files), Some(method))
        }
        None => (None, None),
    };
    let env = TEST_SETTINGS
        .iter()
        .fold(shell.env.clone(), |env, (k, v)| env.with(k, v));
    let outcome = Shell { env: &env, ..shell }
        .run(&task.test_command, timeout)
        .await
        .map_err(|err| GradeError::Exec(err.to_string()))?;
    let record = CommandRecord::new(&task.test_command, &outcome);
    if task.harbor.is_some() {
        // Harbor's verdict is the reward test.sh wrote, whatever its exit
        // code: 1 passes, anything else fails (fractions are kept).
        let read = Shell { env: &env, ..shell }
            .run(&crate::task::harbor::reward_script(), timeout)
            .await
            .map_err(|err| GradeError::Reward(err.to_string()))?;
        let reward = crate::task::harbor::read_reward(&read.output.to_text())
            .map_err(|err| GradeError::Reward(err.to_string()))?;
        return Ok(TestOutcome {
            passed: reward == 1.0,
            record,
            test_patch_files: None,
            test_patch_method: None,
            per_test: None,
            reward: Some(reward),
        });
    }
    if let Some(Ok(eval)) = &task.swebench {
        // SWE-bench's own reading: its parser between the markers, its
        // rules; a run that timed out or lost a marker gives no statuses
        // (unresolved), as in the package.
        let output = if outcome.timed_out {
            ""
        } else {
            record.output.as_str()
        };
        let graded = swebench::grade_output(
            eval.parser,
            eval.fail_only,
            output,
            task.fail_to_pass.as_deref().unwrap_or_default(),
            task.pass_to_pass.as_deref().unwrap_or_default(),
        );
        let (map, verdict) = (graded.statuses, graded.verdict);
        return Ok(TestOutcome {
            test_patch_method,
            passed: verdict.resolved,
            record,
            test_patch_files,
            per_test: Some((swebench::to_results(&map), verdict)),
            reward: None,
        });
    }
    // Per-test grading when the task names tests; empty lists name none.
    let lists_tests = |list: &Option<Vec<String>>| list.as_ref().is_some_and(|l| !l.is_empty());
    let per_test = if lists_tests(&task.fail_to_pass) || lists_tests(&task.pass_to_pass) {
        let results = test_results(shell, junit_path, &record).await?;
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
        reward: None,
    })
}

/// The per-test results of a run: from the JUnit file at `junit_path` in
/// the working copy, else read from the test command's output.
async fn test_results(
    shell: Shell<'_>,
    junit_path: Option<&Path>,
    record: &CommandRecord,
) -> Result<TestResults, GradeError> {
    let Some(rel) = junit_path else {
        return Ok(parse_output(&record.output));
    };
    let shown = || format!("{}/{}", shell.workspace.location(), rel.display());
    let bytes = shell.workspace.read(rel).await.map_err(|err| {
        GradeError::NoTests(format!(
            " (the JUnit file {} could not be read: {err})",
            shown()
        ))
    })?;
    parse_junit(&String::from_utf8_lossy(&bytes)).map_err(|err| {
        GradeError::NoTests(format!(
            " (the JUnit file {} could not be parsed: {err})",
            shown()
        ))
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::checkout::GitError;
    use crate::env::{BoxFuture, Command, Workspace};
    use crate::sys::exec::{CapturedOutput, CommandEnv, CommandOutcome, ExecError};

    /// A workspace that is not the host's: it records what it is asked and
    /// answers from memory, as a container's would from inside the image.
    #[derive(Default)]
    struct Recorded {
        ran: Mutex<Vec<(String, Trust, Option<String>)>>,
        restored: Mutex<u32>,
    }

    impl Workspace for Recorded {
        fn run<'a>(
            &'a self,
            command: Command<'a>,
        ) -> BoxFuture<'a, Result<CommandOutcome, ExecError>> {
            let tz = command
                .env
                .vars()
                .iter()
                .find(|(k, _)| k == "TZ")
                .map(|(_, v)| v.clone());
            self.ran
                .lock()
                .expect("lock")
                .push((command.script.to_owned(), command.trust, tz));
            Box::pin(async {
                Ok(CommandOutcome {
                    exit_code: 0,
                    signal: None,
                    timed_out: false,
                    duration: Duration::from_millis(1),
                    output: CapturedOutput::new(1024, 1024),
                })
            })
        }

        fn diff(&self) -> BoxFuture<'_, Result<String, GitError>> {
            Box::pin(async { Ok(String::new()) })
        }

        fn restore(&self, _patch: &str) -> BoxFuture<'_, Result<Vec<String>, GitError>> {
            *self.restored.lock().expect("lock") += 1;
            Box::pin(async { Ok(vec!["tests/test_calc.py".to_owned()]) })
        }

        fn apply(&self, _patch: &str) -> BoxFuture<'_, Result<(), GitError>> {
            Box::pin(async { Err(GitError("does not apply strictly".to_owned())) })
        }

        fn read(&self, relative: &Path) -> BoxFuture<'_, std::io::Result<Vec<u8>>> {
            let found = relative == Path::new("report.xml");
            Box::pin(async move {
                if found {
                    Ok(
                        br#"<testsuite><testcase classname="calc" name="test_mean"/></testsuite>"#
                            .to_vec(),
                    )
                } else {
                    Err(std::io::Error::from(std::io::ErrorKind::NotFound))
                }
            })
        }

        fn write(&self, _relative: &Path, _bytes: Vec<u8>) -> BoxFuture<'_, std::io::Result<()>> {
            Box::pin(async { Ok(()) })
        }

        fn location(&self) -> String {
            "recorded:/testbed".to_owned()
        }

        fn leave(self: Box<Self>, _keep: bool) -> BoxFuture<'static, std::io::Result<()>> {
            Box::pin(async { Ok(()) })
        }
    }

    #[tokio::test]
    async fn grading_goes_through_the_workspace_alone() {
        let line = serde_json::json!({
            "id": "t", "repo": "/r", "base_commit": "abc1234", "problem_statement": "p",
            "test_command": "pytest --junitxml=report.xml",
            "test_patch": "diff --git a/tests/test_calc.py b/tests/test_calc.py\n",
            "fail_to_pass": ["calc::test_mean"],
        });
        let tasks =
            crate::task::parse_tasks(&line.to_string(), "t.jsonl", Path::new("/")).expect("a task");
        let workspace = Recorded::default();
        let env = CommandEnv::for_task("t-grade");
        let shell = Shell {
            workspace: &workspace,
            env: &env,
            trust: Trust::Agent { network: false },
        };
        let outcome = run_tests(
            &tasks[0],
            shell,
            Duration::from_secs(60),
            Some(Path::new("report.xml")),
        )
        .await
        .expect("graded");
        assert!(outcome.passed);
        assert_eq!(outcome.test_patch_method, Some("git apply --3way"));
        assert_eq!(
            outcome.test_patch_files.as_deref(),
            Some(&["tests/test_calc.py".to_owned()][..])
        );
        // Restored before the strict attempt and again before the fallback.
        assert_eq!(*workspace.restored.lock().expect("lock"), 2);
        let ran = workspace.ran.lock().expect("lock").clone();
        assert_eq!(ran.len(), 3, "{ran:?}");
        // The patch fallback as the harness, reading the patch by a path
        // relative to the working copy (it holds in a container too), which
        // it then removes; the tests confined, offline, with the settings
        // that make them repeat.
        assert_eq!(
            ran[0].0,
            "git apply --whitespace=nowarn --3way .git/onebash-test-patch.diff"
        );
        assert_eq!(ran[0].1, Trust::Harness);
        assert_eq!(ran[1].0, "rm -f .git/onebash-test-patch.diff");
        assert_eq!(ran[2].0, "pytest --junitxml=report.xml");
        assert_eq!(ran[2].1, Trust::Agent { network: false });
        assert_eq!(ran[2].2.as_deref(), Some("UTC"));
    }
}
