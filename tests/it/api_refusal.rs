//! A model API that refuses the run: nothing listens at the URL, the key
//! is refused, the model does not exist, or the server refuses one request
//! in the same words every time. Each ends fast, with one clear message and
//! a documented exit code (3), not with one `api_error` row per task after
//! a minute of backoff; and a slow model is not taken for a refusing one.
//! A repeated 500 ends its task only when its words show a refusal (a
//! validation error twice, an answer that says nothing four times), never
//! when it is the provider's own transient error.
//! Also: what llama-cpp-python's server refuses in a history (a `null`
//! content) is never sent.

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::harness::{Fixture, RunOutput, numbered_tasks};
use crate::support::server::{Reply, ScriptedServer, error_reply, tool_calls_reply};

const EXIT_API_REFUSED: i32 = 3;

/// `count` tasks `t0`, `t1`... over one repo; they pass once `fixed.txt` exists.
fn world(fixture: &Fixture, count: usize) -> std::path::PathBuf {
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    fixture.tasks(&numbered_tasks(
        count,
        &repo,
        &sha,
        "test -f fixed.txt",
        json!({}),
    ))
}

fn run(fixture: &Fixture, tasks: &std::path::Path, base_url: &str, more: &[&str]) -> RunOutput {
    fixture.run_model(tasks, "scripted-model", base_url, more)
}

/// A base URL where nothing listens: a port that was just bound and freed.
fn closed_port_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    format!("http://{addr}/v1")
}

/// An agent that fixes the task in one command, then says it is done.
fn fixing_reply(request: &crate::support::server::Request) -> Reply {
    let answered = request.body["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count());
    if answered == 0 {
        tool_calls_reply(&[("fix", "echo fixed > fixed.txt")], 10, 5)
    } else {
        crate::support::server::text_reply("Done.", "stop", 12, 2)
    }
}

#[test]
fn a_closed_port_stops_the_run_before_any_task_with_one_message() {
    let fixture = Fixture::new();
    let tasks = world(&fixture, 5);
    let url = closed_port_url();
    let out = run(&fixture, &tasks, &url, &["-j", "2"]);
    assert_eq!(out.code, EXIT_API_REFUSED, "stderr:\n{}", out.stderr);
    let errors: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("error:"))
        .collect();
    assert_eq!(
        errors.len(),
        1,
        "one message, not one per task:\n{}",
        out.stderr
    );
    assert!(errors[0].contains("could not connect"), "{}", out.stderr);
    assert!(out.stderr.contains(&url), "names the URL:\n{}", out.stderr);
    assert!(
        out.stderr.contains("scripted-model"),
        "names the model:\n{}",
        out.stderr
    );
    assert!(out.stderr.contains("hint:"), "{}", out.stderr);
    // Nothing was checked out or written: the same command runs again.
    assert!(!out.out.exists(), "the run folder was made");
}

#[test]
fn a_refused_key_stops_the_run_before_any_task() {
    for status in [401, 403] {
        let fixture = Fixture::new();
        let tasks = world(&fixture, 4);
        let server = ScriptedServer::start_with(fixing_reply);
        server.set_models_reply(error_reply(status, "Incorrect API key provided: sk-wrong."));
        let out = run(&fixture, &tasks, &server.base_url(), &[]);
        assert_eq!(out.code, EXIT_API_REFUSED, "stderr:\n{}", out.stderr);
        assert!(
            out.stderr.contains(&format!("HTTP {status}")),
            "{}",
            out.stderr
        );
        assert!(
            out.stderr.contains("Incorrect API key provided"),
            "{}",
            out.stderr
        );
        assert!(
            out.stderr.contains("API key"),
            "the hint names the key:\n{}",
            out.stderr
        );
        assert_eq!(server.preflights().len(), 1);
        assert!(server.requests().is_empty(), "a model call was made");
        assert!(!out.out.exists(), "the run folder was made");
    }
}

#[test]
fn a_server_without_a_models_list_is_not_a_refusal() {
    // vLLM, llama.cpp and OpenAI list models; some gateways answer 404 or
    // 500 to the list. Only a refused key or no server at all stops a run.
    for status in [404, 405, 500] {
        let fixture = Fixture::new();
        let tasks = world(&fixture, 2);
        let server = ScriptedServer::start_with(fixing_reply);
        server.set_models_reply(error_reply(status, "no such route"));
        let out = run(&fixture, &tasks, &server.base_url(), &[]);
        assert_eq!(out.code, 0, "{status}: stderr:\n{}", out.stderr);
        assert_eq!(out.row("t0")["status"], "passed");
        assert_eq!(out.row("t1")["status"], "passed");
    }
}

#[test]
fn an_unknown_model_stops_the_run_after_three_tasks_and_resume_goes_on() {
    let fixture = Fixture::new();
    let tasks = world(&fixture, 8);
    let wrong = Arc::new(AtomicBool::new(true));
    let flag = Arc::clone(&wrong);
    let server = ScriptedServer::start_with(move |request| {
        if flag.load(Ordering::SeqCst) {
            error_reply(
                404,
                "The model `scripted-model` does not exist or you do not have access to it.",
            )
        } else {
            fixing_reply(request)
        }
    });
    let url = server.base_url();
    // One task at a time, so exactly three rows are written before the stop.
    let first = run(&fixture, &tasks, &url, &["-j", "1"]);
    assert_eq!(first.code, EXIT_API_REFUSED, "stderr:\n{}", first.stderr);
    let rows = first.rows();
    assert_eq!(rows.len(), 3, "{rows:?}");
    for row in &rows {
        assert_eq!(row["exit_reason"], "api_error", "{row:?}");
        assert!(row["error"].contains("does not exist"), "{row:?}");
    }
    assert_eq!(server.requests().len(), 3, "no task after the stop asked");
    let messages: Vec<&str> = first
        .stderr
        .lines()
        .filter(|l| l.starts_with("error:"))
        .collect();
    assert_eq!(messages.len(), 1, "{}", first.stderr);
    for needle in [
        "HTTP 404",
        "does not exist",
        &url,
        "scripted-model",
        "--resume --retry-errors",
    ] {
        assert!(
            first.stderr.contains(needle),
            "{needle:?} missing:\n{}",
            first.stderr
        );
    }
    let run_json: Value = serde_json::from_str(
        &std::fs::read_to_string(first.out.join("run.json")).expect("run.json"),
    )
    .expect("run.json is JSON");
    assert!(
        run_json["stopped"]
            .as_str()
            .is_some_and(|s| s.contains("HTTP 404")),
        "{run_json}"
    );
    assert_eq!(run_json["interrupted"], false, "{run_json}");

    // Fixed: the rows stay resumable, and the run goes on to the end.
    wrong.store(false, Ordering::SeqCst);
    let resumed = run(
        &fixture,
        &tasks,
        &url,
        &["-j", "1", "--resume", "--retry-errors"],
    );
    assert_eq!(resumed.code, 0, "stderr:\n{}", resumed.stderr);
    let rows = resumed.rows();
    assert_eq!(rows.len(), 8, "{rows:?}");
    assert!(rows.iter().all(|r| r["status"] == "passed"), "{rows:?}");
}

#[test]
fn an_api_that_answered_once_is_never_stopped_for_later_errors() {
    // The first task gets its answers; every later call is refused. The
    // endpoint works (a bad turn of the model, a key that ran out of
    // credit): each task gets its row, and the run is not stopped.
    let fixture = Fixture::new();
    let tasks = world(&fixture, 6);
    let server = ScriptedServer::start_with(move |request| {
        let user = request.body["messages"][1]["content"]
            .as_str()
            .unwrap_or("");
        if user.contains("Problem of task t0.") {
            fixing_reply(request)
        } else {
            error_reply(400, "Invalid value for 'temperature'.")
        }
    });
    let out = run(&fixture, &tasks, &server.base_url(), &["-j", "1"]);
    assert_eq!(out.code, 1, "stderr:\n{}", out.stderr);
    let rows = out.rows();
    assert_eq!(rows.len(), 6, "{rows:?}");
    assert_eq!(out.row("t0")["status"], "passed");
    for id in 1..6 {
        assert_eq!(out.row(&format!("t{id}"))["exit_reason"], "api_error");
    }
}

#[test]
fn a_model_that_only_times_out_is_slow_not_refusing() {
    // Every call is held past --request-timeout: five tasks end as
    // api_error (timed out), and all five get a row.
    let fixture = Fixture::new();
    let tasks = world(&fixture, 5);
    let server = ScriptedServer::start_with(|_| {
        Reply::Delay(Duration::from_secs(30), Box::new(Reply::Drop))
    });
    let out = run(
        &fixture,
        &tasks,
        &server.base_url(),
        &["-j", "5", "--request-timeout", "1", "--max-retries", "0"],
    );
    assert_eq!(out.code, 1, "stderr:\n{}", out.stderr);
    let rows = out.rows();
    assert_eq!(rows.len(), 5, "{rows:?}");
    for row in &rows {
        assert_eq!(row["exit_reason"], "api_error", "{row:?}");
        assert!(row["error"].contains("timed out"), "{row:?}");
    }
}

/// The message llama-cpp-python's server (0.3.x) gives, with HTTP 500, to
/// an assistant message whose `content` is `null` or missing.
const VALIDATION_ERROR: &str = "[{'type': 'string_type', 'loc': ('body', 'messages', 2, 'typed-dict', 'content'), 'msg': 'Input should be a valid string', 'input': None}]";

/// That server's answer to such a history: every exception it answers is a
/// 500 named `internal_server_error` (llama_cpp/server/errors.py), so only
/// the message tells a refusal.
fn validation_error() -> Reply {
    Reply::Status(
        500,
        json!({"error": {
            "message": VALIDATION_ERROR,
            "type": "internal_server_error",
            "param": null,
            "code": null,
        }})
        .to_string(),
    )
}

/// Whether a history holds an assistant message with a `null` or missing
/// `content`, which that server refuses.
fn has_null_content(request: &crate::support::server::Request) -> bool {
    request.body["messages"].as_array().is_some_and(|m| {
        m.iter()
            .any(|m| m["role"] == "assistant" && m.get("content").is_none_or(Value::is_null))
    })
}

#[test]
fn the_same_500_twice_ends_the_task_with_the_servers_words_not_ten_retries() {
    let fixture = Fixture::new();
    let tasks = world(&fixture, 1);
    let server = ScriptedServer::start_with(|_| validation_error());
    let out = run(
        &fixture,
        &tasks,
        &server.base_url(),
        &["--max-retries", "10", "--retry-delay", "0.05"],
    );
    assert_eq!(out.code, 1, "stderr:\n{}", out.stderr);
    let row = out.row("t0");
    assert_eq!(row["exit_reason"], "api_error", "{row:?}");
    assert!(
        row["error"].contains("Input should be a valid string"),
        "{row:?}"
    );
    assert!(row["error"].contains("HTTP 500 twice"), "{row:?}");
    assert_eq!(server.requests().len(), 2, "tried once more, then stopped");
    assert_eq!(row["model_retries"], "1", "{row:?}");
}

/// A 500 that says nothing either way, the same every time (Ollama's runner
/// crashing on the request): it ends the task, but only after four
/// identical answers in a row, not two.
#[test]
fn the_same_unclear_500_ends_the_task_after_four_tries() {
    let fixture = Fixture::new();
    let tasks = world(&fixture, 1);
    let crash = "llama runner process has terminated: exit status 2";
    let server = ScriptedServer::start_with(move |_| {
        Reply::Status(500, json!({"error": crash}).to_string())
    });
    let out = run(
        &fixture,
        &tasks,
        &server.base_url(),
        &["--max-retries", "10", "--retry-delay", "0.01"],
    );
    assert_eq!(out.code, 1, "stderr:\n{}", out.stderr);
    let row = out.row("t0");
    assert_eq!(row["exit_reason"], "api_error", "{row:?}");
    assert!(row["error"].contains(crash), "{row:?}");
    assert!(row["error"].contains("HTTP 500 4 times"), "{row:?}");
    assert_eq!(server.requests().len(), 4, "three retries, then stopped");
    assert_eq!(row["model_retries"], "3", "{row:?}");
}

/// A provider's own transient 500 repeats word for word in an incident
/// (OpenAI's `server_error`): it is load however often it comes, here five
/// times in a row, more than an unclear answer is given.
#[test]
fn the_providers_own_500_five_times_in_a_row_is_retried_until_it_answers() {
    let fixture = Fixture::new();
    let tasks = world(&fixture, 1);
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let server = ScriptedServer::start_with(move |request| {
        if counter.fetch_add(1, Ordering::SeqCst) < 5 {
            error_reply(
                500,
                "The server had an error while processing your request. Sorry about that!",
            )
        } else {
            fixing_reply(request)
        }
    });
    let out = run(
        &fixture,
        &tasks,
        &server.base_url(),
        &["--max-retries", "10", "--retry-delay", "0.01"],
    );
    assert_eq!(out.code, 0, "stderr:\n{}", out.stderr);
    let row = out.row("t0");
    assert_eq!(row["status"], "passed", "{row:?}");
    assert_eq!(row["exit_reason"], "completed", "{row:?}");
    assert_eq!(row["model_retries"], "5", "{row:?}");
}

#[test]
fn an_overloaded_500_is_still_retried_until_it_answers() {
    let fixture = Fixture::new();
    let tasks = world(&fixture, 1);
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let server = ScriptedServer::start_with(move |request| {
        if counter.fetch_add(1, Ordering::SeqCst) < 4 {
            error_reply(500, "The server is overloaded, please try again later.")
        } else {
            fixing_reply(request)
        }
    });
    let out = run(
        &fixture,
        &tasks,
        &server.base_url(),
        &["--max-retries", "10", "--retry-delay", "0.01"],
    );
    assert_eq!(out.code, 0, "stderr:\n{}", out.stderr);
    let row = out.row("t0");
    assert_eq!(row["status"], "passed", "{row:?}");
    assert_eq!(row["model_retries"], "4", "{row:?}");
}

#[test]
fn a_server_that_refuses_null_content_runs_to_the_turn_cap() {
    // Like llama-cpp-python's server: a history with `content: null` next
    // to `tool_calls` is refused with a 500. The scripted model always
    // calls a tool, with `content: null`, so every task runs to the cap.
    let fixture = Fixture::new();
    let tasks = world(&fixture, 2);
    let server = ScriptedServer::start_with(|request| {
        if has_null_content(request) {
            return validation_error();
        }
        let mut reply = tool_calls_reply(&[("c", "echo looked")], 10, 5);
        if let Reply::Json(body) = &mut reply {
            // The legacy field some servers add beside `tool_calls`.
            body["choices"][0]["message"]["function_call"] =
                json!({"name": "bash", "arguments": "{\"command\":\"echo looked\"}"});
        }
        reply
    });
    let out = run(&fixture, &tasks, &server.base_url(), &["--max-turns", "3"]);
    assert_eq!(out.code, 0, "stderr:\n{}", out.stderr);
    for id in ["t0", "t1"] {
        let row = out.row(id);
        assert_eq!(row["exit_reason"], "max_turns", "{row:?}");
        assert_eq!(row["turns"], "3", "{row:?}");
        assert_eq!(row["model_retries"], "0", "{row:?}");
        // The trajectory keeps each reply exactly as it came.
        let replies: Vec<Value> = out
            .events(id, "message")
            .into_iter()
            .map(|e| e["message"].clone())
            .filter(|m| m["role"] == "assistant")
            .collect();
        assert_eq!(replies.len(), 3);
        assert!(
            replies
                .iter()
                .all(|m| m["content"].is_null() && m.get("function_call").is_some())
        );
    }
    for request in server.requests() {
        for message in request.body["messages"].as_array().expect("messages") {
            if message["role"] == "assistant" {
                assert_eq!(message["content"], "", "{message}");
                assert!(message.get("function_call").is_none(), "{message}");
            }
        }
    }
}
