#!/usr/bin/env bash
# Check a task file (default: tasks/demo/tasks.jsonl) the way onebash grades:
# for every task, in a fresh clone,
#   1. base_commit + test_patch                -> test_command must FAIL
#   2. base_commit + gold_patch + test_patch   -> test_command must PASS
# and gold_patch must not touch a file that test_patch touches.
# Prints one line per task; exits 1 if any expectation is not met.
#
# Usage: scripts/check-demo.sh [TASKS.jsonl]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TASKS=${1:-$ROOT/tasks/demo/tasks.jsonl}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/onebash-check.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1

# Unpack every task into $WORK/tasks/NNN/ (one file per field).
python3 - "$TASKS" "$WORK/tasks" <<'PY'
import json
import os
import re
import sys

path, out = sys.argv[1], sys.argv[2]
base_dir = os.path.dirname(os.path.abspath(path))
REQUIRED = ("id", "repo", "base_commit", "problem_statement", "test_command")
errors, seen, n = [], set(), 0
with open(path, encoding="utf-8") as f:
    for lineno, line in enumerate(f, 1):
        if not line.strip():
            continue
        try:
            task = json.loads(line)
        except ValueError as e:
            errors.append(f"{path}:{lineno}: invalid JSON: {e}")
            continue
        missing = [k for k in REQUIRED if not isinstance(task.get(k), str) or not task[k]]
        if missing:
            errors.append(f"{path}:{lineno}: missing or empty: {', '.join(missing)}")
            continue
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,128}", task["id"]) or task["id"] in seen:
            errors.append(f"{path}:{lineno}: bad or duplicate id {task['id']!r}")
            continue
        seen.add(task["id"])
        repo = task["repo"]
        if not re.match(r"^([a-z+]+://|[\w.-]+@[^:/]+:)", repo):
            repo = os.path.join(base_dir, repo)
        d = os.path.join(out, "%03d" % n)
        n += 1
        os.makedirs(d)
        fields = {
            "id": task["id"],
            "repo": repo,
            "base_commit": task["base_commit"],
            "test_command": task["test_command"],
            "timeout": str(task.get("test_timeout_s", 60)),
            "test_patch": task.get("test_patch", ""),
            "gold_patch": task.get("gold_patch", ""),
        }
        for name, value in fields.items():
            with open(os.path.join(d, name), "w", encoding="utf-8") as g:
                g.write(value)
for e in errors:
    print(e, file=sys.stderr)
if errors:
    sys.exit(2)
if n == 0:
    sys.exit(f"{path}: no tasks")
PY

# run_tests DIR LOG: run the task's test_command in DIR/checkout, print its exit code.
run_tests() {
    local rc=0
    (cd "$1/checkout" && timeout "$(cat "$1/timeout")" bash -c "$(cat "$1/test_command")") \
        </dev/null >"$2" 2>&1 || rc=$?
    echo "$rc"
}

# apply DIR PATCH: apply DIR/PATCH (if the task has one) to the checkout.
apply() {
    [[ -s "$1/$2" ]] || return 0
    git -C "$1/checkout" apply --whitespace=nowarn "$1/$2"
}

touched() { git apply --numstat "$1" | cut -f3 | sort -u; }

total=0
bad=0
for dir in "$WORK"/tasks/*; do
    id=$(cat "$dir/id")
    total=$((total + 1))
    problem=""
    if ! git clone -q "$(cat "$dir/repo")" "$dir/checkout" 2>"$dir/clone.log" ||
        ! git -C "$dir/checkout" checkout -q --detach "$(cat "$dir/base_commit")" 2>>"$dir/clone.log"; then
        problem="checkout failed: $(tail -n 1 "$dir/clone.log")"
    elif [[ ! -s "$dir/gold_patch" ]]; then
        problem="no gold_patch"
    elif [[ -s "$dir/test_patch" ]] &&
        overlap=$(comm -12 <(touched "$dir/gold_patch") <(touched "$dir/test_patch")) &&
        [[ -n "$overlap" ]]; then
        problem="gold_patch and test_patch both touch: $(echo $overlap)"
    elif ! apply "$dir" test_patch 2>"$dir/apply.log"; then
        problem="test_patch does not apply at base_commit: $(head -n 1 "$dir/apply.log")"
    else
        base_rc=$(run_tests "$dir" "$dir/base.log")
        git -C "$dir/checkout" reset -q --hard
        git -C "$dir/checkout" clean -fdxq
        if [[ $base_rc -eq 0 ]]; then
            problem="tests pass without any change (expected a failure)"
        elif ! apply "$dir" gold_patch 2>"$dir/apply.log" ||
            ! apply "$dir" test_patch 2>>"$dir/apply.log"; then
            problem="gold_patch + test_patch do not apply: $(head -n 1 "$dir/apply.log")"
        else
            gold_rc=$(run_tests "$dir" "$dir/gold.log")
            if [[ $gold_rc -ne 0 ]]; then
                problem="tests fail with gold_patch (exit $gold_rc); last lines:"$'\n'"$(tail -n 5 "$dir/gold.log")"
            fi
        fi
    fi
    if [[ -z $problem ]]; then
        printf 'ok    %-32s base: fail (exit %s)  gold: pass\n' "$id" "$base_rc"
    else
        bad=$((bad + 1))
        printf 'FAIL  %-32s %s\n' "$id" "$problem"
    fi
done

echo "$((total - bad))/$total tasks ok"
[[ $bad -eq 0 ]]
