//! Just enough of the shell's grammar to find the commands in a command
//! line: words with their quotes removed, split into simple commands at
//! `;`, `&&`, `||`, `|`, `&`, newlines and parentheses, with the targets of
//! redirections apart. Command substitutions (`$(...)`, backticks, `<(...)`),
//! `bash -c STRING`, `eval` and here-documents fed to a shell are parsed as
//! commands of their own; other here-documents are data and skipped.
//!
//! It is not a shell: no expansion, no aliases, no functions. It only has to
//! be right for the commands agents type, and never panic on the rest.

/// One simple command: its words and the targets of its redirections.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Simple {
    pub words: Vec<String>,
    pub redirects: Vec<String>,
}

impl Simple {
    /// The program's name (its path's last part) and its arguments, after
    /// variable assignments, keywords (`if`, `!`, `{`...) and wrappers
    /// (`sudo`, `env`, `timeout 10`, `xargs -n 1`...) are skipped.
    pub(super) fn program(&self) -> Option<(&str, &[String])> {
        let words = &self.words;
        let mut i = 0;
        while i < words.len() {
            let word = words[i].as_str();
            if is_assignment(word) || KEYWORDS.contains(&word) {
                i += 1;
                continue;
            }
            let name = basename(word);
            let Some(&(_, with_values, positional)) =
                WRAPPERS.iter().find(|(wrapper, _, _)| *wrapper == name)
            else {
                return Some((name, &words[i + 1..]));
            };
            i += 1;
            // The wrapper's options, then its own positional arguments
            // (`timeout`'s duration).
            while i < words.len() && words[i].starts_with('-') && words[i] != "-" {
                let takes_value = with_values.contains(&words[i].as_str());
                i += if takes_value { 2 } else { 1 };
            }
            i += positional;
        }
        None
    }
}

/// Words that may come before a command's name.
const KEYWORDS: &[&str] = &[
    "!", "{", "}", "if", "then", "else", "elif", "do", "while", "until",
];

/// Programs that run the rest of their words as a command: name, the
/// options of theirs that take a value, the positional words of theirs.
const WRAPPERS: &[(&str, &[&str], usize)] = &[
    (
        "sudo",
        &["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"],
        0,
    ),
    ("env", &["-u", "-C", "-S", "--unset", "--chdir"], 0),
    ("command", &[], 0),
    ("builtin", &[], 0),
    ("exec", &["-a"], 0),
    ("nohup", &[], 0),
    ("setsid", &[], 0),
    ("time", &["-f", "-o", "--format", "--output"], 0),
    ("nice", &["-n", "--adjustment"], 0),
    ("timeout", &["-s", "-k", "--signal", "--kill-after"], 1),
    ("stdbuf", &["-i", "-o", "-e"], 0),
    ("unbuffer", &[], 0),
    ("watch", &["-n", "--interval"], 0),
    (
        "xargs",
        &[
            "-I",
            "-n",
            "-P",
            "-d",
            "-L",
            "-s",
            "-a",
            "-E",
            "--max-args",
            "--max-procs",
            "--delimiter",
            "--arg-file",
        ],
        0,
    ),
];

/// Shells whose `-c` string and here-document are commands.
const SHELLS: &[&str] = &["bash", "sh", "zsh", "dash", "ksh"];

/// How deep substitutions and `bash -c` strings are followed.
const MAX_DEPTH: usize = 8;

fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else {
        return false;
    };
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

pub(super) fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// Every simple command in `text`, nested ones included.
pub(super) fn simple_commands(text: &str) -> Vec<Simple> {
    parse(text, 0)
}

fn parse(text: &str, depth: usize) -> Vec<Simple> {
    if depth > MAX_DEPTH {
        return Vec::new();
    }
    let mut parser = Parser {
        chars: text.chars().collect(),
        depth,
        ..Parser::default()
    };
    parser.run();
    let Parser {
        mut out,
        mut nested,
        bodies,
        ..
    } = parser;
    for (index, body) in bodies {
        let fed_to_shell = out
            .get(index)
            .and_then(Simple::program)
            .is_some_and(|(name, _)| SHELLS.contains(&name));
        if fed_to_shell {
            nested.extend(parse(&body, depth + 1));
        }
    }
    // `bash -c STRING`, `sh -ec STRING`, `eval WORDS`.
    for simple in &out {
        let Some((name, args)) = simple.program() else {
            continue;
        };
        if name == "eval" {
            nested.extend(parse(&args.join(" "), depth + 1));
        } else if SHELLS.contains(&name) {
            let flag = args.iter().position(|arg| {
                arg.starts_with('-') && !arg.starts_with("--") && arg.contains('c')
            });
            if let Some(script) = flag.and_then(|i| args.get(i + 1)) {
                nested.extend(parse(script, depth + 1));
            }
        }
    }
    out.extend(nested);
    out
}

/// A here-document waiting for the end of its line.
struct Pending {
    delimiter: String,
    strip_tabs: bool,
    /// Index in `out` of the command it belongs to.
    command: usize,
}

#[derive(Default)]
struct Parser {
    chars: Vec<char>,
    pos: usize,
    depth: usize,
    out: Vec<Simple>,
    /// Commands found in substitutions and shell strings.
    nested: Vec<Simple>,
    current: Simple,
    word: String,
    in_word: bool,
    pending: Vec<Pending>,
    /// Here-document bodies with the index of their command.
    bodies: Vec<(usize, String)>,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek();
        self.pos += 1;
        c
    }

    fn push(&mut self, c: char) {
        self.word.push(c);
        self.in_word = true;
    }

    fn end_word(&mut self) {
        if self.in_word {
            self.current.words.push(std::mem::take(&mut self.word));
            self.in_word = false;
        }
    }

    fn end_command(&mut self) {
        self.end_word();
        let current = std::mem::take(&mut self.current);
        if !current.words.is_empty() || !current.redirects.is_empty() {
            self.out.push(current);
        }
    }

    fn nest(&mut self, text: &str) {
        let found = parse(text, self.depth + 1);
        self.nested.extend(found);
    }

    fn run(&mut self) {
        while let Some(c) = self.peek() {
            match c {
                '\\' => {
                    self.pos += 1;
                    match self.bump() {
                        Some('\n') | None => {}
                        Some(escaped) => self.push(escaped),
                    }
                }
                '\'' => {
                    self.pos += 1;
                    self.in_word = true;
                    while let Some(c) = self.bump() {
                        if c == '\'' {
                            break;
                        }
                        self.word.push(c);
                    }
                }
                '"' => {
                    self.pos += 1;
                    self.in_word = true;
                    self.double_quoted();
                }
                '`' => {
                    self.pos += 1;
                    let inner = self.until_backtick();
                    self.nest(&inner);
                    self.in_word = true;
                }
                '$' if self.peek_at(1) == Some('(') => {
                    self.pos += 2;
                    let inner = self.until_paren();
                    self.nest(&inner);
                    self.in_word = true;
                }
                '<' | '>' if self.peek_at(1) == Some('(') => {
                    self.pos += 2;
                    let inner = self.until_paren();
                    self.nest(&inner);
                    self.in_word = true;
                }
                '<' | '>' => self.redirect(),
                '&' if self.peek_at(1) == Some('>') => {
                    self.pos += 1;
                    self.redirect();
                }
                '#' if !self.in_word => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.pos += 1;
                    }
                }
                ' ' | '\t' | '\r' => {
                    self.pos += 1;
                    self.end_word();
                }
                '\n' => {
                    self.pos += 1;
                    self.end_command();
                    self.here_document_bodies();
                }
                ';' | '&' | '|' | '(' | ')' => {
                    self.pos += 1;
                    self.end_command();
                }
                c => {
                    self.pos += 1;
                    self.push(c);
                }
            }
        }
        self.end_command();
        // A here-document cut off by the end of the text.
        self.here_document_bodies();
    }

    /// After the opening `"`: up to the closing one.
    fn double_quoted(&mut self) {
        while let Some(c) = self.bump() {
            match c {
                '"' => return,
                '\\' => match self.bump() {
                    Some('\n') | None => {}
                    Some(e @ ('"' | '\\' | '$' | '`')) => self.word.push(e),
                    Some(other) => {
                        self.word.push('\\');
                        self.word.push(other);
                    }
                },
                '$' if self.peek() == Some('(') => {
                    self.pos += 1;
                    let inner = self.until_paren();
                    self.nest(&inner);
                }
                '`' => {
                    let inner = self.until_backtick();
                    self.nest(&inner);
                }
                c => self.word.push(c),
            }
        }
    }

    /// After an opening `(`: the text up to its matching `)`, which is
    /// consumed. Quotes are skipped over so a `)` in them does not count.
    fn until_paren(&mut self) -> String {
        let mut inner = String::new();
        let mut depth = 1;
        while let Some(c) = self.bump() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                '\\' => {
                    inner.push(c);
                    if let Some(next) = self.bump() {
                        inner.push(next);
                    }
                    continue;
                }
                '\'' | '"' => {
                    inner.push(c);
                    while let Some(q) = self.bump() {
                        inner.push(q);
                        if q == c {
                            break;
                        }
                        if q == '\\'
                            && c == '"'
                            && let Some(next) = self.bump()
                        {
                            inner.push(next);
                        }
                    }
                    continue;
                }
                _ => {}
            }
            inner.push(c);
        }
        inner
    }

    /// After an opening backtick: the text up to the closing one.
    fn until_backtick(&mut self) -> String {
        let mut inner = String::new();
        while let Some(c) = self.bump() {
            match c {
                '`' => break,
                '\\' => {
                    if let Some(next) = self.bump() {
                        if next != '`' {
                            inner.push('\\');
                        }
                        inner.push(next);
                    }
                }
                c => inner.push(c),
            }
        }
        inner
    }

    /// At `<` or `>`: the operator and its target.
    fn redirect(&mut self) {
        // `2>file`: the digits are the descriptor, not a word.
        if self.in_word && self.word.chars().all(|c| c.is_ascii_digit()) {
            self.word.clear();
            self.in_word = false;
        } else {
            self.end_word();
        }
        let first = self.bump().unwrap_or('>');
        let mut op = String::from(first);
        while let Some(c) = self.peek() {
            let continues = matches!((op.as_str(), c), ("<", '<' | '&' | '>') | ("<<", '<' | '-'))
                || matches!((op.as_str(), c), (">", '>' | '&' | '|'));
            if !continues {
                break;
            }
            op.push(c);
            self.pos += 1;
        }
        let target = self.read_word();
        match op.as_str() {
            "<<" | "<<-" => self.pending.push(Pending {
                delimiter: target,
                strip_tabs: op == "<<-",
                command: self.out.len(),
            }),
            _ => self.current.redirects.push(target),
        }
    }

    /// One word, for a redirection's target: quotes removed, nothing nested.
    fn read_word(&mut self) -> String {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.pos += 1;
        }
        let mut word = String::new();
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' | '\r' | '\n' | ';' | '&' | '|' | '(' | ')' | '<' | '>' => break,
                '\\' => {
                    self.pos += 1;
                    if let Some(next) = self.bump() {
                        word.push(next);
                    }
                }
                '\'' | '"' => {
                    self.pos += 1;
                    while let Some(q) = self.bump() {
                        if q == c {
                            break;
                        }
                        word.push(q);
                    }
                }
                c => {
                    self.pos += 1;
                    word.push(c);
                }
            }
        }
        word
    }

    /// At the start of the line after here-document operators: their
    /// bodies, each up to its delimiter line.
    fn here_document_bodies(&mut self) {
        for pending in std::mem::take(&mut self.pending) {
            let mut body = String::new();
            while self.peek().is_some() {
                let mut line = String::new();
                while let Some(c) = self.bump() {
                    if c == '\n' {
                        break;
                    }
                    line.push(c);
                }
                let compared = if pending.strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    line.as_str()
                };
                if compared == pending.delimiter {
                    break;
                }
                body.push_str(&line);
                body.push('\n');
            }
            self.bodies.push((pending.command, body));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<Vec<String>> {
        simple_commands(text).into_iter().map(|s| s.words).collect()
    }

    fn programs(text: &str) -> Vec<String> {
        simple_commands(text)
            .iter()
            .filter_map(|s| s.program().map(|(name, _)| name.to_owned()))
            .collect()
    }

    #[test]
    fn splits_at_operators_and_removes_quotes() {
        assert_eq!(
            words("cd x && git --no-pager log 'a b' \"c\\\"d\" e\\ f | head -3; ls&"),
            vec![
                vec!["cd", "x"],
                vec!["git", "--no-pager", "log", "a b", "c\"d", "e f"],
                vec!["head", "-3"],
                vec!["ls"],
            ]
        );
        assert_eq!(words("a || b\nc"), vec![vec!["a"], vec!["b"], vec!["c"]]);
        assert_eq!(
            words("(cd x; git log)"),
            vec![vec!["cd", "x"], vec!["git", "log"]]
        );
        assert_eq!(words("echo a # git log --all"), vec![vec!["echo", "a"]]);
        assert_eq!(words("echo a#b"), vec![vec!["echo", "a#b"]]);
    }

    #[test]
    fn redirections_are_kept_apart() {
        let found = simple_commands("git log 2>&1 >out.txt < .git/packed-refs &>/dev/null");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].words, vec!["git", "log"]);
        assert_eq!(
            found[0].redirects,
            vec!["1", "out.txt", ".git/packed-refs", "/dev/null"]
        );
    }

    #[test]
    fn substitutions_and_shell_strings_are_commands_too() {
        assert_eq!(
            programs("echo \"$(git rev-list --all | wc -l)\" `git reflog` <(git log)"),
            vec!["echo", "git", "wc", "git", "git"]
        );
        assert_eq!(
            words("bash -lc 'cd repo && git log --all'")[1..],
            [vec!["cd", "repo"], vec!["git", "log", "--all"]]
        );
        assert_eq!(programs("eval git fsck"), vec!["eval", "git"]);
    }

    #[test]
    fn here_documents_are_data_unless_a_shell_reads_them() {
        let text = "cat > f.py <<'EOF'\ngit log --all\nEOF\npython f.py";
        assert_eq!(programs(text), vec!["cat", "python"]);
        let text = "bash <<EOF\n\tgit reflog\nEOF\n";
        assert_eq!(programs(text), vec!["bash", "git"]);
        let text = "cat <<-EOF | sh\n\tgit fsck\n\tEOF\necho done";
        // The body goes to `cat`, not to the shell: data.
        assert_eq!(programs(text), vec!["cat", "sh", "echo"]);
        // Cut off before its delimiter: still no panic, still data.
        assert_eq!(programs("cat <<EOF\ngit log --all"), vec!["cat"]);
    }

    #[test]
    fn wrappers_and_assignments_are_skipped() {
        let found =
            simple_commands("GIT_PAGER=cat timeout -s KILL 10 sudo -u me env -i A=1 git log");
        let (name, args) = found[0].program().expect("program");
        assert_eq!((name, args), ("git", &["log".to_owned()][..]));
        let found = simple_commands("xargs -n 1 /usr/bin/git show");
        assert_eq!(found[0].program().map(|p| p.0), Some("git"));
        let found = simple_commands("if ! git diff --quiet; then echo x; fi");
        assert_eq!(found[0].program().map(|p| p.0), Some("git"));
    }

    #[test]
    fn unbalanced_input_does_not_panic() {
        for text in ["'", "\"", "$(", "`", "<<", "a >", "\\", "$(echo ')' "] {
            let _ = simple_commands(text);
        }
    }
}
