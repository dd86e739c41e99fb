//! A task's image built from its build context: a Harbor task's
//! `environment/`, by the container engine's `build`. The build's output
//! goes to a file of the task's folder (`build.log`), never to the
//! terminal: the runner never prints; a failed or timed-out build is the
//! task's setup error. It does not decide whether to build (`Containers::
//! build_image`: one build at a time, none when the engine holds the tag)
//! nor what the tag is (`task/harbor.rs`: the content hash of the folder).

use std::ffi::OsString;
use std::path::Path;

use super::ImageBuild;
use crate::sys::exec::{CommandEnv, Spawn, run_command};
use crate::sys::limits::ChildSetup;
use crate::task::{HarborTask, TaskSpec};

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
    /// Builds `task`'s image, within its `build_timeout`, and writes the
    /// build's output to the log file.
    pub async fn run(&self, task: &TaskSpec, harbor: &HarborTask) -> Result<ImageBuild, String> {
        let image = self.image;
        let args: Vec<OsString> = vec![
            "build".into(),
            // Docker's classic builder keeps the container of a step that
            // failed (podman removes it; BuildKit has none and takes the
            // flag as a no-op): a broken Dockerfile would leave one behind
            // a run.
            "--force-rm".into(),
            "--label".into(),
            format!("onebash.harbor-task={}", task.id).into(),
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
            timeout: harbor.build_timeout,
        })
        .await
        .map_err(|err| format!("failed to build the image {image}: {err}"))?;
        let output = outcome.output.to_text();
        let log =
            crate::sys::blocking::write_file(self.log.to_owned(), output.clone().into_bytes())
                .await
                .map_err(|err| {
                    format!(
                        "failed to save the build's output to {}: {err}",
                        self.log.display()
                    )
                });
        if outcome.timed_out || outcome.exit_code != 0 {
            let how = if outcome.timed_out {
                format!("timed out after {} s", harbor.build_timeout.as_secs_f64())
            } else {
                format!("exit code {}", outcome.exit_code)
            };
            let last = output.lines().rev().find(|l| !l.trim().is_empty());
            let whole = match &log {
                Ok(()) => "the whole output is in build.log".to_owned(),
                Err(err) => err.clone(),
            };
            return Err(format!(
                "failed to build the image {image} from {}: {how}; last output: {}; {whole}",
                self.context.display(),
                last.unwrap_or("")
            ));
        }
        Ok(ImageBuild::Built { log })
    }
}
