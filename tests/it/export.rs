//! `onebash export`: runs made by the real binary against a scripted model
//! are exported in each format; each file passes its format's own
//! validator (tests/it/export_validate.py: Harbor's for ATIF, OpenAI's
//! recipe and SDK types for openai-chat, LLaMA-Factory's rules for
//! ShareGPT); the tool schema is the one the requests carried; secrets a
//! command printed are redacted; two runs that did the same are written
//! once; the filters select rows; bad usage exits 2 and an unreadable
//! trajectory 1, with the rest exported. An Anthropic run exports alike,
//! keeping the text beside its calls, and its key is nowhere.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::support::harness::{Fixture, RunOutput, onebash, scripted_agent, task, tool_present};
use crate::support::server::{Reply, Request, ScriptedServer};

/// The secrets the task's repo holds, which `cat config.env` prints.
const SECRETS: [&str; 3] = [
    "sk-proj-abcdefghijklmnopqrstuvwxyz",
    "hf_abcdefghijklmnopqrstuvwxyz0123456789",
    "AKIAIOSFODNN7EXAMPLE",
];

/// Two runs (`a`, `b`) of the same scripted agent over two tasks: `fix`
/// reads the secrets and passes, `idle` lists files and fails.
fn two_runs(fixture: &Fixture) -> (RunOutput, RunOutput) {
    let config = format!(
        "OPENAI_API_KEY={}\nHF_TOKEN={}\nAWS_ACCESS_KEY_ID={}\n",
        SECRETS[0], SECRETS[1], SECRETS[2]
    );
    let (repo, sha) = fixture.repo("repo", &[("value.txt", "1\n"), ("config.env", &config)]);
    let test = "test \"$(cat value.txt)\" = 2";
    let tasks = fixture.tasks(&[
        task("fix", &repo, &sha, test, json!({})),
        task("idle", &repo, &sha, test, json!({})),
    ]);
    let server = scripted_agent(&[
        ("fix", &["cat config.env", "echo 2 > value.txt"]),
        ("idle", &["ls"]),
    ]);
    let a = fixture.run_scripted_into("a", &tasks, &server, &[]);
    assert_eq!(a.code, 0, "stderr:\n{}", a.stderr);
    let b = fixture.run_scripted_into("b", &tasks, &server, &[]);
    assert_eq!(b.code, 0, "stderr:\n{}", b.stderr);
    (a, b)
}

fn export(args: &[&str]) -> Output {
    onebash()
        .arg("export")
        .args(args)
        .output()
        .expect("run onebash export")
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("the export")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

fn path(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// The python with harbor and openai, under `tool_present`'s rule:
/// `$ONEBASH_EXPORT_PYTHON` (.ci/run installs it in a venv of its own),
/// else `python3`.
fn validator_python() -> Option<String> {
    let python = std::env::var("ONEBASH_EXPORT_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let found = Command::new(&python)
        .args([
            "-c",
            "import harbor.utils.trajectory_validator, openai.types.chat, pydantic",
        ])
        .output()
        .is_ok_and(|out| out.status.success());
    tool_present(
        found,
        "the export validators (harbor, openai)",
        "see .ci/run's export block, or point ONEBASH_EXPORT_PYTHON at a python that has them",
    )
    .then_some(python)
}

fn validate(python: &str, format: &str, file: &Path) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/export_validate.py");
    let out = Command::new(python)
        .args([script, format, path(file)])
        .output()
        .expect("run the validator");
    assert!(
        out.status.success(),
        "{format} does not validate: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_export_of_real_runs_is_deduped_redacted_and_valid_in_every_format() {
    let fixture = Fixture::new();
    let (a, b) = two_runs(&fixture);
    let header = &a.trajectory("fix")[0];
    assert_eq!(header["event"], "header");
    let sent_tools = &header["request_template"]["tools"];
    let python = validator_python();
    for format in ["openai-chat", "sharegpt", "atif"] {
        let file: PathBuf = fixture.path(&format!("{format}.jsonl"));
        let out = export(&[
            path(&a.out),
            path(&b.out),
            "--format",
            format,
            "-o",
            path(&file),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        assert!(out.stdout.is_empty());
        // Each run gives the same two conversations: written once.
        assert!(
            stderr.contains("exported 2 conversations of 4 selected rows, 2 duplicates dropped"),
            "{stderr}"
        );
        // Two runs, three secrets each, in the two `fix` rows read.
        assert!(
            stderr.contains("6 secret-looking strings redacted"),
            "{stderr}"
        );
        let text = std::fs::read_to_string(&file).expect("the export");
        for secret in SECRETS {
            assert!(!text.contains(secret), "{format} leaks {secret}");
        }
        assert!(text.contains("OPENAI_API_KEY=[REDACTED]"), "{text}");
        let lines = lines(&file);
        assert_eq!(lines.len(), 2);
        match format {
            "openai-chat" => {
                // The tools exactly as the requests sent them.
                assert_eq!(&lines[0]["tools"], sent_tools);
                let roles: Vec<&str> = lines[0]["messages"]
                    .as_array()
                    .expect("messages")
                    .iter()
                    .map(|m| m["role"].as_str().expect("role"))
                    .collect();
                assert_eq!(
                    roles,
                    [
                        "system",
                        "user",
                        "assistant",
                        "tool",
                        "assistant",
                        "tool",
                        "assistant"
                    ]
                );
                assert_eq!(lines[0]["messages"][2]["tool_calls"][0]["id"], "call-0");
                assert_eq!(lines[0]["parallel_tool_calls"], true);
            }
            "sharegpt" => {
                assert_eq!(lines[0]["metadata"]["task_id"], "fix");
                assert_eq!(lines[0]["metadata"]["prompt"], header["prompt"]["name"]);
                assert_eq!(lines[1]["metadata"]["status"], "failed");
                let tools: Value =
                    serde_json::from_str(lines[0]["tools"].as_str().expect("a JSON text"))
                        .expect("tools");
                assert_eq!(
                    tools[0]["parameters"],
                    sent_tools[0]["function"]["parameters"]
                );
            }
            _ => {
                assert_eq!(lines[0]["agent"]["tool_definitions"], *sent_tools);
                assert_eq!(lines[0]["agent"]["model_name"], "scripted");
                assert_eq!(
                    lines[0]["agent"]["extra"]["prompt"]["name"],
                    header["prompt"]["name"]
                );
                assert_eq!(lines[0]["steps"][0]["source"], "system");
                assert_eq!(lines[0]["extra"]["onebash"]["passed"], true);
            }
        }
        if let Some(python) = &python {
            validate(python, format, &file);
        }
    }
}

#[test]
fn the_filters_select_rows_and_bad_usage_exits_2() {
    let fixture = Fixture::new();
    let (a, _) = two_runs(&fixture);
    let tasks_of = |args: &[&str]| -> Vec<String> {
        let mut all = vec![path(&a.out), "--format", "sharegpt"];
        all.extend_from_slice(args);
        let out = export(&all);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|line| {
                let line: Value = serde_json::from_str(line).expect("JSON");
                line["metadata"]["task_id"].as_str().expect("id").to_owned()
            })
            .collect()
    };
    assert_eq!(tasks_of(&[]), ["fix", "idle"]);
    assert_eq!(tasks_of(&["--passed"]), ["fix"]);
    assert_eq!(tasks_of(&["--task", "idle"]), ["idle"]);
    assert_eq!(
        tasks_of(&["--task", "idle", "--task", "fix"]),
        ["fix", "idle"]
    );
    assert_eq!(tasks_of(&["--exit-reason", "completed"]), ["fix", "idle"]);
    assert!(tasks_of(&["--exit-reason", "max_turns", "--exit-reason", "api_error"]).is_empty());
    assert_eq!(tasks_of(&["--epoch", "1", "--passed"]), ["fix"]);
    assert!(tasks_of(&["--epoch", "2"]).is_empty());

    let bad_reason = export(&[
        path(&a.out),
        "--format",
        "atif",
        "--exit-reason",
        "finished",
    ]);
    assert_eq!(bad_reason.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad_reason.stderr).contains("not an exit reason: \"finished\"")
    );
    let typo = export(&[
        path(&a.out),
        "--format",
        "atif",
        "--task",
        "fix",
        "--task",
        "fxi",
    ]);
    assert_eq!(typo.status.code(), Some(2));
    assert!(typo.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&typo.stderr);
    assert!(
        stderr.contains("error: failed to select task fxi: no run given has a row of it\nhint:"),
        "{stderr}"
    );
    // No --format is openai-chat now (export_defaults_to_openai_chat_...);
    // an unknown one is still bad usage.
    let bad_format = export(&[path(&a.out), "--format", "csv"]);
    assert_eq!(bad_format.status.code(), Some(2));
    let not_a_run = export(&[path(&fixture.path("repo")), "--format", "atif"]);
    assert_eq!(not_a_run.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&not_a_run.stderr);
    assert!(
        stderr.contains("is not a run folder (no run.json)\nhint:"),
        "{stderr}"
    );
    // Nothing is written to -o when a run folder is bad.
    let file = fixture.path("none.jsonl");
    let refused = export(&[
        path(&a.out),
        path(&fixture.path("repo")),
        "--format",
        "atif",
        "-o",
        path(&file),
    ]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(!file.exists());
    let nowhere = fixture.path("no/such/folder/out.jsonl");
    let unwritable = export(&[path(&a.out), "--format", "atif", "-o", path(&nowhere)]);
    assert_eq!(unwritable.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&unwritable.stderr);
    assert!(
        stderr.contains("error: failed to write ") && stderr.contains("out.jsonl"),
        "{stderr}"
    );
}

/// `export RUN | head`: no `--format` needed (openai-chat), and a reader
/// that closes the pipe early is not a failure (exit 0, as `show` and
/// `report`), where it was exit 2.
#[test]
fn export_defaults_to_openai_chat_and_a_closed_pipe_exits_0() {
    let fixture = Fixture::new();
    let (a, _) = two_runs(&fixture);
    let out = export(&[path(&a.out)]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first: Value = serde_json::from_str(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .expect("a line"),
    )
    .expect("JSON");
    assert!(first["messages"].is_array(), "{first}");
    let mut child = onebash()
        .args(["export", path(&a.out)])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn onebash export");
    // The reader is gone before onebash writes a byte.
    drop(child.stdout.take());
    let closed = child.wait_with_output().expect("wait");
    assert_eq!(
        closed.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&closed.stderr)
    );
    // `show` and `report` alike: no panic on the closed pipe.
    for args in [
        vec!["report", path(&a.out)],
        vec!["show", path(&a.out), "fix"],
    ] {
        let mut child = onebash()
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn onebash");
        drop(child.stdout.take());
        let closed = child.wait_with_output().expect("wait");
        assert_eq!(
            closed.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&closed.stderr)
        );
    }
}

#[test]
fn an_unreadable_trajectory_is_named_and_the_rest_exported() {
    let fixture = Fixture::new();
    let (a, _) = two_runs(&fixture);
    let broken = a.task_dir("idle").join("trajectory.jsonl");
    std::fs::write(&broken, "{\"event\":\"diff\",\"bytes\":3}\n").expect("break it");
    let out = export(&[path(&a.out), "--format", "openai-chat"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: failed to export task idle epoch 1 of"),
        "{stderr}"
    );
    assert!(
        stderr.contains("exported 1 conversation of 2 selected rows, 1 unreadable"),
        "{stderr}"
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
}

/// The API key of an Anthropic run, which must reach neither the run
/// folder nor the export.
const RUN_KEY: &str = "sk-ant-api03-runkey0123456789abcdefghij";

/// A Messages API answer: text and a `bash` call first, then text alone.
fn anthropic_agent(request: &Request) -> Reply {
    let answered = request.body["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count());
    let (content, stop_reason) = match answered {
        0 => (
            json!([{"type": "text", "text": "Looking at the config."},
                   {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "cat config.env"}}]),
            "tool_use",
        ),
        _ => (json!([{"type": "text", "text": "Done."}]), "end_turn"),
    };
    Reply::Json(json!({
        "id": format!("msg_{answered}"), "type": "message", "role": "assistant", "model": "claude-scripted",
        "content": content, "stop_reason": stop_reason, "stop_sequence": null,
        "usage": {"input_tokens": 100, "output_tokens": 10, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
    }))
}

/// Every file under `dir` that holds `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_holding(&path, needle));
        } else if std::fs::read(&path)
            .is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
        {
            found.push(path);
        }
    }
    found
}

#[test]
fn an_anthropic_run_exports_with_the_text_beside_its_calls_and_no_key() {
    let fixture = Fixture::new();
    let config = format!("HF_TOKEN={}\n", SECRETS[1]);
    let (repo, sha) = fixture.repo("repo", &[("config.env", &config)]);
    let tasks = fixture.tasks(&[task("fix", &repo, &sha, "true", json!({}))]);
    let server = ScriptedServer::start_with(anthropic_agent);
    let base_url = server.base_url();
    let out = fixture.path("claude");
    let run = fixture.run_into(
        &out,
        &tasks,
        &[
            "--provider",
            "anthropic",
            "--model",
            "claude-scripted",
            "--base-url",
            &base_url,
        ],
        &[("ANTHROPIC_API_KEY", RUN_KEY)],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    // The key was used, and is nowhere in the run folder.
    assert_eq!(server.requests()[0].header("x-api-key"), Some(RUN_KEY));
    assert_eq!(files_holding(&out, RUN_KEY), Vec::<PathBuf>::new());
    let sent_tools = &run.trajectory("fix")[0]["request_template"]["tools"];
    let python = validator_python();
    for format in ["openai-chat", "sharegpt", "atif"] {
        let file = fixture.path(&format!("{format}.jsonl"));
        let done = export(&[path(&out), "--format", format, "-o", path(&file)]);
        assert_eq!(
            done.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&done.stderr)
        );
        let text = std::fs::read_to_string(&file).expect("the export");
        assert!(
            !text.contains(RUN_KEY) && !text.contains(SECRETS[1]),
            "{text}"
        );
        let line = &lines(&file)[0];
        match format {
            "openai-chat" => {
                let messages = line["messages"].as_array().expect("messages");
                assert_eq!(messages[0]["role"], "system");
                assert_eq!(messages[2]["content"], "Looking at the config.");
                assert_eq!(messages[2]["tool_calls"][0]["id"], "toolu_1");
                assert_eq!(
                    messages[2]["tool_calls"][0]["function"]["arguments"],
                    r#"{"command":"cat config.env"}"#
                );
                assert_eq!(messages[3]["tool_call_id"], "toolu_1");
                assert_eq!(messages[4]["content"], "Done.");
                // Anthropic's input_schema is the schema of the function.
                assert_eq!(
                    line["tools"][0]["function"]["parameters"],
                    sent_tools[0]["input_schema"]
                );
            }
            "sharegpt" => assert_eq!(line["metadata"]["provider"], "anthropic"),
            _ => {
                assert_eq!(line["steps"][2]["message"], "Looking at the config.");
                assert_eq!(
                    line["steps"][2]["observation"]["results"][0]["source_call_id"],
                    "toolu_1"
                );
                assert_eq!(line["steps"][2]["metrics"]["prompt_tokens"], 100);
            }
        }
        if let Some(python) = &python {
            validate(python, format, &file);
        }
    }
}
