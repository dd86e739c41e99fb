//! What onebash asks of the operating system, below every stage:
//! [`exec`] (the only place a process is spawned; [`spawn`] starts one
//! with limits in a single exec), [`limits`] (a command's
//! memory, process and time limits: cgroups, rlimits, the exec helper),
//! [`sandbox`] (bubblewrap's confinement of one command), [`blocking`]
//! (work off the async workers), [`lock`] (file locks) and [`words`]
//! (counts with their plurals, for every message).

pub(crate) mod blocking;
pub(crate) mod exec;
pub mod limits;
pub mod lock;
pub(crate) mod sandbox;
pub(crate) mod spawn;
pub(crate) mod words;
