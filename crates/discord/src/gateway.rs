//! The Gateway v10 client: one outbound WebSocket, HELLO → IDENTIFY (or RESUME) → READY, a
//! heartbeat on its own task, zombie detection, RESUME after a drop, re-IDENTIFY after
//! INVALID_SESSION, and the RECONNECT opcode. Dispatches the edge acts on are emitted as typed
//! [`GatewayEvent`]s on a bounded channel.
//!
//! **Architecture Invariant:** the client never deduplicates. A dispatch redelivered after a
//! resume is emitted again with the same external id; the ledger's admission key makes it
//! harmless. Deduplicating here would hide a second delivery from the ledger's accounting.
//!
//! **Architecture Invariant:** the heartbeat runs on a dedicated task that shares only the
//! socket's write half and two atomics with the reader, so a slow consumer of events (the
//! reader awaiting channel capacity) cannot delay a heartbeat. Its lateness is recorded.
//!
//! **Architecture Invariant:** every IDENTIFY is counted against Discord's own figure,
//! `session_start_limit` from `GET /gateway/bot` ([`crate::session_limit`]), read before the
//! first IDENTIFY, when a tenth or less remains, and after its `reset_after` ([`crate::identify`]):
//! none is sent while `remaining` is 0, and failing sessions back off exponentially, so neither an
//! outage nor a restart spends the session starts Discord resets a token for. When the figure
//! cannot be read (a refused, malformed or lost answer, or no reader configured) the conservative
//! allowance governs, and the log says so.
//!
//! **Architecture Invariant:** the `url` `GET /gateway/bot` answers is used only when it names
//! the configured gateway (scheme, host and port): a REST answer never redirects the gateway
//! connection.
//!
//! **Architecture Invariant:** `ws://` is accepted only for a loopback IP literal (the
//! emulator); every other gateway, including a `resume_gateway_url` from READY, is `wss://` and
//! dialed through destination admission and the pinned connector.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use reach_destination::{
    Admission, Destination, PinnedConnector, PinnedStream, Purpose, Resolver, StaticResolver,
};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{Mutex, mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, sleep_until, timeout};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::identify::{IdentifyAllowance, IdentifyBasis, IdentifyBudget, SessionLimitRefusal};
use crate::model::{BotToken, INTERACTION_APPLICATION_COMMAND, InteractionCreate, MessageCreate};
use crate::session_limit::{READ_TIMEOUT, SessionLimitReader};

/// Gateway API version this client speaks.
pub const GATEWAY_VERSION: u8 = 10;
/// Longest wait for TCP, TLS and the WebSocket handshake.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Longest wait for HELLO after the handshake (Discord sends it at once).
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(20);
/// Largest Gateway message accepted. READY of a bot in many guilds is the largest payload; a
/// bot serving a handful of admitted guilds stays far below this.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
/// Capacity of the event channel. When full, the reader waits (back-pressure to the socket);
/// the heartbeat is unaffected.
pub const EVENT_CHANNEL_CAPACITY: usize = 256;
/// Shortest and longest heartbeat interval accepted from HELLO; outside it the peer is broken.
const MIN_HEARTBEAT: Duration = Duration::from_millis(10);
const MAX_HEARTBEAT: Duration = Duration::from_secs(600);

/// Gateway intent GUILDS (1 << 0).
pub const INTENT_GUILDS: u64 = 1 << 0;
/// Gateway intent GUILD_MESSAGES (1 << 9).
pub const INTENT_GUILD_MESSAGES: u64 = 1 << 9;
/// Privileged gateway intent MESSAGE_CONTENT (1 << 15), only when the manifest enables it.
pub const INTENT_MESSAGE_CONTENT: u64 = 1 << 15;

/// The minimal intents: GUILDS | GUILD_MESSAGES, plus MESSAGE_CONTENT only when enabled.
/// Without MESSAGE_CONTENT Discord still delivers the content of messages that mention the bot,
/// which is the mention trigger.
pub fn intents(message_content: bool) -> u64 {
    let base = INTENT_GUILDS | INTENT_GUILD_MESSAGES;
    if message_content {
        base | INTENT_MESSAGE_CONTENT
    } else {
        base
    }
}

/// Close codes after which reconnecting cannot help (authentication failed, invalid shard,
/// sharding required, invalid API version, invalid or disallowed intents).
const FATAL_CLOSE_CODES: [u16; 6] = [4004, 4010, 4011, 4012, 4013, 4014];
/// Close codes after which the session cannot be resumed (invalid seq, session timed out).
const REIDENTIFY_CLOSE_CODES: [u16; 2] = [4007, 4009];
/// The close code this client uses when it closes to resume: anything but 1000/1001, which
/// would end the session.
const RESUME_CLOSE_CODE: u16 = 4000;

/// A gateway URL: `wss://host[:port][/path]`, or `ws://` to a loopback IP literal only.
#[derive(Clone, PartialEq, Eq)]
pub struct GatewayUrl {
    secure: bool,
    host: String,
    port: u16,
    path: String,
}

impl fmt::Debug for GatewayUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.base())
    }
}

/// A gateway URL was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GatewayUrlError {
    /// The scheme is neither `wss` nor `ws`.
    #[error("gateway url must be wss:// (or ws:// to loopback): {0}")]
    Scheme(String),
    /// `ws://` to anything but 127.0.0.1 or ::1.
    #[error("plain ws:// is allowed only to a loopback IP literal, not {0}")]
    PlainNotLoopback(String),
    /// The URL is malformed.
    #[error("malformed gateway url: {0}")]
    Malformed(&'static str),
}

impl GatewayUrl {
    /// Parse and check a gateway URL. Any query is dropped: the client sets `v` and `encoding`.
    pub fn parse(url: &str) -> Result<Self, GatewayUrlError> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or(GatewayUrlError::Malformed("no scheme"))?;
        let secure = match scheme {
            "wss" => true,
            "ws" => false,
            other => return Err(GatewayUrlError::Scheme(other.to_owned())),
        };
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        if authority.is_empty() || authority.contains('@') {
            return Err(GatewayUrlError::Malformed("bad authority"));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (ip, after) = v6
                .split_once(']')
                .ok_or(GatewayUrlError::Malformed("bad IPv6 literal"))?;
            let port = match after.strip_prefix(':') {
                Some(p) => Some(p),
                None if after.is_empty() => None,
                None => return Err(GatewayUrlError::Malformed("bad port")),
            };
            (format!("[{ip}]"), port)
        } else {
            let (h, p) = match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            };
            // An IPv6 literal is only ever bracketed: `ws://::01:0` is not `[::01]:0`.
            if h.contains(':') {
                return Err(GatewayUrlError::Malformed("IPv6 literal without brackets"));
            }
            (h.to_owned(), p)
        };
        let port = match port {
            Some(p) => p
                .parse::<u16>()
                .map_err(|_| GatewayUrlError::Malformed("bad port"))?,
            None if secure => 443,
            None => 80,
        };
        if !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b))
        {
            return Err(GatewayUrlError::Malformed("bad host"));
        }
        let path = tail.split(['?', '#']).next().unwrap_or("");
        let path = if path.is_empty() { "/" } else { path };
        let parsed = GatewayUrl {
            secure,
            host: host.to_ascii_lowercase(),
            port,
            path: path.to_owned(),
        };
        if !secure && parsed.loopback_ip().is_none() {
            return Err(GatewayUrlError::PlainNotLoopback(parsed.host));
        }
        Ok(parsed)
    }

    fn loopback_ip(&self) -> Option<IpAddr> {
        let bare = self.host.trim_start_matches('[').trim_end_matches(']');
        let ip: IpAddr = bare.parse().ok()?;
        // Only the two canonical loopback addresses, as the brief requires.
        (ip == IpAddr::from([127, 0, 0, 1]) || ip == IpAddr::from([0u16, 0, 0, 0, 0, 0, 0, 1]))
            .then_some(ip)
    }

    fn base(&self) -> String {
        let (scheme, default_port) = if self.secure {
            ("wss", 443)
        } else {
            ("ws", 80)
        };
        if self.port == default_port {
            format!("{scheme}://{}{}", self.host, self.path)
        } else {
            format!("{scheme}://{}:{}{}", self.host, self.port, self.path)
        }
    }

    /// The URL the client connects to, with `v=10&encoding=json`.
    pub fn connect_url(&self) -> String {
        format!("{}?v={GATEWAY_VERSION}&encoding=json", self.base())
    }

    /// Whether this is a `wss://` URL.
    pub fn is_secure(&self) -> bool {
        self.secure
    }

    /// The gateway `GET /gateway/bot` named (`answered`), if it is this one: the same scheme,
    /// host and port (its path may differ). Anything else — another host, port or scheme, or a
    /// URL this client refuses — is `None`, and the client keeps the configured gateway.
    pub fn same_gateway(&self, answered: &str) -> Option<GatewayUrl> {
        let answered = GatewayUrl::parse(answered).ok()?;
        (answered.secure == self.secure && answered.host == self.host && answered.port == self.port)
            .then_some(answered)
    }
}

/// How `wss://` gateways are dialed: destination admission (controlled resolution, the
/// special-purpose table, pinning) and the pinned TLS connector with its root store.
#[derive(Debug)]
pub struct WssDialer<R> {
    /// The admission gate (its policy names the gateway hosts' ports and any local road).
    pub admission: Arc<Admission<R>>,
    /// The pinned TLS connector (its root store is the parameter).
    pub connector: PinnedConnector,
}

impl<R> Clone for WssDialer<R> {
    fn clone(&self) -> Self {
        WssDialer {
            admission: Arc::clone(&self.admission),
            connector: self.connector.clone(),
        }
    }
}

/// Delay range before a reconnect; a random point in `[min, max]` is used.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    /// Shortest wait.
    pub min: Duration,
    /// Longest wait.
    pub max: Duration,
}

impl Backoff {
    fn pick(&self) -> Duration {
        if self.max <= self.min {
            return self.min;
        }
        let span = (self.max - self.min).as_micros() as u64;
        self.min + Duration::from_micros(fastrand::u64(0..=span))
    }
}

/// Everything the client needs. The token is read by the caller from its secret file.
#[derive(Debug)]
pub struct GatewayConfig<R = StaticResolver> {
    /// The gateway to IDENTIFY at.
    pub url: GatewayUrl,
    /// The bot token.
    pub token: BotToken,
    /// Intents bits (use [`intents`]).
    pub intents: u64,
    /// Dialer for `wss://` gateways; `None` allows only loopback `ws://`.
    pub wss: Option<WssDialer<R>>,
    /// Wait before reconnecting after a drop (Discord suggests a short random wait).
    pub reconnect_delay: Backoff,
    /// Wait before re-IDENTIFY after INVALID_SESSION (Discord: 1 to 5 s).
    pub reidentify_delay: Backoff,
    /// The conservative allowance the client budgets IDENTIFYs by without Discord's figure, and
    /// their spacing ([`crate::identify`]).
    pub identify_allowance: IdentifyAllowance,
    /// Where Discord's `session_start_limit` is read (`GET /gateway/bot`); `None`: the
    /// conservative allowance alone.
    pub session_limit: Option<SessionLimitReader<R>>,
}

impl GatewayConfig<StaticResolver> {
    /// A config for a loopback `ws://` gateway (the emulator), with short delays.
    pub fn loopback(url: GatewayUrl, token: BotToken, intents: u64) -> Self {
        GatewayConfig {
            url,
            token,
            intents,
            wss: None,
            reconnect_delay: Backoff {
                min: Duration::from_millis(10),
                max: Duration::from_millis(50),
            },
            reidentify_delay: Backoff {
                min: Duration::from_millis(10),
                max: Duration::from_millis(50),
            },
            // The emulator does not rate IDENTIFYs; its tests need not wait 5 s between two.
            identify_allowance: IdentifyAllowance {
                spacing: Duration::ZERO,
                ..IdentifyAllowance::default()
            },
            session_limit: None,
        }
    }
}

pub use crate::model::GatewayEvent;

/// Counters the client keeps; read them with [`GatewayHandle::stats`].
#[derive(Debug, Default)]
struct Counters {
    connections: AtomicU64,
    identifies: AtomicU64,
    resumes: AtomicU64,
    heartbeats_sent: AtomicU64,
    acks: AtomicU64,
    zombies: AtomicU64,
    max_lateness_us: AtomicU64,
    dispatches: AtomicU64,
    session_limit_reads: AtomicU64,
}

/// A snapshot of the client's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GatewayStats {
    /// WebSocket connections established.
    pub connections: u64,
    /// IDENTIFY payloads sent.
    pub identifies: u64,
    /// RESUME payloads sent.
    pub resumes: u64,
    /// Heartbeats sent.
    pub heartbeats_sent: u64,
    /// HEARTBEAT_ACKs received.
    pub acks: u64,
    /// Connections abandoned because a heartbeat went unacknowledged.
    pub zombies: u64,
    /// Worst lateness of a heartbeat against its schedule.
    pub max_heartbeat_lateness: Duration,
    /// Dispatches received (all types).
    pub dispatches: u64,
    /// Reads of `GET /gateway/bot` attempted.
    pub session_limit_reads: u64,
}

/// A running client. Dropping it does not stop the client; call [`GatewayHandle::shutdown`].
#[derive(Debug)]
pub struct GatewayHandle {
    stop: watch::Sender<bool>,
    counters: Arc<Counters>,
    basis: Arc<std::sync::Mutex<IdentifyBasis>>,
    task: JoinHandle<()>,
}

impl GatewayHandle {
    /// The counters so far.
    pub fn stats(&self) -> GatewayStats {
        let c = &self.counters;
        GatewayStats {
            connections: c.connections.load(Ordering::Relaxed),
            identifies: c.identifies.load(Ordering::Relaxed),
            resumes: c.resumes.load(Ordering::Relaxed),
            heartbeats_sent: c.heartbeats_sent.load(Ordering::Relaxed),
            acks: c.acks.load(Ordering::Relaxed),
            zombies: c.zombies.load(Ordering::Relaxed),
            max_heartbeat_lateness: Duration::from_micros(
                c.max_lateness_us.load(Ordering::Relaxed),
            ),
            dispatches: c.dispatches.load(Ordering::Relaxed),
            session_limit_reads: c.session_limit_reads.load(Ordering::Relaxed),
        }
    }

    /// What the client budgets its IDENTIFYs by: Discord's figure as last read, or the
    /// conservative allowance (and why).
    pub fn identify_basis(&self) -> IdentifyBasis {
        self.basis.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Close the connection (code 1000, which ends the session) and wait for the task.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Start the client. Events arrive on the returned receiver; when it is dropped, the client
/// stops.
pub fn spawn<R: Resolver + 'static>(
    config: GatewayConfig<R>,
) -> (GatewayHandle, mpsc::Receiver<GatewayEvent>) {
    let (tx, rx) = mpsc::channel(EVENT_CHANNEL_CAPACITY);
    let (stop, stop_rx) = watch::channel(false);
    let counters = Arc::new(Counters::default());
    let basis = Arc::new(std::sync::Mutex::new(IdentifyBasis::Allowance));
    let task = tokio::spawn(run(
        config,
        tx,
        stop_rx,
        Arc::clone(&counters),
        Arc::clone(&basis),
    ));
    (
        GatewayHandle {
            stop,
            counters,
            basis,
            task,
        },
        rx,
    )
}

/// The resumable state of a session.
#[derive(Debug, Clone)]
struct Session {
    id: String,
    resume_url: GatewayUrl,
}

/// How one connection ended.
#[derive(Debug)]
enum Ended {
    /// Reconnect; resume if a session is held.
    Reconnect(&'static str),
    /// Drop the session, wait, and IDENTIFY again.
    Reidentify(&'static str),
    /// Stop for good with this close code.
    Fatal(u16),
    /// Shutdown was asked, or the event receiver is gone.
    Stop,
}

async fn run<R: Resolver + 'static>(
    config: GatewayConfig<R>,
    events: mpsc::Sender<GatewayEvent>,
    mut stop: watch::Receiver<bool>,
    counters: Arc<Counters>,
    basis: Arc<std::sync::Mutex<IdentifyBasis>>,
) {
    let mut session: Option<Session> = None;
    // The last sequence number seen; kept across connections for RESUME.
    let seq = Arc::new(AtomicU64::new(0));
    let mut budget = IdentifyBudget::new(config.identify_allowance);
    // Where IDENTIFY goes: the configured gateway, or the same gateway as Discord names it.
    let mut identify_url = config.url.clone();
    loop {
        if *stop.borrow() {
            return;
        }
        if session.is_none() {
            if let Some(reader) = &config.session_limit
                && budget.wants_read(Instant::now())
            {
                counters.session_limit_reads.fetch_add(1, Ordering::Relaxed);
                let read = tokio::select! {
                    read = timeout(READ_TIMEOUT, reader.read()) => read.unwrap_or_else(|_| {
                        Err(SessionLimitRefusal::Unread("discord/gateway-bot-timeout".into()))
                    }),
                    _ = stop.changed() => return,
                };
                let now = Instant::now();
                let next = match read {
                    Ok(bot) => {
                        budget.observe(bot.limit, now);
                        let l = bot.limit;
                        tracing::info!(
                            total = l.total,
                            remaining = l.remaining,
                            reset_after_ms = l.reset_after.as_millis() as u64,
                            max_concurrency = l.max_concurrency,
                            "Discord's session start limit read; IDENTIFYs are budgeted by it"
                        );
                        match config.url.same_gateway(&bot.url) {
                            Some(same) => identify_url = same,
                            None => tracing::warn!(
                                configured = ?config.url,
                                "GET /gateway/bot names another gateway; the configured one is kept"
                            ),
                        }
                        Some(IdentifyBasis::Discord(l))
                    }
                    Err(refusal) => {
                        budget.read_refused(&refusal, now);
                        if budget.figure(now).is_some() {
                            tracing::warn!(code = %refusal, "Discord's session start limit not read again; its last figure holds until its reset");
                            None
                        } else {
                            let a = config.identify_allowance;
                            tracing::warn!(
                                code = %refusal,
                                per_window = a.per_window,
                                window_s = a.window.as_secs(),
                                "Discord's session start limit not read; IDENTIFYs are budgeted by the conservative default"
                            );
                            Some(IdentifyBasis::Fallback(refusal))
                        }
                    }
                };
                if let Some(next) = next {
                    *basis.lock().unwrap_or_else(|p| p.into_inner()) = next;
                }
            }
            if let Some(hold) = budget.hold(Instant::now()) {
                let wait = hold.wait();
                match hold {
                    crate::identify::Hold::Spacing(_) => {}
                    _ => tracing::warn!(
                        reason = hold.reason(),
                        wait_ms = wait.as_millis() as u64,
                        "no IDENTIFY until the budget allows one; waiting rather than risk the token's reset"
                    ),
                }
                let event = GatewayEvent::Reconnecting {
                    reason: hold.reason(),
                    resume: false,
                };
                if events.send(event).await.is_err() {
                    return;
                }
                tokio::select! {
                    _ = sleep(wait) => {}
                    _ = stop.changed() => return,
                }
                // Ask again: after a reset, Discord's figure is read before identifying.
                continue;
            }
        }
        let began = Instant::now();
        let identifies = counters.identifies.load(Ordering::Relaxed);
        let ended = connection(
            &config,
            &identify_url,
            &mut session,
            &seq,
            &events,
            &mut stop,
            &counters,
        )
        .await;
        if counters.identifies.load(Ordering::Relaxed) > identifies {
            budget.identified(began);
            // READY sets the session; how long it then lasted says whether the gateway works.
            budget.session_ended(session.is_some().then(|| began.elapsed()));
        }
        let delay = match ended {
            Ended::Stop => return,
            Ended::Fatal(code) => {
                tracing::warn!(code, "gateway refused the client");
                let _ = events.send(GatewayEvent::Fatal { code }).await;
                return;
            }
            Ended::Reconnect(reason) => {
                tracing::info!(reason, resume = session.is_some(), "gateway reconnecting");
                let event = GatewayEvent::Reconnecting {
                    reason,
                    resume: session.is_some(),
                };
                if events.send(event).await.is_err() {
                    return;
                }
                config.reconnect_delay.pick()
            }
            Ended::Reidentify(reason) => {
                tracing::info!(reason, "gateway session invalidated; identifying again");
                session = None;
                seq.store(0, Ordering::Relaxed);
                let event = GatewayEvent::Reconnecting {
                    reason,
                    resume: false,
                };
                if events.send(event).await.is_err() {
                    return;
                }
                config.reidentify_delay.pick()
            }
        };
        // The next connection identifies: sessions that keep failing back off exponentially.
        let delay = if session.is_none() {
            budget.failure_backoff(delay)
        } else {
            delay
        };
        tokio::select! {
            _ = sleep(delay) => {}
            _ = stop.changed() => return,
        }
    }
}

/// The byte stream under the WebSocket: plain TCP (loopback only) or a pinned TLS stream.
#[derive(Debug)]
enum Transport {
    Plain(TcpStream),
    Tls(Box<PinnedStream>),
}

impl AsyncRead for Transport {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Transport {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_flush(cx),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

type Ws = WebSocketStream<Transport>;
type Writer = Arc<Mutex<SplitSink<Ws, Message>>>;

async fn dial<R: Resolver>(config: &GatewayConfig<R>, url: &GatewayUrl) -> io::Result<Ws> {
    let transport = if url.secure {
        let wss = config.wss.as_ref().ok_or_else(|| {
            io::Error::new(io::ErrorKind::PermissionDenied, "no wss dialer configured")
        })?;
        let port = if url.port == 443 {
            String::new()
        } else {
            format!(":{}", url.port)
        };
        let purpose = Purpose::new("discord-gateway").map_err(io::Error::other)?;
        let destination = Destination::parse(&format!("https://{}{port}/", url.host), purpose)
            .map_err(io::Error::other)?;
        let admitted = wss
            .admission
            .admit(destination)
            .await
            .map_err(io::Error::other)?;
        let stream = wss
            .connector
            .connect(&admitted)
            .await
            .map_err(io::Error::other)?;
        Transport::Tls(Box::new(stream))
    } else {
        let ip = url.loopback_ip().ok_or_else(|| {
            io::Error::new(io::ErrorKind::PermissionDenied, "plain ws to non-loopback")
        })?;
        let tcp = TcpStream::connect(SocketAddr::new(ip, url.port)).await?;
        tcp.set_nodelay(true)?;
        Transport::Plain(tcp)
    };
    let ws_config = WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE_BYTES))
        .max_frame_size(Some(MAX_MESSAGE_BYTES));
    let (ws, _response) =
        tokio_tungstenite::client_async_with_config(url.connect_url(), transport, Some(ws_config))
            .await
            .map_err(io::Error::other)?;
    Ok(ws)
}

fn text(value: &Value) -> Message {
    Message::text(value.to_string())
}

/// State shared between the reader and the heartbeat task of one connection.
#[derive(Debug, Default)]
struct Beat {
    /// Set when an ACK arrives; cleared when a heartbeat is sent.
    acked: AtomicBool,
    /// Set while the reader waits for channel capacity: ACKs cannot be read then, so a
    /// missing ACK proves nothing about the connection.
    reader_blocked: AtomicBool,
    /// Set whenever the reader starts waiting; cleared by each beat. A reader that waited at
    /// any time since the last beat may still be reading its backlog towards the ACK.
    was_blocked: AtomicBool,
}

async fn connection<R: Resolver>(
    config: &GatewayConfig<R>,
    identify_url: &GatewayUrl,
    session: &mut Option<Session>,
    seq: &Arc<AtomicU64>,
    events: &mpsc::Sender<GatewayEvent>,
    stop: &mut watch::Receiver<bool>,
    counters: &Arc<Counters>,
) -> Ended {
    let url = session
        .as_ref()
        .map_or(identify_url, |s| &s.resume_url)
        .clone();
    let ws = match timeout(CONNECT_TIMEOUT, dial(config, &url)).await {
        Ok(Ok(ws)) => ws,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "gateway connect failed");
            return Ended::Reconnect("connect-failed");
        }
        Err(_) => return Ended::Reconnect("connect-timeout"),
    };
    counters.connections.fetch_add(1, Ordering::Relaxed);
    let (sink, mut stream) = ws.split();
    let writer: Writer = Arc::new(Mutex::new(sink));

    // HELLO.
    let interval = match timeout(HELLO_TIMEOUT, next_payload(&mut stream)).await {
        Ok(Some(Ok(p))) if p.op == 10 => {
            let ms =
                p.d.get("heartbeat_interval")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
            Duration::from_millis(ms)
        }
        _ => return Ended::Reconnect("no-hello"),
    };
    if !(MIN_HEARTBEAT..=MAX_HEARTBEAT).contains(&interval) {
        return Ended::Reconnect("bad-hello");
    }

    let beat = Arc::new(Beat::default());
    beat.acked.store(true, Ordering::Relaxed);
    let (zombie_tx, mut zombie_rx) = mpsc::channel::<()>(1);
    let heart = AbortOnDrop(tokio::spawn(heartbeat(
        interval,
        Arc::clone(&writer),
        Arc::clone(seq),
        Arc::clone(&beat),
        Arc::clone(counters),
        zombie_tx,
    )));

    // IDENTIFY or RESUME.
    let hello_reply = match session {
        Some(s) => {
            counters.resumes.fetch_add(1, Ordering::Relaxed);
            json!({"op": 6, "d": {
                "token": config.token.expose(),
                "session_id": s.id,
                "seq": seq.load(Ordering::Relaxed),
            }})
        }
        None => {
            counters.identifies.fetch_add(1, Ordering::Relaxed);
            json!({"op": 2, "d": {
                "token": config.token.expose(),
                "intents": config.intents,
                "properties": {"os": "linux", "browser": "reach", "device": "reach"},
                "compress": false,
            }})
        }
    };
    if writer.lock().await.send(text(&hello_reply)).await.is_err() {
        return Ended::Reconnect("send-failed");
    }

    let ended = loop {
        let next = tokio::select! {
            biased;
            _ = stop.changed() => {
                let frame = CloseFrame { code: CloseCode::Normal, reason: "shutdown".into() };
                let _ = writer.lock().await.send(Message::Close(Some(frame))).await;
                break Ended::Stop;
            }
            _ = zombie_rx.recv() => {
                counters.zombies.fetch_add(1, Ordering::Relaxed);
                break Ended::Reconnect("zombie");
            }
            next = stream.next() => next,
        };
        let message = match next {
            None | Some(Err(_)) => break Ended::Reconnect("closed"),
            Some(Ok(m)) => m,
        };
        let payload = match message {
            Message::Text(t) => match serde_json::from_str::<Payload>(t.as_str()) {
                Ok(p) => p,
                Err(_) => continue,
            },
            Message::Close(frame) => {
                let code = frame.map_or(1005, |f| u16::from(f.code));
                if FATAL_CLOSE_CODES.contains(&code) {
                    break Ended::Fatal(code);
                }
                if REIDENTIFY_CLOSE_CODES.contains(&code) {
                    break Ended::Reidentify("close-code");
                }
                break Ended::Reconnect("closed");
            }
            _ => continue,
        };
        match payload.op {
            0 => {
                counters.dispatches.fetch_add(1, Ordering::Relaxed);
                if let Some(s) = payload.s {
                    seq.fetch_max(s, Ordering::Relaxed);
                }
                let Some(event) = dispatch(&payload, session, &url) else {
                    continue;
                };
                let sent = match events.try_send(event) {
                    Ok(()) => Ok(()),
                    Err(mpsc::error::TrySendError::Closed(_)) => break Ended::Stop,
                    Err(mpsc::error::TrySendError::Full(event)) => {
                        beat.was_blocked.store(true, Ordering::Relaxed);
                        beat.reader_blocked.store(true, Ordering::Relaxed);
                        events.send(event).await.map_err(|_| ())
                    }
                };
                beat.reader_blocked.store(false, Ordering::Relaxed);
                if sent.is_err() {
                    break Ended::Stop;
                }
            }
            1 => {
                let hb = json!({"op": 1, "d": current_seq(seq)});
                if writer.lock().await.send(text(&hb)).await.is_err() {
                    break Ended::Reconnect("send-failed");
                }
                counters.heartbeats_sent.fetch_add(1, Ordering::Relaxed);
            }
            7 => break Ended::Reconnect("reconnect-opcode"),
            9 => {
                if payload.d.as_bool() == Some(true) && session.is_some() {
                    break Ended::Reconnect("invalid-session-resumable");
                }
                break Ended::Reidentify("invalid-session");
            }
            11 => {
                counters.acks.fetch_add(1, Ordering::Relaxed);
                beat.acked.store(true, Ordering::Relaxed);
            }
            _ => {}
        }
    };
    drop(heart);
    if matches!(ended, Ended::Reconnect(_) | Ended::Reidentify(_)) {
        // Close with a non-1000 code so the session stays resumable.
        let frame = CloseFrame {
            code: CloseCode::from(RESUME_CLOSE_CODE),
            reason: "reconnect".into(),
        };
        let mut w = writer.lock().await;
        let _ = timeout(Duration::from_secs(1), w.send(Message::Close(Some(frame)))).await;
    }
    ended
}

/// Decode one text frame as the reader does: a dispatch (op 0) becomes its event, read as if
/// the session had been identified at `url` (READY's `resume_gateway_url` is checked, then
/// forgotten). Any other opcode, an unparsable frame and a dispatch the edge does not act on
/// are `None`. The reader's own path (`Payload` and `dispatch`), public so the fuzz targets
/// (`fuzz/`) feed it bytes.
pub fn decode_dispatch(frame: &str, url: &GatewayUrl) -> Option<GatewayEvent> {
    let payload = serde_json::from_str::<Payload>(frame).ok()?;
    if payload.op != 0 {
        return None;
    }
    let mut session = None;
    dispatch(&payload, &mut session, url)
}

/// Map a dispatch to an event, updating the session on READY.
fn dispatch(
    payload: &Payload,
    session: &mut Option<Session>,
    url: &GatewayUrl,
) -> Option<GatewayEvent> {
    let seq = payload.s.unwrap_or(0);
    match payload.t.as_deref()? {
        "READY" => {
            let d = &payload.d;
            let session_id = d.get("session_id")?.as_str()?.to_owned();
            let user_id = d.get("user")?.get("id")?.as_str()?.parse().ok()?;
            let application_id = d
                .get("application")
                .and_then(|a| a.get("id"))
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok());
            // A resume URL that fails our scheme rule is not used: we resume at the URL we
            // identified at instead.
            let resume_url = d
                .get("resume_gateway_url")
                .and_then(Value::as_str)
                .and_then(|u| GatewayUrl::parse(u).ok())
                .unwrap_or_else(|| url.clone());
            *session = Some(Session {
                id: session_id.clone(),
                resume_url,
            });
            Some(GatewayEvent::Ready {
                session_id,
                user_id,
                application_id,
            })
        }
        "RESUMED" => Some(GatewayEvent::Resumed),
        "MESSAGE_CREATE" => match MessageCreate::from_json(payload.d.clone()) {
            Ok(message) => Some(GatewayEvent::MessageCreate { seq, message }),
            Err(e) => {
                tracing::warn!(error = %e, "unparsable MESSAGE_CREATE dropped");
                None
            }
        },
        "INTERACTION_CREATE" => match InteractionCreate::from_json(payload.d.clone()) {
            Ok(interaction) if interaction.kind == INTERACTION_APPLICATION_COMMAND => {
                Some(GatewayEvent::InteractionCreate { seq, interaction })
            }
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(error = %e, "unparsable INTERACTION_CREATE dropped");
                None
            }
        },
        _ => None,
    }
}

fn current_seq(seq: &AtomicU64) -> Value {
    match seq.load(Ordering::Relaxed) {
        0 => Value::Null,
        s => Value::from(s),
    }
}

/// One gateway payload.
#[derive(Debug, serde::Deserialize)]
struct Payload {
    op: u8,
    #[serde(default)]
    d: Value,
    #[serde(default)]
    s: Option<u64>,
    #[serde(default)]
    t: Option<String>,
}

async fn next_payload(stream: &mut SplitStream<Ws>) -> Option<Result<Payload, ()>> {
    loop {
        match stream.next().await? {
            Ok(Message::Text(t)) => return Some(serde_json::from_str(t.as_str()).map_err(|_| ())),
            Ok(Message::Ping(_) | Message::Pong(_)) => continue,
            _ => return Some(Err(())),
        }
    }
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The heartbeat task: the first beat after `interval * jitter` (jitter in [0, 1), as Discord
/// asks, so a fleet of reconnecting clients does not beat in step), then every `interval`.
/// Before each beat, the previous one must have been acknowledged, unless the reader could not
/// read because the consumer was slow; otherwise the connection is a zombie.
async fn heartbeat(
    interval: Duration,
    writer: Writer,
    seq: Arc<AtomicU64>,
    beat: Arc<Beat>,
    counters: Arc<Counters>,
    zombie: mpsc::Sender<()>,
) {
    let jitter = interval.mul_f64(fastrand::f64());
    let mut due = Instant::now() + jitter;
    loop {
        sleep_until(due).await;
        let lateness = Instant::now().saturating_duration_since(due);
        counters
            .max_lateness_us
            .fetch_max(lateness.as_micros() as u64, Ordering::Relaxed);
        let excused = beat.reader_blocked.load(Ordering::Relaxed)
            | beat.was_blocked.swap(false, Ordering::Relaxed);
        if !beat.acked.swap(false, Ordering::Relaxed) && !excused {
            let _ = zombie.send(()).await;
            return;
        }
        let payload = json!({"op": 1, "d": current_seq(&seq)});
        if writer.lock().await.send(text(&payload)).await.is_err() {
            return;
        }
        counters.heartbeats_sent.fetch_add(1, Ordering::Relaxed);
        due += interval;
    }
}
