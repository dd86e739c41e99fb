//! The layer cache: each layer unpacked once, into
//! `<cache>/oci/layers/<diff_id hex>/`, shared by tasks, runs and
//! processes, and checked against its digests before anything uses it.
//!
//! Owns the unpacking of one layer tar (gzip, zstd or plain, told by its
//! first bytes) with onebash's own rules, not the tar crate's `unpack`:
//! paths with `..` or a leading `/` are refused, as are symlinks whose
//! target climbs above the image's root and any entry that would be
//! written through a symlink; setuid, setgid and sticky bits are dropped;
//! device nodes and fifos are skipped; hard links must name a file of the
//! same layer. Whiteouts (`.wh.NAME`, `.wh..wh..opq`) are kept as empty
//! marker files: `rootfs.rs` applies them when it stacks the layers.
//!
//! The bytes are hashed as they stream through (the stored blob's and the
//! uncompressed tar's digests), into `<diff_id>.partial`, which is renamed
//! into place only when both match. So a killed unpack or a tampered blob
//! never leaves a layer in use: the folder exists whole or not at all. A
//! `flock` on `<diff_id>.lock` makes a second process wait for the first
//! rather than unpack it again.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Component, Path, PathBuf};

use sha2::{Digest as _, Sha256};

use super::OciError;
use super::digest::Digest;
use super::error::CacheFault;
use super::error::Hostile;
use super::source::{LayerRef, Source};
use crate::sys::lock::FileLock;

/// The cache's folder of unpacked layers.
#[derive(Debug, Clone)]
pub(super) struct LayerCache {
    dir: PathBuf,
}

fn io_error(what: &Path, err: impl Into<CacheFault>) -> OciError {
    OciError::cache(what, err)
}

impl LayerCache {
    pub(super) fn new(oci_dir: &Path) -> LayerCache {
        LayerCache {
            dir: oci_dir.join("layers"),
        }
    }

    /// Whether the layer of `diff_id` is unpacked (its folder exists only
    /// once whole).
    pub(super) fn has(&self, diff_id: &Digest) -> bool {
        self.dir.join(diff_id.hex()).is_dir()
    }

    /// The unpacked folder of `layer`, unpacking it from `source` unless
    /// it is there.
    pub(super) fn ensure(&self, source: &Source, layer: &LayerRef) -> Result<PathBuf, OciError> {
        let hex = layer.diff_id.hex();
        let done = self.dir.join(hex);
        if done.is_dir() {
            return Ok(done);
        }
        fs::create_dir_all(&self.dir).map_err(|err| io_error(&self.dir, err))?;
        let lock_path = self.dir.join(format!("{hex}.lock"));
        let _lock = FileLock::acquire(&lock_path).map_err(|err| io_error(&lock_path, err))?;
        // Another process may have finished it while this one waited.
        if done.is_dir() {
            return Ok(done);
        }
        let partial = self.dir.join(format!("{hex}.partial"));
        // What a killed unpack left: under the lock, nobody else's.
        if partial.exists() {
            fs::remove_dir_all(&partial).map_err(|err| io_error(&partial, err))?;
        }
        fs::create_dir(&partial).map_err(|err| io_error(&partial, err))?;
        eprintln!("unpacking layer {}", layer.diff_id);
        let unpacked = source.with_layer(layer, |reader| {
            unpack_verified(reader, &partial, layer.blob.as_ref(), &layer.diff_id)
        });
        if let Err(err) = unpacked {
            let _ = fs::remove_dir_all(&partial);
            return Err(err);
        }
        fs::rename(&partial, &done).map_err(|err| io_error(&done, err))?;
        Ok(done)
    }
}

/// A reader that hashes what passes through it.
struct Hashing<R> {
    inner: R,
    hasher: Sha256,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Hashing<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, amt: usize) {
        if let Ok(buf) = self.inner.fill_buf() {
            let amt = amt.min(buf.len());
            self.hasher.update(&buf[..amt]);
        }
        self.inner.consume(amt);
    }
}

/// A zstd stream of one or more frames.
struct Zstd<R: Read> {
    source: Option<R>,
    frame: Option<ruzstd::decoding::StreamingDecoder<R, ruzstd::decoding::FrameDecoder>>,
}

impl<R: BufRead> Read for Zstd<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if let Some(frame) = &mut self.frame {
                let n = frame.read(buf)?;
                if n > 0 || buf.is_empty() {
                    return Ok(n);
                }
                // The frame ended: another may follow.
                let Some(frame) = self.frame.take() else {
                    return Ok(0);
                };
                self.source = Some(frame.into_inner());
            }
            let Some(mut source) = self.source.take() else {
                return Ok(0);
            };
            if source.fill_buf()?.is_empty() {
                return Ok(0);
            }
            self.frame = Some(
                ruzstd::decoding::StreamingDecoder::new(source)
                    .map_err(|err| io::Error::new(io::ErrorKind::InvalidData, err.to_string()))?,
            );
        }
    }
}

/// Unpacks `reader` (a layer blob: gzip, zstd or a plain tar) into `dest`,
/// then checks the blob's digest (when known) and the tar's.
pub(super) fn unpack_verified(
    reader: &mut dyn Read,
    dest: &Path,
    blob: Option<&Digest>,
    diff_id: &Digest,
) -> Result<(), OciError> {
    let mut stored = Hashing {
        inner: BufReader::with_capacity(256 * 1024, reader),
        hasher: Sha256::new(),
    };
    let magic = stored
        .fill_buf()
        .map_err(|err| io_error(dest, err))?
        .to_vec();
    let tar_digest = {
        let decompressed: Box<dyn Read + '_> = if magic.starts_with(&[0x1f, 0x8b]) {
            Box::new(flate2::bufread::MultiGzDecoder::new(&mut stored))
        } else if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Box::new(Zstd {
                source: Some(&mut stored),
                frame: None,
            })
        } else {
            Box::new(&mut stored)
        };
        let mut tar_stream = Hashing {
            inner: BufReader::new(decompressed),
            hasher: Sha256::new(),
        };
        unpack(&mut tar_stream, dest)?;
        // What follows the tar's end (padding) counts in the digests too.
        io::copy(&mut tar_stream, &mut io::sink()).map_err(|err| io_error(dest, err))?;
        Digest::from_hasher(tar_stream.hasher)
    };
    io::copy(&mut stored, &mut io::sink()).map_err(|err| io_error(dest, err))?;
    let checks = [
        (blob, Digest::from_hasher(stored.hasher), "blob"),
        (Some(diff_id), tar_digest, "uncompressed layer"),
    ];
    for (expected, actual, what) in checks {
        if let Some(expected) = expected
            && *expected != actual
        {
            return Err(OciError::Digest {
                what: format!("the {what} {diff_id}"),
                expected: expected.to_string(),
                actual: actual.to_string(),
            });
        }
    }
    Ok(())
}

/// A path inside a layer, made of normal components only; `None` for the
/// root itself. Absolute paths and `..` are refused.
fn inside(path: &Path) -> Result<Option<PathBuf>, Hostile> {
    let mut clean = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => clean.push(part),
            Component::CurDir => {}
            Component::ParentDir => return Err(Hostile::ClimbsOut(path.to_owned())),
            Component::RootDir | Component::Prefix(_) => {
                return Err(Hostile::Absolute(path.to_owned()));
            }
        }
    }
    Ok((!clean.as_os_str().is_empty()).then_some(clean))
}

/// Whether a symlink at `link` (inside the root) pointing at `target`
/// would climb above the root when resolved there.
fn leaves_root(link: &Path, target: &Path) -> bool {
    let mut depth: usize = if target.is_absolute() {
        0
    } else {
        link.parent().map_or(0, |p| p.components().count())
    };
    for component in target.components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::ParentDir => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return true,
            },
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    false
}

/// Folders of the layer checked (or made) to be real folders, not links.
struct Unpacker<'a> {
    dest: &'a Path,
    dirs: HashSet<PathBuf>,
}

impl Unpacker<'_> {
    /// Makes the folders above `rel`, refusing to go through a symlink or
    /// a file.
    fn parents(&mut self, rel: &Path) -> Result<(), OciError> {
        let mut at = PathBuf::new();
        let Some(parent) = rel.parent() else {
            return Ok(());
        };
        for part in parent.components() {
            at.push(part);
            if self.dirs.contains(&at) {
                continue;
            }
            let full = self.dest.join(&at);
            match fs::symlink_metadata(&full) {
                Ok(meta) if meta.is_dir() => {}
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(Hostile::ThroughSymlink {
                        entry: rel.to_owned(),
                        symlink: at,
                    }
                    .into());
                }
                Ok(_) => {
                    return Err(Hostile::ThroughFile {
                        entry: rel.to_owned(),
                        file: at,
                    }
                    .into());
                }
                Err(_) => fs::create_dir(&full).map_err(|err| io_error(&full, err))?,
            }
            self.dirs.insert(at.clone());
        }
        Ok(())
    }

    /// Removes what is at `rel` so an entry can take its place (a later
    /// entry of the same name wins). A folder removed is forgotten with
    /// all below it: a symlink may take its name next, and nothing may be
    /// written through that.
    fn clear(&mut self, rel: &Path) -> io::Result<()> {
        let full = self.dest.join(rel);
        match fs::symlink_metadata(&full) {
            Ok(meta) if meta.is_dir() => {
                self.dirs.retain(|dir| !dir.starts_with(rel));
                fs::remove_dir_all(full)
            }
            Ok(_) => fs::remove_file(full),
            Err(_) => Ok(()),
        }
    }

    /// Writes one entry of the tar at `rel` (inside the root), by its kind.
    fn entry<R: Read>(
        &mut self,
        entry: &mut tar::Entry<'_, R>,
        rel: PathBuf,
    ) -> Result<(), OciError> {
        use tar::EntryType;
        let mode = entry.header().mode().unwrap_or(0o644);
        match entry.header().entry_type() {
            EntryType::Directory => self.directory(rel, mode),
            EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
                self.file(entry, &rel, mode)
            }
            EntryType::Symlink => self.symlink(entry, &rel),
            EntryType::Link => self.hard_link(entry, &rel),
            // Device nodes and fifos: a sandbox gets its own /dev.
            EntryType::Char | EntryType::Block | EntryType::Fifo => Ok(()),
            // Extended headers are read by the tar crate; anything else
            // unknown is left out.
            _ => Ok(()),
        }
    }

    /// A folder, replacing a file of its name; its mode is kept without
    /// setuid and setgid.
    fn directory(&mut self, rel: PathBuf, mode: u32) -> Result<(), OciError> {
        let full = self.dest.join(&rel);
        let fail = |err: io::Error| io_error(&full, err);
        self.parents(&rel)?;
        match fs::symlink_metadata(&full) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                fs::remove_file(&full).map_err(fail)?;
                fs::create_dir(&full).map_err(fail)?;
            }
            Err(_) => fs::create_dir(&full).map_err(fail)?,
        }
        // Always ours to write, so the cache can be removed; the
        // sandbox mounts it read-only anyway.
        let mode = (mode & 0o1777) | 0o700;
        fs::set_permissions(&full, fs::Permissions::from_mode(mode)).map_err(fail)?;
        self.dirs.insert(rel);
        Ok(())
    }

    /// A regular file with the entry's bytes, mode (without setuid, setgid
    /// and sticky bits) and modification time.
    fn file<R: Read>(
        &mut self,
        entry: &mut tar::Entry<'_, R>,
        rel: &Path,
        mode: u32,
    ) -> Result<(), OciError> {
        let full = self.dest.join(rel);
        let fail = |err: io::Error| io_error(&full, err);
        self.parents(rel)?;
        self.clear(rel).map_err(fail)?;
        let mut file = File::options()
            .write(true)
            .create_new(true)
            .open(&full)
            .map_err(fail)?;
        io::copy(entry, &mut file).map_err(fail)?;
        // No setuid, setgid or sticky bit; always readable by us.
        let mode = (mode & 0o777) | 0o400;
        file.set_permissions(fs::Permissions::from_mode(mode))
            .map_err(fail)?;
        if let Ok(mtime) = entry.header().mtime() {
            let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(mtime);
            let _ = file.set_modified(when);
        }
        Ok(())
    }

    /// A symlink, unless resolving it inside the root would climb above it.
    fn symlink<R: Read>(&mut self, entry: &tar::Entry<'_, R>, rel: &Path) -> Result<(), OciError> {
        let full = self.dest.join(rel);
        let target =
            link_target(entry, &full)?.ok_or_else(|| Hostile::SymlinkToNothing(rel.to_owned()))?;
        if leaves_root(rel, &target) {
            return Err(Hostile::SymlinkLeavesRoot {
                link: rel.to_owned(),
                target,
            }
            .into());
        }
        self.parents(rel)?;
        self.clear(rel).map_err(|err| io_error(&full, err))?;
        symlink(&target, &full).map_err(|err| io_error(&full, err))
    }

    /// A hard link to a file this layer wrote, reached through real folders
    /// of this layer only, so that linking never reaches through a symlink
    /// to the host.
    fn hard_link<R: Read>(
        &mut self,
        entry: &tar::Entry<'_, R>,
        rel: &Path,
    ) -> Result<(), OciError> {
        let full = self.dest.join(rel);
        let target =
            link_target(entry, &full)?.ok_or_else(|| Hostile::HardLinkToNothing(rel.to_owned()))?;
        let target = inside(&target)
            .map_err(|why| Hostile::HardLinkOut {
                link: rel.to_owned(),
                why: Box::new(why),
            })?
            .ok_or_else(|| Hostile::HardLinkToRoot(rel.to_owned()))?;
        self.parents(&target)?;
        let source = self.dest.join(&target);
        match fs::symlink_metadata(&source) {
            Ok(meta) if !meta.is_dir() => {}
            _ => {
                return Err(Hostile::HardLinkNotInLayer {
                    link: rel.to_owned(),
                    target,
                }
                .into());
            }
        }
        self.parents(rel)?;
        self.clear(rel).map_err(|err| io_error(&full, err))?;
        fs::hard_link(&source, &full).map_err(|err| io_error(&full, err))
    }
}

/// Where a symlink or hard link entry points; `full` is the entry's place,
/// for the error.
fn link_target<R: Read>(
    entry: &tar::Entry<'_, R>,
    full: &Path,
) -> Result<Option<PathBuf>, OciError> {
    let target = entry.link_name().map_err(|err| io_error(full, err))?;
    Ok(target.map(|target| target.into_owned()))
}

/// Unpacks a layer tar into `dest` under the rules in this file's header.
pub(super) fn unpack(reader: &mut dyn Read, dest: &Path) -> Result<(), OciError> {
    let mut archive = tar::Archive::new(reader);
    let mut unpacker = Unpacker {
        dest,
        dirs: HashSet::new(),
    };
    let entries = archive.entries().map_err(|err| io_error(dest, err))?;
    for entry in entries {
        let mut entry = entry.map_err(|err| io_error(dest, err))?;
        let path = entry
            .path()
            .map_err(|err| io_error(dest, err))?
            .into_owned();
        let Some(rel) = inside(&path)? else {
            continue;
        };
        unpacker.entry(&mut entry, rel)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tar built entry by entry, as hostile as a test wants.
    struct TarBuilder(tar::Builder<Vec<u8>>);

    impl TarBuilder {
        fn new() -> TarBuilder {
            TarBuilder(tar::Builder::new(Vec::new()))
        }

        fn header(kind: tar::EntryType, path: &str, mode: u32, size: u64) -> tar::Header {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(kind);
            // Written raw: set_path itself refuses `..`.
            let name = &mut header.as_old_mut().name;
            name[..path.len()].copy_from_slice(path.as_bytes());
            header.set_mode(mode);
            header.set_size(size);
            header.set_mtime(1_700_000_000);
            header.set_cksum();
            header
        }

        fn file(mut self, path: &str, mode: u32, body: &str) -> Self {
            let header = Self::header(tar::EntryType::Regular, path, mode, body.len() as u64);
            self.0.append(&header, body.as_bytes()).expect("append");
            self
        }

        fn dir(mut self, path: &str) -> Self {
            let header = Self::header(tar::EntryType::Directory, path, 0o755, 0);
            self.0.append(&header, io::empty()).expect("append");
            self
        }

        fn link(mut self, kind: tar::EntryType, path: &str, target: &str) -> Self {
            let mut header = Self::header(kind, path, 0o777, 0);
            let name = &mut header.as_old_mut().linkname;
            name[..target.len()].copy_from_slice(target.as_bytes());
            header.set_cksum();
            self.0.append(&header, io::empty()).expect("append");
            self
        }

        fn device(mut self, path: &str) -> Self {
            let header = Self::header(tar::EntryType::Char, path, 0o666, 0);
            self.0.append(&header, io::empty()).expect("append");
            self
        }

        /// A file with a GNU long name, for paths over the header's 100 bytes.
        fn long_file(mut self, path: &str, body: &str) -> Self {
            let mut header = Self::header(tar::EntryType::Regular, "", 0o644, body.len() as u64);
            self.0
                .append_data(&mut header, path, body.as_bytes())
                .expect("append");
            self
        }

        fn bytes(self) -> Vec<u8> {
            self.0.into_inner().expect("finish")
        }
    }

    fn unpack_bytes(bytes: &[u8]) -> (tempfile::TempDir, Result<(), OciError>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let result = unpack(&mut &bytes[..], dir.path());
        (dir, result)
    }

    fn refused(bytes: &[u8]) -> String {
        match unpack_bytes(bytes).1 {
            Err(OciError::Hostile(why)) => why.to_string(),
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn files_folders_and_links_are_unpacked() {
        let tar = TarBuilder::new()
            .dir("./etc/")
            .file("./etc/os-release", 0o644, "bookworm\n")
            .link(tar::EntryType::Symlink, "bin", "usr/bin")
            .link(tar::EntryType::Symlink, "etc/abs", "/etc/os-release")
            .link(tar::EntryType::Link, "etc/hard", "etc/os-release")
            .file("etc/.wh.gone", 0o644, "")
            .bytes();
        let (dir, result) = unpack_bytes(&tar);
        result.expect("unpack");
        let root = dir.path();
        assert_eq!(
            fs::read_to_string(root.join("etc/os-release")).expect("read"),
            "bookworm\n"
        );
        assert_eq!(
            fs::read_link(root.join("bin")).expect("link"),
            Path::new("usr/bin")
        );
        assert_eq!(
            fs::read_link(root.join("etc/abs")).expect("link"),
            Path::new("/etc/os-release")
        );
        use std::os::unix::fs::MetadataExt;
        let ino = |p: &str| fs::metadata(root.join(p)).expect("meta").ino();
        assert_eq!(ino("etc/hard"), ino("etc/os-release"));
        // Whiteouts stay as markers for the stacking.
        assert!(root.join("etc/.wh.gone").is_file());
    }

    #[test]
    fn setuid_and_setgid_bits_are_dropped() {
        let tar = TarBuilder::new().file("usr/bin/su", 0o6755, "#!").bytes();
        let (dir, result) = unpack_bytes(&tar);
        result.expect("unpack");
        let mode = fs::metadata(dir.path().join("usr/bin/su"))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o755);
    }

    #[test]
    fn device_nodes_are_skipped() {
        let tar = TarBuilder::new()
            .device("dev/sda")
            .file("ok", 0o644, "x")
            .bytes();
        let (dir, result) = unpack_bytes(&tar);
        result.expect("unpack");
        assert!(!dir.path().join("dev/sda").exists());
        assert!(dir.path().join("ok").exists());
    }

    /// A folder the file system cannot make (its name is over NAME_MAX) is
    /// the cache's failure, naming the folder, not a hostile layer.
    #[test]
    fn a_folder_that_cannot_be_made_is_an_io_error_not_a_refusal() {
        let long = "d".repeat(300);
        let tar = TarBuilder::new()
            .long_file(&format!("{long}/file"), "x")
            .bytes();
        let (dir, result) = unpack_bytes(&tar);
        match result {
            Err(OciError::Cache { path, .. }) => {
                assert_eq!(path, dir.path().join(&long));
            }
            other => panic!("not a cache error: {other:?}"),
        }
    }

    #[test]
    fn path_traversal_is_refused() {
        let cases: [(&str, Vec<u8>); 6] = [
            (
                "dotdot",
                TarBuilder::new().file("../escaped", 0o644, "x").bytes(),
            ),
            (
                "inner dotdot",
                TarBuilder::new()
                    .file("a/../../escaped", 0o644, "x")
                    .bytes(),
            ),
            (
                "absolute",
                TarBuilder::new().file("/etc/escaped", 0o644, "x").bytes(),
            ),
            (
                "symlink out",
                TarBuilder::new()
                    .link(tar::EntryType::Symlink, "a/b", "../../../etc/passwd")
                    .bytes(),
            ),
            (
                "through a symlink",
                TarBuilder::new()
                    .link(tar::EntryType::Symlink, "tmpdir", "/tmp")
                    .file("tmpdir/escaped", 0o644, "x")
                    .bytes(),
            ),
            (
                "hard link out",
                TarBuilder::new()
                    .link(tar::EntryType::Link, "passwd", "../../etc/passwd")
                    .bytes(),
            ),
        ];
        for (name, tar) in cases {
            let outer = tempfile::tempdir().expect("tempdir");
            let dest = outer.path().join("layer");
            fs::create_dir(&dest).expect("mkdir");
            let result = unpack(&mut &tar[..], &dest);
            assert!(
                matches!(result, Err(OciError::Hostile(_))),
                "{name}: {result:?}"
            );
            assert!(!outer.path().join("escaped").exists(), "{name}");
        }
        // An absolute symlink stays inside the root: it is resolved there.
        let tar = TarBuilder::new()
            .link(tar::EntryType::Symlink, "a/b", "/../../x")
            .bytes();
        assert!(refused(&tar).contains("leaves"));
    }

    #[test]
    fn a_folder_replaced_by_a_symlink_is_not_written_through() {
        let outer = tempfile::tempdir().expect("tempdir");
        let dest = outer.path().join("layer");
        fs::create_dir(&dest).expect("mkdir");
        let target = outer.path().join("outside");
        fs::create_dir(&target).expect("mkdir");
        let tar = TarBuilder::new()
            .dir("a/")
            .file("a/first", 0o644, "x")
            .link(tar::EntryType::Symlink, "a", &target.display().to_string())
            .file("a/escaped", 0o644, "x")
            .bytes();
        let result = unpack(&mut &tar[..], &dest);
        assert!(matches!(result, Err(OciError::Hostile(_))), "{result:?}");
        assert!(!target.join("escaped").exists());
    }

    #[test]
    fn a_hard_link_through_a_symlink_is_refused() {
        let tar = TarBuilder::new()
            .link(tar::EntryType::Symlink, "etc", "/etc")
            .link(tar::EntryType::Link, "stolen", "etc/passwd")
            .bytes();
        assert!(refused(&tar).contains("symlink"));
    }

    fn digest_of(bytes: &[u8]) -> Digest {
        Digest::of(bytes)
    }

    #[test]
    fn a_layer_is_checked_against_its_digests_compressed_or_not() {
        let tar = TarBuilder::new().file("a", 0o644, "hello").bytes();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        io::Write::write_all(&mut gz, &tar).expect("gzip");
        let gz = gz.finish().expect("gzip");
        let dir = tempfile::tempdir().expect("tempdir");
        let (blob, diff_id) = (digest_of(&gz), digest_of(&tar));
        unpack_verified(&mut &gz[..], dir.path(), Some(&blob), &diff_id).expect("gzip layer");
        assert_eq!(
            fs::read_to_string(dir.path().join("a")).expect("read"),
            "hello"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        unpack_verified(&mut &tar[..], dir.path(), None, &diff_id).expect("plain layer");
        // One byte changed in the blob: refused.
        let mut bad = tar.clone();
        bad[600] ^= 1;
        let dir = tempfile::tempdir().expect("tempdir");
        let err = unpack_verified(&mut &bad[..], dir.path(), None, &diff_id).expect_err("tampered");
        assert!(matches!(err, OciError::Digest { .. }), "{err:?}");
        let err = unpack_verified(&mut &gz[..], dir.path(), Some(&diff_id), &diff_id)
            .expect_err("wrong blob digest");
        assert!(matches!(err, OciError::Digest { .. }), "{err:?}");
    }

    #[test]
    fn a_tampered_layer_never_enters_the_cache() {
        let tar = TarBuilder::new().file("a", 0o644, "hello").bytes();
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = dir.path().join("layout");
        fs::create_dir_all(layout.join("blobs/sha256")).expect("mkdir");
        let claimed = digest_of(b"something else");
        fs::write(layout.join("blobs/sha256").join(claimed.hex()), &tar).expect("write");
        let cache = LayerCache::new(&dir.path().join("cache"));
        let layer = LayerRef::for_test(
            claimed.clone(),
            layout.join("blobs/sha256").join(claimed.hex()),
        );
        let source = Source::Layout {
            dir: layout,
            reference: None,
        };
        assert!(cache.ensure(&source, &layer).is_err());
        assert!(!dir.path().join("cache/layers").join(claimed.hex()).exists());
        assert!(
            !dir.path()
                .join("cache/layers")
                .join(format!("{}.partial", claimed.hex()))
                .exists()
        );
        // The right digest: in, once.
        let good = digest_of(&tar);
        fs::write(layout_path(dir.path(), &good), &tar).expect("write");
        let layer = LayerRef::for_test(good.clone(), layout_path(dir.path(), &good));
        let unpacked = cache.ensure(&source, &layer).expect("unpack");
        assert_eq!(
            fs::read_to_string(unpacked.join("a")).expect("read"),
            "hello"
        );
        fs::remove_file(layout_path(dir.path(), &good)).expect("rm");
        assert_eq!(cache.ensure(&source, &layer).expect("cached"), unpacked);
    }

    #[test]
    fn what_a_killed_unpack_left_is_replaced_and_tasks_at_once_unpack_once() {
        let tar = TarBuilder::new().file("a", 0o644, "whole").bytes();
        let dir = tempfile::tempdir().expect("tempdir");
        let good = digest_of(&tar);
        fs::create_dir_all(layout_path(dir.path(), &good).parent().expect("parent"))
            .expect("mkdir");
        fs::write(layout_path(dir.path(), &good), &tar).expect("write");
        let cache = LayerCache::new(&dir.path().join("cache"));
        // A kill -9 mid-unpack leaves a partial folder: never used as is.
        let partial = dir
            .path()
            .join("cache/layers")
            .join(format!("{}.partial", good.hex()));
        fs::create_dir_all(&partial).expect("mkdir");
        fs::write(partial.join("a"), "half").expect("write");
        let source = Source::Layout {
            dir: dir.path().join("layout"),
            reference: None,
        };
        let layer = LayerRef::for_test(good.clone(), layout_path(dir.path(), &good));
        let unpacked: Vec<PathBuf> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..4)
                .map(|_| scope.spawn(|| cache.ensure(&source, &layer).expect("ensure")))
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().expect("thread"))
                .collect()
        });
        assert!(unpacked.iter().all(|path| *path == unpacked[0]));
        assert_eq!(
            fs::read_to_string(unpacked[0].join("a")).expect("read"),
            "whole"
        );
        assert!(!partial.exists());
    }

    fn layout_path(dir: &Path, digest: &Digest) -> PathBuf {
        dir.join("layout/blobs/sha256").join(digest.hex())
    }

    #[test]
    fn a_zstd_layer_of_several_frames_is_read_whole() {
        // Two frames of raw (uncompressed) blocks, written by hand.
        fn frame(payload: &[u8]) -> Vec<u8> {
            let mut out = vec![0x28, 0xb5, 0x2f, 0xfd];
            // Frame header: single segment, 4-byte content size.
            out.push(0b1010_0000);
            out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            // One last raw block.
            let header = ((payload.len() as u32) << 3) | 1;
            out.extend_from_slice(&header.to_le_bytes()[..3]);
            out.extend_from_slice(payload);
            out
        }
        let tar = TarBuilder::new().file("z", 0o644, "zstd").bytes();
        let (a, b) = tar.split_at(1000);
        let mut blob = frame(a);
        blob.extend(frame(b));
        let dir = tempfile::tempdir().expect("tempdir");
        unpack_verified(
            &mut &blob[..],
            dir.path(),
            Some(&digest_of(&blob)),
            &digest_of(&tar),
        )
        .expect("zstd");
        assert_eq!(
            fs::read_to_string(dir.path().join("z")).expect("read"),
            "zstd"
        );
    }
}
