#!/usr/bin/env bash
# Build onebash's release wheels and its source distribution into OUT_DIR
# (default dist/, which git ignores), then check each one that can run here:
# installed in a fresh venv, the offline demo must pass 7/7
# (scripts/check-installed.sh). The wheels carry the binary and no Python
# code (pyproject.toml: maturin's `bin` bindings).
#
# Usage: scripts/release-wheels.sh [OUT_DIR]
#
# Linux wheels, per target: manylinux2014 (glibc 2.17) through `maturin
# build --zig` (zig cc links against that glibc; the vendored OpenSSL,
# libgit2 and zstd are C, built by zig cc too). Where zig fails for the
# host's own target, the wheel is built natively instead and maturin's
# auditwheel check gives it the lowest manylinux tag this glibc allows (the
# script says so). x86_64 and aarch64 are built when their Rust target is
# installed (`rustup target list --installed`); a target that is not is
# skipped, with a line saying so. A wheel for another CPU is built but
# cannot be checked here.
#
# RELEASE_WHEELS_ZIG=0 skips the zig attempt (with Rust 1.95 and zig
# 0.17.1 its final link fails: std refers to `gettid`, glibc 2.30's; see
# docs/guides/install.md), and with it a full build of every crate for the
# cross target.
#
# maturin and zig come from PyPI (ziglang), pinned below, in a venv kept in
# the cargo target folder ($CARGO_TARGET_DIR, else target/).
set -euo pipefail

MATURIN_VERSION=1.16.0
ZIGLANG_VERSION=0.17.1
TARGETS=(x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu)

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=${1:-dist}
mkdir -p "$out"
out=$(cd "$out" && pwd)
target_dir=${CARGO_TARGET_DIR:-$root/target}
export CARGO_TARGET_DIR=$target_dir

tools=$target_dir/release-tools-maturin-$MATURIN_VERSION-zig-$ZIGLANG_VERSION
if ! "$tools/bin/python" -c 'import ziglang' >/dev/null 2>&1 \
    || ! "$tools/bin/maturin" --version >/dev/null 2>&1; then
    echo "== installing maturin $MATURIN_VERSION and ziglang $ZIGLANG_VERSION into $tools"
    rm -rf "$tools"
    python3 -m venv "$tools"
    "$tools/bin/python" -m pip install -q --disable-pip-version-check \
        "maturin==$MATURIN_VERSION" "ziglang==$ZIGLANG_VERSION"
fi
# maturin finds zig as `python3 -m ziglang`, so this venv's python3 first.
export PATH="$tools/bin:$PATH"

# This version's files only: an older wheel left in OUT_DIR is not checked.
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
rm -f "$out"/onebash-"$version"-*.whl "$out"/onebash-"$version".tar.gz

summary=()
host=$(rustc -vV | sed -n 's/^host: //p')
installed=$(rustup target list --installed 2>/dev/null || echo "$host")

# The manylinux2014 wheel of one target, through zig.
zig_wheel() {
    if [ "${RELEASE_WHEELS_ZIG:-1}" = 0 ]; then
        echo "RELEASE_WHEELS_ZIG=0: zig not tried"
        return 1
    fi
    maturin build --release --locked --target "$1" --zig \
        --compatibility manylinux2014 --out "$out"
}

echo "== sdist"
maturin sdist --out "$out"

for target in "${TARGETS[@]}"; do
    if ! grep -qx "$target" <<<"$installed"; then
        summary+=("$target: skipped, its Rust target is not installed (rustup target add $target)")
        continue
    fi
    echo "== wheel for $target: manylinux2014 through zig"
    if zig_wheel "$target"; then
        summary+=("$target: built manylinux2014 (zig)")
    elif [ "$target" = "$host" ]; then
        echo "== zig could not build $target; building it natively, tagged by maturin's auditwheel check"
        # No --target: the host's build folder, which `cargo build --release`
        # and `pip install .` share.
        maturin build --release --locked --out "$out"
        summary+=("$target: no manylinux2014 (zig failed or skipped); built natively, tag from maturin's auditwheel check")
    else
        summary+=("$target: FAILED (zig could not build it, and it is not this machine's target)")
    fi
done

# Each wheel that runs on this machine, and the sdist, in a fresh venv.
host_arch=${host%%-*}
work=$(mktemp -d "${TMPDIR:-/tmp}/onebash-release.XXXXXX")
trap 'rm -rf "$work"' EXIT
checked=0
for wheel in "$out"/onebash-"$version"-*.whl; do
    [ -e "$wheel" ] || continue
    name=$(basename "$wheel")
    case "$name" in
        *"_$host_arch.whl") ;;
        *) summary+=("$name: not checked (cannot run on $host_arch)"); continue ;;
    esac
    echo "== checking $name in a fresh venv"
    rm -rf "$work/venv"
    python3 -m venv "$work/venv"
    "$work/venv/bin/python" -m pip install -q --disable-pip-version-check --no-index "$wheel"
    scripts/check-installed.sh "$work/venv/bin" "$name"
    summary+=("$name: checked, the demo passed 7/7")
    checked=$((checked + 1))
done

# The sdist as pip builds it from PyPI: maturin fetched into pip's build
# isolation, the build in $CARGO_TARGET_DIR (so the dependencies built above
# for the host are reused).
sdist=$out/onebash-$version.tar.gz
echo "== checking $(basename "$sdist") in a fresh venv (pip builds it)"
rm -rf "$work/venv"
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check "$sdist"
scripts/check-installed.sh "$work/venv/bin" "$(basename "$sdist")"
summary+=("$(basename "$sdist"): checked (pip built it), the demo passed 7/7")

echo "== release files in $out"
ls -l "$out"
printf '  %s\n' "${summary[@]}"
[ "$checked" -gt 0 ] || { echo "no wheel could be checked on this machine" >&2; exit 1; }
