//! `onebash report RUN_DIR [--format text|markdown|json]`: what a run
//! found. Totals, the pass rate with its Wilson 95% interval, counts by
//! status and exit reason, tokens, turns, cost and time (total, per row,
//! per passed row), pass@k / pass^k when there are several epochs, and
//! the rows whose commands probed the repo's history (`history_probes`),
//! listing those that passed with the kinds from their trajectories, and
//! what the prompt cache saved (priced with run.json's price).
//! Plain synchronous code over results.csv and run.json. It builds the
//! report and renders it as text; `commands::output` chooses the format
//! and `commands::html` draws the page, so this file imports neither.
//! `report --by FIELD` groups the rows by a field of their task lines
//! (`report/by.rs`).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::agent::pricing::Price;
use crate::commands::stats::{pass_at_k, pass_hat_k, wilson95};
use crate::config::manifest::RunManifest;
use crate::run_folder::Usage;
use crate::run_folder::trajectory::{Event, read_trajectory};
use crate::run_folder::{ResultRow, RunFolder, Status};

use super::by;

/// Everything the report says, also its JSON form.
#[derive(Debug, Serialize)]
pub(crate) struct Report {
    pub run: String,
    pub model: Option<String>,
    pub prompt: Option<String>,
    pub rows: usize,
    pub tasks: usize,
    pub epochs: u32,
    pub passed: usize,
    pub failed: usize,
    pub error: usize,
    /// passed / (passed + failed): rows with a verdict.
    pub pass_rate: Option<f64>,
    pub pass_rate_ci95: (f64, f64),
    pub exit_reasons: BTreeMap<String, usize>,
    pub totals: Measures,
    pub per_row: Measures,
    pub per_passed_row: Option<Measures>,
    /// Rows with an unknown price are left out of cost sums.
    pub rows_without_cost: usize,
    pub pass_at_k: Vec<PassAtK>,
    /// The audit of the agents' commands; `None` when no row has the
    /// `history_probes` column (a run from before it existed).
    pub history_probes: Option<HistoryProbes>,
    /// What the provider's prompt cache saved; `None` when no row read
    /// or wrote the cache, or the run's price is not known.
    pub prompt_cache: Option<PromptCache>,
    /// `--by FIELD`: the rows grouped by a field of their task lines;
    /// absent without `--by`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<by::Groups>,
}

/// The prompt cache over the rows with a cost: the tokens it served and
/// took, the cost paid, and the cost of the same tokens at list price
/// with every input token as plain input (run.json's price).
#[derive(Debug, Serialize)]
pub(crate) struct PromptCache {
    pub cached_input_tokens: u64,
    pub cache_write_tokens: u64,
    pub cost_usd: f64,
    pub cost_without_cache_usd: f64,
    /// `cost_without_cache_usd - cost_usd`: negative when writes cost
    /// more than reads saved.
    pub saved_usd: f64,
}

/// What the `history_probes` column says of the run.
#[derive(Debug, Serialize)]
pub(crate) struct HistoryProbes {
    /// Rows with the column filled.
    pub rows_audited: usize,
    /// Rows with at least one agent command that probed history.
    pub rows_with_probes: usize,
    /// Those of them that passed, by task and epoch: their pass may owe
    /// something to what the probes found.
    pub passed_with_probes: Vec<ProbedRow>,
}

/// A passed row with probes.
#[derive(Debug, Serialize)]
pub(crate) struct ProbedRow {
    pub task_id: String,
    pub epoch: u32,
    /// Commands with probes (the column).
    pub commands: u32,
    /// The probes' kinds, from the trajectory's `audit` event; empty when
    /// the trajectory is not there.
    pub kinds: Vec<String>,
}

#[derive(Debug, Default, Clone, Copy, Serialize)]
pub(crate) struct Measures {
    pub prompt_tokens: f64,
    pub completion_tokens: f64,
    pub total_tokens: f64,
    pub turns: f64,
    pub tool_calls: f64,
    pub cost_usd: f64,
    pub agent_seconds: f64,
    pub wall_seconds: f64,
}

#[derive(Debug, Serialize)]
pub(crate) struct PassAtK {
    pub k: u32,
    /// Mean over tasks with at least k verdicts of the unbiased estimator.
    pub pass_at_k: f64,
    pub pass_hat_k: f64,
    pub tasks: usize,
}

pub(crate) fn build(run: &RunFolder, rows: &[ResultRow], manifest: Option<&RunManifest>) -> Report {
    let count = |status: Status| rows.iter().filter(|r| r.status == status).count();
    let (passed, failed, error) = (
        count(Status::Passed),
        count(Status::Failed),
        count(Status::Error),
    );
    let graded = passed + failed;
    let mut exit_reasons = BTreeMap::new();
    for row in rows {
        *exit_reasons
            .entry(row.exit_reason.as_str().to_owned())
            .or_insert(0) += 1;
    }
    let sum = |rows: &[&ResultRow]| {
        let mut m = Measures::default();
        for r in rows {
            m.prompt_tokens += r.prompt_tokens as f64;
            m.completion_tokens += r.completion_tokens as f64;
            m.total_tokens += r.total_tokens as f64;
            m.turns += f64::from(r.turns);
            m.tool_calls += f64::from(r.tool_calls);
            m.cost_usd += r.cost_usd.unwrap_or(0.0);
            m.agent_seconds += r.agent_seconds;
            m.wall_seconds += r.wall_seconds;
        }
        m
    };
    let mean = |m: Measures, n: usize| {
        let n = n.max(1) as f64;
        Measures {
            prompt_tokens: m.prompt_tokens / n,
            completion_tokens: m.completion_tokens / n,
            total_tokens: m.total_tokens / n,
            turns: m.turns / n,
            tool_calls: m.tool_calls / n,
            cost_usd: m.cost_usd / n,
            agent_seconds: m.agent_seconds / n,
            wall_seconds: m.wall_seconds / n,
        }
    };
    let all: Vec<&ResultRow> = rows.iter().collect();
    let passed_rows: Vec<&ResultRow> = rows.iter().filter(|r| r.status == Status::Passed).collect();
    let totals = sum(&all);

    let epochs = rows.iter().map(|r| r.epoch).max().unwrap_or(0);
    let pass_at_k = pass_at_ks(rows, epochs);
    let tasks = rows
        .iter()
        .map(|r| r.task_id.as_str())
        .collect::<std::collections::HashSet<_>>()
        .len();
    Report {
        run: run.root().display().to_string(),
        model: rows.first().map(|r| r.model.clone()),
        prompt: rows.first().map(|r| r.prompt.clone()),
        rows: rows.len(),
        tasks,
        epochs,
        passed,
        failed,
        error,
        pass_rate: (graded > 0).then(|| passed as f64 / graded as f64),
        pass_rate_ci95: wilson95(passed as u64, graded as u64),
        exit_reasons,
        totals,
        per_row: mean(totals, rows.len()),
        per_passed_row: (!passed_rows.is_empty())
            .then(|| mean(sum(&passed_rows), passed_rows.len())),
        rows_without_cost: rows.iter().filter(|r| r.cost_usd.is_none()).count(),
        pass_at_k,
        history_probes: history_probes(run, rows),
        prompt_cache: prompt_cache(rows, manifest),
        by: None,
    }
    .with_manifest(manifest)
}

/// pass@k and pass^k for k = 1 to `epochs`, over the tasks with at least k
/// verdicts; none for a run of one epoch.
fn pass_at_ks(rows: &[ResultRow], epochs: u32) -> Vec<PassAtK> {
    // Per task: verdicts and passes over its epochs (errors have no verdict).
    let mut per_task: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for row in rows.iter().filter(|r| r.status != Status::Error) {
        let entry = per_task.entry(row.task_id.as_str()).or_default();
        entry.0 += 1;
        entry.1 += u64::from(row.passed);
    }
    if epochs > 1 {
        (1..=epochs)
            .filter_map(|k| {
                let estimates: Vec<(f64, f64)> = per_task
                    .values()
                    .filter_map(|&(n, c)| {
                        Some((
                            pass_at_k(n, c, u64::from(k))?,
                            pass_hat_k(n, c, u64::from(k))?,
                        ))
                    })
                    .collect();
                (!estimates.is_empty()).then(|| PassAtK {
                    k,
                    pass_at_k: estimates.iter().map(|e| e.0).sum::<f64>() / estimates.len() as f64,
                    pass_hat_k: estimates.iter().map(|e| e.1).sum::<f64>() / estimates.len() as f64,
                    tasks: estimates.len(),
                })
            })
            .collect()
    } else {
        Vec::new()
    }
}

/// What the cache saved, priced with run.json's price (`settings.model.price`):
/// a row's cost without the cache is every input token at the input price.
fn prompt_cache(rows: &[ResultRow], manifest: Option<&RunManifest>) -> Option<PromptCache> {
    let price: Price = manifest?
        .settings
        .model
        .other
        .get("price")
        .and_then(|price| serde_json::from_value(price.clone()).ok())?;
    let priced: Vec<&ResultRow> = rows.iter().filter(|r| r.cost_usd.is_some()).collect();
    let cached_input_tokens = priced.iter().map(|r| r.cached_input_tokens).sum::<u64>();
    let cache_write_tokens = priced.iter().map(|r| r.cache_write_tokens).sum::<u64>();
    if cached_input_tokens == 0 && cache_write_tokens == 0 {
        return None;
    }
    let cost_usd: f64 = priced.iter().filter_map(|r| r.cost_usd).sum();
    let cost_without_cache_usd: f64 = priced
        .iter()
        .map(|r| {
            price.cost_without_cache(&Usage {
                prompt_tokens: r.prompt_tokens,
                completion_tokens: r.completion_tokens,
                total_tokens: r.total_tokens,
                ..Usage::default()
            })
        })
        .sum();
    Some(PromptCache {
        cached_input_tokens,
        cache_write_tokens,
        cost_usd,
        cost_without_cache_usd,
        saved_usd: cost_without_cache_usd - cost_usd,
    })
}

/// The report's line on the prompt cache.
pub(crate) fn prompt_cache_line(c: &PromptCache) -> String {
    let share = if c.cost_without_cache_usd > 0.0 {
        format!(
            " ({} of the cost without it)",
            percent(c.saved_usd / c.cost_without_cache_usd)
        )
    } else {
        String::new()
    };
    format!(
        "prompt cache: {} input tokens read, {} written; cost {:.6} USD, {:.6} USD without the cache: saved {:.6} USD{share}",
        c.cached_input_tokens,
        c.cache_write_tokens,
        c.cost_usd,
        c.cost_without_cache_usd,
        c.saved_usd
    )
}

fn history_probes(run: &RunFolder, rows: &[ResultRow]) -> Option<HistoryProbes> {
    let audited: Vec<&ResultRow> = rows.iter().filter(|r| r.history_probes.is_some()).collect();
    if audited.is_empty() {
        return None;
    }
    let probed = || audited.iter().filter(|r| r.history_probes.unwrap_or(0) > 0);
    let mut passed_with_probes: Vec<ProbedRow> = probed()
        .filter(|r| r.status == Status::Passed)
        .map(|r| ProbedRow {
            task_id: r.task_id.as_str().to_owned(),
            epoch: r.epoch,
            commands: r.history_probes.unwrap_or(0),
            kinds: probe_kinds(run, r),
        })
        .collect();
    passed_with_probes.sort_by(|a, b| (&a.task_id, a.epoch).cmp(&(&b.task_id, b.epoch)));
    Some(HistoryProbes {
        rows_audited: audited.len(),
        rows_with_probes: probed().count(),
        passed_with_probes,
    })
}

/// The kinds of a row's probes, each once, sorted: read from the `audit`
/// event of its trajectory.
fn probe_kinds(run: &RunFolder, row: &ResultRow) -> Vec<String> {
    // A trajectory that is gone or unreadable lists no kinds: the counts
    // come from the rows, the kinds only add detail.
    let events = read_trajectory(&run.trajectory(&row.task_id, row.epoch)).unwrap_or_default();
    let Some(history_probes) = events.iter().rev().find_map(|event| match event {
        Event::Audit { history_probes, .. } => Some(history_probes),
        _ => None,
    }) else {
        return Vec::new();
    };
    let kinds: std::collections::BTreeSet<&str> = history_probes
        .iter()
        .flat_map(|command| &command.probes)
        .map(|probe| probe.kind.as_str())
        .collect();
    kinds.into_iter().map(str::to_owned).collect()
}

impl Report {
    /// Fills what the rows lack (an empty run) from run.json.
    fn with_manifest(mut self, manifest: Option<&RunManifest>) -> Report {
        if self.model.is_none() {
            self.model = manifest.map(|m| m.settings.model.name().to_owned());
        }
        self
    }
}

fn percent(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// Reads one measure.
type MeasureOf = fn(&Measures) -> f64;

/// The rows of the measures table (text and HTML): name, getter, decimals.
pub(crate) const MEASURES: &[(&str, MeasureOf, usize)] = &[
    ("tokens", |m| m.total_tokens, 0),
    ("prompt tokens", |m| m.prompt_tokens, 0),
    ("completion tokens", |m| m.completion_tokens, 0),
    ("turns", |m| m.turns, 1),
    ("agent seconds", |m| m.agent_seconds, 1),
    ("cost USD", |m| m.cost_usd, 4),
];

/// The report as text, or as markdown.
pub(crate) fn render(r: &Report, markdown: bool) -> String {
    let mut out = render_summary(r, markdown);
    out.push_str(&render_measures(r, markdown));
    if !r.pass_at_k.is_empty() {
        out.push_str(&render_pass_at_k(&r.pass_at_k, markdown));
    }
    if let Some(groups) = &r.by {
        line(&mut out, String::new());
        out.push_str(&render_by(groups, markdown));
    }
    out
}

fn line(out: &mut String, text: String) {
    out.push_str(&text);
    out.push('\n');
}

/// The run, its counts by status with the pass rate, the exit reasons and
/// the history probes.
fn render_summary(r: &Report, markdown: bool) -> String {
    let mut out = String::new();
    if markdown {
        line(&mut out, format!("# onebash report: `{}`\n", r.run));
    } else {
        line(&mut out, format!("run: {}", r.run));
    }
    line(
        &mut out,
        format!(
            "model: {}   prompt: {}",
            r.model.as_deref().unwrap_or("?"),
            r.prompt.as_deref().unwrap_or("?")
        ),
    );
    line(
        &mut out,
        format!("rows: {} ({} tasks x {} epochs)", r.rows, r.tasks, r.epochs),
    );
    line(
        &mut out,
        format!(
            "status: {} passed, {} failed, {} error",
            r.passed, r.failed, r.error
        ),
    );
    match r.pass_rate {
        Some(rate) => line(
            &mut out,
            format!(
                "pass rate: {} ({}/{} rows with a verdict), 95% CI [{}, {}] (Wilson)",
                percent(rate),
                r.passed,
                r.passed + r.failed,
                percent(r.pass_rate_ci95.0),
                percent(r.pass_rate_ci95.1)
            ),
        ),
        None => line(&mut out, "pass rate: n/a (no row has a verdict)".to_owned()),
    }
    if r.error > 0 {
        line(
            &mut out,
            format!(
                "{} rows with status error have no verdict and are left out of the pass rate; redo them with `onebash run ... --resume --retry-errors`",
                r.error
            ),
        );
    }
    let reasons: Vec<String> = r
        .exit_reasons
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    line(&mut out, format!("exit reasons: {}", reasons.join(", ")));
    if let Some(h) = &r.history_probes {
        out.push_str(&render_history_probes(h, r.rows, markdown));
    }
    line(&mut out, String::new());
    out
}

/// The measures table (total, per row, per passed row), what cost leaves
/// out, and the prompt cache's line.
fn render_measures(r: &Report, markdown: bool) -> String {
    let columns = ["", "total", "per row", "per passed row"];
    let mut table: Vec<Vec<String>> = Vec::new();
    for &(name, get, decimals) in MEASURES {
        let cell =
            |m: Option<&Measures>| m.map_or("-".to_owned(), |m| format!("{:.*}", decimals, get(m)));
        table.push(vec![
            name.to_owned(),
            cell(Some(&r.totals)),
            cell(Some(&r.per_row)),
            cell(r.per_passed_row.as_ref()),
        ]);
    }
    let mut out = render_table(&columns, &table, markdown);
    if r.rows_without_cost > 0 {
        line(
            &mut out,
            format!(
                "cost leaves out {} rows whose price is unknown",
                r.rows_without_cost
            ),
        );
    }
    if let Some(cache) = &r.prompt_cache {
        line(&mut out, prompt_cache_line(cache));
    }
    out
}

/// The pass@k table, after a blank line.
fn render_pass_at_k(pass_at_k: &[PassAtK], markdown: bool) -> String {
    let mut out = String::new();
    line(&mut out, String::new());
    line(
        &mut out,
        "pass@k (unbiased estimator, Chen et al. 2021) and pass^k (all k pass), mean over tasks:"
            .to_owned(),
    );
    let rows: Vec<Vec<String>> = pass_at_k
        .iter()
        .map(|p| {
            vec![
                p.k.to_string(),
                percent(p.pass_at_k),
                percent(p.pass_hat_k),
                p.tasks.to_string(),
            ]
        })
        .collect();
    out.push_str(&render_table(
        &["k", "pass@k", "pass^k", "tasks"],
        &rows,
        markdown,
    ));
    out
}

/// `1 row`, `3 rows`.
fn rows_count(n: usize) -> String {
    format!("{n} row{}", if n == 1 { "" } else { "s" })
}

/// The first line of the history probes section.
pub(crate) fn history_probes_summary(h: &HistoryProbes, rows: usize) -> String {
    let older = match rows - h.rows_audited.min(rows) {
        0 => String::new(),
        1 => "; 1 row predates the audit".to_owned(),
        n => format!("; {n} rows predate the audit"),
    };
    if h.rows_with_probes == 0 {
        return format!(
            "history probes: none in {}{older}",
            rows_count(h.rows_audited)
        );
    }
    format!(
        "history probes: {} of {} ran commands that probed the repo's history or fetched its source{older}",
        h.rows_with_probes,
        rows_count(h.rows_audited)
    )
}

fn render_history_probes(h: &HistoryProbes, rows: usize, markdown: bool) -> String {
    let mut out = history_probes_summary(h, rows) + "\n";
    if h.rows_with_probes == 0 {
        return out;
    }
    if h.passed_with_probes.is_empty() {
        out.push_str("passed with probes: none\n");
        return out;
    }
    out.push_str(&format!(
        "passed with probes ({}), see `onebash show RUN_DIR TASK --epoch K`:\n",
        h.passed_with_probes.len()
    ));
    if markdown {
        out.push('\n');
    }
    let table: Vec<Vec<String>> = h
        .passed_with_probes
        .iter()
        .map(|p| {
            vec![
                p.task_id.clone(),
                p.epoch.to_string(),
                p.commands.to_string(),
                p.kinds.join(", "),
            ]
        })
        .collect();
    out.push_str(&render_table(
        &["task", "epoch", "commands", "kinds"],
        &table,
        markdown,
    ));
    out
}

/// The groups of `--by` as a table, text or markdown.
fn render_by(g: &by::Groups, markdown: bool) -> String {
    let rows: Vec<Vec<String>> = g
        .groups
        .iter()
        .map(|group| {
            let (rate, interval) = group.rate_cells(percent);
            vec![
                group.value.clone(),
                group.rows.to_string(),
                group.passed.to_string(),
                group.failed.to_string(),
                group.error.to_string(),
                rate,
                interval,
            ]
        })
        .collect();
    let title = format!(
        "by {}: pass rate (passed / rows with a verdict) and its 95% CI (Wilson) per group:",
        g.field
    );
    let header = [
        g.field.as_str(),
        "rows",
        "passed",
        "failed",
        "error",
        "pass rate",
        "95% CI",
    ];
    let separator = if markdown { "\n\n" } else { "\n" };
    format!(
        "{title}{separator}{}",
        render_table(&header, &rows, markdown)
    )
}

fn render_table(header: &[&str], rows: &[Vec<String>], markdown: bool) -> String {
    let mut out = String::new();
    if markdown {
        out.push_str(&format!("| {} |\n", header.join(" | ")));
        out.push_str(&format!("|{}\n", "---|".repeat(header.len())));
        for row in rows {
            out.push_str(&format!("| {} |\n", row.join(" | ")));
        }
        return out;
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let format_row = |cells: Vec<&str>| -> String {
        let mut line = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i == 0 {
                line.push_str(&format!("{cell:<w$}", w = widths[i]));
            } else {
                line.push_str(&format!("  {cell:>w$}", w = widths[i]));
            }
        }
        line.trim_end().to_owned() + "\n"
    };
    out.push_str(&format_row(header.to_vec()));
    for row in rows {
        out.push_str(&format_row(row.iter().map(String::as_str).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::run_folder::ExitReason;
    use crate::task::TaskId;

    fn row(task: &str, epoch: u32, status: Status) -> ResultRow {
        let id = TaskId::parse(task).expect("id");
        let exit_reason = if status == Status::Error {
            ExitReason::ApiError
        } else {
            ExitReason::Completed
        };
        ResultRow {
            status,
            passed: status == Status::Passed,
            turns: 4,
            tool_calls: 3,
            prompt_tokens: 100,
            completion_tokens: 10,
            total_tokens: 110,
            cost_usd: Some(0.01),
            agent_seconds: 2.0,
            test_seconds: Some(1.0),
            wall_seconds: 3.0,
            test_exit_code: Some(0),
            ..ResultRow::blank(id, epoch, "m".into(), "p@1".into(), exit_reason)
        }
    }

    /// The saving is priced with run.json's price: here Sonnet's, with a
    /// row that read 8000 cached tokens and wrote 1500.
    #[test]
    fn the_report_prices_what_the_prompt_cache_saved() {
        let manifest: RunManifest = serde_json::from_value(serde_json::json!({
            "onebash_version": "0",
            "settings": {
                "model": {"kind": "api", "name": "claude-sonnet-4-5",
                          "price": {"input": 3.0, "output": 15.0, "cached_input": 0.3, "cache_write": 3.75}},
                "out_dir": "run"
            }
        }))
        .expect("a manifest");
        let cached = ResultRow {
            prompt_tokens: 10_000,
            completion_tokens: 1_000,
            total_tokens: 11_000,
            cached_input_tokens: 8_000,
            cache_write_tokens: 1_500,
            // 500 x 3 + 8000 x 0.3 + 1500 x 3.75 + 1000 x 15, per million.
            cost_usd: Some(0.024_525),
            ..row("a", 1, Status::Passed)
        };
        let rows = vec![cached.clone(), row("b", 1, Status::Failed)];
        let report = build(&RunFolder::at(Path::new("run")), &rows, Some(&manifest));
        let cache = report.prompt_cache.as_ref().expect("a cache section");
        assert_eq!(cache.cached_input_tokens, 8_000);
        assert_eq!(cache.cache_write_tokens, 1_500);
        // Row b: 100 in, 10 out, no cache: 0.01 paid (its fixture cost);
        // without the cache 100 x 3 + 10 x 15 = 450 per million.
        // Row a without the cache: 10 000 x 3 + 1000 x 15 = 45 000 per million.
        assert!((cache.cost_usd - (0.024_525 + 0.01)).abs() < 1e-12);
        assert!((cache.cost_without_cache_usd - (0.045 + 0.000_45)).abs() < 1e-12);
        assert!((cache.saved_usd - (0.045_45 - 0.034_525)).abs() < 1e-12);
        let text = render(&report, false);
        assert!(
            text.contains("prompt cache: 8000 input tokens read, 1500 written; cost 0.034525 USD, 0.045450 USD without the cache: saved 0.010925 USD (24.0% of the cost without it)"),
            "{text}"
        );
        // No cache tokens, or no price: no section.
        let plain = vec![row("b", 1, Status::Failed)];
        assert!(
            build(&RunFolder::at(Path::new("run")), &plain, Some(&manifest))
                .prompt_cache
                .is_none()
        );
        assert!(
            build(&RunFolder::at(Path::new("run")), &[cached], None)
                .prompt_cache
                .is_none()
        );
    }

    #[test]
    fn three_epochs_give_pass_at_k_and_pass_hat_k() {
        use Status::*;
        // Task a passes 1 of 3, task b 3 of 3, task c 2 of 3 with an error row
        // that has no verdict (so n = 2 for c at k <= 2).
        let rows = vec![
            row("a", 1, Passed),
            row("a", 2, Failed),
            row("a", 3, Failed),
            row("b", 1, Passed),
            row("b", 2, Passed),
            row("b", 3, Passed),
            row("c", 1, Passed),
            row("c", 2, Error),
            row("c", 3, Passed),
        ];
        let report = build(&RunFolder::at(Path::new("run")), &rows, None);
        assert_eq!((report.passed, report.failed, report.error), (6, 2, 1));
        assert_eq!(report.epochs, 3);
        assert_eq!(report.pass_rate, Some(0.75));
        let k1 = &report.pass_at_k[0];
        // pass@1: (1/3 + 1 + 1) / 3.
        assert!((k1.pass_at_k - (1.0 / 3.0 + 2.0) / 3.0).abs() < 1e-12);
        let k2 = &report.pass_at_k[1];
        // pass@2: a 2/3, b 1, c 1; pass^2: a 0, b 1, c 1.
        assert!((k2.pass_at_k - (2.0 / 3.0 + 2.0) / 3.0).abs() < 1e-12);
        assert!((k2.pass_hat_k - 2.0 / 3.0).abs() < 1e-12);
        // k = 3: c has only 2 verdicts and is left out.
        let k3 = &report.pass_at_k[2];
        assert_eq!(k3.tasks, 2);
        assert!((k3.pass_hat_k - 0.5).abs() < 1e-12);
        let text = render(&report, false);
        assert!(
            text.contains("pass rate: 75.0% (6/8 rows with a verdict)"),
            "{text}"
        );
        assert!(text.contains("pass@k"), "{text}");
        let markdown = render(&report, true);
        assert!(
            markdown.contains("| k | pass@k | pass^k | tasks |"),
            "{markdown}"
        );
    }

    #[test]
    fn one_epoch_has_no_pass_at_k_and_an_empty_run_reports() {
        let report = build(
            &RunFolder::at(Path::new("run")),
            &[row("a", 1, Status::Passed)],
            None,
        );
        assert!(report.pass_at_k.is_empty());
        let empty = build(&RunFolder::at(Path::new("run")), &[], None);
        assert_eq!(empty.pass_rate, None);
        assert!(render(&empty, false).contains("pass rate: n/a"));
    }

    #[test]
    fn rows_with_probes_are_counted_and_the_passed_ones_listed() {
        use Status::*;
        let mut rows = vec![
            row("a", 1, Passed),
            row("b", 1, Passed),
            row("c", 1, Failed),
            row("d", 1, Passed),
        ];
        rows[1].history_probes = Some(3);
        rows[2].history_probes = Some(1);
        // From an older results.csv: not audited.
        rows[3].history_probes = None;
        let report = build(&RunFolder::at(Path::new("run")), &rows, None);
        let h = report.history_probes.as_ref().expect("audited rows");
        assert_eq!((h.rows_audited, h.rows_with_probes), (3, 2));
        assert_eq!(h.passed_with_probes.len(), 1);
        assert_eq!(h.passed_with_probes[0].task_id, "b");
        assert_eq!(h.passed_with_probes[0].commands, 3);
        let text = render(&report, false);
        assert!(text.contains("history probes: 2 of 3 rows ran commands that probed the repo's history or fetched its source; 1 row predates the audit\n"), "{text}");
        assert!(
            text.contains("\ntask  epoch  commands  kinds\nb         1         3\n"),
            "{text}"
        );
        let markdown = render(&report, true);
        assert!(markdown.contains("| b | 1 | 3 |  |"), "{markdown}");
        // No probes: one line. No audited row: no section at all.
        rows[1].history_probes = Some(0);
        rows[2].history_probes = Some(0);
        let text = render(&build(&RunFolder::at(Path::new("run")), &rows, None), false);
        assert!(
            text.contains("history probes: none in 3 rows; 1 row predates the audit\n"),
            "{text}"
        );
        for row in &mut rows {
            row.history_probes = None;
        }
        let report = build(&RunFolder::at(Path::new("run")), &rows, None);
        assert!(report.history_probes.is_none());
        assert!(!render(&report, false).contains("history probes"));
        let json = serde_json::to_value(&report).expect("json");
        assert_eq!(json["history_probes"], serde_json::Value::Null);
    }

    /// `--by repo` on a mixed run: two repos, a task without the field,
    /// a row without a trajectory, an error left out of the rate.
    #[test]
    fn by_repo_snapshot() {
        let groups = by::tests::mixed_by_repo();
        insta::assert_snapshot!(render_by(&groups, false));
        insta::assert_snapshot!("by_repo_markdown", render_by(&groups, true));
    }

    #[test]
    fn text_report_snapshot() {
        use Status::*;
        let mut rows = vec![
            row("calc-add", 1, Passed),
            row("calc-add", 2, Failed),
            row("calc-div", 1, Passed),
            row("calc-div", 2, Passed),
            row("text-slug", 1, Failed),
            row("text-slug", 2, Error),
        ];
        rows[1].turns = 7;
        rows[4].exit_reason = ExitReason::MaxTurns;
        rows[5].error = "the model API answered HTTP 500: boom".into();
        rows[0].history_probes = Some(2);
        rows[4].history_probes = Some(1);
        let report = build(&RunFolder::at(Path::new("results/run")), &rows, None);
        insta::assert_snapshot!(render(&report, false));
        insta::assert_snapshot!("report_markdown", render(&report, true));
    }
}
