//! Exact object stores: what a working copy's `.git/objects` holds.
//!
//! One store per (repo, base commit, history): the objects reachable from
//! the base (`--history full`), or from one parentless commit holding the
//! base's tree (`--history none`), and nothing else. No command run in the
//! working copy can then reach a commit past the base, whatever it tries:
//! there are no refs to follow, no alternates naming the mirror, and no
//! object the base cannot reach.
//!
//! Stores are packs in the cache folder (`stores/<mirror>/packs/`), built
//! once and hard-linked into each working copy. A full store is a chain:
//! the base's own pack holds what the base reaches and its nearest stored
//! ancestor does not, and the rest of the chain is that ancestor's store. So
//! disk grows with the history, not with bases × history. The bases of a
//! run are stored oldest first, whatever order its tasks come in, so that
//! each finds its ancestors' stores already there.
//!
//! Verify, don't trust: a store is checked when it is built (its packs hold
//! exactly the set a walk of the base's history finds), and each working
//! copy when it is made ([`verify_working_copy`]: no refs, no alternates,
//! and as many objects as the base reaches).

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use git2::{ObjectType, Oid, Repository};
use serde::{Deserialize, Serialize};

use super::error::{Leak, StoreError};
use super::thin::{self, INDEX_HEADER, INDEX_MAGIC};
use crate::sys::lock::FileLock;

/// `--history`: how much of the base's past a working copy holds.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, clap::ValueEnum, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum History {
    /// Every ancestor of the base: `git log` and `git blame` of the past work.
    #[default]
    Full,
    /// One commit with no parents, holding the base's tree.
    None,
}

impl History {
    pub fn name(self) -> &'static str {
        match self {
            History::Full => "full",
            History::None => "none",
        }
    }
}

/// A built store, as its manifest in `bases/` records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BaseStore {
    /// The commit a working copy's HEAD is: the base itself (full), or the
    /// parentless commit of the base's tree (none).
    pub head: Oid,
    /// How many objects `head` reaches: exactly what the packs hold.
    pub objects: u64,
    /// The packs' index entries, summed (an object in two packs of the
    /// chain counts twice): what a working copy's check counts.
    pub entries: u64,
    /// The packs, the base's own first, then its chain.
    pub packs: Vec<StoredPack>,
}

/// One pack of a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StoredPack {
    /// `pack-<hash>`: a pack whose deltas all have their bases in it,
    /// linked into working copies as it is.
    Whole(String),
    /// `thin-<hash>`: the objects a base reaches beyond its nearest stored
    /// ancestor, deltified against that ancestor's objects too, which the
    /// pack does not hold. Git reads no such pack, so each run fixes it once
    /// (the bases appended, from the mirror: [`StoreDir::fix_thin`]) before
    /// linking it. Stored this way, a base that changed a few lines of a
    /// file costs those lines, not the whole file again. Its `.idx` is the
    /// fixed pack's, with `entries` objects.
    Thin { name: String, entries: u64 },
}

impl StoredPack {
    pub(crate) fn name(&self) -> &str {
        match self {
            StoredPack::Whole(name) | StoredPack::Thin { name, .. } => name,
        }
    }
}

/// The nearest stored ancestor of a commit (if any), and the planned
/// commits without a store met before it, newest first.
type Nearest = (Option<(Oid, BaseStore)>, Vec<Oid>);

const MANIFEST_MAGIC: &str = "onebash base store 2";
/// Manifests of version 1 list whole packs only, and read as they are.
const MANIFEST_MAGIC_1: &str = "onebash base store 1";

/// The stores of one repo: `<cache>/stores/<mirror name>/`.
pub(crate) struct StoreDir {
    root: PathBuf,
}

impl StoreDir {
    /// The stores of the mirror at `<cache>/repos/<name>.git`.
    pub(crate) fn for_mirror(mirror: &Path) -> StoreDir {
        let name = mirror
            .file_stem()
            .map(OsString::from)
            .unwrap_or_else(|| OsString::from("repo"));
        let cache = mirror
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("."));
        StoreDir {
            root: cache.join("stores").join(name),
        }
    }

    fn manifest(&self, base: Oid, history: History) -> PathBuf {
        self.root
            .join("bases")
            .join(format!("{base}.{}", history.name()))
    }

    /// Where pack `name` lives, with `.pack` or `.idx` to add.
    pub(crate) fn pack(&self, name: &str, ext: &str) -> PathBuf {
        self.root.join("packs").join(format!("{name}.{ext}"))
    }

    /// Fixes the thin pack `name` of a store into a whole one in `dir`,
    /// its bases appended from the mirror `repo` (at `mirror`, which holds
    /// every object the store has ever packed). Returns the whole pack's
    /// name (`pack-<hash>`, its `.pack` and `.idx` in `dir`), which lists
    /// `entries` objects, as it did when the store was built and checked.
    /// Fixed in process when that gives the very pack the stored index was
    /// made for ([`thin`]); otherwise (a store of an older onebash) by
    /// `git index-pack --fix-thin`.
    pub(crate) fn fix_thin(
        &self,
        mirror: &Path,
        repo: &Repository,
        name: &str,
        entries: u64,
        dir: &Path,
    ) -> Result<String, StoreError> {
        std::fs::create_dir_all(dir).map_err(StoreError::io("make", dir))?;
        if let Ok(Some(fixed)) = self.fix_again(repo, name, entries, dir) {
            return Ok(fixed);
        }
        let thin = self.pack(name, "pack");
        let bytes = std::fs::read(&thin).map_err(StoreError::io("read", &thin))?;
        let partial = partial_pack(dir, name);
        let partial_idx = partial.with_extension("idx");
        let args = index_pack_args(mirror, &["--fix-thin", "--stdin"], &partial);
        let fixed = crate::sys::exec::run_tool(Path::new("git"), &args, &bytes)
            .map_err(|source| StoreError::FixThin {
                name: name.to_owned(),
                source,
            })
            .and_then(|out| {
                let out = String::from_utf8_lossy(&out);
                let hash = out.trim().strip_prefix("pack\t").unwrap_or_default();
                if hash.is_empty() || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(StoreError::NoPackName {
                        command: "index-pack",
                        printed: out.into_owned(),
                    });
                }
                let found = pack_index_count(&partial_idx)?;
                if found != entries {
                    return Err(StoreError::FixedCount {
                        name: name.to_owned(),
                        found,
                        entries,
                    });
                }
                Ok(format!("pack-{hash}"))
            })
            .and_then(|fixed| {
                move_pack(&partial, &partial_idx, dir, &fixed)?;
                Ok(fixed)
            });
        if fixed.is_err() {
            let _ = std::fs::remove_file(&partial);
            let _ = std::fs::remove_file(&partial_idx);
        }
        fixed
    }

    /// Fixes stored thin pack `name` in process, as it was when the store
    /// was built, and takes its stored index: `None` when the pack so made
    /// is not the one that index was made for (its trailing SHA-1 differs:
    /// a store of an older onebash) or lists other than `entries` objects.
    fn fix_again(
        &self,
        repo: &Repository,
        name: &str,
        entries: u64,
        dir: &Path,
    ) -> Result<Option<String>, StoreError> {
        let (thin, stored_idx) = (self.pack(name, "pack"), self.pack(name, "idx"));
        let index = thin::PackIndex::read(&stored_idx)?;
        let pack = thin::ThinPack::read(&thin)?;
        let bases = index.appended_after(pack.body);
        if index.ids.len() as u64 != entries || pack.count as usize + bases.len() != index.ids.len()
        {
            return Ok(None);
        }
        let odb = repo
            .odb()
            .map_err(StoreError::git("read the objects", repo))?;
        let partial = partial_pack(dir, name);
        let partial_idx = partial.with_extension("idx");
        let trailer = thin::fix(&thin, &bases, &odb, &partial)?;
        if trailer != index.pack_checksum {
            let _ = std::fs::remove_file(&partial);
            return Ok(None);
        }
        let fixed = format!("pack-{}", hex(&trailer));
        // A link where it can be (no new file to make), else a copy.
        let moved = std::fs::hard_link(&stored_idx, &partial_idx)
            .or_else(|_| std::fs::copy(&stored_idx, &partial_idx).map(drop))
            .map_err(StoreError::io("copy", &stored_idx))
            .and_then(|()| move_pack(&partial, &partial_idx, dir, &fixed));
        if let Err(err) = moved {
            let _ = std::fs::remove_file(&partial);
            let _ = std::fs::remove_file(&partial_idx);
            return Err(err);
        }
        Ok(Some(fixed))
    }

    /// The store of `base`, when one was built and all its packs are there.
    pub(crate) fn find(&self, base: Oid, history: History) -> Option<BaseStore> {
        let text = std::fs::read_to_string(self.manifest(base, history)).ok()?;
        let store = parse_manifest(&text)?;
        let complete = store.packs.iter().all(|pack| {
            self.pack(pack.name(), "pack").is_file() && self.pack(pack.name(), "idx").is_file()
        });
        complete.then_some(store)
    }

    /// The store of `base`, built if need be (under the stores' file lock,
    /// which other onebash processes respect too). For `full`, the bases
    /// in `planned` (this run's, of this repo) that are ancestors of `base`
    /// and have no store yet are built first, oldest first, so that every
    /// chain stays short of duplicates.
    pub(crate) fn ensure(
        &self,
        mirror: &Path,
        base: Oid,
        history: History,
        planned: &HashSet<Oid>,
    ) -> Result<BaseStore, StoreError> {
        if let Some(store) = self.find(base, history) {
            return Ok(store);
        }
        for dir in ["bases", "packs", "tmp"] {
            let dir = self.root.join(dir);
            std::fs::create_dir_all(&dir).map_err(StoreError::io("make", dir))?;
        }
        let _lock = FileLock::acquire(&self.root.join("lock"))
            .map_err(StoreError::io("lock", &self.root))?;
        if let Some(store) = self.find(base, history) {
            return Ok(store);
        }
        let repo = open_mirror(mirror)?;
        match history {
            History::None => self.build_none(&repo, mirror, base),
            History::Full => {
                let (_, pending) = self.nearest_stored(&repo, base, planned)?;
                // Met newest first: built oldest first.
                for ancestor in pending.iter().rev() {
                    self.build_full(&repo, mirror, *ancestor)?;
                }
                self.build_full(&repo, mirror, base)
            }
        }
    }

    /// Walks the history of `from` (children before parents) to the first
    /// commit with a full store: no stored commit comes later in the walk
    /// that is not its ancestor. Also returns the `planned` commits met on
    /// the way that have no store, newest first.
    fn nearest_stored(
        &self,
        repo: &Repository,
        from: Oid,
        planned: &HashSet<Oid>,
    ) -> Result<Nearest, StoreError> {
        let stored = self.stored_full_bases();
        let mut pending = Vec::new();
        // Nothing to find (the first store of a repo): no walk.
        if stored.is_empty() && planned.iter().all(|base| *base == from) {
            return Ok((None, pending));
        }
        let git = || StoreError::git(format!("walk the history of {from}"), repo);
        let mut walk = repo.revwalk().map_err(git())?;
        walk.set_sorting(git2::Sort::TOPOLOGICAL).map_err(git())?;
        walk.push(from).map_err(git())?;
        for oid in walk {
            let oid = oid.map_err(git())?;
            if oid == from {
                continue;
            }
            if stored.contains(&oid)
                && let Some(store) = self.find(oid, History::Full)
            {
                return Ok((Some((oid, store)), pending));
            }
            if planned.contains(&oid) {
                pending.push(oid);
            }
        }
        Ok((None, pending))
    }

    /// The commits that have a full store's manifest.
    fn stored_full_bases(&self) -> HashSet<Oid> {
        let Ok(entries) = std::fs::read_dir(self.root.join("bases")) else {
            return HashSet::new();
        };
        entries
            .filter_map(|entry| entry.ok())
            .filter_map(|entry| {
                let name = entry.file_name();
                let sha = name.to_str()?.strip_suffix(".full")?;
                Oid::from_str(sha).ok()
            })
            .collect()
    }

    /// Builds the full store of `base`: one pack of what it reaches beyond
    /// its nearest stored ancestor, chained to that ancestor's store.
    fn build_full(
        &self,
        repo: &Repository,
        mirror: &Path,
        base: Oid,
    ) -> Result<BaseStore, StoreError> {
        if let Some(store) = self.find(base, History::Full) {
            return Ok(store);
        }
        let (parent, _) = self.nearest_stored(repo, base, &HashSet::new())?;
        let (known, chain) = match &parent {
            Some((_, store)) => (self.objects_of(store)?, store.packs.clone()),
            None => (HashSet::new(), Vec::new()),
        };
        let mut input = format!("{base}\n");
        if let Some((parent, _)) = &parent {
            input.push_str(&format!("^{parent}\n"));
        }
        // git packs while this walks what the pack must hold: the walk is
        // the check, and costs as much as the packing.
        let (own, reached) = std::thread::scope(|scope| {
            let packing = scope.spawn(|| match &parent {
                Some(_) => self.pack_thin(mirror, &input),
                None => self.pack_objects(mirror, &input),
            });
            let reached = reachable_beyond(repo, &[base], parent.as_ref().map(|(p, _)| *p), &known);
            let own = packing.join().unwrap_or(Err(StoreError::PackingThread));
            (own, reached)
        });
        let (own, reached) = (own?, reached?);
        let own_entries = self.check_pack(own.name(), &known, &reached)?;
        let mut packs = vec![own];
        packs.extend(chain);
        let store = BaseStore {
            head: base,
            objects: (known.len() + reached.len()) as u64,
            entries: own_entries + parent.map_or(0, |(_, store)| store.entries),
            packs,
        };
        self.write_manifest(base, History::Full, &store)?;
        Ok(store)
    }

    /// Builds the store of `base` without its history: a commit with no
    /// parents and the base's tree, author, committer and message (so the
    /// same base always gives the same commit), packed with its tree.
    fn build_none(
        &self,
        repo: &Repository,
        mirror: &Path,
        base: Oid,
    ) -> Result<BaseStore, StoreError> {
        let git = || StoreError::git(format!("read the commit {base}"), repo);
        let commit = repo.find_commit(base).map_err(git())?;
        let tree = commit.tree().map_err(git())?;
        let message = String::from_utf8_lossy(commit.message_raw_bytes()).into_owned();
        // Into the mirror's objects (nothing else there changes): packing
        // reads it from there.
        let head = repo
            .commit(
                None,
                &commit.author(),
                &commit.committer(),
                &message,
                &tree,
                &[],
            )
            .map_err(StoreError::git(
                format!("write the parentless commit of {base}"),
                repo,
            ))?;
        let reached = reachable_beyond(repo, &[head], None, &HashSet::new())?;
        let own = self.pack_objects(mirror, &format!("{head}\n"))?;
        let entries = self.check_pack(own.name(), &HashSet::new(), &reached)?;
        let store = BaseStore {
            head,
            objects: reached.len() as u64,
            entries,
            packs: vec![own],
        };
        self.write_manifest(base, History::None, &store)?;
        Ok(store)
    }

    /// Every object of a store's packs.
    fn objects_of(&self, store: &BaseStore) -> Result<HashSet<Oid>, StoreError> {
        let mut all = HashSet::with_capacity(store.objects as usize);
        for pack in &store.packs {
            all.extend(pack_index_oids(&self.pack(pack.name(), "idx"))?);
        }
        if all.len() as u64 != store.objects {
            return Err(StoreError::ChainCount {
                found: all.len(),
                manifest: store.objects,
                root: self.root.clone(),
            });
        }
        Ok(all)
    }

    /// A clean folder for one build (the stores' lock held: one build at a
    /// time, and one left by a crash is cleared here).
    fn build_folder(&self) -> Result<PathBuf, StoreError> {
        let tmp = self.root.join("tmp").join("build");
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).map_err(StoreError::io("make", &tmp))?;
        Ok(tmp)
    }

    /// Writes one pack of the objects that `git rev-list --objects` lists
    /// for `input` (one revision a line, `^` to exclude), reusing the
    /// mirror's deltas, into `packs/`. git does this several times faster
    /// than libgit2's pack builder, which computes every delta again (3 s
    /// against 0.2 s for the bench repo's 27,000 objects).
    fn pack_objects(&self, mirror: &Path, input: &str) -> Result<StoredPack, StoreError> {
        let tmp = self.build_folder()?;
        let mut args = pack_objects_args(mirror);
        args.push(tmp.join("pack").into());
        let out = crate::sys::exec::run_tool(Path::new("git"), &args, input.as_bytes())
            .map_err(pack_failed(mirror))?;
        let hash = String::from_utf8_lossy(&out).trim().to_owned();
        if hash.is_empty() || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(StoreError::NoPackName {
                command: "pack-objects",
                printed: hash,
            });
        }
        let name = format!("pack-{hash}");
        // The index last: a reader that finds it finds its pack.
        for ext in ["pack", "idx"] {
            let from = tmp.join(format!("{name}.{ext}"));
            std::fs::rename(&from, self.pack(&name, ext)).map_err(into_store(&from))?;
        }
        let _ = std::fs::remove_dir_all(&tmp);
        Ok(StoredPack::Whole(name))
    }

    /// As [`Self::pack_objects`], a thin pack: its deltas may have their
    /// bases among the excluded objects. It is stored with the index of its
    /// fixed form, which the build checks.
    fn pack_thin(&self, mirror: &Path, input: &str) -> Result<StoredPack, StoreError> {
        let tmp = self.build_folder()?;
        let mut args = pack_objects_args(mirror);
        args.extend(["--thin".into(), "--stdout".into()]);
        let bytes = crate::sys::exec::run_tool(Path::new("git"), &args, input.as_bytes())
            .map_err(pack_failed(mirror))?;
        // A pack ends with the SHA-1 of all that comes before.
        let trailer = bytes
            .len()
            .checked_sub(20)
            .filter(|_| bytes.starts_with(b"PACK"))
            .map(|at| &bytes[at..])
            .ok_or(StoreError::NoPack)?;
        let hash = hex(trailer);
        let name = format!("thin-{hash}");
        let thin = tmp.join(format!("{name}.pack"));
        std::fs::write(&thin, &bytes).map_err(StoreError::io("write", &thin))?;
        let stored = self.pack(&name, "pack");
        std::fs::rename(&thin, &stored).map_err(into_store(&thin))?;
        // Fixed as every run will fix it, with the bases its deltas name,
        // and indexed by git, which checks every object and delta.
        let bases = thin::named_bases(&bytes).map_err(|source| StoreError::NotThin {
            path: stored.clone(),
            source,
        })?;
        let repo = open_mirror(mirror)?;
        let odb = repo
            .odb()
            .map_err(StoreError::git("read the objects", &repo))?;
        let own = tmp.join("own.pack");
        thin::fix(&self.pack(&name, "pack"), &bases, &odb, &own)?;
        let idx = own.with_extension("idx");
        let mut args = index_pack_args(mirror, &["-o"], &idx);
        args.push(own.into());
        crate::sys::exec::run_tool(Path::new("git"), &args, &[]).map_err(|source| {
            StoreError::Index {
                name: name.clone(),
                source,
            }
        })?;
        let entries = pack_index_count(&idx)?;
        let thin_count = thin::ThinPack::read(&stored)?.count;
        if entries != u64::from(thin_count) + bases.len() as u64 {
            return Err(StoreError::BuiltCount {
                name,
                entries,
                thin: thin_count,
                bases: bases.len(),
            });
        }
        std::fs::rename(&idx, self.pack(&name, "idx")).map_err(into_store(&idx))?;
        let _ = std::fs::remove_dir_all(&tmp);
        Ok(StoredPack::Thin { name, entries })
    }

    /// The base's own pack holds what the walk found beyond the chain
    /// (`reached`), and nothing the base cannot reach. Returns its entries.
    fn check_pack(
        &self,
        name: &str,
        known: &HashSet<Oid>,
        reached: &HashSet<Oid>,
    ) -> Result<u64, StoreError> {
        let listed = pack_index_oids(&self.pack(name, "idx"))?;
        let entries = listed.len() as u64;
        let own: HashSet<Oid> = listed.into_iter().collect();
        if let Some(stray) = own
            .iter()
            .find(|o| !known.contains(o) && !reached.contains(o))
        {
            return Err(StoreError::Stray {
                name: name.to_owned(),
                object: *stray,
            });
        }
        if let Some(missing) = reached.iter().find(|o| !own.contains(o)) {
            return Err(StoreError::Missing {
                name: name.to_owned(),
                object: *missing,
            });
        }
        Ok(entries)
    }

    fn write_manifest(
        &self,
        base: Oid,
        history: History,
        store: &BaseStore,
    ) -> Result<(), StoreError> {
        let mut text = format!(
            "{MANIFEST_MAGIC}\nbase {base}\nhistory {}\nhead {}\nobjects {}\nentries {}\n",
            history.name(),
            store.head,
            store.objects,
            store.entries
        );
        for pack in &store.packs {
            text.push_str(&match pack {
                StoredPack::Whole(name) => format!("pack {name}\n"),
                StoredPack::Thin { name, entries } => format!("thin {name} {entries}\n"),
            });
        }
        let path = self.manifest(base, history);
        let partial = path.with_extension("partial");
        let written = std::fs::File::create(&partial)
            .and_then(|mut file| {
                file.write_all(text.as_bytes())
                    .and_then(|()| file.sync_all())
            })
            .and_then(|()| std::fs::rename(&partial, &path));
        written.map_err(StoreError::io("write", path))
    }
}

/// The mirror at `path`, opened for a store's walk or fix.
fn open_mirror(path: &Path) -> Result<Repository, StoreError> {
    Repository::open_bare(path).map_err(|source| StoreError::Git {
        doing: "open the mirror".to_owned(),
        repo: path.to_owned(),
        source,
    })
}

/// `Pack` in the mirror at `mirror`, for `map_err`.
fn pack_failed(mirror: &Path) -> impl FnOnce(crate::sys::exec::ToolError) -> StoreError {
    let mirror = mirror.to_owned();
    move |source| StoreError::Pack { mirror, source }
}

/// `IntoStore` of `path`, for `map_err`.
fn into_store(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.to_owned();
    move |source| StoreError::IntoStore { path, source }
}

fn parse_manifest(text: &str) -> Option<BaseStore> {
    let mut lines = text.lines();
    if !matches!(lines.next()?, MANIFEST_MAGIC | MANIFEST_MAGIC_1) {
        return None;
    }
    let plain = |name: &str, prefix: &str| {
        name.strip_prefix(prefix)
            .is_some_and(|hash| !hash.is_empty() && hash.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    let (mut head, mut objects, mut entries, mut packs) = (None, None, None, Vec::new());
    for line in lines {
        let (key, value) = line.split_once(' ')?;
        match key {
            "head" => head = Oid::from_str(value).ok(),
            "objects" => objects = value.parse().ok(),
            "entries" => entries = value.parse().ok(),
            "pack" if plain(value, "pack-") => packs.push(StoredPack::Whole(value.to_owned())),
            "thin" => {
                let (name, entries) = value.split_once(' ')?;
                if !plain(name, "thin-") {
                    return None;
                }
                packs.push(StoredPack::Thin {
                    name: name.to_owned(),
                    entries: entries.parse().ok()?,
                });
            }
            "base" | "history" => {}
            _ => return None,
        }
    }
    (!packs.is_empty()).then_some(BaseStore {
        head: head?,
        objects: objects?,
        entries: entries?,
        packs,
    })
}

/// `git pack-objects` of the mirror, for a list of revisions on stdin.
fn pack_objects_args(mirror: &Path) -> Vec<OsString> {
    vec![
        "--git-dir".into(),
        mirror.into(),
        "pack-objects".into(),
        "--revs".into(),
        "--delta-base-offset".into(),
        "-q".into(),
    ]
}

/// `git index-pack` with the mirror's settings (no reverse index: a
/// working copy's pack folder holds a `.pack` and an `.idx`, nothing else),
/// `flags`, then `path`.
fn index_pack_args(mirror: &Path, flags: &[&str], path: &Path) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![
        "--git-dir".into(),
        mirror.into(),
        "-c".into(),
        "pack.writeReverseIndex=false".into(),
        "index-pack".into(),
    ];
    args.extend(flags.iter().map(OsString::from));
    args.push(path.into());
    args
}

/// A name in `dir` for one fix of thin pack `name` to write to (two runs
/// may share the folder).
fn partial_pack(dir: &Path, name: &str) -> PathBuf {
    static FIXES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    dir.join(format!(
        "{name}.fixing-{}-{}.pack",
        std::process::id(),
        FIXES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ))
}

/// Moves a fixed pack and its index to `dir` as `fixed`: the index last,
/// so a reader that finds it finds its pack.
fn move_pack(pack: &Path, idx: &Path, dir: &Path, fixed: &str) -> Result<(), StoreError> {
    for (from, ext) in [(pack, "pack"), (idx, "idx")] {
        let to = dir.join(format!("{fixed}.{ext}"));
        std::fs::rename(from, &to).map_err(StoreError::io("move", from))?;
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The objects reachable from `tips` that are not in `known`, walking
/// commits down to `stop` (excluded with its ancestors) and each new
/// commit's tree, skipping known subtrees. Gitlinks (submodule commits) are
/// not objects of this repo and are left out, as git does.
fn reachable_beyond(
    repo: &Repository,
    tips: &[Oid],
    stop: Option<Oid>,
    known: &HashSet<Oid>,
) -> Result<HashSet<Oid>, StoreError> {
    let git = || {
        let tips: Vec<String> = tips.iter().map(Oid::to_string).collect();
        StoreError::git(format!("walk the objects of {}", tips.join(" ")), repo)
    };
    let mut walk = repo.revwalk().map_err(git())?;
    for tip in tips {
        walk.push(*tip).map_err(git())?;
    }
    if let Some(stop) = stop {
        walk.hide(stop).map_err(git())?;
    }
    let mut found = HashSet::new();
    let mut trees = Vec::new();
    for oid in walk {
        let oid = oid.map_err(git())?;
        if known.contains(&oid) || !found.insert(oid) {
            continue;
        }
        trees.push(repo.find_commit(oid).map_err(git())?.tree_id());
        while let Some(tree_id) = trees.pop() {
            if known.contains(&tree_id) || !found.insert(tree_id) {
                continue;
            }
            let tree = repo.find_tree(tree_id).map_err(git())?;
            for entry in tree.iter() {
                match entry.kind() {
                    Some(ObjectType::Tree) => trees.push(entry.id()),
                    Some(ObjectType::Blob) if !known.contains(&entry.id()) => {
                        found.insert(entry.id());
                    }
                    _ => {}
                }
            }
        }
    }
    Ok(found)
}

/// How many objects a pack index lists (its header alone).
fn pack_index_count(idx: &Path) -> Result<u64, StoreError> {
    use std::io::Read;
    let mut header = [0u8; INDEX_HEADER];
    std::fs::File::open(idx)
        .and_then(|mut file| file.read_exact(&mut header))
        .map_err(StoreError::io("read", idx))?;
    if header[..8] != INDEX_MAGIC {
        return Err(StoreError::BadIndex {
            path: idx.to_owned(),
        });
    }
    let count: [u8; 4] = header[INDEX_HEADER - 4..].try_into().expect("four bytes");
    Ok(u64::from(u32::from_be_bytes(count)))
}

/// The object names a pack index lists (the whole index read and checked
/// against its own SHA-1, by the one reader of indexes, [`thin::PackIndex`]).
fn pack_index_oids(idx: &Path) -> Result<Vec<Oid>, StoreError> {
    Ok(thin::PackIndex::read(idx)?.ids)
}

/// The thin packs this run fixed (in the folder beside its working
/// copies), each once, whatever number of tasks link it.
#[derive(Default)]
pub(crate) struct FixedPacks {
    fixed: Mutex<HashMap<PathBuf, Arc<Mutex<Option<String>>>>>,
    /// Each mirror opened once for the run's fixes, which read their bases
    /// from it: its pack indexes and libgit2's cache of delta bases are
    /// kept from one fix to the next (a fix at a time per mirror).
    mirrors: Mutex<HashMap<PathBuf, Arc<Mutex<Repository>>>>,
}

impl FixedPacks {
    /// The name of the whole pack in `dir` that thin pack `name` of
    /// `stores` fixes into: fixed now when no task of this run has yet. A
    /// task that asks while another fixes it waits for that one. A failed
    /// fix is not remembered: the next task to ask tries again (git killed
    /// for memory, a full disk, a mirror not there yet).
    pub(crate) fn get(
        &self,
        stores: &StoreDir,
        mirror: &Path,
        pack: &StoredPack,
        dir: &Path,
    ) -> Result<String, StoreError> {
        let StoredPack::Thin { name, entries } = pack else {
            return Ok(pack.name().to_owned());
        };
        let slot = {
            let mut fixed = self.fixed.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(fixed.entry(dir.join(name)).or_default())
        };
        let mut fixed = slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(done) = fixed.as_ref() {
            return Ok(done.clone());
        }
        let repo = self.mirror(mirror)?;
        let repo = repo.lock().unwrap_or_else(|e| e.into_inner());
        let done = stores.fix_thin(mirror, &repo, name, *entries, dir)?;
        *fixed = Some(done.clone());
        Ok(done)
    }

    /// The mirror at `path`, opened by the first fix that reads it.
    fn mirror(&self, path: &Path) -> Result<Arc<Mutex<Repository>>, StoreError> {
        let mut mirrors = self.mirrors.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(repo) = mirrors.get(path) {
            return Ok(Arc::clone(repo));
        }
        let repo = open_mirror(path)?;
        let repo = Arc::new(Mutex::new(repo));
        mirrors.insert(path.to_owned(), Arc::clone(&repo));
        Ok(repo)
    }
}

/// What a working copy was checked for, for the trajectory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Verified {
    /// Objects in the working copy's store, each one reachable from HEAD
    /// (the store's count, from the walk that checked it when built).
    pub objects: u64,
}

/// Checks a new working copy against its store: HEAD is the store's head,
/// its reflog names no other commit, and no ref, `packed-refs`,
/// `FETCH_HEAD`/`ORIG_HEAD`, remote or alternates file exists; its objects
/// folder holds the store's packs and nothing else, with as many index
/// entries as the store's (whose packs were checked against a walk of the
/// base's history when it was built). Cheap: the pack indexes' headers,
/// not their contents.
pub(super) fn verify_working_copy(
    repo: &Repository,
    store: &BaseStore,
    linked: &[String],
) -> Result<Verified, StoreError> {
    let git = |doing: &'static str| StoreError::git(doing, repo);
    let gitdir = repo.path();
    for file in [
        "objects/info/alternates",
        "objects/info/http-alternates",
        "packed-refs",
        "FETCH_HEAD",
        "ORIG_HEAD",
        "logs/refs",
        "shallow",
    ] {
        if gitdir.join(file).symlink_metadata().is_ok() {
            return Err(Leak::File(PathBuf::from(file)).into());
        }
    }
    let references = repo.references().map_err(git("list the refs"))?;
    if let Some(reference) = references.flatten().next() {
        let name = String::from_utf8_lossy(reference.name_bytes()).into_owned();
        return Err(Leak::Ref(name).into());
    }
    let config = repo.config().map_err(git("read the config"))?;
    let remotes = config.entries(Some("remote\\..*"));
    if let Some(entry) = remotes.map_err(git("read the config"))?.next() {
        let entry = entry.map_err(git("read the config"))?;
        let name = String::from_utf8_lossy(entry.name_bytes()).into_owned();
        return Err(Leak::Remote(name).into());
    }
    // libgit2 logs the move of HEAD to the base: that entry, and only it.
    for entry in repo.reflog("HEAD").map_err(git("read the reflog"))?.iter() {
        if let Some(past) = [entry.id_old(), entry.id_new()]
            .into_iter()
            .find(|id| !id.is_zero() && *id != store.head)
        {
            return Err(Leak::Reflog(past).into());
        }
    }
    let head = repo.head().map_err(git("read HEAD"))?.target();
    if head != Some(store.head) || !repo.head_detached().map_err(git("read HEAD"))? {
        return Err(Leak::Head(store.head).into());
    }
    let entries = store_entries(&gitdir.join("objects"), linked)?;
    if entries != store.entries {
        return Err(Leak::Entries {
            entries,
            store: store.entries,
            objects: store.objects,
        }
        .into());
    }
    Ok(Verified {
        objects: store.objects,
    })
}

/// The index entries of the packs in `objects`, once it is known to hold
/// nothing else: exactly the packs linked from the store (`linked`, a
/// `.pack` and an `.idx` each), no loose object, nothing in `info/`.
fn store_entries(objects: &Path, linked: &[String]) -> Result<u64, StoreError> {
    let read = |dir: &Path| -> Result<Vec<(String, bool)>, StoreError> {
        let entries = std::fs::read_dir(dir).map_err(StoreError::io("read", dir))?;
        entries
            .map(|entry| {
                let entry = entry.map_err(StoreError::io("read", dir))?;
                let file_type = entry.file_type();
                let is_dir = file_type
                    .map_err(StoreError::io("read", entry.path()))?
                    .is_dir();
                Ok((entry.file_name().to_string_lossy().into_owned(), is_dir))
            })
            .collect()
    };
    for (name, is_dir) in read(objects)? {
        match (name.as_str(), is_dir) {
            ("pack", true) => {}
            ("info", true) => {
                if let Some((file, _)) = read(&objects.join("info"))?.first() {
                    return Err(Leak::File(Path::new("objects/info").join(file)).into());
                }
            }
            _ => return Err(Leak::Loose(PathBuf::from(name)).into()),
        }
    }
    let wanted: HashSet<&str> = linked.iter().map(String::as_str).collect();
    let (mut entries, mut packs, mut indexes) = (0, 0, 0);
    for (name, _) in read(&objects.join("pack"))? {
        let (stem, ext) = name.rsplit_once('.').unwrap_or((name.as_str(), ""));
        match ext {
            "pack" if wanted.contains(stem) => packs += 1,
            "idx" if wanted.contains(stem) => {
                indexes += 1;
                entries += pack_index_count(&objects.join("pack").join(&name))?;
            }
            _ => return Err(Leak::Pack(PathBuf::from(name)).into()),
        }
    }
    if packs != wanted.len() || indexes != wanted.len() {
        return Err(Leak::PackCount {
            packs,
            indexes,
            wanted: wanted.len(),
        }
        .into());
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_reads_back_and_anything_odd_is_no_manifest() {
        let text = format!(
            "{MANIFEST_MAGIC}\nbase {a}\nhistory full\nhead {a}\nobjects 12\nentries 14\nthin thin-1 9\npack pack-2\n",
            a = "1".repeat(40)
        );
        let store = parse_manifest(&text).expect("a manifest");
        assert_eq!((store.objects, store.entries), (12, 14));
        assert_eq!(
            store.packs,
            [
                StoredPack::Thin {
                    name: "thin-1".to_owned(),
                    entries: 9
                },
                StoredPack::Whole("pack-2".to_owned())
            ]
        );
        // Version 1: whole packs only, as it wrote them.
        let old = text
            .replace(MANIFEST_MAGIC, MANIFEST_MAGIC_1)
            .replace("thin thin-1 9", "pack pack-1");
        assert_eq!(parse_manifest(&old).expect("a manifest").packs.len(), 2);
        for broken in [
            text.replace(MANIFEST_MAGIC, "onebash base store 9"),
            text.replace("objects 12", "objects twelve"),
            text.replace("pack pack-2", "pack ../../elsewhere"),
            text.replace("pack pack-2", "pack thin-2"),
            text.replace("thin thin-1 9", "thin thin-1"),
            text.replace("thin thin-1 9", "thin pack-1 9"),
            text.replace("thin thin-1 9", "thin thin-1/.. 9"),
            text.replace("pack pack-2\n", "pack pack-2\nsomething else\n"),
            text.lines()
                .filter(|l| !l.starts_with("pack") && !l.starts_with("thin"))
                .collect::<Vec<_>>()
                .join("\n"),
        ] {
            assert_eq!(parse_manifest(&broken), None, "{broken}");
        }
    }

    /// `git ARGS` in `dir`, which must work.
    fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@localhost"])
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    #[test]
    fn a_fix_that_failed_is_tried_again_by_the_next_task() {
        let dir = tempfile::tempdir().expect("temp folder");
        let work = dir.path().join("work");
        std::fs::create_dir(&work).expect("mkdir");
        git(&work, &["init", "-q", "-b", "main"]);
        let mut bases = Vec::new();
        for text in ["one\n", "one\ntwo\n"] {
            std::fs::write(work.join("f.txt"), text).expect("write");
            git(&work, &["add", "-A"]);
            git(&work, &["commit", "-q", "-m", text.trim()]);
            bases.push(Oid::from_str(&git(&work, &["rev-parse", "HEAD"])).expect("sha"));
        }
        let mirror = dir.path().join("cache/repos/m.git");
        git(
            dir.path(),
            &[
                "clone",
                "-q",
                "--bare",
                "work",
                &mirror.display().to_string(),
            ],
        );
        let stores = StoreDir::for_mirror(&mirror);
        let planned: HashSet<Oid> = bases.iter().copied().collect();
        let store = stores
            .ensure(&mirror, bases[1], History::Full, &planned)
            .expect("the newer base's store");
        let thin = store.packs[0].clone();
        assert!(matches!(thin, StoredPack::Thin { .. }), "{:?}", store.packs);
        let (fixed, staging) = (FixedPacks::default(), dir.path().join("staging"));
        // The mirror, where the fix reads its bases, is away for a moment.
        let away = dir.path().join("away.git");
        std::fs::rename(&mirror, &away).expect("move the mirror away");
        assert!(fixed.get(&stores, &mirror, &thin, &staging).is_err());
        std::fs::rename(&away, &mirror).expect("put it back");
        let name = fixed
            .get(&stores, &mirror, &thin, &staging)
            .expect("fixed on the second try");
        assert!(staging.join(format!("{name}.idx")).is_file());
        // And remembered from then on.
        let again = fixed.get(&stores, &mirror, &thin, &staging);
        assert_eq!(again.expect("remembered"), name);
    }

    /// A store that cannot be built says in which repository: the mirror
    /// (here one that lost its base's tree), not libgit2's bare words.
    #[test]
    fn a_mirror_missing_an_object_is_named_in_the_store_error() {
        let dir = tempfile::tempdir().expect("temp folder");
        let work = dir.path().join("work");
        std::fs::create_dir(&work).expect("mkdir");
        git(&work, &["init", "-q", "-b", "main"]);
        std::fs::write(work.join("f.txt"), "one\n").expect("write");
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-q", "-m", "one"]);
        let base = Oid::from_str(&git(&work, &["rev-parse", "HEAD"])).expect("sha");
        let tree = git(&work, &["rev-parse", "HEAD^{tree}"]);
        let mirror = dir.path().join("cache/repos/m.git");
        let target = mirror.display().to_string();
        git(dir.path(), &["clone", "-q", "--bare", "work", &target]);
        let loose = mirror.join("objects").join(&tree[..2]).join(&tree[2..]);
        std::fs::remove_file(&loose).expect("the tree is a loose object of the mirror");
        let stores = StoreDir::for_mirror(&mirror);
        let err = stores
            .ensure(&mirror, base, History::None, &HashSet::new())
            .expect_err("a base whose tree is gone");
        let text = err.to_string();
        assert!(matches!(err, StoreError::Git { .. }), "{err:?}");
        assert!(text.contains(&target), "names the mirror: {text}");
        assert!(text.contains(&base.to_string()), "and the commit: {text}");
    }

    #[test]
    fn a_pack_index_that_is_not_one_is_refused() {
        let dir = tempfile::tempdir().expect("temp folder");
        let idx = dir.path().join("pack-x.idx");
        std::fs::write(&idx, b"\xfftOc\0\0\0\x02short").expect("write");
        assert!(pack_index_oids(&idx).is_err());
        std::fs::write(&idx, b"PACK").expect("write");
        assert!(pack_index_oids(&idx).is_err());
    }
}
