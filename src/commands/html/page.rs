//! The HTML pages of `report --format html` and `compare --format html`:
//! a run's page (outcomes by exit reason, turns and tokens per task, a
//! sortable per-task table, in `html/report.rs`), one transcript page per
//! (task, epoch) (`html/transcript.rs`), and the comparison of two runs
//! (`html/compare.rs`). This file holds what they share: escaping, the page
//! shell with its CSS, and the SVG pieces the charts are drawn with.
//!
//! Every page stands alone and never reaches the network: CSS in a
//! `<style>`, charts as inline SVG drawn here, a few lines of inline script
//! (table sorting), and a Content-Security-Policy that forbids loading
//! anything else. All text from the run (task ids, model text, command
//! output) goes through [`escape`]. What the pages say is computed in
//! `commands::report`, `commands::compare` and `commands::show`; these
//! files only lay it out and write the files. `commands::output`, not
//! those command files, calls them for `--format html`.

use std::io;
use std::path::{Path, PathBuf};

use crate::run_folder::Status;
use crate::run_folder::trajectory::ReadError;

/// Escapes text for HTML element content and quoted attribute values.
/// Control characters other than tab and newlines become their visible
/// Unicode pictures (ESC as `␛`), so colour codes in test output show as
/// what they are instead of as invalid characters.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(c),
            // U+2400.. are the control pictures of U+0000..U+001F, U+2421 of DEL.
            c if (c as u32) < 0x20 => out.push(char::from_u32(0x2400 + c as u32).unwrap_or('?')),
            '\u{7f}' => out.push('\u{2421}'),
            c => out.push(c),
        }
    }
    out
}

/// Why the pages cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum HtmlError {
    #[error("failed to create {}: {source}", dir.display())]
    CreateDir { dir: PathBuf, source: io::Error },
    #[error("failed to write {}: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
    /// `--output` names a folder (`.`, `/`), not the page's file.
    #[error("{} names no file", .0.display())]
    NoFileName(PathBuf),
    /// A trajectory to draw a transcript page from.
    #[error(transparent)]
    Trajectory(#[from] ReadError),
}

/// Writes a page, making its folder first.
pub(crate) fn write_file(path: &Path, text: &str) -> Result<(), HtmlError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| HtmlError::CreateDir {
            dir: dir.to_owned(),
            source,
        })?;
    }
    std::fs::write(path, text).map_err(|source| HtmlError::Write {
        path: path.to_owned(),
        source,
    })
}

const STYLE: &str = "
:root { --passed: #2e7d32; --failed: #c62828; --error: #8d8d8d; --a: #5c6bc0; --b: #ef6c00;
  --ink: #1f2328; --muted: #656d76; --line: #d0d7de; --soft: #f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, 'Segoe UI', sans-serif; color: var(--ink);
  margin: 0 auto; padding: 16px 24px 48px; max-width: 1100px; }
h1 { font-size: 22px; margin: 8px 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; }
code, pre { font: 12.5px/1.4 ui-monospace, 'SFMono-Regular', Menlo, Consolas, monospace; }
pre { background: var(--soft); border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px;
  margin: 4px 0 10px; white-space: pre-wrap; overflow-wrap: anywhere; }
.meta, .note, footer, .hint { color: var(--muted); }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 16px 0; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px; min-width: 170px; }
.card .big { font-size: 22px; font-weight: 600; }
.wide { overflow-x: auto; }
table { border-collapse: collapse; margin: 6px 0 12px; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 10px; text-align: left; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
th[data-key] { cursor: pointer; user-select: none; white-space: nowrap; }
th[data-key]::after { content: ' \\2195'; color: var(--line); }
th[aria-sort=ascending]::after { content: ' \\25B2'; color: var(--ink); }
th[aria-sort=descending]::after { content: ' \\25BC'; color: var(--ink); }
#tasks td:first-child { white-space: nowrap; }
td.error-text { max-width: 320px; overflow-wrap: anywhere; color: var(--muted); }
.status { font-weight: 600; } .passed .status, .passed.status, .verdict.passed { color: var(--passed); }
.failed .status, .failed.status, .verdict.failed { color: var(--failed); }
.error .status, .error.status { color: var(--error); }
svg.chart { display: block; max-width: 100%; height: auto; }
svg .bar.passed, .key.passed { fill: var(--passed); background: var(--passed); }
svg .bar.failed, .key.failed { fill: var(--failed); background: var(--failed); }
svg .bar.error, .key.error { fill: var(--error); background: var(--error); }
svg .bar.a, .key.a { fill: var(--a); background: var(--a); }
svg .bar.b, .key.b { fill: var(--b); background: var(--b); }
svg .bar.ci { fill: #90a4ae; } svg .point { fill: var(--ink); }
svg .track { fill: var(--soft); stroke: var(--line); }
svg .grid { stroke: var(--line); stroke-width: 1; } svg .axis { stroke: var(--muted); stroke-width: 1; }
svg .zero { stroke: var(--ink); stroke-width: 1.5; stroke-dasharray: 4 3; }
svg text { font: 12px system-ui, sans-serif; fill: var(--ink); } svg text.tick { fill: var(--muted); font-size: 11px; }
.legend { margin: 2px 0 8px; color: var(--muted); }
.key { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin: 0 4px 0 12px; }
.key:first-child { margin-left: 0; }
.turn { border-left: 3px solid var(--line); padding-left: 12px; margin: 14px 0; }
.turn h2 { margin: 0 0 4px; font-size: 15px; } .turn h2 .meta { font-weight: normal; font-size: 13px; }
.model-text { border-left: 3px solid var(--a); background: #eef0fb; }
.reasoning summary { color: var(--muted); cursor: pointer; } .reasoning pre { color: var(--muted); }
pre.command { background: #24292f; color: #f6f8fa; border-color: #24292f; margin-top: 8px; }
pre.command .prompt { color: #79c0ff; } pre.command .exit-zero { color: #9da7b3; }
pre.command .exit-nonzero { color: #ff8182; } pre.command .verdict.passed { color: #7ee787; }
pre.command .verdict.failed { color: #ff8182; } pre.command + pre.output { margin-top: -6px; }
pre.command .probe { color: #ffb86b; font-weight: 600; }
.cut { display: block; color: var(--muted); font-style: italic; }
.problem-error { color: var(--failed); }
.result { font-size: 16px; font-weight: 600; margin-top: 18px; }
";

pub(super) fn page(title: &str, body: &str, script: Option<&str>) -> String {
    let script = script.map_or(String::new(), |s| format!("<script>{s}</script>\n"));
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}\
         <footer>onebash {}</footer>\n{script}</body>\n</html>\n",
        escape(title),
        env!("CARGO_PKG_VERSION")
    )
}

pub(super) fn status_class(status: Status) -> &'static str {
    match status {
        Status::Passed => "passed",
        Status::Failed => "failed",
        Status::Error => "error",
    }
}

pub(super) const STATUSES: [Status; 3] = [Status::Passed, Status::Failed, Status::Error];

pub(super) fn percent(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// A number for an axis: 950, 1.5k, 12k, 3.2M.
pub(super) fn compact(v: f64) -> String {
    let trim = |s: String| s.trim_end_matches(".0").to_owned();
    if v >= 1e6 {
        trim(format!("{:.1}", v / 1e6)) + "M"
    } else if v >= 1e3 {
        trim(format!("{:.1}", v / 1e3)) + "k"
    } else if v.fract() == 0.0 {
        format!("{v}")
    } else {
        format!("{v:.1}")
    }
}

/// A round step (1, 2, 2.5 or 5 times a power of ten) that cuts `0..max`
/// into about `parts` parts; at least 1, as the charts count things.
pub(super) fn nice_step(max: f64, parts: f64) -> f64 {
    let raw = (max / parts).max(1.0);
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|step| *step >= raw)
        .unwrap_or(10.0 * magnitude)
}

pub(super) fn svg_open(id: &str, width: f64, height: f64, label: &str) -> String {
    format!(
        "<svg class=\"chart\" id=\"{id}\" viewBox=\"0 0 {width} {height}\" width=\"{width}\" \
         height=\"{height}\" role=\"img\" aria-label=\"{}\">\n",
        escape(label)
    )
}

pub(super) fn rect(class: &str, x: f64, y: f64, width: f64, height: f64, title: &str) -> String {
    format!(
        "<rect class=\"{class}\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{width:.2}\" height=\"{height:.1}\">\
         <title>{}</title></rect>\n",
        escape(title)
    )
}

pub(super) fn text(class: &str, x: f64, y: f64, anchor: &str, content: &str) -> String {
    format!(
        "<text class=\"{class}\" x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"{anchor}\" \
         dominant-baseline=\"middle\">{}</text>\n",
        escape(content)
    )
}

pub(super) fn legend(keys: &[(&str, String)]) -> String {
    let items: String = keys
        .iter()
        .map(|(class, label)| format!("<span class=\"key {class}\"></span>{}", escape(label)))
        .collect();
    format!("<p class=\"legend\">{items}</p>\n")
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::run_folder::ExitReason;
    use crate::run_folder::ResultRow;
    use crate::task::TaskId;

    /// A row for the page tests of the submodules.
    pub(in crate::commands::html) fn row(
        task: &str,
        status: Status,
        turns: u32,
        tokens: u64,
    ) -> ResultRow {
        let id = TaskId::parse(task).expect("id");
        let exit_reason = match status {
            Status::Error => ExitReason::ApiError,
            Status::Failed => ExitReason::MaxTurns,
            Status::Passed => ExitReason::Completed,
        };
        ResultRow {
            status,
            passed: status == Status::Passed,
            turns,
            tool_calls: turns.saturating_sub(1),
            prompt_tokens: tokens,
            total_tokens: tokens,
            agent_seconds: 1.0,
            wall_seconds: 1.0,
            error: if status == Status::Error {
                "HTTP 500 from https://api.example/v1 <html>".into()
            } else {
                String::new()
            },
            ..ResultRow::blank(id, 1, "m<b>".into(), "p@1".into(), exit_reason)
        }
    }

    #[test]
    fn escape_covers_markup_quotes_and_control_characters() {
        assert_eq!(
            escape("<a href=\"x\">&'</a>\u{1b}[31m\t\n"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;\u{241b}[31m\t\n"
        );
    }

    #[test]
    fn nice_steps_and_compact_numbers() {
        assert_eq!(nice_step(4.0, 4.0), 1.0);
        assert_eq!(nice_step(0.0, 4.0), 1.0);
        assert_eq!(nice_step(9000.0, 4.0), 2500.0);
        assert_eq!(compact(12_000.0), "12k");
        assert_eq!(compact(1_500_000.0), "1.5M");
        assert_eq!(compact(2.5), "2.5");
    }
}
