//! The `oci` environment: each command under bubblewrap over its task's
//! image root (made ready by [`super::Images::prepare`]) and the layers'
//! folders bound over it, all read-only, with the task's working copy
//! bound writable at its workdir and a private /tmp of the task's own.
//!
//! The bwrap command line is sys/sandbox.rs's (a user namespace without
//! capabilities, its own PID, IPC, UTS and, unless the command may have
//! it, network namespace; `--die-with-parent`, so killing bwrap's process
//! group kills everything inside), but over the image instead of the
//! host's `/`: nothing of the host is in sight but the working copy, so
//! no path needs hiding. The ids inside are root's, as in a container:
//! files the command writes are the user's on the host. The environment
//! is the image's `Env` under the harness's own variables (no key: the
//! command's environment never held one).
//!
//! The working copy is onebash's own leak-proof checkout, as with podman:
//! diffs and patches are the host's git operations on it (`host::Files`).
//! The agent cannot change the image (the root is read-only), and nothing
//! it starts outlives its command (the PID namespace dies with it), so
//! the tests' phase needs only a fresh /tmp.
//!
//! Or, for a task whose repo is the one its image holds (`repo_in_image`,
//! SWE-bench's), the working copy is a copy of the image's workdir
//! (`rootfs::copy_folder`: the cached files stay as they are), cleaned
//! and checked by `image_repo.rs`'s scripts run under bwrap as the
//! harness, as podman runs them in its container; the diff, restores and
//! patches are those scripts too. The tests get what a fresh container
//! gives: a fresh copy of the image's workdir with the agent's change
//! applied, and the task's setup run again. (`repo.rs` holds those
//! steps: the scripts under bwrap, files in and out, the fresh copy.)

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::{Image, Images, rootfs};
use crate::checkout::{Checkout, CheckoutError, GitError, History};
use crate::env::egress::HeldEgress;
use crate::env::image_repo::{self, ImageRepo, SetupLog};
use crate::env::{BoxFuture, Command, Entered, EnvError, Environment, Trust, Workspace, host};
use crate::sys::exec::{CommandOutcome, ExecError, Spawn, run_command};
use crate::sys::limits::ChildSetup;
use crate::task::{AllowedHosts, HostAsked, TaskSpec};

/// What every task of an `oci` run shares.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub bwrap: PathBuf,
    pub images: Arc<Images>,
    /// `--workdir`: where the working copy goes in tasks that name none.
    pub workdir: String,
}

impl Settings {
    /// Finds bwrap and runs `true` over one of the images, to learn at
    /// start whether this machine allows it.
    pub(crate) fn probe(images: Images, workdir: String) -> Result<Settings, EnvError> {
        let bwrap = find_bwrap().ok_or(EnvError::OciNoBwrap)?;
        let settings = Settings {
            bwrap,
            images: Arc::new(images),
            workdir,
        };
        if let Some(image) = settings.images.first() {
            let dir = tempfile_dir()?;
            let args = arguments(image, &dir, "/tmp", &dir, &[], false, "true");
            let probed = crate::sys::exec::probe(&settings.bwrap, &args);
            let _ = std::fs::remove_dir(&dir);
            probed.map_err(EnvError::OciProbe)?;
        }
        Ok(settings)
    }
}

fn tempfile_dir() -> Result<PathBuf, EnvError> {
    let dir = std::env::temp_dir().join(format!("onebash-oci-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|source| EnvError::MakeDir {
        path: dir.clone(),
        source,
    })?;
    Ok(dir)
}

fn find_bwrap() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("bwrap"))
        .find(|candidate| candidate.is_file())
}

/// Tasks in their images under bwrap.
pub(crate) struct Oci {
    settings: Arc<Settings>,
    /// `--allow-hosts`: the hosts every task without its own network
    /// setting may reach, through a proxy.
    allowed_hosts: Option<AllowedHosts>,
}

impl Oci {
    pub(crate) fn new(settings: Settings, allowed_hosts: Option<AllowedHosts>) -> Oci {
        Oci {
            settings: Arc::new(settings),
            allowed_hosts,
        }
    }

    /// The task's own network namespace and proxy, under an allowlist.
    async fn egress(
        &self,
        task: &TaskSpec,
        child: &ChildSetup,
    ) -> Result<Option<HeldEgress>, EnvError> {
        HeldEgress::for_task(task, self.allowed_hosts.as_ref(), true, child).await
    }
}

impl Environment for Oci {
    fn enter<'a>(
        &'a self,
        task: &'a TaskSpec,
        _epoch: u32,
        checkout: &'a Checkout,
        child: ChildSetup,
    ) -> BoxFuture<'a, Result<Box<dyn Workspace>, EnvError>> {
        Box::pin(async move {
            let (image, workdir) = self.image_of(task)?;
            let relative = workdir.trim_start_matches('/').to_owned();
            let root = image.root.clone();
            let tmp = private_tmp(&checkout.dir);
            let made = tokio::task::spawn_blocking(move || {
                root.workdir(Path::new(&relative))
                    .map_err(|source| EnvError::Workdir {
                        workdir: format!("/{relative}"),
                        source,
                    })?;
                std::fs::create_dir_all(&tmp).map_err(|source| EnvError::MakeDir {
                    path: tmp.clone(),
                    source,
                })
            })
            .await
            .unwrap_or_else(|source| {
                Err(EnvError::Thread {
                    doing: "preparing the task's root",
                    source,
                })
            });
            made.map_err(|err| EnvError::TaskRoot(Box::new(err)))?;
            let egress = self.egress(task, &child).await?;
            Ok(Box::new(OciWorkspace {
                settings: Arc::clone(&self.settings),
                image,
                workdir,
                tmp: private_tmp(&checkout.dir),
                dir: Mutex::new(checkout.dir.clone()),
                repo: Repo::Mounted(host::Files(checkout.clone())),
                child,
                egress,
            }) as Box<dyn Workspace>)
        })
    }

    fn has_image_repos(&self) -> bool {
        true
    }

    fn enter_image_repo<'a>(
        &'a self,
        task: &'a TaskSpec,
        _epoch: u32,
        history: History,
        scratch: &'a Path,
        child: ChildSetup,
    ) -> BoxFuture<'a, Result<Entered, CheckoutError>> {
        Box::pin(async move {
            let label = format!(
                "{}:{}",
                task.image.as_deref().unwrap_or_default(),
                task.workdir.as_deref().unwrap_or(&self.settings.workdir)
            );
            let failed = |message: String| CheckoutError::WorkingCopy {
                repo: label.clone(),
                rev: task.base_commit.clone(),
                message,
            };
            let (image, workdir) = self.image_of(task).map_err(|err| failed(err.to_string()))?;
            // The agent's copy and /tmp, inside the task's folder: the
            // runner deletes it whole when this fails.
            let (copy, tmp) = (scratch.join(AGENT_COPY), scratch.join("tmp"));
            let (root, relative) = (
                image.root.clone(),
                workdir.trim_start_matches('/').to_owned(),
            );
            let (into, private, stale) = (copy.clone(), tmp.clone(), scratch.to_owned());
            let made = tokio::task::spawn_blocking(move || {
                // What an attempt killed with onebash left (its copies,
                // its /tmp) goes first.
                match std::fs::remove_dir_all(&stale) {
                    Err(source) if source.kind() != std::io::ErrorKind::NotFound => {
                        return Err(EnvError::RemoveStale {
                            path: stale,
                            source,
                        });
                    }
                    _ => {}
                }
                std::fs::create_dir_all(&private).map_err(|source| EnvError::MakeDir {
                    path: private.clone(),
                    source,
                })?;
                rootfs::copy_folder(&root, Path::new(&relative), &into)
                    .map_err(|source| EnvError::CopyFolder { relative, source })
            })
            .await
            .unwrap_or_else(|source| {
                Err(EnvError::Thread {
                    doing: "copying the image's repo",
                    source,
                })
            });
            made.map_err(|err| failed(err.to_string()))?;
            let egress = self
                .egress(task, &child)
                .await
                .map_err(|err| failed(err.to_string()))?;
            let workspace = OciWorkspace {
                settings: Arc::clone(&self.settings),
                image,
                workdir,
                tmp,
                dir: Mutex::new(copy),
                repo: Repo::Image {
                    repo: ImageRepo::new(&task.base_commit),
                    scratch: scratch.to_owned(),
                    setup: SetupLog::default(),
                },
                child,
                egress,
            };
            let prepared = match workspace
                .harness(&image_repo::prepare(&task.base_commit, history))
                .await
            {
                Ok((outcome, output)) => image_repo::prepared(&outcome, &output),
                Err(err) => Err(image_repo::Refused::Exec(err)),
            };
            let prepared =
                prepared.map_err(|refused| refused.into_error(label.clone(), &task.base_commit))?;
            if let Repo::Image { repo, .. } = &workspace.repo {
                repo.prepared(&prepared);
            }
            let checkout = prepared.into_checkout(scratch, history);
            Ok((Box::new(workspace) as Box<dyn Workspace>, checkout))
        })
    }
}

impl Oci {
    /// The image `task` runs in, made ready by the probe, and its workdir.
    fn image_of(&self, task: &TaskSpec) -> Result<(Image, String), EnvError> {
        // Config checked that every task has an image, and the probe made
        // each ready.
        let name = task.image.as_deref().ok_or_else(|| EnvError::NoImage {
            task: task.id.to_string(),
        })?;
        let image =
            self.settings
                .images
                .get(name)
                .cloned()
                .ok_or_else(|| EnvError::NotPrepared {
                    image: name.to_owned(),
                })?;
        let workdir = task
            .workdir
            .clone()
            .unwrap_or_else(|| self.settings.workdir.clone());
        Ok((image, workdir))
    }
}

/// The folders of a task's own copy of its image's repo, in its folder:
/// the agent's, then the tests' fresh one.
pub(super) const AGENT_COPY: &str = "agent";
pub(super) const TESTS_COPY: &str = "tests";

/// The task's /tmp on the host: next to its working copy, in the run's
/// folder of working copies, removed with it.
fn private_tmp(checkout: &Path) -> PathBuf {
    let mut name = checkout.file_name().unwrap_or_default().to_owned();
    name.push(".tmp");
    checkout.with_file_name(name)
}

pub(super) struct OciWorkspace {
    settings: Arc<Settings>,
    pub(super) image: Image,
    pub(super) workdir: String,
    pub(super) tmp: PathBuf,
    /// The host folder bound writable at the workdir: the checkout, or the
    /// copy of the image's repo (the agent's, then the tests').
    pub(super) dir: Mutex<PathBuf>,
    repo: Repo,
    child: ChildSetup,
    /// The task's network namespace and proxy, under an allowlist.
    egress: Option<HeldEgress>,
}

/// Where a workspace's repo is.
enum Repo {
    /// onebash's own checkout: the diff and patches are the host's git
    /// operations on it.
    Mounted(host::Files),
    /// A copy of the repo the image holds: the diff and patches are
    /// [`image_repo`]'s scripts under bwrap.
    Image {
        repo: ImageRepo,
        /// The task's folder, which holds the copies and /tmp.
        scratch: PathBuf,
        setup: SetupLog,
    },
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The default PATH of a container when the image sets none.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// bwrap's arguments for `bash -c script` over `image`'s root, with
/// `checkout` writable at `workdir`, `tmp` at /tmp and `vars` set over
/// the image's environment.
fn arguments(
    image: &Image,
    checkout: &Path,
    workdir: &str,
    tmp: &Path,
    vars: &[(String, String)],
    network: bool,
    script: &str,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = Vec::with_capacity(64 + 3 * vars.len());
    let mut push = |items: &[&str]| args.extend(items.iter().map(OsString::from));
    push(&crate::sys::sandbox::ISOLATION);
    push(&[
        // Root inside, as in a container; the user's own ids outside.
        "--uid",
        "0",
        "--gid",
        "0",
        "--hostname",
        "onebash",
    ]);
    if !network {
        push(&["--unshare-net"]);
    }
    args.extend([
        "--ro-bind".into(),
        image.root.dir.clone().into_os_string(),
        "/".into(),
    ]);
    // The folders that one layer alone made, bound whole from it.
    for bind in &image.root.binds {
        args.extend([
            "--ro-bind".into(),
            bind.source.clone().into_os_string(),
            OsString::from(&bind.target),
        ]);
    }
    let mut push = |items: &[&str]| args.extend(items.iter().map(OsString::from));
    push(&[
        "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/run", "--tmpfs", "/dev/shm",
    ]);
    args.extend(["--bind".into(), tmp.as_os_str().to_owned(), "/tmp".into()]);
    args.extend([
        "--bind".into(),
        checkout.as_os_str().to_owned(),
        OsString::from(workdir),
    ]);
    // Name resolution with the network: the host's resolver settings
    // (an image's own are written by its engine at run time).
    if network {
        for file in ["/etc/resolv.conf", "/etc/hosts"] {
            if let Ok(real) = std::fs::canonicalize(file) {
                args.extend(["--ro-bind".into(), real.into_os_string(), file.into()]);
            }
        }
    }
    args.extend([
        "--chdir".into(),
        OsString::from(workdir),
        "--clearenv".into(),
    ]);
    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), DEFAULT_PATH.into()),
        ("HOME".into(), "/root".into()),
    ];
    let mut set = |key: &str, value: &str| {
        env.retain(|(k, _)| k != key);
        env.push((key.to_owned(), value.to_owned()));
    };
    for (key, value) in &image.env {
        set(key, value);
    }
    // Tools that write caches to $HOME (read-only here) can use /tmp.
    set("XDG_CACHE_HOME", "/tmp/.cache");
    for (key, value) in vars {
        set(key, value);
    }
    for (key, value) in env {
        args.extend(["--setenv".into(), key.into(), value.into()]);
    }
    args.extend(["--".into(), "bash".into(), "-c".into(), script.into()]);
    args
}

impl OciWorkspace {
    /// Runs one command under bwrap over the image, the current copy at
    /// the workdir.
    pub(super) async fn exec(&self, command: Command<'_>) -> Result<CommandOutcome, ExecError> {
        let (network, child, proxied) = match (command.trust, &self.egress) {
            // The task's namespace is the network: its loopback, where the
            // proxy listens, and no route out. bwrap keeps it.
            (Trust::Agent { network: false }, Some(egress)) => {
                (true, egress.child(), egress.env(command.env))
            }
            (Trust::Agent { network }, _) => (network, &self.child, None),
            (Trust::Harness, _) => (true, &self.child, None),
        };
        let env = proxied.as_ref().unwrap_or(command.env);
        let vars: Vec<(String, String)> = env.harness_vars().cloned().collect();
        let dir = lock(&self.dir).clone();
        let args = arguments(
            &self.image,
            &dir,
            &self.workdir,
            &self.tmp,
            &vars,
            network,
            command.script,
        );
        run_command(Spawn {
            program: self.settings.bwrap.clone().into_os_string(),
            args,
            cwd: &dir,
            env,
            child,
            timeout: command.timeout,
        })
        .await
    }
}

impl Workspace for OciWorkspace {
    fn run<'a>(&'a self, command: Command<'a>) -> BoxFuture<'a, Result<CommandOutcome, ExecError>> {
        if let Repo::Image { setup, .. } = &self.repo {
            setup.record(&command);
        }
        Box::pin(self.exec(command))
    }

    fn hosts_asked(&self) -> Vec<HostAsked> {
        self.egress
            .as_ref()
            .map(HeldEgress::asked)
            .unwrap_or_default()
    }

    fn end_agent_phase(&self) -> BoxFuture<'_, Result<(), EnvError>> {
        // The tests run in the same namespace, under the verifier's hosts.
        if let Some(egress) = &self.egress {
            egress.to_verifier();
        }
        Box::pin(async move {
            match &self.repo {
                // Nothing the agent started is left (each command's PID
                // namespace died with it) and the image is read-only: the
                // tests need only a /tmp of their own, as a fresh
                // container has.
                Repo::Mounted(_) => {
                    let tmp = self.tmp.clone();
                    crate::sys::blocking::remove_dir(tmp.clone())
                        .await
                        .and_then(|()| std::fs::create_dir_all(&tmp))
                        .map_err(|source| EnvError::EmptyTmp { path: tmp, source })
                }
                // As podman's fresh container: the image's repo as it is,
                // at the commit the agent started from, with the agent's
                // change, and the setup.
                Repo::Image {
                    repo,
                    scratch,
                    setup,
                } => {
                    setup.agent_over();
                    self.fresh_copy(scratch).await?;
                    repo.to_tests(self).await?;
                    setup.replay(self).await
                }
            }
        })
    }

    fn diff(&self) -> BoxFuture<'_, Result<String, GitError>> {
        match &self.repo {
            Repo::Mounted(files) => files.diff(),
            Repo::Image { repo, .. } => Box::pin(repo.diff(self)),
        }
    }

    fn restore(&self, patch: &str) -> BoxFuture<'_, Result<Vec<String>, GitError>> {
        match &self.repo {
            Repo::Mounted(files) => files.restore(patch),
            Repo::Image { repo, .. } => {
                let patch = patch.to_owned();
                Box::pin(async move { repo.restore(self, &patch).await })
            }
        }
    }

    fn apply(&self, patch: &str) -> BoxFuture<'_, Result<(), GitError>> {
        match &self.repo {
            Repo::Mounted(files) => files.apply(patch),
            Repo::Image { repo, .. } => {
                let patch = patch.to_owned();
                Box::pin(async move { repo.apply(self, &patch).await })
            }
        }
    }

    fn read(&self, relative: &Path) -> BoxFuture<'_, std::io::Result<Vec<u8>>> {
        match &self.repo {
            Repo::Mounted(files) => files.read(relative),
            Repo::Image { .. } => {
                let path = self.inside(relative, true);
                Box::pin(async move { tokio::fs::read(path?).await })
            }
        }
    }

    fn write(&self, relative: &Path, bytes: Vec<u8>) -> BoxFuture<'_, std::io::Result<()>> {
        match &self.repo {
            Repo::Mounted(files) => files.write(relative, bytes),
            Repo::Image { .. } => {
                let path = self.inside(relative, false);
                Box::pin(async move { crate::sys::blocking::write_file(path?, bytes).await })
            }
        }
    }

    fn location(&self) -> String {
        format!("oci:{}:{}", lock(&self.dir).display(), self.workdir)
    }

    fn leave(self: Box<Self>, keep: bool) -> BoxFuture<'static, std::io::Result<()>> {
        let tmp = self.tmp.clone();
        let dir = match &self.repo {
            Repo::Mounted(_) => lock(&self.dir).clone(),
            Repo::Image { scratch, .. } => scratch.clone(),
        };
        Box::pin(async move {
            let tmp_removed = crate::sys::blocking::remove_dir(tmp).await;
            if !keep {
                crate::sys::blocking::remove_dir(dir).await?;
            }
            tmp_removed
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image() -> Image {
        Image {
            root: rootfs::Root {
                dir: "/cache/oci/roots/abc/root".into(),
                binds: vec![rootfs::Bind {
                    source: "/cache/oci/layers/l1/usr".into(),
                    target: "/usr".into(),
                }],
            },
            env: vec![
                ("PATH".into(), "/opt/conda/bin:/usr/bin".into()),
                ("LANG".into(), "C.UTF-8".into()),
            ],
        }
    }

    fn args(network: bool) -> Vec<String> {
        let vars = [("TERM".to_owned(), "dumb".to_owned())];
        arguments(
            &image(),
            Path::new("/w/t1"),
            "/testbed",
            Path::new("/w/t1.tmp"),
            &vars,
            network,
            "ls",
        )
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
    }

    #[test]
    fn the_image_root_is_read_only_and_only_the_workdir_and_tmp_are_writable() {
        let args = args(false);
        let joined = args.join(" ");
        assert!(
            joined.contains(
                "--ro-bind /cache/oci/roots/abc/root / --ro-bind /cache/oci/layers/l1/usr /usr "
            ),
            "{joined}"
        );
        assert!(joined.contains("--bind /w/t1 /testbed"), "{joined}");
        assert!(joined.contains("--bind /w/t1.tmp /tmp"), "{joined}");
        assert_eq!(args.iter().filter(|a| *a == "--bind").count(), 2);
        assert!(args.contains(&"--unshare-net".to_owned()));
        assert!(!self::args(true).contains(&"--unshare-net".to_owned()));
        assert!(joined.ends_with("-- bash -c ls"));
    }

    #[test]
    fn the_image_environment_comes_first_and_the_harness_vars_over_it() {
        let args = args(false);
        let value = |key: &str| {
            args.windows(3)
                .find(|w| w[0] == "--setenv" && w[1] == key)
                .map(|w| w[2].clone())
        };
        assert_eq!(value("PATH").as_deref(), Some("/opt/conda/bin:/usr/bin"));
        assert_eq!(value("HOME").as_deref(), Some("/root"));
        assert_eq!(value("TERM").as_deref(), Some("dumb"));
        assert!(args.contains(&"--clearenv".to_owned()));
    }

    #[test]
    fn the_private_tmp_sits_next_to_the_working_copy() {
        assert_eq!(
            private_tmp(Path::new("/w/t1-0")),
            PathBuf::from("/w/t1-0.tmp")
        );
    }
}
