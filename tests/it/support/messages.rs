//! A strict scripted Anthropic Messages server: it answers from a script,
//! refuses with a 400 in the API's words what the real API refuses, and
//! bills prompt caching as Anthropic does.
//!
//! The rules it enforces (each a function of its own, unit-tested below):
//! - every `tool_use` of an assistant message is answered by a
//!   `tool_result` with its id in the next user message, which holds no
//!   other result;
//! - the `thinking` and `redacted_thinking` blocks it sent come back
//!   exactly: it signs each one, so an altered block fails its signature,
//!   and it remembers what it sent, so a dropped or reordered one is seen;
//! - at most 4 `cache_control` breakpoints, none on a thinking block;
//! - extended thinking: a budget of at least 1024, below `max_tokens`
//!   unless the interleaved-thinking beta is on, and no `temperature`.
//!
//! Billing: the request is cut into items (the tools, the system blocks,
//! each message's content blocks), each worth its canonical JSON's bytes / 4
//! tokens (markers left out). A breakpoint's prefix is the items up to it.
//! The longest breakpoint prefix that an earlier request wrote is read
//! (`cache_read_input_tokens`); what lies past it up to the last
//! breakpoint is written (`cache_creation_input_tokens`); the rest is
//! `input_tokens`. There is no minimum cacheable length and no expiry.
//!
//! It runs on [`ScriptedServer`]; the HTTP side is that file's.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};

use super::server::{Reply, Request, ScriptedServer};

/// Anthropic's beta for thinking between tool calls.
pub const INTERLEAVED_BETA: &str = "interleaved-thinking-2025-05-14";

/// One answer of the script.
#[derive(Debug, Clone)]
pub struct Step {
    /// Thinking blocks before the rest, in order: `Some(text)` a thinking
    /// block, `None` a redacted one.
    pub thinking: Vec<Option<String>>,
    /// A `bash` call, or (none) a final text.
    pub command: Option<String>,
}

impl Step {
    pub fn bash(command: &str) -> Step {
        Step {
            thinking: Vec::new(),
            command: Some(command.to_owned()),
        }
    }

    pub fn done() -> Step {
        Step {
            thinking: Vec::new(),
            command: None,
        }
    }

    /// The same step with a thinking block first.
    pub fn thinking(mut self, text: &str) -> Step {
        self.thinking.push(Some(text.to_owned()));
        self
    }

    /// The same step with a redacted thinking block after the others.
    pub fn redacted(mut self) -> Step {
        self.thinking.push(None);
        self
    }
}

/// What one answered request was billed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bill {
    pub input_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub output_tokens: u64,
}

/// What the server keeps between requests.
#[derive(Default)]
struct State {
    /// The content of each answer sent, per conversation (its first user
    /// message), in order.
    sent: HashMap<String, Vec<Value>>,
    /// Prefixes written to the cache, by hash.
    cache: HashSet<u64>,
    bills: Vec<Bill>,
    refusals: Vec<String>,
}

/// The strict server: a [`ScriptedServer`] and what it billed.
pub struct MessagesServer {
    pub server: ScriptedServer,
    state: Arc<Mutex<State>>,
}

impl MessagesServer {
    /// Every conversation is answered from `script`: its k-th request gets
    /// `script[k]`, and a final text past the end.
    pub fn start(script: Vec<Step>) -> MessagesServer {
        let state = Arc::new(Mutex::new(State::default()));
        let shared = Arc::clone(&state);
        let server = ScriptedServer::start_with(move |request| {
            let mut state = shared.lock().unwrap_or_else(PoisonError::into_inner);
            match answer(&mut state, &script, request) {
                Ok(reply) => reply,
                Err(message) => {
                    state.refusals.push(message.clone());
                    refusal(&message)
                }
            }
        });
        MessagesServer { server, state }
    }

    pub fn base_url(&self) -> String {
        self.server.base_url()
    }

    /// The bill of every answered request, in order.
    pub fn bills(&self) -> Vec<Bill> {
        self.lock().bills.clone()
    }

    /// The 400s sent, in order.
    pub fn refusals(&self) -> Vec<String> {
        self.lock().refusals.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A 400 in the API's shape.
fn refusal(message: &str) -> Reply {
    Reply::Status(
        400,
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}})
            .to_string(),
    )
}

fn answer(state: &mut State, script: &[Step], request: &Request) -> Result<Reply, String> {
    let body = &request.body;
    let interleaved = request
        .header("anthropic-beta")
        .is_some_and(|betas| betas.split(',').any(|b| b.trim() == INTERLEAVED_BETA));
    check_thinking_settings(body, interleaved)?;
    check_breakpoints(body)?;
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    check_pairing(&messages)?;
    let conversation = messages
        .first()
        .map(|m| canonical_content(&m["content"]).to_string())
        .unwrap_or_default();
    let sent = state.sent.entry(conversation).or_default();
    check_thinking_returned(&messages, sent)?;
    let turn = messages.iter().filter(|m| m["role"] == "assistant").count();
    let step = script.get(turn).cloned().unwrap_or_else(Step::done);
    let content = content_of(&step, turn);
    sent.truncate(turn);
    sent.push(content.clone());
    let mut bill = bill(body, &mut state.cache);
    bill.output_tokens = tokens(&content);
    state.bills.push(bill);
    Ok(Reply::Json(json!({
        "id": format!("msg_{turn}"),
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": content,
        "stop_reason": if step.command.is_some() { "tool_use" } else { "end_turn" },
        "stop_sequence": null,
        "usage": {
            "input_tokens": bill.input_tokens,
            "cache_creation_input_tokens": bill.cache_creation_input_tokens,
            "cache_read_input_tokens": bill.cache_read_input_tokens,
            "output_tokens": bill.output_tokens,
        },
    })))
}

/// The content blocks of `step`, its thinking signed.
fn content_of(step: &Step, turn: usize) -> Value {
    let mut blocks: Vec<Value> = step
        .thinking
        .iter()
        .enumerate()
        .map(|(index, thinking)| match thinking {
            Some(text) => json!({"type": "thinking", "thinking": text, "signature": sign(text)}),
            None => {
                let payload = format!("redacted-{turn}-{index}");
                json!({"type": "redacted_thinking", "data": format!("{payload}.{}", sign(&payload))})
            }
        })
        .collect();
    match &step.command {
        Some(command) => blocks.push(json!({
            "type": "tool_use", "id": format!("toolu_{turn}"), "name": "bash",
            "input": {"command": command},
        })),
        None => blocks.push(json!({"type": "text", "text": "Done."})),
    }
    Value::Array(blocks)
}

/// FNV-1a, 64 bits: deterministic, enough to tell bytes apart in a test.
fn fnv(bytes: &[u8], mut hash: u64) -> u64 {
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x100_0000_01b3);
    }
    hash
}

const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

/// The server's signature of a thinking text.
pub fn sign(text: &str) -> String {
    format!(
        "{:016x}",
        fnv(text.as_bytes(), fnv(b"strict-secret", FNV_START))
    )
}

/// `thinking` needs a budget of at least 1024 below `max_tokens` (unless
/// interleaved), and no `temperature`.
pub fn check_thinking_settings(body: &Value, interleaved: bool) -> Result<(), String> {
    let Some(thinking) = body.get("thinking") else {
        return Ok(());
    };
    if thinking["type"] != "enabled" {
        return Ok(());
    }
    let budget = thinking["budget_tokens"].as_u64().unwrap_or(0);
    if budget < 1024 {
        return Err(
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024".into(),
        );
    }
    let max_tokens = body["max_tokens"].as_u64().unwrap_or(0);
    if budget >= max_tokens && !interleaved {
        return Err("`max_tokens` must be greater than `thinking.budget_tokens`".into());
    }
    if body.get("temperature").is_some() {
        return Err("`temperature` may only be set to 1 when thinking is enabled".into());
    }
    Ok(())
}

/// At most 4 breakpoints, none on a thinking block.
pub fn check_breakpoints(body: &Value) -> Result<(), String> {
    let mut count = 0;
    for block in blocks_of(body) {
        if block.get("cache_control").is_some() {
            if matches!(
                block["type"].as_str(),
                Some("thinking" | "redacted_thinking")
            ) {
                return Err("cache_control cannot be set on thinking blocks".into());
            }
            count += 1;
        }
    }
    if count > 4 {
        return Err(format!(
            "A maximum of 4 blocks with cache_control may be provided. Found {count}."
        ));
    }
    Ok(())
}

/// Every block of the request that can carry a marker: tools, system
/// blocks, message content blocks.
fn blocks_of(body: &Value) -> Vec<&Value> {
    let mut blocks: Vec<&Value> = Vec::new();
    blocks.extend(body["tools"].as_array().into_iter().flatten());
    blocks.extend(body["system"].as_array().into_iter().flatten());
    for message in body["messages"].as_array().into_iter().flatten() {
        blocks.extend(message["content"].as_array().into_iter().flatten());
    }
    blocks
}

/// Each assistant message's `tool_use` ids are answered, all and only,
/// by the `tool_result` blocks of the next user message.
pub fn check_pairing(messages: &[Value]) -> Result<(), String> {
    let ids = |message: &Value, kind: &str, key: &str| -> Vec<String> {
        message["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| b["type"] == kind)
            .map(|b| b[key].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    for (index, message) in messages.iter().enumerate() {
        let results = ids(message, "tool_result", "tool_use_id");
        let asked = match index.checked_sub(1).map(|before| &messages[before]) {
            Some(before) if before["role"] == "assistant" => ids(before, "tool_use", "id"),
            _ => Vec::new(),
        };
        if message["role"] == "user" {
            if let Some(stray) = results.iter().find(|id| !asked.contains(id)) {
                return Err(format!(
                    "messages.{index}.content: unexpected `tool_use_id` found in `tool_result` blocks: {stray}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                ));
            }
            if let Some(missing) = asked.iter().find(|id| !results.contains(id)) {
                return Err(format!(
                    "messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately after: {missing}. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
                ));
            }
        }
        let answered_by_next = messages.get(index + 1).is_some_and(|m| m["role"] == "user");
        if message["role"] == "assistant"
            && !answered_by_next
            && let Some(id) = ids(message, "tool_use", "id").first()
        {
            return Err(format!(
                "messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately after: {id}"
            ));
        }
    }
    Ok(())
}

/// Every thinking block is signed by this server, and the k-th assistant
/// message holds exactly the thinking blocks of the k-th answer sent, in
/// order.
pub fn check_thinking_returned(messages: &[Value], sent: &[Value]) -> Result<(), String> {
    let thinking_of = |content: &Value| -> Vec<Value> {
        content
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking")))
            .map(without_marker)
            .collect()
    };
    let assistants = messages.iter().filter(|m| m["role"] == "assistant");
    for (turn, message) in assistants.enumerate() {
        let returned = thinking_of(&message["content"]);
        for block in &returned {
            let valid = match block["type"].as_str() {
                Some("thinking") => {
                    block["signature"].as_str()
                        == Some(sign(block["thinking"].as_str().unwrap_or_default()).as_str())
                }
                _ => block["data"]
                    .as_str()
                    .and_then(|data| data.rsplit_once('.'))
                    .is_some_and(|(payload, signature)| sign(payload) == signature),
            };
            if !valid {
                return Err(format!(
                    "messages.{turn}.content: Invalid `signature` in `{}` block",
                    block["type"].as_str().unwrap_or_default()
                ));
            }
        }
        if let Some(original) = sent.get(turn)
            && thinking_of(original) != returned
        {
            return Err(format!(
                "messages.{turn}.content: the `thinking` blocks of the assistant's turn {turn} must come back as they were sent, in order"
            ));
        }
    }
    Ok(())
}

/// A block as billed and compared: without its marker.
fn without_marker(block: &Value) -> Value {
    let mut block = block.clone();
    if let Some(map) = block.as_object_mut() {
        map.remove("cache_control");
    }
    block
}

/// Content as blocks without markers: a string is one text block.
fn canonical_content(content: &Value) -> Value {
    match content {
        Value::String(text) => json!([{"type": "text", "text": text}]),
        Value::Array(blocks) => Value::Array(blocks.iter().map(without_marker).collect()),
        other => other.clone(),
    }
}

/// Tokens of a JSON value: its text's bytes / 4.
pub fn tokens(value: &Value) -> u64 {
    value.to_string().len() as u64 / 4
}

/// The request's items in cache order (tools, system, messages), each
/// with whether it carries a breakpoint.
fn items(body: &Value) -> Vec<(Value, bool)> {
    let mut items = Vec::new();
    let marked = |block: &Value| block.get("cache_control").is_some();
    for tool in body["tools"].as_array().into_iter().flatten() {
        items.push((without_marker(tool), marked(tool)));
    }
    match &body["system"] {
        Value::String(text) if !text.is_empty() => {
            items.push((json!({"type": "text", "text": text}), false));
        }
        Value::Array(blocks) => {
            items.extend(blocks.iter().map(|b| (without_marker(b), marked(b))));
        }
        _ => {}
    }
    for message in body["messages"].as_array().into_iter().flatten() {
        let role = &message["role"];
        let blocks = match &message["content"] {
            Value::Array(blocks) => blocks.clone(),
            content => canonical_content(content)
                .as_array()
                .cloned()
                .unwrap_or_default(),
        };
        for block in blocks {
            items.push((
                json!({"role": role, "block": without_marker(&block)}),
                marked(&block),
            ));
        }
    }
    items
}

/// Bills a request as Anthropic does (see the file's header), and writes
/// its breakpoint prefixes to `cache`. `output_tokens` is left at 0.
pub fn bill(body: &Value, cache: &mut HashSet<u64>) -> Bill {
    let mut hash = FNV_START;
    let mut total = 0;
    // (prefix hash, prefix tokens) at each breakpoint, in order.
    let mut breakpoints = Vec::new();
    for (item, marked) in items(body) {
        hash = fnv(item.to_string().as_bytes(), hash);
        total += tokens(&item);
        if marked {
            breakpoints.push((hash, total));
        }
    }
    let read = breakpoints
        .iter()
        .filter(|(hash, _)| cache.contains(hash))
        .map(|&(_, tokens)| tokens)
        .max()
        .unwrap_or(0);
    let written_to = breakpoints.last().map_or(0, |&(_, tokens)| tokens);
    let write = written_to.saturating_sub(read);
    cache.extend(breakpoints.iter().map(|&(hash, _)| hash));
    Bill {
        input_tokens: total - read - write,
        cache_creation_input_tokens: write,
        cache_read_input_tokens: read,
        output_tokens: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool_use(id: &str) -> Value {
        json!({"type": "tool_use", "id": id, "name": "bash", "input": {"command": "ls"}})
    }

    fn tool_result(id: &str) -> Value {
        json!({"type": "tool_result", "tool_use_id": id, "content": "out"})
    }

    #[test]
    fn a_tool_use_needs_its_result_in_the_next_user_message() {
        let user = json!({"role": "user", "content": "task"});
        let asked = json!({"role": "assistant", "content": [tool_use("a"), tool_use("b")]});
        let both = json!({"role": "user", "content": [tool_result("a"), tool_result("b")]});
        assert_eq!(check_pairing(&[user.clone(), asked.clone(), both]), Ok(()));
        let one = json!({"role": "user", "content": [tool_result("a")]});
        let err = check_pairing(&[user.clone(), asked.clone(), one]).expect_err("b unanswered");
        assert!(
            err.contains("without `tool_result`") && err.contains(": b"),
            "{err}"
        );
        let stray = json!({"role": "user", "content": [tool_result("a"), tool_result("b"), tool_result("c")]});
        let err = check_pairing(&[user.clone(), asked.clone(), stray]).expect_err("c unasked");
        assert!(err.contains("unexpected `tool_use_id`"), "{err}");
        let err = check_pairing(&[user, asked]).expect_err("no next message");
        assert!(err.contains("without `tool_result`"), "{err}");
    }

    #[test]
    fn thinking_blocks_must_come_back_signed_whole_and_in_order() {
        let step = Step::bash("ls")
            .thinking("first")
            .thinking("second")
            .redacted();
        let sent = content_of(&step, 0);
        let history = |content: Value| {
            vec![
                json!({"role": "user", "content": "task"}),
                json!({"role": "assistant", "content": content}),
                json!({"role": "user", "content": [tool_result("toolu_0")]}),
            ]
        };
        let sent_list = [sent.clone()];
        assert_eq!(
            check_thinking_returned(&history(sent.clone()), &sent_list),
            Ok(())
        );
        // Altered: the text no longer matches its signature.
        let mut altered = sent.clone();
        altered[0]["thinking"] = json!("first, edited");
        let err = check_thinking_returned(&history(altered), &sent_list).expect_err("altered");
        assert!(err.contains("Invalid `signature` in `thinking`"), "{err}");
        let mut redacted = sent.clone();
        redacted[2]["data"] = json!("forged.0000");
        let err = check_thinking_returned(&history(redacted), &sent_list).expect_err("forged");
        assert!(err.contains("`redacted_thinking`"), "{err}");
        // Dropped, or reordered: each block is validly signed, but not
        // what was sent.
        let mut dropped = sent.clone();
        dropped.as_array_mut().expect("blocks").remove(1);
        let err = check_thinking_returned(&history(dropped), &sent_list).expect_err("dropped");
        assert!(err.contains("must come back as they were sent"), "{err}");
        let mut reordered = sent.clone();
        reordered.as_array_mut().expect("blocks").swap(0, 1);
        assert!(check_thinking_returned(&history(reordered), &sent_list).is_err());
        // A marker on a thinking block is refused before anything else.
        let mut marked = sent;
        marked[0]["cache_control"] = json!({"type": "ephemeral"});
        let err = check_breakpoints(&json!({"messages": history(marked)})).expect_err("marked");
        assert!(err.contains("thinking blocks"), "{err}");
    }

    #[test]
    fn more_than_four_breakpoints_are_refused() {
        let marked = |text: &str| json!({"type": "text", "text": text, "cache_control": {"type": "ephemeral"}});
        let body = |n: usize| {
            json!({"system": [marked("s")], "messages": [
                {"role": "user", "content": (1..n).map(|i| marked(&i.to_string())).collect::<Vec<_>>()}
            ]})
        };
        assert_eq!(check_breakpoints(&body(4)), Ok(()));
        let err = check_breakpoints(&body(5)).expect_err("five");
        assert!(
            err.contains("maximum of 4") && err.contains("Found 5"),
            "{err}"
        );
    }

    #[test]
    fn thinking_settings_follow_the_api() {
        let body = |budget: u64, extra: Value| {
            let mut body = json!({"max_tokens": 8192, "thinking": {"type": "enabled", "budget_tokens": budget}});
            body.as_object_mut()
                .expect("object")
                .extend(extra.as_object().cloned().unwrap_or_default());
            body
        };
        assert_eq!(
            check_thinking_settings(&body(4096, json!({})), false),
            Ok(())
        );
        assert!(check_thinking_settings(&body(1000, json!({})), false).is_err());
        assert!(check_thinking_settings(&body(9000, json!({})), false).is_err());
        assert_eq!(
            check_thinking_settings(&body(9000, json!({})), true),
            Ok(())
        );
        let err = check_thinking_settings(&body(4096, json!({"temperature": 0.0})), false)
            .expect_err("temperature");
        assert!(err.contains("temperature"), "{err}");
        assert_eq!(
            check_thinking_settings(&json!({"temperature": 0.0}), false),
            Ok(())
        );
    }

    /// Two requests, the second extending the first: the second reads the
    /// prefix the first wrote up to the breakpoint they share, writes the
    /// rest up to its last breakpoint, and pays input for what follows.
    #[test]
    fn a_read_needs_a_prefix_an_earlier_request_wrote() {
        let mark = json!({"type": "ephemeral"});
        let system = json!([{"type": "text", "text": "s".repeat(400), "cache_control": mark}]);
        let first = json!({"system": system, "messages": [
            {"role": "user", "content": [{"type": "text", "text": "a".repeat(800), "cache_control": mark}]}
        ]});
        let item_tokens = |item: Value| tokens(&item);
        let s = item_tokens(json!({"type": "text", "text": "s".repeat(400)}));
        let a = item_tokens(
            json!({"role": "user", "block": {"type": "text", "text": "a".repeat(800)}}),
        );
        let mut cache = HashSet::new();
        let bill1 = bill(&first, &mut cache);
        assert_eq!(
            bill1,
            Bill {
                input_tokens: 0,
                cache_creation_input_tokens: s + a,
                cache_read_input_tokens: 0,
                output_tokens: 0
            }
        );
        // The same conversation, one message longer, marked at its end.
        let second = json!({"system": system, "messages": [
            {"role": "user", "content": [{"type": "text", "text": "a".repeat(800), "cache_control": mark}]},
            {"role": "assistant", "content": [{"type": "text", "text": "b".repeat(200)}]},
            {"role": "user", "content": [{"type": "text", "text": "c".repeat(400), "cache_control": mark}]}
        ]});
        let b = item_tokens(
            json!({"role": "assistant", "block": {"type": "text", "text": "b".repeat(200)}}),
        );
        let c = item_tokens(
            json!({"role": "user", "block": {"type": "text", "text": "c".repeat(400)}}),
        );
        let bill2 = bill(&second, &mut cache);
        assert_eq!(bill2.cache_read_input_tokens, s + a);
        assert_eq!(bill2.cache_creation_input_tokens, b + c);
        assert_eq!(bill2.input_tokens, 0);
        // A different start matches nothing written: no read.
        let other = json!({"system": [{"type": "text", "text": "t".repeat(400), "cache_control": mark}],
                           "messages": [{"role": "user", "content": "x"}]});
        let bill3 = bill(&other, &mut cache);
        assert_eq!(bill3.cache_read_input_tokens, 0);
        assert!(bill3.input_tokens > 0 && bill3.cache_creation_input_tokens > 0);
        // No breakpoint at all: everything is plain input.
        let plain =
            json!({"system": "s", "messages": [{"role": "user", "content": "a".repeat(800)}]});
        let bill4 = bill(&plain, &mut cache);
        assert_eq!(
            (
                bill4.cache_read_input_tokens,
                bill4.cache_creation_input_tokens
            ),
            (0, 0)
        );
        assert_eq!(
            bill4.input_tokens,
            tokens(&json!({"type": "text", "text": "s"})) + a
        );
    }
}
