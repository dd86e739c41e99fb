//! A listening socket on 127.0.0.1 inside another process's network
//! namespace (a container's, a sandbox's), made without running anything
//! in it: a forked child of onebash joins that process's user namespace
//! (when it is not onebash's own) and network namespace, binds and
//! listens there, and sends the socket back over a socket pair
//! (`SCM_RIGHTS`). A socket keeps the namespace it was made in, so
//! onebash then accepts on it from its own namespace, and the proxy's
//! connections out start from onebash's network, the only way out of a
//! namespace that has nothing but its loopback.
//!
//! The child only makes system calls (it is forked from a threaded
//! process): every buffer is made before the fork.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// Why no socket could be made in the namespace.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("cannot open {}: {source}", path.display())]
    Open { path: PathBuf, source: io::Error },
    #[error("cannot start the helper that enters process {pid}'s network: {source}")]
    Fork { pid: u32, source: io::Error },
    #[error("cannot {stage} in process {pid}'s network: {source}")]
    Inside {
        pid: u32,
        stage: &'static str,
        source: io::Error,
    },
    #[error("the helper that entered process {pid}'s network sent no socket")]
    NoSocket { pid: u32 },
}

/// The steps of the child, numbered for its report.
const STAGES: [&str; 5] = [
    "join the user namespace",
    "join the network namespace",
    "open a socket",
    "bind 127.0.0.1",
    "listen",
];

/// A socket listening on 127.0.0.1 (a port the kernel picks) in the
/// network namespace of process `pid`.
pub(crate) fn listen_in(pid: u32) -> Result<std::net::TcpListener, NetnsError> {
    let open = |name: &str| {
        let path = PathBuf::from(format!("/proc/{pid}/ns/{name}"));
        File::open(&path).map_err(|source| NetnsError::Open { path, source })
    };
    let (user, net) = (open("user")?, open("net")?);
    let own_user = std::fs::metadata("/proc/self/ns/user").map_err(|source| NetnsError::Open {
        path: "/proc/self/ns/user".into(),
        source,
    })?;
    let their_user = user.metadata().map_err(|source| NetnsError::Open {
        path: format!("/proc/{pid}/ns/user").into(),
        source,
    })?;
    let join_user = (own_user.dev(), own_user.ino()) != (their_user.dev(), their_user.ino());
    let (ours, theirs) = socket_pair().map_err(|source| NetnsError::Fork { pid, source })?;
    // SAFETY: the child only makes system calls on memory prepared here
    // and leaves by `_exit`, as a child of a threaded process must.
    let child = unsafe { libc::fork() };
    if child < 0 {
        let source = io::Error::last_os_error();
        return Err(NetnsError::Fork { pid, source });
    }
    if child == 0 {
        let fds = (user.as_raw_fd(), net.as_raw_fd(), theirs.as_raw_fd());
        // SAFETY: in the forked child, see above.
        unsafe { in_child(fds, join_user) }
    }
    drop(theirs);
    let received = receive(&ours);
    let mut status = 0;
    // SAFETY: `child` is our own child, reaped once here.
    unsafe { libc::waitpid(child, &mut status, 0) };
    match received {
        Ok(Ok(fd)) => Ok(std::net::TcpListener::from(fd)),
        Ok(Err((stage, errno))) => Err(NetnsError::Inside {
            pid,
            stage: STAGES.get(stage).copied().unwrap_or("make the socket"),
            source: io::Error::from_raw_os_error(errno),
        }),
        Err(()) => Err(NetnsError::NoSocket { pid }),
    }
}

pub(super) fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` has room for the two descriptors.
    let made = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if made != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just made and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The child: enters the namespaces, makes the socket, sends it (or the
/// stage that failed and its errno) and exits.
///
/// # Safety
/// Only in the child of `fork`.
unsafe fn in_child((user, net, back): (RawFd, RawFd, RawFd), join_user: bool) -> ! {
    let fail = |stage: usize| -> ! {
        let errno = io::Error::last_os_error().raw_os_error().unwrap_or(0);
        let report = [stage as i32, errno];
        // SAFETY: `report` is 8 readable bytes.
        unsafe {
            libc::send(back, report.as_ptr().cast(), 8, 0);
            libc::_exit(1)
        }
    };
    // SAFETY: plain system calls on descriptors this process holds.
    unsafe {
        if join_user && libc::setns(user, libc::CLONE_NEWUSER) != 0 {
            fail(0);
        }
        if libc::setns(net, libc::CLONE_NEWNET) != 0 {
            fail(1);
        }
        let socket = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if socket < 0 {
            fail(2);
        }
        let mut address: libc::sockaddr_in = std::mem::zeroed();
        address.sin_family = libc::AF_INET as libc::sa_family_t;
        address.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let length = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        if libc::bind(socket, (&raw const address).cast(), length) != 0 {
            fail(3);
        }
        if libc::listen(socket, 128) != 0 {
            fail(4);
        }
        send_fd(back, socket);
        libc::_exit(0)
    }
}

/// Space for one descriptor's control message.
#[repr(C)]
union Control {
    header: libc::cmsghdr,
    bytes: [u8; 64],
}

/// # Safety
/// Only system calls; `back` and `fd` are open.
unsafe fn send_fd(back: RawFd, fd: RawFd) {
    // SAFETY: the message and its control buffer live on this stack
    // while sendmsg reads them; CMSG_* compute inside `control`.
    unsafe {
        let mut byte = [0u8; 1];
        let mut io = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut control: Control = std::mem::zeroed();
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &mut io;
        message.msg_iovlen = 1;
        message.msg_control = (&raw mut control).cast();
        message.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as _;
        let header = libc::CMSG_FIRSTHDR(&message);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::copy_nonoverlapping(
            (&raw const fd).cast::<u8>(),
            libc::CMSG_DATA(header),
            std::mem::size_of::<RawFd>(),
        );
        libc::sendmsg(back, &message, 0);
    }
}

/// The socket the child sent, or the stage it failed at and its errno;
/// `Err(())` when it sent nothing (it died).
#[allow(clippy::type_complexity)]
fn receive(ours: &OwnedFd) -> Result<Result<OwnedFd, (usize, i32)>, ()> {
    let mut data = [0u8; 8];
    // SAFETY: the buffers live on this stack while recvmsg writes them;
    // a descriptor received is owned here from then on.
    unsafe {
        let mut io = libc::iovec {
            iov_base: data.as_mut_ptr().cast(),
            iov_len: data.len(),
        };
        let mut control: Control = std::mem::zeroed();
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &mut io;
        message.msg_iovlen = 1;
        message.msg_control = (&raw mut control).cast();
        message.msg_controllen = std::mem::size_of::<Control>() as _;
        let read = libc::recvmsg(ours.as_raw_fd(), &mut message, libc::MSG_CMSG_CLOEXEC);
        if read <= 0 {
            return Err(());
        }
        let header = libc::CMSG_FIRSTHDR(&message);
        if !header.is_null()
            && (*header).cmsg_level == libc::SOL_SOCKET
            && (*header).cmsg_type == libc::SCM_RIGHTS
        {
            let mut fd: RawFd = -1;
            std::ptr::copy_nonoverlapping(
                libc::CMSG_DATA(header),
                (&raw mut fd).cast::<u8>(),
                std::mem::size_of::<RawFd>(),
            );
            return Ok(Ok(OwnedFd::from_raw_fd(fd)));
        }
        if read == 8 {
            let stage = i32::from_ne_bytes([data[0], data[1], data[2], data[3]]);
            let errno = i32::from_ne_bytes([data[4], data[5], data[6], data[7]]);
            return Ok(Err((usize::try_from(stage).unwrap_or(usize::MAX), errno)));
        }
        Err(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_made_in_our_own_namespace_listens_where_we_can_reach_it() {
        let listener = listen_in(std::process::id()).expect("a socket");
        let address = listener.local_addr().expect("address");
        assert!(address.ip().is_loopback());
        let _client = std::net::TcpStream::connect(address).expect("reachable");
        assert!(listener.accept().is_ok());
    }

    #[test]
    fn a_process_that_is_not_there_is_named() {
        let err = listen_in(u32::MAX / 2).expect_err("no such process");
        assert!(matches!(err, NetnsError::Open { .. }), "{err}");
    }
}
