//! What `show` and the HTML transcript say about a task's test verdict and
//! its checkout, read from the trajectory's `test` and `checkout` events:
//! the verdict as graded (FAIL_TO_PASS and PASS_TO_PASS, not the test
//! command's exit code, when the task lists its tests) and where the repo
//! came from (the image, or onebash's repo cache). The walk over the
//! events and the rendering stay in `show` and `html::transcript`.

use serde_json::Value;

/// Failing tests named after a list's count; the rest are counted.
const NAMED_FAILURES: usize = 3;

/// The verdict of a test run as a reader should see it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TestVerdict {
    /// Whether the task passed its tests (resolved, for a task that lists
    /// them).
    pub passed: bool,
    /// `FAIL_TO_PASS 0/1 (test_x FAILED), PASS_TO_PASS 90/90`, when the
    /// task lists its tests; `None` when the exit code is the verdict.
    pub graded: Option<String>,
}

impl TestVerdict {
    /// The verdict of a `test` event: its `per_test` verdict when it has
    /// one (the exit code of SWE-bench's eval script says nothing about
    /// the tests), else whether the command exited 0 in time.
    pub(crate) fn of(exit_code: i32, timed_out: bool, per_test: Option<&Value>) -> Self {
        let verdict = per_test.map(|p| &p["verdict"]).filter(|v| v.is_object());
        match verdict {
            Some(verdict) => TestVerdict {
                passed: verdict["resolved"].as_bool().unwrap_or(false),
                graded: Some(graded_summary(verdict)),
            },
            None => TestVerdict {
                passed: exit_code == 0 && !timed_out,
                graded: None,
            },
        }
    }

    /// The word after the test command: `PASSED`/`FAILED` when the exit
    /// code decides, `resolved`/`not resolved` and the lists when they do.
    pub(crate) fn text(&self) -> String {
        match &self.graded {
            None if self.passed => "PASSED".to_owned(),
            None => "FAILED".to_owned(),
            Some(lists) if self.passed => format!("resolved: {lists}"),
            Some(lists) => format!("not resolved: {lists}"),
        }
    }
}

/// `FAIL_TO_PASS 0/1 (test_x FAILED), PASS_TO_PASS 90/90`, and why the
/// statuses were not taken when they were not.
fn graded_summary(verdict: &Value) -> String {
    let mut parts = Vec::new();
    for (key, label) in [
        ("fail_to_pass", "FAIL_TO_PASS"),
        ("pass_to_pass", "PASS_TO_PASS"),
    ] {
        let list = verdict[key].as_array().map(Vec::as_slice).unwrap_or(&[]);
        parts.push(list_summary(label, list));
    }
    let mut out = parts.join(", ");
    if let Some(invalid) = verdict["invalid"].as_str() {
        out.push_str(&format!("; statuses not taken: {invalid}"));
    }
    out
}

/// `LABEL OK/ALL`, then the first failing tests with their status.
fn list_summary(label: &str, list: &[Value]) -> String {
    let failing: Vec<String> = list
        .iter()
        .filter(|g| !g["ok"].as_bool().unwrap_or(false))
        .map(|g| {
            let name = g["name"].as_str().unwrap_or("?");
            let status = g["status"].as_str().unwrap_or("missing");
            format!("{name} {status}")
        })
        .collect();
    let mut out = format!("{label} {}/{}", list.len() - failing.len(), list.len());
    if !failing.is_empty() {
        let mut named = failing[..failing.len().min(NAMED_FAILURES)].join(", ");
        if failing.len() > NAMED_FAILURES {
            named.push_str(&format!(", {} more", failing.len() - NAMED_FAILURES));
        }
        out.push_str(&format!(" ({named})"));
    }
    out
}

/// Where a task's working copy came from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CheckoutOrigin {
    /// The repo the task's image holds (SWE-bench's), entered in its
    /// container; `start` is the image's setup commit the agent started
    /// from, when it had one.
    Image { start: Option<String> },
    /// onebash's repo cache, which fetched the repo for this task when
    /// `fetched`.
    Cache { fetched: bool },
}

impl CheckoutOrigin {
    /// What a `checkout` event tells: `from_image` when it was recorded,
    /// else (older trajectories) setup commits on top of the base, which
    /// only an image's repo has.
    pub(crate) fn of(from_image: bool, setup_commits: &[String], fetched: bool) -> Self {
        if from_image || !setup_commits.is_empty() {
            CheckoutOrigin::Image {
                start: setup_commits.last().cloned(),
            }
        } else {
            CheckoutOrigin::Cache { fetched }
        }
    }

    /// `checked out COMMIT from ... in SECONDS`, without the markup.
    pub(crate) fn line(&self, commit: &str, seconds: &str) -> String {
        match self {
            CheckoutOrigin::Image { start: None } => {
                format!("checked out {commit} from the repo in the image in {seconds}")
            }
            CheckoutOrigin::Image { start: Some(start) } => format!(
                "checked out {commit} from the repo in the image in {seconds} (the agent started at its setup commit {start})"
            ),
            CheckoutOrigin::Cache { fetched: true } => {
                format!("checked out {commit} in {seconds} (the repo fetched for this task)")
            }
            CheckoutOrigin::Cache { fetched: false } => {
                format!("checked out {commit} from the repo cache in {seconds}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// pytest-dev__pytest-7373: the eval script exits 0 and the task fails;
    /// what is shown is the graded lists, never `PASSED`.
    #[test]
    fn eval_script_exit_zero_is_not_shown_as_passed_when_the_tests_failed() {
        let p2p: Vec<Value> = (0..90)
            .map(|i| json!({"name": format!("t{i}"), "status": "PASSED", "ok": true}))
            .collect();
        let per_test = json!({"statuses": {}, "verdict": {
            "resolved": false,
            "fail_to_pass": [{"name": "test_x", "status": "FAILED", "ok": false}],
            "pass_to_pass": p2p,
        }});
        let verdict = TestVerdict::of(0, false, Some(&per_test));
        assert!(!verdict.passed);
        assert_eq!(
            verdict.text(),
            "not resolved: FAIL_TO_PASS 0/1 (test_x FAILED), PASS_TO_PASS 90/90"
        );
    }

    #[test]
    fn graded_lists_name_missing_tests_and_count_the_rest() {
        let failing: Vec<Value> = (0..5)
            .map(|i| json!({"name": format!("f{i}"), "status": null, "ok": false}))
            .collect();
        let per_test = json!({"verdict": {
            "resolved": false, "fail_to_pass": failing, "pass_to_pass": [],
            "invalid": "exit code 1 with no failure read",
        }});
        assert_eq!(
            TestVerdict::of(1, false, Some(&per_test)).text(),
            "not resolved: FAIL_TO_PASS 0/5 (f0 missing, f1 missing, f2 missing, 2 more), PASS_TO_PASS 0/0; statuses not taken: exit code 1 with no failure read"
        );
        let resolved = json!({"verdict": {"resolved": true,
            "fail_to_pass": [{"name": "a", "status": "PASSED", "ok": true}], "pass_to_pass": []}});
        assert_eq!(
            TestVerdict::of(1, false, Some(&resolved)).text(),
            "resolved: FAIL_TO_PASS 1/1, PASS_TO_PASS 0/0"
        );
    }

    /// A task without test lists: the exit code is the verdict.
    #[test]
    fn without_lists_the_exit_code_decides() {
        assert_eq!(TestVerdict::of(0, false, None).text(), "PASSED");
        assert_eq!(TestVerdict::of(0, true, None).text(), "FAILED");
        assert_eq!(TestVerdict::of(2, false, None).text(), "FAILED");
    }

    /// A repo the image holds is not said to come from anywhere else.
    #[test]
    fn checkout_says_where_the_repo_came_from() {
        let image = CheckoutOrigin::of(true, &[], false);
        assert_eq!(
            image.line("abc", "2.46 s"),
            "checked out abc from the repo in the image in 2.46 s"
        );
        // An older trajectory: setup commits only come from an image.
        let old = CheckoutOrigin::of(false, &["cafe".to_owned()], false);
        assert_eq!(
            old.line("abc", "2.46 s"),
            "checked out abc from the repo in the image in 2.46 s (the agent started at its setup commit cafe)"
        );
        assert_eq!(
            CheckoutOrigin::of(false, &[], true).line("abc", "1.00 s"),
            "checked out abc in 1.00 s (the repo fetched for this task)"
        );
        assert_eq!(
            CheckoutOrigin::of(false, &[], false).line("abc", "1.00 s"),
            "checked out abc from the repo cache in 1.00 s"
        );
    }
}
