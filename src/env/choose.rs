//! The run's environment, chosen once: the one registration point of every
//! kind of [`Environment`].

use std::sync::Arc;

use crate::sys::sandbox::Sandbox;

use super::container::Containers;
use super::host::Host;
use super::seam::Environment;
use super::{container, oci};

/// The run's environment: the one registration point of every kind. A
/// container engine when the probe found one (`--env podman|docker`), else
/// the host under the run's sandbox.
pub(crate) fn choose(
    sandbox: &Sandbox,
    container: Option<container::Settings>,
    oci: Option<oci::Settings>,
    allowed_hosts: Option<crate::task::AllowedHosts>,
) -> Arc<dyn Environment> {
    match (container, oci) {
        (Some(settings), _) => Arc::new(Containers::new(settings)),
        (None, Some(settings)) => Arc::new(oci::Oci::new(settings, allowed_hosts)),
        (None, None) => Arc::new(Host::new(sandbox.clone(), allowed_hosts)),
    }
}
