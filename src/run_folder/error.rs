//! Why a run folder, or a file in it, cannot be opened, read or written
//! ([`RunFolderError`]): every variant names the path it concerns, so a
//! user never sees a bare `Permission denied (os error 13)`.

use std::path::PathBuf;

/// A run folder's I/O that failed, with the path it concerns. The texts
/// read after "error: ", as `main` prints them.
#[derive(Debug, thiserror::Error)]
pub enum RunFolderError {
    /// A folder named as a run folder that does not exist.
    #[error(
        "{} is not a run folder: no such folder\nhint: name the folder `onebash run -o` wrote",
        .0.display()
    )]
    NoFolder(PathBuf),
    /// A file named as a run folder (a task file, a results.csv).
    #[error(
        "{} is a file, not a run folder\nhint: name the folder `onebash run -o` wrote (the one holding run.json and results.csv)",
        .0.display()
    )]
    File(PathBuf),
    /// A folder without run.json: not a run folder, or not yet one.
    #[error(
        "{} is not a run folder (no run.json)\nhint: name the folder `onebash run -o` wrote",
        .0.display()
    )]
    NoRunJson(PathBuf),
    /// A folder without run.json whose subfolders are run folders (the
    /// `results/` that holds them): they are named, sorted.
    #[error(
        "{} is not a run folder (no run.json), but holds {}: {}\nhint: name one of them",
        path.display(),
        crate::sys::words::count(runs.len(), "run folder", "run folders"),
        runs.join(", ")
    )]
    FolderOfRuns { path: PathBuf, runs: Vec<String> },
    #[error("failed to create the run folder {}: {source}", path.display())]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    /// run.lock could not be opened or locked.
    #[error("failed to lock {}: {source}", path.display())]
    Lock {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("failed to read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// run.json that is not the JSON of a run manifest.
    #[error("failed to read {}: {source}", path.display())]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// A row of results.csv that does not fit the columns (1-based).
    #[error("{}: row {row} cannot be read: {source}", path.display())]
    Row {
        path: PathBuf,
        row: usize,
        source: csv::Error,
    },
    #[error("failed to write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The thread that appends to results.csv could not start.
    #[error("failed to start the writer of {}: {source}", path.display())]
    Writer {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl RunFolderError {
    /// `Write` of `path`, for `map_err`.
    pub(crate) fn write(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| RunFolderError::Write { path, source }
    }

    /// `Read` of `path`, for `map_err`.
    pub(crate) fn read(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| RunFolderError::Read { path, source }
    }
}
