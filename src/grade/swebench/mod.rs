//! SWE-bench's side of grading, mirrored from the `swebench` package:
//! the per-repo recipes ([`spec`]: eval script, image, parser), the test
//! patch's files ([`patch`]), the log parsers ([`log`], one file per
//! language family: python.rs, javascript.rs, java.rs, native.rs,
//! php_ruby.rs, over lines.rs) the package's grading rules under either
//! rule set (grading.rs), the two rule sets, 4.1's and 5.0's ([`Rules`]),
//! the per-instance report.json ([`report`]) and 5.0's classifier of
//! infrastructure failures ([`infra`]).

mod grading;
pub mod infra;
mod java;
mod javascript;
mod lines;
pub(crate) mod log;
mod native;
pub(crate) mod patch;
mod php_ruby;
mod python;
pub mod report;
mod rules;
pub(crate) mod run_report;
pub mod spec;

pub use grading::{
    BAD_CODES, EvalGrade, TEST_EXIT_CODE, grade, grade_output, parse_eval_output,
    record_test_exit_code, recorded_exit_code, to_results,
};
pub use infra::{InfraFailure, classify};
pub use lines::{STATUSES, StatusMap};
pub use log::{END_TEST_OUTPUT, Parser, ParserError, START_TEST_OUTPUT, parser_for, parser_for_5};
pub use report::{
    InstanceGrade, InstanceReport, Split, TestsStatus, instance_report, to_package_json,
};
pub use rules::{ALL_RULES, ApplyChain, Rules};
