//! Shared helpers for the integration tests. Each test binary includes this
//! module with `mod support;` and uses only part of it, hence the allow.
#![allow(dead_code)]

pub mod backend;
pub mod calc;
pub mod harness;
pub mod hub;
pub mod messages;
pub mod probes;
pub mod processes;
pub mod registry;
pub mod responses_server;
pub mod server;
pub mod skips;
pub mod sync;
pub mod tables;
pub mod world;
