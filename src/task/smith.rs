//! SWE-smith lines: told by their keys (`instance_id`, `image_name`, no
//! `base_commit`) and refused: the bug is a branch of a mirror onebash
//! cannot check out yet (the refusal's text says what to give instead).

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::task::benchmark::Benchmark;
use crate::task::error::{LineError, Refusal};
use crate::task::source::{Fit, ParsedLine, RecipeResult, Source};
use crate::task::spec::LoadOptions;

/// SWE-smith's lines, refused.
pub(crate) struct Smith;

pub(crate) const SOURCE: Smith = Smith;

impl Source for Smith {
    fn name(&self) -> &'static str {
        "swe-smith"
    }

    fn reads_line(&self, fields: &Map<String, Value>) -> Option<Fit> {
        let has = |key: &str| fields.contains_key(key);
        (!has("id") && has("instance_id") && has("image_name") && !has("base_commit"))
            .then_some(Fit::Keys)
    }

    fn convert_line(
        &self,
        fields: &mut Map<String, Value>,
        options: &LoadOptions,
    ) -> Result<(), LineError> {
        let _ = (fields, options);
        Err(Refusal::Smith.into())
    }

    /// Its lines become onebash's own.
    fn benchmark(&self, line: &ParsedLine, recipe: Option<RecipeResult>) -> Arc<dyn Benchmark> {
        let _ = recipe;
        crate::task::own::own_line(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_line_is_refused_for_its_missing_base_commit() {
        let smith = json!({
            "instance_id": "acme__widgets.1f2e3d4c.func_pm_remove_assign__x1y2z3",
            "repo": "swesmith/acme__widgets.1f2e3d4c",
            "patch": "diff --git a/w.py b/w.py\n",
            "FAIL_TO_PASS": ["test/test_w.py::test_empty"],
            "PASS_TO_PASS": [],
            "image_name": "jyangballin/swesmith.x86_64.acme_1776_widgets.1f2e3d4c",
            "problem_statement": "p"
        });
        let mut smith = smith.as_object().cloned().expect("object");
        assert_eq!(SOURCE.reads_line(&smith), Some(Fit::Keys));
        let err = SOURCE
            .convert_line(&mut smith, &LoadOptions::default())
            .expect_err("refused");
        assert!(matches!(err, LineError::Refused(Refusal::Smith)), "{err}");
        assert!(err.to_string().contains("no `base_commit`"), "{err}");
    }
}
