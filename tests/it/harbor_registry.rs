//! Harbor's tasks by name and from the Hub. `onebash run harbor:NAME[@VERSION]` reading a
//! registry in Harbor's `registry.json` format (from a file, or a scripted
//! server on 127.0.0.1), each task's folder fetched from a git repo made
//! here at its commit through the repo cache. On the host: the names and
//! versions asked for, `datasets --registry`, the dry run's plan, and the
//! tasks whose folders cannot be had (a setup error each, the run going
//! on). Under podman and docker: a dataset run end to end, resumed with
//! its repo and registry gone, and run in shards that agree. And
//! `hf:OWNER/NAME` of a Hub dataset repo made of task folders (the
//! scripted Hub of the dataset tests): read as task folders, and run
//! under an engine.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::datasets::hf_run;
use crate::harbor::{TASK_TOML, run, task_folder};
use crate::support::backend::{Backend, IMAGE, ImageTags, image_nonce, under_each_engine};
use crate::support::harness::{Fixture, RunOutput, git, onebash, path_arg};
use crate::support::hub::{Dataset as HubDataset, Hub};
use crate::support::server::{Reply, ScriptedServer};

/// A git repo at `name` whose one commit holds the task folders
/// `tasks/<task>` of `folders` (each as harbor.rs's `task_folder` writes
/// it) and a `tasks/not-a-task` folder without a task.toml; returns its
/// path and the commit.
fn repo_of_tasks(
    fixture: &Fixture,
    name: &str,
    folders: &[(&str, Vec<(&str, String)>)],
) -> (PathBuf, String) {
    let repo = fixture.path(name);
    for (task, files) in folders {
        let files: Vec<(&str, &str)> = files.iter().map(|(p, c)| (*p, c.as_str())).collect();
        task_folder(&repo.join("tasks"), task, &files);
    }
    task_folder(
        &repo.join("tasks"),
        "not-a-task",
        &[("README.md", "no task here\n")],
    );
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "-A"]);
    git(
        &repo,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "-m",
            "tasks",
        ],
    );
    let sha = git(&repo, &["rev-parse", "HEAD"]);
    (repo, sha)
}

/// A task folder's files whose image is the test image (labelled with the
/// test's `nonce`, to be its own) and whose verifier gives the reward
/// `reward` whatever the agent did, or 1 when /app/out.txt says `done`
/// (what its solution writes).
fn folder_files(reward: Option<&str>, nonce: &str) -> Vec<(&'static str, String)> {
    let test = match reward {
        Some(reward) => format!("echo {reward} > /logs/verifier/reward.txt\n"),
        None => "if [ \"$(cat /app/out.txt)\" = done ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n".to_owned(),
    };
    vec![
        ("task.toml", TASK_TOML.to_owned()),
        ("instruction.md", "Write done to /app/out.txt.\n".to_owned()),
        (
            "environment/Dockerfile",
            format!(
                "FROM {IMAGE}\nLABEL onebash.test-nonce=\"{nonce}\"\nWORKDIR /app\nRUN echo seed > /app/seed.txt\n"
            ),
        ),
        ("tests/test.sh", test),
        ("solution/solve.sh", "echo done > /app/out.txt\n".to_owned()),
    ]
}

/// The repo `bench` (as [`repo_of_tasks`] makes it) of the tasks `copy`
/// (rewarded for what its solution writes) and `half` (rewarded 0.5), of
/// one environment: one image, the test's own.
fn copy_and_half(fixture: &Fixture) -> (PathBuf, String) {
    let nonce = image_nonce();
    repo_of_tasks(
        fixture,
        "bench",
        &[
            ("copy", folder_files(None, &nonce)),
            ("half", folder_files(Some("0.5"), &nonce)),
        ],
    )
}

/// Writes to `file` a registry whose dataset `demo@1.0` is the tasks of
/// [`copy_and_half`]'s repo `url` at `sha`.
fn demo_of_copy_and_half(file: &Path, url: &str, sha: &str) -> PathBuf {
    registry(
        file,
        &[(
            "demo",
            "1.0",
            vec![
                entry("copy", url, sha, "tasks/copy"),
                entry("half", url, sha, "tasks/half"),
            ],
        )],
    )
}

/// A registry entry of a task.
fn entry(name: &str, git_url: &str, commit: &str, path: &str) -> Value {
    json!({"name": name, "git_url": git_url, "git_commit_id": commit, "path": path})
}

/// Writes a registry of `datasets` (name, version, tasks) to `file`.
fn registry(file: &Path, datasets: &[(&str, &str, Vec<Value>)]) -> PathBuf {
    let list: Vec<Value> = datasets
        .iter()
        .map(|(name, version, tasks)| {
            json!({"name": name, "version": version, "description": format!("{name} tasks\nmore"), "tasks": tasks})
        })
        .collect();
    std::fs::write(file, serde_json::to_string_pretty(&list).expect("json")).expect("write");
    file.to_owned()
}

/// `onebash ARGS` with the fixture's cache.
fn onebash_in(fixture: &Fixture, args: &[&str]) -> RunOutput {
    let out = fixture.path("unused");
    let output = onebash()
        .args(args)
        .arg("--cache-dir")
        .arg(fixture.path("cache"))
        .output()
        .expect("run onebash");
    RunOutput::of(output, &out)
}

/// The tasks' folders that cannot be had, on the host (they need no
/// engine: they never start): a repo that does not exist, a commit the
/// repo lacks, a path that is not a task folder. Each is a setup_error row
/// saying why, the run goes on to the next, and run.json records the
/// registry, its sha256, the dataset and version chosen, and each task's
/// repo, path and commit read.
#[test]
fn harbor_registry_tasks_that_cannot_be_had_are_setup_errors() {
    let fixture = Fixture::new();
    let (repo, sha) = repo_of_tasks(
        &fixture,
        "bench",
        &[("copy", folder_files(None, &image_nonce()))],
    );
    let url = path_arg(&repo);
    let gone = fixture.path("nowhere/repo");
    let missing = "0".repeat(40);
    let file = registry(
        &fixture.path("registry.json"),
        &[
            ("demo", "1.0", vec![entry("old", url, &sha, "tasks/copy")]),
            (
                "demo",
                "2.0",
                vec![
                    entry("gone", path_arg(&gone), &sha, "tasks/gone"),
                    entry("lost", url, &missing, "tasks/lost"),
                    entry("not-a-task", url, &sha, "tasks/not-a-task"),
                ],
            ),
        ],
    );
    let run = run(
        &fixture,
        Path::new("harbor:demo"),
        "out",
        &[
            "--registry",
            path_arg(&file),
            "--model",
            "noop",
            "--env",
            "host",
        ],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    let expected = [
        (
            "gone",
            format!("repo path {} does not exist", gone.display()),
        ),
        (
            "lost",
            format!("failed to check out {url}@{missing}: no such commit"),
        ),
        (
            "not-a-task",
            format!("failed to read the task folder tasks/not-a-task of {url}"),
        ),
    ];
    for (task, says) in &expected {
        let row = run.row(task);
        assert_eq!(row["status"], "error", "{row:?}");
        assert_eq!(row["exit_reason"], "setup_error", "{row:?}");
        assert!(row["error"].contains(says.as_str()), "{says}: {row:?}");
    }
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(run.out.join("run.json")).expect("run.json"))
            .expect("json");
    let record = &manifest["settings"]["registry"];
    assert_eq!(record["reference"], "harbor:demo", "{record}");
    assert_eq!(record["dataset"], "demo@2.0", "{record}");
    assert_eq!(record["registry"], path_arg(&file), "{record}");
    let bytes = std::fs::read(&file).expect("registry");
    let sha256: String = {
        use sha2::Digest as _;
        sha2::Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    assert_eq!(record["registry_sha256"], sha256.as_str(), "{record}");
    let tasks = record["tasks"].as_array().expect("tasks");
    assert_eq!(tasks.len(), 3, "{record}");
    assert_eq!(tasks[2]["commit"], sha.as_str(), "{record}");
    assert_eq!(tasks[2]["path"], "tasks/not-a-task", "{record}");
    assert!(tasks[0].get("commit").is_none(), "{record}");
}

/// A name the registry lacks lists the close ones; a version it lacks
/// lists the dataset's; a registry that cannot be read says which; each
/// is exit 2 before any task runs.
#[test]
fn harbor_registry_names_and_versions_it_lacks_are_named() {
    let fixture = Fixture::new();
    let file = registry(
        &fixture.path("registry.json"),
        &[
            ("terminal-bench", "2.0", vec![entry("a", "/x", "HEAD", "a")]),
            (
                "terminal-bench",
                "head",
                vec![entry("a", "/x", "HEAD", "a")],
            ),
        ],
    );
    let registry_arg = ["--registry", path_arg(&file), "--model", "noop"];
    let cases: &[(&str, &[&str], String)] = &[
        (
            "harbor:terminal-bnch",
            &registry_arg,
            format!(
                "failed to find the dataset terminal-bnch in the registry {}\nhint: did you mean terminal-bench?",
                file.display()
            ),
        ),
        (
            "harbor:terminal-bench@1.0",
            &registry_arg,
            "failed to find version 1.0 of the dataset terminal-bench".to_owned(),
        ),
        (
            "harbor:terminal-bench@1.0",
            &registry_arg,
            "hint: its versions are 2.0, head".to_owned(),
        ),
        (
            "harbor:@2.0",
            &registry_arg,
            "the dataset's name is empty".to_owned(),
        ),
        (
            "harbor:terminal-bench",
            &[
                "--registry",
                "/nonexistent/registry.json",
                "--model",
                "noop",
            ],
            "failed to read the registry /nonexistent/registry.json".to_owned(),
        ),
    ];
    for (i, (tasks, args, says)) in cases.iter().enumerate() {
        let run = run(&fixture, Path::new(tasks), &format!("out{i}"), args);
        assert_eq!(run.code, 2, "{tasks}: {}", run.stderr);
        assert!(run.stderr.contains(says.as_str()), "{says}\n{}", run.stderr);
        assert!(!run.out.join("results.csv").exists());
    }
    // `--registry` with tasks of another kind is said to be unread.
    let folder = fixture.path("folder");
    task_folder(
        &folder,
        "one",
        &[
            ("task.toml", TASK_TOML),
            ("instruction.md", "x\n"),
            ("environment/Dockerfile", "FROM scratch\n"),
            ("tests/test.sh", "true\n"),
        ],
    );
    let other = run(
        &fixture,
        &folder,
        "out-folder",
        &[&registry_arg[..], &["--dry-run", "--env", "podman"]].concat(),
    );
    assert!(
        other.stdout.contains(&format!(
            "warning: --registry {} is not read: {} is not a registry's dataset",
            file.display(),
            folder.display()
        )),
        "{}\n{}",
        other.stdout,
        other.stderr
    );
    std::fs::write(&file, "{\"not\": \"a list\"}").expect("write");
    let run = run(&fixture, Path::new("harbor:x"), "out-json", &registry_arg);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("it is not a registry.json"),
        "{}",
        run.stderr
    );
}

/// `datasets --registry` lists a registry's datasets as `run` takes them,
/// from a file or a URL (a scripted server); the dry run shows the
/// dataset chosen from a URL and each task's repo, commit and path.
#[test]
fn harbor_registry_datasets_are_listed_and_planned_from_a_url() {
    let fixture = Fixture::new();
    let (repo, sha) = repo_of_tasks(
        &fixture,
        "bench",
        &[("copy", folder_files(None, &image_nonce()))],
    );
    let url = path_arg(&repo);
    let file = registry(
        &fixture.path("registry.json"),
        &[
            ("demo", "1.0", vec![entry("old", url, &sha, "tasks/copy")]),
            (
                "demo",
                "1.10",
                vec![
                    entry("copy", url, &sha, "tasks/copy"),
                    entry("lost", url, &"0".repeat(40), "tasks/lost"),
                    // No commit: the repo's HEAD, resolved and shown.
                    json!({"name": "nt", "git_url": url, "path": "tasks/not-a-task"}),
                ],
            ),
        ],
    );
    let listed = onebash_in(&fixture, &["datasets", "--registry", path_arg(&file)]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(
        listed.stdout.contains("harbor:demo@1.0 ") && listed.stdout.contains("harbor:demo@1.10 "),
        "{}",
        listed.stdout
    );
    assert!(
        listed.stdout.contains("3 tasks  demo tasks\n"),
        "{}",
        listed.stdout
    );
    let body = std::fs::read_to_string(&file).expect("read");
    let server = ScriptedServer::start_with(move |_| Reply::Raw(body.clone()));
    let registry_url = format!("{}/registry.json", server.base_url());
    let listed = onebash_in(&fixture, &["datasets", "--registry", &registry_url]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(
        listed.stdout.contains("harbor:demo@1.10 "),
        "{}",
        listed.stdout
    );
    assert!(
        listed
            .stdout
            .contains(&format!("in {registry_url} (sha256 ")),
        "{}",
        listed.stdout
    );
    let plan = run(
        &fixture,
        Path::new("harbor:demo"),
        "out",
        &[
            "--registry",
            &registry_url,
            "--model",
            "oracle",
            "--env",
            "podman",
            "--dry-run",
        ],
    );
    assert!(
        plan.stdout
            .contains(&format!("registry: {registry_url} (sha256 "))
            && plan.stdout.contains("dataset demo@1.10"),
        "{}\n{}",
        plan.stdout,
        plan.stderr
    );
    assert!(
        plan.stdout
            .contains(&format!("  copy  {url}@{sha} tasks/copy\n")),
        "{}",
        plan.stdout
    );
    assert!(
        plan.stdout.contains("  lost  ") && plan.stdout.contains("cannot run: failed to check out"),
        "{}",
        plan.stdout
    );
    assert!(
        plan.stdout.contains(&format!(
            "  not-a-task  {url}@{sha} tasks/not-a-task  cannot run: failed to read the task folder"
        )),
        "{}",
        plan.stdout
    );
    let failing = ScriptedServer::start_with(|_| Reply::Status(404, "{}".to_owned()));
    let missing = format!("{}/registry.json", failing.base_url());
    let listed = onebash_in(&fixture, &["datasets", "--registry", &missing]);
    assert_eq!(listed.code, 2, "{}", listed.stderr);
    assert!(
        listed.stderr.contains(&format!(
            "failed to fetch the registry {missing}: the server answered 404"
        )),
        "{}",
        listed.stderr
    );
}

/// A registry's dataset run end to end in an engine with the oracle: the
/// tasks pass or get their reward, a task whose repo does not exist is a
/// setup error and the run goes on; resumed with the repo and the
/// registry gone, the run reads its tasks from run.json and the cache
/// (no fetch) and retries the errored task alone; two shards read the
/// same commits and merge.
fn harbor_registry_runs_end_to_end_in_an_engine(backend: Backend) {
    let fixture = Fixture::new();
    let (repo, sha) = copy_and_half(&fixture);
    let url = path_arg(&repo).to_owned();
    let gone = fixture.path("nowhere/repo");
    let file = registry(
        &fixture.path("registry.json"),
        &[(
            "demo",
            "1.0",
            vec![
                entry("copy", &url, &sha, "tasks/copy"),
                entry("gone", path_arg(&gone), &sha, "tasks/gone"),
                entry("half", &url, &sha, "tasks/half"),
            ],
        )],
    );
    let engine = backend.engine().expect("an engine");
    let args = [
        "--registry",
        path_arg(&file),
        "--model",
        "oracle",
        "--env",
        engine,
        "--pull",
        "never",
    ];
    // The first attempt runs two of the three (its folders are all
    // fetched all the same: the tasks are read whole, then selected).
    let mut some = args.to_vec();
    some.extend(["--filter", "^(gone|half)$"]);
    let first = run(&fixture, Path::new("harbor:demo@1.0"), "out", &some);
    assert_eq!(first.code, 1, "{}", first.stderr);
    let image = first.trajectory("half")[0]["task"]["image"]
        .as_str()
        .expect("image")
        .to_owned();
    let _cleanup = ImageTags(vec![image]);
    assert_eq!(first.row("half")["reward"], "0.5", "{}", first.stderr);
    assert_eq!(first.row("gone")["exit_reason"], "setup_error");
    assert!(!first.task_dir("copy").exists());

    // Neither the repo nor the registry is there any more: the resume
    // reads the tasks and commits from run.json and the folders from the
    // cache, runs the task left (its first run) and retries the error.
    std::fs::rename(&repo, fixture.path("bench-moved")).expect("move the repo");
    std::fs::remove_file(&file).expect("remove the registry");
    let mut again = args.to_vec();
    again.extend(["--resume", "--retry-errors"]);
    let resumed = run(&fixture, Path::new("harbor:demo@1.0"), "out", &again);
    assert_eq!(resumed.code, 1, "{}", resumed.stderr);
    let copy = resumed.row("copy");
    assert_eq!(copy["status"], "passed", "{copy:?}\n{}", resumed.stderr);
    assert_eq!(copy["reward"], "1.0", "{copy:?}");
    assert_eq!(resumed.row("half")["reward"], "0.5");
    assert!(
        !resumed.stderr.contains("could not refresh"),
        "{}",
        resumed.stderr
    );
    assert_eq!(resumed.row("gone")["exit_reason"], "setup_error");
    assert!(!resumed.stderr.contains("registry"), "{}", resumed.stderr);

    // The repo back (the registry still gone), two shards on the same
    // registry file read the same commits and merge.
    std::fs::rename(fixture.path("bench-moved"), &repo).expect("move back");
    demo_of_copy_and_half(&file, &url, &sha);
    let mut shards = Vec::new();
    for shard in ["1/2", "2/2"] {
        let mut with_shard = args.to_vec();
        with_shard.extend(["--shard", shard]);
        let out = format!("shard-{}", &shard[..1]);
        let output = run(&fixture, Path::new("harbor:demo@1.0"), &out, &with_shard);
        assert_eq!(output.code, 0, "{shard}: {}", output.stderr);
        let manifest: Value =
            serde_json::from_slice(&std::fs::read(output.out.join("run.json")).expect("run.json"))
                .expect("json");
        shards.push((output.out.clone(), manifest["settings"]["registry"].clone()));
    }
    assert_eq!(shards[0].1, shards[1].1);
    let commits: Vec<&str> = shards[0].1["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|task| task["commit"].as_str().expect("commit"))
        .collect();
    assert_eq!(commits, [sha.as_str(), sha.as_str()]);
    let merged = onebash()
        .arg("merge")
        .arg(fixture.path("merged"))
        .arg(&shards[0].0)
        .arg(&shards[1].0)
        .output()
        .expect("merge");
    assert!(
        merged.status.success(),
        "{}",
        String::from_utf8_lossy(&merged.stderr)
    );
}

under_each_engine!(
    harbor_registry_runs_end_to_end,
    super::harbor_registry_runs_end_to_end_in_an_engine
);

/// A Hub dataset repo of Harbor task folders, as the Terminal-Bench
/// mirrors are: `tasks/copy` (its environment copies a file of its own
/// context, kept in LFS) and `tasks/half`, whose task.toml has a key
/// Harbor does not read (`colour`), beside a README; their image labelled
/// with the test's `nonce`.
fn task_folders_repo(id: &str, nonce: &str) -> HubDataset {
    let mut dataset = HubDataset::new(id).file("README.md", "# task folders\n");
    for (task, reward) in [("copy", None), ("half", Some("0.5"))] {
        for (path, content) in folder_files(reward, nonce) {
            let content = match path {
                "task.toml" if task == "half" => format!("colour = \"red\"\n{content}"),
                "environment/Dockerfile" => format!(
                    "FROM {IMAGE}\nLABEL onebash.test-nonce=\"{nonce}\"\nWORKDIR /app\nCOPY seed.txt /app/seed.txt\n"
                ),
                _ => content,
            };
            dataset = dataset.file(&format!("tasks/{task}/{path}"), content);
        }
        dataset = dataset.lfs(&format!("tasks/{task}/environment/seed.txt"), "seed\n");
    }
    dataset
}

/// A Hub dataset repo made of task folders is read as its task folders:
/// on the host the run is refused as Harbor tasks are (so they were read
/// as such), and the dry run under an engine lists them and the dataset's
/// commit, its split `folders`, and warns of a task.toml key Harbor does
/// not read.
#[test]
fn harbor_task_folders_of_a_hub_dataset_are_read_as_task_folders() {
    let fixture = Fixture::new();
    let nonce = image_nonce();
    let hub = Hub::start();
    let sha = hub.publish(task_folders_repo("acme/tb", &nonce));
    let endpoint = hub.endpoint();
    let host = hf_run(
        &fixture,
        &endpoint,
        "host",
        "hf:acme/tb",
        &["-m", "noop"],
        &[],
    );
    assert_eq!(host.code, 2, "{}", host.stderr);
    assert!(
        host.stderr
            .contains("Harbor tasks (such as copy) run in the image"),
        "{}",
        host.stderr
    );
    let plan = hf_run(
        &fixture,
        &endpoint,
        "plan",
        "hf:acme/tb",
        &["-m", "oracle", "--env", "podman", "--dry-run"],
        &[],
    );
    assert!(
        plan.stdout.contains(&format!(
            "dataset:  hf:acme/tb = hf:acme/tb split folders, revision main at {sha}"
        )),
        "{}\n{}",
        plan.stdout,
        plan.stderr
    );
    // Its keys Harbor does not read are warned of, as a folder's are.
    assert!(
        plan.stdout.contains(
            "task.toml key `colour` is not one Harbor 0.26 reads; it is ignored (in half)"
        ),
        "{}",
        plan.stdout
    );
    assert!(
        plan.stdout
            .contains("\n  copy  localhost/onebash-harbor:env-")
            && plan
                .stdout
                .contains("\n  half  localhost/onebash-harbor:env-"),
        "{}",
        plan.stdout
    );
    // A split named is the rows of that split, as for any dataset.
    let split = hf_run(
        &fixture,
        &endpoint,
        "split",
        "hf:acme/tb:test",
        &["-m", "noop"],
        &[],
    );
    assert_eq!(split.code, 2, "{}", split.stderr);
    assert!(split.stderr.contains("no split"), "{}", split.stderr);
}

/// The task folders of a Hub dataset run end to end in an engine: their
/// images built from the copied folders (a file of the build context kept
/// in LFS), the oracle's solution, the verifier's reward.
fn harbor_task_folders_of_a_hub_dataset_run_in_an_engine(backend: Backend) {
    let fixture = Fixture::new();
    let nonce = image_nonce();
    let hub = Hub::start();
    hub.publish(task_folders_repo("acme/tb", &nonce));
    let engine = backend.engine().expect("an engine");
    let run = hf_run(
        &fixture,
        &hub.endpoint(),
        "out",
        "hf:acme/tb",
        &["-m", "oracle", "--env", engine, "--pull", "never"],
        &[],
    );
    let image = run.trajectory("copy")[0]["task"]["image"]
        .as_str()
        .expect("image")
        .to_owned();
    let _cleanup = ImageTags(vec![image]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.row("copy")["reward"], "1.0", "{}", run.stderr);
    assert_eq!(run.row("half")["reward"], "0.5");
}

under_each_engine!(
    harbor_task_folders_of_a_hub_dataset_run,
    super::harbor_task_folders_of_a_hub_dataset_run_in_an_engine
);

/// The images a test's task folders build, from its dry run's plan: each
/// task's `localhost/onebash-harbor:env-…` tag, by task.
fn planned_images(plan: &RunOutput) -> Vec<(String, String)> {
    plan.stdout
        .lines()
        .filter_map(|line| {
            let (task, rest) = line.strip_prefix("  ")?.split_once("  ")?;
            let image = rest
                .split_whitespace()
                .find(|word| word.starts_with("localhost/onebash-harbor:env-"))?;
            Some((task.to_owned(), image.to_owned()))
        })
        .collect()
}

/// The engine tests' task folders build images of their test's own.
/// onebash tags a folder's image by its environment's content, and a
/// test's `ImageTags` removes its tags with `podman rmi -f`, which removes
/// every container of the image, in any process: when two tests' folders
/// had the same content (a test's podman and docker variants in one CI
/// run, or the same test run by two processes at once), the first to end
/// removed the other's live container mid-task ("no container with name
/// or ID ... found"). Within one test its tasks of one environment share
/// an image, which its one `ImageTags` removes.
#[test]
fn harbor_registry_engine_fixtures_build_images_of_their_own() {
    let plans: Vec<Vec<(String, String)>> = (0..2)
        .flat_map(|_| {
            let fixture = Fixture::new();
            let (repo, sha) = copy_and_half(&fixture);
            let url = path_arg(&repo);
            let file = demo_of_copy_and_half(&fixture.path("registry.json"), url, &sha);
            let dry = ["-m", "oracle", "--env", "podman", "--dry-run"];
            let by_name = run(
                &fixture,
                Path::new("harbor:demo@1.0"),
                "plan",
                &[&["--registry", path_arg(&file)][..], &dry].concat(),
            );
            let hub = Hub::start();
            hub.publish(task_folders_repo("acme/tb", &image_nonce()));
            let of_hub = hf_run(&fixture, &hub.endpoint(), "hub", "hf:acme/tb", &dry, &[]);
            [planned_images(&by_name), planned_images(&of_hub)]
        })
        .collect();
    for plan in &plans {
        assert_eq!(plan.len(), 2, "{plan:?}");
        assert_eq!(plan[0].1, plan[1].1, "one image a test: {plan:?}");
    }
    let images: std::collections::HashSet<&str> =
        plans.iter().map(|plan| plan[0].1.as_str()).collect();
    assert_eq!(images.len(), plans.len(), "shared images: {plans:?}");
}
