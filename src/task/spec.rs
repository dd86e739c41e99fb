//! Stage 1: the task spec and the task file's types.
//!
//! Owns [`TaskSpec`] (with its benchmark's handle, task/benchmark.rs),
//! [`TaskId`], [`TaskFile`] and [`LoadOptions`]; reading lines into them
//! is lines.rs's. It does not know how a task is checked out, run or
//! graded.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::grade::Rules;
use crate::task::benchmark::Benchmark;
use crate::task::error::{BadLine, IdError};

/// The longest duration a flag or a task field can give, in seconds (about
/// 31 years). A deadline is the start of a command or task plus its
/// duration, and must fit in an `Instant`: far larger values made a task
/// panic.
pub(crate) const MAX_SECONDS: f64 = 1e9;

/// How many bad lines are listed before the rest are only counted.
const MAX_LISTED_ERRORS: usize = 20;

/// A task id: `[A-Za-z0-9._-]`, 1..128 characters, never `.` or `..`, so it can
/// name a folder without escaping it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct TaskId(String);

impl TryFrom<String> for TaskId {
    type Error = IdError;
    fn try_from(raw: String) -> Result<TaskId, IdError> {
        TaskId::parse(&raw)
    }
}

impl From<TaskId> for String {
    fn from(id: TaskId) -> String {
        id.0
    }
}

impl TaskId {
    pub fn parse(raw: &str) -> Result<TaskId, IdError> {
        if raw.is_empty() || raw.len() > 128 {
            return Err(IdError::Length(raw.len()));
        }
        if let Some(bad) = raw
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return Err(IdError::Character {
                id: raw.to_owned(),
                bad,
            });
        }
        if raw == "." || raw == ".." {
            return Err(IdError::Dots(raw.to_owned()));
        }
        Ok(TaskId(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One task, validated. Field meanings are those of docs/tasks.md.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TaskSpec {
    pub id: TaskId,
    /// The repo as written in the task file.
    pub repo: String,
    /// Where to fetch from: the URL as written, or a relative path resolved
    /// against the task file's folder.
    pub repo_location: String,
    pub base_commit: String,
    pub problem_statement: String,
    pub test_command: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub setup_command: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test_patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gold_patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fail_to_pass: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pass_to_pass: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test_timeout_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// The container image the task runs in (`--env podman|docker`): its
    /// own, or `--image` rendered for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Where the working copy is inside the image (an absolute path).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workdir: Option<String>,
    /// What kind of task it is: the answers that differ between
    /// benchmarks (task/benchmark.rs). Its own fields (`repo_in_image`, a
    /// swebench 5 row's recipe) are in [`TaskSpec::to_json`].
    #[serde(skip)]
    pub benchmark: std::sync::Arc<dyn Benchmark>,
    /// Fields this version does not know: kept for the trajectory.
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub extra: Map<String, Value>,
}

impl TaskSpec {
    /// The task as one JSON object, as the task file had it: every field,
    /// unknown ones back at the top level (a known field wins a clash). What
    /// templates and the trajectory header see.
    pub(crate) fn to_json(&self) -> Map<String, Value> {
        let mut map = match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        };
        self.benchmark.task_fields(&mut map);
        if let Some(Value::Object(extra)) = map.remove("extra") {
            for (k, v) in extra {
                map.entry(k).or_insert(v);
            }
        }
        map
    }

    /// The rules the task is graded by: `chosen` (`--grading`) when given,
    /// else its benchmark's.
    pub(crate) fn rules(&self, chosen: Option<Rules>) -> Rules {
        chosen.unwrap_or_else(|| self.benchmark.default_rules())
    }
}

#[cfg(test)]
impl TaskSpec {
    /// The recipe its benchmark grades it by, if any.
    pub(crate) fn recipe(&self) -> Option<&crate::grade::swebench::spec::SwebenchEval> {
        match self.benchmark.verdict() {
            crate::task::benchmark::Verdict::Recipe(eval) => Some(eval),
            _ => None,
        }
    }

    /// Whether its code is the repo its image holds.
    pub(crate) fn repo_in_image(&self) -> bool {
        !matches!(
            self.benchmark.code(),
            crate::task::benchmark::Code::Checkout
        )
    }
}

/// Why a task file could not be used. `Display` gives the full report.
#[derive(Debug, thiserror::Error)]
pub enum TaskFileError {
    #[error("failed to read task file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Every bad line of a JSONL task file, in file order.
    #[error("{}", render_line_errors(.0))]
    Lines(Vec<BadLine>),
    #[error("{file}: the file holds no task")]
    NoTask { file: String },
    /// Every bad Harbor task folder, as `harbor.rs` words it.
    #[error("{}", render_line_errors(.0))]
    Invalid(Vec<String>),
    /// A registry's dataset that cannot be read (harbor_registry.rs).
    #[error(transparent)]
    Registry(#[from] crate::task::error::RegistryError),
}

impl TaskFileError {
    /// A registry's server could not be reached.
    pub(crate) fn unreachable(&self) -> bool {
        matches!(self, TaskFileError::Registry(err) if err.unreachable())
    }
}

pub(crate) fn render_line_errors(errors: &[impl fmt::Display]) -> String {
    let mut out = errors
        .iter()
        .take(MAX_LISTED_ERRORS)
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    if errors.len() > MAX_LISTED_ERRORS {
        out.push_str(&format!(
            "\n... and {} more bad lines",
            errors.len() - MAX_LISTED_ERRORS
        ));
    }
    out
}

/// How lines are read beyond their own fields.
#[derive(Debug, Clone)]
pub(crate) struct LoadOptions {
    /// Where SWE-bench `owner/name` repos are cloned from (`--repo-base`).
    pub repo_base: String,
    /// The test command of tasks that have none (`--test-command`), a
    /// template over the task's fields and `test_files`.
    pub test_command: Option<String>,
    /// The image of tasks that have none (`--image`), a template over the
    /// task's fields and `instance_id`.
    pub image: Option<String>,
}

/// A task file as read: its tasks, and what identifies the bytes they came
/// from.
#[derive(Debug, Clone)]
pub(crate) struct TaskFile {
    pub tasks: Vec<TaskSpec>,
    /// sha256 of the bytes the tasks were parsed from, in lowercase hex.
    pub sha256: String,
    /// What the user should know of the tasks read (each once).
    pub warnings: Vec<String>,
}
