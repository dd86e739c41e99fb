//! Settings: the command line ([`crate::cli`]) checked into a [`RunConfig`]
//! (run_config.rs: the model choice, limits, secrets, without looking at
//! the machine), then what the machine allows ([`probe`]: bwrap,
//! cgroups, engines); the model prices ([`pricing`]); and run.json, the
//! settings as a run writes them ([`manifest`]); where the tasks come
//! from, a task file or a dataset on the Hub ([`source`]).

pub(crate) mod manifest;
pub(crate) mod pricing;
pub(crate) mod probe;
mod run_config;
pub(crate) mod source;

pub use run_config::Secrets;
pub(crate) use run_config::{
    ANTHROPIC_MAX_OUTPUT_TOKENS, ConfigError, ModelChoice, RequestSettings, RunConfig, Shard,
    Unprobed, default_cache_dir,
};
