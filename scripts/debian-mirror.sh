#!/usr/bin/env bash
# Prints the Debian mirror to bootstrap from: $DEBIAN_MIRROR when set,
# else the first Debian mirror of this machine's apt sources, else
# deb.debian.org. Shared by the scripts that run debootstrap
# (scripts/test-images.sh, scripts/harbor-parity.sh).
set -euo pipefail
mirror=${DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
    # deb822 (`URIs: http://deb.debian.org/debian`) or one-line
    # (`deb http://deb.debian.org/debian bookworm main`) sources; not
    # the security archive, which has no full suite.
    mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
                 /etc/apt/sources.list.d/*.sources 2>/dev/null \
             | grep -oE '(https?|file)://[^ ]*/debian/?( |$)' \
             | grep -v security | head -n 1 | tr -d ' ' || true)
fi
echo "${mirror:-http://deb.debian.org/debian}"
