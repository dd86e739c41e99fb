//! Crash safety and scale-out, through the real binary: `kill -9` at seeded
//! points of progress then `--resume` (every (task, epoch) once, no torn
//! row, finished trajectories intact, unfinished attempts set aside),
//! resuming with other settings, resuming a finished run, `--retry-errors`,
//! Ctrl-C then resume, `--shard` with `onebash merge`, `--runs`, and a
//! folder another onebash holds.
//!
//! No test here waits for time to pass: a run is stopped at a point of its
//! progress (a model call the scripted server holds, a row written, an event
//! logged), so a fast machine and a loaded one see the same test.
//!
//! It does not cover a kill during the compaction of results.csv (a rename:
//! there is no moment to aim at), nor a kill before the first model call of
//! a run, nor what the rows mean beyond their verdicts (pipeline.rs,
//! agent_protocol.rs).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::harness::{Fixture, RunOutput, diff_of, onebash, task};
use crate::support::server::{
    Reply, Request, ScriptedServer, error_reply, text_reply, tool_calls_reply,
};
use crate::support::sync::{HANG_GUARD, Latch, eventually_within};

/// Passes once the agent (or the gold patch) wrote `fixed.txt`.
const TEST_COMMAND: &str = "test -f fixed.txt";
const FIX: &str = "echo fixed > fixed.txt";
const LOOK: &str = "echo looked";

/// The columns of CONTRACT.md, in order; onebash may add more at the end.
const CONTRACT_COLUMNS: &[&str] = &[
    "task_id",
    "epoch",
    "model",
    "prompt",
    "status",
    "exit_reason",
    "passed",
    "turns",
    "tool_calls",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "cost_usd",
    "agent_seconds",
    "test_seconds",
    "wall_seconds",
    "test_exit_code",
    "error",
];

// ---------------------------------------------------------------------------
// A world: one repo, tasks that pass or fail by plan, a scripted agent.
// ---------------------------------------------------------------------------

/// Tasks `t00`, `t01`...: the even ones are fixed by the agent (or the gold
/// patch) and pass, the odd ones are not and fail.
fn ids(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("t{i:02}")).collect()
}

fn should_pass(id: &str) -> bool {
    id[1..].parse::<usize>().expect("numbered id") % 2 == 0
}

fn planned_status(id: &str) -> &'static str {
    if should_pass(id) { "passed" } else { "failed" }
}

/// The agent's commands for a task: a look around, then the fix or not.
fn commands_of(id: &str) -> Vec<&'static str> {
    if should_pass(id) {
        vec![LOOK, FIX]
    } else {
        vec![LOOK, LOOK]
    }
}

/// A task file of `count` tasks over one repo; with `gold`, each task holds
/// a gold patch that fixes it or not by plan (for `--model oracle`).
fn world(fixture: &Fixture, count: usize, gold: bool) -> PathBuf {
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let fixing = diff_of(&repo, &[("fixed.txt", "fixed\n")]);
    let not_fixing = diff_of(&repo, &[("other.txt", "other\n")]);
    let tasks: Vec<Value> = ids(count)
        .iter()
        .map(|id| {
            let extra = if gold {
                let patch = if should_pass(id) {
                    &fixing
                } else {
                    &not_fixing
                };
                json!({ "gold_patch": patch })
            } else {
                json!({})
            };
            task(id, &repo, &sha, TEST_COMMAND, extra)
        })
        .collect();
    fixture.tasks(&tasks)
}

/// The task a request belongs to, from the problem statement [`task`] writes.
fn task_of(request: &Request) -> Option<String> {
    let messages = request.body["messages"].as_array()?;
    let user = messages
        .iter()
        .find(|m| m["role"] == "user")?
        .get("content")?
        .as_str()?;
    let start = user.find("Problem of task ")? + "Problem of task ".len();
    let rest = &user[start..];
    Some(rest[..rest.find('.')?].to_owned())
}

/// Answers the model already gave in the conversation of a request.
fn turn_of(request: &Request) -> usize {
    request.body["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count())
}

/// The scripted agent's answer to a request: [`commands_of`] its task, one
/// per turn, then a text.
fn planned_reply(request: &Request) -> Reply {
    let Some(id) = task_of(request) else {
        return error_reply(400, "no task in the request");
    };
    let turn = turn_of(request);
    match commands_of(&id).get(turn) {
        Some(command) => tool_calls_reply(&[(&format!("call-{turn}"), command)], 10, 5),
        None => text_reply("Done.", "stop", 10, 2),
    }
}

/// A scripted agent that answers with [`planned_reply`]. `hook(task, turn)`
/// runs first, on the connection's thread: it may wait, and may answer
/// instead (`Some`).
fn agent(hook: impl Fn(&str, usize) -> Option<Reply> + Send + Sync + 'static) -> ScriptedServer {
    ScriptedServer::start_with(move |request| {
        let hooked = task_of(request).and_then(|id| hook(&id, turn_of(request)));
        hooked.unwrap_or_else(|| planned_reply(request))
    })
}

/// How many requests the server received for each task.
fn requests_per_task(server: &ScriptedServer) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for request in server.requests() {
        *counts
            .entry(task_of(&request).unwrap_or_default())
            .or_insert(0) += 1;
    }
    counts
}

/// The requests received after the first `before` ones, per task.
fn new_requests(server: &ScriptedServer, before: usize) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for request in server.requests().into_iter().skip(before) {
        *counts
            .entry(task_of(&request).unwrap_or_default())
            .or_insert(0) += 1;
    }
    counts
}

fn model_args(server: &ScriptedServer) -> Vec<String> {
    vec![
        "--model".to_owned(),
        "scripted".to_owned(),
        "--base-url".to_owned(),
        server.base_url(),
    ]
}

/// Runs `onebash run TASKS -o OUT` with `args`, to its end.
fn run(fixture: &Fixture, out: &Path, tasks: &Path, args: &[String]) -> RunOutput {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    fixture.run_into(out, tasks, &args, &[])
}

fn with(base: &[String], more: &[&str]) -> Vec<String> {
    base.iter()
        .cloned()
        .chain(more.iter().map(|s| (*s).to_owned()))
        .collect()
}

// ---------------------------------------------------------------------------
// Reading a run folder strictly.
// ---------------------------------------------------------------------------

/// One row of results.csv, with the line it was read from.
#[derive(Debug, Clone)]
struct Row {
    line: String,
    fields: HashMap<String, String>,
}

impl Row {
    fn get(&self, column: &str) -> &str {
        self.fields
            .get(column)
            .unwrap_or_else(|| panic!("no column {column} in {:?}", self.line))
    }

    fn pair(&self) -> (String, u32) {
        (
            self.get("task_id").to_owned(),
            self.get("epoch").parse().expect("epoch is a number"),
        )
    }
}

/// results.csv, checked: it ends with a newline (no torn row), the header
/// starts with the contract's columns, every line has as many fields as the
/// header, and no (task, epoch) appears twice. Empty when there is no file.
fn results(out: &Path) -> BTreeMap<(String, u32), Row> {
    let path = out.join("results.csv");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return BTreeMap::new();
    };
    if text.is_empty() {
        return BTreeMap::new();
    }
    assert!(
        text.ends_with('\n'),
        "torn last row in {}:\n{text}",
        path.display()
    );
    let parse = |line: &str| -> Vec<String> {
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(line.as_bytes());
        let record = reader
            .records()
            .next()
            .unwrap_or_else(|| panic!("empty line in {}", path.display()))
            .unwrap_or_else(|err| panic!("unreadable line {line:?}: {err}"));
        record.iter().map(str::to_owned).collect()
    };
    let mut lines = text.lines();
    let header = parse(lines.next().expect("header"));
    assert!(
        header.len() >= CONTRACT_COLUMNS.len()
            && header.iter().zip(CONTRACT_COLUMNS).all(|(a, b)| a == b),
        "{header:?}"
    );
    let mut rows = BTreeMap::new();
    for line in lines {
        let values = parse(line);
        assert_eq!(values.len(), header.len(), "wrong field count: {line:?}");
        let row = Row {
            line: line.to_owned(),
            fields: header.iter().cloned().zip(values).collect(),
        };
        if let Some(old) = rows.insert(row.pair(), row.clone()) {
            panic!("two rows for {:?}:\n{}\n{}", row.pair(), old.line, row.line);
        }
    }
    rows
}

/// The events of a trajectory; every line must be whole JSON.
fn events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|err| panic!("{}: {err}", path.display()))
        .lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|err| panic!("{}: bad line {line:?}: {err}", path.display()))
        })
        .collect()
}

fn count_of(events: &[Value], kind: &str) -> usize {
    events.iter().filter(|e| e["event"] == kind).count()
}

fn trajectory_path(out: &Path, task: &str, epoch: u32) -> PathBuf {
    out.join("tasks")
        .join(task)
        .join(format!("epoch-{epoch}"))
        .join("trajectory.jsonl")
}

/// The trajectory of a finished row holds one attempt: one header (of this
/// task and epoch) first, one `end` last, and the end says what the row says.
fn assert_row_trajectory(out: &Path, row: &Row) {
    let (task, epoch) = row.pair();
    let path = trajectory_path(out, &task, epoch);
    let events = events(&path);
    assert_eq!(count_of(&events, "header"), 1, "{}", path.display());
    assert_eq!(events[0]["event"], "header", "{}", path.display());
    assert_eq!(events[0]["epoch"], epoch, "{}", path.display());
    assert_eq!(events[0]["task"]["id"], task.as_str(), "{}", path.display());
    assert_eq!(count_of(&events, "end"), 1, "{}", path.display());
    let end = events.last().expect("events");
    assert_eq!(end["event"], "end", "{}", path.display());
    assert_eq!(end["status"], row.get("status"), "{}", path.display());
    assert_eq!(end["exit_reason"], row.get("exit_reason"));
    assert_eq!(end["passed"].to_string(), row.get("passed"));
}

/// A row with the verdict the plan gives its task, by the scripted agent
/// (two tool calls, three model calls).
fn assert_planned_verdict(row: &Row, turns: &str, tool_calls: &str) {
    let (task, _) = row.pair();
    assert_eq!(row.get("status"), planned_status(&task), "{}", row.line);
    assert_eq!(row.get("exit_reason"), "completed", "{}", row.line);
    assert_eq!(row.get("passed"), (should_pass(&task)).to_string());
    assert_eq!(row.get("turns"), turns, "{}", row.line);
    assert_eq!(row.get("tool_calls"), tool_calls, "{}", row.line);
}

/// The folders under `tasks/`: the current `epoch-<k>` of each pair, and the
/// attempts set aside (`epoch-<k>.attempt-<n>`). Anything else fails.
struct Folders {
    current: BTreeSet<(String, u32)>,
    attempts: Vec<(String, u32, u32, PathBuf)>,
}

fn folders(out: &Path) -> Folders {
    let mut found = Folders {
        current: BTreeSet::new(),
        attempts: Vec::new(),
    };
    let Ok(tasks) = std::fs::read_dir(out.join("tasks")) else {
        return found;
    };
    for task in tasks {
        let task = task.expect("entry");
        let id = task.file_name().to_string_lossy().into_owned();
        for entry in std::fs::read_dir(task.path()).expect("task folder") {
            let entry = entry.expect("entry");
            let name = entry.file_name().to_string_lossy().into_owned();
            let rest = name
                .strip_prefix("epoch-")
                .unwrap_or_else(|| panic!("unexpected {}", entry.path().display()));
            match rest.split_once(".attempt-") {
                None => {
                    let epoch = rest.parse().expect("epoch-<k>");
                    found.current.insert((id.clone(), epoch));
                }
                Some((epoch, n)) => found.attempts.push((
                    id.clone(),
                    epoch.parse().expect("epoch-<k>.attempt-<n>"),
                    n.parse().expect("epoch-<k>.attempt-<n>"),
                    entry.path(),
                )),
            }
        }
    }
    found
}

fn read_json(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// Processes whose command line mentions `needle`, other than this one.
/// Zombies have an empty command line and are not counted.
fn processes_mentioning(needle: &str) -> Vec<(u32, String)> {
    let own = std::process::id();
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        if pid == own {
            continue;
        }
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
        if cmdline.contains(needle) {
            found.push((pid, cmdline));
        }
    }
    found
}

/// No process of the fixture is left, allowing killed ones time to go (a
/// hang guard: they are usually gone at once).
fn assert_no_process_left(fixture: &Fixture) {
    let needle = fixture.dir.path().display().to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = processes_mentioning(&needle);
        if left.is_empty() {
            return;
        }
        if Instant::now() > deadline {
            for (pid, _) in &left {
                if let Ok(pid) = libc::pid_t::try_from(*pid) {
                    // SAFETY: kill has no memory-safety preconditions.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
            panic!("processes left behind: {left:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ---------------------------------------------------------------------------
// A run in the background, to kill or interrupt.
// ---------------------------------------------------------------------------

/// A background `onebash run`, killed if the test ends early so that none
/// outlives it.
struct Background {
    child: Child,
    stderr: PathBuf,
}

impl Background {
    fn start(fixture: &Fixture, out: &Path, tasks: &Path, args: &[String], log: &str) -> Self {
        let stderr = fixture.path(&format!("{log}.stderr"));
        let file = |path: &Path| Stdio::from(std::fs::File::create(path).expect("log file"));
        let child = onebash()
            .arg("run")
            .arg(tasks)
            .arg("-o")
            .arg(out)
            .arg("--cache-dir")
            .arg(fixture.path("cache"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(file(&fixture.path(&format!("{log}.stdout"))))
            .stderr(file(&stderr))
            .spawn()
            .expect("spawn onebash");
        Background { child, stderr }
    }

    fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("pid");
        // SAFETY: kill has no memory-safety preconditions.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    }

    fn exited(&mut self) -> Option<i32> {
        self.child
            .try_wait()
            .expect("try_wait")
            .map(|status| status.code().unwrap_or(-1))
    }

    /// Waits for the exit code, at most `limit`.
    fn wait(&mut self, limit: Duration) -> i32 {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(code) = self.exited() {
                return code;
            }
            assert!(Instant::now() < deadline, "onebash did not exit");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_until(what: &str, limit: Duration, done: impl FnMut() -> bool) {
    assert!(
        eventually_within(limit, done),
        "timed out waiting for {what}"
    );
}

/// SplitMix64: a small seeded generator, so the kill points are the same on
/// every run of the test.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `low..high`.
    fn between(&mut self, low: usize, high: usize) -> usize {
        low + (self.next() % (high - low) as u64) as usize
    }
}

// ---------------------------------------------------------------------------
// Holding model calls: a run cannot end while one of its calls is held.
// ---------------------------------------------------------------------------

/// What the scripted model does with the requests of the kill test's
/// current round. Each round's run is given a base URL of its own
/// (`/round-<n>/v1`), so a request is known to be of this round: one that a
/// killed run had already sent is answered and not counted.
#[derive(Debug, Default)]
struct Round {
    number: usize,
    /// Requests of this round so far.
    received: usize,
    /// Hold the request with this number (from 1).
    hold_at: Option<usize>,
    /// Hold this request and every later one. The run needs at least this
    /// many to end, so it cannot end before the test kills it.
    backstop: usize,
    /// Hold every request from now on.
    frozen: bool,
    /// Requests of this round held so far.
    held: usize,
    /// The held requests of this round may go.
    released: bool,
}

#[derive(Clone, Default)]
struct Rounds(Arc<(Mutex<Round>, Condvar)>);

impl Rounds {
    fn change(&self, change: impl FnOnce(&mut Round)) {
        let (round, changed) = &*self.0;
        change(&mut round.lock().unwrap_or_else(PoisonError::into_inner));
        changed.notify_all();
    }

    /// Starts round `number`; see [`Round`].
    fn start(&self, number: usize, backstop: usize, hold_at: Option<usize>) {
        self.change(|round| {
            *round = Round {
                number,
                backstop,
                hold_at,
                ..Round::default()
            }
        });
    }

    fn freeze(&self) {
        self.change(|round| round.frozen = true);
    }

    fn release(&self) {
        self.change(|round| round.released = true);
    }

    /// Called by the server for each request of round `number`: counts it,
    /// and holds it if the round says so, until the round is released or over.
    fn pass(&self, number: usize) {
        let (round, changed) = &*self.0;
        let mut now = round.lock().unwrap_or_else(PoisonError::into_inner);
        if now.number != number {
            return;
        }
        now.received += 1;
        changed.notify_all();
        let n = now.received;
        if !(now.frozen || now.hold_at == Some(n) || n >= now.backstop) {
            return;
        }
        now.held += 1;
        let _done = changed
            .wait_timeout_while(now, HANG_GUARD, |now| now.number == number && !now.released)
            .unwrap_or_else(PoisonError::into_inner);
    }

    /// Waits until `done` holds of the current round.
    fn wait_for(&self, what: &str, done: impl Fn(&Round) -> bool) {
        let (round, changed) = &*self.0;
        let now = round.lock().unwrap_or_else(PoisonError::into_inner);
        let (now, waited) = changed
            .wait_timeout_while(now, HANG_GUARD, |now| !done(now))
            .unwrap_or_else(PoisonError::into_inner);
        assert!(!waited.timed_out(), "timed out waiting for {what}: {now:?}");
    }
}

/// The round a request's path names (`/round-<n>/v1/...`).
fn round_of(request: &Request) -> Option<usize> {
    request
        .path
        .strip_prefix("/round-")?
        .split('/')
        .next()?
        .parse()
        .ok()
}

/// Complete lines in a file; 0 if there is none.
fn lines_in(path: &Path) -> usize {
    std::fs::read(path).map_or(0, |bytes| bytes.iter().filter(|b| **b == b'\n').count())
}

/// Rows in results.csv, counted as the run writes it: whole lines after
/// the header.
fn rows_written(out: &Path) -> usize {
    lines_in(&out.join("results.csv")).saturating_sub(1)
}

// ---------------------------------------------------------------------------
// 1. kill -9 at seeded points of progress, then --resume.
// ---------------------------------------------------------------------------

/// Model requests of one pair: a look, the fix or another look, the end.
const REQUESTS_PER_PAIR: usize = 3;

/// The events a pair's trajectory holds when its last model request goes
/// out: the header, the checkout, the two first messages, and for each of
/// the two calls before its `model_call`, the answer, the command and its
/// output. Checked against every finished trajectory.
const EVENTS_BEFORE_LAST_CALL: usize = 12;

/// Where a round of the kill test stops its run. Each is followed by a wait
/// for a held model call, so the kill always finds a pair in flight.
#[derive(Debug)]
enum KillPoint {
    /// The m-th model request of the round, held by the server.
    Request(usize),
    /// Once k more rows are in results.csv; then every request is held.
    Rows(usize),
    /// Once this pair's trajectory has n events; then every request is held.
    Event((String, u32), usize),
}

#[test]
fn kill_9_at_seeded_points_then_resume_keeps_every_pair_once_and_whole() {
    const TASKS: usize = 12;
    const RUNS: u32 = 2;
    const KILLS: usize = 6;
    let fixture = Fixture::new();
    let tasks = world(&fixture, TASKS, false);
    let rounds = Rounds::default();
    let server = {
        let rounds = rounds.clone();
        ScriptedServer::start_with(move |request| {
            if let Some(number) = round_of(request) {
                rounds.pass(number);
            }
            planned_reply(request)
        })
    };
    let out = fixture.path("out");
    let runs = RUNS.to_string();
    let args_of = |round: usize| {
        let base_url = format!("http://{}/round-{round}/v1", server.addr());
        let mut args = with(
            &[],
            &["--model", "scripted", "--base-url", &base_url, "-j", "3"],
        );
        args.extend(["--runs".to_owned(), runs.clone()]);
        if round > 0 {
            args.push("--resume".to_owned());
        }
        args
    };
    // Every pair, in the order the runner starts them: epoch by epoch.
    let every: Vec<(String, u32)> = (1..=RUNS)
        .flat_map(|epoch| ids(TASKS).into_iter().map(move |id| (id, epoch)))
        .collect();
    let mut rng = Rng(0x0b0b_5eed);
    // How often each pair was found unfinished (a folder, no row) after a kill.
    let mut unfinished: BTreeMap<(String, u32), usize> = BTreeMap::new();

    for round in 0..KILLS {
        let before = results(&out);
        let missing: Vec<&(String, u32)> =
            every.iter().filter(|p| !before.contains_key(*p)).collect();
        // Each kill leaves a pair unfinished (below), so there is always one.
        assert!(!missing.is_empty(), "round {round}: nothing left to run");
        // Every request of the round but the last may be answered: then all
        // pairs but one end, and that one still needs the model.
        let needed = REQUESTS_PER_PAIR * missing.len();
        // Points early enough to leave work for the next rounds.
        let point = match round % 3 {
            1 if missing.len() >= 2 => KillPoint::Rows(rng.between(1, missing.len().min(7))),
            2 => {
                let pair = missing[rng.between(0, missing.len().min(3))].clone();
                KillPoint::Event(pair, rng.between(1, EVENTS_BEFORE_LAST_CALL + 1))
            }
            _ => KillPoint::Request(rng.between(1, needed.min(24) + 1)),
        };
        let hold_at = match point {
            KillPoint::Request(m) => Some(m),
            _ => None,
        };
        rounds.start(round, needed, hold_at);
        let mut child = Background::start(
            &fixture,
            &out,
            &tasks,
            &args_of(round),
            &format!("r{round}"),
        );
        match &point {
            KillPoint::Request(_) => {}
            KillPoint::Rows(k) => {
                wait_until("rows", HANG_GUARD, || {
                    assert!(child.exited().is_none(), "{}", child.stderr());
                    rows_written(&out) >= before.len() + k
                });
                rounds.freeze();
            }
            KillPoint::Event((task, epoch), n) => {
                // The first request comes after the unfinished attempts
                // were set aside: the trajectory read is this round's.
                rounds.wait_for("the first request", |r| r.received >= 1);
                let path = trajectory_path(&out, task, *epoch);
                wait_until("events", HANG_GUARD, || {
                    assert!(child.exited().is_none(), "{}", child.stderr());
                    lines_in(&path) >= *n
                });
                rounds.freeze();
            }
        }
        rounds.wait_for("a held model call", |r| r.held >= 1);
        child.signal(libc::SIGKILL);
        // -1: no exit code, killed by the signal. The run could not have
        // ended: one of its model calls is held.
        assert_eq!(
            child.wait(HANG_GUARD),
            -1,
            "round {round}:\n{}",
            child.stderr()
        );
        rounds.release();

        // The invariants hold after every kill.
        let rows = results(&out);
        for row in rows.values() {
            assert_row_trajectory(&out, row);
            assert_planned_verdict(row, "3", "2");
        }
        let found = folders(&out);
        let cut: Vec<&(String, u32)> = found
            .current
            .iter()
            .filter(|pair| !rows.contains_key(*pair))
            .collect();
        for pair in &cut {
            *unfinished.entry((*pair).clone()).or_default() += 1;
        }
        // The held call's pair had begun (its trajectory asked the model)
        // and had no row.
        assert!(!cut.is_empty(), "round {round}: no pair in flight");
        for (task, epoch, _, dir) in &found.attempts {
            assert!(
                !dir.join("row.json").exists(),
                "{}: a pair cut by kill -9 had no row",
                dir.display()
            );
            let path = dir.join("trajectory.jsonl");
            if std::fs::metadata(&path).is_ok_and(|m| m.len() > 0) {
                let events = events(&path);
                assert_eq!(events[0]["event"], "header", "{}", path.display());
                assert_eq!(count_of(&events, "header"), 1, "{}", path.display());
                assert_eq!(events[0]["epoch"], *epoch);
                assert_eq!(events[0]["task"]["id"], task.as_str());
            }
        }
        eprintln!(
            "round {round}: killed at {point:?}: {} rows (from {}), {} unfinished, {} attempts set aside",
            rows.len(),
            before.len(),
            cut.len(),
            found.attempts.len()
        );
    }

    // The last run: nothing is held.
    rounds.start(KILLS, usize::MAX, None);
    let last = run(&fixture, &out, &tasks, &args_of(KILLS));
    assert_eq!(last.code, 0, "stderr:\n{}", last.stderr);
    let rows = results(&out);
    let every: BTreeSet<(String, u32)> = every.into_iter().collect();
    assert_eq!(rows.keys().cloned().collect::<BTreeSet<_>>(), every);
    for row in rows.values() {
        assert_row_trajectory(&out, row);
        assert_planned_verdict(row, "3", "2");
        let (task, epoch) = row.pair();
        let events = events(&trajectory_path(&out, &task, epoch));
        let last_call = events
            .iter()
            .enumerate()
            .filter(|(_, e)| e["event"] == "model_call")
            .nth(REQUESTS_PER_PAIR - 1)
            .map(|(i, _)| i);
        assert_eq!(last_call, Some(EVENTS_BEFORE_LAST_CALL), "{task} {epoch}");
    }
    let found = folders(&out);
    assert_eq!(found.current, every);
    // Each attempt set aside is a pair found unfinished after a kill, at most
    // once per kill; each pair found unfinished was set aside.
    let mut attempts: BTreeMap<(String, u32), usize> = BTreeMap::new();
    for (task, epoch, _, dir) in &found.attempts {
        assert!(!dir.join("row.json").exists(), "{}", dir.display());
        *attempts.entry((task.clone(), *epoch)).or_default() += 1;
    }
    for (pair, times) in &unfinished {
        let set_aside = attempts.get(pair).copied().unwrap_or(0);
        assert!(
            (1..=*times).contains(&set_aside),
            "{pair:?}: unfinished after {times} kills, {set_aside} attempts set aside"
        );
    }
    for pair in attempts.keys() {
        assert!(
            unfinished.contains_key(pair),
            "{pair:?} set aside, never cut"
        );
    }
    assert!(!out.join("workdirs").exists(), "working copies were left");
    let run_json = read_json(&out.join("run.json"));
    // Every killed run had asked the model, so had written run.json.
    let resumes = run_json["resumed_at"].as_array().map_or(0, Vec::len);
    assert_eq!(resumes, KILLS, "{run_json}");
    assert_eq!(run_json["summary"]["rows"], TASKS * RUNS as usize);
    drop(server);
    assert_no_process_left(&fixture);
    eprintln!(
        "{KILLS} kills, {} pairs cut, {} attempts set aside",
        unfinished.len(),
        found.attempts.len()
    );
}

// ---------------------------------------------------------------------------
// 2. Resuming with other settings.
// ---------------------------------------------------------------------------

#[test]
fn resume_with_other_settings_is_refused_naming_them_but_jobs_and_filter_may_differ() {
    let fixture = Fixture::new();
    let tasks = world(&fixture, 3, true);
    let out = fixture.path("out");
    let oracle = vec!["--model".to_owned(), "oracle".to_owned()];
    let first = run(
        &fixture,
        &out,
        &tasks,
        &with(&oracle, &["--filter", "^t00$"]),
    );
    assert_eq!(first.code, 0, "stderr:\n{}", first.stderr);
    let csv_before = std::fs::read(out.join("results.csv")).expect("results.csv");
    let json_before = std::fs::read(out.join("run.json")).expect("run.json");

    let prompt = fixture.path("custom.toml");
    std::fs::write(
        &prompt,
        "name = \"custom\"\nsystem = \"You fix bugs.\"\ninstance = \"{{ problem_statement }}\"\n",
    )
    .expect("write prompt");
    let prompt = prompt.display().to_string();
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["--model", "oracle", "--max-turns", "3"],
            &["max_turns: was 50, now 3"],
        ),
        (
            &["--model", "other", "--base-url", "http://127.0.0.1:9/v1"],
            &["model: was \"oracle\", now \"other\""],
        ),
        (
            &["--model", "oracle", "--prompt", &prompt],
            &["prompt: was \"default@", "now \"custom@"],
        ),
        (
            &["--model", "oracle", "--test-timeout", "60"],
            &["test_timeout_s: was 1800.0, now 60.0"],
        ),
        (
            &["--model", "oracle", "--test-command", "pytest -x"],
            &["test_command: was (absent), now \"pytest -x\""],
        ),
    ];
    for (args, wanted) in cases {
        let mut all = args.to_vec();
        all.push("--resume");
        let refused = run(&fixture, &out, &tasks, &with(&[], &all));
        assert_eq!(refused.code, 2, "{args:?} stderr:\n{}", refused.stderr);
        for want in *wanted {
            assert!(
                refused.stderr.contains(want),
                "{args:?}: {want:?} missing from:\n{}",
                refused.stderr
            );
        }
        assert!(refused.stderr.contains("hint:"), "{}", refused.stderr);
        assert_eq!(
            std::fs::read(out.join("results.csv")).expect("csv"),
            csv_before,
            "{args:?}"
        );
        assert_eq!(
            std::fs::read(out.join("run.json")).expect("run.json"),
            json_before
        );
        assert_eq!(folders(&out).current.len(), 1, "{args:?}");
    }

    // Another -j and no filter: accepted, and only the missing pairs run.
    let resumed = run(
        &fixture,
        &out,
        &tasks,
        &with(&oracle, &["-j", "1", "--resume"]),
    );
    assert_eq!(resumed.code, 0, "stderr:\n{}", resumed.stderr);
    let rows = results(&out);
    assert_eq!(rows.len(), 3);
    let first_line = String::from_utf8(csv_before).expect("utf-8");
    assert!(first_line.ends_with(&format!("{}\n", rows[&("t00".to_owned(), 1)].line)));
    for row in rows.values() {
        assert_row_trajectory(&out, row);
        assert_planned_verdict(row, "2", "1");
    }
    assert!(folders(&out).attempts.is_empty());
}

// ---------------------------------------------------------------------------
// 3. Nothing to do, nothing to resume, a folder in use.
// ---------------------------------------------------------------------------

#[test]
fn resume_of_a_finished_run_does_nothing_and_keeps_its_exit_code() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let tasks = fixture.tasks(&[
        task("t00", &repo, &sha, TEST_COMMAND, json!({})),
        task("t01", &repo, &sha, TEST_COMMAND, json!({})),
        // An error row: the exit code of the run is 1, and stays 1.
        task(
            "t02",
            &repo,
            &sha,
            TEST_COMMAND,
            json!({"setup_command": "exit 3"}),
        ),
    ]);
    let server = agent(|_, _| None);
    let out = fixture.path("out");
    let args = model_args(&server);
    let first = run(&fixture, &out, &tasks, &args);
    assert_eq!(first.code, 1, "stderr:\n{}", first.stderr);
    let csv_before = std::fs::read(out.join("results.csv")).expect("results.csv");
    let requests = server.requests().len();
    assert_eq!(requests, 6);

    let again = run(&fixture, &out, &tasks, &with(&args, &["--resume"]));
    assert_eq!(again.code, 1, "stderr:\n{}", again.stderr);
    assert_eq!(
        server.requests().len(),
        requests,
        "the model was asked again"
    );
    assert_eq!(
        std::fs::read(out.join("results.csv")).expect("results.csv"),
        csv_before
    );
    let found = folders(&out);
    assert_eq!(found.current.len(), 3);
    assert!(found.attempts.is_empty());
    assert!(
        again.stdout.contains("3 of 3 runs finished"),
        "{}",
        again.stdout
    );

    // No run.json: nothing to resume, whether the folder exists or not.
    let missing = fixture.path("missing");
    let empty = fixture.path("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    for dir in [&missing, &empty] {
        let refused = run(&fixture, dir, &tasks, &with(&args, &["--resume"]));
        assert_eq!(refused.code, 2, "stderr:\n{}", refused.stderr);
        assert!(refused.stderr.contains("no run.json"), "{}", refused.stderr);
    }
    assert!(!missing.exists());
    assert_eq!(std::fs::read_dir(&empty).expect("read_dir").count(), 0);

    // A run folder in use, without --resume: refused, with the way out.
    let refused = run(&fixture, &out, &tasks, &args);
    assert_eq!(refused.code, 2, "stderr:\n{}", refused.stderr);
    assert!(refused.stderr.contains("not empty"), "{}", refused.stderr);
    assert!(refused.stderr.contains("--resume"), "{}", refused.stderr);
    assert_eq!(server.requests().len(), requests);
    assert_eq!(
        std::fs::read(out.join("results.csv")).expect("results.csv"),
        csv_before
    );
}

#[test]
fn resume_drops_a_torn_last_row_and_redoes_only_its_pair() {
    let fixture = Fixture::new();
    let tasks = world(&fixture, 3, false);
    let server = agent(|_, _| None);
    let out = fixture.path("out");
    let args = with(&model_args(&server), &["-j", "1"]);
    let first = run(&fixture, &out, &tasks, &args);
    assert_eq!(first.code, 0, "stderr:\n{}", first.stderr);
    let before = results(&out);
    // A crash in the middle of the last row: half of it, no newline.
    let csv = out.join("results.csv");
    let text = std::fs::read_to_string(&csv).expect("csv");
    let last = text.lines().last().expect("a row").to_owned();
    let whole = &text[..text.len() - last.len() - 1];
    std::fs::write(&csv, format!("{whole}{}", &last[..last.len() / 2])).expect("tear");
    let torn = before
        .values()
        .find(|row| row.line == last)
        .expect("the last row")
        .pair();

    let requests = server.requests().len();
    let resumed = run(&fixture, &out, &tasks, &with(&args, &["--resume"]));
    assert_eq!(resumed.code, 0, "stderr:\n{}", resumed.stderr);
    let asked: Vec<String> = new_requests(&server, requests).into_keys().collect();
    assert_eq!(asked, std::slice::from_ref(&torn.0));
    let after = results(&out);
    assert_eq!(after.len(), 3);
    for (pair, row) in &after {
        assert_row_trajectory(&out, row);
        assert_planned_verdict(row, "3", "2");
        if *pair != torn {
            assert_eq!(row.line, before[pair].line);
        }
    }
    assert!(
        std::fs::read_to_string(&csv)
            .expect("csv")
            .starts_with(whole),
        "the whole rows were rewritten"
    );
    // The torn pair's first attempt is kept aside, without a row: its row
    // never made it to results.csv whole.
    let found = folders(&out);
    assert_eq!(found.attempts.len(), 1);
    let (task, epoch, n, dir) = &found.attempts[0];
    assert_eq!((task, *epoch, *n), (&torn.0, 1, 1));
    assert!(!dir.join("row.json").exists());
    let events = events(&dir.join("trajectory.jsonl"));
    assert_eq!(events.last().expect("end")["event"], "end");
}

// ---------------------------------------------------------------------------
// 4. --retry-errors.
// ---------------------------------------------------------------------------

/// A server that answers 401 to the tasks in `broken` while `down` is set.
fn flaky_agent(broken: &'static [&'static str], down: Arc<AtomicBool>) -> ScriptedServer {
    agent(move |task, _| {
        (down.load(Ordering::SeqCst) && broken.contains(&task))
            .then(|| error_reply(401, "Incorrect API key provided"))
    })
}

#[test]
fn retry_errors_redoes_exactly_the_error_rows_and_keeps_the_old_attempts() {
    let fixture = Fixture::new();
    let tasks = world(&fixture, 6, false);
    let down = Arc::new(AtomicBool::new(true));
    let server = flaky_agent(&["t01", "t04"], Arc::clone(&down));
    let out = fixture.path("out");
    let args = with(&model_args(&server), &["-j", "2"]);
    let first = run(&fixture, &out, &tasks, &args);
    assert_eq!(first.code, 1, "stderr:\n{}", first.stderr);
    let before = results(&out);
    assert_eq!(before.len(), 6);
    for (pair, row) in &before {
        assert_row_trajectory(&out, row);
        if pair.0 == "t01" || pair.0 == "t04" {
            assert_eq!(row.get("status"), "error", "{}", row.line);
            assert_eq!(row.get("exit_reason"), "api_error", "{}", row.line);
            assert!(row.get("error").contains("401"), "{}", row.line);
        } else {
            assert_planned_verdict(row, "3", "2");
        }
    }
    let csv_before = std::fs::read(out.join("results.csv")).expect("results.csv");
    down.store(false, Ordering::SeqCst);

    // Plain --resume keeps the error rows.
    let requests = server.requests().len();
    let plain = run(&fixture, &out, &tasks, &with(&args, &["--resume"]));
    assert_eq!(plain.code, 1, "stderr:\n{}", plain.stderr);
    assert_eq!(server.requests().len(), requests);
    assert_eq!(
        std::fs::read(out.join("results.csv")).expect("results.csv"),
        csv_before
    );
    assert!(folders(&out).attempts.is_empty());

    let retried = run(
        &fixture,
        &out,
        &tasks,
        &with(&args, &["--resume", "--retry-errors"]),
    );
    assert_eq!(retried.code, 0, "stderr:\n{}", retried.stderr);
    let asked: BTreeSet<String> = new_requests(&server, requests).into_keys().collect();
    assert_eq!(asked, BTreeSet::from(["t01".to_owned(), "t04".to_owned()]));
    let after = results(&out);
    assert_eq!(after.len(), 6);
    for (pair, row) in &after {
        assert_row_trajectory(&out, row);
        assert_planned_verdict(row, "3", "2");
        if pair.0 != "t01" && pair.0 != "t04" {
            assert_eq!(row.line, before[pair].line, "a kept row changed");
        }
    }
    let found = folders(&out);
    let set_aside: BTreeSet<&str> = found.attempts.iter().map(|a| a.0.as_str()).collect();
    assert_eq!(set_aside, BTreeSet::from(["t01", "t04"]));
    for (task, epoch, n, dir) in &found.attempts {
        assert_eq!((*epoch, *n), (1, 1), "{}", dir.display());
        assert!(dir.ends_with(format!("{task}/epoch-1.attempt-1")));
        let old = read_json(&dir.join("row.json"));
        assert_eq!(old["status"], "error", "{old}");
        assert_eq!(old["exit_reason"], "api_error", "{old}");
        assert_eq!(old["task_id"], task.as_str());
        let events = events(&dir.join("trajectory.jsonl"));
        assert_eq!(count_of(&events, "header"), 1);
        assert_eq!(events.last().expect("end")["status"], "error");
    }
}

#[test]
fn retry_errors_with_a_filter_keeps_the_error_rows_of_other_tasks() {
    let fixture = Fixture::new();
    let tasks = world(&fixture, 4, false);
    let down = Arc::new(AtomicBool::new(true));
    let server = flaky_agent(&["t01", "t03"], Arc::clone(&down));
    let out = fixture.path("out");
    let args = model_args(&server);
    let first = run(&fixture, &out, &tasks, &args);
    assert_eq!(first.code, 1, "stderr:\n{}", first.stderr);
    let before = results(&out);
    down.store(false, Ordering::SeqCst);

    let requests = server.requests().len();
    let retried = run(
        &fixture,
        &out,
        &tasks,
        &with(&args, &["--resume", "--retry-errors", "--filter", "^t01$"]),
    );
    let asked: BTreeSet<String> = new_requests(&server, requests).into_keys().collect();
    assert_eq!(asked, BTreeSet::from(["t01".to_owned()]));
    let after = results(&out);
    assert_planned_verdict(&after[&("t01".to_owned(), 1)], "3", "2");
    // t03 was not selected: its row is neither redone nor lost.
    let key = ("t03".to_owned(), 1);
    let kept = after.get(&key).unwrap_or_else(|| {
        panic!(
            "the error row of t03, outside --filter, vanished from results.csv; stderr:\n{}",
            retried.stderr
        )
    });
    assert_eq!(kept.line, before[&key].line);
    assert_eq!(after.len(), 4);
}

// ---------------------------------------------------------------------------
// 5. Ctrl-C, then --resume.
// ---------------------------------------------------------------------------

#[test]
fn ctrl_c_then_resume_redoes_the_interrupted_pairs_and_runs_the_rest() {
    let fixture = Fixture::new();
    let tasks = world(&fixture, 6, false);
    // Every task but t00 waits at its first model call until the gate opens,
    // after the interrupted run is over.
    let gate = Latch::new();
    let held = gate.clone();
    let server = agent(move |task, _| {
        if task != "t00" {
            held.wait();
        }
        None
    });
    let out = fixture.path("out");
    let args = with(&model_args(&server), &["-j", "2"]);
    let mut child = Background::start(&fixture, &out, &tasks, &args, "first");
    // t00 finishes; t01 and t02 are then both waiting on the model.
    wait_until("t00's row and t01, t02 asking", HANG_GUARD, || {
        let asked = requests_per_task(&server);
        // The header and one row; rows are read strictly once the run
        // is over, not while it writes.
        let lines = std::fs::read_to_string(out.join("results.csv"))
            .map_or(0, |text| text.matches('\n').count());
        lines == 2 && asked.contains_key("t01") && asked.contains_key("t02")
    });
    child.signal(libc::SIGINT);
    let code = child.wait(HANG_GUARD);
    assert_eq!(code, 130, "stderr:\n{}", child.stderr());
    gate.open();

    let before = results(&out);
    assert_eq!(
        before.keys().map(|(t, _)| t.as_str()).collect::<Vec<_>>(),
        ["t00", "t01", "t02"]
    );
    assert_planned_verdict(&before[&("t00".to_owned(), 1)], "3", "2");
    for id in ["t01", "t02"] {
        let row = &before[&(id.to_owned(), 1)];
        assert_eq!(row.get("status"), "error", "{}", row.line);
        assert_eq!(row.get("exit_reason"), "interrupted", "{}", row.line);
        assert_row_trajectory(&out, row);
    }
    assert_eq!(folders(&out).current.len(), 3, "tasks that never started");

    let requests = server.requests().len();
    let resumed = run(&fixture, &out, &tasks, &with(&args, &["--resume"]));
    assert_eq!(resumed.code, 0, "stderr:\n{}", resumed.stderr);
    assert!(
        resumed.stderr.contains(
            "1 row kept, 2 dropped to redo, 2 unfinished attempts set aside, 5 runs to go"
        ),
        "{}",
        resumed.stderr
    );
    let asked = new_requests(&server, requests);
    assert_eq!(
        asked.keys().map(String::as_str).collect::<Vec<_>>(),
        ["t01", "t02", "t03", "t04", "t05"]
    );
    let after = results(&out);
    assert_eq!(after.len(), 6);
    for row in after.values() {
        assert_row_trajectory(&out, row);
        assert_planned_verdict(row, "3", "2");
    }
    let t00 = ("t00".to_owned(), 1);
    assert_eq!(after[&t00].line, before[&t00].line);
    let found = folders(&out);
    let set_aside: Vec<&str> = found.attempts.iter().map(|a| a.0.as_str()).collect();
    assert_eq!(
        set_aside.iter().copied().collect::<BTreeSet<_>>(),
        BTreeSet::from(["t01", "t02"])
    );
    for (_, _, n, dir) in &found.attempts {
        assert_eq!(*n, 1);
        let old = read_json(&dir.join("row.json"));
        assert_eq!(old["exit_reason"], "interrupted", "{old}");
        let events = events(&dir.join("trajectory.jsonl"));
        assert_eq!(events.last().expect("end")["exit_reason"], "interrupted");
    }
}

// ---------------------------------------------------------------------------
// 6. Shards and merge.
// ---------------------------------------------------------------------------

fn merge(out: &Path, runs: &[&Path]) -> RunOutput {
    let output = onebash()
        .arg("merge")
        .arg(out)
        .args(runs)
        .output()
        .expect("run onebash merge");
    RunOutput::of(output, out)
}

/// The columns of CONTRACT.md that depend on neither time nor price, of
/// every row.
fn outcomes(out: &Path) -> BTreeSet<Vec<String>> {
    const LEFT_OUT: &[&str] = &["cost_usd", "agent_seconds", "test_seconds", "wall_seconds"];
    results(out)
        .values()
        .map(|row| {
            CONTRACT_COLUMNS
                .iter()
                .filter(|c| !LEFT_OUT.contains(c))
                .map(|c| row.get(c).to_owned())
                .collect()
        })
        .collect()
}

#[test]
fn shards_merged_equal_the_whole_run_and_bad_merges_are_refused() {
    let fixture = Fixture::new();
    let tasks = world(&fixture, 9, true);
    let oracle = vec!["--model".to_owned(), "oracle".to_owned()];
    let whole = fixture.path("whole");
    let done = run(&fixture, &whole, &tasks, &oracle);
    assert_eq!(done.code, 0, "stderr:\n{}", done.stderr);
    let shards: Vec<PathBuf> = (1..=3).map(|k| fixture.path(&format!("s{k}"))).collect();
    for (k, shard) in shards.iter().enumerate() {
        let spec = format!("{}/3", k + 1);
        let done = run(&fixture, shard, &tasks, &with(&oracle, &["--shard", &spec]));
        assert_eq!(done.code, 0, "stderr:\n{}", done.stderr);
        assert_eq!(results(shard).len(), 3);
    }
    let [s1, s2, s3] = [&shards[0], &shards[1], &shards[2]].map(PathBuf::as_path);

    let merged = fixture.path("merged");
    let joined = merge(&merged, &[s1, s2, s3]);
    assert_eq!(joined.code, 0, "stderr:\n{}", joined.stderr);
    assert_eq!(outcomes(&merged), outcomes(&whole));
    assert_eq!(outcomes(&merged).len(), 9);
    for row in results(&merged).values() {
        assert_row_trajectory(&merged, row);
        assert_planned_verdict(row, "2", "1");
    }
    for (i, id) in ids(9).iter().enumerate() {
        let shard = shards[i % 3].as_path();
        let dir = |root: &Path| root.join("tasks").join(id).join("epoch-1");
        for file in ["trajectory.jsonl", "patch.diff", "test.log"] {
            assert_eq!(
                std::fs::read(dir(&merged).join(file)).expect("merged file"),
                std::fs::read(dir(shard).join(file)).expect("shard file"),
                "{id}/{file}"
            );
        }
    }
    let run_json = read_json(&merged.join("run.json"));
    let from: Vec<String> = [s1, s2, s3]
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    assert_eq!(run_json["merged_from"], json!(from));
    assert_eq!(
        run_json["fingerprint"],
        read_json(&whole.join("run.json"))["fingerprint"]
    );

    // Overlapping shards: the same shard twice, or shards of two splits.
    let half = fixture.path("half");
    let done = run(&fixture, &half, &tasks, &with(&oracle, &["--shard", "1/2"]));
    assert_eq!(done.code, 0, "stderr:\n{}", done.stderr);
    // Rows are in the order tasks finished, so the pair named is any shared one.
    let cases: [(&str, [&Path; 2], &[&str]); 2] = [
        ("twice", [s1, s1], &["t00", "t03", "t06"]),
        ("split", [s1, &half], &["t00", "t06"]),
    ];
    for (name, runs, shared) in cases {
        let target = fixture.path(name);
        let refused = merge(&target, &runs);
        assert_eq!(refused.code, 2, "{name}: stderr:\n{}", refused.stderr);
        let named = shared.iter().any(|id| {
            refused.stderr.contains(&format!(
                "{id} epoch 1 is in both {} and {}",
                runs[0].display(),
                runs[1].display()
            ))
        });
        assert!(named, "{name}: {}", refused.stderr);
        assert!(!target.exists(), "{name}: the folder was made");
    }

    // A shard run with other settings.
    let other = fixture.path("other");
    let done = run(
        &fixture,
        &other,
        &tasks,
        &with(&oracle, &["--shard", "2/3", "--max-turns", "3"]),
    );
    assert_eq!(done.code, 0, "stderr:\n{}", done.stderr);
    let refused = merge(&fixture.path("mixed"), &[s1, &other, s3]);
    assert_eq!(refused.code, 2, "stderr:\n{}", refused.stderr);
    assert!(
        refused.stderr.contains("max_turns: was 50, now 3"),
        "{}",
        refused.stderr
    );
    assert!(!fixture.path("mixed").exists());

    // A merged folder is never written over.
    let csv_before = std::fs::read(merged.join("results.csv")).expect("csv");
    let refused = merge(&merged, &[s1, s2, s3]);
    assert_eq!(refused.code, 2, "stderr:\n{}", refused.stderr);
    assert!(refused.stderr.contains("not empty"), "{}", refused.stderr);
    assert_eq!(
        std::fs::read(merged.join("results.csv")).expect("csv"),
        csv_before
    );

    // A shard killed in the middle of a row: refused, with the way out,
    // which works.
    let csv = s3.join("results.csv");
    let text = std::fs::read_to_string(&csv).expect("csv");
    let last = text.lines().last().expect("a row").to_owned();
    let mut torn = text.clone();
    torn.push_str(&last[..last.len() / 2]);
    std::fs::write(&csv, torn).expect("tear");
    let refused = merge(&fixture.path("torn"), &[s1, s2, s3]);
    assert_eq!(refused.code, 2, "stderr:\n{}", refused.stderr);
    assert!(refused.stderr.contains("torn"), "{}", refused.stderr);
    assert!(refused.stderr.contains("--resume"), "{}", refused.stderr);
    let resumed = run(
        &fixture,
        s3,
        &tasks,
        &with(&oracle, &["--shard", "3/3", "--resume"]),
    );
    assert_eq!(resumed.code, 0, "stderr:\n{}", resumed.stderr);
    assert_eq!(std::fs::read_to_string(&csv).expect("csv"), text);
    let joined = merge(&fixture.path("again"), &[s1, s2, s3]);
    assert_eq!(joined.code, 0, "stderr:\n{}", joined.stderr);
    assert_eq!(outcomes(&fixture.path("again")), outcomes(&whole));
}

// ---------------------------------------------------------------------------
// 7. --runs.
// ---------------------------------------------------------------------------

#[test]
fn runs_3_gives_every_task_epochs_1_to_3_each_with_its_folder() {
    let fixture = Fixture::new();
    let tasks = world(&fixture, 2, true);
    let out = fixture.path("out");
    let done = run(
        &fixture,
        &out,
        &tasks,
        &with(&[], &["--model", "oracle", "--runs", "3"]),
    );
    assert_eq!(done.code, 0, "stderr:\n{}", done.stderr);
    let rows = results(&out);
    let expected: BTreeSet<(String, u32)> = ids(2)
        .into_iter()
        .flat_map(|id| (1..=3).map(move |epoch| (id.clone(), epoch)))
        .collect();
    assert_eq!(rows.keys().cloned().collect::<BTreeSet<_>>(), expected);
    for row in rows.values() {
        assert_row_trajectory(&out, row);
        assert_planned_verdict(row, "2", "1");
    }
    let found = folders(&out);
    assert_eq!(found.current, expected);
    assert!(found.attempts.is_empty());
}

// ---------------------------------------------------------------------------
// One onebash a run folder.
// ---------------------------------------------------------------------------

/// Holds `path` as a `flock` the way a running onebash holds its run
/// folder's `run.lock`, until dropped.
struct HeldLock {
    _file: std::fs::File,
}

impl HeldLock {
    fn take(path: &Path) -> HeldLock {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::create(path).expect("lock file");
        // SAFETY: flock on a descriptor this test owns.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        assert_eq!(rc, 0, "the lock is free");
        HeldLock { _file: file }
    }
}

#[test]
fn a_run_folder_in_use_by_another_onebash_is_refused_and_left_as_it_is() {
    let fixture = Fixture::new();
    let tasks = crate::support::harness::small_task(&fixture, "true", json!({}));
    let out = fixture.path("out");
    // A first run, then another onebash in the folder (a resume started
    // twice, say) while a resume is asked for.
    let first = fixture.run_noop(&tasks, &[]);
    assert_eq!(first.code, 0, "stderr:\n{}", first.stderr);
    let before = std::fs::read(out.join("results.csv")).expect("results.csv");
    let held = HeldLock::take(&out.join("run.lock"));
    let refused = fixture.run_noop(&tasks, &["--resume", "--retry-errors"]);
    assert_eq!(refused.code, 2, "stderr:\n{}", refused.stderr);
    assert!(
        refused.stderr.contains("is in use by another onebash"),
        "{}",
        refused.stderr
    );
    assert_eq!(
        std::fs::read(out.join("results.csv")).expect("results.csv"),
        before
    );
    // Nothing set aside: the task's folder is where it was.
    assert!(out.join("tasks/t/epoch-1/trajectory.jsonl").is_file());
    assert!(!out.join("tasks/t/epoch-1.attempt-1").exists());
    // Once the other one is gone, the folder is free again.
    drop(held);
    let again = fixture.run_noop(&tasks, &["--resume"]);
    assert_eq!(again.code, 0, "stderr:\n{}", again.stderr);
}
