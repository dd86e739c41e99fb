//! The agent loop end to end: the real binary against a scripted OpenAI
//! server. What every request holds (the whole history, the one `bash`
//! tool), how tool calls are answered, why the loop ends, and what the CSV
//! row and the trajectory say about it.
//!
//! It does not cover the executor's isolation (exec_safety.rs) nor the
//! stages around the agent (pipeline.rs).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError, mpsc};
use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support::harness::{RunOutput, f64_of};
use crate::support::server::{
    Reply, Request, ScriptedServer, error_reply, raw_tool_call_reply, text_reply, tool_calls_reply,
};
use crate::support::world::{FIX, TEST_COMMAND, World};

/// The model name every run asks for.
const MODEL: &str = "scripted-gpt";

// ---------------------------------------------------------------------------
// Helpers: the world a test runs in, scripts, and readers of requests.
// ---------------------------------------------------------------------------

/// Runs the tasks `ids` of `w` against `server` with `args` after the
/// model flags.
fn run_tasks(w: &World, ids: &[&str], server: &ScriptedServer, args: &[&str]) -> RunOutput {
    run_tasks_with_env(w, ids, server, args, &[])
}

fn run_tasks_with_env(
    w: &World,
    ids: &[&str],
    server: &ScriptedServer,
    args: &[&str],
    env: &[(&str, &str)],
) -> RunOutput {
    let base_url = server.base_url();
    let mut all = vec!["--model", MODEL, "--base-url", &base_url];
    all.extend_from_slice(args);
    w.run("out", ids, &all, env)
}

/// A full chat-completion response around `message`, shaped like the real
/// API's (the server module's own builder is private).
fn completion(message: Value, finish_reason: &str, prompt: u64, completion: u64) -> Reply {
    Reply::Json(json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 1_700_000_000u64,
        "model": MODEL,
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }))
}

/// One entry of `tool_calls`; `arguments` is sent as given (a string, or
/// anything else for servers that send objects).
fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
}

/// A `bash` call whose arguments are `{"command": COMMAND}` as a JSON string.
fn bash(id: &str, command: &str) -> Value {
    call(id, "bash", json!(json!({"command": command}).to_string()))
}

/// An assistant message with these tool calls.
fn calls_reply(
    calls: Vec<Value>,
    finish_reason: &str,
    prompt: u64,
    completion_tokens: u64,
) -> Reply {
    completion(
        json!({"role": "assistant", "content": null, "tool_calls": calls}),
        finish_reason,
        prompt,
        completion_tokens,
    )
}

/// The assistant message a scripted reply carries, as it came.
fn received_message(reply: &Reply) -> Value {
    match reply {
        Reply::Json(body) => body["choices"][0]["message"].clone(),
        Reply::Delay(_, inner) => received_message(inner),
        other => panic!("not a completion: {other:?}"),
    }
}

/// The assistant message a scripted reply carries, as the next request
/// sends it back.
fn reply_message(reply: &Reply) -> Value {
    as_sent(&received_message(reply))
}

/// A message of the history as onebash sends it back (docs/cli.md, "What
/// goes back to the API"): an assistant's `null` or missing content as
/// `""`, and no `function_call` beside `tool_calls`. Written out here, not
/// taken from the code, so that a change to the rule shows.
fn as_sent(message: &Value) -> Value {
    let mut message = message.clone();
    if message["role"] == "assistant" {
        if message.get("content").is_none_or(Value::is_null) {
            message["content"] = json!("");
        }
        if message["tool_calls"]
            .as_array()
            .is_some_and(|c| !c.is_empty())
            && let Some(fields) = message.as_object_mut()
        {
            fields.remove("function_call");
        }
    }
    message
}

/// The messages of a request.
fn messages(request: &Request) -> Vec<Value> {
    request.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("no messages in request: {}", request.raw_body))
}

/// The content of the tool message answering `id` in a request.
fn answer(request: &Request, id: &str) -> String {
    messages(request)
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no tool answer for {id} in {}", request.raw_body))
        .to_owned()
}

/// The task a request belongs to, read from its user message
/// (`Problem of task ID.`, see `task()` in harness.rs).
fn task_of(request: &Request) -> Option<String> {
    let user = messages(request)
        .into_iter()
        .find(|m| m["role"] == "user")?;
    let text = user["content"].as_str()?;
    let start = text.find("Problem of task ")? + "Problem of task ".len();
    let rest = &text[start..];
    // Task ids in this file have no dot, so the first one ends the id.
    Some(rest[..rest.find('.')?].to_owned())
}

/// How many answers the model already gave in this conversation: the index
/// of the reply the request asks for.
fn turn_of(request: &Request) -> usize {
    messages(request)
        .iter()
        .filter(|m| m["role"] == "assistant")
        .count()
}

/// A server that answers each task from its own script, by turn, so tasks
/// may run at once. A turn past the end of a script gets a 500.
fn per_task_server(scripts: Vec<(&str, Vec<Reply>)>) -> ScriptedServer {
    let scripts: HashMap<String, Vec<Reply>> = scripts
        .into_iter()
        .map(|(id, replies)| (id.to_owned(), replies))
        .collect();
    ScriptedServer::start_with(move |request| {
        let Some(id) = task_of(request) else {
            return error_reply(400, "the scripted server found no task in the request");
        };
        scripts
            .get(&id)
            .and_then(|replies| replies.get(turn_of(request)))
            .cloned()
            .unwrap_or_else(|| error_reply(500, &format!("script exhausted for {id}")))
    })
}

/// The requests of one task, in arrival order.
fn requests_of(server: &ScriptedServer, id: &str) -> Vec<Request> {
    server
        .requests()
        .into_iter()
        .filter(|r| task_of(r).as_deref() == Some(id))
        .collect()
}

/// What every request must be: a POST to `/chat/completions` with the model
/// and exactly one tool, `bash`, taking a required string `command`.
fn assert_request_shape(request: &Request) {
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/v1/chat/completions");
    assert!(
        request
            .header("content-type")
            .is_some_and(|v| v.starts_with("application/json")),
        "{:?}",
        request.headers
    );
    assert_eq!(request.body["model"], MODEL);
    let tools = request.body["tools"].as_array().expect("`tools` is a list");
    assert_eq!(tools.len(), 1, "{tools:?}");
    let tool = &tools[0];
    assert_eq!(tool["type"], "function");
    assert_eq!(tool["function"]["name"], "bash");
    let parameters = &tool["function"]["parameters"];
    assert_eq!(parameters["type"], "object");
    assert_eq!(parameters["properties"]["command"]["type"], "string");
    assert_eq!(parameters["required"], json!(["command"]));
}

/// Checks one conversation: the first request holds the system and the user
/// message; each later one is the one before, plus the assistant message
/// exactly as the server sent it, plus one `tool` message per tool call of
/// that message, in order, with its id and a text content.
fn assert_history_grows(requests: &[Request], replies: &[Reply]) {
    let first = messages(&requests[0]);
    assert_eq!(first.len(), 2, "{first:?}");
    assert_eq!(first[0]["role"], "system");
    assert!(first[0]["content"].as_str().is_some_and(|s| !s.is_empty()));
    assert_eq!(first[1]["role"], "user");
    for (n, pair) in requests.windows(2).enumerate() {
        assert_request_shape(&pair[0]);
        assert_request_shape(&pair[1]);
        let before = messages(&pair[0]);
        let now = messages(&pair[1]);
        let assistant = reply_message(&replies[n]);
        let ids: Vec<&str> = assistant["tool_calls"]
            .as_array()
            .map(|calls| calls.iter().filter_map(|c| c["id"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(
            now.len(),
            before.len() + 1 + ids.len(),
            "request {} holds {now:?}",
            n + 2
        );
        assert_eq!(now[..before.len()], before[..], "request {}", n + 2);
        assert_eq!(now[before.len()], assistant, "request {}", n + 2);
        for (k, id) in ids.iter().enumerate() {
            let tool = &now[before.len() + 1 + k];
            let keys: Vec<&str> = tool
                .as_object()
                .expect("object")
                .keys()
                .map(String::as_str)
                .collect();
            assert_eq!(tool["role"], "tool", "{tool}");
            assert_eq!(tool["tool_call_id"], *id, "{tool}");
            assert!(tool["content"].is_string(), "{tool}");
            assert_eq!(keys.len(), 3, "{tool}");
        }
    }
}

/// The event kinds of a trajectory, in order.
fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["event"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// The tests ran and failed: an exit code, and not 0.
fn assert_test_ran_and_failed(row: &HashMap<String, String>) {
    assert!(
        !row["test_exit_code"].is_empty() && row["test_exit_code"] != "0",
        "{row:?}"
    );
}

// ---------------------------------------------------------------------------
// The history and the tool calls.
// ---------------------------------------------------------------------------

#[test]
fn every_request_sends_the_whole_history_with_each_tool_answer_in_order() {
    let w = World::new();
    // The first answer has text and a field some servers add: both must come
    // back exactly as sent.
    let first = completion(
        json!({
            "role": "assistant",
            "content": "Let me look around.",
            "reasoning_content": "The README first.",
            "tool_calls": [bash("call_1", "echo one"), bash("call_2", "echo two >&2; exit 3")],
        }),
        "tool_calls",
        101,
        11,
    );
    let replies = vec![
        first,
        tool_calls_reply(&[("call_3", "printf x")], 202, 22),
        text_reply("All done.", "stop", 303, 33),
    ];
    let server = ScriptedServer::start(replies.clone());
    let run = run_tasks_with_env(
        &w,
        &["t1"],
        &server,
        &["--api-key-env", "ONEBASH_TEST_KEY"],
        &[("ONEBASH_TEST_KEY", "sk-onebash-test")],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    for request in &requests {
        assert_request_shape(request);
        assert_eq!(
            request.header("authorization"),
            Some("Bearer sk-onebash-test")
        );
    }
    let first = messages(&requests[0]);
    assert!(
        first[1]["content"]
            .as_str()
            .is_some_and(|s| s.contains("Problem of task t1.")),
        "{first:?}"
    );
    assert_history_grows(&requests, &replies);
    // And exactly: the same comparison, written out once.
    let mut expected = first.clone();
    expected.push(reply_message(&replies[0]));
    expected
        .push(json!({"role": "tool", "tool_call_id": "call_1", "content": "one\n[exit code: 0]"}));
    expected
        .push(json!({"role": "tool", "tool_call_id": "call_2", "content": "two\n[exit code: 3]"}));
    assert_eq!(messages(&requests[1]), expected);
    expected.push(reply_message(&replies[1]));
    expected
        .push(json!({"role": "tool", "tool_call_id": "call_3", "content": "x\n[exit code: 0]"}));
    assert_eq!(messages(&requests[2]), expected);

    let row = run.row("t1");
    assert_eq!(row["model"], MODEL);
    assert_eq!(row["status"], "failed");
    assert_eq!(row["exit_reason"], "completed");
    assert_eq!(row["turns"], "3");
    assert_eq!(row["tool_calls"], "3");
    assert_eq!(row["prompt_tokens"], "606");
    assert_eq!(row["completion_tokens"], "66");
    assert_eq!(row["total_tokens"], "672");
    assert_eq!(row["error"], "");
}

#[test]
fn tool_calls_of_one_answer_run_one_after_another_in_order() {
    let w = World::new();
    // The first call is slow: if calls ran at once, `second` would be
    // written first.
    let replies = vec![
        tool_calls_reply(
            &[
                ("w1", "sleep 0.3; echo first >> order.txt"),
                ("w2", "echo second >> order.txt"),
                ("read", "cat order.txt"),
                ("fix", FIX),
            ],
            10,
            5,
        ),
        text_reply("Fixed.", "stop", 20, 5),
    ];
    let server = ScriptedServer::start(replies.clone());
    let run = run_tasks(&w, &["t1"], &server, &[]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_history_grows(&requests, &replies);
    // No key was given: none is sent.
    assert!(requests.iter().all(|r| r.header("authorization").is_none()));
    let ids: Vec<Value> = messages(&requests[1])
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].clone())
        .collect();
    assert_eq!(ids, vec!["w1", "w2", "read", "fix"]);
    assert_eq!(
        answer(&requests[1], "read"),
        "first\nsecond\n[exit code: 0]"
    );
    assert_eq!(answer(&requests[1], "fix"), "(no output)\n[exit code: 0]");

    let commands = run.events("t1", "command");
    let ran: Vec<&str> = commands
        .iter()
        .filter_map(|e| e["tool_call_id"].as_str())
        .collect();
    assert_eq!(ran, vec!["w1", "w2", "read", "fix"]);
    let row = run.row("t1");
    assert_eq!(row["status"], "passed");
    assert_eq!(row["turns"], "2");
    assert_eq!(row["tool_calls"], "4");
}

#[test]
fn tool_calls_run_whatever_the_finish_reason_and_only_a_plain_answer_ends_the_loop() {
    let w = World::new();
    let server = per_task_server(vec![
        // Tool calls with `stop`, then with `length`: both are run and the
        // loop goes on; the plain answer ends it.
        (
            "calls",
            vec![
                calls_reply(vec![bash("s1", FIX)], "stop", 10, 1),
                calls_reply(vec![bash("l1", "echo more")], "length", 20, 2),
                text_reply("Done.", "stop", 30, 3),
            ],
        ),
        // Cut by the output limit with no tool call.
        (
            "cut",
            vec![text_reply("I was about to run", "length", 40, 4)],
        ),
        // An empty `tool_calls` list is no tool call.
        (
            "empty",
            vec![completion(
                json!({"role": "assistant", "content": "Nothing to do.", "tool_calls": []}),
                "stop",
                50,
                5,
            )],
        ),
    ]);
    let run = run_tasks(&w, &["calls", "cut", "empty"], &server, &["-j", "3"]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);

    let requests = requests_of(&server, "calls");
    assert_eq!(requests.len(), 3);
    assert_eq!(answer(&requests[1], "s1"), "(no output)\n[exit code: 0]");
    assert_eq!(answer(&requests[2], "l1"), "more\n[exit code: 0]");
    let row = run.row("calls");
    assert_eq!(row["exit_reason"], "completed");
    assert_eq!(row["status"], "passed");
    assert_eq!(row["turns"], "3");
    assert_eq!(row["tool_calls"], "2");

    assert_eq!(requests_of(&server, "cut").len(), 1);
    let row = run.row("cut");
    assert_eq!(row["exit_reason"], "length");
    // The answer was cut, but that says something about the model: the
    // tests run and give a verdict.
    assert_eq!(row["status"], "failed");
    assert_test_ran_and_failed(&row);
    assert_eq!(row["turns"], "1");
    assert_eq!(row["tool_calls"], "0");

    assert_eq!(requests_of(&server, "empty").len(), 1);
    let row = run.row("empty");
    assert_eq!(row["exit_reason"], "completed");
    assert_eq!(row["status"], "failed");
    assert_eq!(row["tool_calls"], "0");
}

#[test]
fn bad_tool_calls_get_an_error_answer_and_the_loop_goes_on() {
    let w = World::new();
    let replies = vec![
        calls_reply(
            vec![
                call("bad_json", "bash", json!(r#"{"command": "ls""#)),
                call("no_command", "bash", json!(r#"{"cmd": "ls"}"#)),
                call("not_string", "bash", json!(r#"{"command": ["ls"]}"#)),
                call("unknown", "python", json!(r#"{"command": "print(1)"}"#)),
                // Some servers send the arguments as an object, not a
                // string: that is accepted.
                call("object", "bash", json!({"command": "echo from an object"})),
                bash("good", FIX),
            ],
            "tool_calls",
            10,
            5,
        ),
        // A whole turn of bad calls does not end the loop either.
        raw_tool_call_reply("again", "bash", "not json at all", 20, 5),
        text_reply("Fixed.", "stop", 30, 5),
    ];
    let server = ScriptedServer::start(replies.clone());
    let run = run_tasks(&w, &["t1"], &server, &[]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_history_grows(&requests, &replies);
    let expected = [
        (1, "bad_json", "not valid JSON"),
        (1, "no_command", "no `command` argument"),
        (1, "not_string", "`command` must be a string"),
        (1, "unknown", "there is no tool named \"python\""),
        (2, "again", "not valid JSON"),
    ];
    for (request, id, says) in expected {
        let text = answer(&requests[request], id);
        assert!(text.starts_with("error:"), "{id}: {text}");
        assert!(text.contains(says), "{id}: {text}");
    }
    assert_eq!(
        answer(&requests[1], "object"),
        "from an object\n[exit code: 0]"
    );
    assert_eq!(answer(&requests[1], "good"), "(no output)\n[exit code: 0]");

    let row = run.row("t1");
    assert_eq!(row["status"], "passed");
    assert_eq!(row["exit_reason"], "completed");
    assert_eq!(row["turns"], "3");
    // Every call the model asked for counts, run or not.
    assert_eq!(row["tool_calls"], "7");

    let tool_errors = run.events("t1", "tool_error");
    let ids: Vec<&str> = tool_errors
        .iter()
        .filter_map(|e| e["tool_call_id"].as_str())
        .collect();
    assert_eq!(
        ids,
        vec!["bad_json", "no_command", "not_string", "unknown", "again"]
    );
    for event in &tool_errors {
        let id = event["tool_call_id"].as_str().expect("id");
        let request = if id == "again" { 2 } else { 1 };
        assert_eq!(event["error"], answer(&requests[request], id));
    }
    let commands: Vec<Value> = run
        .events("t1", "command")
        .iter()
        .map(|e| e["tool_call_id"].clone())
        .collect();
    assert_eq!(commands, vec!["object", "good"]);
}

// ---------------------------------------------------------------------------
// Why the loop ends: caps and errors.
// ---------------------------------------------------------------------------

#[test]
fn max_turns_stops_after_n_model_calls_with_every_usage_summed() {
    let w = World::new();
    // Distinct numbers per turn, so a turn counted twice or lost shows.
    let usage = |n: u64| (1000 + 17 * n, 3 * n + n * n);
    let replies: Vec<Reply> = (1..=21)
        .map(|n| {
            let (prompt, completion) = usage(n);
            let (a, b) = (format!("c{n}a"), format!("c{n}b"));
            let echo = format!("echo turn {n}");
            tool_calls_reply(&[(&a, &echo), (&b, "true")], prompt, completion)
        })
        .collect();
    let server = ScriptedServer::start(replies.clone());
    let run = run_tasks(&w, &["t1"], &server, &["--max-turns", "20"]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);

    let requests = server.requests();
    assert_eq!(requests.len(), 20, "no call after the 20th");
    assert_history_grows(&requests, &replies);
    assert_eq!(messages(&requests[19]).len(), 2 + 19 * 3);
    assert_eq!(answer(&requests[19], "c19a"), "turn 19\n[exit code: 0]");

    let prompt: u64 = (1..=20).map(|n| usage(n).0).sum();
    let completion: u64 = (1..=20).map(|n| usage(n).1).sum();
    let row = run.row("t1");
    assert_eq!(row["exit_reason"], "max_turns");
    assert_eq!(row["status"], "failed");
    assert_eq!(row["turns"], "20");
    assert_eq!(row["tool_calls"], "40");
    assert_eq!(row["prompt_tokens"], prompt.to_string());
    assert_eq!(row["completion_tokens"], completion.to_string());
    assert_eq!(row["total_tokens"], (prompt + completion).to_string());

    let end = &run.events("t1", "agent_end")[0];
    assert_eq!(end["exit_reason"], "max_turns");
    assert_eq!(end["turns"], 20);
    assert_eq!(end["tool_calls"], 40);
    assert_eq!(end["usage"]["total_tokens"], prompt + completion);
    // The tool calls of the last answer were run too.
    assert_eq!(run.events("t1", "command").len(), 40);
    assert_eq!(run.events("t1", "model_call").len(), 20);
}

#[test]
fn max_tokens_makes_no_model_call_once_the_sum_reached_it() {
    let w = World::new();
    let replies = vec![
        tool_calls_reply(&[("a", "echo a")], 30, 20),
        tool_calls_reply(&[("b", "echo b")], 45, 15),
        text_reply("never asked for", "stop", 1, 1),
    ];
    let server = ScriptedServer::start(replies);
    // 50 after the first call (below: go on), 110 after the second (reached).
    let run = run_tasks(&w, &["t1"], &server, &["--max-tokens", "110"]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);

    assert_eq!(server.requests().len(), 2);
    let row = run.row("t1");
    assert_eq!(row["exit_reason"], "max_tokens");
    assert_eq!(row["status"], "failed");
    assert_eq!(row["turns"], "2");
    assert_eq!(row["tool_calls"], "2");
    assert_eq!(row["prompt_tokens"], "75");
    assert_eq!(row["completion_tokens"], "35");
    assert_eq!(row["total_tokens"], "110");
}

#[test]
fn api_errors_end_their_task_with_the_status_and_message_and_other_tasks_go_on() {
    let w = World::new();
    let server = per_task_server(vec![
        (
            "unauthorized",
            vec![error_reply(401, "Incorrect API key provided: sk-wrong.")],
        ),
        (
            // One good turn first: its usage and tool call stay counted.
            "server_error",
            vec![
                tool_calls_reply(&[("s1", "echo hi")], 11, 4),
                error_reply(
                    500,
                    "The server had an error while processing your request.",
                ),
            ],
        ),
        ("not_json", vec![Reply::Raw("not json".to_owned())]),
        ("dropped", vec![Reply::Drop]),
        (
            "ok",
            vec![
                tool_calls_reply(&[("f", FIX)], 7, 3),
                text_reply("Fixed.", "stop", 9, 2),
            ],
        ),
    ]);
    let ids = ["unauthorized", "server_error", "not_json", "dropped", "ok"];
    // One at a time: the good task runs after every failed one. No
    // retries: what a failure does when retries are used up.
    let run = run_tasks(&w, &ids, &server, &["-j", "1", "--max-retries", "0"]);
    assert_eq!(run.code, 1, "stderr:\n{}", run.stderr);
    assert_eq!(run.rows().len(), 5);

    let expected: [(&str, &[&str]); 4] = [
        (
            "unauthorized",
            &["HTTP 401", "Incorrect API key provided: sk-wrong."],
        ),
        (
            "server_error",
            &[
                "HTTP 500",
                "The server had an error while processing your request.",
            ],
        ),
        (
            "not_json",
            &["malformed answer", "not valid JSON", "not json"],
        ),
        ("dropped", &["failed to reach the model API"]),
    ];
    for (id, says) in expected {
        let row = run.row(id);
        assert_eq!(row["status"], "error", "{row:?}");
        assert_eq!(row["exit_reason"], "api_error", "{row:?}");
        assert_eq!(row["passed"], "false");
        // No verdict: the tests did not run.
        assert_eq!(row["test_exit_code"], "", "{row:?}");
        for text in says {
            assert!(row["error"].contains(text), "{id}: {:?}", row["error"]);
        }
        assert!(!row["error"].contains('\n'));
        let failures = run.events(id, "model_error");
        assert_eq!(failures.len(), 1, "{id}");
        assert_eq!(
            failures[0]["error"]
                .as_str()
                .map(|e| e.split_whitespace().collect::<Vec<_>>().join(" ")),
            Some(row["error"].clone())
        );
        assert!(run.events(id, "test").is_empty(), "{id}");
        let end = run.trajectory(id).pop().expect("events");
        assert_eq!(end["event"], "end");
        assert_eq!(end["status"], "error");
    }
    assert_eq!(requests_of(&server, "unauthorized").len(), 1);
    let row = run.row("unauthorized");
    assert_eq!(row["turns"], "1");
    assert_eq!(row["total_tokens"], "0");
    let row = run.row("server_error");
    assert_eq!(row["turns"], "2");
    assert_eq!(row["tool_calls"], "1");
    assert_eq!(row["prompt_tokens"], "11");
    assert_eq!(row["completion_tokens"], "4");

    let row = run.row("ok");
    assert_eq!(row["status"], "passed");
    assert_eq!(row["exit_reason"], "completed");
    assert_eq!(row["error"], "");
    assert!(
        run.stdout.contains("1 passed, 0 failed, 4 error"),
        "{}",
        run.stdout
    );
}

#[test]
fn context_overflow_ends_the_agent_but_the_tests_still_run() {
    let w = World::new();
    let overflow = Reply::Status(
        400,
        json!({"error": {
            "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130001 tokens.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }})
        .to_string(),
    );
    let server = per_task_server(vec![
        (
            "fixed_first",
            vec![tool_calls_reply(&[("f", FIX)], 100, 10), overflow.clone()],
        ),
        ("unfixed", vec![overflow]),
    ]);
    let run = run_tasks(&w, &["fixed_first", "unfixed"], &server, &["-j", "2"]);
    // Both got a verdict.
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);

    let row = run.row("fixed_first");
    assert_eq!(row["exit_reason"], "context_overflow");
    assert_eq!(row["status"], "passed");
    assert_eq!(row["passed"], "true");
    assert_eq!(row["test_exit_code"], "0");
    assert_eq!(row["turns"], "2");
    assert_eq!(row["tool_calls"], "1");
    assert_eq!(row["prompt_tokens"], "100");
    assert_eq!(run.events("fixed_first", "model_error").len(), 1);
    assert_eq!(run.events("fixed_first", "test").len(), 1);

    let row = run.row("unfixed");
    assert_eq!(row["exit_reason"], "context_overflow");
    assert_eq!(row["status"], "failed");
    assert_test_ran_and_failed(&row);
}

#[test]
fn task_timeout_ends_a_hung_model_call_or_a_long_command_promptly() {
    let w = World::new();
    // The hung model answers only once `_release` is dropped, at the end of
    // the test; the long command would sleep for ten minutes. The run can
    // only end, as it must, by cutting both at the task timeout.
    let (_release, held) = mpsc::channel::<()>();
    let held = Mutex::new(held);
    let server = ScriptedServer::start_with(move |request| {
        match (task_of(request).as_deref(), turn_of(request)) {
            (Some("hung_model"), _) => {
                let held = held.lock().unwrap_or_else(PoisonError::into_inner);
                let _ = held.recv_timeout(Duration::from_secs(300));
                text_reply("too late", "stop", 1, 1)
            }
            (Some("long_command"), 0) => tool_calls_reply(&[("sleep", "sleep 600")], 5, 5),
            _ => text_reply("too late", "stop", 1, 1),
        }
    });
    let run = run_tasks(
        &w,
        &["hung_model", "long_command"],
        &server,
        &["-j", "2", "--task-timeout", "2"],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);

    for id in ["hung_model", "long_command"] {
        let row = run.row(id);
        assert_eq!(row["exit_reason"], "task_timeout", "{row:?}");
        // A timeout says something about the model: the tests still run.
        assert_eq!(row["status"], "failed", "{row:?}");
        // At least the timeout; far less than the held call or the sleep
        // (a hang guard, not a measure of speed).
        let agent = f64_of(&row, "agent_seconds");
        assert!((1.5..120.0).contains(&agent), "{id}: agent_seconds {agent}");
        let end = &run.events(id, "agent_end")[0];
        assert_eq!(end["exit_reason"], "task_timeout");
    }
    assert_eq!(run.row("hung_model")["turns"], "1");
    let cut = run.events("hung_model", "model_error");
    assert_eq!(cut.len(), 1, "{:#?}", run.trajectory("hung_model"));
    assert!(run.events("hung_model", "model_call").is_empty());
    assert_eq!(run.row("long_command")["tool_calls"], "1");
    let command = &run.events("long_command", "command")[0];
    assert_eq!(command["timed_out"], true, "{command}");
}

#[test]
fn a_command_cut_by_the_task_timeout_is_still_in_the_trajectory() {
    let w = World::new();
    let replies = vec![
        tool_calls_reply(&[("sleep", "echo started; sleep 30")], 5, 5),
        text_reply("too late", "stop", 1, 1),
    ];
    let server = ScriptedServer::start(replies);
    let run = run_tasks(&w, &["t1"], &server, &["--task-timeout", "2"]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(run.row("t1")["exit_reason"], "task_timeout");
    // CONTRACT.md: the trajectory holds every command with its exit code,
    // duration, timeout flag and output. The loop even shortens the
    // command's timeout to what is left of the task's, so that it ends, and
    // is recorded, by the deadline.
    let commands = run.events("t1", "command");
    assert_eq!(commands.len(), 1, "{:#?}", run.trajectory("t1"));
    assert_eq!(commands[0]["tool_call_id"], "sleep");
    assert_eq!(commands[0]["timed_out"], true);
    assert_eq!(commands[0]["output"], "started\n");
}

#[test]
fn a_model_call_cut_by_the_task_timeout_is_still_in_the_trajectory() {
    let w = World::new();
    let server = ScriptedServer::start(vec![Reply::Delay(
        Duration::from_secs(30),
        Box::new(text_reply("too late", "stop", 1, 1)),
    )]);
    let run = run_tasks(&w, &["t1"], &server, &["--task-timeout", "2"]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let row = run.row("t1");
    assert_eq!(row["exit_reason"], "task_timeout");
    assert_eq!(row["turns"], "1");
    // Every turn the row counts has its model call in the trajectory, with
    // its latency: a `model_call`, or a `model_error` saying it was cut.
    let calls = run.events("t1", "model_call").len() + run.events("t1", "model_error").len();
    assert_eq!(calls, 1, "{:#?}", run.trajectory("t1"));
}

#[test]
fn the_model_sees_exit_codes_and_command_timeouts() {
    let w = World::new();
    let replies = vec![
        tool_calls_reply(
            &[
                ("fails", "echo oops; exit 7"),
                ("sleeps", "echo started; sleep 600; echo never"),
            ],
            10,
            5,
        ),
        text_reply("Giving up.", "stop", 20, 5),
    ];
    let server = ScriptedServer::start(replies);
    let run = run_tasks(&w, &["t1"], &server, &["--command-timeout", "1"]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(answer(&requests[1], "fails"), "oops\n[exit code: 7]");
    let slept = answer(&requests[1], "sleeps");
    assert!(slept.starts_with("started\n"), "{slept}");
    assert!(slept.contains("timed out after 1 s"), "{slept}");
    assert!(!slept.contains("never"), "{slept}");
    let last_line = slept.lines().last().expect("lines");
    assert!(
        last_line.starts_with("[exit code: ") && last_line.ends_with(']'),
        "{slept}"
    );

    let commands = run.events("t1", "command");
    assert_eq!(commands.len(), 2);
    assert_eq!(commands[0]["exit_code"], 7);
    assert_eq!(commands[0]["timed_out"], false);
    assert_eq!(commands[0]["output"], "oops\n");
    assert_eq!(commands[1]["timed_out"], true);
    // At least the timeout; the upper bound is a hang guard, far below the
    // command's own ten minutes.
    let duration = commands[1]["duration_s"].as_f64().expect("duration_s");
    assert!((0.9..120.0).contains(&duration), "duration_s {duration}");
    assert_eq!(run.row("t1")["exit_reason"], "completed");
}

// ---------------------------------------------------------------------------
// The trajectory and concurrent tasks.
// ---------------------------------------------------------------------------

#[test]
fn the_trajectory_records_every_step_and_rebuilds_the_last_request() {
    let w = World::new();
    let replies = vec![
        calls_reply(
            vec![
                bash("c1", "echo hello"),
                call("c2", "grep", json!(r#"{"command": "x"}"#)),
            ],
            "tool_calls",
            100,
            10,
        ),
        tool_calls_reply(&[("c3", FIX)], 200, 20),
        text_reply("Fixed.", "stop", 300, 30),
    ];
    let server = ScriptedServer::start(replies.clone());
    let run = run_tasks(&w, &["t1"], &server, &[]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let events = run.trajectory("t1");
    for event in &events {
        assert!(event["ts"].as_f64().is_some_and(|ts| ts > 1.6e9), "{event}");
    }

    // The order of the known kinds (new kinds may be added in between).
    let known = [
        "header",
        "checkout",
        "message",
        "model_call",
        "command",
        "tool_error",
        "agent_end",
        "diff",
        "test",
        "end",
    ];
    let order: Vec<String> = kinds(&events)
        .into_iter()
        .filter(|k| known.contains(&k.as_str()))
        .collect();
    let expected = [
        "header",
        "checkout",
        "message",
        "message",
        "model_call",
        "message",
        // The answers to one reply's calls are sent together, after the
        // calls ran (Anthropic wants them in one message).
        "command",
        "tool_error",
        "message",
        "message",
        "model_call",
        "message",
        "command",
        "message",
        "model_call",
        "message",
        "agent_end",
        "diff",
        "test",
        "end",
    ];
    assert_eq!(order, expected);
    assert_eq!(events[0]["event"], "header");
    assert_eq!(events[events.len() - 1]["event"], "end");

    let header = &events[0];
    assert_eq!(header["format_version"], 1);
    assert_eq!(header["onebash_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(header["task"]["id"], "t1");
    assert_eq!(header["task"]["problem_statement"], "Problem of task t1.");
    assert_eq!(header["epoch"], 1);
    assert_eq!(header["model"], MODEL);
    assert_eq!(header["provider"], "openai");
    assert_eq!(header["base_commit"], w.commit.as_str());
    assert_eq!(header["repo"], w.repo.display().to_string());
    assert_eq!(header["prompt"]["name"], "default");
    let prompt_file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts/default.toml");
    let sha = format!(
        "{:x}",
        Sha256::digest(std::fs::read(prompt_file).expect("prompts/default.toml"))
    );
    assert_eq!(header["prompt"]["sha256"], sha.as_str());
    assert_eq!(run.row("t1")["prompt"], format!("default@{}", &sha[..12]));
    let template = &header["request_template"];
    assert_eq!(template["model"], MODEL);
    assert_eq!(
        template["url"],
        format!("{}/chat/completions", server.base_url())
    );
    assert_eq!(template["tools"], requests[0].body["tools"]);

    // Every request is rebuilt from the template and the messages logged
    // before its model call.
    let mut logged = Vec::new();
    let mut rebuilt = Vec::new();
    for event in &events {
        match event["event"].as_str() {
            Some("message") => logged.push(as_sent(&event["message"])),
            Some("model_call" | "model_error") => {
                let mut body = template.clone();
                let fields = body.as_object_mut().expect("template is an object");
                fields.remove("url");
                fields.insert("messages".to_owned(), Value::Array(logged.clone()));
                rebuilt.push(body);
            }
            _ => {}
        }
    }
    let sent: Vec<Value> = requests.iter().map(|r| r.body.clone()).collect();
    assert_eq!(rebuilt, sent);

    // The message events, in order, are the last request's messages plus
    // the final answer.
    let message_events: Vec<&Value> = events.iter().filter(|e| e["event"] == "message").collect();
    let logged: Vec<Value> = message_events
        .iter()
        .map(|e| e["message"].clone())
        .collect();
    let last = messages(&requests[2]);
    assert_eq!(logged.len(), last.len() + 1);
    let logged_as_sent: Vec<Value> = logged[..last.len()].iter().map(as_sent).collect();
    assert_eq!(logged_as_sent, last);
    // The trajectory keeps each reply as it came.
    assert_eq!(logged[last.len()], received_message(&replies[2]));
    assert!(
        logged
            .iter()
            .filter(|m| m["role"] == "assistant" && m["tool_calls"].is_array())
            .all(|m| m["content"].is_null()),
        "{logged:?}"
    );
    let turns: Vec<u64> = message_events
        .iter()
        .filter_map(|e| e["turn"].as_u64())
        .collect();
    assert_eq!(turns, vec![0, 0, 1, 1, 1, 2, 2, 3]);

    let calls = run.events("t1", "model_call");
    for (n, call) in calls.iter().enumerate() {
        let k = n as u64 + 1;
        assert_eq!(call["turn"], k);
        assert_eq!(
            call["usage"],
            json!({"prompt_tokens": 100 * k, "completion_tokens": 10 * k, "total_tokens": 110 * k})
        );
        assert_eq!(call["response_id"], "chatcmpl-scripted");
        assert!(call["latency_s"].as_f64().is_some_and(|s| s >= 0.0));
    }
    let finish: Vec<&Value> = calls.iter().map(|c| &c["finish_reason"]).collect();
    assert_eq!(finish, vec!["tool_calls", "tool_calls", "stop"]);

    let commands = run.events("t1", "command");
    let hello = &commands[0];
    assert_eq!(hello["turn"], 1);
    assert_eq!(hello["tool_call_id"], "c1");
    assert_eq!(hello["command"], "echo hello");
    assert_eq!(hello["exit_code"], 0);
    assert_eq!(hello["timed_out"], false);
    assert_eq!(hello["output"], "hello\n");
    assert_eq!(hello["output_bytes"], 6);
    assert_eq!(hello["output_lines"], 1);
    assert_eq!(hello["shown_chars"], 6);
    assert!(hello["duration_s"].as_f64().is_some_and(|s| s >= 0.0));
    assert_eq!(commands[1]["tool_call_id"], "c3");
    assert_eq!(commands[1]["turn"], 2);

    let tool_error = &run.events("t1", "tool_error")[0];
    assert_eq!(tool_error["turn"], 1);
    assert_eq!(tool_error["tool_call_id"], "c2");
    assert_eq!(tool_error["error"], answer(&requests[1], "c2"));

    let row = run.row("t1");
    let agent_end = &run.events("t1", "agent_end")[0];
    assert_eq!(agent_end["exit_reason"], "completed");
    assert_eq!(agent_end["turns"], 3);
    assert_eq!(agent_end["tool_calls"], 3);
    assert_eq!(
        agent_end["usage"],
        json!({"prompt_tokens": 600, "completion_tokens": 60, "total_tokens": 660})
    );
    assert_eq!(row["total_tokens"], "660");

    let test = &run.events("t1", "test")[0];
    assert_eq!(test["command"], TEST_COMMAND);
    assert_eq!(test["exit_code"], 0);
    assert_eq!(test["timed_out"], false);

    let end = &events[events.len() - 1];
    assert_eq!(end["status"], "passed");
    assert_eq!(end["passed"], true);
    assert_eq!(end["exit_reason"], "completed");
    assert_eq!(row["status"], "passed");
}

#[test]
fn concurrent_tasks_keep_their_own_histories() {
    let w = World::new();
    let ids = ["alpha", "beta", "gamma"];
    // Each reply waits a little, so the three conversations interleave.
    let script = |id: &str| -> Vec<Reply> {
        let delayed = |reply: Reply| Reply::Delay(Duration::from_millis(50), Box::new(reply));
        let mut replies: Vec<Reply> = (1..=3)
            .map(|n| {
                let call_id = format!("{id}-{n}");
                let command = format!("echo {id} {n}");
                delayed(tool_calls_reply(&[(&call_id, &command)], 10, n))
            })
            .collect();
        replies.push(delayed(text_reply(&format!("{id} done"), "stop", 10, 9)));
        replies
    };
    let scripts: Vec<(&str, Vec<Reply>)> = ids.iter().map(|id| (*id, script(id))).collect();
    let replies: HashMap<&str, Vec<Reply>> = scripts.iter().cloned().collect();
    let server = per_task_server(scripts);
    let run = run_tasks(&w, &ids, &server, &["-j", "3"]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);

    for id in ids {
        let requests = requests_of(&server, id);
        assert_eq!(requests.len(), 4, "{id}");
        assert_history_grows(&requests, &replies[id]);
        // Nothing of another task leaked into this conversation.
        for request in &requests {
            for message in messages(request) {
                if let Some(calls) = message["tool_calls"].as_array() {
                    for call in calls {
                        let call_id = call["id"].as_str().expect("id");
                        assert!(call_id.starts_with(&format!("{id}-")), "{id}: {call_id}");
                    }
                }
                if message["role"] == "tool" {
                    let text = message["content"].as_str().expect("content");
                    assert!(text.starts_with(&format!("{id} ")), "{id}: {text}");
                }
            }
        }
        assert_eq!(
            answer(&requests[3], &format!("{id}-3")),
            format!("{id} 3\n[exit code: 0]")
        );
        let row = run.row(id);
        assert_eq!(row["exit_reason"], "completed");
        assert_eq!(row["turns"], "4");
        assert_eq!(row["tool_calls"], "3");
        assert_eq!(row["completion_tokens"], "15");
        let logged = run
            .events(id, "message")
            .iter()
            .filter(|e| e["message"]["role"] == "tool")
            .count();
        assert_eq!(logged, 3, "{id}");
    }
}
