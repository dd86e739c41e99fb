//! Resource limits of the commands a task runs.
//!
//! Two mechanisms, used where the machine allows them:
//! - a cgroup per task (v1 `pids` and `memory` hierarchies, or v2 when
//!   onebash may enable controllers), which bounds the task's processes and
//!   memory as a whole, and lists every process the task started so all can
//!   be killed when it ends; it needs write access to the cgroup file
//!   system, which root usually has;
//! - setrlimit on every command: file size and core dumps always; data
//!   segment size instead of the memory cgroup, and the process count
//!   instead of the pids cgroup when onebash is not root (root is exempt
//!   from RLIMIT_NPROC, which is why the cgroup is tried first).
//!
//! [`LimitPlan`] is decided once per run; [`TaskLimits`] is one task's
//! cgroup and the settings a child applies between fork and exec.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use serde::Serialize;

/// What the user asked for.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Limits {
    pub max_processes: u64,
    pub max_memory_bytes: u64,
    pub max_file_size_bytes: u64,
}

/// How each limit is enforced on this machine, for run.json and the sandbox guide (docs/guides/sandbox-and-security.md).
#[derive(Debug, Clone, Serialize)]
pub struct Enforcement {
    pub processes: Mechanism,
    pub memory: Mechanism,
    pub file_size: Mechanism,
}

/// One way a limit is kept, written to run.json as its description.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    CgroupV1Pids,
    CgroupV1Memory,
    CgroupV2Pids,
    CgroupV2Memory,
    RlimitNproc,
    RlimitData,
    RlimitFsize,
    /// Not kept at all: root is exempt from RLIMIT_NPROC, and no cgroup
    /// could be made.
    NotEnforced,
}

impl Mechanism {
    pub fn describe(self) -> &'static str {
        match self {
            Mechanism::CgroupV1Pids => "cgroup v1 pids.max, per task",
            Mechanism::CgroupV1Memory => "cgroup v1 memory.limit_in_bytes, per task",
            Mechanism::CgroupV2Pids => "cgroup v2 pids.max, per task",
            Mechanism::CgroupV2Memory => "cgroup v2 memory.max, per task",
            Mechanism::RlimitNproc => {
                "RLIMIT_NPROC, per user (counts the user's other processes too)"
            }
            Mechanism::RlimitData => "RLIMIT_DATA, per process",
            Mechanism::RlimitFsize => "RLIMIT_FSIZE, per process",
            Mechanism::NotEnforced => {
                "not enforced (root is exempt from RLIMIT_NPROC and no cgroup could be made)"
            }
        }
    }
}

impl Serialize for Mechanism {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.describe())
    }
}

/// Where task cgroups can be made, found once per run.
#[derive(Debug, Clone)]
enum CgroupRoot {
    /// v1: the `onebash` folder in the pids hierarchy, and in the memory
    /// hierarchy when that one is writable too.
    V1 {
        pids: PathBuf,
        memory: Option<PathBuf>,
    },
    /// v2: a folder whose subtree has the pids and memory controllers on.
    V2 { parent: PathBuf },
}

/// The run's choice of mechanisms.
#[derive(Debug, Clone)]
pub struct LimitPlan {
    limits: Limits,
    cgroups: Option<CgroupRoot>,
    /// Why no cgroup could be used, when none could.
    pub cgroup_problem: Option<String>,
    is_root: bool,
}

impl LimitPlan {
    /// Looks at the machine once: can onebash make cgroups here?
    pub fn new(limits: Limits) -> LimitPlan {
        // SAFETY: geteuid has no preconditions.
        let is_root = unsafe { libc::geteuid() } == 0;
        let (cgroups, cgroup_problem) = match find_cgroup_root() {
            Ok(root) => (Some(root), None),
            Err(problem) => (None, Some(problem.to_string())),
        };
        LimitPlan {
            limits,
            cgroups,
            cgroup_problem,
            is_root,
        }
    }

    pub fn enforcement(&self) -> Enforcement {
        let (processes, memory) = match &self.cgroups {
            Some(CgroupRoot::V1 { memory, .. }) => (
                Mechanism::CgroupV1Pids,
                if memory.is_some() {
                    Mechanism::CgroupV1Memory
                } else {
                    Mechanism::RlimitData
                },
            ),
            Some(CgroupRoot::V2 { .. }) => (Mechanism::CgroupV2Pids, Mechanism::CgroupV2Memory),
            None if self.is_root => (Mechanism::NotEnforced, Mechanism::RlimitData),
            None => (Mechanism::RlimitNproc, Mechanism::RlimitData),
        };
        Enforcement {
            processes,
            memory,
            file_size: Mechanism::RlimitFsize,
        }
    }

    /// The limits of one task: its cgroup (made now) and rlimits.
    pub fn for_task(&self, name: &str) -> TaskLimits {
        let cgroup = self
            .cgroups
            .as_ref()
            .and_then(|root| TaskCgroup::create(root, name, &self.limits).ok());
        let has_memory_cgroup = match (&cgroup, &self.cgroups) {
            (Some(_), Some(CgroupRoot::V1 { memory, .. })) => memory.is_some(),
            (Some(_), Some(CgroupRoot::V2 { .. })) => true,
            _ => false,
        };
        let mut rlimits = vec![
            (libc::RLIMIT_FSIZE, self.limits.max_file_size_bytes),
            (libc::RLIMIT_CORE, 0),
        ];
        if !has_memory_cgroup {
            rlimits.push((libc::RLIMIT_DATA, self.limits.max_memory_bytes));
        }
        if cgroup.is_none() && !self.is_root {
            let own = count_own_processes();
            rlimits.push((libc::RLIMIT_NPROC, own + self.limits.max_processes));
        }
        let procs_files = cgroup
            .as_ref()
            .map(|c| {
                c.dirs
                    .iter()
                    .filter_map(|d| {
                        CString::new(d.join("cgroup.procs").into_os_string().into_encoded_bytes())
                            .ok()
                    })
                    .collect()
            })
            .unwrap_or_default();
        TaskLimits {
            child: ChildSetup {
                rlimits,
                procs_files,
                namespaces: Vec::new(),
            },
            cgroup,
        }
    }
}

/// One task's limits. Dropping it kills what is left in its cgroup and
/// removes the cgroup.
#[derive(Debug)]
pub struct TaskLimits {
    pub child: ChildSetup,
    cgroup: Option<TaskCgroup>,
}

impl TaskLimits {
    /// Kills every process in the task's cgroup; returns how many.
    pub fn kill_all(&self) -> usize {
        self.cgroup.as_ref().map_or(0, TaskCgroup::kill_all)
    }
}

/// What a task's command sets on itself before it starts: cgroups to join
/// and rlimits. Done by onebash's exec helper ([`exec_limited`]) in the
/// command's own process, just before it execs the command.
#[derive(Debug, Clone)]
pub struct ChildSetup {
    rlimits: Vec<(libc::__rlimit_resource_t, u64)>,
    procs_files: Vec<CString>,
    /// Namespaces to enter, in order (`/proc/PID/ns/...`): a task's
    /// network holder's on the host (env/egress/holder.rs).
    namespaces: Vec<CString>,
}

/// The hidden first argument under which onebash is its own exec helper:
/// it applies a task's limits to itself, then execs the command (see
/// [`ChildSetup::helper_args`] and [`exec_limited`]).
pub const EXEC_LIMITED: &str = "__exec-limited";
/// The helper's first argument after [`EXEC_LIMITED`] when stdin is the
/// program's own ([`ChildSetup::helper_args_keeping_stdin`]).
const KEEP_STDIN: &str = "--keep-stdin";

impl ChildSetup {
    /// No limits at all.
    pub fn none() -> ChildSetup {
        ChildSetup {
            rlimits: Vec::new(),
            procs_files: Vec::new(),
            namespaces: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.rlimits.is_empty() && self.procs_files.is_empty() && self.namespaces.is_empty()
    }

    /// These limits, and then the network namespace of process `pid`
    /// entered (its user namespace first when `user`), last, once the
    /// cgroups are joined from onebash's own.
    pub(crate) fn entering(&self, pid: u32, user: bool) -> ChildSetup {
        let mut setup = self.clone();
        let kinds: &[&str] = if user { &["user", "net"] } else { &["net"] };
        setup.namespaces = kinds
            .iter()
            .filter_map(|kind| CString::new(format!("/proc/{pid}/ns/{kind}")).ok())
            .collect();
        setup
    }

    /// The arguments that make onebash, started as `onebash
    /// __exec-limited ARGS PROGRAM...`, set these limits on itself and exec
    /// PROGRAM. A command is started that way rather than with a closure
    /// between fork and exec: without such a closure the standard library
    /// starts it with `posix_spawn`, which does not copy the page tables of
    /// onebash (a `fork` did, holding up the async workers; see exec.rs).
    pub fn helper_args(&self) -> Vec<OsString> {
        self.helper_args_with(vec![EXEC_LIMITED.into()])
    }

    /// [`ChildSetup::helper_args`] for a long-lived program that reads its
    /// stdin (the channel into a container, env/channel.rs): stdin is left
    /// to it, not taken as the status pipe, and a failure is told on
    /// stderr, before the helper exits.
    pub fn helper_args_keeping_stdin(&self) -> Vec<OsString> {
        self.helper_args_with(vec![EXEC_LIMITED.into(), KEEP_STDIN.into()])
    }

    fn helper_args_with(&self, mut args: Vec<OsString>) -> Vec<OsString> {
        for file in &self.procs_files {
            args.push("--join".into());
            args.push(OsString::from_vec(file.as_bytes().to_vec()));
        }
        for file in &self.namespaces {
            args.push("--setns".into());
            args.push(OsString::from_vec(file.as_bytes().to_vec()));
        }
        for (resource, value) in &self.rlimits {
            args.push("--rlimit".into());
            args.push(format!("{resource}={value}").into());
        }
        args.push("--".into());
        args
    }

    /// Joins the task's cgroups (writing "0" to `cgroup.procs` moves the
    /// writer) and sets the rlimits, on the calling process.
    pub fn apply(&self) -> std::io::Result<()> {
        for file in &self.procs_files {
            // SAFETY: open/write/close are async-signal-safe; the path is a
            // valid NUL-terminated string made before the fork.
            unsafe {
                let fd = libc::open(file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let written = libc::write(fd, b"0".as_ptr().cast(), 1);
                libc::close(fd);
                if written != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
        }
        for &(resource, value) in &self.rlimits {
            let limit = libc::rlimit {
                rlim_cur: value,
                rlim_max: value,
            };
            // SAFETY: setrlimit is async-signal-safe and reads `limit` only.
            if unsafe { libc::setrlimit(resource, &limit) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        for file in &self.namespaces {
            // SAFETY: open/setns/close are async-signal-safe; the path is
            // a valid NUL-terminated string made before the fork.
            unsafe {
                let fd = libc::open(file.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let entered = libc::setns(fd, 0);
                libc::close(fd);
                if entered != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
        }
        Ok(())
    }
}

/// onebash as its own exec helper (`args` follow [`EXEC_LIMITED`]): joins
/// the cgroups and sets the rlimits they name, then execs the program that
/// follows `--`, in this process (so it keeps the pid, the cgroups and the
/// limits). Returns only when that fails: what went wrong.
pub fn exec_limited(args: &[OsString]) -> String {
    if let Some((first, rest)) = args.split_first()
        && first == KEEP_STDIN
    {
        // No status pipe: what went wrong goes to stderr (main prints it).
        return exec_with(rest);
    }
    // The status pipe comes in as stdin: kept apart, closed by the exec,
    // and stdin becomes /dev/null as every command's is.
    // SAFETY: fcntl, open, dup2 and close act on this process's own
    // descriptors only.
    let status = unsafe {
        let status = libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 3);
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if null >= 0 {
            libc::dup2(null, 0);
            libc::close(null);
        }
        status
    };
    let failed = exec_with(args);
    if status >= 0 {
        let bytes = failed.as_bytes();
        // SAFETY: writes `bytes` to a descriptor this process owns.
        unsafe {
            libc::write(status, bytes.as_ptr().cast(), bytes.len());
        }
    }
    failed
}

/// Applies the limits `args` name and execs the program after `--`;
/// returns only on failure.
fn exec_with(args: &[OsString]) -> String {
    use std::os::unix::process::CommandExt;
    let mut setup = ChildSetup::none();
    let mut rest = args.iter();
    loop {
        let Some(flag) = rest.next() else {
            return "no `--` before the program".to_owned();
        };
        match flag.to_str() {
            Some("--") => break,
            Some("--join") => match rest.next().map(|f| CString::new(f.as_bytes())) {
                Some(Ok(file)) => setup.procs_files.push(file),
                _ => return "--join needs a file".to_owned(),
            },
            Some("--setns") => match rest.next().map(|f| CString::new(f.as_bytes())) {
                Some(Ok(file)) => setup.namespaces.push(file),
                _ => return "--setns needs a file".to_owned(),
            },
            Some("--rlimit") => {
                let parsed = rest.next().and_then(|raw| {
                    let (resource, value) = raw.to_str()?.split_once('=')?;
                    Some((resource.parse().ok()?, value.parse().ok()?))
                });
                match parsed {
                    Some(limit) => setup.rlimits.push(limit),
                    None => return "--rlimit needs RESOURCE=VALUE".to_owned(),
                }
            }
            _ => return format!("unknown argument {flag:?}"),
        }
    }
    let Some(program) = rest.next() else {
        return "no program after `--`".to_owned();
    };
    if let Err(err) = setup.apply() {
        return format!("cannot set the task's limits: {err}");
    }
    let err = std::process::Command::new(program).args(rest).exec();
    format!("cannot run {}: {err}", program.to_string_lossy())
}

#[derive(Debug)]
struct TaskCgroup {
    dirs: Vec<PathBuf>,
}

impl TaskCgroup {
    fn create(root: &CgroupRoot, name: &str, limits: &Limits) -> std::io::Result<TaskCgroup> {
        let mut made = TaskCgroup { dirs: Vec::new() };
        match root {
            CgroupRoot::V1 { pids, memory } => {
                let dir = pids.join(name);
                std::fs::create_dir(&dir)?;
                made.dirs.push(dir.clone());
                std::fs::write(dir.join("pids.max"), limits.max_processes.to_string())?;
                if let Some(memory) = memory {
                    let dir = memory.join(name);
                    std::fs::create_dir(&dir)?;
                    made.dirs.push(dir.clone());
                    std::fs::write(
                        dir.join("memory.limit_in_bytes"),
                        limits.max_memory_bytes.to_string(),
                    )?;
                }
            }
            CgroupRoot::V2 { parent } => {
                let dir = parent.join(name);
                std::fs::create_dir(&dir)?;
                made.dirs.push(dir.clone());
                std::fs::write(dir.join("pids.max"), limits.max_processes.to_string())?;
                std::fs::write(dir.join("memory.max"), limits.max_memory_bytes.to_string())?;
                let _ = std::fs::write(dir.join("memory.swap.max"), "0");
            }
        }
        Ok(made)
    }

    fn kill_all(&self) -> usize {
        let mut killed = 0;
        // A process may fork while we read: go round until the cgroup is
        // empty, a bounded number of times.
        for _round in 0..20 {
            let mut found = 0;
            for dir in &self.dirs {
                let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) else {
                    continue;
                };
                for pid in text
                    .lines()
                    .filter_map(|l| l.trim().parse::<libc::pid_t>().ok())
                {
                    // SAFETY: kill has no memory-safety preconditions.
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                    }
                    found += 1;
                }
            }
            killed += found;
            if found == 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        killed
    }
}

impl Drop for TaskCgroup {
    fn drop(&mut self) {
        self.kill_all();
        for dir in &self.dirs {
            // A cgroup can be removed once its processes are gone; they may
            // take a moment to be reaped.
            for _attempt in 0..50 {
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    }
}

const CGROUP_MOUNT: &str = "/sys/fs/cgroup";

/// Why no task cgroup can be made here (the warning that the process
/// limit is not enforced says it): each names the cgroup file or folder
/// it concerns.
#[derive(Debug, thiserror::Error)]
enum CgroupProblem {
    #[error("cannot read /proc/self/cgroup: {0}")]
    OwnUnreadable(#[source] std::io::Error),
    #[error("no cgroup v1 pids hierarchy")]
    NoV1Pids,
    #[error("no cgroup v2 entry in /proc/self/cgroup")]
    NoV2Entry,
    #[error(
        "onebash runs in cgroup {}, where cgroup v2 does not let it make limited children",
        .0.display()
    )]
    NotTheRoot(PathBuf),
    #[error("cannot make cgroups in {}: {source}", dir.display())]
    Unusable {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot enable the pids and memory controllers in {}: {source}", dir.display())]
    Controllers {
        dir: PathBuf,
        source: std::io::Error,
    },
}

fn find_cgroup_root() -> Result<CgroupRoot, CgroupProblem> {
    let own = std::fs::read_to_string("/proc/self/cgroup").map_err(CgroupProblem::OwnUnreadable)?;
    let mount = Path::new(CGROUP_MOUNT);
    if mount.join("cgroup.controllers").exists() {
        return v2_root(mount, &own);
    }
    let path_of = |controller: &str| -> Option<PathBuf> {
        own.lines().find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers
                .split(',')
                .any(|c| c == controller)
                .then(|| mount.join(controller).join(path.trim_start_matches('/')))
        })
    };
    let pids = path_of("pids").ok_or(CgroupProblem::NoV1Pids)?;
    let pids = usable_parent(&pids).map_err(|source| CgroupProblem::Unusable {
        dir: pids.clone(),
        source,
    })?;
    let memory = path_of("memory").and_then(|m| usable_parent(&m).ok());
    Ok(CgroupRoot::V1 { pids, memory })
}

/// `<dir>/onebash`, made if needed, after checking that a child cgroup can
/// be made and removed in it. Task cgroups left by onebash processes that
/// died (kill -9) are emptied and removed on the way.
fn usable_parent(dir: &Path) -> std::io::Result<PathBuf> {
    let parent = dir.join("onebash");
    match std::fs::create_dir(&parent) {
        Err(err) if err.kind() != std::io::ErrorKind::AlreadyExists => return Err(err),
        _ => {}
    }
    reap_stale(&parent);
    let probe = parent.join(format!("probe-{}", std::process::id()));
    std::fs::create_dir(&probe)?;
    std::fs::remove_dir(&probe)?;
    Ok(parent)
}

/// Task cgroups are named `<pid>-...` after the onebash process that made
/// them; those whose process is gone are emptied and removed.
fn reap_stale(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let path = entry.path();
        if path.is_dir() && !Path::new(&format!("/proc/{pid}")).exists() {
            drop(TaskCgroup { dirs: vec![path] });
        }
    }
}

/// v2 works when onebash's own cgroup is the root of the tree it sees
/// (controllers can be enabled below it) and it may write there.
fn v2_root(mount: &Path, own: &str) -> Result<CgroupRoot, CgroupProblem> {
    let path = own
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .ok_or(CgroupProblem::NoV2Entry)?;
    if path != "/" {
        return Err(CgroupProblem::NotTheRoot(PathBuf::from(path)));
    }
    let enable = |dir: &Path| {
        std::fs::write(dir.join("cgroup.subtree_control"), "+pids +memory").map_err(|source| {
            CgroupProblem::Controllers {
                dir: dir.to_owned(),
                source,
            }
        })
    };
    enable(mount)?;
    let parent = usable_parent(mount).map_err(|source| CgroupProblem::Unusable {
        dir: mount.to_owned(),
        source,
    })?;
    enable(&parent)?;
    Ok(CgroupRoot::V2 { parent })
}

/// How many processes this user runs now (for RLIMIT_NPROC, which counts them all).
fn count_own_processes() -> u64 {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter(|e| {
            use std::os::unix::fs::MetadataExt;
            e.metadata().is_ok_and(|m| m.uid() == uid)
        })
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_task_cgroups_of_dead_processes_are_removed() {
        let parent = tempfile::tempdir().expect("tempdir");
        // A pid above the kernel's maximum (4194304) is never alive.
        let dead = parent.path().join("4194999-0-task-1");
        let alive = parent
            .path()
            .join(format!("{}-0-task-1", std::process::id()));
        let other = parent.path().join("not-a-task");
        for dir in [&dead, &alive, &other] {
            std::fs::create_dir(dir).expect("mkdir");
        }
        reap_stale(parent.path());
        assert!(!dead.exists());
        assert!(alive.exists());
        assert!(other.exists());
    }

    #[test]
    fn the_exec_helper_refuses_what_it_cannot_read_without_running_anything() {
        let args = |list: &[&str]| list.iter().map(OsString::from).collect::<Vec<_>>();
        for (given, said) in [
            (args(&[]), "no `--`"),
            (args(&["--rlimit", "1"]), "RESOURCE=VALUE"),
            (args(&["--join"]), "needs a file"),
            (args(&["--what", "--"]), "unknown argument"),
            (args(&["--rlimit", "4=0", "--"]), "no program"),
        ] {
            let message = exec_with(&given);
            assert!(message.contains(said), "{given:?}: {message}");
        }
    }

    #[test]
    fn helper_arguments_read_back_as_the_same_limits() {
        let setup = ChildSetup {
            rlimits: vec![(libc::RLIMIT_FSIZE, 1 << 20), (libc::RLIMIT_CORE, 0)],
            procs_files: vec![CString::new("/sys/fs/cgroup/pids/x/cgroup.procs").expect("path")],
            namespaces: Vec::new(),
        }
        .entering(7, true);
        let args = setup.helper_args();
        assert_eq!(args[0], EXEC_LIMITED);
        assert_eq!(
            args.last().map(OsString::as_os_str),
            Some(std::ffi::OsStr::new("--"))
        );
        let shown: Vec<String> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            shown[1..shown.len() - 1],
            [
                "--join",
                "/sys/fs/cgroup/pids/x/cgroup.procs",
                "--setns",
                "/proc/7/ns/user",
                "--setns",
                "/proc/7/ns/net",
                "--rlimit",
                &format!("{}=1048576", libc::RLIMIT_FSIZE),
                "--rlimit",
                &format!("{}=0", libc::RLIMIT_CORE),
            ]
        );
    }

    #[test]
    fn child_setup_without_limits_does_nothing() {
        assert!(ChildSetup::none().apply().is_ok());
    }

    #[test]
    fn enforcement_names_a_mechanism_for_every_limit() {
        let plan = LimitPlan::new(Limits {
            max_processes: 64,
            max_memory_bytes: 1 << 30,
            max_file_size_bytes: 1 << 20,
        });
        let enforced = plan.enforcement();
        assert_eq!(enforced.file_size, Mechanism::RlimitFsize);
        assert_ne!(enforced.memory, Mechanism::NotEnforced);
        // run.json holds the words, as before.
        let written = serde_json::to_value(&enforced).expect("serialize");
        assert_eq!(written["file_size"], "RLIMIT_FSIZE, per process");
        assert_eq!(written["processes"], enforced.processes.describe());
    }
}
