//! What can go wrong in the checkout stage: a checkout ([`CheckoutError`],
//! naming the repo and commit), a base's object store that cannot be
//! built, fixed or linked ([`StoreError`], naming the file, the pack or the
//! mirror), what a new working copy was found to hold past its base
//! ([`Leak`]), a thin pack's bytes that git did not write ([`PackFault`]),
//! and a git operation on a working copy ([`GitError`]). Texts read after
//! "failed to"; the runner writes them into the row with `to_string()`.

use std::path::PathBuf;

use git2::Oid;

use crate::sys::exec::ToolError;

/// Why a checkout failed. The message names the repo and commit.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CheckoutError {
    #[error("failed to check out {repo}@{rev}: the fetch failed: {}", source.message())]
    Fetch {
        repo: String,
        rev: String,
        source: git2::Error,
    },
    /// The repo is a path on this machine and nothing is there: libgit2
    /// would take the path for a URL it cannot read.
    #[error("failed to check out {repo}@{rev}: repo path {} does not exist", path.display())]
    NoRepoPath {
        repo: String,
        rev: String,
        path: PathBuf,
    },
    #[error(
        "failed to check out {repo}@{rev}: no such commit in the repo ({})",
        source.message()
    )]
    Resolve {
        repo: String,
        rev: String,
        source: git2::Error,
    },
    /// A working copy in an image's repo or an image's root (env/'s
    /// checks, in their words).
    #[error("failed to check out {repo}@{rev}: {message}")]
    WorkingCopy {
        repo: String,
        rev: String,
        message: String,
    },
    /// The base's store could not be built (or found).
    #[error("failed to check out {repo}@{rev}: cannot store the base's objects: {source}")]
    Store {
        repo: String,
        rev: String,
        source: Box<StoreError>,
    },
    /// A stored pack could not be fixed or linked into the working copy.
    #[error("failed to check out {repo}@{rev}: cannot use the base's store: {source}")]
    UseStore {
        repo: String,
        rev: String,
        source: Box<StoreError>,
    },
    /// The working copy itself could not be made.
    #[error("failed to check out {repo}@{rev}: {source}")]
    Make {
        repo: String,
        rev: String,
        source: Box<StoreError>,
    },
    #[error(
        "failed to check out {repo}@{rev}: the working copy failed its check for objects past the base: {message}"
    )]
    Leaking {
        repo: String,
        rev: String,
        message: String,
    },
    /// A new working copy that failed its check ([`Leak`]), or could not
    /// be checked.
    #[error(
        "failed to check out {repo}@{rev}: the working copy failed its check for objects past the base: {source}"
    )]
    StoreCheck {
        repo: String,
        rev: String,
        source: Box<StoreError>,
    },
    #[error("failed to check out {repo}@{rev}: the {doing} thread failed: {source}")]
    Thread {
        repo: String,
        rev: String,
        doing: &'static str,
        source: tokio::task::JoinError,
    },
    /// The commit has no folder at the path asked for.
    #[error("failed to check out {repo}@{rev}: it has no folder {path}")]
    NoFolder {
        repo: String,
        rev: String,
        path: String,
    },
    /// The folder could not be read out of the mirror.
    #[error("failed to check out {repo}@{rev}: cannot read its files: {}", source.message())]
    Export {
        repo: String,
        rev: String,
        source: git2::Error,
    },
    #[error("failed to use the repo cache at {}: {source}", path.display())]
    Cache {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A git operation on a working copy failed (diff, restore, apply): on the
/// host with libgit2, or in a container on the repo an image holds. Each
/// keeps the error it wraps as its source.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// libgit2 on the working copy; the text is libgit2's message alone.
    #[error("{}", .0.message())]
    Git(#[from] git2::Error),
    /// A file of the working copy.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the patch cannot be parsed: {}", .0.message())]
    Parse(#[source] git2::Error),
    #[error("the patch does not apply: {}", .0.message())]
    Apply(#[source] git2::Error),
    /// The blocking thread the operation ran on panicked or was cancelled.
    #[error("the git thread failed: {0}")]
    Thread(#[source] tokio::task::JoinError),
    /// A workspace whose task has no repo (a task that brings its own
    /// image and tests): `why` is its benchmark's sentence.
    #[error("{why}")]
    NoRepo { why: &'static str },
    /// `git diff` in the container failed. The source is the environment's
    /// error, boxed: the environment sits above the checkout stage.
    #[error("git diff in the container failed: {0}")]
    ContainerDiff(#[source] ContainerFault),
    /// The diff could not be copied out of the container.
    #[error("{0}")]
    ContainerRead(#[source] ContainerFault),
    #[error("restoring files in the container failed: {0}")]
    ContainerRestore(#[source] ContainerFault),
    #[error("failed to copy the patch in: {0}")]
    ContainerCopyIn(#[source] ContainerFault),
    #[error("the patch does not apply: {0}")]
    ContainerApply(#[source] ContainerFault),
}

/// The environment's error behind a git operation in a container, boxed so
/// that this stage need not name the environment's type.
pub(crate) type ContainerFault = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a base's object store could not be built, fixed or used, or a
/// working copy made over it. Each names the file, pack or repository.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    /// A file or folder of the stores, the run's fixed packs or a working
    /// copy: `action` is the verb (`read`, `make`, `move`...).
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot move {} into the store: {source}", path.display())]
    IntoStore {
        path: PathBuf,
        source: std::io::Error,
    },
    /// libgit2 on a repository (the mirror, or a working copy): `doing`
    /// says what it was asked, `repo` is its git folder.
    #[error("cannot {doing} in {}: {}", repo.display(), source.message())]
    Git {
        doing: String,
        repo: PathBuf,
        source: git2::Error,
    },
    #[error("failed to pack the base's objects from {}: {source}{GIT_HINT}", mirror.display())]
    Pack { mirror: PathBuf, source: ToolError },
    #[error("failed to index the fixed pack {name}: {source}{GIT_HINT}")]
    Index { name: String, source: ToolError },
    #[error("failed to fix the thin pack {name}: {source}{GIT_HINT}")]
    FixThin { name: String, source: ToolError },
    /// `git pack-objects` or `git index-pack` printed something else.
    #[error("git {command} printed {printed:?}, not a pack name")]
    NoPackName {
        command: &'static str,
        printed: String,
    },
    #[error("git pack-objects wrote no pack")]
    NoPack,
    #[error("the packing thread failed")]
    PackingThread,
    #[error("{} is not a version-2 pack index, or is damaged", path.display())]
    BadIndex { path: PathBuf },
    #[error("{} is not a version-2 pack", path.display())]
    BadPack { path: PathBuf },
    #[error("{}: not a thin pack git wrote: {source}", path.display())]
    NotThin { path: PathBuf, source: PackFault },
    #[error("{} would hold too many objects", path.display())]
    TooMany { path: PathBuf },
    #[error("cannot fix {} into {}: {source}", thin.display(), out.display())]
    Fix {
        thin: PathBuf,
        out: PathBuf,
        source: std::io::Error,
    },
    /// A fix of a stored thin pack that gave another count than the store's.
    #[error("the thin pack {name} fixed holds {found} objects where its store says {entries}")]
    FixedCount {
        name: String,
        found: u64,
        entries: u64,
    },
    /// The fix made when the store is built, against the thin pack's own.
    #[error(
        "the thin pack {name} fixed holds {entries} objects where it has {thin} and names {bases} bases"
    )]
    BuiltCount {
        name: String,
        entries: u64,
        thin: u32,
        bases: usize,
    },
    #[error(
        "the stored packs hold {found} objects where the manifest says {manifest}; delete {} to build them again",
        root.display()
    )]
    ChainCount {
        found: usize,
        manifest: u64,
        root: PathBuf,
    },
    #[error("the new pack {name} holds {object}, which the base does not reach")]
    Stray { name: String, object: Oid },
    #[error("the new pack {name} lacks {object}, which the base reaches")]
    Missing { name: String, object: Oid },
    /// What the check of a new working copy found past its base.
    #[error(transparent)]
    Leak(#[from] Leak),
}

impl StoreError {
    /// `Io` of `path`, for `map_err`.
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| StoreError::Io {
            action,
            path,
            source,
        }
    }

    /// `Git` in the repository `repo`, for `map_err`.
    pub(crate) fn git(
        doing: impl Into<String>,
        repo: &git2::Repository,
    ) -> impl FnOnce(git2::Error) -> Self {
        let (doing, repo) = (doing.into(), repo.path().to_owned());
        move |source| StoreError::Git {
            doing,
            repo,
            source,
        }
    }
}

pub(crate) const GIT_HINT: &str =
    "\nhint: onebash needs git on PATH to build a base's object store";

/// What a new working copy holds that its store has not: it is never used.
#[derive(Debug, PartialEq, thiserror::Error)]
pub(crate) enum Leak {
    /// A file of `.git`, by its path there.
    #[error("it has .git/{}", .0.display())]
    File(PathBuf),
    #[error("it has the ref {0}")]
    Ref(String),
    #[error("its config names a remote ({0})")]
    Remote(String),
    #[error("the reflog of HEAD names {0}")]
    Reflog(Oid),
    #[error("HEAD is not {0} alone")]
    Head(Oid),
    #[error(
        "its packs list {entries} objects where its base's store has {store} (the {objects} objects its base reaches)"
    )]
    Entries {
        entries: u64,
        store: u64,
        objects: u64,
    },
    #[error("it has .git/objects/{} (a loose object, or not git's)", .0.display())]
    Loose(PathBuf),
    #[error("it has .git/objects/pack/{}, which its store has not", .0.display())]
    Pack(PathBuf),
    #[error("it has {packs} packs and {indexes} indexes where its store has {wanted}")]
    PackCount {
        packs: usize,
        indexes: usize,
        wanted: usize,
    },
}

/// Why the bytes of a thin pack are not a thin pack git wrote: the part
/// that is wrong.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PackFault {
    #[error("no version-2 header")]
    Header,
    #[error("an entry past the end")]
    EntryPastEnd,
    #[error("a size past the end")]
    SizePastEnd,
    #[error("an offset past the end")]
    OffsetPastEnd,
    #[error("a base id past the end")]
    BaseIdPastEnd,
    #[error("an entry of type {0}")]
    EntryType(u8),
    #[error("a damaged entry ({0})")]
    Damaged(flate2::DecompressError),
    #[error("an entry cut short")]
    CutShort,
    #[error("bytes after its last entry")]
    Trailing,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The row's error keeps its words (tests and docs match them), and a
    /// store's error now ends with the file it concerns.
    #[test]
    fn checkout_messages_keep_their_words_and_name_the_file() {
        let (repo, rev) = ("/src/r".to_owned(), "abc".to_owned());
        let store = CheckoutError::Store {
            repo: repo.clone(),
            rev: rev.clone(),
            source: Box::new(StoreError::Io {
                action: "make",
                path: PathBuf::from("/cache/stores/r/tmp/build"),
                source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
            }),
        };
        assert!(
            store.to_string().starts_with(
                "failed to check out /src/r@abc: cannot store the base's objects: cannot make /cache/stores/r/tmp/build: "
            ),
            "{store}"
        );
        let leak = CheckoutError::StoreCheck {
            repo,
            rev,
            source: Box::new(
                Leak::Entries {
                    entries: 5,
                    store: 4,
                    objects: 4,
                }
                .into(),
            ),
        };
        assert_eq!(
            leak.to_string(),
            "failed to check out /src/r@abc: the working copy failed its check for objects past the base: its packs list 5 objects where its base's store has 4 (the 4 objects its base reaches)"
        );
    }
}
