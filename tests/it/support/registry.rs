//! A scripted OCI registry on 127.0.0.1 for the `--env oci` pull tests:
//! the distribution API's manifest and blob GETs (with `Range`), a token
//! endpoint, the auth a test asks for (none, Bearer with a scope checked,
//! Basic credentials on the token endpoint), and faults on one blob (cut
//! once mid-body; held after half its bytes until the test lets go).
//!
//! One thread a connection, one request a connection (`Connection:
//! close`), std only. It records every request (method, path, the
//! `Authorization` and `Range` headers) for the tests to read. It is not
//! a registry: it serves what the test put in it, as the test says.
//! [`Built`] makes the images tests put there: a manifest, a config and
//! gzip layers whose tar entries are written raw (hostile ones too).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;

use serde_json::json;
use sha2::{Digest as _, Sha256};

use super::sync::Latch;

/// `sha256:<hex>` of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// What the registry asks of a client.
#[derive(Clone, Debug)]
pub enum Auth {
    Open,
    /// 401 with a Bearer challenge; the token endpoint checks the scope
    /// and, when given, `Basic` of this `user:password`.
    Bearer {
        basic: Option<String>,
    },
    /// 401 with a Basic challenge unless `Basic` of this `user:password`.
    Basic(String),
    /// A Bearer challenge whose realm is plain HTTP on another host.
    ForeignRealm,
}

/// What happens to one blob's bytes.
#[derive(Clone)]
pub enum Fault {
    /// The first GET gets half the body, then the connection is cut.
    CutOnce,
    /// Every GET is cut after half the body.
    CutAlways,
    /// The first GET gets half the body, then `reached` is opened and
    /// the connection stays open until `release` is.
    HoldOnce { reached: Latch, release: Latch },
}

/// One request as received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub authorization: Option<String>,
    pub range: Option<String>,
}

const TOKEN: &str = "tok-for-the-scripted-registry";

#[derive(Default)]
struct Content {
    /// `repo` -> tag or digest -> (media type, bytes).
    manifests: HashMap<String, HashMap<String, (String, Vec<u8>)>>,
    /// digest -> bytes served for it (a test may lie).
    blobs: HashMap<String, Vec<u8>>,
    faults: HashMap<String, (Fault, u32)>,
}

struct State {
    auth: Auth,
    stop: AtomicBool,
    content: Mutex<Content>,
    seen: Mutex<Vec<Seen>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The registry; it stops taking connections when dropped (its accept
/// thread ends at the next connection, which drop makes).
pub struct Registry {
    pub addr: SocketAddr,
    state: Arc<State>,
}

impl Registry {
    pub fn start(auth: Auth) -> Registry {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local_addr");
        let state = Arc::new(State {
            auth,
            stop: AtomicBool::new(false),
            content: Mutex::new(Content::default()),
            seen: Mutex::new(Vec::new()),
        });
        let shared = Arc::clone(&state);
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                if shared.stop.load(Ordering::SeqCst) {
                    break;
                }
                let state = Arc::clone(&shared);
                thread::spawn(move || {
                    let _ = serve(&state, addr, stream);
                });
            }
        });
        Registry { addr, state }
    }

    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    pub fn put_manifest(&self, repo: &str, key: &str, media_type: &str, bytes: &[u8]) {
        lock(&self.state.content)
            .manifests
            .entry(repo.to_owned())
            .or_default()
            .insert(key.to_owned(), (media_type.to_owned(), bytes.to_vec()));
    }

    /// Serves `bytes` for `digest` (which a test may make a lie).
    pub fn put_blob(&self, digest: &str, bytes: &[u8]) {
        lock(&self.state.content)
            .blobs
            .insert(digest.to_owned(), bytes.to_vec());
    }

    pub fn fault(&self, digest: &str, fault: Fault) {
        lock(&self.state.content)
            .faults
            .insert(digest.to_owned(), (fault, 0));
    }

    pub fn seen(&self) -> Vec<Seen> {
        lock(&self.state.seen).clone()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        // Wakes the accept loop, which then sees the flag and ends.
        self.state.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

fn respond(
    stream: &mut TcpStream,
    status: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {status}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()
}

fn serve(state: &State, addr: SocketAddr, mut stream: TcpStream) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
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
        method: line.split_whitespace().next().unwrap_or("").to_owned(),
        path: path.clone(),
        authorization: headers.get("authorization").cloned(),
        range: headers.get("range").cloned(),
    };
    lock(&state.seen).push(seen.clone());
    if let Some(query) = path.strip_prefix("/token?") {
        return token(state, &mut stream, query, seen.authorization.as_deref());
    }
    let Some(rest) = path.strip_prefix("/v2/") else {
        return respond(&mut stream, "404 Not Found", &[], b"");
    };
    let (repo, kind, key) = match rest
        .rsplit_once("/manifests/")
        .map(|(r, k)| (r, "manifests", k))
        .or_else(|| rest.rsplit_once("/blobs/").map(|(r, k)| (r, "blobs", k)))
    {
        Some(found) => found,
        None => return respond(&mut stream, "404 Not Found", &[], b""),
    };
    let authorized = match &state.auth {
        Auth::Open => true,
        Auth::Basic(pair) => seen.authorization.as_deref() == Some(&basic(pair)),
        Auth::Bearer { .. } | Auth::ForeignRealm => {
            seen.authorization.as_deref() == Some(&format!("Bearer {TOKEN}"))
        }
    };
    if !authorized {
        let realm = match &state.auth {
            Auth::ForeignRealm => "http://registry.example/token".to_owned(),
            _ => format!("http://{addr}/token"),
        };
        let challenge = match &state.auth {
            Auth::Basic(_) => "Basic realm=\"scripted\"".to_owned(),
            _ => format!(
                "Bearer realm=\"{realm}\",service=\"scripted\",scope=\"repository:{repo}:pull\""
            ),
        };
        return respond(
            &mut stream,
            "401 Unauthorized",
            &[("WWW-Authenticate", challenge)],
            br#"{"errors":[{"code":"UNAUTHORIZED"}]}"#,
        );
    }
    let not_found = |stream: &mut TcpStream| {
        respond(
            stream,
            "404 Not Found",
            &[("Content-Type", "application/json".to_owned())],
            br#"{"errors":[{"code":"MANIFEST_UNKNOWN"}]}"#,
        )
    };
    if kind == "manifests" {
        let found = lock(&state.content)
            .manifests
            .get(repo)
            .and_then(|m| m.get(key))
            .cloned();
        let Some((media_type, bytes)) = found else {
            return not_found(&mut stream);
        };
        let headers = [
            ("Content-Type", media_type),
            ("Docker-Content-Digest", digest(&bytes)),
        ];
        return respond(&mut stream, "200 OK", &headers, &bytes);
    }
    let (bytes, fault) = {
        let mut content = lock(&state.content);
        let bytes = content.blobs.get(key).cloned();
        let fault = content.faults.get_mut(key).map(|(fault, count)| {
            *count += 1;
            (fault.clone(), *count)
        });
        (bytes, fault)
    };
    let Some(bytes) = bytes else {
        return not_found(&mut stream);
    };
    let from: usize = seen
        .range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let cut = matches!(
        &fault,
        Some((Fault::CutOnce | Fault::HoldOnce { .. }, 1) | (Fault::CutAlways, _))
    );
    let (status, body) = if from > 0 && from < bytes.len() {
        ("206 Partial Content", &bytes[from..])
    } else {
        ("200 OK", &bytes[..])
    };
    let mut head = format!(
        "HTTP/1.1 {status}\r\nConnection: close\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    if from > 0 {
        head.push_str(&format!(
            "Content-Range: bytes {from}-{}/{}\r\n",
            bytes.len() - 1,
            bytes.len()
        ));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    if !cut {
        stream.write_all(body)?;
        return stream.flush();
    }
    // Half of what this answer owes: a cut every time still moves on.
    stream.write_all(&body[..body.len() / 2])?;
    stream.flush()?;
    if let Some((Fault::HoldOnce { reached, release }, _)) = fault {
        reached.open();
        release.wait();
    }
    stream.shutdown(Shutdown::Both)
}

/// The `Authorization` value of Basic `user:password`.
fn basic(pair: &str) -> String {
    use base64::Engine as _;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

fn token(
    state: &State,
    stream: &mut TcpStream,
    query: &str,
    authorization: Option<&str>,
) -> std::io::Result<()> {
    let params: HashMap<&str, String> = query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k, v.replace("%3A", ":").replace("%2F", "/")))
        .collect();
    let scope_ok = params
        .get("scope")
        .is_some_and(|s| s.starts_with("repository:") && s.ends_with(":pull"));
    let service_ok = params.get("service").is_some_and(|s| s == "scripted");
    let basic_ok = match &state.auth {
        Auth::Bearer { basic: Some(pair) } => authorization == Some(&basic(pair)),
        _ => true,
    };
    if !(scope_ok && service_ok && basic_ok) {
        return respond(stream, "401 Unauthorized", &[], br#"{"details":"no"}"#);
    }
    let body = format!(r#"{{"token":"{TOKEN}","expires_in":300}}"#);
    respond(
        stream,
        "200 OK",
        &[("Content-Type", "application/json".to_owned())],
        body.as_bytes(),
    )
}

pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

/// A tar entry written raw (the tar crate's own `set_path` refuses `..`).
pub fn entry(kind: tar::EntryType, path: &str, link: &str, body: &[u8]) -> (tar::Header, Vec<u8>) {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(kind);
    header.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
    header.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
    header.set_mode(0o644);
    header.set_size(body.len() as u64);
    header.set_cksum();
    (header, body.to_vec())
}

pub fn file(path: &str, body: &[u8]) -> (tar::Header, Vec<u8>) {
    entry(tar::EntryType::Regular, path, "", body)
}

/// A layer's tar and its gzip blob.
pub fn layer(entries: Vec<(tar::Header, Vec<u8>)>) -> (Vec<u8>, Vec<u8>) {
    let mut builder = tar::Builder::new(Vec::new());
    for (header, body) in entries {
        builder.append(&header, &body[..]).expect("append");
    }
    let tar = builder.into_inner().expect("tar");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar).expect("gzip");
    (tar.clone(), gz.finish().expect("gzip"))
}

/// An image: its manifest, config and layer blobs, with digests.
pub struct Built {
    pub manifest: Vec<u8>,
    pub media_type: &'static str,
    pub config: Vec<u8>,
    /// (blob digest, blob, diff_id).
    pub layers: Vec<(String, Vec<u8>, String)>,
}

impl Built {
    pub fn new(layers: Vec<(Vec<u8>, Vec<u8>)>, media_type: &'static str) -> Built {
        let diff_ids: Vec<String> = layers.iter().map(|(tar, _)| digest(tar)).collect();
        let config = serde_json::to_vec(&json!({
            "architecture": "amd64",
            "os": "linux",
            "config": {"Env": ["PATH=/usr/bin:/bin", "FROM_REGISTRY=yes"], "WorkingDir": "/testbed"},
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
        }))
        .expect("json");
        let layer_type = match media_type {
            OCI_MANIFEST => "application/vnd.oci.image.layer.v1.tar+gzip",
            _ => "application/vnd.docker.image.rootfs.diff.tar.gzip",
        };
        let manifest = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": media_type,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(&config), "size": config.len()},
            "layers": layers.iter().map(|(_, blob)| json!({"mediaType": layer_type, "digest": digest(blob), "size": blob.len()})).collect::<Vec<_>>(),
        }))
        .expect("json");
        Built {
            manifest,
            media_type,
            config,
            layers: layers
                .into_iter()
                .map(|(tar, blob)| (digest(&blob), blob, digest(&tar)))
                .collect(),
        }
    }

    /// One layer holding `hello.txt` (`body`) and a folder.
    pub fn hello(body: &str) -> Built {
        Built::new(
            vec![layer(vec![
                entry(tar::EntryType::Directory, "etc/", "", b""),
                file("etc/hello.txt", body.as_bytes()),
            ])],
            OCI_MANIFEST,
        )
    }

    /// Puts it in `registry` as `repo:tag` (and by digest).
    pub fn publish(&self, registry: &Registry, repo: &str, tag: &str) {
        registry.put_manifest(repo, tag, self.media_type, &self.manifest);
        registry.put_manifest(
            repo,
            &digest(&self.manifest),
            self.media_type,
            &self.manifest,
        );
        registry.put_blob(&digest(&self.config), &self.config);
        for (blob_digest, blob, _) in &self.layers {
            registry.put_blob(blob_digest, blob);
        }
    }
}
