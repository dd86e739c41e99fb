//! A scripted HTTP/1.1 server for integration tests: it stands in for the
//! OpenAI Chat Completions endpoint (or any JSON API) so the harness can be
//! driven through exact sequences of model replies, errors, delays and broken
//! connections without a network or a real model.
//!
//! This file owns the server (accept loop, connection threads, request
//! parsing, response writing) and the helpers that build OpenAI-shaped
//! response bodies. It uses std networking and threads only, so tests need no
//! async runtime of their own to host it.

use std::collections::{HashMap, VecDeque};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use serde_json::{Value, json};

/// Largest request line, header line or chunk-size line accepted. Anything
/// longer is a bug in the client under test (or not HTTP at all); refusing it
/// keeps a confused client from making the server buffer without bound.
const MAX_LINE: u64 = 64 * 1024;

/// Largest request body accepted, for the same reason.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// The request target as sent, e.g. `/v1/chat/completions` (query included).
    pub path: String,
    /// Header names are lowercased; values are trimmed. Order is as received.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON; `Null` if the body is empty or not JSON.
    pub body: Value,
    /// The body as text (lossy UTF-8), after removing any chunked framing.
    pub raw_body: String,
}

impl Request {
    /// The first header with this name (case-insensitive), if any.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What the server does with one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// 200 with this JSON body (`application/json`).
    Json(Value),
    /// This status with this body as given (`application/json`).
    Status(u16, String),
    /// This status, these extra headers (e.g. `Retry-After`) and this body.
    /// `Content-Type` defaults to `application/json` unless given here;
    /// `Content-Length` and `Connection` are always set by the server.
    StatusWithHeaders(u16, Vec<(String, String)>, String),
    /// Sleep, then do what the inner reply says (which may itself be `Drop`,
    /// to simulate a hung server that eventually disconnects).
    Delay(Duration, Box<Reply>),
    /// Close the connection without answering.
    Drop,
    /// 200 with this exact body (`application/json`), for malformed-JSON tests.
    Raw(String),
}

type Handler = dyn Fn(&Request) -> Reply + Send + Sync + 'static;

/// State shared between the owning [`ScriptedServer`], the accept loop and
/// the connection threads.
struct Shared {
    handler: Box<Handler>,
    requests: Mutex<Vec<Request>>,
    /// `GET .../models`, onebash's preflight: answered apart from the
    /// handler and kept out of `requests`, so that scripts and request
    /// counts are about model calls only.
    models_reply: Mutex<Reply>,
    preflights: Mutex<Vec<Request>>,
    /// Open connections, so that dropping the server can shut them down:
    /// clients such as reqwest keep idle connections pooled, and without this
    /// their connection threads would sit in `read` for as long as the client
    /// lives. The `stop` flag is only changed while holding this lock, so a
    /// connection is either registered before shutdown (and shut down) or
    /// refused after it.
    connections: Mutex<HashMap<u64, TcpStream>>,
    stop: AtomicBool,
    next_id: AtomicU64,
}

/// Locks a mutex, ignoring poisoning. Everything guarded here is plain data
/// that stays consistent even if a thread panicked while holding the lock
/// (the only code that can panic, the test's handler, runs without locks), so
/// continuing is safe and avoids turning one failure into a cascade.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A scripted HTTP/1.1 server on `127.0.0.1` with an ephemeral port. It stops
/// when dropped.
pub struct ScriptedServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept_thread: Option<JoinHandle<()>>,
}

impl ScriptedServer {
    /// Replies consumed in order, one per request; when exhausted answer 500
    /// with body `{"error":{"message":"script exhausted"}}`.
    pub fn start(script: Vec<Reply>) -> ScriptedServer {
        let script = Mutex::new(VecDeque::from(script));
        ScriptedServer::start_with(move |_req| {
            lock(&script).pop_front().unwrap_or_else(|| {
                Reply::Status(
                    500,
                    json!({"error": {"message": "script exhausted"}}).to_string(),
                )
            })
        })
    }

    /// A handler decides per request (used when several tasks run
    /// concurrently: it can look at the request body). It runs on the
    /// connection's thread, possibly on several threads at once.
    pub fn start_with(
        handler: impl Fn(&Request) -> Reply + Send + Sync + 'static,
    ) -> ScriptedServer {
        // Panicking here is fine: this runs on the test's own thread, and a
        // test that cannot bind a loopback port cannot do anything useful.
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local_addr of bound listener");
        let shared = Arc::new(Shared {
            handler: Box::new(handler),
            requests: Mutex::new(Vec::new()),
            models_reply: Mutex::new(Reply::Json(json!({
                "object": "list",
                "data": [{"id": "scripted", "object": "model", "owned_by": "test"}],
            }))),
            preflights: Mutex::new(Vec::new()),
            connections: Mutex::new(HashMap::new()),
            stop: AtomicBool::new(false),
            next_id: AtomicU64::new(0),
        });
        let accept_shared = Arc::clone(&shared);
        let accept_thread = thread::Builder::new()
            .name("scripted-server-accept".into())
            .spawn(move || accept_loop(listener, accept_shared))
            .expect("spawn accept thread");
        ScriptedServer {
            addr,
            shared,
            accept_thread: Some(accept_thread),
        }
    }

    /// `http://127.0.0.1:PORT/v1`, the base URL an OpenAI client is given.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The socket address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received so far, in arrival order, but for the
    /// preflight's `GET .../models`.
    pub fn requests(&self) -> Vec<Request> {
        lock(&self.shared.requests).clone()
    }

    /// The `GET .../models` requests received so far.
    pub fn preflights(&self) -> Vec<Request> {
        lock(&self.shared.preflights).clone()
    }

    /// What `GET .../models` is answered from now on (a list of one model
    /// until this is called).
    pub fn set_models_reply(&self, reply: Reply) {
        *lock(&self.shared.models_reply) = reply;
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        {
            let mut conns = lock(&self.shared.connections);
            self.shared.stop.store(true, Ordering::SeqCst);
            for (_, stream) in conns.drain() {
                // Unblocks the connection thread's read; it then ends. Errors
                // mean the peer already went away, which is just as good.
                let _ = stream.shutdown(Shutdown::Both);
            }
        }
        // `accept` has no timeout, so wake it with a connection of our own;
        // the loop sees `stop` and exits, closing the listener. Only wait for
        // it if the wake-up connection went through, so a failure here can
        // never hang the test.
        let woke = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1)).is_ok();
        // (A tuple pattern rather than a let chain keeps this building on the
        // crate's minimum Rust version.)
        if let (Some(handle), true) = (self.accept_thread.take(), woke) {
            let _ = handle.join();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                if shared.stop.load(Ordering::SeqCst) {
                    return;
                }
                // Transient (e.g. out of file descriptors): back off briefly
                // rather than spin, then keep serving.
                eprintln!("scripted server: accept failed: {e}");
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let id = shared.next_id.fetch_add(1, Ordering::SeqCst);
        {
            let mut conns = lock(&shared.connections);
            if shared.stop.load(Ordering::SeqCst) {
                return;
            }
            match stream.try_clone() {
                Ok(clone) => {
                    conns.insert(id, clone);
                }
                Err(e) => {
                    eprintln!("scripted server: cannot track connection: {e}");
                    continue;
                }
            }
        }
        let conn_shared = Arc::clone(&shared);
        let spawned = thread::Builder::new()
            .name(format!("scripted-server-conn-{id}"))
            .spawn(move || {
                if let Err(e) = serve_connection(stream, &conn_shared) {
                    // After the server is dropped, errors are expected (we
                    // shut the sockets down ourselves); stay quiet then.
                    if !conn_shared.stop.load(Ordering::SeqCst) {
                        eprintln!("scripted server: connection {id} ended: {e}");
                    }
                }
                lock(&conn_shared.connections).remove(&id);
            });
        if let Err(e) = spawned {
            eprintln!("scripted server: cannot spawn connection thread: {e}");
            lock(&shared.connections).remove(&id);
        }
    }
}

/// Serves requests on one connection until the client closes it, a reply
/// asks to close it, or an I/O or protocol error ends it.
fn serve_connection(stream: TcpStream, shared: &Shared) -> io::Result<()> {
    let mut reader = BufReader::new(stream);
    loop {
        let Some(parsed) = read_request(&mut reader)? else {
            return Ok(()); // clean close between requests
        };
        let ParsedRequest {
            request,
            keep_alive,
        } = parsed;
        let preflight =
            request.method == "GET" && request.path.trim_end_matches('/').ends_with("/models");
        let reply = if preflight {
            lock(&shared.preflights).push(request.clone());
            lock(&shared.models_reply).clone()
        } else {
            // Recorded before replying so that a test which has seen a
            // response can rely on the request being in `requests()`.
            lock(&shared.requests).push(request.clone());
            handle(shared, &request)
        };
        let mut out = reader.get_ref();
        if !write_reply(&mut out, reply, keep_alive)? || !keep_alive {
            let _ = out.shutdown(Shutdown::Both);
            return Ok(());
        }
    }
}

/// The handler's reply to one request.
fn handle(shared: &Shared, request: &Request) -> Reply {
    match panic::catch_unwind(AssertUnwindSafe(|| (shared.handler)(request))) {
        Ok(reply) => reply,
        // The panic message was already printed by the panic hook; answer
        // something visible instead of silently dropping the connection.
        Err(_) => Reply::Status(
            500,
            json!({"error": {"message": "scripted server handler panicked"}}).to_string(),
        ),
    }
}

struct ParsedRequest {
    request: Request,
    /// Whether the client allows the connection to stay open afterwards.
    keep_alive: bool,
}

fn protocol_error(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// Reads one CRLF- (or LF-) terminated line without the terminator. `None`
/// at end of stream before any byte.
fn read_line(reader: &mut BufReader<TcpStream>) -> io::Result<Option<String>> {
    let mut buf = Vec::new();
    let n = reader.by_ref().take(MAX_LINE).read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() != Some(&b'\n') {
        return Err(protocol_error(if n as u64 >= MAX_LINE {
            "line too long"
        } else {
            "connection closed mid-line"
        }));
    }
    buf.pop();
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| protocol_error("line is not UTF-8"))
}

fn read_required_line(reader: &mut BufReader<TcpStream>) -> io::Result<String> {
    read_line(reader)?.ok_or_else(|| protocol_error("connection closed mid-request"))
}

/// Reads one request. `None` if the client closed the connection cleanly
/// before starting another one.
fn read_request(reader: &mut BufReader<TcpStream>) -> io::Result<Option<ParsedRequest>> {
    // Tolerate stray blank lines between requests (RFC 9112 section 2.2).
    let request_line = loop {
        match read_line(reader)? {
            None => return Ok(None),
            Some(line) if line.is_empty() => continue,
            Some(line) => break line,
        }
    };
    let mut parts = request_line.split_whitespace();
    let (Some(method), Some(path), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(protocol_error(format!("bad request line {request_line:?}")));
    };
    let (method, path, version) = (method.to_string(), path.to_string(), version.to_string());

    let mut headers = Vec::new();
    loop {
        let line = read_required_line(reader)?;
        if line.is_empty() {
            break;
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(protocol_error(format!("bad header line {line:?}")));
        };
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    let has_token = |name: &str, token: &str| {
        header(name).is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    };

    // HTTP/1.1 defaults to keep-alive, HTTP/1.0 to close.
    let keep_alive = if version.eq_ignore_ascii_case("HTTP/1.0") {
        has_token("connection", "keep-alive")
    } else {
        !has_token("connection", "close")
    };

    // curl sends `Expect: 100-continue` for larger bodies and waits a while
    // for this before sending them; answering at once keeps tests fast.
    if has_token("expect", "100-continue") {
        let mut out = reader.get_ref();
        out.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        out.flush()?;
    }

    let body = if has_token("transfer-encoding", "chunked") {
        read_chunked_body(reader)?
    } else if let Some(len) = header("content-length") {
        let len: usize = len
            .parse()
            .map_err(|_| protocol_error(format!("bad content-length {len:?}")))?;
        if len > MAX_BODY {
            return Err(protocol_error(format!("body of {len} bytes is too large")));
        }
        let mut body = vec![0; len];
        reader.read_exact(&mut body)?;
        body
    } else {
        Vec::new()
    };

    let raw_body = String::from_utf8_lossy(&body).into_owned();
    let body = serde_json::from_str(&raw_body).unwrap_or(Value::Null);
    Ok(Some(ParsedRequest {
        request: Request {
            method,
            path,
            headers,
            body,
            raw_body,
        },
        keep_alive,
    }))
}

/// Reads a `Transfer-Encoding: chunked` body (RFC 9112 section 7.1),
/// discarding chunk extensions and trailers.
fn read_chunked_body(reader: &mut BufReader<TcpStream>) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line = read_required_line(reader)?;
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| protocol_error(format!("bad chunk size line {line:?}")))?;
        if size == 0 {
            // Trailer section: header lines up to an empty line.
            while !read_required_line(reader)?.is_empty() {}
            return Ok(body);
        }
        if body.len() + size > MAX_BODY {
            return Err(protocol_error("chunked body is too large"));
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        if !read_required_line(reader)?.is_empty() {
            return Err(protocol_error("chunk data not followed by CRLF"));
        }
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

/// Writes the reply. Returns `false` if the connection must be closed
/// instead of serving further requests (the `Drop` reply).
fn write_reply(out: &mut impl Write, reply: Reply, keep_alive: bool) -> io::Result<bool> {
    let (status, extra_headers, body) = match reply {
        Reply::Json(value) => (200, Vec::new(), value.to_string()),
        Reply::Status(status, body) => (status, Vec::new(), body),
        Reply::StatusWithHeaders(status, headers, body) => (status, headers, body),
        Reply::Delay(delay, inner) => {
            thread::sleep(delay);
            return write_reply(out, *inner, keep_alive);
        }
        Reply::Drop => return Ok(false),
        Reply::Raw(body) => (200, Vec::new(), body),
    };

    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason_phrase(status));
    let mut has_content_type = false;
    for (name, value) in &extra_headers {
        // The server owns framing: a scripted Content-Length or Connection
        // would desynchronise the client from what is actually sent.
        if name.eq_ignore_ascii_case("content-length") || name.eq_ignore_ascii_case("connection") {
            continue;
        }
        has_content_type |= name.eq_ignore_ascii_case("content-type");
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !has_content_type {
        head.push_str("Content-Type: application/json\r\n");
    }
    head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    let connection = if keep_alive { "keep-alive" } else { "close" };
    head.push_str(&format!("Connection: {connection}\r\n\r\n"));

    // One write for head and body: a client must never see half a response
    // because of how the test happened to be scheduled.
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body.as_bytes());
    out.write_all(&bytes)?;
    out.flush()?;
    Ok(true)
}

// ---------------------------------------------------------------------------
// OpenAI chat-completion response bodies.
// ---------------------------------------------------------------------------

/// Wraps one assistant message in a full chat-completion response, with the
/// id/object/created/model fields the real API sends.
fn completion(
    message: Value,
    finish_reason: &str,
    prompt_tokens: u64,
    completion_tokens: u64,
) -> Reply {
    Reply::Json(json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 1_700_000_000u64,
        "model": "scripted-model",
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_reason,
        }],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }))
}

fn tool_call(id: &str, name: &str, arguments: &str) -> Value {
    json!({
        "id": id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    })
}

/// An assistant turn calling the `bash` tool once per `(id, command)` pair;
/// `finish_reason` is `tool_calls`.
pub fn tool_calls_reply(
    calls: &[(&str, &str)],
    prompt_tokens: u64,
    completion_tokens: u64,
) -> Reply {
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|(id, command)| tool_call(id, "bash", &json!({"command": command}).to_string()))
        .collect();
    completion(
        json!({"role": "assistant", "content": null, "tool_calls": tool_calls}),
        "tool_calls",
        prompt_tokens,
        completion_tokens,
    )
}

/// An assistant turn with one tool call whose name and `arguments` string are
/// sent as given, to test malformed arguments and unknown tools.
pub fn raw_tool_call_reply(
    id: &str,
    name: &str,
    arguments: &str,
    prompt_tokens: u64,
    completion_tokens: u64,
) -> Reply {
    completion(
        json!({"role": "assistant", "content": null, "tool_calls": [tool_call(id, name, arguments)]}),
        "tool_calls",
        prompt_tokens,
        completion_tokens,
    )
}

/// An assistant turn with text content and no tool calls.
pub fn text_reply(
    text: &str,
    finish_reason: &str,
    prompt_tokens: u64,
    completion_tokens: u64,
) -> Reply {
    completion(
        json!({"role": "assistant", "content": text, "refusal": null}),
        finish_reason,
        prompt_tokens,
        completion_tokens,
    )
}

/// An error in the OpenAI shape `{"error":{"message","type","param","code"}}`,
/// with the type and code the real API uses for common statuses.
pub fn error_reply(status: u16, message: &str) -> Reply {
    let (kind, code) = match status {
        401 => ("invalid_request_error", json!("invalid_api_key")),
        404 => ("invalid_request_error", json!("model_not_found")),
        429 => ("requests", json!("rate_limit_exceeded")),
        500..=599 => ("server_error", Value::Null),
        _ => ("invalid_request_error", Value::Null),
    };
    let body = json!({
        "error": {"message": message, "type": kind, "param": null, "code": code},
    });
    Reply::Status(status, body.to_string())
}
