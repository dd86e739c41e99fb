//! The pipeline around the agent, through the real binary: the task file is
//! checked before anything runs, checkout errors stay with their task, the
//! repo is fetched once, hidden tests cannot be tampered with, the diff holds
//! every change, setup runs first, working copies are kept or deleted, task
//! selection, the run folder guard and Ctrl-C.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Mutex, PoisonError, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::harness::{
    Fixture, RunOutput, assert_patches_apply, diff_of, git, numbered_tasks, onebash,
    scripted_agent, task, tool_answers,
};
use crate::support::server::{ScriptedServer, text_reply};

/// The (task_id, epoch) pairs of results.csv, sorted.
fn selected(run: &RunOutput) -> BTreeSet<(String, String)> {
    run.rows()
        .into_iter()
        .map(|row| (row["task_id"].clone(), row["epoch"].clone()))
        .collect()
}

fn ids(run: &RunOutput) -> Vec<String> {
    let mut ids: Vec<String> = run
        .rows()
        .into_iter()
        .map(|r| r["task_id"].clone())
        .collect();
    ids.sort();
    ids
}

// ---------------------------------------------------------------------------
// 1. The task file is checked before anything runs.
// ---------------------------------------------------------------------------

fn good_line() -> Value {
    json!({
        "id": "good",
        "repo": "repo",
        "base_commit": "HEAD",
        "problem_statement": "p",
        "test_command": "true",
    })
}

const BAD_LINES: &[(&str, &str)] = &[
    (
        r#"{"id":"good","repo":"repo","base_commit":"HEAD","problem_statement":"p","test_command":"true"}"#,
        "duplicate id \"good\"",
    ),
    (
        r#"{"id":"m","repo":"repo","base_commit":"HEAD","problem_statement":"p"}"#,
        "missing required field `test_command`",
    ),
    (
        r#"{"id":7,"repo":"repo","base_commit":"HEAD","problem_statement":"p","test_command":"true"}"#,
        "`id` must be a string, got a number",
    ),
    (
        r#"{"id":"w","repo":"repo","base_commit":"HEAD","problem_statement":["p"],"test_command":"true"}"#,
        "`problem_statement` must be a string, got a list",
    ),
    (
        r#"{"id":"../x","repo":"repo","base_commit":"HEAD","problem_statement":"p","test_command":"true"}"#,
        "`id` \"../x\" contains '/'",
    ),
    (r#"{"id":"j","repo":"repo""#, "not valid JSON"),
];

fn assert_nothing_ran(run: &RunOutput, server: &ScriptedServer) {
    assert_eq!(run.code, 2, "stderr:\n{}", run.stderr);
    assert!(!run.out.exists(), "the run folder was created");
    assert!(server.requests().is_empty());
}

#[test]
fn each_bad_task_line_is_reported_with_file_and_line_and_nothing_runs() {
    let server = scripted_agent(&[]);
    for (bad, expected) in BAD_LINES {
        let fixture = Fixture::new();
        let path = fixture.path("tasks.jsonl");
        std::fs::write(&path, format!("{}\n{bad}\n", good_line())).expect("write");
        let run = fixture.run_scripted(&path, &server, &[]);
        assert_nothing_ran(&run, &server);
        let wanted = format!("{}:2: {expected}", path.display());
        assert!(
            run.stderr.contains(&wanted),
            "{wanted:?} missing from:\n{}",
            run.stderr
        );
        assert!(!run.stderr.contains(":1:"), "{}", run.stderr);
    }
}

#[test]
fn every_bad_line_of_a_task_file_is_listed_at_once() {
    let server = scripted_agent(&[]);
    let fixture = Fixture::new();
    let path = fixture.path("tasks.jsonl");
    // Line 2 is blank: it is skipped but still counted.
    let mut text = format!("{}\n\n", good_line());
    for (bad, _) in BAD_LINES {
        text.push_str(bad);
        text.push('\n');
    }
    std::fs::write(&path, text).expect("write");
    let run = fixture.run_scripted(&path, &server, &[]);
    assert_nothing_ran(&run, &server);
    for (i, (_, expected)) in BAD_LINES.iter().enumerate() {
        let wanted = format!("{}:{}: {expected}", path.display(), i + 3);
        assert!(
            run.stderr.contains(&wanted),
            "{wanted:?} missing from:\n{}",
            run.stderr
        );
    }
}

// ---------------------------------------------------------------------------
// 2. A checkout error is the task's, not the run's.
// ---------------------------------------------------------------------------

#[test]
fn bad_repo_or_commit_is_a_checkout_error_of_that_task_only() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let missing_repo = fixture.path("no-such-repo");
    let missing_sha = "deadbeef".repeat(5);
    let tasks = fixture.tasks(&[
        task("good", &repo, &sha, "true", json!({})),
        task("bad-repo", &missing_repo, &sha, "true", json!({})),
        task("bad-commit", &repo, &missing_sha, "true", json!({})),
        task("bad-rev", &repo, "no-such-branch", "true", json!({})),
        task("good-too", &repo, &sha, "true", json!({})),
    ]);
    let server = scripted_agent(&[]);
    let run = fixture.run_scripted(&tasks, &server, &["-j", "2"]);
    assert_eq!(run.code, 1, "stderr:\n{}", run.stderr);
    assert_eq!(run.rows().len(), 5);
    for good in ["good", "good-too"] {
        assert_eq!(run.row(good)["status"], "passed", "{:?}", run.row(good));
    }
    let cases = [
        ("bad-repo", missing_repo.display().to_string(), sha.clone()),
        (
            "bad-commit",
            repo.display().to_string(),
            missing_sha.clone(),
        ),
        (
            "bad-rev",
            repo.display().to_string(),
            "no-such-branch".to_owned(),
        ),
    ];
    for (id, repo_named, commit) in &cases {
        let row = run.row(id);
        assert_eq!(row["status"], "error", "{row:?}");
        assert_eq!(row["exit_reason"], "checkout_error", "{row:?}");
        assert_eq!(row["passed"], "false");
        assert_eq!(row["turns"], "0");
        assert!(row["error"].contains(repo_named.as_str()), "{row:?}");
        assert!(row["error"].contains(commit.as_str()), "{row:?}");
        let end = run.events(id, "end");
        assert_eq!(end.len(), 1);
        assert_eq!(end[0]["exit_reason"], "checkout_error");
    }
    // The model was never asked about a task that could not be checked out.
    for request in server.requests() {
        assert!(!request.raw_body.contains("Problem of task bad-"));
    }
}

// ---------------------------------------------------------------------------
// 3. One fetch per repo per run; none when the cache holds a pinned commit.
// ---------------------------------------------------------------------------

fn fetched_flags(run: &RunOutput, ids: &[String]) -> Vec<bool> {
    ids.iter()
        .map(|id| {
            let checkout = run.events(id, "checkout");
            assert_eq!(checkout.len(), 1, "{id}: {checkout:?}");
            checkout[0]["fetched"].as_bool().expect("fetched")
        })
        .collect()
}

#[test]
fn repo_is_fetched_once_per_run_and_not_again_from_the_cache() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let gold = diff_of(&repo, &[("fixed.txt", "fixed\n")]);
    let ids: Vec<String> = (0..10).map(|i| format!("t{i}")).collect();
    let tasks = fixture.tasks(&numbered_tasks(
        ids.len(),
        &repo,
        &sha,
        "test -f fixed.txt",
        json!({"gold_patch": gold}),
    ));

    let first = fixture.run_into(
        &fixture.path("out1"),
        &tasks,
        &["--model", "oracle", "-j", "4"],
        &[],
    );
    assert_eq!(first.code, 0, "stderr:\n{}", first.stderr);
    assert!(first.rows().iter().all(|r| r["status"] == "passed"));
    let flags = fetched_flags(&first, &ids);
    assert_eq!(flags.iter().filter(|f| **f).count(), 1, "{flags:?}");

    let second = fixture.run_into(
        &fixture.path("out2"),
        &tasks,
        &["--model", "oracle", "-j", "4"],
        &[],
    );
    assert_eq!(second.code, 0, "stderr:\n{}", second.stderr);
    assert!(second.rows().iter().all(|r| r["status"] == "passed"));
    let flags = fetched_flags(&second, &ids);
    assert!(flags.iter().all(|f| !f), "{flags:?}");
}

/// A repo with one packed commit and one loose commit on top, tagged v2;
/// returns the second commit's sha.
fn packed_and_loose_repo(fixture: &Fixture, name: &str) -> (PathBuf, String) {
    let (repo, _) = fixture.repo(name, &[("a.txt", "one\n")]);
    git(&repo, &["gc", "-q"]);
    std::fs::write(repo.join("b.txt"), "two\n").expect("write b.txt");
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "second"]);
    git(&repo, &["tag", "v2"]);
    let head = git(&repo, &["rev-parse", "HEAD"]);
    (repo, head)
}

/// (device, inode) of every file under `dir`, by path relative to it.
fn files_under(dir: &Path) -> HashMap<PathBuf, (u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut found = HashMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).expect("list the folder") {
            let path = entry.expect("list the folder").path();
            let meta = std::fs::symlink_metadata(&path).expect("stat");
            if meta.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(dir).expect("under dir").to_owned();
                found.insert(rel, (meta.dev(), meta.ino()));
            }
        }
    }
    found
}

/// The objects folder of the one mirror in `<fixture>/cache`.
fn mirror_objects(fixture: &Fixture) -> PathBuf {
    let mirrors: Vec<PathBuf> = std::fs::read_dir(fixture.path("cache/repos"))
        .expect("the cache has repos")
        .map(|entry| entry.expect("list").path())
        .filter(|path| path.extension().is_some_and(|e| e == "git"))
        .collect();
    assert_eq!(mirrors.len(), 1, "{mirrors:?}");
    mirrors[0].join("objects")
}

#[test]
fn a_local_repo_seeds_the_cache_with_links_to_its_objects() {
    // libgit2 fetching from a path re-packs the whole history (seconds for
    // a long one); onebash links the repo's objects into the mirror instead.
    let fixture = Fixture::new();
    let (repo, head) = packed_and_loose_repo(&fixture, "repo");
    let clean = "test -z \"$(git status --porcelain)\"";
    let tasks = fixture.tasks(&[
        task(
            "pinned",
            &repo,
            &head,
            &format!("test -f b.txt && {clean}"),
            json!({}),
        ),
        task("branch", &repo, "main", "test -f b.txt", json!({})),
        task("tag", &repo, "v2", "test -f b.txt", json!({})),
        task(
            "older",
            &repo,
            "HEAD~1",
            &format!("test ! -e b.txt && {clean}"),
            json!({}),
        ),
    ]);
    let run = fixture.run(&tasks, &["--model", "noop", "-j", "1", "--sandbox", "none"]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    for row in run.rows() {
        assert_eq!(row["status"], "passed", "{row:?}");
    }
    let ids: Vec<String> = ["pinned", "branch", "tag", "older"]
        .map(String::from)
        .into();
    assert_eq!(fetched_flags(&run, &ids), [true, false, false, false]);

    // Every pack, index and loose object of the repo is the same file in
    // the mirror.
    let source = files_under(&repo.join(".git/objects"));
    let mirror = files_under(&mirror_objects(&fixture));
    let needed: Vec<_> = source
        .iter()
        .filter(|(rel, _)| {
            let loose = rel.parent().is_some_and(|dir| dir.as_os_str().len() == 2);
            loose || rel.extension().is_some_and(|e| e == "pack" || e == "idx")
        })
        .collect();
    assert!(
        needed.len() >= 4,
        "a pack, its index, loose objects: {needed:?}"
    );
    for (rel, id) in needed {
        assert_eq!(mirror.get(rel), Some(id), "{} is not linked", rel.display());
    }
}

#[test]
fn a_mirror_left_half_made_by_a_crash_is_made_again() {
    let fixture = Fixture::new();
    let (repo, head) = packed_and_loose_repo(&fixture, "repo");
    let tasks = fixture.tasks(&[task("t", &repo, &head, "test -f b.txt", json!({}))]);
    let args = ["--model", "noop", "--sandbox", "none"];
    let first = fixture.run_into(&fixture.path("out1"), &tasks, &args, &[]);
    assert_eq!(
        first.row("t")["status"],
        "passed",
        "stderr:\n{}",
        first.stderr
    );

    // What a kill -9 while the mirror was being made could leave: the
    // staging folder, with objects but no refs, and no mirror; or a folder
    // at the mirror's place that is not a repository.
    let mirror = mirror_objects(&fixture)
        .parent()
        .expect("mirror")
        .to_owned();
    let staging = mirror.with_extension("new");
    std::fs::rename(&mirror, &staging).expect("move the mirror aside");
    std::fs::remove_dir_all(staging.join("refs")).expect("drop the refs");
    let second = fixture.run_into(&fixture.path("out2"), &tasks, &args, &[]);
    assert_eq!(
        second.row("t")["status"],
        "passed",
        "stderr:\n{}",
        second.stderr
    );
    assert_eq!(fetched_flags(&second, &["t".to_owned()]), [true]);
    assert!(!staging.exists());

    std::fs::remove_dir_all(&mirror).expect("drop the mirror");
    std::fs::create_dir_all(mirror.join("objects")).expect("a folder that is no repo");
    let third = fixture.run_into(&fixture.path("out3"), &tasks, &args, &[]);
    assert_eq!(
        third.row("t")["status"],
        "passed",
        "stderr:\n{}",
        third.stderr
    );
}

#[test]
fn a_local_repo_with_alternates_of_its_own_is_fetched_not_linked() {
    // Its own objects folder is incomplete: linking it would leave the
    // mirror without the objects that live in the other repo.
    let fixture = Fixture::new();
    let (origin, _) = packed_and_loose_repo(&fixture, "origin");
    let origin_path = origin.to_str().expect("UTF-8 path");
    git(
        fixture.dir.path(),
        &["clone", "-q", "--shared", origin_path, "shared"],
    );
    let shared = fixture.path("shared");
    std::fs::write(shared.join("c.txt"), "three\n").expect("write c.txt");
    git(&shared, &["add", "-A"]);
    git(&shared, &["commit", "-qm", "third"]);
    // Only its own new commit is named by the refs onebash fetches, so a
    // mirror that holds that commit would believe it has everything.
    git(&shared, &["tag", "-d", "v2"]);
    let head = git(&shared, &["rev-parse", "HEAD"]);
    let tasks = fixture.tasks(&[task(
        "shared",
        &shared,
        &head,
        "test -f a.txt && test -f b.txt && test -f c.txt",
        json!({}),
    )]);
    let run = fixture.run_noop(&tasks, &[]);
    assert_eq!(
        run.row("shared")["status"],
        "passed",
        "stderr:\n{}",
        run.stderr
    );
    let origin_ids: Vec<_> = files_under(&origin.join(".git/objects"))
        .into_values()
        .collect();
    let mirror = files_under(&mirror_objects(&fixture));
    assert!(mirror.keys().any(|rel| rel.starts_with("pack")));
    assert!(mirror.values().all(|id| !origin_ids.contains(id)));
}

#[test]
fn attributes_in_the_tree_convert_line_endings_and_expand_ident_as_git_does() {
    // onebash skips libgit2's content filters when nothing can turn one
    // on; a .gitattributes deep in the tree must still turn them on.
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo(
        "repo",
        &[
            ("README.md", "top\n"),
            ("sub/deeper/.gitattributes", "*.txt eol=crlf\n*.c ident\n"),
            ("sub/deeper/a.txt", "x\ny\n"),
            ("sub/deeper/id.c", "/* $Id$ */\n"),
        ],
    );
    let check = "cd sub/deeper && printf 'x\\r\\ny\\r\\n' | cmp - a.txt \
        && grep -q '\\$Id: [0-9a-f]\\{40\\} \\$' id.c && cmp ../../README.md - <<< top";
    let tasks = fixture.tasks(&[task("attrs", &repo, &sha, check, json!({}))]);
    let run = fixture.run_noop(&tasks, &[]);
    assert_eq!(
        run.row("attrs")["status"],
        "passed",
        "stderr:\n{}",
        run.stderr
    );
}

#[test]
fn line_ending_settings_outside_the_repo_apply_to_the_checkout() {
    // The user's git settings (core.autocrlf, a global attributes file)
    // shape a checkout with git; they shape onebash's the same way.
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("a.txt", "x\ny\n")]);
    let crlf = "printf 'x\\r\\ny\\r\\n' | cmp - a.txt";
    let tasks = fixture.tasks(&[task("t", &repo, &sha, crlf, json!({}))]);
    let settings: [(&str, &str, &str); 2] = [
        ("autocrlf", ".gitconfig", "[core]\n\tautocrlf = true\n"),
        ("attributes", ".config/git/attributes", "*.txt eol=crlf\n"),
    ];
    for (name, file, text) in settings {
        let home = fixture.path(&format!("home-{name}"));
        let file = home.join(file);
        std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        std::fs::write(&file, text).expect("write the setting");
        let xdg = home.join(".config");
        let (home, xdg) = (home.to_str().expect("UTF-8"), xdg.to_str().expect("UTF-8"));
        let run = fixture.run_into(
            &fixture.path(&format!("out-{name}")),
            &tasks,
            &["--model", "noop", "--sandbox", "none"],
            &[("HOME", home), ("XDG_CONFIG_HOME", xdg)],
        );
        assert_eq!(run.row("t")["status"], "passed", "{name}: {}", run.stderr);
    }
}

#[test]
fn two_processes_can_share_a_fresh_cache() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let gold = diff_of(&repo, &[("fixed.txt", "fixed\n")]);
    let tasks = fixture.tasks(&numbered_tasks(
        6,
        &repo,
        &sha,
        "test -f fixed.txt",
        json!({"gold_patch": gold}),
    ));
    // Both start on an empty cache at once: the file lock makes one create
    // and fetch the mirror while the other waits, then finds the commit.
    let spawn = |out: &str| {
        onebash()
            .arg("run")
            .arg(&tasks)
            .args(["--model", "oracle", "-j", "3", "-o"])
            .arg(fixture.path(out))
            .arg("--cache-dir")
            .arg(fixture.path("cache"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn onebash")
    };
    let (a, b) = (spawn("out-a"), spawn("out-b"));
    for (child, name) in [(a, "out-a"), (b, "out-b")] {
        let output = child.wait_with_output().expect("wait");
        assert_eq!(
            output.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let text = std::fs::read_to_string(fixture.path(name).join("results.csv")).expect("csv");
        assert_eq!(
            text.lines()
                .filter(|l| l.contains(",passed,completed,true,"))
                .count(),
            6,
            "{text}"
        );
        assert_patches_apply(&fixture.path(name));
    }
}

// ---------------------------------------------------------------------------
// 4. The hidden tests: restored, applied, run, logged.
// ---------------------------------------------------------------------------

#[test]
fn test_patch_undoes_tampering_with_the_tests_and_adds_new_test_files() {
    let fixture = Fixture::new();
    let check = "test \"$(cat value.txt)\" = 2\n";
    let (repo, sha) = fixture.repo("repo", &[("value.txt", "1\n"), ("tests/check.sh", check)]);
    let edit_patch = diff_of(
        &repo,
        &[("tests/check.sh", &format!("# hidden test\n{check}"))],
    );
    let new_file_patch = diff_of(
        &repo,
        &[("tests/new_test.sh", "test \"$(cat value.txt)\" = 1\n")],
    );
    let tamper = "printf 'exit 0\\n' > tests/check.sh";
    let tamper_and_fix = "printf 'exit 0\\n' > tests/check.sh; echo 2 > value.txt";
    let squat = "mkdir -p tests && printf 'exit 1\\n' > tests/new_test.sh";
    let tasks = fixture.tasks(&[
        task(
            "tamper",
            &repo,
            &sha,
            "bash tests/check.sh",
            json!({"test_patch": edit_patch}),
        ),
        task(
            "tamper-and-fix",
            &repo,
            &sha,
            "bash tests/check.sh",
            json!({"test_patch": edit_patch}),
        ),
        task(
            "new-file",
            &repo,
            &sha,
            "bash tests/new_test.sh && echo new test ran",
            json!({"test_patch": new_file_patch}),
        ),
    ]);
    let server = scripted_agent(&[
        ("tamper", &[tamper]),
        ("tamper-and-fix", &[tamper_and_fix]),
        ("new-file", &[squat]),
    ]);
    let run = fixture.run_scripted(&tasks, &server, &["-j", "3"]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);

    let row = run.row("tamper");
    assert_eq!(row["status"], "failed", "{row:?}");
    assert_eq!(row["exit_reason"], "completed");
    assert_eq!(row["test_exit_code"], "1");
    let test = &run.events("tamper", "test")[0];
    assert_eq!(test["test_patch_files"], json!(["tests/check.sh"]));
    assert_eq!(test["exit_code"], 1);
    assert!(run.task_dir("tamper").join("test.log").is_file());
    // The agent's diff still shows what it did to the tests.
    let diff = std::fs::read_to_string(run.task_dir("tamper").join("patch.diff")).expect("diff");
    assert!(diff.contains("+exit 0"), "{diff}");

    let row = run.row("tamper-and-fix");
    assert_eq!(row["status"], "passed", "{row:?}");
    assert_eq!(row["test_exit_code"], "0");

    let row = run.row("new-file");
    assert_eq!(
        row["status"],
        "passed",
        "{row:?}\n{:?}",
        run.events("new-file", "test")
    );
    assert_eq!(row["test_exit_code"], "0");
    let test = &run.events("new-file", "test")[0];
    assert_eq!(test["test_patch_files"], json!(["tests/new_test.sh"]));
    assert_eq!(test["log_path"], "test.log");
    let log = std::fs::read_to_string(run.task_dir("new-file").join("test.log")).expect("log");
    assert_eq!(log, "new test ran\n");
    assert!(
        Path::new("/dev/null").exists() && !Path::new("/dev/null").is_file(),
        "restoring the files of a patch touched /dev/null"
    );
}

// ---------------------------------------------------------------------------
// 5. The agent's diff holds every change.
// ---------------------------------------------------------------------------

#[test]
fn agent_diff_holds_modified_new_and_deleted_files_and_applies_to_the_base() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo(
        "repo",
        &[
            ("README.md", "hello\n"),
            ("src/gone.txt", "bye\n"),
            ("src/kept.txt", "same\n"),
        ],
    );
    let change = "echo changed >> README.md && mkdir -p newdir/deeper \
                  && printf 'no newline' > newdir/deeper/new.txt \
                  && echo top > top.txt && rm src/gone.txt";
    let tasks = fixture.tasks(&[task("t", &repo, &sha, "true", json!({}))]);
    let server = scripted_agent(&[("t", &[change])]);
    let run = fixture.run_scripted(&tasks, &server, &[]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);

    let diff_path = run.task_dir("t").join("patch.diff");
    let diff = std::fs::read_to_string(&diff_path).expect("patch.diff");
    for needle in [
        "diff --git a/README.md b/README.md",
        "+changed",
        "b/newdir/deeper/new.txt",
        "+no newline",
        "b/top.txt",
        "+top",
        "a/src/gone.txt",
        "-bye",
    ] {
        assert!(diff.contains(needle), "{needle:?} missing from:\n{diff}");
    }
    assert!(!diff.contains("kept.txt"), "{diff}");
    let diff_event = &run.events("t", "diff")[0];
    assert_eq!(diff_event["bytes"].as_u64(), Some(diff.len() as u64));

    // The diff rebuilds the agent's tree from the base commit.
    let copy = fixture.path("copy");
    git(
        fixture.dir.path(),
        &["clone", "-q", &repo.display().to_string(), "copy"],
    );
    git(&copy, &["checkout", "-q", &sha]);
    git(&copy, &["apply", &diff_path.display().to_string()]);
    let read = |rel: &str| std::fs::read_to_string(copy.join(rel)).expect("read");
    assert_eq!(read("README.md"), "hello\nchanged\n");
    assert_eq!(read("newdir/deeper/new.txt"), "no newline");
    assert_eq!(read("top.txt"), "top\n");
    assert!(!copy.join("src/gone.txt").exists());
}

// ---------------------------------------------------------------------------
// 6. setup_command runs before the agent; its failure is the task's error.
// ---------------------------------------------------------------------------

#[test]
fn setup_command_runs_first_and_its_failure_is_a_setup_error() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let tasks = fixture.tasks(&[
        task(
            "setup-ok",
            &repo,
            &sha,
            "test -f marker.txt",
            json!({"setup_command": "echo ready > marker.txt"}),
        ),
        task(
            "setup-fails",
            &repo,
            &sha,
            "true",
            json!({"setup_command": "echo preparing; echo broken >&2; exit 3"}),
        ),
    ]);
    let server = scripted_agent(&[("setup-ok", &["cat marker.txt"])]);
    let run = fixture.run_scripted(&tasks, &server, &[]);
    assert_eq!(run.code, 1, "stderr:\n{}", run.stderr);

    let row = run.row("setup-ok");
    assert_eq!(row["status"], "passed", "{row:?}");
    assert_eq!(
        tool_answers(&server, "setup-ok"),
        vec!["ready\n[exit code: 0]".to_owned()]
    );
    let kinds: Vec<String> = run
        .trajectory("setup-ok")
        .iter()
        .map(|e| e["event"].as_str().expect("event").to_owned())
        .collect();
    let setup_at = kinds
        .iter()
        .position(|k| k == "setup")
        .expect("setup event");
    let first_message = kinds.iter().position(|k| k == "message").expect("message");
    assert!(setup_at < first_message, "{kinds:?}");

    let row = run.row("setup-fails");
    assert_eq!(row["status"], "error", "{row:?}");
    assert_eq!(row["exit_reason"], "setup_error");
    assert_eq!(row["turns"], "0");
    assert!(row["error"].contains("setup_command failed"), "{row:?}");
    assert!(row["error"].contains("exit code 3"), "{row:?}");
    assert!(row["error"].contains("broken"), "{row:?}");
    let setup = &run.events("setup-fails", "setup")[0];
    assert_eq!(setup["exit_code"], 3);
    assert_eq!(setup["output"], "preparing\nbroken\n");
    for request in server.requests() {
        assert!(!request.raw_body.contains("Problem of task setup-fails."));
    }
}

/// When two stages fail, the row keeps both errors, the first one first:
/// a diff that cannot be saved (a folder stands where `patch.diff` goes,
/// made by the task's own setup_command) is not hidden by the tests then
/// timing out. Found when the diff's error was overwritten by the later one.
#[test]
fn a_failed_diff_save_is_kept_when_the_tests_then_time_out() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let patch_diff = fixture.path("out/tasks/t/epoch-1/patch.diff");
    let tasks = fixture.tasks(&[task(
        "t",
        &repo,
        &sha,
        "sleep 600",
        json!({
            "setup_command": format!("mkdir -p '{}'", patch_diff.display()),
            "test_timeout_s": 1,
        }),
    )]);
    let run = fixture.run_noop(&tasks, &[]);
    assert!(
        patch_diff.is_dir(),
        "the setup did not run:\n{}",
        run.stderr
    );
    let row = run.row("t");
    // The verdict stands, as when only the tests time out.
    assert_eq!(row["status"], "failed", "{row:?}");
    let error = &row["error"];
    let saved = error.find("failed to save the agent's diff");
    let timed_out = error.find("the test command timed out after 1 s");
    assert!(
        matches!((saved, timed_out), (Some(s), Some(t)) if s < t),
        "both errors, the first first: {row:?}"
    );
    assert!(error.contains("; then: "), "{row:?}");
    // The error names the file it could not write (it was a bare `Is a
    // directory (os error 21)`).
    assert!(
        error.contains(&format!(
            "failed to save the agent's diff to {}: ",
            patch_diff.display()
        )),
        "{row:?}"
    );
}

// ---------------------------------------------------------------------------
// 7. Working copies: deleted unless --keep-workdirs.
// ---------------------------------------------------------------------------

#[test]
fn working_copy_is_kept_only_with_keep_workdirs() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let tasks = fixture.tasks(&[task("t", &repo, &sha, "true", json!({}))]);
    let server = scripted_agent(&[("t", &["echo kept > kept.txt"])]);

    let kept = fixture.run_scripted_into("kept", &tasks, &server, &["--keep-workdirs"]);
    assert_eq!(kept.code, 0, "stderr:\n{}", kept.stderr);
    let workdir = kept.out.join("workdirs").join("t.epoch-1");
    assert_eq!(
        std::fs::read_to_string(workdir.join("README.md")).expect("README"),
        "hello\n"
    );
    assert_eq!(
        std::fs::read_to_string(workdir.join("kept.txt")).expect("kept.txt"),
        "kept\n"
    );
    assert!(workdir.join(".git").is_dir());

    let deleted = fixture.run_scripted_into("deleted", &tasks, &server, &[]);
    assert_eq!(deleted.code, 0, "stderr:\n{}", deleted.stderr);
    assert!(!deleted.out.join("workdirs").join("t.epoch-1").exists());
}

// ---------------------------------------------------------------------------
// 8. Which tasks run: --runs, --shard, --filter, --limit.
// ---------------------------------------------------------------------------

#[test]
fn working_copies_go_to_a_folder_of_the_runs_own_in_workdirs() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let tasks = fixture.tasks(&[
        task("a", &repo, &sha, "touch made-by-a", json!({})),
        task("b", &repo, &sha, "test ! -e made-by-a", json!({})),
    ]);
    let root = fixture.path("fast-disk");
    let root_arg = root.to_str().expect("UTF-8").to_owned();
    let args = |keep: bool| {
        let mut args = vec![
            "--model",
            "noop",
            "--sandbox",
            "none",
            "--workdirs",
            &root_arg,
        ];
        if keep {
            args.push("--keep-workdirs");
        }
        args
    };
    let kept = fixture.run_into(&fixture.path("one"), &tasks, &args(true), &[]);
    let other = fixture.run_into(&fixture.path("two"), &tasks, &args(false), &[]);
    for run in [&kept, &other] {
        assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
        assert!(!run.out.join("workdirs").exists());
    }
    // Only the kept run's folder is left, holding both working copies.
    let left: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("the workdirs folder")
        .map(|entry| entry.expect("entry").path())
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
    let name = left[0]
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    assert!(name.starts_with("one-"), "{name}");
    assert!(left[0].join("a.epoch-1/made-by-a").is_file());
    assert!(left[0].join("b.epoch-1/README.md").is_file());

    // Resuming finds the same folder: a leftover working copy is replaced.
    std::fs::write(left[0].join("b.epoch-1/stale"), "x").expect("write");
    std::fs::write(
        kept.out.join("results.csv"),
        std::fs::read_to_string(kept.out.join("results.csv"))
            .expect("results")
            .lines()
            .filter(|line| !line.starts_with("b,"))
            .map(|line| format!("{line}\n"))
            .collect::<String>(),
    )
    .expect("drop b's row");
    let mut resume = args(true);
    resume.push("--resume");
    let resumed = fixture.run_into(&fixture.path("one"), &tasks, &resume, &[]);
    assert_eq!(
        resumed.row("b")["status"],
        "passed",
        "stderr:\n{}",
        resumed.stderr
    );
    assert!(!left[0].join("b.epoch-1/stale").exists());
}

#[test]
fn workdirs_that_hold_the_run_or_sit_in_the_cache_are_refused() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let tasks = fixture.tasks(&[task("a", &repo, &sha, "true", json!({}))]);
    let cases = [
        // The run folder is <fixture>/out: its parent holds it.
        (fixture.dir.path().to_owned(), "holds"),
        (fixture.path("cache/work"), "inside the cache"),
    ];
    for (dir, why) in cases {
        let dir = dir.to_str().expect("UTF-8").to_owned();
        let run = fixture.run_noop(&tasks, &["--workdirs", &dir]);
        assert_eq!(run.code, 2, "{dir}: {}", run.stderr);
        assert!(run.stderr.contains(why), "{dir}: {}", run.stderr);
        assert!(!run.out.join("results.csv").exists());
    }
}

#[test]
fn limits_too_large_to_count_in_bytes_are_refused_not_wrapped() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let tasks = fixture.tasks(&[task("a", &repo, &sha, "true", json!({}))]);
    // 2^44 MiB is 2^64 bytes: one more than a u64 holds.
    for flag in ["--max-memory", "--max-file-size"] {
        let run = fixture.run_noop(&tasks, &[flag, "17592186044416"]);
        assert_eq!(run.code, 2, "{flag}: {}", run.stderr);
        assert!(run.stderr.contains(flag), "{flag}: {}", run.stderr);
        assert!(!run.out.join("results.csv").exists());
    }
}

/// Durations are read by the command line, which names the flag: a value
/// too large for a Duration panicked (exit 101), and one too large for a
/// deadline panicked the task's worker once the run had started.
#[test]
fn a_bad_duration_is_refused_by_the_command_line() {
    let flags = [
        "--command-timeout",
        "--task-timeout",
        "--test-timeout",
        "--request-timeout",
        "--retry-delay",
    ];
    let values = [
        ("0", "must be a positive number of seconds"),
        ("soon", "not a number of seconds"),
        ("1e300", "too long"),
        ("1e19", "too long"),
    ];
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let tasks = fixture.tasks(&[task("a", &repo, &sha, "true", json!({}))]);
    for flag in flags {
        for (value, said) in values {
            let run = fixture.run(
                &tasks,
                &["--model", "noop", "--sandbox", "none", flag, value],
            );
            assert_eq!(run.code, 2, "{flag} {value}: {}", run.stderr);
            assert!(
                run.stderr.contains(&format!("'{flag} <S>'")) && run.stderr.contains(said),
                "{flag} {value}: {}",
                run.stderr
            );
            assert!(!run.out.join("results.csv").exists());
        }
    }
}

#[test]
fn a_shard_that_is_not_k_of_n_is_refused_by_the_command_line() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let tasks = fixture.tasks(&[task("a", &repo, &sha, "true", json!({}))]);
    for (shard, said) in [("0/3", "K must be between 1 and N"), ("2", "is not K/N")] {
        let run = fixture.run_noop(&tasks, &["--shard", shard]);
        assert_eq!(run.code, 2, "{shard}: {}", run.stderr);
        assert!(
            run.stderr.contains("--shard") && run.stderr.contains(said),
            "{shard}: {}",
            run.stderr
        );
    }
}

#[test]
fn a_folder_name_that_is_not_utf8_checks_out() {
    // git allows any bytes but / and NUL in a name; git2's tree walk gives
    // up on them, which must not stop the checkout.
    use std::os::unix::ffi::OsStrExt;
    let fixture = Fixture::new();
    let (repo, _) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let odd = repo.join(std::ffi::OsStr::from_bytes(b"caf\xe9"));
    std::fs::create_dir_all(&odd).expect("mkdir");
    std::fs::write(odd.join("menu.txt"), "soup\n").expect("write");
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "latin-1 folder"]);
    let sha = git(&repo, &["rev-parse", "HEAD"]);
    let tasks = fixture.tasks(&[task(
        "t",
        &repo,
        &sha,
        "cat caf*/menu.txt | grep -q soup",
        json!({}),
    )]);
    let run = fixture.run_noop(&tasks, &[]);
    assert_eq!(run.row("t")["status"], "passed", "{}", run.stderr);
}

#[test]
fn runs_shard_filter_and_limit_select_the_right_tasks() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    // The index in the file is in each id.
    let all = ["a0", "b1", "a2", "b3", "b4", "a5", "b6"];
    let tasks: Vec<Value> = all
        .iter()
        .map(|id| task(id, &repo, &sha, "true", json!({})))
        .collect();
    let tasks = fixture.tasks(&tasks);
    let server = scripted_agent(&[]);
    let mut n = 0;
    let mut run = |args: &[&str]| {
        n += 1;
        let run = fixture.run_scripted_into(&format!("out{n}"), &tasks, &server, args);
        assert_eq!(run.code, 0, "{args:?} stderr:\n{}", run.stderr);
        run
    };

    let epochs = run(&["--runs", "2", "--filter", "^a", "--limit", "2"]);
    let expected: BTreeSet<(String, String)> = [("a0", "1"), ("a0", "2"), ("a2", "1"), ("a2", "2")]
        .iter()
        .map(|(t, e)| ((*t).to_owned(), (*e).to_owned()))
        .collect();
    assert_eq!(selected(&epochs), expected);
    let second = epochs.out.join("tasks/a2/epoch-2/trajectory.jsonl");
    let header: Value = serde_json::from_str(
        std::fs::read_to_string(&second)
            .expect("epoch 2 trajectory")
            .lines()
            .next()
            .expect("header"),
    )
    .expect("JSON");
    assert_eq!(header["event"], "header");
    assert_eq!(header["epoch"], 2);

    let cases: &[(&[&str], &[&str])] = &[
        (&["--shard", "1/3"], &["a0", "b3", "b6"]),
        (&["--shard", "2/3"], &["b1", "b4"]),
        (&["--shard", "3/3"], &["a2", "a5"]),
        (&["--filter", "^b"], &["b1", "b3", "b4", "b6"]),
        (&["--filter", "^b", "--limit", "2"], &["b1", "b3"]),
        (&["--limit", "3"], &["a0", "a2", "b1"]),
        // The shard is taken by index in the file, before the filter.
        (&["--shard", "1/2", "--filter", "^b"], &["b4", "b6"]),
    ];
    for (args, want) in cases {
        let got = ids(&run(args));
        assert_eq!(got, *want, "{args:?}");
    }
}

// ---------------------------------------------------------------------------
// 9. The run folder is never overwritten.
// ---------------------------------------------------------------------------

#[test]
fn existing_non_empty_run_folder_is_refused() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let tasks = fixture.tasks(&[task("t", &repo, &sha, "true", json!({}))]);
    let server = scripted_agent(&[]);

    let out = fixture.path("out");
    std::fs::create_dir_all(&out).expect("mkdir");
    std::fs::write(out.join("results.csv"), "precious\n").expect("write");
    let run = fixture.run_scripted(&tasks, &server, &[]);
    assert_eq!(run.code, 2, "stderr:\n{}", run.stderr);
    assert!(run.stderr.contains("not empty"), "{}", run.stderr);
    assert_eq!(
        std::fs::read_to_string(out.join("results.csv")).expect("read"),
        "precious\n"
    );
    assert_eq!(std::fs::read_dir(&out).expect("read_dir").count(), 1);
    assert!(server.requests().is_empty());

    // An empty folder is fine.
    std::fs::create_dir_all(fixture.path("empty")).expect("mkdir");
    let run = fixture.run_scripted_into("empty", &tasks, &server, &[]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(run.rows().len(), 1);
}

/// A run folder that cannot be written is named in the message, not a bare
/// `Permission denied (os error 13)`. A fresh run's first write is
/// run.lock, whose error always named it; the bare error came from the
/// writes after the lock: run.json, results.csv. So the folder is a
/// finished run's, resumed after it stopped taking files. Root (as in CI)
/// ignores file modes, so the folder is first made unwritable where
/// run.json goes by a directory in the place of its temporary file: the
/// same write (`RunManifest::write`) fails the same way, for any user. As
/// another user, the folder is then also made read-only with its mode.
#[test]
fn a_run_folder_that_cannot_be_written_is_named_in_the_message() {
    use std::os::unix::fs::PermissionsExt;

    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let tasks = fixture.tasks(&[task("t", &repo, &sha, "true", json!({}))]);
    let first = fixture.run_noop(&tasks, &[]);
    assert_eq!(first.code, 0, "stderr:\n{}", first.stderr);
    let out = fixture.path("out");

    let blocked = out.join("run.json.tmp");
    std::fs::create_dir(&blocked).expect("mkdir");
    let run = fixture.run_noop(&tasks, &["--resume"]);
    assert_eq!(run.code, 1, "stderr:\n{}", run.stderr);
    let named = format!("error: failed to write {}: ", blocked.display());
    assert!(run.stderr.contains(&named), "{}", run.stderr);
    // The OS error is said once, not again as the error's cause.
    assert_eq!(run.stderr.matches("(os error").count(), 1, "{}", run.stderr);
    std::fs::remove_dir(&blocked).expect("rmdir");

    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o555)).expect("chmod");
        let run = fixture.run_noop(&tasks, &["--resume"]);
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert_eq!(run.code, 1, "stderr:\n{}", run.stderr);
        assert!(
            run.stderr
                .contains(&format!("error: failed to write {}", out.display())),
            "{}",
            run.stderr
        );
        assert!(run.stderr.contains("Permission denied"), "{}", run.stderr);
    }
}

// ---------------------------------------------------------------------------
// 10. Ctrl-C.
// ---------------------------------------------------------------------------

/// Kills the child if the test ends early, so no onebash outlives it.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

#[test]
fn ctrl_c_ends_the_running_task_as_interrupted_and_starts_no_other() {
    interrupt_ends_the_running_task(libc::SIGINT);
}

/// Kubernetes and Slurm stop a job with SIGTERM: it must do what Ctrl-C does.
#[test]
fn sigterm_ends_the_running_task_as_interrupted_like_ctrl_c() {
    interrupt_ends_the_running_task(libc::SIGTERM);
}

fn interrupt_ends_the_running_task(signal: libc::c_int) {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let tasks = fixture.tasks(&[
        task("t1", &repo, &sha, "true", json!({})),
        task("t2", &repo, &sha, "true", json!({})),
        task("t3", &repo, &sha, "true", json!({})),
    ]);
    // The model does not answer while the test runs: a call is held until
    // `_release` is dropped, at the end of the test.
    let (_release, held) = mpsc::channel::<()>();
    let held = Mutex::new(held);
    let server = ScriptedServer::start_with(move |_| {
        let held = held.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = held.recv_timeout(Duration::from_secs(300));
        text_reply("Too late.", "stop", 1, 1)
    });
    let out = fixture.path("out");
    let log = |name: &str| -> Stdio {
        Stdio::from(std::fs::File::create(fixture.path(name)).expect("log file"))
    };
    let child = onebash()
        .arg("run")
        .arg(&tasks)
        .args(["--model", "scripted", "--base-url", &server.base_url()])
        .args(["-j", "1", "-o"])
        .arg(&out)
        .arg("--cache-dir")
        .arg(fixture.path("cache"))
        .stdin(Stdio::null())
        .stdout(log("stdout.txt"))
        .stderr(log("stderr.txt"))
        .spawn()
        .expect("spawn onebash");
    let mut child = KillOnDrop(child);

    let trajectory: PathBuf = out.join("tasks/t1/epoch-1/trajectory.jsonl");
    wait_until("t1 to ask the model", Duration::from_secs(120), || {
        trajectory.exists() && !server.requests().is_empty()
    });
    let pid = libc::pid_t::try_from(child.0.id()).expect("pid");
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    let mut status = None;
    // A hang guard: onebash leaves at once, the model call still held.
    wait_until("onebash to exit", Duration::from_secs(120), || {
        status = child.0.try_wait().expect("try_wait");
        status.is_some()
    });
    let stderr = std::fs::read_to_string(fixture.path("stderr.txt")).unwrap_or_default();
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(130),
        "stderr:\n{stderr}"
    );

    let run = RunOutput {
        code: 130,
        stdout: std::fs::read_to_string(fixture.path("stdout.txt")).unwrap_or_default(),
        stderr,
        out,
    };
    let rows = run.rows();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = run.row("t1");
    assert_eq!(row["status"], "error", "{row:?}");
    assert_eq!(row["exit_reason"], "interrupted", "{row:?}");
    assert_eq!(row["passed"], "false");
    let end = run.events("t1", "end");
    assert_eq!(end.len(), 1);
    assert_eq!(end[0]["exit_reason"], "interrupted");
    // The conversation itself stopped the call it was waiting on, and said
    // so; the backstop that drops a conversation after a grace period
    // would have left no such event.
    let cut = run.events("t1", "model_error");
    assert_eq!(cut.len(), 1, "{:#?}", run.trajectory("t1"));
    assert!(
        cut[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("interrupted by the user")),
        "{}",
        cut[0]
    );
    assert!(!run.out.join("tasks/t2").exists());
    // The summary says how to finish it.
    assert!(
        run.stdout.contains(&format!(
            "\nhint: finish the run with `onebash run ... -o {} --resume`",
            run.out.display()
        )),
        "{}",
        run.stdout
    );
    assert!(!run.out.join("tasks/t3").exists());
    assert_eq!(server.requests().len(), 1);
    let run_json: Value =
        serde_json::from_str(&std::fs::read_to_string(run.out.join("run.json")).expect("run.json"))
            .expect("JSON");
    assert_eq!(run_json["interrupted"], true);
}

/// The sandbox binds working copies by path: a relative --out once made
/// every command fail under bwrap ("Can't find source path").
#[test]
fn a_relative_run_folder_works_in_the_sandbox() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let gold = diff_of(&repo, &[("fixed.txt", "fixed\n")]);
    let tasks = fixture.tasks(&[task(
        "t",
        &repo,
        &sha,
        "test -f fixed.txt",
        json!({"gold_patch": gold}),
    )]);
    let output = onebash()
        .current_dir(fixture.path("."))
        .arg("run")
        .arg(&tasks)
        .args([
            "--model",
            "oracle",
            "-o",
            "relative-out",
            "--cache-dir",
            "relative-cache",
        ])
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    let csv = std::fs::read_to_string(fixture.path("relative-out/results.csv")).expect("csv");
    assert!(csv.contains(",passed,completed,true,"), "{csv}");
    assert_patches_apply(&fixture.path("relative-out"));
}
