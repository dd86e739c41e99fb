//! `report --by FIELD` on a mixed run made by the binary: tasks of two
//! repos, with and without a `difficulty`, passing, failing and ending in
//! error, grouped in text (snapshot), JSON and HTML; a field no task has
//! exits 2 naming the fields there are.

use serde_json::{Value, json};

use crate::support::harness::{Fixture, onebash, task};

fn mixed_run(fixture: &Fixture) -> std::path::PathBuf {
    let (calc, calc_sha) = fixture.repo("calc", &[("calc.py", "x = 1\n")]);
    let (text, text_sha) = fixture.repo("text", &[("text.py", "y = 2\n")]);
    let relative = |mut task: Value, repo: &str| {
        // Relative to the task file: the group's name is the same in
        // every test's temporary folder.
        task["repo"] = json!(repo);
        task
    };
    let tasks = fixture.tasks(&[
        relative(
            task(
                "calc-ok",
                &calc,
                &calc_sha,
                "true",
                json!({"difficulty": "easy"}),
            ),
            "calc",
        ),
        relative(
            task(
                "calc-bad",
                &calc,
                &calc_sha,
                "false",
                json!({"difficulty": "hard"}),
            ),
            "calc",
        ),
        relative(
            task(
                "calc-broken",
                &calc,
                &calc_sha,
                "true",
                json!({"setup_command": "exit 3", "difficulty": "hard"}),
            ),
            "calc",
        ),
        relative(
            task(
                "text-ok",
                &text,
                &text_sha,
                "true",
                json!({"difficulty": "easy"}),
            ),
            "text",
        ),
        relative(
            task("text-ok-2", &text, &text_sha, "true", json!({})),
            "text",
        ),
        relative(
            task("text-bad", &text, &text_sha, "false", json!({})),
            "text",
        ),
    ]);
    let run = fixture.run_noop(&tasks, &[]);
    assert_eq!(run.code, 1, "one setup error; stderr:\n{}", run.stderr);
    run.out
}

fn report(args: &[&str]) -> (i32, String, String) {
    let out = onebash()
        .arg("report")
        .args(args)
        .output()
        .expect("run onebash report");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn report_by_repo_groups_a_mixed_run_in_text_json_and_html() {
    let fixture = Fixture::new();
    let out = mixed_run(&fixture);
    let run = out.to_str().expect("UTF-8");
    let (code, text, stderr) = report(&[run, "--by", "repo"]);
    assert_eq!(code, 0, "{stderr}");
    let section = &text[text.find("by repo:").expect("a by section")..];
    insta::assert_snapshot!(section);

    let (code, text, _) = report(&[run, "--by", "difficulty", "--format", "json"]);
    assert_eq!(code, 0);
    let json: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(json["by"]["field"], "difficulty");
    let groups: Vec<(String, u64, u64, u64)> = json["by"]["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| {
            (
                g["value"].as_str().expect("value").to_owned(),
                g["passed"].as_u64().expect("passed"),
                g["failed"].as_u64().expect("failed"),
                g["error"].as_u64().expect("error"),
            )
        })
        .collect();
    assert_eq!(
        groups,
        [
            ("(none)".to_owned(), 1, 1, 0),
            ("easy".to_owned(), 2, 0, 0),
            ("hard".to_owned(), 0, 1, 1),
        ]
    );
    // Without --by, the JSON has no `by`.
    let (_, text, _) = report(&[run, "--format", "json"]);
    assert!(
        serde_json::from_str::<Value>(&text)
            .expect("JSON")
            .get("by")
            .is_none()
    );

    let page = fixture.path("report.html");
    let (code, _, stderr) = report(&[
        run,
        "--by",
        "repo",
        "--format",
        "html",
        "-o",
        page.to_str().expect("UTF-8"),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let html = std::fs::read_to_string(&page).expect("the page");
    assert!(html.contains("<h2>By repo</h2>"), "{html}");
    assert!(html.contains("<table id=\"by\" data-field=\"repo\">"));
    assert!(html.contains(
        "<tr><th>calc</th><td class=\"num\">3</td><td class=\"num\">1</td><td class=\"num\">1</td><td class=\"num\">1</td><td class=\"num\">50.0%</td>"
    ), "{html}");
}

#[test]
fn a_field_no_task_has_exits_2_naming_the_fields() {
    let fixture = Fixture::new();
    let out = mixed_run(&fixture);
    let (code, stdout, stderr) = report(&[out.to_str().expect("UTF-8"), "--by", "language"]);
    assert_eq!(code, 2);
    assert!(stdout.is_empty());
    assert!(
        stderr.contains("error: failed to group by `language`: no task of the run has that field\nhint: its tasks have `base_commit`, `difficulty`, `id`, "),
        "{stderr}"
    );
}

/// Users keep their own fields under `metadata` (docs/tasks.md): `--by`
/// finds them there, by name or by a dotted path, in every format; the
/// hint of a field no task has names the metadata keys too.
#[test]
fn report_by_a_metadata_field_groups_in_every_format() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("calc", &[("calc.py", "x = 1\n")]);
    let line = |id: &str, test: &str, difficulty: &str, source: &str| {
        task(
            id,
            &repo,
            &sha,
            test,
            json!({"metadata": {"difficulty": difficulty, "source": {"name": source}}}),
        )
    };
    let tasks = fixture.tasks(&[
        line("easy-ok", "true", "easy", "swe"),
        line("easy-bad", "false", "easy", "gym"),
        line("hard-ok", "true", "hard", "swe"),
    ]);
    let run = fixture.run_noop(&tasks, &[]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let run = run.out.to_str().expect("UTF-8").to_owned();

    let (code, text, stderr) = report(&[&run, "--by", "difficulty"]);
    assert_eq!(code, 0, "{stderr}");
    let section = &text[text.find("by difficulty:").expect("a by section")..];
    assert!(section.contains("easy"), "{section}");
    assert!(section.contains("hard"), "{section}");
    assert!(!section.contains("(none)"), "{section}");

    let (code, markdown, stderr) = report(&[&run, "--by", "difficulty", "--format", "markdown"]);
    assert_eq!(code, 0, "{stderr}");
    let rows: Vec<&str> = markdown
        .lines()
        .filter(|l| l.starts_with("| easy ") || l.starts_with("| hard "))
        .collect();
    assert_eq!(rows.len(), 2, "{markdown}");

    let groups = |field: &str| -> Vec<(String, u64, u64)> {
        let (code, text, stderr) = report(&[&run, "--by", field, "--format", "json"]);
        assert_eq!(code, 0, "{stderr}");
        let json: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(json["by"]["field"], field);
        json["by"]["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .map(|g| {
                (
                    g["value"].as_str().expect("value").to_owned(),
                    g["passed"].as_u64().expect("passed"),
                    g["failed"].as_u64().expect("failed"),
                )
            })
            .collect()
    };
    let by_difficulty = [("easy".to_owned(), 1, 1), ("hard".to_owned(), 1, 0)];
    assert_eq!(groups("difficulty"), by_difficulty);
    assert_eq!(groups("metadata.difficulty"), by_difficulty);
    assert_eq!(
        groups("metadata.source.name"),
        [("gym".to_owned(), 0, 1), ("swe".to_owned(), 2, 0)]
    );

    let page = fixture.path("report.html");
    let (code, _, stderr) = report(&[
        &run,
        "--by",
        "difficulty",
        "--format",
        "html",
        "-o",
        page.to_str().expect("UTF-8"),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let html = std::fs::read_to_string(&page).expect("the page");
    assert!(
        html.contains("<table id=\"by\" data-field=\"difficulty\">"),
        "{html}"
    );
    assert!(html.contains("<tr><th>easy</th>"), "{html}");
    assert!(html.contains("<tr><th>hard</th>"), "{html}");

    let (code, _, stderr) = report(&[&run, "--by", "language"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("; under `metadata`: `difficulty`, `source`"),
        "{stderr}"
    );
}
