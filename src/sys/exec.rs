//! The only place a child process is spawned: agent commands, setup commands
//! and test commands all go through [`run_command`] (which has
//! [`crate::sys::spawn`] clone those with limits, in one exec).
//!
//! Owns the child's environment (cleared to an allowlist: the API key never
//! reaches a command), its process group, the combined stdout+stderr pipe read
//! into a capped buffer while waiting, the timeout, and the clean-up of
//! processes a task leaves behind. It does not decide what the model sees of
//! the output (that is the bash tool's job) nor what a command means.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::process::Command;

use crate::sys::limits::ChildSetup;
use crate::sys::spawn;

/// After the shell exits, how long a background process holding the output
/// pipe may keep the command waiting (`sleep 600 & echo started`).
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(250);
/// After a timeout kill, how long to keep reading what is left in the pipe.
const DRAIN_AFTER_KILL: Duration = Duration::from_secs(1);
/// Output kept per command: this much from the start and this much from the
/// end (1 MiB in all); the middle is counted, not kept.
pub(crate) const KEEP_HEAD_BYTES: usize = 512 * 1024;
pub(crate) const KEEP_TAIL_BYTES: usize = 512 * 1024;

/// The variable that marks every process a task starts, so the processes it
/// leaves behind can be found even after they left its process group.
pub(crate) const TASK_MARK_VAR: &str = "ONEBASH_TASK";

/// The environment a command starts from: nothing of the harness's own
/// environment but a short allowlist, plus fixed settings that keep tools
/// non-interactive.
#[derive(Debug, Clone)]
pub(crate) struct CommandEnv {
    vars: Vec<(String, String)>,
    /// The names whose values describe this machine (PATH, HOME, the
    /// locale, certificate bundles: copied from the harness or defaults
    /// for it), which a container image sets for itself.
    machine: Vec<String>,
}

/// Variables copied from the harness's environment when set.
const PASSED_THROUGH: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "PYENV_ROOT",
    "CARGO_HOME",
    "RUSTUP_HOME",
];

/// Where certificate bundles are: configuration, not secrets, and needed by
/// tools that reach the network in some environments.
const CA_SETTINGS: &[&str] = &[
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "GIT_SSL_CAINFO",
    "PIP_CERT",
];

/// Proxy settings, which may carry credentials: given only to commands
/// that have the network (setup_command, --allow-network).
const PROXY_SETTINGS: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
];

/// Fixed settings: no pager, no colour codes from progress bars, no prompts.
const FIXED: &[(&str, &str)] = &[
    ("TERM", "dumb"),
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("MANPAGER", "cat"),
    ("LESS", "-R"),
    ("PIP_PROGRESS_BAR", "off"),
    ("TQDM_DISABLE", "1"),
    ("GIT_TERMINAL_PROMPT", "0"),
];

impl CommandEnv {
    /// The allowlisted environment for one task, marked with `task_mark`.
    pub(crate) fn for_task(task_mark: &str) -> CommandEnv {
        let mut vars: Vec<(String, String)> = PASSED_THROUGH
            .iter()
            .chain(CA_SETTINGS)
            .filter_map(|name| std::env::var(name).ok().map(|v| ((*name).to_owned(), v)))
            .collect();
        if !vars.iter().any(|(k, _)| k == "PATH") {
            vars.push((
                "PATH".to_owned(),
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_owned(),
            ));
        }
        if !vars.iter().any(|(k, _)| k == "LANG") {
            vars.push(("LANG".to_owned(), "C.UTF-8".to_owned()));
        }
        let machine = vars.iter().map(|(k, _)| k.clone()).collect();
        vars.extend(
            FIXED
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        vars.push((TASK_MARK_VAR.to_owned(), task_mark.to_owned()));
        CommandEnv { vars, machine }
    }

    /// The environment of a container engine's client (`podman exec`),
    /// not of the command it runs: onebash's own environment (the API
    /// keys were taken out of it at start-up, see `config::Secrets`),
    /// which says where the engine is (`DOCKER_HOST`, `XDG_RUNTIME_DIR`),
    /// plus the task's mark, so a client left behind is found.
    pub(crate) fn engine_client(task_mark: &str) -> CommandEnv {
        let mut vars: Vec<(String, String)> = std::env::vars()
            .filter(|(k, _)| k != TASK_MARK_VAR)
            .collect();
        vars.push((TASK_MARK_VAR.to_owned(), task_mark.to_owned()));
        CommandEnv {
            vars,
            machine: Vec::new(),
        }
    }

    /// The variables onebash itself sets (the fixed settings, the task's
    /// mark, the test settings, the proxies of a command with the
    /// network), without those that describe this machine: what a command
    /// in a container gets on top of its image's own environment.
    pub(crate) fn harness_vars(&self) -> impl Iterator<Item = &(String, String)> {
        self.vars
            .iter()
            .filter(|(k, _)| !self.machine.iter().any(|m| m == k))
    }

    /// The same environment plus the proxy settings, for a command that
    /// has the network.
    pub(crate) fn with_network(&self) -> CommandEnv {
        let mut vars = self.vars.clone();
        vars.extend(
            PROXY_SETTINGS
                .iter()
                .filter_map(|name| std::env::var(name).ok().map(|v| ((*name).to_owned(), v))),
        );
        CommandEnv {
            vars,
            machine: self.machine.clone(),
        }
    }

    /// The same environment with one variable set (replaced if present).
    pub(crate) fn with(&self, key: &str, value: &str) -> CommandEnv {
        let mut vars: Vec<(String, String)> = self
            .vars
            .iter()
            .filter(|(k, _)| k != key)
            .cloned()
            .collect();
        vars.push((key.to_owned(), value.to_owned()));
        // Set by the harness now, whatever the machine had.
        let machine = self.machine.iter().filter(|m| *m != key).cloned().collect();
        CommandEnv { vars, machine }
    }

    pub(crate) fn vars(&self) -> &[(String, String)] {
        &self.vars
    }
}

/// A process to start, as an environment (env/) built it: the program and
/// its arguments (bash, or bwrap around bash), where, with what, and for
/// how long.
#[derive(Debug)]
pub(crate) struct Spawn<'a> {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub cwd: &'a Path,
    pub env: &'a CommandEnv,
    /// Limits the child sets on itself before exec (rlimits, cgroup).
    pub child: &'a ChildSetup,
    pub timeout: Duration,
}

/// How a command ended.
#[derive(Debug)]
pub(crate) struct CommandOutcome {
    /// The exit code as a shell reports it: the code, or 128 + signal when the
    /// process was killed by a signal.
    pub exit_code: i32,
    /// The signal that killed the shell, if one did.
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub duration: Duration,
    /// stdout and stderr, interleaved as written.
    pub output: CapturedOutput,
    /// What the environment had to do around the command, for the
    /// trajectory: the channel into its container lost and reopened, or
    /// one exec per command instead.
    pub notice: Option<String>,
}

/// The command could not be started at all.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("failed to create the output pipe: {0}")]
    Pipe(std::io::Error),
    #[error("failed to start {program} in {cwd}: {source}")]
    Spawn {
        program: String,
        cwd: String,
        source: std::io::Error,
    },
}

/// Runs what `spec` names in its own process group with stdin from
/// /dev/null and the given environment, reading its output while waiting.
/// At the timeout the whole group is killed; a process that escaped the
/// group and still holds the pipe delays the return by at most
/// [`DRAIN_AFTER_KILL`].
pub(crate) async fn run_command(spec: Spawn<'_>) -> Result<CommandOutcome, ExecError> {
    let (reader, writer) = std::io::pipe().map_err(ExecError::Pipe)?;
    let writer_for_stderr = writer.try_clone().map_err(ExecError::Pipe)?;
    let start = Instant::now();
    let (mut child, _starter) = start_child(&spec, writer, writer_for_stderr).await?;
    let pgid = child.id();
    let mut pipe = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(reader))
        .map_err(ExecError::Pipe)?;

    let mut output = CapturedOutput::new(KEEP_HEAD_BYTES, KEEP_TAIL_BYTES);
    let mut chunk = vec![0u8; 64 * 1024];
    let deadline = tokio::time::Instant::from_std(start + spec.timeout);
    let mut status = None;
    let mut timed_out = false;
    let mut eof = false;
    // Until the shell exits: read, wait, or kill at the deadline.
    while status.is_none() {
        tokio::select! {
            read = pipe.read(&mut chunk), if !eof => match read {
                Ok(0) | Err(_) => eof = true,
                Ok(n) => output.push(&chunk[..n]),
            },
            waited = child.wait() => status = Some(waited),
            _ = tokio::time::sleep_until(deadline), if !timed_out => {
                timed_out = true;
                kill_group(pgid);
            }
        }
    }
    // The shell is gone; a background child may still hold the pipe open.
    let drain = if timed_out {
        DRAIN_AFTER_KILL
    } else {
        DRAIN_AFTER_EXIT
    };
    let drain_deadline = tokio::time::Instant::now() + drain;
    while !eof {
        tokio::select! {
            read = pipe.read(&mut chunk) => match read {
                Ok(0) | Err(_) => eof = true,
                Ok(n) => output.push(&chunk[..n]),
            },
            _ = tokio::time::sleep_until(drain_deadline) => break,
        }
    }
    let duration = start.elapsed();
    let (exit_code, signal) = exit_of(status);
    Ok(CommandOutcome {
        exit_code,
        signal,
        timed_out,
        duration,
        output,
        notice: None,
    })
}

/// A long-lived child whose stdin, stdout and stderr onebash holds: the
/// channel into a container (env/channel.rs), whose protocol is the
/// caller's. Killed with its process group when dropped.
pub(crate) struct Server {
    pub child: tokio::process::Child,
    pub stdin: tokio::process::ChildStdin,
    pub stdout: tokio::process::ChildStdout,
    /// Taken by whoever reads it (it must be read, or the child blocks).
    pub stderr: Option<tokio::process::ChildStderr>,
    pgid: Option<u32>,
    _starter: Starter,
}

impl Server {
    /// Kills its process group now (the drop does too).
    pub(crate) fn kill(&mut self) {
        kill_group(self.pgid);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        kill_group(self.pgid);
    }
}

/// Starts what `spec` names as a [`Server`]: its own process group, the
/// given environment, pipes on all three descriptors; `spec.timeout` is
/// not used (the caller times each exchange). With limits it goes
/// through the exec helper, which leaves stdin to it and tells a failure
/// on stderr before it exits.
pub(crate) async fn start_server(spec: Spawn<'_>) -> Result<Server, ExecError> {
    let (program, args) = if spec.child.is_empty() {
        (spec.program.clone(), spec.args.clone())
    } else {
        let mut args = spec.child.helper_args_keeping_stdin();
        args.push(spec.program.clone());
        args.extend(spec.args.iter().cloned());
        (OsString::from(OWN_PROGRAM), args)
    };
    let mut cmd = Command::new(&program);
    cmd.args(&args)
        .current_dir(spec.cwd)
        .env_clear()
        .envs(spec.env.vars().iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let spawn_error = |source| spawn_error(&spec, source);
    let (mut child, starter) = spawn_off_worker(cmd).await.map_err(spawn_error)?;
    let pgid = child.id();
    let pipes = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let (Some(stdin), Some(stdout), Some(stderr)) = pipes else {
        kill_group(pgid);
        return Err(spawn_error(std::io::Error::other(
            "its pipes were not made",
        )));
    };
    Ok(Server {
        child,
        stdin,
        stdout,
        stderr: Some(stderr),
        pgid,
        _starter: starter,
    })
}

/// `spec` could not start.
fn spawn_error(spec: &Spawn<'_>, source: std::io::Error) -> ExecError {
    ExecError::Spawn {
        program: spec.program.to_string_lossy().into_owned(),
        cwd: spec.cwd.display().to_string(),
        source,
    }
}

/// Whether `clone` with a pidfd works here (kernel 5.2 or later): until it
/// is found not to, commands with limits start by [`spawn::launch`].
static CLONE_WORKS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Starts what `spec` names with its output to `writer` (stdout and
/// stderr). With limits, by [`spawn::launch`] in one exec, or where the
/// kernel cannot, through the exec helper; without, by tokio's spawn.
async fn start_child(
    spec: &Spawn<'_>,
    writer: std::io::PipeWriter,
    writer_for_stderr: std::io::PipeWriter,
) -> Result<(Running, Starter), ExecError> {
    let spawn_error = |source| spawn_error(spec, source);
    use std::sync::atomic::Ordering;
    if !spec.child.is_empty() && CLONE_WORKS.load(Ordering::Relaxed) {
        let launch = spawn::Launch {
            program: spec.program.clone(),
            args: spec.args.clone(),
            cwd: spec.cwd.to_owned(),
            env: spec.env.vars().to_vec(),
            stdout: OwnedFd::from(writer.try_clone().map_err(ExecError::Pipe)?),
            stderr: OwnedFd::from(writer_for_stderr.try_clone().map_err(ExecError::Pipe)?),
            child: spec.child.clone(),
        };
        match launch_off_worker(launch).await {
            Ok((child, starter)) => return Ok((Running::Cloned(child), starter)),
            Err(spawn::LaunchError::Unsupported) => CLONE_WORKS.store(false, Ordering::Relaxed),
            Err(spawn::LaunchError::Start(source)) => return Err(spawn_error(source)),
            Err(spawn::LaunchError::Child(message)) => {
                return Err(spawn_error(std::io::Error::other(message)));
            }
        }
    }
    start_through_helper(spec, writer, writer_for_stderr).await
}

/// [`start_child`] by tokio's spawn: through the exec helper when `spec`
/// has limits (kernels without `CLONE_PIDFD`), else the program itself.
async fn start_through_helper(
    spec: &Spawn<'_>,
    writer: std::io::PipeWriter,
    writer_for_stderr: std::io::PipeWriter,
) -> Result<(Running, Starter), ExecError> {
    let spawn_error = |source| spawn_error(spec, source);
    let (program, args, stdin, helper) = through_helper(spec)?;
    let mut cmd = Command::new(&program);
    cmd.args(&args)
        .current_dir(spec.cwd)
        .env_clear()
        .envs(spec.env.vars().iter().map(|(k, v)| (k, v)))
        .stdin(stdin)
        .stdout(Stdio::from(OwnedFd::from(writer)))
        .stderr(Stdio::from(OwnedFd::from(writer_for_stderr)))
        .process_group(0)
        .kill_on_drop(true);
    let (mut child, starter) = spawn_off_worker(cmd).await.map_err(spawn_error)?;
    if let Some(report) = helper {
        let failed = helper_failure(report).await.map_err(ExecError::Pipe)?;
        if let Some(message) = failed {
            kill_group(child.id());
            let _ = child.wait().await;
            return Err(spawn_error(std::io::Error::other(message)));
        }
    }
    Ok((Running::Std(child), starter))
}

/// A command's process, however it was started.
enum Running {
    Std(tokio::process::Child),
    Cloned(spawn::Cloned),
}

impl Running {
    fn id(&self) -> Option<u32> {
        match self {
            Running::Std(child) => child.id(),
            Running::Cloned(child) => Some(child.id()),
        }
    }

    /// Cancel-safe, as tokio's.
    async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        match self {
            Running::Std(child) => child.wait().await,
            Running::Cloned(child) => child.wait().await,
        }
    }
}

/// [`spawn::launch`] off the async workers, for the reasons given at
/// [`spawn_off_worker`] (which also holds for the clone: the calling
/// thread waits for the child's exec, the cgroup join included), on one of
/// [`LAUNCHERS`]' threads. They never end, so a parent death signal set in
/// the child (bwrap's `--die-with-parent`) fires only when onebash does,
/// and a command no longer pays a thread's start and end.
async fn launch_off_worker(
    launch: spawn::Launch,
) -> Result<(spawn::Cloned, Starter), spawn::LaunchError> {
    let (sent, launched) = tokio::sync::oneshot::channel();
    LAUNCHERS
        .submit(LaunchJob {
            launch,
            runtime: tokio::runtime::Handle::current(),
            sent,
        })
        .map_err(spawn::LaunchError::Start)?;
    let child = launched.await.unwrap_or_else(|_| {
        Err(spawn::LaunchError::Start(std::io::Error::other(
            "the thread starting the command ended",
        )))
    })?;
    Ok((child, Starter::none()))
}

/// One command for a launcher thread to start.
struct LaunchJob {
    launch: spawn::Launch,
    runtime: tokio::runtime::Handle,
    sent: tokio::sync::oneshot::Sender<Result<spawn::Cloned, spawn::LaunchError>>,
}

/// Threads that start commands by [`spawn::launch`]: as many as have been
/// busy at once, each waiting for the next job once it is done.
struct Launchers {
    jobs: std::sync::mpsc::Sender<LaunchJob>,
    queue: std::sync::Arc<std::sync::Mutex<std::sync::mpsc::Receiver<LaunchJob>>>,
    idle: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

static LAUNCHERS: std::sync::LazyLock<Launchers> = std::sync::LazyLock::new(|| {
    let (jobs, queue) = std::sync::mpsc::channel();
    Launchers {
        jobs,
        queue: std::sync::Arc::new(std::sync::Mutex::new(queue)),
        idle: std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0)),
    }
});

impl Launchers {
    /// Queues `job`, with one more thread when none is idle.
    fn submit(&self, job: LaunchJob) -> std::io::Result<()> {
        use std::sync::atomic::Ordering;
        let claimed = self
            .idle
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok();
        if !claimed {
            let (queue, idle) = (
                std::sync::Arc::clone(&self.queue),
                std::sync::Arc::clone(&self.idle),
            );
            std::thread::Builder::new()
                .name("onebash-spawn".to_owned())
                .spawn(move || launcher(&queue, &idle))?;
        }
        // The queue is never closed: its receiver lives in this static.
        self.jobs
            .send(job)
            .map_err(|_| std::io::Error::other("the threads starting commands ended"))
    }
}

/// A launcher thread: starts one job at a time, for ever. A thread that
/// finds itself idle counts itself so, and the next job is its.
fn launcher(
    queue: &std::sync::Mutex<std::sync::mpsc::Receiver<LaunchJob>>,
    idle: &std::sync::atomic::AtomicUsize,
) {
    loop {
        let job = {
            let queue = queue
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            queue.recv()
        };
        let Ok(LaunchJob {
            launch,
            runtime,
            sent,
        }) = job
        else {
            return;
        };
        let started = {
            // The child's pidfd is watched by this runtime's reactor.
            let _entered = runtime.enter();
            spawn::launch(&launch)
        };
        // Our copies of the pipe's write end: closed now.
        drop(launch);
        let _ = sent.send(started);
        idle.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// The program, arguments and stdin that start `spec`, and the helper's
/// status pipe if it goes through it. With limits where the kernel cannot
/// clone with a pidfd (see [`start_child`]), through onebash's own exec
/// helper (see limits.rs): no closure between fork and exec, so the
/// child starts by posix_spawn. The helper reports on its stdin whether
/// it got as far as the command: a message when it failed, end-of-file
/// once the command's exec closed it (then stdin is /dev/null, as
/// without it).
fn through_helper(
    spec: &Spawn<'_>,
) -> Result<(OsString, Vec<OsString>, Stdio, Option<std::io::PipeReader>), ExecError> {
    if spec.child.is_empty() {
        return Ok((spec.program.clone(), spec.args.clone(), Stdio::null(), None));
    }
    let (report, reporter) = std::io::pipe().map_err(ExecError::Pipe)?;
    let mut args = spec.child.helper_args();
    args.push(spec.program.clone());
    args.extend(spec.args.iter().cloned());
    let stdin = Stdio::from(OwnedFd::from(reporter));
    Ok((OsString::from(OWN_PROGRAM), args, stdin, Some(report)))
}

/// The exit code and the signal, if one ended it, of what `wait` said;
/// 128 + the signal as the code, as a shell gives it.
fn exit_of(status: Option<std::io::Result<std::process::ExitStatus>>) -> (i32, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Some(Ok(status)) => match (status.code(), status.signal()) {
            (Some(code), _) => (code, None),
            (None, Some(sig)) => (128 + sig, Some(sig)),
            (None, None) => (-1, None),
        },
        // Waiting failed: the child is unknown to us; report it as killed.
        _ => (-1, None),
    }
}

/// What the exec helper wrote on its status pipe before it closed it:
/// nothing when it started the command.
async fn helper_failure(report: std::io::PipeReader) -> std::io::Result<Option<String>> {
    let mut report = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(report))?;
    let mut message = Vec::new();
    report.read_to_end(&mut message).await?;
    Ok((!message.is_empty()).then(|| String::from_utf8_lossy(&message).trim().to_owned()))
}

/// This very program, whichever file it was started from, even if that
/// file was replaced since (the exec helper must be this version).
const OWN_PROGRAM: &str = "/proc/self/exe";

/// Starts `cmd` on a thread of its own. `fork` copies the page tables of
/// the whole process and waits for the page faults of every other thread:
/// with 32 checkouts in flight it took up to 0.7 s here, and on an async
/// worker it would hold up every other task's timers and output reads
/// (`scripts/bench.sh` section `lateness`). Not a blocking thread of
/// [`crate::sys::blocking`]: the child would inherit its lower priority.
///
/// The thread lives until the returned [`Starter`] is dropped: a parent
/// death signal (bwrap's `--die-with-parent`) fires when the *thread* that
/// started the child ends, so it must outlive the command.
async fn spawn_off_worker(mut cmd: Command) -> std::io::Result<(tokio::process::Child, Starter)> {
    let runtime = tokio::runtime::Handle::current();
    let (sent, spawned) = tokio::sync::oneshot::channel();
    let (done, ended) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("onebash-spawn".to_owned())
        .spawn(move || {
            let started = {
                // The child is watched by this runtime's process driver.
                let _entered = runtime.enter();
                cmd.spawn()
            };
            // The command holds our copies of the pipe's write end: drop it
            // so the pipe reaches end-of-file once the child's are closed.
            drop(cmd);
            let waits = started.is_ok();
            let _ = sent.send(started);
            if waits {
                let _ = ended.blocking_recv();
            }
        })?;
    let child = spawned.await.unwrap_or_else(|_| {
        Err(std::io::Error::other(
            "the thread starting the command ended",
        ))
    })?;
    Ok((child, Starter { _done: Some(done) }))
}

/// Keeps the thread that started a command until the command is over.
struct Starter {
    _done: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Starter {
    /// For a command whose starting thread outlives it anyway.
    fn none() -> Starter {
        Starter { _done: None }
    }
}

/// A tool of the harness's own (git, bwrap's probe, a container engine's
/// client) that could not run or failed: what ran, and how it ended.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("failed to start {}: {source}", program.display())]
    Start {
        program: PathBuf,
        source: std::io::Error,
    },
    #[error("failed to wait for {}: {source}", program.display())]
    Wait {
        program: PathBuf,
        source: std::io::Error,
    },
    /// A client whose progress goes to onebash's stderr, which could not
    /// be handed to it.
    #[error("failed to pass on stderr to {}: {source}", program.display())]
    Stderr {
        program: PathBuf,
        source: std::io::Error,
    },
    /// It ran and failed: `command` names it (the program, or a client's
    /// whole command line in backquotes), `stderr` what it said, trimmed.
    #[error("{command} exited with {status}: {stderr}")]
    Failed {
        command: String,
        status: std::process::ExitStatus,
        stderr: String,
    },
}

/// Runs a short program to completion with an empty environment and no
/// input, for start-up probes (is bwrap usable?). Synchronous: it runs
/// before the async runtime starts.
pub(crate) fn probe(program: &Path, args: &[std::ffi::OsString]) -> Result<(), ToolError> {
    run_tool(program, args, b"").map(|_| ())
}

/// Runs one of the harness's own tools to completion (`git pack-objects`
/// for the checkout's object stores; bwrap's start-up probe), blocking:
/// an empty environment but PATH, `input` on stdin, stdout returned.
/// Callers on the async runtime call it from a blocking thread.
pub(crate) fn run_tool(
    program: &Path,
    args: &[std::ffi::OsString],
    input: &[u8],
) -> Result<Vec<u8>, ToolError> {
    use std::io::Write;
    let mut child = std::process::Command::new(program)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| ToolError::Start {
            program: program.to_owned(),
            source,
        })?;
    // Written from a thread of its own: a tool that writes much before it
    // has read all its input must not dead-lock against this write.
    let writer = child.stdin.take().map(|mut stdin| {
        let input = input.to_vec();
        std::thread::spawn(move || stdin.write_all(&input))
    });
    let output = child.wait_with_output().map_err(|source| ToolError::Wait {
        program: program.to_owned(),
        source,
    })?;
    // A tool that exits without reading its input breaks the pipe: its exit
    // status says what went wrong, not the write.
    if let Some(writer) = writer {
        let _ = writer.join();
    }
    stdout_of(program.display().to_string(), output)
}

/// A finished tool's stdout, or, when it failed, `COMMAND exited with
/// STATUS: STDERR`.
fn stdout_of(command: String, output: std::process::Output) -> Result<Vec<u8>, ToolError> {
    if output.status.success() {
        return Ok(output.stdout);
    }
    Err(ToolError::Failed {
        command,
        status: output.status,
        stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
    })
}

/// Runs a container engine's client to completion (`podman run -d`,
/// `image inspect`, `rm -f`), blocking: onebash's own environment (no API
/// key: they were taken out at start-up), no input, stdout returned.
/// `show_progress` sends its stdout and stderr to onebash's stderr instead
/// of capturing them (a pull's progress). It starts in `dir` where one is
/// given, else in onebash's current folder. Callers on the async runtime
/// call it from a blocking thread.
pub(crate) fn run_client(
    program: &Path,
    args: &[OsString],
    dir: Option<&Path>,
    show_progress: bool,
) -> Result<Vec<u8>, ToolError> {
    let mut command = std::process::Command::new(program);
    command.args(args).stdin(Stdio::null());
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    if show_progress {
        use std::os::fd::AsFd;
        let stderr = std::io::stderr()
            .as_fd()
            .try_clone_to_owned()
            .map_err(|source| ToolError::Stderr {
                program: program.to_owned(),
                source,
            })?;
        command.stdout(Stdio::from(stderr)).stderr(Stdio::inherit());
    } else {
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
    }
    let output = command.output().map_err(|source| ToolError::Start {
        program: program.to_owned(),
        source,
    })?;
    let words: Vec<String> = std::iter::once(program.as_os_str())
        .chain(args.iter().map(OsString::as_os_str))
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    stdout_of(format!("`{}`", words.join(" ")), output)
}

/// SIGKILL to a whole process group. A group that is already gone is fine.
pub(crate) fn kill_group(pgid: Option<u32>) {
    let Some(pgid) = pgid.and_then(|p| libc::pid_t::try_from(p).ok()) else {
        return;
    };
    if pgid <= 1 {
        return;
    }
    // SAFETY: killpg has no memory-safety preconditions; a stale group id
    // fails with ESRCH, which is what we want to ignore.
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
}

/// Kills every process that carries `TASK_MARK_VAR=task_mark` in its
/// environment: what a task's commands left running, including daemons that
/// called setsid. Repeats in rounds until two in a row find none, so a
/// process forked during the scan is caught too, and so is one caught in
/// the middle of an exec, whose environment reads as empty for that
/// moment. Returns how many processes were signalled.
pub(crate) fn kill_marked_processes(task_mark: &str) -> usize {
    kill_processes_with(TASK_MARK_VAR, task_mark)
}

/// [`kill_marked_processes`] for any variable: every process of this
/// machine whose environment holds `var=value`.
///
/// Reading another process's environment is the sweep's cost (the kernel
/// maps its memory), so a round after the first reads only the processes
/// it could have missed: those it has not read yet (forked since, their
/// pid below or above where the scan was) and those whose environment read
/// as empty (in the middle of an exec, or kernel threads, cheap to read).
/// A process read with an environment that lacks the mark cannot gain it
/// later but by an exec given the mark on purpose.
pub(crate) fn kill_processes_with(var: &str, value: &str) -> usize {
    let needle = format!("{var}={value}\0");
    let finder = memchr::memmem::Finder::new(needle.as_bytes());
    let own_pid = std::process::id();
    let mut unmarked = std::collections::HashSet::new();
    let mut killed = 0;
    let mut empty = 0;
    for _round in 0..10 {
        let mut found = 0;
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return killed;
        };
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|name| name.parse::<u32>().ok())
            else {
                continue;
            };
            if pid == own_pid || unmarked.contains(&pid) {
                continue;
            }
            let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
                continue;
            };
            if finder.find(&environ).is_none() {
                if !environ.is_empty() {
                    unmarked.insert(pid);
                }
                continue;
            }
            if let Ok(pid) = libc::pid_t::try_from(pid) {
                // SAFETY: kill has no memory-safety preconditions.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
                found += 1;
            }
        }
        killed += found;
        if found == 0 {
            empty += 1;
            if empty == 2 {
                break;
            }
        } else {
            empty = 0;
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    killed
}

/// A command's output, bounded: the first `head_cap` bytes, the last
/// `tail_cap` bytes, and counts of everything.
#[derive(Debug, Clone)]
pub(crate) struct CapturedOutput {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_cap: usize,
    tail_cap: usize,
    total_bytes: u64,
    total_lines: u64,
}

impl CapturedOutput {
    pub(crate) fn new(head_cap: usize, tail_cap: usize) -> CapturedOutput {
        CapturedOutput {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_cap,
            tail_cap,
            total_bytes: 0,
            total_lines: 0,
        }
    }

    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        self.total_bytes += bytes.len() as u64;
        self.total_lines += bytes.iter().filter(|&&b| b == b'\n').count() as u64;
        let head_room = self.head_cap - self.head.len();
        if head_room > 0 {
            let take = head_room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.len() >= self.tail_cap {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.tail_cap..]);
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_cap);
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
    }

    pub(crate) fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    pub(crate) fn total_lines(&self) -> u64 {
        self.total_lines
    }

    /// Bytes received but not kept (the middle of a long output).
    pub(crate) fn omitted_bytes(&self) -> u64 {
        self.total_bytes - (self.head.len() + self.tail.len()) as u64
    }

    /// The kept head and tail, decoded lossily (invalid UTF-8 becomes U+FFFD).
    pub(crate) fn head_text(&self) -> String {
        String::from_utf8_lossy(&self.head).into_owned()
    }

    pub(crate) fn tail_text(&self) -> String {
        let (a, b) = self.tail.as_slices();
        let mut bytes = Vec::with_capacity(a.len() + b.len());
        bytes.extend_from_slice(a);
        bytes.extend_from_slice(b);
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Everything kept, as one text, with a marker where bytes were omitted.
    pub(crate) fn to_text(&self) -> String {
        let omitted = self.omitted_bytes();
        if omitted == 0 {
            // Nothing dropped: decode head and tail together so a character
            // split between them stays whole.
            let mut bytes = self.head.clone();
            bytes.extend(self.tail.iter());
            return String::from_utf8_lossy(&bytes).into_owned();
        }
        format!(
            "{}\n[onebash: {omitted} bytes omitted]\n{}",
            self.head_text(),
            self.tail_text()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captured_output_keeps_head_and_tail_and_counts_the_rest() {
        let mut out = CapturedOutput::new(4, 4);
        out.push(b"abc");
        out.push(b"defgh\n");
        out.push(b"ijklmnop");
        assert_eq!(out.total_bytes(), 17);
        assert_eq!(out.total_lines(), 1);
        assert_eq!(out.head_text(), "abcd");
        assert_eq!(out.tail_text(), "mnop");
        assert_eq!(out.omitted_bytes(), 9);
        assert_eq!(out.to_text(), "abcd\n[onebash: 9 bytes omitted]\nmnop");
    }

    #[test]
    fn captured_output_small_is_exact() {
        let mut out = CapturedOutput::new(4, 4);
        out.push("héllo".as_bytes());
        assert_eq!(out.omitted_bytes(), 0);
        assert_eq!(out.to_text(), "héllo");
    }

    #[test]
    fn env_is_an_allowlist() {
        let env = CommandEnv::for_task("mark");
        let names: Vec<&str> = env.vars().iter().map(|(k, _)| k.as_str()).collect();
        assert!(names.contains(&"PATH"));
        assert!(names.contains(&TASK_MARK_VAR));
        assert!(
            !names
                .iter()
                .any(|n| n.contains("KEY") || n.contains("TOKEN"))
        );
    }

    fn spec<'a>(command: &str, env: &'a CommandEnv, timeout: Duration) -> Spawn<'a> {
        static NO_LIMITS: std::sync::OnceLock<ChildSetup> = std::sync::OnceLock::new();
        Spawn {
            program: "bash".into(),
            args: vec!["-c".into(), command.into()],
            cwd: Path::new("/"),
            env,
            child: NO_LIMITS.get_or_init(ChildSetup::none),
            timeout,
        }
    }

    #[tokio::test]
    async fn exit_code_and_interleaved_output() {
        let env = CommandEnv::for_task("t-exit");
        let out = run_command(spec(
            "echo out; echo err >&2; exit 3",
            &env,
            Duration::from_secs(10),
        ))
        .await
        .expect("runs");
        assert_eq!(out.exit_code, 3);
        assert!(!out.timed_out);
        assert_eq!(out.output.to_text(), "out\nerr\n");
    }

    #[tokio::test]
    async fn stdin_is_empty_and_invalid_utf8_is_lossy() {
        let env = CommandEnv::for_task("t-stdin");
        let out = run_command(spec("cat; printf 'a\\xffb'", &env, Duration::from_secs(10)))
            .await
            .expect("runs");
        assert_eq!(out.output.to_text(), "a\u{fffd}b");
    }

    #[tokio::test]
    async fn timeout_kills_the_group() {
        let env = CommandEnv::for_task("t-timeout");
        // The sleep never ends on its own within the test; the timeout is
        // far above what `echo` needs, however loaded the machine.
        let out = run_command(spec(
            "echo before; sleep 600; echo after",
            &env,
            Duration::from_secs(2),
        ))
        .await
        .expect("runs");
        assert!(out.timed_out);
        assert_eq!(out.signal, Some(libc::SIGKILL));
        assert_eq!(out.output.to_text(), "before\n");
        // At least the timeout; the upper bound is a hang guard.
        assert!(out.duration >= Duration::from_secs(2), "{:?}", out.duration);
        assert!(
            out.duration < Duration::from_secs(120),
            "{:?}",
            out.duration
        );
    }

    #[tokio::test]
    async fn background_child_holding_the_pipe_does_not_hold_the_command() {
        let mark = "t-background-child";
        let env = CommandEnv::for_task(mark);
        let out = run_command(spec(
            "sleep 600 & echo started",
            &env,
            Duration::from_secs(60),
        ))
        .await
        .expect("runs");
        assert_eq!(out.exit_code, 0);
        assert_eq!(out.output.to_text(), "started\n");
        // Held by the sleep, it would have timed out; the bound on the
        // duration is a hang guard, far below the sleep's ten minutes.
        assert!(!out.timed_out);
        assert!(
            out.duration < Duration::from_secs(120),
            "{:?}",
            out.duration
        );
        assert!(
            kill_marked_processes(mark) >= 1,
            "the sleep was left behind and found"
        );
        // A killed process may take a moment to go; wait for it (a hang
        // guard, not a measure).
        let deadline = Instant::now() + Duration::from_secs(30);
        while kill_marked_processes(mark) != 0 {
            assert!(Instant::now() < deadline, "the sleep survived");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
