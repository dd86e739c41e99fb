//! SWE-bench Pro (ScaleAI) lines in: told by their own keys
//! (`dockerhub_tag`, `before_repo_set_cmd`, `selected_test_files_to_run`)
//! and rewritten into onebash's line in place: its id, repo, patches, test
//! lists, its image as the set names it and the repo at `/app` in it. Its
//! verdict needs the per-instance run scripts the line does not carry, so
//! a line is read only with `--test-command`, else refused naming the
//! field; the task is then onebash's own line (own.rs).

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::dataset::Alias;
use crate::task::benchmark::Benchmark;
use crate::task::convert::{merge_metadata, rename, set_repo};
use crate::task::error::{FieldError, LineError, Refusal};
use crate::task::source::{Fit, ParsedLine, RecipeResult, Source};
use crate::task::spec::LoadOptions;

/// SWE-bench Pro's lines and dataset.
pub(crate) struct Pro;

pub(crate) const SOURCE: Pro = Pro;

const DATASETS: &[Alias] = &[Alias {
    name: "swe-bench-pro",
    repo: "ScaleAI/SWE-bench_Pro",
    split: "test",
    image: None,
    about: "SWE-bench Pro, the public set: 731 instances, images named by their rows (test split; give --test-command)",
}];

impl Source for Pro {
    fn name(&self) -> &'static str {
        "swe-bench-pro"
    }

    fn datasets(&self) -> &'static [Alias] {
        DATASETS
    }

    fn reads_line(&self, fields: &Map<String, Value>) -> Option<Fit> {
        let has = |key: &str| fields.contains_key(key);
        (!has("id")
            && (has("dockerhub_tag")
                || has("before_repo_set_cmd")
                || has("selected_test_files_to_run")))
        .then_some(Fit::Keys)
    }

    fn convert_line(
        &self,
        fields: &mut Map<String, Value>,
        options: &LoadOptions,
    ) -> Result<(), LineError> {
        pro(fields, options.test_command.is_some(), &options.repo_base)
    }

    /// Its lines become onebash's own.
    fn benchmark(&self, line: &ParsedLine, recipe: Option<RecipeResult>) -> Arc<dyn Benchmark> {
        let _ = recipe;
        crate::task::own::own_line(line)
    }
}

/// SWE-bench Pro: the image `jefzda/sweap-images:<dockerhub_tag>`, the
/// repo at `/app`, the prompt of problem statement, requirements and
/// interface as the set gives it to models.
fn pro(
    fields: &mut Map<String, Value>,
    test_command: bool,
    repo_base: &str,
) -> Result<(), LineError> {
    if !test_command && !fields.contains_key("test_command") {
        return Err(Refusal::ProRunScripts.into());
    }
    rename(fields, "instance_id", "id");
    rename(fields, "patch", "gold_patch");
    for key in ["fail_to_pass", "pass_to_pass", "selected_test_files_to_run"] {
        if let Some(value) = fields.remove(key) {
            fields.insert(key.to_owned(), decode_list(key, value)?);
        }
    }
    let text = |fields: &Map<String, Value>, key: &str| {
        fields
            .get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    if let Some(statement) = text(fields, "problem_statement") {
        let mut prompt = statement;
        if let Some(requirements) = text(fields, "requirements") {
            prompt.push_str(&format!("\n\nRequirements:\n{requirements}"));
        }
        if let Some(interface) = text(fields, "interface") {
            prompt.push_str(&format!("\n\nNew interfaces introduced:\n{interface}"));
        }
        fields.insert("problem_statement".to_owned(), Value::String(prompt));
    }
    let mut metadata = Map::new();
    metadata.insert("dataset".to_owned(), "swe-bench-pro".into());
    if let Some(language) = fields.remove("repo_language") {
        metadata.insert("language".to_owned(), language);
    }
    set_repo(fields, &mut metadata, repo_base);
    if let Some(tag) = text(fields, "dockerhub_tag") {
        fields
            .entry("image")
            .or_insert_with(|| format!("jefzda/sweap-images:{tag}").into());
    }
    fields.entry("workdir").or_insert_with(|| "/app".into());
    fields.entry("repo_in_image").or_insert(Value::Bool(true));
    merge_metadata(fields, metadata);
    Ok(())
}

/// A list of strings, as SWE-bench Pro stores it: a list, a JSON-encoded
/// list, or a Python list literal (`['a', "b"]`).
fn decode_list(field: &'static str, value: Value) -> Result<Value, FieldError> {
    let Value::String(text) = value else {
        return Ok(value);
    };
    if let Ok(list) = serde_json::from_str::<Vec<String>>(&text) {
        return Ok(list.into());
    }
    python_list(&text)
        .map(Value::from)
        .ok_or(FieldError::TestList { field, text })
}

/// Parses a Python list literal of plain string literals (`'...'` or
/// `"..."`, with backslash escapes of the quote and the backslash).
fn python_list(text: &str) -> Option<Vec<String>> {
    let inner = text.trim().strip_prefix('[')?.strip_suffix(']')?;
    let mut items = Vec::new();
    let mut chars = inner.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(quote) = chars.next() else {
            return Some(items);
        };
        if quote != '\'' && quote != '"' {
            return None;
        }
        let mut item = String::new();
        loop {
            match chars.next()? {
                '\\' => item.push(chars.next()?),
                c if c == quote => break,
                c => item.push(c),
            }
        }
        items.push(item);
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        match chars.next() {
            None => return Some(items),
            Some(',') => {}
            Some(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    /// A SWE-bench Pro line with the fields of ScaleAI/SWE-bench_Pro.
    fn pro_line() -> Value {
        json!({
            "repo": "acme/widgets",
            "instance_id": "instance_acme__widgets-1f2e3d4c5b6a79880fedcba9876543210abcdef0-v0123456789abcdef0123456789abcdef01234567",
            "base_commit": "0123456789abcdef0123456789abcdef01234567",
            "patch": "diff --git a/w.py b/w.py\n",
            "test_patch": "diff --git a/test/test_w.py b/test/test_w.py\n",
            "problem_statement": "Widgets crash on empty input.",
            "requirements": "- `parse('')` must return an empty list.",
            "interface": "No new interfaces are introduced.",
            "repo_language": "python",
            "fail_to_pass": "['test/test_w.py::test_empty']",
            "pass_to_pass": "[\"test/test_w.py::test_one\", \"test/test_w.py::test_two\"]",
            "issue_specificity": "[\"major_bug\"]",
            "issue_categories": "[\"back_end_knowledge\"]",
            "before_repo_set_cmd": "git reset --hard 0123456789abcdef0123456789abcdef01234567\ngit clean -fd",
            "selected_test_files_to_run": "[\"test/test_w.py\"]",
            "dockerhub_tag": "acme.widgets-acme__widgets-1f2e3d4c5b6a79880fedcba9876543210abcdef0"
        })
    }

    #[test]
    fn a_pro_line_becomes_a_task_in_its_image() {
        let mut fields = object(pro_line());
        assert_eq!(SOURCE.reads_line(&fields), Some(Fit::Keys));
        pro(&mut fields, true, "https://github.com").expect("converts");
        assert!(
            fields["id"]
                .as_str()
                .is_some_and(|id| id.starts_with("instance_acme__widgets-"))
        );
        assert_eq!(fields["repo"], "https://github.com/acme/widgets.git");
        assert_eq!(fields["gold_patch"], "diff --git a/w.py b/w.py\n");
        assert_eq!(
            fields["fail_to_pass"],
            json!(["test/test_w.py::test_empty"])
        );
        assert_eq!(
            fields["pass_to_pass"],
            json!(["test/test_w.py::test_one", "test/test_w.py::test_two"])
        );
        assert_eq!(
            fields["selected_test_files_to_run"],
            json!(["test/test_w.py"])
        );
        assert_eq!(
            fields["image"],
            "jefzda/sweap-images:acme.widgets-acme__widgets-1f2e3d4c5b6a79880fedcba9876543210abcdef0"
        );
        assert_eq!(fields["workdir"], "/app");
        assert_eq!(fields["repo_in_image"], true);
        assert_eq!(
            fields["problem_statement"],
            "Widgets crash on empty input.\n\nRequirements:\n- `parse('')` must return an empty list.\n\nNew interfaces introduced:\nNo new interfaces are introduced."
        );
        assert_eq!(
            fields["metadata"],
            json!({"dataset": "swe-bench-pro", "language": "python", "dataset_repo": "acme/widgets"})
        );
        assert!(fields.contains_key("before_repo_set_cmd"));
    }

    #[test]
    fn a_line_without_a_test_command_is_refused_naming_the_field() {
        let mut fields = object(pro_line());
        let err = pro(&mut fields, false, "https://github.com").expect_err("refused");
        let text = err.to_string();
        assert!(
            matches!(err, LineError::Refused(_))
                && text.contains("`selected_test_files_to_run`")
                && text.contains("hint: give --test-command"),
            "{err}"
        );
        let mut bad_list = object(pro_line());
        bad_list.insert("fail_to_pass".into(), "[1, 2]".into());
        let err = pro(&mut bad_list, true, "x").expect_err("bad list");
        assert!(
            err.to_string()
                .contains("`fail_to_pass` is a string but not a list"),
            "{err}"
        );
    }

    #[test]
    fn python_list_literals() {
        assert_eq!(python_list("[]"), Some(vec![]));
        assert_eq!(
            python_list(r#"['a', "b's", 'c\'d' ]"#),
            Some(vec!["a".into(), "b's".into(), "c'd".into()])
        );
        assert_eq!(python_list("['a' 'b']"), None);
        assert_eq!(python_list("[1]"), None);
        assert_eq!(python_list("['unclosed]"), None);
    }
}
