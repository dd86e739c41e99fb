//! The files of a test patch as SWE-bench's eval scripts name them.
//!
//! The package reads a `test_patch` with the `unidiff` package's
//! `PatchSet`: its eval script resets each file's source side
//! (`get_modified_files`), and wp-calypso's test commands are chosen per
//! file path (`get_test_cmds_calypso`). This file mirrors that reading of
//! a diff's headers (git headers, new and deleted files, plain `---`/`+++`
//! pairs, hunks skipped by their line counts) and calypso's commands. It
//! does not apply patches (runner/test_run.rs does) nor build the script
//! (spec.rs does).

use std::sync::OnceLock;

use regex::Regex;

/// unidiff's name of a missing side.
const DEV_NULL: &str = "/dev/null";

/// One file of a patch: its two sides as the headers name them (`a/x`,
/// `b/x`, or `/dev/null`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PatchedFile {
    pub source: String,
    pub target: String,
}

impl PatchedFile {
    /// unidiff's `path`: the source, or the target for a new file or a
    /// rename, less a one-letter prefix (`a/`, `b/`...).
    pub(crate) fn path(&self) -> String {
        let rename = self.source != DEV_NULL
            && self.target != DEV_NULL
            && self.source.get(2..) != self.target.get(2..);
        let path = if self.source == DEV_NULL || rename {
            &self.target
        } else {
            &self.source
        };
        let quoted = path.len() >= 2 && path.starts_with('"') && path.ends_with('"');
        let bare = if quoted {
            &path[1..path.len() - 1]
        } else {
            path.as_str()
        };
        let bytes = bare.as_bytes();
        let bare = if bytes.len() >= 2 && b"abciow12".contains(&bytes[0]) && bytes[1] == b'/' {
            &bare[2..]
        } else {
            bare
        };
        if quoted {
            format!("\"{bare}\"")
        } else {
            bare.to_owned()
        }
    }
}

/// The files of `patch`, in order, as `PatchSet(patch)` lists them. Where
/// unidiff would raise (a `+++` without a `---`, a hunk outside a file),
/// the files read so far.
pub(crate) fn patched_files(patch: &str) -> Vec<PatchedFile> {
    let mut files: Vec<PatchedFile> = Vec::new();
    // Whether the last file is still open (unidiff's `current_file`), and
    // whether its git header block is (its `patch_info`).
    let (mut current, mut in_header) = (false, false);
    let mut pending_source: Option<String> = None;
    let mut lines = patch.split('\n');
    while let Some(line) = lines.next() {
        if let Some((source, target)) = git_header(line) {
            files.push(PatchedFile { source, target });
            (current, in_header) = (true, true);
            continue;
        }
        if current && in_header {
            if line.starts_with("new file mode ") {
                if let Some(file) = files.last_mut() {
                    file.source = DEV_NULL.to_owned();
                }
                continue;
            }
            if line.starts_with("deleted file mode ") {
                if let Some(file) = files.last_mut() {
                    file.target = DEV_NULL.to_owned();
                }
                continue;
            }
        }
        if let Some(name) = line.strip_prefix("--- ") {
            pending_source = Some(file_name(name));
            if current && !in_header {
                current = false;
            }
            continue;
        }
        if let Some(name) = line.strip_prefix("+++ ") {
            if !current {
                let Some(source) = pending_source.take() else {
                    return files;
                };
                files.push(PatchedFile {
                    source,
                    target: file_name(name),
                });
                (current, in_header) = (true, false);
            }
            continue;
        }
        if let Some((mut old, mut new)) = hunk_lengths(line) {
            if !current {
                return files;
            }
            in_header = false;
            // The body is read by the header's counts, so a removed line
            // that reads `--- x` is not a file header.
            while old > 0 || new > 0 {
                let Some(body) = lines.next() else { break };
                match body.chars().next() {
                    Some('-') => old = old.saturating_sub(1),
                    Some('+') => new = new.saturating_sub(1),
                    Some('\\') => {}
                    _ => {
                        old = old.saturating_sub(1);
                        new = new.saturating_sub(1);
                    }
                }
            }
        }
    }
    files
}

/// `get_modified_files`: the source side of every file that has one,
/// without its `a/` (sources without that prefix are left out).
pub(crate) fn modified_files(patch: &str) -> Vec<String> {
    patched_files(patch)
        .into_iter()
        .filter(|f| f.source != DEV_NULL)
        .filter_map(|f| f.source.strip_prefix("a/").map(str::to_owned))
        .collect()
}

/// unidiff's `diff --git (?P<source>"?a/[^\t\n]+"?) (?P<target>"?b/[^\t\n]+"?)`
/// (the source greedy: the split is at the last ` b/`), else its
/// no-prefix form, split at the last space.
fn git_header(line: &str) -> Option<(String, String)> {
    let rest = line.strip_prefix("diff --git ")?;
    let rest = rest.split('\t').next().unwrap_or_default();
    if rest.starts_with("a/") || rest.starts_with("\"a/") {
        let split = [" b/", " \"b/"]
            .iter()
            .filter_map(|sep| {
                let at = rest.rfind(sep)?;
                let source_ok = at > rest.find("a/")? + 2;
                let target = &rest[at + 1..];
                let target_ok = target.trim_start_matches('"').len() > 2;
                (source_ok && target_ok).then_some(at)
            })
            .max();
        if let Some(at) = split {
            return Some((rest[..at].to_owned(), rest[at + 1..].to_owned()));
        }
    }
    let (source, target) = rest.rsplit_once(' ')?;
    (!source.is_empty() && !target.is_empty()).then(|| (source.to_owned(), target.to_owned()))
}

/// The name of a `---`/`+++` line: up to a tab (a timestamp follows it).
fn file_name(rest: &str) -> String {
    rest.split('\t').next().unwrap_or_default().to_owned()
}

/// The old and new line counts of a hunk header `@@ -a,b +c,d @@` (a
/// missing count is 1).
fn hunk_lengths(line: &str) -> Option<(usize, usize)> {
    static HUNK: OnceLock<Regex> = OnceLock::new();
    let hunk = HUNK.get_or_init(|| {
        // A constant pattern: compiles.
        Regex::new(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@").expect("a valid pattern")
    });
    let found = hunk.captures(line)?;
    let count = |i: usize| {
        found
            .get(i)
            .map_or(Some(1), |m| m.as_str().parse::<usize>().ok())
    };
    Some((count(1)?, count(2)?))
}

/// wp-calypso's versions whose jest config is `test/PKG/jest.config.js`,
/// and those whose is `.json`; others run `npm run test-PKG`.
const CALYPSO_JS: [&str; 6] = [
    "10.10.0", "10.12.0", "10.13.0", "10.14.0", "10.15.2", "10.16.3",
];
const CALYPSO_JSON: [&str; 10] = [
    "6.11.5", "8.9.1", "8.9.3", "8.9.4", "8.11.0", "8.11.2", "10.4.1", "10.5.0", "10.6.0", "10.9.0",
];

/// `get_test_cmds_calypso`: per file of the test patch, a jest run of its
/// package (a snapshot file runs the folder above its `__snapshots__`), or
/// the e2e suite's; other files run nothing.
pub(crate) fn calypso_test_commands(version: &str, test_patch: &str) -> Vec<String> {
    static SNAPSHOT: OnceLock<Regex> = OnceLock::new();
    // A constant pattern: compiles.
    let snapshot = SNAPSHOT
        .get_or_init(|| Regex::new(r"__snapshots__/(.*).js.snap$").expect("a valid pattern"));
    let mut commands = Vec::new();
    for file in patched_files(test_patch) {
        let mut path = file.path();
        if snapshot.is_match(&path) {
            let parts: Vec<&str> = path.split('/').collect();
            path = parts[..parts.len().saturating_sub(2)].join("/");
        }
        if path.starts_with("client") || path.starts_with("packages") {
            let package = path.split('/').next().unwrap_or_default();
            if CALYPSO_JS.contains(&version) {
                commands.push(format!(
                    "./node_modules/.bin/jest --verbose -c=test/{package}/jest.config.js '{path}'"
                ));
            } else if CALYPSO_JSON.contains(&version) {
                commands.push(format!(
                    "./node_modules/.bin/jest --verbose -c=test/{package}/jest.config.json '{path}'"
                ));
            } else {
                commands.push(format!("npm run test-{package} --verbose '{path}'"));
            }
        } else if path.starts_with("test/e2e") {
            commands.extend([
                "cd test/e2e".to_owned(),
                format!("NODE_CONFIG_ENV=test npm run test {path}"),
                "cd ../..".to_owned(),
            ]);
        }
    }
    commands
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATCH: &str = "diff --git a/src/x.rs b/src/x.rs\n\
        index 1..2 100644\n--- a/src/x.rs\n+++ b/src/x.rs\n@@ -1,2 +1,2 @@\n \
        keep\n--- a/looks/like/a/header\n+++ b/looks/like/a/header\n\
        diff --git a/tests/new.rs b/tests/new.rs\nnew file mode 100644\n--- /dev/null\n+++ b/tests/new.rs\n@@ -0,0 +1 @@\n+x\n\
        diff --git a/tests/gone.rs b/tests/gone.rs\ndeleted file mode 100644\n--- a/tests/gone.rs\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n";

    #[test]
    fn files_are_read_from_the_headers_not_the_hunks() {
        let files = patched_files(PATCH);
        let pairs: Vec<(&str, &str)> = files
            .iter()
            .map(|f| (f.source.as_str(), f.target.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("a/src/x.rs", "b/src/x.rs"),
                ("/dev/null", "b/tests/new.rs"),
                ("a/tests/gone.rs", "/dev/null"),
            ]
        );
        assert_eq!(modified_files(PATCH), ["src/x.rs", "tests/gone.rs"]);
        let paths: Vec<String> = files.iter().map(PatchedFile::path).collect();
        assert_eq!(paths, ["src/x.rs", "tests/new.rs", "tests/gone.rs"]);
    }

    #[test]
    fn plain_diffs_and_odd_headers() {
        let plain = "--- a/t.go\t2024-01-01\n+++ b/t.go\n@@ -1 +1 @@\n-a\n+b\n";
        assert_eq!(modified_files(plain), ["t.go"]);
        // The source is greedy: the split is at the last ` b/`.
        assert_eq!(
            git_header("diff --git a/x b/y b/x b/y"),
            Some(("a/x b/y b/x".to_owned(), "b/y".to_owned()))
        );
        assert_eq!(
            git_header("diff --git x y"),
            Some(("x".to_owned(), "y".to_owned()))
        );
        // A rename's path is its target.
        let renamed = PatchedFile {
            source: "a/old.js".to_owned(),
            target: "b/new.js".to_owned(),
        };
        assert_eq!(renamed.path(), "new.js");
        assert!(modified_files("+++ b/orphan\n").is_empty());
    }

    #[test]
    fn calypso_runs_jest_per_package_and_the_e2e_suite() {
        let patch = "diff --git a/client/state/test/index.js b/client/state/test/index.js\n\
            diff --git a/packages/ui/src/__snapshots__/x.js.snap b/packages/ui/src/__snapshots__/x.js.snap\n\
            diff --git a/test/e2e/specs/a.js b/test/e2e/specs/a.js\n\
            diff --git a/README.md b/README.md\n";
        assert_eq!(
            calypso_test_commands("10.12.0", patch),
            [
                "./node_modules/.bin/jest --verbose -c=test/client/jest.config.js 'client/state/test/index.js'",
                "./node_modules/.bin/jest --verbose -c=test/packages/jest.config.js 'packages/ui/src'",
                "cd test/e2e",
                "NODE_CONFIG_ENV=test npm run test test/e2e/specs/a.js",
                "cd ../..",
            ]
        );
        assert_eq!(
            calypso_test_commands("8.9.1", patch)[0],
            "./node_modules/.bin/jest --verbose -c=test/client/jest.config.json 'client/state/test/index.js'"
        );
        assert_eq!(
            calypso_test_commands("4.2.3", patch)[0],
            "npm run test-client --verbose 'client/state/test/index.js'"
        );
    }
}
