//! Fixing a thin pack in process, the same way every time.
//!
//! A thin pack's deltas may name bases it does not hold. To make a pack git
//! reads, those bases are appended whole, the object count in its header
//! raised and its trailing SHA-1 written anew: what `git index-pack
//! --fix-thin` does, at the cost of a process, a check of every object
//! against the mirror and the hashing of every object (about 20 ms for one
//! of the bench repo's increments, once per base per run).
//!
//! [`fix`] does only the appending, each base as a zlib stream of stored
//! blocks (nothing to compress, and bytes the format fixes), so the same
//! thin pack and bases always give the same bytes. A store is built
//! with it and git indexes the result (`git index-pack`, which checks every
//! object and every delta); each later run fixes the thin pack again with
//! [`fix`] and uses the stored index when the pack's trailing SHA-1 is the
//! one that index was made for, which proves the bytes the same. Anything
//! else (a store from an older onebash, another compressor) is fixed by git
//! as before.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::Path;

use git2::{ObjectType, Odb, Oid};
use sha1::{Digest, Sha1};

use super::error::{PackFault, StoreError};

/// The magic and version that open a version-2 pack index, then the
/// 256-entry fan-out table, whose last entry is the object count.
pub(super) const INDEX_MAGIC: [u8; 8] = [0xff, b't', b'O', b'c', 0, 0, 0, 2];
pub(super) const INDEX_HEADER: usize = 8 + 256 * 4;
/// A pack's header: `PACK`, the version (2) and the object count.
const PACK_HEADER: usize = 12;

/// A version-2 pack index, read whole and checked against its own SHA-1.
pub(super) struct PackIndex {
    /// Object names, sorted.
    pub ids: Vec<Oid>,
    /// Each object's offset in the pack, in the order of `ids`.
    pub offsets: Vec<u64>,
    /// The trailing SHA-1 of the pack this index was made for.
    pub pack_checksum: [u8; 20],
}

impl PackIndex {
    pub(super) fn read(path: &Path) -> Result<PackIndex, StoreError> {
        let bytes = std::fs::read(path).map_err(StoreError::io("read", path))?;
        PackIndex::parse(&bytes).ok_or_else(|| StoreError::BadIndex {
            path: path.to_owned(),
        })
    }

    fn parse(bytes: &[u8]) -> Option<PackIndex> {
        let body = bytes
            .len()
            .checked_sub(40)
            .filter(|at| *at >= INDEX_HEADER)?
            + 20;
        if bytes[..8] != INDEX_MAGIC || Sha1::digest(&bytes[..body])[..] != bytes[body..] {
            return None;
        }
        let count = u32::from_be_bytes(bytes[INDEX_HEADER - 4..INDEX_HEADER].try_into().ok()?);
        let count = count as usize;
        let names = INDEX_HEADER;
        let small = names + count * 20 + count * 4;
        let large = small + count * 4;
        let ids = bytes
            .get(names..names + count * 20)?
            .chunks_exact(20)
            .map(|raw| Oid::from_bytes(raw).ok())
            .collect::<Option<Vec<_>>>()?;
        let offsets = bytes
            .get(small..large)?
            .chunks_exact(4)
            .map(|raw| {
                let small = u32::from_be_bytes(raw.try_into().ok()?);
                if small & 0x8000_0000 == 0 {
                    return Some(u64::from(small));
                }
                // Past 2 GiB: an entry of the table of 8-byte offsets.
                let at = large + (small & 0x7fff_ffff) as usize * 8;
                Some(u64::from_be_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
            })
            .collect::<Option<Vec<_>>>()?;
        let pack_checksum = bytes.get(body - 20..body)?.try_into().ok()?;
        Some(PackIndex {
            ids,
            offsets,
            pack_checksum,
        })
    }

    /// The objects at or after `offset` (the end of a thin pack's own
    /// objects: the bases a fix appended), in pack order.
    pub(super) fn appended_after(&self, offset: u64) -> Vec<Oid> {
        let mut after: Vec<(u64, Oid)> = self
            .offsets
            .iter()
            .zip(&self.ids)
            .filter(|(at, _)| **at >= offset)
            .map(|(at, id)| (*at, *id))
            .collect();
        after.sort_unstable();
        after.into_iter().map(|(_, id)| id).collect()
    }
}

/// What a thin pack holds before its trailer: its length and object count.
pub(super) struct ThinPack {
    /// Header and objects: the offset of the first base a fix appends.
    pub body: u64,
    pub count: u32,
}

impl ThinPack {
    pub(super) fn read(path: &Path) -> Result<ThinPack, StoreError> {
        let mut header = [0u8; PACK_HEADER];
        let bad = || StoreError::BadPack {
            path: path.to_owned(),
        };
        let mut file = File::open(path).map_err(StoreError::io("read", path))?;
        let len = file.metadata().map_err(StoreError::io("read", path))?.len();
        file.read_exact(&mut header).map_err(|_| bad())?;
        if &header[..8] != b"PACK\0\0\0\x02" || len < (PACK_HEADER + 20) as u64 {
            return Err(bad());
        }
        Ok(ThinPack {
            body: len - 20,
            count: u32::from_be_bytes(header[8..].try_into().map_err(|_| bad())?),
        })
    }
}

/// The objects that the deltas of the thin pack `bytes` name by id
/// (`REF_DELTA`), each once, in the order first named: the bases it lacks.
/// git names a base inside the pack by its offset (`OFS_DELTA`, with
/// `--delta-base-offset`) and one outside by its id. Each entry's zlib
/// stream is inflated to find where the next begins.
pub(super) fn named_bases(bytes: &[u8]) -> Result<Vec<Oid>, PackFault> {
    if bytes.len() < PACK_HEADER + 20 || &bytes[..8] != b"PACK\0\0\0\x02" {
        return Err(PackFault::Header);
    }
    let count = u32::from_be_bytes(bytes[8..12].try_into().map_err(|_| PackFault::Header)?);
    let end = bytes.len() - 20;
    let (mut at, mut bases, mut seen) = (PACK_HEADER, Vec::new(), std::collections::HashSet::new());
    let mut sink = vec![0u8; 64 * 1024];
    for _ in 0..count {
        let byte = |at: usize| bytes.get(at).copied().filter(|_| at < end);
        let mut c = byte(at).ok_or(PackFault::EntryPastEnd)?;
        let kind = (c >> 4) & 7;
        at += 1;
        while c & 0x80 != 0 {
            c = byte(at).ok_or(PackFault::SizePastEnd)?;
            at += 1;
        }
        match kind {
            1..=4 => {}
            6 => loop {
                let c = byte(at).ok_or(PackFault::OffsetPastEnd)?;
                at += 1;
                if c & 0x80 == 0 {
                    break;
                }
            },
            7 => {
                let raw = bytes.get(at..at + 20).filter(|_| at + 20 <= end);
                let base = raw
                    .and_then(|raw| Oid::from_bytes(raw).ok())
                    .ok_or(PackFault::BaseIdPastEnd)?;
                at += 20;
                if seen.insert(base) {
                    bases.push(base);
                }
            }
            other => return Err(PackFault::EntryType(other)),
        }
        let mut zlib = flate2::Decompress::new(true);
        loop {
            let done = zlib.total_in() as usize;
            let status = zlib
                .decompress(
                    &bytes[at + done..end],
                    &mut sink,
                    flate2::FlushDecompress::None,
                )
                .map_err(PackFault::Damaged)?;
            match status {
                flate2::Status::StreamEnd => break,
                _ if zlib.total_in() as usize == done && at + done >= end => {
                    return Err(PackFault::CutShort);
                }
                _ => {}
            }
        }
        at += zlib.total_in() as usize;
    }
    if at != end {
        return Err(PackFault::Trailing);
    }
    Ok(bases)
}

/// Writes to `out` the thin pack at `thin` with `bases` appended whole, in
/// that order, read from `odb`. Returns the new pack's trailing SHA-1 (also
/// written). The same inputs give the same bytes.
pub(super) fn fix(
    thin: &Path,
    bases: &[Oid],
    odb: &Odb,
    out: &Path,
) -> Result<[u8; 20], StoreError> {
    let pack = ThinPack::read(thin)?;
    let count = u32::try_from(bases.len())
        .ok()
        .and_then(|more| pack.count.checked_add(more))
        .ok_or_else(|| StoreError::TooMany {
            path: thin.to_owned(),
        })?;
    let file = File::create(out).map_err(StoreError::io("write", out))?;
    let mut writer = Hashing {
        inner: BufWriter::with_capacity(1 << 16, file),
        sha: Sha1::new(),
    };
    let written = (|| -> std::io::Result<[u8; 20]> {
        writer.write_all(b"PACK\0\0\0\x02")?;
        writer.write_all(&count.to_be_bytes())?;
        let mut source = File::open(thin)?;
        std::io::copy(
            &mut (&mut source).take(PACK_HEADER as u64),
            &mut std::io::sink(),
        )?;
        let body = pack.body - PACK_HEADER as u64;
        if std::io::copy(&mut source.take(body), &mut writer)? != body {
            return Err(std::io::Error::other(
                "the thin pack is shorter than it was",
            ));
        }
        for id in bases {
            let object = odb.read(*id).map_err(std::io::Error::other)?;
            writer.write_all(&object_header(object.kind(), object.len())?)?;
            write_stored(&mut writer, object.data())?;
        }
        let trailer: [u8; 20] = writer.sha.clone().finalize().into();
        writer.inner.write_all(&trailer)?;
        writer.inner.flush()?;
        Ok(trailer)
    })();
    written.map_err(|source| {
        let _ = std::fs::remove_file(out);
        StoreError::Fix {
            thin: thin.to_owned(),
            out: out.to_owned(),
            source,
        }
    })
}

/// Writes `data` as a zlib stream of stored (uncompressed) blocks of the
/// largest size, as RFC 1950 and 1951 define them: the same bytes whatever
/// the compressor, and no compressing to do. The fixed pack lives for one
/// run, in the folder of its working copies.
fn write_stored(out: &mut impl Write, data: &[u8]) -> std::io::Result<()> {
    // CMF: deflate, 32 KiB window; FLG: no dictionary, level 0, and
    // CMF * 256 + FLG a multiple of 31.
    out.write_all(&[0x78, 0x01])?;
    let mut blocks = data.chunks(usize::from(u16::MAX)).peekable();
    if blocks.peek().is_none() {
        // One empty final block.
        out.write_all(&[1, 0, 0, 0xff, 0xff])?;
    }
    while let Some(block) = blocks.next() {
        let last = u8::from(blocks.peek().is_none());
        let len = block.len() as u16;
        out.write_all(&[last])?;
        out.write_all(&len.to_le_bytes())?;
        out.write_all(&(!len).to_le_bytes())?;
        out.write_all(block)?;
    }
    out.write_all(&adler32(data).to_be_bytes())
}

/// The Adler-32 checksum of RFC 1950.
fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65521;
    // 5552 bytes is the most that cannot overflow b before the modulo.
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(5552) {
        for byte in chunk {
            a += u32::from(*byte);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

/// A pack entry's header for a whole object: its type in bits 4-6 of the
/// first byte, then its size, 4 bits and then 7 a byte, low bits first.
fn object_header(kind: ObjectType, size: usize) -> std::io::Result<Vec<u8>> {
    let code: u8 = match kind {
        ObjectType::Commit => 1,
        ObjectType::Tree => 2,
        ObjectType::Blob => 3,
        ObjectType::Tag => 4,
        other => {
            return Err(std::io::Error::other(format!(
                "a base of type {other} cannot be packed"
            )));
        }
    };
    let mut size = size as u64;
    let mut header = vec![(code << 4) | (size & 0x0f) as u8];
    size >>= 4;
    while size > 0 {
        *header.last_mut().expect("one byte") |= 0x80;
        header.push((size & 0x7f) as u8);
        size >>= 7;
    }
    Ok(header)
}

/// A writer that hashes what passes through it.
struct Hashing<W> {
    inner: W,
    sha: Sha1,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.sha.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_headers_carry_type_and_size_low_bits_first() {
        assert_eq!(object_header(ObjectType::Blob, 5).expect("a blob"), [0x35]);
        // 300 = 0b1_0010_1100: 1100 in the first byte, then 10010.
        assert_eq!(
            object_header(ObjectType::Commit, 300).expect("a commit"),
            [0x80 | 0x10 | 0x0c, 0x12]
        );
        assert!(object_header(ObjectType::Any, 1).is_err());
    }

    #[test]
    fn stored_zlib_streams_inflate_to_their_data() {
        use std::io::Read;
        let big: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        for data in [&b""[..], b"a = 1\n", &big] {
            let mut stream = Vec::new();
            write_stored(&mut stream, data).expect("write");
            let mut back = Vec::new();
            flate2::read::ZlibDecoder::new(&stream[..])
                .read_to_end(&mut back)
                .expect("a valid zlib stream");
            assert_eq!(back, data);
        }
        assert_eq!(adler32(b"Wikipedia"), 0x11e6_0398);
    }

    /// `git ARGS` in `dir` with `input` on stdin; its stdout.
    fn git(dir: &Path, args: &[&str], input: &[u8]) -> Vec<u8> {
        use std::process::{Command, Stdio};
        let mut child = Command::new("git")
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run git");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input)
            .expect("write stdin");
        let out = child.wait_with_output().expect("wait for git");
        assert!(out.status.success(), "git {args:?} failed");
        out.stdout
    }

    #[test]
    fn a_thin_pack_names_the_bases_it_lacks_and_a_cut_one_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = dir.path();
        git(repo, &["init", "-q", "-b", "main"], b"");
        let commit = |text: &str| {
            std::fs::write(repo.join("big.txt"), text).expect("write");
            git(repo, &["add", "-A"], b"");
            git(
                repo,
                &[
                    "-c",
                    "user.name=t",
                    "-c",
                    "user.email=t@t",
                    "commit",
                    "-qm",
                    "c",
                ],
                b"",
            );
            String::from_utf8(git(repo, &["rev-parse", "HEAD"], b""))
                .expect("utf-8")
                .trim()
                .to_owned()
        };
        let lines: String = (0..3000)
            .map(|i| format!("line {i} of the file\n"))
            .collect();
        let old = commit(&lines);
        let new = commit(&lines.replace("line 1500 of", "LINE 1500 OF"));
        let old_blob = String::from_utf8(git(repo, &["rev-parse", &format!("{old}:big.txt")], b""))
            .expect("utf-8");
        let args = [
            "pack-objects",
            "--revs",
            "--thin",
            "--stdout",
            "--delta-base-offset",
            "-q",
        ];
        let pack = git(repo, &args, format!("{new}\n^{old}\n").as_bytes());
        let bases = named_bases(&pack).expect("a thin pack");
        // The new version is a delta against the old, which the pack lacks.
        assert_eq!(bases, vec![Oid::from_str(old_blob.trim()).expect("an id")]);
        // A whole pack names none.
        let whole_args = [
            "pack-objects",
            "--revs",
            "--stdout",
            "--delta-base-offset",
            "-q",
        ];
        let whole = git(repo, &whole_args, format!("{new}\n").as_bytes());
        assert_eq!(named_bases(&whole).expect("a pack"), Vec::<Oid>::new());
        // Cut in its last entry, or not a pack at all: refused.
        let mut cut = pack[..pack.len() - 30].to_vec();
        cut.extend([0u8; 20]);
        assert!(named_bases(&cut).is_err());
        assert!(named_bases(b"not a pack at all, not at all").is_err());
    }

    #[test]
    fn an_index_with_a_wrong_checksum_is_refused() {
        let mut bytes = INDEX_MAGIC.to_vec();
        bytes.extend([0u8; 256 * 4]);
        bytes.extend([7u8; 20]);
        let sum: [u8; 20] = Sha1::digest(&bytes).into();
        let mut good = bytes.clone();
        good.extend(sum);
        let index = PackIndex::parse(&good).expect("an empty index");
        assert!(index.ids.is_empty());
        assert_eq!(index.pack_checksum, [7u8; 20]);
        let mut bad = bytes;
        bad.extend([0u8; 20]);
        assert!(PackIndex::parse(&bad).is_none());
    }
}
