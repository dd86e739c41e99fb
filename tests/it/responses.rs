//! `--provider openai-responses` against the strict scripted Responses
//! server (support/responses_server.rs): a multi-turn task passes, its
//! reasoning shows in `show` and the transcript, and it replays; the length,
//! incomplete and context-overflow exits; usage summed. The server's own
//! rules are tested by sending it wrong requests straight. Last, the
//! reasoning fields of Chat Completions servers go back unchanged to a
//! server that requires them (docs/trajectory.md, "Reasoning").

use serde_json::{Value, json};

use crate::support::harness::{Fixture, f64_of, onebash_ok, path_arg, task};
use crate::support::responses_server::{self, Step, check, post, summary};
use crate::support::server::{Reply, Request, ScriptedServer, text_reply};

fn calls(commands: &[&str]) -> Step {
    Step::Calls(commands.iter().map(|c| (*c).to_owned()).collect())
}

fn plan(steps: &[(&str, Vec<Step>)]) -> Vec<(String, Vec<Step>)> {
    steps
        .iter()
        .map(|(id, steps)| (format!("Problem of task {id}."), steps.clone()))
        .collect()
}

const RESPONSES: &[&str] = &["--provider", "openai-responses"];

#[test]
fn a_multi_turn_task_passes_against_the_strict_server_shows_and_replays() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("value.txt", "1\n")]);
    let tasks = fixture.tasks(&[task(
        "fix",
        &repo,
        &sha,
        "test \"$(cat value.txt)\" = 2",
        json!({}),
    )]);
    let server = responses_server::start(plan(&[(
        "fix",
        vec![
            calls(&["cat value.txt"]),
            calls(&["echo 2 > value.txt", "cat value.txt"]),
            Step::Text("Fixed.".to_owned()),
        ],
    )]));
    let mut args = RESPONSES.to_vec();
    args.extend(["--reasoning-effort", "high"]);
    let run = fixture.run_scripted(&tasks, &server, &args);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let row = run.row("fix");
    assert_eq!(
        (row["status"].as_str(), row["exit_reason"].as_str()),
        ("passed", "completed"),
        "{row:?}"
    );
    assert_eq!(
        (row["turns"].as_str(), row["tool_calls"].as_str()),
        ("3", "3")
    );

    // Every request keeps the rules, and says what onebash means it to.
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    for (place, request) in requests.iter().enumerate() {
        assert_eq!(request.path, "/v1/responses");
        assert_eq!(check(&request.body), Ok(place));
        assert_eq!(request.body["reasoning"], json!({"effort": "high"}));
        assert!(
            request.body["instructions"]
                .as_str()
                .is_some_and(|s| !s.is_empty())
        );
        assert!(request.body.get("previous_response_id").is_none());
    }
    // The last request holds, in order, each answer's items and each
    // call's output, paired by call_id.
    let kinds: Vec<String> = requests[2].body["input"]
        .as_array()
        .expect("input")
        .iter()
        .map(|item| {
            let kind = item["type"]
                .as_str()
                .or(item["role"].as_str())
                .unwrap_or("?");
            match item["call_id"].as_str() {
                Some(id) => format!("{kind} {id}"),
                None => kind.to_owned(),
            }
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "user",
            "reasoning",
            "function_call call_0_0",
            "function_call_output call_0_0",
            "reasoning",
            "function_call call_1_0",
            "function_call call_1_1",
            "function_call_output call_1_0",
            "function_call_output call_1_1",
        ]
    );

    // Usage is summed over the three calls, with its details.
    let end = &run.events("fix", "agent_end")[0];
    let expected = (0..3).fold((0, 0, 0, 0), |sum, place| {
        let usage = responses_server::usage(place);
        let get = |pointer: &str| {
            usage
                .pointer(pointer)
                .and_then(Value::as_u64)
                .expect("count")
        };
        (
            sum.0 + get("/input_tokens"),
            sum.1 + get("/input_tokens_details/cached_tokens"),
            sum.2 + get("/output_tokens"),
            sum.3 + get("/output_tokens_details/reasoning_tokens"),
        )
    });
    assert_eq!(expected, (6000, 2400, 150, 90));
    let usage = &end["usage"];
    assert_eq!(
        (
            usage["prompt_tokens"].as_u64(),
            usage["cached_tokens"].as_u64(),
            usage["completion_tokens"].as_u64(),
            usage["reasoning_tokens"].as_u64(),
            usage["total_tokens"].as_u64(),
        ),
        (Some(6000), Some(2400), Some(150), Some(90), Some(6150))
    );
    assert_eq!(f64_of(&row, "total_tokens"), 6150.0);
    // The trajectory records each answer's items as the server sent them.
    let answers: Vec<Value> = run
        .events("fix", "message")
        .into_iter()
        .filter(|e| e["message"]["role"] == "assistant")
        .collect();
    assert_eq!(answers.len(), 3);
    assert_eq!(answers[0]["message"]["output"][0]["id"], "rs_0");
    assert_eq!(run.events("fix", "system").len(), 1);

    // `show` folds the reasoning summaries; the transcript puts them in
    // <details>.
    let shown = onebash_ok(&["show", path_arg(&run.out), "fix"]);
    assert!(
        shown.contains(&format!("reasoning (1 line):\n    {}", summary(0))),
        "{shown}"
    );
    assert!(shown.contains("model: Fixed."), "{shown}");
    onebash_ok(&["report", path_arg(&run.out), "--format", "html"]);
    let page = std::fs::read_to_string(run.out.join("transcripts").join("fix.epoch-1.html"))
        .expect("the transcript");
    assert!(
        page.contains(&format!(
            "<details class=\"reasoning\"><summary>reasoning (1 line)</summary><pre>{}</pre></details>",
            summary(2)
        )),
        "{page}"
    );

    // The run replays with the server gone.
    drop(server);
    let replay_model = format!("replay:{}", run.out.display());
    let replayed = fixture.run_into(
        &fixture.path("replayed"),
        &tasks,
        &["--model", &replay_model],
        &[],
    );
    assert_eq!(replayed.code, 0, "stderr:\n{}", replayed.stderr);
    let again = replayed.row("fix");
    for column in [
        "status",
        "exit_reason",
        "turns",
        "tool_calls",
        "total_tokens",
    ] {
        assert_eq!(again[column], row[column], "{column}");
    }
    assert_eq!(again["replay_divergences"], "0");
}

#[test]
fn length_incomplete_and_context_overflow_end_as_in_chat_completions() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("value.txt", "1\n")]);
    let tasks = fixture.tasks(&[
        task("long", &repo, &sha, "true", json!({})),
        task("filtered", &repo, &sha, "true", json!({})),
        task("big", &repo, &sha, "true", json!({})),
    ]);
    let server = responses_server::start(plan(&[
        (
            "long",
            vec![
                calls(&["true"]),
                Step::Incomplete("max_output_tokens".to_owned()),
            ],
        ),
        (
            "filtered",
            vec![Step::Incomplete("content_filter".to_owned())],
        ),
        ("big", vec![calls(&["true"]), Step::Overflow]),
    ]));
    let run = fixture.run_scripted(&tasks, &server, RESPONSES);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    for (id, exit_reason, total_tokens) in [
        ("long", "length", "3100"),
        ("filtered", "completed", "1050"),
        ("big", "context_overflow", "1050"),
    ] {
        let row = run.row(id);
        assert_eq!(row["exit_reason"], exit_reason, "{id}: {row:?}");
        assert_eq!(row["total_tokens"], total_tokens, "{id}");
    }
    let finish: Vec<Value> = run
        .events("long", "model_call")
        .iter()
        .map(|e| e["finish_reason"].clone())
        .collect();
    assert_eq!(finish, [json!("completed"), json!("max_output_tokens")]);
    // The overflow is one call: it is not retried.
    let big = server
        .requests()
        .iter()
        .filter(|r| r.raw_body.contains("Problem of task big."))
        .count();
    assert_eq!(big, 2);
}

/// The input of a correct request after `answers` (each the output of one
/// response, ids and all), with each call answered.
fn next_input(answers: &[&Value]) -> Vec<Value> {
    let mut input = vec![json!({"role": "user", "content": "P."})];
    for output in answers {
        let items = output.as_array().expect("output");
        let mut results = Vec::new();
        for item in items {
            let mut item = item.clone();
            item.as_object_mut().expect("an item").remove("id");
            if item["type"] == "function_call" {
                results.push(json!({"type": "function_call_output",
                    "call_id": item["call_id"], "output": "ok"}));
            }
            input.push(item);
        }
        input.extend(results);
    }
    input
}

fn request(input: Vec<Value>) -> Value {
    json!({
        "model": "m", "store": false, "include": ["reasoning.encrypted_content"],
        "instructions": "be brief",
        "tools": [{"type": "function", "name": "bash", "parameters": {"type": "object"}}],
        "input": input,
    })
}

/// Each rule of the strict server, broken once in a request sent straight
/// to it, is refused with a 400 that names it; the same request kept
/// whole is answered.
#[test]
fn the_strict_server_refuses_each_broken_rule() {
    let server = responses_server::start(vec![(
        "P.".to_owned(),
        vec![
            calls(&["ls", "pwd"]),
            calls(&["true"]),
            Step::Text("ok".into()),
        ],
    )]);
    let path = "/v1/responses";
    let ask = |body: &Value| post(&server, path, body);
    let (status, first) = ask(&request(next_input(&[])));
    assert_eq!(status, 200, "{first}");
    let (status, second) = ask(&request(next_input(&[&first["output"]])));
    assert_eq!(status, 200, "{second}");
    let whole = next_input(&[&first["output"], &second["output"]]);
    let (status, third) = ask(&request(whole.clone()));
    assert_eq!(status, 200, "{third}");
    assert_eq!(third["output"][1]["content"][0]["text"], "ok");

    let broken = |change: &dyn Fn(&mut Value)| {
        let mut body = request(whole.clone());
        change(&mut body);
        body
    };
    let broken_input = |change: &dyn Fn(&mut Vec<Value>)| {
        let mut items = whole.clone();
        change(&mut items);
        request(items)
    };
    // whole: user, rs0, fc 0_0, fc 0_1, out 0_0, out 0_1, rs1, fc 1_0, out 1_0
    let cases: Vec<(&str, Value)> = vec![
        (
            "`store` must be false",
            broken(&|b| b["store"] = json!(true)),
        ),
        (
            "`store` must be false",
            broken(&|b| {
                b.as_object_mut().expect("body").remove("store");
            }),
        ),
        ("`include` must hold", broken(&|b| b["include"] = json!([]))),
        (
            "Previous response with id",
            broken(&|b| b["previous_response_id"] = json!("resp_1")),
        ),
        (
            "tools[0].name",
            broken(&|b| {
                b["tools"] = json!([{"type": "function", "function": {"name": "bash"}}]);
            }),
        ),
        (
            "No tool output found for function call call_0_1",
            broken_input(&|items| {
                items.remove(5);
            }),
        ),
        (
            "No tool call found for function call output with call_id call_9",
            broken_input(&|items| {
                items.push(
                    json!({"type": "function_call_output", "call_id": "call_9", "output": "x"}),
                );
            }),
        ),
        (
            "could not be verified",
            broken_input(&|items| {
                let sealed = items[6]["encrypted_content"]
                    .as_str()
                    .expect("sealed")
                    .to_owned();
                items[6]["encrypted_content"] = json!(format!("{sealed}0"));
            }),
        ),
        (
            "could not be verified",
            broken_input(&|items| {
                items[1]
                    .as_object_mut()
                    .expect("item")
                    .remove("encrypted_content");
            }),
        ),
        (
            "without its required 'reasoning' item",
            broken_input(&|items| {
                items.remove(6);
            }),
        ),
        (
            "No function_call item with call_id call_0_1",
            broken_input(&|items| {
                items.remove(3);
                items.remove(4);
            }),
        ),
        // The first turn dropped whole, and the two turns swapped.
        (
            "Reasoning item 1 of this conversation is missing or out of order",
            broken_input(&|items| {
                let mut kept = vec![items[0].clone()];
                kept.extend_from_slice(&items[6..]);
                *items = kept;
            }),
        ),
        (
            "Reasoning item 1 of this conversation is missing or out of order",
            broken_input(&|items| {
                let mut swapped = vec![items[0].clone()];
                swapped.extend_from_slice(&items[6..]);
                swapped.extend_from_slice(&items[1..6]);
                *items = swapped;
            }),
        ),
        (
            "Item with id \"rs_1\" not found",
            broken_input(&|items| {
                items[6]["id"] = json!("rs_1");
            }),
        ),
    ];
    for (expected, body) in cases {
        let (status, answer) = ask(&body);
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(status, 400, "{expected}: {answer}");
        assert!(message.contains(expected), "{expected}: {message}");
    }
}

/// The reasoning fields a Chat Completions server sent with a tool call.
fn reasoning_fields(turn: usize) -> Value {
    json!({
        "reasoning_content": format!("Thinking {turn}."),
        "reasoning": format!("Thinking {turn}."),
        "reasoning_details": [{"type": "reasoning.text", "text": format!("Thinking {turn}."),
                               "signature": format!("sig-{turn}"), "format": "anthropic-claude-v1",
                               "index": 0}],
    })
}

/// An assistant message calling `bash` once, with the reasoning fields of
/// `turn` when `reasoning` says so.
fn tool_call_message(turn: usize, reasoning: bool) -> Value {
    let mut message = json!({"role": "assistant", "content": null, "tool_calls": [{
        "id": format!("call-{turn}"), "type": "function",
        "function": {"name": "bash", "arguments": json!({"command": "true"}).to_string()},
    }]});
    if let (true, Some(message), Some(fields)) = (
        reasoning,
        message.as_object_mut(),
        reasoning_fields(turn).as_object(),
    ) {
        message.extend(fields.clone());
    }
    message
}

/// A Chat Completions server with DeepSeek's and OpenRouter's rules: every
/// assistant message it sent with a tool call must come back with its
/// `reasoning_content` and its `reasoning_details` unchanged, or it answers
/// 400 in DeepSeek's words.
fn reasoning_server(request: &Request) -> Reply {
    let messages = request.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let answers: Vec<&Value> = messages
        .iter()
        .filter(|m| m["role"] == "assistant")
        .collect();
    for (turn, answer) in answers.iter().enumerate() {
        let sent = reasoning_fields(turn);
        if answer["reasoning_content"] != sent["reasoning_content"]
            || answer["reasoning_details"] != sent["reasoning_details"]
        {
            let body = json!({"error": {"message": "The reasoning_content in the thinking mode must be passed back to the API.", "type": "invalid_request_error"}});
            return Reply::Status(400, body.to_string());
        }
    }
    let turn = answers.len();
    if turn == 2 {
        return text_reply("Done.", "stop", 10, 2);
    }
    let message = tool_call_message(turn, true);
    Reply::Json(json!({
        "id": "chatcmpl-r", "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
                  "completion_tokens_details": {"reasoning_tokens": 3}},
    }))
}

#[test]
fn chat_completions_reasoning_fields_go_back_unchanged_and_show_folded() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("value.txt", "1\n")]);
    let tasks = fixture.tasks(&[task("think", &repo, &sha, "true", json!({}))]);
    let server = ScriptedServer::start_with(reasoning_server);
    let run = fixture.run_scripted(&tasks, &server, &["--reasoning-effort", "low"]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let row = run.row("think");
    assert_eq!(row["exit_reason"], "completed", "{row:?}");
    assert_eq!(row["turns"], "3");
    // The last request returned both answers' fields as they came.
    let last = server.requests().pop().expect("a request");
    assert_eq!(last.body["reasoning_effort"], "low");
    let sent: Vec<&Value> = last.body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "assistant")
        .collect();
    for (turn, message) in sent.iter().enumerate() {
        assert_eq!(message["reasoning"], reasoning_fields(turn)["reasoning"]);
        assert_eq!(
            message["reasoning_details"],
            reasoning_fields(turn)["reasoning_details"]
        );
    }
    // The trajectory keeps them; `show` prints each once, folded.
    let first = &run.events("think", "message")[2]["message"];
    assert_eq!(first["reasoning_details"][0]["signature"], "sig-0");
    let shown = onebash_ok(&["show", path_arg(&run.out), "think"]);
    assert_eq!(shown.matches("Thinking 0.").count(), 1, "{shown}");
    assert!(
        shown.contains("reasoning (1 line):\n    Thinking 1."),
        "{shown}"
    );
}

/// The rule itself: the server refuses a history whose reasoning was
/// dropped, so the test above would see it.
#[test]
fn the_reasoning_server_refuses_a_history_without_its_reasoning() {
    let kept = tool_call_message(0, true);
    let mut altered = kept.clone();
    altered["reasoning_details"][0]["signature"] = json!("forged");
    let dropped = tool_call_message(0, false);
    let server = ScriptedServer::start_with(reasoning_server);
    for (answer, status) in [(kept, 200), (altered, 400), (dropped, 400)] {
        let body = json!({"messages": [
            {"role": "user", "content": "P."}, answer,
            {"role": "tool", "tool_call_id": "call-0", "content": "ok"}]});
        let (got, reply) = post(&server, "/v1/chat/completions", &body);
        assert_eq!(got, status, "{reply}");
    }
}
