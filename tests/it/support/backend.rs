//! The two image backends the container tests run under: `--env podman`,
//! and `--env oci` from the same images written out by `podman save`
//! (docker-archive), so that one test body checks both with the same
//! verdicts and probes. Podman builds every image either way (no registry
//! is reachable here); onebash under `--env oci` never calls it.
//!
//! Owns what differs between the two: whether the backend can run here
//! (skipped with a line under `tool_present`'s rule), the flags naming an
//! image, the shared layer cache of the `oci` runs, and what each leaves
//! behind when something went wrong (a container; a process).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::harness::{Fixture, tool_present};

/// The image `scripts/test-images.sh` builds: Debian bookworm with python3
/// and git.
pub const IMAGE: &str = "onebash-test/base:bookworm";

/// A module of two tests, `podman` and `oci`, each calling `$body` with
/// its backend (skipped, with a line, when the backend cannot run here).
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
            fn oci() {
                if Backend::Oci.ready() {
                    $body(Backend::Oci);
                }
            }
        }
    };
}
pub(crate) use under_each_backend;

/// Podman image tags a test made, removed from the store when dropped,
/// whether the test passed or not.
pub struct ImageTags(pub Vec<String>);

impl Drop for ImageTags {
    fn drop(&mut self) {
        let _ = Command::new("podman")
            .args(["rmi", "-f"])
            .args(&self.0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Where a task's image comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Podman,
    Oci,
}

/// Every backend, for the tests that run under each.
pub const BACKENDS: [Backend; 2] = [Backend::Podman, Backend::Oci];

impl Backend {
    /// `--env`'s word.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Podman => "podman",
            Backend::Oci => "oci",
        }
    }

    /// What run.json records as the sandbox used.
    pub fn sandbox_used(self) -> &'static str {
        match self {
            Backend::Podman => "podman",
            Backend::Oci => "bwrap",
        }
    }

    /// Whether podman and the test image are here (both backends need
    /// them to make images), and bwrap for `oci`; a line says what is
    /// skipped when not.
    pub fn ready(self) -> bool {
        let image_there = Command::new("podman")
            .args(["image", "exists", IMAGE])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if !tool_present(
            image_there,
            &format!("podman with the image {IMAGE}"),
            "install podman and run scripts/test-images.sh",
        ) {
            return false;
        }
        self == Backend::Podman
            || tool_present(
                Command::new("bwrap")
                    .arg("--version")
                    .output()
                    .is_ok_and(|out| out.status.success()),
                "bwrap (for --env oci)",
                "apt-get install bubblewrap",
            )
    }

    /// The flags that run `fixture`'s tasks in the podman image `tag`:
    /// for `oci`, its saved archive (the test image's shared by the test
    /// binary, another's in the fixture, deleted with it), with the
    /// fixture's layer cache linked to the one the test binary shares (so
    /// that the base image's layer is unpacked once, not once a test).
    pub fn image_flags(self, fixture: &Fixture, tag: &str) -> Vec<String> {
        let image = match self {
            Backend::Podman => return podman_flags(tag),
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
            Backend::Podman => assert!(
                podman_containers(&format!("onebash.task={id}")).is_empty(),
                "a container of {id} was left"
            ),
            Backend::Oci => super::processes::assert_no_process_left(&format!("{id}.epoch-")),
        }
    }
}

fn podman_flags(tag: &str) -> Vec<String> {
    ["--env", "podman", "--image", tag, "--pull", "never"]
        .map(str::to_owned)
        .to_vec()
}

/// The ids of every podman container, running or not, with `label` (`k=v`).
pub fn podman_containers(label: &str) -> Vec<String> {
    let output = Command::new("podman")
        .args(["ps", "-a", "-q", "--filter", &format!("label={label}")])
        .output()
        .expect("podman ps");
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .map(str::to_owned)
        .collect()
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
/// processes may race.
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
        let partial = dir.join(format!("{id}.tar.{}", std::process::id()));
        let status = Command::new("podman")
            .args(["save", "-q", "--format", "docker-archive", "-o"])
            .arg(&partial)
            .arg(tag)
            .status()
            .expect("podman save");
        assert!(status.success(), "podman save {tag}");
        std::fs::rename(&partial, &done).expect("rename the saved image");
    }
    done
}
