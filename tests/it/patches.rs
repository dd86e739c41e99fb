//! The agent's patch (`patch.diff`, and `model_patch` in predictions.jsonl)
//! applies with `git apply` to the base commit, whatever the agent's
//! commands left in the working copy: build artefacts (`__pycache__`,
//! `.pyc`, `.o`, test caches) are left out, binary files go in as
//! full-index binary hunks, and a text file that is not UTF-8 goes in as
//! binary so its bytes survive. (Every run of the test suite also checks
//! its patches apply: `support::harness::assert_patches_apply`.)

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::harness::{Fixture, git, scripted_agent, task};

/// Bytes the agent writes, as `printf` escapes and as bytes.
const LOGO: (&str, &[u8]) = (r"PNG\000\001\002\377", b"PNG\x00\x01\x02\xff");
const NEW_BINARY: (&str, &[u8]) = (r"\000\377\376 new", b"\x00\xff\xfe new");
const LATIN1: (&str, &[u8]) = (r"caf\351\n", b"caf\xe9\n");
const NEW_LATIN1: (&str, &[u8]) = (r"r\351sum\351\n", b"r\xe9sum\xe9\n");

#[test]
fn a_patch_leaves_build_artefacts_out_and_applies_with_binary_and_latin1_files() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo(
        "repo",
        &[
            ("mod.py", "X = 1\n"),
            ("logo.bin", "PNG\0\u{1}"),
            ("latin.txt", "cafe\n"),
            ("gone.txt", "to delete\n"),
        ],
    );
    let commands = [
        // Artefacts of running the code and its tests, and of a build.
        "python3 -c 'import mod' && test -d __pycache__".to_owned(),
        "mkdir -p .pytest_cache/v && echo '{}' > .pytest_cache/v/lastfailed".to_owned(),
        r"printf '\177ELF\000' > native.o && mkdir -p pkg.egg-info && echo x > pkg.egg-info/PKG-INFO"
            .to_owned(),
        // The change itself.
        "echo 'X = 2' > mod.py && rm gone.txt".to_owned(),
        format!("printf '{}' > logo.bin", LOGO.0),
        format!("mkdir -p data && printf '{}' > data/new.bin", NEW_BINARY.0),
        format!("printf '{}' > latin.txt", LATIN1.0),
        format!("printf '{}' > notes.txt", NEW_LATIN1.0),
        "chmod +x mod.py".to_owned(),
    ];
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    let server = scripted_agent(&[("t", &commands)]);
    let tasks = fixture.tasks(&[task("t", &repo, &sha, "true", json!({}))]);
    let run = fixture.run_scripted(&tasks, &server, &[]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(run.row("t")["status"], "passed");
    for command in run.events("t", "command") {
        assert_eq!(command["exit_code"], 0, "{command}");
    }

    let patch = std::fs::read_to_string(run.task_dir("t").join("patch.diff")).expect("patch");
    for artefact in [
        "__pycache__",
        ".pyc",
        ".pytest_cache",
        "native.o",
        "egg-info",
    ] {
        assert!(
            !patch.contains(artefact),
            "{artefact} is in the patch:\n{patch}"
        );
    }
    assert!(
        !patch.contains("Binary files"),
        "an unappliable binary diff:\n{patch}"
    );
    for binary in ["logo.bin", "data/new.bin", "latin.txt", "notes.txt"] {
        let header = format!("diff --git a/{binary} b/{binary}");
        let section = patch
            .split("diff --git ")
            .find(|s| format!("diff --git {s}").starts_with(&header))
            .unwrap_or_else(|| panic!("{binary} is not in the patch:\n{patch}"));
        assert!(section.contains("GIT binary patch"), "{binary}:\n{section}");
    }

    // Applied to a fresh clone at the base, the patch gives the agent's files.
    let fresh = fixture.path("fresh");
    git(
        fixture.dir.path(),
        &["clone", "-q", &repo.display().to_string(), "fresh"],
    );
    git(&fresh, &["checkout", "-q", &sha]);
    let applied = Command::new("git")
        .args(["apply", "--whitespace=nowarn"])
        .arg(run.task_dir("t").join("patch.diff"))
        .current_dir(&fresh)
        .output()
        .expect("git apply");
    assert!(
        applied.status.success(),
        "git apply: {}",
        String::from_utf8_lossy(&applied.stderr)
    );
    let read =
        |path: &str| std::fs::read(fresh.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert_eq!(read("mod.py"), b"X = 2\n");
    assert_eq!(read("logo.bin"), LOGO.1);
    assert_eq!(read("data/new.bin"), NEW_BINARY.1);
    assert_eq!(read("latin.txt"), LATIN1.1);
    assert_eq!(read("notes.txt"), NEW_LATIN1.1);
    assert!(!fresh.join("gone.txt").exists());
    assert!(is_executable(&fresh.join("mod.py")));
    assert!(!fresh.join("__pycache__").exists());

    // The prediction is the same patch.
    let predictions =
        std::fs::read_to_string(run.out.join("predictions.jsonl")).expect("predictions");
    let prediction: Value = serde_json::from_str(predictions.trim()).expect("one JSON line");
    assert_eq!(prediction["model_patch"], patch.as_str());
}

#[test]
fn a_tracked_file_that_looks_like_an_artefact_stays_in_the_patch() {
    // The rule is about what the agent's commands left behind: a file the
    // base commit has is part of the repo, and a change to it is a change.
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo(
        "repo",
        &[
            ("vendored/lib.so", "so v1\n"),
            ("__pycache__/keep.txt", "kept\n"),
        ],
    );
    let server = scripted_agent(&[(
        "t",
        &["echo 'so v2' > vendored/lib.so && echo changed > __pycache__/keep.txt"],
    )]);
    let tasks = fixture.tasks(&[task("t", &repo, &sha, "true", json!({}))]);
    let run = fixture.run_scripted(&tasks, &server, &[]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let patch = std::fs::read_to_string(run.task_dir("t").join("patch.diff")).expect("patch");
    assert!(patch.contains("+so v2"), "{patch}");
    assert!(patch.contains("+changed"), "{patch}");
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}
