#!/usr/bin/env bash
# Starts a real image registry on this machine for the `--env oci` pull
# test (tests/it/oci_registry.rs): Debian's docker-registry (the CNCF
# distribution registry) on a free loopback port, plain HTTP, its storage
# under the CI cache; pushes the container tests' image
# (onebash-test/base:bookworm, from scripts/test-images.sh) to it with
# `podman push --tls-verify=false`, and writes the registry's address
# (127.0.0.1:PORT) where the test reads it.
#
# A registry still answering at the written address is reused; the
# storage outlives it, so on a rerun only the registry starts again and
# the push is skipped (the image is there). Nothing listens beyond
# 127.0.0.1.
#
# Usage: scripts/test-registry.sh
#   ONEBASH_CI_CACHE  cache folder (default /var/cache/onebash-ci); the
#                     registry's storage, config, log, pid and address
#                     go to $ONEBASH_CI_CACHE/registry/
# Needs docker-registry and podman, and the test image (test-images.sh).
set -euo pipefail

image=onebash-test/base:bookworm
dir=${ONEBASH_CI_CACHE:-/var/cache/onebash-ci}/registry
mkdir -p "$dir/storage"

answers() { curl -fsS -o /dev/null "http://$1/v2/" 2>/dev/null; }

address=$(cat "$dir/address" 2>/dev/null || true)
if [ -z "$address" ] || ! answers "$address"; then
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    address=127.0.0.1:$port
    cat >"$dir/config.yml" <<CONF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $dir/storage
http:
  addr: $address
CONF
    setsid docker-registry serve "$dir/config.yml" >"$dir/registry.log" 2>&1 </dev/null &
    echo $! >"$dir/pid"
    for _ in $(seq 1 100); do
        answers "$address" && break
        sleep 0.1
    done
    answers "$address" || { tail -n 20 "$dir/registry.log" >&2; exit 1; }
    echo "$address" >"$dir/address"
    echo "registry: started at $address (storage $dir/storage)"
fi

if curl -fsS -o /dev/null \
    -H 'Accept: application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json' \
    "http://$address/v2/${image%%:*}/manifests/${image##*:}" 2>/dev/null; then
    echo "registry: $image present"
else
    echo "== pushing $image to $address (once; kept in $dir/storage)"
    podman push -q --tls-verify=false "$image" "$address/$image"
    echo "registry: $image pushed"
fi
