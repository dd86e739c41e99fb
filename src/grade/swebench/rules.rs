//! The two rule sets SWE-bench has graded by: the `swebench` package's
//! 4.1.0 (what OpenHands, Harbor and inspect_evals still mirror) and
//! 5.0's. They differ in how a test log is read (5.0: a skipped
//! FAIL_TO_PASS test fails, a non-zero recorded exit code with no failure
//! parsed or an empty result with no sign the suite ran is not graded,
//! truncated parametrized ids match by prefix) and in how a model's patch
//! goes in ([`Rules::apply_chain`]).

use serde::{Deserialize, Serialize};

/// A rule set, by the package version that grades by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Rules {
    #[serde(rename = "swebench-4.1")]
    Swebench41,
    #[serde(rename = "swebench-5.0")]
    Swebench50,
}

/// Every rule set, in the order `--grading` lists them.
pub const ALL_RULES: [Rules; 2] = [Rules::Swebench41, Rules::Swebench50];

impl Rules {
    /// The name `--grading` takes and run.json records.
    pub fn as_str(self) -> &'static str {
        match self {
            Rules::Swebench41 => "swebench-4.1",
            Rules::Swebench50 => "swebench-5.0",
        }
    }

    pub fn parse(name: &str) -> Option<Rules> {
        ALL_RULES.into_iter().find(|rules| rules.as_str() == name)
    }

    /// The rules a task is graded by when `--grading` is not given: a row
    /// in swebench 5's format (one that carries its own `eval_script` or
    /// `log_parser`) by 5.0's, any other by 4.1's.
    pub fn by_format(swebench5_row: bool) -> Rules {
        if swebench5_row {
            Rules::Swebench50
        } else {
            Rules::Swebench41
        }
    }

    /// The commands `run_evaluation` tries, in order, to put a model's
    /// patch in (each followed by the patch file's path), and whether it
    /// resets the tree between attempts and takes a patch that is already
    /// in (`git apply --check --reverse`) as applied.
    pub fn apply_chain(self) -> ApplyChain {
        match self {
            Rules::Swebench41 => ApplyChain {
                commands: &[
                    "git apply --verbose",
                    "git apply --verbose --reject",
                    "patch --batch --fuzz=5 -p1 -i",
                ],
                reset_between: false,
                already_applied_counts: false,
            },
            Rules::Swebench50 => ApplyChain {
                commands: &[
                    "git apply --verbose",
                    "git apply --verbose --3way",
                    "git apply --verbose --reject",
                    "patch --batch --forward --fuzz=5 -p1 -i",
                ],
                reset_between: true,
                already_applied_counts: true,
            },
        }
    }
}

impl std::fmt::Display for Rules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a rule set puts a model's patch in ([`Rules::apply_chain`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApplyChain {
    /// Tried in order until one exits 0; each is given the patch file.
    pub commands: &'static [&'static str],
    /// `git checkout -- . ; git clean -fd` before every attempt but the
    /// first (5.0: a failed `--reject` leaves part of the patch behind).
    pub reset_between: bool,
    /// When every attempt failed, `git apply --check --reverse` passing
    /// (the patch is in already) counts as applied (5.0).
    pub already_applied_counts: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_serialize_as_written() {
        for rules in ALL_RULES {
            assert_eq!(Rules::parse(rules.as_str()), Some(rules));
            assert_eq!(
                serde_json::to_value(rules).expect("serializes"),
                serde_json::json!(rules.as_str())
            );
        }
        assert_eq!(Rules::parse("swebench-5"), None);
        assert_eq!(Rules::by_format(true), Rules::Swebench50);
        assert_eq!(Rules::by_format(false), Rules::Swebench41);
    }
}
