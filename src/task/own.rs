//! onebash's own task line (docs/tasks.md): the repo checked out by
//! onebash, or the one its image holds (`repo_in_image`), its test
//! command, graded by its exit code or its per-test lists, and its gold
//! patch for the oracle. Every answer is [`Benchmark`]'s default but
//! where the code comes from. The lines other formats rewrite into
//! onebash's (SWE-bench Pro's, Multi-SWE-bench's) get this handle too.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::task::benchmark::{Benchmark, Code};
use crate::task::source::{ParsedLine, RecipeResult, Source};

/// onebash's own line: it claims every line no other source claims.
pub(crate) struct Own;

pub(crate) const SOURCE: Own = Own;

impl Source for Own {
    fn name(&self) -> &'static str {
        "onebash"
    }

    fn claims(&self, line: &ParsedLine) -> bool {
        let _ = line;
        true
    }

    fn benchmark(&self, line: &ParsedLine, recipe: Option<RecipeResult>) -> Arc<dyn Benchmark> {
        let _ = recipe;
        own_line(line)
    }
}

/// The handle of a line read as onebash's own.
pub(crate) fn own_line(line: &ParsedLine) -> Arc<dyn Benchmark> {
    Arc::new(OwnLine {
        repo_in_image: line.repo_in_image,
    })
}

/// One own line's answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OwnLine {
    /// In a container, the repo is the one the image holds at `workdir`.
    pub repo_in_image: bool,
}

impl Benchmark for OwnLine {
    fn task_fields(&self, fields: &mut Map<String, Value>) {
        repo_in_image_field(self.repo_in_image, fields);
    }

    fn code(&self) -> Code {
        if self.repo_in_image {
            Code::ImageRepo
        } else {
            Code::Checkout
        }
    }
}

/// `repo_in_image` in the task's JSON: written when true, as the line
/// field reads back.
pub(crate) fn repo_in_image_field(repo_in_image: bool, fields: &mut Map<String, Value>) {
    if repo_in_image {
        fields.insert("repo_in_image".to_owned(), Value::Bool(true));
    }
}
