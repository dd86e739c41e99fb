//! Turns run events into progress on stderr: bars on a terminal (one overall
//! bar and a line per running task), plain lines otherwise. Owns nothing
//! else; the final summary is printed by the `run` command.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::events::{Phase, RunEvent};
use crate::run_folder::{ResultRow, Status};
use crate::sys::words::count;
use crate::task::TaskId;

#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    done: usize,
    passed: usize,
    failed: usize,
    errors: usize,
}

pub(crate) struct ProgressDisplay {
    counts: Counts,
    total: usize,
    bars: Option<Bars>,
}

struct Bars {
    multi: MultiProgress,
    overall: ProgressBar,
    tasks: HashMap<(TaskId, u32), ProgressBar>,
}

impl ProgressDisplay {
    /// Bars when stderr is a terminal, plain lines when it is not.
    pub(crate) fn new() -> ProgressDisplay {
        let bars = std::io::stderr().is_terminal().then(|| {
            let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr_with_hz(10));
            let overall = multi.add(ProgressBar::new(0));
            overall.set_style(
                ProgressStyle::with_template(
                    "{bar:30.cyan/blue} {pos}/{len} tasks  {msg}  elapsed {elapsed}  eta {eta}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            Bars {
                multi,
                overall,
                tasks: HashMap::new(),
            }
        });
        ProgressDisplay {
            counts: Counts::default(),
            total: 0,
            bars,
        }
    }

    pub(crate) fn handle(&mut self, event: &RunEvent) {
        match event {
            RunEvent::RunStarted { total } => {
                self.total = *total;
                if let Some(bars) = &self.bars {
                    bars.overall.set_length(*total as u64);
                    bars.overall.set_message(self.counts_text());
                }
            }
            RunEvent::TaskStarted { task, epoch } => {
                if let Some(bars) = &mut self.bars {
                    let line = bars.multi.add(ProgressBar::new_spinner());
                    line.set_style(
                        ProgressStyle::with_template("  {spinner} {prefix:.bold} {wide_msg}")
                            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                    );
                    line.set_prefix(task_label(task, *epoch));
                    line.enable_steady_tick(Duration::from_millis(200));
                    bars.tasks.insert((task.clone(), *epoch), line);
                }
            }
            RunEvent::TaskPhase { task, epoch, phase } => {
                if let Some(bars) = &self.bars
                    && let Some(line) = bars.tasks.get(&(task.clone(), *epoch))
                {
                    line.set_message(describe(phase));
                }
            }
            RunEvent::TaskFinished { row } => {
                self.counts.done += 1;
                match row.status {
                    Status::Passed => self.counts.passed += 1,
                    Status::Failed => self.counts.failed += 1,
                    Status::Error => self.counts.errors += 1,
                }
                let line = self.finished_line(row);
                let counts = self.counts_text();
                match &mut self.bars {
                    Some(bars) => {
                        if let Some(bar) = bars.tasks.remove(&(row.task_id.clone(), row.epoch)) {
                            bar.finish_and_clear();
                            bars.multi.remove(&bar);
                        }
                        bars.overall.inc(1);
                        bars.overall.set_message(counts);
                        let _ = bars.multi.println(line);
                    }
                    None => eprintln_plain(&line),
                }
            }
            RunEvent::Warning(message) => {
                let line = format!("warning: {message}");
                match &self.bars {
                    Some(bars) => {
                        let _ = bars.multi.println(line);
                    }
                    None => eprintln_plain(&line),
                }
            }
        }
    }

    /// Clears the bars before the summary is printed.
    pub(crate) fn finish(&mut self) {
        if let Some(bars) = self.bars.take() {
            for (_, bar) in bars.tasks {
                bar.finish_and_clear();
            }
            bars.overall.finish_and_clear();
            let _ = bars.multi.clear();
        }
    }

    fn counts_text(&self) -> String {
        format!(
            "passed {}  failed {}  error {}",
            self.counts.passed, self.counts.failed, self.counts.errors
        )
    }

    fn finished_line(&self, row: &ResultRow) -> String {
        let word = match row.status {
            Status::Passed => "passed",
            Status::Failed => "failed",
            Status::Error => "error ",
        };
        let width = self.total.to_string().len();
        let mut line = format!(
            "[{:>width$}/{}] {word} {}  {}, {}, {:.1} s",
            self.counts.done,
            self.total,
            task_label(&row.task_id, row.epoch),
            row.exit_reason.as_str(),
            count(row.turns as usize, "turn", "turns"),
            row.wall_seconds,
        );
        if !row.error.is_empty() {
            line.push_str(&format!("  ({})", row.error));
        }
        line
    }
}

impl Default for ProgressDisplay {
    fn default() -> Self {
        ProgressDisplay::new()
    }
}

fn task_label(task: &TaskId, epoch: u32) -> String {
    if epoch == 1 {
        task.to_string()
    } else {
        format!("{task} #{epoch}")
    }
}

fn describe(phase: &Phase) -> String {
    match phase {
        Phase::Checkout => "checking out".to_owned(),
        Phase::Setup => "running setup_command".to_owned(),
        Phase::Model { turn } => format!("turn {turn}: waiting for the model"),
        Phase::Command { turn, command } => {
            // The raw arguments are JSON; show the command itself when it is there.
            let command = serde_json::from_str::<serde_json::Value>(command)
                .ok()
                .and_then(|v| v.get("command").and_then(|c| c.as_str()).map(str::to_owned))
                .unwrap_or_else(|| command.clone());
            let first_line: String = command
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(80)
                .collect();
            format!("turn {turn}: $ {first_line}")
        }
        Phase::Test => "running the tests".to_owned(),
    }
}

fn eprintln_plain(line: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "{line}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_folder::ExitReason;

    /// A task's finished line counts its turns as words do: it said
    /// "1 turns".
    #[test]
    fn a_finished_line_of_one_turn_says_turn() {
        let display = ProgressDisplay {
            counts: Counts::default(),
            total: 2,
            bars: None,
        };
        let mut row = ResultRow::blank(
            TaskId::parse("t").expect("an id"),
            1,
            "m".to_owned(),
            "default".to_owned(),
            ExitReason::Completed,
        );
        for (turns, words) in [(1, ", 1 turn, "), (2, ", 2 turns, ")] {
            row.turns = turns;
            let line = display.finished_line(&row);
            assert!(line.contains(words), "{line}");
        }
    }
}
