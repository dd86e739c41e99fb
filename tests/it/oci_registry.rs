//! `--env oci` images from a registry: pulled by `onebash pull` (and by
//! `run` before any task) from a scripted registry on 127.0.0.1
//! (support/registry.rs) that the tests fill with images built by hand:
//! the Bearer token flow and docker config credentials, a multi-arch
//! index, what `--pull` keeps, and the hostile cases (a blob that lies
//! about its digest, a layer that climbs out, a missing image, a
//! connection cut mid-blob, onebash killed mid-download). None needs
//! bwrap, podman or a network.
//!
//! The last test pulls `scripts/test-images.sh`'s image from a real
//! registry (Debian's docker-registry, which `scripts/test-registry.sh`
//! starts and pushes to) and runs a task in it end to end; it is skipped
//! with a line when that registry is not there, and fails when `CI` is
//! set.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::json;

use crate::support::backend::{Backend, under_each_engine};
use crate::support::harness::{Fixture, onebash, scripted_agent, task, tool_answers};
use crate::support::registry::{
    Auth, Built, DOCKER_MANIFEST, Fault, OCI_INDEX, OCI_MANIFEST, Registry, digest, entry, file,
    layer,
};
use crate::support::sync::{Latch, eventually};

/// A task file, a cache, and a home of its own (no credentials of the
/// machine's user are read).
struct World {
    fixture: Fixture,
    tasks: PathBuf,
}

impl World {
    fn new() -> World {
        let fixture = Fixture::new();
        let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
        let tasks = fixture.tasks(&[task("t1", &repo, &sha, "true", json!({}))]);
        for dir in ["home", "docker", "run"] {
            std::fs::create_dir_all(fixture.path(dir)).expect("mkdir");
        }
        World { fixture, tasks }
    }

    fn cache(&self) -> PathBuf {
        self.fixture.path("cache")
    }

    fn oci(&self) -> PathBuf {
        self.cache().join("oci")
    }

    fn command(&self, subcommand: &str, image: &str) -> Command {
        let mut command = onebash();
        command
            .arg(subcommand)
            .arg(&self.tasks)
            .args(["--env", "oci", "--image", image, "--cache-dir"])
            .arg(self.cache())
            .env("HOME", self.fixture.path("home"))
            .env("DOCKER_CONFIG", self.fixture.path("docker"))
            .env("XDG_RUNTIME_DIR", self.fixture.path("run"))
            .env_remove("REGISTRY_AUTH_FILE");
        command
    }

    fn pull(&self, image: &str, extra: &[&str]) -> Output {
        self.command("pull", image)
            .args(extra)
            .output()
            .expect("run onebash pull")
    }

    /// `onebash pull` started, its output dropped.
    fn spawn_pull(&self, image: &str, extra: &[&str]) -> std::process::Child {
        self.command("pull", image)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn onebash pull")
    }

    /// Writes the docker config with `user:password` for `host`.
    fn login(&self, host: &str, pair: &str) {
        use base64::Engine as _;
        let auth = base64::engine::general_purpose::STANDARD.encode(pair);
        let config = json!({"auths": {host: {"auth": auth}}});
        std::fs::write(self.fixture.path("docker/config.json"), config.to_string())
            .expect("write the docker config");
    }

    /// The unpacked layer of `diff_id`, if whole.
    fn layer(&self, diff_id: &str) -> PathBuf {
        self.oci().join("layers").join(hex(diff_id))
    }

    /// Where a layer's blob is kept until unpacked.
    fn blob(&self, digest: &str) -> PathBuf {
        self.oci().join("blobs/sha256").join(hex(digest))
    }

    /// Every `.partial` left in the cache.
    fn partials(&self) -> Vec<PathBuf> {
        let mut found = Vec::new();
        for dir in ["layers", "blobs/sha256"] {
            if let Ok(entries) = std::fs::read_dir(self.oci().join(dir)) {
                for entry in entries.flatten() {
                    if entry.file_name().to_string_lossy().ends_with(".partial") {
                        found.push(entry.path());
                    }
                }
            }
        }
        found
    }
}

fn hex(digest: &str) -> &str {
    digest.strip_prefix("sha256:").expect("a sha256 digest")
}

fn text(output: &Output) -> (i32, String, String) {
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The anonymous Bearer flow: a 401 names the realm, service and scope;
/// the token is asked without credentials and sent back. The layer is
/// unpacked whole, its blob gone; then `--pull missing` asks nothing,
/// `--pull always` asks the tag again but fetches no blob, and `--pull
/// never` works with the registry gone, but not on an empty cache.
/// `run --dry-run --env oci`: an image the cache lacks is "to pull", its
/// digest asked of the registry with a HEAD, nothing fetched or written;
/// once pulled, it is present (a manifest in the cache alone would not
/// make it so: a `--pull never` run needs its layers).
#[test]
fn a_dry_run_asks_the_registry_with_a_head_and_fetches_nothing() {
    let registry = Registry::start(Auth::Open);
    let built = Built::hello("dry\n");
    built.publish(&registry, "test/app", "v1");
    let world = World::new();
    let image = format!("docker://{}/test/app:v1", registry.host());
    let out = world.fixture.path("out");
    let dry = || {
        text(
            &world
                .command("run", &image)
                .args(["-m", "noop", "--dry-run", "-o"])
                .arg(&out)
                .output()
                .expect("run onebash"),
        )
    };
    let (code, stdout, stderr) = dry();
    assert_eq!(code, 0, "{stderr}");
    let manifest_digest = digest(&built.manifest);
    assert!(
        stdout.contains(&format!("(to pull: {manifest_digest})")),
        "{stdout}"
    );
    let seen = registry.seen();
    assert!(
        seen.iter()
            .filter(|s| s.path.contains("/manifests/"))
            .all(|s| s.method == "HEAD")
            && !seen.iter().any(|s| s.path.contains("/blobs/")),
        "{seen:?}"
    );
    assert!(!out.exists(), "a dry run made the run folder");
    assert!(!world.oci().exists(), "a dry run wrote to the image cache");
    let (code, _, stderr) = text(&world.pull(&image, &[]));
    assert_eq!(code, 0, "{stderr}");
    let (code, stdout, stderr) = dry();
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains(&format!("{image} (present)")), "{stdout}");
}

#[test]
fn a_registry_image_is_pulled_through_the_bearer_token_flow_and_cached() {
    let registry = Registry::start(Auth::Bearer { basic: None });
    let built = Built::hello("from the registry\n");
    built.publish(&registry, "test/app", "v1");
    let world = World::new();
    let image = format!("docker://{}/test/app:v1", registry.host());
    let (code, stdout, stderr) = text(&world.pull(&image, &[]));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("1 image ready"), "{stdout}");
    assert!(
        stderr.contains(&format!("pulling {}/test/app:v1: layer", registry.host())),
        "{stderr}"
    );
    let seen = registry.seen();
    assert!(seen[0].path.contains("/manifests/v1") && seen[0].authorization.is_none());
    let token = seen
        .iter()
        .find(|s| s.path.starts_with("/token?"))
        .expect("a token request");
    assert!(
        token.path.contains("scope=repository%3Atest%2Fapp%3Apull"),
        "{}",
        token.path
    );
    assert!(token.authorization.is_none(), "anonymous: {token:?}");
    assert!(
        seen.iter()
            .filter(|s| s.path.starts_with("/v2/"))
            .skip(1)
            .all(|s| s.authorization.as_deref() == Some("Bearer tok-for-the-scripted-registry")),
        "{seen:?}"
    );
    let (blob_digest, _, diff_id) = &built.layers[0];
    assert_eq!(
        std::fs::read_to_string(world.layer(diff_id).join("etc/hello.txt")).expect("unpacked"),
        "from the registry\n"
    );
    assert!(!world.blob(blob_digest).exists());
    assert!(world.partials().is_empty());

    let before = registry.seen().len();
    let (code, _, stderr) = text(&world.pull(&image, &[]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(registry.seen().len(), before, "--pull missing asked again");

    let (code, _, stderr) = text(&world.pull(&image, &["--pull", "always"]));
    assert_eq!(code, 0, "{stderr}");
    let asked: Vec<String> = registry.seen()[before..]
        .iter()
        .map(|s| s.path.clone())
        .collect();
    assert!(
        asked.iter().any(|p| p.ends_with("/manifests/v1")),
        "{asked:?}"
    );
    assert!(!asked.iter().any(|p| p.contains("/blobs/")), "{asked:?}");

    let pinned = format!("{}/test/app@{}", registry.host(), digest(&built.manifest));
    drop(registry);
    for image in [&image, &pinned] {
        let (code, _, stderr) = text(&world.pull(image, &["--pull", "never"]));
        assert_eq!(code, 0, "{image}: {stderr}");
    }
    let empty = World::new();
    let (code, _, stderr) = text(&empty.pull(&image, &["--pull", "never"]));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("not in the cache") && stderr.contains("hint: "),
        "{stderr}"
    );
}

/// Credentials of the docker config go to the token service as Basic;
/// wrong ones are refused with one message that names the file, never the
/// password; none at all is refused too.
#[test]
fn credentials_from_the_docker_config_are_sent_and_never_shown() {
    let registry = Registry::start(Auth::Bearer {
        basic: Some("ann:pw-s3cret".to_owned()),
    });
    let built = Built::hello("private\n");
    built.publish(&registry, "private/app", "v1");
    let image = format!("{}/private/app:v1", registry.host());

    let world = World::new();
    world.login(&registry.host(), "ann:pw-s3cret");
    let (code, stdout, stderr) = text(&world.pull(&image, &[]));
    assert_eq!(code, 0, "{stderr}");
    assert!(!stdout.contains("s3cret") && !stderr.contains("s3cret"));
    let token = registry
        .seen()
        .into_iter()
        .find(|s| s.path.starts_with("/token?"))
        .expect("a token request");
    assert!(token.authorization.is_some_and(|a| a.starts_with("Basic ")));
    assert!(
        world
            .layer(&built.layers[0].2)
            .join("etc/hello.txt")
            .is_file()
    );

    let wrong = World::new();
    wrong.login(&registry.host(), "ann:wrong-s3cret");
    let (code, stdout, stderr) = text(&wrong.pull(&image, &[]));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("refused") && stderr.contains("config.json"),
        "{stderr}"
    );
    assert!(stderr.contains("hint: docker login"), "{stderr}");
    assert!(
        !stdout.contains("s3cret") && !stderr.contains("s3cret"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("error:").count(), 1, "{stderr}");

    let anonymous = World::new();
    let (code, _, stderr) = text(&anonymous.pull(&image, &[]));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("anonymous access"), "{stderr}");
}

/// A registry that asks for Basic itself gets the docker config's
/// credentials; one whose token realm is plain HTTP on another host is
/// refused before anything is sent there.
#[test]
fn basic_auth_is_answered_and_a_clear_text_realm_elsewhere_is_refused() {
    let registry = Registry::start(Auth::Basic("bob:pw-basic".to_owned()));
    let built = Built::hello("basic\n");
    built.publish(&registry, "basic/app", "v1");
    let image = format!("{}/basic/app:v1", registry.host());
    let world = World::new();
    world.login(&registry.host(), "bob:pw-basic");
    let (code, _, stderr) = text(&world.pull(&image, &[]));
    assert_eq!(code, 0, "{stderr}");
    assert!(
        world
            .layer(&built.layers[0].2)
            .join("etc/hello.txt")
            .is_file()
    );
    let anonymous = World::new();
    let (code, _, stderr) = text(&anonymous.pull(&image, &[]));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("asks for a user and password"), "{stderr}");

    let foreign = Registry::start(Auth::ForeignRealm);
    built.publish(&foreign, "basic/app", "v1");
    let world = World::new();
    world.login(&foreign.host(), "bob:pw-basic");
    let (code, _, stderr) = text(&world.pull(&format!("{}/basic/app:v1", foreign.host()), &[]));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("is not HTTPS"), "{stderr}");
    assert!(!stderr.contains("pw-basic"), "{stderr}");
}

/// `pull` refuses, before anything is fetched, tasks that name no image
/// and `--env host`.
#[test]
fn pull_refuses_tasks_without_an_image_and_the_host() {
    let world = World::new();
    let output = onebash()
        .arg("pull")
        .arg(&world.tasks)
        .arg("--cache-dir")
        .arg(world.cache())
        .output()
        .expect("run onebash pull");
    let (code, _, stderr) = text(&output);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("name no image: t1") && stderr.contains("hint: give --image"),
        "{stderr}"
    );
    let output = onebash()
        .arg("pull")
        .arg(&world.tasks)
        .args(["--env", "host", "--image", "127.0.0.1:1/never/asked:v1"])
        .output()
        .expect("run onebash pull");
    let (code, _, stderr) = text(&output);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--env host runs no image"), "{stderr}");
}

/// `pull --env podman|docker` leaves the images to the engine: one in its
/// store is ready under `--pull never`, one it lacks is exit 2 naming it.
fn pull_with_an_engine_checks_its_store(backend: Backend) {
    let engine = backend.engine().expect("an engine");
    let world = World::new();
    let pull = |image: &str| {
        let output = onebash()
            .arg("pull")
            .arg(&world.tasks)
            .args(["--env", engine, "--pull", "never", "--image", image])
            .output()
            .expect("run onebash pull");
        text(&output)
    };
    let (code, stdout, stderr) = pull("onebash-test/base:bookworm");
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(&format!("1 image ready in {engine}'s store")),
        "{stdout}"
    );
    let (code, _, stderr) = pull("localhost/onebash-test/absent:none");
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("localhost/onebash-test/absent:none"),
        "{stderr}"
    );
}

under_each_engine!(
    pull_checks_the_engine_store,
    super::pull_with_an_engine_checks_its_store
);

/// A multi-arch index names arm64 first (whose manifest the registry
/// does not even have): linux/amd64 is the one pulled. Docker's manifest
/// kind is read as OCI's is.
#[test]
fn a_multi_arch_index_picks_linux_amd64() {
    let registry = Registry::start(Auth::Open);
    let amd64 = Built::new(vec![layer(vec![file("arch", b"amd64\n")])], DOCKER_MANIFEST);
    amd64.publish(&registry, "multi/app", "amd64-only");
    let index = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [
            {"mediaType": OCI_MANIFEST, "digest": digest(b"not served"), "size": 10,
             "platform": {"architecture": "arm64", "os": "linux"}},
            {"mediaType": DOCKER_MANIFEST, "digest": digest(&amd64.manifest), "size": amd64.manifest.len(),
             "platform": {"architecture": "amd64", "os": "linux"}},
        ],
    }))
    .expect("json");
    registry.put_manifest("multi/app", "latest", OCI_INDEX, &index);
    let world = World::new();
    let (code, _, stderr) = text(&world.pull(&format!("{}/multi/app", registry.host()), &[]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        std::fs::read_to_string(world.layer(&amd64.layers[0].2).join("arch")).expect("unpacked"),
        "amd64\n"
    );
}

/// The registry serves other bytes than the manifest's digest names:
/// refused with the digest in the message, and nothing of them kept, not
/// even a partial file.
#[test]
fn a_blob_that_does_not_match_its_digest_is_refused_and_never_kept() {
    let registry = Registry::start(Auth::Open);
    let built = Built::hello("the real bytes\n");
    built.publish(&registry, "test/liar", "v1");
    let (blob_digest, _, diff_id) = &built.layers[0];
    let (_, other) = layer(vec![file("etc/hello.txt", b"tampered\n")]);
    registry.put_blob(blob_digest, &other);
    let world = World::new();
    let (code, _, stderr) = text(&world.pull(&format!("{}/test/liar:v1", registry.host()), &[]));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!("the digest is {}", digest(&other))),
        "{stderr}"
    );
    assert!(
        stderr.contains(blob_digest) && stderr.contains("test/liar:v1"),
        "{stderr}"
    );
    assert!(!world.layer(diff_id).exists());
    assert!(!world.blob(blob_digest).exists());
    assert!(world.partials().is_empty(), "{:?}", world.partials());
}

/// Layers whose digests are right but whose entries climb out of the
/// root: refused, no layer kept, nothing written outside.
#[test]
fn layers_that_climb_out_of_the_root_are_refused() {
    let cases = [
        ("dotdot", vec![file("../../escaped", b"x")]),
        (
            "symlink out",
            vec![entry(
                tar::EntryType::Symlink,
                "etc/passwd",
                "/../../../etc/passwd",
                b"",
            )],
        ),
        (
            "through a symlink",
            vec![
                entry(tar::EntryType::Symlink, "tmpdir", "/tmp", b""),
                file("tmpdir/escaped", b"x"),
            ],
        ),
    ];
    let registry = Registry::start(Auth::Open);
    for (name, entries) in cases {
        let built = Built::new(vec![layer(entries)], OCI_MANIFEST);
        let repo = format!("hostile/{}", name.replace(' ', "-"));
        built.publish(&registry, &repo, "v1");
        let world = World::new();
        let (code, _, stderr) = text(&world.pull(&format!("{}/{repo}:v1", registry.host()), &[]));
        assert_eq!(code, 2, "{name}: {stderr}");
        assert!(
            stderr.contains("refused a hostile layer"),
            "{name}: {stderr}"
        );
        assert!(!world.layer(&built.layers[0].2).exists(), "{name}");
        assert!(!world.oci().join("escaped").exists(), "{name}");
        assert!(!world.fixture.path("escaped").exists(), "{name}");
    }
}

/// A missing image, or a registry that does not answer, stops `run`
/// before any task: exit 2, one message naming the image.
#[test]
fn a_missing_image_or_a_silent_registry_stops_the_run_before_any_task() {
    let registry = Registry::start(Auth::Bearer { basic: None });
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").to_string()
    };
    let cases = [
        (
            format!("{}/test/nothing:v1", registry.host()),
            "the registry has no image",
        ),
        (format!("{closed}/test/app:v1"), "does not answer"),
    ];
    for (image, why) in cases {
        let world = World::new();
        let out = world.fixture.path("out");
        let output = world
            .command("run", &image)
            .args(["--model", "noop", "-o"])
            .arg(&out)
            .output()
            .expect("run onebash");
        let (code, _, stderr) = text(&output);
        assert_eq!(code, 2, "{image}: {stderr}");
        assert!(stderr.contains(&image) && stderr.contains(why), "{stderr}");
        assert!(stderr.contains("\nhint: "), "{stderr}");
        assert_eq!(stderr.matches("failed to").count(), 1, "{stderr}");
        assert!(!out.join("results.csv").exists(), "a task ran: {image}");
    }
}

/// A connection cut mid-blob is resumed with a Range where it stopped; a
/// registry that cuts every time is a clear failure with no layer kept.
#[test]
fn a_connection_cut_mid_blob_is_resumed_or_a_clear_failure() {
    let registry = Registry::start(Auth::Open);
    let body: String = (0..40_000).map(|i| format!("{i:x}")).collect();
    let once = Built::hello(&body);
    once.publish(&registry, "cut/once", "v1");
    let (blob_digest, blob, diff_id) = &once.layers[0];
    registry.fault(blob_digest, Fault::CutOnce);
    let world = World::new();
    let (code, _, stderr) = text(&world.pull(&format!("{}/cut/once:v1", registry.host()), &[]));
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("the connection broke"), "{stderr}");
    let half = blob.len() / 2;
    assert!(
        registry
            .seen()
            .iter()
            .any(|s| s.range.as_deref() == Some(&format!("bytes={half}-"))),
        "{:?}",
        registry.seen()
    );
    assert_eq!(
        std::fs::read_to_string(world.layer(diff_id).join("etc/hello.txt")).expect("unpacked"),
        body
    );

    let always = Built::hello(&format!("{body} again"));
    always.publish(&registry, "cut/always", "v1");
    let (blob_digest, _, diff_id) = &always.layers[0];
    registry.fault(blob_digest, Fault::CutAlways);
    let (code, _, stderr) = text(&world.pull(&format!("{}/cut/always:v1", registry.host()), &[]));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("broke off 4 times") && stderr.contains("hint: run again"),
        "{stderr}"
    );
    assert!(!world.layer(diff_id).exists());
    assert!(!world.blob(blob_digest).exists());
}

/// A pull held by the registry after half of its image's one layer blob.
struct Held {
    registry: Registry,
    built: Built,
    /// The layer's one file.
    body: String,
    world: World,
    image: String,
    /// Lets the registry close the held connection.
    release: Latch,
    child: std::process::Child,
}

/// Publishes `repo:v1`, one layer of `size` numbers, holds its blob and
/// starts a pull of it; returns once the registry holds it.
fn held_pull(repo: &str, size: u32) -> Held {
    let registry = Registry::start(Auth::Open);
    let body: String = (0..size).map(|i| format!("{i:x}")).collect();
    let built = Built::hello(&body);
    built.publish(&registry, repo, "v1");
    let (reached, release) = (Latch::new(), Latch::new());
    registry.fault(
        &built.layers[0].0,
        Fault::HoldOnce {
            reached: reached.clone(),
            release: release.clone(),
        },
    );
    let world = World::new();
    let image = format!("{}/{repo}:v1", registry.host());
    let child = world.spawn_pull(&image, &[]);
    assert!(reached.wait(), "the registry never sent half the blob");
    Held {
        registry,
        built,
        body,
        world,
        image,
        release,
        child,
    }
}

/// onebash killed (-9) while the registry holds a blob after half its
/// bytes: only a partial file is left, no layer; the next pull asks for
/// the rest with a Range and the cached layer is whole.
#[test]
fn a_pull_killed_mid_download_is_completed_by_the_next() {
    let Held {
        registry,
        built,
        body,
        world,
        image,
        release,
        mut child,
    } = held_pull("kill/app", 60_000);
    let (blob_digest, blob, diff_id) = &built.layers[0];
    let partial = world
        .oci()
        .join("blobs/sha256")
        .join(format!("{}.partial", hex(blob_digest)));
    let half = (blob.len() / 2) as u64;
    assert!(
        eventually(|| std::fs::metadata(&partial).is_ok_and(|m| m.len() == half)),
        "the half blob never reached {}",
        partial.display()
    );
    child.kill().expect("kill -9");
    child.wait().expect("reap");
    release.open();
    assert!(!world.layer(diff_id).exists(), "a half layer is in use");

    let (code, _, stderr) = text(&world.pull(&image, &[]));
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains(&format!("resuming at {half}")), "{stderr}");
    let last = registry
        .seen()
        .into_iter()
        .rev()
        .find(|s| s.path.contains("/blobs/") && s.path.ends_with(blob_digest.as_str()))
        .expect("a blob request");
    assert_eq!(last.range, Some(format!("bytes={half}-")));
    assert_eq!(
        std::fs::read_to_string(world.layer(diff_id).join("etc/hello.txt")).expect("unpacked"),
        body
    );
    assert!(world.partials().is_empty(), "{:?}", world.partials());
}

/// Whether `pid` waits for a lock (`/proc/locks` marks waiters `->`).
fn waits_for_a_lock(pid: u32) -> bool {
    std::fs::read_to_string("/proc/locks").is_ok_and(|locks| {
        locks.lines().any(|line| {
            line.contains("->")
                && line
                    .split_whitespace()
                    .nth(5)
                    .is_some_and(|p| p == pid.to_string())
        })
    })
}

/// Two pulls of one image into one cache at once (two jobs on a node):
/// the second waits on the first's blob lock and fetches nothing of it.
#[test]
fn two_pulls_at_once_fetch_a_layer_once() {
    let mut held = held_pull("shared/app", 30_000);
    let (blob_digest, _, diff_id) = &held.built.layers[0];
    // `always`: the second asks for the tag again, then meets the lock.
    let mut second = held.world.spawn_pull(&held.image, &["--pull", "always"]);
    assert!(
        eventually(|| waits_for_a_lock(second.id())),
        "the second pull never waited on the blob's lock"
    );
    held.release.open();
    assert!(held.child.wait().expect("wait").success());
    assert!(second.wait().expect("wait").success());
    let seen = held.registry.seen();
    let blob_gets = seen
        .iter()
        .filter(|s| s.path.ends_with(blob_digest.as_str()))
        .count();
    // The first's held try and its resumed one; none of the second's.
    assert_eq!(blob_gets, 2, "{seen:?}");
    assert_eq!(
        std::fs::read_to_string(held.world.layer(diff_id).join("etc/hello.txt")).expect("unpacked"),
        held.body
    );
}

/// The address `scripts/test-registry.sh` wrote: a real registry
/// (Debian's docker-registry) holding the test image. `None`, under
/// `tool_present`'s rule, when there is none.
fn real_registry() -> Option<String> {
    let file = std::env::var_os("ONEBASH_TEST_REGISTRY_FILE")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new("/var/cache/onebash-ci/registry/address").to_owned());
    let address = std::fs::read_to_string(&file)
        .ok()
        .map(|a| a.trim().to_owned())
        .filter(|a| std::net::TcpStream::connect(a.as_str()).is_ok());
    let bwrap = Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "true"])
        .status()
        .is_ok_and(|s| s.success());
    let found = crate::support::harness::tool_present(
        address.is_some() && bwrap,
        &format!(
            "a registry with the test image (address in {})",
            file.display()
        ),
        "run scripts/test-registry.sh",
    );
    if found { address } else { None }
}

/// The test image pushed to a real registry, pulled over HTTP by `run
/// --env oci` and a task run in it: the image's files and its config's
/// PATH, at the working copy.
#[test]
fn a_task_runs_in_an_image_pulled_from_a_real_registry() {
    let Some(address) = real_registry() else {
        return;
    };
    let world = World::new();
    let commands = ["grep PRETTY_NAME /etc/os-release; pwd; echo \"PATH=$PATH\""];
    let plan: [(&str, &[&str]); 1] = [("t1", &commands)];
    let server = scripted_agent(&plan);
    let out = world.fixture.path("out");
    let output = world
        .command(
            "run",
            &format!("docker://{address}/onebash-test/base:bookworm"),
        )
        .arg("-o")
        .arg(&out)
        .args(["--model", "scripted", "--base-url", &server.base_url()])
        .env("OPENAI_API_KEY", "sk-registry-secret")
        .output()
        .expect("run onebash");
    let (code, _, stderr) = text(&output);
    assert_eq!(code, 0, "{stderr}");
    let answers = tool_answers(&server, "t1");
    assert!(
        answers[0].contains("bookworm") && answers[0].contains("/testbed"),
        "{}",
        answers[0]
    );
    assert!(
        answers[0].contains("PATH=/usr/local/sbin"),
        "{}",
        answers[0]
    );
    let results = std::fs::read_to_string(out.join("results.csv")).expect("results.csv");
    assert!(results.contains("passed"), "{results}");
}
