//! The repo a task's image holds at its workdir (SWE-bench's images hold
//! the project at `/testbed`, at its base commit or at the image's own
//! setup commit on top of it, often with the whole upstream history, its
//! branches and tags, and sometimes the fix).
//!
//! Owns the bash scripts that run inside a container, as the harness, on
//! that repo, and the reading of their reports: [`prepare`] makes it hold
//! exactly what the starting point reaches (the base, or the image's
//! setup commits on top of it) and checks that (the promise onebash's own
//! checkouts keep on the host, `checkout/store.rs`), before any command
//! of the agent; [`diff`] writes the agent's change; [`to_start`],
//! [`restore`] and [`apply`] serve the tests' fresh container. Also the
//! state of such a repo ([`ImageRepo`]: what diffs compare with, the
//! agent's change) and the order its scripts run in, through a
//! [`Container`] that each environment holding such repos implements
//! (`container.rs`, and `oci/workspace.rs` under bwrap): it runs them and
//! copies files in and out; and what both share around them: reading the
//! scripts' outcomes, the task's checkout record, and the setup run again
//! in the tests' fresh environment ([`SetupLog`]).
//!
//! The scripts need bash, git and coreutils, as the probes of the tests
//! do. Every value they take is put in as a quoted shell word.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::{BoxFuture, Command, EnvError, Trust, Workspace};
use crate::checkout::{BUILD_ARTEFACTS, Checkout, CheckoutError, GitError, History, Verified};
use crate::sys::exec::{CommandEnv, CommandOutcome};

/// How long the harness's own git scripts may take (cleaning a big repo
/// repacks all of its history).
pub(super) const GIT_TIMEOUT: Duration = Duration::from_secs(1800);

/// The last line of [`prepare`]'s output when the repo passed its check:
/// `ONEBASH-REPO base=<sha> head=<sha> objects=<n> commits=<n> moved=<sha>
/// setup=<sha>,<sha>...`.
const REPORT: &str = "ONEBASH-REPO ";
/// The line [`prepare`] ends with when it could not make the repo safe.
const REFUSED: &str = "ONEBASH-REPO-ERROR ";
/// Where the agent's change is written, in the repo's `.git`.
pub(super) const DIFF_FILE: &str = ".git/onebash-agent.diff";
/// The exclude rules of [`diff`]: the image's own untracked files, and
/// [`BUILD_ARTEFACTS`].
const EXCLUDE_FILE: &str = ".git/onebash-exclude";

/// A word bash reads back as `text`.
pub(super) fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// What [`prepare`] found and left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Prepared {
    /// The full sha of the base commit.
    pub base: String,
    /// HEAD now: the starting point ([`Prepared::start`]), or with
    /// `--history none` a parentless commit of its tree.
    pub head: String,
    /// Objects in the repo, each reachable from HEAD: what the check found.
    pub objects: u64,
    /// Commits HEAD reaches.
    pub commits: u64,
    /// Where the image's HEAD was, when it was neither the base nor a
    /// setup commit on top of it (the base was checked out).
    pub moved_from: Option<String>,
    /// The image's own commits on top of the base, oldest first, when its
    /// HEAD was one (SWE-bench's `SWE-bench` commit of what its setup
    /// changed): the agent starts from the last.
    pub setup_commits: Vec<String>,
}

impl Prepared {
    /// The commit the agent starts from as the image holds it: the last
    /// setup commit, else the base. The tests' fresh container is put
    /// there.
    pub(super) fn start(&self) -> &str {
        self.setup_commits.last().unwrap_or(&self.base)
    }

    /// What the runner records: a checkout whose folder is `dir` (the
    /// task's host folder), with the move, if any, as its warning.
    pub(super) fn into_checkout(self, dir: &Path, history: History) -> Checkout {
        Checkout {
            dir: dir.to_owned(),
            commit: self.base,
            head: self.head,
            setup_commits: self.setup_commits,
            history,
            verified: Verified {
                objects: self.objects,
            },
            fetched: false,
            warning: self.moved_from.map(|was| {
                format!(
                    "the repo in the image was at {was}, not at the base: the base was checked out (untracked files kept)"
                )
            }),
        }
    }
}

/// Why the repo in the image was not used.
#[derive(Debug, thiserror::Error)]
pub(super) enum Refused {
    /// The preparing script refused it (no repo, no base, dirty), in the
    /// script's words.
    #[error("{message}")]
    Script { message: String },
    /// It was cleaned and still holds something past the base, in the
    /// script's words.
    #[error("{message}")]
    Leaking { message: String },
    /// The preparing script could not be run in the container.
    #[error("{0}")]
    Exec(#[source] EnvError),
    #[error("cleaning the repo timed out after {seconds} s")]
    TimedOut { seconds: u64 },
    /// The script's last lines, joined by ` / `.
    #[error("the preparing script ended without its report: {tail}")]
    NoReport { tail: String },
    #[error("a report onebash cannot read: {report}")]
    BadReport { report: String },
}

impl Refused {
    /// The task's checkout error; `repo` names the image and its workdir.
    pub(super) fn into_error(self, repo: String, rev: &str) -> CheckoutError {
        let rev = rev.to_owned();
        match self {
            Refused::Leaking { message } => CheckoutError::Leaking { repo, rev, message },
            unusable => CheckoutError::WorkingCopy {
                repo,
                rev,
                message: unusable.to_string(),
            },
        }
    }
}

/// A harness git script's output, or why it failed (timed out, or an exit
/// code other than 0).
pub(super) fn git_result(outcome: &CommandOutcome, output: String) -> Result<String, EnvError> {
    if outcome.timed_out {
        return Err(EnvError::ScriptTimedOut {
            seconds: GIT_TIMEOUT.as_secs(),
            output: output.trim().to_owned(),
        });
    }
    if outcome.exit_code != 0 {
        return Err(EnvError::ScriptFailed {
            exit_code: outcome.exit_code,
            output: output.trim().to_owned(),
        });
    }
    Ok(output)
}

/// [`prepare`]'s report or refusal, from its outcome (the script's last
/// line says which, whatever its exit code).
pub(super) fn prepared(outcome: &CommandOutcome, output: &str) -> Result<Prepared, Refused> {
    if outcome.timed_out {
        return Err(Refused::TimedOut {
            seconds: GIT_TIMEOUT.as_secs(),
        });
    }
    read_report(output)
}

/// Makes the repo in the working folder hold exactly what its starting
/// point reaches, then checks it. In order: the base is found
/// (`base^{commit}`); the starting point is the image's HEAD when that is
/// the base, or a descendant of it whose commits on top of the base no
/// ref reaches but the branch HEAD is on (the image builder's own
/// commits, as SWE-bench's setup commit: commits that came with a clone
/// are named by its branches, tags or remote-tracking refs, and may be
/// the fix), else the base; a repo at its starting point with changes to
/// tracked files is refused (they would be the agent's in its diff); HEAD
/// is detached at the starting point (`checkout -f` of the base when the
/// image's HEAD is elsewhere, untracked files kept); every ref
/// (branches, tags, remotes, stash, notes, `refs/original`), every remote
/// and branch section of the config, the reflogs, `packed-refs`,
/// `FETCH_HEAD`/`ORIG_HEAD` and the other state files of merges and
/// rebases, other worktrees, grafts, commit-graphs, bitmaps, `.keep` and
/// `.promisor` marks go; with `--history none`, HEAD becomes one commit
/// with no parents and the starting point's tree. Then `git repack -a -d`
/// writes one pack of what HEAD and the index reach (nothing else refers
/// to anything now; objects of alternates are copied in, then the
/// alternates file goes) and deletes every other pack, and `git prune
/// --expire=now` the loose objects nothing reaches. `git gc` would do the
/// same and more (write a commit-graph, pack refs, run hooks): the steps
/// are spelled out so that each one is known. The check then asks, as the host's does: no
/// ref, no reflog, no remote, no alternates, HEAD detached at the head,
/// `rev-list --all` is HEAD's ancestry, and the repo's objects
/// (`cat-file --batch-all-objects`) are exactly the set `rev-list
/// --objects HEAD` lists.
pub(super) fn prepare(base: &str, history: History) -> String {
    let artefacts: Vec<String> = BUILD_ARTEFACTS.iter().map(|rule| quote(rule)).collect();
    format!(
        "base={base}\nhistory={history}\nartefacts=({artefacts})\n{PREPARE}",
        base = quote(base),
        history = history.name(),
        artefacts = artefacts.join(" "),
    )
}

const PREPARE: &str = r#"fail() { echo "ONEBASH-REPO-ERROR $*"; exit 1; }
leak() { echo "ONEBASH-REPO-ERROR leaking: $*"; exit 1; }
# An image's repo may belong to another user than the one commands run as.
export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*'
command -v git >/dev/null 2>&1 || fail "the image has no git"
top=$(git rev-parse --show-toplevel 2>/dev/null) || fail "$PWD holds no git repository"
[ "$top" = "$(pwd -P)" ] || fail "$PWD is inside the repository at $top, not its top"
gitdir=$(git rev-parse --absolute-git-dir) || fail "no .git"
[ "$gitdir" = "$top/.git" ] || fail "its .git is elsewhere ($gitdir)"
[ -n "$(git config extensions.partialClone)" ] && fail "it is a partial clone: objects would be fetched on demand"
full=$(git rev-parse --verify --quiet "$base^{commit}") || fail "the base commit $base is not in the image's repo"
was=$(git rev-parse --verify --quiet HEAD)
start=$full
if [ -n "$was" ] && [ "$was" != "$full" ] && git merge-base --is-ancestor "$full" "$was" 2>/dev/null; then
  # HEAD is past the base. Its commits on top are the image builder's
  # (a benchmark's setup commit) when no ref but HEAD's own branch reaches
  # any of them; those that came with a clone have its refs naming them.
  own=$(git symbolic-ref -q HEAD)
  past=$(git rev-list --count "$full..$was")
  alone=$( { printf '%s\n' "$was" "^$full"; git for-each-ref --format='^%(refname)' | grep -vxF -e "^$own"; } |
    git rev-list --stdin --count 2>/dev/null)
  [ "$alone" = "$past" ] && start=$was
fi
moved=
if [ "$was" = "$start" ]; then
  if ! git diff --quiet HEAD -- 2>/dev/null; then
    fail "the repo in the image has uncommitted changes to tracked files ($(git diff --name-only HEAD -- | head -n 3 | tr '\n' ' '))"
  fi
  git checkout -q --detach 2>&1 || fail "git checkout --detach failed"
else
  git checkout -q -f --detach "$full" 2>&1 || fail "git checkout of the base failed"
  moved=$was
fi
setup=$(git rev-list --reverse "$full..$start" | paste -sd, -) || fail "git rev-list of the setup commits failed"
for remote in $(git remote); do git config --remove-section "remote.$remote"; done
git config --name-only --get-regexp '^branch\.' | sed 's/\.[^.]*$//' | sort -u |
  while read -r section; do git config --remove-section "$section"; done
git for-each-ref --format='delete %(refname)' | git update-ref --no-deref --stdin ||
  fail "deleting the refs failed"
head=$start
if [ "$history" = none ]; then
  head=$(git cat-file commit "$start" | sed '1,/^$/{/^parent /d;}' | git hash-object -t commit -w --stdin) ||
    fail "writing the commit without history failed"
  git update-ref --no-deref HEAD "$head" || fail "moving HEAD failed"
fi
rm -rf "$gitdir/logs" "$gitdir/packed-refs" "$gitdir/FETCH_HEAD" "$gitdir/ORIG_HEAD" \
  "$gitdir/MERGE_HEAD" "$gitdir/CHERRY_PICK_HEAD" "$gitdir/REVERT_HEAD" "$gitdir/AUTO_MERGE" \
  "$gitdir"/BISECT_* "$gitdir/rebase-merge" "$gitdir/rebase-apply" "$gitdir/sequencer" \
  "$gitdir/refs/original" "$gitdir/info/refs" "$gitdir/info/grafts" "$gitdir/worktrees" \
  "$gitdir/objects/info/commit-graph" "$gitdir/objects/info/commit-graphs" \
  "$gitdir/objects/info/packs" "$gitdir/objects/pack/multi-pack-index"
rm -f "$gitdir"/objects/pack/*.keep "$gitdir"/objects/pack/*.promisor \
  "$gitdir"/objects/pack/*.bitmap "$gitdir"/objects/pack/*.rev "$gitdir"/objects/pack/*.mtimes
git -c repack.writeBitmaps=false -c pack.writeBitmaps=false repack -a -d -q -n 2>&1 ||
  fail "git repack failed"
rm -f "$gitdir/objects/info/alternates" "$gitdir/objects/info/http-alternates"
git prune --expire=now 2>&1 || fail "git prune failed"
git config gc.auto 0 && git config maintenance.auto false
git config user.name >/dev/null || git config user.name onebash
git config user.email >/dev/null || git config user.email onebash@localhost
# The image's untracked files are no part of the agent's change.
{ printf '%s\n' "${artefacts[@]}"
  git ls-files --others --exclude-standard | sed 's/[][*?\\]/\\&/g; s|^|/|'
} > "$gitdir/onebash-exclude"
# The check.
for f in packed-refs FETCH_HEAD ORIG_HEAD logs objects/info/alternates objects/info/http-alternates; do
  [ -e "$gitdir/$f" ] && leak "it has .git/$f"
done
refs=$(git for-each-ref --format='%(refname)' | head -n 3 | tr '\n' ' ')
[ -z "$refs" ] || leak "it has refs: $refs"
[ -z "$(git config --get-regexp '^remote\.')" ] || leak "its config names a remote"
git symbolic-ref -q HEAD >/dev/null && leak "HEAD is a branch"
[ "$(git rev-parse HEAD)" = "$head" ] || leak "HEAD is not $head"
work=$(mktemp -d) || fail "mktemp failed"
git rev-list --all > "$work/all" && git rev-list "$head" > "$work/head" || fail "git rev-list failed"
[ "$(sort "$work/all")" = "$(sort "$work/head")" ] || leak "rev-list --all lists commits HEAD does not reach"
git rev-list --objects "$head" | cut -d' ' -f1 | sort > "$work/reached" || fail "git rev-list --objects failed"
git cat-file --batch-all-objects --batch-check='%(objectname)' | sort -u > "$work/held" || fail "git cat-file failed"
extra=$(comm -13 "$work/reached" "$work/held" | head -n 3 | tr '\n' ' ')
[ -z "$extra" ] || leak "it holds objects HEAD does not reach: $extra"
missing=$(comm -23 "$work/reached" "$work/held" | head -n 3 | tr '\n' ' ')
[ -z "$missing" ] || fail "objects HEAD reaches are missing: $missing"
objects=$(wc -l < "$work/held")
commits=$(wc -l < "$work/head")
rm -rf "$work"
echo "ONEBASH-REPO base=$full head=$head objects=$objects commits=$commits moved=$moved setup=$setup""#;

/// Reads [`prepare`]'s output.
pub(super) fn read_report(output: &str) -> Result<Prepared, Refused> {
    if let Some(message) = output.lines().rev().find_map(|l| l.strip_prefix(REFUSED)) {
        return Err(match message.strip_prefix("leaking: ") {
            Some(leak) => Refused::Leaking {
                message: leak.to_owned(),
            },
            None => Refused::Script {
                message: message.to_owned(),
            },
        });
    }
    let Some(report) = output.lines().rev().find_map(|l| l.strip_prefix(REPORT)) else {
        let tail: Vec<&str> = output.lines().rev().take(5).collect();
        return Err(Refused::NoReport {
            tail: tail.into_iter().rev().collect::<Vec<_>>().join(" / "),
        });
    };
    let field = |name: &str| {
        report.split(' ').find_map(|word| {
            word.strip_prefix(name)
                .and_then(|rest| rest.strip_prefix('='))
        })
    };
    let number = |name: &str| field(name).and_then(|v| v.parse::<u64>().ok());
    let is_sha = |v: &str| v.len() >= 40;
    let sha = |name: &str| field(name).filter(|v| is_sha(v)).map(str::to_owned);
    // Empty (or absent) when the image's HEAD was no setup commit.
    let setup: Option<Vec<String>> = field("setup")
        .unwrap_or_default()
        .split(',')
        .filter(|v| !v.is_empty())
        .map(|v| is_sha(v).then(|| v.to_owned()))
        .collect();
    match (
        sha("base"),
        sha("head"),
        number("objects"),
        number("commits"),
        setup,
    ) {
        (Some(base), Some(head), Some(objects), Some(commits), Some(setup_commits)) => {
            Ok(Prepared {
                base,
                head,
                objects,
                commits,
                moved_from: sha("moved"),
                setup_commits,
            })
        }
        _ => Err(Refused::BadReport {
            report: report.to_owned(),
        }),
    }
}

/// Writes the agent's change against `commit` (the head) to
/// [`DIFF_FILE`], as `git apply` takes it: new files with their content
/// (not those the image had untracked, nor build artefacts), binary files
/// in full, and the files of `binary` as binary too (text that is not
/// UTF-8, which a UTF-8 patch cannot carry as it is: see
/// [`not_utf8_files`]). Through an index of its own, made from `commit`,
/// so the repo is left as it was and every file is compared by content.
pub(super) fn diff(commit: &str, binary: &[String]) -> String {
    let attributes: Vec<String> = binary
        .iter()
        .map(|path| quote(&format!("/{} binary", glob_escaped(path))))
        .collect();
    format!(
        r#"export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*'
work=$(mktemp -d) || exit 1
export GIT_INDEX_FILE="$work/index"
# An index of the commit with no stat data, so that `add` hashes every
# file: a copy of the repo's index vouches for files by their stat, and a
# change made in the same clock tick as that index (same size, inode
# reused) passed for unchanged, leaving the diff empty.
git read-tree {commit} || exit 1
printf '%s\n' {attributes} > "$work/attributes"
git -c core.excludesFile="$PWD/{EXCLUDE_FILE}" add -A . || exit 1
git -c core.attributesFile="$work/attributes" diff --cached --binary --full-index {commit} > {DIFF_FILE} || exit 1
rm -rf "$work""#,
        commit = quote(commit),
        attributes = attributes.join(" "),
    )
}

/// A path as a pattern of an ignore or attributes file that matches it
/// alone.
fn glob_escaped(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\' | ' ') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The files whose part of `patch` is not UTF-8, by their `b/` path.
pub(super) fn not_utf8_files(patch: &[u8]) -> Vec<String> {
    let mut files = Vec::new();
    let mut sections: Vec<&[u8]> = Vec::new();
    let mut start = 0;
    let marker = b"diff --git ";
    for (at, _) in patch.iter().enumerate() {
        if patch[at..].starts_with(marker) && (at == 0 || patch[at - 1] == b'\n') && at > start {
            sections.push(&patch[start..at]);
            start = at;
        }
    }
    sections.push(&patch[start..]);
    for section in sections {
        if std::str::from_utf8(section).is_err() {
            let header =
                String::from_utf8_lossy(section.split(|b| *b == b'\n').next().unwrap_or_default())
                    .into_owned();
            files.extend(crate::task::patch_files(&header));
        }
    }
    files
}

/// In the tests' fresh container: HEAD detached at `start`, the commit
/// the agent started from (the base, or the image's own setup commit),
/// when the image has it elsewhere; the output is the base's full sha,
/// which the test files are restored to (SWE-bench's eval script runs
/// `git checkout BASE TEST_FILES` on its setup commit).
pub(super) fn to_start(base: &str, start: &str) -> String {
    format!(
        r#"export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*'
full=$(git rev-parse --verify --quiet {base}^{{commit}}) || {{ echo "the base commit is not in the image's repo"; exit 1; }}
start=$(git rev-parse --verify --quiet {start}^{{commit}}) || {{ echo "the commit the agent started from, "{start}", is not in the image's repo"; exit 1; }}
[ "$(git rev-parse HEAD)" = "$start" ] || git checkout -q -f --detach "$start" || exit 1
echo "$full""#,
        base = quote(base),
        start = quote(start),
    )
}

/// Puts `paths` back as they are at `commit` (in the working tree and the
/// index), removing those `commit` has not.
pub(super) fn restore(commit: &str, paths: &[String]) -> String {
    let words: Vec<String> = paths.iter().map(|p| quote(p)).collect();
    format!(
        r#"export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*'
for p in {words}; do
  rm -rf -- "$p"
  if git cat-file -e {commit}:"$p" 2>/dev/null; then
    git checkout -q {commit} -- "$p" || exit 1
  else
    git rm -q --cached --ignore-unmatch -- "$p" >/dev/null || exit 1
  fi
done"#,
        words = words.join(" "),
        commit = quote(commit),
    )
}

/// Applies the patch in `file` (relative to the repo) strictly, as `git
/// apply` does, then removes the file.
pub(super) fn apply(file: &str) -> String {
    format!(
        r#"export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*'
git apply {file} 2>&1; code=$?
rm -f {file}
exit $code"#,
        file = quote(file),
    )
}

/// What the repo in an image needs of the container it is in: the
/// harness's git scripts (their output, or why they failed), and files
/// copied in and out by paths relative to the workdir.
pub(super) trait Container: Sync {
    fn git<'a>(&'a self, script: &'a str) -> BoxFuture<'a, Result<String, EnvError>>;
    fn copy_in<'a>(
        &'a self,
        relative: &'a Path,
        bytes: Vec<u8>,
    ) -> BoxFuture<'a, Result<(), EnvError>>;
    fn copy_out<'a>(&'a self, relative: &'a Path) -> BoxFuture<'a, Result<Vec<u8>, EnvError>>;
}

/// The repo an image holds, once prepared: what the diff and restores
/// compare with, where the tests' container starts, and the agent's
/// change for it.
pub(super) struct ImageRepo {
    /// `base_commit` as the task gives it.
    base: String,
    /// The commit the agent started from, as the image holds it
    /// ([`Prepared::start`]): the base, or the image's last setup commit.
    start: Mutex<String>,
    /// What the diff compares with: HEAD as prepared in the agent's
    /// container (the start's tree); then, in the tests', the base, which
    /// the test files are restored to.
    commit: Mutex<String>,
    /// The agent's change, applied in the tests' fresh container.
    diff: Mutex<Option<String>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ImageRepo {
    pub(super) fn new(base: &str) -> ImageRepo {
        ImageRepo {
            base: base.to_owned(),
            start: Mutex::new(base.to_owned()),
            commit: Mutex::new(String::new()),
            diff: Mutex::new(None),
        }
    }

    /// [`prepare`] left the repo as `prepared` says.
    pub(super) fn prepared(&self, prepared: &Prepared) {
        *lock(&self.start) = prepared.start().to_owned();
        *lock(&self.commit) = prepared.head.clone();
    }

    /// The agent's change, from the repo in the image; kept for the tests'
    /// container.
    pub(super) async fn diff(&self, container: &dyn Container) -> Result<String, GitError> {
        let commit = lock(&self.commit).clone();
        let mut binary: Vec<String> = Vec::new();
        // Twice at most: text files that are not UTF-8 are diffed again as
        // binary, which is ASCII (as `Checkout::diff` does on the host).
        let diff = loop {
            container
                .git(&diff(&commit, &binary))
                .await
                .map_err(|err| GitError::ContainerDiff(err.into()))?;
            let bytes = container
                .copy_out(Path::new(DIFF_FILE))
                .await
                .map_err(|err| GitError::ContainerRead(err.into()))?;
            match String::from_utf8(bytes) {
                Ok(diff) => break diff,
                Err(err) => {
                    let found = not_utf8_files(err.as_bytes());
                    if !binary.is_empty() || found.is_empty() {
                        break String::from_utf8_lossy(err.as_bytes()).into_owned();
                    }
                    binary = found;
                }
            }
        };
        *lock(&self.diff) = Some(diff.clone());
        Ok(diff)
    }

    /// The tests' fresh container: the repo in the image at the commit the
    /// agent started from, with the agent's change applied.
    pub(super) async fn to_tests(&self, container: &dyn Container) -> Result<(), EnvError> {
        let start = lock(&self.start).clone();
        let base = container
            .git(&to_start(&self.base, &start))
            .await
            .map_err(|source| EnvError::TestsCheckout {
                commit: start.clone(),
                source: Box::new(source),
            })?;
        // Restores put the test patch's files back as they are at the base
        // from now on, as SWE-bench's eval script does on its setup commit
        // (the head prepared with --history none is the agent's
        // container's only; the agent's diff was against the start's tree).
        *lock(&self.commit) = base.lines().last().unwrap_or_default().trim().to_owned();
        let diff = lock(&self.diff).clone().unwrap_or_default();
        if diff.trim().is_empty() {
            return Ok(());
        }
        self.apply(container, &diff)
            .await
            .map_err(EnvError::AgentPatch)
    }

    /// Puts the files `patch` touches back as they are at the base, in the
    /// tests' container.
    pub(super) async fn restore(
        &self,
        container: &dyn Container,
        patch: &str,
    ) -> Result<Vec<String>, GitError> {
        let paths: Vec<String> = crate::checkout::patch_paths(patch)?
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        let commit = lock(&self.commit).clone();
        container
            .git(&restore(&commit, &paths))
            .await
            .map_err(|err| GitError::ContainerRestore(err.into()))?;
        Ok(paths)
    }

    /// Applies `patch` strictly, in the container.
    pub(super) async fn apply(
        &self,
        container: &dyn Container,
        patch: &str,
    ) -> Result<(), GitError> {
        let file = ".git/onebash-apply.diff";
        container
            .copy_in(Path::new(file), patch.as_bytes().to_vec())
            .await
            .map_err(|err| GitError::ContainerCopyIn(err.into()))?;
        container
            .git(&apply(file))
            .await
            .map(|_| ())
            .map_err(|err| GitError::ContainerApply(err.into()))
    }
}

/// The harness commands run before the agent's end (the task's
/// setup_command), run again in the tests' fresh environment, where what
/// they did to the image's files is gone.
#[derive(Default)]
pub(super) struct SetupLog {
    commands: Mutex<Vec<(String, CommandEnv, Duration)>>,
    /// Set once the agent phase ended: harness commands from then on (the
    /// test patch's fallbacks) are not setup to run again.
    agent_over: AtomicBool,
}

impl SetupLog {
    /// Keeps `command` when it is the harness's, before the agent's end.
    pub(super) fn record(&self, command: &Command<'_>) {
        if command.trust == Trust::Harness && !self.agent_over.load(Ordering::Relaxed) {
            lock(&self.commands).push((
                command.script.to_owned(),
                command.env.clone(),
                command.timeout,
            ));
        }
    }

    /// The agent phase is over: nothing more is kept.
    pub(super) fn agent_over(&self) {
        self.agent_over.store(true, Ordering::Relaxed);
    }

    /// Runs every kept command again in `workspace`, in order; the first
    /// failure ends it.
    pub(super) async fn replay(&self, workspace: &dyn Workspace) -> Result<(), EnvError> {
        let commands = lock(&self.commands).clone();
        for (script, env, timeout) in &commands {
            let outcome = workspace
                .run(Command {
                    script,
                    timeout: *timeout,
                    env,
                    trust: Trust::Harness,
                })
                .await
                .map_err(EnvError::ReplayExec)?;
            if outcome.exit_code != 0 || outcome.timed_out {
                return Err(EnvError::ReplayFailed(outcome.exit_code));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_reads_back_and_a_refusal_says_why() {
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let output = format!("noise\nONEBASH-REPO base={a} head={b} objects=12 commits=3 moved=\n");
        assert_eq!(
            read_report(&output).expect("a report"),
            Prepared {
                base: a.clone(),
                head: b.clone(),
                objects: 12,
                commits: 3,
                moved_from: None,
                setup_commits: Vec::new(),
            }
        );
        let moved = format!("ONEBASH-REPO base={a} head={a} objects=1 commits=1 moved={b} setup=");
        assert_eq!(
            read_report(&moved).expect("a report").moved_from,
            Some(b.clone())
        );
        // The image's setup commits, oldest first: the agent starts from
        // the last one.
        let c = "c".repeat(40);
        let setup =
            format!("ONEBASH-REPO base={a} head={c} objects=9 commits=4 moved= setup={b},{c}");
        let prepared = read_report(&setup).expect("a report");
        assert_eq!(prepared.setup_commits, vec![b.clone(), c.clone()]);
        assert_eq!(prepared.start(), c);
        assert_eq!(prepared.moved_from, None);
        assert_eq!(read_report(&output).expect("a report").start(), a);
        assert!(matches!(
            read_report(&format!(
                "ONEBASH-REPO base={a} head={a} objects=1 commits=1 moved= setup={b},xyz"
            )),
            Err(Refused::BadReport { .. })
        ));
        assert!(matches!(
            read_report("ONEBASH-REPO-ERROR leaking: it has refs: refs/tags/v1 \n"),
            Err(Refused::Leaking { message }) if message == "it has refs: refs/tags/v1 "
        ));
        assert!(matches!(
            read_report("ONEBASH-REPO-ERROR the image has no git"),
            Err(Refused::Script { message }) if message == "the image has no git"
        ));
        assert!(matches!(
            read_report("killed"),
            Err(Refused::NoReport { .. })
        ));
        assert!(matches!(
            read_report("ONEBASH-REPO base=x head=y objects=1 commits=1"),
            Err(Refused::BadReport { .. })
        ));
    }

    #[test]
    fn the_files_of_a_patch_that_are_not_utf8_are_found() {
        let mut patch = b"diff --git a/ok.txt b/ok.txt\n+fine\n".to_vec();
        patch.extend_from_slice(b"diff --git a/latin.txt b/latin.txt\n+caf\xe9\n");
        patch.extend_from_slice(b"diff --git a/also ok b/also ok\n+fine\n");
        assert_eq!(not_utf8_files(&patch), vec!["latin.txt"]);
        assert!(not_utf8_files(b"diff --git a/x b/x\n+x\n").is_empty());
        assert_eq!(glob_escaped("a [b]*.py"), r"a\ \[b\]\*.py");
    }

    #[test]
    fn values_are_quoted_as_single_shell_words() {
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert!(prepare("v1.0; rm -rf /", History::Full).starts_with("base='v1.0; rm -rf /'\n"));
        assert!(restore("abc", &["a b".to_owned()]).contains("for p in 'a b'; do"));
        assert!(to_start("v1", "it's").contains("--quiet 'it'\\''s'^{commit}"));
    }
}
