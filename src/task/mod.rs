//! Stage 1: the tasks. [`TaskSpec`] (spec.rs) and the line parser
//! (lines.rs); the benchmark seam (benchmark.rs: what kind of task a task
//! is, asked by every later stage; source.rs: how a benchmark's tasks come
//! in) and its one registry (registry.rs); SWE-bench's grading recipe that
//! two benchmarks share (recipe.rs); every way tasks
//! come in, one file a benchmark: onebash's own lines (own.rs), a
//! SWE-bench instance ([`swebench`]), a swebench 5 row (swebench5.rs),
//! SWE-bench Pro (pro.rs), Multi-SWE-bench (multi.rs), SWE-smith's
//! refused lines (smith.rs), a Harbor task folder (harbor.rs) or a Harbor
//! registry's dataset of them (harbor_registry.rs); the hosts a task may
//! reach (hosts.rs); another
//! agent's predictions ([`predictions`]); and the prompt a task is
//! rendered into ([`prompt`]).
//! What can be wrong with a task line is in error.rs ([`LineError`]).

mod benchmark;
mod convert;
mod error;
mod harbor;
mod harbor_registry;
mod hosts;
mod lines;
mod multi;
mod own;
pub(crate) mod predictions;
mod pro;
pub(crate) mod prompt;
mod recipe;
mod registry;
mod smith;
mod source;
mod spec;
pub(crate) mod swebench;
mod swebench5;

pub(crate) use benchmark::{
    Artifact, Code, CollectHook, FolderImage, NetworkWish, Oracle, Pull, RewardError, RewardFile,
    SeparateVerifier, Tests, Verdict, VerifierFolder,
};
pub(crate) use error::{IdError, LineError};
pub(crate) use hosts::{AllowedHosts, HostAsked, PhaseHosts};
#[cfg(test)]
pub(crate) use lines::parse_tasks;
pub(crate) use lines::{load_tasks, parse_rows};
pub(crate) use registry::{
    datasets, folder_markers, image_templates, load_path, load_reference, oracle_needs,
    registry_datasets,
};
pub(crate) use source::{
    FetchedFolder, FolderError, FolderFetch, ReferenceContext, Referenced, RegistryRecord,
};
pub(crate) use spec::{LoadOptions, MAX_SECONDS, TaskFile, TaskFileError, TaskId, TaskSpec};
pub(crate) use swebench::patch_files;
