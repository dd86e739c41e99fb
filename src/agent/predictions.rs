//! `--model predictions:FILE`: a model that answers with another agent's
//! patch. Its one bash call writes the task's `model_patch` to a file
//! outside the repo and puts it in as SWE-bench's `run_instance` does, by
//! the task's rule set's chain ([`ApplyChain`]: 4.1's three commands, or
//! 5.0's four with a reset between attempts and an already-applied patch
//! taken), so the patch is recorded, diffed and graded as any agent's
//! work. Its second answer reads the call's output: a final text when the
//! patch went in, else [`ModelError::PatchDoesNotApply`] with the last
//! attempt's output. Empty predictions never get here: the runner does
//! not run them.

use serde_json::Value;

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::agent::oracle::{answered, bash_calls, final_text};
use crate::agent::patch_file::patch_commands;
use crate::agent::types::{ModelError, ModelReply};
use crate::grade::{ApplyChain, Rules};
use crate::task::TaskSpec;
use crate::task::predictions::PredictionFile;

/// The line before each attempt's output: `onebash: trying COMMAND`.
const TRYING: &str = "onebash: trying ";
/// The last line when the patch went in: `onebash: applied with COMMAND
/// (check NONCE)`.
const APPLIED: &str = "onebash: applied with ";
/// The command's last line, a comment naming the call's nonce.
const CHECK: &str = "# onebash check ";
/// The last line when it did not.
const FAILED: &str = "onebash: the prediction's patch does not apply";

/// The answer to a history: the bash call that puts the task's patch in,
/// then what became of it.
pub(crate) fn complete(
    file: &PredictionFile,
    grading: Option<Rules>,
    task: &TaskSpec,
    messages: &[Value],
) -> Result<ModelReply, ModelError> {
    if answered(messages) > 0 {
        let output = messages
            .last()
            .and_then(|m| m.get("content"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        return match went_in(output, nonce_of(messages).as_deref()) {
            true => Ok(final_text("Applied the prediction's patch.")),
            false => Err(ModelError::PatchDoesNotApply(last_attempt(output))),
        };
    }
    let patch = file
        .get(task.id.as_str())
        .and_then(|p| p.model_patch.as_deref())
        .filter(|patch| !patch.is_empty())
        .ok_or_else(|| {
            ModelError::Malformed(format!(
                "task {} has no patch in {}",
                task.id,
                file.path.display()
            ))
        })?;
    let chain = task.rules(grading).apply_chain();
    let script = apply_script(chain, &nonce(task.id.as_str()));
    Ok(bash_calls(
        "prediction",
        &patch_commands("prediction", "ONEBASH_PREDICTION", patch, &script),
    ))
}

/// Whether the call's output says the patch went in, by what the patch
/// cannot write: `git apply` prints a patch's lines when it warns, so an
/// added line may read as [`APPLIED`]; but the tool's `[exit code: 0]` is
/// the last line, the marker the command's own last line, and its nonce
/// was drawn after the patch was written.
fn went_in(output: &str, nonce: Option<&str>) -> bool {
    let Some(nonce) = nonce else {
        return false;
    };
    let mut lines = output.lines().rev();
    let exit = lines.next();
    let last = lines.next().unwrap_or_default();
    exit == Some("[exit code: 0]")
        && last.starts_with(APPLIED)
        && last.ends_with(&format!(" (check {nonce})"))
}

/// The nonce of the last bash call: its command's last line, [`CHECK`]
/// then the nonce (the patch is written before it, so the line is ours).
fn nonce_of(messages: &[Value]) -> Option<String> {
    let call = messages
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))?
        .get("tool_calls")?
        .as_array()?
        .last()?;
    let arguments: Value =
        serde_json::from_str(call.get("function")?.get("arguments")?.as_str()?).ok()?;
    let command = arguments.get("command")?.as_str()?;
    let nonce = command.lines().last()?.strip_prefix(CHECK)?;
    Some(nonce.to_owned())
}

/// A nonce the patch cannot predict: the task and a counter hashed with
/// std's per-process random keys.
fn nonce(task: &str) -> String {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write(task.as_bytes());
    hasher.write_u64(CALLS.fetch_add(1, Ordering::Relaxed));
    format!("{:016x}", hasher.finish())
}

/// The bash run on the patch in `$prediction`: each command of the chain
/// in turn (its output after a [`TRYING`] line), until one exits 0; the
/// last line says what worked, with the call's `nonce`, and the
/// command's last line is a [`CHECK`] comment naming it.
fn apply_script(chain: ApplyChain, nonce: &str) -> String {
    let attempts = chain
        .commands
        .iter()
        .map(|command| format!("'{command}'"))
        .collect::<Vec<_>>()
        .join(" ");
    // 5.0 restarts from a pristine tree: a failed `--reject` leaves part
    // of the patch behind.
    let reset = if chain.reset_between {
        "  if [ -n \"$tried\" ]; then git checkout -- . >/dev/null 2>&1; git clean -fd >/dev/null 2>&1; fi\n  tried=1\n"
    } else {
        ""
    };
    // 5.0: a chain that left the patch in while every command failed
    // counts as applied; the check's own output is not the attempt's.
    let already = if chain.already_applied_counts {
        "if [ -z \"$applied\" ] && git apply --check --reverse \"$prediction\" >/dev/null 2>&1; then\n  applied='git apply --check --reverse (the patch is in already)'\nfi\n"
    } else {
        ""
    };
    format!(
        "applied=''\n\
         tried=''\n\
         for attempt in {attempts}; do\n\
         {reset}  echo \"{TRYING}$attempt\"\n\
         \x20 if $attempt \"$prediction\" 2>&1; then applied=\"$attempt\"; break; fi\n\
         done\n\
         {already}\
         rm -f \"$prediction\"\n\
         if [ -n \"$applied\" ]; then echo \"{APPLIED}$applied (check {nonce})\"; else echo \"{FAILED}\"; exit 1; fi\n\
         {CHECK}{nonce}"
    )
}

/// What the model reads of the last attempt: its command and the lines
/// between its [`TRYING`] line and the end, without onebash's own lines
/// (the call's output is shortened in the middle when long, so its tail,
/// where the last attempt is, is kept).
fn last_attempt(output: &str) -> String {
    let lines: Vec<&str> = output.lines().collect();
    let start = lines.iter().rposition(|line| line.starts_with(TRYING));
    let (command, rest) = match start {
        Some(i) => (lines[i].strip_prefix(TRYING), &lines[i + 1..]),
        None => (None, &lines[..]),
    };
    let said: Vec<&str> = rest
        .iter()
        .copied()
        .filter(|line| *line != FAILED && !line.starts_with("[exit code: "))
        .collect();
    let said = said.join("\n");
    match command {
        Some(command) => format!("{command}: {}", said.trim()),
        None => said.trim().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nonce of the tests' chains.
    const NONCE: &str = "n0";

    /// Runs the calls that put `patch` in by `rules`' chain in `repo`, in
    /// order as the bash tool does; the last call's exit code and output.
    fn run_chain(repo: &std::path::Path, rules: Rules, patch: &str) -> (Option<i32>, String) {
        let script = apply_script(rules.apply_chain(), NONCE);
        let mut last = (None, String::new());
        for command in patch_commands("prediction", "ONEBASH_PREDICTION", patch, &script) {
            let out = std::process::Command::new("bash")
                .arg("-c")
                .arg(command)
                .current_dir(repo)
                .output()
                .expect("bash runs");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            last = (out.status.code(), text);
        }
        last
    }

    /// A git repo of `a.txt` (`one two three`, a line each) in a new
    /// folder; its `git`.
    fn repo() -> (tempfile::TempDir, impl Fn(&[&str])) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().to_owned();
        let git = move |args: &[&str]| {
            let status = std::process::Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .current_dir(&path)
                .output()
                .expect("git runs");
            assert!(status.status.success(), "git {args:?}: {status:?}");
        };
        git(&["init", "-q"]);
        std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\n").expect("write");
        git(&["add", "."]);
        git(&["commit", "-qm", "base"]);
        (dir, git)
    }

    /// `git apply` prints a line the patch adds (here on its trailing
    /// whitespace warning) at the start of a line before it fails: a
    /// patch that does not apply but adds the marker is not taken as
    /// applied.
    #[test]
    fn a_patch_that_prints_the_marker_does_not_pass_for_applied() {
        let (dir, _git) = repo();
        let spoof = "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-zwei\n+onebash: applied with anything \n three\n";
        for rules in [Rules::Swebench41, Rules::Swebench50] {
            let (code, out) = run_chain(dir.path(), rules, spoof);
            assert_eq!(code, Some(1), "{out}");
            assert!(
                out.lines().any(|line| line.starts_with(APPLIED)),
                "the spoof is printed: {out}"
            );
            let output = format!("{out}[exit code: 1]");
            assert!(!went_in(&output, Some(NONCE)), "{output}");
            // Nor with the exit code a patch could print, nor a nonce it
            // could guess.
            let faked = format!("{out}{APPLIED}x (check {NONCE})\n[exit code: 0]\n[exit code: 1]");
            assert!(!went_in(&faked, Some(NONCE)));
        }
        let ok = format!("{APPLIED}git apply --verbose (check {NONCE})\n[exit code: 0]");
        assert!(went_in(&ok, Some(NONCE)));
        assert!(!went_in(&ok, Some("n1")));
        assert!(!went_in(&ok, None));
        assert_ne!(nonce("t"), nonce("t"));
    }

    /// SWE-bench writes the patch file verbatim: with no final newline,
    /// `git apply` finds it corrupt and `patch` puts it in, under either
    /// rule set (run_evaluation's GIT_APPLY_CMDS in order).
    #[test]
    fn a_patch_without_a_final_newline_takes_the_command_swebench_s_chain_takes() {
        let patch = "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three";
        for (rules, command) in [
            (Rules::Swebench41, "patch --batch --fuzz=5 -p1 -i"),
            (Rules::Swebench50, "patch --batch --forward --fuzz=5 -p1 -i"),
        ] {
            let (dir, _git) = repo();
            let (code, out) = run_chain(dir.path(), rules, patch);
            assert_eq!(code, Some(0), "{out}");
            assert!(out.contains("corrupt patch"), "{out}");
            assert!(
                out.ends_with(&format!("{APPLIED}{command} (check {NONCE})\n")),
                "{out}"
            );
        }
    }

    /// The chain's script, run by bash in a git repo, does what
    /// run_instance does: each rule set's commands in order, 5.0's reset
    /// and reverse check, and says which command worked.
    #[test]
    fn the_chain_runs_in_order_and_says_what_worked() {
        let (dir, git) = repo();
        let repo = dir.path();
        let good = "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n";
        let bad = good.replace("-two", "-zwei");
        let run = |rules: Rules, patch: &str| run_chain(repo, rules, patch);
        let read = || std::fs::read_to_string(repo.join("a.txt")).expect("read");
        let (code, out) = run(Rules::Swebench41, good);
        assert_eq!(code, Some(0), "{out}");
        assert!(
            out.ends_with("onebash: applied with git apply --verbose (check n0)\n"),
            "{out}"
        );
        assert_eq!(read(), "one\nTWO\nthree\n");
        // In already: 4.1's `patch --batch` takes it for a reversed patch
        // and takes it out, as SWE-bench 4.1 does.
        let (code, out) = run(Rules::Swebench41, good);
        assert_eq!(code, Some(0), "{out}");
        assert!(
            out.ends_with("onebash: applied with patch --batch --fuzz=5 -p1 -i (check n0)\n"),
            "{out}"
        );
        assert_eq!(out.matches(TRYING).count(), 3, "{out}");
        assert_eq!(read(), "one\ntwo\nthree\n");
        git(&["clean", "-fdq"]);
        // A patch that applies in no way: the last attempt is what is said.
        let (code, out) = run(Rules::Swebench41, &bad);
        assert_eq!(code, Some(1), "{out}");
        assert!(out.ends_with(&format!("{FAILED}\n")), "{out}");
        let last = last_attempt(&format!("{out}[exit code: 1]"));
        assert!(
            last.starts_with("patch --batch --fuzz=5 -p1 -i: "),
            "{last}"
        );
        assert!(
            !last.contains(FAILED) && !last.contains("[exit code"),
            "{last}"
        );
        git(&["clean", "-fdq"]);
        // 5.0: in the commit already (an image's setup commit), every
        // command fails, `patch --forward` does not reverse it, and the
        // reverse check takes it; the tree is reset between attempts.
        let (code, out) = run(Rules::Swebench50, good);
        assert_eq!(code, Some(0), "{out}");
        git(&["commit", "-qam", "setup"]);
        let (code, out) = run(Rules::Swebench50, good);
        assert_eq!(code, Some(0), "{out}");
        assert!(
            out.ends_with(
                "onebash: applied with git apply --check --reverse (the patch is in already) (check n0)\n"
            ),
            "{out}"
        );
        assert_eq!(out.matches(TRYING).count(), 4, "{out}");
        assert_eq!(read(), "one\nTWO\nthree\n");
    }

    #[test]
    fn the_second_answer_reads_the_first_one_s_output() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("p.jsonl");
        std::fs::write(
            &path,
            r#"{"instance_id": "t", "model_name_or_path": "m", "model_patch": "diff\nONEBASH_PREDICTION\n"}"#,
        )
        .expect("write");
        let file = crate::task::predictions::load_predictions(&path).expect("valid");
        let line =
            r#"{"id":"t","repo":"r","base_commit":"c","problem_statement":"p","test_command":"t"}"#;
        let task = crate::task::parse_tasks(line, "f", std::path::Path::new("/"))
            .expect("valid")
            .remove(0);
        let first = complete(&file, None, &task, &[]).expect("reply");
        let args: Value = serde_json::from_str(&first.tool_calls[0].arguments).expect("json");
        let command = args["command"].as_str().expect("command");
        assert!(command.contains("<<'ONEBASH_PREDICTION_'\n"), "{command}");
        assert!(
            command.contains("'git apply --verbose --reject'"),
            "{command}"
        );
        let answer = |content: &str| {
            let tool = serde_json::json!({"role": "tool", "content": content});
            complete(&file, None, &task, &[first.message.clone(), tool])
        };
        let nonce = command
            .lines()
            .last()
            .and_then(|line| line.strip_prefix(CHECK))
            .expect("the nonce");
        assert_eq!(nonce.len(), 16, "{command}");
        let done = answer(&format!(
            "{APPLIED}git apply --verbose (check {nonce})\n[exit code: 0]"
        ))
        .expect("ok");
        assert!(done.tool_calls.is_empty());
        // Another call's nonce is not this one's.
        assert!(
            answer(
                "onebash: applied with git apply --verbose (check 0123456789abcdef)\n[exit code: 0]"
            )
            .is_err()
        );
        let failed = answer(&format!(
            "{TRYING}git apply --verbose\nerror: x\n{TRYING}patch -p1\nHunk #1 FAILED\n{FAILED}\n[exit code: 1]"
        ));
        match failed {
            Err(ModelError::PatchDoesNotApply(output)) => {
                assert_eq!(output, "patch -p1: Hunk #1 FAILED");
            }
            other => panic!("expected the patch's failure, got {other:?}"),
        }
    }
}
