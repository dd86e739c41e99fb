//! The subcommands, one file each; `dispatch` calls them from a parsed
//! command line, and `error` maps what failed to its exit code.

pub mod compare;
pub mod dispatch;
pub mod error;
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
