//! A tiny HTTP/1.1 server on 127.0.0.1 for the dataset tests: one thread,
//! one request per connection, answers from a closure, every request kept
//! for the test to look at. An answer can be cut short to play a dropped
//! connection.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// The path with its query.
    pub(crate) path: String,
    pub(crate) headers: Vec<(String, String)>,
}

impl Request {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// An answer.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
    /// Send only this many bytes of the body, then close (the
    /// `Content-Length` still says the whole).
    pub(crate) cut_after: Option<usize>,
}

impl Reply {
    pub(crate) fn status(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Vec::new(),
            cut_after: None,
        }
    }

    pub(crate) fn json(value: &serde_json::Value) -> Reply {
        Reply::bytes(200, value.to_string().into_bytes()).header("Content-Type", "application/json")
    }

    pub(crate) fn bytes(status: u16, body: Vec<u8>) -> Reply {
        Reply {
            body,
            ..Reply::status(status)
        }
    }

    pub(crate) fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
}

type Handler = dyn Fn(&Request) -> Reply + Send + Sync;

/// The server, stopped when dropped.
pub(crate) struct Server {
    /// `http://127.0.0.1:PORT`.
    pub(crate) url: String,
    log: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
    addr: std::net::SocketAddr,
}

impl Server {
    pub(crate) fn start(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let handler: Arc<Handler> = Arc::new(handler);
        let (thread_log, thread_stop) = (log.clone(), stop.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if thread_stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                serve(stream, &*handler, &thread_log);
            }
        });
        Server {
            url: format!("http://{addr}"),
            log,
            stop,
            addr,
        }
    }

    /// Every request so far, in order.
    pub(crate) fn requests(&self) -> Vec<Request> {
        self.log.lock().expect("log").clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept so the thread sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve(stream: TcpStream, handler: &Handler, log: &Mutex<Vec<Request>>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() || line.is_empty() {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.trim_end().split_once(':') {
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
    }
    let request = Request { path, headers };
    log.lock().expect("log").push(request.clone());
    let reply = handler(&request);
    let mut out = stream;
    let mut head = format!(
        "HTTP/1.1 {} X\r\nContent-Length: {}\r\nConnection: close\r\n",
        reply.status,
        reply.body.len()
    );
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let body = match reply.cut_after {
        Some(n) => &reply.body[..n.min(reply.body.len())],
        None => &reply.body[..],
    };
    let _ = out
        .write_all(head.as_bytes())
        .and_then(|()| out.write_all(body));
    let _ = out.flush();
    let _ = out.shutdown(std::net::Shutdown::Both);
}
