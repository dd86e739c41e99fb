//! The run: each (task, epoch) through its stages, -j at a time ([`run_task`],
//! [`run_tasks`] in tasks.rs), the test stage (test_run.rs), the progress
//! display of the run's events ([`progress`]) and `--resume` ([`resume`]).

mod tasks;
pub mod test_run;

pub use tasks::{RunContext, run_task, run_tasks};
pub mod progress;
pub mod resume;
