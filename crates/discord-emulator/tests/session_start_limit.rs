//! The emulator's session start limit, held to what Discord documents, with a bare client (not
//! Reach's): `GET /gateway/bot` requires the bot token and reports `session_start_limit`; each
//! IDENTIFY spends one; `remaining` is back to `total` once the window passes; and an IDENTIFY
//! when none remains terminates the bot's sessions and resets its token (Gateway docs,
//! "Identifying": "all active sessions for the bot will be terminated, the bot's token will be
//! reset"), after which the token is refused by the Gateway (4004) and REST (401).

mod common;

use std::time::Duration;

use common::*;
use reach_discord_emulator::{Emulator, EmulatorConfig, SessionStartLimit};
use serde_json::Value;

const GATEWAY_BOT: &str = "/api/v10/gateway/bot";

async fn emulator(total: u32, window: Duration) -> Emulator {
    Emulator::start(EmulatorConfig {
        session_start_limit: SessionStartLimit {
            total,
            window,
            max_concurrency: 1,
        },
        ..EmulatorConfig::default()
    })
    .await
    .unwrap()
}

async fn gateway_bot(em: &Emulator) -> Value {
    let (status, body) = https(em, "GET", GATEWAY_BOT, true, None).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    // twilight-model reads it as Discord's Get Gateway Bot answer.
    serde_json::from_slice::<twilight_model::gateway::connection_info::BotConnectionInfo>(&body)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&body)));
    serde_json::from_slice(&body).unwrap()
}

/// One connection that identifies: READY's session id, and the connection (kept open).
async fn identify_once(em: &Emulator) -> (Ws, Result<Value, u16>) {
    let mut ws = connect(em.gateway_addrs().0).await;
    next(&mut ws).await.unwrap();
    send(&mut ws, identify(em, 1 << 9)).await;
    let first = next(&mut ws).await;
    (ws, first)
}

#[tokio::test]
async fn identifies_spend_the_limit_and_one_past_it_resets_the_token() {
    let window = Duration::from_secs(3600);
    let em = emulator(2, window).await;

    // The bot token is required.
    let (status, _) = https(&em, "GET", GATEWAY_BOT, false, None).await;
    assert_eq!(status, 401);
    let fresh = gateway_bot(&em).await;
    assert_eq!(fresh["url"], em.gateway_url());
    assert_eq!(fresh["shards"], 1);
    let limit = &fresh["session_start_limit"];
    assert_eq!(limit["total"], 2);
    assert_eq!(limit["remaining"], 2);
    assert_eq!(limit["max_concurrency"], 1);
    assert_eq!(limit["reset_after"], window.as_millis() as u64);

    // Each IDENTIFY spends one.
    let (_first, ready) = identify_once(&em).await;
    assert_eq!(ready.unwrap()["t"], "READY");
    let limit = gateway_bot(&em).await["session_start_limit"].clone();
    assert_eq!(limit["remaining"], 1);
    assert!(limit["reset_after"].as_u64().unwrap() <= window.as_millis() as u64);
    let (mut live, ready) = identify_once(&em).await;
    assert_eq!(ready.unwrap()["t"], "READY");
    assert_eq!(em.session_starts_left().0, 0);

    // One more: refused, the live session terminated, the token reset everywhere.
    let (_, refused) = identify_once(&em).await;
    assert_eq!(refused, Err(4004));
    loop {
        match next(&mut live).await {
            Ok(_) => continue,
            Err(code) => {
                assert_eq!(code, 4004, "the live session is terminated");
                break;
            }
        }
    }
    assert!(em.token_was_reset());
    let counts = em.gateway_counts();
    assert_eq!((counts.identifies, counts.session_start_refusals), (2, 1));
    let (status, _) = https(&em, "GET", GATEWAY_BOT, true, None).await;
    assert_eq!(status, 401, "the reset token is refused by REST");
    let (_, again) = identify_once(&em).await;
    assert_eq!(again, Err(4004), "and by the Gateway");
}

#[tokio::test]
async fn the_limit_resets_after_its_window() {
    let window = Duration::from_millis(300);
    let em = emulator(1, window).await;
    let (_ws, ready) = identify_once(&em).await;
    assert_eq!(ready.unwrap()["t"], "READY");
    let spent = gateway_bot(&em).await["session_start_limit"].clone();
    assert_eq!(spent["remaining"], 0);
    let reset_after = Duration::from_millis(spent["reset_after"].as_u64().unwrap());
    assert!(reset_after <= window, "{reset_after:?}");
    // Waiting out `reset_after` (rounded up to the millisecond) is never too early.
    tokio::time::sleep(reset_after).await;
    let limit = gateway_bot(&em).await["session_start_limit"].clone();
    assert_eq!(limit["remaining"], 1);
    let (_ws, ready) = identify_once(&em).await;
    assert_eq!(ready.unwrap()["t"], "READY");
    assert_eq!(em.gateway_counts().session_start_refusals, 0);
}
