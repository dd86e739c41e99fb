//! The settings of where tasks run, checked before anything runs: `--env`
//! against the tasks (an image for each when they run in images, none
//! ignored without a word), `--workdir`, `--cpus`, and the child's limits
//! in bytes (`--max-memory`, `--max-file-size` in MiB).

use crate::config::error::ConfigError;
use crate::config::options::RunOptions;
use crate::sys::limits::Limits;
use crate::sys::sandbox::SandboxMode;
use crate::sys::words::{count, plural};
use crate::task::{NetworkWish, TaskSpec};

/// The most MiB a limit can name: their bytes must fit in a u64.
pub(crate) const MAX_MIB: u64 = u64::MAX >> 20;

/// Tasks that name an image, run where no image is used. Without `--env`
/// that is a mistake to stop at: SWE-bench's eval scripts then fail on the
/// host in ways that read as the model's failure. `--env host` says it is
/// meant, and gets one warning.
fn image_guard(
    args: &RunOptions,
    tasks: &[TaskSpec],
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    let named = tasks.iter().filter(|t| t.image.is_some()).count();
    let Some(first) = tasks.iter().find(|t| t.image.is_some()) else {
        return Ok(());
    };
    let image = first.image.as_deref().unwrap_or_default();
    if args.env.is_none() {
        let from = if args.image.is_some() {
            "--image names an image for every task"
        } else {
            "tasks name an image"
        };
        return Err(ConfigError::Usage(format!(
            "{from} ({named} of {}; the first, {}, runs in {image}), but no --env was chosen, and on the host the image is not used\nhint: run them in their images with --env podman, --env docker or --env oci; or give --env host to run them on this machine as they are",
            tasks.len(),
            first.id,
        )));
    }
    warnings.push(format!(
        "--env host: {} an image (the first, {}: {image}); {} on this machine, not in it",
        count(named, "task names", "tasks name"),
        first.id,
        plural(named, "it runs", "they run"),
    ));
    Ok(())
}

/// The container flags, and an image for every selected task when tasks
/// run in containers.
pub(crate) fn check_container_args(
    args: &RunOptions,
    tasks: &[TaskSpec],
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    let dir = &args.workdir;
    if !dir.starts_with('/') || dir.trim_end_matches('/').is_empty() {
        return Err(ConfigError::Usage(format!(
            "--workdir {dir:?} must be an absolute path other than `/`"
        )));
    }
    if let Some(cpus) = args.cpus
        && !(cpus.is_finite() && cpus > 0.0)
    {
        return Err(ConfigError::Usage(format!(
            "--cpus {cpus} must be a positive number"
        )));
    }
    if args.env_kind().engine().is_none()
        && let Some(refused) = tasks.iter().find_map(|t| {
            let env = args.env_kind().image_backend().unwrap_or("host");
            t.benchmark.needs_engine(t.id.as_str(), env)
        })
    {
        return Err(ConfigError::Usage(refused));
    }
    network_wishes(args, tasks, warnings)?;
    let Some(engine) = args.env_kind().image_backend() else {
        return image_guard(args, tasks, warnings);
    };
    // A task that cannot run at all never starts a container.
    let without: Vec<&str> = tasks
        .iter()
        .filter(|t| t.image.is_none() && t.benchmark.cannot_run().is_none())
        .map(|t| t.id.as_str())
        .collect();
    if without.is_empty() {
        return Ok(());
    }
    let shown = without
        .iter()
        .take(10)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    let more = without.len().saturating_sub(10);
    Err(ConfigError::Usage(format!(
        "--env {engine} runs each task in its image, and {} {} none: {shown}{}\nhint: give tasks an `image` field, or --image TEMPLATE (a template over the task's fields){}",
        count(without.len(), "selected task", "selected tasks"),
        plural(without.len(), "has", "have"),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        },
        crate::task::image_templates(),
    )))
}

/// The child's limits, in bytes where the flags give MiB.
pub(crate) fn limits_of(args: &RunOptions) -> Result<Limits, ConfigError> {
    // clap caps both at what fits; checked all the same.
    let bytes = |flag: &str, mib: u64| {
        mib.checked_mul(1024 * 1024).ok_or_else(|| {
            ConfigError::Usage(format!(
                "{flag} {mib}: too many MiB to count in bytes (at most {})",
                MAX_MIB
            ))
        })
    };
    Ok(Limits {
        max_processes: args.max_processes,
        max_memory_bytes: bytes("--max-memory", args.max_memory)?,
        max_file_size_bytes: bytes("--max-file-size", args.max_file_size)?,
    })
}

/// The network tasks ask for against the run's: a task that must run
/// without one stops the run under `--allow-network` (it would get one);
/// tasks that want one, in a run without it, are named in one warning
/// (their commands run without it).
fn network_wishes(
    args: &RunOptions,
    tasks: &[TaskSpec],
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    let wishes: Vec<(&TaskSpec, NetworkWish)> = tasks
        .iter()
        .filter_map(|task| task.benchmark.network().map(|wish| (task, wish)))
        .collect();
    allowlist_guard(args, &wishes)?;
    if args.allow_network {
        if let Some((task, wish)) = wishes.iter().find(|(_, wish)| !wish.public) {
            return Err(ConfigError::Usage(format!(
                "task {} must run without the network ({}), and --allow-network gives it one\nhint: run it without --allow-network",
                task.id, wish.key
            )));
        }
        return Ok(());
    }
    let wanting: Vec<&(&TaskSpec, NetworkWish)> =
        wishes.iter().filter(|(_, wish)| wish.public).collect();
    if let Some((first, wish)) = wanting.first() {
        warnings.push(format!(
            "{} for the network ({} for {}), which this run does not give: {} commands, and {} tests, run without it\nhint: --allow-network gives it",
            count(wanting.len(), "selected task asks", "selected tasks ask"),
            wish.key,
            first.id,
            plural(wanting.len(), "its", "their"),
            plural(wanting.len(), "its", "their"),
        ));
    }
    Ok(())
}

/// An allowlist (`--allow-hosts`, or a task's own) needs a place onebash
/// can put its proxy in: a container of an engine, `--env oci`'s bwrap,
/// or the host's bwrap sandbox, which `--sandbox none` leaves out: there
/// it stops the run, named.
fn allowlist_guard(
    args: &RunOptions,
    wishes: &[(&TaskSpec, NetworkWish)],
) -> Result<(), ConfigError> {
    if args.env_kind().image_backend().is_some() || args.sandbox != SandboxMode::None {
        return Ok(());
    }
    let env = "host --sandbox none";
    let honoured = "on the host in the bwrap sandbox, or in a container of --env podman, --env docker or --env oci";
    let hint = "without --sandbox none (bwrap), or with --env podman, --env docker or --env oci";
    if args.allow_hosts.is_some() {
        return Err(ConfigError::Usage(format!(
            "--allow-hosts is not honoured under --env {env}: only {honoured}\nhint: run {hint}"
        )));
    }
    match wishes.iter().find(|(_, wish)| wish.allowlist.is_some()) {
        Some((task, wish)) => Err(ConfigError::Usage(format!(
            "task {} asks for an allowlist ({}), which onebash honours only {honoured}, not under --env {env}\nhint: run it {hint}",
            task.id, wish.key
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::options::TASK_LINE;
    use crate::config::{RunConfig, RunOptions, Secrets};
    use crate::env::EnvKind;
    use crate::sys::sandbox::SandboxMode;

    /// Tasks that name an image, with no `--env`: the run stops before
    /// anything, naming the first such task and the environments that use
    /// images; `--env host` says it is meant, with one warning; `--image`
    /// alone counts as naming one for every task.
    #[test]
    fn tasks_with_an_image_need_an_env() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tasks = dir.path().join("tasks.jsonl");
        let plain = TASK_LINE.replace(r#""id": "t""#, r#""id": "plain""#);
        let imaged = TASK_LINE.replace(r#""id": "t""#, r#""id": "boxed", "image": "img:1""#);
        std::fs::write(&tasks, format!("{plain}\n{imaged}\n")).expect("write");
        // --model oracle --sandbox none -o OUT
        let base = RunOptions {
            sandbox: SandboxMode::None,
            out: Some(dir.path().join("out")),
            ..RunOptions::defaults(&tasks, "oracle")
        };
        let err = RunConfig::from_options(&base, &Secrets::default()).expect_err("refused");
        let text = err.to_string();
        assert!(
            text.starts_with("tasks name an image (1 of 2; the first, boxed, runs in img:1), but no --env was chosen"),
            "{text}"
        );
        assert!(
            text.contains("--env podman, --env docker or --env oci"),
            "{text}"
        );
        assert!(!err.hub_unreachable());

        let args = RunOptions {
            env: Some(EnvKind::Host),
            ..base.clone()
        };
        let config =
            RunConfig::from_options(&args, &Secrets::default()).expect("--env host runs them");
        let warned: Vec<&String> = config
            .warnings
            .iter()
            .filter(|w| w.contains("img:1"))
            .collect();
        assert_eq!(warned.len(), 1, "{:?}", config.warnings);
        // One task is one (it said "1 tasks name an image").
        assert!(
            warned[0].starts_with("--env host: 1 task names an image (the first, boxed: img:1); it runs on this machine"),
            "{warned:?}"
        );

        std::fs::write(&tasks, format!("{plain}\n")).expect("write");
        assert!(
            RunConfig::from_options(&base, &Secrets::default()).is_ok(),
            "no image: no guard"
        );
        let args = RunOptions {
            image: Some("x:{{ id }}".to_owned()),
            ..base
        };
        let text = RunConfig::from_options(&args, &Secrets::default())
            .expect_err("--image without --env")
            .to_string();
        assert!(
            text.starts_with("--image names an image for every task"),
            "{text}"
        );
    }

    /// A task without an image under --env podman: the hint offers
    /// SWE-bench's --image template, and one task is one.
    #[test]
    fn tasks_without_an_image_are_offered_swebench_s_template() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tasks = dir.path().join("tasks.jsonl");
        std::fs::write(&tasks, format!("{TASK_LINE}\n")).expect("write");
        let args = RunOptions {
            sandbox: SandboxMode::None,
            out: Some(dir.path().join("out")),
            env: Some(EnvKind::Podman),
            ..RunOptions::defaults(&tasks, "oracle")
        };
        let text = RunConfig::from_options(&args, &Secrets::default())
            .expect_err("no image")
            .to_string();
        assert!(text.contains("and 1 selected task has none: t\n"), "{text}");
        assert!(
            text.contains(r#"for SWE-bench's images: --image 'swebench/sweb.eval.x86_64.{{ instance_id | lower | replace("__", "_1776_") }}:latest'"#),
            "{text}"
        );
    }
}
