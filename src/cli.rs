//! The command line, on top of the stages: clap's types (the subcommands,
//! their flags, and the values only the command line has: `--format`,
//! durations), over the value types the stages own, which derive
//! `clap::ValueEnum` where they are (`--env` is `env::EnvKind`, `--provider`
//! `agent::provider::Provider`, `--shard` `config::Shard`...). `run`'s
//! flags become the plain [`RunOptions`] config checks ([`RunArgs::options`]).
//! Validation and defaults that need the environment or the file system
//! live in `config/`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

pub use crate::agent::provider::Provider;
pub use crate::agent::request::ReasoningEffort;
use crate::checkout::History;
use crate::config::{MAX_MIB, RunOptions};
pub use crate::config::{Shard, ShardError};
pub use crate::env::{ContainerCommands, EnvKind, PullPolicy};
use crate::run_folder::ExitReason;
use crate::sys::sandbox::SandboxMode;

#[derive(Debug, Parser)]
#[command(
    name = "onebash",
    version,
    about = "Batch evaluation of LLM coding agents that have one tool: bash",
    long_about = "Batch evaluation of LLM coding agents that have one tool: bash.\n\n\
        Reads tasks (repo, commit, problem statement, test command) from a JSONL file, \
        checks each repo out, lets the model work with a single bash tool, runs the \
        task's tests and writes one CSV row per task.",
    after_help = "Example:\n  onebash run tasks/demo/tasks.jsonl --model oracle"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run every task of a task file and write a run folder.
    #[command(
        after_help = "Examples:\n  onebash run tasks/demo/tasks.jsonl --model oracle\n  \
            OPENAI_API_KEY=... onebash run tasks.jsonl -m gpt-4.1 -j 8 -o results/gpt41"
    )]
    Run(Box<RunArgs>),
    /// What a run found: pass rate with its 95% interval, outcomes, tokens, turns, cost, time, pass@k.
    #[command(
        after_help = "Examples:\n  onebash report results/gpt41 --format markdown\n  onebash report results/gpt41 --format html   # writes results/gpt41/report.html"
    )]
    Report(ReportArgs),
    /// Two runs paired by (task, epoch): 2x2 table, exact McNemar p, pass-rate difference with a paired 95% interval.
    #[command(
        after_help = "Examples:\n  onebash compare results/gpt41 results/gpt41-terse-prompt\n  onebash compare results/gpt41 results/gpt41-terse-prompt --format html -o compare.html"
    )]
    Compare(CompareArgs),
    /// One task's conversation, readable in a terminal.
    #[command(
        after_help = "Examples:\n  onebash show results/gpt41 calc-mean-float\n  onebash show results/gpt41/tasks/calc-mean-float/epoch-2/trajectory.jsonl"
    )]
    Show(ShowArgs),
    /// Which tasks are broken or flaky: runs `noop` once and the oracle N times, flags the bad ones.
    #[command(
        after_help = "Example:\n  onebash validate tasks.jsonl --runs 3 -o results/validate -- --sandbox bwrap -j 8"
    )]
    Validate(ValidateArgs),
    /// Join the run folders of shards (`run --shard K/N`) into one.
    #[command(
        after_help = "Example:\n  onebash merge results/merged results/shard-0 results/shard-1 results/shard-2"
    )]
    Merge(MergeArgs),
    /// Grade a run folder again from its saved test logs: no model, no environment, no network; prints every verdict that changed.
    #[command(
        after_help = "Examples:\n  onebash regrade results/gpt41 --grading swebench-5.0 -o results/gpt41-swebench5\n  onebash regrade results/merged   # rewrites the rows in place, results.csv kept as a backup"
    )]
    Regrade(RegradeArgs),
    /// Conversations of runs as training data (JSONL): OpenAI fine-tuning chat, ShareGPT or Harbor's ATIF.
    #[command(
        after_help = "Examples:\n  onebash export results/gpt41 --passed --format openai-chat -o train.jsonl\n  onebash export results/a results/b --format atif --exit-reason completed"
    )]
    Export(ExportArgs),
    /// Fill the image cache ahead of runs, once per machine: every image the selected tasks name, as `run` with the same flags would make it ready.
    #[command(
        after_help = "Examples:\n  onebash pull tasks.jsonl --env oci --image 'swebench/sweb.eval.x86_64.{{ instance_id | lower | replace(\"__\", \"_1776_\") }}:latest'\n  onebash pull tasks.jsonl --env oci --shard 3/8 --cache-dir /local/onebash"
    )]
    Pull(PullArgs),
    /// The datasets onebash knows by name (each `hf:OWNER/NAME:SPLIT` on the Hugging Face Hub), and where datasets are cached.
    #[command(
        after_help = "Examples:\n  onebash datasets\n  onebash run swe-bench-verified -m gpt-4.1 --env podman\n  onebash run hf:SWE-bench/SWE-bench_Lite@<sha>:dev --dry-run --env oci"
    )]
    Datasets(DatasetsArgs),
    /// A shell's completion script for onebash, on stdout.
    #[command(
        after_help = "Examples:\n  source <(onebash completions bash)\n  onebash completions fish > ~/.config/fish/completions/onebash.fish"
    )]
    Completions(CompletionsArgs),
    /// Man pages: one per subcommand (onebash.1, onebash-run.1, ...), written into DIR.
    #[command(after_help = "Example:\n  onebash man ~/.local/share/man/man1 && man onebash-run")]
    Man(ManArgs),
    /// What this machine can run and why not: each environment, git, python3, the cache, the Hub and a registry; one line per check, with a hint.
    #[command(after_help = "Examples:\n  onebash doctor\n  onebash doctor --offline --format json")]
    Doctor(DoctorArgs),
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell the script is for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// The folder the pages go into (made when missing); a page already there is replaced.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Skip the checks that need the network (the Hub and the registry).
    #[arg(long)]
    pub offline: bool,
    /// The cache whose file system and free space are checked, as for run [default: $XDG_CACHE_HOME/onebash, else ~/.cache/onebash].
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// `text`: a line per check; `json`: the checks as one object.
    #[arg(long, value_enum, default_value_t = DoctorFormat::Text)]
    pub format: DoctorFormat,
}

/// `doctor --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DoctorFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct DatasetsArgs {
    /// The cache whose datasets are listed, as for run [default: $XDG_CACHE_HOME/onebash, else ~/.cache/onebash].
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// List the datasets of a Harbor registry instead (a registry.json file or its URL; Harbor's own when given no value), each as `run` takes it: harbor:NAME@VERSION.
    #[arg(long, value_name = "FILE|URL", num_args = 0..=1, default_missing_value = "")]
    pub registry: Option<String>,
}

#[derive(Debug, Args)]
pub struct PullArgs {
    /// The tasks, as for run: a JSONL file, or a dataset (`hf:OWNER/NAME[@REVISION][:SPLIT]` or a name `onebash datasets` lists); the dataset is cached too, so runs on machines without network read it.
    pub tasks: PathBuf,
    /// Where the images go: `oci` (onebash's cache, as `run --env oci` reads it), `podman` or `docker` (the engine's store).
    #[arg(long = "env", value_enum, default_value_t = EnvKind::Oci)]
    pub env_kind: EnvKind,
    /// The image of tasks that have no `image` field, as for run.
    #[arg(long, value_name = "TEMPLATE")]
    pub image: Option<String>,
    /// Where SWE-bench `owner/name` repos come from, as for run (it can name the image).
    #[arg(long, value_name = "BASE", default_value = crate::task::swebench::DEFAULT_REPO_BASE)]
    pub repo_base: String,
    /// Only the tasks whose 0-based index i in the file has i mod N == K-1.
    #[arg(long, value_name = "K/N", value_parser = Shard::parse)]
    pub shard: Option<Shard>,
    /// Only the tasks whose id matches this regular expression.
    #[arg(long, value_name = "REGEX")]
    pub filter: Option<String>,
    /// The cache, as for run [default: $XDG_CACHE_HOME/onebash, else ~/.cache/onebash].
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// `missing`: fetch what the cache lacks (a tag already resolved is not asked again); `always`: ask the registry for every tag again; `never`: fetch nothing (checks the cache holds them).
    #[arg(long, value_enum, default_value_t = PullPolicy::Missing)]
    pub pull: PullPolicy,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The run folder.
    pub run: PathBuf,
    /// Output format. `html` writes a self-contained page with charts (and one transcript page per task in `transcripts/` next to it) and prints its path.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write to this file instead of stdout [default: stdout; for html RUN/report.html].
    #[arg(short, long, value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// Also group the rows by this field of their task lines (repo, difficulty, language...): pass rate and 95% interval per group.
    #[arg(long, value_name = "FIELD")]
    pub by: Option<String>,
    /// `--format swebench`: the epoch summarised [default: 1].
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub epoch: u32,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The run folders; identical conversations among them are written once.
    #[arg(required = true, num_args = 1..)]
    pub runs: Vec<PathBuf>,
    /// The format of each line.
    #[arg(long, value_enum, default_value_t = ExportFormat::OpenaiChat)]
    pub format: ExportFormat,
    /// Write to this file instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Only rows with status `passed`.
    #[arg(long)]
    pub passed: bool,
    /// Only rows that ended for this reason (repeatable), e.g. `completed`.
    #[arg(long, value_name = "REASON", value_parser = exit_reason)]
    pub exit_reason: Vec<ExitReason>,
    /// Only this task (repeatable).
    #[arg(long, value_name = "ID")]
    pub task: Vec<String>,
    /// Only this epoch.
    #[arg(long, value_name = "N")]
    pub epoch: Option<u32>,
}

/// `export --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// OpenAI's fine-tuning chat format: messages, tools, tool_calls.
    OpenaiChat,
    /// ShareGPT as LLaMA-Factory reads it: conversations, system, tools.
    Sharegpt,
    /// Harbor's Agent Trajectory Interchange Format.
    Atif,
}

/// A flag's value that clap's own parsers cannot check; clap prints it
/// after `invalid value 'RAW' for '--FLAG <VALUE>': `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("not a number of seconds")]
    NotSeconds,
    #[error("must be a positive number of seconds")]
    NotPositive,
    #[error("too long: at most {MAX_SECONDS:e} seconds (about 31 years)")]
    TooLong,
    #[error("unknown rules {0:?}; expected one of: {names}", names = rule_names())]
    UnknownRules(String),
    #[error(
        "not an exit reason: {0:?}; the words are those of results.csv (docs/results.md), e.g. completed, max_turns"
    )]
    NotExitReason(String),
}

/// `--grading`: a rule set by its name.
pub(crate) fn grading_rules(name: &str) -> Result<crate::grade::swebench::Rules, ValueError> {
    crate::grade::swebench::Rules::parse(name)
        .ok_or_else(|| ValueError::UnknownRules(name.to_owned()))
}

/// The names of the rule sets, for [`ValueError::UnknownRules`].
fn rule_names() -> String {
    let names: Vec<&str> = crate::grade::swebench::ALL_RULES
        .iter()
        .map(|rules| rules.as_str())
        .collect();
    names.join(", ")
}

/// An exit reason as results.csv writes it.
fn exit_reason(raw: &str) -> Result<ExitReason, ValueError> {
    serde_json::from_value(serde_json::Value::String(raw.to_owned()))
        .map_err(|_| ValueError::NotExitReason(raw.to_owned()))
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Run A (the baseline).
    pub run_a: PathBuf,
    /// Run B (differences are B - A).
    pub run_b: PathBuf,
    /// Output format. `html` writes a self-contained page with charts and prints its path.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write to this file instead of stdout [default: stdout; for html compare.html in the current folder].
    #[arg(short, long, value_name = "PATH")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// A run folder, or a trajectory file.
    pub target: PathBuf,
    /// The task, when TARGET is a run folder.
    pub task: Option<String>,
    /// The epoch.
    #[arg(long, default_value_t = 1)]
    pub epoch: u32,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The task file.
    pub tasks: PathBuf,
    /// Oracle runs per task (2 or more finds flaky tasks).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: u32,
    /// Folder for the two runs, validation.json and exclude.txt [default: results/validate_<UTC time>].
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Flags passed on to both runs (after `--`), e.g. -- --sandbox bwrap -j 8 --repo-base /mirrors --test-command '...'.
    #[arg(last = true, value_name = "RUN FLAGS")]
    pub run_flags: Vec<String>,
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The merged run folder to create (new or empty).
    pub out: PathBuf,
    /// The run folders to join; their settings must match and their (task, epoch) pairs must not overlap.
    #[arg(required = true, num_args = 1..)]
    pub runs: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RegradeArgs {
    /// The run folder (a run, a shard or a merged folder).
    pub run: PathBuf,
    /// Write the regraded run to this new folder (new or empty) [default: rewrite RUN in place, its results.csv kept as a backup].
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The rules to grade by: `swebench-4.1` or `swebench-5.0` [default: the run's `--grading`, else each row's format decides, as in the run].
    #[arg(long, value_name = "RULES", value_parser = grading_rules)]
    pub grading: Option<crate::grade::swebench::Rules>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The tasks: a JSONL file (one task per line), a folder of Harbor tasks, a dataset of a Harbor registry (`harbor:NAME@VERSION`, or `harbor:NAME` for its newest version; see --registry), or a dataset on the Hugging Face Hub: `hf:OWNER/NAME[@REVISION][:SPLIT]` (the split: its only one, else `test`) or a name `onebash datasets` lists (`swe-bench-verified`).
    #[arg(value_name = "TASKS")]
    pub tasks: PathBuf,

    /// Model name sent to the API; or `oracle` (applies each task's gold_patch, no API; `gold` is the same, named as SWE-bench names it), `noop` (changes nothing), `replay:RUN_DIR` (plays back a recorded run), `predictions:FILE` (grades another agent's patches: JSONL, a JSON list, or a JSON object keyed by instance id).
    #[arg(short, long)]
    pub model: String,

    /// Where SWE-bench `owner/name` repos come from: a URL (BASE/owner/name.git) or a folder of mirrors (BASE/owner/name.git or BASE/owner/name).
    #[arg(long, value_name = "BASE", default_value = crate::task::swebench::DEFAULT_REPO_BASE)]
    pub repo_base: String,

    /// Test command for tasks that have none: a template over the task's fields and `test_files` (the files test_patch touches), e.g. 'pytest -rA {{ test_files | join(" ") }}'.
    #[arg(long, value_name = "TEMPLATE")]
    pub test_command: Option<String>,

    /// A JUnit XML file the test command writes, relative to the checkout: per-test results are read from it instead of the output.
    #[arg(long, value_name = "PATH")]
    pub junit_path: Option<PathBuf>,

    /// The rules tests are graded by: `swebench-4.1` or `swebench-5.0` (docs/results.md, "Grading rules"). Default: the row's format decides (a swebench 5 row, with its own `eval_script` or `log_parser`, by 5.0's; any other by 4.1's).
    #[arg(long, value_name = "RULES", value_parser = grading_rules)]
    pub grading: Option<crate::grade::swebench::Rules>,

    /// Wire protocol: `openai` (Chat Completions: OpenAI, vLLM, llama.cpp, Ollama, OpenRouter...), `openai-responses` (OpenAI's Responses API) or `anthropic` (Messages).
    #[arg(long, value_enum, default_value_t = Provider::Openai)]
    pub provider: Provider,

    /// Base URL of the API [default: $OPENAI_BASE_URL or https://api.openai.com/v1 (openai, openai-responses); for anthropic $ANTHROPIC_BASE_URL or https://api.anthropic.com].
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,

    /// The environment variable the API key is read from [default: OPENAI_API_KEY; ANTHROPIC_API_KEY for anthropic].
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,

    /// Tries after a failed model call (429, 5xx, lost connection, timeout, garbled answer) before the task ends as api_error.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub max_retries: u32,

    /// Seconds before the first retry of a model call; each next wait doubles, up to 60 s, with jitter. A server's Retry-After wins.
    #[arg(long, value_name = "S", default_value = "1", value_parser = seconds)]
    pub retry_delay: Duration,

    /// Model calls in flight at once for the whole run [default: --jobs].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: Option<u32>,

    /// Seconds one model call may take before it counts as failed (and is retried).
    #[arg(long, value_name = "S", default_value = "600", value_parser = seconds)]
    pub request_timeout: Duration,

    /// Sampling temperature sent to the model [default: the server's].
    #[arg(long, value_name = "T")]
    pub temperature: Option<f64>,

    /// Nucleus sampling top_p sent to the model [default: the server's].
    #[arg(long, value_name = "P")]
    pub top_p: Option<f64>,

    /// Sampling seed sent to the model, where the protocol has one (OpenAI) [default: none].
    #[arg(long, value_name = "N")]
    pub seed: Option<i64>,

    /// Output tokens per model answer (max_completion_tokens; max_tokens for anthropic) [default: the server's; 8192 for anthropic].
    #[arg(long, value_name = "N")]
    pub max_output_tokens: Option<u64>,

    /// Reasoning effort of a reasoning model: sent as reasoning_effort (openai) or reasoning.effort (openai-responses); not sent to anthropic [default: the server's].
    #[arg(long, value_enum, value_name = "EFFORT")]
    pub reasoning_effort: Option<ReasoningEffort>,

    /// Anthropic: send no prompt-cache breakpoints (by default the system prompt and the two newest user turns are marked for the 5-minute cache).
    #[arg(long)]
    pub no_prompt_cache: bool,

    /// Anthropic: extended thinking with this budget of thinking tokens per answer (at least 1024, below --max-output-tokens unless --interleaved-thinking). Not with --temperature.
    #[arg(long, value_name = "TOKENS")]
    pub thinking_budget: Option<u64>,

    /// Anthropic: interleaved thinking between tool calls (the interleaved-thinking-2025-05-14 beta, Claude 4 models); the budget may then exceed --max-output-tokens. Needs --thinking-budget.
    #[arg(long)]
    pub interleaved_thinking: bool,

    /// Extra request field, passed as-is: KEY=JSON (a value that is not JSON is sent as a string). Repeatable.
    #[arg(long = "model-arg", value_name = "KEY=JSON")]
    pub model_args: Vec<String>,

    /// Price in USD per million tokens, INPUT,OUTPUT or INPUT,OUTPUT,CACHE_READ,CACHE_WRITE: sets or overrides the built-in table (with two numbers, cached input costs as much as input).
    #[arg(long, value_name = "IN,OUT[,READ,WRITE]")]
    pub price: Option<String>,

    /// USD per task; no new model call once reached. Needs a known price.
    #[arg(long, value_name = "USD")]
    pub max_cost: Option<f64>,

    /// Prompt variant: a TOML file with `system` and `instance` templates [default: built-in prompts/default.toml].
    #[arg(long, value_name = "FILE")]
    pub prompt: Option<PathBuf>,

    /// Tasks run at once.
    #[arg(short, long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub jobs: u32,

    /// Model calls per task.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns: u32,

    /// Prompt + completion tokens per task; no new model call once reached [default: none].
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u64>,

    /// Seconds one bash command may run before its process group is killed.
    #[arg(long, value_name = "S", default_value = "120", value_parser = seconds)]
    pub command_timeout: Duration,

    /// Seconds the whole agent phase of one task may take.
    #[arg(long, value_name = "S", default_value = "3600", value_parser = seconds)]
    pub task_timeout: Duration,

    /// Seconds the test phase of one task may take (a task's test_timeout_s overrides it).
    #[arg(long, value_name = "S", default_value = "1800", value_parser = seconds)]
    pub test_timeout: Duration,

    /// Run every task K times (epochs 1..K).
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub runs: u32,

    /// Run only tasks whose 0-based index i in the file has i mod N == K-1.
    #[arg(long, value_name = "K/N", value_parser = Shard::parse)]
    pub shard: Option<Shard>,

    /// Run only tasks whose id matches this regular expression.
    #[arg(long, value_name = "REGEX")]
    pub filter: Option<String>,

    /// Take the first N tasks after filtering and sharding.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,

    /// Run folder; an existing non-empty one is refused [default: results/<UTC time>_<model>_<prompt>].
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Where bare mirrors of the repos are kept [default: $XDG_CACHE_HOME/onebash, else ~/.cache/onebash].
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,

    /// The Harbor registry (a registry.json file or its URL) that `harbor:NAME[@VERSION]` is read from [default: Harbor's, https://raw.githubusercontent.com/laude-institute/harbor/main/registry.json].
    #[arg(long, value_name = "FILE|URL")]
    pub registry: Option<String>,

    /// How much of the base's past each working copy holds: `full` = every ancestor of the base commit (git log and blame of the past work), `none` = one commit with no parents holding the base's tree. Never anything past the base.
    #[arg(long, value_enum, default_value_t = History::Full)]
    pub history: History,

    /// Where working copies go while their tasks run: a folder of this run's own is made in DIR (a fast local disk or tmpfs when the run folder is on a network file system; the sandbox hides all of DIR but the task's own working copy) [default: the run folder's workdirs/].
    #[arg(long, value_name = "DIR")]
    pub workdirs: Option<PathBuf>,

    /// Sandbox for agent and test commands: `auto` = bwrap when it is installed and works, else none with a warning.
    #[arg(long, value_enum, default_value_t = SandboxMode::Auto)]
    pub sandbox: SandboxMode,

    /// Let agent commands reach the network (inside the sandbox). Test commands never do.
    #[arg(long)]
    pub allow_network: bool,

    /// Let agent commands reach these hosts only, through a proxy onebash serves inside the task's container or sandbox (which has no other network): names, `*.` wildcards (the names under it), IP addresses and CIDR ranges, comma-separated, as a Harbor task's `allowed_hosts` (e.g. `pypi.org,*.pythonhosted.org`). Under `--env podman`, `--env docker`, `--env oci`, and `--env host` in the bwrap sandbox (these two: each task in a network namespace of its own). A task with an allowlist of its own keeps its own.
    #[arg(long, value_name = "HOSTS", value_parser = parse_hosts, conflicts_with = "allow_network")]
    pub allow_hosts: Option<crate::task::AllowedHosts>,

    /// Where tasks run: `host` (under --sandbox), a container per (task, epoch) from the task's `image` through the `podman` or `docker` CLI, or `oci`: the image with no daemon, from a registry (`docker://REF` or `REF`, as podman names it), `docker-archive:PATH` (docker/podman save) or `oci:PATH[:REF]` (an OCI layout folder), unpacked into the cache, each command under bwrap over it (--sandbox is then not used).
    /// [default: host; tasks that name an image then stop the run, unless `--env host` is given]
    #[arg(long = "env", value_enum)]
    pub env: Option<EnvKind>,

    /// The image of tasks that have no `image` field: a template over the task's fields (and `instance_id`, the id), e.g. 'swebench/sweb.eval.x86_64.{{ instance_id | lower | replace("__", "_1776_") }}:latest'.
    #[arg(long, value_name = "TEMPLATE")]
    pub image: Option<String>,

    /// Where the task's working copy is in the container, for tasks that have no `workdir` field (an absolute path).
    #[arg(long, value_name = "PATH", default_value = "/testbed")]
    pub workdir: String,

    /// CPUs one task's container may use (docker/podman --cpus) [default: no limit].
    #[arg(long, value_name = "N")]
    pub cpus: Option<f64>,

    /// When the engine (or --env oci, from a registry) pulls the tasks' images, before any task starts: `never`, `missing` (those not there), `always`.
    #[arg(long, value_enum, default_value_t = PullPolicy::Missing)]
    pub pull: PullPolicy,

    /// Under --env podman|docker, how each command reaches the task's container: `channel`, one `exec -i` per container running a small bash server that starts each command as a fresh `bash -c`; or `exec`, one engine exec per command. The commands see the same either way.
    #[arg(long, value_enum, default_value_t = ContainerCommands::Channel)]
    pub container_commands: ContainerCommands,

    /// Processes one task may run at once (cgroup pids.max; RLIMIT_NPROC where no cgroup can be made).
    #[arg(long, value_name = "N", default_value_t = 512, value_parser = clap::value_parser!(u64).range(8..))]
    pub max_processes: u64,

    /// Memory of one task in MiB (cgroup; RLIMIT_DATA per process where no cgroup can be made).
    #[arg(long, value_name = "MIB", default_value_t = 4096, value_parser = clap::value_parser!(u64).range(64..=MAX_MIB))]
    pub max_memory: u64,

    /// Largest file a command may write, in MiB (RLIMIT_FSIZE).
    #[arg(long, value_name = "MIB", default_value_t = 2048, value_parser = clap::value_parser!(u64).range(1..=MAX_MIB))]
    pub max_file_size: u64,

    /// Continue the run in --out: skip (task, epoch) pairs that have a row, redo the rest. Refused if the settings differ.
    #[arg(long)]
    pub resume: bool,

    /// With --resume, also redo the pairs whose row has status `error` (their old rows and files are kept aside).
    #[arg(long, requires = "resume")]
    pub retry_errors: bool,

    /// Keep each task's working copy (under the run folder's workdirs/, or --workdirs) instead of deleting it.
    #[arg(long)]
    pub keep_workdirs: bool,

    /// Make every check a run makes before its first task (flags, tasks, dataset, images, engine), print what would run, and stop: no model call, no run folder.
    #[arg(long)]
    pub dry_run: bool,
}

impl RunArgs {
    /// `--env`, host when not given.
    pub fn env_kind(&self) -> EnvKind {
        self.env.unwrap_or(EnvKind::Host)
    }

    /// The options config checks into a run's settings: the flags as
    /// parsed, in the stages' types (`--dry-run` is the command's own).
    pub(crate) fn options(&self) -> RunOptions {
        RunOptions {
            tasks: self.tasks.clone(),
            model: self.model.clone(),
            repo_base: self.repo_base.clone(),
            test_command: self.test_command.clone(),
            junit_path: self.junit_path.clone(),
            grading: self.grading,
            provider: self.provider,
            base_url: self.base_url.clone(),
            api_key_env: self.api_key_env.clone(),
            max_retries: self.max_retries,
            retry_delay: self.retry_delay,
            max_connections: self.max_connections,
            request_timeout: self.request_timeout,
            temperature: self.temperature,
            top_p: self.top_p,
            seed: self.seed,
            max_output_tokens: self.max_output_tokens,
            reasoning_effort: self.reasoning_effort,
            no_prompt_cache: self.no_prompt_cache,
            thinking_budget: self.thinking_budget,
            interleaved_thinking: self.interleaved_thinking,
            model_args: self.model_args.clone(),
            price: self.price.clone(),
            max_cost: self.max_cost,
            prompt: self.prompt.clone(),
            jobs: self.jobs,
            max_turns: self.max_turns,
            max_tokens: self.max_tokens,
            command_timeout: self.command_timeout,
            task_timeout: self.task_timeout,
            test_timeout: self.test_timeout,
            runs: self.runs,
            shard: self.shard,
            filter: self.filter.clone(),
            limit: self.limit,
            out: self.out.clone(),
            cache_dir: self.cache_dir.clone(),
            registry: self.registry.clone(),
            history: self.history,
            workdirs: self.workdirs.clone(),
            sandbox: self.sandbox,
            allow_network: self.allow_network,
            allow_hosts: self.allow_hosts.clone(),
            env: self.env,
            image: self.image.clone(),
            workdir: self.workdir.clone(),
            cpus: self.cpus,
            pull: self.pull,
            container_commands: self.container_commands,
            max_processes: self.max_processes,
            max_memory: self.max_memory,
            max_file_size: self.max_file_size,
            resume: self.resume,
            retry_errors: self.retry_errors,
            keep_workdirs: self.keep_workdirs,
        }
    }
}

use crate::task::MAX_SECONDS;

/// A duration flag (`--command-timeout S` and the like): a positive number
/// of seconds, fractions allowed, as `f64` reads it (`90`, `0.5`, `1e3`).
pub fn seconds(raw: &str) -> Result<Duration, ValueError> {
    let value: f64 = raw.parse().map_err(|_| ValueError::NotSeconds)?;
    if !(value.is_finite() && value > 0.0) {
        return Err(ValueError::NotPositive);
    }
    if value > MAX_SECONDS {
        return Err(ValueError::TooLong);
    }
    // Finite, positive and at most MAX_SECONDS: from_secs_f64 cannot panic.
    Ok(Duration::from_secs_f64(value))
}

/// `--format` of `report` and `compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Markdown,
    Json,
    /// The run summary SWE-bench's run_evaluation writes (`schema_version` 2), of epoch 1 (`--epoch`).
    #[value(name = "swebench")]
    BenchmarkReport,
    /// A self-contained page with charts, written to a file (`--output`).
    Html,
}

/// `onebash run TASKS ARGS` as the command line parses it: for the tests
/// of the layers that take `RunArgs` (config, commands).
#[cfg(test)]
pub(crate) fn run_args(tasks: &std::path::Path, args: &[&str]) -> RunArgs {
    let tasks = tasks.to_str().expect("a UTF-8 path");
    let argv = ["onebash", "run", tasks]
        .into_iter()
        .chain(args.iter().copied());
    let Command::Run(run) = Cli::try_parse_from(argv).expect("valid arguments").command else {
        panic!("not a run");
    };
    *run
}

/// `--allow-hosts`: Harbor's rules for `allowed_hosts`.
fn parse_hosts(list: &str) -> Result<crate::task::AllowedHosts, String> {
    match crate::task::AllowedHosts::parse_list(list) {
        Ok(hosts) if hosts.entries().is_empty() => {
            Err("no host given (for no network at all, leave --allow-hosts out)".to_owned())
        }
        Ok(hosts) => Ok(hosts),
        Err(err) => Err(err.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_positive_numbers_a_deadline_can_hold() {
        for (raw, want) in [
            ("120", Duration::from_secs(120)),
            ("0.05", Duration::from_millis(50)),
            ("1e3", Duration::from_secs(1000)),
            ("1e9", Duration::from_secs(1_000_000_000)),
        ] {
            assert_eq!(seconds(raw), Ok(want), "{raw}");
        }
        for (raw, said) in [
            ("0", "must be a positive number of seconds"),
            ("-1", "must be a positive number of seconds"),
            ("inf", "must be a positive number of seconds"),
            ("NaN", "must be a positive number of seconds"),
            ("abc", "not a number of seconds"),
            (" 5", "not a number of seconds"),
            // Past what a Duration holds, and past what start + duration
            // can be: both panicked.
            ("1e300", "too long: at most 1e9 seconds"),
            ("1e19", "too long: at most 1e9 seconds"),
        ] {
            let err = seconds(raw).expect_err(raw).to_string();
            assert!(err.contains(said), "{raw}: {err}");
        }
    }

    /// `run TASKS --model M` gives the options the checks' tests start
    /// from: the command line's defaults and theirs cannot drift apart.
    #[test]
    fn run_options_default_as_the_command_line_does() {
        let tasks = std::path::Path::new("/t/tasks.jsonl");
        let args = run_args(tasks, &["--model", "m"]);
        assert_eq!(args.options(), RunOptions::defaults(tasks, "m"));
    }

    #[test]
    fn shard_parsing_and_membership_errors_read_as_before() {
        for (raw, said) in [
            ("3", "\"3\" is not K/N (for example 2/4)"),
            ("x/2", "\"x/2\": K is not a number"),
            ("1/y", "\"1/y\": N is not a number"),
            (
                "4/3",
                "\"4/3\": K must be between 1 and N, and N at least 1",
            ),
        ] {
            assert_eq!(Shard::parse(raw).expect_err(raw).to_string(), said);
        }
    }
}
