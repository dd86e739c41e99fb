//! Datasets from the Hugging Face Hub, by reference (`hf:OWNER/NAME@REV:SPLIT`
//! or a short name such as `swe-bench-lite`), into a checked local cache,
//! read as rows of JSON fields. Below the task stage, which turns the rows
//! into tasks; it depends on nothing of onebash but `sys` (its file lock).
//!
//! - reference.rs: [`DatasetRef`] and [`Alias`], telling a reference
//!   from a path (the short names are the benchmarks', given by `task/`);
//! - settings.rs: [`HubSettings`], the endpoint, token and offline mode
//!   from the environment;
//! - open.rs: [`open`], which resolves the revision, finds the split's
//!   files and downloads what the cache lacks, into a [`Dataset`];
//! - hub.rs: the Hub's HTTP API (revision, tree listing, resumed
//!   downloads, its errors);
//! - folders.rs: a repo made of folders (each holding a marker file the
//!   caller names) instead of data files, copied out as real files;
//! - splits.rs: which files make up a split (the card's configs, the
//!   naming rules of the `datasets` library), with glob.rs's globs;
//! - cache.rs: the cache's layout, manifests, refs and hash checks;
//! - rows.rs: [`Dataset::rows`], Parquet, JSON Lines and JSON read row by
//!   row;
//! - error.rs: [`DatasetError`] (with its exit code) and [`RowError`].

mod cache;
mod error;
mod folders;
mod glob;
mod hub;
mod open;
mod reference;
mod rows;
mod settings;
mod splits;
#[cfg(test)]
mod tests;

pub(crate) use error::{DatasetError, RowError, RowFault};
#[cfg(test)]
pub(crate) use open::open;
pub(crate) use open::{Dataset, open_with};
pub(crate) use reference::{Alias, DatasetRef};
pub(crate) use settings::HubSettings;
