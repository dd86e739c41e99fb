//! `onebash doctor`: what this machine can run and why not, one line per
//! check with a hint.
//!
//! Owns the list of checks and their rendering. It owns no probe of its
//! own for what a run needs: each environment is checked by calling
//! [`Probed::probe`], the very call `run` makes before its first task
//! (bwrap run once, the engine found and asked its version, cgroups
//! found), with no images, so a verdict here and a run's refusal carry
//! the same message. What it adds is what a run does not probe at start:
//! git and python3 answering, the cache's free space and file system, and
//! (unless `--offline`) the Hub and a registry answering a HEAD.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::cli::DoctorFormat;
use crate::commands::error::{EXIT_OK, EXIT_TASK_ERRORS};
use crate::config::probe::{ProbeError, Probed};
use crate::env::{EnvKind, PullPolicy};
use crate::sys::limits::{Limits, Mechanism};
use crate::sys::sandbox::SandboxMode;

/// Below this much free space in the cache a warning: one SWE-bench image
/// unpacked takes a few GiB.
const LOW_SPACE_BYTES: u64 = 20 << 30;

/// How long a HEAD may take before the host counts as unreachable.
const HEAD_TIMEOUT: Duration = Duration::from_secs(4);

/// The registry asked when not offline: Docker Hub's API, where
/// SWE-bench's images are.
const REGISTRY_URL: &str = "https://registry-1.docker.io/v2/";

/// A check's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Verdict {
    Ok,
    Warn,
    No,
}

impl Verdict {
    fn word(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Warn => "warn",
            Verdict::No => "no",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Check {
    pub verdict: Verdict,
    pub name: String,
    pub detail: String,
    pub hint: Option<String>,
}

impl Check {
    fn new(verdict: Verdict, name: &str, detail: impl Into<String>) -> Check {
        Check {
            verdict,
            name: name.to_owned(),
            detail: detail.into(),
            hint: None,
        }
    }

    fn hint(mut self, hint: impl Into<String>) -> Check {
        self.hint = Some(hint.into());
        self
    }

    /// A refusal whose message is `detail\nhint: hint`, as the probes
    /// write them: the same words a run stops with.
    fn refused(name: &str, message: &str) -> Check {
        match message.split_once("\nhint: ") {
            Some((detail, hint)) => Check::new(Verdict::No, name, detail).hint(hint),
            None => Check::new(Verdict::No, name, message),
        }
    }
}

/// Every check, and whether the default environment can run.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    pub checks: Vec<Check>,
    /// `run` with no `--env` (the host, `--sandbox auto`) can run here.
    pub default_env_runs: bool,
}

impl Report {
    /// 1 when the default environment cannot run, else 0.
    pub(crate) fn exit_code(&self) -> i32 {
        if self.default_env_runs {
            EXIT_OK
        } else {
            EXIT_TASK_ERRORS
        }
    }

    pub(crate) fn render(&self, format: DoctorFormat) -> String {
        match format {
            DoctorFormat::Json => {
                let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
                text.push('\n');
                text
            }
            DoctorFormat::Text => {
                let width = self.checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
                let mut text = String::new();
                for check in &self.checks {
                    let word = check.verdict.word();
                    text.push_str(&format!(
                        "{word:<4} {:<width$}  {}\n",
                        check.name, check.detail
                    ));
                    if let Some(hint) = &check.hint {
                        text.push_str(&format!("     {:<width$}  hint: {hint}\n", ""));
                    }
                }
                text
            }
        }
    }
}

/// Runs every check; the network's only unless `offline`.
pub(crate) fn doctor(offline: bool, cache_dir: Option<&Path>) -> Report {
    let cache_dir = cache_dir.map_or_else(crate::config::default_cache_dir, Path::to_path_buf);
    let mut checks = Vec::new();
    let bwrap = probe(SandboxMode::Bwrap, EnvKind::Host, &cache_dir);
    checks.push(match &bwrap {
        Ok(_) => Check::new(
            Verdict::Ok,
            "host --sandbox bwrap",
            "bwrap works here (user namespaces allowed)",
        ),
        Err(err) => Check::refused("host --sandbox bwrap", &err.to_string()),
    });
    let host = probe(SandboxMode::None, EnvKind::Host, &cache_dir);
    checks.push(match &host {
        Ok(_) => Check::new(
            Verdict::Ok,
            "host --sandbox none",
            "commands run as you, with your files and network",
        ),
        Err(err) => Check::refused("host --sandbox none", &err.to_string()),
    });
    for kind in [EnvKind::Podman, EnvKind::Docker] {
        let name = format!("--env {}", kind.engine().unwrap_or("podman"));
        checks.push(match probe(SandboxMode::Auto, kind, &cache_dir) {
            Ok(Probed {
                engine: Some(engine),
                ..
            }) => Check::new(Verdict::Ok, &name, engine_detail(&engine)),
            Ok(_) => Check::new(Verdict::Ok, &name, "answers"),
            Err(err) => Check::refused(&name, &err.to_string()),
        });
    }
    checks.push(oci_check(&cache_dir, &bwrap));
    if let Ok(probed) = &host {
        checks.push(limits_check(probed));
    }
    let git = tool_check(
        "git",
        "install git: every environment checks tasks out with it",
    );
    let bash = tool_check("bash", "install bash: every command runs in it");
    let default_env_runs = git.verdict == Verdict::Ok && bash.verdict == Verdict::Ok;
    checks.push(git);
    checks.push(bash);
    checks.push(tool_check(
        "python3",
        "install python3: the demo's tests (tasks/demo) run with it",
    ));
    checks.push(cache_check(&cache_dir));
    if offline {
        checks.push(Check::new(
            Verdict::Ok,
            "network",
            "not checked (--offline)",
        ));
    } else {
        let hub = crate::dataset::HubSettings::from_env(None, &cache_dir).endpoint;
        checks.push(head_check(
            "hub",
            &hub,
            "datasets by name (hf:...) need it, or HF_ENDPOINT",
        ));
        checks.push(head_check(
            "registry",
            REGISTRY_URL,
            "images pulled by --env oci|podman|docker need it; a cache filled by `onebash pull` does not",
        ));
    }
    checks.push(default_check(default_env_runs, bwrap.is_ok()));
    Report {
        checks,
        default_env_runs,
    }
}

/// The run's own probe for `env` under `mode`, with no images: what
/// `RunConfig::probe` calls, with `run`'s default limits.
fn probe(mode: SandboxMode, env: EnvKind, cache_dir: &Path) -> Result<Probed, ProbeError> {
    let limits = Limits {
        max_processes: 512,
        max_memory_bytes: 4096 << 20,
        max_file_size_bytes: 2048 << 20,
    };
    let hidden = [cache_dir.to_path_buf()];
    Probed::probe(
        mode,
        &hidden,
        limits,
        (env, &[], PullPolicy::Missing),
        (cache_dir, "/testbed"),
    )
    .map(|(probed, _warnings)| probed)
}

/// Where the engine is, its version, and the socket the environment
/// names (the engine's own default otherwise).
fn engine_detail(engine: &crate::env::container::Engine) -> String {
    let version = engine
        .version()
        .unwrap_or_else(|| "version unknown".to_owned());
    let socket_var = match engine.kind {
        EnvKind::Docker => "DOCKER_HOST",
        _ => "CONTAINER_HOST",
    };
    let socket = std::env::var(socket_var)
        .map(|socket| format!("{socket_var}={socket}"))
        .unwrap_or_else(|_| "its default socket".to_owned());
    format!(
        "{} answers: version {version}, through {socket}",
        engine.program.display()
    )
}

/// `--env oci`: its own probe (bwrap found), and the user namespaces the
/// host's bwrap probe tried, since with no image at hand the oci probe
/// cannot run bwrap over one.
fn oci_check(cache_dir: &Path, bwrap: &Result<Probed, ProbeError>) -> Check {
    let name = "--env oci";
    match (probe(SandboxMode::Auto, EnvKind::Oci, cache_dir), bwrap) {
        (Err(err), _) => Check::refused(name, &err.to_string()),
        (Ok(_), Err(err)) => Check::new(
            Verdict::No,
            name,
            format!("bwrap is there but cannot run: {err}"),
        )
        .hint("user namespaces must be allowed (sysctl kernel.unprivileged_userns_clone=1)"),
        (Ok(_), Ok(_)) => Check::new(
            Verdict::Ok,
            name,
            format!(
                "bwrap works; images go to {}",
                cache_dir.join("oci").display()
            ),
        ),
    }
}

/// How `--max-processes` and `--max-memory` are kept, as run.json's
/// `limits_enforced` records it.
fn limits_check(probed: &Probed) -> Check {
    let enforced = &probed.limits_enforced;
    let detail = format!(
        "--max-processes: {}; --max-memory: {}",
        enforced.processes.describe(),
        enforced.memory.describe()
    );
    let cgroups = matches!(
        enforced.processes,
        Mechanism::CgroupV1Pids | Mechanism::CgroupV2Pids
    );
    if cgroups {
        return Check::new(Verdict::Ok, "cgroups", detail);
    }
    let why = probed
        .limit_plan
        .cgroup_problem
        .clone()
        .unwrap_or_else(|| "no cgroup could be made".to_owned());
    Check::new(Verdict::Warn, "cgroups", format!("{detail} ({why})"))
        .hint("run under a systemd user scope (systemd-run --user --scope -p Delegate=yes onebash ...) to get a cgroup per task")
}

/// A tool found on PATH and answering `--version`: its first line.
fn tool_check(program: &str, hint: &str) -> Check {
    let args = [OsString::from("--version")];
    match crate::sys::exec::run_client(Path::new(program), &args, None, false) {
        Ok(out) => {
            let text = String::from_utf8_lossy(&out);
            let first = text.lines().next().unwrap_or("").trim();
            Check::new(Verdict::Ok, program, first.to_owned())
        }
        Err(err) => Check::new(Verdict::No, program, format!("{program}: {err}")).hint(hint),
    }
}

/// The cache's free space and file system, looked at in its nearest
/// folder that exists (a first run makes the cache).
fn cache_check(cache_dir: &Path) -> Check {
    let name = "cache";
    let Some(existing) = cache_dir.ancestors().find(|dir| dir.is_dir()) else {
        return Check::new(
            Verdict::No,
            name,
            format!("no folder of {} exists", cache_dir.display()),
        )
        .hint("pass --cache-dir DIR");
    };
    let Some((free, fs)) = stat_fs(existing) else {
        return Check::new(
            Verdict::Warn,
            name,
            format!("cannot read the file system of {}", existing.display()),
        );
    };
    let detail = format!(
        "{}: {:.1} GiB free, {fs}",
        cache_dir.display(),
        free as f64 / f64::from(1u32 << 30)
    );
    if free < LOW_SPACE_BYTES {
        Check::new(Verdict::Warn, name, detail)
            .hint("images unpacked take a few GiB each: free space or pass --cache-dir DIR")
    } else if fs == "nfs" {
        Check::new(Verdict::Warn, name, detail)
            .hint("a local disk is faster for images and checkouts: --cache-dir DIR")
    } else {
        Check::new(Verdict::Ok, name, detail)
    }
}

/// Free bytes for this user and the file system's name.
fn stat_fs(path: &Path) -> Option<(u64, &'static str)> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statfs is given a NUL-terminated path and a zeroed struct it fills.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above; the pointers live for the call.
    if unsafe { libc::statfs(path.as_ptr(), &raw mut stat) } != 0 {
        return None;
    }
    let free = stat
        .f_bavail
        .saturating_mul(u64::try_from(stat.f_bsize).ok()?);
    let fs = match stat.f_type {
        0xEF53 => "ext4",
        0x9123_683E => "btrfs",
        0x5846_5342 => "xfs",
        0x0102_1994 => "tmpfs",
        0x794C_7630 => "overlayfs",
        0x6969 => "nfs",
        0x2FC1_2FC1 => "zfs",
        _ => "another file system",
    };
    Some((free, fs))
}

/// A HEAD of `url`: any answer counts (a registry answers 401 to one with
/// no token); no answer in [`HEAD_TIMEOUT`] is a warning, since runs of
/// local tasks need no network.
fn head_check(name: &str, url: &str, hint: &str) -> Check {
    let asked = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| err.to_string())
        .and_then(|runtime| {
            runtime.block_on(async {
                let client = reqwest::Client::builder()
                    .timeout(HEAD_TIMEOUT)
                    .build()
                    .map_err(|err| err.to_string())?;
                client
                    .head(url)
                    .send()
                    .await
                    .map(|response| response.status())
                    .map_err(|err| err.to_string())
            })
        });
    match asked {
        Ok(status) => Check::new(Verdict::Ok, name, format!("{url} answers ({status})")),
        Err(why) => Check::new(Verdict::Warn, name, format!("{url}: {why}")).hint(hint),
    }
}

/// The verdict on `run` with no `--env`: the host under `--sandbox auto`.
fn default_check(runs: bool, bwrap: bool) -> Check {
    let name = "default env";
    match (runs, bwrap) {
        (false, _) => Check::new(
            Verdict::No,
            name,
            "host --sandbox auto cannot run: git or bash is missing",
        )
        .hint("install git and bash"),
        (true, true) => Check::new(Verdict::Ok, name, "host --sandbox auto runs under bwrap"),
        (true, false) => Check::new(
            Verdict::Warn,
            name,
            "host --sandbox auto runs with no sandbox (see host --sandbox bwrap)",
        )
        .hint("install bubblewrap, or pass --sandbox none to silence run's warning"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A probe's message splits into the line shown and its hint.
    #[test]
    fn refused_splits_the_hint_off() {
        let check = Check::refused("x", "--env podman: gone\nhint: install it");
        assert_eq!(check.verdict, Verdict::No);
        assert_eq!(check.detail, "--env podman: gone");
        assert_eq!(check.hint.as_deref(), Some("install it"));
        let plain = Check::refused("x", "no hint here");
        assert_eq!(plain.hint, None);
    }

    /// The text has one line per check, its hint indented under it.
    #[test]
    fn text_has_a_line_per_check_and_hints_under_them() {
        let report = Report {
            checks: vec![
                Check::new(Verdict::Ok, "git", "git version 2"),
                Check::new(Verdict::No, "--env podman", "gone").hint("install it"),
            ],
            default_env_runs: false,
        };
        let text = report.render(DoctorFormat::Text);
        assert_eq!(
            text,
            "ok   git           git version 2\nno   --env podman  gone\n                   hint: install it\n"
        );
        assert_eq!(report.exit_code(), EXIT_TASK_ERRORS);
    }
}
