//! The bubblewrap sandbox through the real binary (`--sandbox bwrap`):
//! adversarial probes an agent's commands could try (writes outside the
//! checkout, /tmp, the network, the harness's secrets, daemons, a fork
//! storm, a flood of output, symlinks out of the repo, memory and file
//! size), each asserting that the host is unchanged and the harness stayed
//! responsive; the same verdicts under bwrap as under `--sandbox none`; and
//! `--sandbox bwrap|auto` where bwrap cannot be used.
//!
//! Every probe is bounded in time and in count, so a sandbox that failed
//! could not harm the machine: no `kill -1`, no unbounded fork bomb, and
//! every host file a probe might create is removed after the assertions.
//!
//! The fixtures live under Cargo's target tmp folder, not /tmp: /tmp is
//! private inside the sandbox, so a fixture there would be invisible to the
//! commands and the hiding probes would pass whether bwrap hid anything or not.

use std::collections::HashMap;
use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::harness::{
    Fixture, RunOutput, git, run_commands, scripted_agent, scripted_agent_by, small_task, task,
    tool_answers, tool_present,
};
use crate::support::processes::{
    PROMPTLY, Process, assert_no_process_left, duration_s, left_after,
};
use crate::support::server::{ScriptedServer, text_reply, tool_calls_reply};

/// True when `bwrap` is on PATH (see `tool_present`).
pub fn bwrap_available() -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path).any(|dir| dir.join("bwrap").is_file());
    tool_present(
        found,
        "bwrap",
        "install bubblewrap to run the sandbox tests",
    )
}

/// A fixture outside /tmp (see the file header): the target folder, or
/// /var/tmp when the checkout itself lives under /tmp (CI may clone there),
/// since the sandbox's private /tmp would hide the difference between a
/// write that failed and a write that landed in the private copy.
pub fn fixture() -> Fixture {
    let target = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let base = if target.starts_with(std::env::temp_dir()) {
        std::path::PathBuf::from("/var/tmp")
    } else {
        target.to_owned()
    };
    assert!(
        !base
            .canonicalize()
            .unwrap_or_else(|_| base.clone())
            .starts_with(std::env::temp_dir()),
        "no folder outside {} to put the sandbox fixtures in",
        std::env::temp_dir().display()
    );
    let dir = tempfile::Builder::new()
        .prefix("onebash-sandbox-")
        .tempdir_in(&base)
        .expect("tempdir outside /tmp");
    Fixture { dir }
}

/// A [`fixture`] for a test that needs bwrap, or `None` where bwrap is
/// missing: then the test is skipped (see [`bwrap_available`]).
pub fn bwrap_fixture() -> Option<Fixture> {
    bwrap_available().then(fixture)
}

/// A file name no other test, or other run of this suite, uses.
fn unique(what: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "onebash-probe-{what}-{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Host paths a probe tries to create. They must not exist after the run;
/// dropping this removes any that do, so a failed sandbox leaves nothing
/// behind even when an earlier assertion fails.
struct HostPaths(Vec<PathBuf>);

impl HostPaths {
    fn assert_absent(&self) {
        let present: Vec<&PathBuf> = self
            .0
            .iter()
            .filter(|p| p.symlink_metadata().is_ok())
            .collect();
        assert!(present.is_empty(), "written on the host: {present:?}");
    }
}

impl Drop for HostPaths {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Runs task `t` of `tasks` under `--sandbox bwrap` with a scripted agent
/// that runs `commands`, one per turn.
fn run_sandboxed(
    fixture: &Fixture,
    tasks: &Path,
    commands: &[&str],
    args: &[&str],
    env: &[(&str, &str)],
) -> (RunOutput, ScriptedServer) {
    run_commands(fixture, tasks, "bwrap", commands, args, env)
}

/// [`run_sandboxed`] of task `t` over a small repo whose test always
/// passes; checks that the run went well, and returns it with what the
/// model read of each command.
fn answers_under_bwrap(
    fixture: &Fixture,
    commands: &[&str],
    args: &[&str],
    env: &[(&str, &str)],
) -> (RunOutput, Vec<String>) {
    let tasks = small_task(fixture, "true", json!({}));
    let (run, server) = run_sandboxed(fixture, &tasks, commands, args, env);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let answers = tool_answers(&server, "t");
    (run, answers)
}

/// The exit code the model was shown at the end of a tool answer.
fn exit_code(answer: &str) -> i32 {
    answer
        .rsplit_once("[exit code: ")
        .and_then(|(_, rest)| rest.strip_suffix(']'))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no exit code in {answer:?}"))
}

fn run_json(run: &RunOutput) -> Value {
    let text = std::fs::read_to_string(run.out.join("run.json")).expect("run.json");
    serde_json::from_str(&text).expect("run.json is JSON")
}

#[test]
fn writes_outside_the_checkout_fail_and_leave_the_host_unchanged() {
    let Some(fixture) = bwrap_fixture() else {
        return;
    };
    let name = unique("write");
    let root = fixture.dir.path().display().to_string();
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
    let out = fixture.path("out");
    let host = HostPaths(vec![
        out.join("workdirs").join(&name),
        out.join(&name),
        Path::new("/etc").join(&name),
        home.join(&name),
        fixture.path(&name),
        fixture.path("repo").join(&name),
        fixture.path("cache").join(&name),
    ]);
    // Into the run folder, which the sandbox hides behind a tmpfs: see
    // `writes_into_hidden_folders_fail` for their exit codes.
    let hidden = [
        format!("echo x > ../{name}"),
        format!("echo x > ../../{name}"),
    ];
    let outside = [
        format!("echo x > /etc/{name}"),
        format!("echo x > \"$HOME/{name}\""),
        format!("echo x > {root}/{name}"),
        format!("echo x > {root}/repo/{name}"),
        format!("echo x >> {root}/repo/README.md"),
        format!("touch {root}/cache/{name}"),
    ];
    let inside = format!("echo inside > inside-{name}.txt && cat inside-{name}.txt");
    let mut commands: Vec<&str> = hidden.iter().chain(&outside).map(String::as_str).collect();
    commands.push(&inside);

    let started = Instant::now();
    let (run, answers) = answers_under_bwrap(&fixture, &commands, &[], &[]);
    let elapsed = started.elapsed();
    assert_eq!(answers.len(), commands.len(), "{answers:?}");

    let mut succeeded = Vec::new();
    for (command, answer) in outside.iter().zip(&answers[hidden.len()..]) {
        if exit_code(answer) == 0 {
            succeeded.push(format!("{command} -> {answer}"));
        }
    }
    host.assert_absent();
    assert_eq!(
        std::fs::read_to_string(fixture.path("repo/README.md")).expect("README.md"),
        "hello\n",
        "the source repo was changed"
    );
    assert!(
        succeeded.is_empty(),
        "writes outside the checkout reported success (the host is unchanged): {succeeded:#?}"
    );

    assert_eq!(answers[commands.len() - 1], "inside\n[exit code: 0]");
    let diff = std::fs::read_to_string(run.task_dir("t").join("patch.diff")).expect("patch.diff");
    assert!(
        diff.contains(&format!("inside-{name}.txt")) && diff.contains("+inside"),
        "{diff}"
    );
    eprintln!("writes probe: {elapsed:?}");
}

/// The run folder and the secret folders of $HOME are hidden behind a
/// writable tmpfs, so a write into one (`../x` from the checkout lands in
/// the run folder's workdirs/) succeeds inside the sandbox and vanishes
/// with it: the host is unchanged, but the agent is told its write worked,
/// unlike every other write outside the checkout, which fails with
/// "Read-only file system".
#[test]
fn writes_into_hidden_folders_fail() {
    let Some(fixture) = bwrap_fixture() else {
        return;
    };
    let name = unique("hidden-write");
    let out = fixture.path("out");
    let home = fixture.path("home");
    std::fs::create_dir_all(home.join(".ssh")).expect("mkdir .ssh");
    let host = HostPaths(vec![
        out.join("workdirs").join(&name),
        out.join(&name),
        home.join(".ssh").join(&name),
    ]);
    let commands = [
        format!("echo x > ../{name}"),
        format!("echo x > ../../{name}"),
        "mkdir -p ../../tasks/t/epoch-1 && echo forged > ../../tasks/t/epoch-1/patch.diff"
            .to_owned(),
        format!("echo x > $HOME/.ssh/{name}"),
    ];
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    let home_str = home.display().to_string();
    let (run, answers) = answers_under_bwrap(&fixture, &commands, &[], &[("HOME", &home_str)]);
    host.assert_absent();
    let diff = std::fs::read_to_string(run.task_dir("t").join("patch.diff")).expect("patch.diff");
    assert_eq!(
        diff, "",
        "the agent's forged patch.diff reached the run folder"
    );
    let succeeded: Vec<String> = commands
        .iter()
        .zip(&answers)
        .filter(|(_, answer)| exit_code(answer) == 0)
        .map(|(command, answer)| format!("{command} -> {answer}"))
        .collect();
    assert!(
        succeeded.is_empty(),
        "writes into hidden folders reported success: {succeeded:#?}"
    );
}

#[test]
fn tmp_is_private_to_each_command_and_never_reaches_the_host() {
    let Some(fixture) = bwrap_fixture() else {
        return;
    };
    let name = unique("tmp");
    let host = HostPaths(vec![
        Path::new("/tmp").join(&name),
        Path::new("/dev/shm").join(&name),
        Path::new("/run").join(&name),
    ]);
    // A file of the host's /tmp that the sandbox must not show.
    let host_marker = unique("host-tmp-content");
    let host_file = tempfile::Builder::new()
        .prefix("onebash-host-")
        .tempfile_in("/tmp")
        .expect("host temp file");
    std::fs::write(host_file.path(), &host_marker).expect("write host temp file");

    let write = format!(
        "echo secret > /tmp/{name} && cat /tmp/{name} && echo shm > /dev/shm/{name} && echo run > /run/{name} && echo wrote"
    );
    let read_later = format!("ls -A /tmp /dev/shm /run; cat /tmp/{name}");
    let read_host = format!("cat {}", host_file.path().display());
    let (_, answers) = answers_under_bwrap(&fixture, &[&write, &read_later, &read_host], &[], &[]);
    assert_eq!(answers.len(), 3, "{answers:?}");

    host.assert_absent();
    // Inside one command, /tmp, /dev/shm and /run are writable.
    assert_eq!(answers[0], "secret\nwrote\n[exit code: 0]");
    // The next command has a fresh sandbox: the file is gone.
    assert!(!answers[1].contains(&format!("{name}\n")), "{}", answers[1]);
    assert!(answers[1].contains("No such file"), "{}", answers[1]);
    assert_ne!(exit_code(&answers[1]), 0);
    // And the host's /tmp is not shown at all.
    assert!(!answers[2].contains(&host_marker), "{}", answers[2]);
    assert_ne!(exit_code(&answers[2]), 0, "{}", answers[2]);
}

/// A listener on 127.0.0.1 that never blocks the test.
fn listener() -> (TcpListener, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("local addr").port();
    (listener, port)
}

/// Whether `listener` got a connection within `wait` (a connection the
/// client already closed still waits in the accept queue).
fn accepted_within(listener: &TcpListener, wait: Duration) -> bool {
    let deadline = Instant::now() + wait;
    loop {
        match listener.accept() {
            Ok(_) => return true,
            Err(err) if err.kind() == ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(err) => panic!("accept failed: {err}"),
        }
    }
}

/// A command that tries to connect to 127.0.0.1:`port` for at most 5 s and
/// prints `TAG-CONNECTED` or `TAG-NOT-CONNECTED`, then `TAG-TIMED-OUT` if
/// the 5 s ran out (`timeout` exits with 124).
fn connect_command(port: u16, tag: &str) -> String {
    format!(
        "if timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}'; then echo {tag}-CONNECTED; else s=$?; echo {tag}-NOT-CONNECTED; if [ $s = 124 ]; then echo {tag}-TIMED-OUT; fi; fi"
    )
}

/// Whether `output` has the line `line`.
fn printed(output: &str, line: &str) -> bool {
    output.lines().any(|l| l == line)
}

#[test]
fn agent_commands_have_no_network_without_allow_network() {
    let Some(fixture) = bwrap_fixture() else {
        return;
    };
    let (agent_listener, agent_port) = listener();
    let (test_listener, test_port) = listener();
    let tasks = small_task(&fixture, &connect_command(test_port, "TEST"), json!({}));
    let probe = connect_command(agent_port, "AGENT");
    let python = format!(
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {agent_port}), timeout=5); print('PY-CONNECTED')\""
    );
    let started = Instant::now();
    let (run, server) = run_sandboxed(&fixture, &tasks, &[&probe, &python], &[], &[]);
    let elapsed = started.elapsed();
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let answers = tool_answers(&server, "t");
    assert!(
        printed(&answers[0], "AGENT-NOT-CONNECTED"),
        "{}",
        answers[0]
    );
    assert!(!answers[1].contains("PY-CONNECTED"), "{}", answers[1]);
    assert_ne!(exit_code(&answers[1]), 0, "{}", answers[1]);
    let test_log = std::fs::read_to_string(run.task_dir("t").join("test.log")).expect("test.log");
    assert!(printed(&test_log, "TEST-NOT-CONNECTED"), "{test_log}");
    assert!(!accepted_within(&agent_listener, Duration::ZERO));
    assert!(!accepted_within(&test_listener, Duration::ZERO));
    // Refused by the sandbox's own loopback, not cut by the 5 s timeout of
    // the probe: a connection that hung would say so.
    assert!(!printed(&answers[0], "AGENT-TIMED-OUT"), "{}", answers[0]);
    assert!(!answers[1].contains("timed out"), "{}", answers[1]);
    assert!(!printed(&test_log, "TEST-TIMED-OUT"), "{test_log}");
    eprintln!("network probe: {elapsed:?}");
}

#[test]
fn allow_network_lets_agent_commands_connect_but_never_the_test_command() {
    let Some(fixture) = bwrap_fixture() else {
        return;
    };
    let (agent_listener, agent_port) = listener();
    let (test_listener, test_port) = listener();
    let tasks = small_task(&fixture, &connect_command(test_port, "TEST"), json!({}));
    let probe = connect_command(agent_port, "AGENT");
    let (run, server) = run_sandboxed(&fixture, &tasks, &[&probe], &["--allow-network"], &[]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let answers = tool_answers(&server, "t");
    assert!(printed(&answers[0], "AGENT-CONNECTED"), "{}", answers[0]);
    assert!(accepted_within(&agent_listener, Duration::from_secs(5)));
    let test_log = std::fs::read_to_string(run.task_dir("t").join("test.log")).expect("test.log");
    assert!(printed(&test_log, "TEST-NOT-CONNECTED"), "{test_log}");
    assert!(!accepted_within(&test_listener, Duration::ZERO));
}

const SECRET: &str = "sk-test-SECRET-456";

/// What `cat` of a file hidden behind /dev/null shows.
fn hidden_file(answer: &str) -> bool {
    answer == "(no output)\n[exit code: 0]"
        || (answer.contains("Permission denied") && exit_code(answer) != 0)
}

#[test]
fn secrets_of_the_harness_the_run_and_home_are_not_readable() {
    let Some(fixture) = bwrap_fixture() else {
        return;
    };
    let gold_marker = unique("gold");
    let key_marker = unique("id-rsa");
    // A fake home: the real one is never touched.
    let home = fixture.path("home");
    std::fs::create_dir_all(home.join(".ssh")).expect("mkdir .ssh");
    std::fs::write(home.join(".ssh/id_rsa"), &key_marker).expect("write id_rsa");
    std::fs::write(home.join(".netrc"), &key_marker).expect("write .netrc");
    let gold_patch = format!(
        "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-hello\n+{gold_marker}\n"
    );
    let tasks = small_task(&fixture, "true", json!({ "gold_patch": gold_patch }));
    let out = fixture.path("out").display().to_string();
    let root = fixture.dir.path().display().to_string();
    let commands = [
        "cat /proc/1/environ; echo".to_owned(),
        "cat /proc/$PPID/environ; echo".to_owned(),
        "env".to_owned(),
        "cat /proc/*/environ 2>/dev/null; echo".to_owned(),
        "ls /proc | grep -c '^[0-9][0-9]*$'".to_owned(),
        "cat /proc/*/cmdline 2>/dev/null | tr '\\0' ' '".to_owned(),
        format!("cat {}", tasks.display()),
        format!("ls -A {out}"),
        format!("cat {out}/results.csv {out}/run.json {out}/tasks/t/epoch-1/trajectory.jsonl"),
        "cat $HOME/.ssh/id_rsa $HOME/.netrc; ls -A $HOME/.ssh".to_owned(),
        format!("grep -rl -- {gold_marker} {root} 2>/dev/null; echo \"grep exit $?\""),
    ];
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    let home_str = home.display().to_string();
    let (run, server) = run_sandboxed(
        &fixture,
        &tasks,
        &commands,
        &[],
        &[("OPENAI_API_KEY", SECRET), ("HOME", &home_str)],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let answers = tool_answers(&server, "t");
    assert_eq!(answers.len(), commands.len(), "{answers:?}");
    for (command, answer) in commands.iter().zip(&answers) {
        assert!(!answer.contains("SECRET"), "{command}: {answer}");
        assert!(!answer.contains(&gold_marker), "{command}: {answer}");
        assert!(!answer.contains(&key_marker), "{command}: {answer}");
    }
    // The environ reads did read something: the allowlisted environment.
    assert!(answers[0].contains("PATH="), "{}", answers[0]);
    assert!(answers[2].contains("TERM=dumb"), "{}", answers[2]);
    // Its own PID namespace: a handful of processes, none of them onebash.
    let pids: u32 = answers[4]
        .lines()
        .next()
        .and_then(|line| line.trim().parse().ok())
        .unwrap_or_else(|| panic!("{}", answers[4]));
    assert!(
        (1..=8).contains(&pids),
        "{pids} processes visible: {}",
        answers[4]
    );
    assert!(answers[5].contains("bash"), "{}", answers[5]);
    for onebash_argument in ["--cache-dir", "--base-url", "scripted"] {
        assert!(
            !answers[5].contains(onebash_argument),
            "the harness is visible: {}",
            answers[5]
        );
    }
    // The task file is hidden behind /dev/null, which the sandbox's nodev
    // mounts refuse to open: empty or unreadable, either is fine.
    assert!(hidden_file(&answers[6]), "{}", answers[6]);
    // The run folder shows only the way to the checkout.
    assert_eq!(answers[7], "workdirs\n[exit code: 0]");
    assert_ne!(exit_code(&answers[8]), 0, "{}", answers[8]);
    for leaked in ["task_id", "onebash_version", "\"event\""] {
        assert!(!answers[8].contains(leaked), "{}", answers[8]);
    }
    assert!(answers[9].contains("No such file"), "{}", answers[9]);
    // grep found nothing (exit 1, or 2 for the unreadable hidden task file).
    assert!(
        answers[10].starts_with("grep exit ") && !answers[10].starts_with("grep exit 0"),
        "{}",
        answers[10]
    );
}

#[test]
fn daemons_and_processes_ignoring_sigterm_die_when_their_command_ends() {
    let Some(fixture) = bwrap_fixture() else {
        return;
    };
    let tasks = small_task(&fixture, "true", json!({}));
    const NEEDLES: [&str; 2] = ["sleep 631", "sleep 632"];
    let commands = [
        "(setsid sleep 631 &); echo started",
        "(trap '' TERM HUP; setsid sleep 632 &); echo started",
        "echo last",
    ];
    // On each model call after the first, a command has just ended: look at
    // the host for what it left running.
    let seen_after_command: Arc<Mutex<Vec<Vec<Process>>>> = Arc::default();
    let seen = Arc::clone(&seen_after_command);
    let server = ScriptedServer::start_with(move |request| {
        let answered = request.body["messages"]
            .as_array()
            .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count());
        if answered > 0 {
            // A hang guard: what the command left is usually gone at once.
            let left = left_after(&NEEDLES, Duration::from_secs(30));
            seen.lock().expect("lock").push(left);
        }
        match commands.get(answered) {
            Some(command) => tool_calls_reply(&[(&format!("call-{answered}"), command)], 10, 5),
            None => text_reply("Done.", "stop", 10, 2),
        }
    });
    let run = fixture.run_scripted(
        &tasks,
        &server,
        &["--sandbox", "bwrap", "--command-timeout", "60"],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    for needle in NEEDLES {
        assert_no_process_left(needle);
    }
    let answers = tool_answers(&server, "t");
    assert_eq!(answers[0], "started\n[exit code: 0]");
    assert_eq!(answers[1], "started\n[exit code: 0]");
    let seen = seen_after_command.lock().expect("lock").clone();
    assert_eq!(seen.len(), 3, "{seen:?}");
    for (i, left) in seen.iter().enumerate() {
        assert!(left.is_empty(), "after command {i}: {left:?}");
    }
    // None waited for what it left: held, it would have timed out, or
    // waited the sleeps' ten minutes.
    for command in run.events("t", "command") {
        assert!(duration_s(&command) < PROMPTLY, "{command}");
        assert_eq!(command["timed_out"], false);
    }
}

#[test]
fn bounded_fork_storm_is_capped_by_max_processes_and_leaves_nothing() {
    let Some(fixture) = bwrap_fixture() else {
        return;
    };
    // Python reports each failed fork at once; bash retries each failed
    // fork for 15 s, so the command timeout always ends that one. The
    // timeout leaves Python's storm (a second or so) ample room.
    let python_storm = "python3 -c \"
import subprocess
started, error = [], None
for i in range(300):
    try:
        started.append(subprocess.Popen(['sleep', '633']))
    except OSError as err:
        error = err
        break
print('started', len(started), error)
\"";
    let bash_storm = "for i in $(seq 300); do sleep 634 & done; echo \"jobs=$(jobs -p | wc -l)\"";
    let started = Instant::now();
    let (run, answers) = answers_under_bwrap(
        &fixture,
        &[python_storm, bash_storm, "echo alive"],
        &["--max-processes", "64", "--command-timeout", "10"],
        &[],
    );
    let elapsed = started.elapsed();
    assert_no_process_left("sleep 633");
    assert_no_process_left("sleep 634");
    // A hang guard: the sleepers would hold a run that waited for them for
    // over ten minutes.
    assert!(elapsed < Duration::from_secs(300), "{elapsed:?}");
    assert_eq!(answers.len(), 3, "{answers:?}");
    assert_eq!(answers[2], "alive\n[exit code: 0]");

    let enforced = run_json(&run)["settings"]["limits_enforced"]["processes"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if enforced.starts_with("not enforced") {
        eprintln!("process limit not enforced here ({enforced}): only the clean-up is checked");
        return;
    }
    let count: usize = answers[0]
        .strip_prefix("started ")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", answers[0]));
    assert!(count < 64, "{count} processes started: {}", answers[0]);
    assert!(
        answers[0].contains("Resource temporarily unavailable"),
        "{}",
        answers[0]
    );
    let jobs = answers[1]
        .lines()
        .find_map(|l| l.strip_prefix("jobs="))
        .and_then(|n| n.trim().parse::<usize>().ok());
    assert!(
        answers[1].contains("fork: retry") || jobs.is_some_and(|n| n < 300),
        "{}",
        answers[1]
    );
    let commands = run.events("t", "command");
    assert!(duration_s(&commands[1]) < PROMPTLY, "{}", commands[1]);
    eprintln!(
        "fork storm: {elapsed:?}; {}",
        answers[0].lines().next().unwrap_or("")
    );
}

#[test]
fn five_gigabytes_of_output_are_bounded_for_the_model_the_trajectory_and_memory() {
    let Some(fixture) = bwrap_fixture() else {
        return;
    };
    let started = Instant::now();
    let (run, answers) = answers_under_bwrap(
        &fixture,
        &["head -c 5000000000 /dev/zero"],
        &["--command-timeout", "20"],
        &[],
    );
    let elapsed = started.elapsed();
    // A hang guard: the command timeout ends the flood at 20 s.
    assert!(elapsed < Duration::from_secs(300), "{elapsed:?}");

    let chars = answers[0].chars().count();
    assert!((10_000..=11_000).contains(&chars), "{chars} chars");
    assert!(
        answers[0].contains("output shortened"),
        "{}",
        &answers[0][..200]
    );

    let commands = run.events("t", "command");
    let command = &commands[0];
    let bytes = command["output_bytes"].as_u64().expect("output_bytes");
    assert!(bytes > 10_000_000, "{bytes} bytes read");
    assert!(
        bytes == 5_000_000_000 || command["timed_out"] == true,
        "{bytes} bytes read, yet not timed out"
    );
    let recorded = command["output"].as_str().expect("output").len();
    assert!(
        ((1 << 20)..=(1 << 20) + 200).contains(&recorded),
        "{recorded} bytes recorded"
    );
    // NUL bytes are 6 characters each in JSON.
    let trajectory = std::fs::metadata(run.task_dir("t").join("trajectory.jsonl"))
        .expect("trajectory")
        .len();
    assert!(trajectory < 8 << 20, "{trajectory} bytes of trajectory");
    let peak = run_json(&run)["peak_rss_bytes"]
        .as_u64()
        .expect("peak_rss_bytes");
    assert!(peak < 200_000_000, "peak RSS {peak}");
    eprintln!(
        "5 GB output: {elapsed:?}, {bytes} bytes read, timed out {}, peak RSS {peak}",
        command["timed_out"]
    );
}

#[test]
fn symlinks_out_of_the_repo_reach_only_the_read_only_host() {
    let Some(fixture) = bwrap_fixture() else {
        return;
    };
    let (repo, _) = fixture.repo("repo", &[("README.md", "hello\n")]);
    std::os::unix::fs::symlink("/etc", repo.join("link")).expect("symlink link");
    // From the checkout (out/workdirs/t.epoch-1), ../../.. is the fixture.
    std::os::unix::fs::symlink("../../..", repo.join("leak")).expect("symlink leak");
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "links"]);
    let sha = git(&repo, &["rev-parse", "HEAD"]);
    let gold_marker = unique("gold");
    let tasks = fixture.tasks(&[task(
        "t",
        &repo,
        &sha,
        "true",
        json!({ "gold_patch": format!("diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-hello\n+{gold_marker}\n") }),
    )]);
    let name = unique("symlink");
    let host = HostPaths(vec![
        Path::new("/etc").join(&name),
        fixture.path(&name),
        fixture.path("repo").join(&name),
    ]);
    let commands = [
        "ls -l link leak".to_owned(),
        format!("echo x > link/{name}"),
        format!("echo x > leak/{name}"),
        format!("echo x > leak/repo/{name}"),
        "head -c 5 link/passwd".to_owned(),
        "cat leak/tasks.jsonl".to_owned(),
        "ls -A leak/out".to_owned(),
    ];
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    let (run, server) = run_sandboxed(&fixture, &tasks, &commands, &[], &[]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let answers = tool_answers(&server, "t");
    assert_eq!(answers.len(), commands.len(), "{answers:?}");
    host.assert_absent();
    assert!(
        answers[0].contains("link -> /etc") && answers[0].contains("leak -> ../../.."),
        "{}",
        answers[0]
    );
    for i in 1..=3 {
        assert_ne!(exit_code(&answers[i]), 0, "{}: {}", commands[i], answers[i]);
        assert!(
            answers[i].contains("Read-only file system"),
            "{}",
            answers[i]
        );
    }
    // Reading through a link shows what the read-only root shows...
    assert_eq!(answers[4], "root:\n[exit code: 0]");
    // ...and no more: the task file and the run folder stay hidden.
    assert!(hidden_file(&answers[5]), "{}", answers[5]);
    assert_eq!(answers[6], "workdirs\n[exit code: 0]");
}

#[test]
fn max_file_size_stops_a_big_write() {
    let Some(fixture) = bwrap_fixture() else {
        return;
    };
    let (_, answers) = answers_under_bwrap(
        &fixture,
        &[
            "head -c 5000000 /dev/zero > big",
            "stat -c %s big",
            "head -c 100000 /dev/zero > small && stat -c %s small",
        ],
        &["--max-file-size", "1", "--keep-workdirs"],
        &[],
    );
    assert_eq!(answers.len(), 3, "{answers:?}");
    // SIGXFSZ kills `head`: 128 + 25.
    assert_eq!(exit_code(&answers[0]), 153, "{}", answers[0]);
    assert!(
        answers[0].contains("File size limit exceeded"),
        "{}",
        answers[0]
    );
    let size: u64 = answers[1]
        .lines()
        .next()
        .and_then(|l| l.parse().ok())
        .unwrap_or_else(|| panic!("{}", answers[1]));
    assert!(size <= 1 << 20, "{size} bytes written");
    let on_disk = std::fs::metadata(fixture.path("out/workdirs/t.epoch-1/big"))
        .expect("big")
        .len();
    assert!(on_disk <= 1 << 20, "{on_disk} bytes on disk");
    assert_eq!(answers[2], "100000\n[exit code: 0]");
}

#[test]
fn max_memory_stops_a_big_allocation_but_not_a_small_one() {
    let Some(fixture) = bwrap_fixture() else {
        return;
    };
    // Bytes are written, not just reserved: a lazily mapped buffer would
    // not count against a memory cgroup.
    let (_, answers) = answers_under_bwrap(
        &fixture,
        &[
            "python3 -c \"x = b'x' * (500 * 1024 * 1024); print('allocated', len(x))\"",
            "python3 -c \"x = b'x' * (10 * 1024 * 1024); print('allocated', len(x))\"",
        ],
        &["--max-memory", "100", "--command-timeout", "30"],
        &[],
    );
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert!(!answers[0].contains("allocated"), "{}", answers[0]);
    let code = exit_code(&answers[0]);
    assert!(
        answers[0].contains("MemoryError") || code == 137,
        "neither MemoryError nor killed: {}",
        answers[0]
    );
    assert_eq!(answers[1], "allocated 10485760\n[exit code: 0]");
}

fn demo_tasks() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/demo/tasks.jsonl")
}

/// task id -> (status, patch.diff) of a run.
fn verdicts(run: &RunOutput) -> HashMap<String, (String, String)> {
    run.rows()
        .into_iter()
        .map(|row| {
            let id = row["task_id"].clone();
            let diff = std::fs::read_to_string(run.task_dir(&id).join("patch.diff"))
                .unwrap_or_else(|err| panic!("{id}: patch.diff: {err}"));
            (id, (row["status"].clone(), diff))
        })
        .collect()
}

#[test]
fn oracle_passes_the_demo_under_bwrap_as_under_none() {
    let Some(fixture) = bwrap_fixture() else {
        return;
    };
    let mut statuses = Vec::new();
    for mode in ["bwrap", "none"] {
        let run = fixture.run_into(
            &fixture.path(&format!("out-{mode}")),
            &demo_tasks(),
            &["--model", "oracle", "--sandbox", mode, "-j", "4"],
            &[],
        );
        assert_eq!(run.code, 0, "{mode}: stderr:\n{}", run.stderr);
        assert_eq!(run_json(&run)["settings"]["sandbox_used"], mode);
        let mut rows: Vec<(String, String)> = run
            .rows()
            .into_iter()
            .map(|row| (row["task_id"].clone(), row["status"].clone()))
            .collect();
        rows.sort();
        assert!(rows.len() >= 5, "{rows:?}");
        assert!(
            rows.iter().all(|(_, status)| status == "passed"),
            "{mode}: {rows:?}"
        );
        statuses.push(rows);
    }
    assert_eq!(statuses[0], statuses[1]);
}

#[test]
fn scripted_sed_fix_gets_the_same_verdicts_and_diff_under_bwrap_and_none() {
    if !bwrap_available() {
        return;
    }
    let run_tests = "python3 -m unittest discover -s tests 2>&1 | tail -1";
    let clamp_fix = format!(
        "sed -i '/if value > high:/{{n;s/return low/return high/}}' calc/ops.py && {run_tests}"
    );
    let mean_fix = format!(
        "sed -i 's|sum(values) // len(values)|sum(values) / len(values)|' calc/ops.py && {run_tests}"
    );
    let plan: Vec<(String, Vec<String>)> = vec![
        ("calc-clamp-upper-bound".to_owned(), vec![clamp_fix]),
        ("calc-mean-float".to_owned(), vec![mean_fix]),
        (
            "textkit-word-count".to_owned(),
            vec!["bash tests/run.sh; echo \"tests exit $?\"".to_owned()],
        ),
    ];
    // A request belongs to the demo task whose problem statement it holds.
    let statements: Vec<(String, Vec<String>)> = std::fs::read_to_string(demo_tasks())
        .expect("demo tasks")
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str::<Value>(line).expect("task JSON"))
        .filter_map(|task| {
            let id = task["id"].as_str()?;
            let commands = plan.iter().find(|(planned, _)| planned == id)?.1.clone();
            let first_line = task["problem_statement"]
                .as_str()?
                .lines()
                .next()?
                .to_owned();
            Some((first_line, commands))
        })
        .collect();
    assert_eq!(statements.len(), plan.len());
    let server = scripted_agent_by(statements);
    let fixture = fixture();
    let filter = "^(calc-clamp-upper-bound|calc-mean-float|textkit-word-count)$";
    let mut results = Vec::new();
    for mode in ["bwrap", "none"] {
        let run = fixture.run_into(
            &fixture.path(&format!("out-{mode}")),
            &demo_tasks(),
            &[
                "--model",
                "scripted",
                "--base-url",
                &server.base_url(),
                "--sandbox",
                mode,
                "--filter",
                filter,
                "-j",
                "3",
            ],
            &[],
        );
        assert_eq!(run.code, 0, "{mode}: stderr:\n{}", run.stderr);
        let verdicts = verdicts(&run);
        assert_eq!(verdicts.len(), 3, "{mode}: {verdicts:?}");
        assert_eq!(verdicts["calc-clamp-upper-bound"].0, "passed", "{mode}");
        assert_eq!(verdicts["calc-mean-float"].0, "passed", "{mode}");
        assert_eq!(verdicts["textkit-word-count"].0, "failed", "{mode}");
        assert!(
            verdicts["calc-clamp-upper-bound"]
                .1
                .contains("+        return high"),
            "{mode}: {}",
            verdicts["calc-clamp-upper-bound"].1
        );
        assert_eq!(verdicts["textkit-word-count"].1, "", "{mode}");
        results.push(verdicts);
    }
    assert_eq!(results[0], results[1]);
}

/// A folder for PATH with the programs a run needs, but no bwrap.
fn path_without_bwrap(fixture: &Fixture) -> PathBuf {
    let bin = fixture.path("bin");
    std::fs::create_dir_all(&bin).expect("mkdir bin");
    for program in [
        "bash", "sh", "git", "env", "cat", "ls", "true", "mktemp", "rm",
    ] {
        let target = which(program).unwrap_or_else(|| panic!("{program} is not on PATH"));
        std::os::unix::fs::symlink(target, bin.join(program)).expect("symlink");
    }
    bin
}

fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

#[test]
fn sandbox_bwrap_without_a_usable_bwrap_refuses_to_run() {
    let Some(fixture) = bwrap_fixture() else {
        return;
    };
    let tasks = small_task(
        &fixture,
        "true",
        json!({ "gold_patch": "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-hello\n+bye\n" }),
    );
    let bin = path_without_bwrap(&fixture);

    let missing = fixture.run_into(
        &fixture.path("out-missing"),
        &tasks,
        &["--model", "oracle", "--sandbox", "bwrap"],
        &[("PATH", bin.to_str().expect("UTF-8 path"))],
    );
    assert_eq!(missing.code, 2, "stderr:\n{}", missing.stderr);
    assert!(missing.stderr.contains("bwrap"), "{}", missing.stderr);
    assert!(!missing.out.join("results.csv").exists());

    // A bwrap that is there but cannot make namespaces (as where user
    // namespaces are forbidden).
    let broken = fixture.path("broken-bin");
    std::fs::create_dir_all(&broken).expect("mkdir");
    let fake = broken.join("bwrap");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n",
    )
    .expect("write fake bwrap");
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = format!("{}:{}", broken.display(), bin.display());
    let unusable = fixture.run_into(
        &fixture.path("out-unusable"),
        &tasks,
        &["--model", "oracle", "--sandbox", "bwrap"],
        &[("PATH", &path)],
    );
    assert_eq!(unusable.code, 2, "stderr:\n{}", unusable.stderr);
    assert!(
        unusable.stderr.contains("bwrap") && unusable.stderr.contains("Permission denied"),
        "{}",
        unusable.stderr
    );
    assert!(!unusable.out.join("results.csv").exists());
}

#[test]
fn validate_without_bwrap_says_so_once() {
    let Some(fixture) = bwrap_fixture() else {
        return;
    };
    let gold = "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-hello\n+bye\n";
    let tasks = small_task(
        &fixture,
        "test \"$(cat README.md)\" = bye",
        json!({ "gold_patch": gold }),
    );
    let bin = path_without_bwrap(&fixture);
    let output = crate::support::harness::onebash()
        .arg("validate")
        .arg(&tasks)
        .arg("-o")
        .arg(fixture.path("validate"))
        .args(["--", "--sandbox", "auto", "--cache-dir"])
        .arg(fixture.path("cache"))
        .env("PATH", &bin)
        .output()
        .expect("validate");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|line| line.starts_with("warning: no sandbox"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(warnings[0].contains("bwrap"), "{}", warnings[0]);
}

#[test]
fn sandbox_auto_without_bwrap_runs_unsandboxed_with_one_warning() {
    let Some(fixture) = bwrap_fixture() else {
        return;
    };
    let tasks = small_task(&fixture, "true", json!({}));
    let bin = path_without_bwrap(&fixture);
    let server = scripted_agent(&[("t", &["echo hi"])]);
    let run = fixture.run_into(
        &fixture.path("out"),
        &tasks,
        &[
            "--model",
            "scripted",
            "--base-url",
            &server.base_url(),
            "--sandbox",
            "auto",
        ],
        &[("PATH", bin.to_str().expect("UTF-8 path"))],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(run.row("t")["status"], "passed");
    let warnings: Vec<&str> = run
        .stderr
        .lines()
        .filter(|line| line.contains("sandbox"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", run.stderr);
    let warning = warnings[0];
    assert!(warning.starts_with("warning: no sandbox"), "{warning}");
    for what in ["bwrap", "files", "network"] {
        assert!(warning.contains(what), "{what} missing from: {warning}");
    }
    assert_eq!(tool_answers(&server, "t")[0], "hi\n[exit code: 0]");
    let settings = &run_json(&run)["settings"];
    assert_eq!(settings["sandbox_used"], "none");
    assert_eq!(settings["sandbox_mode"], "auto");

    // And with bwrap on PATH, auto picks it, silently.
    let server = scripted_agent(&[("t", &["echo hi"])]);
    let with_bwrap = fixture.run_scripted_into("out-bwrap", &tasks, &server, &[]);
    assert_eq!(with_bwrap.code, 0, "stderr:\n{}", with_bwrap.stderr);
    assert!(
        !with_bwrap.stderr.contains("no sandbox"),
        "{}",
        with_bwrap.stderr
    );
    assert_eq!(run_json(&with_bwrap)["settings"]["sandbox_used"], "bwrap");
}

#[test]
fn other_working_copies_in_workdirs_are_hidden_from_a_task() {
    // With --workdirs outside the run folder, the run folder's hiding no
    // longer covers the working copies: the folder is hidden on its own,
    // and each command sees only its own working copy in it.
    let Some(fixture) = bwrap_fixture() else {
        return;
    };
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let root = fixture.path("workdirs");
    let others = format!("{}/*/first.epoch-1", root.display());
    let tasks = fixture.tasks(&[
        task("first", &repo, &sha, "touch mine", json!({})),
        task(
            "second",
            &repo,
            &sha,
            // Its own working copy is there; the first task's (kept, with
            // the file it made) is not, nor any other run's folder.
            &format!(
                "test -f README.md && ! ls -d {others} && test $(ls {root} | wc -l) = 1",
                root = root.display()
            ),
            json!({}),
        ),
    ]);
    std::fs::create_dir_all(root.join("another-run/t.epoch-1")).expect("another run's folder");
    let run = fixture.run(
        &tasks,
        &[
            "--sandbox",
            "bwrap",
            "--model",
            "noop",
            "-j",
            "1",
            "--keep-workdirs",
            "--workdirs",
            root.to_str().expect("UTF-8"),
        ],
    );
    // The first task's working copy is really there, on the host.
    let kept: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("the workdirs folder")
        .map(|entry| entry.expect("entry").path().join("first.epoch-1/mine"))
        .filter(|mine| mine.is_file())
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(run.row("first")["status"], "passed", "{}", run.stderr);
    assert_eq!(run.row("second")["status"], "passed", "{}", run.stderr);
}

#[test]
fn workdirs_in_tmp_leave_tmp_writable() {
    // /tmp is private to each command already; hiding a --workdirs folder
    // there again would make the command's /tmp read-only.
    let Some(fixture) = bwrap_fixture() else {
        return;
    };
    let tasks = small_task(&fixture, "touch /tmp/probe && test -f README.md", json!({}));
    // A folder in /tmp that does not exist yet, inside one that goes away
    // with the test.
    let scratch = tempfile::Builder::new()
        .prefix("onebash-probe-workdirs-")
        .tempdir_in("/tmp")
        .expect("tempdir in /tmp");
    let new_in_tmp = scratch.path().join("workdirs").display().to_string();
    for dir in ["/tmp".to_owned(), new_in_tmp] {
        let run = fixture.run_into(
            &fixture.path(&format!("out-{}", unique("run"))),
            &tasks,
            &["--sandbox", "bwrap", "--model", "noop", "--workdirs", &dir],
            &[],
        );
        assert_eq!(
            run.row("t")["status"],
            "passed",
            "--workdirs {dir}: {}",
            run.stderr
        );
    }
}

/// onebash's exec helper (`__exec-limited`) tells its starter on stdin
/// whether it got as far as the command: nothing (end-of-file at the exec)
/// when it did, the reason when it did not, so that a failure to set a
/// task's limits is the harness's error, not a command that failed.
#[test]
fn the_exec_helper_reports_on_its_stdin_and_gives_the_command_dev_null() {
    use std::io::Read;
    let run = |args: &[&str]| {
        let (mut report, reporter) = std::io::pipe().expect("pipe");
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_onebash"));
        command
            .arg("__exec-limited")
            .args(args)
            .stdin(reporter)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null());
        let child = command.spawn().expect("start the helper");
        // Our copy of the write end goes with the command.
        drop(command);
        let output = child.wait_with_output().expect("wait");
        let mut said = String::new();
        report.read_to_string(&mut said).expect("read the report");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            said,
        )
    };
    let (code, out, said) = run(&["--", "bash", "-c", "readlink /proc/self/fd/0"]);
    assert_eq!(
        (code, out.trim(), said.as_str()),
        (Some(0), "/dev/null", "")
    );
    let (code, out, said) = run(&[
        "--join",
        "/nonexistent/cgroup.procs",
        "--",
        "bash",
        "-c",
        "echo ran",
    ]);
    assert_eq!((code, out.as_str()), (Some(126), ""));
    assert!(said.contains("cannot set the task's limits"), "{said}");
    let (code, _, said) = run(&["--", "/nonexistent/program"]);
    assert_eq!(code, Some(126));
    assert!(said.contains("cannot run /nonexistent/program"), "{said}");
}

/// On a machine without bwrap, `cargo test` says so where the user looks:
/// this test binary, run again on one sandbox test with no bwrap on PATH
/// and no `CI`, names bwrap as skipped on its stderr (outside libtest's
/// capture, which hides what a passing test prints) and in the summary at
/// its end, while the test itself passes.
#[test]
fn a_test_skipped_for_want_of_bwrap_says_so_on_stderr() {
    let empty = tempfile::tempdir().expect("tempdir");
    let test = "sandbox::writes_outside_the_checkout_fail_and_leave_the_host_unchanged";
    let out = std::process::Command::new(std::env::current_exe().expect("this test binary"))
        .args([test, "--exact", "--test-threads", "1"])
        .env("PATH", empty.path())
        .env_remove("CI")
        .output()
        .expect("the test binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("1 passed"), "stdout:\n{stdout}");
    assert!(
        stderr.contains("skipped: bwrap is missing (install bubblewrap to run the sandbox tests)"),
        "stderr:\n{stderr}"
    );
    let summary = &stderr[stderr
        .find(crate::support::skips::SUMMARY)
        .unwrap_or_else(|| panic!("no summary; stderr:\n{stderr}"))..];
    assert!(
        summary.starts_with("onebash tests: skipped 1 test whose tools this machine lacks")
            && summary.contains("  bwrap: 1 skipped; install bubblewrap"),
        "{summary}"
    );
}
