#!/usr/bin/env bash
# onebash on Slurm: a job array with one array task per shard, then a merge.
#
# The pattern
#   * Array task i (0..N-1) runs `onebash run --shard $((i+1))/N`: the tasks
#     whose 0-based line number in the task file is i mod N. The shards are
#     disjoint and together cover the file.
#   * Each array task writes its own run folder, OUT_ROOT/shard-<i>, on a
#     file system every node sees (home, project space, Lustre, GPFS, NFS).
#   * The repo cache (bare mirrors) is per node by default: see CACHE_DIR.
#   * A second job, started by Slurm when every array task has ended well,
#     joins the shard folders with `onebash merge`.
#
# Submit (N = 8 here: the --array line below says 0-7):
#   mkdir -p logs
#   jid=$(sbatch --parsable scripts/slurm/onebash-array.sh /shared/tasks.jsonl /shared/results/run1)
#   sbatch --dependency=afterok:$jid --kill-on-invalid-dep=yes --job-name=onebash-merge \
#       --output=logs/onebash-merge-%j.out \
#       --wrap 'onebash merge /shared/results/run1/merged /shared/results/run1/shard-* && onebash report /shared/results/run1/merged'
#   (Single quotes: the shard folders do not exist yet; the glob must be
#   expanded when the merge job runs, not when it is submitted.)
#
# afterok:$jid waits for every task of the array and starts the merge only
# if all of them exited 0. This script exits 0 when onebash did, and also
# when onebash exited 1 (the shard finished but some task ended in status
# `error`: an API outage, a failed setup); those rows are in the merge with
# status `error`. Exit 2 (bad input) and 130 (interrupted) fail the array
# task, the merge is cancelled (--kill-on-invalid-dep), and you re-run the
# failed indexes, which resume where they stopped:
#   sbatch --array=3,5 --export=ALL,SHARDS=8 scripts/slurm/onebash-array.sh /shared/tasks.jsonl /shared/results/run1
# SHARDS must then be given: a partial array has a smaller SLURM_ARRAY_TASK_COUNT,
# and the shard arithmetic must use the N of the first submission.
#
# Arguments: TASKS.jsonl OUT_ROOT [more onebash run flags...]
# Environment (all optional):
#   MODEL        model name (default gpt-4.1)
#   JOBS         -j, tasks at once per array task (default: the CPUs Slurm gave us)
#   SANDBOX      bwrap (default) or none. Give it explicitly: merge refuses
#                shards whose sandboxes differ, and `auto` could pick bwrap on
#                one node and none on another
#   ENV          where tasks run: host (default: on the node, under SANDBOX)
#                or oci: each task in its image with no daemon and no root
#                (bwrap over the image's root file system; SWE-bench
#                instances use the repo their image holds). The images'
#                layers are unpacked once per node into CACHE_DIR/oci
#                (node-local by default, shared by the array tasks on the
#                node, with locks)
#   IMAGE        with ENV=oci: --image, a local image or a template over the
#                task's fields, e.g. 'docker-archive:/shared/images/{{ id }}.tar'
#                (not needed when each task line has an `image`)
#   SHARDS       N (default SLURM_ARRAY_TASK_COUNT)
#   CACHE_DIR    the repo cache (default: node-local, $TMPDIR/onebash-cache-<user>)
#   WORKDIRS     where the running tasks' working copies go (default:
#                node-local, $TMPDIR/onebash-work-<user>)
#   OPENAI_API_KEY_FILE  read the key from this file (mode 600) instead of
#                the environment; see "the API key" below
#
#SBATCH --job-name=onebash
#SBATCH --array=0-7
#   N = 8 shards, indexes 0..N-1. Append %K (e.g. 0-7%4) to run at most K at once.
#SBATCH --cpus-per-task=8
#SBATCH --mem=32G
#   For -j tasks at once: their commands and tests need the memory, not onebash
#   (tens of MiB, see docs/guides/performance.md).
#SBATCH --time=24:00:00
#SBATCH --output=logs/onebash-%A_%a.out
#   %A = the array's job id, %a = the index. The folder must exist.
#SBATCH --signal=B:INT@300
#   Five minutes before the time limit Slurm sends SIGINT to this script,
#   which passes it on to onebash: it starts no new task, ends the running
#   ones as `interrupted` and exits 130. Re-running the index resumes.
set -euo pipefail

tasks=${1:?usage: onebash-array.sh TASKS.jsonl OUT_ROOT [onebash run flags...]}
out_root=${2:?usage: onebash-array.sh TASKS.jsonl OUT_ROOT [onebash run flags...]}
shift 2

index=${SLURM_ARRAY_TASK_ID:?not an array task: submit with sbatch (the --array line)}
shards=${SHARDS:-${SLURM_ARRAY_TASK_COUNT:?}}
if [ "$index" -ge "$shards" ]; then
    echo "array index $index is outside 0..$((shards - 1)): the --array range and SHARDS disagree" >&2
    exit 2
fi
model=${MODEL:-gpt-4.1}
njobs=${JOBS:-${SLURM_CPUS_PER_TASK:-4}}
sandbox=${SANDBOX:-bwrap}
env_kind=${ENV:-host}
# Where tasks run: on the node under the sandbox, or in their images (the
# image is then the sandbox: bwrap over its root, --sandbox has no say).
where=(--sandbox "$sandbox")
# ENV=host given says tasks that name an image run on the node anyway (run
# stops on them when no --env is given).
[ "${ENV:-}" != host ] || where+=(--env host)
if [ "$env_kind" != host ]; then
    where=(--env "$env_kind")
    [ -z "${IMAGE:-}" ] || where+=(--image "$IMAGE")
fi

# The run folder of this shard, on the shared file system: trajectories and
# results. The running tasks' working copies go to node-local disk instead
# (WORKDIRS, below), so checkouts, the agent's commands and the tests do
# their many small-file writes locally.
mkdir -p "$out_root"
# Absolute paths: bwrap cannot bind a checkout given by a relative path.
out_root=$(cd "$out_root" && pwd)
out=$out_root/shard-$index

# The repo cache. Node-local (the default) is fast and needs no shared
# locking: every node fetches each repo its shards need once, and array tasks
# on the same node share the mirrors (onebash locks each one while it
# fetches). Many sites give each job its own $TMPDIR and wipe it at the end;
# then every array task fetches again: point CACHE_DIR at persistent local
# scratch if there is one (/local, /scratch/local...). A cache on the shared
# file system fetches each repo once for the whole array, but every checkout
# then reads objects over the network, and the file system must support
# flock across nodes (NFSv4 and GPFS do; Lustre only when mounted with -o flock).
# With ENV=oci the images' unpacked layers and roots are in it too
# (CACHE_DIR/oci): hard links need them on one local file system, and every
# command reads them, so keep the cache node-local.
cache=${CACHE_DIR:-${TMPDIR:-/tmp}/onebash-cache-$(id -un)}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
# Each run gets a folder of its own in it (named after its run folder), so
# array tasks sharing a node never meet, and a re-run finds its own again.
workdirs=${WORKDIRS:-${TMPDIR:-/tmp}/onebash-work-$(id -un)}
mkdir -p "$workdirs"
workdirs=$(cd "$workdirs" && pwd)

# A re-run of this index (after a failure, a time limit, a requeue) finds the
# shard's folder and continues it: rows already written are kept; tasks cut
# off (`interrupted`) and, with --retry-errors, tasks that ended in `error`
# run again. Drop --retry-errors to keep error rows as they are.
resume=()
if [ -f "$out/run.json" ]; then
    resume=(--resume --retry-errors)
fi

# The API key. onebash erases it from its own environment, but not from its
# parent's: a key exported before `sbatch` is in the environment this script
# started with, which the agent's commands could read from /proc/<pid>/environ
# under --sandbox none (bwrap's own PID namespace hides it). A key read here
# from OPENAI_API_KEY_FILE is not: exporting it passes it to the programs
# started from now on, but does not change what /proc shows of this shell.
if [ -n "${OPENAI_API_KEY_FILE:-}" ]; then
    OPENAI_API_KEY=$(< "$OPENAI_API_KEY_FILE")
    export OPENAI_API_KEY
fi

echo "shard $((index + 1))/$shards of $tasks -> $out (cache $cache, -j $njobs, ${where[*]}) on $(hostname)"
onebash run "$tasks" \
    --shard "$((index + 1))/$shards" \
    -o "$out" \
    --cache-dir "$cache" \
    --workdirs "$workdirs" \
    --model "$model" \
    -j "$njobs" \
    "${where[@]}" \
    "${resume[@]}" "$@" &
pid=$!
# Pass SIGINT/SIGTERM on to onebash as SIGINT: from --signal above, or from
# `scancel --batch --signal=INT JOBID_INDEX` (a plain scancel sends SIGTERM
# to every process of the job: onebash then stops at once, and the rows
# already written are whole either way).
trap 'kill -INT "$pid" 2>/dev/null || true' INT TERM
# `wait` returns early (status > 128) when a trapped signal arrives; then wait
# again for onebash's own exit status.
while true; do
    rc=0
    wait "$pid" || rc=$?
    if [ "$rc" -gt 128 ] && kill -0 "$pid" 2>/dev/null; then
        continue
    fi
    break
done

case $rc in
    0) ;;
    1)
        echo "shard $((index + 1))/$shards finished; some tasks ended in status error (see $out/results.csv)"
        rc=0
        ;;
    *) echo "onebash exited $rc; re-run index $index to resume the shard" >&2 ;;
esac
exit "$rc"
