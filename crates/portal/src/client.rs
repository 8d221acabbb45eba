//! The OpenAI-compatible chat completions adapter of egress-provider (feature `net`).
//!
//! One call is one physical attempt: admit the configured endpoint (destination admission with
//! its controlled resolver or exact local road), dial the pinned address, send one POST, read
//! the return under [`Bounds`] (a whole JSON document, or a `text/event-stream` of chunks), and
//! reduce it to a [`ProviderReturn`].
//!
//! **Architecture Invariant:** this module never retries. Whether bytes may have left is part of
//! every failure ([`CallFailure::transmitted`]); a retry needs a fresh EgressDecision, which is
//! the caller's business.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use reach_bounded::{Bound, Bounds, ReturnError, fetch, fetch_sse};
use reach_destination::{
    Admission, AdmittedDestination, Destination, DestinationError, Dialer, PinnedConnector,
    PinnedStream, Purpose, Resolver, TcpDialer,
};

use crate::cut::CutPayload;
use crate::key::ApiKey;
use crate::openai::{
    Constrain, Messages, ProviderReturn, StreamAssembler, messages_body, parse_completion,
};
use crate::quarantine::Quarantine;

/// The destination purpose of a model call.
pub const PURPOSE: &str = "model-completion";

/// The adapter's fixed parts.
#[derive(Debug)]
pub struct PortalConfig<R, D = TcpDialer> {
    /// The chat completions URL, canonical (`https://host[:port]/v1/chat/completions`).
    pub endpoint: String,
    /// The model asked for.
    pub model: String,
    /// The provider key.
    pub key: ApiKey,
    /// Whether to ask for a server-sent-events stream.
    pub streaming: bool,
    /// How a schema the messages carry is sent ([`Constrain::None`]: not at all).
    pub constrain: Constrain,
    /// Destination admission (policy and controlled resolver).
    pub admission: Arc<Admission<R>>,
    /// The pinned TLS connector.
    pub connector: PinnedConnector<D>,
    /// Bounds on the return; [`portal_bounds`] by default.
    pub bounds: Bounds,
}

/// The bounds of a model return: a chat answer is kilobytes, so a megabyte is generous; the
/// model may think a while before its head, but a silent stream is cut at 20 s. Tokens keep the
/// default: a stream spends dozens of wire tokens of JSON framing per word of answer.
pub fn portal_bounds() -> Bounds {
    Bounds {
        max_wire_bytes: 1024 * 1024,
        max_expanded_bytes: 1024 * 1024,
        max_head_time: Duration::from_secs(60),
        max_stream_time: Duration::from_secs(90),
        max_idle_time: Duration::from_secs(20),
        max_sse_events: 20_000,
        ..Bounds::default()
    }
}

/// Why a call produced no return for core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallFailure {
    /// Nothing left the body: admission, dialing or the TLS handshake failed.
    NotSent { code: String },
    /// The request was sent and the return failed a bound or the protocol.
    Failed { code: String },
    /// The return was read but is not a chat completion (quarantined at the gate).
    Quarantined(Quarantine),
}

impl CallFailure {
    /// The failure code core records.
    pub fn code(&self) -> String {
        match self {
            CallFailure::NotSent { code } | CallFailure::Failed { code } => code.clone(),
            CallFailure::Quarantined(q) => q.code(),
        }
    }

    /// Whether request bytes may have left.
    pub fn transmitted(&self) -> bool {
        !matches!(self, CallFailure::NotSent { .. })
    }
}

/// An adapter bound to one endpoint and model.
#[derive(Debug)]
pub struct PortalClient<R, D = TcpDialer> {
    config: PortalConfig<R, D>,
    endpoint: Destination,
}

impl<R: Resolver, D: Dialer> PortalClient<R, D> {
    /// Builds the adapter; the endpoint must be a canonical HTTPS destination written exactly as
    /// configured, since core binds that string into every EgressDecision.
    pub fn new(config: PortalConfig<R, D>) -> Result<Self, DestinationError> {
        let endpoint = Destination::parse(&config.endpoint, Purpose::new(PURPOSE)?)?;
        if endpoint.to_string() != config.endpoint {
            return Err(DestinationError::NonCanonical {
                reason: "the endpoint must be written in its canonical form",
            });
        }
        Ok(PortalClient { config, endpoint })
    }

    /// The destination every decision for this adapter binds.
    pub fn destination(&self) -> String {
        self.endpoint.to_string()
    }

    /// The destination a readiness probe's decision binds: the model list beside the
    /// endpoint (`None` when the endpoint does not end in `/chat/completions`).
    pub fn models_destination(&self) -> Option<String> {
        crate::openai::models_url(&self.config.endpoint)
    }

    /// One GET of the runtime's model list (`/v1/models`), the readiness probe: which models
    /// it serves. The same admission, road and key as a completion.
    pub async fn served_models(&self) -> Result<crate::openai::ServedModels, CallFailure> {
        let url = self
            .models_destination()
            .ok_or_else(|| CallFailure::NotSent {
                code: "portal/no-models-url".into(),
            })?;
        let destination =
            Destination::parse(&url, Purpose::new(PURPOSE).map_err(not_sent)?).map_err(not_sent)?;
        let (admitted, stream) = self.dial(destination).await?;
        let request = admitted
            .request(Method::GET)
            .header(AUTHORIZATION, self.config.key.bearer())
            .header(ACCEPT, "application/json")
            .body(Bytes::new())
            .map_err(|_| CallFailure::NotSent {
                code: "portal/request-build".into(),
            })?;
        let mut bounds = self.config.bounds.clone();
        bounds.allowed_content_types = vec!["application/json".into()];
        bounds.max_head_time = Duration::from_secs(10);
        let response = fetch(stream, request, &bounds).await.map_err(failure)?;
        crate::openai::parse_models(&response.body).map_err(CallFailure::Quarantined)
    }

    /// Admits `destination` (policy, resolver or exact road) and dials its pinned address;
    /// nothing has left when this fails.
    async fn dial(
        &self,
        destination: Destination,
    ) -> Result<(AdmittedDestination, PinnedStream), CallFailure> {
        let admitted = self
            .config
            .admission
            .admit(destination)
            .await
            .map_err(not_sent)?;
        let stream = self
            .config
            .connector
            .connect(&admitted)
            .await
            .map_err(not_sent)?;
        Ok((admitted, stream))
    }

    /// The connector (tests read its dialer's record).
    pub fn connector(&self) -> &PinnedConnector<D> {
        &self.config.connector
    }

    /// One physical attempt for `payload`, asking for at most `max_tokens`.
    pub async fn complete(
        &self,
        payload: &CutPayload,
        max_tokens: u64,
    ) -> Result<ProviderReturn, CallFailure> {
        let user = crate::openai::user_message(payload);
        let messages = Messages {
            system: crate::openai::SYSTEM_PROMPT,
            user: &user,
            schema: None,
        };
        self.complete_messages(&messages, max_tokens).await
    }

    /// One attempt carrying `messages` as they are (a task Room's rendered passage).
    pub async fn complete_messages(
        &self,
        messages: &Messages<'_>,
        max_tokens: u64,
    ) -> Result<ProviderReturn, CallFailure> {
        let (admitted, stream) = self.dial(self.endpoint.clone()).await?;
        let body = messages_body(
            messages,
            &self.config.model,
            max_tokens,
            self.config.streaming,
            self.config.constrain,
        );
        let accept = if self.config.streaming {
            "text/event-stream"
        } else {
            "application/json"
        };
        let request = admitted
            .request(Method::POST)
            .header(AUTHORIZATION, self.config.key.bearer())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, accept)
            .body(Bytes::from(body))
            .map_err(|_| CallFailure::NotSent {
                code: "portal/request-build".into(),
            })?;
        let mut bounds = self.config.bounds.clone();
        if self.config.streaming {
            bounds.allowed_content_types = vec!["text/event-stream".into()];
            let mut events = fetch_sse(stream, request, &bounds).await.map_err(failure)?;
            let mut assembler = StreamAssembler::new();
            while let Some(event) = events.next_event().await.map_err(failure)? {
                if assembler
                    .feed(&event.data)
                    .map_err(CallFailure::Quarantined)?
                {
                    break;
                }
            }
            assembler.finish().map_err(CallFailure::Quarantined)
        } else {
            bounds.allowed_content_types = vec!["application/json".into()];
            let response = fetch(stream, request, &bounds).await.map_err(failure)?;
            parse_completion(&response.body).map_err(CallFailure::Quarantined)
        }
    }
}

/// A destination refused before any byte left.
fn not_sent(e: DestinationError) -> CallFailure {
    CallFailure::NotSent {
        code: e.code().to_owned(),
    }
}

/// A failed read: a refused request was never sent; a provider status is named as such.
fn failure(e: ReturnError) -> CallFailure {
    match &e {
        ReturnError::Request(d) => CallFailure::NotSent {
            code: d.code().to_owned(),
        },
        ReturnError::Bound(v) if v.bound == Bound::Status => CallFailure::Failed {
            code: format!("provider/http-{}", v.observed),
        },
        _ => CallFailure::Failed { code: e.code() },
    }
}
