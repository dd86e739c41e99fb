//! What a task may reach of the network besides nothing or everything:
//! the allowlist (hosts.rs), the proxy that enforces it (proxy.rs), and
//! the listening socket made inside a task's network namespace, so the
//! proxy is the only way out of a sandbox that has no network (netns.rs).

mod hosts;
mod netns;
mod proxy;

pub(crate) use hosts::{AllowedHosts, Entry, HostsError};
pub(crate) use netns::{NetnsError, listen_in};
pub(crate) use proxy::{HostAsked, Proxy};
