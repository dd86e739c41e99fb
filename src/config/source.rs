//! Where a run's tasks come from: a JSONL task file, a folder a benchmark
//! reads (`task::load_path`), a registry's dataset a benchmark reads by
//! name (`task::load_reference`), or a dataset on the Hugging Face Hub
//! (`hf:OWNER/NAME`, or a short name of `task::datasets`). One function, [`load`], for `run`, `validate`
//! and `pull`, so the three read the same tasks from the same argument.
//!
//! A dataset's rows go through the same checks as a task file's lines, each
//! error as `REFERENCE:ROW: what is wrong`. What was read (the commit, the
//! files and their hashes) is kept as [`DatasetRecord`] for run.json, so a
//! resume reads the same commit again, from the cache, with no network.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::checkout::CheckoutError;
use crate::dataset::{Dataset, DatasetError, DatasetRef, HubSettings, RowError};
use crate::task::{
    FetchedFolder, FolderError, FolderFetch, LineError, LoadOptions, ReferenceContext, Referenced,
    RegistryRecord, TaskFile, TaskFileError, TaskSpec, load_tasks, parse_rows,
};

/// The tasks of the argument, and what identifies them.
#[derive(Debug)]
pub(crate) struct Loaded {
    pub tasks: Vec<TaskSpec>,
    /// sha256 of the task file's bytes; for a dataset, of its files' hashes
    /// in order ([`Dataset::content_sha256`]).
    pub sha256: String,
    /// What was read, when the tasks are a dataset's rows.
    pub dataset: Option<DatasetRecord>,
    /// What was read, when the tasks are a registry's dataset.
    pub registry: Option<RegistryRecord>,
    /// Files the sandbox must hide too: the Hub token's file, when the
    /// token came from one.
    pub hidden: Vec<PathBuf>,
    pub warnings: Vec<String>,
}

/// A dataset as a run read it: in run.json's settings, and (as
/// [`DatasetRecord::fingerprint`]) in its fingerprint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct DatasetRecord {
    /// The argument as typed (`swe-bench-lite`, `hf:acme/tasks@v1:dev`).
    pub reference: String,
    /// `OWNER/NAME` on the Hub.
    pub repo: String,
    /// The revision asked for (`main` when none was).
    pub revision: String,
    /// The commit it resolved to.
    pub sha: String,
    pub split: String,
    pub files: Vec<DatasetFileRecord>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct DatasetFileRecord {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Its git blob id (of the LFS pointer, for an LFS file).
    pub oid: String,
    pub size: u64,
}

impl DatasetRecord {
    /// What a resume and the shards of a merge must agree on: the repo,
    /// the commit and the split (not how the revision was named).
    pub(crate) fn fingerprint(&self) -> String {
        format!("{}@{}:{}", self.repo, self.sha, self.split)
    }
}

/// How [`load`] reads a dataset beyond its reference.
#[derive(Clone, Default)]
pub(crate) struct DatasetContext {
    /// `HF_TOKEN`, taken out of the environment by `main`.
    pub token: Option<String>,
    /// onebash's cache; datasets go into its `datasets/`.
    pub cache_dir: PathBuf,
    /// A commit to read instead of resolving the revision: what an earlier
    /// attempt of the run read (`--resume`).
    pub pinned_sha: Option<String>,
    /// `--registry`: the registry a registry's dataset is read from.
    pub registry: Option<String>,
    /// What an earlier attempt of the run read of a registry's dataset
    /// (`--resume`): its tasks at their commits.
    pub pinned_registry: Option<RegistryRecord>,
}

impl std::fmt::Debug for DatasetContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatasetContext")
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("cache_dir", &self.cache_dir)
            .field("pinned_sha", &self.pinned_sha)
            .field("registry", &self.registry)
            .field("pinned_registry", &self.pinned_registry)
            .finish()
    }
}

/// Why the tasks could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Tasks(#[from] TaskFileError),
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    /// A file of the dataset that cannot be read at all.
    #[error(transparent)]
    File(RowError),
}

impl SourceError {
    /// The Hub could not be reached and nothing usable was cached.
    pub(crate) fn hub_unreachable(&self) -> bool {
        match self {
            SourceError::Dataset(err) => err.unreachable(),
            SourceError::Tasks(err) => err.unreachable(),
            SourceError::File(_) => false,
        }
    }
}

/// Reads the tasks `raw` names (see the module's comment); `options` as
/// for a task file. A short name's dataset defaults `--image` to the
/// image naming its benchmark declares.
pub(crate) fn load(
    raw: &Path,
    options: &LoadOptions,
    context: &DatasetContext,
) -> Result<Loaded, SourceError> {
    let mut loaded = load_any(raw, options, context)?;
    if let (Some(registry), None) = (&context.registry, &loaded.registry) {
        loaded.warnings.push(format!(
            "--registry {registry} is not read: {} is not a registry's dataset",
            raw.display()
        ));
    }
    Ok(loaded)
}

/// [`load`], before the warning of a `--registry` not read.
fn load_any(
    raw: &Path,
    options: &LoadOptions,
    context: &DatasetContext,
) -> Result<Loaded, SourceError> {
    if let Some(referenced) = raw.to_str().and_then(|raw| {
        let reference = ReferenceContext {
            registry: context.registry.clone(),
            pinned: context.pinned_registry.clone(),
        };
        let folders = RepoFolders {
            cache_dir: &context.cache_dir,
        };
        crate::task::load_reference(raw, &reference, &folders)
    }) {
        let Referenced {
            file,
            record,
            mut warnings,
        } = referenced?;
        warnings.extend(file.warnings);
        return Ok(Loaded {
            tasks: file.tasks,
            sha256: file.sha256,
            dataset: None,
            registry: Some(record),
            hidden: Vec::new(),
            warnings,
        });
    }
    let known = crate::task::datasets();
    let reference = raw
        .to_str()
        .and_then(|raw| DatasetRef::parse(raw, &known))
        .transpose()?;
    let Some(reference) = reference else {
        let TaskFile {
            tasks,
            sha256,
            warnings,
        } = match crate::task::load_path(raw) {
            Some(loaded) => loaded?,
            None => load_tasks(raw, options)?,
        };
        return Ok(Loaded {
            tasks,
            sha256,
            dataset: None,
            registry: None,
            hidden: Vec::new(),
            warnings,
        });
    };
    let typed = raw.display().to_string();
    let settings = HubSettings::from_env(context.token.clone(), &context.cache_dir);
    let mut asked = reference.clone();
    if let Some(sha) = &context.pinned_sha {
        asked.revision = Some(sha.clone());
    }
    let dataset = crate::dataset::open_with(&asked, &settings, &crate::task::folder_markers())?;
    let mut warnings = dataset.warnings.clone();
    let tasks = match &dataset.folders {
        // A repo of task folders: its folders, copied out, read as a
        // folder is, with a folder's warnings.
        Some(folders) => {
            let file = match crate::task::load_path(folders) {
                Some(loaded) => loaded?,
                None => load_tasks(folders, options)?,
            };
            warnings.extend(file.warnings);
            file.tasks
        }
        None => {
            let mut options = options.clone();
            if options.image.is_none()
                && let Some(image) = reference.alias.and_then(|alias| alias.image)
            {
                options.image = Some(image.to_owned());
            }
            tasks_of(&dataset, &typed, &options)?
        }
    };
    Ok(Loaded {
        tasks,
        sha256: dataset.content_sha256(),
        dataset: Some(record_of(&dataset, &reference, typed)),
        registry: None,
        hidden: settings.token_file.clone().into_iter().collect(),
        warnings,
    })
}

/// Folders of repos at commits through the checkout stage's repo cache
/// (`checkout::repo_folder`), for a source whose tasks are such folders.
struct RepoFolders<'a> {
    cache_dir: &'a Path,
}

impl FolderFetch for RepoFolders<'_> {
    fn folder(
        &self,
        repo: &str,
        rev: &str,
        path: &str,
        may_fetch: bool,
    ) -> Result<FetchedFolder, FolderError> {
        match crate::checkout::repo_folder(self.cache_dir, repo, rev, path, may_fetch) {
            Ok(folder) => Ok(FetchedFolder {
                dir: folder.dir,
                commit: folder.commit,
                fetched: folder.fetched,
                warning: folder.warning,
            }),
            Err(err) => Err(FolderError {
                repo_unreachable: matches!(
                    err,
                    CheckoutError::Fetch { .. } | CheckoutError::NoRepoPath { .. }
                ),
                source: Box::new(err),
            }),
        }
    }
}

/// The dataset's rows as tasks. Rows have no folder of their own: a
/// relative repo path is taken from the current folder. A row that cannot
/// be read is a bad line; a file that cannot be read at all ends the
/// reading and is the error.
fn tasks_of(
    dataset: &Dataset,
    typed: &str,
    options: &LoadOptions,
) -> Result<Vec<TaskSpec>, SourceError> {
    let mut unreadable: Option<RowError> = None;
    let rows = dataset
        .rows()
        .map_while(|row| match row {
            Ok((number, fields)) => Some((number, Ok(fields))),
            Err(RowError {
                row: Some(number),
                place,
                why,
                ..
            }) => Some((number, Err(LineError::Unreadable { place, why }))),
            Err(error) => {
                unreadable = Some(error);
                None
            }
        })
        .collect::<Vec<_>>();
    if let Some(error) = unreadable {
        return Err(SourceError::File(error));
    }
    Ok(parse_rows(rows, typed, Path::new("."), options)?)
}

/// `reference` as typed: a resume asks for the commit the first attempt
/// read, and the record keeps the revision the user named (else the next
/// resume would not know the record as its own).
fn record_of(dataset: &Dataset, reference: &DatasetRef, typed: String) -> DatasetRecord {
    DatasetRecord {
        reference: typed,
        repo: dataset.reference.repo.clone(),
        revision: reference.revision_or_main().to_owned(),
        sha: dataset.sha.clone(),
        split: dataset.split.clone(),
        files: dataset
            .files
            .iter()
            .map(|file| DatasetFileRecord {
                path: file.path.clone(),
                sha256: file.sha256.clone(),
                oid: file.oid.clone(),
                size: file.size,
            })
            .collect(),
    }
}

/// The commit an earlier attempt of the run in `out_dir` read, when it
/// read the dataset `raw` names: a resume reads it again. Only this key of
/// run.json is read (`RunManifest` is written from a `RunConfig`, which is
/// built from this).
pub(crate) fn pinned_by(out_dir: &Path, raw: &Path) -> Option<String> {
    let path = crate::run_folder::RunFolder::at(out_dir).run_json();
    let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    let record: DatasetRecord =
        serde_json::from_value(manifest.get("settings")?.get("dataset")?.clone()).ok()?;
    let known = crate::task::datasets();
    let reference = raw
        .to_str()
        .and_then(|raw| DatasetRef::parse(raw, &known))?
        .ok()?;
    // Another dataset, or the same one at another revision, is not pinned:
    // the fingerprints then differ and the resume is refused as such.
    let asked = reference.revision.as_deref().unwrap_or("main");
    let same_split = reference
        .split
        .as_ref()
        .is_none_or(|split| *split == record.split);
    (record.repo == reference.repo && same_split && record.revision == asked).then_some(record.sha)
}

/// The registry's dataset an earlier attempt of the run in `out_dir`
/// read, tasks and commits, when it read one: a resume reads them again
/// (the reference decides whether it is the same dataset). Only this key of
/// run.json is read.
pub(crate) fn pinned_registry(out_dir: &Path) -> Option<RegistryRecord> {
    let path = crate::run_folder::RunFolder::at(out_dir).run_json();
    let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    serde_json::from_value(manifest.get("settings")?.get("registry")?.clone()).ok()
}
