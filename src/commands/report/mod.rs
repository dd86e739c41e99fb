//! `onebash report`: the [`Report`] of a run folder, built and rendered as
//! text (summary.rs), `--by FIELD` ([`by`]), and `--format swebench`,
//! SWE-bench's run summary ([`swebench`]).

pub(crate) mod by;
pub(crate) mod harness_summary;
mod summary;

#[cfg(test)]
pub(crate) use summary::PromptCache;
pub(crate) use summary::{
    HistoryProbes, MEASURES, Measures, Report, build, history_probes_summary, prompt_cache_line,
    render,
};
