//! Nothing from the future: a task's working copy holds no object past its
//! base commit. A repo is built with a gold commit whose message names the
//! fix, a tag, a branch, a reflog entry and an unreachable commit past the
//! base; then the probes of `support::probes` run as the agent's commands,
//! under bwrap, and must find nothing (`--history full` and `none`). The
//! probes are first shown to find each of those things where they are
//! there, so that a probe that can find nothing proves nothing.
//!
//! Also: the stores of a run's bases chain oldest first whatever the task
//! order, and a working copy whose store holds more than its base reaches
//! is never handed to an agent (`checkout_error`).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::sandbox::bwrap_fixture;
use crate::support::harness::{
    Fixture, RunOutput, git, numbered_tasks, scripted_agent, task, tool_answers,
};
use crate::support::probes::{self, Future, PROBES};

/// A repo whose history runs past the base of its task (also the repo
/// in the test image of `container.rs`).
pub(crate) struct Leaky {
    pub(crate) repo: PathBuf,
    /// Oldest first; the last is the base.
    pub(crate) past: Vec<String>,
    pub(crate) base: String,
    /// Commits and a tag object past the base.
    pub(crate) future: Vec<String>,
}

/// Text found only past the base.
pub(crate) const FUTURE_TEXTS: &[&str] = &[
    "GOLD-FIX-CONTENT",
    "GOLD-FIX-MESSAGE",
    "GOLD-TAG-MESSAGE",
    "REFLOG-ONLY-CONTENT",
    "REFLOG-ONLY-MESSAGE",
    "UNREACHABLE-CONTENT",
    "UNREACHABLE-MESSAGE",
];

/// Text found only in the commits before the base.
pub(crate) const PAST_TEXTS: &[&str] = &["first of the past", "second of the past"];

fn commit_file(repo: &Path, content: &str, message: &str) -> String {
    std::fs::write(repo.join("calc.py"), content).expect("write calc.py");
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-q", "-m", message]);
    git(repo, &["rev-parse", "HEAD"])
}

pub(crate) fn leaky_repo(fixture: &Fixture) -> Leaky {
    let repo = fixture.path("repo");
    std::fs::create_dir_all(&repo).expect("mkdir repo");
    git(&repo, &["init", "-q", "-b", "main"]);
    let past = vec![
        commit_file(&repo, "a = 1\n", "first of the past"),
        commit_file(&repo, "a = 1\nb = 2\n", "second of the past"),
        commit_file(
            &repo,
            "a = 1\nb = 2\ndef add(x, y):\n    return x - y\n",
            "base: where the task starts",
        ),
    ];
    let base = past[past.len() - 1].clone();
    // The gold commit, on main (the mirror's HEAD) and a branch, tagged.
    let gold = commit_file(
        &repo,
        "a = 1\nb = 2\ndef add(x, y):\n    return x + y  # GOLD-FIX-CONTENT\n",
        "Fix add (GOLD-FIX-MESSAGE)",
    );
    git(&repo, &["branch", "fix-branch", &gold]);
    git(
        &repo,
        &["tag", "-a", "v-gold", "-m", "GOLD-TAG-MESSAGE", &gold],
    );
    let tag = git(&repo, &["rev-parse", "v-gold"]);
    // A commit only the reflog remembers.
    let reflog_only = commit_file(&repo, "REFLOG-ONLY-CONTENT\n", "REFLOG-ONLY-MESSAGE");
    git(&repo, &["reset", "-q", "--hard", &gold]);
    // A commit nothing names, with a blob of its own.
    let blob = pipe(
        &repo,
        &["hash-object", "-w", "--stdin"],
        "UNREACHABLE-CONTENT\n",
    );
    let tree = pipe(
        &repo,
        &["mktree"],
        &format!("100644 blob {blob}\tcalc.py\n"),
    );
    let unreachable = git(
        &repo,
        &[
            "commit-tree",
            &tree,
            "-p",
            &base,
            "-m",
            "UNREACHABLE-MESSAGE",
        ],
    );
    Leaky {
        repo,
        past,
        base,
        future: vec![gold, tag, reflog_only, unreachable],
    }
}

/// `git ARGS` in `dir` with `input` on stdin; its trimmed stdout.
fn pipe(dir: &Path, args: &[&str], input: &str) -> String {
    pipe_bytes(dir, args, input.as_bytes())
}

/// As [`pipe`], with bytes on stdin.
fn pipe_bytes(dir: &Path, args: &[&str], input: &[u8]) -> String {
    use std::io::Write;
    let mut child = Command::new("git")
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run git");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write stdin");
    let output = child.wait_with_output().expect("wait for git");
    assert!(output.status.success(), "git {args:?} failed");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// `log` (`git log --format=%s` at the base) shows the base's own
/// history, all of it.
pub(crate) fn assert_whole_past(log: &str) {
    let subjects: Vec<&str> = log.lines().take(3).collect();
    assert_eq!(
        subjects,
        [
            "base: where the task starts",
            "second of the past",
            "first of the past"
        ],
        "{log}"
    );
}

/// Runs the probe script with bash in `dir`; its output.
fn probe_in(dir: &Path, future: &Future<'_>) -> String {
    let output = Command::new("bash")
        .arg("-c")
        .arg(probes::script(future))
        .current_dir(dir)
        .output()
        .expect("run bash");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// How many objects `rev` reaches in `repo`.
fn reachable_objects(repo: &Path, rev: &str) -> u64 {
    git(repo, &["rev-list", "--objects", rev]).lines().count() as u64
}

#[test]
fn the_probes_find_each_thing_past_the_base_where_it_is_there() {
    let fixture = Fixture::new();
    let leaky = leaky_repo(&fixture);
    let future: Vec<&str> = leaky.future.iter().map(String::as_str).collect();
    // Where git users look first: the repo itself, and a clone that
    // borrows its objects (what onebash's working copies did).
    let shared = fixture.path("shared");
    git(
        fixture.dir.path(),
        &[
            "clone",
            "-q",
            "--shared",
            "-n",
            &leaky.repo.display().to_string(),
            "shared",
        ],
    );
    git(&shared, &["checkout", "-q", "--detach", &leaky.base]);
    // And a pack of every object beside them, as the packs a run fixes
    // for its working copies lie beside those.
    let beside = fixture.path(".packs");
    std::fs::create_dir_all(&beside).expect("mkdir .packs");
    pipe(
        &leaky.repo,
        &[
            "pack-objects",
            "--all",
            "-q",
            &beside.join("pack").display().to_string(),
        ],
        "",
    );
    let source = leaky.repo.display().to_string();
    let mut fired = HashSet::new();
    for dir in [&leaky.repo, &shared] {
        let output = probe_in(
            dir,
            &Future {
                commits: &future,
                texts: FUTURE_TEXTS,
                unreadable: &[&source],
            },
        );
        assert!(probes::finished(&output), "{output}");
        for leak in probes::leaks(&output) {
            fired.insert(leak.split(':').next().unwrap_or_default().to_owned());
        }
    }
    let silent: Vec<&&str> = PROBES.iter().filter(|p| !fired.contains(**p)).collect();
    assert!(
        silent.is_empty(),
        "probes that found nothing where there was something: {silent:?}"
    );
}

/// Runs the probe script and `extra` commands as task `t`'s agent under
/// bwrap with `--history HISTORY`, looking for `commits` and `texts`, and
/// for the cache and the source repo; checks that the probes ran and found
/// nothing. Returns the run and the answers to `extra`.
fn probe_run(
    fixture: &Fixture,
    leaky: &Leaky,
    history: &str,
    (commits, texts): (&[&str], &[&str]),
    extra: &[&str],
) -> (RunOutput, Vec<String>) {
    // First a task at the gold commit: its store's packs (the base's own
    // thin pack fixed for this run, in the folder beside the working
    // copies) hold the fix while the task at the base runs.
    let gold = &leaky.future[0];
    let tasks = fixture.tasks(&[
        task("later", &leaky.repo, gold, "true", json!({})),
        task("t", &leaky.repo, &leaky.base, "true", json!({})),
    ]);
    let (cache, source, staged) = (
        fixture.path("cache").display().to_string(),
        leaky.repo.display().to_string(),
        fixture.path("out/workdirs/.packs").display().to_string(),
    );
    let script = probes::script(&Future {
        commits,
        texts,
        unreadable: &[&cache, &source, &staged],
    });
    let mut commands = vec![script.as_str()];
    commands.extend_from_slice(extra);
    let server = scripted_agent(&[("t", &commands), ("later", &[])]);
    let run = fixture.run_scripted(
        &tasks,
        &server,
        &["--sandbox", "bwrap", "--history", history, "-j", "1"],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(run.row("later")["status"], "passed");
    let mut answers = tool_answers(&server, "t");
    assert_eq!(answers.len(), commands.len(), "{answers:?}");
    let probed = answers.remove(0);
    assert!(probes::finished(&probed), "{probed}");
    assert_eq!(probes::leaks(&probed), Vec::<String>::new(), "{probed}");
    (run, answers)
}

fn checkout_event(run: &RunOutput) -> Value {
    let events = run.events("t", "checkout");
    assert_eq!(events.len(), 1, "{events:?}");
    events[0].clone()
}

#[test]
fn with_full_history_nothing_past_the_base_is_found_and_the_past_is_whole() {
    let Some(fixture) = bwrap_fixture() else {
        return;
    };
    let leaky = leaky_repo(&fixture);
    let future: Vec<&str> = leaky.future.iter().map(String::as_str).collect();
    let (run, answers) = probe_run(
        &fixture,
        &leaky,
        "full",
        (&future, FUTURE_TEXTS),
        &["git log --format=%s", "git blame -s calc.py"],
    );
    assert_whole_past(&answers[0]);
    let blamed: HashSet<&str> = answers[1]
        .lines()
        // `^` marks the root commit.
        .filter_map(|line| line.split_whitespace().next())
        .map(|sha| sha.trim_start_matches('^'))
        .filter(|sha| sha.len() >= 7)
        .collect();
    for commit in &leaky.past {
        assert!(
            blamed.iter().any(|short| commit.starts_with(short)),
            "blame does not name {commit}: {}",
            answers[1]
        );
    }
    let checkout = checkout_event(&run);
    assert_eq!(checkout["history"], "full");
    assert_eq!(checkout["commit"], leaky.base.as_str());
    assert!(checkout.get("head").is_none(), "{checkout}");
    assert_eq!(
        checkout["objects"],
        reachable_objects(&leaky.repo, &leaky.base),
        "{checkout}"
    );
}

#[test]
fn with_no_history_there_is_one_commit_and_nothing_before_or_after_it() {
    let Some(fixture) = bwrap_fixture() else {
        return;
    };
    let leaky = leaky_repo(&fixture);
    // Now the past is off limits too.
    let commits: Vec<&str> = leaky
        .future
        .iter()
        .chain(&leaky.past)
        .map(String::as_str)
        .collect();
    let texts: Vec<&str> = FUTURE_TEXTS.iter().chain(PAST_TEXTS).copied().collect();
    let (run, answers) = probe_run(
        &fixture,
        &leaky,
        "none",
        (&commits, &texts),
        &[
            "git rev-list --all --count",
            "git log --format=%s",
            "sed -i 's/x - y/x + y/' calc.py && git status --short",
        ],
    );
    assert!(answers[0].starts_with("1\n"), "{}", answers[0]);
    assert!(
        answers[1].starts_with("base: where the task starts\n"),
        "{}",
        answers[1]
    );
    let checkout = checkout_event(&run);
    assert_eq!(checkout["history"], "none");
    assert_eq!(checkout["commit"], leaky.base.as_str());
    let head = checkout["head"].as_str().expect("head").to_owned();
    assert_ne!(head, leaky.base);
    // The base's tree and nothing else: its objects plus the one commit.
    let tree_objects = git(&leaky.repo, &["ls-tree", "-r", "-t", &leaky.base])
        .lines()
        .count();
    assert_eq!(checkout["objects"], tree_objects as u64 + 2, "{checkout}");
    // The patch is against the base, whatever commit HEAD is.
    let patch = std::fs::read_to_string(run.task_dir("t").join("patch.diff")).expect("patch.diff");
    assert!(patch.contains("+    return x + y"), "{patch}");
}

/// The manifest of a base's full store in the fixture's cache.
fn manifest_of(fixture: &Fixture, base: &str) -> PathBuf {
    let stores = fixture.path("cache").join("stores");
    let mut repos = std::fs::read_dir(&stores).expect("stores folder");
    let repo_dir = repos
        .next()
        .expect("one repo's stores")
        .expect("entry")
        .path();
    repo_dir.join("bases").join(format!("{base}.full"))
}

/// The packs a base's store lists, its own first: the manifest's lines
/// `pack NAME` (whole packs) and `thin NAME ENTRIES` (thin ones).
fn store_packs(fixture: &Fixture, base: &str) -> Vec<String> {
    let manifest = manifest_of(fixture, base);
    std::fs::read_to_string(&manifest)
        .unwrap_or_else(|err| panic!("{}: {err}", manifest.display()))
        .lines()
        .filter(|line| line.starts_with("pack ") || line.starts_with("thin "))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_bases_of_a_run_are_stored_oldest_first_each_chained_to_the_last() {
    let fixture = Fixture::new();
    let leaky = leaky_repo(&fixture);
    // Newest first, and one at a time: the first task must build its
    // ancestors' stores before its own.
    let tasks: Vec<Value> = leaky
        .past
        .iter()
        .rev()
        .enumerate()
        .map(|(i, base)| task(&format!("t{i}"), &leaky.repo, base, "true", json!({})))
        .collect();
    let tasks = fixture.tasks(&tasks);
    let run = fixture.run_noop(&tasks, &["-j", "1"]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let chains: Vec<Vec<String>> = leaky
        .past
        .iter()
        .map(|b| store_packs(&fixture, b))
        .collect();
    // Oldest: one whole pack; each later base: its own pack (thin), then
    // its parent's chain.
    assert_eq!(chains[0].len(), 1, "{chains:?}");
    assert!(chains[0][0].starts_with("pack "), "{chains:?}");
    for pair in chains.windows(2) {
        assert_eq!(pair[1].len(), pair[0].len() + 1, "{chains:?}");
        assert_eq!(pair[1][1..], pair[0][..], "{chains:?}");
        assert!(pair[1][0].starts_with("thin "), "{chains:?}");
    }
    for (i, base) in leaky.past.iter().rev().enumerate() {
        let checkout = &run.events(&format!("t{i}"), "checkout")[0];
        assert_eq!(checkout["objects"], reachable_objects(&leaky.repo, base));
    }
}

#[test]
fn a_store_that_holds_more_than_its_base_reaches_ends_the_task_as_checkout_error() {
    let fixture = Fixture::new();
    let leaky = leaky_repo(&fixture);
    let (first, base) = (&leaky.past[0], &leaky.base);
    let both = fixture.tasks(&[
        task("old", &leaky.repo, first, "true", json!({})),
        task("new", &leaky.repo, base, "true", json!({})),
    ]);
    let run = fixture.run_noop(&both, &[]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    // A store of the first commit that also lists the base's own pack, as
    // a bug or a hand in the cache could make it.
    let newer = store_packs(&fixture, base)[0].clone();
    let manifest = manifest_of(&fixture, first);
    let text = std::fs::read_to_string(&manifest).expect("manifest");
    std::fs::write(&manifest, format!("{text}{newer}\n")).expect("tamper");

    let again = fixture.tasks(&[
        task("old", &leaky.repo, first, "true", json!({})),
        task("other", &leaky.repo, base, "true", json!({})),
    ]);
    let run = fixture.run_into(
        &fixture.path("out-2"),
        &again,
        &["--model", "noop", "--sandbox", "none"],
        &[],
    );
    let row = run.row("old");
    assert_eq!(row["status"], "error", "{row:?}");
    assert_eq!(row["exit_reason"], "checkout_error", "{row:?}");
    assert!(
        row["error"].contains("failed its check for objects past the base")
            && row["error"].contains("objects where its base's store has"),
        "{row:?}"
    );
    assert!(run.events("old", "message").is_empty(), "an agent ran");
    // The run went on with the next task.
    assert_eq!(run.row("other")["status"], "passed");
}

#[test]
fn working_copies_on_another_file_system_than_the_cache_share_one_copy_of_each_pack() {
    let fixture = Fixture::new();
    let Ok(shm) = tempfile::tempdir_in("/dev/shm") else {
        crate::support::skips::skipped("a writable /dev/shm", "mount a tmpfs there");
        return;
    };
    use std::os::unix::fs::MetadataExt;
    let device = |path: &Path| std::fs::metadata(path).expect("stat").dev();
    if device(shm.path()) == device(fixture.dir.path()) {
        crate::support::skips::skipped(
            "a /dev/shm on another file system than the fixtures'",
            "mount a tmpfs at /dev/shm",
        );
        return;
    }
    let leaky = leaky_repo(&fixture);
    let tasks = fixture.tasks(&numbered_tasks(
        3,
        &leaky.repo,
        &leaky.base,
        "true",
        json!({}),
    ));
    let workdirs = shm.path().display().to_string();
    let run = fixture.run_noop(
        &tasks,
        &["-j", "3", "--workdirs", &workdirs, "--keep-workdirs"],
    );
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    for i in 0..3 {
        let checkout = &run.events(&format!("t{i}"), "checkout")[0];
        assert_eq!(
            checkout["objects"],
            reachable_objects(&leaky.repo, &leaky.base)
        );
    }
    // The three working copies share one copy of each pack, on their own
    // file system; the staging folder is gone.
    let own: Vec<PathBuf> = std::fs::read_dir(shm.path())
        .expect("read /dev/shm folder")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(own.len(), 1, "{own:?}");
    let copies: Vec<PathBuf> = std::fs::read_dir(&own[0])
        .expect("the run's workdirs")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(copies.len(), 3, "{copies:?}");
    // Each pack file: one inode, on the working copies' file system.
    let mut inodes: std::collections::BTreeMap<String, HashSet<u64>> = Default::default();
    for copy in &copies {
        for file in std::fs::read_dir(copy.join(".git/objects/pack")).expect("packs") {
            let file = file.expect("entry");
            let meta = file.metadata().expect("stat");
            assert_eq!(meta.dev(), device(shm.path()));
            inodes
                .entry(file.file_name().to_string_lossy().into_owned())
                .or_default()
                .insert(meta.ino());
        }
    }
    assert_eq!(inodes.len(), 2, "one pack and its index: {inodes:?}");
    assert!(
        inodes.values().all(|set| set.len() == 1),
        "each working copy copied the pack: {inodes:?}"
    );
}

/// Text of `lines` lines that compresses poorly (each line its own
/// numbers), so that a pack holding it whole shows.
fn big_text(lines: usize, changed: Option<usize>) -> String {
    let mut text = String::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..lines {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if Some(i) == changed {
            text.push_str("CHANGED LINE\n");
        } else {
            text.push_str(&format!("line {i}: {x:016x}\n"));
        }
    }
    text
}

/// A repo of one file of about 200 KB that zlib cannot shrink much, then
/// one line of it changed, twice: each later base's own pack needs that
/// line, not the file. The repo and its three commits, oldest first.
fn big_file_repo(fixture: &Fixture) -> (PathBuf, Vec<String>) {
    let repo = fixture.path("repo");
    std::fs::create_dir_all(&repo).expect("mkdir repo");
    git(&repo, &["init", "-q", "-b", "main"]);
    let mut bases = Vec::new();
    for changed in [None, Some(10), Some(5000)] {
        std::fs::write(repo.join("big.txt"), big_text(8000, changed)).expect("write");
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "a change"]);
        bases.push(git(&repo, &["rev-parse", "HEAD"]));
    }
    (repo, bases)
}

#[test]
fn a_base_that_changes_a_line_of_a_big_file_stores_about_that_line_and_reads_whole() {
    let fixture = Fixture::new();
    let (repo, bases) = big_file_repo(&fixture);
    // The newest first: its chain is built first, oldest first.
    let tasks: Vec<Value> = bases
        .iter()
        .rev()
        .enumerate()
        .map(|(i, base)| {
            // The fixed packs are whole: git reads every object of them,
            // and blame walks the past.
            let test = "git fsck --full --no-dangling && git blame big.txt > /dev/null \
                        && test $(git rev-list --count HEAD) -gt 0";
            task(&format!("t{i}"), &repo, base, test, json!({}))
        })
        .collect();
    let tasks = fixture.tasks(&tasks);
    let run = fixture.run_noop(&tasks, &["-j", "1"]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    for i in 0..3 {
        assert_eq!(run.row(&format!("t{i}"))["status"], "passed", "{i}");
    }
    let packs = manifest_of(&fixture, &bases[0])
        .parent()
        .and_then(Path::parent)
        .expect("the store's folder")
        .join("packs");
    let size = |line: &str| {
        let name = line.split(' ').nth(1).expect("a pack's name");
        std::fs::metadata(packs.join(format!("{name}.pack")))
            .expect("the pack")
            .len()
    };
    let first = size(&store_packs(&fixture, &bases[0])[0]);
    assert!(first > 100_000, "the whole file: {first} bytes");
    for base in &bases[1..] {
        let own = size(&store_packs(&fixture, base)[0]);
        assert!(own < first / 20, "a pack of {own} bytes against {first}");
    }
}

#[test]
fn without_git_on_path_a_task_ends_as_checkout_error_saying_so() {
    let fixture = Fixture::new();
    let leaky = leaky_repo(&fixture);
    // A PATH with bash and nothing else.
    let bin = fixture.path("bin");
    std::fs::create_dir_all(&bin).expect("mkdir bin");
    let bash = Command::new("bash")
        .args(["-c", "command -v bash"])
        .output()
        .expect("find bash");
    let bash = String::from_utf8_lossy(&bash.stdout).trim().to_owned();
    std::os::unix::fs::symlink(&bash, bin.join("bash")).expect("link bash");
    let tasks = fixture.tasks(&[
        task("t", &leaky.repo, &leaky.base, "true", json!({})),
        task("u", &leaky.repo, &leaky.past[0], "true", json!({})),
    ]);
    let path = bin.display().to_string();
    let run = fixture.run_with_env(
        &tasks,
        &["--model", "noop", "--sandbox", "none"],
        &[("PATH", &path)],
    );
    for id in ["t", "u"] {
        let row = run.row(id);
        assert_eq!(row["exit_reason"], "checkout_error", "{row:?}");
        assert!(
            row["error"].contains("git on PATH"),
            "the message names what is missing: {row:?}"
        );
    }
}

#[test]
fn a_run_fixes_each_thin_pack_once_and_without_git_when_its_store_is_this_onebashs() {
    let fixture = Fixture::new();
    // Deltas against the ancestors' objects: each thin pack needs a base.
    let (repo, bases) = big_file_repo(&fixture);
    let bases = &bases;
    let tasks: Vec<Value> = bases
        .iter()
        .map(|base| {
            let test = "git fsck --full --no-dangling";
            task(&format!("t{}", &base[..7]), &repo, base, test, json!({}))
        })
        .collect();
    let first = fixture.tasks(&tasks);
    let run = fixture.run_noop(&first, &[]);
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    let thin: HashSet<String> = bases
        .iter()
        .flat_map(|base| store_packs(&fixture, base))
        .filter_map(|line| Some(line.strip_prefix("thin ")?.split(' ').next()?.to_owned()))
        .collect();
    assert_eq!(thin.len(), bases.len() - 1, "{thin:?}");

    // Again, with the stores built: 4 epochs of each base at -j 4, with a
    // git that notes each fix it makes.
    let bin = fixture.path("bin");
    std::fs::create_dir_all(&bin).expect("mkdir bin");
    let real = git(fixture.dir.path(), &["--exec-path"]);
    let log = fixture.path("fixes.log");
    let wrapper = bin.join("git");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/bash\ncase \" $* \" in *' index-pack '*) echo fix >> '{}';; esac\nexec '{}/git' \"$@\"\n",
            log.display(),
            real
        ),
    )
    .expect("write the wrapper");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let rerun = |out: &str| {
        let out = fixture.path(out);
        let run = fixture.run_into(
            &out,
            &first,
            &[
                "--model",
                "noop",
                "--sandbox",
                "none",
                "--runs",
                "4",
                "-j",
                "4",
            ],
            &[("PATH", &path)],
        );
        assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
        let rows = run.rows();
        assert_eq!(rows.len(), 4 * bases.len());
        assert!(rows.iter().all(|row| row["status"] == "passed"), "{rows:?}");
        // The fixed packs went with the run's working copies.
        assert!(!out.join("workdirs").exists());
        let fixes = std::fs::read_to_string(&log).unwrap_or_default();
        let _ = std::fs::remove_file(&log);
        fixes.lines().count()
    };
    // The stores' own fixes are made again in process: no git.
    assert_eq!(rerun("out-2"), 0);

    // A store whose index is of another fix of its pack (one that git made,
    // as an older onebash stored them): git fixes each pack, once.
    let stores = manifest_of(&fixture, &bases[0]);
    let packs = stores
        .parent()
        .and_then(Path::parent)
        .expect("stores")
        .join("packs");
    let scratch = fixture.path("refix");
    std::fs::create_dir_all(&scratch).expect("mkdir refix");
    // The one mirror (`repos/` holds its lock file too).
    let mirror = std::fs::read_dir(fixture.path("cache").join("repos"))
        .expect("repos")
        .map(|entry| entry.expect("entry").path())
        .find(|path| path.is_dir())
        .expect("the mirror");
    for name in &thin {
        let fixed = scratch.join(format!("{name}.pack"));
        let thin_pack = std::fs::read(packs.join(format!("{name}.pack"))).expect("read thin");
        pipe_bytes(
            &mirror,
            &[
                "-c",
                "pack.compression=0",
                "-c",
                "core.compression=0",
                "index-pack",
                "--fix-thin",
                "--stdin",
                &fixed.display().to_string(),
            ],
            &thin_pack,
        );
        std::fs::copy(
            fixed.with_extension("idx"),
            packs.join(format!("{name}.idx")),
        )
        .expect("replace the index");
    }
    assert_eq!(rerun("out-3"), thin.len());
}
