//! What the scripted Hub answers, as the real Hub does: a repo's info,
//! its tree in pages, `resolve` (a file in git, or a 302 to the CDN for
//! one in LFS), the CDN's bytes with `Range`, and the errors with their
//! status, `X-Error-Code` and `X-Error-Message` (a missing repo 401 to an
//! anonymous caller and 404 to a known one, an unknown token 401, a gated
//! repo's files 401 or 403). The faults on a blob's bytes are applied
//! here; the listeners and the log are `server.rs`'s.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Value, json};
use sha1::Sha1;
use sha2::Digest as _;

use super::repos::{Commit, File, Repo, Storage, hex};
use super::server::{Seen, Shared, State, lock};

/// Entries of one page of a tree listing, as the real Hub pages it.
const PAGE_SIZE: usize = 1000;

/// An answer: status, headers, body (not sent for HEAD).
pub(super) struct Answer {
    pub(super) status: u16,
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: Arc<Vec<u8>>,
    /// Send the head and this many bytes of the body, then close.
    pub(super) cut_after: Option<usize>,
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
    pub(super) fn error(status: u16, code: Option<&str>, message: &str) -> Answer {
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

pub(super) fn reason(status: u16) -> &'static str {
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

pub(super) fn answer_hub(shared: &Shared, seen: &Seen) -> Answer {
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

pub(super) fn answer_cdn(shared: &Shared, seen: &Seen) -> Answer {
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
