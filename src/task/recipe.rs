//! SWE-bench's grading recipe of an instance (swebench.rs's 4.1
//! instances and swebench5.rs's rows share it): its eval script, log
//! parser and rules from grade/swebench/spec.rs, built from the instance's
//! `owner/name` and version or from a swebench 5 row's own fields, or why
//! it cannot be built; and the answers that follow from it.

use serde_json::Value;

use crate::grade::swebench::spec::{SpecError, SwebenchEval};
use crate::task::benchmark::Verdict;
use crate::task::source::{RecipeResult, Swebench5Fields};
use crate::task::spec::TaskSpec;

/// The metadata key that keeps an instance's `repo` as written.
pub(crate) const SWEBENCH_REPO: &str = "swebench_repo";

/// An instance's grading recipe: `None` when a test command grades it,
/// else SWE-bench's eval or why it cannot be built (the task errors with
/// it, the run goes on).
#[derive(Debug)]
pub(crate) struct Recipe(pub Option<RecipeResult>);

impl Recipe {
    /// The verdict: by the recipe when it was built.
    pub(crate) fn verdict(&self) -> Verdict<'_> {
        match &self.0 {
            Some(Ok(eval)) => Verdict::Recipe(eval),
            _ => Verdict::Tests,
        }
    }

    pub(crate) fn cannot_run(&self) -> Option<String> {
        match &self.0 {
            Some(Err(reason)) => Some(format!(
                "failed to find how SWE-bench grades this task: {reason}"
            )),
            _ => None,
        }
    }

    pub(crate) fn cannot_regrade(&self) -> Option<String> {
        match &self.0 {
            Some(Err(err)) => Some(format!(
                "the run graded it by SWE-bench's recipe, which this onebash cannot build: {err}"
            )),
            _ => None,
        }
    }
}

/// SWE-bench's eval of an instance: a swebench 5 row's own (its
/// `eval_script`, `log_parser`, `eval_type`), else the recipe of the
/// `owner/name` and `version` it came with.
pub(crate) fn eval(task: &TaskSpec, row: &Swebench5Fields) -> Result<SwebenchEval, SpecError> {
    let metadata = task.metadata.as_ref();
    let field = |key: &str| -> Option<String> {
        match metadata?.get(key)? {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    };
    let instance = |repo: &'_ str, version: &'_ str| -> Result<SwebenchEval, SpecError> {
        let instance = crate::grade::swebench::spec::Instance {
            instance_id: task.id.as_str(),
            repo,
            version,
            base_commit: &task.base_commit,
            test_patch: task.test_patch.as_deref().unwrap_or(""),
        };
        if row.is_swebench5() {
            // A swebench 5 row carries its own recipe: no spec is looked up.
            crate::grade::swebench::spec::row_eval(
                &instance,
                row.eval_script.as_deref(),
                row.log_parser.as_deref(),
                row.eval_type.as_deref(),
            )
        } else {
            crate::grade::swebench::spec::eval_for(&instance)
        }
    };
    if row.is_swebench5() {
        let repo = field(SWEBENCH_REPO).unwrap_or_default();
        let version = field("version").unwrap_or_default();
        return instance(&repo, &version);
    }
    let repo = field(SWEBENCH_REPO).ok_or(SpecError::Missing("repo"))?;
    let version = field("version").ok_or(SpecError::Missing("version"))?;
    instance(&repo, &version)
}
