//! A model behind an API: how to reach it ([`ApiModel`], as run.json
//! records it, with what every request sends, `request.rs`), and
//! [`ApiClient`], the one place that dispatches to the wire protocols
//! (`openai.rs`, `responses.rs`, `anthropic.rs`) by the provider's
//! [`Wire`] in the registry (`provider.rs`).

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::agent::anthropic::AnthropicClient;
use crate::agent::openai::OpenAiClient;
use crate::agent::pricing::Price;
use crate::agent::provider::{Provider, Wire};
use crate::agent::request::{RequestSettings, seconds};
use crate::agent::responses::ResponsesClient;
use crate::agent::types::{ModelError, ModelReply};

/// A model behind an API, and how to reach it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ApiModel {
    pub provider: Provider,
    pub name: String,
    pub base_url: String,
    /// The variable the key came from; the key itself is never serialized.
    pub api_key_env: String,
    #[serde(skip)]
    pub api_key: Option<String>,
    pub request: RequestSettings,
    pub max_retries: u32,
    #[serde(serialize_with = "seconds")]
    pub retry_delay: Duration,
    pub max_connections: usize,
    /// USD per million tokens, when known.
    pub price: Option<Price>,
    /// Where the price came from.
    pub price_source: String,
}

/// The client of one API model, in its provider's wire protocol.
pub(crate) struct ApiClient {
    provider: Provider,
    wire: WireClient,
}

/// The protocol files' clients, one a [`Wire`].
enum WireClient {
    Chat(OpenAiClient),
    Messages(AnthropicClient),
    Responses(ResponsesClient),
}

impl ApiClient {
    /// The client `api` describes, in the protocol its provider speaks.
    pub(crate) fn new(api: &ApiModel) -> Result<ApiClient, reqwest::Error> {
        let (url, name, key, request) = (
            &api.base_url,
            &api.name,
            api.api_key.clone(),
            api.request.clone(),
        );
        let wire = match api.provider.info().wire {
            Wire::Chat => WireClient::Chat(OpenAiClient::new(url, name, key, request)?),
            Wire::Messages => WireClient::Messages(AnthropicClient::new(url, name, key, request)?),
            Wire::Responses => {
                WireClient::Responses(ResponsesClient::new(url, name, key, request)?)
            }
        };
        Ok(ApiClient {
            provider: api.provider,
            wire,
        })
    }

    /// The provider's name, for the trajectory header.
    pub(crate) fn provider(&self) -> &'static str {
        self.provider.info().name
    }

    /// The format of the messages in the history.
    pub(crate) fn wire(&self) -> Wire {
        self.provider.info().wire
    }

    /// The URL requests go to, for messages about the API.
    pub(crate) fn url(&self) -> &str {
        match &self.wire {
            WireClient::Chat(client) => client.url(),
            WireClient::Messages(client) => client.url(),
            WireClient::Responses(client) => client.endpoint().url(),
        }
    }

    /// One cheap request before any task starts (see `http::preflight`).
    pub(crate) async fn preflight(&self) -> Result<(), ModelError> {
        match &self.wire {
            WireClient::Chat(client) => client.preflight().await,
            WireClient::Messages(client) => client.preflight().await,
            WireClient::Responses(client) => client.endpoint().preflight().await,
        }
    }

    /// The request's fields other than the conversation, for the trajectory.
    pub(crate) fn request_template(&self) -> Value {
        match &self.wire {
            WireClient::Chat(client) => client.request_template(),
            WireClient::Messages(client) => client.request_template(),
            WireClient::Responses(client) => client.request_template(),
        }
    }

    /// One attempt at the next answer (retries are `ModelClient`'s); the
    /// system prompt is in `messages` already where the protocol keeps it
    /// there (Chat Completions).
    pub(crate) async fn complete(
        &self,
        system: &str,
        messages: &[Value],
    ) -> Result<ModelReply, ModelError> {
        match &self.wire {
            WireClient::Chat(client) => client.complete(messages).await,
            WireClient::Messages(client) => client.complete(system, messages).await,
            WireClient::Responses(client) => client.complete(system, messages).await,
        }
    }
}
