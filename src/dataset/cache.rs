//! The local cache of Hub datasets, under `CACHE_DIR/datasets/`, laid out
//! as huggingface_hub lays out its own:
//!
//! ```text
//! hf/OWNER--NAME/
//!   .lock                      held while the cache of this dataset is filled
//!   refs/REVISION              the commit a named revision was last seen at
//!   manifests/SHA.json         what the commit is: files, card, known hashes
//!   blobs/HASH                 verified contents, by sha256 (LFS) or git sha1
//!   blobs/HASH.incomplete      a download under way or cut (resumed)
//!   snapshots/SHA/PATH         a link to ../../blobs/HASH, under its name
//! ```
//!
//! Owns those paths, reading and writing refs and manifests (atomically:
//! a torn file is never read), checking a blob's bytes against its hash
//! and putting a checked blob in place. It makes no request.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha1::Sha1;
use sha2::{Digest as _, Sha256};

use crate::dataset::reference::is_commit_sha;
use crate::sys::lock::FileLock;

/// What a commit of a dataset is made of, as far as onebash has asked:
/// enough to choose a split and check its files with no request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Manifest {
    pub(crate) repo: String,
    pub(crate) sha: String,
    /// The card's `configs`, as the Hub gave them (the rest of the card
    /// says nothing about files).
    #[serde(default)]
    pub(crate) configs: Option<Value>,
    /// Every file of the commit.
    pub(crate) files: Vec<String>,
    /// The hashes of the files listed so far, by path.
    #[serde(default)]
    pub(crate) hashes: BTreeMap<String, FileHash>,
}

impl Manifest {
    /// The card as `splits::layout` reads it.
    pub(crate) fn card(&self) -> Option<Value> {
        self.configs
            .as_ref()
            .map(|configs| serde_json::json!({ "configs": configs }))
    }
}

/// The hashes of one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FileHash {
    /// The git blob sha1 (of the pointer, for an LFS file).
    pub(crate) oid: String,
    /// The content's sha256, for an LFS file.
    #[serde(default)]
    pub(crate) sha256: Option<String>,
    pub(crate) size: u64,
}

impl FileHash {
    /// A git sha1 (40 hex digits) and, if any, a sha256 (64): what the
    /// Hub gives, and safe as a file name.
    pub(crate) fn well_formed(&self) -> bool {
        let hex = |text: &str, len: usize| {
            text.len() == len && text.bytes().all(|b| b.is_ascii_hexdigit())
        };
        hex(&self.oid, 40) && self.sha256.as_deref().is_none_or(|sha| hex(sha, 64))
    }

    /// The name of its blob: the hash its bytes are checked by.
    pub(crate) fn blob(&self) -> &str {
        self.sha256.as_deref().unwrap_or(&self.oid)
    }
}

/// A file whose bytes are not what its hash says.
#[derive(Debug)]
pub(crate) struct Mismatch {
    pub(crate) algorithm: &'static str,
    pub(crate) expected: String,
    pub(crate) got: String,
}

/// What went wrong with a file of the cache: the verb and the path.
#[derive(Debug)]
pub(crate) struct CacheIo {
    pub(crate) action: &'static str,
    pub(crate) path: PathBuf,
    pub(crate) source: std::io::Error,
}

fn io<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> CacheIo + 'a {
    move |source| CacheIo {
        action,
        path: path.to_owned(),
        source,
    }
}

/// The cache of one dataset.
#[derive(Debug, Clone)]
pub(crate) struct RepoCache {
    root: PathBuf,
}

impl RepoCache {
    /// `repo` is a checked `OWNER/NAME` (no `..`, one `/`).
    pub(crate) fn new(cache_dir: &Path, repo: &str) -> RepoCache {
        RepoCache {
            root: cache_dir
                .join("datasets")
                .join("hf")
                .join(repo.replacen('/', "--", 1)),
        }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Held while the cache of this dataset is filled: a second onebash
    /// waits, then finds the files there.
    pub(crate) fn lock(&self) -> Result<FileLock, CacheIo> {
        fs::create_dir_all(&self.root).map_err(io("make", &self.root))?;
        let path = self.root.join(".lock");
        FileLock::acquire(&path).map_err(io("lock", &path))
    }

    fn ref_path(&self, revision: &str) -> PathBuf {
        self.root.join("refs").join(revision)
    }

    /// The commit `revision` was last seen at, if it was and the file
    /// holds one.
    pub(crate) fn read_ref(&self, revision: &str) -> Option<String> {
        let sha = fs::read_to_string(self.ref_path(revision)).ok()?;
        let sha = sha.trim();
        is_commit_sha(sha).then(|| sha.to_owned())
    }

    pub(crate) fn write_ref(&self, revision: &str, sha: &str) -> Result<(), CacheIo> {
        if self.read_ref(revision).as_deref() == Some(sha) {
            return Ok(());
        }
        write_atomic(&self.ref_path(revision), sha.as_bytes())
    }

    fn manifest_path(&self, sha: &str) -> PathBuf {
        self.root.join("manifests").join(format!("{sha}.json"))
    }

    /// The commit's manifest, if one was written and reads back.
    pub(crate) fn read_manifest(&self, sha: &str) -> Option<Manifest> {
        let text = fs::read(self.manifest_path(sha)).ok()?;
        serde_json::from_slice::<Manifest>(&text)
            .ok()
            .filter(|m| m.sha == sha)
    }

    pub(crate) fn write_manifest(&self, manifest: &Manifest) -> Result<(), CacheIo> {
        let path = self.manifest_path(&manifest.sha);
        let text = serde_json::to_vec_pretty(manifest).map_err(|err| CacheIo {
            action: "write",
            path: path.clone(),
            source: std::io::Error::other(err),
        })?;
        write_atomic(&path, &text)
    }

    pub(crate) fn blob_path(&self, hash: &FileHash) -> PathBuf {
        self.root.join("blobs").join(hash.blob())
    }

    pub(crate) fn partial_path(&self, hash: &FileHash) -> PathBuf {
        self.root
            .join("blobs")
            .join(format!("{}.incomplete", hash.blob()))
    }

    /// Whether the blob is there at its size. Its bytes were checked when
    /// it was put in place; a blob is never written after that.
    pub(crate) fn has_blob(&self, hash: &FileHash) -> bool {
        fs::metadata(self.blob_path(hash)).is_ok_and(|m| m.is_file() && m.len() == hash.size)
    }

    /// A folder for the partial file of `hash`, made if need be.
    pub(crate) fn prepare_partial(&self, hash: &FileHash) -> Result<PathBuf, CacheIo> {
        let blobs = self.root.join("blobs");
        fs::create_dir_all(&blobs).map_err(io("make", &blobs))?;
        Ok(self.partial_path(hash))
    }

    /// Checks the partial download of `hash` and, when it is right, moves
    /// it into place. A wrong one is deleted, so the next try starts over.
    pub(crate) fn install(&self, hash: &FileHash) -> Result<Result<(), Mismatch>, CacheIo> {
        let partial = self.partial_path(hash);
        if let Err(mismatch) = verify(&partial, hash)? {
            fs::remove_file(&partial).map_err(io("delete", &partial))?;
            return Ok(Err(mismatch));
        }
        let blob = self.blob_path(hash);
        fs::rename(&partial, &blob).map_err(io("move into place", &blob))?;
        Ok(Ok(()))
    }

    /// The path of `path` in the commit's snapshot, a link to its blob,
    /// made if it is not there. `path` is one of the commit's files, made
    /// of plain names (checked by `safe_path`).
    pub(crate) fn link(&self, sha: &str, path: &str, hash: &FileHash) -> Result<PathBuf, CacheIo> {
        let snapshot = self.root.join("snapshots").join(sha);
        let link = snapshot.join(path);
        let depth = path.split('/').count() + 1;
        let target = PathBuf::from("../".repeat(depth))
            .join("blobs")
            .join(hash.blob());
        if fs::read_link(&link).is_ok_and(|t| t == target) {
            return Ok(link);
        }
        if let Some(parent) = link.parent() {
            fs::create_dir_all(parent).map_err(io("make", parent))?;
        }
        // Made aside and renamed over the old one (an older layout's), so
        // a run reading the snapshot meanwhile finds one link or the
        // other, never none.
        let aside = link.with_file_name(format!(
            ".{}.{}.link",
            link.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
            std::process::id()
        ));
        let _ = fs::remove_file(&aside);
        std::os::unix::fs::symlink(&target, &aside).map_err(io("link", &aside))?;
        fs::rename(&aside, &link).map_err(io("link", &link))?;
        Ok(link)
    }
}

/// Whether a path the Hub names is plain names under the repo: no `..`,
/// `.`, empty part or leading `/`, which could reach out of the snapshot.
pub(crate) fn safe_path(path: &str) -> bool {
    !path.is_empty()
        && path
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

/// Checks `path`'s bytes against `hash`: the sha256 of an LFS file, else
/// git's blob sha1 (`sha1("blob {len}\0" + bytes)`), the oid the Hub gives.
pub(crate) fn verify(path: &Path, hash: &FileHash) -> Result<Result<(), Mismatch>, CacheIo> {
    let mut file = File::open(path).map_err(io("read", path))?;
    let len = file.metadata().map_err(io("read", path))?.len();
    let mut buffer = vec![0; 1 << 16];
    let (algorithm, expected, got) = match &hash.sha256 {
        Some(expected) => {
            let mut hasher = Sha256::new();
            read_all(&mut file, &mut buffer, path, |bytes| hasher.update(bytes))?;
            ("sha256", expected, hex(&hasher.finalize()))
        }
        None => {
            let mut hasher = Sha1::new();
            hasher.update(format!("blob {len}\0").as_bytes());
            read_all(&mut file, &mut buffer, path, |bytes| hasher.update(bytes))?;
            ("git blob sha1", &hash.oid, hex(&hasher.finalize()))
        }
    };
    if got == expected.to_ascii_lowercase() {
        Ok(Ok(()))
    } else {
        Ok(Err(Mismatch {
            algorithm,
            expected: expected.clone(),
            got,
        }))
    }
}

fn read_all(
    file: &mut File,
    buffer: &mut [u8],
    path: &Path,
    mut each: impl FnMut(&[u8]),
) -> Result<(), CacheIo> {
    loop {
        let n = file.read(buffer).map_err(io("read", path))?;
        if n == 0 {
            return Ok(());
        }
        each(&buffer[..n]);
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `path` whole or not at all: a temporary file beside it, then a
/// rename.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), CacheIo> {
    let parent = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(parent).map_err(io("make", parent))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Unique to this process and call: two threads (or two onebash) may
    // write the same ref at once, and each rename must find its own file.
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let count = WRITES.fetch_add(1, Ordering::Relaxed);
    let temporary = parent.join(format!(".{name}.{}.{count}.tmp", std::process::id()));
    let mut file = File::create(&temporary).map_err(io("write", &temporary))?;
    file.write_all(bytes).map_err(io("write", &temporary))?;
    drop(file);
    fs::rename(&temporary, path).map_err(io("write", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// git's own hash of a blob holding "hello\n" (`git hash-object`).
    const HELLO_OID: &str = "ce013625030ba8dba906f756967f9e9ca394464a";
    const HELLO_SHA256: &str = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";

    #[test]
    fn a_file_is_checked_by_its_sha256_or_its_git_blob_sha1() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        fs::write(&path, "hello\n").expect("write");
        let lfs = FileHash {
            oid: "pointer".into(),
            sha256: Some(HELLO_SHA256.to_uppercase()),
            size: 6,
        };
        assert!(verify(&path, &lfs).expect("read").is_ok());
        let git = FileHash {
            oid: HELLO_OID.into(),
            sha256: None,
            size: 6,
        };
        assert!(verify(&path, &git).expect("read").is_ok());
        fs::write(&path, "hellO\n").expect("write");
        let mismatch = verify(&path, &git).expect("read").expect_err("changed");
        assert_eq!(
            (mismatch.algorithm, mismatch.expected.as_str()),
            ("git blob sha1", HELLO_OID)
        );
        assert_ne!(mismatch.got, HELLO_OID);
        let mismatch = verify(&path, &lfs).expect("read").expect_err("changed");
        assert_eq!(mismatch.algorithm, "sha256");
    }

    #[test]
    fn a_checked_blob_is_moved_into_place_and_a_bad_one_deleted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = RepoCache::new(dir.path(), "o/n");
        assert!(cache.root().ends_with("datasets/hf/o--n"));
        let hash = FileHash {
            oid: HELLO_OID.into(),
            sha256: None,
            size: 6,
        };
        let partial = cache.prepare_partial(&hash).expect("prepare");
        fs::write(&partial, "hellO\n").expect("write");
        assert!(cache.install(&hash).expect("io").is_err());
        assert!(!partial.exists());
        assert!(!cache.has_blob(&hash));
        fs::write(&partial, "hello\n").expect("write");
        assert!(cache.install(&hash).expect("io").is_ok());
        assert!(cache.has_blob(&hash));
        let sha = "a".repeat(40);
        let link = cache.link(&sha, "data/x.jsonl", &hash).expect("link");
        assert_eq!(fs::read_to_string(&link).expect("read"), "hello\n");
        assert_eq!(
            cache.link(&sha, "data/x.jsonl", &hash).expect("again"),
            link
        );
    }

    #[test]
    fn refs_and_manifests_read_back_and_junk_reads_as_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = RepoCache::new(dir.path(), "o/n");
        let sha = "b".repeat(40);
        assert_eq!(cache.read_ref("main"), None);
        cache
            .write_ref("refs/convert/parquet", &sha)
            .expect("write");
        assert_eq!(cache.read_ref("refs/convert/parquet"), Some(sha.clone()));
        fs::write(cache.root().join("refs/main"), "not a sha").expect("write");
        assert_eq!(cache.read_ref("main"), None);
        let manifest = Manifest {
            repo: "o/n".into(),
            sha: sha.clone(),
            configs: None,
            files: vec!["a.jsonl".into()],
            hashes: BTreeMap::new(),
        };
        cache.write_manifest(&manifest).expect("write");
        assert_eq!(cache.read_manifest(&sha).expect("read").files, ["a.jsonl"]);
        fs::write(cache.root().join(format!("manifests/{sha}.json")), "{").expect("write");
        assert!(cache.read_manifest(&sha).is_none());
    }

    #[test]
    fn only_hex_hashes_are_taken() {
        let hash = |oid: &str, sha256: Option<&str>| FileHash {
            oid: oid.into(),
            sha256: sha256.map(str::to_owned),
            size: 1,
        };
        assert!(hash(HELLO_OID, None).well_formed());
        assert!(hash(HELLO_OID, Some(HELLO_SHA256)).well_formed());
        assert!(!hash("../../etc/passwd", None).well_formed());
        assert!(!hash("", None).well_formed());
        assert!(!hash(HELLO_OID, Some("abc")).well_formed());
    }

    #[test]
    fn only_plain_paths_are_safe() {
        for path in ["data/x.parquet", "x", "a/b.c/d"] {
            assert!(safe_path(path), "{path}");
        }
        for path in ["", "/etc/passwd", "../x", "a/../b", "a//b", "./a", "a/"] {
            assert!(!safe_path(path), "{path}");
        }
    }
}
