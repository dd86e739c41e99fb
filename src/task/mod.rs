//! Stage 1: the tasks. [`TaskSpec`] and the line parser (spec.rs); the
//! benchmark seam (benchmark.rs: what kind of task a task is, asked by
//! every later stage) and its one registry (registry.rs); every way tasks
//! come in, one file a benchmark: onebash's own lines (own.rs), a
//! SWE-bench instance ([`swebench`]), a swebench 5 row (swebench5.rs),
//! SWE-bench Pro (pro.rs), Multi-SWE-bench (multi.rs), SWE-smith's
//! refused lines (smith.rs), a Harbor task folder (harbor.rs); another
//! agent's predictions ([`predictions`]); and the prompt a task is
//! rendered into ([`prompt`]).
//! What can be wrong with a task line is in error.rs ([`LineError`]).

mod benchmark;
mod convert;
mod error;
mod harbor;
mod multi;
mod own;
pub(crate) mod predictions;
mod pro;
pub(crate) mod prompt;
mod registry;
mod smith;
mod spec;
pub(crate) mod swebench;
mod swebench5;

pub(crate) use benchmark::{
    Code, FolderImage, Oracle, Pull, RewardError, RewardFile, Tests, Verdict, VerifierFolder,
};
pub(crate) use error::{IdError, LineError};
pub(crate) use registry::{datasets, load_path, oracle_needs};
#[cfg(test)]
pub(crate) use spec::parse_tasks;
pub(crate) use spec::{
    LoadOptions, MAX_SECONDS, TaskFile, TaskFileError, TaskId, TaskSpec, load_tasks, parse_rows,
};
pub(crate) use swebench::patch_files;
