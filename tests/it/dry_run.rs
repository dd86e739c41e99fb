//! `run --dry-run` when a check fails: the plan is still printed whole,
//! with every failed check in it (images not checked, and why), and the
//! dry run exits with the most serious failure's code. The engine is a
//! script on PATH, the registry and the model API closed ports on
//! 127.0.0.1: no test needs podman or a network.

use std::net::TcpListener;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::support::harness::{Fixture, RunOutput, task};
use crate::support::server::ScriptedServer;

/// An address on 127.0.0.1 where nothing listens: a port just bound and
/// freed.
fn closed_address() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    addr.to_string()
}

/// A `podman` on PATH: `version` answers as `version_exit` says, and
/// `image inspect` finds only images named `present/...`.
fn fake_podman(fixture: &Fixture, version_exit: i32) -> String {
    use std::os::unix::fs::PermissionsExt;
    let bin = fixture.path("bin");
    std::fs::create_dir_all(&bin).expect("mkdir bin");
    let podman = bin.join("podman");
    let script = format!(
        "#!/bin/sh\ncase \"$1\" in\n  version) echo 'Cannot connect to Podman' >&2; exit {version_exit};;\n  image) case \"$3\" in present/*) exit 0;; *) echo 'no such image' >&2; exit 1;; esac;;\nesac\nexit 1\n"
    );
    std::fs::write(&podman, script).expect("write podman");
    std::fs::set_permissions(&podman, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    format!("{}:/usr/bin:/bin", bin.display())
}

/// A task file of one task per image, over one real repo.
fn tasks_of_images(fixture: &Fixture, images: &[&str]) -> PathBuf {
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let tasks: Vec<_> = images
        .iter()
        .enumerate()
        .map(|(i, image)| {
            task(
                &format!("t{i}"),
                &repo,
                &sha,
                "true",
                json!({"image": image}),
            )
        })
        .collect();
    fixture.tasks(&tasks)
}

fn dry_podman(fixture: &Fixture, tasks: &Path, path: &str, pull: &str) -> RunOutput {
    fixture.run_with_env(
        tasks,
        &[
            "--model",
            "noop",
            "--env",
            "podman",
            "--pull",
            pull,
            "--dry-run",
        ],
        &[("PATH", path)],
    )
}

/// The plan's own lines, which a dry run that stopped at its first failed
/// check did not print.
fn assert_plan(run: &RunOutput, failed: usize) {
    let plan = &run.stdout;
    let header = format!(
        "dry run: {failed} check{} failed (above); nothing ran and nothing was written",
        if failed == 1 { "" } else { "s" }
    );
    assert!(plan.contains(&header), "{plan}\nstderr:\n{}", run.stderr);
    for line in ["tasks:", "model:", "env:", "first tasks:", "out:"] {
        assert!(plan.contains(line), "no {line} in the plan:\n{plan}");
    }
    assert_eq!(
        plan.lines().filter(|l| l.starts_with("error: ")).count(),
        failed,
        "{plan}"
    );
    assert!(!run.out.exists(), "a dry run made the run folder");
}

/// An engine that does not answer stopped the dry run with its one
/// message: now the plan follows, every image "not checked", exit 2.
#[test]
fn a_dry_run_with_an_engine_that_does_not_answer_prints_the_plan_and_checks_no_image() {
    let fixture = Fixture::new();
    let path = fake_podman(&fixture, 1);
    let tasks = tasks_of_images(&fixture, &["present/a:1", "example/b:1"]);
    let run = dry_podman(&fixture, &tasks, &path, "missing");
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert_plan(&run, 1);
    assert!(
        run.stdout.contains("the engine does not answer"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("images:   2 (0 present, 0 to pull, 2 not checked: see the errors above)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("  t1  example/b:1 (not checked)"),
        "{}",
        run.stdout
    );
}

/// `--pull never` with images missing from the store printed their list
/// and no plan.
#[test]
fn a_dry_run_under_pull_never_prints_the_plan_with_the_missing_images() {
    let fixture = Fixture::new();
    let path = fake_podman(&fixture, 0);
    let tasks = tasks_of_images(&fixture, &["present/a:1", "example/b:1"]);
    let run = dry_podman(&fixture, &tasks, &path, "never");
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert_plan(&run, 1);
    assert!(
        run.stdout
            .contains("error: --env podman: this image is not in the engine's store: example/b:1"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("  t0  present/a:1 (present)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("  t1  example/b:1 (not checked)"),
        "{}",
        run.stdout
    );
}

/// A registry that cannot be reached (no DNS, here a closed port) printed
/// only its error. Now the plan follows; the first image's failure is
/// named, and the next image of a registry is not asked (without a
/// network each would wait out its own timeout).
#[test]
fn a_dry_run_with_its_registry_unreachable_prints_the_plan_and_the_images_not_checked() {
    let fixture = Fixture::new();
    let path = fake_podman(&fixture, 0);
    let host = closed_address();
    let first = format!("{host}/test/a:1");
    let second = format!("{host}/test/b:1");
    let tasks = tasks_of_images(&fixture, &["present/a:1", &first, &second]);
    let run = dry_podman(&fixture, &tasks, &path, "missing");
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert_plan(&run, 1);
    let error = run
        .stdout
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_default();
    assert!(error.contains(&first), "{}", run.stdout);
    assert!(
        run.stdout
            .contains(&format!("  t2  {second} (not checked)")),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("images:   3 (1 present, 0 to pull, 2 not checked: see the errors above)"),
        "{}",
        run.stdout
    );
}

/// A dead `--base-url` passed the dry run ("every check passed") and the
/// run then exited 3; and a task whose repo path does not exist passed it
/// and ended as `checkout_error: ... unsupported URL protocol`. Both are
/// failed checks now, in one plan, and the code is the most serious: 3.
#[test]
fn a_dry_run_names_a_dead_model_api_and_a_missing_repo_path_and_exits_3() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let nowhere = fixture.path("no-such-repo");
    let tasks = fixture.tasks(&[
        task("t0", &repo, &sha, "true", json!({})),
        task("t1", &nowhere, &sha, "true", json!({})),
    ]);
    let url = format!("http://{}/v1", closed_address());
    let args = ["--sandbox", "none", "--dry-run"];
    let run = fixture.run_model(&tasks, "scripted", &url, &args);
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    assert_plan(&run, 2);
    assert!(
        run.stdout
            .contains("error: the model API refused the run: ")
            && run.stdout.contains("could not connect")
            && run.stdout.contains(&format!("  url: {url}"))
            && run.stdout.contains("model API: refused the run"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains(&format!(
            "error: repo path {} does not exist (the repo of t1)",
            nowhere.display()
        )),
        "{}",
        run.stdout
    );

    // The model API up: only the repo path fails, a task's error (1).
    let model = ScriptedServer::start(vec![]);
    let run = fixture.run_model(&tasks, "scripted", &model.base_url(), &args);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert_plan(&run, 1);
    assert!(
        run.stdout
            .contains(&format!("model API: {}", model.base_url()))
            && run.stdout.contains("did not refuse the run"),
        "{}",
        run.stdout
    );
    assert!(
        model.requests().is_empty() && model.preflights().len() == 1,
        "the dry run asks the models list once and makes no model call"
    );
}

/// The run's own checkout error for that task says what is wrong, not
/// libgit2's "unsupported URL protocol".
#[test]
fn a_missing_repo_path_ends_its_task_as_a_checkout_error_naming_the_path() {
    let fixture = Fixture::new();
    let (_, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let nowhere = fixture.path("no-such-repo");
    let tasks = fixture.tasks(&[task("t1", &nowhere, &sha, "true", json!({}))]);
    let run = fixture.run_noop(&tasks, &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let rows = run.rows();
    assert_eq!(rows[0]["exit_reason"], "checkout_error", "{rows:?}");
    assert!(
        rows[0]["error"].contains(&format!("repo path {} does not exist", nowhere.display())),
        "{rows:?}"
    );
    assert!(
        !rows[0]["error"].contains("unsupported URL protocol"),
        "{rows:?}"
    );
}
