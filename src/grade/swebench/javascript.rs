//! The log parsers of SWE-bench's JavaScript/TypeScript repos
//! (`harness/log_parsers/javascript.py`): jest, vitest, karma, TAP, and
//! the per-repo ones of wp-calypso, Chart.js, marked, p5.js and
//! react-pdf.

use std::sync::OnceLock;

use regex::Regex;

use super::lines::{StatusMap, compile, pattern, per_line, py_space, set, strip};

/// The package's `ansi_escape`: escape sequences out.
fn ansi_escape(text: &str) -> String {
    static ANSI: OnceLock<Regex> = OnceLock::new();
    pattern(&ANSI, r"\x1B(?:[@-Z\\-_]|\[[0-?]*[ -/]*[@-~])")
        .replace_all(text, "")
        .into_owned()
}

/// The width of a line's leading whitespace (`len(l) - len(l.lstrip())`,
/// in characters as Python counts them).
fn indent(line: &str) -> usize {
    line.chars().take_while(|c| py_space(*c)).count()
}

/// `parse_log_jest`. `v5`: 5.0.2's, which strips the name (a name
/// before a duration keeps no trailing space).
pub(super) fn jest(log: &str, v5: bool) -> StatusMap {
    static JEST: OnceLock<Regex> = OnceLock::new();
    let re = pattern(&JEST, r"^\s*(✓|✕|○)\s(.+?)(?:\s\((\d+\s*m?s)\))?$");
    let status = |symbol: &str| match symbol {
        "✓" => Some("PASSED"),
        "✕" => Some("FAILED"),
        "○" => Some("SKIPPED"),
        _ => None,
    };
    if !v5 {
        return per_line(log, re, (2, 1), status);
    }
    let mut map = StatusMap::new();
    for line in log.split('\n') {
        let Some(found) = re.captures(strip(line)) else {
            continue;
        };
        let group = |i: usize| found.get(i).map_or("", |m| m.as_str());
        if let Some(word) = status(group(1)) {
            set(&mut map, strip(group(2)), word);
        }
    }
    map
}

pub(super) fn jest_json(log: &str) -> StatusMap {
    static JSON: OnceLock<Regex> = OnceLock::new();
    let re = pattern(&JSON, r"^\[(PASSED|FAILED)\]\s(.+)$");
    per_line(log, re, (2, 1), |word| match word {
        "PASSED" => Some("PASSED"),
        "FAILED" => Some("FAILED"),
        _ => None,
    })
}

pub(super) fn vitest(log: &str) -> StatusMap {
    static VITEST: OnceLock<Regex> = OnceLock::new();
    let re = pattern(
        &VITEST,
        r"^\s*(✓|×|↓)\s(.+?)(?:\s(\d+\s*m?s?|\[skipped\]))?$",
    );
    per_line(log, re, (2, 1), |symbol| match symbol {
        "✓" => Some("PASSED"),
        "×" => Some("FAILED"),
        "↓" => Some("SKIPPED"),
        _ => None,
    })
}

pub(super) fn tap(log: &str) -> StatusMap {
    static TAP: OnceLock<Regex> = OnceLock::new();
    let re = pattern(&TAP, r"^(ok|not ok) (\d+) (.+)$");
    per_line(log, re, (3, 1), |word| match word {
        "ok" => Some("PASSED"),
        "not ok" => Some("FAILED"),
        _ => None,
    })
}

/// Karma's tree: after `Starting browser`, an indented line without a mark
/// opens a suite when deeper than the last and closes one when shallower;
/// a ✔/✖ line is a test under the open suites; `SUMMARY:` ends it.
pub(super) fn karma(log: &str) -> StatusMap {
    static KARMA: OnceLock<Regex> = OnceLock::new();
    let re = pattern(&KARMA, r"^(\s*)?([✔✖])?\s(.*)$");
    let mut map = StatusMap::new();
    let mut current_indent: isize = -1;
    let mut suite: Vec<String> = Vec::new();
    let mut started = false;
    for line in log.split('\n') {
        if line.starts_with("SUMMARY:") {
            return map;
        }
        if line.contains("Starting browser") {
            started = true;
            continue;
        }
        if !started {
            continue;
        }
        let Some(found) = re.captures(line) else {
            continue;
        };
        let indent = found.get(1).map_or("", |m| m.as_str());
        let status = found.get(2).map(|m| m.as_str());
        let name = found.get(3).map_or("", |m| m.as_str());
        if !indent.is_empty() && status.is_none() {
            let width = isize::try_from(indent.chars().count()).unwrap_or(isize::MAX);
            if width > current_indent {
                current_indent = width;
                suite.push(name.to_owned());
            } else if width < current_indent {
                current_indent = width;
                // The package's pop raises on an empty list; nothing to
                // close here.
                suite.pop();
                continue;
            }
        }
        if let Some(mark) = status {
            let mut full = suite.clone();
            full.push(name.to_owned());
            let word = if mark == "✔" { "PASSED" } else { "FAILED" };
            set(&mut map, &full.join(" > "), word);
        }
    }
    map
}

/// wp-calypso: jest's verbose tree after each `./node_modules/.bin/jest`,
/// suites by indentation, a test named by its suites and itself joined
/// with ` - `.
pub(super) fn calypso(log: &str) -> StatusMap {
    static MS: OnceLock<Regex> = OnceLock::new();
    static PASS_MS: OnceLock<Regex> = OnceLock::new();
    static PASS: OnceLock<Regex> = OnceLock::new();
    static FAIL_MS: OnceLock<Regex> = OnceLock::new();
    static FAIL: OnceLock<Regex> = OnceLock::new();
    let ms = pattern(&MS, r"\(\d+ms\)");
    let mut map = StatusMap::new();
    let mut suite: Vec<(String, usize)> = Vec::new();
    for chunk in log.split(" ./node_modules/.bin/jest ").skip(1) {
        for line in chunk.split('\n') {
            if line.starts_with("Test Suites") || line.starts_with("  ● ") {
                break;
            }
            let stripped = strip(line);
            let mark = if stripped.starts_with('✓') {
                Some((
                    "PASSED",
                    &PASS_MS,
                    &PASS,
                    r"^\s+✓\s(.*)\(\d+ms\)$",
                    r"^\s+✓\s(.*)",
                ))
            } else if stripped.starts_with('✕') {
                Some((
                    "FAILED",
                    &FAIL_MS,
                    &FAIL,
                    r"^\s+✕\s(.*)\(\d+ms\)$",
                    r"^\s+✕\s(.*)",
                ))
            } else {
                None
            };
            if let Some((word, timed_cell, cell, timed, plain)) = mark {
                let re = if ms.is_match(line) {
                    pattern(timed_cell, timed)
                } else {
                    pattern(cell, plain)
                };
                // Where the pattern does not match, the package raises
                // (it reads the group of no match); no test here.
                if let Some(test) = re.captures(line).and_then(|c| c.get(1)) {
                    let suites: Vec<&str> = suite.iter().map(|(s, _)| s.as_str()).collect();
                    let name = format!("{} - {}", suites.join(" - "), test.as_str());
                    set(&mut map, strip(&name), word);
                }
            } else if indent(line) > 0 {
                let width = indent(line);
                while suite.last().is_some_and(|(_, w)| *w >= width) {
                    suite.pop();
                }
                suite.push((stripped.to_owned(), width));
            }
        }
    }
    map
}

/// Chart.js: karma's `Chrome N (OS) name FAILED` lines; passes are not
/// listed (a fail-only repo).
pub(super) fn chart_js(log: &str) -> StatusMap {
    static CHROME: OnceLock<Regex> = OnceLock::new();
    let re = pattern(
        &CHROME,
        r"(?m)Chrome\s[\d\.]+[\s--[\r\n]]\(.+?\)[\s--[\r\n]](.*)FAILED$",
    );
    let log = ansi_escape(log);
    let mut map = StatusMap::new();
    for found in re.captures_iter(&log) {
        set(&mut map, found.get(1).map_or("", |m| m.as_str()), "FAILED");
    }
    map
}

/// marked: mocha's `N) name` failure lines.
pub(super) fn marked(log: &str) -> StatusMap {
    static NUMBERED: OnceLock<Regex> = OnceLock::new();
    let re = pattern(&NUMBERED, r"^\d+\)\s(.*)");
    let mut map = StatusMap::new();
    for line in log.split('\n') {
        if let Some(test) = re.captures(line).and_then(|c| c.get(1)) {
            set(&mut map, strip(test.as_str()), "FAILED");
        }
    }
    map
}

pub(super) fn react_pdf(log: &str) -> StatusMap {
    static PATTERNS: OnceLock<Vec<(Regex, &'static str)>> = OnceLock::new();
    let patterns = PATTERNS.get_or_init(|| {
        let mut list = Vec::new();
        for (word, status) in [("PASS", "PASSED"), ("FAIL", "FAILED")] {
            for tail in [
                r"\s\([\d\.]+ms\)",
                r"\s\([\d\.]+\ss\)",
                r"\s\([\d\.]+s\)",
                "",
            ] {
                let text = format!(r"^{word}\s(.*){tail}");
                list.push((compile(&text), status));
            }
        }
        list
    });
    let mut map = StatusMap::new();
    for line in log.split('\n') {
        for (re, status) in patterns {
            if let Some(found) = re.captures(line) {
                set(&mut map, found.get(1).map_or("", |m| m.as_str()), status);
                break;
            }
        }
    }
    map
}

/// p5.js: mocha's numbered failures (`N) suite\n   test:` with each line
/// deeper than the last), once JSON and XML blocks are cut out of the log.
pub(super) fn p5js(log: &str) -> StatusMap {
    static FAIL: OnceLock<Regex> = OnceLock::new();
    let re = pattern(&FAIL, r"(?ms)^\s*(\d+)\)(.{0,1000}?):");
    let log = remove_xml_blocks(&remove_json_blocks(&ansi_escape(log)));
    let mut map = StatusMap::new();
    for found in re.captures_iter(&log) {
        let body = found.get(2).map_or("", |m| m.as_str());
        let mut last = 0;
        let valid = body.split('\n').all(|line| {
            let width = indent(line);
            let deeper = width > last;
            last = width;
            deeper
        });
        if valid {
            let names: Vec<&str> = body.split('\n').map(strip).collect();
            set(&mut map, &names.join(":"), "FAILED");
        }
    }
    map
}

/// Lines of JSON objects and lists out: from a line ending `{` (or `[`)
/// to a line that is `}` (or `]`), and one-line ones.
fn remove_json_blocks(log: &str) -> String {
    let (mut in_object, mut in_list) = (false, false);
    let mut kept = Vec::new();
    for line in log.split('\n') {
        let stripped = line.trim_end_matches(py_space);
        if stripped.ends_with('{') {
            in_object = true;
            continue;
        }
        if stripped.ends_with('[') {
            in_list = true;
            continue;
        }
        if stripped == "}" && in_object {
            in_object = false;
            continue;
        }
        if stripped == "]" && in_list {
            in_list = false;
            continue;
        }
        if in_object || in_list {
            continue;
        }
        let wrapped =
            |open: char, close: char| stripped.starts_with(open) && stripped.ends_with(close);
        if wrapped('{', '}') || wrapped('[', ']') {
            continue;
        }
        kept.push(line);
    }
    kept.join("\n")
}

/// `<(\w+)>[\s\S]*?<\/\1>` cut out again and again from the start, each
/// time leaving as many `<tag>` as the cut held more than one.
fn remove_xml_blocks(log: &str) -> String {
    let mut log = log.to_owned();
    while let Some((start, end, tag)) = first_xml_block(&log) {
        let opened = format!("<{tag}>");
        let extra = log[start..end].matches(&opened).count().saturating_sub(1);
        log = format!("{}{}{}", &log[..start], opened.repeat(extra), &log[end..]);
    }
    log
}

/// The leftmost `<tag>...</tag>` with the nearest closing tag: the
/// package's pattern, whose back reference Rust's regex lacks.
fn first_xml_block(log: &str) -> Option<(usize, usize, String)> {
    for (start, _) in log.match_indices('<') {
        let rest = &log[start + 1..];
        let word_len: usize = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .map(char::len_utf8)
            .sum();
        if word_len == 0 || !rest[word_len..].starts_with('>') {
            continue;
        }
        let tag = &rest[..word_len];
        let body = start + 1 + word_len + 1;
        if let Some(at) = log[body..].find(&format!("</{tag}>")) {
            return Some((start, body + at + tag.len() + 3, tag.to_owned()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::Parser;
    use super::super::log::tests::table;

    #[test]
    fn jest_vitest_tap_lines() {
        table(
            Parser::Jest,
            &[(
                "  ✓ adds (3 ms)\n  ✕ subtracts (12ms)\n  ○ skipped one\n  ✓ adds\n✓no space\n",
                &[
                    ("adds", "PASSED"),
                    ("subtracts", "FAILED"),
                    ("skipped one", "SKIPPED"),
                ],
            )],
        );
        table(
            Parser::JestJson,
            &[(
                "[PASSED] Map > get\n [FAILED] Map > set \n[SKIPPED] x\n",
                &[("Map > get", "PASSED"), ("Map > set", "FAILED")],
            )],
        );
        table(
            Parser::Vitest,
            &[(
                " ✓ packages/a.spec.ts > ref > works 2ms\n × b > fails\n ↓ c > later [skipped]\n",
                &[
                    ("packages/a.spec.ts > ref > works", "PASSED"),
                    ("b > fails", "FAILED"),
                    ("c > later", "SKIPPED"),
                ],
            )],
        );
        table(
            Parser::Tap,
            &[(
                "ok 1 GET /a\nnot ok 2 POST /b # time=3ms\n  ok 3 nested\nok x bad\n",
                &[
                    ("GET /a", "PASSED"),
                    ("POST /b # time=3ms", "FAILED"),
                    ("nested", "PASSED"),
                ],
            )],
        );
    }

    #[test]
    fn karma_tree() {
        // `hooks` is as deep as `render`: the package neither opens nor
        // closes a suite there, so its `draws` is `render > draws` again
        // (its own word: "logic is brittle").
        let log = "ignored ✔ before\nINFO [launcher]: Starting browser ChromeHeadless\n  render\n    ✔ draws\n    ✖ sizes\n  hooks\n    ✔ draws\n SUMMARY:\n";
        table(
            Parser::Karma,
            &[(
                log,
                &[("render > draws", "PASSED"), ("render > sizes", "FAILED")],
            )],
        );
    }

    #[test]
    fn calypso_tree() {
        let log = "+ ./node_modules/.bin/jest --verbose x\n  state\n    reducer\n      ✓ keeps (5ms)\n      ✕ drops\n  ● state › drops\n";
        table(
            Parser::Calypso,
            &[(
                log,
                &[
                    ("state - reducer - keeps", "PASSED"),
                    ("state - reducer - drops", "FAILED"),
                ],
            )],
        );
    }

    #[test]
    fn fail_only_parsers() {
        table(
            Parser::ChartJs,
            &[(
                "\u{1b}[31mChrome 120.0 (Linux x86_64) Chart.helpers should merge FAILED\nChrome 120.0 (Linux x86_64) ok one SUCCESS\n",
                &[("Chart.helpers should merge ", "FAILED")],
            )],
        );
        table(
            Parser::Marked,
            &[(
                "  1) x\n1) Marked  should parse  \n",
                &[("Marked  should parse", "FAILED")],
            )],
        );
        table(
            Parser::P5js,
            &[(
                "  1) Color\n       p5.Color:\n     Error: x\n{\n \"a\": 1\n}\n  2) flat:\n<div>\n<div>a</div>\n",
                &[("Color:p5.Color", "FAILED"), ("flat", "FAILED")],
            )],
        );
        table(
            Parser::ReactPdf,
            &[(
                "PASS tests/a.test.js (1.2 s)\nFAIL tests/b.test.js (35ms)\nPASS  tests/c.test.js\n",
                &[
                    ("tests/a.test.js", "PASSED"),
                    ("tests/b.test.js", "FAILED"),
                    (" tests/c.test.js", "PASSED"),
                ],
            )],
        );
    }

    #[test]
    fn xml_blocks_leave_their_unclosed_openers() {
        assert_eq!(super::remove_xml_blocks("a<b><b>x</b>c"), "a<b>c");
        assert_eq!(super::remove_xml_blocks("<p>one</p> <q>"), " <q>");
    }
}
