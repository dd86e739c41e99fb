//! The bash tool through the real binary: commands that leave processes
//! behind or time out never hold the harness, the API key never reaches a
//! command or a file, huge outputs are bounded in what the model sees, what
//! is recorded and what the harness holds in memory, and a command runs in
//! the checkout with an empty stdin.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::harness::{
    Fixture, RunOutput, onebash, run_commands, scripted_agent, small_task, task, tool_answers,
};
use crate::support::processes::{PROMPTLY, assert_no_process_left, duration_s, running};
use crate::support::server::ScriptedServer;

/// Task `t` over a small repo, whose test always passes and whose
/// (scripted) agent runs `commands`, one per turn. These are the guarantees
/// that hold without a sandbox: the sandbox suite (sandbox.rs) repeats the
/// dangerous ones under bwrap.
fn run_unsandboxed(
    fixture: &Fixture,
    commands: &[&str],
    args: &[&str],
    env: &[(&str, &str)],
) -> (RunOutput, ScriptedServer) {
    let tasks = small_task(fixture, "true", json!({}));
    run_commands(fixture, &tasks, "none", commands, args, env)
}

/// The single `command` event of task `t`.
fn only_command(run: &RunOutput) -> Value {
    let commands = run.events("t", "command");
    assert_eq!(commands.len(), 1, "{commands:?}\nstderr:\n{}", run.stderr);
    commands.into_iter().next().expect("one command")
}

/// Runs `command` as the agent's only one, under `--command-timeout
/// TIMEOUT`, and checks what every test of a command that leaves processes
/// behind checks: the run went well, the command came back promptly, timed
/// out or not as `timed_out` says, and no process of `left` outlived the
/// task. Returns what the model read of the command and its event.
fn run_leaving(command: &str, timeout: &str, timed_out: bool, left: &[&str]) -> (String, Value) {
    let fixture = Fixture::new();
    let (run, server) = run_unsandboxed(&fixture, &[command], &["--command-timeout", timeout], &[]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let event = only_command(&run);
    assert!(duration_s(&event) < PROMPTLY, "{event}");
    assert_eq!(event["timed_out"], timed_out, "{event}");
    for needle in left {
        assert_no_process_left(needle);
    }
    let answer = tool_answers(&server, "t").remove(0);
    (answer, event)
}

#[test]
fn background_process_does_not_hold_the_command_and_dies_with_the_task() {
    // Held by the sleep, the command would have timed out, or waited 613 s.
    let (answer, command) = run_leaving("sleep 613 & echo started", "60", false, &["sleep 613"]);
    assert!(answer.starts_with("started\n"), "{answer:?}");
    assert_eq!(command["exit_code"], 0);
}

#[test]
fn detached_daemon_does_not_hold_the_command_and_dies_with_the_task() {
    let (answer, _) = run_leaving(
        "(setsid sleep 614 &); echo detached",
        "60",
        false,
        &["sleep 614"],
    );
    assert!(answer.starts_with("detached\n"), "{answer:?}");
}

#[test]
fn timeout_with_a_background_child_holding_the_pipe_returns_promptly() {
    // The command never ends on its own: only the timeout ends it.
    let (answer, command) = run_leaving(
        "sleep 615 & echo waiting; sleep 617",
        "1",
        true,
        &["sleep 615", "sleep 617"],
    );
    assert_eq!(command["output"], "waiting\n");
    assert!(
        answer.contains("waiting\n") && answer.contains("timed out after 1 s"),
        "{answer:?}"
    );
}

#[test]
fn timeout_with_an_escaped_daemon_holding_the_pipe_returns_promptly() {
    let (answer, _) = run_leaving(
        "(setsid sleep 616 &); sleep 618",
        "1",
        true,
        &["sleep 616", "sleep 618"],
    );
    assert!(answer.contains("timed out after 1 s"), "{answer:?}");
}

const SECRET: &str = "sk-test-SECRET-123";

/// Every file under `dir`, recursively (symlinks are not followed).
fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir").flatten() {
            let kind = entry.file_type().expect("file type");
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                files.push(entry.path());
            }
        }
    }
    files
}

#[test]
fn api_key_is_sent_to_the_api_but_never_reaches_a_command_or_a_file() {
    let fixture = Fixture::new();
    let (run, server) = run_unsandboxed(
        &fixture,
        &["echo \"key=$OPENAI_API_KEY\"", "env"],
        &["--keep-workdirs"],
        &[("OPENAI_API_KEY", SECRET)],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);

    let answers = tool_answers(&server, "t");
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert!(answers[0].starts_with("key=\n"), "{answers:?}");
    assert!(!answers[1].contains("SECRET"), "{}", answers[1]);
    assert!(!answers[1].contains("OPENAI_API_KEY"), "{}", answers[1]);
    assert!(answers[1].contains("TERM=dumb"), "{}", answers[1]);

    let requests = server.requests();
    assert!(requests.len() >= 3);
    for request in &requests {
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {SECRET}").as_str())
        );
    }

    // The whole fixture: run folder (kept working copy included), cache,
    // task file and repo.
    let files = files_under(fixture.dir.path());
    assert!(files.iter().any(|f| f.ends_with("run.json")));
    assert!(files.iter().any(|f| f.ends_with("trajectory.jsonl")));
    for file in files {
        let bytes = std::fs::read(&file).expect("read file");
        assert!(
            !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
            "{} holds the API key",
            file.display()
        );
    }
    assert!(!run.stdout.contains(SECRET) && !run.stderr.contains(SECRET));
}

/// A command can read its parent's environment through /proc unless the
/// harness hides it; the key must not be found there either.
#[test]
fn api_key_cannot_be_read_from_the_harness_process() {
    let fixture = Fixture::new();
    let (run, server) = run_unsandboxed(
        &fixture,
        &["tr '\\0' '\\n' < /proc/$PPID/environ | grep -c SECRET"],
        &[],
        &[("OPENAI_API_KEY", SECRET)],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let answers = tool_answers(&server, "t");
    assert!(!answers[0].contains("SECRET"), "{answers:?}");
    assert!(answers[0].starts_with("0\n"), "{answers:?}");
}

fn peak_rss(run: &RunOutput) -> u64 {
    let text = std::fs::read_to_string(run.out.join("run.json")).expect("run.json");
    let value: Value = serde_json::from_str(&text).expect("run.json is JSON");
    value["peak_rss_bytes"].as_u64().expect("peak_rss_bytes")
}

#[test]
fn huge_output_is_bounded_for_the_model_the_trajectory_and_memory() {
    const TOTAL: u64 = 30_000_000;
    let small_fixture = Fixture::new();
    let (small, _server) = run_unsandboxed(&small_fixture, &["echo tiny"], &[], &[]);
    assert_eq!(small.code, 0, "stderr:\n{}", small.stderr);

    let fixture = Fixture::new();
    let (run, server) = run_unsandboxed(
        &fixture,
        &["head -c 30000000 /dev/zero | tr '\\0' 'a'"],
        &[],
        &[],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);

    let answers = tool_answers(&server, "t");
    let chars = answers[0].chars().count();
    assert!((10_000..=11_000).contains(&chars), "{chars} chars");
    assert!(answers[0].contains("output shortened"), "{}", &answers[0]);
    assert!(answers[0].starts_with("aaaa"));
    assert!(answers[0].ends_with("[exit code: 0]"));

    let command = only_command(&run);
    assert_eq!(command["output_bytes"].as_u64(), Some(TOTAL));
    let recorded = command["output"].as_str().expect("output").len();
    assert!(recorded <= (1 << 20) + 200, "{recorded} bytes recorded");
    assert!(recorded >= 1 << 20, "{recorded} bytes recorded");
    assert!(
        std::fs::metadata(run.task_dir("t").join("trajectory.jsonl"))
            .expect("trajectory")
            .len()
            < 4 << 20
    );

    let (big_rss, small_rss) = (peak_rss(&run), peak_rss(&small));
    assert!(
        big_rss < small_rss + 40_000_000,
        "peak RSS {big_rss} with 30 MB of output vs {small_rss} without"
    );
}

#[test]
fn command_runs_in_the_checkout_with_empty_stdin_and_lossy_output() {
    let fixture = Fixture::new();
    let (run, server) = run_unsandboxed(
        &fixture,
        &[
            "cat; echo after-cat",
            "printf 'a\\xffb\\n'",
            "pwd",
            "ls -A",
            "git status --porcelain; echo \"git exit $?\"; git rev-parse HEAD",
        ],
        &["--command-timeout", "30"],
        &[],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let answers = tool_answers(&server, "t");
    assert_eq!(answers.len(), 5, "{answers:?}");

    // stdin is /dev/null: `cat` ends by itself, not at the timeout.
    assert_eq!(answers[0], "after-cat\n[exit code: 0]");
    let commands = run.events("t", "command");
    assert_eq!(commands[0]["timed_out"], false);

    assert_eq!(answers[1], "a\u{fffd}b\n[exit code: 0]");
    assert_eq!(commands[1]["output"], "a\u{fffd}b\n");

    let root = std::fs::canonicalize(fixture.dir.path()).expect("canonical");
    let expected = root.join("out").join("workdirs").join("t.epoch-1");
    assert_eq!(
        answers[2],
        format!("{}\n[exit code: 0]", expected.display())
    );

    let listed: Vec<&str> = answers[3].lines().collect();
    for name in [".git", "README.md", "src"] {
        assert!(listed.contains(&name), "{name} missing from {listed:?}");
    }

    let sha = &run.events("t", "checkout")[0]["commit"];
    assert_eq!(
        answers[4],
        format!("git exit 0\n{}\n[exit code: 0]", sha.as_str().expect("sha")),
        "git status must work and show a clean checkout"
    );
}

#[test]
fn setup_and_test_commands_leave_no_process_behind() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let tasks = fixture.tasks(&[task(
        "t",
        &repo,
        &sha,
        "sleep 621 & echo tested",
        json!({"setup_command": "(setsid sleep 620 &); echo set up"}),
    )]);
    let server = scripted_agent(&[("t", &["echo agent"])]);
    let run = fixture.run_scripted(&tasks, &server, &["--sandbox", "none"]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(run.row("t")["status"], "passed");
    // Neither waited for the sleep it left (which the task's end kills).
    let setup = &run.events("t", "setup")[0];
    assert!(duration_s(setup) < PROMPTLY, "{setup}");
    assert_eq!(setup["timed_out"], false, "{setup}");
    let test = &run.events("t", "test")[0];
    assert!(duration_s(test) < PROMPTLY, "{test}");
    assert_eq!(test["timed_out"], false, "{test}");
    assert_eq!(test["output"], "tested\n");
    assert_no_process_left("sleep 620");
    assert_no_process_left("sleep 621");
}

#[test]
fn ctrl_c_during_a_command_kills_its_processes() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let tasks = fixture.tasks(&[task("t", &repo, &sha, "true", json!({}))]);
    let server = scripted_agent(&[("t", &["(setsid sleep 622 &); sleep 623"])]);
    let mut child = onebash()
        .arg("run")
        .arg(&tasks)
        .args([
            "--sandbox",
            "none",
            "--model",
            "scripted",
            "--base-url",
            &server.base_url(),
        ])
        .arg("-o")
        .arg(fixture.path("out"))
        .arg("--cache-dir")
        .arg(fixture.path("cache"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn onebash");
    // Both sleeps run, the daemon outside the command's process group (a
    // shell whose script names them is not enough).
    let deadline = Instant::now() + Duration::from_secs(120);
    while !(running("sleep 622") && running("sleep 623")) {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the command never started");
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    let pid = libc::pid_t::try_from(child.id()).expect("pid");
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let interrupted = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        // A hang guard: onebash leaves at once.
        if interrupted.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("onebash did not exit after Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(25));
    };
    assert_eq!(status.code(), Some(130));
    assert_no_process_left("sleep 622");
    assert_no_process_left("sleep 623");
}
