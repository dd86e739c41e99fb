//! `--format` and `--output` of `report` and `compare`: the one place that
//! chooses how a report or a comparison is given. JSON is the type as
//! serde writes it; text and markdown are the command file's `render`
//! (`commands::report`, `commands::compare`); html is the page writers'
//! (`commands::html`); the benchmark's run summary
//! (`commands::report::harness_summary`) is report's only. With `--output` (always for html) the result goes
//! to a file and the path is what is printed.
//!
//! It sits above both sides so that neither imports the other's way up:
//! the page writers import the report and the comparison they lay out, and
//! the command files, which only compute and render text, never import the
//! pages (`tests/it/layers.rs`).

use std::path::Path;

use crate::cli::Format;
use crate::commands::{compare, html, report};
use crate::config::manifest::RunManifest;
use crate::run_folder::{RunFolder, RunFolderError, read_rows};

/// Why a report or a comparison cannot be given: exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// A run folder, its results.csv, that cannot be read.
    #[error(transparent)]
    Folder(#[from] RunFolderError),
    /// `--by` names no field the tasks have.
    #[error(transparent)]
    By(#[from] report::by::ByError),
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// The page writers' (`commands::html`) own error, which names the file.
    #[error(transparent)]
    Page(#[from] html::HtmlError),
    /// The benchmark's run summary asked of a command that has none.
    #[error("{}", crate::grade::run_report::ONLY_FOR_REPORT)]
    NotForCompare,
}

/// What `report` is asked for beyond the run folder.
pub(crate) struct ReportRequest<'a> {
    pub format: Format,
    pub output: Option<&'a Path>,
    pub by: Option<&'a str>,
    /// `--epoch`, of `--format swebench`.
    pub epoch: u32,
}

/// `onebash report`: the report in `format` (grouped `by` a task field
/// when given), returned as text to print,
/// or, with `output` (always for html, default `RUN_DIR/report.html`,
/// transcript pages in `transcripts/` next to it), written to a file
/// whose path is returned.
pub(crate) fn report(run: &Path, request: &ReportRequest<'_>) -> Result<String, OutputError> {
    let ReportRequest {
        format,
        output,
        by,
        epoch,
    } = *request;
    let folder = RunFolder::open(run)?;
    let read = read_rows(&folder.results_csv())?;
    // run.json only names the model of a run without rows: a report of the
    // rows does not need it to read.
    let manifest = RunManifest::read(&folder).ok();
    let rows_report = || -> Result<report::Report, OutputError> {
        let mut report = report::build(&folder, &read.rows, manifest.as_ref());
        if let Some(field) = by {
            report.by = Some(report::by::group(&folder, &read.rows, field)?);
        }
        Ok(report)
    };
    let text = match format {
        Format::Json => serde_json::to_string_pretty(&rows_report()?)? + "\n",
        Format::Text => report::render(&rows_report()?, false),
        Format::Markdown => report::render(&rows_report()?, true),
        Format::BenchmarkReport => {
            report::harness_summary::build(&folder, &read.rows, manifest.as_ref(), epoch).to_json()
        }
        Format::Html => {
            let page = output.map_or_else(|| run.join("report.html"), Path::to_owned);
            html::write_report(&rows_report()?, &read.rows, &folder, &page)?;
            return Ok(format!("{}\n", page.display()));
        }
    };
    match output {
        Some(path) => write_output(path, &text),
        None => Ok(text),
    }
}

/// `onebash compare`: the comparison in `format`, returned as text to
/// print, or, with `output` (always for html, default `compare.html` in
/// the current folder), written to a file whose path is returned.
pub(crate) fn compare(
    run_a: &Path,
    run_b: &Path,
    format: Format,
    output: Option<&Path>,
) -> Result<String, OutputError> {
    let a = read_rows(&RunFolder::open(run_a)?.results_csv())?.rows;
    let b = read_rows(&RunFolder::open(run_b)?.results_csv())?.rows;
    let comparison = compare::build(run_a, &a, run_b, &b);
    let text = match format {
        Format::Json => serde_json::to_string_pretty(&comparison)? + "\n",
        Format::Text => compare::render(&comparison, false),
        Format::Markdown => compare::render(&comparison, true),
        Format::BenchmarkReport => return Err(OutputError::NotForCompare),
        Format::Html => {
            let page = output.map_or_else(html::default_compare_page, Path::to_owned);
            return write_output(&page, &html::compare_page(&comparison));
        }
    };
    match output {
        Some(path) => write_output(path, &text),
        None => Ok(text),
    }
}

/// Writes what a command would print to `path`; returns the line to print
/// instead: the path.
fn write_output(path: &Path, text: &str) -> Result<String, OutputError> {
    html::write_file(path, text)?;
    Ok(format!("{}\n", path.display()))
}
