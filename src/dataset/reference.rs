//! What names a dataset on the command line: `hf:OWNER/NAME[@REVISION][:SPLIT]`
//! ([`DatasetRef`]), or a short name ([`Alias`], the list given by the
//! caller: the benchmarks declare theirs) with the same optional
//! `@REVISION` and `:SPLIT`.
//!
//! Owns telling a reference from a path and checking its form; it asks
//! nothing of the Hub (whether the dataset, revision or split exists is
//! `open`'s to find out).

use std::fmt;
use std::path::Path;

use crate::dataset::error::{BadForm, DatasetError, MAX_NAME};

/// The prefix that makes a task source a Hub dataset whatever files exist.
const PREFIX: &str = "hf:";

/// A short name for a dataset: its repo and usual split. The names are
/// the benchmarks' (`task/`, which declares them), passed to
/// [`DatasetRef::parse`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Alias {
    pub(crate) name: &'static str,
    /// `OWNER/NAME` on the Hub.
    pub(crate) repo: &'static str,
    /// The split read when the reference names none.
    pub(crate) split: &'static str,
    /// The image template of its rows when `--image` gives none.
    pub(crate) image: Option<&'static str>,
    /// One line for `--help` and error hints.
    pub(crate) about: &'static str,
}

/// A dataset on the Hub, by reference: the repo, the revision asked for
/// (`None`: `main`) and the split (`None`: the dataset's only split, else
/// `test`; `open` decides).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DatasetRef {
    /// `OWNER/NAME`.
    pub(crate) repo: String,
    pub(crate) revision: Option<String>,
    pub(crate) split: Option<String>,
    /// The short name it was given by, if any.
    pub(crate) alias: Option<&'static Alias>,
}

impl DatasetRef {
    /// `None`: `raw` is not a dataset reference (a path). A short name
    /// counts only when no file or folder of that name exists, so a task
    /// file that happens to be called `swe-bench-lite` is still read;
    /// `hf:` always counts. An error for a reference of a bad form.
    /// `aliases` are the short names known; the first is the example of
    /// the error's hint.
    pub(crate) fn parse(
        raw: &str,
        aliases: &[&'static Alias],
    ) -> Option<Result<DatasetRef, DatasetError>> {
        DatasetRef::parse_with(raw, aliases, |path| path.exists())
    }

    /// [`DatasetRef::parse`] with the question "does this file exist"
    /// asked of `exists` (tests answer it without touching the working
    /// folder).
    fn parse_with(
        raw: &str,
        aliases: &[&'static Alias],
        exists: impl Fn(&Path) -> bool,
    ) -> Option<Result<DatasetRef, DatasetError>> {
        let bad = |why: BadForm| DatasetError::BadReference {
            raw: raw.to_owned(),
            why,
            example: aliases.first().map_or_else(
                || "hf:OWNER/NAME@main:test".to_owned(),
                |a| format!("{PREFIX}{}@main:{}", a.repo, a.split),
            ),
        };
        if let Some(rest) = raw.strip_prefix(PREFIX) {
            return Some(parse_hf(rest).map_err(bad));
        }
        let name_end = raw.find(['@', ':']).unwrap_or(raw.len());
        let alias = *aliases.iter().find(|a| a.name == &raw[..name_end])?;
        if exists(Path::new(raw)) {
            return None;
        }
        Some(
            parse_tail(&raw[name_end..])
                .map(|(revision, split)| DatasetRef {
                    repo: alias.repo.to_owned(),
                    revision,
                    split: split.or_else(|| Some(alias.split.to_owned())),
                    alias: Some(alias),
                })
                .map_err(bad),
        )
    }

    /// The revision asked for, `main` when none was.
    pub(crate) fn revision_or_main(&self) -> &str {
        self.revision.as_deref().unwrap_or("main")
    }
}

impl fmt::Display for DatasetRef {
    /// The `hf:` form, whatever the reference was given as: the form that
    /// reads back to the same dataset.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{}", self.repo)?;
        if let Some(revision) = &self.revision {
            write!(f, "@{revision}")?;
        }
        if let Some(split) = &self.split {
            write!(f, ":{split}")?;
        }
        Ok(())
    }
}

/// The reference after `hf:`, or why it is of a bad form.
fn parse_hf(rest: &str) -> Result<DatasetRef, BadForm> {
    let repo_end = rest.find(['@', ':']).unwrap_or(rest.len());
    let repo = &rest[..repo_end];
    check_repo(repo)?;
    let (revision, split) = parse_tail(&rest[repo_end..])?;
    Ok(DatasetRef {
        repo: repo.to_owned(),
        revision,
        split,
        alias: None,
    })
}

/// `[@REVISION][:SPLIT]`. A revision may hold `/` (`refs/convert/parquet`,
/// `refs/pr/1`) but never `:`, which git refuses in ref names; so the first
/// `:` starts the split.
fn parse_tail(tail: &str) -> Result<(Option<String>, Option<String>), BadForm> {
    let (before, split) = match tail.split_once(':') {
        Some((before, split)) => (before, Some(split)),
        None => (tail, None),
    };
    let revision = match before.strip_prefix('@') {
        Some(revision) => {
            check_revision(revision)?;
            Some(revision.to_owned())
        }
        None if before.is_empty() => None,
        None => return Err(BadForm::AfterName),
    };
    if let Some(split) = split {
        check_split(split)?;
    }
    Ok((revision, split.map(str::to_owned)))
}

/// The Hub's rules for a repo id (huggingface_hub's `validate_repo_id`):
/// one `/`, each side of letters, digits, `-`, `_` and `.`, neither
/// starting nor ending with `-` or `.`, no `--` or `..`.
fn check_repo(repo: &str) -> Result<(), BadForm> {
    let Some((owner, name)) = repo.split_once('/') else {
        return Err(BadForm::NotOwnerName(repo.to_owned()));
    };
    if name.contains('/') {
        return Err(BadForm::Slashes(repo.to_owned()));
    }
    for (what, part) in [("owner", owner), ("name", name)] {
        let repo = repo.to_owned();
        if part.is_empty() {
            return Err(BadForm::EmptyPart { what, repo });
        }
        if part.len() > MAX_NAME {
            return Err(BadForm::LongPart { what, repo });
        }
        if let Some(c) = part
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        {
            return Err(BadForm::RepoChar { what, repo, c });
        }
        let edge = |c: char| matches!(c, '-' | '.');
        if part.starts_with(edge)
            || part.ends_with(edge)
            || part.contains("--")
            || part.contains("..")
        {
            return Err(BadForm::Edge { what, repo });
        }
    }
    Ok(())
}

/// A branch, tag or commit: git's ref name rules, loosely (what would
/// make a bad URL or path is refused here rather than by the Hub).
fn check_revision(revision: &str) -> Result<(), BadForm> {
    if revision.is_empty() {
        return Err(BadForm::EmptyRevision);
    }
    let bad_char = revision.chars().find(|c| {
        c.is_whitespace() || c.is_control() || matches!(c, '~' | '^' | '?' | '*' | '[' | '\\')
    });
    if let Some(c) = bad_char {
        return Err(BadForm::RevisionChar {
            revision: revision.to_owned(),
            c,
        });
    }
    if revision.contains("..")
        || revision.contains("//")
        || revision.starts_with('/')
        || revision.ends_with('/')
        || revision.ends_with(".lock")
    {
        return Err(BadForm::NotARef(revision.to_owned()));
    }
    Ok(())
}

/// A split name: letters, digits, `_`, `-` and `.` (the `datasets`
/// library's own rule is `\w+(\.\w+)*`; a `-` is allowed as Hub file names
/// carry it).
fn check_split(split: &str) -> Result<(), BadForm> {
    if split.is_empty() {
        return Err(BadForm::EmptySplit);
    }
    if let Some(c) = split
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        return Err(BadForm::SplitChar {
            split: split.to_owned(),
            c,
        });
    }
    Ok(())
}

/// Whether `revision` is a full commit sha (40 lowercase hex digits), the
/// one kind of revision that can never move.
pub(crate) fn is_commit_sha(revision: &str) -> bool {
    revision.len() == 40
        && revision
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Two short names, as a benchmark declares them.
    pub(crate) const ALIASES: &[Alias] = &[
        Alias {
            name: "swe-bench-lite",
            repo: "SWE-bench/SWE-bench_Lite",
            split: "test",
            image: Some("img"),
            about: "Lite",
        },
        Alias {
            name: "swe-bench",
            repo: "SWE-bench/SWE-bench",
            split: "test",
            image: None,
            about: "Full",
        },
    ];

    pub(crate) fn aliases() -> Vec<&'static Alias> {
        ALIASES.iter().collect()
    }

    fn parse(raw: &str) -> Option<Result<DatasetRef, DatasetError>> {
        DatasetRef::parse(raw, &aliases())
    }

    fn parsed(raw: &str) -> DatasetRef {
        match parse(raw) {
            Some(Ok(reference)) => reference,
            other => panic!("{raw}: {other:?}"),
        }
    }

    #[test]
    fn every_form_of_an_hf_reference_reads_back_as_written() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        let cases: &[(&str, &str, Option<&str>, Option<&str>)] = &[
            ("hf:o/n", "o/n", None, None),
            (
                "hf:SWE-bench/SWE-bench_Lite:test",
                "SWE-bench/SWE-bench_Lite",
                None,
                Some("test"),
            ),
            ("hf:o/n@v1.0", "o/n", Some("v1.0"), None),
            (
                "hf:o/n@refs/convert/parquet:dev",
                "o/n",
                Some("refs/convert/parquet"),
                Some("dev"),
            ),
            (
                "hf:o.x/n_y-z@main:train.clean",
                "o.x/n_y-z",
                Some("main"),
                Some("train.clean"),
            ),
        ];
        for &(raw, repo, revision, split) in cases {
            let reference = parsed(raw);
            assert_eq!(reference.repo, repo, "{raw}");
            assert_eq!(reference.revision.as_deref(), revision, "{raw}");
            assert_eq!(reference.split.as_deref(), split, "{raw}");
            assert_eq!(reference.alias, None, "{raw}");
            assert_eq!(reference.to_string(), raw);
        }
        let pinned = parsed(&format!("hf:o/n@{sha}:test"));
        assert!(is_commit_sha(pinned.revision_or_main()));
        assert_eq!(parsed("hf:o/n").revision_or_main(), "main");
    }

    #[test]
    fn a_reference_of_a_bad_form_is_an_error_that_says_what_is_wrong() {
        let cases = [
            ("hf:", "not OWNER/NAME"),
            ("hf:name", "not OWNER/NAME"),
            ("hf:/n", "owner in `/n` is empty"),
            ("hf:o/", "name in `o/` is empty"),
            ("hf:o/n/x", "more than one `/`"),
            ("hf:o/n x", "has ` `"),
            ("hf:o/n--x", "has `--`"),
            ("hf:o/-n", "starts or ends"),
            ("hf:o/n@", "revision after `@` is empty"),
            ("hf:o/n@:test", "revision after `@` is empty"),
            ("hf:o/n:", "split after `:` is empty"),
            ("hf:o/n@a b", "has ` `"),
            ("hf:o/n@a..b", "not a branch"),
            ("hf:o/n:te/st", "has `/`"),
            ("hf:o/n:a:b", "has `:`"),
        ];
        for (raw, want) in cases {
            match parse(raw) {
                Some(Err(err)) => {
                    let text = err.to_string();
                    assert!(text.contains(want), "{raw}: {text}");
                    assert!(text.contains(raw), "{raw}: {text}");
                    assert!(
                        text.ends_with("e.g. hf:SWE-bench/SWE-bench_Lite@main:test"),
                        "{raw}: {text}"
                    );
                }
                other => panic!("{raw}: {other:?}"),
            }
        }
    }

    #[test]
    fn an_alias_names_its_repo_and_split_unless_told_otherwise() {
        let lite = parsed("swe-bench-lite");
        assert_eq!(lite.repo, "SWE-bench/SWE-bench_Lite");
        assert_eq!(lite.split.as_deref(), Some("test"));
        assert_eq!(lite.revision, None);
        assert!(lite.alias.is_some_and(|a| a.image == Some("img")));
        assert_eq!(lite.to_string(), "hf:SWE-bench/SWE-bench_Lite:test");

        let dev = parsed("swe-bench-lite@v2:dev");
        assert_eq!(dev.revision.as_deref(), Some("v2"));
        assert_eq!(dev.split.as_deref(), Some("dev"));
        assert!(matches!(parse("swe-bench-lite@"), Some(Err(_))));
        assert!(parse("swe-bench-lite+x").is_none());
        for alias in ALIASES {
            assert_eq!(parsed(alias.name).repo, alias.repo);
            assert!(check_repo(alias.repo).is_ok(), "{}", alias.repo);
        }
    }

    #[test]
    fn a_path_is_not_a_reference_and_an_existing_file_shadows_an_alias() {
        assert!(parse("tasks.jsonl").is_none());
        assert!(parse("./swe-bench-lite").is_none());
        let exists = |names: &'static [&'static str]| {
            move |path: &Path| names.iter().any(|name| Path::new(name) == path)
        };
        let shadowed = |raw| {
            DatasetRef::parse_with(
                raw,
                &aliases(),
                exists(&["swe-bench-lite", "swe-bench:dev"]),
            )
        };
        assert!(shadowed("swe-bench-lite").is_none());
        assert!(shadowed("swe-bench:dev").is_none());
        assert!(matches!(shadowed("swe-bench-lite:dev"), Some(Ok(_))));
        assert!(matches!(shadowed("swe-bench"), Some(Ok(_))));
        // `hf:` counts even when a file of that name exists.
        let hf = DatasetRef::parse_with("hf:o/n", &aliases(), exists(&["hf:o/n"]));
        assert!(matches!(hf, Some(Ok(_))));
    }
}
