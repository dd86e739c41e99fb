//! A workspace's way out through its proxy: the proxy of the sandbox its
//! commands run in now (attached once that sandbox has a network
//! namespace, dropped with it), the variables that point commands at it,
//! the allowlist of the phase in force, and what every proxy it had was
//! asked for. Environments hold one per workspace.

use std::sync::{Mutex, PoisonError};

use super::netns::{NetnsError, listen_in};
use super::proxy::Proxy;
use crate::sys::exec::CommandEnv;
use crate::task::{AllowedHosts, HostAsked, PhaseHosts, TaskSpec};

/// The hosts each phase of `task` may reach through a proxy, if any: a
/// task that asks for no public network keeps its own (an allowlist, or
/// none); the others get the run's (`--allow-hosts`).
pub(crate) fn phase_hosts(task: &TaskSpec, run: Option<&AllowedHosts>) -> Option<PhaseHosts> {
    match task.benchmark.network() {
        Some(wish) if !wish.public => wish.allowlist,
        _ => run.cloned().map(PhaseHosts::both),
    }
}

/// The proxy of a workspace's sandbox, if it has one now.
#[derive(Default)]
pub(crate) struct WayOut {
    proxy: Mutex<Option<Proxy>>,
    /// What proxies dropped before were asked (an agent's container
    /// replaced by a verifier's).
    earlier: Mutex<Vec<HostAsked>>,
}

impl WayOut {
    /// Serves a proxy under `hosts` inside the network namespace of
    /// process `pid` (a container's first process), replacing the one
    /// before.
    pub(crate) async fn attach(&self, pid: u32, hosts: AllowedHosts) -> Result<(), NetnsError> {
        let listener = crate::sys::blocking::spawn(move || listen_in(pid))
            .await
            .unwrap_or_else(|join| {
                Err(NetnsError::Fork {
                    pid,
                    source: std::io::Error::other(join.to_string()),
                })
            })?;
        let proxy = Proxy::serve(listener, hosts).map_err(|source| NetnsError::Inside {
            pid,
            stage: "serve the proxy",
            source,
        })?;
        self.detach();
        *lock(&self.proxy) = Some(proxy);
        Ok(())
    }

    /// Stops the proxy (its sandbox is gone), keeping what it was asked.
    pub(crate) fn detach(&self) {
        if let Some(proxy) = lock(&self.proxy).take() {
            lock(&self.earlier).extend(proxy.asked());
        }
    }

    /// The allowlist from now on, for the proxy there is (the verifier's
    /// phase in the agent's container).
    pub(crate) fn set_hosts(&self, hosts: AllowedHosts) {
        if let Some(proxy) = lock(&self.proxy).as_ref() {
            proxy.set_hosts(hosts);
        }
    }

    /// `env` with the proxy's variables, when there is a proxy.
    pub(crate) fn env(&self, env: &CommandEnv) -> Option<CommandEnv> {
        let vars = lock(&self.proxy).as_ref()?.env_vars();
        Some(
            vars.iter()
                .fold(env.clone(), |env, (key, value)| env.with(key, value)),
        )
    }

    /// Every host asked for, through every proxy so far, by name.
    pub(crate) fn asked(&self) -> Vec<HostAsked> {
        let mut all = lock(&self.earlier).clone();
        if let Some(proxy) = lock(&self.proxy).as_ref() {
            all.extend(proxy.asked());
        }
        let mut merged: std::collections::BTreeMap<String, HostAsked> = Default::default();
        for asked in all {
            let entry = merged
                .entry(asked.host.clone())
                .or_insert_with(|| HostAsked {
                    host: asked.host.clone(),
                    ..HostAsked::default()
                });
            entry.requests += asked.requests;
            entry.refused += asked.refused;
        }
        merged.into_values().collect()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
