//! `--env podman` and `--env docker`: tasks in a container per (task,
//! epoch), from an image built on this machine by `scripts/test-images.sh`
//! (no registry is reachable from here) and given to docker's daemon by
//! `podman save | docker load`. Each test drives the real onebash against
//! a scripted model and asks the engine what exists; it is skipped with a
//! line when the engine or the image is missing, and fails then when `CI`
//! is set (`.ci/run` installs podman and docker.io, starts dockerd and
//! builds the image). A missing, stopped or denied engine is tested with
//! a stand-in client.
//!
//! The tests of a module made by `under_each_backend!` run once a
//! backend (`...::podman`, `...::docker`, `...::oci`): the same body, the
//! same verdicts and probes, under `--env oci` from the same images saved
//! by podman; those of `under_each_engine!` once an engine
//! (support/backend.rs).

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::json;

use crate::history::{FUTURE_TEXTS, Leaky, PAST_TEXTS, assert_whole_past, leaky_repo};
use crate::support::backend::{Backend, IMAGE, ImageTags, under_each_backend, under_each_engine};
use crate::support::harness::{
    Fixture, git, onebash, scripted_agent, scripted_handler, task, tool_answers,
};
use crate::support::probes::{self, Future};
use crate::support::processes::{assert_no_process_left, running};
use crate::support::server::{ScriptedServer, text_reply};
use crate::support::sync::eventually;

/// A task id no other test process uses: containers are labelled with it.
fn unique_id(what: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    format!(
        "{what}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// A command printing how many processes in the container have a command
/// line matching the grep pattern `pattern` (bash alone: images need not
/// have `ps`).
fn running_count(pattern: &str) -> String {
    format!(
        "for p in /proc/[0-9]*; do tr '\\0' ' ' 2>/dev/null < $p/cmdline; echo; done | grep -c '{pattern}' || true"
    )
}

/// A repo with one file, and a task over it whose model is the scripted
/// server.
fn one_task(fixture: &Fixture, id: &str, test_command: &str) -> std::path::PathBuf {
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    fixture.tasks(&[task(id, &repo, &sha, test_command, json!({}))])
}

/// The flags of a run under `backend`, from the test image, against
/// `server`.
fn backend_args(fixture: &Fixture, backend: Backend, server: &ScriptedServer) -> Vec<String> {
    let mut args: Vec<String> = ["--model", "scripted", "--base-url", &server.base_url()]
        .map(str::to_owned)
        .to_vec();
    args.extend(backend.image_flags(fixture, IMAGE));
    args
}

fn run_in_backend(
    fixture: &Fixture,
    backend: Backend,
    tasks: &Path,
    server: &ScriptedServer,
    extra: &[&str],
) -> crate::support::harness::RunOutput {
    let args = backend_args(fixture, backend, server);
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args.extend_from_slice(extra);
    // A key the commands must never see.
    fixture.run_with_env(tasks, &args, &[("OPENAI_API_KEY", "sk-container-secret")])
}

/// The agent's commands run in the image (bookworm, not the host), in the
/// working copy at /testbed, with no network, no API key, and (under an
/// engine) the labels naming the run; it cannot write the host; what the agent
/// writes in the working copy is in the diff; the tests run in a fresh
/// environment (what the agent wrote outside the working copy is gone)
/// that sees the agent's change; nothing is left.
fn a_task_runs_in_its_image_and_is_graded_afresh(backend: Backend) {
    let fixture = Fixture::new();
    let id = unique_id("c-end");
    let tasks = one_task(
        &fixture,
        &id,
        "grep -q bookworm /etc/os-release && grep -q from-the-agent made.txt && test ! -e /tmp/outside-workdir",
    );
    // A folder of the host the agent tries to write in.
    let host_file = fixture.path("host-file");
    let write_the_host = format!("echo x > {} 2>&1; echo tried", host_file.display());
    let commands = [
        "grep PRETTY_NAME /etc/os-release; pwd",
        "echo from-the-agent > made.txt && touch /tmp/outside-workdir && echo written",
        "cut -d: -f1 /proc/net/dev | tail -n +3; python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 53), 5)' 2>&1 | tail -n 1",
        "env",
        "git status --short",
        &write_the_host,
    ];
    let plan: [(&str, &[&str]); 1] = [(&id, &commands)];
    // While the agent works, its container exists: its labels are read
    // then, at the request that follows the last command.
    let labels = Arc::new(std::sync::Mutex::new(String::new()));
    let seen = Arc::clone(&labels);
    let task_label = format!("onebash.task={id}");
    let scripted = scripted_handler(&plan);
    let count = commands.len();
    let server = ScriptedServer::start_with(move |request| {
        let answered = request.body["messages"]
            .as_array()
            .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count());
        if answered == count && backend.engine().is_some() {
            *seen.lock().expect("lock") = backend.running_labels(&task_label);
        }
        scripted(request)
    });
    let run = run_in_backend(&fixture, backend, &tasks, &server, &[]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let row = run.row(&id);
    assert_eq!(row["status"], "passed", "{row:?}\n{}", run.stderr);

    let answers = tool_answers(&server, &id);
    assert_eq!(answers.len(), commands.len(), "{answers:?}");
    assert!(answers[0].contains("bookworm"), "{}", answers[0]);
    assert!(answers[0].contains("/testbed"), "{}", answers[0]);
    assert!(answers[1].contains("written"), "{}", answers[1]);
    // Only the loopback interface, and no route out.
    let net = &answers[2];
    assert!(net.contains("lo") && !net.contains("eth"), "{net}");
    assert!(net.contains("Error"), "a connection went out: {net}");
    assert!(
        !answers[3].contains("sk-container-secret"),
        "{}",
        answers[3]
    );
    assert!(!answers[3].contains("OPENAI"), "{}", answers[3]);
    assert!(answers[4].contains("made.txt"), "{}", answers[4]);
    assert!(answers[5].contains("tried"), "{}", answers[5]);
    assert!(!host_file.exists(), "the agent wrote the host");

    let patch = std::fs::read_to_string(run.task_dir(&id).join("patch.diff")).expect("patch");
    assert!(
        patch.contains("made.txt") && patch.contains("+from-the-agent"),
        "{patch}"
    );
    assert!(!patch.contains("outside-workdir"), "{patch}");

    if backend.engine().is_some() {
        let labels = labels.lock().expect("lock").clone();
        for want in [
            format!("\"onebash.task\":\"{id}\""),
            "\"onebash.epoch\":\"1\"".to_owned(),
            "\"onebash.run\":".to_owned(),
            "\"onebash.phase\":\"agent\"".to_owned(),
        ] {
            assert!(labels.contains(&want), "{want} not in {labels}");
        }
    }
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.out.join("run.json")).expect("run.json"))
            .expect("run.json is JSON");
    assert_eq!(run_json["settings"]["sandbox_used"], backend.sandbox_used());
    backend.assert_nothing_left_of(&id);
}

under_each_backend!(
    a_task_runs_in_its_image,
    super::a_task_runs_in_its_image_and_is_graded_afresh
);

/// A command that forks sleepers (one of them in a session of its own)
/// and outlives its timeout is killed with everything it started, inside
/// the container: the next command finds none of them.
fn a_timeout_kills_the_command_and_what_it_forked_inside_the_container(backend: Backend) {
    let fixture = Fixture::new();
    let id = unique_id("c-timeout");
    let tasks = one_task(&fixture, &id, "true");
    let count = running_count("^sleep 60[1-4]");
    let commands = [
        "sleep 601 & setsid sleep 602 & (sleep 603 &); echo started; sleep 604",
        &count,
    ];
    let plan: [(&str, &[&str]); 1] = [(&id, &commands)];
    let server = scripted_agent(&plan);
    // Long enough for the forks on any machine; the sleeps are far longer.
    let run = run_in_backend(
        &fixture,
        backend,
        &tasks,
        &server,
        &["--command-timeout", "10"],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let answers = tool_answers(&server, &id);
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert!(answers[0].contains("started"), "{}", answers[0]);
    assert!(answers[0].contains("timed out"), "{}", answers[0]);
    assert!(
        answers[1].trim_start().starts_with("0\n"),
        "sleepers left in the container: {}",
        answers[1]
    );
    let command = &run.events(&id, "command")[0];
    assert_eq!(command["timed_out"], true, "{command}");
}

under_each_engine!(
    a_timeout_kills_inside_the_container,
    super::a_timeout_kills_the_command_and_what_it_forked_inside_the_container
);

/// Through the channel into the container (`--container-commands
/// channel`, the default) or one exec per command, a command starts as
/// it would on its own: nothing of the one before (working directory,
/// variables, functions, background jobs, marked or not, in its process
/// group); what one leaves running, marked or not, never writes into the
/// next one's output; one that
/// closes its output runs to its end; 100 MB of output are counted and
/// capped; and a command that kills the channel's server loses nothing
/// but itself: the trajectory says so, and the next command runs.
fn commands_through_the_channel_start_clean_and_survive_what_they_do(backend: Backend, via: &str) {
    let fixture = Fixture::new();
    let id = unique_id("c-channel");
    let tasks = one_task(&fixture, &id, "true");
    let same = format!(
        "pwd; echo \"${{CARRIED-unset}}\"; type f >/dev/null 2>&1 || echo no-function; {}",
        running_count("^sleep 61[12]")
    );
    let commands = [
        // One leftover with the command's mark, one without it.
        "cd /tmp && export CARRIED=1 && f() { :; }; sleep 611 & env -u ONEBASH_COMMAND sleep 612 & echo first",
        &same,
        // Both wait for the next command's go, then write and say so.
        "(while [ ! -e /tmp/go ]; do sleep 0.01; done; echo LEAK-MARKED; touch /tmp/leaked) & \
         env -i bash -c 'while [ ! -e /tmp/go ]; do sleep 0.01; done; echo LEAK-UNMARKED; touch /tmp/leaked' & echo one",
        // Had either lived, this waits for its write, which is then here.
        "touch /tmp/go; for i in $(seq 1 300); do [ -e /tmp/leaked ] && break; sleep 0.01; done; echo two",
        "echo before; exec >&- 2>&-; for i in $(seq 1 200); do :; done; echo done > /tmp/finished",
        "cat /tmp/finished",
        "head -c 100000000 /dev/zero | tr '\\0' a; echo",
        "echo before-kill; kill -9 $PPID; echo after",
        "echo next",
    ];
    let plan: [(&str, &[&str]); 1] = [(&id, &commands)];
    let server = scripted_agent(&plan);
    let run = run_in_backend(
        &fixture,
        backend,
        &tasks,
        &server,
        &["--container-commands", via],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(run.row(&id)["status"], "passed", "{}", run.stderr);
    let events = run.events(&id, "command");
    assert_eq!(events.len(), commands.len(), "{events:?}");
    let output = |i: usize| events[i]["output"].as_str().unwrap_or_default().to_owned();
    assert_eq!(output(0), "first\n");
    assert_eq!(output(1), "/testbed\nunset\nno-function\n0\n");
    assert_eq!(output(2), "one\n");
    assert_eq!(output(3), "two\n");
    assert_eq!(output(4), "before\n");
    assert_eq!(output(5), "done\n");
    assert_eq!(
        events[6]["output_bytes"], 100_000_001,
        "{}",
        events[6]["output_bytes"]
    );
    assert!(output(6).contains("bytes omitted]"), "not capped");
    assert!(output(7).starts_with("before-kill\n"), "{}", output(7));
    assert_eq!(output(8), "next\n");
    if via == "channel" {
        let notice = events[7]["notice"].as_str().unwrap_or_default();
        assert!(
            notice.contains("the channel into the container was lost during this command"),
            "{}",
            events[7]
        );
        for (i, event) in events.iter().enumerate().filter(|(i, _)| *i != 7) {
            assert!(event.get("notice").is_none(), "command {i}: {event}");
        }
    }
}

fn through_the_channel(backend: Backend) {
    commands_through_the_channel_start_clean_and_survive_what_they_do(backend, "channel");
}

fn by_one_exec_each(backend: Backend) {
    commands_through_the_channel_start_clean_and_survive_what_they_do(backend, "exec");
}

under_each_engine!(commands_through_the_channel, super::through_the_channel);
under_each_engine!(commands_by_one_exec_each, super::by_one_exec_each);

/// A command sees the same through the channel as by its own exec: the
/// environment (the image's, onebash's settings, no key), the limits, the
/// umask, the user, stdin on /dev/null and no other descriptor, the
/// working directory, and its shell level. (The descriptors are listed
/// into a file: a pipeline's own pipe would show for a moment.)
fn the_channel_gives_a_command_what_its_own_exec_gives(backend: Backend) {
    let probe = "env | sort | grep -v '^ONEBASH_COMMAND=\\|^_='; ulimit -a; umask; id; pwd; \
                 ls -l /proc/$$/fd > /tmp/fds; awk 'NR > 1 { print $9, $10, $11 }' /tmp/fds";
    let mut seen = Vec::new();
    for via in ["channel", "exec"] {
        let fixture = Fixture::new();
        let id = unique_id("c-same");
        let tasks = one_task(&fixture, &id, "true");
        let commands = [probe];
        let plan: [(&str, &[&str]); 1] = [(&id, &commands)];
        let server = scripted_agent(&plan);
        let run = run_in_backend(
            &fixture,
            backend,
            &tasks,
            &server,
            &["--container-commands", via],
        );
        assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
        let event = &run.events(&id, "command")[0];
        let output = event["output"].as_str().unwrap_or_default().to_owned();
        assert!(!output.contains("sk-container-secret"), "{output}");
        // The container's name and the task's mark differ from run to
        // run, and so do pipes (through the channel stdout and stderr are
        // one pipe, as on the host; an exec gives two).
        let output: String = output
            .lines()
            .filter(|line| !line.starts_with("HOSTNAME=") && !line.starts_with("ONEBASH_TASK="))
            .map(|line| match line.find("pipe:[") {
                Some(at) => format!("{}pipe\n", &line[..at]),
                None => format!("{line}\n"),
            })
            .collect();
        seen.push(output);
    }
    assert_eq!(seen[0], seen[1], "channel, then exec");
    assert!(seen[0].contains("0 -> /dev/null"), "{}", seen[0]);
}

under_each_engine!(
    the_channel_gives_what_an_exec_gives,
    super::the_channel_gives_a_command_what_its_own_exec_gives
);

/// `--max-memory` and `--max-processes` hold for the agent's commands in
/// the image as on the host: an allocation past the memory cap fails, a
/// fork storm is cut short, the task goes on, and nothing is left. Under
/// oci they are onebash's own limits (cgroup, rlimits), which run.json
/// says were enforced or not; under podman and docker the engine's. The
/// engine's processes leave nothing of an out-of-memory kill (Debian's
/// conmon writes an empty `oom` file in its current folder) in the folder
/// onebash was started in, or in the agent's working copy.
fn the_limits_hold_in_the_image(backend: Backend) {
    let fixture = Fixture::new();
    let id = unique_id("c-limits");
    let tasks = one_task(&fixture, &id, "true");
    let hog = "python3 -c 'b = bytearray(600 * 1024 * 1024); print(\"allocated\", len(b))'";
    let sleeper = match backend {
        Backend::Podman => "681",
        Backend::Docker => "683",
        Backend::Oci => "682",
    };
    let storm = format!(
        "python3 -c \"
import subprocess
started, error = [], None
for i in range(200):
    try:
        started.append(subprocess.Popen(['sleep', '{sleeper}']))
    except OSError as err:
        error = err
        break
print('started', len(started), error)
\""
    );
    let commands = [hog, storm.as_str(), "echo alive"];
    let server = scripted_agent(&[(&id, &commands)]);
    let mut args = backend_args(&fixture, backend, &server);
    args.extend(
        [
            "--max-memory",
            "256",
            "--max-processes",
            "64",
            "--command-timeout",
            "60",
        ]
        .map(str::to_owned),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let cwd = fixture.path("started-in");
    let run = fixture.run_with_env_in(&cwd, &tasks, &args, &[]);
    assert_no_process_left(&format!("sleep {sleeper}"));
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let left: Vec<_> = std::fs::read_dir(&cwd)
        .expect("the folder onebash started in")
        .map(|entry| entry.expect("an entry").file_name())
        .collect();
    assert!(left.is_empty(), "left where onebash started: {left:?}");
    let patch = std::fs::read_to_string(run.task_dir(&id).join("patch.diff")).expect("patch.diff");
    assert_eq!(patch, "", "the agent wrote nothing in its working copy");
    let answers = tool_answers(&server, &id);
    assert_eq!(answers.len(), 3, "{answers:?}");
    assert_eq!(answers[2], "alive\n[exit code: 0]");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.out.join("run.json")).expect("run.json"))
            .expect("run.json is JSON");
    let enforced = &manifest["settings"]["limits_enforced"];
    let held = |kind: &str| {
        backend.engine().is_some()
            || !enforced[kind]
                .as_str()
                .unwrap_or_default()
                .starts_with("not enforced")
    };
    if held("memory") {
        assert!(
            !answers[0].contains("allocated") && !answers[0].contains("[exit code: 0]"),
            "600 MB under a 256 MB cap: {}",
            answers[0]
        );
    }
    if held("processes") {
        let started: usize = answers[1]
            .split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{}", answers[1]));
        assert!(
            started < 64,
            "{started} sleepers under a cap of 64: {}",
            answers[1]
        );
    }
    backend.assert_nothing_left_of(&id);
}

under_each_backend!(limits, super::the_limits_hold_in_the_image);

/// onebash killed with SIGKILL while the agent's command runs: under an
/// engine its container is left running, and `--resume` of the same run
/// folder (or any run that starts) removes it before any task starts;
/// under oci nothing is left
/// running even before the resume (bwrap dies with onebash, and the
/// command's processes with bwrap's PID namespace). Either way the
/// resumed run passes and leaves nothing, neither a process nor the
/// task's working copy.
fn kill_9_then_resume_leaves_nothing_of_the_run(backend: Backend) {
    let fixture = Fixture::new();
    let id = unique_id("c-kill");
    let tasks = one_task(&fixture, &id, "true");
    let label = format!("onebash.task={id}");
    // The command sleeps far longer than any test runs: onebash is killed
    // once it is seen running. One length a backend: the tests run at
    // once, and each must see (and kill) its own.
    let sleeper = match backend {
        Backend::Podman => "sleep 676",
        Backend::Docker => "sleep 678",
        Backend::Oci => "sleep 677",
    };
    let server = scripted_agent(&[(&id, &[sleeper])]);
    let out = fixture.path("out");
    killed_in_its_command(&fixture, &tasks, &out, backend, &server, sleeper);
    match backend {
        Backend::Podman | Backend::Docker => assert_eq!(
            backend.containers(&label).len(),
            1,
            "the container should outlive a killed onebash (else this test proves nothing)"
        ),
        Backend::Oci => assert_no_process_left(sleeper),
    }

    let answering = ScriptedServer::start(vec![text_reply("Done.", "stop", 10, 2)]);
    let mut args = backend_args(&fixture, backend, &answering);
    args.push("--resume".to_owned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = fixture.run_into(&out, &tasks, &args, &[]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(run.row(&id)["status"], "passed");
    if backend.engine().is_some() {
        // Removed by this resume's sweep, or by another test's run that
        // started in between (its lock free, the killed run is anyone's
        // to sweep): either way none is left.
        assert!(
            eventually(|| backend.containers(&label).is_empty()),
            "containers of the run are left: {:?}",
            backend.containers(&label)
        );
    }
    assert_no_process_left(sleeper);
    backend.assert_nothing_left_of(&id);
    let workdirs: Vec<_> = std::fs::read_dir(out.join("workdirs"))
        .map(|dir| dir.map(|e| e.expect("entry").file_name()).collect())
        .unwrap_or_default();
    assert!(workdirs.is_empty(), "working copies left: {workdirs:?}");
}

/// Starts `onebash run` of `tasks` into `out` under `backend` and kills it
/// with SIGKILL once the agent's command `sleeper` is seen running.
fn killed_in_its_command(
    fixture: &Fixture,
    tasks: &Path,
    out: &Path,
    backend: Backend,
    server: &ScriptedServer,
    sleeper: &str,
) {
    let mut child = onebash()
        .arg("run")
        .arg(tasks)
        .arg("-o")
        .arg(out)
        .arg("--cache-dir")
        .arg(fixture.path("cache"))
        .args(backend_args(fixture, backend, server))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start onebash");
    assert!(
        eventually(|| running(sleeper)),
        "the agent's command never ran"
    );
    child.kill().expect("SIGKILL onebash");
    child.wait().expect("reap onebash");
}

under_each_backend!(
    kill_9_then_resume,
    super::kill_9_then_resume_leaves_nothing_of_the_run
);

/// A new run (another folder) removes what a killed run left: its
/// container, whose labels name a run folder lock no process holds. A
/// container of a run that still holds its lock, one of another machine,
/// and one without onebash's labels stay. (Which container is whose is
/// decided by `container::tests::a_sweep_takes_only_containers_of_dead_runs`.)
fn a_new_run_removes_a_killed_run_s_containers_and_no_other(backend: Backend) {
    let engine = backend.engine().expect("an engine");
    let fixture = Fixture::new();
    let id = unique_id("c-swept");
    let tasks = one_task(&fixture, &id, "true");
    let sleeper = match backend {
        Backend::Docker => "sleep 680",
        _ => "sleep 679",
    };
    let server = scripted_agent(&[(&id, &[sleeper])]);
    let out = fixture.path("killed");
    killed_in_its_command(&fixture, &tasks, &out, backend, &server, sleeper);
    let killed = format!("onebash.task={id}");
    assert_eq!(backend.containers(&killed).len(), 1, "nothing to sweep");

    // A run that still runs: its lock held (by this test).
    let held = fixture.path("live/run.lock");
    std::fs::create_dir_all(fixture.path("live")).expect("mkdir");
    let _lock = onebash::sys::lock::FileLock::acquire(&held).expect("lock");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
    let free = fixture.path("gone/run.lock");
    let stays = unique_id("c-stays");
    let others: [(&str, Vec<String>); 3] = [
        (
            "live",
            vec![
                format!("onebash.run=live"),
                format!("onebash.host={}", host.trim()),
                format!("onebash.lock={}", held.display()),
            ],
        ),
        (
            "elsewhere",
            vec![
                format!("onebash.run=elsewhere"),
                "onebash.host=another-machine".to_owned(),
                format!("onebash.lock={}", free.display()),
            ],
        ),
        ("unlabelled", Vec::new()),
    ];
    for (name, labels) in &others {
        let mut run = Command::new(engine);
        run.args([
            "run",
            "-d",
            "--network",
            "none",
            "--label",
            &format!("onebash-test={stays}-{name}"),
        ]);
        for label in labels {
            run.args(["--label", label]);
        }
        let started = run
            .args([IMAGE, "sleep", "600"])
            .output()
            .expect("start a container");
        assert!(
            started.status.success(),
            "{}",
            String::from_utf8_lossy(&started.stderr)
        );
    }

    // The engine as the next run sees it: its list of onebash's containers
    // also names one that another run removed just after listing it (two
    // runs sweeping at once), which inspect and rm then cannot find.
    let real = which(engine);
    let bin = fixture.path("bin");
    std::fs::create_dir_all(&bin).expect("mkdir bin");
    let shim = bin.join(engine);
    std::fs::write(
        &shim,
        format!(
            "#!/bin/sh\nif [ \"$*\" = \"ps -a -q --filter label=onebash.run\" ]; then\n  {real} \"$@\" || exit $?\n  echo 0123456789ab0123456789ab0123456789ab0123456789ab0123456789abcdef\n  exit 0\nfi\nexec {real} \"$@\"\n",
            real = real.display()
        ),
    )
    .expect("write the shim");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = fixture.run_into(
        &fixture.path("next"),
        &tasks,
        &[
            "--model", "noop", "--env", engine, "--image", IMAGE, "--pull", "never",
        ],
        &[("PATH", &path)],
    );
    assert!(
        !run.stderr.contains("failed to remove the containers"),
        "a container gone between the list and the removal failed the sweep:\n{}",
        run.stderr
    );
    let left: Vec<String> = others
        .iter()
        .flat_map(|(name, _)| backend.containers(&format!("onebash-test={stays}-{name}")))
        .collect();
    let _ = Command::new(engine)
        .args(["rm", "-f"])
        .args(&left)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    // Any run that starts now removes it, this one or another test's at
    // once: the end state is what is checked, not who removed it.
    assert!(
        backend.containers(&killed).is_empty(),
        "the killed run's container is left: {}",
        run.stderr
    );
    assert_eq!(
        left.len(),
        3,
        "a container that is not a killed run's was removed"
    );
    assert_no_process_left(sleeper);
}

under_each_engine!(
    a_new_run_sweeps_a_killed_run,
    super::a_new_run_removes_a_killed_run_s_containers_and_no_other
);

/// An image the engine does not have stops the run before any task, with
/// exit code 2 and its name; with `--pull missing` the failed pull does.
fn a_missing_image_stops_the_run_with_exit_2_naming_it(backend: Backend) {
    let engine = backend.engine().expect("an engine");
    let fixture = Fixture::new();
    let id = unique_id("c-missing");
    let tasks = one_task(&fixture, &id, "true");
    // `localhost/` names no registry that answers: the pull fails at once.
    let missing = "localhost/onebash-test/no-such-image:1";
    for pull in ["never", "missing"] {
        let out = fixture.path(&format!("out-{pull}"));
        let run = fixture.run_into(
            &out,
            &tasks,
            &[
                "--model", "noop", "--env", engine, "--image", missing, "--pull", pull,
            ],
            &[],
        );
        assert_eq!(run.code, 2, "--pull {pull}: {}", run.stderr);
        assert!(
            run.stderr.contains(missing),
            "--pull {pull}: {}",
            run.stderr
        );
        assert!(
            run.stderr.contains("hint:"),
            "--pull {pull}: {}",
            run.stderr
        );
        assert!(
            !out.join("results.csv").exists(),
            "--pull {pull}: a task started"
        );
    }
    // A task with no image at all is refused before the engine is asked.
    let run = fixture.run_into(
        &fixture.path("out-none"),
        &tasks,
        &["--model", "noop", "--env", engine],
        &[],
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains(&id) && run.stderr.contains("--image"),
        "{}",
        run.stderr
    );
}

under_each_engine!(
    a_missing_image_stops_the_run,
    super::a_missing_image_stops_the_run_with_exit_2_naming_it
);

/// A missing engine and one that does not answer each stop the run with
/// exit code 2 and one message. Both are made here with a PATH of our
/// own: no engine at all, and a stand-in `docker` that fails as a client
/// does when its daemon is down. Needs no podman.
#[test]
fn a_missing_stopped_or_denied_engine_stops_the_run_with_exit_2() {
    let fixture = Fixture::new();
    let tasks = one_task(&fixture, "t", "true");
    let bin = fixture.path("bin");
    std::fs::create_dir_all(&bin).expect("mkdir bin");
    let path = bin.display().to_string();
    let run = fixture.run_into(
        &fixture.path("out-missing"),
        &tasks,
        &[
            "--model",
            "noop",
            "--env",
            "podman",
            "--image",
            "example/image:1",
        ],
        &[("PATH", &path)],
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("`podman` is not on PATH") && run.stderr.contains("hint:"),
        "{}",
        run.stderr
    );

    // A stopped daemon, and a socket the user may not use: what `docker
    // version` prints then, each told apart, in one message.
    let docker = bin.join("docker");
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let cases = [
        (
            "down",
            "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
            [
                "the engine does not answer",
                "Is the docker daemon running?",
            ],
        ),
        (
            "denied",
            "permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock: dial unix /var/run/docker.sock: connect: permission denied",
            [
                "the engine's socket is not permitted",
                "hint: add your user to the group",
            ],
        ),
    ];
    for (case, says, expected) in cases {
        std::fs::write(&docker, format!("#!/bin/sh\necho '{says}' >&2\nexit 1\n"))
            .expect("write docker");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&docker, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let out = fixture.path(&format!("out-{case}"));
        let run = fixture.run_into(
            &out,
            &tasks,
            &[
                "--model",
                "noop",
                "--env",
                "docker",
                "--image",
                "example/image:1",
            ],
            &[("PATH", &path)],
        );
        assert_eq!(run.code, 2, "{case}: {}", run.stderr);
        for text in expected {
            assert!(run.stderr.contains(text), "{case}: {}", run.stderr);
        }
        assert_eq!(run.stderr.matches("error:").count(), 1, "{}", run.stderr);
        assert!(!out.exists(), "{case}: the run folder was made");
    }
}

/// A test image from [`IMAGE`] holding, at /testbed, the repo of
/// `history.rs` whose history runs past the base (a gold commit whose
/// message names the fix, on a branch and tagged, a commit only the
/// reflog names, an unreachable one), checked out on a branch at the
/// base, with a remote and packed refs: what a SWE-bench image can hold.
/// `then` changes the repo before it is copied in. Removed when dropped.
pub struct RepoImage {
    pub tag: String,
    pub leaky: Leaky,
    _removed: ImageTags,
}

impl RepoImage {
    pub fn build(fixture: &Fixture, then: impl FnOnce(&Leaky)) -> RepoImage {
        let leaky = leaky_repo(fixture);
        let repo = &leaky.repo;
        git(repo, &["checkout", "-q", "-b", "work", &leaky.base]);
        git(
            repo,
            &["remote", "add", "origin", "https://example.com/calc.git"],
        );
        git(repo, &["pack-refs", "--all"]);
        then(&leaky);
        let context = fixture.path("image");
        std::fs::create_dir_all(&context).expect("mkdir image");
        std::fs::write(
            context.join("Containerfile"),
            format!("FROM {IMAGE}\nCOPY repo /testbed\n"),
        )
        .expect("write Containerfile");
        let copied = Command::new("cp")
            .arg("-a")
            .arg(repo)
            .arg(context.join("repo"))
            .status()
            .expect("cp");
        assert!(copied.success());
        let tag = format!("localhost/onebash-test/repo-in-image:{}", unique_id("i"));
        let built = Command::new("podman")
            .args(["build", "-q", "--pull=never", "-t", &tag])
            .arg(&context)
            .output()
            .expect("podman build");
        assert!(
            built.status.success(),
            "podman build: {}",
            String::from_utf8_lossy(&built.stderr)
        );
        RepoImage {
            _removed: ImageTags(vec![tag.clone()]),
            tag,
            leaky,
        }
    }
}

/// A SWE-bench instance line over the repo in `image`, whose hidden test
/// (its test_patch) passes once `add` adds.
pub fn instance(id: &str, image: &RepoImage) -> serde_json::Value {
    let test_patch = "diff --git a/test_add.py b/test_add.py\nnew file mode 100644\n--- /dev/null\n+++ b/test_add.py\n@@ -0,0 +1,3 @@\n+import calc\n+assert calc.add(2, 3) == 5, calc.add(2, 3)\n+print('add adds')\n";
    json!({
        "instance_id": id,
        "repo": "example/calc",
        "base_commit": image.leaky.base,
        "problem_statement": format!("Problem of task {id}."),
        "test_patch": test_patch,
    })
}

/// Runs `commands` as the agent of one instance over the repo in `image`
/// with `extra` flags; the run and the answers.
fn run_on_image_repo(
    fixture: &Fixture,
    backend: Backend,
    image: &RepoImage,
    id: &str,
    commands: &[&str],
    extra: &[&str],
) -> (crate::support::harness::RunOutput, Vec<String>) {
    let tasks = fixture.tasks(&[instance(id, image)]);
    let plan: [(&str, &[&str]); 1] = [(id, commands)];
    let server = scripted_agent(&plan);
    let url = server.base_url();
    let flags = backend.image_flags(fixture, &image.tag);
    let mut args = vec![
        "--model",
        "scripted",
        "--base-url",
        &url,
        "--test-command",
        "python3 test_add.py",
    ];
    args.extend(flags.iter().map(String::as_str));
    args.extend_from_slice(extra);
    let run = fixture.run_with_env(&tasks, &args, &[]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let answers = tool_answers(&server, id);
    assert_eq!(answers.len(), commands.len(), "{answers:?}");
    (run, answers)
}

/// The repo a SWE-bench image holds at /testbed is used (the instance's
/// `owner/name` is never fetched), made to hold nothing past the base
/// before the agent starts: every probe of `probes.rs`, run inside the
/// container, finds nothing, while `git log` shows the whole past. The
/// checkout event records the check; the agent's fix (and a Latin-1 file,
/// as binary) comes out as its patch and is applied in the tests' fresh
/// container, where the test patch's file replaces the agent's one of the
/// same name, and the task passes.
fn the_repo_in_the_image_holds_nothing_past_the_base_and_its_fix_is_graded(backend: Backend) {
    let fixture = Fixture::new();
    let image = RepoImage::build(&fixture, |_| {});
    let id = unique_id("c-image");
    let future: Vec<&str> = image.leaky.future.iter().map(String::as_str).collect();
    let script = probes::script(&Future {
        commits: &future,
        texts: FUTURE_TEXTS,
        unreadable: &[],
    });
    let commands = [
        script.as_str(),
        "git log --format=%s",
        "git status --short --branch; git remote",
        "sed -i 's/x - y/x + y/' calc.py && python3 -c 'import calc; print(calc.add(2, 3))'",
        // Text that is not UTF-8 goes into the patch as binary.
        r"printf 'caf\351\n' > latin.txt",
        // A file of the hidden test's own: the test patch's takes its place.
        "echo 'raise SystemExit(1)' > test_add.py",
    ];
    let (run, answers) = run_on_image_repo(&fixture, backend, &image, &id, &commands, &[]);
    assert!(probes::finished(&answers[0]), "{}", answers[0]);
    assert_eq!(
        probes::leaks(&answers[0]),
        Vec::<String>::new(),
        "{}",
        answers[0]
    );
    assert_whole_past(&answers[1]);
    assert!(answers[2].contains("HEAD (no branch)"), "{}", answers[2]);
    assert!(!answers[2].contains("origin"), "{}", answers[2]);
    assert!(answers[3].contains('5'), "{}", answers[3]);

    let row = run.row(&id);
    assert_eq!(row["status"], "passed", "{row:?}\n{}", run.stderr);
    let checkout = &run.events(&id, "checkout")[0];
    assert_eq!(checkout["commit"], image.leaky.base.as_str(), "{checkout}");
    assert_eq!(checkout["history"], "full", "{checkout}");
    let objects = git(
        &image.leaky.repo,
        &["rev-list", "--objects", &image.leaky.base],
    )
    .lines()
    .count() as u64;
    assert_eq!(checkout["objects"], objects, "{checkout}");
    assert_eq!(checkout["fetched"], false, "{checkout}");
    let patch = std::fs::read_to_string(run.task_dir(&id).join("patch.diff")).expect("patch");
    assert!(patch.contains("+    return x + y"), "{patch}");
    assert!(patch.contains("+raise SystemExit(1)"), "{patch}");
    assert!(
        patch.contains("b/latin.txt") && patch.contains("GIT binary patch"),
        "{patch}"
    );
    let test = &run.events(&id, "test")[0];
    assert_eq!(test["test_patch_method"], "git apply", "{test}");
    backend.assert_nothing_left_of(&id);
}

under_each_backend!(
    repo_in_image_leak_probes,
    super::the_repo_in_the_image_holds_nothing_past_the_base_and_its_fix_is_graded
);

/// An image whose repo is checked out at the fix itself: a descendant of
/// the base, but one that other refs name (main, a branch, a tag), so no
/// setup commit of the image's own: the base is checked out (and the move
/// recorded as the checkout's warning), and with
/// `--history none` the repo becomes one commit with no parents: the
/// probes find nothing past the base and nothing before it.
fn the_repo_in_the_image_at_the_fix_is_moved_to_the_base_without_history(backend: Backend) {
    let fixture = Fixture::new();
    let image = RepoImage::build(&fixture, |leaky| {
        git(
            &leaky.repo,
            &["checkout", "-q", "--detach", &leaky.future[0]],
        );
    });
    let id = unique_id("c-image-none");
    let commits: Vec<&str> = image
        .leaky
        .future
        .iter()
        .chain(&image.leaky.past[..image.leaky.past.len() - 1])
        .map(String::as_str)
        .collect();
    let texts: Vec<&str> = FUTURE_TEXTS.iter().chain(PAST_TEXTS).copied().collect();
    let script = probes::script(&Future {
        commits: &commits,
        texts: &texts,
        unreadable: &[],
    });
    let commands = [script.as_str(), "git rev-list --count HEAD"];
    let (run, answers) = run_on_image_repo(
        &fixture,
        backend,
        &image,
        &id,
        &commands,
        &["--history", "none"],
    );
    assert!(probes::finished(&answers[0]), "{}", answers[0]);
    assert_eq!(
        probes::leaks(&answers[0]),
        Vec::<String>::new(),
        "{}",
        answers[0]
    );
    assert!(answers[1].trim_start().starts_with("1\n"), "{}", answers[1]);
    let checkout = &run.events(&id, "checkout")[0];
    assert_eq!(checkout["history"], "none", "{checkout}");
    let warning = checkout["warning"].as_str().unwrap_or_default();
    assert!(
        warning.contains(&image.leaky.future[0]) && warning.contains("not at the base"),
        "{checkout}"
    );
    assert!(checkout["head"].is_string(), "{checkout}");
    // The agent changed nothing: the hidden test fails, graded all the same.
    assert_eq!(run.row(&id)["status"], "failed", "{}", run.stderr);
}

/// An image whose repo has its builder's own commit on top of the base
/// (SWE-bench's setup commit), on the branch HEAD is on, while the fix is
/// on other branches, a tag and the reflog: the agent starts from that
/// commit (its tree, and its history back through the base) and every
/// probe still finds nothing past it. The checkout event lists it and
/// carries no warning; the agent's fix, diffed against it, passes in the
/// tests' fresh container.
fn the_repo_in_the_image_starts_from_its_setup_commit_and_holds_nothing_past_it(backend: Backend) {
    let fixture = Fixture::new();
    let mut setup = String::new();
    let image = RepoImage::build(&fixture, |leaky| {
        std::fs::write(
            leaky.repo.join("setup.cfg"),
            "[tool]\nSETUP-COMMIT-CONTENT = 1\n",
        )
        .expect("write setup.cfg");
        git(&leaky.repo, &["add", "setup.cfg"]);
        git(&leaky.repo, &["commit", "-q", "-m", "SWE-bench"]);
        setup = git(&leaky.repo, &["rev-parse", "HEAD"]);
    });
    let id = unique_id("c-image-setup");
    let future: Vec<&str> = image.leaky.future.iter().map(String::as_str).collect();
    let script = probes::script(&Future {
        commits: &future,
        texts: FUTURE_TEXTS,
        unreadable: &[],
    });
    let commands = [
        script.as_str(),
        "git log --format=%s",
        "cat setup.cfg; git status --short --branch",
        "sed -i 's/x - y/x + y/' calc.py",
    ];
    let (run, answers) = run_on_image_repo(&fixture, backend, &image, &id, &commands, &[]);
    assert!(probes::finished(&answers[0]), "{}", answers[0]);
    assert_eq!(
        probes::leaks(&answers[0]),
        Vec::<String>::new(),
        "{}",
        answers[0]
    );
    let (first, past) = answers[1].split_once('\n').expect("a log");
    assert_eq!(first, "SWE-bench", "{}", answers[1]);
    assert_whole_past(past);
    assert!(
        answers[2].contains("SETUP-COMMIT-CONTENT"),
        "{}",
        answers[2]
    );
    assert!(answers[2].contains("HEAD (no branch)"), "{}", answers[2]);

    assert_eq!(run.row(&id)["status"], "passed", "{}", run.stderr);
    assert!(!run.stderr.contains("not at the base"), "{}", run.stderr);
    let checkout = &run.events(&id, "checkout")[0];
    assert_eq!(checkout["commit"], image.leaky.base.as_str(), "{checkout}");
    assert_eq!(checkout["head"], setup.as_str(), "{checkout}");
    assert_eq!(checkout["setup_commits"], json!([setup]), "{checkout}");
    assert!(checkout.get("warning").is_none(), "{checkout}");
    let objects = git(&image.leaky.repo, &["rev-list", "--objects", &setup])
        .lines()
        .count() as u64;
    assert_eq!(checkout["objects"], objects, "{checkout}");
    let patch = std::fs::read_to_string(run.task_dir(&id).join("patch.diff")).expect("patch");
    assert!(patch.contains("+    return x + y"), "{patch}");
    assert!(!patch.contains("setup.cfg"), "{patch}");
    backend.assert_nothing_left_of(&id);
}

under_each_backend!(
    repo_in_image_setup_commit,
    super::the_repo_in_the_image_starts_from_its_setup_commit_and_holds_nothing_past_it
);

under_each_backend!(
    repo_in_image_at_the_fix,
    super::the_repo_in_the_image_at_the_fix_is_moved_to_the_base_without_history
);

/// Runs one instance over the repo in `image` with the noop model; its row.
fn noop_row_on(
    fixture: &Fixture,
    backend: Backend,
    image: &RepoImage,
    id: &str,
    line: serde_json::Value,
) -> std::collections::HashMap<String, String> {
    let tasks = fixture.tasks(&[line]);
    let flags = backend.image_flags(fixture, &image.tag);
    let mut args = vec!["--model", "noop", "--test-command", "true"];
    args.extend(flags.iter().map(String::as_str));
    let run = fixture.run_into(&fixture.path(&format!("out-{id}")), &tasks, &args, &[]);
    backend.assert_nothing_left_of(id);
    run.row(id)
}

/// A base the image's repo does not hold, and a repo at the base with
/// changes to tracked files (they would be taken for the agent's), each
/// end the task as `checkout_error` saying why, before the agent starts.
fn a_base_the_image_repo_lacks_or_a_dirty_repo_is_a_checkout_error(backend: Backend) {
    let fixture = Fixture::new();
    let image = RepoImage::build(&fixture, |_| {});
    let id = unique_id("c-image-nobase");
    let mut line = instance(&id, &image);
    let missing = "0123456789abcdef0123456789abcdef01234567";
    line["base_commit"] = json!(missing);
    let row = noop_row_on(&fixture, backend, &image, &id, line);
    assert_eq!(row["exit_reason"], "checkout_error", "{row:?}");
    assert!(
        row["error"].contains(missing) && row["error"].contains("not in the image's repo"),
        "{row:?}"
    );

    // The leaky repo is made at a fixed path of its fixture.
    let fixture = Fixture::new();
    let dirty = RepoImage::build(&fixture, |leaky| {
        std::fs::write(leaky.repo.join("calc.py"), "changed in the image\n").expect("write");
    });
    let id = unique_id("c-image-dirty");
    let row = noop_row_on(&fixture, backend, &dirty, &id, instance(&id, &dirty));
    assert_eq!(row["exit_reason"], "checkout_error", "{row:?}");
    assert!(
        row["error"].contains("uncommitted changes") && row["error"].contains("calc.py"),
        "{row:?}"
    );
}

under_each_backend!(
    repo_in_image_refused,
    super::a_base_the_image_repo_lacks_or_a_dirty_repo_is_a_checkout_error
);

/// The bug in `add`, its fix, and the hidden test that the test patch
/// makes of `tests/t0/test_calc.py` (a file of a big one-layer folder).
const ONE_LAYER_CALC: &str = "def add(a, b):\n    return a - b\n";
const ONE_LAYER_FIXED: &str = "def add(a, b):\n    return a + b\n";
const ONE_LAYER_HIDDEN: &str =
    "import calc\nassert calc.add(2, 3) == 5, calc.add(2, 3)\nprint('add adds')\n";

/// An image whose repo is at /testbed as a real image has it: one layer
/// makes the folder (a `WORKDIR`, a `mkdir`), the next puts the whole repo
/// in it, so its `.git`, its `tests` and its `docs` (10 folders each, 8
/// make a folder worth binding) are big folders that one layer alone made,
/// which `--env oci` binds from that layer and leaves empty in its root.
/// Returns the image (removed when dropped) and an instance line over it.
fn one_layer_repo_image(fixture: &Fixture, id: &str) -> (ImageTags, String, serde_json::Value) {
    let mut files = vec![("calc.py".to_owned(), ONE_LAYER_CALC.to_owned())];
    for i in 0..10 {
        files.push((
            format!("tests/t{i}/test_calc.py"),
            format!("import calc\nassert calc.add({i}, 0) == {i}\n"),
        ));
        files.push((format!("docs/d{i}/index.rst"), format!("Page {i}\n")));
    }
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(path, text)| (path.as_str(), text.as_str()))
        .collect();
    let (work, base) = fixture.repo("work", &files);
    let gold = crate::support::harness::diff_of(&work, &[("calc.py", ONE_LAYER_FIXED)]);
    let test_patch =
        crate::support::harness::diff_of(&work, &[("tests/t0/test_calc.py", ONE_LAYER_HIDDEN)]);
    let context = fixture.path("image");
    std::fs::create_dir_all(&context).expect("mkdir image");
    std::fs::write(
        context.join("Containerfile"),
        format!("FROM {IMAGE}\nRUN mkdir /testbed\nCOPY testbed /testbed\n"),
    )
    .expect("write Containerfile");
    let copied = Command::new("cp")
        .arg("-a")
        .arg(&work)
        .arg(context.join("testbed"))
        .status()
        .expect("cp");
    assert!(copied.success());
    let tag = format!("localhost/onebash-test/one-layer-repo:{}", unique_id("i"));
    let removed = ImageTags(vec![tag.clone()]);
    let built = Command::new("podman")
        .args(["build", "-q", "--pull=never", "-t", &tag])
        .arg(&context)
        .output()
        .expect("podman build");
    assert!(
        built.status.success(),
        "podman build: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let line = json!({
        "instance_id": id,
        "repo": "example/calc",
        "base_commit": base,
        "problem_statement": format!("Problem of task {id}. add() subtracts."),
        "patch": gold,
        "test_patch": test_patch,
    });
    (removed, tag, line)
}

/// The repo of one layer is graded whole, under `--env oci` as under
/// podman (`--env oci` once copied it from its root, where the big
/// folders were empty: "/testbed holds no git repository"): the agent
/// reads and writes inside the big folders and its fix passes, the oracle
/// resolves, noop does not, and the test patch applies to its file in
/// `tests/`.
fn a_repo_made_by_one_layer_is_whole_and_graded(backend: Backend) {
    let fixture = Fixture::new();
    let id = unique_id("c-one-layer");
    let (_removed, tag, line) = one_layer_repo_image(&fixture, &id);
    let tasks = fixture.tasks(&[line]);
    let flags = backend.image_flags(&fixture, &tag);
    let run = |model: &str, out: &str, server: Option<&ScriptedServer>| {
        let url = server.map(ScriptedServer::base_url);
        let mut args = vec!["--model", model];
        if let Some(url) = &url {
            args.extend(["--base-url", url.as_str()]);
        }
        args.extend([
            "--test-command",
            "PYTHONPATH=. python3 tests/t0/test_calc.py",
        ]);
        args.extend(flags.iter().map(String::as_str));
        let run = fixture.run_into(&fixture.path(out), &tasks, &args, &[]);
        backend.assert_nothing_left_of(&id);
        run
    };
    let commands: [&str; 3] = [
        "cat docs/d9/index.rst tests/t9/test_calc.py",
        "git status --porcelain | wc -l; git log --format=%s",
        "sed -i 's/a - b/a + b/' calc.py && echo 'More.' >> docs/d9/index.rst && mkdir tests/t10 && echo new > tests/t10/new.txt",
    ];
    let plan: [(&str, &[&str]); 1] = [(&id, &commands)];
    let server = scripted_agent(&plan);
    let agent = run("scripted", "out-agent", Some(&server));
    let row = agent.row(&id);
    assert_eq!(row["status"], "passed", "{row:?}\n{}", agent.stderr);
    let answers = tool_answers(&server, &id);
    assert!(
        answers[0].contains("Page 9") && answers[0].contains("calc.add(9, 0)"),
        "{answers:?}"
    );
    // The repo is clean at its base: nothing of it is missing.
    assert!(answers[1].starts_with("0\ninitial\n"), "{answers:?}");
    assert!(answers[2].ends_with("[exit code: 0]"), "{answers:?}");
    let patch = std::fs::read_to_string(agent.task_dir(&id).join("patch.diff")).expect("patch");
    for part in ["+    return a + b", "+More.", "b/tests/t10/new.txt"] {
        assert!(patch.contains(part), "{part}: {patch}");
    }
    let checkout = &agent.events(&id, "checkout")[0];
    assert_eq!(checkout["fetched"], false, "{checkout}");

    let oracle = run("oracle", "out-oracle", None);
    let row = oracle.row(&id);
    assert_eq!(row["status"], "passed", "{row:?}\n{}", oracle.stderr);
    let test = &oracle.events(&id, "test")[0];
    assert_eq!(test["test_patch_method"], "git apply", "{test}");

    let noop = run("noop", "out-noop", None);
    let row = noop.row(&id);
    assert_eq!(row["status"], "failed", "{row:?}\n{}", noop.stderr);
    assert_eq!(row["exit_reason"], "completed", "{row:?}");
    let log = std::fs::read_to_string(noop.task_dir(&id).join("test.log")).expect("test.log");
    assert!(log.contains("AssertionError: -1"), "{log}");
}

under_each_backend!(
    repo_of_one_layer,
    super::a_repo_made_by_one_layer_is_whole_and_graded
);

/// `program` as the PATH finds it.
fn which(program: &str) -> std::path::PathBuf {
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .map(|dir| std::path::Path::new(dir).join(program))
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("{program} is not on PATH"))
}
