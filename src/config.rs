//! Validated settings for a run, built from the command line.
//!
//! Owns every check that can be made before anything runs (the task file,
//! the prompt rendered for every selected task, the shard, the filter, the
//! model and its key, the run folder) and turns them into [`RunConfig`]. A
//! failure here is bad usage or bad input: exit code 2, nothing ran.

use std::path::{Path, PathBuf};
use std::time::Duration;

use regex::Regex;
use serde::Serialize;

use crate::cli::RunArgs;
use crate::limits::{Enforcement, LimitPlan, Limits};
use crate::prompt::{PromptError, PromptVariant};
use crate::sandbox::{Sandbox, SandboxMode};
use crate::task::{TaskFileError, TaskSpec, load_tasks};

const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// Variables that hold API keys, erased from the process at start-up.
const KEY_VARIABLES: &[&str] = &["OPENAI_API_KEY", "ANTHROPIC_API_KEY"];

/// Which model answers.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ModelChoice {
    /// Applies each task's gold patch; no API.
    Oracle,
    /// An OpenAI-compatible Chat Completions endpoint.
    OpenAi {
        name: String,
        base_url: String,
        /// The variable the key came from; the key itself is never serialized.
        api_key_env: String,
        #[serde(skip)]
        api_key: Option<String>,
    },
}

impl ModelChoice {
    /// The name in the CSV's `model` column.
    pub fn name(&self) -> &str {
        match self {
            ModelChoice::Oracle => "oracle",
            ModelChoice::OpenAi { name, .. } => name,
        }
    }
}

/// Everything a run needs, checked.
#[derive(Debug, Clone, Serialize)]
pub struct RunConfig {
    pub task_file: PathBuf,
    #[serde(skip)]
    pub tasks: Vec<TaskSpec>,
    pub task_count: usize,
    pub model: ModelChoice,
    #[serde(skip)]
    pub prompt: PromptVariant,
    pub prompt_name: String,
    pub prompt_sha256: String,
    pub jobs: usize,
    pub max_turns: u32,
    pub max_tokens: Option<u64>,
    #[serde(serialize_with = "seconds")]
    pub command_timeout: Duration,
    #[serde(serialize_with = "seconds")]
    pub task_timeout: Duration,
    #[serde(serialize_with = "seconds")]
    pub test_timeout: Duration,
    pub runs: u32,
    pub shard: Option<Shard>,
    pub filter: Option<String>,
    pub limit: Option<usize>,
    pub out_dir: PathBuf,
    pub cache_dir: PathBuf,
    pub keep_workdirs: bool,
    pub sandbox_mode: SandboxMode,
    #[serde(skip)]
    pub sandbox: Sandbox,
    /// The sandbox in use: `bwrap` or `none`.
    pub sandbox_used: &'static str,
    pub allow_network: bool,
    pub limits: Limits,
    #[serde(skip)]
    pub limit_plan: LimitPlan,
    /// How each limit is enforced here.
    pub limits_enforced: Enforcement,
    /// What the user should know before the run starts (no sandbox, no cgroup).
    #[serde(skip)]
    pub warnings: Vec<String>,
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// `--shard K/N`: 1-based K of N.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    pub fn parse(raw: &str) -> Result<Shard, String> {
        let (k, n) = raw
            .split_once('/')
            .ok_or_else(|| format!("--shard {raw:?} is not K/N (for example 2/4)"))?;
        let index: usize = k
            .trim()
            .parse()
            .map_err(|_| format!("--shard {raw:?}: K is not a number"))?;
        let count: usize = n
            .trim()
            .parse()
            .map_err(|_| format!("--shard {raw:?}: N is not a number"))?;
        if count == 0 || index == 0 || index > count {
            return Err(format!(
                "--shard {raw:?}: K must be between 1 and N, and N at least 1"
            ));
        }
        Ok(Shard { index, count })
    }

    /// Whether the task at 0-based position `i` of the file belongs to this shard.
    pub fn contains(&self, i: usize) -> bool {
        i % self.count == self.index - 1
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    Tasks(#[from] TaskFileError),
    #[error(transparent)]
    Prompt(#[from] PromptError),
    #[error("{0}")]
    Usage(String),
}

impl RunConfig {
    pub fn from_args(args: &RunArgs) -> Result<RunConfig, ConfigError> {
        let all_tasks = load_tasks(&args.tasks)?;
        let shard = args
            .shard
            .as_deref()
            .map(Shard::parse)
            .transpose()
            .map_err(ConfigError::Usage)?;
        let filter = args
            .filter
            .as_deref()
            .map(|raw| {
                Regex::new(raw).map_err(|err| {
                    ConfigError::Usage(format!(
                        "--filter {raw:?} is not a valid regular expression: {err}"
                    ))
                })
            })
            .transpose()?;
        let mut tasks: Vec<TaskSpec> = all_tasks
            .into_iter()
            .enumerate()
            .filter(|(i, _)| shard.is_none_or(|s| s.contains(*i)))
            .map(|(_, task)| task)
            .filter(|task| {
                filter
                    .as_ref()
                    .is_none_or(|re| re.is_match(task.id.as_str()))
            })
            .collect();
        if let Some(limit) = args.limit {
            tasks.truncate(limit);
        }
        if tasks.is_empty() {
            return Err(ConfigError::Usage(
                "no task is selected; hint: check --filter, --shard and --limit".to_owned(),
            ));
        }

        let model = model_choice(args)?;
        if matches!(model, ModelChoice::Oracle) {
            let missing: Vec<&str> = tasks
                .iter()
                .filter(|t| t.gold_patch.is_none())
                .map(|t| t.id.as_str())
                .collect();
            if !missing.is_empty() {
                return Err(ConfigError::Usage(format!(
                    "--model oracle needs a gold_patch in every task; these have none: {}",
                    missing.join(", ")
                )));
            }
        }

        let prompt = match &args.prompt {
            Some(path) => PromptVariant::load(path)?,
            None => PromptVariant::builtin()?,
        };
        // An undefined variable must stop the run before anything starts, so
        // every selected task is rendered once now.
        for task in &tasks {
            prompt.render(task, args.max_turns)?;
        }

        let timeout = |flag: &str, value: f64| {
            if value.is_finite() && value > 0.0 {
                Ok(Duration::from_secs_f64(value))
            } else {
                Err(ConfigError::Usage(format!(
                    "{flag} must be a positive number of seconds, got {value}"
                )))
            }
        };
        let out_dir = match &args.out {
            Some(dir) => dir.clone(),
            None => default_out_dir(model.name(), &prompt.name),
        };
        check_out_dir(&out_dir)?;
        let cache_dir = args.cache_dir.clone().unwrap_or_else(default_cache_dir);

        // The agent must not read the task file (gold patches, hidden tests)
        // or the run folder (other tasks' trajectories); the cache must stay
        // readable, since working copies borrow its objects.
        let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
        let (sandbox, sandbox_warning) = Sandbox::choose(
            args.sandbox,
            &[absolute(&args.tasks), absolute(&out_dir)],
            &[absolute(&cache_dir)],
        )
        .map_err(ConfigError::Usage)?;
        let mut warnings: Vec<String> = sandbox_warning.into_iter().collect();
        const MIB: u64 = 1024 * 1024;
        let limits = Limits {
            max_processes: args.max_processes,
            max_memory_bytes: args.max_memory * MIB,
            max_file_size_bytes: args.max_file_size * MIB,
        };
        let limit_plan = LimitPlan::new(limits);
        let limits_enforced = limit_plan.enforcement();
        if limits_enforced.processes.starts_with("not enforced") {
            warnings.push(format!(
                "the process limit is not enforced: {}",
                limit_plan
                    .cgroup_problem
                    .as_deref()
                    .unwrap_or("no cgroup could be made")
            ));
        }

        Ok(RunConfig {
            task_file: args.tasks.clone(),
            task_count: tasks.len(),
            tasks,
            model,
            prompt_name: prompt.name.clone(),
            prompt_sha256: prompt.sha256.clone(),
            prompt,
            jobs: args.jobs as usize,
            max_turns: args.max_turns,
            max_tokens: args.max_tokens,
            command_timeout: timeout("--command-timeout", args.command_timeout)?,
            task_timeout: timeout("--task-timeout", args.task_timeout)?,
            test_timeout: timeout("--test-timeout", args.test_timeout)?,
            runs: args.runs,
            shard,
            filter: args.filter.clone(),
            limit: args.limit,
            out_dir,
            cache_dir,
            keep_workdirs: args.keep_workdirs,
            sandbox_mode: args.sandbox,
            sandbox_used: sandbox.name(),
            sandbox,
            allow_network: args.allow_network,
            limits,
            limit_plan,
            limits_enforced,
            warnings,
        })
    }
}

fn model_choice(args: &RunArgs) -> Result<ModelChoice, ConfigError> {
    // Every key variable is erased from the process, used or not, so that
    // no command can read one back from the harness's /proc/PID/environ.
    let api_key = take_secret_env(&args.api_key_env);
    for other in KEY_VARIABLES {
        take_secret_env(other);
    }
    if args.model == "oracle" {
        return Ok(ModelChoice::Oracle);
    }
    if args.model.starts_with("replay:") {
        return Err(ConfigError::Usage(
            "--model replay:RUN_DIR is not available in this version".to_owned(),
        ));
    }
    let base_url = args
        .base_url
        .clone()
        .or_else(|| {
            std::env::var("OPENAI_BASE_URL")
                .ok()
                .filter(|v| !v.is_empty())
        })
        .unwrap_or_else(|| DEFAULT_OPENAI_BASE_URL.to_owned());
    if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
        return Err(ConfigError::Usage(format!(
            "--base-url {base_url:?} must start with http:// or https://"
        )));
    }
    // OpenAI's own service needs a key; a local server (vLLM, llama.cpp,
    // Ollama) usually does not, so a missing key is only an error there.
    if api_key.is_none() && base_url.starts_with(DEFAULT_OPENAI_BASE_URL) {
        return Err(ConfigError::Usage(format!(
            "${} is not set, and {base_url} needs an API key\nhint: export {}=..., or point --base-url at a server that needs none",
            args.api_key_env, args.api_key_env
        )));
    }
    Ok(ModelChoice::OpenAi {
        name: args.model.clone(),
        base_url: base_url.trim_end_matches('/').to_owned(),
        api_key_env: args.api_key_env.clone(),
        api_key,
    })
}

/// `results/<UTC time>_<model>_<prompt>`, with characters that do not belong
/// in a folder name replaced.
fn default_out_dir(model: &str, prompt: &str) -> PathBuf {
    let time = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace(':', "-");
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    Path::new("results").join(format!("{time}_{}_{}", clean(model), clean(prompt)))
}

fn check_out_dir(dir: &Path) -> Result<(), ConfigError> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(ConfigError::Usage(format!(
                    "the run folder {} exists and is not empty\nhint: choose another --out",
                    dir.display()
                )));
            }
            Ok(())
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(ConfigError::Usage(format!(
            "failed to use the run folder {}: {err}",
            dir.display()
        ))),
    }
}

/// Reads a secret from the environment and erases it from the process: the
/// bytes of `NAME=value` that /proc/<pid>/environ shows (the block the
/// process started with) are overwritten, then the variable is removed.
/// A child could otherwise read the key back from its parent's environ.
///
/// Must run while the process has one thread: config is built in `main`
/// before the async runtime starts.
fn take_secret_env(name: &str) -> Option<String> {
    let value = std::env::var(name).ok().filter(|v| !v.is_empty());
    let prefix = format!("{name}=");
    unsafe extern "C" {
        static mut environ: *mut *mut std::ffi::c_char;
    }
    // SAFETY: single-threaded (see above), so nothing reads or changes the
    // environment meanwhile. `environ` is a null-terminated array of
    // pointers to NUL-terminated strings owned by the process; we only
    // overwrite bytes inside those strings, never past their terminator.
    unsafe {
        let mut entry = environ;
        while !entry.is_null() && !(*entry).is_null() {
            let text = std::ffi::CStr::from_ptr(*entry);
            let len = text.to_bytes().len();
            if text.to_bytes().starts_with(prefix.as_bytes()) {
                let start = (*entry).cast::<u8>().add(prefix.len());
                std::ptr::write_bytes(start, b'x', len - prefix.len());
            }
            entry = entry.add(1);
        }
        std::env::remove_var(name);
    }
    value
}

fn default_cache_dir() -> PathBuf {
    if let Some(xdg) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(xdg).join("onebash");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home).join(".cache").join("onebash");
    }
    std::env::temp_dir().join("onebash-cache")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_parsing_and_membership() {
        let shard = Shard::parse("2/3").expect("valid");
        let members: Vec<usize> = (0..7).filter(|i| shard.contains(*i)).collect();
        assert_eq!(members, vec![1, 4]);
        for bad in ["0/3", "4/3", "1/0", "x/2", "3", "1/y"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn default_out_dir_is_clean() {
        let dir = default_out_dir("org/model:1", "default");
        let name = dir.file_name().and_then(|n| n.to_str()).expect("name");
        assert!(name.ends_with("_org_model_1_default"), "{name}");
        assert!(!name.contains(':'));
    }
}
