//! The audit of what an agent tried: which of its commands probed the
//! repository's history past `base_commit`, or fetched the project's
//! source from elsewhere ([`probes`], [`audit_task`] in probes.rs, over the
//! rules of rules.rs and the simple commands shell.rs finds).

mod probes;
mod rules;
mod shell;

pub use probes::{
    Audit, AuditInput, Probe, ProbeKind, ProbedCommand, RecordedCommand, Subject, audit_task,
    probes,
};
pub use rules::normalize_package;
