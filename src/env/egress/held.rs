//! A task's way out under an allowlist where each command is a fresh
//! bwrap (`--env host` in the bwrap sandbox, `--env oci`): the process
//! holding the task's network namespace (holder.rs), the proxy listening
//! on its loopback (way_out.rs), and the limits of the task's sandboxed
//! commands with that namespace to enter before bwrap starts, which then
//! keeps it (no `--unshare-net`).

use super::holder::NetHolder;
use super::netns::NetnsError;
use super::way_out::{WayOut, phase_hosts};
use crate::env::EnvError;
use crate::sys::exec::CommandEnv;
use crate::sys::limits::ChildSetup;
use crate::task::{AllowedHosts, HostAsked, PhaseHosts, TaskSpec};

/// A task's own network namespace with its proxy.
pub(crate) struct HeldEgress {
    hosts: PhaseHosts,
    way_out: WayOut,
    child: ChildSetup,
    /// Held, never read: the namespace lives until the workspace ends.
    _holder: NetHolder,
}

impl HeldEgress {
    /// The task's way out, when it (or the run, `run_hosts`) has an
    /// allowlist; `sandboxed`: its commands run under bwrap, without
    /// which an allowlist cannot be kept.
    pub(crate) async fn for_task(
        task: &TaskSpec,
        run_hosts: Option<&AllowedHosts>,
        sandboxed: bool,
        child: &ChildSetup,
    ) -> Result<Option<HeldEgress>, EnvError> {
        let Some(hosts) = phase_hosts(task, run_hosts) else {
            return Ok(None);
        };
        if !sandboxed {
            return Err(EnvError::HostsUnsandboxed {
                task: task.id.to_string(),
            });
        }
        HeldEgress::start(hosts, child)
            .await
            .map(Some)
            .map_err(|source| EnvError::HostEgress {
                task: task.id.to_string(),
                source,
            })
    }

    async fn start(hosts: PhaseHosts, child: &ChildSetup) -> Result<HeldEgress, NetnsError> {
        let holder = crate::sys::blocking::spawn(NetHolder::start)
            .await
            .unwrap_or_else(|join| {
                Err(NetnsError::Fork {
                    pid: 0,
                    source: std::io::Error::other(join.to_string()),
                })
            })?;
        let way_out = WayOut::default();
        way_out.attach(holder.pid(), hosts.agent.clone()).await?;
        Ok(HeldEgress {
            child: child.entering(holder.pid(), holder.own_user()),
            hosts,
            way_out,
            _holder: holder,
        })
    }

    /// The limits of a sandboxed command, with the namespace to enter.
    pub(crate) fn child(&self) -> &ChildSetup {
        &self.child
    }

    /// `env` with the proxy's variables.
    pub(crate) fn env(&self, env: &CommandEnv) -> Option<CommandEnv> {
        self.way_out.env(env)
    }

    /// The verifier's hosts from now on.
    pub(crate) fn to_verifier(&self) {
        self.way_out.set_hosts(self.hosts.verifier.clone());
    }

    pub(crate) fn asked(&self) -> Vec<HostAsked> {
        self.way_out.asked()
    }
}
