//! The proxy a task with an allowlist reaches the network through: an
//! HTTP proxy (`CONNECT host:port` for https and any other TCP, and
//! absolute-form `GET http://host/...` for plain http) served by onebash
//! on a listening socket it is handed (netns.rs makes one inside the
//! task's network namespace). Each request's host is checked against the
//! allowlist of the phase in force ([`Proxy::set_hosts`]): a name allowed
//! by name or wildcard is resolved and connected to; a name allowed by
//! neither is resolved, and reached only at the addresses an allowed IP
//! or CIDR covers; an IP literal only when covered. A refused request
//! gets `403` and never leaves onebash. Every host asked for is counted,
//! asked and refused, for the trajectory.
//!
//! Names under `localhost` (RFC 6761 section 6.3) are loopback here, as
//! that RFC asks of name resolution APIs, whatever the machine's resolver
//! says: the tests give their local servers such names.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use crate::task::{AllowedHosts, HostAsked};

/// The longest request head read before the host is known.
const MAX_HEAD_BYTES: usize = 64 * 1024;

#[derive(Debug, Default)]
struct Shared {
    hosts: AllowedHosts,
    asked: BTreeMap<String, HostAsked>,
}

/// A running proxy: stops (and drops its connections) when dropped.
pub(crate) struct Proxy {
    shared: Arc<Mutex<Shared>>,
    port: u16,
    _serving: JoinSet<()>,
}

impl Proxy {
    /// Serves on `listener` (already listening) under `hosts`.
    pub(crate) fn serve(
        listener: std::net::TcpListener,
        hosts: AllowedHosts,
    ) -> std::io::Result<Proxy> {
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let listener = TcpListener::from_std(listener)?;
        let shared = Arc::new(Mutex::new(Shared {
            hosts,
            asked: BTreeMap::new(),
        }));
        let mut serving = JoinSet::new();
        serving.spawn(accept_loop(listener, Arc::clone(&shared)));
        Ok(Proxy {
            shared,
            port,
            _serving: serving,
        })
    }

    /// The port it listens on (inside the task's network namespace).
    #[cfg(test)]
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// The allowlist from now on (the verifier's after the agent's).
    pub(crate) fn set_hosts(&self, hosts: AllowedHosts) {
        lock(&self.shared).hosts = hosts;
    }

    /// Hosts asked for so far, by name.
    pub(crate) fn asked(&self) -> Vec<HostAsked> {
        lock(&self.shared).asked.values().cloned().collect()
    }

    /// The variables that point a command's clients at the proxy.
    pub(crate) fn env_vars(&self) -> Vec<(String, String)> {
        let url = format!("http://127.0.0.1:{}", self.port);
        let mut vars: Vec<(String, String)> = [
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "http_proxy",
            "https_proxy",
            "all_proxy",
        ]
        .iter()
        .map(|name| ((*name).to_owned(), url.clone()))
        .collect();
        // The sandbox's own loopback is not the proxy's to judge.
        for name in ["NO_PROXY", "no_proxy"] {
            vars.push((name.to_owned(), "localhost,127.0.0.1,::1".to_owned()));
        }
        vars
    }
}

fn lock(shared: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn accept_loop(listener: TcpListener, shared: Arc<Mutex<Shared>>) {
    // Connections live in this set: dropping the proxy aborts them all.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(serve_one(stream, Arc::clone(&shared)));
                }
                // A transient failure (no file descriptors left): the next
                // accept may work, once something was closed; not in a
                // busy loop meanwhile.
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// A request's head, as far as the proxy needs it.
#[derive(Debug, PartialEq, Eq)]
struct Head {
    connect: bool,
    host: String,
    port: u16,
    /// For plain http: the head to send on, in origin form.
    forward: Vec<u8>,
}

async fn serve_one(mut client: TcpStream, shared: Arc<Mutex<Shared>>) {
    let Some((head, rest)) = read_head(&mut client).await else {
        let _ = client.write_all(&reply(400, "not a proxy request")).await;
        return;
    };
    let hosts = lock(&shared).hosts.clone();
    let decided = decide(&hosts, &head.host, head.port).await;
    {
        let mut shared = lock(&shared);
        let entry = shared
            .asked
            .entry(head.host.clone())
            .or_insert_with(|| HostAsked {
                host: head.host.clone(),
                ..HostAsked::default()
            });
        entry.requests += 1;
        entry.refused += u64::from(matches!(decided, Decided::Refused));
    }
    let addresses = match decided {
        Decided::Refused => {
            let why = format!(
                "onebash: {} is not among the hosts this task may reach",
                head.host
            );
            let _ = client.write_all(&reply(403, &why)).await;
            return;
        }
        Decided::Unresolved => {
            let _ = client
                .write_all(&reply(502, "cannot resolve the host"))
                .await;
            return;
        }
        Decided::Reach(addresses) => addresses,
    };
    let Ok(mut upstream) = TcpStream::connect(&addresses[..]).await else {
        let _ = client
            .write_all(&reply(502, "cannot connect to the host"))
            .await;
        return;
    };
    let sent = if head.connect {
        client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
    } else {
        upstream.write_all(&head.forward).await
    };
    if sent.is_err() || upstream.write_all(&rest).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

/// What to do with a request.
#[derive(Debug, PartialEq, Eq)]
enum Decided {
    Reach(Vec<SocketAddr>),
    Refused,
    Unresolved,
}

async fn decide(hosts: &AllowedHosts, host: &str, port: u16) -> Decided {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return match hosts.allows_address(ip) {
            true => Decided::Reach(vec![SocketAddr::new(ip, port)]),
            false => Decided::Refused,
        };
    }
    let by_name = hosts.allows_name(host);
    if !by_name && !hosts.has_ranges() {
        return Decided::Refused;
    }
    let resolved = resolve(host, port).await;
    if resolved.is_empty() {
        return Decided::Unresolved;
    }
    if by_name {
        return Decided::Reach(resolved);
    }
    // Only the addresses an allowed range covers: a name that resolves
    // elsewhere is refused, and one resolving to both is reached at the
    // allowed address only.
    let covered: Vec<SocketAddr> = resolved
        .into_iter()
        .filter(|address| hosts.allows_address(address.ip()))
        .collect();
    match covered.is_empty() {
        true => Decided::Refused,
        false => Decided::Reach(covered),
    }
}

async fn resolve(host: &str, port: u16) -> Vec<SocketAddr> {
    let lower = host.trim_end_matches('.').to_ascii_lowercase();
    if lower == "localhost" || lower.ends_with(".localhost") {
        return vec![SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)];
    }
    match tokio::net::lookup_host((host, port)).await {
        Ok(addresses) => addresses.collect(),
        Err(_) => Vec::new(),
    }
}

/// Reads up to the end of the request head; the head and what came
/// after it. `None` for what is not a proxy request.
async fn read_head(client: &mut TcpStream) -> Option<(Head, Vec<u8>)> {
    let mut buffer = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(at) = memchr::memmem::find(&buffer, b"\r\n\r\n") {
            break at + 4;
        }
        if buffer.len() > MAX_HEAD_BYTES {
            return None;
        }
        let read = client.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let rest = buffer.split_off(end);
    Some((parse_head(&buffer)?, rest))
}

fn parse_head(head: &[u8]) -> Option<Head> {
    let text = std::str::from_utf8(head).ok()?;
    let (request_line, headers) = text.split_once("\r\n")?;
    let mut words = request_line.split(' ');
    let (method, target, version) = (words.next()?, words.next()?, words.next()?);
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = split_host_port(target, None)?;
        return Some(Head {
            connect: true,
            host,
            port,
            forward: Vec::new(),
        });
    }
    let after = target
        .get(..7)
        .filter(|scheme| scheme.eq_ignore_ascii_case("http://"))
        .map(|_| &target[7..])?;
    let (authority, path) = match after.find('/') {
        Some(at) => after.split_at(at),
        None => (after, "/"),
    };
    let (host, port) = split_host_port(authority, Some(80))?;
    // Origin form, and no proxy headers passed on; one request per
    // connection, so a second one cannot ride on a checked connection to
    // another host.
    let mut forward = format!("{method} {path} {version}\r\n");
    for line in headers.split("\r\n").filter(|line| !line.is_empty()) {
        let name = line.split(':').next().unwrap_or("").trim();
        let dropped = ["proxy-connection", "proxy-authorization", "connection"];
        if !dropped.iter().any(|d| name.eq_ignore_ascii_case(d)) {
            forward.push_str(line);
            forward.push_str("\r\n");
        }
    }
    forward.push_str("Connection: close\r\n\r\n");
    Some(Head {
        connect: false,
        host,
        port,
        forward: forward.into_bytes(),
    })
}

/// `host:port`, `[v6]:port`, or (with a default port) a bare host.
fn split_host_port(authority: &str, default: Option<u16>) -> Option<(String, u16)> {
    let authority = authority.rsplit('@').next()?;
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(port) => port.parse().ok()?,
        None => default?,
    };
    (!host.is_empty()).then(|| (host.to_ascii_lowercase(), port))
}

fn reply(status: u16, why: &str) -> Vec<u8> {
    let reason = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        _ => "Bad Gateway",
    };
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{why}\n",
        why.len() + 1
    )
    .into_bytes()
}

#[cfg(test)]
#[path = "proxy_tests.rs"]
mod tests;
