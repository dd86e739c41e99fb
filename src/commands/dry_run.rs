//! `run --dry-run`: every check a run makes before its first task, then
//! what would run: no model call, no run folder, no image pulled or
//! unpacked, no repo checked out.
//!
//! The checks are the run's own: the arguments, tasks and dataset
//! (`RunConfig::from_options`, already passed when this is called), the
//! machine and images as the probe would find them (`RunConfig::look`), a
//! resume's settings against the run folder's, the model API's preflight
//! (a GET of its models list, which costs no tokens), and that every repo
//! path on this machine exists. A check that fails does not hide the
//! others: the plan is printed whole, each failure in it, and the dry run
//! exits with the most serious failure's code ([`CheckFailure::exit_code`]).

use std::fmt::Write as _;

use crate::agent::types::ModelError;
use crate::commands::error::{EXIT_API_REFUSED, EXIT_OK, EXIT_TASK_ERRORS, EXIT_USAGE};
use crate::config::RunConfig;
use crate::config::Unprobed;
use crate::config::model_choice::ModelChoice;
use crate::config::probe::{Looked, ProbeError};
use crate::env::EnvKind;
use crate::env::oci::Readiness;
use crate::run_folder::RunFolder;
use crate::runner::resume::ResumeError;
use crate::sys::words::{count, plural};
use crate::task::TaskId;

/// How many tasks the plan lists by name.
const LISTED_TASKS: usize = 5;

/// What a dry run found: the plan to print, with every failed check in
/// it, and the exit code.
#[derive(Debug)]
pub(crate) struct DryRun {
    pub text: String,
    /// The most serious failure's code; 0 when every check passed.
    pub code: i32,
}

/// A check of the dry run that failed, as the run would meet it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CheckFailure {
    /// The engine, an image, `--env oci`'s cache or registry, or bwrap.
    #[error(transparent)]
    Machine(#[from] ProbeError),
    /// `--resume` of a run folder with other settings.
    #[error(transparent)]
    Resume(#[from] ResumeError),
    /// The model API's preflight: nothing listens, or the key is refused.
    #[error("the model API refused the run: {source}\n  url: {url}\nhint: {hint}")]
    ModelApi {
        url: String,
        #[source]
        source: ModelError,
        hint: &'static str,
    },
    /// Tasks' repo is a path on this machine with nothing there: one
    /// failure a path, however many tasks name it.
    #[error("repo path {} does not exist (the repo of {})", path.display(), some_of(tasks))]
    NoRepoPath {
        path: std::path::PathBuf,
        tasks: Vec<TaskId>,
    },
}

impl CheckFailure {
    /// The code the run gives this failure (docs/exit-codes.md): the
    /// machine's and the resume's stop it with 2, the model API's with 3,
    /// and a missing repo path ends its task in error (1).
    pub(crate) fn exit_code(&self) -> i32 {
        match self {
            CheckFailure::Machine(_) | CheckFailure::Resume(_) => EXIT_USAGE,
            CheckFailure::ModelApi { .. } => EXIT_API_REFUSED,
            CheckFailure::NoRepoPath { .. } => EXIT_TASK_ERRORS,
        }
    }
}

/// Makes every check, whatever fails; the plan and the exit code.
pub(crate) fn dry_run(config: &RunConfig<Unprobed>) -> DryRun {
    let mut looked = config.look();
    let mut failures: Vec<CheckFailure> = looked.failures.drain(..).map(Into::into).collect();
    failures.extend(repo_paths(config));
    if config.resume {
        let folder = RunFolder::at(&config.out_dir);
        if let Err(err) = crate::runner::resume::check_fingerprint(
            &folder,
            &config.fingerprint_with(looked.sandbox_used),
        ) {
            failures.push(err.into());
        }
    }
    let api = model_api(&config.model, config.grading);
    let (api_line, api_failure) = match api {
        ApiCheck::NoApi => (None, None),
        ApiCheck::Answered { url } => (
            Some(format!(
                "{url} did not refuse the run (a GET of its models list; no model call)"
            )),
            None,
        ),
        ApiCheck::NotChecked { why } => (Some(format!("not checked: {why}")), None),
        ApiCheck::Refused(failure) => (
            Some("refused the run (see the error above)".to_owned()),
            Some(failure),
        ),
    };
    failures.extend(api_failure);
    let code = failures
        .iter()
        .map(CheckFailure::exit_code)
        .max()
        .unwrap_or(EXIT_OK);
    DryRun {
        text: plan(config, &looked, &failures, api_line.as_deref()),
        code,
    }
}

/// Every task whose repo onebash checks out from a path on this machine
/// where nothing is: the run would end it as `checkout_error`. A task
/// whose repo is its image's, in an image environment, needs none.
fn repo_paths(config: &RunConfig<Unprobed>) -> Vec<CheckFailure> {
    let mut failures: Vec<CheckFailure> = Vec::new();
    for task in &config.tasks {
        if !matches!(task.benchmark.code(), crate::task::Code::Checkout)
            && config.env_kind != EnvKind::Host
        {
            continue;
        }
        let Some(path) = crate::checkout::missing_repo_path(&task.repo_location) else {
            continue;
        };
        let named = failures.iter_mut().find_map(|failure| match failure {
            CheckFailure::NoRepoPath { path: seen, tasks } if *seen == path => Some(tasks),
            _ => None,
        });
        match named {
            Some(tasks) => tasks.push(task.id.clone()),
            None => failures.push(CheckFailure::NoRepoPath {
                path,
                tasks: vec![task.id.clone()],
            }),
        }
    }
    failures
}

/// The first few of `tasks` by id, and how many more.
fn some_of(tasks: &[TaskId]) -> String {
    const NAMED: usize = 3;
    let named: Vec<String> = tasks.iter().take(NAMED).map(ToString::to_string).collect();
    match tasks.len().saturating_sub(NAMED) {
        0 => named.join(", "),
        more => format!("{} and {more} more", named.join(", ")),
    }
}

/// What the model API's preflight said.
enum ApiCheck {
    /// The model needs no API (oracle, noop, a replay, predictions).
    NoApi,
    /// It answered, or said nothing sure: the run would go on.
    Answered {
        url: String,
    },
    /// It could not be asked.
    NotChecked {
        why: String,
    },
    Refused(CheckFailure),
}

/// The run's own preflight (a GET of the models list, free of tokens),
/// made once here.
fn model_api(model: &ModelChoice, grading: Option<crate::grade::Rules>) -> ApiCheck {
    if !matches!(model, ModelChoice::Api(_)) {
        return ApiCheck::NoApi;
    }
    let client = match model.client(grading) {
        Ok(client) => client,
        Err(err) => {
            return ApiCheck::NotChecked {
                why: format!("{err:#}"),
            };
        }
    };
    let url = client.endpoint().unwrap_or_default();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            return ApiCheck::NotChecked {
                why: format!("failed to start the async runtime: {err}"),
            };
        }
    };
    match runtime.block_on(client.preflight()) {
        Ok(()) => ApiCheck::Answered { url },
        Err(source) => ApiCheck::Refused(CheckFailure::ModelApi {
            hint: crate::commands::run::refusal_hint(&source),
            url,
            source,
        }),
    }
}

/// The plan, for people: every failed check first, then what runs,
/// where, from what.
fn plan(
    config: &RunConfig<Unprobed>,
    looked: &Looked,
    failures: &[CheckFailure],
    api_line: Option<&str>,
) -> String {
    let mut out = String::new();
    for warning in config.warnings.iter().chain(&looked.warnings) {
        let _ = writeln!(out, "warning: {warning}");
    }
    for failure in failures {
        let _ = writeln!(out, "error: {failure}");
    }
    let tasks = config.tasks.len();
    let epochs = config.runs;
    if failures.is_empty() {
        let _ = writeln!(
            out,
            "dry run: every check passed; nothing ran and nothing was written"
        );
    } else {
        let _ = writeln!(
            out,
            "dry run: {} {} failed (above); nothing ran and nothing was written",
            failures.len(),
            plural(failures.len(), "check", "checks"),
        );
    }
    let _ = writeln!(
        out,
        "tasks:    {} x {} = {}, {} at a time",
        count(tasks, "task", "tasks"),
        count(epochs as usize, "epoch", "epochs"),
        count(tasks * epochs as usize, "run", "runs"),
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
    registry_tasks(&mut out, config);
    let _ = writeln!(out, "model:    {}", config.model.name());
    if let Some(line) = api_line {
        let _ = writeln!(out, "model API: {line}");
    }
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
    images_and_tasks(&mut out, config, looked);
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

/// The images' counts and the first tasks, each with its image's state.
fn images_and_tasks(out: &mut String, config: &RunConfig<Unprobed>, looked: &Looked) {
    let tasks = config.tasks.len();
    if !looked.images.is_empty() {
        let count = |present: bool| {
            looked
                .images
                .iter()
                .filter(|(_, state)| match state {
                    Some(Readiness::Present) => present,
                    Some(_) => !present,
                    None => false,
                })
                .count()
        };
        let unchecked = looked
            .images
            .iter()
            .filter(|(_, state)| state.is_none())
            .count();
        let _ = writeln!(
            out,
            "images:   {} ({} present, {} to pull{})",
            looked.images.len(),
            count(true),
            count(false),
            if unchecked == 0 {
                String::new()
            } else {
                format!(", {unchecked} not checked: see the errors above")
            }
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
                Some(Some(Readiness::Present)) => format!("{image} (present)"),
                Some(Some(Readiness::ToPull(digest))) => format!("{image} (to pull: {digest})"),
                Some(Some(Readiness::ToPullAgain)) => format!("{image} (to pull again)"),
                Some(None) => format!("{image} (not checked)"),
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
}

/// A registry's dataset: where it was read, and every selected task's
/// repo, commit and folder (or why it cannot run).
fn registry_tasks(out: &mut String, config: &RunConfig<Unprobed>) {
    let Some(record) = &config.registry else {
        return;
    };
    let _ = writeln!(
        out,
        "registry: {} (sha256 {}), dataset {}",
        record.registry, record.registry_sha256, record.dataset
    );
    let _ = writeln!(out, "task folders:");
    for task in &config.tasks {
        let Some(entry) = record.tasks.iter().find(|t| t.id == task.id.as_str()) else {
            continue;
        };
        let at = entry
            .commit
            .as_deref()
            .or(entry.git_commit_id.as_deref())
            .unwrap_or("HEAD");
        let place = match &entry.git_url {
            Some(url) => format!("{url}@{at} {}", entry.path),
            None => entry.path.clone(),
        };
        let _ = match task.benchmark.cannot_run() {
            Some(why) => writeln!(out, "  {}  {place}  cannot run: {why}", task.id),
            None => writeln!(out, "  {}  {place}", task.id),
        };
    }
}

/// `--env`'s word: the image backends' names, and `host`.
fn env_name(kind: EnvKind) -> &'static str {
    kind.image_backend().unwrap_or("host")
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
        // A repo path that exists: one that does not is a failed check.
        let repo = format!(r#""repo": "{}""#, dir.path().display());
        let lines: Vec<String> = lines
            .iter()
            .map(|line| line.replace(r#""repo": "/r""#, &repo))
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
        let dry = dry_run(&config);
        assert_eq!(dry.code, 0, "{}", dry.text);
        let plan = dry.text;
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

    /// A repo path with nothing there is one failed check however many
    /// tasks name it (a wrong `--repo-base` names one a repo, not one a
    /// task), and ends the dry run with a task error's code.
    #[test]
    fn a_missing_repo_path_is_one_failed_check_naming_its_tasks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tasks = dir.path().join("tasks.jsonl");
        let lines: Vec<String> = (1..=5)
            .map(|i| TASK_LINE.replace(r#""id": "t""#, &format!(r#""id": "t{i}""#)))
            .collect();
        std::fs::write(&tasks, lines.join("\n")).expect("write");
        let out = dir.path().join("out");
        let out_arg = out.to_str().expect("a UTF-8 path");
        let args = run_args(
            &tasks,
            &["--model", "oracle", "--sandbox", "none", "-o", out_arg],
        );
        let config = RunConfig::from_options(&args.options(), &crate::config::Secrets::default())
            .expect("valid");
        let dry = dry_run(&config);
        assert_eq!(dry.code, 1, "{}", dry.text);
        assert!(
            dry.text.starts_with(
                "error: repo path /r does not exist (the repo of t1, t2, t3 and 2 more)\ndry run: 1 check failed (above)"
            ),
            "{}",
            dry.text
        );
    }

    /// One task, one epoch: the plan counts them as one (it said "= 1
    /// runs").
    #[test]
    fn a_plan_of_one_task_is_one_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tasks = dir.path().join("tasks.jsonl");
        let repo = format!(r#""repo": "{}""#, dir.path().display());
        std::fs::write(&tasks, TASK_LINE.replace(r#""repo": "/r""#, &repo)).expect("write");
        let out = dir.path().join("out");
        let out_arg = out.to_str().expect("a UTF-8 path");
        let args = run_args(
            &tasks,
            &["--model", "oracle", "--sandbox", "none", "-o", out_arg],
        );
        let config = RunConfig::from_options(&args.options(), &crate::config::Secrets::default())
            .expect("valid");
        let dry = dry_run(&config);
        assert!(
            dry.text.contains("tasks:    1 task x 1 epoch = 1 run, "),
            "{}",
            dry.text
        );
    }
}
