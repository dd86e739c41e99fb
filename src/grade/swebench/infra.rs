//! 5.0's post-hoc classification of infrastructure failures
//! (swebench/harness/infra_failure.py, `classify_text`): which signature a
//! test log shows, and whether it is the environment's fault (else
//! ambiguous). Advisory only: a classified instance is graded as before.
//! Its users are the per-instance report.json (report.rs: `infra_failure`,
//! `infra_failure_reason`) and `report --format swebench`'s run summary.

use std::sync::LazyLock;

use regex::Regex;

/// `INFRA_FAILURE_SIGNATURES`: a reason, whether it is the environment's
/// (`TIER_ENVIRONMENT`, else `TIER_AMBIGUOUS`), and the pattern, tried in
/// order, multi-line.
const SIGNATURES: &[(&str, bool, &str)] = &[
    (
        "browser_launch_failed",
        true,
        r"Failed to launch|Failed to connect to the bus",
    ),
    (
        "display_unavailable",
        true,
        r"cannot open display|Missing X server|unable to open X display",
    ),
    (
        "out_of_memory",
        true,
        r"Cannot allocate memory|OutOfMemoryError|^Killed$",
    ),
    (
        "container_unavailable",
        true,
        r"Error response from daemon|Cannot connect to the Docker daemon",
    ),
    (
        "network_unreachable",
        true,
        r"Could not resolve host|Temporary failure in name resolution",
    ),
    (
        "missing_module",
        false,
        r"Cannot find module|MODULE_NOT_FOUND|ModuleNotFoundError",
    ),
    (
        "no_tests_collected",
        false,
        r"no tests ran|collected 0 items",
    ),
    (
        "tests_timed_out",
        false,
        r"Timeout error: \d+ seconds exceeded",
    ),
];

static COMPILED: LazyLock<Vec<(&'static str, bool, Regex)>> = LazyLock::new(|| {
    SIGNATURES
        .iter()
        .filter_map(|&(reason, environment, pattern)| {
            // The patterns above are fixed and valid; a test compiles each.
            Regex::new(&format!("(?m){pattern}"))
                .ok()
                .map(|regex| (reason, environment, regex))
        })
        .collect()
});

/// A failure's class: the signature's reason, and whether the environment
/// is at fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InfraFailure {
    pub reason: &'static str,
    pub environment: bool,
}

/// `classify_text`: the first signature `text` shows, if any.
pub fn classify(text: &str) -> Option<InfraFailure> {
    COMPILED
        .iter()
        .find(|(_, _, regex)| regex.is_match(text))
        .map(|&(reason, environment, _)| InfraFailure {
            reason,
            environment,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_signature_compiles_and_the_first_match_wins() {
        let class = |text| classify(text).map(|c| (c.reason, c.environment));
        assert_eq!(COMPILED.len(), SIGNATURES.len());
        assert_eq!(class(""), None);
        assert_eq!(class("all good"), None);
        assert_eq!(class("x\nKilled\ny"), Some(("out_of_memory", true)));
        assert_eq!(class("Killed by a signal"), None);
        assert_eq!(
            class("collected 0 items\nModuleNotFoundError: x"),
            Some(("missing_module", false))
        );
        assert_eq!(
            class("\n\nTimeout error: 30 seconds exceeded."),
            Some(("tests_timed_out", false))
        );
    }
}
