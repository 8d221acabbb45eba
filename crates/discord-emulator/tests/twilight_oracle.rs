//! twilight-model as an independent oracle of Discord's types: every Gateway payload and every
//! REST message object the emulator emits in an `/ask` and mention round trip must parse into
//! twilight's types. What fails to parse is a field the emulator leaves out or misspells — and
//! what Reach's tests could then not catch about real Discord.

mod common;

use common::*;
use reach_discord_emulator::{Emulator, EmulatorConfig, User};
use serde::de::DeserializeSeed;
use serde_json::{Value, json};
use twilight_model::channel::Message;
use twilight_model::gateway::event::GatewayEventDeserializer;

const GUILD_CHANNEL: u64 = 1_100_000_000_000_000_950;
const DM_CHANNEL: u64 = 1_100_000_000_000_000_951;

/// Every problem found, so one run shows them all.
#[derive(Default)]
struct Findings(Vec<String>);

impl Findings {
    fn frame(&mut self, text: &str) {
        let Some(seed) = GatewayEventDeserializer::from_json(text) else {
            self.0.push(format!("not a gateway frame: {text}"));
            return;
        };
        let what = format!(
            "op {} {:?}",
            seed.op(),
            seed.event_type().map(str::to_owned)
        );
        let mut de = serde_json::Deserializer::from_str(text);
        if let Err(e) = seed.deserialize(&mut de) {
            self.0.push(format!("{what}: {e}\n  {text}"));
        }
    }

    fn message(&mut self, what: &str, body: &[u8]) {
        if let Err(e) = serde_json::from_slice::<Message>(body) {
            self.0
                .push(format!("{what}: {e}\n  {}", String::from_utf8_lossy(body)));
        }
    }

    fn messages(&mut self, what: &str, body: &[u8]) {
        if let Err(e) = serde_json::from_slice::<Vec<Message>>(body) {
            self.0
                .push(format!("{what}: {e}\n  {}", String::from_utf8_lossy(body)));
        }
    }
}

/// Frames until the dispatch `t`, each checked.
async fn frames_until(ws: &mut Ws, t: &str, f: &mut Findings) {
    loop {
        let text = next_text(ws).await.expect("no close");
        f.frame(&text);
        let v: Value = serde_json::from_str(&text).unwrap();
        if v["t"] == t {
            return;
        }
    }
}

#[tokio::test]
async fn what_the_emulator_emits_parses_as_twilight_reads_discord() {
    let em = Emulator::start(EmulatorConfig::default()).await.unwrap();
    em.add_channel(DM_CHANNEL, None);
    let mut f = Findings::default();
    let app = em.config().application_id;
    let bot = em.config().bot_user_id;

    let mut ws = connect(em.gateway_addrs().0).await;
    let hello = next_text(&mut ws).await.unwrap();
    f.frame(&hello);
    send(&mut ws, identify(&em, 1 | 1 << 9 | 1 << 12 | 1 << 15)).await;
    frames_until(&mut ws, "READY", &mut f).await;
    send(&mut ws, json!({"op": 1, "d": 1})).await;
    f.frame(&next_text(&mut ws).await.unwrap());

    // A mention, a DM, and the bot's reply through REST.
    let ada = User::human(42, "ada");
    let q = em.post_user_message(GUILD_CHANNEL, &ada, &format!("<@{bot}> how do I deploy?"));
    frames_until(&mut ws, "MESSAGE_CREATE", &mut f).await;
    em.post_user_message(DM_CHANNEL, &ada, "a direct question");
    frames_until(&mut ws, "MESSAGE_CREATE", &mut f).await;
    let reply = json!({"content": "An answer.", "nonce": "n-oracle", "enforce_nonce": true,
        "allowed_mentions": {"parse": []}, "flags": 4,
        "message_reference": {"message_id": q.to_string(), "fail_if_not_exists": false}});
    let path = format!("/api/v10/channels/{GUILD_CHANNEL}/messages");
    let (status, body) = https(&em, "POST", &path, true, Some(&reply)).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    f.message("Create Message", &body);
    frames_until(&mut ws, "MESSAGE_CREATE", &mut f).await;
    let (status, body) = https(
        &em,
        "GET",
        &format!("{path}?after={q}&limit=100"),
        true,
        None,
    )
    .await;
    assert_eq!(status, 200);
    f.messages("Get Channel Messages", &body);

    // An `/ask`: INTERACTION_CREATE, the callback, `@original`, an edit and a follow-up.
    let i = em.post_interaction(GUILD_CHANNEL, &ada, "ask", "How do I deploy?");
    frames_until(&mut ws, "INTERACTION_CREATE", &mut f).await;
    let token = em.interaction_token(i);
    let callback = json!({"type": 4, "data": {"content": "The answer.", "flags": 4,
        "allowed_mentions": {"parse": []}}});
    let (status, body) = https(
        &em,
        "POST",
        &format!("/api/v10/interactions/{i}/{token}/callback?with_response=true"),
        false,
        Some(&callback),
    )
    .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let response: Value = serde_json::from_slice(&body).unwrap();
    // A command's response is Discord's: type 20, sent by the application's webhook.
    let message = &response["resource"]["message"];
    assert_eq!(message["type"], 20, "{message}");
    assert_eq!(message["webhook_id"], app.to_string(), "{message}");
    f.message(
        "callback with_response: resource.message",
        response["resource"]["message"].to_string().as_bytes(),
    );
    frames_until(&mut ws, "MESSAGE_CREATE", &mut f).await;
    let original = format!("/api/v10/webhooks/{app}/{token}/messages/@original");
    let (status, body) = https(&em, "GET", &original, false, None).await;
    assert_eq!(status, 200);
    f.message("Get Original Interaction Response", &body);
    let edit = json!({"content": "The answer, edited.", "allowed_mentions": {"parse": []}});
    let (status, body) = https(&em, "PATCH", &original, false, Some(&edit)).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    f.message("Edit Original Interaction Response", &body);
    frames_until(&mut ws, "MESSAGE_UPDATE", &mut f).await;
    let follow = json!({"content": "More.", "allowed_mentions": {"parse": []}, "flags": 4});
    let (status, body) = https(
        &em,
        "POST",
        &format!("/api/v10/webhooks/{app}/{token}?wait=true"),
        false,
        Some(&follow),
    )
    .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    f.message("Execute Webhook (follow-up)", &body);
    frames_until(&mut ws, "MESSAGE_CREATE", &mut f).await;

    // A deletion, then the session's other frames: RECONNECT, INVALID_SESSION.
    assert!(em.delete_message(GUILD_CHANNEL, q));
    frames_until(&mut ws, "MESSAGE_DELETE", &mut f).await;
    assert!(em.force_reconnect());
    f.frame(&next_text(&mut ws).await.unwrap());
    assert!(em.invalidate_session());
    f.frame(&next_text(&mut ws).await.unwrap());

    assert!(
        f.0.is_empty(),
        "{} payloads twilight cannot read:\n{}",
        f.0.len(),
        f.0.join("\n")
    );
}
