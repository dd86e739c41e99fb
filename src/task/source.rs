//! The other half of the benchmark seam: a [`Source`] is a way tasks come
//! in (a line format rewritten into onebash's line, a folder format, the
//! Hub datasets it is known by) and picks the [`Benchmark`] handle of each
//! task it reads. Each benchmark's file implements it; registry.rs lists
//! them. Also what a line is, parsed, before its benchmark is chosen
//! ([`ParsedLine`]).

use std::path::Path;
use std::sync::Arc;

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
