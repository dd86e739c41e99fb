//! Tasks in containers: one per (task, epoch), from the task's image,
//! through the podman or docker command line (their words are the same for
//! everything used here; both are tested, against podman and a real
//! Docker daemon).
//!
//! Why the CLI and not the Engine API: a `podman exec` costs about 0.2 s
//! here, nearly all of it the engine's own work (conmon, runc), which the
//! API would not save; the CLI needs no HTTP client, and finds the engine
//! the way the user's own commands do (`DOCKER_HOST`, contexts, rootless
//! sockets). That cost is paid once per container: each command goes
//! through the container's channel ([`super::channel`], one `exec -i`),
//! or with `--container-commands exec` is one exec, whose output
//! `sys/exec.rs` reads, caps and times out.
//!
//! Owns the engine's probe at start (found, answering, every image there
//! or pulled), the container's command line (no network unless
//! `--allow-network`, memory, processes and CPUs capped, labels naming the
//! run, task and epoch), each command through `exec` (the cleared
//! environment, no API key), the kill of a timed-out command's processes
//! inside the container, the fresh container the tests run in, and the
//! sweep of containers a killed run left. The working copy is onebash's
//! own leak-proof checkout on the host, bind-mounted at the task's
//! workdir: the diff, restoring files and applying patches are the host's
//! git operations on it (`host::Files`); or, for a task whose repo is the
//! one its image holds, that repo, cleaned and checked inside before the
//! agent by [`image_repo`]'s scripts, which also give the diff, restore
//! and apply, run here as the harness, with files passing by `cp`; or, for
//! a Harbor task, no repo at all: its image (built by [`super::build`]) is
//! its environment, and its verifier runs in the agent's own container
//! (after the task's collect hooks), or, when the task says so, in a
//! fresh container of its own that receives only the task's artifacts
//! (artifacts.rs writes the scripts that pass them).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::artifacts;
use super::channel::{self, Channel, Reply, Request};
use super::egress::WayOut;
use super::image_repo::{self, GIT_TIMEOUT, ImageRepo, Prepared, Refused, SetupLog};
use super::{
    BoxFuture, Command, Entered, EnvError, Environment, ImageBuild, Swept, Trust, Workspace, host,
};
use crate::checkout::{Checkout, CheckoutError, GitError, History, Verified};
use crate::env::{ContainerCommands, EnvKind, PullPolicy};
use crate::sys::exec::{
    CommandEnv, CommandOutcome, ExecError, Spawn, ToolError, run_client, run_command,
};
use crate::sys::limits::ChildSetup;
use crate::task::{
    Code, CollectHook, HostAsked, PhaseHosts, SeparateVerifier, TaskSpec, Tests, VerifierFolder,
};

/// The variable that marks every process of one command inside the
/// container, so that a timeout kills all of them, also those that left
/// its process group or session.
pub(crate) const COMMAND_MARK_VAR: &str = "ONEBASH_COMMAND";

/// The label every container of a run carries: its value is the run id.
pub(crate) const RUN_LABEL: &str = "onebash.run";
/// The machine a container's onebash ran on, and its run folder's lock:
/// what a sweep needs to know whether that onebash still runs.
const HOST_LABEL: &str = "onebash.host";
const LOCK_LABEL: &str = "onebash.lock";

/// A container engine that answered at start, with every image there.
#[derive(Debug, Clone)]
pub(crate) struct Engine {
    pub kind: EnvKind,
    pub program: PathBuf,
    /// The folder the engine's client starts in, and so what it starts
    /// (podman's conmon): the run folder, once there is one. Debian's
    /// conmon (before 2.1.13) writes an empty `oom` file in its current
    /// folder when a container runs out of memory, which must land
    /// neither in the folder the user started onebash in nor in a working
    /// copy. `None` (before the run folder, and in `doctor`): onebash's own.
    pub dir: Option<PathBuf>,
}

impl Engine {
    /// Finds the engine's program on PATH, checks that it answers, and
    /// that every image is there, pulling as `pull` says (the pull's
    /// progress on stderr). Synchronous: it runs before the async runtime.
    /// Errors are whole messages with a hint: the run must not start.
    pub(crate) fn probe(
        kind: EnvKind,
        images: &[String],
        pull: PullPolicy,
    ) -> Result<Engine, EnvError> {
        let (engine, to_pull) = Engine::look(kind, images, pull)?;
        let name = engine.name();
        for image in to_pull {
            eprintln!("pulling {image}");
            let args = [OsString::from("pull"), OsString::from(&image)];
            run_client(&engine.program, &args, engine.dir.as_deref(), true).map_err(|source| {
                EnvError::Pull {
                    engine: name,
                    image: image.clone(),
                    source,
                }
            })?;
        }
        Ok(engine)
    }

    /// [`Engine::probe`] without the pulls: the engine found and
    /// answering, and the images it would pull as `pull` says (each once);
    /// `--pull never` with an image missing is the error the run gives.
    /// What `run --dry-run` checks.
    pub(crate) fn look(
        kind: EnvKind,
        images: &[String],
        pull: PullPolicy,
    ) -> Result<(Engine, Vec<String>), EnvError> {
        let name = kind.engine().unwrap_or("podman");
        let program = find_on_path(name).ok_or(EnvError::EngineNotOnPath { engine: name })?;
        let engine = Engine {
            kind,
            program,
            dir: None,
        };
        engine
            .client(&["version"])
            .map_err(|err| unreachable_engine(name, err))?;
        let mut unique: Vec<&String> = Vec::new();
        for image in images {
            if !unique.contains(&image) {
                unique.push(image);
            }
        }
        let missing: Vec<String> = match pull {
            PullPolicy::Always => unique.into_iter().cloned().collect(),
            PullPolicy::Never | PullPolicy::Missing => unique
                .into_iter()
                .filter(|image| {
                    engine
                        .client(&["image", "inspect", image.as_str()])
                        .is_err()
                })
                .cloned()
                .collect(),
        };
        if pull == PullPolicy::Never && !missing.is_empty() {
            return Err(EnvError::NotInStore {
                engine: name,
                images: missing,
            });
        }
        Ok((engine, missing))
    }

    pub(crate) fn name(&self) -> &'static str {
        self.kind.engine().unwrap_or("podman")
    }

    /// The engine's version as it reports it (docker's daemon, podman's
    /// own), for `doctor`; `None` when it does not say.
    pub(crate) fn version(&self) -> Option<String> {
        let format = match self.kind {
            EnvKind::Docker => "{{.Server.Version}}",
            _ => "{{.Client.Version}}",
        };
        self.client(&["version", "--format", format])
            .ok()
            .filter(|version| !version.is_empty())
    }

    /// Runs the engine's client, blocking; its stdout.
    fn client(&self, args: &[&str]) -> Result<String, ToolError> {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        run_client(&self.program, &args, self.dir.as_deref(), false)
            .map(|out| String::from_utf8_lossy(&out).trim().to_owned())
    }

    /// [`Engine::client`] off the async workers, at the run's priority
    /// (the client is short, and a task waits on it).
    async fn client_async(&self, args: Vec<String>) -> Result<String, EnvError> {
        let engine = self.clone();
        crate::sys::blocking::urgent(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            engine.client(&args).map_err(EnvError::Client)
        })
        .await
        .unwrap_or_else(|| {
            Err(EnvError::ClientThread {
                engine: self.name(),
            })
        })
    }
}

/// The message for an engine whose `version` failed: a socket the user
/// may not use (Docker's socket belongs to root and the `docker` group) is
/// told apart from an engine that is down, since the fixes differ.
fn unreachable_engine(engine: &'static str, source: ToolError) -> EnvError {
    if source
        .to_string()
        .to_ascii_lowercase()
        .contains("permission denied")
    {
        EnvError::EngineNotPermitted { engine, source }
    } else {
        EnvError::EngineDown { engine, source }
    }
}

/// A program on PATH, as a shell would find it.
fn find_on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
}

/// This machine's name, as the containers' host label gives it.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_default()
}

/// Of one line of the sweep's `inspect` (id, run, host and lock labels,
/// tab-separated): the container's id and whether it is this run's, when
/// it is to go (this run's, or a dead run's on this machine).
fn whose<'a>(line: &'a str, run_id: &str, host: &str) -> Option<(&'a str, bool)> {
    let fields: Vec<&str> = line.trim().split('\t').collect();
    let [id, run, on, lock] = fields[..] else {
        return None;
    };
    if run == run_id {
        Some((id, true))
    } else if !host.is_empty() && on == host && run_is_over(Path::new(lock)) {
        Some((id, false))
    } else {
        None
    }
}

/// The ids of the containers labelled `label` (a key, or `k=v`), running
/// or not.
async fn list_labelled(engine: &Engine, label: &str) -> Result<Vec<String>, EnvError> {
    let listed = engine
        .client_async(vec![
            "ps".into(),
            "-a".into(),
            "-q".into(),
            "--filter".into(),
            format!("label={label}"),
        ])
        .await?;
    Ok(listed.split_whitespace().map(str::to_owned).collect())
}

/// The run, host and lock labels of the containers `ids`, a line each
/// (`whose` reads them), through `inspect`, whose Go template reads the
/// same on podman and docker (their `ps --format` differ). A container
/// removed since it was listed (another run's sweep, its own run's end)
/// fails the inspect of all: then each is inspected alone, and the gone
/// left out.
async fn inspect_labels(engine: &Engine, ids: Vec<String>) -> Result<String, EnvError> {
    let inspect = |ids: Vec<String>| {
        let mut args = vec![
            "inspect".to_owned(),
            "--format".to_owned(),
            format!(
                "{{{{.Id}}}}\t{{{{index .Config.Labels \"{RUN_LABEL}\"}}}}\t{{{{index .Config.Labels \"{HOST_LABEL}\"}}}}\t{{{{index .Config.Labels \"{LOCK_LABEL}\"}}}}"
            ),
        ];
        args.extend(ids);
        engine.client_async(args)
    };
    match inspect(ids.clone()).await {
        Ok(all) => Ok(all),
        Err(err) if ids.len() == 1 => Err(err),
        Err(_) => {
            let mut lines = Vec::new();
            for id in ids {
                if let Ok(line) = inspect(vec![id]).await {
                    lines.push(line);
                }
            }
            Ok(lines.join("\n"))
        }
    }
}

/// Removes the containers of `doomed` (id and whatever goes with it);
/// those it removed. One gone already (removed by another run's sweep at
/// the same moment) is not an error: each is then removed alone.
async fn remove_all<T>(
    engine: &Engine,
    doomed: Vec<(String, T)>,
) -> Result<Vec<(String, T)>, EnvError> {
    if doomed.is_empty() {
        return Ok(doomed);
    }
    let rm = |ids: Vec<String>| {
        let mut args = vec!["rm".to_owned(), "-f".to_owned()];
        args.extend(ids);
        engine.client_async(args)
    };
    let ids: Vec<String> = doomed.iter().map(|(id, _)| id.clone()).collect();
    match rm(ids).await {
        Ok(_) => Ok(doomed),
        Err(err) if doomed.len() == 1 => Err(err),
        Err(_) => {
            let mut removed = Vec::new();
            for (id, with) in doomed {
                if rm(vec![id.clone()]).await.is_ok() {
                    removed.push((id, with));
                }
            }
            Ok(removed)
        }
    }
}

/// Whether the onebash whose run folder lock is `lock` is gone: the lock
/// (or its folder) is not there, or no process holds it. A container
/// without the label (from an onebash before it) is never taken for a
/// dead run's. An error reading the lock counts as a live run: nothing
/// is removed on a doubt.
fn run_is_over(lock: &Path) -> bool {
    if lock.as_os_str().is_empty() || !lock.is_absolute() {
        return false;
    }
    match std::fs::symlink_metadata(lock) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => true,
        Err(_) => false,
        Ok(meta) if !meta.is_file() => false,
        Ok(_) => matches!(crate::sys::lock::FileLock::try_acquire(lock), Ok(Some(_))),
    }
}

/// What every container of a run shares.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub engine: Engine,
    /// Names the run in the containers' labels: the same for a run folder
    /// and its resumes, so a resume finds what a killed attempt left.
    pub run_id: String,
    /// The run folder's `run.lock`, held while the run lives: a label, so
    /// that a later run can tell a killed run's containers (its lock free)
    /// from a running one's.
    pub run_lock: PathBuf,
    /// `--allow-network`, for the agent's container (the tests' never).
    pub network: bool,
    /// `--allow-hosts`: the hosts a task that names none of its own may
    /// reach, through the proxy, in the agent's container.
    pub allowed_hosts: Option<crate::task::AllowedHosts>,
    pub memory_bytes: u64,
    pub max_processes: u64,
    pub max_file_size_bytes: u64,
    pub cpus: Option<f64>,
    /// `--workdir`: where the working copy goes in tasks that name none.
    pub workdir: String,
    /// `--container-commands`: through a channel per container, or one
    /// exec per command.
    pub commands: ContainerCommands,
}

/// Tasks in containers of one engine.
pub(crate) struct Containers {
    settings: Arc<Settings>,
    /// This machine's name, for the containers' host label.
    host: String,
    /// Held while an image is built: tasks sharing an environment wait
    /// for its one build instead of each building it.
    building: tokio::sync::Mutex<()>,
}

impl Containers {
    pub(crate) fn new(settings: Settings) -> Containers {
        Containers {
            settings: Arc::new(settings),
            host: hostname(),
            building: tokio::sync::Mutex::new(()),
        }
    }
}

impl Environment for Containers {
    fn enter<'a>(
        &'a self,
        task: &'a TaskSpec,
        epoch: u32,
        checkout: &'a Checkout,
        child: ChildSetup,
    ) -> BoxFuture<'a, Result<Box<dyn Workspace>, EnvError>> {
        Box::pin(async move {
            // Config checked that every task has an image before the run.
            let image = task.image.clone().ok_or_else(|| EnvError::NoImage {
                task: task.id.to_string(),
            })?;
            let workspace = self.workspace(
                task,
                epoch,
                image,
                checkout.dir.clone(),
                Repo::Mounted(host::Files(checkout.clone())),
                child,
            );
            let id = workspace.start("agent", self.settings.network).await?;
            *lock(&workspace.container) = Some(id);
            Ok(Box::new(workspace) as Box<dyn Workspace>)
        })
    }

    fn has_image_repos(&self) -> bool {
        true
    }

    fn build_image<'a>(
        &'a self,
        task: &'a TaskSpec,
        log: &'a Path,
        child: ChildSetup,
    ) -> BoxFuture<'a, Result<ImageBuild, EnvError>> {
        Box::pin(async move {
            let Some(spec) = task.benchmark.image_build() else {
                return Ok(ImageBuild::Ready);
            };
            // The task's benchmark gave it its image tag, the content hash
            // of its build context.
            let image = task.image.clone().unwrap_or_default();
            let engine = &self.settings.engine;
            let _one_at_a_time = self.building.lock().await;
            let inspect = vec!["image".into(), "inspect".into(), image.clone()];
            // Tagged by the content hash of the context: an image with
            // the tag was built from the same files.
            if engine.client_async(inspect).await.is_ok() {
                return Ok(ImageBuild::Ready);
            }
            let client_env =
                CommandEnv::engine_client(&format!("{}-{}-build", self.settings.run_id, task.id));
            let build = super::build::Build {
                program: &engine.program,
                image: &image,
                context: spec.context,
                log,
                env: &client_env,
                child: &child,
            };
            build.run(task, spec).await
        })
    }

    fn enter_image_repo<'a>(
        &'a self,
        task: &'a TaskSpec,
        epoch: u32,
        history: History,
        scratch: &'a Path,
        child: ChildSetup,
    ) -> BoxFuture<'a, Result<Entered, CheckoutError>> {
        Box::pin(async move {
            if let Code::Image { no_repo } = task.benchmark.code() {
                return self
                    .enter_image(task, epoch, no_repo, history, scratch, child)
                    .await;
            }
            let image = task.image.clone().unwrap_or_default();
            let workdir = task
                .workdir
                .clone()
                .unwrap_or_else(|| self.settings.workdir.clone());
            let failed = |message: String| CheckoutError::WorkingCopy {
                repo: format!("{image}:{workdir}"),
                rev: task.base_commit.clone(),
                message,
            };
            tokio::fs::create_dir_all(scratch)
                .await
                .map_err(|err| failed(format!("cannot make {}: {err}", scratch.display())))?;
            let workspace = self.workspace(
                task,
                epoch,
                image.clone(),
                scratch.to_owned(),
                Repo::Image(ImageRepo::new(&task.base_commit)),
                child,
            );
            let id = workspace
                .start("agent", self.settings.network)
                .await
                .map_err(|err| failed(err.to_string()))?;
            *lock(&workspace.container) = Some(id);
            let prepared = workspace
                .prepare_image_repo(&task.base_commit, history)
                .await;
            let prepared = match prepared {
                Ok(prepared) => prepared,
                Err(refused) => {
                    let _ = workspace.remove().await;
                    return Err(refused.into_error(format!("{image}:{workdir}"), &task.base_commit));
                }
            };
            if let Repo::Image(repo) = &workspace.repo {
                repo.prepared(&prepared);
            }
            let checkout = prepared.into_checkout(scratch, history);
            Ok((Box::new(workspace) as Box<dyn Workspace>, checkout))
        })
    }

    fn sweep(&self) -> BoxFuture<'_, Result<Swept, EnvError>> {
        Box::pin(async move {
            let engine = &self.settings.engine;
            let ids = list_labelled(engine, RUN_LABEL).await?;
            if ids.is_empty() {
                return Ok(Swept::default());
            }
            let inspected = inspect_labels(engine, ids).await?;
            let (mut swept, mut doomed) = (Swept::default(), Vec::new());
            for line in inspected.lines() {
                let Some((id, this_run)) = whose(line, &self.settings.run_id, &self.host) else {
                    continue;
                };
                doomed.push((id.to_owned(), this_run));
            }
            for (_, this_run) in remove_all(engine, doomed).await? {
                if this_run {
                    swept.this_run += 1;
                } else {
                    swept.other_runs += 1;
                }
            }
            Ok(swept)
        })
    }
}

impl Containers {
    /// The workspace of a task whose environment is its image: a container
    /// from its image, working in the image's own working directory, with
    /// the limits the task asks for; no repo (`no_repo` says so).
    async fn enter_image(
        &self,
        task: &TaskSpec,
        epoch: u32,
        no_repo: &'static str,
        history: History,
        scratch: &Path,
        child: ChildSetup,
    ) -> Result<Entered, CheckoutError> {
        let image = task.image.clone().unwrap_or_default();
        let failed = |message: String| CheckoutError::WorkingCopy {
            repo: image.clone(),
            rev: task.base_commit.clone(),
            message,
        };
        tokio::fs::create_dir_all(scratch)
            .await
            .map_err(|err| failed(format!("cannot make {}: {err}", scratch.display())))?;
        let workdir = workdir_of(&self.settings.engine, &image)
            .await
            .map_err(|err| failed(err.to_string()))?;
        let verifier = match task.benchmark.tests() {
            Tests::Verifier(verifier) => Some(verifier.clone()),
            Tests::Command | Tests::EvalScript => None,
        };
        let mut workspace = self.workspace(
            task,
            epoch,
            image.clone(),
            scratch.to_owned(),
            Repo::None { no_repo, verifier },
            child,
        );
        // The agent and the tests run in the image's WORKDIR, which the
        // engine makes when the image lacks the folder (a Dockerfile that
        // ends with `WORKDIR /app` and writes nothing there: buildah
        // makes no folder, docker's builder does). So the container gets
        // no `-w`: podman refuses `-w` of a folder the image lacks.
        workspace.workdir = Mutex::new(workdir);
        workspace.image_workdir = true;
        let setup = task
            .benchmark
            .container_setup()
            .cloned()
            .unwrap_or_default();
        if let Some(dir) = &setup.workdir {
            // Every command gets it (`exec -w`), as Harbor's; the
            // container itself starts in the image's.
            workspace.workdir = Mutex::new(dir.clone());
        }
        workspace.env = setup.env.clone();
        workspace.user = Mutex::new(setup.agent_user.clone());
        workspace.verifier_user = setup.verifier_user.clone();
        let limits = task.benchmark.limits();
        if let Some(mb) = limits.memory_mb {
            workspace.memory_bytes = mb.saturating_mul(1024 * 1024);
        }
        if limits.cpus.is_some() {
            workspace.cpus = limits.cpus;
        }
        let id = workspace
            .start("agent", self.settings.network)
            .await
            .map_err(|err| failed(err.to_string()))?;
        *lock(&workspace.container) = Some(id);
        if !setup.writable.is_empty() {
            let quoted: Vec<String> = setup
                .writable
                .iter()
                .map(|dir| image_repo::quote(dir))
                .collect();
            let script = format!("mkdir -p {all} && chmod 777 {all}", all = quoted.join(" "));
            if let Err(err) = workspace.harness_as_root(&script).await {
                let _ = workspace.remove().await;
                return Err(failed(format!(
                    "cannot make the folders a user other than the image's writes in: {err}"
                )));
            }
        }
        let checkout = Checkout {
            dir: scratch.to_owned(),
            commit: task.base_commit.clone(),
            head: task.base_commit.clone(),
            setup_commits: Vec::new(),
            history,
            verified: Verified { objects: 0 },
            fetched: false,
            warning: None,
        };
        Ok((Box::new(workspace) as Box<dyn Workspace>, checkout))
    }

    /// The workspace of one (task, epoch), its container not started yet.
    fn workspace(
        &self,
        task: &TaskSpec,
        epoch: u32,
        image: String,
        dir: PathBuf,
        repo: Repo,
        child: ChildSetup,
    ) -> ContainerWorkspace {
        ContainerWorkspace {
            settings: Arc::clone(&self.settings),
            image,
            workdir: Mutex::new(
                task.workdir
                    .clone()
                    .unwrap_or_else(|| self.settings.workdir.clone()),
            ),
            labels: vec![
                format!("{RUN_LABEL}={}", self.settings.run_id),
                format!("{HOST_LABEL}={}", self.host),
                format!("{LOCK_LABEL}={}", self.settings.run_lock.display()),
                format!("onebash.task={}", task.id),
                format!("onebash.epoch={epoch}"),
            ],
            dir,
            repo,
            child,
            image_workdir: false,
            env: Vec::new(),
            user: Mutex::new(None),
            verifier_user: None,
            memory_bytes: self.settings.memory_bytes,
            cpus: self.settings.cpus,
            client_env: CommandEnv::engine_client(&format!(
                "{}-{}-{epoch}",
                self.settings.run_id, task.id
            )),
            container: Mutex::new(None),
            setup: SetupLog::default(),
            via: tokio::sync::Mutex::new(Via::Unopened),
            hosts: super::egress::phase_hosts(task, self.settings.allowed_hosts.as_ref()),
            way_out: WayOut::default(),
        }
    }
}

/// Where a workspace's repo is.
enum Repo {
    /// onebash's own checkout, bind-mounted at the workdir: the diff and
    /// patches are the host's git operations on it.
    Mounted(host::Files),
    /// The repo the image holds at the workdir: the diff and patches are
    /// git commands in the container ([`image_repo`]).
    Image(ImageRepo),
    /// None: the task's environment is its image (`no_repo` says why no
    /// patch goes in). Its verifier, if any, runs in the agent's container
    /// ([`Workspace::end_agent_phase`]).
    None {
        no_repo: &'static str,
        verifier: Option<VerifierFolder>,
    },
}

struct ContainerWorkspace {
    settings: Arc<Settings>,
    image: String,
    /// Where commands run: the task's, or the image's WORKDIR (a separate
    /// verifier's image has its own, set when its container starts).
    workdir: Mutex<String>,
    labels: Vec<String>,
    /// The host folder of this (task, epoch): the bind-mounted checkout,
    /// or the client's folder, where files pass in and out.
    dir: PathBuf,
    repo: Repo,
    /// Limits of the engine's client on the host (the task's cgroup); the
    /// container has its own.
    child: ChildSetup,
    /// Whether the container starts in the image's own WORKDIR (the
    /// engine makes it), without `-w`; its commands get `-w workdir`.
    image_workdir: bool,
    /// Variables of the containers of the task's image (`run -e`).
    env: Vec<(String, String)>,
    /// Who the agent's commands (and, after the agent, the tests) run as
    /// now; `None`: the image's user. The harness's run as the image's.
    user: Mutex<Option<String>>,
    /// Who the tests run as, from the agent's end.
    verifier_user: Option<String>,
    /// The container's memory and CPUs: the run's, or the task's own.
    memory_bytes: u64,
    cpus: Option<f64>,
    client_env: CommandEnv,
    /// The container commands go to: the agent's, then the tests'.
    container: Mutex<Option<String>>,
    /// The setup to run again in the tests' container.
    setup: SetupLog,
    /// How commands reach the container now (under `--container-commands
    /// channel`); held for the whole of each command, so commands go one
    /// at a time.
    via: tokio::sync::Mutex<Via>,
    /// The hosts each phase may reach through a proxy, when the task or
    /// the run has an allowlist: its containers start with no network.
    hosts: Option<PhaseHosts>,
    /// The proxy of the container commands go to now.
    way_out: WayOut,
}

/// How a workspace's commands reach its container.
#[derive(Debug)]
enum Via {
    /// No channel yet: the next command opens one.
    Unopened,
    Open {
        container: String,
        /// Who its commands run as (`exec -u`); `None`: the image's user.
        user: Option<String>,
        channel: Box<Channel>,
    },
    /// The channel could not be opened: one exec per command for the rest
    /// of this container.
    Exec { container: String },
}

impl Via {
    fn container(&self) -> Option<&str> {
        match self {
            Via::Unopened => None,
            Via::Open { container, .. } | Via::Exec { container } => Some(container),
        }
    }

    /// Whether it is another container's, or a channel opened as another
    /// user (its commands run as the user it was opened as).
    fn stale(&self, container: &str, user: Option<&str>) -> bool {
        self.container().is_some_and(|open| open != container)
            || matches!(self, Via::Open { user: opened, .. } if opened.as_deref() != user)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An image's WORKDIR, `/` when it names none.
async fn workdir_of(engine: &Engine, image: &str) -> Result<String, EnvError> {
    let workdir = engine
        .client_async(vec![
            "image".into(),
            "inspect".into(),
            "--format".into(),
            "{{.Config.WorkingDir}}".into(),
            image.to_owned(),
        ])
        .await?;
    Ok(match workdir.trim() {
        "" => "/".to_owned(),
        dir => dir.to_owned(),
    })
}

impl ContainerWorkspace {
    /// Starts a container from the task's image, detached, doing nothing
    /// until it is removed; its id.
    async fn start(&self, phase: &str, network: bool) -> Result<String, EnvError> {
        self.start_from(&self.image, phase, network, true).await
    }

    /// [`ContainerWorkspace::start`] from `image`; with the task's own
    /// container settings (its variables and limits) when `task_settings`,
    /// else with the run's limits alone.
    async fn start_from(
        &self,
        image: &str,
        phase: &str,
        network: bool,
        task_settings: bool,
    ) -> Result<String, EnvError> {
        let settings = &self.settings;
        let host_dir = self.dir.display().to_string();
        let mounted = matches!(self.repo, Repo::Mounted(_));
        if mounted && (host_dir.contains(':') || host_dir.contains(',')) {
            return Err(EnvError::BindPath {
                path: self.dir.clone(),
            });
        }
        let mut args: Vec<String> = vec![
            "run".into(),
            "-d".into(),
            // PID 1 is the engine's init (podman's catatonit, docker's
            // tini), which reaps what commands leave behind: a `sleep` as
            // PID 1 never reaps, and the zombies of killed processes would
            // hold `--pids-limit` until no command could start.
            "--init".into(),
            // `sleep` ignores SIGTERM: a removal would wait 10 s for
            // nothing.
            "--stop-signal".into(),
            "KILL".into(),
        ];
        for label in self
            .labels
            .iter()
            .cloned()
            .chain([format!("onebash.phase={phase}")])
        {
            args.push("--label".into());
            args.push(label);
        }
        if !network {
            args.push("--network".into());
            args.push("none".into());
        }
        args.extend(self.limits_and_variables(task_settings));
        if mounted {
            args.extend(["-v".into(), format!("{host_dir}:{}", self.workdir())]);
        }
        if !self.image_workdir {
            args.extend(["-w".into(), self.workdir()]);
        }
        // A label of this start alone: a container the engine created but
        // could not start (a workdir it refuses, a limit the runtime
        // cannot set) is found by it and removed, never left behind.
        let start_label = format!("onebash.start={}", channel::nonce());
        args.extend([
            "--label".into(),
            start_label.clone(),
            "--entrypoint".into(),
            "sleep".into(),
            image.to_owned(),
            "infinity".into(),
        ]);
        let started = settings.engine.client_async(args).await;
        let id = match started {
            Ok(id) => id,
            Err(source) => {
                self.remove_labelled(&start_label).await;
                return Err(EnvError::Start {
                    image: image.to_owned(),
                    source: Box::new(source),
                });
            }
        };
        // Some engines print warnings before the id on stdout: the id is
        // the last line.
        let id = id
            .lines()
            .last()
            .map(str::to_owned)
            .filter(|id| !id.is_empty())
            .ok_or_else(|| EnvError::NoId {
                image: image.to_owned(),
            })?;
        self.allow_hosts(&id, image, phase, network).await?;
        Ok(id)
    }

    /// Under an allowlist, serves the phase's proxy inside the network
    /// namespace of the container `id` (started with none), on its
    /// loopback; a container that cannot have it is removed.
    async fn allow_hosts(
        &self,
        id: &str,
        image: &str,
        phase: &str,
        network: bool,
    ) -> Result<(), EnvError> {
        let hosts = match phase {
            "agent" => self.hosts.as_ref().map(|h| h.agent.clone()),
            "verifier" => self.hosts.as_ref().map(|h| h.verifier.clone()),
            _ => None,
        };
        let Some(hosts) = hosts.filter(|_| !network) else {
            return Ok(());
        };
        let attached = self.attach_proxy(id, image, hosts).await;
        if attached.is_err() {
            let rm = vec!["rm".into(), "-f".into(), id.to_owned()];
            let _ = self.settings.engine.client_async(rm).await;
        }
        attached
    }

    async fn attach_proxy(
        &self,
        id: &str,
        image: &str,
        hosts: crate::task::AllowedHosts,
    ) -> Result<(), EnvError> {
        let inspect = vec![
            "inspect".into(),
            "--format".into(),
            "{{.State.Pid}}".into(),
            id.to_owned(),
        ];
        let pid = self.settings.engine.client_async(inspect).await?;
        let pid: u32 = pid.trim().parse().unwrap_or(0);
        self.way_out
            .attach(pid, hosts)
            .await
            .map_err(|source| EnvError::Egress {
                image: image.to_owned(),
                source,
            })
    }

    /// The container's limits and variables: the task's own when
    /// `task_settings`, else the run's limits and no variables.
    fn limits_and_variables(&self, task_settings: bool) -> Vec<String> {
        let settings = &self.settings;
        let (memory_bytes, cpus) = if task_settings {
            (self.memory_bytes, self.cpus)
        } else {
            (settings.memory_bytes, settings.cpus)
        };
        let mut args: Vec<String> = vec![
            "--memory".into(),
            memory_bytes.to_string(),
            "--memory-swap".into(),
            memory_bytes.to_string(),
            "--pids-limit".into(),
            settings.max_processes.to_string(),
        ];
        if let Some(cpus) = cpus {
            args.extend(["--cpus".into(), cpus.to_string()]);
        }
        if task_settings {
            for (key, value) in &self.env {
                args.extend(["-e".into(), format!("{key}={value}")]);
            }
        }
        args
    }

    /// Removes every container labelled `label` (`k=v`), running or not;
    /// nothing when there is none or the engine does not answer (the next
    /// run's sweep removes what is left).
    async fn remove_labelled(&self, label: &str) {
        let engine = &self.settings.engine;
        let Ok(ids) = list_labelled(engine, label).await else {
            return;
        };
        if !ids.is_empty() {
            let mut args = vec!["rm".to_owned(), "-f".to_owned()];
            args.extend(ids);
            let _ = engine.client_async(args).await;
        }
    }

    /// Removes the container commands go to now, if any, and closes its
    /// channel.
    async fn remove(&self) -> Result<(), EnvError> {
        *self.via.lock().await = Via::Unopened;
        self.way_out.detach();
        let Some(id) = lock(&self.container).take() else {
            return Ok(());
        };
        self.settings
            .engine
            .client_async(vec!["rm".into(), "-f".into(), id])
            .await
            .map(|_| ())
    }

    /// Kills every process in `container` that carries the command's mark.
    async fn kill_marked(&self, container: &str, mark: &str) -> Result<(), EnvError> {
        self.settings
            .engine
            .client_async(vec![
                "exec".into(),
                container.to_owned(),
                "bash".into(),
                "-c".into(),
                KILL_MARKED.into(),
                "bash".into(),
                format!("{COMMAND_MARK_VAR}={mark}"),
            ])
            .await
            .map(|_| ())
    }
}

/// Kills, inside a container, every process whose environment holds `$1`
/// (`ONEBASH_COMMAND=<mark>`), in rounds until two in a row find none, as
/// the channel's sweep does: a process forked meanwhile dies too, and so
/// does one caught in the middle of an exec, whose environment reads as
/// empty for that moment (one empty round let such a `sleep 611 &`
/// survive a few times in 200 on a loaded machine). bash alone: images
/// need not have `ps`, `pkill` or `grep`.
const KILL_MARKED: &str = r#"empty=0
for round in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
  found=0
  for dir in /proc/[0-9]*; do
    pid=${dir#/proc/}
    [ "$pid" = "$$" ] && continue
    while IFS= read -r -d '' var; do
      if [ "$var" = "$1" ]; then kill -KILL "$pid" 2>/dev/null && found=1; break; fi
    done 2>/dev/null < "$dir/environ"
  done
  if [ "$found" = 0 ]; then
    empty=$((empty + 1))
    [ "$empty" = 2 ] && break
  else
    empty=0
  fi
  sleep 0.05
done"#;

/// Runs the command (`$1`) under a file-size limit of `ulimit -f` blocks,
/// as `--max-file-size` asks (the engine's `--ulimit` is not used, since
/// some hosts refuse the other limits it then sets), in a process group
/// of its own (job control), as the channel's server does; then kills
/// what it left running, as bwrap's PID namespace does on the host: the
/// command's process group at once, then what carries its mark. Commands
/// share no processes, and a command's leftovers cannot hold the
/// container's `--pids-limit` (or its memory) against the next one.
/// Exits with the command's status.
fn wrapper(max_file_size_bytes: u64) -> String {
    let blocks = file_blocks(max_file_size_bytes);
    format!(
        "ulimit -f {blocks} 2>/dev/null\nset -m\n( exec bash -c \"$1\" ) </dev/null &\npid=$!\n{{ wait \"$pid\"; }} 2>/dev/null\nstatus=$?\nkill -KILL -- \"-$pid\" 2>/dev/null\nset -- \"{COMMAND_MARK_VAR}=${COMMAND_MARK_VAR}\"\n{KILL_MARKED}\nexit $status"
    )
}

/// `--max-file-size` as `ulimit -f` takes it: blocks of 1 KiB, rounded up.
fn file_blocks(max_file_size_bytes: u64) -> u64 {
    max_file_size_bytes.div_ceil(1024).max(1)
}

/// Tells one command from another in the marks of their processes.
static COMMANDS: AtomicU64 = AtomicU64::new(0);

impl ContainerWorkspace {
    /// Runs one command in the container; a harness command before the
    /// agent's end is run again in the tests' container when `replayed`.
    async fn exec(
        &self,
        command: Command<'_>,
        replayed: bool,
    ) -> Result<CommandOutcome, ExecError> {
        let user = match command.trust {
            Trust::Agent { .. } => lock(&self.user).clone(),
            Trust::Harness => None,
        };
        self.exec_as(command, replayed, user).await
    }

    /// [`ContainerWorkspace::exec`] as `user` (`exec -u`); `None`: the
    /// image's user.
    async fn exec_as(
        &self,
        command: Command<'_>,
        replayed: bool,
        user: Option<String>,
    ) -> Result<CommandOutcome, ExecError> {
        let user = user.as_deref();
        let container = lock(&self.container).clone();
        let container = container.ok_or_else(|| {
            self.spawn_error(
                EnvError::NoContainer {
                    image: self.image.clone(),
                }
                .to_string(),
            )
        })?;
        let mark = format!(
            "{}-{}",
            std::process::id(),
            COMMANDS.fetch_add(1, Ordering::Relaxed)
        );
        // A sandbox with a proxy: the model's and the tests' commands are
        // pointed at it (the harness's own need no network).
        let proxied = match command.trust {
            Trust::Agent { .. } => self.way_out.env(command.env),
            Trust::Harness => None,
        };
        let command = Command {
            env: proxied.as_ref().unwrap_or(command.env),
            ..command
        };
        let outcome = match self.settings.commands {
            ContainerCommands::Exec => self.exec_once(&container, &mark, &command, user).await?,
            ContainerCommands::Channel => {
                self.through_channel(&container, &mark, &command, user)
                    .await?
            }
        };
        if replayed {
            self.setup.record(&command);
        }
        Ok(outcome)
    }

    /// A command that could not be run in the container, as the engine's
    /// client failing to start it reads.
    fn spawn_error(&self, message: String) -> ExecError {
        ExecError::Spawn {
            program: self.settings.engine.name().to_owned(),
            cwd: self.workdir(),
            source: std::io::Error::other(message),
        }
    }

    /// Where the engine's `exec` of a command or a channel starts: the run
    /// folder, as for the engine's client ([`Engine::dir`]); the task's
    /// folder where the engine has none (unit tests).
    fn exec_dir(&self) -> &Path {
        self.settings.engine.dir.as_deref().unwrap_or(&self.dir)
    }

    /// One command as one `ENGINE exec` (`--container-commands exec`, and
    /// where no channel opens).
    async fn exec_once(
        &self,
        container: &str,
        mark: &str,
        command: &Command<'_>,
        user: Option<&str>,
    ) -> Result<CommandOutcome, ExecError> {
        let mut args: Vec<OsString> = vec!["exec".into(), "-w".into(), self.workdir().into()];
        if let Some(user) = user {
            args.extend(["-u".into(), user.into()]);
        }
        for (key, value) in command.env.harness_vars().chain(std::iter::once(&(
            COMMAND_MARK_VAR.to_owned(),
            mark.to_owned(),
        ))) {
            args.push("-e".into());
            args.push(format!("{key}={value}").into());
        }
        args.extend([
            OsString::from(container),
            "bash".into(),
            "-c".into(),
            wrapper(self.settings.max_file_size_bytes).into(),
            "bash".into(),
            command.script.into(),
        ]);
        let outcome = run_command(Spawn {
            program: self.settings.engine.program.clone().into_os_string(),
            args,
            cwd: self.exec_dir(),
            env: &self.client_env,
            child: &self.child,
            timeout: command.timeout,
        })
        .await?;
        if outcome.timed_out {
            // Killing the client left the command running inside.
            if let Err(err) = self.kill_marked(container, mark).await {
                return Err(self.spawn_error(format!(
                    "the command timed out, and killing its processes in the container failed: {err}"
                )));
            }
        }
        Ok(outcome)
    }

    /// One command through the container's channel, opened now if there
    /// is none (or the one there is another container's). A channel that
    /// broke before the command started is reopened and the command sent
    /// again, once; one that broke while it ran ends the command as it
    /// was, its processes killed, and the next command opens a new one.
    /// Each of these is the outcome's notice, for the trajectory. Where no
    /// channel opens, the rest of the container's commands are one exec
    /// each.
    async fn through_channel(
        &self,
        container: &str,
        mark: &str,
        command: &Command<'_>,
        user: Option<&str>,
    ) -> Result<CommandOutcome, ExecError> {
        // bash cannot take such a script as an argument: the engine's
        // exec gives today's error.
        if command.script.contains('\0') {
            return self.exec_once(container, mark, command, user).await;
        }
        let engine = self.settings.engine.name();
        let mut via = self.via.lock().await;
        if via.stale(container, user) {
            *via = Via::Unopened;
        }
        let mut notice: Option<String> = None;
        for _attempt in 0..2 {
            if matches!(*via, Via::Unopened) {
                *via = match self.open_channel(container, user).await {
                    Ok(channel) => Via::Open {
                        container: container.to_owned(),
                        user: user.map(str::to_owned),
                        channel: Box::new(channel),
                    },
                    Err(why) => {
                        notice = Some(format!(
                            "the channel into the container could not be opened ({why}); its commands go by one `{engine} exec` each from now on"
                        ));
                        Via::Exec {
                            container: container.to_owned(),
                        }
                    }
                };
            }
            // Taken out while the command runs: if this future is dropped
            // halfway (a cancelled run), the channel goes with it, and the
            // next command opens a new one rather than one in mid-request.
            let (mut channel, opened) = match std::mem::replace(&mut *via, Via::Unopened) {
                Via::Open { channel, user, .. } => (channel, user),
                other => {
                    *via = other;
                    break;
                }
            };
            let workdir = self.workdir();
            let request = Request {
                script: command.script,
                workdir: &workdir,
                vars: command
                    .env
                    .harness_vars()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect(),
                mark,
                file_blocks: file_blocks(self.settings.max_file_size_bytes),
                timeout: command.timeout,
            };
            let kill = self.kill_marked(container, mark);
            match channel.run(&request, kill).await {
                Reply::Ended(mut outcome) => {
                    *via = Via::Open {
                        container: container.to_owned(),
                        user: opened,
                        channel,
                    };
                    outcome.notice = notice;
                    return Ok(outcome);
                }
                Reply::NotStarted(why) => {
                    notice = Some(match notice {
                        None => format!(
                            "the channel into the container broke before this command started ({why}); a new one was opened"
                        ),
                        Some(first) => format!(
                            "{first}, and it broke too ({why}); this command went by one `{engine} exec`"
                        ),
                    });
                }
                Reply::Lost { mut outcome, why } => {
                    // What the command started may still run inside.
                    let killed = match self.kill_marked(container, mark).await {
                        Ok(()) => "its processes were killed".to_owned(),
                        Err(err) => format!("killing its processes failed: {err}"),
                    };
                    outcome.notice = Some(format!(
                        "the channel into the container was lost during this command ({why}); {killed}, and the next command opens a new channel"
                    ));
                    return Ok(outcome);
                }
            }
        }
        drop(via);
        let mut outcome = self.exec_once(container, mark, command, user).await?;
        outcome.notice = notice;
        Ok(outcome)
    }

    /// Starts the channel's server in `container`.
    async fn open_channel(
        &self,
        container: &str,
        user: Option<&str>,
    ) -> Result<Channel, channel::ChannelError> {
        let nonce = channel::nonce();
        let args = channel::server_args(container, &self.workdir(), &nonce, user)
            .into_iter()
            .map(OsString::from)
            .collect();
        let spawn = Spawn {
            program: self.settings.engine.program.clone().into_os_string(),
            args,
            cwd: self.exec_dir(),
            env: &self.client_env,
            child: &self.child,
            timeout: std::time::Duration::ZERO,
        };
        Channel::open(spawn, &nonce).await
    }

    /// One git script of the harness's own in the container, not run again
    /// in the tests' container: its output, or why it failed.
    async fn harness_git(&self, script: &str) -> Result<String, EnvError> {
        let (outcome, output) = self.git_outcome(script).await?;
        image_repo::git_result(&outcome, output)
    }

    /// A script of the harness's own as root (`exec -u 0`), where the
    /// image's user may not be: its output, or why it failed.
    async fn harness_as_root(&self, script: &str) -> Result<String, EnvError> {
        let env = CommandEnv::for_task("onebash-harness");
        let command = Command {
            script,
            timeout: GIT_TIMEOUT,
            env: &env,
            trust: Trust::Harness,
        };
        let outcome = self.exec_as(command, false, Some("0".to_owned())).await?;
        let output = outcome.output.to_text();
        image_repo::git_result(&outcome, output)
    }

    /// [`ContainerWorkspace::harness_git`]'s outcome and output, whatever its
    /// exit code.
    async fn git_outcome(&self, script: &str) -> Result<(CommandOutcome, String), EnvError> {
        let env = CommandEnv::for_task("onebash-harness");
        let outcome = self
            .exec(
                Command {
                    script,
                    timeout: GIT_TIMEOUT,
                    env: &env,
                    trust: Trust::Harness,
                },
                false,
            )
            .await?;
        let output = outcome.output.to_text();
        Ok((outcome, output))
    }

    /// Runs [`image_repo::prepare`] in the agent's container: its report,
    /// or its refusal (the script's last line says which, whatever its
    /// exit code).
    async fn prepare_image_repo(&self, base: &str, history: History) -> Result<Prepared, Refused> {
        let (outcome, output) = self
            .git_outcome(&image_repo::prepare(base, history))
            .await
            .map_err(Refused::Exec)?;
        image_repo::prepared(&outcome, &output)
    }

    /// Where commands run now.
    fn workdir(&self) -> String {
        lock(&self.workdir).clone()
    }

    /// The container commands go to now.
    fn current(&self) -> Result<String, EnvError> {
        lock(&self.container)
            .clone()
            .ok_or_else(|| EnvError::NoContainer {
                image: self.image.clone(),
            })
    }

    /// A host path of this workspace's folder no other copy uses.
    fn passing(&self, what: &str) -> PathBuf {
        self.dir.join(format!(
            ".onebash-{what}-{}",
            COMMANDS.fetch_add(1, Ordering::Relaxed)
        ))
    }

    /// A file of the container, by a path relative to the workdir, copied
    /// out through the host folder.
    async fn copy_file_out(&self, relative: &Path) -> Result<Vec<u8>, EnvError> {
        let container = self.current()?;
        let host = self.passing("out");
        let from = format!("{container}:{}/{}", self.workdir(), relative.display());
        let copied = self
            .settings
            .engine
            .client_async(vec!["cp".into(), from, host.display().to_string()])
            .await;
        let read = match copied {
            Ok(_) => tokio::fs::read(&host)
                .await
                .map_err(|source| EnvError::ReadFile {
                    path: host.clone(),
                    source,
                }),
            Err(err) => Err(err),
        };
        let _ = tokio::fs::remove_file(&host).await;
        read
    }

    /// Writes a file of the container, by a path relative to the workdir,
    /// copied in through the host folder.
    async fn copy_file_in(&self, relative: &Path, bytes: Vec<u8>) -> Result<(), EnvError> {
        let container = self.current()?;
        let host = self.passing("in");
        crate::sys::blocking::write_file(host.clone(), bytes)
            .await
            .map_err(|source| EnvError::WriteFile {
                path: host.clone(),
                source,
            })?;
        let to = format!("{container}:{}/{}", self.workdir(), relative.display());
        let copied = self
            .settings
            .engine
            .client_async(vec!["cp".into(), host.display().to_string(), to])
            .await;
        let _ = tokio::fs::remove_file(&host).await;
        copied.map(|_| ())
    }
}

/// A task without a repo has none to patch (it carries no test patch).
fn no_repo(why: &'static str) -> GitError {
    GitError::NoRepo { why }
}

impl ContainerWorkspace {
    /// The verifier, in the agent's own container: where it reads and
    /// writes emptied (nothing the agent put there counts), its folder
    /// copied in. The container is kept because such a task's outcome is
    /// the state of the whole container (files anywhere, services
    /// running), which the verifier checks in place and no diff of one
    /// folder could carry to a fresh container.
    async fn stage_verifier(&self, verifier: &VerifierFolder) -> Result<(), EnvError> {
        self.harness_as_root(verifier.stage)
            .await
            .map_err(|err| EnvError::VerifierDirs(Box::new(err)))?;
        let container = self.current()?;
        let from = format!("{}/.", verifier.folder.display());
        let to = format!("{container}:{}", verifier.target);
        self.settings
            .engine
            .client_async(vec!["cp".into(), from, to])
            .await
            .map(|_| ())
            .map_err(|err| EnvError::CopyTests(Box::new(err)))
    }
}

impl ContainerWorkspace {
    /// Harbor's collect hooks, in the agent's container after the agent:
    /// each within its timeout; what one says or how it ends is no error
    /// (Harbor's are best-effort).
    async fn collect(&self, hooks: &[CollectHook]) {
        let env = CommandEnv::for_task("onebash-harness");
        for hook in hooks {
            let command = Command {
                script: &hook.command,
                timeout: hook.timeout,
                env: &env,
                trust: Trust::Harness,
            };
            let _ = self.exec_as(command, false, hook.user.clone()).await;
        }
    }

    /// Replaces the agent's container (and all it left running) by the
    /// verifier's, from the verifier's image, which receives only the
    /// artifacts, packed in the agent's container and passed through the
    /// host ([`artifacts`]).
    async fn to_separate_verifier(&self, separate: &SeparateVerifier) -> Result<(), EnvError> {
        self.harness_git(&artifacts::pack(&separate.artifacts))
            .await?;
        let host = self.passing("artifacts");
        let engine = &self.settings.engine;
        let agent = self.current()?;
        engine
            .client_async(vec![
                "cp".into(),
                format!("{agent}:{}", artifacts::STAGING),
                host.display().to_string(),
            ])
            .await?;
        self.remove()
            .await
            .map_err(|err| EnvError::RemoveAgent(Box::new(err)))?;
        let image = separate.image.as_deref().unwrap_or(&self.image);
        // A verifier of an environment of its own works in its image's
        // WORKDIR, without the task's variables and limits, as Harbor's;
        // else in a fresh copy of the task's container.
        if separate.own_environment {
            *lock(&self.workdir) = workdir_of(engine, image).await?;
        }
        let id = self
            .start_from(
                image,
                "verifier",
                self.settings.network,
                !separate.own_environment,
            )
            .await?;
        *lock(&self.container) = Some(id.clone());
        engine
            .client_async(vec![
                "cp".into(),
                format!("{}/.", host.display()),
                format!("{id}:{}", artifacts::STAGING),
            ])
            .await?;
        let _ = tokio::fs::remove_dir_all(&host).await;
        self.harness_git(&artifacts::unpack(&separate.artifacts))
            .await
            .map(|_| ())
    }
}

impl image_repo::Container for ContainerWorkspace {
    fn git<'a>(&'a self, script: &'a str) -> BoxFuture<'a, Result<String, EnvError>> {
        Box::pin(self.harness_git(script))
    }

    fn copy_in<'a>(
        &'a self,
        relative: &'a Path,
        bytes: Vec<u8>,
    ) -> BoxFuture<'a, Result<(), EnvError>> {
        Box::pin(self.copy_file_in(relative, bytes))
    }

    fn copy_out<'a>(&'a self, relative: &'a Path) -> BoxFuture<'a, Result<Vec<u8>, EnvError>> {
        Box::pin(self.copy_file_out(relative))
    }
}

impl Workspace for ContainerWorkspace {
    fn run<'a>(&'a self, command: Command<'a>) -> BoxFuture<'a, Result<CommandOutcome, ExecError>> {
        Box::pin(self.exec(command, true))
    }

    fn end_agent_phase(&self) -> BoxFuture<'_, Result<(), EnvError>> {
        Box::pin(async move {
            self.setup.agent_over();
            if let Repo::None { verifier, .. } = &self.repo {
                let Some(verifier) = verifier else {
                    return Ok(());
                };
                self.collect(&verifier.collect).await;
                if let Some(separate) = &verifier.separate {
                    self.to_separate_verifier(separate)
                        .await
                        .map_err(|err| EnvError::Artifacts(Box::new(err)))?;
                } else if let Some(hosts) = &self.hosts {
                    // The verifier's phase in the agent's container.
                    self.way_out.set_hosts(hosts.verifier.clone());
                }
                self.stage_verifier(verifier).await?;
                // The tests run as the verifier's user from now on.
                *lock(&self.user) = self.verifier_user.clone();
                return Ok(());
            }
            // What the agent left running dies with its container; the tests
            // get a fresh one from the image, as SWE-bench grades.
            self.remove()
                .await
                .map_err(|err| EnvError::RemoveAgent(Box::new(err)))?;
            let id = self.start("test", false).await?;
            *lock(&self.container) = Some(id);
            if let Repo::Image(repo) = &self.repo {
                repo.to_tests(self).await?;
            }
            self.setup.replay(self).await
        })
    }

    fn diff(&self) -> BoxFuture<'_, Result<String, GitError>> {
        match &self.repo {
            Repo::Mounted(files) => files.diff(),
            Repo::Image(repo) => Box::pin(repo.diff(self)),
            // No repo: the change is the container's state, which the
            // verifier sees in place; there is no diff to take.
            Repo::None { .. } => Box::pin(async { Ok(String::new()) }),
        }
    }

    fn restore(&self, patch: &str) -> BoxFuture<'_, Result<Vec<String>, GitError>> {
        match &self.repo {
            Repo::Mounted(files) => files.restore(patch),
            Repo::Image(repo) => {
                let patch = patch.to_owned();
                Box::pin(async move { repo.restore(self, &patch).await })
            }
            Repo::None { no_repo: why, .. } => {
                let why = *why;
                Box::pin(async move { Err(no_repo(why)) })
            }
        }
    }

    fn apply(&self, patch: &str) -> BoxFuture<'_, Result<(), GitError>> {
        match &self.repo {
            Repo::Mounted(files) => files.apply(patch),
            Repo::Image(repo) => {
                let patch = patch.to_owned();
                Box::pin(async move { repo.apply(self, &patch).await })
            }
            Repo::None { no_repo: why, .. } => {
                let why = *why;
                Box::pin(async move { Err(no_repo(why)) })
            }
        }
    }

    fn read(&self, relative: &Path) -> BoxFuture<'_, std::io::Result<Vec<u8>>> {
        match &self.repo {
            Repo::Mounted(files) => files.read(relative),
            Repo::Image(_) | Repo::None { .. } => {
                let relative = relative.to_owned();
                Box::pin(async move {
                    self.copy_file_out(&relative)
                        .await
                        .map_err(std::io::Error::other)
                })
            }
        }
    }

    fn write(&self, relative: &Path, bytes: Vec<u8>) -> BoxFuture<'_, std::io::Result<()>> {
        match &self.repo {
            Repo::Mounted(files) => files.write(relative, bytes),
            Repo::Image(_) | Repo::None { .. } => {
                let relative = relative.to_owned();
                Box::pin(async move {
                    self.copy_file_in(&relative, bytes)
                        .await
                        .map_err(std::io::Error::other)
                })
            }
        }
    }

    fn location(&self) -> String {
        let id = lock(&self.container).clone().unwrap_or_default();
        let short: String = id.chars().take(12).collect();
        format!("{}:{short}:{}", self.settings.engine.name(), self.workdir())
    }

    fn hosts_asked(&self) -> Vec<HostAsked> {
        self.way_out.asked()
    }

    fn leave(self: Box<Self>, keep: bool) -> BoxFuture<'static, std::io::Result<()>> {
        Box::pin(async move {
            let removed = self.remove().await;
            if !keep {
                crate::sys::blocking::remove_dir(self.dir.clone()).await?;
            }
            removed.map_err(std::io::Error::other)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A workspace whose engine is the shell script `engine` (a stand-in
    /// for podman: it answers as the script says), in `dir`.
    fn workspace_with_engine(dir: &Path, engine: &str) -> ContainerWorkspace {
        use std::os::unix::fs::PermissionsExt;
        let program = dir.join("engine");
        std::fs::write(&program, format!("#!/bin/sh\n{engine}\n")).expect("write the engine");
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let settings = Settings {
            engine: Engine {
                kind: EnvKind::Podman,
                program,
                dir: None,
            },
            run_id: "r".to_owned(),
            run_lock: dir.join("run.lock"),
            network: false,
            allowed_hosts: None,
            memory_bytes: 1 << 30,
            max_processes: 64,
            max_file_size_bytes: 1 << 20,
            cpus: None,
            workdir: "/testbed".to_owned(),
            commands: ContainerCommands::Channel,
        };
        ContainerWorkspace {
            settings: Arc::new(settings),
            image: "example/swe:1".to_owned(),
            workdir: Mutex::new("/testbed".to_owned()),
            labels: Vec::new(),
            dir: dir.to_owned(),
            repo: Repo::Image(ImageRepo::new("abc")),
            child: ChildSetup::none(),
            image_workdir: false,
            env: Vec::new(),
            user: Mutex::new(None),
            verifier_user: None,
            memory_bytes: 1 << 30,
            cpus: None,
            client_env: CommandEnv::engine_client("r-t-1"),
            container: Mutex::new(None),
            setup: SetupLog::default(),
            via: tokio::sync::Mutex::new(Via::Unopened),
            hosts: None,
            way_out: WayOut::default(),
        }
    }

    /// A container that does not start names its image and the engine's
    /// command line with what the engine said; a workspace whose container
    /// is gone names the image; a file that did not come out of the
    /// container names the host path it should have come to (it was a
    /// bare `No such file or directory (os error 2)`).
    #[tokio::test]
    async fn container_errors_name_the_image_the_command_and_the_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let refusing = workspace_with_engine(
            dir.path(),
            "echo 'Error: example/swe:1: image not known' >&2; exit 125",
        );
        let err = refusing.start("agent", false).await.expect_err("refused");
        let EnvError::Start { image, source } = &err else {
            panic!("not a start error: {err:?}");
        };
        assert_eq!(image, "example/swe:1");
        assert!(
            matches!(&**source, EnvError::Client(ToolError::Failed { command, stderr, .. })
                if command.contains(" run -d ") && stderr.contains("image not known")),
            "{source:?}"
        );
        let text = err.to_string();
        assert!(
            text.starts_with("failed to start a container from example/swe:1: `")
                && text.ends_with("Error: example/swe:1: image not known"),
            "{text}"
        );
        let gone = refusing
            .copy_file_out(Path::new("report.xml"))
            .await
            .expect_err("no container");
        assert_eq!(gone.to_string(), "no container from example/swe:1");

        // `cp` succeeds but leaves nothing on the host.
        let silent = workspace_with_engine(dir.path(), "exit 0");
        *lock(&silent.container) = Some("c0ffee".to_owned());
        let err = silent
            .copy_file_out(Path::new("report.xml"))
            .await
            .expect_err("nothing came out");
        let EnvError::ReadFile { path, .. } = &err else {
            panic!("not a read error: {err:?}");
        };
        assert!(path.starts_with(dir.path()), "{}", path.display());
        let text = err.to_string();
        assert!(
            text.starts_with(&format!(
                "cannot read {}/.onebash-out-",
                dir.path().display()
            )),
            "{text}"
        );
    }

    /// Where the channel does not open (an engine that refuses `exec -i`),
    /// the command still runs, by one exec, and its notice says why; the
    /// container's later commands go the same way, without a notice and
    /// without trying the channel again.
    #[tokio::test]
    async fn where_no_channel_opens_commands_go_by_one_exec_each() {
        let dir = tempfile::tempdir().expect("tempdir");
        // Refuses `exec -i`; an `exec` runs its command (what follows the
        // container's id) here, and counts the attempts at a channel.
        let engine = format!(
            r#"if [ "$2" = -i ]; then echo x >> {tries}; echo 'Error: no interactive exec here' >&2; exit 125; fi
shift; while [ "$1" != c0ffee ]; do shift; done; shift; exec "$@""#,
            tries = dir.path().join("tries").display()
        );
        let workspace = workspace_with_engine(dir.path(), &engine);
        *lock(&workspace.container) = Some("c0ffee".to_owned());
        let env = CommandEnv::for_task("container-fallback-test");
        let command = |script| Command {
            script,
            timeout: std::time::Duration::from_secs(120),
            env: &env,
            trust: Trust::Agent { network: false },
        };
        let first = workspace
            .run(command("echo one; exit 3"))
            .await
            .expect("runs");
        assert_eq!(
            (first.exit_code, first.output.to_text().as_str()),
            (3, "one\n")
        );
        let notice = first.notice.unwrap_or_default();
        assert!(
            notice.starts_with("the channel into the container could not be opened")
                && notice.contains("no interactive exec here")
                && notice.ends_with("its commands go by one `podman exec` each from now on"),
            "{notice}"
        );
        let second = workspace.run(command("echo two")).await.expect("runs");
        assert_eq!(second.output.to_text(), "two\n");
        assert!(second.notice.is_none(), "{:?}", second.notice);
        let tries = std::fs::read_to_string(dir.path().join("tries")).expect("tries");
        assert_eq!(tries.lines().count(), 1, "the channel was tried again");
    }

    #[test]
    fn the_file_size_limit_is_in_blocks_of_a_kib_rounded_up() {
        assert!(wrapper(2048 * 1024 * 1024).starts_with("ulimit -f 2097152 "));
        assert!(wrapper(1).starts_with("ulimit -f 1 "));
    }

    /// This run's containers go; another run's only when it ran on this
    /// machine and its run folder lock is gone or free; never on a doubt.
    #[test]
    fn a_sweep_takes_only_containers_of_dead_runs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let held = dir.path().join("live.lock");
        let _lock = crate::sys::lock::FileLock::acquire(&held).expect("lock");
        let free = dir.path().join("dead.lock");
        drop(crate::sys::lock::FileLock::acquire(&free).expect("lock"));
        let gone = dir.path().join("gone/run.lock");
        let line = |run: &str, host: &str, lock: &std::path::Path| {
            format!("c1\t{run}\t{host}\t{}", lock.display())
        };
        let whose = |line: &str| whose(line, "mine", "here").map(|(_, this_run)| this_run);
        assert_eq!(whose(&line("mine", "elsewhere", &held)), Some(true));
        assert_eq!(whose(&line("other", "here", &free)), Some(false));
        assert_eq!(whose(&line("other", "here", &gone)), Some(false));
        assert_eq!(whose(&line("other", "here", &held)), None, "a live run");
        assert_eq!(
            whose(&line("other", "elsewhere", &free)),
            None,
            "another machine"
        );
        // No lock label (an onebash from before it), a relative path, a
        // folder where the lock should be, a line cut short: kept.
        assert_eq!(whose("c1\tother\there\t"), None);
        assert_eq!(whose("c1\tother\there\trun.lock"), None);
        assert_eq!(whose(&line("other", "here", dir.path())), None);
        assert_eq!(whose("c1\tother"), None);
        // Nothing is another machine's when this one's name is unknown.
        assert_eq!(super::whose(&line("other", "", &free), "mine", ""), None);
        assert!(free.exists() && !gone.exists(), "the sweep made a file");
    }
}
