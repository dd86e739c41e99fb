//! `--model replay:RUN_DIR`: a recorded scripted run plays back with the
//! model server gone, reproduces every verdict, counts commands whose output
//! changed, and names a task the recording lacks.

use serde_json::json;

use crate::support::harness::{Fixture, scripted_agent, task};

#[test]
fn a_replay_reproduces_every_verdict_with_no_server() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("value.txt", "1\n")]);
    let test = "test \"$(cat value.txt)\" = 2";
    let tasks = fixture.tasks(&[
        task("fix", &repo, &sha, test, json!({})),
        task("noop", &repo, &sha, test, json!({})),
        task("random", &repo, &sha, test, json!({})),
        task("capped", &repo, &sha, test, json!({})),
    ]);
    let server = scripted_agent(&[
        (
            "fix",
            &["cat value.txt", "echo 2 > value.txt", "cat value.txt"],
        ),
        ("noop", &["ls"]),
        // Its output changes from run to run: the replay counts it.
        (
            "random",
            &["echo $RANDOM$RANDOM$RANDOM", "echo 2 > value.txt"],
        ),
        (
            "capped",
            &["echo 1", "echo 2", "echo 3", "echo 4", "echo 5"],
        ),
    ]);
    let recorded = fixture.run_scripted_into("recorded", &tasks, &server, &["--max-turns", "3"]);
    assert_eq!(recorded.code, 0, "stderr:\n{}", recorded.stderr);
    let requests = server.requests().len();
    drop(server);

    let replay_model = format!("replay:{}", recorded.out.display());
    let replayed = fixture.run_into(
        &fixture.path("replayed"),
        &tasks,
        &["--model", &replay_model, "--max-turns", "10"],
        &[],
    );
    assert_eq!(replayed.code, 0, "stderr:\n{}", replayed.stderr);
    assert!(requests > 0);
    for id in ["fix", "noop", "random", "capped"] {
        let (before, after) = (recorded.row(id), replayed.row(id));
        for column in [
            "status",
            "passed",
            "turns",
            "tool_calls",
            "exit_reason",
            "total_tokens",
        ] {
            assert_eq!(before[column], after[column], "{id} {column}");
        }
    }
    // The recording ended at max_turns 3; the replay, allowed 10, ends as
    // the recording did.
    assert_eq!(replayed.row("capped")["exit_reason"], "max_turns");
    assert_eq!(replayed.row("fix")["status"], "passed");
    assert_eq!(replayed.row("noop")["status"], "failed");
    assert_eq!(replayed.row("fix")["replay_divergences"], "0");
    assert_eq!(replayed.row("random")["replay_divergences"], "1");
    let divergence = &replayed.events("random", "replay_divergence")[0];
    assert_ne!(divergence["recorded_output"], divergence["output"]);
}

#[test]
fn a_task_missing_from_the_recording_is_an_error_row_naming_it() {
    let fixture = Fixture::new();
    let (repo, sha) = fixture.repo("repo", &[("value.txt", "1\n")]);
    let one = fixture.tasks(&[task("one", &repo, &sha, "true", json!({}))]);
    let server = scripted_agent(&[("one", &["true"])]);
    let recorded = fixture.run_scripted_into("recorded", &one, &server, &[]);
    assert_eq!(recorded.code, 0, "stderr:\n{}", recorded.stderr);
    drop(server);
    let both = fixture.tasks(&[
        task("one", &repo, &sha, "true", json!({})),
        task("two", &repo, &sha, "true", json!({})),
    ]);
    let model = format!("replay:{}", recorded.out.display());
    let replayed = fixture.run_into(&fixture.path("replayed"), &both, &["--model", &model], &[]);
    assert_eq!(replayed.code, 1, "stderr:\n{}", replayed.stderr);
    assert_eq!(replayed.row("one")["status"], "passed");
    let two = replayed.row("two");
    assert_eq!(two["status"], "error");
    assert!(
        two["error"].contains("task two epoch 1 is not in the recording"),
        "{two:?}"
    );
}
