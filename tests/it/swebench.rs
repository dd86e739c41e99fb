//! SWE-bench in, SWE-bench out: instance lines over a local folder of
//! mirrors, graded per test by the official rules from real unittest and
//! pytest output, and predictions.jsonl.

use serde_json::{Value, json};

use crate::support::calc::run_fixed_and_untouched;
use crate::support::harness::{
    Fixture, diff_of, git, pytest_present, run_without_changes, scripted_agent, task, unittest_name,
};

pub const OPS: &str = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n";
pub const TESTS: &str = "import unittest\nfrom ops import add, sub\n\n\nclass OpsTest(unittest.TestCase):\n    def test_sub(self):\n        self.assertEqual(sub(3, 1), 2)\n";
pub const HIDDEN: &str = "import unittest\nfrom ops import add, sub\n\n\nclass OpsTest(unittest.TestCase):\n    def test_sub(self):\n        self.assertEqual(sub(3, 1), 2)\n\n    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n";

#[test]
fn instances_grade_by_the_official_rules_and_predictions_apply() {
    let fixture = Fixture::new();
    // A folder of mirrors laid out as owner/name.git, like --repo-base wants.
    let (work, sha) = fixture.repo("work", &[("ops.py", OPS), ("test_ops.py", TESTS)]);
    let mirrors = fixture.mirrors(&work, "acme/ops");
    let gold = diff_of(&work, &[("ops.py", &OPS.replacen("a - b", "a + b", 1))]);
    let test_patch = diff_of(&work, &[("test_ops.py", HIDDEN)]);
    let instance = |id: &str| {
        json!({
            "instance_id": id,
            "repo": "acme/ops",
            "base_commit": sha,
            "problem_statement": format!("Problem of task {id}. add() subtracts."),
            "patch": gold,
            "test_patch": test_patch,
            "FAIL_TO_PASS": json!([unittest_name("test_ops.OpsTest", "test_add")]).to_string(),
            "PASS_TO_PASS": json!([unittest_name("test_ops.OpsTest", "test_sub")]).to_string(),
            "version": "1.0",
            "environment_setup_commit": sha,
            "hints_text": "",
        })
    };
    let tasks = fixture.tasks(&[
        instance("acme__ops-1"),
        instance("acme__ops-2"),
        instance("acme__ops-3"),
    ]);
    let fix = "sed -i '0,/a - b/s//a + b/' ops.py";
    let fix_but_break_sub = "sed -i 's/a - b/a + b/g' ops.py";
    let server = scripted_agent(&[
        ("acme__ops-1", &[fix]),
        ("acme__ops-2", &[fix_but_break_sub]),
        ("acme__ops-3", &["cat ops.py"]),
    ]);
    let template = "python3 -m unittest -v {{ test_files | join(' ') | replace('.py', '') }}";
    let run = fixture.run_scripted(
        &tasks,
        &server,
        &[
            "--repo-base",
            mirrors.to_str().expect("utf-8"),
            "--test-command",
            template,
        ],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(run.row("acme__ops-1")["status"], "passed", "resolved");
    assert_eq!(
        run.row("acme__ops-2")["status"],
        "failed",
        "a PASS_TO_PASS test broke"
    );
    assert_eq!(
        run.row("acme__ops-3")["status"],
        "failed",
        "nothing changed"
    );

    let broke = run.tests_json("acme__ops-2");
    assert_eq!(broke["verdict"]["fail_to_pass"][0]["ok"], true);
    assert_eq!(broke["verdict"]["pass_to_pass"][0]["ok"], false);
    assert_eq!(broke["verdict"]["pass_to_pass"][0]["status"], "FAILED");
    let unchanged = run.tests_json("acme__ops-3");
    assert_eq!(unchanged["verdict"]["fail_to_pass"][0]["status"], "FAILED");
    let test_event = &run.events("acme__ops-1", "test")[0];
    assert_eq!(test_event["per_test"]["verdict"]["resolved"], true);
    let header = &run.trajectory("acme__ops-1")[0];
    assert_eq!(header["task"]["metadata"]["version"], "1.0");

    // predictions.jsonl: one line per instance, each patch applies to the base.
    let predictions = run.predictions();
    assert_eq!(predictions.len(), 3);
    for prediction in &predictions {
        assert_eq!(prediction["model_name_or_path"], "scripted");
        let patch = prediction["model_patch"].as_str().expect("patch");
        let clone = fixture.path(&format!(
            "check-{}",
            prediction["instance_id"].as_str().expect("id")
        ));
        git(
            &fixture.path("."),
            &[
                "clone",
                "-q",
                work.to_str().expect("utf-8"),
                clone.to_str().expect("utf-8"),
            ],
        );
        git(&clone, &["checkout", "-q", &sha]);
        if !patch.is_empty() {
            std::fs::write(clone.join("model.patch"), patch).expect("write");
            git(&clone, &["apply", "--check", "model.patch"]);
        }
    }

    // The oracle resolves every instance.
    let oracle = fixture.run_into(
        &fixture.path("oracle"),
        &tasks,
        &[
            "--model",
            "oracle",
            "--repo-base",
            mirrors.to_str().expect("utf-8"),
            "--test-command",
            template,
        ],
        &[],
    );
    assert_eq!(oracle.code, 0, "stderr:\n{}", oracle.stderr);
    assert!(
        oracle.rows().iter().all(|r| r["status"] == "passed"),
        "{:?}",
        oracle.rows()
    );
}

#[test]
fn output_without_any_test_result_is_an_error_not_a_fail() {
    let fixture = Fixture::new();
    let run = run_without_changes(
        &fixture,
        "echo 'Segmentation fault'; exit 139",
        json!({"fail_to_pass": ["tests/test_x.py::test_a"]}),
        &[],
    );
    assert_eq!(run.code, 1, "stderr:\n{}", run.stderr);
    let row = run.row("t");
    assert_eq!(row["status"], "error");
    assert!(
        row["error"].contains("no test result could be read"),
        "{row:?}"
    );
}

#[test]
fn patches_that_need_fuzz_go_in_through_the_fallbacks() {
    let fixture = Fixture::new();
    let lines: String = (1..=12).map(|i| format!("line {i}\n")).collect();
    let (repo, sha) = fixture.repo(
        "repo",
        &[
            ("data.txt", &lines),
            ("check.sh", "grep -q '^fixed$' data.txt\n"),
        ],
    );
    // Hand-written patches whose first context line is wrong ("line two"):
    // git apply refuses them, --3way has no preimage blob to merge from,
    // patch applies them with fuzz.
    let fuzzy = |file: &str, new: &str| {
        format!(
            "diff --git a/{file} b/{file}\n--- a/{file}\n+++ b/{file}\n@@ -2,4 +2,5 @@\n line two\n line 3\n line 4\n+{new}\n line 5\n"
        )
    };
    let gold = fuzzy("data.txt", "fixed");
    let test_patch = "diff --git a/check.sh b/check.sh\n--- a/check.sh\n+++ b/check.sh\n@@ -1 +1,2 @@\n-grep -q '^fixed$' data.txt\n+# the hidden test\n+grep -q '^fixed$' data.txt\n".to_owned();
    let tasks = fixture.tasks(&[task(
        "fuzzy",
        &repo,
        &sha,
        "bash check.sh",
        json!({"gold_patch": gold, "test_patch": test_patch}),
    )]);
    let run = fixture.run(&tasks, &["--model", "oracle"]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(run.row("fuzzy")["status"], "passed");
    let command = &run.events("fuzzy", "command")[0];
    assert!(
        command["output"]
            .as_str()
            .is_some_and(|o| o.contains("onebash: applied with patch --fuzz=5")),
        "{command}"
    );
    let test = &run.events("fuzzy", "test")[0];
    assert_eq!(test["test_patch_method"], "git apply", "{test}");

    // A test patch that only applies with fuzz.
    let fuzzy_test = fuzzy("data.txt", "extra");
    let tasks = fixture.tasks(&[task(
        "fuzzy-test",
        &repo,
        &sha,
        "grep -q '^extra$' data.txt",
        json!({
            "gold_patch": diff_of(&repo, &[("other.txt", "x\n")]),
            "test_patch": fuzzy_test,
        }),
    )]);
    let run = fixture.run_into(&fixture.path("out2"), &tasks, &["--model", "oracle"], &[]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(run.row("fuzzy-test")["status"], "passed");
    let test = &run.events("fuzzy-test", "test")[0];
    assert_eq!(test["test_patch_method"], "patch --fuzz=5", "{test}");
}

#[test]
fn validate_flags_a_flaky_a_broken_and_a_nothing_to_fix_task() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("value.txt", "1\n")]);
    let gold = diff_of(&repo, &[("value.txt", "2\n")]);
    // The flaky test alternates with each run, by a counter outside the
    // checkout (the runs use --sandbox none so it can be written).
    let counter = fixture.path("counter");
    let flaky_test = format!(
        "n=$(cat '{c}' 2>/dev/null || echo 0); echo $((n+1)) > '{c}'; test $((n % 2)) -eq 0 && grep -q 2 value.txt",
        c = counter.display()
    );
    let spec = |id: &str, test: &str, gold: &str, test_patch: Option<&str>| {
        let mut value = task(id, &repo, &sha, test, json!({"gold_patch": gold}));
        if let Some(patch) = test_patch {
            value["test_patch"] = json!(patch);
        }
        value
    };
    let tasks = fixture.tasks(&[
        spec("good", "grep -q 2 value.txt", &gold, None),
        spec("broken-gold", "grep -q 3 value.txt", &gold, None),
        spec("nothing-to-fix", "true", &gold, None),
        spec("flaky", &flaky_test, &gold, None),
        spec("bad-test-patch", "true", &gold, Some("diff --git a/nope.txt b/nope.txt\n--- a/nope.txt\n+++ b/nope.txt\n@@ -1 +1 @@\n-a\n+b\n")),
    ]);
    let out = fixture.path("validate");
    let output = crate::support::harness::onebash()
        .arg("validate")
        .arg(&tasks)
        .args(["--runs", "2", "-o"])
        .arg(&out)
        .args(["--", "--sandbox", "none", "-j", "1", "--cache-dir"])
        .arg(fixture.path("cache"))
        .output()
        .expect("validate");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("validated 5 tasks"), "{stdout}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("validation.json")).expect("json"))
            .expect("json");
    let problems = |id: &str| report["tasks"][id]["problems"].to_string();
    assert_eq!(report["tasks"]["good"]["problems"], json!([]));
    assert!(
        problems("broken-gold").contains("gold patch fails"),
        "{}",
        problems("broken-gold")
    );
    assert!(problems("nothing-to-fix").contains("pass before any change"));
    assert!(
        problems("flaky").contains("flaky: the gold patch passed 1 of 2 runs"),
        "{}",
        problems("flaky")
    );
    assert!(
        problems("bad-test-patch").contains("test_patch does not apply"),
        "{}",
        problems("bad-test-patch")
    );
    let exclude = std::fs::read_to_string(out.join("exclude.txt")).expect("exclude.txt");
    let mut ids: Vec<&str> = exclude.lines().collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        vec!["bad-test-patch", "broken-gold", "flaky", "nothing-to-fix"]
    );
}

#[test]
fn empty_test_lists_grade_by_exit_code() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("README.md", "x\n")]);
    let tasks = fixture.tasks(&[task(
        "t",
        &repo,
        &sha,
        "echo 'no test names here'",
        json!({
            "gold_patch": diff_of(&repo, &[("new.txt", "x\n")]),
            "fail_to_pass": [],
            "pass_to_pass": [],
        }),
    )]);
    let run = fixture.run(&tasks, &["--model", "oracle"]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(run.row("t")["status"], "passed");
    assert!(!run.task_dir("t").join("tests.json").exists());
}

#[test]
fn real_pytest_output_grades_each_test_by_its_node_id() {
    // What pytest itself prints with -rA: parametrized ids (one with a
    // space), a failure message after " - ", an xfail, and a skipped test,
    // which -rA names by file and line only, so it has no status.
    if !pytest_present() {
        return;
    }
    let fixture = Fixture::new();
    let hidden = "import pytest\nfrom calc import add, neg\n\n\n\
        def test_neg():\n    assert neg(2) == -2\n\n\n\
        @pytest.mark.parametrize(\"a,b,total\", [(1, 2, 3), (0, 0, 0)], ids=[\"one two\", \"zeros\"])\n\
        def test_add(a, b, total):\n    assert add(a, b) == total\n\n\n\
        @pytest.mark.skip(reason=\"not today\")\ndef test_later():\n    pass\n\n\n\
        @pytest.mark.xfail(reason=\"known\")\ndef test_known_bug():\n    assert False\n";
    let run = run_fixed_and_untouched(
        &fixture,
        hidden,
        "python3 -m pytest -rA -p no:cacheprovider tests/test_calc.py",
        json!({
            "fail_to_pass": ["tests/test_calc.py::test_add[one two]"],
            "pass_to_pass": [
                "tests/test_calc.py::test_neg",
                "tests/test_calc.py::test_add[zeros]",
            ],
        }),
        &[],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(
        run.row("fixed")["status"],
        "passed",
        "{}",
        std::fs::read_to_string(run.task_dir("fixed").join("test.log")).unwrap_or_default()
    );
    assert_eq!(run.row("untouched")["status"], "failed");

    let fixed = run.tests_json("fixed");
    let untouched = run.tests_json("untouched");
    let status = |json: &Value, test: &str| json["statuses"][test].as_str().map(str::to_owned);
    for (test, before, after) in [
        ("tests/test_calc.py::test_add[one two]", "FAILED", "PASSED"),
        ("tests/test_calc.py::test_add[zeros]", "PASSED", "PASSED"),
        ("tests/test_calc.py::test_neg", "PASSED", "PASSED"),
        ("tests/test_calc.py::test_known_bug", "XFAIL", "XFAIL"),
    ] {
        assert_eq!(
            status(&untouched, test).as_deref(),
            Some(before),
            "{test}: {untouched}"
        );
        assert_eq!(
            status(&fixed, test).as_deref(),
            Some(after),
            "{test}: {fixed}"
        );
    }
    assert_eq!(status(&fixed, "tests/test_calc.py::test_later"), None);
    assert_eq!(untouched["verdict"]["fail_to_pass"][0]["ok"], false);
    assert_eq!(fixed["verdict"]["resolved"], true);
}
