//! A loopback-only Discord emulator speaking the real wire protocols: Gateway v10 over
//! WebSocket (plain `ws://127.0.0.1`) and REST v10 Create Message / channel read / Get Gateway
//! Bot over HTTPS with a CA minted for the run. Tests and `reach demo` start it in-process with
//! [`Emulator::start`] and drive it through the control API; it records every message it
//! created, so a test asserts what a Discord user would see.
//!
//! **Architecture Invariant:** the emulator binds `127.0.0.1:0` only and never dials anything;
//! the exceptions are [`EmulatorConfig::rest_listen`] and [`EmulatorConfig::gateway_listen`],
//! set only by a test inside a network namespace it created (no interface but its loopback).
//!
//! **Architecture Invariant:** the emulator shares no code with `reach-discord`: it parses and
//! writes the wire JSON itself, so the adapters are tested against an independent reading of
//! the protocol, not against their own types.

#![forbid(unsafe_code)]

mod gateway;
mod interaction;
mod rest;
mod tls;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustls::RootCertStore;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The name the REST server's certificate is issued for; admit it as a local road to
/// [`Emulator::rest_addr`].
pub const REST_HOST: &str = "discord.emulator.test";
/// Dispatches kept per session for RESUME replay.
const MAX_REPLAY_LOG: usize = 4096;
/// How long an interaction's token authorizes its webhook, as Discord documents.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(15 * 60);
/// Discord's epoch in Unix milliseconds (2015-01-01T00:00:00Z).
const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;

/// How the emulator is set up.
#[derive(Clone, Debug)]
pub struct EmulatorConfig {
    /// The bot token IDENTIFY, RESUME and REST must present.
    pub token: String,
    /// The application id.
    pub application_id: u64,
    /// The bot user's id.
    pub bot_user_id: u64,
    /// The guild channels belong to unless [`Emulator::add_channel`] says otherwise.
    pub default_guild_id: u64,
    /// HELLO's heartbeat interval.
    pub heartbeat_interval: Duration,
    /// How long a nonce sent with `enforce_nonce` deduplicates.
    pub nonce_window: Duration,
    /// Whether channel reads include each message's nonce. Off by default, as documented:
    /// Discord gives the nonce only in the MESSAGE_CREATE event, so reconciliation must not
    /// need it.
    pub nonce_in_reads: bool,
    /// Whether the application has the privileged MESSAGE_CONTENT intent enabled (in the
    /// developer portal, or approved for a verified bot): an IDENTIFY asking for it without
    /// is closed 4014, as on Discord.
    pub message_content_enabled: bool,
    /// Serve the gateway as `wss://` (TLS with the run's CA, name [`REST_HOST`]) instead of
    /// plain `ws://127.0.0.1`.
    pub gateway_tls: bool,
    /// Where the REST server listens instead of `127.0.0.1:0`: only a test that owns a network
    /// namespace sets it (a public address on that namespace's loopback, port 443), to test
    /// the production road to `https://discord.com`.
    pub rest_listen: Option<SocketAddr>,
    /// The names the servers' certificate is issued for instead of [`REST_HOST`] and
    /// `127.0.0.1` (e.g. `discord.com`, so the client verifies Discord's real name).
    pub tls_names: Option<Vec<String>>,
    /// With `gateway_tls`: the gateway's public names and addresses instead of `127.0.0.1:0`,
    /// identify first (`wss://{name}`), then READY's `resume_gateway_url`. Only a test inside
    /// its own network namespace sets it; `tls_names` must name both.
    pub gateway_listen: Option<[(String, SocketAddr); 2]>,
    /// The session start limit IDENTIFY spends and `GET /gateway/bot` reports (Discord's
    /// default: 1,000 a day); a test makes it small.
    pub session_start_limit: SessionStartLimit,
    /// The gateway URL `GET /gateway/bot` names instead of [`Emulator::gateway_url`]: a test
    /// that a client does not let a REST answer move its gateway connection.
    pub gateway_bot_url: Option<String>,
}

/// Discord's session start limit as the emulator keeps it, per bot token: `total` IDENTIFYs
/// per `window`, which opens at the first IDENTIFY after the last one closed. An IDENTIFY when
/// none remains is what Discord's Gateway docs ("Identifying") say happens past the limit: all
/// the bot's sessions are terminated and its token is reset — from then on the token is refused
/// by the Gateway (4004) and REST (401). Which close code the terminated sessions get is
/// undocumented; the emulator closes them, and the refused IDENTIFY, with 4004 ("Authentication
/// failed"), the documented code for a token that is no longer valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionStartLimit {
    /// Session starts per window.
    pub total: u32,
    /// The window (Discord: a day).
    pub window: Duration,
    /// What `GET /gateway/bot` reports as `max_concurrency` (IDENTIFYs per 5 s across shard
    /// buckets; not enforced).
    pub max_concurrency: u32,
}

impl Default for SessionStartLimit {
    fn default() -> Self {
        Self {
            total: 1_000,
            window: Duration::from_secs(24 * 60 * 60),
            max_concurrency: 1,
        }
    }
}

/// A scripted answer to the next `GET /gateway/bot`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GatewayBotFault {
    /// Answer this status with a Discord error body.
    Reject {
        /// Status code.
        status: u16,
        /// Discord error code.
        code: u64,
    },
    /// Answer 200 with this body, whatever it is.
    Body(String),
}

impl Default for EmulatorConfig {
    fn default() -> Self {
        EmulatorConfig {
            token: "emulator-bot-token".into(),
            application_id: 1_100_000_000_000_000_001,
            bot_user_id: 1_100_000_000_000_000_002,
            default_guild_id: 1_100_000_000_000_000_100,
            heartbeat_interval: Duration::from_millis(200),
            nonce_window: Duration::from_secs(300),
            nonce_in_reads: false,
            message_content_enabled: true,
            gateway_tls: false,
            rest_listen: None,
            tls_names: None,
            gateway_listen: None,
            session_start_limit: SessionStartLimit::default(),
            gateway_bot_url: None,
        }
    }
}

/// A Discord user as the emulator posts for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// User id.
    pub id: u64,
    /// Display name.
    pub name: String,
    /// Whether the user is a bot.
    pub bot: bool,
}

impl User {
    /// A human user.
    pub fn human(id: u64, name: &str) -> Self {
        User {
            id,
            name: name.into(),
            bot: false,
        }
    }
}

/// A message as the emulator stored it (what a Discord user would see).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmulatedMessage {
    /// Message id.
    pub id: u64,
    /// Channel id.
    pub channel_id: u64,
    /// Guild id (`None` in a DM).
    pub guild_id: Option<u64>,
    /// Author id.
    pub author_id: u64,
    /// Whether the author is a bot.
    pub author_bot: bool,
    /// Text.
    pub content: String,
    /// Mentioned user ids.
    pub mentions: Vec<u64>,
    /// Nonce, if the sender gave one.
    pub nonce: Option<String>,
    /// The message replied to.
    pub reply_to: Option<u64>,
    /// Message flags.
    pub flags: u64,
    /// The interaction this message answers (an interaction callback's response).
    pub interaction_id: Option<u64>,
    /// Who ran that interaction (`interaction_metadata.user`).
    pub interaction_user: Option<u64>,
    /// The webhook that sent it: an interaction's response and follow-ups come from the
    /// application's webhook (`webhook_id` = the application id).
    pub webhook_id: Option<u64>,
}

/// One REST response the emulator sent (a dropped connection sends none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestResponse {
    /// The request's method.
    pub method: String,
    /// The request's path (`/api/v10/...`), tokens included.
    pub path: String,
    /// The request's query, without `?`.
    pub query: String,
    /// The status answered.
    pub status: u16,
    /// The body answered.
    pub body: Vec<u8>,
}

/// One Create Message request as received, before any fault or deduplication.
#[derive(Clone, Debug, PartialEq)]
pub struct CreateRequest {
    /// The channel in the path.
    pub channel_id: u64,
    /// The JSON body.
    pub body: Value,
    /// When the request body had been read, for latency measurements.
    pub received_at: Instant,
}

/// One interaction callback request as received, before any fault or deduplication.
#[derive(Clone, Debug, PartialEq)]
pub struct CallbackRequest {
    /// The interaction id in the path.
    pub interaction_id: u64,
    /// Whether the token in the path was the interaction's own.
    pub token_matched: bool,
    /// Whether the request also carried an `Authorization` header (it needs none).
    pub authorization_sent: bool,
    /// The JSON body.
    pub body: Value,
}

/// One edit of an interaction's original response (`PATCH …/messages/@original`), or one
/// follow-up message request, as received, before any fault.
#[derive(Clone, Debug, PartialEq)]
pub struct EditRequest {
    /// The interaction whose token was in the path (`None` for a token the emulator never
    /// handed out).
    pub interaction_id: Option<u64>,
    /// Whether the request also carried an `Authorization` header (it needs none).
    pub authorization_sent: bool,
    /// The JSON body.
    pub body: Value,
}

/// How long after INTERACTION_CREATE Discord accepts the interaction's first callback.
pub const INTERACTION_RESPONSE_WINDOW: Duration = Duration::from_secs(3);

/// One interaction Discord dispatched, as the emulator tracks it.
#[derive(Clone, Debug)]
pub(crate) struct InteractionRecord {
    pub(crate) token: String,
    pub(crate) channel_id: u64,
    /// When INTERACTION_CREATE was dispatched: the response window runs from here.
    pub(crate) created: Instant,
    /// The message of the accepted callback (the interaction's original response).
    pub(crate) original: Option<u64>,
    /// Who ran the command.
    pub(crate) user_id: u64,
}

/// One Get Channel Messages request as received (failed reads included).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadRequest {
    /// The channel in the path.
    pub channel_id: u64,
    /// The query string, exactly as received (`after=…&limit=…`).
    pub query: String,
}

/// A scripted behaviour for the next Create Message request.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// Answer 429 with `retry_after` seconds; nothing is created.
    RateLimit {
        /// Seconds.
        retry_after: f64,
    },
    /// Answer this 5xx status; nothing is created.
    ServerError {
        /// Status code.
        status: u16,
    },
    /// Create the message, then drop the connection without answering.
    CommitThenDrop,
    /// Drop the connection without creating anything.
    DropBeforeCommit,
    /// Answer this 4xx with a Discord error code; nothing is created.
    Reject {
        /// Status code.
        status: u16,
        /// Discord error code.
        code: u64,
    },
    /// Interaction callbacks only: take the callback as of its arrival (the response window is
    /// judged then) but commit it only `after` this long, then answer — a request that Discord
    /// is slow to process, which a later request (an edit of `@original`) can overtake.
    LandLate {
        /// The delay before the callback commits.
        after: Duration,
    },
}

/// Discord's REST limits as the emulator enforces them: each route (method and path) allows
/// `per_route` requests per `window`, and the bot `global_per_second` requests a second
/// (interaction routes excepted). Every response carries the route's bucket headers; a request
/// past a limit is answered 429 (`global: true` for the global one) and not handled. The
/// defaults are high enough that only a test that lowers them meets a limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimits {
    pub per_route: u32,
    pub window: Duration,
    pub global_per_second: u32,
}

impl Default for RateLimits {
    fn default() -> Self {
        Self {
            per_route: 10_000,
            window: Duration::from_secs(1),
            global_per_second: 10_000,
        }
    }
}

/// A counting window: when it opened and how many requests it has seen.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Window {
    opened: Instant,
    used: u32,
}

impl Window {
    /// What a window allows at `now` without counting anything: (remaining, reset_after). A
    /// window not yet opened (or closed) allows `limit` and would reset `length` after opening.
    fn peek(slot: Option<Window>, now: Instant, length: Duration, limit: u32) -> (u32, Duration) {
        match slot {
            Some(w) if now.duration_since(w.opened) < length => (
                limit.saturating_sub(w.used),
                length.saturating_sub(now.duration_since(w.opened)),
            ),
            _ => (limit, length),
        }
    }

    /// Counts one request at `now` against `limit` per `length`: `Err(wait)` when spent.
    fn take(
        slot: &mut Option<Window>,
        now: Instant,
        length: Duration,
        limit: u32,
    ) -> Result<(u32, Duration), Duration> {
        let w = slot.get_or_insert(Window {
            opened: now,
            used: 0,
        });
        if now.duration_since(w.opened) >= length {
            *w = Window {
                opened: now,
                used: 0,
            };
        }
        let reset_after = length.saturating_sub(now.duration_since(w.opened));
        if w.used >= limit {
            return Err(reset_after);
        }
        w.used += 1;
        Ok((limit - w.used, reset_after))
    }
}

/// What a read or an edit of an interaction's `@original` answers before any callback has
/// landed. Discord documents neither; client libraries report 10015.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EarlyOriginal {
    /// 404 10015 "Unknown Webhook" (the default: what libraries report Discord answers).
    #[default]
    UnknownWebhook,
    /// 404 10008 "Unknown Message".
    UnknownMessage,
}

impl EarlyOriginal {
    pub(crate) fn error(self) -> rest::Reply {
        match self {
            Self::UnknownWebhook => rest::error(404, 10015, "Unknown Webhook"),
            Self::UnknownMessage => rest::error(404, 10008, "Unknown Message"),
        }
    }
}

/// Counters of the gateway side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GatewayCounts {
    /// WebSocket connections accepted on the main URL.
    pub connections: u64,
    /// WebSocket connections accepted on the resume URL.
    pub resume_connections: u64,
    /// IDENTIFY payloads that spent a session start (a valid token and intents, and one
    /// remaining), whether READY followed or an outage dropped the connection first.
    pub identifies: u64,
    /// IDENTIFY or RESUME payloads with a wrong token.
    pub bad_tokens: u64,
    /// RESUME payloads accepted.
    pub resumes: u64,
    /// HEARTBEAT payloads received.
    pub heartbeats: u64,
    /// The longest gap between two consecutive heartbeats on one connection, beyond HELLO's
    /// interval: how late the client's heartbeat ever was.
    pub heartbeat_late_max: Duration,
    /// Intents of the last IDENTIFY.
    pub last_intents: u64,
    /// IDENTIFYs with a valid token when none remained of the session start limit: each reset
    /// the token, as on Discord.
    pub session_start_refusals: u64,
}

/// Control messages to a live gateway connection.
#[derive(Debug)]
pub(crate) enum Ctl {
    Send(String),
    Reconnect,
    Drop,
    Invalidate,
    /// Close the connection with this code (the session is already gone).
    Close(u16, &'static str),
}

#[derive(Debug)]
pub(crate) struct SessionState {
    pub(crate) seq: u64,
    pub(crate) log: VecDeque<(u64, String)>,
    pub(crate) conn: Option<(u64, mpsc::UnboundedSender<Ctl>)>,
    /// The intents IDENTIFY asked for: what the session's dispatches carry.
    pub(crate) intents: u64,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) messages: BTreeMap<u64, EmulatedMessage>,
    pub(crate) channel_guilds: HashMap<u64, Option<u64>>,
    pub(crate) creates: Vec<CreateRequest>,
    pub(crate) reads: Vec<ReadRequest>,
    pub(crate) interactions: HashMap<u64, InteractionRecord>,
    pub(crate) callbacks: Vec<CallbackRequest>,
    pub(crate) callback_faults: VecDeque<Fault>,
    pub(crate) edits: Vec<EditRequest>,
    pub(crate) edit_faults: VecDeque<Fault>,
    pub(crate) follow_ups: Vec<EditRequest>,
    pub(crate) follow_up_faults: VecDeque<Fault>,
    /// The response window when a test shortened it ([`Emulator::set_interaction_window`]).
    pub(crate) interaction_window: Option<Duration>,
    /// What `@original` answers before any callback ([`Emulator::set_early_original`]).
    pub(crate) early_original: EarlyOriginal,
    /// Every REST response sent, in order.
    pub(crate) responses: Vec<RestResponse>,
    /// The limits in force ([`Emulator::set_rate_limits`]) and their windows.
    pub(crate) rate_limits: RateLimits,
    pub(crate) route_windows: HashMap<String, Option<Window>>,
    pub(crate) global_window: Option<Window>,
    /// Channels that exist: added, or where a user posted or ran a command.
    pub(crate) known_channels: std::collections::HashSet<u64>,
    /// An interaction token's lifetime when a test shortened it
    /// ([`Emulator::set_token_lifetime`]).
    pub(crate) token_lifetime: Option<Duration>,
    pub(crate) faults: VecDeque<Fault>,
    pub(crate) nonces: HashMap<String, (u64, Instant)>,
    pub(crate) sessions: HashMap<String, SessionState>,
    pub(crate) current_session: Option<String>,
    pub(crate) counts: GatewayCounts,
    pub(crate) stop_acking: bool,
    pub(crate) redeliver_on_resume: u64,
    pub(crate) reads_unavailable: bool,
    /// The session start window of each bot token ([`SessionStartLimit`]).
    pub(crate) session_starts: HashMap<String, Option<Window>>,
    /// The session start limit was exceeded: the configured token is no longer valid.
    pub(crate) token_reset: bool,
    pub(crate) gateway_bot_faults: VecDeque<GatewayBotFault>,
    /// While set, every IDENTIFY (counted) is answered by dropping the connection before READY.
    pub(crate) identify_outage: bool,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) config: EmulatorConfig,
    pub(crate) state: Mutex<State>,
    /// The last id [`Inner::snowflake`] handed out.
    pub(crate) last_id: AtomicU64,
    pub(crate) resume_url: String,
    /// The URL to IDENTIFY at ([`Emulator::gateway_url`]).
    pub(crate) gateway_url: String,
}

impl Inner {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `token` is the bot's and has not been reset.
    pub(crate) fn token_valid(&self, token: &str) -> bool {
        token == self.config.token && !self.lock().token_reset
    }

    /// The bot token's session start limit now: (`remaining`, `reset_after`).
    pub(crate) fn session_starts_left(&self) -> (u32, Duration) {
        let limit = self.config.session_start_limit;
        let state = self.lock();
        let slot = state
            .session_starts
            .get(&self.config.token)
            .copied()
            .flatten();
        Window::peek(slot, Instant::now(), limit.window, limit.total)
    }

    /// One IDENTIFY with the bot's token spends a session start. When none remains, as on
    /// Discord: every session of the bot is terminated and its token reset (`Err`; the
    /// IDENTIFY is closed 4004).
    pub(crate) fn start_session(&self) -> Result<(), ()> {
        let limit = self.config.session_start_limit;
        let mut state = self.lock();
        let slot = state
            .session_starts
            .entry(self.config.token.clone())
            .or_default();
        if Window::take(slot, Instant::now(), limit.window, limit.total).is_ok() {
            return Ok(());
        }
        state.counts.session_start_refusals += 1;
        state.token_reset = true;
        state.current_session = None;
        for (_, session) in state.sessions.drain() {
            if let Some((_, tx)) = session.conn {
                let _ = tx.send(Ctl::Close(4004, "Authentication failed."));
            }
        }
        Err(())
    }

    /// Counts one REST request on `route` (and globally when `global`): its bucket headers to
    /// add to the response, or the 429 that answers it instead.
    pub(crate) fn rate_limit(
        &self,
        route: &str,
        global: bool,
    ) -> Result<http::HeaderMap, Box<rest::Response429>> {
        let now = Instant::now();
        let mut state = self.lock();
        let limits = state.rate_limits;
        if global
            && let Err(wait) = Window::take(
                &mut state.global_window,
                now,
                Duration::from_secs(1),
                limits.global_per_second,
            )
        {
            return Err(Box::new(rest::too_many(
                wait,
                true,
                route,
                limits.per_route,
                0,
            )));
        }
        let slot = state.route_windows.entry(route.to_owned()).or_default();
        match Window::take(slot, now, limits.window, limits.per_route) {
            Ok((remaining, reset_after)) => Ok(rest::bucket_headers(
                route,
                limits.per_route,
                remaining,
                reset_after,
            )),
            Err(wait) => Err(Box::new(rest::too_many(
                wait,
                false,
                route,
                limits.per_route,
                0,
            ))),
        }
    }

    /// A new id, as Discord mints them: milliseconds since Discord's epoch in the top 42 bits
    /// (so an id tells when it was made, which is how an interaction token's age is known),
    /// strictly greater than every id before it.
    pub(crate) fn snowflake(&self) -> u64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
            .saturating_sub(DISCORD_EPOCH_MS)
            << 22;
        let next = |last: u64| now.max(last + 1);
        let last = self
            .last_id
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| Some(next(l)))
            .unwrap_or_else(|l| l);
        next(last)
    }

    /// Send a dispatch to the current session: number it, log it for replay, and deliver it
    /// if a connection is attached. With no session (bot offline) it is lost, as on Discord.
    pub(crate) fn dispatch(&self, state: &mut State, t: &str, d: Value) {
        let Some(id) = state.current_session.clone() else {
            return;
        };
        let Some(session) = state.sessions.get_mut(&id) else {
            return;
        };
        let Some(d) = under_intents(session.intents, self.config.bot_user_id, t, d) else {
            return;
        };
        session.seq += 1;
        let text = json!({"op": 0, "s": session.seq, "t": t, "d": d}).to_string();
        session.log.push_back((session.seq, text.clone()));
        if session.log.len() > MAX_REPLAY_LOG {
            session.log.pop_front();
        }
        if let Some((_, tx)) = &session.conn {
            let _ = tx.send(Ctl::Send(text));
        }
    }

    fn current_conn(&self, state: &State) -> Option<mpsc::UnboundedSender<Ctl>> {
        let id = state.current_session.as_ref()?;
        state
            .sessions
            .get(id)?
            .conn
            .as_ref()
            .map(|(_, tx)| tx.clone())
    }
}

/// Gateway intents the emulator honours (Discord's bits).
pub const INTENT_GUILD_MESSAGES: u64 = 1 << 9;
/// DIRECT_MESSAGES.
pub const INTENT_DIRECT_MESSAGES: u64 = 1 << 12;
/// MESSAGE_CONTENT (privileged).
pub const INTENT_MESSAGE_CONTENT: u64 = 1 << 15;
/// Every intent bit Discord defines (0 through 25, less the unused 22 and 23).
pub const KNOWN_INTENTS: u64 = ((1 << 26) - 1) & !(1 << 22) & !(1 << 23);

/// What a session with `intents` receives of a dispatch, as Discord sends it: no guild message
/// event without GUILD_MESSAGES, no DM without DIRECT_MESSAGES, and without MESSAGE_CONTENT a
/// message's `content` (and embeds, attachments, components) empty unless it mentions the bot,
/// is a DM, or is the bot's own. `None`: not sent at all.
fn under_intents(intents: u64, bot: u64, t: &str, mut d: Value) -> Option<Value> {
    if !matches!(t, "MESSAGE_CREATE" | "MESSAGE_UPDATE") {
        return Some(d);
    }
    let dm = d.get("guild_id").is_none();
    let needed = if dm {
        INTENT_DIRECT_MESSAGES
    } else {
        INTENT_GUILD_MESSAGES
    };
    if intents & needed == 0 {
        return None;
    }
    let bot_id = bot.to_string();
    let own = d.pointer("/author/id").and_then(Value::as_str) == Some(bot_id.as_str());
    let mentioned = d
        .get("mentions")
        .and_then(Value::as_array)
        .is_some_and(|m| m.iter().any(|u| u["id"].as_str() == Some(bot_id.as_str())));
    if intents & INTENT_MESSAGE_CONTENT == 0 && !(dm || own || mentioned) {
        d["content"] = json!("");
        for k in ["embeds", "attachments", "components"] {
            d[k] = json!([]);
        }
    }
    Some(d)
}

/// A guild member as Discord sends it in a dispatch (`user` only where the event does).
pub(crate) fn member_json(user: Option<Value>) -> Value {
    let mut m = json!({"roles": [], "joined_at": "2025-01-01T00:00:00.000000+00:00",
        "deaf": false, "mute": false, "flags": 0, "nick": null, "avatar": null,
        "premium_since": null, "pending": false});
    if let Some(u) = user {
        m["user"] = u;
    }
    m
}

/// A user object as Discord sends it: a migrated username has discriminator "0".
pub(crate) fn user_json(id: u64, name: &str, bot: bool) -> Value {
    json!({"id": id.to_string(), "username": name, "discriminator": "0",
        "global_name": null, "avatar": null, "bot": bot, "public_flags": 0, "flags": 0,
        "primary_guild": null})
}

pub(crate) fn message_json(m: &EmulatedMessage, author_name: &str, with_nonce: bool) -> Value {
    let mut v = json!({
        "id": m.id.to_string(),
        "type": if m.reply_to.is_some() { 19 } else { 0 },
        "channel_id": m.channel_id.to_string(),
        "author": user_json(m.author_id, author_name, m.author_bot),
        "content": m.content,
        "mentions": m.mentions.iter().map(|id| user_json(*id, "user", false)).collect::<Vec<_>>(),
        "mention_everyone": false,
        "mention_roles": [],
        "attachments": [],
        "components": [],
        "edited_timestamp": null,
        "embeds": [],
        "flags": m.flags,
        "timestamp": "2025-01-01T00:00:00.000000+00:00",
        "tts": false,
        "pinned": false,
    });
    if let Some(g) = m.guild_id {
        v["guild_id"] = json!(g.to_string());
    }
    if with_nonce && let Some(n) = &m.nonce {
        v["nonce"] = json!(n);
    }
    if let Some(r) = m.reply_to {
        // Type 0: DEFAULT, a reply.
        v["message_reference"] = json!({"type": 0, "message_id": r.to_string(),
            "channel_id": m.channel_id.to_string()});
        if let Some(g) = m.guild_id {
            v["message_reference"]["guild_id"] = json!(g.to_string());
        }
    }
    if let Some(w) = m.webhook_id {
        v["webhook_id"] = json!(w.to_string());
    }
    if let Some(i) = m.interaction_id {
        // Discord: a slash command's response is type 20 (CHAT_INPUT_COMMAND) and names the
        // interaction, its user, and who installed the app (guild install: key "0").
        v["type"] = json!(20);
        let user = m.interaction_user.unwrap_or(0);
        let mut owners = json!({});
        if let Some(g) = m.guild_id {
            owners["0"] = json!(g.to_string());
        }
        v["interaction_metadata"] = json!({"id": i.to_string(), "type": 2,
            "user": user_json(user, "user", false), "authorizing_integration_owners": owners});
    }
    v
}

/// The token of interaction `id`: distinct per interaction, and shaped like none of the bot's.
fn interaction_token(id: u64) -> String {
    format!("aW50ZXJhY3Rpb24-{id:x}-emulated-token")
}

/// Parse `<@id>` and `<@!id>` mentions out of content, as Discord does.
pub(crate) fn parse_mentions(content: &str) -> Vec<u64> {
    let mut out = Vec::new();
    let mut rest = content;
    while let Some(i) = rest.find("<@") {
        rest = &rest[i + 2..];
        let body = rest.strip_prefix('!').unwrap_or(rest);
        if let Some(end) = body.find('>')
            && let Ok(id) = body[..end].parse::<u64>()
            && !out.contains(&id)
        {
            out.push(id);
        }
    }
    out
}

/// `wss://name`, with the port only when it is not 443 (as Discord's URLs are written).
fn wss_url(name: &str, port: u16) -> String {
    if port == 443 {
        format!("wss://{name}")
    } else {
        format!("wss://{name}:{port}")
    }
}

/// A running emulator. Dropping it stops its servers.
#[derive(Debug)]
pub struct Emulator {
    inner: Arc<Inner>,
    gateway_addr: SocketAddr,
    resume_addr: SocketAddr,
    rest_addr: SocketAddr,
    ca_pem: String,
    roots: RootCertStore,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Emulator {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Emulator {
    /// Start the gateway (two listeners: the IDENTIFY URL and READY's `resume_gateway_url`)
    /// and the REST server, all on `127.0.0.1:0`.
    pub async fn start(config: EmulatorConfig) -> io::Result<Emulator> {
        let (gateway, resume) = match &config.gateway_listen {
            Some([(_, identify), (_, resume)]) => (
                TcpListener::bind(*identify).await?,
                TcpListener::bind(*resume).await?,
            ),
            None => (
                TcpListener::bind("127.0.0.1:0").await?,
                TcpListener::bind("127.0.0.1:0").await?,
            ),
        };
        let rest = match config.rest_listen {
            Some(addr) => TcpListener::bind(addr).await?,
            None => TcpListener::bind("127.0.0.1:0").await?,
        };
        let gateway_addr = gateway.local_addr()?;
        let resume_addr = resume.local_addr()?;
        let rest_addr = rest.local_addr()?;
        let names: Vec<&str> = match &config.tls_names {
            Some(names) => names.iter().map(String::as_str).collect(),
            None => vec![REST_HOST, "127.0.0.1"],
        };
        let ca = tls::mint(&names).map_err(io::Error::other)?;
        let gateway_tls = config.gateway_tls.then(|| Arc::clone(&ca.server));
        let resume_url = if let Some([_, (name, _)]) = &config.gateway_listen {
            wss_url(name, resume_addr.port())
        } else if config.gateway_tls {
            format!("wss://{REST_HOST}:{}", resume_addr.port())
        } else {
            format!("ws://{resume_addr}")
        };
        let gateway_url = if let Some([(name, _), _]) = &config.gateway_listen {
            wss_url(name, gateway_addr.port())
        } else if config.gateway_tls {
            format!("wss://{REST_HOST}:{}", gateway_addr.port())
        } else {
            format!("ws://{gateway_addr}")
        };
        let inner = Arc::new(Inner {
            config,
            state: Mutex::new(State::default()),
            last_id: AtomicU64::new(0),
            resume_url,
            gateway_url,
        });
        let tasks = vec![
            tokio::spawn(gateway::serve(
                gateway,
                Arc::clone(&inner),
                false,
                gateway_tls.clone(),
            )),
            tokio::spawn(gateway::serve(
                resume,
                Arc::clone(&inner),
                true,
                gateway_tls,
            )),
            tokio::spawn(rest::serve(
                rest,
                Arc::clone(&ca.server),
                Arc::clone(&inner),
            )),
        ];
        Ok(Emulator {
            inner,
            gateway_addr,
            resume_addr,
            rest_addr,
            ca_pem: ca.cert_pem.clone(),
            roots: ca.root_store(),
            tasks,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &EmulatorConfig {
        &self.inner.config
    }

    /// The URL to IDENTIFY at (`ws://127.0.0.1:port`, or `wss://discord.emulator.test:port`
    /// with [`EmulatorConfig::gateway_tls`]).
    pub fn gateway_url(&self) -> String {
        self.inner.gateway_url.clone()
    }

    /// The `resume_gateway_url` READY announces.
    pub fn resume_gateway_url(&self) -> String {
        self.inner.resume_url.clone()
    }

    /// The socket addresses of the two gateway listeners (identify, resume), to admit as
    /// local roads for a `wss://` gateway.
    pub fn gateway_addrs(&self) -> (SocketAddr, SocketAddr) {
        (self.gateway_addr, self.resume_addr)
    }

    /// The REST base URL (`https://discord.emulator.test:port/api/v10`); admit
    /// [`REST_HOST`] as a local road to [`Emulator::rest_addr`].
    pub fn rest_base_url(&self) -> String {
        format!("https://{REST_HOST}:{}/api/v10", self.rest_addr.port())
    }

    /// The REST server's socket address.
    pub fn rest_addr(&self) -> SocketAddr {
        self.rest_addr
    }

    /// The run's CA certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// A root store trusting only the run's CA.
    pub fn root_store(&self) -> RootCertStore {
        self.roots.clone()
    }

    /// Put a channel in a guild (`Some`) or make it a DM channel (`None`).
    pub fn add_channel(&self, channel_id: u64, guild_id: Option<u64>) {
        let mut state = self.inner.lock();
        state.channel_guilds.insert(channel_id, guild_id);
        state.known_channels.insert(channel_id);
    }

    /// An interaction's token authorizes its webhook for [`TOKEN_LIFETIME`] (15 minutes)
    /// after INTERACTION_CREATE, then answers 401 50027; a test may shorten it.
    pub fn set_token_lifetime(&self, lifetime: Duration) {
        self.inner.lock().token_lifetime = Some(lifetime);
    }

    fn guild_of(&self, state: &State, channel: u64) -> Option<u64> {
        state
            .channel_guilds
            .get(&channel)
            .copied()
            .unwrap_or(Some(self.inner.config.default_guild_id))
    }

    /// A user posts a message; MESSAGE_CREATE is dispatched. Returns the message id.
    pub fn post_user_message(&self, channel_id: u64, author: &User, content: &str) -> u64 {
        let id = self.inner.snowflake();
        let mut state = self.inner.lock();
        state.known_channels.insert(channel_id);
        let message = EmulatedMessage {
            id,
            channel_id,
            guild_id: self.guild_of(&state, channel_id),
            author_id: author.id,
            author_bot: author.bot,
            content: content.to_owned(),
            mentions: parse_mentions(content),
            nonce: None,
            reply_to: None,
            flags: 0,
            interaction_id: None,
            interaction_user: None,
            webhook_id: None,
        };
        let mut d = message_json(&message, &author.name, true);
        if let Some(g) = message.guild_id {
            d["member"] = member_json(None);
            d["guild_id"] = json!(g.to_string());
        }
        state.messages.insert(id, message);
        self.inner.dispatch(&mut state, "MESSAGE_CREATE", d);
        id
    }

    /// A user runs a slash command with one string option; INTERACTION_CREATE is
    /// dispatched. Returns the interaction id. Its token is [`Emulator::interaction_token`].
    pub fn post_interaction(&self, channel_id: u64, user: &User, command: &str, text: &str) -> u64 {
        let id = self.inner.snowflake();
        let mut state = self.inner.lock();
        state.known_channels.insert(channel_id);
        state.interactions.insert(
            id,
            InteractionRecord {
                token: interaction_token(id),
                channel_id,
                created: Instant::now(),
                original: None,
                user_id: user.id,
            },
        );
        let guild = self.guild_of(&state, channel_id);
        let user_json = user_json(user.id, &user.name, user.bot);
        let mut d = json!({
            "id": id.to_string(),
            "application_id": self.inner.config.application_id.to_string(),
            "type": 2,
            "token": interaction_token(id),
            "version": 1,
            "channel_id": channel_id.to_string(),
            "data": {
                "id": "1", "name": command, "type": 1,
                "options": [{"name": "question", "type": 3, "value": text}],
            },
        });
        // Who installed the app, by context: a guild install (key "0") or the user's (key "1").
        d["entitlements"] = json!([]);
        d["locale"] = json!("en-US");
        d["app_permissions"] = json!("2048");
        d["channel"] = json!({"id": channel_id.to_string(),
            "type": if guild.is_some() { 0 } else { 1 }});
        match guild {
            Some(g) => {
                d["guild_id"] = json!(g.to_string());
                d["guild_locale"] = json!("en-US");
                d["member"] = member_json(Some(user_json));
                d["authorizing_integration_owners"] = json!({"0": g.to_string()});
                d["context"] = json!(0);
            }
            None => {
                d["authorizing_integration_owners"] = json!({"1": user.id.to_string()});
                d["user"] = user_json;
                d["context"] = json!(1);
            }
        }
        self.inner.dispatch(&mut state, "INTERACTION_CREATE", d);
        id
    }

    /// A message is deleted (by its author or a moderator); MESSAGE_DELETE is dispatched.
    /// Replies to it keep their reference; a reply created after it is a normal message.
    /// Returns whether the message existed.
    pub fn delete_message(&self, channel_id: u64, id: u64) -> bool {
        let mut state = self.inner.lock();
        if state
            .messages
            .get(&id)
            .is_none_or(|m| m.channel_id != channel_id)
        {
            return false;
        }
        let guild = self.guild_of(&state, channel_id);
        state.messages.remove(&id);
        let mut d = json!({"id": id.to_string(), "channel_id": channel_id.to_string()});
        if let Some(g) = guild {
            d["guild_id"] = json!(g.to_string());
        }
        self.inner.dispatch(&mut state, "MESSAGE_DELETE", d);
        true
    }

    /// Every message in a channel, oldest first (users' and the bot's).
    pub fn messages(&self, channel_id: u64) -> Vec<EmulatedMessage> {
        self.inner
            .lock()
            .messages
            .values()
            .filter(|m| m.channel_id == channel_id)
            .cloned()
            .collect()
    }

    /// The bot's messages in a channel, oldest first.
    pub fn bot_messages(&self, channel_id: u64) -> Vec<EmulatedMessage> {
        let bot = self.inner.config.bot_user_id;
        self.messages(channel_id)
            .into_iter()
            .filter(|m| m.author_id == bot)
            .collect()
    }

    /// Every REST response sent, in order (what a contract test checks against the spec).
    pub fn responses(&self) -> Vec<RestResponse> {
        self.inner.lock().responses.clone()
    }

    /// Every Create Message request received, in order.
    pub fn create_requests(&self) -> Vec<CreateRequest> {
        self.inner.lock().creates.clone()
    }

    /// The token the emulator gave interaction `id` (what Discord puts in INTERACTION_CREATE).
    pub fn interaction_token(&self, id: u64) -> String {
        interaction_token(id)
    }

    /// Every interaction callback request received, in order.
    pub fn callback_requests(&self) -> Vec<CallbackRequest> {
        self.inner.lock().callbacks.clone()
    }

    /// Script the behaviour of the next interaction callback (queued in order). Only
    /// `CommitThenDrop`, `DropBeforeCommit`, `ServerError`, `RateLimit` and `Reject` apply.
    pub fn script_next_callback(&self, fault: Fault) {
        self.inner.lock().callback_faults.push_back(fault);
    }

    /// Every edit of an original response received, in order.
    pub fn edit_requests(&self) -> Vec<EditRequest> {
        self.inner.lock().edits.clone()
    }

    /// Script the behaviour of the next edit of an original response (queued in order).
    /// `CommitThenDrop`, `DropBeforeCommit`, `ServerError`, `RateLimit` and `Reject` apply.
    pub fn script_next_edit(&self, fault: Fault) {
        self.inner.lock().edit_faults.push_back(fault);
    }

    /// Every follow-up message request (`POST /webhooks/{app}/{token}`) received, in order.
    pub fn follow_up_requests(&self) -> Vec<EditRequest> {
        self.inner.lock().follow_ups.clone()
    }

    /// Script the behaviour of the next follow-up message request (queued in order).
    pub fn script_next_follow_up(&self, fault: Fault) {
        self.inner.lock().follow_up_faults.push_back(fault);
    }

    /// Discord refuses an interaction's first callback (10062, "Unknown interaction") once
    /// [`INTERACTION_RESPONSE_WINDOW`] (3 s) has passed since INTERACTION_CREATE; a test may
    /// shorten the window instead of waiting out three seconds.
    pub fn set_interaction_window(&self, window: Duration) {
        self.inner.lock().interaction_window = Some(window);
    }

    /// The REST limits from now on (default [`RateLimits::default`], effectively none).
    pub fn set_rate_limits(&self, limits: RateLimits) {
        let mut state = self.inner.lock();
        state.rate_limits = limits;
        state.route_windows.clear();
        state.global_window = None;
    }

    /// What a read or an edit of `@original` answers from now on before any callback has
    /// landed (default [`EarlyOriginal::UnknownWebhook`]).
    pub fn set_early_original(&self, early: EarlyOriginal) {
        self.inner.lock().early_original = early;
    }

    /// Every Get Channel Messages request received, in order (a reconciliation's reads).
    pub fn read_requests(&self) -> Vec<ReadRequest> {
        self.inner.lock().reads.clone()
    }

    /// Script the behaviour of the next Create Message request (queued in order).
    pub fn script_next_create(&self, fault: Fault) {
        self.inner.lock().faults.push_back(fault);
    }

    /// On the next RESUME, replay the last `n` dispatches the client already saw, as
    /// Discord may after a resume.
    pub fn script_redelivery_on_resume(&self, n: u64) {
        self.inner.lock().redeliver_on_resume = n;
    }

    /// Answer (or stop answering) Get Channel Messages with 503, as during a Discord outage:
    /// a reconciliation read then proves nothing either way.
    pub fn fail_reads(&self, fail: bool) {
        self.inner.lock().reads_unavailable = fail;
    }

    /// Stop (or resume) acknowledging heartbeats, to make the connection a zombie.
    pub fn stop_acking(&self, stop: bool) {
        self.inner.lock().stop_acking = stop;
    }

    /// Send RECONNECT (op 7) on the live connection.
    pub fn force_reconnect(&self) -> bool {
        self.control(Ctl::Reconnect)
    }

    /// Drop the live connection without a close frame (the session stays resumable).
    pub fn drop_connection(&self) -> bool {
        self.control(Ctl::Drop)
    }

    /// Send INVALID_SESSION (op 9, not resumable) and forget the session.
    pub fn invalidate_session(&self) -> bool {
        self.control(Ctl::Invalidate)
    }

    fn control(&self, ctl: Ctl) -> bool {
        let state = self.inner.lock();
        match self.inner.current_conn(&state) {
            Some(tx) => tx.send(ctl).is_ok(),
            None => false,
        }
    }

    /// Gateway counters.
    pub fn gateway_counts(&self) -> GatewayCounts {
        self.inner.lock().counts
    }

    /// The session start limit's `remaining` and `reset_after` now, as `GET /gateway/bot`
    /// would answer them.
    pub fn session_starts_left(&self) -> (u32, Duration) {
        self.inner.session_starts_left()
    }

    /// Whether the bot's token was reset (an IDENTIFY past the session start limit).
    pub fn token_was_reset(&self) -> bool {
        self.inner.lock().token_reset
    }

    /// Script the answer to the next `GET /gateway/bot` (queued in order).
    pub fn script_next_gateway_bot(&self, fault: GatewayBotFault) {
        self.inner.lock().gateway_bot_faults.push_back(fault);
    }

    /// Start (or end) a gateway outage: every IDENTIFY still spends a session start, and its
    /// connection is then dropped before READY.
    pub fn set_identify_outage(&self, outage: bool) {
        self.inner.lock().identify_outage = outage;
    }

    /// Whether a gateway connection is attached to the current session.
    pub fn connected(&self) -> bool {
        let state = self.inner.lock();
        self.inner.current_conn(&state).is_some()
    }
}
