//! The subcommands, one file each.

pub mod merge;
pub mod report;
pub mod run;
