//! Starts a task's command with its limits (cgroups, rlimits) in one exec:
//! `clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD)`, as posix_spawn does (no
//! copy of onebash's page tables, unlike `fork`), then in the child, still
//! on onebash's memory: its own process group, stdio, folder, the limits
//! (`ChildSetup::apply`, async-signal-safe) and the exec of the command.
//!
//! It replaces the exec helper (`onebash __exec-limited`, limits.rs) for
//! `exec::run_command`, which cost a second exec per command: on the
//! project's VM every exec of a dynamically linked program spends most of
//! its start in the loader's CPUID probes, which trap to the hypervisor
//! (profile in docs/guides/performance.md). Where the kernel lacks
//! `CLONE_PIDFD` (before 5.2), [`launch`] says so and the caller uses the
//! helper. Owns the child until it is reaped: a [`Cloned`] dropped before
//! that kills the child and reaps it.

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use crate::sys::limits::ChildSetup;

/// Stack of the cloned child until its exec: it only makes system calls.
const CHILD_STACK_BYTES: usize = 256 * 1024;

/// What to start: the program as the command names it (`bash`), found on
/// the PATH of `env` as execvp would, with `args`, in `cwd`. Owned: it is
/// started from a thread of its own (exec.rs).
pub(crate) struct Launch {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    /// stdout and stderr (closed here once the child has them); stdin is
    /// /dev/null.
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    pub child: ChildSetup,
}

/// Why [`launch`] started nothing.
#[derive(Debug)]
pub(crate) enum LaunchError {
    /// This kernel cannot clone with a pidfd: start it another way.
    Unsupported,
    /// Starting failed as a spawn fails (a missing folder, no memory).
    Start(std::io::Error),
    /// The child started but could not set its limits or run the program;
    /// the text is the exec helper's for the same failure.
    Child(String),
}

/// A child started by [`launch`], watched through its pidfd.
pub(crate) struct Cloned {
    pid: libc::pid_t,
    pidfd: AsyncFd<OwnedFd>,
    reaped: bool,
}

/// What the child writes (shared memory) when it fails before its exec.
#[derive(Default)]
struct Failure {
    /// 1: setting the limits, 2: the exec, 3: the folder, 4: stdio or the
    /// process group.
    stage: i32,
    errno: i32,
}

/// Everything the child needs, made before the clone: it must not
/// allocate.
struct Prepared<'a> {
    /// The program, or the errno of looking for it (reported after the
    /// limits, in the order of the exec helper).
    path: Result<CString, i32>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    cwd: CString,
    stdin: RawFd,
    stdout: RawFd,
    stderr: RawFd,
    child: &'a ChildSetup,
    failure: Failure,
}

impl Cloned {
    pub(crate) fn id(&self) -> u32 {
        self.pid.unsigned_abs()
    }

    /// Waits for the child to end and reaps it. Cancel-safe.
    pub(crate) async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        if self.reaped {
            return Err(std::io::Error::other("the command was already waited for"));
        }
        loop {
            if let Some(status) = try_reap(self.pid)? {
                self.reaped = true;
                return Ok(status);
            }
            // The pidfd becomes readable when the child ends.
            self.pidfd.readable().await?.clear_ready();
        }
    }
}

/// The status of `pid`, our child, if it has ended (then it is reaped).
fn try_reap(pid: libc::pid_t) -> std::io::Result<Option<ExitStatus>> {
    let mut status = 0;
    // SAFETY: waitpid on our own, not yet reaped child.
    match unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } {
        0 => Ok(None),
        got if got == pid => Ok(Some(ExitStatus::from_raw(status))),
        _ => Err(std::io::Error::last_os_error()),
    }
}

impl Drop for Cloned {
    /// A child whose command was abandoned (its future dropped) is killed,
    /// as tokio's `kill_on_drop`, and reaped, off this thread if it takes
    /// a moment.
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        // SAFETY: the pid is our unreaped child, so it is not reused yet.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
        }
        if let Ok(Some(_)) = try_reap(self.pid) {
            return;
        }
        let pid = self.pid;
        std::thread::spawn(move || {
            let mut status = 0;
            // SAFETY: blocking waitpid on our own child, killed above.
            unsafe { libc::waitpid(pid, &mut status, 0) };
        });
    }
}

/// Starts `spec` as described in the module header; returns once the
/// child has exec'd the program (or failed to).
pub(crate) fn launch(spec: &Launch) -> Result<Cloned, LaunchError> {
    let path = find_program(&spec.program, &spec.env)
        .map_err(|err| err.raw_os_error().unwrap_or(libc::ENOENT));
    let stdin = std::fs::File::open("/dev/null").map_err(LaunchError::Start)?;
    let argv_owned: Vec<CString> = std::iter::once(spec.program.as_os_str())
        .chain(spec.args.iter().map(OsString::as_os_str))
        .map(c_string)
        .collect::<Result<_, _>>()
        .map_err(LaunchError::Start)?;
    let env_owned: Vec<CString> = spec
        .env
        .iter()
        .map(|(k, v)| c_string(OsStr::new(&format!("{k}={v}"))))
        .collect::<Result<_, _>>()
        .map_err(LaunchError::Start)?;
    let mut prepared = Prepared {
        path,
        argv: null_terminated(&argv_owned),
        envp: null_terminated(&env_owned),
        cwd: c_string(spec.cwd.as_os_str()).map_err(LaunchError::Start)?,
        stdin: stdin.as_raw_fd(),
        stdout: spec.stdout.as_raw_fd(),
        stderr: spec.stderr.as_raw_fd(),
        child: &spec.child,
        failure: Failure::default(),
    };
    let (pid, pidfd) = clone_child(&mut prepared)?;
    let failure = &prepared.failure;
    if failure.stage != 0 {
        let mut status = 0;
        // SAFETY: the child exited (it failed before its exec); reap it.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        let err = std::io::Error::from_raw_os_error(failure.errno);
        return Err(match failure.stage {
            1 => LaunchError::Child(format!("cannot set the task's limits: {err}")),
            2 => LaunchError::Child(format!(
                "cannot run {}: {err}",
                spec.program.to_string_lossy()
            )),
            _ => LaunchError::Start(err),
        });
    }
    // SAFETY: the pidfd is owned by the AsyncFd from now on, open until
    // it is dropped with it.
    let pidfd =
        unsafe { AsyncFd::register_with_interest(pidfd, Interest::READABLE) }.map_err(|err| {
            // Not watchable: kill and reap it rather than leave it running.
            // SAFETY: our unreaped child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
            LaunchError::Start(err.into_parts().1)
        })?;
    Ok(Cloned {
        pid,
        pidfd,
        reaped: false,
    })
}

/// The clone itself, all signals blocked around it so that no handler of
/// onebash runs in the child before it resets them.
fn clone_child(prepared: &mut Prepared<'_>) -> Result<(libc::pid_t, OwnedFd), LaunchError> {
    // Not zeroed: the child touches only the top few pages, so zeroing all
    // of it (and faulting every page in) was a measurable part of a
    // command's start (docs/guides/performance.md).
    let mut stack: Vec<std::mem::MaybeUninit<u8>> = Vec::with_capacity(CHILD_STACK_BYTES);
    // The stack grows down from its end, 16-byte aligned.
    let top = (stack.as_mut_ptr() as usize + CHILD_STACK_BYTES) & !15;
    let mut pidfd: libc::c_int = -1;
    // SAFETY: sigset operations on local sets; clone runs `child_main` on
    // `stack` (alive until clone returns: CLONE_VFORK suspends this thread
    // until the child execs or exits) with `prepared`, which outlives it
    // for the same reason.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = libc::clone(
            child_main,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD,
            std::ptr::from_mut(prepared).cast(),
            &mut pidfd as *mut libc::c_int,
        );
        let errno = std::io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid < 0 {
            return Err(match errno.raw_os_error() {
                Some(libc::EINVAL | libc::ENOSYS) => LaunchError::Unsupported,
                _ => LaunchError::Start(errno),
            });
        }
        pid
    };
    drop(stack);
    // SAFETY: clone stored a new pidfd that nothing else owns.
    Ok((pid, unsafe { OwnedFd::from_raw_fd(pidfd) }))
}

/// The child, on onebash's memory until its exec: only system calls, no
/// allocation, no lock. On failure it records what failed and exits.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Prepared` of `clone_child`, alive and not
    // touched by the suspended parent until this child execs or exits;
    // every call below is async-signal-safe.
    unsafe {
        let prepared = &mut *arg.cast::<Prepared<'_>>();
        let fail = |prepared: &mut Prepared<'_>, stage: i32| -> libc::c_int {
            prepared.failure = Failure {
                stage,
                errno: *libc::__errno_location(),
            };
            libc::_exit(127)
        };
        // Handlers are onebash's: back to the default before signals are
        // unblocked; SIGPIPE too (ignored by onebash), as std's spawn does.
        for signal in 1..=libc::SIGRTMAX() {
            let mut action: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut action) != 0 {
                continue;
            }
            if signal == libc::SIGPIPE
                || (action.sa_sigaction != libc::SIG_IGN && action.sa_sigaction != libc::SIG_DFL)
            {
                action.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
        if libc::setpgid(0, 0) != 0
            || libc::dup2(prepared.stdin, 0) < 0
            || libc::dup2(prepared.stdout, 1) < 0
            || libc::dup2(prepared.stderr, 2) < 0
        {
            return fail(prepared, 4);
        }
        if libc::chdir(prepared.cwd.as_ptr()) != 0 {
            return fail(prepared, 3);
        }
        if let Err(err) = prepared.child.apply() {
            *libc::__errno_location() = err.raw_os_error().unwrap_or(0);
            return fail(prepared, 1);
        }
        let path = match &prepared.path {
            Ok(path) => path.as_ptr(),
            Err(errno) => {
                *libc::__errno_location() = *errno;
                return fail(prepared, 2);
            }
        };
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::execve(path, prepared.argv.as_ptr(), prepared.envp.as_ptr());
        fail(prepared, 2)
    }
}

fn c_string(text: &OsStr) -> std::io::Result<CString> {
    CString::new(text.as_bytes()).map_err(std::io::Error::other)
}

fn null_terminated(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// `program` as execvp would find it on the PATH of `env` (a name with a
/// slash as it is): the first executable file; not found is ENOENT, or
/// EACCES when only files that may not be run were.
fn find_program(program: &OsStr, env: &[(String, String)]) -> std::io::Result<CString> {
    if program.as_bytes().contains(&b'/') {
        return c_string(program);
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map_or("/bin:/usr/bin", |(_, v)| v.as_str());
    let mut denied = false;
    for dir in path.split(':') {
        let dir = if dir.is_empty() { "." } else { dir };
        let candidate = c_string(Path::new(dir).join(program).as_os_str())?;
        // SAFETY: access and stat read a valid NUL-terminated path.
        unsafe {
            let mut meta: libc::stat = std::mem::zeroed();
            if libc::stat(candidate.as_ptr(), &mut meta) != 0
                || meta.st_mode & libc::S_IFMT != libc::S_IFREG
            {
                continue;
            }
            if libc::access(candidate.as_ptr(), libc::X_OK) == 0 {
                return Ok(candidate);
            }
        }
        denied = true;
    }
    Err(std::io::Error::from_raw_os_error(if denied {
        libc::EACCES
    } else {
        libc::ENOENT
    }))
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::sys::limits::{LimitPlan, Limits, TaskLimits};

    /// A task's real limits on this machine (a cgroup where onebash may
    /// make one), 1 MiB files at most.
    fn limits(name: &str) -> TaskLimits {
        LimitPlan::new(Limits {
            max_processes: 64,
            max_memory_bytes: 1 << 30,
            max_file_size_bytes: 1 << 20,
        })
        .for_task(&format!("{}-spawn-{name}", std::process::id()))
    }

    /// Starts `bash -c script` with `limits`; its output is the reader's.
    fn start(
        script: &str,
        limits: &TaskLimits,
    ) -> (Result<Cloned, LaunchError>, std::io::PipeReader) {
        let (reader, writer) = std::io::pipe().expect("pipe");
        let spec = Launch {
            program: "bash".into(),
            args: vec!["-c".into(), script.into()],
            cwd: PathBuf::from("/"),
            env: vec![("PATH".to_owned(), std::env::var("PATH").unwrap_or_default())],
            stderr: OwnedFd::from(writer.try_clone().expect("clone")),
            stdout: OwnedFd::from(writer),
            child: limits.child.clone(),
        };
        (launch(&spec), reader)
    }

    #[tokio::test]
    async fn the_command_runs_in_its_own_group_with_the_limits_and_no_stdin() {
        let limits = limits("group");
        let script = "ulimit -f; readlink /proc/self/fd/0; \
                      [ \"$(cut -d' ' -f5 /proc/$$/stat)\" = $$ ] && echo own-group; exit 3";
        let (child, mut reader) = start(script, &limits);
        let status = child.expect("starts").wait().await.expect("waits");
        assert_eq!(status.code(), Some(3));
        let mut out = String::new();
        reader.read_to_string(&mut out).expect("read");
        assert_eq!(out, "1024\n/dev/null\nown-group\n");
    }

    #[tokio::test]
    async fn a_signal_is_reported_as_the_signal() {
        let limits = limits("signal");
        let (child, _reader) = start("kill -TERM $$", &limits);
        let status = child.expect("starts").wait().await.expect("waits");
        assert_eq!(status.signal(), Some(libc::SIGTERM));
    }

    #[tokio::test]
    async fn a_missing_program_fails_as_the_exec_helper_says_it() {
        let limits = limits("missing");
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let spec = Launch {
            program: "onebash-no-such-program".into(),
            args: Vec::new(),
            cwd: PathBuf::from("/"),
            env: vec![("PATH".to_owned(), "/nonexistent".to_owned())],
            stderr: OwnedFd::from(writer.try_clone().expect("clone")),
            stdout: OwnedFd::from(writer),
            child: limits.child.clone(),
        };
        match launch(&spec) {
            Err(LaunchError::Child(message)) => assert_eq!(
                message,
                "cannot run onebash-no-such-program: No such file or directory (os error 2)"
            ),
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("started"),
        }
    }

    #[tokio::test]
    async fn a_child_dropped_before_it_ends_is_killed_and_reaped() {
        let limits = limits("drop");
        let (child, _reader) = start("sleep 600", &limits);
        let child = child.expect("starts");
        let proc_dir = PathBuf::from(format!("/proc/{}", child.id()));
        drop(child);
        // Gone once reaped (a hang guard, not a measure).
        let deadline = Instant::now() + Duration::from_secs(30);
        while proc_dir.exists() {
            assert!(Instant::now() < deadline, "the child survived its drop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
