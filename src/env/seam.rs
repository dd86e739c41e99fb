//! Where a task runs: the seam between the runner and the places a task's
//! commands can run: the host, with or without bubblewrap ([`host`]), or a
//! container per (task, epoch) from the task's image ([`container`]); each
//! in a file of its own plus one line in [`choose`].
//!
//! An [`Environment`] is chosen once per run. For each (task, epoch) it
//! makes a [`Workspace`] around the task's working copy (onebash's
//! checkout, or in a container the repo the image holds), through which
//! everything that touches the task's files or runs in them goes: the
//! agent's and the tests' commands, the task's setup, the diff, the test
//! patch, and the teardown. The runner, the agent loop and the grader know
//! only these operations; `sys/exec.rs` only spawns what an environment hands
//! it.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use super::error::{BuildLogError, EnvError};
use crate::checkout::{Checkout, CheckoutError, GitError, History};
use crate::sys::exec::{CommandEnv, CommandOutcome, ExecError};
use crate::sys::limits::ChildSetup;
use crate::task::TaskSpec;

/// A future an environment returns (boxed: environments are chosen at run
/// time, behind `dyn`).
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A workspace around the repo an image holds, and what its check found.
pub(crate) type Entered = (Box<dyn Workspace>, Checkout);

/// Whose command it is, which decides how confined it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trust {
    /// The model's commands and the tests: in the sandbox, writing only the
    /// working copy, with the network only when `network`.
    Agent { network: bool },
    /// The task author's `setup_command` and the harness's own patching:
    /// outside the sandbox, with the network.
    Harness,
}

/// One command for a workspace: `bash -c script` in the working copy.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Command<'a> {
    pub script: &'a str,
    pub timeout: Duration,
    /// The cleared environment it starts with (no API key).
    pub env: &'a CommandEnv,
    pub trust: Trust,
}

/// A place tasks run, chosen once per run.
pub(crate) trait Environment: Send + Sync {
    /// The workspace of one (task, epoch) around its working copy.
    /// `child` is what each of its commands sets on itself before it
    /// starts (the task's cgroup, its rlimits).
    fn enter<'a>(
        &'a self,
        task: &'a TaskSpec,
        epoch: u32,
        checkout: &'a Checkout,
        child: ChildSetup,
    ) -> BoxFuture<'a, Result<Box<dyn Workspace>, EnvError>>;

    /// Whether a task whose code is in its image (`task::Code`) uses the
    /// repo or the image ([`Environment::enter_image_repo`]) rather than
    /// onebash's own checkout: in a container, yes.
    fn has_image_repos(&self) -> bool {
        false
    }

    /// The workspace of a task whose repo is the one its image holds at
    /// the task's workdir, made there, as the harness, to hold exactly
    /// what the base reaches, and checked, before any command of the
    /// agent; what the check found, as a [`Checkout`] whose `dir` is
    /// `scratch` (a host folder of the task's own, for the engine's client
    /// and the files that pass in and out).
    fn enter_image_repo<'a>(
        &'a self,
        task: &'a TaskSpec,
        epoch: u32,
        history: History,
        scratch: &'a Path,
        child: ChildSetup,
    ) -> BoxFuture<'a, Result<Entered, CheckoutError>> {
        let _ = (epoch, history, scratch, child);
        Box::pin(async move {
            Err(CheckoutError::WorkingCopy {
                repo: task.repo.clone(),
                rev: task.base_commit.clone(),
                message: "only a container environment holds a repo in an image".to_owned(),
            })
        })
    }

    /// Builds the image of a task that brings its build context (its
    /// benchmark's `task::FolderImage`) unless the engine has it already; the
    /// build's output goes to the file `log` (the task folder's
    /// build.log), never to the terminal. Tasks without one need nothing.
    fn build_image<'a>(
        &'a self,
        task: &'a TaskSpec,
        log: &'a Path,
        child: ChildSetup,
    ) -> BoxFuture<'a, Result<ImageBuild, EnvError>> {
        let _ = (log, child);
        Box::pin(async move {
            match task.benchmark.image_build() {
                None => Ok(ImageBuild::Ready),
                Some(_) => Err(EnvError::NoBuilder),
            }
        })
    }

    /// Removes what killed onebash runs left behind (a container engine's
    /// containers): an earlier attempt of this run's, and those of other
    /// runs on this machine whose onebash is gone (their run folder's lock
    /// free); never a running one's, nor anything without onebash's
    /// labels. Called once at the start of a run, before any task.
    fn sweep(&self) -> BoxFuture<'_, Result<Swept, EnvError>> {
        Box::pin(async { Ok(Swept::default()) })
    }
}

/// What [`Environment::build_image`] did for a task.
#[derive(Debug)]
pub(crate) enum ImageBuild {
    /// Nothing to build: the task brings no build context, or the engine
    /// has its image already.
    Ready,
    /// Built now; its output is in the log file, or this says why not.
    Built { log: Result<(), BuildLogError> },
}

/// What a sweep removed: containers of an earlier attempt of this run, and
/// of other runs whose onebash was killed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Swept {
    pub this_run: usize,
    pub other_runs: usize,
}

/// One (task, epoch)'s working copy, where its commands run.
pub(crate) trait Workspace: Send + Sync {
    /// Runs one command to its end or its timeout (the whole process tree
    /// killed then), stdin closed, output captured head and tail.
    fn run<'a>(&'a self, command: Command<'a>) -> BoxFuture<'a, Result<CommandOutcome, ExecError>>;

    /// The change against the base commit (for the repo an image holds,
    /// against the image's setup commit on top of it, when it has one:
    /// `image_repo.rs`), as a patch `git apply` takes.
    fn diff(&self) -> BoxFuture<'_, Result<String, GitError>>;

    /// Puts the files `patch` touches back as they are at the base commit;
    /// returns their paths.
    fn restore(&self, patch: &str) -> BoxFuture<'_, Result<Vec<String>, GitError>>;

    /// Applies `patch` strictly (no fuzz, no 3-way).
    fn apply(&self, patch: &str) -> BoxFuture<'_, Result<(), GitError>>;

    /// The agent phase is over: the tests come next. A container
    /// environment removes the agent's container (and all it left running)
    /// and starts the tests' from the image, with the working copy as the
    /// agent left it and the setup run again; the host has nothing to do.
    fn end_agent_phase(&self) -> BoxFuture<'_, Result<(), EnvError>> {
        Box::pin(async { Ok(()) })
    }

    /// A file of the working copy (a JUnit report, say), by relative path.
    fn read(&self, relative: &Path) -> BoxFuture<'_, std::io::Result<Vec<u8>>>;

    /// Writes a file of the working copy, by relative path (a patch for
    /// the harness's own commands to read where they run).
    fn write(&self, relative: &Path, bytes: Vec<u8>) -> BoxFuture<'_, std::io::Result<()>>;

    /// Where the working copy is, for messages.
    fn location(&self) -> String;

    /// The hosts its commands asked for through an allowlist's proxy so
    /// far, and how many requests were refused; none without one.
    fn hosts_asked(&self) -> Vec<crate::task::HostAsked> {
        Vec::new()
    }

    /// Ends the workspace; the working copy is deleted unless `keep`.
    fn leave(self: Box<Self>, keep: bool) -> BoxFuture<'static, std::io::Result<()>>;
}

/// Where a series of commands goes: a workspace, and the environment and
/// trust each of them gets (the agent's: its sandbox and network setting).
#[derive(Clone, Copy)]
pub(crate) struct Shell<'a> {
    pub workspace: &'a dyn Workspace,
    pub env: &'a CommandEnv,
    pub trust: Trust,
}

impl<'a> Shell<'a> {
    /// Runs `script` with `timeout` in the workspace.
    pub(crate) fn run<'b>(
        &self,
        script: &'b str,
        timeout: Duration,
    ) -> BoxFuture<'b, Result<CommandOutcome, ExecError>>
    where
        'a: 'b,
    {
        self.workspace.run(Command {
            script,
            timeout,
            env: self.env,
            trust: self.trust,
        })
    }
}
