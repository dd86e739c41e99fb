//! `--junit-path`: per-test grading from the JUnit XML file a test command
//! writes, with a real pytest, and a file that is not XML.

use serde_json::{Value, json};

use crate::support::harness::{Fixture, diff_of, pytest_present, scripted_agent};

#[test]
fn real_pytest_junit_file_grades_each_test_by_classname_and_name() {
    if !pytest_present() {
        return;
    }
    let fixture = Fixture::new();
    let calc = "def add(a, b):\n    return a - b\n\n\ndef neg(a):\n    return -a\n";
    let visible = "from calc import neg\n\n\ndef test_neg():\n    assert neg(2) == -2\n";
    let (repo, sha) = fixture.repo(
        "repo",
        &[("calc.py", calc), ("tests/test_calc.py", visible)],
    );
    // Markup in a parametrized id and in captured output (written with
    // -o junit_logging=all) must come through as text.
    let hidden = "import pytest\nfrom calc import add, neg\n\n\n\
        def test_neg():\n    print('<testcase name=\"ghost\"/> <failure')\n    assert neg(2) == -2\n\n\n\
        @pytest.mark.parametrize(\"a,b,total\", [(1, 2, 3), (0, 0, 0)], ids=[\"one <two>\", \"zeros\"])\n\
        def test_add(a, b, total):\n    assert add(a, b) == total\n\n\n\
        @pytest.mark.skip(reason=\"not today\")\ndef test_later():\n    pass\n\n\n\
        @pytest.mark.xfail(reason=\"known\")\ndef test_known_bug():\n    assert False\n\n\n\
        class TestNeg:\n    def test_twice(self):\n        assert neg(neg(3)) == 3\n";
    let gold = diff_of(&repo, &[("calc.py", &calc.replacen("a - b", "a + b", 1))]);
    let test_patch = diff_of(&repo, &[("tests/test_calc.py", hidden)]);
    let spec = |id: &str| {
        json!({
            "id": id,
            "repo": repo.display().to_string(),
            "base_commit": sha,
            "problem_statement": format!("Problem of task {id}. add() subtracts."),
            "test_command": "python3 -m pytest -p no:cacheprovider -o junit_logging=all --junitxml=report.xml tests/test_calc.py",
            "gold_patch": gold,
            "test_patch": test_patch,
            "fail_to_pass": ["tests.test_calc::test_add[one <two>]"],
            "pass_to_pass": [
                "tests.test_calc::test_neg",
                "tests.test_calc::test_add[zeros]",
                "tests.test_calc::test_later",
                "tests.test_calc::test_known_bug",
                "tests.test_calc.TestNeg::test_twice",
            ],
        })
    };
    let tasks = fixture.tasks(&[spec("fixed"), spec("untouched")]);
    let server = scripted_agent(&[
        ("fixed", &["sed -i '0,/a - b/s//a + b/' calc.py"]),
        ("untouched", &["cat calc.py"]),
    ]);
    let run = fixture.run(
        &tasks,
        &[
            "--model",
            "scripted",
            "--base-url",
            &server.base_url(),
            "--junit-path",
            "report.xml",
        ],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(
        run.row("fixed")["status"],
        "passed",
        "{:?}",
        run.row("fixed")
    );
    assert_eq!(run.row("untouched")["status"], "failed");

    let tests_json = |id: &str| -> Value {
        let text =
            std::fs::read_to_string(run.task_dir(id).join("tests.json")).expect("tests.json");
        serde_json::from_str(&text).expect("json")
    };
    let fixed = tests_json("fixed");
    let untouched = tests_json("untouched");
    let statuses = |json: &Value| -> Vec<(String, String)> {
        json["statuses"]
            .as_object()
            .expect("statuses")
            .iter()
            .map(|(test, status)| (test.clone(), status.as_str().unwrap_or("").to_owned()))
            .collect()
    };
    let expect = |add_one_two: &str| -> Vec<(String, String)> {
        [
            ("tests.test_calc.TestNeg::test_twice", "PASSED"),
            ("tests.test_calc::test_add[one <two>]", add_one_two),
            ("tests.test_calc::test_add[zeros]", "PASSED"),
            ("tests.test_calc::test_known_bug", "XFAIL"),
            ("tests.test_calc::test_later", "SKIPPED"),
            ("tests.test_calc::test_neg", "PASSED"),
        ]
        .iter()
        .map(|(test, status)| ((*test).to_owned(), (*status).to_owned()))
        .collect()
    };
    assert_eq!(statuses(&untouched), expect("FAILED"), "{untouched}");
    assert_eq!(statuses(&fixed), expect("PASSED"), "{fixed}");
    assert_eq!(untouched["verdict"]["fail_to_pass"][0]["ok"], false);
    assert_eq!(fixed["verdict"]["resolved"], true);
}

#[test]
fn junit_file_that_is_not_xml_is_an_error_not_a_fail() {
    // A run killed while it wrote its report leaves half a file: the
    // verdict cannot be read from it, so the task is an error.
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("README.md", "x\n")]);
    let tasks = fixture.tasks(&[json!({
        "id": "t",
        "repo": repo.display().to_string(),
        "base_commit": sha,
        "problem_statement": "Problem of task t.",
        "test_command": "printf '<testsuite><testcase classname=\"t\" name=\"a\">' > report.xml",
        "fail_to_pass": ["t::a"],
    })]);
    let run = fixture.run(
        &tasks,
        &[
            "--model",
            "oracle-free",
            "--base-url",
            &scripted_agent(&[]).base_url(),
            "--junit-path",
            "report.xml",
        ],
    );
    assert_eq!(run.code, 1, "stderr:\n{}", run.stderr);
    let row = run.row("t");
    assert_eq!(row["status"], "error");
    assert!(
        row["error"].contains("report.xml could not be parsed"),
        "{row:?}"
    );
}
