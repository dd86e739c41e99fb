//! The `oci` environment: each command under bubblewrap over its task's
//! image root (made ready by [`super::Images::prepare`]), read-only, with
//! the task's working copy bound writable at its workdir and a private
//! /tmp of the task's own.
//!
//! The bwrap command line is sandbox.rs's (a user namespace without
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

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Image, Images, rootfs};
use crate::checkout::{Checkout, GitError};
use crate::env::{BoxFuture, Command, Environment, Trust, Workspace, host};
use crate::exec::{CommandOutcome, ExecError, Spawn, run_command};
use crate::limits::ChildSetup;
use crate::task::TaskSpec;

/// What every task of an `oci` run shares.
#[derive(Debug, Clone)]
pub struct Settings {
    pub bwrap: PathBuf,
    pub images: Arc<Images>,
    /// `--allow-network`, for the agent's commands (the tests' never).
    pub network: bool,
    /// `--workdir`: where the working copy goes in tasks that name none.
    pub workdir: String,
}

impl Settings {
    /// Finds bwrap and runs `true` over one of the images, to learn at
    /// start whether this machine allows it.
    pub fn probe(images: Images, network: bool, workdir: String) -> Result<Settings, String> {
        let bwrap = find_bwrap().ok_or_else(|| {
            "--env oci: bwrap is not on PATH\nhint: install bubblewrap (apt-get install bubblewrap)"
                .to_owned()
        })?;
        let settings = Settings {
            bwrap,
            images: Arc::new(images),
            network,
            workdir,
        };
        if let Some(image) = settings.images.first() {
            let dir = tempfile_dir()?;
            let args = arguments(image, &dir, "/tmp", &dir, &[], false, "true");
            let probed = crate::exec::probe(&settings.bwrap, &args);
            let _ = std::fs::remove_dir(&dir);
            probed.map_err(|err| {
                format!("--env oci: bwrap does not work over the image's root: {err}\nhint: user namespaces must be allowed (sysctl kernel.unprivileged_userns_clone=1)")
            })?;
        }
        Ok(settings)
    }
}

fn tempfile_dir() -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("onebash-oci-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|err| format!("cannot make {}: {err}", dir.display()))?;
    Ok(dir)
}

fn find_bwrap() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("bwrap"))
        .find(|candidate| candidate.is_file())
}

/// Tasks in their images under bwrap.
pub struct Oci {
    settings: Arc<Settings>,
}

impl Oci {
    pub fn new(settings: Settings) -> Oci {
        Oci {
            settings: Arc::new(settings),
        }
    }
}

impl Environment for Oci {
    fn name(&self) -> &'static str {
        "oci"
    }

    fn enter<'a>(
        &'a self,
        task: &'a TaskSpec,
        _epoch: u32,
        checkout: &'a Checkout,
        child: ChildSetup,
    ) -> BoxFuture<'a, Result<Box<dyn Workspace>, String>> {
        Box::pin(async move {
            // Config checked that every task has an image, and the probe
            // made each ready.
            let name = task
                .image
                .as_deref()
                .ok_or_else(|| format!("task {} has no image", task.id))?;
            let image = self
                .settings
                .images
                .get(name)
                .cloned()
                .ok_or_else(|| format!("the image {name} was not prepared"))?;
            let workdir = task
                .workdir
                .clone()
                .unwrap_or_else(|| self.settings.workdir.clone());
            let relative = workdir.trim_start_matches('/').to_owned();
            let root = image.root.clone();
            let tmp = private_tmp(&checkout.dir);
            let made = tokio::task::spawn_blocking(move || {
                rootfs::mount_point(&root, Path::new(&relative), true)
                    .map_err(|err| err.to_string())?;
                std::fs::create_dir_all(&tmp).map_err(|err| format!("{}: {err}", tmp.display()))
            })
            .await
            .unwrap_or_else(|join| Err(format!("the thread failed: {join}")));
            made.map_err(|err| format!("failed to prepare the task's root: {err}"))?;
            Ok(Box::new(OciWorkspace {
                settings: Arc::clone(&self.settings),
                image,
                workdir,
                tmp: private_tmp(&checkout.dir),
                checkout: checkout.clone(),
                files: host::Files(checkout.clone()),
                child,
            }) as Box<dyn Workspace>)
        })
    }
}

/// The task's /tmp on the host: next to its working copy, in the run's
/// folder of working copies, removed with it.
fn private_tmp(checkout: &Path) -> PathBuf {
    let mut name = checkout.file_name().unwrap_or_default().to_owned();
    name.push(".tmp");
    checkout.with_file_name(name)
}

struct OciWorkspace {
    settings: Arc<Settings>,
    image: Image,
    workdir: String,
    tmp: PathBuf,
    checkout: Checkout,
    files: host::Files,
    child: ChildSetup,
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
    push(&crate::sandbox::ISOLATION);
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
        image.root.clone().into_os_string(),
        "/".into(),
    ]);
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

impl Workspace for OciWorkspace {
    fn run<'a>(&'a self, command: Command<'a>) -> BoxFuture<'a, Result<CommandOutcome, ExecError>> {
        let network = match command.trust {
            Trust::Agent { network } => network,
            Trust::Harness => true,
        };
        let vars: Vec<(String, String)> = command.env.harness_vars().cloned().collect();
        let args = arguments(
            &self.image,
            &self.checkout.dir,
            &self.workdir,
            &self.tmp,
            &vars,
            network,
            command.script,
        );
        Box::pin(run_command(Spawn {
            program: self.settings.bwrap.clone().into_os_string(),
            args,
            cwd: &self.checkout.dir,
            env: command.env,
            child: &self.child,
            timeout: command.timeout,
        }))
    }

    fn end_agent_phase(&self) -> BoxFuture<'_, Result<(), String>> {
        // Nothing the agent started is left (each command's PID namespace
        // died with it) and the image is read-only: the tests need only a
        // /tmp of their own, as a fresh container has.
        let tmp = self.tmp.clone();
        Box::pin(async move {
            crate::blocking::remove_dir(tmp.clone())
                .await
                .and_then(|()| std::fs::create_dir_all(&tmp))
                .map_err(|err| format!("failed to empty the task's /tmp: {err}"))
        })
    }

    fn diff(&self) -> BoxFuture<'_, Result<String, GitError>> {
        self.files.diff()
    }

    fn restore(&self, patch: &str) -> BoxFuture<'_, Result<Vec<String>, GitError>> {
        self.files.restore(patch)
    }

    fn apply(&self, patch: &str) -> BoxFuture<'_, Result<(), GitError>> {
        self.files.apply(patch)
    }

    fn read(&self, relative: &Path) -> BoxFuture<'_, std::io::Result<Vec<u8>>> {
        self.files.read(relative)
    }

    fn write(&self, relative: &Path, bytes: Vec<u8>) -> BoxFuture<'_, std::io::Result<()>> {
        self.files.write(relative, bytes)
    }

    fn location(&self) -> String {
        format!("oci:{}:{}", self.checkout.dir.display(), self.workdir)
    }

    fn leave(self: Box<Self>, keep: bool) -> BoxFuture<'static, std::io::Result<()>> {
        let (dir, tmp) = (self.checkout.dir.clone(), self.tmp.clone());
        Box::pin(async move {
            let tmp_removed = crate::blocking::remove_dir(tmp).await;
            if !keep {
                crate::blocking::remove_dir(dir).await?;
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
            root: "/cache/oci/rootfs/abc".into(),
            env: vec![
                ("PATH".into(), "/opt/conda/bin:/usr/bin".into()),
                ("LANG".into(), "C.UTF-8".into()),
            ],
            working_dir: None,
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
            joined.contains("--ro-bind /cache/oci/rootfs/abc /"),
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
