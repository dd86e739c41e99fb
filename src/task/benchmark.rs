//! The benchmark seam: what kind of task a task is, and every answer that
//! differs between kinds. A stage never asks which benchmark a task comes
//! from; it asks the task's [`Benchmark`] a question and gets an answer
//! named by mechanism (a checkout or the repo an image holds, a test
//! command or a verifier folder, an exit code or a reward...).
//!
//! [`Benchmark`] is one task's answers: a handle each `TaskSpec` holds.
//! Its companion, source.rs's `Source`, is a way tasks come in (a line
//! format, a folder format, the Hub datasets it is known by) and picks
//! the handle of each task it reads. Each benchmark is one file of
//! `task/` implementing both; registry.rs lists the sources, the one
//! place a benchmark is registered. This file owns the trait and the
//! answer types, none of the benchmarks, and depends on none of them.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::grade::Rules;
use crate::grade::swebench::spec::SwebenchEval;

/// Where a task's code comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Code {
    /// onebash's own checkout of the task's repo at its base commit.
    Checkout,
    /// The repo the task's image holds at its workdir, made leak-proof
    /// in its container (under `--env host` onebash's checkout instead).
    ImageRepo,
    /// No repo: the task's environment is its image, entered in the
    /// image's own working directory. `no_repo` says why a patch cannot
    /// be put in.
    Image { no_repo: &'static str },
}

/// An image built from a folder of the task before it runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FolderImage<'a> {
    /// The build context (its `Dockerfile` is the one built).
    pub context: &'a Path,
    pub timeout: Duration,
    /// The label key the build is tagged with, valued by the task id.
    pub label: &'static str,
}

/// The container's limits a task asks for beyond the run's.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Limits {
    pub cpus: Option<f64>,
    pub memory_mb: Option<u64>,
}

/// What a task's own container gets beyond its image and limits: set
/// when it starts, applied to the commands run in it (Harbor's
/// `[environment] env` and `workdir`, `[agent] user`, `[verifier] user`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ContainerSetup {
    /// Variables of the container itself (`run -e`), which every command
    /// in it sees.
    pub env: Vec<(String, String)>,
    /// Where every command runs, in place of the image's WORKDIR.
    pub workdir: Option<String>,
    /// Who the agent's commands run as (a name or a uid); `None`: the
    /// image's user.
    pub agent_user: Option<String>,
    /// Who the tests run as, after the agent.
    pub verifier_user: Option<String>,
    /// Folders made, as root, and writable by all when the container
    /// starts, for a user other than the image's to write in.
    pub writable: Vec<String>,
}

/// A folder of the task's copied into the container after the agent, for
/// the test command (a verifier).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct VerifierFolder {
    /// The folder on the host.
    pub folder: PathBuf,
    /// Where it goes in the container.
    pub target: &'static str,
    /// Run as the harness first: empties what the agent may have left
    /// where the verifier reads and writes.
    pub stage: &'static str,
    /// Commands run in the agent's container after the agent, before the
    /// verifier, in order; a failure is no error (Harbor's collect hooks
    /// are best-effort).
    pub collect: Vec<CollectHook>,
    /// A verifier of its own container (Harbor's `environment_mode =
    /// "separate"`); `None`: it runs in the agent's.
    pub separate: Option<SeparateVerifier>,
}

/// A command run in the agent's container after the agent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CollectHook {
    pub command: String,
    pub timeout: Duration,
    /// Who it runs as (`exec -u`); `None`: the image's user.
    pub user: Option<String>,
}

/// A verifier that runs in a fresh container, which receives from the
/// agent's only the artifacts (after the collect hooks ran there).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SeparateVerifier {
    /// The verifier's image; `None`: the task's.
    pub image: Option<String>,
    /// Whether it has an environment of its own (Harbor's
    /// `[verifier.environment]`): then its container gets none of the
    /// task's container settings (variables, workdir, limits), only the
    /// run's; else it is a fresh copy of the task's container.
    pub own_environment: bool,
    /// What passes from the agent's container to the verifier's.
    pub artifacts: Vec<Artifact>,
}

/// A path of the agent's container that the verifier's container
/// receives at the same path, a folder without what `exclude` matches
/// (tar's `--exclude` patterns).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Artifact {
    /// Absolute (a relative path is taken from `/`, as the engines' `cp`
    /// takes it).
    pub source: String,
    pub exclude: Vec<String>,
}

/// How a task's tests run.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Tests<'a> {
    /// The task's test command, after onebash puts its test patch in.
    Command,
    /// An eval script that resets the test patch's files and applies the
    /// test patch itself: onebash does not apply it first.
    EvalScript,
    /// The task's test command in the agent's own container, with a
    /// verifier folder copied in first.
    Verifier(&'a VerifierFolder),
}

/// How the verdict is reached from the tests.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Verdict<'a> {
    /// The exit code, or the task's per-test lists when it has them.
    Tests,
    /// A recipe's log parser and the package rules of `--grading`
    /// (grade/swebench/): the whole test log decides.
    Recipe(&'a SwebenchEval),
    /// A reward file the tests wrote: 1 passes.
    Reward(&'a RewardFile),
}

/// A reward the tests write to a file, and how it is read.
#[derive(Debug, Clone)]
pub(crate) struct RewardFile {
    /// Prints which file holds the reward, then the file.
    pub script: String,
    /// Reads the script's output; the error names the file it read.
    pub read: fn(&str) -> Result<f64, RewardError>,
    /// Why a test log alone cannot decide the task.
    pub not_by_log: &'static str,
}

/// Why a reward cannot be read: the benchmark's own error.
pub(crate) type RewardError = Box<dyn std::error::Error + Send + Sync>;

/// What the oracle (`--model oracle`) runs.
#[derive(Debug, Clone)]
pub(crate) enum Oracle<'a> {
    /// Applies this patch.
    Patch(&'a str),
    /// Runs this command; `done` is the oracle's last message, saying
    /// what it ran.
    Command { command: String, done: &'static str },
    /// The task lacks what the oracle needs: this names it.
    Missing(&'static str),
}

/// The built-in prompt a task is rendered into when `--prompt` names
/// none (prompt.rs holds their texts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BuiltinPrompt {
    /// `prompts/default.toml`: an issue in a repository at a commit.
    Repository,
    /// `prompts/terminal.toml`: a job in a Linux container.
    Terminal,
}

/// The network a task asks for, whatever the run gives, and the setting
/// of the task that says so (a message names it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NetworkWish {
    pub public: bool,
    pub key: String,
    /// `allowlist`: the hosts each phase may reach, through the proxy
    /// (`public` is false).
    pub allowlist: Option<super::PhaseHosts>,
}

/// What `pull` does for a task.
#[derive(Debug, Clone)]
pub(crate) enum Pull {
    /// Pulls the task's image.
    Image,
    /// Nothing can be pulled: why (a full message naming the task).
    Refused(String),
}

/// One task's answers to the stages. Defaults are those of onebash's own
/// task line.
pub(crate) trait Benchmark: fmt::Debug + Send + Sync {
    /// The fields it adds to the task's JSON (trajectories, templates),
    /// beside the common ones.
    fn task_fields(&self, fields: &mut Map<String, Value>) {
        let _ = fields;
    }

    /// Where the code comes from.
    fn code(&self) -> Code;

    /// The image to build before the task runs, if any.
    fn image_build(&self) -> Option<FolderImage<'_>> {
        None
    }

    /// An image its tests run in other than the task's (a separate
    /// verifier's), which the probe makes ready as it does the task's.
    fn tests_image(&self) -> Option<&str> {
        None
    }

    /// The container limits it asks for.
    fn limits(&self) -> Limits {
        Limits::default()
    }

    /// What its container gets beyond its image: none by default.
    fn container_setup(&self) -> Option<&ContainerSetup> {
        None
    }

    /// Its own agent timeout, over `--task-timeout`.
    fn agent_timeout(&self) -> Option<Duration> {
        None
    }

    /// How its tests run.
    fn tests(&self) -> Tests<'_> {
        Tests::Command
    }

    /// How the verdict is reached.
    fn verdict(&self) -> Verdict<'_> {
        Verdict::Tests
    }

    /// The rules it is graded by when `--grading` gives none.
    fn default_rules(&self) -> Rules {
        Rules::by_format(false)
    }

    /// The built-in prompt it is rendered into when `--prompt` names none.
    fn default_prompt(&self) -> BuiltinPrompt {
        BuiltinPrompt::Repository
    }

    /// The network it asks for, when it says (onebash's own tasks take
    /// the run's, `--allow-network`).
    fn network(&self) -> Option<NetworkWish> {
        None
    }

    /// What the oracle runs for a task with this gold patch.
    fn oracle<'a>(&'a self, gold_patch: Option<&'a str>) -> Oracle<'a> {
        match gold_patch {
            Some(patch) => Oracle::Patch(patch),
            None => Oracle::Missing("gold_patch"),
        }
    }

    /// What `pull` does for the task `id`.
    fn pull(&self, id: &str) -> Pull {
        let _ = id;
        Pull::Image
    }

    /// Why the task cannot run at all (its grading cannot be built): the
    /// task's setup error, before anything runs.
    fn cannot_run(&self) -> Option<String> {
        None
    }

    /// Why a run that graded it by its recipe cannot be regraded now.
    fn cannot_regrade(&self) -> Option<String> {
        None
    }

    /// The usage error of running the task `id` under `--env env`, which
    /// has no container engine, when it needs one.
    fn needs_engine(&self, id: &str, env: &str) -> Option<String> {
        let _ = (id, env);
        None
    }
}
