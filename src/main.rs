//! The onebash binary: parses the command line, takes the API keys out of
//! the environment while it is the only thread, and hands the command to
//! `commands::dispatch`; an error is printed and mapped to its exit code by
//! `CommandError::exit_code` (docs/exit-codes.md).

use std::ffi::{OsStr, OsString};

use clap::Parser;

use onebash::cli::{Cli, Command};
use onebash::commands::error::EXIT_USAGE;
use onebash::config::Secrets;

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
        // SAFETY: no other thread exists yet (the runtime starts later).
        Command::Run(args) => unsafe { Secrets::take(args.api_key_env.as_deref()) },
        // SAFETY: as above. Its runs need no key; none stays behind.
        Command::Validate(_) => unsafe { Secrets::take(None) },
        // SAFETY: as above. For HF_TOKEN, when the tasks are a dataset.
        Command::Pull(_) => unsafe { Secrets::take(None) },
        _ => Secrets::default(),
    };
    let code = match onebash::commands::dispatch::dispatch(cli.command, &secrets) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err}");
            err.exit_code()
        }
    };
    std::process::exit(code);
}
