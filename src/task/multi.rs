//! Multi-SWE-bench (ByteDance) lines in: told by their own keys (`org`,
//! `number`, `fix_patch` or `base`) and rewritten into onebash's line in
//! place: its id, repo, base, patches, test lists, its image as the set
//! names it and the repo at `/home/<repo>` in it. Its verdict needs a log
//! parser per repository, which the line does not carry, so a line is
//! read only with `--test-command`, else refused naming the field; the
//! task is then onebash's own line (own.rs).

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::dataset::Alias;
use crate::task::benchmark::Benchmark;
use crate::task::convert::{merge_metadata, rename, set_repo};
use crate::task::error::{FieldError, LineError, Refusal};
use crate::task::source::{Fit, ParsedLine, RecipeResult, Source};
use crate::task::spec::LoadOptions;

/// Multi-SWE-bench's lines and dataset.
pub(crate) struct Multi;

pub(crate) const SOURCE: Multi = Multi;

const DATASETS: &[Alias] = &[Alias {
    name: "multi-swe-bench",
    repo: "ByteDance-Seed/Multi-SWE-bench",
    split: "train",
    image: None,
    about: "Multi-SWE-bench: 1,632 instances in 7 languages, images named by their rows (its files form one split, train; give --test-command)",
}];

impl Source for Multi {
    fn name(&self) -> &'static str {
        "multi-swe-bench"
    }

    fn datasets(&self) -> &'static [Alias] {
        DATASETS
    }

    fn reads_line(&self, fields: &Map<String, Value>) -> Option<Fit> {
        let has = |key: &str| fields.contains_key(key);
        (!has("id") && has("org") && has("number") && (has("fix_patch") || has("base")))
            .then_some(Fit::Keys)
    }

    fn convert_line(
        &self,
        fields: &mut Map<String, Value>,
        options: &LoadOptions,
    ) -> Result<(), LineError> {
        multi(fields, options.test_command.is_some(), &options.repo_base)
    }

    /// Its lines become onebash's own.
    fn benchmark(&self, line: &ParsedLine, recipe: Option<RecipeResult>) -> Arc<dyn Benchmark> {
        let _ = recipe;
        crate::task::own::own_line(line)
    }
}

/// Multi-SWE-bench: the image `mswebench/<org>_m_<repo>:pr-<number>` in
/// lower case, the repo at `/home/<repo>`, the prompt from the resolved
/// issues, FAIL_TO_PASS as the union of `f2p_tests`, `s2p_tests` and
/// `n2p_tests` (each must pass after the fix), PASS_TO_PASS `p2p_tests`.
fn multi(
    fields: &mut Map<String, Value>,
    test_command: bool,
    repo_base: &str,
) -> Result<(), LineError> {
    if !test_command && !fields.contains_key("test_command") {
        return Err(Refusal::MultiParsers.into());
    }
    let string = |fields: &Map<String, Value>, key: &'static str| match fields.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(Value::Number(n)) => Ok(n.to_string()),
        None | Some(Value::Null) => Err(FieldError::Missing(key)),
        Some(_) => Err(FieldError::NotA {
            field: key,
            expected: "a string",
        }),
    };
    let org = string(fields, "org")?;
    let name = string(fields, "repo")?;
    let number = string(fields, "number")?;
    let sha = match fields.get("base").and_then(|b| b.get("sha")) {
        Some(Value::String(sha)) if !sha.is_empty() => sha.clone(),
        _ => return Err(FieldError::Missing("base.sha").into()),
    };
    if !fields.contains_key("problem_statement") {
        let issues = match fields.get("resolved_issues") {
            Some(Value::Array(issues)) if !issues.is_empty() => issues,
            _ => return Err(FieldError::NoIssues.into()),
        };
        let statement: Vec<String> = issues
            .iter()
            .map(|issue| {
                let part = |key: &str| issue.get(key).and_then(Value::as_str).unwrap_or("");
                format!("{}\n{}", part("title"), part("body"))
                    .trim()
                    .to_owned()
            })
            .collect();
        fields.insert(
            "problem_statement".to_owned(),
            Value::String(statement.join("\n\n")),
        );
    }
    let id = match fields.remove("instance_id") {
        Some(Value::String(id)) => id,
        _ => format!("{org}__{name}-{number}"),
    };
    fields.insert("id".to_owned(), Value::String(id));
    fields.insert("base_commit".to_owned(), Value::String(sha));
    rename(fields, "fix_patch", "gold_patch");
    let mut fail_to_pass = Vec::new();
    for key in ["f2p_tests", "s2p_tests", "n2p_tests"] {
        fail_to_pass.extend(test_names(fields, key)?);
    }
    let pass_to_pass = test_names(fields, "p2p_tests")?;
    fields.insert("fail_to_pass".to_owned(), fail_to_pass.into());
    fields.insert("pass_to_pass".to_owned(), pass_to_pass.into());
    let image = format!("mswebench/{org}_m_{name}:pr-{number}").to_lowercase();
    fields.entry("image").or_insert_with(|| image.into());
    fields
        .entry("workdir")
        .or_insert_with(|| format!("/home/{name}").into());
    fields.entry("repo_in_image").or_insert(Value::Bool(true));
    fields.insert("repo".to_owned(), Value::String(format!("{org}/{name}")));
    let mut metadata = Map::new();
    metadata.insert("dataset".to_owned(), "multi-swe-bench".into());
    metadata.insert("number".to_owned(), Value::String(number));
    set_repo(fields, &mut metadata, repo_base);
    merge_metadata(fields, metadata);
    Ok(())
}

/// The test names of a Multi-SWE-bench map (name -> its runs' statuses).
fn test_names(
    fields: &mut Map<String, Value>,
    key: &'static str,
) -> Result<Vec<String>, FieldError> {
    match fields.remove(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(map)) => Ok(map.keys().cloned().collect()),
        Some(_) => Err(FieldError::NotA {
            field: key,
            expected: "an object of test names",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    /// A Multi-SWE-bench line with the fields of ByteDance-Seed/Multi-SWE-bench.
    fn multi_line() -> Value {
        json!({
            "org": "Acme", "repo": "Gizmo", "number": 42, "state": "closed",
            "title": "Fix the gizmo", "body": "Fixes #41",
            "base": {"label": "acme:main", "ref": "main", "sha": "89abcdef0123456789abcdef0123456789abcdef"},
            "resolved_issues": [{"number": 41, "title": "Gizmo panics", "body": "on empty input"}],
            "fix_patch": "diff --git a/g.go b/g.go\n",
            "test_patch": "diff --git a/g_test.go b/g_test.go\n",
            "fixed_tests": {"TestEmpty": {"run": "NONE", "test": "FAIL", "fix": "PASS"}},
            "p2p_tests": {"TestOne": {"run": "PASS", "test": "PASS", "fix": "PASS"}},
            "f2p_tests": {"TestEmpty": {"run": "FAIL", "test": "FAIL", "fix": "PASS"}},
            "s2p_tests": {"TestSkipped": {"run": "SKIP", "test": "SKIP", "fix": "PASS"}},
            "n2p_tests": {},
            "run_result": {"passed_count": 1, "failed_count": 0, "skipped_count": 1},
            "test_patch_result": {"passed_count": 1, "failed_count": 1, "skipped_count": 1},
            "fix_patch_result": {"passed_count": 3, "failed_count": 0, "skipped_count": 0},
            "instance_id": "Acme__Gizmo-42"
        })
    }

    #[test]
    fn a_multi_line_becomes_a_task_in_its_image() {
        let mut fields = object(multi_line());
        assert_eq!(SOURCE.reads_line(&fields), Some(Fit::Keys));
        multi(&mut fields, true, "/mirrors").expect("converts");
        assert_eq!(fields["id"], "Acme__Gizmo-42");
        assert_eq!(fields["repo"], "/mirrors/Acme/Gizmo.git");
        assert_eq!(
            fields["base_commit"],
            "89abcdef0123456789abcdef0123456789abcdef"
        );
        assert_eq!(fields["problem_statement"], "Gizmo panics\non empty input");
        assert_eq!(fields["gold_patch"], "diff --git a/g.go b/g.go\n");
        assert_eq!(fields["fail_to_pass"], json!(["TestEmpty", "TestSkipped"]));
        assert_eq!(fields["pass_to_pass"], json!(["TestOne"]));
        assert_eq!(fields["image"], "mswebench/acme_m_gizmo:pr-42");
        assert_eq!(fields["workdir"], "/home/Gizmo");
        assert_eq!(fields["metadata"]["dataset_repo"], "Acme/Gizmo");
    }

    #[test]
    fn a_line_without_a_test_command_or_a_base_is_refused() {
        let mut fields = object(multi_line());
        let err = multi(&mut fields, false, "https://github.com").expect_err("refused");
        let text = err.to_string();
        assert!(
            matches!(err, LineError::Refused(_))
                && text.contains("`f2p_tests`")
                && text.contains("hint: give --test-command"),
            "{err}"
        );
        let mut no_base = object(multi_line());
        no_base.remove("base");
        let err = multi(&mut no_base, true, "x").expect_err("no base");
        assert_eq!(err.to_string(), "missing required field `base.sha`");
    }
}
