//! The host's processes, for the tests of what a task leaves running
//! (exec_safety.rs, sandbox.rs): finding them by command line, waiting for
//! them to go and killing those that do not; and how long a command may
//! take to come back.

use std::time::{Duration, Instant};

use serde_json::Value;

/// A bound on how long a command that should return at once, or at its
/// timeout, may take: a hang guard far above any machine's need, and far
/// below the ten minutes the sleeps these tests leave behind would hold a
/// command that waited for them.
pub const PROMPTLY: f64 = 120.0;

/// How long a `command`, `setup` or `test` event says its command took.
pub fn duration_s(event: &Value) -> f64 {
    event["duration_s"].as_f64().expect("duration_s")
}

/// A process of the host: pid and command line.
pub type Process = (u32, String);

/// The processes whose command line contains `needle` (arguments joined by
/// spaces), other than this test process. Zombies have an empty command
/// line and are not counted: they hold nothing.
pub fn processes_matching(needle: &str) -> Vec<Process> {
    let own = std::process::id();
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == own {
            continue;
        }
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&raw)
            .split('\0')
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        if cmdline.contains(needle) {
            found.push((pid, cmdline));
        }
    }
    found
}

/// Whether a process whose whole command line is `command` runs (not a
/// shell whose script mentions it).
pub fn running(command: &str) -> bool {
    processes_matching(command)
        .iter()
        .any(|(_, cmdline)| cmdline == command)
}

/// Waits up to `wait` for every process matching one of `needles` to be
/// gone; returns those still there.
pub fn left_after(needles: &[&str], wait: Duration) -> Vec<Process> {
    let deadline = Instant::now() + wait;
    loop {
        let left: Vec<Process> = needles
            .iter()
            .flat_map(|needle| processes_matching(needle))
            .collect();
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Asserts that no process matching `needle` is left, allowing killed
/// processes time to be torn down (a hang guard: they are usually gone at
/// once); kills any that are, so they do not outlive the test.
pub fn assert_no_process_left(needle: &str) {
    let left = left_after(&[needle], Duration::from_secs(30));
    for (pid, _) in &left {
        if let Ok(pid) = libc::pid_t::try_from(*pid) {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
    assert!(
        left.is_empty(),
        "processes left behind after the run: {left:?}"
    );
}
