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
use crate::env::oci::Readiness;
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
/// fetching or unpacking an image. A probe that fails does not stop the
/// looking: the failure is kept and the rest is still looked at.
#[derive(Debug)]
pub(crate) struct Looked {
    /// The name a run would record (`bwrap`, `none`, the engine).
    pub sandbox_used: &'static str,
    /// Each image once, in the order tasks name them, and whether it is
    /// there or would be pulled; `None` when it could not be checked (the
    /// engine does not answer, it is missing under `--pull never`, its
    /// registry failed, or an earlier image's registry did).
    pub images: Vec<(String, Option<Readiness>)>,
    /// The checks that failed, each the error the run would stop with.
    pub failures: Vec<ProbeError>,
    pub warnings: Vec<String>,
}

impl Probed {
    /// [`Probed::probe`]'s checks, images looked at and not made ready: the
    /// engine found and answering, each image in its store or (missing)
    /// named by its registry; `--env oci`'s images in the cache or named by
    /// theirs; bwrap on the host. Every failure is kept in
    /// [`Looked::failures`]; once a registry failed, no further image is
    /// asked of one (with no network each would wait out its own timeout).
    pub(crate) fn look(
        mode: SandboxMode,
        hidden: &[PathBuf],
        (env_kind, images, pull): (EnvKind, &[String], PullPolicy),
        cache_dir: &Path,
    ) -> Looked {
        let mut looked = Looked {
            sandbox_used: "none",
            images: Vec::new(),
            failures: Vec::new(),
            warnings: Vec::new(),
        };
        let mut unique: Vec<&String> = Vec::new();
        for image in images {
            if !unique.contains(&image) {
                unique.push(image);
            }
        }
        match env_kind {
            EnvKind::Podman | EnvKind::Docker => look_engine(&mut looked, env_kind, &unique, pull),
            EnvKind::Oci => {
                looked.sandbox_used = "bwrap";
                let look = |name: &String, pull| {
                    crate::env::oci::look(cache_dir, std::slice::from_ref(name), pull)
                        .map(|mut states| states.pop().map(|(_, state)| state))
                };
                // What the cache holds needs no registry; `--pull always`
                // asks again whatever it holds.
                let local = |name: &String| match pull {
                    PullPolicy::Always => None,
                    _ => look(name, PullPolicy::Never).ok().flatten(),
                };
                let ask = |name: &String| {
                    look(name, pull).map(|state| state.unwrap_or(Readiness::ToPullAgain))
                };
                look_each(
                    &mut looked,
                    &unique,
                    (local, ask),
                    pull == PullPolicy::Never,
                );
            }
            EnvKind::Host => match Sandbox::choose(mode, hidden) {
                Ok((sandbox, warning)) => {
                    looked.warnings.extend(warning);
                    looked.sandbox_used = sandbox.name();
                }
                Err(err) => {
                    looked.sandbox_used = "bwrap";
                    looked.failures.push(err.into());
                }
            },
        }
        looked
    }
}

/// `--env podman|docker`: the engine answering, then each image in its
/// store or named by its registry.
fn look_engine(looked: &mut Looked, kind: EnvKind, unique: &[&String], pull: PullPolicy) {
    looked.sandbox_used = kind.engine().unwrap_or("podman");
    let owned: Vec<String> = unique.iter().map(|image| (*image).clone()).collect();
    match Engine::look(kind, &owned, pull) {
        Ok((_, to_pull)) => {
            let local = |image: &String| match (to_pull.contains(image), pull) {
                (false, _) => Some(Readiness::Present),
                (true, PullPolicy::Always) => Some(Readiness::ToPullAgain),
                (true, _) => None,
            };
            let ask = |image: &String| crate::env::oci::look_in_registry(image);
            look_each(looked, unique, (local, ask), false);
        }
        // `--pull never`: the missing images are named in one error, the
        // rest are there.
        Err(EnvError::NotInStore { engine, images }) => {
            looked.images = unique
                .iter()
                .map(|image| {
                    let state = (!images.contains(image)).then_some(Readiness::Present);
                    ((*image).clone(), state)
                })
                .collect();
            looked
                .failures
                .push(EnvError::NotInStore { engine, images }.into());
        }
        // No engine to ask: no image is checked.
        Err(err) => {
            looked.images = unique
                .iter()
                .map(|image| ((*image).clone(), None))
                .collect();
            looked.failures.push(err.into());
        }
    }
}

/// Each image's state: what `local` knows without a network, else what
/// `ask` finds (a registry). After the first failure of `ask` no image is
/// asked any more, unless `ask_all` (it asks no network).
fn look_each<L, A>(looked: &mut Looked, unique: &[&String], (local, ask): (L, A), ask_all: bool)
where
    L: Fn(&String) -> Option<Readiness>,
    A: Fn(&String) -> Result<Readiness, EnvError>,
{
    let mut failed = false;
    for image in unique {
        let state = match local(image) {
            Some(state) => Some(state),
            None if failed && !ask_all => None,
            None => match ask(image) {
                Ok(state) => Some(state),
                Err(err) => {
                    failed = true;
                    looked.failures.push(err.into());
                    None
                }
            },
        };
        looked.images.push(((*image).clone(), state));
    }
}
