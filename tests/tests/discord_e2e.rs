//! One public Discord question end to end: the emulator dispatches MESSAGE_CREATE, ingress-edge
//! admits it into core, core grounds and answers it, egress-discord posts exactly one reply with
//! commit-pinned citations; redelivery, non-admitted channels and a lost Create Message outcome
//! never produce a second reply.

use std::time::{Duration, Instant};

use reach_discord_emulator::{Fault, User};
use reach_tests::{TestBody, trail_until};

const CHANNEL: u64 = 1_100_000_000_000_000_200;
const OTHER_CHANNEL: u64 = 1_100_000_000_000_000_999;
/// A bound on waiting for an effect, so a failure is a clear message rather than a hang.
const WAIT: Duration = Duration::from_secs(30);

async fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "{what} did not happen within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_question_one_cited_reply_and_no_duplicates() {
    let (body, em) = TestBody::start_with_discord(CHANNEL).await;
    em.add_channel(OTHER_CHANNEL, Some(em.config().default_guild_id));
    let mut operator = body.operator_after_genesis("emulated deployment").await;
    let bot = em.config().bot_user_id;
    let asker = User::human(1_100_000_000_000_000_500, "asker");

    // A question in a non-admitted channel first: it must never be answered.
    em.post_user_message(
        OTHER_CHANNEL,
        &asker,
        &format!("<@{bot}> How does a port authenticate a call?"),
    );

    // One public question -> exactly one reply, replying to it, with commit-pinned citations.
    let q1 = em.post_user_message(
        CHANNEL,
        &asker,
        &format!("<@{bot}> How does a port authenticate a call?"),
    );
    let reply = eventually("the reply", || {
        em.bot_messages(CHANNEL)
            .into_iter()
            .find(|m| m.reply_to == Some(q1))
    })
    .await;
    assert!(
        reply.content.contains("<https://reach.invalid/reach/blob/"),
        "{}",
        reply.content
    );
    assert!(
        reply
            .nonce
            .as_deref()
            .is_some_and(|n| !n.is_empty() && n.len() <= 25)
    );
    assert!(reply.mentions.is_empty(), "the bot never pings anyone");

    // The same MESSAGE_CREATE redelivered after a resume: still one reply.
    em.script_redelivery_on_resume(3);
    assert!(em.drop_connection());
    // A later question in the same channel marks when the redelivery has been processed.
    let q2 = em.post_user_message(
        CHANNEL,
        &asker,
        &format!("<@{bot}> How do I rotate the trust root?"),
    );
    eventually("the second reply", || {
        em.bot_messages(CHANNEL)
            .into_iter()
            .find(|m| m.reply_to == Some(q2))
    })
    .await;
    let to_q1 = em
        .bot_messages(CHANNEL)
        .into_iter()
        .filter(|m| m.reply_to == Some(q1))
        .count();
    assert_eq!(
        to_q1, 1,
        "a redelivered event must not produce a second reply"
    );

    // The emulator commits the message, then drops the connection: UNKNOWN, never resent, and
    // reconciled from the channel read that finds our nonce.
    em.script_next_create(Fault::CommitThenDrop);
    let q3 = em.post_user_message(
        CHANNEL,
        &asker,
        &format!("<@{bot}> What happens when a vault is lost?"),
    );
    eventually("the committed reply", || {
        em.bot_messages(CHANNEL)
            .into_iter()
            .find(|m| m.reply_to == Some(q3))
    })
    .await;
    let trail = trail_until(&mut operator, &q3.to_string(), "KNOWN_SENT", WAIT).await;
    assert!(
        trail.contains("KNOWN_SENT"),
        "the unknown delivery must be reconciled as sent:\n{trail}"
    );
    assert_eq!(
        em.bot_messages(CHANNEL)
            .into_iter()
            .filter(|m| m.reply_to == Some(q3))
            .count(),
        1
    );

    // Nothing was ever posted in the non-admitted channel.
    assert!(em.bot_messages(OTHER_CHANNEL).is_empty());
    println!("{trail}");
    body.stop().await;
}

/// TLS on both sides, as with Discord itself: the gateway is `wss://` and every connection to
/// it, the resume URL from READY included, passes destination admission on exact local roads
/// and trusts only the configured CA.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_over_wss_identifies_resumes_and_answers_once() {
    let config = reach_discord_emulator::EmulatorConfig {
        gateway_tls: true,
        ..Default::default()
    };
    let (body, em) = TestBody::start_with_emulator(config, &[CHANNEL], |_| {}, "info").await;
    assert!(em.gateway_url().starts_with("wss://"));
    let mut operator = body
        .operator_after_genesis("emulated deployment over wss")
        .await;
    let bot = em.config().bot_user_id;
    let asker = User::human(1_100_000_000_000_000_501, "asker");
    let q1 = em.post_user_message(
        CHANNEL,
        &asker,
        &format!("<@{bot}> How does a port authenticate a call?"),
    );
    eventually("the reply over wss", || {
        em.bot_messages(CHANNEL)
            .into_iter()
            .find(|m| m.reply_to == Some(q1))
    })
    .await;
    trail_until(&mut operator, &q1.to_string(), "KNOWN_SENT", WAIT).await;

    // Drop the connection: the client resumes at READY's wss:// resume URL (its own road).
    em.script_redelivery_on_resume(1);
    assert!(em.drop_connection());
    let q2 = em.post_user_message(
        CHANNEL,
        &asker,
        &format!("<@{bot}> How do I rotate the trust root?"),
    );
    eventually("the reply after the resume", || {
        em.bot_messages(CHANNEL)
            .into_iter()
            .find(|m| m.reply_to == Some(q2))
    })
    .await;
    let counts = em.gateway_counts();
    assert!(
        counts.resume_connections >= 1 && counts.resumes >= 1,
        "{counts:?}"
    );
    // Before it identified, ingress-edge read Discord's session start limit (its one REST
    // request, on its own road), and spent only what it identified.
    let gateway_bot: Vec<u16> = em
        .responses()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path == "/api/v10/gateway/bot")
        .map(|r| r.status)
        .collect();
    assert!(
        !gateway_bot.is_empty() && gateway_bot.iter().all(|s| *s == 200),
        "{gateway_bot:?}"
    );
    assert_eq!(
        u64::from(em.session_starts_left().0),
        1_000 - counts.identifies
    );
    let to_q1 = em
        .bot_messages(CHANNEL)
        .into_iter()
        .filter(|m| m.reply_to == Some(q1))
        .count();
    assert_eq!(to_q1, 1, "a resumed redelivery must not answer twice");
    body.stop().await;
}
