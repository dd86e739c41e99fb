//! SWE-bench's reading of a test log and its verdict, line for line.
//!
//! Owns the log parsers of the Python repos (`swebench.harness.log_parsers`:
//! which repo uses which is data, swebench_spec.rs's), the cut of the log
//! between the eval script's markers (`get_logs_eval`) and the grading of
//! `get_eval_tests_report` / `get_resolution_status`. Each mirrors the
//! package's Python, quirks included (a status is the first word of a
//! line, the last line about a test wins, a skipped test counts neither
//! way, a test missing from the log fails), so a verdict here is the one
//! SWE-bench gives; `tests/it/swebench_parity.rs` checks that against the
//! package itself. onebash's own per-test reading, for tasks without a
//! spec, is testlog.rs's.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use regex::Regex;
use serde::Serialize;

use crate::testlog::{Graded, PerTestVerdict, Resolution, TestResults, status_word};

/// What SWE-bench's eval script echoes around the test command (through
/// `set -x`); the log is read between them.
pub const START_TEST_OUTPUT: &str = ">>>>> Start Test Output";
pub const END_TEST_OUTPUT: &str = ">>>>> End Test Output";

/// Test name -> status word, as the package's parsers return it. A word
/// is usually one of [`STATUSES`] but need not be (`ERROR:` in a line
/// starting `ERROR: ...`), so it stays a string.
pub type StatusMap = BTreeMap<String, String>;

/// The package's `TestStatus` values, in its order.
pub const STATUSES: [&str; 5] = ["FAILED", "PASSED", "SKIPPED", "ERROR", "XFAIL"];

/// One of the package's Python log parsers, by what it does (several repo
/// names alias each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Parser {
    /// `parse_log_pytest`: the `-rA` summary lines (flask, xarray,
    /// pytest, astroid, marshmallow, pvlib, pyvista, sqlfluff).
    Pytest,
    /// `parse_log_pytest_options`: as pytest, a path-like parameter cut to
    /// its last component (requests, pylint, pydicom).
    PytestOptions,
    /// `parse_log_pytest_v2`: colour codes and control characters out,
    /// and `name STATUS` lines too (astropy, scikit-learn, sphinx).
    PytestV2,
    /// `parse_log_django`: the runner's `name ... ok` lines.
    Django,
    /// `parse_log_seaborn`.
    Seaborn,
    /// `parse_log_sympy`: `bin/test`'s `test_x ok` lines and its failure
    /// headers.
    Sympy,
    /// `parse_log_matplotlib`: pytest with `MouseButton` ids as numbers.
    Matplotlib,
}

impl Parser {
    /// The parser of the package's function name (the data's `parser`).
    pub fn from_name(name: &str) -> Option<Parser> {
        Some(match name {
            "parse_log_pytest" => Parser::Pytest,
            "parse_log_pytest_options" => Parser::PytestOptions,
            "parse_log_pytest_v2" => Parser::PytestV2,
            "parse_log_django" => Parser::Django,
            "parse_log_seaborn" => Parser::Seaborn,
            "parse_log_sympy" => Parser::Sympy,
            "parse_log_matplotlib" => Parser::Matplotlib,
            _ => return None,
        })
    }

    /// Reads statuses out of `log` as the package's function does.
    pub fn parse(self, log: &str) -> StatusMap {
        match self {
            Parser::Pytest => pytest(log, |line| line.to_owned(), |name| name.to_owned()),
            Parser::PytestOptions => pytest(log, |line| line.to_owned(), cut_option),
            Parser::Matplotlib => pytest(
                log,
                |line| {
                    line.replace("MouseButton.LEFT", "1")
                        .replace("MouseButton.RIGHT", "3")
                },
                |name| name.to_owned(),
            ),
            Parser::PytestV2 => pytest_v2(log),
            Parser::Django => django(log),
            Parser::Seaborn => seaborn(log),
            Parser::Sympy => sympy(log),
        }
    }
}

/// Whitespace as Python's `str.isspace` has it: Rust's, and the
/// separators U+001C..U+001F.
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.split()`: the words between runs of whitespace.
fn words(line: &str) -> Vec<&str> {
    line.split(py_space).filter(|w| !w.is_empty()).collect()
}

fn starts_with_status(line: &str) -> bool {
    STATUSES.iter().any(|s| line.starts_with(s))
}

/// `parse_log_pytest` and the parsers built on it: a line that starts with
/// a status word gives `map[word 2] = word 1` (a FAILED line first loses
/// its ` - `, joining the message to the name's word list).
fn pytest(log: &str, rewrite: impl Fn(&str) -> String, name: impl Fn(&str) -> String) -> StatusMap {
    let mut map = StatusMap::new();
    for raw in log.split('\n') {
        let mut line = rewrite(raw);
        if !starts_with_status(&line) {
            continue;
        }
        if line.starts_with("FAILED") {
            line = line.replace(" - ", " ");
        }
        let parts = words(&line);
        if parts.len() <= 1 {
            continue;
        }
        map.insert(name(parts[1]), parts[0].to_owned());
    }
    map
}

/// `parse_log_pytest_options`' `(.*?)\[(.*)\]`: a parameter that is a
/// path (one leading `/`, no `*`) is cut to its last component; anything
/// after the last `]` is dropped.
fn cut_option(name: &str) -> String {
    let Some(open) = name.find('[') else {
        return name.to_owned();
    };
    let (main, rest) = (&name[..open], &name[open + 1..]);
    let Some(close) = rest.rfind(']') else {
        return name.to_owned();
    };
    let mut option = &rest[..close];
    let cut;
    if option.starts_with('/') && !option.starts_with("//") && !option.contains('*') {
        cut = format!("/{}", option.rsplit('/').next().unwrap_or_default());
        option = &cut;
    }
    format!("{main}[{option}]")
}

fn pytest_v2(log: &str) -> StatusMap {
    static COLOUR: OnceLock<Regex> = OnceLock::new();
    let colour = COLOUR.get_or_init(|| Regex::new(r"\[(\d+)m").expect("a valid pattern"));
    let mut map = StatusMap::new();
    for raw in log.split('\n') {
        let line: String = colour
            .replace_all(raw, "")
            .chars()
            .filter(|c| !('\u{1}'..='\u{1f}').contains(c))
            .collect();
        if starts_with_status(&line) {
            let line = if line.starts_with("FAILED") {
                line.replace(" - ", " ")
            } else {
                line
            };
            let parts = words(&line);
            if parts.len() >= 2 {
                map.insert(parts[1].to_owned(), parts[0].to_owned());
            }
        } else if STATUSES.iter().any(|s| line.ends_with(s)) {
            let parts = words(&line);
            if parts.len() >= 2 {
                map.insert(parts[0].to_owned(), parts[1].to_owned());
            }
        }
    }
    map
}

fn django(log: &str) -> StatusMap {
    let mut map = StatusMap::new();
    let mut prev_test: Option<String> = None;
    let set = |map: &mut StatusMap, test: &str, status: &str| {
        map.insert(test.to_owned(), status.to_owned());
    };
    for raw in log.split('\n') {
        let mut line = raw.trim_matches(py_space).to_owned();
        if line.contains("--version is equivalent to version") {
            set(&mut map, "--version is equivalent to version", "PASSED");
        }
        if let Some((before, _)) = line.split_once(" ... ") {
            prev_test = Some(before.to_owned());
        }
        for suffix in [" ... ok", " ... OK", " ...  OK"] {
            if line.ends_with(suffix) {
                // The package's fix for django__django-7188.
                if line.starts_with("Applying sites.0002_alter_domain_unique...test_no_migrations")
                {
                    line = line
                        .split_once("...")
                        .map_or(line.as_str(), |(_, after)| after)
                        .trim_matches(py_space)
                        .to_owned();
                }
                let test = line.rsplit_once(suffix).map_or(line.as_str(), |(t, _)| t);
                set(&mut map, test, "PASSED");
                break;
            }
        }
        if let Some((test, _)) = line.split_once(" ... skipped") {
            set(&mut map, test, "SKIPPED");
        }
        if line.ends_with(" ... FAIL")
            && let Some((test, _)) = line.split_once(" ... FAIL")
        {
            set(&mut map, test, "FAILED");
        }
        if line.starts_with("FAIL:")
            && let Some(test) = words(&line).get(1)
        {
            set(&mut map, test, "FAILED");
        }
        if line.ends_with(" ... ERROR")
            && let Some((test, _)) = line.split_once(" ... ERROR")
        {
            set(&mut map, test, "ERROR");
        }
        if line.starts_with("ERROR:")
            && let Some(test) = words(&line).get(1)
        {
            set(&mut map, test, "ERROR");
        }
        if line.trim_start_matches(py_space).starts_with("ok")
            && let Some(test) = &prev_test
        {
            set(&mut map, test, "PASSED");
        }
    }
    // A long message printed between a test's `...` and its `ok`.
    static PATTERNS: OnceLock<Vec<Regex>> = OnceLock::new();
    let patterns = PATTERNS.get_or_init(|| {
        [
            r"(?m)^(.*?)\s\.\.\.\sTesting\ against\ Django\ installed\ in\ ((?s:.*?))\ silenced\)\.\nok$",
            r"(?m)^(.*?)\s\.\.\.\sInternal\ Server\ Error:\ /(.*)/\nok$",
            r"(?m)^(.*?)\s\.\.\.\sSystem check identified no issues \(0 silenced\)\nok$",
        ]
        .iter()
        .map(|p| Regex::new(p).expect("a valid pattern"))
        .collect()
    });
    for pattern in patterns {
        for found in pattern.captures_iter(log) {
            if let Some(test) = found.get(1) {
                set(&mut map, test.as_str(), "PASSED");
            }
        }
    }
    map
}

fn seaborn(log: &str) -> StatusMap {
    let mut map = StatusMap::new();
    for line in log.split('\n') {
        let parts = words(line);
        if line.starts_with("FAILED") {
            // The package indexes word 2 unchecked; a bare FAILED would
            // raise there. It names no test here.
            if let Some(test) = parts.get(1) {
                map.insert((*test).to_owned(), "FAILED".to_owned());
            }
        } else if line.contains(" PASSED ") {
            if parts.get(1) == Some(&"PASSED") {
                map.insert(parts[0].to_owned(), "PASSED".to_owned());
            }
        } else if line.starts_with("PASSED")
            && let Some(test) = parts.get(1)
        {
            map.insert((*test).to_owned(), "PASSED".to_owned());
        }
    }
    map
}

fn sympy(log: &str) -> StatusMap {
    static HEADER: OnceLock<Regex> = OnceLock::new();
    let header =
        HEADER.get_or_init(|| Regex::new(r"(_*) (.*)\.py:(.*) (_*)").expect("a valid pattern"));
    let mut map = StatusMap::new();
    for found in header.captures_iter(log) {
        let part = |i: usize| found.get(i).map_or("", |m| m.as_str());
        map.insert(format!("{}.py:{}", part(2), part(3)), "FAILED".to_owned());
    }
    for raw in log.split('\n') {
        let line = raw.trim_matches(py_space);
        if !line.starts_with("test_") {
            continue;
        }
        let Some(test) = words(line).first().map(|w| (*w).to_owned()) else {
            continue;
        };
        if line.ends_with(" E") {
            map.insert(test.clone(), "ERROR".to_owned());
        }
        if line.ends_with(" F") {
            map.insert(test.clone(), "FAILED".to_owned());
        }
        if line.ends_with(" ok") {
            map.insert(test, "PASSED".to_owned());
        }
    }
    map
}

/// `get_logs_eval`: the part of the eval script's output between its
/// markers, parsed; the whole output when that part gives nothing. None
/// when a marker is missing (the package's "patch not applied": no
/// verdict but unresolved).
pub fn parse_eval_output(parser: Parser, output: &str) -> Option<StatusMap> {
    let (_, after) = output.split_once(START_TEST_OUTPUT)?;
    if !output.contains(END_TEST_OUTPUT) {
        return None;
    }
    let section = after.split(END_TEST_OUTPUT).next().unwrap_or_default();
    let map = parser.parse(section);
    Some(if map.is_empty() {
        parser.parse(output)
    } else {
        map
    })
}

/// What SWE-bench makes of an eval script's output.
#[derive(Debug, Clone)]
pub struct EvalGrade {
    /// The parser's status map (empty when not applied).
    pub statuses: StatusMap,
    /// Whether both markers were found: the package's "patch applied".
    pub applied: bool,
    pub verdict: PerTestVerdict,
}

/// `get_eval_report` over an eval script's output: parsed between the
/// markers, graded; a log that lost a marker is unresolved whatever its
/// lists.
pub fn grade_output(
    parser: Parser,
    fail_only: bool,
    output: &str,
    fail_to_pass: &[String],
    pass_to_pass: &[String],
) -> EvalGrade {
    let parsed = parse_eval_output(parser, output);
    let applied = parsed.is_some();
    let statuses = parsed.unwrap_or_default();
    let (mut verdict, _) = grade(&statuses, fail_to_pass, pass_to_pass, fail_only);
    if !applied {
        verdict.resolved = false;
        verdict.resolution = Some(Resolution::No);
    }
    EvalGrade {
        statuses,
        applied,
        verdict,
    }
}

/// Where a listed test landed in `get_eval_tests_report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Success,
    Failure,
    /// Neither (a skipped test, or an unknown status word): not counted.
    Neither,
}

fn outcome(map: &StatusMap, test: &str, fail_only: bool) -> Outcome {
    let status = map.get(test).map(String::as_str);
    if fail_only {
        return if status == Some("FAILED") {
            Outcome::Failure
        } else {
            Outcome::Success
        };
    }
    match status {
        Some("PASSED" | "XFAIL") => Outcome::Success,
        None | Some("FAILED" | "ERROR") => Outcome::Failure,
        Some(_) => Outcome::Neither,
    }
}

/// The package's grading of a status map: per listed test, and the
/// resolution (FULL when no FAIL_TO_PASS or PASS_TO_PASS test failed;
/// PARTIAL when some FAIL_TO_PASS passed and none of PASS_TO_PASS
/// failed). `resolved` is FULL.
pub fn grade(
    map: &StatusMap,
    fail_to_pass: &[String],
    pass_to_pass: &[String],
    fail_only: bool,
) -> (PerTestVerdict, Resolution) {
    let check = |names: &[String]| -> (Vec<Graded>, usize, usize) {
        let (mut good, mut bad) = (0, 0);
        let graded = names
            .iter()
            .map(|name| {
                let result = outcome(map, name, fail_only);
                match result {
                    Outcome::Success => good += 1,
                    Outcome::Failure => bad += 1,
                    Outcome::Neither => {}
                }
                Graded {
                    name: name.clone(),
                    status: map.get(name).and_then(|s| status_word(s)),
                    ok: result != Outcome::Failure,
                }
            })
            .collect();
        (graded, good, bad)
    };
    let (f2p, f2p_good, f2p_bad) = check(fail_to_pass);
    let (p2p, _, p2p_bad) = check(pass_to_pass);
    let resolution = if f2p_bad == 0 && p2p_bad == 0 {
        Resolution::Full
    } else if f2p_good > 0 && p2p_bad == 0 {
        Resolution::Partial
    } else {
        Resolution::No
    };
    let verdict = PerTestVerdict {
        resolved: resolution == Resolution::Full,
        fail_to_pass: f2p,
        pass_to_pass: p2p,
        resolution: Some(resolution),
    };
    (verdict, resolution)
}

/// The status map as onebash's per-test results (tests.json): the words
/// that are statuses; any other word is left out.
pub fn to_results(map: &StatusMap) -> TestResults {
    map.iter()
        .filter_map(|(name, word)| Some((name.clone(), status_word(word)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> StatusMap {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn pytest_lines() {
        let log = "PASSED tests/a.py::test_x\nFAILED tests/a.py::test_y - assert 1 == 2\n\
                   SKIPPED [1] tests/a.py:3: why\nERROR: file not found\nXFAIL tests/a.py::k\nPASSED\n";
        assert_eq!(
            Parser::Pytest.parse(log),
            map(&[
                ("tests/a.py::test_x", "PASSED"),
                ("tests/a.py::test_y", "FAILED"),
                ("[1]", "SKIPPED"),
                ("file", "ERROR:"),
                ("tests/a.py::k", "XFAIL"),
            ])
        );
    }

    #[test]
    fn options_that_are_paths_are_cut() {
        assert_eq!(cut_option("t.py::a[/tmp/x/y.txt]"), "t.py::a[/y.txt]");
        assert_eq!(cut_option("t.py::a[//x/y]"), "t.py::a[//x/y]");
        assert_eq!(cut_option("t.py::a[/x/*]"), "t.py::a[/x/*]");
        assert_eq!(cut_option("t.py::a[1-[2]]tail"), "t.py::a[1-[2]]");
        assert_eq!(cut_option("t.py::a[open"), "t.py::a[open");
    }

    #[test]
    fn pytest_v2_reads_colours_out_and_trailing_statuses() {
        // A tab is a control character to it: `t3\tPASSED` is one word.
        let log = "\u{1b}[32mPASSED\u{1b}[0m a.py::t1\na.py::t2 FAILED\na.py::t3\tPASSED\n";
        assert_eq!(
            Parser::PytestV2.parse(log),
            map(&[("a.py::t1", "PASSED"), ("a.py::t2", "FAILED")])
        );
    }

    #[test]
    fn django_lines() {
        let log = "test_a (x.tests.T) ... ok\ntest_b (x.tests.T) ... FAIL\n\
                   test_c (x.tests.T) ... ERROR\ntest_d (x.tests.T) ... skipped 'no'\n\
                   test_e (x.tests.T) ... some output\nok\n\
                   ======\nFAIL: test_f (x.tests.T)\n";
        assert_eq!(
            Parser::Django.parse(log),
            map(&[
                ("test_a (x.tests.T)", "PASSED"),
                ("test_b (x.tests.T)", "FAILED"),
                ("test_c (x.tests.T)", "ERROR"),
                ("test_d (x.tests.T)", "SKIPPED"),
                ("test_e (x.tests.T)", "PASSED"),
                ("test_f", "FAILED"),
            ])
        );
    }

    #[test]
    fn sympy_lines() {
        let log = "test_one ok\ntest_two F\ntest_three E\n\
                   ____ sympy/core/tests/test_a.py:test_two ____\n";
        assert_eq!(
            Parser::Sympy.parse(log),
            map(&[
                ("test_one", "PASSED"),
                ("test_two", "FAILED"),
                ("test_three", "ERROR"),
                ("sympy/core/tests/test_a.py:test_two", "FAILED"),
            ])
        );
    }

    #[test]
    fn the_log_is_read_between_the_markers() {
        let log = "PASSED early::t\n+ : '>>>>> Start Test Output'\nPASSED a::t\n+ : '>>>>> End Test Output'\nFAILED late::t\n";
        assert_eq!(
            parse_eval_output(Parser::Pytest, log),
            Some(map(&[("a::t", "PASSED")]))
        );
        // Nothing between them: the whole output.
        let empty = "PASSED early::t\n>>>>> Start Test Output\n>>>>> End Test Output\n";
        assert_eq!(
            parse_eval_output(Parser::Pytest, empty),
            Some(map(&[("early::t", "PASSED")]))
        );
        assert_eq!(parse_eval_output(Parser::Pytest, "PASSED a::t\n"), None);
    }

    #[test]
    fn grading_rules() {
        let names = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let m = map(&[
            ("a", "PASSED"),
            ("b", "FAILED"),
            ("s", "SKIPPED"),
            ("x", "XFAIL"),
        ]);
        let cases: &[(&[&str], &[&str], Resolution)] = &[
            (&["a", "x"], &["s"], Resolution::Full),
            (&["a", "b"], &[], Resolution::Partial),
            (&["a", "missing"], &["b"], Resolution::No),
            (&["b"], &[], Resolution::No),
            // A skipped FAIL_TO_PASS test counts neither way.
            (&["s"], &["a"], Resolution::Full),
            (&[], &[], Resolution::Full),
        ];
        for (f2p, p2p, expected) in cases {
            let (verdict, resolution) = grade(&m, &names(f2p), &names(p2p), false);
            assert_eq!(resolution, *expected, "{f2p:?} {p2p:?}");
            assert_eq!(verdict.resolved, *expected == Resolution::Full);
        }
        // Fail-only repos: only FAILED counts against.
        let (_, resolution) = grade(&m, &names(&["missing", "a"]), &[], true);
        assert_eq!(resolution, Resolution::Full);
    }
}
