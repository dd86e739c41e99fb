//! What task.toml says of the task's container beyond its image and
//! limits, read as Harbor 0.26 applies it (`environments/base.py` and
//! `docker/docker.py`: the variables set on the main service, `exec -w
//! workdir` and `exec -u user`, `run_healthcheck`; `trial/trial.py`: the
//! agent's and the verifier's users; `agents/oracle.py`: `[solution]
//! env` for solve.sh alone): [`Runtime`]. schema.rs checked the types and
//! refused what onebash cannot honour (a `${VAR}` template); the container
//! environment (env/container.rs) applies the [`ContainerSetup`], and the
//! healthcheck runs as the task's setup command, before the agent.

use toml::Value;

use super::{VERIFIER_LOGS, shell_quote};
use crate::task::benchmark::ContainerSetup;

/// The folders Harbor's docker environment makes writable by all
/// (`chmod 777`) when the container starts, where an agent or a verifier
/// of another user writes; and `/solution`, where onebash's oracle (which
/// runs as the agent's user, as Harbor's does) writes the solution
/// Harbor uploads as root.
const WRITABLE: &[&str] = &["/logs/agent", VERIFIER_LOGS, "/logs/artifacts", "/solution"];

/// Harbor's `HealthcheckConfig` defaults: interval, timeout, start period,
/// start interval (seconds), retries.
const HEALTHCHECK_DEFAULTS: (f64, f64, f64, f64, i64) = (5.0, 30.0, 0.0, 5.0, 3);

/// A runtime key whose value Harbor rejects, or a variable no `-e` can
/// carry.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RuntimeKeyError {
    #[error("`{table}.{name}` must be a string under a variable name")]
    Variable { table: &'static str, name: String },
    #[error("`environment.healthcheck.command` is required (a string)")]
    NoHealthcheckCommand,
    #[error("`environment.healthcheck.{key}` must be a number of seconds, got {got}")]
    Seconds { key: &'static str, got: String },
    #[error("`environment.healthcheck.retries` must be an integer, got {got}")]
    Retries { got: String },
}

/// What task.toml says of the container and the oracle beyond the image.
#[derive(Debug, Default)]
pub(super) struct Runtime {
    pub setup: ContainerSetup,
    /// `[environment.healthcheck]` as a bash script that loops as
    /// Harbor's `run_healthcheck` does and fails as it fails.
    pub healthcheck: Option<String>,
    /// `[solution] env`: set for solve.sh alone.
    pub solution_env: Vec<(String, String)>,
}

/// Reads the runtime keys of task.toml's table. An error is what Harbor
/// rejects, or a variable no `-e` can carry.
pub(super) fn read(doc: &toml::Table) -> Result<Runtime, RuntimeKeyError> {
    let table = |name: &str| doc.get(name).and_then(Value::as_table);
    let environment = table("environment");
    let mut setup = ContainerSetup {
        env: variables("environment.env", environment.and_then(|e| e.get("env")))?,
        workdir: environment
            .and_then(|e| e.get("workdir"))
            .and_then(Value::as_str)
            .filter(|dir| !dir.is_empty())
            .map(str::to_owned),
        agent_user: user(table("agent")),
        verifier_user: user(table("verifier")),
        writable: Vec::new(),
    };
    if setup.agent_user.is_some() || setup.verifier_user.is_some() {
        setup.writable = WRITABLE.iter().map(|dir| (*dir).to_owned()).collect();
    }
    let healthcheck = match environment.and_then(|e| e.get("healthcheck")) {
        Some(Value::Table(check)) => Some(healthcheck_script(check)?),
        _ => None,
    };
    let solution_env = variables("solution.env", table("solution").and_then(|s| s.get("env")))?;
    Ok(Runtime {
        setup,
        healthcheck,
        solution_env,
    })
}

/// A phase's `user`: a name, or a uid written as a number; `None` (the
/// image's user) when absent or empty, as Harbor passes no `-u` then.
fn user(phase: Option<&toml::Table>) -> Option<String> {
    match phase?.get("user")? {
        Value::String(name) if !name.is_empty() => Some(name.clone()),
        Value::Integer(uid) => Some(uid.to_string()),
        _ => None,
    }
}

/// A table of variables: each a string under a name an `-e NAME=VALUE`
/// (or `env NAME=VALUE`) can carry.
fn variables(
    path: &'static str,
    table: Option<&Value>,
) -> Result<Vec<(String, String)>, RuntimeKeyError> {
    let Some(table) = table.and_then(Value::as_table) else {
        return Ok(Vec::new());
    };
    let mut vars = Vec::new();
    for (name, value) in table {
        let carried = !name.is_empty() && !name.contains(['=', '\0']);
        match value {
            Value::String(text) if carried && !text.contains('\0') => {
                vars.push((name.clone(), text.clone()));
            }
            _ => {
                return Err(RuntimeKeyError::Variable {
                    table: path,
                    name: name.clone(),
                });
            }
        }
    }
    Ok(vars)
}

/// A number of seconds of the healthcheck, or its default.
fn seconds(check: &toml::Table, key: &'static str, default: f64) -> Result<f64, RuntimeKeyError> {
    match check.get(key) {
        None => Ok(default),
        Some(Value::Integer(n)) => Ok(*n as f64),
        Some(Value::Float(f)) if f.is_finite() => Ok(*f),
        Some(other) => Err(RuntimeKeyError::Seconds {
            key,
            got: super::schema::shown(other),
        }),
    }
}

/// Harbor's `run_healthcheck` as a bash script: the command, in the
/// container's workdir with its variables, each attempt within
/// `timeout_sec` (truncated to whole seconds, as Harbor passes it; 0: no
/// limit); passing once ends it; a failure within `start_period_sec` of
/// the start only waits `start_interval_sec`; after it, `retries`
/// consecutive failures (the first of them counted) fail it, with
/// Harbor's message, `interval_sec` apart.
fn healthcheck_script(check: &toml::Table) -> Result<String, RuntimeKeyError> {
    let (interval, timeout, period, start_interval, retries) = HEALTHCHECK_DEFAULTS;
    let Some(command) = check.get("command").and_then(Value::as_str) else {
        return Err(RuntimeKeyError::NoHealthcheckCommand);
    };
    let interval = seconds(check, "interval_sec", interval)?;
    let timeout = seconds(check, "timeout_sec", timeout)?;
    let period = seconds(check, "start_period_sec", period)?;
    let start_interval = seconds(check, "start_interval_sec", start_interval)?;
    let retries = match check.get("retries") {
        None => retries,
        Some(Value::Integer(n)) => *n,
        Some(Value::Float(f)) if f.fract() == 0.0 && f.is_finite() => *f as i64,
        Some(other) => {
            return Err(RuntimeKeyError::Retries {
                got: super::schema::shown(other),
            });
        }
    };
    let whole_timeout = timeout.trunc().max(0.0) as u64;
    let period_us = (period.max(0.0) * 1e6) as u64;
    let quoted = shell_quote(command);
    let failed = shell_quote(&format!(
        "healthcheck failed after {retries} consecutive retries: {command}"
    ));
    Ok(format!(
        r#"__hc={quoted}
__now() {{ local t=${{EPOCHREALTIME/[.,]/}}; echo "${{t:-$((SECONDS * 1000000))}}"; }}
__limit=()
if [ {whole_timeout} -gt 0 ] && command -v timeout >/dev/null 2>&1; then __limit=(timeout -k 5 {whole_timeout}); fi
__start=$(__now)
__fails=0
while :; do
  __in_start=0
  [ "$(__now)" -lt $((__start + {period_us})) ] && __in_start=1
  if "${{__limit[@]}}" bash -c "$__hc"; then echo 'healthcheck passed'; exit 0; fi
  if [ "$__in_start" = 1 ]; then sleep {start_interval}; continue; fi
  __fails=$((__fails + 1))
  if [ "$__fails" -ge {retries} ]; then echo {failed} >&2; exit 1; fi
  sleep {interval}
done"#
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime(text: &str) -> Result<Runtime, String> {
        read(&toml::from_str(text).expect("toml")).map_err(|err| err.to_string())
    }

    #[test]
    fn users_workdir_and_variables_are_read_as_harbor_applies_them() {
        let read = runtime(
            "[agent]\nuser = \"agent\"\n[verifier]\nuser = 1000\n[environment]\nworkdir = \"/w\"\nenv = { A = \"it's\", \"B-C\" = \"\" }\n[solution]\nenv = { K = \"v\" }\n",
        )
        .expect("read");
        assert_eq!(read.setup.agent_user.as_deref(), Some("agent"));
        assert_eq!(read.setup.verifier_user.as_deref(), Some("1000"));
        assert_eq!(read.setup.workdir.as_deref(), Some("/w"));
        assert_eq!(
            read.setup.env,
            [("A".into(), "it's".into()), ("B-C".into(), String::new())]
        );
        assert!(read.setup.writable.contains(&"/logs/verifier".to_owned()));
        assert_eq!(read.solution_env, [("K".into(), "v".into())]);
        assert!(read.healthcheck.is_none());
        let defaults =
            runtime("[agent]\nuser = \"\"\n[environment]\nworkdir = \"\"\n").expect("read");
        assert_eq!(defaults.setup, ContainerSetup::default());
        let bad = runtime("[environment]\nenv = { \"A=B\" = \"x\" }\n").map(|_| ());
        assert!(bad.is_err_and(|m| m.contains("`environment.env.A=B`")));
    }

    #[test]
    fn the_healthcheck_takes_harbors_defaults_and_its_command_is_required() {
        let read =
            runtime("[environment.healthcheck]\ncommand = \"test -f /ready\"\n").expect("read");
        let script = read.healthcheck.expect("a script");
        assert!(script.starts_with("__hc='test -f /ready'\n"), "{script}");
        assert!(script.contains("timeout -k 5 30)"), "{script}");
        assert!(script.contains("-ge 3 ]"), "{script}");
        assert!(script.contains("sleep 5\n"), "{script}");
        assert!(script.contains("healthcheck failed after 3 consecutive retries: test -f /ready"));
        let set = runtime(
            "[environment.healthcheck]\ncommand = \"x\"\ninterval_sec = 0.5\ntimeout_sec = 0.5\nstart_period_sec = 2\nretries = 1\n",
        )
        .expect("read")
        .healthcheck
        .expect("a script");
        assert!(
            set.contains("[ 0 -gt 0 ]") && set.contains("+ 2000000"),
            "{set}"
        );
        assert!(
            set.contains("sleep 0.5\n") && set.contains("-ge 1 ]"),
            "{set}"
        );
        let missing = runtime("[environment.healthcheck]\nretries = 1\n").map(|_| ());
        assert!(
            missing.is_err_and(|m| m.contains("`environment.healthcheck.command` is required"))
        );
    }

    /// The script run by bash: the attempts of a command that passes from
    /// its `passes_at`th, counted in a file; its exit code and output.
    fn attempts(settings: &str, passes_at: u32) -> (i32, String, usize) {
        let dir = tempfile::tempdir().expect("tempdir");
        let count = dir.path().join("count");
        let text = format!(
            "[environment.healthcheck]\ncommand = 'echo x >> {count}; [ \"$(wc -l < {count})\" -ge {passes_at} ]'\ninterval_sec = 0\nstart_interval_sec = 0\n{settings}",
            count = count.display()
        );
        let script = runtime(&text).expect("read").healthcheck.expect("a script");
        let out = std::process::Command::new("bash")
            .args(["-c", &script])
            .output()
            .expect("bash");
        let tried = std::fs::read_to_string(&count).unwrap_or_default();
        let said = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.code().unwrap_or(-1), said, tried.lines().count())
    }

    /// As Harbor's `run_healthcheck`: a pass ends it; `retries`
    /// consecutive failures fail it, with Harbor's message; failures
    /// within the start period are not counted.
    #[test]
    fn the_healthcheck_passes_once_it_passes_and_fails_after_its_retries() {
        let (code, said, tried) = attempts("retries = 3\n", 3);
        assert_eq!((code, tried), (0, 3), "{said}");
        assert!(said.contains("healthcheck passed"), "{said}");
        let (code, said, tried) = attempts("retries = 2\n", 100);
        assert_eq!((code, tried), (1, 2), "{said}");
        assert!(
            said.contains("healthcheck failed after 2 consecutive retries: echo x"),
            "{said}"
        );
        let (code, said, tried) = attempts("retries = 1\nstart_period_sec = 100000\n", 4);
        assert_eq!((code, tried), (0, 4), "{said}");
    }
}
