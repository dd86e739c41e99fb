//! `--model predictions:FILE` and `--model gold`: another agent's patches
//! graded as onebash's own agents' work, from a predictions file in each
//! of the shapes `run_evaluation` takes, on the host and under each image
//! backend, sharded and merged; a file with bad entries refused before
//! anything runs; a resume with a changed file refused. The verdicts
//! against the swebench package's own code are in
//! `predictions_parity.rs`.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::backend::{Backend, IMAGE, under_each_backend};
use crate::support::harness::{Fixture, RunOutput, diff_of, onebash, task};

const CALC: &str = "def add(a, b):\n    return a - b\n";
const TEST: &str = "python3 -c 'from calc import add; assert add(1, 2) == 3'";

/// Six tasks over one repo, and their predictions (plus one for a task
/// that is not there): `fix` fixes, `wrong` applies but does not fix (and
/// is another model's), `empty` and `null` are empty, `bad` applies in no
/// way, `missing` has none.
struct World {
    fixture: Fixture,
    tasks: PathBuf,
    predictions: Vec<Value>,
}

fn world() -> World {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("calc.py", CALC)]);
    let fix = diff_of(&repo, &[("calc.py", &CALC.replace("a - b", "a + b"))]);
    let wrong = diff_of(&repo, &[("calc.py", &format!("# a comment\n{CALC}"))]);
    let bad = fix.replace("-    return a - b", "-    return a * b");
    let gold = json!({"gold_patch": fix});
    let ids = ["fix", "wrong", "empty", "null", "bad", "missing"];
    let tasks = fixture.tasks(&ids.map(|id| task(id, &repo, &sha, TEST, gold.clone())));
    let prediction = |id: &str, model: &str, patch: Value| json!({"instance_id": id, "model_name_or_path": model, "model_patch": patch});
    let predictions = vec![
        prediction("fix", "agent-a", json!(fix)),
        prediction("wrong", "org/agent-b", json!(wrong)),
        prediction("empty", "agent-a", json!("")),
        prediction("null", "agent-a", Value::Null),
        prediction("bad", "agent-a", json!(bad)),
        prediction("ghost", "agent-a", json!(fix)),
    ];
    World {
        fixture,
        tasks,
        predictions,
    }
}

/// The predictions written in `shape`: `jsonl`, `list` or `keyed`.
fn write_predictions(fixture: &Fixture, predictions: &[Value], shape: &str) -> PathBuf {
    let (name, text) = match shape {
        "jsonl" => (
            "preds.jsonl",
            predictions.iter().map(|p| format!("{p}\n")).collect(),
        ),
        "list" => (
            "preds-list.json",
            serde_json::to_string_pretty(predictions).expect("json"),
        ),
        _ => {
            let keyed: serde_json::Map<String, Value> = predictions
                .iter()
                .map(|p| (p["instance_id"].as_str().expect("id").to_owned(), p.clone()))
                .collect();
            ("preds.json", serde_json::to_string(&keyed).expect("json"))
        }
    };
    let path = fixture.path(name);
    std::fs::write(&path, text).expect("write predictions");
    path
}

fn run_json(out: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).expect("run.json"))
        .expect("run.json is JSON")
}

/// The columns that say what became of each task, by task id.
fn outcomes(run: &RunOutput) -> Vec<(String, String, String, String, String)> {
    let mut rows: Vec<_> = run
        .rows()
        .into_iter()
        .map(|row| {
            (
                row["task_id"].clone(),
                row["model"].clone(),
                row["status"].clone(),
                row["exit_reason"].clone(),
                row["passed"].clone(),
            )
        })
        .collect();
    rows.sort();
    rows
}

/// What every predictions run of [`world`] must give, whatever the shape
/// and wherever it runs.
fn assert_graded_as_predicted(run: &RunOutput, predictions: &Path) {
    assert_eq!(
        run.code, 1,
        "stdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
    let row = |id: &str, model: &str, status: &str, exit_reason: &str| {
        (
            id.to_owned(),
            model.to_owned(),
            status.to_owned(),
            exit_reason.to_owned(),
            (status == "passed").to_string(),
        )
    };
    assert_eq!(
        outcomes(run),
        [
            row("bad", "agent-a", "error", "patch_error"),
            row("empty", "agent-a", "failed", "empty_patch"),
            row("fix", "agent-a", "passed", "completed"),
            row("null", "agent-a", "failed", "empty_patch"),
            row("wrong", "org/agent-b", "failed", "completed"),
        ],
        "stderr:\n{}",
        run.stderr
    );
    let bad = run.row("bad");
    assert!(
        bad["error"]
            .starts_with("the prediction's patch does not apply: patch --batch --fuzz=5 -p1 -i: "),
        "{bad:?}"
    );
    // The patch went in as an agent's change: one bash call, recorded,
    // saying which command worked, and diffed.
    let commands = run.events("fix", "command");
    assert_eq!(commands.len(), 1, "{commands:?}");
    let output = commands[0]["output"].as_str().expect("output");
    assert!(
        output.ends_with("onebash: applied with git apply --verbose\n"),
        "{output}"
    );
    let patch = std::fs::read_to_string(run.task_dir("fix").join("patch.diff")).expect("patch");
    assert!(patch.contains("+    return a + b"), "{patch}");
    // An empty prediction ran nothing: no checkout, no command.
    assert!(run.events("empty", "checkout").is_empty());
    assert!(run.events("null", "command").is_empty());
    // The unknown prediction named, the missing one counted.
    assert!(
        run.stderr
            .contains("the prediction for \"ghost\" names no task of"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("1 selected tasks have no prediction in")
            && run.stderr.contains("are not run: missing"),
        "{}",
        run.stderr
    );
    assert!(
        run.stdout.contains(
            "predictions: 6 in the file; 2 empty (failed, not run); 1 selected tasks without one and 1 for no task, not run"
        ),
        "{}",
        run.stdout
    );
    let settings = &run_json(&run.out)["settings"];
    let recorded = &settings["predictions"];
    assert_eq!(recorded["path"], predictions.display().to_string());
    assert_eq!(recorded["count"], 6);
    assert_eq!(recorded["missing"], json!(["missing"]));
    assert_eq!(recorded["unknown"], json!(["ghost"]));
    assert_eq!(recorded["sha256"].as_str().map(str::len), Some(64));
    assert_eq!(settings["task_count"], 5);
}

#[test]
fn predictions_in_each_shape_are_graded_as_an_agent_s_work() {
    let world = world();
    for (shape, kind) in [("jsonl", "jsonl"), ("list", "list"), ("keyed", "keyed")] {
        let file = write_predictions(&world.fixture, &world.predictions, shape);
        let model = format!("predictions:{}", file.display());
        let out = world.fixture.path(&format!("out-{shape}"));
        let run = world
            .fixture
            .run_into(&out, &world.tasks, &["--model", &model], &[]);
        assert_graded_as_predicted(&run, &file);
        assert_eq!(run_json(&out)["settings"]["predictions"]["shape"], kind);
    }
}

#[test]
fn gold_is_the_oracle_named_as_swebench_names_it() {
    let world = world();
    let run = world.fixture.run(&world.tasks, &["--model", "gold"]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    for row in run.rows() {
        assert_eq!(
            (row["model"].as_str(), row["status"].as_str()),
            ("gold", "passed")
        );
    }
    assert_eq!(run_json(&run.out)["settings"]["model"]["name"], "gold");
}

#[test]
fn a_bad_predictions_file_is_refused_with_every_bad_entry_named() {
    let world = world();
    let path = world.fixture.path("broken.jsonl");
    let first = world.predictions[0].to_string();
    std::fs::write(
        &path,
        format!(
            "{first}\n[1]\n{{\"model_name_or_path\": \"m\", \"model_patch\": \"\"}}\n\
             {{\"instance_id\": \"x\", \"model_name_or_path\": \"m\", \"model_patch\": 1}}\n{first}\n"
        ),
    )
    .expect("write");
    let model = format!("predictions:{}", path.display());
    let run = world.fixture.run(&world.tasks, &["--model", &model]);
    assert_eq!(run.code, 2, "stderr:\n{}", run.stderr);
    let file = path.display().to_string();
    for line in [
        format!("{file}:2: expected a JSON object (a prediction), got a list"),
        format!("{file}:3: missing required field `instance_id`"),
        format!("{file}:4: `model_patch` must be a string or null, got a number"),
        format!("{file}:5: a second prediction for \"fix\" (the first is at line 1)"),
    ] {
        assert!(
            run.stderr.contains(&line),
            "{line}\nnot in:\n{}",
            run.stderr
        );
    }
    assert!(!run.out.join("run.json").exists());
    // A JSON object that is neither a prediction nor a map of them.
    std::fs::write(&path, "{\"fix\": 3}").expect("write");
    let run = world.fixture.run(&world.tasks, &["--model", &model]);
    assert_eq!(run.code, 2, "stderr:\n{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "{file}: entry \"fix\": expected a JSON object (a prediction), got a number"
        )),
        "{}",
        run.stderr
    );
}

#[test]
fn a_resume_with_a_changed_predictions_file_is_refused() {
    let world = world();
    let file = write_predictions(&world.fixture, &world.predictions[..1], "jsonl");
    let model = format!("predictions:{}", file.display());
    let args = ["--model", model.as_str(), "--filter", "^fix$"];
    let run = world.fixture.run(&world.tasks, &args);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    // The same bytes elsewhere resume; other bytes do not.
    let moved = world.fixture.path("moved.jsonl");
    std::fs::copy(&file, &moved).expect("copy");
    let mut other = world.predictions[0].clone();
    other["model_name_or_path"] = json!("agent-z");
    std::fs::write(&file, format!("{other}\n")).expect("write");
    let resume = |path: &Path| {
        let model = format!("predictions:{}", path.display());
        world.fixture.run(
            &world.tasks,
            &["--model", &model, "--filter", "^fix$", "--resume"],
        )
    };
    let refused = resume(&file);
    assert_eq!(refused.code, 2, "stderr:\n{}", refused.stderr);
    assert!(
        refused.stderr.contains("predictions_sha256"),
        "{}",
        refused.stderr
    );
    let resumed = resume(&moved);
    assert_eq!(resumed.code, 0, "stderr:\n{}", resumed.stderr);
}

#[test]
fn sharded_and_merged_predictions_give_the_rows_of_one_run() {
    let world = world();
    let file = write_predictions(&world.fixture, &world.predictions, "keyed");
    let model = format!("predictions:{}", file.display());
    let whole = world.fixture.run(&world.tasks, &["--model", &model]);
    assert_graded_as_predicted(&whole, &file);
    let mut shards = Vec::new();
    for shard in ["1/2", "2/2"] {
        let out = world.fixture.path(&format!("shard-{}", &shard[..1]));
        let run = world.fixture.run_into(
            &out,
            &world.tasks,
            &["--model", &model, "--shard", shard],
            &[],
        );
        assert!(run.code == 0 || run.code == 1, "stderr:\n{}", run.stderr);
        // Each shard's tasks are half the file's; the other half's
        // predictions are not unknown.
        assert_eq!(
            run_json(&out)["settings"]["predictions"]["unknown"],
            json!(["ghost"])
        );
        shards.push(out);
    }
    let merged = world.fixture.path("merged");
    let output = onebash()
        .arg("merge")
        .arg(&merged)
        .args(&shards)
        .output()
        .expect("merge");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let merged_run = RunOutput {
        code: 0,
        stdout: String::new(),
        stderr: String::new(),
        out: merged.clone(),
    };
    assert_eq!(outcomes(&merged_run), outcomes(&whole));
    let settings = &run_json(&merged)["settings"];
    assert_eq!(settings["predictions"]["missing"], json!(["missing"]));
    assert_eq!(settings["predictions"]["unknown"], json!(["ghost"]));
    assert_eq!(settings["task_count"], 5);
}

/// The same predictions in the test image under `backend`: the same rows.
fn predictions_are_graded_in_each_backend(backend: Backend) {
    let world = world();
    let file = write_predictions(&world.fixture, &world.predictions, "keyed");
    let model = format!("predictions:{}", file.display());
    let mut args = vec!["--model".to_owned(), model];
    args.extend(backend.image_flags(&world.fixture, IMAGE));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = world.fixture.run(&world.tasks, &args);
    assert_graded_as_predicted(&run, &file);
}

under_each_backend!(
    predictions_in_images,
    super::predictions_are_graded_in_each_backend
);
