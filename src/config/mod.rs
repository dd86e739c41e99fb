//! Settings: a run's options ([`options`], filled by the command line) checked
//! into a [`RunConfig`] (run_config.rs, without looking at the machine; each
//! check in the file of its job: [`selection`] the tasks and `--shard`,
//! [`containers`] where they run and the limits, [`model_choice`] the model,
//! [`folders`] where the run writes, [`hidden`] what the sandbox hides,
//! [`fingerprint`] what a resume must agree on, [`secrets`] the keys), then
//! what the machine allows ([`probe`]: bwrap, cgroups, engines); and
//! run.json, the settings as a run writes them ([`manifest`]); where the
//! tasks come from, a task file or a dataset on the Hub ([`source`]).

pub(crate) mod containers;
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
pub(crate) mod source;

pub(crate) use containers::MAX_MIB;
pub(crate) use folders::default_cache_dir;
pub(crate) use options::RunOptions;
pub(crate) use run_config::{ConfigError, RunConfig, Unprobed};
pub use secrets::Secrets;
pub use selection::{Shard, ShardError};
