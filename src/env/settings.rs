//! The value types that say where and how tasks run, owned by the
//! environment stage: [`EnvKind`] (`--env`), [`PullPolicy`] (`--pull`) and
//! [`ContainerCommands`] (`--container-commands`). The command line
//! (`cli.rs`) parses them through their `clap::ValueEnum` derive, and
//! run.json writes them with serde, in the same words.

/// `--env`: where tasks run.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum EnvKind {
    /// The host, under `--sandbox`.
    Host,
    /// A podman container per (task, epoch), from the task's image.
    Podman,
    /// A docker container per (task, epoch), through the same CLI words.
    Docker,
    /// The task's image without a daemon: pulled from a registry or read
    /// from a local archive or OCI layout, unpacked into onebash's cache,
    /// each command under bwrap over it.
    Oci,
}

impl EnvKind {
    /// The engine's program, for the container kinds.
    pub fn engine(self) -> Option<&'static str> {
        match self {
            EnvKind::Host | EnvKind::Oci => None,
            EnvKind::Podman => Some("podman"),
            EnvKind::Docker => Some("docker"),
        }
    }

    /// The name of the kinds that run tasks from an image.
    pub fn image_backend(self) -> Option<&'static str> {
        match self {
            EnvKind::Oci => Some("oci"),
            kind => kind.engine(),
        }
    }
}

/// `--pull`: when the engine pulls a task's image.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum PullPolicy {
    /// Never: an image that is not there stops the run before it starts.
    Never,
    /// The images that are not there.
    Missing,
    /// Every image, before the run starts.
    Always,
}

/// `--container-commands`: how each command of a task reaches its
/// container.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum ContainerCommands {
    /// Through one long-lived `exec -i` per container running a small bash server: a fork and an exec of bash a command.
    Channel,
    /// One `ENGINE exec` a command (150-390 ms each, the engine's own work).
    Exec,
}
