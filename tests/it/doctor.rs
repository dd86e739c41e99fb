//! `onebash doctor`: what it says with everything on PATH and with bwrap,
//! podman (and git) hidden from it, and that its verdict is what `run`
//! then does, in the same words (both come from the run's probe).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::harness::{onebash, tool_present};

/// The repository, where tasks/demo is.
fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `onebash ARGS` with `path` as PATH (the caller's own when `None`).
fn onebash_with(path: Option<&Path>, args: &[&str]) -> Output {
    let mut command = onebash();
    command.args(args).current_dir(repo_root());
    if let Some(path) = path {
        command.env("PATH", path);
    }
    command.output().expect("run onebash")
}

/// `doctor --offline --format json`: its exit code and each check's
/// (verdict, detail, hint) by name.
fn doctor(path: Option<&Path>, cache: &Path) -> (i32, HashMap<String, (String, String, String)>) {
    let cache = cache.to_str().expect("UTF-8 path");
    let out = onebash_with(
        path,
        &[
            "doctor",
            "--offline",
            "--format",
            "json",
            "--cache-dir",
            cache,
        ],
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|err| {
        panic!(
            "doctor's JSON: {err}\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let field = |check: &Value, key: &str| check[key].as_str().unwrap_or("").to_owned();
    let checks = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .map(|check| {
            (
                field(check, "name"),
                (
                    field(check, "verdict"),
                    field(check, "detail"),
                    field(check, "hint"),
                ),
            )
        })
        .collect();
    (out.status.code().unwrap_or(-1), checks)
}

/// A program's real file: python3 may be a pyenv shim, which does not
/// work without pyenv on PATH.
fn real_program(program: &str) -> PathBuf {
    if program == "python3" {
        let out = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("python3");
        return PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| panic!("{program} is not on PATH"))
}

/// A folder for PATH holding only `programs`.
fn path_of(dir: &Path, programs: &[&str]) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir bin");
    for program in programs {
        std::os::unix::fs::symlink(real_program(program), bin.join(program)).expect("symlink");
    }
    bin
}

const KEPT: [&str; 10] = [
    "bash", "sh", "git", "env", "cat", "ls", "true", "mktemp", "rm", "python3",
];

fn present(program: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|dir| dir.join(program).is_file())
}

#[test]
fn doctor_with_everything_on_path_says_each_environment_runs() {
    let found = present("bwrap") && present("podman");
    if !tool_present(found, "bwrap and podman", "install bubblewrap and podman") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, checks) = doctor(None, dir.path());
    assert_eq!(code, 0, "{checks:?}");
    for name in [
        "host --sandbox bwrap",
        "host --sandbox none",
        "--env podman",
        "--env oci",
        "git",
        "bash",
        "python3",
        "default env",
    ] {
        assert_eq!(checks[name].0, "ok", "{name}: {:?}", checks[name]);
    }
    assert!(checks["git"].1.starts_with("git version"), "{checks:?}");
    assert!(checks["--env podman"].1.contains("version "), "{checks:?}");
    assert!(checks["cache"].1.contains("GiB free"), "{checks:?}");
    assert_eq!(checks["network"].1, "not checked (--offline)");

    // The text: one line per check, its verdict first.
    let out = onebash_with(None, &["doctor", "--offline"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|line| line.starts_with("ok ") && line.contains("--env podman")),
        "{text}"
    );
}

#[test]
fn doctor_without_bwrap_and_podman_says_so_and_run_then_fails_the_same_way() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = path_of(dir.path(), &KEPT);
    let (code, checks) = doctor(Some(&bin), &dir.path().join("cache"));
    // The default environment (the host, --sandbox auto) still runs, with
    // no sandbox: exit 0, a warning.
    assert_eq!(code, 0, "{checks:?}");
    assert_eq!(checks["default env"].0, "warn", "{checks:?}");
    let (verdict, bwrap_reason, bwrap_hint) = &checks["host --sandbox bwrap"];
    assert_eq!(verdict, "no");
    assert_eq!(bwrap_reason, "--sandbox bwrap: bwrap is not on PATH");
    assert!(bwrap_hint.contains("bubblewrap"), "{bwrap_hint}");
    let (verdict, podman_reason, podman_hint) = &checks["--env podman"];
    assert_eq!(verdict, "no");
    assert!(
        podman_reason.contains("`podman` is not on PATH"),
        "{podman_reason}"
    );
    assert_eq!(checks["--env oci"].0, "no", "{checks:?}");
    assert_eq!(checks["host --sandbox none"].0, "ok", "{checks:?}");
    assert_eq!(checks["python3"].0, "ok", "{checks:?}");

    // `run` stops before its first task, with the same words.
    let out = dir.path().join("out-bwrap");
    let run = onebash_with(
        Some(&bin),
        &[
            "run",
            "tasks/demo/tasks.jsonl",
            "-m",
            "oracle",
            "--sandbox",
            "bwrap",
            "-o",
            out.to_str().expect("UTF-8 path"),
        ],
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("error: {bwrap_reason}\nhint: {bwrap_hint}")),
        "{stderr}"
    );
    assert!(!out.join("results.csv").exists());

    let out = dir.path().join("out-podman");
    let run = onebash_with(
        Some(&bin),
        &[
            "run",
            "tasks/demo/tasks.jsonl",
            "-m",
            "oracle",
            "--env",
            "podman",
            "--image",
            "busybox",
            "-o",
            out.to_str().expect("UTF-8 path"),
        ],
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("error: {podman_reason}\nhint: {podman_hint}")),
        "{stderr}"
    );
    assert!(!out.join("results.csv").exists());
}

#[test]
fn doctor_without_git_says_the_default_environment_cannot_run_and_exits_1() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kept: Vec<&str> = KEPT.into_iter().filter(|p| *p != "git").collect();
    let bin = path_of(dir.path(), &kept);
    let (code, checks) = doctor(Some(&bin), &dir.path().join("cache"));
    assert_eq!(code, 1, "{checks:?}");
    assert_eq!(checks["git"].0, "no", "{checks:?}");
    assert!(checks["git"].2.contains("install git"), "{checks:?}");
    assert_eq!(checks["default env"].0, "no", "{checks:?}");
}
