//! The append-only `results.csv` writer: one `write` per row, so a row is
//! whole or absent.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use super::error::RunFolderError;
use super::row::{COLUMNS, ResultRow};

/// Appends rows to results.csv, the header first when the file is new.
pub(crate) struct ResultsWriter {
    file: File,
}

impl ResultsWriter {
    pub(super) fn open_truncated(path: &Path) -> Result<ResultsWriter, RunFolderError> {
        File::create(path).map_err(RunFolderError::write(path))?;
        ResultsWriter::open(path)
    }

    /// Opens results.csv at `path` for appending, writing the header
    /// first when the file is new.
    pub(crate) fn open(path: &Path) -> Result<ResultsWriter, RunFolderError> {
        ResultsWriter::open_io(path).map_err(RunFolderError::write(path))
    }

    fn open_io(path: &Path) -> std::io::Result<ResultsWriter> {
        let mut file = File::options().create(true).append(true).open(path)?;
        if file.metadata()?.len() == 0 {
            let mut header = csv::Writer::from_writer(Vec::new());
            header
                .write_record(COLUMNS)
                .map_err(std::io::Error::other)?;
            file.write_all(
                &header
                    .into_inner()
                    .map_err(|e| std::io::Error::other(e.to_string()))?,
            )?;
        }
        Ok(ResultsWriter { file })
    }

    /// Writes one row with a single `write` and syncs it to disk.
    pub(crate) fn append(&mut self, row: &ResultRow) -> std::io::Result<()> {
        let mut writer = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(Vec::new());
        writer.serialize(row).map_err(std::io::Error::other)?;
        let bytes = writer
            .into_inner()
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        self.file.write_all(&bytes)?;
        self.file.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    use crate::run_folder::*;
    use crate::task::TaskId;

    /// Every reader opens a run folder the same way: one with run.json is
    /// one, anything else is refused with a message that says why.
    #[test]
    fn only_a_folder_with_run_json_opens_as_a_run_folder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = RunFolder::open(&dir.path().join("nope"))
            .expect_err("no folder")
            .to_string();
        assert!(missing.contains("no such folder"), "{missing}");
        // A task file given where a run folder goes is named as a file.
        let file = dir.path().join("tasks.jsonl");
        std::fs::write(&file, "{}\n").expect("write");
        let file = RunFolder::open(&file).expect_err("a file").to_string();
        assert!(
            file.contains("tasks.jsonl is a file, not a run folder"),
            "{file}"
        );
        assert!(!file.contains("no such folder"), "{file}");
        let empty = RunFolder::open(dir.path())
            .expect_err("no run.json")
            .to_string();
        assert!(empty.contains("not a run folder (no run.json)"), "{empty}");
        // The folder of runs: its runs are named.
        for run in ["b", "a"] {
            std::fs::create_dir_all(dir.path().join(run)).expect("mkdir");
            std::fs::write(dir.path().join(run).join("run.json"), "{}").expect("write");
        }
        let runs = RunFolder::open(dir.path()).expect_err("runs").to_string();
        assert!(
            runs.ends_with("is not a run folder (no run.json), but holds 2 run folders: a, b\nhint: name one of them"),
            "{runs}"
        );
        std::fs::write(dir.path().join("run.json"), "{}").expect("write");
        let folder = RunFolder::open(dir.path()).expect("a run folder");
        let task = TaskId::parse("t1").expect("id");
        assert_eq!(
            folder.trajectory(&task, 2),
            dir.path().join("tasks/t1/epoch-2/trajectory.jsonl")
        );
        assert_eq!(folder.predictions(1), dir.path().join("predictions.jsonl"));
        assert_eq!(
            folder.predictions(3),
            dir.path().join("predictions.epoch-3.jsonl")
        );
        // run.json that is not a manifest opens, but does not read.
        assert!(crate::config::manifest::RunManifest::read(&folder).is_err());
    }

    fn row() -> ResultRow {
        let id = TaskId::parse("t1").expect("id");
        let blank = ResultRow::blank(
            id,
            1,
            "m".into(),
            "default@abc".into(),
            ExitReason::CheckoutError,
        );
        ResultRow {
            wall_seconds: 1.25,
            error: "failed to fetch x: \"quoted\", comma".into(),
            model_retries: 2,
            retry_wait_seconds: 1.5,
            ..blank
        }
    }

    #[test]
    fn rows_follow_the_contract_columns() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("results.csv");
        let mut writer = ResultsWriter::open(&path).expect("open");
        writer.append(&row()).expect("append");
        drop(writer);
        // Reopening appends without a second header.
        ResultsWriter::open(&path)
            .expect("reopen")
            .append(&row())
            .expect("append");
        let text = std::fs::read_to_string(&path).expect("read");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], COLUMNS.join(","));
        assert_eq!(
            lines[1],
            "t1,1,m,default@abc,error,checkout_error,false,0,0,0,0,0,,0.0,,1.25,,\"failed to fetch x: \"\"quoted\"\", comma\",2,1.5,0,0,,0,0,0"
        );
    }

    #[test]
    fn the_row_sink_writes_rows_in_order_and_reports_the_first_failure() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("results.csv");
        let sink =
            RowSink::start(ResultsWriter::open(&path).expect("open"), path.clone()).expect("start");
        for epoch in 1..=50 {
            sink.send(ResultRow { epoch, ..row() });
        }
        assert_eq!(sink.finish(), None);
        let read = read_rows(&path).expect("read back");
        let epochs: Vec<u32> = read.rows.iter().map(|row| row.epoch).collect();
        assert_eq!(epochs, (1..=50).collect::<Vec<_>>());

        // A disk that is full: every write fails, the run is told once.
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let sink = RowSink::start(ResultsWriter { file: full }, PathBuf::from("/dev/full"))
            .expect("start");
        sink.send(row());
        sink.send(row());
        let error = sink.finish().expect("an error");
        assert!(error.starts_with("failed to write /dev/full: "), "{error}");
    }

    /// A results.csv from before `history_probes` (and `replay_divergences`,
    /// and the token columns after them) reads: the missing columns are
    /// empty, and the header is reported as not current, so a resume
    /// rewrites the file before appending.
    #[test]
    fn an_older_header_reads_with_the_new_columns_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("results.csv");
        let header = &COLUMNS[..COLUMNS.len() - 6];
        let text = format!(
            "{}\nt1,1,m,p@1,passed,completed,true,2,1,10,5,15,,1.0,0.5,2.0,0,,0,0.0\n",
            header.join(",")
        );
        std::fs::write(&path, text).expect("write");
        let read = read_rows(&path).expect("read");
        assert!(!read.header_is_current);
        assert_eq!(read.rows.len(), 1);
        assert_eq!(read.rows[0].history_probes, None);
        assert_eq!(read.rows[0].replay_divergences, 0);
        write_rows_atomically(&path, &read.rows).expect("rewrite");
        let read = read_rows(&path).expect("read again");
        assert!(read.header_is_current);
        assert_eq!(read.rows[0].history_probes, None);
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(
            text.lines()
                .nth(1)
                .is_some_and(|l| l.ends_with(",0,,,0,0,0")),
            "{text}"
        );
        assert_eq!(read.rows[0].cached_input_tokens, 0);
    }

    #[test]
    fn rows_read_back_and_a_torn_last_line_is_found() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("results.csv");
        let mut writer = ResultsWriter::open(&path).expect("open");
        writer.append(&row()).expect("append");
        let mut second = row();
        second.task_id = TaskId::parse("t2").expect("id");
        second.cost_usd = Some(0.25);
        second.test_seconds = Some(2.0);
        writer.append(&second).expect("append");
        drop(writer);
        let whole = std::fs::metadata(&path).expect("meta").len();
        let read = read_rows(&path).expect("read");
        assert_eq!(read.rows.len(), 2);
        assert_eq!(read.rows[1].task_id.as_str(), "t2");
        assert_eq!(read.rows[1].cost_usd, Some(0.25));
        assert_eq!(read.rows[0].cost_usd, None);
        assert_eq!(read.torn_at, None);
        // A crash in the middle of a row leaves a line without its newline.
        let mut file = File::options().append(true).open(&path).expect("open");
        file.write_all(b"t3,1,m,default@abc,pass").expect("write");
        let read = read_rows(&path).expect("read");
        assert_eq!(read.rows.len(), 2);
        assert_eq!(read.torn_at, Some(whole));
        write_rows_atomically(&path, &read.rows[..1]).expect("rewrite");
        assert_eq!(read_rows(&path).expect("read").rows.len(), 1);
    }

    #[test]
    fn serde_words_match_as_str() {
        for reason in [
            ExitReason::Completed,
            ExitReason::MaxTurns,
            ExitReason::ContextOverflow,
            ExitReason::Interrupted,
        ] {
            let json = serde_json::to_string(&reason).expect("serialize");
            assert_eq!(json, format!("\"{}\"", reason.as_str()));
        }
    }

    #[test]
    fn one_line_flattens_whitespace() {
        assert_eq!(one_line("a\n  b\tc "), "a b c");
        assert_eq!(one_line(&"x".repeat(2000)).len(), 1003);
    }
}
