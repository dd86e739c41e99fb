#!/usr/bin/env bash
# Check an installed onebash: with BIN_DIR first on PATH, `onebash` must be
# BIN_DIR/onebash, and the offline demo (tasks/demo/tasks.jsonl with
# `--model oracle`, as the README runs it) must pass all 7 tasks. The run
# folder and the repo cache go to a temporary folder, so neither the
# checkout nor the user's cache is written. The binary must be under 60 MB
# (no debug info).
#
# Usage: scripts/check-installed.sh BIN_DIR [LABEL]
# (BIN_DIR: a venv's bin/, or the bin/ of a `cargo install --root`.)
# .ci/run and scripts/release-wheels.sh use it.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin_dir=${1:?usage: scripts/check-installed.sh BIN_DIR [LABEL]}
label=${2:-$bin_dir}
bin_dir=$(cd "$bin_dir" && pwd)

found=$(PATH="$bin_dir:$PATH" command -v onebash || true)
if [ "$found" != "$bin_dir/onebash" ]; then
    echo "check-installed ($label): \`onebash\` on PATH is '${found:-nothing}', not $bin_dir/onebash" >&2
    exit 1
fi

# What the install ships must not carry debug info (the line tables made a
# 125 MB binary; without them it is about 25 MB).
size=$(stat -c %s "$bin_dir/onebash")
if [ "$size" -gt $((60 * 1024 * 1024)) ]; then
    echo "check-installed ($label): $bin_dir/onebash is $((size / 1024 / 1024)) MB: it carries debug info (Cargo.toml's [profile.release])" >&2
    exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/onebash-check-installed.XXXXXX")
trap 'rm -rf "$work"' EXIT

# From the temporary folder, so a stray relative path cannot land in the
# checkout; the task file's repos are relative to the task file.
if ! (cd "$work" && PATH="$bin_dir:$PATH" onebash run "$root/tasks/demo/tasks.jsonl" \
        --model oracle -o "$work/run" --cache-dir "$work/cache") >"$work/log" 2>&1; then
    cat "$work/log" >&2
    echo "check-installed ($label): the demo run failed (its output is above)" >&2
    exit 1
fi

python3 - "$work/run/results.csv" "$label" <<'PY'
import csv
import sys

path, label = sys.argv[1], sys.argv[2]
with open(path, newline="", encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
passed = sum(row["status"] == "passed" for row in rows)
if len(rows) != 7 or passed != 7:
    for row in rows:
        print(f"  {row['task_id']}: {row['status']} {row['error']}", file=sys.stderr)
    sys.exit(f"check-installed ({label}): the demo passed {passed}/{len(rows)}, expected 7/7")
print(f"check-installed ({label}): the demo passed {passed}/{len(rows)}")
PY
