//! Tests of the dataset module through its API: a scripted Hub on
//! 127.0.0.1 ([`FakeHub`], on server.rs) for opening, and Parquet files
//! written here with the `parquet` crate's writer for reading rows.

mod open;
mod rows;
mod server;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use sha1::Sha1;
use sha2::{Digest as _, Sha256};

use self::server::{Reply, Request, Server};
use crate::dataset::HubSettings;

pub(crate) const REPO: &str = "o/n";
pub(crate) const SHA: &str = "1234567890abcdef1234567890abcdef12345678";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// git's blob sha1 of `bytes`.
pub(crate) fn git_oid(bytes: &[u8]) -> String {
    let mut hasher = Sha1::new();
    hasher.update(format!("blob {}\0", bytes.len()).as_bytes());
    hasher.update(bytes);
    hex(&hasher.finalize())
}

pub(crate) fn sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// A file of the scripted repo.
pub(crate) struct FakeFile {
    pub(crate) path: String,
    pub(crate) bytes: Vec<u8>,
    /// Served as LFS: hashed by sha256, downloaded through a redirect to
    /// another server (a CDN).
    pub(crate) lfs: bool,
}

/// A Hub with one dataset, [`REPO`] at commit [`SHA`] (`main` and `v1`
/// name it), and knobs for what goes wrong.
#[derive(Default)]
pub(crate) struct FakeHub {
    pub(crate) card: Value,
    pub(crate) files: Vec<FakeFile>,
    /// Answers given to the revision request before the right one.
    pub(crate) revision_replies: Mutex<Vec<Reply>>,
    /// Paths whose next download is cut halfway.
    pub(crate) cut_once: Mutex<HashSet<String>>,
    /// Paths served with one byte changed, this many more times.
    pub(crate) corrupt: Mutex<HashMap<String, usize>>,
    /// Where LFS downloads are redirected to.
    cdn: Mutex<Option<String>>,
    /// The Hub's own URL, for its `Link` pages.
    own: Mutex<Option<String>>,
}

/// The scripted Hub running: its server and the CDN its LFS files
/// redirect to.
pub(crate) struct Running {
    pub(crate) hub: Arc<FakeHub>,
    pub(crate) server: Server,
    pub(crate) cdn: Server,
}

impl FakeHub {
    pub(crate) fn new(card: Value, files: Vec<FakeFile>) -> FakeHub {
        FakeHub {
            card,
            files,
            ..FakeHub::default()
        }
    }

    pub(crate) fn start(self) -> Running {
        let hub = Arc::new(self);
        let for_cdn = hub.clone();
        let cdn = Server::start(move |request| for_cdn.cdn(request));
        *hub.cdn.lock().expect("cdn") = Some(cdn.url.clone());
        let for_hub = hub.clone();
        let server = Server::start(move |request| for_hub.answer(request));
        *hub.own.lock().expect("own") = Some(server.url.clone());
        Running { hub, server, cdn }
    }

    fn answer(&self, request: &Request) -> Reply {
        let (path, query) = request.path.split_once('?').unwrap_or((&request.path, ""));
        if let Some(revision) = path.strip_prefix(&format!("/api/datasets/{REPO}/revision/")) {
            if let Some(reply) = self.revision_replies.lock().expect("replies").pop() {
                return reply;
            }
            return match revision {
                "main" | "v1" | SHA => Reply::json(&json!({
                    "id": REPO,
                    "sha": SHA,
                    "siblings": self.files.iter().map(|f| json!({"rfilename": f.path})).collect::<Vec<_>>(),
                    "cardData": self.card,
                })),
                _ => Reply::status(404).header("X-Error-Code", "RevisionNotFound"),
            };
        }
        if let Some(rest) = path.strip_prefix(&format!("/api/datasets/{REPO}/tree/{SHA}")) {
            return self.tree(&rest.trim_start_matches('/').replace("%2F", "/"), query);
        }
        if let Some(file) = path.strip_prefix(&format!("/datasets/{REPO}/resolve/{SHA}/")) {
            let Some(found) = self.files.iter().find(|f| f.path == file) else {
                return Reply::status(404).header("X-Error-Code", "EntryNotFound");
            };
            if found.lfs {
                let cdn = self.cdn.lock().expect("cdn").clone().unwrap_or_default();
                return Reply::status(302).header("Location", &format!("{cdn}/blob/{file}"));
            }
            return self.bytes(found, request);
        }
        Reply::status(404).header("X-Error-Code", "RepoNotFound")
    }

    fn cdn(&self, request: &Request) -> Reply {
        let file = request.path.strip_prefix("/blob/").unwrap_or_default();
        match self.files.iter().find(|f| f.path == file) {
            Some(found) => self.bytes(found, request),
            None => Reply::status(404),
        }
    }

    /// One entry per page, so the listing's `Link` pages are followed.
    fn tree(&self, dir: &str, query: &str) -> Reply {
        let under: Vec<&FakeFile> = self
            .files
            .iter()
            .filter(|f| dir.is_empty() || f.path.starts_with(&format!("{dir}/")))
            .collect();
        let page: usize = query
            .split('&')
            .find_map(|p| p.strip_prefix("cursor="))
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let entries: Vec<Value> = under
            .get(page)
            .map(|f| {
                let mut entry = json!({"type": "file", "path": f.path, "size": f.bytes.len(), "oid": git_oid(&f.bytes)});
                if f.lfs {
                    let pointer = format!("version https://git-lfs.github.com/spec/v1\noid sha256:{}\nsize {}\n", sha256(&f.bytes), f.bytes.len());
                    entry["oid"] = json!(git_oid(pointer.as_bytes()));
                    entry["lfs"] = json!({"oid": sha256(&f.bytes), "size": f.bytes.len(), "pointerSize": pointer.len()});
                }
                vec![entry, json!({"type": "directory", "path": "data/sub", "oid": "x", "size": 0})]
            })
            .unwrap_or_default();
        let mut reply = Reply::json(&Value::Array(entries));
        if page + 1 < under.len() {
            let own = self.own.lock().expect("own").clone().unwrap_or_default();
            let next = format!(
                "<{own}/api/datasets/{REPO}/tree/{SHA}/{dir}?recursive=true&cursor={}>; rel=\"next\"",
                page + 1
            );
            reply = reply.header("Link", &next);
        }
        reply
    }

    /// A file's bytes, from the `Range` asked for; cut or corrupted when
    /// the test says so.
    fn bytes(&self, file: &FakeFile, request: &Request) -> Reply {
        let mut bytes = file.bytes.clone();
        let mut corrupt = self.corrupt.lock().expect("corrupt");
        if let Some(left) = corrupt.get_mut(&file.path).filter(|left| **left > 0) {
            *left -= 1;
            bytes[0] ^= 0xff;
        }
        let from = request
            .header("Range")
            .and_then(|r| r.strip_prefix("bytes="))
            .and_then(|r| r.strip_suffix('-'))
            .and_then(|n| n.parse::<usize>().ok());
        let mut reply = match from {
            Some(from) if from >= bytes.len() => return Reply::status(416),
            Some(from) => Reply::bytes(206, bytes[from..].to_vec()).header(
                "Content-Range",
                &format!("bytes {from}-{}/{}", bytes.len() - 1, bytes.len()),
            ),
            None => Reply::bytes(200, bytes),
        };
        if self.cut_once.lock().expect("cut").remove(&file.path) {
            reply.cut_after = Some(reply.body.len() / 2);
        }
        reply
    }
}

impl Running {
    /// Settings that point at this Hub, with `cache` as the cache folder.
    pub(crate) fn settings(&self, cache: &Path, token: Option<&str>) -> HubSettings {
        settings(&self.server.url, cache, token)
    }

    /// The requests the Hub saw, as their paths.
    pub(crate) fn paths(&self) -> Vec<String> {
        self.server.requests().into_iter().map(|r| r.path).collect()
    }
}

pub(crate) fn settings(endpoint: &str, cache: &Path, token: Option<&str>) -> HubSettings {
    HubSettings {
        endpoint: endpoint.to_owned(),
        token: token.map(str::to_owned),
        offline: false,
        cache_dir: cache.to_owned(),
        progress: false,
        token_file: None,
    }
}
