//! The host's own file system and programs, each command under the run's
//! sandbox (bubblewrap, or none). The working copy is the checkout's
//! folder; patches and the diff are git operations on it, done on blocking
//! threads. Under an allowlist, a task's sandboxed commands enter the
//! network namespace of its holder (egress/holder.rs), where the proxy
//! listens on the loopback and nothing else is reachable.

use std::path::Path;
use std::sync::Arc;

use super::egress::HeldEgress;
use super::{BoxFuture, Command, EnvError, Environment, Trust, Workspace};
use crate::checkout::{Checkout, GitError};
use crate::sys::exec::{CommandOutcome, ExecError, Spawn, run_command};
use crate::sys::limits::ChildSetup;
use crate::sys::sandbox::{Confinement, NONE, Sandbox};
use crate::task::{AllowedHosts, HostAsked, TaskSpec};

/// Tasks on the host.
pub(crate) struct Host {
    sandbox: Arc<Sandbox>,
    /// `--allow-hosts`: the hosts every task without its own network
    /// setting may reach, through a proxy.
    allowed_hosts: Option<AllowedHosts>,
}

impl Host {
    pub(crate) fn new(sandbox: Sandbox, allowed_hosts: Option<AllowedHosts>) -> Host {
        Host {
            sandbox: Arc::new(sandbox),
            allowed_hosts,
        }
    }
}

impl Environment for Host {
    fn enter<'a>(
        &'a self,
        task: &'a TaskSpec,
        _epoch: u32,
        checkout: &'a Checkout,
        child: ChildSetup,
    ) -> BoxFuture<'a, Result<Box<dyn Workspace>, EnvError>> {
        Box::pin(async move {
            let sandboxed = matches!(*self.sandbox, Sandbox::Bwrap(_));
            let egress =
                HeldEgress::for_task(task, self.allowed_hosts.as_ref(), sandboxed, &child).await?;
            let workspace: Box<dyn Workspace> = Box::new(HostWorkspace {
                checkout: checkout.clone(),
                files: Files(checkout.clone()),
                sandbox: Arc::clone(&self.sandbox),
                child,
                egress,
            });
            Ok(workspace)
        })
    }
}

struct HostWorkspace {
    checkout: Checkout,
    files: Files,
    sandbox: Arc<Sandbox>,
    child: ChildSetup,
    egress: Option<HeldEgress>,
}

/// What a workspace does to its working copy on the host: git operations
/// (on blocking threads) and files. The container environment's too: its
/// working copy is this checkout, bind-mounted.
pub(super) struct Files(pub(super) Checkout);

impl Files {
    /// Runs a git operation on a copy of the checkout, on a blocking thread.
    fn blocking<T: Send + 'static>(
        &self,
        job: impl FnOnce(&Checkout) -> Result<T, GitError> + Send + 'static,
    ) -> BoxFuture<'static, Result<T, GitError>> {
        let checkout = self.0.clone();
        Box::pin(async move {
            crate::sys::blocking::spawn(move || job(&checkout))
                .await
                .unwrap_or_else(|join| Err(GitError::Thread(join)))
        })
    }

    pub(super) fn diff(&self) -> BoxFuture<'static, Result<String, GitError>> {
        self.blocking(Checkout::diff)
    }

    pub(super) fn restore(&self, patch: &str) -> BoxFuture<'static, Result<Vec<String>, GitError>> {
        let patch = patch.to_owned();
        self.blocking(move |checkout| checkout.restore(&patch))
    }

    pub(super) fn apply(&self, patch: &str) -> BoxFuture<'static, Result<(), GitError>> {
        let patch = patch.to_owned();
        self.blocking(move |checkout| checkout.apply(&patch))
    }

    pub(super) fn read(&self, relative: &Path) -> BoxFuture<'static, std::io::Result<Vec<u8>>> {
        let path = self.0.dir.join(relative);
        Box::pin(async move { tokio::fs::read(path).await })
    }

    pub(super) fn write(
        &self,
        relative: &Path,
        bytes: Vec<u8>,
    ) -> BoxFuture<'static, std::io::Result<()>> {
        let path = self.0.dir.join(relative);
        Box::pin(crate::sys::blocking::write_file(path, bytes))
    }
}

impl Workspace for HostWorkspace {
    fn run<'a>(&'a self, command: Command<'a>) -> BoxFuture<'a, Result<CommandOutcome, ExecError>> {
        let dir = &self.checkout.dir;
        let sandboxed = |network| Confinement {
            sandbox: &self.sandbox,
            writable: dir,
            network,
        };
        let (confinement, child, proxied) = match (command.trust, &self.egress) {
            // The holder's namespace is the network: its loopback, where
            // the proxy listens, and no route out. bwrap keeps it.
            (Trust::Agent { network: false }, Some(egress)) => {
                (sandboxed(true), egress.child(), egress.env(command.env))
            }
            (Trust::Agent { network }, _) => (sandboxed(network), &self.child, None),
            (Trust::Harness, _) => (
                Confinement {
                    sandbox: &NONE,
                    writable: dir,
                    network: true,
                },
                &self.child,
                None,
            ),
        };
        let (program, args) = confinement.command_line(command.script, dir);
        Box::pin(async move {
            run_command(Spawn {
                program,
                args,
                cwd: dir,
                env: proxied.as_ref().unwrap_or(command.env),
                child,
                timeout: command.timeout,
            })
            .await
        })
    }

    fn end_agent_phase(&self) -> BoxFuture<'_, Result<(), EnvError>> {
        // The tests run in the same sandbox, under the verifier's hosts.
        if let Some(egress) = &self.egress {
            egress.to_verifier();
        }
        Box::pin(async { Ok(()) })
    }

    fn hosts_asked(&self) -> Vec<HostAsked> {
        self.egress
            .as_ref()
            .map(HeldEgress::asked)
            .unwrap_or_default()
    }

    fn diff(&self) -> BoxFuture<'_, Result<String, GitError>> {
        self.files.diff()
    }

    fn restore(&self, patch: &str) -> BoxFuture<'_, Result<Vec<String>, GitError>> {
        self.files.restore(patch)
    }

    fn apply(&self, patch: &str) -> BoxFuture<'_, Result<(), GitError>> {
        self.files.apply(patch)
    }

    fn read(&self, relative: &Path) -> BoxFuture<'_, std::io::Result<Vec<u8>>> {
        self.files.read(relative)
    }

    fn write(&self, relative: &Path, bytes: Vec<u8>) -> BoxFuture<'_, std::io::Result<()>> {
        self.files.write(relative, bytes)
    }

    fn location(&self) -> String {
        self.checkout.dir.display().to_string()
    }

    fn leave(self: Box<Self>, keep: bool) -> BoxFuture<'static, std::io::Result<()>> {
        let dir = self.checkout.dir.clone();
        Box::pin(async move {
            if keep {
                return Ok(());
            }
            crate::sys::blocking::remove_dir(dir).await
        })
    }
}
