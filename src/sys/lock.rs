//! Exclusive file locks (`flock`) between onebash processes: the repo
//! cache's mirrors and stores, and a run folder. Released when dropped, or
//! by the kernel when the process dies, even by kill -9: a lock left by a
//! killed run is never in the way of the next.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

/// An exclusive `flock` held until dropped.
#[derive(Debug)]
pub struct FileLock {
    _file: File,
}

impl FileLock {
    /// Waits until the lock at `path` (made if need be) is granted.
    pub fn acquire(path: &Path) -> std::io::Result<FileLock> {
        Ok(FileLock::take(path, libc::LOCK_EX)?.expect("a blocking flock waits"))
    }

    /// The lock at `path` when no other process holds it, or `None`.
    pub fn try_acquire(path: &Path) -> std::io::Result<Option<FileLock>> {
        FileLock::take(path, libc::LOCK_EX | libc::LOCK_NB)
    }

    fn take(path: &Path, operation: libc::c_int) -> std::io::Result<Option<FileLock>> {
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)?;
        // SAFETY: flock on a valid open descriptor.
        let rc = unsafe { libc::flock(file.as_raw_fd(), operation) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            return match err.kind() {
                std::io::ErrorKind::WouldBlock => Ok(None),
                _ => Err(err),
            };
        }
        Ok(Some(FileLock { _file: file }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_refused_until_it_is_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("lock");
        let held = FileLock::acquire(&path).expect("acquire");
        // flock locks belong to the open file: a second open is refused.
        assert!(FileLock::try_acquire(&path).expect("try").is_none());
        drop(held);
        assert!(FileLock::try_acquire(&path).expect("try").is_some());
    }
}
