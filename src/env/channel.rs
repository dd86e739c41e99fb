//! The channel into a container: one long-lived `ENGINE exec -i` running
//! a server of bash (channel_server.sh) per container, through which each
//! of the task's commands goes, instead of one `ENGINE exec` per command
//! (150-390 ms each, nearly all of it the engine's own work). Why a bash
//! server and not a helper binary copied in:
//! docs/decisions/0010-container-command-channel.md.
//!
//! Owns the protocol: a request is one line of bash assignments with every
//! value quoted byte for byte; the server answers `NONCE start`, the
//! command's output as written, then `NONCE end STATUS`, with a fresh
//! random nonce per request that no command sees before it runs. Output
//! is read with today's caps, head and tail. It does not decide what to do
//! when the channel breaks (container.rs reopens it, or falls back to one
//! exec per command) nor how a timed-out command is killed (the caller's
//! future, polled at the deadline).

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::sys::exec::{
    CapturedOutput, CommandOutcome, ExecError, KEEP_HEAD_BYTES, KEEP_TAIL_BYTES, Server, Spawn,
    start_server,
};

/// The server's script, run as `bash -c SERVER bash NONCE`.
pub(super) const SERVER: &str = include_str!("channel_server.sh");

/// How long a new server may take to say it is ready: the engine's exec
/// on a busy machine, not the server, is what takes time.
const READY_WITHIN: Duration = Duration::from_secs(120);
/// After a timed-out command's processes were killed, how long the server
/// may take to end it (its sweep) before the channel counts as lost.
const END_AFTER_KILL: Duration = Duration::from_secs(30);
/// How long a server whose channel broke may take to exit (its exit code
/// is the command's), before it is killed.
const EXIT_AFTER_LOSS: Duration = Duration::from_secs(10);
/// The end of the server's stderr kept for messages.
const STDERR_KEPT: usize = 4096;

/// One command for the server.
#[derive(Debug)]
pub(super) struct Request<'a> {
    pub script: &'a str,
    pub workdir: &'a str,
    /// Exported for the command, on top of the image's environment.
    pub vars: Vec<(&'a str, &'a str)>,
    /// `ONEBASH_COMMAND`'s value: every process of the command carries it.
    pub mark: &'a str,
    /// `ulimit -f`, in blocks of 1 KiB.
    pub file_blocks: u64,
    pub timeout: Duration,
}

/// Why a channel could not be opened, or broke: container.rs puts it in
/// the command's notice.
#[derive(Debug, thiserror::Error)]
pub(super) enum ChannelError {
    /// The engine's exec of the server could not be started.
    #[error("{0}")]
    Start(#[source] ExecError),
    /// The request cannot be written as a line of bash assignments.
    #[error("{0}")]
    Request(#[source] ExecError),
    /// The server stopped answering as it should: `how`, then the end of
    /// what it wrote to its stderr (`said`, empty when nothing).
    #[error("{how}{}", if said.is_empty() { String::new() } else { format!("; it said: {said}") })]
    Broke { how: Broke, said: String },
}

/// How a channel broke.
#[derive(Debug, thiserror::Error)]
pub(super) enum Broke {
    /// `status` is how the server's exec ended, in words.
    #[error("its server ended before it was ready ({status})")]
    EndedBeforeReady { status: String },
    #[error("its server did not say it was ready within {seconds} s")]
    NotReady { seconds: u64 },
    #[error("the request could not be sent: {0}")]
    Send(#[source] std::io::Error),
    #[error("its server ended before the command started")]
    EndedBeforeStart,
    /// Lost while a command ran: `status` is how the server's exec ended.
    #[error("{why} ({status})")]
    Lost { why: Lost, status: String },
}

/// Why a channel was lost while a command ran.
#[derive(Debug, thiserror::Error)]
pub(super) enum Lost {
    #[error("its server did not start the command before its timeout")]
    StartTimeout,
    #[error("its server's end line is not one it writes")]
    BadEndLine,
    #[error("its server ended during the command")]
    EndedDuring,
    /// The caller's kill of the timed-out command's processes failed.
    #[error("the command timed out, and killing its processes in the container failed: {0}")]
    KillFailed(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("the command timed out, and its server did not end it within {seconds} s of the kill")]
    NotEnded { seconds: u64 },
}

/// What became of a request.
#[derive(Debug)]
pub(super) enum Reply {
    /// The server ran the command and said how it ended.
    Ended(CommandOutcome),
    /// The channel broke before the command started: nothing of it ran,
    /// and it may be sent again on a new channel.
    NotStarted(ChannelError),
    /// The channel broke while the command ran (it killed the server,
    /// say): what came before, how the server's exec ended, and why.
    Lost {
        outcome: CommandOutcome,
        why: ChannelError,
    },
}

/// An open channel into one container.
pub(super) struct Channel {
    server: Server,
    /// Read from the server's stdout and not yet taken.
    unread: Vec<u8>,
    /// The end of what the server wrote on stderr.
    stderr: Arc<Mutex<VecDeque<u8>>>,
    /// The task reading it, done at the stderr's end.
    stderr_read: Option<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel").finish_non_exhaustive()
    }
}

impl Channel {
    /// Starts the server `spawn` names (the engine's `exec -i` of
    /// [`SERVER`] with `nonce` as its argument: [`server_args`]) and waits
    /// for its `ready` line. The error says what the engine or the server
    /// said.
    pub(super) async fn open(spawn: Spawn<'_>, nonce: &str) -> Result<Channel, ChannelError> {
        let server = start_server(spawn).await.map_err(ChannelError::Start)?;
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let mut server = server;
        let stderr_read = server
            .stderr
            .take()
            .map(|pipe| tokio::spawn(keep_tail(pipe, Arc::clone(&stderr))));
        let mut channel = Channel {
            server,
            unread: Vec::new(),
            stderr,
            stderr_read,
        };
        let ready = format!("{nonce} ready\n");
        let deadline = tokio::time::Instant::now() + READY_WITHIN;
        loop {
            if let Some(at) = find(&channel.unread, ready.as_bytes()) {
                channel.unread.drain(..at + ready.len());
                return Ok(channel);
            }
            tokio::select! {
                read = channel.fill() => if !read {
                    let status = channel.exit_status().await;
                    return Err(channel.broke(Broke::EndedBeforeReady { status }));
                },
                _ = tokio::time::sleep_until(deadline) => {
                    return Err(channel.broke(Broke::NotReady {
                        seconds: READY_WITHIN.as_secs(),
                    }));
                }
            }
        }
    }

    /// Runs one command through the server. At the command's deadline
    /// `kill` (which kills the command's processes in the container) is
    /// awaited while the output is still read; the server then ends the
    /// command, which counts as timed out.
    pub(super) async fn run<K, E>(&mut self, request: &Request<'_>, kill: K) -> Reply
    where
        K: Future<Output = Result<(), E>>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let start = Instant::now();
        let nonce = nonce();
        let line = match request_line(&nonce, request) {
            Ok(line) => line,
            Err(err) => return Reply::NotStarted(ChannelError::Request(err)),
        };
        if let Err(err) = self.server.stdin.write_all(line.as_bytes()).await {
            return Reply::NotStarted(self.broke(Broke::Send(err)));
        }
        let deadline = tokio::time::Instant::from_std(start + request.timeout);
        let started = format!("{nonce} start\n");
        loop {
            if let Some(at) = find(&self.unread, started.as_bytes()) {
                // Anything before it is no command's: a process of an
                // earlier command's that wrote after its end (none can,
                // since the server kills them; dropped all the same).
                self.unread.drain(..at + started.len());
                break;
            }
            let keep = self.unread.len().min(started.len() - 1);
            self.unread.drain(..self.unread.len() - keep);
            tokio::select! {
                read = self.fill() => if !read {
                    return Reply::NotStarted(self.broke(Broke::EndedBeforeStart));
                },
                _ = tokio::time::sleep_until(deadline) => {
                    // It may have started it all the same (its start line
                    // late): never sent again, it is killed as a timed-out
                    // command is, and the channel is given up.
                    let output = CapturedOutput::new(KEEP_HEAD_BYTES, KEEP_TAIL_BYTES);
                    let _ = kill.await;
                    return self.lost(output, true, start, Lost::StartTimeout).await;
                }
            }
        }
        self.until_end(&nonce, start, deadline, kill).await
    }

    /// The command's output up to its end line, and how it ended.
    async fn until_end<K, E>(
        &mut self,
        nonce: &str,
        start: Instant,
        deadline: tokio::time::Instant,
        kill: K,
    ) -> Reply
    where
        K: Future<Output = Result<(), E>>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let ended = format!("{nonce} end ");
        let mut output = CapturedOutput::new(KEEP_HEAD_BYTES, KEEP_TAIL_BYTES);
        let mut kill = std::pin::pin!(kill);
        let mut timed_out = false;
        let mut killed: Option<Result<(), E>> = None;
        let mut grace = deadline;
        // Once the end line has come, only its status is awaited: the
        // command is over, and its deadline no longer counts.
        let mut over = false;
        let status = loop {
            if let Some(at) = find(&self.unread, ended.as_bytes()) {
                over = true;
                output.push(&self.unread[..at]);
                self.unread.drain(..at);
                if let Some(newline) = self.unread.iter().position(|&b| b == b'\n') {
                    let status = &self.unread[ended.len()..newline];
                    let status = std::str::from_utf8(status)
                        .ok()
                        .and_then(|s| s.parse::<i32>().ok());
                    self.unread.drain(..=newline);
                    match status {
                        Some(status) => break status,
                        None => {
                            return self.lost(output, timed_out, start, Lost::BadEndLine).await;
                        }
                    }
                }
            } else {
                let keep = self.unread.len().min(ended.len() - 1);
                let take = self.unread.len() - keep;
                output.push(&self.unread[..take]);
                self.unread.drain(..take);
            }
            tokio::select! {
                read = self.fill() => if !read {
                    return self.lost(output, timed_out, start, Lost::EndedDuring).await;
                },
                _ = tokio::time::sleep_until(deadline), if !timed_out && !over => {
                    timed_out = true;
                    grace = tokio::time::Instant::now() + END_AFTER_KILL;
                },
                done = &mut kill, if timed_out && killed.is_none() => {
                    killed = Some(done);
                    grace = tokio::time::Instant::now() + END_AFTER_KILL;
                },
                _ = tokio::time::sleep_until(grace), if timed_out && killed.is_some() => {
                    let why = match killed.take() {
                        Some(Err(err)) => Lost::KillFailed(Box::new(err)),
                        _ => Lost::NotEnded { seconds: END_AFTER_KILL.as_secs() },
                    };
                    return self.lost(output, timed_out, start, why).await;
                }
            }
        };
        let (exit_code, signal) = if timed_out {
            // As a killed client reported it before the channel.
            (128 + libc::SIGKILL, Some(libc::SIGKILL))
        } else {
            (status, None)
        };
        Reply::Ended(CommandOutcome {
            exit_code,
            signal,
            timed_out,
            duration: start.elapsed(),
            output,
            notice: None,
        })
    }

    /// The reply of a command whose channel broke while it ran; the rest
    /// of the output is taken first.
    async fn lost(
        &mut self,
        mut output: CapturedOutput,
        timed_out: bool,
        start: Instant,
        why: Lost,
    ) -> Reply {
        output.push(&self.unread);
        self.unread.clear();
        let status = self.exit_status().await;
        let why = self.broke(Broke::Lost { why, status });
        let exit_code = match self.server.child.try_wait() {
            Ok(Some(status)) => status.code().unwrap_or(-1),
            _ => -1,
        };
        Reply::Lost {
            outcome: CommandOutcome {
                exit_code,
                signal: None,
                timed_out,
                duration: start.elapsed(),
                output,
                notice: None,
            },
            why,
        }
    }

    /// Reads what the server wrote next into `unread`; false at its end.
    /// Straight into `unread`'s spare room (cancel-safe, as `select!`
    /// needs): no buffer held across the wait, no copy.
    async fn fill(&mut self) -> bool {
        self.unread.reserve(64 * 1024);
        matches!(self.server.stdout.read_buf(&mut self.unread).await, Ok(n) if n > 0)
    }

    /// How the server's exec ended, waiting a little for it (then killing
    /// it), as words for a message.
    async fn exit_status(&mut self) -> String {
        let waited = tokio::time::timeout(EXIT_AFTER_LOSS, self.server.child.wait()).await;
        match waited {
            Ok(Ok(status)) => {
                // What it said last is read before it is told.
                if let Some(reading) = self.stderr_read.take() {
                    let _ = tokio::time::timeout(EXIT_AFTER_LOSS, reading).await;
                }
                status.to_string()
            }
            Ok(Err(err)) => format!("waiting for it failed: {err}"),
            Err(_) => {
                self.server.kill();
                format!(
                    "still running after {} s, killed",
                    EXIT_AFTER_LOSS.as_secs()
                )
            }
        }
    }

    /// `how` the channel broke, with the end of the server's stderr.
    fn broke(&self, how: Broke) -> ChannelError {
        let said = {
            let tail = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
            let (a, b) = tail.as_slices();
            let mut bytes = a.to_vec();
            bytes.extend_from_slice(b);
            String::from_utf8_lossy(&bytes).trim().to_owned()
        };
        ChannelError::Broke { how, said }
    }
}

/// Reads `stderr` to its end, keeping its last [`STDERR_KEPT`] bytes.
async fn keep_tail(mut stderr: tokio::process::ChildStderr, tail: Arc<Mutex<VecDeque<u8>>>) {
    let mut chunk = [0u8; 4096];
    while let Ok(n) = stderr.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
        tail.extend(&chunk[..n]);
        let over = tail.len().saturating_sub(STDERR_KEPT);
        tail.drain(..over);
    }
}

/// The engine's arguments after its program that start the server in
/// `container`, in `workdir` (where every command starts), as `user`
/// (`None`: the image's).
pub(super) fn server_args(
    container: &str,
    workdir: &str,
    nonce: &str,
    user: Option<&str>,
) -> Vec<String> {
    let mut args: Vec<String> = vec!["exec".into(), "-i".into(), "-w".into(), workdir.into()];
    if let Some(user) = user {
        args.extend(["-u".into(), user.into()]);
    }
    args.extend([
        container.into(),
        "bash".into(),
        "-c".into(),
        SERVER.into(),
        "bash".into(),
        nonce.into(),
    ]);
    args
}

/// Where `needle` first is in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack, needle)
}

/// The request line for `request`: bash assignments the server evaluates.
/// A script holding a NUL byte cannot be a `bash -c` argument, as it could
/// not be one of the engine's exec either: the same error.
fn request_line(nonce: &str, request: &Request<'_>) -> Result<String, ExecError> {
    let texts = [request.script, request.workdir, request.mark]
        .into_iter()
        .chain(request.vars.iter().flat_map(|(k, v)| [*k, *v]));
    for text in texts {
        if text.contains('\0') {
            return Err(ExecError::Spawn {
                program: "bash".to_owned(),
                cwd: request.workdir.to_owned(),
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "nul byte found in provided data",
                ),
            });
        }
    }
    let mut line = String::with_capacity(request.script.len() + 256);
    line.push_str("__ob_n=");
    line.push_str(nonce);
    line.push_str("; __ob_m=");
    quote(request.mark, &mut line);
    line.push_str(&format!("; __ob_f={}; __ob_w=", request.file_blocks));
    quote(request.workdir, &mut line);
    line.push_str("; __ob_e=(");
    for (key, value) in &request.vars {
        quote(&format!("{key}={value}"), &mut line);
        line.push(' ');
    }
    line.push_str("); __ob_s=");
    quote(request.script, &mut line);
    line.push('\n');
    Ok(line)
}

/// `text` as a bash `$'...'` word that means exactly its bytes: every byte
/// that is a quote, a backslash, a control character or not ASCII written
/// `\xHH`, so the line has no newline and reads the same in any locale.
fn quote(text: &str, out: &mut String) {
    out.push_str("$'");
    for &byte in text.as_bytes() {
        if (byte.is_ascii_graphic() && byte != b'\'' && byte != b'\\') || byte == b' ' {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out.push('\'');
}

/// A fresh nonce: 128 random bits in hex, from the kernel; if it cannot
/// give them, from the standard library's random hasher keys and the time.
pub(super) fn nonce() -> String {
    let mut bytes = [0u8; 16];
    let random = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes));
    if random.is_err() {
        use std::hash::{BuildHasher, Hasher};
        for (i, part) in bytes.chunks_mut(8).enumerate() {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_usize(i);
            hasher.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos()),
            );
            part.copy_from_slice(&hasher.finish().to_le_bytes());
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::exec::CommandEnv;
    use crate::sys::limits::ChildSetup;

    /// A stand-in for a container: the server under bwrap in a PID
    /// namespace of its own (as in a container, the server's sweep sees
    /// only its own processes; on the host it would see onebash's), in a
    /// temporary folder. `None`, with a line, where bwrap is missing or
    /// refused, unless `CI` is set (.ci/run installs it): then it fails.
    struct StandIn {
        dir: tempfile::TempDir,
        channel: Channel,
    }

    async fn stand_in() -> Option<StandIn> {
        stand_in_with("").await
    }

    /// [`stand_in`] whose server starts after `before` (a bash line run
    /// first, in the server's own process).
    async fn stand_in_with(before: &str) -> Option<StandIn> {
        let dir = tempfile::tempdir().expect("tempdir");
        let nonce = nonce();
        let workdir = dir.path().display().to_string();
        let server = format!("{before}\n{SERVER}");
        let args = [
            "--dev-bind",
            "/",
            "/",
            "--unshare-pid",
            "--proc",
            "/proc",
            "--die-with-parent",
            "--chdir",
            &workdir,
            "bash",
            "-c",
            &server,
            "bash",
            &nonce,
        ];
        let env = CommandEnv::for_task("channel-test");
        let child = ChildSetup::none();
        let spawn = Spawn {
            program: "bwrap".into(),
            args: args.iter().map(Into::into).collect(),
            cwd: dir.path(),
            env: &env,
            child: &child,
            timeout: Duration::ZERO,
        };
        match Channel::open(spawn, &nonce).await {
            Ok(channel) => Some(StandIn { dir, channel }),
            Err(err) if std::env::var_os("CI").is_none() => {
                eprintln!("skipped: no bwrap with a PID namespace here ({err})");
                None
            }
            Err(err) => panic!("bwrap is needed in CI: {err}"),
        }
    }

    /// Kills every process on this machine whose environment holds
    /// `ONEBASH_COMMAND=mark`, as container.rs's kill does inside a
    /// container (the stand-in's processes are this machine's too).
    async fn kill_marked(mark: String) -> Result<(), tokio::task::JoinError> {
        tokio::task::spawn_blocking(move || {
            crate::sys::exec::kill_processes_with(crate::env::container::COMMAND_MARK_VAR, &mark)
        })
        .await
        .map(|_| ())
    }

    /// A command printing how many processes' command lines match the
    /// grep pattern `pattern` (bash alone: no `ps` needed).
    fn running_count(pattern: &str) -> String {
        format!(
            "for p in /proc/[0-9]*; do tr '\\0' ' ' 2>/dev/null < $p/cmdline; echo; done | grep -c '{pattern}' || true"
        )
    }

    impl StandIn {
        /// Runs `script` with `vars`, its mark fresh; at the timeout the
        /// marked processes are killed.
        async fn run_with(
            &mut self,
            script: &str,
            vars: Vec<(&str, &str)>,
            timeout: Duration,
        ) -> Reply {
            let mark = nonce();
            let workdir = self.dir.path().display().to_string();
            let request = Request {
                script,
                workdir: &workdir,
                vars,
                mark: &mark,
                file_blocks: 1 << 20,
                timeout,
            };
            self.channel.run(&request, kill_marked(mark.clone())).await
        }

        /// Runs `script`; it must end as the server says.
        async fn ran(&mut self, script: &str) -> CommandOutcome {
            match self
                .run_with(script, Vec::new(), Duration::from_secs(120))
                .await
            {
                Reply::Ended(outcome) => outcome,
                other => panic!("{script:?} did not end: {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn output_status_and_environment_come_back_byte_for_byte() {
        let Some(mut server) = stand_in().await else {
            return;
        };
        let out = server
            .ran("echo out; echo err >&2; echo out2; exit 3")
            .await;
        assert_eq!(out.exit_code, 3);
        assert_eq!(out.signal, None);
        assert!(!out.timed_out);
        assert_eq!(out.output.to_text(), "out\nerr\nout2\n");

        // Every byte but NUL, in a variable and in the script itself; a
        // newline, a quote, a backslash and bytes that are not UTF-8.
        let every: Vec<u8> = (1..=255u8).collect();
        let every_text = String::from_utf8_lossy(&every).into_owned();
        let value = "a'b\\c\nd $(e) `f` é";
        let script = format!(
            "printf %s \"$X\"; printf '|%s|' '{}'",
            every_text.replace('\'', "'\\''")
        );
        let reply = server
            .run_with(&script, vec![("X", value)], Duration::from_secs(120))
            .await;
        let Reply::Ended(out) = reply else {
            panic!("{reply:?}");
        };
        assert_eq!(out.output.to_text(), format!("{value}|{every_text}|"));

        // No end line of the command's own can end it: it does not know
        // the nonce, and a line like one is output.
        let out = server.ran("echo 'x end 0'; echo ' start'; exit 4").await;
        assert_eq!(out.exit_code, 4);
        assert_eq!(out.output.to_text(), "x end 0\n start\n");

        // Output without a final newline ends where it ends.
        let out = server.ran("printf 'no newline'").await;
        assert_eq!(out.output.to_text(), "no newline");
        // stdin is closed.
        let out = server.ran("cat; echo \"read: $?\"").await;
        assert_eq!(out.output.to_text(), "read: 0\n");
    }

    #[tokio::test]
    async fn nothing_is_carried_from_one_command_to_the_next() {
        let Some(mut server) = stand_in().await else {
            return;
        };
        let start = server
            .ran("pwd; env | sort | grep -v '^ONEBASH_COMMAND=\\|^_='")
            .await;
        let first = server
            .ran("mkdir -p sub && cd sub && export CARRIED=1 && f() { :; } && ulimit -n 64 && sleep 600 & wait_for_nothing=1; cd /; export ALSO=1")
            .await;
        assert_eq!(first.exit_code, 0, "{}", first.output.to_text());
        let after = server
            .ran("pwd; env | sort | grep -v '^ONEBASH_COMMAND=\\|^_='")
            .await;
        assert_eq!(after.output.to_text(), start.output.to_text());
        let out = server
            .ran(&format!("type f 2>/dev/null || echo no function; jobs; echo \"${{CARRIED-unset}} ${{ALSO-unset}} ${{wait_for_nothing-unset}}\"; {}", running_count("^sleep 600")))
            .await;
        assert_eq!(out.output.to_text(), "no function\nunset unset unset\n0\n");
        // The server's own variables are not the command's.
        let out = server.ran("set | grep -c '^__ob_' || true").await;
        assert_eq!(out.output.to_text(), "0\n");
    }

    #[tokio::test]
    async fn a_command_that_kills_the_server_loses_the_channel_and_nothing_hangs() {
        let Some(mut server) = stand_in().await else {
            return;
        };
        let reply = server
            .run_with(
                "echo before; kill -9 $PPID; echo after",
                Vec::new(),
                Duration::from_secs(120),
            )
            .await;
        let Reply::Lost { outcome, why } = reply else {
            panic!("{reply:?}");
        };
        assert!(
            outcome.output.to_text().starts_with("before\n"),
            "{}",
            outcome.output.to_text()
        );
        assert!(
            why.to_string().contains("ended during the command"),
            "{why}"
        );
        // The channel is gone: a next request does not start.
        let reply = server
            .run_with("echo next", Vec::new(), Duration::from_secs(120))
            .await;
        assert!(matches!(reply, Reply::NotStarted(_)), "{reply:?}");
        // `kill 0` reaches the command's own process group only.
        let Some(mut server) = stand_in().await else {
            return;
        };
        let out = server.ran("kill 0; echo unreachable").await;
        assert_eq!(out.exit_code, 128 + libc::SIGTERM);
        assert_eq!(server.ran("echo alive").await.output.to_text(), "alive\n");
    }

    #[tokio::test]
    async fn a_command_that_closes_its_output_runs_to_its_end() {
        let Some(mut server) = stand_in().await else {
            return;
        };
        let out = server
            .ran("echo before; exec >&- 2>&-; for i in $(seq 1 200); do :; done; echo done > finished")
            .await;
        assert_eq!(out.exit_code, 0);
        assert_eq!(out.output.to_text(), "before\n");
        assert_eq!(server.ran("cat finished").await.output.to_text(), "done\n");
    }

    #[tokio::test]
    async fn a_hundred_megabytes_of_output_are_counted_and_capped() {
        let Some(mut server) = stand_in().await else {
            return;
        };
        let out = server
            .ran("head -c 100000000 /dev/zero | tr '\\0' a; echo; exit 7")
            .await;
        assert_eq!(out.exit_code, 7);
        assert_eq!(out.output.total_bytes(), 100_000_001);
        assert_eq!(
            out.output.omitted_bytes(),
            100_000_001 - (KEEP_HEAD_BYTES + KEEP_TAIL_BYTES) as u64
        );
        assert_eq!(server.ran("echo next").await.output.to_text(), "next\n");
    }

    #[tokio::test]
    async fn a_forking_command_that_times_out_is_killed_with_all_it_started() {
        let Some(mut server) = stand_in().await else {
            return;
        };
        // Far longer sleeps than the timeout; the timeout far longer than
        // the forks take on any machine.
        let reply = server
            .run_with(
                "for i in $(seq 1 20); do sleep 700 & done; setsid sleep 701 & (sleep 702 &); echo forked; while :; do sleep 703 & wait; done",
                Vec::new(),
                Duration::from_secs(5),
            )
            .await;
        let Reply::Ended(out) = reply else {
            panic!("{reply:?}");
        };
        assert!(out.timed_out);
        assert_eq!((out.exit_code, out.signal), (137, Some(libc::SIGKILL)));
        assert!(
            out.output.to_text().starts_with("forked\n"),
            "{}",
            out.output.to_text()
        );
        let left = server.ran(&running_count("^sleep 70")).await;
        assert_eq!(left.output.to_text(), "0\n");
    }

    /// The command after one whose leftovers wait for `go`, write, then
    /// touch `leaked`: it says go and waits for that write (an event), so
    /// a leftover that lived would put its line into this output.
    const GO_THEN_TWO: &str =
        "touch go; for i in $(seq 1 300); do [ -e leaked ] && break; sleep 0.01; done; echo two";

    #[tokio::test]
    async fn what_a_command_leaves_running_never_writes_into_the_next_one() {
        let Some(mut server) = stand_in().await else {
            return;
        };
        // Both wait for the next command's go, then write and say so: a
        // child with the mark, and one that dropped it (env -i) but holds
        // the server's stdout.
        let out = server
            .ran("(while [ ! -e go ]; do sleep 0.01; done; echo LEAK-MARKED; touch leaked) & env -i bash -c 'while [ ! -e go ]; do sleep 0.01; done; echo LEAK-UNMARKED; touch leaked' & echo one")
            .await;
        assert_eq!(out.output.to_text(), "one\n");
        let out = server.ran(GO_THEN_TWO).await;
        assert_eq!(out.output.to_text(), "two\n");
    }

    /// A daemon that let go of the channel (no mark, its descriptors on
    /// /dev/null, as `service` and `start-stop-daemon` leave one) keeps
    /// running once it has started (the command waits for that: until
    /// then it is a fork of the command, with the mark), as it does under
    /// one exec per command: a Harbor verifier may check it. Whether the
    /// server's stderr is a pipe (the sweep's own `2>/dev/null` must not
    /// make another process's /dev/null look like it) or /dev/null, as an
    /// engine's exec may give it.
    #[tokio::test]
    async fn a_daemon_that_let_go_of_the_channel_keeps_running() {
        for before in ["", "exec 2>/dev/null"] {
            let Some(server) = stand_in_with(before).await else {
                return;
            };
            daemon_keeps_running(server).await;
        }
    }

    async fn daemon_keeps_running(mut server: StandIn) {
        let out = server
            .ran("env -i setsid bash -c 'exec -a onebash-test-daemon sleep 600' </dev/null >/dev/null 2>&1 & until grep -qs '^onebash-test-daemon' /proc/[0-9]*/cmdline; do sleep 0.01; done; echo started")
            .await;
        assert_eq!(out.output.to_text(), "started\n");
        let out = server.ran(&running_count("^onebash-test-daemon")).await;
        assert_eq!(out.output.to_text(), "1\n");
    }

    /// What the image's shell start-up may set before the server's first
    /// line (BASH_ENV with `set -e`, an ERR trap, functions named as
    /// builtins) does not stop it: a failing command is a failing
    /// command, not a lost channel.
    #[tokio::test]
    async fn the_image_s_shell_start_up_does_not_stop_the_server() {
        let Some(mut server) = stand_in_with(
            "set -euo pipefail; trap 'exit 9' ERR; printf() { :; }; wait() { return 1; }; kill() { :; }",
        )
        .await
        else {
            return;
        };
        let out = server.ran("echo failing; exit 1").await;
        assert_eq!(
            (out.exit_code, out.output.to_text().as_str()),
            (1, "failing\n")
        );
        let out = server.ran("false").await;
        assert_eq!(out.exit_code, 1);
        assert_eq!(server.ran("echo alive").await.output.to_text(), "alive\n");
    }

    /// Leftovers that fork again faster than a sweep's round lists them
    /// (each child forks its successor and exits), without the mark, are
    /// killed all the same (they stay in the command's process group):
    /// nothing of theirs reaches the next command.
    #[tokio::test]
    async fn leftovers_that_keep_forking_are_killed_with_their_group() {
        let Some(mut server) = stand_in().await else {
            return;
        };
        let out = server
            .ran("for i in 1 2; do env -i bash -c 'h() { [ -e go ] && { echo LEAK; touch leaked; exit; }; h & exit; }; for j in $(seq 1 20); do (h &); done' & done; echo one")
            .await;
        assert_eq!(out.output.to_text(), "one\n");
        let out = server.ran(GO_THEN_TWO).await;
        assert_eq!(out.output.to_text(), "two\n");
    }
}
