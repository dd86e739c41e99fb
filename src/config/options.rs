//! [`RunOptions`]: a run's options as the command line gave them, before any
//! check, in the stages' own types. `cli.rs` fills it from `run`'s flags
//! (`RunArgs::options`); the checks that turn it into a `RunConfig` are
//! the other files of this folder. What each option means is said once, in
//! the flag's help in `cli.rs`.

use std::path::PathBuf;
use std::time::Duration;

use crate::agent::provider::Provider;
use crate::agent::request::ReasoningEffort;
use crate::checkout::History;
use crate::config::shard::Shard;
use crate::env::{ContainerCommands, EnvKind, PullPolicy};
use crate::grade::Rules;
use crate::sys::sandbox::SandboxMode;

/// The options of `onebash run`, one field a flag, named as the flag.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RunOptions {
    pub tasks: PathBuf,
    pub model: String,
    pub repo_base: String,
    pub test_command: Option<String>,
    pub junit_path: Option<PathBuf>,
    pub grading: Option<Rules>,
    pub provider: Provider,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    pub max_retries: u32,
    pub retry_delay: Duration,
    pub max_connections: Option<u32>,
    pub request_timeout: Duration,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub seed: Option<i64>,
    pub max_output_tokens: Option<u64>,
    pub reasoning_effort: Option<ReasoningEffort>,
    pub no_prompt_cache: bool,
    pub thinking_budget: Option<u64>,
    pub interleaved_thinking: bool,
    pub model_args: Vec<String>,
    pub price: Option<String>,
    pub max_cost: Option<f64>,
    pub prompt: Option<PathBuf>,
    pub jobs: u32,
    pub max_turns: u32,
    pub max_tokens: Option<u64>,
    pub command_timeout: Duration,
    pub task_timeout: Duration,
    pub test_timeout: Duration,
    pub runs: u32,
    pub shard: Option<Shard>,
    pub filter: Option<String>,
    pub limit: Option<usize>,
    pub out: Option<PathBuf>,
    pub cache_dir: Option<PathBuf>,
    /// `--registry`: the registry a registry's dataset is read from.
    pub registry: Option<String>,
    pub history: History,
    pub workdirs: Option<PathBuf>,
    pub sandbox: SandboxMode,
    pub allow_network: bool,
    /// `--allow-hosts`.
    pub allow_hosts: Option<crate::task::AllowedHosts>,
    /// `--env`; `None` when not given (tasks that name an image are then
    /// refused, see `image_guard`).
    pub env: Option<EnvKind>,
    pub image: Option<String>,
    pub workdir: String,
    pub cpus: Option<f64>,
    pub pull: PullPolicy,
    pub container_commands: ContainerCommands,
    pub max_processes: u64,
    /// MiB.
    pub max_memory: u64,
    /// MiB.
    pub max_file_size: u64,
    pub resume: bool,
    pub retry_errors: bool,
    pub keep_workdirs: bool,
}

impl RunOptions {
    /// `--env`, host when not given.
    pub(crate) fn env_kind(&self) -> EnvKind {
        self.env.unwrap_or(EnvKind::Host)
    }

    /// The options of `onebash run TASKS --model MODEL` and nothing else:
    /// the command line's defaults (`cli.rs` tests that they are), for
    /// the tests of the checks.
    #[cfg(test)]
    pub(crate) fn defaults(tasks: &std::path::Path, model: &str) -> RunOptions {
        RunOptions {
            tasks: tasks.to_owned(),
            model: model.to_owned(),
            repo_base: crate::task::swebench::DEFAULT_REPO_BASE.to_owned(),
            test_command: None,
            junit_path: None,
            grading: None,
            provider: Provider::Openai,
            base_url: None,
            api_key_env: None,
            max_retries: 10,
            retry_delay: Duration::from_secs(1),
            max_connections: None,
            request_timeout: Duration::from_secs(600),
            temperature: None,
            top_p: None,
            seed: None,
            max_output_tokens: None,
            reasoning_effort: None,
            no_prompt_cache: false,
            thinking_budget: None,
            interleaved_thinking: false,
            model_args: Vec::new(),
            price: None,
            max_cost: None,
            prompt: None,
            jobs: 4,
            max_turns: 50,
            max_tokens: None,
            command_timeout: Duration::from_secs(120),
            task_timeout: Duration::from_secs(3600),
            test_timeout: Duration::from_secs(1800),
            runs: 1,
            shard: None,
            filter: None,
            limit: None,
            out: None,
            cache_dir: None,
            registry: None,
            history: History::Full,
            workdirs: None,
            sandbox: SandboxMode::Auto,
            allow_network: false,
            allow_hosts: None,
            env: None,
            image: None,
            workdir: "/testbed".to_owned(),
            cpus: None,
            pull: PullPolicy::Missing,
            container_commands: ContainerCommands::Channel,
            max_processes: 512,
            max_memory: 4096,
            max_file_size: 2048,
            resume: false,
            retry_errors: false,
            keep_workdirs: false,
        }
    }
}

/// One task with a gold patch, from an absolute repo path: the task file
/// of the tests of the checks.
#[cfg(test)]
pub(crate) const TASK_LINE: &str = r#"{"id": "t", "repo": "/r", "base_commit": "HEAD", "problem_statement": "p", "test_command": "true", "gold_patch": "x"}"#;
