//! Anthropic prompt caching and extended thinking against the strict
//! Messages server (`support::messages`): a multi-turn task with signed
//! thinking blocks passes every rule of the real API, its requests carry
//! rolling cache breakpoints that its history and trajectory never keep,
//! and the CSV's cost is the server's bill priced by hand.

use serde_json::Value;

use std::path::{Path, PathBuf};

use crate::support::harness::{Fixture, RunOutput, f64_of, onebash_ok, path_arg, small_task};
use crate::support::messages::{Bill, INTERLEAVED_BETA, MessagesServer, Step};

/// Claude Sonnet 4.5's price in the built-in table, USD per million
/// tokens: input, 5-minute cache write (1.25 x), cache read (0.1 x), output.
const SONNET: (f64, f64, f64, f64) = (3.0, 3.75, 0.30, 15.0);
const MODEL: &str = "claude-sonnet-4-5-20250929";

/// The task: `src/lib.txt` must say `fixed`.
fn fixed_task(fixture: &Fixture) -> PathBuf {
    small_task(fixture, "grep -q fixed src/lib.txt", serde_json::json!({}))
}

/// Thinks, looks, thinks again (one block redacted), fixes, and says so.
fn script() -> Vec<Step> {
    vec![
        Step::bash("cat src/lib.txt").thinking("The bug is in lib.txt; read it."),
        Step::bash("echo fixed > src/lib.txt")
            .thinking("It says `code`; the test wants `fixed`.")
            .redacted(),
        Step::done().thinking("Fixed; nothing more to run."),
    ]
}

/// A run of [`script`]'s task (in `tasks`) against a new strict server,
/// into `<fixture>/<out>`, `args` after the model flags.
fn run_task(
    fixture: &Fixture,
    tasks: &Path,
    out: &str,
    args: &[&str],
) -> (MessagesServer, RunOutput) {
    let server = MessagesServer::start(script());
    let base_url = server.base_url();
    let mut all = vec![
        "--provider",
        "anthropic",
        "--model",
        MODEL,
        "--base-url",
        &base_url,
        "--sandbox",
        "none",
    ];
    all.extend_from_slice(args);
    let output = fixture.run_into(&fixture.path(out), tasks, &all, &[]);
    (server, output)
}

/// The cost of `bills` at Sonnet's prices, as the API would charge.
fn priced(bills: &[Bill]) -> f64 {
    let (input, write, read, output) = SONNET;
    bills
        .iter()
        .map(|b| {
            b.input_tokens as f64 * input
                + b.cache_creation_input_tokens as f64 * write
                + b.cache_read_input_tokens as f64 * read
                + b.output_tokens as f64 * output
        })
        .sum::<f64>()
        / 1e6
}

/// Every `cache_control` of a request, as (message index or -1 for
/// system and tools, block type).
fn markers(body: &Value) -> Vec<(i64, String)> {
    let mut found = Vec::new();
    for block in body["tools"]
        .as_array()
        .into_iter()
        .chain(body["system"].as_array())
        .flatten()
    {
        if block.get("cache_control").is_some() {
            found.push((-1, block["type"].as_str().unwrap_or("tool").to_owned()));
        }
    }
    for (index, message) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for block in message["content"].as_array().into_iter().flatten() {
            if block.get("cache_control").is_some() {
                found.push((
                    index as i64,
                    block["type"].as_str().unwrap_or_default().to_owned(),
                ));
            }
        }
    }
    found
}

#[test]
fn anthropic_thinking_and_caching_pass_the_strict_server_and_cost_what_it_billed() {
    let fixture = Fixture::new();
    // Interleaved thinking lets the budget exceed the output limit.
    let tasks = fixed_task(&fixture);
    let (server, cached) = run_task(
        &fixture,
        &tasks,
        "cached",
        &[
            "--thinking-budget",
            "10000",
            "--max-output-tokens",
            "4096",
            "--interleaved-thinking",
        ],
    );
    assert_eq!(cached.code, 0, "stderr:\n{}", cached.stderr);
    assert_eq!(server.refusals(), Vec::<String>::new());
    let row = cached.row("t");
    assert_eq!(row["status"], "passed", "{row:?}");
    assert_eq!(row["turns"], "3");

    let requests = server.server.requests();
    assert_eq!(requests.len(), 3);
    for (turn, request) in requests.iter().enumerate() {
        assert_eq!(request.header("anthropic-beta"), Some(INTERLEAVED_BETA));
        assert_eq!(request.body["thinking"]["budget_tokens"], 10000);
        // The system prompt and the two newest user turns (one at first).
        let found = markers(&request.body);
        let users: Vec<i64> = (0..request.body["messages"].as_array().expect("messages").len()
            as i64)
            .filter(|i| i % 2 == 0)
            .collect();
        let mut expected = vec![(-1, "text".to_owned())];
        for index in users.iter().rev().take(2).rev() {
            let kind = if *index == 0 { "text" } else { "tool_result" };
            expected.push((*index, kind.to_owned()));
        }
        assert_eq!(found, expected, "request {turn}");
    }
    // The last request holds every thinking block sent, signed, in order.
    let last = &requests[2].body["messages"];
    assert_eq!(last[1]["content"][0]["type"], "thinking");
    assert_eq!(last[3]["content"][1]["type"], "redacted_thinking");

    // Each request reads what the one before wrote and writes the rest:
    // the breakpoint at its end covers the whole request.
    let bills = server.bills();
    assert_eq!(bills[0].cache_read_input_tokens, 0);
    for k in 1..bills.len() {
        let before = bills[k - 1];
        assert_eq!(
            bills[k].cache_read_input_tokens,
            before.cache_read_input_tokens + before.cache_creation_input_tokens,
            "request {k}: {bills:?}"
        );
    }
    assert!(bills.iter().all(|b| b.input_tokens == 0), "{bills:?}");

    // The CSV: tokens as billed, cost priced by hand at Sonnet's rates:
    // sum over requests of (input x 3 + write x 3.75 + read x 0.30 +
    // output x 15) / 1e6.
    let read: u64 = bills.iter().map(|b| b.cache_read_input_tokens).sum();
    let written: u64 = bills.iter().map(|b| b.cache_creation_input_tokens).sum();
    let prompt: u64 = read + written + bills.iter().map(|b| b.input_tokens).sum::<u64>();
    assert_eq!(row["cached_input_tokens"], read.to_string());
    assert_eq!(row["cache_write_tokens"], written.to_string());
    assert_eq!(row["prompt_tokens"], prompt.to_string());
    assert_eq!(row["reasoning_tokens"], "0");
    let cost = f64_of(&row, "cost_usd");
    assert!(
        (cost - priced(&bills)).abs() < 1e-6,
        "{cost} vs {}",
        priced(&bills)
    );

    // Neither the trajectory nor the history keeps a marker; the thinking
    // blocks are recorded with their signatures.
    let trajectory =
        std::fs::read_to_string(cached.task_dir("t").join("trajectory.jsonl")).expect("trajectory");
    assert!(!trajectory.contains("cache_control"), "{trajectory}");
    assert!(trajectory.contains(&crate::support::messages::sign(
        "The bug is in lib.txt; read it."
    )));

    // The same task without the cache: the same tokens, every one input.
    let (plain_server, plain) = run_task(
        &fixture,
        &tasks,
        "uncached",
        &["--no-prompt-cache", "--thinking-budget", "2048"],
    );
    assert_eq!(plain.code, 0, "stderr:\n{}", plain.stderr);
    assert!(
        plain_server
            .server
            .requests()
            .iter()
            .all(|r| markers(&r.body).is_empty())
    );
    assert!(
        plain_server
            .server
            .requests()
            .iter()
            .all(|r| r.header("anthropic-beta").is_none())
    );
    let plain_bills = plain_server.bills();
    assert!(
        plain_bills
            .iter()
            .all(|b| b.cache_read_input_tokens + b.cache_creation_input_tokens == 0)
    );
    let plain_row = plain.row("t");
    assert_eq!(plain_row["prompt_tokens"], prompt.to_string());
    assert_eq!(plain_row["cached_input_tokens"], "0");
    let plain_cost = f64_of(&plain_row, "cost_usd");
    assert!((plain_cost - priced(&plain_bills)).abs() < 1e-6);

    // report: the cost without the cache is what the uncached run paid.
    let report = onebash_ok(&["report", path_arg(&cached.out), "--format", "json"]);
    let report: Value = serde_json::from_str(&report).expect("JSON");
    let cache = &report["prompt_cache"];
    assert_eq!(cache["cached_input_tokens"], read);
    assert!(
        (cache["cost_without_cache_usd"].as_f64().expect("number") - plain_cost).abs() < 1e-6,
        "{cache}"
    );
    assert!((cache["saved_usd"].as_f64().expect("number") - (plain_cost - cost)).abs() < 1e-6);
    let text = onebash_ok(&["report", path_arg(&cached.out)]);
    assert!(
        text.contains(&format!(
            "prompt cache: {read} input tokens read, {written} written"
        )),
        "{text}"
    );
}

/// The API refuses `temperature` beside thinking: onebash says so before
/// any task, with exit code 2, and the server hears nothing.
#[test]
fn anthropic_thinking_with_a_temperature_is_bad_usage() {
    let fixture = Fixture::new();
    let tasks = fixed_task(&fixture);
    let (server, refused) = run_task(
        &fixture,
        &tasks,
        "out",
        &["--thinking-budget", "2048", "--temperature", "0.2"],
    );
    assert_eq!(refused.code, 2, "stderr:\n{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("--temperature cannot be sent with extended thinking"),
        "{}",
        refused.stderr
    );
    assert!(refused.stderr.contains("hint:"), "{}", refused.stderr);
    assert!(server.server.requests().is_empty());
}
