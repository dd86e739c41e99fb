//! The Hub's HTTP API, for `open.rs`: a revision's commit, files and card
//! (`/api/datasets/{repo}/revision/{rev}`), a folder's listing with each
//! file's hashes (`/api/datasets/{repo}/tree/{sha}/{dir}`, page by page)
//! and a file's bytes (`/datasets/{repo}/resolve/{sha}/{path}`) streamed
//! into its `.incomplete` file, resumed with `Range` when one is there.
//!
//! Owns the client (the token as `Authorization: Bearer`, which reqwest
//! drops on a redirect to another host, as the Hub's downloads need), the
//! retries of a lost connection or a 5xx, and reading the Hub's errors
//! (status and `X-Error-Code`, as huggingface_hub's `hf_raise_for_status`
//! reads them) into a [`DatasetError`]. It decides nothing about the
//! cache: what to fetch and where it goes are `open.rs`'s.

use std::fs::File;
use std::io::{Seek as _, Write as _};
use std::path::Path;
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, CONTENT_RANGE, LINK, RANGE};
use serde::Deserialize;
use serde_json::Value;

use crate::dataset::error::DatasetError;
use crate::dataset::settings::HubSettings;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// A download that sends nothing for this long is cut (and resumed); a
/// whole-download timeout would cut a slow large file that is moving.
const READ_TIMEOUT: Duration = Duration::from_secs(60);
/// An API answer (JSON) takes at most this long.
const API_TIMEOUT: Duration = Duration::from_secs(120);
/// Tries of one request when the connection fails or the Hub answers
/// 5xx or 429: the first and two more.
const ATTEMPTS: u32 = 3;
/// The wait before the first retry, doubled for each next one. Short in
/// tests, which point at closed ports on purpose.
const BACKOFF: Duration = if cfg!(test) {
    Duration::from_millis(5)
} else {
    Duration::from_millis(500)
};
/// Tries of one download when its body is cut (each resumes).
const DOWNLOAD_ATTEMPTS: u32 = 4;
/// Pages of one folder listing past which the Hub is taken to loop.
const MAX_PAGES: usize = 10_000;
/// How much of an error answer's body goes into a message.
const MAX_MESSAGE: usize = 300;

/// What a revision of the dataset is: its commit, its files, its card.
#[derive(Debug, Deserialize)]
pub(crate) struct RevisionInfo {
    pub(crate) sha: String,
    #[serde(default)]
    siblings: Vec<Sibling>,
    /// The dataset card's YAML header as JSON (`configs` among it).
    #[serde(default, rename = "cardData")]
    pub(crate) card: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Sibling {
    rfilename: String,
}

impl RevisionInfo {
    /// The commit's files, by path in the repo.
    pub(crate) fn files(&self) -> Vec<String> {
        self.siblings.iter().map(|s| s.rfilename.clone()).collect()
    }
}

/// A file of a folder listing, with the hashes that check its bytes.
#[derive(Debug, Clone)]
pub(crate) struct TreeFile {
    pub(crate) path: String,
    /// The git blob sha1 (of the LFS pointer, for an LFS file).
    pub(crate) oid: String,
    /// The content's sha256, for an LFS file.
    pub(crate) sha256: Option<String>,
    pub(crate) size: u64,
}

#[derive(Debug, Deserialize)]
struct TreeEntry {
    #[serde(rename = "type")]
    kind: String,
    path: String,
    #[serde(default)]
    oid: String,
    #[serde(default)]
    size: u64,
    lfs: Option<Lfs>,
}

#[derive(Debug, Deserialize)]
struct Lfs {
    oid: String,
    size: u64,
}

/// What a request is for, to name it in an error.
#[derive(Clone, Copy)]
enum Asking<'a> {
    Revision(&'a str),
    Listing(&'a str),
    File(&'a str),
}

/// The Hub, for one dataset.
pub(crate) struct Hub<'a> {
    http: reqwest::Client,
    settings: &'a HubSettings,
    repo: &'a str,
    /// The dataset as errors name it.
    dataset: &'a str,
}

impl<'a> Hub<'a> {
    pub(crate) fn new(
        settings: &'a HubSettings,
        repo: &'a str,
        dataset: &'a str,
    ) -> Result<Hub<'a>, DatasetError> {
        let http = reqwest::Client::builder()
            .user_agent(concat!("onebash/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(READ_TIMEOUT)
            .build()
            .map_err(|err| DatasetError::Client {
                dataset: dataset.to_owned(),
                why: describe(err),
            })?;
        Ok(Hub {
            http,
            settings,
            repo,
            dataset,
        })
    }

    /// The commit `revision` names now, with its files and card.
    pub(crate) async fn revision(&self, revision: &str) -> Result<RevisionInfo, DatasetError> {
        let url = format!(
            "{}/api/datasets/{}/revision/{}",
            self.settings.endpoint,
            self.repo,
            encode(revision, false)
        );
        let response = self.get(&url, None, Some(API_TIMEOUT)).await?;
        let response = self.check(response, Asking::Revision(revision)).await?;
        let body = self.body(response, &url).await?;
        serde_json::from_slice(&body).map_err(|err| self.bad_answer(&url, err))
    }

    /// Every file under `dir` (the whole repo when empty) at commit `sha`,
    /// with its hashes, following the `Link: <...>; rel="next"` pages.
    pub(crate) async fn tree(&self, sha: &str, dir: &str) -> Result<Vec<TreeFile>, DatasetError> {
        let folder = if dir.is_empty() {
            String::new()
        } else {
            // As huggingface_hub sends it: the folder's `/` encoded too.
            format!("/{}", encode(dir, false))
        };
        let mut next = Some(format!(
            "{}/api/datasets/{}/tree/{sha}{folder}?recursive=true",
            self.settings.endpoint, self.repo
        ));
        let mut files = Vec::new();
        let mut pages = 0;
        while let Some(url) = next.take() {
            pages += 1;
            if pages > MAX_PAGES {
                return Err(self.bad_answer(&url, format!("more than {MAX_PAGES} pages")));
            }
            let response = self.get(&url, None, Some(API_TIMEOUT)).await?;
            let response = self.check(response, Asking::Listing(dir)).await?;
            next = next_page(response.headers());
            let body = self.body(response, &url).await?;
            let entries: Vec<TreeEntry> =
                serde_json::from_slice(&body).map_err(|err| self.bad_answer(&url, err))?;
            files.extend(
                entries
                    .into_iter()
                    .filter(|e| e.kind == "file")
                    .map(|e| TreeFile {
                        size: e.lfs.as_ref().map_or(e.size, |lfs| lfs.size),
                        sha256: e.lfs.map(|lfs| lfs.oid.to_ascii_lowercase()),
                        oid: e.oid.to_ascii_lowercase(),
                        path: e.path,
                    }),
            );
        }
        Ok(files)
    }

    /// The bytes of `file` at commit `sha` into `partial`, appended to
    /// what it holds when the Hub honours the range. The caller checks the
    /// hash; a body longer than the listing's size is refused here.
    pub(crate) async fn download(
        &self,
        sha: &str,
        file: &TreeFile,
        partial: &Path,
    ) -> Result<(), DatasetError> {
        let url = format!(
            "{}/datasets/{}/resolve/{sha}/{}",
            self.settings.endpoint,
            self.repo,
            encode(&file.path, true)
        );
        let io = |action, err| DatasetError::Cache {
            dataset: self.dataset.to_owned(),
            action,
            path: partial.to_owned(),
            source: err,
        };
        let mut out = File::options()
            .create(true)
            .append(true)
            .open(partial)
            .map_err(|err| io("write", err))?;
        let mut have = out.metadata().map_err(|err| io("read", err))?.len();
        let progress = Progress::start(
            self.settings.progress,
            &format!("{}: {}", self.repo, file.path),
            file.size,
        );
        let mut last_cut = String::new();
        for _ in 0..DOWNLOAD_ATTEMPTS {
            if have > file.size {
                out.set_len(0).map_err(|err| io("write", err))?;
                have = 0;
            }
            if have == file.size {
                // Complete already (a download cut after its last byte):
                // the hash decides.
                progress.finish();
                return Ok(());
            }
            let response = self.get(&url, Some(have), None).await?;
            match response.status() {
                StatusCode::PARTIAL_CONTENT if have > 0 && resumes_at(response.headers(), have) => {
                }
                StatusCode::OK | StatusCode::PARTIAL_CONTENT => {
                    out.set_len(0)
                        .and_then(|()| out.rewind())
                        .map_err(|err| io("write", err))?;
                    have = 0;
                }
                StatusCode::RANGE_NOT_SATISFIABLE => {
                    out.set_len(0).map_err(|err| io("write", err))?;
                    have = 0;
                    last_cut = "the Hub refused the range of the partial download".to_owned();
                    continue;
                }
                _ => {
                    self.check(response, Asking::File(&file.path)).await?;
                    return Err(self.bad_answer(&url, "an unexpected status"));
                }
            }
            progress.set(have);
            match self
                .append_body(
                    response,
                    (&mut out, partial),
                    &mut have,
                    file,
                    &url,
                    &progress,
                )
                .await?
            {
                Body::Whole => {
                    progress.finish();
                    return Ok(());
                }
                Body::Short => {
                    last_cut = format!("the answer ended after {have} of {} bytes", file.size);
                }
                Body::Broke(err) => last_cut = describe(err),
            }
        }
        Err(DatasetError::Unreachable {
            dataset: self.dataset.to_owned(),
            endpoint: self.settings.endpoint.clone(),
            why: format!(
                "the download of {} was cut {DOWNLOAD_ATTEMPTS} times: {last_cut}",
                file.path
            ),
        })
    }

    /// Appends the body of `response` to `out` (the file at `partial`,
    /// holding `have` bytes of `file`) until it ends or breaks; a body
    /// longer than the listing's size is refused.
    async fn append_body(
        &self,
        mut response: reqwest::Response,
        (out, partial): (&mut File, &Path),
        have: &mut u64,
        file: &TreeFile,
        url: &str,
        progress: &Progress,
    ) -> Result<Body, DatasetError> {
        loop {
            match response.chunk().await {
                Ok(Some(bytes)) => {
                    out.write_all(&bytes)
                        .map_err(|source| DatasetError::Cache {
                            dataset: self.dataset.to_owned(),
                            action: "write",
                            path: partial.to_owned(),
                            source,
                        })?;
                    *have += bytes.len() as u64;
                    progress.set(*have);
                    if *have > file.size {
                        return Err(self.bad_answer(
                            url,
                            format!(
                                "{} is longer than the listing's {} bytes",
                                file.path, file.size
                            ),
                        ));
                    }
                }
                Ok(None) if *have == file.size => return Ok(Body::Whole),
                // Short: the server ended early; resume from here.
                Ok(None) => return Ok(Body::Short),
                Err(err) => return Ok(Body::Broke(err)),
            }
        }
    }

    /// A GET, tried again when no answer came or the answer was a 5xx or
    /// 429; `from` asks for the bytes from there on.
    async fn get(
        &self,
        url: &str,
        from: Option<u64>,
        timeout: Option<Duration>,
    ) -> Result<reqwest::Response, DatasetError> {
        let mut wait = BACKOFF;
        let mut attempt = 1;
        loop {
            let mut request = self.http.get(url);
            if let Some(token) = &self.settings.token {
                request = request.header(AUTHORIZATION, format!("Bearer {token}"));
            }
            if let Some(from) = from.filter(|&from| from > 0) {
                request = request.header(RANGE, format!("bytes={from}-"));
            }
            if let Some(timeout) = timeout {
                request = request.timeout(timeout);
            }
            let why = match request.send().await {
                Ok(response) if retried(response.status()) => {
                    format!("{url} answered {}", response.status())
                }
                Ok(response) => return Ok(response),
                Err(err) => describe(err),
            };
            if attempt == ATTEMPTS {
                return Err(DatasetError::Unreachable {
                    dataset: self.dataset.to_owned(),
                    endpoint: self.settings.endpoint.clone(),
                    why: format!("{why} ({ATTEMPTS} tries)"),
                });
            }
            attempt += 1;
            tokio::time::sleep(wait).await;
            wait *= 2;
        }
    }

    /// The answer when it is a success, else the error its status and
    /// `X-Error-Code` say.
    async fn check(
        &self,
        response: reqwest::Response,
        asking: Asking<'_>,
    ) -> Result<reqwest::Response, DatasetError> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let code = header("X-Error-Code");
        let header_message = header("X-Error-Message");
        let url = without_query(response.url());
        let page = format!("{}/datasets/{}", self.settings.endpoint, self.repo);
        let dataset = self.dataset.to_owned();
        let token_sent = self.settings.token.is_some();
        let missing = |path: &str| DatasetError::MissingFile {
            dataset: dataset.clone(),
            path: path.to_owned(),
        };
        let (revision, path) = match asking {
            Asking::Revision(revision) => (revision, None),
            Asking::Listing(path) | Asking::File(path) => ("(the commit)", Some(path)),
        };
        Err(match (code.as_deref(), status.as_u16(), path) {
            (Some("RevisionNotFound"), ..) => DatasetError::NoSuchRevision {
                dataset,
                revision: revision.to_owned(),
                url: page,
            },
            (Some("EntryNotFound"), _, Some(path)) | (None, 404, Some(path)) => missing(path),
            // A token the Hub does not know: 401 with no error code (its
            // message says "Invalid credentials"), which huggingface_hub
            // does not read as a missing repo either.
            (None, 401, _) if token_sent => DatasetError::BadToken {
                dataset,
                message: header_message.unwrap_or_else(|| "401 Unauthorized".to_owned()),
            },
            (Some("GatedRepo"), status, _) | (None, status @ 403, _) => DatasetError::Denied {
                dataset,
                status,
                url: page,
                token_sent,
            },
            // 401 is the Hub's answer for a missing repo and for a private
            // or gated one alike when the caller may not know which
            // (huggingface_hub reads it as RepoNotFound too).
            (Some("RepoNotFound"), ..) | (None, 401 | 404, _) => DatasetError::NoSuchDataset {
                dataset,
                url: page,
                token_sent,
            },
            _ => {
                let body = self.body(response, &url).await.unwrap_or_default();
                DatasetError::Http {
                    dataset,
                    url,
                    status: status.as_u16(),
                    message: header_message.or_else(|| server_message(&body)),
                }
            }
        })
    }

    /// An answer's whole body.
    async fn body(
        &self,
        mut response: reqwest::Response,
        url: &str,
    ) -> Result<Vec<u8>, DatasetError> {
        let mut body = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(bytes)) => body.extend_from_slice(&bytes),
                Ok(None) => return Ok(body),
                Err(err) => {
                    return Err(DatasetError::Unreachable {
                        dataset: self.dataset.to_owned(),
                        endpoint: self.settings.endpoint.clone(),
                        why: format!("reading the answer of {url}: {}", describe(err)),
                    });
                }
            }
        }
    }

    fn bad_answer(&self, url: &str, why: impl std::fmt::Display) -> DatasetError {
        DatasetError::BadAnswer {
            dataset: self.dataset.to_owned(),
            url: url.to_owned(),
            why: why.to_string(),
        }
    }
}

/// The statuses that say "try again later" rather than "no".
fn retried(status: StatusCode) -> bool {
    status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS
}

/// Whether a 206 answer starts where the partial file ends.
fn resumes_at(headers: &reqwest::header::HeaderMap, have: u64) -> bool {
    headers
        .get(CONTENT_RANGE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("bytes "))
        .and_then(|v| v.split('-').next())
        .and_then(|start| start.trim().parse::<u64>().ok())
        == Some(have)
}

/// The URL of `Link: <URL>; rel="next"`.
fn next_page(headers: &reqwest::header::HeaderMap) -> Option<String> {
    let link = headers.get(LINK)?.to_str().ok()?;
    link.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        let next = params
            .split(';')
            .any(|p| matches!(p.trim().split_once('='), Some(("rel", v)) if v.trim_matches('"') == "next"));
        let target = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        next.then(|| target.to_owned())
    })
}

/// The server's words in an error body: `{"error": "..."}` (the Hub's
/// form), else the start of the body.
fn server_message(body: &[u8]) -> Option<String> {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let text = match parsed.as_ref().and_then(|v| v.get("error")) {
        Some(Value::String(message)) => message.clone(),
        _ => String::from_utf8_lossy(body).trim().to_owned(),
    };
    (!text.is_empty()).then(|| text.chars().take(MAX_MESSAGE).collect())
}

/// Percent-encodes a URL path part: all but unreserved characters, and
/// `/` kept when `keep_slash` (a path in the repo; a revision's `/`, as
/// in `refs/convert/parquet`, is encoded, as huggingface_hub does).
pub(crate) fn encode(text: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(byte as char)
            }
            b'/' if keep_slash => out.push('/'),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// A URL fit for a message: a redirect to a CDN carries a signature in
/// its query, which is a credential while it lasts.
fn without_query(url: &reqwest::Url) -> String {
    let mut url = url.clone();
    url.set_query(None);
    url.to_string()
}

/// A transport error with its causes (reqwest's own text says little more
/// than "error sending request"), its URL without a query.
fn describe(err: reqwest::Error) -> String {
    let kind = if err.is_timeout() {
        "timed out: "
    } else if err.is_connect() {
        "could not connect: "
    } else {
        ""
    };
    let url = err.url().map(without_query);
    let err = err.without_url();
    let mut text = format!("{kind}{err}");
    if let Some(url) = url {
        text.push_str(&format!(" ({url})"));
    }
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// A download's bytes on stderr, when it is a terminal.
struct Progress(Option<indicatif::ProgressBar>);

impl Progress {
    fn start(show: bool, what: &str, size: u64) -> Progress {
        if !show {
            return Progress(None);
        }
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(size),
            indicatif::ProgressDrawTarget::stderr(),
        );
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{msg} {bar:30} {bytes}/{total_bytes} {bytes_per_sec}",
        ) {
            bar.set_style(style);
        }
        bar.set_message(format!("downloading {what}"));
        Progress(Some(bar))
    }

    fn set(&self, have: u64) {
        if let Some(bar) = &self.0 {
            bar.set_position(have);
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    /// A download that failed leaves no bar behind its error.
    fn drop(&mut self) {
        self.finish();
    }
}

/// How one answer's body ended.
enum Body {
    /// The file is whole.
    Whole,
    /// The server ended the answer early.
    Short,
    /// The connection broke.
    Broke(reqwest::Error),
}

#[cfg(test)]
mod tests {
    use reqwest::header::{HeaderMap, HeaderValue};

    use super::*;

    #[test]
    fn revisions_and_paths_are_encoded_as_huggingface_hub_encodes_them() {
        assert_eq!(
            encode("refs/convert/parquet", false),
            "refs%2Fconvert%2Fparquet"
        );
        assert_eq!(encode("v1.0", false), "v1.0");
        assert_eq!(
            encode("data/test 1+x.parquet", true),
            "data/test%201%2Bx.parquet"
        );
        assert_eq!(encode("é", true), "%C3%A9");
    }

    #[test]
    fn the_next_page_is_read_from_the_link_header() {
        let mut headers = HeaderMap::new();
        assert_eq!(next_page(&headers), None);
        headers.insert(
            LINK,
            HeaderValue::from_static("<https://hf.co/api/x?cursor=a>; rel=\"prev\", <https://hf.co/api/x?cursor=b>; rel=\"next\""),
        );
        assert_eq!(
            next_page(&headers).as_deref(),
            Some("https://hf.co/api/x?cursor=b")
        );
    }

    #[test]
    fn a_resumed_answer_must_start_where_the_partial_file_ends() {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_RANGE, HeaderValue::from_static("bytes 100-199/200"));
        assert!(resumes_at(&headers, 100));
        assert!(!resumes_at(&headers, 50));
        assert!(!resumes_at(&HeaderMap::new(), 100));
    }

    #[test]
    fn an_error_body_gives_the_servers_words() {
        assert_eq!(
            server_message(br#"{"error": "Invalid rev id"}"#).as_deref(),
            Some("Invalid rev id")
        );
        assert_eq!(
            server_message(b"  bad gateway \n").as_deref(),
            Some("bad gateway")
        );
        assert_eq!(server_message(b""), None);
    }
}
