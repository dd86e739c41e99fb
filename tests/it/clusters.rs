//! The cluster templates, run on this machine: `scripts/slurm/onebash-array.sh`
//! as Slurm would run its array tasks (`SLURM_ARRAY_TASK_ID` and the count
//! set by hand: no Slurm here), then `onebash merge` as its merge job does.
//! Under `--env oci` it needs podman (only to save the test image, before
//! the script runs) and bwrap, and is skipped with a line without them.

use std::path::Path;
use std::process::Command;

use serde_json::json;

use crate::support::backend::{Backend, IMAGE, saved};
use crate::support::harness::{Fixture, onebash_ok, scripted_agent, task, tool_answers};

/// A folder of the only programs the script and onebash may use: no
/// podman, no docker, as on a cluster node.
fn node_path(fixture: &Fixture) -> String {
    let bin = fixture.path("node-bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_onebash"), bin.join("onebash"))
        .expect("link onebash");
    for tool in [
        "bash", "sh", "git", "bwrap", "mkdir", "id", "hostname", "cat", "env",
    ] {
        let found = ["/usr/bin", "/bin", "/usr/local/bin"]
            .iter()
            .map(|dir| Path::new(dir).join(tool))
            .find(|path| path.exists());
        if let Some(path) = found {
            std::os::unix::fs::symlink(path, bin.join(tool)).expect("link");
        }
    }
    bin.display().to_string()
}

/// The Slurm array script runs a task set under `--env oci` on a machine
/// with no container engine on its PATH: each array index runs its shard
/// in the image (bookworm, not the host), with the layer cache made once
/// in the node-local cache folder ($TMPDIR), and the shards merge into one
/// run with every task graded.
#[test]
fn the_slurm_array_script_runs_a_task_set_under_env_oci() {
    if !Backend::Oci.ready() {
        return;
    }
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("README.md", "hello\n")]);
    let ids = ["slurm-0", "slurm-1", "slurm-2"];
    let lines: Vec<_> = ids
        .iter()
        .map(|id| {
            task(
                id,
                &repo,
                &sha,
                "grep -q bookworm /etc/os-release && grep -q bookworm made.txt",
                json!({}),
            )
        })
        .collect();
    let tasks = fixture.tasks(&lines);
    let commands = ["grep VERSION_CODENAME /etc/os-release > made.txt; cat made.txt"];
    let plan: Vec<(&str, &[&str])> = ids.iter().map(|id| (*id, &commands[..])).collect();
    let server = scripted_agent(&plan);
    let archive = saved(IMAGE, &crate::support::backend::shared().join("images"));
    let out_root = fixture.path("results");
    let node_tmp = fixture.path("node-tmp");
    std::fs::create_dir_all(&node_tmp).expect("mkdir");
    let path = node_path(&fixture);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/slurm/onebash-array.sh");
    for index in ["0", "1"] {
        let output = Command::new("bash")
            .arg(&script)
            .arg(&tasks)
            .arg(&out_root)
            .args(["--base-url", &server.base_url()])
            .env("PATH", &path)
            .env("TMPDIR", &node_tmp)
            .env("SLURM_ARRAY_TASK_ID", index)
            .env("SLURM_ARRAY_TASK_COUNT", "2")
            .env("SLURM_CPUS_PER_TASK", "2")
            .env("MODEL", "scripted")
            .env("ENV", "oci")
            .env("IMAGE", format!("docker-archive:{}", archive.display()))
            .env("OPENAI_API_KEY", "sk-slurm-secret")
            .output()
            .expect("run the script");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
        );
        assert!(
            output.status.success(),
            "index {index}:\n{stdout}\n{stderr}"
        );
        assert!(
            stdout.contains("--env oci --image docker-archive:"),
            "{stdout}"
        );
    }
    // The layers went to the node-local cache, once.
    let user = String::from_utf8(Command::new("id").arg("-un").output().expect("id").stdout)
        .expect("utf-8");
    let layers = node_tmp.join(format!("onebash-cache-{}/oci/layers", user.trim()));
    assert!(layers.is_dir(), "no layer cache at {}", layers.display());

    let merged = out_root.join("merged");
    onebash_ok(&[
        "merge".as_ref(),
        merged.as_os_str(),
        out_root.join("shard-0").as_os_str(),
        out_root.join("shard-1").as_os_str(),
    ]);
    let rows = std::fs::read_to_string(merged.join("results.csv")).expect("results.csv");
    for id in ids {
        let row = rows
            .lines()
            .find(|line| line.starts_with(&format!("{id},")))
            .unwrap_or_else(|| panic!("no row of {id}:\n{rows}"));
        assert!(row.contains(",passed,"), "{row}");
        let answers = tool_answers(&server, id);
        assert!(
            answers[0].contains("VERSION_CODENAME=bookworm"),
            "{answers:?}"
        );
    }
    let run_json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out_root.join("shard-0/run.json")).expect("run.json"),
    )
    .expect("JSON");
    assert_eq!(run_json["settings"]["sandbox_used"], "bwrap", "{run_json}");
}
