//! No stage names a benchmark (issue 36): outside `src/task/` (where each
//! benchmark is a file behind the seam, `task/benchmark.rs`) and
//! `src/grade/` (the parsers and rules a benchmark's grading uses), no
//! non-test `.rs` file of `src/` holds a benchmark's name. Stages ask the
//! task's benchmark instead; a new benchmark is a file of `task/` and a
//! line of `task/registry.rs`.
//!
//! The code is read with its comments and doc comments stripped (they may
//! say which benchmark a mechanism serves) and its `#[cfg(test)]` items
//! skipped; string literals count, since a message naming a benchmark is
//! the benchmark's to give. `src/cli.rs` is exempt: its help text and
//! flag values (`--grading swebench-4.1`, `--format swebench`) are the
//! user's words.

use std::path::{Path, PathBuf};

/// The names looked for, lower case; a line matches when its lower-cased
/// text holds one.
const NAMES: &[&str] = &[
    "harbor",
    "swebench",
    "swe-bench",
    "swe_bench",
    "multi-swe",
    "swe-smith",
    "swesmith",
    "swe_smith",
    "swe-gym",
    "swegym",
    "swe_gym",
    "rebench",
    "polybench",
    "terminal-bench",
    "terminal_bench",
    "terminalbench",
];

/// Folders and files of `src/` where benchmark names belong.
const EXEMPT: &[&str] = &["task/", "grade/", "cli.rs"];

/// Every `.rs` file under `dir`, sorted; test-only files (under a `tests`
/// folder, or a `tests.rs`) left out.
fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if name != "tests" && name != "snapshots" {
                sources(&path, found);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            found.push(path);
        }
    }
    found.sort();
}

/// `code` with comments blanked (newlines kept, so lines keep their
/// numbers), and a mask of which bytes are in string or char literals.
fn strip_comments(code: &str) -> (Vec<u8>, Vec<bool>) {
    let bytes = code.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut literal = Vec::with_capacity(bytes.len());
    let blank = |b: u8| if b == b'\n' { b'\n' } else { b' ' };
    let mut i = 0;
    while i < bytes.len() {
        let rest = &bytes[i..];
        if rest.starts_with(b"//") {
            while i < bytes.len() && bytes[i] != b'\n' {
                out.push(b' ');
                literal.push(false);
                i += 1;
            }
        } else if rest.starts_with(b"/*") {
            let mut depth = 0;
            while i < bytes.len() {
                if bytes[i..].starts_with(b"/*") {
                    depth += 1;
                    out.extend([b' ', b' ']);
                    literal.extend([false, false]);
                    i += 2;
                } else if bytes[i..].starts_with(b"*/") {
                    depth -= 1;
                    out.extend([b' ', b' ']);
                    literal.extend([false, false]);
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(bytes[i]));
                    literal.push(false);
                    i += 1;
                }
            }
        } else if let Some(len) = literal_len(bytes, i) {
            out.extend_from_slice(&bytes[i..i + len]);
            literal.extend(std::iter::repeat_n(true, len));
            i += len;
        } else {
            out.push(bytes[i]);
            literal.push(false);
            i += 1;
        }
    }
    (out, literal)
}

/// The length of the string or char literal starting at `i`, if one does
/// (`"..."`, `b"..."`, `r#"..."#`, `'x'`, `'\n'`; not a lifetime).
fn literal_len(bytes: &[u8], i: usize) -> Option<usize> {
    let ident_before = i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
    let mut j = i;
    if !ident_before
        && matches!(bytes[j], b'b' | b'c')
        && matches!(bytes.get(j + 1), Some(b'r' | b'"'))
    {
        j += 1;
    }
    if !ident_before && bytes[j] == b'r' && matches!(bytes.get(j + 1), Some(b'"' | b'#')) {
        let hashes = bytes[j + 1..].iter().take_while(|b| **b == b'#').count();
        if bytes.get(j + 1 + hashes) != Some(&b'"') {
            return None;
        }
        let close: Vec<u8> = std::iter::once(b'"')
            .chain(std::iter::repeat_n(b'#', hashes))
            .collect();
        let body = j + 2 + hashes;
        let end = bytes[body..]
            .windows(close.len())
            .position(|w| w == close.as_slice())?;
        return Some(body + end + close.len() - i);
    }
    match bytes[j] {
        b'"' => {
            let mut k = j + 1;
            while k < bytes.len() {
                match bytes[k] {
                    b'\\' => k += 2,
                    b'"' => return Some(k + 1 - i),
                    _ => k += 1,
                }
            }
            None
        }
        b'\'' if j == i => {
            // A char literal closes within a few bytes; a lifetime does not.
            let k = if bytes.get(i + 1) == Some(&b'\\') {
                i + 2 + bytes[i + 2..].iter().position(|b| *b == b'\'')?
            } else {
                // The file is UTF-8 and `'` is one byte: a char follows.
                let rest = std::str::from_utf8(&bytes[i + 1..]).ok()?;
                let k = i + 1 + rest.chars().next()?.len_utf8();
                if bytes.get(k) != Some(&b'\'') {
                    return None;
                }
                k
            };
            Some(k + 1 - i)
        }
        _ => None,
    }
}

/// `code` (comments stripped) with each `#[cfg(test)]` item blanked: from
/// the attribute to the end of the item's first `{...}` block, or to its
/// `;` when it has none.
fn skip_test_items(code: &mut [u8], literal: &[bool]) {
    const ATTRIBUTE: &[u8] = b"#[cfg(test)]";
    let mut i = 0;
    while i + ATTRIBUTE.len() <= code.len() {
        if literal[i] || !code[i..].starts_with(ATTRIBUTE) {
            i += 1;
            continue;
        }
        let mut depth = 0usize;
        let mut j = i;
        while j < code.len() {
            let b = code[j];
            if !literal[j] {
                if b == b'{' {
                    depth += 1;
                } else if b == b'}' {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        j += 1;
                        break;
                    }
                } else if b == b';' && depth == 0 {
                    j += 1;
                    break;
                }
            }
            j += 1;
        }
        let end = j.min(code.len());
        for b in &mut code[i..end] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
        i = j;
    }
}

/// Each line of `code` outside comments and test items that names a
/// benchmark: its number and text.
fn offending_lines(code: &str) -> Vec<(usize, String)> {
    let (mut stripped, literal) = strip_comments(code);
    skip_test_items(&mut stripped, &literal);
    let text = String::from_utf8_lossy(&stripped).into_owned();
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            let lower = line.to_lowercase();
            NAMES.iter().any(|name| lower.contains(name))
        })
        .map(|(at, line)| (at + 1, line.trim().to_owned()))
        .collect()
}

#[test]
fn no_stage_names_a_benchmark() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    let mut found = Vec::new();
    for path in files {
        let relative = path
            .strip_prefix(&root)
            .expect("under src")
            .to_string_lossy()
            .into_owned();
        if EXEMPT.iter().any(|exempt| relative.starts_with(exempt)) {
            continue;
        }
        let code = std::fs::read_to_string(&path).expect("read a source file");
        for (line, text) in offending_lines(&code) {
            found.push(format!("src/{relative}:{line}: {text}"));
        }
    }
    assert!(
        found.is_empty(),
        "a stage names a benchmark; ask the task's benchmark (src/task/benchmark.rs) instead, or move the code to its file in src/task/:\n{}",
        found.join("\n")
    );
}

/// The reading itself: comments and doc comments do not count, string
/// literals do, test items are skipped, and lines keep their numbers.
#[test]
fn comments_and_test_items_are_skipped_but_strings_count() {
    let code = r##"//! Harbor's module doc.
/// A swebench doc comment.
fn a() -> &'static str {
    let _c = '"'; // harbor in a comment
    /* swe-bench in a block /* nested */ comment */
    "a Harbor task"
}
#[cfg(test)]
mod tests {
    fn b() -> &'static str { "swebench" }
}
#[cfg(test)]
use crate::task::swebench::X;
fn c() -> &'static str { r#"SWE-Gym"# }
"##;
    assert_eq!(
        offending_lines(code),
        vec![
            (6, "\"a Harbor task\"".to_owned()),
            (14, "fn c() -> &'static str { r#\"SWE-Gym\"# }".to_owned()),
        ]
    );
}
