//! `--model predictions:FILE`: another agent's patches, one per SWE-bench
//! instance, in the three shapes `run_evaluation --predictions_path`
//! takes: JSON Lines, a JSON list, or a JSON object keyed by instance id
//! (mini-swe-agent's and SWE-agent's `preds.json`).
//!
//! Owns [`PredictionFile`] (the predictions as read, and the sha256 of
//! their bytes), [`load_predictions`], which checks every entry before
//! anything runs and lists every bad one ([`PredictionsError`]), and
//! [`PredictionFile::match_tasks`]: which tasks have a prediction, which
//! have none, and which predictions name no task ([`PredictionsRecord`],
//! what run.json keeps). It does not know how a patch is applied (the
//! predictions model, `agent/oracle.rs`) or graded.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::task::TaskSpec;
use crate::task::spec::render_line_errors;

/// One prediction: the patch another agent made for an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Prediction {
    pub instance_id: String,
    /// The CSV's `model` column for its row.
    pub model_name_or_path: String,
    /// `None` for a JSON `null`.
    pub model_patch: Option<String>,
}

impl Prediction {
    /// SWE-bench's empty patch (`model_patch in ["", None]`): not run, and
    /// unresolved. A patch of blanks is not empty: it is tried, and fails.
    pub(crate) fn is_empty(&self) -> bool {
        self.model_patch.as_deref().is_none_or(str::is_empty)
    }
}

/// How a predictions file is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Shape {
    /// One JSON object a line.
    Jsonl,
    /// A JSON list of objects.
    List,
    /// A JSON object whose values are the predictions (its keys are not
    /// read, as `run_evaluation` does not read them).
    Keyed,
}

/// A predictions file as read.
#[derive(Debug, Clone)]
pub(crate) struct PredictionFile {
    /// As named on the command line.
    pub path: PathBuf,
    /// sha256 of the bytes the predictions were read from, lowercase hex.
    pub sha256: String,
    pub shape: Shape,
    /// In file order, one per instance: the last of an instance's
    /// predictions, at the first one's place.
    pub predictions: Vec<Prediction>,
    /// The instances with more than one prediction, in file order.
    pub duplicated: Vec<String>,
    by_id: HashMap<String, usize>,
}

/// Where in the file an entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A JSON Lines file's line, 1-based.
    Line(usize),
    /// A JSON list's entry, 1-based.
    Entry(usize),
    /// A keyed object's entry.
    Key(String),
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Line(line) => write!(f, "{line}"),
            Place::Entry(n) => write!(f, " entry {n} of the list"),
            Place::Key(key) => write!(f, " entry {key:?}"),
        }
    }
}

/// What is wrong with one prediction.
#[derive(Debug, thiserror::Error)]
pub enum EntryError {
    #[error("not valid JSON: {0}")]
    Json(#[source] serde_json::Error),
    #[error("expected a JSON object (a prediction), got {0}")]
    NotAnObject(&'static str),
    #[error("missing required field `{0}`")]
    Missing(&'static str),
    #[error("`{field}` must be {expected}, got {got}")]
    Kind {
        field: &'static str,
        expected: &'static str,
        got: &'static str,
    },
}

/// A bad prediction, where it is: `FILE:LINE: ...` (JSON Lines) or
/// `FILE: entry ...: ...` (JSON).
#[derive(Debug, thiserror::Error)]
#[error("{file}:{place}: {error}")]
pub struct BadEntry {
    pub file: String,
    pub place: Place,
    pub error: EntryError,
}

/// Why a predictions file cannot be used: exit 2, nothing ran.
#[derive(Debug, thiserror::Error)]
pub enum PredictionsError {
    #[error("failed to read the predictions file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file that starts as a JSON list but is not JSON.
    #[error("{file}: not valid JSON: {source}")]
    Json {
        file: String,
        source: serde_json::Error,
    },
    #[error(
        "{file}: expected a list of predictions, an object keyed by instance id, or JSON Lines; got {got}"
    )]
    Shape { file: String, got: &'static str },
    /// Every bad entry, in file order.
    #[error("{}", render_line_errors(.0))]
    Entries(Vec<BadEntry>),
    #[error("{file}: the file holds no prediction")]
    NoPrediction { file: String },
}

/// A predictions file's text, checked.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub shape: Shape,
    /// One per instance, as [`PredictionFile::predictions`].
    pub predictions: Vec<Prediction>,
    /// As [`PredictionFile::duplicated`].
    pub duplicated: Vec<String>,
}

/// One entry of the file as read: where it is, and its JSON or why it
/// is not JSON.
type Entry = (Place, Result<Value, EntryError>);

/// Reads and checks a whole predictions file; nothing is returned unless
/// every entry is good. The file is read once: the predictions and the
/// hash come from the same bytes.
pub(crate) fn load_predictions(path: &Path) -> Result<PredictionFile, PredictionsError> {
    let bytes = std::fs::read(path).map_err(|source| PredictionsError::Read {
        path: path.to_owned(),
        source,
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let Parsed {
        shape,
        predictions,
        duplicated,
    } = parse_predictions(&text, &path.display().to_string())?;
    let by_id = predictions
        .iter()
        .enumerate()
        .map(|(i, p)| (p.instance_id.clone(), i))
        .collect();
    Ok(PredictionFile {
        path: path.to_owned(),
        sha256: format!("{:x}", Sha256::digest(&bytes)),
        shape,
        predictions,
        duplicated,
        by_id,
    })
}

/// The parsing half of [`load_predictions`]: the shape is the content's
/// (a `.json` file of JSON Lines is read as JSON Lines), whatever the name.
pub(crate) fn parse_predictions(text: &str, file: &str) -> Result<Parsed, PredictionsError> {
    let (shape, entries): (Shape, Vec<Entry>) = if text.trim_start().starts_with('[') {
        let parsed = serde_json::from_str(text).map_err(|source| PredictionsError::Json {
            file: file.to_owned(),
            source,
        })?;
        let items = match parsed {
            Value::Array(items) => items,
            // A text that starts with `[` and parses is a list.
            other => {
                return Err(PredictionsError::Shape {
                    file: file.to_owned(),
                    got: kind(&other),
                });
            }
        };
        let entries = items
            .into_iter()
            .enumerate()
            .map(|(i, v)| (Place::Entry(i + 1), Ok(v)))
            .collect();
        (Shape::List, entries)
    } else {
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) if !is_one_prediction(&map) => {
                let entries = map
                    .into_iter()
                    .map(|(key, v)| (Place::Key(key), Ok(v)))
                    .collect();
                (Shape::Keyed, entries)
            }
            // A single prediction, over one line or several.
            Ok(value @ Value::Object(_)) => (Shape::Jsonl, vec![(Place::Line(1), Ok(value))]),
            Ok(other) => {
                return Err(PredictionsError::Shape {
                    file: file.to_owned(),
                    got: kind(&other),
                });
            }
            Err(_) => (Shape::Jsonl, json_lines(text)),
        }
    };
    let mut predictions: Vec<Prediction> = Vec::new();
    let mut errors = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    let mut duplicated = Vec::new();
    for (place, value) in entries {
        match value.and_then(prediction_of) {
            // run_evaluation keeps the last prediction of an instance
            // (a dict built in file order), at the first one's place.
            Ok(prediction) => match at.get(&prediction.instance_id) {
                Some(&i) => {
                    if !duplicated.contains(&prediction.instance_id) {
                        duplicated.push(prediction.instance_id.clone());
                    }
                    predictions[i] = prediction;
                }
                None => {
                    at.insert(prediction.instance_id.clone(), predictions.len());
                    predictions.push(prediction);
                }
            },
            Err(error) => errors.push(BadEntry {
                file: file.to_owned(),
                place,
                error,
            }),
        }
    }
    if !errors.is_empty() {
        return Err(PredictionsError::Entries(errors));
    }
    if predictions.is_empty() {
        return Err(PredictionsError::NoPrediction {
            file: file.to_owned(),
        });
    }
    Ok(Parsed {
        shape,
        predictions,
        duplicated,
    })
}

/// A JSON object that is itself a prediction rather than a map of them:
/// it has an `instance_id`, and not every value is an object.
fn is_one_prediction(map: &Map<String, Value>) -> bool {
    map.contains_key("instance_id") && !map.values().all(Value::is_object)
}

fn json_lines(text: &str) -> Vec<Entry> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            (
                Place::Line(i + 1),
                serde_json::from_str(line).map_err(EntryError::Json),
            )
        })
        .collect()
}

fn prediction_of(value: Value) -> Result<Prediction, EntryError> {
    let Value::Object(mut fields) = value else {
        return Err(EntryError::NotAnObject(kind(&value)));
    };
    let mut string = |field: &'static str| match fields.remove(field) {
        None => Err(EntryError::Missing(field)),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(Value::Null) if field == "model_patch" => Ok(None),
        Some(other) => Err(EntryError::Kind {
            field,
            expected: if field == "model_patch" {
                "a string or null"
            } else {
                "a string"
            },
            got: kind(&other),
        }),
    };
    let instance_id = string("instance_id")?.unwrap_or_default();
    let model_name_or_path = string("model_name_or_path")?.unwrap_or_default();
    let model_patch = string("model_patch")?;
    Ok(Prediction {
        instance_id,
        model_name_or_path,
        model_patch,
    })
}

/// "a number", "a list": the kind of a JSON value, for messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// What run.json records of the predictions (`settings.predictions`):
/// the file, how many it holds, and how they met the tasks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct PredictionsRecord {
    pub path: PathBuf,
    pub sha256: String,
    pub shape: Shape,
    /// Predictions in the file.
    pub count: usize,
    /// Selected tasks without a prediction: not run.
    pub missing: Vec<String>,
    /// Predictions for an instance that is no task of the task file.
    pub unknown: Vec<String>,
}

impl PredictionFile {
    pub(crate) fn get(&self, instance_id: &str) -> Option<&Prediction> {
        self.by_id.get(instance_id).map(|&i| &self.predictions[i])
    }

    /// The selected tasks that have a prediction (in order), and the
    /// record: the selected tasks that have none, and the predictions that
    /// name no task of `all_ids` (every task of the file, before
    /// `--shard`, `--filter` and `--limit`: a shard's tasks are not the
    /// whole file, and the other shards' predictions are not unknown).
    pub(crate) fn match_tasks<'a>(
        &self,
        all_ids: impl IntoIterator<Item = &'a str>,
        selected: Vec<TaskSpec>,
    ) -> (Vec<TaskSpec>, PredictionsRecord) {
        let all: HashSet<&str> = all_ids.into_iter().collect();
        let (kept, without): (Vec<TaskSpec>, Vec<TaskSpec>) = selected
            .into_iter()
            .partition(|task| self.get(task.id.as_str()).is_some());
        let record = PredictionsRecord {
            path: self.path.clone(),
            sha256: self.sha256.clone(),
            shape: self.shape,
            count: self.predictions.len(),
            missing: without.iter().map(|t| t.id.as_str().to_owned()).collect(),
            unknown: self
                .predictions
                .iter()
                .filter(|p| !all.contains(p.instance_id.as_str()))
                .map(|p| p.instance_id.clone())
                .collect(),
        };
        (kept, record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(predictions: &[Prediction]) -> Vec<&str> {
        predictions.iter().map(|p| p.instance_id.as_str()).collect()
    }

    fn errors(text: &str, file: &str) -> Vec<String> {
        match parse_predictions(text, file) {
            Err(PredictionsError::Entries(bad)) => bad.iter().map(ToString::to_string).collect(),
            other => panic!("expected bad entries, got {other:?}"),
        }
    }

    const A: &str = r#"{"instance_id": "a", "model_name_or_path": "m", "model_patch": "diff a"}"#;
    const B: &str = r#"{"instance_id": "b", "model_name_or_path": "m", "model_patch": null}"#;

    #[test]
    fn the_three_shapes_are_told_by_their_content() {
        let cases = [
            (format!("{A}\n\n{B}\n"), Shape::Jsonl),
            (format!("[{A},\n{B}]"), Shape::List),
            (format!("{{\"a\": {A}, \"b\": {B}}}"), Shape::Keyed),
            // Whatever the name says: JSON Lines in a `.json`.
            (format!("  {A}\n{B}"), Shape::Jsonl),
        ];
        for (text, shape) in cases {
            let parsed = parse_predictions(&text, "preds.json").expect("valid");
            assert_eq!(parsed.shape, shape, "{text}");
            assert_eq!(ids(&parsed.predictions), ["a", "b"], "{text}");
            assert_eq!(parsed.predictions[0].model_patch.as_deref(), Some("diff a"));
            assert_eq!(parsed.predictions[1].model_patch, None);
            assert!(parsed.duplicated.is_empty());
        }
        // One prediction, pretty-printed over several lines.
        let pretty = serde_json::to_string_pretty(&serde_json::from_str::<Value>(A).expect("json"))
            .expect("json");
        let parsed = parse_predictions(&pretty, "p.jsonl").expect("valid");
        assert_eq!(
            (parsed.shape, ids(&parsed.predictions)),
            (Shape::Jsonl, vec!["a"])
        );
    }

    #[test]
    fn empty_means_empty_or_null_as_swebench_counts_it() {
        let patch = |p: Option<&str>| Prediction {
            instance_id: "a".into(),
            model_name_or_path: "m".into(),
            model_patch: p.map(str::to_owned),
        };
        assert!(patch(None).is_empty());
        assert!(patch(Some("")).is_empty());
        assert!(!patch(Some("\n")).is_empty());
    }

    #[test]
    fn every_bad_line_is_named_with_its_file_and_line() {
        let text = format!(
            "{A}\n[1]\n{{\"model_patch\": \"x\", \"model_name_or_path\": \"m\"}}\n\
             {{\"instance_id\": \"c\", \"model_name_or_path\": \"m\", \"model_patch\": 3}}\n\
             {{not json\n{A}\n{{\"instance_id\": \"d\", \"model_patch\": \"\"}}\n"
        );
        let found = errors(&text, "preds.jsonl");
        assert_eq!(found.len(), 5, "{found:#?}");
        assert_eq!(
            found[0],
            "preds.jsonl:2: expected a JSON object (a prediction), got a list"
        );
        assert_eq!(
            found[1],
            "preds.jsonl:3: missing required field `instance_id`"
        );
        assert_eq!(
            found[2],
            "preds.jsonl:4: `model_patch` must be a string or null, got a number"
        );
        assert!(found[3].starts_with("preds.jsonl:5: not valid JSON: "));
        assert_eq!(
            found[4],
            "preds.jsonl:7: missing required field `model_name_or_path`"
        );
    }

    /// run_evaluation keeps the last prediction of an instance
    /// (`{pred["instance_id"]: pred for pred in predictions}`); so does
    /// onebash, and it names the instances.
    #[test]
    fn a_second_prediction_for_an_instance_replaces_the_first() {
        let later = A.replace("diff a", "diff a again");
        let c = A.replace("\"a\"", "\"c\"");
        for text in [
            format!("{A}\n{B}\n{c}\n{later}\n{c}\n"),
            format!("[{A}, {B}, {c}, {later}, {c}]"),
            format!("{{\"1\": {A}, \"2\": {B}, \"3\": {c}, \"4\": {later}, \"5\": {c}}}"),
        ] {
            let parsed = parse_predictions(&text, "p.json").expect("valid");
            assert_eq!(ids(&parsed.predictions), ["a", "b", "c"], "{text}");
            assert_eq!(
                parsed.predictions[0].model_patch.as_deref(),
                Some("diff a again")
            );
            assert_eq!(parsed.duplicated, ["a", "c"], "{text}");
        }
    }

    #[test]
    fn a_bad_json_entry_is_named_by_its_place() {
        let list = format!("[{A}, 7, {A}]");
        assert_eq!(
            errors(&list, "p.json"),
            ["p.json: entry 2 of the list: expected a JSON object (a prediction), got a number",]
        );
        let keyed = format!(
            "{{\"a\": {A}, \"b\": {{\"instance_id\": 5, \"model_name_or_path\": \"m\", \"model_patch\": \"\"}}}}"
        );
        assert_eq!(
            errors(&keyed, "p.json"),
            ["p.json: entry \"b\": `instance_id` must be a string, got a number"]
        );
    }

    #[test]
    fn a_file_that_is_no_predictions_at_all_says_so() {
        let cases = [
            ("[1, 2", "p.json: not valid JSON: "),
            (
                "42",
                "p.json: expected a list of predictions, an object keyed by instance id, or JSON Lines; got a number",
            ),
            ("[]", "p.json: the file holds no prediction"),
            ("\n\n", "p.json: the file holds no prediction"),
        ];
        for (text, message) in cases {
            let err = parse_predictions(text, "p.json").expect_err(text);
            assert!(err.to_string().starts_with(message), "{text}: {err}");
        }
    }

    #[test]
    fn tasks_meet_predictions_missing_and_unknown_named() {
        let tasks = crate::task::parse_tasks(
            &["x", "a", "y"]
                .map(|id| {
                    format!(
                        r#"{{"id":"{id}","repo":"r","base_commit":"c","problem_statement":"p","test_command":"t"}}"#
                    )
                })
                .join("\n"),
            "tasks.jsonl",
            Path::new("/"),
        )
        .expect("tasks");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("preds.jsonl");
        let c = A.replace("\"a\"", "\"c\"");
        std::fs::write(&path, format!("{A}\n{B}\n{c}\n")).expect("write");
        let file = load_predictions(&path).expect("valid");
        assert_eq!(file.get("b").map(Prediction::is_empty), Some(true));
        // `b` is a task of the file that this shard does not hold.
        let (kept, record) = file.match_tasks(["x", "a", "y", "b"], tasks);
        assert_eq!(
            kept.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
            ["a"]
        );
        assert_eq!(record.count, 3);
        assert_eq!(record.missing, ["x", "y"]);
        assert_eq!(record.unknown, ["c"]);
        assert_eq!(record.sha256.len(), 64);
    }
}
