//! What the test binary skipped, where the user sees it. libtest captures
//! what a passing test prints with `eprintln!`, so a note of a skip there
//! is never seen, and a newcomer on a machine without bwrap or podman
//! believes the sandbox and the containers were tested. A skip here is
//! written to the process's stderr itself (libtest captures the print
//! macros only, not writes to the stream), once per reason as it happens,
//! and again in a summary when the binary exits, after libtest's own
//! result line.
//!
//! Owns the record of skips and the summary; whether a missing tool may be
//! skipped at all (not under `CI`) is `harness::tool_present`'s rule.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Mutex, Once, PoisonError};

/// For each reason a test was skipped: its hint and how many tests.
static SKIPS: Mutex<BTreeMap<String, (String, usize)>> = Mutex::new(BTreeMap::new());

/// The summary's first words, which a test of this reads.
pub const SUMMARY: &str = "onebash tests: skipped";

/// Records that the running test is skipped because `what` (a tool, or
/// something of the machine) is missing, with `hint` saying how to get it.
/// The first skip of each reason is written to stderr at once.
pub fn skipped(what: &str, hint: &str) {
    static AT_EXIT: Once = Once::new();
    AT_EXIT.call_once(|| {
        // SAFETY: `print_summary` is an `extern "C" fn()` that does not
        // unwind (it catches nothing that could panic: a poisoned lock is
        // taken as it is, and write errors are ignored).
        unsafe { libc::atexit(print_summary) };
    });
    let first = {
        let mut skips = SKIPS.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = skips
            .entry(what.to_owned())
            .or_insert_with(|| (hint.to_owned(), 0));
        entry.1 += 1;
        entry.1 == 1
    };
    if first {
        let _ = writeln!(
            std::io::stderr(),
            "skipped: {what} is missing ({hint}); every test that needs it is skipped"
        );
    }
}

/// The summary, when anything was skipped.
fn summary() -> Option<String> {
    let skips = SKIPS.lock().unwrap_or_else(PoisonError::into_inner);
    if skips.is_empty() {
        return None;
    }
    let total: usize = skips.values().map(|(_, count)| count).sum();
    let mut text = format!(
        "\n{SUMMARY} {total} test{} whose tools this machine lacks (with CI set, each fails instead):\n",
        if total == 1 { "" } else { "s" }
    );
    for (what, (hint, count)) in skips.iter() {
        text.push_str(&format!("  {what}: {count} skipped; {hint}\n"));
    }
    Some(text)
}

extern "C" fn print_summary() {
    if let Some(text) = summary() {
        let _ = std::io::stderr().write_all(text.as_bytes());
    }
}
