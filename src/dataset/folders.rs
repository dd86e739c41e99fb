//! Dataset repos made of folders rather than data files: each folder
//! holds a marker file the caller names (the task stage's folder formats),
//! and every file under it belongs to it. Owns which files those are
//! ([`folder_files`]) and their copy out of the commit's snapshot (links
//! into the blobs) into a plain tree of real files, one folder a marker,
//! named by its last part ([`materialize`]): what a folder reader (and an
//! image build, which does not follow links out of its context) needs.
//! Reading the folders is the caller's.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::dataset::error::DatasetError;

/// The name a dataset read as folders gives its split, in run.json.
pub(crate) const FOLDERS: &str = "folders";

/// The folders of `files` that hold one of `markers`, and every file under
/// them, sorted; `None` when no file is a marker. A marker at the root
/// makes the whole repo one folder.
pub(crate) fn folder_files(
    files: &[String],
    markers: &[&str],
) -> Option<(Vec<String>, Vec<String>)> {
    let mut roots: Vec<String> = files
        .iter()
        .filter(|path| {
            let name = path.rsplit('/').next().unwrap_or(path);
            markers.contains(&name)
        })
        .map(|path| path.rsplit_once('/').map_or("", |(dir, _)| dir).to_owned())
        .collect();
    if roots.is_empty() {
        return None;
    }
    roots.sort();
    roots.dedup();
    let mut under: Vec<String> = files
        .iter()
        .filter(|path| roots.iter().any(|root| inside(path, root)))
        .cloned()
        .collect();
    under.sort();
    Some((roots, under))
}

/// Whether `path` is under the folder `root` (`""`: the repo's root).
fn inside(path: &str, root: &str) -> bool {
    root.is_empty()
        || path
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Copies `files` (each its path in the repo and where it is on disk, a
/// link into the cache's blobs; of the folders `roots`) into
/// `<cache_root>/folders/<sha>/`,
/// each folder under its last part (`repo` for the root), unless a whole
/// copy is there already; returns that folder. Two folders of one name
/// are refused: they would be one folder.
pub(crate) fn materialize(
    cache_root: &Path,
    sha: &str,
    dataset: &str,
    roots: &[String],
    files: &[(&str, &Path)],
) -> Result<PathBuf, DatasetError> {
    let name_of = |root: &str| {
        root.rsplit('/')
            .next()
            .filter(|name| !name.is_empty())
            .unwrap_or("repo")
            .to_owned()
    };
    let mut names: HashMap<String, &str> = HashMap::new();
    for root in roots {
        if let Some(first) = names.insert(name_of(root), root) {
            return Err(DatasetError::FolderNames {
                dataset: dataset.to_owned(),
                name: name_of(root),
                first: first.to_owned(),
                second: root.clone(),
            });
        }
    }
    let dest = cache_root.join("folders").join(sha);
    if dest.is_dir() {
        return Ok(dest);
    }
    let cache_error = |action: &'static str, path: &Path| {
        let path = path.to_owned();
        let dataset = dataset.to_owned();
        move |source| DatasetError::Cache {
            dataset,
            action,
            path,
            source,
        }
    };
    let staging = cache_root
        .join("folders")
        .join(format!(".{sha}.{}", std::process::id()));
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(cache_error("clear", &staging))?;
    }
    for (path, local) in files {
        // The deepest folder it is under names it (folders may nest).
        let Some(root) = roots
            .iter()
            .filter(|root| inside(path, root))
            .max_by_key(|root| root.len())
        else {
            continue;
        };
        let rest = if root.is_empty() {
            path
        } else {
            &path[root.len() + 1..]
        };
        let target = staging.join(name_of(root)).join(rest);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(cache_error("make", parent))?;
        }
        // Follows the snapshot's link to the blob: a real file.
        std::fs::copy(local, &target).map_err(cache_error("copy", &target))?;
    }
    if let Err(err) = std::fs::rename(&staging, &dest) {
        let _ = std::fs::remove_dir_all(&staging);
        // Another onebash copied the same commit first: as good.
        if !dest.is_dir() {
            return Err(cache_error("make", &dest)(err));
        }
    }
    Ok(dest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(list: &[&str]) -> Vec<String> {
        list.iter().map(|p| (*p).to_owned()).collect()
    }

    /// The folders are those holding a marker; their files are every file
    /// under them, and nothing else of the repo.
    #[test]
    fn the_folders_are_those_holding_a_marker() {
        let files = paths(&[
            "README.md",
            "tasks/a/task.toml",
            "tasks/a/tests/test.sh",
            "tasks/ab/instruction.md",
            "tasks/b/task.toml",
            "tasks/b/environment/Dockerfile",
            "other/x.json",
        ]);
        let Some((roots, under)) = folder_files(&files, &["task.toml"]) else {
            panic!("markers");
        };
        assert_eq!(roots, ["tasks/a", "tasks/b"]);
        assert_eq!(
            under,
            [
                "tasks/a/task.toml",
                "tasks/a/tests/test.sh",
                "tasks/b/environment/Dockerfile",
                "tasks/b/task.toml"
            ]
        );
        assert!(folder_files(&paths(&["data/test.parquet"]), &["task.toml"]).is_none());
        let Some((roots, under)) = folder_files(&paths(&["task.toml", "x"]), &["task.toml"]) else {
            panic!("a marker at the root");
        };
        assert_eq!((roots, under), (paths(&[""]), paths(&["task.toml", "x"])));
    }

    /// The copy is of real files, flattened by folder name; two folders
    /// of one name are refused by name.
    #[test]
    fn folders_are_copied_flat_and_one_name_twice_is_refused() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let blob = tmp.path().join("blob");
        std::fs::write(&blob, "x = 1\n").expect("write");
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&blob, &link).expect("link");
        let roots = paths(&["tasks/a"]);
        let dir = materialize(
            tmp.path(),
            "c0",
            "hf:o/n",
            &roots,
            &[("tasks/a/task.toml", link.as_path())],
        )
        .expect("copied");
        let copied = dir.join("a/task.toml");
        assert!(
            !std::fs::symlink_metadata(&copied)
                .expect("meta")
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(&copied).expect("read"), "x = 1\n");
        let err = materialize(tmp.path(), "c1", "hf:o/n", &paths(&["x/a", "y/a"]), &[])
            .expect_err("one name twice")
            .to_string();
        assert!(
            err.contains("x/a and y/a are both folders named a"),
            "{err}"
        );
    }
}
