//! Per-test results out of a test run, and the SWE-bench verdict.
//!
//! Parses what the common runners print (pytest's `-rA` summary and `-v`
//! lines, unittest's and Django's `-v` lines) or write (JUnit XML, which
//! cargo-nextest, go-junit-report, jest and maven produce) into a status
//! per test, then grades by SWE-bench's rules: every FAIL_TO_PASS test must
//! be PASSED or XFAIL, every PASS_TO_PASS test PASSED, XFAIL or SKIPPED; a
//! test that is missing fails; a name cut short in the instance (long
//! parametrized ids) matches the tests it is a prefix of.

use std::collections::BTreeMap;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum TestStatus {
    Passed,
    Failed,
    Error,
    Skipped,
    Xfail,
    Xpass,
}

/// Statuses by test name. A test seen twice keeps its worst status.
pub type TestResults = BTreeMap<String, TestStatus>;

fn record(results: &mut TestResults, name: &str, status: TestStatus) {
    let name = name.trim();
    if name.is_empty() {
        return;
    }
    let entry = results.entry(name.to_owned()).or_insert(status);
    let bad = |s: TestStatus| matches!(s, TestStatus::Failed | TestStatus::Error);
    if bad(status) && !bad(*entry) {
        *entry = status;
    }
}

/// Parses a test command's console output.
pub fn parse_output(text: &str) -> TestResults {
    let mut results = TestResults::new();
    let lines: Vec<&str> = text.lines().collect();
    for (i, raw) in lines.iter().enumerate() {
        let line = raw.trim_end();
        if let Some((name, status)) = pytest_summary(line).or_else(|| pytest_verbose(line)) {
            record(&mut results, &name, status);
        } else if let Some((name, status)) = unittest_verbose(line) {
            // A docstring puts the name on the line before the status.
            let name = if name.contains('(') {
                name
            } else {
                lines
                    .get(i.wrapping_sub(1))
                    .map(|p| p.trim().to_owned())
                    .unwrap_or(name)
            };
            record(&mut results, &name, status);
        }
    }
    results
}

fn status_word(word: &str) -> Option<TestStatus> {
    Some(match word {
        "PASSED" => TestStatus::Passed,
        "FAILED" => TestStatus::Failed,
        "ERROR" => TestStatus::Error,
        "SKIPPED" => TestStatus::Skipped,
        "XFAIL" => TestStatus::Xfail,
        "XPASS" => TestStatus::Xpass,
        _ => return None,
    })
}

/// `PASSED tests/t.py::test_a` or `FAILED tests/t.py::test_b - AssertionError`.
fn pytest_summary(line: &str) -> Option<(String, TestStatus)> {
    let (word, rest) = line.split_once(' ')?;
    let status = status_word(word)?;
    // `SKIPPED [1] tests/t.py:12: reason` names no test id.
    if rest.starts_with('[') {
        return None;
    }
    let name = rest.split(" - ").next().unwrap_or(rest);
    name.contains("::").then(|| (name.to_owned(), status))
}

/// `tests/t.py::test_a PASSED [ 50%]`.
fn pytest_verbose(line: &str) -> Option<(String, TestStatus)> {
    let mut parts = line.split_whitespace();
    let name = parts.next()?;
    let status = status_word(parts.next()?)?;
    name.contains("::").then(|| (name.to_owned(), status))
}

/// `test_a (pkg.tests.TestX) ... ok`, `... FAIL`, `... ERROR`,
/// `... skipped 'why'`, `... expected failure`, `... unexpected success`.
fn unittest_verbose(line: &str) -> Option<(String, TestStatus)> {
    let (name, outcome) = line.rsplit_once(" ... ")?;
    let status = match outcome.trim() {
        "ok" => TestStatus::Passed,
        "FAIL" => TestStatus::Failed,
        "ERROR" => TestStatus::Error,
        "expected failure" => TestStatus::Xfail,
        "unexpected success" => TestStatus::Xpass,
        other if other.starts_with("skipped") => TestStatus::Skipped,
        _ => return None,
    };
    Some((name.trim().to_owned(), status))
}

/// Parses JUnit XML: `classname::name` per `<testcase>`, failed when it
/// holds `<failure>`, an error with `<error>`, skipped with `<skipped>`.
pub fn parse_junit(xml: &str) -> TestResults {
    let mut results = TestResults::new();
    let mut rest = xml;
    while let Some(start) = rest.find("<testcase") {
        rest = &rest[start + "<testcase".len()..];
        let Some(tag_end) = rest.find('>') else { break };
        let tag = &rest[..tag_end];
        let self_closing = tag.ends_with('/');
        let body = if self_closing {
            ""
        } else {
            let end = rest.find("</testcase>").unwrap_or(rest.len());
            &rest[tag_end..end]
        };
        let name = attribute(tag, "name").unwrap_or_default();
        let full = match attribute(tag, "classname") {
            Some(class) if !class.is_empty() => format!("{class}::{name}"),
            _ => name,
        };
        let status = if body.contains("<failure") {
            TestStatus::Failed
        } else if body.contains("<error") {
            TestStatus::Error
        } else if body.contains("<skipped") {
            TestStatus::Skipped
        } else {
            TestStatus::Passed
        };
        record(&mut results, &full, status);
    }
    results
}

fn attribute(tag: &str, name: &str) -> Option<String> {
    let mut search = tag;
    loop {
        let at = search.find(name)?;
        let before = search[..at].chars().last();
        let after = &search[at + name.len()..];
        if before.is_none_or(char::is_whitespace)
            && let Some(value) = after.trim_start().strip_prefix('=')
        {
            let value = value.trim_start();
            let quote = value.chars().next()?;
            let inner = &value[1..];
            let end = inner.find(quote)?;
            return Some(unescape(&inner[..end]));
        }
        search = &search[at + name.len()..];
    }
}

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// One listed test and what it came to.
#[derive(Debug, Clone, Serialize)]
pub struct Graded {
    pub name: String,
    /// The status found, None when the test is missing from the output.
    pub status: Option<TestStatus>,
    pub ok: bool,
}

/// The per-test verdict of a task.
#[derive(Debug, Clone, Serialize)]
pub struct PerTestVerdict {
    pub resolved: bool,
    pub fail_to_pass: Vec<Graded>,
    pub pass_to_pass: Vec<Graded>,
}

/// Grades by SWE-bench's rules.
pub fn grade(
    results: &TestResults,
    fail_to_pass: &[String],
    pass_to_pass: &[String],
) -> PerTestVerdict {
    let find = |name: &str| -> Option<TestStatus> {
        if let Some(status) = results.get(name) {
            return Some(*status);
        }
        // A name cut short in the instance: every test it starts, worst first.
        let matching: Vec<TestStatus> = results
            .range(name.to_owned()..)
            .take_while(|(k, _)| k.starts_with(name))
            .map(|(_, s)| *s)
            .collect();
        matching
            .iter()
            .find(|s| matches!(s, TestStatus::Failed | TestStatus::Error))
            .or(matching.first())
            .copied()
    };
    let check = |names: &[String], allowed: &[TestStatus]| -> Vec<Graded> {
        names
            .iter()
            .map(|name| {
                let status = find(name);
                Graded {
                    name: name.clone(),
                    ok: status.is_some_and(|s| allowed.contains(&s)),
                    status,
                }
            })
            .collect()
    };
    let f2p = check(fail_to_pass, &[TestStatus::Passed, TestStatus::Xfail]);
    let p2p = check(
        pass_to_pass,
        &[TestStatus::Passed, TestStatus::Xfail, TestStatus::Skipped],
    );
    PerTestVerdict {
        resolved: f2p.iter().chain(&p2p).all(|g| g.ok),
        fail_to_pass: f2p,
        pass_to_pass: p2p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TestStatus::*;

    const PYTEST: &str = r#"============================= test session starts ==============================
collected 5 items

tests/test_ops.py ..F.sx                                                 [100%]

=================================== FAILURES ===================================
___________________________________ test_div ___________________________________
    def test_div():
>       assert divide(1, 0) == 0
E       ZeroDivisionError: division by zero
=========================== short test summary info ============================
PASSED tests/test_ops.py::test_add
PASSED tests/test_ops.py::test_sub
PASSED tests/test_ops.py::test_param[a-very-long-parameter-id-that-swebench-cuts]
FAILED tests/test_ops.py::test_div - ZeroDivisionError: division by zero
SKIPPED [1] tests/test_ops.py:30: no numpy
XFAIL tests/test_ops.py::test_known - reason: bug 12
============== 1 failed, 3 passed, 1 skipped, 1 xfailed in 0.05s ==============="#;

    #[test]
    fn pytest_summary_lines() {
        let results = parse_output(PYTEST);
        assert_eq!(results.get("tests/test_ops.py::test_add"), Some(&Passed));
        assert_eq!(results.get("tests/test_ops.py::test_div"), Some(&Failed));
        assert_eq!(results.get("tests/test_ops.py::test_known"), Some(&Xfail));
        assert_eq!(results.len(), 5);
    }

    #[test]
    fn unittest_and_django_verbose_lines() {
        let text = "test_add (tests.test_ops.OpsTest.test_add) ... ok\n\
                    test_div (tests.test_ops.OpsTest) ... FAIL\n\
                    test_io (tests.test_ops.OpsTest) ... ERROR\n\
                    test_gpu (tests.test_ops.OpsTest) ... skipped 'no gpu'\n\
                    test_old (tests.test_ops.OpsTest) ... expected failure\n\
                    test_doc (tests.test_ops.OpsTest)\nAdds two numbers. ... ok\n\
                    ----------------------------------------------------------------------\n\
                    Ran 6 tests in 0.001s\n\nFAILED (failures=1, errors=1)\n";
        let results = parse_output(text);
        assert_eq!(
            results.get("test_add (tests.test_ops.OpsTest.test_add)"),
            Some(&Passed)
        );
        assert_eq!(
            results.get("test_div (tests.test_ops.OpsTest)"),
            Some(&Failed)
        );
        assert_eq!(
            results.get("test_io (tests.test_ops.OpsTest)"),
            Some(&Error)
        );
        assert_eq!(
            results.get("test_gpu (tests.test_ops.OpsTest)"),
            Some(&Skipped)
        );
        assert_eq!(
            results.get("test_old (tests.test_ops.OpsTest)"),
            Some(&Xfail)
        );
        assert_eq!(
            results.get("test_doc (tests.test_ops.OpsTest)"),
            Some(&Passed)
        );
    }

    #[test]
    fn junit_xml() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="calc" tests="4">
  <testcase classname="calc::ops" name="adds" time="0.001"/>
  <testcase classname="calc::ops" name="divides &amp; rounds" time="0.002"><failure message="boom">assertion failed</failure></testcase>
  <testcase classname="calc::ops" name="reads"><error message="io"/></testcase>
  <testcase classname="calc::ops" name="gpu"><skipped/></testcase>
</testsuite></testsuites>"#;
        let results = parse_junit(xml);
        assert_eq!(results.get("calc::ops::adds"), Some(&Passed));
        assert_eq!(results.get("calc::ops::divides & rounds"), Some(&Failed));
        assert_eq!(results.get("calc::ops::reads"), Some(&Error));
        assert_eq!(results.get("calc::ops::gpu"), Some(&Skipped));
    }

    #[test]
    fn swebench_rules() {
        let results = parse_output(PYTEST);
        let names = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        // Resolved: F2P passed or xfail, P2P passed.
        let verdict = grade(
            &results,
            &names(&[
                "tests/test_ops.py::test_add",
                "tests/test_ops.py::test_known",
            ]),
            &names(&["tests/test_ops.py::test_sub"]),
        );
        assert!(verdict.resolved);
        // A PASS_TO_PASS test that broke.
        let verdict = grade(
            &results,
            &names(&["tests/test_ops.py::test_add"]),
            &names(&["tests/test_ops.py::test_div"]),
        );
        assert!(!verdict.resolved);
        assert_eq!(verdict.pass_to_pass[0].status, Some(Failed));
        // A missing test fails.
        let verdict = grade(&results, &names(&["tests/test_ops.py::test_missing"]), &[]);
        assert!(!verdict.resolved);
        assert_eq!(verdict.fail_to_pass[0].status, None);
        // A parametrized id cut short matches by prefix.
        let verdict = grade(
            &results,
            &names(&["tests/test_ops.py::test_param[a-very-long-param"]),
            &[],
        );
        assert!(verdict.resolved, "{verdict:?}");
        // Skipped is fine for PASS_TO_PASS only.
        let mut skipped = TestResults::new();
        skipped.insert("t::s".to_owned(), Skipped);
        assert!(grade(&skipped, &[], &names(&["t::s"])).resolved);
        assert!(!grade(&skipped, &names(&["t::s"]), &[]).resolved);
    }

    #[test]
    fn nothing_parseable_gives_nothing() {
        assert!(parse_output("Segmentation fault\n").is_empty());
        assert!(parse_junit("<testsuites/>").is_empty());
    }
}
