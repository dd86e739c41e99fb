//! A strict scripted server for OpenAI's Responses API (`POST /v1/responses`),
//! stateless as onebash speaks it: it answers 400, in the API's words where
//! the API has some, to a request the real API would refuse or that breaks
//! the rules a stateless client must keep:
//! - `store` is not `false`, or `include` lacks `reasoning.encrypted_content`,
//!   or the request names a `previous_response_id` (nothing is stored);
//! - an input item carries an `id` (with nothing stored, the real API
//!   answers "Item with id ... not found");
//! - a reasoning item it sent comes back altered (its `encrypted_content`
//!   does not verify), dropped or out of order, or a `function_call` comes
//!   back without the reasoning item it followed;
//! - a `function_call` has no `function_call_output` with its `call_id`, or
//!   an output names no call before it;
//! - the tool is not in the Responses' function shape.
//!
//! Each answer starts with a reasoning item whose `encrypted_content` seals
//! (with a keyed hash, checked on return) its place in the conversation and
//! the call ids that follow it, so the server needs no state of its own to
//! check a request, and several tasks can talk to it at once. Which answer
//! comes next is a script per task, keyed as `harness::scripted_agent` is:
//! by text the first user item holds; the place in it is the count of
//! reasoning items the request returns.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::net::TcpStream;

use serde_json::{Value, json};

use super::server::{Reply, Request, ScriptedServer};

/// One answer of the script.
#[derive(Debug, Clone)]
pub enum Step {
    /// Reasoning, then one `bash` function call per command.
    Calls(Vec<String>),
    /// Reasoning, then a message with this text: the end of the task.
    Text(String),
    /// Reasoning only, `status: "incomplete"` for this reason
    /// (`max_output_tokens`, `content_filter`).
    Incomplete(String),
    /// 400 `context_length_exceeded`, as the API words it.
    Overflow,
}

/// The usage of the answer at `place` (0 for the first): input grows as the
/// conversation does and the part sent before is read from the cache.
pub fn usage(place: usize) -> Value {
    let place = place as u64;
    json!({
        "input_tokens": 1000 * (place + 1),
        "input_tokens_details": {"cached_tokens": 800 * place},
        "output_tokens": 50,
        "output_tokens_details": {"reasoning_tokens": 30},
        "total_tokens": 1000 * (place + 1) + 50,
    })
}

/// The text of the reasoning summary of the answer at `place`.
pub fn summary(place: usize) -> String {
    format!("Plan for step {}.", place + 1)
}

/// A server answering each task (found by text its user item holds) from
/// its own script.
pub fn start(plan: Vec<(String, Vec<Step>)>) -> ScriptedServer {
    ScriptedServer::start_with(move |request| answer(request, &plan))
}

/// The answer to one request: a 400 naming the first broken rule, else the
/// next step of the task's script.
pub fn answer(request: &Request, plan: &[(String, Vec<Step>)]) -> Reply {
    if !request.path.ends_with("/responses") {
        return error(404, &format!("Unknown path {}.", request.path), None);
    }
    let place = match check(&request.body) {
        Ok(place) => place,
        Err(message) => return error(400, &message, None),
    };
    let user = first_user_text(&request.body);
    let steps = plan
        .iter()
        .find(|(marker, _)| user.contains(marker.as_str()))
        .map(|(_, steps)| steps.as_slice())
        .unwrap_or(&[]);
    match steps.get(place) {
        Some(Step::Calls(commands)) => {
            let ids: Vec<String> = (0..commands.len())
                .map(|i| format!("call_{place}_{i}"))
                .collect();
            let mut output = vec![reasoning_item(place, &ids)];
            for (id, command) in ids.iter().zip(commands) {
                output.push(json!({
                    "type": "function_call", "id": format!("fc_{id}"), "call_id": id,
                    "name": "bash", "arguments": json!({"command": command}).to_string(),
                    "status": "completed",
                }));
            }
            response(place, "completed", None, output)
        }
        Some(Step::Text(_)) | None => {
            let text = match steps.get(place) {
                Some(Step::Text(text)) => text.as_str(),
                _ => "Done.",
            };
            let message = json!({
                "type": "message", "id": format!("msg_{place}"), "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            });
            response(
                place,
                "completed",
                None,
                vec![reasoning_item(place, &[]), message],
            )
        }
        Some(Step::Incomplete(reason)) => response(
            place,
            "incomplete",
            Some(reason),
            vec![reasoning_item(place, &[])],
        ),
        Some(Step::Overflow) => error(
            400,
            "Your input exceeds the context window of this model. Please adjust your input and try again.",
            Some("context_length_exceeded"),
        ),
    }
}

fn response(place: usize, status: &str, reason: Option<&str>, output: Vec<Value>) -> Reply {
    Reply::Json(json!({
        "id": format!("resp_{place}"),
        "object": "response",
        "created_at": 1_700_000_000u64,
        "status": status,
        "error": null,
        "incomplete_details": reason.map(|reason| json!({"reason": reason})),
        "model": "scripted-responses",
        "output": output,
        "store": false,
        "usage": usage(place),
    }))
}

/// An error in the API's shape.
fn error(status: u16, message: &str, code: Option<&str>) -> Reply {
    let body = json!({"error": {
        "message": message, "type": "invalid_request_error", "param": null, "code": code,
    }});
    Reply::Status(status, body.to_string())
}

fn first_user_text(body: &Value) -> String {
    body["input"]
        .as_array()
        .and_then(|items| items.iter().find(|item| item["role"] == "user"))
        .and_then(|item| item["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// The keyed hash that seals a reasoning item's payload.
fn seal(payload: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    "onebash strict responses server".hash(&mut hasher);
    payload.hash(&mut hasher);
    hasher.finish()
}

fn hex(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<String> {
    let bytes: Option<Vec<u8>> = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

/// The reasoning item that opens the answer at `place`, before `calls`.
fn reasoning_item(place: usize, calls: &[String]) -> Value {
    let payload = format!("{place}:{}", calls.join(","));
    json!({
        "type": "reasoning",
        "id": format!("rs_{place}"),
        "summary": [{"type": "summary_text", "text": summary(place)}],
        "encrypted_content": format!("enc.{}.{:016x}", hex(&payload), seal(&payload)),
    })
}

/// The place and the call ids sealed in an `encrypted_content`, if it is
/// one this server made and nobody changed.
fn unseal(encrypted: &str) -> Option<(usize, Vec<String>)> {
    let mut parts = encrypted.split('.');
    let (Some("enc"), Some(payload), Some(mac), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let payload = unhex(payload)?;
    if format!("{:016x}", seal(&payload)) != mac {
        return None;
    }
    let (place, calls) = payload.split_once(':')?;
    let calls = calls
        .split(',')
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .collect();
    Some((place.parse().ok()?, calls))
}

/// The rules; the place of the answer asked for (how many reasoning items
/// come back), or the 400's message.
pub fn check(body: &Value) -> Result<usize, String> {
    if body["store"] != json!(false) {
        return Err("`store` must be false: this conversation is stateless and nothing may be kept on the server.".to_owned());
    }
    let include = body["include"].as_array().cloned().unwrap_or_default();
    if !include.contains(&json!("reasoning.encrypted_content")) {
        return Err("`include` must hold \"reasoning.encrypted_content\" when `store` is false, or the reasoning is lost between turns.".to_owned());
    }
    if let Some(id) = body.get("previous_response_id").filter(|v| !v.is_null()) {
        return Err(format!("Previous response with id {id} not found."));
    }
    let tool = &body["tools"][0];
    if tool["type"] != "function" || tool["name"] != "bash" || !tool["parameters"].is_object() {
        return Err("Missing required parameter: 'tools[0].name'.".to_owned());
    }
    if !body["instructions"].is_string() {
        return Err("Expected `instructions` to hold the system prompt.".to_owned());
    }
    let items = body["input"]
        .as_array()
        .ok_or("Invalid type for 'input': expected an array.")?;
    let mut place = 0;
    // The call ids the last reasoning item announced and not yet seen.
    let mut announced: VecDeque<String> = VecDeque::new();
    let mut calls: Vec<String> = Vec::new();
    let mut answered: HashSet<String> = HashSet::new();
    for item in items {
        if let Some(id) = item.get("id") {
            return Err(format!(
                "Item with id {id} not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input."
            ));
        }
        match item["type"].as_str() {
            Some("reasoning") => {
                let encrypted = item["encrypted_content"].as_str().unwrap_or_default();
                let (sealed_place, sealed_calls) = unseal(encrypted)
                    .ok_or("The encrypted content of a reasoning item could not be verified.")?;
                if sealed_place != place {
                    return Err(format!(
                        "Reasoning item {} of this conversation is missing or out of order (found item {} in its place).",
                        place + 1,
                        sealed_place + 1
                    ));
                }
                if let Some(call) = announced.front() {
                    return Err(format!(
                        "No function_call item with call_id {call} follows the reasoning item that preceded it."
                    ));
                }
                announced = sealed_calls.into();
                place += 1;
            }
            Some("function_call") => {
                let call_id = item["call_id"].as_str().unwrap_or_default().to_owned();
                if announced.pop_front().as_deref() != Some(call_id.as_str()) {
                    return Err(format!(
                        "Item of type 'function_call' with call_id {call_id} was provided without its required 'reasoning' item."
                    ));
                }
                calls.push(call_id);
            }
            Some("function_call_output") => {
                let call_id = item["call_id"].as_str().unwrap_or_default();
                if !calls.iter().any(|c| c == call_id) {
                    return Err(format!(
                        "No tool call found for function call output with call_id {call_id}."
                    ));
                }
                if !item["output"].is_string() {
                    return Err("Invalid type for 'output': expected a string.".to_owned());
                }
                answered.insert(call_id.to_owned());
            }
            _ => {}
        }
    }
    if let Some(call) = announced.front() {
        return Err(format!(
            "No function_call item with call_id {call} follows the reasoning item that preceded it."
        ));
    }
    if let Some(call) = calls.iter().find(|c| !answered.contains(*c)) {
        return Err(format!("No tool output found for function call {call}."));
    }
    Ok(place)
}

/// Sends one JSON POST straight to `server` and returns the status and the
/// body, for tests of the server's own rules.
pub fn post(server: &ScriptedServer, path: &str, body: &Value) -> (u16, Value) {
    let text = body.to_string();
    let mut stream = TcpStream::connect(server.addr()).expect("connect to the server");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        server.addr(),
        text.len()
    );
    stream
        .write_all(format!("{head}{text}").as_bytes())
        .expect("send the request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read the answer");
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}
