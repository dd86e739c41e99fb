//! What decides a task from its test log, running nothing: onebash's own
//! reading of a test log or JUnit XML and the verdict from it
//! ([`testlog`]), and SWE-bench's recipes, parsers and rules
//! ([`swebench`]), with the run summary its harness writes. The test
//! stage that runs the tests and calls them is `runner/test_run.rs`.
//!
//! The stages import the rule sets and the recipe's grading through the
//! neutral names re-exported here, so that no stage names a benchmark
//! (tests/it/benchmark_names.rs).

pub mod swebench;
pub(crate) mod testlog;

pub(crate) use swebench::run_report;
pub(crate) use swebench::{
    ApplyChain, InstanceGrade, Rules, TestsStatus, grade_output, instance_report,
    record_test_exit_code, to_results,
};
