//! The newer SWE-bench family in: a SWE-bench Pro line and a
//! Multi-SWE-bench line, hand-written with their sets' real fields over a
//! folder of mirrors, run end to end on the host with `--test-command`
//! (the oracle passes, noop fails, graded per test); without it both are
//! refused before any task with the field named, as is a SWE-smith line.

use serde_json::{Value, json};

use crate::support::harness::{Fixture, diff_of, unittest_name};
use crate::swebench::{HIDDEN, OPS, TESTS};

/// The two lines over one repo, mirrored as `acme/ops` (Pro) and
/// `Acme/Ops` (Multi); the mirrors folder.
fn lines(fixture: &Fixture) -> (Vec<Value>, std::path::PathBuf) {
    let (work, sha) = fixture.repo("work", &[("ops.py", OPS), ("test_ops.py", TESTS)]);
    let mirrors = fixture.mirrors(&work, "acme/ops");
    fixture.mirrors(&work, "Acme/Ops");
    let gold = diff_of(&work, &[("ops.py", &OPS.replacen("a - b", "a + b", 1))]);
    let test_patch = diff_of(&work, &[("test_ops.py", HIDDEN)]);
    let add = unittest_name("test_ops.OpsTest", "test_add");
    let sub = unittest_name("test_ops.OpsTest", "test_sub");
    // SWE-bench Pro stores its lists as Python literals.
    let python = |name: &str| format!("['{}']", name.replace('\'', "\\'"));
    let pro = json!({
        "repo": "acme/ops",
        "instance_id": format!("instance_acme__ops-{sha}-v0123456789abcdef0123456789abcdef01234567"),
        "base_commit": sha,
        "patch": gold,
        "test_patch": test_patch,
        "problem_statement": "add() subtracts.",
        "requirements": "- `add(1, 2)` must return 3.",
        "interface": "No new interfaces are introduced.",
        "repo_language": "python",
        "fail_to_pass": python(&add),
        "pass_to_pass": python(&sub),
        "issue_specificity": "[\"major_bug\"]",
        "issue_categories": "[\"back_end_knowledge\"]",
        "before_repo_set_cmd": format!("git reset --hard {sha}\ngit clean -fd"),
        "selected_test_files_to_run": "[\"test_ops.py\"]",
        "dockerhub_tag": format!("acme.ops-acme__ops-{sha}"),
    });
    let multi = json!({
        "org": "Acme", "repo": "Ops", "number": 7, "state": "closed",
        "title": "Fix add", "body": "Fixes #6",
        "base": {"label": "Acme:main", "ref": "main", "sha": sha},
        "resolved_issues": [{"number": 6, "title": "add() subtracts", "body": "1 + 2 gives -1."}],
        "fix_patch": gold,
        "test_patch": test_patch,
        "fixed_tests": {add.clone(): {"run": "NONE", "test": "FAIL", "fix": "PASS"}},
        "p2p_tests": {sub.clone(): {"run": "PASS", "test": "PASS", "fix": "PASS"}},
        "f2p_tests": {add.clone(): {"run": "NONE", "test": "FAIL", "fix": "PASS"}},
        "s2p_tests": {},
        "n2p_tests": {},
        "run_result": {"passed_count": 1, "failed_count": 0, "skipped_count": 0},
        "test_patch_result": {"passed_count": 1, "failed_count": 1, "skipped_count": 0},
        "fix_patch_result": {"passed_count": 2, "failed_count": 0, "skipped_count": 0},
        "instance_id": "Acme__Ops-7",
    });
    (vec![pro, multi], mirrors)
}

#[test]
fn pro_and_multi_lines_run_end_to_end_with_a_test_command() {
    let fixture = Fixture::new();
    let (lines, mirrors) = lines(&fixture);
    let tasks = fixture.tasks(&lines);
    let template = "python3 -m unittest -v {{ test_files | join(' ') | replace('.py', '') }}";
    let args = |model: &'static str| {
        vec![
            "--model".to_owned(),
            model.to_owned(),
            "--sandbox".to_owned(),
            "none".to_owned(),
            // Their lines name images; on the host on purpose here.
            "--env".to_owned(),
            "host".to_owned(),
            "--repo-base".to_owned(),
            mirrors.display().to_string(),
            "--test-command".to_owned(),
            template.to_owned(),
        ]
    };
    let pro_id = lines[0]["instance_id"].as_str().expect("id").to_owned();
    let mut runs = Vec::new();
    for (model, status) in [("oracle", "passed"), ("noop", "failed")] {
        let out = format!("out-{model}");
        let args = args(model);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = fixture.run_into(&fixture.path(&out), &tasks, &args, &[]);
        for id in [pro_id.as_str(), "Acme__Ops-7"] {
            let row = run.row(id);
            assert_eq!(
                row["status"], status,
                "{model} {id}: {row:?}\n{}",
                run.stderr
            );
            // Graded per test: the listed tests' statuses were read.
            let tests = run.tests_json(id);
            assert_eq!(tests["verdict"]["resolved"], status == "passed", "{tests}");
        }
        runs.push(run);
    }
    let run = &runs[0];
    let header = &run.trajectory(&pro_id)[0]["task"];
    assert_eq!(
        header["image"]
            .as_str()
            .map(|i| i.starts_with("jefzda/sweap-images:acme.ops-acme__ops-")),
        Some(true),
        "{header}"
    );
    assert_eq!(header["workdir"], "/app");
    assert_eq!(
        header["problem_statement"],
        "add() subtracts.\n\nRequirements:\n- `add(1, 2)` must return 3.\n\nNew interfaces introduced:\nNo new interfaces are introduced."
    );
    let header = &run.trajectory("Acme__Ops-7")[0]["task"];
    assert_eq!(header["image"], "mswebench/acme_m_ops:pr-7");
    assert_eq!(header["workdir"], "/home/Ops");
    assert_eq!(
        header["problem_statement"],
        "add() subtracts\n1 + 2 gives -1."
    );
}

#[test]
fn lines_onebash_cannot_grade_yet_are_refused_naming_the_field() {
    let fixture = Fixture::new();
    let (mut lines, mirrors) = lines(&fixture);
    lines.push(json!({
        "instance_id": "acme__ops.1f2e3d4c.func_pm_remove_assign__x1y2z3",
        "repo": "swesmith/acme__ops.1f2e3d4c",
        "patch": "diff --git a/ops.py b/ops.py\n",
        "FAIL_TO_PASS": ["test_ops.py::OpsTest::test_add"],
        "PASS_TO_PASS": [],
        "image_name": "jyangballin/swesmith.x86_64.acme_1776_ops.1f2e3d4c",
        "problem_statement": "add() subtracts."
    }));
    let tasks = fixture.tasks(&lines);
    let run = fixture.run(
        &tasks,
        &[
            "--model",
            "noop",
            "--repo-base",
            mirrors.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    let file = tasks.display().to_string();
    for (line, field) in [
        (1, "a SWE-bench Pro line: `selected_test_files_to_run`"),
        (2, "a Multi-SWE-bench line: `f2p_tests` and `p2p_tests`"),
        (3, "a SWE-smith line has no `base_commit`"),
    ] {
        assert!(
            run.stderr.contains(&format!("{file}:{line}: {field}")),
            "line {line}: {}",
            run.stderr
        );
    }
    assert!(!run.out.join("results.csv").exists());
}
