//! The subcommands, one file each; `dispatch` calls them from a parsed
//! command line, and `error` maps what failed to its exit code.

pub(crate) mod compare;
pub(crate) mod completions;
pub(crate) mod datasets;
pub mod dispatch;
pub(crate) mod doctor;
pub(crate) mod dry_run;
pub mod error;
pub(crate) mod export;
pub(crate) mod html;
pub(crate) mod man;
pub(crate) mod merge;
pub(crate) mod output;
pub(crate) mod pull;
pub(crate) mod regrade;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod show;
pub(crate) mod show_facts;
pub(crate) mod stats;
pub(crate) mod validate;
