//! The log parsers of SWE-bench's Java repos
//! (`harness/log_parsers/java.py`): maven (one `-Dtest=` run per test,
//! read from the `set -x` trace and the build's verdict), ant's JUnit
//! task, and gradle with the test logging the image's build configured.

use std::sync::OnceLock;

use regex::Regex;

use super::lines::{StatusMap, pattern, per_line, set, strip};

/// Maven prints no passing test: each test runs alone, its name is the
/// `-Dtest=` of the traced command, its status the next `BUILD` line.
pub(super) fn maven(log: &str) -> StatusMap {
    static NAME: OnceLock<Regex> = OnceLock::new();
    static RESULT: OnceLock<Regex> = OnceLock::new();
    let name = pattern(&NAME, r"^.*-Dtest=(\S+).*$");
    let result = pattern(&RESULT, r"^.*BUILD (SUCCESS|FAILURE)$");
    let mut map = StatusMap::new();
    let mut current = "---NO TEST NAME FOUND YET---".to_owned();
    for line in log.split('\n') {
        let line = strip(line);
        if let Some(test) = name.captures(line).and_then(|c| c.get(1)) {
            current = test.as_str().to_owned();
        }
        if let Some(status) = result.captures(line).and_then(|c| c.get(1)) {
            let word = if status.as_str() == "SUCCESS" {
                "PASSED"
            } else {
                "FAILED"
            };
            set(&mut map, &current, word);
        }
    }
    map
}

pub(super) fn ant(log: &str) -> StatusMap {
    static ANT: OnceLock<Regex> = OnceLock::new();
    let re = pattern(&ANT, r"^\s*\[junit\]\s+\[(PASS|FAIL|ERR)\]\s+(.*)$");
    per_line(log, re, (2, 1), |word| match word {
        "PASS" => Some("PASSED"),
        _ => Some("FAILED"),
    })
}

pub(super) fn gradle_custom(log: &str) -> StatusMap {
    static GRADLE: OnceLock<Regex> = OnceLock::new();
    let re = pattern(&GRADLE, r"^([^>].+)\s+(PASSED|FAILED)$");
    per_line(log, re, (1, 2), |word| match word {
        "PASSED" => Some("PASSED"),
        _ => Some("FAILED"),
    })
}

#[cfg(test)]
mod tests {
    use super::super::Parser;
    use super::super::log::tests::table;

    #[test]
    fn maven_names_each_run_by_its_test() {
        let log = "[INFO] BUILD SUCCESS\n+ mvnd test -B -T 1C -pl gson -Dtest=a.BTest#one\n[INFO] BUILD SUCCESS\n\
                   + mvnd test -B -pl gson -Dtest=a.BTest#two -DfailIfNoTests=false\n[ERROR] Tests run: 1, Failures: 1\n[INFO] BUILD FAILURE\n";
        table(
            Parser::Maven,
            &[(
                log,
                &[
                    ("---NO TEST NAME FOUND YET---", "PASSED"),
                    ("a.BTest#one", "PASSED"),
                    ("a.BTest#two", "FAILED"),
                ],
            )],
        );
    }

    #[test]
    fn ant_and_gradle_lines() {
        table(
            Parser::Ant,
            &[(
                "    [junit] [PASS] testA(lombok.X)\n[junit] [FAIL] testB(lombok.X)\n [junit] [ERR] testC\n[junit] [SKIP] d\n",
                &[
                    ("testA(lombok.X)", "PASSED"),
                    ("testB(lombok.X)", "FAILED"),
                    ("testC", "FAILED"),
                ],
            )],
        );
        table(
            Parser::GradleCustom,
            &[(
                "TestX > testOne PASSED\n  org.a.TestY > two   FAILED\n> Task :test FAILED\nx SKIPPED\n",
                &[
                    ("TestX > testOne", "PASSED"),
                    // `.+` is greedy: the name keeps all but one space.
                    ("org.a.TestY > two  ", "FAILED"),
                ],
            )],
        );
    }
}
