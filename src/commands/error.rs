//! Why a subcommand failed ([`CommandError`]) and the one place that maps
//! it to its exit code ([`CommandError::exit_code`], as nextest's
//! `ExpectedError::process_exit_code`), with the codes of
//! docs/exit-codes.md. A command that ends with an outcome rather than an
//! error (a run with task errors, an interrupted run, a refused API, an
//! export with rows it could not read) returns its code as `Ok`.

use crate::commands::export::ExportError;
use crate::commands::man::ManError;
use crate::commands::merge::MergeError;
use crate::commands::output::OutputError;
use crate::commands::pull::PullError;
use crate::commands::regrade::RegradeError;
use crate::commands::show::ShowError;
use crate::config::ConfigError;

/// Every row has a verdict; a command did what it was asked.
pub const EXIT_OK: i32 = 0;
/// Some row ended in error, or a run failed after its checks passed.
pub const EXIT_TASK_ERRORS: i32 = 1;
/// Bad usage or bad input: nothing ran.
pub const EXIT_USAGE: i32 = 2;
/// The model API refused the run: nothing listens at its URL, it refused
/// the key, or the first tasks all ended on the same refusal before any
/// call was answered.
pub const EXIT_API_REFUSED: i32 = 3;
/// A dataset's Hub could not be reached and the cache does not hold the
/// revision: nothing ran; the same command works once the network does.
pub const EXIT_HUB_UNREACHABLE: i32 = 3;
/// Ctrl-C or SIGTERM.
pub const EXIT_INTERRUPTED: i32 = 130;

/// Why a subcommand failed. `main` prints it after `error: ` and exits
/// with [`CommandError::exit_code`].
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// `run`'s or `validate`'s settings cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// `report` or `compare` cannot read a run folder or write its output.
    #[error(transparent)]
    Output(#[from] OutputError),
    #[error(transparent)]
    Merge(#[from] MergeError),
    #[error(transparent)]
    Export(#[from] ExportError),
    #[error(transparent)]
    Pull(#[from] PullError),
    /// `man` could not write its pages.
    #[error(transparent)]
    Man(#[from] ManError),
    /// `regrade` refused the run folder, or could not read or write it.
    #[error(transparent)]
    Regrade(#[from] RegradeError),
    /// `show` cannot find or read the trajectory it was asked for.
    #[error(transparent)]
    Show(#[from] ShowError),
    /// `validate` refused its input.
    #[error(transparent)]
    Validate(#[from] ValidateError),
    /// A run (or validate's) failed after its checks passed: its run
    /// folder could not be written, a `replay:` run folder could not be
    /// read. The causes follow, joined by `: `, each once ([`chain`]).
    #[error("{}", chain(.0))]
    Run(anyhow::Error),
    /// The async runtime of a run could not start.
    #[error("failed to start the async runtime: {0}")]
    Runtime(std::io::Error),
}

/// An error and its causes, joined by `: `, leaving out a cause whose
/// words the text before it holds already: the run folder's errors
/// (`RunFolderError`) name their I/O error in their own message and carry
/// it as their source too, which anyhow's `{:#}` would print twice.
fn chain(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let words = cause.to_string();
        if text.is_empty() {
            text = words;
        } else if !text.contains(&words) {
            text.push_str(": ");
            text.push_str(&words);
        }
    }
    text
}

/// Why validate refused its input before anything ran.
#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    /// clap refused the `run` command line validate built from its own.
    #[error("{}", without_error_prefix(.0))]
    Args(#[source] clap::Error),
    #[error("internal error: validate built a command that is not `run`")]
    NotRun,
    #[error(
        "--dry-run is run's: validate runs its tasks\nhint: check the tasks with `onebash run TASKS -m oracle --dry-run`"
    )]
    DryRun,
}

/// clap's message without its own `error: `: main adds one.
fn without_error_prefix(err: &clap::Error) -> String {
    let text = err.to_string();
    text.strip_prefix("error: ").unwrap_or(&text).to_owned()
}

impl CommandError {
    /// The exit code docs/exit-codes.md gives this failure: 2 when the
    /// input was refused before anything ran, 1 when a run started and
    /// could not go on.
    pub fn exit_code(&self) -> i32 {
        match self {
            CommandError::Config(err) if err.hub_unreachable() => EXIT_HUB_UNREACHABLE,
            CommandError::Config(_) => EXIT_USAGE,
            CommandError::Pull(PullError::Source(err)) if err.hub_unreachable() => {
                EXIT_HUB_UNREACHABLE
            }
            CommandError::Pull(_) => EXIT_USAGE,
            CommandError::Output(_)
            | CommandError::Merge(_)
            | CommandError::Export(_)
            | CommandError::Show(_)
            | CommandError::Man(_)
            | CommandError::Regrade(_)
            | CommandError::Validate(_) => EXIT_USAGE,
            CommandError::Run(_) | CommandError::Runtime(_) => EXIT_TASK_ERRORS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_folder::RunFolderError;

    /// Refused input exits 2 and a run that could not go on exits 1,
    /// whichever command it came from; the message is the error's own.
    #[test]
    fn each_error_maps_to_the_exit_code_of_docs_exit_codes() {
        let missing = || RunFolderError::NoFolder("runs/a".into());
        let cases: Vec<(CommandError, i32, &str)> = vec![
            (
                ConfigError::Usage("--runs must be at least 1".into()).into(),
                2,
                "--runs must be at least 1",
            ),
            (
                OutputError::from(missing()).into(),
                2,
                "runs/a is not a run folder: no such folder",
            ),
            (
                MergeError::from(missing()).into(),
                2,
                "runs/a is not a run folder",
            ),
            (
                ExportError::from(missing()).into(),
                2,
                "runs/a is not a run folder",
            ),
            (
                ShowError::from(missing()).into(),
                2,
                "runs/a is not a run folder",
            ),
            (
                ManError::Folder {
                    path: "man/man1".into(),
                    source: std::io::Error::from_raw_os_error(libc::EACCES),
                }
                .into(),
                2,
                "failed to create the man page folder man/man1: Permission denied",
            ),
            (
                ValidateError::NotRun.into(),
                2,
                "internal error: validate built a command that is not `run`",
            ),
            (
                CommandError::Run(
                    anyhow::Error::new(RunFolderError::Write {
                        path: "out/run.json".into(),
                        source: std::io::Error::from_raw_os_error(libc::EACCES),
                    })
                    .context("the run stopped"),
                ),
                1,
                "the run stopped: failed to write out/run.json: Permission denied (os error 13)",
            ),
            (
                CommandError::Runtime(std::io::Error::other("no threads")),
                1,
                "failed to start the async runtime: no threads",
            ),
        ];
        for (err, code, text) in cases {
            assert_eq!(err.exit_code(), code, "{err}");
            assert!(err.to_string().starts_with(text), "{err}");
            // The I/O error a run folder error names is its source too:
            // said once.
            assert!(err.to_string().matches("(os error").count() <= 1, "{err}");
        }
    }

    /// A run's error reads as its causes, each once: a cause the message
    /// names already is not repeated, one it does not name follows it.
    #[test]
    fn a_run_error_says_each_cause_once() {
        let written = anyhow::Error::new(RunFolderError::Write {
            path: "out/run.json".into(),
            source: std::io::Error::from_raw_os_error(libc::EISDIR),
        })
        .context("the run stopped");
        assert_eq!(
            CommandError::Run(written).to_string(),
            "the run stopped: failed to write out/run.json: Is a directory (os error 21)"
        );
        let plain = anyhow::anyhow!("no answer").context("the model preflight failed");
        assert_eq!(
            CommandError::Run(plain).to_string(),
            "the model preflight failed: no answer"
        );
    }
}
