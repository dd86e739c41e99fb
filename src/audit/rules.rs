//! The rules: what one simple command (program and words, from
//! `audit::shell`) probes. Git commands that list refs, reflogs or
//! unreachable objects, or that fetch; reads of the object store or the
//! repo cache; downloads from a forge or PyPI; `pip` installs of the
//! package under test. Hashes are only collected here: whether one is
//! outside the base's history is the mirror's to say (`audit::mod`).

use super::kinds::{Probe, ProbeKind, Subject, normalize_package};
use super::shell::Simple;

/// What one simple command matched: probes, and the hex words given to a
/// git command that takes revisions, with that command's name.
#[derive(Debug, Default)]
pub(super) struct Found {
    pub probes: Vec<Probe>,
    pub hashes: Vec<(String, String)>,
}

impl Found {
    fn add(&mut self, kind: ProbeKind, reason: String) {
        let probe = Probe { kind, reason };
        if !self.probes.contains(&probe) {
            self.probes.push(probe);
        }
    }
}

/// Hosts whose files are the project's source or its releases: forges,
/// their raw and archive hosts, and PyPI. A subdomain counts.
const FORGES: &[&str] = &[
    "github.com",
    "githubusercontent.com",
    "gitlab.com",
    "bitbucket.org",
    "codeberg.org",
    "sourceforge.net",
    "pypi.org",
    "pythonhosted.org",
];

/// Programs that download a URL.
const DOWNLOADERS: &[&str] = &["curl", "wget", "http", "https", "aria2c"];

/// Paths inside a repository that hold its objects, refs or reflogs. The
/// working copy's own `.git` holds nothing past the base but the agent's
/// work; these are how a command reaches the mirror's objects or refs
/// without git's porcelain (a checkout borrows the mirror's objects through
/// `objects/info/alternates`).
const GIT_PATHS: &[(&str, ProbeKind)] = &[
    ("objects/info/alternates", ProbeKind::ObjectStore),
    (".git/objects", ProbeKind::ObjectStore),
    (".git/packed-refs", ProbeKind::AllRefs),
    (".git/refs", ProbeKind::AllRefs),
    (".git/logs", ProbeKind::Reflog),
];

pub(super) fn check(simple: &Simple, subject: &Subject) -> Found {
    let mut found = Found::default();
    for word in simple.words.iter().chain(&simple.redirects) {
        paths(word, subject, &mut found);
    }
    let Some((name, args)) = simple.program() else {
        return found;
    };
    match name {
        "git" => git(args, &mut found),
        "gh" => gh(args, &mut found),
        "pip" | "pip3" => pip(args, subject, &mut found),
        "uv" if args.first().is_some_and(|a| a == "pip") => pip(&args[1..], subject, &mut found),
        name if name.starts_with("pip3.") => pip(args, subject, &mut found),
        name if name.starts_with("python") => {
            // `python -m pip ...`
            if let Some(i) = args.iter().position(|a| a == "-m")
                && args.get(i + 1).is_some_and(|m| m == "pip" || m == "pip3")
            {
                pip(&args[i + 2..], subject, &mut found);
            }
        }
        name if DOWNLOADERS.contains(&name) => download(name, args, &mut found),
        _ => {}
    }
    found
}

/// A word that names the object store, refs or reflogs of a repository, or
/// the cache's mirrors (where every repo's full history lives).
fn paths(word: &str, subject: &Subject, found: &mut Found) {
    if let Some((path, kind)) = GIT_PATHS.iter().find(|(path, _)| word.contains(path)) {
        found.add(*kind, format!("reads {path}"));
    }
    let names_mirror = subject
        .mirror_name
        .as_deref()
        .is_some_and(|name| !name.is_empty() && word.contains(name));
    if names_mirror
        || subject
            .mirrors_folder
            .iter()
            .any(|folder| names_folder(word, folder))
    {
        found.add(ProbeKind::ObjectStore, "names the repo cache".to_owned());
    }
}

/// Whether `word` holds the path `folder` or a path inside it: `folder`
/// followed by the end of the word or a `/`.
fn names_folder(word: &str, folder: &str) -> bool {
    !folder.is_empty()
        && word
            .match_indices(folder)
            .any(|(at, _)| matches!(word[at + folder.len()..].chars().next(), None | Some('/')))
}

/// Git's options before the subcommand that take a separate value.
const GIT_VALUE_OPTIONS: &[&str] = &[
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--config-env",
    "--super-prefix",
];

/// Options of the log family that walk every ref, or every reflog entry.
const ALL_REFS: &[&str] = &["--all", "--branches", "--tags", "--remotes", "--glob"];
const REFLOG_WALK: &[&str] = &["-g", "--walk-reflogs", "--reflog"];

/// Subcommands that take revisions: a hex word given to one of them is
/// checked against the base's history.
const TAKES_REVISIONS: &[&str] = &[
    "show",
    "log",
    "shortlog",
    "whatchanged",
    "rev-list",
    "rev-parse",
    "diff",
    "diff-tree",
    "difftool",
    "range-diff",
    "checkout",
    "switch",
    "restore",
    "reset",
    "cherry-pick",
    "revert",
    "merge",
    "rebase",
    "format-patch",
    "cat-file",
    "ls-tree",
    "archive",
    "blame",
    "annotate",
    "grep",
    "branch",
    "tag",
    "describe",
    "name-rev",
    "merge-base",
    "worktree",
    "bisect",
];

fn git(args: &[String], found: &mut Found) {
    let mut i = 0;
    while i < args.len() && args[i].starts_with('-') {
        i += if GIT_VALUE_OPTIONS.contains(&args[i].as_str()) {
            2
        } else {
            1
        };
    }
    let Some(sub) = args.get(i).map(String::as_str) else {
        return;
    };
    // Options and revisions: up to `--`, after which come paths.
    let rest: Vec<&str> = args[i + 1..]
        .iter()
        .map(String::as_str)
        .take_while(|a| *a != "--")
        .collect();
    let has = |options: &[&str]| {
        rest.iter().copied().find(|a| {
            options
                .iter()
                .any(|o| a == o || a.strip_prefix(o).is_some_and(|v| v.starts_with('=')))
        })
    };
    match sub {
        "log" | "shortlog" | "whatchanged" | "rev-list" | "rev-parse" | "show" => {
            if let Some(option) = has(ALL_REFS) {
                found.add(ProbeKind::AllRefs, format!("git {sub} {option}"));
            }
            if let Some(option) = has(REFLOG_WALK) {
                found.add(ProbeKind::Reflog, format!("git {sub} {option}"));
            }
        }
        "reflog" => found.add(ProbeKind::Reflog, "git reflog".to_owned()),
        "for-each-ref" | "show-ref" => found.add(ProbeKind::AllRefs, format!("git {sub}")),
        "branch" | "show-branch" => {
            let listing = rest.iter().copied().find(|a| {
                matches!(*a, "--all" | "--remotes")
                    || (a.starts_with('-') && !a.starts_with("--") && a.contains(['a', 'r']))
            });
            if let Some(option) = listing {
                found.add(ProbeKind::AllRefs, format!("git {sub} {option}"));
            }
        }
        "fsck" => {
            let named = has(&["--lost-found", "--unreachable", "--dangling"]);
            match named {
                Some(option) => found.add(ProbeKind::Unreachable, format!("git fsck {option}")),
                // Without `--no-dangling`, fsck lists dangling objects.
                None if has(&["--no-dangling"]).is_none() => {
                    found.add(ProbeKind::Unreachable, "git fsck".to_owned())
                }
                None => {}
            }
        }
        "cat-file" if has(&["--batch-all-objects"]).is_some() => found.add(
            ProbeKind::ObjectStore,
            "git cat-file --batch-all-objects".to_owned(),
        ),
        "verify-pack" | "show-index" | "unpack-objects" => {
            found.add(ProbeKind::ObjectStore, format!("git {sub}"))
        }
        "fetch" | "pull" | "ls-remote" => found.add(ProbeKind::GitFetch, format!("git {sub}")),
        "remote" => {
            if let Some(action @ ("add" | "set-url" | "update")) = rest.first().copied() {
                found.add(ProbeKind::GitFetch, format!("git remote {action}"));
            }
        }
        // A clone of the working copy itself brings nothing new.
        "clone"
            if !clone_source(&rest)
                .is_some_and(|s| matches!(s, "." | "./" | ".git" | "./.git")) =>
        {
            found.add(ProbeKind::GitFetch, "git clone".to_owned())
        }
        _ => {}
    }
    if TAKES_REVISIONS.contains(&sub) {
        for word in &rest {
            for hex in revision_hexes(word) {
                found.hashes.push((sub.to_owned(), hex));
            }
        }
    }
}

/// `git clone`'s first positional word: the repository cloned.
fn clone_source<'a>(rest: &[&'a str]) -> Option<&'a str> {
    const VALUES: &[&str] = &[
        "-b",
        "--branch",
        "-o",
        "--origin",
        "-u",
        "--upload-pack",
        "--reference",
        "--reference-if-able",
        "--separate-git-dir",
        "--depth",
        "--shallow-since",
        "--shallow-exclude",
        "-c",
        "--config",
        "--template",
        "-j",
        "--jobs",
        "--filter",
        "--server-option",
    ];
    let mut i = 0;
    while i < rest.len() {
        let word = rest[i];
        if !word.starts_with('-') {
            return Some(word);
        }
        i += if VALUES.contains(&word) { 2 } else { 1 };
    }
    None
}

/// The hex object names (7 to 40 digits) in a word that may name
/// revisions: `abc1234`, `abc1234^`, `abc1234~2:path`, `a1b2c3d..e4f5a6b`,
/// `^abc1234`, `--source=abc1234`. Other words give none.
pub(super) fn revision_hexes(word: &str) -> Vec<String> {
    let value = if word.starts_with('-') {
        match word.split_once('=') {
            Some((_, value)) => value,
            None => return Vec::new(),
        }
    } else {
        word
    };
    value
        .split("..")
        .filter_map(|part| {
            let part = part.trim_start_matches(['.', '^']);
            let end = part.find(['^', '~', ':', '@']).unwrap_or(part.len());
            let hex = &part[..end];
            ((7..=40).contains(&hex.len()) && hex.chars().all(|c| c.is_ascii_hexdigit()))
                .then(|| hex.to_ascii_lowercase())
        })
        .collect()
}

/// The GitHub CLI's subcommands that read a repository's code, pull
/// requests or releases.
fn gh(args: &[String], found: &mut Found) {
    const READS: &[&str] = &[
        "api", "pr", "repo", "release", "issue", "search", "gist", "browse",
    ];
    if let Some(sub) = args.first().filter(|s| READS.contains(&s.as_str())) {
        found.add(ProbeKind::Download, format!("gh {sub}"));
    }
}

fn download(program: &str, args: &[String], found: &mut Found) {
    for arg in args {
        let value = match arg.strip_prefix("--url=") {
            Some(url) => url,
            None if arg.starts_with('-') => continue,
            None => arg.as_str(),
        };
        if let Some(host) = forge_host(value) {
            found.add(ProbeKind::Download, format!("{program} {host}"));
        }
    }
}

/// The host of a URL-like word when it is a forge's or PyPI's.
fn forge_host(word: &str) -> Option<&str> {
    let rest = match word.split_once("://") {
        Some((_, rest)) => rest,
        // `curl github.com/x`: no scheme, a host with a dot.
        None if !word.contains(char::is_whitespace) => word,
        None => return None,
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or(authority);
    let host = host.split(':').next().unwrap_or(host);
    let lower = host.to_ascii_lowercase();
    FORGES
        .iter()
        .any(|forge| lower == *forge || lower.ends_with(&format!(".{forge}")))
        .then_some(host)
}

/// `pip install|download|wheel` of the package under test, or of anything
/// from a forge. An editable or local install (`-e .`, `.`, a path), a
/// requirements file and other packages are not probes.
fn pip(args: &[String], subject: &Subject, found: &mut Found) {
    // pip's options that take a value, before or after the subcommand.
    const VALUES: &[&str] = &[
        "-r",
        "--requirement",
        "-c",
        "--constraint",
        "-t",
        "--target",
        "-i",
        "--index-url",
        "--extra-index-url",
        "-f",
        "--find-links",
        "--prefix",
        "--root",
        "--src",
        "-d",
        "--dest",
        "--python",
        "--python-version",
        "--platform",
        "--implementation",
        "--abi",
        "--only-binary",
        "--no-binary",
        "--upgrade-strategy",
        "--progress-bar",
        "--trusted-host",
        "--cache-dir",
        "--log",
        "--timeout",
        "--retries",
        "--proxy",
        "--report",
        "-C",
        "--config-settings",
        "--global-option",
    ];
    let mut i = 0;
    let mut sub = None;
    let mut editable = false;
    while i < args.len() {
        let word = args[i].as_str();
        i += 1;
        if VALUES.contains(&word) {
            i += 1;
            continue;
        }
        if word == "-e" || word == "--editable" {
            editable = true;
            continue;
        }
        if word.starts_with('-') {
            // `--editable=URL`
            if let Some(url) = word.strip_prefix("--editable=")
                && let Some(host) = forge_host(url)
                && sub.is_some()
            {
                found.add(ProbeKind::Download, format!("pip install from {host}"));
            }
            continue;
        }
        let Some(action) = sub else {
            sub = Some(word);
            if !matches!(word, "install" | "download" | "wheel") {
                return;
            }
            continue;
        };
        let was_editable = std::mem::take(&mut editable);
        if word.contains("://") || word.starts_with("git+") {
            if let Some(host) = forge_host(word.trim_start_matches("git+")) {
                found.add(ProbeKind::Download, format!("pip {action} from {host}"));
            }
            continue;
        }
        if was_editable
            || word.starts_with(['.', '/', '~'])
            || word.contains('/')
            || word.ends_with(".whl")
            || word.ends_with(".tar.gz")
            || word.ends_with(".zip")
        {
            continue;
        }
        let name = word
            .split(['[', '<', '>', '=', '!', '~', ';', '@', ' '])
            .next()
            .unwrap_or(word);
        if subject
            .package
            .as_deref()
            .is_some_and(|package| normalize_package(name) == package)
        {
            found.add(ProbeKind::Download, format!("pip {action} {name}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revision_words_give_their_hexes() {
        assert_eq!(revision_hexes("abc1234"), vec!["abc1234"]);
        assert_eq!(revision_hexes("ABC1234^"), vec!["abc1234"]);
        assert_eq!(revision_hexes("abc1234~2:src/x.py"), vec!["abc1234"]);
        assert_eq!(
            revision_hexes("a1b2c3d..e4f5a6b7"),
            vec!["a1b2c3d", "e4f5a6b7"]
        );
        assert_eq!(
            revision_hexes("a1b2c3d...e4f5a6b"),
            vec!["a1b2c3d", "e4f5a6b"]
        );
        assert_eq!(revision_hexes("^abc1234"), vec!["abc1234"]);
        assert_eq!(revision_hexes("--source=abc1234"), vec!["abc1234"]);
        for none in [
            "HEAD",
            "abc123",
            "main",
            "-5",
            "--oneline",
            "deadbeefx",
            "HEAD~3",
        ] {
            assert!(revision_hexes(none).is_empty(), "{none}");
        }
        assert!(revision_hexes(&"a".repeat(41)).is_empty());
    }

    #[test]
    fn forge_hosts_are_found_in_urls() {
        assert_eq!(
            forge_host("https://raw.githubusercontent.com/o/r/main/x.py"),
            Some("raw.githubusercontent.com")
        );
        assert_eq!(
            forge_host("https://user@GitHub.com:443/o/r"),
            Some("GitHub.com")
        );
        assert_eq!(forge_host("github.com/o/r"), Some("github.com"));
        assert_eq!(
            forge_host("https://files.pythonhosted.org/p.tar.gz"),
            Some("files.pythonhosted.org")
        );
        assert_eq!(forge_host("http://localhost:8000/"), None);
        assert_eq!(forge_host("https://notgithub.com/"), None);
        assert_eq!(forge_host("https://example.com/github.com"), None);
    }

    #[test]
    fn package_names_are_normalized() {
        assert_eq!(normalize_package("Scikit_Learn"), "scikit-learn");
        assert_eq!(normalize_package("zope.interface"), "zope-interface");
        assert_eq!(normalize_package("a--_b"), "a-b");
    }
}
