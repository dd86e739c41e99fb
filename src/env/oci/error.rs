//! What can go wrong making an image ready ([`OciError`]), and a
//! registry's part of it ([`RegistryError`]): every file of the folder
//! returns them.

/// What can go wrong making an image ready.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// The image cannot be read or is not one.
    #[error("{0}")]
    Image(String),
    /// Bytes that do not match their digest.
    #[error("{what}: the digest is {actual}, not {expected}")]
    Digest {
        what: String,
        expected: String,
        actual: String,
    },
    /// A layer entry that would write outside the image's root.
    #[error("refused a hostile layer: {0}")]
    Refused(String),
    /// The cache's files.
    #[error("the layer cache: {0}")]
    Cache(String),
    /// A registry that refused, lacked or did not serve the image.
    #[error(transparent)]
    Registry(#[from] RegistryError),
}

/// What a registry pull can fail on, apart from a digest that does not
/// match (an [`OciError::Digest`]).
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error(
        "the registry has no image {0}\nhint: check the name and the tag (the task's `image`, or --image)"
    )]
    NotFound(String),
    /// Credentials missing or refused; the message says which.
    #[error("{0}")]
    Auth(String),
    #[error(
        "the registry at {host} does not answer: {why}\nhint: check the host and port; a node without access can use a cache filled elsewhere (onebash pull, then --pull never)"
    )]
    Unreachable { host: String, why: String },
    #[error("the registry at {host}: {why}")]
    Protocol { host: String, why: String },
    #[error(
        "{0} is not in the cache, and --pull never does not fetch it\nhint: run `onebash pull TASKS --env oci` with the same --image once on this machine, or use --pull missing"
    )]
    NotCached(String),
}
