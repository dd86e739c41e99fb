//! One (task, epoch)'s transcript page: the conversation as `onebash show`
//! prints it (the same walk, `show::entries`), laid out as HTML.

use super::{escape, page};
use crate::commands::show::{self, CommandRun, Entry};
use crate::commands::show_facts::TestVerdict;
use crate::sys::words::count;

/// A command (which may span lines: heredocs) with its status, as the
/// terminal shows it, then its shortened output.
fn command_block(prompt: &str, run: &CommandRun, verdict: Option<&TestVerdict>) -> String {
    let exit = if run.exit_code == 0 {
        "exit-zero"
    } else {
        "exit-nonzero"
    };
    let verdict = verdict.map_or(String::new(), |verdict| {
        let word = if verdict.passed { "passed" } else { "failed" };
        format!(
            " <span class=\"verdict {word}\">{}</span>",
            escape(&verdict.text())
        )
    });
    let probe = show::probe_marker(&run.probes).map_or(String::new(), |marker| {
        format!("  <span class=\"probe\">{}</span>", escape(&marker))
    });
    let mut out = format!(
        "<pre class=\"command\"><span class=\"prompt\">{prompt}</span> {}  <span class=\"{exit}\">{}</span>{verdict}{probe}</pre>\n",
        escape(&run.command),
        escape(&show::command_status(run))
    );
    if !run.output.is_empty() {
        out.push_str(&shortened_pre(&run.output, "output"));
    }
    out
}

/// A `<pre>` with the text cut as `show` cuts it, and the count of what was cut.
fn shortened_pre(text: &str, class: &str) -> String {
    let s = show::shorten(text);
    if s.cut == 0 {
        return format!("<pre class=\"{class}\">{}</pre>\n", escape(&s.head));
    }
    format!(
        "<pre class=\"{class}\">{}\n<span class=\"cut\">[... {} cut ...]</span>{}</pre>\n",
        escape(&s.head),
        count(s.cut, "line", "lines"),
        escape(&s.tail)
    )
}

/// One (task, epoch)'s conversation; `back` links to the report page.
/// Each turn is a `<section>`, from its model call to the next turn, the
/// agent's end, the test or the result.
pub(crate) fn transcript_page(entries: &[Entry], back: &str) -> String {
    let mut title = "transcript".to_owned();
    let mut body = format!(
        "<p class=\"meta\"><a href=\"{}\">&larr; report</a></p>\n",
        escape(back)
    );
    let mut in_turn = false;
    for entry in entries {
        if let Entry::Header { task, epoch, .. } = entry {
            title = format!("{task} epoch {}", epoch);
        }
        let closes = closes_turn(entry);
        if in_turn && closes {
            body.push_str("</section>\n");
        }
        in_turn = matches!(entry, Entry::Turn { .. }) || (in_turn && !closes);
        body.push_str(&entry_html(entry));
    }
    if in_turn {
        body.push_str("</section>\n");
    }
    page(&title, &body, None)
}

/// The entries that end the turn before them: the next turn, the agent's
/// end, the test, the result.
fn closes_turn(entry: &Entry) -> bool {
    matches!(
        entry,
        Entry::Turn { .. } | Entry::AgentEnd { .. } | Entry::Test { .. } | Entry::End { .. }
    )
}

/// One entry as HTML. A turn's entry opens its `<section>`, which
/// [`transcript_page`] closes.
fn entry_html(entry: &Entry) -> String {
    match entry {
        Entry::Header {
            task,
            epoch,
            model,
            prompt,
            repo,
            base_commit,
        } => page_header(task, *epoch, model, prompt, repo, base_commit),
        Entry::Checkout {
            commit,
            seconds,
            origin,
        } => format!(
            "<p class=\"meta\">{}</p>\n",
            origin.line(
                &format!("<code>{}</code>", escape(commit)),
                &show::seconds(*seconds)
            )
        ),
        Entry::Setup(run) => command_block("setup $", run, None),
        Entry::Problem(problem) => format!(
            "<section class=\"problem\"><h2>Problem</h2>\n{}</section>\n",
            shortened_pre(problem, "problem")
        ),
        Entry::Turn {
            turn,
            prompt_tokens,
            completion_tokens,
            seconds,
        } => turn_heading(*turn, *prompt_tokens, *completion_tokens, *seconds),
        Entry::ModelText(text) => format!("<pre class=\"model-text\">{}</pre>\n", escape(text)),
        Entry::Reasoning(text) => format!(
            "<details class=\"reasoning\"><summary>reasoning ({})</summary><pre>{}</pre></details>\n",
            count(text.lines().count(), "line", "lines"),
            escape(text)
        ),
        Entry::Retry {
            retry,
            wait_seconds,
            error,
        } => format!(
            "<p class=\"meta\">retry {retry} after {}: {}</p>\n",
            show::seconds(*wait_seconds),
            escape(error)
        ),
        Entry::ModelError(error) => problem_line("model error", error),
        Entry::Command(run) => command_block("$", run, None),
        Entry::ToolError(error) => problem_line("bad tool call", error),
        Entry::AgentEnd {
            exit_reason,
            turns,
            tool_calls,
            total_tokens,
        } => format!(
            "<h2>Agent ended: {} after {}, {}, {total_tokens} tokens</h2>\n",
            escape(exit_reason),
            count(*turns as usize, "turn", "turns"),
            count(*tool_calls as usize, "tool call", "tool calls"),
        ),
        Entry::Audit {
            commands,
            kinds,
            setup_kinds,
        } => audit_line(*commands, kinds, setup_kinds),
        Entry::Hosts {
            hosts,
            refused,
            refused_repo_host,
        } => {
            let line = format!(
                "hosts: {} asked through the allowlist, {} refused",
                count(*hosts, "host", "hosts"),
                count(*refused as usize, "request", "requests")
            );
            match refused_repo_host.is_empty() {
                true => format!("<p class=\"meta\">{}</p>\n", escape(&line)),
                false => problem_line(
                    &line,
                    &format!(
                        "refused the repository's host: {}",
                        refused_repo_host.join(", ")
                    ),
                ),
            }
        }
        Entry::Test { run, verdict } => format!(
            "<section class=\"test\"><h2>Test</h2>\n{}</section>\n",
            command_block("test $", run, Some(verdict))
        ),
        Entry::End {
            status,
            exit_reason,
            error,
        } => result_line(status, exit_reason, error.as_deref()),
    }
}

/// The page's heading: the task and epoch, then what ran it on what.
fn page_header(
    task: &str,
    epoch: u32,
    model: &str,
    prompt: &str,
    repo: &str,
    base_commit: &str,
) -> String {
    format!(
        "<header><h1>{}</h1><p class=\"meta\">model <b>{}</b> · prompt <b>{}</b> · repo \
         <code>{}</code> at <code>{}</code></p></header>\n",
        escape(&format!("task {task}, epoch {epoch}")),
        escape(model),
        escape(prompt),
        escape(repo),
        escape(base_commit)
    )
}

/// A model call's heading, which opens the turn's `<section>`.
fn turn_heading(turn: u32, prompt_tokens: u64, completion_tokens: u64, seconds: f64) -> String {
    format!(
        "<section class=\"turn\" id=\"turn-{turn}\"><h2>Turn {turn} <span class=\"meta\">\
         {prompt_tokens} + {completion_tokens} tokens, {}</span></h2>\n",
        show::seconds(seconds)
    )
}

/// A model error or a bad tool call, marked as a problem.
fn problem_line(what: &str, error: &str) -> String {
    format!("<p class=\"problem-error\">{what}: {}</p>\n", escape(error))
}

/// The audit's count of history probes, marked as a problem when there is one.
fn audit_line(commands: usize, kinds: &[String], setup_kinds: &[String]) -> String {
    let class = if commands == 0 {
        "meta"
    } else {
        "problem-error"
    };
    format!(
        "<p class=\"audit {class}\">{}</p>\n",
        escape(&show::audit_summary(commands, kinds, setup_kinds))
    )
}

/// The row's status (coloured as passed, failed or error), exit reason and
/// error.
fn result_line(status: &str, exit_reason: &str, error: Option<&str>) -> String {
    let class = match status {
        "passed" | "failed" => status,
        _ => "error",
    };
    format!(
        "<p class=\"result {class}\">result: <span class=\"status\">{}</span> ({}){}</p>\n",
        escape(status),
        escape(exit_reason),
        error.map_or(String::new(), |e| format!(
            " <span class=\"meta\">{}</span>",
            escape(e)
        ))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::ProbeKind;
    use crate::commands::show::sample::*;
    use crate::run_folder::trajectory::Event;

    #[test]
    fn reasoning_is_folded_in_details_and_escaped() {
        let events = vec![
            header(),
            model_call(1, 0.5, 10, 5),
            Event::Message {
                turn: 1,
                message: serde_json::json!({"role": "assistant", "content": "ok",
                    "reasoning": "a <b>\nplan", "reasoning_details": []}),
            },
        ];
        let html = transcript_page(&show::entries(&events), "../report.html");
        assert!(
            html.contains("<details class=\"reasoning\"><summary>reasoning (2 lines)</summary><pre>a &lt;b&gt;\nplan</pre></details>\n<pre class=\"model-text\">ok</pre>"),
            "{html}"
        );
    }

    #[test]
    fn transcript_page_shows_turns_commands_cuts_and_the_verdict() {
        let mut events = conversation("Fix <it>.", "I'll run <script>.", "cat big && echo '<b>'");
        events.extend([
            Event::Audit {
                history_probes: vec![probed(
                    1,
                    "c2",
                    "false",
                    vec![probe(ProbeKind::Reflog, "git <reflog>")],
                )],
                setup_probes: Vec::new(),
            },
            passed_test(),
            passed_end(),
        ]);
        let html = transcript_page(&show::entries(&events), "../report.html");
        assert!(html.contains("<title>t1 epoch 1</title>"), "{html}");
        assert!(html.contains("Turn 1 <span class=\"meta\">10 + 5 tokens, 0.50 s</span>"));
        assert!(html.contains("I&#39;ll run &lt;script&gt;."));
        assert!(html.contains("$</span> cat big &amp;&amp; echo &#39;&lt;b&gt;&#39;  <span"));
        assert!(html.contains("[exit 1, 0.01 s]</span>  <span class=\"probe\">[history probe: git &lt;reflog&gt;]</span></pre>"), "{html}");
        assert_eq!(html.matches("class=\"probe\"").count(), 1);
        assert!(
            html.contains(
                "<p class=\"audit problem-error\">history probes: 1 command (reflog)</p>"
            )
        );
        assert!(html.contains("[... 16 lines cut ...]"));
        assert!(html.contains("<span class=\"verdict passed\">PASSED</span>"));
        assert!(html.contains("result: <span class=\"status\">passed</span> (completed)"));
        assert_eq!(
            html.matches("<section").count(),
            html.matches("</section>").count()
        );
        // A graded task shows its lists, whatever the exit code.
        let mut test = passed_test();
        if let Event::Test { per_test, .. } = &mut test {
            *per_test = Some(serde_json::json!({"verdict": {"resolved": false,
                "fail_to_pass": [{"name": "t<x>", "status": "FAILED", "ok": false}],
                "pass_to_pass": []}}));
        }
        let html = transcript_page(&show::entries(&[test]), "../report.html");
        assert!(html.contains("<span class=\"verdict failed\">not resolved: FAIL_TO_PASS 0/1 (t&lt;x&gt; FAILED), PASS_TO_PASS 0/0</span>"), "{html}");
    }
}
