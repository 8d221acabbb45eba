//! The model Portal adapter of this instance: settings, and one redeemed attempt.

use std::sync::Arc;

use anyhow::Context as _;
use reach_destination::roads::{ConfiguredResolver, Roads};
use reach_destination::{AdmissionPolicy, PinnedConnector, TcpDialer};
use reach_egress_gate::RedeemedDecision;
use reach_portal::{ApiKey, CallFailure, Messages, PortalClient, PortalConfig, ProviderReturn};

use crate::gate::ModelPayload;

/// Tokens asked for when neither the settings nor the decision say less: an answer is at most
/// 1,200 characters, about 300 tokens.
const DEFAULT_MAX_TOKENS: u64 = 512;

/// `settings.portal` of the role config.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortalSettings {
    /// The chat completions URL, canonical; core's `settings.portal.endpoint` must be the same
    /// string, since every decision binds it.
    pub endpoint: String,
    /// The model asked for.
    pub model: String,
    /// Ask for a server-sent-events stream.
    #[serde(default)]
    pub streaming: bool,
    /// How a task passage's answer schema is sent (`none`, `json-object` for llama.cpp and
    /// llama-cpp-python, `json-schema` for OpenAI, vLLM and Ollama): the runtime then decodes
    /// only JSON of the turn's answer shape (`reach_passage::constraint`).
    #[serde(default)]
    pub constrain: reach_portal::Constrain,
    /// How long an answer may take, head and stream each, in seconds: a model on a CPU writes
    /// a plan slower than a hosted one answers a question. Unset: `portal_bounds`.
    #[serde(default)]
    pub answer_within_s: Option<u64>,
    /// Most tokens asked for per attempt.
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u64,
    /// Where the bytes may go: public name servers, or an exact local road with its CA.
    #[serde(default)]
    pub roads: Roads,
}

fn default_max_tokens() -> u64 {
    DEFAULT_MAX_TOKENS
}

/// The configured adapter.
#[derive(Debug)]
pub struct Portal {
    client: PortalClient<ConfiguredResolver, TcpDialer>,
    max_tokens: u64,
}

impl Portal {
    pub fn new(s: PortalSettings, key: &[u8]) -> anyhow::Result<Arc<Self>> {
        let key = ApiKey::from_bytes(key).context("the provider-api-key credential")?;
        let admission = s
            .roads
            .admission(AdmissionPolicy::default())
            .context("settings.portal.roads")?;
        let connector =
            PinnedConnector::new(s.roads.roots().context("settings.portal.roads")?, TcpDialer);
        let mut bounds = reach_portal::portal_bounds();
        if let Some(s) = s.answer_within_s {
            anyhow::ensure!(
                (1..=3600).contains(&s),
                "settings.portal.answer_within_s is 1 to 3600"
            );
            bounds.max_head_time = std::time::Duration::from_secs(s);
            bounds.max_stream_time = std::time::Duration::from_secs(s);
        }
        let client = PortalClient::new(PortalConfig {
            endpoint: s.endpoint,
            model: s.model,
            key,
            streaming: s.streaming,
            constrain: s.constrain,
            admission: Arc::new(admission),
            connector,
            bounds,
        })
        .context("settings.portal.endpoint")?;
        Ok(Arc::new(Portal {
            client,
            max_tokens: s.max_tokens,
        }))
    }

    /// The destination every decision for this adapter must bind.
    pub fn destination(&self) -> String {
        self.client.destination()
    }

    /// The destination a readiness probe's decision binds.
    pub fn models_destination(&self) -> Option<String> {
        self.client.models_destination()
    }

    /// The readiness probe: the runtime's model list, one GET.
    pub async fn probe(&self) -> Result<reach_portal::openai::ServedModels, CallFailure> {
        self.client.served_models().await
    }

    /// One physical attempt under `decision`, asking for no more tokens than it admits.
    pub async fn attempt(
        &self,
        decision: &RedeemedDecision,
        payload: &ModelPayload,
    ) -> Result<ProviderReturn, CallFailure> {
        let max_tokens = match decision.max_tokens() {
            0 => self.max_tokens,
            admitted => admitted.min(self.max_tokens),
        };
        match payload {
            ModelPayload::Cut(cut) => self.client.complete(cut, max_tokens).await,
            ModelPayload::Probe => Err(CallFailure::NotSent {
                code: "egress/probe-not-a-completion".into(),
            }),
            ModelPayload::Passage(p) => {
                let schema = reach_passage::constraint::narrowed(p.answer, p.narrowing.as_ref());
                let messages = Messages {
                    system: &p.system,
                    user: &p.user,
                    schema: Some((
                        reach_passage::constraint::constraint_name(p.answer),
                        &schema,
                    )),
                };
                let max_tokens = max_tokens.min(p.max_completion_tokens);
                self.client.complete_messages(&messages, max_tokens).await
            }
        }
    }
}
