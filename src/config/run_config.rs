//! Validated settings for a run, built from the command line.
//!
//! Owns every check that can be made before anything runs (the task file,
//! the prompt rendered for every selected task, the filter, the model and
//! its key, the run folder) and turns them into [`RunConfig`]. A failure
//! here is bad usage or bad input: exit code 2, nothing ran.
//!
//! Building a config reads the files its arguments name and nothing else
//! of the machine: whether bwrap works and where cgroups can be made are
//! found by [`RunConfig::probe`] (see `config/probe.rs`), a step of its own that
//! `main` takes once the arguments are good. Values the command line can
//! check itself (`--shard`, durations, ranges) are clap's, in `cli.rs`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use regex::Regex;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::checkout::History;
use crate::cli::{ContainerCommands, EnvKind, Provider, PullPolicy, ReasoningEffort, RunArgs};
use crate::config::pricing::{PRICES_TAKEN, Price, PriceError, builtin_price};
use crate::config::probe::{ProbeError, Probed};
use crate::config::source::{DatasetContext, DatasetRecord, SourceError};
use crate::grade::Rules;
use crate::run_folder::RunFolder;
use crate::sys::limits::Limits;
use crate::sys::sandbox::{PRIVATE_DIRS, SandboxMode};
use crate::task::predictions::{
    Prediction, PredictionFile, PredictionsError, PredictionsRecord, load_predictions,
};
use crate::task::prompt::{PromptError, PromptVariant};
use crate::task::{LoadOptions, TaskFileError, TaskId, TaskSpec};

const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
const DEFAULT_ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";

/// Variables that hold API keys, erased from the process at start-up.
/// The Hugging Face Hub's token (gated datasets), taken out of the
/// environment with the API keys: no command of the agent can read it.
const HF_TOKEN: &str = "HF_TOKEN";

const KEY_VARIABLES: &[&str] = &["OPENAI_API_KEY", "ANTHROPIC_API_KEY", HF_TOKEN];

/// Which model answers.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum ModelChoice {
    /// Applies each task's gold patch; no API. `name` is `gold` when it
    /// was asked for by SWE-bench's name for it (`-m gold`).
    Oracle {
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<&'static str>,
    },
    /// Changes nothing: answers at once without a tool call. The baseline
    /// every task must fail (`validate` uses it).
    Noop,
    /// Plays back the assistant turns recorded in an earlier run folder.
    Replay { spec: String, run_dir: PathBuf },
    /// A model behind an API.
    Api(Box<ApiModel>),
    /// Another agent's patches (`predictions:FILE`): each task's is put in
    /// as SWE-bench puts a model patch in; no API.
    Predictions {
        /// `predictions:FILE` as given.
        spec: String,
        #[serde(skip)]
        file: Arc<PredictionFile>,
    },
}

/// A model behind an API, and how to reach it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ApiModel {
    pub provider: Provider,
    pub name: String,
    pub base_url: String,
    /// The variable the key came from; the key itself is never serialized.
    pub api_key_env: String,
    #[serde(skip)]
    pub api_key: Option<String>,
    pub request: RequestSettings,
    pub max_retries: u32,
    #[serde(serialize_with = "seconds")]
    pub retry_delay: Duration,
    pub max_connections: usize,
    /// USD per million tokens, when known.
    pub price: Option<Price>,
    /// Where the price came from.
    pub price_source: String,
}

impl ModelChoice {
    /// The name in the CSV's `model` column.
    pub(crate) fn name(&self) -> &str {
        match self {
            ModelChoice::Oracle { name } => name.unwrap_or("oracle"),
            ModelChoice::Noop => "noop",
            ModelChoice::Replay { spec, .. } | ModelChoice::Predictions { spec, .. } => spec,
            ModelChoice::Api(api) => &api.name,
        }
    }

    /// The `model` column of a task's rows: a prediction's own
    /// `model_name_or_path`, else [`ModelChoice::name`].
    pub(crate) fn row_name(&self, task: &TaskId) -> &str {
        match self.prediction(task) {
            Some(prediction) => &prediction.model_name_or_path,
            None => self.name(),
        }
    }

    /// The task's prediction, when the model is a predictions file.
    pub(crate) fn prediction(&self, task: &TaskId) -> Option<&Prediction> {
        match self {
            ModelChoice::Predictions { file, .. } => file.get(task.as_str()),
            _ => None,
        }
    }
}

/// Everything a run needs, checked. `P` is what is known of the machine:
/// [`Unprobed`] as [`RunConfig::from_args`] builds it, [`Probed`] once
/// [`RunConfig::probe`] looked; a run takes only the latter.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RunConfig<P = Probed> {
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
    pub max_cost: Option<f64>,
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
    /// `--history`: how much of the base's past working copies hold.
    pub history: History,
    /// This run's folder of working copies: `<out_dir>/workdirs`, or a
    /// folder of its own in `--workdirs`.
    pub workdirs: PathBuf,
    pub keep_workdirs: bool,
    pub resume: bool,
    pub retry_errors: bool,
    /// `--junit-path`, relative to the checkout.
    pub junit_path: Option<PathBuf>,
    /// `--grading`: the rules every task is graded by; `None` (run.json's
    /// `null`): each row's format decides ([`Rules::by_format`]).
    pub grading: Option<Rules>,
    /// sha256 of the task file's bytes (of a dataset's file hashes).
    pub task_file_sha256: String,
    /// The dataset the tasks are the rows of, as read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dataset: Option<DatasetRecord>,
    /// `--model predictions:FILE`: the file, and the tasks it has no
    /// prediction for and the predictions that name no task.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predictions: Option<PredictionsRecord>,
    /// `--test-command`: the template for tasks that have no test command.
    pub test_command: Option<String>,
    pub sandbox_mode: SandboxMode,
    /// What the sandbox hides from every command, given to the bwrap probe
    /// and the sandbox.
    #[serde(skip)]
    pub hidden: Vec<PathBuf>,
    pub allow_network: bool,
    /// `--env`: where tasks run.
    pub env_kind: EnvKind,
    /// `--image`: the template of the images of tasks that have none.
    pub image: Option<String>,
    /// `--workdir`: where the working copy is in a container, for tasks
    /// that name none.
    pub workdir: String,
    /// `--cpus` of each task's container.
    pub cpus: Option<f64>,
    /// `--pull`.
    pub pull: PullPolicy,
    /// `--container-commands`: not in the fingerprint, since the commands
    /// see the same either way.
    pub container_commands: ContainerCommands,
    pub limits: Limits,
    /// What the machine allows: the sandbox in use, how limits are kept.
    #[serde(flatten)]
    pub probed: P,
    /// What the user should know before the run starts (no sandbox, no cgroup).
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// A [`RunConfig`] whose machine has not been looked at yet.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Unprobed;

/// Sampling and request settings sent with every call, recorded in run.json.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct RequestSettings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// `--model-arg KEY=JSON`: added to the request body as given.
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub extra: serde_json::Map<String, serde_json::Value>,
    #[serde(serialize_with = "seconds")]
    pub request_timeout: Duration,
    /// Anthropic: prompt-cache breakpoints in each request (on unless
    /// `--no-prompt-cache`).
    pub prompt_cache: bool,
    /// Anthropic: `--thinking-budget`, extended thinking's budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u64>,
    /// Anthropic: `--interleaved-thinking`, the beta header sent.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interleaved_thinking: bool,
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

pub(crate) use crate::cli::Shard;

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

impl RunConfig {
    /// The settings that decide outcomes. A resumed run and the shards of a
    /// merge must agree on every one; how many tasks run at once, which
    /// tasks are selected and where the cache is may differ.
    pub(crate) fn fingerprint(&self) -> serde_json::Value {
        self.fingerprint_with(self.probed.sandbox_used)
    }
}

impl<P> RunConfig<P> {
    /// [`RunConfig::fingerprint`] with the sandbox a probe found (or, for
    /// `--dry-run`, would find).
    pub(crate) fn fingerprint_with(&self, sandbox_used: &str) -> serde_json::Value {
        let (provider, request) = match &self.model {
            ModelChoice::Api(api) => (Some(api.provider), Some(&api.request)),
            _ => (None, None),
        };
        let mut fingerprint = serde_json::json!({
            "task_file_sha256": self.task_file_sha256,
            "model": self.model.name(),
            "provider": provider,
            "request": request.map(|r| serde_json::json!({
                "temperature": r.temperature,
                "top_p": r.top_p,
                "seed": r.seed,
                "max_output_tokens": r.max_output_tokens,
                "model_args": r.extra,
            })),
            "prompt": format!("{}@{}", self.prompt_name, self.prompt_sha256),
            "max_turns": self.max_turns,
            "max_tokens": self.max_tokens,
            "max_cost": self.max_cost,
            "command_timeout_s": self.command_timeout.as_secs_f64(),
            "task_timeout_s": self.task_timeout.as_secs_f64(),
            "test_timeout_s": self.test_timeout.as_secs_f64(),
            "sandbox": sandbox_used,
            "junit_path": self.junit_path,
            "allow_network": self.allow_network,
            "limits": self.limits,
        });
        // The template decides what grades tasks that have no test command,
        // so a resume or merge must use the same. It is in the fingerprint
        // only when given, so run folders from before it was keep resuming.
        // (`--repo-base` is not: it says where a commit comes from, and a
        // full sha pins what it holds.)
        // Thinking changes what the model answers; it is there only when
        // asked for, so runs from before the flag keep resuming. (Prompt
        // caching changes only the bill.)
        if let ModelChoice::Api(api) = &self.model
            && let Some(budget) = api.request.thinking_budget
            && let Some(request) = fingerprint
                .get_mut("request")
                .and_then(serde_json::Value::as_object_mut)
        {
            request.insert("thinking_budget".to_owned(), serde_json::json!(budget));
            request.insert(
                "interleaved_thinking".to_owned(),
                serde_json::json!(api.request.interleaved_thinking),
            );
        }
        // The commit a dataset's rows came from (their hashes are in
        // task_file_sha256 already): in the fingerprint only for a dataset,
        // so task-file runs from before datasets keep resuming.
        if let (Some(dataset), Some(fields)) = (&self.dataset, fingerprint.as_object_mut()) {
            fields.insert(
                "dataset".to_owned(),
                serde_json::json!(dataset.fingerprint()),
            );
        }
        if let (Some(template), Some(fields)) = (&self.test_command, fingerprint.as_object_mut()) {
            fields.insert("test_command".to_owned(), serde_json::json!(template));
        }
        // The rules a verdict is reached by; when not given, the rows'
        // format decides, and the rows are in task_file_sha256 already.
        if let (Some(rules), Some(fields)) = (self.grading, fingerprint.as_object_mut()) {
            fields.insert("grading".to_owned(), serde_json::json!(rules));
        }
        // Likewise `--history none`: the default is what runs from before
        // the flag did (as far as the past goes).
        // The predictions are their bytes, wherever the file is: a resume
        // or a shard with a changed file is refused, a moved one is not.
        if let (Some(predictions), Some(fields)) = (&self.predictions, fingerprint.as_object_mut())
        {
            fields.insert("model".to_owned(), serde_json::json!("predictions"));
            fields.insert(
                "predictions_sha256".to_owned(),
                serde_json::json!(predictions.sha256),
            );
        }
        if let (History::None, Some(fields)) = (self.history, fingerprint.as_object_mut()) {
            fields.insert("history".to_owned(), serde_json::json!(self.history));
        }
        // The reasoning effort changes what the model does; in the
        // fingerprint only when given, as above.
        if let (Some(effort), Some(request)) = (
            request.and_then(|r| r.reasoning_effort),
            fingerprint
                .get_mut("request")
                .and_then(serde_json::Value::as_object_mut),
        ) {
            request.insert("reasoning_effort".to_owned(), serde_json::json!(effort));
        }
        // And a container environment: its image names and where the
        // working copy goes decide what the commands find.
        if let (EnvKind::Podman | EnvKind::Docker | EnvKind::Oci, Some(fields)) =
            (self.env_kind, fingerprint.as_object_mut())
        {
            fields.insert("env".to_owned(), serde_json::json!(self.env_kind));
            fields.insert("image".to_owned(), serde_json::json!(self.image));
            fields.insert("workdir".to_owned(), serde_json::json!(self.workdir));
            fields.insert("cpus".to_owned(), serde_json::json!(self.cpus));
        }
        fingerprint
    }
}

impl RunConfig<Unprobed> {
    /// The run's configuration from its arguments and the keys `main` took
    /// out of the environment. It reads the files the arguments name (the
    /// task file, the prompt, the run folder) and looks at nothing else:
    /// no program runs and nothing is written.
    pub(crate) fn from_args(
        args: &RunArgs,
        secrets: &Secrets,
    ) -> Result<RunConfig<Unprobed>, ConfigError> {
        let cache_dir = args.cache_dir.clone().unwrap_or_else(default_cache_dir);
        let cache_dir = std::path::absolute(&cache_dir).unwrap_or(cache_dir);
        let out_dir_given = args.out.clone();
        let context = DatasetContext {
            token: secrets.hf_token(),
            cache_dir: cache_dir.clone(),
            // A resume reads the commit the run read before, whatever the
            // revision's name points at now, and needs no network for it.
            pinned_sha: match (&out_dir_given, args.resume) {
                (Some(out), true) => crate::config::source::pinned_by(out, &args.tasks),
                _ => None,
            },
        };
        let prediction_file = prediction_file(args)?;
        let (selected, predictions) = select_tasks(args, &context, prediction_file.as_deref())?;
        let tasks = selected.tasks;
        let task_file_sha256 = selected.sha256;
        let mut warnings = selected.warnings;
        if let Some(file) = &prediction_file {
            duplicate_warning(file, &mut warnings);
        }
        if let Some(record) = &predictions {
            prediction_warnings(record, &args.tasks, &mut warnings);
        }
        check_container_args(args, &tasks, &mut warnings)?;
        let model = model_choice(args, secrets, prediction_file, &mut warnings)?;
        if let ModelChoice::Oracle { .. } = model {
            check_gold_patches(&tasks, model.name())?;
        }

        let prompt = checked_prompt(args, &tasks)?;

        // Absolute, because the sandbox binds working copies by path from
        // another current directory.
        let out_dir = match &args.out {
            Some(dir) => dir.clone(),
            None => default_out_dir(model.name(), &prompt.name),
        };
        let out_dir = std::path::absolute(&out_dir).unwrap_or(out_dir);
        check_out_dir(&out_dir, args.resume)?;
        let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
        let workdirs_root = args.workdirs.as_deref().map(absolute);
        if let Some(root) = &workdirs_root {
            check_workdirs(root, &out_dir, &cache_dir, &absolute(&args.tasks))?;
        }
        let workdirs = match &workdirs_root {
            None => out_dir.join("workdirs"),
            Some(root) => root.join(workdirs_name(&out_dir)),
        };

        let mut hidden = hidden_paths(&args.tasks, &tasks, &out_dir, &cache_dir, workdirs_root);
        hidden.extend(selected.hidden);
        // Other tasks' patches are not this task's to read.
        hidden.extend(
            predictions
                .as_ref()
                .map(|record| std::path::absolute(&record.path).unwrap_or(record.path.clone())),
        );
        let limits = limits_of(args)?;

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
            max_cost: args.max_cost,
            command_timeout: args.command_timeout,
            task_timeout: args.task_timeout,
            test_timeout: args.test_timeout,
            runs: args.runs,
            shard: args.shard,
            filter: args.filter.clone(),
            limit: args.limit,
            out_dir,
            cache_dir,
            history: args.history,
            workdirs,
            keep_workdirs: args.keep_workdirs,
            resume: args.resume,
            retry_errors: args.retry_errors,
            junit_path: args.junit_path.clone(),
            grading: args.grading,
            task_file_sha256,
            dataset: selected.dataset,
            predictions,
            test_command: args.test_command.clone(),
            sandbox_mode: args.sandbox,
            hidden,
            allow_network: args.allow_network,
            env_kind: args.env_kind(),
            image: args.image.clone(),
            workdir: args.workdir.clone(),
            cpus: args.cpus,
            pull: args.pull,
            container_commands: args.container_commands,
            limits,
            probed: Unprobed,
            warnings,
        })
    }

    /// Looks at the machine (see `probe.rs`): runs bwrap once with the
    /// paths to hide, unless `--sandbox none`, and finds where task cgroups
    /// can be made. `--sandbox bwrap` that cannot be had is an error like
    /// a bad argument (exit 2); a fallback adds a warning.
    pub(crate) fn probe(self) -> Result<RunConfig, ConfigError> {
        let images = self.images();
        let (probed, warnings) = Probed::probe(
            self.sandbox_mode,
            &self.hidden,
            self.limits,
            (self.env_kind, &images, self.pull),
            (&self.cache_dir, &self.workdir),
        )?;
        let mut config = self.with_probed(probed);
        config.warnings.extend(warnings);
        Ok(config)
    }

    /// What [`RunConfig::probe`] checks, with nothing pulled or unpacked:
    /// for `run --dry-run`.
    pub(crate) fn look(&self) -> Result<crate::config::probe::Looked, ConfigError> {
        let images = self.images();
        Ok(Probed::look(
            self.sandbox_mode,
            &self.hidden,
            (self.env_kind, &images, self.pull),
            &self.cache_dir,
        )?)
    }

    /// The images the probe makes ready, in task order. An image built
    /// from a folder of the task is built when the task starts.
    fn images(&self) -> Vec<String> {
        self.tasks
            .iter()
            .filter(|t| t.benchmark.image_build().is_none())
            // An empty prediction runs nothing, in no container.
            .filter(|t| self.model.prediction(&t.id).is_none_or(|p| !p.is_empty()))
            .filter_map(|t| t.image.clone())
            .collect()
    }

    /// The same settings with what is known of the machine.
    fn with_probed(self, probed: Probed) -> RunConfig {
        RunConfig {
            task_file: self.task_file,
            tasks: self.tasks,
            task_count: self.task_count,
            model: self.model,
            prompt: self.prompt,
            prompt_name: self.prompt_name,
            prompt_sha256: self.prompt_sha256,
            jobs: self.jobs,
            max_turns: self.max_turns,
            max_tokens: self.max_tokens,
            max_cost: self.max_cost,
            command_timeout: self.command_timeout,
            task_timeout: self.task_timeout,
            test_timeout: self.test_timeout,
            runs: self.runs,
            shard: self.shard,
            filter: self.filter,
            limit: self.limit,
            out_dir: self.out_dir,
            cache_dir: self.cache_dir,
            history: self.history,
            workdirs: self.workdirs,
            keep_workdirs: self.keep_workdirs,
            resume: self.resume,
            retry_errors: self.retry_errors,
            junit_path: self.junit_path,
            grading: self.grading,
            task_file_sha256: self.task_file_sha256,
            dataset: self.dataset,
            predictions: self.predictions,
            test_command: self.test_command,
            sandbox_mode: self.sandbox_mode,
            hidden: self.hidden,
            allow_network: self.allow_network,
            env_kind: self.env_kind,
            image: self.image,
            workdir: self.workdir,
            cpus: self.cpus,
            pull: self.pull,
            container_commands: self.container_commands,
            limits: self.limits,
            probed,
            warnings: self.warnings,
        }
    }
}

/// Tasks that name an image, run where no image is used. Without `--env`
/// that is a mistake to stop at: SWE-bench's eval scripts then fail on the
/// host in ways that read as the model's failure. `--env host` says it is
/// meant, and gets one warning.
fn image_guard(
    args: &RunArgs,
    tasks: &[TaskSpec],
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    let named = tasks.iter().filter(|t| t.image.is_some()).count();
    let Some(first) = tasks.iter().find(|t| t.image.is_some()) else {
        return Ok(());
    };
    let image = first.image.as_deref().unwrap_or_default();
    if args.env.is_none() {
        let from = if args.image.is_some() {
            "--image names an image for every task"
        } else {
            "tasks name an image"
        };
        return Err(ConfigError::Usage(format!(
            "{from} ({named} of {}; the first, {}, runs in {image}), but no --env was chosen, and on the host the image is not used\nhint: run them in their images with --env podman, --env docker or --env oci; or give --env host to run them on this machine as they are",
            tasks.len(),
            first.id,
        )));
    }
    warnings.push(format!(
        "--env host: {named} tasks name an image (the first, {}: {image}); they run on this machine, not in it",
        first.id
    ));
    Ok(())
}

/// The container flags, and an image for every selected task when tasks
/// run in containers.
fn check_container_args(
    args: &RunArgs,
    tasks: &[TaskSpec],
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    let dir = &args.workdir;
    if !dir.starts_with('/') || dir.trim_end_matches('/').is_empty() {
        return Err(ConfigError::Usage(format!(
            "--workdir {dir:?} must be an absolute path other than `/`"
        )));
    }
    if let Some(cpus) = args.cpus
        && !(cpus.is_finite() && cpus > 0.0)
    {
        return Err(ConfigError::Usage(format!(
            "--cpus {cpus} must be a positive number"
        )));
    }
    if args.env_kind().engine().is_none()
        && let Some(refused) = tasks.iter().find_map(|t| {
            let env = args.env_kind().image_backend().unwrap_or("host");
            t.benchmark.needs_engine(t.id.as_str(), env)
        })
    {
        return Err(ConfigError::Usage(refused));
    }
    let Some(engine) = args.env_kind().image_backend() else {
        return image_guard(args, tasks, warnings);
    };
    let without: Vec<&str> = tasks
        .iter()
        .filter(|t| t.image.is_none())
        .map(|t| t.id.as_str())
        .collect();
    if without.is_empty() {
        return Ok(());
    }
    let shown = without
        .iter()
        .take(10)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    let more = without.len().saturating_sub(10);
    Err(ConfigError::Usage(format!(
        "--env {engine} runs each task in its image, and {} selected tasks have none: {shown}{}\nhint: give tasks an `image` field, or --image TEMPLATE (a template over the task's fields)",
        without.len(),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    )))
}

/// The tasks of the task file, Harbor folder or dataset that `--shard`,
/// `--filter` and `--limit` select, in order, with what identifies them;
/// with predictions, only those that have one, and how the predictions
/// met the tasks.
fn select_tasks(
    args: &RunArgs,
    context: &DatasetContext,
    predictions: Option<&PredictionFile>,
) -> Result<(crate::config::source::Loaded, Option<PredictionsRecord>), ConfigError> {
    let options = LoadOptions {
        repo_base: args.repo_base.clone(),
        test_command: args.test_command.clone(),
        image: args.image.clone(),
    };
    let mut loaded = crate::config::source::load(&args.tasks, &options, context)?;
    let all_tasks = std::mem::take(&mut loaded.tasks);
    let all_ids: Vec<String> = match predictions {
        Some(_) => all_tasks.iter().map(|t| t.id.as_str().to_owned()).collect(),
        None => Vec::new(),
    };
    let shard = args.shard;
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
    let Some(file) = predictions else {
        loaded.tasks = tasks;
        return Ok((loaded, None));
    };
    let selected = tasks.len();
    let (tasks, record) = file.match_tasks(all_ids.iter().map(String::as_str), tasks);
    if tasks.is_empty() {
        return Err(ConfigError::Usage(format!(
            "none of the {selected} selected tasks has a prediction in {}\nhint: its `instance_id`s must be the tasks' ids; check the file, --filter, --shard and --limit",
            file.path.display()
        )));
    }
    loaded.tasks = tasks;
    Ok((loaded, Some(record)))
}

/// How many ids a warning lists before it only counts the rest.
const LISTED_IDS: usize = 5;

/// The warnings of a predictions run: the selected tasks that have no
/// prediction (not run), and every prediction that names no task, one
/// line each, or a count and the first few.
fn prediction_warnings(record: &PredictionsRecord, tasks: &Path, warnings: &mut Vec<String>) {
    let file = record.path.display();
    if !record.missing.is_empty() {
        warnings.push(format!(
            "{} selected tasks have no prediction in {file} and are not run: {}",
            record.missing.len(),
            listed(&record.missing)
        ));
    }
    if record.unknown.len() <= LISTED_IDS {
        for id in &record.unknown {
            warnings.push(format!(
                "{file}: the prediction for {id:?} names no task of {}; it is not run",
                tasks.display()
            ));
        }
    } else {
        warnings.push(format!(
            "{file}: {} predictions name no task of {} and are not run: {}",
            record.unknown.len(),
            tasks.display(),
            listed(&record.unknown)
        ));
    }
}

/// The instances with more than one prediction, on one line: as
/// run_evaluation does, the last one is graded.
fn duplicate_warning(file: &PredictionFile, warnings: &mut Vec<String>) {
    if !file.duplicated.is_empty() {
        warnings.push(format!(
            "{}: {} instances have more than one prediction; the last one of each is graded: {}",
            file.path.display(),
            file.duplicated.len(),
            listed(&file.duplicated)
        ));
    }
}

/// `a, b, c` or `a, b, c, d, e and 7 more`.
fn listed(ids: &[String]) -> String {
    let shown = ids
        .iter()
        .take(LISTED_IDS)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    match ids.len().saturating_sub(LISTED_IDS) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// `--model oracle` (or `gold`, `name`) needs every task's solution.
fn check_gold_patches(tasks: &[TaskSpec], name: &str) -> Result<(), ConfigError> {
    let missing: Vec<&str> = tasks
        .iter()
        .filter(|t| {
            matches!(
                t.benchmark.oracle(t.gold_patch.as_deref()),
                crate::task::Oracle::Missing(_)
            )
        })
        .map(|t| t.id.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(ConfigError::Usage(format!(
            "--model {name} needs {} in every task; these have none: {}",
            crate::task::oracle_needs(),
            missing.join(", ")
        )));
    }
    Ok(())
}

/// The prompt variant, rendered once for every selected task: an
/// undefined variable must stop the run before anything starts.
fn checked_prompt(args: &RunArgs, tasks: &[TaskSpec]) -> Result<PromptVariant, ConfigError> {
    let prompt = match &args.prompt {
        Some(path) => PromptVariant::load(path)?,
        None => PromptVariant::builtin()?,
    };
    for task in tasks {
        prompt.render(task, args.max_turns)?;
    }
    Ok(prompt)
}

/// What the sandbox hides from every command. The agent must not read the
/// task file (gold patches, hidden tests), the run folder (other tasks'
/// trajectories) or the cache (the mirrors hold every commit past the
/// base; working copies own their objects). Nor other working copies in
/// --workdirs, this run's or other runs': each command sees its own,
/// bound in on top. All absolute.
fn hidden_paths(
    task_file: &Path,
    tasks: &[TaskSpec],
    out_dir: &Path,
    cache_dir: &Path,
    workdirs_root: Option<PathBuf>,
) -> Vec<PathBuf> {
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
    let mut hidden = vec![absolute(task_file), absolute(out_dir), absolute(cache_dir)];
    // And repos on this machine that tasks are checked out from: their
    // history runs past every base.
    for task in tasks {
        let location = task.repo_location.as_str();
        let path = Path::new(location.strip_prefix("file://").unwrap_or(location));
        // Not `/`: a repo there would hide the whole system.
        if path.is_absolute() && path.parent().is_some() && !hidden.iter().any(|h| h == path) {
            hidden.push(path.to_owned());
        }
    }
    // Not when the sandbox hides them already: inside the run folder,
    // or in a folder every command gets empty (a second empty mount
    // there would be made read-only with the rest).
    hidden.extend(workdirs_root.filter(|root| {
        !root.starts_with(out_dir) && !PRIVATE_DIRS.iter().any(|dir| root.starts_with(dir))
    }));
    hidden
}

/// The child's limits, in bytes where the flags give MiB.
fn limits_of(args: &RunArgs) -> Result<Limits, ConfigError> {
    // clap caps both at what fits; checked all the same.
    let bytes = |flag: &str, mib: u64| {
        mib.checked_mul(1024 * 1024).ok_or_else(|| {
            ConfigError::Usage(format!(
                "{flag} {mib}: too many MiB to count in bytes (at most {})",
                crate::cli::MAX_MIB
            ))
        })
    };
    Ok(Limits {
        max_processes: args.max_processes,
        max_memory_bytes: bytes("--max-memory", args.max_memory)?,
        max_file_size_bytes: bytes("--max-file-size", args.max_file_size)?,
    })
}

/// `--model predictions:FILE`'s file, read and checked.
fn prediction_file(args: &RunArgs) -> Result<Option<Arc<PredictionFile>>, ConfigError> {
    let Some(path) = args.model.strip_prefix("predictions:") else {
        return Ok(None);
    };
    if path.is_empty() {
        return Err(ConfigError::Usage(
            "--model predictions: names no file\nhint: --model predictions:preds.json".to_owned(),
        ));
    }
    Ok(Some(Arc::new(load_predictions(Path::new(path))?)))
}

/// The model `--model` names; `predictions` is the file
/// [`prediction_file`] read for `predictions:FILE`.
fn model_choice(
    args: &RunArgs,
    secrets: &Secrets,
    predictions: Option<Arc<PredictionFile>>,
    warnings: &mut Vec<String>,
) -> Result<ModelChoice, ConfigError> {
    let (url_env, default_url, default_key_env) = match args.provider {
        Provider::Openai | Provider::OpenaiResponses => {
            ("OPENAI_BASE_URL", DEFAULT_OPENAI_BASE_URL, "OPENAI_API_KEY")
        }
        Provider::Anthropic => (
            "ANTHROPIC_BASE_URL",
            DEFAULT_ANTHROPIC_BASE_URL,
            "ANTHROPIC_API_KEY",
        ),
    };
    let api_key_env = args
        .api_key_env
        .clone()
        .unwrap_or_else(|| default_key_env.to_owned());
    // `main` erased every key variable from the process, used or not, so
    // that no command can read one back from the harness's environ.
    let api_key = secrets.get(&api_key_env);
    if args
        .max_cost
        .is_some_and(|max| !(max.is_finite() && max > 0.0))
    {
        return Err(ConfigError::Usage(
            "--max-cost must be a positive number of USD".to_owned(),
        ));
    }
    if args.model == "oracle" {
        return Ok(ModelChoice::Oracle { name: None });
    }
    // SWE-bench's name for the gold patches as predictions.
    if args.model == "gold" {
        return Ok(ModelChoice::Oracle { name: Some("gold") });
    }
    if let Some(file) = predictions {
        return Ok(ModelChoice::Predictions {
            spec: args.model.clone(),
            file,
        });
    }
    if args.model == "noop" {
        return Ok(ModelChoice::Noop);
    }
    if let Some(dir) = args.model.strip_prefix("replay:") {
        let run_dir = PathBuf::from(dir);
        if let Err(message) = RunFolder::open(&run_dir) {
            return Err(ConfigError::Usage(format!(
                "--model {}: {message}",
                args.model
            )));
        }
        return Ok(ModelChoice::Replay {
            spec: args.model.clone(),
            run_dir,
        });
    }
    let base_url = args
        .base_url
        .clone()
        .or_else(|| std::env::var(url_env).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| default_url.to_owned());
    if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
        return Err(ConfigError::Usage(format!(
            "--base-url {base_url:?} must start with http:// or https://"
        )));
    }
    // The providers' own services need a key; a local server (vLLM,
    // llama.cpp, Ollama) usually does not, so a missing key is only an
    // error there.
    if api_key.is_none() && base_url.starts_with(default_url) {
        return Err(ConfigError::Usage(format!(
            "${api_key_env} is not set, and {base_url} needs an API key\nhint: export {api_key_env}=..., or point --base-url at a server that needs none"
        )));
    }
    let request = RequestSettings {
        temperature: args.temperature,
        top_p: args.top_p,
        seed: args.seed,
        max_output_tokens: args.max_output_tokens,
        reasoning_effort: args.reasoning_effort,
        extra: parse_model_args(&args.model_args)?,
        request_timeout: args.request_timeout,
        prompt_cache: !args.no_prompt_cache,
        thinking_budget: args.thinking_budget,
        interleaved_thinking: args.interleaved_thinking,
    };
    check_thinking(args)?;
    unsent_settings(args, warnings);
    let (price, price_source) = price_of(args)?;
    Ok(ModelChoice::Api(Box::new(ApiModel {
        provider: args.provider,
        name: args.model.clone(),
        base_url: base_url.trim_end_matches('/').to_owned(),
        api_key_env,
        api_key,
        request,
        max_retries: args.max_retries,
        retry_delay: args.retry_delay,
        max_connections: args.max_connections.unwrap_or(args.jobs) as usize,
        price,
        price_source,
    })))
}

/// Warns of the sampling settings the chosen API has no field for.
fn unsent_settings(args: &RunArgs, warnings: &mut Vec<String>) {
    if args.provider == Provider::Anthropic && args.seed.is_some() {
        warnings.push("--seed is not sent: the Anthropic Messages API has no seed".to_owned());
    }
    if args.provider == Provider::OpenaiResponses && args.seed.is_some() {
        warnings.push("--seed is not sent: OpenAI's Responses API has no seed".to_owned());
    }
    if args.provider == Provider::Anthropic && args.reasoning_effort.is_some() {
        warnings.push(
            "--reasoning-effort is not sent: the Anthropic Messages API has no reasoning effort"
                .to_owned(),
        );
    }
}

/// The model's price per million tokens and where it comes from
/// (`--price`, the built-in table, or unknown); `--max-cost` needs one.
fn price_of(args: &RunArgs) -> Result<(Option<Price>, String), ConfigError> {
    let (price, price_source) = match args.price.as_deref() {
        Some(raw) => (Some(Price::parse(raw)?), "--price".to_owned()),
        None => match builtin_price(&args.model) {
            Some(price) => (Some(price), format!("built-in table of {PRICES_TAKEN}")),
            None => (None, "unknown".to_owned()),
        },
    };
    if args.max_cost.is_some() && price.is_none() {
        return Err(ConfigError::Usage(format!(
            "--max-cost needs the price of {}, which onebash does not know\nhint: give it with --price INPUT,OUTPUT (USD per million tokens)",
            args.model
        )));
    }
    Ok((price, price_source))
}

/// The Messages API's rules for extended thinking, checked before any
/// task so that a run does not end every task on the same 400: a budget of
/// at least 1024 tokens, below `max_tokens` unless thinking is interleaved
/// (then the budget spans the whole turn), and no `temperature` (nor a
/// `top_p` below 0.95) beside it.
fn check_thinking(args: &RunArgs) -> Result<(), ConfigError> {
    let usage = |message: String| Err(ConfigError::Usage(message));
    let Some(budget) = args.thinking_budget else {
        if args.interleaved_thinking {
            return usage(
                "--interleaved-thinking needs --thinking-budget\nhint: add --thinking-budget 4096, say".to_owned(),
            );
        }
        return Ok(());
    };
    if args.provider != Provider::Anthropic {
        return usage(
            "--thinking-budget is for --provider anthropic\nhint: for other servers pass their own field with --model-arg".to_owned(),
        );
    }
    if budget < MIN_THINKING_BUDGET {
        return usage(format!(
            "--thinking-budget {budget} is below the API's minimum of {MIN_THINKING_BUDGET} tokens"
        ));
    }
    let max_output = args
        .max_output_tokens
        .unwrap_or(ANTHROPIC_MAX_OUTPUT_TOKENS);
    if budget >= max_output && !args.interleaved_thinking {
        return usage(format!(
            "--thinking-budget {budget} must be below the output limit of {max_output} tokens\nhint: raise --max-output-tokens, or add --interleaved-thinking, where the budget spans the whole turn"
        ));
    }
    if args.temperature.is_some() {
        return usage(
            "--temperature cannot be sent with extended thinking (the API refuses it)\nhint: drop --temperature, or --thinking-budget".to_owned(),
        );
    }
    if args.top_p.is_some_and(|p| p < 0.95) {
        return usage(
            "--top-p below 0.95 cannot be sent with extended thinking (the API refuses it)\nhint: drop --top-p, or --thinking-budget".to_owned(),
        );
    }
    Ok(())
}

/// `max_tokens` of an Anthropic request when `--max-output-tokens` is not
/// given (the Messages API requires one).
pub(crate) const ANTHROPIC_MAX_OUTPUT_TOKENS: u64 = 8192;

/// The Messages API's smallest thinking budget.
pub(crate) const MIN_THINKING_BUDGET: u64 = 1024;

/// `--model-arg KEY=JSON`, each into the request body as given.
fn parse_model_args(
    raw: &[String],
) -> Result<serde_json::Map<String, serde_json::Value>, ConfigError> {
    let mut extra = serde_json::Map::new();
    for arg in raw {
        let (key, value) = arg.split_once('=').ok_or_else(|| {
            ConfigError::Usage(format!(
                "--model-arg {arg:?} is not KEY=JSON (for example reasoning_effort=\"high\")"
            ))
        })?;
        if key.is_empty() {
            return Err(ConfigError::Usage(format!(
                "--model-arg {arg:?} has an empty key"
            )));
        }
        let value = serde_json::from_str(value)
            .unwrap_or_else(|_| serde_json::Value::String(value.to_owned()));
        extra.insert(key.to_owned(), value);
    }
    Ok(extra)
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

fn check_out_dir(dir: &Path, resume: bool) -> Result<(), ConfigError> {
    if resume {
        if RunFolder::open(dir).is_ok() {
            return Ok(());
        }
        return Err(ConfigError::Usage(format!(
            "nothing to resume: {} holds no run.json\nhint: --resume continues a run folder given with --out",
            dir.display()
        )));
    }
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(ConfigError::Usage(format!(
                    "the run folder {} exists and is not empty\nhint: choose another --out, or continue it with --resume",
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

/// The API keys of a run, taken out of the process's environment before
/// anything else runs ([`Secrets::take`]): configuration reads them from
/// here, never from the environment.
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    keys: Vec<(String, String)>,
}

impl Secrets {
    /// Takes every variable that holds an API key (the providers' own, and
    /// `extra`, a `--api-key-env` name) out of the environment: the bytes of
    /// `NAME=value` that /proc/<pid>/environ shows (the block the process
    /// started with) are overwritten, then the variable is removed. A
    /// child could otherwise read a key back from its parent's environ.
    ///
    /// # Safety
    ///
    /// The process must have one thread: this writes the environment block
    /// in place, which another thread could be reading. `main` calls it
    /// before the async runtime starts.
    pub unsafe fn take(extra: Option<&str>) -> Secrets {
        let mut keys = Vec::new();
        for name in KEY_VARIABLES.iter().copied().chain(extra) {
            // SAFETY: single-threaded, as this function's contract says.
            if let Some(value) = unsafe { take_secret_env(name) } {
                keys.push((name.to_owned(), value));
            }
        }
        Secrets { keys }
    }

    /// `HF_TOKEN`, the Hub's token, when it was set.
    pub(crate) fn hf_token(&self) -> Option<String> {
        self.get(HF_TOKEN)
    }

    fn get(&self, name: &str) -> Option<String> {
        self.keys
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
    }
}

/// Reads a secret from the environment and erases it from the process.
///
/// # Safety
///
/// As [`Secrets::take`]: one thread only.
unsafe fn take_secret_env(name: &str) -> Option<String> {
    let value = std::env::var(name).ok().filter(|v| !v.is_empty());
    let prefix = format!("{name}=");
    unsafe extern "C" {
        static mut environ: *mut *mut std::ffi::c_char;
    }
    // SAFETY: single-threaded (the caller's contract), so nothing reads or
    // changes the environment meanwhile. `environ` is a null-terminated
    // array of pointers to NUL-terminated strings owned by the process; we
    // only overwrite bytes inside those strings, never past their
    // terminator.
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

/// `--workdirs` must hold working copies and nothing the sandbox treats
/// otherwise: not the run folder, the cache, the task file or $HOME, and not
/// inside the cache (which the sandbox shows read-only).
fn check_workdirs(
    root: &Path,
    out_dir: &Path,
    cache_dir: &Path,
    tasks: &Path,
) -> Result<(), ConfigError> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let held = [Some(out_dir), Some(cache_dir), Some(tasks), home.as_deref()]
        .into_iter()
        .flatten()
        .find(|path| path.starts_with(root));
    let problem = if let Some(path) = held {
        Some(format!("it holds {}", path.display()))
    } else if root.starts_with(cache_dir) {
        Some(format!("it is inside the cache {}", cache_dir.display()))
    } else {
        None
    };
    match problem {
        None => Ok(()),
        Some(problem) => Err(ConfigError::Usage(format!(
            "--workdirs {}: {problem}\nhint: give a folder for working copies only, such as /scratch/onebash or /tmp/onebash",
            root.display()
        ))),
    }
}

/// The name of a run's own folder in `--workdirs`: the run folder's name and
/// a hash of its full path, so that runs sharing `--workdirs` never meet,
/// and a resumed run finds (and clears) what its crashed attempt left.
fn workdirs_name(out_dir: &Path) -> String {
    let name = out_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The parent's real path, so that a resume naming the run folder
    // another way finds the same folder.
    let stable = out_dir
        .parent()
        .and_then(|parent| std::fs::canonicalize(parent).ok())
        .map(|parent| parent.join(&name))
        .unwrap_or_else(|| out_dir.to_owned());
    let hash = Sha256::digest(stable.as_os_str().as_encoded_bytes());
    let hex: String = hash.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("{name}-{hex}")
}

pub(crate) fn default_cache_dir() -> PathBuf {
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
    use crate::cli::{TASK_LINE, run_args};

    /// Tasks that name an image, with no `--env`: the run stops before
    /// anything, naming the first such task and the environments that use
    /// images; `--env host` says it is meant, with one warning; `--image`
    /// alone counts as naming one for every task.
    #[test]
    fn tasks_with_an_image_need_an_env() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tasks = dir.path().join("tasks.jsonl");
        let plain = TASK_LINE.replace(r#""id": "t""#, r#""id": "plain""#);
        let imaged = TASK_LINE.replace(r#""id": "t""#, r#""id": "boxed", "image": "img:1""#);
        std::fs::write(&tasks, format!("{plain}\n{imaged}\n")).expect("write");
        let out = dir.path().join("out");
        let out = out.to_str().expect("a UTF-8 path");
        let base = ["--model", "oracle", "--sandbox", "none", "-o", out];
        let args = run_args(&tasks, &base);
        let err = RunConfig::from_args(&args, &Secrets::default()).expect_err("refused");
        let text = err.to_string();
        assert!(
            text.starts_with("tasks name an image (1 of 2; the first, boxed, runs in img:1), but no --env was chosen"),
            "{text}"
        );
        assert!(
            text.contains("--env podman, --env docker or --env oci"),
            "{text}"
        );
        assert!(!err.hub_unreachable());

        let args = run_args(&tasks, &[&base[..], &["--env", "host"]].concat());
        let config =
            RunConfig::from_args(&args, &Secrets::default()).expect("--env host runs them");
        let warned: Vec<&String> = config
            .warnings
            .iter()
            .filter(|w| w.contains("img:1"))
            .collect();
        assert_eq!(warned.len(), 1, "{:?}", config.warnings);

        std::fs::write(&tasks, format!("{plain}\n")).expect("write");
        let args = run_args(&tasks, &base);
        assert!(
            RunConfig::from_args(&args, &Secrets::default()).is_ok(),
            "no image: no guard"
        );
        let args = run_args(&tasks, &[&base[..], &["--image", "x:{{ id }}"]].concat());
        let text = RunConfig::from_args(&args, &Secrets::default())
            .expect_err("--image without --env")
            .to_string();
        assert!(
            text.starts_with("--image names an image for every task"),
            "{text}"
        );
    }

    /// `onebash run <(jq ...)`: a pipe gives its bytes once. The file was
    /// read a second time for its hash, which found the pipe empty, and
    /// run.json held the hash of no bytes at all.
    #[test]
    fn a_task_file_from_a_pipe_is_hashed_as_it_was_read() {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let (reader, mut writer) = std::io::pipe().expect("pipe");
        writer.write_all(TASK_LINE.as_bytes()).expect("write");
        drop(writer);
        let pipe = PathBuf::from(format!("/proc/self/fd/{}", reader.as_raw_fd()));
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("out");
        let out = out.to_str().expect("a UTF-8 path");
        let args = run_args(
            &pipe,
            &["--model", "oracle", "--sandbox", "none", "-o", out],
        );
        let config = RunConfig::from_args(&args, &Secrets::default()).expect("a valid config");
        assert_eq!(config.task_count, 1);
        assert_eq!(
            config.task_file_sha256,
            format!("{:x}", Sha256::digest(TASK_LINE))
        );
    }

    /// `--reasoning-effort` is in the fingerprint only when given, so run
    /// folders from before it keep resuming; a protocol that cannot send
    /// it, or a seed, says so.
    #[test]
    fn reasoning_effort_is_fingerprinted_when_given_and_warned_where_not_sent() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tasks = dir.path().join("tasks.jsonl");
        std::fs::write(&tasks, TASK_LINE).expect("write tasks");
        let (out, cache) = (dir.path().join("out"), dir.path().join("cache"));
        let config = |extra: &[&str]| {
            let mut args = vec![
                "--model",
                "m",
                "--base-url",
                "http://127.0.0.1:1/v1",
                "--sandbox",
                "none",
                "-o",
                out.to_str().expect("a UTF-8 path"),
                "--cache-dir",
                cache.to_str().expect("a UTF-8 path"),
            ];
            args.extend_from_slice(extra);
            let args = run_args(&tasks, &args);
            RunConfig::from_args(&args, &Secrets::default()).expect("a valid config")
        };
        let fingerprint =
            |config: &RunConfig<Unprobed>| config.clone().probe().expect("probed").fingerprint();
        let plain = config(&[]);
        assert!(
            fingerprint(&plain)["request"]
                .get("reasoning_effort")
                .is_none()
        );
        assert_eq!(plain.warnings, Vec::<String>::new());
        let high = config(&["--reasoning-effort", "high"]);
        assert_eq!(fingerprint(&high)["request"]["reasoning_effort"], "high");
        let responses = config(&["--provider", "openai-responses", "--seed", "1"]);
        assert_eq!(fingerprint(&responses)["provider"], "openai-responses");
        assert_eq!(
            responses.warnings,
            ["--seed is not sent: OpenAI's Responses API has no seed"]
        );
        let anthropic = config(&["--provider", "anthropic", "--reasoning-effort", "low"]);
        assert!(
            anthropic
                .warnings
                .iter()
                .any(|w| w.starts_with("--reasoning-effort is not sent")),
            "{:?}",
            anthropic.warnings
        );
    }

    /// Checking the arguments looks at nothing but the files they name. It
    /// used to run bwrap and make cgroup folders on the way, so a config
    /// with `--sandbox bwrap` could not be built where bwrap does not
    /// work, and every test that built one touched the machine. Whether
    /// bwrap works is the probe's to find, with the paths kept here.
    #[test]
    fn from_args_probes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tasks = dir.path().join("tasks.jsonl");
        std::fs::write(&tasks, TASK_LINE).expect("write tasks");
        let cache = dir.path().join("cache");
        for mode in ["auto", "bwrap", "none"] {
            let out = dir.path().join(format!("out-{mode}"));
            let args = run_args(
                &tasks,
                &[
                    "--model",
                    "oracle",
                    "--sandbox",
                    mode,
                    "-o",
                    out.to_str().expect("a UTF-8 path"),
                    "--cache-dir",
                    cache.to_str().expect("a UTF-8 path"),
                ],
            );
            let config = RunConfig::from_args(&args, &Secrets::default()).expect(mode);
            assert_eq!(config.sandbox_mode, args.sandbox, "{mode}");
            assert_eq!(config.warnings, Vec::<String>::new(), "{mode}");
            // What the sandbox is to hide: the task file, the run folder,
            // the cache and the task's repo.
            for path in [&tasks, &out, &cache, &PathBuf::from("/r")] {
                assert!(config.hidden.contains(path), "{mode}: {path:?}");
            }
            assert!(!out.exists(), "{mode}: the run folder was made");
        }
    }

    /// The API's rules for extended thinking are checked before any task:
    /// each broken combination is a usage error with its own words.
    #[test]
    fn thinking_flags_follow_the_api_rules() {
        let tasks = PathBuf::from("/nonexistent/tasks.jsonl");
        let check = |extra: &[&str]| {
            let mut args = vec!["--provider", "anthropic", "--model", "claude-x"];
            args.extend_from_slice(extra);
            check_thinking(&run_args(&tasks, &args)).map_err(|err| err.to_string())
        };
        assert!(check(&[]).is_ok());
        assert!(check(&["--thinking-budget", "4096"]).is_ok());
        assert!(check(&["--thinking-budget", "1024", "--top-p", "0.95"]).is_ok());
        assert!(
            check(&[
                "--thinking-budget",
                "20000",
                "--max-output-tokens",
                "8000",
                "--interleaved-thinking"
            ])
            .is_ok()
        );
        for (extra, words) in [
            (
                &["--thinking-budget", "1023"][..],
                "below the API's minimum",
            ),
            (
                &["--thinking-budget", "8192"][..],
                "must be below the output limit of 8192",
            ),
            (
                &["--thinking-budget", "2000", "--temperature", "0"][..],
                "--temperature cannot be sent",
            ),
            (
                &["--thinking-budget", "2000", "--top-p", "0.5"][..],
                "--top-p below 0.95",
            ),
            (&["--interleaved-thinking"][..], "needs --thinking-budget"),
        ] {
            let err = check(extra).expect_err(&format!("{extra:?}"));
            assert!(err.contains(words), "{extra:?}: {err}");
        }
        let openai = check_thinking(&run_args(
            &tasks,
            &["--model", "gpt-x", "--thinking-budget", "2048"],
        ))
        .expect_err("openai");
        assert!(
            openai.to_string().contains("--provider anthropic"),
            "{openai}"
        );
    }

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
