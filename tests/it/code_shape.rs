//! The shape of `src/` that issue 36 set, read from the sources: no
//! function outside tests over 100 lines, at most 15 `Result<_, String>`
//! and at most 40 catch-all `Variant(String)` payloads (a variant of an
//! error enum, one deriving `Error`, whose only payload is a `String`: an
//! error carried as text) in non-test code. Each test names
//! every offender, so a new one fails here with its file and line rather
//! than in a later review.
//!
//! Test code is left out: files under a `tests/` folder of `src/`, items
//! marked `#[cfg(test)]` (a `mod tests { ... }`, a test-only function) and
//! the files such a `#[cfg(test)] mod name;` declares. The sources are
//! read through [`mask`], which blanks comments, strings, raw strings and
//! character literals (keeping their lines), so a brace or a `fn` in a
//! string or a comment counts for nothing.

use std::path::{Path, PathBuf};

/// The longest a function outside tests may be, in lines from its `fn` to
/// its closing brace.
const MAX_FUNCTION_LINES: usize = 100;
/// The most `Result<_, String>` non-test code may hold.
const MAX_RESULT_STRING: usize = 15;
/// The most enum variants whose only payload is a `String`.
const MAX_STRING_PAYLOADS: usize = 40;

/// `code` with every comment, string, raw string and character literal
/// replaced by spaces, newlines kept: what is left is tokens and
/// punctuation, at the same byte offsets and on the same lines.
fn mask(code: &str) -> String {
    let bytes = code.as_bytes();
    let mut out = bytes.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for b in &mut out[from..to] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    };
    let mut i = 0;
    while i < bytes.len() {
        let rest = &bytes[i..];
        let ident_before = i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        if rest.starts_with(b"//") {
            let end = rest
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |n| i + n);
            blank(&mut out, i, end);
            i = end;
        } else if rest.starts_with(b"/*") {
            // Block comments nest in Rust.
            let (mut depth, mut j) = (0usize, i);
            while j < bytes.len() {
                if bytes[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if bytes[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if !ident_before && let Some(end) = raw_string_end(bytes, i) {
            blank(&mut out, i, end);
            i = end;
        } else if bytes[i] == b'"' {
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != b'"' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(bytes.len());
            blank(&mut out, i, end);
            i = end;
        } else if bytes[i] == b'\'' {
            match char_literal_end(code, i) {
                Some(end) => {
                    blank(&mut out, i, end);
                    i = end;
                }
                // A lifetime or a label: kept.
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    String::from_utf8(out).expect("only ASCII was written over whole characters")
}

/// The end of a raw string (`r"…"`, `r#"…"#`, `br##"…"##`) starting at
/// `at`, if one starts there.
fn raw_string_end(bytes: &[u8], at: usize) -> Option<usize> {
    let mut j = at;
    if bytes.get(j) == Some(&b'b') {
        j += 1;
    }
    if bytes.get(j) != Some(&b'r') {
        return None;
    }
    j += 1;
    let hashes = bytes[j..].iter().take_while(|&&b| b == b'#').count();
    j += hashes;
    if bytes.get(j) != Some(&b'"') {
        return None;
    }
    let closing: Vec<u8> = std::iter::once(b'"')
        .chain(std::iter::repeat_n(b'#', hashes))
        .collect();
    let body = j + 1;
    let found = bytes[body..]
        .windows(closing.len())
        .position(|w| w == closing.as_slice())?;
    Some(body + found + closing.len())
}

/// The end of the character literal at `at` (`'a'`, `'\n'`, `'\''`,
/// `'\u{1F600}'`, `'é'`), or `None` for a lifetime or a label (`'a`).
fn char_literal_end(code: &str, at: usize) -> Option<usize> {
    let rest = &code[at + 1..];
    let mut chars = rest.char_indices();
    let (_, first) = chars.next()?;
    if first == '\\' {
        let close = rest[1..].find('\'')? + 1;
        // `'\''`: the quote right after the backslash is the character.
        let close = if close == 1 {
            rest[2..].find('\'')? + 2
        } else {
            close
        };
        return Some(at + 1 + close + 1);
    }
    let (next, after) = chars.next()?;
    (after == '\'').then_some(at + 1 + next + 1)
}

/// The offset of the brace that closes the one at `open` in masked code.
fn closing_brace(masked: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (offset, &b) in masked[open..].iter().enumerate() {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + offset);
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether `word` stands alone at `at` (not part of a longer identifier).
/// Whether the item whose keyword is at `at` derives `Error`: its
/// attributes, from the end of the item before it, name it in a `derive`.
fn derives_error(masked: &[u8], at: usize) -> bool {
    let start = masked[..at]
        .iter()
        .rposition(|&b| b == b'}' || b == b';')
        .map_or(0, |end| end + 1);
    let head = String::from_utf8_lossy(&masked[start..at]);
    head.split("derive(").skip(1).any(|derive| {
        derive
            .split(')')
            .next()
            .is_some_and(|list| list.split(',').any(|name| name.trim().ends_with("Error")))
    })
}

fn word_at(masked: &[u8], at: usize, word: &[u8]) -> bool {
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    masked[at..].starts_with(word)
        && (at == 0 || !is_ident(masked[at - 1]))
        && masked.get(at + word.len()).is_none_or(|&b| !is_ident(b))
}

/// The end of the item that starts at `at`: its closing brace when a `{`
/// comes before a `;` outside brackets, else the `;`.
fn item_end(masked: &[u8], at: usize) -> usize {
    let mut depth = 0i32;
    for (offset, &b) in masked[at..].iter().enumerate() {
        match b {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth -= 1,
            b';' if depth == 0 => return at + offset + 1,
            b'{' if depth == 0 => {
                return closing_brace(masked, at + offset).map_or(masked.len(), |end| end + 1);
            }
            _ => {}
        }
    }
    masked.len()
}

/// One source file of `src/`, masked, with its test-only items blanked.
struct Source {
    path: PathBuf,
    /// Masked, with every `#[cfg(test)]` item blanked as well.
    code: String,
    /// The files `#[cfg(test)] mod name;` declares here: test code too.
    test_modules: Vec<PathBuf>,
}

impl Source {
    fn read(path: &Path) -> Source {
        let text = std::fs::read_to_string(path).expect("read a source file");
        let mut code = mask(&text).into_bytes();
        let mut test_modules = Vec::new();
        let attribute = b"#[cfg(test)]";
        let mut at = 0;
        while let Some(found) = find(&code, attribute, at) {
            let item = found + attribute.len();
            let end = item_end(&code, item);
            let declared = String::from_utf8_lossy(&code[item..end]).into_owned();
            if let Some(name) = declared
                .trim()
                .strip_suffix(';')
                .and_then(|d| d.trim().rsplit_once("mod "))
                .map(|(_, name)| name.trim().to_owned())
            {
                test_modules.extend(module_files(path, &name));
            }
            for b in &mut code[found..end] {
                if *b != b'\n' {
                    *b = b' ';
                }
            }
            at = end;
        }
        Source {
            path: path.to_owned(),
            code: String::from_utf8(code).expect("ASCII blanks"),
            test_modules,
        }
    }

    /// The 1-based line of the byte `offset`.
    fn line(&self, offset: usize) -> usize {
        self.code.as_bytes()[..offset]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    fn place(&self, offset: usize) -> String {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let rel = self.path.strip_prefix(root).unwrap_or(&self.path);
        format!("{}:{}", rel.display(), self.line(offset))
    }

    /// Each function with a body: its name, where it starts and its length
    /// in lines from `fn` to the closing brace.
    fn functions(&self) -> Vec<(String, usize, usize)> {
        let code = self.code.as_bytes();
        let mut found = Vec::new();
        for at in 0..code.len() {
            if !word_at(code, at, b"fn") {
                continue;
            }
            let rest = &self.code[at + 2..];
            let name: String = rest
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            // `fn(u8) -> u8` is a type, not a function.
            if name.is_empty() || !rest.starts_with(char::is_whitespace) {
                continue;
            }
            let end = item_end(code, at);
            if code[end - 1] == b'}' {
                let lines = self.line(end - 1) - self.line(at) + 1;
                found.push((name, at, lines));
            }
        }
        found
    }

    /// Where each `Result<_, String>` is.
    fn result_strings(&self) -> Vec<usize> {
        let code = self.code.as_bytes();
        let mut found = Vec::new();
        for at in 0..code.len() {
            if !word_at(code, at, b"Result") || code.get(at + 6) != Some(&b'<') {
                continue;
            }
            let args = generic_args(&self.code[at + 7..]);
            if args.len() == 2 && args[1] == "String" {
                found.push(at);
            }
        }
        found
    }

    /// Where each enum variant whose only payload is a `String` is.
    /// The variants of error enums (those deriving `Error`, thiserror's)
    /// whose only payload is a `String`: an error carried as text.
    fn string_payloads(&self) -> Vec<usize> {
        let code = self.code.as_bytes();
        let mut found = Vec::new();
        for at in 0..code.len() {
            if !word_at(code, at, b"enum") || !derives_error(code, at) {
                continue;
            }
            let Some(open) = find(code, b"{", at) else {
                continue;
            };
            let Some(close) = closing_brace(code, open) else {
                continue;
            };
            for part in split_top_level(&self.code[open + 1..close]) {
                let variant = strip_attributes(part);
                let compact: String = variant.chars().filter(|c| !c.is_whitespace()).collect();
                if let Some(name) = compact.strip_suffix("(String)")
                    && !name.is_empty()
                    && name.chars().all(|c| c.is_alphanumeric() || c == '_')
                {
                    // `variant` is a slice of `self.code`: its offset.
                    found.push(variant.as_ptr() as usize - self.code.as_ptr() as usize);
                }
            }
        }
        found
    }
}

/// The first `needle` in `haystack` at or after `from`.
fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    haystack
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| from + p)
}

/// The generic arguments of a type whose `<` was just passed: the text up
/// to the matching `>`, split at its top-level commas, each trimmed.
fn generic_args(after_open: &str) -> Vec<String> {
    let mut depth = 1i32;
    let bytes = after_open.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'<' | b'(' | b'[' => depth += 1,
            b'>' if i > 0 && bytes[i - 1] == b'-' => {}
            b'>' | b')' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return split_top_level(&after_open[..i])
                        .into_iter()
                        .map(|a| a.trim().to_owned())
                        .filter(|a| !a.is_empty())
                        .collect();
                }
            }
            _ => {}
        }
    }
    Vec::new()
}

/// `text` split at the commas outside any bracket.
fn split_top_level(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let (mut depth, mut start, mut parts) = (0i32, 0, Vec::new());
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'(' | b'[' | b'{' | b'<' => depth += 1,
            b'>' if i > 0 && bytes[i - 1] == b'-' => {}
            b')' | b']' | b'}' | b'>' => depth -= 1,
            b',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// A variant without its leading `#[...]` attributes and white space.
fn strip_attributes(variant: &str) -> &str {
    let mut rest = variant.trim_start();
    while let Some(attribute) = rest.strip_prefix("#[") {
        let mut depth = 1;
        let mut end = attribute.len();
        for (i, b) in attribute.bytes().enumerate() {
            match b {
                b'[' => depth += 1,
                b']' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = attribute[end..].trim_start();
    }
    rest.trim_end()
}

/// The files a module `name` declared in `parent` may live in.
fn module_files(parent: &Path, name: &str) -> Vec<PathBuf> {
    let stem = parent.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let dir = parent.parent().expect("a file has a folder");
    let dir = if matches!(stem, "mod" | "lib" | "main") {
        dir.to_path_buf()
    } else {
        dir.join(stem)
    };
    vec![
        dir.join(format!("{name}.rs")),
        dir.join(name).join("mod.rs"),
    ]
}

/// Every non-test source file of `src/`, read.
fn sources() -> Vec<Source> {
    fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                // Test folders of src/ (`dataset/tests/`) are test code.
                if path.file_name().is_some_and(|n| n != "tests") {
                    walk(&path, files);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    files.sort();
    let read: Vec<Source> = files.iter().map(|f| Source::read(f)).collect();
    let test_only: Vec<PathBuf> = read
        .iter()
        .flat_map(|s| s.test_modules.iter().cloned())
        .collect();
    read.into_iter()
        .filter(|s| !test_only.contains(&s.path))
        .collect()
}

#[test]
fn no_function_outside_tests_is_over_100_lines() {
    let mut long = Vec::new();
    for source in sources() {
        for (name, at, lines) in source.functions() {
            if lines > MAX_FUNCTION_LINES {
                long.push(format!("{} fn {name}: {lines} lines", source.place(at)));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines outside tests (split them):\n{}",
        long.join("\n")
    );
}

#[test]
fn at_most_15_result_string_outside_tests() {
    let found: Vec<String> = sources()
        .iter()
        .flat_map(|s| s.result_strings().into_iter().map(|at| s.place(at)))
        .collect();
    assert!(
        found.len() <= MAX_RESULT_STRING,
        "{} Result<_, String> outside tests, at most {MAX_RESULT_STRING} (return a typed error):\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn at_most_40_string_payloads_outside_tests() {
    let found: Vec<String> = sources()
        .iter()
        .flat_map(|s| s.string_payloads().into_iter().map(|at| s.place(at)))
        .collect();
    assert!(
        found.len() <= MAX_STRING_PAYLOADS,
        "{} variants of error enums whose only payload is a String outside tests, at most {MAX_STRING_PAYLOADS} (carry what the variant concerns, and the error it wraps as its source):\n{}",
        found.len(),
        found.join("\n")
    );
}

/// The reader itself: braces, `fn` and `Result<_, String>` in strings,
/// raw strings, characters and comments count for nothing; lifetimes
/// are kept; test items are left out.
#[test]
fn the_reader_skips_strings_chars_comments_and_test_items() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("sample.rs");
    let code = r####"
/// fn not_a_function() { Result<u8, String> }
fn short<'a>(x: &'a str) -> Result<u8, String> {
    let _ = "}}} fn fake() {";
    let _ = r#"}" fn raw() {"#;
    let _ = '{';
    let _ = '\'';
    /* { nested /* } */ fn in_comment() { */
    let _ = b'}';
    todo!()
}
#[derive(Debug, thiserror::Error)]
enum E {
    #[error("{0}")]
    Text(String),
    Named { why: String },
    Other(Box<String>),
    Pair(String, u8),
}
#[derive(Debug, Clone)]
enum Data {
    Line(String),
}
#[cfg(test)]
mod tests {
    fn hidden() -> Result<(), String> { Ok(()) }
    enum T { Hidden(String) }
}
"####;
    std::fs::write(&file, code).expect("write");
    let source = Source::read(&file);
    let functions: Vec<(String, usize)> = source
        .functions()
        .into_iter()
        .map(|(name, _, lines)| (name, lines))
        .collect();
    assert_eq!(functions, vec![("short".to_owned(), 9)]);
    assert_eq!(source.result_strings().len(), 1);
    let payloads = source.string_payloads();
    assert_eq!(payloads.len(), 1);
    assert_eq!(source.line(payloads[0]), 15);
}
