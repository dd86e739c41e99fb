//! `report --format html` and `compare --format html` over two runs of the
//! demo tasks (the oracle, and a scripted model that fails most of them):
//! the pages load nothing from anywhere, escape what the run recorded,
//! have one table row per result row and links that resolve; and, where
//! Chromium is installed (CI installs it), a real headless browser draws
//! the charts and sorts the table by the URL's `#sort=`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use regex::Regex;
use serde_json::Value;

use crate::support::harness::{
    Fixture, RunOutput, onebash_ok_in, path_arg, scripted_agent, tool_present,
};

/// What the scripted model prints in one task: markup and URLs that must
/// reach the page as text, never as markup or a reference.
const HOSTILE: &str =
    "<script>alert(1)</script> & see https://evil.example/x <img src=https://evil.example/y.png>";

struct Runs {
    fixture: Fixture,
    oracle: RunOutput,
    scripted: RunOutput,
}

/// The demo task set run twice: by the oracle (every task passes), and by a
/// scripted model that applies the gold patch of two tasks, prints
/// [`HOSTILE`] and long output in a third, lists files in a fourth and
/// gives up at once on the rest. `scripted_agent` knows a task by
/// "Problem of task ID." in its prompt, so the scripted run reads a copy
/// of the task file whose problem statements start with that (and whose
/// repo paths are absolute, as the copy lives elsewhere).
fn two_runs() -> Runs {
    let fixture = Fixture::new();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/demo/tasks.jsonl");
    let oracle = fixture.run_into(
        &fixture.path("oracle"),
        &demo,
        &["--model", "oracle", "-j", "4"],
        &[],
    );
    assert_eq!(oracle.code, 0, "stderr:\n{}", oracle.stderr);

    let text = std::fs::read_to_string(&demo).expect("demo tasks");
    let mut tasks: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("task"))
        .collect();
    let demo_dir = demo.parent().expect("tasks folder");
    for task in &mut tasks {
        let id = task["id"].as_str().expect("id").to_owned();
        let repo = demo_dir.join(task["repo"].as_str().expect("repo"));
        task["repo"] = Value::from(repo.display().to_string());
        let problem = task["problem_statement"].as_str().expect("problem");
        task["problem_statement"] = Value::from(format!("Problem of task {id}.\n\n{problem}"));
    }
    let apply_gold = |id: &str| -> String {
        let task = tasks.iter().find(|t| t["id"] == id).expect("demo task");
        let gold = task["gold_patch"].as_str().expect("gold_patch");
        format!("git apply <<'GOLD_EOF'\n{gold}GOLD_EOF")
    };
    let divide = [
        "cat calc/ops.py".to_owned(),
        apply_gold("calc-divide-by-zero"),
    ];
    let clamp = [apply_gold("calc-clamp-upper-bound")];
    let hostile = format!("echo '{HOSTILE}'");
    let power = [hostile.as_str(), "seq 1 60", "exit 3"];
    let plan: Vec<(&str, Vec<&str>)> = vec![
        (
            "calc-divide-by-zero",
            divide.iter().map(String::as_str).collect(),
        ),
        (
            "calc-clamp-upper-bound",
            clamp.iter().map(String::as_str).collect(),
        ),
        ("calc-power-negative-exponent", power.to_vec()),
        ("calc-mean-float", vec!["ls"]),
    ];
    let plan: Vec<(&str, &[&str])> = plan.iter().map(|(id, c)| (*id, c.as_slice())).collect();
    let server = scripted_agent(&plan);
    let copy = fixture.tasks(&tasks);
    let scripted = fixture.run_scripted_into("scripted", &copy, &server, &["-j", "4"]);
    assert_eq!(scripted.code, 0, "stderr:\n{}", scripted.stderr);
    for row in scripted.rows() {
        let passes = ["calc-divide-by-zero", "calc-clamp-upper-bound"].contains(&&*row["task_id"]);
        assert_eq!(row["passed"], passes.to_string(), "{row:?}");
    }
    Runs {
        fixture,
        oracle,
        scripted,
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// The page references nothing outside itself: no tag names a URL or an
/// absolute path (only relative links between the pages), and the only
/// URLs (`http://`, `https://`, any `://`) are in text, where they were
/// escaped.
fn assert_self_contained(html: &str, what: &str) {
    let tag = Regex::new(r"<[a-zA-Z][^<>]*>").expect("regex");
    for m in tag.find_iter(html) {
        let t = m.as_str().to_ascii_lowercase();
        assert!(
            !t.contains("://") && !t.contains(" src=") && !t.contains("url("),
            "{what}: tag references something: {t}"
        );
        assert!(
            !t.starts_with("<link") && !t.starts_with("<img") && !t.starts_with("<iframe"),
            "{what}: {t}"
        );
        if let Some(href) = t.split("href=\"").nth(1) {
            assert!(
                !href.starts_with('/') && !href.contains(':'),
                "{what}: a link that is not relative: {t}"
            );
        }
    }
    for (at, _) in html.match_indices("://") {
        let before = &html[..at];
        assert!(
            before.rfind('>') > before.rfind('<'),
            "{what}: a URL outside text at byte {at}: {}",
            &html[before.len().saturating_sub(80)..(at + 40).min(html.len())]
        );
    }
    for block in ["<style>", "<script>"] {
        for (at, _) in html.match_indices(block) {
            let rest = &html[at..];
            let end = rest.find("</").expect("closed block");
            assert!(!rest[..end].contains("://"), "{what}: URL in {block}");
        }
    }
    assert!(!html.contains("@import"), "{what}");
}

/// Every `href` of the page at `page` names a file that exists.
fn assert_links_resolve(page: &Path, html: &str) -> usize {
    let href = Regex::new(r##"href="([^"#]*)"##).expect("regex");
    let dir = page.parent().expect("page folder");
    let mut count = 0;
    for link in href.captures_iter(html) {
        let target = dir.join(&link[1]);
        assert!(
            target.is_file(),
            "{}: broken link {}",
            page.display(),
            &link[1]
        );
        count += 1;
    }
    count
}

/// The `<tr>`s of `table#tasks`' body, as written or as Chromium dumped them.
fn task_rows(html: &str) -> Vec<&str> {
    let table = &html[html.find("<table id=\"tasks\"").expect("table#tasks")..];
    let body = &table[table.find("<tbody>").expect("tbody")..table.find("</tbody>").expect("end")];
    body.split("<tr").skip(1).collect()
}

/// The `data-value`s of one column of `table#tasks`, in row order.
fn column(html: &str, key: &str) -> Vec<f64> {
    let th = Regex::new(r#"<th data-key="([a-z_]+)""#).expect("regex");
    let index = th
        .captures_iter(html)
        .position(|c| &c[1] == key)
        .unwrap_or_else(|| panic!("no column {key}"));
    let td = Regex::new(r"<td([^>]*)>").expect("regex");
    let value = Regex::new(r#"data-value="([^"]*)""#).expect("regex");
    task_rows(html)
        .iter()
        .map(|row| {
            let cell = td.captures_iter(row).nth(index).expect("cell");
            let attrs = cell.get(1).expect("attributes").as_str();
            value.captures(attrs).expect("data-value")[1]
                .parse()
                .expect("number")
        })
        .collect()
}

#[test]
fn report_and_compare_write_self_contained_pages_with_working_links() {
    let runs = two_runs();
    for run in [&runs.oracle, &runs.scripted] {
        let stdout = onebash_ok_in(
            runs.fixture.dir.path(),
            &["report", path_arg(&run.out), "--format", "html"],
        );
        let page = run.out.join("report.html");
        assert_eq!(stdout, format!("{}\n", page.display()));
        let html = read(&page);
        assert_self_contained(&html, "report.html");
        for id in [
            "<svg class=\"chart\" id=\"chart-exit-reasons\"",
            "<svg class=\"chart\" id=\"chart-turns\"",
            "<svg class=\"chart\" id=\"chart-tokens\"",
            "<table id=\"tasks\">",
            "<script>",
        ] {
            assert!(html.contains(id), "{id} missing from report.html");
        }
        let rows = run.rows();
        assert_eq!(task_rows(&html).len(), rows.len());
        // Every row links to its transcript, and every link resolves.
        assert_eq!(assert_links_resolve(&page, &html), rows.len());
        for row in &rows {
            let transcript = run
                .out
                .join("transcripts")
                .join(format!("{}.epoch-{}.html", row["task_id"], row["epoch"]));
            let text = read(&transcript);
            assert_self_contained(&text, &row["task_id"]);
            assert_eq!(assert_links_resolve(&transcript, &text), 1, "the way back");
            let verdict = if row["passed"] == "true" {
                "PASSED"
            } else {
                "FAILED"
            };
            assert!(text.contains(verdict), "{}: no {verdict}", row["task_id"]);
        }
    }

    // What the scripted model printed is shown as text, cut where long.
    let transcript = read(
        &runs
            .scripted
            .out
            .join("transcripts/calc-power-negative-exponent.epoch-1.html"),
    );
    assert!(!transcript.contains("<script>alert"), "unescaped output");
    assert!(
        transcript
            .contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; see https://evil.example/x")
    );
    assert!(
        transcript.contains("[... 36 lines cut ...]"),
        "seq 1 60 is cut"
    );
    assert!(
        transcript.contains("[exit 3, "),
        "the failed command's exit code"
    );
    assert!(transcript.contains("10 + 5 tokens"), "tokens per turn");

    // compare: compare.html in the current folder by default.
    let stdout = onebash_ok_in(
        runs.fixture.dir.path(),
        &[
            "compare",
            path_arg(&runs.oracle.out),
            path_arg(&runs.scripted.out),
            "--format",
            "html",
        ],
    );
    assert_eq!(stdout, "compare.html\n");
    let html = read(&runs.fixture.path("compare.html"));
    assert_self_contained(&html, "compare.html");
    for part in [
        "<svg class=\"chart\" id=\"chart-difference\"",
        "<svg class=\"chart\" id=\"chart-pass-rates\"",
        "<table id=\"contingency\">",
        "<table id=\"deltas\">",
        // 7 pairs, 2 both passed, 5 passed only in A: p = 2 * 0.5^5.
        "<tr><th>A passed</th><td class=\"num\">2</td><td class=\"num\">5</td></tr>",
        "<b>p = 0.0625</b>",
        "Passed only in A (5)",
        "<p id=\"only-b\" class=\"meta\">none</p>",
    ] {
        assert!(html.contains(part), "{part} missing from compare.html");
    }

    // --output puts the page (and its transcripts) elsewhere; text formats too.
    let report_into = |format: &str, output_flag: &str, page: &Path| {
        onebash_ok_in(
            runs.fixture.dir.path(),
            &[
                "report",
                path_arg(&runs.scripted.out),
                "--format",
                format,
                output_flag,
                path_arg(page),
            ],
        )
    };
    let elsewhere = runs.fixture.path("pages/run.html");
    report_into("html", "-o", &elsewhere);
    let html = read(&elsewhere);
    assert_eq!(assert_links_resolve(&elsewhere, &html), 7);
    assert!(runs.fixture.path("pages/transcripts").is_dir());
    let markdown = runs.fixture.path("pages/report.md");
    let stdout = report_into("markdown", "--output", &markdown);
    assert_eq!(stdout, format!("{}\n", markdown.display()));
    assert!(read(&markdown).starts_with("# onebash report"));
}

/// `chromium` or `chromium-browser` on PATH.
fn find_chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser"].iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

/// Runs headless Chromium on `url` with `mode` (`--dump-dom` or
/// `--screenshot=PNG`) and returns its stdout. Every network feature that
/// would phone home is off, and a profile of its own keeps runs apart.
fn chromium(browser: &Path, profile: &Path, mode: &str, url: &str) -> String {
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--window-size=1200,1800",
            "--virtual-time-budget=2000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(mode)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    // Read stdout on a thread so a large DOM cannot fill the pipe while we wait.
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut text).map(|_| text)
    });
    // A hang guard: five browsers at once on a loaded machine may take a
    // while, a hung one forever.
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait chromium") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium {mode} {url} took over 300 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = reader.join().expect("reader").expect("chromium stdout");
    if !status.success() {
        let mut stderr = String::new();
        if let Some(mut pipe) = child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
        }
        panic!("chromium {mode} {url} failed ({status}):\n{stderr}");
    }
    text
}

/// The bars of one chart in a dumped DOM whose width and height are both
/// positive, i.e. that the browser has something to draw.
fn drawn_bars(dom: &str, chart: &str) -> usize {
    let start = dom
        .find(&format!("id=\"{chart}\""))
        .unwrap_or_else(|| panic!("{chart} missing from the DOM"));
    let svg = &dom[start..start + dom[start..].find("</svg>").expect("svg end")];
    let bar = Regex::new(r#"<rect class="bar[^"]*"[^>]*? width="([0-9.]+)" height="([0-9.]+)""#)
        .expect("regex");
    bar.captures_iter(svg)
        .filter(|c| {
            c[1].parse::<f64>().expect("width") > 0.0 && c[2].parse::<f64>().expect("height") > 0.0
        })
        .count()
}

#[test]
fn html_pages_render_in_headless_chromium() {
    let found = find_chromium();
    if !tool_present(
        found.is_some(),
        "chromium",
        "no chromium or chromium-browser on PATH",
    ) {
        return;
    }
    let browser = found.expect("found");
    let runs = two_runs();
    let dir = runs.fixture.dir.path();
    onebash_ok_in(
        dir,
        &["report", path_arg(&runs.scripted.out), "--format", "html"],
    );
    let compare = runs.fixture.path("compare.html");
    onebash_ok_in(
        dir,
        &[
            "compare",
            path_arg(&runs.oracle.out),
            path_arg(&runs.scripted.out),
            "--format",
            "html",
            "-o",
            path_arg(&compare),
        ],
    );
    let report = format!("file://{}", runs.scripted.out.join("report.html").display());
    let compare_url = format!("file://{}", compare.display());
    let report_png = runs.fixture.path("report.png");
    let compare_png = runs.fixture.path("compare.png");
    let jobs = [
        ("--dump-dom".to_owned(), format!("{report}#sort=turns")),
        ("--dump-dom".to_owned(), format!("{report}#sort=-turns")),
        ("--dump-dom".to_owned(), compare_url.clone()),
        (
            format!("--screenshot={}", report_png.display()),
            report.clone(),
        ),
        (
            format!("--screenshot={}", compare_png.display()),
            compare_url,
        ),
    ];
    // The browsers run at once: each takes a second or two, mostly waiting.
    let started = Instant::now();
    let outputs: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = jobs
            .iter()
            .enumerate()
            .map(|(i, (mode, url))| {
                let profile = runs.fixture.path(&format!("profile-{i}"));
                let browser = browser.as_path();
                scope.spawn(move || chromium(browser, &profile, mode, url))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("chromium thread"))
            .collect()
    });
    eprintln!(
        "chromium: {} pages in {:.1} s",
        jobs.len(),
        started.elapsed().as_secs_f64()
    );

    let rows = runs.scripted.rows().len();
    let (ascending, descending, compare_dom) = (&outputs[0], &outputs[1], &outputs[2]);
    for dom in [ascending, descending] {
        assert!(
            drawn_bars(dom, "chart-exit-reasons") >= 2,
            "passed and failed segments"
        );
        assert_eq!(drawn_bars(dom, "chart-turns"), rows);
        assert_eq!(drawn_bars(dom, "chart-tokens"), rows);
        assert_eq!(task_rows(dom).len(), rows);
    }
    // The inline script ran and sorted by the URL's #sort=, both ways.
    assert!(
        ascending.contains("<table id=\"tasks\" data-sorted=\"turns\">"),
        "{ascending}"
    );
    assert!(descending.contains("<table id=\"tasks\" data-sorted=\"-turns\">"));
    let up = column(ascending, "turns");
    let down = column(descending, "turns");
    assert!(up.windows(2).all(|w| w[0] <= w[1]), "not ascending: {up:?}");
    assert!(
        down.windows(2).all(|w| w[0] >= w[1]),
        "not descending: {down:?}"
    );
    assert_ne!(
        up.first(),
        up.last(),
        "the runs' turns differ, so order shows"
    );
    assert!(ascending.contains("aria-sort=\"ascending\""));

    assert_eq!(drawn_bars(compare_dom, "chart-pass-rates"), 2);
    assert_eq!(
        drawn_bars(compare_dom, "chart-difference"),
        1,
        "the interval"
    );
    assert!(compare_dom.contains("<circle class=\"point\""));
    assert!(compare_dom.contains("<table id=\"contingency\">"));

    for png in [&report_png, &compare_png] {
        let bytes = std::fs::read(png).unwrap_or_else(|err| panic!("{}: {err}", png.display()));
        assert!(
            bytes.len() > 10_000,
            "{}: {} bytes",
            png.display(),
            bytes.len()
        );
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"));
    }
    if let Some(keep) = std::env::var_os("ONEBASH_KEEP_SCREENSHOTS") {
        let keep = PathBuf::from(keep);
        std::fs::create_dir_all(&keep).expect("screenshot folder");
        std::fs::copy(&report_png, keep.join("report.png")).expect("copy");
        std::fs::copy(&compare_png, keep.join("compare.png")).expect("copy");
    }
}
