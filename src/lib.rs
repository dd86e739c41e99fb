//! onebash: batch evaluation of LLM coding agents that have one tool, bash.
//!
//! A task goes through five stages, one module each, called in order by
//! [`runner::run_task`]:
//!
//! 1. [`task`]: the task file is read and checked whole before anything runs;
//! 2. [`checkout`]: the repo is mirrored once into a cache and each task gets
//!    a working copy at its base commit;
//! 3. [`agent`]: the model works in the checkout with one tool, `bash`; every
//!    command goes through [`exec`], the only place a process is spawned;
//! 4. [`grade`]: the hidden tests are applied and the test command decides;
//! 5. [`results`]: one CSV row per (task, epoch).
//!
//! Around them: [`config`] turns the command line ([`cli`]) into checked
//! settings, without looking at the machine, and [`probe`] then finds what
//! the machine allows (bwrap, cgroups); [`runner`] runs many tasks at once and emits [`events`], which
//! [`progress`] shows and `commands::run` writes to results.csv; every step
//! of a task is recorded by [`trajectory`]; after the agent phase, [`audit`]
//! flags the commands that probed the repo's history past the base. The
//! commands that read a run folder back find its files through
//! `results::RunFolder` and read them as the types that wrote them:
//! [`trajectory::Event`], [`manifest::RunManifest`], `results::ResultRow`.

pub mod agent;
pub mod audit;
pub mod checkout;
pub mod cli;
pub mod commands;
pub mod config;
pub mod env;
pub mod events;
pub mod grade;
pub mod run_folder;
pub mod runner;
pub mod sys;
pub mod task;
