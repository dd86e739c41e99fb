//! What a probe is ([`ProbeKind`], [`Probe`]), what it probes
//! ([`Subject`]: the task's repo and package), and the package names'
//! normal form the rules compare by.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// What a command did to learn the project's history or future.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ProbeKind {
    /// Listed every ref or the commits of every ref: `git log --all`,
    /// `--branches`, `--tags`, `--remotes`, `for-each-ref`, `show-ref`,
    /// `branch -a`, reading `.git/refs` or `.git/packed-refs`.
    AllRefs,
    /// Read a reflog: `git reflog`, `git log -g`, `.git/logs`.
    Reflog,
    /// Looked for unreachable objects: `git fsck`.
    Unreachable,
    /// Read the object store or the repo cache directly: `git cat-file
    /// --batch-all-objects`, `verify-pack`, `.git/objects`,
    /// `objects/info/alternates`, the cache's path.
    ObjectStore,
    /// Named a commit that the mirror holds and that is not the base or
    /// one of its ancestors.
    ForeignCommit,
    /// `git fetch`, `pull`, `clone`, `ls-remote`, `remote add|set-url|update`.
    GitFetch,
    /// Downloaded from a forge or PyPI, or pip-installed the package
    /// under test.
    Download,
}

impl ProbeKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ProbeKind::AllRefs => "all_refs",
            ProbeKind::Reflog => "reflog",
            ProbeKind::Unreachable => "unreachable",
            ProbeKind::ObjectStore => "object_store",
            ProbeKind::ForeignCommit => "foreign_commit",
            ProbeKind::GitFetch => "git_fetch",
            ProbeKind::Download => "download",
        }
    }
}

/// One match: its kind and a short reason a reader recognizes
/// (`git log --all`, `git show 1a2b3c4: not in the base's history`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Probe {
    pub kind: ProbeKind,
    pub reason: String,
}

/// What the rules need to know of the task.
#[derive(Debug, Clone, Default)]
pub(crate) struct Subject {
    /// The package under test as PyPI knows it (normalized): the repo's
    /// name, which is the package's for every SWE-bench repo.
    pub package: Option<String>,
    /// The cache's folder of mirrors, as a path (and as `~/...` when it
    /// is under `$HOME`): a word naming it, or something in it, reaches
    /// every repo's full history.
    pub mirrors_folder: Vec<String>,
    /// The task's mirror's folder name (`django-0123abcd.git`): distinctive
    /// enough to be looked for anywhere in a word, relative paths included.
    pub mirror_name: Option<String>,
}

impl Subject {
    /// The subject of a task on `repo` (as in the task file, or a URL),
    /// whose mirror is `mirror` in the cache's folder of mirrors. Only the
    /// mirrors' folder counts, not the whole cache: a run folder someone
    /// put in the cache must not make every path of the checkout a probe.
    pub(crate) fn new(repo: &str, mirror: &Path, home: Option<&Path>) -> Subject {
        let trimmed = repo.trim_end_matches('/');
        let trimmed = trimmed.strip_suffix(".git").unwrap_or(trimmed);
        let name = trimmed.rsplit(['/', ':', '\\']).next().unwrap_or("");
        let mut mirrors_folder = Vec::new();
        if let Some(folder) = mirror.parent().filter(|f| f.components().count() > 1) {
            mirrors_folder.push(folder.display().to_string());
            if let Some(rest) = home.and_then(|home| folder.strip_prefix(home).ok()) {
                mirrors_folder.push(format!("~/{}", rest.display()));
            }
        }
        Subject {
            package: (!name.is_empty()).then(|| normalize_package(name)),
            mirrors_folder,
            mirror_name: mirror
                .file_name()
                .map(|name| name.to_string_lossy().into_owned()),
        }
    }
}

/// PEP 503's normal form of a package name: lower case, runs of `-`, `_`
/// and `.` as one `-`.
pub(crate) fn normalize_package(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.trim().chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}
