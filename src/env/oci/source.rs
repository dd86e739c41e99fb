//! Where an image comes from, and what it says of itself: the reference
//! (`docker-archive:PATH`, `oci:PATH[:REF]`, or a registry's, which
//! `reference.rs` parses), its manifest and config, and a reader of each
//! layer's bytes.
//!
//! Owns reading the two local formats sites move images in by hand: a
//! `docker save` / `podman save` archive (a tar holding `manifest.json`,
//! the config and one tar per layer) and an OCI image layout folder
//! (`oci-layout`, `index.json`, `blobs/sha256/...`, where a multi-arch
//! index picks linux/amd64). Every JSON blob addressed by a digest is
//! checked against it when read; the layers are checked while they are
//! unpacked (`layers.rs`). It does not unpack or cache anything. A
//! registry image is fetched by `registry.rs`, which gives the same
//! [`Manifest`] with each layer's blob in the cache.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::OciError;
use super::digest::Digest;
use super::reference::Reference;

/// An image the user named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Source {
    /// `docker-archive:PATH`: what `docker save` / `podman save` write.
    DockerArchive(PathBuf),
    /// `oci:PATH[:REF]`: an OCI image layout folder, and which of its
    /// images (`org.opencontainers.image.ref.name`) when it holds several.
    Layout {
        dir: PathBuf,
        reference: Option<String>,
    },
    /// `docker://REF` or a bare `REF`: an image in a registry.
    Registry(Reference),
}

impl Source {
    /// Parses a reference; relative paths are taken from the current
    /// folder. What names no local format is a registry's reference.
    pub(super) fn parse(reference: &str) -> Result<Source, OciError> {
        let absolute = |p: &str| std::path::absolute(p).unwrap_or_else(|_| PathBuf::from(p));
        if let Some(path) = reference.strip_prefix("docker-archive:") {
            return Ok(Source::DockerArchive(absolute(path)));
        }
        if let Some(rest) = reference.strip_prefix("oci:") {
            // `oci:DIR:REF`, unless DIR itself holds the colon.
            if !Path::new(rest).is_dir()
                && let Some((dir, name)) = rest.rsplit_once(':')
            {
                return Ok(Source::Layout {
                    dir: absolute(dir),
                    reference: Some(name.to_owned()),
                });
            }
            return Ok(Source::Layout {
                dir: absolute(rest),
                reference: None,
            });
        }
        Reference::parse(reference).map(Source::Registry)
    }
}

/// What the runtime needs of an image config (`config` of the OCI image
/// spec), and the layers' uncompressed digests.
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct ImageConfig {
    #[serde(default)]
    pub config: RuntimeConfig,
    pub rootfs: RootFs,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct RuntimeConfig {
    #[serde(rename = "Env", default)]
    pub env: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct RootFs {
    #[serde(default)]
    pub diff_ids: Vec<String>,
}

/// One layer: the digest of its tar once uncompressed (the cache's key),
/// and of its blob as stored, when the source gives one apart.
#[derive(Debug, Clone)]
pub(super) struct LayerRef {
    pub diff_id: Digest,
    pub blob: Option<Digest>,
    /// Where its bytes are: a path inside the archive, or a file.
    location: PathBuf,
}

#[cfg(test)]
impl LayerRef {
    /// A layer of an OCI layout at `location`, its blob not named apart.
    pub(super) fn for_test(diff_id: Digest, location: PathBuf) -> LayerRef {
        LayerRef {
            diff_id,
            blob: None,
            location,
        }
    }
}

/// An image's config and layers, bottom first.
#[derive(Debug, Clone)]
pub(super) struct Manifest {
    pub config_digest: Digest,
    pub config: ImageConfig,
    pub layers: Vec<LayerRef>,
}

impl Manifest {
    /// The image's environment as pairs (`KEY=VALUE` entries).
    pub(super) fn env(&self) -> Vec<(String, String)> {
        self.config
            .config
            .env
            .iter()
            .flatten()
            .filter_map(|entry| {
                let (k, v) = entry.split_once('=')?;
                Some((k.to_owned(), v.to_owned()))
            })
            .collect()
    }
}

fn read_error(path: &Path, source: std::io::Error) -> OciError {
    OciError::Read {
        path: path.to_owned(),
        source,
    }
}

impl Source {
    /// Reads the manifest and config, checking the config's digest.
    pub(super) fn manifest(&self) -> Result<Manifest, OciError> {
        match self {
            Source::DockerArchive(path) => archive_manifest(path),
            Source::Layout { dir, reference } => layout_manifest(dir, reference.as_deref()),
            // `registry.rs` reads it: it needs the cache and the network.
            Source::Registry(reference) => Err(OciError::NotLocal {
                reference: reference.to_string(),
            }),
        }
    }

    /// Calls `use_layer` with a reader of `layer`'s stored bytes
    /// (compressed or not).
    pub(super) fn with_layer<T>(
        &self,
        layer: &LayerRef,
        use_layer: impl FnOnce(&mut dyn Read) -> Result<T, OciError>,
    ) -> Result<T, OciError> {
        match self {
            Source::DockerArchive(path) => {
                let wanted = &layer.location;
                with_archive_entry(path, wanted, use_layer)?.ok_or_else(|| OciError::NoEntry {
                    archive: path.clone(),
                    entry: wanted.clone(),
                })
            }
            // A registry's blob was fetched into the cache first.
            Source::Layout { .. } | Source::Registry(_) => {
                let mut file =
                    File::open(&layer.location).map_err(|err| read_error(&layer.location, err))?;
                use_layer(&mut file)
            }
        }
    }
}

/// Small JSON files only: a manifest or config past this is not one.
const JSON_LIMIT: u64 = 64 * 1024 * 1024;

/// Calls `f` with the entry `wanted` of the tar at `archive`, if there.
fn with_archive_entry<T>(
    archive: &Path,
    wanted: &Path,
    f: impl FnOnce(&mut dyn Read) -> Result<T, OciError>,
) -> Result<Option<T>, OciError> {
    let file = File::open(archive).map_err(|err| read_error(archive, err))?;
    let mut tar = tar::Archive::new(file);
    let entries = tar
        .entries_with_seek()
        .map_err(|err| read_error(archive, err))?;
    let wanted = clean(wanted);
    for entry in entries {
        let mut entry = entry.map_err(|err| read_error(archive, err))?;
        let path = entry.path().map_err(|err| read_error(archive, err))?;
        if clean(&path) == wanted {
            return f(&mut entry).map(Some);
        }
    }
    Ok(None)
}

/// A path inside an archive without `./` parts.
fn clean(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect()
}

fn archive_json(archive: &Path, name: &Path) -> Result<Vec<u8>, OciError> {
    with_archive_entry(archive, name, |entry| {
        let mut bytes = Vec::new();
        entry
            .take(JSON_LIMIT)
            .read_to_end(&mut bytes)
            .map_err(|err| read_error(archive, err))?;
        Ok(bytes)
    })?
    .ok_or_else(|| OciError::NotArchive {
        archive: archive.to_owned(),
        entry: name.to_owned(),
    })
}

/// `manifest.json` of a docker-archive: one entry per image.
#[derive(Deserialize)]
struct ArchiveEntry {
    #[serde(rename = "Config")]
    config: String,
    #[serde(rename = "Layers")]
    layers: Vec<String>,
}

fn archive_manifest(archive: &Path) -> Result<Manifest, OciError> {
    let bytes = archive_json(archive, Path::new("manifest.json"))?;
    let entries: Vec<ArchiveEntry> =
        serde_json::from_slice(&bytes).map_err(|source| OciError::Json {
            path: archive.to_owned(),
            part: "manifest.json",
            source,
        })?;
    let entry = match entries.as_slice() {
        [one] => one,
        [] => {
            return Err(OciError::NoImage {
                path: archive.to_owned(),
            });
        }
        _ => {
            return Err(OciError::ArchiveImages {
                archive: archive.to_owned(),
                count: entries.len(),
            });
        }
    };
    let config_bytes = archive_json(archive, Path::new(&entry.config))?;
    let config_digest = Digest::of(&config_bytes);
    // The config is named by its digest (`<hex>.json`, or
    // `blobs/sha256/<hex>`): it must match.
    let stem = Path::new(&entry.config)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    if stem.len() == 64 && stem != config_digest.hex() {
        return Err(OciError::Digest {
            what: format!("{}: {}", archive.display(), entry.config),
            expected: format!("sha256:{stem}"),
            actual: config_digest.to_string(),
        });
    }
    let config = parse_config(&config_bytes, archive)?;
    let layers = zip_layers(
        &config,
        archive,
        entry.layers.iter().map(|l| (None, PathBuf::from(l))),
    )?;
    Ok(Manifest {
        config_digest,
        config,
        layers,
    })
}

pub(super) fn parse_config(bytes: &[u8], from: &Path) -> Result<ImageConfig, OciError> {
    serde_json::from_slice(bytes).map_err(|source| OciError::Json {
        path: from.to_owned(),
        part: "the image config",
        source,
    })
}

/// Pairs each layer with its uncompressed digest from the config.
pub(super) fn zip_layers(
    config: &ImageConfig,
    from: &Path,
    layers: impl ExactSizeIterator<Item = (Option<Digest>, PathBuf)>,
) -> Result<Vec<LayerRef>, OciError> {
    if layers.len() != config.rootfs.diff_ids.len() {
        return Err(OciError::LayerCount {
            path: from.to_owned(),
            layers: layers.len(),
            diff_ids: config.rootfs.diff_ids.len(),
        });
    }
    layers
        .zip(&config.rootfs.diff_ids)
        .map(|((blob, location), diff_id)| {
            Ok(LayerRef {
                diff_id: Digest::parse(diff_id)?,
                blob,
                location,
            })
        })
        .collect()
}

/// A descriptor of the OCI image spec.
#[derive(Debug, Deserialize)]
pub(super) struct Descriptor {
    #[serde(rename = "mediaType", default)]
    pub media_type: String,
    pub digest: String,
    /// The blob's size, when the document gives it.
    #[serde(default)]
    pub size: Option<u64>,
    #[serde(default)]
    platform: Option<Platform>,
    #[serde(default)]
    annotations: std::collections::HashMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct Platform {
    architecture: String,
    os: String,
}

/// An index (`index.json`, or a multi-arch image) or an image manifest.
#[derive(Debug, Deserialize)]
pub(super) struct Document {
    #[serde(rename = "mediaType", default)]
    pub media_type: String,
    #[serde(default)]
    pub manifests: Vec<Descriptor>,
    #[serde(default)]
    pub config: Option<Descriptor>,
    #[serde(default)]
    pub layers: Vec<Descriptor>,
}

const REF_NAME: &str = "org.opencontainers.image.ref.name";

/// The blob `digest` of a layout, read and checked.
fn layout_blob(dir: &Path, digest: &Digest) -> Result<Vec<u8>, OciError> {
    let path = dir.join("blobs/sha256").join(digest.hex());
    let mut bytes = Vec::new();
    File::open(&path)
        .and_then(|f| f.take(JSON_LIMIT).read_to_end(&mut bytes))
        .map_err(|err| read_error(&path, err))?;
    let actual = Digest::of(&bytes);
    if &actual != digest {
        return Err(OciError::Digest {
            what: path.display().to_string(),
            expected: digest.to_string(),
            actual: actual.to_string(),
        });
    }
    Ok(bytes)
}

pub(super) fn parse_document(bytes: &[u8], from: &Path) -> Result<Document, OciError> {
    serde_json::from_slice(bytes).map_err(|source| OciError::Document {
        path: from.to_owned(),
        source,
    })
}

pub(super) fn is_index(media_type: &str) -> bool {
    media_type.ends_with("image.index.v1+json") || media_type.ends_with("manifest.list.v2+json")
}

/// Of an index's manifests, the one for linux/amd64 (or the only one).
pub(super) fn pick_platform<'a>(
    manifests: &'a [Descriptor],
    from: &Path,
) -> Result<&'a Descriptor, OciError> {
    if let [one] = manifests {
        return Ok(one);
    }
    manifests
        .iter()
        .find(|m| {
            m.platform
                .as_ref()
                .is_some_and(|p| p.os == "linux" && p.architecture == "amd64")
        })
        .ok_or_else(|| OciError::NoPlatform {
            path: from.to_owned(),
        })
}

fn layout_manifest(dir: &Path, reference: Option<&str>) -> Result<Manifest, OciError> {
    if !dir.join("oci-layout").is_file() {
        return Err(OciError::NotLayout {
            dir: dir.to_owned(),
        });
    }
    let index_path = dir.join("index.json");
    let index_bytes = std::fs::read(&index_path).map_err(|err| read_error(&index_path, err))?;
    let index = parse_document(&index_bytes, &index_path)?;
    let chosen = match reference {
        Some(name) => index
            .manifests
            .iter()
            .find(|m| m.annotations.get(REF_NAME).is_some_and(|n| n == name))
            .ok_or_else(|| OciError::NoNamed {
                dir: dir.to_owned(),
                name: name.to_owned(),
            })?,
        None => match index.manifests.as_slice() {
            [] => {
                return Err(OciError::NoImage {
                    path: dir.to_owned(),
                });
            }
            [one] => one,
            many if many.iter().all(|m| m.platform.is_some()) => pick_platform(many, dir)?,
            _ => {
                return Err(OciError::LayoutImages {
                    dir: dir.to_owned(),
                });
            }
        },
    };
    let mut descriptor_digest = Digest::parse(&chosen.digest)?;
    let mut media_type = chosen.media_type.clone();
    // An index in the index (a multi-arch image): down to one platform.
    for _ in 0..4 {
        let bytes = layout_blob(dir, &descriptor_digest)?;
        let document = parse_document(&bytes, dir)?;
        if is_index(&media_type) || (!document.manifests.is_empty() && document.config.is_none()) {
            let picked = pick_platform(&document.manifests, dir)?;
            descriptor_digest = Digest::parse(&picked.digest)?;
            media_type = picked.media_type.clone();
            continue;
        }
        let config_descriptor = document.config.as_ref().ok_or_else(|| OciError::NoConfig {
            image: dir.display().to_string(),
        })?;
        let config_digest = Digest::parse(&config_descriptor.digest)?;
        let config_bytes = layout_blob(dir, &config_digest)?;
        let config = parse_config(&config_bytes, dir)?;
        let blobs = document
            .layers
            .iter()
            .map(|l| Digest::parse(&l.digest))
            .collect::<Result<Vec<_>, _>>()?;
        let layers = zip_layers(
            &config,
            dir,
            blobs.into_iter().map(|digest| {
                let location = dir.join("blobs/sha256").join(digest.hex());
                (Some(digest), location)
            }),
        )?;
        return Ok(Manifest {
            config_digest,
            config,
            layers,
        });
    }
    Err(OciError::TooDeep {
        image: dir.display().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_name_their_format() {
        assert_eq!(
            Source::parse("docker-archive:/x/image.tar").expect("parse"),
            Source::DockerArchive("/x/image.tar".into())
        );
        assert_eq!(
            Source::parse("oci:/nonexistent/dir:v1").expect("parse"),
            Source::Layout {
                dir: "/nonexistent/dir".into(),
                reference: Some("v1".into())
            }
        );
        assert!(matches!(
            Source::parse("docker.io/library/debian:bookworm").expect("parse"),
            Source::Registry(_)
        ));
        let err = Source::parse("./image.tar").expect_err("a path is no reference");
        assert!(err.to_string().contains("docker-archive:PATH"), "{err}");
    }

    #[test]
    fn digests_are_checked_for_shape() {
        assert!(Digest::parse("sha256:abc").is_err());
        assert!(Digest::parse(&format!("md5:{}", "0".repeat(64))).is_err());
        let d = Digest::of(b"");
        assert_eq!(
            d.hex(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(Digest::parse(&d.to_string()).expect("parse"), d);
    }

    #[test]
    fn a_multi_arch_index_picks_linux_amd64() {
        let doc: Document = serde_json::from_str(
            r#"{"manifests":[
              {"mediaType":"m","digest":"sha256:1","platform":{"architecture":"arm64","os":"linux"}},
              {"mediaType":"m","digest":"sha256:2","platform":{"architecture":"amd64","os":"linux"}}]}"#,
        )
        .expect("json");
        let picked = pick_platform(&doc.manifests, Path::new("x")).expect("pick");
        assert_eq!(picked.digest, "sha256:2");
    }
}
