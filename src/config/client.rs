//! The client of the model a run asks, made from its [`ModelChoice`]: an
//! API model's assembled by `agent/` from its provider's entry in the
//! registry; a replay's recorded provider read from its run.json here, since
//! run.json is `manifest.rs`'s to read.

use std::sync::Arc;

use crate::agent::ModelClient;
use crate::agent::replay::ReplayStore;
use crate::config::manifest::RunManifest;
use crate::config::model_choice::ModelChoice;
use crate::grade::Rules;

impl ModelChoice {
    /// The client of the model: an API model's assembled by `agent/` from
    /// its provider's entry in the registry, behind its retries, gate and
    /// price; or one that needs no API (oracle, noop, a replay, predictions,
    /// graded by `grading`'s rules when given).
    pub(crate) fn client(&self, grading: Option<Rules>) -> anyhow::Result<ModelClient> {
        Ok(match self {
            ModelChoice::Oracle { .. } => ModelClient::oracle(),
            ModelChoice::Predictions { file, .. } => {
                ModelClient::predictions(Arc::clone(file), grading)
            }
            ModelChoice::Noop => ModelClient::noop(),
            ModelChoice::Replay { run_dir, .. } => {
                let store = ReplayStore::open(run_dir, RunManifest::recorded_provider)?;
                ModelClient::replay(store)
            }
            ModelChoice::Api(api) => ModelClient::api(api)?,
        })
    }
}
