//! What can go wrong at the environment seam ([`EnvError`]): probing an
//! engine or bwrap at start, entering a task's workspace, building its
//! image, readying the tests' environment, sweeping what killed runs left.
//! Each variant carries what it concerns (the engine, the image, the
//! container's path, the host path, the command line that failed and what
//! it said) and reads after "failed to" where it is a fragment; the runner
//! writes it into the row with `to_string()`. It does not cover the
//! working copy's git operations (`checkout::GitError`) nor an image's
//! layers and registries (`oci::OciError`), which it wraps.

use std::path::PathBuf;

use super::oci::OciError;
use crate::checkout::GitError;
use crate::sys::exec::{ExecError, ToolError};

/// What went wrong in an environment.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    // The engine, probed at start: whole messages with a hint.
    #[error(
        "--env {engine}: `{engine}` is not on PATH\nhint: install it (Debian: apt-get install {engine}), or run with --env host"
    )]
    EngineNotOnPath { engine: &'static str },
    /// A socket the user may not use (Docker's belongs to root and the
    /// `docker` group), told apart from an engine that is down: the fixes
    /// differ.
    #[error(
        "--env {engine}: the engine's socket is not permitted: {source}\nhint: add your user to the group that owns the socket (`docker`; then log in again), or use rootless podman (--env podman)"
    )]
    EngineNotPermitted {
        engine: &'static str,
        source: ToolError,
    },
    #[error(
        "--env {engine}: the engine does not answer: {source}\nhint: start it (or its socket) and check that you may use it: `{engine} version` must work"
    )]
    EngineDown {
        engine: &'static str,
        source: ToolError,
    },
    /// Images the engine lacks, under `--pull never`.
    #[error(
        "--env {engine}: {} not in the engine's store: {}\nhint: build or pull {}, or run with --pull missing",
        if images.len() == 1 { "this image is" } else { "these images are" },
        images.join(", "),
        if images.len() == 1 { "it" } else { "them" }
    )]
    NotInStore {
        engine: &'static str,
        images: Vec<String>,
    },
    #[error(
        "--env {engine}: failed to pull the image {image}: {source}\nhint: check the image's name (--image renders it from the task), or build it here and run with --pull never"
    )]
    Pull {
        engine: &'static str,
        image: String,
        source: ToolError,
    },

    // The engine's client during the run.
    /// The client ran and failed; its command line (in the message) names
    /// the container or image it acted on.
    #[error(transparent)]
    Client(#[from] ToolError),
    #[error("the thread running {engine}'s client failed")]
    ClientThread { engine: &'static str },

    // Containers.
    /// Config checks that every task has an image before the run.
    #[error("task {task} has no image")]
    NoImage { task: String },
    #[error(
        "failed to start a container: the working copy's path {} holds `:` or `,`, which a bind mount cannot name\nhint: choose an --out or --workdirs path without them",
        path.display()
    )]
    BindPath { path: PathBuf },
    /// The proxy of an allowlist could not be put in the sandbox's
    /// network namespace.
    #[error(
        "failed to give the sandbox of {image} its allowed hosts: {source}\nhint: onebash must be allowed to enter the container's namespaces (root, or rootless podman as the same user)"
    )]
    Egress {
        image: String,
        source: super::egress::NetnsError,
    },
    /// The namespace of a task's allowlist on the host, or its proxy,
    /// could not be made.
    #[error("failed to give the sandbox of task {task} its allowed hosts: {source}")]
    HostEgress {
        task: String,
        source: super::egress::NetnsError,
    },
    /// An allowlist on the host needs the bwrap sandbox (`--sandbox auto`
    /// found none).
    #[error(
        "task {task} has an allowlist, which onebash honours on the host only in the bwrap sandbox, and this run has none\nhint: install bubblewrap, or run with --env podman or --env docker"
    )]
    HostsUnsandboxed { task: String },
    #[error("failed to start a container from {image}: {source}")]
    Start {
        image: String,
        source: Box<EnvError>,
    },
    #[error("failed to start a container from {image}: no id")]
    NoId { image: String },
    /// A command of a workspace whose container is gone (removed, or
    /// never started).
    #[error("no container from {image}")]
    NoContainer { image: String },
    #[error("failed to remove the agent's container: {0}")]
    RemoveAgent(#[source] Box<EnvError>),
    /// A harness script that Harbor's verifier needs, in the agent's
    /// container.
    #[error("failed to make /tests and /logs/verifier: {0}")]
    VerifierDirs(#[source] Box<EnvError>),
    #[error("failed to copy tests/ into the container: {0}")]
    CopyTests(#[source] Box<EnvError>),
    /// The artifacts could not pass to a separate verifier's container.
    #[error("failed to pass the artifacts to the verifier's container: {0}")]
    Artifacts(#[source] Box<EnvError>),

    // Files passing between the host and the workspace.
    #[error("cannot read {}: {source}", path.display())]
    ReadFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {}: {source}", path.display())]
    WriteFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot make {}: {source}", path.display())]
    MakeDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot remove what an earlier attempt left in {}: {source}", path.display())]
    RemoveStale {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the thread {doing} failed: {source}")]
    Thread {
        doing: &'static str,
        source: tokio::task::JoinError,
    },

    // The harness's own scripts in the workspace (image_repo.rs's).
    #[error(transparent)]
    Exec(#[from] ExecError),
    #[error("it timed out after {seconds} s: {output}")]
    ScriptTimedOut { seconds: u64, output: String },
    #[error("exit code {exit_code}: {output}")]
    ScriptFailed { exit_code: i32, output: String },
    #[error("failed to check out {commit} in the test container: {source}")]
    TestsCheckout {
        commit: String,
        source: Box<EnvError>,
    },
    #[error("the agent's patch in the test container: {0}")]
    AgentPatch(#[source] GitError),
    #[error("setup_command, run again for the tests: {0}")]
    ReplayExec(#[source] ExecError),
    #[error("setup_command, run again for the tests, failed with exit code {0}")]
    ReplayFailed(i32),

    // A task's image, built from its build context.
    #[error("only --env podman|docker builds a task's image")]
    NoBuilder,
    #[error("failed to build the image {image}: {source}")]
    BuildExec { image: String, source: ExecError },
    #[error(
        "failed to build the image {image} from {}: {ended}; last output: {last}; {}",
        context.display(),
        log.as_ref().map_or_else(|| "the whole output is in build.log".to_owned(), ToString::to_string)
    )]
    BuildFailed {
        image: String,
        context: PathBuf,
        ended: BuildEnd,
        /// The output's last line that is not blank.
        last: String,
        /// Why build.log could not be written, if it could not.
        log: Option<BuildLogError>,
    },

    // `--env oci`.
    #[error(
        "--env oci: bwrap is not on PATH\nhint: install bubblewrap (apt-get install bubblewrap)"
    )]
    OciNoBwrap,
    #[error(
        "--env oci: bwrap does not work over the image's root: {0}\nhint: user namespaces must be allowed (sysctl kernel.unprivileged_userns_clone=1)"
    )]
    OciProbe(#[source] ToolError),
    #[error("--env oci: failed to prepare the image {image}: {source}")]
    OciImage { image: String, source: OciError },
    /// The probe made every image of the run ready.
    #[error("the image {image} was not prepared")]
    NotPrepared { image: String },
    #[error("failed to prepare the task's root: {0}")]
    TaskRoot(#[source] Box<EnvError>),
    /// The task's workdir in the image's root.
    #[error("the workdir {workdir}: {source}")]
    Workdir { workdir: String, source: OciError },
    #[error("failed to copy the image's {relative}: {source}")]
    CopyFolder { relative: String, source: OciError },
    #[error("failed to make the tests' copy of the image's repo: {0}")]
    FreshCopy(#[source] Box<EnvError>),
    #[error("failed to empty the task's /tmp {}: {source}", path.display())]
    EmptyTmp {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// How a failed image build ended.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum BuildEnd {
    #[error("timed out after {0} s")]
    TimedOut(f64),
    #[error("exit code {0}")]
    Exit(i32),
}

/// build.log could not be written: the build's output is lost, and this
/// says where it should have gone.
#[derive(Debug, thiserror::Error)]
#[error("failed to save the build's output to {}: {source}", path.display())]
pub struct BuildLogError {
    pub path: PathBuf,
    pub source: std::io::Error,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Start-up messages are read by people and matched by the tests and
    /// docs: their words stay, and each names what it concerns.
    #[test]
    fn messages_name_the_engine_and_the_images() {
        let missing = EnvError::NotInStore {
            engine: "docker",
            images: vec!["a:1".to_owned(), "b:2".to_owned()],
        };
        assert_eq!(
            missing.to_string(),
            "--env docker: these images are not in the engine's store: a:1, b:2\nhint: build or pull them, or run with --pull missing"
        );
        let one = EnvError::NotInStore {
            engine: "podman",
            images: vec!["a:1".to_owned()],
        };
        assert!(
            one.to_string()
                .starts_with("--env podman: this image is not in the engine's store: a:1\n"),
            "{one}"
        );
        let failed = EnvError::BuildFailed {
            image: "hb-x:1".to_owned(),
            context: PathBuf::from("/t/environment"),
            ended: BuildEnd::Exit(1),
            last: "boom".to_owned(),
            log: Some(BuildLogError {
                path: PathBuf::from("/run/x/build.log"),
                source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
            }),
        };
        let text = failed.to_string();
        assert!(
            text.starts_with(
                "failed to build the image hb-x:1 from /t/environment: exit code 1; last output: boom; failed to save the build's output to /run/x/build.log: "
            ),
            "{text}"
        );
    }
}
