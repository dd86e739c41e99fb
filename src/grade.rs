//! Stage 4: the test phase and the verdict.
//!
//! Restores the files the hidden `test_patch` touches to the base commit,
//! applies it, runs `test_command` through the executor and decides: pass is
//! exit code 0. It does not know about the agent or the CSV.

use std::time::Duration;

use crate::checkout::Checkout;
use crate::exec::{CommandContext, CommandSpec, run_command};
use crate::task::TaskSpec;
use crate::trajectory::CommandRecord;

/// The tests ran; this is what they said.
#[derive(Debug)]
pub struct TestOutcome {
    pub passed: bool,
    pub record: CommandRecord,
    /// Files the test patch touched, when there was one.
    pub test_patch_files: Option<Vec<String>>,
}

/// The tests could not run: no verdict.
#[derive(Debug, thiserror::Error)]
pub enum GradeError {
    #[error("failed to apply the test_patch: {0}")]
    TestPatch(String),
    #[error("failed to run the test command: {0}")]
    Exec(String),
}

/// The test timeout of a task: its own `test_timeout_s`, else the run's.
pub fn test_timeout(task: &TaskSpec, default: Duration) -> Duration {
    task.test_timeout_s
        .map(Duration::from_secs_f64)
        .unwrap_or(default)
}

pub async fn run_tests(
    task: &TaskSpec,
    checkout: &Checkout,
    context: CommandContext<'_>,
    timeout: Duration,
) -> Result<TestOutcome, GradeError> {
    let test_patch_files = match &task.test_patch {
        Some(patch) => {
            let checkout = checkout.clone();
            let patch = patch.clone();
            let applied = tokio::task::spawn_blocking(move || checkout.restore_and_apply(&patch))
                .await
                .map_err(|join| GradeError::TestPatch(join.to_string()))?
                .map_err(|err| GradeError::TestPatch(err.to_string()))?;
            Some(applied)
        }
        None => None,
    };
    let spec = CommandSpec {
        command: &task.test_command,
        timeout,
        context,
    };
    let outcome = run_command(spec)
        .await
        .map_err(|err| GradeError::Exec(err.to_string()))?;
    Ok(TestOutcome {
        passed: outcome.exit_code == 0 && !outcome.timed_out,
        record: CommandRecord::new(&task.test_command, &outcome),
        test_patch_files,
    })
}
