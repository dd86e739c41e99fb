//! `onebash report`: the [`Report`] of a run folder, built and rendered as
//! text (summary.rs), and `--by FIELD` ([`by`]).

pub mod by;
mod summary;

pub use summary::{
    HistoryProbes, MEASURES, Measures, PassAtK, ProbedRow, PromptCache, Report, build,
    history_probes_summary, prompt_cache_line, render,
};
