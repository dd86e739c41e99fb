//! Stage 1: the tasks. [`TaskSpec`] and the line parser (spec.rs), and
//! every way tasks come in: a SWE-bench instance ([`swebench`]) and its
//! family of datasets ([`swebench_family`]), a Harbor task folder
//! ([`harbor`]); and the prompt a task is rendered into ([`prompt`]).
//! What can be wrong with a task line is in error.rs ([`LineError`]).

mod error;
pub mod harbor;
pub mod prompt;
mod spec;
pub mod swebench;
pub mod swebench_family;

pub use error::{BadLine, FieldError, IdError, LineError, Refusal};
pub use spec::{
    HarborTask, LoadOptions, MAX_SECONDS, TaskFile, TaskFileError, TaskId, TaskSpec, load_tasks,
    parse_tasks, parse_tasks_with,
};
