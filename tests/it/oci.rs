//! `--env oci`: tasks in an image with no daemon, each command under
//! bubblewrap over the image's root read from the layer cache. The image
//! is `scripts/test-images.sh`'s, written out by `podman save` (podman
//! only makes the files: onebash never calls it); those tests are skipped
//! with a line when podman or the image is missing, and fail then when
//! `CI` is set. Hostile and missing images are built by hand and need
//! neither podman nor bwrap: they must stop the run before it starts.
//! The container tests of container.rs and swebench_parity.rs run under
//! this backend too (their `::oci` tests); those here are its own.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::json;
use sha2::{Digest, Sha256};

use crate::support::harness::{
    Fixture, RunOutput, git, onebash, scripted_agent, task, tool_answers,
};
use crate::support::processes::assert_no_process_left;
use crate::support::server::ScriptedServer;

use crate::container::{RepoImage, instance};
use crate::support::backend::{self, Backend, IMAGE, shared};

/// `podman save` of the test image in `format`, made once per test binary
/// (into a temporary name, then renamed: other test processes may race).
/// `None`, under `tool_present`'s rule, when podman, the image or bwrap
/// is missing.
fn saved(format: &str) -> Option<PathBuf> {
    static SAVED: OnceLock<Option<(PathBuf, PathBuf)>> = OnceLock::new();
    let paths = SAVED.get_or_init(|| {
        if !Backend::Oci.ready() {
            return None;
        }
        let dir = shared();
        std::fs::create_dir_all(&dir).expect("mkdir");
        let save = |format: &str, name: &str| {
            let done = dir.join(name);
            if !done.exists() {
                let partial = dir.join(format!("{name}.{}", std::process::id()));
                let _ = std::fs::remove_dir_all(&partial);
                let status = Command::new("podman")
                    .args(["save", "-q", "--format", format, "-o"])
                    .arg(&partial)
                    .arg(IMAGE)
                    .status()
                    .expect("podman save");
                assert!(status.success(), "podman save --format {format}");
                let _ = std::fs::rename(&partial, &done);
                let _ = std::fs::remove_dir_all(&partial);
                let _ = std::fs::remove_file(&partial);
            }
            done
        };
        Some((
            save("docker-archive", "base.tar"),
            save("oci-dir", "base-oci"),
        ))
    });
    let (archive, layout) = paths.as_ref()?;
    Some(match format {
        "oci-dir" => layout.clone(),
        _ => archive.clone(),
    })
}

/// Runs `tasks` under `--env oci` with `image` and `cache`, a key in
/// onebash's environment that commands must never see.
fn run_oci(
    fixture: &Fixture,
    tasks: &Path,
    server: &ScriptedServer,
    image: &str,
    cache: &Path,
    extra: &[&str],
) -> RunOutput {
    let out = fixture.path("out");
    let output = onebash()
        .arg("run")
        .arg(tasks)
        .arg("-o")
        .arg(&out)
        .arg("--cache-dir")
        .arg(cache)
        .args(["--model", "scripted", "--base-url", &server.base_url()])
        .args(["--env", "oci", "--image", image])
        .args(extra)
        .env("OPENAI_API_KEY", "sk-oci-secret")
        .output()
        .expect("run onebash");
    RunOutput::of(output, &out)
}

/// [`run_oci`] from the saved archive `archive`, with the shared cache.
fn run_archive(
    fixture: &Fixture,
    tasks: &Path,
    server: &ScriptedServer,
    archive: &Path,
    extra: &[&str],
) -> RunOutput {
    let image = format!("docker-archive:{}", archive.display());
    run_oci(
        fixture,
        tasks,
        server,
        &image,
        &shared().join("cache"),
        extra,
    )
}

/// A repo with one file, and a task over it.
fn one_task(fixture: &Fixture, id: &str, test_command: &str) -> PathBuf {
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    fixture.tasks(&[task(id, &repo, &sha, test_command, json!({}))])
}

/// The agent's commands run in the image from a `podman save` archive
/// (bookworm's os-release and python3, none of the host's files), as root
/// in the working copy at /testbed, with no network and no API key; the
/// image cannot be written; what the agent writes in the working copy is
/// in the diff; the tests see it, with a /tmp of their own.
#[test]
fn a_task_runs_in_an_image_from_a_docker_archive_without_a_daemon() {
    let Some(archive) = saved("docker-archive") else {
        return;
    };
    let fixture = Fixture::new();
    let tasks = one_task(
        &fixture,
        "oci-end",
        "grep -q bookworm /etc/os-release && grep -q from-the-agent made.txt && test ! -e /tmp/agent-was-here",
    );
    let host_file = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let look_at_the_host = format!("test -e {host_file} && echo host-visible || echo host-hidden");
    let commands = [
        "grep PRETTY_NAME /etc/os-release; pwd; id -u",
        "python3 -c 'import sys; print(\"python\", sys.executable, open(\"/etc/debian_version\").read().strip())'",
        &look_at_the_host,
        "echo from-the-agent > made.txt && touch /tmp/agent-was-here && echo written; touch /outside 2>&1; rm -f /etc/os-release 2>&1; head -n 1 /etc/os-release",
        "ls /sys/class/net; python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 53), 5)' 2>&1 | tail -n 1",
        "env",
        "git status --short",
    ];
    let plan: [(&str, &[&str]); 1] = [("oci-end", &commands)];
    let server = scripted_agent(&plan);
    let run = run_archive(&fixture, &tasks, &server, &archive, &[]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let row = run.row("oci-end");
    assert_eq!(row["status"], "passed", "{row:?}\n{}", run.stderr);

    let answers = tool_answers(&server, "oci-end");
    assert_eq!(answers.len(), commands.len(), "{answers:?}");
    assert!(answers[0].contains("bookworm"), "{}", answers[0]);
    assert!(answers[0].contains("/testbed"), "{}", answers[0]);
    assert!(
        answers[0].contains("\n0\n"),
        "not root inside: {}",
        answers[0]
    );
    assert!(
        answers[1].contains("python /usr/bin/python3 12."),
        "{}",
        answers[1]
    );
    assert!(answers[2].contains("host-hidden"), "{}", answers[2]);
    let wrote = &answers[3];
    assert!(wrote.contains("written"), "{wrote}");
    assert!(
        wrote.matches("Read-only file system").count() >= 2,
        "{wrote}"
    );
    assert!(
        wrote.contains("PRETTY_NAME"),
        "the image lost a file: {wrote}"
    );
    // Only the loopback interface, and no route out.
    let net = &answers[4];
    assert!(!net.contains("eth") && net.contains("Error"), "{net}");
    assert!(
        !answers[5].contains("sk-oci-secret") && !answers[5].contains("OPENAI"),
        "{}",
        answers[5]
    );
    assert!(
        answers[5].contains("PATH=/usr/local/sbin"),
        "{}",
        answers[5]
    );
    assert!(answers[6].contains("made.txt"), "{}", answers[6]);

    let patch = std::fs::read_to_string(run.task_dir("oci-end").join("patch.diff")).expect("patch");
    assert!(
        patch.contains("made.txt") && patch.contains("+from-the-agent"),
        "{patch}"
    );
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.out.join("run.json")).expect("run.json"))
            .expect("run.json is JSON");
    assert_eq!(run_json["settings"]["sandbox_used"], "bwrap");
}

/// sha256 of each regular file under `dir` (by relative path), and the
/// number of entries: what must not change.
fn fingerprint(dir: &Path) -> (usize, Vec<(PathBuf, String)>) {
    fn walk(root: &Path, dir: &Path, count: &mut usize, files: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("read_dir")
            .map(|e| e.expect("entry").path())
            .collect();
        entries.sort();
        for path in entries {
            *count += 1;
            let meta = std::fs::symlink_metadata(&path).expect("meta");
            if meta.is_dir() {
                walk(root, &path, count, files);
            } else if meta.is_file() {
                files.push(path.strip_prefix(root).expect("inside").to_owned());
            }
        }
    }
    let (mut count, mut files) = (0, Vec::new());
    walk(dir, dir, &mut count, &mut files);
    // A few files of the image, by name, and a sample of the rest.
    let wanted = [
        "testbed/calc.py",
        "testbed/.git/HEAD",
        "etc/os-release",
        "etc/passwd",
        "usr/bin/bash",
        "usr/bin/python3.11",
    ];
    let hashed = files
        .iter()
        .enumerate()
        .filter(|(i, path)| i % 97 == 0 || wanted.iter().any(|w| path.ends_with(w)))
        .map(|(_, path)| {
            let bytes = std::fs::read(dir.join(path)).expect("read");
            let hex: String = Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            (path.clone(), hex)
        })
        .collect();
    (count, hashed)
}

/// The agent runs `rm -rf --no-preserve-root /` and more: the layer cache
/// and the image's root are unchanged, file for file, and the next
/// command still finds the image whole.
#[test]
fn rm_rf_root_by_the_agent_leaves_the_layer_cache_unchanged() {
    let Some(archive) = saved("docker-archive") else {
        return;
    };
    let fixture = Fixture::new();
    // A cache of its own, so no other test's run changes it meanwhile.
    let cache = fixture.path("cache");
    let tasks = one_task(&fixture, "oci-rm", "test -e /usr/bin/python3");
    let commands = [
        "echo start",
        "rm -rf --no-preserve-root / 2>&1 | tail -n 1; chmod -R 000 /usr 2>&1 | tail -n 1; echo gone > /etc/passwd; echo done",
        "head -n 1 /etc/passwd; test -x /usr/bin/python3 && echo python-still-there",
    ];
    let plan: [(&str, &[&str]); 1] = [("oci-rm", &commands)];
    let server = scripted_agent(&plan);
    let image = format!("docker-archive:{}", archive.display());
    // A first run fills the cache; its state is then taken.
    let first = run_oci(
        &fixture,
        &tasks,
        &scripted_agent(&[("oci-rm", &["true"])]),
        &image,
        &cache,
        &[],
    );
    assert_eq!(first.code, 0, "stderr:\n{}", first.stderr);
    let oci = cache.join("oci");
    let before = fingerprint(&oci);
    assert!(
        before.1.iter().any(|(p, _)| p.ends_with("etc/passwd")),
        "{before:?}"
    );
    std::fs::remove_dir_all(fixture.path("out")).expect("rm out");

    let run = run_oci(&fixture, &tasks, &server, &image, &cache, &[]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let answers = tool_answers(&server, "oci-rm");
    assert!(answers[1].contains("done"), "{}", answers[1]);
    assert!(answers[2].contains("root:x:0:0"), "{}", answers[2]);
    assert!(answers[2].contains("python-still-there"), "{}", answers[2]);
    assert_eq!(run.row("oci-rm")["status"], "passed");
    assert_eq!(fingerprint(&oci), before, "the layer cache changed");
}

/// The same image as an OCI layout folder (`podman save --format
/// oci-dir`: its layer gzip-compressed and checked against both digests)
/// runs the same way.
#[test]
fn a_task_runs_in_an_image_from_an_oci_layout_folder() {
    let Some(layout) = saved("oci-dir") else {
        return;
    };
    let fixture = Fixture::new();
    let tasks = one_task(&fixture, "oci-layout", "grep -q bookworm /etc/os-release");
    let commands = ["grep VERSION_CODENAME /etc/os-release && echo fixed > README.md"];
    let plan: [(&str, &[&str]); 1] = [("oci-layout", &commands)];
    let server = scripted_agent(&plan);
    let run = run_oci(
        &fixture,
        &tasks,
        &server,
        &format!("oci:{}", layout.display()),
        &fixture.path("cache"),
        &[],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(run.row("oci-layout")["status"], "passed", "{}", run.stderr);
    let answers = tool_answers(&server, "oci-layout");
    assert!(
        answers[0].contains("VERSION_CODENAME=bookworm"),
        "{}",
        answers[0]
    );
    let patch =
        std::fs::read_to_string(run.task_dir("oci-layout").join("patch.diff")).expect("patch");
    assert!(patch.contains("+fixed"), "{patch}");
}

/// A docker-archive made by hand: `manifest.json`, the config and one
/// layer tar, whose bytes are `layer` and whose digest the config claims
/// is `claimed` (the layer's own when `None`).
fn archive_by_hand(path: &Path, layer: &[u8], claimed: Option<&str>) {
    let hex = |bytes: &[u8]| -> String {
        Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let diff_id = claimed.map_or_else(|| format!("sha256:{}", hex(layer)), str::to_owned);
    let config = json!({
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": ["PATH=/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    })
    .to_string();
    let config_name = format!("{}.json", hex(config.as_bytes()));
    let manifest =
        json!([{"Config": config_name, "RepoTags": ["x:1"], "Layers": ["layer.tar"]}]).to_string();
    let mut builder = tar::Builder::new(std::fs::File::create(path).expect("create"));
    for (name, bytes) in [
        ("layer.tar", layer),
        (config_name.as_str(), config.as_bytes()),
        ("manifest.json", manifest.as_bytes()),
    ] {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        builder
            .append_data(&mut header, name, bytes)
            .expect("append");
    }
    builder
        .into_inner()
        .expect("finish")
        .flush()
        .expect("flush");
}

/// A layer tar with one file at `path`, the name written raw (the tar
/// crate's own writer refuses `..`).
fn layer_with(path: &str) -> Vec<u8> {
    let mut header = tar::Header::new_gnu();
    header.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
    header.set_size(1);
    header.set_mode(0o644);
    header.set_entry_type(tar::EntryType::Regular);
    header.set_cksum();
    let mut builder = tar::Builder::new(Vec::new());
    builder.append(&header, &b"x"[..]).expect("append");
    builder.into_inner().expect("finish")
}

/// A hostile layer (`../` paths), a layer whose bytes are not those its
/// digest names, and a missing image each stop the run before any task
/// starts (exit 2, no row), saying why, and nothing is written outside the
/// cache nor left in it.
#[test]
fn hostile_and_missing_images_stop_the_run_before_it_starts() {
    let fixture = Fixture::new();
    let tasks = one_task(&fixture, "oci-bad", "true");
    let server = scripted_agent(&[("oci-bad", &["true"])]);
    let traversal = fixture.path("traversal.tar");
    archive_by_hand(&traversal, &layer_with("../../escaped"), None);
    let tampered = fixture.path("tampered.tar");
    let other = format!("sha256:{}", "1".repeat(64));
    archive_by_hand(&tampered, &layer_with("fine"), Some(&other));
    let cases = [
        (
            format!("docker-archive:{}", traversal.display()),
            "refused a hostile layer",
        ),
        (
            format!("docker-archive:{}", tampered.display()),
            "the digest is",
        ),
        (
            format!("docker-archive:{}", fixture.path("missing.tar").display()),
            "missing.tar",
        ),
        (
            format!("oci:{}", fixture.path("nothing").display()),
            "not an OCI image layout",
        ),
        ("./image.tar".to_owned(), "docker-archive:PATH"),
    ];
    for (image, why) in cases {
        let cache = fixture.path("cache");
        let run = run_oci(&fixture, &tasks, &server, &image, &cache, &[]);
        assert_eq!(run.code, 2, "{image}: stderr:\n{}", run.stderr);
        assert!(run.stderr.contains(why), "{image}: {}", run.stderr);
        assert!(!fixture.path("escaped").exists() && !cache.join("escaped").exists());
        // No layer is left, whole or partial.
        let layers = cache.join("oci/layers");
        let left: Vec<_> = std::fs::read_dir(&layers)
            .map(|dir| {
                dir.map(|e| e.expect("entry").file_name())
                    .filter(|name| !name.to_string_lossy().ends_with(".lock"))
                    .collect()
            })
            .unwrap_or_default();
        assert!(left.is_empty(), "{image}: {left:?}");
    }
    assert!(server.requests().is_empty());
}

/// A command that forks sleepers (one in a session of its own, one deaf
/// to SIGTERM) and outlives its timeout is killed with all it started:
/// nothing of it is left on the host, and the next command runs.
#[test]
fn a_timeout_kills_the_command_and_all_it_forked() {
    let Some(archive) = saved("docker-archive") else {
        return;
    };
    let fixture = Fixture::new();
    let tasks = one_task(&fixture, "oci-timeout", "true");
    let commands = [
        "sleep 641 & (setsid sleep 642 &); (trap '' TERM HUP; sleep 643 &); echo started; sleep 644",
        "echo next",
    ];
    let plan: [(&str, &[&str]); 1] = [("oci-timeout", &commands)];
    let server = scripted_agent(&plan);
    let run = run_archive(
        &fixture,
        &tasks,
        &server,
        &archive,
        &["--command-timeout", "5"],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    for needle in ["sleep 641", "sleep 642", "sleep 643", "sleep 644"] {
        assert_no_process_left(needle);
    }
    let answers = tool_answers(&server, "oci-timeout");
    assert!(
        answers[0].contains("started") && answers[0].contains("timed out"),
        "{}",
        answers[0]
    );
    assert!(answers[1].contains("next"), "{}", answers[1]);
    assert_eq!(run.events("oci-timeout", "command")[0]["timed_out"], true);
}

/// container.rs's image whose repo has a past and a future, saved, and
/// the `--image` that names it.
fn repo_image(fixture: &Fixture) -> (RepoImage, String) {
    let image = RepoImage::build(fixture, |_| {});
    let archive = backend::saved(&image.tag, &fixture.path("saved"));
    let image_arg = format!("docker-archive:{}", archive.display());
    (image, image_arg)
}

/// A task whose repo is the one its image holds (`repo_in_image`) works
/// on a copy of it: the agent's `rm -rf /` removes its copy and its /tmp,
/// yet the layer cache and the image's root are unchanged, file for file,
/// and the next task of the run, on the same image, finds the repo whole,
/// cleaned and checked, and passes with its fix.
#[test]
fn rm_rf_root_on_the_repo_in_an_image_leaves_it_whole_for_the_next_task() {
    if !Backend::Oci.ready() {
        return;
    }
    let fixture = Fixture::new();
    let (image, image_arg) = repo_image(&fixture);
    // A cache of its own, so no other test's run changes it meanwhile.
    let cache = fixture.path("own-cache");
    let extra = ["--test-command", "python3 test_add.py", "-j", "1"];
    let first_tasks = fixture.tasks(&[instance("oci-repo-0", &image)]);
    let first = run_oci(
        &fixture,
        &first_tasks,
        &scripted_agent(&[]),
        &image_arg,
        &cache,
        &extra,
    );
    assert_eq!(first.code, 0, "stderr:\n{}", first.stderr);
    assert_eq!(first.row("oci-repo-0")["status"], "failed");
    let oci = cache.join("oci");
    let before = fingerprint(&oci);
    assert!(
        before.1.iter().any(|(p, _)| p.ends_with("testbed/calc.py")),
        "{before:?}"
    );
    std::fs::remove_dir_all(fixture.path("out")).expect("rm out");

    let tasks = fixture.tasks(&[
        instance("oci-repo-1", &image),
        instance("oci-repo-2", &image),
    ]);
    let server = scripted_agent(&[
        (
            "oci-repo-1",
            &["rm -rf --no-preserve-root / 2>/dev/null; find /testbed /tmp -mindepth 1 | wc -l"],
        ),
        (
            "oci-repo-2",
            &[
                "git status --short | wc -l; git log --oneline | wc -l",
                "sed -i 's/x - y/x + y/' calc.py",
            ],
        ),
    ]);
    let run = run_oci(&fixture, &tasks, &server, &image_arg, &cache, &extra);
    let removed = tool_answers(&server, "oci-repo-1");
    assert!(removed[0].starts_with("0\n"), "{removed:?}");
    assert_ne!(run.row("oci-repo-1")["status"], "passed", "{}", run.stderr);
    let whole = tool_answers(&server, "oci-repo-2");
    let commits = git(
        &image.leaky.repo,
        &["rev-list", "--count", &image.leaky.base],
    );
    assert_eq!(
        whole[0],
        format!("0\n{commits}\n[exit code: 0]"),
        "{whole:?}"
    );
    assert_eq!(run.row("oci-repo-2")["status"], "passed", "{}", run.stderr);
    assert_eq!(fingerprint(&oci), before, "the layer cache changed");
}

/// onebash killed with SIGKILL while the agent works on its copy of the
/// repo in the image leaves that copy behind (nothing removes it when
/// onebash dies); `--resume` runs the task again, its copy made afresh
/// over the old one, and it passes.
#[test]
fn a_copy_of_the_repo_in_the_image_left_by_a_killed_run_is_made_again() {
    use crate::support::processes::running;
    use crate::support::sync::eventually;
    if !Backend::Oci.ready() {
        return;
    }
    let fixture = Fixture::new();
    let (image, image_arg) = repo_image(&fixture);
    let tasks = fixture.tasks(&[instance("oci-stale", &image)]);
    let out = fixture.path("out");
    let sleeper = "sleep 679";
    let server = scripted_agent(&[("oci-stale", &[sleeper])]);
    let mut child = onebash()
        .arg("run")
        .arg(&tasks)
        .args(["-o".as_ref(), out.as_os_str(), "--cache-dir".as_ref()])
        .arg(shared().join("cache"))
        .args(["--model", "scripted", "--base-url", &server.base_url()])
        .args(["--env", "oci", "--image", &image_arg])
        .args(["--test-command", "python3 test_add.py"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start onebash");
    assert!(eventually(|| running(sleeper)), "the command never ran");
    child.kill().expect("SIGKILL onebash");
    child.wait().expect("reap onebash");
    assert_no_process_left(sleeper);
    let left = out.join("workdirs/oci-stale.epoch-1/agent/calc.py");
    assert!(
        left.is_file(),
        "no copy left: this test would prove nothing"
    );

    let fix = scripted_agent(&[("oci-stale", &["sed -i 's/x - y/x + y/' calc.py"])]);
    let run = run_oci(
        &fixture,
        &tasks,
        &fix,
        &image_arg,
        &shared().join("cache"),
        &["--test-command", "python3 test_add.py", "--resume"],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(run.row("oci-stale")["status"], "passed", "{}", run.stderr);
}
