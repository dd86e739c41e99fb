//! Where a run writes: the run folder (`--out`, or a name made of the
//! time, the model and the prompt; new, empty, or one to resume), the run's
//! own folder of working copies in `--workdirs`, and the cache.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::config::error::ConfigError;
use crate::config::hidden::check_workdirs;
use crate::config::options::RunOptions;
use crate::run_folder::RunFolder;

/// Where a run writes, all absolute (the sandbox binds working copies by
/// path from another current directory).
pub(crate) struct RunFolders {
    pub out_dir: PathBuf,
    /// `--workdirs`, when given.
    pub workdirs_root: Option<PathBuf>,
    /// This run's folder of working copies: `<out_dir>/workdirs`, or a
    /// folder of its own in `--workdirs`.
    pub workdirs: PathBuf,
}

impl RunFolders {
    /// The run folder (`--out`, else one named by the time, `model` and
    /// `prompt`), checked to be new, empty or resumable, and the working
    /// copies' folder, checked to hold nothing else.
    pub(crate) fn of(
        args: &RunOptions,
        model: &str,
        prompt: &str,
        cache_dir: &Path,
    ) -> Result<RunFolders, ConfigError> {
        let out_dir = match &args.out {
            Some(dir) => dir.clone(),
            None => default_out_dir(model, prompt),
        };
        let out_dir = std::path::absolute(&out_dir).unwrap_or(out_dir);
        check_out_dir(&out_dir, args.resume)?;
        let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
        let workdirs_root = args.workdirs.as_deref().map(absolute);
        if let Some(root) = &workdirs_root {
            check_workdirs(root, &out_dir, cache_dir, &absolute(&args.tasks))?;
        }
        let workdirs = match &workdirs_root {
            None => out_dir.join("workdirs"),
            Some(root) => root.join(workdirs_name(&out_dir)),
        };
        Ok(RunFolders {
            out_dir,
            workdirs_root,
            workdirs,
        })
    }
}

/// `results/<UTC time>_<model>_<prompt>`, with characters that do not belong
/// in a folder name replaced.
fn default_out_dir(model: &str, prompt: &str) -> PathBuf {
    let time = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace(':', "-");
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    Path::new("results").join(format!("{time}_{}_{}", clean(model), clean(prompt)))
}

fn check_out_dir(dir: &Path, resume: bool) -> Result<(), ConfigError> {
    if resume {
        if RunFolder::open(dir).is_ok() {
            return Ok(());
        }
        return Err(ConfigError::Usage(format!(
            "nothing to resume: {} holds no run.json\nhint: --resume continues a run folder given with --out",
            dir.display()
        )));
    }
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(ConfigError::Usage(format!(
                    "the run folder {} exists and is not empty\nhint: choose another --out, or continue it with --resume",
                    dir.display()
                )));
            }
            Ok(())
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(ConfigError::Usage(format!(
            "failed to use the run folder {}: {err}",
            dir.display()
        ))),
    }
}

/// The name of a run's own folder in `--workdirs`: the run folder's name and
/// a hash of its full path, so that runs sharing `--workdirs` never meet,
/// and a resumed run finds (and clears) what its crashed attempt left.
fn workdirs_name(out_dir: &Path) -> String {
    let name = out_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The parent's real path, so that a resume naming the run folder
    // another way finds the same folder.
    let stable = out_dir
        .parent()
        .and_then(|parent| std::fs::canonicalize(parent).ok())
        .map(|parent| parent.join(&name))
        .unwrap_or_else(|| out_dir.to_owned());
    let hash = Sha256::digest(stable.as_os_str().as_encoded_bytes());
    let hex: String = hash.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("{name}-{hex}")
}

pub(crate) fn default_cache_dir() -> PathBuf {
    if let Some(xdg) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(xdg).join("onebash");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home).join(".cache").join("onebash");
    }
    std::env::temp_dir().join("onebash-cache")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_out_dir_is_clean() {
        let dir = default_out_dir("org/model:1", "default");
        let name = dir.file_name().and_then(|n| n.to_str()).expect("name");
        assert!(name.ends_with("_org_model_1_default"), "{name}");
        assert!(!name.contains(':'));
    }
}
