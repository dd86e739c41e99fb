//! SWE-bench's reading of an eval script's output and its verdict, under
//! either rule set: the cut of the log between the script's markers
//! (`get_logs_eval`) and the grading of `get_eval_tests_report` /
//! `get_resolution_status`, the same for every language.
//!
//! Both versions: a log holding one of the harness's failure lines
//! (`>>>>> Patch Apply Failed`, `Reset Failed`, `Tests Errored`, `Tests
//! Timed Out`) or missing a marker does not count as applied (no verdict,
//! unresolved); a test missing from the log fails. 4.1: a skipped test
//! counts neither way. 5.0: a skipped FAIL_TO_PASS test fails (a skipped
//! PASS_TO_PASS test is maintained); an empty status map with no sign the
//! suite ran ([`suite_ran`]) and a non-zero recorded exit code with no
//! FAILED or ERROR parsed do not count as applied; a truncated
//! parametrized id matches the tests it starts when they agree
//! ([`resolve_5`]). onebash's status map is sorted, not in the log's
//! order, so where 5.0 takes the first of agreeing candidates onebash
//! takes the first by name; the two differ only when the candidates mix
//! SKIPPED with FAILED for a PASS_TO_PASS test.

use std::sync::OnceLock;

use regex::Regex;

use super::report::{InstanceGrade, Split, TestsStatus};
use super::{END_TEST_OUTPUT, Parser, Rules, START_TEST_OUTPUT, StatusMap};
use crate::grade::testlog::{Graded, PerTestVerdict, Resolution, TestResults, status_word};

/// The lines the package's harness writes when a step failed; a log
/// holding one is never graded (both versions).
pub const BAD_CODES: [&str; 4] = [
    ">>>>> Patch Apply Failed",
    ">>>>> Reset Failed",
    ">>>>> Tests Errored",
    ">>>>> Tests Timed Out",
];

/// What 5.0's eval script echoes after the end marker: the test
/// command's own exit status.
pub const TEST_EXIT_CODE: &str = ">>>>> Test Exit Code";

/// The shell variable 5.0's eval script keeps the exit status in.
const TEST_EXIT_CODE_VAR: &str = "SWEBENCH_TEST_EXIT_CODE";

/// 5.0's `SUITE_RAN`: evidence that a test runner ran, every count
/// non-zero (karma's "Executed 0 of 0" is no evidence).
fn suite_ran(log: &str) -> bool {
    static PATTERN: OnceLock<Regex> = OnceLock::new();
    PATTERN
        .get_or_init(|| {
            Regex::new(concat!(
                r"(?m)Executed [1-9]\d* of \d+",
                r"|TOTAL: [1-9]\d* (?:SUCCESS|FAILED)",
                r"|[1-9]\d* passing",
                r"|Tests:\s+[1-9]\d*",
                r"|Test Suites:\s+(?:\d+ \w+, )*[1-9]\d* total",
                r"|^# tests [1-9]\d*",
                r"|[1-9]\d* specs?, \d+ failures?",
                r"|': ok$",
            ))
            .unwrap_or_else(|err| unreachable!("a fixed pattern: {err}"))
        })
        .is_match(log)
}

/// 5.0's `parse_test_exit_code`: the first recorded exit status.
pub fn recorded_exit_code(log: &str) -> Option<i64> {
    static PATTERN: OnceLock<Regex> = OnceLock::new();
    let pattern = PATTERN.get_or_init(|| {
        Regex::new(&format!(r"{}:\s*(-?\d+)", regex::escape(TEST_EXIT_CODE)))
            .unwrap_or_else(|err| unreachable!("a fixed pattern: {err}"))
    });
    pattern.captures(log)?.get(1)?.as_str().parse().ok()
}

/// 5.0's `record_test_exit_code` over an eval script: the test command's
/// status kept before the end marker's line, echoed after it; a script
/// without the marker is left as it is. Lines are the script's own.
pub fn record_test_exit_code(script: &str) -> String {
    let lines: Vec<&str> = script.split('\n').collect();
    let Some(at) = lines.iter().position(|line| line.contains(END_TEST_OUTPUT)) else {
        return script.to_owned();
    };
    let keep = format!("{TEST_EXIT_CODE_VAR}=$?");
    let echo = format!("echo \"{TEST_EXIT_CODE}: ${TEST_EXIT_CODE_VAR}\"");
    let mut out: Vec<&str> = lines[..at].to_vec();
    out.extend([keep.as_str(), lines[at], echo.as_str()]);
    out.extend(&lines[at + 1..]);
    out.join("\n")
}

/// Whether the exit-code rule of 5.0 throws a log out: a non-zero status
/// while the parsed statuses hold no failure (a patch that prints its own
/// PASSED lines). onebash's own grading applies it with the real exit
/// code of the test command.
pub(crate) fn exit_contradicts<'a>(
    exit_code: Option<i64>,
    statuses: impl IntoIterator<Item = &'a str>,
) -> bool {
    let mut statuses = statuses.into_iter().peekable();
    exit_code.is_some_and(|code| code != 0)
        && statuses.peek().is_some()
        && !statuses.any(|s| s == "FAILED" || s == "ERROR")
}

/// `get_logs_eval` under `rules`: the part of the eval script's output
/// between its markers, parsed; the whole output when that part gives
/// nothing. None when the log does not count as applied (module doc).
pub fn parse_eval_output(rules: Rules, parser: Parser, output: &str) -> Option<StatusMap> {
    if BAD_CODES.iter().any(|code| output.contains(code)) {
        return None;
    }
    let (_, after) = output.split_once(START_TEST_OUTPUT)?;
    if !output.contains(END_TEST_OUTPUT) {
        return None;
    }
    let section = after.split(END_TEST_OUTPUT).next().unwrap_or_default();
    let mut map = parser.parse_as(rules, section);
    if map.is_empty() {
        map = parser.parse_as(rules, output);
    }
    if rules == Rules::Swebench50 {
        if map.is_empty() && !suite_ran(output) {
            return None;
        }
        if exit_contradicts(recorded_exit_code(output), map.values().map(String::as_str)) {
            return None;
        }
    }
    Some(map)
}

/// What SWE-bench makes of an eval script's output.
#[derive(Debug, Clone)]
pub struct EvalGrade {
    /// The parser's status map (empty when not applied).
    pub statuses: StatusMap,
    /// Whether the log counts as applied (the package's "patch applied").
    pub applied: bool,
    pub verdict: PerTestVerdict,
    /// `get_eval_tests_report`'s lists.
    pub tests_status: TestsStatus,
}

impl EvalGrade {
    /// The pieces of SWE-bench's report.json.
    pub fn instance_grade(&self) -> InstanceGrade {
        InstanceGrade {
            applied: self.applied,
            resolved: self.verdict.resolved,
            tests_status: self.tests_status.clone(),
        }
    }
}

/// `get_eval_report` over an eval script's output under `rules`: parsed
/// between the markers, graded; a log that does not count as applied is
/// unresolved whatever its lists.
pub fn grade_output(
    rules: Rules,
    parser: Parser,
    fail_only: bool,
    output: &str,
    fail_to_pass: &[String],
    pass_to_pass: &[String],
) -> EvalGrade {
    let parsed = parse_eval_output(rules, parser, output);
    let applied = parsed.is_some();
    let statuses = parsed.unwrap_or_default();
    let (mut verdict, tests_status) =
        grade(rules, &statuses, fail_to_pass, pass_to_pass, fail_only);
    if !applied {
        verdict.resolved = false;
        verdict.resolution = Some(Resolution::No);
    }
    EvalGrade {
        statuses,
        applied,
        verdict,
        tests_status,
    }
}

/// Where a listed test landed in `get_eval_tests_report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Success,
    Failure,
    /// Neither (4.1's skipped test, or an unknown status word): not
    /// counted.
    Neither,
}

/// 5.0's `_resolve_case`: the key of `case`, or of the tests a truncated
/// parametrized id (more `[` than `]`) starts when they all agree on pass
/// against fail.
fn resolve_5<'a>(map: &'a StatusMap, case: &'a str) -> Option<(&'a str, &'a str)> {
    if let Some((key, status)) = map.get_key_value(case) {
        return Some((key, status));
    }
    if case.matches('[').count() <= case.matches(']').count() {
        return None;
    }
    let passing = |s: &str| s == "PASSED" || s == "XFAIL";
    let mut matches = map
        .range(case.to_owned()..)
        .take_while(|(k, _)| k.starts_with(case));
    let (first_key, first) = matches.next()?;
    let agree = matches.all(|(_, s)| passing(s) == passing(first));
    agree.then_some((first_key.as_str(), first.as_str()))
}

/// Which list a FAIL_TO_PASS (`maintained` false) or PASS_TO_PASS test
/// goes in.
fn outcome(
    rules: Rules,
    map: &StatusMap,
    test: &str,
    fail_only: bool,
    maintained: bool,
) -> Outcome {
    if fail_only {
        // check_fail_only: the name as written, in both versions.
        return if map.get(test).map(String::as_str) == Some("FAILED") {
            Outcome::Failure
        } else {
            Outcome::Success
        };
    }
    let status = match rules {
        Rules::Swebench41 => map.get(test).map(String::as_str),
        Rules::Swebench50 => resolve_5(map, test).map(|(_, status)| status),
    };
    match (rules, status) {
        (_, Some("PASSED" | "XFAIL")) => Outcome::Success,
        (Rules::Swebench50, Some("SKIPPED")) if maintained => Outcome::Success,
        (Rules::Swebench50, Some("SKIPPED")) => Outcome::Failure,
        (_, None | Some("FAILED" | "ERROR")) => Outcome::Failure,
        (_, Some(_)) => Outcome::Neither,
    }
}

/// The package's grading of a status map under `rules`: per listed test,
/// the lists of `get_eval_tests_report`, and the resolution (FULL when no
/// FAIL_TO_PASS or PASS_TO_PASS test failed; PARTIAL when some
/// FAIL_TO_PASS passed and none of PASS_TO_PASS failed). `resolved` is
/// FULL.
pub fn grade(
    rules: Rules,
    map: &StatusMap,
    fail_to_pass: &[String],
    pass_to_pass: &[String],
    fail_only: bool,
) -> (PerTestVerdict, TestsStatus) {
    let check = |names: &[String], maintained: bool| -> (Vec<Graded>, Split) {
        let mut split = Split::default();
        let graded = names
            .iter()
            .map(|name| {
                let result = outcome(rules, map, name, fail_only, maintained);
                match result {
                    Outcome::Success => split.success.push(name.clone()),
                    Outcome::Failure => split.failure.push(name.clone()),
                    Outcome::Neither => {}
                }
                let found = match rules {
                    Rules::Swebench41 => map.get(name).map(String::as_str),
                    Rules::Swebench50 => resolve_5(map, name).map(|(_, status)| status),
                };
                Graded {
                    name: name.clone(),
                    status: found.and_then(status_word),
                    ok: result != Outcome::Failure,
                }
            })
            .collect();
        (graded, split)
    };
    let (f2p, f2p_split) = check(fail_to_pass, false);
    let (p2p, p2p_split) = check(pass_to_pass, true);
    let resolution = resolution(&f2p_split, &p2p_split);
    let verdict = PerTestVerdict {
        resolved: resolution == Resolution::Full,
        fail_to_pass: f2p,
        pass_to_pass: p2p,
        resolution: Some(resolution),
        rules: Some(rules),
        invalid: None,
    };
    let tests_status = TestsStatus {
        fail_to_pass: f2p_split,
        pass_to_pass: p2p_split,
        ..TestsStatus::default()
    };
    (verdict, tests_status)
}

/// `get_resolution_status` of two lists (the same in both versions).
pub(crate) fn resolution(f2p: &Split, p2p: &Split) -> Resolution {
    if f2p.failure.is_empty() && p2p.failure.is_empty() {
        Resolution::Full
    } else if !f2p.success.is_empty() && p2p.failure.is_empty() {
        Resolution::Partial
    } else {
        Resolution::No
    }
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
    use super::super::log::tests::map;
    use super::*;

    const BOTH: [Rules; 2] = [Rules::Swebench41, Rules::Swebench50];

    #[test]
    fn the_log_is_read_between_the_markers() {
        let log = "PASSED early::t\n+ : '>>>>> Start Test Output'\nPASSED a::t\n+ : '>>>>> End Test Output'\nFAILED late::t\n";
        for rules in BOTH {
            assert_eq!(
                parse_eval_output(rules, Parser::Pytest, log),
                Some(map(&[("a::t", "PASSED")]))
            );
            // Nothing between them: the whole output.
            let empty = "PASSED early::t\n>>>>> Start Test Output\n>>>>> End Test Output\n";
            assert_eq!(
                parse_eval_output(rules, Parser::Pytest, empty),
                Some(map(&[("early::t", "PASSED")]))
            );
            assert_eq!(
                parse_eval_output(rules, Parser::Pytest, "PASSED a::t\n"),
                None
            );
        }
    }

    #[test]
    fn a_harness_failure_line_means_not_applied_in_both_versions() {
        for code in BAD_CODES {
            let log =
                format!(">>>>> Start Test Output\nPASSED a::t\n>>>>> End Test Output\n{code}\n");
            for rules in BOTH {
                assert_eq!(
                    parse_eval_output(rules, Parser::Pytest, &log),
                    None,
                    "{code}"
                );
            }
        }
    }

    #[test]
    fn five_zero_throws_out_empty_and_contradicted_logs() {
        let empty = ">>>>> Start Test Output\nnothing\n>>>>> End Test Output\n";
        assert_eq!(
            parse_eval_output(Rules::Swebench41, Parser::Pytest, empty),
            Some(map(&[]))
        );
        assert_eq!(
            parse_eval_output(Rules::Swebench50, Parser::Pytest, empty),
            None
        );
        let ran = ">>>>> Start Test Output\n3 passing\n>>>>> End Test Output\n";
        assert_eq!(
            parse_eval_output(Rules::Swebench50, Parser::Marked, ran),
            Some(map(&[]))
        );
        let spoofed = ">>>>> Start Test Output\nPASSED a::t\n>>>>> End Test Output\n>>>>> Test Exit Code: 1\n";
        assert!(parse_eval_output(Rules::Swebench41, Parser::Pytest, spoofed).is_some());
        assert_eq!(
            parse_eval_output(Rules::Swebench50, Parser::Pytest, spoofed),
            None
        );
        let failed = spoofed.replace("PASSED a::t", "PASSED a::t\nFAILED b::t");
        assert!(parse_eval_output(Rules::Swebench50, Parser::Pytest, &failed).is_some());
        assert_eq!(
            recorded_exit_code("x\n>>>>> Test Exit Code:   -9\n"),
            Some(-9)
        );
        assert_eq!(recorded_exit_code("x\n"), None);
    }

    #[test]
    fn the_exit_code_is_recorded_around_the_end_marker() {
        let script = "#!/bin/bash\npytest -rA\n: '>>>>> End Test Output'\ngit checkout x";
        assert_eq!(
            record_test_exit_code(script),
            "#!/bin/bash\npytest -rA\nSWEBENCH_TEST_EXIT_CODE=$?\n: '>>>>> End Test Output'\necho \">>>>> Test Exit Code: $SWEBENCH_TEST_EXIT_CODE\"\ngit checkout x"
        );
        assert_eq!(record_test_exit_code("pytest\n"), "pytest\n");
    }

    #[test]
    fn grading_rules() {
        let names = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let m = map(&[
            ("a", "PASSED"),
            ("b", "FAILED"),
            ("s", "SKIPPED"),
            ("x", "XFAIL"),
            ("p[one-a]", "PASSED"),
            ("p[one-b]", "XFAIL"),
            ("q[one-a]", "PASSED"),
            ("q[one-b]", "FAILED"),
        ]);
        use Resolution::{Full, No, Partial};
        // (F2P, P2P, under 4.1, under 5.0)
        let cases: &[(&[&str], &[&str], Resolution, Resolution)] = &[
            (&["a", "x"], &["s"], Full, Full),
            (&["a", "b"], &[], Partial, Partial),
            (&["a", "missing"], &["b"], No, No),
            (&["b"], &[], No, No),
            // A skipped FAIL_TO_PASS test: neither way in 4.1, a failure in 5.0.
            (&["s"], &["a"], Full, No),
            (&[], &[], Full, Full),
            // Truncated ids: 5.0 matches agreeing candidates only.
            (&["p[one"], &[], No, Full),
            (&["q[one"], &[], No, No),
            (&["p[on"], &["q[one"], No, No),
            // No unmatched `[`: exact names only.
            (&["p"], &[], No, No),
        ];
        for (f2p, p2p, old, new) in cases {
            for (rules, expected) in [(Rules::Swebench41, old), (Rules::Swebench50, new)] {
                let (verdict, _) = grade(rules, &m, &names(f2p), &names(p2p), false);
                assert_eq!(
                    verdict.resolution,
                    Some(*expected),
                    "{rules} {f2p:?} {p2p:?}"
                );
                assert_eq!(verdict.resolved, *expected == Full);
            }
        }
        // The lists: 4.1 leaves a skipped test out of both, 5.0 fails it for
        // FAIL_TO_PASS and maintains it for PASS_TO_PASS.
        let (_, old) = grade(Rules::Swebench41, &m, &names(&["s"]), &names(&["s"]), false);
        assert_eq!(old.fail_to_pass, Split::default());
        assert_eq!(old.pass_to_pass, Split::default());
        let (_, new) = grade(Rules::Swebench50, &m, &names(&["s"]), &names(&["s"]), false);
        assert_eq!(new.fail_to_pass.failure, names(&["s"]));
        assert_eq!(new.pass_to_pass.success, names(&["s"]));
        // Fail-only repos: only FAILED counts against.
        for rules in BOTH {
            let (verdict, _) = grade(rules, &m, &names(&["missing", "a", "s"]), &[], true);
            assert_eq!(verdict.resolution, Some(Full));
        }
    }
}
