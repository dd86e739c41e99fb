//! The dataset repos a test builds ([`Dataset`], one commit each) and
//! what a commit of the scripted Hub holds: its files with their git blob
//! ids and LFS hashes, the `README.md` of its card and the
//! `.gitattributes` every Hub repo has, and its sha. Nothing here serves.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};
use sha1::Sha1;
use sha2::{Digest as _, Sha256};

/// Lowercase hex of `bytes`.
pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The sha256 of `bytes`, in hex: an LFS file's `lfs.oid`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Git's blob id of `bytes`: sha1 of `blob {len}\0` and the bytes, in hex.
/// A file kept in git has this as its `oid` and `ETag`.
pub fn git_blob_sha1(bytes: &[u8]) -> String {
    let mut hasher = Sha1::new();
    hasher.update(format!("blob {}\0", bytes.len()).as_bytes());
    hasher.update(bytes);
    hex(&hasher.finalize())
}

/// The pointer file git keeps for an LFS file.
pub fn lfs_pointer(bytes: &[u8]) -> String {
    format!(
        "version https://git-lfs.github.com/spec/v1\noid sha256:{}\nsize {}\n",
        sha256_hex(bytes),
        bytes.len()
    )
}

/// How a file of a repo is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    /// In git: served from `resolve` itself.
    Git,
    /// In LFS: `resolve` redirects to the CDN.
    Lfs,
}

/// One commit of a dataset repo, built by the test and pushed with
/// [`Hub::publish`].
#[derive(Debug, Clone)]
pub struct Dataset {
    id: String,
    files: Vec<(String, Vec<u8>, Storage)>,
    /// Card configs: name -> (split, `data_files` path or glob).
    configs: Vec<(String, Vec<(String, String)>)>,
    tags: Vec<String>,
    gated: Option<String>,
}

impl Dataset {
    /// A commit of the dataset `owner/name`, with a `.gitattributes` (as
    /// every Hub repo has) and no other file yet.
    pub fn new(id: &str) -> Dataset {
        Dataset {
            id: id.to_owned(),
            files: Vec::new(),
            configs: Vec::new(),
            tags: Vec::new(),
            gated: None,
        }
    }

    /// A file kept in git.
    pub fn file(mut self, path: &str, bytes: impl Into<Vec<u8>>) -> Dataset {
        self.files
            .push((path.to_owned(), bytes.into(), Storage::Git));
        self
    }

    /// A file kept in LFS.
    pub fn lfs(mut self, path: &str, bytes: impl Into<Vec<u8>>) -> Dataset {
        self.files
            .push((path.to_owned(), bytes.into(), Storage::Lfs));
        self
    }

    /// A config of the dataset card: its splits, each with the path (or
    /// glob) of its files. Written to `README.md`'s YAML header and served
    /// as `cardData.configs`, as the Hub does.
    pub fn config(mut self, name: &str, splits: &[(&str, &str)]) -> Dataset {
        let splits = splits
            .iter()
            .map(|(split, path)| ((*split).to_owned(), (*path).to_owned()))
            .collect();
        self.configs.push((name.to_owned(), splits));
        self
    }

    /// A tag on this commit.
    pub fn tag(mut self, tag: &str) -> Dataset {
        self.tags.push(tag.to_owned());
        self
    }

    /// Gated: its files are served to `Bearer TOKEN` only (its info and
    /// tree to anyone, as on the Hub).
    pub fn gated(mut self, token: &str) -> Dataset {
        self.gated = Some(token.to_owned());
        self
    }

    pub(super) fn id(&self) -> &str {
        &self.id
    }

    pub(super) fn tags(&self) -> &[String] {
        &self.tags
    }

    pub(super) fn granted(&self) -> Option<&str> {
        self.gated.as_deref()
    }

    /// `README.md` with the card's YAML header.
    fn readme(&self) -> String {
        let mut text = String::from("---\nconfigs:\n");
        for (name, splits) in &self.configs {
            text.push_str(&format!("- config_name: {name}\n  data_files:\n"));
            for (split, path) in splits {
                text.push_str(&format!("  - split: {split}\n    path: {path}\n"));
            }
        }
        text.push_str("---\n\n# A dataset of the scripted Hub\n");
        text
    }

    fn card_data(&self) -> Value {
        let configs: Vec<Value> = self
            .configs
            .iter()
            .map(|(name, splits)| {
                let files: Vec<Value> = splits
                    .iter()
                    .map(|(split, path)| json!({"split": split, "path": path}))
                    .collect();
                json!({"config_name": name, "data_files": files})
            })
            .collect();
        json!({ "configs": configs })
    }
}

/// One file of a commit, as served.
#[derive(Debug, Clone)]
pub(super) struct File {
    pub(super) bytes: Arc<Vec<u8>>,
    pub(super) storage: Storage,
    /// The git blob id: of the bytes, or of the LFS pointer.
    pub(super) oid: String,
    pub(super) sha256: String,
    pub(super) pointer_size: usize,
}

#[derive(Debug, Clone)]
pub(super) struct Commit {
    pub(super) sha: String,
    /// Sorted by path.
    pub(super) files: Vec<(String, File)>,
    pub(super) card: Option<Value>,
}

#[derive(Debug, Default)]
pub(super) struct Repo {
    pub(super) commits: Vec<Commit>,
    /// Branch or tag -> commit sha.
    pub(super) refs: HashMap<String, String>,
    /// The token granted access, when gated.
    pub(super) gated: Option<String>,
}

impl Commit {
    /// The commit of `dataset`, the `ordinal`-th the Hub makes: its files,
    /// with a `README.md` of its card (unless it has one) and a
    /// `.gitattributes` naming its LFS files; its sha is of its content
    /// and its place in the Hub's history, so two commits of the same
    /// files differ.
    pub(super) fn of(dataset: &Dataset, ordinal: u64) -> Commit {
        let mut files: Vec<(String, Vec<u8>, Storage)> = dataset.files.clone();
        if !dataset.configs.is_empty() && !files.iter().any(|(p, _, _)| p == "README.md") {
            files.push((
                "README.md".to_owned(),
                dataset.readme().into(),
                Storage::Git,
            ));
        }
        let attributes: String = files
            .iter()
            .filter(|(_, _, storage)| *storage == Storage::Lfs)
            .map(|(path, _, _)| format!("{path} filter=lfs diff=lfs merge=lfs -text\n"))
            .collect();
        files.push((".gitattributes".to_owned(), attributes.into(), Storage::Git));
        let mut files: Vec<(String, File)> = files
            .into_iter()
            .map(|(path, bytes, storage)| (path, File::of(bytes, storage)))
            .collect();
        files.sort_by(|a, b| a.0.cmp(&b.0));
        let mut hasher = Sha1::new();
        hasher.update(format!("{}\n{ordinal}\n", dataset.id).as_bytes());
        for (path, file) in &files {
            hasher.update(format!("{path} {}\n", file.oid).as_bytes());
        }
        Commit {
            sha: hex(&hasher.finalize()),
            files,
            card: (!dataset.configs.is_empty()).then(|| dataset.card_data()),
        }
    }
}

impl File {
    fn of(bytes: Vec<u8>, storage: Storage) -> File {
        let pointer = lfs_pointer(&bytes);
        let oid = match storage {
            Storage::Git => git_blob_sha1(&bytes),
            Storage::Lfs => git_blob_sha1(pointer.as_bytes()),
        };
        File {
            sha256: sha256_hex(&bytes),
            bytes: Arc::new(bytes),
            storage,
            oid,
            pointer_size: pointer.len(),
        }
    }
}
