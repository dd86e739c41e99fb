#!/usr/bin/env bash
# Makes a real Docker daemon answer on this machine for the `--env docker`
# tests (tests/it/support/backend.rs): when `docker info` fails, starts
# Debian's `dockerd` in the background with its defaults (overlay2,
# cgroupfs; cgroups v1 on this VM kind), its log under the CI cache, and
# waits until it answers (a bounded number of tries; the log's tail when it
# never does). Then gives it the container tests' image
# (onebash-test/base:bookworm, from scripts/test-images.sh) by `podman
# save | docker load`, no registry being reachable; skipped when docker
# holds an image of the same id (both engines' ids are the digest of the
# image's config). The tests load their own images the same way.
#
# A daemon that answers already (a system service, an earlier run's) is
# used as it is; one started here keeps running after the script, as the
# test registry does (scripts/test-registry.sh).
#
# Usage: scripts/test-docker.sh
#   ONEBASH_CI_CACHE  cache folder (default /var/cache/onebash-ci); the
#                     daemon's log and pid go to $ONEBASH_CI_CACHE/docker/
# Needs dockerd and docker (Debian: docker.io), podman and the test image;
# run as root (the daemon's socket is root's).
set -euo pipefail

image=onebash-test/base:bookworm
dir=${ONEBASH_CI_CACHE:-/var/cache/onebash-ci}/docker
mkdir -p "$dir"

answers() { docker info >/dev/null 2>&1; }

if ! answers; then
    setsid dockerd >"$dir/dockerd.log" 2>&1 </dev/null &
    echo $! >"$dir/pid"
    # It answered after about 1.5 s here; 300 tries of 0.1 s leave room
    # for a loaded machine without waiting on a fixed sleep.
    for _ in $(seq 1 300); do
        answers && break
        kill -0 "$(cat "$dir/pid")" 2>/dev/null || break
        sleep 0.1
    done
    if ! answers; then
        echo "docker: dockerd did not answer; the end of $dir/dockerd.log:" >&2
        tail -n 20 "$dir/dockerd.log" >&2
        exit 1
    fi
    echo "docker: dockerd started (log $dir/dockerd.log)"
fi

id=$(podman image inspect --format '{{.Id}}' "$image")
if docker image inspect "$id" >/dev/null 2>&1; then
    echo "docker: $image present"
else
    echo "== loading $image into docker (once; kept in docker's store)"
    podman save -q --format docker-archive "$image" | docker load -q
fi
# A load names the image as podman does (localhost/onebash-test/base).
docker tag "$id" "$image"
