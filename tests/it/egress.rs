//! `--allow-hosts` under `--env podman`, `--env docker` and `--env oci`
//! (and on the host in the bwrap sandbox; these two in a network
//! namespace of the task's, which each command enters): the agent's
//! container has no network but its loopback, where onebash's proxy
//! listens, and the proxy lets through only the allowed hosts. Three
//! local servers, each counting the connections it accepts: one reached
//! by name and by `*.` wildcard (names under `localhost`, which the proxy
//! resolves to 127.0.0.1, RFC 6761), one by CIDR (127.0.0.2), and one
//! that is allowed by nothing (127.0.0.3), tried through the proxy by
//! name, by address and by CONNECT, and directly by its address: it must
//! see no connection at all. The clients are told the proxy explicitly
//! (from `HTTP_PROXY`), without `no_proxy`: the sandbox's sends names
//! under `localhost` to its own loopback, as it should for the agent's
//! own servers.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;

use crate::support::backend::{Backend, IMAGE, under_each_backend, under_each_engine};
use crate::support::harness::{Fixture, scripted_agent, task, tool_answers};

/// A server answering `200 ok` to each connection on `ip`, counting them.
fn counting_server(ip: &str) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind((ip, 0)).expect("bind a test server");
    let port = listener.local_addr().expect("address").port();
    let seen = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            counted.fetch_add(1, Ordering::SeqCst);
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    (port, seen)
}

/// The address this machine reaches the world from, if it has a route
/// there: a UDP socket's `connect` picks it and sends nothing.
fn outward_address() -> Option<String> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then(|| ip.to_string())
}

/// A command printing the status of `GET url` through the proxy (urllib
/// would honour `no_proxy` even with a proxy given).
fn get(url: &str) -> String {
    format!(
        "env -u no_proxy -u NO_PROXY python3 -c 'import os, urllib.request as u
o = u.build_opener(u.ProxyHandler({{\"http\": os.environ[\"HTTP_PROXY\"]}}))
try: print(\"status\", o.open(\"{url}\", timeout=20).status)
except Exception as e: print(\"status\", getattr(e, \"code\", e))'"
    )
}

/// A command printing the proxy's answer to `CONNECT target`.
fn connect(target: &str) -> String {
    format!(
        "python3 -c 'import os, socket
port = int(os.environ[\"HTTPS_PROXY\"].rsplit(\":\", 1)[1])
s = socket.create_connection((\"127.0.0.1\", port), 20)
s.sendall(b\"CONNECT {target} HTTP/1.1\\r\\n\\r\\n\")
print(\"answer\", s.recv(100).split(b\"\\r\\n\")[0].decode())'"
    )
}

/// A command that connects to `ip:port` without the proxy.
fn direct(ip: &str, port: u16) -> String {
    format!(
        "python3 -c 'import socket
try: socket.create_connection((\"{ip}\", {port}), 5); print(\"direct connected\")
except Exception as e: print(\"direct failed\", e)'"
    )
}

fn only_the_allowed_hosts_are_reached(backend: Backend) {
    let fixture = Fixture::new();
    let flags = backend.image_flags(&fixture, IMAGE);
    allowed_hosts_only(&fixture, flags);
}

under_each_backend!(
    an_allowlist_lets_through_its_hosts_only,
    super::only_the_allowed_hosts_are_reached
);

/// The same on the host, in the bwrap sandbox: each command enters the
/// task's own network namespace, where the proxy listens on the
/// loopback.
#[test]
fn an_allowlist_lets_through_its_hosts_only_on_the_host_under_bwrap() {
    let Some(fixture) = crate::sandbox::bwrap_fixture() else {
        return;
    };
    let flags = ["--env", "host", "--sandbox", "bwrap"].map(str::to_owned);
    allowed_hosts_only(&fixture, flags.to_vec());
}

/// Runs the eight commands under `--allow-hosts` with `flags` (the
/// environment's) and checks what each got and what each server saw.
fn allowed_hosts_only(fixture: &Fixture, flags: Vec<String>) {
    let (named, named_seen) = counting_server("127.0.0.1");
    let (ranged, ranged_seen) = counting_server("127.0.0.2");
    let (blocked, blocked_seen) = counting_server("127.0.0.3");
    let id = format!("egress-{}", std::process::id());
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let tasks = fixture.tasks(&[task(&id, &repo, &sha, "true", json!({}))]);
    // A server on the machine's own outward address, when it has one
    // (found without sending anything): from the sandbox, no route.
    let outward = outward_address().map(|ip| {
        let server = counting_server(&ip);
        (ip, server)
    });
    let mut commands = vec![
        get(&format!("http://allowed.localhost:{named}/")),
        get(&format!("http://a.ok.localhost:{named}/")),
        get(&format!("http://127.0.0.2:{ranged}/")),
        get(&format!("http://blocked.localhost:{blocked}/")),
        get(&format!("http://ok.localhost:{blocked}/")),
        get(&format!("http://127.0.0.3:{blocked}/")),
        connect(&format!("127.0.0.3:{blocked}")),
        direct("127.0.0.3", blocked),
    ];
    let mut expected = vec![
        "status 200",
        "status 200",
        "status 200",
        "status 403",
        "status 403",
        "status 403",
        "answer HTTP/1.1 403 Forbidden",
        "direct failed",
    ];
    if let Some((ip, (port, _))) = &outward {
        commands.push(direct(ip, *port));
        expected.push("Network is unreachable");
    }
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    let plan: [(&str, &[&str]); 1] = [(&id, &commands)];
    let server = scripted_agent(&plan);
    let mut args: Vec<String> = ["--model", "scripted", "--base-url", &server.base_url()]
        .map(str::to_owned)
        .to_vec();
    args.extend(flags);
    args.extend([
        "--allow-hosts".to_owned(),
        "allowed.localhost,*.ok.localhost,127.0.0.2/32".to_owned(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = fixture.run(&tasks, &args);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let answers = tool_answers(&server, &id);
    assert_eq!(answers.len(), expected.len(), "{answers:?}");
    for (answer, want) in answers.iter().zip(expected) {
        assert!(
            answer.contains(want),
            "{want} not in {answer}\nall: {answers:?}"
        );
    }
    assert_eq!(named_seen.load(Ordering::SeqCst), 2);
    assert_eq!(ranged_seen.load(Ordering::SeqCst), 1);
    assert_eq!(
        blocked_seen.load(Ordering::SeqCst),
        0,
        "a refused request reached its server"
    );
    if let Some((_, (_, seen))) = &outward {
        assert_eq!(
            seen.load(Ordering::SeqCst),
            0,
            "a direct connection got out"
        );
    }
    let hosts = run.events(&id, "hosts");
    assert_eq!(hosts.len(), 1, "{hosts:?}");
    let asked = &hosts[0]["asked"];
    let of = |host: &str| {
        asked
            .as_array()
            .and_then(|a| a.iter().find(|h| h["host"] == host))
            .map(|h| (h["requests"].as_u64(), h["refused"].as_u64()))
    };
    assert_eq!(of("allowed.localhost"), Some((Some(1), Some(0))), "{asked}");
    assert_eq!(of("127.0.0.3"), Some((Some(2), Some(2))), "{asked}");
    assert_eq!(of("blocked.localhost"), Some((Some(1), Some(1))), "{asked}");
}

/// Where onebash cannot put its proxy, an allowlist stops the run, named.
#[test]
fn allow_hosts_is_refused_by_name_where_it_is_not_honoured() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let tasks = fixture.tasks(&[task("t1", &repo, &sha, "true", json!({}))]);
    let run = fixture.run(
        &tasks,
        &[
            "--model",
            "scripted",
            "--allow-hosts",
            "pypi.org",
            "--env",
            "host",
            "--sandbox",
            "none",
        ],
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("--allow-hosts is not honoured under --env host --sandbox none"),
        "{}",
        run.stderr
    );
    let run = fixture.run(
        &tasks,
        &[
            "--model",
            "scripted",
            "--allow-hosts",
            "https://pypi.org/simple",
        ],
    );
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("not a hostname"), "{}", run.stderr);
}

/// Python that prints the status of `GET argv[1]` through the proxy.
const GET_PY: &str = r#"import os, sys, urllib.request as u
o = u.build_opener(u.ProxyHandler({"http": os.environ["HTTP_PROXY"]}))
try: print(o.open(sys.argv[1], timeout=20).status)
except Exception as e: print(getattr(e, "code", e))"#;

/// A Harbor task whose agent may reach `agent.localhost` only and whose
/// verifier (in the agent's container) `verifier.localhost` only: the
/// oracle's solve.sh records what the agent's phase reached, test.sh
/// what the verifier's does, and the reward is 1 only when each phase
/// reached its own host and was refused the other's.
fn harbor_phases_each_reach_their_own_hosts(backend: Backend) {
    let (agent_port, agent_seen) = counting_server("127.0.0.1");
    let (verifier_port, verifier_seen) = counting_server("127.0.0.1");
    let fixture = Fixture::new();
    let root = fixture.path("tasks");
    let dir = root.join("phases");
    let nonce = format!("{}-{:?}", std::process::id(), std::time::SystemTime::now());
    let get = format!("get() {{ env -u no_proxy -u NO_PROXY python3 -c '{GET_PY}' \"$1\"; }}");
    let both = format!(
        "\"$(get http://agent.localhost:{agent_port}/) $(get http://verifier.localhost:{verifier_port}/)\""
    );
    let toml = "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"agent.localhost\"]\n[verifier]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"verifier.localhost\"]\n";
    let solve = format!("#!/bin/bash\n{get}\necho {both} > /app/agent-phase.txt\n");
    let test = format!(
        "#!/bin/bash\n{get}\nv={both}\necho \"agent phase: $(cat /app/agent-phase.txt); verifier phase: $v\"\nif [ \"$(cat /app/agent-phase.txt)\" = \"200 403\" ] && [ \"$v\" = \"403 200\" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"
    );
    let dockerfile =
        format!("FROM {IMAGE}\nLABEL onebash.test-nonce=\"{nonce}\"\nWORKDIR /app\nRUN true\n");
    for (relative, content) in [
        ("task.toml", toml),
        ("instruction.md", "Reach what you may.\n"),
        ("environment/Dockerfile", dockerfile.as_str()),
        ("tests/test.sh", test.as_str()),
        ("solution/solve.sh", solve.as_str()),
    ] {
        let path = dir.join(relative);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, content).expect("write");
    }
    let engine = backend.engine().expect("an engine");
    let run = crate::harbor::run(
        &fixture,
        &root,
        "oracle",
        &["--model", "oracle", "--env", engine, "--pull", "never"],
    );
    let image = run.trajectory("phases")[0]["task"]["image"]
        .as_str()
        .map(str::to_owned);
    let _cleanup = crate::support::backend::ImageTags(image.into_iter().collect());
    let row = run.row("phases");
    let log = std::fs::read_to_string(run.task_dir("phases").join("test.log")).unwrap_or_default();
    assert_eq!(
        (row["exit_reason"].as_str(), row["reward"].as_str()),
        ("completed", "1.0"),
        "{row:?}\n{log}\n{}",
        run.stderr
    );
    assert_eq!(agent_seen.load(Ordering::SeqCst), 1, "{log}");
    assert_eq!(verifier_seen.load(Ordering::SeqCst), 1, "{log}");
}

under_each_engine!(
    a_harbor_tasks_phases_each_reach_their_own_hosts,
    super::harbor_phases_each_reach_their_own_hosts
);
