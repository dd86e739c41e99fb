//! The log parsers of SWE-bench's PHP and Ruby repos
//! (`harness/log_parsers/{php,ruby}.py`): phpunit's `--testdox`,
//! minitest, cucumber's progress format, test-unit, and rspec's JSON
//! turned into `name - passed` lines.

use std::sync::OnceLock;

use regex::Regex;

use super::lines::{StatusMap, pattern, per_line, set};

/// A test is named `SUITE > test` after the last suite header (`None >`
/// before any, as Python formats a missing one). Lines are not stripped.
pub(super) fn phpunit(log: &str) -> StatusMap {
    static SUITE: OnceLock<Regex> = OnceLock::new();
    static TEST: OnceLock<Regex> = OnceLock::new();
    let suite_re = pattern(&SUITE, r"^(\w.+) \(.+\)$");
    let test_re = pattern(&TEST, r"^\s*([✔✘↩])\s*(.*)$");
    let mut map = StatusMap::new();
    let mut suite = "None".to_owned();
    for line in log.split('\n') {
        if let Some(found) = suite_re.captures(line) {
            suite = found[1].to_owned();
            continue;
        }
        if let Some(found) = test_re.captures(line) {
            let word = match &found[1] {
                "✔" => "PASSED",
                "✘" => "FAILED",
                _ => "SKIPPED",
            };
            set(&mut map, &format!("{suite} > {}", &found[2]), word);
        }
    }
    map
}

pub(super) fn minitest(log: &str) -> StatusMap {
    static MINITEST: OnceLock<Regex> = OnceLock::new();
    let re = pattern(&MINITEST, r"^(.+)\. .*=.*(\.|F|E).*$");
    per_line(log, re, (1, 2), |word| match word {
        "." => Some("PASSED"),
        "F" | "E" => Some("FAILED"),
        _ => None,
    })
}

pub(super) fn cucumber(log: &str) -> StatusMap {
    static CUCUMBER: OnceLock<Regex> = OnceLock::new();
    let re = pattern(&CUCUMBER, r"^(.*) \.+(\.|F)");
    per_line(log, re, (1, 2), |word| match word {
        "." => Some("PASSED"),
        "F" => Some("FAILED"),
        _ => None,
    })
}

pub(super) fn ruby_unit(log: &str) -> StatusMap {
    static UNIT: OnceLock<Regex> = OnceLock::new();
    let re = pattern(&UNIT, r"^\s*(?:test: )?(.+):\s+(\.|E\b|F\b|O\b)");
    per_line(log, re, (1, 2), |word| match word {
        "." => Some("PASSED"),
        "E" | "F" => Some("FAILED"),
        "O" => Some("SKIPPED"),
        _ => None,
    })
}

pub(super) fn rspec_transformed_json(log: &str) -> StatusMap {
    static RSPEC: OnceLock<Regex> = OnceLock::new();
    let re = pattern(&RSPEC, r"^(.+) - (passed|failed)");
    per_line(log, re, (1, 2), |word| match word {
        "passed" => Some("PASSED"),
        "failed" => Some("FAILED"),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::Parser;
    use super::super::log::tests::table;

    #[test]
    fn phpunit_testdox() {
        let log = " ✔ Before any suite\nCarbon\\Tests\\AddTest (Tests\\AddTest)\n ✔ Add days\n ✘ Add months\n   │ Failed asserting\n ↩ Add years\n";
        table(
            Parser::Phpunit,
            &[(
                log,
                &[
                    ("None > Before any suite", "PASSED"),
                    ("Carbon\\Tests\\AddTest > Add days", "PASSED"),
                    ("Carbon\\Tests\\AddTest > Add months", "FAILED"),
                    ("Carbon\\Tests\\AddTest > Add years", "SKIPPED"),
                ],
            )],
        );
    }

    #[test]
    fn ruby_runners() {
        table(
            Parser::Minitest,
            &[(
                "TestFilters#test_where. = 0.01 s = .\nTestSite#test_x. = 0.20 s = F\nno dot here\n",
                &[
                    ("TestFilters#test_where", "PASSED"),
                    ("TestSite#test_x", "FAILED"),
                ],
            )],
        );
        table(
            Parser::Cucumber,
            &[(
                "Scenario: builds ........\nScenario: fails ...F--\n",
                &[
                    ("Scenario: builds", "PASSED"),
                    ("Scenario: fails", "FAILED"),
                ],
            )],
        );
        table(
            Parser::RubyUnit,
            &[(
                "test: emits records: .: (0.01)\n  test_parse: F\nTestX#test_o: O\nnot: Error\n",
                &[
                    ("emits records", "PASSED"),
                    ("test_parse", "FAILED"),
                    ("TestX#test_o", "SKIPPED"),
                ],
            )],
        );
        table(
            Parser::RspecTransformedJson,
            &[(
                "Fastlane::Action runs - passed\nRuboCop cop flags x - failed\nother - pending\n",
                &[
                    ("Fastlane::Action runs", "PASSED"),
                    ("RuboCop cop flags x", "FAILED"),
                ],
            )],
        );
    }
}
