//! results.csv read back ([`read_rows`], a torn last line found) and
//! rewritten whole by rename ([`write_rows_atomically`], and
//! [`replace_rows`], which keeps the rows it replaces); any other file of
//! the folder rewritten the same way ([`write_atomically`]).

use std::path::Path;

use super::csv::ResultsWriter;
use super::error::RunFolderError;
use super::row::{COLUMNS, ResultRow};

/// Reads results.csv back. A last line without its newline is a row torn
/// by a crash: it is not returned, and `torn_at` says where it starts so
/// the caller can cut it off.
pub(crate) fn read_rows(path: &Path) -> Result<RowsRead, RunFolderError> {
    let bytes = std::fs::read(path).map_err(RunFolderError::read(path))?;
    let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let torn_at = (whole < bytes.len()).then_some(whole as u64);
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(&bytes[..whole]);
    // An empty file has no header: nothing to line up with.
    let header_is_current = whole == 0
        || reader
            .headers()
            .is_ok_and(|header| header.iter().eq(COLUMNS.iter().copied()));
    let mut rows = Vec::new();
    for (index, record) in reader.deserialize::<ResultRow>().enumerate() {
        let row = record.map_err(|source| RunFolderError::Row {
            path: path.to_owned(),
            row: index + 1,
            source,
        })?;
        rows.push(row);
    }
    Ok(RowsRead {
        rows,
        torn_at,
        header_is_current,
    })
}

/// What [`read_rows`] found.
#[derive(Debug)]
pub(crate) struct RowsRead {
    pub rows: Vec<ResultRow>,
    /// Byte offset of a torn last line, if there is one.
    pub torn_at: Option<u64>,
    /// Whether the header is [`COLUMNS`]. A file written by an older
    /// onebash lacks the newer columns (its rows read them as empty);
    /// rows appended to it would not line up with its header, so a resume
    /// rewrites it first.
    pub header_is_current: bool,
}

/// Writes a whole results.csv (header and rows) through a temporary file
/// and a rename: the file is complete before and after, never half.
pub(crate) fn write_rows_atomically(path: &Path, rows: &[ResultRow]) -> Result<(), RunFolderError> {
    let tmp = path.with_extension("csv.tmp");
    {
        let mut writer = ResultsWriter::open_truncated(&tmp)?;
        for row in rows {
            writer.append(row).map_err(RunFolderError::write(&tmp))?;
        }
    }
    std::fs::rename(&tmp, path).map_err(RunFolderError::write(path))
}

/// Replaces results.csv by `rows`, keeping the rows it held at `backup`
/// (a hard link to the old file, so the old rows are never copied nor
/// half-written): after a crash at any point results.csv is whole, the
/// old rows or the new.
pub(crate) fn replace_rows(
    path: &Path,
    backup: &Path,
    rows: &[ResultRow],
) -> Result<(), RunFolderError> {
    if std::fs::hard_link(path, backup).is_err() {
        // A file system without hard links: a copy, whole before it is named.
        let tmp = backup.with_extension("tmp");
        std::fs::copy(path, &tmp).map_err(RunFolderError::write(&tmp))?;
        std::fs::rename(&tmp, backup).map_err(RunFolderError::write(backup))?;
    }
    write_rows_atomically(path, rows)
}

/// Writes `bytes` to `path` through `<path>.tmp` and a rename: the file is
/// whole before and after, and a hard link to the old file (a regraded
/// copy of a run folder) keeps the old bytes.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), RunFolderError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    std::fs::write(&tmp, bytes).map_err(RunFolderError::write(&tmp))?;
    std::fs::rename(&tmp, path).map_err(RunFolderError::write(path))
}
