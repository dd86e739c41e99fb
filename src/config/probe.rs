//! What this machine allows a run: whether bwrap works here, and whether
//! each task can have a cgroup.
//!
//! Owns [`Probed`] and the one call that finds it. Probing runs bwrap once
//! and makes (and reaps) folders in the cgroup file system, so it is not
//! part of checking the arguments (`run_config.rs`, which builds a config
//! without looking at the machine): `main` calls it, through
//! `RunConfig::probe`, once the arguments are good and before the async
//! runtime starts. What the sandbox hides is `run_config.rs`'s choice; how a
//! command is confined is `sys/sandbox.rs`'s, how a limit is kept `sys/limits.rs`'s.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::env::container::Engine;
use crate::env::{EnvError, EnvKind, PullPolicy};
use crate::sys::limits::{Enforcement, LimitPlan, Limits, Mechanism};
use crate::sys::sandbox::{Sandbox, SandboxError, SandboxMode};

/// What the machine does not allow the run: the engine or `--env oci`
/// (their messages name the engine and images), or `--sandbox bwrap`.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error(transparent)]
    Env(#[from] EnvError),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
}

/// What the probes found: the sandbox in use and how each limit is kept.
/// run.json records the names (`sandbox_used`, `limits_enforced`) among
/// the settings.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Probed {
    #[serde(skip)]
    pub sandbox: Sandbox,
    /// The sandbox in use: `bwrap` or `none`.
    pub sandbox_used: &'static str,
    #[serde(skip)]
    pub limit_plan: LimitPlan,
    /// How each limit is enforced here.
    pub limits_enforced: Enforcement,
    /// The container engine tasks run in (`--env podman|docker`), found
    /// answering, with every task's image in its store.
    #[serde(skip)]
    pub engine: Option<Engine>,
    /// `--env oci`: every task's image made ready, and bwrap found
    /// working over one of them.
    #[serde(skip)]
    pub oci: Option<crate::env::oci::Settings>,
}

impl Probed {
    /// Probes bwrap (unless `mode` is `none`) with the paths its commands
    /// must not see, and the cgroup file system. Returns what it found and
    /// what the user should know before the run starts (no sandbox, a
    /// process limit that is not kept); an error when `--sandbox bwrap`
    /// cannot be had.
    ///
    /// With a container environment the container is the sandbox: bwrap
    /// is not probed, and the engine is instead (on PATH, answering, every
    /// image in its store or pulled as `pull` says).
    pub(crate) fn probe(
        mode: SandboxMode,
        hidden: &[PathBuf],
        limits: Limits,
        (env_kind, images, pull): (EnvKind, &[String], PullPolicy),
        (cache_dir, workdir): (&Path, &str),
    ) -> Result<(Probed, Vec<String>), ProbeError> {
        let mut warnings = Vec::new();
        let engine = match env_kind {
            EnvKind::Host | EnvKind::Oci => None,
            EnvKind::Podman | EnvKind::Docker => Some(Engine::probe(env_kind, images, pull)?),
        };
        // A registry's images are fetched as `--pull` says; local ones read.
        let oci = match env_kind {
            EnvKind::Oci => Some(
                crate::env::oci::Images::prepare(cache_dir, images, pull).and_then(|images| {
                    crate::env::oci::Settings::probe(images, workdir.to_owned())
                })?,
            ),
            _ => None,
        };
        let (sandbox, sandbox_warning) = match (&engine, &oci) {
            (Some(_), _) | (_, Some(_)) => (Sandbox::None, None),
            (None, None) => Sandbox::choose(mode, hidden)?,
        };
        warnings.extend(sandbox_warning);
        let limit_plan = LimitPlan::new(limits);
        let limits_enforced = limit_plan.enforcement();
        if limits_enforced.processes == Mechanism::NotEnforced {
            warnings.push(format!(
                "the process limit is not enforced: {}",
                limit_plan
                    .cgroup_problem
                    .as_deref()
                    .unwrap_or("no cgroup could be made")
            ));
        }
        let probed = Probed {
            sandbox_used: match (&engine, &oci) {
                (Some(engine), _) => engine.name(),
                (None, Some(_)) => "bwrap",
                (None, None) => sandbox.name(),
            },
            sandbox,
            limit_plan,
            limits_enforced,
            engine,
            oci,
        };
        Ok((probed, warnings))
    }
}

/// What `run --dry-run` finds: the probes a run makes, without pulling,
/// fetching or unpacking an image.
#[derive(Debug, Clone)]
pub(crate) struct Looked {
    /// The name a run would record (`bwrap`, `none`, the engine).
    pub sandbox_used: &'static str,
    /// Each image once, in the order tasks name them, and whether it is
    /// there or would be pulled.
    pub images: Vec<(String, crate::env::oci::Readiness)>,
    pub warnings: Vec<String>,
}

impl Probed {
    /// [`Probed::probe`]'s checks, images looked at and not made ready: the
    /// engine found and answering, each image in its store or (missing)
    /// named by its registry; `--env oci`'s images in the cache or named by
    /// theirs; bwrap on the host. An error is the one the run would stop
    /// with.
    pub(crate) fn look(
        mode: SandboxMode,
        hidden: &[PathBuf],
        (env_kind, images, pull): (EnvKind, &[String], PullPolicy),
        cache_dir: &Path,
    ) -> Result<Looked, ProbeError> {
        use crate::env::oci::Readiness;
        let mut warnings = Vec::new();
        let (sandbox_used, images) = match env_kind {
            EnvKind::Podman | EnvKind::Docker => {
                let (engine, to_pull) = Engine::look(env_kind, images, pull)?;
                let mut states = Vec::new();
                for image in images {
                    if states.iter().any(|(seen, _)| seen == image) {
                        continue;
                    }
                    let state = match (to_pull.contains(image), pull) {
                        (false, _) => Readiness::Present,
                        (true, PullPolicy::Always) => Readiness::ToPullAgain,
                        (true, _) => crate::env::oci::look_in_registry(image)?,
                    };
                    states.push((image.clone(), state));
                }
                (engine.name(), states)
            }
            EnvKind::Oci => ("bwrap", crate::env::oci::look(cache_dir, images, pull)?),
            EnvKind::Host => {
                let (sandbox, warning) = Sandbox::choose(mode, hidden)?;
                warnings.extend(warning);
                (sandbox.name(), Vec::new())
            }
        };
        Ok(Looked {
            sandbox_used,
            images,
            warnings,
        })
    }
}
