//! The run: each (task, epoch) through its stages, -j at a time ([`run_task`],
//! [`run_tasks`] in tasks.rs), the test stage (test_run.rs), the progress
//! display of the run's events ([`progress`]) and `--resume` ([`resume`]).

mod tasks;
pub(crate) mod test_run;

pub(crate) use tasks::{RunContext, report_json, run_tasks};
pub(crate) mod progress;
pub(crate) mod resume;
