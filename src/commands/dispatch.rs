//! From a parsed command line to its exit code: each subcommand called,
//! what it returns printed, and a run's async runtime started. The errors
//! come back to `main` as [`CommandError`], which maps them to their exit
//! codes; the codes of outcomes (a run's task errors, an export's unread
//! rows) are returned as `Ok`.

use std::future::Future;
use std::path::{Path, PathBuf};

use crate::cli::{Command, ExportArgs, RegradeArgs, ValidateArgs};
use crate::commands::error::{CommandError, EXIT_OK, EXIT_TASK_ERRORS};
use crate::commands::{completions, export, man, merge, output, pull, regrade, show, validate};
use crate::config::{RunConfig, Secrets};
use crate::sys::words::count;

/// Runs `command`; its exit code, or why it failed. `secrets` are the
/// keys `main` took from the environment before any thread started.
pub fn dispatch(command: Command, secrets: &Secrets) -> Result<i32, CommandError> {
    match command {
        // The arguments are checked first; only then is the machine looked
        // at (bwrap run once, cgroups found), still before the runtime.
        Command::Run(args) if args.dry_run => {
            let config = RunConfig::from_options(&args.options(), secrets)?;
            // Every failed check is in the plan; the code is the most
            // serious one's.
            let dry = crate::commands::dry_run::dry_run(&config);
            print!("{}", dry.text);
            Ok(dry.code)
        }
        Command::Run(args) => {
            let config =
                RunConfig::from_options(&args.options(), secrets).and_then(RunConfig::probe)?;
            for warning in &config.warnings {
                eprintln!("warning: {warning}");
            }
            run_async(crate::commands::run::run(config))
        }
        Command::Report(args) => printed(output::report(
            &args.run,
            &output::ReportRequest {
                format: args.format,
                output: args.output.as_deref(),
                by: args.by.as_deref(),
                epoch: args.epoch,
            },
        )?),
        Command::Compare(args) => printed(output::compare(
            &args.run_a,
            &args.run_b,
            args.format,
            args.output.as_deref(),
        )?),
        Command::Show(args) => printed(show::show(&args.target, args.task.as_deref(), args.epoch)?),
        Command::Validate(args) => validate_command(&args, secrets),
        Command::Export(args) => export_command(&args),
        Command::Pull(args) => {
            println!("{}", pull::pull(&args, secrets)?);
            Ok(EXIT_OK)
        }
        Command::Datasets(args) => printed(
            crate::commands::datasets::list(&args)
                .map_err(|err| CommandError::Config(err.into()))?,
        ),
        Command::Regrade(args) => regrade_command(&args),
        Command::Completions(args) => printed(completions::script(args.shell)),
        Command::Man(args) => {
            for page in man::write_pages(&args.dir)? {
                println!("{}", page.display());
            }
            Ok(EXIT_OK)
        }
        Command::Doctor(args) => {
            let report = crate::commands::doctor::doctor(args.offline, args.cache_dir.as_deref());
            print!("{}", report.render(args.format));
            Ok(report.exit_code())
        }
        Command::Merge(args) => {
            let rows = merge::merge(&args.out, &args.runs)?;
            println!(
                "merged {}: {} in {}",
                count(args.runs.len(), "run", "runs"),
                count(rows, "row", "rows"),
                args.out.display()
            );
            Ok(EXIT_OK)
        }
    }
}

/// Prints what a command returned, as it is. A reader that closed the
/// pipe early (`| head`) has what it wanted: exit 0, as `export` does.
fn printed(text: String) -> Result<i32, CommandError> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => {
            eprintln!("error: failed to write stdout: {err}");
            Ok(EXIT_TASK_ERRORS)
        }
        _ => Ok(EXIT_OK),
    }
}

/// `validate`: both runs' settings checked before either runs, each
/// warning of the machine shown once.
fn validate_command(args: &ValidateArgs, secrets: &Secrets) -> Result<i32, CommandError> {
    let out = args.out.clone().unwrap_or_else(default_validate_out);
    let configs = validate::configs(&args.tasks, args.runs, &out, &args.run_flags, secrets)?;
    // Both phases run on the same machine: each warning once.
    let mut shown: Vec<&String> = Vec::new();
    for warning in configs.iter().flat_map(|config| &config.warnings) {
        if !shown.contains(&warning) {
            eprintln!("warning: {warning}");
            shown.push(warning);
        }
    }
    let runs = args.runs;
    run_async(async move { validate::validate(configs, runs, &out).await })
}

/// `results/validate_<time>`, the time with `-` for `:`.
fn default_validate_out() -> PathBuf {
    let time = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace(':', "-");
    Path::new("results").join(format!("validate_{time}"))
}

/// `export`: the rows whose trajectory could not be read are named, the
/// rest is written; exit code 1 when there were any.
fn export_command(args: &ExportArgs) -> Result<i32, CommandError> {
    let summary = export::run(args)?;
    for message in &summary.failed {
        eprintln!("error: {message}");
    }
    eprintln!("{}", summary.line());
    Ok(if summary.failed.is_empty() {
        EXIT_OK
    } else {
        EXIT_TASK_ERRORS
    })
}

/// `regrade`: every verdict that changed on stdout, then the count line;
/// the rows regraded with a doubt, those that could not be regraded and
/// where the old rows went on
/// stderr; exit code 1 when some row could not be regraded.
fn regrade_command(args: &RegradeArgs) -> Result<i32, CommandError> {
    let regraded = regrade::regrade(&args.run, args.out.as_deref(), args.grading)?;
    for change in &regraded.changes {
        println!("{change}");
    }
    for warning in &regraded.warnings {
        eprintln!("warning: {warning}");
    }
    for problem in &regraded.problems {
        eprintln!("error: {problem}");
    }
    if let Some(backup) = &regraded.backup {
        eprintln!("the rows before the regrade are in {}", backup.display());
    }
    println!("{}", regraded.line());
    Ok(if regraded.problems.is_empty() {
        EXIT_OK
    } else {
        EXIT_TASK_ERRORS
    })
}

/// Runs `future` on a multi-threaded runtime of its own.
///
/// The future runs on the runtime's workers, not on this thread: the run's
/// events (several a model call) then wake no thread of their own.
fn run_async(
    future: impl Future<Output = anyhow::Result<i32>> + Send + 'static,
) -> Result<i32, CommandError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(CommandError::Runtime)?;
    match runtime.block_on(runtime.spawn(future)) {
        Ok(done) => done.map_err(CommandError::Run),
        Err(join) if join.is_panic() => std::panic::resume_unwind(join.into_panic()),
        Err(join) => Err(CommandError::Run(anyhow::anyhow!(join))),
    }
}
