//! The repo an image holds, under `--env oci`: what the `oci` workspace
//! does for it beyond running commands. `image_repo.rs`'s scripts run
//! under bwrap as the harness ([`OciWorkspace::harness`]), files pass in
//! and out on the host within the task's copy ([`OciWorkspace::inside`]:
//! never through a symlink the agent made out of it), and the tests get a
//! fresh copy of the image's workdir ([`OciWorkspace::fresh_copy`]).
//! `workspace.rs` holds the workspace and decides when each is used.

use std::path::{Path, PathBuf};

use super::rootfs;
use super::workspace::{AGENT_COPY, OciWorkspace, TESTS_COPY, lock};
use crate::env::image_repo::{self, GIT_TIMEOUT};
use crate::env::{BoxFuture, Command, EnvError, Trust, Workspace};
use crate::sys::exec::{CommandEnv, CommandOutcome};

impl OciWorkspace {
    /// One script of the harness's own (image_repo.rs's), never run again
    /// for the tests: its outcome and output.
    pub(super) async fn harness(&self, script: &str) -> Result<(CommandOutcome, String), EnvError> {
        let env = CommandEnv::for_task("onebash-harness");
        let outcome = self
            .exec(Command {
                script,
                timeout: GIT_TIMEOUT,
                env: &env,
                trust: Trust::Harness,
            })
            .await?;
        let output = outcome.output.to_text();
        Ok((outcome, output))
    }

    /// The host path of `relative` in the current copy, refused when it
    /// leads out of it: the agent may have made any part of it a symlink,
    /// which the sandbox resolves inside the image but the host would
    /// resolve on the host. (Nothing of the agent runs any more when the
    /// harness reads or writes: each command's processes died with it.)
    pub(super) fn inside(&self, relative: &Path, existing: bool) -> std::io::Result<PathBuf> {
        let dir = lock(&self.dir).clone();
        let path = dir.join(relative);
        let checked = if existing {
            path.clone()
        } else {
            path.parent().map_or_else(|| dir.clone(), Path::to_path_buf)
        };
        let real = std::fs::canonicalize(&checked)?;
        if !real.starts_with(std::fs::canonicalize(&dir)?) {
            return Err(std::io::Error::other(format!(
                "{} leads out of the working copy",
                relative.display()
            )));
        }
        if !existing && std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(std::io::Error::other(format!(
                "{} is a symlink",
                relative.display()
            )));
        }
        Ok(if existing { real } else { path })
    }

    /// The tests' fresh copy of the image's repo (the agent's deleted
    /// first, as far as it can be), its /tmp emptied.
    pub(super) async fn fresh_copy(&self, scratch: &Path) -> Result<(), EnvError> {
        let (agent, tests) = (scratch.join(AGENT_COPY), scratch.join(TESTS_COPY));
        // The agent may have left folders it cannot be deleted from: the
        // tests' copy goes next to it, and the task's folder goes whole at
        // the end.
        let _ = crate::sys::blocking::remove_dir(agent).await;
        let (root, relative, into, tmp) = (
            self.image.root.clone(),
            self.workdir.trim_start_matches('/').to_owned(),
            tests.clone(),
            self.tmp.clone(),
        );
        crate::sys::blocking::spawn(move || {
            let _ = std::fs::remove_dir_all(&tmp);
            std::fs::create_dir_all(&tmp).map_err(|source| EnvError::MakeDir {
                path: tmp.clone(),
                source,
            })?;
            rootfs::copy_folder(&root, Path::new(&relative), &into)
                .map_err(|source| EnvError::CopyFolder { relative, source })
        })
        .await
        .unwrap_or_else(|source| {
            Err(EnvError::Thread {
                doing: "copying the image's repo",
                source,
            })
        })
        .map_err(|err| EnvError::FreshCopy(Box::new(err)))?;
        *lock(&self.dir) = tests;
        Ok(())
    }
}

impl image_repo::Container for OciWorkspace {
    fn git<'a>(&'a self, script: &'a str) -> BoxFuture<'a, Result<String, EnvError>> {
        Box::pin(async move {
            let (outcome, output) = self.harness(script).await?;
            image_repo::git_result(&outcome, output)
        })
    }

    fn copy_in<'a>(
        &'a self,
        relative: &'a Path,
        bytes: Vec<u8>,
    ) -> BoxFuture<'a, Result<(), EnvError>> {
        Box::pin(async move {
            self.write(relative, bytes)
                .await
                .map_err(|source| EnvError::WriteFile {
                    path: relative.to_owned(),
                    source,
                })
        })
    }

    fn copy_out<'a>(&'a self, relative: &'a Path) -> BoxFuture<'a, Result<Vec<u8>, EnvError>> {
        Box::pin(async move {
            self.read(relative)
                .await
                .map_err(|source| EnvError::ReadFile {
                    path: relative.to_owned(),
                    source,
                })
        })
    }
}
