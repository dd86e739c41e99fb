//! Stages 1 to 5 for every (task, epoch), several at once.
//!
//! [`run_tasks`] schedules the work (`-j` at a time, epoch by epoch, in the
//! order of the task file) and stops starting new work on Ctrl-C;
//! [`run_task`] is the one function that calls the stages in order:
//! checkout, setup, agent, diff, tests, row. The runner never prints: it
//! writes each task's trajectory and files and emits [`RunEvent`]s, whose
//! consumers show progress and append rows to results.csv.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::agent::run::AgentContext;
use crate::agent::{AgentLimits, AgentOutcome, ModelClient, run_agent};
use crate::audit::{self, AuditInput, Subject};
use crate::checkout::{Checkout, RepoCache};
use crate::config::RunConfig;
use crate::env::{Environment, Shell, Trust, Workspace};
use crate::events::{Cancel, EventSink, Phase, RunEvent};
use crate::run_folder::ExitReason;
use crate::run_folder::trajectory::{
    CommandRecord, Event, FORMAT_VERSION, PromptInfo, TrajectoryWriter,
};
use crate::run_folder::{
    PATCH_DIFF, ResultRow, RunFolder, Status, TEST_LOG, TESTS_JSON, TRAJECTORY, one_line,
    round_seconds,
};
use crate::runner::test_run::{GradeError, run_tests, test_timeout};
use crate::sys::exec::{CommandEnv, kill_marked_processes};
use crate::sys::limits::TaskLimits;
use crate::task::TaskSpec;

/// What every task shares.
pub struct RunContext {
    pub config: RunConfig,
    pub client: ModelClient,
    pub cache: RepoCache,
    /// Where tasks run (env/): the host, under the run's sandbox.
    pub env: Arc<dyn Environment>,
    pub folder: RunFolder,
    pub events: EventSink,
    pub cancel: Cancel,
}

/// Runs the given (task index, epoch) pairs, in order, `-j` at a time, and
/// emits a `TaskFinished` for each that started. Returns when all started
/// tasks have ended.
pub async fn run_tasks(ctx: Arc<RunContext>, work: Vec<(usize, u32)>) {
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
        // The model API refused the first tasks in the same words before
        // it ever answered: every task still to start would end the same
        // way, after its checkout and setup. `commands::run` says why.
        if ctx.client.refused_run().is_some() {
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
            let mut row = blank_row(&ctx, task, epoch, ExitReason::InternalError);
            row.error = one_line(&format!("internal error: the task's worker failed: {err}"));
            ctx.events
                .emit(RunEvent::TaskFinished { row: Box::new(row) });
        }
    }
}

/// One (task, epoch) while it runs: what every stage needs.
struct TaskRun<'a> {
    ctx: &'a RunContext,
    task: &'a TaskSpec,
    epoch: u32,
    /// `tasks/<id>/epoch-<k>/` in the run folder.
    dir: PathBuf,
    /// Put in the environment of every command of this task, so the
    /// processes it leaves behind can be found and killed.
    mark: String,
    env: CommandEnv,
    /// The task's cgroup, if one could be made, and the child's rlimits.
    /// Shared with the blocking threads that kill what is left in it and,
    /// at the end, remove it.
    limits: Arc<TaskLimits>,
    wall: Instant,
}

/// The pipeline of one (task, epoch): checkout, setup, agent, diff, tests.
/// Never fails: what goes wrong becomes the row's status and error.
pub async fn run_task(ctx: &RunContext, task: &TaskSpec, epoch: u32) -> ResultRow {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mark = format!(
        "{}-{}-{}-{epoch}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        task.id
    );
    let run = TaskRun {
        ctx,
        task,
        epoch,
        dir: ctx.folder.task_dir(&task.id, epoch),
        env: CommandEnv::for_task(&mark),
        limits: Arc::new(ctx.config.probed.limit_plan.for_task(&mark)),
        mark,
        wall: Instant::now(),
    };
    ctx.events.emit(RunEvent::TaskStarted {
        task: task.id.clone(),
        epoch,
    });
    let trajectory = TrajectoryWriter::create(&run.dir.join(TRAJECTORY)).await;
    let mut trajectory = match trajectory {
        Ok(writer) => writer,
        Err(err) => {
            return run.error_row(
                ExitReason::CheckoutError,
                &format!(
                    "failed to create the task folder {}: {err}",
                    run.dir.display()
                ),
            );
        }
    };
    trajectory.write(&run.header()).await;

    let mut row = run.stages(&mut trajectory).await;
    // Whatever the task's commands left running dies with the task.
    run.kill_left_behind().await;

    if let Some(err) = trajectory.error().await {
        row.error = one_line(&if row.error.is_empty() {
            err
        } else {
            format!("{}; {err}", row.error)
        });
    }
    row.wall_seconds = round_seconds(run.wall.elapsed().as_secs_f64());
    trajectory
        .write(&Event::End {
            status: row.status,
            passed: row.passed,
            exit_reason: row.exit_reason,
            wall_s: row.wall_seconds,
            error: (!row.error.is_empty()).then(|| row.error.clone()),
        })
        .await;
    // The end is in the file before the row is handed on to results.csv.
    let _ = trajectory.finish().await;
    // Its cgroup goes with the task: removing one waits for its processes.
    let limits = Arc::clone(&run.limits);
    drop(run);
    let _ = crate::sys::blocking::urgent(move || drop(limits)).await;
    row
}

impl TaskRun<'_> {
    /// Checkout, then the rest; the working copy is deleted at the end
    /// unless `--keep-workdirs`.
    async fn stages(&self, trajectory: &mut TrajectoryWriter) -> ResultRow {
        let ctx = self.ctx;
        // A SWE-bench instance whose repo or version has no eval spec is
        // an error of its own, before anything runs for it.
        if let Some(Err(reason)) = &self.task.swebench {
            return self.error_row(
                ExitReason::SetupError,
                &format!("failed to find how SWE-bench grades this task: {reason}"),
            );
        }
        ctx.events.phase(&self.task.id, self.epoch, Phase::Checkout);
        // A Harbor task's image is built from its environment/ first; a
        // failed build is the task's setup error, the run goes on.
        if let Err(err) = ctx
            .env
            .build_image(self.task, self.limits.child.clone())
            .await
        {
            return self.error_row(ExitReason::SetupError, &err);
        }
        let started = Instant::now();
        let workdir =
            ctx.config
                .workdirs
                .join(format!("{}.epoch-{}", self.task.id.as_str(), self.epoch));
        // The repo the image holds (SWE-bench's), made leak-proof inside
        // its container; else onebash's own checkout.
        let entered = if self.task.repo_in_image && ctx.env.has_image_repos() {
            self.enter_image_repo(&workdir).await
        } else {
            self.check_out(&workdir).await
        };
        let (checkout, workspace) = match entered {
            Ok(entered) => entered,
            Err(row) => {
                let _ = crate::sys::blocking::remove_dir(workdir).await;
                return *row;
            }
        };
        trajectory
            .write(&Event::Checkout {
                commit: checkout.commit.clone(),
                head: (checkout.head != checkout.commit).then(|| checkout.head.clone()),
                setup_commits: checkout.setup_commits.clone(),
                history: Some(checkout.history),
                objects: Some(checkout.verified.objects),
                duration_s: started.elapsed().as_secs_f64(),
                fetched: checkout.fetched,
                warning: checkout.warning.clone(),
            })
            .await;
        if let Some(warning) = &checkout.warning {
            ctx.events
                .emit(RunEvent::Warning(format!("{}: {warning}", self.task.id)));
        }
        let row = self.in_checkout(trajectory, &checkout, &*workspace).await;
        if let Err(err) = workspace.leave(ctx.config.keep_workdirs).await {
            ctx.events.emit(RunEvent::Warning(format!(
                "failed to delete the working copy {}: {err}",
                checkout.dir.display()
            )));
        }
        row
    }

    /// onebash's own checkout at `workdir`, and the workspace around it.
    async fn check_out(
        &self,
        workdir: &Path,
    ) -> Result<(Checkout, Box<dyn Workspace>), Box<ResultRow>> {
        let ctx = self.ctx;
        let checkout = tokio::select! {
            checkout = ctx.cache.checkout(&self.task.repo_location, &self.task.base_commit, workdir) => checkout,
            () = ctx.cancel.cancelled() => {
                return Err(Box::new(self.error_row(ExitReason::Interrupted, INTERRUPTED)));
            }
        };
        let checkout = checkout
            .map_err(|err| Box::new(self.error_row(ExitReason::CheckoutError, &err.to_string())))?;
        let entered = ctx
            .env
            .enter(self.task, self.epoch, &checkout, self.limits.child.clone());
        match entered.await {
            Ok(workspace) => Ok((checkout, workspace)),
            Err(err) => Err(Box::new(self.error_row(ExitReason::CheckoutError, &err))),
        }
    }

    /// The workspace around the repo the task's image holds, made to hold
    /// nothing past its starting point (the base, or the image's setup
    /// commits on top of it) and checked; `scratch` is its host folder.
    async fn enter_image_repo(
        &self,
        scratch: &Path,
    ) -> Result<(Checkout, Box<dyn Workspace>), Box<ResultRow>> {
        let ctx = self.ctx;
        let entered = ctx.env.enter_image_repo(
            self.task,
            self.epoch,
            ctx.config.history,
            scratch,
            self.limits.child.clone(),
        );
        // Not cut short by Ctrl-C: the container it started would be left
        // behind. Cancellation is noticed right after.
        match entered.await {
            Ok((workspace, checkout)) => Ok((checkout, workspace)),
            Err(err) => Err(Box::new(
                self.error_row(ExitReason::CheckoutError, &err.to_string()),
            )),
        }
    }

    /// Setup, agent, diff, tests.
    async fn in_checkout(
        &self,
        trajectory: &mut TrajectoryWriter,
        checkout: &Checkout,
        workspace: &dyn Workspace,
    ) -> ResultRow {
        let (ctx, task, config) = (self.ctx, self.task, &self.ctx.config);
        let test_timeout = test_timeout(task, config.test_timeout);
        if let Some(setup) = &task.setup_command {
            ctx.events.phase(&task.id, self.epoch, Phase::Setup);
            // setup_command is the task author's, not the model's: it runs
            // outside the sandbox, with the network, in the cleared environment.
            let env = self.env.with_network();
            let harness = Shell {
                workspace,
                env: &env,
                trust: Trust::Harness,
            };
            let failure = tokio::select! {
                outcome = harness.run(setup, test_timeout) => match outcome {
                    Ok(outcome) => {
                        let record = CommandRecord::new(setup, &outcome);
                        trajectory.write(&Event::Setup(record.clone())).await;
                        (record.exit_code != 0 || record.timed_out).then(|| setup_failure(&record))
                    }
                    Err(err) => Some(err.to_string()),
                },
                () = ctx.cancel.cancelled() => return self.error_row(ExitReason::Interrupted, INTERRUPTED),
            };
            if let Some(message) = failure {
                return self.error_row(
                    ExitReason::SetupError,
                    &format!("setup_command failed: {message}"),
                );
            }
        }

        // Rendering was checked for every task before the run started, so
        // this fails only if the prompt itself is broken.
        let prompt = match config.prompt.render(task, config.max_turns) {
            Ok(prompt) => prompt,
            Err(err) => return self.error_row(ExitReason::ApiError, &err.to_string()),
        };
        let agent_ctx = AgentContext {
            client: &ctx.client,
            task,
            epoch: self.epoch,
            prompt: &prompt,
            commands: self.shell(workspace, config.allow_network),
            limits: AgentLimits {
                max_turns: config.max_turns,
                max_tokens: config.max_tokens,
                max_cost: config.max_cost,
                command_timeout: config.command_timeout,
                task_timeout: self.task_timeout(),
            },
            events: &ctx.events,
            cancel: &ctx.cancel,
        };
        let agent = run_agent(&agent_ctx, trajectory).await;
        let mut row = self.agent_row(&agent);
        let mirror = ctx.cache.mirror_path(&task.repo_location);
        let audit = audit::audit_task(AuditInput {
            subject: Subject::new(&task.repo, &mirror, std::env::home_dir().as_deref()),
            mirror,
            base: checkout.commit.clone(),
            setup_command: task.setup_command.clone(),
            commands: trajectory.commands().to_vec(),
        })
        .await;
        row.history_probes = Some(audit.history_probes.len() as u32);
        trajectory
            .write(&Event::Audit {
                history_probes: audit.history_probes,
                setup_probes: audit.setup_probes,
            })
            .await;
        // Processes the agent left behind must not touch the diff or the tests.
        self.kill_left_behind().await;

        // The agent's change, saved before the tests touch the working copy.
        if let Err(err) = self.save_diff(trajectory, workspace).await {
            row.error = one_line(&err);
        }

        if ctx.cancel.is_cancelled() {
            row.exit_reason = ExitReason::Interrupted;
            row.error = INTERRUPTED.to_owned();
        }
        if !row.exit_reason.is_gradable() {
            row.status = Status::Error;
            return row;
        }

        ctx.events.phase(&task.id, self.epoch, Phase::Test);
        let started = Instant::now();
        // The tests' environment: in a container, a fresh one from the image.
        let tests = async {
            workspace
                .end_agent_phase()
                .await
                .map_err(GradeError::Environment)?;
            run_tests(
                task,
                self.shell(workspace, false),
                test_timeout,
                config.junit_path.as_deref(),
            )
            .await
        };
        let tested = tokio::select! {
            tested = tests => tested,
            () = ctx.cancel.cancelled() => {
                row.status = Status::Error;
                row.exit_reason = ExitReason::Interrupted;
                row.error = INTERRUPTED.to_owned();
                return row;
            }
        };
        row.test_seconds = Some(round_seconds(started.elapsed().as_secs_f64()));
        match tested {
            Ok(outcome) => {
                if let Err(err) = crate::sys::blocking::write_file(
                    self.dir.join(TEST_LOG),
                    outcome.record.output.clone().into_bytes(),
                )
                .await
                {
                    row.error = one_line(&format!("failed to save the test log: {err}"));
                }
                row.test_exit_code = Some(outcome.record.exit_code);
                row.passed = outcome.passed;
                row.reward = outcome.reward;
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
                let per_test = outcome.per_test.as_ref().map(|(results, verdict)| {
                    serde_json::json!({"statuses": results, "verdict": verdict})
                });
                if let Some(per_test) = &per_test {
                    let text = serde_json::to_string_pretty(per_test).unwrap_or_default();
                    if let Err(err) = crate::sys::blocking::write_file(
                        self.dir.join(TESTS_JSON),
                        text.into_bytes(),
                    )
                    .await
                    {
                        row.error = one_line(&format!("failed to save tests.json: {err}"));
                    }
                }
                trajectory
                    .write(&Event::Test {
                        test_patch_files: outcome.test_patch_files,
                        test_patch_method: outcome.test_patch_method.map(str::to_owned),
                        record: outcome.record,
                        log_path: TEST_LOG.to_owned(),
                        per_test,
                    })
                    .await;
            }
            Err(err) => {
                row.status = Status::Error;
                row.error = one_line(&err.to_string());
            }
        }
        row
    }

    async fn save_diff(
        &self,
        trajectory: &mut TrajectoryWriter,
        workspace: &dyn Workspace,
    ) -> Result<(), String> {
        let diff = workspace
            .diff()
            .await
            .map_err(|err| format!("failed to compute the agent's diff: {err}"))?;
        crate::sys::blocking::write_file(self.dir.join(PATCH_DIFF), diff.clone().into_bytes())
            .await
            .map_err(|err| format!("failed to save the agent's diff: {err}"))?;
        trajectory
            .write(&Event::Diff {
                path: PATCH_DIFF.to_owned(),
                bytes: diff.len(),
            })
            .await;
        Ok(())
    }

    /// How the model's commands and the tests run: confined, writing only
    /// the working copy.
    fn shell<'b>(&'b self, workspace: &'b dyn Workspace, network: bool) -> Shell<'b> {
        Shell {
            workspace,
            env: &self.env,
            trust: Trust::Agent { network },
        }
    }

    /// Kills what the task's commands left running: everything in its
    /// cgroup, and every process carrying its mark.
    async fn kill_left_behind(&self) {
        // Both read /proc or the cgroup, and wait a little between rounds.
        let (limits, mark) = (Arc::clone(&self.limits), self.mark.clone());
        let _ = crate::sys::blocking::urgent(move || {
            limits.kill_all();
            kill_marked_processes(&mark)
        })
        .await;
    }

    fn header(&self) -> Event {
        let (ctx, task, config) = (self.ctx, self.task, &self.ctx.config);
        Event::Header {
            format_version: FORMAT_VERSION,
            onebash_version: env!("CARGO_PKG_VERSION").to_owned(),
            task: serde_json::Value::Object(task.to_json()),
            epoch: self.epoch,
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
                "task_timeout_s": self.task_timeout().as_secs_f64(),
                "test_timeout_s": test_timeout(task, config.test_timeout).as_secs_f64(),
            }),
        }
    }

    /// The task's agent timeout: a Harbor task's `[agent] timeout_sec`
    /// (its own, as a task's test_timeout_s is), else `--task-timeout`.
    fn task_timeout(&self) -> std::time::Duration {
        self.task
            .harbor
            .as_ref()
            .and_then(|h| h.agent_timeout_s)
            .map_or(
                self.ctx.config.task_timeout,
                std::time::Duration::from_secs_f64,
            )
    }

    /// A row with no verdict.
    fn error_row(&self, exit_reason: ExitReason, error: &str) -> ResultRow {
        let mut row = blank_row(self.ctx, self.task, self.epoch, exit_reason);
        row.error = one_line(error);
        row.wall_seconds = round_seconds(self.wall.elapsed().as_secs_f64());
        row
    }

    /// The row after the agent phase; status is decided by the tests.
    fn agent_row(&self, agent: &AgentOutcome) -> ResultRow {
        let mut row = blank_row(self.ctx, self.task, self.epoch, agent.exit_reason);
        row.turns = agent.turns;
        row.tool_calls = agent.tool_calls;
        row.prompt_tokens = agent.usage.prompt_tokens;
        row.completion_tokens = agent.usage.completion_tokens;
        row.total_tokens = agent.usage.total_tokens;
        row.reasoning_tokens = agent.usage.reasoning_tokens;
        row.cached_input_tokens = agent.usage.cached_tokens;
        row.cache_write_tokens = agent.usage.cache_write_tokens;
        row.cost_usd = agent.cost_usd.map(|cost| (cost * 1e6).round() / 1e6);
        row.model_retries = agent.retries;
        row.retry_wait_seconds = round_seconds(agent.retry_wait.as_secs_f64());
        row.replay_divergences = agent.replay_divergences;
        row.agent_seconds = round_seconds(agent.duration.as_secs_f64());
        row.error = agent.error.as_deref().map(one_line).unwrap_or_default();
        row
    }
}

const INTERRUPTED: &str = "interrupted by the user";

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

/// A row with nothing measured yet: status `error`, no verdict.
fn blank_row(ctx: &RunContext, task: &TaskSpec, epoch: u32, exit_reason: ExitReason) -> ResultRow {
    ResultRow::blank(
        task.id.clone(),
        epoch,
        ctx.config.model.name().to_owned(),
        ctx.config.prompt.label(),
        exit_reason,
    )
}
