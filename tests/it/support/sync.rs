//! Waiting on events instead of on time: a latch the scripted model's
//! handlers can wait at, and a poll for a condition. Every wait is bounded
//! by [`HANG_GUARD`], a guard against hangs far above what the slowest
//! machine needs, never a measure of speed.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a test or a handler waits for an event before it gives up.
pub const HANG_GUARD: Duration = Duration::from_secs(120);

/// A flag opened once; waiters block until it is.
#[derive(Clone, Default)]
pub struct Latch(Arc<(Mutex<bool>, Condvar)>);

impl Latch {
    /// A shut latch.
    pub fn new() -> Latch {
        Latch::default()
    }

    pub fn open(&self) {
        let (open, changed) = &*self.0;
        *open.lock().unwrap_or_else(PoisonError::into_inner) = true;
        changed.notify_all();
    }

    /// Waits until the latch is open, at most [`HANG_GUARD`] (so a failed
    /// test leaves nothing waiting for long); whether it is.
    pub fn wait(&self) -> bool {
        let (open, changed) = &*self.0;
        let guard = open.lock().unwrap_or_else(PoisonError::into_inner);
        let (open, _) = changed
            .wait_timeout_while(guard, HANG_GUARD, |open| !*open)
            .unwrap_or_else(PoisonError::into_inner);
        *open
    }
}

/// Waits until `done`, polling, at most `limit`; whether it came.
pub fn eventually_within(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !done() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// [`eventually_within`] [`HANG_GUARD`].
pub fn eventually(done: impl FnMut() -> bool) -> bool {
    eventually_within(HANG_GUARD, done)
}
