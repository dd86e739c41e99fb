//! What every log parser reads a log with: the status map, Python's
//! whitespace, `strip` and `split`, and patterns compiled once.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use regex::Regex;

/// Test name -> status word, as the package's parsers return it. A word
/// is usually one of [`STATUSES`] but need not be (`ERROR:` in a line
/// starting `ERROR: ...`), so it stays a string.
pub type StatusMap = BTreeMap<String, String>;

/// The package's `TestStatus` values, in its order.
pub const STATUSES: [&str; 5] = ["FAILED", "PASSED", "SKIPPED", "ERROR", "XFAIL"];

/// Whitespace as Python's `str.isspace` has it: Rust's, and the
/// separators U+001C..U+001F.
pub(super) fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.split()`: the words between runs of whitespace.
pub(super) fn words(line: &str) -> Vec<&str> {
    line.split(py_space).filter(|w| !w.is_empty()).collect()
}

/// Python's `str.strip()`.
pub(super) fn strip(line: &str) -> &str {
    line.trim_matches(py_space)
}

/// A parser's pattern, compiled once, with Python's `\s` and `\S`
/// ([`python_classes`]). The patterns are constants, and each parser's
/// unit tests compile its own, so a pattern that does not compile never
/// ships.
pub(super) fn pattern(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| compile(pattern))
}

/// Compiles a constant pattern (see [`pattern`]).
pub(super) fn compile(pattern: &str) -> Regex {
    Regex::new(&python_classes(pattern))
        .unwrap_or_else(|err| panic!("the pattern {pattern:?}: {err}"))
}

/// `pattern` with `\s` and `\S` as Python's: whitespace is what
/// `str.isspace` says, which adds U+001C..U+001F to Rust's. Inside a
/// class `\s` gains the range; `\S` is only rewritten outside one (write
/// `[\s--[..]]` for Python's `[^\S..]`).
pub(super) fn python_classes(pattern: &str) -> String {
    const EXTRA: &str = r"\x1C-\x1F";
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut depth = 0usize;
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match (chars.next(), depth) {
                (Some('s'), 0) => out.push_str(&format!(r"[\s{EXTRA}]")),
                (Some('s'), _) => out.push_str(&format!(r"\s{EXTRA}")),
                (Some('S'), 0) => out.push_str(&format!(r"[^\s{EXTRA}]")),
                (Some(next), _) => {
                    out.push('\\');
                    out.push(next);
                }
                (None, _) => out.push('\\'),
            },
            '[' => {
                out.push('[');
                if depth == 0 {
                    // A leading `^` or `]` belongs to the class.
                    if chars.peek() == Some(&'^') {
                        out.push('^');
                        chars.next();
                    }
                    if chars.peek() == Some(&']') {
                        out.push(']');
                        chars.next();
                    }
                }
                depth += 1;
            }
            ']' if depth > 0 => {
                out.push(']');
                depth -= 1;
            }
            _ => out.push(c),
        }
    }
    out
}

/// Most of the package's parsers: `re` on each stripped line gives a
/// test's name (group `name`) and a word (group `status`) that
/// `status_of` turns into its status (None: not recorded); the last line
/// about a test wins.
pub(super) fn per_line(
    log: &str,
    re: &Regex,
    (name, status): (usize, usize),
    status_of: impl Fn(&str) -> Option<&'static str>,
) -> StatusMap {
    let mut map = StatusMap::new();
    for line in log.split('\n') {
        let Some(found) = re.captures(strip(line)) else {
            continue;
        };
        let group = |i: usize| found.get(i).map_or("", |m| m.as_str());
        if let Some(word) = status_of(group(status)) {
            set(&mut map, group(name), word);
        }
    }
    map
}

/// Sets `map[name] = status`, as the parsers' `test_status_map[..] = ..`.
pub(super) fn set(map: &mut StatusMap, name: &str, status: &str) {
    map.insert(name.to_owned(), status.to_owned());
}
