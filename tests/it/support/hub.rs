//! A scripted Hugging Face Hub on 127.0.0.1 for the dataset tests: the
//! part of the Hub's HTTP API a dataset download uses, answered from
//! dataset repos the test builds ([`Dataset`]), with the statuses,
//! `X-Error-Code`s and headers of the real Hub, and the faults a test
//! scripts. `hub_parity.rs` checks it against the real client,
//! `huggingface_hub`, so it cannot drift from what the Hub answers.
//!
//! What it serves, for each dataset repo:
//! - `GET /api/datasets/{id}[/revision/{rev}]`: the repo's info (`id`,
//!   `sha`, `siblings`, `cardData` with the card's `configs`, `gated`...);
//! - `GET /api/datasets/{id}/tree/{rev}[/{path}]?recursive=true`: its
//!   files and folders, paged by a `Link: <...>; rel="next"` header;
//! - `HEAD` and `GET /datasets/{id}/resolve/{rev}/{path}`: a file kept in
//!   git is answered here (`ETag` its blob's sha1, `X-Repo-Commit`,
//!   `Accept-Ranges`, `Range` -> 206); an LFS file is a 302 to a second
//!   listener, the "CDN" (another origin, as the Hub's is, so clients do
//!   not forward the token there), with `X-Linked-Etag` (its sha256) and
//!   `X-Linked-Size`;
//! - a branch `main`, the tags of each commit, and each commit's sha as
//!   revisions; a gated repo whose files need a granted token (`Bearer`).
//!
//! One thread a connection, one request a connection (`Connection:
//! close`), std only. Every request is logged ([`Seen`]) and a test can
//! block until one arrives ([`Hub::wait_for`]). Dropping the Hub closes
//! both listeners before it returns, so later requests are refused.
//!
//! It does not do: models or spaces, private repos, Xet storage, gzip,
//! multi-range requests, commits other than by [`Hub::publish`].

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};

use serde_json::{Value, json};
use sha1::Sha1;
use sha2::{Digest as _, Sha256};

use super::sync::HANG_GUARD;

/// Entries of one page of a tree listing, as the real Hub pages it.
const PAGE_SIZE: usize = 1000;

/// Lowercase hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The sha256 of `bytes`, in hex: an LFS file's `lfs.oid`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Git's blob id of `bytes`: sha1 of `blob {len}\0` and the bytes, in hex.
/// A file kept in git has this as its `oid` and `ETag`.
pub fn git_blob_sha1(bytes: &[u8]) -> String {
    let mut hasher = Sha1::new();
    hasher.update(format!("blob {}\0", bytes.len()).as_bytes());
    hasher.update(bytes);
    hex(&hasher.finalize())
}

/// The pointer file git keeps for an LFS file.
pub fn lfs_pointer(bytes: &[u8]) -> String {
    format!(
        "version https://git-lfs.github.com/spec/v1\noid sha256:{}\nsize {}\n",
        sha256_hex(bytes),
        bytes.len()
    )
}

/// How a file of a repo is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    /// In git: served from `resolve` itself.
    Git,
    /// In LFS: `resolve` redirects to the CDN.
    Lfs,
}

/// One commit of a dataset repo, built by the test and pushed with
/// [`Hub::publish`].
#[derive(Debug, Clone)]
pub struct Dataset {
    id: String,
    files: Vec<(String, Vec<u8>, Storage)>,
    /// Card configs: name -> (split, `data_files` path or glob).
    configs: Vec<(String, Vec<(String, String)>)>,
    tags: Vec<String>,
    gated: Option<String>,
}

impl Dataset {
    /// A commit of the dataset `owner/name`, with a `.gitattributes` (as
    /// every Hub repo has) and no other file yet.
    pub fn new(id: &str) -> Dataset {
        Dataset {
            id: id.to_owned(),
            files: Vec::new(),
            configs: Vec::new(),
            tags: Vec::new(),
            gated: None,
        }
    }

    /// A file kept in git.
    pub fn file(mut self, path: &str, bytes: impl Into<Vec<u8>>) -> Dataset {
        self.files
            .push((path.to_owned(), bytes.into(), Storage::Git));
        self
    }

    /// A file kept in LFS.
    pub fn lfs(mut self, path: &str, bytes: impl Into<Vec<u8>>) -> Dataset {
        self.files
            .push((path.to_owned(), bytes.into(), Storage::Lfs));
        self
    }

    /// A config of the dataset card: its splits, each with the path (or
    /// glob) of its files. Written to `README.md`'s YAML header and served
    /// as `cardData.configs`, as the Hub does.
    pub fn config(mut self, name: &str, splits: &[(&str, &str)]) -> Dataset {
        let splits = splits
            .iter()
            .map(|(split, path)| ((*split).to_owned(), (*path).to_owned()))
            .collect();
        self.configs.push((name.to_owned(), splits));
        self
    }

    /// A tag on this commit.
    pub fn tag(mut self, tag: &str) -> Dataset {
        self.tags.push(tag.to_owned());
        self
    }

    /// Gated: its files are served to `Bearer TOKEN` only (its info and
    /// tree to anyone, as on the Hub).
    pub fn gated(mut self, token: &str) -> Dataset {
        self.gated = Some(token.to_owned());
        self
    }

    /// `README.md` with the card's YAML header.
    fn readme(&self) -> String {
        let mut text = String::from("---\nconfigs:\n");
        for (name, splits) in &self.configs {
            text.push_str(&format!("- config_name: {name}\n  data_files:\n"));
            for (split, path) in splits {
                text.push_str(&format!("  - split: {split}\n    path: {path}\n"));
            }
        }
        text.push_str("---\n\n# A dataset of the scripted Hub\n");
        text
    }

    fn card_data(&self) -> Value {
        let configs: Vec<Value> = self
            .configs
            .iter()
            .map(|(name, splits)| {
                let files: Vec<Value> = splits
                    .iter()
                    .map(|(split, path)| json!({"split": split, "path": path}))
                    .collect();
                json!({"config_name": name, "data_files": files})
            })
            .collect();
        json!({ "configs": configs })
    }
}

/// One file of a commit, as served.
#[derive(Debug, Clone)]
struct File {
    bytes: Arc<Vec<u8>>,
    storage: Storage,
    /// The git blob id: of the bytes, or of the LFS pointer.
    oid: String,
    sha256: String,
    pointer_size: usize,
}

#[derive(Debug, Clone)]
struct Commit {
    sha: String,
    /// Sorted by path.
    files: Vec<(String, File)>,
    card: Option<Value>,
}

#[derive(Debug, Default)]
struct Repo {
    commits: Vec<Commit>,
    /// Branch or tag -> commit sha.
    refs: HashMap<String, String>,
    /// The token granted access, when gated.
    gated: Option<String>,
}

/// One request as received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub method: String,
    /// The request target, query included, as sent.
    pub path: String,
    pub range: Option<String>,
    pub authorization: Option<String>,
    /// Received by the CDN listener (LFS bytes), not the Hub's.
    pub cdn: bool,
}

impl Seen {
    /// The `GET /api/datasets/{id}[/revision/...]` of a repo's info.
    pub fn is_info(&self) -> bool {
        self.method == "GET"
            && !self.cdn
            && self.path.starts_with("/api/datasets/")
            && !self.path.contains("/tree/")
    }

    /// A `GET /api/datasets/{id}/tree/...`.
    pub fn is_tree(&self) -> bool {
        self.method == "GET"
            && self.path.starts_with("/api/datasets/")
            && self.path.contains("/tree/")
    }

    /// A GET that answers with a file's bytes or a redirect to them: of
    /// `resolve`, or of the CDN.
    pub fn is_download(&self) -> bool {
        self.method == "GET" && (self.cdn || self.path.contains("/resolve/"))
    }

    /// Whether the path names `file` (a repo path, or an LFS sha256 for
    /// the CDN).
    pub fn names(&self, file: &str) -> bool {
        self.path.contains(file)
    }
}

/// What a scripted failure answers.
#[derive(Clone, Debug)]
pub enum Failure {
    /// This status with a JSON error body and no `X-Error-Code` (a Hub
    /// that is down answers 500, 502 or 503 so).
    Status(u16),
    /// The connection is closed without an answer.
    Drop,
}

type Matcher = Box<dyn Fn(&Seen) -> bool + Send + Sync>;
type LogCondition = Box<dyn Fn(&[Seen]) -> bool + Send + Sync>;

struct Rule {
    when: Matcher,
    failure: Failure,
    left: usize,
}

struct Hold {
    what: Matcher,
    until: LogCondition,
    used: bool,
}

/// What happens to the bytes of one blob (keyed by its sha256, so a fault
/// is on the bytes wherever they are served from: `resolve` or the CDN).
#[derive(Default)]
struct BlobFaults {
    corrupt: bool,
    cut_after: Option<usize>,
}

#[derive(Default)]
struct State {
    repos: HashMap<String, Repo>,
    /// Tokens the Hub knows (granted or not); any other is refused.
    tokens: BTreeSet<String>,
    rules: Vec<Rule>,
    holds: Vec<Hold>,
    log: Vec<Seen>,
    page_size: Option<usize>,
    commits_made: u64,
}

struct Shared {
    state: Mutex<State>,
    /// Blob sha256 -> its faults. Locked after `state` when both are.
    faults: Mutex<HashMap<String, BlobFaults>>,
    /// Notified on each request logged and when the Hub stops.
    changed: Condvar,
    stop: AtomicBool,
    /// Open connections, shut down when the Hub is dropped.
    connections: Mutex<HashMap<u64, TcpStream>>,
    next_id: AtomicU64,
    hub: SocketAddr,
    cdn: SocketAddr,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The scripted Hub: its API on one port, its CDN on another.
pub struct Hub {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Hub {
    pub fn start() -> Hub {
        let hub = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let cdn = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            faults: Mutex::new(HashMap::new()),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
            connections: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            hub: hub.local_addr().expect("local_addr"),
            cdn: cdn.local_addr().expect("local_addr"),
        });
        let threads = [(hub, false), (cdn, true)]
            .into_iter()
            .map(|(listener, is_cdn)| {
                let shared = Arc::clone(&shared);
                thread::spawn(move || accept_loop(&listener, &shared, is_cdn))
            })
            .collect();
        Hub { shared, threads }
    }

    /// `http://127.0.0.1:PORT`, for `HF_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.shared.hub)
    }

    /// Pushes `dataset` as a new commit on `main` of its repo (made if
    /// new), with its tags; returns the commit's sha. Earlier commits stay
    /// reachable by sha and by their tags.
    pub fn publish(&self, dataset: Dataset) -> String {
        let mut state = lock(&self.shared.state);
        state.commits_made += 1;
        let mut files: Vec<(String, Vec<u8>, Storage)> = dataset.files.clone();
        if !dataset.configs.is_empty() && !files.iter().any(|(p, _, _)| p == "README.md") {
            files.push((
                "README.md".to_owned(),
                dataset.readme().into(),
                Storage::Git,
            ));
        }
        let attributes: String = files
            .iter()
            .filter(|(_, _, storage)| *storage == Storage::Lfs)
            .map(|(path, _, _)| format!("{path} filter=lfs diff=lfs merge=lfs -text\n"))
            .collect();
        files.push((".gitattributes".to_owned(), attributes.into(), Storage::Git));
        let mut files: Vec<(String, File)> = files
            .into_iter()
            .map(|(path, bytes, storage)| {
                let pointer = lfs_pointer(&bytes);
                let oid = match storage {
                    Storage::Git => git_blob_sha1(&bytes),
                    Storage::Lfs => git_blob_sha1(pointer.as_bytes()),
                };
                let file = File {
                    sha256: sha256_hex(&bytes),
                    bytes: Arc::new(bytes),
                    storage,
                    oid,
                    pointer_size: pointer.len(),
                };
                (path, file)
            })
            .collect();
        files.sort_by(|a, b| a.0.cmp(&b.0));
        // A sha of the commit's content and its place in the Hub's
        // history, so that two commits of the same files differ.
        let mut hasher = Sha1::new();
        hasher.update(format!("{}\n{}\n", dataset.id, state.commits_made).as_bytes());
        for (path, file) in &files {
            hasher.update(format!("{path} {}\n", file.oid).as_bytes());
        }
        let sha = hex(&hasher.finalize());
        let commit = Commit {
            sha: sha.clone(),
            files,
            card: (!dataset.configs.is_empty()).then(|| dataset.card_data()),
        };
        if let Some(token) = &dataset.gated {
            state.tokens.insert(token.clone());
        }
        let repo = state.repos.entry(dataset.id.clone()).or_default();
        repo.commits.push(commit);
        repo.refs.insert("main".to_owned(), sha.clone());
        for tag in &dataset.tags {
            repo.refs.insert(tag.clone(), sha.clone());
        }
        repo.gated = dataset.gated.clone();
        sha
    }

    /// A token the Hub knows that is granted nothing: a gated repo answers
    /// it 403, where an unknown token is 401.
    pub fn add_token(&self, token: &str) {
        lock(&self.shared.state).tokens.insert(token.to_owned());
    }

    /// Tree listings are paged by `n` entries from now on (1000 until then).
    pub fn page_size(&self, n: usize) {
        lock(&self.shared.state).page_size = Some(n.max(1));
    }

    /// The file `path` of `repo`'s latest commit: its bytes are served
    /// with one bit flipped from now on, under the same `ETag`, sizes and
    /// tree ids (its hash no longer matches).
    pub fn corrupt(&self, repo: &str, path: &str) {
        let sha = self.file_sha256(repo, path);
        lock(&self.shared.faults).entry(sha).or_default().corrupt = true;
    }

    /// The next GET of the bytes of `path` of `repo`'s latest commit
    /// sends its head and `after` bytes, then closes the connection.
    pub fn cut_once(&self, repo: &str, path: &str, after: usize) {
        let sha = self.file_sha256(repo, path);
        lock(&self.shared.faults).entry(sha).or_default().cut_after = Some(after);
    }

    /// The next `times` requests that `when` matches get `failure`
    /// (`usize::MAX`: every one).
    pub fn fail(
        &self,
        when: impl Fn(&Seen) -> bool + Send + Sync + 'static,
        failure: Failure,
        times: usize,
    ) {
        lock(&self.shared.state).rules.push(Rule {
            when: Box::new(when),
            failure,
            left: times,
        });
    }

    /// The first request that `what` matches waits, before it is answered,
    /// until `until` holds of the request log (or [`HANG_GUARD`] passes).
    pub fn hold(
        &self,
        what: impl Fn(&Seen) -> bool + Send + Sync + 'static,
        until: impl Fn(&[Seen]) -> bool + Send + Sync + 'static,
    ) {
        lock(&self.shared.state).holds.push(Hold {
            what: Box::new(what),
            until: Box::new(until),
            used: false,
        });
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Seen> {
        lock(&self.shared.state).log.clone()
    }

    /// How many requests so far `what` matches.
    pub fn count(&self, what: impl Fn(&Seen) -> bool) -> usize {
        lock(&self.shared.state)
            .log
            .iter()
            .filter(|s| what(s))
            .count()
    }

    /// Blocks until a request that `what` matches has been received
    /// (perhaps already); returns the first. Fails after [`HANG_GUARD`],
    /// naming `description`.
    pub fn wait_for(&self, description: &str, what: impl Fn(&Seen) -> bool) -> Seen {
        let state = lock(&self.shared.state);
        let (state, waited) = self
            .shared
            .changed
            .wait_timeout_while(state, HANG_GUARD, |state| !state.log.iter().any(&what))
            .unwrap_or_else(PoisonError::into_inner);
        assert!(
            !waited.timed_out(),
            "timed out waiting for {description}; requests: {:#?}",
            state.log
        );
        state
            .log
            .iter()
            .find(|s| what(s))
            .cloned()
            .expect("the request waited for")
    }

    /// The bytes of `path` in `repo`'s latest commit, as published (for
    /// the files `publish` adds: `README.md`, `.gitattributes`).
    pub fn file(&self, repo: &str, path: &str) -> Vec<u8> {
        self.latest(repo, path).bytes.as_ref().clone()
    }

    fn file_sha256(&self, repo: &str, path: &str) -> String {
        self.latest(repo, path).sha256
    }

    fn latest(&self, repo: &str, path: &str) -> File {
        let state = lock(&self.shared.state);
        let commit = state
            .repos
            .get(repo)
            .and_then(|r| r.commits.last())
            .unwrap_or_else(|| panic!("no repo {repo}"));
        commit
            .files
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, f)| f.clone())
            .unwrap_or_else(|| panic!("no file {path} in {repo}"))
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        {
            let mut connections = lock(&self.shared.connections);
            self.shared.stop.store(true, Ordering::SeqCst);
            for (_, stream) in connections.drain() {
                let _ = stream.shutdown(Shutdown::Both);
            }
        }
        // Wakes held requests, which then end.
        {
            let _state = lock(&self.shared.state);
            self.shared.changed.notify_all();
        }
        // Wakes each accept loop, which sees the flag and returns, closing
        // its listener: once drop returns, a connection is refused.
        for addr in [self.shared.hub, self.shared.cdn] {
            let _ = TcpStream::connect(addr);
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>, cdn: bool) {
    for stream in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let id = shared.next_id.fetch_add(1, Ordering::SeqCst);
        {
            let mut connections = lock(&shared.connections);
            if shared.stop.load(Ordering::SeqCst) {
                return;
            }
            if let Ok(clone) = stream.try_clone() {
                connections.insert(id, clone);
            }
        }
        let shared = Arc::clone(shared);
        thread::spawn(move || {
            let _ = serve(&shared, stream, cdn);
            lock(&shared.connections).remove(&id);
        });
    }
}

/// An answer: status, headers, body (not sent for HEAD).
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Arc<Vec<u8>>,
    /// Send the head and this many bytes of the body, then close.
    cut_after: Option<usize>,
}

impl Answer {
    fn new(status: u16, headers: Vec<(&str, String)>, body: impl Into<Vec<u8>>) -> Answer {
        Answer {
            status,
            headers: headers
                .into_iter()
                .map(|(n, v)| (n.to_owned(), v))
                .collect(),
            body: Arc::new(body.into()),
            cut_after: None,
        }
    }

    fn json(status: u16, value: &Value) -> Answer {
        Answer::new(
            status,
            vec![("Content-Type", "application/json; charset=utf-8".to_owned())],
            value.to_string(),
        )
    }

    /// An error as the Hub sends one: `X-Error-Code` (when given),
    /// `X-Error-Message` and `{"error": message}`.
    fn error(status: u16, code: Option<&str>, message: &str) -> Answer {
        let mut answer = Answer::json(status, &json!({ "error": message }));
        if let Some(code) = code {
            answer
                .headers
                .push(("X-Error-Code".to_owned(), code.to_owned()));
        }
        answer
            .headers
            .push(("X-Error-Message".to_owned(), message.to_owned()));
        answer
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        206 => "Partial Content",
        302 => "Found",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        416 => "Range Not Satisfiable",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

fn serve(shared: &Shared, mut stream: TcpStream, cdn: bool) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(());
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_owned();
    let path = parts.next().unwrap_or("").to_owned();
    let mut headers = HashMap::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
    }
    let seen = Seen {
        method,
        path,
        range: headers.get("range").cloned(),
        authorization: headers.get("authorization").cloned(),
        cdn,
    };
    let failure = {
        let mut state = lock(&shared.state);
        state.log.push(seen.clone());
        shared.changed.notify_all();
        let failure = state
            .rules
            .iter_mut()
            .find(|rule| rule.left > 0 && (rule.when)(&seen))
            .map(|rule| {
                rule.left -= 1;
                rule.failure.clone()
            });
        let hold = state
            .holds
            .iter()
            .position(|hold| !hold.used && (hold.what)(&seen));
        if let Some(index) = hold {
            state.holds[index].used = true;
            let state = shared
                .changed
                .wait_timeout_while(state, HANG_GUARD, |state| {
                    !shared.stop.load(Ordering::SeqCst) && !(state.holds[index].until)(&state.log)
                })
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            drop(state);
        }
        failure
    };
    let answer = match failure {
        Some(Failure::Drop) => return stream.shutdown(Shutdown::Both),
        Some(Failure::Status(status)) => Answer::error(status, None, reason(status)),
        None if cdn => answer_cdn(shared, &seen),
        None => answer_hub(shared, &seen),
    };
    respond(&mut stream, &seen, answer)
}

fn respond(stream: &mut TcpStream, seen: &Seen, answer: Answer) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nConnection: close\r\n",
        answer.status,
        reason(answer.status)
    );
    for (name, value) in &answer.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", answer.body.len()));
    stream.write_all(head.as_bytes())?;
    if seen.method != "HEAD" {
        match answer.cut_after {
            Some(n) => {
                stream.write_all(&answer.body[..n.min(answer.body.len())])?;
                stream.flush()?;
                return stream.shutdown(Shutdown::Both);
            }
            None => stream.write_all(&answer.body)?,
        }
    }
    stream.flush()?;
    stream.shutdown(Shutdown::Write)
}

/// `%XX` decoded (the Hub's clients quote revisions and paths).
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = bytes.get(i + 1..i + 3).and_then(|hex| {
            let hex = std::str::from_utf8(hex).ok()?;
            u8::from_str_radix(hex, 16).ok()
        });
        match (bytes[i], escaped) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The value of `name` in a query string.
fn query_param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// Who asks: no token, a token the Hub knows, or one it does not.
enum Caller {
    Anonymous,
    Known(String),
    Unknown,
}

fn caller(state: &State, seen: &Seen) -> Caller {
    match seen
        .authorization
        .as_deref()
        .and_then(|a| a.strip_prefix("Bearer "))
    {
        None => Caller::Anonymous,
        Some(token) if state.tokens.contains(token) => Caller::Known(token.to_owned()),
        Some(_) => Caller::Unknown,
    }
}

fn answer_hub(shared: &Shared, seen: &Seen) -> Answer {
    let state = lock(&shared.state);
    let (path, query) = seen.path.split_once('?').unwrap_or((&seen.path, ""));
    let (api, rest) = if let Some(rest) = path.strip_prefix("/api/datasets/") {
        (true, rest)
    } else if let Some(rest) = path.strip_prefix("/datasets/") {
        (false, rest)
    } else {
        return Answer::error(
            404,
            None,
            "Sorry, we can't find the page you are looking for.",
        );
    };
    // `owner/name`, then what is asked of it.
    let mut segments = rest.splitn(3, '/');
    let (Some(owner), Some(name)) = (segments.next(), segments.next()) else {
        return Answer::error(
            404,
            None,
            "Sorry, we can't find the page you are looking for.",
        );
    };
    let id = format!("{}/{}", decode(owner), decode(name));
    let tail = segments.next().unwrap_or("");
    let who = caller(&state, seen);
    if matches!(who, Caller::Unknown) {
        return Answer::error(401, None, "Invalid credentials in Authorization header");
    }
    let Some(repo) = state.repos.get(&id) else {
        // The Hub does not tell a missing repo from a private one: 401
        // to an anonymous caller, 404 to a known one.
        let status = if matches!(who, Caller::Anonymous) {
            401
        } else {
            404
        };
        return Answer::error(status, Some("RepoNotFound"), "Repository not found");
    };
    let (kind, tail) = tail.split_once('/').unwrap_or((tail, ""));
    let (revision, file) = match kind {
        "" if api => ("main".to_owned(), String::new()),
        "revision" if api => (decode(tail), String::new()),
        "tree" if api => {
            let (rev, sub) = tail.split_once('/').unwrap_or((tail, ""));
            (decode(rev), decode(sub))
        }
        "resolve" if !api => {
            let (rev, file) = tail.split_once('/').unwrap_or((tail, ""));
            (decode(rev), decode(file))
        }
        _ => {
            return Answer::error(
                404,
                None,
                "Sorry, we can't find the page you are looking for.",
            );
        }
    };
    let sha = repo
        .refs
        .get(&revision)
        .cloned()
        .unwrap_or(revision.clone());
    let Some(commit) = repo.commits.iter().find(|c| c.sha == sha) else {
        return Answer::error(
            404,
            Some("RevisionNotFound"),
            &format!("Invalid rev id: {revision}"),
        );
    };
    let endpoint = format!("http://{}", shared.hub);
    match kind {
        "tree" => tree(commit, &id, &revision, &file, query, &endpoint, &state),
        "resolve" => resolve(shared, repo, &who, commit, &id, &file, seen),
        _ => info(repo, commit, &id, query),
    }
}

fn info(repo: &Repo, commit: &Commit, id: &str, query: &str) -> Answer {
    let blobs = query_param(query, "blobs") == Some("true");
    let siblings: Vec<Value> = commit
        .files
        .iter()
        .map(|(path, file)| {
            let mut sibling = json!({ "rfilename": path });
            if blobs {
                sibling["size"] = json!(file.bytes.len());
                sibling["blobId"] = json!(file.oid);
                if file.storage == Storage::Lfs {
                    sibling["lfs"] = json!({
                        "sha256": file.sha256,
                        "size": file.bytes.len(),
                        "pointerSize": file.pointer_size,
                    });
                }
            }
            sibling
        })
        .collect();
    let author = id.split('/').next().unwrap_or(id);
    let used: usize = commit.files.iter().map(|(_, f)| f.bytes.len()).sum();
    let mut body = json!({
        "_id": &commit.sha[..24],
        "id": id,
        "author": author,
        "sha": commit.sha,
        "lastModified": "2024-05-01T12:00:00.000Z",
        "createdAt": "2024-01-01T12:00:00.000Z",
        "private": false,
        "gated": if repo.gated.is_some() { json!("auto") } else { json!(false) },
        "disabled": false,
        "tags": [],
        "downloads": 0,
        "likes": 0,
        "siblings": siblings,
        "usedStorage": used,
    });
    if let Some(card) = &commit.card {
        body["cardData"] = card.clone();
    }
    Answer::json(200, &body)
}

fn tree(
    commit: &Commit,
    id: &str,
    revision: &str,
    under: &str,
    query: &str,
    endpoint: &str,
    state: &State,
) -> Answer {
    let recursive = query_param(query, "recursive") == Some("true");
    let prefix = if under.is_empty() {
        String::new()
    } else {
        format!("{}/", under.trim_end_matches('/'))
    };
    // Files under the prefix, and the folders on their way, in path order.
    let mut entries: Vec<(String, Value)> = Vec::new();
    let mut folders = BTreeSet::new();
    for (path, file) in &commit.files {
        let Some(rel) = path.strip_prefix(&prefix) else {
            continue;
        };
        let parts: Vec<&str> = rel.split('/').collect();
        for depth in 1..parts.len() {
            if recursive || depth == 1 {
                folders.insert(format!("{prefix}{}", parts[..depth].join("/")));
            }
        }
        if !recursive && parts.len() > 1 {
            continue;
        }
        let mut entry = json!({
            "type": "file",
            "oid": file.oid,
            "size": file.bytes.len(),
            "path": path,
        });
        if file.storage == Storage::Lfs {
            entry["lfs"] = json!({
                "oid": file.sha256,
                "size": file.bytes.len(),
                "pointerSize": file.pointer_size,
            });
        }
        entries.push((path.clone(), entry));
    }
    if !under.is_empty() && entries.is_empty() && folders.is_empty() {
        return Answer::error(
            404,
            Some("EntryNotFound"),
            &format!("{under} does not exist on \"{revision}\""),
        );
    }
    for folder in folders {
        let mut hasher = Sha1::new();
        hasher.update(format!("tree {folder} {}", commit.sha).as_bytes());
        let oid = hex(&hasher.finalize());
        let entry = json!({"type": "directory", "oid": oid, "size": 0, "path": folder});
        entries.push((folder, entry));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let page = state.page_size.unwrap_or(PAGE_SIZE);
    let start: usize = query_param(query, "cursor")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let end = (start + page).min(entries.len());
    let body: Vec<Value> = entries[start.min(end)..end]
        .iter()
        .map(|(_, e)| e.clone())
        .collect();
    let mut answer = Answer::json(200, &Value::Array(body));
    if end < entries.len() {
        let sub = if under.is_empty() {
            String::new()
        } else {
            format!("/{}", under.replace('/', "%2F"))
        };
        let next = format!(
            "{endpoint}/api/datasets/{id}/tree/{}{sub}?recursive={recursive}&expand=false&cursor={end}",
            revision.replace('/', "%2F")
        );
        answer
            .headers
            .push(("Link".to_owned(), format!("<{next}>; rel=\"next\"")));
    }
    answer
}

#[allow(clippy::too_many_arguments)]
fn resolve(
    shared: &Shared,
    repo: &Repo,
    who: &Caller,
    commit: &Commit,
    id: &str,
    path: &str,
    seen: &Seen,
) -> Answer {
    if let Some(granted) = &repo.gated {
        match who {
            Caller::Known(token) if token == granted => {}
            Caller::Known(_) => {
                return Answer::error(
                    403,
                    Some("GatedRepo"),
                    &format!(
                        "Access to dataset {id} is restricted and you are not in the authorized list. Visit http://{}/datasets/{id} to ask for access.",
                        shared.hub
                    ),
                );
            }
            _ => {
                return Answer::error(
                    401,
                    Some("GatedRepo"),
                    &format!(
                        "Access to dataset {id} is restricted. You must have access to it and be authenticated to access it. Please log in."
                    ),
                );
            }
        }
    }
    let commit_header = ("X-Repo-Commit", commit.sha.clone());
    let Some((_, file)) = commit.files.iter().find(|(p, _)| p == path) else {
        let mut answer = Answer::error(404, Some("EntryNotFound"), "Entry not found");
        answer
            .headers
            .push((commit_header.0.to_owned(), commit_header.1));
        return answer;
    };
    match file.storage {
        Storage::Git => {
            let mut answer = bytes_answer(shared, file, seen);
            answer
                .headers
                .push((commit_header.0.to_owned(), commit_header.1));
            answer
        }
        Storage::Lfs => {
            // A signed URL of the CDN: the bytes by their hash, no token.
            let location = format!(
                "http://{}/lfs/{}?expires=1999999999&signature={}",
                shared.cdn,
                file.sha256,
                &file.oid[..16]
            );
            let body = format!("Found. Redirecting to {location}");
            Answer::new(
                302,
                vec![
                    commit_header,
                    ("Location", location),
                    ("ETag", format!("\"{}\"", file.oid)),
                    ("X-Linked-Etag", format!("\"{}\"", file.sha256)),
                    ("X-Linked-Size", file.bytes.len().to_string()),
                    ("Content-Type", "text/plain; charset=utf-8".to_owned()),
                ],
                body,
            )
        }
    }
}

fn answer_cdn(shared: &Shared, seen: &Seen) -> Answer {
    let state = lock(&shared.state);
    let path = seen.path.split('?').next().unwrap_or("");
    let Some(sha) = path.strip_prefix("/lfs/") else {
        return Answer::new(404, vec![], "Not Found");
    };
    let file = state
        .repos
        .values()
        .flat_map(|r| &r.commits)
        .flat_map(|c| &c.files)
        .map(|(_, f)| f)
        .find(|f| f.storage == Storage::Lfs && f.sha256 == sha);
    match file {
        Some(file) => bytes_answer(shared, file, seen),
        None => Answer::new(403, vec![], "AccessDenied"),
    }
}

/// A file's bytes (or the range asked), with its faults applied: 200, or
/// 206 with `Content-Range`, or 416.
fn bytes_answer(shared: &Shared, file: &File, seen: &Seen) -> Answer {
    let mut bytes = file.bytes.as_ref().clone();
    let mut faults = lock(&shared.faults);
    let faults = faults.entry(file.sha256.clone()).or_default();
    if faults.corrupt
        && let Some(first) = bytes.first_mut()
    {
        *first ^= 0x01;
    }
    let len = bytes.len();
    let mut headers = vec![
        ("Content-Type", "application/octet-stream".to_owned()),
        ("Accept-Ranges", "bytes".to_owned()),
    ];
    headers.push(match file.storage {
        Storage::Git => ("ETag", format!("\"{}\"", file.oid)),
        Storage::Lfs => ("ETag", format!("\"{}\"", file.sha256)),
    });
    let range = seen.range.as_deref().and_then(|r| {
        let (from, to) = r.strip_prefix("bytes=")?.split_once('-')?;
        let from: usize = from.trim().parse().ok()?;
        let to: usize = match to.trim() {
            "" => len.saturating_sub(1),
            to => to.parse::<usize>().ok()?.min(len.saturating_sub(1)),
        };
        Some((from, to))
    });
    let mut answer = match range {
        None => Answer::new(200, headers, bytes),
        Some((from, to)) if from >= len || from > to => {
            headers.push(("Content-Range", format!("bytes */{len}")));
            return Answer::new(416, headers, Vec::new());
        }
        Some((from, to)) => {
            headers.push(("Content-Range", format!("bytes {from}-{to}/{len}")));
            Answer::new(206, headers, bytes[from..=to].to_vec())
        }
    };
    // A cut is once, on the first GET with a body.
    if seen.method == "GET" {
        answer.cut_after = faults.cut_after.take();
    }
    answer
}
