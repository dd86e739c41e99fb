//! results.csv written on a thread of its own ([`RowSink`]).

use std::path::PathBuf;

use super::csv::ResultsWriter;
use super::error::RunFolderError;
use super::row::ResultRow;

/// results.csv written on a thread of its own. A row's write and sync
/// waits for the disk, tens of milliseconds while other tasks' checkouts
/// fill it: on an async worker that wait delayed the timers and output
/// reads of every task on it. Rows are written in the order they are
/// sent; a row sent is on disk once [`RowSink::finish`] returns.
pub(crate) struct RowSink {
    rows: std::sync::mpsc::Sender<ResultRow>,
    thread: std::thread::JoinHandle<Option<String>>,
}

impl RowSink {
    /// Starts the thread that appends to `writer` (results.csv at `path`,
    /// for messages).
    pub(crate) fn start(
        mut writer: ResultsWriter,
        path: PathBuf,
    ) -> Result<RowSink, RunFolderError> {
        let shown = path.clone();
        let (rows, received) = std::sync::mpsc::channel::<ResultRow>();
        let thread = std::thread::Builder::new()
            .name("results.csv".to_owned())
            .spawn(move || {
                let mut first_error = None;
                for row in received {
                    if let Err(err) = writer.append(&row)
                        && first_error.is_none()
                    {
                        first_error = Some(format!("failed to write {}: {err}", path.display()));
                    }
                }
                first_error
            })
            .map_err(|source| RunFolderError::Writer {
                path: shown,
                source,
            })?;
        Ok(RowSink { rows, thread })
    }

    /// Queues `row` (never waits).
    pub(crate) fn send(&self, row: ResultRow) {
        // The thread ends only when this sink is dropped or finished.
        let _ = self.rows.send(row);
    }

    /// Waits until every row sent is written (a blocking wait: call it off
    /// the async workers); the first write error, if any.
    pub(crate) fn finish(self) -> Option<String> {
        drop(self.rows);
        self.thread
            .join()
            .unwrap_or_else(|_| Some("the results.csv writer failed".to_owned()))
    }
}
