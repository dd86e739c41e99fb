//! The agent loop: the model has one tool, `bash`.
//!
//! The whole history is sent on every turn; the assistant message is kept as
//! received; every tool call is answered, in order, with its `tool_call_id`
//! before the next model call; several calls in one answer run one after
//! another; an answer without a tool call ends the loop. Caps (turns, tokens)
//! are checked before each model call, the task timeout and Ctrl-C around the
//! whole loop. Every step goes to the trajectory as it happens.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::agent::bash_tool::{self, ToolAnswer};
use crate::agent::model::{ModelClient, RetryNote};
use crate::agent::types::{ModelError, ModelReply, ToolCall};
use crate::env::Shell;
use crate::events::{Cancel, EventSink, Phase};
use crate::run_folder::trajectory::{Event, TrajectoryWriter};
use crate::run_folder::{ExitReason, Usage};
use crate::task::TaskSpec;
use crate::task::prompt::RenderedPrompt;

/// The caps of one task's agent phase.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AgentLimits {
    pub max_turns: u32,
    pub max_tokens: Option<u64>,
    /// USD per task; checked only where the price is known.
    pub max_cost: Option<f64>,
    pub command_timeout: Duration,
    pub task_timeout: Duration,
}

/// How the agent phase ended.
#[derive(Debug, Clone)]
pub(crate) struct AgentOutcome {
    pub exit_reason: ExitReason,
    /// Model calls made (a failed call counts).
    pub turns: u32,
    /// Tool calls the model asked for.
    pub tool_calls: u32,
    pub usage: Usage,
    /// What the usage cost, where the price is known.
    pub cost_usd: Option<f64>,
    /// Model calls retried, and the time spent waiting before retries.
    pub retries: u32,
    pub retry_wait: Duration,
    /// Replaying: commands whose output differs from the recording.
    pub replay_divergences: u32,
    pub duration: Duration,
    pub error: Option<String>,
}

/// What the loop needs; borrowed for the length of one task.
pub(crate) struct AgentContext<'a> {
    pub client: &'a ModelClient,
    pub task: &'a TaskSpec,
    pub epoch: u32,
    pub prompt: &'a RenderedPrompt,
    /// Where and how the agent's commands run.
    pub commands: Shell<'a>,
    pub limits: AgentLimits,
    pub events: &'a EventSink,
    pub cancel: &'a Cancel,
}

/// Counters the loop updates as it goes, readable after it was stopped from
/// outside (timeout, Ctrl-C).
#[derive(Default)]
struct Progress {
    turns: u32,
    tool_calls: u32,
    usage: Usage,
    retries: u32,
    retry_wait: Duration,
    replay_divergences: u32,
}

/// How long past the task deadline (or Ctrl-C) the conversation may take
/// to record what it was doing before it is dropped.
const BACKSTOP_GRACE: Duration = Duration::from_secs(5);

/// Why the conversation ended.
struct Ended {
    reason: ExitReason,
    error: Option<String>,
}

/// What can end the conversation from outside.
#[derive(Debug, Clone, Copy)]
enum Cut {
    Deadline,
    Cancel,
}

impl Cut {
    fn describe(self) -> &'static str {
        match self {
            Cut::Deadline => "cut by the task timeout",
            Cut::Cancel => "interrupted by the user",
        }
    }
}

impl Ended {
    fn by(cut: Cut) -> Ended {
        match cut {
            Cut::Deadline => Ended {
                reason: ExitReason::TaskTimeout,
                error: None,
            },
            Cut::Cancel => Ended {
                reason: ExitReason::Interrupted,
                error: Some(Cut::Cancel.describe().to_owned()),
            },
        }
    }
}

/// Runs `future` unless the deadline passes or Ctrl-C comes first.
async fn unless_cut<F: std::future::Future>(
    future: F,
    deadline: tokio::time::Instant,
    cancel: &Cancel,
) -> Result<F::Output, Cut> {
    tokio::select! {
        output = future => Ok(output),
        () = tokio::time::sleep_until(deadline) => Err(Cut::Deadline),
        () = cancel.cancelled() => Err(Cut::Cancel),
    }
}

pub(crate) async fn run_agent(
    ctx: &AgentContext<'_>,
    trajectory: &mut TrajectoryWriter,
) -> AgentOutcome {
    let started = Instant::now();
    let mut progress = Progress::default();
    let deadline = tokio::time::Instant::from_std(started + ctx.limits.task_timeout);
    let ended = {
        let conversation = converse(ctx, trajectory, &mut progress, deadline);
        // The conversation watches the deadline and Ctrl-C itself, so that
        // what was in flight is recorded; this is the backstop in case it
        // does not return in time.
        tokio::select! {
            biased;
            ended = tokio::time::timeout_at(deadline + BACKSTOP_GRACE, conversation) => match ended {
                Ok(ended) => ended,
                Err(_) => Ended::by(Cut::Deadline),
            },
            () = async {
                ctx.cancel.cancelled().await;
                tokio::time::sleep(BACKSTOP_GRACE).await;
            } => Ended::by(Cut::Cancel),
        }
    };
    let outcome = AgentOutcome {
        exit_reason: ended.reason,
        turns: progress.turns,
        tool_calls: progress.tool_calls,
        usage: progress.usage,
        cost_usd: ctx.client.cost(&progress.usage),
        retries: progress.retries,
        retry_wait: progress.retry_wait,
        replay_divergences: progress.replay_divergences,
        duration: started.elapsed(),
        error: ended.error,
    };
    trajectory
        .write(&Event::AgentEnd {
            exit_reason: outcome.exit_reason,
            turns: outcome.turns,
            tool_calls: outcome.tool_calls,
            usage: outcome.usage,
            cost_usd: outcome.cost_usd,
            retries: outcome.retries,
            retry_wait_s: outcome.retry_wait.as_secs_f64(),
            duration_s: outcome.duration.as_secs_f64(),
            error: outcome.error.clone(),
        })
        .await;
    outcome
}

/// The conversation: the opening messages, then turns of a model call and
/// its tool calls until an answer without a tool call, a cap, the deadline
/// or Ctrl-C ends it.
async fn converse(
    ctx: &AgentContext<'_>,
    trajectory: &mut TrajectoryWriter,
    progress: &mut Progress,
    deadline: tokio::time::Instant,
) -> Ended {
    if ctx.client.system_apart() {
        trajectory
            .write(&Event::System {
                content: ctx.prompt.system.clone(),
            })
            .await;
    }
    let mut messages: Vec<Value> = ctx.client.initial_messages(ctx.prompt);
    for message in &messages {
        trajectory
            .write(&Event::Message {
                turn: 0,
                message: message.clone(),
            })
            .await;
    }
    loop {
        if let Some(reason) = cap_reached(ctx, progress) {
            return Ended {
                reason,
                error: None,
            };
        }
        progress.turns += 1;
        let turn = progress.turns;
        let reply = match ask_model(ctx, trajectory, progress, &messages, deadline).await {
            Ok(reply) => reply,
            Err(ended) => return ended,
        };
        messages.push(reply.message.clone());
        if reply.tool_calls.is_empty() {
            let reason = if reply.cut {
                ExitReason::Length
            } else {
                ExitReason::Completed
            };
            return Ended {
                reason,
                error: None,
            };
        }
        // Whatever finish_reason says, tool calls are run, in order; the
        // answers go back together, as the protocol wants them.
        progress.tool_calls += reply.tool_calls.len() as u32;
        let (results, cut) =
            run_tool_calls(ctx, trajectory, progress, turn, &reply.tool_calls, deadline).await;
        for message in ctx.client.tool_results(&results) {
            trajectory
                .write(&Event::Message {
                    turn,
                    message: message.clone(),
                })
                .await;
            messages.push(message);
        }
        if let Some(cut) = cut {
            return Ended::by(cut);
        }
    }
}

/// Model call number `progress.turns`, with its retries, recorded; its
/// answer, or how its failure ends the conversation.
async fn ask_model(
    ctx: &AgentContext<'_>,
    trajectory: &mut TrajectoryWriter,
    progress: &mut Progress,
    messages: &[Value],
    deadline: tokio::time::Instant,
) -> Result<ModelReply, Ended> {
    let turn = progress.turns;
    ctx.events
        .phase(&ctx.task.id, ctx.epoch, Phase::Model { turn });
    let asked = Instant::now();
    // The last failure of this call, if it is being retried: a call cut
    // by the deadline while the API kept failing is the API's fault.
    let mut failing: Option<String> = None;
    let answered = {
        let mut on_retry = |note: &RetryNote| {
            progress.retries += 1;
            // Only the part of the wait the task lives to see is waited.
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            progress.retry_wait += note.wait.min(left);
            failing = Some(note.error.clone());
            trajectory.write_soon(&Event::ModelRetry {
                turn,
                retry: note.retry,
                status: note.status,
                error: note.error.clone(),
                wait_s: note.wait.as_secs_f64(),
            });
        };
        let call = ctx.client.complete(
            ctx.task,
            ctx.epoch,
            &ctx.prompt.system,
            messages,
            &mut on_retry,
        );
        unless_cut(call, deadline, ctx.cancel).await
    };
    let reply = match answered {
        Ok(Ok(reply)) => reply,
        Err(cut) => {
            trajectory
                .write(&Event::ModelError {
                    turn,
                    latency_s: asked.elapsed().as_secs_f64(),
                    error: format!("the model call was {}", cut.describe()),
                })
                .await;
            if let (Cut::Deadline, Some(last)) = (cut, failing) {
                return Err(Ended {
                    reason: ExitReason::ApiError,
                    error: Some(format!(
                        "the model API kept failing until the task timeout; last failure: {last}"
                    )),
                });
            }
            return Err(Ended::by(cut));
        }
        // A replay whose recording ran out made no call: it ends as the
        // recording did, with the recording's count of turns.
        Ok(Err(ModelError::RecordingEnded { reason, error })) => {
            progress.turns -= 1;
            return Err(Ended { reason, error });
        }
        Ok(Err(err)) => return Err(call_failed(trajectory, turn, asked, err).await),
    };
    progress.usage += reply.usage;
    trajectory
        .write(&Event::ModelCall {
            turn,
            latency_s: asked.elapsed().as_secs_f64(),
            usage: reply.usage,
            finish_reason: reply.finish_reason.clone(),
            response_id: reply.response_id.clone(),
        })
        .await;
    trajectory
        .write(&Event::Message {
            turn,
            message: reply.message.clone(),
        })
        .await;
    Ok(reply)
}

/// A model call that failed for good, in the trajectory, and how the task
/// ends for it.
async fn call_failed(
    trajectory: &mut TrajectoryWriter,
    turn: u32,
    asked: Instant,
    err: ModelError,
) -> Ended {
    trajectory
        .write(&Event::ModelError {
            turn,
            latency_s: asked.elapsed().as_secs_f64(),
            error: err.to_string(),
        })
        .await;
    let reason = match err {
        ModelError::ContextOverflow(_) => ExitReason::ContextOverflow,
        ModelError::PatchDoesNotApply(_) => ExitReason::PatchError,
        _ => ExitReason::ApiError,
    };
    Ended {
        reason,
        error: Some(err.to_string()),
    }
}

/// Runs the tool calls of one answer, in order: the (call id, answer)
/// pairs of those that ran, and what cut the rest, if anything did.
async fn run_tool_calls(
    ctx: &AgentContext<'_>,
    trajectory: &mut TrajectoryWriter,
    progress: &mut Progress,
    turn: u32,
    calls: &[ToolCall],
    deadline: tokio::time::Instant,
) -> (Vec<(String, String)>, Option<Cut>) {
    let mut results: Vec<(String, String)> = Vec::with_capacity(calls.len());
    for call in calls {
        match run_tool_call(ctx, trajectory, progress, turn, call, deadline).await {
            Ok(content) => results.push((call.id.clone(), content)),
            Err(why) => return (results, Some(why)),
        }
        if tokio::time::Instant::now() >= deadline {
            return (results, Some(Cut::Deadline));
        }
    }
    (results, None)
}

/// The cap that stops the next model call, if one is reached.
fn cap_reached(ctx: &AgentContext<'_>, progress: &Progress) -> Option<ExitReason> {
    if progress.turns >= ctx.limits.max_turns {
        return Some(ExitReason::MaxTurns);
    }
    if ctx
        .limits
        .max_tokens
        .is_some_and(|max| progress.usage.total_tokens >= max)
    {
        return Some(ExitReason::MaxTokens);
    }
    if let (Some(max), Some(cost)) = (ctx.limits.max_cost, ctx.client.cost(&progress.usage))
        && cost >= max
    {
        return Some(ExitReason::MaxCost);
    }
    None
}

/// Runs one tool call and records it; returns what the model reads, or
/// why it could not finish.
async fn run_tool_call(
    ctx: &AgentContext<'_>,
    trajectory: &mut TrajectoryWriter,
    progress: &mut Progress,
    turn: u32,
    call: &ToolCall,
    deadline: tokio::time::Instant,
) -> Result<String, Cut> {
    ctx.events.phase(
        &ctx.task.id,
        ctx.epoch,
        Phase::Command {
            turn,
            command: call.arguments.clone(),
        },
    );
    // A command never outlives the task's own deadline: its timeout is
    // clipped to it, so it ends by itself and is recorded.
    let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
    if remaining.is_zero() {
        return Err(Cut::Deadline);
    }
    let timeout = ctx.limits.command_timeout.min(remaining);
    let ran = tokio::select! {
        answer = bash_tool::answer(call, ctx.commands, timeout) => Some(answer),
        () = ctx.cancel.cancelled() => None,
    };
    let Some(answer) = ran else {
        trajectory
            .write(&Event::ToolError {
                turn,
                tool_call_id: call.id.clone(),
                error: format!("the command was {}", Cut::Cancel.describe()),
            })
            .await;
        return Err(Cut::Cancel);
    };
    match &answer {
        ToolAnswer::Ran {
            record,
            shown_chars,
            ..
        } => {
            trajectory
                .write(&Event::Command {
                    turn,
                    tool_call_id: call.id.clone(),
                    record: record.clone(),
                    shown_chars: *shown_chars,
                })
                .await;
            // Replaying: the same command must say the same thing.
            if let Some(recorded) = ctx.client.recorded_output(ctx.task, ctx.epoch, &call.id)
                && recorded != record.output
            {
                progress.replay_divergences += 1;
                trajectory
                    .write(&Event::ReplayDivergence {
                        turn,
                        tool_call_id: call.id.clone(),
                        recorded_output: recorded,
                        output: record.output.clone(),
                    })
                    .await;
            }
        }
        ToolAnswer::Rejected { content } => {
            trajectory
                .write(&Event::ToolError {
                    turn,
                    tool_call_id: call.id.clone(),
                    error: content.clone(),
                })
                .await
        }
    }
    Ok(answer.content().to_owned())
}
