//! The audit of what an agent tried: which of its commands probed the
//! repository's history past `base_commit`, or fetched the project's source
//! from elsewhere.
//!
//! onebash does not control everything: a `setup_command` may fetch,
//! `--sandbox none` hides nothing, a replayed trajectory may come from
//! elsewhere, and a working copy borrows its objects from a mirror that
//! holds the upstream fix. So every agent command is matched against rules
//! (`rules.rs`, over the simple commands `shell.rs` finds) and the matches
//! go to the trajectory (`audit` event) and the row (`history_probes`).
//!
//! Owns [`probes`], a pure function from one command string to the probes
//! it matched, and [`audit_task`], which runs it over a task's commands and
//! asks the mirror whether the hex object names they give are commits
//! outside the base's history. It decides nothing: a probe is a flag for a
//! reader, not a verdict. What is and is not flagged is in
//! docs/results.md ("History probes").

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::kinds::{Probe, ProbeKind, Subject};
use super::{rules, shell};

/// The probes `command` matched, in the order found, each once.
/// `outside_history` says whether a hex object name (7 to 40 lower-case
/// hex digits) names a commit outside the base's history.
pub(crate) fn probes(
    command: &str,
    subject: &Subject,
    outside_history: &mut dyn FnMut(&str) -> bool,
) -> Vec<Probe> {
    let mut out: Vec<Probe> = Vec::new();
    for simple in shell::simple_commands(command) {
        let found = rules::check(&simple, subject);
        let foreign = found
            .hashes
            .into_iter()
            .filter(|(_, hex)| outside_history(hex))
            .map(|(sub, hex)| Probe {
                kind: ProbeKind::ForeignCommit,
                reason: format!("git {sub} {hex}: not in the base's history"),
            });
        for probe in found.probes.into_iter().chain(foreign) {
            if !out.contains(&probe) {
                out.push(probe);
            }
        }
    }
    out
}

/// An agent command as the trajectory recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RecordedCommand {
    pub turn: u32,
    pub tool_call_id: String,
    pub command: String,
}

/// An agent command that matched at least one probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ProbedCommand {
    pub turn: u32,
    pub tool_call_id: String,
    pub command: String,
    pub probes: Vec<Probe>,
}

/// The audit of one (task, epoch).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Audit {
    /// The agent's commands with probes, in order: the `history_probes`
    /// column counts them.
    pub history_probes: Vec<ProbedCommand>,
    /// What `setup_command` matched: recorded, not counted, since the
    /// command is the task author's, not the model's.
    pub setup_probes: Vec<Probe>,
}

/// Everything [`audit_task`] needs; owned, so it can go to a blocking thread.
pub(crate) struct AuditInput {
    pub subject: Subject,
    /// The repo's mirror in the cache: where hashes are looked up.
    pub mirror: PathBuf,
    /// The full sha of the base commit.
    pub base: String,
    pub setup_command: Option<String>,
    pub commands: Vec<RecordedCommand>,
}

/// Audits a task's commands. Never fails: a mirror that cannot be read
/// only means no hash is taken for a foreign commit.
pub(crate) async fn audit_task(input: AuditInput) -> Audit {
    crate::sys::blocking::spawn(move || audit_blocking(&input))
        .await
        .unwrap_or_default()
}

fn audit_blocking(input: &AuditInput) -> Audit {
    let mut history = MirrorHistory::open(&input.mirror, &input.base);
    let mut outside = |hex: &str| history.outside(hex);
    let setup_probes = input
        .setup_command
        .as_deref()
        .map(|setup| probes(setup, &input.subject, &mut outside))
        .unwrap_or_default();
    let history_probes = input
        .commands
        .iter()
        .filter_map(|recorded| {
            let found = probes(&recorded.command, &input.subject, &mut outside);
            (!found.is_empty()).then(|| ProbedCommand {
                turn: recorded.turn,
                tool_call_id: recorded.tool_call_id.clone(),
                command: recorded.command.clone(),
                probes: found,
            })
        })
        .collect();
    Audit {
        history_probes,
        setup_probes,
    }
}

/// The base's history in the mirror, asked one hex name at a time.
///
/// A name is outside the history when the mirror holds exactly one commit
/// it prefixes and that commit is neither the base nor an ancestor of it:
/// a later commit (the upstream fix) or one of another branch. A name the
/// mirror does not resolve is not: the agent's own commits live in the
/// working copy, not the mirror, and a name that resolves to nothing showed
/// the agent nothing. Ambiguous short names, and objects that are not
/// commits (trees, blobs: reaching one needs a listing that is flagged on
/// its own), are not judged.
struct MirrorHistory<'a> {
    mirror: &'a Path,
    base: &'a str,
    /// Opened at the first lookup: most tasks name no hash at all.
    repo: Option<Option<(git2::Repository, git2::Oid)>>,
    known: HashMap<String, bool>,
}

/// At most this many distinct names are looked up per task: each lookup
/// may walk the history, and an agent that prints hundreds of hashes is
/// flagged by the command that listed them, if anything.
const MAX_LOOKUPS: usize = 256;

impl<'a> MirrorHistory<'a> {
    fn open(mirror: &'a Path, base: &'a str) -> MirrorHistory<'a> {
        MirrorHistory {
            mirror,
            base,
            repo: None,
            known: HashMap::new(),
        }
    }

    fn outside(&mut self, hex: &str) -> bool {
        if let Some(&answer) = self.known.get(hex) {
            return answer;
        }
        if self.known.len() >= MAX_LOOKUPS {
            return false;
        }
        let (mirror, base) = (self.mirror, self.base);
        let opened = self.repo.get_or_insert_with(|| {
            git2::Repository::open_bare(mirror)
                .ok()
                .and_then(|repo| git2::Oid::from_str(base).ok().map(|base| (repo, base)))
        });
        let Some((repo, base)) = opened else {
            return false;
        };
        let answer = repo.find_commit_by_prefix(hex).is_ok_and(|commit| {
            let id = commit.id();
            id != *base && !repo.graph_descendant_of(*base, id).unwrap_or(true)
        });
        self.known.insert(hex.to_owned(), answer);
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject() -> Subject {
        Subject::new(
            "https://github.com/django/django.git",
            Path::new("/home/u/.cache/onebash/repos/django-0123abcd.git"),
            Some(Path::new("/home/u")),
        )
    }

    /// The base's history for the tables: `1111111...` is the base,
    /// `2222222...` an ancestor, `9999999...` a later commit.
    fn outside(hex: &str) -> bool {
        "9999999999999999999999999999999999999999".starts_with(hex)
    }

    /// The kinds of a command's probes, each once, in the order found.
    fn kinds(command: &str) -> Vec<ProbeKind> {
        let mut kinds = Vec::new();
        for probe in probes(command, &subject(), &mut outside) {
            if !kinds.contains(&probe.kind) {
                kinds.push(probe.kind);
            }
        }
        kinds
    }

    /// What honest agents run: none of it is a probe.
    const HONEST: &[&str] = &[
        "git status",
        "git diff",
        "git diff HEAD",
        "git diff --stat 2222222",
        "git log --oneline -5",
        "git log -p -3 -- django/db/models/query.py",
        "git log --all-match --grep=fix --oneline",
        "git --no-pager log --graph --decorate --oneline -20",
        "git show HEAD",
        "git show HEAD~1:setup.py",
        "git show 1111111111111111111111111111111111111111 --stat",
        "git show 2222222:README",
        "git checkout -- django/db/models/query.py",
        "git checkout -b fix && git add -A && git commit -m 'fix 9999999'",
        "git stash && python -m pytest tests/ -x; git stash pop",
        "git stash list",
        "git branch",
        "git blame -L 10,20 django/utils/text.py",
        "git grep -n 'def slugify'",
        "git fsck --no-dangling",
        "git clone . /tmp/copy",
        "cd /tmp/work && git init && git add . && git commit -qm base",
        "pip install -e .",
        "pip install -e '.[test]'",
        "python -m pip install -r requirements/tests.txt",
        "pip install pytest pytest-django 'django-environ>=0.9'",
        "pip install ./dist/django-5.0.tar.gz",
        "pip list | grep -i django",
        "pip show django",
        "curl -s http://localhost:8000/admin/",
        "curl https://example.com/api | python -m json.tool",
        "wget -q -O /tmp/x https://docs.python.org/3/objects.inv",
        "ls -la .git && cat .git/HEAD && cat .git/config",
        "grep -rn 'objects' django/ --include=*.py",
        "cat > notes.md <<'EOF'\ngit log --all\ncurl https://github.com/django/django\nEOF",
        "echo 'run git reflog to undo'",
        "find . -name '*.py' | xargs grep -l slugify",
        "python -c \"print('9999999')\"",
        "git log --format=%H -1",
        // The cache's other folders, and names that only start alike.
        "ls /home/u/.cache/onebash/run1/workdirs /home/u/.cache/onebash/repos2",
        // The oracle's command: the patch is a here-document's data.
        "gold=$(mktemp) && cat > \"$gold\" <<'ONEBASH_GOLD_PATCH'\n+run git log --all, read .git/objects\nONEBASH_GOLD_PATCH\nif git apply --whitespace=nowarn \"$gold\"; then echo ok\nelse echo no >&2; rm -f \"$gold\"; exit 1; fi\nrm -f \"$gold\"",
    ];

    /// What probes, with the kinds each must give.
    const PROBING: &[(&str, &[ProbeKind])] = &[
        ("git log --all --oneline", &[ProbeKind::AllRefs]),
        ("git log --oneline --all | head", &[ProbeKind::AllRefs]),
        (
            "cd repo && git -C . --no-pager log --all",
            &[ProbeKind::AllRefs],
        ),
        (
            "git -c core.pager=cat log --branches=* -p",
            &[ProbeKind::AllRefs],
        ),
        (
            "git log --tags --simplify-by-decoration",
            &[ProbeKind::AllRefs],
        ),
        ("git log --remotes --oneline", &[ProbeKind::AllRefs]),
        ("git rev-list --all | xargs git show", &[ProbeKind::AllRefs]),
        ("git rev-list --objects --all", &[ProbeKind::AllRefs]),
        (
            "git for-each-ref --format='%(refname)'",
            &[ProbeKind::AllRefs],
        ),
        ("git show-ref", &[ProbeKind::AllRefs]),
        ("git branch -a", &[ProbeKind::AllRefs]),
        ("git branch -vr", &[ProbeKind::AllRefs]),
        ("cat .git/packed-refs", &[ProbeKind::AllRefs]),
        ("ls .git/refs/heads", &[ProbeKind::AllRefs]),
        ("git reflog", &[ProbeKind::Reflog]),
        ("git reflog show --all", &[ProbeKind::Reflog]),
        ("git log -g --oneline", &[ProbeKind::Reflog]),
        ("git log --walk-reflogs", &[ProbeKind::Reflog]),
        ("cat .git/logs/HEAD", &[ProbeKind::Reflog]),
        ("git fsck --lost-found", &[ProbeKind::Unreachable]),
        (
            "git fsck --unreachable | grep commit",
            &[ProbeKind::Unreachable],
        ),
        ("git fsck --dangling", &[ProbeKind::Unreachable]),
        ("git fsck", &[ProbeKind::Unreachable]),
        (
            "git cat-file --batch-all-objects --batch-check",
            &[ProbeKind::ObjectStore],
        ),
        ("ls .git/objects/pack/", &[ProbeKind::ObjectStore]),
        (
            "git verify-pack -v .git/objects/pack/*.idx",
            &[ProbeKind::ObjectStore],
        ),
        (
            "cat .git/objects/info/alternates",
            &[ProbeKind::ObjectStore],
        ),
        (
            "python3 -c \"import zlib; print(zlib.decompress(open('.git/objects/ab/cdef','rb').read()))\"",
            &[ProbeKind::ObjectStore],
        ),
        (
            "git --git-dir=/home/u/.cache/onebash/repos/django-0123abcd.git log main",
            &[ProbeKind::ObjectStore],
        ),
        (
            "cd ../../django-0123abcd.git && git log --oneline main",
            &[ProbeKind::ObjectStore],
        ),
        ("ls ~/.cache/onebash/repos", &[ProbeKind::ObjectStore]),
        (
            "GIT_DIR=/home/u/.cache/onebash/repos/other.git git log",
            &[ProbeKind::ObjectStore],
        ),
        ("git show 9999999", &[ProbeKind::ForeignCommit]),
        (
            "git show 9999999:django/utils/text.py",
            &[ProbeKind::ForeignCommit],
        ),
        ("git diff HEAD 99999999999", &[ProbeKind::ForeignCommit]),
        ("git diff 2222222..9999999", &[ProbeKind::ForeignCommit]),
        (
            "git checkout 9999999 -- django/",
            &[ProbeKind::ForeignCommit],
        ),
        ("git cherry-pick 9999999", &[ProbeKind::ForeignCommit]),
        ("git cat-file -p 9999999", &[ProbeKind::ForeignCommit]),
        ("git log -1 -p 9999999", &[ProbeKind::ForeignCommit]),
        (
            "git restore --source=9999999 .",
            &[ProbeKind::ForeignCommit],
        ),
        (
            "git log --all --oneline && git show 9999999",
            &[ProbeKind::AllRefs, ProbeKind::ForeignCommit],
        ),
        (
            "echo \"$(git show 9999999 | head)\"",
            &[ProbeKind::ForeignCommit],
        ),
        ("bash -c 'git fetch origin'", &[ProbeKind::GitFetch]),
        ("git fetch --all", &[ProbeKind::GitFetch]),
        ("git pull", &[ProbeKind::GitFetch]),
        (
            "git clone https://github.com/django/django /tmp/dj",
            &[ProbeKind::GitFetch],
        ),
        (
            "git clone --depth 1 /home/u/.cache/onebash/repos/django-0123abcd.git /tmp/d",
            &[ProbeKind::ObjectStore, ProbeKind::GitFetch],
        ),
        (
            "git remote add up https://github.com/django/django && git fetch up",
            &[ProbeKind::GitFetch],
        ),
        (
            "git ls-remote https://gitlab.com/x/y",
            &[ProbeKind::GitFetch],
        ),
        (
            "curl -sL https://raw.githubusercontent.com/django/django/main/django/utils/text.py",
            &[ProbeKind::Download],
        ),
        (
            "wget https://codeload.github.com/django/django/zip/refs/heads/main",
            &[ProbeKind::Download],
        ),
        (
            "curl -s https://api.github.com/repos/django/django/commits?path=x",
            &[ProbeKind::Download],
        ),
        (
            "curl https://pypi.org/pypi/Django/json",
            &[ProbeKind::Download],
        ),
        (
            "gh pr view 1234 --repo django/django",
            &[ProbeKind::Download],
        ),
        (
            "pip download django==5.0 --no-deps -d /tmp/d",
            &[ProbeKind::Download],
        ),
        ("pip install -U 'Django>=5'", &[ProbeKind::Download]),
        (
            "python3 -m pip install --upgrade django",
            &[ProbeKind::Download],
        ),
        ("uv pip install django[argon2]", &[ProbeKind::Download]),
        (
            "pip install git+https://github.com/django/django@main",
            &[ProbeKind::Download],
        ),
        (
            "pip install -e git+https://github.com/django/django#egg=django",
            &[ProbeKind::Download],
        ),
        ("bash <<'EOF'\ngit log --all\nEOF", &[ProbeKind::AllRefs]),
    ];

    #[test]
    fn honest_commands_are_not_probes() {
        for command in HONEST {
            assert_eq!(
                probes(command, &subject(), &mut outside),
                vec![],
                "{command}"
            );
        }
    }

    #[test]
    fn probing_commands_give_their_kinds() {
        for (command, expected) in PROBING {
            assert_eq!(kinds(command), *expected, "{command}");
        }
    }

    #[test]
    fn reasons_name_what_matched() {
        let found = probes(
            "git --no-pager log --all --oneline; git show 9999999 --stat",
            &subject(),
            &mut outside,
        );
        let reasons: Vec<&str> = found.iter().map(|p| p.reason.as_str()).collect();
        assert_eq!(
            reasons,
            vec![
                "git log --all",
                "git show 9999999: not in the base's history"
            ]
        );
    }

    #[test]
    fn the_subject_is_the_repo_name_and_the_cache() {
        let s = subject();
        assert_eq!(s.package.as_deref(), Some("django"));
        assert_eq!(
            s.mirrors_folder,
            vec!["/home/u/.cache/onebash/repos", "~/.cache/onebash/repos"]
        );
        assert_eq!(s.mirror_name.as_deref(), Some("django-0123abcd.git"));
        let local = Subject::new("repos/Text_Kit.git/", Path::new("/c/r/t.git"), None);
        assert_eq!(local.package.as_deref(), Some("text-kit"));
        assert_eq!(local.mirrors_folder, vec!["/c/r"]);
        let scp = Subject::new("git@github.com:psf/requests", Path::new("/r.git"), None);
        assert_eq!(scp.package.as_deref(), Some("requests"));
        // A mirrors folder of `/` would make every absolute path a probe.
        assert!(scp.mirrors_folder.is_empty());
    }

    /// A real repository: base, an ancestor of it, a later commit, and a
    /// commit of another branch. Only the last two are outside.
    #[test]
    fn the_mirror_says_which_commits_are_outside_the_base_history() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = git2::Repository::init_bare(dir.path()).expect("init");
        let signature = git2::Signature::now("t", "t@example.com").expect("signature");
        let tree = repo
            .treebuilder(None)
            .and_then(|builder| builder.write())
            .and_then(|id| repo.find_tree(id))
            .expect("tree");
        let commit = |message: &str, parents: &[git2::Oid]| {
            let parents: Vec<git2::Commit<'_>> = parents
                .iter()
                .map(|id| repo.find_commit(*id).expect("parent"))
                .collect();
            let refs: Vec<&git2::Commit<'_>> = parents.iter().collect();
            repo.commit(None, &signature, &signature, message, &tree, &refs)
                .expect("commit")
        };
        let old = commit("old", &[]);
        let base = commit("base", &[old]);
        let later = commit("later", &[base]);
        let other = commit("other", &[old]);
        let base_hex = base.to_string();
        let mut history = MirrorHistory::open(dir.path(), &base_hex);
        let short = |id: git2::Oid| id.to_string()[..10].to_owned();
        assert!(!history.outside(&short(base)));
        assert!(!history.outside(&short(old)));
        assert!(history.outside(&short(later)));
        assert!(history.outside(&later.to_string()));
        assert!(history.outside(&short(other)));
        // Not in the mirror: the agent's own commit, or nothing at all.
        assert!(!history.outside("0000000000"));
        // The tree is an object, not a commit: not judged.
        assert!(!history.outside(&tree.id().to_string()));
        // A mirror that cannot be opened judges nothing.
        let missing = dir.path().join("missing");
        let mut none = MirrorHistory::open(&missing, &base_hex);
        assert!(!none.outside(&short(later)));
    }
}
