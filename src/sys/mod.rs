//! What onebash asks of the operating system, below every stage:
//! [`exec`] (the only place a process is spawned), [`limits`] (a command's
//! memory, process and time limits: cgroups, rlimits, the exec helper),
//! [`sandbox`] (bubblewrap's confinement of one command), [`blocking`]
//! (work off the async workers) and [`lock`] (file locks).

pub(crate) mod blocking;
pub(crate) mod exec;
pub mod limits;
pub mod lock;
pub(crate) mod sandbox;
pub(crate) mod spawn;
