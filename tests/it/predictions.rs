//! `--model predictions:FILE` and `--model gold`: another agent's patches
//! graded as onebash's own agents' work, from a predictions file in each
//! of the shapes `run_evaluation` takes, on the host and under each image
//! backend, sharded and merged; a file with bad entries refused before
//! anything runs; a resume with a changed file refused. And the
//! SWE-bench-shaped instances of `swebench_parity.rs` graded from
//! predictions, against what the swebench package's own code (4.1.0 and
//! 5.x) loads, applies and grades of the same predictions.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::backend::{Backend, IMAGE, under_each_backend};
use crate::support::harness::{Fixture, RunOutput, diff_of, fixture_script, onebash, task};

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
    let last = output.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("onebash: applied with git apply --verbose (check "),
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
        run.stderr.contains("1 selected task has no prediction in")
            && run.stderr.contains("is not run: missing"),
        "{}",
        run.stderr
    );
    assert!(
        run.stdout.contains(
            "predictions: 6 in the file; 2 empty (failed, not run); 1 selected task without one and 1 for no task, not run"
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
    ] {
        assert!(
            run.stderr.contains(&line),
            "{line}\nnot in:\n{}",
            run.stderr
        );
    }
    assert!(
        !run.stderr.contains(":5:"),
        "a second prediction is no bad entry:\n{}",
        run.stderr
    );
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

/// Linux caps one argument at 128 KiB: a 300 KiB patch (a line of it
/// longer than a call's piece) goes in all the same, from a prediction and as a gold patch, under `--env host`.
#[test]
fn a_patch_over_the_argument_cap_goes_in() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("calc.py", CALC)]);
    let mut data: String = (0..7000)
        .map(|i| format!("row {i}: some data of the fixture\n"))
        .collect();
    data.push_str(&"x".repeat(90_000));
    data.push('\n');
    let fixed = CALC.replace("a - b", "a + b");
    let patch = diff_of(&repo, &[("calc.py", &fixed), ("data.txt", &data)]);
    assert!(patch.len() > 300 * 1024, "{}", patch.len());
    let test = format!("{TEST} && test \"$(wc -c < data.txt)\" = {}", data.len());
    let tasks = fixture.tasks(&[task(
        "big",
        &repo,
        &sha,
        &test,
        json!({"gold_patch": patch}),
    )]);
    let run = fixture.run_into(
        &fixture.path("out-gold"),
        &tasks,
        &["--model", "gold", "--env", "host"],
        &[],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(run.row("big")["status"], "passed");
    assert!(run.events("big", "command").len() > 4);
    let predictions =
        [json!({"instance_id": "big", "model_name_or_path": "m", "model_patch": patch})];
    let file = write_predictions(&fixture, &predictions, "jsonl");
    let model = format!("predictions:{}", file.display());
    let run = fixture.run_into(
        &fixture.path("out-predictions"),
        &tasks,
        &["--model", &model, "--env", "host"],
        &[],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(run.row("big")["status"], "passed", "{:?}", run.row("big"));
    let commands = run.events("big", "command");
    let output = commands
        .last()
        .and_then(|c| c["output"].as_str())
        .unwrap_or_default();
    assert!(output.contains("onebash: applied with "), "{output}");
    let diff = std::fs::read_to_string(run.task_dir("big").join("patch.diff")).expect("patch");
    assert!(
        !diff.contains(".git/"),
        "the pieces' file is no part of the diff"
    );
}

/// run_evaluation keeps the last prediction of an instance; so does
/// onebash, naming the instance on stderr.
#[test]
fn a_second_prediction_for_an_instance_replaces_the_first() {
    let world = world();
    let fix = &world.predictions[0];
    let mut first = fix.clone();
    first["model_patch"] = world.predictions[4]["model_patch"].clone();
    let file = write_predictions(&world.fixture, &[first, fix.clone()], "jsonl");
    let model = format!("predictions:{}", file.display());
    let run = world
        .fixture
        .run(&world.tasks, &["--model", &model, "--filter", "^fix$"]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(run.row("fix")["status"], "passed");
    assert!(
        run.stderr.contains(&format!(
            "{}: 1 instance has more than one prediction; the last one of each is graded: fix",
            file.display()
        )),
        "{}",
        run.stderr
    );
    assert_eq!(run_json(&run.out)["settings"]["predictions"]["count"], 1);
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

/// What the swebench package makes of `predictions` for `instances`
/// (tests/fixtures/predictions/swebench_predictions.py's answer).
fn package_view(python: &str, predictions: &Path, repo: &Path, instances: &[Value]) -> Value {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("input.json");
    let given = json!({"predictions_path": predictions, "repo": repo, "instances": instances});
    std::fs::write(&input, given.to_string()).expect("write");
    let output = fixture_script(python, "predictions/swebench_predictions.py", [&input]);
    serde_json::from_str(&output).expect("the script's JSON")
}

/// Django-shaped instances graded by SWE-bench's django recipe from
/// predictions in each shape (a full fix, a partial one, an empty patch,
/// one that does not apply, an instance without a prediction and a
/// prediction for no instance), under 4.1's rules and 5.0's: what
/// onebash loads, puts in and grades is what the package's
/// `get_predictions_from_file`, `GIT_APPLY_CMDS` and `get_eval_report`
/// make of the same predictions and onebash's test logs.
#[test]
fn predictions_get_the_swebench_package_s_verdicts() {
    use crate::support::harness::{git, swebench_python, swebench5_python, unittest_name};
    use crate::swebench_parity::{CALC, HIDDEN, RUNTESTS, VISIBLE};
    let pythons: Vec<(String, &str)> = [
        swebench_python().map(|p| (p, "swebench-4.1")),
        swebench5_python().map(|p| (p, "swebench-5.0")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if pythons.is_empty() {
        return;
    }
    let fixture = Fixture::new();
    let (work, _) = fixture.repo(
        "work",
        &[
            ("calc.py", CALC),
            ("tests/runtests.py", RUNTESTS),
            ("tests/calc_tests/__init__.py", ""),
            ("tests/calc_tests/tests.py", VISIBLE),
        ],
    );
    use std::os::unix::fs::PermissionsExt;
    let runner = work.join("tests/runtests.py");
    std::fs::set_permissions(&runner, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    git(&work, &["add", "tests/runtests.py"]);
    git(&work, &["commit", "-q", "-m", "runtests is a program"]);
    let base = git(&work, &["rev-parse", "HEAD"]);
    let mirrors = fixture.mirrors(&work, "django/django");
    let added = CALC.replacen("a - b", "a + b", 1);
    let full = diff_of(
        &work,
        &[(
            "calc.py",
            &added.replacen("a + b\n\n\ndef sub", "a * b\n\n\ndef sub", 1),
        )],
    );
    let partial = diff_of(&work, &[("calc.py", &added)]);
    let bad = full.replace("-    return a - b", "-    return a / b");
    let f2p = [
        unittest_name("calc_tests.tests.CalcTests", "test_add"),
        unittest_name("calc_tests.tests.CalcTests", "test_mul"),
    ];
    let p2p = [unittest_name("calc_tests.tests.CalcTests", "test_sub")];
    let test_patch = diff_of(&work, &[("tests/calc_tests/tests.py", HIDDEN)]);
    let ids = [
        "django__django-1",
        "django__django-2",
        "django__django-3",
        "django__django-4",
        "django__django-5",
    ];
    let rows: Vec<Value> = ids
        .iter()
        .map(|id| {
            json!({
                "instance_id": id,
                "repo": "django/django",
                "base_commit": base,
                "problem_statement": "add() subtracts and mul() adds.",
                "patch": full,
                "test_patch": test_patch,
                "FAIL_TO_PASS": json!(f2p).to_string(),
                "PASS_TO_PASS": json!(p2p).to_string(),
                "version": "4.2",
            })
        })
        .collect();
    let tasks = fixture.tasks(&rows);
    let prediction = |id: &str, patch: Value| json!({"instance_id": id, "model_name_or_path": "org/agent", "model_patch": patch});
    let predictions = [
        prediction(ids[0], json!(full)),
        prediction(ids[1], json!(partial)),
        prediction(ids[2], json!("")),
        prediction(ids[3], json!(bad)),
        prediction("django__django-99", json!(full)),
    ];
    let mirrors = mirrors.display().to_string();
    for (python, rules) in &pythons {
        for shape in ["jsonl", "list", "keyed"] {
            let file = write_predictions(&fixture, &predictions, shape);
            let model = format!("predictions:{}", file.display());
            let out = fixture.path(&format!("out-{rules}-{shape}"));
            let args = [
                "--model",
                &model,
                "--repo-base",
                &mirrors,
                "--grading",
                rules,
            ];
            let run = fixture.run_into(&out, &tasks, &args, &[]);
            assert_eq!(run.code, 1, "{rules} {shape}: stderr:\n{}", run.stderr);
            let instances: Vec<Value> = ids
                .iter()
                .map(|id| {
                    let log = run.task_dir(id).join("test.log");
                    json!({
                        "instance_id": id,
                        "repo": "django/django",
                        "version": "4.2",
                        "FAIL_TO_PASS": f2p,
                        "PASS_TO_PASS": p2p,
                        "test_log": log.exists().then(|| log.display().to_string()),
                    })
                })
                .collect();
            let theirs = package_view(python, &file, &work, &instances);
            let what = format!("{rules} ({}) {shape}", theirs["swebench"]);
            let loaded = theirs["loaded"].as_array().expect("loaded");
            let settings = &run_json(&out)["settings"]["predictions"];
            assert_eq!(settings["count"], loaded.len(), "{what}");
            let known: Vec<&Value> = loaded
                .iter()
                .filter(|p| ids.contains(&p["instance_id"].as_str().unwrap_or_default()))
                .collect();
            let unknown: Vec<&str> = loaded
                .iter()
                .filter_map(|p| p["instance_id"].as_str())
                .filter(|id| !ids.contains(id))
                .collect();
            assert_eq!(settings["unknown"], json!(unknown), "{what}");
            let missing: Vec<&str> = ids
                .iter()
                .copied()
                .filter(|id| !known.iter().any(|p| p["instance_id"] == *id))
                .collect();
            assert_eq!(settings["missing"], json!(missing), "{what}");
            assert_eq!(run.rows().len(), known.len(), "{what}");
            for prediction in known {
                let id = prediction["instance_id"].as_str().expect("id");
                let row = run.row(id);
                assert_eq!(
                    row["model"], prediction["model_name_or_path"],
                    "{what} {id}"
                );
                let ours = (row["status"].as_str(), row["exit_reason"].as_str());
                if prediction["empty"] == true {
                    assert_eq!(ours, ("failed", "empty_patch"), "{what} {id}");
                    continue;
                }
                let applied = theirs["applied"][id].as_bool().expect("applied");
                assert_eq!(
                    row["exit_reason"] != "patch_error",
                    applied,
                    "{what} {id}: {row:?}"
                );
                if !applied {
                    assert_eq!(row["status"], "error", "{what} {id}");
                    continue;
                }
                let resolved = theirs["resolved"][id].as_bool().expect("resolved");
                assert_eq!(row["passed"] == "true", resolved, "{what} {id}: {row:?}");
            }
            // The cases are all there: one resolved, one not, one empty,
            // one that does not apply.
            let outcome: Vec<(String, String)> = ids[..4]
                .iter()
                .map(|id| {
                    let row = run.row(id);
                    (row["status"].clone(), row["exit_reason"].clone())
                })
                .collect();
            let expected = [
                ("passed", "completed"),
                ("failed", "completed"),
                ("failed", "empty_patch"),
                ("error", "patch_error"),
            ]
            .map(|(s, e)| (s.to_owned(), e.to_owned()));
            assert_eq!(outcome, expected, "{what}");
        }
    }
}
