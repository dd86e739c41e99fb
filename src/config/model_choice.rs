//! Which model answers ([`ModelChoice`]): `--model` read (`oracle`,
//! `gold`, `noop`, `replay:RUN_DIR`, `predictions:FILE`, or a model behind
//! an API), and for an API model the provider's defaults from the registry
//! (`agent/provider.rs`: base URL, key variable), the key from [`Secrets`],
//! the request settings and their rules (extended thinking, the fields an
//! API has no room for), the price. The client a run asks is
//! `client.rs`'s.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use crate::agent::api::ApiModel;
use crate::agent::pricing::{PRICES_TAKEN, Price, builtin_price};
use crate::agent::provider::{MIN_THINKING_BUDGET, Provider, ProviderInfo};
use crate::agent::request::RequestSettings;
use crate::config::error::ConfigError;
use crate::config::options::RunOptions;
use crate::config::secrets::Secrets;
use crate::run_folder::RunFolder;
use crate::task::TaskId;
use crate::task::predictions::{Prediction, PredictionFile, load_predictions};

/// Which model answers.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum ModelChoice {
    /// Applies each task's gold patch; no API. `name` is `gold` when it
    /// was asked for by SWE-bench's name for it (`-m gold`).
    Oracle {
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<&'static str>,
    },
    /// Changes nothing: answers at once without a tool call. The baseline
    /// every task must fail (`validate` uses it).
    Noop,
    /// Plays back the assistant turns recorded in an earlier run folder.
    Replay { spec: String, run_dir: PathBuf },
    /// A model behind an API.
    Api(Box<ApiModel>),
    /// Another agent's patches (`predictions:FILE`): each task's is put in
    /// as SWE-bench puts a model patch in; no API.
    Predictions {
        /// `predictions:FILE` as given.
        spec: String,
        #[serde(skip)]
        file: Arc<PredictionFile>,
    },
}

impl ModelChoice {
    /// The name in the CSV's `model` column.
    pub(crate) fn name(&self) -> &str {
        match self {
            ModelChoice::Oracle { name } => name.unwrap_or("oracle"),
            ModelChoice::Noop => "noop",
            ModelChoice::Replay { spec, .. } | ModelChoice::Predictions { spec, .. } => spec,
            ModelChoice::Api(api) => &api.name,
        }
    }

    /// The `model` column of a task's rows: a prediction's own
    /// `model_name_or_path`, else [`ModelChoice::name`].
    pub(crate) fn row_name(&self, task: &TaskId) -> &str {
        match self.prediction(task) {
            Some(prediction) => &prediction.model_name_or_path,
            None => self.name(),
        }
    }

    /// The task's prediction, when the model is a predictions file.
    pub(crate) fn prediction(&self, task: &TaskId) -> Option<&Prediction> {
        match self {
            ModelChoice::Predictions { file, .. } => file.get(task.as_str()),
            _ => None,
        }
    }
}

/// `--model predictions:FILE`'s file, read and checked.
pub(crate) fn prediction_file(
    args: &RunOptions,
) -> Result<Option<Arc<PredictionFile>>, ConfigError> {
    let Some(path) = args.model.strip_prefix("predictions:") else {
        return Ok(None);
    };
    if path.is_empty() {
        return Err(ConfigError::Usage(
            "--model predictions: names no file\nhint: --model predictions:preds.json".to_owned(),
        ));
    }
    Ok(Some(Arc::new(load_predictions(Path::new(path))?)))
}

/// The model `--model` names; `predictions` is the file
/// [`prediction_file`] read for `predictions:FILE`.
pub(crate) fn model_choice(
    args: &RunOptions,
    secrets: &Secrets,
    predictions: Option<Arc<PredictionFile>>,
    warnings: &mut Vec<String>,
) -> Result<ModelChoice, ConfigError> {
    if args
        .max_cost
        .is_some_and(|max| !(max.is_finite() && max > 0.0))
    {
        return Err(ConfigError::Usage(
            "--max-cost must be a positive number of USD".to_owned(),
        ));
    }
    if args.model == "oracle" {
        return Ok(ModelChoice::Oracle { name: None });
    }
    // SWE-bench's name for the gold patches as predictions.
    if args.model == "gold" {
        return Ok(ModelChoice::Oracle { name: Some("gold") });
    }
    if let Some(file) = predictions {
        return Ok(ModelChoice::Predictions {
            spec: args.model.clone(),
            file,
        });
    }
    if args.model == "noop" {
        return Ok(ModelChoice::Noop);
    }
    if let Some(dir) = args.model.strip_prefix("replay:") {
        let run_dir = PathBuf::from(dir);
        if let Err(message) = RunFolder::open(&run_dir) {
            return Err(ConfigError::Usage(format!(
                "--model {}: {message}",
                args.model
            )));
        }
        return Ok(ModelChoice::Replay {
            spec: args.model.clone(),
            run_dir,
        });
    }
    Ok(ModelChoice::Api(Box::new(api_model(
        args, secrets, warnings,
    )?)))
}

/// A model behind the API of `--provider`: where it is (`--base-url`, else
/// the provider's variable, else its service), its key, the request
/// settings checked against the API's rules, its price.
fn api_model(
    args: &RunOptions,
    secrets: &Secrets,
    warnings: &mut Vec<String>,
) -> Result<ApiModel, ConfigError> {
    let info = args.provider.info();
    let api_key_env = args
        .api_key_env
        .clone()
        .unwrap_or_else(|| info.api_key_env.to_owned());
    // `main` erased every key variable from the process, used or not, so
    // that no command can read one back from the harness's environ.
    let api_key = secrets.get(&api_key_env);
    let base_url = args
        .base_url
        .clone()
        .or_else(|| {
            std::env::var(info.base_url_env)
                .ok()
                .filter(|v| !v.is_empty())
        })
        .unwrap_or_else(|| info.default_base_url.to_owned());
    if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
        return Err(ConfigError::Usage(format!(
            "--base-url {base_url:?} must start with http:// or https://"
        )));
    }
    // The providers' own services need a key; a local server (vLLM,
    // llama.cpp, Ollama) usually does not, so a missing key is only an
    // error there.
    if api_key.is_none() && base_url.starts_with(info.default_base_url) {
        return Err(ConfigError::Usage(format!(
            "${api_key_env} is not set, and {base_url} needs an API key\nhint: export {api_key_env}=..., or point --base-url at a server that needs none"
        )));
    }
    let request = RequestSettings {
        temperature: args.temperature,
        top_p: args.top_p,
        seed: args.seed,
        max_output_tokens: args.max_output_tokens,
        reasoning_effort: args.reasoning_effort,
        extra: parse_model_args(&args.model_args)?,
        request_timeout: args.request_timeout,
        prompt_cache: !args.no_prompt_cache,
        thinking_budget: args.thinking_budget,
        interleaved_thinking: args.interleaved_thinking,
    };
    check_thinking(args)?;
    unsent_settings(args, warnings);
    let (price, price_source) = price_of(args)?;
    Ok(ApiModel {
        provider: args.provider,
        name: args.model.clone(),
        base_url: base_url.trim_end_matches('/').to_owned(),
        api_key_env,
        api_key,
        request,
        max_retries: args.max_retries,
        retry_delay: args.retry_delay,
        max_connections: args.max_connections.unwrap_or(args.jobs) as usize,
        price,
        price_source,
    })
}

/// Warns of the sampling settings the chosen API has no field for.
fn unsent_settings(args: &RunOptions, warnings: &mut Vec<String>) {
    let info = args.provider.info();
    if !info.seed && args.seed.is_some() {
        warnings.push(format!("--seed is not sent: {} has no seed", info.api_name));
    }
    if !info.reasoning_effort && args.reasoning_effort.is_some() {
        warnings.push(format!(
            "--reasoning-effort is not sent: {} has no reasoning effort",
            info.api_name
        ));
    }
}

/// The model's price per million tokens and where it comes from
/// (`--price`, the built-in table, or unknown); `--max-cost` needs one.
fn price_of(args: &RunOptions) -> Result<(Option<Price>, String), ConfigError> {
    let (price, price_source) = match args.price.as_deref() {
        Some(raw) => (Some(Price::parse(raw)?), "--price".to_owned()),
        None => match builtin_price(&args.model) {
            Some(price) => (Some(price), format!("built-in table of {PRICES_TAKEN}")),
            None => (None, "unknown".to_owned()),
        },
    };
    if args.max_cost.is_some() && price.is_none() {
        return Err(ConfigError::Usage(format!(
            "--max-cost needs the price of {}, which onebash does not know\nhint: give it with --price INPUT,OUTPUT (USD per million tokens)",
            args.model
        )));
    }
    Ok((price, price_source))
}

/// The Messages API's rules for extended thinking, checked before any
/// task so that a run does not end every task on the same 400: a budget of
/// at least 1024 tokens, below `max_tokens` unless thinking is interleaved
/// (then the budget spans the whole turn), and no `temperature` (nor a
/// `top_p` below 0.95) beside it.
fn check_thinking(args: &RunOptions) -> Result<(), ConfigError> {
    let usage = |message: String| Err(ConfigError::Usage(message));
    let Some(budget) = args.thinking_budget else {
        if args.interleaved_thinking {
            return usage(
                "--interleaved-thinking needs --thinking-budget\nhint: add --thinking-budget 4096, say".to_owned(),
            );
        }
        return Ok(());
    };
    let info: &ProviderInfo = args.provider.info();
    if !info.thinking {
        return usage(format!(
            "--thinking-budget is for --provider {}\nhint: for other servers pass their own field with --model-arg",
            thinking_providers()
        ));
    }
    if budget < MIN_THINKING_BUDGET {
        return usage(format!(
            "--thinking-budget {budget} is below the API's minimum of {MIN_THINKING_BUDGET} tokens"
        ));
    }
    if let Some(max_output) = args.max_output_tokens.or(info.default_max_output_tokens)
        && budget >= max_output
        && !args.interleaved_thinking
    {
        return usage(format!(
            "--thinking-budget {budget} must be below the output limit of {max_output} tokens\nhint: raise --max-output-tokens, or add --interleaved-thinking, where the budget spans the whole turn"
        ));
    }
    if args.temperature.is_some() {
        return usage(
            "--temperature cannot be sent with extended thinking (the API refuses it)\nhint: drop --temperature, or --thinking-budget".to_owned(),
        );
    }
    if args.top_p.is_some_and(|p| p < 0.95) {
        return usage(
            "--top-p below 0.95 cannot be sent with extended thinking (the API refuses it)\nhint: drop --top-p, or --thinking-budget".to_owned(),
        );
    }
    Ok(())
}

/// The providers whose API has extended thinking, as `--provider` names
/// them: `anthropic`.
fn thinking_providers() -> String {
    Provider::ALL
        .iter()
        .filter(|provider| provider.info().thinking)
        .map(|provider| provider.info().name)
        .collect::<Vec<_>>()
        .join(" or ")
}

/// `--model-arg KEY=JSON`, each into the request body as given.
fn parse_model_args(
    raw: &[String],
) -> Result<serde_json::Map<String, serde_json::Value>, ConfigError> {
    let mut extra = serde_json::Map::new();
    for arg in raw {
        let (key, value) = arg.split_once('=').ok_or_else(|| {
            ConfigError::Usage(format!(
                "--model-arg {arg:?} is not KEY=JSON (for example reasoning_effort=\"high\")"
            ))
        })?;
        if key.is_empty() {
            return Err(ConfigError::Usage(format!(
                "--model-arg {arg:?} has an empty key"
            )));
        }
        let value = serde_json::from_str(value)
            .unwrap_or_else(|_| serde_json::Value::String(value.to_owned()));
        extra.insert(key.to_owned(), value);
    }
    Ok(extra)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::request::ReasoningEffort;
    use crate::config::RunConfig;
    use crate::config::options::TASK_LINE;
    use crate::config::run_config::Unprobed;
    use crate::sys::sandbox::SandboxMode;

    /// `--reasoning-effort` is in the fingerprint only when given, so run
    /// folders from before it keep resuming; a protocol that cannot send
    /// it, or a seed, says so.
    #[test]
    fn reasoning_effort_is_fingerprinted_when_given_and_warned_where_not_sent() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tasks = dir.path().join("tasks.jsonl");
        std::fs::write(&tasks, TASK_LINE).expect("write tasks");
        let (out, cache) = (dir.path().join("out"), dir.path().join("cache"));
        // --model m --base-url http://127.0.0.1:1/v1 --sandbox none -o OUT
        // --cache-dir CACHE, and what `extra` sets.
        let config = |extra: &dyn Fn(&mut RunOptions)| {
            let mut args = RunOptions {
                base_url: Some("http://127.0.0.1:1/v1".to_owned()),
                sandbox: SandboxMode::None,
                out: Some(out.clone()),
                cache_dir: Some(cache.clone()),
                ..RunOptions::defaults(&tasks, "m")
            };
            extra(&mut args);
            RunConfig::from_options(&args, &Secrets::default()).expect("a valid config")
        };
        let fingerprint =
            |config: &RunConfig<Unprobed>| config.clone().probe().expect("probed").fingerprint();
        let plain = config(&|_| {});
        assert!(
            fingerprint(&plain)["request"]
                .get("reasoning_effort")
                .is_none()
        );
        assert_eq!(plain.warnings, Vec::<String>::new());
        let high = config(&|o| o.reasoning_effort = Some(ReasoningEffort::High));
        assert_eq!(fingerprint(&high)["request"]["reasoning_effort"], "high");
        let responses = config(&|o| {
            o.provider = Provider::OpenaiResponses;
            o.seed = Some(1);
        });
        assert_eq!(fingerprint(&responses)["provider"], "openai-responses");
        assert_eq!(
            responses.warnings,
            ["--seed is not sent: OpenAI's Responses API has no seed"]
        );
        let anthropic = config(&|o| {
            o.provider = Provider::Anthropic;
            o.reasoning_effort = Some(ReasoningEffort::Low);
        });
        assert!(
            anthropic
                .warnings
                .iter()
                .any(|w| w.starts_with("--reasoning-effort is not sent")),
            "{:?}",
            anthropic.warnings
        );
    }

    /// What a test sets of the options.
    type Setter<'a> = dyn Fn(&mut RunOptions) + 'a;

    /// The API's rules for extended thinking are checked before any task:
    /// each broken combination is a usage error with its own words.
    #[test]
    fn thinking_flags_follow_the_api_rules() {
        let tasks = PathBuf::from("/nonexistent/tasks.jsonl");
        // --provider anthropic --model claude-x, and what `extra` sets.
        let check = |extra: &dyn Fn(&mut RunOptions)| {
            let mut args = RunOptions {
                provider: Provider::Anthropic,
                ..RunOptions::defaults(&tasks, "claude-x")
            };
            extra(&mut args);
            check_thinking(&args).map_err(|err| err.to_string())
        };
        let budget = |tokens: u64| move |o: &mut RunOptions| o.thinking_budget = Some(tokens);
        assert!(check(&|_| {}).is_ok());
        assert!(check(&budget(4096)).is_ok());
        assert!(
            check(&|o| {
                budget(1024)(o);
                o.top_p = Some(0.95);
            })
            .is_ok()
        );
        assert!(
            check(&|o| {
                budget(20000)(o);
                o.max_output_tokens = Some(8000);
                o.interleaved_thinking = true;
            })
            .is_ok()
        );
        let cases: [(&str, &Setter<'_>, &str); 5] = [
            (
                "--thinking-budget 1023",
                &budget(1023),
                "below the API's minimum",
            ),
            (
                "--thinking-budget 8192",
                &budget(8192),
                "must be below the output limit of 8192",
            ),
            (
                "--thinking-budget 2000 --temperature 0",
                &|o| {
                    budget(2000)(o);
                    o.temperature = Some(0.0);
                },
                "--temperature cannot be sent",
            ),
            (
                "--thinking-budget 2000 --top-p 0.5",
                &|o| {
                    budget(2000)(o);
                    o.top_p = Some(0.5);
                },
                "--top-p below 0.95",
            ),
            (
                "--interleaved-thinking",
                &|o| o.interleaved_thinking = true,
                "needs --thinking-budget",
            ),
        ];
        for (flags, extra, words) in cases {
            let err = check(extra).expect_err(flags);
            assert!(err.contains(words), "{flags}: {err}");
        }
        // --model gpt-x --thinking-budget 2048
        let openai = check_thinking(&RunOptions {
            thinking_budget: Some(2048),
            ..RunOptions::defaults(&tasks, "gpt-x")
        })
        .expect_err("openai");
        assert!(
            openai.to_string().contains("--provider anthropic"),
            "{openai}"
        );
    }
}
