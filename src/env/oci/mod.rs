//! OCI images without an engine: the images a run needs made ready
//! ([`Images`], images.rs), pulled from a registry (registry.rs,
//! client.rs, auth.rs; references and digests in reference.rs, digest.rs,
//! source.rs), unpacked into layers (layers.rs) and a root (rootfs.rs,
//! binds.rs), and the workspace a task runs in (workspace.rs, repo.rs);
//! what goes wrong, in error.rs.

mod auth;
mod binds;
mod client;
mod digest;
mod error;
mod images;
mod layers;
mod reference;
mod registry;
mod repo;
mod rootfs;
mod source;
mod workspace;

pub(crate) use error::OciError;
pub(crate) use images::{Image, Images, Readiness, look, look_in_registry};
pub(crate) use workspace::{Oci, Settings};
