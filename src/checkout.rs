//! Stage 2: the repo cache and each task's working copy, with git2.
//!
//! Owns the bare mirrors in the cache folder (one per repo, fetched at most
//! once per run, guarded by a file lock so two onebash processes can share the
//! cache) and the per-task working copy: a fresh repository whose objects are
//! borrowed from the mirror through `objects/info/alternates`, so making one
//! costs the files checked out, not the history. Also owns the git operations
//! on a working copy that later stages need: the agent's diff, restoring files
//! and applying a patch. It does not run commands.

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use git2::{ApplyLocation, Diff, DiffFormat, DiffOptions, Oid, Repository};
use sha2::{Digest, Sha256};

/// Why a checkout failed. The message names the repo and commit.
#[derive(Debug, thiserror::Error)]
pub enum CheckoutError {
    #[error("failed to check out {repo}@{rev}: the fetch failed: {message}")]
    Fetch {
        repo: String,
        rev: String,
        message: String,
    },
    #[error("failed to check out {repo}@{rev}: no such commit in the repo ({message})")]
    Resolve {
        repo: String,
        rev: String,
        message: String,
    },
    #[error("failed to check out {repo}@{rev}: {message}")]
    WorkingCopy {
        repo: String,
        rev: String,
        message: String,
    },
    #[error("failed to use the repo cache at {path}: {source}")]
    Cache {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A git operation on a working copy failed (diff, restore, apply).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct GitError(String);

impl From<git2::Error> for GitError {
    fn from(err: git2::Error) -> Self {
        GitError(err.message().to_owned())
    }
}

impl From<std::io::Error> for GitError {
    fn from(err: std::io::Error) -> Self {
        GitError(err.to_string())
    }
}

/// The shared cache of bare mirrors. One per run; cheap to share with `Arc`.
pub struct RepoCache {
    root: PathBuf,
    /// Per repo location: whether this run fetched it already. The async mutex
    /// makes tasks on the same repo wait for one fetch instead of racing.
    repos: Mutex<HashMap<String, Arc<tokio::sync::Mutex<bool>>>>,
    /// Full shas this run found, by (location, sha): immutable, so known
    /// once is known for the run.
    resolved: Mutex<HashMap<(String, String), Oid>>,
}

/// A task's working copy at its base commit.
#[derive(Debug, Clone)]
pub struct Checkout {
    pub dir: PathBuf,
    /// The full sha `base_commit` resolved to.
    pub commit: String,
    /// Whether this checkout fetched from the repo (at most once per repo per run).
    pub fetched: bool,
    /// Set when the mirror could not be refreshed but already held the commit.
    pub warning: Option<String>,
}

impl RepoCache {
    pub fn new(root: PathBuf) -> RepoCache {
        RepoCache {
            root,
            repos: Mutex::new(HashMap::new()),
            resolved: Mutex::new(HashMap::new()),
        }
    }

    /// Where the mirror of `location` lives: a readable name plus a hash of
    /// the full location, so two repos with the same name never collide.
    pub fn mirror_path(&self, location: &str) -> PathBuf {
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
        self.root.join("repos").join(format!("{name}-{hex}.git"))
    }

    /// The commit of a full sha this run already found, or that the mirror
    /// holds, read without any lock (git objects are immutable and new
    /// packs appear by rename, so a concurrent fetch cannot tear a read).
    async fn pinned_in_mirror(&self, location: &str, rev: &str, mirror: &Path) -> Option<Oid> {
        if !is_full_sha(rev) {
            return None;
        }
        let key = (location.to_owned(), rev.to_owned());
        if let Some(oid) = self
            .resolved
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Some(*oid);
        }
        let (mirror, rev_c) = (mirror.to_owned(), rev.to_owned());
        let found = tokio::task::spawn_blocking(move || {
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
    pub async fn checkout(
        &self,
        location: &str,
        rev: &str,
        dest: &Path,
    ) -> Result<Checkout, CheckoutError> {
        let state = {
            // The lock guards only the map; a poisoned map is still usable.
            let mut repos = self.repos.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(repos.entry(location.to_owned()).or_default())
        };
        let mirror = self.mirror_path(location);
        // A full sha already found in the mirror needs no lock: tasks of one
        // repo must not wait on each other just to learn that.
        let known = self.pinned_in_mirror(location, rev, &mirror).await;
        let (commit, fetched_now, warning) = if let Some(commit) = known {
            (commit, false, None)
        } else {
            let mut fetched = state.lock().await;
            let already_fetched = *fetched;
            let (location_c, rev_c, mirror_c) =
                (location.to_owned(), rev.to_owned(), mirror.clone());
            let result = tokio::task::spawn_blocking(move || {
                ensure_commit(&mirror_c, &location_c, &rev_c, already_fetched)
            })
            .await
            .unwrap_or_else(|join| {
                Err(CheckoutError::Fetch {
                    repo: location.to_owned(),
                    rev: rev.to_owned(),
                    message: format!("the fetch thread failed: {join}"),
                })
            })?;
            *fetched = *fetched || result.fetched;
            if is_full_sha(rev) {
                self.remember(location, rev, result.commit);
            }
            (result.commit, result.fetched, result.warning)
        };
        let (mirror_c, dest_c, commit_c) = (mirror.clone(), dest.to_owned(), commit);
        let made = tokio::task::spawn_blocking(move || {
            create_working_copy(&mirror_c, commit_c, &dest_c).map(|()| commit_c)
        })
        .await;
        match made {
            Ok(Ok(commit)) => Ok(Checkout {
                dir: dest.to_owned(),
                commit: commit.to_string(),
                fetched: fetched_now,
                warning,
            }),
            Ok(Err(err)) => Err(CheckoutError::WorkingCopy {
                repo: location.to_owned(),
                rev: rev.to_owned(),
                message: err.to_string(),
            }),
            Err(join) => Err(CheckoutError::WorkingCopy {
                repo: location.to_owned(),
                rev: rev.to_owned(),
                message: format!("the checkout thread failed: {join}"),
            }),
        }
    }
}

struct Ensured {
    commit: Oid,
    fetched: bool,
    warning: Option<String>,
}

/// Under an exclusive file lock (other onebash processes may share the
/// cache): open or create the mirror, fetch unless the commit is already
/// there or this run fetched already, and resolve `rev`.
fn ensure_commit(
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
    let repo = match Repository::open_bare(mirror) {
        Ok(repo) => repo,
        Err(_) => Repository::init_bare(mirror).map_err(|err| CheckoutError::Cache {
            path: mirror.to_owned(),
            source: std::io::Error::other(err.message().to_owned()),
        })?,
    };
    // A full sha already in the mirror needs no network at all.
    if is_full_sha(rev)
        && let Ok(oid) = Oid::from_str(rev)
        && repo.find_commit(oid).is_ok()
    {
        return Ok(Ensured {
            commit: oid,
            fetched: false,
            warning: None,
        });
    }
    let mut fetched = false;
    let mut warning = None;
    if !already_fetched {
        match fetch(&repo, location) {
            Ok(()) => fetched = true,
            Err(message) => {
                // An old mirror may still hold the commit: go on with it,
                // and say so; otherwise the fetch error is the answer.
                if resolve(&repo, rev).is_err() {
                    return Err(CheckoutError::Fetch {
                        repo: location.to_owned(),
                        rev: rev.to_owned(),
                        message,
                    });
                }
                warning = Some(format!(
                    "could not refresh the mirror of {location} ({message}); used the cached copy"
                ));
            }
        }
    }
    let commit = resolve(&repo, rev).map_err(|message| CheckoutError::Resolve {
        repo: location.to_owned(),
        rev: rev.to_owned(),
        message,
    })?;
    Ok(Ensured {
        commit,
        fetched,
        warning,
    })
}

fn is_full_sha(rev: &str) -> bool {
    rev.len() == 40 && rev.bytes().all(|b| b.is_ascii_hexdigit())
}

fn resolve(repo: &Repository, rev: &str) -> Result<Oid, String> {
    repo.revparse_single(rev)
        .and_then(|object| object.peel_to_commit())
        .map(|commit| commit.id())
        .map_err(|err| err.message().to_owned())
}

fn fetch(repo: &Repository, location: &str) -> Result<(), String> {
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
    let mut remote = repo
        .remote_anonymous(location)
        .map_err(|err| err.message().to_owned())?;
    remote
        .fetch(
            &["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"],
            Some(&mut options),
            None,
        )
        .map_err(|err| err.message().to_owned())?;
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

/// A working copy of `commit` at `dest` that borrows the mirror's objects.
fn create_working_copy(mirror: &Path, commit: Oid, dest: &Path) -> Result<(), GitError> {
    if dest.exists() {
        // Left over from a crashed run: start clean.
        std::fs::remove_dir_all(dest)?;
    }
    std::fs::create_dir_all(dest)?;
    let repo = Repository::init(dest)?;
    let mirror_objects = std::fs::canonicalize(mirror.join("objects"))?;
    std::fs::write(
        repo.path().join("objects/info/alternates"),
        format!("{}\n", mirror_objects.display()),
    )?;
    // Reopen so the object database picks up the alternates file.
    let repo = Repository::open(dest)?;
    let target = repo.find_commit(commit)?;
    let mut builder = git2::build::CheckoutBuilder::new();
    builder.force();
    repo.checkout_tree(target.as_object(), Some(&mut builder))?;
    repo.set_head_detached(commit)?;
    // Commands such as `git commit` need an identity; the environment gives none.
    let mut config = repo.config()?;
    config.set_str("user.name", "onebash")?;
    config.set_str("user.email", "onebash@localhost")?;
    Ok(())
}

impl Checkout {
    /// The working copy's change against the base commit as a unified diff,
    /// new (untracked, not ignored) files included.
    pub fn diff(&self) -> Result<String, GitError> {
        let repo = Repository::open(&self.dir)?;
        let base = repo.find_commit(Oid::from_str(&self.commit)?)?.tree()?;
        let mut options = DiffOptions::new();
        options
            .include_untracked(true)
            .recurse_untracked_dirs(true)
            .show_untracked_content(true);
        let diff = repo.diff_tree_to_workdir(Some(&base), Some(&mut options))?;
        patch_text(&diff)
    }

    /// Puts the files that `patch` touches back as they are at the base
    /// commit (removing those that did not exist there); returns them.
    pub fn restore(&self, patch: &str) -> Result<Vec<String>, GitError> {
        let repo = Repository::open(&self.dir)?;
        let diff = parse_patch(patch)?;
        let base = repo.find_commit(Oid::from_str(&self.commit)?)?.tree()?;
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
    pub fn apply(&self, patch: &str) -> Result<(), GitError> {
        let repo = Repository::open(&self.dir)?;
        let diff = parse_patch(patch)?;
        repo.apply(&diff, ApplyLocation::WorkDir, None)
            .map_err(|err| GitError(format!("the patch does not apply: {}", err.message())))
    }

    /// Deletes the working copy.
    pub fn remove(&self) -> std::io::Result<()> {
        match std::fs::remove_dir_all(&self.dir) {
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}

fn parse_patch(patch: &str) -> Result<Diff<'static>, GitError> {
    Diff::from_buffer(patch.as_bytes())
        .map_err(|err| GitError(format!("the patch cannot be parsed: {}", err.message())))
}

fn set_mode(path: &Path, filemode: i32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = if filemode & 0o111 != 0 { 0o755 } else { 0o644 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

fn patch_text(diff: &Diff<'_>) -> Result<String, GitError> {
    let mut out = Vec::new();
    diff.print(DiffFormat::Patch, |_delta, _hunk, line| {
        if matches!(line.origin(), '+' | '-' | ' ') {
            out.push(line.origin() as u8);
        }
        out.extend_from_slice(line.content());
        true
    })?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// An exclusive `flock` held until dropped.
struct FileLock {
    _file: File,
}

impl FileLock {
    fn acquire(path: &Path) -> std::io::Result<FileLock> {
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)?;
        // SAFETY: flock on a valid open descriptor; blocks until granted.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // The lock is released when the descriptor is closed, on drop.
        Ok(FileLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_paths_are_readable_and_distinct() {
        let cache = RepoCache::new(PathBuf::from("/c"));
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
