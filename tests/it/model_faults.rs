//! Model APIs that misbehave, for both wire protocols: the real binary
//! against a scripted server on 127.0.0.1 that fails requests with 500 (the
//! provider's own, word for word two and three times in a row), 502, 429
//! and `Retry-After`, dropped connections, hangs past the request timeout
//! and garbled bodies; client errors (401, 400, 403, 404) that must
//! not be retried; context overflows in the words of OpenAI, vLLM,
//! llama.cpp and Anthropic; the Anthropic Messages protocol itself; request
//! settings and costs.
//!
//! It does not cover the loop's handling of tool calls over the OpenAI
//! protocol in detail (agent_protocol.rs) nor the stages around the agent
//! (pipeline.rs).

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::harness::{RunOutput, f64_of};
use crate::support::server::{Reply, Request, ScriptedServer};
use crate::support::sync::{HANG_GUARD, Latch, eventually};
use crate::support::world::{FIX, World};

// ---------------------------------------------------------------------------
// The two protocols, as a scripted model speaks them.
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proto {
    OpenAi,
    Anthropic,
}

impl Proto {
    /// The `--provider` value.
    fn flag(self) -> &'static str {
        match self {
            Proto::OpenAi => "openai",
            Proto::Anthropic => "anthropic",
        }
    }

    /// A model name with no built-in price.
    fn model_name(self) -> &'static str {
        match self {
            Proto::OpenAi => "scripted-gpt",
            Proto::Anthropic => "scripted-claude",
        }
    }

    /// The variable the key is read from by default, and the key the tests set.
    fn key(self) -> (&'static str, &'static str) {
        match self {
            Proto::OpenAi => ("OPENAI_API_KEY", "sk-test-openai-0123"),
            Proto::Anthropic => ("ANTHROPIC_API_KEY", "sk-ant-test-4567"),
        }
    }

    /// Where every request must go.
    fn path(self) -> &'static str {
        match self {
            Proto::OpenAi => "/v1/chat/completions",
            Proto::Anthropic => "/v1/messages",
        }
    }

    /// The server's answer to `step`, with `tokens` as its usage.
    fn answer(self, step: &Step, tokens: Tokens) -> Reply {
        match self {
            Proto::OpenAi => openai_answer(step, tokens),
            Proto::Anthropic => anthropic_answer(step, tokens),
        }
    }

    /// The provider's own answer to a request it failed on its side, word
    /// for word as each sends it (tests/fixtures/model-errors.json): OpenAI's
    /// `server_error`, Anthropic's `api_error` with a fresh request id.
    fn server_error(self) -> Reply {
        match self {
            Proto::OpenAi => self.error(
                500,
                "server_error",
                "The server had an error while processing your request. Sorry about that!",
            ),
            Proto::Anthropic => {
                static REQUESTS: std::sync::atomic::AtomicU64 =
                    std::sync::atomic::AtomicU64::new(0);
                let n = REQUESTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let body = json!({
                    "type": "error",
                    "error": {"type": "api_error", "message": "Internal server error"},
                    "request_id": format!("req_011Ca5jqh8Fqjcq5BKf4t{n:04}"),
                });
                Reply::Status(500, body.to_string())
            }
        }
    }

    /// An error body in the protocol's shape; `kind` is the error type.
    fn error(self, status: u16, kind: &str, message: &str) -> Reply {
        let body = match self {
            Proto::OpenAi => {
                json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
            }
            Proto::Anthropic => {
                json!({"type": "error", "error": {"type": kind, "message": message}})
            }
        };
        Reply::Status(status, body.to_string())
    }
}

/// What the scripted model does on one turn.
#[derive(Debug, Clone)]
enum Step {
    /// One `bash` tool call per (id, command), in one answer.
    Bash(Vec<(String, String)>),
    /// A final answer: text, no tool call.
    Say(String),
    /// Text cut by the output limit, no tool call.
    Cut(String),
}

fn bash(calls: &[(&str, &str)]) -> Step {
    Step::Bash(
        calls
            .iter()
            .map(|(id, command)| ((*id).to_owned(), (*command).to_owned()))
            .collect(),
    )
}

fn say(text: &str) -> Step {
    Step::Say(text.to_owned())
}

/// The usage of one answer. `input` excludes cache reads and writes, as
/// Anthropic counts it; OpenAI's `prompt_tokens` is [`Tokens::prompt`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Tokens {
    input: u64,
    output: u64,
    cache_read: u64,
    cache_write: u64,
}

fn tokens(input: u64, output: u64) -> Tokens {
    Tokens {
        input,
        output,
        ..Tokens::default()
    }
}

impl Tokens {
    /// Every input token: what onebash reports as `prompt_tokens`.
    fn prompt(self) -> u64 {
        self.input + self.cache_read + self.cache_write
    }
}

fn openai_answer(step: &Step, tokens: Tokens) -> Reply {
    assert_eq!(tokens.cache_write, 0, "OpenAI reports no cache writes");
    let (message, finish_reason) = match step {
        Step::Bash(calls) => {
            let calls: Vec<Value> = calls
                .iter()
                .map(|(id, command)| {
                    json!({"id": id, "type": "function", "function": {
                        "name": "bash",
                        "arguments": json!({"command": command}).to_string(),
                    }})
                })
                .collect();
            (
                json!({"role": "assistant", "content": null, "tool_calls": calls}),
                "tool_calls",
            )
        }
        Step::Say(text) => (json!({"role": "assistant", "content": text}), "stop"),
        Step::Cut(text) => (json!({"role": "assistant", "content": text}), "length"),
    };
    Reply::Json(json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 1_700_000_000u64,
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish_reason}],
        "usage": {
            "prompt_tokens": tokens.prompt(),
            "completion_tokens": tokens.output,
            "total_tokens": tokens.prompt() + tokens.output,
            "prompt_tokens_details": {"cached_tokens": tokens.cache_read},
        },
    }))
}

/// The content blocks of an Anthropic answer to `step`.
fn anthropic_content(step: &Step) -> Value {
    match step {
        Step::Bash(calls) => Value::Array(
            calls
                .iter()
                .map(|(id, command)| {
                    json!({"type": "tool_use", "id": id, "name": "bash", "input": {"command": command}})
                })
                .collect(),
        ),
        Step::Say(text) | Step::Cut(text) => json!([{"type": "text", "text": text}]),
    }
}

fn anthropic_answer(step: &Step, tokens: Tokens) -> Reply {
    let stop_reason = match step {
        Step::Bash(_) => "tool_use",
        Step::Say(_) => "end_turn",
        Step::Cut(_) => "max_tokens",
    };
    anthropic_message(anthropic_content(step), stop_reason, tokens)
}

/// A whole Messages API answer around `content`.
fn anthropic_message(content: Value, stop_reason: &str, tokens: Tokens) -> Reply {
    Reply::Json(json!({
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": "scripted",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": {
            "input_tokens": tokens.input,
            "output_tokens": tokens.output,
            "cache_read_input_tokens": tokens.cache_read,
            "cache_creation_input_tokens": tokens.cache_write,
        },
    }))
}

// ---------------------------------------------------------------------------
// The scripted model: which task and turn a request is, and when it came.
// ---------------------------------------------------------------------------

/// One request as the scripted model saw it.
#[derive(Debug, Clone)]
struct Seen {
    task: String,
    /// Answers the model already gave in this conversation (0 = first call).
    turn: usize,
    /// Requests for this (task, turn) before this one: 0 = first try.
    attempt: usize,
    at: Instant,
}

/// A scripted server that answers each request from (task, turn, attempt).
struct Model {
    proto: Proto,
    server: ScriptedServer,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Model {
    fn start(proto: Proto, answer: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Model {
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let log = Arc::clone(&seen);
        let server = ScriptedServer::start_with(move |request| {
            let at = Instant::now();
            let Some(task) = task_of(request) else {
                return proto.error(400, "invalid_request_error", "no task in the request");
            };
            let turn = messages(request)
                .iter()
                .filter(|m| m["role"] == "assistant")
                .count();
            let seen = {
                let mut log = log.lock().unwrap_or_else(PoisonError::into_inner);
                let attempt = log
                    .iter()
                    .filter(|s| s.task == task && s.turn == turn)
                    .count();
                let seen = Seen {
                    task,
                    turn,
                    attempt,
                    at,
                };
                log.push(seen.clone());
                seen
            };
            answer(&seen)
        });
        Model {
            proto,
            server,
            seen,
        }
    }

    /// A model that follows `scripts[task][turn]` and answers a turn past the
    /// end of a script with a 400, which is never retried: a test that gets
    /// there fails at once rather than after the backoff.
    fn scripted(proto: Proto, scripts: Vec<(&str, Vec<Reply>)>) -> Model {
        let scripts: HashMap<String, Vec<Reply>> = scripts
            .into_iter()
            .map(|(id, replies)| (id.to_owned(), replies))
            .collect();
        Model::start(proto, move |seen| {
            scripts
                .get(&seen.task)
                .and_then(|replies| replies.get(seen.turn))
                .cloned()
                .unwrap_or_else(|| proto.error(400, "invalid_request_error", "script exhausted"))
        })
    }

    /// The base URL as a user would give it: with `/v1` for OpenAI, the bare
    /// host for Anthropic.
    fn base_url(&self) -> String {
        match self.proto {
            Proto::OpenAi => self.server.base_url(),
            Proto::Anthropic => format!("http://{}", self.server.addr()),
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The requests of one task, in arrival order.
    fn requests_of(&self, id: &str) -> Vec<Request> {
        self.server
            .requests()
            .into_iter()
            .filter(|r| task_of(r).as_deref() == Some(id))
            .collect()
    }
}

/// The messages of a request (both protocols call them `messages`).
fn messages(request: &Request) -> Vec<Value> {
    request.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("no messages in request: {}", request.raw_body))
}

/// The text of a content or system field: a string, or (Anthropic with
/// prompt caching) one text block carrying the cache breakpoint.
fn text_of(value: &Value) -> Option<&str> {
    value
        .as_str()
        .or_else(|| match value.as_array()?.as_slice() {
            [block] if block["type"] == "text" => block["text"].as_str(),
            _ => None,
        })
}

/// The task a request belongs to, read from its first user message with a
/// text content (`Problem of task ID.`, see `task()` in harness.rs).
fn task_of(request: &Request) -> Option<String> {
    let text = request.body["messages"]
        .as_array()?
        .iter()
        .filter(|m| m["role"] == "user")
        .find_map(|m| text_of(&m["content"]))?;
    let start = text.find("Problem of task ")? + "Problem of task ".len();
    let id: String = text[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .collect();
    Some(id)
}

// ---------------------------------------------------------------------------
// Waiting on events: no test here relies on how fast the machine is.
// ---------------------------------------------------------------------------

/// Whether the trajectory of `task` (epoch 1) in the run folder `out` holds
/// an event with this text, e.g. `"event":"model_retry"`.
fn logged(out: &std::path::Path, task: &str, text: &str) -> bool {
    std::fs::read_to_string(
        out.join("tasks")
            .join(task)
            .join("epoch-1/trajectory.jsonl"),
    )
    .is_ok_and(|events| events.contains(text))
}

// ---------------------------------------------------------------------------
// The world a test runs in, and readers of what a run wrote.
// ---------------------------------------------------------------------------

/// Runs the tasks `ids` of `w` into the run folder `out` against `model`,
/// with the provider, its key, and (unless `args` gives them) the model
/// name and base URL.
fn run_against(w: &World, out: &str, ids: &[&str], model: &Model, args: &[&str]) -> RunOutput {
    let base_url = model.base_url();
    let mut all = vec!["--provider", model.proto.flag()];
    if !args.contains(&"--model") {
        all.extend(["--model", model.proto.model_name()]);
    }
    if !args.contains(&"--base-url") {
        all.extend(["--base-url", &base_url]);
    }
    all.extend_from_slice(args);
    w.run(out, ids, &all, &[model.proto.key()])
}

/// Every model_retry event of a run, over all tasks.
fn retry_events(run: &RunOutput) -> Vec<Value> {
    run.rows()
        .iter()
        .flat_map(|row| run.events(&row["task_id"], "model_retry"))
        .collect()
}

// ---------------------------------------------------------------------------
// What no request may break, whatever failed before it.
// ---------------------------------------------------------------------------

/// Checks every request the server received: where it went, its key, and
/// that the conversation it carries is well formed for the protocol: every
/// tool call of an assistant message answered right after it, in order, and
/// nothing else answered.
fn assert_no_protocol_violation(proto: Proto, requests: &[Request]) {
    assert!(!requests.is_empty());
    let (_, key) = proto.key();
    for (n, request) in requests.iter().enumerate() {
        let at = format!("request {n}: {}", request.raw_body);
        assert_eq!(request.method, "POST", "{at}");
        assert_eq!(request.path, proto.path(), "{at}");
        match proto {
            Proto::OpenAi => {
                assert_eq!(
                    request.header("authorization"),
                    Some(format!("Bearer {key}").as_str()),
                    "{:?}",
                    request.headers
                );
                assert_openai_conversation(&messages(request), &at);
            }
            Proto::Anthropic => {
                assert_eq!(
                    request.header("x-api-key"),
                    Some(key),
                    "{:?}",
                    request.headers
                );
                assert_eq!(
                    request.header("anthropic-version"),
                    Some("2023-06-01"),
                    "{:?}",
                    request.headers
                );
                assert!(
                    text_of(&request.body["system"]).is_some_and(|s| !s.is_empty()),
                    "{at}"
                );
                assert_anthropic_conversation(&messages(request), &at);
            }
        }
    }
}

fn assert_openai_conversation(messages: &[Value], at: &str) {
    assert!(messages.len() >= 2, "{at}");
    assert_eq!(messages[0]["role"], "system", "{at}");
    assert_eq!(messages[1]["role"], "user", "{at}");
    let mut i = 2;
    while i < messages.len() {
        // Past the first two, only an assistant message may start a turn: a
        // `tool` message here answers nothing.
        assert_eq!(messages[i]["role"], "assistant", "message {i}: {at}");
        let ids: Vec<&str> = messages[i]["tool_calls"]
            .as_array()
            .map(|calls| calls.iter().filter_map(|c| c["id"].as_str()).collect())
            .unwrap_or_default();
        assert!(!ids.is_empty(), "a final answer was followed up: {at}");
        for (k, id) in ids.iter().enumerate() {
            let answer = messages
                .get(i + 1 + k)
                .unwrap_or_else(|| panic!("tool call {id} is not answered: {at}"));
            assert_eq!(answer["role"], "tool", "{at}");
            assert_eq!(answer["tool_call_id"], *id, "{at}");
            assert!(answer["content"].is_string(), "{at}");
        }
        i += 1 + ids.len();
    }
    assert_ne!(messages[messages.len() - 1]["role"], "assistant", "{at}");
}

fn assert_anthropic_conversation(messages: &[Value], at: &str) {
    assert!(!messages.is_empty(), "{at}");
    assert!(text_of(&messages[0]["content"]).is_some(), "{at}");
    for (i, message) in messages.iter().enumerate() {
        let role = if i.is_multiple_of(2) {
            "user"
        } else {
            "assistant"
        };
        assert_eq!(message["role"], role, "message {i}: {at}");
    }
    assert_eq!(
        messages.len() % 2,
        1,
        "the last message is not the user's: {at}"
    );
    for pair in messages[1..].chunks(2) {
        let ids: Vec<&str> = pair[0]["content"]
            .as_array()
            .expect("assistant content is a list")
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .filter_map(|b| b["id"].as_str())
            .collect();
        assert!(!ids.is_empty(), "a final answer was followed up: {at}");
        let blocks = pair[1]["content"]
            .as_array()
            .unwrap_or_else(|| panic!("tool results are not a list of blocks: {at}"));
        let answered: Vec<&str> = blocks
            .iter()
            .map(|b| {
                assert_eq!(b["type"], "tool_result", "{at}");
                assert!(b["content"].is_string() || b["content"].is_array(), "{at}");
                b["tool_use_id"].as_str().expect("tool_use_id")
            })
            .collect();
        assert_eq!(answered, ids, "{at}");
    }
}

// ---------------------------------------------------------------------------
// A quarter of all requests fail: every verdict is still right.
// ---------------------------------------------------------------------------

/// The ways a request fails in the big run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Fault {
    Http500,
    Http502,
    RateLimited,
    Dropped,
    /// An answer held until the run is over: the request timeout ends it.
    Hang,
    Garbled,
}

const FAULTS: [Fault; 6] = [
    Fault::Http500,
    Fault::Http502,
    Fault::RateLimited,
    Fault::Dropped,
    Fault::Hang,
    Fault::Garbled,
];

impl Fault {
    /// What the server does; `late` is the good answer a hang sends too late
    /// (the handler holds it until the run is over).
    fn reply(self, proto: Proto, late: Reply) -> Reply {
        match self {
            Fault::Http500 => proto.server_error(),
            Fault::Http502 => Reply::StatusWithHeaders(
                502,
                vec![("Content-Type".into(), "text/html".into())],
                "<html><body><h1>502 Bad Gateway</h1></body></html>".into(),
            ),
            Fault::RateLimited => rate_limited(proto, "1"),
            Fault::Dropped => Reply::Drop,
            Fault::Hang => late,
            Fault::Garbled => Reply::Raw("{not json".into()),
        }
    }

    /// The HTTP status the retry is recorded with.
    fn status(self) -> Option<u16> {
        match self {
            Fault::Http500 => Some(500),
            Fault::Http502 => Some(502),
            Fault::RateLimited => Some(429),
            Fault::Dropped | Fault::Hang | Fault::Garbled => None,
        }
    }

    /// What the recorded error says.
    fn says(self, proto: Proto) -> &'static str {
        match self {
            Fault::Http500 => match proto {
                Proto::OpenAi => "HTTP 500: The server had an error while processing your request.",
                Proto::Anthropic => "HTTP 500: Internal server error",
            },
            Fault::Http502 => "HTTP 502: <html><body><h1>502 Bad Gateway",
            Fault::RateLimited => "HTTP 429: Rate limit reached",
            Fault::Dropped => "failed to reach the model API",
            Fault::Hang => "timed out",
            Fault::Garbled => "not valid JSON",
        }
    }
}

/// SplitMix64: a fixed, well-spread hash, so the fault schedule is the
/// same on every run.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Whether try `attempt` of task `index`'s call `turn` fails, and how: about
/// one try in four all told, never the fourth try of a call.
fn fault_for(index: usize, turn: usize, attempt: usize) -> Option<Fault> {
    if attempt >= 3 {
        return None;
    }
    if let Some(times) = incident(index, turn) {
        return (attempt < times).then_some(Fault::Http500);
    }
    let h = mix(((index as u64) << 16) | ((turn as u64) << 8) | attempt as u64);
    h.is_multiple_of(5)
        .then(|| FAULTS[((h >> 8) % FAULTS.len() as u64) as usize])
}

/// How many tries in a row of task `index`'s call `turn` get the provider's
/// own 500, word for word, as real servers answer in an incident: 2 or 3,
/// for about one call in sixteen and every call whose first try the
/// schedule fails with a 500. Such repeats are load, not a refusal.
fn incident(index: usize, turn: usize) -> Option<usize> {
    let call = ((index as u64) << 16) | ((turn as u64) << 8);
    let first = mix(call);
    let h = mix(call | 0xff);
    let first_is_500 = first.is_multiple_of(5)
        && FAULTS[((first >> 8) % FAULTS.len() as u64) as usize] == Fault::Http500;
    (first_is_500 || h.is_multiple_of(16)).then(|| 2 + (h >> 8) as usize % 2)
}

const FAULT_TASKS: usize = 40;

fn fault_task_id(index: usize) -> String {
    format!("t{index:02}")
}

/// Even tasks are fixed by the agent; odd ones only look around.
fn solvable(index: usize) -> bool {
    index.is_multiple_of(2)
}

/// Task `index`'s answer on `turn` (0 or 1) and its usage. The second
/// answer reports cached input, and for Anthropic cache writes too.
fn fault_plan(proto: Proto, index: usize, turn: usize) -> (Step, Tokens) {
    let i = index as u64;
    match turn {
        0 if solvable(index) => (
            bash(&[
                (&format!("look-{index}"), "ls"),
                (&format!("fix-{index}"), FIX),
            ]),
            tokens(100 + i, 10 + i),
        ),
        0 => (
            bash(&[(&format!("look-{index}"), "echo looking")]),
            tokens(100 + i, 10 + i),
        ),
        _ => (
            say(if solvable(index) {
                "Fixed."
            } else {
                "I could not fix it."
            }),
            Tokens {
                input: 50 + i,
                output: 3,
                cache_read: 40,
                cache_write: if proto == Proto::Anthropic { 30 } else { 0 },
            },
        ),
    }
}

/// Every (task, turn, fault) the schedule will inject, in order.
fn planned_faults() -> Vec<(usize, usize, Fault)> {
    let mut faults = Vec::new();
    for index in 0..FAULT_TASKS {
        for turn in 0..2 {
            let mut attempt = 0;
            while let Some(fault) = fault_for(index, turn, attempt) {
                faults.push((index, turn, fault));
                attempt += 1;
            }
        }
    }
    faults
}

fn forty_tasks_get_their_verdicts_though_a_quarter_of_requests_fail(proto: Proto) {
    // The schedule itself: about a quarter of all requests fail, in every
    // way, some calls more than once in a row.
    let faults = planned_faults();
    let requests = FAULT_TASKS * 2 + faults.len();
    let share = faults.len() as f64 / requests as f64;
    assert!((0.2..=0.3).contains(&share), "{share}");
    for kind in FAULTS {
        assert!(faults.iter().any(|f| f.2 == kind), "{kind:?} never happens");
    }
    assert!(
        faults
            .windows(2)
            .any(|w| (w[0].0, w[0].1) == (w[1].0, w[1].1) && w[0].2 != w[1].2),
        "no call fails twice in different ways"
    );
    // The same 500 two and three times in a row to one call: the old rule
    // took two for a refusal and ended the task as api_error.
    let mut in_a_row: HashMap<(usize, usize), usize> = HashMap::new();
    for (index, turn, fault) in &faults {
        if *fault == Fault::Http500 {
            *in_a_row.entry((*index, *turn)).or_default() += 1;
        }
    }
    for times in [2, 3] {
        assert!(
            in_a_row.values().filter(|&&n| n == times).count() >= 2,
            "too few calls get the same 500 {times} times: {in_a_row:?}"
        );
    }

    let w = World::new();
    // A hung request is answered once the run is over: never in time,
    // however slow the machine.
    let run_over = Latch::new();
    let hung = run_over.clone();
    let model = Model::start(proto, move |seen| {
        let index: usize = seen.task[1..].parse().expect("task index");
        let (step, usage) = fault_plan(proto, index, seen.turn);
        match fault_for(index, seen.turn, seen.attempt) {
            None => proto.answer(&step, usage),
            Some(fault) => {
                if fault == Fault::Hang {
                    hung.wait();
                }
                // Were the late answer taken, its usage would show in the CSV.
                fault.reply(proto, proto.answer(&step, tokens(1_000_000, 1_000_000)))
            }
        }
    });
    let ids: Vec<String> = (0..FAULT_TASKS).map(fault_task_id).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let run = run_against(
        &w,
        "out",
        &ids,
        &model,
        &["-j", "8", "--retry-delay", "0.05", "--request-timeout", "2"],
    );
    run_over.open();
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(model.seen().len(), requests, "requests the server received");

    let rows = run.rows();
    assert_eq!(rows.len(), FAULT_TASKS);
    let mut total_retries = 0;
    for index in 0..FAULT_TASKS {
        let id = fault_task_id(index);
        let row = run.row(&id);
        let planned = if solvable(index) { "passed" } else { "failed" };
        assert_eq!(row["status"], planned, "{row:?}");
        assert_eq!(row["passed"], (planned == "passed").to_string(), "{row:?}");
        assert_eq!(row["exit_reason"], "completed", "{row:?}");
        assert_eq!(row["error"], "", "{row:?}");
        assert_eq!(row["turns"], "2", "{row:?}");
        let calls = if solvable(index) { 2 } else { 1 };
        assert_eq!(row["tool_calls"], calls.to_string(), "{row:?}");

        // Only the answers the client took count.
        let (_, first) = fault_plan(proto, index, 0);
        let (_, second) = fault_plan(proto, index, 1);
        let prompt = first.prompt() + second.prompt();
        let completion = first.output + second.output;
        assert_eq!(row["prompt_tokens"], prompt.to_string(), "{row:?}");
        assert_eq!(row["completion_tokens"], completion.to_string(), "{row:?}");
        assert_eq!(
            row["total_tokens"],
            (prompt + completion).to_string(),
            "{row:?}"
        );

        // Each fault is one retry, recorded with its status and what went
        // wrong, in order.
        let expected: Vec<(usize, Fault)> = faults
            .iter()
            .filter(|f| f.0 == index)
            .map(|f| (f.1 + 1, f.2))
            .collect();
        let events = run.events(&id, "model_retry");
        assert_eq!(events.len(), expected.len(), "{id}: {events:?}");
        for (event, (turn, fault)) in events.iter().zip(&expected) {
            assert_eq!(event["turn"], *turn, "{id}: {event}");
            assert_eq!(
                event["status"].as_u64(),
                fault.status().map(u64::from),
                "{id}: {event}"
            );
            let error = event["error"].as_str().expect("error");
            assert!(error.contains(fault.says(proto)), "{fault:?}: {event}");
            let wait = event["wait_s"].as_f64().expect("wait_s");
            if *fault == Fault::RateLimited {
                assert_eq!(wait, 1.0, "Retry-After: 1 is the wait: {event}");
            } else {
                assert!(wait <= 0.05 * 4.0 + 1e-9, "backoff from 0.05 s: {event}");
            }
        }
        let waited: f64 = events.iter().filter_map(|e| e["wait_s"].as_f64()).sum();
        assert!(
            (f64_of(&row, "retry_wait_seconds") - waited).abs() < 0.002,
            "{row:?} vs {waited}"
        );
        assert_eq!(row["model_retries"], expected.len().to_string(), "{row:?}");
        total_retries += expected.len();
    }
    assert!(total_retries > 0);
    assert_eq!(total_retries, faults.len());
    let retried: usize = rows
        .iter()
        .map(|r| r["model_retries"].parse::<usize>().expect("n"))
        .sum();
    assert_eq!(retried, retry_events(&run).len());

    assert_no_protocol_violation(proto, &model.server.requests());
}

#[test]
fn forty_openai_tasks_get_their_verdicts_though_a_quarter_of_requests_fail() {
    forty_tasks_get_their_verdicts_though_a_quarter_of_requests_fail(Proto::OpenAi);
}

#[test]
fn forty_anthropic_tasks_get_their_verdicts_though_a_quarter_of_requests_fail() {
    forty_tasks_get_their_verdicts_though_a_quarter_of_requests_fail(Proto::Anthropic);
}

// ---------------------------------------------------------------------------
// Client errors end their task at once; a context overflow still gets tests.
// ---------------------------------------------------------------------------

/// 401, 403, 404 and a 400 that is not an overflow, each as its provider
/// words it: one request, no retry, `api_error` with the status and the
/// message; the other task passes; the run exits 1.
fn client_errors_end_their_task_at_once_without_a_retry(proto: Proto) {
    let cases: [(&str, u16, &str, &str); 4] = match proto {
        Proto::OpenAi => [
            (
                "unauthorized",
                401,
                "invalid_request_error",
                "Incorrect API key provided: sk-wrong.",
            ),
            (
                "bad_request",
                400,
                "invalid_request_error",
                "Invalid value for 'temperature': must be between 0 and 2.",
            ),
            (
                "forbidden",
                403,
                "permission_denied",
                "You are not allowed to sample from this model.",
            ),
            (
                "not_found",
                404,
                "invalid_request_error",
                "The model `scripted-gpt` does not exist or you do not have access to it.",
            ),
        ],
        Proto::Anthropic => [
            (
                "unauthorized",
                401,
                "authentication_error",
                "invalid x-api-key",
            ),
            (
                "bad_request",
                400,
                "invalid_request_error",
                "messages.0.content: text content blocks must be non-empty",
            ),
            (
                "forbidden",
                403,
                "permission_error",
                "Your API key does not have permission to use the specified resource.",
            ),
            (
                "not_found",
                404,
                "not_found_error",
                "model: scripted-claude",
            ),
        ],
    };
    let w = World::new();
    let mut scripts: Vec<(&str, Vec<Reply>)> = cases
        .iter()
        .map(|(id, status, kind, message)| (*id, vec![proto.error(*status, kind, message)]))
        .collect();
    scripts.push((
        "fine",
        vec![
            proto.answer(&bash(&[("f", FIX)]), tokens(10, 5)),
            proto.answer(&say("Fixed."), tokens(12, 2)),
        ],
    ));
    let model = Model::scripted(proto, scripts);
    let ids = [
        "unauthorized",
        "bad_request",
        "forbidden",
        "not_found",
        "fine",
    ];
    // A retry would show as a second request and a `model_retry` event.
    let run = run_against(&w, "out", &ids, &model, &["-j", "5", "--max-retries", "3"]);
    assert_eq!(run.code, 1, "stderr:\n{}", run.stderr);
    assert_eq!(run.rows().len(), 5);
    for (id, status, _, message) in cases {
        let row = run.row(id);
        assert_eq!(row["status"], "error", "{row:?}");
        assert_eq!(row["exit_reason"], "api_error", "{row:?}");
        assert_eq!(row["passed"], "false", "{row:?}");
        assert_eq!(row["test_exit_code"], "", "{row:?}");
        assert!(
            row["error"].contains(&format!("HTTP {status}")),
            "{id}: {:?}",
            row["error"]
        );
        assert!(row["error"].contains(message), "{id}: {:?}", row["error"]);
        assert_eq!(row["model_retries"], "0", "{row:?}");
        assert_eq!(row["retry_wait_seconds"], "0.0", "{row:?}");
        assert_eq!(model.requests_of(id).len(), 1, "{id} was retried");
        assert!(run.events(id, "model_retry").is_empty(), "{id}");
        assert_eq!(run.events(id, "model_error").len(), 1, "{id}");
    }
    let row = run.row("fine");
    assert_eq!(row["status"], "passed", "{row:?}");
    assert_eq!(row["exit_reason"], "completed", "{row:?}");
    assert_no_protocol_violation(proto, &model.server.requests());
}

#[test]
fn openai_client_errors_end_their_task_at_once_without_a_retry() {
    client_errors_end_their_task_at_once_without_a_retry(Proto::OpenAi);
}

#[test]
fn anthropic_client_errors_end_their_task_at_once_without_a_retry() {
    client_errors_end_their_task_at_once_without_a_retry(Proto::Anthropic);
}

/// Each case is (task, whether the agent fixed the repo before the overflow,
/// the overflow as the server says it).
fn context_overflow_is_named_and_not_retried(proto: Proto, cases: Vec<(&str, bool, Reply)>) {
    let w = World::new();
    let scripts: Vec<(&str, Vec<Reply>)> = cases
        .iter()
        .map(|(id, fixed, overflow)| {
            let mut replies = Vec::new();
            if *fixed {
                replies.push(proto.answer(&bash(&[("f", FIX)]), tokens(100, 10)));
            }
            replies.push(overflow.clone());
            (*id, replies)
        })
        .collect();
    let model = Model::scripted(proto, scripts);
    let ids: Vec<&str> = cases.iter().map(|c| c.0).collect();
    let run = run_against(
        &w,
        "out",
        &ids,
        &model,
        &["-j", "4", "--retry-delay", "0.05"],
    );
    // Every task got a verdict.
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    for (id, fixed, _) in &cases {
        let row = run.row(id);
        assert_eq!(row["exit_reason"], "context_overflow", "{row:?}");
        let status = if *fixed { "passed" } else { "failed" };
        assert_eq!(row["status"], status, "{row:?}");
        // The tests ran: an exit code, 0 exactly when the repo was fixed.
        assert!(!row["test_exit_code"].is_empty(), "{row:?}");
        assert_eq!(row["test_exit_code"] == "0", *fixed, "{row:?}");
        let turns = if *fixed { 2 } else { 1 };
        assert_eq!(row["turns"], turns.to_string(), "{row:?}");
        assert_eq!(row["model_retries"], "0", "{row:?}");
        assert!(row["error"].contains("context window"), "{row:?}");
        assert_eq!(model.requests_of(id).len(), turns, "{id} was retried");
        assert!(run.events(id, "model_retry").is_empty(), "{id}");
        assert_eq!(run.events(id, "test").len(), 1, "{id}");
    }
}

#[test]
fn openai_vllm_and_llama_cpp_context_overflows_are_named_and_not_retried() {
    let openai = Reply::Status(
        400,
        json!({"error": {
            "message": "Your input is too large for this model.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }})
        .to_string(),
    );
    // vLLM before and after it nested its errors under `error`.
    let vllm_message = "This model's maximum context length is 4096 tokens. However, you requested 5120 tokens (4096 in the messages, 1024 in the completion). Please reduce the length of the messages or completion.";
    let vllm_flat = Reply::Status(
        400,
        json!({"object": "error", "message": vllm_message, "type": "BadRequestError", "param": null, "code": 400})
            .to_string(),
    );
    let vllm_nested = Reply::Status(
        400,
        json!({"error": {"message": vllm_message, "type": "BadRequestError", "param": null, "code": 400}})
            .to_string(),
    );
    let llama_cpp = Reply::Status(
        400,
        json!({"error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 5000,
            "n_ctx": 4096,
        }})
        .to_string(),
    );
    context_overflow_is_named_and_not_retried(
        Proto::OpenAi,
        vec![
            ("openai", true, openai),
            ("vllm_flat", false, vllm_flat),
            ("vllm_nested", true, vllm_nested),
            ("llama_cpp", false, llama_cpp),
        ],
    );
}

#[test]
fn anthropic_context_overflows_are_named_and_not_retried() {
    let anthropic = |message: &str| Proto::Anthropic.error(400, "invalid_request_error", message);
    context_overflow_is_named_and_not_retried(
        Proto::Anthropic,
        vec![
            (
                "too_long",
                true,
                anthropic("prompt is too long: 208310 tokens > 200000 maximum"),
            ),
            (
                "no_room",
                false,
                anthropic(
                    "input length and `max_tokens` exceed context limit: 195000 + 8192 > 200000, decrease input length or `max_tokens` and try again",
                ),
            ),
        ],
    );
}

// ---------------------------------------------------------------------------
// Retries: Retry-After, the run-wide pause, the retry budget.
// ---------------------------------------------------------------------------

/// A 429 with this `Retry-After`, in the protocol's words.
fn rate_limited(proto: Proto, retry_after: &str) -> Reply {
    let Reply::Status(status, body) = proto.error(429, "rate_limit_error", "Rate limit reached")
    else {
        unreachable!("error() answers Status")
    };
    Reply::StatusWithHeaders(
        status,
        vec![("Retry-After".into(), retry_after.into())],
        body,
    )
}

fn retry_after_is_honoured_and_recorded(proto: Proto) {
    let w = World::new();
    let model = Model::start(proto, move |seen| match (seen.turn, seen.attempt) {
        (0, 0) => rate_limited(proto, "2"),
        (0, _) => proto.answer(&bash(&[("f", FIX)]), tokens(10, 5)),
        _ => proto.answer(&say("Fixed."), tokens(12, 2)),
    });
    // A backoff of its own far shorter than the server asks for.
    let run = run_against(&w, "out", &["limited"], &model, &["--retry-delay", "0.05"]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let seen = model.seen();
    assert_eq!(seen.len(), 3);
    // At least the wait asked for; how much later depends on the machine,
    // and the wait onebash meant is what it records (below).
    let waited = seen[1].at - seen[0].at;
    assert!(
        waited >= Duration::from_millis(1950),
        "the retry came {waited:?} after the 429"
    );
    let events = run.events("limited", "model_retry");
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_eq!(event["status"], 429, "{event}");
    assert_eq!(event["turn"], 1, "{event}");
    assert_eq!(event["retry"], 1, "{event}");
    assert!(
        (event["wait_s"].as_f64().expect("wait_s") - 2.0).abs() < 0.01,
        "{event}"
    );
    assert!(
        event["error"]
            .as_str()
            .is_some_and(|e| e.contains("HTTP 429") && e.contains("Rate limit reached")),
        "{event}"
    );
    let row = run.row("limited");
    assert_eq!(row["status"], "passed", "{row:?}");
    assert_eq!(row["model_retries"], "1", "{row:?}");
    assert!(
        (f64_of(&row, "retry_wait_seconds") - 2.0).abs() < 0.01,
        "{row:?}"
    );
    assert!(f64_of(&row, "agent_seconds") >= 1.95, "{row:?}");
    // The retried call's usage counts once.
    assert_eq!(row["prompt_tokens"], "22", "{row:?}");
}

#[test]
fn openai_retry_after_is_honoured_and_recorded() {
    retry_after_is_honoured_and_recorded(Proto::OpenAi);
}

#[test]
fn anthropic_retry_after_is_honoured_and_recorded() {
    retry_after_is_honoured_and_recorded(Proto::Anthropic);
}

/// One task's 429 holds the other task's next request for the whole
/// `Retry-After`: the run slows down as one.
///
/// The order is forced, not timed: busy's second call is in flight when
/// limited gets its 429, and is answered only once limited's trajectory
/// records the retry (the pause is set by then); busy's command takes no
/// time, so its third call would follow at once but for the pause.
fn a_rate_limit_pauses_every_task_of_the_run(proto: Proto) {
    let w = World::new();
    let out = w.fixture.path("out");
    let busy_waiting = Latch::new();
    let (waiting, asked) = (busy_waiting.clone(), busy_waiting.clone());
    // When the 429 was sent: the pause begins after it.
    let limited: Arc<Mutex<Option<Instant>>> = Arc::default();
    let limited_log = Arc::clone(&limited);
    let model = Model::start(proto, move |seen| match (seen.task.as_str(), seen.turn) {
        ("limited", 0) => proto.answer(&bash(&[("l0", FIX)]), tokens(10, 5)),
        ("limited", 1) if seen.attempt == 0 => {
            assert!(waiting.wait(), "busy's second call never came");
            *limited_log.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
            rate_limited(proto, "2")
        }
        ("limited", _) => proto.answer(&say("Fixed."), tokens(10, 2)),
        ("busy", 0) => proto.answer(&bash(&[("b0", "true")]), tokens(10, 5)),
        ("busy", 1) => {
            asked.open();
            assert!(
                eventually(|| logged(&out, "limited", "\"event\":\"model_retry\"")),
                "limited's retry was never logged"
            );
            proto.answer(&bash(&[("b1", "true")]), tokens(10, 5))
        }
        _ => proto.answer(&say("Nothing to do."), tokens(10, 2)),
    });
    let run = run_against(
        &w,
        "out",
        &["limited", "busy"],
        &model,
        &["-j", "2", "--retry-delay", "0.05"],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let seen = model.seen();
    let at = |task: &str, turn: usize, attempt: usize| {
        seen.iter()
            .find(|s| s.task == task && s.turn == turn && s.attempt == attempt)
            .unwrap_or_else(|| panic!("no call {task} {turn} {attempt}: {seen:?}"))
            .at
    };
    let limited_at = limited
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .expect("the 429 was sent");
    // The pause began after the server answered 429, and lasts 2 s.
    let resumed = limited_at + Duration::from_millis(1950);
    assert_eq!(seen.iter().filter(|s| s.task == "busy").count(), 3);
    assert!(
        at("busy", 1, 0) < limited_at,
        "busy's call was not in flight"
    );
    let next = at("busy", 2, 0);
    assert!(
        next >= resumed,
        "busy asked {:?} after the 429, inside the pause",
        next - limited_at
    );
    assert!(at("limited", 1, 1) >= resumed);
    // The pause is not a retry of busy's.
    let row = run.row("busy");
    assert_eq!(row["model_retries"], "0", "{row:?}");
    assert_eq!(row["status"], "failed", "{row:?}");
    assert_eq!(run.row("limited")["status"], "passed");
    assert_no_protocol_violation(proto, &model.server.requests());
}

#[test]
fn openai_rate_limit_pauses_every_task_of_the_run() {
    a_rate_limit_pauses_every_task_of_the_run(Proto::OpenAi);
}

#[test]
fn anthropic_rate_limit_pauses_every_task_of_the_run() {
    a_rate_limit_pauses_every_task_of_the_run(Proto::Anthropic);
}

fn retries_stop_at_max_retries(proto: Proto) {
    let w = World::new();
    let model = Model::start(proto, move |_| {
        proto.error(
            503,
            "overloaded_error",
            "The service is temporarily overloaded.",
        )
    });
    let run = run_against(
        &w,
        "out",
        &["overloaded"],
        &model,
        &["--max-retries", "2", "--retry-delay", "0.05"],
    );
    assert_eq!(run.code, 1, "stderr:\n{}", run.stderr);
    assert_eq!(model.seen().len(), 3, "one try and two retries");
    let row = run.row("overloaded");
    assert_eq!(row["status"], "error", "{row:?}");
    assert_eq!(row["exit_reason"], "api_error", "{row:?}");
    assert!(row["error"].contains("HTTP 503"), "{row:?}");
    assert!(
        row["error"].contains("The service is temporarily overloaded."),
        "{row:?}"
    );
    assert_eq!(row["model_retries"], "2", "{row:?}");
    assert_eq!(row["turns"], "1", "{row:?}");
    let events = run.events("overloaded", "model_retry");
    let retries: Vec<(u64, u64)> = events
        .iter()
        .map(|e| {
            (
                e["retry"].as_u64().expect("retry"),
                e["status"].as_u64().expect("status"),
            )
        })
        .collect();
    assert_eq!(retries, [(1, 503), (2, 503)]);
    assert_eq!(run.events("overloaded", "model_error").len(), 1);
}

#[test]
fn openai_retries_stop_at_max_retries() {
    retries_stop_at_max_retries(Proto::OpenAi);
}

#[test]
fn anthropic_retries_stop_at_max_retries() {
    retries_stop_at_max_retries(Proto::Anthropic);
}

// ---------------------------------------------------------------------------
// The Anthropic Messages protocol.
// ---------------------------------------------------------------------------

#[test]
fn anthropic_requests_keep_the_system_apart_and_answer_every_tool_use_in_one_message() {
    let proto = Proto::Anthropic;
    let w = World::new();
    let several = json!([
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "echo one"}},
        {"type": "tool_use", "id": "toolu_2", "name": "bash", "input": {"command": "echo two"}},
        {"type": "tool_use", "id": "toolu_3", "name": "bash", "input": {"command": FIX}},
    ]);
    let cached = Tokens {
        input: 10,
        output: 5,
        cache_read: 100,
        cache_write: 20,
    };
    let model = Model::scripted(
        proto,
        vec![
            (
                "several",
                vec![
                    anthropic_message(several.clone(), "tool_use", cached),
                    proto.answer(&say("Done."), tokens(3, 2)),
                ],
            ),
            (
                "cut",
                vec![proto.answer(&Step::Cut("I will now".into()), tokens(7, 100))],
            ),
        ],
    );
    // A model with a built-in price that counts cache reads and writes apart.
    let name = "claude-sonnet-4-5-20250929";
    let run = run_against(
        &w,
        "out",
        &["several", "cut"],
        &model,
        &["--model", name, "-j", "2"],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_no_protocol_violation(proto, &model.server.requests());

    let requests = model.requests_of("several");
    assert_eq!(requests.len(), 2);
    let system = run.events("several", "system");
    assert_eq!(system.len(), 1);
    let system = system[0]["content"].as_str().expect("system content");
    assert!(system.contains("exactly one tool"), "{system}");
    for request in &requests {
        let body = &request.body;
        assert_eq!(body["model"], name);
        assert_eq!(text_of(&body["system"]), Some(system));
        assert_eq!(body["max_tokens"], 8192);
        let tools = body["tools"].as_array().expect("tools");
        assert_eq!(tools.len(), 1, "{tools:?}");
        assert_eq!(tools[0]["name"], "bash");
        assert!(tools[0]["description"].is_string());
        assert_eq!(tools[0]["input_schema"]["type"], "object");
        assert_eq!(
            tools[0]["input_schema"]["properties"]["command"]["type"],
            "string"
        );
        assert_eq!(tools[0]["input_schema"]["required"], json!(["command"]));
        // Anthropic's shape, not OpenAI's.
        assert!(tools[0].get("function").is_none() && tools[0].get("parameters").is_none());
        for absent in ["temperature", "top_p", "seed", "max_completion_tokens"] {
            assert!(body.get(absent).is_none(), "{absent}: {body}");
        }
        assert!(messages(request).iter().all(|m| m["role"] != "system"));
    }
    let first = messages(&requests[0]);
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0]["role"], "user");
    assert!(
        text_of(&first[0]["content"]).is_some_and(|c| c.contains("Problem of task several.")),
        "{first:?}"
    );
    // The assistant's content exactly as sent, then one user message with
    // a tool_result per tool_use, in order.
    let second = messages(&requests[1]);
    assert_eq!(second.len(), 3, "{second:?}");
    assert_eq!(second[0], first[0]);
    assert_eq!(second[1], json!({"role": "assistant", "content": several}));
    assert_eq!(second[2]["role"], "user");
    let results = second[2]["content"].as_array().expect("tool results");
    let ids: Vec<&str> = results
        .iter()
        .filter_map(|b| b["tool_use_id"].as_str())
        .collect();
    assert_eq!(ids, ["toolu_1", "toolu_2", "toolu_3"]);
    for (block, output) in results.iter().zip(["one", "two"]) {
        assert_eq!(block["type"], "tool_result");
        assert!(
            block["content"]
                .as_str()
                .is_some_and(|c| c.contains(output)),
            "{block}"
        );
    }

    let row = run.row("several");
    assert_eq!(row["status"], "passed", "{row:?}");
    assert_eq!(row["exit_reason"], "completed", "{row:?}");
    assert_eq!(row["turns"], "2", "{row:?}");
    assert_eq!(row["tool_calls"], "3", "{row:?}");
    // Input + cache reads + cache writes, over both calls.
    assert_eq!(row["prompt_tokens"], "133", "{row:?}");
    assert_eq!(row["completion_tokens"], "7", "{row:?}");
    assert_eq!(row["total_tokens"], "140", "{row:?}");
    // claude-sonnet-4: 3 in, 0.30 cache reads, 3.75 cache writes, 15 out.
    let cost = (13.0 * 3.0 + 100.0 * 0.30 + 20.0 * 3.75 + 7.0 * 15.0) / 1e6;
    assert!((f64_of(&row, "cost_usd") - cost).abs() < 1e-9, "{row:?}");
    let calls = run.events("several", "model_call");
    assert_eq!(calls[0]["usage"]["cached_tokens"], 100);
    assert_eq!(calls[0]["usage"]["cache_write_tokens"], 20);
    assert_eq!(calls[0]["finish_reason"], "tool_use");

    let trajectory = run.trajectory("several");
    assert_eq!(trajectory[0]["event"], "header");
    assert_eq!(trajectory[0]["provider"], "anthropic");
    assert!(
        trajectory[0]["request_template"]["url"]
            .as_str()
            .is_some_and(|u| u.ends_with("/v1/messages")),
        "{}",
        trajectory[0]
    );
    let kinds: Vec<&str> = trajectory
        .iter()
        .filter_map(|e| e["event"].as_str())
        .collect();
    let system_at = kinds.iter().position(|k| *k == "system").expect("system");
    let message_at = kinds.iter().position(|k| *k == "message").expect("message");
    assert!(system_at < message_at, "{kinds:?}");
    // One message event answers all three calls.
    let answers: Vec<&Value> = trajectory
        .iter()
        .filter(|e| e["event"] == "message" && e["turn"] == 1 && e["message"]["role"] == "user")
        .collect();
    assert_eq!(answers.len(), 1, "{answers:?}");

    // stop_reason max_tokens without a tool_use: cut by its output limit.
    let row = run.row("cut");
    assert_eq!(row["exit_reason"], "length", "{row:?}");
    assert_eq!(row["status"], "failed", "{row:?}");
    assert_eq!(row["turns"], "1", "{row:?}");
    assert_eq!(row["completion_tokens"], "100", "{row:?}");
}

#[test]
fn anthropic_base_urls_with_v1_reach_v1_messages_and_settings_are_sent() {
    let proto = Proto::Anthropic;
    let w = World::new();
    let model = Model::scripted(
        proto,
        vec![(
            "plain",
            vec![proto.answer(&say("Nothing to do."), tokens(5, 1))],
        )],
    );
    for (n, suffix) in ["/v1", "/v1/"].into_iter().enumerate() {
        let base_url = format!("http://{}{suffix}", model.server.addr());
        let run = run_against(
            &w,
            &format!("out-{n}"),
            &["plain"],
            &model,
            &[
                "--base-url",
                &base_url,
                "--max-output-tokens",
                "100",
                "--temperature",
                "0.3",
                "--top-p",
                "0.8",
                "--seed",
                "7",
            ],
        );
        assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
        assert!(run.stderr.contains("--seed is not sent"), "{}", run.stderr);
        let requests = model.server.requests();
        assert_eq!(requests.len(), n + 1, "{base_url}");
        let request = &requests[n];
        assert_eq!(request.path, "/v1/messages", "{base_url}");
        assert_eq!(request.body["max_tokens"], 100);
        assert_eq!(request.body["temperature"], 0.3);
        assert_eq!(request.body["top_p"], 0.8);
        assert!(request.body.get("seed").is_none(), "{}", request.body);
        assert_eq!(run.row("plain")["exit_reason"], "completed");
    }
}

// ---------------------------------------------------------------------------
// Request settings and costs.
// ---------------------------------------------------------------------------

#[test]
fn sampling_settings_and_model_args_go_into_every_openai_request_and_run_json() {
    let proto = Proto::OpenAi;
    let w = World::new();
    let model = Model::scripted(
        proto,
        vec![(
            "tuned",
            vec![
                proto.answer(&bash(&[("f", FIX)]), tokens(10, 5)),
                proto.answer(&say("Fixed."), tokens(12, 2)),
            ],
        )],
    );
    let run = run_against(
        &w,
        "out",
        &["tuned"],
        &model,
        &[
            "--temperature",
            "0.2",
            "--top-p",
            "0.9",
            "--seed",
            "7",
            "--max-output-tokens",
            "100",
            "--model-arg",
            "reasoning_effort=high",
            "--model-arg",
            r#"metadata={"a":1}"#,
        ],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(run.row("tuned")["status"], "passed");
    let requests = model.server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        let body = &request.body;
        assert_eq!(body["temperature"], 0.2, "{body}");
        assert_eq!(body["top_p"], 0.9, "{body}");
        assert_eq!(body["seed"], 7, "{body}");
        assert_eq!(body["max_completion_tokens"], 100, "{body}");
        assert!(body.get("max_tokens").is_none(), "{body}");
        assert_eq!(body["reasoning_effort"], "high", "{body}");
        assert_eq!(body["metadata"], json!({"a": 1}), "{body}");
        assert_eq!(body["model"], "scripted-gpt", "{body}");
    }
    assert_no_protocol_violation(proto, &requests);

    let text = std::fs::read_to_string(run.out.join("run.json")).expect("run.json");
    let run_json: Value = serde_json::from_str(&text).expect("run.json is JSON");
    let settings = &run_json["settings"]["model"]["request"];
    assert_eq!(settings["temperature"], 0.2, "{settings}");
    assert_eq!(settings["top_p"], 0.9, "{settings}");
    assert_eq!(settings["seed"], 7, "{settings}");
    assert_eq!(settings["max_output_tokens"], 100, "{settings}");
    assert_eq!(
        settings["extra"],
        json!({"reasoning_effort": "high", "metadata": {"a": 1}}),
        "{settings}"
    );
    // The key is used, never written down.
    let (_, key) = proto.key();
    assert!(!text.contains(key));
    let trajectory =
        std::fs::read_to_string(run.task_dir("tuned").join("trajectory.jsonl")).expect("read");
    assert!(!trajectory.contains(key));
    let header = &run.trajectory("tuned")[0];
    assert_eq!(header["request_template"]["reasoning_effort"], "high");
    assert_eq!(header["request_template"]["max_completion_tokens"], 100);
}

/// Task `a` fixes the repo in two calls, the first with 1000 cached input
/// tokens; task `b` answers once.
fn priced_model() -> Model {
    let proto = Proto::OpenAi;
    let first = Tokens {
        input: 234,
        output: 567,
        cache_read: 1000,
        cache_write: 0,
    };
    Model::scripted(
        proto,
        vec![
            (
                "a",
                vec![
                    proto.answer(&bash(&[("f", FIX)]), first),
                    proto.answer(&say("Fixed."), tokens(2000, 33)),
                ],
            ),
            (
                "b",
                vec![proto.answer(&say("Nothing to do."), tokens(112, 7))],
            ),
        ],
    )
}

/// `cost_usd` as a number, checked to have at most six decimals.
fn cost_of(row: &HashMap<String, String>) -> f64 {
    let text = &row["cost_usd"];
    let decimals = text.split_once('.').map_or(0, |(_, d)| d.len());
    assert!(decimals <= 6, "{row:?}");
    f64_of(row, "cost_usd")
}

#[test]
fn costs_come_from_price_or_the_built_in_table_and_are_empty_when_unknown() {
    let w = World::new();
    let ids = ["a", "b"];

    let model = priced_model();
    let run = run_against(&w, "priced", &ids, &model, &["--price", "2,8", "-j", "2"]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    for row in run.rows() {
        let prompt = f64_of(&row, "prompt_tokens");
        let completion = f64_of(&row, "completion_tokens");
        let expected = ((prompt * 2.0 + completion * 8.0) / 1e6 * 1e6).round() / 1e6;
        assert!((cost_of(&row) - expected).abs() < 1e-12, "{row:?}");
    }
    assert!((cost_of(&run.row("a")) - 0.011268).abs() < 1e-12);
    assert!((cost_of(&run.row("b")) - 0.00028).abs() < 1e-12);

    // gpt-4o: 2.50 in, 1.25 cached in, 10 out.
    let model = priced_model();
    let run = run_against(
        &w,
        "builtin",
        &ids,
        &model,
        &["--model", "gpt-4o", "-j", "2"],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let a = (2234.0 * 2.5 + 1000.0 * 1.25 + 600.0 * 10.0) / 1e6;
    assert!((cost_of(&run.row("a")) - a).abs() < 1e-12, "{a}");
    assert!((cost_of(&run.row("b")) - 0.00035).abs() < 1e-12);
    assert_eq!(model.server.requests()[0].body["model"], "gpt-4o");

    let model = priced_model();
    let run = run_against(&w, "unknown", &ids, &model, &["-j", "2"]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    for row in run.rows() {
        assert_eq!(row["cost_usd"], "", "{row:?}");
        assert_ne!(row["status"], "error", "{row:?}");
    }
}

#[test]
fn max_cost_stops_a_task_after_the_call_that_reached_it_and_needs_a_price() {
    let w = World::new();
    let model = priced_model();
    let run = run_against(
        &w,
        "capped",
        &["a", "b"],
        &model,
        &["--max-cost", "0.001", "--price", "1000,1000", "-j", "2"],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let row = run.row("a");
    assert_eq!(row["exit_reason"], "max_cost", "{row:?}");
    assert_eq!(row["turns"], "1", "{row:?}");
    assert_eq!(model.requests_of("a").len(), 1);
    // The first call's fix is graded (once seen failed under heavy load:
    // the command's event says why, should it fail again).
    assert_eq!(
        row["status"],
        "passed",
        "{row:?}\n{:?}",
        run.events("a", "command")
    );
    assert!((cost_of(&row) - 1.801).abs() < 1e-12, "{row:?}");
    // A task that ends on its own is not cut.
    assert_eq!(run.row("b")["exit_reason"], "completed");

    let model = priced_model();
    let run = run_against(&w, "no-price", &["a", "b"], &model, &["--max-cost", "0.5"]);
    assert_eq!(run.code, 2, "stderr:\n{}", run.stderr);
    assert!(run.stderr.contains("--max-cost"), "{}", run.stderr);
    assert!(
        run.stderr.contains("hint:") && run.stderr.contains("--price"),
        "{}",
        run.stderr
    );
    assert!(model.seen().is_empty());
    assert!(!run.out.join("results.csv").exists());
}

/// Model calls the scripted model is answering.
#[derive(Default)]
struct InFlight {
    now: usize,
    /// The most at once.
    peak: usize,
    /// A call gave up waiting for a second one.
    gave_up: bool,
}

/// `--max-connections 1`: one model call in flight for the whole run,
/// whatever `-j` says; without it, as many as `-j`.
#[test]
fn max_connections_caps_the_model_calls_in_flight_for_the_whole_run() {
    let proto = Proto::OpenAi;
    let w = World::new();
    let ids = ["c1", "c2", "c3", "c4"];
    for (out, args, capped) in [
        ("capped", &["-j", "4", "--max-connections", "1"][..], true),
        ("free", &["-j", "4"][..], false),
    ] {
        let in_flight: Arc<(Mutex<InFlight>, Condvar)> = Arc::default();
        let counter = Arc::clone(&in_flight);
        let folder = w.fixture.path(out);
        let model = Model::start(proto, move |seen| {
            let (count, changed) = &*counter;
            let lock = || count.lock().unwrap_or_else(PoisonError::into_inner);
            {
                let mut c = lock();
                c.now += 1;
                c.peak = c.peak.max(c.now);
                changed.notify_all();
            }
            if capped {
                // Every task is at its first call, waiting for the one
                // connection; a broken cap lets another call in meanwhile.
                // (The pause gives it the chance; it cannot fail a test.)
                let ready = eventually(|| {
                    ids.iter()
                        .all(|id| logged(&folder, id, "\"role\":\"user\""))
                });
                assert!(ready, "the tasks never all reached the model");
                std::thread::sleep(Duration::from_millis(200));
            } else {
                // Held until a second call is in flight, which only a cap
                // would prevent.
                let c = lock();
                let (mut c, waited) = changed
                    .wait_timeout_while(c, HANG_GUARD, |c| c.peak < 2 && !c.gave_up)
                    .unwrap_or_else(PoisonError::into_inner);
                // One wait in vain is enough to fail the test below.
                c.gave_up |= waited.timed_out();
            }
            lock().now -= 1;
            match seen.turn {
                0 => proto.answer(&bash(&[("f", FIX)]), tokens(10, 5)),
                _ => proto.answer(&say("Fixed."), tokens(10, 2)),
            }
        });
        let run = run_against(&w, out, &ids, &model, args);
        assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
        let peak = in_flight
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .peak;
        if capped {
            assert_eq!(peak, 1, "{out}");
        } else {
            assert!(peak > 1, "{out}: the measure sees no concurrency");
        }
        for id in ids {
            assert_eq!(run.row(id)["status"], "passed");
        }
    }
}

// ---------------------------------------------------------------------------
// Retries cut by the task timeout.
// ---------------------------------------------------------------------------

/// The API fails every call until the task timeout: the model never
/// answered, so there is nothing to grade. It once ended as `task_timeout`
/// and counted as `failed` (a verdict against the model) with an empty
/// `error`, and the run exited 0 as if every task had a verdict.
#[test]
fn an_api_outage_until_the_task_timeout_gives_no_verdict() {
    let proto = Proto::OpenAi;
    let w = World::new();
    let model = Model::start(proto, move |_| {
        proto.error(500, "server_error", "The server had an error.")
    });
    // The first failure must come back before the timeout: 3 s is far
    // above a local round trip, however loaded the machine.
    let run = run_against(
        &w,
        "out",
        &["outage"],
        &model,
        &["--task-timeout", "3", "--retry-delay", "0.05"],
    );
    assert!(model.seen().len() > 1, "the call was retried");
    let row = run.row("outage");
    assert_eq!(row["status"], "error", "{row:?}");
    assert!(row["error"].contains("HTTP 500"), "{row:?}");
    assert_eq!(run.code, 1, "stderr:\n{}", run.stderr);
}

/// A wait before a retry that the task timeout cuts short counts only the
/// part the task lived to see (it once counted the whole planned wait: five
/// seconds in a one-second task). Rate limited until the timeout, the task
/// has no verdict: the API failed, not the model.
#[test]
fn retry_wait_counts_only_the_time_waited() {
    let proto = Proto::OpenAi;
    let w = World::new();
    // The first 429 comes back long before the 3 s timeout, and the wait it
    // asks for ends long after it.
    let model = Model::start(proto, move |_| rate_limited(proto, "600"));
    let run = run_against(&w, "out", &["limited"], &model, &["--task-timeout", "3"]);
    let row = run.row("limited");
    assert_eq!(row["exit_reason"], "api_error", "{row:?}");
    assert_eq!(row["status"], "error", "{row:?}");
    assert!(row["error"].contains("HTTP 429"), "{row:?}");
    assert!(
        f64_of(&row, "retry_wait_seconds") <= f64_of(&row, "agent_seconds"),
        "{row:?}"
    );
    let end = run.events("limited", "agent_end");
    assert!(
        end[0]["retry_wait_s"].as_f64() <= end[0]["duration_s"].as_f64(),
        "{}",
        end[0]
    );
}
