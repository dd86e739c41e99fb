//! `onebash regrade`: a run folder graded again from its saved test logs.
//! It reproduces the run's verdicts exactly; under the other rule set it
//! changes exactly the rows where swebench 4.1 and 5.0 disagree (a skipped
//! FAIL_TO_PASS test of a SWE-bench instance, PASSED lines printed by a
//! patch or a test command that then exits 1), as a live run by those rules does; it works
//! in place (with a backup), on shards and on merged folders, and names a
//! damaged row while it regrades the rest. And SWE-bench's report files
//! beside onebash's: each (task, epoch)'s report.json and `report --format
//! swebench` are what the `swebench` package's own report code makes of
//! the same logs (4.1.0 and 5.0.2).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::harness::{
    Fixture, RunOutput, diff_of, fixture_script, onebash, swebench_python, swebench5_python, task,
};
use crate::swebench_parity::{DjangoShaped, HIDDEN};

/// The hidden tests of the instance whose FAIL_TO_PASS test_add is skipped.
const SKIPPING: &str = "import unittest\nfrom calc import add, mul, sub\n\n\nclass CalcTests(unittest.TestCase):\n    def test_sub(self):\n        self.assertEqual(sub(3, 1), 2)\n\n    @unittest.skip('not today')\n    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n\n    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n";

/// The rows the two rule sets disagree on, and what 5.0 makes of them.
const DISAGREE: [&str; 3] = [
    "django__django-1 epoch 1: passed -> failed",
    "django__django-3 epoch 1: passed -> failed",
    "spoof epoch 1: passed -> failed",
];

/// A prediction's calc.py that prints the runner's `... ok` line of every
/// listed test, then leaves with status 1 before any test runs: a patch
/// that spoofs its verdict (5.0's exit-code rule).
fn spoofing_calc(names: &[String]) -> String {
    let lines: String = names
        .iter()
        .map(|name| format!("{name} ... ok\n"))
        .collect();
    format!("import os, sys\nsys.stderr.write({lines:?})\nsys.stderr.flush()\nos._exit(1)\n")
}

/// Tasks of every kind a run folder holds, graded from predictions (the
/// task's gold patch but for one) on the host: three SWE-bench instances
/// graded by the package's django recipe (the first with a skipped
/// FAIL_TO_PASS test, the third's prediction spoofing the runner's `ok`
/// lines and exiting 1: [`spoofing_calc`]), onebash tasks with test lists (one whose command prints a PASSED
/// line and exits 1, one that fails with a log 5.0 classifies), one
/// without lists, one whose tests time out, one whose repo is missing (a
/// checkout error: no test log), one whose prediction is empty and one
/// without a prediction.
struct World {
    fixture: Fixture,
    tasks: PathBuf,
    predictions: PathBuf,
    mirrors: PathBuf,
    f2p: Vec<String>,
    p2p: Vec<String>,
}

/// The predictions' model, with the `/` run_evaluation's folders replace.
const MODEL: &str = "org/model";

fn world() -> World {
    let fixture = Fixture::new();
    let django = DjangoShaped::new(&fixture);
    let instance = |id: &str, hidden: &str| django.instance(id, "4.2", hidden);
    let (plain, plain_base) = fixture.repo("plain", &[("README", "plain\n")]);
    let change = diff_of(&plain, &[("README", "plain, changed\n")]);
    let own = |id: &str, command: &str, extra: Value| {
        let mut line = task(id, &plain, &plain_base, command, extra);
        line["gold_patch"] = json!(change);
        line
    };
    let listed = json!({"fail_to_pass": ["tests/t.py::test_a"]});
    let names = [&django.f2p[..], &django.p2p[..]].concat();
    let spoof = diff_of(&django.work, &[("calc.py", &spoofing_calc(&names))]);
    let tasks = fixture.tasks(&[
        instance("django__django-1", SKIPPING),
        instance("django__django-2", HIDDEN),
        instance("django__django-3", HIDDEN),
        own(
            "spoof",
            "printf 'PASSED tests/t.py::test_a\\n'; exit 1",
            listed.clone(),
        ),
        own(
            "honest",
            "printf 'FAILED tests/t.py::test_a - ModuleNotFoundError: no module x\\n'; exit 1",
            listed,
        ),
        own("plain", "true", json!({})),
        own("slow", "sleep 30", json!({"test_timeout_s": 1})),
        task(
            "broken",
            &fixture.path("no-such-repo"),
            &plain_base,
            "true",
            json!({}),
        ),
        own("empty", "true", json!({})),
        own("absent", "true", json!({})),
    ]);
    let predictions = fixture.path("preds.jsonl");
    let lines: String = file(&tasks)
        .lines()
        .filter_map(|line| {
            let task: Value = serde_json::from_str(line).expect("a task");
            let id = task.get("instance_id").unwrap_or(&task["id"]).clone();
            let patch = match id.as_str() {
                Some("absent") => return None,
                Some("empty") => json!(""),
                Some("broken") => json!(change),
                Some("django__django-3") => json!(spoof),
                _ => task.get("patch").unwrap_or(&task["gold_patch"]).clone(),
            };
            let prediction =
                json!({"instance_id": id, "model_name_or_path": MODEL, "model_patch": patch});
            Some(format!("{prediction}\n"))
        })
        .collect();
    std::fs::write(&predictions, lines).expect("write");
    World {
        fixture,
        tasks,
        predictions,
        mirrors: django.mirrors,
        f2p: django.f2p,
        p2p: django.p2p,
    }
}

impl World {
    /// The run of the predictions into `<fixture>/<out>`, `args` after.
    fn run(&self, out: &str, args: &[&str]) -> RunOutput {
        let flags = self.flags();
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let all = [&flags[..], args].concat();
        let run = self
            .fixture
            .run_into(&self.fixture.path(out), &self.tasks, &all, &[]);
        // The missing repo is a row in error, so the run exits 1.
        assert_eq!(run.code, 1, "stderr:\n{}", run.stderr);
        run
    }

    fn flags(&self) -> Vec<String> {
        [
            "--model",
            &format!("predictions:{}", self.predictions.display()),
            "--env",
            "host",
            "--sandbox",
            "none",
            "--repo-base",
            arg(&self.mirrors),
        ]
        .map(str::to_owned)
        .to_vec()
    }
}

/// What one `onebash regrade` did.
struct Regrade {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Regrade {
    /// The verdicts it printed as changed, without their reasons.
    fn changes(&self) -> BTreeSet<String> {
        self.stdout
            .lines()
            .filter(|line| line.contains(" -> "))
            .map(|line| line.split(" (").next().unwrap_or(line).to_owned())
            .collect()
    }
}

fn regrade(args: &[&str]) -> Regrade {
    let output = onebash()
        .arg("regrade")
        .args(args)
        .output()
        .expect("run onebash");
    Regrade {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn arg(path: &Path) -> &str {
    path.to_str().expect("utf-8")
}

/// results.csv's rows by (task, epoch).
fn rows_of(folder: &Path) -> BTreeMap<String, HashMap<String, String>> {
    let run = RunOutput {
        code: 0,
        stdout: String::new(),
        stderr: String::new(),
        out: folder.to_owned(),
    };
    run.rows()
        .into_iter()
        .map(|row| (format!("{} epoch {}", row["task_id"], row["epoch"]), row))
        .collect()
}

/// The rows of `a` and `b` that differ, with the columns that do.
fn differences(a: &Path, b: &Path) -> BTreeMap<String, Vec<String>> {
    let (a, b) = (rows_of(a), rows_of(b));
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "the same rows"
    );
    a.iter()
        .filter_map(|(key, row)| {
            let other = &b[key];
            let mut columns: Vec<String> = row
                .iter()
                .filter(|(column, value)| other[*column] != **value)
                .map(|(column, _)| column.clone())
                .collect();
            columns.sort();
            (!columns.is_empty()).then(|| (key.clone(), columns))
        })
        .collect()
}

fn file(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

fn run_json(folder: &Path) -> Value {
    serde_json::from_str(&file(&folder.join("run.json"))).expect("run.json")
}

#[test]
fn regrade_reproduces_the_run_s_verdicts_exactly() {
    let world = world();
    let run = world.run("out", &[]);
    let before = file(&run.out.join("results.csv"));
    let saved: Vec<(PathBuf, String)> = ["tests.json", "report.json"]
        .iter()
        .flat_map(|name| {
            [
                "django__django-1",
                "django__django-2",
                "django__django-3",
                "spoof",
                "honest",
            ]
            .map(|id| run.task_dir(id).join(name))
        })
        .map(|path| {
            let text = file(&path);
            (path, text)
        })
        .collect();
    let regraded = regrade(&[arg(&run.out)]);
    assert_eq!(regraded.code, 0, "{}", regraded.stderr);
    assert!(regraded.changes().is_empty(), "{}", regraded.stdout);
    assert!(
        regraded
            .stdout
            .contains("regraded 7 of 9 rows by each row's format's rules"),
        "{}",
        regraded.stdout
    );
    assert!(
        regraded.stdout.contains(
            ": 0 verdicts changed, 2 rows without test results kept, 0 rows could not be regraded"
        ),
        "{}",
        regraded.stdout
    );
    // The rows are the run's, byte for byte, and so are the files that
    // give the verdicts; the old rows are kept beside them, named.
    assert_eq!(file(&run.out.join("results.csv")), before);
    for (path, text) in &saved {
        assert_eq!(&file(path), text, "{}", path.display());
    }
    let backup = run.out.join("results.csv.before-regrade-1");
    assert_eq!(file(&backup), before);
    assert!(
        regraded.stderr.contains(&backup.display().to_string()),
        "{}",
        regraded.stderr
    );
    // The row without a test log is kept as it was.
    assert_eq!(run.row("broken")["exit_reason"], "checkout_error");
    assert!(!run.task_dir("slow").join("report.json").exists());
    assert_eq!(run_json(&run.out)["settings"]["grading"], Value::Null);
}

#[test]
fn under_the_other_rules_exactly_the_rows_where_they_disagree_change() {
    let world = world();
    let run = world.run("out", &[]);
    let before = file(&run.out.join("results.csv"));
    let five = world.fixture.path("five");
    let regraded = regrade(&[arg(&run.out), "-o", arg(&five), "--grading", "swebench-5.0"]);
    assert_eq!(regraded.code, 0, "{}", regraded.stderr);
    assert_eq!(regraded.changes(), DISAGREE.map(str::to_owned).into());
    assert!(
        regraded
            .stdout
            .contains("spoof epoch 1: passed -> failed (")
            && regraded.stdout.contains("exited with 1"),
        "{}",
        regraded.stdout
    );
    let changed = differences(&run.out, &five);
    let expected: BTreeMap<String, Vec<String>> = [
        "django__django-1 epoch 1",
        "django__django-3 epoch 1",
        "spoof epoch 1",
    ]
    .iter()
    .map(|key| {
        (
            (*key).to_owned(),
            vec!["passed".to_owned(), "status".to_owned()],
        )
    })
    .collect();
    assert_eq!(changed, expected);
    // The run regraded is untouched, its files shared by link or copy.
    assert_eq!(file(&run.out.join("results.csv")), before);
    assert_eq!(run.tests_json("spoof")["verdict"]["resolved"], true);
    let settings = &run_json(&five)["settings"];
    assert_eq!(settings["grading"], "swebench-5.0");
    assert_eq!(run_json(&five)["fingerprint"]["grading"], "swebench-5.0");
    let from = std::fs::canonicalize(&run.out).expect("canonical");
    assert_eq!(settings["regraded"]["from"], from.display().to_string());
    assert!(five.join("predictions.jsonl").is_file());

    // A live run by 5.0's rules gives the verdicts the regrade gave.
    let live = world.run("live-five", &["--grading", "swebench-5.0"]);
    let verdicts = |folder: &Path| -> BTreeMap<String, (String, String)> {
        rows_of(folder)
            .into_iter()
            .map(|(key, row)| (key, (row["status"].clone(), row["passed"].clone())))
            .collect()
    };
    assert_eq!(verdicts(&five), verdicts(&live.out));

    // Back to 4.1's rules, in place: the run's rows again.
    let regraded_rows = file(&five.join("results.csv"));
    let back = regrade(&[arg(&five), "--grading", "swebench-4.1"]);
    assert_eq!(back.code, 0, "{}", back.stderr);
    let reverted: BTreeSet<String> = DISAGREE
        .iter()
        .map(|change| change.replace("passed -> failed", "failed -> passed"))
        .collect();
    assert_eq!(back.changes(), reverted);
    assert_eq!(
        differences(&run.out, &five),
        BTreeMap::new(),
        "{}",
        back.stdout
    );
    assert_eq!(run_json(&five)["settings"]["grading"], "swebench-4.1");
    let backup = five.join("results.csv.before-regrade-1");
    assert_eq!(file(&backup), regraded_rows);
}

#[test]
fn shards_and_merged_folders_regrade_as_the_whole_run() {
    let world = world();
    let shards: Vec<RunOutput> = ["1/2", "2/2"]
        .iter()
        .enumerate()
        .map(|(i, shard)| {
            let out = format!("shard-{i}");
            let flags = world.flags();
            let mut args: Vec<&str> = flags.iter().map(String::as_str).collect();
            args.extend(["--shard", shard]);
            world
                .fixture
                .run_into(&world.fixture.path(&out), &world.tasks, &args, &[])
        })
        .collect();
    let merged = world.fixture.path("merged");
    let output = onebash()
        .arg("merge")
        .arg(&merged)
        .args(shards.iter().map(|shard| &shard.out))
        .output()
        .expect("merge");
    assert!(output.status.success(), "{output:?}");
    let regraded = regrade(&[arg(&merged), "--grading", "swebench-5.0"]);
    assert_eq!(regraded.code, 0, "{}", regraded.stderr);
    assert_eq!(regraded.changes(), DISAGREE.map(str::to_owned).into());
    // Each shard: the changes among its own rows.
    let mut of_shards = BTreeSet::new();
    for (i, shard) in shards.iter().enumerate() {
        let out = world.fixture.path(&format!("shard-{i}-five"));
        let regraded = regrade(&[
            arg(&shard.out),
            "-o",
            arg(&out),
            "--grading",
            "swebench-5.0",
        ]);
        assert_eq!(regraded.code, 0, "{}", regraded.stderr);
        assert_eq!(
            run_json(&out)["settings"]["shard"],
            run_json(&shard.out)["settings"]["shard"]
        );
        of_shards.extend(regraded.changes());
    }
    assert_eq!(of_shards, DISAGREE.map(str::to_owned).into());
}

#[test]
fn a_damaged_row_is_named_and_the_rest_is_regraded() {
    let world = world();
    let run = world.run("out", &[]);
    let copy = world.fixture.path("copy");
    assert_eq!(regrade(&[arg(&run.out), "-o", arg(&copy)]).code, 0);
    // The copy's links go; the run's files stay.
    let log = copy.join("tasks/spoof/epoch-1/test.log");
    std::fs::remove_file(&log).expect("remove");
    assert!(run.task_dir("spoof").join("test.log").is_file());
    let regraded = regrade(&[arg(&copy), "--grading", "swebench-5.0"]);
    assert_eq!(regraded.code, 1, "{}", regraded.stdout);
    assert!(
        regraded.stderr.contains(&format!(
            "error: spoof epoch 1: failed to read {}",
            log.display()
        )) && regraded.stderr.contains("its row is kept as it was"),
        "{}",
        regraded.stderr
    );
    assert_eq!(
        regraded.changes(),
        BTreeSet::from([DISAGREE[0].to_owned(), DISAGREE[1].to_owned()])
    );
    assert!(
        regraded.stdout.contains("1 row could not be regraded"),
        "{}",
        regraded.stdout
    );
    assert_eq!(rows_of(&copy)["spoof epoch 1"]["status"], "passed");

    // Not a run folder, a torn results.csv, a taken -o: exit 2.
    let nowhere = world.fixture.path("nowhere");
    let refused = regrade(&[arg(&nowhere)]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("is not a run folder"),
        "{}",
        refused.stderr
    );
    let taken = regrade(&[arg(&run.out), "-o", arg(&copy)]);
    assert_eq!(taken.code, 2, "{}", taken.stderr);
    assert!(
        taken.stderr.contains("exists and is not empty"),
        "{}",
        taken.stderr
    );
    let csv = copy.join("results.csv");
    let mut text = file(&csv);
    text.push_str("torn,1");
    std::fs::write(&csv, text).expect("write");
    let torn = regrade(&[arg(&copy)]);
    assert_eq!(torn.code, 2, "{}", torn.stderr);
    assert!(torn.stderr.contains("torn row"), "{}", torn.stderr);
}

/// The package's answer to `make_run_report.py ARGS`.
fn package(python: &str, args: &[&str]) -> String {
    fixture_script(python, "swebench-reports/make_run_report.py", args)
}

/// The run folder `run` laid out as run_evaluation's logs in a new folder
/// (`logs/run_evaluation/<run_id>/<model>/<instance>/`: report.json and
/// test_output.txt, with the line it appends when the tests timed out),
/// with the run's predictions and the task file's ids as the dataset; the
/// package's summary of it, and onebash's.
fn summaries(python: &str, world: &World, run: &Path) -> (String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let predictions: Vec<Value> = file(&world.predictions)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a prediction"))
        .collect();
    for prediction in &predictions {
        let id = prediction["instance_id"].as_str().expect("id");
        let model = prediction["model_name_or_path"].as_str().expect("model");
        let logs = dir
            .path()
            .join("logs/run_evaluation/regrade-test")
            .join(model.replace('/', "__"))
            .join(id);
        std::fs::create_dir_all(&logs).expect("mkdir");
        let task = run.join("tasks").join(id).join("epoch-1");
        if task.join("report.json").is_file() {
            std::fs::copy(task.join("report.json"), logs.join("report.json")).expect("copy");
        }
        let mut output = std::fs::read_to_string(task.join("test.log")).unwrap_or_default();
        if id == "slow" {
            output.push_str("\n\nTimeout error: 1 seconds exceeded.");
        }
        std::fs::write(logs.join("test_output.txt"), output).expect("write");
    }
    let ids: Vec<Value> = file(&world.tasks)
        .lines()
        .map(|line| {
            let task: Value = serde_json::from_str(line).expect("a task");
            task.get("instance_id").unwrap_or(&task["id"]).clone()
        })
        .collect();
    std::fs::write(
        dir.path().join("predictions.json"),
        json!(predictions).to_string(),
    )
    .expect("write");
    std::fs::write(dir.path().join("dataset.json"), json!(ids).to_string()).expect("write");
    let theirs = package(python, &["summary", arg(dir.path()), "regrade-test"]);
    (summaries_ours(run), theirs)
}

/// Each SWE-bench instance's report.json in `run` is what the package's
/// `get_eval_report` makes of its test log.
fn instance_reports_agree(python: &str, world: &World, run: &Path) {
    let ids = ["django__django-1", "django__django-2", "django__django-3"];
    let cases: Vec<Value> = ids
        .iter()
        .map(|id| {
            let task = run.join("tasks").join(id).join("epoch-1");
            json!({
                "instance_id": id,
                "repo": "django/django",
                "version": "4.2",
                "log_parser": "parse_log_django",
                "eval_type": "pass_and_fail",
                "FAIL_TO_PASS": world.f2p,
                "PASS_TO_PASS": world.p2p,
                "model_patch": file(&task.join("patch.diff")),
                "log_path": task.join("test.log").display().to_string(),
            })
        })
        .collect();
    let input = tempfile::NamedTempFile::new().expect("tempfile");
    std::fs::write(input.path(), json!(cases).to_string()).expect("write");
    let theirs: Vec<Value> =
        serde_json::from_str(&package(python, &["instances", arg(input.path())])).expect("JSON");
    for (id, theirs) in ids.iter().zip(theirs) {
        let ours = file(&run.join("tasks").join(id).join("epoch-1/report.json"));
        let ours: Value = serde_json::from_str(&ours).expect("report.json");
        assert_eq!(ours, theirs, "{id}");
    }
}

#[test]
fn report_json_and_the_swebench_summary_are_the_package_s() {
    let world = world();
    let run = world.run("out", &[]);
    let five = world.fixture.path("five");
    let regraded = regrade(&[arg(&run.out), "-o", arg(&five), "--grading", "swebench-5.0"]);
    assert_eq!(regraded.code, 0, "{}", regraded.stderr);
    // Without the package: the counts this world must give.
    let ours: Value = serde_json::from_str(&summaries_ours(&run.out)).expect("JSON");
    assert_eq!(ours["total_instances"], 10);
    assert_eq!(ours["incomplete_ids"], json!(["absent"]));
    assert_eq!(
        ours["resolved_ids"],
        json!([
            "django__django-1",
            "django__django-2",
            "django__django-3",
            "plain",
            "spoof"
        ])
    );
    assert_eq!(ours["empty_patch_ids"], json!(["empty"]));
    assert_eq!(ours["submitted_instances"], 9);
    assert_eq!(ours["error_ids"], json!(["broken", "slow"]));
    let ours: Value = serde_json::from_str(&summaries_ours(&five)).expect("JSON");
    assert_eq!(ours["resolved_ids"], json!(["django__django-2", "plain"]));
    assert_eq!(
        ours["failure_reasons"],
        json!({"honest": "missing_module", "slow": "tests_timed_out"})
    );
    if let Some(python) = swebench_python() {
        let (ours, theirs) = summaries(&python, &world, &run.out);
        assert_eq!(ours, theirs);
        instance_reports_agree(&python, &world, &run.out);
    }
    // A log 5.0's classifier knows (the tests were killed before any
    // marker): its report.json says so, as the package's does.
    let killed = world.fixture.path("killed");
    assert_eq!(regrade(&[arg(&five), "-o", arg(&killed)]).code, 0);
    let log = killed.join("tasks/django__django-2/epoch-1/test.log");
    std::fs::remove_file(&log).expect("remove the link");
    std::fs::write(&log, "Killed\n").expect("write");
    let regraded = regrade(&[arg(&killed)]);
    assert_eq!(regraded.code, 0, "{}", regraded.stderr);
    let report: Value = serde_json::from_str(&file(
        &killed.join("tasks/django__django-2/epoch-1/report.json"),
    ))
    .expect("report.json");
    assert_eq!(report["django__django-2"]["infra_failure"], true);
    assert_eq!(
        report["django__django-2"]["infra_failure_reason"],
        "out_of_memory"
    );
    if let Some(python) = swebench5_python() {
        let (ours, theirs) = summaries(&python, &world, &five);
        assert_eq!(ours, theirs);
        instance_reports_agree(&python, &world, &five);
        instance_reports_agree(&python, &world, &killed);
    }
}

fn summaries_ours(run: &Path) -> String {
    let output = onebash()
        .args(["report", arg(run), "--format", "swebench"])
        .output()
        .expect("report");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A predictions run of two onebash tasks by 5.0's rules: `preset`, whose
/// prediction adds a file the repo ignores (it goes in and is tested, but
/// the agent's diff, as of a prediction its image's setup commit already
/// made, is empty), and `other`, an ordinary one.
fn preset_run(fixture: &Fixture) -> RunOutput {
    let (repo, base) = fixture.repo("plain", &[("README", "plain\n")]);
    let change = diff_of(&repo, &[("README", "plain, changed\n")]);
    let (ignoring, ignoring_base) = fixture.repo("ignoring", &[(".gitignore", "notes.txt\n")]);
    let notes = "diff --git a/notes.txt b/notes.txt\nnew file mode 100644\n--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1 @@\n+notes\n";
    let tasks = fixture.tasks(&[
        task(
            "preset",
            &ignoring,
            &ignoring_base,
            "test -f notes.txt",
            json!({}),
        ),
        task("other", &repo, &base, "grep -q changed README", json!({})),
    ]);
    let predictions = fixture.path("preds.jsonl");
    let lines: String = [("preset", notes), ("other", change.as_str())]
        .iter()
        .map(|(id, patch)| {
            let prediction =
                json!({"instance_id": id, "model_name_or_path": MODEL, "model_patch": patch});
            format!("{prediction}\n")
        })
        .collect();
    std::fs::write(&predictions, lines).expect("write");
    let model = format!("predictions:{}", predictions.display());
    let args = [
        "--model",
        &model,
        "--env",
        "host",
        "--sandbox",
        "none",
        "--grading",
        "swebench-5.0",
    ];
    fixture.run_into(&fixture.path("out"), &tasks, &args, &[])
}

#[test]
fn a_prediction_with_an_empty_diff_gets_its_report_json() {
    let fixture = Fixture::new();
    let run = preset_run(&fixture);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(
        run.row("preset")["status"],
        "passed",
        "{:?}",
        run.row("preset")
    );
    // The agent's diff is empty, but the prediction is not: SWE-bench
    // writes its report.json, and counts it completed.
    assert_eq!(file(&run.task_dir("preset").join("patch.diff")), "");
    let report = |run: &Path| -> Value {
        let path = run.join("tasks/preset/epoch-1/report.json");
        serde_json::from_str(&file(&path)).expect("report.json")
    };
    assert_eq!(report(&run.out)["preset"]["resolved"], true);
    let summary: Value = serde_json::from_str(&summaries_ours(&run.out)).expect("JSON");
    assert_eq!(summary["completed_ids"], json!(["other", "preset"]));
    assert_eq!(summary["error_ids"], json!([]));
    // The regrade knows it too.
    let copy = fixture.path("copy");
    let regraded = regrade(&[arg(&run.out), "-o", arg(&copy)]);
    assert_eq!(regraded.code, 0, "{}", regraded.stderr);
    assert_eq!(report(&copy)["preset"]["resolved"], true);
}

#[test]
fn a_junit_run_regrades_its_tasks_graded_by_exit_code() {
    let fixture = Fixture::new();
    let (repo, base) = fixture.repo("junit", &[("README", "plain\n")]);
    let change = diff_of(&repo, &[("README", "plain, changed\n")]);
    let junit =
        "printf '<testsuite><testcase classname=\"t\" name=\"test_a\"/></testsuite>' > report.xml";
    let tasks = fixture.tasks(&[
        task(
            "listed",
            &repo,
            &base,
            junit,
            json!({"fail_to_pass": ["t::test_a"], "gold_patch": change}),
        ),
        task("bare", &repo, &base, "true", json!({"gold_patch": change})),
    ]);
    let args = [
        "--model",
        "oracle",
        "--env",
        "host",
        "--sandbox",
        "none",
        "--junit-path",
        "report.xml",
    ];
    let run = fixture.run_into(&fixture.path("out"), &tasks, &args, &[]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert!(run.task_dir("listed").join("tests.json").is_file());
    assert!(!run.task_dir("bare").join("tests.json").exists());
    let before = file(&run.out.join("results.csv"));
    let regraded = regrade(&[arg(&run.out)]);
    assert_eq!(regraded.code, 0, "{}{}", regraded.stdout, regraded.stderr);
    assert!(
        regraded.stdout.contains("regraded 2 of 2 rows") && regraded.changes().is_empty(),
        "{}",
        regraded.stdout
    );
    assert_eq!(file(&run.out.join("results.csv")), before);
}

#[test]
fn regrade_keeps_run_json_s_other_summary_fields() {
    let fixture = Fixture::new();
    let run = preset_run(&fixture);
    let summary = run_json(&run.out)["summary"].clone();
    assert!(summary.get("without_prediction").is_some(), "{summary}");
    let regraded = regrade(&[arg(&run.out), "--grading", "swebench-4.1"]);
    assert_eq!(regraded.code, 0, "{}", regraded.stderr);
    assert_eq!(run_json(&run.out)["summary"], summary);
}

#[test]
fn a_damaged_report_json_counts_completed_and_an_error() {
    let fixture = Fixture::new();
    let run = preset_run(&fixture);
    let path = run.task_dir("other").join("report.json");
    for damaged in ["", "{not json", "{\"someone-else\": {}}"] {
        std::fs::write(&path, damaged).expect("write");
        let summary: Value = serde_json::from_str(&summaries_ours(&run.out)).expect("JSON");
        assert_eq!(
            summary["completed_ids"],
            json!(["other", "preset"]),
            "{damaged}"
        );
        assert_eq!(summary["error_ids"], json!(["other"]), "{damaged}");
        assert_eq!(summary["completed_instances"], 2);
        assert_eq!(summary["error_instances"], 1);
    }
}

#[test]
fn an_interrupted_in_place_regrade_is_completed_by_the_next() {
    let world = world();
    let run = world.run("out", &[]);
    let clean = world.fixture.path("clean");
    let regraded = regrade(&[
        arg(&run.out),
        "-o",
        arg(&clean),
        "--grading",
        "swebench-5.0",
    ]);
    assert_eq!(regraded.code, 0, "{}", regraded.stderr);
    // A regrade killed after it staged spoof's files: a staged file the
    // kill left is not taken for the regrade's.
    let spoof = run.task_dir("spoof");
    std::fs::write(spoof.join("tests.json.regrade-tmp"), "{}").expect("write");
    std::fs::write(spoof.join("report.json.regrade-tmp"), "").expect("write");
    let again = regrade(&[arg(&run.out), "--grading", "swebench-5.0"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(differences(&clean, &run.out), BTreeMap::new());
    for name in ["tests.json", "report.json"] {
        assert_eq!(
            file(&spoof.join(name)),
            file(&clean.join("tasks/spoof/epoch-1").join(name)),
            "{name}"
        );
        assert!(
            !spoof.join(format!("{name}.regrade-tmp")).exists(),
            "{name}"
        );
    }
    assert_eq!(run_json(&run.out)["settings"]["grading"], "swebench-5.0");
}

/// Rewrites each line of `path` with `edit`.
fn edit_lines(path: &Path, edit: impl Fn(&mut Value)) {
    let text: String = file(path)
        .lines()
        .map(|line| {
            let mut event: Value = serde_json::from_str(line).expect("an event");
            edit(&mut event);
            format!("{event}\n")
        })
        .collect();
    std::fs::write(path, text).expect("write");
}

#[test]
fn a_swebench_instance_whose_recipe_changed_since_keeps_its_grader() {
    let world = world();
    let run = world.run("out", &[]);
    // The run's onebash wrote another eval script than today's.
    let trajectory = run.task_dir("django__django-1").join("trajectory.jsonl");
    edit_lines(&trajectory, |event| {
        if event["event"] == "header" {
            event["task"]["test_command"] = json!("#!/bin/bash\n# an older recipe\n");
        }
    });
    assert!(file(&trajectory).contains("\"graded_by_recipe\":true"));
    let regraded = regrade(&[arg(&run.out), "--grading", "swebench-5.0"]);
    assert_eq!(regraded.code, 0, "{}", regraded.stderr);
    assert_eq!(regraded.changes(), DISAGREE.map(str::to_owned).into());
    assert!(!regraded.stderr.contains("warning"), "{}", regraded.stderr);
    // A trajectory from before the record: named, and graded as today's
    // recipe no longer knows it.
    edit_lines(&trajectory, |event| {
        if let Some(test) = event.as_object_mut().filter(|e| e["event"] == "test") {
            test.remove("graded_by_recipe");
        }
    });
    let regraded = regrade(&[arg(&run.out), "--grading", "swebench-4.1"]);
    assert!(
        regraded
            .stderr
            .contains("warning: django__django-1 epoch 1:"),
        "{}",
        regraded.stderr
    );
}
