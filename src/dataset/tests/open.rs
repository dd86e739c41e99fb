//! Opening datasets against the scripted Hub: the download and its
//! checks, the cache reused with no network, offline mode, a resumed
//! download, a corrupt one, the Hub's refusals, and two openers at once.

use std::path::Path;

use parquet::basic::Compression;
use serde_json::json;

use super::rows::{TaskRow, row, write_parquet};
use super::server::{Reply, Server};
use super::{FakeFile, FakeHub, REPO, SHA, settings, sha256};
use crate::dataset::reference::Alias;
use crate::dataset::reference::tests::{ALIASES, aliases};
use crate::dataset::{Dataset, DatasetError, DatasetRef, HubSettings, open};

/// A port nothing listens on: every connection is refused.
const CLOSED: &str = "http://127.0.0.1:1";

fn reference(raw: &str) -> DatasetRef {
    DatasetRef::parse(raw, &aliases())
        .expect("a reference")
        .expect("well formed")
}

fn parquet_bytes(rows: &[TaskRow<'_>]) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("f.parquet");
    write_parquet(&path, &[rows], Compression::SNAPPY);
    std::fs::read(path).expect("read")
}

fn file(path: &str, bytes: impl Into<Vec<u8>>, lfs: bool) -> FakeFile {
    FakeFile {
        path: path.to_owned(),
        bytes: bytes.into(),
        lfs,
    }
}

/// A dataset with a card naming two splits: `test` of a JSON Lines file
/// (a plain git file) and a Parquet one (LFS), and `dev`.
fn two_split_hub() -> FakeHub {
    let card = json!({"license": "mit", "configs": [{"config_name": "default", "data_files": [
        {"split": "dev", "path": "data/dev-*"},
        {"split": "test", "path": "data/test-*"},
    ]}]});
    FakeHub::new(
        card,
        vec![
            file(".gitattributes", "*.parquet filter=lfs\n", false),
            file("README.md", "# card\n", false),
            file(
                "data/dev-00000-of-00001.jsonl",
                "{\"id\": \"dev-1\"}\n",
                false,
            ),
            file(
                "data/test-00000-of-00002.jsonl",
                "{\"id\": \"t-1\"}\n{\"id\": \"t-2\"}\n",
                false,
            ),
            file(
                "data/test-00001-of-00002.parquet",
                parquet_bytes(&[row("t-3"), row("t-4")]),
                true,
            ),
        ],
    )
}

fn ids(dataset: &Dataset) -> Vec<String> {
    dataset
        .rows()
        .map(|r| {
            let (_, fields) = r.expect("row");
            let id = fields
                .get("id")
                .or_else(|| fields.get("instance_id"))
                .expect("id");
            id.as_str().expect("text").to_owned()
        })
        .collect()
}

fn offline(settings: &HubSettings) -> HubSettings {
    HubSettings {
        offline: true,
        endpoint: CLOSED.to_owned(),
        ..settings.clone()
    }
}

#[test]
fn a_split_is_downloaded_checked_and_then_read_from_the_cache_with_no_network() {
    let hub = two_split_hub().start();
    let cache = tempfile::tempdir().expect("tempdir");
    let online = hub.settings(cache.path(), Some("hf_secret"));
    let dataset = open(&reference("hf:o/n:test"), &online).expect("open");
    assert_eq!(dataset.sha, SHA);
    assert_eq!(
        dataset.reference.to_string(),
        format!("hf:{REPO}@{SHA}:test")
    );
    assert!(dataset.warnings.is_empty());
    let paths: Vec<&str> = dataset.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "data/test-00000-of-00002.jsonl",
            "data/test-00001-of-00002.parquet"
        ]
    );
    assert_eq!(ids(&dataset), ["t-1", "t-2", "t-3", "t-4"]);
    let parquet = &dataset.files[1];
    assert_eq!(
        parquet.sha256.as_deref(),
        Some(sha256(&hub.hub.files[4].bytes).as_str())
    );

    // One revision, the listing of data/ page by page (one file a page),
    // then each file once; the LFS one through the CDN, which never sees
    // the token (reqwest drops it on a redirect to another host).
    let seen = hub.paths();
    assert_eq!(seen[0], format!("/api/datasets/{REPO}/revision/main"));
    assert_eq!(
        seen.iter().filter(|p| p.contains("/tree/")).count(),
        3,
        "{seen:#?}"
    );
    assert!(
        seen[1].ends_with(&format!("/tree/{SHA}/data?recursive=true")),
        "{seen:#?}"
    );
    assert_eq!(
        seen.iter().filter(|p| p.contains("/resolve/")).count(),
        2,
        "{seen:#?}"
    );
    for request in hub.server.requests() {
        assert_eq!(
            request.header("Authorization"),
            Some("Bearer hf_secret"),
            "{}",
            request.path
        );
    }
    let cdn = hub.cdn.requests();
    assert_eq!(cdn.len(), 1);
    assert_eq!(cdn[0].header("Authorization"), None);

    // The layout: the ref, the manifest, the blobs and snapshot links.
    let root = cache.path().join("datasets/hf/o--n");
    assert_eq!(
        std::fs::read_to_string(root.join("refs/main")).expect("ref"),
        SHA
    );
    assert!(root.join(format!("manifests/{SHA}.json")).is_file());
    assert!(
        root.join("blobs")
            .join(sha256(&hub.hub.files[4].bytes))
            .is_file()
    );
    let link = root.join(format!("snapshots/{SHA}/data/test-00000-of-00002.jsonl"));
    assert!(
        std::fs::symlink_metadata(&link)
            .expect("link")
            .file_type()
            .is_symlink()
    );
    assert_eq!(dataset.files[0].local, link);

    // Pinned to the commit: no request at all (nothing listens).
    let closed = settings(CLOSED, cache.path(), None);
    let pinned = open(&reference(&format!("hf:o/n@{SHA}:test")), &closed).expect("pinned");
    assert!(pinned.warnings.is_empty());
    assert_eq!(pinned.content_sha256(), dataset.content_sha256());
    assert_eq!(ids(&pinned), ["t-1", "t-2", "t-3", "t-4"]);
    // A named revision with the Hub out of reach: the cached ref, warned.
    let stale = open(&reference("hf:o/n:test"), &closed).expect("fallback");
    assert_eq!(stale.sha, SHA);
    assert_eq!(stale.warnings.len(), 1);
    assert!(
        stale.warnings[0].contains("could not be reached") && stale.warnings[0].contains(CLOSED),
        "{:?}",
        stale.warnings
    );
    // Offline: the ref, with no warning and no request.
    let quiet = open(&reference("hf:o/n:test"), &offline(&online)).expect("offline");
    assert!(quiet.warnings.is_empty());
    // Offline, a split whose files were never fetched: exit 3.
    let err = open(&reference("hf:o/n:dev"), &offline(&online)).expect_err("dev not cached");
    assert!(err.unreachable());
    assert!(
        err.to_string().contains("files of this split at commit"),
        "{err}"
    );

    // Online again: the cached split costs one request; another split of
    // the same commit its listing (3 pages) and its one file.
    let before = hub.paths().len();
    open(&reference("hf:o/n:test"), &online).expect("again");
    assert_eq!(hub.paths().len(), before + 1);
    let dev = open(&reference("hf:o/n@v1:dev"), &online).expect("dev");
    assert_eq!(ids(&dev), ["dev-1"]);
    let new: Vec<String> = hub.paths()[before + 1..].to_vec();
    assert_eq!(new.len(), 5, "{new:#?}");
    assert!(new[4].ends_with(
        "/resolve/1234567890abcdef1234567890abcdef12345678/data/dev-00000-of-00001.jsonl"
    ));
    assert_eq!(
        std::fs::read_to_string(root.join("refs/v1")).expect("ref"),
        SHA
    );
}

#[test]
fn a_cut_download_resumes_with_a_range() {
    let text = "y".repeat(50_000);
    let rows = [
        TaskRow {
            problem: Some(&text),
            ..row("p-1")
        },
        row("p-2"),
    ];
    let bytes = parquet_bytes(&rows);
    let hub = FakeHub::new(json!(null), vec![file("test.parquet", bytes.clone(), true)]);
    hub.cut_once
        .lock()
        .expect("cut")
        .insert("test.parquet".to_owned());
    let hub = hub.start();
    let cache = tempfile::tempdir().expect("tempdir");
    let dataset = open(&reference("hf:o/n"), &hub.settings(cache.path(), None)).expect("open");
    assert_eq!(dataset.split, "test");
    assert_eq!(ids(&dataset), ["p-1", "p-2"]);
    let cdn = hub.cdn.requests();
    assert_eq!(cdn.len(), 2);
    assert_eq!(cdn[0].header("Range"), None);
    assert_eq!(
        cdn[1].header("Range"),
        Some(format!("bytes={}-", bytes.len() / 2).as_str())
    );

    // A partial file left by a run that was killed: continued, not
    // fetched again; and one whose bytes are wrong: fetched again whole.
    let good = bytes[..1000].to_vec();
    let junk = vec![0u8; 1000];
    for (prefix, want) in [
        (good, vec![Some("bytes=1000-")]),
        (junk, vec![Some("bytes=1000-"), None]),
    ] {
        let cache = tempfile::tempdir().expect("tempdir");
        let hub =
            FakeHub::new(json!(null), vec![file("test.parquet", bytes.clone(), true)]).start();
        let blobs = cache.path().join("datasets/hf/o--n/blobs");
        std::fs::create_dir_all(&blobs).expect("mkdir");
        std::fs::write(
            blobs.join(format!("{}.incomplete", sha256(&bytes))),
            &prefix,
        )
        .expect("write");
        let dataset =
            open(&reference("hf:o/n:test"), &hub.settings(cache.path(), None)).expect("open");
        assert_eq!(ids(&dataset), ["p-1", "p-2"]);
        let cdn = hub.cdn.requests();
        let asked: Vec<Option<&str>> = cdn.iter().map(|r| r.header("Range")).collect();
        assert_eq!(asked, want);
        assert_no_partials(cache.path());
    }
}

#[test]
fn a_corrupt_download_is_fetched_once_more_then_an_error_and_deleted() {
    let hub = FakeHub::new(
        json!(null),
        vec![file("data/test.jsonl", "{\"id\": \"a\"}\n", false)],
    );
    hub.corrupt
        .lock()
        .expect("corrupt")
        .insert("data/test.jsonl".to_owned(), 1);
    let hub = hub.start();
    let cache = tempfile::tempdir().expect("tempdir");
    let dataset =
        open(&reference("hf:o/n:test"), &hub.settings(cache.path(), None)).expect("second try");
    assert_eq!(ids(&dataset), ["a"]);
    assert_eq!(
        hub.paths()
            .iter()
            .filter(|p| p.contains("/resolve/"))
            .count(),
        2
    );

    let hub = FakeHub::new(
        json!(null),
        vec![file("data/test.jsonl", "{\"id\": \"a\"}\n", false)],
    );
    hub.corrupt
        .lock()
        .expect("corrupt")
        .insert("data/test.jsonl".to_owned(), 2);
    let hub = hub.start();
    let cache = tempfile::tempdir().expect("tempdir");
    let err =
        open(&reference("hf:o/n:test"), &hub.settings(cache.path(), None)).expect_err("corrupt");
    let text = err.to_string();
    let oid = super::git_oid(b"{\"id\": \"a\"}\n");
    assert!(matches!(err, DatasetError::Corrupt { .. }), "{text}");
    assert!(
        text.contains("data/test.jsonl does not match the Hub's hash")
            && text.contains(&oid)
            && text.contains("run again"),
        "{text}"
    );
    assert!(!err.unreachable());
    let blobs = cache.path().join("datasets/hf/o--n/blobs");
    assert_eq!(
        std::fs::read_dir(&blobs).expect("blobs").count(),
        0,
        "the bad copy is deleted"
    );
}

/// A Hub that gives every request the same answer.
fn answering(reply: Reply) -> Server {
    Server::start(move |_| reply.clone())
}

#[test]
fn the_hubs_refusals_say_what_to_do_and_never_show_the_token() {
    let cache = tempfile::tempdir().expect("tempdir");
    let missing = answering(Reply::status(401).header("X-Error-Code", "RepoNotFound"));
    let err = open(
        &reference("hf:o/n"),
        &settings(&missing.url, cache.path(), None),
    )
    .expect_err("401");
    let text = err.to_string();
    assert!(matches!(err, DatasetError::NoSuchDataset { .. }), "{text}");
    assert!(
        text.contains("private or gated")
            && text.contains("set HF_TOKEN")
            && text.contains("no token was sent"),
        "{text}"
    );
    assert!(!err.unreachable());

    let gated = answering(Reply::status(403).header("X-Error-Code", "GatedRepo"));
    let err = open(
        &reference("hf:o/n"),
        &settings(&gated.url, cache.path(), Some("hf_secret")),
    )
    .expect_err("403");
    let text = err.to_string();
    assert!(matches!(err, DatasetError::Denied { .. }), "{text}");
    assert!(
        text.contains(&format!("{}/datasets/o/n", gated.url)) && text.contains("token sent"),
        "{text}"
    );
    assert!(
        !text.contains("hf_secret") && !format!("{err:?}").contains("hf_secret"),
        "{text}"
    );

    let hub = two_split_hub().start();
    let err = open(
        &reference("hf:o/n@nope:test"),
        &hub.settings(cache.path(), None),
    )
    .expect_err("revision");
    assert!(
        matches!(err, DatasetError::NoSuchRevision { ref revision, .. } if revision == "nope"),
        "{err}"
    );
    let err =
        open(&reference("hf:o/n:tset"), &hub.settings(cache.path(), None)).expect_err("split");
    assert!(
        err.to_string()
            .contains("no split `tset`; the dataset has: dev, test"),
        "{err}"
    );

    let broken = answering(Reply::bytes(500, b"{\"error\": \"boom\"}".to_vec()));
    let err = open(
        &reference("hf:o/n"),
        &settings(&broken.url, cache.path(), None),
    )
    .expect_err("500");
    assert!(err.unreachable(), "{err}");
    assert_eq!(broken.requests().len(), 3, "tried three times");
    assert!(err.to_string().contains("500"), "{err}");
}

#[test]
fn a_passing_5xx_is_tried_again() {
    let hub = two_split_hub();
    *hub.revision_replies.lock().expect("replies") = vec![Reply::status(503), Reply::status(502)];
    let hub = hub.start();
    let cache = tempfile::tempdir().expect("tempdir");
    let dataset =
        open(&reference("hf:o/n:dev"), &hub.settings(cache.path(), None)).expect("after retries");
    assert_eq!(ids(&dataset), ["dev-1"]);
    assert_eq!(
        hub.paths()
            .iter()
            .filter(|p| p.contains("/revision/"))
            .count(),
        3
    );
}

#[test]
fn no_network_and_nothing_cached_is_exit_3() {
    let cache = tempfile::tempdir().expect("tempdir");
    let err = open(
        &reference("swe-bench-lite"),
        &settings(CLOSED, cache.path(), None),
    )
    .expect_err("unreachable");
    assert!(err.unreachable());
    let text = err.to_string();
    assert!(
        text.contains(CLOSED) && text.contains("could not connect"),
        "{text}"
    );
    assert!(
        text.starts_with("failed to open dataset hf:SWE-bench/SWE-bench_Lite:test"),
        "{text}"
    );

    let offline = offline(&settings(CLOSED, cache.path(), None));
    for raw in ["hf:o/n:test", &format!("hf:o/n@{SHA}")] {
        let err = open(&reference(raw), &offline).expect_err("offline");
        assert!(matches!(err, DatasetError::NotCached { .. }), "{err}");
        assert!(err.unreachable());
        assert!(
            err.to_string().contains("run once with the network"),
            "{err}"
        );
    }
}

#[test]
fn two_openers_of_one_cache_download_each_file_once() {
    let hub = two_split_hub().start();
    let cache = tempfile::tempdir().expect("tempdir");
    let settings = hub.settings(cache.path(), None);
    let opened: Vec<Dataset> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2)
            .map(|_| scope.spawn(|| open(&reference("hf:o/n:test"), &settings).expect("open")))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    assert_eq!(ids(&opened[0]), ids(&opened[1]));
    let resolves = hub
        .paths()
        .iter()
        .filter(|p| p.contains("/resolve/"))
        .count();
    assert_eq!(resolves, 2, "each of the two files once");
    assert_no_partials(cache.path());
}

fn assert_no_partials(cache: &Path) {
    let blobs = cache.join("datasets/hf/o--n/blobs");
    for entry in std::fs::read_dir(blobs).expect("blobs") {
        let name = entry.expect("entry").file_name();
        assert!(!name.to_string_lossy().ends_with(".incomplete"), "{name:?}");
    }
}

#[test]
fn an_alias_opens_its_repo_and_split() {
    let lite: &Alias = ALIASES
        .iter()
        .find(|a| a.name == "swe-bench-lite")
        .expect("lite");
    let parsed = reference("swe-bench-lite");
    assert_eq!(parsed.alias, Some(lite));
    // Its reference, opened against a Hub that has no such dataset, names
    // the repo it stands for.
    let cache = tempfile::tempdir().expect("tempdir");
    let hub = two_split_hub().start();
    let err = open(&parsed, &hub.settings(cache.path(), None)).expect_err("not the fake's repo");
    assert!(
        matches!(err, DatasetError::NoSuchDataset { ref url, .. } if url.ends_with("/datasets/SWE-bench/SWE-bench_Lite")),
        "{err}"
    );
}
