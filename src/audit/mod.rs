//! The audit of what an agent tried: which of its commands probed the
//! repository's history past `base_commit`, or fetched the project's
//! source from elsewhere ([`probes`], [`audit_task`] in probes.rs, over the
//! rules of rules.rs and the simple commands shell.rs finds; what a probe
//! is and what it probes in kinds.rs); and which refused requests of an
//! allowlist went to the task's repository host (hosts.rs).

mod hosts;
mod kinds;
mod probes;
mod rules;
mod shell;

pub(crate) use hosts::refused_repo_hosts;
#[cfg(test)]
pub(crate) use kinds::ProbeKind;
pub(crate) use kinds::{Probe, Subject};
pub(crate) use probes::{AuditInput, ProbedCommand, RecordedCommand, audit_task};
