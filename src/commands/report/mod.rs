//! `onebash report`: the [`Report`] of a run folder, built and rendered as
//! text (summary.rs), and `--by FIELD` ([`by`]).

pub(crate) mod by;
mod summary;

#[cfg(test)]
pub(crate) use summary::PromptCache;
pub(crate) use summary::{
    HistoryProbes, MEASURES, Measures, Report, build, history_probes_summary, prompt_cache_line,
    render,
};
