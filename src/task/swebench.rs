//! SWE-bench in: instance lines read beside onebash's own task lines.
//!
//! Owns the mapping of an instance's fields to onebash's (`instance_id` ->
//! `id`, `repo` `owner/name` -> a clone location under `--repo-base`,
//! `patch` -> `gold_patch`, `FAIL_TO_PASS`/`PASS_TO_PASS` as JSON-encoded
//! strings or lists, `version`, `environment_setup_commit` and
//! `created_at` into `metadata`, with the `owner/name` as `swebench_repo`),
//! and the files a test patch touches (the
//! `test_files` of `--test-command` templates). `hints_text` and every other
//! field stay on the task, available to prompt templates.

use std::path::Path;

use serde_json::{Map, Value};

use crate::task::error::FieldError;

/// Where `owner/name` repos are cloned from: a URL or a folder of mirrors.
pub(crate) const DEFAULT_REPO_BASE: &str = "https://github.com";

/// The metadata key that keeps an instance's `repo` as written.
pub(crate) const SWEBENCH_REPO: &str = "swebench_repo";

/// Whether a task line is a SWE-bench instance.
pub(crate) fn is_instance(fields: &Map<String, Value>) -> bool {
    fields.contains_key("instance_id") && !fields.contains_key("id")
}

/// Rewrites an instance's fields into onebash's, in place.
pub(crate) fn convert(fields: &mut Map<String, Value>, repo_base: &str) -> Result<(), FieldError> {
    if let Some(id) = fields.remove("instance_id") {
        fields.insert("id".to_owned(), id);
    }
    if let Some(patch) = fields.remove("patch") {
        fields.insert("gold_patch".to_owned(), patch);
    }
    for (from, to) in [
        ("FAIL_TO_PASS", "fail_to_pass"),
        ("PASS_TO_PASS", "pass_to_pass"),
    ] {
        if let Some(value) = fields.remove(from) {
            fields.insert(to.to_owned(), decode_test_list(from, value)?);
        }
    }
    // The instance's `owner/name` picks SWE-bench's eval spec
    // (grade/swebench/spec.rs); `repo` becomes a clone location.
    let instance_repo = fields.get("repo").cloned();
    match fields.get("repo") {
        Some(Value::String(repo)) if is_owner_name(repo) => {
            let location = repo_location(repo_base, repo);
            fields.insert("repo".to_owned(), Value::String(location));
        }
        _ => {}
    }
    let mut metadata = match fields.remove("metadata") {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    for key in ["version", "environment_setup_commit", "created_at"] {
        if let Some(value) = fields.remove(key) {
            metadata.insert(key.to_owned(), value);
        }
    }
    if let Some(repo) = instance_repo {
        metadata.insert(SWEBENCH_REPO.to_owned(), repo);
    }
    fields.insert("metadata".to_owned(), Value::Object(metadata));
    Ok(())
}

/// SWE-bench stores the test lists as JSON-encoded strings; some copies
/// hold real lists.
fn decode_test_list(field: &'static str, value: Value) -> Result<Value, FieldError> {
    match value {
        Value::String(text) => serde_json::from_str::<Vec<String>>(&text)
            .map(|list| Value::Array(list.into_iter().map(Value::String).collect()))
            .map_err(|source| FieldError::TestListJson { field, source }),
        other => Ok(other),
    }
}

fn is_owner_name(repo: &str) -> bool {
    let mut parts = repo.split('/');
    let (Some(owner), Some(name), None) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let ok = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    ok(owner) && ok(name) && !repo.contains("..")
}

/// `BASE/owner/name.git` for a URL; for a folder, `owner/name.git` or
/// `owner/name` inside it, whichever exists (`.git` when neither does, so
/// the checkout error names the expected path).
pub(crate) fn repo_location(base: &str, repo: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.contains("://") {
        return format!("{base}/{repo}.git");
    }
    let bare = Path::new(base).join(format!("{repo}.git"));
    let plain = Path::new(base).join(repo);
    if !bare.exists() && plain.exists() {
        plain.display().to_string()
    } else {
        bare.display().to_string()
    }
}

/// The files a unified diff touches (its `b/` side), in order.
pub(crate) fn patch_files(patch: &str) -> Vec<String> {
    let mut files = Vec::new();
    for line in patch.lines() {
        if let Some(rest) = line.strip_prefix("diff --git ")
            && let Some((_, b)) = rest.split_once(" b/")
            && !files.iter().any(|f| f == b)
        {
            files.push(b.to_owned());
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_instance_becomes_a_task() {
        let mut fields = json!({
            "instance_id": "psf__requests-1234",
            "repo": "psf/requests",
            "base_commit": "abc",
            "patch": "diff --git a/x b/x",
            "test_patch": "diff --git a/tests/t.py b/tests/t.py",
            "problem_statement": "p",
            "hints_text": "look here",
            "FAIL_TO_PASS": "[\"tests/t.py::test_a\"]",
            "PASS_TO_PASS": ["tests/t.py::test_b"],
            "version": "2.0",
            "environment_setup_commit": "def",
        })
        .as_object()
        .cloned()
        .expect("object");
        assert!(is_instance(&fields));
        convert(&mut fields, "https://github.com").expect("converts");
        assert_eq!(fields["id"], "psf__requests-1234");
        assert_eq!(fields["repo"], "https://github.com/psf/requests.git");
        assert_eq!(fields["gold_patch"], "diff --git a/x b/x");
        assert_eq!(fields["fail_to_pass"], json!(["tests/t.py::test_a"]));
        assert_eq!(fields["pass_to_pass"], json!(["tests/t.py::test_b"]));
        assert_eq!(
            fields["metadata"],
            json!({"version": "2.0", "environment_setup_commit": "def", "swebench_repo": "psf/requests"})
        );
        assert_eq!(fields["hints_text"], "look here");
        assert!(!fields.contains_key("instance_id") && !fields.contains_key("patch"));
    }

    #[test]
    fn bad_test_lists_are_errors() {
        let mut fields = json!({"instance_id": "a", "FAIL_TO_PASS": "not json"})
            .as_object()
            .cloned()
            .expect("object");
        let err = convert(&mut fields, DEFAULT_REPO_BASE).expect_err("bad list");
        assert!(
            matches!(
                err,
                FieldError::TestListJson {
                    field: "FAIL_TO_PASS",
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("`FAIL_TO_PASS`"), "{err}");
    }

    #[test]
    fn repo_bases_are_urls_or_folders_of_mirrors() {
        assert_eq!(
            repo_location("https://example.com/", "a/b"),
            "https://example.com/a/b.git"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let base = dir.path().display().to_string();
        assert_eq!(repo_location(&base, "a/b"), format!("{base}/a/b.git"));
        std::fs::create_dir_all(dir.path().join("a/b")).expect("mkdir");
        assert_eq!(repo_location(&base, "a/b"), format!("{base}/a/b"));
        assert!(!is_owner_name("../x"));
        assert!(!is_owner_name("a/b/c"));
        assert!(is_owner_name("django/django"));
    }

    #[test]
    fn files_of_a_patch() {
        let patch = "diff --git a/tests/a.py b/tests/a.py\n--- a/tests/a.py\n+++ b/tests/a.py\n@@ -1 +1 @@\n-x\n+y\ndiff --git a/new.py b/new.py\n";
        assert_eq!(patch_files(patch), vec!["tests/a.py", "new.py"]);
    }
}
