//! The emulator's Gateway held to Discord's documented contract with a bare WebSocket client
//! (not Reach's): null `s`/`t` on frames that are not dispatches, 4005 for a second IDENTIFY,
//! 4007 for a RESUME past the session's sequence (and the session gone after it), and a RESUME
//! at the right sequence replaying nothing it already sent.

mod common;

use common::*;
use reach_discord_emulator::{Emulator, EmulatorConfig, User};
use serde_json::json;

#[tokio::test]
async fn the_gateway_speaks_discords_contract() {
    let em = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let (main, resume_addr) = em.gateway_addrs();

    let mut ws = connect(main).await;
    let hello = next(&mut ws).await.unwrap();
    assert_eq!(hello["op"], 10);
    assert!(hello["s"].is_null() && hello["t"].is_null(), "{hello}");
    assert!(
        hello.as_object().unwrap().contains_key("s"),
        "s is present, null: {hello}"
    );
    send(&mut ws, identify(&em, 1 << 9 | 1 << 15)).await;
    let ready = until_dispatch(&mut ws, "READY").await.pop().unwrap();
    assert_eq!(ready["op"], 0);
    assert_eq!(ready["s"], 1);
    let session = ready["d"]["session_id"].as_str().unwrap().to_owned();
    send(&mut ws, json!({"op": 1, "d": 1})).await;
    let ack = next(&mut ws).await.unwrap();
    assert_eq!(ack["op"], 11);
    assert!(ack["s"].is_null() && ack["t"].is_null(), "{ack}");
    let bot = em.config().bot_user_id;
    em.post_user_message(
        1_100_000_000_000_000_900,
        &User::human(42, "ada"),
        &format!("<@{bot}> hi"),
    );
    let created = until_dispatch(&mut ws, "MESSAGE_CREATE")
        .await
        .pop()
        .unwrap();
    assert_eq!(created["s"], 2);
    // One session per connection.
    send(&mut ws, identify(&em, 1 << 9 | 1 << 15)).await;
    assert_eq!(next(&mut ws).await, Err(4005));

    // RESUME at the sequence reached replays nothing already seen and says RESUMED.
    let mut ws = connect(resume_addr).await;
    next(&mut ws).await.unwrap();
    let resume = |seq: u64| json!({"op": 6, "d": {"token": em.config().token, "session_id": session, "seq": seq}});
    send(&mut ws, resume(2)).await;
    let frames = until_dispatch(&mut ws, "RESUMED").await;
    assert_eq!(frames.len(), 1, "nothing replayed: {frames:?}");
    drop(ws);

    // RESUME past the sequence the session reached: 4007, and the session is gone.
    let mut ws = connect(resume_addr).await;
    next(&mut ws).await.unwrap();
    send(&mut ws, resume(99)).await;
    assert_eq!(next(&mut ws).await, Err(4007));
    let mut ws = connect(resume_addr).await;
    next(&mut ws).await.unwrap();
    send(&mut ws, resume(2)).await;
    let invalid = next(&mut ws).await.unwrap();
    assert_eq!(invalid["op"], 9, "{invalid}");
    assert_eq!(invalid["d"], false);
    assert!(invalid["s"].is_null() && invalid["t"].is_null());
}

/// REST as Discord answers it: a client names itself in its User-Agent, a body is read only
/// under a JSON (or form) Content-Type, and a channel that does not exist is 404 10003, for a
/// write or a read.
#[tokio::test]
async fn rest_refuses_unnamed_clients_untyped_bodies_and_unknown_channels() {
    let em = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let channel = 1_100_000_000_000_000_960u64;
    let unknown = 1_100_000_000_000_000_961u64;
    em.add_channel(channel, Some(em.config().default_guild_id));
    let body = json!({"content": "hello", "allowed_mentions": {"parse": []}});
    let path = |c: u64| format!("/api/v10/channels/{c}/messages");
    let (status, out) = https_typed(&em, "POST", &path(channel), true, Some(&body), None).await;
    let out: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!((status, out["code"].as_u64()), (400, Some(50109)));
    let (status, out) = https_typed(
        &em,
        "POST",
        &path(channel),
        true,
        Some(&body),
        Some("text/plain"),
    )
    .await;
    let out: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!((status, out["code"].as_u64()), (400, Some(50109)));
    assert!(em.bot_messages(channel).is_empty(), "nothing created");
    let (status, _) = https(&em, "POST", &path(channel), true, Some(&body)).await;
    assert_eq!(status, 200);
    // Every HTTP API client names itself: `DiscordBot ($url, $version)`.
    for agent in [None, Some("curl/8.0")] {
        let (status, _) = https_agent(&em, &path(channel), agent).await;
        assert_eq!(status, 400, "{agent:?}");
    }
    let named = https_agent(&em, &path(channel), Some("DiscordBot (x, 1)")).await;
    assert_eq!(named.0, 200);
    for method in ["POST", "GET"] {
        let (status, out) = https(&em, method, &path(unknown), true, Some(&body)).await;
        let out: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            (status, out["code"].as_u64()),
            (404, Some(10003)),
            "{method}"
        );
    }
}
