//! The scripted Hub's listeners and what a test does with them: the Hub's
//! own and the CDN's (another origin), one thread a connection, one
//! request a connection; the log of requests a test reads and waits on;
//! the faults it scripts (a blob corrupted or cut once, a failure of the
//! requests a matcher picks, a request held until the log says so); and
//! stopping, which closes both listeners. What is answered is
//! `answers.rs`'s.

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};

use super::answers::{Answer, answer_cdn, answer_hub, reason};
use super::repos::{Commit, Dataset, File, Repo};
use crate::support::sync::HANG_GUARD;

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
pub(super) struct BlobFaults {
    pub(super) corrupt: bool,
    pub(super) cut_after: Option<usize>,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) repos: HashMap<String, Repo>,
    /// Tokens the Hub knows (granted or not); any other is refused.
    pub(super) tokens: BTreeSet<String>,
    rules: Vec<Rule>,
    holds: Vec<Hold>,
    log: Vec<Seen>,
    pub(super) page_size: Option<usize>,
    commits_made: u64,
}

pub(super) struct Shared {
    pub(super) state: Mutex<State>,
    /// Blob sha256 -> its faults. Locked after `state` when both are.
    pub(super) faults: Mutex<HashMap<String, BlobFaults>>,
    /// Notified on each request logged and when the Hub stops.
    pub(super) changed: Condvar,
    pub(super) stop: AtomicBool,
    /// A held request that [`HANG_GUARD`] let go before what it waited
    /// for came: the test did not get the order it asked for, and the
    /// Hub's drop fails it.
    pub(super) hold_expired: AtomicBool,
    /// Open connections, shut down when the Hub is dropped.
    pub(super) connections: Mutex<HashMap<u64, TcpStream>>,
    pub(super) next_id: AtomicU64,
    pub(super) hub: SocketAddr,
    pub(super) cdn: SocketAddr,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
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
            hold_expired: AtomicBool::new(false),
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
        let commit = Commit::of(&dataset, state.commits_made);
        let sha = commit.sha.clone();
        if let Some(token) = dataset.granted() {
            state.tokens.insert(token.to_owned());
        }
        let repo = state.repos.entry(dataset.id().to_owned()).or_default();
        repo.commits.push(commit);
        repo.refs.insert("main".to_owned(), sha.clone());
        for tag in dataset.tags() {
            repo.refs.insert(tag.clone(), sha.clone());
        }
        repo.gated = dataset.granted().map(str::to_owned);
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
        assert!(
            std::thread::panicking() || !self.shared.hold_expired.load(Ordering::SeqCst),
            "a held request was let go before what it waited for came (HANG_GUARD)"
        );
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
            let (state, waited) = shared
                .changed
                .wait_timeout_while(state, HANG_GUARD, |state| {
                    !shared.stop.load(Ordering::SeqCst) && !(state.holds[index].until)(&state.log)
                })
                .unwrap_or_else(PoisonError::into_inner);
            if waited.timed_out() {
                shared.hold_expired.store(true, Ordering::SeqCst);
            }
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
