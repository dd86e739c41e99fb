//! Stage 4: the test phase and the verdict.
//!
//! Restores the files the hidden `test_patch` touches to the base commit,
//! applies it, runs `test_command` through the executor (with TZ=UTC and a
//! fixed PYTHONHASHSEED, so runs repeat) and decides: pass is exit code 0,
//! or, when the task lists `fail_to_pass`/`pass_to_pass`, SWE-bench's
//! per-test rules over the statuses parsed from the output or a JUnit XML
//! file (see grade/testlog.rs). How the tests run and how the verdict is
//! reached is the task's benchmark's answer (`task::Tests`,
//! `task::Verdict`): a recipe's eval script read by its log parser and
//! graded by the package's rules (grade/), or a reward file the tests
//! wrote. It does not know about the agent or the CSV.

use std::path::Path;
use std::time::Duration;

use crate::checkout::GitError;
use crate::env::{Shell, Trust};
use crate::grade::testlog::{
    JunitError, PerTestVerdict, TestResults, grade, parse_junit, parse_output,
};
use crate::grade::{InstanceGrade, Rules, TestsStatus};
use crate::run_folder::trajectory::CommandRecord;
use crate::sys::exec::ExecError;
use crate::task::{RewardError, RewardFile, TaskSpec, Tests, Verdict};

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
    /// The reward the tests wrote, when it decides the verdict.
    pub reward: Option<f64>,
    /// What the output decided (None when a reward did).
    pub decision: Option<Decision>,
}

/// The tests could not run: no verdict.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GradeError {
    #[error("failed to apply the test_patch: {0}")]
    TestPatch(#[source] GitError),
    /// The patch could not be written for the fallbacks.
    #[error("failed to apply the test_patch: failed to write {path}: {source}")]
    TestPatchFile {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// `git apply` failed, and each fallback after it.
    #[error("failed to apply the test_patch: {0}; git apply --3way and patch --fuzz=5 failed too")]
    TestPatchFallbacks(#[source] GitError),
    #[error("failed to run the test command: {0}")]
    Exec(#[source] ExecError),
    /// The environment could not be readied for the tests (a container
    /// environment's fresh container).
    #[error("failed to prepare the tests' environment: {0}")]
    Environment(#[source] crate::env::EnvError),
    /// The task lists its tests but none could be read from the run.
    #[error("no test result could be read from the test output; {NO_TESTS_HINT}")]
    NoTests,
    /// The JUnit file of `--junit-path` could not be read.
    #[error(
        "no test result could be read from the test output (the JUnit file {path} could not be read: {source}); {NO_TESTS_HINT}"
    )]
    JunitUnread {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The JUnit file of `--junit-path` could not be parsed.
    #[error(
        "no test result could be read from the test output (the JUnit file {path} could not be parsed: {source}); {NO_TESTS_HINT}"
    )]
    JunitUnparsed {
        path: String,
        #[source]
        source: JunitError,
    },
    /// The task is decided by the reward its tests wrote, not its log:
    /// the benchmark's words.
    #[error("{0}")]
    ByReward(&'static str),
    /// The command that reads the reward could not run.
    #[error("failed to read the verifier's reward: {0}; {REWARD_HINT}")]
    RewardExec(#[source] ExecError),
    /// The verifier ran but its reward cannot be read.
    #[error("failed to read the verifier's reward: {0}; {REWARD_HINT}")]
    Reward(#[source] RewardError),
}

/// What to do when no test result could be read.
const NO_TESTS_HINT: &str = "hint: run pytest with -rA, unittest or Django with -v, or write JUnit XML and pass --junit-path";

/// What a verifier must write.
const REWARD_HINT: &str = "hint: test.sh must write a number to /logs/verifier/reward.txt or {\"reward\": N} to reward.json";

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
            .map_err(GradeError::TestPatch)
    };
    let files = restore().await?;
    let first_error = match workspace.apply(patch).await {
        Ok(()) => return Ok((files, "git apply")),
        Err(err) => err,
    };
    // The fallbacks read the patch from a file in the working copy's .git
    // (the agent is done; the diff was saved), by a relative path that
    // holds wherever the workspace runs its commands (the host, a
    // container), and run as the harness, not in the sandbox.
    let file = Path::new(".git").join(FALLBACK_PATCH);
    workspace
        .write(&file, patch.as_bytes().to_vec())
        .await
        .map_err(|source| GradeError::TestPatchFile {
            path: file.display().to_string(),
            source,
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
        None => Err(GradeError::TestPatchFallbacks(first_error)),
    }
}

/// Puts the hidden tests in, runs `test_command` through `shell` (the
/// agent's sandbox, no network) and decides by `rules` ([`decide`]), or
/// by the reward the tests wrote when the task's benchmark says so.
pub(crate) async fn run_tests(
    task: &TaskSpec,
    rules: Rules,
    shell: Shell<'_>,
    timeout: Duration,
    junit_path: Option<&Path>,
) -> Result<TestOutcome, GradeError> {
    // An eval script that applies the test patch itself must see the
    // tree without it (see `Tests::EvalScript`).
    let own_script = matches!(task.benchmark.tests(), Tests::EvalScript);
    bare_reset(task, rules, shell).await?;
    let (test_patch_files, test_patch_method) = match &task.test_patch {
        Some(patch) if !own_script => {
            let (files, method) = apply_test_patch(shell, patch).await?;
            (Some(files), Some(method))
        }
        _ => (None, None),
    };
    let env = TEST_SETTINGS
        .iter()
        .fold(shell.env.clone(), |env, (k, v)| env.with(k, v));
    let command = test_command(task);
    let outcome = Shell { env: &env, ..shell }
        .run(&command, timeout)
        .await
        .map_err(GradeError::Exec)?;
    let record = CommandRecord::new(&command, &outcome);
    if let Verdict::Reward(file) = task.benchmark.verdict() {
        let reward = read_reward(file, Shell { env: &env, ..shell }, timeout).await?;
        return Ok(TestOutcome {
            passed: reward == 1.0,
            record,
            test_patch_files: None,
            test_patch_method: None,
            reward: Some(reward),
            decision: None,
        });
    }
    // A JUnit file is read from the workspace now; the output is read by
    // `decide` itself.
    let statuses = match junit_path {
        Some(rel) if reads_junit(task) => Some(read_junit(shell, rel).await?),
        _ => None,
    };
    let decision = decide(task, rules, &record, statuses)?;
    Ok(TestOutcome {
        test_patch_method,
        passed: decision.passed,
        record,
        test_patch_files,
        reward: None,
        decision: Some(decision),
    })
}

/// Under 4.1's rules, a recipe's bare reset ([`SwebenchEval::bare_reset`]:
/// 4.1.0's `git checkout BASE` with no path, before the test patch), run
/// as the harness. Its exit status is not looked at, as the package's
/// script does not (it has no `set -e`): a checkout that the agent's
/// change blocks leaves HEAD where it was there too.
///
/// [`SwebenchEval::bare_reset`]: crate::grade::swebench::SwebenchEval
async fn bare_reset(task: &TaskSpec, rules: Rules, shell: Shell<'_>) -> Result<(), GradeError> {
    let Verdict::Recipe(eval) = task.benchmark.verdict() else {
        return Ok(());
    };
    let Some(reset) = eval.bare_reset_under(rules) else {
        return Ok(());
    };
    let harness = Shell {
        trust: Trust::Harness,
        ..shell
    };
    harness
        .run(reset, Duration::from_secs(120))
        .await
        .map(|_| ())
        .map_err(GradeError::Exec)
}

/// The reward the tests wrote, whatever their exit code: 1 passes,
/// anything else fails (fractions are kept).
async fn read_reward(
    file: &RewardFile,
    shell: Shell<'_>,
    timeout: Duration,
) -> Result<f64, GradeError> {
    let read = shell
        .run(&file.script, timeout)
        .await
        .map_err(GradeError::RewardExec)?;
    (file.read)(&read.output.to_text()).map_err(GradeError::Reward)
}

/// The command the test stage runs: the task's, and for a task graded by
/// a recipe its eval script made to record the test command's exit status
/// after the end marker, as 5.0's `make_test_spec` does
/// (`record_test_exit_code`). Under either rule set: 4.1's grading never
/// reads the line (it is past the end marker, and no parser takes a
/// `>>>>>` line for a test), and with it a run graded by 4.1 can be
/// regraded by 5.0's exit-code rule from its log.
pub(crate) fn test_command(task: &TaskSpec) -> String {
    if graded_by_recipe(task) {
        crate::grade::record_test_exit_code(&task.test_command)
    } else {
        task.test_command.clone()
    }
}

/// What the tests' output decided, by which rules.
#[derive(Debug, Clone)]
pub(crate) struct Decision {
    pub passed: bool,
    pub rules: Rules,
    /// Per-test statuses and verdict, when the task lists its tests or is
    /// a SWE-bench instance.
    pub per_test: Option<(TestResults, PerTestVerdict)>,
    /// SWE-bench's per-instance report pieces: whether its log counts as
    /// "patch_successfully_applied", and the four test lists.
    pub report: InstanceGrade,
}

impl Decision {
    /// tests.json's JSON (`{statuses, verdict}`), when the decision has
    /// per-test statuses; the trajectory's `test` event holds it too.
    pub(crate) fn tests_json(&self) -> Option<serde_json::Value> {
        self.per_test
            .as_ref()
            .map(|(results, verdict)| serde_json::json!({"statuses": results, "verdict": verdict}))
    }
}

/// Whether the task names tests to grade one by one; empty lists name
/// none.
fn lists_tests(task: &TaskSpec) -> bool {
    let named = |list: &Option<Vec<String>>| list.as_ref().is_some_and(|l| !l.is_empty());
    named(&task.fail_to_pass) || named(&task.pass_to_pass)
}

/// Whether a recipe (its eval script and log parser) runs and grades the
/// tests.
pub(crate) fn graded_by_recipe(task: &TaskSpec) -> bool {
    matches!(task.benchmark.verdict(), Verdict::Recipe(_))
}

/// Whether a run with `--junit-path` grades the task from the JUnit file
/// (saved in tests.json): a task that lists its tests and is not graded by
/// a recipe. The test stage and `regrade` ask the same question.
pub(crate) fn reads_junit(task: &TaskSpec) -> bool {
    !graded_by_recipe(task) && lists_tests(task)
}

/// What the tests' output decides, running nothing: the test stage and
/// `regrade` call it. `statuses` are per-test statuses already read (a
/// JUnit file, tests.json's saved statuses); None reads them from
/// `record.output`. A task graded by a recipe is always read from the output
/// (its rules need the whole log: markers, harness lines, the recorded
/// exit code), `statuses` unused; a timed-out run of one grades as an
/// empty output, as in the package. A task that lists its tests is graded
/// by onebash's own per-test rules (testlog.rs, under `rules` where they
/// apply) and its report lists are that verdict's; any other by its exit
/// code, with empty lists. A task decided by a reward, which only the
/// workspace holds, is refused here.
pub(crate) fn decide(
    task: &TaskSpec,
    rules: Rules,
    record: &CommandRecord,
    statuses: Option<TestResults>,
) -> Result<Decision, GradeError> {
    let fail_to_pass = task.fail_to_pass.as_deref().unwrap_or_default();
    let pass_to_pass = task.pass_to_pass.as_deref().unwrap_or_default();
    let eval = match task.benchmark.verdict() {
        Verdict::Reward(file) => return Err(GradeError::ByReward(file.not_by_log)),
        Verdict::Recipe(eval) => Some(eval),
        Verdict::Tests => None,
    };
    if let Some(eval) = eval {
        let output = if record.timed_out {
            ""
        } else {
            record.output.as_str()
        };
        let graded = crate::grade::grade_output(
            rules,
            eval.parser,
            eval.fail_only,
            output,
            fail_to_pass,
            pass_to_pass,
        );
        return Ok(Decision {
            passed: graded.verdict.resolved,
            rules,
            report: graded.instance_grade(),
            per_test: Some((crate::grade::to_results(&graded.statuses), graded.verdict)),
        });
    }
    if !lists_tests(task) {
        let passed = record.exit_code == 0 && !record.timed_out;
        return Ok(Decision {
            passed,
            rules,
            per_test: None,
            report: InstanceGrade {
                applied: true,
                resolved: passed,
                tests_status: TestsStatus::default(),
            },
        });
    }
    let results = statuses.unwrap_or_else(|| parse_output(&record.output));
    if results.is_empty() {
        return Err(GradeError::NoTests);
    }
    let verdict = grade(
        rules,
        &results,
        fail_to_pass,
        pass_to_pass,
        Some(record.exit_code),
    );
    Ok(Decision {
        passed: verdict.resolved,
        rules,
        report: InstanceGrade {
            applied: verdict.invalid.is_none(),
            resolved: verdict.resolved,
            tests_status: verdict.tests_status(),
        },
        per_test: Some((results, verdict)),
    })
}

/// The per-test results in the JUnit file at `rel` in the working copy.
async fn read_junit(shell: Shell<'_>, rel: &Path) -> Result<TestResults, GradeError> {
    let shown = || format!("{}/{}", shell.workspace.location(), rel.display());
    let bytes = shell
        .workspace
        .read(rel)
        .await
        .map_err(|source| GradeError::JunitUnread {
            path: shown(),
            source,
        })?;
    parse_junit(&String::from_utf8_lossy(&bytes)).map_err(|source| GradeError::JunitUnparsed {
        path: shown(),
        source,
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
                    notice: None,
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
            Box::pin(async {
                Err(GitError::from(git2::Error::from_str(
                    "does not apply strictly",
                )))
            })
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
            Rules::Swebench41,
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
