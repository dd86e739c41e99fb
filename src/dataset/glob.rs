//! Glob patterns over paths in a repo, as the `datasets` library matches
//! its `data_files` (fsspec's glob, like Python's with `recursive=True`):
//! `*` and `?` within one folder name, `**/` any number of folders (none
//! too), a `**` elsewhere anything, `[...]` a class (`[!...]` negated).

/// A compiled glob.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Glob(Vec<Token>);

impl Glob {
    pub(crate) fn new(glob: &str) -> Glob {
        Glob(tokens(glob))
    }

    pub(crate) fn matches(&self, path: &str) -> bool {
        matches(&self.0, &path.chars().collect::<Vec<_>>())
    }
}

/// One piece of a glob.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    Char(char),
    /// `?`: one character, not `/`.
    One,
    /// `*`: any characters within a folder name.
    Star,
    /// `**/`: no folder or any number of them.
    Folders,
    /// `**` not followed by `/`: anything, `/` included.
    Anything,
    /// `[...]` (`[!...]` negated): ranges and single characters.
    Class {
        negated: bool,
        items: Vec<(char, char)>,
    },
}

fn tokens(glob: &str) -> Vec<Token> {
    let chars: Vec<char> = glob.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '*' if chars.get(i + 1) == Some(&'*') => {
                if chars.get(i + 2) == Some(&'/') {
                    out.push(Token::Folders);
                    i += 3;
                } else {
                    out.push(Token::Anything);
                    i += 2;
                }
                continue;
            }
            '*' => out.push(Token::Star),
            '?' => out.push(Token::One),
            '[' => {
                if let Some((class, next)) = class(&chars, i) {
                    out.push(class);
                    i = next;
                    continue;
                }
                out.push(Token::Char('['));
            }
            c => out.push(Token::Char(c)),
        }
        i += 1;
    }
    out
}

/// The class starting at `chars[start] == '['` and the index past it;
/// `None` when it is not closed (then `[` is itself).
fn class(chars: &[char], start: usize) -> Option<(Token, usize)> {
    let mut i = start + 1;
    let negated = matches!(chars.get(i), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut items = Vec::new();
    let first = i;
    loop {
        let c = *chars.get(i)?;
        if c == ']' && i > first {
            return Some((Token::Class { negated, items }, i + 1));
        }
        match (chars.get(i + 1), chars.get(i + 2)) {
            (Some('-'), Some(&end)) if end != ']' => {
                items.push((c, end));
                i += 3;
            }
            _ => {
                items.push((c, c));
                i += 1;
            }
        }
    }
}

fn matches(pattern: &[Token], path: &[char]) -> bool {
    let Some((token, rest)) = pattern.split_first() else {
        return path.is_empty();
    };
    match token {
        Token::Char(c) => path.first() == Some(c) && matches(rest, &path[1..]),
        Token::One => path.first().is_some_and(|&c| c != '/') && matches(rest, &path[1..]),
        Token::Class { negated, items } => {
            path.first().is_some_and(|&c| {
                let inside = items.iter().any(|&(lo, hi)| lo <= c && c <= hi);
                c != '/' && inside != *negated
            }) && matches(rest, &path[1..])
        }
        Token::Star => {
            let mut at = 0;
            loop {
                if matches(rest, &path[at..]) {
                    return true;
                }
                if at == path.len() || path[at] == '/' {
                    return false;
                }
                at += 1;
            }
        }
        Token::Anything => (0..=path.len()).any(|at| matches(rest, &path[at..])),
        Token::Folders => {
            matches(rest, path)
                || (0..path.len()).any(|at| path[at] == '/' && matches(rest, &path[at + 1..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn glob(pattern: &str, path: &str) -> bool {
        Glob::new(pattern).matches(path)
    }

    #[test]
    fn globs_match_as_datasets_matches_them() {
        let cases = [
            ("data/test-*", "data/test-00000-of-00001.parquet", true),
            ("data/test-*", "data/test-0/x.parquet", false),
            ("data/*.jsonl", "data/a.jsonl", true),
            ("*.jsonl", "data/a.jsonl", false),
            ("**/*.jsonl", "a.jsonl", true),
            ("**/*.jsonl", "x/y/a.jsonl", true),
            ("**", "x/y/a.jsonl", true),
            ("data/**", "data/x/a.json", true),
            ("**/test/**", "default/test/0000.parquet", true),
            ("**/test/**", "default/testing/0000.parquet", false),
            ("**/test[-._ 0-9]*", "data/test-1.parquet", true),
            ("**/test[-._ 0-9]*", "data/test_x.jsonl", true),
            ("**/test[-._ 0-9]*", "data/tests.jsonl", false),
            ("**/*[-._ 0-9]test[-._ 0-9]*", "swe_test.jsonl", true),
            ("part-?.json", "part-1.json", true),
            ("part-?.json", "part-12.json", false),
            ("part-[!0-9].json", "part-a.json", true),
            ("part-[!0-9].json", "part-1.json", false),
            ("data/file[.json", "data/file[.json", true),
            ("exact.parquet", "exact.parquet", true),
            ("exact.parquet", "sub/exact.parquet", false),
        ];
        for (pattern, path, want) in cases {
            assert_eq!(glob(pattern, path), want, "{pattern} ~ {path}");
        }
    }
}
