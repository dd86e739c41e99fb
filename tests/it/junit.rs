//! `--junit-path`: per-test grading from the JUnit XML file a test command
//! writes, with a real pytest, and a file that is not XML.

use serde_json::{Value, json};

use crate::support::calc::run_fixed_and_untouched;
use crate::support::harness::{Fixture, pytest_present, run_without_changes};

#[test]
fn real_pytest_junit_file_grades_each_test_by_classname_and_name() {
    if !pytest_present() {
        return;
    }
    let fixture = Fixture::new();
    // Markup in a parametrized id and in captured output (written with
    // -o junit_logging=all) must come through as text.
    let hidden = "import pytest\nfrom calc import add, neg\n\n\n\
        def test_neg():\n    print('<testcase name=\"ghost\"/> <failure')\n    assert neg(2) == -2\n\n\n\
        @pytest.mark.parametrize(\"a,b,total\", [(1, 2, 3), (0, 0, 0)], ids=[\"one <two>\", \"zeros\"])\n\
        def test_add(a, b, total):\n    assert add(a, b) == total\n\n\n\
        @pytest.mark.skip(reason=\"not today\")\ndef test_later():\n    pass\n\n\n\
        @pytest.mark.xfail(reason=\"known\")\ndef test_known_bug():\n    assert False\n\n\n\
        class TestNeg:\n    def test_twice(self):\n        assert neg(neg(3)) == 3\n";
    let run = run_fixed_and_untouched(
        &fixture,
        hidden,
        "python3 -m pytest -p no:cacheprovider -o junit_logging=all --junitxml=report.xml tests/test_calc.py",
        json!({
            "fail_to_pass": ["tests.test_calc::test_add[one <two>]"],
            "pass_to_pass": [
                "tests.test_calc::test_neg",
                "tests.test_calc::test_add[zeros]",
                "tests.test_calc::test_later",
                "tests.test_calc::test_known_bug",
                "tests.test_calc.TestNeg::test_twice",
            ],
        }),
        &["--junit-path", "report.xml"],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(
        run.row("fixed")["status"],
        "passed",
        "{:?}",
        run.row("fixed")
    );
    assert_eq!(run.row("untouched")["status"], "failed");

    let fixed = run.tests_json("fixed");
    let untouched = run.tests_json("untouched");
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
    let run = run_without_changes(
        &fixture,
        "printf '<testsuite><testcase classname=\"t\" name=\"a\">' > report.xml",
        json!({"fail_to_pass": ["t::a"]}),
        &["--junit-path", "report.xml"],
    );
    assert_eq!(run.code, 1, "stderr:\n{}", run.stderr);
    let row = run.row("t");
    assert_eq!(row["status"], "error");
    assert!(
        row["error"].contains("report.xml could not be parsed"),
        "{row:?}"
    );
}
