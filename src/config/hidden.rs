//! What the sandbox hides from every command (the task file, the run
//! folder, the cache, the repos tasks come from, other working copies),
//! and the check that `--workdirs` holds nothing it treats otherwise.

use std::path::{Path, PathBuf};

use crate::config::error::ConfigError;
use crate::sys::sandbox::PRIVATE_DIRS;
use crate::task::TaskSpec;

/// What the sandbox hides from every command. The agent must not read the
/// task file (gold patches, hidden tests), the run folder (other tasks'
/// trajectories) or the cache (the mirrors hold every commit past the
/// base; working copies own their objects). Nor other working copies in
/// --workdirs, this run's or other runs': each command sees its own,
/// bound in on top. All absolute.
pub(crate) fn hidden_paths(
    task_file: &Path,
    tasks: &[TaskSpec],
    out_dir: &Path,
    cache_dir: &Path,
    workdirs_root: Option<PathBuf>,
) -> Vec<PathBuf> {
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
    let mut hidden = vec![absolute(task_file), absolute(out_dir), absolute(cache_dir)];
    // And repos on this machine that tasks are checked out from: their
    // history runs past every base.
    for task in tasks {
        let location = task.repo_location.as_str();
        let path = Path::new(location.strip_prefix("file://").unwrap_or(location));
        // Not `/`: a repo there would hide the whole system.
        if path.is_absolute() && path.parent().is_some() && !hidden.iter().any(|h| h == path) {
            hidden.push(path.to_owned());
        }
    }
    // Not when the sandbox hides them already: inside the run folder,
    // or in a folder every command gets empty (a second empty mount
    // there would be made read-only with the rest).
    hidden.extend(workdirs_root.filter(|root| {
        !root.starts_with(out_dir) && !PRIVATE_DIRS.iter().any(|dir| root.starts_with(dir))
    }));
    hidden
}

/// `--workdirs` must hold working copies and nothing the sandbox treats
/// otherwise: not the run folder, the cache, the task file or $HOME, and not
/// inside the cache (which the sandbox shows read-only).
pub(crate) fn check_workdirs(
    root: &Path,
    out_dir: &Path,
    cache_dir: &Path,
    tasks: &Path,
) -> Result<(), ConfigError> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let held = [Some(out_dir), Some(cache_dir), Some(tasks), home.as_deref()]
        .into_iter()
        .flatten()
        .find(|path| path.starts_with(root));
    let problem = if let Some(path) = held {
        Some(format!("it holds {}", path.display()))
    } else if root.starts_with(cache_dir) {
        Some(format!("it is inside the cache {}", cache_dir.display()))
    } else {
        None
    };
    match problem {
        None => Ok(()),
        Some(problem) => Err(ConfigError::Usage(format!(
            "--workdirs {}: {problem}\nhint: give a folder for working copies only, such as /scratch/onebash or /tmp/onebash",
            root.display()
        ))),
    }
}
