//! Images from an OCI / Docker registry, into the cache, so that
//! `layers.rs` unpacks them as it does a local archive's.
//!
//! Owns the pull of one reference: the manifest (Docker v2 schema 2 or
//! OCI; a manifest list or index picks linux/amd64), the config, and each
//! layer blob the layer cache lacks, asked of the registry through
//! `client.rs` (the HTTP, the auth, the resumed download) only when the
//! cache and `--pull` say so. What it keeps, under `<cache>/oci/`:
//! - `blobs/sha256/<hex>`: manifests and configs (small, kept), and layer
//!   blobs until they are unpacked. Every blob is hashed as it arrives and
//!   renamed into place only when its digest matches; a layer's bytes are
//!   written to `<hex>.partial` under a `flock` on `<hex>.lock`, so a
//!   killed pull leaves only a partial file, which the next pull hashes
//!   again and completes with a `Range` request (or starts over when the
//!   registry answers whole).
//! - `refs/<host>/<repository>/<tag>`: the digest a tag was last resolved
//!   to. With `--pull missing` a tag found there is not asked again;
//!   `--pull always` asks; `--pull never` never connects. A digest-pinned
//!   reference whose blobs are here never connects either.
//!
//! Why reqwest rather than a registry crate (oci-client): reqwest is
//! already here, and the pull had to own its files anyway (the partial
//! file resumed, verified, renamed under the cache's locks), which is most
//! of the code; oci-client would add a second reqwest and its own auth
//! flow without the docker config's credentials.

use std::fs;
use std::path::{Path, PathBuf};

use super::OciError;
use super::client::{Net, cache_error};
use super::digest::Digest;
use super::error::RegistryError;
use super::reference::Reference;
use super::source::{self, Manifest};
use crate::env::PullPolicy;
use crate::sys::lock::FileLock;
/// Fetches what `reference` needs into `<oci_dir>` as `policy` says and
/// returns its manifest, each layer's blob in the cache unless
/// `unpacked(diff_id)` says the layer is already unpacked. Blocking (its
/// own single-threaded runtime): called before the run's runtime starts.
pub(super) fn pull(
    oci_dir: &Path,
    reference: &Reference,
    policy: PullPolicy,
    unpacked: &dyn Fn(&Digest) -> bool,
) -> Result<Manifest, OciError> {
    let runtime = runtime()?;
    let puller = Puller {
        store: Store::new(oci_dir),
        reference,
        policy,
        net: None,
    };
    runtime.block_on(puller.pull(unpacked))
}

/// The digest the registry gives `reference`, asked with a HEAD (a GET
/// of the manifest when the registry gives no digest so), nothing written
/// to the cache: whether an image missing here can be pulled, for `run
/// --dry-run`. Blocking, as [`pull`].
pub(super) fn look(reference: &Reference) -> Result<Digest, OciError> {
    if let Some(digest) = &reference.digest {
        return Ok(digest.clone());
    }
    let Some(tag) = reference.tag.clone() else {
        return Err(OciError::NoTag {
            reference: reference.to_string(),
        });
    };
    let runtime = runtime()?;
    runtime.block_on(async {
        let mut net = Net::new(reference)?;
        match net.manifest_digest(&tag).await? {
            Some(digest) => Ok(digest),
            None => Ok(Digest::of(&net.manifest(&tag).await?.0)),
        }
    })
}

/// The single-threaded runtime [`pull`] and [`look`] block on: both run
/// before the run's own runtime starts.
fn runtime() -> Result<tokio::runtime::Runtime, OciError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(OciError::Runtime)
}

/// Where a layer's blob is kept until it is unpacked.
pub(super) fn blob_path(oci_dir: &Path, digest: &Digest) -> PathBuf {
    Store::new(oci_dir).blob_path(digest)
}

/// The registry's files in the cache.
struct Store {
    blobs: PathBuf,
    refs: PathBuf,
}

impl Store {
    fn new(oci_dir: &Path) -> Store {
        Store {
            blobs: oci_dir.join("blobs/sha256"),
            refs: oci_dir.join("refs"),
        }
    }

    fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.blobs.join(digest.hex())
    }

    /// A small blob of the cache, if there and whole; one that does not
    /// match its name is removed and fetched again.
    fn read_blob(&self, digest: &Digest) -> Option<Vec<u8>> {
        let path = self.blob_path(digest);
        let bytes = fs::read(&path).ok()?;
        if Digest::of(&bytes) == *digest {
            return Some(bytes);
        }
        let _ = fs::remove_file(&path);
        None
    }

    /// Writes `bytes` at `path` whole or not at all (a temporary file of
    /// this process, renamed).
    fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), OciError> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(|err| cache_error(dir, err))?;
        }
        let temporary = path.with_extension(format!("tmp-{}", std::process::id()));
        fs::write(&temporary, bytes).map_err(|err| cache_error(&temporary, err))?;
        fs::rename(&temporary, path).map_err(|err| cache_error(path, err))
    }

    fn write_blob(&self, digest: &Digest, bytes: &[u8]) -> Result<(), OciError> {
        Self::write_atomic(&self.blob_path(digest), bytes)
    }

    /// The file of a tag: every part was checked by `Reference::parse`
    /// to be a plain path component.
    fn ref_path(&self, reference: &Reference, tag: &str) -> PathBuf {
        self.refs
            .join(&reference.host)
            .join(&reference.repository)
            .join(tag)
    }

    fn read_ref(&self, reference: &Reference, tag: &str) -> Option<Digest> {
        let text = fs::read_to_string(self.ref_path(reference, tag)).ok()?;
        Digest::parse(text.trim()).ok()
    }
}

/// One reference's pull.
struct Puller<'a> {
    store: Store,
    reference: &'a Reference,
    policy: PullPolicy,
    /// Made at the first request: a pull served by the cache connects to
    /// nothing.
    net: Option<Net>,
}

impl Puller<'_> {
    /// The client, unless `--pull never` forbids asking for `what`.
    fn net(&mut self, what: &str) -> Result<&mut Net, OciError> {
        if self.policy == PullPolicy::Never {
            return Err(RegistryError::NotCached {
                what: what.to_owned(),
                reference: self.reference.to_string(),
            }
            .into());
        }
        let net = match self.net.take() {
            Some(net) => net,
            None => Net::new(self.reference)?,
        };
        Ok(self.net.insert(net))
    }

    async fn pull(mut self, unpacked: &dyn Fn(&Digest) -> bool) -> Result<Manifest, OciError> {
        let mut digest = self.resolve().await?;
        let name = self.reference.to_string();
        // An index (a multi-arch image) names one manifest per platform.
        for _ in 0..4 {
            let bytes = self.small_blob(&digest, "the manifest").await?;
            let document = source::parse_document(&bytes, Path::new(&name))?;
            if source::is_index(&document.media_type)
                || (!document.manifests.is_empty() && document.config.is_none())
            {
                let picked = source::pick_platform(&document.manifests, Path::new(&name))?;
                digest = Digest::parse(&picked.digest)?;
                continue;
            }
            return self.image(document, unpacked).await;
        }
        Err(OciError::TooDeep { image: name })
    }

    /// The digest of the reference's manifest (or index): pinned, found
    /// in the cache (unless `--pull always`), or asked of the registry.
    async fn resolve(&mut self) -> Result<Digest, OciError> {
        let reference = self.reference;
        let Some(tag) = (match &reference.digest {
            Some(digest) => return Ok(digest.clone()),
            None => reference.tag.clone(),
        }) else {
            return Err(OciError::NoTag {
                reference: reference.to_string(),
            });
        };
        if self.policy != PullPolicy::Always
            && let Some(digest) = self.store.read_ref(reference, &tag)
            && self.store.read_blob(&digest).is_some()
        {
            return Ok(digest);
        }
        let (bytes, announced) = self.net("the manifest")?.manifest(&tag).await?;
        let digest = Digest::of(&bytes);
        if let Some(announced) = announced
            && announced != digest
        {
            return Err(OciError::Digest {
                what: format!("the manifest of {reference}"),
                expected: announced.to_string(),
                actual: digest.to_string(),
            });
        }
        self.store.write_blob(&digest, &bytes)?;
        Store::write_atomic(
            &self.store.ref_path(reference, &tag),
            digest.to_string().as_bytes(),
        )?;
        Ok(digest)
    }

    /// A manifest or config: from the cache, else fetched and checked.
    async fn small_blob(&mut self, digest: &Digest, what: &str) -> Result<Vec<u8>, OciError> {
        if let Some(bytes) = self.store.read_blob(digest) {
            return Ok(bytes);
        }
        let reference = self.reference;
        let net = self.net(what)?;
        let bytes = if what == "the manifest" {
            net.manifest(&digest.to_string()).await?.0
        } else {
            net.json_blob(digest).await?
        };
        let actual = Digest::of(&bytes);
        if actual != *digest {
            return Err(OciError::Digest {
                what: format!("{what} of {reference}"),
                expected: digest.to_string(),
                actual: actual.to_string(),
            });
        }
        self.store.write_blob(digest, &bytes)?;
        Ok(bytes)
    }

    /// The image manifest's config, and the blob of every layer not yet
    /// unpacked.
    async fn image(
        &mut self,
        document: source::Document,
        unpacked: &dyn Fn(&Digest) -> bool,
    ) -> Result<Manifest, OciError> {
        let name = self.reference.to_string();
        let config_descriptor = document.config.ok_or_else(|| OciError::NoConfig {
            image: name.clone(),
        })?;
        let config_digest = Digest::parse(&config_descriptor.digest)?;
        let config_bytes = self.small_blob(&config_digest, "the config").await?;
        let config = source::parse_config(&config_bytes, Path::new(&name))?;
        let blobs = document
            .layers
            .iter()
            .map(|layer| Ok((Digest::parse(&layer.digest)?, layer.size)))
            .collect::<Result<Vec<_>, OciError>>()?;
        let layers = source::zip_layers(
            &config,
            Path::new(&name),
            blobs
                .iter()
                .map(|(digest, _)| (Some(digest.clone()), self.store.blob_path(digest))),
        )?;
        for (layer, (blob, size)) in layers.iter().zip(&blobs) {
            // Checked again under the blob's lock: another process may
            // unpack the layer (and remove its blob) meanwhile.
            let unpacked_now = || unpacked(&layer.diff_id);
            if !unpacked_now() {
                self.layer_blob(blob, *size, &unpacked_now).await?;
            }
        }
        Ok(Manifest {
            config_digest,
            config,
            layers,
        })
    }

    /// A layer's blob into the cache, verified, under its lock, unless
    /// the layer is unpacked by the time the lock is had.
    async fn layer_blob(
        &mut self,
        digest: &Digest,
        size: Option<u64>,
        unpacked: &dyn Fn() -> bool,
    ) -> Result<(), OciError> {
        let done = self.store.blob_path(digest);
        if done.is_file() {
            return Ok(());
        }
        let dir = &self.store.blobs;
        fs::create_dir_all(dir).map_err(|err| cache_error(dir, err))?;
        let lock_path = dir.join(format!("{}.lock", digest.hex()));
        let _lock = FileLock::acquire(&lock_path).map_err(|err| cache_error(&lock_path, err))?;
        // Another process may have fetched it, or fetched, unpacked and
        // removed it, while this one waited.
        if done.is_file() || unpacked() {
            return Ok(());
        }
        let partial = dir.join(format!("{}.partial", digest.hex()));
        let name = self.reference.to_string();
        let net = self.net(&format!("the layer {digest}"))?;
        net.download(digest, size, (&partial, &done), &name).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_corrupt_cached_blob_is_dropped_not_served() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::new(dir.path());
        let digest = Digest::of(b"{}");
        store.write_blob(&digest, b"{}").expect("write");
        assert_eq!(store.read_blob(&digest).as_deref(), Some(&b"{}"[..]));
        fs::write(store.blob_path(&digest), b"{\"x\":1}").expect("tamper");
        assert!(store.read_blob(&digest).is_none());
        assert!(!store.blob_path(&digest).exists());
    }
}
