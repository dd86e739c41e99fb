//! Stage 2: the repo cache and each task's working copy, with git2.
//!
//! Owns the bare mirrors in the cache folder (one per repo, fetched at most
//! once per run, guarded by a file lock so two onebash processes can share the
//! cache) and the per-task working copy: a fresh repository whose objects are
//! the base's exact object store ([`store`]: packs hard-linked from the
//! cache, nothing past the base, no path back to the mirror), checked before
//! any command runs in it. Also owns the git operations on a working copy
//! that later stages need: the agent's diff, restoring files and applying a
//! patch. It runs no command but `git pack-objects`, to build a store.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use git2::{ApplyLocation, Diff, DiffFormat, DiffOptions, Oid, Repository};

use crate::sys::lock::FileLock;
use sha2::{Digest, Sha256};

use super::error::{CheckoutError, GitError, StoreError};
use super::store;
use super::store::{BaseStore, FixedPacks, History, StoreDir, StoredPack, Verified};

/// The shared cache of bare mirrors. One per run; cheap to share with `Arc`.
pub(crate) struct RepoCache {
    root: PathBuf,
    /// Per repo location: whether this run fetched it already. The async mutex
    /// makes tasks on the same repo wait for one fetch instead of racing.
    repos: Mutex<HashMap<String, Arc<tokio::sync::Mutex<bool>>>>,
    /// Full shas this run found, by (location, sha): immutable, so known
    /// once is known for the run.
    resolved: Mutex<HashMap<(String, String), Oid>>,
    /// How much of each base's past a working copy holds.
    history: History,
    /// This run's base commits (full shas) by repo location: stored oldest
    /// first, so that each base's store chains to its ancestors'.
    planned: HashMap<String, Arc<HashSet<Oid>>>,
    /// The thin packs of stores that this run fixed for its working copies.
    fixed: Arc<FixedPacks>,
}

/// A task's working copy at its base commit.
#[derive(Debug, Clone)]
pub(crate) struct Checkout {
    pub dir: PathBuf,
    /// The full sha `base_commit` resolved to.
    pub commit: String,
    /// The commit the working copy's HEAD is: `commit` itself, or with
    /// `--history none` a parentless commit of its tree; for the repo an
    /// image holds, its last setup commit (or a parentless commit of that
    /// one's tree) when it has any.
    pub head: String,
    /// The commits the repo an image holds had on top of the base, oldest
    /// first, which the agent starts from (SWE-bench's setup commit);
    /// none for onebash's own checkouts.
    pub setup_commits: Vec<String>,
    pub history: History,
    /// What the check of the new working copy found.
    pub verified: Verified,
    /// Whether this checkout fetched from the repo (at most once per repo per run).
    pub fetched: bool,
    /// Set when the mirror could not be refreshed but already held the commit.
    pub warning: Option<String>,
}

impl RepoCache {
    /// A cache at `root`, for a run whose tasks have these (repo location,
    /// base commit) pairs.
    pub(crate) fn new<'a>(
        root: PathBuf,
        history: History,
        bases: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> RepoCache {
        let mut planned: HashMap<String, HashSet<Oid>> = HashMap::new();
        for (location, rev) in bases {
            if is_full_sha(rev)
                && let Ok(oid) = Oid::from_str(rev)
            {
                planned.entry(location.to_owned()).or_default().insert(oid);
            }
        }
        // libgit2 hashes every object it reads again, to check it against
        // its name; git does that in fsck and when receiving objects, not on
        // every read. Without it a checkout takes about a tenth less time.
        git2::opts::strict_hash_verification(false);
        RepoCache {
            root,
            repos: Mutex::new(HashMap::new()),
            resolved: Mutex::new(HashMap::new()),
            history,
            planned: planned
                .into_iter()
                .map(|(location, bases)| (location, Arc::new(bases)))
                .collect(),
            fixed: Arc::default(),
        }
    }

    /// Starts fixing, on a thread of its own at low priority, the thin
    /// packs that the working copies of `bases` (this run's tasks, in the
    /// order they start) link, into `staging` (the run's
    /// [`STAGED_PACKS`] folder): so that a task's checkout finds them fixed
    /// rather than fixing them itself. Only stores built before the run:
    /// a base whose store this run builds is fixed by its first checkout.
    /// Errors are left for that checkout to report.
    pub(crate) fn prepare<'a>(
        &self,
        staging: PathBuf,
        bases: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Preparer {
        let mut seen = HashSet::new();
        let order: Vec<(PathBuf, Oid)> = bases
            .into_iter()
            .filter(|(_, rev)| is_full_sha(rev))
            .filter_map(|(location, rev)| {
                Some((self.mirror_path(location), Oid::from_str(rev).ok()?))
            })
            .filter(|pair| seen.insert(pair.clone()))
            .collect();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (fixed, history, stopped) = (Arc::clone(&self.fixed), self.history, Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("onebash-prepare".to_owned())
            .spawn(move || {
                crate::sys::blocking::lower_priority();
                for (mirror, base) in order {
                    // A mirror this run has yet to make: its first task will.
                    if !mirror.is_dir() {
                        continue;
                    }
                    let stores = StoreDir::for_mirror(&mirror);
                    let Some(store) = stores.find(base, history) else {
                        continue;
                    };
                    for pack in &store.packs {
                        if stopped.load(std::sync::atomic::Ordering::Relaxed) {
                            return;
                        }
                        let _ = fixed.get(&stores, &mirror, pack, &staging);
                    }
                }
            })
            .ok();
        Preparer { stop, thread }
    }

    /// Where the mirror of `location` lives: a readable name plus a hash of
    /// the full location, so two repos with the same name never collide.
    pub(crate) fn mirror_path(&self, location: &str) -> PathBuf {
        mirror_path_in(&self.root, location)
    }

    /// The commit of a full sha this run already found.
    fn found_this_run(&self, location: &str, rev: &str) -> Option<Oid> {
        let resolved = self.resolved.lock().unwrap_or_else(|e| e.into_inner());
        resolved
            .get(&(location.to_owned(), rev.to_owned()))
            .copied()
    }

    /// The commit of a full sha this run already found, or that the mirror
    /// holds, read without any lock (git objects are immutable and new
    /// packs appear by rename, so a concurrent fetch cannot tear a read).
    async fn pinned_in_mirror(&self, location: &str, rev: &str, mirror: &Path) -> Option<Oid> {
        if !is_full_sha(rev) {
            return None;
        }
        if let Some(oid) = self.found_this_run(location, rev) {
            return Some(oid);
        }
        let (mirror, rev_c) = (mirror.to_owned(), rev.to_owned());
        let found = crate::sys::blocking::spawn(move || {
            let repo = Repository::open_bare(&mirror).ok()?;
            let oid = Oid::from_str(&rev_c).ok()?;
            repo.find_commit(oid).ok().map(|_| oid)
        })
        .await
        .ok()
        .flatten()?;
        self.remember(location, rev, found);
        Some(found)
    }

    fn remember(&self, location: &str, rev: &str, commit: Oid) {
        self.resolved
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((location.to_owned(), rev.to_owned()), commit);
    }

    /// Makes sure the mirror holds `rev` (fetching at most once per run) and
    /// creates a working copy of it at `dest`.
    pub(crate) async fn checkout(
        &self,
        location: &str,
        rev: &str,
        dest: &Path,
    ) -> Result<Checkout, CheckoutError> {
        let mirror = self.mirror_path(location);
        let ensured = self.ensure(location, rev, &mirror).await?;
        let (dest_c, commit, history) = (dest.to_owned(), ensured.commit, self.history);
        let planned = self.planned.get(location).cloned().unwrap_or_default();
        let fixed = Arc::clone(&self.fixed);
        let made = crate::sys::blocking::spawn(move || {
            let stores = StoreDir::for_mirror(&mirror);
            let store = stores
                .ensure(&mirror, commit, history, &planned)
                .map_err(Unmade::Store)?;
            create_working_copy(&stores, &mirror, &fixed, &store, &dest_c)
        })
        .await
        .unwrap_or_else(|join| Err(Unmade::Thread(join)));
        let (repo, rev) = (location.to_owned(), rev.to_owned());
        match made {
            Ok((head, verified)) => Ok(Checkout {
                dir: dest.to_owned(),
                commit: commit.to_string(),
                head: head.to_string(),
                setup_commits: Vec::new(),
                history,
                verified,
                fetched: ensured.fetched,
                warning: ensured.warning,
            }),
            Err(Unmade::Store(source)) => Err(CheckoutError::Store {
                repo,
                rev,
                source: Box::new(source),
            }),
            Err(Unmade::UseStore(source)) => Err(CheckoutError::UseStore {
                repo,
                rev,
                source: Box::new(source),
            }),
            Err(Unmade::Make(source)) => Err(CheckoutError::Make {
                repo,
                rev,
                source: Box::new(source),
            }),
            Err(Unmade::Leaking(source)) => Err(CheckoutError::StoreCheck {
                repo,
                rev,
                source: Box::new(source),
            }),
            Err(Unmade::Thread(source)) => Err(CheckoutError::Thread {
                repo,
                rev,
                doing: "checkout",
                source,
            }),
        }
    }

    /// The commit `rev` names, in the mirror: fetched there if need be.
    async fn ensure(
        &self,
        location: &str,
        rev: &str,
        mirror: &Path,
    ) -> Result<Ensured, CheckoutError> {
        // A full sha already found in the mirror needs no lock: tasks of one
        // repo must not wait on each other just to learn that.
        if let Some(commit) = self.pinned_in_mirror(location, rev, mirror).await {
            return Ok(Ensured::known(commit));
        }
        let state = {
            // The lock guards only the map; a poisoned map is still usable.
            let mut repos = self.repos.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(repos.entry(location.to_owned()).or_default())
        };
        let mut fetched = state.lock().await;
        // Tasks that queued behind the first fetch of a repo find their
        // commit here, instead of taking the file lock one after another.
        if let Some(commit) = self.found_this_run(location, rev) {
            return Ok(Ensured::known(commit));
        }
        let already_fetched = *fetched;
        let (location_c, rev_c, mirror_c) =
            (location.to_owned(), rev.to_owned(), mirror.to_owned());
        let ensured = crate::sys::blocking::spawn(move || {
            ensure_commit(&mirror_c, &location_c, &rev_c, already_fetched)
        })
        .await
        .unwrap_or_else(|source| {
            Err(CheckoutError::Thread {
                repo: location.to_owned(),
                rev: rev.to_owned(),
                doing: "fetch",
                source,
            })
        })?;
        *fetched = *fetched || ensured.fetched;
        if is_full_sha(rev) {
            self.remember(location, rev, ensured.commit);
        }
        Ok(ensured)
    }
}

/// Where the mirror of `location` lives under the cache `root`: a
/// readable name plus a hash of the full location, so two repos with the
/// same name never collide.
pub(super) fn mirror_path_in(root: &Path, location: &str) -> PathBuf {
    let trimmed = location.trim_end_matches('/').trim_end_matches(".git");
    let name: String = trimmed
        .rsplit(['/', ':', '\\'])
        .next()
        .unwrap_or("repo")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(60)
        .collect();
    let hash = Sha256::digest(location.as_bytes());
    let hex: String = hash.iter().take(8).map(|b| format!("{b:02x}")).collect();
    root.join("repos").join(format!("{name}-{hex}.git"))
}

pub(super) struct Ensured {
    pub(super) commit: Oid,
    pub(super) fetched: bool,
    pub(super) warning: Option<String>,
}

impl Ensured {
    fn known(commit: Oid) -> Ensured {
        Ensured {
            commit,
            fetched: false,
            warning: None,
        }
    }
}

/// Under an exclusive file lock (other onebash processes may share the
/// cache): open or create the mirror, fetch unless the commit is already
/// there or this run fetched already, and resolve `rev`.
pub(super) fn ensure_commit(
    mirror: &Path,
    location: &str,
    rev: &str,
    already_fetched: bool,
) -> Result<Ensured, CheckoutError> {
    let parent = mirror.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|source| CheckoutError::Cache {
        path: parent.to_owned(),
        source,
    })?;
    let _lock = FileLock::acquire(&mirror.with_extension("lock")).map_err(|source| {
        CheckoutError::Cache {
            path: mirror.to_owned(),
            source,
        }
    })?;
    let (repo, fresh) = match Repository::open_bare(mirror) {
        Ok(repo) => (repo, false),
        Err(_) => (create_mirror(mirror, location)?, true),
    };
    // A full sha already in the mirror needs no network at all.
    if !fresh
        && is_full_sha(rev)
        && let Ok(oid) = Oid::from_str(rev)
        && repo.find_commit(oid).is_ok()
    {
        return Ok(Ensured::known(oid));
    }
    let mut fetched = false;
    let mut warning = None;
    if !already_fetched {
        match fetch(&repo, location) {
            Ok(()) => fetched = true,
            Err(source) => {
                // An old mirror may still hold the commit: go on with it,
                // and say so; otherwise the fetch error is the answer.
                if resolve(&repo, rev).is_err() {
                    if let Some(path) = missing_repo_path(location) {
                        return Err(CheckoutError::NoRepoPath {
                            repo: location.to_owned(),
                            rev: rev.to_owned(),
                            path,
                        });
                    }
                    return Err(CheckoutError::Fetch {
                        repo: location.to_owned(),
                        rev: rev.to_owned(),
                        source,
                    });
                }
                warning = Some(format!(
                    "could not refresh the mirror of {location} ({}); used the cached copy",
                    source.message()
                ));
            }
        }
    }
    let commit = resolve(&repo, rev).map_err(|source| CheckoutError::Resolve {
        repo: location.to_owned(),
        rev: rev.to_owned(),
        source,
    })?;
    Ok(Ensured {
        commit,
        fetched,
        warning,
    })
}

/// The path a repo location names on this machine when nothing is there
/// (`/srv/repos/x`, `file:///srv/repos/x`, `./x`); `None` for a URL
/// (`https://`, `ssh://`, scp-like `git@host:x`) or a path that exists.
pub(crate) fn missing_repo_path(location: &str) -> Option<PathBuf> {
    let path = match location.strip_prefix("file://") {
        Some(path) => path,
        None if location.contains("://") => return None,
        // `host:path`: git reads a colon before any slash as scp-like ssh.
        None if location
            .find(':')
            .is_some_and(|colon| location.find('/').is_none_or(|slash| colon < slash)) =>
        {
            return None;
        }
        None => location,
    };
    let path = Path::new(path);
    (!path.exists()).then(|| path.to_owned())
}

pub(super) fn is_full_sha(rev: &str) -> bool {
    rev.len() == 40 && rev.bytes().all(|b| b.is_ascii_hexdigit())
}

fn resolve(repo: &Repository, rev: &str) -> Result<Oid, git2::Error> {
    repo.revparse_single(rev)
        .and_then(|object| object.peel_to_commit())
        .map(|commit| commit.id())
}

fn fetch(repo: &Repository, location: &str) -> Result<(), git2::Error> {
    let mut attempts = 0;
    let mut callbacks = git2::RemoteCallbacks::new();
    callbacks.credentials(move |url, username, allowed| {
        // libgit2 asks again after every refusal; stop after a few tries.
        attempts += 1;
        if attempts > 3 {
            return Err(git2::Error::from_str("authentication failed"));
        }
        if allowed.contains(git2::CredentialType::SSH_KEY) {
            git2::Cred::ssh_key_from_agent(username.unwrap_or("git"))
        } else if allowed.contains(git2::CredentialType::USER_PASS_PLAINTEXT) {
            let config = git2::Config::open_default()?;
            git2::Cred::credential_helper(&config, url, username)
        } else {
            git2::Cred::default()
        }
    });
    let mut options = git2::FetchOptions::new();
    options.remote_callbacks(callbacks);
    options.download_tags(git2::AutotagOption::All);
    let mut remote = repo.remote_anonymous(location)?;
    remote.fetch(
        &["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"],
        Some(&mut options),
        None,
    )?;
    // Point the mirror's HEAD at the remote's default branch so `HEAD` works
    // as a base_commit.
    if let Ok(default) = remote.default_branch()
        && let Ok(name) = default.as_str()
        && repo.find_reference(name).is_ok()
    {
        let _ = repo.set_head(name);
    }
    Ok(())
}

/// A new mirror of `location`, made under a temporary name and renamed into
/// place, so that a crash never leaves half of one (a mirror holding a
/// commit but not its trees would look complete to the next fetch). Seeded
/// with the objects of `location` when it is a repo on this machine: the
/// fetch that follows then finds the tips present and transfers nothing.
/// The caller holds the mirror's lock.
fn create_mirror(mirror: &Path, location: &str) -> Result<Repository, CheckoutError> {
    let cache_error = |source: std::io::Error| CheckoutError::Cache {
        path: mirror.to_owned(),
        source,
    };
    let git_error = |err: git2::Error| cache_error(std::io::Error::other(err.message().to_owned()));
    if mirror.exists() {
        // There but not openable: made again in place, never deleted, since
        // running tasks' working copies may borrow objects from it.
        return Repository::init_bare(mirror).map_err(git_error);
    }
    let staging = mirror.with_extension("new");
    if staging.exists() {
        // Left by a crash.
        std::fs::remove_dir_all(&staging).map_err(cache_error)?;
    }
    Repository::init_bare(&staging).map_err(git_error)?;
    if let Some(source) = local_objects(location)
        && seed_objects(&source, &staging.join("objects")).is_err()
    {
        // Start again without: the fetch will bring everything.
        std::fs::remove_dir_all(&staging).map_err(cache_error)?;
        Repository::init_bare(&staging).map_err(git_error)?;
    }
    std::fs::rename(&staging, mirror).map_err(cache_error)?;
    Repository::open_bare(mirror).map_err(git_error)
}

/// The objects folder of `location` when it is a repo on this machine (a
/// path or a `file://` URL) whose objects are all its own: not shallow, no
/// alternates of its own (a copy of its objects would then be incomplete).
fn local_objects(location: &str) -> Option<PathBuf> {
    let path = Path::new(location.strip_prefix("file://").unwrap_or(location));
    if !path.is_dir() {
        return None;
    }
    let source = Repository::open(path).ok()?;
    if source.is_shallow() {
        return None;
    }
    let objects = source.commondir().join("objects");
    let has_alternates = objects.join("info/alternates").exists();
    (objects.is_dir() && !has_alternates).then_some(objects)
}

/// Gives the mirror's objects folder a repo's objects, hard-linked where the
/// file system allows (as `git clone` of a path does) and copied otherwise.
/// libgit2's fetch from a path re-packs the whole history instead (seconds
/// for a repo that this does in milliseconds). Objects never change once
/// written, so a link is as good as a copy; each file appears whole, by
/// link or rename, and a pack before its index. Loose objects go first:
/// git only ever moves objects from loose into new packs and deletes old
/// packs after writing new ones, so a `gc` running in the repo meanwhile
/// either leaves a file this misses with an error (and the caller starts
/// again without seeding) or a pack this still lists; never a hole.
fn seed_objects(source: &Path, mirror_objects: &Path) -> std::io::Result<()> {
    for dir in loose_object_dirs(source)? {
        let into = mirror_objects.join(dir.file_name().unwrap_or_default());
        std::fs::create_dir_all(&into)?;
        for entry in std::fs::read_dir(&dir)? {
            let file = entry?.path();
            link_or_copy(&file, &into.join(file.file_name().unwrap_or_default()))?;
        }
    }
    let mut packs: Vec<PathBuf> = match std::fs::read_dir(source.join("pack")) {
        Ok(entries) => entries
            .map(|entry| entry.map(|e| e.path()))
            .collect::<std::io::Result<_>>()?,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(err) => return Err(err),
    };
    let rank = |path: &Path| match path.extension().and_then(|e| e.to_str()) {
        Some("pack") => Some(0),
        Some("idx") => Some(1),
        _ => None, // .keep, .bitmap, .rev, temporary files: not needed
    };
    packs.retain(|path| rank(path).is_some());
    packs.sort_by_key(|path| rank(path));
    let pack_dir = mirror_objects.join("pack");
    std::fs::create_dir_all(&pack_dir)?;
    for file in &packs {
        link_or_copy(file, &pack_dir.join(file.file_name().unwrap_or_default()))?;
    }
    Ok(())
}

/// The `xx/` folders of loose objects under an objects folder. Any error
/// is the caller's: a folder skipped in silence would be objects missing.
fn loose_object_dirs(objects: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir(objects)? {
        let entry = entry?;
        let name = entry.file_name();
        let is_fanout = name
            .to_str()
            .is_some_and(|n| n.len() == 2 && n.bytes().all(|b| b.is_ascii_hexdigit()));
        if is_fanout && entry.file_type()?.is_dir() {
            dirs.push(entry.path());
        }
    }
    Ok(dirs)
}

/// The folder beside the working copies that holds the run's fixed thin
/// packs, and copies of whole packs when the cache is on another file
/// system: each once per run, not once per task. Removed at the end of the
/// run.
pub(crate) const STAGED_PACKS: &str = ".packs";

/// Links a store's pack file into a working copy; across file systems,
/// through one copy at `staged` on the working copies' own.
fn link_pack(from: &Path, to: &Path, staged: &Path) -> std::io::Result<()> {
    if std::fs::hard_link(from, to).is_ok() {
        return Ok(());
    }
    if let Some(dir) = staged.parent() {
        std::fs::create_dir_all(dir)?;
    }
    link_or_copy(from, staged)?;
    link_or_copy(staged, to)
}

fn link_or_copy(from: &Path, to: &Path) -> std::io::Result<()> {
    if to.exists() || std::fs::hard_link(from, to).is_ok() {
        return Ok(());
    }
    // A name of this copy's own: tasks may copy the same pack at once.
    static COPIES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let partial = to.with_extension(format!(
        "onebash-partial-{}-{}",
        std::process::id(),
        COPIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let copied = std::fs::copy(from, &partial).and_then(|_| publish(&partial, to));
    if copied.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    copied
}

/// Puts a finished copy at `to` unless another task's copy got there
/// first, in which case that one stays and every task links the same file
/// (a rename would replace it, and the tasks that linked it before would
/// hold a copy of their own). A file system without hard links renames.
fn publish(partial: &Path, to: &Path) -> std::io::Result<()> {
    match std::fs::hard_link(partial, to) {
        Ok(()) => std::fs::remove_file(partial),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(partial)
        }
        Err(_) => std::fs::rename(partial, to),
    }
}

/// The thread of [`RepoCache::prepare`]: stopped (after the fix under
/// way) and waited for when dropped, so nothing writes into the staging
/// folder after the run removed it.
pub(crate) struct Preparer {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Preparer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Why a working copy was not made.
enum Unmade {
    /// The base's store could not be built.
    Store(StoreError),
    /// A pack of the store could not be fixed or linked.
    UseStore(StoreError),
    /// The working copy itself could not be made.
    Make(StoreError),
    /// It was made, and holds something past the base (or could not be
    /// checked): never used.
    Leaking(StoreError),
    Thread(tokio::task::JoinError),
}

/// A working copy of `store`'s head at `dest`, its objects the store's
/// packs (hard links into the cache, or to the run's fixed thin packs or
/// copies beside the working copies), checked before it is handed on. Every file written here is paid by every task,
/// so: libgit2's own minimal `.git` (not the system's template folder of
/// hook samples), and the settings appended to the config in one write.
fn create_working_copy(
    stores: &StoreDir,
    mirror: &Path,
    fixed: &FixedPacks,
    store: &BaseStore,
    dest: &Path,
) -> Result<(Oid, Verified), Unmade> {
    let io = |action: &'static str, path: &Path| {
        let path = path.to_owned();
        move |source| {
            Unmade::Make(StoreError::Io {
                action,
                path,
                source,
            })
        }
    };
    if dest.exists() {
        // Left over from a crashed run: start clean.
        std::fs::remove_dir_all(dest).map_err(io("remove", dest))?;
    }
    let mut init = git2::RepositoryInitOptions::new();
    init.external_template(false).mkpath(true);
    let gitdir = Repository::init_opts(dest, &init)
        .map_err(|source| {
            Unmade::Make(StoreError::Git {
                doing: "make a repository".to_owned(),
                repo: dest.to_owned(),
                source,
            })
        })?
        .path()
        .to_owned();
    // Commands such as `git commit` need an identity; the environment gives
    // none. Automatic gc would repack the store's packs in the middle of an
    // agent's command (it counts more than 50 of them as too many).
    // Nothing in this process reads these, so a plain append will do.
    let config_path = gitdir.join("config");
    File::options()
        .append(true)
        .open(&config_path)
        .and_then(|mut config| {
            config.write_all(
                b"[user]\n\tname = onebash\n\temail = onebash@localhost\n[gc]\n\tauto = 0\n[maintenance]\n\tauto = false\n",
            )
        })
        .map_err(io("write", &config_path))?;
    check_out_files(mirror, store, dest).map_err(Unmade::Make)?;
    let packs = gitdir.join("objects").join("pack");
    std::fs::create_dir_all(&packs).map_err(io("make", &packs))?;
    let staging = dest.parent().unwrap_or(Path::new(".")).join(STAGED_PACKS);
    let mut linked = Vec::with_capacity(store.packs.len());
    for pack in &store.packs {
        let name = fixed
            .get(stores, mirror, pack, &staging)
            .map_err(Unmade::UseStore)?;
        for ext in ["pack", "idx"] {
            let file = format!("{name}.{ext}");
            let (from, to) = match pack {
                StoredPack::Whole(_) => (stores.pack(&name, ext), packs.join(&file)),
                StoredPack::Thin { .. } => (staging.join(&file), packs.join(&file)),
            };
            let linked = match pack {
                StoredPack::Whole(_) => link_pack(&from, &to, &staging.join(&file)),
                StoredPack::Thin { .. } => std::fs::hard_link(&from, &to),
            };
            linked.map_err(|source| {
                Unmade::UseStore(StoreError::Io {
                    action: "link",
                    path: from,
                    source,
                })
            })?;
        }
        linked.push(name);
    }
    // Opened again, its own objects alone: what every command will see.
    let repo = Repository::open(dest).map_err(|source| {
        Unmade::Leaking(StoreError::Git {
            doing: "open the working copy".to_owned(),
            repo: dest.to_owned(),
            source,
        })
    })?;
    let verified = store::verify_working_copy(&repo, store, &linked).map_err(Unmade::Leaking)?;
    Ok((store.head, verified))
}

/// The files of `store`'s head into the new repository at `dest`, read
/// from the mirror through an alternate that lives in this process only
/// (nothing on disk names the mirror): the same bytes as from the store,
/// found in one pack rather than searched for in each of a chain's
/// (libgit2 looks in every pack in turn: 10-20 ms more for a chain of
/// 100). The store's packs come after.
fn check_out_files(mirror: &Path, store: &BaseStore, dest: &Path) -> Result<(), StoreError> {
    let git = |doing: &str| {
        let (doing, repo) = (doing.to_owned(), dest.to_owned());
        move |source| StoreError::Git {
            doing,
            repo,
            source,
        }
    };
    let repo = Repository::open(dest).map_err(git("open the working copy"))?;
    let objects = mirror.join("objects");
    repo.odb()
        .and_then(|odb| odb.add_disk_alternate(&objects.to_string_lossy()))
        .map_err(git("read the mirror's objects"))?;
    let tree = repo
        .find_commit(store.head)
        .and_then(|commit| commit.tree())
        .map_err(git(&format!("read the tree of {}", store.head)))?;
    let mut builder = git2::build::CheckoutBuilder::new();
    builder.force();
    if !filters_may_apply(&repo, &tree).map_err(git("read the config"))? {
        builder.disable_filters(true);
    }
    repo.checkout_tree(tree.as_object(), Some(&mut builder))
        .map_err(git(&format!("check out the files of {}", store.head)))?;
    repo.set_head_detached(store.head)
        .map_err(git(&format!("set HEAD to {}", store.head)))
}

/// Whether checking out `tree` could run one of libgit2's content filters
/// (line endings, `ident`). Only attributes and line-ending settings turn
/// one on; libgit2 looks up the attributes of every file to find out, which
/// is half the time of a checkout, so a repo with none of either anywhere
/// is checked out without: the same bytes, sooner.
fn filters_may_apply(repo: &Repository, tree: &git2::Tree<'_>) -> Result<bool, git2::Error> {
    // Any value, even `false`: this is a shortcut, not a reimplementation.
    let config = repo.config()?.snapshot()?;
    let settings = ["core.autocrlf", "core.eol", "core.attributesFile"];
    if settings.iter().any(|key| config.get_entry(key).is_ok()) {
        return Ok(true);
    }
    // The attribute files outside the tree that libgit2 reads (the repo's
    // own info/attributes: a new working copy has none).
    let home = std::env::var_os("HOME").map(PathBuf::from);
    // libgit2 takes XDG_CONFIG_HOME as it is, even empty (then a path
    // relative to the current folder).
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| home.map(|home| home.join(".config")));
    let outside = [
        Some(PathBuf::from("/etc/gitattributes")),
        xdg.map(|dir| dir.join("git/attributes")),
    ];
    if outside.iter().flatten().any(|file| file.exists()) {
        return Ok(true);
    }
    let mut found = false;
    let walked = tree.walk(git2::TreeWalkMode::PreOrder, |_, entry| {
        if entry.name_bytes() == b".gitattributes" {
            found = true;
            git2::TreeWalkResult::Abort
        } else {
            git2::TreeWalkResult::Ok
        }
    });
    // git2 gives up on a folder name that is not UTF-8: then nothing is
    // known, and the filters stay on.
    Ok(found || walked.is_err())
}

impl Checkout {
    /// The working copy's change against the base commit as a patch that
    /// `git apply` takes on a checkout of the base: new (untracked, not
    /// ignored) files included, binary files as full-index `GIT binary
    /// patch` hunks, and [`BUILD_ARTEFACTS`] left out.
    pub(crate) fn diff(&self) -> Result<String, GitError> {
        let repo = Repository::open(&self.dir)?;
        // Ignore rules given here live in this `Repository` value only:
        // nothing is written to the working copy.
        repo.add_ignore_rule(&BUILD_ARTEFACTS.join("\n"))?;
        let base = repo.find_commit(Oid::from_str(&self.head)?)?.tree()?;
        let diff = repo.diff_tree_to_workdir(Some(&base), Some(&mut patch_options()))?;
        let mut out = String::new();
        for (path, text) in patch_texts(&diff)? {
            match String::from_utf8(text) {
                Ok(text) => out.push_str(&text),
                // A text file that is not UTF-8 (Latin-1, say) cannot be
                // written into a JSON prediction or a UTF-8 patch without
                // changing its bytes, which would make the patch fail to
                // apply: it goes in as binary instead, which is ASCII.
                Err(_) => {
                    let mut options = patch_options();
                    options
                        .pathspec(&path)
                        .disable_pathspec_match(true)
                        .force_binary(true);
                    let one = repo.diff_tree_to_workdir(Some(&base), Some(&mut options))?;
                    for (_, text) in patch_texts(&one)? {
                        out.push_str(&String::from_utf8_lossy(&text));
                    }
                }
            }
        }
        Ok(out)
    }

    /// Puts the files that `patch` touches back as they are at the base
    /// commit (removing those that did not exist there); returns them.
    pub(crate) fn restore(&self, patch: &str) -> Result<Vec<String>, GitError> {
        let repo = Repository::open(&self.dir)?;
        let touched = patch_paths(patch)?;
        let base = repo.find_commit(Oid::from_str(&self.head)?)?.tree()?;
        for path in &touched {
            let on_disk = self.dir.join(path);
            match base.get_path(path) {
                Ok(entry) => {
                    let blob = repo.find_blob(entry.id())?;
                    if let Some(parent) = on_disk.parent() {
                        std::fs::create_dir_all(parent)?;
                    }
                    if on_disk.is_dir() {
                        std::fs::remove_dir_all(&on_disk)?;
                    }
                    std::fs::write(&on_disk, blob.content())?;
                    set_mode(&on_disk, entry.filemode())?;
                }
                Err(_) => {
                    if on_disk.is_dir() {
                        std::fs::remove_dir_all(&on_disk)?;
                    } else if on_disk.symlink_metadata().is_ok() {
                        std::fs::remove_file(&on_disk)?;
                    }
                }
            }
        }
        Ok(touched.iter().map(|p| p.display().to_string()).collect())
    }

    /// Applies `patch` to the working copy with libgit2, strictly (what
    /// `git apply` does).
    pub(crate) fn apply(&self, patch: &str) -> Result<(), GitError> {
        let repo = Repository::open(&self.dir)?;
        let diff = parse_patch(patch)?;
        repo.apply(&diff, ApplyLocation::WorkDir, None)
            .map_err(GitError::Apply)
    }
}

/// The paths a patch touches, old and new sides, each once, in order.
pub(crate) fn patch_paths(patch: &str) -> Result<Vec<PathBuf>, GitError> {
    let diff = parse_patch(patch)?;
    let mut touched = Vec::new();
    for delta in diff.deltas() {
        for file in [delta.old_file(), delta.new_file()] {
            if let Some(path) = file.path()
                && !touched.iter().any(|p: &PathBuf| p == path)
            {
                touched.push(path.to_owned());
            }
        }
    }
    Ok(touched)
}

fn parse_patch(patch: &str) -> Result<Diff<'static>, GitError> {
    Diff::from_buffer(patch.as_bytes()).map_err(GitError::Parse)
}

fn set_mode(path: &Path, filemode: i32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = if filemode & 0o111 != 0 { 0o755 } else { 0o644 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Untracked files and folders that the agent's commands (running the
/// tests, building) leave behind, which are no part of a fix: compiled
/// Python, test and type-checker caches, packaging metadata, objects and
/// shared libraries. They are left out of the agent's patch, as if the repo
/// ignored them; a file the base commit has is always in it.
pub(crate) const BUILD_ARTEFACTS: &[&str] = &[
    "__pycache__/",
    "*.py[cod]",
    ".pytest_cache/",
    ".mypy_cache/",
    ".ruff_cache/",
    ".hypothesis/",
    ".tox/",
    ".nox/",
    ".coverage",
    "*.egg-info/",
    "*.o",
    "*.so",
];

/// How the agent's patch is computed: new files with their content, binary
/// files in full so that the patch applies.
fn patch_options() -> DiffOptions {
    let mut options = DiffOptions::new();
    options
        .include_untracked(true)
        .recurse_untracked_dirs(true)
        .show_untracked_content(true)
        .show_binary(true);
    options
}

/// The patch text of each file of `diff`, in order, as bytes, with the
/// file's path (the new one; the old one for a deletion).
fn patch_texts(diff: &Diff<'_>) -> Result<Vec<(PathBuf, Vec<u8>)>, GitError> {
    let mut files: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    diff.print(DiffFormat::Patch, |delta, _hunk, line| {
        if line.origin_value() == git2::DiffLineType::FileHeader || files.is_empty() {
            let path = delta.new_file().path().or(delta.old_file().path());
            files.push((path.map(Path::to_owned).unwrap_or_default(), Vec::new()));
        }
        if let Some((_, out)) = files.last_mut() {
            if matches!(line.origin(), '+' | '-' | ' ') {
                out.push(line.origin() as u8);
            }
            out.extend_from_slice(line.content());
        }
        true
    })?;
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// A repo path with nothing there is named as such (libgit2 reads it as
    /// a URL and says "unsupported URL protocol"); a URL, scp-like or not,
    /// and a path that exists are not.
    #[test]
    fn only_a_local_path_with_nothing_there_is_a_missing_repo_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let here = dir.path().display().to_string();
        let gone = dir.path().join("gone").display().to_string();
        let cases = [
            (gone.clone(), true),
            (format!("file://{gone}"), true),
            ("./no-such-repo-here".to_owned(), true),
            (here.clone(), false),
            (format!("file://{here}"), false),
            ("https://example.com/a/b.git".to_owned(), false),
            ("ssh://git@example.com/a/b.git".to_owned(), false),
            ("git@example.com:a/b.git".to_owned(), false),
        ];
        for (location, missing) in cases {
            assert_eq!(
                missing_repo_path(&location).is_some(),
                missing,
                "{location}"
            );
        }
    }

    /// Two tasks copying the same pack at once: the copy that finishes
    /// second leaves the first in place (same inode), so the tasks that
    /// already linked it share it with the rest.
    #[test]
    fn a_copy_that_finishes_second_keeps_the_first() {
        let tmp = tempfile::tempdir().expect("temp folder");
        let to = tmp.path().join("pack-1.idx");
        std::fs::write(&to, "idx bytes").expect("the first copy");
        let first = std::fs::metadata(&to).expect("stat").ino();
        let partial = tmp.path().join("pack-1.onebash-partial-2");
        std::fs::write(&partial, "idx bytes").expect("the second copy");
        publish(&partial, &to).expect("publish");
        assert_eq!(std::fs::metadata(&to).expect("stat").ino(), first);
        assert!(!partial.exists(), "the second copy is removed");
        let fresh = tmp.path().join("pack-2.idx");
        let partial = tmp.path().join("pack-2.onebash-partial-3");
        std::fs::write(&partial, "other").expect("a copy");
        publish(&partial, &fresh).expect("publish");
        assert_eq!(std::fs::read_to_string(&fresh).expect("read"), "other");
        assert!(!partial.exists(), "the copy is in place, its name gone");
    }

    #[test]
    fn a_seeded_file_is_copied_when_it_cannot_be_linked() {
        // A link fails across file systems: copy from /dev/shm (tmpfs) when
        // this machine has one on another device than the temp folder.
        let tmp = tempfile::tempdir().expect("temp folder");
        let Ok(shm) = tempfile::tempdir_in("/dev/shm") else {
            eprintln!("no writable /dev/shm: the copy path is not exercised here");
            return;
        };
        let from = shm.path().join("pack-1.pack");
        std::fs::write(&from, "pack bytes").expect("write the file");
        let to = tmp.path().join("pack-1.pack");
        link_or_copy(&from, &to).expect("link or copy");
        assert_eq!(
            std::fs::read_to_string(&to).expect("read the file"),
            "pack bytes"
        );
        let (a, b) = (
            std::fs::metadata(&from).expect("stat"),
            std::fs::metadata(&to).expect("stat"),
        );
        if a.dev() != b.dev() {
            assert_ne!(a.ino(), b.ino());
        }
        let left: Vec<_> = std::fs::read_dir(tmp.path())
            .expect("read the folder")
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains("partial"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn mirror_paths_are_readable_and_distinct() {
        let cache = RepoCache::new(PathBuf::from("/c"), History::Full, []);
        let a = cache.mirror_path("https://github.com/psf/requests.git");
        let b = cache.mirror_path("https://example.com/other/requests");
        assert!(a.starts_with("/c/repos"));
        assert!(
            a.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("requests-"))
        );
        assert_ne!(a, b);
        let c = cache.mirror_path("git@github.com:owner/weird name!.git");
        assert!(c.display().to_string().contains("weird_name_-"));
    }
}
