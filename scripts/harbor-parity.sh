#!/usr/bin/env bash
# Checks onebash against Harbor itself (issue 38, item 6): writes a set of
# Harbor task folders, runs them with Harbor 0.26 (`harbor run -p FOLDER
# -e docker`) and with onebash (`onebash run FOLDER --env docker`), each
# with the oracle (solution/solve.sh) and a no-op agent (Harbor's `nop`,
# onebash's `--model noop`), and prints a table task x agent: Harbor's
# reward, onebash's reward (or the task.toml keys it refused, by name),
# and whether they agree. Exits 1 when a pair differs that onebash did not
# refuse by name; 0 otherwise.
#
# The tasks: `pass` (passes with the oracle), `fail` (its test writes 0
# whatever the agent does), `exit-code` (reward 1 from a test.sh that
# exits 3), `partial` (reward.json, 0.5), `oracle-fails` (solve.sh exits 1
# before its work), `separate` (`[verifier] environment_mode =
# "separate"`, `artifacts` with an `exclude`), `collect` (a
# `[[verifier.collect]]` hook in the shared verifier); and three onebash
# may refuse by name: `allowlist` (`network_mode = "allowlist"`),
# `multi-step` (`[[steps]]`) and `compose` (an
# environment/docker-compose.yaml with a second service).
#
# Harbor asks for Python >= 3.12 and this machine (bookworm) has 3.11, so
# Harbor runs in a Debian trixie root file system (Python 3.13), made by
# debootstrap from the mirror apt uses, with trixie's `docker-cli` and
# `docker-compose` (Compose v2: the package puts its binary where the
# docker CLI finds plugins, /usr/libexec/docker/cli-plugins, so `docker
# compose` works) and a venv of harbor==$HARBOR_VERSION from PyPI. It is
# entered by chroot in a private mount namespace (unshare: the binds go
# when it ends) that sees this machine's docker socket, and the work
# folder at the same path as outside: Harbor bind-mounts its trial folders
# into the task's containers by their paths, which the daemon reads on
# this machine. The rootfs and venv are cached in
# $ONEBASH_CI_CACHE/harbor-parity/ and reused when present. There is no
# Docker Hub here: the tasks' images are FROM the container tests' image
# (onebash-test/base:bookworm, scripts/test-images.sh). Harbor's network
# control (allowlist, no-network) first probes the kernel in an
# `alpine` container and then runs an egress sidecar FROM gogost/gost,
# both from Docker Hub: here the probe fails, Harbor turns the control
# off, and its job for `allowlist` aborts before any trial ("ValueError:
# The execution phase network policy differs..."): its row says so.
#
# Usage: scripts/harbor-parity.sh
#   ONEBASH          the onebash binary (default: target/release/onebash,
#                    else `onebash` on PATH)
#   ONEBASH_PARITY_ENV  onebash's --env: docker (default, Harbor's) or podman
#   ONEBASH_CI_CACHE cache folder (default /var/cache/onebash-ci)
#   DEBIAN_MIRROR    the mirror to bootstrap trixie from (default: the
#                    first Debian mirror of /etc/apt/sources.list*)
#   KEEP=1           keep the work folder (task folders, both harnesses'
#                    run folders); it is removed otherwise
# Needs root (debootstrap, chroot, unshare), debootstrap, docker (a
# daemon: scripts/test-docker.sh starts one) and podman holding the test
# image, network to the Debian mirror and PyPI on a cold run only.
#
# Cost on this machine (2 cores, shared, under nice): warm, about 6.5
# minutes: Harbor's 10 jobs (20 trials; each job's start is ~20 s, a
# trial's compose up and down ~20 s, a separate verifier's ~40 s) about
# 6 minutes, onebash's two runs about 30 s. Cold, about 12 minutes: the
# bootstrap (debootstrap of trixie, docker-cli and docker-compose, then
# harbor's venv, ~120 packages from PyPI) took 307 s, then the warm run.
# Too slow for .ci/run (its budget: under 3 minutes warm, 10 cold).
set -euo pipefail
cd "$(dirname "$0")/.."

HARBOR_VERSION=0.26.0
ci_cache=${ONEBASH_CI_CACHE:-/var/cache/onebash-ci}
cache=$ci_cache/harbor-parity
rootfs=$cache/trixie-harbor-$HARBOR_VERSION
image=onebash-test/base:bookworm
onebash_env=${ONEBASH_PARITY_ENV:-docker}
onebash=${ONEBASH:-}
if [ -z "$onebash" ]; then
    if [ -x target/release/onebash ]; then onebash=$PWD/target/release/onebash
    else onebash=$(command -v onebash); fi
fi

# The daemon and the test image in docker's store (a no-op when present).
ONEBASH_CI_CACHE=$ci_cache scripts/test-images.sh >/dev/null
ONEBASH_CI_CACHE=$ci_cache scripts/test-docker.sh >/dev/null

# Runs a command in the trixie rootfs with /proc, /dev, the docker socket
# and the work folder ($2, same path) mounted, in a mount namespace of its
# own so that nothing stays mounted when it ends.
in_trixie() {
    local root=$1 work=$2
    shift 2
    unshare --mount --propagation private -- bash -euc '
        root=$1 work=$2; shift 2
        mount -t proc proc "$root/proc"
        mount --rbind /dev "$root/dev"
        touch "$root/run/docker.sock"
        mount --bind "$(readlink -f /var/run/docker.sock)" "$root/run/docker.sock"
        cp /etc/resolv.conf "$root/etc/resolv.conf"
        if [ -n "$work" ]; then
            mkdir -p "$root$work"
            mount --bind "$work" "$root$work"
        fi
        exec chroot "$root" env -i PATH=/opt/harbor/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
            DOCKER_HOST=unix:///run/docker.sock LANG=C.UTF-8 "$@"
    ' in_trixie "$root" "$work" "$@"
}

if [ ! -e "$rootfs/.ready" ]; then
    mirror=$(scripts/debian-mirror.sh)
    echo "== bootstrapping Debian trixie and harbor==$HARBOR_VERSION (once; cached in $rootfs)"
    started=$SECONDS
    rm -rf "$rootfs.tmp"
    mkdir -p "$cache"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        trixie "$rootfs.tmp" "$mirror" >"$cache/debootstrap.log" 2>&1 \
        || { tail -n 20 "$cache/debootstrap.log" >&2; exit 1; }
    # This machine's own certificate authorities (a proxy's, say) are
    # trusted inside too, by apt's https and by pip (PIP_CERT: pip reads
    # its own bundle otherwise).
    cp /usr/local/share/ca-certificates/*.crt "$rootfs.tmp/usr/local/share/ca-certificates/" 2>/dev/null || true
    in_trixie "$rootfs.tmp" "" bash -euc '
        update-ca-certificates >/dev/null 2>&1
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-cli docker-compose >/dev/null
        rm -rf /var/cache/apt/archives/*.deb /var/lib/apt/lists/*
        python3 -m venv /opt/harbor
        PIP_CERT=/etc/ssl/certs/ca-certificates.crt /opt/harbor/bin/pip install -q \
            --disable-pip-version-check "harbor==$1"
        docker compose version
        harbor --version' bootstrap "$HARBOR_VERSION" >"$cache/bootstrap.log" 2>&1 \
        || { tail -n 20 "$cache/bootstrap.log" >&2; exit 1; }
    touch "$rootfs.tmp/.ready"
    rm -rf "$rootfs"
    mv "$rootfs.tmp" "$rootfs"
    echo "bootstrapped in $((SECONDS - started)) s"
fi

work=$(mktemp -d /tmp/harbor-parity.XXXXXX)
if [ "${KEEP:-}" != 1 ]; then trap 'rm -rf "$work"' EXIT; fi
tasks=$work/tasks

# One task folder: $1 its name, then task.toml, test.sh and solve.sh's
# bodies; the Dockerfile is the shared one unless DOCKERFILE is set.
task() {
    local dir=$tasks/$1
    mkdir -p "$dir/environment" "$dir/tests" "$dir/solution"
    printf '%s' "$2" >"$dir/task.toml"
    printf 'Task %s: write "expected" to /app/out.txt.\n' "$1" >"$dir/instruction.md"
    printf '%s' "${DOCKERFILE:-$dockerfile}" >"$dir/environment/Dockerfile"
    printf '#!/bin/bash\n%s' "$3" >"$dir/tests/test.sh"
    printf '#!/bin/bash\n%s' "$4" >"$dir/solution/solve.sh"
    chmod +x "$dir/tests/test.sh" "$dir/solution/solve.sh"
}
dockerfile="FROM $image
WORKDIR /app
RUN echo expected > /app/expected.txt
"
toml='version = "1.0"
[verifier]
timeout_sec = 120.0
[agent]
timeout_sec = 120.0
'
solve='cp /app/expected.txt /app/out.txt
'
check='if [ "$(cat /app/out.txt 2>/dev/null)" = expected ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
'

task pass "$toml" "$check" "$solve"
task fail "$toml" 'echo 0 > /logs/verifier/reward.txt
' "$solve"
task exit-code "$toml" "${check}exit 3
" "$solve"
task partial "$toml" 'if [ -f /app/out.txt ]; then r=0.5; else r=0.25; fi
echo "{\"reward\": $r}" > /logs/verifier/reward.json
' "$solve"
task oracle-fails "$toml" "$check" 'exit 1
cp /app/expected.txt /app/out.txt
'
task separate "${toml/\[verifier\]/[verifier]
environment_mode = \"separate\"}
[[artifacts]]
source = \"/app/build\"
exclude = [\"*.tmp\"]
" 'ok=1
[ "$(cat /app/build/out.txt 2>/dev/null)" = expected ] || ok=0
[ ! -e /app/build/junk.tmp ] || ok=0
[ ! -e /app/stray.txt ] || ok=0
echo $ok > /logs/verifier/reward.txt
' 'mkdir -p /app/build
cp /app/expected.txt /app/build/out.txt
echo j > /app/build/junk.tmp
echo s > /app/stray.txt
'
task collect "$toml
[[verifier.collect]]
command = \"cp /app/out.txt /var/tmp/collected.txt\"
" 'if [ "$(cat /var/tmp/collected.txt 2>/dev/null)" = expected ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
' "$solve"
task allowlist "${toml/\[agent\]/[agent]
network_mode = \"allowlist\"
allowed_hosts = [\"example.com\"]}" "$check" "$solve"
task multi-step "$toml
[[steps]]
name = \"one\"
[[steps]]
name = \"two\"
" "$check" "$solve"
for step in one two; do
    mkdir -p "$tasks/multi-step/steps/$step/tests" "$tasks/multi-step/steps/$step/solution"
    echo "Step $step: write \"expected\" to /app/out.txt." >"$tasks/multi-step/steps/$step/instruction.md"
    printf '#!/bin/bash\n%s' "$check" >"$tasks/multi-step/steps/$step/tests/test.sh"
    printf '#!/bin/bash\n%s' "$solve" >"$tasks/multi-step/steps/$step/solution/solve.sh"
    chmod +x "$tasks/multi-step/steps/$step"/*/*.sh
done
task compose "$toml" 'got=$(python3 -c "import urllib.request; print(urllib.request.urlopen(\"http://side:8000/secret.txt\").read().decode().strip())")
if [ "$(cat /app/out.txt 2>/dev/null)" = "$got" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
' 'for _ in $(seq 1 100); do
    python3 -c "import urllib.request; print(urllib.request.urlopen(\"http://side:8000/secret.txt\").read().decode().strip())" > /app/out.txt && exit 0
    sleep 0.2
done
exit 1
'
cat >"$tasks/compose/environment/docker-compose.yaml" <<YAML
services:
  side:
    image: $image
    command: ["sh", "-c", "mkdir -p /srv && echo from-side > /srv/secret.txt && cd /srv && exec python3 -m http.server 8000"]
YAML

# Harbor: one job per task (a task whose environment Harbor cannot make
# aborts its whole job, not only its trial), both agents in it, two trials
# at a time: a job's start costs about 20 s here. LiteLLM's model cost
# map is read from the wheel instead of fetched from GitHub.
echo "== harbor run -e docker, oracle and nop, one job per task"
mkdir -p "$work/harbor"
for dir in "$tasks"/*/; do
    name=$(basename "$dir")
    cat >"$work/harbor/$name.json" <<JSON
{"job_name": "$name", "jobs_dir": "$work/harbor", "n_concurrent_trials": 2,
 "environment": {"type": "docker"}, "tasks": [{"path": "$tasks/$name"}],
 "agents": [{"name": "oracle"}, {"name": "nop"}]}
JSON
    if ! in_trixie "$rootfs" "$work" env LITELLM_LOCAL_MODEL_COST_MAP=True \
        harbor run -c "$work/harbor/$name.json" --yes >"$work/harbor/$name.log" 2>&1; then
        # Rich's traceback boxes the exception's lines: the last
        # "SomethingError: ..." line, unboxed, says why.
        sed 's/^[│ ]*//; s/[│ ]*$//' "$work/harbor/$name.log" \
            | grep -E '^[A-Za-z.]*(Error|Exception): ' \
            | tail -n 1 >"$work/harbor/$name.aborted" || true
    fi
done

# onebash: one run per agent, under docker as Harbor (or podman).
for agent in oracle noop; do
    echo "== onebash run -m $agent --env $onebash_env"
    "$onebash" run "$tasks" --env "$onebash_env" -m "$agent" -o "$work/onebash-$agent" \
        --cache-dir "$work/onebash-cache" >"$work/onebash-$agent.log" 2>&1 \
        || echo "onebash run -m $agent exited $? (a refused task is an error row; its log: $work/onebash-$agent.log)"
done

python3 - "$work" <<'PY'
"""The table: each task x agent, Harbor's reward and onebash's."""
import csv, glob, json, os, re, sys

work = sys.argv[1]
tasks = sorted(os.listdir(os.path.join(work, "tasks")))


def harbor(agent):
    """task -> reward, or why there is none (the trial's exception, or
    the job's when it aborted before any trial)."""
    out = {}
    for task in tasks:
        job = os.path.join(work, "harbor", task)
        for path in glob.glob(os.path.join(job, "*", "result.json")):
            r = json.load(open(path))
            if r["agent_info"]["name"] != agent:
                continue
            rewards = (r.get("verifier_result") or {}).get("rewards") or {}
            if "reward" in rewards:
                out[task] = float(rewards["reward"])
            else:
                exc = r.get("exception_info") or {}
                out[task] = "no reward: " + exc.get("exception_type", "none")
        if task not in out:
            aborted = job + ".aborted"
            why = open(aborted).read().strip() if os.path.exists(aborted) else ""
            out[task] = "aborted: " + (why.split(":")[0] or "no trial")
    return out


def onebash(agent):
    """task -> reward, or ('refused', keys) when task.toml keys were refused."""
    out = {}
    path = os.path.join(work, "onebash-" + agent, "results.csv")
    if not os.path.exists(path):
        return out
    for row in csv.DictReader(open(path)):
        error = row.get("error", "")
        if row["reward"]:
            out[row["task_id"]] = float(row["reward"])
        elif row["exit_reason"] == "setup_error" and "task.toml: `" in error:
            out[row["task_id"]] = ("refused", re.findall(r"`([a-z_.]+)`", error))
        elif "docker-compose.yaml" in error:
            out[row["task_id"]] = ("refused", ["environment/docker-compose.yaml"])
        else:
            out[row["task_id"]] = "no reward: " + (row["exit_reason"] or row["status"])
    return out


unequal = 0
fmt = "{:<14} {:<7} {:<28} {:<50} {}"
print(fmt.format("task", "agent", "harbor", "onebash", "equal"))
for agent, ob_agent in (("oracle", "oracle"), ("nop", "noop")):
    h, o = harbor(agent), onebash(ob_agent)
    for task in tasks:
        hv = h.get(task, "no trial")
        ov = o.get(task, "no row")
        if isinstance(ov, tuple):
            ov_text, verdict = "refused: " + ", ".join(ov[1]), "refused"
        else:
            ov_text = ov if isinstance(ov, str) else f"{ov:g}"
            same = hv == ov if isinstance(hv, float) and isinstance(ov, float) else False
            verdict = "yes" if same else "NO"
            unequal += not same
        hv_text = hv if isinstance(hv, str) else f"{hv:g}"
        print(fmt.format(task, agent, hv_text, ov_text, verdict))
print(f"{unequal} unequal pair(s) not refused by onebash")
sys.exit(1 if unequal else 0)
PY
