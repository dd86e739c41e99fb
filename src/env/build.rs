//! A task's image built from its build context (its benchmark's
//! `task::FolderImage`), by the container engine's `build`. The build's output
//! goes to a file of the task's folder (`build.log`), never to the
//! terminal: the runner never prints; a failed or timed-out build is the
//! task's setup error. It does not decide whether to build (`Containers::
//! build_image`: one build at a time, none when the engine holds the tag)
//! nor what the tag is (the task's benchmark: the content hash of the folder).

use std::ffi::OsString;
use std::path::Path;

use super::{BuildEnd, BuildLogError, EnvError, ImageBuild};
use crate::sys::exec::{CommandEnv, Spawn, run_command};
use crate::sys::limits::ChildSetup;
use crate::task::{FolderImage, TaskSpec};

/// One build: the engine's program, the tag, the context folder (its
/// `Dockerfile` is the one built), the file its output goes to, the
/// client's environment and limits.
pub(super) struct Build<'a> {
    pub program: &'a Path,
    pub image: &'a str,
    pub context: &'a Path,
    pub log: &'a Path,
    pub env: &'a CommandEnv,
    pub child: &'a ChildSetup,
}

impl Build<'_> {
    /// Builds `task`'s image, within the build's timeout, and writes the
    /// build's output to the log file.
    pub(super) async fn run(
        &self,
        task: &TaskSpec,
        spec: FolderImage<'_>,
    ) -> Result<ImageBuild, EnvError> {
        let image = self.image;
        let args: Vec<OsString> = vec![
            "build".into(),
            // Docker's classic builder keeps the container of a step that
            // failed (podman removes it; BuildKit has none and takes the
            // flag as a no-op): a broken Dockerfile would leave one behind
            // a run.
            "--force-rm".into(),
            "--label".into(),
            format!("{}={}", spec.label, task.id).into(),
            "-t".into(),
            image.into(),
            "-f".into(),
            self.context.join("Dockerfile").into(),
            self.context.into(),
        ];
        let outcome = run_command(Spawn {
            program: self.program.as_os_str().to_owned(),
            args,
            cwd: self.context,
            env: self.env,
            child: self.child,
            timeout: spec.timeout,
        })
        .await
        .map_err(|source| EnvError::BuildExec {
            image: image.to_owned(),
            source,
        })?;
        let output = outcome.output.to_text();
        let log =
            crate::sys::blocking::write_file(self.log.to_owned(), output.clone().into_bytes())
                .await
                .map_err(|source| BuildLogError {
                    path: self.log.to_owned(),
                    source,
                });
        if outcome.timed_out || outcome.exit_code != 0 {
            let ended = if outcome.timed_out {
                BuildEnd::TimedOut(spec.timeout.as_secs_f64())
            } else {
                BuildEnd::Exit(outcome.exit_code)
            };
            let last = output.lines().rev().find(|l| !l.trim().is_empty());
            return Err(EnvError::BuildFailed {
                image: image.to_owned(),
                context: self.context.to_owned(),
                ended,
                last: last.unwrap_or("").to_owned(),
                log: log.err(),
            });
        }
        Ok(ImageBuild::Built { log })
    }
}
