//! The log parsers of SWE-bench's Python repos
//! (`harness/log_parsers/python.py`), quirks included: a status is the
//! first word of a line, the last line about a test wins.

use std::sync::OnceLock;

use regex::Regex;

use super::lines::{STATUSES, StatusMap, py_space, words};

fn starts_with_status(line: &str) -> bool {
    STATUSES.iter().any(|s| line.starts_with(s))
}

/// 5.0's `_is_skip_summary`: pytest's `SKIPPED [N] path:line: reason`
/// line, whose `[N]` is no test.
fn skip_summary(status: &str, name: &str) -> bool {
    status == "SKIPPED"
        && name.len() > 2
        && name.starts_with('[')
        && name.ends_with(']')
        && name[1..name.len() - 1].chars().all(|c| c.is_ascii_digit())
}

/// `parse_log_pytest` and the parsers built on it: a line that starts with
/// a status word gives `map[word 2] = word 1` (a FAILED line first loses
/// its ` - `, joining the message to the name's word list). `v5`: 5.0.2's
/// version, which leaves out `SKIPPED [N]` summary lines.
pub(super) fn pytest(
    log: &str,
    v5: bool,
    rewrite: impl Fn(&str) -> String,
    name: impl Fn(&str) -> String,
) -> StatusMap {
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
        if parts.len() <= 1 || (v5 && skip_summary(parts[0], parts[1])) {
            continue;
        }
        map.insert(name(parts[1]), parts[0].to_owned());
    }
    map
}

/// `parse_log_pytest_options`' `(.*?)\[(.*)\]`: a parameter that is a
/// path (one leading `/`, no `*`) is cut to its last component; anything
/// after the last `]` is dropped.
pub(super) fn cut_option(name: &str) -> String {
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

/// `parse_log_pytest_v2`. `v5`: 5.0.2's version: a FAILED line is cut at
/// its first ` - ` (the message never enters the id), a name is every
/// word but the status (a parametrized id with spaces stays whole), and
/// `SKIPPED [N]` summary lines are left out.
pub(super) fn pytest_v2(log: &str, v5: bool) -> StatusMap {
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
            let line = match (line.starts_with("FAILED"), v5) {
                (true, false) => line.replace(" - ", " "),
                (true, true) => line.split(" - ").next().unwrap_or_default().to_owned(),
                (false, _) => line,
            };
            let parts = words(&line);
            if parts.len() < 2 {
                continue;
            }
            if !v5 {
                map.insert(parts[1].to_owned(), parts[0].to_owned());
            } else if !skip_summary(parts[0], parts[1]) {
                map.insert(parts[1..].join(" "), parts[0].to_owned());
            }
        } else if STATUSES.iter().any(|s| line.ends_with(s)) {
            let parts = words(&line);
            if parts.len() < 2 {
                continue;
            }
            if v5 {
                let last = parts.len() - 1;
                map.insert(parts[..last].join(" "), parts[last].to_owned());
            } else {
                map.insert(parts[0].to_owned(), parts[1].to_owned());
            }
        }
    }
    map
}

pub(super) fn django(log: &str) -> StatusMap {
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

pub(super) fn seaborn(log: &str) -> StatusMap {
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

pub(super) fn sympy(log: &str) -> StatusMap {
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

#[cfg(test)]
mod tests {
    use super::super::Parser;
    use super::super::log::tests::map;
    use super::*;

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
}
