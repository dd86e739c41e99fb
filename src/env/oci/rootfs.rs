//! An image's root file system, assembled once per image from its
//! unpacked layers without copying their contents:
//! `<cache>/oci/roots/<config hex>/root/` is a tree of real folders whose
//! files and symlinks are hard links to the layers' own (bubblewrap 0.8
//! has no overlay options, and an unprivileged overlayfs is not there on
//! every kernel; hard links need neither), except for the big folders
//! that one layer alone made (`binds.rs` chooses them): those are empty
//! there, and the sandbox binds the layer's own folder over them
//! (`roots/<config hex>/binds.json` lists them), so that each image's
//! root keeps some 70 folders, not Debian's 1,300.
//!
//! Owns the stacking (layers bottom first; a layer's opaque marker
//! `.wh..wh..opq` empties its folder of what lower layers put there, and
//! `.wh.NAME` removes NAME), the mount points bubblewrap needs in a root
//! it mounts read-only (`/tmp`, `/dev`, `/proc`, `/run`, the task's
//! workdir: made here, since bwrap cannot make them in a read-only
//! root), and the lock and atomic rename that let processes share it.
//! The tree is never written once built: the sandbox binds it read-only.
//! Also the copy of a folder of it that a task may change
//! ([`copy_folder`]: the repo an image holds, read through the binds, so
//! that it is whole even where its folders are bound).

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use super::OciError;
use super::binds::{self, OPAQUE, WHITEOUT};
use super::error::CacheFault;
use crate::sys::lock::FileLock;

pub(super) use super::binds::Bind;

/// Mount points every sandbox uses: folders, then files.
const DIRS: [&str; 5] = ["tmp", "dev", "proc", "run", "etc"];
const FILES: [&str; 2] = ["etc/resolv.conf", "etc/hosts"];

fn io_error(what: &Path, err: impl Into<CacheFault>) -> OciError {
    OciError::cache(what, err)
}

/// An image's root: the folder bwrap binds at `/`, then `binds` over it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Root {
    pub dir: PathBuf,
    pub binds: Vec<Bind>,
}

impl Root {
    /// Where the path `rel` of the sandbox's root is on the host: a
    /// folder and the path left under it (in the bind whose target holds
    /// `rel`, the deepest, or else in the root's own tree).
    pub(crate) fn resolve(&self, rel: &Path) -> (PathBuf, PathBuf) {
        let absolute = Path::new("/").join(rel);
        self.binds
            .iter()
            .filter_map(|bind| {
                absolute
                    .strip_prefix(&bind.target)
                    .ok()
                    .map(|rest| (bind, rest.to_path_buf()))
            })
            .max_by_key(|(bind, _)| bind.target.len())
            .map_or_else(
                || (self.dir.clone(), rel.to_path_buf()),
                |(bind, rest)| (bind.source.clone(), rest),
            )
    }

    /// Makes the folder `rel` (a task's workdir) a mount point unless it
    /// is one: in the root's own tree, or, inside a bound layer's folder
    /// (never written), it must be there already.
    pub(crate) fn workdir(&self, rel: &Path) -> Result<(), OciError> {
        let (base, rest) = self.resolve(rel);
        if base == self.dir {
            return mount_point(&base, &rest, true);
        }
        let mut at = base;
        for part in rest.components() {
            at.push(part);
            if fs::symlink_metadata(&at).is_ok_and(|meta| meta.file_type().is_symlink()) {
                return Err(OciError::HostilePath {
                    rel: rel.to_owned(),
                    why: "goes through a symlink",
                });
            }
        }
        if at.is_dir() {
            Ok(())
        } else {
            Err(OciError::NotInImage {
                rel: rel.to_owned(),
            })
        }
    }
}

/// The root of the image `id` (its config's hex digest) from `layers`
/// (bottom first), built unless it is there.
pub(super) fn assemble(oci_dir: &Path, id: &str, layers: &[PathBuf]) -> Result<Root, OciError> {
    let dir = oci_dir.join("roots");
    let done = dir.join(id);
    if let Some(root) = read_root(&done, layers)? {
        return Ok(root);
    }
    fs::create_dir_all(&dir).map_err(|err| io_error(&dir, err))?;
    let lock_path = dir.join(format!("{id}.lock"));
    let _lock = FileLock::acquire(&lock_path).map_err(|err| io_error(&lock_path, err))?;
    if let Some(root) = read_root(&done, layers)? {
        return Ok(root);
    }
    let partial = dir.join(format!("{id}.partial"));
    if partial.exists() {
        fs::remove_dir_all(&partial).map_err(|err| io_error(&partial, err))?;
    }
    let tree = partial.join("root");
    fs::create_dir_all(&tree).map_err(|err| io_error(&tree, err))?;
    let built = (|| {
        // The binds first, reading the layers alone, so that a folder
        // bound from a layer is never made and unmade; the mount points'
        // folders are always made.
        let planned = binds::plan(layers, &DIRS).map_err(|err| io_error(&tree, err))?;
        let bound = planned.paths();
        for layer in layers {
            stack(layer, &tree, Path::new(""), &bound).map_err(|err| io_error(layer, err))?;
        }
        for rel in DIRS {
            mount_point(&tree, Path::new(rel), true)?;
        }
        for rel in FILES {
            mount_point(&tree, Path::new(rel), false)?;
        }
        planned.write(&partial.join("binds.json"))
    })();
    if let Err(err) = built {
        let _ = fs::remove_dir_all(&partial);
        return Err(err);
    }
    fs::rename(&partial, &done).map_err(|err| io_error(&done, err))?;
    read_root(&done, layers)?.ok_or(OciError::Vanished { path: done })
}

/// A root built before, if `done` is one.
fn read_root(done: &Path, layers: &[PathBuf]) -> Result<Option<Root>, OciError> {
    Ok(
        binds::read(&done.join("binds.json"), layers)?.map(|binds| Root {
            dir: done.join("root"),
            binds,
        }),
    )
}

/// Removes whatever is at `path`, without following a symlink.
fn remove(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(err),
    }
}

/// Puts one layer's folder `src` over the tree `dst` (`rel` in the
/// root); a folder of `bound` is made empty, for its bind.
fn stack(src: &Path, dst: &Path, rel: &Path, bound: &HashSet<PathBuf>) -> io::Result<()> {
    let mut names: Vec<(std::ffi::OsString, fs::FileType)> = Vec::new();
    for entry in fs::read_dir(src)? {
        let entry = entry?;
        names.push((entry.file_name(), entry.file_type()?));
    }
    // What lower layers put here goes first: the opaque marker empties the
    // folder, a whiteout removes its one name.
    if names.iter().any(|(name, _)| name == OPAQUE) {
        for entry in fs::read_dir(dst)? {
            remove(&entry?.path())?;
        }
    }
    for (name, _) in &names {
        // `.wh..` would name the folder above: never a file of this one.
        if let Some(hidden) = name.to_str().and_then(|n| n.strip_prefix(WHITEOUT))
            && name != OPAQUE
            && !matches!(hidden, "" | "." | "..")
        {
            remove(&dst.join(hidden))?;
        }
    }
    for (name, kind) in names {
        if name.to_str().is_some_and(|n| n.starts_with(WHITEOUT)) {
            continue;
        }
        let (from, to) = (src.join(&name), dst.join(&name));
        if kind.is_dir() {
            match fs::symlink_metadata(&to) {
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => {
                    fs::remove_file(&to)?;
                    fs::create_dir(&to)?;
                }
                Err(_) => fs::create_dir(&to)?,
            }
            let path = rel.join(&name);
            if bound.contains(&path) {
                continue;
            }
            fs::set_permissions(&to, fs::metadata(&from)?.permissions())?;
            stack(&from, &to, &path, bound)?;
        } else {
            remove(&to)?;
            link_or_copy(&from, &to, kind)?;
        }
    }
    Ok(())
}

/// A hard link, or a copy when the file has as many links as the file
/// system allows (EMLINK: ext4 stops at 65000).
fn link_or_copy(from: &Path, to: &Path, kind: fs::FileType) -> io::Result<()> {
    match fs::hard_link(from, to) {
        Err(err) if err.raw_os_error() == Some(libc::EMLINK) => {
            if kind.is_symlink() {
                std::os::unix::fs::symlink(fs::read_link(from)?, to)
            } else {
                fs::copy(from, to).map(|_| ())
            }
        }
        other => other,
    }
}

/// Makes `rel` (a folder when `dir`, else an empty file) in `root` unless
/// it is there, going through no symlink: bubblewrap mounts over it. A
/// symlink where a mount point goes is refused (bwrap would follow it).
pub(super) fn mount_point(root: &Path, rel: &Path, dir: bool) -> Result<(), OciError> {
    let refuse = |why: &'static str| OciError::HostilePath {
        rel: rel.to_owned(),
        why,
    };
    let mut at = root.to_path_buf();
    let parts: Vec<Component> = rel.components().collect();
    for (i, part) in parts.iter().enumerate() {
        let Component::Normal(part) = part else {
            return Err(refuse("is not a plain path"));
        };
        at.push(part);
        let last = i + 1 == parts.len();
        match fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(refuse("goes through a symlink"));
            }
            Ok(meta) if meta.is_dir() == (dir || !last) => {}
            Ok(_) => return Err(refuse("is not a folder")),
            Err(_) if !last || dir => match fs::create_dir(&at) {
                Err(err) if err.kind() != io::ErrorKind::AlreadyExists => {
                    return Err(io_error(&at, err));
                }
                _ => {}
            },
            Err(_) => {
                fs::File::options()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(&at)
                    .map_err(|err| io_error(&at, err))?;
            }
        }
    }
    Ok(())
}

/// Copies the folder `rel` of the image root `root` (the repo an image
/// holds at its workdir) to `to`, made here: a task's own copy, which
/// its commands may change as they like while the root's files, links to
/// the layer cache's, never change. Files are copied (`fs::copy`, which
/// the kernel may do as a reflink), symlinks made again as they are (they
/// resolve inside the sandbox), folders made writable by their owner so
/// that the copy can be deleted. `rel` going through a symlink of the
/// image is refused, as for a mount point: the copy would leave the root.
///
/// The copy is read as the sandbox sees the image, through the binds: a
/// folder under `rel` that `binds.rs` chose to bind (an image's repo comes
/// in one layer, so its `.git`, tests and docs are big one-layer folders)
/// is an empty mount point in the root's own tree, and is copied from the
/// layer's folder instead. The binds are not planned around the workdir
/// because the root is one image's, shared by every task and run, while
/// the workdir is a task's (`--workdir`, a task's `workdir`); and the
/// binds under it never show, since the copy is bound over the workdir.
/// So roots made before this read the same way (no cache change).
pub(super) fn copy_folder(root: &Root, rel: &Path, to: &Path) -> Result<(), OciError> {
    let (mut from, rest) = root.resolve(rel);
    for part in rest.components() {
        let Component::Normal(part) = part else {
            return Err(OciError::HostilePath {
                rel: rel.to_owned(),
                why: "is not a plain path",
            });
        };
        from.push(part);
        if fs::symlink_metadata(&from).is_ok_and(|meta| meta.file_type().is_symlink()) {
            return Err(OciError::HostilePath {
                rel: rel.to_owned(),
                why: "goes through a symlink",
            });
        }
    }
    if !from.is_dir() {
        return Err(OciError::NoFolder {
            rel: rel.to_owned(),
        });
    }
    let top = Path::new("/").join(rel);
    let bound: HashMap<PathBuf, &Path> = root
        .binds
        .iter()
        .filter_map(|bind| {
            let under = Path::new(&bind.target).strip_prefix(&top).ok()?;
            (!under.as_os_str().is_empty()).then(|| (under.to_path_buf(), bind.source.as_path()))
        })
        .collect();
    copy_tree(&from, to, Path::new(""), &bound).map_err(|source| OciError::Copy {
        to: to.to_owned(),
        source,
    })
}

/// Copies `from` to `to`, the folder `rel` of the copy; a folder of
/// `bound` (by its path in the copy) from its layer's folder.
fn copy_tree(
    from: &Path,
    to: &Path,
    rel: &Path,
    bound: &HashMap<PathBuf, &Path>,
) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::create_dir(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if kind.is_dir() {
            let path = rel.join(entry.file_name());
            let src = bound.get(&path).map_or(src, |layer| layer.to_path_buf());
            copy_tree(&src, &dst, &path, bound)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&src)?, &dst)?;
        } else if kind.is_file() {
            fs::copy(&src, &dst)?;
        }
        // Nothing else is in the cache: layers.rs skips device nodes and
        // fifos.
    }
    let mode = fs::metadata(from)?.permissions().mode() | 0o700;
    fs::set_permissions(to, fs::Permissions::from_mode(mode))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::oci::binds::BIND_FROM;
    use std::os::unix::fs::MetadataExt;

    fn write(root: &Path, rel: &str, body: &str) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(path, body).expect("write");
    }

    #[test]
    fn layers_stack_with_whiteouts_and_opaque_folders_without_copying() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (lower, upper) = (dir.path().join("l1"), dir.path().join("l2"));
        write(&lower, "etc/keep", "lower");
        write(&lower, "etc/gone", "lower");
        write(&lower, "opt/old/a", "lower");
        write(&lower, "var/replaced", "lower");
        write(&upper, "etc/.wh.gone", "");
        write(&upper, "opt/old/.wh..wh..opq", "");
        write(&upper, "opt/old/b", "upper");
        write(&upper, "var/replaced", "upper");
        write(&upper, "etc/.wh...", "");
        let root = assemble(
            &dir.path().join("oci"),
            "img",
            &[lower.clone(), upper.clone()],
        )
        .expect("assemble");
        // Small folders: all made, none bound.
        assert_eq!(root.binds, Vec::new());
        let tree = &root.dir;
        let read = |rel: &str| fs::read_to_string(tree.join(rel)).ok();
        assert_eq!(read("etc/keep").as_deref(), Some("lower"));
        assert_eq!(read("etc/gone"), None);
        assert_eq!(read("opt/old/a"), None);
        assert_eq!(read("opt/old/b").as_deref(), Some("upper"));
        assert_eq!(read("var/replaced").as_deref(), Some("upper"));
        assert!(!tree.join("etc/.wh.gone").exists() && !tree.join("opt/old/.wh..wh..opq").exists());
        // The same inode: a link, not a copy.
        let ino = |p: &Path| fs::metadata(p).expect("meta").ino();
        assert_eq!(ino(&tree.join("etc/keep")), ino(&lower.join("etc/keep")));
        // The mount points a read-only root needs.
        for rel in ["tmp", "proc", "dev", "run"] {
            assert!(tree.join(rel).is_dir(), "{rel}");
        }
        assert!(tree.join("etc/resolv.conf").is_file());
        // A whiteout of `..` removes nothing above its folder.
        assert!(tree.join("etc/keep").exists());
        // Built once: a second call finds it.
        fs::remove_dir_all(&lower).expect("rm");
        assert_eq!(
            assemble(&dir.path().join("oci"), "img", &[lower]).expect("again"),
            root
        );
    }

    #[test]
    fn a_mount_point_is_never_made_through_a_symlink() {
        let dir = tempfile::tempdir().expect("tempdir");
        let outside = dir.path().join("outside");
        fs::create_dir(&outside).expect("mkdir");
        let root = dir.path().join("root");
        fs::create_dir(&root).expect("mkdir");
        std::os::unix::fs::symlink(&outside, root.join("testbed")).expect("symlink");
        let err = mount_point(&root, Path::new("testbed/sub"), true).expect_err("refused");
        assert!(err.to_string().contains("symlink"), "{err}");
        assert!(!outside.join("sub").exists());
        mount_point(&root, Path::new("work/deep"), true).expect("made");
        assert!(root.join("work/deep").is_dir());
    }

    #[test]
    fn a_copied_folder_is_the_task_s_own_and_never_leaves_the_root() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("root");
        write(&root, "testbed/.git/HEAD", "ref\n");
        write(&root, "testbed/src/a.py", "a\n");
        std::os::unix::fs::symlink("/etc/passwd", root.join("testbed/link")).expect("symlink");
        let ro = root.join("testbed/src");
        fs::set_permissions(&ro, fs::Permissions::from_mode(0o555)).expect("chmod");
        let copy = dir.path().join("copy");
        let image = Root {
            dir: root.clone(),
            binds: Vec::new(),
        };
        copy_folder(&image, Path::new("testbed"), &copy).expect("copy");
        assert_eq!(
            fs::read_to_string(copy.join("src/a.py")).ok().as_deref(),
            Some("a\n")
        );
        assert_eq!(
            fs::read_link(copy.join("link")).expect("link"),
            Path::new("/etc/passwd")
        );
        // A copy, not a link: writing it leaves the root's file alone.
        let ino = |p: &Path| fs::metadata(p).expect("meta").ino();
        assert_ne!(ino(&copy.join("src/a.py")), ino(&ro.join("a.py")));
        fs::write(copy.join("src/a.py"), "changed").expect("write the copy");
        assert_eq!(
            fs::read_to_string(ro.join("a.py")).ok().as_deref(),
            Some("a\n")
        );
        // Its folders can be emptied, even those the image had read-only.
        fs::remove_dir_all(&copy).expect("rm");
        fs::set_permissions(&ro, fs::Permissions::from_mode(0o755)).expect("chmod");

        let outside = dir.path().join("outside");
        fs::create_dir(&outside).expect("mkdir");
        std::os::unix::fs::symlink(&outside, root.join("work")).expect("symlink");
        let err =
            copy_folder(&image, Path::new("work"), &dir.path().join("c2")).expect_err("refused");
        assert!(err.to_string().contains("symlink"), "{err}");
        let err =
            copy_folder(&image, Path::new("nowhere"), &dir.path().join("c3")).expect_err("none");
        assert!(err.to_string().contains("has no folder /nowhere"), "{err}");
    }

    #[test]
    fn a_big_folder_of_one_layer_is_bound_from_it_not_made() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (base, upper) = (dir.path().join("base"), dir.path().join("upper"));
        for i in 0..BIND_FROM {
            write(&base, &format!("usr/share/d{i}/f"), "base");
            write(&base, &format!("lib/m{i}/f"), "base");
            write(&base, &format!("var/v{i}/f"), "base");
            write(&upper, &format!("big/b{i}/f"), "upper");
        }
        write(&base, "etc/conf", "base");
        write(&upper, "usr/local/bin/tool", "upper");
        // A whiteout makes its folder (and those above) the work of two
        // layers; one inside a folder of one layer would show through.
        write(&upper, "var/.wh.v0", "");
        write(&upper, "big/b0/.wh.nothing", "");
        let oci = dir.path().join("oci");
        let root = assemble(&oci, "img", &[base.clone(), upper.clone()]).expect("assemble");
        let mut targets: Vec<&str> = root.binds.iter().map(|b| b.target.as_str()).collect();
        targets.sort_unstable();
        assert_eq!(targets, ["/lib", "/usr/share"]);
        let share = root
            .binds
            .iter()
            .find(|b| b.target == "/usr/share")
            .expect("share");
        assert_eq!(share.source, base.join("usr/share"));
        // The bound folders are empty mount points; the rest is made.
        assert_eq!(
            fs::read_dir(root.dir.join("usr/share"))
                .expect("dir")
                .count(),
            0
        );
        assert!(root.dir.join("usr/local/bin/tool").is_file());
        assert!(!root.dir.join("var/v0").exists() && root.dir.join("var/v1/f").is_file());
        assert!(
            root.dir.join("big/b1/f").is_file() && !root.dir.join("big/b0/.wh.nothing").exists()
        );
        // Paths resolve through the binds; the workdir is made only in the
        // root's own tree, and never inside a layer.
        assert_eq!(
            root.resolve(Path::new("usr/share/d1/f")),
            (base.join("usr/share"), PathBuf::from("d1/f"))
        );
        assert_eq!(
            root.resolve(Path::new("usr/local")),
            (root.dir.clone(), PathBuf::from("usr/local"))
        );
        root.workdir(Path::new("usr/share/d1")).expect("there");
        root.workdir(Path::new("testbed")).expect("made");
        assert!(root.dir.join("testbed").is_dir());
        let err = root.workdir(Path::new("lib/nope")).expect_err("not made");
        assert!(err.to_string().contains("hint:"), "{err}");
        assert!(!base.join("lib/nope").exists());
        let copy = dir.path().join("copy");
        copy_folder(&root, Path::new("usr/share"), &copy).expect("copy");
        assert!(copy.join("d3/f").is_file());
        // Built once: the binds are read back.
        assert_eq!(assemble(&oci, "img", &[base, upper]).expect("again"), root);
    }

    #[test]
    fn a_repo_of_one_layer_is_copied_whole_though_its_big_folders_are_bound() {
        use std::os::unix::fs::PermissionsExt;
        // As a real image has it: one layer makes /testbed (a WORKDIR, a
        // mkdir), the next one puts the whole repo in it, so `.git`, the
        // tests and the docs are big folders of one layer, bound, and
        // empty in the root's own tree.
        let dir = tempfile::tempdir().expect("tempdir");
        let (base, made, repo) = (
            dir.path().join("base"),
            dir.path().join("made"),
            dir.path().join("repo"),
        );
        write(&base, "etc/conf", "base");
        fs::create_dir_all(made.join("testbed")).expect("mkdir");
        write(&repo, "testbed/.git/HEAD", "ref: refs/heads/main\n");
        write(&repo, "testbed/calc.py", "def add(a, b): return a - b\n");
        for i in 0..BIND_FROM {
            write(&repo, &format!("testbed/.git/objects/0{i}/obj"), "blob");
            write(&repo, &format!("testbed/tests/t{i}/test_x.py"), "test");
            write(&repo, &format!("testbed/docs/d{i}/index.rst"), "doc");
        }
        let ro = repo.join("testbed/docs/d0");
        fs::set_permissions(&ro, fs::Permissions::from_mode(0o555)).expect("chmod");
        let root = assemble(&dir.path().join("oci"), "img", &[base, made, repo.clone()])
            .expect("assemble");
        let mut targets: Vec<&str> = root.binds.iter().map(|b| b.target.as_str()).collect();
        targets.sort_unstable();
        assert_eq!(
            targets,
            ["/testbed/.git", "/testbed/docs", "/testbed/tests"]
        );
        assert_eq!(
            fs::read_dir(root.dir.join("testbed/.git"))
                .expect("dir")
                .count(),
            0
        );

        let copy = dir.path().join("copy");
        copy_folder(&root, Path::new("testbed"), &copy).expect("copy");
        let read = |rel: &str| fs::read_to_string(copy.join(rel)).ok();
        assert_eq!(
            read("calc.py").as_deref(),
            Some("def add(a, b): return a - b\n")
        );
        assert_eq!(read(".git/HEAD").as_deref(), Some("ref: refs/heads/main\n"));
        for i in 0..BIND_FROM {
            assert_eq!(
                read(&format!(".git/objects/0{i}/obj")).as_deref(),
                Some("blob")
            );
            assert_eq!(
                read(&format!("tests/t{i}/test_x.py")).as_deref(),
                Some("test")
            );
            assert_eq!(
                read(&format!("docs/d{i}/index.rst")).as_deref(),
                Some("doc")
            );
        }
        // The task's own and writable, the layer's files left as they are.
        fs::write(copy.join("tests/t1/test_x.py"), "changed").expect("write the copy");
        fs::write(copy.join("docs/d0/new.rst"), "new").expect("write in a read-only folder");
        assert_eq!(
            fs::read_to_string(repo.join("testbed/tests/t1/test_x.py"))
                .ok()
                .as_deref(),
            Some("test")
        );
        fs::remove_dir_all(&copy).expect("rm");
        fs::set_permissions(&ro, fs::Permissions::from_mode(0o755)).expect("chmod");
    }
}
