//! The sandbox for agent and test commands: bubblewrap (`bwrap`), or none.
//!
//! Owns the choice (`--sandbox auto|bwrap|none`, probed once at start) and
//! the bwrap command line of one command: a user namespace with no
//! capabilities, its own PID, IPC, UTS and (unless `--allow-network` or the
//! command is the trusted `setup_command`) network namespace; the whole
//! file system read-only but the checkout; private /tmp, /dev/shm and /run;
//! the task file, the run folder and the usual secret folders of $HOME
//! hidden. Killing bwrap kills every process inside (`--die-with-parent`
//! and the PID namespace), including daemons that called setsid.
//! It does not spawn anything itself: exec.rs does.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Folders every sandboxed command gets empty and private (tmpfs): what is
/// in them on the host is out of its sight already.
pub(crate) const PRIVATE_DIRS: [&str; 3] = ["/tmp", "/dev/shm", "/run"];

/// `--sandbox`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// bwrap when it is installed and works, else none with a warning.
    Auto,
    /// bwrap, or refuse to run.
    Bwrap,
    /// No sandbox: commands run as you, with your files and network.
    None,
}

/// The namespaces and capabilities of every bwrap command: a user
/// namespace with no capabilities, its own PID, IPC, UTS and cgroup
/// namespaces, in a session of its own, dying with its parent. The
/// network namespace is the caller's choice. `env/oci` shares them.
pub(crate) const ISOLATION: [&str; 9] = [
    "--die-with-parent",
    "--new-session",
    "--unshare-user",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--cap-drop",
    "ALL",
];

/// No sandbox: for the harness's own commands (setup_command, patching).
pub(crate) static NONE: Sandbox = Sandbox::None;

/// The sandbox a run uses, decided once.
#[derive(Debug, Clone)]
pub(crate) enum Sandbox {
    None,
    Bwrap(Bwrap),
}

/// What every bwrap command of a run shares.
#[derive(Debug, Clone)]
pub(crate) struct Bwrap {
    program: PathBuf,
    /// Files and folders the agent must not see (task file, run folder,
    /// secrets in $HOME), hidden behind /dev/null or an empty tmpfs.
    hidden: Vec<PathBuf>,
    /// Which of `hidden` are folders and which files (the missing ones
    /// left out), looked up once, at the run's first command: by then its
    /// folders exist (the run folder, the cache), and no command pays a
    /// `stat` of each.
    kinds: std::sync::OnceLock<Vec<(PathBuf, bool)>>,
}

/// Secrets commonly kept in a home folder.
const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".config/gcloud",
    ".config/gh",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    // The Hugging Face Hub's token (gated datasets), where its client
    // keeps it by default; one in another $HF_HOME is hidden by the run.
    ".cache/huggingface/token",
    ".huggingface/token",
];

/// Why bwrap cannot be had on this machine: the warning of `--sandbox
/// auto`, or [`SandboxError::Required`].
#[derive(Debug, thiserror::Error)]
pub enum BwrapProblem {
    #[error("bwrap is not on PATH")]
    NotOnPath,
    /// The probe's folder to bind writable could not be made.
    #[error("cannot make {}: {source}", path.display())]
    ProbeDir {
        path: PathBuf,
        source: std::io::Error,
    },
    /// bwrap ran and refused (user namespaces forbidden, say).
    #[error("bwrap does not work here: {0}")]
    Refused(#[source] crate::sys::exec::ToolError),
}

/// `--sandbox bwrap` on a machine where bwrap cannot be had: the run must
/// not start.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "--sandbox bwrap: {0}\nhint: install bubblewrap (apt-get install bubblewrap), or choose --sandbox none"
    )]
    Required(#[source] BwrapProblem),
}

/// The per-command part: where the command may write and whether it may
/// reach the network.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Confinement<'a> {
    pub sandbox: &'a Sandbox,
    /// The only folder the command may write (besides private /tmp).
    pub writable: &'a Path,
    /// The command may use the network (setup_command; --allow-network).
    pub network: bool,
}

impl Sandbox {
    /// Decides the run's sandbox. `hidden` are paths of this run (task
    /// file, run folder, cache folder). Returns the sandbox and, for `auto`
    /// without a working bwrap, a warning.
    pub(crate) fn choose(
        mode: SandboxMode,
        hidden: &[PathBuf],
    ) -> Result<(Sandbox, Option<String>), SandboxError> {
        if mode == SandboxMode::None {
            return Ok((Sandbox::None, None));
        }
        let probed = find_bwrap().and_then(|program| {
            let bwrap = Bwrap::new(program, hidden);
            bwrap.probe().map(|()| bwrap)
        });
        match (probed, mode) {
            (Ok(bwrap), _) => Ok((Sandbox::Bwrap(bwrap), None)),
            (Err(problem), SandboxMode::Bwrap) => Err(SandboxError::Required(problem)),
            (Err(problem), _) => Ok((
                Sandbox::None,
                Some(format!(
                    "no sandbox ({problem}): agent commands run as you, can read and write your files and reach the network; install bubblewrap, or pass --sandbox none to silence this"
                )),
            )),
        }
    }

    pub(crate) fn name(&self) -> &'static str {
        match self {
            Sandbox::None => "none",
            Sandbox::Bwrap(_) => "bwrap",
        }
    }
}

impl Confinement<'_> {
    /// The program and arguments that run `bash -c command` in `cwd`.
    pub(crate) fn command_line(&self, command: &str, cwd: &Path) -> (OsString, Vec<OsString>) {
        let bash = || vec![OsString::from("bash"), "-c".into(), command.into()];
        match self.sandbox {
            Sandbox::None => (OsString::from("bash"), bash()[1..].to_vec()),
            Sandbox::Bwrap(bwrap) => {
                let mut args = bwrap.arguments(self.writable, cwd, self.network);
                args.push("--".into());
                args.extend(bash());
                (bwrap.program.clone().into_os_string(), args)
            }
        }
    }
}

/// The paths of `hidden` that exist, each with whether it is a folder.
fn kinds_of(hidden: &[PathBuf]) -> Vec<(PathBuf, bool)> {
    hidden
        .iter()
        .filter_map(|path| {
            let meta = std::fs::metadata(path).ok()?;
            Some((path.clone(), meta.is_dir()))
        })
        .collect()
}

fn find_bwrap() -> Result<PathBuf, BwrapProblem> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("bwrap"))
        .find(|candidate| candidate.is_file())
        .ok_or(BwrapProblem::NotOnPath)
}

impl Bwrap {
    fn new(program: PathBuf, hidden: &[PathBuf]) -> Bwrap {
        let mut all_hidden: Vec<PathBuf> = hidden.to_vec();
        if let Some(home) = std::env::var_os("HOME").map(PathBuf::from) {
            all_hidden.extend(HOME_SECRETS.iter().map(|rel| home.join(rel)));
        }
        // Outer folders first: a tmpfs over a folder hides the mounts made
        // inside it before, and the read-only remount of such a covered
        // mount would fail (the run folder inside the cache, say).
        all_hidden.sort_by_key(|path| path.components().count());
        Bwrap {
            program,
            hidden: all_hidden,
            kinds: std::sync::OnceLock::new(),
        }
    }

    /// The hidden paths that exist, each with whether it is a folder.
    fn kinds(&self) -> &[(PathBuf, bool)] {
        self.kinds.get_or_init(|| kinds_of(&self.hidden))
    }

    /// Runs `true` in a sandbox like the real ones, to learn at start
    /// whether bwrap works here (user namespaces may be forbidden).
    fn probe(&self) -> Result<(), BwrapProblem> {
        // A folder of its own to bind writable, as a checkout would be.
        let dir = std::env::temp_dir().join(format!("onebash-probe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|source| BwrapProblem::ProbeDir {
            path: dir.clone(),
            source,
        })?;
        // The paths as they are now, without deciding them for the run.
        let mut args = self.arguments_with(&kinds_of(&self.hidden), &dir, &dir, false);
        args.extend(["--".into(), "true".into()]);
        let probed = crate::sys::exec::probe(&self.program, &args);
        let _ = std::fs::remove_dir(&dir);
        probed.map_err(BwrapProblem::Refused)
    }

    fn arguments(&self, writable: &Path, cwd: &Path, network: bool) -> Vec<OsString> {
        self.arguments_with(self.kinds(), writable, cwd, network)
    }

    fn arguments_with(
        &self,
        hidden: &[(PathBuf, bool)],
        writable: &Path,
        cwd: &Path,
        network: bool,
    ) -> Vec<OsString> {
        let mut args: Vec<OsString> = Vec::with_capacity(64);
        let mut push = |items: &[&str]| args.extend(items.iter().map(OsString::from));
        push(&ISOLATION);
        // The same ids inside as outside, so files written in the checkout
        // belong to the user who runs onebash.
        // SAFETY: geteuid and getegid have no preconditions.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        push(&["--uid", &uid.to_string(), "--gid", &gid.to_string()]);
        if !network {
            push(&["--unshare-net"]);
        }
        push(&["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]);
        for dir in PRIVATE_DIRS {
            push(&["--tmpfs", dir]);
        }
        // With /run hidden, name resolution must still find its files when
        // the network is on (systemd-resolved keeps resolv.conf in /run).
        if network
            && let Ok(target) = std::fs::canonicalize("/etc/resolv.conf")
            && target.starts_with("/run")
        {
            args.extend(["--ro-bind".into(), target.clone().into(), target.into()]);
        }
        // Hidden folders become empty tmpfs mounts, made read-only once the
        // binds inside them are in place, so a write there fails as it does
        // anywhere else outside the checkout.
        let mut hidden_dirs: Vec<&Path> = Vec::new();
        for (path, is_dir) in hidden {
            match is_dir {
                // A hidden folder inside the writable one would be
                // covered by the bind anyway.
                true if !path.starts_with(writable) => {
                    args.extend(["--tmpfs".into(), path.clone().into_os_string()]);
                    hidden_dirs.push(path);
                }
                true => {}
                false => {
                    args.extend([
                        "--ro-bind".into(),
                        "/dev/null".into(),
                        path.clone().into_os_string(),
                    ]);
                }
            }
        }
        args.extend([
            "--bind".into(),
            writable.as_os_str().to_owned(),
            writable.as_os_str().to_owned(),
        ]);
        for dir in hidden_dirs {
            args.extend(["--remount-ro".into(), dir.as_os_str().to_owned()]);
        }
        args.extend([
            "--chdir".into(),
            cwd.as_os_str().to_owned(),
            // Tools that write caches to $HOME (read-only here) can use /tmp.
            "--setenv".into(),
            "XDG_CACHE_HOME".into(),
            "/tmp/.cache".into(),
        ]);
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args_of(bwrap: &Bwrap, network: bool) -> Vec<String> {
        bwrap
            .arguments(Path::new("/w/checkout"), Path::new("/w/checkout"), network)
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn network_is_cut_unless_asked_for() {
        let bwrap = Bwrap::new("/usr/bin/bwrap".into(), &[]);
        assert!(args_of(&bwrap, false).contains(&"--unshare-net".to_owned()));
        assert!(!args_of(&bwrap, true).contains(&"--unshare-net".to_owned()));
    }

    #[test]
    fn tmp_comes_before_the_checkout_bind() {
        let bwrap = Bwrap::new("/usr/bin/bwrap".into(), &[]);
        let args = args_of(&bwrap, false);
        let tmp = args.iter().position(|a| a == "/tmp").expect("tmpfs /tmp");
        let bind = args.iter().position(|a| a == "--bind").expect("bind");
        assert!(tmp < bind);
        assert_eq!(args[bind + 1], "/w/checkout");
    }

    #[test]
    fn a_hidden_folder_is_mounted_before_the_hidden_folders_inside_it() {
        let dir = tempfile::tempdir().expect("temp folder");
        let (cache, run) = (dir.path().join("cache"), dir.path().join("cache/runs/r1"));
        std::fs::create_dir_all(&run).expect("mkdir");
        let bwrap = Bwrap::new("/usr/bin/bwrap".into(), &[run.clone(), cache.clone()]);
        let args = args_of(&bwrap, false);
        let at = |path: &Path| {
            let path = path.display().to_string();
            args.windows(2)
                .position(|w| w[0] == "--tmpfs" && w[1] == path)
                .expect("a tmpfs")
        };
        assert!(at(&cache) < at(&run), "{args:?}");
    }

    #[test]
    fn hidden_paths_are_looked_up_once_not_for_every_command() {
        let dir = tempfile::tempdir().expect("temp folder");
        let (folder, file) = (dir.path().join("run"), dir.path().join("tasks.jsonl"));
        std::fs::create_dir(&folder).expect("mkdir");
        std::fs::write(&file, "{}").expect("write");
        let bwrap = Bwrap::new("/usr/bin/bwrap".into(), &[folder.clone(), file.clone()]);
        let first = args_of(&bwrap, false);
        let shown = |path: &Path| path.display().to_string();
        assert!(first.contains(&shown(&folder)) && first.contains(&shown(&file)));
        // Gone now, yet the next command's line is the same: nothing was
        // looked up again.
        std::fs::remove_dir(&folder).expect("rmdir");
        std::fs::remove_file(&file).expect("rm");
        assert_eq!(args_of(&bwrap, false), first);
    }

    #[test]
    fn none_runs_bash_directly() {
        let sandbox = Sandbox::None;
        let confinement = Confinement {
            sandbox: &sandbox,
            writable: Path::new("/w"),
            network: false,
        };
        let (program, args) = confinement.command_line("echo hi", Path::new("/w"));
        assert_eq!(program, "bash");
        assert_eq!(args, vec![OsString::from("-c"), OsString::from("echo hi")]);
    }
}
