//! Settings: a run's options ([`options`], filled by the command line) checked
//! into a [`RunConfig`] (run_config.rs, without looking at the machine; each
//! check in the file of its job: [`selection`] the tasks (`shard.rs`: `--shard`),
//! [`containers`] where they run and the limits, [`model_choice`] the model,
//! [`folders`] where the run writes, [`hidden`] what the sandbox hides,
//! [`fingerprint`] what a resume must agree on, [`secrets`] the keys; `error.rs`: [`ConfigError`]; `client.rs`: the
//! model's client), then
//! what the machine allows ([`probe`]: bwrap, cgroups, engines); and
//! run.json, the settings as a run writes them ([`manifest`]); where the
//! tasks come from, a task file or a dataset on the Hub ([`source`]).

mod client;
pub(crate) mod containers;
mod error;
mod fingerprint;
pub(crate) mod folders;
mod hidden;
pub(crate) mod manifest;
pub(crate) mod model_choice;
pub(crate) mod options;
pub(crate) mod probe;
mod run_config;
pub(crate) mod secrets;
pub(crate) mod selection;
mod shard;
pub(crate) mod source;

pub(crate) use containers::MAX_MIB;
pub(crate) use error::ConfigError;
pub(crate) use folders::default_cache_dir;
pub(crate) use options::RunOptions;
pub(crate) use run_config::{RunConfig, Unprobed};
pub use secrets::Secrets;
pub use shard::{Shard, ShardError};
