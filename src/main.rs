//! The onebash binary: parses the command line, dispatches to a subcommand
//! and turns the outcome into an exit code (docs/exit-codes.md): 0 every
//! task got a verdict, 1 some task ended in error, 2 bad usage or input, 130
//! interrupted.

use std::ffi::{OsStr, OsString};

use clap::Parser;

use onebash::cli::{Cli, Command};
use onebash::commands::run::{EXIT_TASK_ERRORS, EXIT_USAGE};
use onebash::config::{RunConfig, Secrets};

fn main() {
    // onebash as its own exec helper, between the start of a task's command
    // and the command (see limits::exec_limited): nothing else runs.
    if std::env::args_os().nth(1).as_deref() == Some(OsStr::new(onebash::sys::limits::EXEC_LIMITED))
    {
        let args: Vec<OsString> = std::env::args_os().skip(2).collect();
        eprintln!("onebash: {}", onebash::sys::limits::exec_limited(&args));
        std::process::exit(126);
    }
    // Not dumpable: a process of the same user (an agent's command) cannot
    // attach to onebash or read its memory, where the API key lives.
    // SAFETY: prctl with these arguments has no memory-safety preconditions.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let code = if err.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = err.print();
            std::process::exit(code);
        }
    };
    // The keys leave the environment while this is the only thread: no
    // command started later can read them back from onebash's environ.
    let secrets = match &cli.command {
        // SAFETY: no other thread exists yet (the runtime starts below).
        Command::Run(args) => unsafe { Secrets::take(args.api_key_env.as_deref()) },
        // SAFETY: as above. Its runs need no key; none stays behind.
        Command::Validate(_) => unsafe { Secrets::take(None) },
        _ => Secrets::default(),
    };
    let code = match cli.command {
        // The arguments are checked first; only then is the machine looked
        // at (bwrap run once, cgroups found), still before the runtime.
        Command::Run(args) => {
            match RunConfig::from_args(&args, &secrets).and_then(RunConfig::probe) {
                Ok(config) => {
                    for warning in &config.warnings {
                        eprintln!("warning: {warning}");
                    }
                    run_async(onebash::commands::run::run(config))
                }
                Err(err) => {
                    eprintln!("error: {err}");
                    EXIT_USAGE
                }
            }
        }
        Command::Report(args) => {
            match onebash::commands::output::report(
                &args.run,
                args.format,
                args.output.as_deref(),
                args.by.as_deref(),
            ) {
                Ok(text) => {
                    print!("{text}");
                    0
                }
                Err(err) => {
                    eprintln!("error: {err}");
                    EXIT_USAGE
                }
            }
        }
        Command::Compare(args) => {
            match onebash::commands::output::compare(
                &args.run_a,
                &args.run_b,
                args.format,
                args.output.as_deref(),
            ) {
                Ok(text) => {
                    print!("{text}");
                    0
                }
                Err(err) => {
                    eprintln!("error: {err}");
                    EXIT_USAGE
                }
            }
        }
        Command::Show(args) => {
            match onebash::commands::show::show(&args.target, args.task.as_deref(), args.epoch) {
                Ok(text) => {
                    print!("{text}");
                    0
                }
                Err(err) => {
                    eprintln!("error: {err}");
                    EXIT_USAGE
                }
            }
        }
        Command::Validate(args) => {
            let out = args.out.clone().unwrap_or_else(|| {
                let time = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
                    .to_string()
                    .replace(':', "-");
                std::path::Path::new("results").join(format!("validate_{time}"))
            });
            match onebash::commands::validate::configs(
                &args.tasks,
                args.runs,
                &out,
                &args.run_flags,
            ) {
                Ok(configs) => {
                    // Both phases run on the same machine: each warning once.
                    let mut shown: Vec<&String> = Vec::new();
                    for warning in configs.iter().flat_map(|config| &config.warnings) {
                        if !shown.contains(&warning) {
                            eprintln!("warning: {warning}");
                            shown.push(warning);
                        }
                    }
                    run_async(onebash::commands::validate::validate(
                        configs, args.runs, &out,
                    ))
                }
                Err(err) => {
                    eprintln!("error: {err}");
                    EXIT_USAGE
                }
            }
        }
        Command::Export(args) => match onebash::commands::export::run(&args) {
            Ok(summary) => {
                for message in &summary.failed {
                    eprintln!("error: {message}");
                }
                eprintln!("{}", summary.line());
                if summary.failed.is_empty() {
                    0
                } else {
                    EXIT_TASK_ERRORS
                }
            }
            Err(err) => {
                eprintln!("error: {err}");
                EXIT_USAGE
            }
        },
        Command::Pull(args) => match onebash::commands::pull::pull(&args) {
            Ok(text) => {
                println!("{text}");
                0
            }
            Err(err) => {
                eprintln!("error: {err}");
                EXIT_USAGE
            }
        },
        Command::Merge(args) => match onebash::commands::merge::merge(&args.out, &args.runs) {
            Ok(rows) => {
                println!(
                    "merged {} runs: {rows} rows in {}",
                    args.runs.len(),
                    args.out.display()
                );
                0
            }
            Err(err) => {
                eprintln!("error: {err}");
                EXIT_USAGE
            }
        },
    };
    std::process::exit(code);
}

fn run_async(future: impl std::future::Future<Output = anyhow::Result<i32>>) -> i32 {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: failed to start the async runtime: {err}");
            return EXIT_TASK_ERRORS;
        }
    };
    match runtime.block_on(future) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            EXIT_TASK_ERRORS
        }
    }
}
