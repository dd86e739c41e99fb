//! What can go wrong making an image ready ([`OciError`]), and a
//! registry's part of it ([`RegistryError`]), and what makes a layer
//! hostile ([`Hostile`]): every file of the folder returns them. Each variant names the file, folder or image it concerns
//! and keeps the error it wraps as its source.

use std::path::PathBuf;

/// A cache file's error of any kind (I/O, JSON, a bind list's check),
/// kept whole as the source.
pub(crate) type CacheFault = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What can go wrong making an image ready.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error("unsupported digest {text:?} (sha256 only)")]
    UnsupportedDigest { text: String },
    #[error("malformed digest {text:?}")]
    MalformedDigest { text: String },
    #[error(
        "{reference:?} is not an image reference: {problem}\nhint: --env oci takes docker://[HOST/]REPOSITORY[:TAG][@sha256:DIGEST] (or the same without docker://), docker-archive:PATH or oci:PATH[:REF]"
    )]
    BadReference {
        reference: String,
        problem: ReferenceProblem,
    },
    #[error("{reference} has no tag")]
    NoTag { reference: String },
    #[error("{reference} is a registry's image, not a local one")]
    NotLocal { reference: String },
    /// A file of an image's archive or layout.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// An archive without the entry its manifest names.
    #[error("{} has no {}", archive.display(), entry.display())]
    NoEntry { archive: PathBuf, entry: PathBuf },
    #[error("{} has no {}: not a docker-archive", archive.display(), entry.display())]
    NotArchive { archive: PathBuf, entry: PathBuf },
    /// An image's JSON file that is not what it should be: `part` names it
    /// (`manifest.json`, `the image config`).
    #[error("{}: {part}: {source}", path.display())]
    Json {
        path: PathBuf,
        part: &'static str,
        source: serde_json::Error,
    },
    /// A manifest or an index that is not one.
    #[error("{}: {source}", path.display())]
    Document {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{} holds no image", path.display())]
    NoImage { path: PathBuf },
    #[error("{} holds {count} images; save one image per archive", archive.display())]
    ArchiveImages { archive: PathBuf, count: usize },
    #[error("{} holds several images\nhint: name one: oci:{}:REF", dir.display(), dir.display())]
    LayoutImages { dir: PathBuf },
    #[error(
        "{} is not an OCI image layout (no oci-layout file)\nhint: podman save --format oci-dir -o DIR IMAGE",
        dir.display()
    )]
    NotLayout { dir: PathBuf },
    #[error("{}: no image named {name:?}", dir.display())]
    NoNamed { dir: PathBuf, name: String },
    #[error("{}: no image for linux/amd64", path.display())]
    NoPlatform { path: PathBuf },
    #[error("{}: {layers} layers but {diff_ids} diff_ids in the config", path.display())]
    LayerCount {
        path: PathBuf,
        layers: usize,
        diff_ids: usize,
    },
    /// `image` is a layout's folder or a registry's reference.
    #[error("{image}: the manifest names no config")]
    NoConfig { image: String },
    #[error("{image}: indexes nested too deep")]
    TooDeep { image: String },
    #[error(
        "the registry credentials in {}: {problem}\nhint: fix or move the file (docker login rewrites it)",
        file.display()
    )]
    Credentials {
        file: PathBuf,
        problem: CredentialsProblem,
    },
    /// A workdir the sandbox cannot mount over.
    #[error(
        "/{} is not in the image, and its folder comes whole from one layer, which is never written\nhint: choose a --workdir (or a task `workdir`) the image has, or one outside it",
        rel.display()
    )]
    NotInImage { rel: PathBuf },
    #[error("the image has no folder /{}", rel.display())]
    NoFolder { rel: PathBuf },
    /// The copy of a folder of the image (the repo it holds).
    #[error("cannot copy it to {}: {source}", to.display())]
    Copy { to: PathBuf, source: std::io::Error },
    /// Bytes that do not match their digest.
    #[error("{what}: the digest is {actual}, not {expected}")]
    Digest {
        what: String,
        expected: String,
        actual: String,
    },
    /// A layer entry that would write outside the image's root.
    #[error("refused a hostile layer: {0}")]
    Hostile(#[from] Hostile),
    /// A path of the image a mount point or a copy would go through
    /// wrongly: `why` says how.
    #[error("refused a hostile layer: /{} in the image {why}", rel.display())]
    HostilePath { rel: PathBuf, why: &'static str },
    /// A file or folder of the cache (`path` may name a file's role, as
    /// `a layer blob`).
    #[error("the layer cache: {}: {source}", path.display())]
    Cache { path: PathBuf, source: CacheFault },
    #[error("the layer cache: {} vanished", path.display())]
    Vanished { path: PathBuf },
    #[error("the layer cache: cannot make an HTTP client: {0}")]
    HttpClient(#[source] reqwest::Error),
    #[error("the layer cache: cannot start an async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// A registry that refused, lacked or did not serve the image.
    #[error(transparent)]
    Registry(#[from] RegistryError),
}

impl OciError {
    /// `Cache` of `path`, for `map_err`.
    pub(crate) fn cache(path: &std::path::Path, source: impl Into<CacheFault>) -> OciError {
        OciError::Cache {
            path: path.to_owned(),
            source: source.into(),
        }
    }
}

/// What makes a text no image reference.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceProblem {
    /// Its digest (after `@`).
    #[error("{0}")]
    Digest(#[source] Box<OciError>),
    #[error("{host:?} is not a registry host")]
    Host { host: String },
    #[error("a repository is lowercase letters, digits and `._-`, between `/`")]
    Repository,
    #[error("{tag:?} is not a tag")]
    Tag { tag: String },
}

/// What is wrong with a registry credentials file.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsProblem {
    #[error("not a docker config (JSON)")]
    NotJson,
    #[error("the `auth` of {host} is not base64")]
    NotBase64 { host: String },
    #[error("the `auth` of {host} is not UTF-8")]
    NotUtf8 { host: String },
    #[error("the `auth` of {host} is not user:password")]
    NotUserPassword { host: String },
}

/// How to give onebash credentials for `host`.
pub(super) fn login_hint(host: &str) -> String {
    format!(
        "docker login {host} (or podman login): onebash reads $DOCKER_CONFIG/config.json, ~/.docker/config.json and $XDG_RUNTIME_DIR/containers/auth.json"
    )
}

/// What a registry pull can fail on, apart from a digest that does not
/// match (an [`OciError::Digest`]).
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// A manifest the registry answered 404 for: `key` is its tag or digest.
    #[error(
        "the registry has no image {host}/{repository}:{key}\nhint: check the name and the tag (the task's `image`, or --image)"
    )]
    NotFound {
        host: String,
        repository: String,
        key: String,
    },
    /// The registry refused the repository: `credentials` is the file
    /// whose credentials it did not accept, `None` when none were sent.
    #[error(
        "the registry at {host} refused {repository}: {}\nhint: {}",
        match credentials {
            Some(file) => format!("the credentials from {} are not accepted", file.display()),
            None => "it needs credentials, or the image does not exist".to_owned(),
        },
        login_hint(host)
    )]
    Refused {
        host: String,
        repository: String,
        credentials: Option<PathBuf>,
    },
    #[error(
        "the registry at {host} asks for a user and password and none is configured\nhint: {}",
        login_hint(host)
    )]
    NoCredentials { host: String },
    /// The token service refused, with the credentials of `credentials`
    /// or anonymously.
    #[error(
        "the token service of {host} refused {repository} ({status}){}\nhint: {}",
        match credentials {
            Some(file) => format!(" with the credentials from {}", file.display()),
            None => " anonymous access".to_owned(),
        },
        login_hint(host)
    )]
    TokenRefused {
        host: String,
        repository: String,
        status: reqwest::StatusCode,
        credentials: Option<PathBuf>,
    },
    #[error(
        "the registry at {host} does not answer: {why}\nhint: check the host and port; a node without access can use a cache filled elsewhere (onebash pull, then --pull never)"
    )]
    Unreachable { host: String, why: String },
    #[error("the registry at {host}: {why}")]
    Protocol { host: String, why: String },
    /// `what` (the manifest, the config, a layer) of `reference`.
    #[error(
        "{what} of {reference} is not in the cache, and --pull never does not fetch it\nhint: run `onebash pull TASKS --env oci` with the same --image once on this machine, or use --pull missing"
    )]
    NotCached { what: String, reference: String },
}

/// What makes a layer hostile: an entry that would write outside the
/// image's root, or link to what is not its own.
#[derive(Debug, thiserror::Error)]
pub enum Hostile {
    #[error("{} climbs out with `..`", .0.display())]
    ClimbsOut(PathBuf),
    #[error("{} is absolute", .0.display())]
    Absolute(PathBuf),
    #[error("{} goes through the symlink {}", entry.display(), symlink.display())]
    ThroughSymlink { entry: PathBuf, symlink: PathBuf },
    #[error("{} goes through the file {}", entry.display(), file.display())]
    ThroughFile { entry: PathBuf, file: PathBuf },
    #[error("{} is a symlink to nothing", .0.display())]
    SymlinkToNothing(PathBuf),
    #[error("the symlink {} -> {} leaves the image's root", link.display(), target.display())]
    SymlinkLeavesRoot { link: PathBuf, target: PathBuf },
    #[error("{} is a hard link to nothing", .0.display())]
    HardLinkToNothing(PathBuf),
    #[error("the hard link {}: {why}", link.display())]
    HardLinkOut { link: PathBuf, why: Box<Hostile> },
    #[error("{} is a hard link to the root", .0.display())]
    HardLinkToRoot(PathBuf),
    #[error(
        "the hard link {} names {}, which is not a file of this layer",
        link.display(),
        target.display()
    )]
    HardLinkNotInLayer { link: PathBuf, target: PathBuf },
}
