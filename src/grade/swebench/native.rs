//! The log parsers of SWE-bench's C/C++, Go and Rust repos
//! (`harness/log_parsers/{c,go,rust}.py`): redis's and jq's test
//! runners, doctest's XML reporter, micropython's run-tests,
//! googletest, `go test -v` and `cargo test`.

use std::sync::OnceLock;

use regex::Regex;

use super::lines::{StatusMap, pattern, per_line, set, strip};

pub(super) fn gotest(log: &str) -> StatusMap {
    static GO: OnceLock<Regex> = OnceLock::new();
    let re = pattern(&GO, r"^--- (PASS|FAIL|SKIP): (.+) \((.+)\)$");
    per_line(log, re, (2, 1), |word| match word {
        "PASS" => Some("PASSED"),
        "FAIL" => Some("FAILED"),
        "SKIP" => Some("SKIPPED"),
        _ => None,
    })
}

/// `ignored` tests are not recorded.
pub(super) fn cargo(log: &str) -> StatusMap {
    static CARGO: OnceLock<Regex> = OnceLock::new();
    let re = pattern(&CARGO, r"^test\s+(\S+)\s+\.\.\.\s+(\w+)$");
    per_line(log, re, (1, 2), |word| match word {
        "ok" => Some("PASSED"),
        "FAILED" => Some("FAILED"),
        _ => None,
    })
}

/// A failed test's name loses its trailing ` in FILE`.
pub(super) fn redis(log: &str) -> StatusMap {
    static REDIS: OnceLock<Regex> = OnceLock::new();
    static WHERE: OnceLock<Regex> = OnceLock::new();
    let re = pattern(
        &REDIS,
        r"^\[(ok|err|skip|ignore)\]:\s(.+?)(?:\s\((\d+\s*m?s)\))?$",
    );
    let location = pattern(&WHERE, r"\s+in\s+\S+$");
    let mut map = StatusMap::new();
    for line in log.split('\n') {
        let Some(found) = re.captures(strip(line)) else {
            continue;
        };
        let name = &found[2];
        match &found[1] {
            "ok" => set(&mut map, name, "PASSED"),
            "err" => set(&mut map, &location.replace(name, ""), "FAILED"),
            _ => set(&mut map, name, "SKIPPED"),
        }
    }
    map
}

pub(super) fn jq(log: &str) -> StatusMap {
    static JQ: OnceLock<Regex> = OnceLock::new();
    let re = pattern(&JQ, r"^\s*(PASS|FAIL):\s(.+)$");
    per_line(log, re, (2, 1), |word| match word {
        "PASS" => Some("PASSED"),
        "FAIL" => Some("FAILED"),
        _ => None,
    })
}

pub(super) fn micropython(log: &str) -> StatusMap {
    static MICROPYTHON: OnceLock<Regex> = OnceLock::new();
    let re = pattern(&MICROPYTHON, r"^(pass|FAIL|skip)\s+(.+)$");
    per_line(log, re, (2, 1), |word| match word {
        "pass" => Some("PASSED"),
        "FAIL" => Some("FAILED"),
        "skip" => Some("SKIPPED"),
        _ => None,
    })
}

pub(super) fn googletest(log: &str) -> StatusMap {
    static GTEST: OnceLock<Regex> = OnceLock::new();
    let re = pattern(&GTEST, r"^.*\[\s*(OK|FAILED)\s*\]\s(.*)\s\(.*\)$");
    per_line(log, re, (2, 1), |word| match word {
        "OK" => Some("PASSED"),
        "FAILED" => Some("FAILED"),
        _ => None,
    })
}

/// doctest's `-r=xml` report (from `<doctest` to the first `</doctest>`
/// after it): each `TestCase > SubCase` passes when every `Expression`
/// under the subcase succeeded. XML that does not parse, on which the
/// package raises, gives nothing.
pub(super) fn doctest(log: &str) -> StatusMap {
    let mut map = StatusMap::new();
    let Some(start) = log.find("<doctest") else {
        return map;
    };
    let Some(end) = log[start..].find("</doctest>") else {
        return map;
    };
    let Ok(document) = roxmltree::Document::parse(&log[start..start + end + "</doctest>".len()])
    else {
        return map;
    };
    let named = |node: &roxmltree::Node, tag: &str| node.is_element() && node.has_tag_name(tag);
    let root = document.root_element();
    for case in root
        .descendants()
        .filter(|n| *n != root && named(n, "TestCase"))
    {
        // Python's f-string of a missing attribute.
        let case_name = case.attribute("name").unwrap_or("None");
        for sub in case
            .descendants()
            .filter(|n| *n != case && named(n, "SubCase"))
        {
            let sub_name = sub.attribute("name").unwrap_or("None");
            let passed = sub
                .descendants()
                .filter(|n| *n != sub && named(n, "Expression"))
                .all(|e| e.attribute("success") == Some("true"));
            let word = if passed { "PASSED" } else { "FAILED" };
            set(&mut map, &format!("{case_name} > {sub_name}"), word);
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::super::Parser;
    use super::super::log::tests::table;

    #[test]
    fn go_and_cargo_lines() {
        table(
            Parser::GoTest,
            &[(
                "=== RUN   TestA\n--- PASS: TestA (0.00s)\n    --- FAIL: TestA/sub_case (0.01s)\n--- SKIP: TestB (0.00s)\n--- PASS: TestC\n",
                &[
                    ("TestA", "PASSED"),
                    ("TestA/sub_case", "FAILED"),
                    ("TestB", "SKIPPED"),
                ],
            )],
        );
        table(
            Parser::Cargo,
            &[(
                "test a::b ... ok\ntest a::c ... FAILED\ntest a::d ... ignored\ntest result: ok. 1 passed\ntest a::e - should panic ... ok\n",
                &[("a::b", "PASSED"), ("a::c", "FAILED")],
            )],
        );
    }

    #[test]
    fn c_runners() {
        table(
            Parser::Redis,
            &[(
                "[ok]: SET and GET (2 ms)\n[err]: EXPIRE works in tests/unit/expire.tcl\n[skip]: slow one\n[ignore]: other\n",
                &[
                    ("SET and GET", "PASSED"),
                    ("EXPIRE works", "FAILED"),
                    ("slow one", "SKIPPED"),
                    ("other", "SKIPPED"),
                ],
            )],
        );
        table(
            Parser::Jq,
            &[(
                "PASS: tests/a.test\n  FAIL: tests/b.test\nSKIP: c\n",
                &[("tests/a.test", "PASSED"), ("tests/b.test", "FAILED")],
            )],
        );
        table(
            Parser::Micropython,
            &[(
                "pass  basics/a.py\nFAIL  basics/b.py\nskip  extmod/c.py\n",
                &[
                    ("basics/a.py", "PASSED"),
                    ("basics/b.py", "FAILED"),
                    ("extmod/c.py", "SKIPPED"),
                ],
            )],
        );
        table(
            Parser::Googletest,
            &[(
                "[       OK ] FormatTest.Args (0 ms)\n[  FAILED  ] FormatTest.Width (1 ms)\n[  FAILED  ] 1 test, listed below:\n",
                &[
                    ("FormatTest.Args", "PASSED"),
                    ("FormatTest.Width", "FAILED"),
                ],
            )],
        );
    }

    #[test]
    fn doctest_xml() {
        let log = "noise <doctest binary=\"t\"><TestSuite><TestCase name=\"parse\"><SubCase name=\"ok\"><Expression success=\"true\"/></SubCase><SubCase name=\"bad\"><Expression success=\"false\"/></SubCase></TestCase></TestSuite></doctest> tail";
        table(
            Parser::Doctest,
            &[
                (log, &[("parse > ok", "PASSED"), ("parse > bad", "FAILED")]),
                ("<doctest <", &[]),
            ],
        );
    }
}
