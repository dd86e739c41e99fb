//! A run folder written by an earlier onebash (tests/fixtures/run: an
//! Anthropic run of one demo task against a scripted server, see
//! tests/fixtures/README.md) still reads: `show`, `report` in every
//! format, `compare` and `merge` take it as they took it then.

use std::path::{Path, PathBuf};

use crate::support::harness::{onebash, onebash_ok};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/run")
}

#[test]
fn an_older_run_folder_shows_reports_compares_and_merges() {
    let run = fixture();
    let shown = onebash_ok(&[
        "show".as_ref(),
        run.as_os_str(),
        "calc-divide-by-zero".as_ref(),
    ]);
    assert!(
        shown.contains("task calc-divide-by-zero  epoch 1  model claude-test"),
        "{shown}"
    );
    assert!(
        shown.contains("$ cat calc/ops.py | head -3  [exit 0"),
        "{shown}"
    );
    assert!(shown.contains("result: failed (completed)"), "{shown}");

    let report = onebash_ok(&[
        "report".as_ref(),
        run.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
    ]);
    let report: serde_json::Value = serde_json::from_str(&report).expect("JSON");
    assert_eq!(report["model"], "claude-test");
    assert_eq!(report["failed"], 1);

    let scratch = tempfile::tempdir().expect("tempdir");
    let page = scratch.path().join("report.html");
    onebash_ok(&[
        "report".as_ref(),
        run.as_os_str(),
        "--format".as_ref(),
        "html".as_ref(),
        "--output".as_ref(),
        page.as_os_str(),
    ]);
    let transcript = scratch
        .path()
        .join("transcripts/calc-divide-by-zero.epoch-1.html");
    assert!(transcript.is_file());

    let compared = onebash_ok(&["compare".as_ref(), run.as_os_str(), run.as_os_str()]);
    assert!(!compared.is_empty());

    let merged = scratch.path().join("merged");
    onebash_ok(&["merge".as_ref(), merged.as_os_str(), run.as_os_str()]);
    let text = std::fs::read_to_string(merged.join("run.json")).expect("merged run.json");
    let json: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(json["settings"]["model"]["provider"], "anthropic");
    assert_eq!(json["settings"]["shard"], serde_json::Value::Null);
    assert!(
        merged
            .join("tasks/calc-divide-by-zero/epoch-1/trajectory.jsonl")
            .is_file()
    );
}

/// A folder that is not a run folder gets the same message from every
/// command that reads one.
#[test]
fn a_folder_without_run_json_is_not_a_run_folder() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let dir = scratch.path().as_os_str();
    for args in [
        vec!["show".as_ref(), dir, "t".as_ref()],
        vec!["report".as_ref(), dir],
        vec!["compare".as_ref(), dir, dir],
    ] {
        let output = onebash().args(&args).output().expect("onebash runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?}");
        assert!(
            stderr.contains("is not a run folder (no run.json)"),
            "{args:?}: {stderr}"
        );
    }
}
