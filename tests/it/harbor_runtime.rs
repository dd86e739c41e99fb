//! Harbor's container settings (`[agent] user`, `[verifier] user`,
//! `[environment] workdir`, `env`, `cpus`, `memory_mb`, `healthcheck`,
//! `[solution] env`, a collect hook's `user`), run end to end under
//! podman and docker, through the container's channel and by one exec a
//! command: the
//! oracle's solve.sh (run as the agent's commands are) and test.sh each
//! record who they run as, where, with which variables and under which
//! cgroup limits, and the reward says whether each is as Harbor sets it; a
//! healthcheck that never passes stops its task. Skipped when the engine
//! or the test image is missing, as tests/it/harbor.rs.

use std::path::Path;

use crate::harbor::run;
use crate::harbor_verifier::assert_reward;
use crate::support::backend::{Backend, IMAGE, ImageTags, under_each_engine};
use crate::support::harness::{Fixture, RunOutput};

/// Every setting at once; the healthcheck passes at its second attempt
/// (the first is a failure, counted in /tmp/healthchecks).
const TOML: &str = r#"[agent]
user = "agent"

[verifier]
user = 2345
env = { CHECKED_BY = "the verifier" }

[[verifier.collect]]
command = "id -un > /tmp/collected-by"
user = "agent"

[environment]
workdir = "/work"
cpus = 0.5
memory_mb = 300
env = { GREETING = "hello from task.toml" }

[environment.healthcheck]
command = 'echo "$(id -un) $(pwd) $GREETING" >> /tmp/healthchecks; [ "$(wc -l < /tmp/healthchecks)" -ge 2 ]'
interval_sec = 0
start_interval_sec = 0
retries = 3

[solution]
env = { SECRET_WORD = "swordfish" }
"#;

/// The oracle's record of its own commands: user, folder, the task's
/// variable and the solution's, and the container's limits (cgroup v2's
/// files, else v1's).
const SOLVE: &str = r#"#!/bin/bash
{
  echo "user=$(id -un)"
  echo "dir=$(pwd)"
  echo "greeting=$GREETING"
  echo "secret=$SECRET_WORD"
  echo "memory=$(cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes)"
  echo "cpu=$(cat /sys/fs/cgroup/cpu.max 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us)"
} > seen.txt
"#;

/// Passes only when every setting was as task.toml says, for the agent
/// and for the verifier itself; says which were not.
const TEST: &str = r#"#!/bin/bash
ok=1
want() { grep -qx "$1" /work/seen.txt || { echo "the agent did not see $1: $(cat /work/seen.txt)"; ok=0; }; }
want user=agent
want dir=/work
want "greeting=hello from task.toml"
want secret=swordfish
want memory=314572800
grep -Eq '^cpu=50000( 100000)?$' /work/seen.txt || { echo "cpu: $(cat /work/seen.txt)"; ok=0; }
[ "$(id -un)" = tester ] || { echo "verifier as $(id -un)"; ok=0; }
[ "$(pwd)" = /work ] || { echo "verifier in $(pwd)"; ok=0; }
[ "$GREETING" = "hello from task.toml" ] || { echo "verifier greeting: $GREETING"; ok=0; }
[ "$CHECKED_BY" = "the verifier" ] || { echo "no verifier env"; ok=0; }
[ -z "$SECRET_WORD" ] || { echo "the solution's env reached the verifier"; ok=0; }
[ "$(cat /tmp/collected-by)" = agent ] || { echo "collected by $(cat /tmp/collected-by)"; ok=0; }
[ "$(cat /tmp/healthchecks)" = "$(printf 'root /work hello from task.toml\nroot /work hello from task.toml')" ] || { echo "healthchecks: $(cat /tmp/healthchecks)"; ok=0; }
echo $ok > /logs/verifier/reward.txt
"#;

/// A separate verifier: a fresh copy of the task's container (its
/// workdir, variables and limits), or, with `[verifier.environment]` of
/// its own, the image's WORKDIR with none of them; either way as the
/// verifier's user, with the agent's record passed as an artifact.
fn separate_toml(own_environment: bool) -> String {
    let (dir, greeting, memory) = if own_environment {
        ("/app", "", "not 314572800")
    } else {
        ("/work", "hello from task.toml", "314572800")
    };
    let own = if own_environment {
        "[verifier.environment]\n"
    } else {
        ""
    };
    format!(
        "artifacts = [\"/work/seen.txt\"]\n[agent]\nuser = \"agent\"\n[verifier]\nenvironment_mode = \"separate\"\nuser = \"tester\"\nenv = {{ WANT_DIR = \"{dir}\", WANT_GREETING = \"{greeting}\", WANT_MEMORY = \"{memory}\" }}\n[environment]\nworkdir = \"/work\"\nmemory_mb = 300\nenv = {{ GREETING = \"hello from task.toml\" }}\n{own}"
    )
}

const SEPARATE_TEST: &str = r#"#!/bin/bash
ok=1
memory=$(cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes)
grep -qx user=agent /work/seen.txt || { echo "seen: $(cat /work/seen.txt)"; ok=0; }
[ "$(id -un)" = tester ] || { echo "verifier as $(id -un)"; ok=0; }
[ "$(pwd)" = "$WANT_DIR" ] || { echo "verifier in $(pwd)"; ok=0; }
[ "$GREETING" = "$WANT_GREETING" ] || { echo "greeting: $GREETING"; ok=0; }
case "$WANT_MEMORY" in
  not\ *) [ "$memory" != "${WANT_MEMORY#not }" ] || { echo "memory $memory"; ok=0; } ;;
  *) [ "$memory" = "$WANT_MEMORY" ] || { echo "memory $memory"; ok=0; } ;;
esac
echo $ok > /logs/verifier/reward.txt
"#;

/// A task folder of `toml` with the oracle's record and the test that
/// reads it (a separate verifier's for the `separate-` tasks).
fn task_folder(root: &Path, name: &str, toml: &str, dockerfile: &str) {
    let test = if name.starts_with("separate") {
        SEPARATE_TEST
    } else {
        TEST
    };
    crate::harbor::task_folder(
        root,
        name,
        &[
            ("task.toml", toml),
            ("instruction.md", "Record what you see in seen.txt.\n"),
            ("environment/Dockerfile", dockerfile),
            ("tests/test.sh", test),
            ("solution/solve.sh", SOLVE),
        ],
    );
}

/// The tasks that pass under the oracle passed.
fn assert_passed(run: &RunOutput) {
    for task in ["settings", "separate-copy", "separate-own"] {
        assert_reward(run, task, "1.0");
    }
}

fn harbor_users_workdir_env_limits_and_healthcheck_in_an_engine(backend: Backend) {
    let fixture = Fixture::new();
    let root = fixture.path("tasks");
    let nonce = format!("{}-{:?}", std::process::id(), std::time::SystemTime::now());
    // The image's own WORKDIR is /app: task.toml's /work takes its place.
    let dockerfile = format!(
        "FROM {IMAGE}\nLABEL onebash.test-nonce=\"{nonce}\"\nRUN useradd -m -u 1234 agent && useradd -m -u 2345 tester && mkdir /work /app && chmod 777 /work\nWORKDIR /app\n"
    );
    task_folder(&root, "settings", TOML, &dockerfile);
    let never_healthy = TOML.replace("[ \"$(wc -l < /tmp/healthchecks)\" -ge 2 ]", "false");
    task_folder(&root, "unhealthy", &never_healthy, &dockerfile);
    task_folder(&root, "separate-copy", &separate_toml(false), &dockerfile);
    task_folder(&root, "separate-own", &separate_toml(true), &dockerfile);
    let engine = backend.engine().expect("an engine");
    let in_engine = ["--env", engine, "--pull", "never"];

    let mut args = vec!["--model", "oracle"];
    args.extend(in_engine);
    let oracle = run(&fixture, &root, "oracle", &args);
    let image = oracle.trajectory("settings")[0]["task"]["image"]
        .as_str()
        .expect("image")
        .to_owned();
    let _cleanup = ImageTags(vec![image]);
    assert_passed(&oracle);
    // The same by one `exec -u` a command, without the channel.
    let mut args = vec!["--model", "oracle", "--container-commands", "exec"];
    args.extend(in_engine);
    assert_passed(&run(&fixture, &root, "oracle-exec", &args));
    // A healthcheck that never passes stops its task after its retries,
    // with Harbor's message.
    let unhealthy = oracle.row("unhealthy");
    assert_eq!(unhealthy["exit_reason"], "setup_error", "{unhealthy:?}");
    assert!(
        unhealthy["error"].contains("healthcheck failed after 3 consecutive retries"),
        "{unhealthy:?}"
    );

    let mut args = vec!["--model", "noop"];
    args.extend(in_engine);
    let noop = run(&fixture, &root, "noop", &args);
    for task in ["settings", "separate-copy", "separate-own"] {
        assert_reward(&noop, task, "0.0");
    }
    for task in ["settings", "unhealthy", "separate-copy", "separate-own"] {
        backend.assert_nothing_left_of(task);
    }
}

under_each_engine!(
    harbor_users_workdir_env_limits_and_healthcheck,
    super::harbor_users_workdir_env_limits_and_healthcheck_in_an_engine
);
