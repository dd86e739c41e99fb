//! Which folders of an image's root are bound, read-only, from the one
//! layer that made them rather than made again in the root by hard links
//! (`rootfs.rs` makes the rest): a first pass over the layers that notes
//! which layers made each folder, as the stacking will apply them
//! (whiteouts and opaque folders included), the choice of the folders to
//! bind, and `binds.json`, the list kept beside each root.
//!
//! Why: each real folder of a root costs a block (Debian's 1,300 made
//! 5 MB an image), which 50 images on one base paid once each; a bind is
//! a mount in every command's sandbox, so only folders of
//! [`BIND_FROM`] folders or more are bound (`/usr`, `/lib` and `/var`
//! of a Debian base).

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use super::OciError;

/// A layer's marker that empties its folder of what lower layers put there.
pub(super) const OPAQUE: &str = ".wh..wh..opq";
/// The prefix of a layer's marker that removes one name.
pub(super) const WHITEOUT: &str = ".wh.";

/// The fewest folders a one-layer folder holds (itself included) to be
/// bound from its layer rather than made: each bind is a mount in every
/// command's sandbox, each folder a block on disk.
pub(super) const BIND_FROM: usize = 8;

/// A folder of a layer the sandbox binds, read-only, over the empty
/// folder of the same path in the root.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Bind {
    /// The layer's folder on the host.
    pub source: PathBuf,
    /// Where it goes, as an absolute path inside the sandbox.
    pub target: String,
}

/// `binds.json`: the layer of each bind by its folder's name in the cache
/// (so that a cache moved elsewhere still reads), and the path.
#[derive(serde::Serialize, serde::Deserialize)]
struct StoredBind {
    layer: String,
    path: String,
}

/// The binds of a root being made.
pub(super) struct Planned(Vec<StoredBind>);

impl Planned {
    /// The bound folders, relative to the root.
    pub(super) fn paths(&self) -> HashSet<PathBuf> {
        self.0
            .iter()
            .map(|bind| PathBuf::from(&bind.path))
            .collect()
    }

    /// Writes them to `list` (`binds.json`).
    pub(super) fn write(&self, list: &Path) -> Result<(), OciError> {
        let json = serde_json::to_vec(&self.0).map_err(|err| cache_error(list, err))?;
        fs::write(list, json).map_err(|err| cache_error(list, err))
    }
}

fn cache_error(what: &Path, err: impl Into<super::error::CacheFault>) -> OciError {
    OciError::cache(what, err)
}

/// The binds of the root of `layers` (bottom first); the folders of
/// `made` (relative paths) and those above them are never bound.
pub(super) fn plan(layers: &[PathBuf], made: &[&str]) -> io::Result<Planned> {
    let mut sources = Sources::default();
    for (index, layer) in layers.iter().enumerate() {
        scan(layer, Path::new(""), index, &mut sources)?;
    }
    for rel in made {
        sources.mixed(Path::new(rel));
    }
    choose(&sources, layers).map(Planned)
}

/// The binds `list` holds, if it is there.
pub(super) fn read(list: &Path, layers: &[PathBuf]) -> Result<Option<Vec<Bind>>, OciError> {
    let bytes = match fs::read(list) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(cache_error(list, err)),
    };
    let stored: Vec<StoredBind> =
        serde_json::from_slice(&bytes).map_err(|err| cache_error(list, err))?;
    let mut binds = Vec::with_capacity(stored.len());
    for bind in stored {
        // Only a layer of this image, by its folder's name, and a plain
        // relative path: the file is the cache's own, but a bind is a
        // mount, so nothing else is taken from it.
        let layer = layers
            .iter()
            .find(|layer| layer.file_name().is_some_and(|name| *name == *bind.layer))
            .ok_or_else(|| {
                cache_error(list, format!("names no layer of the image: {}", bind.layer))
            })?;
        let rel = Path::new(&bind.path);
        if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            return Err(cache_error(
                list,
                format!("not a plain path: {}", bind.path),
            ));
        }
        binds.push(Bind {
            source: layer.join(rel),
            target: format!("/{}", bind.path),
        });
    }
    Ok(Some(binds))
}

/// Which layers made each folder of the root, by relative path: one, or
/// more (or a whiteout was there: its marker would show through a bind).
#[derive(Default)]
struct Sources(HashMap<PathBuf, Option<usize>>);

impl Sources {
    /// Layer `index` put something in `rel`.
    fn touched(&mut self, rel: &Path, index: usize) {
        let entry = self.0.entry(rel.to_owned()).or_insert(Some(index));
        if *entry != Some(index) {
            *entry = None;
        }
    }

    /// `rel` and every folder above it come from more than one layer.
    fn mixed(&mut self, rel: &Path) {
        for above in rel.ancestors() {
            self.0.insert(above.to_owned(), None);
        }
    }

    /// `rel` was removed: what was known of it and under it is not to be
    /// trusted any more (a later layer may make it again).
    fn removed(&mut self, rel: &Path) {
        for (path, source) in &mut self.0 {
            if path.starts_with(rel) {
                *source = None;
            }
        }
        self.mixed(rel);
    }
}

/// The folders to bind: each that one layer alone made, in a folder of
/// more than one, holding [`BIND_FROM`] folders or more (counted in the
/// layer: all of it is the folder's).
fn choose(sources: &Sources, layers: &[PathBuf]) -> io::Result<Vec<StoredBind>> {
    let mut candidates: Vec<(&PathBuf, usize)> = sources
        .0
        .iter()
        .filter_map(|(path, source)| {
            let index = (*source)?;
            let parent = path.parent()?;
            (sources.0.get(parent) == Some(&None)).then_some((path, index))
        })
        .collect();
    candidates.sort();
    let mut binds = Vec::new();
    for (path, index) in candidates {
        let (Some(layer), Some(text)) = (
            layers[index].file_name().and_then(|n| n.to_str()),
            path.to_str(),
        ) else {
            // A name that is not UTF-8 cannot be listed: made.
            continue;
        };
        if folders(&layers[index].join(path))? >= BIND_FROM {
            binds.push(StoredBind {
                layer: layer.to_owned(),
                path: text.to_owned(),
            });
        }
    }
    Ok(binds)
}

/// How many folders `dir` holds, itself included.
fn folders(dir: &Path) -> io::Result<usize> {
    let mut count = 1;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            count += folders(&entry.path())?;
        }
    }
    Ok(count)
}

/// Notes in `sources` which folders layer `index` (its folder `src`, at
/// `rel` in the root) makes, and what its whiteouts remove, as
/// [`stack`] will apply them.
fn scan(src: &Path, rel: &Path, index: usize, sources: &mut Sources) -> io::Result<()> {
    sources.touched(rel, index);
    let mut names: Vec<(std::ffi::OsString, fs::FileType)> = Vec::new();
    for entry in fs::read_dir(src)? {
        let entry = entry?;
        names.push((entry.file_name(), entry.file_type()?));
    }
    for (name, kind) in names {
        let path = rel.join(&name);
        match name.to_str().and_then(|n| n.strip_prefix(WHITEOUT)) {
            // The opaque marker empties the folder; a whiteout removes a
            // name (`.wh..` and the like remove nothing, as in `stack`).
            Some(_) if name == OPAQUE => sources.removed(rel),
            Some(hidden) => {
                sources.mixed(rel);
                if !matches!(hidden, "" | "." | "..") {
                    sources.removed(&rel.join(hidden));
                }
            }
            None if kind.is_dir() => scan(&src.join(&name), &path, index, sources)?,
            // A file where a lower layer had a folder.
            None if sources.0.contains_key(&path) => sources.removed(&path),
            None => {}
        }
    }
    Ok(())
}
