//! Harbor task folders (`task.toml`, `instruction.md`,
//! `environment/Dockerfile`, `tests/test.sh`, `solution/solve.sh`),
//! written here from Harbor's documentation, run end to end under podman
//! and docker: the image built from `environment/` (FROM the local test
//! image, so no network), the oracle running `solve.sh`, the verifier's
//! reward deciding. Skipped when the engine or the test image is missing,
//! as tests/it/container.rs.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::harness::{Fixture, RunOutput, onebash};

use crate::support::backend::{Backend, IMAGE, ImageTags, image_nonce, under_each_engine};

/// Writes one task folder: `files` are (relative path, content); `.sh`
/// files are made executable.
pub(crate) fn task_folder(root: &Path, name: &str, files: &[(&str, &str)]) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = root.join(name);
    for (relative, content) in files {
        let path = dir.join(relative);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, content).expect("write");
        if relative.ends_with(".sh") {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
    }
    dir
}

/// `onebash run PATH -o OUT ARGS`, without the JSONL fixtures' patch check
/// (a Harbor task has no repo: its patch.diff is empty).
pub(crate) fn run(fixture: &Fixture, path: &Path, out: &str, args: &[&str]) -> RunOutput {
    let out = fixture.path(out);
    let output = onebash()
        .arg("run")
        .arg(path)
        .arg("-o")
        .arg(&out)
        .arg("--cache-dir")
        .arg(fixture.path("cache"))
        .args(args)
        .output()
        .expect("run onebash");
    RunOutput {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        out,
    }
}

pub(crate) const TASK_TOML: &str = r#"version = "1.0"

[metadata]
author_name = "onebash tests"
difficulty = "easy"
category = "file-operations"
tags = ["trivial"]

[verifier]
timeout_sec = 120.0
env = { EXPECTED = "seed from the image" }

[agent]
timeout_sec = 300.0

[environment]
build_timeout_sec = 600.0
cpus = 1
memory_mb = 1024
storage_mb = 10240
"#;

/// What the good environment's build prints: it goes to build.log, never
/// to the run's stderr.
const BUILD_SAYS: &str = "the image build says hello";

/// A folder of three tasks sharing one environment (one image, built
/// once), after one whose Dockerfile fails: `a-broken` (setup_error),
/// `copy-seed` (reward 1 or 0) and `half-credit` (reward 0.5 always).
/// What the failing step of `a-broken`'s Dockerfile echoes: a word of
/// this test's own, so that a container it left is found as this test's.
fn broken_step(nonce: &str) -> String {
    let word: String = nonce.chars().filter(char::is_ascii_alphanumeric).collect();
    format!("in-step-{word}")
}

/// The command lines of every container of `engine`, running or not.
fn container_commands(engine: &str) -> String {
    let output = Command::new(engine)
        .args(["ps", "-a", "--no-trunc", "--format", "{{.Command}}"])
        .output()
        .unwrap_or_else(|err| panic!("{engine} ps: {err}"));
    assert!(output.status.success(), "{engine} ps");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn three_tasks(root: &Path, nonce: &str) {
    let dockerfile = format!(
        "FROM {IMAGE}\nLABEL onebash.test-nonce=\"{nonce}\"\nWORKDIR /app\nRUN echo 'seed from the image' > /app/seed.txt\nRUN echo '{BUILD_SAYS}'\n"
    );
    task_folder(
        root,
        "a-broken",
        &[
            ("task.toml", TASK_TOML),
            ("instruction.md", "Anything.\n"),
            (
                "environment/Dockerfile",
                &format!(
                    "FROM {IMAGE}\nRUN echo the build breaks here {} && exit 3\n",
                    broken_step(nonce)
                ),
            ),
            ("tests/test.sh", "echo 1 > /logs/verifier/reward.txt\n"),
            ("solution/solve.sh", "true\n"),
        ],
    );
    task_folder(
        root,
        "copy-seed",
        &[
            ("task.toml", TASK_TOML),
            (
                "instruction.md",
                "Copy the first line of /app/seed.txt to /app/out.txt.\n",
            ),
            ("environment/Dockerfile", &dockerfile),
            // test.sh runs in the image's WORKDIR with /tests and the
            // verifier's env, and its helper file copied beside it; it
            // also sees a file the agent wrote outside the WORKDIR, as
            // the verifier runs in the agent's container.
            (
                "tests/test.sh",
                "#!/bin/bash\necho \"verifier in $(pwd)\"\ncd /app || exit 1\nif [ \"$(pwd)\" = /app ] && [ \"$(cat out.txt)\" = \"$EXPECTED\" ] && grep -qx 'seed from the image' /tests/expected.txt && [ -e /var/tmp/oracle-was-here ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n",
            ),
            ("tests/expected.txt", "seed from the image\n"),
            (
                "solution/solve.sh",
                "#!/bin/bash\nset -e\nhead -n 1 seed.txt > /app/out.txt\ntouch /var/tmp/oracle-was-here\nsource /solution/lib/helper.sh\n",
            ),
            ("solution/lib/helper.sh", "echo helper sourced\n"),
        ],
    );
    task_folder(
        root,
        "half-credit",
        &[
            ("task.toml", TASK_TOML),
            ("instruction.md", "Do half of it.\n"),
            ("environment/Dockerfile", &dockerfile),
            (
                "tests/test.sh",
                "#!/bin/bash\necho '{\"reward\": 0.5}' > /logs/verifier/reward.json\nexit 1\n",
            ),
            ("solution/solve.sh", "#!/bin/bash\ntrue\n"),
        ],
    );
}

/// The oracle passes and noop fails, the reward decides (0.5 is recorded
/// and fails), a broken Dockerfile is a setup_error row that leaves no
/// container of its failed step and the next task still runs, the image is
/// tagged by its environment's content and a rerun reuses it, a build's
/// output is in the build.log of the task that built it and not on stderr,
/// and nothing is left running.
fn harbor_task_folders_run_end_to_end_in_an_engine(backend: Backend) {
    let fixture = Fixture::new();
    let root = fixture.path("harbor");
    let nonce = image_nonce();
    three_tasks(&root, &nonce);
    let engine = backend.engine().expect("an engine");
    let in_engine = ["--env", engine, "--pull", "never"];

    let mut args = vec!["--model", "oracle"];
    args.extend(in_engine);
    let oracle = run(&fixture, &root, "oracle", &args);
    let built: Vec<&str> = oracle
        .stderr
        .lines()
        .filter(|l| l.contains(": built the image localhost/onebash-harbor:env-"))
        .collect();
    let image = oracle.trajectory("copy-seed")[0]["task"]["image"]
        .as_str()
        .expect("image")
        .to_owned();
    let cleanup = ImageTags(vec![image.clone()]);
    assert_eq!(oracle.code, 1, "a task errored:\n{}", oracle.stderr);
    // Harbor's default network is public; this run gives none, and says so
    // once for all three.
    assert_eq!(
        oracle
            .stderr
            .matches("3 selected tasks ask for the network (`environment.network_mode` = \"public\", Harbor's default for a-broken), which this run does not give: their commands, and their tests, run without it")
            .count(),
        1,
        "{}",
        oracle.stderr
    );
    let broken = oracle.row("a-broken");
    assert_eq!(broken["status"], "error", "{broken:?}");
    assert_eq!(broken["exit_reason"], "setup_error", "{broken:?}");
    assert!(
        broken["error"].contains("failed to build the image")
            && broken["error"].contains("the build breaks here")
            && broken["error"].contains("the whole output is in build.log"),
        "{broken:?}"
    );
    let broken_log = std::fs::read_to_string(oracle.task_dir("a-broken").join("build.log"))
        .expect("a-broken's build.log");
    assert!(
        broken_log.contains("RUN echo the build breaks here"),
        "{broken_log}"
    );
    let passed = oracle.row("copy-seed");
    assert_eq!(passed["status"], "passed", "{passed:?}\n{}", oracle.stderr);
    assert_eq!(passed["reward"], "1.0", "{passed:?}");
    let half = oracle.row("half-credit");
    assert_eq!(half["status"], "failed", "{half:?}");
    assert_eq!(half["reward"], "0.5", "{half:?}");
    assert_eq!(half["test_exit_code"], "1", "{half:?}");
    // Both good tasks share one environment: one image, built once, its
    // output in the build.log of the task that built it, a warning on
    // stderr saying where, and none of the output itself.
    assert_eq!(
        oracle.trajectory("half-credit")[0]["task"]["image"],
        image.as_str()
    );
    assert_eq!(built.len(), 1, "{}", oracle.stderr);
    assert!(built[0].starts_with("warning: "), "{built:?}");
    assert!(built[0].contains(&image), "{built:?}");
    let logs: Vec<(&str, String)> = ["copy-seed", "half-credit"]
        .into_iter()
        .filter_map(|task| {
            let log = std::fs::read_to_string(oracle.task_dir(task).join("build.log"));
            log.ok().map(|log| (task, log))
        })
        .collect();
    assert_eq!(logs.len(), 1, "one build, one build.log: {logs:?}");
    let (builder, log) = &logs[0];
    // podman says "STEP 1/2", docker's legacy builder "Step 1/2".
    let first_step = |text: &str| text.to_lowercase().contains("step 1/");
    assert!(log.contains(BUILD_SAYS) && first_step(log), "{log}");
    assert!(
        built[0].contains(&format!("{builder}: built the image")),
        "{built:?}"
    );
    assert!(
        !oracle.stderr.contains(BUILD_SAYS) && !first_step(&oracle.stderr),
        "a build's output reached stderr:\n{}",
        oracle.stderr
    );
    // task.toml's timeouts are the task's own.
    let settings = &oracle.trajectory("copy-seed")[0]["settings"];
    assert_eq!(settings["task_timeout_s"], 300.0, "{settings}");
    assert_eq!(settings["test_timeout_s"], 120.0, "{settings}");
    let log =
        std::fs::read_to_string(oracle.task_dir("copy-seed").join("test.log")).expect("test.log");
    assert!(log.contains("verifier in /app"), "{log}");

    let mut args = vec!["--model", "noop"];
    args.extend(in_engine);
    let noop = run(&fixture, &root, "noop", &args);
    let failed = noop.row("copy-seed");
    assert_eq!(failed["status"], "failed", "{failed:?}\n{}", noop.stderr);
    assert_eq!(failed["reward"], "0.0", "{failed:?}");
    assert!(
        !noop.stderr.contains(&format!("built the image {image}"))
            && !noop.task_dir("copy-seed").join("build.log").exists()
            && !noop.task_dir("half-credit").join("build.log").exists(),
        "the image was built again:\n{}",
        noop.stderr
    );
    assert!(
        noop.task_dir("a-broken").join("build.log").exists(),
        "the broken one is tried again:\n{}",
        noop.stderr
    );
    // Docker's classic builder keeps a failed step's container unless
    // told otherwise.
    let commands = container_commands(engine);
    assert!(
        !commands.contains(&broken_step(&nonce)),
        "the broken build left a container:\n{commands}"
    );
    for task in ["copy-seed", "half-credit"] {
        assert!(
            backend
                .containers(&format!("onebash.task={task}"))
                .is_empty(),
            "a container of {task} was left"
        );
    }
    drop(cleanup);
}

under_each_engine!(
    harbor_task_folders_run_end_to_end,
    super::harbor_task_folders_run_end_to_end_in_an_engine
);

/// A malformed task.toml stops the run before any task (exit 2) with the
/// file and the field named; a folder holding no task says so.
#[test]
fn harbor_a_malformed_task_toml_names_the_file_and_the_field() {
    let fixture = Fixture::new();
    let root = fixture.path("bad");
    let files = |toml: &'static str| {
        [
            ("task.toml", toml),
            ("instruction.md", "x\n"),
            ("environment/Dockerfile", "FROM scratch\n"),
            ("tests/test.sh", "true\n"),
        ]
    };
    task_folder(&root, "good", &files(TASK_TOML));
    task_folder(
        &root,
        "slow",
        &files("[verifier]\ntimeout_sec = \"two minutes\"\n"),
    );
    task_folder(&root, "broken-toml", &files("[agent\ntimeout_sec = 1\n"));
    task_folder(&root, "no-tests", &files(TASK_TOML)[..3]);
    let run = run(&fixture, &root, "out", &["--model", "noop"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    // Each bad folder is named with what is wrong in it.
    let path = |rel: &str| root.join(rel).display().to_string();
    for expected in [
        format!(
            "{}: `verifier.timeout_sec` must be a number of seconds, got \"two minutes\"",
            path("slow/task.toml")
        ),
        format!("{}: not valid TOML", path("broken-toml/task.toml")),
        format!("{}: cannot be read", path("no-tests/tests/test.sh")),
    ] {
        assert!(run.stderr.contains(&expected), "{expected}\n{}", run.stderr);
    }
    assert!(!run.out.join("results.csv").exists());

    let empty = fixture.path("empty");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let run2 = run_empty(&fixture, &empty);
    assert_eq!(run2.code, 2, "{}", run2.stderr);
    assert!(
        run2.stderr.contains("holds no task folder"),
        "{}",
        run2.stderr
    );
}

fn run_empty(fixture: &Fixture, path: &Path) -> RunOutput {
    run(fixture, path, "out-empty", &["--model", "noop"])
}

/// Harbor tasks need an engine to build their image: on the host the run
/// is refused before any task, with a hint.
#[test]
fn harbor_tasks_are_refused_on_the_host() {
    let fixture = Fixture::new();
    let root = fixture.path("one");
    task_folder(
        &root,
        "only",
        &[
            ("task.toml", TASK_TOML),
            ("instruction.md", "x\n"),
            ("environment/Dockerfile", "FROM scratch\n"),
            ("tests/test.sh", "true\n"),
        ],
    );
    // The folder of one task, given directly.
    let run = run(&fixture, &root.join("only"), "out", &["--model", "noop"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("Harbor tasks (such as only) run in the image")
            && run.stderr.contains("hint: run with --env podman"),
        "{}",
        run.stderr
    );
    let oracle = self::run(
        &fixture,
        &root.join("only"),
        "out2",
        &["--model", "oracle", "--env", "podman"],
    );
    assert_eq!(oracle.code, 2, "{}", oracle.stderr);
    assert!(
        oracle.stderr.contains("a solution/solve.sh"),
        "{}",
        oracle.stderr
    );
    // Nor is there an image to pull ahead: it is built when the task runs.
    let pull = crate::support::harness::onebash()
        .arg("pull")
        .arg(root.join("only"))
        .args(["--env", "podman", "--cache-dir"])
        .arg(fixture.path("cache"))
        .output()
        .expect("run onebash pull");
    let stderr = String::from_utf8_lossy(&pull.stderr);
    assert_eq!(pull.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("only is a Harbor task"), "{stderr}");
}

/// Three bugs of issue 38, under each engine: a task folder given by a
/// relative path builds (its build context was once doubled), an image
/// whose Dockerfile ends with `WORKDIR /app` and nothing that makes the
/// folder starts in it (podman 4.3 refused `-w` of a folder the image
/// lacks, and left the created container behind), a container that fails
/// to start (a memory limit the engine cannot apply) leaves nothing, and
/// a Harbor task gets the terminal prompt by default and an oracle that
/// says it ran solve.sh.
fn harbor_relative_folder_bare_workdir_and_failed_start_in_an_engine(backend: Backend) {
    let fixture = Fixture::new();
    let nonce = image_nonce();
    let dockerfile = format!("FROM {IMAGE}\nLABEL onebash.test-nonce=\"{nonce}\"\nWORKDIR /app\n");
    let test_sh = "#!/bin/bash\nif [ \"$(pwd)\" = /app ] && [ \"$(cat /app/out.txt)\" = done ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n";
    let files = |toml: &'static str| -> Vec<(&str, String)> {
        vec![
            ("task.toml", toml.to_owned()),
            ("instruction.md", "Write done to /app/out.txt.\n".to_owned()),
            ("environment/Dockerfile", dockerfile.clone()),
            ("tests/test.sh", test_sh.to_owned()),
            (
                "solution/solve.sh",
                "#!/bin/bash\necho done > out.txt\n".to_owned(),
            ),
        ]
    };
    let root = fixture.path("tasks");
    for (name, toml) in [
        ("bare-workdir", "version = \"1.0\"\ncolour = \"blue\"\n"),
        ("tiny-memory", "[environment]\nmemory_mb = 1\n"),
        ("windows-only", "[environment]\nos = \"windows\"\n"),
    ] {
        let files = files(toml);
        let files: Vec<(&str, &str)> = files.iter().map(|(p, c)| (*p, c.as_str())).collect();
        task_folder(&root, name, &files);
    }
    let engine = backend.engine().expect("an engine");
    let out = fixture.path("out");
    // The folder by a path relative to the current directory.
    let output = onebash()
        .current_dir(fixture.path(""))
        .args(["run", "tasks", "-o"])
        .arg(&out)
        .arg("--cache-dir")
        .arg(fixture.path("cache"))
        .args(["--model", "oracle", "--env", engine, "--pull", "never"])
        .output()
        .expect("run onebash");
    let run = RunOutput {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        out,
    };
    let image = run.trajectory("bare-workdir")[0]["task"]["image"]
        .as_str()
        .expect("image")
        .to_owned();
    let _cleanup = ImageTags(vec![image]);
    let bare = run.row("bare-workdir");
    assert_eq!(bare["status"], "passed", "{bare:?}\n{}", run.stderr);
    assert!(bare["prompt"].starts_with("terminal@"), "{bare:?}");
    let trajectory = serde_json::to_string(&run.trajectory("bare-workdir")).expect("json");
    assert!(
        trajectory.contains("Ran solution/solve.sh.") && !trajectory.contains("gold patch"),
        "{trajectory}"
    );
    assert!(
        trajectory.contains("solving a task in a Linux container"),
        "the terminal prompt: {trajectory}"
    );
    // A key onebash cannot honour stops its task, named; a key Harbor
    // does not read is told once.
    let windows = run.row("windows-only");
    assert_eq!(windows["exit_reason"], "setup_error", "{windows:?}");
    assert!(
        windows["error"].contains("windows-only/task.toml: `environment.os` = \"windows\""),
        "{windows:?}"
    );
    assert_eq!(
        run.stderr.matches("task.toml key `colour`").count(),
        1,
        "{}",
        run.stderr
    );
    let tiny = run.row("tiny-memory");
    assert_eq!(tiny["status"], "error", "{tiny:?}\n{}", run.stderr);
    assert_eq!(run.code, 1, "{}", run.stderr);
    for task in ["bare-workdir", "tiny-memory"] {
        backend.assert_nothing_left_of(task);
    }
    assert!(
        !run.stderr.contains("left behind"),
        "a container was left:\n{}",
        run.stderr
    );
}

under_each_engine!(
    harbor_relative_folder_bare_workdir_and_failed_start,
    super::harbor_relative_folder_bare_workdir_and_failed_start_in_an_engine
);
