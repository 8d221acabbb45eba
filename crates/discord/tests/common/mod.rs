//! Builders shared by the emulator tests: a started emulator, a gateway client pointed at it,
//! and a REST adapter admitted to it as an exact local road.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use reach_destination::{
    Admission, AdmissionPolicy, Host, PinnedConnector, RecordingDialer, StaticResolver, TcpDialer,
};
use reach_discord::gateway::{self, GatewayConfig, GatewayEvent, GatewayHandle, GatewayUrl};
use reach_discord::rest::{RestClient, RestConfig, RestError};
use reach_discord::session_limit::SessionLimitReader;
use reach_discord::{BotToken, Snowflake};
use reach_discord_emulator::{Emulator, EmulatorConfig, REST_HOST};
use tokio::sync::mpsc;

/// Generous bound on waiting for an event: a failure shows up as a clear message, never as a
/// hung test. Not a timing assertion.
pub const WAIT: Duration = Duration::from_secs(20);

pub const CHANNEL: u64 = 1_100_000_000_000_000_200;

pub async fn emulator() -> Emulator {
    Emulator::start(EmulatorConfig::default())
        .await
        .expect("start emulator")
}

pub fn token(em: &Emulator) -> BotToken {
    BotToken::from_bytes(em.config().token.as_bytes()).expect("token")
}

pub fn gateway(em: &Emulator) -> (GatewayHandle, mpsc::Receiver<GatewayEvent>) {
    let url = GatewayUrl::parse(&em.gateway_url()).expect("gateway url");
    gateway::spawn(GatewayConfig::loopback(
        url,
        token(em),
        gateway::intents(false),
    ))
}

/// A reader of the emulator's `GET /gateway/bot`, its REST host admitted as an exact local road.
pub fn session_limit_reader(em: &Emulator) -> SessionLimitReader<StaticResolver> {
    let host = Host::Name(REST_HOST.to_owned());
    let policy = AdmissionPolicy::default().with_local_road(host, em.rest_addr());
    let resolver = StaticResolver::new().with(REST_HOST, [em.rest_addr().ip()]);
    SessionLimitReader::new(
        &format!("{}/gateway/bot", em.rest_base_url()),
        token(em),
        Arc::new(Admission::new(policy, resolver)),
        PinnedConnector::new(em.root_store(), TcpDialer),
    )
    .expect("session limit reader")
}

/// A gateway client that budgets its IDENTIFYs by the emulator's `session_start_limit`, as
/// ingress-edge's does.
pub fn budgeted_gateway(em: &Emulator) -> (GatewayHandle, mpsc::Receiver<GatewayEvent>) {
    let url = GatewayUrl::parse(&em.gateway_url()).expect("gateway url");
    let mut config = GatewayConfig::loopback(url, token(em), gateway::intents(false));
    config.session_limit = Some(session_limit_reader(em));
    gateway::spawn(config)
}

/// An emulator whose session start limit is `total` per `window`.
pub async fn limited_emulator(total: u32, window: Duration) -> Emulator {
    Emulator::start(EmulatorConfig {
        session_start_limit: reach_discord_emulator::SessionStartLimit {
            total,
            window,
            max_concurrency: 1,
        },
        ..EmulatorConfig::default()
    })
    .await
    .expect("start emulator")
}

/// The next event matching `pred`, skipping others.
pub async fn next_matching(
    rx: &mut mpsc::Receiver<GatewayEvent>,
    what: &str,
    pred: impl Fn(&GatewayEvent) -> bool,
) -> GatewayEvent {
    let work = async {
        loop {
            match rx.recv().await {
                Some(e) if pred(&e) => return e,
                Some(_) => continue,
                None => panic!("gateway channel closed while waiting for {what}"),
            }
        }
    };
    tokio::time::timeout(WAIT, work)
        .await
        .unwrap_or_else(|_| panic!("no {what} within {WAIT:?}"))
}

pub async fn ready(rx: &mut mpsc::Receiver<GatewayEvent>) -> GatewayEvent {
    next_matching(rx, "READY", |e| matches!(e, GatewayEvent::Ready { .. })).await
}

/// Poll `cond` until it holds (bounded by [`WAIT`]).
pub async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let work = async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(WAIT, work)
        .await
        .unwrap_or_else(|_| panic!("{what} did not happen within {WAIT:?}"));
}

pub fn rest(em: &Emulator) -> RestClient<StaticResolver, RecordingDialer> {
    rest_with_base(em, &em.rest_base_url()).expect("rest client")
}

/// The adapter [`rest`] builds, with `base_url` in place of the emulator's own.
pub fn rest_with_base(
    em: &Emulator,
    base_url: &str,
) -> Result<RestClient<StaticResolver, RecordingDialer>, RestError> {
    let host = Host::Name(REST_HOST.to_owned());
    let policy = AdmissionPolicy::default().with_local_road(host, em.rest_addr());
    let resolver = StaticResolver::new().with(REST_HOST, [em.rest_addr().ip()]);
    let admission = Arc::new(Admission::new(policy, resolver));
    let connector = PinnedConnector::new(em.root_store(), RecordingDialer::new());
    RestClient::new(RestConfig {
        base_url: base_url.to_owned(),
        token: token(em),
        bot_user_id: Snowflake(em.config().bot_user_id),
        admission,
        connector,
    })
}

/// A read gate that admits every read (a test's stand-in for ward's redeemed decisions).
pub struct OpenGate;

impl reach_discord::rest::ReadGate for OpenGate {
    async fn admit(&mut self, _url: &str, _after: Snowflake) -> Result<(), String> {
        Ok(())
    }
}
