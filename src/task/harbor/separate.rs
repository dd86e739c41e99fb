//! What task.toml says of where the verifier runs, as Harbor 0.26 reads
//! it (`harbor/models/task/verifier_mode.py`, `artifacts.py`): the mode
//! (`[verifier] environment_mode`, else separate when
//! `[verifier.environment]` is written), the verifier's image, the
//! `[[verifier.collect]]` hooks and the task's `artifacts` (with Harbor's
//! implicit `/logs/artifacts` first). schema.rs checked the types; the
//! container environment (env/container.rs) runs what this reads.

use std::path::Path;
use std::time::Duration;

use toml::Value;

use crate::task::benchmark::{Artifact, CollectHook, SeparateVerifier};

/// The folder an agent publishes to, which Harbor always transfers.
const CONVENTION: &str = "/logs/artifacts";
/// Harbor's default timeout of a collect hook.
const HOOK_TIMEOUT_S: f64 = 60.0;

/// Where the verifier runs, read from task.toml.
#[derive(Debug, Default)]
pub(super) struct VerifierPlace {
    pub collect: Vec<CollectHook>,
    pub separate: Option<SeparateVerifier>,
    /// What onebash cannot run as Harbor does, each naming its key.
    pub refused: Vec<String>,
}

/// Reads the verifier's place from task.toml's table; `tests` is the
/// task's tests/ folder (a Dockerfile there is the verifier's image in
/// Harbor). An error is what Harbor itself rejects.
pub(super) fn read(doc: &toml::Table, tests: &Path) -> Result<VerifierPlace, String> {
    let verifier = doc.get("verifier").and_then(Value::as_table);
    let get = |key: &str| verifier.and_then(|v| v.get(key));
    let mut place = VerifierPlace::default();
    place.collect = collect_hooks(get("collect"), &mut place.refused)?;
    let environment = get("environment").and_then(Value::as_table);
    let separate = match get("environment_mode").and_then(Value::as_str) {
        Some(mode) => mode == "separate",
        None => environment.is_some(),
    };
    let artifacts = artifacts(doc.get("artifacts"), &mut place.refused)?;
    if !separate {
        // A shared verifier reads the agent's container itself; Harbor
        // copies the artifacts to the trial folder only, which has no
        // bearing on the verdict.
        return Ok(place);
    }
    let image = environment
        .and_then(|e| e.get("docker_image"))
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .map(str::to_owned);
    for key in environment.into_iter().flat_map(|e| e.keys()) {
        if key != "docker_image" {
            place.refused.push(format!(
                "`verifier.environment.{key}`: onebash reads only `docker_image` of the verifier's environment; its container gets the run's limits and network"
            ));
        }
    }
    if image.is_none() {
        for file in ["Dockerfile", "docker-compose.yaml"] {
            if tests.join(file).is_file() {
                place.refused.push(format!(
                    "tests/{file} with a separate verifier: an image built from tests/ is not done yet (give `[verifier.environment] docker_image`)"
                ));
            }
        }
    }
    place.separate = Some(SeparateVerifier {
        image,
        artifacts,
        own_environment: environment.is_some(),
    });
    Ok(place)
}

/// `[[verifier.collect]]`: each hook's command, timeout and user (a name
/// or a uid); a hook for another service is refused.
fn collect_hooks(
    hooks: Option<&Value>,
    refused: &mut Vec<String>,
) -> Result<Vec<CollectHook>, String> {
    let mut read = Vec::new();
    for (i, hook) in hooks
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let Some(hook) = hook.as_table() else {
            continue;
        };
        let Some(command) = hook.get("command").and_then(Value::as_str) else {
            return Err(format!("`verifier.collect[{i}].command` is required"));
        };
        for key in hook.keys() {
            match key.as_str() {
                "command" | "timeout_sec" | "user" => {}
                "service" if hook.get(key).and_then(Value::as_str) == Some("main") => {}
                "service" => refused.push(format!(
                    "`verifier.collect[{i}].{key}`: onebash runs collect hooks in the agent's container"
                )),
                other => return Err(format!("`verifier.collect[{i}]` has no key `{other}`")),
            }
        }
        let timeout = match hook.get("timeout_sec") {
            None => HOOK_TIMEOUT_S,
            Some(Value::Integer(n)) if *n > 0 => *n as f64,
            Some(Value::Float(f)) if *f > 0.0 && f.is_finite() => *f,
            Some(other) => {
                return Err(format!(
                    "`verifier.collect[{i}].timeout_sec` must be a positive number, got {}",
                    super::schema::shown(other)
                ));
            }
        };
        let user = match hook.get("user") {
            None => None,
            Some(Value::String(name)) if name.is_empty() => None,
            Some(Value::String(name)) => Some(name.clone()),
            Some(Value::Integer(uid)) => Some(uid.to_string()),
            Some(other) => {
                return Err(format!(
                    "`verifier.collect[{i}].user` must be a user name or uid, got {}",
                    super::schema::shown(other)
                ));
            }
        };
        read.push(CollectHook {
            command: command.to_owned(),
            timeout: Duration::from_secs_f64(timeout),
            user,
        });
    }
    Ok(read)
}

/// `artifacts`: paths or tables (`source`, `destination`, `exclude`,
/// `service`), after Harbor's implicit `/logs/artifacts` (unless an entry
/// names it). `destination` places a copy on Harbor's host only: it does
/// not change where the verifier finds the artifact.
fn artifacts(entries: Option<&Value>, refused: &mut Vec<String>) -> Result<Vec<Artifact>, String> {
    let mut read: Vec<Artifact> = Vec::new();
    for (i, entry) in entries
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let (source, exclude) = match entry {
            Value::String(source) => (source.clone(), Vec::new()),
            Value::Table(table) => artifact_table(i, table, refused)?,
            _ => continue,
        };
        if source.split('/').any(|part| part == "..") {
            return Err(format!(
                "`artifacts[{i}].source` must not contain '..' components, got {source:?}"
            ));
        }
        let source = if source.starts_with('/') {
            source
        } else {
            format!("/{source}")
        };
        read.push(Artifact { source, exclude });
    }
    if !read
        .iter()
        .any(|a| a.source.trim_end_matches('/') == CONVENTION)
    {
        read.insert(
            0,
            Artifact {
                source: CONVENTION.to_owned(),
                exclude: Vec::new(),
            },
        );
    }
    Ok(read)
}

/// One artifact written as a table: its source and exclude patterns.
fn artifact_table(
    i: usize,
    table: &toml::Table,
    refused: &mut Vec<String>,
) -> Result<(String, Vec<String>), String> {
    let Some(source) = table.get("source").and_then(Value::as_str) else {
        return Err(format!("`artifacts[{i}].source` is required"));
    };
    let mut exclude = Vec::new();
    for (key, value) in table {
        match (key.as_str(), value) {
            ("source" | "destination", Value::String(_)) => {}
            ("service", Value::String(s)) if s == "main" => {}
            ("service", _) => refused.push(format!(
                "`artifacts[{i}].service` = {}: onebash runs one container a task",
                super::schema::shown(value)
            )),
            ("exclude", Value::Array(patterns)) => {
                for pattern in patterns {
                    let Some(pattern) = pattern.as_str() else {
                        return Err(format!("`artifacts[{i}].exclude` must be strings"));
                    };
                    exclude.push(pattern.to_owned());
                }
            }
            (other, _) => {
                return Err(format!(
                    "`artifacts[{i}].{other}` is not a key of an artifact (or not of its type)"
                ));
            }
        }
    }
    Ok((source.to_owned(), exclude))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(text: &str) -> Result<VerifierPlace, String> {
        read(
            &toml::from_str(text).expect("toml"),
            Path::new("/nonexistent"),
        )
    }

    #[test]
    fn the_mode_is_separate_when_written_or_when_the_verifier_has_an_environment() {
        let shared = place("[verifier]\ntimeout_sec = 1\n").expect("read");
        assert!(shared.separate.is_none());
        let written = place("[verifier]\nenvironment_mode = \"separate\"\n").expect("read");
        let separate = written.separate.expect("separate");
        assert_eq!(separate.image, None);
        assert_eq!(separate.artifacts[0].source, CONVENTION);
        let implied = place("[verifier.environment]\ndocker_image = \"alpine:3\"\n").expect("read");
        assert_eq!(
            implied.separate.expect("separate").image.as_deref(),
            Some("alpine:3")
        );
        assert!(implied.refused.is_empty(), "{:?}", implied.refused);
    }

    #[test]
    fn artifacts_keep_their_excludes_and_are_taken_from_the_root() {
        let read = place(
            "artifacts = [\"out\", { source = \"/app/build\", exclude = [\"*.tmp\", \"cache\"], destination = \"b\" }, \"/logs/artifacts/\"]\n[verifier]\nenvironment_mode = \"separate\"\n",
        )
        .expect("read");
        let artifacts = read.separate.expect("separate").artifacts;
        let sources: Vec<&str> = artifacts.iter().map(|a| a.source.as_str()).collect();
        assert_eq!(sources, ["/out", "/app/build", "/logs/artifacts/"]);
        assert_eq!(artifacts[1].exclude, ["*.tmp", "cache"]);
        assert!(place("artifacts = [\"a/../b\"]\n").is_err());
    }

    #[test]
    fn hooks_run_in_both_modes_as_their_user_and_other_services_are_refused() {
        let read = place(
            "[[verifier.collect]]\ncommand = \"date > /logs/artifacts/d\"\n[[verifier.collect]]\ncommand = \"x\"\ntimeout_sec = 5\nservice = \"db\"\nuser = \"app\"\n",
        )
        .expect("read");
        assert!(read.separate.is_none());
        assert_eq!(read.collect.len(), 2);
        assert_eq!(read.collect[0].timeout, Duration::from_secs(60));
        assert_eq!(read.collect[1].timeout, Duration::from_secs(5));
        assert_eq!(
            (
                read.collect[0].user.as_deref(),
                read.collect[1].user.as_deref()
            ),
            (None, Some("app"))
        );
        assert_eq!(read.refused.len(), 1, "{:?}", read.refused);
        assert!(read.refused[0].contains("`verifier.collect[1].service`"));
    }

    #[test]
    fn the_verifiers_environment_is_read_for_its_image_only() {
        let read = place("[verifier.environment]\ndocker_image = \"a\"\ncpus = 2\n").expect("read");
        assert_eq!(read.refused.len(), 1, "{:?}", read.refused);
        assert!(read.refused[0].contains("`verifier.environment.cpus`"));
    }
}
