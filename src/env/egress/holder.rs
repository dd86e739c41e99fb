//! A network namespace that lasts as long as a task on the host: each of
//! its sandboxed commands is a fresh bwrap, so none of them has a
//! namespace that outlives it for the proxy to listen in. A holder is a
//! forked child of onebash that makes a network namespace of its own
//! (with a user namespace around it when onebash is not root, mapping
//! onebash's own ids), brings its loopback up, and then only waits: the
//! proxy's socket is made in it (netns.rs), and each command of the task
//! enters its namespaces before it execs bwrap (`ChildSetup::entering`),
//! so it sees the loopback, where the proxy listens, and no route out.
//!
//! The child only makes system calls (it is forked from a threaded
//! process): every buffer is made before the fork. It ends when onebash
//! closes its end of their socket pair (dropping the holder, or dying),
//! and is killed and reaped on drop besides.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::netns::{NetnsError, socket_pair};

/// The steps of the child, numbered for its report.
const STAGES: [&str; 6] = [
    "make a user and network namespace",
    "deny setgroups",
    "map the user id",
    "map the group id",
    "make a network namespace",
    "bring the loopback up",
];

/// A process holding a network namespace with only its loopback, up.
#[derive(Debug)]
pub(crate) struct NetHolder {
    pid: libc::pid_t,
    /// onebash's end of the socket pair: the holder waits on it.
    ours: Option<OwnedFd>,
    /// Whether it has a user namespace of its own, which its commands
    /// join first.
    own_user: bool,
}

/// What the child writes where, made before the fork.
struct Writes {
    setgroups: CString,
    uid_map: CString,
    gid_map: CString,
    uid_line: Vec<u8>,
    gid_line: Vec<u8>,
}

impl NetHolder {
    /// Forks the holder and waits until its namespace is ready.
    pub(crate) fn start() -> Result<NetHolder, NetnsError> {
        // SAFETY: geteuid and getegid have no preconditions.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        // Root makes a network namespace in its own user namespace, and
        // its commands need not change user namespace; others need one of
        // their own to be allowed to make it.
        let own_user = uid != 0;
        let writes = Writes {
            setgroups: c"/proc/self/setgroups".to_owned(),
            uid_map: c"/proc/self/uid_map".to_owned(),
            gid_map: c"/proc/self/gid_map".to_owned(),
            uid_line: format!("{uid} {uid} 1\n").into_bytes(),
            gid_line: format!("{gid} {gid} 1\n").into_bytes(),
        };
        let (ours, theirs) = socket_pair().map_err(|source| NetnsError::Fork { pid: 0, source })?;
        // SAFETY: the child only makes system calls on memory prepared
        // here and leaves by `_exit`, as a child of a threaded process must.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            let source = io::Error::last_os_error();
            return Err(NetnsError::Fork { pid: 0, source });
        }
        if pid == 0 {
            // SAFETY: in the forked child, see above.
            unsafe { hold(theirs.as_raw_fd(), own_user, &writes) }
        }
        drop(theirs);
        let holder = NetHolder {
            pid,
            ours: Some(ours),
            own_user,
        };
        holder.ready()?;
        Ok(holder)
    }

    /// Reads the child's report: ready, or the stage that failed.
    fn ready(&self) -> Result<(), NetnsError> {
        let pid = self.pid as u32;
        let mut report = [0i32; 2];
        let fd = self.ours.as_ref().map_or(-1, AsRawFd::as_raw_fd);
        // SAFETY: `report` has 8 writable bytes.
        let read = unsafe { libc::recv(fd, report.as_mut_ptr().cast(), 8, 0) };
        if read != 8 {
            return Err(NetnsError::NoSocket { pid });
        }
        match usize::try_from(report[0]) {
            Ok(stage) => Err(NetnsError::Inside {
                pid,
                stage: STAGES.get(stage).copied().unwrap_or("hold a network"),
                source: io::Error::from_raw_os_error(report[1]),
            }),
            Err(_) => Ok(()),
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// Whether its commands must join its user namespace before its
    /// network namespace.
    pub(crate) fn own_user(&self) -> bool {
        self.own_user
    }
}

impl Drop for NetHolder {
    fn drop(&mut self) {
        // Closing our end ends its wait; the kill makes sure.
        self.ours = None;
        let mut status = 0;
        // SAFETY: `pid` is our own child, killed and reaped once here.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::waitpid(self.pid, &mut status, 0);
        }
    }
}

/// The child: makes the namespaces, brings `lo` up, reports (stage -1:
/// ready) and waits for onebash's end of `back` to close.
///
/// # Safety
/// Only in the child of `fork`.
unsafe fn hold(back: RawFd, own_user: bool, writes: &Writes) -> ! {
    let fail = |stage: i32| -> ! {
        let errno = io::Error::last_os_error().raw_os_error().unwrap_or(0);
        let report = [stage, errno];
        // SAFETY: `report` is 8 readable bytes.
        unsafe {
            libc::send(back, report.as_ptr().cast(), 8, 0);
            libc::_exit(1)
        }
    };
    // SAFETY: plain system calls on memory prepared before the fork.
    unsafe {
        // Out of onebash's process group: a Ctrl-C is onebash's to handle.
        libc::setpgid(0, 0);
        if own_user {
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) != 0 {
                fail(0);
            }
            if !write_file(&writes.setgroups, b"deny") {
                fail(1);
            }
            if !write_file(&writes.uid_map, &writes.uid_line) {
                fail(2);
            }
            if !write_file(&writes.gid_map, &writes.gid_line) {
                fail(3);
            }
        } else if libc::unshare(libc::CLONE_NEWNET) != 0 {
            fail(4);
        }
        if loopback_up().is_err() {
            fail(5);
        }
        let ready = [-1i32, 0];
        libc::send(back, ready.as_ptr().cast(), 8, 0);
        // Nothing comes: recv returns when onebash's end closes.
        let mut byte = [0u8; 1];
        while libc::recv(back, byte.as_mut_ptr().cast(), 1, 0) > 0 {}
        libc::_exit(0)
    }
}

/// Writes `bytes` to `path`, whole; false (errno set) when it cannot.
///
/// # Safety
/// Only system calls; `path` and `bytes` were made before the fork.
unsafe fn write_file(path: &CString, bytes: &[u8]) -> bool {
    // SAFETY: open/write/close on a NUL-terminated path and a live buffer.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        libc::close(fd);
        written == bytes.len() as isize
    }
}

/// Sets the `IFF_UP` flag of `lo` (a new network namespace has it down).
///
/// # Safety
/// Only system calls.
unsafe fn loopback_up() -> Result<(), ()> {
    // SAFETY: ioctls on a socket of this process, with an `ifreq` on this
    // stack naming "lo".
    unsafe {
        let socket = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if socket < 0 {
            return Err(());
        }
        let mut request: libc::ifreq = std::mem::zeroed();
        request.ifr_name[0] = b'l' as libc::c_char;
        request.ifr_name[1] = b'o' as libc::c_char;
        let up = libc::ioctl(socket, libc::SIOCGIFFLAGS, &mut request) == 0 && {
            request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            libc::ioctl(socket, libc::SIOCSIFFLAGS, &request) == 0
        };
        libc::close(socket);
        if up { Ok(()) } else { Err(()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The holder's namespace is another than ours, its loopback is up
    /// (the proxy's socket there accepts), and it is gone once dropped.
    #[test]
    fn a_holder_has_a_network_of_its_own_with_its_loopback_up() {
        let holder = match NetHolder::start() {
            Ok(holder) => holder,
            // Namespaces may be forbidden where the unit tests run.
            Err(err) if std::env::var_os("CI").is_none() => {
                eprintln!("skipped: {err}");
                return;
            }
            Err(err) => panic!("{err}"),
        };
        let pid = holder.pid();
        let ns = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/net")).expect("ns");
        assert_ne!(ns("self"), ns(&pid.to_string()));
        let listener = super::super::netns::listen_in(pid).expect("a socket there");
        assert!(listener.local_addr().expect("address").ip().is_loopback());
        drop(listener);
        drop(holder);
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    }
}
