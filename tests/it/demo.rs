//! The demo task set: the oracle passes every task, a model that changes
//! nothing fails every task, and the run folder holds what CONTRACT.md says.

use serde_json::Value;

use crate::support::harness::{Fixture, onebash};
use crate::support::server::{ScriptedServer, text_reply};

fn demo_tasks() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/demo/tasks.jsonl")
}

#[test]
fn oracle_passes_every_demo_task() {
    let fixture = Fixture::new();
    let run = fixture.run(&demo_tasks(), &["--model", "oracle", "-j", "3"]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let rows = run.rows();
    assert!(rows.len() >= 5);
    for row in &rows {
        assert_eq!(row["status"], "passed", "{row:?}");
        assert_eq!(row["exit_reason"], "completed");
        assert_eq!(row["passed"], "true");
        assert_eq!(row["turns"], "2");
        assert_eq!(row["tool_calls"], "1");
        assert_eq!(row["test_exit_code"], "0");
        let dir = run.task_dir(&row["task_id"]);
        let diff = std::fs::read_to_string(dir.join("patch.diff")).expect("patch.diff");
        assert!(diff.starts_with("diff --git"), "{diff}");
        assert!(dir.join("test.log").exists());
    }
    assert!(run.stdout.contains("passed"), "{}", run.stdout);
    let run_json: Value =
        serde_json::from_str(&std::fs::read_to_string(run.out.join("run.json")).expect("run.json"))
            .expect("json");
    assert_eq!(run_json["onebash_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        run_json["summary"]["passed"].as_u64(),
        Some(rows.len() as u64)
    );
    // Working copies are deleted when their task ends.
    let workdirs = run.out.join("workdirs");
    assert!(!workdirs.exists() || std::fs::read_dir(&workdirs).expect("read").next().is_none());
}

#[test]
fn a_model_that_changes_nothing_fails_every_demo_task() {
    let server =
        ScriptedServer::start_with(|_| text_reply("I will not change anything.", "stop", 10, 2));
    let fixture = Fixture::new();
    let run = fixture.run(
        &demo_tasks(),
        &["--model", "lazy", "--base-url", &server.base_url()],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    for row in run.rows() {
        assert_eq!(row["status"], "failed", "{row:?}");
        assert_eq!(row["exit_reason"], "completed");
        assert_eq!(row["turns"], "1");
        assert_eq!(row["total_tokens"], "12");
        assert_ne!(row["test_exit_code"], "0");
    }
}

#[test]
fn help_explains_run_with_an_example() {
    let output = onebash().args(["run", "--help"]).output().expect("help");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success());
    for flag in [
        "--model",
        "--jobs",
        "--max-turns",
        "--command-timeout",
        "--out",
        "Example",
    ] {
        assert!(text.contains(flag), "{flag} missing from:\n{text}");
    }
}

#[test]
fn report_shows_pass_at_k_for_a_three_epoch_run() {
    let fixture = Fixture::new();
    let run = fixture.run(
        &demo_tasks(),
        &["--model", "oracle", "--runs", "3", "--filter", "^calc-"],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let output = onebash()
        .arg("report")
        .arg(&run.out)
        .output()
        .expect("report");
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("rows: 12 (4 tasks x 3 epochs)"), "{text}");
    assert!(
        text.contains("pass rate: 100.0% (12/12 rows with a verdict)"),
        "{text}"
    );
    for k in 1..=3 {
        assert!(
            text.contains(&format!("\n{k}  100.0%  100.0%      4\n")),
            "k={k}:\n{text}"
        );
    }
    let json = onebash()
        .arg("report")
        .arg(&run.out)
        .args(["--format", "json"])
        .output()
        .expect("report");
    let value: Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(value["pass_at_k"].as_array().map(Vec::len), Some(3));
    assert_eq!(value["epochs"], 3);
}

#[test]
fn prompt_variants_are_named_in_rows_and_undefined_variables_stop_the_run() {
    let fixture = Fixture::new();
    let terse = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts/terse.toml");
    let run = fixture.run(
        &demo_tasks(),
        &[
            "--model",
            "oracle",
            "--prompt",
            terse.to_str().expect("utf-8 path"),
            "--limit",
            "2",
        ],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    for row in run.rows() {
        assert!(row["prompt"].starts_with("terse@"), "{row:?}");
        assert_eq!(row["prompt"].len(), "terse@".len() + 12);
    }
    let header = &run.trajectory(&run.rows()[0]["task_id"])[0];
    assert_eq!(header["prompt"]["name"], "terse");
    assert_eq!(header["prompt"]["sha256"].as_str().map(str::len), Some(64));

    let broken = fixture.path("broken.toml");
    std::fs::write(
        &broken,
        "system = \"{{ task.metadata.nope }}\"\ninstance = \"x\"\n",
    )
    .expect("write");
    let out = fixture.path("never");
    let output = onebash()
        .args(["run"])
        .arg(demo_tasks())
        .args(["--model", "oracle", "--prompt"])
        .arg(&broken)
        .arg("-o")
        .arg(&out)
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("failed to render the system template"),
        "{stderr}"
    );
    assert!(!out.exists(), "nothing ran");
}
