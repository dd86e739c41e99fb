//! Datasets of the Hugging Face Hub as task files: `onebash run
//! hf:OWNER/NAME[@REVISION][:SPLIT]` and the aliases (`swe-bench-lite`...)
//! against the scripted Hub (support/hub.rs, itself checked against
//! huggingface_hub by hub_parity.rs), through the real binary. The rows
//! become tasks and run.json names the dataset's sha and files; the Hub's
//! errors stop the run before any task with a message that says what to
//! fix; a revision once downloaded needs no network (a pinned sha,
//! `HF_HUB_OFFLINE=1`, a resume); a download cut midway is resumed with a
//! `Range`; two runs sharing a cache download each file once; rows with
//! an image need a container env; SWE-bench rows (and their 5.x fields)
//! come through; Parquet written by pyarrow reads as pyarrow reads it.
//!
//! Every run is given `--cache-dir` and `HF_HOME` in the test's folder,
//! `HF_ENDPOINT` of the test's Hub, and none of the caller's `HF_TOKEN`
//! or `HF_HUB_OFFLINE`. No test waits for time to pass: a run is held at
//! a request the Hub received ([`Hub::hold`], [`Hub::wait_for`]).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::support::backend::{Backend, IMAGE, under_each_engine};
use crate::support::harness::{
    Fixture, RunOutput, diff_of, hf_python, onebash, task, unittest_name,
};
use crate::support::hub::{Dataset, Hub, Seen, sha256_hex};
use crate::support::server::ScriptedServer;
use crate::support::tables::{jsonl_of, parquet_of};
use crate::swebench::{HIDDEN, OPS, TESTS};

const REPO: &str = "acme/tasks";
const PARQUET: &str = "data/test-00000-of-00001.parquet";
/// Passes once the gold patch wrote `fixed.txt`.
const TEST_COMMAND: &str = "test -f fixed.txt";

// ---------------------------------------------------------------------------
// Rows, datasets and runs.
// ---------------------------------------------------------------------------

/// Rows of onebash's own task format over one local repo, each fixed by
/// its gold patch (so `-m oracle` passes them); `extra` fields merged in.
fn onebash_rows(fixture: &Fixture, ids: &[&str], extra: Value) -> Vec<Value> {
    let repo = fixture.path("repo");
    let (repo, sha) = if repo.exists() {
        let sha = crate::support::harness::git(&repo, &["rev-parse", "HEAD"]);
        (repo, sha)
    } else {
        fixture.repo("repo", &[("README.md", "hello\n")])
    };
    let gold = diff_of(&repo, &[("fixed.txt", "fixed\n")]);
    ids.iter()
        .map(|id| {
            let mut extra = extra.clone();
            extra["gold_patch"] = json!(gold);
            task(id, &repo, &sha, TEST_COMMAND, extra)
        })
        .collect()
}

/// A dataset whose split `test` is one Parquet file in LFS, as most of
/// the Hub's are.
fn parquet_dataset(id: &str, rows: &[Value]) -> Dataset {
    Dataset::new(id)
        .lfs(PARQUET, parquet_of(rows))
        .config("default", &[("test", "data/test-*")])
}

/// `onebash run REFERENCE -o <fixture>/OUT --cache-dir <fixture>/cache
/// ARGS` against the Hub at `endpoint`, with `env` on top of a clean
/// Hugging Face environment.
pub(crate) fn hf_command(
    fixture: &Fixture,
    endpoint: &str,
    out: &Path,
    reference: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Command {
    let mut command = onebash();
    command
        .arg("run")
        .arg(reference)
        .arg("-o")
        .arg(out)
        .arg("--cache-dir")
        .arg(fixture.path("cache"))
        .args(args);
    for name in [
        "HF_TOKEN",
        "HF_TOKEN_PATH",
        "HUGGING_FACE_HUB_TOKEN",
        "HF_HUB_OFFLINE",
        "HF_HUB_CACHE",
        "HF_ENDPOINT",
    ] {
        command.env_remove(name);
    }
    command
        .env("HF_HOME", fixture.path("hf-home"))
        .env("HF_ENDPOINT", endpoint)
        .envs(env.iter().copied());
    command
}

/// [`hf_command`] run to its end.
pub(crate) fn hf_run(
    fixture: &Fixture,
    endpoint: &str,
    out: &str,
    reference: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> RunOutput {
    let out = fixture.path(out);
    let output = hf_command(fixture, endpoint, &out, reference, args, env)
        .output()
        .expect("run onebash");
    RunOutput::of(output, &out)
}

fn run_json(run: &RunOutput) -> Value {
    let path = run.out.join("run.json");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    serde_json::from_str(&text).expect("run.json is JSON")
}

/// A run that stopped before any task: nothing in its run folder.
fn assert_stopped_before_any_task(run: &RunOutput, code: i32) {
    assert_eq!(
        run.code, code,
        "stdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
    let left: Vec<PathBuf> = std::fs::read_dir(&run.out)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "the run folder has {left:?}");
}

fn task_ids(run: &RunOutput) -> Vec<String> {
    let mut ids: Vec<String> = run
        .rows()
        .into_iter()
        .map(|r| r["task_id"].clone())
        .collect();
    ids.sort();
    ids
}

fn assert_all_passed(run: &RunOutput, ids: &[&str]) {
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(task_ids(run), ids, "stderr:\n{}", run.stderr);
    for row in run.rows() {
        assert_eq!(row["status"], "passed", "{row:?}\n{}", run.stderr);
    }
}

// ---------------------------------------------------------------------------
// The rows run, and run.json names what they came from.
// ---------------------------------------------------------------------------

#[test]
fn a_dataset_runs_its_rows_and_run_json_names_its_sha_split_and_files() {
    let fixture = Fixture::new();
    let hub = Hub::start();
    let rows = onebash_rows(&fixture, &["t0", "t1"], json!({}));
    let parquet = parquet_of(&rows);
    let sha = hub.publish(parquet_dataset(REPO, &rows).tag("v1"));
    for (out, reference, revision) in [
        ("by-default", "hf:acme/tasks", "main"),
        ("by-tag", "hf:acme/tasks@v1:test", "v1"),
    ] {
        let run = hf_run(
            &fixture,
            &hub.endpoint(),
            out,
            reference,
            &["-m", "oracle"],
            &[],
        );
        assert_all_passed(&run, &["t0", "t1"]);
        let manifest = run_json(&run);
        let dataset = &manifest["settings"]["dataset"];
        assert_eq!(dataset["reference"], reference, "{manifest}");
        assert_eq!(dataset["repo"], REPO, "{manifest}");
        assert_eq!(dataset["revision"], revision, "{manifest}");
        assert_eq!(dataset["sha"], sha.as_str(), "{manifest}");
        assert_eq!(dataset["split"], "test", "{manifest}");
        let files = dataset["files"].as_array().expect("files");
        let file = files
            .iter()
            .find(|f| f["path"] == PARQUET)
            .unwrap_or_else(|| panic!("no {PARQUET} in {manifest}"));
        let hash = sha256_hex(&parquet);
        assert!(
            file["sha256"] == hash.as_str() || file["oid"] == hash.as_str(),
            "{file}"
        );
        assert_eq!(file["size"], parquet.len(), "{file}");
        assert_eq!(
            manifest["fingerprint"]["dataset"],
            format!("{REPO}@{sha}:test"),
            "{manifest}"
        );
    }
}

#[test]
fn a_dry_run_prints_the_plan_and_writes_nothing_nor_asks_the_model() {
    let fixture = Fixture::new();
    let hub = Hub::start();
    let rows = onebash_rows(&fixture, &["t0", "t1"], json!({}));
    let sha = hub.publish(parquet_dataset(REPO, &rows));
    let model = ScriptedServer::start(vec![]);
    let base_url = model.base_url();
    let run = hf_run(
        &fixture,
        &hub.endpoint(),
        "out",
        "hf:acme/tasks",
        &[
            "--dry-run",
            "-m",
            "scripted",
            "--base-url",
            &base_url,
            "--env",
            "host",
        ],
        &[],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert!(!run.out.exists(), "a dry run wrote {}", run.out.display());
    assert!(
        model.requests().is_empty() && model.preflights().len() == 1,
        "a dry run makes no model call; it asks the models list once (the run's preflight)"
    );
    let plan = &run.stdout;
    assert!(
        plan.lines().any(|l| l.contains("task") && l.contains('2')),
        "no count of tasks in the plan:\n{plan}"
    );
    for what in [sha.as_str(), "scripted", "host", "t0"] {
        assert!(plan.contains(what), "no {what} in the plan:\n{plan}");
    }
}

// ---------------------------------------------------------------------------
// The Hub's errors stop the run before any task.
// ---------------------------------------------------------------------------

#[test]
fn a_gated_dataset_without_a_good_token_stops_naming_it_and_hf_token() {
    let fixture = Fixture::new();
    let hub = Hub::start();
    let rows = onebash_rows(&fixture, &["t0"], json!({}));
    hub.publish(parquet_dataset("acme/gated", &rows).gated("hf_granted"));
    hub.add_token("hf_not_granted");
    for (out, token) in [
        ("none", None),
        ("unknown", Some("hf_wrong")),
        ("not-granted", Some("hf_not_granted")),
    ] {
        let env: Vec<(&str, &str)> = token.map(|t| ("HF_TOKEN", t)).into_iter().collect();
        let run = hf_run(
            &fixture,
            &hub.endpoint(),
            out,
            "hf:acme/gated",
            &["-m", "oracle"],
            &env,
        );
        assert_stopped_before_any_task(&run, 2);
        if let Some(token) = token {
            assert!(
                !run.stderr.contains(token),
                "the token in stderr: {}",
                run.stderr
            );
        }
        for what in ["acme/gated", "HF_TOKEN"] {
            assert!(
                run.stderr.contains(what),
                "{token:?}: no {what}:\n{}",
                run.stderr
            );
        }
    }
    let run = hf_run(
        &fixture,
        &hub.endpoint(),
        "granted",
        "hf:acme/gated",
        &["-m", "oracle"],
        &[("HF_TOKEN", "hf_granted")],
    );
    assert_all_passed(&run, &["t0"]);
    // The token goes to the Hub as a bearer, never to the CDN.
    let seen = hub.requests();
    assert!(
        seen.iter()
            .any(|s| !s.cdn && s.authorization.as_deref() == Some("Bearer hf_granted")),
        "{seen:#?}"
    );
    assert!(
        seen.iter()
            .filter(|s| s.cdn)
            .all(|s| s.authorization.is_none()),
        "the token went to the CDN: {seen:#?}"
    );
    // Nor anywhere in what the run wrote or printed.
    assert!(!run.stderr.contains("hf_granted") && !run.stdout.contains("hf_granted"));
    let mut folders = vec![run.out.clone()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("read the run folder") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                folders.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                assert!(
                    !String::from_utf8_lossy(&bytes).contains("hf_granted"),
                    "the token is in {}",
                    path.display()
                );
            }
        }
    }
}

#[test]
fn an_unknown_dataset_or_split_stops_the_run_and_names_what_there_is() {
    let fixture = Fixture::new();
    let hub = Hub::start();
    let rows = onebash_rows(&fixture, &["t0"], json!({}));
    hub.publish(
        Dataset::new(REPO)
            .lfs(PARQUET, parquet_of(&rows))
            .file("data/dev.jsonl", jsonl_of(&rows))
            .config(
                "default",
                &[("test", "data/test-*"), ("dev", "data/dev.jsonl")],
            ),
    );
    let run = hf_run(
        &fixture,
        &hub.endpoint(),
        "no-repo",
        "hf:acme/nothing",
        &["-m", "oracle"],
        &[],
    );
    assert_stopped_before_any_task(&run, 2);
    assert!(run.stderr.contains("acme/nothing"), "{}", run.stderr);

    let run = hf_run(
        &fixture,
        &hub.endpoint(),
        "revision",
        "hf:acme/tasks@v9",
        &["-m", "oracle"],
        &[],
    );
    assert_stopped_before_any_task(&run, 2);
    assert!(run.stderr.contains("v9"), "{}", run.stderr);

    let run = hf_run(
        &fixture,
        &hub.endpoint(),
        "split",
        "hf:acme/tasks:train",
        &["-m", "oracle"],
        &[],
    );
    assert_stopped_before_any_task(&run, 2);
    for what in ["train", "test", "dev"] {
        assert!(run.stderr.contains(what), "no {what}:\n{}", run.stderr);
    }
}

#[test]
fn a_corrupted_file_stops_the_run_saying_its_hash_does_not_match() {
    let fixture = Fixture::new();
    let hub = Hub::start();
    let rows = onebash_rows(&fixture, &["t0"], json!({}));
    hub.publish(parquet_dataset(REPO, &rows));
    hub.corrupt(REPO, PARQUET);
    let run = hf_run(
        &fixture,
        &hub.endpoint(),
        "out",
        "hf:acme/tasks",
        &["-m", "oracle"],
        &[],
    );
    assert_stopped_before_any_task(&run, 2);
    assert!(
        run.stderr.contains(PARQUET) && run.stderr.contains("does not match"),
        "{}",
        run.stderr
    );
    // Nothing corrupted was kept: once the Hub serves it right, it runs.
    let hub_fixed = Hub::start();
    hub_fixed.publish(parquet_dataset(REPO, &rows));
    let run = hf_run(
        &fixture,
        &hub_fixed.endpoint(),
        "again",
        "hf:acme/tasks",
        &["-m", "oracle"],
        &[],
    );
    assert_all_passed(&run, &["t0"]);
}

#[test]
fn a_hub_that_is_gone_with_nothing_cached_is_exit_3() {
    let fixture = Fixture::new();
    let hub = Hub::start();
    let endpoint = hub.endpoint();
    drop(hub);
    let run = hf_run(
        &fixture,
        &endpoint,
        "out",
        "hf:acme/tasks",
        &["-m", "oracle"],
        &[],
    );
    assert_stopped_before_any_task(&run, 3);
    assert!(run.stderr.contains("acme/tasks"), "{}", run.stderr);
}

#[test]
fn a_bad_row_stops_the_run_naming_the_reference_and_the_row() {
    let fixture = Fixture::new();
    let hub = Hub::start();
    let mut rows = onebash_rows(&fixture, &["t0", "t1", "t2"], json!({}));
    rows[1]
        .as_object_mut()
        .expect("a row")
        .remove("problem_statement");
    hub.publish(
        Dataset::new(REPO)
            .file("data/test.jsonl", jsonl_of(&rows))
            .config("default", &[("test", "data/test.jsonl")]),
    );
    for reference in ["hf:acme/tasks", "hf:acme/tasks@main:test"] {
        let out = if reference.contains('@') {
            "pinned"
        } else {
            "plain"
        };
        let run = hf_run(
            &fixture,
            &hub.endpoint(),
            out,
            reference,
            &["-m", "oracle"],
            &[],
        );
        assert_stopped_before_any_task(&run, 2);
        let at = format!("{reference}:2: ");
        assert!(
            run.stderr.contains(&at) && run.stderr.contains("problem_statement"),
            "no {at:?}:\n{}",
            run.stderr
        );
    }
}

// ---------------------------------------------------------------------------
// What was downloaded once needs no network.
// ---------------------------------------------------------------------------

#[test]
fn a_pinned_sha_once_cached_runs_with_the_hub_gone() {
    let fixture = Fixture::new();
    let hub = Hub::start();
    let rows = onebash_rows(&fixture, &["t0", "t1"], json!({}));
    let sha = hub.publish(parquet_dataset(REPO, &rows));
    let endpoint = hub.endpoint();
    let reference = format!("hf:acme/tasks@{sha}");
    let first = hf_run(
        &fixture,
        &endpoint,
        "first",
        &reference,
        &["-m", "oracle"],
        &[],
    );
    assert_all_passed(&first, &["t0", "t1"]);
    drop(hub);
    let second = hf_run(
        &fixture,
        &endpoint,
        "second",
        &reference,
        &["-m", "oracle"],
        &[],
    );
    assert_all_passed(&second, &["t0", "t1"]);
    assert_eq!(
        run_json(&second)["settings"]["dataset"]["sha"],
        sha.as_str()
    );
}

#[test]
fn offline_a_named_revision_uses_the_cached_ref_with_no_request() {
    let fixture = Fixture::new();
    let hub = Hub::start();
    let rows = onebash_rows(&fixture, &["t0"], json!({}));
    let sha = hub.publish(parquet_dataset(REPO, &rows));
    let first = hf_run(
        &fixture,
        &hub.endpoint(),
        "first",
        "hf:acme/tasks",
        &["-m", "oracle"],
        &[],
    );
    assert_all_passed(&first, &["t0"]);
    // main moves on the Hub; offline, the ref cached is what counts.
    hub.publish(parquet_dataset(
        REPO,
        &onebash_rows(&fixture, &["moved"], json!({})),
    ));
    let before = hub.requests().len();
    let offline = hf_run(
        &fixture,
        &hub.endpoint(),
        "offline",
        "hf:acme/tasks",
        &["-m", "oracle"],
        &[("HF_HUB_OFFLINE", "1")],
    );
    assert_all_passed(&offline, &["t0"]);
    let after: Vec<Seen> = hub.requests().into_iter().skip(before).collect();
    assert!(
        after.is_empty(),
        "offline, onebash asked the Hub: {after:#?}"
    );
    assert_eq!(
        run_json(&offline)["settings"]["dataset"]["sha"],
        sha.as_str()
    );
}

/// A resume reads the sha its run was made from in run.json: with `main`
/// moved on the Hub meanwhile, it asks the Hub nothing and redoes the
/// unfinished pair from the rows of that sha.
#[test]
fn a_resume_of_a_named_revision_reads_its_sha_from_run_json_and_asks_nothing() {
    let fixture = Fixture::new();
    let hub = Hub::start();
    let rows = onebash_rows(&fixture, &["t0", "t1", "t2"], json!({}));
    let sha = hub.publish(parquet_dataset(REPO, &rows));
    let first = hf_run(
        &fixture,
        &hub.endpoint(),
        "out",
        "hf:acme/tasks",
        &["-m", "oracle"],
        &[],
    );
    assert_all_passed(&first, &["t0", "t1", "t2"]);
    // A crash in the middle of the last row, as resume.rs makes one.
    let csv = first.out.join("results.csv");
    let text = std::fs::read_to_string(&csv).expect("results.csv");
    let last = text.lines().last().expect("a row").to_owned();
    let whole = &text[..text.len() - last.len() - 1];
    std::fs::write(&csv, format!("{whole}{}", &last[..last.len() / 2])).expect("tear");
    let torn = last.split(',').next().expect("task_id").to_owned();

    hub.publish(parquet_dataset(
        REPO,
        &onebash_rows(&fixture, &["moved"], json!({})),
    ));
    let before = hub.requests().len();
    let resumed = hf_run(
        &fixture,
        &hub.endpoint(),
        "out",
        "hf:acme/tasks",
        &["-m", "oracle", "--resume"],
        &[],
    );
    assert_all_passed(&resumed, &["t0", "t1", "t2"]);
    let after: Vec<Seen> = hub.requests().into_iter().skip(before).collect();
    assert!(after.is_empty(), "the resume asked the Hub: {after:#?}");
    assert_eq!(
        run_json(&resumed)["settings"]["dataset"]["sha"],
        sha.as_str()
    );
    assert_eq!(
        run_json(&resumed)["settings"]["dataset"]["revision"],
        "main",
        "run.json keeps the revision asked for, not the commit the resume pinned"
    );
    assert_eq!(resumed.trajectory(&torn)[0]["task"]["id"], torn.as_str());
    // And a second resume (with --retry-errors, so it reads the dataset
    // again) is pinned the same way: the first one's run.json still says
    // `main`.
    let again = hf_run(
        &fixture,
        &hub.endpoint(),
        "out",
        "hf:acme/tasks",
        &["-m", "oracle", "--resume", "--retry-errors"],
        &[],
    );
    assert_eq!(again.code, 0, "{}", again.stderr);
    let after: Vec<Seen> = hub.requests().into_iter().skip(before).collect();
    assert!(
        after.is_empty(),
        "the second resume asked the Hub: {after:#?}"
    );
    assert_eq!(run_json(&again)["settings"]["dataset"]["sha"], sha.as_str());
}

// ---------------------------------------------------------------------------
// Downloads: a cut one resumes, two runs at once download once.
// ---------------------------------------------------------------------------

#[test]
fn a_download_cut_midway_is_resumed_with_a_range_and_the_run_goes_on() {
    let fixture = Fixture::new();
    let hub = Hub::start();
    let rows = onebash_rows(&fixture, &["t0", "t1"], json!({}));
    let parquet = parquet_of(&rows);
    hub.publish(parquet_dataset(REPO, &rows));
    let cut = parquet.len() / 2;
    hub.cut_once(REPO, PARQUET, cut);
    let run = hf_run(
        &fixture,
        &hub.endpoint(),
        "out",
        "hf:acme/tasks",
        &["-m", "oracle"],
        &[],
    );
    assert_all_passed(&run, &["t0", "t1"]);
    let range = format!("bytes={cut}-");
    let seen = hub.requests();
    assert!(
        seen.iter()
            .any(|s| s.is_download() && s.range.as_deref() == Some(range.as_str())),
        "no download with Range: {range}: {seen:#?}"
    );
}

#[test]
fn two_runs_on_one_cache_at_once_both_succeed_and_download_each_file_once() {
    let fixture = Fixture::new();
    let hub = Hub::start();
    let rows = onebash_rows(&fixture, &["t0", "t1"], json!({}));
    let lfs = sha256_hex(&parquet_of(&rows));
    hub.publish(parquet_dataset(REPO, &rows));
    // The first download waits until both runs have asked for the
    // revision, so the second asks while the first downloads.
    let asked_main = |s: &Seen| s.is_info() && s.path.ends_with("/revision/main");
    hub.hold(Seen::is_download, move |log| {
        log.iter().filter(|s| asked_main(s)).count() >= 2
    });
    let endpoint = hub.endpoint();
    let runs: Vec<std::thread::JoinHandle<RunOutput>> = ["one", "two"]
        .into_iter()
        .map(|out| {
            let out = fixture.path(out);
            let mut command = hf_command(
                &fixture,
                &endpoint,
                &out,
                "hf:acme/tasks",
                &["-m", "oracle"],
                &[],
            );
            std::thread::spawn(move || {
                let output = command.output().expect("run onebash");
                RunOutput::of(output, &out)
            })
        })
        .collect();
    for run in runs {
        let run = run.join().expect("a run's thread");
        assert_all_passed(&run, &["t0", "t1"]);
    }
    let seen = hub.requests();
    assert_eq!(
        seen.iter()
            .filter(|s| s.cdn && s.method == "GET" && s.names(&lfs))
            .count(),
        1,
        "the Parquet file was downloaded more than once: {seen:#?}"
    );
}

// ---------------------------------------------------------------------------
// Images, SWE-bench rows and the aliases.
// ---------------------------------------------------------------------------

#[test]
fn rows_with_an_image_need_a_container_env_and_host_warns_once() {
    let fixture = Fixture::new();
    let hub = Hub::start();
    let image = "example.org/acme/tasks:1";
    let mut rows = onebash_rows(&fixture, &["plain", "boxed", "boxed-too"], json!({}));
    for row in &mut rows[1..] {
        row["image"] = json!(image);
    }
    hub.publish(parquet_dataset(REPO, &rows));
    let run = hf_run(
        &fixture,
        &hub.endpoint(),
        "no-env",
        "hf:acme/tasks",
        &["-m", "oracle"],
        &[],
    );
    assert_stopped_before_any_task(&run, 2);
    assert!(
        run.stderr.contains("boxed") && run.stderr.contains("--env podman"),
        "{}",
        run.stderr
    );
    // A task file says the same.
    let tasks = fixture.tasks(&rows);
    let run = fixture.run(&tasks, &["-m", "oracle"]);
    assert_eq!(run.code, 2, "stderr:\n{}", run.stderr);
    assert!(
        run.stderr.contains("boxed") && run.stderr.contains("--env podman"),
        "{}",
        run.stderr
    );

    let run = hf_run(
        &fixture,
        &hub.endpoint(),
        "host",
        "hf:acme/tasks",
        &["-m", "oracle", "--env", "host"],
        &[],
    );
    assert_all_passed(&run, &["boxed", "boxed-too", "plain"]);
    let warnings: Vec<&str> = run.stderr.lines().filter(|l| l.contains(image)).collect();
    assert_eq!(warnings.len(), 1, "{}", run.stderr);
}

/// SWE-bench instances over the local repo `acme/ops` (as swebench.rs
/// makes them), with `extra` fields; and the folder of mirrors.
fn swebench_rows(fixture: &Fixture, ids: &[&str], extra: Value) -> (Vec<Value>, PathBuf) {
    let (work, sha) = fixture.repo("work", &[("ops.py", OPS), ("test_ops.py", TESTS)]);
    let mirrors = fixture.mirrors(&work, "acme/ops");
    let gold = diff_of(&work, &[("ops.py", &OPS.replacen("a - b", "a + b", 1))]);
    let test_patch = diff_of(&work, &[("test_ops.py", HIDDEN)]);
    let rows = ids
        .iter()
        .map(|id| {
            let mut row = json!({
                "instance_id": id,
                "repo": "acme/ops",
                "base_commit": sha,
                "patch": gold,
                "test_patch": test_patch,
                "FAIL_TO_PASS": json!([unittest_name("test_ops.OpsTest", "test_add")]).to_string(),
                "PASS_TO_PASS": json!([unittest_name("test_ops.OpsTest", "test_sub")]).to_string(),
                "version": "1.0",
                "environment_setup_commit": sha,
                "problem_statement": format!("Problem of task {id}. add() subtracts."),
                "hints_text": "",
                "created_at": "2024-01-01T00:00:00Z",
            });
            if let (Some(row), Value::Object(extra)) = (row.as_object_mut(), extra.clone()) {
                row.extend(extra);
            }
            row
        })
        .collect();
    (rows, mirrors)
}

const UNITTEST: &str = "python3 -m unittest -v {{ test_files | join(' ') | replace('.py', '') }}";

/// Rows of swebench 5.x carry their image and how they are graded: the
/// trajectory's header keeps those fields as the row had them.
#[test]
fn swebench_5_rows_keep_their_eval_script_log_parser_and_eval_type() {
    let fixture = Fixture::new();
    let hub = Hub::start();
    let extra = json!({
        "image": "swebench/sweb.eval.x86_64.acme_1776_ops-1:latest",
        "eval_script": "#!/bin/bash\npython3 -m unittest -v test_ops\n",
        "log_parser": "parse_log_unittest",
        "eval_type": "pass_and_fail",
    });
    let (rows, mirrors) = swebench_rows(&fixture, &["acme__ops-1"], extra.clone());
    hub.publish(parquet_dataset(REPO, &rows));
    let run = hf_run(
        &fixture,
        &hub.endpoint(),
        "out",
        "hf:acme/tasks",
        &[
            "-m",
            "oracle",
            "--env",
            "host",
            "--repo-base",
            mirrors.to_str().expect("UTF-8"),
            "--test-command",
            UNITTEST,
        ],
        &[],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let header = &run.trajectory("acme__ops-1")[0];
    assert_eq!(header["event"], "header");
    for field in ["eval_script", "log_parser", "eval_type"] {
        assert_eq!(header["task"][field], extra[field], "{field}: {header}");
    }
}

/// `swe-bench-lite` is `hf:SWE-bench/SWE-bench_Lite` (split `test`); a row
/// without an image runs in SWE-bench's, named from its `instance_id`. The
/// plan checks the images are there or can be pulled, so podman must be.
#[test]
fn the_swe_bench_lite_alias_plans_swebench_images() {
    if !Backend::Podman.ready() {
        return;
    }
    let fixture = Fixture::new();
    let hub = Hub::start();
    let (rows, mirrors) = swebench_rows(&fixture, &["acme__Ops-1", "acme__ops-2"], json!({}));
    let (dev, _) = rows.split_at(1);
    hub.publish(
        Dataset::new("SWE-bench/SWE-bench_Lite")
            .lfs("data/dev-00000-of-00001.parquet", parquet_of(dev))
            .lfs(PARQUET, parquet_of(&rows))
            .config("default", &[("dev", "data/dev-*"), ("test", "data/test-*")]),
    );
    let repo_base = format!("file://{}", mirrors.display());
    // SWE-bench's names for the two instances, given to the test image in
    // podman's store (Docker Hub is out of reach here), and taken back
    // however the test ends.
    const IMAGES: &[&str] = &[
        "swebench/sweb.eval.x86_64.acme_1776_ops-1:latest",
        "swebench/sweb.eval.x86_64.acme_1776_ops-2:latest",
    ];
    let images = IMAGES;
    struct Untag(&'static [&'static str]);
    impl Drop for Untag {
        fn drop(&mut self) {
            // `podman untag IMAGE` alone would take every name off the
            // test image: name the one to take.
            for image in self.0 {
                let _ = Command::new("podman")
                    .args(["untag", image, image])
                    .output();
            }
        }
    }
    let _untag = Untag(IMAGES);
    for &image in images {
        let tagged = Command::new("podman")
            .args(["tag", IMAGE, image])
            .status()
            .expect("podman tag");
        assert!(tagged.success(), "podman tag {IMAGE} {image}");
    }
    let plan = |out: &str, extra: &[&str]| {
        let args = [
            &[
                "--dry-run",
                "-m",
                "oracle",
                "--env",
                "podman",
                "--repo-base",
                &repo_base,
            ][..],
            extra,
        ]
        .concat();
        hf_run(&fixture, &hub.endpoint(), out, "swe-bench-lite", &args, &[])
    };
    let run = plan("out", &[]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert!(!run.out.exists(), "a dry run wrote {}", run.out.display());
    assert!(
        run.stdout.contains(&format!("{} (present)", images[0])),
        "no {} in the plan:\n{}",
        images[0],
        run.stdout
    );
    assert!(run.stdout.contains("acme__Ops-1"), "{}", run.stdout);
    // An image that is not there is asked of its registry, as the run
    // would pull it: here one on a port nothing listens at, so the dry
    // run fails that check with the run's code, naming the image, and
    // still prints the plan.
    let missing = "127.0.0.1:1/swebench/{{ instance_id | lower }}:latest";
    let run = plan("out-missing", &["--image", missing]);
    assert_stopped_before_any_task(&run, 2);
    assert!(
        run.stdout.lines().any(|line| line.starts_with("error: ")
            && line.contains("127.0.0.1:1/swebench/acme__ops-1:latest")),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("127.0.0.1:1/swebench/acme__ops-1:latest (not checked)"),
        "{}",
        run.stdout
    );
    let seen = hub.requests();
    assert!(
        seen.iter()
            .any(|s| s.path == "/api/datasets/SWE-bench/SWE-bench_Lite/revision/main"),
        "{seen:#?}"
    );
}

/// Rows naming the container tests' image run in it, end to end.
fn rows_with_an_image_run_in_it(backend: Backend) {
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let fixture = Fixture::new();
    let hub = Hub::start();
    // Ids no other test process uses: containers are labelled with them.
    let prefix = format!(
        "hf-{}-{}",
        std::process::id(),
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let ids = [format!("{prefix}-a"), format!("{prefix}-b")];
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let rows = onebash_rows(&fixture, &ids, json!({"image": IMAGE}));
    hub.publish(parquet_dataset(REPO, &rows));
    let run = hf_run(
        &fixture,
        &hub.endpoint(),
        "out",
        "hf:acme/tasks:test",
        &["-m", "oracle", "--env", backend.name(), "--pull", "never"],
        &[],
    );
    let mut sorted = ids.clone();
    sorted.sort();
    assert_all_passed(&run, &sorted);
    for id in ids {
        backend.assert_nothing_left_of(id);
    }
}

under_each_engine!(end_to_end, super::rows_with_an_image_run_in_it);

// ---------------------------------------------------------------------------
// Parquet as pyarrow writes it.
// ---------------------------------------------------------------------------

/// A Parquet file written by pyarrow (SNAPPY, dictionary pages, two row
/// groups, a 200 KB string, a null) is read into the rows pyarrow reads.
#[test]
fn a_parquet_file_written_by_pyarrow_is_read_as_pyarrow_reads_it() {
    let Some(python) = hf_python() else { return };
    let fixture = Fixture::new();
    let hub = Hub::start();
    let mut rows = onebash_rows(
        &fixture,
        &["t0", "t1", "t2", "t3"],
        json!({"notes": "same"}),
    );
    rows[0]["problem_statement"] = json!(format!("Problem of task t0. {}", "long ".repeat(40_000)));
    rows[1]["notes"] = Value::Null;
    let rows_file = fixture.path("rows.json");
    std::fs::write(&rows_file, serde_json::to_vec(&rows).expect("JSON")).expect("write");
    let parquet = fixture.path("rows.parquet");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/hub_client.py");
    let output = Command::new(&python)
        .args([script, "parquet"])
        .arg(&parquet)
        .arg(&rows_file)
        .output()
        .expect("run hub_client.py");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let read: Vec<Value> = serde_json::from_slice(&output.stdout).expect("JSON rows");
    assert_eq!(read.len(), 4);
    hub.publish(
        Dataset::new(REPO)
            .lfs(PARQUET, std::fs::read(&parquet).expect("read"))
            .config("default", &[("test", "data/test-*")]),
    );
    let run = hf_run(
        &fixture,
        &hub.endpoint(),
        "out",
        "hf:acme/tasks",
        &["-m", "oracle"],
        &[],
    );
    assert_all_passed(&run, &["t0", "t1", "t2", "t3"]);
    for row in &read {
        let id = row["id"].as_str().expect("id");
        let task = &run.trajectory(id)[0]["task"];
        for (field, value) in row.as_object().expect("a row") {
            match value {
                Value::Null => assert!(
                    task.get(field).is_none_or(Value::is_null),
                    "{id}: {field} is {}",
                    task[field]
                ),
                value => assert_eq!(&task[field], value, "{id}: {field}"),
            }
        }
    }
}
