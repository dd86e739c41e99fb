//! `.ci/run`'s apt step (`scripts/apt-get-locked.sh`), against a stub
//! `apt-get` on PATH: a lock held by another apt or dpkg is waited for
//! (bounded), any other failure is final at once.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::harness::Fixture;

/// A stub `apt-get` that fails as apt does on a held lock for its first
/// `locked` calls, then exits `last`; each call appends its arguments to
/// `calls` in the fixture.
fn stub_apt(fixture: &Fixture, locked: u32, last: i32) -> String {
    let bin = fixture.path("bin");
    std::fs::create_dir_all(&bin).expect("mkdir bin");
    let calls = fixture.path("calls");
    let script = format!(
        "#!/bin/bash\n\
         echo \"$*\" >> '{calls}'\n\
         n=$(wc -l < '{calls}')\n\
         if [ \"$n\" -le {locked} ]; then\n\
           echo 'E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (apt-get)' >&2\n\
           exit 100\n\
         fi\n\
         if [ {last} -ne 0 ]; then echo 'E: Unable to locate package nosuch' >&2; fi\n\
         echo done\n\
         exit {last}\n",
        calls = calls.display(),
    );
    let path = bin.join("apt-get");
    std::fs::write(&path, script).expect("write stub");
    let mut perms = std::fs::metadata(&path).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).expect("chmod");
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn run(fixture: &Fixture, path: &str, wait: &str) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/apt-get-locked.sh");
    Command::new("bash")
        .arg(script)
        .args(["install", "-y", "bubblewrap"])
        .env("PATH", path)
        .env("ONEBASH_APT_LOCK_WAIT", wait)
        .env("ONEBASH_APT_RETRY_SECONDS", "0")
        .current_dir(fixture.path(""))
        .output()
        .expect("run apt-get-locked.sh")
}

fn calls(fixture: &Fixture) -> Vec<String> {
    std::fs::read_to_string(fixture.path("calls"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Another dpkg held the lock for two tries: the third goes through, with
/// apt's own lock timeout passed on and the arguments kept.
#[test]
fn apt_waits_for_a_lock_another_dpkg_holds() {
    let fixture = Fixture::new();
    let path = stub_apt(&fixture, 2, 0);
    let out = run(&fixture, &path, "600");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
    let calls = calls(&fixture);
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert!(
        calls
            .iter()
            .all(|c| c == "-o DPkg::Lock::Timeout=0 install -y bubblewrap"),
        "{calls:?}"
    );
    assert_eq!(stderr.matches("holds its lock").count(), 2, "{stderr}");
}

/// A failure that is not a lock is final at once, with apt's message and
/// exit code.
#[test]
fn apt_fails_at_once_on_anything_but_a_lock() {
    let fixture = Fixture::new();
    let path = stub_apt(&fixture, 0, 100);
    let out = run(&fixture, &path, "600");
    assert_eq!(out.status.code(), Some(100));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Unable to locate package nosuch"));
    assert_eq!(calls(&fixture).len(), 1);
}

/// The wait is bounded: a lock still held when the time is up ends it,
/// with apt's message and a line saying why.
#[test]
fn apt_gives_up_on_a_lock_held_past_the_bound() {
    let fixture = Fixture::new();
    let path = stub_apt(&fixture, u32::MAX, 0);
    let out = run(&fixture, &path, "0");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(100), "{stderr}");
    assert!(stderr.contains("Could not get lock"), "{stderr}");
    assert!(stderr.contains("still held its lock after 0 s"), "{stderr}");
    assert_eq!(calls(&fixture).len(), 1);
}
