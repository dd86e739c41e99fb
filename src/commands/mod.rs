//! The subcommands, one file each.

pub mod compare;
pub mod export;
pub mod html;
pub mod merge;
pub mod output;
pub mod pull;
pub mod report;
pub mod run;
pub mod show;
pub mod stats;
pub mod validate;
