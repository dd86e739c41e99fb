//! Opening a dataset ([`open`]): the revision resolved to a commit, the
//! split's files found, what the cache lacks downloaded and checked; the
//! result is a [`Dataset`] whose files are all on disk.
//!
//! Owns when the network is asked: never for a commit sha already cached
//! or offline (`HF_HUB_OFFLINE`); for a named revision (`main`, a tag)
//! always, falling back to the cached `refs/` with a warning when the Hub
//! cannot be reached. Reading the rows is `rows.rs`'s.

use std::future::Future;

use sha2::{Digest as _, Sha256};

use crate::dataset::cache::{self, CacheIo, FileHash, Manifest, RepoCache};
use crate::dataset::error::DatasetError;
use crate::dataset::folders::{FOLDERS, folder_files, materialize};
use crate::dataset::hub::{Hub, RevisionInfo, TreeFile};
use crate::dataset::reference::{DatasetRef, is_commit_sha};
use crate::dataset::settings::HubSettings;
use crate::dataset::splits;

/// A split of a dataset at one commit, its files in the cache.
#[derive(Debug, Clone)]
pub(crate) struct Dataset {
    /// As resolved: `revision` the commit sha, `split` the split read.
    pub(crate) reference: DatasetRef,
    /// The commit, 40 hex digits.
    pub(crate) sha: String,
    pub(crate) split: String,
    /// The split's files, sorted by path.
    pub(crate) files: Vec<DataFile>,
    /// What the caller should tell the user (the cache used because the
    /// Hub could not be reached).
    pub(crate) warnings: Vec<String>,
    /// When the repo is made of folders (its split [`FOLDERS`]): the
    /// folder holding a real copy of each, by name.
    pub(crate) folders: Option<std::path::PathBuf>,
}

/// One file of a split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DataFile {
    /// Its path in the repo.
    pub(crate) path: String,
    /// Where it is on disk (a link into the cache's blobs).
    pub(crate) local: std::path::PathBuf,
    /// The content's sha256 (LFS files, which Parquet files on the Hub
    /// are).
    pub(crate) sha256: Option<String>,
    /// The git blob sha1 (of the pointer, for an LFS file).
    pub(crate) oid: String,
    pub(crate) size: u64,
}

impl Dataset {
    /// A stable hash of what was read: sha256 over each file's path and
    /// hash (its sha256, else its git oid), in order, as hex. It stands in
    /// run.json where a task file's sha256 stands.
    pub(crate) fn content_sha256(&self) -> String {
        let mut hasher = Sha256::new();
        for file in &self.files {
            hasher.update(file.path.as_bytes());
            hasher.update([0]);
            hasher.update(file.sha256.as_deref().unwrap_or(&file.oid).as_bytes());
            hasher.update([b'\n']);
        }
        cache::hex(&hasher.finalize())
    }
}

/// [`open_with`] with no folder markers: a split, as the tests of splits
/// open it.
#[cfg(test)]
pub(crate) fn open(
    reference: &DatasetRef,
    settings: &HubSettings,
) -> Result<Dataset, DatasetError> {
    open_with(reference, settings, &[])
}

/// Opens the split `reference` names: resolves the revision (default
/// `main`) to its commit, finds the split's files and downloads what the
/// cache lacks, checked against the Hub's hashes. A repo holding any of
/// `markers` (when no split is asked for) is read as folders instead:
/// every file of each folder holding a marker (folders.rs), copied out of
/// the snapshot into [`Dataset::folders`]. Blocking: it runs its own
/// single-threaded runtime, so it must not be called from inside one.
pub(crate) fn open_with(
    reference: &DatasetRef,
    settings: &HubSettings,
    markers: &[&str],
) -> Result<Dataset, DatasetError> {
    let opening = Opening {
        reference,
        settings,
        markers,
        label: reference.to_string(),
        cache: RepoCache::new(&settings.cache_dir, &reference.repo),
    };
    let mut dataset = opening.run()?;
    if dataset.split == FOLDERS {
        let manifest_files: Vec<String> = dataset.files.iter().map(|f| f.path.clone()).collect();
        if let Some((roots, _)) = folder_files(&manifest_files, markers) {
            let files: Vec<(&str, &std::path::Path)> = dataset
                .files
                .iter()
                .map(|f| (f.path.as_str(), f.local.as_path()))
                .collect();
            let copied = materialize(
                opening.cache.root(),
                &dataset.sha,
                &opening.label,
                &roots,
                &files,
            )?;
            dataset.folders = Some(copied);
        }
    }
    Ok(dataset)
}

/// One call of [`open`].
struct Opening<'a> {
    reference: &'a DatasetRef,
    settings: &'a HubSettings,
    /// The files that make a folder of a repo read as folders.
    markers: &'a [&'a str],
    /// The reference as errors name it.
    label: String,
    cache: RepoCache,
}

impl Opening<'_> {
    fn run(&self) -> Result<Dataset, DatasetError> {
        let revision = self.reference.revision_or_main();
        let named = !is_commit_sha(revision);
        if !named || self.settings.offline {
            let sha = match named {
                true => self.cache.read_ref(revision),
                false => Some(revision.to_owned()),
            };
            if let Some(dataset) = sha.map(|sha| self.cached(&sha)).transpose()?.flatten() {
                return Ok(dataset);
            }
        }
        if self.settings.offline {
            return Err(self.not_cached(revision));
        }
        let net = Net::new(self.settings, &self.reference.repo, &self.label)?;
        let info = match net.block_on(net.hub.revision(revision)) {
            Ok(info) => info,
            Err(err @ DatasetError::Unreachable { .. }) if named => {
                return self.fall_back(revision, err);
            }
            Err(err) => return Err(err),
        };
        if !is_commit_sha(&info.sha) {
            return Err(self.bad_listing(format!(
                "the revision's `sha` is `{}`, not a commit sha",
                info.sha
            )));
        }
        match self.fill(&net, &info) {
            Ok(dataset) => {
                // Only now: a fill cut short leaves the commit `revision`
                // was at before, which the fallback can still use.
                if named {
                    self.cache
                        .write_ref(revision, &info.sha)
                        .map_err(|e| self.cache_error(e))?;
                }
                Ok(dataset)
            }
            Err(err @ DatasetError::Unreachable { .. }) if named => self.fall_back(revision, err),
            Err(err) => Err(err),
        }
    }

    /// The Hub could not be reached for `revision`: the commit it named
    /// last time, if that is cached whole, with a warning; else `err`.
    fn fall_back(&self, revision: &str, err: DatasetError) -> Result<Dataset, DatasetError> {
        let DatasetError::Unreachable { why, .. } = &err else {
            return Err(err);
        };
        let Some(sha) = self.cache.read_ref(revision) else {
            return Err(err);
        };
        let Some(mut dataset) = self.cached(&sha)? else {
            return Err(err);
        };
        dataset.warnings.push(format!(
            "the Hub at {} could not be reached ({why}); using {} as cached: `{revision}` was at commit {sha} when last seen, and may have moved since",
            self.settings.endpoint, self.label
        ));
        Ok(dataset)
    }

    /// Offline, or unreachable: what the cache lacks.
    fn not_cached(&self, revision: &str) -> DatasetError {
        let why = match self
            .cache
            .read_ref(revision)
            .or_else(|| is_commit_sha(revision).then(|| revision.to_owned()))
        {
            Some(sha) => match self.cache.read_manifest(&sha) {
                Some(_) => format!("the files of this split at commit {sha} are not"),
                None => format!("commit {sha} is not"),
            },
            None => format!("the revision `{revision}` is not"),
        };
        DatasetError::NotCached {
            dataset: self.label.clone(),
            why,
            cache: self.cache.root().to_owned(),
        }
    }

    /// The split at commit `sha` from the cache alone, if everything it
    /// needs is there; `None` when something is missing.
    fn cached(&self, sha: &str) -> Result<Option<Dataset>, DatasetError> {
        let Some(manifest) = self.cache.read_manifest(sha) else {
            return Ok(None);
        };
        let (split, paths) = self.choose(&manifest)?;
        let mut files = Vec::with_capacity(paths.len());
        for path in paths {
            let Some(hash) = manifest
                .hashes
                .get(&path)
                .filter(|h| self.cache.has_blob(h))
            else {
                return Ok(None);
            };
            files.push(self.data_file(sha, path, hash)?);
        }
        Ok(Some(self.dataset(sha, split, files)))
    }

    /// The split at the commit `info` names: hashes listed and files
    /// downloaded as the cache lacks them, under the dataset's lock.
    fn fill(&self, net: &Net<'_>, info: &RevisionInfo) -> Result<Dataset, DatasetError> {
        let _lock = self.cache.lock().map_err(|e| self.cache_error(e))?;
        // Another onebash may have filled it while this one waited.
        if let Some(dataset) = self.cached(&info.sha)? {
            return Ok(dataset);
        }
        let mut manifest = self
            .cache
            .read_manifest(&info.sha)
            .unwrap_or_else(|| Manifest {
                repo: self.reference.repo.clone(),
                sha: info.sha.clone(),
                configs: info
                    .card
                    .as_ref()
                    .and_then(|card| card.get("configs"))
                    .cloned(),
                files: info.files(),
                hashes: Default::default(),
            });
        let (split, paths) = self.choose(&manifest)?;
        if let Some(path) = paths.iter().find(|p| !cache::safe_path(p)) {
            return Err(self.bad_listing(format!("the file name `{path}` is not a plain path")));
        }
        if paths.iter().any(|p| !manifest.hashes.contains_key(p)) {
            let listed = net.block_on(net.hub.tree(&info.sha, common_folder(&paths)))?;
            for path in &paths {
                let file = listed.iter().find(|f| &f.path == path).ok_or_else(|| {
                    DatasetError::MissingFile {
                        dataset: self.label.clone(),
                        path: path.clone(),
                    }
                })?;
                let hash = hash_of(file);
                // The hash names the blob's file: only hex is taken.
                if !hash.well_formed() {
                    return Err(
                        self.bad_listing(format!("the listing gives no usable hash of {path}"))
                    );
                }
                manifest.hashes.insert(path.clone(), hash);
            }
            // Written before the downloads: a cut download resumes with
            // the hashes known.
            self.cache
                .write_manifest(&manifest)
                .map_err(|e| self.cache_error(e))?;
        }
        let mut files = Vec::with_capacity(paths.len());
        for path in paths {
            let hash = manifest.hashes[&path].clone();
            if !self.cache.has_blob(&hash) {
                self.download(net, &info.sha, &path, &hash)?;
            }
            files.push(self.data_file(&info.sha, path, &hash)?);
        }
        Ok(self.dataset(&info.sha, split, files))
    }

    /// Downloads one file into its blob, checked; a download whose hash is
    /// wrong is deleted and fetched once more before it is an error.
    fn download(
        &self,
        net: &Net<'_>,
        sha: &str,
        path: &str,
        hash: &FileHash,
    ) -> Result<(), DatasetError> {
        let partial = self
            .cache
            .prepare_partial(hash)
            .map_err(|e| self.cache_error(e))?;
        let file = TreeFile {
            path: path.to_owned(),
            oid: hash.oid.clone(),
            sha256: hash.sha256.clone(),
            size: hash.size,
        };
        let mut tries = 0;
        loop {
            tries += 1;
            net.block_on(net.hub.download(sha, &file, &partial))?;
            match self.cache.install(hash).map_err(|e| self.cache_error(e))? {
                Ok(()) => return Ok(()),
                Err(_) if tries < 2 => continue,
                Err(mismatch) => {
                    return Err(DatasetError::Corrupt {
                        dataset: self.label.clone(),
                        path: path.to_owned(),
                        algorithm: mismatch.algorithm,
                        expected: mismatch.expected,
                        got: mismatch.got,
                    });
                }
            }
        }
    }

    fn choose(&self, manifest: &Manifest) -> Result<(String, Vec<String>), DatasetError> {
        let requested = self.reference.split.as_deref();
        if requested.is_none()
            && let Some((_, files)) = folder_files(&manifest.files, self.markers)
        {
            return Ok((FOLDERS.to_owned(), files));
        }
        let layout = splits::layout(manifest.card().as_ref(), &manifest.files, requested);
        splits::choose(&layout, requested, &self.label)
    }

    fn data_file(
        &self,
        sha: &str,
        path: String,
        hash: &FileHash,
    ) -> Result<DataFile, DatasetError> {
        let local = self
            .cache
            .link(sha, &path, hash)
            .map_err(|e| self.cache_error(e))?;
        Ok(DataFile {
            path,
            local,
            sha256: hash.sha256.clone(),
            oid: hash.oid.clone(),
            size: hash.size,
        })
    }

    fn dataset(&self, sha: &str, split: String, files: Vec<DataFile>) -> Dataset {
        Dataset {
            reference: DatasetRef {
                repo: self.reference.repo.clone(),
                revision: Some(sha.to_owned()),
                split: Some(split.clone()),
                alias: self.reference.alias,
            },
            sha: sha.to_owned(),
            split,
            files,
            warnings: Vec::new(),
            folders: None,
        }
    }

    fn cache_error(&self, err: CacheIo) -> DatasetError {
        DatasetError::Cache {
            dataset: self.label.clone(),
            action: err.action,
            path: err.path,
            source: err.source,
        }
    }

    fn bad_listing(&self, why: String) -> DatasetError {
        DatasetError::BadAnswer {
            dataset: self.label.clone(),
            url: format!(
                "{}/api/datasets/{}",
                self.settings.endpoint, self.reference.repo
            ),
            why,
        }
    }
}

fn hash_of(file: &TreeFile) -> FileHash {
    FileHash {
        oid: file.oid.clone(),
        sha256: file.sha256.clone(),
        size: file.size,
    }
}

/// The deepest folder holding all of `paths` (`""`: the repo's root), so
/// one listing covers them and no more.
fn common_folder(paths: &[String]) -> &str {
    let Some(first) = paths.first() else {
        return "";
    };
    let mut folder = first.rsplit_once('/').map_or("", |(dir, _)| dir);
    for path in &paths[1..] {
        while !folder.is_empty() && !path.starts_with(&format!("{folder}/")) {
            folder = folder.rsplit_once('/').map_or("", |(dir, _)| dir);
        }
    }
    folder
}

/// The Hub client and the runtime its requests run on: a current-thread
/// runtime of this call's own, as callers are plain threads. Cache work
/// stays outside it, between the requests.
struct Net<'a> {
    runtime: tokio::runtime::Runtime,
    hub: Hub<'a>,
}

impl<'a> Net<'a> {
    fn new(
        settings: &'a HubSettings,
        repo: &'a str,
        label: &'a str,
    ) -> Result<Net<'a>, DatasetError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|err| DatasetError::Client {
                dataset: label.to_owned(),
                why: format!("no runtime: {err}"),
            })?;
        Ok(Net {
            runtime,
            hub: Hub::new(settings, repo, label)?,
        })
    }

    fn block_on<T>(&self, future: impl Future<Output = T>) -> T {
        self.runtime.block_on(future)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_listing_covers_the_deepest_common_folder() {
        let paths = |list: &[&str]| list.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            common_folder(&paths(&["data/test-0.parquet", "data/test-1.parquet"])),
            "data"
        );
        assert_eq!(common_folder(&paths(&["a/b/x", "a/bc/y"])), "a");
        assert_eq!(common_folder(&paths(&["a/b/x", "a/b/c/y"])), "a/b");
        assert_eq!(common_folder(&paths(&["test.jsonl"])), "");
        assert_eq!(common_folder(&paths(&["data/x", "other/y"])), "");
        assert_eq!(common_folder(&[]), "");
    }

    #[test]
    fn the_content_hash_is_over_paths_and_hashes_in_order() {
        let file = |path: &str, sha256: Option<&str>| DataFile {
            path: path.into(),
            local: "/x".into(),
            sha256: sha256.map(str::to_owned),
            oid: format!("oid-{path}"),
            size: 1,
        };
        let dataset = |files| Dataset {
            reference: DatasetRef {
                repo: "o/n".into(),
                revision: None,
                split: None,
                alias: None,
            },
            sha: "c".repeat(40),
            split: "test".into(),
            files,
            warnings: Vec::new(),
            folders: None,
        };
        let a = dataset(vec![file("a", Some("1")), file("b", None)]);
        let same = dataset(vec![file("a", Some("1")), file("b", None)]);
        let other = dataset(vec![file("a", Some("2")), file("b", None)]);
        assert_eq!(a.content_sha256(), same.content_sha256());
        assert_ne!(a.content_sha256(), other.content_sha256());
        assert_eq!(a.content_sha256().len(), 64);
    }
}
