#!/usr/bin/env bash
# Benchmarks of onebash against a scripted local server (no network, no key).
# Prints figures, ratios and a final table against targets; asserts nothing.
#
# Usage: scripts/bench.sh [TURNS]
#   TURNS           turns of section `turn` (default 200)
#   BENCH_QUICK=1   shrink every workload (a smoke test of the script: 1-2 minutes)
#   BENCH_SECTIONS  which sections to run, default "turn throughput latency checkout stores lateness memory containers caching oci datasets regrade minisweagent"
#   BENCH_VENVS     where section minisweagent keeps its venv (default
#                   target/bench-venvs; made once from PyPI, then reused)
#   ONEBASH_HF_PYTHON  a python with pyarrow, for section datasets (default python3)
#   ONEBASH_BIN     a binary to measure instead of building target/release/onebash
#   ONEBASH_BASELINE_BIN  the onebash to compare with in section stores; else
#                   built from git revision $BENCH_BASELINE (default 061c8e7,
#                   the last commit before exact object stores) in
#                   target/bench-baseline (minutes the first time, then reused)
#   BENCH_KEEP=1    keep the work folder (run folders, logs) and print where it is
#   BENCH_DIR       where to make the work folder (default: target/, beside the
#                   build, where run folders usually are: in the project).
#                   File creation speed differs a lot between file systems,
#                   and even between folders of one (on this project's VM, a
#                   file in /tmp costs ten times what it costs elsewhere on
#                   the same disk): the checkout section prints the floor,
#                   writing the files alone, beside onebash.
#
# Sections (each one's figures go to the final table; a section that fails
# or cannot run on this machine is reported as such, and the rest go on):
#
# turn        Harness cost per turn at zero model latency: one task whose model
#             asks for `true` TURNS times, under --sandbox none and --sandbox
#             bwrap (skipped when bwrap is absent or does not work). The
#             server's own handling time is subtracted, so the figure is
#             onebash's: the model call, running the command, recording it.
#             Also the per-command cost of bwrap against none, as a ratio.
# throughput  Model calls per second at -j 1, 4 and 16 (16 tasks x 50 turns of
#             `true`, zero latency, --sandbox none): the calls the server
#             answered over the run's wall time (start-up, checkouts and
#             tests included), and the speed-up over -j 1.
# latency     Wall time with 1 s model latency: 64 tasks x 5 model calls at
#             -j 32, against the ideal calls x latency / jobs; efficiency =
#             ideal / actual; three runs, the median in the table. The
#             server's peak of calls in flight shows that it really
#             overlapped them. With the run folder in the work folder, and
#             again on /dev/shm (tmpfs) when there is one.
# checkout    A repo with a long history (3000 commits over 300 files, made by
#             `git fast-import`, then `git repack -adf`), 50 tasks on it that
#             only check out, call the model once (it answers at once) and run
#             `true`, at -j 1, in 5 rounds of 10 tasks, each followed by one
#             `git clone`, `git clone --no-local`, `git worktree add` and
#             `git archive | tar -x` (writing the files and nothing else: the
#             floor) of the same commit. Per-task checkout time from the
#             trajectories' `checkout` events: the first task fetches
#             (reported apart), the median of the others against the median
#             of each git way. Done on the work folder's file system and
#             again on /dev/shm (tmpfs) when there is one, since file
#             creation dominates either way.
# stores      Exact object stores (working copies that hold nothing past
#             their base) against the onebash from before them, which
#             borrowed the mirror's objects through alternates. On the
#             checkout section's repo, 100 tasks (10 with BENCH_QUICK=1)
#             at bases spread over its history, in shuffled order, at -j 2,
#             --model noop: (1) disk: the stores against the mirror, after
#             the first run; (2) warm checkout: the same tasks again, in 3
#             rounds alternating with the baseline, median of the
#             trajectories' `checkout` durations, base chains up to 100
#             packs long, and the runs' wall times (thin packs are fixed
#             once per run, ahead of the checkouts); (3) first checkout
#             of a new base: a fresh cache
#             holding the mirror (a `--history none` run made it), then
#             one task at the newest commit, whose store is the whole
#             history; against `git clone --no-local` of the repo. 3 times
#             each, medians. On the work folder's file system and again on
#             /dev/shm (tmpfs) when there is one, as the checkout section.
# lateness    Whether command timeouts stay on time while other tasks end
#             at once (the async workers must not be busy with blocking
#             work: deleting working copies, writing trajectories, killing
#             what tasks left behind). 32 tasks on a repo of 5,000 files
#             (10 tasks of 1,000 with BENCH_QUICK=1) run `true` a few times
#             and end together, beside 8 tasks whose every command
#             (`sleep 5`) hits its 0.5 s timeout, 30 turns each, all at
#             -j 40, --sandbox none. A timeout's lateness: the command's
#             duration minus its timeout (the kill, then the end of its
#             output), p50 and p99 over every timed-out command; against
#             the onebash from before (ONEBASH_HYGIENE_BIN, else built from
#             $BENCH_HYGIENE_BASELINE, default 0bbd04a, the last commit
#             before the blocking work moved off the workers), 2 rounds
#             alternating.
# memory      Peak RSS of onebash (run.json's peak_rss_bytes) with 100-turn
#             trajectories, zero latency, --sandbox none: 16 tasks at -j 16,
#             64 tasks at -j 16 (four times the finished tasks, same
#             concurrency: the peak must not grow) and 64 tasks at -j 64.
# containers  Commands under --env podman: through one channel per container
#             (--container-commands channel, the default) against one
#             `podman exec` each (exec), when podman and the test image
#             (scripts/test-images.sh) are here. (1) Per command: 4 tasks of
#             20 turns of `true` at -j 1, zero latency, 2 rounds alternating
#             after an untimed warm-up of one task each, under exec, channel
#             and, when bwrap works, --sandbox bwrap on the host and --env oci
#             (the image `podman save`d); the median of the trajectories'
#             `command` durations. Beside them mini-swe-agent's way: 40 `podman
#             exec C bash -c true` into a container of `podman run -d`, timed
#             from Python. For each, the machine's CPU per model turn: the busy
#             time in /proc/stat (user+nice+system+irq+softirq+steal) over the
#             runs, every process's (conmon, runc and the podman client are not
#             onebash's children), divided by the commands run; how busy the
#             machine was, and the load average (the machine is shared). (2)
#             Model calls per second at -j 1, 8 and 16, max(4, jobs) tasks
#             of 40 turns each in its own container, exec against channel, and
#             their ratio. Targets (issue 29): the channel within 3x of host
#             bwrap per command and at least 5x faster than a bare podman
#             exec; at -j 16 at least 3x exec's calls per second.
# caching     Anthropic prompt caching: one task of 30 turns (10 with
#             BENCH_QUICK=1), each a `bash` call printing ~1 KB, against a
#             server that bills like Anthropic (scripts/bench_anthropic_server.py:
#             a cache write at 1.25x input, a read at 0.1x, a read only for
#             a prefix an earlier request wrote), priced at
#             claude-sonnet-4-5's list price; the cost from results.csv
#             with caching (the default) and with --no-prompt-cache, and
#             their ratio.
# oci         --env oci (no daemon: bwrap over the image's root from the
#             layer cache) when podman (only to `podman save` the test
#             image once) and bwrap are here. (1) Per command: the same
#             workload as containers, --env oci against --sandbox bwrap on
#             the host, 2 rounds alternating, medians (target: within
#             1.5x); per task, the time outside model calls and commands
#             (entering the image, /tmp, teardown). (2) Making the image
#             ready: a run of one task with a cold layer cache against a
#             warm one. (3) Disk: an OCI layout of OCI_IMAGES images (50;
#             5 with BENCH_QUICK=1) made here, each the test image's
#             layer plus one small layer of its own (a 256 KiB file and a
#             config file, written by tools.py), all made ready by one
#             run; `du` of <cache>/oci (hard links counted once) against
#             the sum of the distinct layers' tar sizes (target: 1.2x),
#             and how much of it is the images' roots.
# datasets    Reading a dataset from the Hub's cache against reading the same
#             rows as JSONL. 2,294 rows shaped like SWE-bench's test split
#             (SWE-bench full: its 12 repos with its count of instances in
#             each and versions its eval recipes know; 17 KB of text a row,
#             39 MB in all: a problem statement, hints, a patch and a test
#             patch of a few KB, the test lists as JSON-encoded strings),
#             written by tools.py as JSONL and as parquet (pyarrow, snappy,
#             1,000 rows a row group, as `datasets`' push_to_hub writes it;
#             the python is $ONEBASH_HF_PYTHON, else python3, and the
#             section is skipped without pyarrow). A scripted Hub
#             (scripts/bench_hub_server.py) serves it as hf:bench/swe-bench;
#             one `run --dry-run` fills the cache (untimed); then 3 rounds
#             alternating of `run --dry-run -m noop --sandbox none` of the
#             dataset with HF_HUB_OFFLINE=1 and of the JSONL: every row
#             read and checked, each prompt rendered, nothing run. Wall
#             time (median) and peak RSS (wait4's, the largest of 3) of
#             each, their ratio, and the requests the Hub saw during them
#             (0: a cached revision needs no network); CPU time too, steadier
#             than wall time on a shared machine. Also each once with
#             --limit 1 (every row still read and made a task, one checked
#             further): what is left is the reading.
# regrade     Grading predictions from saved logs against grading them live.
#             REGRADE_TASKS tasks (500; 50 with BENCH_QUICK=1) on the
#             one-file repo, each with a prediction (a one-line change of
#             README.md) and a test command that prints a pytest-style
#             PASSED line for its FAIL_TO_PASS test (a quick test command:
#             what is measured is the harness, not the tests). Live: `run
#             -m predictions:FILE --env host --sandbox none -j $(nproc)`
#             (each prediction applied to a working copy, the tests run;
#             `-m oracle` with the same patches as gold_patch where this
#             onebash has no `predictions:`, said in the output); then
#             `regrade` of that run folder into a new one (-o) and again
#             in place, under the other rules: every row's saved log read
#             and graded again, no checkout, no process. Wall time and
#             peak RSS (wait4's) of each, and the ratio live / regrade.
# minisweagent  onebash against mini-swe-agent 2.4.6 (installed from PyPI
#             into a venv of its own, see BENCH_VENVS) on the same workload:
#             40 tasks (8 with BENCH_QUICK=1) of 21 model calls (6), 20 (5)
#             of them a `bash` tool call running `true`, at -j 4 against
#             one scripted server at zero latency. onebash: `run --sandbox
#             none`, after an untimed run that fills its repo cache.
#             mini-swe-agent: its batch mode, `mini-extra swebench` on a
#             dataset folder of the same tasks (`--subset DIR --split
#             test`), with its swebench.yaml and `environment_class=local`
#             (commands run by `subprocess` in one clone of the repo: no
#             checkout), `model_name=openai/bench` (litellm's OpenAI-
#             compatible client) with `model_kwargs.api_base` at the
#             server; its last call is the tool call that submits (`echo
#             COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`), onebash's a final
#             text. Model calls per second over the server's span, from the
#             first request to the last answer (start-up and exit aside:
#             mini-swe-agent's imports take seconds), 3 rounds alternating
#             (1 with BENCH_QUICK=1); each round's figures, the medians and
#             the ratio onebash / mini-swe-agent (issue 37's target: 10x).
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
root=$PWD
quick=${BENCH_QUICK:-0}
sections=${BENCH_SECTIONS:-turn throughput latency checkout stores lateness memory containers caching oci datasets regrade minisweagent}

# Workloads: full, and shrunk for BENCH_QUICK=1.
if [ "$quick" = 1 ]; then
    turns=${1:-20}
    tp_tasks=4 tp_turns=5 tp_jobs="1 4 16"
    lat_tasks=16 lat_calls=2 lat_jobs=8 lat_s=0.2 lat_reps=1
    co_commits=200 co_files=30 co_tasks=5 co_reps=2 st_bases=10
    late_tasks=10 late_files=1000 late_timers=4 late_turns=10
    mem_turns=10 mem_runs="4:4 16:4 16:16"
    ct_tasks=2 ct_turns=5 ct_execs=10 ct_tp_jobs="1 4" ct_tp_turns=5 ct_tp_min=2 oci_images=5
    cache_turns=10 regrade_tasks=50
    msa_tasks=8 msa_turns=5 msa_rounds=1
else
    turns=${1:-200}
    tp_tasks=16 tp_turns=50 tp_jobs="1 4 16"
    lat_tasks=64 lat_calls=5 lat_jobs=32 lat_s=1 lat_reps=3
    co_commits=3000 co_files=300 co_tasks=50 co_reps=5 st_bases=100
    late_tasks=32 late_files=5000 late_timers=8 late_turns=30
    mem_turns=100 mem_runs="16:16 64:16 64:64"
    ct_tasks=4 ct_turns=20 ct_execs=40 ct_tp_jobs="1 8 16" ct_tp_turns=40 ct_tp_min=4 oci_images=50
    cache_turns=30 regrade_tasks=500
    msa_tasks=40 msa_turns=20 msa_rounds=3
fi
msa_jobs=4 msa_version=2.4.6

mkdir -p "${BENCH_DIR:=$root/target}"
work=$(mktemp -d -p "$BENCH_DIR")
shm_work=""
cleanup() {
    # Only the servers this script started, by pid.
    if [ -f "$work/servers" ]; then
        while read -r pid; do kill -TERM "$pid" 2>/dev/null || true; done < "$work/servers"
    fi
    if [ "${BENCH_KEEP:-0}" = 1 ]; then
        echo "kept: $work ${shm_work}"
    else
        rm -rf "$work"
        [ -z "$shm_work" ] || rm -rf "$shm_work"
    fi
}
trap cleanup EXIT

if [ -n "${ONEBASH_BIN:-}" ]; then
    bin=$ONEBASH_BIN
else
    cargo build --release --quiet
    bin=$root/target/release/onebash
fi

# Helpers in Python: figures from run folders, timings of git, the table.
cat > "$work/tools.py" <<'PY'
import csv, json, math, os, random, shutil, statistics, subprocess, sys, time

def gen_repo(commits, files):
    """A fast-import stream: `files` modules, then commits touching 3 each."""
    rng = random.Random(1)
    out = sys.stdout.buffer
    names = [f"src/pkg{i % 20:02d}/mod{i:04d}.py" for i in range(files)]
    body = {i: [f"# module {i}\n".encode()] + [
        f"def base_{i}_{k}(x):\n    return x + {k}\n\n".encode() for k in range(40)]
        for i in range(files)}
    def data(b):
        out.write(b"data %d\n" % len(b)); out.write(b); out.write(b"\n")
    for c in range(commits):
        touched = range(files) if c == 0 else rng.sample(range(files), 3)
        out.write(b"commit refs/heads/main\nmark :%d\n" % (c + 1))
        out.write(b"committer bench <bench@localhost> %d +0000\n" % (1700000000 + 60 * c))
        data(b"change %d" % c)
        if c:
            out.write(b"from :%d\n" % c)
        for i in touched:
            if c:
                body[i].append(f"def f_{c}(x):\n    return x * {rng.randint(1, 999)}\n\n".encode())
            out.write(b"M 100644 inline %s\n" % names[i].encode())
            data(b"".join(body[i]))
        out.write(b"\n")

def tasks(path, n, repo, sha, prefix="t"):
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"{prefix}{i:03d}", "repo": repo, "base_commit": sha,
                                "problem_statement": "bench", "test_command": "true"}) + "\n")

def spread_tasks(path, revs, n, repo):
    """n tasks at bases spread over the history in `revs` (oldest first,
    the newest last), in a shuffled order."""
    revs = [l.strip() for l in open(revs) if l.strip()]
    bases = [revs[(i + 1) * len(revs) // n - 1] for i in range(n)]
    random.Random(2).shuffle(bases)
    with open(path, "w") as f:
        for i, sha in enumerate(bases):
            f.write(json.dumps({"id": f"b{i:03d}", "repo": repo, "base_commit": sha,
                                "problem_statement": "bench", "test_command": "true"}) + "\n")

def agent_seconds(run):
    print(next(csv.DictReader(open(os.path.join(run, "results.csv"))))["agent_seconds"])

def cost(run):
    r = next(csv.DictReader(open(os.path.join(run, "results.csv"))))
    print(r["cost_usd"], r["prompt_tokens"], r["cached_input_tokens"], r["cache_write_tokens"], r["status"])

def predictions(tasks_path, preds_path, n, repo, sha):
    """n tasks on `repo` at `sha`, each with a FAIL_TO_PASS test its quick
    test command reports as passed once README.md holds the change, and
    the predictions (JSONL, run_evaluation's shape) that make the change;
    the same patch is each task's gold_patch, for an onebash without
    `-m predictions:`."""
    old = open(os.path.join(repo, "README.md")).read()
    patch = ("diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n"
             "@@ -1 +1,2 @@\n" + "".join(" " + l + "\n" for l in old.splitlines())
             + "+changed\n")
    with open(tasks_path, "w") as tasks, open(preds_path, "w") as preds:
        for i in range(n):
            tid = f"p{i:03d}"
            tasks.write(json.dumps({
                "id": tid, "repo": repo, "base_commit": sha, "problem_statement": "bench",
                "test_command": "grep -q changed README.md && echo 'PASSED t.py::test_a' || echo 'FAILED t.py::test_a'",
                "fail_to_pass": ["t.py::test_a"], "gold_patch": patch}) + "\n")
            preds.write(json.dumps({"instance_id": tid, "model_name_or_path": "bench",
                                    "model_patch": patch}) + "\n")

def rows(run):
    rs = list(csv.DictReader(open(os.path.join(run, "results.csv"))))
    bad = [r for r in rs if r["status"] != "passed"]
    print(f"{len(rs)} {len(bad)}")

def peak_rss(run):
    v = json.load(open(os.path.join(run, "run.json"))).get("peak_rss_bytes")
    print(v if v is not None else "none")

def lateness(run, timeout):
    """Prints p50 p99 n over the timed-out commands of a run: seconds past
    the timeout each took to end."""
    late = []
    for tid in os.listdir(os.path.join(run, "tasks")):
        with open(os.path.join(run, "tasks", tid, "epoch-1", "trajectory.jsonl")) as f:
            for line in f:
                e = json.loads(line)
                if e.get("event") == "command" and e.get("timed_out"):
                    late.append(e["duration_s"] - float(timeout))
    late.sort()
    pick = lambda q: late[min(len(late) - 1, int(q * len(late)))]
    print(f"{pick(0.5):.6f} {pick(0.99):.6f} {len(late)}")

def flat_repo(files):
    """A fast-import stream: one commit of `files` small files in 50 folders."""
    out = sys.stdout.buffer
    out.write(b"commit refs/heads/main\ncommitter bench <bench@localhost> 1700000000 +0000\n")
    out.write(b"data 4\nflat\n")
    for i in range(files):
        body = f"# file {i}\n".encode() * 20
        out.write(b"M 100644 inline d%02d/f%05d.txt\n" % (i % 50, i))
        out.write(b"data %d\n" % len(body) + body + b"\n")
    out.write(b"\n")

def checkouts(*runs):
    """Prints: fetch_s (the task that fetched) median_s (the others) n."""
    fetch, others = [], []
    for run in runs:
        for tid in os.listdir(os.path.join(run, "tasks")):
            with open(os.path.join(run, "tasks", tid, "epoch-1", "trajectory.jsonl")) as f:
                for line in f:
                    e = json.loads(line)
                    if e.get("event") == "checkout":
                        (fetch if e["fetched"] else others).append(e["duration_s"])
    print(f"{max(fetch) if fetch else -1} {statistics.median(others)} {len(others)}")

def overhead(run):
    """Prints medians over tasks: wall - model calls, checkout, test (s)."""
    outside, co, test = [], [], []
    for tid in os.listdir(os.path.join(run, "tasks")):
        with open(os.path.join(run, "tasks", tid, "epoch-1", "trajectory.jsonl")) as f:
            ev = [json.loads(line) for line in f]
        calls = sum(e["latency_s"] for e in ev if e["event"] == "model_call")
        outside.append(ev[-1]["ts"] - ev[0]["ts"] - calls)
        co += [e["duration_s"] for e in ev if e["event"] == "checkout"]
        test += [e["duration_s"] for e in ev if e["event"] == "test"]
    m = statistics.median
    print(f"{m(outside):.3f} {m(co):.3f} {m(test):.3f}")

def commands(*runs):
    """Prints the median of the agents' command durations over runs (s),
    the median per task of the time outside model calls and commands
    (s), and how many commands."""
    durations, outside = [], []
    for run in runs:
        for tid in os.listdir(os.path.join(run, "tasks")):
            with open(os.path.join(run, "tasks", tid, "epoch-1", "trajectory.jsonl")) as f:
                ev = [json.loads(line) for line in f]
            own = [e["duration_s"] for e in ev if e["event"] == "command"]
            durations += own
            calls = sum(e["latency_s"] for e in ev if e["event"] == "model_call")
            outside.append(ev[-1]["ts"] - ev[0]["ts"] - calls - sum(own))
    m = statistics.median
    print(f"{m(durations):.4f} {m(outside):.3f} {len(durations)}")

def exec_loop(engine, container, n):
    """Prints the median wall time (s) of n `ENGINE exec CONTAINER bash -c
    true`: one exec per command, as mini-swe-agent's docker environment."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run([engine, "exec", container, "bash", "-c", "true"], check=True,
                       stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    print(f"{statistics.median(times):.4f}")

GIT_WAYS = ["clone", "clone_no_local", "worktree", "archive", "bare_no_local"]

def git_round(repo, sha, scratch, r, times_file):
    """Times each way to get a working tree of repo@sha once; appends a line."""
    env = dict(os.environ, GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1")
    ways = {
        "clone": lambda d: ["git", "clone", "-q", repo, d],
        "clone_no_local": lambda d: ["git", "clone", "-q", "--no-local", repo, d],
        "worktree": lambda d: ["git", "-C", repo, "worktree", "add", "-q", "--detach", d, sha],
        "archive": lambda d: ["sh", "-c", f"mkdir {d} && git -C {repo} archive {sha} | tar -x -C {d}"],
        "bare_no_local": lambda d: ["git", "clone", "-q", "--bare", "--no-local", repo, d],
    }
    times = {}
    for name in GIT_WAYS:
        d = os.path.join(scratch, f"{name}-{r}")
        t = time.perf_counter()
        subprocess.run(ways[name](d), check=True, env=env)
        times[name] = time.perf_counter() - t
        if name == "worktree":
            subprocess.run(["git", "-C", repo, "worktree", "remove", "--force", d], check=True, env=env)
        shutil.rmtree(d, ignore_errors=True)
    with open(times_file, "a") as f:
        f.write(json.dumps(times) + "\n")

def git_medians(times_file):
    """Median seconds of each way over the rounds, in GIT_WAYS order."""
    rounds = [json.loads(line) for line in open(times_file)]
    print(" ".join(f"{statistics.median(r[k] for r in rounds):.6f}" for k in GIT_WAYS))

def oci_images(archive, layout, n, kib):
    """An OCI layout of n images: the layers of the docker archive
    `archive`, then one layer of each image's own (a `kib` KiB file under
    opt/app-N/ and etc/app-N.conf), all tars uncompressed; prints the sum
    of the distinct layers' sizes in bytes."""
    import hashlib, io, tarfile
    blobs = os.path.join(layout, "blobs", "sha256")
    os.makedirs(blobs, exist_ok=True)
    def put(data):
        digest = hashlib.sha256(data).hexdigest()
        with open(os.path.join(blobs, digest), "wb") as f:
            f.write(data)
        return "sha256:" + digest, len(data)
    with tarfile.open(archive) as t:
        manifest = json.load(t.extractfile("manifest.json"))[0]
        config = json.load(t.extractfile(manifest["Config"]))
        base = [put(t.extractfile(name).read()) for name in manifest["Layers"]]
    total = sum(size for _, size in base)
    rng = random.Random(3)
    index = []
    for i in range(n):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as t:
            for name, data in [(f"opt/app-{i}/data.bin", rng.randbytes(kib * 1024)),
                               (f"etc/app-{i}.conf", f"image {i}\n".encode())]:
                info = tarfile.TarInfo(name)
                info.size, info.mode, info.mtime = len(data), 0o644, 1700000000
                t.addfile(info, io.BytesIO(data))
        own = put(buf.getvalue())
        total += own[1]
        layers = base + [own]
        cfg = json.loads(json.dumps(config))
        cfg["rootfs"]["diff_ids"] = [d for d, _ in layers]
        cfg_digest, cfg_size = put(json.dumps(cfg).encode())
        man = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
               "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                          "digest": cfg_digest, "size": cfg_size},
               "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                           "digest": d, "size": s} for d, s in layers]}
        man_digest, man_size = put(json.dumps(man).encode())
        index.append({"mediaType": "application/vnd.oci.image.manifest.v1+json",
                      "digest": man_digest, "size": man_size,
                      "annotations": {"org.opencontainers.image.ref.name": f"app-{i}"}})
    with open(os.path.join(layout, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": index}, f)
    with open(os.path.join(layout, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    print(total)

def image_tasks(path, n, repo, sha, layout):
    """n tasks, task i in the image app-i of the OCI layout `layout`."""
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"img{i:03d}", "repo": repo, "base_commit": sha,
                                "problem_statement": "bench", "test_command": "true",
                                "image": f"oci:{layout}:app-{i}"}) + "\n")

# The 12 repos of SWE-bench's test split with its count of instances in
# each (2,294 in all), a few of the versions data/swebench-specs.json
# knows for each, the first instance number and the package's folder.
SWE_REPOS = [
    ("django/django", 850, ["3.0", "3.1", "3.2", "4.0", "4.1", "4.2", "5.0"], 10000, "django"),
    ("sympy/sympy", 386, ["1.1", "1.5", "1.7", "1.9", "1.11", "1.12"], 11000, "sympy"),
    ("scikit-learn/scikit-learn", 229, ["0.20", "0.21", "0.22", "1.3"], 10000, "sklearn"),
    ("sphinx-doc/sphinx", 187, ["3.5", "4.0", "4.4", "5.0", "7.1"], 7500, "sphinx"),
    ("matplotlib/matplotlib", 184, ["3.5", "3.6", "3.7"], 18000, "lib/matplotlib"),
    ("pytest-dev/pytest", 119, ["5.4", "6.0", "7.0", "8.0"], 5000, "src/_pytest"),
    ("pydata/xarray", 110, ["0.12", "2022.03", "2022.06"], 3000, "xarray"),
    ("astropy/astropy", 95, ["4.3", "5.0", "5.1", "5.2"], 12000, "astropy"),
    ("pylint-dev/pylint", 57, ["2.13", "2.15", "3.0"], 4000, "pylint"),
    ("psf/requests", 44, ["2.0", "2.3", "2.10"], 1100, "requests"),
    ("mwaskom/seaborn", 22, ["0.12", "0.13"], 2800, "seaborn"),
    ("pallets/flask", 11, ["2.0", "2.3"], 4040, "src/flask"),
]
# The size (bytes) each text field of a row is drawn around (lognormal,
# sigma 0.6; a diff ends with a whole file, so diffs come out about 2x
# larger): the means come out as problem_statement 3.7 KB, hints_text 1.6
# KB (40% are empty), patch 3.5 KB, test_patch 4.3 KB, PASS_TO_PASS 3.6 KB
# (10% empty), 17 KB a row: 39 MB of text over 2,294 rows, as SWE-bench's
# test split.
SWE_SIZES = {"problem_statement": 3500, "hints_text": 2500, "patch": 1500,
             "test_patch": 2500, "PASS_TO_PASS": 4000}
WORDS = ("the a an of to in is that it for on with as this be are not when by from "
         "or but which should if can value error raise return call function method class "
         "object field model query test case instance type argument default expected "
         "actual behaviour behavior issue bug fix patch version python module import "
         "attribute none true false list dict string number index array data frame "
         "file path name key option setting config parameter output input result "
         "works fails failing passes check handle support add remove change update "
         "instead because however also only still already after before during using "
         "used use see shown below above example minimal reproduce traceback warning "
         "deprecated release docs documentation user users code line lines empty "
         "missing wrong correct incorrect unexpected crash exception message format").split()

def swe_text(rng, size):
    """Prose of about `size` bytes, with a code block now and then."""
    out, n = [], 0
    while n < size:
        if rng.random() < 0.15:
            block = "\n```python\n" + "\n".join(swe_code(rng) for _ in range(rng.randint(3, 12))) + "\n```\n"
        else:
            words = rng.choices(WORDS, k=rng.randint(8, 30))
            if rng.random() < 0.3:
                words.insert(rng.randrange(len(words)), f"`{swe_ident(rng)}()`")
            block = " ".join(words).capitalize() + (". " if rng.random() < 0.8 else ".\n\n")
        out.append(block)
        n += len(block)
    return "".join(out)

def swe_ident(rng):
    return "_".join(rng.choices(WORDS[20:], k=rng.randint(1, 3)))

def swe_code(rng):
    pick = rng.randrange(6)
    a, b, c = swe_ident(rng), swe_ident(rng), swe_ident(rng)
    indent = "    " * rng.randint(0, 3)
    return indent + [f"{a} = {b}({c}, {rng.randint(0, 99)})",
                     f"if {a} is not None and {b}.{c}:",
                     f"return self.{a}({b}={c})",
                     f"def {a}(self, {b}, {c}=None):",
                     f"raise ValueError(\"{a} must be a {b}, got %r\" % {c})",
                     f"for {a} in {b}.{c}():"][pick]

def swe_diff(rng, size, files):
    """A unified diff of about `size` bytes over some of `files`."""
    out, n = [], 0
    while n < size:
        path = rng.choice(files)
        part = [f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"]
        for _ in range(rng.randint(1, 4)):
            start, ctx = rng.randint(1, 2000), [swe_code(rng) for _ in range(3)]
            removed = [swe_code(rng) for _ in range(rng.randint(0, 6))]
            added = [swe_code(rng) for _ in range(rng.randint(1, 12))]
            part.append(f"@@ -{start},{len(removed) + 6} +{start},{len(added) + 6} @@ def {swe_ident(rng)}(self):\n")
            part += [f" {l}\n" for l in ctx] + [f"-{l}\n" for l in removed] + [f"+{l}\n" for l in added]
            part += [f" {l}\n" for l in (swe_code(rng) for _ in range(3))]
        text = "".join(part)
        out.append(text)
        n += len(text)
    return "".join(out)

def swe_tests(rng, repo, size):
    """A JSON-encoded list of test names of about `size` bytes, named the
    way the repo's test runner names them."""
    names, n = [], 2
    while n < size:
        if repo == "django/django":
            name = f"test_{swe_ident(rng)} ({swe_ident(rng)}.tests.{swe_ident(rng).title().replace('_', '')}Tests)"
        elif repo == "sympy/sympy":
            name = f"test_{swe_ident(rng)}"
        else:
            name = f"tests/test_{swe_ident(rng)}.py::test_{swe_ident(rng)}"
            if rng.random() < 0.3:
                name += f"[{swe_ident(rng)}-{rng.randint(0, 9)}]"
        names.append(name)
        n += len(name) + 4
    return json.dumps(names)

def swe_row(rng, repo, number, version, package):
    """One SWE-bench instance, its fields' sizes drawn around SWE_SIZES."""
    size = lambda field: int(rng.lognormvariate(math.log(SWE_SIZES[field]) - 0.18, 0.6))
    owner, name = repo.split("/")
    files = [f"{package}/{swe_ident(rng)}.py" for _ in range(rng.randint(1, 3))]
    tests = [f"tests/{swe_ident(rng)}/test_{swe_ident(rng)}.py" for _ in range(rng.randint(1, 3))]
    return {
        "repo": repo,
        "instance_id": f"{owner}__{name}-{number}",
        "base_commit": rng.randbytes(20).hex(),
        "patch": swe_diff(rng, size("patch"), files),
        "test_patch": swe_diff(rng, size("test_patch"), tests),
        "problem_statement": swe_text(rng, size("problem_statement")),
        "hints_text": swe_text(rng, size("hints_text")) if rng.random() < 0.6 else "",
        "created_at": f"20{rng.randint(12, 23)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T"
                      f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z",
        "version": version,
        "FAIL_TO_PASS": swe_tests(rng, repo, rng.randint(40, 600)),
        "PASS_TO_PASS": swe_tests(rng, repo, size("PASS_TO_PASS")) if rng.random() < 0.9 else "[]",
        "environment_setup_commit": rng.randbytes(20).hex(),
    }

def swe_dataset(jsonl, hub):
    """SWE-bench's test split as the bench makes it (SWE_REPOS, SWE_SIZES):
    `jsonl`, one row a line, and the dataset repo folder `hub` holding it
    as parquet (data/test-00000-of-00001.parquet, snappy, 1,000 rows a row
    group and the `huggingface` schema metadata, as `datasets`'
    push_to_hub writes it) and the Hub's .gitattributes. Needs pyarrow.
    Prints: rows, MB of text, mean KB a row, JSONL MB, parquet MB, row
    groups."""
    import pyarrow as pa, pyarrow.parquet as pq
    rng = random.Random(4)
    rows = []
    for repo, count, versions, first, package in SWE_REPOS:
        number = first
        for _ in range(count):
            number += rng.randint(1, 12)
            rows.append(swe_row(rng, repo, number, rng.choice(versions), package))
    with open(jsonl, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    columns = list(rows[0])
    table = pa.table({c: pa.array([r[c] for r in rows], pa.string()) for c in columns})
    features = {c: {"dtype": "string", "_type": "Value"} for c in columns}
    table = table.replace_schema_metadata({"huggingface": json.dumps({"info": {"features": features}})})
    path = os.path.join(hub, "data", "test-00000-of-00001.parquet")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(table, path, compression="snappy", row_group_size=1000)
    with open(os.path.join(hub, ".gitattributes"), "w") as f:
        f.write("*.parquet filter=lfs diff=lfs merge=lfs -text\n*.jsonl filter=lfs diff=lfs merge=lfs -text\n")
    text = sum(len(v.encode()) for r in rows for v in r.values())
    print(len(rows), round(text / 1e6, 1), round(text / len(rows) / 1e3, 1),
          round(os.path.getsize(jsonl) / 1e6, 1), round(os.path.getsize(path) / 1e6, 1),
          pq.ParquetFile(path).num_row_groups)

def rusage(log, *command):
    """Runs `command` (stdout and stderr to `log`) and prints its wall time
    (s), its peak RSS (bytes: the largest resident set of the process and
    the children it waited for, from wait4) and its CPU time (user + system,
    s); fails as it fails."""
    with open(log, "wb") as out:
        t0 = time.perf_counter()
        child = subprocess.Popen([str(a) for a in command], stdin=subprocess.DEVNULL,
                                 stdout=out, stderr=out)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - t0
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        sys.stderr.write(f"{command[0]} exited with {child.returncode}; the end of its output:\n")
        sys.stderr.write("".join(open(log, errors="replace").readlines()[-5:]))
        sys.exit(1)
    print(f"{wall:.4f} {usage.ru_maxrss * 1024} {usage.ru_utime + usage.ru_stime:.4f}")

def table(path):
    rows = [l.rstrip("\n").split("\t") for l in open(path) if l.strip()]
    w = max([len(r[0]) for r in rows] + [6])
    print(f"{'figure':<{w}}  {'measured':>14}  {'target':>10}  verdict")
    for label, value, target, verdict in rows:
        print(f"{label:<{w}}  {value:>14}  {target:>10}  {verdict}")

if __name__ == "__main__":
    fn, args = globals()[sys.argv[1]], sys.argv[2:]
    fn(*[int(a) if a.isdigit() else a for a in args])
PY
tools() { python3 "$work/tools.py" "$@"; }
calc() { python3 -c "print($*)"; }
# fig LABEL VALUE [TARGET VERDICT]: one row of the final table.
fig() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "${3:--}" "${4:-}" >> "$work/figures.tsv"; }

# A one-file repo; the tasks of every section but checkout are on it.
git init -q -b main "$work/repo"
echo hello > "$work/repo/README.md"
git -C "$work/repo" add -A
git -C "$work/repo" -c user.name=bench -c user.email=bench@localhost commit -qm init
sha=$(git -C "$work/repo" rev-parse HEAD)

# start_server TOOL_CALLS [LATENCY_S] [COMMAND [FINAL_COMMAND]]: sets
# $port; stop_server sets $requests, $server_seconds, $max_in_flight and
# $span_seconds (first request to last answer). An empty COMMAND is a tool
# call onebash rejects without starting a process; a FINAL_COMMAND is the
# last answer's tool call instead of a final text.
start_server() {
    rm -f "$work/port" "$work/stats"
    python3 scripts/bench_server.py "$1" "${3-true}" "$work/port" "$work/stats" "${2:-0}" ${4:+"$4"} &
    server=$!
    echo "$server" >> "$work/servers"
    while [ ! -s "$work/port" ]; do sleep 0.05; done
    port=$(cat "$work/port")
}
stop_server() {
    kill -TERM "$server"
    wait "$server" 2>/dev/null || true
    sed -i "/^$server\$/d" "$work/servers"
    read -r requests server_seconds max_in_flight span_seconds < "$work/stats"
}

# onebash OUT TASKS JOBS MAX_TURNS SANDBOX [CACHE]: one run against the
# server; sets $wall (seconds). stderr goes to OUT.log, shown on failure.
onebash() {
    local out=$1 t0 t1
    t0=$EPOCHREALTIME
    if ! "$bin" run "$2" --model bench --base-url "http://127.0.0.1:$port/v1" \
        -j "$3" --max-turns "$4" --sandbox "$5" -o "$out" --cache-dir "${6:-$work/cache}" \
        > /dev/null 2> "$out.log"; then
        echo "onebash run failed; the end of its log:" >&2
        tail -5 "$out.log" >&2
        return 1
    fi
    t1=$EPOCHREALTIME
    wall=$(calc "$t1 - $t0")
    read -r n bad < <(tools rows "$out")
    if [ "$bad" != 0 ]; then
        echo "$bad of $n tasks did not pass: see $out/results.csv" >&2
        return 1
    fi
}

bwrap_works() {
    command -v bwrap > /dev/null && bwrap --unshare-all --ro-bind / / true > /dev/null 2>&1
}

section_turn() {
    tools tasks "$work/turn.jsonl" 1 "$work/repo" "$sha" bench
    # One task of $turns turns; sets $agent (the task's agent_seconds),
    # $server_seconds and $requests.
    measure() {
        local out=$work/turn-$1-$RANDOM
        start_server "$turns" 0 "${2-true}"
        onebash "$out" "$work/turn.jsonl" 1 $((turns + 1)) "$1"
        stop_server
        agent=$(tools agent_seconds "$out")
    }
    # A warm-up run fills the repo cache and the page cache.
    measure none
    measure none
    none_ms=$(calc "round(($agent - $server_seconds) / $turns * 1000, 2)")
    echo "1 task x $turns turns of \`true\`, zero model latency ($requests model calls); ms per turn, harness + command, server time subtracted"
    echo "  none   $none_ms"
    fig "ms per turn, --sandbox none" "$none_ms" "-" ""
    if bwrap_works; then
        measure bwrap
        bwrap_ms=$(calc "round(($agent - $server_seconds) / $turns * 1000, 2)")
        ratio=$(calc "round($bwrap_ms / $none_ms, 2)")
        extra=$(calc "round($bwrap_ms - $none_ms, 2)")
        echo "  bwrap  $bwrap_ms  ($extra ms more per command: ${ratio}x none)"
        fig "ms per turn, --sandbox bwrap" "$bwrap_ms" "-" ""
        fig "bwrap / none per turn" "${ratio}x" "-" ""
    else
        echo "  bwrap  skipped: not installed or not working here"
        fig "ms per turn, --sandbox bwrap" "skipped" "-" "bwrap absent"
    fi
    # The harness alone: the model's tool call is rejected (empty command),
    # so no process starts; what is left is the model call, the history,
    # the trajectory and the bookkeeping.
    measure none ""
    alone_ms=$(calc "round(($agent - $server_seconds) / $turns * 1000, 2)")
    echo "  harness alone, no process per turn: $alone_ms ms per model call"
    fig "ms per model call, harness alone" "$alone_ms" "< 5" "$(calc "'ok' if $alone_ms < 5 else 'MISS'")"
    echo "  for scale: mini-swe-agent's harness overhead is about 30-45 ms per turn"
}

section_throughput() {
    tools tasks "$work/tp.jsonl" "$tp_tasks" "$work/repo" "$sha"
    echo "$tp_tasks tasks x $tp_turns turns of \`true\` (+1 final answer each), zero latency, --sandbox none"
    local base="" j rate
    for j in $tp_jobs; do
        start_server "$tp_turns"
        onebash "$work/tp-$j" "$work/tp.jsonl" "$j" $((tp_turns + 1)) none
        stop_server
        rate=$(calc "round($requests / $wall, 1)")
        [ -n "$base" ] || base=$rate
        printf '  -j %-3s %5d calls in %6.2f s: %7.1f calls/s (%.2fx -j 1); server busy %2.0f%% of the wall time\n' \
            "$j" "$requests" "$wall" "$rate" "$(calc "$rate / $base")" "$(calc "100 * $server_seconds / $wall")"
        fig "model calls/s at -j $j" "$rate" "-" "$(calc "round($rate / $base, 2)")x -j 1"
    done
}

# latency_on LABEL DIR: the latency runs with run folders and cache in DIR.
latency_on() {
    local label=$1 dir=$2 r ideal eff walls=() effs=()
    mkdir -p "$dir"
    echo "  on $label ($dir):"
    for r in $(seq "$lat_reps"); do
        start_server $((lat_calls - 1)) "$lat_s"
        onebash "$dir/lat-$r" "$work/lat.jsonl" "$lat_jobs" "$lat_calls" none "$dir/lat-cache"
        stop_server
        ideal=$(calc "$requests * $lat_s / $lat_jobs")
        eff=$(calc "round($ideal / $wall, 3)")
        walls+=("$wall") effs+=("$eff")
        printf '    run %d: %d calls in %.2f s; ideal %.2f s (calls x latency / jobs); efficiency %.3f; the server held up to %d calls at once\n' \
            "$r" "$requests" "$wall" "$ideal" "$eff" "$max_in_flight"
        read -r outside co test < <(tools overhead "$dir/lat-$r")
        printf '           per task, median: %.2f s outside model calls (checkout %.2f s, test %.2f s); %d waves of -j %d\n' \
            "$outside" "$co" "$test" "$(calc "-(-$lat_tasks // $lat_jobs)")" "$lat_jobs"
    done
    # The median run: this machine is shared, and one run can land on a
    # busy second.
    wall=$(calc "sorted([${walls[*]/%/,}])[$lat_reps // 2]")
    eff=$(calc "sorted([${effs[*]/%/,}])[$lat_reps // 2]")
    echo "    median of $lat_reps runs: efficiency $eff (all: ${effs[*]})"
    fig "latency ${lat_s}s [$label]: wall s, median (ideal $(calc "round($ideal, 2)"))" "$(calc "round($wall, 2)")" "-" ""
    fig "latency ${lat_s}s [$label]: efficiency ideal/actual" "$eff" ">= 0.9" "$(calc "'ok' if $eff >= 0.9 else 'MISS'")"
}

section_latency() {
    tools tasks "$work/lat.jsonl" "$lat_tasks" "$work/repo" "$sha"
    echo "$lat_tasks tasks x $lat_calls model calls, ${lat_s} s model latency, -j $lat_jobs, --sandbox none; $lat_reps runs"
    latency_on disk "$work/lat"
    # The run folder (working copies, trajectories) on tmpfs too: the
    # per-task file work is a part of the fixed cost, and this VM's disk
    # slows down by up to 10x after minutes of writes.
    if [ -n "$shm_work" ]; then
        latency_on tmpfs "$shm_work/lat"
    else
        echo "  on tmpfs: skipped (no writable tmpfs at /dev/shm, or the work folder is on one already)"
    fi
}

# checkout_on LABEL DIR: the checkout comparison with everything in DIR.
checkout_on() {
    local label=$1 dir=$2 repo head fetch median n
    mkdir -p "$dir"
    repo=$dir/long.git
    git init -q --bare -b main "$repo"
    tools gen_repo "$co_commits" "$co_files" | git -C "$repo" fast-import --quiet
    # -f computes the deltas afresh, as gc does over a repo's life: the ones
    # fast-import wrote run from old to new, which puts today's files at
    # the end of 50-deep delta chains, a layout no real repo has.
    git -C "$repo" repack -adfq
    head=$(git -C "$repo" rev-parse main)
    # Rounds of onebash tasks, then each git way once: a disk whose speed
    # drifts (this VM's does, by 10x over minutes) weighs on all alike.
    local r runs=()
    for r in $(seq "$co_reps"); do
        tools tasks "$dir/co-$r.jsonl" $((co_tasks / co_reps)) "$repo" "$head" "c$r-"
        start_server 0
        onebash "$dir/co-run-$r" "$dir/co-$r.jsonl" 1 1 none "$dir/cache"
        stop_server
        runs+=("$dir/co-run-$r")
        tools git_round "$repo" "$head" "$dir" "$r" "$dir/git-times.jsonl"
    done
    read -r fetch median n < <(tools checkouts "${runs[@]}")
    read -r clone noloc wt archive bare < <(tools git_medians "$dir/git-times.jsonl")
    echo "  on $label ($dir):"
    printf '    %-52s %8.1f ms\n' "onebash checkout, median of $n" "$(calc "$median * 1000")"
    printf '    %-52s %8.1f ms  (%.1fx onebash)\n' \
        "git clone (local: hardlinks the objects)" "$(calc "$clone * 1000")" "$(calc "$clone / $median")" \
        "git clone --no-local (copies the objects)" "$(calc "$noloc * 1000")" "$(calc "$noloc / $median")" \
        "git worktree add --detach" "$(calc "$wt * 1000")" "$(calc "$wt / $median")" \
        "git archive | tar -x (the files alone)" "$(calc "$archive * 1000")" "$(calc "$archive / $median")"
    printf '    %-52s %8.1f ms\n' "onebash first task: fetch into the cache + checkout" "$(calc "$fetch * 1000")"
    printf '    %-52s %8.1f ms\n' "git clone --bare --no-local (for the fetch)" "$(calc "$bare * 1000")"
    fig "checkout [$label]: onebash ms (median)" "$(calc "round($median * 1000, 1)")" "-" ""
    fig "checkout [$label]: git clone / onebash" "$(calc "round($clone / $median, 1)")x" ">= 5x" \
        "$(calc "'ok' if $clone / $median >= 5 else 'MISS'")"
    fig "checkout [$label]: git clone --no-local / onebash" "$(calc "round($noloc / $median, 1)")x" ">= 5x" \
        "$(calc "'ok' if $noloc / $median >= 5 else 'MISS'")"
    fig "checkout [$label]: worktree add / onebash" "$(calc "round($wt / $median, 2)")x" "-" ""
    fig "checkout [$label]: files alone / onebash" "$(calc "round($archive / $median, 2)")x" "-" \
        "git archive | tar -x: the floor"
    fig "checkout [$label]: first-task fetch s" "$(calc "round($fetch, 2)")" "-" \
        "git clone --bare --no-local $(calc "round($bare, 2)") s"
}

section_checkout() {
    echo "a repo of $co_commits commits over $co_files files; $co_tasks tasks at -j 1 (checkout + 1 model call + \`true\`); in $co_reps rounds, each followed by one of each git way; medians"
    checkout_on disk "$work/co"
    # tmpfs, when /dev/shm is one and is not where the work folder already is.
    if [ -n "$shm_work" ]; then
        checkout_on tmpfs "$shm_work"
    else
        echo "  on tmpfs: skipped (no writable tmpfs at /dev/shm, or the work folder is on one already)"
    fi
}

# The onebash to compare section stores with (see the header).
baseline_bin() {
    if [ -n "${ONEBASH_BASELINE_BIN:-}" ]; then
        echo "$ONEBASH_BASELINE_BIN"
        return
    fi
    built_at "${BENCH_BASELINE:-061c8e7}"
}

# built_at REV: onebash built from git revision REV, once, kept in
# target/bench-baseline.
built_at() {
    local rev=$1 dir=$root/target/bench-baseline
    if [ ! -x "$dir/onebash-$rev" ]; then
        echo "  building the baseline onebash ($rev) in $dir: minutes the first time" >&2
        rm -rf "$dir/src"
        mkdir -p "$dir/src"
        git -C "$root" archive "$rev" | tar -x -C "$dir/src"
        CARGO_TARGET_DIR=$dir/target cargo build --release --quiet --manifest-path "$dir/src/Cargo.toml" >&2
        cp "$dir/target/release/onebash" "$dir/onebash-$rev"
    fi
    echo "$dir/onebash-$rev"
}

# noop_run BIN OUT TASKS CACHE [ARGS...]: a run that only checks out and
# tests; fails when a task does not pass.
noop_run() {
    local program=$1 out=$2 tasks=$3 cache=$4
    shift 4
    if ! "$program" run "$tasks" --model noop --sandbox none -o "$out" --cache-dir "$cache" "$@" \
        > /dev/null 2> "$out.log"; then
        echo "onebash run failed; the end of its log:" >&2
        tail -5 "$out.log" >&2
        return 1
    fi
    local n bad
    read -r n bad < <(tools rows "$out")
    [ "$bad" = 0 ] || { echo "$bad of $n tasks did not pass: see $out/results.csv" >&2; return 1; }
}

section_stores() {
    echo "the checkout section's repo ($co_commits commits over $co_files files); $st_bases tasks at bases spread over it, shuffled, -j 2; against $("$(baseline_bin)" --version) (alternates into the mirror)"
    echo " on the disk:"
    stores_on disk "$work/st"
    # tmpfs too, as the checkout section: this VM's disk slows file
    # creation down by several times after minutes of writes, for both.
    if [ -n "$shm_work" ]; then
        echo " on tmpfs:"
        stores_on tmpfs "$shm_work/st"
    else
        echo "  on tmpfs: skipped (no writable tmpfs at /dev/shm, or the work folder is on one already)"
    fi
}

# stores_on LABEL DIR: the stores comparison with everything in DIR.
stores_on() {
    local label=$1 dir=$2 before repo head r
    before=$(baseline_bin)
    mkdir -p "$dir"
    repo=$dir/long.git
    git init -q --bare -b main "$repo"
    tools gen_repo "$co_commits" "$co_files" | git -C "$repo" fast-import --quiet
    git -C "$repo" repack -adfq
    git -C "$repo" rev-list --reverse main > "$dir/revs"
    head=$(tail -n 1 "$dir/revs")
    tools spread_tasks "$dir/bases.jsonl" "$dir/revs" "$st_bases" "$repo"

    # (1) Disk, after a cold run over every base.
    local t0 cold_new cold_old
    t0=$EPOCHREALTIME
    noop_run "$bin" "$dir/new-cold" "$dir/bases.jsonl" "$dir/cache-new" -j 2
    cold_new=$(calc "$EPOCHREALTIME - $t0")
    t0=$EPOCHREALTIME
    noop_run "$before" "$dir/old-cold" "$dir/bases.jsonl" "$dir/cache-old" -j 2
    cold_old=$(calc "$EPOCHREALTIME - $t0")
    local stores mirror packs
    stores=$(du -sb "$dir/cache-new/stores" | cut -f1)
    mirror=$(du -sb "$dir"/cache-new/repos/*.git | cut -f1)
    packs=$(find "$dir/cache-new/stores" -name '*.pack' | wc -l)
    printf '  cold run over %d bases: %.2f s (before: %.2f s)\n' "$st_bases" "$cold_new" "$cold_old"
    printf '  disk: stores %.2f MiB in %d packs; the mirror %.2f MiB; %.2fx\n' \
        "$(calc "$stores / 2**20")" "$packs" "$(calc "$mirror / 2**20")" "$(calc "$stores / $mirror")"
    fig "stores [$label]: disk for $st_bases bases / mirror" "$(calc "round($stores / $mirror, 2)")x" "<= 2x" \
        "$(calc "'ok' if $stores <= 2 * $mirror else 'MISS'")"

    # (2) Warm checkouts, alternating with the baseline.
    local new_runs=() old_runs=() new_walls=() old_walls=() fetch new_ms old_ms n
    for r in 1 2 3; do
        t0=$EPOCHREALTIME
        noop_run "$bin" "$dir/new-warm-$r" "$dir/bases.jsonl" "$dir/cache-new" -j 2
        new_walls+=("$(calc "$EPOCHREALTIME - $t0")")
        t0=$EPOCHREALTIME
        noop_run "$before" "$dir/old-warm-$r" "$dir/bases.jsonl" "$dir/cache-old" -j 2
        old_walls+=("$(calc "$EPOCHREALTIME - $t0")")
        new_runs+=("$dir/new-warm-$r")
        old_runs+=("$dir/old-warm-$r")
    done
    read -r fetch new_ms n < <(tools checkouts "${new_runs[@]}")
    read -r fetch old_ms n < <(tools checkouts "${old_runs[@]}")
    printf '  warm checkout, median of %d: %.1f ms; before: %.1f ms; %.2fx\n' \
        "$n" "$(calc "$new_ms * 1000")" "$(calc "$old_ms * 1000")" "$(calc "$new_ms / $old_ms")"
    fig "stores [$label]: warm checkout / before" "$(calc "round($new_ms / $old_ms, 2)")x" "<= 1.3x" \
        "$(calc "'ok' if $new_ms <= 1.3 * $old_ms else 'MISS'")"
    # The whole run too: thin packs are fixed once per run, ahead of the
    # checkouts that link them, and that work is not in their durations.
    local new_wall old_wall
    new_wall=$(calc "sorted([${new_walls[*]/%/,}])[1]")
    old_wall=$(calc "sorted([${old_walls[*]/%/,}])[1]")
    printf '  warm run (%d tasks), median of 3: %.2f s; before: %.2f s; %.2fx\n' \
        "$st_bases" "$new_wall" "$old_wall" "$(calc "$new_wall / $old_wall")"

    # (3) The first checkout of a new base: the whole history to pack.
    tools tasks "$dir/head.jsonl" 1 "$repo" "$head" h
    local firsts=() clones=() first clone
    for r in 1 2 3; do
        noop_run "$bin" "$dir/first-none-$r" "$dir/head.jsonl" "$dir/cache-first-$r" --history none
        noop_run "$bin" "$dir/first-$r" "$dir/head.jsonl" "$dir/cache-first-$r"
        read -r fetch first n < <(tools checkouts "$dir/first-$r")
        firsts+=("$first")
        t0=$EPOCHREALTIME
        git clone -q --no-local "$repo" "$dir/clone-$r"
        clones+=("$(calc "$EPOCHREALTIME - $t0")")
    done
    first=$(calc "sorted([${firsts[*]/%/,}])[1]")
    clone=$(calc "sorted([${clones[*]/%/,}])[1]")
    printf '  first checkout of a new base (its store built from the whole history): %.1f ms; git clone --no-local: %.1f ms; %.2fx\n' \
        "$(calc "$first * 1000")" "$(calc "$clone * 1000")" "$(calc "$first / $clone")"
    fig "stores [$label]: first checkout of a new base / git clone --no-local" "$(calc "round($first / $clone, 2)")x" "<= 1x" \
        "$(calc "'ok' if $first <= $clone else 'MISS'")"
}

section_lateness() {
    local before=${ONEBASH_HYGIENE_BIN:-}
    [ -n "$before" ] || before=$(built_at "${BENCH_HYGIENE_BASELINE:-0bbd04a}")
    local dir=$work/late timeout=0.5
    mkdir -p "$dir"
    git init -q --bare -b main "$dir/flat.git"
    tools flat_repo "$late_files" | git -C "$dir/flat.git" fast-import --quiet
    local flat_sha
    flat_sha=$(git -C "$dir/flat.git" rev-parse main)
    # The timers' repo: a file that tells the command to sleep.
    git init -q -b main "$dir/slow"
    touch "$dir/slow/SLOW"
    git -C "$dir/slow" add -A
    git -C "$dir/slow" -c user.name=bench -c user.email=bench@localhost commit -qm slow
    tools tasks "$dir/timers.jsonl" "$late_timers" "$dir/slow" "$(git -C "$dir/slow" rev-parse HEAD)" slow
    tools tasks "$dir/flat.jsonl" "$late_tasks" "$dir/flat.git" "$flat_sha" flat
    cat "$dir/timers.jsonl" "$dir/flat.jsonl" > "$dir/tasks.jsonl"
    local jobs=$((late_tasks + late_timers))
    echo "$late_tasks tasks on a repo of $late_files files ending together, beside $late_timers tasks whose every command hits its ${timeout} s timeout ($late_turns turns), -j $jobs; against $("$before" --version) (before)"
    start_server "$late_turns" 0 "if [ -e SLOW ]; then sleep 5; else true; fi"
    local r program name p50 p99 n new99=() old99=()
    for r in 1 2; do
        for name in new old; do
            program=$bin
            [ "$name" = old ] && program=$before
            if ! "$program" run "$dir/tasks.jsonl" --model bench --base-url "http://127.0.0.1:$port/v1" \
                -j "$jobs" --max-turns $((late_turns + 1)) --command-timeout "$timeout" --sandbox none \
                -o "$dir/$name-$r" --cache-dir "$dir/cache-$name" > /dev/null 2> "$dir/$name-$r.log"; then
                echo "onebash run failed; the end of its log:" >&2
                tail -5 "$dir/$name-$r.log" >&2
                return 1
            fi
            read -r p50 p99 n < <(tools lateness "$dir/$name-$r" "$timeout")
            printf '  round %d, %s: %d timeouts, late by p50 %.1f ms, p99 %.1f ms\n' \
                "$r" "$name" "$n" "$(calc "$p50 * 1000")" "$(calc "$p99 * 1000")"
            if [ "$name" = new ]; then new99+=("$p99"); else old99+=("$p99"); fi
        done
    done
    stop_server
    local worst_new worst_old
    worst_new=$(calc "max([${new99[*]/%/,}])")
    worst_old=$(calc "max([${old99[*]/%/,}])")
    printf '  p99 lateness, worse round: %.1f ms; before: %.1f ms\n' \
        "$(calc "$worst_new * 1000")" "$(calc "$worst_old * 1000")"
    fig "lateness: p99 of command timeouts, -j $jobs" "$(calc "round($worst_new * 1000, 1)") ms" "<= 50 ms" \
        "$(calc "'ok' if $worst_new <= 0.05 else 'MISS'")"
    fig "lateness: p99 before" "$(calc "round($worst_old * 1000, 1)") ms"
}

section_memory() {
    tools tasks "$work/mem.jsonl" 64 "$work/repo" "$sha"
    echo "$mem_turns-turn trajectories, zero latency, --sandbox none; onebash's peak RSS (run.json peak_rss_bytes)"
    local spec tasks jobs peak mib first="" first_jobs="" out
    for spec in $mem_runs; do
        tasks=${spec%:*} jobs=${spec#*:}
        head -n "$tasks" "$work/mem.jsonl" > "$work/mem-$tasks.jsonl"
        out=$work/mem-$tasks-$jobs
        start_server "$mem_turns"
        onebash "$out" "$work/mem-$tasks.jsonl" "$jobs" $((mem_turns + 1)) none
        stop_server
        peak=$(tools peak_rss "$out")
        if [ "$peak" = none ]; then
            echo "  $tasks tasks at -j $jobs: run.json has no peak_rss_bytes"
            fig "peak RSS, $tasks tasks at -j $jobs" "n/a" "-" "not in run.json"
            continue
        fi
        mib=$(calc "round($peak / 2**20, 1)")
        printf '  %3d tasks at -j %-3d %6d calls in %6.2f s: peak RSS %7.1f MiB\n' "$tasks" "$jobs" "$requests" "$wall" "$mib"
        if [ -z "$first" ]; then
            first=$mib first_jobs=$jobs
            fig "peak RSS MiB, $tasks tasks at -j $jobs" "$mib" "-" ""
        elif [ "$jobs" = "$first_jobs" ]; then
            # Same -j as the first run, more finished tasks: must not grow.
            fig "peak RSS MiB, $tasks tasks at -j $jobs" "$mib" "<= 1.2x $first" \
                "$(calc "'ok (%.2fx)' % ($mib / $first) if $mib <= 1.2 * $first else 'MISS (%.2fx)' % ($mib / $first)")"
        else
            fig "peak RSS MiB, $tasks tasks at -j $jobs" "$mib" "-" ""
        fi
    done
}

# machine_ticks: the whole machine's busy CPU time so far, in USER_HZ ticks
# (/proc/stat's first line: user + nice + system + irq + softirq + steal;
# guest time is counted inside user). Every process's, the engine's too.
machine_ticks() {
    local _ user nice system idle iowait irq softirq steal
    read -r _ user nice system idle iowait irq softirq steal _ < /proc/stat
    echo $((user + nice + system + irq + softirq + steal))
}

# ct_run OUT TASKS JOBS TURNS MODE: one run of section containers against
# the server, MODE exec or channel (--env podman with that
# --container-commands), bwrap (--sandbox bwrap on the host) or oci
# (--env oci of the saved image); sets $wall, $cpu (the machine's busy CPU
# seconds over the run) and $load (the 1-minute load average after it).
ct_run() {
    local out=$1 mode=$5 extra=() t0 c0 t1 c1 n bad
    case $mode in
        exec | channel) extra=(--env podman --image "$ct_image" --pull never --container-commands "$mode") ;;
        bwrap) extra=(--sandbox bwrap) ;;
        oci) extra=(--env oci --image "docker-archive:$ct_archive") ;;
    esac
    c0=$(machine_ticks)
    t0=$EPOCHREALTIME
    if ! "$bin" run "$2" --model bench --base-url "http://127.0.0.1:$port/v1" \
        -j "$3" --max-turns $(($4 + 1)) "${extra[@]}" -o "$out" --cache-dir "$ct_cache" \
        > /dev/null 2> "$out.log"; then
        echo "onebash run failed ($mode); the end of its log:" >&2
        tail -5 "$out.log" >&2
        return 1
    fi
    t1=$EPOCHREALTIME
    c1=$(machine_ticks)
    wall=$(calc "$t1 - $t0")
    cpu=$(calc "($c1 - $c0) / $ct_hz")
    load=$(cut -d' ' -f1 /proc/loadavg)
    read -r n bad < <(tools rows "$out")
    if [ "$bad" != 0 ]; then
        echo "$bad of $n tasks did not pass ($mode): see $out/results.csv" >&2
        return 1
    fi
}

section_containers() {
    ct_image=${BENCH_IMAGE:-onebash-test/base:bookworm}
    if ! command -v podman > /dev/null || ! podman image exists "$ct_image" 2> /dev/null; then
        echo "  skipped: podman or the image $ct_image is not here (scripts/test-images.sh builds it)"
        local why="no podman or image $ct_image"
        fig "containers: channel / host bwrap per command" "skipped" "<= 3x" "$why"
        fig "containers: bare podman exec / channel per command" "skipped" ">= 5x" "$why"
        fig "containers: calls/s at -j 16, channel / exec" "skipped" ">= 3x" "$why"
        return 0
    fi
    local dir=$work/ct r mode j tasks n cmd out t_part
    mkdir -p "$dir"
    ct_cache=$dir/cache ct_hz=$(getconf CLK_TCK)
    local cores
    cores=$(nproc)
    declare -A ms_of cpu_of busy_of load_of
    local modes="exec channel"
    if bwrap_works; then
        ct_archive=$dir/base.tar
        podman save -q --format docker-archive -o "$ct_archive" "$ct_image"
        modes="exec channel bwrap oci"
    else
        echo "  (bwrap is absent or does not work here: no host bwrap and no --env oci beside the containers)"
    fi

    # (1) Per command, -j 1.
    t_part=$EPOCHREALTIME
    tools tasks "$dir/tasks.jsonl" "$ct_tasks" "$work/repo" "$sha" ct
    tools tasks "$dir/one.jsonl" 1 "$work/repo" "$sha" warm
    echo "(1) per command: $ct_tasks tasks x $ct_turns turns of \`true\`, zero model latency, -j 1, 2 rounds alternating: --env podman ($ct_image) --container-commands exec, then channel$([[ $modes == *bwrap* ]] && echo ", --sandbox bwrap on the host, --env oci (the image saved)"); and $ct_execs bare \`podman exec C bash -c true\` (mini-swe-agent's way) into a container started with \`podman run -d\`"
    # Warm-up, untimed: the repo cache, the page cache and (oci) the image unpacked.
    start_server 1 0 true
    for mode in $modes; do ct_run "$dir/warm-$mode" "$dir/one.jsonl" 1 1 "$mode"; done
    stop_server
    start_server "$ct_turns" 0 true
    for r in 1 2; do
        for mode in $modes; do
            ct_run "$dir/$mode-$r" "$dir/tasks.jsonl" 1 "$ct_turns" "$mode"
            cpu_of[$mode]=$(calc "${cpu_of[$mode]:-0} + $cpu")
            busy_of[$mode]=$(calc "${busy_of[$mode]:-0} + $wall")
            load_of[$mode]="${load_of[$mode]:-}${load_of[$mode]:+ }$load"
        done
    done
    stop_server
    local outside=""
    for mode in $modes; do
        read -r cmd out n < <(tools commands "$dir/$mode-1" "$dir/$mode-2")
        ms_of[$mode]=$(calc "round($cmd * 1000, 1)")
        busy_of[$mode]=$(calc "round(100 * ${cpu_of[$mode]} / ${busy_of[$mode]} / $cores)")
        cpu_of[$mode]=$(calc "round(${cpu_of[$mode]} / $n * 1000, 1)")
        outside="$outside, $mode $(calc "round($out, 2)") s"
    done
    # The peer's way: one exec per command into a running container.
    local cid c0 t0 c1 t1 raw
    cid=$(podman run -d --network none --entrypoint sleep "$ct_image" infinity)
    c0=$(machine_ticks)
    t0=$EPOCHREALTIME
    raw=$(tools exec_loop podman "$cid" "$ct_execs")
    t1=$EPOCHREALTIME
    c1=$(machine_ticks)
    cpu=$(calc "($c1 - $c0) / $ct_hz")
    busy_of[bare]=$(calc "round(100 * $cpu / ($t1 - $t0) / $cores)")
    cpu_of[bare]=$(calc "round($cpu / $ct_execs * 1000, 1)")
    load_of[bare]=$(cut -d' ' -f1 /proc/loadavg)
    podman rm -f -t 0 "$cid" > /dev/null
    ms_of[bare]=$(calc "round($raw * 1000, 1)")
    echo "  per command: wall ms (median of the trajectories' command durations; the bare exec's timed from Python), and machine CPU ms per model turn"
    echo "  (the whole machine's busy CPU over the runs, /proc/stat, every process: onebash, the podman client, conmon, runc, bash, and the other"
    echo "  load of this shared machine; divided by the commands run, so it holds a model call, whose share is the same in every mode, and each"
    echo "  task's start, tests and teardown spread over its $ct_turns commands; the bare exec has no model call and no task around it)."
    echo "  busy: the machine's busy CPU over the runs' wall time x $cores cores; near 100% the CPU figure is the wall time x cores, not a cost"
    printf '    %-28s %9s %11s %5s  %s\n' "way" "wall ms" "CPU ms/turn" "busy" "1-min load after each run"
    local label
    for mode in exec channel bare bwrap oci; do
        [ -n "${ms_of[$mode]:-}" ] || continue
        case $mode in
            exec) label="--container-commands exec" ;;
            channel) label="--container-commands channel" ;;
            bare) label="bare podman exec" ;;
            bwrap) label="host --sandbox bwrap" ;;
            oci) label="--env oci" ;;
        esac
        printf '    %-28s %9s %11s %4s%%  %s\n' "$label" "${ms_of[$mode]}" "${cpu_of[$mode]}" "${busy_of[$mode]}" "${load_of[$mode]}"
        fig "containers: ms per command, $label" "${ms_of[$mode]}" "-" "machine CPU ${cpu_of[$mode]} ms/turn (busy ${busy_of[$mode]}%)"
    done
    echo "  per task outside model calls and commands (container start, tests, teardown):${outside#,}"
    printf '  (1) took %.0f s\n' "$(calc "$EPOCHREALTIME - $t_part")"

    # (2) Model calls per second, each task 40 commands in its own container.
    t_part=$EPOCHREALTIME
    local rate exec_rate ratio
    declare -A rate_of
    echo "(2) model calls/s: tasks of $ct_tp_turns turns of \`true\` (+1 final answer each), each in its own container, zero latency; calls the server answered / the run's wall time"
    for j in $ct_tp_jobs; do
        tasks=$((j > ct_tp_min ? j : ct_tp_min))
        tools tasks "$dir/tp-$tasks.jsonl" "$tasks" "$work/repo" "$sha" tp
        for mode in exec channel; do
            start_server "$ct_tp_turns"
            ct_run "$dir/tp-$mode-$j" "$dir/tp-$tasks.jsonl" "$j" "$ct_tp_turns" "$mode"
            stop_server
            rate=$(calc "round($requests / $wall, 1)")
            rate_of[$mode-$j]=$rate
            printf '  -j %-3s %-8s %2d tasks, %5d calls in %6.1f s: %6.1f calls/s; machine CPU %6.1f ms per call (busy %3.0f%%); load %s\n' \
                "$j" "$mode" "$tasks" "$requests" "$wall" "$rate" "$(calc "$cpu / $requests * 1000")" \
                "$(calc "100 * $cpu / $wall / $cores")" "$load"
        done
        ratio=$(calc "round(${rate_of[channel-$j]} / ${rate_of[exec-$j]}, 2)")
        echo "  -j $j channel / exec: ${ratio}x"
        fig "containers: model calls/s at -j $j, channel" "${rate_of[channel-$j]}" "-" "exec ${rate_of[exec-$j]}: ${ratio}x"
    done
    printf '  (2) took %.0f s\n' "$(calc "$EPOCHREALTIME - $t_part")"

    # (3) The issue's targets.
    if [ -n "${ms_of[bwrap]:-}" ]; then
        ratio=$(calc "round(${ms_of[channel]} / ${ms_of[bwrap]}, 2)")
        fig "containers: channel / host bwrap per command" "${ratio}x" "<= 3x" \
            "$(calc "'ok' if $ratio <= 3 else 'MISS'")"
    else
        fig "containers: channel / host bwrap per command" "skipped" "<= 3x" "bwrap absent"
    fi
    ratio=$(calc "round(${ms_of[bare]} / ${ms_of[channel]}, 2)")
    fig "containers: bare podman exec / channel per command" "${ratio}x" ">= 5x" \
        "$(calc "'ok' if $ratio >= 5 else 'MISS'")"
    # At the most jobs measured: -j 16 at full size.
    ratio=$(calc "round(${rate_of[channel-$j]} / ${rate_of[exec-$j]}, 2)")
    fig "containers: calls/s at -j $j, channel / exec" "${ratio}x" ">= 3x" \
        "$(calc "'ok' if $ratio >= 3 else 'MISS'")"
}

section_caching() {
    local dir=$work/caching command="seq 1000 1250"
    mkdir -p "$dir"
    tools tasks "$dir/tasks.jsonl" 1 "$work/repo" "$sha" cache
    echo "1 task x $cache_turns turns of \`$command\` (~1 KB each) against a server that bills like Anthropic; claude-sonnet-4-5's list price"
    rm -f "$work/port"
    python3 scripts/bench_anthropic_server.py "$cache_turns" "$command" "$work/port" &
    server=$!
    echo "$server" >> "$work/servers"
    while [ ! -s "$work/port" ]; do sleep 0.05; done
    port=$(cat "$work/port")
    # run OUT [ARGS]: sets $cost $prompt $read $written.
    run() {
        local out=$1 status
        shift
        if ! "$bin" run "$dir/tasks.jsonl" --provider anthropic --model claude-sonnet-4-5 \
            --base-url "http://127.0.0.1:$port" --max-turns $((cache_turns + 1)) --sandbox none \
            -o "$out" --cache-dir "$work/cache" "$@" > /dev/null 2> "$out.log"; then
            echo "onebash run failed; the end of its log:" >&2
            tail -5 "$out.log" >&2
            return 1
        fi
        read -r cost prompt read written status < <(tools cost "$out")
        [ "$status" = passed ] || { echo "the task did not pass: see $out/results.csv" >&2; return 1; }
    }
    run "$dir/cached"
    local c_cost=$cost c_read=$read c_written=$written
    run "$dir/plain" --no-prompt-cache
    local p_cost=$cost
    kill -TERM "$server"
    wait "$server" 2>/dev/null || true
    sed -i "/^$server\$/d" "$work/servers"
    local ratio
    ratio=$(calc "round($c_cost / $p_cost, 3)")
    printf '  %d input tokens in all; with caching %d read from the cache and %d written\n' "$prompt" "$c_read" "$c_written"
    printf '  cost with caching %.6f USD, without %.6f USD: %.3f of the cost (%.1fx cheaper)\n' \
        "$c_cost" "$p_cost" "$ratio" "$(calc "$p_cost / $c_cost")"
    fig "caching: cost with / without, $cache_turns turns" "$ratio" "-" "$c_cost vs $p_cost USD"
}

section_oci() {
    local image=${BENCH_IMAGE:-onebash-test/base:bookworm}
    if ! command -v podman > /dev/null || ! podman image exists "$image" 2> /dev/null || ! bwrap_works; then
        echo "  skipped: podman (to save the image $image), the image or a working bwrap is not here"
        fig "oci: oci command / bwrap command" "skipped" "<= 1.5x" "no podman, image or bwrap"
        return 0
    fi
    local dir=$work/oci r mode out runs_oci=() runs_bwrap=()
    mkdir -p "$dir"
    podman save -q --format docker-archive -o "$dir/base.tar" "$image"
    tools tasks "$dir/tasks.jsonl" "$ct_tasks" "$work/repo" "$sha" oci
    tools tasks "$dir/one.jsonl" 1 "$work/repo" "$sha" one
    echo "$ct_tasks tasks x $ct_turns turns of \`true\`, zero model latency, -j 1, --env oci ($image, saved) against --sandbox bwrap; 2 rounds alternating"
    start_server "$ct_turns" 0 true
    # Making the image ready: cold (an empty cache), then warm.
    local cold warm
    for mode in cold warm; do
        out=$dir/$mode
        [ "$mode" = cold ] && rm -rf "$dir/cache"
        local t0=$EPOCHREALTIME
        "$bin" run "$dir/one.jsonl" --model noop --env oci --image "docker-archive:$dir/base.tar" \
            -o "$out" --cache-dir "$dir/cache" > /dev/null 2> "$out.log" || { tail -5 "$out.log" >&2; return 1; }
        printf -v "$mode" '%s' "$(calc "$EPOCHREALTIME - $t0")"
    done
    for r in 1 2; do
        for mode in oci bwrap; do
            out=$dir/$mode-$r
            local extra=(--sandbox bwrap)
            [ "$mode" = oci ] && extra=(--env oci --image "docker-archive:$dir/base.tar")
            if ! "$bin" run "$dir/tasks.jsonl" --model bench --base-url "http://127.0.0.1:$port/v1" \
                -j 1 --max-turns $((ct_turns + 1)) "${extra[@]}" -o "$out" --cache-dir "$dir/cache" \
                > /dev/null 2> "$out.log"; then
                echo "onebash run failed; the end of its log:" >&2
                tail -5 "$out.log" >&2
                return 1
            fi
            if [ "$mode" = oci ]; then runs_oci+=("$out"); else runs_bwrap+=("$out"); fi
        done
    done
    stop_server
    local o_cmd o_out n b_cmd b_out ratio
    read -r o_cmd o_out n < <(tools commands "${runs_oci[@]}")
    read -r b_cmd b_out n < <(tools commands "${runs_bwrap[@]}")
    ratio=$(calc "round($o_cmd / $b_cmd, 2)")
    printf '  per command, median of %d: oci %.1f ms, host bwrap %.1f ms (%.2fx)\n' \
        "$n" "$(calc "$o_cmd * 1000")" "$(calc "$b_cmd * 1000")" "$ratio"
    printf '  per task outside model calls and commands (enter, tests, teardown): oci %.3f s, host bwrap %.3f s\n' "$o_out" "$b_out"
    printf '  one task with --model noop: %.2f s with a cold layer cache (unpacking the image), %.2f s warm\n' "$cold" "$warm"
    fig "oci: ms per command, --env oci" "$(calc "round($o_cmd * 1000, 1)")" "-" "host bwrap $(calc "round($b_cmd * 1000, 1)")"
    fig "oci: oci command / bwrap command" "${ratio}x" "<= 1.5x" "$(calc "'ok' if $ratio <= 1.5 else 'MISS'")"
    fig "oci: s per task outside commands" "$(calc "round($o_out, 3)")" "-" "host bwrap $(calc "round($b_out, 3)")"
    fig "oci: s to make the image ready, cold" "$(calc "round($cold, 2)")" "-" "warm run $(calc "round($warm, 2)") s"

    # Disk: $oci_images images on one base, each with a small layer of its own.
    local layers_bytes total layers_du roots_du ready
    layers_bytes=$(tools oci_images "$dir/base.tar" "$dir/layout" "$oci_images" 256)
    tools image_tasks "$dir/images.jsonl" "$oci_images" "$work/repo" "$sha" "$dir/layout"
    rm -rf "$dir/cache-n"
    local t0=$EPOCHREALTIME
    "$bin" run "$dir/images.jsonl" --model noop --env oci -j 2 -o "$dir/images" --cache-dir "$dir/cache-n" \
        > /dev/null 2> "$dir/images.log" || { tail -5 "$dir/images.log" >&2; return 1; }
    ready=$(calc "$EPOCHREALTIME - $t0")
    read -r n bad < <(tools rows "$dir/images")
    [ "$bad" = 0 ] || { echo "$bad of $n tasks did not pass" >&2; return 1; }
    total=$(du -s --block-size=1 "$dir/cache-n/oci" | cut -f1)
    layers_du=$(du -s --block-size=1 "$dir/cache-n/oci/layers" | cut -f1)
    roots_du=$(calc "$total - $layers_du")
    ratio=$(calc "round($total / $layers_bytes, 3)")
    printf '  %d images sharing a base layer: %.1f MB on disk in <cache>/oci (du, links once), the distinct layers %.1f MB (%.3fx); unpacked layers %.1f MB, the images'"'"' roots %.1f MB (%.2f MB each); all made ready and run (noop, -j 2) in %.1f s\n' \
        "$oci_images" "$(calc "$total / 1e6")" "$(calc "$layers_bytes / 1e6")" "$ratio" "$(calc "$layers_du / 1e6")" \
        "$(calc "$roots_du / 1e6")" "$(calc "$roots_du / 1e6 / $oci_images")" "$ready"
    fig "oci: disk of $oci_images images / their distinct layers" "${ratio}x" "<= 1.2x" "$(calc "'ok' if $ratio <= 1.2 else 'MISS'")"
    fig "oci: MB of roots per image" "$(calc "round($roots_du / 1e6 / $oci_images, 2)")" "-" ""
}

section_datasets() {
    local python=${ONEBASH_HF_PYTHON:-python3} dir=$work/ds
    if ! "$python" -c "import pyarrow.parquet" > /dev/null 2>&1; then
        echo "  skipped: no python with pyarrow ($python; .ci/run makes one, or point ONEBASH_HF_PYTHON at one)"
        fig "datasets: hf cache / JSONL, wall time" "skipped" "-" "no pyarrow"
        return 0
    fi
    mkdir -p "$dir/hub"
    local rows text mean jsonl_mb parquet_mb groups
    read -r rows text mean jsonl_mb parquet_mb groups <<< "$("$python" "$work/tools.py" swe_dataset "$dir/rows.jsonl" "$dir/hub")"
    echo "$rows SWE-bench-shaped rows, $text MB of text ($mean KB a row): JSONL $jsonl_mb MB, parquet $parquet_mb MB (snappy, $groups row groups); \`run --dry-run -m noop --sandbox none\` of hf:bench/swe-bench from the cache (HF_HUB_OFFLINE=1) against the JSONL, 3 rounds alternating"
    python3 scripts/bench_hub_server.py "$dir/hub" bench/swe-bench > "$dir/hub.log" &
    local hub=$!
    echo "$hub" >> "$work/servers"
    while [ ! -s "$dir/hub.log" ]; do sleep 0.05; done
    # The Hub's log: its port, then a line per request.
    local port
    port=$(head -n 1 "$dir/hub.log")
    # Every run sees the bench's Hub, so a request the cached runs made
    # would be counted, not sent to huggingface.co.
    local hf_env=(env -u HF_TOKEN -u HF_TOKEN_PATH -u HF_HUB_OFFLINE "HF_ENDPOINT=http://127.0.0.1:$port" "HF_HOME=$dir/hf-home")
    local flags=(-m noop --sandbox none --dry-run --cache-dir "$dir/cache" -o "$dir/never")
    # measure LOG SOURCE [ARGS]: a dry run of SOURCE, offline; sets $wall,
    # $rss and $cpu.
    measure() {
        local log=$1 source=$2 out
        shift 2
        out=$("${hf_env[@]}" HF_HUB_OFFLINE=1 python3 "$work/tools.py" rusage "$log" "$bin" run "$source" "${flags[@]}" "$@")
        read -r wall rss cpu <<< "$out"
        grep -q "^tasks: *$rows tasks" "$log" || [ $# != 0 ] || { echo "the dry run of $source did not plan $rows tasks: see $log" >&2; return 1; }
    }
    local out fill filled
    out=$("${hf_env[@]}" python3 "$work/tools.py" rusage "$dir/fill.log" "$bin" run hf:bench/swe-bench:test "${flags[@]}")
    fill=${out%% *}
    filled=$(($(wc -l < "$dir/hub.log") - 1))
    printf '  filling the cache (untimed): %d requests to the Hub, %.2f s\n' "$filled" "$fill"
    local r wall rss cpu hf_walls=() hf_rss=() hf_cpu=() js_walls=() js_rss=() js_cpu=()
    for r in 1 2 3; do
        measure "$dir/hf-$r.log" hf:bench/swe-bench:test
        hf_walls+=("$wall") hf_rss+=("$rss") hf_cpu+=("$cpu")
        measure "$dir/jsonl-$r.log" "$dir/rows.jsonl"
        js_walls+=("$wall") js_rss+=("$rss") js_cpu+=("$cpu")
        printf '  round %d: hf (cached) %.3f s (CPU %.3f s), %.1f MiB; JSONL %.3f s (CPU %.3f s), %.1f MiB\n' "$r" \
            "${hf_walls[-1]}" "${hf_cpu[-1]}" "$(calc "${hf_rss[-1]} / 2**20")" \
            "${js_walls[-1]}" "${js_cpu[-1]}" "$(calc "${js_rss[-1]} / 2**20")"
    done
    # Where the time goes: the same with one task selected. Every row is
    # still read and made a task; only the selected one goes through the
    # run's later checks (its prompt rendered, its recipe looked up).
    local hf_one js_one
    measure "$dir/hf-limit.log" hf:bench/swe-bench:test --limit 1
    hf_one=$wall
    measure "$dir/jsonl-limit.log" "$dir/rows.jsonl" --limit 1
    js_one=$wall
    # Every request after the fill: the cached runs' (0 expected).
    local requests=$(($(wc -l < "$dir/hub.log") - 1 - filled))
    kill -TERM "$hub"
    wait "$hub" 2>/dev/null || true
    sed -i "/^$hub\$/d" "$work/servers"
    local hf_s js_s hf_c js_c hf_mib js_mib ratio
    hf_s=$(calc "sorted([${hf_walls[*]/%/,}])[1]")
    js_s=$(calc "sorted([${js_walls[*]/%/,}])[1]")
    hf_c=$(calc "sorted([${hf_cpu[*]/%/,}])[1]")
    js_c=$(calc "sorted([${js_cpu[*]/%/,}])[1]")
    hf_mib=$(calc "round(max([${hf_rss[*]/%/,}]) / 2**20, 1)")
    js_mib=$(calc "round(max([${js_rss[*]/%/,}]) / 2**20, 1)")
    ratio=$(calc "round($hf_s / $js_s, 2)")
    printf '  median of 3: hf (cached) %.3f s, JSONL %.3f s: %.2fx (CPU time %.3f s and %.3f s: %.2fx); peak RSS %.1f MiB and %.1f MiB; %d requests to the Hub in the cached runs\n' \
        "$hf_s" "$js_s" "$ratio" "$hf_c" "$js_c" "$(calc "$hf_c / $js_c")" "$hf_mib" "$js_mib" "$requests"
    printf '  with --limit 1 (every row read and made a task, one checked further): hf %.3f s, JSONL %.3f s\n' "$hf_one" "$js_one"
    fig "datasets: s to plan $rows rows, hf: from the cache" "$(calc "round($hf_s, 3)")" "-" "median of 3"
    fig "datasets: s to plan $rows rows, JSONL" "$(calc "round($js_s, 3)")" "-" "median of 3"
    fig "datasets: hf cache / JSONL, wall time" "${ratio}x" "-" "CPU time $(calc "round($hf_c / $js_c, 2)")x"
    fig "datasets: peak RSS MiB, hf: from the cache" "$hf_mib" "-" "JSONL $js_mib"
    fig "datasets: Hub requests of the cached runs" "$requests" "0" "$([ "$requests" = 0 ] && echo ok || echo MISS)"
}

section_regrade() {
    local dir=$work/regrade model label
    mkdir -p "$dir"
    tools predictions "$dir/tasks.jsonl" "$dir/preds.jsonl" "$regrade_tasks" "$work/repo" "$sha"
    if "$bin" run "$dir/tasks.jsonl" -m "predictions:$dir/preds.jsonl" --env host --sandbox none \
        --dry-run -o "$dir/never" --cache-dir "$work/cache" > "$dir/dry-run.log" 2>&1; then
        model=(-m "predictions:$dir/preds.jsonl") label="-m predictions:FILE"
    else
        model=(-m oracle) label="-m oracle"
        echo "  this onebash has no -m predictions:FILE: the live run is -m oracle with the same patches as gold_patch"
    fi
    echo "$regrade_tasks predictions, a quick test command each; live: \`run $label --env host --sandbox none -j $(nproc)\`; from saved logs: \`regrade\`"
    local out live_s live_rss live_cpu re_s re_rss re_cpu in_s in_rss in_cpu
    out=$(python3 "$work/tools.py" rusage "$dir/live.log" "$bin" run "$dir/tasks.jsonl" "${model[@]}" \
        --env host --sandbox none -j "$(nproc)" -o "$dir/live" --cache-dir "$work/cache")
    read -r live_s live_rss live_cpu <<< "$out"
    read -r n bad < <(tools rows "$dir/live")
    [ "$bad" = 0 ] || { echo "$bad of $n live rows did not pass: see $dir/live/results.csv" >&2; return 1; }
    out=$(python3 "$work/tools.py" rusage "$dir/regrade.log" "$bin" regrade "$dir/live" -o "$dir/regraded")
    read -r re_s re_rss re_cpu <<< "$out"
    grep -q "^regraded $n of $n rows" "$dir/regrade.log" || { echo "regrade did not grade every row: see $dir/regrade.log" >&2; return 1; }
    # In place, under the other rules: the rewrite by rename and the backup too.
    out=$(python3 "$work/tools.py" rusage "$dir/in-place.log" "$bin" regrade "$dir/regraded" --grading swebench-5.0)
    read -r in_s in_rss in_cpu <<< "$out"
    local ratio
    ratio=$(calc "round($live_s / $re_s, 1)")
    printf '  live:             %7.3f s (CPU %.3f s), peak RSS %6.1f MiB\n' "$live_s" "$live_cpu" "$(calc "$live_rss / 2**20")"
    printf '  regrade -o:       %7.3f s (CPU %.3f s), peak RSS %6.1f MiB: %sx faster than live\n' "$re_s" "$re_cpu" "$(calc "$re_rss / 2**20")" "$ratio"
    printf '  regrade in place: %7.3f s (CPU %.3f s), peak RSS %6.1f MiB (--grading swebench-5.0)\n' "$in_s" "$in_cpu" "$(calc "$in_rss / 2**20")"
    fig "regrade: s to grade $n predictions live" "$(calc "round($live_s, 3)")" "-" "$label"
    fig "regrade: s to regrade them from saved logs" "$(calc "round($re_s, 3)")" "-" "in place $(calc "round($in_s, 3)") s"
    fig "regrade: live / regrade, wall time" "${ratio}x" "-" ""
    fig "regrade: peak RSS MiB, live / regrade" "$(calc "round($live_rss / 2**20, 1)") / $(calc "round($re_rss / 2**20, 1)")" "-" ""
}

# The venv of mini-swe-agent for section minisweagent: made once, reused.
msa_venv() {
    local venv=${BENCH_VENVS:-$root/target/bench-venvs}/mini-swe-agent-$msa_version
    if ! "$venv/bin/python" -c "import minisweagent, sys; sys.exit(minisweagent.__version__ != '$msa_version')" > /dev/null 2>&1; then
        echo "  installing mini-swe-agent==$msa_version from PyPI into $venv (once)" >&2
        rm -rf "$venv"
        python3 -m venv "$venv"
        "$venv/bin/python" -m pip install -q --disable-pip-version-check "mini-swe-agent==$msa_version" >&2
    fi
    echo "$venv"
}

section_minisweagent() {
    local venv dir=$work/msa
    venv=$(msa_venv)
    mkdir -p "$dir/data" "$dir/hf" "$dir/config"
    # mini-swe-agent's batch mode reads a dataset folder: a split is a file.
    python3 -c "
import json, sys
with open(sys.argv[1], 'w') as f:
    for i in range(int(sys.argv[2])):
        f.write(json.dumps({'instance_id': f'm{i:03d}', 'problem_statement': 'bench', 'repo': 'bench', 'base_commit': '$sha'}) + '\n')
" "$dir/data/test.jsonl" "$msa_tasks"
    # Its commands run in one folder (local environment: no checkout).
    git clone -q "$work/repo" "$dir/repo"
    tools tasks "$dir/tasks.jsonl" "$msa_tasks" "$work/repo" "$sha" o
    local config=$venv/lib/python3*/site-packages/minisweagent/config/benchmarks/swebench.yaml
    config=$(echo $config)
    local calls=$((msa_tasks * (msa_turns + 1)))
    echo "$msa_tasks tasks x $((msa_turns + 1)) model calls ($msa_turns of \`true\`, then the end), zero latency, -j $msa_jobs; mini-swe-agent $msa_version (\`mini-extra swebench\`, local environment, litellm's openai/ model at the bench server) against onebash (--sandbox none); model calls/s over the server's span (first request to last answer), $msa_rounds rounds alternating"
    local r o_rate m_rate o_rates=() m_rates=() ratios=() o_wall m_wall m_t0
    # An untimed run fills onebash's repo cache and the page cache.
    start_server 1
    onebash "$dir/onebash-warm" "$dir/tasks.jsonl" "$msa_jobs" 2 none
    stop_server
    for r in $(seq "$msa_rounds"); do
        start_server "$msa_turns"
        onebash "$dir/onebash-$r" "$dir/tasks.jsonl" "$msa_jobs" $((msa_turns + 1)) none
        stop_server
        [ "$requests" = "$calls" ] || { echo "onebash made $requests model calls, not $calls" >&2; return 1; }
        o_rate=$(calc "round($requests / $span_seconds, 1)") o_wall=$wall
        # The last answer runs mini-swe-agent's submit command.
        start_server "$msa_turns" 0 true "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
        m_t0=$EPOCHREALTIME
        if ! env MSWEA_SILENT_STARTUP=1 MSWEA_COST_TRACKING=ignore_errors MSWEA_GLOBAL_CONFIG_DIR="$dir/config" \
            LITELLM_LOCAL_MODEL_COST_MAP=True HF_HOME="$dir/hf" HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 \
            "$venv/bin/mini-extra" swebench --subset "$dir/data" --split test -w "$msa_jobs" -o "$dir/out-$r" \
            -c "$config" -c environment.environment_class=local -c "environment.cwd=$dir/repo" \
            -c model.model_name=openai/bench -c "model.model_kwargs.api_base=http://127.0.0.1:$port/v1" \
            -c model.model_kwargs.api_key=bench > "$dir/msa-$r.log" 2>&1; then
            stop_server
            echo "mini-swe-agent failed; the end of its log:" >&2
            tail -5 "$dir/msa-$r.log" >&2
            return 1
        fi
        m_wall=$(calc "$EPOCHREALTIME - $m_t0")
        stop_server
        # A task whose model call failed still ends (exit status the error).
        local submitted
        submitted=$(python3 -c "
import glob, json, sys
print(sum(json.load(open(p))['info']['exit_status'] == 'Submitted' for p in glob.glob(sys.argv[1] + '/*/*.traj.json')))
" "$dir/out-$r")
        [ "$requests" = "$calls" ] && [ "$submitted" = "$msa_tasks" ] \
            || { echo "mini-swe-agent made $requests model calls (not $calls), $submitted of $msa_tasks tasks submitted: see $dir/msa-$r.log" >&2; return 1; }
        m_rate=$(calc "round($requests / $span_seconds, 1)")
        o_rates+=("$o_rate") m_rates+=("$m_rate") ratios+=("$(calc "round($o_rate / $m_rate, 2)")")
        printf '  round %d: onebash %7.1f calls/s (run %.2f s), mini-swe-agent %6.1f calls/s (run %.2f s): %.2fx; load %s\n' \
            "$r" "$o_rate" "$o_wall" "$m_rate" "$m_wall" "${ratios[-1]}" "$(cut -d' ' -f1 /proc/loadavg)"
    done
    local med="sorted([%s])[len([%s]) // 2]" o m x
    o=$(calc "$(printf "$med" "${o_rates[*]/%/,}" "${o_rates[*]/%/,}")")
    m=$(calc "$(printf "$med" "${m_rates[*]/%/,}" "${m_rates[*]/%/,}")")
    x=$(calc "$(printf "$med" "${ratios[*]/%/,}" "${ratios[*]/%/,}")")
    echo "  median: onebash $o calls/s, mini-swe-agent $m calls/s: ${x}x (rounds: ${ratios[*]/%/x})"
    fig "vs mini-swe-agent: onebash model calls/s, -j $msa_jobs" "$o" "-" "median of $msa_rounds"
    fig "vs mini-swe-agent: mini-swe-agent model calls/s" "$m" "-" "median of $msa_rounds"
    fig "vs mini-swe-agent: onebash / mini-swe-agent" "${x}x" ">= 10x" "$(calc "'ok' if $x >= 10 else 'MISS'")"
}

# The checkout, latency and stores sections also run on tmpfs, when /dev/shm is one
# and the work folder is not on one already. Made here so that the exit trap
# removes it.
if [[ " $sections " == *" checkout "* || " $sections " == *" latency "* || " $sections " == *" stores "* ]] && [ -d /dev/shm ] && [ -w /dev/shm ] \
    && [ "$(stat -f -c %T /dev/shm)" = tmpfs ] && [ "$(stat -f -c %T "$work")" != tmpfs ]; then
    shm_work=$(mktemp -d /dev/shm/onebash-bench.XXXXXX)
fi

echo "onebash bench$([ "$quick" = 1 ] && echo " (BENCH_QUICK=1: shrunk workloads)"): $("$bin" --version), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
failed=""
for s in $sections; do
    echo
    echo "== $s"
    t0=$EPOCHREALTIME
    set +e
    (set -e; "section_$s")
    rc=$?
    set -e
    if [ $rc != 0 ]; then
        failed="$failed $s"
        fig "section $s" "FAILED" "-" "see its output above"
    fi
    printf '   (%s took %.0f s)\n' "$s" "$(calc "$EPOCHREALTIME - $t0")"
done

echo
echo "== summary (load average $(cut -d' ' -f1-3 /proc/loadavg) at the end)"
tools table "$work/figures.tsv"
[ "$quick" != 1 ] || echo "BENCH_QUICK=1: workloads too small for the targets to mean anything; run without it for figures"
[ -z "$failed" ] || { echo "failed sections:$failed"; exit 1; }
