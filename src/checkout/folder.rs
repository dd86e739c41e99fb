//! A folder of a repo at a commit, exported from the repo cache's mirror
//! into the cache: for tasks that are folders of a repo (a task registry
//! names each by its repo, commit and path) rather than working copies of
//! it. Owns the export and its place in the cache, keyed by repo, commit
//! and path, so a later run (a resume, another shard) finds the same
//! folder with no network and no git. It does not read what the folder
//! holds: the task stage does.
//!
//! The folder is written under a temporary name and renamed into place,
//! so a folder there is whole; a crash leaves only a temporary one, which
//! the next export of the same folder replaces.

use std::path::{Path, PathBuf};

use git2::{ObjectType, Oid, Repository, Tree};
use sha2::{Digest, Sha256};

use super::cache::{ensure_commit, is_full_sha, mirror_path_in};
use super::error::CheckoutError;

/// A repo's folder at a commit, on disk.
#[derive(Debug, Clone)]
pub(crate) struct RepoFolder {
    /// The exported folder; its name is the last part of the path asked for.
    pub dir: PathBuf,
    /// The full sha the revision resolved to.
    pub commit: String,
    /// Whether this export fetched from the repo.
    pub fetched: bool,
    /// Set when the mirror could not be refreshed but held the commit.
    pub warning: Option<String>,
}

/// The folder `path` of `location` at `rev`, exported into the cache at
/// `root` unless it is there already. `may_fetch`: whether the mirror may
/// be fetched when it lacks `rev` (a caller fetches each repo at most once
/// per run). A full sha already exported needs neither the network nor
/// the mirror.
pub(crate) fn repo_folder(
    root: &Path,
    location: &str,
    rev: &str,
    path: &str,
    may_fetch: bool,
) -> Result<RepoFolder, CheckoutError> {
    let mirror = mirror_path_in(root, location);
    if is_full_sha(rev) {
        let dir = export_path(root, &mirror, rev, path);
        if dir.is_dir() {
            return Ok(RepoFolder {
                dir,
                commit: rev.to_lowercase(),
                fetched: false,
                warning: None,
            });
        }
    }
    let ensured = ensure_commit(&mirror, location, rev, !may_fetch)?;
    let commit = ensured.commit.to_string();
    let dir = export_path(root, &mirror, &commit, path);
    if !dir.is_dir() {
        export(&mirror, ensured.commit, path, &dir).map_err(|fault| match fault {
            Fault::NoFolder => CheckoutError::NoFolder {
                repo: location.to_owned(),
                rev: rev.to_owned(),
                path: path.to_owned(),
            },
            Fault::Git(source) => CheckoutError::Export {
                repo: location.to_owned(),
                rev: rev.to_owned(),
                source,
            },
            Fault::Io(path, source) => CheckoutError::Cache { path, source },
        })?;
    }
    Ok(RepoFolder {
        dir,
        commit,
        fetched: ensured.fetched,
        warning: ensured.warning,
    })
}

/// `folders/<mirror>/<commit>/<hash of path>/<last part of path>`: the
/// hash keeps two paths of one commit apart (one inside the other, say),
/// the last part keeps the folder's own name.
fn export_path(root: &Path, mirror: &Path, commit: &str, path: &str) -> PathBuf {
    let stem = mirror
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let hash = Sha256::digest(path.as_bytes());
    let hex: String = hash.iter().take(8).map(|b| format!("{b:02x}")).collect();
    let name = Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".to_owned());
    root.join("folders")
        .join(stem)
        .join(commit.to_lowercase())
        .join(hex)
        .join(name)
}

/// Why an export failed, before the repo and revision are put in.
enum Fault {
    NoFolder,
    Git(git2::Error),
    Io(PathBuf, std::io::Error),
}

impl From<git2::Error> for Fault {
    fn from(err: git2::Error) -> Fault {
        Fault::Git(err)
    }
}

/// Writes the tree at `path` of `commit` to `dest`, through a temporary
/// folder beside it.
fn export(mirror: &Path, commit: Oid, path: &str, dest: &Path) -> Result<(), Fault> {
    let repo = Repository::open_bare(mirror)?;
    let root_tree = repo.find_commit(commit)?.tree()?;
    let trimmed = path.trim_matches('/');
    let tree = if trimmed.is_empty() || trimmed == "." {
        root_tree
    } else {
        match root_tree.get_path(Path::new(trimmed)) {
            Ok(entry) if entry.kind() == Some(ObjectType::Tree) => repo.find_tree(entry.id())?,
            Ok(_) => return Err(Fault::NoFolder),
            Err(err) if err.code() == git2::ErrorCode::NotFound => return Err(Fault::NoFolder),
            Err(err) => return Err(err.into()),
        }
    };
    let parent = dest.parent().unwrap_or(Path::new("."));
    let io = |at: &Path| {
        let at = at.to_owned();
        move |err| Fault::Io(at, err)
    };
    std::fs::create_dir_all(parent).map_err(io(parent))?;
    let staging = parent.join(format!(".new-{}", std::process::id()));
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(io(&staging))?;
    }
    write_tree(&repo, &tree, &staging)?;
    if let Err(err) = std::fs::rename(&staging, dest) {
        let _ = std::fs::remove_dir_all(&staging);
        // Another process exported the same folder first: as good.
        if !dest.is_dir() {
            return Err(Fault::Io(dest.to_owned(), err));
        }
    }
    Ok(())
}

/// Writes `tree`'s files into `dir`, with their executable bits and
/// symbolic links; a submodule is an empty folder, as git checks it out.
fn write_tree(repo: &Repository, tree: &Tree<'_>, dir: &Path) -> Result<(), Fault> {
    use std::os::unix::fs::PermissionsExt;
    let io = |at: &Path| {
        let at = at.to_owned();
        move |err| Fault::Io(at, err)
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    for entry in tree {
        let Ok(name) = entry.name() else { continue };
        // A tree from elsewhere is read, never trusted to stay inside.
        if name == ".." || name == "." || name.contains('/') {
            continue;
        }
        let target = dir.join(name);
        match (entry.kind(), entry.filemode()) {
            (Some(ObjectType::Tree), _) => write_tree(repo, &repo.find_tree(entry.id())?, &target)?,
            (Some(ObjectType::Blob), 0o120000) => {
                let blob = repo.find_blob(entry.id())?;
                let link = String::from_utf8_lossy(blob.content()).into_owned();
                std::os::unix::fs::symlink(link, &target).map_err(io(&target))?;
            }
            (Some(ObjectType::Blob), mode) => {
                let blob = repo.find_blob(entry.id())?;
                std::fs::write(&target, blob.content()).map_err(io(&target))?;
                let bits = if mode == 0o100755 { 0o755 } else { 0o644 };
                std::fs::set_permissions(&target, std::fs::Permissions::from_mode(bits))
                    .map_err(io(&target))?;
            }
            _ => std::fs::create_dir_all(&target).map_err(io(&target))?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Commits `files` (path, content, executable) to a new repo at `dir`.
    fn repo_with(dir: &Path, files: &[(&str, &str, bool)]) -> String {
        use std::os::unix::fs::PermissionsExt;
        let repo = Repository::init(dir).expect("init");
        for (path, content, executable) in files {
            let file = dir.join(path);
            std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
            std::fs::write(&file, content).expect("write");
            if *executable {
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755))
                    .expect("chmod");
            }
        }
        let mut index = repo.index().expect("index");
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .expect("add");
        let tree = repo
            .find_tree(index.write_tree().expect("tree"))
            .expect("tree");
        let sig = git2::Signature::now("t", "t@t").expect("sig");
        repo.commit(Some("HEAD"), &sig, &sig, "c", &tree, &[])
            .expect("commit")
            .to_string()
    }

    /// A folder is exported with its modes, found again by commit without
    /// the repo, and a path or commit the repo lacks is named.
    #[test]
    fn a_folder_is_exported_once_and_read_again_without_the_repo() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().expect("tempdir");
        let source = tmp.path().join("src");
        let sha = repo_with(
            &source,
            &[
                ("tasks/a/task.toml", "x", false),
                ("tasks/a/tests/test.sh", "echo", true),
                ("tasks/b/task.toml", "y", false),
            ],
        );
        let cache = tmp.path().join("cache");
        let location = source.display().to_string();
        let folder = repo_folder(&cache, &location, &sha, "tasks/a", true).expect("export");
        assert_eq!(folder.commit, sha);
        assert_eq!(folder.dir.file_name().and_then(|n| n.to_str()), Some("a"));
        assert_eq!(
            std::fs::read_to_string(folder.dir.join("task.toml")).expect("read"),
            "x"
        );
        let mode = std::fs::metadata(folder.dir.join("tests/test.sh"))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
        assert!(!folder.dir.join("../b").exists());
        // The repo gone, the same commit's folder is still there.
        std::fs::remove_dir_all(&source).expect("rm");
        let again = repo_folder(&cache, &location, &sha, "tasks/a", true).expect("cached");
        assert_eq!(again.dir, folder.dir);
        assert!(!again.fetched);
        // Another path of the cached commit needs only the mirror.
        let other = repo_folder(&cache, &location, &sha, "tasks/b", false).expect("mirror");
        assert!(other.dir.join("task.toml").is_file());
        let missing = repo_folder(&cache, &location, &sha, "tasks/c", false)
            .expect_err("no such folder")
            .to_string();
        assert!(missing.contains("has no folder tasks/c"), "{missing}");
        let file = repo_folder(&cache, &location, &sha, "tasks/a/task.toml", false)
            .expect_err("a file")
            .to_string();
        assert!(file.contains("has no folder tasks/a/task.toml"), "{file}");
        let commit = "0".repeat(40);
        let unknown = repo_folder(&cache, &location, &commit, "tasks/a", false)
            .expect_err("no such commit")
            .to_string();
        assert!(unknown.contains("no such commit"), "{unknown}");
    }
}
