//! Self-contained HTML pages: escaping, the page shell and inline SVG
//! charts (page.rs); the report (report.rs), the transcript (transcript.rs)
//! and the comparison (compare.rs).

mod compare;
mod page;
mod report;
mod transcript;

pub(crate) use compare::{compare_page, default_compare_page};
pub(crate) use page::{HtmlError, escape, write_file};
pub(crate) use report::write_report;
pub(crate) use transcript::transcript_page;

// The page helpers the pages share, for them only.
use page::{
    STATUSES, compact, legend, nice_step, page, percent, rect, status_class, svg_open, text,
};
