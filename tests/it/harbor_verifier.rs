//! Harbor's separate verifier (`[verifier] environment_mode =
//! "separate"`), run end to end under podman and docker: the verifier's
//! fresh container receives only the task's `artifacts` (a folder without
//! what its `exclude` matches) and what a `[[verifier.collect]]` hook
//! wrote, so the oracle passes, a no-op agent fails, and an agent that
//! edits the files the tests read (and leaves a process rewriting them)
//! cannot change the verdict, which it does change for the same task with
//! a shared verifier; a verifier of its own image runs there. Collect
//! hooks run before either verifier. Skipped when the engine or the test image is
//! missing, as tests/it/harbor.rs.

use std::path::Path;

use crate::harbor::run;
use crate::support::backend::{Backend, IMAGE, ImageTags, image_nonce, under_each_engine};
use crate::support::harness::{Fixture, RunOutput, scripted_agent_by};

/// The separate verifier's task: the artifacts are `/app/out.txt` and
/// `/app/build` without its `*.tmp` files; a collect hook copies
/// out.txt to the conventional `/logs/artifacts`.
const SEPARATE_TOML: &str = r#"artifacts = ["/app/out.txt", { source = "/app/build", exclude = ["*.tmp"] }]

[verifier]
environment_mode = "separate"

[[verifier.collect]]
command = "mkdir -p /logs/artifacts && cp /app/out.txt /logs/artifacts/collected.txt"
timeout_sec = 30
"#;

/// Passes only when out.txt (an artifact) holds what the image's
/// expected.txt holds, the hook's copy came too, the folder came without
/// its excluded file, and nothing else of the agent's container did.
const SEPARATE_TEST: &str = r#"#!/bin/bash
ok=1
[ "$(cat /app/out.txt)" = "$(cat /app/expected.txt)" ] || { echo out.txt differs; ok=0; }
[ "$(cat /logs/artifacts/collected.txt)" = "$(cat /app/expected.txt)" ] || { echo no collected.txt; ok=0; }
[ -f /app/build/keep.txt ] || { echo no build/keep.txt; ok=0; }
[ ! -e /app/build/junk.tmp ] || { echo build/junk.tmp was not excluded; ok=0; }
[ ! -e /app/stray.txt ] || { echo stray.txt is no artifact; ok=0; }
echo $ok > /logs/verifier/reward.txt
"#;

/// The same check in the agent's own container (Harbor's default), after
/// a collect hook that runs there too.
const SHARED_TOML: &str = "[[verifier.collect]]\ncommand = \"echo hooked > /var/tmp/hooked\"\n";
const SHARED_TEST: &str = "#!/bin/bash\nif [ \"$(cat /app/out.txt)\" = \"$(cat /app/expected.txt)\" ] && [ -f /var/tmp/hooked ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n";

/// A separate verifier in an image of its own (the base image, without
/// the task's expected.txt), which receives out.txt all the same.
fn own_image_toml() -> String {
    format!("artifacts = [\"/app/out.txt\"]\n[verifier.environment]\ndocker_image = \"{IMAGE}\"\n")
}
const OWN_IMAGE_TEST: &str = "#!/bin/bash\nif [ ! -e /app/expected.txt ] && [ \"$(cat /app/out.txt)\" = expected ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n";

const SOLVE: &str = "#!/bin/bash\nset -e\ncp /app/expected.txt /app/out.txt\nmkdir -p /app/build\necho k > /app/build/keep.txt\necho j > /app/build/junk.tmp\necho s > /app/stray.txt\n";

/// What the tampering agent runs: a wrong answer, the file the tests
/// compare it with edited to match, and a process left behind that keeps
/// rewriting both (by rename, so a reader never sees half a file).
const TAMPER: &[&str] = &[
    "echo forged > /app/out.txt && echo forged > /app/expected.txt",
    "nohup bash -c 'while :; do echo forged > /app/.e && mv /app/.e /app/expected.txt; echo forged > /app/.o && mv /app/.o /app/out.txt; sleep 0.2; done' >/dev/null 2>&1 &",
];

fn task_folder(root: &Path, name: &str, toml: &str, test: &str, dockerfile: &str) {
    use std::os::unix::fs::PermissionsExt;
    let dir = root.join(name);
    let instruction = format!("Problem of {name}: copy /app/expected.txt to /app/out.txt.\n");
    for (relative, content) in [
        ("task.toml", toml),
        ("instruction.md", instruction.as_str()),
        ("environment/Dockerfile", dockerfile),
        ("tests/test.sh", test),
        ("solution/solve.sh", SOLVE),
    ] {
        let path = dir.join(relative);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, content).expect("write");
        if relative.ends_with(".sh") {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
    }
}

/// Asserts `task`'s reward in `run`, its row, test log and stderr shown
/// when it differs.
pub(crate) fn assert_reward(run: &RunOutput, task: &str, expected: &str) {
    let row = run.row(task);
    let log = std::fs::read_to_string(run.task_dir(task).join("test.log")).unwrap_or_default();
    assert_eq!(
        (row["exit_reason"].as_str(), row["reward"].as_str()),
        ("completed", expected),
        "{task}: {row:?}\n{log}\n{}",
        run.stderr
    );
}

fn harbor_separate_verifier_in_an_engine(backend: Backend) {
    let fixture = Fixture::new();
    let root = fixture.path("tasks");
    let nonce = image_nonce();
    let dockerfile = format!(
        "FROM {IMAGE}\nLABEL onebash.test-nonce=\"{nonce}\"\nWORKDIR /app\nRUN echo expected > /app/expected.txt\n"
    );
    task_folder(&root, "separate", SEPARATE_TOML, SEPARATE_TEST, &dockerfile);
    task_folder(&root, "shared", SHARED_TOML, SHARED_TEST, &dockerfile);
    task_folder(
        &root,
        "own-image",
        &own_image_toml(),
        OWN_IMAGE_TEST,
        &dockerfile,
    );
    let engine = backend.engine().expect("an engine");
    let in_engine = ["--env", engine, "--pull", "never"];

    let mut args = vec!["--model", "oracle"];
    args.extend(in_engine);
    let oracle = run(&fixture, &root, "oracle", &args);
    let image = oracle.trajectory("separate")[0]["task"]["image"]
        .as_str()
        .expect("image")
        .to_owned();
    let _cleanup = ImageTags(vec![image]);
    // The oracle passes only when the artifacts came, the hook's file
    // came, the excluded file and the stray one did not.
    assert_reward(&oracle, "separate", "1.0");
    assert_reward(&oracle, "shared", "1.0");
    assert_reward(&oracle, "own-image", "1.0");

    let mut args = vec!["--model", "noop"];
    args.extend(in_engine);
    let noop = run(&fixture, &root, "noop", &args);
    assert_reward(&noop, "separate", "0.0");
    assert_reward(&noop, "shared", "0.0");
    assert_reward(&noop, "own-image", "0.0");

    let tamper: Vec<String> = TAMPER.iter().map(|c| (*c).to_owned()).collect();
    let server = scripted_agent_by(vec![
        ("Problem of separate:".to_owned(), tamper.clone()),
        ("Problem of shared:".to_owned(), tamper.clone()),
        ("Problem of own-image:".to_owned(), tamper),
    ]);
    let mut args = vec!["--model", "scripted", "--base-url"];
    let url = server.base_url();
    args.push(&url);
    args.extend(in_engine);
    let tampered = run(&fixture, &root, "tamper", &args);
    // The same agent wins the shared task: its edits are what the tests
    // read there. The separate verifier reads the image's expected.txt.
    assert_reward(&tampered, "shared", "1.0");
    assert_reward(&tampered, "separate", "0.0");
    assert_reward(&tampered, "own-image", "0.0");
    let log =
        std::fs::read_to_string(tampered.task_dir("separate").join("test.log")).expect("test.log");
    assert!(log.contains("out.txt differs"), "{log}");
    for task in ["separate", "shared", "own-image"] {
        backend.assert_nothing_left_of(task);
    }
}

under_each_engine!(
    harbor_separate_verifier,
    super::harbor_separate_verifier_in_an_engine
);
