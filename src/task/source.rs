//! The other half of the benchmark seam: a [`Source`] is a way tasks come
//! in (a line format rewritten into onebash's line, a folder format, the
//! Hub datasets it is known by, a registry's datasets read by name) and
//! picks the [`Benchmark`] handle of each task it reads. Each benchmark's
//! file implements it; registry.rs lists them. Also what a line is,
//! parsed, before its benchmark is chosen ([`ParsedLine`]), and what a
//! source reading by name is given and gives back ([`ReferenceContext`],
//! [`FolderFetch`], [`Referenced`], run.json's [`RegistryRecord`]).

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::dataset::Alias;
use crate::grade::swebench::spec::{SpecError, SwebenchEval};
use crate::task::benchmark::Benchmark;
use crate::task::error::LineError;
use crate::task::spec::{LoadOptions, TaskFile, TaskFileError, TaskSpec};

/// How well a line fits a source's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fit {
    /// It has keys only this format has.
    Keys,
    /// It has the shape of the format (an `instance_id`, no `id`), which
    /// formats named by their own keys share.
    Shape,
}

/// The fields a swebench 5 row carries beyond SWE-bench's twelve (the
/// dataset's `image` is the task's own `image`): read from every line,
/// they make it a swebench 5 row (swebench5.rs).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Swebench5Fields {
    pub eval_script: Option<String>,
    pub log_parser: Option<String>,
    pub eval_type: Option<String>,
}

impl Swebench5Fields {
    /// Whether the row is in swebench 5's format: it carries its own eval
    /// script or log parser.
    pub(crate) fn is_swebench5(&self) -> bool {
        self.eval_script.is_some() || self.log_parser.is_some()
    }
}

/// A grading recipe, or why it cannot be built.
pub(crate) type RecipeResult = Result<SwebenchEval, SpecError>;

/// A task line as parsed, before its benchmark is chosen: what the
/// sources pick a handle by.
#[derive(Debug, Clone)]
pub(crate) struct ParsedLine {
    /// A source rewrote the line from its own format.
    pub converted_by: Option<&'static str>,
    /// `repo_in_image` as written, or the converting source's default.
    pub repo_in_image: bool,
    /// swebench 5's row fields, when the line has them.
    pub row: Swebench5Fields,
}

/// What a source needs to read a reference of its own (a registry's
/// dataset) beyond the reference.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReferenceContext {
    /// `--registry`: the registry to read instead of the source's own.
    pub registry: Option<String>,
    /// What an earlier attempt of the run read (`--resume`): read again,
    /// at the same commits, when it is of the same reference.
    pub pinned: Option<RegistryRecord>,
}

/// A folder of a git repo at a commit, on disk: what a [`FolderFetch`]
/// gives.
#[derive(Debug, Clone)]
pub(crate) struct FetchedFolder {
    pub dir: std::path::PathBuf,
    /// The full sha the revision resolved to.
    pub commit: String,
    /// Whether the repo was fetched for it.
    pub fetched: bool,
    /// Set when the repo could not be refreshed but its copy held the
    /// commit.
    pub warning: Option<String>,
}

/// Why a folder could not be fetched: the checkout stage's error, boxed,
/// as that stage sits above this one.
#[derive(Debug, thiserror::Error)]
#[error("{source}")]
pub(crate) struct FolderError {
    /// The repo itself could not be fetched (rather than a commit or path
    /// it lacks).
    pub repo_unreachable: bool,
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// Fetches folders of git repos at commits, for a source whose tasks are
/// such folders: given by the caller, which may use the checkout stage's
/// repo cache (a layer above the tasks).
pub(crate) trait FolderFetch {
    /// The folder `path` of `repo` at `rev`; `may_fetch`: whether the
    /// repo may be fetched when its cached copy lacks `rev`.
    fn folder(
        &self,
        repo: &str,
        rev: &str,
        path: &str,
        may_fetch: bool,
    ) -> Result<FetchedFolder, FolderError>;
}

/// The tasks of a reference, and what identifies them.
#[derive(Debug)]
pub(crate) struct Referenced {
    pub file: TaskFile,
    pub record: RegistryRecord,
    pub warnings: Vec<String>,
}

/// A registry's dataset as a run read it: in run.json's settings, and
/// read again by a resume.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RegistryRecord {
    /// The argument as typed (`harbor:NAME@VERSION`).
    pub reference: String,
    /// The registry's URL or path, as given.
    pub registry: String,
    /// sha256 of the registry's bytes.
    pub registry_sha256: String,
    /// The dataset read, `NAME@VERSION` (the version chosen when the
    /// reference named none).
    pub dataset: String,
    pub tasks: Vec<RecordedTask>,
}

impl RegistryRecord {
    /// What a resume and the shards of a merge must agree on beyond the
    /// tasks' hash: the dataset and version read.
    pub(crate) fn fingerprint(&self) -> &str {
        &self.dataset
    }
}

/// One task of a registry's dataset: where its folder is, and the commit
/// it was read at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RecordedTask {
    pub id: String,
    /// The repo; none for a folder on this machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_url: Option<String>,
    /// The commit the registry asks for (none: the repo's HEAD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_commit_id: Option<String>,
    /// The folder in the repo.
    pub path: String,
    /// The full sha read; none when the folder could not be had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

/// A way tasks come in: a line format, a folder format, Hub datasets.
pub(crate) trait Source: Sync {
    /// Its name, in errors and in [`ParsedLine::converted_by`].
    fn name(&self) -> &'static str;

    /// The Hub datasets it is known by, in `onebash datasets`' order.
    fn datasets(&self) -> &'static [Alias] {
        &[]
    }

    /// Whether a line's fields, as read, are in its format, and how
    /// surely (registry.rs picks the reader).
    fn reads_line(&self, fields: &Map<String, Value>) -> Option<Fit> {
        let _ = fields;
        None
    }

    /// Rewrites a line of its format into onebash's fields, in place, or
    /// says why onebash cannot use it.
    fn convert_line(
        &self,
        fields: &mut Map<String, Value>,
        options: &LoadOptions,
    ) -> Result<(), LineError> {
        let _ = (fields, options);
        Ok(())
    }

    /// Whether a line it converted may lack a test command (its own
    /// recipe grades it).
    fn grades_itself(&self) -> bool {
        false
    }

    /// `repo_in_image` of a line it converted that does not say.
    fn repo_in_image(&self) -> bool {
        false
    }

    /// Whether it answers for the task read from `line`.
    fn claims(&self, line: &ParsedLine) -> bool {
        let _ = line;
        false
    }

    /// The task's handle; `recipe` is its grading recipe when it has one
    /// (see [`Source::recipe`]).
    fn benchmark(&self, line: &ParsedLine, recipe: Option<RecipeResult>) -> Arc<dyn Benchmark>;

    /// The grading recipe a task it claims gets, when the task has no
    /// test command (neither its own nor `--test-command`'s).
    fn recipe(&self, task: &TaskSpec, line: &ParsedLine) -> Option<RecipeResult> {
        let _ = (task, line);
        None
    }

    /// Reads tasks from `path` when it is in its folder format.
    fn load_path(&self, path: &Path) -> Option<Result<TaskFile, TaskFileError>> {
        let _ = path;
        None
    }

    /// The file that makes a folder one of its tasks (in a Hub dataset
    /// repo made of such folders), when it reads folders.
    fn folder_marker(&self) -> Option<&'static str> {
        None
    }

    /// Reads the tasks of `raw` when it is a reference of its own (a
    /// dataset of a registry it reads).
    fn load_reference(
        &self,
        raw: &str,
        context: &ReferenceContext,
        fetch: &dyn FolderFetch,
    ) -> Option<Result<Referenced, TaskFileError>> {
        let _ = (raw, context, fetch);
        None
    }

    /// The datasets of the registry at `location` (its own when `None`),
    /// one line each, when it reads registries.
    fn registry_datasets(&self, location: Option<&str>) -> Option<Result<String, TaskFileError>> {
        let _ = location;
        None
    }

    /// What `--model oracle` needs of its tasks beyond a gold patch, for
    /// the usage error that lists tasks without one.
    fn oracle_needs(&self) -> Option<&'static str> {
        None
    }

    /// The `--image` template of its published images, and whose images
    /// they are, for the hint of tasks that name no image.
    fn image_template(&self) -> Option<(&'static str, &'static str)> {
        None
    }
}
