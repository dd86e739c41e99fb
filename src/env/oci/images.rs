//! `--env oci`: tasks in their image with no daemon and no root, each
//! command under bubblewrap over the image's root file system, read-only.
//!
//! The pieces, in the order an image goes through them:
//! - [`source`]: where an image comes from (`docker-archive:PATH`,
//!   `oci:PATH[:REF]`, or a registry's reference, [`reference`]) and its
//!   manifest and config;
//! - [`registry`]: a registry's image fetched into the cache as `--pull`
//!   says (manifest, config, layer blobs verified), through [`client`]
//!   (the distribution API over HTTP(S)) with [`auth`]'s challenge and
//!   credentials;
//! - [`layers`]: the cache of unpacked layers, each checked against its
//!   digests, unpacked once, with traversal refused;
//! - [`rootfs`]: the image's root stacked from its layers by hard links,
//!   once per image, its big one-layer folders bound from the layer
//!   ([`binds`] chooses them);
//! - [`workspace`]: the environment itself: the bwrap command line of
//!   each command over that root, with the task's working copy bound at
//!   its workdir and a private /tmp.
//!
//! Images are made ready once, before the run starts ([`Images::prepare`],
//! from the probe): a missing or hostile image stops the run with exit 2,
//! as a missing podman image does.

use std::collections::HashMap;
use std::path::Path;

use crate::env::EnvError;
use crate::env::PullPolicy;

use super::digest::Digest;
use super::error::OciError;
use super::{layers, registry, rootfs, source};

/// One image made ready: its root and what its config says.
#[derive(Debug, Clone)]
pub(crate) struct Image {
    /// Its root file system: a folder, and layers' folders bound over it.
    pub root: rootfs::Root,
    /// The config's `Env`, in order.
    pub env: Vec<(String, String)>,
}

/// Every image of a run, by the name tasks give it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Images {
    by_name: HashMap<String, Image>,
}

impl Images {
    /// Makes every image ready under `<cache_dir>/oci`: reads its
    /// manifest (a registry's as `pull` says), unpacks the layers the
    /// cache lacks, assembles its root. Blocking; progress on stderr.
    /// Errors are whole messages.
    pub(crate) fn prepare(
        cache_dir: &Path,
        names: &[String],
        pull: PullPolicy,
    ) -> Result<Images, EnvError> {
        let oci_dir = cache_dir.join("oci");
        let cache = layers::LayerCache::new(&oci_dir);
        let mut by_name = HashMap::new();
        for name in names {
            if by_name.contains_key(name) {
                continue;
            }
            let image =
                prepare_one(&oci_dir, &cache, name, pull).map_err(|source| EnvError::OciImage {
                    image: name.clone(),
                    source,
                })?;
            by_name.insert(name.clone(), image);
        }
        Ok(Images { by_name })
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Image> {
        self.by_name.get(name)
    }

    /// Any one image, for the probe.
    pub(crate) fn first(&self) -> Option<&Image> {
        self.by_name.values().next()
    }
}

/// Whether an image is ready before a run, as `run --dry-run` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Readiness {
    /// In the engine's store, or read from the cache or a local file.
    Present,
    /// Not there; the registry names this manifest digest for it.
    ToPull(Digest),
    /// To be pulled, no registry asked: `--pull always` pulls every image
    /// again, and an engine reads a local source itself.
    ToPullAgain,
}

/// [`Images::prepare`] without fetching or unpacking anything: each
/// image's manifest found in the cache or a local file, or its digest
/// asked of the registry. An error is the one a run would stop with.
pub(crate) fn look(
    cache_dir: &Path,
    names: &[String],
    pull: PullPolicy,
) -> Result<Vec<(String, Readiness)>, EnvError> {
    let oci_dir = cache_dir.join("oci");
    let mut states: Vec<(String, Readiness)> = Vec::new();
    for name in names {
        if states.iter().any(|(seen, _)| seen == name) {
            continue;
        }
        let state = look_one(&oci_dir, name, pull).map_err(|source| EnvError::OciImage {
            image: name.clone(),
            source,
        })?;
        states.push((name.clone(), state));
    }
    Ok(states)
}

fn look_one(oci_dir: &Path, name: &str, pull: PullPolicy) -> Result<Readiness, OciError> {
    let source = source::Source::parse(name)?;
    let source::Source::Registry(reference) = &source else {
        return source.manifest().map(|_| Readiness::Present);
    };
    // Present: all a `--pull never` run needs is in the cache (the
    // manifest, the config, each layer unpacked or its blob kept), as
    // `registry::pull` under `never` finds it, fetching nothing.
    let cache = layers::LayerCache::new(oci_dir);
    let here = registry::pull(oci_dir, reference, PullPolicy::Never, &|d| cache.has(d));
    match (here, pull) {
        (Ok(_), PullPolicy::Never | PullPolicy::Missing) => Ok(Readiness::Present),
        (Err(err), PullPolicy::Never) => Err(err),
        _ => registry::look(reference).map(Readiness::ToPull),
    }
}

/// The same for an image missing from an engine's store: its registry
/// asked for the digest (by onebash's own client, with a HEAD), so a name
/// that no registry has stops the dry run as it would the run. A local
/// source (`docker-archive:`) is the engine's to read.
pub(crate) fn look_in_registry(name: &str) -> Result<Readiness, EnvError> {
    let asked = source::Source::parse(name).and_then(|source| match source {
        source::Source::Registry(reference) => registry::look(&reference).map(Readiness::ToPull),
        _ => Ok(Readiness::ToPullAgain),
    });
    asked.map_err(|source| EnvError::OciImage {
        image: name.to_owned(),
        source,
    })
}

fn prepare_one(
    oci_dir: &Path,
    cache: &layers::LayerCache,
    name: &str,
    pull: PullPolicy,
) -> Result<Image, OciError> {
    let source = source::Source::parse(name)?;
    let manifest = match &source {
        source::Source::Registry(reference) => {
            registry::pull(oci_dir, reference, pull, &|diff_id| cache.has(diff_id))?
        }
        _ => source.manifest()?,
    };
    let mut unpacked = Vec::with_capacity(manifest.layers.len());
    for layer in &manifest.layers {
        unpacked.push(cache.ensure(&source, layer)?);
        // A registry's blob has served once it is unpacked (the layer
        // folder exists, so no process opens the blob again).
        if let (source::Source::Registry(_), Some(blob)) = (&source, &layer.blob) {
            let _ = std::fs::remove_file(registry::blob_path(oci_dir, blob));
        }
    }
    let root = rootfs::assemble(oci_dir, manifest.config_digest.hex(), &unpacked)?;
    Ok(Image {
        root,
        env: manifest.env(),
    })
}
