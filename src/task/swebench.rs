//! SWE-bench 4.1 instances in: instance lines read beside onebash's own
//! task lines, and the answers of an instance graded by SWE-bench's
//! recipe for its repo and version ([`Instance`]).
//!
//! Owns the mapping of an instance's fields to onebash's (`instance_id` ->
//! `id`, `repo` `owner/name` -> a clone location under `--repo-base`,
//! `patch` -> `gold_patch`, `FAIL_TO_PASS`/`PASS_TO_PASS` as JSON-encoded
//! strings or lists, `version`, `environment_setup_commit` and
//! `created_at` into `metadata`, with the `owner/name` as `swebench_repo`),
//! the recipe an instance without a test command is graded by (its eval
//! script, log parser and rules, grade/swebench/), the files a test patch
//! touches (the `test_files` of `--test-command` templates), and the Hub
//! datasets of SWE-bench's fields. swebench 5's rows are instances too
//! (converted here) with their own recipe: swebench5.rs answers for them.
//! `hints_text` and every other field stay on the task, available to
//! prompt templates.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::dataset::Alias;
use crate::grade::Rules;
use crate::task::benchmark::{Benchmark, Code, Tests, Verdict};
use crate::task::error::{FieldError, LineError};
use crate::task::recipe::{Recipe, eval};
use crate::task::source::{Fit, ParsedLine, RecipeResult, Source};
use crate::task::spec::{LoadOptions, TaskSpec};
use crate::task::swebench5::Row;

/// Where `owner/name` repos are cloned from: a URL or a folder of mirrors.
pub(crate) const DEFAULT_REPO_BASE: &str = "https://github.com";

pub(crate) use crate::task::recipe::SWEBENCH_REPO;

/// SWE-bench's image of an instance, as its harness names it (and
/// `grade::swebench::spec::image_name`): what a row of a SWE-bench
/// dataset runs in when it names no image and no `--image` is given.
pub(crate) const IMAGE_TEMPLATE: &str =
    r#"swebench/sweb.eval.x86_64.{{ instance_id | lower | replace("__", "_1776_") }}:latest"#;

/// The name [`ParsedLine::converted_by`] gives the instances read here.
const NAME: &str = "swebench";

/// The datasets of SWE-bench's fields. The repos are the SWE-bench
/// organisation's (princeton-nlp's old names redirect there).
const DATASETS: &[Alias] = &[
    Alias {
        name: "swe-bench-lite",
        repo: "SWE-bench/SWE-bench_Lite",
        split: "test",
        image: Some(IMAGE_TEMPLATE),
        about: "SWE-bench Lite: 300 instances of SWE-bench (test split)",
    },
    Alias {
        name: "swe-bench-verified",
        repo: "SWE-bench/SWE-bench_Verified",
        split: "test",
        image: Some(IMAGE_TEMPLATE),
        about: "SWE-bench Verified: 500 instances checked by people (test split)",
    },
    Alias {
        name: "swe-bench",
        repo: "SWE-bench/SWE-bench",
        split: "test",
        image: Some(IMAGE_TEMPLATE),
        about: "SWE-bench: the full 2,294 instances (test split)",
    },
    Alias {
        name: "swe-bench-multilingual",
        repo: "SWE-bench/SWE-bench_Multilingual",
        split: "test",
        image: Some(IMAGE_TEMPLATE),
        about: "SWE-bench Multilingual: 300 instances in 9 languages (test split)",
    },
    Alias {
        name: "swe-bench-multimodal",
        repo: "SWE-bench/SWE-bench_Multimodal",
        split: "dev",
        image: Some(IMAGE_TEMPLATE),
        about: "SWE-bench Multimodal: 102 JavaScript instances with images (dev split: the test split's tests are withheld)",
    },
    Alias {
        name: "swe-gym",
        repo: "SWE-Gym/SWE-Gym",
        split: "train",
        image: None,
        about: "SWE-Gym: 2,438 instances of 11 Python repos, SWE-bench's fields (train split; give --image)",
    },
];

/// SWE-bench's instance lines and datasets.
pub(crate) struct Swebench;

pub(crate) const SOURCE: Swebench = Swebench;

impl Source for Swebench {
    fn name(&self) -> &'static str {
        NAME
    }

    fn datasets(&self) -> &'static [Alias] {
        DATASETS
    }

    fn reads_line(&self, fields: &Map<String, Value>) -> Option<Fit> {
        is_instance(fields).then_some(Fit::Shape)
    }

    fn convert_line(
        &self,
        fields: &mut Map<String, Value>,
        options: &LoadOptions,
    ) -> Result<(), LineError> {
        Ok(convert(fields, &options.repo_base)?)
    }

    fn grades_itself(&self) -> bool {
        true
    }

    fn repo_in_image(&self) -> bool {
        true
    }

    fn claims(&self, line: &ParsedLine) -> bool {
        line.converted_by == Some(NAME) && !line.row.is_swebench5()
    }

    fn benchmark(&self, line: &ParsedLine, recipe: Option<RecipeResult>) -> Arc<dyn Benchmark> {
        Arc::new(Instance {
            repo_in_image: line.repo_in_image,
            recipe: Recipe(recipe),
        })
    }

    fn recipe(&self, task: &TaskSpec, line: &ParsedLine) -> Option<RecipeResult> {
        Some(eval(task, &line.row))
    }
}

/// A SWE-bench 4.1 instance's answers: the repo its image holds (unless
/// the line says otherwise), graded by its recipe when it has no test
/// command.
#[derive(Debug)]
pub(crate) struct Instance {
    pub repo_in_image: bool,
    pub recipe: Recipe,
}

impl Benchmark for Instance {
    fn task_fields(&self, fields: &mut Map<String, Value>) {
        crate::task::own::repo_in_image_field(self.repo_in_image, fields);
    }

    fn code(&self) -> Code {
        if self.repo_in_image {
            Code::ImageRepo
        } else {
            Code::Checkout
        }
    }

    fn tests(&self) -> Tests<'_> {
        Tests::Command
    }

    fn verdict(&self) -> Verdict<'_> {
        self.recipe.verdict()
    }

    fn default_rules(&self) -> Rules {
        Rules::by_format(false)
    }

    fn cannot_run(&self) -> Option<String> {
        self.recipe.cannot_run()
    }

    fn cannot_regrade(&self) -> Option<String> {
        self.recipe.cannot_regrade()
    }
}

/// A task read back from its trajectory's header (see
/// `TaskSpec::from_header`) given its recipe again when the run graded it
/// by one: `graded_by_recipe` is what the run recorded; a trajectory from
/// before the record (`None`) is taken as graded so when the task is an
/// instance and the header's test command is today's eval script, and
/// when it is not, the answer is a warning (the caller names the task).
pub(crate) fn reread(
    spec: &mut TaskSpec,
    line: &ParsedLine,
    graded_by_recipe: Option<bool>,
) -> Option<String> {
    let is_instance = line.row.is_swebench5()
        || spec
            .metadata
            .as_ref()
            .is_some_and(|m| m.contains_key(SWEBENCH_REPO));
    let recipe = match graded_by_recipe {
        Some(true) => eval(spec, &line.row),
        Some(false) => return None,
        None if is_instance => match eval(spec, &line.row) {
            Ok(eval) if eval.script == spec.test_command => Ok(eval),
            Ok(_) => {
                return Some(
                    "its trajectory does not say whether SWE-bench's recipe graded it, and its test command is not today's eval script, so it is graded by onebash's own rules; hint: regrade it with the onebash that ran it".to_owned(),
                );
            }
            Err(_) => return None,
        },
        None => return None,
    };
    spec.benchmark = if line.row.is_swebench5() {
        Arc::new(Row {
            fields: line.row.clone(),
            repo_in_image: line.repo_in_image,
            recipe: Recipe(Some(recipe)),
        })
    } else {
        Arc::new(Instance {
            repo_in_image: line.repo_in_image,
            recipe: Recipe(Some(recipe)),
        })
    };
    None
}

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
