//! The newer SWE-bench family in: instance lines of SWE-bench Pro
//! (ScaleAI), Multi-SWE-bench (ByteDance) and SWE-smith, read beside
//! onebash's own lines and SWE-bench's.
//!
//! Owns telling those formats apart by their fields ([`detect`]) and
//! rewriting a line into onebash's fields in place ([`convert`]): its id,
//! repo, base, patches, test lists, its image as the set names it and the
//! folder the repo is at in that image. Where a set's verdict needs what
//! the line does not carry (SWE-bench Pro's per-instance run scripts,
//! Multi-SWE-bench's per-repository log parsers) the line is read only
//! with `--test-command`, else refused with a message naming the field;
//! SWE-smith lines, which have no base commit, are refused. SWE-bench
//! Multilingual and SWE-Gym lines have SWE-bench's own fields and are
//! read by `swebench.rs`.

use serde_json::{Map, Value};

use crate::task::error::{FieldError, LineError, Refusal};

/// Which set a line comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    /// ScaleAI's SWE-bench Pro: `dockerhub_tag`, `before_repo_set_cmd`,
    /// lowercase `fail_to_pass`...
    Pro,
    /// ByteDance's Multi-SWE-bench: `org`, `repo`, `number`, `base.sha`,
    /// `fix_patch`, `f2p_tests`...
    Multi,
    /// SWE-smith: `instance_id`, `image_name`, `patch`, no `base_commit`.
    Smith,
}

/// The set a line's fields say it is from, if one of these.
pub(crate) fn detect(fields: &Map<String, Value>) -> Option<Family> {
    if fields.contains_key("id") {
        return None;
    }
    let has = |key: &str| fields.contains_key(key);
    if has("dockerhub_tag") || has("before_repo_set_cmd") || has("selected_test_files_to_run") {
        Some(Family::Pro)
    } else if has("org") && has("number") && (has("fix_patch") || has("base")) {
        Some(Family::Multi)
    } else if has("instance_id") && has("image_name") && !has("base_commit") {
        Some(Family::Smith)
    } else {
        None
    }
}

/// Rewrites a line of `family` into onebash's fields, in place, or says
/// why onebash cannot use it. `test_command` is whether `--test-command`
/// gives tasks one; `repo_base` is `--repo-base`.
pub(crate) fn convert(
    family: Family,
    fields: &mut Map<String, Value>,
    test_command: bool,
    repo_base: &str,
) -> Result<(), LineError> {
    match family {
        Family::Pro => pro(fields, test_command, repo_base),
        Family::Multi => multi(fields, test_command, repo_base),
        Family::Smith => Err(Refusal::Smith.into()),
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

/// `repo` as `owner/name` becomes its clone location under `repo_base`;
/// the name is kept in metadata as `dataset_repo`.
fn set_repo(fields: &mut Map<String, Value>, metadata: &mut Map<String, Value>, repo_base: &str) {
    if let Some(Value::String(repo)) = fields.get("repo").cloned()
        && repo.split('/').count() == 2
        && !repo.contains("..")
        && !repo.contains("://")
    {
        let location = crate::task::swebench::repo_location(repo_base, &repo);
        fields.insert("repo".to_owned(), Value::String(location));
        metadata.insert("dataset_repo".to_owned(), Value::String(repo));
    }
}

/// Adds `extra` to the line's `metadata` object (made when absent).
fn merge_metadata(fields: &mut Map<String, Value>, extra: Map<String, Value>) {
    let mut metadata = match fields.remove("metadata") {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    for (key, value) in extra {
        metadata.entry(key).or_insert(value);
    }
    fields.insert("metadata".to_owned(), Value::Object(metadata));
}

fn rename(fields: &mut Map<String, Value>, from: &str, to: &str) {
    if let Some(value) = fields.remove(from) {
        fields.insert(to.to_owned(), value);
    }
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
    fn a_pro_line_becomes_a_task_in_its_image() {
        let mut fields = object(pro_line());
        assert_eq!(detect(&fields), Some(Family::Pro));
        convert(Family::Pro, &mut fields, true, "https://github.com").expect("converts");
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
    fn a_multi_line_becomes_a_task_in_its_image() {
        let mut fields = object(multi_line());
        assert_eq!(detect(&fields), Some(Family::Multi));
        convert(Family::Multi, &mut fields, true, "/mirrors").expect("converts");
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
    fn lines_onebash_cannot_grade_are_refused_naming_the_field() {
        let cases = [
            (pro_line(), Family::Pro, "`selected_test_files_to_run`"),
            (multi_line(), Family::Multi, "`f2p_tests`"),
        ];
        for (line, family, field) in cases {
            let mut fields = object(line);
            let err =
                convert(family, &mut fields, false, "https://github.com").expect_err("refused");
            let text = err.to_string();
            assert!(
                matches!(err, LineError::Refused(_))
                    && text.contains(field)
                    && text.contains("hint: give --test-command"),
                "{err}"
            );
        }
        let smith = object(json!({
            "instance_id": "acme__widgets.1f2e3d4c.func_pm_remove_assign__x1y2z3",
            "repo": "swesmith/acme__widgets.1f2e3d4c",
            "patch": "diff --git a/w.py b/w.py\n",
            "FAIL_TO_PASS": ["test/test_w.py::test_empty"],
            "PASS_TO_PASS": [],
            "image_name": "jyangballin/swesmith.x86_64.acme_1776_widgets.1f2e3d4c",
            "problem_statement": "p"
        }));
        assert_eq!(detect(&smith), Some(Family::Smith));
        let err = convert(Family::Smith, &mut smith.clone(), true, "x").expect_err("refused");
        assert!(matches!(err, LineError::Refused(Refusal::Smith)), "{err}");
        assert!(err.to_string().contains("no `base_commit`"), "{err}");
        let mut no_base = object(multi_line());
        no_base.remove("base");
        let err = convert(Family::Multi, &mut no_base, true, "x").expect_err("no base");
        assert_eq!(err.to_string(), "missing required field `base.sha`");
        let mut bad_list = object(pro_line());
        bad_list.insert("fail_to_pass".into(), "[1, 2]".into());
        let err = convert(Family::Pro, &mut bad_list, true, "x").expect_err("bad list");
        assert!(
            err.to_string()
                .contains("`fail_to_pass` is a string but not a list"),
            "{err}"
        );
    }

    #[test]
    fn swebench_lines_and_onebash_lines_are_none_of_these() {
        let swebench = object(
            json!({"instance_id": "a__b-1", "repo": "a/b", "base_commit": "c", "FAIL_TO_PASS": "[]"}),
        );
        assert_eq!(detect(&swebench), None);
        let own = object(json!({"id": "t", "org": "x", "number": 1, "base": {}}));
        assert_eq!(detect(&own), None);
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
