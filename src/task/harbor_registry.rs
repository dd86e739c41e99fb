//! Harbor's tasks by name: `harbor:NAME[@VERSION]` read from a registry
//! in Harbor's `registry.json` format (a list of datasets, each a name, a
//! version, a description and its tasks, each task a `git_url`, a
//! `git_commit_id` and a `path`), as `harbor/models/registry.py` and
//! `harbor/registry/client/json.py` of Harbor 0.26 read it.
//!
//! Owns the reference, reading the registry (a file or a URL), choosing
//! the dataset and version as Harbor does ([`newest`]), fetching each
//! task's folder through the repo cache (`checkout::repo_folder`: by
//! commit, each repo fetched at most once) and reading it as harbor.rs
//! reads a task folder. A task whose folder cannot be had (its repo cannot
//! be fetched, its commit or path is not there, the folder is not a task
//! folder) is still a task, whose handle ([`Unavailable`]) makes it a
//! setup error when it runs: the run goes on. What was read is the
//! [`RegistryRecord`] of run.json; a resume reads its commits again from
//! it, so it needs neither the registry nor the network.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::task::benchmark::{Benchmark, Code, Pull};
use crate::task::error::RegistryError;
use crate::task::harbor::UnknownKeys;
use crate::task::source::{
    FolderFetch, ParsedLine, RecipeResult, RecordedTask, ReferenceContext, Referenced,
    RegistryRecord, Source,
};
use crate::task::spec::{TaskFile, TaskFileError, TaskId, TaskSpec};

/// What makes a task argument a dataset of a Harbor registry.
pub(crate) const PREFIX: &str = "harbor:";
/// The registry Harbor reads when given none (`DEFAULT_REGISTRY_URL` in
/// `harbor/constants.py`).
pub(crate) const DEFAULT_REGISTRY: &str =
    "https://raw.githubusercontent.com/laude-institute/harbor/main/registry.json";
/// How long fetching a registry may take.
const FETCH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// A dataset of the registry (Harbor's `DatasetSpec`; its `metrics` are
/// not read: onebash reports its own).
#[derive(Debug, Clone, Deserialize)]
struct DatasetSpec {
    name: String,
    version: String,
    description: String,
    tasks: Vec<RegistryTask>,
}

/// A task of a dataset (Harbor's `RegistryTaskId`): a folder of a git
/// repo, or without `git_url` a folder on this machine.
#[derive(Debug, Clone, Deserialize)]
struct RegistryTask {
    name: String,
    #[serde(default)]
    git_url: Option<String>,
    #[serde(default)]
    git_commit_id: Option<String>,
    path: String,
}

/// Harbor's registries: the datasets they name, by name.
pub(crate) struct HarborRegistry;

pub(crate) const SOURCE: HarborRegistry = HarborRegistry;

impl Source for HarborRegistry {
    fn name(&self) -> &'static str {
        "harbor-registry"
    }

    /// `harbor:NAME[@VERSION]`: a dataset of a Harbor registry.
    fn load_reference(
        &self,
        raw: &str,
        context: &ReferenceContext,
        fetch: &dyn FolderFetch,
    ) -> Option<Result<Referenced, TaskFileError>> {
        let rest = raw.strip_prefix(PREFIX)?;
        Some(load(raw, rest, context, fetch).map_err(Into::into))
    }

    fn registry_datasets(&self, location: Option<&str>) -> Option<Result<String, TaskFileError>> {
        Some(listing(location).map_err(Into::into))
    }

    /// Its tasks come from registries, never lines.
    fn benchmark(&self, line: &ParsedLine, recipe: Option<RecipeResult>) -> Arc<dyn Benchmark> {
        let _ = recipe;
        crate::task::own::own_line(line)
    }
}

/// A registry as read: where from (a URL or a path, as given), the sha256
/// of its bytes, and its datasets in file order.
struct Registry {
    location: String,
    sha256: String,
    datasets: Vec<DatasetSpec>,
}

impl Registry {
    /// Reads the registry at `location`: a URL when it starts with
    /// `http://` or `https://`, else a file.
    fn read(location: &str) -> Result<Registry, RegistryError> {
        let bytes = if location.starts_with("http://") || location.starts_with("https://") {
            fetch(location)?
        } else {
            std::fs::read(location).map_err(|source| RegistryError::Read {
                path: PathBuf::from(location),
                source,
            })?
        };
        let datasets = serde_json::from_slice(&bytes).map_err(|source| RegistryError::Json {
            location: location.to_owned(),
            source,
        })?;
        Ok(Registry {
            location: location.to_owned(),
            sha256: format!("{:x}", Sha256::digest(&bytes)),
            datasets,
        })
    }

    /// The dataset `name` at `version`, or at the version Harbor takes
    /// when none is given ([`newest`]). Of two entries with one name and
    /// version, the later wins, as in Harbor's dict of them.
    fn dataset(&self, name: &str, version: Option<&str>) -> Result<&DatasetSpec, RegistryError> {
        let mut versions: Vec<&str> = Vec::new();
        let mut by_version: HashMap<&str, &DatasetSpec> = HashMap::new();
        for spec in self.datasets.iter().filter(|spec| spec.name == name) {
            if by_version.insert(&spec.version, spec).is_none() {
                versions.push(&spec.version);
            }
        }
        if versions.is_empty() {
            let names: Vec<&str> = self.datasets.iter().map(|s| s.name.as_str()).collect();
            return Err(RegistryError::NoDataset {
                name: name.to_owned(),
                location: self.location.clone(),
                close: close_names(name, &names),
            });
        }
        let version = version.unwrap_or_else(|| newest(&versions));
        by_version
            .get(version)
            .copied()
            .ok_or_else(|| RegistryError::NoVersion {
                name: name.to_owned(),
                version: version.to_owned(),
                location: self.location.clone(),
                versions: versions.iter().map(|v| (*v).to_owned()).collect(),
            })
    }
}

/// The registry's bytes from a URL, on a runtime of its own (the caller
/// runs before the run's).
fn fetch(url: &str) -> Result<Vec<u8>, RegistryError> {
    let failed = |source| RegistryError::Fetch {
        url: url.to_owned(),
        source,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| RegistryError::Read {
            path: PathBuf::from(url),
            source,
        })?;
    runtime.block_on(async {
        let client = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .build()
            .map_err(failed)?;
        let response = client.get(url).send().await.map_err(failed)?;
        let status = response.status();
        if !status.is_success() {
            return Err(RegistryError::Status {
                url: url.to_owned(),
                status: status.as_u16(),
            });
        }
        Ok(response.bytes().await.map_err(failed)?.to_vec())
    })
}

/// The version Harbor takes when none is named (`resolve_version` in
/// `harbor/registry/client/base.py`): `head` if there is one, else the
/// highest PEP 440 version, else the last in string order. Of equal
/// versions (`1.0`, `1.0.0`) the first listed.
pub(crate) fn newest<'a>(versions: &[&'a str]) -> &'a str {
    if versions.contains(&"head") {
        return "head";
    }
    let mut best: Option<(Pep440, &str)> = None;
    for version in versions {
        if let Some(parsed) = Pep440::parse(version)
            && best.as_ref().is_none_or(|(b, _)| parsed > *b)
        {
            best = Some((parsed, version));
        }
    }
    match best {
        Some((_, version)) => version,
        None => versions.iter().max().copied().unwrap_or_default(),
    }
}

/// A PEP 440 version as `packaging.version.Version` orders it: epoch,
/// release (trailing zeros ignored), pre-release, post-release,
/// development release, local label.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Pep440 {
    epoch: u64,
    release: Vec<u64>,
    /// (0 for a, 1 for b, 2 for rc; number); a development release with
    /// neither pre nor post sorts before every pre-release (-1), a final
    /// release after them (3).
    pre: (i8, u64),
    /// `None` sorts first.
    post: Option<u64>,
    /// No development part sorts last.
    dev: (bool, u64),
    /// None sorts first.
    local: Vec<LocalPart>,
}

/// A part of a local label: letters sort before numbers, numbers by value.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum LocalPart {
    Letters(String),
    Number(u64),
}

static PEP440: LazyLock<regex::Regex> = LazyLock::new(|| {
    // The grammar of packaging's VERSION_PATTERN, in the same order.
    regex::Regex::new(
        r"(?ix)^\s*v?
        (?:(?P<epoch>[0-9]+)!)?
        (?P<release>[0-9]+(?:\.[0-9]+)*)
        (?:[-_.]?(?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?P<pre_n>[0-9]+)?)?
        (?:-(?P<post_n1>[0-9]+)|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>[0-9]+)?)?
        (?:[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>[0-9]+)?)?
        (?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?
        \s*$",
    )
    .unwrap_or_else(|err| unreachable!("a fixed pattern: {err}"))
});

impl Pep440 {
    fn parse(text: &str) -> Option<Pep440> {
        let caps = PEP440.captures(text)?;
        let number = |name: &str| -> Option<u64> { caps.name(name)?.as_str().parse().ok() };
        let mut release: Vec<u64> = caps
            .name("release")?
            .as_str()
            .split('.')
            .map(|part| part.parse().ok())
            .collect::<Option<_>>()?;
        while release.len() > 1 && release.last() == Some(&0) {
            release.pop();
        }
        let post = if caps.name("post_n1").is_some() {
            number("post_n1")
        } else if caps.name("post_l").is_some() {
            Some(number("post_n2").unwrap_or(0))
        } else {
            None
        };
        let dev = caps.name("dev_l").map(|_| number("dev_n").unwrap_or(0));
        let pre = match caps.name("pre_l").map(|l| l.as_str().to_lowercase()) {
            Some(label) => {
                let rank = match label.as_str() {
                    "a" | "alpha" => 0,
                    "b" | "beta" => 1,
                    _ => 2,
                };
                (rank, number("pre_n").unwrap_or(0))
            }
            None if post.is_none() && dev.is_some() => (-1, 0),
            None => (3, 0),
        };
        Some(Pep440 {
            epoch: number("epoch").unwrap_or(0),
            release,
            pre,
            post,
            dev: dev.map_or((true, 0), |n| (false, n)),
            local: caps
                .name("local")
                .map(|l| {
                    l.as_str()
                        .split(['-', '_', '.'])
                        .map(|part| match part.parse() {
                            Ok(n) => LocalPart::Number(n),
                            Err(_) => LocalPart::Letters(part.to_lowercase()),
                        })
                        .collect()
                })
                .unwrap_or_default(),
        })
    }
}

/// The names among `names` close to `name` (a few edits apart, or one
/// holding the other), closest first, at most five.
fn close_names(name: &str, names: &[&str]) -> Vec<String> {
    let mut scored: Vec<(usize, &str)> = names
        .iter()
        .filter_map(|candidate| {
            let distance = edit_distance(name, candidate);
            let near = distance <= (name.chars().count() / 3).max(2)
                || candidate.contains(name)
                || name.contains(candidate);
            near.then_some((distance, *candidate))
        })
        .collect();
    scored.sort();
    scored.dedup();
    scored
        .into_iter()
        .take(5)
        .map(|(_, n)| n.to_owned())
        .collect()
}

/// Levenshtein's distance between two names, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(previous + 1);
        }
    }
    row[b.len()]
}

/// The datasets of the registry at `location` (Harbor's when `None`), one
/// line each: `NAME@VERSION`, its number of tasks, its description's first
/// line; then how to run one.
pub(crate) fn listing(location: Option<&str>) -> Result<String, RegistryError> {
    use std::fmt::Write as _;
    let registry = Registry::read(location.unwrap_or(DEFAULT_REGISTRY))?;
    let names: Vec<String> = registry
        .datasets
        .iter()
        .map(|spec| format!("{PREFIX}{}@{}", spec.name, spec.version))
        .collect();
    let width = names.iter().map(String::len).max().unwrap_or(0);
    let mut out = String::new();
    for (name, spec) in names.iter().zip(&registry.datasets) {
        let tasks = crate::sys::words::count(spec.tasks.len(), "task", "tasks");
        let about = spec.description.lines().next().unwrap_or("");
        let _ = writeln!(out, "{name:width$}  {tasks:>10}  {about}");
    }
    let flag = match location {
        Some(location) => format!(" --registry {location}"),
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "\n{} in {} (sha256 {}). Run one: onebash run {PREFIX}NAME@VERSION{flag}; {PREFIX}NAME takes its newest version.",
        crate::sys::words::count(registry.datasets.len(), "dataset", "datasets"),
        registry.location,
        registry.sha256,
    );
    Ok(out)
}

/// `NAME` and `VERSION` of `harbor:NAME[@VERSION]` (after the prefix),
/// split at the first `@` as Harbor does.
fn parse_reference<'a>(
    raw: &str,
    rest: &'a str,
) -> Result<(&'a str, Option<&'a str>), RegistryError> {
    let bad = |why| RegistryError::BadReference {
        raw: raw.to_owned(),
        why,
    };
    let (name, version) = match rest.split_once('@') {
        Some((name, version)) => (name, Some(version)),
        None => (rest, None),
    };
    if name.trim().is_empty() {
        return Err(bad("the dataset's name is empty"));
    }
    if version.is_some_and(|v| v.trim().is_empty()) {
        return Err(bad("the version after `@` is empty"));
    }
    Ok((name, version))
}

/// The tasks of the registry dataset `raw` names (`harbor:NAME[@VERSION]`,
/// `rest` after the prefix), their folders fetched by `fetch`.
fn load(
    raw: &str,
    rest: &str,
    context: &ReferenceContext,
    fetch: &dyn FolderFetch,
) -> Result<Referenced, RegistryError> {
    let (name, version) = parse_reference(raw, rest)?;
    // A resume reads the tasks and commits its run read before, from
    // run.json: no registry, and no network for what the cache holds.
    let pinned = context
        .pinned
        .as_ref()
        .filter(|record| record.reference == raw);
    let (registry, registry_sha256, dataset, entries) = match pinned {
        Some(record) => (
            record.registry.clone(),
            record.registry_sha256.clone(),
            record.dataset.clone(),
            record.tasks.clone(),
        ),
        None => {
            let location = context.registry.as_deref().unwrap_or(DEFAULT_REGISTRY);
            let registry = Registry::read(location)?;
            let spec = registry.dataset(name, version)?;
            let dataset = format!("{}@{}", spec.name, spec.version);
            let entries = entries_of(spec, &dataset)?;
            (registry.location, registry.sha256, dataset, entries)
        }
    };
    let mut fetcher = Fetcher {
        fetch,
        tried: HashMap::new(),
        warnings: Vec::new(),
        unknown: UnknownKeys::default(),
    };
    let mut hasher = Sha256::new();
    hasher.update(dataset.as_bytes());
    let mut tasks = Vec::new();
    let mut recorded = Vec::new();
    for entry in entries {
        let id = TaskId::parse(&entry.id).map_err(|_| RegistryError::BadPath {
            dataset: dataset.clone(),
            task: entry.id.clone(),
            path: entry.path.clone(),
            why: "ends in a name that is not a task id",
        })?;
        let (task, commit) = fetcher.task(id, &entry);
        // The tasks are each its repo, commit and path (a commit pins the
        // files): the full sha read, so that shards reading a branch at
        // different times disagree; the one asked for when none was read.
        for part in [
            entry.id.as_str(),
            entry.git_url.as_deref().unwrap_or(""),
            commit
                .as_deref()
                .or(entry.git_commit_id.as_deref())
                .unwrap_or("HEAD"),
            entry.path.as_str(),
        ] {
            hasher.update(part.as_bytes());
            hasher.update([0]);
        }
        tasks.push(task);
        recorded.push(RecordedTask { commit, ..entry });
    }
    Ok(Referenced {
        file: TaskFile {
            tasks,
            sha256: format!("{:x}", hasher.finalize()),
            warnings: fetcher.unknown.warnings(),
        },
        record: RegistryRecord {
            reference: raw.to_owned(),
            registry,
            registry_sha256,
            dataset,
            tasks: recorded,
        },
        warnings: fetcher.warnings,
    })
}

/// The dataset's tasks as run.json records them, their paths checked as
/// Harbor checks them; none resolved yet.
fn entries_of(spec: &DatasetSpec, dataset: &str) -> Result<Vec<RecordedTask>, RegistryError> {
    if spec.tasks.is_empty() {
        return Err(RegistryError::Empty {
            dataset: dataset.to_owned(),
        });
    }
    let entries = spec
        .tasks
        .iter()
        .map(|task| {
            let bad = |why| RegistryError::BadPath {
                dataset: dataset.to_owned(),
                task: task.name.clone(),
                path: task.path.clone(),
                why,
            };
            let path = match &task.git_url {
                Some(_) => normalized(&task.path).map_err(bad)?,
                None => task.path.clone(),
            };
            let id = Path::new(&path)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .ok_or_else(|| bad("names no folder"))?;
            TaskId::parse(&id).map_err(|_| bad("ends in a name that is not a task id"))?;
            Ok(RecordedTask {
                id,
                git_url: task.git_url.clone(),
                git_commit_id: task.git_commit_id.clone(),
                path,
                commit: None,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut seen: HashMap<&str, &RecordedTask> = HashMap::new();
    for entry in &entries {
        if let Some(first) = seen.insert(&entry.id, entry) {
            let place = |e: &RecordedTask| match &e.git_url {
                Some(url) => format!("{} of {url}", e.path),
                None => e.path.clone(),
            };
            return Err(RegistryError::DuplicateId {
                dataset: dataset.to_owned(),
                id: entry.id.clone(),
                first: place(first),
                second: place(entry),
            });
        }
    }
    Ok(entries)
}

/// A path in a repo with `..` resolved, refused when absolute or when it
/// leaves the repo (Harbor's `normalize_git_task_path`).
fn normalized(path: &str) -> Result<String, &'static str> {
    if path.starts_with('/') {
        return Err("is not relative to the repository");
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
        if part == ".." {
            parts.pop().ok_or("leaves the repository")?;
        } else {
            parts.push(part);
        }
    }
    Ok(parts.join("/"))
}

/// Fetches the tasks' folders, each repo at most once.
struct Fetcher<'a> {
    fetch: &'a dyn FolderFetch,
    /// Per repo: `None` once fetched (or found to hold a commit asked
    /// for), the fetch's error when it failed.
    tried: HashMap<String, Option<String>>,
    warnings: Vec<String>,
    /// The task.toml keys Harbor does not read, warned of once each.
    unknown: UnknownKeys,
}

impl Fetcher<'_> {
    /// The task of `entry` and the commit it was read at; an
    /// [`Unavailable`] task when its folder cannot be had.
    fn task(&mut self, id: TaskId, entry: &RecordedTask) -> (TaskSpec, Option<String>) {
        let Some(url) = &entry.git_url else {
            let task = read_or_unavailable(id, Path::new(&entry.path), entry, &mut self.unknown);
            return (task, None);
        };
        let rev = entry
            .commit
            .as_deref()
            .or(entry.git_commit_id.as_deref())
            .unwrap_or("HEAD");
        let may_fetch = !self.tried.contains_key(url);
        match self.fetch.folder(url, rev, &entry.path, may_fetch) {
            Ok(folder) => {
                if folder.fetched {
                    self.tried.insert(url.clone(), None);
                }
                self.warnings.extend(folder.warning);
                let task = read_or_unavailable(id, &folder.dir, entry, &mut self.unknown);
                (task, Some(folder.commit))
            }
            Err(err) => {
                // A repo that could not be fetched is not tried again; its
                // other tasks say why they are missing in its words.
                let reason = match self.tried.get(url) {
                    Some(Some(fetch_error)) => fetch_error.clone(),
                    _ => err.to_string(),
                };
                if err.repo_unreachable || may_fetch {
                    self.tried
                        .entry(url.clone())
                        .or_insert_with(|| err.repo_unreachable.then(|| err.to_string()));
                }
                (unavailable(id, entry, reason), None)
            }
        }
    }
}

/// The task folder at `dir`, with where it came from in its metadata; an
/// [`Unavailable`] task when it is not a task folder. Its task.toml's keys
/// Harbor does not read go to `unknown`.
fn read_or_unavailable(
    id: TaskId,
    dir: &Path,
    entry: &RecordedTask,
    unknown: &mut UnknownKeys,
) -> TaskSpec {
    match crate::task::harbor::read_task(dir) {
        Ok((mut task, _, keys)) => {
            unknown.add(&task, keys);
            let metadata = task.metadata.get_or_insert_with(Default::default);
            for (key, value) in [
                ("registry_git_url", entry.git_url.as_deref()),
                ("registry_git_commit_id", entry.git_commit_id.as_deref()),
                ("registry_path", Some(entry.path.as_str())),
            ] {
                if let Some(value) = value {
                    metadata.insert(key.to_owned(), value.into());
                }
            }
            task
        }
        Err(err) => {
            let source = match &entry.git_url {
                Some(url) => format!("{} of {url}", entry.path),
                None => entry.path.clone(),
            };
            unavailable(
                id,
                entry,
                format!("failed to read the task folder {source}: {err}"),
            )
        }
    }
}

/// A task of the registry whose folder cannot be had: it runs as a setup
/// error saying why.
#[derive(Debug)]
pub(crate) struct Unavailable {
    reason: String,
}

impl Benchmark for Unavailable {
    fn code(&self) -> Code {
        Code::Image {
            no_repo: "the task's folder could not be had",
        }
    }

    fn cannot_run(&self) -> Option<String> {
        Some(self.reason.clone())
    }

    fn pull(&self, id: &str) -> Pull {
        Pull::Refused(format!("{id} cannot run: {}", self.reason))
    }
}

fn unavailable(id: TaskId, entry: &RecordedTask, reason: String) -> TaskSpec {
    let repo = entry.git_url.clone().unwrap_or_else(|| entry.path.clone());
    TaskSpec {
        id,
        repo: repo.clone(),
        repo_location: repo,
        base_commit: entry
            .git_commit_id
            .clone()
            .unwrap_or_else(|| "HEAD".to_owned()),
        problem_statement: String::new(),
        test_command: String::new(),
        setup_command: None,
        test_patch: None,
        gold_patch: None,
        fail_to_pass: None,
        pass_to_pass: None,
        test_timeout_s: None,
        metadata: None,
        image: None,
        workdir: None,
        benchmark: Arc::new(Unavailable { reason }),
        extra: serde_json::Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::source::{FetchedFolder, FolderError};

    /// Folders "fetched" from a directory of this machine, whatever the
    /// repo and commit.
    struct LocalFolders(PathBuf);

    impl FolderFetch for LocalFolders {
        fn folder(
            &self,
            _repo: &str,
            rev: &str,
            path: &str,
            _may_fetch: bool,
        ) -> Result<FetchedFolder, FolderError> {
            Ok(FetchedFolder {
                dir: self.0.join(path),
                commit: rev.to_owned(),
                fetched: true,
                warning: None,
            })
        }
    }

    /// A task.toml key Harbor does not read is warned about once for a
    /// registry's tasks, naming the tasks that write it, as for a folder's.
    #[test]
    fn a_registry_tasks_unknown_keys_are_warned_of_once() {
        let root = tempfile::tempdir().expect("tempdir");
        let mut tasks = Vec::new();
        for (name, toml) in [
            ("a", "version = \"1.0\"\ncolour = \"red\"\n"),
            ("b", "version = \"1.0\"\ncolour = \"blue\"\n"),
            ("c", "version = \"1.0\"\n"),
        ] {
            let dir = root.path().join("tasks").join(name);
            std::fs::create_dir_all(dir.join("environment")).expect("mkdir");
            std::fs::create_dir_all(dir.join("tests")).expect("mkdir");
            for (file, text) in [
                ("task.toml", toml),
                ("instruction.md", "Do it.\n"),
                ("environment/Dockerfile", "FROM scratch\n"),
                ("tests/test.sh", "true\n"),
            ] {
                std::fs::write(dir.join(file), text).expect("write");
            }
            tasks.push(
                serde_json::json!({"name": name, "git_url": "https://r.invalid/r.git",
                "git_commit_id": "abc", "path": format!("tasks/{name}")}),
            );
        }
        let file = root.path().join("registry.json");
        let registry = serde_json::json!([{"name": "demo", "version": "1.0",
            "description": "d", "tasks": tasks}]);
        std::fs::write(&file, registry.to_string()).expect("write");
        let context = ReferenceContext {
            registry: Some(file.display().to_string()),
            pinned: None,
        };
        let read = load(
            "harbor:demo",
            "demo",
            &context,
            &LocalFolders(root.path().to_owned()),
        )
        .expect("read");
        assert_eq!(read.file.tasks.len(), 3);
        assert_eq!(
            read.file.warnings,
            ["task.toml key `colour` is not one Harbor 0.26 reads; it is ignored (in a, b)"]
        );
    }

    /// Harbor's `resolve_version`: `head` first, then the highest PEP 440
    /// version (pre-releases, post-releases and dev releases in PEP 440's
    /// order, trailing zeros ignored, the first of equals), else the last
    /// in string order.
    #[test]
    fn the_newest_version_is_the_one_harbor_takes() {
        let cases: &[(&[&str], &str)] = &[
            (&["1.0", "head", "2.0"], "head"),
            (&["1.0", "2.0", "1.10"], "2.0"),
            (&["1.9", "1.10"], "1.10"),
            (&["2.0rc1", "2.0b2", "1.9"], "2.0rc1"),
            (&["2.0", "2.0rc1"], "2.0"),
            (&["2.0.dev1", "2.0a1"], "2.0a1"),
            (&["2.0", "2.0.post1"], "2.0.post1"),
            (&["1.0", "1.0.0"], "1.0"),
            (&["1.0.0", "1.0"], "1.0.0"),
            (&["v1.2", "1.1"], "v1.2"),
            (&["1!0.1", "9.0"], "1!0.1"),
            (&["parity", "1.0"], "1.0"),
            (&["beta", "alpha"], "beta"),
            (&["1.0+local.2", "1.0+local.10", "1.0"], "1.0+local.10"),
            (&["1.0+abc", "1.0+7", "1.0"], "1.0+7"),
        ];
        for (versions, expected) in cases {
            assert_eq!(newest(versions), *expected, "{versions:?}");
        }
    }

    fn registry(text: &str) -> Registry {
        Registry {
            location: "r.json".to_owned(),
            sha256: String::new(),
            datasets: serde_json::from_str(text).expect("a registry"),
        }
    }

    const TWO: &str = r#"[
        {"name": "terminal-bench", "version": "2.0", "description": "d", "tasks": [
            {"name": "a", "git_url": "https://x/r.git", "git_commit_id": "abc", "path": "tasks/a"}]},
        {"name": "terminal-bench", "version": "1.0", "description": "d", "tasks": []},
        {"name": "swebench-verified", "version": "1.0", "description": "d", "tasks": [
            {"name": "b", "path": "./local/b"}]}
    ]"#;

    /// A name and version are found, the version chosen when none is
    /// named; a missing name lists close ones, a missing version the
    /// dataset's versions.
    #[test]
    fn datasets_are_found_by_name_and_version() {
        let registry = registry(TWO);
        let found = registry.dataset("terminal-bench", None).expect("found");
        assert_eq!(found.version, "2.0");
        let found = registry
            .dataset("terminal-bench", Some("1.0"))
            .expect("found");
        assert_eq!(found.version, "1.0");
        let err = registry
            .dataset("terminal-bench", Some("3.0"))
            .expect_err("no 3.0")
            .to_string();
        assert!(
            err.contains("failed to find version 3.0 of the dataset terminal-bench")
                && err.contains("hint: its versions are 2.0, 1.0"),
            "{err}"
        );
        let err = registry
            .dataset("terminal-bnch", None)
            .expect_err("a typo")
            .to_string();
        assert!(
            err.contains("failed to find the dataset terminal-bnch in the registry r.json")
                && err.contains("hint: did you mean terminal-bench?"),
            "{err}"
        );
        let err = registry
            .dataset("zzz", None)
            .expect_err("nothing close")
            .to_string();
        assert!(
            err.contains("`onebash datasets --registry r.json` lists its datasets"),
            "{err}"
        );
        let err = entries_of(&registry.datasets[1], "terminal-bench@1.0")
            .expect_err("empty")
            .to_string();
        assert!(err.contains("holds no task"), "{err}");
        let entries = entries_of(&registry.datasets[0], "t@2.0").expect("entries");
        assert_eq!(entries[0].id, "a");
        assert_eq!(entries[0].git_commit_id.as_deref(), Some("abc"));
    }

    /// Paths are normalised and refused as Harbor's
    /// `normalize_git_task_path` does; references are split at the first
    /// `@`.
    #[test]
    fn paths_and_references_are_read_as_harbor_reads_them() {
        assert_eq!(normalized("tasks/./a/../b/"), Ok("tasks/b".to_owned()));
        assert!(normalized("/abs").is_err());
        assert!(normalized("a/../../b").is_err());
        let parse = |rest| parse_reference("harbor:x", rest).map_err(|e| e.to_string());
        assert_eq!(parse("tb@2.0"), Ok(("tb", Some("2.0"))));
        assert_eq!(parse("tb@a@b"), Ok(("tb", Some("a@b"))));
        assert_eq!(parse("tb"), Ok(("tb", None)));
        assert!(parse("@2.0").is_err_and(|e| e.contains("the dataset's name is empty")));
        assert!(parse("tb@").is_err_and(|e| e.contains("the version after `@` is empty")));
        let bad = registry(
            r#"[{"name": "d", "version": "1", "description": "", "tasks": [
                {"name": "t", "git_url": "u", "path": "../t"}]}]"#,
        );
        let twice = registry(
            r#"[{"name": "d", "version": "1", "description": "", "tasks": [
                {"name": "t", "git_url": "u", "path": "x/t"},
                {"name": "t2", "git_url": "v", "path": "y/t"}]}]"#,
        );
        let err = entries_of(&twice.datasets[0], "d@1")
            .expect_err("one name twice")
            .to_string();
        assert!(
            err.contains("two of its tasks are folders named t (x/t of u and y/t of v)"),
            "{err}"
        );
        let err = entries_of(&bad.datasets[0], "d@1")
            .expect_err("escapes")
            .to_string();
        assert!(
            err.contains("the task t has the path \"../t\", which leaves the repository"),
            "{err}"
        );
    }

    #[test]
    fn close_names_are_few_edits_apart_or_contain_each_other() {
        let names = ["terminal-bench", "terminal-bench-pro", "swe-bench", "aider"];
        assert_eq!(
            close_names("terminal-bench", &names),
            ["terminal-bench", "terminal-bench-pro"]
        );
        assert_eq!(close_names("swe-bnch", &names), ["swe-bench"]);
        assert!(close_names("xyz", &names).is_empty());
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
