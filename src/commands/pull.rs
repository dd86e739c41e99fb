//! `onebash pull TASKS`: the images of a task file made ready ahead of
//! runs, once per machine (a Slurm node, a Kubernetes node), so that the
//! runs that follow start at once, with `--pull never` if wanted.
//!
//! Owns choosing the tasks and their images the way `run` does with the
//! same flags (`--image`, `--shard`, `--filter`, `--repo-base`) and handing
//! them to the environment that keeps them: `--env oci` fills onebash's
//! image cache (`env/oci`: registry pulls, layers unpacked, roots
//! assembled); `--env podman|docker` has the engine pull them into its
//! store. It runs no task and needs no model, no repo and no sandbox,
//! which is why it is its own command and not a mode of `validate`.

use std::path::{Path, PathBuf};

use regex::Regex;

use crate::cli::{EnvKind, PullArgs};
use crate::config::Secrets;
use crate::config::source::{DatasetContext, SourceError};
use crate::task::{LoadOptions, Pull, TaskSpec};

/// Why the images could not be made ready: exit code 2 (3 for a dataset
/// whose Hub cannot be reached, as for run).
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error("{0}")]
    Other(String),
}

/// Why `pull` has nothing to pull for `task`, as its benchmark says.
fn refusal(task: &TaskSpec) -> Option<String> {
    match task.benchmark.pull(task.id.as_str()) {
        Pull::Refused(why) => Some(why),
        Pull::Image => None,
    }
}

/// Makes the images ready; what to print on success.
pub(crate) fn pull(args: &PullArgs, secrets: &Secrets) -> Result<String, PullError> {
    let options = LoadOptions {
        repo_base: args.repo_base.clone(),
        test_command: None,
        image: args.image.clone(),
    };
    let cache_dir = args
        .cache_dir
        .clone()
        .unwrap_or_else(crate::config::default_cache_dir);
    let cache_dir = std::path::absolute(&cache_dir).unwrap_or(cache_dir);
    let context = DatasetContext {
        token: secrets.hf_token(),
        cache_dir: cache_dir.clone(),
        pinned_sha: None,
        registry: None,
        pinned_registry: None,
    };
    let file = crate::config::source::load(&args.tasks, &options, &context)?;
    for warning in &file.warnings {
        eprintln!("warning: {warning}");
    }
    // `load` reads every task a run takes; some have no image to pull
    // (their benchmark says why).
    if let Some(refused) = file.tasks.iter().find_map(refusal) {
        return Err(PullError::Other(refused));
    }
    let filter = args
        .filter
        .as_deref()
        .map(Regex::new)
        .transpose()
        .map_err(|err| {
            PullError::Other(format!("--filter is not a valid regular expression: {err}"))
        })?;
    let mut images: Vec<String> = Vec::new();
    let mut without: Vec<&str> = Vec::new();
    for (i, task) in file.tasks.iter().enumerate() {
        let selected = args.shard.is_none_or(|s| s.contains(i))
            && filter
                .as_ref()
                .is_none_or(|re| re.is_match(task.id.as_str()));
        match (&task.image, selected) {
            (_, false) => {}
            (Some(image), true) if !images.contains(image) => images.push(image.clone()),
            (Some(_), true) => {}
            (None, true) => without.push(task.id.as_str()),
        }
    }
    if !without.is_empty() {
        return Err(PullError::Other(format!(
            "these tasks name no image: {}\nhint: give --image TEMPLATE, as for run",
            without.join(", ")
        )));
    }
    if images.is_empty() {
        return Err(PullError::Other(
            "no task is selected; hint: check --filter and --shard".to_owned(),
        ));
    }
    let count = images.len();
    let place = match args.env_kind {
        EnvKind::Oci => {
            crate::env::oci::Images::prepare(&cache_dir, &images, args.pull)
                .map_err(|err| PullError::Other(err.to_string()))?;
            oci_dir(&cache_dir).display().to_string()
        }
        EnvKind::Podman | EnvKind::Docker => {
            crate::env::container::Engine::probe(args.env_kind, &images, args.pull)
                .map_err(|err| PullError::Other(err.to_string()))?;
            format!("{}'s store", args.env_kind.engine().unwrap_or("the engine"))
        }
        EnvKind::Host => {
            return Err(PullError::Other(
                "--env host runs no image: nothing to pull\nhint: --env oci, podman or docker"
                    .to_owned(),
            ));
        }
    };
    let dataset = file
        .dataset
        .as_ref()
        .map(|d| {
            format!(
                "dataset {}: commit {} in {}\n",
                d.reference,
                d.sha,
                cache_dir.join("datasets").display()
            )
        })
        .unwrap_or_default();
    Ok(format!(
        "{dataset}{} ready in {place}",
        crate::sys::words::count(count, "image", "images")
    ))
}

fn oci_dir(cache_dir: &Path) -> PathBuf {
    cache_dir.join("oci")
}
