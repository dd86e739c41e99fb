//! The model providers, as data in one registry: each [`Provider`]'s
//! [`ProviderInfo`] (its wire protocol, default base URL and key variable,
//! output cap and the request fields its API has), read by the settings'
//! checks (`config/model_choice.rs`), the client's assembly (`api.rs`) and a
//! replay (`replay.rs`).
//!
//! Adding a provider that speaks a protocol onebash has (an
//! OpenAI-compatible server) is a variant here and its entry in
//! [`Provider::info`]; a new protocol is its own file beside `openai.rs`,
//! `responses.rs` and `anthropic.rs`, a [`Wire`] for it and its arms in
//! `api.rs`'s `ApiClient`, the one place that dispatches to the protocols.

/// `--provider`: whose API the model is behind, in the words of the command
/// line, run.json and the trajectory header.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    Openai,
    Anthropic,
    /// OpenAI's Responses API (`/responses`), spoken statelessly.
    #[serde(rename = "openai-responses")]
    OpenaiResponses,
}

/// A wire protocol, and so the format of the messages a conversation keeps
/// (a replay reads the recorded run's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wire {
    /// OpenAI Chat Completions (`openai.rs`); also the format of the oracle,
    /// noop and predictions.
    Chat,
    /// The Anthropic Messages API (`anthropic.rs`).
    Messages,
    /// OpenAI's Responses API (`responses.rs`): one `{"role": "assistant",
    /// "output": [...]}` a turn.
    Responses,
}

/// What onebash knows of a provider.
#[derive(Debug)]
pub(crate) struct ProviderInfo {
    /// The name in `--provider`, run.json and the trajectory header.
    pub name: &'static str,
    pub wire: Wire,
    /// The variable that gives the base URL when `--base-url` does not.
    pub base_url_env: &'static str,
    /// The base URL when neither does: the provider's own service, which
    /// needs a key (a local server usually does not).
    pub default_base_url: &'static str,
    /// The variable the key is read from unless `--api-key-env` names one.
    pub api_key_env: &'static str,
    /// The API as warnings name it (`the Anthropic Messages API`).
    pub api_name: &'static str,
    /// The output tokens asked for when `--max-output-tokens` is not given,
    /// where the API needs a number; `None`: the server's own.
    pub default_max_output_tokens: Option<u64>,
    /// Whether the API has a `seed` field (`--seed`).
    pub seed: bool,
    /// Whether the API has a reasoning effort (`--reasoning-effort`).
    pub reasoning_effort: bool,
    /// Whether the API has extended thinking (`--thinking-budget`).
    pub thinking: bool,
}

impl Provider {
    /// Every provider, in `--provider`'s order.
    pub(crate) const ALL: [Provider; 3] = [
        Provider::Openai,
        Provider::Anthropic,
        Provider::OpenaiResponses,
    ];

    /// The registry: each provider's data.
    pub(crate) fn info(self) -> &'static ProviderInfo {
        match self {
            Provider::Openai => &OPENAI,
            Provider::Anthropic => &ANTHROPIC,
            Provider::OpenaiResponses => &OPENAI_RESPONSES,
        }
    }
}

const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

const OPENAI: ProviderInfo = ProviderInfo {
    name: "openai",
    wire: Wire::Chat,
    base_url_env: "OPENAI_BASE_URL",
    default_base_url: OPENAI_BASE_URL,
    api_key_env: "OPENAI_API_KEY",
    api_name: "OpenAI's Chat Completions API",
    default_max_output_tokens: None,
    seed: true,
    reasoning_effort: true,
    thinking: false,
};

const OPENAI_RESPONSES: ProviderInfo = ProviderInfo {
    name: "openai-responses",
    wire: Wire::Responses,
    api_name: "OpenAI's Responses API",
    seed: false,
    ..OPENAI
};

const ANTHROPIC: ProviderInfo = ProviderInfo {
    name: "anthropic",
    wire: Wire::Messages,
    base_url_env: "ANTHROPIC_BASE_URL",
    default_base_url: "https://api.anthropic.com",
    api_key_env: "ANTHROPIC_API_KEY",
    api_name: "the Anthropic Messages API",
    default_max_output_tokens: Some(ANTHROPIC_MAX_OUTPUT_TOKENS),
    seed: false,
    reasoning_effort: false,
    thinking: true,
};

/// `max_tokens` of an Anthropic request when `--max-output-tokens` is not
/// given (the Messages API requires one).
pub(crate) const ANTHROPIC_MAX_OUTPUT_TOKENS: u64 = 8192;

/// The Messages API's smallest thinking budget.
pub(crate) const MIN_THINKING_BUDGET: u64 = 1024;

#[cfg(test)]
mod tests {
    use super::*;

    /// The registry's names are the words `--provider` parses and run.json
    /// writes: a provider is named the same everywhere.
    #[test]
    fn each_provider_is_named_as_the_command_line_and_run_json_name_it() {
        use clap::ValueEnum;
        for provider in Provider::ALL {
            let name = provider.info().name;
            let word = provider.to_possible_value().expect("a value");
            assert_eq!(word.get_name(), name);
            assert_eq!(serde_json::json!(provider), name);
        }
        assert_eq!(Provider::value_variants(), Provider::ALL);
    }
}
