//! What decides a task from its test log, running nothing: onebash's own
//! reading of a test log or JUnit XML and the verdict from it
//! ([`testlog`]), and SWE-bench's recipes, parsers and rules
//! ([`swebench`]). The test stage that runs the tests and calls them is
//! `runner/test_run.rs`.

pub mod swebench;
pub(crate) mod testlog;
