//! `onebash compare RUN_A RUN_B [--format text|markdown|json]`: two runs
//! (models, prompt variants, or the same setup a month apart) paired by
//! (task, epoch). The 2x2 table, the exact McNemar p-value, the difference
//! in pass rate with Newcombe's paired 95% interval, per-pair differences in
//! tokens, turns, time and cost, and the tasks that flipped each way.
//! Plain synchronous code over the two results.csv files. It builds the
//! comparison and renders it as text; `commands::output` chooses the
//! format and `commands::html` draws the page, so this file imports
//! neither.

use std::collections::HashMap;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::commands::stats::{mcnemar_exact, median, newcombe_paired_diff95};
use crate::run_folder::{ResultRow, Status};
use crate::sys::words::count;

#[derive(Debug, Serialize)]
pub(crate) struct Comparison {
    pub run_a: String,
    pub run_b: String,
    pub label_a: String,
    pub label_b: String,
    /// Pairs with a verdict in both runs.
    pub pairs: usize,
    pub only_in_a: usize,
    pub only_in_b: usize,
    /// Pairs left out because a row has status error (no verdict).
    pub pairs_with_error: usize,
    pub both_passed: usize,
    pub only_a_passed: usize,
    pub only_b_passed: usize,
    pub neither_passed: usize,
    pub pass_rate_a: Option<f64>,
    pub pass_rate_b: Option<f64>,
    /// pass rate of B minus pass rate of A.
    pub difference: Option<f64>,
    pub difference_ci95: (f64, f64),
    pub ci_method: &'static str,
    pub mcnemar_p: f64,
    /// B minus A, per pair.
    pub deltas: Vec<Delta>,
    /// (task, epoch) that passed in A but not in B.
    pub regressions: Vec<(String, u32)>,
    /// (task, epoch) that passed in B but not in A.
    pub improvements: Vec<(String, u32)>,
    /// What makes the comparison weak or empty: no (task, epoch) in
    /// common, settings that differ beyond the model and prompt.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Fingerprint keys a comparison is made to vary: what it compares.
const COMPARED_KEYS: &[&str] = &["model", "provider", "prompt", "predictions_sha256"];

impl Comparison {
    /// Adds a warning for each setting that decides outcomes (run.json's
    /// fingerprint) in which the runs differ, other than the model and
    /// prompt they compare: then the difference is not theirs alone.
    pub(crate) fn with_settings(mut self, a: Option<&Value>, b: Option<&Value>) -> Comparison {
        let (Some(Value::Object(a)), Some(Value::Object(b))) = (a, b) else {
            return self;
        };
        let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
        let differ: Vec<String> = keys
            .into_iter()
            .filter(|key| !COMPARED_KEYS.contains(&key.as_str()) && a.get(*key) != b.get(*key))
            .map(|key| {
                let shown = |v: Option<&Value>| v.map_or("absent".to_owned(), Value::to_string);
                format!(
                    "{key} ({} in A, {} in B)",
                    shown(a.get(key)),
                    shown(b.get(key))
                )
            })
            .collect();
        if !differ.is_empty() {
            self.warnings.push(format!(
                "the runs differ in more than the model and prompt: {}; the difference is not theirs alone",
                differ.join(", ")
            ));
        }
        self
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct Delta {
    pub measure: &'static str,
    pub mean: f64,
    pub median: f64,
    pub pairs: usize,
}

fn label(rows: &[ResultRow], run: &Path) -> String {
    rows.first()
        .map(|r| format!("{} {}", r.model, r.prompt))
        .unwrap_or_else(|| run.display().to_string())
}

/// Reads one measure of a row, when the row has it.
type Getter = fn(&ResultRow) -> Option<f64>;

pub(crate) fn build(run_a: &Path, a: &[ResultRow], run_b: &Path, b: &[ResultRow]) -> Comparison {
    let index: HashMap<(&str, u32), &ResultRow> = b
        .iter()
        .map(|r| ((r.task_id.as_str(), r.epoch), r))
        .collect();
    let keys_a: std::collections::HashSet<(&str, u32)> =
        a.iter().map(|r| (r.task_id.as_str(), r.epoch)).collect();
    let mut pairs: Vec<(&ResultRow, &ResultRow)> = Vec::new();
    let mut pairs_with_error = 0;
    for row_a in a {
        let Some(row_b) = index.get(&(row_a.task_id.as_str(), row_a.epoch)) else {
            continue;
        };
        if row_a.status == Status::Error || row_b.status == Status::Error {
            pairs_with_error += 1;
        } else {
            pairs.push((row_a, row_b));
        }
    }
    let only_in_a = a.len() - pairs.len() - pairs_with_error;
    let only_in_b = b
        .iter()
        .filter(|r| !keys_a.contains(&(r.task_id.as_str(), r.epoch)))
        .count();
    let cell = |pa: bool, pb: bool| {
        pairs
            .iter()
            .filter(|(x, y)| x.passed == pa && y.passed == pb)
            .count()
    };
    let (both, only_a, only_b, neither) = (
        cell(true, true),
        cell(true, false),
        cell(false, true),
        cell(false, false),
    );
    let n = pairs.len();
    let rate = |passes: usize| (n > 0).then(|| passes as f64 / n as f64);
    let flipped = |pa: bool| {
        let mut list: Vec<(String, u32)> = pairs
            .iter()
            .filter(|(x, y)| x.passed == pa && y.passed != pa)
            .map(|(x, _)| (x.task_id.to_string(), x.epoch))
            .collect();
        list.sort();
        list
    };
    let deltas = deltas(&pairs);
    let mut warnings = Vec::new();
    if n + pairs_with_error == 0 {
        warnings.push(
            "the runs have no (task, epoch) in common: there is nothing to compare".to_owned(),
        );
    }
    Comparison {
        warnings,
        run_a: run_a.display().to_string(),
        run_b: run_b.display().to_string(),
        label_a: label(a, run_a),
        label_b: label(b, run_b),
        pairs: n,
        only_in_a,
        only_in_b,
        pairs_with_error,
        both_passed: both,
        only_a_passed: only_a,
        only_b_passed: only_b,
        neither_passed: neither,
        pass_rate_a: rate(both + only_a),
        pass_rate_b: rate(both + only_b),
        difference: rate(both + only_b)
            .zip(rate(both + only_a))
            .map(|(pb, pa)| pb - pa),
        difference_ci95: newcombe_paired_diff95(
            both as u64,
            only_a as u64,
            only_b as u64,
            neither as u64,
        ),
        ci_method: "Newcombe's hybrid score interval for paired proportions (1998, method 10)",
        mcnemar_p: mcnemar_exact(only_a as u64, only_b as u64),
        deltas,
        regressions: flipped(true),
        improvements: flipped(false),
    }
}

/// The mean and median change of each measure over the pairs (B minus A).
fn deltas(pairs: &[(&ResultRow, &ResultRow)]) -> Vec<Delta> {
    let measures: [(&'static str, Getter); 6] = [
        ("total_tokens", |r| Some(r.total_tokens as f64)),
        ("turns", |r| Some(f64::from(r.turns))),
        ("tool_calls", |r| Some(f64::from(r.tool_calls))),
        ("agent_seconds", |r| Some(r.agent_seconds)),
        ("wall_seconds", |r| Some(r.wall_seconds)),
        ("cost_usd", |r| r.cost_usd),
    ];
    measures
        .iter()
        .filter_map(|(measure, get)| {
            let values: Vec<f64> = pairs
                .iter()
                .filter_map(|(x, y)| Some(get(y)? - get(x)?))
                .collect();
            Some(Delta {
                measure,
                mean: values.iter().sum::<f64>() / values.len().max(1) as f64,
                median: median(&values)?,
                pairs: values.len(),
            })
        })
        .collect()
}

fn percent(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

fn signed_percent_points(x: f64) -> String {
    format!("{:+.1} pp", 100.0 * x)
}

/// The comparison as text, or as markdown.
pub(crate) fn render(c: &Comparison, markdown: bool) -> String {
    let mut out = String::new();
    render_header(&mut out, c, markdown);
    render_table(&mut out, c, markdown);
    render_pass_rates(&mut out, c);
    render_deltas(&mut out, &c.deltas, markdown);
    line(
        &mut out,
        format!(
            "passed only in A ({}): {}",
            c.regressions.len(),
            pair_list(&c.regressions)
        ),
    );
    line(
        &mut out,
        format!(
            "passed only in B ({}): {}",
            c.improvements.len(),
            pair_list(&c.improvements)
        ),
    );
    out
}

fn line(out: &mut String, text: String) {
    out.push_str(&text);
    out.push('\n');
}

/// The two runs, how they were paired, and the pairs left out.
fn render_header(out: &mut String, c: &Comparison, markdown: bool) {
    if markdown {
        line(
            out,
            format!(
                "# onebash compare\n\nA: `{}` ({})  \nB: `{}` ({})\n",
                c.run_a, c.label_a, c.run_b, c.label_b
            ),
        );
    } else {
        line(out, format!("A: {} ({})", c.run_a, c.label_a));
        line(out, format!("B: {} ({})", c.run_b, c.label_b));
    }
    for warning in &c.warnings {
        line(out, format!("warning: {warning}"));
    }
    line(
        out,
        format!(
            "paired by (task, epoch): {} with a verdict in both",
            count(c.pairs, "pair", "pairs")
        ),
    );
    if c.only_in_a + c.only_in_b > 0 {
        line(
            out,
            format!(
                "the runs differ in (task, epoch) pairs: compared on the intersection; {} only in A, {} only in B",
                c.only_in_a, c.only_in_b
            ),
        );
    }
    if c.pairs_with_error > 0 {
        line(
            out,
            format!(
                "{} left out: a row has status error (no verdict)",
                count(c.pairs_with_error, "pair", "pairs")
            ),
        );
    }
    line(out, String::new());
}

/// The 2x2 table of passed and failed in A against B.
fn render_table(out: &mut String, c: &Comparison, markdown: bool) {
    let table = [
        ["", "B passed", "B failed"],
        [
            "A passed",
            &c.both_passed.to_string(),
            &c.only_a_passed.to_string(),
        ],
        [
            "A failed",
            &c.only_b_passed.to_string(),
            &c.neither_passed.to_string(),
        ],
    ];
    if markdown {
        line(out, format!("| {} |", table[0].join(" | ")));
        line(out, "|---|---|---|".to_owned());
        for row in &table[1..] {
            line(out, format!("| {} |", row.join(" | ")));
        }
    } else {
        for row in &table {
            line(out, format!("{:<10}{:>10}{:>10}", row[0], row[1], row[2]));
        }
    }
    line(out, String::new());
}

/// The two pass rates, their difference with its interval, and McNemar's p.
fn render_pass_rates(out: &mut String, c: &Comparison) {
    if let (Some(pa), Some(pb), Some(diff)) = (c.pass_rate_a, c.pass_rate_b, c.difference) {
        line(
            out,
            format!("pass rate: A {}, B {}", percent(pa), percent(pb)),
        );
        line(
            out,
            format!(
                "difference B - A: {}, 95% CI [{}, {}] ({})",
                signed_percent_points(diff),
                signed_percent_points(c.difference_ci95.0),
                signed_percent_points(c.difference_ci95.1),
                c.ci_method
            ),
        );
    } else {
        line(
            out,
            "pass rate: n/a (no pair has a verdict in both runs)".to_owned(),
        );
    }
    line(
        out,
        format!(
            "exact McNemar test on the {}: p = {}",
            count(
                c.only_a_passed + c.only_b_passed,
                "discordant pair",
                "discordant pairs"
            ),
            format_p(c.mcnemar_p)
        ),
    );
    line(out, String::new());
}

/// The per-pair changes in tokens, turns, time and cost; nothing when no
/// measure has a pair.
fn render_deltas(out: &mut String, deltas: &[Delta], markdown: bool) {
    if deltas.is_empty() {
        return;
    }
    line(out, "per pair, B - A:".to_owned());
    if markdown {
        line(
            out,
            "| measure | mean | median | pairs |\n|---|---|---|---|".to_owned(),
        );
    }
    for d in deltas {
        if markdown {
            line(
                out,
                format!(
                    "| {} | {:+.3} | {:+.3} | {} |",
                    d.measure, d.mean, d.median, d.pairs
                ),
            );
        } else {
            line(
                out,
                format!(
                    "  {:<14} mean {:+12.3}  median {:+12.3}  ({})",
                    d.measure,
                    d.mean,
                    d.median,
                    count(d.pairs, "pair", "pairs")
                ),
            );
        }
    }
    line(out, String::new());
}

/// Flipped pairs as `task` (epoch 1) or `task#epoch`, or `none`.
fn pair_list(pairs: &[(String, u32)]) -> String {
    if pairs.is_empty() {
        return "none".to_owned();
    }
    pairs
        .iter()
        .map(|(task, epoch)| {
            if *epoch == 1 {
                task.clone()
            } else {
                format!("{task}#{epoch}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Exact small p-values, without rounding them to zero.
pub(crate) fn format_p(p: f64) -> String {
    if p >= 0.001 {
        format!("{}", (p * 1e7).round() / 1e7)
    } else {
        format!("{p:.3e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_folder::ExitReason;
    use crate::task::TaskId;

    fn row(task: &str, passed: Option<bool>, tokens: u64) -> ResultRow {
        let id = TaskId::parse(task).expect("id");
        ResultRow {
            status: match passed {
                Some(true) => Status::Passed,
                Some(false) => Status::Failed,
                None => Status::Error,
            },
            passed: passed == Some(true),
            turns: 2,
            tool_calls: 1,
            prompt_tokens: tokens,
            total_tokens: tokens,
            agent_seconds: 1.0,
            wall_seconds: 1.0,
            ..ResultRow::blank(id, 1, "m".into(), "p@1".into(), ExitReason::Completed)
        }
    }

    #[test]
    fn eight_discordant_pairs_all_one_way() {
        let ids: Vec<String> = (0..10).map(|i| format!("t{i}")).collect();
        let a: Vec<ResultRow> = ids.iter().map(|id| row(id, Some(false), 100)).collect();
        let b: Vec<ResultRow> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| row(id, Some(i < 8), 150))
            .collect();
        let c = build(Path::new("a"), &a, Path::new("b"), &b);
        assert_eq!(
            (
                c.both_passed,
                c.only_a_passed,
                c.only_b_passed,
                c.neither_passed
            ),
            (0, 0, 8, 2)
        );
        assert_eq!(c.mcnemar_p, 0.007_812_5);
        assert_eq!(c.difference, Some(0.8));
        assert!(c.difference_ci95.0 > 0.0);
        assert_eq!(c.improvements.len(), 8);
        assert!(c.regressions.is_empty());
        let tokens = c
            .deltas
            .iter()
            .find(|d| d.measure == "total_tokens")
            .expect("tokens");
        assert_eq!((tokens.mean, tokens.median), (50.0, 50.0));
        // Cost is unknown in both: no cost line.
        assert!(c.deltas.iter().all(|d| d.measure != "cost_usd"));
        let text = render(&c, false);
        assert!(text.contains("p = 0.0078125"), "{text}");
        assert!(text.contains("passed only in B (8): t0, t1"), "{text}");
    }

    #[test]
    fn different_task_sets_and_errors_are_said() {
        let a = vec![
            row("x", Some(true), 1),
            row("y", Some(true), 1),
            row("z", None, 1),
        ];
        let b = vec![
            row("x", Some(true), 1),
            row("z", Some(true), 1),
            row("w", Some(false), 1),
        ];
        let c = build(Path::new("a"), &a, Path::new("b"), &b);
        assert_eq!(c.pairs, 1);
        assert_eq!((c.only_in_a, c.only_in_b, c.pairs_with_error), (1, 1, 1));
        assert_eq!(c.mcnemar_p, 1.0);
        let text = render(&c, false);
        assert!(
            text.contains("compared on the intersection; 1 only in A, 1 only in B"),
            "{text}"
        );
        assert!(text.contains("\n1 pair left out"), "{text}");
    }

    /// Two runs with no (task, epoch) in common: a warning, not a bare
    /// empty table and `p = 1`.
    #[test]
    fn runs_with_no_task_in_common_are_warned_of() {
        let a = vec![row("x", Some(true), 1)];
        let b = vec![row("y", Some(false), 1)];
        let c = build(Path::new("a"), &a, Path::new("b"), &b);
        let text = render(&c, false);
        assert!(
            text.contains(
                "\nwarning: the runs have no (task, epoch) in common: there is nothing to compare\n"
            ),
            "{text}"
        );
        let json = serde_json::to_value(&c).expect("json");
        assert_eq!(json["warnings"].as_array().map(Vec::len), Some(1));
        // A comparison with pairs has none, and its JSON no key.
        let c = build(Path::new("a"), &a, Path::new("b"), &a);
        assert!(!render(&c, false).contains("warning"));
        assert!(
            serde_json::to_value(&c)
                .expect("json")
                .get("warnings")
                .is_none()
        );
    }

    /// Runs that differ in a cap or the model's arguments, not only in the
    /// prompt: the difference is named.
    #[test]
    fn runs_whose_settings_differ_beyond_the_prompt_are_warned_of() {
        let a = vec![row("x", Some(true), 1)];
        let fa =
            serde_json::json!({"prompt": "p@1", "max_turns": 50, "request": {"temperature": 0}});
        let fb =
            serde_json::json!({"prompt": "q@2", "max_turns": 20, "request": {"temperature": 0}});
        let c = build(Path::new("a"), &a, Path::new("b"), &a).with_settings(Some(&fa), Some(&fb));
        assert_eq!(
            c.warnings,
            vec![
                "the runs differ in more than the model and prompt: max_turns (50 in A, 20 in B); the difference is not theirs alone"
            ]
        );
        // Only the prompt differs: no warning; no run.json: none either.
        let same =
            serde_json::json!({"prompt": "q@2", "max_turns": 50, "request": {"temperature": 0}});
        let c = build(Path::new("a"), &a, Path::new("b"), &a).with_settings(Some(&fa), Some(&same));
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        let c = build(Path::new("a"), &a, Path::new("b"), &a).with_settings(Some(&fa), None);
        assert!(c.warnings.is_empty());
    }

    #[test]
    fn text_compare_snapshot() {
        let a = vec![
            row("t1", Some(true), 100),
            row("t2", Some(false), 200),
            row("t3", Some(true), 300),
            row("t4", Some(false), 400),
            row("t5", None, 10),
        ];
        let b = vec![
            row("t1", Some(true), 150),
            row("t2", Some(true), 250),
            row("t3", Some(false), 250),
            row("t4", Some(true), 500),
            row("t5", Some(true), 10),
            row("t6", Some(true), 10),
        ];
        let c = build(Path::new("results/a"), &a, Path::new("results/b"), &b);
        insta::assert_snapshot!(render(&c, false));
    }

    /// One discordant pair is one pair: the test line said "the 1
    /// discordant pairs", in text and in the HTML page.
    #[test]
    fn one_discordant_pair_is_counted_as_one() {
        let a = vec![row("x", Some(true), 1), row("y", Some(true), 1)];
        let b = vec![row("x", Some(false), 1), row("y", Some(true), 1)];
        let c = build(Path::new("a"), &a, Path::new("b"), &b);
        let text = render(&c, false);
        assert!(
            text.contains("exact McNemar test on the 1 discordant pair: p = 1"),
            "{text}"
        );
        let html = crate::commands::html::compare_page(&c);
        assert!(
            html.contains("Exact McNemar test on the 1 discordant pair: <b>"),
            "{html}"
        );
    }
}
