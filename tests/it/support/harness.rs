//! Drives the real `onebash` binary: local git repos made by the test, task
//! files, a run folder and cache per test, runs against a scripted model
//! (or no model, or a model server), and readers for what a run wrote.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use super::server::{ScriptedServer, text_reply, tool_calls_reply};

/// A temporary world for one test: repos, task file, run folder, cache.
pub struct Fixture {
    pub dir: tempfile::TempDir,
}

/// What one `onebash run` did.
pub struct RunOutput {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub out: PathBuf,
}

impl Fixture {
    pub fn new() -> Fixture {
        Fixture {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// A git repo at `name` with one commit holding `files`; returns its
    /// path and the commit's sha.
    pub fn repo(&self, name: &str, files: &[(&str, &str)]) -> (PathBuf, String) {
        let repo = self.path(name);
        std::fs::create_dir_all(&repo).expect("mkdir repo");
        git(&repo, &["init", "-q", "-b", "main"]);
        for (path, content) in files {
            let file = repo.join(path);
            std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
            std::fs::write(&file, content).expect("write file");
        }
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "initial"]);
        let sha = git(&repo, &["rev-parse", "HEAD"]);
        (repo, sha)
    }

    /// A folder of mirrors (`--repo-base`) holding `repo` as a bare clone
    /// at `owner/name.git`.
    pub fn mirrors(&self, repo: &Path, owner_name: &str) -> PathBuf {
        let mirrors = self.path("mirrors");
        let bare = mirrors.join(format!("{owner_name}.git"));
        std::fs::create_dir_all(bare.parent().expect("parent")).expect("mkdir");
        git(
            &self.path("."),
            &["clone", "-q", "--bare", path_arg(repo), path_arg(&bare)],
        );
        mirrors
    }

    /// Writes `tasks.jsonl` from JSON values, one per line.
    pub fn tasks(&self, tasks: &[Value]) -> PathBuf {
        let path = self.path("tasks.jsonl");
        let text: String = tasks.iter().map(|t| format!("{t}\n")).collect();
        std::fs::write(&path, text).expect("write tasks");
        path
    }

    /// Runs `onebash run TASKS -o <fixture>/out --cache-dir <fixture>/cache ARGS`.
    pub fn run(&self, tasks: &Path, args: &[&str]) -> RunOutput {
        self.run_with_env(tasks, args, &[])
    }

    pub fn run_with_env(&self, tasks: &Path, args: &[&str], env: &[(&str, &str)]) -> RunOutput {
        self.run_into(&self.path("out"), tasks, args, env)
    }

    /// [`Fixture::run_with_env`] with onebash started in the folder `cwd`
    /// (made if missing) instead of the test's own.
    pub fn run_with_env_in(
        &self,
        cwd: &Path,
        tasks: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> RunOutput {
        std::fs::create_dir_all(cwd).expect("make the folder onebash starts in");
        let out = self.path("out");
        let output = self
            .run_command(&out, tasks, args, env)
            .current_dir(cwd)
            .output()
            .expect("run onebash");
        RunOutput::of(output, &out)
    }

    /// Runs `tasks` against the model `model` at `base_url` (a scripted
    /// server's, or a real one's): `--model MODEL --base-url URL ARGS`.
    pub fn run_model(&self, tasks: &Path, model: &str, base_url: &str, args: &[&str]) -> RunOutput {
        let mut all = vec!["--model", model, "--base-url", base_url];
        all.extend_from_slice(args);
        self.run(tasks, &all)
    }

    /// Runs `tasks` with no agent (`--model noop`) on the host (`--sandbox
    /// none`), `args` after.
    pub fn run_noop(&self, tasks: &Path, args: &[&str]) -> RunOutput {
        let mut all = vec!["--model", "noop", "--sandbox", "none"];
        all.extend_from_slice(args);
        self.run(tasks, &all)
    }

    /// Runs `tasks` against a scripted server, as the model `scripted`.
    pub fn run_scripted(&self, tasks: &Path, server: &ScriptedServer, args: &[&str]) -> RunOutput {
        self.run_scripted_into("out", tasks, server, args)
    }

    /// [`Fixture::run_scripted`] into the run folder `<fixture>/<out>`.
    pub fn run_scripted_into(
        &self,
        out: &str,
        tasks: &Path,
        server: &ScriptedServer,
        args: &[&str],
    ) -> RunOutput {
        let base_url = server.base_url();
        let mut all = vec!["--model", "scripted", "--base-url", &base_url];
        all.extend_from_slice(args);
        self.run_into(&self.path(out), tasks, &all, &[])
    }
}

impl RunOutput {
    /// What a finished `onebash run` into `out` printed and wrote. Every
    /// patch it wrote is checked to apply with `git apply` to its task's
    /// base commit, so that every run of the test suite checks it.
    pub fn of(output: std::process::Output, out: &Path) -> RunOutput {
        assert_patches_apply(out);
        RunOutput {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            out: out.to_owned(),
        }
    }
}

/// Every whole `patch.diff` and every `model_patch` of the predictions in
/// the run folder `out` applies with `git apply --check` to the base commit
/// of its task (checked against the base's tree in a scratch index, so no
/// checkout is needed). Tasks whose repo is not a folder here are skipped.
pub fn assert_patches_apply(out: &Path) {
    let Ok(tasks) = std::fs::read_dir(out.join("tasks")) else {
        return;
    };
    // (task, epoch) -> (repo, commit) of the trajectories with a whole diff.
    let mut bases: HashMap<(String, String), (PathBuf, String)> = HashMap::new();
    for task in tasks.flatten() {
        for attempt in std::fs::read_dir(task.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let dir = attempt.path();
            let Ok(text) = std::fs::read_to_string(dir.join("trajectory.jsonl")) else {
                continue;
            };
            let events: Vec<Value> = text
                .lines()
                .filter_map(|line| serde_json::from_str(line).ok())
                .collect();
            let find = |kind: &str| events.iter().find(|e| e["event"] == kind);
            let (Some(header), Some(checkout)) = (find("header"), find("checkout")) else {
                continue;
            };
            let repo = PathBuf::from(header["repo"].as_str().unwrap_or_default());
            let commit = checkout["commit"].as_str().unwrap_or_default().to_owned();
            if !repo.is_dir() || commit.is_empty() {
                continue;
            }
            let name = attempt.file_name().to_string_lossy().into_owned();
            bases.insert(
                (task.file_name().to_string_lossy().into_owned(), name),
                (repo.clone(), commit.clone()),
            );
            let Some(diff) = find("diff") else { continue };
            let patch = std::fs::read(dir.join("patch.diff")).unwrap_or_default();
            if diff["bytes"].as_u64() == Some(patch.len() as u64) {
                assert_applies(
                    &repo,
                    &commit,
                    &patch,
                    &dir.join("patch.diff").display().to_string(),
                );
            }
        }
    }
    for entry in std::fs::read_dir(out).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(epoch) = (if name == "predictions.jsonl" {
            Some("1".to_owned())
        } else {
            name.strip_prefix("predictions.epoch-")
                .and_then(|rest| rest.strip_suffix(".jsonl"))
                .map(str::to_owned)
        }) else {
            continue;
        };
        let text = std::fs::read_to_string(entry.path()).expect("predictions");
        for line in text.lines() {
            let prediction: Value = serde_json::from_str(line).expect("prediction is JSON");
            let id = prediction["instance_id"].as_str().expect("instance_id");
            let patch = prediction["model_patch"].as_str().unwrap_or_default();
            if let Some((repo, commit)) = bases.get(&(id.to_owned(), format!("epoch-{epoch}"))) {
                assert_applies(repo, commit, patch.as_bytes(), &format!("{name}: {id}"));
            }
        }
    }
}

/// `patch` applies with `git apply --check` to `commit` of `repo`.
fn assert_applies(repo: &Path, commit: &str, patch: &[u8], what: &str) {
    if patch.is_empty() {
        return;
    }
    let scratch = tempfile::tempdir().expect("tempdir");
    let index = scratch.path().join("index");
    let patch_file = scratch.path().join("patch");
    std::fs::write(&patch_file, patch).expect("write patch");
    let git_here = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(repo)
            .env("GIT_INDEX_FILE", &index)
            .output()
            .expect("run git")
    };
    let read = git_here(&["read-tree", commit]);
    assert!(
        read.status.success(),
        "git read-tree {commit} in {}: {}",
        repo.display(),
        String::from_utf8_lossy(&read.stderr)
    );
    let patch_arg = patch_file.display().to_string();
    let check = git_here(&["apply", "--cached", "--check", &patch_arg]);
    assert!(
        check.status.success(),
        "{what} does not apply to {commit} with git apply: {}\n{}",
        String::from_utf8_lossy(&check.stderr),
        String::from_utf8_lossy(patch)
    );
}

/// The binary under test, with a clean environment of its own.
pub fn onebash() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_onebash"));
    cmd.env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env("NO_COLOR", "1");
    cmd
}

/// Runs `onebash ARGS`; returns its stdout, after checking it exited 0.
pub fn onebash_ok<S: AsRef<OsStr> + Debug>(args: &[S]) -> String {
    stdout_ok(onebash().args(args), &args)
}

/// [`onebash_ok`] in the folder `cwd`.
pub fn onebash_ok_in<S: AsRef<OsStr> + Debug>(cwd: &Path, args: &[S]) -> String {
    stdout_ok(onebash().args(args).current_dir(cwd), &args)
}

fn stdout_ok(command: &mut Command, args: &dyn Debug) -> String {
    let output = command.output().expect("run onebash");
    assert!(
        output.status.success(),
        "onebash {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("stdout is UTF-8")
}

/// A path as a command-line argument.
pub fn path_arg(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

/// Runs git in `dir` with a fixed identity; returns trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .output()
        .expect("run git");
    assert!(
        output.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// `count` tasks `t0`, `t1`... made by [`task`] with the same fields.
pub fn numbered_tasks(
    count: usize,
    repo: &Path,
    commit: &str,
    test_command: &str,
    extra: Value,
) -> Vec<Value> {
    (0..count)
        .map(|i| task(&format!("t{i}"), repo, commit, test_command, extra.clone()))
        .collect()
}

/// A task over `repo` at `commit` with `test_command`; `extra` fields are merged in.
pub fn task(id: &str, repo: &Path, commit: &str, test_command: &str, extra: Value) -> Value {
    let mut task = json!({
        "id": id,
        "repo": repo.display().to_string(),
        "base_commit": commit,
        "problem_statement": format!("Problem of task {id}."),
        "test_command": test_command,
    });
    if let (Some(map), Value::Object(extra)) = (task.as_object_mut(), extra) {
        map.extend(extra);
    }
    task
}

impl RunOutput {
    /// results.csv as maps from column to value, in file order.
    pub fn rows(&self) -> Vec<HashMap<String, String>> {
        let mut reader = csv::Reader::from_path(self.out.join("results.csv")).expect("results.csv");
        let headers = reader.headers().expect("headers").clone();
        reader
            .records()
            .map(|record| {
                let record = record.expect("record");
                headers
                    .iter()
                    .zip(record.iter())
                    .map(|(h, v)| (h.to_owned(), v.to_owned()))
                    .collect()
            })
            .collect()
    }

    /// The row of one task (epoch 1).
    pub fn row(&self, task: &str) -> HashMap<String, String> {
        self.rows()
            .into_iter()
            .find(|row| row["task_id"] == task && row["epoch"] == "1")
            .unwrap_or_else(|| panic!("no row for {task}; stderr:\n{}", self.stderr))
    }

    /// The events of one task's trajectory (epoch 1).
    pub fn trajectory(&self, task: &str) -> Vec<Value> {
        let path = self.task_dir(task).join("trajectory.jsonl");
        std::fs::read_to_string(&path)
            .unwrap_or_else(|err| panic!("{}: {err}", path.display()))
            .lines()
            .map(|line| serde_json::from_str(line).expect("trajectory line is JSON"))
            .collect()
    }

    pub fn task_dir(&self, task: &str) -> PathBuf {
        self.out.join("tasks").join(task).join("epoch-1")
    }

    /// The per-test verdict of one task (epoch 1), `tests.json`.
    pub fn tests_json(&self, task: &str) -> Value {
        let path = self.task_dir(task).join("tests.json");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        serde_json::from_str(&text).expect("tests.json is JSON")
    }

    /// The lines of `predictions.jsonl`.
    pub fn predictions(&self) -> Vec<Value> {
        std::fs::read_to_string(self.out.join("predictions.jsonl"))
            .expect("predictions.jsonl")
            .lines()
            .map(|line| serde_json::from_str(line).expect("prediction is JSON"))
            .collect()
    }

    /// Every event of a kind, in order.
    pub fn events(&self, task: &str, kind: &str) -> Vec<Value> {
        self.trajectory(task)
            .into_iter()
            .filter(|e| e["event"] == kind)
            .collect()
    }
}

impl Fixture {
    /// Like [`Fixture::run_with_env`], but into the run folder `out`, so one
    /// test can make several runs that share the fixture's cache.
    pub fn run_into(
        &self,
        out: &Path,
        tasks: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> RunOutput {
        let output = self
            .run_command(out, tasks, args, env)
            .output()
            .expect("run onebash");
        RunOutput::of(output, out)
    }

    /// `onebash run TASKS -o OUT --cache-dir <fixture>/cache ARGS`, not
    /// started yet.
    fn run_command(
        &self,
        out: &Path,
        tasks: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Command {
        let mut command = onebash();
        command
            .arg("run")
            .arg(tasks)
            .arg("-o")
            .arg(out)
            .arg("--cache-dir")
            .arg(self.path("cache"))
            .args(args)
            .envs(env.iter().copied());
        command
    }
}

/// A unified diff (as `git diff` writes it) that turns `repo`'s HEAD into
/// HEAD plus `changes` (path, new content); the repo is left as it was.
pub fn diff_of(repo: &Path, changes: &[(&str, &str)]) -> String {
    for (path, content) in changes {
        let file = repo.join(path);
        std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        std::fs::write(&file, content).expect("write file");
    }
    git(repo, &["add", "-A"]);
    let output = Command::new("git")
        .args(["diff", "--cached"])
        .current_dir(repo)
        .output()
        .expect("git diff");
    git(repo, &["reset", "-q", "--hard"]);
    String::from_utf8(output.stdout).expect("diff is UTF-8")
}

/// A scripted model for tasks made with [`task`], safe with `-j N`: a request
/// belongs to the task whose problem statement it holds, and the task's k-th
/// request is answered with one `bash` call running `plan[task][k]`, or, once
/// the commands are used up, with a final text.
pub fn scripted_agent(plan: &[(&str, &[&str])]) -> ScriptedServer {
    scripted_agent_by(plan_of(plan))
}

fn plan_of(plan: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
    plan.iter()
        .map(|(id, commands)| {
            (
                format!("Problem of task {id}."),
                commands.iter().map(|c| (*c).to_owned()).collect(),
            )
        })
        .collect()
}

/// [`scripted_agent`] for any tasks: a request belongs to the first entry
/// of `plan` whose text its user message contains.
pub fn scripted_agent_by(plan: Vec<(String, Vec<String>)>) -> ScriptedServer {
    ScriptedServer::start_with(scripted_handler_by(plan))
}

/// The handler of [`scripted_agent`], for a server that does more with
/// each request.
pub fn scripted_handler(
    plan: &[(&str, &[&str])],
) -> impl Fn(&super::server::Request) -> super::server::Reply + Send + Sync + 'static {
    scripted_handler_by(plan_of(plan))
}

fn scripted_handler_by(
    plan: Vec<(String, Vec<String>)>,
) -> impl Fn(&super::server::Request) -> super::server::Reply + Send + Sync + 'static {
    move |request: &super::server::Request| {
        let messages = request.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let user = messages
            .iter()
            .find(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .unwrap_or("");
        let answered = messages.iter().filter(|m| m["role"] == "assistant").count();
        let commands = plan
            .iter()
            .find(|(marker, _)| user.contains(marker.as_str()))
            .map(|(_, commands)| commands.as_slice())
            .unwrap_or(&[]);
        match commands.get(answered) {
            Some(command) => tool_calls_reply(&[(&format!("call-{answered}"), command)], 10, 5),
            None => text_reply("Done.", "stop", 10, 2),
        }
    }
}

/// The tool messages the model was sent for `task`, in order, read from the
/// last request of that task the server received.
pub fn tool_answers(server: &ScriptedServer, task: &str) -> Vec<String> {
    let marker = format!("Problem of task {task}.");
    let last = server
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.raw_body.contains(&marker))
        .unwrap_or_else(|| panic!("no request for task {task}"));
    last.body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().expect("tool content").to_owned())
        .collect()
}

/// A task `t` over a small repo (a README and `src/lib.txt`), with
/// `test_command` and `extra` fields; returns the task file.
pub fn small_task(fixture: &Fixture, test_command: &str, extra: Value) -> PathBuf {
    let (repo, sha) = fixture.repo(
        "repo",
        &[("README.md", "hello\n"), ("src/lib.txt", "code\n")],
    );
    fixture.tasks(&[task("t", &repo, &sha, test_command, extra)])
}

/// Runs task `t` over a one-file repo, graded by `test_command` with
/// `extra` fields, against a scripted model that answers at once without a
/// tool call (named `oracle-free`); `args` follow the model flags.
pub fn run_without_changes(
    fixture: &Fixture,
    test_command: &str,
    extra: Value,
    args: &[&str],
) -> RunOutput {
    let (repo, sha) = fixture.repo("repo", &[("README.md", "x\n")]);
    let tasks = fixture.tasks(&[task("t", &repo, &sha, test_command, extra)]);
    fixture.run_model(&tasks, "oracle-free", &scripted_agent(&[]).base_url(), args)
}

/// Runs task `t` of `tasks` under `--sandbox SANDBOX` into `<fixture>/out`,
/// with a scripted agent that runs `commands`, one per turn; returns the
/// server too, for what the model was sent.
pub fn run_commands(
    fixture: &Fixture,
    tasks: &Path,
    sandbox: &str,
    commands: &[&str],
    args: &[&str],
    env: &[(&str, &str)],
) -> (RunOutput, ScriptedServer) {
    let server = scripted_agent(&[("t", commands)]);
    let base_url = server.base_url();
    let mut all = vec![
        "--sandbox",
        sandbox,
        "--model",
        "scripted",
        "--base-url",
        &base_url,
    ];
    all.extend_from_slice(args);
    let run = fixture.run_with_env(tasks, &all, env);
    (run, server)
}

/// Whether a tool that some tests need (bwrap, Chromium, pytest) is here.
/// `.ci/run` installs each, so in CI (`CI` set) a missing one fails the
/// test; elsewhere the test is skipped, with `hint` on stderr where the
/// user sees it (`skips.rs`: at once, and in a summary at the end).
pub fn tool_present(found: bool, what: &str, hint: &str) -> bool {
    assert!(
        found || std::env::var_os("CI").is_none(),
        "{what} is missing, but CI is set: .ci/run must install it"
    );
    if !found {
        super::skips::skipped(what, hint);
    }
    found
}

/// Whether `python3 -m pytest` works, under [`tool_present`]'s rule.
pub fn pytest_present() -> bool {
    let found = Command::new("python3")
        .args(["-m", "pytest", "--version"])
        .output()
        .is_ok_and(|out| out.status.success());
    tool_present(found, "pytest", "pip install pytest to run this test")
}

/// The python that has the pinned `swebench` package, under
/// [`tool_present`]'s rule: `$ONEBASH_SWEBENCH_PYTHON` (.ci/run installs
/// it in a venv of its own), else `python3`.
pub fn swebench_python() -> Option<String> {
    let python = std::env::var("ONEBASH_SWEBENCH_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let found = Command::new(&python)
        .args(["-c", "import swebench.harness.grading"])
        .output()
        .is_ok_and(|out| out.status.success());
    tool_present(
        found,
        "the swebench package",
        "pip install swebench==4.1.0, or point ONEBASH_SWEBENCH_PYTHON at a python that has it",
    )
    .then_some(python)
}

/// The stdout of `PYTHON tests/fixtures/SCRIPT ARGS...`, which must exit 0
/// (its stderr shown when it does not): the Python side of the tests that
/// check onebash against another system's own code.
pub fn fixture_script<A: AsRef<OsStr>>(
    python: &str,
    script: &str,
    args: impl IntoIterator<Item = A>,
) -> String {
    let output = Command::new(python)
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures")
                .join(script),
        )
        .args(args)
        .output()
        .expect("python runs");
    assert!(
        output.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The python that has the `swebench` 5.x package (`--grading
/// swebench-5.0`'s parity), under [`tool_present`]'s rule:
/// `$ONEBASH_SWEBENCH5_PYTHON` (.ci/run installs it in a venv of its own);
/// there is no fallback to `python3`, which has 4.1.0 when it has one.
pub fn swebench5_python() -> Option<String> {
    let python = std::env::var("ONEBASH_SWEBENCH5_PYTHON").ok();
    let found = python.as_deref().is_some_and(|python| {
        Command::new(python)
            .args([
                "-c",
                "import swebench, sys; sys.exit(not swebench.__version__.startswith('5.'))",
            ])
            .output()
            .is_ok_and(|out| out.status.success())
    });
    tool_present(
        found,
        "the swebench 5 package",
        "pip install swebench==5.0.2 in a venv and point ONEBASH_SWEBENCH5_PYTHON at its python",
    )
    .then(|| python.unwrap_or_default())
}

/// The python that has the pinned `huggingface_hub` and `pyarrow`, under
/// [`tool_present`]'s rule: `$ONEBASH_HF_PYTHON` (.ci/run installs them
/// in a venv of its own), else `python3`.
pub fn hf_python() -> Option<String> {
    let python = std::env::var("ONEBASH_HF_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let found = Command::new(&python)
        .args(["-c", "import huggingface_hub, pyarrow.parquet"])
        .output()
        .is_ok_and(|out| out.status.success());
    tool_present(
        found,
        "huggingface_hub and pyarrow",
        "see .ci/run's Hugging Face block, or point ONEBASH_HF_PYTHON at a python that has them",
    )
    .then_some(python)
}

/// How this python3's unittest names `method` of `class` (a dotted
/// `module.Class`) in `-v` output: 3.11 added the method to the part in
/// brackets.
pub fn unittest_name(class: &str, method: &str) -> String {
    let output = Command::new("python3")
        .args(["-c", "import sys; print(sys.version_info >= (3, 11))"])
        .output()
        .expect("python3");
    if String::from_utf8_lossy(&output.stdout).trim() == "True" {
        format!("{method} ({class}.{method})")
    } else {
        format!("{method} ({class})")
    }
}

/// A number column of a row of results.csv.
pub fn f64_of(row: &HashMap<String, String>, column: &str) -> f64 {
    row[column]
        .parse()
        .unwrap_or_else(|_| panic!("{column} is not a number: {row:?}"))
}
