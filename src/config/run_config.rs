//! Validated settings for a run ([`RunConfig`]), built from its options.
//!
//! Owns every check that can be made before anything runs and turns them
//! into a [`RunConfig`]: [`RunConfig::from_options`] calls them in order,
//! each in the file of its job: the tasks selected (selection.rs), where
//! they run (containers.rs), the model (model_choice.rs), the prompt
//! rendered for every selected task (here), the run folder and working
//! copies (folders.rs), what the sandbox hides (hidden.rs). A failure
//! here is bad usage or bad input: exit code 2, nothing ran.
//!
//! Building a config reads the files its options name and nothing else
//! of the machine: whether bwrap works and where cgroups can be made are
//! found by [`RunConfig::probe`] (see `config/probe.rs`), a step of its own that
//! `main` takes once the arguments are good. Values the command line can
//! check itself (`--shard`, durations, ranges) are clap's, in `cli.rs`.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::agent::request::seconds;
use crate::checkout::History;
use crate::config::containers::{check_container_args, limits_of};
use crate::config::error::ConfigError;
use crate::config::folders::{RunFolders, default_cache_dir};
use crate::config::hidden::hidden_paths;
use crate::config::model_choice::{ModelChoice, model_choice, prediction_file};
use crate::config::options::RunOptions;
use crate::config::probe::Probed;
use crate::config::secrets::Secrets;
use crate::config::selection::{
    check_gold_patches, duplicate_warning, prediction_warnings, select_tasks,
};
use crate::config::shard::Shard;
use crate::config::source::{DatasetContext, DatasetRecord};
use crate::env::{ContainerCommands, EnvKind, PullPolicy};
use crate::grade::Rules;
use crate::sys::limits::Limits;
use crate::sys::sandbox::SandboxMode;
use crate::task::RegistryRecord;
use crate::task::predictions::PredictionsRecord;
use crate::task::prompt::PromptVariant;
use crate::task::{AllowedHosts, TaskSpec};

/// Everything a run needs, checked. `P` is what is known of the machine:
/// [`Unprobed`] as [`RunConfig::from_options`] builds it, [`Probed`] once
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
    /// The registry's dataset the tasks are, as read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registry: Option<RegistryRecord>,
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
    /// `--allow-hosts`: the hosts a task that names none may reach.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_hosts: Option<AllowedHosts>,
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

impl RunConfig<Unprobed> {
    /// The run's configuration from its options and the keys `main` took
    /// out of the environment. It reads the files the options name (the
    /// task file, the prompt, the run folder) and looks at nothing else:
    /// no program runs and nothing is written.
    pub(crate) fn from_options(
        args: &RunOptions,
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
            registry: args.registry.clone(),
            // Likewise a registry's dataset: the tasks and commits read
            // before, with no registry and no network.
            pinned_registry: match (&out_dir_given, args.resume) {
                (Some(out), true) => crate::config::source::pinned_registry(out),
                _ => None,
            },
        };
        let prediction_file = prediction_file(args)?;
        let (selected, predictions) = select_tasks(args, &context, prediction_file.as_deref())?;
        let tasks = selected.tasks;
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
        let folders = RunFolders::of(args, model.name(), &prompt.name, &cache_dir)?;
        let mut hidden = hidden_paths(
            &args.tasks,
            &tasks,
            &folders.out_dir,
            &cache_dir,
            folders.workdirs_root,
        );
        hidden.extend(selected.hidden);
        // Other tasks' patches are not this task's to read.
        hidden.extend(
            predictions
                .as_ref()
                .map(|record| std::path::absolute(&record.path).unwrap_or(record.path.clone())),
        );
        let limits = limits_of(args)?;
        let checked = Checked {
            tasks,
            task_file_sha256: selected.sha256,
            dataset: selected.dataset,
            registry: selected.registry,
            predictions,
            model,
            prompt,
            out_dir: folders.out_dir,
            workdirs: folders.workdirs,
            cache_dir,
            hidden,
            limits,
            warnings,
        };
        Ok(RunConfig::of(args, checked))
    }

    /// The config of `args` with what the checks made of them.
    fn of(args: &RunOptions, checked: Checked) -> RunConfig<Unprobed> {
        RunConfig {
            task_file: args.tasks.clone(),
            task_count: checked.tasks.len(),
            tasks: checked.tasks,
            model: checked.model,
            prompt_name: checked.prompt.name.clone(),
            prompt_sha256: checked.prompt.sha256.clone(),
            prompt: checked.prompt,
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
            out_dir: checked.out_dir,
            cache_dir: checked.cache_dir,
            history: args.history,
            workdirs: checked.workdirs,
            keep_workdirs: args.keep_workdirs,
            resume: args.resume,
            retry_errors: args.retry_errors,
            junit_path: args.junit_path.clone(),
            grading: args.grading,
            task_file_sha256: checked.task_file_sha256,
            dataset: checked.dataset,
            registry: checked.registry,
            predictions: checked.predictions,
            test_command: args.test_command.clone(),
            sandbox_mode: args.sandbox,
            hidden: checked.hidden,
            allow_network: args.allow_network,
            allowed_hosts: args.allow_hosts.clone(),
            env_kind: args.env_kind(),
            image: args.image.clone(),
            workdir: args.workdir.clone(),
            cpus: args.cpus,
            pull: args.pull,
            container_commands: args.container_commands,
            limits: checked.limits,
            probed: Unprobed,
            warnings: checked.warnings,
        }
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
    pub(crate) fn look(&self) -> crate::config::probe::Looked {
        let images = self.images();
        Probed::look(
            self.sandbox_mode,
            &self.hidden,
            (self.env_kind, &images, self.pull),
            &self.cache_dir,
        )
    }

    /// The images the probe makes ready, in task order. An image built
    /// from a folder of the task is built when the task starts.
    fn images(&self) -> Vec<String> {
        let running = self
            .tasks
            .iter()
            // An empty prediction runs nothing, in no container.
            .filter(|t| self.model.prediction(&t.id).is_none_or(|p| !p.is_empty()));
        running
            .clone()
            .filter(|t| t.benchmark.image_build().is_none())
            .filter_map(|t| t.image.clone())
            .chain(running.filter_map(|t| t.benchmark.tests_image().map(str::to_owned)))
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
            registry: self.registry,
            predictions: self.predictions,
            test_command: self.test_command,
            sandbox_mode: self.sandbox_mode,
            hidden: self.hidden,
            allow_network: self.allow_network,
            allowed_hosts: self.allowed_hosts,
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

/// What [`RunConfig::from_options`]'s checks made of the options.
struct Checked {
    tasks: Vec<TaskSpec>,
    task_file_sha256: String,
    dataset: Option<DatasetRecord>,
    registry: Option<RegistryRecord>,
    predictions: Option<PredictionsRecord>,
    model: ModelChoice,
    prompt: PromptVariant,
    out_dir: PathBuf,
    workdirs: PathBuf,
    cache_dir: PathBuf,
    hidden: Vec<PathBuf>,
    limits: Limits,
    warnings: Vec<String>,
}

/// The prompt variant, rendered once for every selected task: an
/// undefined variable must stop the run before anything starts.
fn checked_prompt(args: &RunOptions, tasks: &[TaskSpec]) -> Result<PromptVariant, ConfigError> {
    let prompt = match &args.prompt {
        Some(path) => PromptVariant::load(path)?,
        // Without one, the built-in prompt the tasks' benchmark asks for.
        None => PromptVariant::builtin_for(tasks)?,
    };
    for task in tasks {
        prompt.render(task, args.max_turns)?;
    }
    Ok(prompt)
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    use super::*;
    use crate::config::options::TASK_LINE;

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
        // --model oracle --sandbox none -o OUT
        let args = RunOptions {
            sandbox: SandboxMode::None,
            out: Some(dir.path().join("out")),
            ..RunOptions::defaults(&pipe, "oracle")
        };
        let config = RunConfig::from_options(&args, &Secrets::default()).expect("a valid config");
        assert_eq!(config.task_count, 1);
        assert_eq!(
            config.task_file_sha256,
            format!("{:x}", Sha256::digest(TASK_LINE))
        );
    }

    /// Checking the arguments looks at nothing but the files they name. It
    /// used to run bwrap and make cgroup folders on the way, so a config
    /// with `--sandbox bwrap` could not be built where bwrap does not
    /// work, and every test that built one touched the machine. Whether
    /// bwrap works is the probe's to find, with the paths kept here.
    #[test]
    fn from_options_probes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tasks = dir.path().join("tasks.jsonl");
        std::fs::write(&tasks, TASK_LINE).expect("write tasks");
        let cache = dir.path().join("cache");
        for (mode, sandbox) in [
            ("auto", SandboxMode::Auto),
            ("bwrap", SandboxMode::Bwrap),
            ("none", SandboxMode::None),
        ] {
            let out = dir.path().join(format!("out-{mode}"));
            // --model oracle --sandbox MODE -o OUT --cache-dir CACHE
            let args = RunOptions {
                sandbox,
                out: Some(out.clone()),
                cache_dir: Some(cache.clone()),
                ..RunOptions::defaults(&tasks, "oracle")
            };
            let config = RunConfig::from_options(&args, &Secrets::default()).expect(mode);
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
}
