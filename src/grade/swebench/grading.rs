//! SWE-bench's reading of an eval script's output and its verdict: the
//! cut of the log between the script's markers (`get_logs_eval`) and the
//! grading of `get_eval_tests_report` / `get_resolution_status` (a skipped
//! test counts neither way, a test missing from the log fails), the same
//! for every language.

use super::{END_TEST_OUTPUT, Parser, START_TEST_OUTPUT, StatusMap};
use crate::grade::testlog::{Graded, PerTestVerdict, Resolution, TestResults, status_word};

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
    use super::super::log::tests::map;
    use super::*;

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
