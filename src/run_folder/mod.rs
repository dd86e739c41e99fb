//! Stage 5: what a run leaves, for the run that writes it and every
//! command that reads it back: where each file lives ([`RunFolder`],
//! paths.rs), how a task ended ([`Status`], [`ExitReason`], [`Usage`],
//! outcome.rs: the types every layer shares), one row per (task, epoch)
//! ([`ResultRow`], row.rs), results.csv appended (csv.rs) from a thread of
//! its own (sink.rs) and read back or rewritten whole (read.rs), the
//! SWE-bench predictions (predictions.rs), and the trajectories
//! ([`trajectory`]); why any of it cannot be read or written, with the
//! path ([`RunFolderError`], error.rs). run.json is the settings, `config::manifest`'s.

mod csv;
mod error;
mod outcome;
mod paths;
mod predictions;
mod read;
mod row;
mod sink;
pub(crate) mod trajectory;

pub(crate) use csv::ResultsWriter;
pub(crate) use error::RunFolderError;
pub(crate) use outcome::{ExitReason, Status, Usage};
pub(crate) use paths::{
    BUILD_LOG, PATCH_DIFF, REPORT_JSON, RunFolder, TEST_LOG, TESTS_JSON, TRAJECTORY,
};
pub(crate) use predictions::write_predictions;
pub(crate) use read::{read_rows, replace_rows, write_atomically, write_rows_atomically};
pub(crate) use row::{ResultRow, one_line, round_seconds};
pub(crate) use sink::RowSink;
