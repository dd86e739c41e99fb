//! The image backends the container tests run under: `--env podman`;
//! `--env docker`, against a real daemon, from the same images moved into
//! its store by `podman save | docker load`; and `--env oci` from the same
//! images written out by `podman save` (docker-archive), so that one test
//! body checks each with the same verdicts and probes. Podman builds every
//! image either way (no registry is reachable here); onebash under
//! `--env docker` or `--env oci` never calls it.
//!
//! Owns what differs between them: whether the backend can run here
//! (skipped with a line under `tool_present`'s rule), the flags naming an
//! image, the images docker is given and the shared layer cache of the
//! `oci` runs, and what each leaves behind when something went wrong (a
//! container; a process).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::harness::{Fixture, tool_present};

/// The image `scripts/test-images.sh` builds: Debian bookworm with python3
/// and git.
pub const IMAGE: &str = "onebash-test/base:bookworm";

/// A module of three tests, `podman`, `docker` and `oci`, each calling
/// `$body` with its backend (skipped, with a line, when the backend cannot
/// run here).
macro_rules! under_each_backend {
    ($name:ident, $body:path) => {
        mod $name {
            use crate::support::backend::Backend;

            #[test]
            fn podman() {
                if Backend::Podman.ready() {
                    $body(Backend::Podman);
                }
            }

            #[test]
            fn docker() {
                if Backend::Docker.ready() {
                    $body(Backend::Docker);
                }
            }

            #[test]
            fn oci() {
                if Backend::Oci.ready() {
                    $body(Backend::Oci);
                }
            }
        }
    };
}
pub(crate) use under_each_backend;

/// A module of two tests, `podman` and `docker`: what only a container
/// engine does (its containers' sweep, a timeout's kill inside the
/// container, its image store, its builds).
macro_rules! under_each_engine {
    ($name:ident, $body:path) => {
        mod $name {
            use crate::support::backend::Backend;

            #[test]
            fn podman() {
                if Backend::Podman.ready() {
                    $body(Backend::Podman);
                }
            }

            #[test]
            fn docker() {
                if Backend::Docker.ready() {
                    $body(Backend::Docker);
                }
            }
        }
    };
}
pub(crate) use under_each_engine;

/// Image tags a test made (by podman, or by onebash under an engine),
/// removed when dropped, whether the test passed or not: from podman's
/// store, and docker's copies from docker's. The tags must be the test's
/// own: `podman rmi -f` removes every container of the image too, in any
/// process, so a tag another test also uses (a task folder's image is
/// tagged by its content: see [`image_nonce`]) takes that test's live
/// container from under it.
pub struct ImageTags(pub Vec<String>);

/// A word no other test (in this process or another) has, for a Dockerfile
/// line (`LABEL onebash.test-nonce="..."`) that makes the image built from
/// it the test's own: onebash tags a Harbor task folder's image by its
/// environment's content, so two tests with the same folder (a test's
/// podman and docker variants, or one test run by two processes at once)
/// would share one tag, and the first to end would remove it, and the
/// other's running container with it.
pub fn image_nonce() -> String {
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let count = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    format!("{}-{now}-{count}", std::process::id())
}

impl Drop for ImageTags {
    fn drop(&mut self) {
        let _ = Command::new("podman")
            .args(["rmi", "-f"])
            .args(&self.0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        for tag in &self.0 {
            // Under the lock of its image id: a test loading the same
            // image must not see it present, then lose it before its tag.
            if let Some(id) = image_id("docker", tag) {
                let _loading = docker_lock(&id);
                let _ = quiet("docker", &["rmi", tag]);
            }
        }
    }
}

/// Where a task's image comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Podman,
    Docker,
    Oci,
}

/// Every backend, for the tests that run under each.
pub const BACKENDS: [Backend; 3] = [Backend::Podman, Backend::Docker, Backend::Oci];

impl Backend {
    /// `--env`'s word.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Podman => "podman",
            Backend::Docker => "docker",
            Backend::Oci => "oci",
        }
    }

    /// The container engine's program, for the backends that are one.
    pub fn engine(self) -> Option<&'static str> {
        match self {
            Backend::Podman => Some("podman"),
            Backend::Docker => Some("docker"),
            Backend::Oci => None,
        }
    }

    /// What run.json records as the sandbox used.
    pub fn sandbox_used(self) -> &'static str {
        match self {
            Backend::Podman => "podman",
            Backend::Docker => "docker",
            Backend::Oci => "bwrap",
        }
    }

    /// Whether podman and the test image are here (every backend needs
    /// them to make images), and a docker daemon that answers for
    /// `docker` (the test image then loaded into its store), bwrap for
    /// `oci`; a line says what is skipped when not.
    pub fn ready(self) -> bool {
        let image_there = quiet("podman", &["image", "exists", IMAGE]);
        if !tool_present(
            image_there,
            &format!("podman with the image {IMAGE}"),
            "install podman and run scripts/test-images.sh",
        ) {
            return false;
        }
        match self {
            Backend::Podman => true,
            Backend::Docker => {
                let answers = tool_present(
                    quiet("docker", &["info"]),
                    "a docker daemon (for --env docker)",
                    "apt-get install docker.io and start dockerd",
                );
                if answers {
                    in_docker(IMAGE);
                }
                answers
            }
            Backend::Oci => tool_present(
                quiet("bwrap", &["--version"]),
                "bwrap (for --env oci)",
                "apt-get install bubblewrap",
            ),
        }
    }

    /// The flags that run `fixture`'s tasks in the podman image `tag`:
    /// for `docker`, the same image given to docker's store; for `oci`,
    /// its saved archive (the test image's shared by the test
    /// binary, another's in the fixture, deleted with it), with the
    /// fixture's layer cache linked to the one the test binary shares (so
    /// that the base image's layer is unpacked once, not once a test).
    pub fn image_flags(self, fixture: &Fixture, tag: &str) -> Vec<String> {
        let image = match self {
            Backend::Podman | Backend::Docker => return self.engine_flags(tag),
            Backend::Oci => {
                let dir = if tag == IMAGE {
                    shared().join("images")
                } else {
                    fixture.path("saved")
                };
                format!("docker-archive:{}", saved(tag, &dir).display())
            }
        };
        share_layer_cache(fixture);
        ["--env", "oci", "--image", &image]
            .map(str::to_owned)
            .to_vec()
    }

    /// Fails when what the task `id` ran is left: a container labelled
    /// with it, or a process whose command line names it (bwrap's binds
    /// name the task's folder).
    pub fn assert_nothing_left_of(self, id: &str) {
        match self {
            Backend::Podman | Backend::Docker => assert!(
                self.containers(&format!("onebash.task={id}")).is_empty(),
                "a {} container of {id} was left",
                self.name()
            ),
            Backend::Oci => super::processes::assert_no_process_left(&format!("{id}.epoch-")),
        }
    }
}

impl Backend {
    /// `--env podman|docker` in the image `tag`, which docker is given
    /// first.
    fn engine_flags(self, tag: &str) -> Vec<String> {
        if self == Backend::Docker {
            in_docker(tag);
        }
        self.flags_in_store(tag)
    }

    /// `--env podman|docker` in `image` (a tag, or an `--image` template
    /// whose tags the engine's store holds already), and never a pull (no
    /// registry answers here).
    pub fn flags_in_store(self, image: &str) -> Vec<String> {
        ["--env", self.name(), "--image", image, "--pull", "never"]
            .map(str::to_owned)
            .to_vec()
    }

    /// The ids of every container of this engine, running or not, with
    /// `label` (`k=v`).
    pub fn containers(self, label: &str) -> Vec<String> {
        let engine = self.engine().expect("a container engine");
        let output = Command::new(engine)
            .args(["ps", "-a", "-q", "--filter", &format!("label={label}")])
            .output()
            .unwrap_or_else(|err| panic!("{engine} ps: {err}"));
        assert!(
            output.status.success(),
            "{engine} ps: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout)
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    }

    /// The labels of the running container of this engine labelled
    /// `label`, as JSON (`{"k":"v",...}`; empty when there is none):
    /// through `inspect`, whose template reads the same on both engines.
    pub fn running_labels(self, label: &str) -> String {
        let engine = self.engine().expect("a container engine");
        let listed = Command::new(engine)
            .args(["ps", "-q", "--filter", &format!("label={label}")])
            .output()
            .unwrap_or_else(|err| panic!("{engine} ps: {err}"));
        let ids: Vec<String> = String::from_utf8_lossy(&listed.stdout)
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        if ids.is_empty() {
            return String::new();
        }
        let output = Command::new(engine)
            .args(["inspect", "--format", "{{json .Config.Labels}}"])
            .args(&ids)
            .output()
            .unwrap_or_else(|err| panic!("{engine} inspect: {err}"));
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}

/// The ids of every podman container, running or not, with `label` (`k=v`).
pub fn podman_containers(label: &str) -> Vec<String> {
    Backend::Podman.containers(label)
}

/// Whether `program args` succeeds, its output discarded.
fn quiet(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// The id of the image `tag` in `engine`'s store, if it has one.
fn image_id(engine: &str, tag: &str) -> Option<String> {
    let output = Command::new(engine)
        .args(["image", "inspect", "--format", "{{.Id}}", tag])
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|output| output.status.success())?;
    let id = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    // docker says `sha256:<hex>`, podman `<hex>`.
    let id = id.strip_prefix("sha256:").unwrap_or(&id).to_owned();
    (!id.is_empty()).then_some(id)
}

/// The lock of one image id in docker's store, shared by the test threads
/// and processes that load, tag or remove it.
fn docker_lock(id: &str) -> onebash::sys::lock::FileLock {
    let dir = shared().join("docker");
    std::fs::create_dir_all(&dir).expect("mkdir the docker locks");
    onebash::sys::lock::FileLock::acquire(&dir.join(format!("{id}.lock")))
        .expect("lock the image id")
}

/// Gives docker podman's image `tag` under the same name: `podman save |
/// docker load` when docker has no image of its id (the ids are the same:
/// both are the digest of the image's config), so that an image is loaded
/// once, not once a test; then tagged, since a load names an image as
/// podman does (`onebash-test/base` is `localhost/onebash-test/base`).
pub fn in_docker(tag: &str) {
    let id = image_id("podman", tag).unwrap_or_else(|| panic!("podman has no image {tag}"));
    let _loading = docker_lock(&id);
    if image_id("docker", &id).is_none() {
        let mut save = Command::new("podman")
            .args(["save", "-q", "--format", "docker-archive", tag])
            .stdout(Stdio::piped())
            .spawn()
            .expect("podman save");
        let archive = save.stdout.take().expect("podman save's stdout");
        let loaded = Command::new("docker")
            .args(["load", "-q"])
            .stdin(archive)
            .output()
            .expect("docker load");
        let saved = save.wait().expect("wait for podman save");
        assert!(
            saved.success() && loaded.status.success(),
            "podman save {tag} | docker load: {}",
            String::from_utf8_lossy(&loaded.stderr)
        );
    }
    let tagged = Command::new("docker")
        .args(["tag", &id, tag])
        .output()
        .expect("docker tag");
    assert!(
        tagged.status.success(),
        "docker tag {id} {tag}: {}",
        String::from_utf8_lossy(&tagged.stderr)
    );
}

/// Where this test binary keeps what its `oci` runs share: saved images
/// and a layer cache (shared by tests running at once, which the cache's
/// locks are for).
pub fn shared() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("oci")
}

/// Makes `<fixture cache>/oci` the shared layer cache.
fn share_layer_cache(fixture: &Fixture) {
    let cache = fixture.path("cache");
    std::fs::create_dir_all(&cache).expect("mkdir cache");
    let shared = shared().join("cache/oci");
    std::fs::create_dir_all(&shared).expect("mkdir shared cache");
    let link = cache.join("oci");
    if std::fs::symlink_metadata(&link).is_err() {
        std::os::unix::fs::symlink(&shared, &link).expect("link the shared cache");
    }
}

/// `podman save --format docker-archive` of `tag` into `dir`, once per
/// image id: written to a temporary name, then renamed, since other test
/// threads and processes may race.
pub fn saved(tag: &str, dir: &Path) -> PathBuf {
    let inspected = Command::new("podman")
        .args(["image", "inspect", "--format", "{{.Id}}", tag])
        .output()
        .expect("podman image inspect");
    assert!(inspected.status.success(), "no image {tag}");
    let id = String::from_utf8_lossy(&inspected.stdout).trim().to_owned();
    std::fs::create_dir_all(dir).expect("mkdir");
    let done = dir.join(format!("{id}.tar"));
    if !done.exists() {
        // A name of this thread's own: the tests of one process race too.
        static SAVES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let partial = dir.join(format!(
            "{id}.tar.{}-{}",
            std::process::id(),
            SAVES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let saved = Command::new("podman")
            .args(["save", "-q", "--format", "docker-archive", "-o"])
            .arg(&partial)
            .arg(tag)
            .output()
            .expect("podman save");
        assert!(
            saved.status.success(),
            "podman save {tag}: {}",
            String::from_utf8_lossy(&saved.stderr)
        );
        std::fs::rename(&partial, &done).expect("rename the saved image");
    }
    done
}
