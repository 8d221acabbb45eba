//! The REST v10 Create Message adapter of egress-discord (seed 001, steps 9 and 10), and the
//! channel read used to reconcile an UNKNOWN delivery.
//!
//! Every request opens a fresh connection to a destination admitted by `reach-destination`
//! (the pinned address, SNI and Host bound to the admitted name, the root store a parameter)
//! and reads the return with `reach_bounded::fetch`, so nothing unbounded reaches a parser.
//!
//! **Architecture Invariant:** no channel read is made unless its [`ReadGate`] admitted that
//! exact URL first (in egress-discord: a redeemed EgressDecision per page).
//!
//! **Architecture Invariant:** this module never retries. Each call is one physical attempt;
//! its [`CreateOutcome`] says what the caller may conclude. Only [`CreateOutcome::NotSent`] and
//! [`CreateOutcome::RateLimited`] prove that Discord did not accept the attempt; everything
//! after a request byte may have been written is [`CreateOutcome::Unknown`] unless Discord
//! answered.
//!
//! **Architecture Invariant:** the body is fixed by [`CreateMessage::body`]: `allowed_mentions`
//! is always `{"parse": []}` (the bot can never ping anyone), the `SUPPRESS_EMBEDS` flag is
//! always set and no `embeds` field exists, and `enforce_nonce` is always true.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE, HOST, USER_AGENT};
use http::{Method, Request};
use reach_bounded::{BoundedResponse, Bounds, ReturnError, fetch};
use reach_destination::{
    Admission, AdmittedDestination, Destination, DestinationError, Dialer, PinnedConnector,
    Purpose, Resolver, TcpDialer,
};
use serde_json::Value;
use tokio::time::Instant;

use crate::model::{BotToken, InteractionToken, MessageCreate, Snowflake};
use crate::ratelimit::{RateLimits, Route};

/// The production base URL.
pub const DISCORD_API_BASE: &str = "https://discord.com/api/v10";
/// Pages a reconciliation reads before it gives up as inconclusive (2,000 messages after the
/// question: far more than an admitted channel sees in the minutes a delivery takes).
pub const MAX_RECONCILE_PAGES: usize = 20;
/// How long after an attempt ended a channel read should wait before it may prove absence: a
/// request written to a connection that then dropped may still be processed by Discord. The
/// adapter does not sleep; the caller (egress-discord) schedules the read.
pub const RECONCILE_SETTLE: Duration = Duration::from_secs(60);
/// `User-Agent` Discord requires from bots (`DiscordBot ($url, $version)`).
pub(crate) const USER_AGENT_VALUE: &str = "DiscordBot (https://reach.invalid, 1)";

pub use crate::delivery::{
    CreateMessage, CreateOutcome, DeferredAck, FLAG_LOADING, FLAG_SUPPRESS_EMBEDS, FollowUp,
    InteractionReply, InvalidNonce, MAX_CONTENT_CHARS, MAX_NONCE_LEN, Nonce, OriginalEdit,
    RECONCILE_PAGE, Reconciliation, channel_read_request, channel_read_url, follow_up_url,
    interaction_callback_url, original_response_url, token_placeholder,
};

/// Admits each channel read of a reconciliation, immediately before its request is written.
///
/// egress-discord's gate obtains an EgressDecision for the exact URL from core and redeems it
/// at ward; `Err(code)` means that read is not made (no byte leaves) and the reconciliation
/// ends [`Reconciliation::Inconclusive`] with the code. There is deliberately no gate that
/// admits everything in this crate.
pub trait ReadGate {
    /// Admit one GET of `url`: a channel page (built by [`channel_read_url`]) after the cursor
    /// `after`, or an interaction's original response, named by its token-free destination
    /// ([`RestClient::original_destination`]) with `after` the interaction id.
    fn admit(
        &mut self,
        url: &str,
        after: Snowflake,
    ) -> impl std::future::Future<Output = Result<(), String>> + Send;
}

/// The adapter's fixed parts.
#[derive(Debug)]
pub struct RestConfig<R, D = TcpDialer> {
    /// The API base, `https://discord.com/api/v10` in production.
    pub base_url: String,
    /// The bot token.
    pub token: BotToken,
    /// The bot's user id (reconciliation looks only at our own messages).
    pub bot_user_id: Snowflake,
    /// Destination admission (policy and controlled resolver).
    pub admission: Arc<Admission<R>>,
    /// The pinned TLS connector (its root store is the parameter).
    pub connector: PinnedConnector<D>,
}

/// A REST adapter bound to one admitted API base.
#[derive(Debug)]
pub struct RestClient<R, D = TcpDialer> {
    config: RestConfig<R, D>,
    base: Destination,
    base_path: String,
    /// What Discord's bucket headers and 429s said ([`crate::ratelimit`]).
    limits: RateLimits,
}

/// The adapter could not be built.
#[derive(Debug, thiserror::Error)]
pub enum RestError {
    /// The base URL is not a canonical HTTPS destination.
    #[error("discord base url refused: {0}")]
    Base(#[from] DestinationError),
}

impl<R: Resolver, D: Dialer> RestClient<R, D> {
    /// Build the adapter; the base URL must parse as a canonical HTTPS destination.
    pub fn new(config: RestConfig<R, D>) -> Result<Self, RestError> {
        let purpose = Purpose::new("discord-rest")?;
        let base = Destination::parse(&config.base_url, purpose)?;
        let base_path = base.path_and_query().trim_end_matches('/').to_owned();
        Ok(RestClient {
            config,
            base,
            base_path,
            limits: RateLimits::default(),
        })
    }

    /// The connector (tests read its dialer's record).
    pub fn connector(&self) -> &PinnedConnector<D> {
        &self.config.connector
    }

    async fn open(
        &self,
    ) -> Result<(AdmittedDestination, reach_destination::PinnedStream), DestinationError> {
        let admitted = self.config.admission.admit(self.base.clone()).await?;
        let stream = self.config.connector.connect(&admitted).await?;
        Ok((admitted, stream))
    }

    fn request(
        &self,
        admitted: &AdmittedDestination,
        method: Method,
        path: &str,
        body: Bytes,
        auth: Auth,
    ) -> Result<Request<Bytes>, http::Error> {
        let mut builder = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base_path))
            .header(HOST, admitted.host_header())
            .header(USER_AGENT, USER_AGENT_VALUE);
        if !body.is_empty() {
            builder = builder.header(CONTENT_TYPE, "application/json");
        }
        if auth == Auth::Bot {
            let bot = http::HeaderValue::try_from(format!("Bot {}", self.config.token.expose()))?;
            builder = builder.header(AUTHORIZATION, bot);
        }
        builder.body(body)
    }

    /// One request to `path` (under the base URL) on a freshly admitted, pinned connection,
    /// its return read within `bounds`.
    async fn exchange(
        &self,
        method: Method,
        path: &str,
        body: Vec<u8>,
        auth: Auth,
        bounds: &Bounds,
    ) -> Result<BoundedResponse, Unanswered> {
        // A route Discord said is spent (or a global limit) is not tried before its reset:
        // answered rate-limited, nothing sent. Interaction webhooks (token in the path) are
        // outside the bot's global limit.
        let route = Route::of(&method, path);
        let global = auth == Auth::Bot;
        let _turn = self.limits.turn(&route).await;
        let wait = self.limits.wait_before(&route, global, Instant::now());
        if wait > MAX_INLINE_WAIT {
            return Err(Unanswered::Limited(wait));
        }
        tokio::time::sleep(wait).await;
        let (admitted, stream) = self
            .open()
            .await
            .map_err(|e| Unanswered::NotSent(e.code().to_owned()))?;
        let request = self
            .request(&admitted, method, path, Bytes::from(body), auth)
            .map_err(|_| Unanswered::NotSent("discord/request-build".into()))?;
        let response = fetch(stream, request, bounds).await.map_err(|e| match e {
            ReturnError::Request(e) => Unanswered::NotSent(e.code().to_owned()),
            e => Unanswered::Lost(e.code()),
        })?;
        let status = response.status.as_u16();
        let (retry_after, body_global) = if status == 429 {
            let v: Option<Value> = serde_json::from_slice(&response.body).ok();
            let field = |k: &str| v.as_ref().and_then(|v| v.get(k)).cloned();
            (
                field("retry_after").and_then(|r| r.as_f64()),
                field("global").and_then(|g| g.as_bool()).unwrap_or(false),
            )
        } else {
            (None, false)
        };
        self.limits.observe(
            &route,
            status,
            &response.headers,
            retry_after,
            body_global,
            Instant::now(),
        );
        Ok(response)
    }

    /// One Create Message attempt: `POST /channels/{id}/messages`.
    pub async fn create_message(&self, message: &CreateMessage) -> CreateOutcome {
        let path = format!("/channels/{}/messages", message.channel_id);
        let body = message.body_bytes();
        match self
            .exchange(Method::POST, &path, body, Auth::Bot, &create_bounds())
            .await
        {
            Ok(r) => classify(r.status.as_u16(), &r.headers, &r.body),
            Err(u) => u.into(),
        }
    }

    /// One interaction callback attempt (type 4): `POST /interactions/{id}/{token}/callback`.
    /// The token, opened by the egress role alone, appears only in the request line.
    pub async fn interaction_callback(
        &self,
        reply: &InteractionReply,
        token: &InteractionToken,
    ) -> CallbackOutcome {
        self.post_callback(reply.interaction_id, reply.body_bytes(), token)
            .await
    }

    /// One deferred acknowledgement attempt (type 5) of interaction `ack`: Discord answers 2xx
    /// without a message ([`CallbackOutcome::Acknowledged`] is then the success), 10062 after
    /// the interaction's 3-second window, 40060 when it already holds a response.
    pub async fn defer_interaction(
        &self,
        ack: &DeferredAck,
        token: &InteractionToken,
    ) -> CallbackOutcome {
        self.post_callback(ack.interaction_id, ack.body_bytes(), token)
            .await
    }

    async fn post_callback(
        &self,
        interaction_id: Snowflake,
        body: Vec<u8>,
        token: &InteractionToken,
    ) -> CallbackOutcome {
        if !token_is_path_safe(&token.0) {
            return CallbackOutcome::NotSent {
                reason: "discord/interaction-token".into(),
            };
        }
        let path = interaction_callback_url("", interaction_id, &token.0);
        match self
            .exchange(Method::POST, &path, body, Auth::InPath, &create_bounds())
            .await
        {
            Ok(r) => classify_callback(r.status.as_u16(), &r.headers, &r.body),
            Err(u) => u.into(),
        }
    }

    /// One follow-up message of an interaction (a later part of its answer):
    /// `POST /webhooks/{application}/{token}?wait=true`, classified like a Create Message.
    pub async fn execute_follow_up(
        &self,
        application: Snowflake,
        follow_up: &FollowUp,
        token: &InteractionToken,
    ) -> CreateOutcome {
        self.token_webhook(
            token,
            Method::POST,
            |t| follow_up_url("", application, t),
            follow_up.body_bytes(),
        )
        .await
    }

    /// One edit of a deferred interaction's original response:
    /// `PATCH /webhooks/{application}/{token}/messages/@original`. Classified like a Create
    /// Message: 2xx with the message is sent; 10008 (Unknown Message), or 10015 (Unknown
    /// Webhook) while the token is alive, means the deferred acknowledgement has not landed, so
    /// nothing was edited ([`original_not_yet`]).
    pub async fn edit_original(
        &self,
        application: Snowflake,
        edit: &OriginalEdit,
        token: &InteractionToken,
    ) -> CreateOutcome {
        self.token_webhook(
            token,
            Method::PATCH,
            |t| original_response_url("", application, t),
            edit.body_bytes(),
        )
        .await
    }

    /// One webhook request the interaction token authorizes (no bot token), with the token
    /// only in its path, classified like a Create Message.
    async fn token_webhook(
        &self,
        token: &InteractionToken,
        method: Method,
        path: impl FnOnce(&str) -> String,
        body: Vec<u8>,
    ) -> CreateOutcome {
        if !token_is_path_safe(&token.0) {
            return CreateOutcome::NotSent {
                reason: "discord/interaction-token".into(),
            };
        }
        let path = path(&token.0);
        match self
            .exchange(method, &path, body, Auth::InPath, &create_bounds())
            .await
        {
            Ok(r) => classify(r.status.as_u16(), &r.headers, &r.body),
            Err(u) => u.into(),
        }
    }

    /// The token-free destination of interaction `id`'s callback: what its decision binds.
    pub fn callback_destination(&self, interaction_id: Snowflake) -> String {
        interaction_callback_url(
            self.config.base_url.trim_end_matches('/'),
            interaction_id,
            &token_placeholder(interaction_id),
        )
    }

    /// The token-free destination of interaction `id`'s original response: what the decision
    /// of its reconciliation read binds.
    pub fn original_destination(
        &self,
        application: Snowflake,
        interaction_id: Snowflake,
    ) -> String {
        original_response_url(
            self.config.base_url.trim_end_matches('/'),
            application,
            &token_placeholder(interaction_id),
        )
    }

    /// Reconciles an UNKNOWN interaction reply (a callback or an edit of a deferred one) from
    /// independent evidence: one read of the interaction's original response, admitted by
    /// `gate` for its token-free destination ([`RestClient::original_destination`]) before the
    /// GET. See [`judge_original`] for what the read proves (`edit`: the reply was an edit).
    pub async fn reconcile_interaction(
        &self,
        application: Snowflake,
        interaction_id: Snowflake,
        token: &InteractionToken,
        expected: &str,
        edit: bool,
        gate: &mut impl ReadGate,
    ) -> Reconciliation {
        if !token_is_path_safe(&token.0) {
            return Reconciliation::Inconclusive {
                reason: "discord/interaction-token".into(),
            };
        }
        let destination = self.original_destination(application, interaction_id);
        if let Err(reason) = gate.admit(&destination, interaction_id).await {
            return Reconciliation::Inconclusive { reason };
        }
        let path = original_response_url("", application, &token.0);
        let response = match self
            .exchange(Method::GET, &path, Vec::new(), Auth::InPath, &read_bounds())
            .await
        {
            Ok(r) => r,
            Err(u) => {
                return Reconciliation::Inconclusive { reason: u.reason() };
            }
        };
        let token_alive = interaction_id.token_alive_at(unix_ms(), TOKEN_MARGIN);
        judge_original(
            response.status.as_u16(),
            &response.body,
            expected,
            edit,
            token_alive,
        )
    }

    /// The exact URL of the channel-read page after `after` (what a read's decision binds).
    pub fn read_url(&self, channel: Snowflake, after: Snowflake) -> String {
        channel_read_url(
            self.config.base_url.trim_end_matches('/'),
            &channel.to_string(),
            after,
        )
    }

    /// Look for the message of `message` (by nonce) in its channel after `after` (the question
    /// message, or any message older than the first attempt). Every page is admitted by `gate`
    /// before its GET.
    pub async fn reconcile(
        &self,
        message: &CreateMessage,
        after: Snowflake,
        gate: &mut impl ReadGate,
    ) -> Reconciliation {
        let ours = |m: &ReadMessage| match m.message.nonce.as_deref() {
            Some(n) => n == message.nonce.as_str(),
            None => m.message.content == message.content && same_reference(m, message.reply_to),
        };
        self.find_in_channel(message.channel_id, after, gate, ours)
            .await
    }

    /// Look for the follow-up `content` of interaction `interaction_id` in `channel` after the
    /// interaction: a message of the bot whose `interaction_metadata` names that interaction and
    /// whose content is exactly ours. Pages are admitted by `gate` as for [`Self::reconcile`].
    pub async fn reconcile_follow_up(
        &self,
        channel: Snowflake,
        interaction_id: Snowflake,
        content: &str,
        gate: &mut impl ReadGate,
    ) -> Reconciliation {
        let ours = |m: &ReadMessage| {
            m.interaction_id == Some(interaction_id) && m.message.content == content
        };
        self.find_in_channel(channel, interaction_id, gate, ours)
            .await
    }

    async fn find_in_channel(
        &self,
        channel: Snowflake,
        after: Snowflake,
        gate: &mut impl ReadGate,
        ours: impl Fn(&ReadMessage) -> bool,
    ) -> Reconciliation {
        let mut cursor = after;
        for _ in 0..MAX_RECONCILE_PAGES {
            let url = self.read_url(channel, cursor);
            if let Err(reason) = gate.admit(&url, cursor).await {
                return Reconciliation::Inconclusive { reason };
            }
            let page = match self.read_page(channel, cursor).await {
                Ok(page) => page,
                Err(reason) => return Reconciliation::Inconclusive { reason },
            };
            let full = page.len() >= usize::from(RECONCILE_PAGE);
            for m in &page {
                if m.message.author.id == self.config.bot_user_id && ours(m) {
                    return Reconciliation::Found {
                        message_id: m.message.id,
                    };
                }
            }
            if !full {
                return Reconciliation::ProvedAbsent;
            }
            match page.iter().map(|m| m.message.id).max() {
                Some(max) if max > cursor => cursor = max,
                _ => {
                    return Reconciliation::Inconclusive {
                        reason: "discord/read-no-progress".into(),
                    };
                }
            }
        }
        Reconciliation::Inconclusive {
            reason: "discord/read-window-exceeded".into(),
        }
    }

    async fn read_page(
        &self,
        channel: Snowflake,
        after: Snowflake,
    ) -> Result<Vec<ReadMessage>, String> {
        // The same suffix `read_url` admitted, under the base path of the same base URL.
        let path = channel_read_url("", &channel.to_string(), after);
        let response = self
            .exchange(Method::GET, &path, Vec::new(), Auth::Bot, &read_bounds())
            .await
            .map_err(Unanswered::reason)?;
        if response.status.as_u16() != 200 {
            return Err(format!("discord/read-status-{}", response.status.as_u16()));
        }
        let values: Vec<Value> =
            serde_json::from_slice(&response.body).map_err(|_| "discord/read-json".to_owned())?;
        values
            .into_iter()
            .map(|v| {
                let id_at = |path: &str| {
                    v.pointer(path)
                        .and_then(Value::as_str)
                        .and_then(|s| s.parse().ok())
                };
                let reply_to = id_at("/message_reference/message_id");
                let interaction_id = id_at("/interaction_metadata/id");
                MessageCreate::from_json(v)
                    .map(|message| ReadMessage {
                        message,
                        reply_to,
                        interaction_id,
                    })
                    .map_err(|_| "discord/read-json".to_owned())
            })
            .collect()
    }
}

/// What authorizes a request: the bot token in its header, or an interaction token in its
/// path, and then the bot token is not sent (a credential goes only where it is needed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Auth {
    Bot,
    InPath,
}

/// Why a request has no return: nothing of it left the body (admission, connection, TLS, or
/// building it failed), or it may have reached Discord and its return was lost. Each carries
/// a secret-free reason code.
#[derive(Debug)]
enum Unanswered {
    NotSent(String),
    Lost(String),
    /// Not sent: the route (or the global limit) is spent for this long.
    Limited(Duration),
}

impl Unanswered {
    fn reason(self) -> String {
        match self {
            Unanswered::NotSent(r) | Unanswered::Lost(r) => r,
            Unanswered::Limited(_) => "discord/rate-limited".into(),
        }
    }
}

impl From<Unanswered> for CreateOutcome {
    fn from(u: Unanswered) -> Self {
        match u {
            Unanswered::NotSent(reason) => CreateOutcome::NotSent { reason },
            Unanswered::Lost(reason) => CreateOutcome::Unknown { reason },
            Unanswered::Limited(retry_after) => CreateOutcome::RateLimited {
                retry_after,
                global: false,
            },
        }
    }
}

impl From<Unanswered> for CallbackOutcome {
    fn from(u: Unanswered) -> Self {
        match u {
            Unanswered::NotSent(reason) => CallbackOutcome::NotSent { reason },
            Unanswered::Lost(reason) => CallbackOutcome::Unknown { reason },
            Unanswered::Limited(retry_after) => CallbackOutcome::RateLimited {
                retry_after,
                global: false,
            },
        }
    }
}

struct ReadMessage {
    message: MessageCreate,
    reply_to: Option<Snowflake>,
    /// The interaction the message answers (`interaction_metadata.id`), for follow-ups.
    interaction_id: Option<Snowflake>,
}

/// Bounds of a Create Message return: every status is read (the classification needs 4xx
/// and 429 bodies); a message object is a few kilobytes.
fn create_bounds() -> Bounds {
    Bounds {
        allowed_statuses: (200..600).collect(),
        allowed_content_types: vec!["application/json".into()],
        max_wire_bytes: 256 * 1024,
        max_expanded_bytes: 256 * 1024,
        max_head_time: Duration::from_secs(20),
        max_stream_time: Duration::from_secs(30),
        max_idle_time: Duration::from_secs(10),
        max_json_depth: 16,
        max_json_items: 10_000,
        ..Bounds::default()
    }
}

/// Bounds of a channel read: 100 messages of at most a few kilobytes each.
fn read_bounds() -> Bounds {
    Bounds {
        allowed_statuses: (200..600).collect(),
        allowed_content_types: vec!["application/json".into()],
        max_wire_bytes: 4 * 1024 * 1024,
        max_expanded_bytes: 4 * 1024 * 1024,
        max_head_time: Duration::from_secs(20),
        max_stream_time: Duration::from_secs(30),
        max_idle_time: Duration::from_secs(10),
        max_json_depth: 16,
        max_json_items: 100_000,
        ..Bounds::default()
    }
}

/// What one read of an interaction's original response proves about a reply whose content is
/// `expected`, sent as an edit of a deferred original (`edit`) or as a callback. Pure, so the
/// table is tested without a server.
///
/// * 200 with exactly our content: the reply (callback or edit) exists: Found.
/// * 200 with a deferred placeholder (LOADING, no content): for an edit, ours did not land:
///   absent (a successor edit is safe). For a callback it proves nothing useful: the
///   interaction was acknowledged by a deferral this reply did not know of, and no callback can
///   land any more; inconclusive, so nothing is sent again.
/// * 200 with other content: inconclusive (nothing of ours can explain it; never resend).
/// * 404 10008 (Unknown Message): Discord holds no response at all: absent.
/// * 404 10015 (Unknown Webhook): what Discord answers for an interaction no callback has
///   landed for yet, and for a token that is wrong or expired. With the token still alive
///   (`token_alive`: the interaction is younger than its 15-minute lifetime, by its snowflake),
///   no callback landed, so no reply exists: absent. Past it, nothing is proved.
pub fn judge_original(
    status: u16,
    body: &[u8],
    expected: &str,
    edit: bool,
    token_alive: bool,
) -> Reconciliation {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    let code = json
        .as_ref()
        .and_then(|v| v.get("code"))
        .and_then(Value::as_u64);
    match (status, code) {
        (200, _) => {
            let field = |k: &str| json.as_ref().and_then(|v| v.get(k));
            let id = field("id")
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok());
            let content = field("content").and_then(Value::as_str);
            let flags = field("flags").and_then(Value::as_u64).unwrap_or(0);
            match (id, content) {
                (Some(message_id), Some(c)) if c == expected => {
                    Reconciliation::Found { message_id }
                }
                (Some(_), Some("")) if flags & FLAG_LOADING != 0 && edit => {
                    Reconciliation::ProvedAbsent
                }
                (Some(_), Some("")) if flags & FLAG_LOADING != 0 => Reconciliation::Inconclusive {
                    reason: "discord/original-deferred".into(),
                },
                (Some(_), Some(_)) => Reconciliation::Inconclusive {
                    reason: "discord/original-differs".into(),
                },
                _ => Reconciliation::Inconclusive {
                    reason: "discord/read-json".into(),
                },
            }
        }
        (404, Some(UNKNOWN_MESSAGE)) => Reconciliation::ProvedAbsent,
        (404, Some(UNKNOWN_WEBHOOK)) if token_alive => Reconciliation::ProvedAbsent,
        (404, Some(UNKNOWN_WEBHOOK)) => Reconciliation::Inconclusive {
            reason: "discord/token-expired".into(),
        },
        (status, _) => Reconciliation::Inconclusive {
            reason: format!("discord/read-status-{status}"),
        },
    }
}

/// Whether a read message's reference could be that of a Create Message replying to
/// `reply_to`. Reads carry no nonce (Discord gives it only in MESSAGE_CREATE), so a reply is
/// known by its content and its reference; but a reply sent with `fail_if_not_exists: false`
/// to a question deleted before it landed comes back as a normal message with no reference.
/// So: the same reference, or none at all on a message that answers no interaction; a
/// reference to another message never matches.
fn same_reference(m: &ReadMessage, reply_to: Option<Snowflake>) -> bool {
    m.reply_to == reply_to || (m.reply_to.is_none() && m.interaction_id.is_none())
}

/// The longest wait for a spent bucket the adapter sits out before sending; a longer one is
/// answered rate-limited, unsent.
const MAX_INLINE_WAIT: Duration = Duration::from_secs(5);

/// Discord's "Unknown Message": the interaction has no original response.
pub const UNKNOWN_MESSAGE: u64 = 10008;
/// Discord's "Unknown Webhook": no webhook for this interaction token — before any callback
/// has landed (as client libraries report Discord answers an early `@original`), or for a
/// token that is wrong or expired. What it proves depends on the token's age.
pub const UNKNOWN_WEBHOOK: u64 = 10015;
/// How close to the end of an interaction token's lifetime its answers stop proving anything
/// (clock skew between this host and Discord, and the request's own time in flight).
pub const TOKEN_MARGIN: Duration = Duration::from_secs(30);

/// Whether an interaction's webhook answer of `code` means only that no callback has landed
/// yet (so an edit of `@original` may be tried again): 10008 always, 10015 while the
/// interaction's token is alive at `now_ms`.
pub fn original_not_yet(code: Option<u64>, interaction_id: Snowflake, now_ms: u64) -> bool {
    match code {
        Some(UNKNOWN_MESSAGE) => true,
        Some(UNKNOWN_WEBHOOK) => interaction_id.token_alive_at(now_ms, TOKEN_MARGIN),
        _ => false,
    }
}

/// This host's clock in Unix milliseconds.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
/// Discord's "Interaction has already been acknowledged".
const ALREADY_ACKNOWLEDGED: u64 = 40060;

/// Interaction tokens are URL-safe text; anything else is refused before it reaches a path.
fn token_is_path_safe(token: &str) -> bool {
    !token.is_empty()
        && token.len() <= 512
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// What one interaction callback attempt established.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallbackOutcome {
    /// Discord created the reply.
    Sent {
        /// The message id.
        message_id: Snowflake,
    },
    /// Discord already holds a response to this interaction (40060, or a 2xx naming no
    /// message): an earlier attempt was accepted. Its message id comes from the original
    /// response ([`RestClient::reconcile_interaction`]); nothing is sent again.
    Acknowledged,
    /// Discord refused the callback (4xx other than 429 and 40060): no reply exists from it.
    Rejected {
        /// HTTP status.
        status: u16,
        /// Discord's JSON error code (10062: unknown or expired interaction).
        code: Option<u64>,
    },
    /// 429: not accepted; as for [`CreateOutcome::RateLimited`].
    RateLimited {
        /// How long Discord asked us to wait.
        retry_after: Duration,
        /// Whether the limit is global.
        global: bool,
    },
    /// No byte of the request left the body.
    NotSent {
        /// A secret-free reason code.
        reason: String,
    },
    /// The callback may have been accepted: reconcile from the original response, never
    /// resend blindly (a resend is harmless only because Discord answers 40060).
    Unknown {
        /// A secret-free reason code.
        reason: String,
    },
}

/// Classify a complete interaction callback return (`with_response=true`). Pure.
pub fn classify_callback(status: u16, headers: &http::HeaderMap, body: &[u8]) -> CallbackOutcome {
    if (200..300).contains(&status) {
        let json: Option<Value> = serde_json::from_slice(body).ok();
        let id = json
            .as_ref()
            .and_then(|v| v.pointer("/resource/message/id"))
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok());
        return match id {
            Some(message_id) => CallbackOutcome::Sent { message_id },
            None => CallbackOutcome::Acknowledged,
        };
    }
    match classify(status, headers, body) {
        CreateOutcome::KnownRejected {
            code: Some(ALREADY_ACKNOWLEDGED),
            ..
        } => CallbackOutcome::Acknowledged,
        CreateOutcome::KnownRejected { status, code } => CallbackOutcome::Rejected { status, code },
        CreateOutcome::RateLimited {
            retry_after,
            global,
        } => CallbackOutcome::RateLimited {
            retry_after,
            global,
        },
        CreateOutcome::NotSent { reason } => CallbackOutcome::NotSent { reason },
        CreateOutcome::KnownSent { .. } | CreateOutcome::Unknown { .. } => {
            CallbackOutcome::Unknown {
                reason: format!("discord/status-{status}"),
            }
        }
    }
}

/// Classify a complete Create Message return. Pure, so the table is tested without a server.
pub fn classify(status: u16, headers: &http::HeaderMap, body: &[u8]) -> CreateOutcome {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    match status {
        200..=299 => match json
            .as_ref()
            .and_then(|v| v.get("id"))
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
        {
            Some(id) => CreateOutcome::KnownSent { message_id: id },
            None => CreateOutcome::Unknown {
                reason: "discord/2xx-without-id".into(),
            },
        },
        429 => {
            let body_secs = json
                .as_ref()
                .and_then(|v| v.get("retry_after"))
                .and_then(Value::as_f64);
            let header_secs = headers
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|s| s.trim().parse::<f64>().ok());
            let secs = body_secs.or(header_secs).unwrap_or(1.0);
            // A hostile or broken value cannot make the caller wait forever or panic.
            let secs = if secs.is_finite() {
                secs.clamp(0.0, 3600.0)
            } else {
                1.0
            };
            let global = json
                .as_ref()
                .and_then(|v| v.get("global"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            CreateOutcome::RateLimited {
                retry_after: Duration::from_secs_f64(secs),
                global,
            }
        }
        400..=499 => CreateOutcome::KnownRejected {
            status,
            code: json
                .as_ref()
                .and_then(|v| v.get("code"))
                .and_then(Value::as_u64),
        },
        _ => CreateOutcome::Unknown {
            reason: format!("discord/status-{status}"),
        },
    }
}
