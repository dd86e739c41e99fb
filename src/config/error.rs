//! [`ConfigError`]: why a run's options cannot become its settings (exit
//! code 2, or 3 when a dataset's Hub cannot be reached), each of the
//! checks' own errors as its source.

use crate::agent::pricing::PriceError;
use crate::config::probe::ProbeError;
use crate::config::source::SourceError;
use crate::task::TaskFileError;
use crate::task::predictions::PredictionsError;
use crate::task::prompt::PromptError;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    Tasks(#[from] TaskFileError),
    /// A task file or dataset that cannot be read.
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Prompt(#[from] PromptError),
    /// `--model predictions:FILE` that cannot be read.
    #[error(transparent)]
    Predictions(#[from] PredictionsError),
    #[error("{0}")]
    Usage(String),
    /// `--price` that cannot be read.
    #[error(transparent)]
    Price(#[from] PriceError),
    /// What the machine does not allow (`RunConfig::probe`).
    #[error(transparent)]
    Probe(#[from] ProbeError),
}

impl ConfigError {
    /// A dataset's Hub could not be reached and nothing usable was cached:
    /// exit 3, as when the model API cannot be (else 2, the arguments').
    pub(crate) fn hub_unreachable(&self) -> bool {
        matches!(self, ConfigError::Source(err) if err.hub_unreachable())
    }
}
