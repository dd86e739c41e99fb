//! Harbor 0.26's task.toml (schema versions 1.0 to 1.4, the `TaskConfig`
//! of `harbor/models/task/config.py`): every key Harbor reads, its
//! default, and what onebash does with it ([`KEYS`], the one table: the
//! task guide's Harbor section is checked against it), and the check of a
//! task.toml against it ([`check`]): Harbor's validation rules, the keys
//! onebash refuses (each named), the network the task asks for, the keys
//! Harbor does not know (warned about). harbor.rs reads the values onebash
//! uses once the check passed.

use toml::Value;

use crate::task::{AllowedHosts, PhaseHosts};

/// One key of task.toml: its dotted path (`[]` marks an array of tables,
/// as in `steps[]`), Harbor's default as task.toml would spell it, and
/// what onebash does with it.
#[derive(Debug)]
pub(crate) struct Key {
    pub path: &'static str,
    // Read by the test that checks docs/tasks.md against this table.
    #[cfg_attr(not(test), allow(dead_code))]
    pub default: &'static str,
    pub does: Does,
}

/// What onebash does with a key. The texts are the task guide's
/// (docs/tasks.md), checked against it by a test.
#[derive(Debug)]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) enum Does {
    /// Read and used as Harbor uses it: how.
    Honours(&'static str),
    /// Read and checked, with no effect on a run, as under Harbor's own
    /// docker environment: why. A table's keys go with it.
    Ignores(&'static str),
    /// A value other than one `accepts` takes stops the task at its
    /// start (setup_error), naming the key: why onebash cannot honour it.
    /// A table's keys go with it.
    Refuses {
        why: &'static str,
        accepts: fn(&Value) -> bool,
    },
}

/// Only the key's absence is its default.
fn absent(_: &Value) -> bool {
    false
}

/// An empty list or table is the default.
fn empty(value: &Value) -> bool {
    match value {
        Value::Array(items) => items.is_empty(),
        Value::Table(table) => table.is_empty(),
        _ => false,
    }
}

fn linux(value: &Value) -> bool {
    value
        .as_str()
        .is_some_and(|s| s.eq_ignore_ascii_case("linux"))
}

fn shared(value: &Value) -> bool {
    value.as_str() == Some("shared")
}

fn no_gpus(value: &Value) -> bool {
    value.as_integer() == Some(0)
}

const ONE_NETWORK: &str = "onebash gives the agent and the verifier a container's network or none \
     (no-network and allowlist switch between phases, through the proxy); the public network \
     in one phase and not in the other is not done yet";

const HOSTS: &str = "the hosts the phase's commands may reach through onebash's proxy, under \
     --env podman, --env docker, --env oci and --env host in the bwrap sandbox (refused under \
     --env host --sandbox none): names, `*.` wildcards, IP addresses and CIDR ranges, read as Harbor reads them";

/// Every key Harbor 0.26 reads in task.toml, in its model's order.
pub(crate) const KEYS: &[Key] = &[
    Key {
        path: "schema_version",
        default: "\"1.4\"",
        does: Does::Ignores("recorded in the task's hash only; every version from 1.0 reads alike"),
    },
    Key {
        path: "version",
        default: "(none)",
        does: Does::Ignores("the old name of `schema_version`, as Harbor reads it"),
    },
    Key {
        path: "task",
        default: "(none)",
        does: Does::Ignores(
            "package information ([task] name, version, description, authors, keywords), checked as Harbor does (a name is `org/name`); the task is named by its folder",
        ),
    },
    Key {
        path: "metadata",
        default: "{}",
        does: Does::Honours("the task's `metadata`, free"),
    },
    Key {
        path: "source",
        default: "(none)",
        does: Does::Ignores("a note of where the task came from"),
    },
    Key {
        path: "multi_step_reward_strategy",
        default: "(none)",
        does: Does::Ignores(
            "applies to `steps` only, which are refused; checked: `mean` or `final`",
        ),
    },
    Key {
        path: "steps",
        default: "(none)",
        does: Does::Refuses {
            why: "multi-step tasks are not run by onebash yet",
            accepts: empty,
        },
    },
    Key {
        path: "artifacts",
        default: "[]",
        does: Does::Honours(
            "with a separate verifier, what its container receives from the agent's (after `/logs/artifacts`, as Harbor's): each path at the same path (a relative one from `/`), a folder without what its `exclude` patterns match (tar's); `destination` only names Harbor's copy on its host; a `service` other than `main` is refused",
        ),
    },
    Key {
        path: "verifier",
        default: "{}",
        does: Does::Honours("the table below"),
    },
    Key {
        path: "verifier.timeout_sec",
        default: "600.0",
        does: Does::Honours("the task's `test_timeout_s`"),
    },
    Key {
        path: "verifier.env",
        default: "{}",
        does: Does::Honours(
            "exported for test.sh; a `${VAR}` template (which Harbor fills from the host) is refused",
        ),
    },
    Key {
        path: "verifier.user",
        default: "(none)",
        does: Does::Honours(
            "test.sh runs as this user (a name or a uid: the engine's `exec -u`), in either mode; `/logs/verifier` is made writable by all first, as Harbor makes it",
        ),
    },
    Key {
        path: "verifier.environment_mode",
        default: "(none): shared",
        does: Does::Honours(
            "`separate` (or written `[verifier.environment]`): the verifier runs in a fresh container, which receives only the `artifacts`: a fresh copy of the task's (its image, workdir, variables and limits) unless `[verifier.environment]` is written; `shared`: in the agent's container",
        ),
    },
    Key {
        path: "verifier.environment",
        default: "(none)",
        does: Does::Honours(
            "the separate verifier's environment of its own, as Harbor's: its container is of its `docker_image` (else the task's image), in that image's WORKDIR, with none of the task's variables or limits (the run's limits and network); a tests/Dockerfile without `docker_image`, and its other keys, are refused",
        ),
    },
    Key {
        path: "verifier.collect",
        default: "[]",
        does: Does::Honours(
            "each `command` run in the agent's container after the agent, before the artifacts are taken (either mode), within its `timeout_sec`; a failure is no error, as in Harbor; as its `user` (`exec -u`), else the image's; a `service` other than `main` is refused",
        ),
    },
    Key {
        path: "verifier.network_mode",
        default: "(none): the environment's",
        does: Does::Honours(
            "the phase's own network, as Harbor's: `no-network` and `allowlist` (each phase its own hosts) in either phase; `public` in one phase and not in the other is refused",
        ),
    },
    Key {
        path: "verifier.allowed_hosts",
        default: "(none)",
        does: Does::Honours(HOSTS),
    },
    Key {
        path: "agent",
        default: "{}",
        does: Does::Honours("the table below"),
    },
    Key {
        path: "agent.timeout_sec",
        default: "(none)",
        does: Does::Honours("the task's agent timeout, in place of --task-timeout"),
    },
    Key {
        path: "agent.user",
        default: "(none)",
        does: Does::Honours(
            "the agent's commands, and the oracle's solve.sh, run as this user (a name or a uid: the engine's `exec -u`); `/logs/agent`, `/logs/verifier`, `/logs/artifacts` and `/solution` are made by root and writable by all when the container starts (Harbor makes its log folders so, and uploads the solution as root)",
        ),
    },
    Key {
        path: "agent.network_mode",
        default: "(none): the environment's",
        does: Does::Honours(
            "the phase's own network, as Harbor's: `no-network` and `allowlist` (each phase its own hosts) in either phase; `public` in one phase and not in the other is refused",
        ),
    },
    Key {
        path: "agent.allowed_hosts",
        default: "(none)",
        does: Does::Honours(HOSTS),
    },
    Key {
        path: "environment",
        default: "{}",
        does: Does::Honours("the table below"),
    },
    Key {
        path: "environment.network_mode",
        default: "\"public\"",
        does: Does::Honours(
            "`public` wants --allow-network (a run without it warns); `no-network`, and `allowlist`, are refused under --allow-network; `allowlist` gets the proxy (a run's --allow-hosts does not replace it)",
        ),
    },
    Key {
        path: "environment.allowed_hosts",
        default: "(none)",
        does: Does::Honours(HOSTS),
    },
    Key {
        path: "environment.allow_internet",
        default: "(none)",
        does: Does::Honours(
            "the old spelling of `network_mode` (true: public, false: no-network), as Harbor reads it",
        ),
    },
    Key {
        path: "environment.build_timeout_sec",
        default: "600.0",
        does: Does::Honours("the image build's timeout"),
    },
    Key {
        path: "environment.docker_image",
        default: "(none)",
        does: Does::Honours("the image, used as it is (not built)"),
    },
    Key {
        path: "environment.os",
        default: "\"linux\"",
        does: Does::Refuses {
            why: "onebash runs Linux containers only",
            accepts: linux,
        },
    },
    Key {
        path: "environment.cpus",
        default: "(none)",
        does: Does::Honours(
            "the container's `--cpus` (the agent's, and a separate verifier's of the task's image), in place of the run's",
        ),
    },
    Key {
        path: "environment.memory_mb",
        default: "(none)",
        does: Does::Honours(
            "the container's memory limit (`--memory`, swap included), in place of --max-memory",
        ),
    },
    Key {
        path: "environment.memory",
        default: "(none)",
        does: Does::Honours(
            "the old spelling of `memory_mb` (`\"2G\"`, `\"512M\"`), as Harbor reads it",
        ),
    },
    Key {
        path: "environment.storage_mb",
        default: "(none)",
        does: Does::Ignores(
            "Harbor's docker environment sets no storage limit either (podman's `--storage-opt size` needs XFS under overlay)",
        ),
    },
    Key {
        path: "environment.storage",
        default: "(none)",
        does: Does::Ignores("the old spelling of `storage_mb`"),
    },
    Key {
        path: "environment.gpus",
        default: "(none)",
        does: Does::Refuses {
            why: "onebash cannot give a container GPUs (0 is accepted)",
            accepts: no_gpus,
        },
    },
    Key {
        path: "environment.gpu_types",
        default: "(none)",
        does: Does::Ignores("read with `gpus` only, as Harbor's docker environment does"),
    },
    Key {
        path: "environment.tpu",
        default: "(none)",
        does: Does::Refuses {
            why: "onebash cannot give a container TPUs",
            accepts: absent,
        },
    },
    Key {
        path: "environment.mcp_servers",
        default: "[]",
        does: Does::Refuses {
            why: "onebash's agent has one tool, bash, and no MCP servers",
            accepts: empty,
        },
    },
    Key {
        path: "environment.env",
        default: "{}",
        does: Does::Honours(
            "set on the task's container (`run -e`, as Harbor sets them on its main service), seen by every command, the healthcheck and the verifier's (a separate verifier's too, unless it has its own image); a `${VAR}` template (which Harbor fills from the host) is refused",
        ),
    },
    Key {
        path: "environment.skills_dir",
        default: "(none)",
        does: Does::Refuses {
            why: "onebash's agent reads no skills",
            accepts: absent,
        },
    },
    Key {
        path: "environment.healthcheck",
        default: "(none)",
        does: Does::Honours(
            "run after the container starts and before the agent, as the task's setup command, as Harbor's `run_healthcheck` runs it: `command` (as the image's user, each attempt within `timeout_sec`, 30) until it passes; a failure within `start_period_sec` (0) waits `start_interval_sec` (5), after it `retries` (3) consecutive failures `interval_sec` (5) apart stop the task (setup_error)",
        ),
    },
    Key {
        path: "environment.workdir",
        default: "(none)",
        does: Does::Honours(
            "where every command runs (the engine's `exec -w`), in place of the image's WORKDIR; a separate verifier of the task's image too",
        ),
    },
    Key {
        path: "solution",
        default: "{}",
        does: Does::Honours("the table below"),
    },
    Key {
        path: "solution.env",
        default: "{}",
        does: Does::Honours(
            "set for the oracle's solve.sh alone (`env NAME=VALUE bash /solution/solve.sh`), over the container's; a `${VAR}` template is refused",
        ),
    },
];

/// Tables of free keys: whatever they hold is the task's.
const FREE: &[&str] = &[
    "metadata",
    "verifier.env",
    "environment.env",
    "solution.env",
];

/// Tables whose keys are read whole where they are used (separate.rs),
/// each refused there by name when onebash cannot honour it.
const READ_WHOLE: &[&str] = &[
    "artifacts",
    "verifier.environment",
    "verifier.collect",
    "environment.healthcheck",
];

/// The key of `path`, or the table that answers for it: a refused or
/// ignored one, or a table of free keys; `None` for a key Harbor does not
/// read.
pub(crate) fn covering(path: &str) -> Option<&'static Key> {
    let find = |p: &str| KEYS.iter().find(|k| k.path == p);
    if let Some(key) = find(path) {
        return Some(key);
    }
    let mut prefix = path;
    while let Some(cut) = prefix.rfind(['.', '[']) {
        prefix = &prefix[..cut];
        if let Some(key) = find(prefix) {
            let covers = !matches!(key.does, Does::Honours(_))
                || FREE.contains(&key.path)
                || READ_WHOLE.contains(&key.path);
            return covers.then_some(key);
        }
    }
    None
}

/// The network a task asks for, after Harbor's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Network {
    Public,
    None,
    /// Through the proxy: the hosts are [`Checked::hosts`].
    Allowlist,
}

/// What a task.toml asks that onebash reads beyond its values.
#[derive(Debug, Default)]
pub(crate) struct Checked {
    /// Why the task cannot run as Harbor runs it, each naming its key.
    pub refused: Vec<String>,
    /// The keys Harbor does not know (it ignores them), dotted.
    pub unknown: Vec<String>,
    /// `environment.network_mode` after its default and `allow_internet`;
    /// `None` when refused.
    pub network: Option<Network>,
    /// Whether the network was written (or `allow_internet`), not the
    /// default.
    pub network_written: bool,
    /// Under [`Network::Allowlist`]: each phase's hosts (none for a
    /// `no-network` phase).
    pub hosts: Option<PhaseHosts>,
}

/// Checks a task.toml's table as Harbor 0.26 validates it: the message
/// of what Harbor would reject, else what onebash refuses, the network
/// and the unknown keys.
pub(crate) fn check(doc: &toml::Table) -> Result<Checked, String> {
    let mut checked = Checked::default();
    walk(doc, "", &mut checked)?;
    let section = |name: &str| doc.get(name).and_then(Value::as_table);
    if let Some(task) = section("task") {
        check_package(task)?;
    }
    if let Some(strategy) = doc.get("multi_step_reward_strategy") {
        one_of("multi_step_reward_strategy", strategy, &["mean", "final"])?;
    }
    let verifier = section("verifier");
    if let Some(mode) = verifier.and_then(|v| v.get("environment_mode")) {
        one_of("verifier.environment_mode", mode, &["shared", "separate"])?;
        if shared(mode) && verifier.is_some_and(|v| v.contains_key("environment")) {
            return Err("`verifier.environment_mode` = \"shared\" is incompatible with [verifier.environment]".to_owned());
        }
    }
    let environment = section("environment");
    if let Some(os) = environment.and_then(|e| e.get("os")) {
        let lower = os.as_str().map(str::to_lowercase).map(Value::String);
        one_of(
            "environment.os",
            lower.as_ref().unwrap_or(os),
            &["linux", "windows"],
        )?;
    }
    legacy_sizes(environment)?;
    network(doc, &mut checked)?;
    for key in KEYS {
        let Does::Refuses { why, accepts } = key.does else {
            continue;
        };
        if let Some(value) = lookup(doc, key.path)
            && !accepts(value)
        {
            checked
                .refused
                .push(format!("`{}` = {}: {why}", key.path, shown(value)));
        }
    }
    for path in ["verifier.env", "environment.env", "solution.env"] {
        let Some(env) = lookup(doc, path).and_then(Value::as_table) else {
            continue;
        };
        for (name, value) in env {
            if value.as_str().is_some_and(is_template) {
                checked.refused.push(format!(
                    "`{path}.{name}` = {}: Harbor fills it from the host's environment, which onebash never passes to a task",
                    shown(value)
                ));
            }
        }
    }
    Ok(checked)
}

/// Whether `value` is all one `${VAR}` or `${VAR:-default}` (Harbor's
/// `resolve_env_vars` template).
fn is_template(value: &str) -> bool {
    value
        .strip_prefix("${")
        .and_then(|rest| rest.strip_suffix('}'))
        .is_some_and(|inner| {
            let name = inner.split(":-").next().unwrap_or("");
            !name.is_empty() && !name.contains('}') && !name.contains(':')
        })
}

/// The value at a dotted path (no `[]`).
fn lookup<'a>(doc: &'a toml::Table, path: &str) -> Option<&'a Value> {
    let mut parts = path.split('.');
    let mut value = doc.get(parts.next()?)?;
    for part in parts {
        value = value.as_table()?.get(part)?;
    }
    Some(value)
}

/// Every key of the document: known, covered by its table, or unknown;
/// and each known key's type, as Harbor's model types it.
fn walk(table: &toml::Table, prefix: &str, checked: &mut Checked) -> Result<(), String> {
    for (name, value) in table {
        let path = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        let Some(key) = covering(&path) else {
            checked.unknown.push(path);
            continue;
        };
        if key.path != path {
            continue;
        }
        check_type(&path, value)?;
        if let (Does::Honours(_), Value::Table(inner)) = (&key.does, value)
            && !FREE.contains(&key.path)
            && !READ_WHOLE.contains(&key.path)
        {
            walk(inner, &path, checked)?;
        }
    }
    Ok(())
}

/// The type Harbor's model gives a key, checked as pydantic does for
/// TOML's types (an integral float is an integer; no string is a number).
fn check_type(path: &str, value: &Value) -> Result<(), String> {
    let number = matches!(value, Value::Integer(_) | Value::Float(_));
    let integer = match value {
        Value::Integer(_) => true,
        Value::Float(f) => f.fract() == 0.0 && f.is_finite(),
        _ => false,
    };
    let string_map = value
        .as_table()
        .is_some_and(|t| t.values().all(Value::is_str));
    let string_list = value
        .as_array()
        .is_some_and(|a| a.iter().all(Value::is_str));
    let (ok, wanted) = match path {
        "schema_version"
        | "version"
        | "source"
        | "multi_step_reward_strategy"
        | "verifier.environment_mode"
        | "verifier.network_mode"
        | "agent.network_mode"
        | "environment.network_mode"
        | "environment.docker_image"
        | "environment.os"
        | "environment.skills_dir"
        | "environment.workdir"
        | "environment.memory"
        | "environment.storage" => (value.is_str(), "a string"),
        "verifier.timeout_sec" | "agent.timeout_sec" | "environment.build_timeout_sec" => {
            (number, "a number of seconds")
        }
        "environment.cpus" => (
            number && value.as_float().is_none_or(f64::is_finite),
            "a finite number",
        ),
        "environment.memory_mb" | "environment.storage_mb" | "environment.gpus" => {
            (integer, "an integer")
        }
        "environment.allow_internet" => (value.is_bool(), "true or false"),
        "verifier.user" | "agent.user" => {
            (value.is_str() || value.is_integer(), "a user name or uid")
        }
        "verifier.env" | "environment.env" | "solution.env" => (string_map, "a table of strings"),
        "verifier.allowed_hosts"
        | "agent.allowed_hosts"
        | "environment.allowed_hosts"
        | "environment.gpu_types" => (string_list, "a list of strings"),
        "steps" | "verifier.collect" | "environment.mcp_servers" => (
            value
                .as_array()
                .is_some_and(|a| a.iter().all(Value::is_table)),
            "a list of tables",
        ),
        "artifacts" => (
            value
                .as_array()
                .is_some_and(|a| a.iter().all(|v| v.is_str() || v.is_table())),
            "a list of paths or tables",
        ),
        _ => (value.is_table(), "a table"),
    };
    if ok {
        Ok(())
    } else {
        Err(format!("`{path}` must be {wanted}, got {}", shown(value)))
    }
}

/// `[task]`: a `name` of `org/name`, a non-empty `version`.
fn check_package(task: &toml::Table) -> Result<(), String> {
    let name = task.get("name").and_then(Value::as_str);
    let Some(name) = name else {
        return Err("`task.name` is required in [task]".to_owned());
    };
    let part = |s: &str| {
        s.starts_with(|c: char| c.is_ascii_alphanumeric())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    };
    let good = name
        .split_once('/')
        .is_some_and(|(org, short)| part(org) && part(short))
        && !name.contains("..");
    if !good {
        return Err(format!("`task.name` must be `org/name`, got {name:?}"));
    }
    match task.get("version") {
        Some(Value::String(v)) if v.is_empty() => {
            Err("`task.version` must not be empty".to_owned())
        }
        Some(Value::String(_)) | None => Ok(()),
        Some(other) => Err(format!(
            "`task.version` must be a string, got {}",
            shown(other)
        )),
    }
}

fn one_of(path: &str, value: &Value, allowed: &[&str]) -> Result<(), String> {
    match value.as_str() {
        Some(s) if allowed.contains(&s) => Ok(()),
        _ => Err(format!(
            "`{path}` must be one of {}, got {}",
            allowed.join(", "),
            shown(value)
        )),
    }
}

/// `environment.memory` and `storage`, Harbor's old sizes: a string such
/// as `"2G"` must read, and agree with `memory_mb` (`storage_mb`) when
/// both are written.
fn legacy_sizes(environment: Option<&toml::Table>) -> Result<(), String> {
    let Some(environment) = environment else {
        return Ok(());
    };
    for (old, new) in [("memory", "memory_mb"), ("storage", "storage_mb")] {
        let Some(Value::String(size)) = environment.get(old) else {
            continue;
        };
        let mb = size_mb(size).ok_or_else(|| {
            format!("`environment.{old}` = {size:?} is not a size such as \"1G\" or \"512M\"")
        })?;
        if let Some(written) = environment.get(new).and_then(Value::as_integer)
            && written != mb
        {
            return Err(format!(
                "`environment.{old}` = {size:?} ({mb} MB) and `environment.{new}` = {written} disagree"
            ));
        }
    }
    Ok(())
}

/// Harbor's `_parse_size_to_mb`: `G`, `M` or `K`, truncated to whole MB.
pub(crate) fn size_mb(size: &str) -> Option<i64> {
    let size = size.trim().to_uppercase();
    let (number, per_mb) = if let Some(n) = size.strip_suffix('G') {
        (n, 1024.0)
    } else if let Some(n) = size.strip_suffix('M') {
        (n, 1.0)
    } else {
        (size.strip_suffix('K')?, 1.0 / 1024.0)
    };
    let value: f64 = number.parse().ok()?;
    let mb = (value * per_mb).trunc();
    mb.is_finite().then_some(mb as i64)
}

/// The network: the environment's baseline (its `network_mode`, else the
/// old `allow_internet`, else public), and each phase's override, as
/// Harbor resolves them (`trial/network_policy.py`): a phase's own when
/// written, else the baseline. The public network in one phase and not
/// the other is refused; otherwise both phases are public, both have
/// none, or each gets the proxy with its hosts (none for `no-network`).
fn network(doc: &toml::Table, checked: &mut Checked) -> Result<(), String> {
    const MODES: &[&str] = &["no-network", "public", "allowlist"];
    let table = |name: &str| doc.get(name).and_then(Value::as_table);
    let environment = table("environment");
    let mode = environment.and_then(|e| e.get("network_mode"));
    if let Some(mode) = mode {
        one_of("environment.network_mode", mode, MODES)?;
    }
    let hosts = environment.and_then(|e| e.get("allowed_hosts"));
    let baseline = match (
        mode.and_then(Value::as_str),
        environment.and_then(|e| e.get("allow_internet")),
    ) {
        (Some(mode), _) => mode,
        (None, Some(Value::Boolean(false))) if hosts.is_none() => "no-network",
        _ => "public",
    };
    if baseline != "allowlist" && hosts.is_some_and(|h| !empty(h)) {
        return Err(
            "`environment.allowed_hosts` is only valid with `network_mode` = \"allowlist\""
                .to_owned(),
        );
    }
    checked.network_written =
        mode.is_some() || environment.is_some_and(|e| e.contains_key("allow_internet"));
    let baseline_hosts = allowed_hosts("environment", hosts)?;
    let mut phases = Vec::new();
    for phase in ["agent", "verifier"] {
        let phase_table = table(phase);
        let mode = phase_table.and_then(|p| p.get("network_mode"));
        let hosts = phase_table.and_then(|p| p.get("allowed_hosts"));
        let Some(mode) = mode else {
            if hosts.is_some() {
                return Err(format!(
                    "`{phase}.allowed_hosts` is only valid with `{phase}.network_mode` = \"allowlist\""
                ));
            }
            phases.push((phase, None, baseline, baseline_hosts.clone()));
            continue;
        };
        one_of(&format!("{phase}.network_mode"), mode, MODES)?;
        if mode.as_str() != Some("allowlist") && hosts.is_some_and(|h| !empty(h)) {
            return Err(format!(
                "`{phase}.allowed_hosts` is only valid with `{phase}.network_mode` = \"allowlist\""
            ));
        }
        let written = mode.as_str().unwrap_or(baseline);
        phases.push((phase, Some(mode), written, allowed_hosts(phase, hosts)?));
    }
    let public = |mode: &str| mode == "public";
    if public(phases[0].2) != public(phases[1].2) {
        for (phase, written, mode, _) in &phases {
            if let Some(written) = written
                && public(mode) != public(baseline)
            {
                checked.refused.push(format!(
                    "`{phase}.network_mode` = {} (the environment's is {baseline:?}): {ONE_NETWORK}",
                    shown(written)
                ));
            }
        }
        return Ok(());
    }
    checked.network = Some(match (phases[0].2, phases[1].2) {
        (p, _) if public(p) => Network::Public,
        ("no-network", "no-network") => Network::None,
        _ => {
            checked.hosts = Some(PhaseHosts {
                agent: phases[0].3.clone(),
                verifier: phases[1].3.clone(),
            });
            Network::Allowlist
        }
    });
    Ok(())
}

/// A table's `allowed_hosts`, read with Harbor's rules; none when absent.
fn allowed_hosts(table: &str, hosts: Option<&Value>) -> Result<AllowedHosts, String> {
    let items: Vec<&str> = hosts
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    AllowedHosts::parse(&items).map_err(|err| format!("`{table}.allowed_hosts`: {err}"))
}

/// A TOML value as a message shows it.
pub(crate) fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        Value::Integer(i) => i.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Boolean(b) => b.to_string(),
        Value::Array(items) if items.is_empty() => "[]".to_owned(),
        other => other.type_str().to_owned(),
    }
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;
