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
use crate::checkout::{Checkout, GitError, RepoCache};
use crate::config::RunConfig;
use crate::env::{Environment, ImageBuild, Shell, Trust, Workspace};
use crate::events::{Cancel, EventSink, Phase, RunEvent};
use crate::grade::instance_report;
use crate::run_folder::ExitReason;
use crate::run_folder::trajectory::{
    CommandRecord, Event, FORMAT_VERSION, PromptInfo, TrajectoryWriter,
};
use crate::run_folder::{
    BUILD_LOG, PATCH_DIFF, REPORT_JSON, ResultRow, RunFolder, Status, TEST_LOG, TESTS_JSON,
    TRAJECTORY, one_line, round_seconds,
};
use crate::runner::test_run::{Decision, GradeError, graded_by_recipe, run_tests, test_timeout};
use crate::sys::exec::{CommandEnv, kill_marked_processes};
use crate::sys::limits::TaskLimits;
use crate::task::{Code, TaskSpec};

/// What every task shares.
pub(crate) struct RunContext {
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
pub(crate) async fn run_tasks(ctx: Arc<RunContext>, work: Vec<(usize, u32)>) {
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
pub(crate) async fn run_task(ctx: &RunContext, task: &TaskSpec, epoch: u32) -> ResultRow {
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
            return run.error_row(Failure::new(
                ExitReason::CheckoutError,
                format!(
                    "failed to create the task folder {}: {err}",
                    run.dir.display()
                ),
            ));
        }
    };
    trajectory.write(&run.header()).await;

    let mut row = run.stages(&mut trajectory).await;
    // Whatever the task's commands left running dies with the task.
    run.kill_left_behind().await;

    if let Some(err) = trajectory.error().await {
        row.error = Errors::after(&row.error, &err);
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
        // A task whose grading cannot be built (a recipe missing for its
        // repo or version) is an error of its own, before anything runs.
        if let Some(reason) = self.task.benchmark.cannot_run() {
            return self.error_row(Failure::new(ExitReason::SetupError, reason));
        }
        // An empty prediction is SWE-bench's empty patch: nothing to put
        // in, so no checkout and no container; unresolved.
        if ctx
            .config
            .model
            .prediction(&self.task.id)
            .is_some_and(|prediction| prediction.is_empty())
        {
            let mut row = blank_row(ctx, self.task, self.epoch, ExitReason::EmptyPatch);
            row.status = Status::Failed;
            row.wall_seconds = round_seconds(self.wall.elapsed().as_secs_f64());
            return row;
        }
        ctx.events.phase(&self.task.id, self.epoch, Phase::Checkout);
        // An image built from a folder of the task is built first; a
        // failed build is the task's setup error, the run goes on.
        if let Err(failure) = self.build_image().await {
            return self.error_row(failure);
        }
        let started = Instant::now();
        let workdir =
            ctx.config
                .workdirs
                .join(format!("{}.epoch-{}", self.task.id.as_str(), self.epoch));
        // The repo the image holds, or the image alone, made leak-proof
        // inside its container; else onebash's own checkout.
        let in_image = !matches!(self.task.benchmark.code(), Code::Checkout);
        let from_image = in_image && ctx.env.has_image_repos();
        let entered = if from_image {
            self.enter_image_repo(&workdir).await
        } else {
            self.check_out(&workdir).await
        };
        let (checkout, workspace) = match entered {
            Ok(entered) => entered,
            Err(failure) => {
                let _ = crate::sys::blocking::remove_dir(workdir).await;
                return self.error_row(failure);
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
                from_image,
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

    /// The task's image, if it brings its build context; the build's
    /// output goes to build.log in the task folder, and a warning says so.
    async fn build_image(&self) -> Result<(), Failure> {
        let log = self.dir.join(BUILD_LOG);
        let built = self
            .ctx
            .env
            .build_image(self.task, &log, self.limits.child.clone())
            .await
            .map_err(|err| Failure::new(ExitReason::SetupError, err.to_string()))?;
        if let ImageBuild::Built { log: saved } = built {
            let image = self.task.image.as_deref().unwrap_or_default();
            let whole = match saved {
                Ok(()) => format!("its output is in {}", log.display()),
                Err(err) => err.to_string(),
            };
            self.ctx.events.emit(RunEvent::Warning(format!(
                "{}: built the image {image}; {whole}",
                self.task.id
            )));
        }
        Ok(())
    }

    /// onebash's own checkout at `workdir`, and the workspace around it.
    async fn check_out(&self, workdir: &Path) -> Result<(Checkout, Box<dyn Workspace>), Failure> {
        let ctx = self.ctx;
        let checkout = tokio::select! {
            checkout = ctx.cache.checkout(&self.task.repo_location, &self.task.base_commit, workdir) => checkout,
            () = ctx.cancel.cancelled() => return Err(Failure::interrupted()),
        };
        let checkout =
            checkout.map_err(|err| Failure::new(ExitReason::CheckoutError, err.to_string()))?;
        let entered = ctx
            .env
            .enter(self.task, self.epoch, &checkout, self.limits.child.clone());
        match entered.await {
            Ok(workspace) => Ok((checkout, workspace)),
            Err(err) => Err(Failure::new(ExitReason::CheckoutError, err.to_string())),
        }
    }

    /// The workspace around the repo the task's image holds, made to hold
    /// nothing past its starting point (the base, or the image's setup
    /// commits on top of it) and checked; `scratch` is its host folder.
    async fn enter_image_repo(
        &self,
        scratch: &Path,
    ) -> Result<(Checkout, Box<dyn Workspace>), Failure> {
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
            Err(err) => Err(Failure::new(ExitReason::CheckoutError, err.to_string())),
        }
    }

    /// Setup, agent, audit, diff, then the tests if the agent's end can be
    /// graded. Each stage returns what it found; the row is assembled from
    /// those once, at the end ([`TaskRun::row`]).
    async fn in_checkout(
        &self,
        trajectory: &mut TrajectoryWriter,
        checkout: &Checkout,
        workspace: &dyn Workspace,
    ) -> ResultRow {
        if let Err(failure) = self.setup(trajectory, workspace).await {
            return self.error_row(failure);
        }
        let agent = match self.agent(trajectory, workspace).await {
            Ok(agent) => agent,
            Err(failure) => return self.error_row(failure),
        };
        let history_probes = self.audit(trajectory, checkout, workspace).await;
        // Processes the agent left behind must not touch the diff or the tests.
        self.kill_left_behind().await;
        // The agent's change, saved before the tests touch the working copy.
        let diff = self.save_diff(trajectory, workspace).await;
        let tested = if self.ctx.cancel.is_cancelled() {
            Some(Tested::Interrupted)
        } else if agent.exit_reason.is_gradable() {
            Some(self.test(trajectory, workspace).await)
        } else {
            None
        };
        self.row(Found {
            agent,
            history_probes,
            diff,
            tested,
        })
    }

    /// The task's `setup_command`, if it has one.
    async fn setup(
        &self,
        trajectory: &mut TrajectoryWriter,
        workspace: &dyn Workspace,
    ) -> Result<(), Failure> {
        let (ctx, task) = (self.ctx, self.task);
        let Some(setup) = &task.setup_command else {
            return Ok(());
        };
        ctx.events.phase(&task.id, self.epoch, Phase::Setup);
        // setup_command is the task author's, not the model's: it runs
        // outside the sandbox, with the network, in the cleared environment.
        let env = self.env.with_network();
        let harness = Shell {
            workspace,
            env: &env,
            trust: Trust::Harness,
        };
        let timeout = test_timeout(task, ctx.config.test_timeout);
        let failure = tokio::select! {
            outcome = harness.run(setup, timeout) => match outcome {
                Ok(outcome) => {
                    let record = CommandRecord::new(setup, &outcome);
                    trajectory.write(&Event::Setup(record.clone())).await;
                    (record.exit_code != 0 || record.timed_out).then(|| setup_failure(&record))
                }
                Err(err) => Some(err.to_string()),
            },
            () = ctx.cancel.cancelled() => return Err(Failure::interrupted()),
        };
        match failure {
            Some(message) => Err(Failure::new(
                ExitReason::SetupError,
                format!("setup_command failed: {message}"),
            )),
            None => Ok(()),
        }
    }

    /// The prompt, then the agent loop in the working copy.
    async fn agent(
        &self,
        trajectory: &mut TrajectoryWriter,
        workspace: &dyn Workspace,
    ) -> Result<AgentOutcome, Failure> {
        let (ctx, task, config) = (self.ctx, self.task, &self.ctx.config);
        // Rendering was checked for every task before the run started, so
        // this fails only if the prompt itself is broken.
        let prompt = config
            .prompt
            .render(task, config.max_turns)
            .map_err(|err| Failure::new(ExitReason::ApiError, err.to_string()))?;
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
        Ok(run_agent(&agent_ctx, trajectory).await)
    }

    /// The audit of the agent's commands, recorded; returns how many
    /// probed the repo's history past the base.
    async fn audit(
        &self,
        trajectory: &mut TrajectoryWriter,
        checkout: &Checkout,
        workspace: &dyn Workspace,
    ) -> u32 {
        let task = self.task;
        let mirror = self.ctx.cache.mirror_path(&task.repo_location);
        let audit = audit::audit_task(AuditInput {
            subject: Subject::new(&task.repo, &mirror, std::env::home_dir().as_deref()),
            mirror,
            base: checkout.commit.clone(),
            setup_command: task.setup_command.clone(),
            commands: trajectory.commands().to_vec(),
        })
        .await;
        let history_probes = audit.history_probes.len() as u32;
        trajectory
            .write(&Event::Audit {
                history_probes: audit.history_probes,
                setup_probes: audit.setup_probes,
            })
            .await;
        let asked = workspace.hosts_asked();
        if !asked.is_empty() {
            let refused_repo_host = audit::refused_repo_hosts(&task.repo_location, &asked);
            trajectory
                .write(&Event::Hosts {
                    asked,
                    refused_repo_host,
                })
                .await;
        }
        history_probes
    }

    /// The tests, in the environment made for them (in a container, a
    /// fresh one from the image); their log and per-test verdict go to the
    /// task folder.
    async fn test(&self, trajectory: &mut TrajectoryWriter, workspace: &dyn Workspace) -> Tested {
        let (ctx, task, config) = (self.ctx, self.task, &self.ctx.config);
        ctx.events.phase(&task.id, self.epoch, Phase::Test);
        let timeout = test_timeout(task, config.test_timeout);
        let started = Instant::now();
        let tests = async {
            workspace
                .end_agent_phase()
                .await
                .map_err(GradeError::Environment)?;
            run_tests(
                task,
                task.rules(config.grading),
                self.shell(workspace, false),
                timeout,
                config.junit_path.as_deref(),
            )
            .await
        };
        let tested = tokio::select! {
            tested = tests => tested,
            () = ctx.cancel.cancelled() => return Tested::Interrupted,
        };
        let seconds = round_seconds(started.elapsed().as_secs_f64());
        let outcome = match tested {
            Ok(outcome) => outcome,
            Err(err) => {
                return Tested::Failed {
                    seconds,
                    error: err.to_string(),
                };
            }
        };
        let mut notes = Vec::new();
        if outcome.record.timed_out {
            notes.push(format!(
                "the test command timed out after {} s",
                timeout.as_secs_f64()
            ));
        }
        let log = outcome.record.output.clone().into_bytes();
        if let Err(err) = crate::sys::blocking::write_file(self.dir.join(TEST_LOG), log).await {
            notes.push(format!("failed to save the test log: {err}"));
        }
        let per_test = outcome.decision.as_ref().and_then(Decision::tests_json);
        if let Some(per_test) = &per_test {
            let text = serde_json::to_string_pretty(per_test).unwrap_or_default();
            let saved =
                crate::sys::blocking::write_file(self.dir.join(TESTS_JSON), text.into_bytes());
            if let Err(err) = saved.await {
                notes.push(format!("failed to save tests.json: {err}"));
            }
        }
        // SWE-bench's report.json, when run_evaluation would write one. The
        // patch it grades is the prediction's, when there is one: one that
        // setup already made is tested, though the agent's diff is empty.
        let model_patch_empty = match config.model.prediction(&task.id) {
            Some(prediction) => prediction.is_empty(),
            None => tokio::fs::metadata(self.dir.join(PATCH_DIFF))
                .await
                .map_or(true, |meta| meta.len() == 0),
        };
        let report = outcome
            .decision
            .as_ref()
            .and_then(|decision| report_json(task, decision, model_patch_empty, &outcome.record));
        if let Some(report) = report {
            let saved =
                crate::sys::blocking::write_file(self.dir.join(REPORT_JSON), report.into_bytes());
            if let Err(err) = saved.await {
                notes.push(format!("failed to save report.json: {err}"));
            }
        }
        let verdict = Verdict {
            seconds,
            exit_code: outcome.record.exit_code,
            passed: outcome.passed,
            reward: outcome.reward,
            notes,
        };
        trajectory
            .write(&Event::Test {
                test_patch_files: outcome.test_patch_files,
                test_patch_method: outcome.test_patch_method.map(str::to_owned),
                record: outcome.record,
                log_path: TEST_LOG.to_owned(),
                per_test,
                rules: outcome.decision.as_ref().map(|decision| decision.rules),
                graded_by_recipe: outcome.decision.is_some().then(|| graded_by_recipe(task)),
                model_patch_empty: Some(model_patch_empty),
                bare_reset: outcome.bare_reset,
            })
            .await;
        Tested::Verdict(verdict)
    }

    /// The row of a task whose agent ran, from what each stage found: a
    /// stage that ends the task without a verdict decides the status and
    /// the exit reason (Ctrl-C: `interrupted`), an error that comes with a
    /// verdict changes neither, and every error is kept, in the order it
    /// happened ([`Errors`]).
    fn row(&self, found: Found) -> ResultRow {
        let mut row = self.agent_row(&found.agent);
        row.history_probes = Some(found.history_probes);
        let mut errors = Errors::default();
        if let Some(error) = &found.agent.error {
            errors.push(error);
        }
        if let Err(error) = &found.diff {
            errors.push(&error.to_string());
        }
        match found.tested {
            // The agent's end cannot be graded: it says why (status error).
            None => {}
            Some(Tested::Interrupted) => {
                row.exit_reason = ExitReason::Interrupted;
                errors.push(INTERRUPTED);
            }
            Some(Tested::Failed { seconds, error }) => {
                row.test_seconds = Some(seconds);
                errors.push(&error);
            }
            Some(Tested::Verdict(verdict)) => {
                row.test_seconds = Some(verdict.seconds);
                row.test_exit_code = Some(verdict.exit_code);
                row.passed = verdict.passed;
                row.reward = verdict.reward;
                row.status = if verdict.passed {
                    Status::Passed
                } else {
                    Status::Failed
                };
                for note in &verdict.notes {
                    errors.push(note);
                }
            }
        }
        row.error = errors.joined();
        row
    }

    /// The agent's diff, saved to patch.diff; why it is not there, if not.
    async fn save_diff(
        &self,
        trajectory: &mut TrajectoryWriter,
        workspace: &dyn Workspace,
    ) -> Result<(), DiffError> {
        let diff = workspace.diff().await.map_err(DiffError::Compute)?;
        let path = self.dir.join(PATCH_DIFF);
        crate::sys::blocking::write_file(path.clone(), diff.clone().into_bytes())
            .await
            .map_err(|source| DiffError::Save { path, source })?;
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
            model: config.model.row_name(&task.id).to_owned(),
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

    /// The task's agent timeout: its benchmark's for it (its own, as a
    /// task's test_timeout_s is), else `--task-timeout`.
    fn task_timeout(&self) -> std::time::Duration {
        self.task
            .benchmark
            .agent_timeout()
            .unwrap_or(self.ctx.config.task_timeout)
    }

    /// The row of a task that a stage ended before its agent ran: no
    /// verdict.
    fn error_row(&self, failure: Failure) -> ResultRow {
        let mut row = blank_row(self.ctx, self.task, self.epoch, failure.exit_reason);
        row.error = one_line(&failure.error);
        row.wall_seconds = round_seconds(self.wall.elapsed().as_secs_f64());
        row
    }

    /// The row after the agent phase, its error aside; status is decided
    /// by the tests.
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
        row
    }
}

/// SWE-bench's per-instance report.json of a task's tests, as
/// run_evaluation writes it, or `None` when it would write none: its
/// `make_run_report` counts an instance completed only when the file is
/// there, so it is written exactly when run_evaluation would be done with
/// the instance. Not for an empty patch (`model_patch_empty`: the
/// prediction's `model_patch`, else the agent's diff; it is not run), nor
/// for tests that timed out (an evaluation error); a patch that does not
/// apply and tests that could not run never get here. `regrade` writes it
/// by the same rule.
pub(crate) fn report_json(
    task: &TaskSpec,
    decision: &Decision,
    model_patch_empty: bool,
    record: &CommandRecord,
) -> Option<String> {
    if model_patch_empty || record.timed_out {
        return None;
    }
    let report = instance_report(
        decision.rules,
        task.id.as_str(),
        false,
        Some(&decision.report),
        &record.output,
    );
    Some(report.to_json())
}

const INTERRUPTED: &str = "interrupted by the user";

/// A stage that ended the task with no verdict: the row's exit reason and
/// what the stage said.
struct Failure {
    exit_reason: ExitReason,
    error: String,
}

impl Failure {
    fn new(exit_reason: ExitReason, error: impl Into<String>) -> Failure {
        Failure {
            exit_reason,
            error: error.into(),
        }
    }

    fn interrupted() -> Failure {
        Failure::new(ExitReason::Interrupted, INTERRUPTED)
    }
}

/// What the stages from the agent on found; [`TaskRun::row`] assembles
/// the row from it.
struct Found {
    agent: AgentOutcome,
    history_probes: u32,
    /// Why the agent's diff is not in patch.diff, if it is not.
    diff: Result<(), DiffError>,
    /// `None`: the agent's end cannot be graded, so no test ran.
    tested: Option<Tested>,
}

/// Why the agent's diff is not in patch.diff.
#[derive(Debug, thiserror::Error)]
enum DiffError {
    #[error("failed to compute the agent's diff: {0}")]
    Compute(#[source] GitError),
    #[error("failed to save the agent's diff to {}: {source}", path.display())]
    Save {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What the test stage found.
enum Tested {
    /// The tests ran to a verdict.
    Verdict(Verdict),
    /// They could not be run or read: status `error`, the agent's exit
    /// reason kept.
    Failed { seconds: f64, error: String },
    /// Ctrl-C came before or while they ran.
    Interrupted,
}

/// The tests' verdict, and what else went wrong around it.
struct Verdict {
    seconds: f64,
    exit_code: i32,
    passed: bool,
    reward: Option<f64>,
    /// A timeout, a file of the task folder not saved: errors of the row
    /// that leave the verdict as it is.
    notes: Vec<String>,
}

/// A task's errors in the order they happened, for the row's one `error`
/// column: each on one line and cut on its own ([`one_line`]), so a long
/// first one does not hide the next, joined by [`ERROR_SEPARATOR`]. The
/// same error twice in a row is kept once (an agent stopped by Ctrl-C says
/// so, and so does the stage after it).
#[derive(Default)]
struct Errors(Vec<String>);

/// Between two errors of one row (docs/results.md, the `error` column).
const ERROR_SEPARATOR: &str = "; then: ";

impl Errors {
    fn push(&mut self, error: &str) {
        let line = one_line(error);
        if !line.is_empty() && self.0.last() != Some(&line) {
            self.0.push(line);
        }
    }

    fn joined(&self) -> String {
        self.0.join(ERROR_SEPARATOR)
    }

    /// A row's `error` column with `next` after what it holds.
    fn after(error: &str, next: &str) -> String {
        let mut errors = Errors::default();
        if !error.is_empty() {
            errors.0.push(error.to_owned());
        }
        errors.push(next);
        errors.joined()
    }
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

/// A row with nothing measured yet: status `error`, no verdict.
fn blank_row(ctx: &RunContext, task: &TaskSpec, epoch: u32, exit_reason: ExitReason) -> ResultRow {
    ResultRow::blank(
        task.id.clone(),
        epoch,
        ctx.config.model.row_name(&task.id).to_owned(),
        ctx.config.prompt.label(),
        exit_reason,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_keep_every_stage_in_order_each_cut_on_its_own() {
        let mut errors = Errors::default();
        errors.push(&"a".repeat(1500));
        errors.push("");
        errors.push("the test command\ntimed out after 1 s");
        let joined = errors.joined();
        assert!(joined.starts_with(&format!("{}...; then: ", "a".repeat(1000))));
        assert!(joined.ends_with("; then: the test command timed out after 1 s"));
    }

    #[test]
    fn the_same_error_twice_in_a_row_is_kept_once() {
        let mut errors = Errors::default();
        errors.push(INTERRUPTED);
        errors.push(INTERRUPTED);
        assert_eq!(errors.joined(), INTERRUPTED);
        assert_eq!(Errors::after("", "x"), "x");
        assert_eq!(Errors::after("a; then: b", "c"), "a; then: b; then: c");
    }
}
