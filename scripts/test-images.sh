#!/usr/bin/env bash
# Builds the container image the container tests run in, with no image
# registry: a Debian bookworm minbase root file system with python3 and git,
# made by debootstrap from the mirror apt uses, imported as
# onebash-test/base:bookworm. The root file system is kept as a tarball in
# a cache folder, so a later run (or a machine whose podman storage was
# wiped) imports it in seconds instead of bootstrapping again (about 40 s
# to 2 min on 2 cores).
#
# Usage: scripts/test-images.sh
#   ONEBASH_CI_CACHE  cache folder (default /var/cache/onebash-ci); the
#                     tarball goes to $ONEBASH_CI_CACHE/images/
#   ONEBASH_ENGINE    podman (default) or docker
#   DEBIAN_MIRROR     the mirror to bootstrap from (default: the first
#                     Debian mirror of /etc/apt/sources.list*)
# Needs root (debootstrap), and podman and debootstrap installed.
set -euo pipefail

engine=${ONEBASH_ENGINE:-podman}
image=onebash-test/base:bookworm
cache=${ONEBASH_CI_CACHE:-/var/cache/onebash-ci}/images
tarball=$cache/debian-bookworm-minbase-python3-git.tar

if "$engine" image inspect "$image" >/dev/null 2>&1; then
    echo "test image $image: present"
    exit 0
fi

if [ ! -f "$tarball" ]; then
    mirror=$("$(dirname "$0")"/debian-mirror.sh)
    echo "== bootstrapping Debian bookworm from $mirror (once; cached in $cache)"
    mkdir -p "$cache"
    rootfs=$(mktemp -d "$cache/rootfs.XXXXXX")
    trap 'rm -rf "$rootfs" "$tarball.tmp"' EXIT
    started=$SECONDS
    debootstrap --variant=minbase --include=python3,git bookworm "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 \
        || { tail -n 20 "$cache/debootstrap.log" >&2; exit 1; }
    # Nothing of the build machine's apt cache goes in the image.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
    echo "bootstrapped in $((SECONDS - started)) s"
fi

echo "== importing $tarball as $image"
"$engine" import "$tarball" "$image" >/dev/null
echo "test image $image: imported"
