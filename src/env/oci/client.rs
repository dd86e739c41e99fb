//! The distribution API over HTTP(S), for `registry.rs`: GETs of
//! manifests and blobs under the registry's auth, and a layer blob
//! streamed into its `.partial` file.
//!
//! Owns the client (reqwest), the answer to a 401 (`auth.rs` reads the
//! challenge and the credentials; this file fetches the Bearer token or
//! sends Basic), the plain-HTTP rule (loopback registries and token
//! realms only), the resumed download (what the partial file holds is
//! hashed again and the rest asked for with `Range`; a cut connection is
//! tried again, 4 times) and the progress of each layer on stderr. It
//! decides nothing about the cache: which blobs to fetch, where they go
//! and when they are renamed into place are `registry.rs`'s.

use std::fs::{self, File};
use std::io::{IsTerminal as _, Read as _, Seek as _, Write as _};
use std::path::Path;
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{ACCEPT, AUTHORIZATION, RANGE, WWW_AUTHENTICATE};
use sha2::{Digest as _, Sha256};

use super::OciError;
use super::auth::{self, Credentials};
use super::digest::Digest;
use super::error::RegistryError;
use super::reference::{Reference, is_loopback_host};

/// The manifest kinds asked for, indexes first.
const MANIFEST_TYPES: &str = "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";

/// A manifest or config past this is not one.
const JSON_LIMIT: usize = 16 * 1024 * 1024;

/// Tries of one layer blob when the connection breaks (each resumes).
const BLOB_ATTEMPTS: u32 = 4;

/// A file of the cache that could not be written or read.
pub(super) fn cache_error(path: &Path, err: impl Into<super::error::CacheFault>) -> OciError {
    OciError::cache(path, err)
}

/// The HTTP side: a client, the registry's base URL, the authorization
/// it accepted and the user's credentials for it.
pub(super) struct Net {
    http: reqwest::Client,
    host: String,
    base: String,
    repository: String,
    authorization: Option<String>,
    credentials: Option<Credentials>,
}

/// How one try of a blob ended short of done.
enum Fetch {
    /// The connection broke: try again from where it stopped.
    Retry(String),
    Fatal(OciError),
}

impl From<OciError> for Fetch {
    fn from(err: OciError) -> Fetch {
        match err {
            OciError::Registry(RegistryError::Unreachable { why, .. }) => Fetch::Retry(why),
            other => Fetch::Fatal(other),
        }
    }
}

/// The message of a transport error with its causes (reqwest's own says
/// little more than "error sending request").
fn describe(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

impl Net {
    pub(super) fn new(reference: &Reference) -> Result<Net, OciError> {
        let files = auth::config_files(|name| std::env::var(name).ok());
        let credentials = auth::credentials(&files, &reference.host)?;
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(30))
            .read_timeout(Duration::from_secs(120))
            .build()
            .map_err(OciError::HttpClient)?;
        Ok(Net {
            http,
            host: reference.host.clone(),
            base: base_url(reference),
            repository: reference.repository.clone(),
            authorization: None,
            credentials,
        })
    }

    fn protocol(&self, why: String) -> OciError {
        RegistryError::Protocol {
            host: self.host.clone(),
            why,
        }
        .into()
    }

    /// GET `<base><path>`, answering one 401 with the authorization its
    /// challenge asks for. Bytes from `from` on when it is not 0.
    async fn get(
        &mut self,
        path: &str,
        accept: Option<&str>,
        from: u64,
    ) -> Result<reqwest::Response, OciError> {
        self.send(reqwest::Method::GET, path, accept, from).await
    }

    /// [`Net::get`] with another method (HEAD).
    async fn send(
        &mut self,
        method: reqwest::Method,
        path: &str,
        accept: Option<&str>,
        from: u64,
    ) -> Result<reqwest::Response, OciError> {
        let url = format!("{}{path}", self.base);
        for round in 0..2 {
            let mut request = self.http.request(method.clone(), &url);
            if let Some(accept) = accept {
                request = request.header(ACCEPT, accept);
            }
            if from > 0 {
                request = request.header(RANGE, format!("bytes={from}-"));
            }
            if let Some(authorization) = &self.authorization {
                request = request.header(AUTHORIZATION, authorization);
            }
            let response = request
                .send()
                .await
                .map_err(|err| RegistryError::Unreachable {
                    host: self.host.clone(),
                    why: describe(&err),
                })?;
            if response.status() != StatusCode::UNAUTHORIZED {
                return Ok(response);
            }
            if round == 0 {
                let challenge = response
                    .headers()
                    .get(WWW_AUTHENTICATE)
                    .and_then(|v| v.to_str().ok())
                    .and_then(auth::parse_challenge);
                self.authorization = Some(self.authorize(challenge).await?);
            }
        }
        Err(RegistryError::Refused {
            host: self.host.clone(),
            repository: self.repository.clone(),
            credentials: self.credentials.as_ref().map(|c| c.file.clone()),
        }
        .into())
    }

    /// What a 401's challenge asks for: Basic with the user's
    /// credentials, or a Bearer token from the challenge's realm.
    async fn authorize(&self, challenge: Option<auth::Challenge>) -> Result<String, OciError> {
        let challenge = challenge.ok_or_else(|| {
            self.protocol("a 401 answer without a WWW-Authenticate challenge".to_owned())
        })?;
        use base64::Engine as _;
        let basic = self.credentials.as_ref().map(|c| {
            let pair = format!("{}:{}", c.user, c.password);
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            )
        });
        match challenge.scheme.as_str() {
            "basic" => basic.ok_or_else(|| {
                RegistryError::NoCredentials {
                    host: self.host.clone(),
                }
                .into()
            }),
            "bearer" => self
                .token(&challenge, basic)
                .await
                .map(|t| format!("Bearer {t}")),
            other => Err(self.protocol(format!("an unknown auth scheme {other:?}"))),
        }
    }

    /// The token of the challenge's realm (the anonymous flow when there
    /// are no credentials).
    async fn token(
        &self,
        challenge: &auth::Challenge,
        basic: Option<String>,
    ) -> Result<String, OciError> {
        let realm = challenge
            .params
            .get("realm")
            .ok_or_else(|| self.protocol("a Bearer challenge without a realm".to_owned()))?;
        let mut url = reqwest::Url::parse(realm)
            .map_err(|err| self.protocol(format!("the token realm {realm:?}: {err}")))?;
        let realm_host = match (url.host_str(), url.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            (None, _) => String::new(),
        };
        if url.scheme() != "https" && !(url.scheme() == "http" && is_loopback_host(&realm_host)) {
            return Err(self.protocol(format!(
                "the token realm {realm} is not HTTPS (onebash sends no credentials in the clear)"
            )));
        }
        {
            let mut query = url.query_pairs_mut();
            if let Some(service) = challenge.params.get("service") {
                query.append_pair("service", service);
            }
            let scope = challenge
                .params
                .get("scope")
                .cloned()
                .unwrap_or_else(|| format!("repository:{}:pull", self.repository));
            query.append_pair("scope", &scope);
        }
        let mut request = self.http.get(url);
        if let Some(basic) = basic {
            request = request.header(AUTHORIZATION, basic);
        }
        let response = request
            .send()
            .await
            .map_err(|err| RegistryError::Unreachable {
                host: realm_host.clone(),
                why: describe(&err),
            })?;
        let status = response.status();
        if !status.is_success() {
            return Err(RegistryError::TokenRefused {
                host: self.host.clone(),
                repository: self.repository.clone(),
                status,
                credentials: self.credentials.as_ref().map(|c| c.file.clone()),
            }
            .into());
        }
        #[derive(serde::Deserialize)]
        struct Token {
            token: Option<String>,
            access_token: Option<String>,
        }
        let bytes = read_limited(response, JSON_LIMIT)
            .await
            .map_err(|why| self.protocol(format!("the token answer: {why}")))?;
        let token: Token = serde_json::from_slice(&bytes)
            .map_err(|_| self.protocol("the token answer is not JSON".to_owned()))?;
        token
            .token
            .or(token.access_token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| self.protocol("the token answer holds no token".to_owned()))
    }

    /// The manifest (or index) of `key` (a tag or a digest), and the
    /// digest the registry says it has.
    pub(super) async fn manifest(
        &mut self,
        key: &str,
    ) -> Result<(Vec<u8>, Option<Digest>), OciError> {
        let (response, announced) = self.manifest_answer(reqwest::Method::GET, key).await?;
        let bytes = read_limited(response, JSON_LIMIT)
            .await
            .map_err(|why| self.protocol(format!("the manifest {key}: {why}")))?;
        Ok((bytes, announced))
    }

    /// The digest the registry gives `key` (a tag), asked with HEAD: what
    /// `run --dry-run` needs, and a HEAD is not a pull to Docker Hub's rate
    /// limit. `None` when the registry answers without a digest.
    pub(super) async fn manifest_digest(&mut self, key: &str) -> Result<Option<Digest>, OciError> {
        let (_, announced) = self.manifest_answer(reqwest::Method::HEAD, key).await?;
        Ok(announced)
    }

    /// The registry's answer for `key`'s manifest, asked with `method`, when
    /// it is a success (404 is [`RegistryError::NotFound`]), and the digest
    /// it announces (`Docker-Content-Digest`).
    async fn manifest_answer(
        &mut self,
        method: reqwest::Method,
        key: &str,
    ) -> Result<(reqwest::Response, Option<Digest>), OciError> {
        let response = self
            .send(
                method,
                &format!("/manifests/{key}"),
                Some(MANIFEST_TYPES),
                0,
            )
            .await?;
        if response.status() == StatusCode::NOT_FOUND {
            return Err(RegistryError::NotFound {
                host: self.host.clone(),
                repository: self.repository.clone(),
                key: key.to_owned(),
            }
            .into());
        }
        if !response.status().is_success() {
            return Err(self.protocol(format!("the manifest {key}: {}", response.status())));
        }
        let announced = response
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| Digest::parse(v).ok());
        Ok((response, announced))
    }

    /// A config blob, whole.
    pub(super) async fn json_blob(&mut self, digest: &Digest) -> Result<Vec<u8>, OciError> {
        let response = self.get(&format!("/blobs/{digest}"), None, 0).await?;
        if !response.status().is_success() {
            return Err(self.protocol(format!("the blob {digest}: {}", response.status())));
        }
        read_limited(response, JSON_LIMIT)
            .await
            .map_err(|why| self.protocol(format!("the blob {digest}: {why}")))
    }

    /// A layer's blob into `done` through `partial`, resumed from what a
    /// broken try or a killed process left, checked before the rename.
    pub(super) async fn download(
        &mut self,
        digest: &Digest,
        size: Option<u64>,
        (partial, done): (&Path, &Path),
        image: &str,
    ) -> Result<(), OciError> {
        let mut file = File::options()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(partial)
            .map_err(|err| cache_error(partial, err))?;
        // What is there came from this blob (its name is the digest): hash
        // it again and ask for the rest.
        let mut hasher = Sha256::new();
        let mut have = 0u64;
        let mut buffer = vec![0u8; 256 * 1024];
        loop {
            let n = file
                .read(&mut buffer)
                .map_err(|err| cache_error(partial, err))?;
            if n == 0 {
                break;
            }
            hasher.update(&buffer[..n]);
            have += n as u64;
        }
        let progress = Progress::start(image, digest, size, have);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let tried = self
                .fetch_into(digest, size, &mut file, (&mut hasher, &mut have), &progress)
                .await;
            match tried {
                Ok(()) => break,
                Err(Fetch::Retry(why)) if attempt < BLOB_ATTEMPTS => {
                    progress.note(&format!(
                        "the connection broke ({why}); resuming at {have} bytes"
                    ));
                }
                Err(Fetch::Retry(why)) => {
                    progress.finish("failed");
                    return Err(self.protocol(format!(
                        "the layer {digest} broke off {BLOB_ATTEMPTS} times, the last at {have} bytes: {why}\nhint: run again: the bytes already fetched are kept and resumed"
                    )));
                }
                Err(Fetch::Fatal(err)) => {
                    progress.finish("failed");
                    return Err(err);
                }
            }
        }
        let actual = Digest::from_hasher(hasher);
        if actual != *digest {
            progress.finish("refused");
            drop(file);
            let _ = fs::remove_file(partial);
            return Err(OciError::Digest {
                what: format!("the layer blob of {image} (refused, nothing of it kept)"),
                expected: digest.to_string(),
                actual: actual.to_string(),
            });
        }
        file.sync_all().map_err(|err| cache_error(partial, err))?;
        fs::rename(partial, done).map_err(|err| cache_error(done, err))?;
        progress.finish("done");
        Ok(())
    }

    /// One try: the bytes from `have` on, appended and hashed.
    async fn fetch_into(
        &mut self,
        digest: &Digest,
        size: Option<u64>,
        file: &mut File,
        (hasher, have): (&mut Sha256, &mut u64),
        progress: &Progress,
    ) -> Result<(), Fetch> {
        let mut response = self.get(&format!("/blobs/{digest}"), None, *have).await?;
        let restart = |file: &mut File, hasher: &mut Sha256, have: &mut u64| {
            *hasher = Sha256::new();
            *have = 0;
            file.set_len(0).and_then(|()| file.rewind())
        };
        match response.status() {
            StatusCode::PARTIAL_CONTENT if *have > 0 => {}
            // The whole blob: what was kept is replaced.
            StatusCode::OK => {
                restart(file, hasher, have)
                    .map_err(|err| Fetch::Fatal(cache_error(Path::new("a partial blob"), err)))?;
            }
            StatusCode::RANGE_NOT_SATISFIABLE => {
                restart(file, hasher, have)
                    .map_err(|err| Fetch::Fatal(cache_error(Path::new("a partial blob"), err)))?;
                return Err(Fetch::Retry("the registry refused the range".to_owned()));
            }
            StatusCode::NOT_FOUND => {
                return Err(Fetch::Fatal(self.protocol(format!(
                    "the layer {digest} is missing though the manifest names it"
                ))));
            }
            status => {
                return Err(Fetch::Fatal(
                    self.protocol(format!("the layer {digest}: {status}")),
                ));
            }
        }
        progress.set(*have);
        loop {
            match response.chunk().await {
                Ok(Some(bytes)) => {
                    file.write_all(&bytes)
                        .map_err(|err| Fetch::Fatal(cache_error(Path::new("a layer blob"), err)))?;
                    hasher.update(&bytes);
                    *have += bytes.len() as u64;
                    progress.set(*have);
                    if size.is_some_and(|size| *have > size) {
                        return Err(Fetch::Fatal(self.protocol(format!(
                            "the layer {digest} is longer than the manifest's {} bytes",
                            size.unwrap_or_default()
                        ))));
                    }
                }
                // An answer that ended as it said it would: whatever its
                // length, the digest decides.
                Ok(None) => return Ok(()),
                Err(err) => return Err(Fetch::Retry(describe(&err))),
            }
        }
    }
}

/// The repository's API: HTTPS, or plain HTTP on loopback only.
fn base_url(reference: &Reference) -> String {
    let scheme = if reference.is_loopback() {
        "http"
    } else {
        "https"
    };
    format!(
        "{scheme}://{}/v2/{}",
        reference.api_host(),
        reference.repository
    )
}

/// Why an answer could not be read whole; its caller says which answer
/// (the manifest, a blob, the token) and of which registry.
#[derive(Debug, thiserror::Error)]
enum ReadError {
    #[error("{}", describe(.0))]
    Transfer(reqwest::Error),
    #[error("longer than {0} bytes")]
    TooLong(usize),
}

/// A whole answer, at most `limit` bytes.
async fn read_limited(mut response: reqwest::Response, limit: usize) -> Result<Vec<u8>, ReadError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(ReadError::Transfer)? {
        if bytes.len() + chunk.len() > limit {
            return Err(ReadError::TooLong(limit));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// A layer's bytes on stderr: a bar on a terminal, a line at the start
/// and at the end otherwise (logs of batch jobs).
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    label: String,
}

impl Progress {
    fn start(image: &str, digest: &Digest, size: Option<u64>, have: u64) -> Progress {
        let short = &digest.hex()[..12];
        let label = format!("pulling {image}: layer {short}");
        if !std::io::stderr().is_terminal() {
            let total = size.map_or_else(|| "? bytes".to_owned(), |s| format!("{s} bytes"));
            let resumed = if have > 0 {
                format!(", resuming at {have}")
            } else {
                String::new()
            };
            eprintln!("{label}: {total}{resumed}");
            return Progress { bar: None, label };
        }
        let bar =
            indicatif::ProgressBar::with_draw_target(size, indicatif::ProgressDrawTarget::stderr());
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{msg} {bar:30} {bytes}/{total_bytes} {bytes_per_sec}",
        ) {
            bar.set_style(style);
        }
        bar.set_message(label.clone());
        bar.set_position(have);
        Progress {
            bar: Some(bar),
            label,
        }
    }

    fn set(&self, have: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(have);
        }
    }

    fn note(&self, text: &str) {
        match &self.bar {
            Some(bar) => bar.println(format!("{}: {text}", self.label)),
            None => eprintln!("{}: {text}", self.label),
        }
    }

    fn finish(&self, how: &str) {
        match &self.bar {
            Some(bar) => bar.finish_with_message(format!("{} {how}", self.label)),
            None => eprintln!("{}: {how}", self.label),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_is_for_loopback_registries_only() {
        let cases = [
            ("debian", "https://registry-1.docker.io/v2/library/debian"),
            ("ghcr.io/o/i:v", "https://ghcr.io/v2/o/i"),
            ("10.0.0.1:5000/a/b", "https://10.0.0.1:5000/v2/a/b"),
            ("127.0.0.1:5000/a/b", "http://127.0.0.1:5000/v2/a/b"),
            ("localhost:5000/a", "http://localhost:5000/v2/a"),
        ];
        for (text, url) in cases {
            let reference = Reference::parse(text).expect(text);
            assert_eq!(base_url(&reference), url, "{text}");
        }
    }
}
