//! The harness's own blocking work (checkouts and other git work, deleting
//! working copies, trajectory files, killing what a task left behind), on
//! tokio's blocking threads at nice 10.
//!
//! The async workers keep the time onebash reports: command timeouts,
//! durations, output reads. With 2 cores and 32 checkouts of a large repo
//! at once, blocking threads at the workers' priority starved them, and a
//! command's kill came up to 0.8 s after its timeout (`scripts/bench.sh`
//! section `lateness`). At nice 10 a busy blocking thread yields to a
//! worker that wakes. The agent's and the tests' commands are started from
//! the workers, so they keep the normal priority; programs started from
//! here (git) inherit the lower one.

use std::cell::Cell;

/// Runs `job` on a blocking thread at nice 10.
pub(crate) fn spawn<T, F>(job: F) -> tokio::task::JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(move || {
        lower_priority();
        job()
    })
}

/// Deletes a folder and all in it (a working copy: thousands of files) on
/// a blocking thread; one already gone is fine.
pub(crate) async fn remove_dir(dir: std::path::PathBuf) -> std::io::Result<()> {
    spawn(move || match std::fs::remove_dir_all(&dir) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(err),
        _ => Ok(()),
    })
    .await
    .map_err(std::io::Error::other)?
}

/// Writes a file (a task's test log, its diff) on a blocking thread: a
/// write can wait for the disk while other tasks' checkouts fill it.
pub(crate) async fn write_file(path: std::path::PathBuf, bytes: Vec<u8>) -> std::io::Result<()> {
    spawn(move || std::fs::write(&path, bytes))
        .await
        .map_err(std::io::Error::other)?
}

thread_local! {
    static LOWERED: Cell<bool> = const { Cell::new(false) };
}

/// Nice 10 for the calling thread, once (a thread's priority can be
/// lowered without privileges, not raised again, and blocking threads are
/// reused).
pub(crate) fn lower_priority() {
    if LOWERED.with(|lowered| lowered.replace(true)) {
        return;
    }
    // Ten more than now (setpriority takes a value, not a step: 10 would
    // raise a run started with `nice -n 15`).
    // SAFETY: gettid has no preconditions; getpriority and setpriority of
    // the calling thread's own id only read and change its scheduling.
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        let now = libc::getpriority(libc::PRIO_PROCESS, tid);
        libc::setpriority(libc::PRIO_PROCESS, tid, (now + 10).min(19));
    }
}

/// Runs `job` on a new thread at the run's own priority, for work that must
/// not yield to what it works against: killing a task's runaway processes.
pub(crate) async fn urgent<T, F>(job: F) -> Option<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (sent, done) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("onebash-urgent".to_owned())
        .spawn(move || {
            let _ = sent.send(job());
        })
        .ok()?;
    done.await.ok()
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn blocking_work_runs_at_nice_10() {
        let nice = super::spawn(|| {
            // SAFETY: getpriority of the calling thread has no preconditions.
            unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
        })
        .await
        .expect("joined");
        // SAFETY: as above.
        let own = unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
        assert_eq!(nice, (own + 10).min(19), "this thread: {own}");
    }
}
