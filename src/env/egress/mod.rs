//! What a task may reach of the network besides nothing or everything:
//! the proxy that enforces an allowlist (proxy.rs; the allowlist itself
//! is the task's, `task::AllowedHosts`), the listening socket made inside
//! a task's network namespace, so the proxy is the only way out of a
//! sandbox that has no network (netns.rs), the process that holds a
//! task's network namespace where each command is a fresh bwrap
//! (holder.rs) and that way out (held.rs), and a workspace's hold on its
//! proxy across its containers (way_out.rs).

mod held;
mod holder;
mod netns;
mod proxy;
mod way_out;

pub(crate) use held::HeldEgress;
pub(crate) use netns::NetnsError;
pub(crate) use way_out::{WayOut, phase_hosts};
