//! The subcommands, one file each.

pub mod compare;
pub mod merge;
pub mod report;
pub mod run;
pub mod show;
