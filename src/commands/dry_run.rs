//! `run --dry-run`: every check a run makes before its first task, then
//! what would run, and nothing else: no model call, no run folder, no
//! image pulled or unpacked, no repo checked out.
//!
//! The checks are the run's own: the arguments, tasks and dataset
//! (`RunConfig::from_options`, already passed when this is called), the
//! machine and images as the probe would find them
//! (`RunConfig::look`), and a resume's settings against the run folder's.

use std::fmt::Write as _;

use crate::config::RunConfig;
use crate::config::probe::Looked;
use crate::config::{ConfigError, Unprobed};
use crate::env::EnvKind;
use crate::env::oci::Readiness;
use crate::run_folder::RunFolder;

/// How many tasks the plan lists by name.
const LISTED_TASKS: usize = 5;

/// Makes the checks; the plan to print, or the error the run would stop
/// with (its exit code the run's).
pub(crate) fn dry_run(config: &RunConfig<Unprobed>) -> Result<String, ConfigError> {
    let looked = config.look()?;
    if config.resume {
        let folder = RunFolder::at(&config.out_dir);
        crate::runner::resume::check_fingerprint(
            &folder,
            &config.fingerprint_with(looked.sandbox_used),
        )
        .map_err(|err| ConfigError::Usage(err.to_string()))?;
    }
    Ok(plan(config, &looked))
}

/// The plan, for people: what runs, where, from what.
fn plan(config: &RunConfig<Unprobed>, looked: &Looked) -> String {
    let mut out = String::new();
    for warning in config.warnings.iter().chain(&looked.warnings) {
        let _ = writeln!(out, "warning: {warning}");
    }
    let tasks = config.tasks.len();
    let epochs = config.runs;
    let _ = writeln!(
        out,
        "dry run: every check passed; nothing ran and nothing was written"
    );
    let _ = writeln!(
        out,
        "tasks:    {tasks} {} x {epochs} epoch{} = {} runs, {} at a time",
        plural(tasks, "task", "tasks"),
        if epochs == 1 { "" } else { "s" },
        tasks * epochs as usize,
        config.jobs
    );
    match &config.dataset {
        Some(dataset) => {
            let _ = writeln!(
                out,
                "dataset:  {} = hf:{} split {}, revision {} at {} ({} {})",
                dataset.reference,
                dataset.repo,
                dataset.split,
                dataset.revision,
                dataset.sha,
                dataset.files.len(),
                plural(dataset.files.len(), "file", "files"),
            );
        }
        None => {
            let _ = writeln!(out, "from:     {}", config.task_file.display());
        }
    }
    let _ = writeln!(out, "model:    {}", config.model.name());
    let _ = writeln!(out, "prompt:   {}", config.prompt_name);
    let _ = writeln!(
        out,
        "env:      {}{}",
        env_name(config.env_kind),
        match config.env_kind {
            EnvKind::Host => format!(" (sandbox: {})", looked.sandbox_used),
            _ => String::new(),
        }
    );
    if !looked.images.is_empty() {
        let present = looked
            .images
            .iter()
            .filter(|(_, state)| *state == Readiness::Present)
            .count();
        let _ = writeln!(
            out,
            "images:   {} ({present} present, {} to pull)",
            looked.images.len(),
            looked.images.len() - present
        );
    }
    let _ = writeln!(out, "first tasks:");
    for task in config.tasks.iter().take(LISTED_TASKS) {
        let image = task.image.as_deref().map(|image| {
            let state = looked
                .images
                .iter()
                .find(|(name, _)| name == image)
                .map(|(_, state)| state);
            match state {
                Some(Readiness::Present) => format!("{image} (present)"),
                Some(Readiness::ToPull(digest)) => format!("{image} (to pull: {digest})"),
                Some(Readiness::ToPullAgain) => format!("{image} (to pull again)"),
                None => image.to_owned(),
            }
        });
        let _ = writeln!(
            out,
            "  {}{}",
            task.id,
            image.map(|i| format!("  {i}")).unwrap_or_default()
        );
    }
    if tasks > LISTED_TASKS {
        let _ = writeln!(out, "  ... and {} more", tasks - LISTED_TASKS);
    }
    let _ = writeln!(
        out,
        "out:      {}{}",
        config.out_dir.display(),
        if config.resume {
            " (resumed: its settings match)"
        } else {
            " (not made)"
        }
    );
    out
}

/// `--env`'s word: the image backends' names, and `host`.
fn env_name(kind: EnvKind) -> &'static str {
    kind.image_backend().unwrap_or("host")
}

fn plural(n: usize, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 { one } else { many }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::run_args;
    use crate::config::options::TASK_LINE;

    /// `--dry-run` makes the run's checks and prints the plan without
    /// writing the run folder; a resume's other settings are refused as
    /// the run would refuse them.
    #[test]
    fn a_dry_run_prints_the_plan_and_writes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tasks = dir.path().join("tasks.jsonl");
        let lines: Vec<String> = (1..=7)
            .map(|i| TASK_LINE.replace(r#""id": "t""#, &format!(r#""id": "t{i}""#)))
            .collect();
        std::fs::write(&tasks, lines.join("\n")).expect("write");
        let out = dir.path().join("out");
        let out_arg = out.to_str().expect("a UTF-8 path");
        let args = run_args(
            &tasks,
            &[
                "--model",
                "oracle",
                "--sandbox",
                "none",
                "-o",
                out_arg,
                "--runs",
                "2",
                "--dry-run",
            ],
        );
        let config = RunConfig::from_options(&args.options(), &crate::config::Secrets::default())
            .expect("valid");
        let plan = dry_run(&config).expect("checks pass");
        assert!(
            plan.contains("tasks:    7 tasks x 2 epochs = 14 runs"),
            "{plan}"
        );
        assert!(plan.contains("model:    oracle"), "{plan}");
        assert!(plan.contains("env:      host (sandbox: none)"), "{plan}");
        assert!(
            plan.contains("  t1\n") && plan.contains("  ... and 2 more"),
            "{plan}"
        );
        assert!(!out.exists(), "a dry run writes no run folder");
    }
}
