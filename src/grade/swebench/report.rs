//! The per-instance `report.json` that SWE-bench's `run_evaluation` writes
//! (`get_eval_report` with `include_tests_status`), for both rule sets:
//! `{instance_id: {patch_is_None, patch_exists, patch_successfully_applied,
//! resolved, [infra_failure,] tests_status}}`, `tests_status` holding
//! FAIL_TO_PASS, PASS_TO_PASS, FAIL_TO_FAIL and PASS_TO_FAIL as `success`
//! and `failure` lists. What goes in the lists is decided by grading.rs
//! (a SWE-bench instance) or testlog.rs (onebash's own reading); this
//! file only shapes it. Writing the file is the caller's.
//!
//! 5.0 adds `infra_failure`, and, when the log gave no results and its
//! `classify_logs` (infra.rs) recognises a signature in it, sets it to
//! whether the environment is at fault and adds `infra_failure_reason`.

use serde::{Deserialize, Serialize};

use super::Rules;
use super::infra::classify;

/// The tests of one list that passed (`success`) and failed (`failure`);
/// a test in neither counted neither way (4.1's skipped FAIL_TO_PASS test).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Split {
    pub success: Vec<String>,
    pub failure: Vec<String>,
}

/// `get_eval_tests_report`'s answer. FAIL_TO_FAIL and PASS_TO_FAIL are
/// always empty: `run_evaluation` does not compute them
/// (`calculate_to_fail` is false) and onebash's tasks carry no such lists.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestsStatus {
    #[serde(rename = "FAIL_TO_PASS")]
    pub fail_to_pass: Split,
    #[serde(rename = "PASS_TO_PASS")]
    pub pass_to_pass: Split,
    #[serde(rename = "FAIL_TO_FAIL")]
    pub fail_to_fail: Split,
    #[serde(rename = "PASS_TO_FAIL")]
    pub pass_to_fail: Split,
}

/// What a grade gives SWE-bench's report: whether the log counts as
/// "patch_successfully_applied" (`get_logs_eval`'s `found`), the verdict,
/// and the lists (only written when the log counts as applied, as the
/// package does).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceGrade {
    pub applied: bool,
    pub resolved: bool,
    pub tests_status: TestsStatus,
}

/// One instance's report, as `get_eval_report` builds it; serialize it
/// with [`InstanceReport::to_json`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstanceReport {
    #[serde(skip)]
    pub instance_id: String,
    #[serde(rename = "patch_is_None")]
    pub patch_is_none: bool,
    pub patch_exists: bool,
    pub patch_successfully_applied: bool,
    pub resolved: bool,
    /// 5.0 only: whether a log with no results shows an environment fault.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub infra_failure: Option<bool>,
    /// 5.0 only, when its classifier recognised the log that gave no results.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub infra_failure_reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tests_status: Option<TestsStatus>,
}

/// `get_eval_report(..., include_tests_status=True)` for `instance_id`
/// under `rules`: `patch_is_none`, a prediction whose `model_patch` is
/// None (no grade read); `grade` None when the tests never ran (the patch did not
/// apply, the environment failed), which the package reports as a log
/// that does not count as applied. `log` is the test output, which 5.0
/// classifies when it does not count as applied.
pub fn instance_report(
    rules: Rules,
    instance_id: &str,
    patch_is_none: bool,
    grade: Option<&InstanceGrade>,
    log: &str,
) -> InstanceReport {
    let mut report = InstanceReport {
        instance_id: instance_id.to_owned(),
        patch_is_none,
        patch_exists: false,
        patch_successfully_applied: false,
        resolved: false,
        infra_failure: (rules == Rules::Swebench50).then_some(false),
        infra_failure_reason: None,
        tests_status: None,
    };
    if patch_is_none {
        return report;
    }
    report.patch_exists = true;
    let Some(grade) = grade.filter(|grade| grade.applied) else {
        if rules == Rules::Swebench50
            && let Some(class) = classify(log)
        {
            report.infra_failure = Some(class.environment);
            report.infra_failure_reason = Some(class.reason);
        }
        return report;
    };
    report.patch_successfully_applied = true;
    report.resolved = grade.resolved;
    report.tests_status = Some(grade.tests_status.clone());
    report
}

impl InstanceReport {
    /// The file's text: `{instance_id: report}` as [`to_package_json`]
    /// writes it, without the final newline (run_evaluation writes none).
    pub fn to_json(&self) -> String {
        let wrapped = std::collections::BTreeMap::from([(self.instance_id.as_str(), self)]);
        to_package_json(&wrapped)
    }
}

/// `value` as the package writes its JSON files (`json.dumps(value,
/// indent=4)`): four-space indents, keys in the order serialized.
pub fn to_package_json(value: &impl Serialize) -> String {
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    // Strings, numbers, bools, lists and maps into a Vec: serializing
    // cannot fail, and serde_json writes UTF-8.
    let _ = value.serialize(&mut serializer);
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graded(applied: bool) -> InstanceGrade {
        InstanceGrade {
            applied,
            resolved: true,
            tests_status: TestsStatus {
                fail_to_pass: Split {
                    success: vec!["t::a".to_owned()],
                    failure: vec![],
                },
                ..TestsStatus::default()
            },
        }
    }

    #[test]
    fn the_report_has_the_package_s_keys_in_its_order() {
        let report = instance_report(Rules::Swebench50, "o__r-1", false, Some(&graded(true)), "");
        let text = report.to_json();
        let keys = [
            "\"o__r-1\"",
            "\"patch_is_None\": false",
            "\"patch_exists\": true",
            "\"patch_successfully_applied\": true",
            "\"resolved\": true",
            "\"infra_failure\": false",
            "\"tests_status\"",
            "\"FAIL_TO_PASS\"",
            "\"PASS_TO_PASS\"",
            "\"FAIL_TO_FAIL\"",
            "\"PASS_TO_FAIL\"",
        ];
        let at: Vec<usize> = keys
            .iter()
            .map(|key| text.find(key).unwrap_or_else(|| panic!("{key} in {text}")))
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{text}");
        assert!(text.contains("\n        \"patch_is_None\""), "{text}");
        // 4.1 has no infra_failure.
        let old = instance_report(Rules::Swebench41, "i", false, Some(&graded(true)), "");
        assert!(!old.to_json().contains("infra_failure"));
    }

    #[test]
    fn no_patch_or_no_applied_log_writes_no_tests_status() {
        let none = instance_report(Rules::Swebench41, "i", true, Some(&graded(true)), "");
        assert!(none.patch_is_none && !none.patch_exists && !none.resolved);
        assert_eq!(none.tests_status, None);
        for grade in [None, Some(graded(false))] {
            let report = instance_report(Rules::Swebench41, "i", false, grade.as_ref(), "Killed");
            assert!(report.patch_exists && !report.patch_successfully_applied);
            assert!(!report.resolved && report.tests_status.is_none());
            assert_eq!(report.infra_failure, None);
        }
    }

    #[test]
    fn under_5_0_a_log_with_no_results_is_classified() {
        let report = |grade: &InstanceGrade, log| {
            instance_report(Rules::Swebench50, "i", false, Some(grade), log)
        };
        let killed = report(&graded(false), "x\nKilled\n");
        assert_eq!(killed.infra_failure, Some(true));
        assert_eq!(killed.infra_failure_reason, Some("out_of_memory"));
        assert!(
            killed
                .to_json()
                .contains("\"infra_failure_reason\": \"out_of_memory\"")
        );
        let ambiguous = report(&graded(false), "collected 0 items");
        assert_eq!(ambiguous.infra_failure, Some(false));
        assert_eq!(ambiguous.infra_failure_reason, Some("no_tests_collected"));
        // A log that counts as applied is not classified.
        let applied = report(&graded(true), "Killed");
        assert_eq!(applied.infra_failure, Some(false));
        assert_eq!(applied.infra_failure_reason, None);
    }
}
