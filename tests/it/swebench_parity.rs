//! SWE-bench's verdicts, checked against the `swebench` package itself:
//! recorded eval logs of every log parser the Python repos use (oracle,
//! noop and partial runs, tests/fixtures/swebench-logs/) go through
//! onebash's parser and grading and through the package's
//! `MAP_REPO_TO_PARSER`, `get_logs_eval`, `get_eval_tests_report`,
//! `get_resolution_status` and `get_eval_report`; statuses and verdicts
//! must be the same.

use std::path::{Path, PathBuf};
use std::process::Command;

use onebash::swebench_log::{StatusMap, grade_output};
use onebash::swebench_spec::eval_for;
use serde_json::{Value, json};

use crate::support::harness::swebench_python;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/swebench-logs")
}

/// The cases of cases.json, their log paths made absolute.
fn cases() -> Vec<Value> {
    let text = std::fs::read_to_string(fixtures().join("cases.json")).expect("cases.json");
    let mut cases: Vec<Value> = serde_json::from_str(&text).expect("a JSON list");
    for case in &mut cases {
        let log = fixtures().join(case["log"].as_str().expect("log"));
        case["log_path"] = json!(log.display().to_string());
    }
    cases
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .expect("a list")
        .iter()
        .map(|v| v.as_str().expect("a string").to_owned())
        .collect()
}

/// onebash's reading of one case: statuses, resolution, resolved.
fn onebash(case: &Value) -> (StatusMap, String, bool) {
    let repo = case["repo"].as_str().expect("repo");
    let version = case["version"].as_str().expect("version");
    let eval = eval_for(repo, version, "").unwrap_or_else(|err| panic!("{repo}: {err}"));
    let log = std::fs::read_to_string(case["log_path"].as_str().expect("path")).expect("log");
    let graded = grade_output(
        eval.parser,
        eval.fail_only,
        &log,
        &strings(&case["FAIL_TO_PASS"]),
        &strings(&case["PASS_TO_PASS"]),
    );
    let resolution = serde_json::to_value(graded.verdict.resolution).expect("serializes");
    (
        graded.statuses,
        resolution.as_str().unwrap_or_default().to_owned(),
        graded.verdict.resolved,
    )
}

#[test]
fn recorded_logs_grade_as_the_fixtures_say() {
    // Runs without the package too: oracle RESOLVED_FULL, noop
    // RESOLVED_NO, partial RESOLVED_PARTIAL.
    let wrong: Vec<String> = cases()
        .iter()
        .filter_map(|case| {
            // The odd-lines log only checks statuses against the package.
            let expected = case["expect"].as_str()?;
            let (_, resolution, resolved) = onebash(case);
            (resolution != expected || resolved != (expected == "RESOLVED_FULL"))
                .then(|| format!("{}: {resolution} (expected {expected})", case["name"]))
        })
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn recorded_logs_grade_as_the_swebench_package_grades_them() {
    let Some(python) = swebench_python() else {
        return;
    };
    let cases = cases();
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("cases.json");
    std::fs::write(&input, serde_json::to_vec(&cases).expect("json")).expect("write");
    let output = Command::new(&python)
        .arg(fixtures().join("swebench_grade.py"))
        .arg(&input)
        .output()
        .expect("python runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let theirs: Value = serde_json::from_slice(&output.stdout).expect("the script's JSON");
    assert_eq!(
        theirs["swebench"].as_str(),
        Some(onebash::swebench_spec::specs().swebench_version.as_str()),
        "the package is not the version the data was generated from"
    );
    let mut wrong = Vec::new();
    for (case, theirs) in cases.iter().zip(theirs["results"].as_array().expect("results")) {
        let (statuses, resolution, resolved) = onebash(case);
        let their_statuses: StatusMap =
            serde_json::from_value(theirs["statuses"].clone()).expect("a status map");
        if statuses != their_statuses {
            wrong.push(format!(
                "{}: statuses\n  onebash: {statuses:?}\n  swebench: {their_statuses:?}",
                case["name"]
            ));
        }
        if resolution != theirs["resolution"] || resolved != theirs["resolved"] {
            wrong.push(format!(
                "{}: onebash {resolution} resolved={resolved}, swebench {} resolved={}",
                case["name"], theirs["resolution"], theirs["resolved"]
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
