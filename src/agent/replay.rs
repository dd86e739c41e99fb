//! `--model replay:RUN_DIR`: plays back the assistant turns recorded in an
//! earlier run, with no API and no network. The commands run again in a
//! fresh checkout and the tests grade again; where a command's output now
//! differs from the recording, the loop records both (see
//! [`Recording::output_of`]). When the recording runs out, the loop ends as
//! the recording did.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::agent::model::{ModelError, ModelReply};
use crate::agent::{anthropic, openai};
use crate::results::ExitReason;
use crate::task::TaskId;
use crate::trajectory::{Usage, read_events};

/// The message format of the recorded run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordedFormat {
    /// OpenAI Chat Completions (also the oracle's).
    OpenAi,
    Anthropic,
}

/// One (task, epoch) as recorded.
#[derive(Debug)]
pub struct Recording {
    /// Assistant messages, with the usage and finish reason of their call.
    answers: Vec<(Value, Usage, Option<String>)>,
    /// Output of each recorded command, by tool call id.
    outputs: HashMap<String, String>,
    /// How the recorded agent phase ended.
    pub end: ExitReason,
    pub end_error: Option<String>,
}

impl Recording {
    /// The recorded output of a tool call, to compare with the new one.
    pub fn output_of(&self, tool_call_id: &str) -> Option<&str> {
        self.outputs.get(tool_call_id).map(String::as_str)
    }
}

/// The recorded run, read lazily, one trajectory per (task, epoch).
pub struct ReplayStore {
    run_dir: PathBuf,
    pub format: RecordedFormat,
    loaded: Mutex<HashMap<(TaskId, u32), Arc<Recording>>>,
}

impl ReplayStore {
    /// Opens a run folder to replay; reads its protocol from run.json.
    pub fn open(run_dir: &Path) -> Result<ReplayStore, String> {
        let run_json = std::fs::read_to_string(run_dir.join("run.json")).map_err(|err| {
            format!(
                "failed to read {}: {err}\nhint: replay:RUN_DIR names the folder of an earlier run",
                run_dir.join("run.json").display()
            )
        })?;
        let value: Value = serde_json::from_str(&run_json)
            .map_err(|err| format!("failed to read {}: {err}", run_dir.display()))?;
        let format = match value
            .pointer("/settings/model/provider")
            .and_then(Value::as_str)
        {
            Some("anthropic") => RecordedFormat::Anthropic,
            _ => RecordedFormat::OpenAi,
        };
        Ok(ReplayStore {
            run_dir: run_dir.to_owned(),
            format,
            loaded: Mutex::new(HashMap::new()),
        })
    }

    pub fn recording(&self, task: &TaskId, epoch: u32) -> Result<Arc<Recording>, String> {
        let key = (task.clone(), epoch);
        // The map only caches; a poisoned lock still holds usable data.
        if let Some(found) = self
            .loaded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok(Arc::clone(found));
        }
        let path = self
            .run_dir
            .join("tasks")
            .join(task.as_str())
            .join(format!("epoch-{epoch}"))
            .join("trajectory.jsonl");
        if !path.is_file() {
            return Err(format!(
                "task {task} epoch {epoch} is not in the recording {}",
                self.run_dir.display()
            ));
        }
        let events = read_events(&path)
            .map_err(|err| format!("failed to read {}: {err}", path.display()))?;
        let recording = Arc::new(parse(&events));
        self.loaded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, Arc::clone(&recording));
        Ok(recording)
    }

    /// The recorded answer to a history that holds `answered` assistant
    /// messages, or the end of the recording.
    pub fn answer(&self, recording: &Recording, answered: usize) -> Result<ModelReply, ModelError> {
        let Some((message, usage, finish_reason)) = recording.answers.get(answered) else {
            return Err(ModelError::RecordingEnded {
                reason: recording.end,
                error: recording.end_error.clone(),
            });
        };
        let tool_calls = match self.format {
            RecordedFormat::OpenAi => openai::tool_calls_of(message),
            RecordedFormat::Anthropic => message
                .get("content")
                .and_then(Value::as_array)
                .map(|blocks| anthropic::tool_calls_of(blocks))
                .unwrap_or_default(),
        };
        let cut = matches!(finish_reason.as_deref(), Some("length" | "max_tokens"));
        Ok(ModelReply {
            message: message.clone(),
            tool_calls,
            finish_reason: finish_reason.clone(),
            cut,
            usage: *usage,
            response_id: None,
        })
    }
}

fn parse(events: &[Value]) -> Recording {
    let mut answers = Vec::new();
    let mut outputs = HashMap::new();
    let mut pending_call: Option<(Usage, Option<String>)> = None;
    let mut end = ExitReason::Completed;
    let mut end_error = None;
    for event in events {
        match event["event"].as_str().unwrap_or("") {
            "model_call" => {
                let usage = serde_json::from_value(event["usage"].clone()).unwrap_or_default();
                let finish = event["finish_reason"].as_str().map(str::to_owned);
                pending_call = Some((usage, finish));
            }
            "message" if event["message"]["role"] == "assistant" => {
                let (usage, finish) = pending_call.take().unwrap_or_default();
                answers.push((event["message"].clone(), usage, finish));
            }
            "command" => {
                if let (Some(id), Some(output)) =
                    (event["tool_call_id"].as_str(), event["output"].as_str())
                {
                    outputs.insert(id.to_owned(), output.to_owned());
                }
            }
            "agent_end" => {
                end = serde_json::from_value(event["exit_reason"].clone())
                    .unwrap_or(ExitReason::Completed);
                end_error = event["error"].as_str().map(str::to_owned);
            }
            _ => {}
        }
    }
    Recording {
        answers,
        outputs,
        end,
        end_error,
    }
}
