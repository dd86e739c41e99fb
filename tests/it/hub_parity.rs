//! The scripted Hub (support/hub.rs) checked against the real client:
//! huggingface_hub's `snapshot_download` of its dataset repos, from the
//! pinned venv of `.ci/run` (`$ONEBASH_HF_PYTHON`, skipped with a line
//! when missing and failing under CI, as `tool_present` says). What the
//! real client gets must be byte for byte what was served, by branch, tag
//! and sha, kept in git or in LFS, through pages of the tree and a cut
//! download; and its errors must be the ones the real Hub makes it raise
//! (gated without a good token, an unknown repo or revision). Then the
//! datasets tests, which read what onebash makes of the scripted Hub,
//! test onebash against the Hub's real API, not against a Hub of ours.
//!
//! The requests the real client made are read from the Hub's log, so the
//! order of the calls a download makes is checked too: the repo's info
//! (unless the revision is a sha), the tree at the sha, a HEAD of each
//! file's `resolve`, its GET (an LFS file's from the CDN, without the
//! token).

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::harness::{Fixture, hf_python};
use crate::support::hub::{Dataset, Failure, Hub, Seen, git_blob_sha1, lfs_pointer, sha256_hex};
use crate::support::sync::HANG_GUARD;
use crate::support::tables::{jsonl_of, parquet_of};

const REPO: &str = "acme/tasks";

/// What `hub_client.py snapshot` printed.
fn snapshot(
    python: &str,
    fixture: &Fixture,
    hub: &Hub,
    repo: &str,
    revision: &str,
    token: Option<&str>,
) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/hub_client.py");
    // A cache of its own per call, so each download is a whole one.
    let cache = tempfile::tempdir_in(fixture.dir.path()).expect("tempdir");
    let timeout = HANG_GUARD.as_secs().to_string();
    let mut command = Command::new(python);
    command
        .args([script, "snapshot", repo, revision])
        .arg(cache.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", fixture.path("."))
        .env("HF_HOME", fixture.path("hf-home"))
        .env("HF_ENDPOINT", hub.endpoint())
        .env("HF_HUB_DISABLE_TELEMETRY", "1")
        .env("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        // Far above what any machine needs: a loaded one must not time out.
        .env("HF_HUB_ETAG_TIMEOUT", &timeout)
        .env("HF_HUB_DOWNLOAD_TIMEOUT", &timeout);
    if let Some(token) = token {
        command.env("HF_TOKEN", token);
    }
    let output = command.output().expect("run hub_client.py");
    assert!(
        output.status.success(),
        "hub_client.py failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!(
            "hub_client.py printed no JSON ({err}): {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// sha256 of each file, by path.
fn digests(files: &[(&str, &[u8])]) -> Value {
    let map: BTreeMap<&str, String> = files
        .iter()
        .map(|(path, bytes)| (*path, sha256_hex(bytes)))
        .collect();
    json!(map)
}

/// Rows of two tasks, and a dataset of them: a Parquet split in LFS, a
/// JSON Lines one in git, a card naming both, a tag `v1`.
fn two_splits() -> (Dataset, Vec<u8>, Vec<u8>) {
    let rows = [
        json!({"id": "t0", "problem_statement": "Fix it.", "FAIL_TO_PASS": ["a", "b"]}),
        json!({"id": "t1", "problem_statement": "Fix that.", "notes": null}),
    ];
    let parquet = parquet_of(&rows);
    let jsonl = jsonl_of(&rows);
    let dataset = Dataset::new(REPO)
        .lfs("data/test-00000-of-00001.parquet", parquet.clone())
        .file("data/dev.jsonl", jsonl.clone())
        .config(
            "default",
            &[("test", "data/test-*"), ("dev", "data/dev.jsonl")],
        )
        .tag("v1");
    (dataset, parquet, jsonl)
}

fn ok_files(got: &Value) -> &Value {
    assert_eq!(got["ok"], true, "{got}");
    &got["files"]
}

fn assert_error(got: &Value, class: &str, status: u16) {
    assert_eq!(got["ok"], false, "{got}");
    assert_eq!(got["error"], class, "{got}");
    assert_eq!(got["status"], status, "{got}");
}

#[test]
fn snapshot_download_gets_every_file_byte_for_byte_by_branch_tag_and_sha() {
    let Some(python) = hf_python() else { return };
    let fixture = Fixture::new();
    let hub = Hub::start();
    // Pages of two entries: the real client must follow the Link header.
    hub.page_size(2);
    let (dataset, parquet, jsonl) = two_splits();
    let sha = hub.publish(dataset);
    let readme = hub.file(REPO, "README.md");
    let attributes = hub.file(REPO, ".gitattributes");
    assert!(
        String::from_utf8_lossy(&attributes)
            .contains("data/test-00000-of-00001.parquet filter=lfs"),
        "{}",
        String::from_utf8_lossy(&attributes)
    );
    let want = digests(&[
        ("data/test-00000-of-00001.parquet", &parquet),
        ("data/dev.jsonl", &jsonl),
        ("README.md", &readme),
        (".gitattributes", &attributes),
    ]);
    for revision in ["main", "v1", sha.as_str()] {
        let before = hub.requests().len();
        let got = snapshot(&python, &fixture, &hub, REPO, revision, None);
        assert_eq!(ok_files(&got), &want, "{revision}");
        // The cache keeps each file under its ETag: a git blob's sha1, or
        // the sha256 of an LFS file (its `X-Linked-Etag`).
        let mut blobs = vec![
            git_blob_sha1(&jsonl),
            git_blob_sha1(&readme),
            git_blob_sha1(&attributes),
            sha256_hex(&parquet),
        ];
        blobs.sort();
        assert_eq!(got["blobs"], json!(blobs), "{revision}");
        let seen: Vec<Seen> = hub.requests().into_iter().skip(before).collect();
        let paths: Vec<&str> = seen.iter().map(|s| s.path.as_str()).collect();
        // A sha needs no info: snapshot_download goes to the tree at once.
        let info = format!("/api/datasets/{REPO}/revision/{revision}");
        assert_eq!(
            seen.iter().filter(|s| s.is_info()).count(),
            usize::from(revision != sha),
            "{paths:#?}"
        );
        if revision != sha {
            assert_eq!(paths[0], info, "{paths:#?}");
        }
        // The tree at the sha, in pages: 4 files and 1 folder.
        let trees: Vec<&Seen> = seen.iter().filter(|s| s.is_tree()).collect();
        assert_eq!(trees.len(), 3, "{paths:#?}");
        assert_eq!(
            trees[0].path,
            format!("/api/datasets/{REPO}/tree/{sha}?recursive=true&expand=false"),
        );
        assert!(trees[1].path.ends_with("&cursor=2"), "{paths:#?}");
        // Each file: a HEAD of resolve at the sha, then its bytes: from
        // resolve when in git, from the CDN when in LFS.
        for file in [
            "data/dev.jsonl",
            "README.md",
            ".gitattributes",
            "data/test-00000-of-00001.parquet",
        ] {
            let resolve = format!("/datasets/{REPO}/resolve/{sha}/{file}");
            assert!(
                seen.iter().any(|s| s.method == "HEAD" && s.path == resolve),
                "no HEAD {resolve}: {paths:#?}"
            );
        }
        let lfs = sha256_hex(&parquet);
        let from_cdn: Vec<&Seen> = seen.iter().filter(|s| s.cdn).collect();
        assert_eq!(from_cdn.len(), 1, "{paths:#?}");
        assert!(from_cdn[0].names(&lfs) && from_cdn[0].method == "GET");
        assert!(
            seen.iter().any(|s| s.method == "GET"
                && s.path == format!("/datasets/{REPO}/resolve/{sha}/data/dev.jsonl")),
            "{paths:#?}"
        );
    }
    // An LFS pointer is what git holds; its size is what the tree says.
    assert!(lfs_pointer(&parquet).starts_with("version https://git-lfs.github.com/spec/v1\n"));
}

/// huggingface_hub reads a download in chunks of 10 MiB and resumes
/// from the last whole chunk it wrote: a file cut short of that is asked
/// again whole, one cut past it with `Range: bytes=10485760-`, which the
/// Hub must answer with 206 and the rest.
#[test]
fn a_cut_download_is_resumed_by_huggingface_hub_with_a_range_the_hub_answers() {
    const CHUNK: usize = 10 * 1024 * 1024;
    let Some(python) = hf_python() else { return };
    let fixture = Fixture::new();
    let hub = Hub::start();
    let (dataset, _, jsonl) = two_splits();
    // Bytes that do not repeat, so that a wrong offset cannot go unseen.
    let big: Vec<u8> = (0..CHUNK + 4096)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3])
        .collect();
    hub.publish(dataset.lfs("data/big.bin", big.clone()));
    hub.cut_once(REPO, "data/big.bin", CHUNK + 1000);
    hub.cut_once(REPO, "data/dev.jsonl", 10);
    let got = snapshot(&python, &fixture, &hub, REPO, "main", None);
    let files = ok_files(&got);
    assert_eq!(files["data/big.bin"], sha256_hex(&big));
    assert_eq!(files["data/dev.jsonl"], sha256_hex(&jsonl));
    let seen = hub.requests();
    let gets = |cdn: bool, name: &str| -> Vec<Option<String>> {
        seen.iter()
            .filter(|s| s.method == "GET" && s.cdn == cdn && s.names(name))
            .map(|s| s.range.clone())
            .collect()
    };
    assert_eq!(
        gets(true, &sha256_hex(&big)),
        [None, Some(format!("bytes={CHUNK}-"))],
        "{seen:#?}"
    );
    assert_eq!(gets(false, "data/dev.jsonl"), [None, None], "{seen:#?}");
}

#[test]
fn a_gated_dataset_needs_its_token_and_the_cdn_never_sees_one() {
    let Some(python) = hf_python() else { return };
    let fixture = Fixture::new();
    let hub = Hub::start();
    let (dataset, parquet, _) = two_splits();
    hub.publish(dataset.gated("hf_granted"));
    hub.add_token("hf_not_granted");

    let got = snapshot(&python, &fixture, &hub, REPO, "main", Some("hf_granted"));
    assert_eq!(
        ok_files(&got)["data/test-00000-of-00001.parquet"],
        sha256_hex(&parquet)
    );
    let seen = hub.requests();
    assert!(
        seen.iter()
            .filter(|s| !s.cdn)
            .all(|s| s.authorization.as_deref() == Some("Bearer hf_granted")),
        "{seen:#?}"
    );
    assert!(
        seen.iter()
            .filter(|s| s.cdn)
            .all(|s| s.authorization.is_none()),
        "the token went to the CDN: {seen:#?}"
    );

    // No token: the files' HEAD is 401 GatedRepo (the info and tree are
    // anyone's, as on the Hub).
    let got = snapshot(&python, &fixture, &hub, REPO, "main", None);
    assert_error(&got, "GatedRepoError", 401);
    // GatedRepoError is a RepositoryNotFoundError to a caller.
    assert!(
        got["classes"]
            .as_array()
            .is_some_and(|c| c.contains(&json!("RepositoryNotFoundError"))),
        "{got}"
    );
    // A token the Hub knows, not granted: 403 GatedRepo.
    let got = snapshot(
        &python,
        &fixture,
        &hub,
        REPO,
        "main",
        Some("hf_not_granted"),
    );
    assert_error(&got, "GatedRepoError", 403);
    // A token the Hub does not know: 401 at the first call, not read as
    // a missing repo (its message says the credentials are invalid).
    let got = snapshot(&python, &fixture, &hub, REPO, "main", Some("hf_wrong"));
    assert_error(&got, "HfHubHTTPError", 401);
}

#[test]
fn an_unknown_repo_or_revision_raises_what_the_real_hub_makes_it_raise() {
    let Some(python) = hf_python() else { return };
    let fixture = Fixture::new();
    let hub = Hub::start();
    let (dataset, _, _) = two_splits();
    hub.publish(dataset);
    hub.add_token("hf_someone");
    let got = snapshot(&python, &fixture, &hub, "acme/nothing", "main", None);
    assert_error(&got, "RepositoryNotFoundError", 401);
    let got = snapshot(
        &python,
        &fixture,
        &hub,
        "acme/nothing",
        "main",
        Some("hf_someone"),
    );
    assert_error(&got, "RepositoryNotFoundError", 404);
    let got = snapshot(&python, &fixture, &hub, REPO, "v9", None);
    assert_error(&got, "RevisionNotFoundError", 404);
    let unknown_sha = "0123456789abcdef0123456789abcdef01234567";
    let got = snapshot(&python, &fixture, &hub, REPO, unknown_sha, None);
    assert_error(&got, "RevisionNotFoundError", 404);
}

/// huggingface_hub checks a download's size, not its hash: corrupted
/// bytes of the right size are taken as they are. So the Hub's
/// corruption keeps every size and id as they were (else the real client
/// would refuse it for its size, and the onebash test of it would test
/// nothing more), and it is onebash's own check that must catch it.
#[test]
fn corrupted_bytes_keep_their_size_and_huggingface_hub_takes_them() {
    let Some(python) = hf_python() else { return };
    let fixture = Fixture::new();
    let hub = Hub::start();
    let (dataset, parquet, jsonl) = two_splits();
    hub.publish(dataset);
    hub.corrupt(REPO, "data/test-00000-of-00001.parquet");
    hub.corrupt(REPO, "data/dev.jsonl");
    let got = snapshot(&python, &fixture, &hub, REPO, "main", None);
    let files = ok_files(&got);
    let mut flipped = parquet.clone();
    flipped[0] ^= 1;
    assert_eq!(
        files["data/test-00000-of-00001.parquet"],
        sha256_hex(&flipped)
    );
    let mut flipped = jsonl.clone();
    flipped[0] ^= 1;
    assert_eq!(files["data/dev.jsonl"], sha256_hex(&flipped));
}

/// What the tests serve as Parquet is Parquet to pyarrow too: the rows as
/// written (lists as JSON strings, null as null), string columns, SNAPPY.
#[test]
fn parquet_of_reads_back_in_pyarrow_as_the_rows_it_was_given() {
    let Some(python) = hf_python() else { return };
    let fixture = Fixture::new();
    let rows = [
        json!({"instance_id": "a__b-1", "FAIL_TO_PASS": ["t::x", "t::y"], "hints_text": ""}),
        json!({"instance_id": "a__b-2", "FAIL_TO_PASS": "[]", "version": 1.5, "hints_text": null}),
    ];
    let file = fixture.path("rows.parquet");
    std::fs::write(&file, parquet_of(&rows)).expect("write");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/hub_client.py");
    let output = Command::new(&python)
        .args([script, "read-parquet"])
        .arg(&file)
        .output()
        .expect("run hub_client.py");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let read: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(
        read["rows"],
        json!([
            {"instance_id": "a__b-1", "FAIL_TO_PASS": "[\"t::x\",\"t::y\"]", "hints_text": "", "version": null},
            {"instance_id": "a__b-2", "FAIL_TO_PASS": "[]", "hints_text": null, "version": "1.5"},
        ])
    );
    assert!(
        read["types"]
            .as_object()
            .is_some_and(|t| t.values().all(|v| v == "string")),
        "{read}"
    );
    assert_eq!(read["codecs"], json!(["SNAPPY"]), "{read}");
}

/// The Hub's failures are what the real client takes them for: a 503 of
/// the tree is retried (the tree is read with backoff); a connection
/// closed without an answer is the server disconnecting (which
/// huggingface_hub does not retry at a file's HEAD: the download fails);
/// a 500 of the info is a Hub that is down; a Hub dropped refuses
/// connections.
#[test]
fn failures_are_taken_by_huggingface_hub_for_a_hub_flaky_down_or_gone() {
    let Some(python) = hf_python() else { return };
    let fixture = Fixture::new();
    let hub = Hub::start();
    let (dataset, _, jsonl) = two_splits();
    hub.publish(dataset);
    hub.fail(Seen::is_tree, Failure::Status(503), 1);
    let got = snapshot(&python, &fixture, &hub, REPO, "main", None);
    assert_eq!(ok_files(&got)["data/dev.jsonl"], sha256_hex(&jsonl));
    assert_eq!(hub.count(Seen::is_tree), 2);

    let head_of_dev = |s: &Seen| s.method == "HEAD" && s.names("data/dev.jsonl");
    hub.fail(head_of_dev, Failure::Drop, 1);
    let got = snapshot(&python, &fixture, &hub, REPO, "main", None);
    assert_eq!(got["error"], "RemoteProtocolError", "{got}");
    assert_eq!(
        got["message"], "Server disconnected without sending a response.",
        "{got}"
    );

    hub.fail(Seen::is_info, Failure::Status(500), usize::MAX);
    let got = snapshot(&python, &fixture, &hub, REPO, "main", None);
    assert_eq!(got["error"], "LocalEntryNotFoundError", "{got}");

    let gone = Hub::start();
    gone.publish(two_splits().0);
    let endpoint_of_gone = gone.endpoint();
    drop(gone);
    let refused = std::net::TcpStream::connect(endpoint_of_gone.trim_start_matches("http://"));
    assert!(refused.is_err(), "a dropped Hub still answers");
}

/// `hold` keeps a request unanswered until the log says so, and
/// `wait_for` returns once a request has come: the real client's download
/// waits at the CDN until another request reaches the Hub.
#[test]
fn a_held_request_waits_for_the_request_it_is_held_for() {
    let Some(python) = hf_python() else { return };
    let fixture = Fixture::new();
    let hub = Hub::start();
    let (dataset, parquet, _) = two_splits();
    hub.publish(dataset);
    let release = "/api/datasets/acme/release";
    hub.hold(|s| s.cdn, move |log| log.iter().any(|s| s.path == release));
    std::thread::scope(|scope| {
        let download = scope.spawn(|| snapshot(&python, &fixture, &hub, REPO, "main", None));
        let held = hub.wait_for("the CDN download", |s| s.cdn);
        assert!(held.names(&sha256_hex(&parquet)));
        assert!(!download.is_finished(), "the held download ended");
        // Any request that reaches the Hub will do: a raw one here.
        let mut stream = std::net::TcpStream::connect(hub.endpoint().trim_start_matches("http://"))
            .expect("connect to the Hub");
        std::io::Write::write_all(
            &mut stream,
            format!("GET {release} HTTP/1.1\r\nHost: hub\r\n\r\n").as_bytes(),
        )
        .expect("send");
        let got = download.join().expect("the download's thread");
        assert_eq!(
            ok_files(&got)["data/test-00000-of-00001.parquet"],
            sha256_hex(&parquet)
        );
    });
}
