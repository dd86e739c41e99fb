//! The proxy against two local servers, one allowed and one not: by
//! name, by `*.` wildcard, by address and by CIDR. Each server counts the
//! connections it accepted; a refused request must leave its server at
//! zero.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

/// A server answering `200 ok` to every connection, counting them.
struct Server {
    address: SocketAddr,
    seen: Arc<AtomicUsize>,
    _task: tokio::task::JoinHandle<()>,
}

async fn server(ip: &str) -> Server {
    let listener = TcpListener::bind((ip, 0))
        .await
        .expect("bind a test server");
    let address = listener.local_addr().expect("address");
    let seen = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&seen);
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).await.unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                .await;
        }
    });
    Server {
        address,
        seen,
        _task: task,
    }
}

async fn start(hosts: &str) -> Proxy {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
    let hosts = AllowedHosts::parse_list(hosts).expect("allowlist");
    Proxy::serve(listener, hosts).expect("serve")
}

/// The status line of a plain-http request for `host:port` through the proxy.
async fn get(proxy: &Proxy, host: &str, port: u16) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .expect("connect");
    let request = format!(
        "GET http://{host}:{port}/x HTTP/1.1\r\nHost: {host}:{port}\r\nProxy-Connection: keep-alive\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.expect("read");
    answer.lines().next().unwrap_or_default().to_owned()
}

/// A CONNECT tunnel to `host:port`, then a request through it: the
/// proxy's answer and, when the tunnel opened, the server's.
async fn connect(proxy: &Proxy, host: &str, port: u16) -> (String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .expect("connect");
    let request = format!("CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let (head, _) = read_head_of_answer(&mut stream).await;
    if !head.starts_with("HTTP/1.1 200") {
        return (
            head.lines().next().unwrap_or_default().to_owned(),
            String::new(),
        );
    }
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("tunnel");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.expect("read");
    (
        head.lines().next().unwrap_or_default().to_owned(),
        answer.lines().next().unwrap_or_default().to_owned(),
    )
}

async fn read_head_of_answer(stream: &mut TcpStream) -> (String, ()) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).await.unwrap_or(0) == 1 {
        head.push(byte[0]);
    }
    (String::from_utf8_lossy(&head).into_owned(), ())
}

const OK: &str = "HTTP/1.1 200 OK";
const REFUSED: &str = "HTTP/1.1 403 Forbidden";

#[tokio::test]
async fn a_host_allowed_by_name_is_reached_and_another_never_is() {
    let (allowed, blocked) = (server("127.0.0.1").await, server("127.0.0.1").await);
    let proxy = start("allowed.localhost").await;
    assert_eq!(
        get(&proxy, "allowed.localhost", allowed.address.port()).await,
        OK
    );
    assert_eq!(
        get(&proxy, "blocked.localhost", blocked.address.port()).await,
        REFUSED
    );
    let tunnel = connect(&proxy, "allowed.localhost", allowed.address.port()).await;
    assert_eq!(
        tunnel,
        (
            "HTTP/1.1 200 Connection established".to_owned(),
            OK.to_owned()
        )
    );
    let tunnel = connect(&proxy, "blocked.localhost", blocked.address.port()).await;
    assert_eq!(tunnel.0, REFUSED);
    // By its address, the blocked server is no more reachable.
    assert_eq!(
        get(&proxy, "127.0.0.1", blocked.address.port()).await,
        REFUSED
    );
    assert_eq!(allowed.seen.load(Ordering::SeqCst), 2);
    assert_eq!(blocked.seen.load(Ordering::SeqCst), 0);
    assert_eq!(
        proxy.asked(),
        vec![
            HostAsked {
                host: "127.0.0.1".into(),
                requests: 1,
                refused: 1
            },
            HostAsked {
                host: "allowed.localhost".into(),
                requests: 2,
                refused: 0
            },
            HostAsked {
                host: "blocked.localhost".into(),
                requests: 2,
                refused: 2
            },
        ]
    );
}

#[tokio::test]
async fn a_wildcard_allows_the_names_under_it_only() {
    let (allowed, blocked) = (server("127.0.0.1").await, server("127.0.0.1").await);
    let proxy = start("*.ok.localhost").await;
    assert_eq!(
        get(&proxy, "a.ok.localhost", allowed.address.port()).await,
        OK
    );
    assert_eq!(
        get(&proxy, "ok.localhost", blocked.address.port()).await,
        REFUSED
    );
    assert_eq!(
        get(&proxy, "a.notok.localhost", blocked.address.port()).await,
        REFUSED
    );
    assert_eq!(allowed.seen.load(Ordering::SeqCst), 1);
    assert_eq!(blocked.seen.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_cidr_allows_addresses_in_it_and_names_resolving_into_it() {
    let (allowed, blocked) = (server("127.0.0.2").await, server("127.0.0.3").await);
    let proxy = start("127.0.0.2/32").await;
    assert_eq!(get(&proxy, "127.0.0.2", allowed.address.port()).await, OK);
    assert_eq!(
        get(&proxy, "127.0.0.3", blocked.address.port()).await,
        REFUSED
    );
    let tunnel = connect(&proxy, "127.0.0.3", blocked.address.port()).await;
    assert_eq!(tunnel.0, REFUSED);
    // A name resolving outside the range (localhost is 127.0.0.1) is
    // refused: the range is checked after resolving it.
    assert_eq!(
        get(&proxy, "localhost", blocked.address.port()).await,
        REFUSED
    );
    assert_eq!(allowed.seen.load(Ordering::SeqCst), 1);
    assert_eq!(blocked.seen.load(Ordering::SeqCst), 0);

    let wide = start("127.0.0.0/30").await;
    assert_eq!(
        get(&wide, "localhost", allowed.address.port()).await,
        "HTTP/1.1 502 Bad Gateway"
    );
    assert_eq!(get(&wide, "127.0.0.3", blocked.address.port()).await, OK);
}

#[tokio::test]
async fn the_allowlist_switches_with_the_phase() {
    let server = server("127.0.0.1").await;
    let proxy = start("agent.localhost").await;
    assert_eq!(
        get(&proxy, "agent.localhost", server.address.port()).await,
        OK
    );
    proxy.set_hosts(AllowedHosts::parse_list("verifier.localhost").expect("allowlist"));
    assert_eq!(
        get(&proxy, "agent.localhost", server.address.port()).await,
        REFUSED
    );
    assert_eq!(
        get(&proxy, "verifier.localhost", server.address.port()).await,
        OK
    );
    assert_eq!(server.seen.load(Ordering::SeqCst), 2);
}

#[test]
fn heads_are_read_as_a_proxy_reads_them() {
    let head = parse_head(b"GET http://Example.com:8080/a?b HTTP/1.1\r\nHost: example.com\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive\r\n\r\n")
        .expect("a proxy request");
    assert_eq!(
        (head.connect, head.host.as_str(), head.port),
        (false, "example.com", 8080)
    );
    assert_eq!(
        String::from_utf8(head.forward).expect("text"),
        "GET /a?b HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n"
    );
    let head = parse_head(b"CONNECT [::1]:443 HTTP/1.1\r\n\r\n").expect("connect");
    assert_eq!(
        (head.connect, head.host.as_str(), head.port),
        (true, "::1", 443)
    );
    assert_eq!(
        parse_head(b"GET http://pypi.org HTTP/1.1\r\n\r\n").map(|h| h.port),
        Some(80)
    );
    // Origin form is no proxy request; nor a CONNECT without a port.
    assert_eq!(parse_head(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"), None);
    assert_eq!(parse_head(b"CONNECT pypi.org HTTP/1.1\r\n\r\n"), None);
    assert_eq!(parse_head(b"GET https://pypi.org/ HTTP/1.1\r\n\r\n"), None);
}
