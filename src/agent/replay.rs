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

use crate::agent::provider::{Provider, Wire};
use crate::agent::types::{ModelError, ModelReply};
use crate::agent::{anthropic, openai, responses};
use crate::run_folder::trajectory::{Event, ReadError, read_trajectory};
use crate::run_folder::{ExitReason, Usage};
use crate::run_folder::{RunFolder, RunFolderError};
use crate::task::TaskId;

/// Why a recorded run cannot be played back: each names the run folder
/// or the trajectory file it read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReplayError {
    /// The run folder, or its run.json (the error names which).
    #[error(transparent)]
    Folder(#[from] RunFolderError),
    #[error("task {task} epoch {epoch} is not in the recording {}", run.display())]
    NotRecorded {
        task: TaskId,
        epoch: u32,
        run: PathBuf,
    },
    /// The trajectory could not be read (the error names the file, and the
    /// line when one does not fit).
    #[error(transparent)]
    Trajectory(#[from] ReadError),
    #[error("failed to read the recording {}: {source}", run.display())]
    Thread {
        run: PathBuf,
        source: tokio::task::JoinError,
    },
}

/// One (task, epoch) as recorded.
#[derive(Debug)]
pub(crate) struct Recording {
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
    pub(crate) fn output_of(&self, tool_call_id: &str) -> Option<&str> {
        self.outputs.get(tool_call_id).map(String::as_str)
    }
}

/// The recorded run, read lazily, one trajectory per (task, epoch).
pub(crate) struct ReplayStore {
    folder: RunFolder,
    /// The message format of the recorded run.
    pub format: Wire,
    loaded: Mutex<HashMap<(TaskId, u32), Arc<Recording>>>,
}

impl ReplayStore {
    /// Opens a run folder to replay; `recorded` reads the provider its
    /// run.json names (run.json is `config/manifest.rs`'s to read).
    pub(crate) fn open(
        run_dir: &Path,
        recorded: impl FnOnce(&RunFolder) -> Result<Option<Provider>, RunFolderError>,
    ) -> Result<ReplayStore, ReplayError> {
        let folder = RunFolder::open(run_dir)?;
        // The oracle and the first runs (no provider yet) spoke OpenAI's format.
        let format = recorded(&folder)?.map_or(Wire::Chat, |provider| provider.info().wire);
        Ok(ReplayStore {
            folder,
            format,
            loaded: Mutex::new(HashMap::new()),
        })
    }

    /// The recording of a (task, epoch), read now if no call read it yet.
    pub(crate) fn recording(
        &self,
        task: &TaskId,
        epoch: u32,
    ) -> Result<Arc<Recording>, ReplayError> {
        if let Some(found) = self.cached(task, epoch) {
            return Ok(found);
        }
        let events = read_recorded(&self.folder, task, epoch)?;
        Ok(self.keep(task, epoch, events))
    }

    /// [`Self::recording`] from async code: the file (up to megabytes of
    /// outputs) is read on a blocking thread, not on a worker.
    pub(crate) async fn load(
        &self,
        task: &TaskId,
        epoch: u32,
    ) -> Result<Arc<Recording>, ReplayError> {
        if let Some(found) = self.cached(task, epoch) {
            return Ok(found);
        }
        let (folder, owned) = (self.folder.clone(), task.clone());
        let events = crate::sys::blocking::spawn(move || read_recorded(&folder, &owned, epoch))
            .await
            .map_err(|source| ReplayError::Thread {
                run: self.folder.root().to_owned(),
                source,
            })??;
        Ok(self.keep(task, epoch, events))
    }

    fn cached(&self, task: &TaskId, epoch: u32) -> Option<Arc<Recording>> {
        // The map only caches; a poisoned lock still holds usable data.
        self.loaded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(task.clone(), epoch))
            .cloned()
    }

    fn keep(&self, task: &TaskId, epoch: u32, events: Vec<Event>) -> Arc<Recording> {
        let recording = Arc::new(parse(events));
        self.loaded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((task.clone(), epoch), Arc::clone(&recording));
        recording
    }

    /// The recorded answer to a history that holds `answered` assistant
    /// messages, or the end of the recording.
    pub(crate) fn answer(
        &self,
        recording: &Recording,
        answered: usize,
    ) -> Result<ModelReply, ModelError> {
        let Some((message, usage, finish_reason)) = recording.answers.get(answered) else {
            return Err(ModelError::RecordingEnded {
                reason: recording.end,
                error: recording.end_error.clone(),
            });
        };
        let tool_calls = match self.format {
            Wire::Chat => openai::tool_calls_of(message),
            Wire::Messages => message
                .get("content")
                .and_then(Value::as_array)
                .map(|blocks| anthropic::tool_calls_of(blocks))
                .unwrap_or_default(),
            Wire::Responses => responses::tool_calls_of(message),
        };
        let cut = matches!(
            finish_reason.as_deref(),
            Some("length" | "max_tokens" | "max_output_tokens")
        );
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

/// The events of a recorded (task, epoch).
fn read_recorded(folder: &RunFolder, task: &TaskId, epoch: u32) -> Result<Vec<Event>, ReplayError> {
    let path = folder.trajectory(task, epoch);
    if !path.is_file() {
        return Err(ReplayError::NotRecorded {
            task: task.clone(),
            epoch,
            run: folder.root().to_owned(),
        });
    }
    Ok(read_trajectory(&path)?)
}

fn parse(events: Vec<Event>) -> Recording {
    let mut answers = Vec::new();
    let mut outputs = HashMap::new();
    let mut pending_call: Option<(Usage, Option<String>)> = None;
    let mut end = ExitReason::Completed;
    let mut end_error = None;
    for event in events {
        match event {
            Event::ModelCall {
                usage,
                finish_reason,
                ..
            } => pending_call = Some((usage, finish_reason)),
            Event::Message { message, .. } if message["role"] == "assistant" => {
                let (usage, finish) = pending_call.take().unwrap_or_default();
                answers.push((message, usage, finish));
            }
            Event::Command {
                tool_call_id,
                record,
                ..
            } => {
                outputs.insert(tool_call_id, record.output);
            }
            Event::AgentEnd {
                exit_reason, error, ..
            } => {
                end = exit_reason;
                end_error = error;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::manifest::RunManifest;

    /// The Anthropic run of tests/fixtures (written by an earlier onebash)
    /// plays back: its format from run.json, its answers, its command's
    /// output and how its agent phase ended.
    #[test]
    fn a_recorded_anthropic_run_reads_back() {
        let store = ReplayStore::open(
            Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/run")),
            RunManifest::recorded_provider,
        )
        .expect("a run folder");
        assert_eq!(store.format, Wire::Messages);
        let task = TaskId::parse("calc-divide-by-zero").expect("an id");
        let recording = store.recording(&task, 1).expect("the recording");
        assert_eq!(recording.answers.len(), 2);
        assert_eq!(recording.answers[0].1.cached_tokens, 40);
        assert_eq!(recording.answers[0].2.as_deref(), Some("tool_use"));
        assert_eq!(
            recording
                .output_of("toolu_1")
                .map(|out| out.lines().count()),
            Some(3)
        );
        assert_eq!(recording.end, ExitReason::Completed);
        let reply = store.answer(&recording, 0).expect("the first answer");
        assert_eq!(reply.tool_calls.len(), 1);
        assert!(store.recording(&task, 2).is_err());
    }

    /// A run folder holding run.json but no trajectory of the task: the
    /// error says which task and epoch, and names the folder it looked in.
    #[test]
    fn a_task_not_recorded_names_the_run_folder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fixture = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/run"));
        std::fs::copy(fixture.join("run.json"), dir.path().join("run.json")).expect("run.json");
        let store =
            ReplayStore::open(dir.path(), RunManifest::recorded_provider).expect("a run folder");
        let task = TaskId::parse("calc-divide-by-zero").expect("an id");
        let err = store.recording(&task, 1).expect_err("no trajectory");
        let ReplayError::NotRecorded { run, epoch, .. } = &err else {
            panic!("{err:?}");
        };
        assert_eq!((run.as_path(), *epoch), (dir.path(), 1));
        assert_eq!(
            err.to_string(),
            format!(
                "task calc-divide-by-zero epoch 1 is not in the recording {}",
                dir.path().display()
            )
        );
        let missing = dir.path().join("gone");
        let err = ReplayStore::open(&missing, RunManifest::recorded_provider)
            .err()
            .expect("no folder");
        assert!(
            matches!(&err, ReplayError::Folder(RunFolderError::NoFolder(path)) if path == &missing),
            "{err:?}"
        );
    }
}
