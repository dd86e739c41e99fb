//! `onebash run`: wires the pieces of a run together. Gets the model's
//! client (`ModelChoice::client`), makes the run folder, starts the runner, feeds its events to the
//! progress display and the results writer, handles Ctrl-C, and prints the
//! summary. Returns the exit code docs/exit-codes.md promises.
//! [`run_with`] calls the stages in order, one function each.

use std::ops::ControlFlow;
use std::sync::Arc;

use serde_json::json;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::agent::ModelClient;
use crate::agent::model::REFUSALS_TO_STOP;
use crate::agent::types::ModelError;
use crate::checkout::RepoCache;
use crate::commands::error::{
    EXIT_API_REFUSED, EXIT_INTERRUPTED, EXIT_OK, EXIT_TASK_ERRORS, EXIT_USAGE,
};
use crate::config::RunConfig;
use crate::config::manifest::RunManifest;
use crate::events::{Cancel, CancelHandle, EventSink, RunEvent};
use crate::run_folder::{
    ExitReason, ResultRow, ResultsWriter, RowSink, RunFolder, RunFolderError, Status,
    write_predictions,
};
use crate::runner::progress::ProgressDisplay;
use crate::runner::resume;
use crate::runner::{RunContext, run_tasks};
use crate::sys::lock::FileLock;
use crate::sys::words::count;
use crate::task::TaskId;

pub(crate) async fn run(config: RunConfig) -> anyhow::Result<i32> {
    run_with(config, true).await
}

/// A run; `print_summary` says whether the summary goes to stdout. The
/// stages in order: the model client, the checks that may still refuse
/// the run before anything is written, the run folder and the work to do,
/// the tasks themselves, and the summary with the exit code.
pub(crate) async fn run_with(config: RunConfig, print_summary: bool) -> anyhow::Result<i32> {
    let client = config.model.client(config.grading)?;
    let folder = RunFolder::at(&config.out_dir);
    if let Some(code) = refuse_early(&folder, &config, &client).await {
        return Ok(code);
    }
    let opened = match open_run_folder(&folder, &config)? {
        ControlFlow::Continue(opened) => opened,
        ControlFlow::Break(code) => return Ok(code),
    };
    let Opened {
        manifest,
        rows,
        work,
        results,
        lock,
    } = opened;
    let (ctx, received, cancel_handle) = shared_context(config, client, folder);
    let executed = execute(&ctx, work, rows, results, received, cancel_handle).await;
    let code = finish(&ctx, manifest, executed, print_summary);
    drop(lock);
    code
}

/// What refuses the run before anything is written, with its exit code
/// and its message printed: a resume with other settings (2), then a model
/// API that cannot be used at all (3).
async fn refuse_early(folder: &RunFolder, config: &RunConfig, client: &ModelClient) -> Option<i32> {
    // A resume with other settings is refused first: that is about the
    // command line, whatever the API says.
    if config.resume
        && let Err(message) = resume::check_settings(folder, config)
    {
        eprintln!("error: {message}");
        return Some(EXIT_USAGE);
    }
    // An API that cannot be used at all is found before any repo is checked
    // out or any folder made: the same command runs again once it is fixed.
    if let Err(err) = client.preflight().await {
        eprintln!(
            "error: the model API refused the run before any task started: {err}\n  url: {}\n  model: {}\nhint: {}",
            client.endpoint().unwrap_or_default(),
            config.model.name(),
            refusal_hint(&err),
        );
        return Some(EXIT_API_REFUSED);
    }
    None
}

/// A run folder open for the run, and what is left to do in it.
struct Opened {
    /// run.json as written at the start; [`finish`] completes it.
    manifest: RunManifest,
    /// The rows kept from an earlier attempt (on `--resume`); the new ones
    /// are added as tasks end.
    rows: Vec<ResultRow>,
    /// The (task index, epoch) pairs to run, in order.
    work: Vec<(usize, u32)>,
    results: RowSink,
    /// The folder's lock, held to the end of the run.
    lock: FileLock,
}

/// Makes the run folder, works out the (task, epoch) pairs to run (all of
/// them, or on `--resume` those without a row, the rest set aside), and
/// writes run.json and opens results.csv. Breaks with exit code 2 when the
/// folder cannot be resumed.
fn open_run_folder(
    folder: &RunFolder,
    config: &RunConfig,
) -> anyhow::Result<ControlFlow<i32, Opened>> {
    folder.create_dir()?;
    // One onebash a folder: a second (a resume started twice, say) would
    // interleave rows with the first and sweep away its containers.
    let Some(lock) =
        FileLock::try_acquire(&folder.lock_file()).map_err(|source| RunFolderError::Lock {
            path: folder.lock_file(),
            source,
        })?
    else {
        eprintln!(
            "error: the run folder {} is in use by another onebash (it holds {})\nhint: wait for that run to end, or give this one another --out",
            folder.root().display(),
            folder.lock_file().display()
        );
        return Ok(ControlFlow::Break(EXIT_USAGE));
    };
    // Every (task, epoch), epoch by epoch, in the order of the task file.
    let all_work: Vec<(usize, u32)> = (1..=config.runs)
        .flat_map(|epoch| (0..config.tasks.len()).map(move |i| (i, epoch)))
        .collect();
    let mut manifest = RunManifest::starting(config, now())?;
    let mut rows: Vec<ResultRow> = Vec::new();
    let mut work = all_work.clone();
    if config.resume {
        let ids: Vec<(TaskId, u32)> = all_work
            .iter()
            .map(|&(i, epoch)| (config.tasks[i].id.clone(), epoch))
            .collect();
        let plan = match resume::prepare(folder, config, &ids) {
            Ok(plan) => plan,
            Err(message) => {
                eprintln!("error: {message}");
                return Ok(ControlFlow::Break(EXIT_USAGE));
            }
        };
        work.retain(|&(i, epoch)| !plan.is_done(&config.tasks[i].id, epoch));
        eprintln!(
            "resuming {}: {} kept, {} dropped to redo, {} set aside, {} to go",
            folder.root().display(),
            count(plan.kept.len(), "row", "rows"),
            plan.dropped,
            count(plan.set_aside, "unfinished attempt", "unfinished attempts"),
            count(work.len(), "run", "runs")
        );
        // check_settings read run.json already: it reads again.
        let before = RunManifest::read(folder)?;
        manifest.resume_of(&before, now());
        rows = plan.kept;
    }
    manifest.write(folder)?;
    let results = RowSink::start(
        ResultsWriter::open(&folder.results_csv())?,
        folder.results_csv(),
    )?;
    Ok(ControlFlow::Continue(Opened {
        manifest,
        rows,
        work,
        results,
        lock,
    }))
}

/// What every task shares (the repo cache over the run's bases, where
/// commands run, the client, the run folder), with the other ends of its
/// event channel and of its cancellation.
fn shared_context(
    config: RunConfig,
    client: ModelClient,
    folder: RunFolder,
) -> (Arc<RunContext>, UnboundedReceiver<RunEvent>, CancelHandle) {
    let (events, received) = EventSink::channel();
    let (cancel_handle, cancel) = Cancel::new();
    let ctx = RunContext {
        cache: RepoCache::new(
            config.cache_dir.clone(),
            config.history,
            config
                .tasks
                .iter()
                .map(|task| (task.repo_location.as_str(), task.base_commit.as_str())),
        ),
        env: crate::env::choose(
            &config.probed.sandbox,
            container_settings(&config),
            config.probed.oci.clone(),
            config.allowed_hosts.clone(),
        ),
        config,
        client,
        folder,
        events,
        cancel,
    };
    (Arc::new(ctx), received, cancel_handle)
}

/// The containers' settings, when the probe found an engine.
fn container_settings(config: &RunConfig) -> Option<crate::env::container::Settings> {
    let mut engine = config.probed.engine.clone()?;
    // The folder's real path, however it was named: the same for every
    // resume of it, and a lock path any later run can find.
    let real = std::fs::canonicalize(&config.out_dir).unwrap_or_else(|_| config.out_dir.clone());
    engine.dir = Some(real.clone());
    Some(crate::env::container::Settings {
        engine,
        run_id: run_id(&real),
        run_lock: RunFolder::at(&real).lock_file(),
        network: config.allow_network,
        allowed_hosts: config.allowed_hosts.clone(),
        memory_bytes: config.limits.max_memory_bytes,
        max_processes: config.limits.max_processes,
        max_file_size_bytes: config.limits.max_file_size_bytes,
        cpus: config.cpus,
        workdir: config.workdir.clone(),
        commands: config.container_commands,
    })
}

/// The run's id in container labels: a hash of the run folder's real
/// path, different for every other folder.
fn run_id(real: &std::path::Path) -> String {
    use sha2::{Digest, Sha256};
    let hash = Sha256::digest(real.as_os_str().as_encoded_bytes());
    hash.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// What the tasks left: every row of the run, and whether results.csv
/// could not be written.
struct Executed {
    rows: Vec<ResultRow>,
    write_error: Option<String>,
}

/// Runs the work: the runner's tasks with the thin packs they need fixed
/// ahead of them, each event shown and each row appended to results.csv as
/// it comes, Ctrl-C heard. Returns once every started task has its row and
/// the run's working-copy folder is cleared.
async fn execute(
    ctx: &Arc<RunContext>,
    work: Vec<(usize, u32)>,
    mut rows: Vec<ResultRow>,
    results: RowSink,
    mut received: UnboundedReceiver<RunEvent>,
    cancel_handle: CancelHandle,
) -> Executed {
    let interrupts = tokio::spawn(hear_interrupts(cancel_handle));
    let mut display = ProgressDisplay::new();
    // What killed runs left (their containers) goes first.
    match ctx.env.sweep().await {
        Ok(swept) => {
            if swept.this_run > 0 {
                display.handle(&RunEvent::Warning(format!(
                    "removed {} an earlier attempt of this run left behind",
                    count(swept.this_run, "container", "containers")
                )));
            }
            if swept.other_runs > 0 {
                display.handle(&RunEvent::Warning(format!(
                    "removed {} that killed onebash runs left behind",
                    count(swept.other_runs, "container", "containers")
                )));
            }
        }
        Err(err) => display.handle(&RunEvent::Warning(format!(
            "failed to remove the containers killed runs left behind: {err}"
        ))),
    }
    // The thin packs of the stores the tasks will use, fixed ahead of them.
    let preparer = ctx.cache.prepare(
        ctx.config.workdirs.join(crate::checkout::STAGED_PACKS),
        work.iter().map(|&(i, _)| {
            let task = &ctx.config.tasks[i];
            (task.repo_location.as_str(), task.base_commit.as_str())
        }),
    );
    let mut runner = tokio::spawn(run_tasks(Arc::clone(ctx), work));
    let mut handle = |event: RunEvent, display: &mut ProgressDisplay| {
        if let RunEvent::TaskFinished { row } = &event {
            results.send((**row).clone());
            rows.push((**row).clone());
        }
        display.handle(&event);
    };
    let mut warned = false;
    loop {
        tokio::select! {
            Some(event) = received.recv() => handle(event, &mut display),
            _ = &mut runner => break,
            () = ctx.cancel.cancelled(), if !warned => {
                warned = true;
                display.handle(&RunEvent::Warning(
                    "interrupted: no new task starts, running ones end as `interrupted`; Ctrl-C again quits at once".to_owned(),
                ));
            }
        }
    }
    // Every task emitted its row before the runner ended: take what is queued.
    while let Ok(event) = received.try_recv() {
        handle(event, &mut display);
    }
    interrupts.abort();
    display.finish();
    let write_error = tokio::task::spawn_blocking(move || results.finish())
        .await
        .unwrap_or_else(|_| Some("the results.csv writer failed".to_owned()));
    // The fix under way may take a while on a big repo: not on a worker.
    let _ = crate::sys::blocking::spawn(move || drop(preparer)).await;
    // Working copies live in the run's workdirs folder while their tasks
    // run; drop it when none was kept (remove_dir only removes an empty one),
    // with the thin packs fixed there, and the packs copied there when the
    // cache is on another file system.
    let _ =
        crate::sys::blocking::remove_dir(ctx.config.workdirs.join(crate::checkout::STAGED_PACKS))
            .await;
    let _ = std::fs::remove_dir(&ctx.config.workdirs);
    Executed { rows, write_error }
}

/// Ctrl-C (or SIGTERM, what Kubernetes and Slurm send) once: start
/// nothing new, end running tasks as interrupted. Twice: leave at once
/// (rows already written are complete).
async fn hear_interrupts(cancel_handle: CancelHandle) {
    let mut terminate =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let mut signals = 0;
    loop {
        let term = async {
            match terminate.as_mut() {
                Some(stream) => {
                    stream.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            result = tokio::signal::ctrl_c() => if result.is_err() { return },
            () = term => {}
        }
        signals += 1;
        if signals == 1 {
            cancel_handle.cancel();
        } else {
            std::process::exit(EXIT_INTERRUPTED);
        }
    }
}

/// Ends the run: predictions.jsonl, run.json completed (end, interruption,
/// why it stopped, summary, peak memory), the summary printed when asked,
/// and the exit code docs/exit-codes.md promises.
fn finish(
    ctx: &RunContext,
    mut manifest: RunManifest,
    executed: Executed,
    print_summary: bool,
) -> anyhow::Result<i32> {
    let Executed { rows, write_error } = executed;
    let folder = &ctx.folder;
    if let Err(err) = write_predictions(folder, &rows) {
        eprintln!("warning: {err}");
    }
    let interrupted = ctx.cancel.is_cancelled();
    // The runner started nothing more once the first tasks all ended on the
    // same refusal of the API.
    let refused = ctx.client.refused_run();
    let mut summary = Summary::of(&rows);
    summary.predictions = ctx
        .config
        .predictions
        .as_ref()
        .map(|record| PredictionCounts {
            count: record.count,
            missing: record.missing.len(),
            unknown: record.unknown.len(),
        });
    manifest.finished_at = Some(now());
    manifest.interrupted = Some(interrupted);
    manifest.stopped = refused.as_ref().map(|error| {
        format!("the model API refused the first {REFUSALS_TO_STOP} tasks in a row: {error}")
    });
    manifest.summary = Some(summary.to_json());
    manifest.peak_rss_bytes = Some(peak_rss_bytes());
    manifest.write(folder)?;

    if print_summary {
        println!(
            "{}",
            summary.render(ctx.config.task_count * ctx.config.runs as usize)
        );
        println!("run folder: {}", folder.root().display());
        if interrupted {
            println!("{}", resume_hint(folder.root()));
        }
    }
    if let Some(err) = write_error {
        anyhow::bail!(err);
    }
    // Ctrl-C wins: the user stopped the run, whatever the API did.
    if let Some(error) = refused.as_ref().filter(|_| !interrupted) {
        eprintln!(
            "error: the model API refused the run: {REFUSALS_TO_STOP} tasks in a row ended on the same error before it answered any call, so no more tasks were started: {error}\n  url: {}\n  model: {}\nhint: the rows written are kept; once the API works, go on with `--resume --retry-errors`",
            ctx.client.endpoint().unwrap_or_default(),
            ctx.config.model.name(),
        );
        return Ok(EXIT_API_REFUSED);
    }
    Ok(if interrupted {
        EXIT_INTERRUPTED
    } else if summary.errors > 0 {
        EXIT_TASK_ERRORS
    } else {
        EXIT_OK
    })
}

/// How to finish an interrupted run: its rows are kept, the interrupted
/// pairs and those that never started are run by a resume.
fn resume_hint(folder: &std::path::Path) -> String {
    format!(
        "hint: finish the run with `onebash run ... -o {} --resume` (the same tasks and flags): the rows written are kept, the interrupted ones and the rest run",
        folder.display()
    )
}

/// The time now, as run.json writes it.
fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

#[derive(Debug, Default)]
struct Summary {
    rows: usize,
    passed: usize,
    failed: usize,
    errors: usize,
    /// Rows of an empty prediction (failed, nothing ran).
    empty_patches: usize,
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
    /// `--model predictions:FILE`: how the predictions met the tasks.
    predictions: Option<PredictionCounts>,
}

/// What a predictions run's summary counts of its file.
#[derive(Debug, Clone, Copy)]
struct PredictionCounts {
    count: usize,
    /// Selected tasks without a prediction (not run).
    missing: usize,
    /// Predictions that name no task (not run).
    unknown: usize,
}

impl Summary {
    fn of(rows: &[ResultRow]) -> Summary {
        let mut summary = Summary {
            rows: rows.len(),
            ..Summary::default()
        };
        for row in rows {
            match row.status {
                Status::Passed => summary.passed += 1,
                Status::Failed => summary.failed += 1,
                Status::Error => summary.errors += 1,
            }
            if row.exit_reason == ExitReason::EmptyPatch {
                summary.empty_patches += 1;
            }
            summary.prompt_tokens += row.prompt_tokens;
            summary.completion_tokens += row.completion_tokens;
            summary.total_tokens += row.total_tokens;
        }
        summary
    }

    fn to_json(&self) -> serde_json::Value {
        let mut summary = json!({
            "rows": self.rows,
            "passed": self.passed,
            "failed": self.failed,
            "error": self.errors,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        });
        if let (Some(counts), Some(fields)) = (self.predictions, summary.as_object_mut()) {
            fields.insert("empty_patch".to_owned(), json!(self.empty_patches));
            fields.insert("without_prediction".to_owned(), json!(counts.missing));
            fields.insert("unknown_predictions".to_owned(), json!(counts.unknown));
        }
        summary
    }

    fn render(&self, selected: usize) -> String {
        let graded = self.passed + self.failed;
        let rate = if graded == 0 {
            "n/a".to_owned()
        } else {
            format!("{:.1}%", 100.0 * self.passed as f64 / graded as f64)
        };
        let mut text = format!(
            "{} of {} finished: {} passed, {} failed, {} error\npass rate {rate} ({}/{} with a verdict)\ntokens: {} prompt + {} completion = {} total",
            self.rows,
            count(selected, "run", "runs"),
            self.passed,
            self.failed,
            self.errors,
            self.passed,
            graded,
            self.prompt_tokens,
            self.completion_tokens,
            self.total_tokens,
        );
        if self.rows < selected {
            let left = selected - self.rows;
            text.push_str(&format!("\n{} did not start", count(left, "run", "runs")));
        }
        if let Some(counts) = self.predictions {
            text.push_str(&format!(
                "\npredictions: {} in the file; {} empty (failed, not run); {} without one and {} for no task, not run",
                counts.count,
                self.empty_patches,
                count(counts.missing, "selected task", "selected tasks"),
                counts.unknown
            ));
        }
        text
    }
}

/// What a user can do about an API that refused the run.
pub(crate) fn refusal_hint(err: &ModelError) -> &'static str {
    match err.status() {
        Some(401 | 403) => {
            "check the API key (--api-key-env names the variable it is read from) and that it may use this model"
        }
        _ => {
            "check --base-url (or $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL) and that the server is up"
        }
    }
}

/// The process's peak resident memory (VmHWM), where /proc tells it.
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
