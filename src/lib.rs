//! onebash: batch evaluation of LLM coding agents that have one tool, bash.
//!
//! A task goes through five stages, called in order by
//! `runner::run_task` (runner/tasks.rs); the folders of `src/` are those
//! stages, and a folder imports only the folders below it in
//! `tests/it/layers.rs`'s order (ARCHITECTURE.md, "Layers"):
//!
//! 1. [`task`]: the task file (or a Hub dataset's rows, [`dataset`]) is read
//!    and checked whole before anything runs;
//! 2. [`checkout`]: the repo is mirrored once into a cache and each task gets
//!    a working copy at its base commit;
//! 3. [`agent`]: the model works in the checkout with one tool, `bash`; every
//!    command runs in the task's [`env`] and goes through `sys::exec`, the
//!    only place a process is spawned; [`audit`] then flags the commands that
//!    probed the repo's history past the base;
//! 4. the test stage (`runner/test_run.rs`) runs the hidden tests and
//!    [`grade`] decides from their log;
//! 5. [`run_folder`]: one CSV row per (task, epoch), the trajectories, the
//!    outcome types every layer shares.
//!
//! Around them: [`config`] turns the command line ([`cli`]) into checked
//! settings and then finds what the machine allows; [`runner`] runs many
//! tasks at once and emits [`events`], which its progress display shows and
//! `commands::run` writes to results.csv; [`commands`] has one file or
//! folder per subcommand; [`sys`] is what onebash asks of the operating
//! system.

#![warn(unreachable_pub)]

mod agent;
mod audit;
mod checkout;
pub mod cli;
pub mod commands;
pub mod config;
mod dataset;
mod env;
mod events;
pub mod grade;
mod run_folder;
mod runner;
pub mod sys;
mod task;
