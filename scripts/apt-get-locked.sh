#!/usr/bin/env bash
# apt-get, waiting (bounded) while another apt or dpkg holds its locks.
#
# On a machine that has just booted, unattended upgrades or another
# install may hold dpkg's or apt's lists lock, and a plain `apt-get`
# fails at once with "Could not get lock". This waits for the lock:
# apt itself waits up to its DPkg::Lock::Timeout for dpkg's frontend
# lock, and a run that still fails on a lock (the lists lock of
# `apt-get update` is not covered by that option) is tried again, every
# ONEBASH_APT_RETRY_SECONDS (5), until ONEBASH_APT_LOCK_WAIT seconds
# (600) have passed. Any other failure is final at once. Its output goes
# to stderr on failure, as apt-get's own would.
#
# Usage: scripts/apt-get-locked.sh ARGS...   (the arguments of apt-get)
set -uo pipefail

wait_total=${ONEBASH_APT_LOCK_WAIT:-600}
retry=${ONEBASH_APT_RETRY_SECONDS:-5}
deadline=$((SECONDS + wait_total))
out=$(mktemp)
trap 'rm -f "$out"' EXIT

while :; do
    apt-get -o DPkg::Lock::Timeout="$retry" "$@" >"$out" 2>&1
    status=$?
    if [ "$status" -eq 0 ]; then
        cat "$out"
        exit 0
    fi
    if ! grep -qE 'Could not get lock|Unable to acquire the dpkg frontend lock|Unable to lock the (administration|list) directory' "$out"; then
        cat "$out" >&2
        exit "$status"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
        cat "$out" >&2
        echo "apt-get-locked: another apt or dpkg still held its lock after ${wait_total} s; giving up" >&2
        exit "$status"
    fi
    echo "apt-get-locked: another apt or dpkg holds its lock; trying again in ${retry} s" >&2
    sleep "$retry"
done
