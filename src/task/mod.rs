//! Stage 1: the tasks. [`TaskSpec`] and the line parser (spec.rs), and
//! every way tasks come in: a SWE-bench instance ([`swebench`]) and its
//! family of datasets ([`swebench_family`]), a Harbor task folder
//! ([`harbor`]), another agent's predictions ([`predictions`]); and the
//! prompt a task is rendered into ([`prompt`]).
//! What can be wrong with a task line is in error.rs ([`LineError`]).

mod error;
pub(crate) mod harbor;
pub(crate) mod predictions;
pub(crate) mod prompt;
mod spec;
pub(crate) mod swebench;
pub(crate) mod swebench_family;

pub(crate) use error::{IdError, LineError};
#[cfg(test)]
pub(crate) use spec::parse_tasks;
pub(crate) use spec::{
    HarborTask, LoadOptions, MAX_SECONDS, TaskFile, TaskFileError, TaskId, TaskSpec, load_tasks,
    parse_rows,
};
