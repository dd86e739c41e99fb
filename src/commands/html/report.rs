//! The run's page of `report --format html` (summary, outcomes by exit
//! reason, turns and tokens per task, totals, pass@k, the sortable task
//! table) and the writing of it with its transcript pages.

use std::collections::BTreeMap;
use std::path::Path;

use super::{
    HtmlError, STATUSES, compact, escape, legend, nice_step, page, percent, rect, status_class,
    svg_open, text, write_file,
};
use crate::commands::report::by::Groups;
use crate::commands::report::{
    HistoryProbes, MEASURES, Measures, Report, history_probes_summary, prompt_cache_line,
};
use crate::commands::show;
use crate::run_folder::trajectory::read_trajectory;
use crate::run_folder::{ResultRow, RunFolder};
use crate::sys::words::{count, plural};

/// The folder, next to the report page, that holds the transcript pages.
const TRANSCRIPTS: &str = "transcripts";

/// Writes the report page at `page` and, in `transcripts/` next to it, one
/// transcript page per row whose trajectory is in `run`. Returns how many
/// transcripts were written.
pub(crate) fn write_report(
    report: &Report,
    rows: &[ResultRow],
    run: &RunFolder,
    page: &Path,
) -> Result<usize, HtmlError> {
    let dir = page
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let page_name = page
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| HtmlError::NoFileName(page.to_owned()))?;
    let transcripts = dir.join(TRANSCRIPTS);
    let mut links = Vec::with_capacity(rows.len());
    for row in rows {
        let trajectory = run.trajectory(&row.task_id, row.epoch);
        if !trajectory.is_file() {
            links.push(None);
            continue;
        }
        let events = read_trajectory(&trajectory)?;
        let name = format!("{}.epoch-{}.html", row.task_id.as_str(), row.epoch);
        let html = super::transcript_page(&show::entries(&events), &format!("../{page_name}"));
        write_file(&transcripts.join(&name), &html)?;
        links.push(Some(format!("{TRANSCRIPTS}/{name}")));
    }
    write_file(page, &report_page(report, rows, &links))?;
    Ok(links.iter().flatten().count())
}

/// Sorts `table#tasks` by a clicked header (again: the other way), and on
/// load by `#sort=KEY` or `#sort=-KEY` (descending) in the URL. The
/// table's `data-sorted` attribute says the current order, for tests and
/// for scripts that read the page.
const SORT_SCRIPT: &str = r#"
(function () {
  var table = document.getElementById('tasks');
  if (!table || !table.tBodies.length) return;
  var body = table.tBodies[0];
  var headers = Array.prototype.slice.call(table.tHead.rows[0].cells);
  Array.prototype.forEach.call(body.rows, function (row, i) { row.dataset.index = i; });
  function sortBy(key, descending) {
    var th = headers.filter(function (h) { return h.dataset.key === key; })[0];
    if (!th) return;
    var column = th.cellIndex, numeric = th.dataset.type === 'num';
    function value(row) {
      var cell = row.cells[column];
      var v = cell.dataset.value !== undefined ? cell.dataset.value : cell.textContent;
      if (!numeric) return v.trim();
      var n = parseFloat(v);
      return isNaN(n) ? -Infinity : n;
    }
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = value(a), y = value(b);
      var d = numeric ? (x < y ? -1 : x > y ? 1 : 0) : x.localeCompare(y, undefined, { numeric: true });
      return (descending ? -d : d) || a.dataset.index - b.dataset.index;
    });
    rows.forEach(function (row) { body.appendChild(row); });
    headers.forEach(function (h) { h.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', descending ? 'descending' : 'ascending');
    table.dataset.sorted = (descending ? '-' : '') + key;
  }
  headers.forEach(function (th) {
    if (!th.dataset.key) return;
    th.tabIndex = 0;
    function toggle() { sortBy(th.dataset.key, th.getAttribute('aria-sort') === 'ascending'); }
    th.addEventListener('click', toggle);
    th.addEventListener('keydown', function (e) {
      if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); toggle(); }
    });
  });
  function fromHash() {
    var m = /(?:^#|&)sort=(-?)([a-z_]+)/.exec(location.hash);
    if (m) sortBy(m[2], m[1] === '-');
  }
  window.addEventListener('hashchange', fromHash);
  fromHash();
})();
"#;

/// One horizontal bar per exit reason, split by status.
fn exit_reason_chart(rows: &[ResultRow]) -> String {
    let mut counts: BTreeMap<&str, [usize; 3]> = BTreeMap::new();
    for row in rows {
        let index = STATUSES.iter().position(|s| *s == row.status).unwrap_or(2);
        counts.entry(row.exit_reason.as_str()).or_default()[index] += 1;
    }
    let mut reasons: Vec<(&str, [usize; 3])> = counts.into_iter().collect();
    let total = |c: &[usize; 3]| c.iter().sum::<usize>();
    reasons.sort_by(|a, b| total(&b.1).cmp(&total(&a.1)).then(a.0.cmp(b.0)));
    let max = reasons
        .iter()
        .map(|r| total(&r.1))
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let (label_w, bar_w, row_h) = (140.0, 440.0, 28.0);
    let height = (row_h * reasons.len() as f64).max(row_h) + 8.0;
    let mut svg = svg_open(
        "chart-exit-reasons",
        label_w + bar_w + 60.0,
        height,
        "rows by exit reason and status",
    );
    if reasons.is_empty() {
        svg.push_str(&text("tick", 8.0, height / 2.0, "start", "no rows"));
    }
    for (i, (reason, count)) in reasons.iter().enumerate() {
        let y = 4.0 + row_h * i as f64;
        svg.push_str(&text("", label_w - 8.0, y + row_h / 2.0, "end", reason));
        let mut x = label_w;
        for (status, n) in STATUSES.iter().zip(count) {
            if *n == 0 {
                continue;
            }
            let w = bar_w * *n as f64 / max;
            let class = format!("bar {}", status_class(*status));
            let title = format!("{reason}: {n} {}", status_class(*status));
            svg.push_str(&rect(&class, x, y + 5.0, w, row_h - 10.0, &title));
            x += w;
        }
        let n = total(count).to_string();
        svg.push_str(&text("", x + 6.0, y + row_h / 2.0, "start", &n));
    }
    svg + "</svg>\n"
}

/// One vertical bar per row: passed rows first, then failed, then errors,
/// each group from the largest value down, so the groups' spreads compare at
/// a glance. Each bar's tooltip names its task.
fn per_task_chart(id: &str, unit: &str, rows: &[ResultRow], get: fn(&ResultRow) -> f64) -> String {
    let mut ordered: Vec<&ResultRow> = rows.iter().collect();
    let rank = |r: &ResultRow| STATUSES.iter().position(|s| *s == r.status).unwrap_or(2);
    ordered.sort_by(|a, b| {
        rank(a)
            .cmp(&rank(b))
            .then(get(b).total_cmp(&get(a)))
            .then(a.task_id.as_str().cmp(b.task_id.as_str()))
            .then(a.epoch.cmp(&b.epoch))
    });
    let (width, left, right, top, plot_h) = (720.0, 56.0, 8.0, 10.0, 180.0);
    let plot_w = width - left - right;
    let max = ordered.iter().map(|r| get(r)).fold(0.0, f64::max);
    let step = nice_step(max, 4.0);
    let top_value = (max / step).ceil().max(1.0) * step;
    let mut svg = svg_open(id, width, top + plot_h + 12.0, &format!("{unit} per task"));
    let mut tick = 0.0;
    while tick <= top_value + step / 2.0 {
        let y = top + plot_h - plot_h * tick / top_value;
        svg.push_str(&format!(
            "<line class=\"grid\" x1=\"{left}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/>\n",
            width - right
        ));
        svg.push_str(&text("tick", left - 6.0, y, "end", &compact(tick)));
        tick += step;
    }
    let slot = plot_w / ordered.len().max(1) as f64;
    let bar_w = if slot >= 3.0 {
        (slot * 0.8).min(48.0)
    } else {
        slot
    };
    for (i, row) in ordered.iter().enumerate() {
        let value = get(row);
        // A zero still gets a sliver, so every row is visible and hoverable.
        let h = (plot_h * value / top_value).max(1.0);
        let x = left + slot * i as f64 + (slot - bar_w) / 2.0;
        let title = format!(
            "{} (epoch {}): {} {unit}, {}",
            row.task_id.as_str(),
            row.epoch,
            compact(value),
            status_class(row.status)
        );
        let class = format!("bar {}", status_class(row.status));
        svg.push_str(&rect(&class, x, top + plot_h - h, bar_w, h, &title));
    }
    let base = top + plot_h;
    svg.push_str(&format!(
        "<line class=\"axis\" x1=\"{left}\" x2=\"{:.1}\" y1=\"{base}\" y2=\"{base}\"/>\n",
        width - right
    ));
    let keys: Vec<(&str, String)> = STATUSES
        .iter()
        .filter_map(|status| {
            let values: Vec<f64> = rows
                .iter()
                .filter(|r| r.status == *status)
                .map(get)
                .collect();
            let mean = values.iter().sum::<f64>() / values.len().max(1) as f64;
            (!values.is_empty()).then(|| {
                let label = format!(
                    "{} ({}, mean {} {unit})",
                    status_class(*status),
                    count(values.len(), "row", "rows"),
                    compact((mean * 10.0).round() / 10.0)
                );
                (status_class(*status), label)
            })
        })
        .collect();
    svg + "</svg>\n" + &legend(&keys)
}

fn measures_table(r: &Report) -> String {
    let mut out = String::from(
        "<table id=\"measures\"><thead><tr><th></th><th class=\"num\">total</th>\
         <th class=\"num\">per row</th><th class=\"num\">per passed row</th></tr></thead><tbody>\n",
    );
    for &measure in MEASURES {
        let name = measure.0;
        let cell = |m: Option<&Measures>| r.measure_cell(measure, m);
        out.push_str(&format!(
            "<tr><th>{name}</th><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n",
            cell(Some(&r.totals)),
            cell(Some(&r.per_row)),
            cell(r.per_passed_row.as_ref())
        ));
    }
    out + "</tbody></table>\n"
}

/// `report --by FIELD`: one row per group, with its counts, pass rate and
/// interval.
fn by_section(g: &Groups) -> String {
    let mut out = format!(
        "<section><h2>By {field}</h2>\n<p class=\"note\">pass rate per group (rows with a \
         verdict), 95% CI (Wilson)</p>\n<table id=\"by\" data-field=\"{field}\"><thead><tr>\
         <th>{field}</th><th class=\"num\">rows</th><th class=\"num\">passed</th>\
         <th class=\"num\">failed</th><th class=\"num\">error</th>\
         <th class=\"num\">pass rate</th><th class=\"num\">95% CI</th></tr></thead><tbody>\n",
        field = escape(&g.field)
    );
    for group in &g.groups {
        let (rate, interval) = group.rate_cells(percent);
        out.push_str(&format!(
            "<tr><th>{}</th><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{rate}</td>\
             <td class=\"num\">{interval}</td></tr>\n",
            escape(&group.value),
            group.rows,
            group.passed,
            group.failed,
            group.error,
        ));
    }
    out + "</tbody></table></section>\n"
}

/// The per-task table; `links[i]` is row i's transcript page, if it has one.
fn tasks_table(rows: &[ResultRow], links: &[Option<String>]) -> String {
    let headers: [(&str, &str, bool); 12] = [
        ("task", "task", false),
        ("epoch", "epoch", true),
        ("status", "status", false),
        ("exit_reason", "exit reason", false),
        ("turns", "turns", true),
        ("tool_calls", "tool calls", true),
        ("tokens", "tokens", true),
        ("cost", "cost USD", true),
        ("agent_seconds", "agent s", true),
        ("wall_seconds", "wall s", true),
        ("history_probes", "probes", true),
        ("error", "error", false),
    ];
    let mut out = String::from("<table id=\"tasks\"><thead><tr>");
    for (key, label, numeric) in headers {
        out.push_str(&format!(
            "<th data-key=\"{key}\" data-type=\"{}\"{}>{label}</th>",
            if numeric { "num" } else { "text" },
            if numeric { " class=\"num\"" } else { "" }
        ));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by(|&a, &b| {
        (rows[a].task_id.as_str(), rows[a].epoch).cmp(&(rows[b].task_id.as_str(), rows[b].epoch))
    });
    for i in order {
        let row = &rows[i];
        let id = escape(row.task_id.as_str());
        let task = match links.get(i).and_then(Option::as_ref) {
            Some(link) => format!("<a href=\"{}\">{id}</a>", escape(link)),
            None => id,
        };
        let num = |value: String, shown: String| {
            format!("<td class=\"num\" data-value=\"{value}\">{shown}</td>")
        };
        let cost = row.cost_usd.map_or(String::new(), |c| c.to_string());
        let cost_shown = row.cost_usd.map_or("-".to_owned(), |c| format!("{c:.4}"));
        let probes = row.history_probes.map_or(String::new(), |n| n.to_string());
        let probes_shown = row.history_probes.map_or("-".to_owned(), |n| n.to_string());
        out.push_str(&format!(
            "<tr class=\"{status}\"><td>{task}</td>{}<td class=\"status\">{status}</td><td>{}</td>{}{}{}{}{}{}{}\
             <td class=\"error-text\">{}</td></tr>\n",
            num(row.epoch.to_string(), row.epoch.to_string()),
            row.exit_reason.as_str(),
            num(row.turns.to_string(), row.turns.to_string()),
            num(row.tool_calls.to_string(), row.tool_calls.to_string()),
            num(row.total_tokens.to_string(), row.total_tokens.to_string()),
            num(cost, cost_shown),
            num(row.agent_seconds.to_string(), format!("{:.1}", row.agent_seconds)),
            num(row.wall_seconds.to_string(), format!("{:.1}", row.wall_seconds)),
            num(probes, probes_shown),
            escape(&row.error),
            status = status_class(row.status),
        ));
    }
    out + "</tbody></table>\n"
}

/// The audit's section: how many rows probed history, and a table of the
/// passed ones, linked to their transcripts.
fn history_probes_section(
    h: &HistoryProbes,
    r: &Report,
    rows: &[ResultRow],
    links: &[Option<String>],
) -> String {
    let class = if h.rows_with_probes == 0 {
        "note"
    } else {
        "problem-error"
    };
    let mut out = format!(
        "<section id=\"history-probes\"><h2>History probes</h2>\n<p class=\"{class}\">{}</p>\n",
        escape(&history_probes_summary(h, r.rows))
    );
    if h.rows_with_probes > 0 && h.passed_with_probes.is_empty() {
        out.push_str("<p class=\"note\">passed with probes: none</p>\n");
    }
    if !h.passed_with_probes.is_empty() {
        out.push_str(
            "<p class=\"note\">Passed with probes: the pass may owe something to what the \
             commands found; each task links to its transcript, where the commands are marked.</p>\n\
             <table id=\"passed-with-probes\"><thead><tr><th>task</th><th class=\"num\">epoch</th>\
             <th class=\"num\">commands</th><th>kinds</th></tr></thead><tbody>\n",
        );
        for probed in &h.passed_with_probes {
            let id = escape(&probed.task_id);
            let link = rows
                .iter()
                .position(|row| row.task_id.as_str() == probed.task_id && row.epoch == probed.epoch)
                .and_then(|i| links.get(i).cloned().flatten());
            let task = match link {
                Some(link) => format!("<a href=\"{}\">{id}</a>", escape(&link)),
                None => id,
            };
            out.push_str(&format!(
                "<tr><td>{task}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>\n",
                probed.epoch,
                probed.commands,
                escape(&probed.kinds.join(", "))
            ));
        }
        out.push_str("</tbody></table>\n");
    }
    out + "</section>\n"
}

/// The run's page: summary, charts, measures, pass@k, the task table.
pub(crate) fn report_page(r: &Report, rows: &[ResultRow], links: &[Option<String>]) -> String {
    let mut body = format!(
        "<header><h1>onebash report</h1><p class=\"meta\">run <code>{}</code> · model <b>{}</b> · prompt <b>{}</b></p></header>\n",
        escape(&r.run),
        escape(r.model.as_deref().unwrap_or("?")),
        escape(r.prompt.as_deref().unwrap_or("?"))
    );
    if let Some(state) = r.state_line() {
        body.push_str(&format!(
            "<p class=\"note\" id=\"state\">{}</p>\n",
            escape(&state)
        ));
    }
    body.push_str(&summary_cards(r));
    if r.error > 0 {
        body.push_str(&format!(
            "<p class=\"note\">{} with status error {} no verdict and {} left out of the \
             pass rate; redo {} with <code>onebash run ... --resume --retry-errors</code>.</p>\n",
            count(r.error, "row", "rows"),
            plural(r.error, "has", "have"),
            plural(r.error, "is", "are"),
            plural(r.error, "it", "them")
        ));
    }
    if let Some(note) = r.bare_reset_line() {
        body.push_str(&format!(
            "<p class=\"note\" id=\"bare-reset\">{}</p>\n",
            escape(&note)
        ));
    }
    if let Some(h) = &r.history_probes {
        body.push_str(&history_probes_section(h, r, rows, links));
    }
    if let Some(cache) = &r.prompt_cache {
        body.push_str(&format!(
            "<section id=\"prompt-cache\"><h2>Prompt cache</h2>\n<p>{}</p></section>\n",
            escape(&prompt_cache_line(cache))
        ));
    }
    if let Some(groups) = &r.by {
        body.push_str(&by_section(groups));
    }
    body.push_str(&chart_sections(rows));
    body.push_str(&totals_section(r));
    if !r.pass_at_k.is_empty() {
        body.push_str(&pass_at_k_section(r));
    }
    body.push_str(
        "<section><h2>Tasks</h2><p class=\"hint\">Click a column to sort (again to reverse); \
         a task links to its transcript.</p>\n",
    );
    body.push_str("<div class=\"wide\">\n");
    body.push_str(&tasks_table(rows, links));
    body.push_str("</div></section>\n");
    page(
        &format!("onebash report: {}", r.run),
        &body,
        Some(SORT_SCRIPT),
    )
}

/// The cards at the top: pass rate with its interval, the three statuses,
/// rows, tokens.
fn summary_cards(r: &Report) -> String {
    let pass_rate = match r.pass_rate {
        Some(rate) => format!(
            "<div class=\"big\">{}</div><div>pass rate ({}/{} rows with a verdict)</div>\
             <div class=\"meta\">95% CI [{}, {}] (Wilson)</div>",
            percent(rate),
            r.passed,
            r.passed + r.failed,
            percent(r.pass_rate_ci95.0),
            percent(r.pass_rate_ci95.1)
        ),
        None => {
            "<div class=\"big\">n/a</div><div>pass rate (no row has a verdict)</div>".to_owned()
        }
    };
    format!(
        "<section class=\"cards\"><div class=\"card\" id=\"pass-rate\">{pass_rate}</div>\
         <div class=\"card\"><div class=\"big\"><span class=\"passed status\">{}</span> / \
         <span class=\"failed status\">{}</span> / <span class=\"error status\">{}</span></div>\
         <div>passed / failed / error</div></div>\
         <div class=\"card\"><div class=\"big\">{}</div><div>rows ({} × {})</div></div>\
         <div class=\"card\"><div class=\"big\">{}</div><div>tokens ({} per row)</div></div></section>\n",
        r.passed,
        r.failed,
        r.error,
        r.rows,
        count(r.tasks, "task", "tasks"),
        count(r.epochs as usize, "epoch", "epochs"),
        compact(r.totals.total_tokens),
        compact(r.per_row.total_tokens.round()),
    )
}

/// The three chart sections: outcomes by exit reason, turns and tokens per
/// task.
fn chart_sections(rows: &[ResultRow]) -> String {
    let status_keys: Vec<(&str, String)> = STATUSES
        .iter()
        .map(|s| (status_class(*s), status_class(*s).to_owned()))
        .collect();
    let mut out = String::from("<section><h2>Outcomes by exit reason</h2>\n");
    out.push_str(&legend(&status_keys));
    out.push_str(&exit_reason_chart(rows));
    out.push_str("</section>\n<section><h2>Turns per task</h2>\n");
    out.push_str(&per_task_chart("chart-turns", "turns", rows, |r| {
        f64::from(r.turns)
    }));
    out.push_str("</section>\n<section><h2>Tokens per task</h2>\n");
    out.push_str(&per_task_chart("chart-tokens", "tokens", rows, |r| {
        r.total_tokens as f64
    }));
    out + "</section>\n"
}

/// The measures table, with a note when some rows have no cost.
fn totals_section(r: &Report) -> String {
    let mut out = String::from("<section><h2>Totals and means</h2>\n");
    out.push_str(&measures_table(r));
    if r.rows_without_cost > 0 {
        out.push_str(&format!(
            "<p class=\"note\">cost leaves out {} whose price is unknown</p>\n",
            count(r.rows_without_cost, "row", "rows")
        ));
    }
    out + "</section>\n"
}

/// pass@k and pass^k for each k the epochs allow.
fn pass_at_k_section(r: &Report) -> String {
    let mut out = String::from(
        "<section><h2>pass@k</h2><p class=\"note\">unbiased estimator (Chen et al. 2021) and \
         pass^k (all k pass), mean over tasks</p>\n<table id=\"pass-at-k\"><thead><tr>\
         <th class=\"num\">k</th><th class=\"num\">pass@k</th><th class=\"num\">pass^k</th>\
         <th class=\"num\">tasks</th></tr></thead><tbody>\n",
    );
    for p in &r.pass_at_k {
        out.push_str(&format!(
            "<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n",
            p.k,
            percent(p.pass_at_k),
            percent(p.pass_hat_k),
            p.tasks
        ));
    }
    out + "</tbody></table></section>\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::html::page::tests::row;
    use crate::run_folder::Status;

    #[test]
    fn report_page_has_charts_one_row_per_result_and_escapes_text() {
        let rows = vec![
            row("a", Status::Passed, 3, 1200),
            row("b", Status::Failed, 10, 9000),
            row("c", Status::Error, 1, 0),
        ];
        let report = crate::commands::report::build(&RunFolder::at(Path::new("run")), &rows, None);
        let links = vec![Some("transcripts/a.epoch-1.html".to_owned()), None, None];
        let html = report_page(&report, &rows, &links);
        for id in [
            "id=\"chart-exit-reasons\"",
            "id=\"chart-turns\"",
            "id=\"chart-tokens\"",
            "<table id=\"tasks\">",
        ] {
            assert!(html.contains(id), "{id} missing");
        }
        let tbody = &html[html.find("<tbody>\n<tr class").expect("task rows")..];
        let tbody = &tbody[..tbody.find("</tbody>").expect("end")];
        assert_eq!(tbody.matches("<tr ").count(), 3);
        assert!(html.contains("<a href=\"transcripts/a.epoch-1.html\">a</a>"));
        assert!(html.contains("model <b>m&lt;b&gt;</b>"));
        assert!(html.contains("HTTP 500 from https://api.example/v1 &lt;html&gt;"));
        // Two statuses in one exit reason each, three bars per per-task chart.
        assert_eq!(html.matches("<rect class=\"bar ").count(), 3 + 3 + 3);
        // One row of a status is one (the legend said "1 rows").
        assert!(html.contains("passed (1 row, mean 3 turns)"), "{html}");
        assert!(!html.contains("<script src") && !html.contains("<link"));
        assert!(html.contains("<section id=\"history-probes\"><h2>History probes</h2>\n<p class=\"note\">history probes: none in 3 rows</p>"), "{html}");
        assert!(!html.contains("passed-with-probes"));
        // A finished run says nothing of its state; an unfinished one does.
        assert!(!html.contains("id=\"state\""));
        let mut report = report;
        report.state = Some(crate::commands::report::RunState::Running);
        let html = report_page(&report, &rows, &links);
        assert!(html.contains("<p class=\"note\" id=\"state\">state: running: the rows below are those written so far</p>"), "{html}");
        // The rows graded after the recipe's bare reset: one note, none
        // when there are none (above).
        assert!(!html.contains("id=\"bare-reset\""));
        report.bare_reset_rows = 1;
        let html = report_page(&report, &rows, &links);
        assert!(html.contains("<p class=\"note\" id=\"bare-reset\">1 row graded after swebench 4.1.0&#39;s bare reset (test patch adds files only): see docs/results.md#grading-rules</p>"), "{html}");
    }

    #[test]
    fn what_the_prompt_cache_saved_has_a_section_when_there_is_a_cache() {
        let rows = vec![row("a", Status::Passed, 3, 1200)];
        let mut report =
            crate::commands::report::build(&RunFolder::at(Path::new("run")), &rows, None);
        assert!(!report_page(&report, &rows, &[None]).contains("prompt-cache"));
        report.prompt_cache = Some(crate::commands::report::PromptCache {
            cached_input_tokens: 9000,
            cache_write_tokens: 1000,
            cost_usd: 0.024525,
            cost_without_cache_usd: 0.045,
            saved_usd: 0.020475,
        });
        let html = report_page(&report, &rows, &[None]);
        let section = &html[html.find("<section id=\"prompt-cache\">").expect("section")..];
        let section = &section[..section.find("</section>").expect("end")];
        assert!(
            section.contains("9000 input tokens read, 1000 written")
                && section.contains("saved 0.020475 USD"),
            "{section}"
        );
    }

    #[test]
    fn passed_rows_with_probes_are_listed_with_links() {
        let mut rows = vec![
            row("a", Status::Passed, 3, 1200),
            row("b", Status::Passed, 3, 1200),
            row("c", Status::Failed, 3, 1200),
        ];
        rows[1].history_probes = Some(2);
        rows[2].history_probes = Some(1);
        let report = crate::commands::report::build(&RunFolder::at(Path::new("run")), &rows, None);
        let links = vec![None, Some("transcripts/b.epoch-1.html".to_owned()), None];
        let html = report_page(&report, &rows, &links);
        assert!(
            html.contains("<p class=\"problem-error\">history probes: 2 of 3 rows ran commands"),
            "{html}"
        );
        let table = &html[html
            .find("<table id=\"passed-with-probes\">")
            .expect("table")..];
        let table = &table[..table.find("</table>").expect("end")];
        assert_eq!(table.matches("<tr>").count(), 2);
        assert!(table.contains("<a href=\"transcripts/b.epoch-1.html\">b</a></td><td class=\"num\">1</td><td class=\"num\">2</td>"), "{table}");
        // The tasks table has the column too.
        assert!(html.contains(
            "<th data-key=\"history_probes\" data-type=\"num\" class=\"num\">probes</th>"
        ));
        assert!(html.contains("<td class=\"num\" data-value=\"2\">2</td>"));
    }
}
