//! Harbor task folders in (the format Terminal-Bench moved to), and the
//! answers of a Harbor task ([`HarborTask`]'s [`Benchmark`]).
//!
//! Owns reading a task folder (`task.toml`, `instruction.md`,
//! `environment/Dockerfile`, `tests/test.sh`, `solution/solve.sh`) or a
//! folder of them into [`TaskSpec`]s, each carrying a [`HarborTask`]: the
//! image to build (tagged by the content hash of `environment/`), the
//! verifier's folder and settings (where it runs: separate.rs), and the
//! oracle's solution. Also the scripts the container runs for such a
//! task (the verifier's staging, the oracle's command) and the reading of
//! the reward Harbor's verifier writes. It does not build images or run anything: the container
//! environment builds the image it names ([`FolderImage`]) and copies its
//! verifier in ([`VerifierFolder`]), the test stage reads its reward
//! ([`RewardFile`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

mod runtime;
mod schema;
mod separate;

use schema::Network;

use crate::task::benchmark::{
    Benchmark, BuiltinPrompt, Code, ContainerSetup, FolderImage, Limits, NetworkWish, Oracle, Pull,
    RewardFile, Tests, Verdict, VerifierFolder,
};
use crate::task::source::{ParsedLine, RecipeResult, Source};
use crate::task::spec::{MAX_SECONDS, TaskFile, TaskFileError, TaskId, TaskSpec};

/// The file that makes a folder a Harbor task.
pub(crate) const TASK_TOML: &str = "task.toml";
/// Where Harbor puts the task's `tests/` in the container.
pub(crate) const TESTS_IN_CONTAINER: &str = "/tests";
/// Where Harbor puts the task's `solution/` for the oracle.
pub(crate) const SOLUTION_IN_CONTAINER: &str = "/solution";
/// Where the verifier writes its reward.
pub(crate) const VERIFIER_LOGS: &str = "/logs/verifier";
/// Harbor's default build timeout ([environment] build_timeout_sec).
const DEFAULT_BUILD_TIMEOUT_S: f64 = 600.0;
/// The repository every built image is tagged in.
const IMAGE_REPOSITORY: &str = "localhost/onebash-harbor";

/// What onebash keeps of a Harbor task beyond the common task fields
/// (read from the task folder): its answers to the stages.
#[derive(Debug, Clone)]
pub(crate) struct HarborTask {
    /// `environment/`, the build context; `None` when task.toml names a
    /// prebuilt `docker_image`.
    pub context: Option<PathBuf>,
    pub build_timeout: Duration,
    /// `tests/`, copied to `/tests` after the agent.
    pub verifier: VerifierFolder,
    /// `[verifier] env`: set for test.sh.
    pub verifier_env: Vec<(String, String)>,
    /// `[agent] timeout_sec`.
    pub agent_timeout_s: Option<f64>,
    /// `[environment] cpus` and `memory_mb`: the container's limits.
    pub cpus: Option<f64>,
    pub memory_mb: Option<u64>,
    /// `[environment] env` and `workdir`, the agent's and the verifier's
    /// users (runtime.rs).
    pub container: ContainerSetup,
    /// `[solution] env`: set for solve.sh alone.
    pub solution_env: Vec<(String, String)>,
    /// `solution/`'s files (relative path, text, executable), for the
    /// oracle; empty when the task has no `solution/solve.sh`.
    pub solution: Vec<(String, String, bool)>,
    /// What of the task onebash cannot run as Harbor does, each naming
    /// its key (schema.rs); the task stops at its start when any.
    pub refused: Vec<String>,
    /// task.toml's path, which a refusal names.
    pub toml_path: PathBuf,
    /// The network it asks for, and whether task.toml says so (or it is
    /// Harbor's default); `None` when that is refused.
    pub network: Option<(Network, bool)>,
    /// Under an allowlist: each phase's hosts.
    pub hosts: Option<super::PhaseHosts>,
}

/// The label a built image carries, valued by the task's id.
const BUILD_LABEL: &str = "onebash.harbor-task";

/// The reward file the verifier writes, and how it is read.
static REWARD: LazyLock<RewardFile> = LazyLock::new(|| RewardFile {
    script: reward_script(),
    read: |output| read_reward(output).map_err(Into::into),
    not_by_log: "a Harbor task is graded by the reward its verifier wrote, not by its test log",
});

impl Benchmark for HarborTask {
    fn task_fields(&self, fields: &mut Map<String, Value>) {
        // A task folder's environment is its image: written as the line
        // field says it.
        crate::task::own::repo_in_image_field(true, fields);
    }

    fn code(&self) -> Code {
        Code::Image {
            no_repo: "a Harbor task has no repo to patch",
        }
    }

    fn image_build(&self) -> Option<FolderImage<'_>> {
        self.context.as_deref().map(|context| FolderImage {
            context,
            timeout: self.build_timeout,
            label: BUILD_LABEL,
        })
    }

    /// A separate verifier's `docker_image`.
    fn tests_image(&self) -> Option<&str> {
        self.verifier.separate.as_ref()?.image.as_deref()
    }

    fn limits(&self) -> Limits {
        Limits {
            cpus: self.cpus,
            memory_mb: self.memory_mb,
        }
    }

    fn container_setup(&self) -> Option<&ContainerSetup> {
        Some(&self.container)
    }

    fn agent_timeout(&self) -> Option<Duration> {
        self.agent_timeout_s.map(Duration::from_secs_f64)
    }

    fn tests(&self) -> Tests<'_> {
        Tests::Verifier(&self.verifier)
    }

    /// Harbor's verdict is the reward test.sh wrote, whatever its exit
    /// code: 1 passes, anything else fails (fractions are kept).
    fn verdict(&self) -> Verdict<'_> {
        Verdict::Reward(&REWARD)
    }

    /// A Harbor task's oracle is its solution/solve.sh, run in place.
    fn oracle<'a>(&'a self, gold_patch: Option<&'a str>) -> Oracle<'a> {
        let _ = gold_patch;
        match oracle_command(self) {
            Some(command) => Oracle::Command {
                command,
                done: "Ran solution/solve.sh.",
            },
            None => Oracle::Missing("solution/solve.sh"),
        }
    }

    /// A Harbor task is a job in a container, not an issue in a repo.
    fn default_prompt(&self) -> BuiltinPrompt {
        BuiltinPrompt::Terminal
    }

    /// A key onebash cannot honour stops the task, named.
    fn cannot_run(&self) -> Option<String> {
        (!self.refused.is_empty()).then(|| {
            format!(
                "{}: {}\nhint: onebash would not run this task as Harbor does; see the Harbor keys in docs/tasks.md",
                self.toml_path.display(),
                self.refused.join("; ")
            )
        })
    }

    fn network(&self) -> Option<NetworkWish> {
        let (network, written) = self.network?;
        let mode = match network {
            Network::Public => "public",
            Network::None => "no-network",
            Network::Allowlist => "allowlist",
        };
        let key = if written {
            format!("`environment.network_mode` = {mode:?}")
        } else {
            format!("`environment.network_mode` = {mode:?}, Harbor's default")
        };
        Some(NetworkWish {
            public: network == Network::Public,
            key,
            allowlist: self.hosts.clone(),
        })
    }

    /// `load` reads Harbor folders too (a run takes them); their images
    /// are built from environment/ when a task starts, not pulled.
    fn pull(&self, id: &str) -> Pull {
        Pull::Refused(format!(
            "{id} is a Harbor task: its image is built from its environment/ when it runs, so there is nothing to pull"
        ))
    }

    fn needs_engine(&self, id: &str, env: &str) -> Option<String> {
        Some(format!(
            "Harbor tasks (such as {id}) run in the image their environment/ builds, which --env {env} cannot do\nhint: run with --env podman or --env docker"
        ))
    }
}

/// Harbor's task folders.
pub(crate) struct Harbor;

pub(crate) const SOURCE: Harbor = Harbor;

impl Source for Harbor {
    fn name(&self) -> &'static str {
        "harbor"
    }

    /// A folder is Harbor task folders (docs/tasks.md); a file is JSONL.
    fn load_path(&self, path: &Path) -> Option<Result<TaskFile, TaskFileError>> {
        is_task_folder(path).then(|| load(path))
    }

    fn oracle_needs(&self) -> Option<&'static str> {
        Some("a Harbor task: a solution/solve.sh")
    }

    /// A Hub dataset repo of Harbor task folders (the Terminal-Bench
    /// mirrors) is read as its folders holding a task.toml.
    fn folder_marker(&self) -> Option<&'static str> {
        Some(TASK_TOML)
    }

    /// Its tasks come from folders, never lines.
    fn benchmark(&self, line: &ParsedLine, recipe: Option<RecipeResult>) -> Arc<dyn Benchmark> {
        let _ = recipe;
        crate::task::own::own_line(line)
    }
}

/// Why a task folder could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HarborError {
    #[error("{path}: cannot be read: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not valid TOML: {}", .source.message())]
    Toml {
        path: PathBuf,
        source: toml::de::Error,
    },
    #[error("{path}: {message}")]
    Field { path: PathBuf, message: String },
    #[error("{0}: holds no task folder (a folder with a task.toml)")]
    Empty(PathBuf),
}

/// Whether `path` is a folder onebash reads as Harbor tasks (a task
/// folder, or a folder of them), rather than a JSONL file.
pub(crate) fn is_task_folder(path: &Path) -> bool {
    path.is_dir()
}

/// Reads a task folder, or every task folder directly inside `path`, in
/// name order. Every bad folder is reported; nothing is returned unless
/// all are good. The hash is over every file read, folder by folder.
pub(crate) fn load(path: &Path) -> Result<TaskFile, TaskFileError> {
    // Absolute, so that the build context (and every path the task
    // names) means the same wherever it is used: a build runs in its
    // context folder, where a relative path would be taken twice.
    let absolute = std::path::absolute(path).map_err(|source| TaskFileError::Read {
        path: path.to_owned(),
        source,
    })?;
    let path = absolute.as_path();
    let folders = if path.join(TASK_TOML).is_file() {
        vec![path.to_owned()]
    } else {
        let entries = std::fs::read_dir(path).map_err(|source| TaskFileError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mut folders: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|dir| dir.join(TASK_TOML).is_file())
            .collect();
        folders.sort();
        folders
    };
    if folders.is_empty() {
        return Err(TaskFileError::Invalid(vec![
            HarborError::Empty(path.to_owned()).to_string(),
        ]));
    }
    let mut tasks = Vec::new();
    let mut errors = Vec::new();
    let mut hasher = Sha256::new();
    let mut unknown = UnknownKeys::default();
    for dir in &folders {
        match read_task(dir) {
            Ok((task, digest, keys)) => {
                hasher.update(task.id.as_str().as_bytes());
                hasher.update(digest);
                unknown.add(&task, keys);
                tasks.push(task);
            }
            Err(err) => errors.push(err.to_string()),
        }
    }
    if !errors.is_empty() {
        return Err(TaskFileError::Invalid(errors));
    }
    Ok(TaskFile {
        tasks,
        sha256: format!("{:x}", hasher.finalize()),
        warnings: unknown.warnings(),
    })
}

/// Each task.toml key Harbor does not read, with the tasks that write it:
/// one warning per key for a whole run, whether its folders are read from
/// a directory or fetched from a registry.
#[derive(Debug, Default)]
pub(crate) struct UnknownKeys(Vec<(String, Vec<String>)>);

impl UnknownKeys {
    /// Notes the unknown `keys` of `task`'s task.toml.
    pub(crate) fn add(&mut self, task: &TaskSpec, keys: Vec<String>) {
        let id = task.id.as_str();
        for key in keys {
            match self.0.iter_mut().find(|(k, _)| *k == key) {
                Some((_, ids)) => ids.push(id.to_owned()),
                None => self.0.push((key, vec![id.to_owned()])),
            }
        }
    }

    /// The one warning of each key Harbor does not read (it ignores it,
    /// and so does onebash), naming the tasks that write it.
    pub(crate) fn warnings(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|(key, ids)| {
                let shown = ids.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
                let more = match ids.len().saturating_sub(5) {
                    0 => String::new(),
                    n => format!(" and {n} more"),
                };
                format!(
                    "task.toml key `{key}` is not one Harbor 0.26 reads; it is ignored (in {shown}{more})"
                )
            })
            .collect()
    }
}

/// One task folder: its task, the hash of its files, and the keys of
/// its task.toml Harbor does not read.
pub(crate) fn read_task(dir: &Path) -> Result<(TaskSpec, [u8; 32], Vec<String>), HarborError> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read(&path).map_err(|source| HarborError::Read { path, source })
    };
    let toml_path = dir.join(TASK_TOML);
    let toml_text = String::from_utf8_lossy(&read(TASK_TOML)?).into_owned();
    let config = TaskToml::parse(&toml_text).map_err(|err| match err {
        TomlProblem::Syntax(source) => HarborError::Toml {
            path: toml_path.clone(),
            source,
        },
        TomlProblem::Field(message) => HarborError::Field {
            path: toml_path.clone(),
            message,
        },
    })?;
    let instruction = String::from_utf8_lossy(&read("instruction.md")?).into_owned();
    let tests = dir.join("tests");
    read("tests/test.sh")?;
    let field_error = |message: String| HarborError::Field {
        path: dir.to_owned(),
        message,
    };
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let id = TaskId::parse(&name).map_err(|m| field_error(format!("the folder's name: {m}")))?;
    let (mut refused, context, image, env_hash) = environment_of(dir, &config)?;
    let at_toml = |message: String| HarborError::Field {
        path: toml_path.clone(),
        message,
    };
    let place = separate::read(&config.table, &tests).map_err(at_toml)?;
    refused.extend(place.refused);
    let runtime = runtime::read(&config.table).map_err(|err| at_toml(err.to_string()))?;
    let solution = read_solution(&dir.join("solution"))?;
    let mut digest = Sha256::new();
    digest.update(toml_text.as_bytes());
    digest.update(instruction.as_bytes());
    digest.update(env_hash);
    digest.update(hash_tree(&tests)?);
    let mut metadata = config.metadata.clone();
    metadata.insert(
        "harbor_dir".to_owned(),
        Value::String(dir.display().to_string()),
    );
    let harbor = HarborTask {
        context,
        build_timeout: Duration::from_secs_f64(config.build_timeout_s),
        verifier: VerifierFolder {
            folder: tests,
            target: TESTS_IN_CONTAINER,
            stage: STAGE_VERIFIER,
            collect: place.collect,
            separate: place.separate,
        },
        verifier_env: config.verifier_env.clone(),
        agent_timeout_s: config.agent_timeout_s,
        cpus: config.cpus,
        memory_mb: config.memory_mb,
        container: runtime.setup,
        solution_env: runtime.solution_env,
        solution,
        refused,
        toml_path: toml_path.clone(),
        network: config
            .checked
            .network
            .map(|network| (network, config.checked.network_written)),
        hosts: config.checked.hosts.clone(),
    };
    let test_command = test_command(&harbor.verifier_env);
    let task = TaskSpec {
        id,
        repo: dir.display().to_string(),
        repo_location: dir.display().to_string(),
        // No repo: what the task starts from is its environment.
        base_commit: format!("env-{}", hex(&env_hash)),
        problem_statement: instruction,
        test_command,
        // Harbor's healthcheck runs after the container starts, before
        // the agent; a failure stops the task, as the setup's does.
        setup_command: runtime.healthcheck,
        test_patch: None,
        gold_patch: None,
        fail_to_pass: None,
        pass_to_pass: None,
        test_timeout_s: Some(config.verifier_timeout_s),
        metadata: Some(metadata),
        image: Some(image),
        workdir: None,
        benchmark: Arc::new(harbor),
        extra: Map::new(),
    };
    let unknown = config.checked.unknown.clone();
    Ok((task, digest.finalize().into(), unknown))
}

/// What a task runs in: what onebash refuses of it (task.toml's keys and
/// a compose file), the build context, the image and its hash.
type Environment = (Vec<String>, Option<PathBuf>, String, [u8; 32]);

fn environment_of(dir: &Path, config: &TaskToml) -> Result<Environment, HarborError> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read(&path).map_err(|source| HarborError::Read { path, source })
    };
    let mut refused = config.checked.refused.clone();
    // Harbor also runs tasks of several containers from a compose file
    // (which it prefers to a Dockerfile); onebash runs one container a
    // task, so it refuses them, and reads no Dockerfile it would not run.
    let compose = ["docker-compose.yaml", "docker-compose.yml", "compose.yaml"]
        .into_iter()
        .find(|name| dir.join("environment").join(name).is_file());
    if let Some(compose) = compose {
        refused.push(format!(
            "environment/{compose}: tasks of several containers are not run by onebash yet (it runs one container a task)"
        ));
    }
    let (context, image, env_hash) = match &config.docker_image {
        Some(image) => (None, image.clone(), Sha256::digest(image.as_bytes()).into()),
        None => {
            let context = dir.join("environment");
            if compose.is_none() {
                read("environment/Dockerfile")?;
            }
            let hash = hash_tree(&context)?;
            let tag = format!("{IMAGE_REPOSITORY}:env-{}", &hex(&hash)[..16]);
            (Some(context), tag, hash)
        }
    };
    Ok((refused, context, image, env_hash))
}

/// `bash /tests/test.sh` with `[verifier] env` exported first.
fn test_command(env: &[(String, String)]) -> String {
    let mut script = String::new();
    for (key, value) in env {
        script.push_str(&format!("export {key}={}\n", shell_quote(value)));
    }
    script.push_str(&format!("bash {TESTS_IN_CONTAINER}/test.sh"));
    script
}

/// The text files of `solution/`; none when it has no `solve.sh`.
fn read_solution(dir: &Path) -> Result<Vec<(String, String, bool)>, HarborError> {
    use std::os::unix::fs::PermissionsExt;
    if !dir.join("solve.sh").is_file() {
        return Ok(Vec::new());
    }
    let mut files = Vec::new();
    for path in walk(dir)? {
        let bytes = std::fs::read(&path).map_err(|source| HarborError::Read {
            path: path.clone(),
            source,
        })?;
        let text = String::from_utf8(bytes).map_err(|_| HarborError::Field {
            path: path.clone(),
            message: "is not text: the oracle writes the solution's files with heredocs, which carry text only".to_owned(),
        })?;
        let executable = std::fs::metadata(&path)
            .map(|m| m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false);
        let relative = path
            .strip_prefix(dir)
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        files.push((relative, text, executable));
    }
    Ok(files)
}

/// Every file under `dir`, in path order (symbolic links not followed).
fn walk(dir: &Path) -> Result<Vec<PathBuf>, HarborError> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(folder) = stack.pop() {
        let entries = std::fs::read_dir(&folder).map_err(|source| HarborError::Read {
            path: folder.clone(),
            source,
        })?;
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => stack.push(path),
                Ok(_) => files.push(path),
                Err(_) => {}
            }
        }
    }
    files.sort();
    Ok(files)
}

/// A hash of a folder's files: each relative path, executable bit and
/// contents, in path order. Equal folders give equal image tags, so a
/// rerun (or another task with the same environment) reuses the image.
fn hash_tree(dir: &Path) -> Result<[u8; 32], HarborError> {
    use std::os::unix::fs::PermissionsExt;
    let mut hasher = Sha256::new();
    for path in walk(dir)? {
        let bytes = std::fs::read(&path).map_err(|source| HarborError::Read {
            path: path.clone(),
            source,
        })?;
        let relative = path.strip_prefix(dir).unwrap_or(&path);
        let mode = std::fs::symlink_metadata(&path)
            .map(|m| m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false);
        hasher.update(relative.as_os_str().as_encoded_bytes());
        hasher.update([0, u8::from(mode)]);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    Ok(hasher.finalize().into())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `'...'` with every `'` closed, escaped and reopened.
pub(crate) fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The fields of task.toml onebash uses, checked.
#[derive(Debug)]
struct TaskToml {
    /// What schema.rs made of the whole file.
    checked: schema::Checked,
    metadata: Map<String, Value>,
    verifier_timeout_s: f64,
    verifier_env: Vec<(String, String)>,
    agent_timeout_s: Option<f64>,
    build_timeout_s: f64,
    cpus: Option<f64>,
    memory_mb: Option<u64>,
    docker_image: Option<String>,
    /// The table itself, for what is read with the task folder at hand
    /// (separate.rs).
    table: toml::Table,
}

enum TomlProblem {
    Syntax(toml::de::Error),
    Field(String),
}

/// Harbor's default verifier and agent timeout (600 s).
const DEFAULT_TIMEOUT_S: f64 = 600.0;

impl TaskToml {
    /// Checks the whole file as Harbor 0.26 does (schema.rs: what Harbor
    /// rejects is an error; what onebash cannot honour is kept, to stop
    /// the task), then reads the fields onebash uses: `[metadata]`
    /// (free), `[verifier] timeout_sec` and `env`, `[agent] timeout_sec`,
    /// `[environment] build_timeout_sec`, `cpus`, `memory_mb` (or the old
    /// `memory`), `docker_image`.
    fn parse(text: &str) -> Result<TaskToml, TomlProblem> {
        let table: toml::Table = toml::from_str(text).map_err(TomlProblem::Syntax)?;
        let field = |m: String| TomlProblem::Field(m);
        let checked = schema::check(&table).map_err(field)?;
        let section = |name: &str| -> Result<Option<&toml::Table>, TomlProblem> {
            match table.get(name) {
                None => Ok(None),
                Some(toml::Value::Table(t)) => Ok(Some(t)),
                Some(other) => Err(field(format!(
                    "`{name}` must be a table, got {}",
                    other.type_str()
                ))),
            }
        };
        let seconds = |sec: &str, key: &str| -> Result<Option<f64>, TomlProblem> {
            let Some(value) = section(sec)?.and_then(|t| t.get(key)) else {
                return Ok(None);
            };
            let number = match value {
                toml::Value::Float(f) => *f,
                toml::Value::Integer(i) => *i as f64,
                other => {
                    return Err(field(format!(
                        "`{sec}.{key}` must be a number of seconds, got {}",
                        other.type_str()
                    )));
                }
            };
            if !(number > 0.0 && number <= MAX_SECONDS) {
                return Err(field(format!(
                    "`{sec}.{key}` must be a positive number of seconds, at most {MAX_SECONDS:e}, got {number}"
                )));
            }
            Ok(Some(number))
        };
        let metadata = match section("metadata")? {
            None => Map::new(),
            Some(t) => match serde_json::to_value(t) {
                Ok(Value::Object(map)) => map,
                _ => return Err(field("`metadata` cannot be read as JSON".to_owned())),
            },
        };
        let verifier_env = verifier_env(section("verifier")?)?;
        let environment = section("environment")?;
        let cpus = match environment.and_then(|t| t.get("cpus")) {
            None => None,
            Some(toml::Value::Integer(i)) if *i > 0 => Some(*i as f64),
            Some(toml::Value::Float(f)) if *f > 0.0 && f.is_finite() => Some(*f),
            Some(other) => {
                return Err(field(format!(
                    "`environment.cpus` must be a positive number, got {}",
                    shown(other)
                )));
            }
        };
        let memory_mb = memory_mb(environment)?;
        let docker_image = match environment.and_then(|t| t.get("docker_image")) {
            // Harbor builds environment/ when the image is empty.
            None => None,
            Some(toml::Value::String(s)) if s.is_empty() => None,
            Some(toml::Value::String(s)) if !s.trim().is_empty() => Some(s.clone()),
            Some(other) => {
                return Err(field(format!(
                    "`environment.docker_image` must be an image name, got {}",
                    shown(other)
                )));
            }
        };
        Ok(TaskToml {
            checked,
            metadata,
            verifier_timeout_s: seconds("verifier", "timeout_sec")?.unwrap_or(DEFAULT_TIMEOUT_S),
            verifier_env,
            agent_timeout_s: seconds("agent", "timeout_sec")?,
            build_timeout_s: seconds("environment", "build_timeout_sec")?
                .unwrap_or(DEFAULT_BUILD_TIMEOUT_S),
            cpus,
            memory_mb,
            docker_image,
            table,
        })
    }
}

/// `[environment] memory_mb`, or Harbor's old `memory = "2G"` when that
/// is not written (schema.rs checked that the two agree).
fn memory_mb(environment: Option<&toml::Table>) -> Result<Option<u64>, TomlProblem> {
    // Harbor reads the old `memory = "2G"` as `memory_mb` when that is
    // not written (schema.rs checked that the two agree).
    let old_memory = environment
        .and_then(|t| t.get("memory"))
        .and_then(toml::Value::as_str)
        .and_then(schema::size_mb)
        .map(toml::Value::Integer);
    match environment
        .and_then(|t| t.get("memory_mb"))
        .or(old_memory.as_ref())
    {
        None => Ok(None),
        Some(toml::Value::Integer(i)) if *i > 0 => Ok(Some(*i as u64)),
        Some(toml::Value::Float(f)) if *f >= 1.0 && f.fract() == 0.0 && *f < 1e15 => {
            Ok(Some(*f as u64))
        }
        Some(other) => Err(TomlProblem::Field(format!(
            "`environment.memory_mb` must be a positive integer, got {}",
            shown(other)
        ))),
    }
}

/// `[verifier] env`: variables for test.sh, each a string under a
/// variable's name.
fn verifier_env(verifier: Option<&toml::Table>) -> Result<Vec<(String, String)>, TomlProblem> {
    let field = |m: String| TomlProblem::Field(m);
    let Some(env) = verifier.and_then(|t| t.get("env")) else {
        return Ok(Vec::new());
    };
    let toml::Value::Table(env) = env else {
        return Err(field(format!(
            "`verifier.env` must be a table, got {}",
            env.type_str()
        )));
    };
    let mut vars = Vec::new();
    for (key, value) in env {
        let valid_name = !key.is_empty()
            && !key.starts_with(|c: char| c.is_ascii_digit())
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        match value {
            toml::Value::String(s) if valid_name => vars.push((key.clone(), s.clone())),
            _ => {
                return Err(field(format!(
                    "`verifier.env.{key}` must be a string under a variable name"
                )));
            }
        }
    }
    Ok(vars)
}

use schema::shown;

/// The oracle's one command: `solution/`'s files written to `/solution`
/// with quoted heredocs, then `bash /solution/solve.sh`, as Harbor's
/// oracle agent runs it.
pub(crate) fn oracle_command(harbor: &HarborTask) -> Option<String> {
    if harbor.solution.is_empty() {
        return None;
    }
    // The folder is emptied, not removed, when it cannot be: an agent's
    // user other than root gets it made writable (runtime.rs).
    let mut script = format!(
        "rm -rf {SOLUTION_IN_CONTAINER} 2>/dev/null; mkdir -p {SOLUTION_IN_CONTAINER} || exit 1\n"
    );
    for (relative, text, executable) in &harbor.solution {
        let target = shell_quote(&format!("{SOLUTION_IN_CONTAINER}/{relative}"));
        let mut delimiter = "ONEBASH_SOLUTION".to_owned();
        while text.lines().any(|line| line == delimiter) {
            delimiter.push('_');
        }
        let newline = if text.is_empty() || text.ends_with('\n') {
            ""
        } else {
            "\n"
        };
        script.push_str(&format!(
            "mkdir -p \"$(dirname {target})\" && cat > {target} <<'{delimiter}'\n{text}{newline}{delimiter}\n"
        ));
        if *executable {
            script.push_str(&format!("chmod +x {target}\n"));
        }
    }
    // `[solution] env` for solve.sh alone, as Harbor scopes it; `env`
    // carries any name `-e` does.
    if !harbor.solution_env.is_empty() {
        script.push_str("env");
        for (key, value) in &harbor.solution_env {
            script.push(' ');
            script.push_str(&shell_quote(&format!("{key}={value}")));
        }
        script.push(' ');
    }
    script.push_str(&format!("bash {SOLUTION_IN_CONTAINER}/solve.sh"));
    Some(script)
}

/// Run as root in the container before test.sh: `/tests` and
/// `/logs/verifier` emptied (so that nothing the agent left there counts,
/// as Harbor does), then made again for the copy of `tests/`, the
/// verifier's logs writable by all (Harbor's `chmod 777`), for a verifier
/// of another user.
pub(crate) const STAGE_VERIFIER: &str =
    "rm -rf /tests /logs/verifier && mkdir -p /tests /logs/verifier && chmod 777 /logs/verifier";

/// Prints the reward the verifier wrote, after a line saying which file:
/// `reward.txt` first, else `reward.json`, as Harbor reads them.
pub(crate) fn reward_script() -> String {
    format!(
        "if [ -f {VERIFIER_LOGS}/reward.txt ]; then echo txt; cat {VERIFIER_LOGS}/reward.txt; \
         elif [ -f {VERIFIER_LOGS}/reward.json ]; then echo json; cat {VERIFIER_LOGS}/reward.json; \
         else echo none; fi"
    )
}

/// Why the verifier's reward cannot be read; each names the file it read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RewardError {
    #[error("{logs}/reward.txt holds {text:?}, not a number", logs = VERIFIER_LOGS)]
    NotANumber { text: String },
    #[error("{logs}/reward.json is not valid JSON: {0}", logs = VERIFIER_LOGS)]
    Json(#[source] serde_json::Error),
    #[error("{logs}/reward.json is not a JSON object", logs = VERIFIER_LOGS)]
    NotAnObject,
    #[error(
        "{logs}/reward.json has no numeric `reward` key (nor a single numeric key)",
        logs = VERIFIER_LOGS
    )]
    NoRewardKey,
    #[error(
        "the verifier wrote no reward: neither {logs}/reward.txt nor reward.json exists",
        logs = VERIFIER_LOGS
    )]
    NoReward,
    #[error("the reward {0} is not a finite number")]
    NotFinite(f64),
}

/// The reward from [`reward_script`]'s output: reward.txt's one number, or
/// reward.json's `reward` key (or its only key); why not otherwise.
pub(crate) fn read_reward(output: &str) -> Result<f64, RewardError> {
    let (kind, rest) = output.split_once('\n').unwrap_or((output, ""));
    let number = |value: &Value| value.as_f64();
    let reward = match kind.trim() {
        "txt" => rest
            .trim()
            .parse::<f64>()
            .map_err(|_| RewardError::NotANumber {
                text: rest.trim().to_owned(),
            })?,
        "json" => {
            let value: Value = serde_json::from_str(rest).map_err(RewardError::Json)?;
            let Value::Object(map) = value else {
                return Err(RewardError::NotAnObject);
            };
            match (map.get("reward"), map.len()) {
                (Some(value), _) => number(value),
                (None, 1) => map.values().next().and_then(number),
                (None, _) => None,
            }
            .ok_or(RewardError::NoRewardKey)?
        }
        _ => return Err(RewardError::NoReward),
    };
    if !reward.is_finite() {
        return Err(RewardError::NotFinite(reward));
    }
    Ok(reward)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewards_are_read_as_harbor_writes_them() {
        assert_eq!(read_reward("txt\n1\n").ok(), Some(1.0));
        assert_eq!(read_reward("txt\n0").ok(), Some(0.0));
        assert_eq!(read_reward("json\n{\"reward\": 0.75}\n").ok(), Some(0.75));
        assert_eq!(read_reward("json\n{\"accuracy\": 0.5}").ok(), Some(0.5));
        let cases = [
            ("txt\nyes\n", "not a number"),
            ("json\n{\"a\": 1, \"b\": 0}", "no numeric `reward` key"),
            ("json\n[1]", "not a JSON object"),
            ("json\n{", "not valid JSON"),
            ("none\n", "wrote no reward"),
            ("txt\nNaN\n", "not a finite number"),
        ];
        for (output, expected) in cases {
            let err = read_reward(output).expect_err(output).to_string();
            assert!(err.contains(expected), "{output}: {err}");
        }
    }

    #[test]
    fn task_toml_fields_are_read_and_checked() {
        let good = "version = \"1.0\"\n[metadata]\ndifficulty = \"easy\"\ntags = [\"a\"]\n\
                    [verifier]\ntimeout_sec = 120.0\nenv = { MODE = \"it's\" }\n\
                    [agent]\ntimeout_sec = 300\n\
                    [environment]\nbuild_timeout_sec = 60.0\ncpus = 2\nmemory_mb = 1024\nstorage_mb = 10240\ngpus = 0\nallow_internet = true\n";
        let Ok(toml) = TaskToml::parse(good) else {
            panic!("valid task.toml");
        };
        assert_eq!(toml.verifier_timeout_s, 120.0);
        assert_eq!(toml.agent_timeout_s, Some(300.0));
        assert_eq!(toml.build_timeout_s, 60.0);
        assert_eq!((toml.cpus, toml.memory_mb), (Some(2.0), Some(1024)));
        assert_eq!(toml.metadata["difficulty"], "easy");
        assert_eq!(toml.verifier_env, vec![("MODE".into(), "it's".into())]);
        assert_eq!(
            test_command(&toml.verifier_env),
            "export MODE='it'\\''s'\nbash /tests/test.sh"
        );
        let Ok(defaults) = TaskToml::parse("") else {
            panic!("an empty task.toml is valid");
        };
        assert_eq!(defaults.verifier_timeout_s, 600.0);
        assert_eq!(defaults.agent_timeout_s, None);
        let bad = [
            (
                "[verifier]\ntimeout_sec = \"long\"",
                "`verifier.timeout_sec` must be a number of seconds, got \"long\"",
            ),
            (
                "[agent]\ntimeout_sec = -1",
                "`agent.timeout_sec` must be a positive number",
            ),
            (
                "[environment]\ncpus = \"two\"",
                "`environment.cpus` must be a finite number",
            ),
            (
                "[environment]\nmemory_mb = 1.5",
                "`environment.memory_mb` must be an integer",
            ),
            (
                "[environment]\nmemory_mb = 0",
                "`environment.memory_mb` must be a positive integer",
            ),
            ("verifier = 3", "`verifier` must be a table, got 3"),
            (
                "[verifier]\nenv = { \"A-B\" = \"x\" }",
                "`verifier.env.A-B` must be a string",
            ),
            ("[verifier\n", ""),
        ];
        for (text, expected) in bad {
            match TaskToml::parse(text) {
                Ok(_) => panic!("{text}: accepted"),
                Err(TomlProblem::Field(m)) => assert!(m.contains(expected), "{text}: {m}"),
                Err(TomlProblem::Syntax(m)) => assert!(expected.is_empty(), "{text}: {m}"),
            }
        }
    }

    #[test]
    fn the_oracle_writes_the_solution_then_runs_it() {
        let harbor = HarborTask {
            context: None,
            build_timeout: Duration::from_secs(1),
            verifier: VerifierFolder {
                folder: PathBuf::from("/t/tests"),
                target: TESTS_IN_CONTAINER,
                stage: STAGE_VERIFIER,
                collect: Vec::new(),
                separate: None,
            },
            verifier_env: Vec::new(),
            agent_timeout_s: None,
            cpus: None,
            memory_mb: None,
            container: ContainerSetup::default(),
            solution_env: Vec::new(),
            solution: vec![
                ("solve.sh".into(), "echo hi > /app/out\n".into(), true),
                (
                    "lib/x.txt".into(),
                    "ONEBASH_SOLUTION\nno newline".into(),
                    false,
                ),
            ],
            refused: Vec::new(),
            toml_path: PathBuf::from("/t/task.toml"),
            network: Some((Network::Public, false)),
            hosts: None,
        };
        let Some(script) = oracle_command(&harbor) else {
            panic!("a solution");
        };
        assert!(script.starts_with("rm -rf /solution 2>/dev/null; mkdir -p /solution || exit 1\n"));
        assert!(script.contains("cat > '/solution/solve.sh' <<'ONEBASH_SOLUTION'\necho hi > /app/out\nONEBASH_SOLUTION\nchmod +x '/solution/solve.sh'\n"));
        assert!(
            script.contains(
                "<<'ONEBASH_SOLUTION_'\nONEBASH_SOLUTION\nno newline\nONEBASH_SOLUTION_\n"
            )
        );
        assert!(script.ends_with("\nbash /solution/solve.sh"));
        let with_env = HarborTask {
            solution_env: vec![("K".into(), "it's".into()), ("A-B".into(), "x".into())],
            ..harbor.clone()
        };
        let script = oracle_command(&with_env).unwrap_or_default();
        assert!(
            script.ends_with("\nenv 'K=it'\\''s' 'A-B=x' bash /solution/solve.sh"),
            "{script}"
        );
        let none = HarborTask {
            solution: Vec::new(),
            ..harbor
        };
        assert_eq!(oracle_command(&none), None);
    }

    #[test]
    fn equal_environments_hash_alike_and_a_change_shows() {
        let a = tempfile::tempdir().expect("tempdir");
        let b = tempfile::tempdir().expect("tempdir");
        for dir in [a.path(), b.path()] {
            std::fs::create_dir_all(dir.join("sub")).expect("mkdir");
            std::fs::write(dir.join("Dockerfile"), "FROM x\n").expect("write");
            std::fs::write(dir.join("sub/f"), "1").expect("write");
        }
        let hash = |dir: &Path| hash_tree(dir).map_err(|e| e.to_string());
        assert_eq!(hash(a.path()), hash(b.path()));
        std::fs::write(b.path().join("sub/f"), "2").expect("write");
        assert_ne!(hash(a.path()), hash(b.path()));
    }
}
