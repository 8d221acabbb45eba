//! ingress-edge's one REST request: `GET /api/v10/gateway/bot` with the bot token, for
//! Discord's `session_start_limit`, by which [`crate::identify`] budgets IDENTIFYs.
//!
//! The request goes, as every Reach egress does, to a destination admitted by
//! `reach-destination` (controlled resolution or an exact local road, the pinned address, SNI
//! and Host bound to the admitted name, the root store a parameter), and its return is read with
//! `reach_bounded::fetch` within [`bounds`], so nothing unbounded reaches the parser. It needs no
//! EgressDecision: like the gateway connection it serves, it is the role's own session traffic,
//! the effect of no turn.
//!
//! **Architecture Invariant:** a [`SessionLimitReader`] knows one URL, checked when it is built
//! to be exactly `https://<host>[:port]/api/v10/gateway/bot`, and has one method, which sends a
//! GET of it and nothing else. It follows no redirect (a 3xx is a refused status) and never
//! retries; the budget decides when to ask again.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use http::header::{AUTHORIZATION, USER_AGENT};
use reach_bounded::{Bounds, ReturnError, fetch};
use reach_destination::{
    Admission, Destination, DestinationError, Dialer, PinnedConnector, Purpose, Resolver, TcpDialer,
};

use crate::identify::{GatewayBot, SessionLimitRefusal, judge_gateway_bot};
use crate::model::BotToken;

/// The one path the reader asks for.
pub const GATEWAY_BOT_PATH: &str = "/api/v10/gateway/bot";
/// The purpose its destination is admitted for (the manifest's `discord-session-limit`).
pub const PURPOSE: &str = "discord-session-limit";
/// The longest a read may take, admission and connection included: the gateway client waits for
/// it before identifying, and falls back to the conservative allowance past it.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The reader could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SessionLimitUrlError {
    /// The URL is not a canonical HTTPS destination.
    #[error("session limit url refused: {0}")]
    Destination(#[from] DestinationError),
    /// The URL names another resource than `GET /api/v10/gateway/bot`.
    #[error("the session limit is read from https://<host>/api/v10/gateway/bot only, not {0}")]
    NotGatewayBot(String),
}

/// Reads Discord's `session_start_limit`: `GET /api/v10/gateway/bot`, nothing else.
pub struct SessionLimitReader<R, D = TcpDialer> {
    url: Destination,
    token: BotToken,
    admission: Arc<Admission<R>>,
    connector: PinnedConnector<D>,
}

impl<R, D> std::fmt::Debug for SessionLimitReader<R, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionLimitReader")
            .field("url", &self.url.to_string())
            .finish_non_exhaustive()
    }
}

impl<R: Resolver, D: Dialer> SessionLimitReader<R, D> {
    /// A reader of `url`, which must be exactly `https://<host>[:port]/api/v10/gateway/bot`
    /// (no query, no other path), dialed through `admission` and `connector`.
    pub fn new(
        url: &str,
        token: BotToken,
        admission: Arc<Admission<R>>,
        connector: PinnedConnector<D>,
    ) -> Result<Self, SessionLimitUrlError> {
        let url = Destination::parse(url, Purpose::new(PURPOSE)?)?;
        if url.path_and_query() != GATEWAY_BOT_PATH {
            return Err(SessionLimitUrlError::NotGatewayBot(url.to_string()));
        }
        Ok(SessionLimitReader {
            url,
            token,
            admission,
            connector,
        })
    }

    /// The URL read.
    pub fn url(&self) -> String {
        self.url.to_string()
    }

    /// One read: admit the URL, dial the pinned address, send the GET with the bot token, read
    /// the return within [`bounds`] and judge it ([`judge_gateway_bot`]). Every failure is a
    /// typed refusal.
    pub async fn read(&self) -> Result<GatewayBot, SessionLimitRefusal> {
        let admitted = self
            .admission
            .admit(self.url.clone())
            .await
            .map_err(|e| SessionLimitRefusal::NotSent(e.code().to_owned()))?;
        let stream = self
            .connector
            .connect(&admitted)
            .await
            .map_err(|e| SessionLimitRefusal::NotSent(e.code().to_owned()))?;
        let bot = http::HeaderValue::try_from(format!("Bot {}", self.token.expose()))
            .map_err(|_| SessionLimitRefusal::NotSent("discord/request-build".into()))?;
        let request = admitted
            .request(Method::GET)
            .header(USER_AGENT, crate::rest::USER_AGENT_VALUE)
            .header(AUTHORIZATION, bot)
            .body(Bytes::new())
            .map_err(|_| SessionLimitRefusal::NotSent("discord/request-build".into()))?;
        let response = fetch(stream, request, &bounds())
            .await
            .map_err(|e| match e {
                ReturnError::Request(e) => SessionLimitRefusal::NotSent(e.code().to_owned()),
                e => SessionLimitRefusal::Unread(e.code()),
            })?;
        let retry_after = response
            .headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok());
        judge_gateway_bot(response.status.as_u16(), retry_after, &response.body)
    }
}

/// Bounds of a `GET /gateway/bot` return: every status is read (a 401 or 429 body says why),
/// JSON only, and small — Discord's answer is about 150 bytes.
pub fn bounds() -> Bounds {
    Bounds {
        allowed_statuses: (200..600).collect(),
        allowed_content_types: vec!["application/json".into()],
        max_wire_bytes: 16 * 1024,
        max_expanded_bytes: 16 * 1024,
        max_head_time: Duration::from_secs(20),
        max_stream_time: Duration::from_secs(25),
        max_idle_time: Duration::from_secs(10),
        max_json_depth: 4,
        max_json_items: 64,
        ..Bounds::default()
    }
}
