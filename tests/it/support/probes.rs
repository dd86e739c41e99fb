//! Probes for anything past a task's base commit, as one bash script an
//! agent's command can run in its working copy (issue: "nothing from the
//! future"). The script needs only bash, git and coreutils, and takes
//! everything it looks for as literal text, so the same script runs on the
//! host, under bwrap, or inside a task's container image.
//!
//! Each probe prints `LEAK <probe>: <what it found>` when it finds
//! something; the script ends with `PROBES DONE LEAKS <n>`.

/// What the probes look for: commits past the base (by full sha), text
/// that only exists past the base (in commit messages or file contents),
/// and paths an agent must not be able to read (the cache, the mirror).
pub struct Future<'a> {
    pub commits: &'a [&'a str],
    pub texts: &'a [&'a str],
    pub unreadable: &'a [&'a str],
}

/// The names of the probes, as the script prints them.
pub const PROBES: &[&str] = &[
    "log-all",
    "fsck-lost-found",
    "cat-file-e",
    "batch-all-objects",
    "alternates",
    "unreadable",
    "messages",
    "refs",
    "reflog",
    "git-files",
    "nearby-packs",
];

fn quoted(items: &[&str]) -> String {
    items
        .iter()
        .map(|item| format!("'{}'", item.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The script (a bash command) for `future`, run in the working copy.
pub fn script(future: &Future<'_>) -> String {
    format!(
        r#"commits=({commits})
texts=({texts})
unreadable=({unreadable})
leaks=0
leak() {{ echo "LEAK $1: $2"; leaks=$((leaks + 1)); }}
out=$(mktemp)
# Whether the file $1 holds a future commit's name or a future text.
future_in() {{
  local c t
  for c in "${{commits[@]}}"; do grep -qF -- "$c" "$1" && {{ echo "$c"; return 0; }}; done
  for t in "${{texts[@]}}"; do grep -qF -- "$t" "$1" && {{ echo "$t"; return 0; }}; done
  return 1
}}
git log --all --format='%H %B' > "$out" 2>&1
found=$(future_in "$out") && leak log-all "$found"
git fsck --lost-found > "$out" 2>&1
grep -qE 'dangling|unreachable' "$out" && leak fsck-lost-found "$(grep -E 'dangling|unreachable' "$out" | head -n 3 | tr '\n' ' ')"
for c in "${{commits[@]}}"; do
  git cat-file -e "$c" 2>/dev/null && leak cat-file-e "$c"
done
git cat-file --batch-all-objects --batch > "$out" 2>&1
found=$(future_in "$out") && leak batch-all-objects "$found"
for f in .git/objects/info/alternates .git/objects/info/http-alternates; do
  if [ -e "$f" ]; then
    leak alternates "$f names $(head -c 300 "$f" | tr '\n' ' ')"
    while read -r p; do
      [ -r "$p" ] && leak alternates "$p can be read"
    done < "$f"
  fi
done
for p in "${{unreadable[@]}}"; do
  if [ -e "$p" ] && [ -n "$(ls -A "$p" 2>/dev/null)" ]; then
    leak unreadable "$p: $(ls -A "$p" | head -n 3 | tr '\n' ' ')"
  fi
done
git rev-list --all --reflog --format=%B > "$out" 2>&1
found=$(future_in "$out") && leak messages "$found"
refs=$(git for-each-ref --format='%(refname)' 2>&1)
[ -n "$refs" ] && leak refs "$(echo "$refs" | head -n 3 | tr '\n' ' ')"
git reflog --all --format=%H > "$out" 2>&1
found=$(future_in "$out") && leak reflog "$found"
# Plain files git keeps refs and logs in.
for f in .git/packed-refs .git/FETCH_HEAD .git/ORIG_HEAD $(find .git/logs .git/refs -type f 2>/dev/null); do
  [ -f "$f" ] && found=$(future_in "$f") && leak git-files "$f: $found"
done
# Packs beside the working copy (other tasks' copies, the run's fixed
# packs): what their indexes list.
me=$(basename "$PWD")
while IFS= read -r idx; do
  git show-index < "$idx" > "$out" 2>/dev/null
  found=$(future_in "$out") && {{ leak nearby-packs "$idx: $found"; break; }}
done < <(find .. -xdev -maxdepth 5 -name '*.idx' -not -path "../$me/*" 2>/dev/null)
rm -f "$out"
echo "PROBES DONE LEAKS $leaks""#,
        commits = quoted(future.commits),
        texts = quoted(future.texts),
        unreadable = quoted(future.unreadable),
    )
}

/// The probes that found something in `output` (the script's output).
pub fn leaks(output: &str) -> Vec<String> {
    output
        .lines()
        .filter_map(|line| line.strip_prefix("LEAK "))
        .map(str::to_owned)
        .collect()
}

/// Whether the script ran to its end in `output`.
pub fn finished(output: &str) -> bool {
    output.contains("PROBES DONE LEAKS ")
}
