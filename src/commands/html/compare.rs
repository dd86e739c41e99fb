//! The page of `compare --format html`: the 2x2 table, the McNemar p,
//! both pass rates, the difference with its interval drawn around 0, the
//! per-pair deltas and the tasks that flipped.

use std::path::PathBuf;

use super::{escape, page, percent, rect, svg_open, text};
use crate::commands::compare::{Comparison, format_p};
use crate::sys::words::count;

/// Where `compare --format html` writes when given no `--output`.
pub(crate) fn default_compare_page() -> PathBuf {
    PathBuf::from("compare.html")
}

/// The difference B - A with its interval on a -100..+100 pp axis.
fn difference_chart(c: &Comparison) -> String {
    let (width, left, right, height) = (640.0, 36.0, 36.0, 64.0);
    let x = |d: f64| left + (width - left - right) * (d.clamp(-1.0, 1.0) + 1.0) / 2.0;
    let mut svg = svg_open(
        "chart-difference",
        width,
        height,
        "pass-rate difference B - A with its 95% interval",
    );
    for tick in [-1.0, -0.5, 0.0, 0.5, 1.0] {
        let label = format!("{:+.0} pp", 100.0 * tick).replace("+0 ", "0 ");
        svg.push_str(&format!(
            "<line class=\"grid\" x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"10\" y2=\"40\"/>\n",
            x(tick)
        ));
        svg.push_str(&text("tick", x(tick), 52.0, "middle", &label));
    }
    if let Some(diff) = c.difference {
        let (lo, hi) = c.difference_ci95;
        let title = format!(
            "B - A: {:+.1} pp, 95% CI [{:+.1}, {:+.1}] pp",
            100.0 * diff,
            100.0 * lo,
            100.0 * hi
        );
        svg.push_str(&rect(
            "bar ci",
            x(lo),
            19.0,
            (x(hi) - x(lo)).max(2.0),
            12.0,
            &title,
        ));
        svg.push_str(&format!(
            "<circle class=\"point\" cx=\"{:.1}\" cy=\"25\" r=\"5\"><title>{}</title></circle>\n",
            x(diff),
            escape(&title)
        ));
    }
    svg.push_str(&format!(
        "<line class=\"zero\" x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"6\" y2=\"44\"/>\n",
        x(0.0)
    ));
    svg + "</svg>\n"
}

/// The two pass rates as bars on a 0..100% scale.
fn pass_rates_chart(c: &Comparison) -> String {
    let (label_w, bar_w, row_h) = (40.0, 480.0, 30.0);
    let mut svg = svg_open(
        "chart-pass-rates",
        label_w + bar_w + 70.0,
        2.0 * row_h + 8.0,
        "pass rates of A and B on the paired rows",
    );
    for (i, (name, rate)) in [("A", c.pass_rate_a), ("B", c.pass_rate_b)]
        .into_iter()
        .enumerate()
    {
        let y = 4.0 + row_h * i as f64;
        svg.push_str(&text("", label_w - 10.0, y + row_h / 2.0, "end", name));
        svg.push_str(&format!(
            "<rect class=\"track\" x=\"{label_w}\" y=\"{:.1}\" width=\"{bar_w}\" height=\"{:.1}\"/>\n",
            y + 5.0,
            row_h - 10.0
        ));
        let shown = rate.map_or("n/a".to_owned(), percent);
        if let Some(rate) = rate.filter(|r| *r > 0.0) {
            let class = format!("bar {}", name.to_lowercase());
            let title = format!("{name}: {shown}");
            svg.push_str(&rect(
                &class,
                label_w,
                y + 5.0,
                bar_w * rate,
                row_h - 10.0,
                &title,
            ));
        }
        svg.push_str(&text(
            "",
            label_w + bar_w + 8.0,
            y + row_h / 2.0,
            "start",
            &shown,
        ));
    }
    svg + "</svg>\n"
}

fn flipped_list(id: &str, pairs: &[(String, u32)]) -> String {
    if pairs.is_empty() {
        return format!("<p id=\"{id}\" class=\"meta\">none</p>\n");
    }
    let items: String = pairs
        .iter()
        .map(|(task, epoch)| {
            format!(
                "<li>{} <span class=\"meta\">epoch {epoch}</span></li>",
                escape(task)
            )
        })
        .collect();
    format!("<ul id=\"{id}\">{items}</ul>\n")
}

/// The comparison of two runs.
pub(crate) fn compare_page(c: &Comparison) -> String {
    let mut body = format!(
        "<header><h1>onebash compare</h1>\
         <p class=\"meta\"><span class=\"key a\"></span>A: <code>{}</code> ({})</p>\
         <p class=\"meta\"><span class=\"key b\"></span>B: <code>{}</code> ({})</p></header>\n",
        escape(&c.run_a),
        escape(&c.label_a),
        escape(&c.run_b),
        escape(&c.label_b)
    );
    for warning in &c.warnings {
        body.push_str(&format!(
            "<p class=\"note warning\">warning: {}</p>\n",
            escape(warning)
        ));
    }
    body.push_str(&format!(
        "<p>Paired by (task, epoch): <b>{}</b> pairs with a verdict in both.</p>\n",
        c.pairs
    ));
    if c.only_in_a + c.only_in_b > 0 {
        body.push_str(&format!(
            "<p class=\"note\">The runs differ in (task, epoch) pairs: compared on the intersection; \
             {} only in A, {} only in B.</p>\n",
            c.only_in_a, c.only_in_b
        ));
    }
    if c.pairs_with_error > 0 {
        body.push_str(&format!(
            "<p class=\"note\">{} left out: a row has status error (no verdict).</p>\n",
            count(c.pairs_with_error, "pair", "pairs")
        ));
    }
    body.push_str(&format!(
        "<section><h2>Paired outcomes</h2>\n<table id=\"contingency\"><thead><tr><th></th>\
         <th class=\"num\">B passed</th><th class=\"num\">B failed</th></tr></thead><tbody>\n\
         <tr><th>A passed</th><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n\
         <tr><th>A failed</th><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n\
         </tbody></table>\n<p id=\"mcnemar\">Exact McNemar test on the {}: \
         <b>p = {}</b></p></section>\n",
        c.both_passed,
        c.only_a_passed,
        c.only_b_passed,
        c.neither_passed,
        count(
            c.only_a_passed + c.only_b_passed,
            "discordant pair",
            "discordant pairs"
        ),
        format_p(c.mcnemar_p)
    ));
    body.push_str("<section><h2>Pass rates</h2>\n");
    body.push_str(&pass_rates_chart(c));
    match c.difference {
        Some(diff) => body.push_str(&format!(
            "<p id=\"difference\">Difference B - A: <b>{:+.1} pp</b>, 95% CI [{:+.1}, {:+.1}] pp \
             <span class=\"meta\">({})</span></p>\n",
            100.0 * diff,
            100.0 * c.difference_ci95.0,
            100.0 * c.difference_ci95.1,
            escape(c.ci_method)
        )),
        None => body.push_str(
            "<p id=\"difference\">Difference: n/a (no pair has a verdict in both runs)</p>\n",
        ),
    }
    body.push_str(&difference_chart(c));
    body.push_str("</section>\n");
    if !c.deltas.is_empty() {
        body.push_str(
            "<section><h2>Per pair, B - A</h2>\n<table id=\"deltas\"><thead><tr><th>measure</th>\
             <th class=\"num\">mean</th><th class=\"num\">median</th><th class=\"num\">pairs</th>\
             </tr></thead><tbody>\n",
        );
        for d in &c.deltas {
            body.push_str(&format!(
                "<tr><th>{}</th><td class=\"num\">{:+.3}</td><td class=\"num\">{:+.3}</td><td class=\"num\">{}</td></tr>\n",
                d.measure, d.mean, d.median, d.pairs
            ));
        }
        body.push_str("</tbody></table></section>\n");
    }
    body.push_str(&format!(
        "<section><h2>Passed only in A ({})</h2>\n{}<h2>Passed only in B ({})</h2>\n{}</section>\n",
        c.regressions.len(),
        flipped_list("only-a", &c.regressions),
        c.improvements.len(),
        flipped_list("only-b", &c.improvements)
    ));
    page("onebash compare", &body, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::html::page::tests::row;
    use crate::run_folder::Status;
    use std::path::Path;

    #[test]
    fn compare_page_draws_the_interval_and_lists_flips() {
        let a = vec![
            row("x", Status::Passed, 2, 10),
            row("y", Status::Failed, 2, 10),
        ];
        let b = vec![
            row("x", Status::Failed, 2, 10),
            row("y", Status::Passed, 2, 10),
        ];
        let c = crate::commands::compare::build(Path::new("a"), &a, Path::new("b"), &b);
        let html = compare_page(&c);
        for id in [
            "id=\"chart-difference\"",
            "id=\"chart-pass-rates\"",
            "<table id=\"contingency\">",
            "<table id=\"deltas\">",
            "<ul id=\"only-a\"><li>x ",
            "<ul id=\"only-b\"><li>y ",
        ] {
            assert!(html.contains(id), "{id} missing:\n{html}");
        }
        assert!(html.contains("<rect class=\"bar ci\""));
        assert!(html.contains("p = 1</b>"));
        assert!(!html.contains("warning"));
        let c = crate::commands::compare::build(Path::new("a"), &a, Path::new("b"), &[]);
        assert!(compare_page(&c).contains(
            "<p class=\"note warning\">warning: the runs have no (task, epoch) in common"
        ));
    }
}
