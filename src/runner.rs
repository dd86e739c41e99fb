//! Stages 1 to 5 for every (task, epoch), several at once.
//!
//! [`run_tasks`] schedules the work (`-j` at a time, epoch by epoch, in the
//! order of the task file) and stops starting new work on Ctrl-C;
//! [`run_task`] is the one function that calls the stages in order:
//! checkout, setup, agent, diff, tests, row. The runner never prints: it
//! writes each task's trajectory and files and emits [`RunEvent`]s, whose
//! consumers show progress and append rows to results.csv.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::agent::run::AgentContext;
use crate::agent::{AgentLimits, AgentOutcome, ModelClient, run_agent};
use crate::checkout::{Checkout, RepoCache};
use crate::config::RunConfig;
use crate::events::{Cancel, EventSink, Phase, RunEvent};
use crate::exec::{CommandEnv, CommandSpec, kill_marked_processes, run_command};
use crate::grade::{run_tests, test_timeout};
use crate::results::{ExitReason, ResultRow, RunFolder, Status, one_line, round_seconds};
use crate::task::TaskSpec;
use crate::trajectory::{CommandRecord, Event, FORMAT_VERSION, PromptInfo, TrajectoryWriter};

/// What every task shares.
pub struct RunContext {
    pub config: RunConfig,
    pub client: ModelClient,
    pub cache: RepoCache,
    pub folder: RunFolder,
    pub events: EventSink,
    pub cancel: Cancel,
}

/// Runs every selected (task, epoch) and emits a `TaskFinished` for each
/// that started. Returns when all started tasks have ended.
pub async fn run_tasks(ctx: Arc<RunContext>) {
    let work: Vec<(usize, u32)> = (1..=ctx.config.runs)
        .flat_map(|epoch| (0..ctx.config.tasks.len()).map(move |i| (i, epoch)))
        .collect();
    ctx.events.emit(RunEvent::RunStarted { total: work.len() });
    let slots = Arc::new(Semaphore::new(ctx.config.jobs));
    let mut running = JoinSet::new();
    let mut started = std::collections::HashMap::new();
    for (index, epoch) in work {
        let permit = tokio::select! {
            permit = Arc::clone(&slots).acquire_owned() => permit,
            () = ctx.cancel.cancelled() => break,
        };
        // The semaphore is never closed, so acquiring only fails if it were.
        let Ok(permit) = permit else { break };
        if ctx.cancel.is_cancelled() {
            break;
        }
        let task_ctx = Arc::clone(&ctx);
        let handle = running.spawn(async move {
            let row = run_task(&task_ctx, &task_ctx.config.tasks[index], epoch).await;
            drop(permit);
            task_ctx
                .events
                .emit(RunEvent::TaskFinished { row: Box::new(row) });
        });
        started.insert(handle.id(), (index, epoch));
    }
    while let Some(joined) = running.join_next_with_id().await {
        // A task that panicked still gets its row: the run's numbers must
        // account for every task that started.
        if let Err(err) = joined
            && let Some(&(index, epoch)) = started.get(&err.id())
        {
            let task = &ctx.config.tasks[index];
            let mut row = error_row(&ctx, task, epoch, ExitReason::ApiError, Duration::ZERO);
            row.error = one_line(&format!("internal error: the task's worker failed: {err}"));
            ctx.events
                .emit(RunEvent::TaskFinished { row: Box::new(row) });
        }
    }
}

/// A mark unique to one (task, epoch) of one process, put in the
/// environment of every command it runs.
fn task_mark(task: &TaskSpec, epoch: u32) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        task.id,
        epoch
    )
}

/// The pipeline of one (task, epoch). Never fails: what goes wrong becomes
/// the row's status and error.
pub async fn run_task(ctx: &RunContext, task: &TaskSpec, epoch: u32) -> ResultRow {
    let wall = Instant::now();
    ctx.events.emit(RunEvent::TaskStarted {
        task: task.id.clone(),
        epoch,
    });
    let dir = ctx.folder.task_dir(&task.id, epoch);
    let trajectory = std::fs::create_dir_all(&dir)
        .and_then(|()| TrajectoryWriter::create(&dir.join("trajectory.jsonl")));
    let mut trajectory = match trajectory {
        Ok(writer) => writer,
        Err(err) => {
            let mut row = error_row(ctx, task, epoch, ExitReason::CheckoutError, wall.elapsed());
            row.error = one_line(&format!(
                "failed to create the task folder {}: {err}",
                dir.display()
            ));
            return row;
        }
    };
    trajectory.write(&header(ctx, task, epoch));

    let mark = task_mark(task, epoch);
    let env = CommandEnv::for_task(&mark);
    let mut row = run_stages(ctx, task, epoch, &dir, &env, &mut trajectory, wall).await;
    // Whatever the task's commands left running dies with the task.
    let _ = tokio::task::spawn_blocking(move || kill_marked_processes(&mark)).await;

    if let Some(err) = trajectory.error() {
        row.error = one_line(&if row.error.is_empty() {
            err.to_owned()
        } else {
            format!("{}; {err}", row.error)
        });
    }
    row.wall_seconds = round_seconds(wall.elapsed().as_secs_f64());
    trajectory.write(&Event::End {
        status: row.status,
        passed: row.passed,
        exit_reason: row.exit_reason,
        wall_s: row.wall_seconds,
        error: (!row.error.is_empty()).then(|| row.error.clone()),
    });
    row
}

async fn run_stages(
    ctx: &RunContext,
    task: &TaskSpec,
    epoch: u32,
    dir: &Path,
    env: &CommandEnv,
    trajectory: &mut TrajectoryWriter,
    wall: Instant,
) -> ResultRow {
    let config = &ctx.config;
    ctx.events.phase(&task.id, epoch, Phase::Checkout);
    let checkout_started = Instant::now();
    let workdir = ctx.folder.workdir(&task.id, epoch);
    let checkout = tokio::select! {
        checkout = ctx.cache.checkout(&task.repo_location, &task.base_commit, &workdir) => checkout,
        () = ctx.cancel.cancelled() => {
            let _ = std::fs::remove_dir_all(&workdir);
            return interrupted_row(ctx, task, epoch, wall);
        }
    };
    let checkout = match checkout {
        Ok(checkout) => checkout,
        Err(err) => {
            let _ = std::fs::remove_dir_all(&workdir);
            let mut row = error_row(ctx, task, epoch, ExitReason::CheckoutError, wall.elapsed());
            row.error = one_line(&err.to_string());
            return row;
        }
    };
    trajectory.write(&Event::Checkout {
        commit: checkout.commit.clone(),
        duration_s: checkout_started.elapsed().as_secs_f64(),
        fetched: checkout.fetched,
        warning: checkout.warning.clone(),
    });
    if let Some(warning) = &checkout.warning {
        ctx.events
            .emit(RunEvent::Warning(format!("{}: {warning}", task.id)));
    }

    let row = after_checkout(ctx, task, epoch, dir, env, trajectory, wall, &checkout).await;
    if !config.keep_workdirs
        && let Err(err) = checkout.remove()
    {
        ctx.events.emit(RunEvent::Warning(format!(
            "failed to delete the working copy {}: {err}",
            checkout.dir.display()
        )));
    }
    row
}

#[allow(clippy::too_many_arguments)]
async fn after_checkout(
    ctx: &RunContext,
    task: &TaskSpec,
    epoch: u32,
    dir: &Path,
    env: &CommandEnv,
    trajectory: &mut TrajectoryWriter,
    wall: Instant,
    checkout: &Checkout,
) -> ResultRow {
    let config = &ctx.config;
    let test_timeout = test_timeout(task, config.test_timeout);
    if let Some(setup) = &task.setup_command {
        ctx.events.phase(&task.id, epoch, Phase::Setup);
        let spec = CommandSpec {
            command: setup,
            cwd: &checkout.dir,
            timeout: test_timeout,
            env,
        };
        let failure = tokio::select! {
            outcome = run_command(spec) => match outcome {
                Ok(outcome) => {
                    let record = CommandRecord::new(setup, &outcome);
                    trajectory.write(&Event::Setup(record.clone()));
                    (record.exit_code != 0 || record.timed_out).then(|| setup_failure(&record))
                }
                Err(err) => Some(err.to_string()),
            },
            () = ctx.cancel.cancelled() => return interrupted_row(ctx, task, epoch, wall),
        };
        if let Some(message) = failure {
            let mut row = error_row(ctx, task, epoch, ExitReason::SetupError, wall.elapsed());
            row.error = one_line(&format!("setup_command failed: {message}"));
            return row;
        }
    }

    // The prompt rendered once at start-up; it cannot fail here unless the
    // task changed, which it cannot.
    let prompt = match config.prompt.render(task, config.max_turns) {
        Ok(prompt) => prompt,
        Err(err) => {
            let mut row = error_row(ctx, task, epoch, ExitReason::ApiError, wall.elapsed());
            row.error = one_line(&err.to_string());
            return row;
        }
    };
    let agent_ctx = AgentContext {
        client: &ctx.client,
        task,
        epoch,
        prompt: &prompt,
        workdir: &checkout.dir,
        env,
        limits: AgentLimits {
            max_turns: config.max_turns,
            max_tokens: config.max_tokens,
            command_timeout: config.command_timeout,
            task_timeout: config.task_timeout,
        },
        events: &ctx.events,
        cancel: &ctx.cancel,
    };
    let agent = run_agent(&agent_ctx, trajectory).await;
    let mut row = agent_row(ctx, task, epoch, &agent);

    // The agent's change, saved before the tests touch the working copy.
    let diff = {
        let checkout = checkout.clone();
        tokio::task::spawn_blocking(move || checkout.diff()).await
    };
    match diff {
        Ok(Ok(diff)) => {
            let path = dir.join("patch.diff");
            match std::fs::write(&path, &diff) {
                Ok(()) => trajectory.write(&Event::Diff {
                    path: "patch.diff".to_owned(),
                    bytes: diff.len(),
                }),
                Err(err) => row.error = one_line(&format!("failed to save the diff: {err}")),
            }
        }
        Ok(Err(err)) => row.error = one_line(&format!("failed to compute the agent's diff: {err}")),
        Err(err) => row.error = one_line(&format!("failed to compute the agent's diff: {err}")),
    }

    if !agent.exit_reason.is_gradable() || ctx.cancel.is_cancelled() {
        if ctx.cancel.is_cancelled() {
            row.exit_reason = ExitReason::Interrupted;
            row.error = "interrupted by the user".to_owned();
        }
        row.status = Status::Error;
        return row;
    }

    // Processes the agent left behind must not interfere with the tests.
    let mark = env
        .vars()
        .iter()
        .find(|(k, _)| k == crate::exec::TASK_MARK_VAR)
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let _ = tokio::task::spawn_blocking(move || kill_marked_processes(&mark)).await;

    ctx.events.phase(&task.id, epoch, Phase::Test);
    let test_started = Instant::now();
    let tested = tokio::select! {
        tested = run_tests(task, checkout, env, test_timeout) => tested,
        () = ctx.cancel.cancelled() => {
            row.status = Status::Error;
            row.exit_reason = ExitReason::Interrupted;
            row.error = "interrupted by the user during the tests".to_owned();
            return row;
        }
    };
    row.test_seconds = Some(round_seconds(test_started.elapsed().as_secs_f64()));
    match tested {
        Ok(outcome) => {
            let log = dir.join("test.log");
            if let Err(err) = std::fs::write(&log, &outcome.record.output) {
                row.error = one_line(&format!("failed to save the test log: {err}"));
            }
            row.test_exit_code = Some(outcome.record.exit_code);
            row.passed = outcome.passed;
            row.status = if outcome.passed {
                Status::Passed
            } else {
                Status::Failed
            };
            if outcome.record.timed_out {
                row.error = one_line(&format!(
                    "the test command timed out after {} s",
                    test_timeout.as_secs_f64()
                ));
            }
            trajectory.write(&Event::Test {
                test_patch_files: outcome.test_patch_files,
                record: outcome.record,
                log_path: "test.log".to_owned(),
            });
        }
        Err(err) => {
            row.status = Status::Error;
            row.error = one_line(&err.to_string());
        }
    }
    row
}

fn setup_failure(record: &CommandRecord) -> String {
    let last_line = record
        .output
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .unwrap_or("");
    if record.timed_out {
        format!(
            "timed out after {:.0} s; last output: {last_line}",
            record.duration_s
        )
    } else {
        format!("exit code {}; last output: {last_line}", record.exit_code)
    }
}

fn header(ctx: &RunContext, task: &TaskSpec, epoch: u32) -> Event {
    let config = &ctx.config;
    let mut task_value = serde_json::to_value(task).unwrap_or_default();
    // Unknown fields are kept at the top level, as they were in the task file.
    if let serde_json::Value::Object(map) = &mut task_value
        && let Some(serde_json::Value::Object(extra)) = map.remove("extra")
    {
        map.extend(extra);
    }
    Event::Header {
        format_version: FORMAT_VERSION,
        onebash_version: env!("CARGO_PKG_VERSION").to_owned(),
        task: task_value,
        epoch,
        model: config.model.name().to_owned(),
        provider: ctx.client.provider().to_owned(),
        prompt: PromptInfo {
            name: config.prompt.name.clone(),
            sha256: config.prompt.sha256.clone(),
        },
        repo: task.repo.clone(),
        base_commit: task.base_commit.clone(),
        request_template: ctx.client.request_template(),
        settings: serde_json::json!({
            "max_turns": config.max_turns,
            "max_tokens": config.max_tokens,
            "command_timeout_s": config.command_timeout.as_secs_f64(),
            "task_timeout_s": config.task_timeout.as_secs_f64(),
            "test_timeout_s": test_timeout(task, config.test_timeout).as_secs_f64(),
        }),
    }
}

/// A row with no verdict, for a task that ended before its agent ran.
fn error_row(
    ctx: &RunContext,
    task: &TaskSpec,
    epoch: u32,
    exit_reason: ExitReason,
    elapsed: Duration,
) -> ResultRow {
    ResultRow {
        task_id: task.id.clone(),
        epoch,
        model: ctx.config.model.name().to_owned(),
        prompt: ctx.config.prompt.label(),
        status: Status::Error,
        exit_reason,
        passed: false,
        turns: 0,
        tool_calls: 0,
        prompt_tokens: 0,
        completion_tokens: 0,
        total_tokens: 0,
        cost_usd: None,
        agent_seconds: 0.0,
        test_seconds: None,
        wall_seconds: round_seconds(elapsed.as_secs_f64()),
        test_exit_code: None,
        error: String::new(),
    }
}

fn interrupted_row(ctx: &RunContext, task: &TaskSpec, epoch: u32, wall: Instant) -> ResultRow {
    let mut row = error_row(ctx, task, epoch, ExitReason::Interrupted, wall.elapsed());
    row.error = "interrupted by the user".to_owned();
    row
}

/// The row after the agent phase, before the tests: status is decided later.
fn agent_row(ctx: &RunContext, task: &TaskSpec, epoch: u32, agent: &AgentOutcome) -> ResultRow {
    let mut row = error_row(ctx, task, epoch, agent.exit_reason, Duration::ZERO);
    row.turns = agent.turns;
    row.tool_calls = agent.tool_calls;
    row.prompt_tokens = agent.usage.prompt_tokens;
    row.completion_tokens = agent.usage.completion_tokens;
    row.total_tokens = agent.usage.total_tokens;
    // The oracle costs nothing; API prices are not known to this version.
    row.cost_usd = matches!(ctx.client, ModelClient::Oracle).then_some(0.0);
    row.agent_seconds = round_seconds(agent.duration.as_secs_f64());
    row.error = agent.error.as_deref().map(one_line).unwrap_or_default();
    row
}
