//! The run folder's layout: where each file of a run and of each (task,
//! epoch) lives ([`RunFolder`]).

use std::path::{Path, PathBuf};

use super::error::RunFolderError;
use crate::task::TaskId;

/// Names of the files in a (task, epoch) folder. The trajectory's `diff`
/// and `test` events give the last two relative to that folder.
pub(crate) const TRAJECTORY: &str = "trajectory.jsonl";
/// A Harbor task's image build output, when this task built it.
pub(crate) const BUILD_LOG: &str = "build.log";
pub(crate) const PATCH_DIFF: &str = "patch.diff";
pub(crate) const TEST_LOG: &str = "test.log";
pub(crate) const TESTS_JSON: &str = "tests.json";
/// SWE-bench's per-instance report (run_evaluation's `report.json`),
/// written when run_evaluation would write one: the tests ran to their end.
pub(crate) const REPORT_JSON: &str = "report.json";

/// The run folder's layout: the one place that knows where each file of a
/// run lives (docs/results.md), for the run that writes them and for every
/// command that reads them back.
#[derive(Debug, Clone)]
pub(crate) struct RunFolder {
    root: PathBuf,
}

impl RunFolder {
    pub(crate) fn create(root: &Path) -> Result<RunFolder, RunFolderError> {
        let folder = RunFolder::at(root);
        folder.create_dir()?;
        Ok(folder)
    }

    /// The run folder at `root`, which may not exist yet.
    pub(crate) fn at(root: &Path) -> RunFolder {
        RunFolder {
            root: root.to_owned(),
        }
    }

    /// An existing run folder, to read. A run (and a merge) writes run.json
    /// before anything else, so a folder without one is not a run folder,
    /// or not yet one.
    pub(crate) fn open(root: &Path) -> Result<RunFolder, RunFolderError> {
        let folder = RunFolder::at(root);
        if root.is_file() {
            return Err(RunFolderError::File(root.to_owned()));
        }
        if !root.is_dir() {
            return Err(RunFolderError::NoFolder(root.to_owned()));
        }
        if !folder.run_json().is_file() {
            let runs = runs_in(root);
            if runs.is_empty() {
                return Err(RunFolderError::NoRunJson(root.to_owned()));
            }
            return Err(RunFolderError::FolderOfRuns {
                path: root.to_owned(),
                runs,
            });
        }
        Ok(folder)
    }

    /// Makes the folder, and its parents, where missing.
    pub(crate) fn create_dir(&self) -> Result<(), RunFolderError> {
        std::fs::create_dir_all(&self.root).map_err(|source| RunFolderError::Create {
            path: self.root.clone(),
            source,
        })
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    pub(crate) fn results_csv(&self) -> PathBuf {
        self.root.join("results.csv")
    }

    pub(crate) fn run_json(&self) -> PathBuf {
        self.root.join("run.json")
    }

    /// `run.lock`: held by the one onebash that runs in the folder (a run,
    /// or its resume), so that a second cannot interleave its rows or
    /// tear down the first one's containers.
    pub(crate) fn lock_file(&self) -> PathBuf {
        self.root.join("run.lock")
    }

    /// `tasks/`: a folder per task, one per epoch inside.
    pub(crate) fn tasks_dir(&self) -> PathBuf {
        self.root.join("tasks")
    }

    /// `tasks/<id>/epoch-<k>/`: trajectory, diff and test log of one (task, epoch).
    pub(crate) fn task_dir(&self, task: &TaskId, epoch: u32) -> PathBuf {
        self.tasks_dir()
            .join(task.as_str())
            .join(format!("epoch-{epoch}"))
    }

    pub(crate) fn trajectory(&self, task: &TaskId, epoch: u32) -> PathBuf {
        self.task_dir(task, epoch).join(TRAJECTORY)
    }

    pub(crate) fn patch_diff(&self, task: &TaskId, epoch: u32) -> PathBuf {
        self.task_dir(task, epoch).join(PATCH_DIFF)
    }

    pub(crate) fn test_log(&self, task: &TaskId, epoch: u32) -> PathBuf {
        self.task_dir(task, epoch).join(TEST_LOG)
    }

    pub(crate) fn tests_json(&self, task: &TaskId, epoch: u32) -> PathBuf {
        self.task_dir(task, epoch).join(TESTS_JSON)
    }

    pub(crate) fn report_json(&self, task: &TaskId, epoch: u32) -> PathBuf {
        self.task_dir(task, epoch).join(REPORT_JSON)
    }

    /// `results.csv.before-regrade-<n>`: the rows an in-place `regrade`
    /// replaced, the first `n` not yet taken (a folder regraded twice
    /// keeps both backups).
    pub(crate) fn regrade_backup(&self) -> PathBuf {
        (1..)
            .map(|n| self.root.join(format!("results.csv.before-regrade-{n}")))
            .find(|path| !path.exists())
            .unwrap_or_else(|| self.root.join("results.csv.before-regrade"))
    }

    /// The SWE-bench predictions of one epoch: `predictions.jsonl` for the
    /// first, `predictions.epoch-<k>.jsonl` for the others.
    pub(crate) fn predictions(&self, epoch: u32) -> PathBuf {
        if epoch == 1 {
            self.root.join("predictions.jsonl")
        } else {
            self.root.join(format!("predictions.epoch-{epoch}.jsonl"))
        }
    }
}
/// The subfolders of `dir` that hold a run.json, by name, sorted: what a
/// user who named the folder of their runs meant.
fn runs_in(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut runs: Vec<String> = entries
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.path().join("run.json").is_file())
        .filter_map(|entry| entry.file_name().into_string().ok())
        .collect();
    runs.sort();
    runs
}
