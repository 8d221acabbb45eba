//! An UNKNOWN delivery outlives the gate that lost its outcome: egress-discord is killed while
//! Discord's reads are down, and the restarted gate reads the UNKNOWN intent back from core and
//! reconciles it from a channel read. The reply exists exactly once and is never resent.

use std::time::Duration;

use reach_discord_emulator::{Fault, User};
use reach_tests::{TestBody, trail_until};

const CHANNEL: u64 = 1_100_000_000_000_000_300;
const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_delivery_is_reconciled_after_the_gate_restarts() {
    let (mut body, em) = TestBody::start_with_discord(CHANNEL).await;
    let mut operator = body.operator_after_genesis("gate restart drill").await;
    let bot = em.config().bot_user_id;
    let asker = User::human(1_100_000_000_000_000_600, "asker");

    // Discord commits the reply but the answer is lost, and reads are down: UNKNOWN, unprovable.
    em.fail_reads(true);
    em.script_next_create(Fault::CommitThenDrop);
    let q = em.post_user_message(
        CHANNEL,
        &asker,
        &format!("<@{bot}> How does a port authenticate a call?"),
    );
    let trail = trail_until(&mut operator, &q.to_string(), "outcome=UNKNOWN", WAIT).await;
    assert!(!trail.contains("KNOWN_SENT"), "{trail}");

    // The gate dies holding the only in-memory memory of that UNKNOWN; reads come back.
    let running = body.body.as_mut().unwrap();
    running
        .kill_role("egress-discord")
        .await
        .expect("egress-discord was running");
    em.fail_reads(false);
    running
        .start_role("egress-discord")
        .await
        .expect("egress-discord restarts");

    let trail = trail_until(&mut operator, &q.to_string(), "KNOWN_SENT", WAIT).await;
    let replies = em
        .bot_messages(CHANNEL)
        .into_iter()
        .filter(|m| m.reply_to == Some(q))
        .count();
    assert_eq!(replies, 1, "the reply exists once and was never resent");
    let creates = em
        .create_requests()
        .into_iter()
        .filter(|c| c.channel_id == CHANNEL)
        .count();
    assert_eq!(creates, 1, "exactly one Create Message was ever sent");
    println!("{trail}");
    body.stop().await;
}
