#!/usr/bin/env bash
# Benchmarks of onebash against a scripted local server (no network, no key).
# Prints figures and ratios; asserts nothing. Usage: scripts/bench.sh [TURNS]
#
# 1. Harness cost per turn at zero model latency: one task whose model asks
#    for `true` TURNS times, under --sandbox none and --sandbox bwrap, in one
#    run of this script. The server's own handling time is subtracted, so the
#    figure is onebash's: the model call, running the command, recording it.
# 2. The per-command cost of bwrap against none, as a ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
turns=${1:-200}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cargo build --release --quiet
bin=target/release/onebash

# A one-file repo and one task over it.
git init -q -b main "$work/repo"
echo hello > "$work/repo/README.md"
git -C "$work/repo" add -A
git -C "$work/repo" -c user.name=bench -c user.email=bench@localhost commit -qm init
sha=$(git -C "$work/repo" rev-parse HEAD)
printf '{"id":"bench","repo":"%s","base_commit":"%s","problem_statement":"bench","test_command":"true"}\n' \
    "$work/repo" "$sha" > "$work/tasks.jsonl"

# Runs one task of $turns turns; prints "agent_seconds server_seconds requests".
measure() {
    local sandbox=$1 out=$work/out-$1-$RANDOM
    rm -f "$work/port" "$work/stats"
    python3 scripts/bench_server.py "$turns" true "$work/port" "$work/stats" &
    local server=$!
    while [ ! -s "$work/port" ]; do sleep 0.05; done
    "$bin" run "$work/tasks.jsonl" --model bench --base-url "http://127.0.0.1:$(cat "$work/port")/v1" \
        --sandbox "$sandbox" --max-turns $((turns + 1)) -o "$out" --cache-dir "$work/cache" \
        >/dev/null 2>&1
    kill -TERM "$server"
    wait "$server" 2>/dev/null || true
    local requests server_seconds agent_seconds
    read -r requests server_seconds < "$work/stats"
    agent_seconds=$(python3 -c 'import csv,sys; print(next(csv.DictReader(open(sys.argv[1])))["agent_seconds"])' "$out/results.csv")
    echo "$agent_seconds $server_seconds $requests"
}

# A warm-up run fills the repo cache and the page cache.
measure none >/dev/null
read -r none_agent none_server none_requests < <(measure none)
bwrap_line=""
if command -v bwrap >/dev/null; then
    read -r bwrap_agent bwrap_server bwrap_requests < <(measure bwrap)
    bwrap_line=yes
fi

python3 - "$turns" "$none_agent" "$none_server" "$none_requests" "${bwrap_agent:-0}" "${bwrap_server:-0}" "$bwrap_line" <<'PY'
import sys
turns = int(sys.argv[1])
none_agent, none_server, requests = float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
bwrap_agent, bwrap_server, has_bwrap = float(sys.argv[5]), float(sys.argv[6]), sys.argv[7] == "yes"
none_turn = (none_agent - none_server) / turns * 1000
print(f"onebash bench: 1 task x {turns} turns of `true`, zero model latency ({requests} model calls)")
print(f"{'sandbox':<10}{'ms per turn':>14}{'(harness + command; server time subtracted)':>46}")
print(f"{'none':<10}{none_turn:>14.2f}")
if has_bwrap:
    bwrap_turn = (bwrap_agent - bwrap_server) / turns * 1000
    print(f"{'bwrap':<10}{bwrap_turn:>14.2f}")
    print(f"bwrap costs {bwrap_turn - none_turn:.2f} ms more per command: {bwrap_turn / none_turn:.2f}x none")
else:
    print("bwrap: not installed, not measured")
print("for scale: mini-swe-agent's harness overhead is about 30-45 ms per turn")
PY
