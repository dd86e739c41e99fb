//! Where a task runs: the seam ([`Environment`], [`Workspace`], seam.rs)
//! between the runner and the places a task's commands can run: the host,
//! with or without bubblewrap ([`Host`], host.rs), or a container per
//! (task, epoch) from the task's image ([`container`], with image_repo.rs
//! for the repo an image holds, channel.rs for the one channel into each
//! container its commands go through, build.rs for a Harbor image and artifacts.rs for what passes to a separate verifier), or an OCI
//! image's root without an engine ([`oci`]); [`choose`] (choose.rs) picks
//! the run's; what goes wrong there, in error.rs ([`EnvError`]); the values
//! `--env`, `--pull` and `--container-commands` name, in settings.rs.

mod artifacts;
mod build;
mod channel;
mod choose;
pub(crate) mod container;
pub(crate) mod egress;
mod error;
mod host;
mod image_repo;
pub(crate) mod oci;
mod seam;
mod settings;

pub(crate) use choose::choose;
pub(crate) use error::{BuildEnd, BuildLogError, EnvError};
pub(crate) use seam::{
    BoxFuture, Command, Entered, Environment, ImageBuild, Shell, Swept, Trust, Workspace,
};
pub use settings::{ContainerCommands, EnvKind, PullPolicy};
