//! What can be wrong with one line of a task file ([`LineError`]): a field
//! ([`FieldError`], naming the field, what is wrong and the value found),
//! the id ([`IdError`]), a line of the SWE-bench family onebash cannot use
//! ([`Refusal`]), a template flag that does not render for the line.
//! [`BadLine`] puts `FILE:LINE:` before it; `spec.rs`'s `TaskFileError`
//! lists the bad lines. The texts are those of docs/tasks.md, matched by
//! the tests: change them there too. It does not cover a Harbor task
//! folder (`harbor.rs`'s `HarborError`). Also what can be wrong with a
//! Harbor registry or a dataset of it ([`RegistryError`], for
//! harbor_registry.rs), here so that `spec.rs`'s `TaskFileError` can carry
//! it without depending on the file that reads registries.

use serde_json::Number;

/// Why a string is not a task id (`TaskId`, spec.rs).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum IdError {
    #[error("`id` must be 1 to 128 characters long, got {0}")]
    Length(usize),
    #[error("`id` {id:?} contains {bad:?}; only letters, digits, `.`, `_` and `-` are allowed")]
    Character { id: String, bad: char },
    #[error("`id` {0:?} would name a parent or current folder")]
    Dots(String),
}

/// One field of a task line that is missing or does not fit.
#[derive(Debug, thiserror::Error)]
pub enum FieldError {
    #[error("missing required field `{0}`")]
    Missing(&'static str),
    /// A value of the wrong JSON kind; `got` is the kind found (`a number`).
    #[error("`{field}` must be {expected}, got {got}")]
    Kind {
        field: &'static str,
        expected: &'static str,
        got: &'static str,
    },
    /// The same, where the line's set gives no kind found.
    #[error("`{field}` must be {expected}")]
    NotA {
        field: &'static str,
        expected: &'static str,
    },
    /// A list with an item that is not a string.
    #[error("`{field}` must be a list of strings, found {got}")]
    Item {
        field: &'static str,
        got: &'static str,
    },
    #[error("`{field}` must be a positive number of seconds, at most {at_most:e}, got {value}")]
    Seconds {
        field: &'static str,
        at_most: f64,
        value: Number,
    },
    #[error("`{0}` must not be empty")]
    Empty(&'static str),
    #[error("`workdir` must be an absolute path other than `/`, got {0:?}")]
    Workdir(String),
    #[error(transparent)]
    Id(#[from] IdError),
    /// SWE-bench's `FAIL_TO_PASS`/`PASS_TO_PASS`, a string that is not JSON.
    #[error("`{field}` is a string but not a JSON list of test names: {source}")]
    TestListJson {
        field: &'static str,
        source: serde_json::Error,
    },
    /// SWE-bench Pro's lists, a string that is neither JSON nor a Python
    /// list literal (its first 80 characters in the message).
    #[error("`{field}` is a string but not a list of test names: {text:.80}")]
    TestList { field: &'static str, text: String },
    /// A Multi-SWE-bench line without the issues its prompt is made of.
    #[error("missing required field `resolved_issues` (the issues the prompt is made of)")]
    NoIssues,
}

/// A line of the SWE-bench family that onebash cannot use as it is; each
/// says why and what to give instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "a SWE-smith line has no `base_commit`: its bug is the branch named by `instance_id` in the `swesmith/` mirror of `repo`, which onebash cannot check out yet; hint: give the line a `base_commit` (a commit of the repo holding the bug) and a `test_command`, or drop it"
    )]
    Smith,
    #[error(
        "a SWE-bench Pro line: `selected_test_files_to_run` names its tests, but they are run and read by the per-instance run_script.sh and parser.py of scaleapi/SWE-bench_Pro-os, which the line does not carry; hint: give --test-command TEMPLATE (over `selected_test_files_to_run`, `fail_to_pass`...)"
    )]
    ProRunScripts,
    #[error(
        "a Multi-SWE-bench line: `f2p_tests` and `p2p_tests` are read from its test log by a parser per repository (the multi_swe_bench package's instance classes), which onebash does not have yet; hint: give --test-command TEMPLATE (the verdict is then onebash's: the exit code, or the pytest/JUnit statuses of the listed tests)"
    )]
    MultiParsers,
}

/// What is wrong with one line of a task file.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    #[error("not valid JSON: {0}")]
    Json(#[source] serde_json::Error),
    #[error("expected a JSON object")]
    NotAnObject,
    /// A dataset's row that could not be read: where in its file, and why.
    #[error("{place}: {why}")]
    Unreadable {
        place: String,
        why: crate::dataset::RowFault,
    },
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// Every field that is wrong, in the order they are read.
    #[error("{}", join(.0))]
    Fields(Vec<FieldError>),
    #[error("internal error: a required field went missing")]
    RequiredGone,
    /// `--test-command` or `--image` over the line's fields.
    #[error("failed to render {flag} for this task: {source}")]
    Render {
        flag: &'static str,
        source: minijinja::Error,
    },
    #[error("{flag} renders to an empty value for this task")]
    RendersEmpty { flag: &'static str },
    #[error("duplicate id {0:?} (ids must be unique in the file)")]
    DuplicateId(String),
}

impl From<FieldError> for LineError {
    fn from(error: FieldError) -> Self {
        LineError::Fields(vec![error])
    }
}

fn join(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// A bad line, where it is: `FILE:LINE: what is wrong`.
#[derive(Debug, thiserror::Error)]
#[error("{file}:{line}: {error}")]
pub struct BadLine {
    /// The task file as named on the command line.
    pub file: String,
    /// 1-based.
    pub line: usize,
    pub error: LineError,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bad line names its file, its line, each field and the value
    /// found, in the words docs/tasks.md lists.
    #[test]
    fn a_bad_line_names_the_file_the_line_and_each_field() {
        let bad = BadLine {
            file: "tasks.jsonl".to_owned(),
            line: 3,
            error: LineError::Fields(vec![
                FieldError::Kind {
                    field: "id",
                    expected: "a string",
                    got: "a number",
                },
                FieldError::Seconds {
                    field: "test_timeout_s",
                    at_most: 1e9,
                    value: Number::from(-1),
                },
                FieldError::Workdir("testbed".to_owned()),
            ]),
        };
        assert_eq!(
            bad.to_string(),
            "tasks.jsonl:3: `id` must be a string, got a number; \
             `test_timeout_s` must be a positive number of seconds, at most 1e9, got -1; \
             `workdir` must be an absolute path other than `/`, got \"testbed\""
        );
        let long = FieldError::TestList {
            field: "fail_to_pass",
            text: "x".repeat(100),
        };
        assert!(long.to_string().ends_with(&format!(": {}", "x".repeat(80))));
    }
}

/// Why a registry or a dataset of it cannot be read. Messages read after
/// "failed to", with a hint where the user can do something.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error(
        "failed to read {raw}: {why}\nhint: name a dataset as harbor:NAME or harbor:NAME@VERSION"
    )]
    BadReference { raw: String, why: &'static str },
    #[error("failed to read the registry {}: {source}", path.display())]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("failed to fetch the registry {url}: {source}")]
    Fetch { url: String, source: reqwest::Error },
    #[error("failed to fetch the registry {url}: the server answered {status}")]
    Status { url: String, status: u16 },
    #[error(
        "failed to read the registry {location}: it is not a registry.json (a list of datasets, each a name, version, description and tasks): {source}"
    )]
    Json {
        location: String,
        source: serde_json::Error,
    },
    #[error("failed to find the dataset {name} in the registry {location}{}", close_hint(.close, .location))]
    NoDataset {
        name: String,
        location: String,
        close: Vec<String>,
    },
    #[error("failed to find version {version} of the dataset {name} in the registry {location}\nhint: its versions are {}", .versions.join(", "))]
    NoVersion {
        name: String,
        version: String,
        location: String,
        versions: Vec<String>,
    },
    /// onebash names a task by its folder, so two folders of one name
    /// would be one task twice in results.csv.
    #[error(
        "failed to read {dataset}: two of its tasks are folders named {id} ({first} and {second}); onebash names a task by its folder's name"
    )]
    DuplicateId {
        dataset: String,
        id: String,
        first: String,
        second: String,
    },
    #[error("failed to read {dataset}: it holds no task")]
    Empty { dataset: String },
    /// Harbor refuses the same paths (`normalize_git_task_path`).
    #[error("failed to read {dataset}: the task {task} has the path {path:?}, which {why}")]
    BadPath {
        dataset: String,
        task: String,
        path: String,
        why: &'static str,
    },
}

impl RegistryError {
    /// The registry's server could not be reached (not an answer of it).
    pub(crate) fn unreachable(&self) -> bool {
        matches!(self, RegistryError::Fetch { .. })
    }
}

/// The hint of a dataset name the registry lacks: the close names, or how
/// to list them all.
fn close_hint(close: &[String], location: &str) -> String {
    if close.is_empty() {
        format!("\nhint: `onebash datasets --registry {location}` lists its datasets")
    } else {
        format!("\nhint: did you mean {}?", close.join(", "))
    }
}
