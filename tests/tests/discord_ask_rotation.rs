//! Rotation of the interaction-seal key, with all eight roles as processes. Scribe mints a new
//! pair and keeps the old private key as the previous one; egress-discord (restarted) opens an
//! interaction token that ingress-edge (not restarted) still seals to the old key while the
//! grace window runs, and refuses it with a typed code once the window is over: the intent then
//! settles NOT_ATTEMPTED with that code, and nothing is sent or resent for it.

use std::time::{Duration, SystemTime};

use reach_discord_emulator::User;
use reach_tests::{TestBody, trail_until};

const CHANNEL: u64 = 1_100_000_000_000_000_320;
const WAIT: Duration = Duration::from_secs(30);

fn callbacks_for(em: &reach_discord_emulator::Emulator, interaction: u64) -> usize {
    em.callback_requests()
        .iter()
        .filter(|c| c.interaction_id == interaction)
        .count()
}

async fn restart_egress(body: &mut TestBody) {
    let running = body.body.as_mut().expect("running");
    running
        .kill_role("egress-discord")
        .await
        .expect("egress-discord was running");
    running
        .start_role("egress-discord")
        .await
        .expect("egress-discord restarts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_seal_key_opens_for_its_grace_window_then_is_refused_typed() {
    let (mut body, em) = TestBody::start_with_discord(CHANNEL).await;
    let mut operator = body.operator_after_genesis("seal rotation").await;
    let asker = User::human(1_100_000_000_000_000_620, "asker");
    let private = body
        .layout
        .secret_dir("egress-discord")
        .join("interaction-seal-key");
    let first = std::fs::read(&private).expect("the ring Scribe minted");

    // The first key retired an hour ago (past the grace window): ingress-edge still seals to
    // it, egress-discord refuses it with its code, and the intent ends NOT_ATTEMPTED.
    let an_hour_ago = SystemTime::now() - Duration::from_secs(3_600);
    reach_scribe::identities::rotate_interaction_seal(&body.manifest, &body.layout, an_hour_ago)
        .expect("rotation");
    restart_egress(&mut body).await;
    let i1 = em.post_interaction(
        CHANNEL,
        &asker,
        "ask",
        "How does a port authenticate a call?",
    );
    let trail = trail_until(&mut operator, &i1.to_string(), "NOT_ATTEMPTED", WAIT).await;
    assert!(trail.contains("seal/retired-key"), "{trail}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(callbacks_for(&em, i1), 0, "nothing is sent for it");
    assert!(em.bot_messages(CHANNEL).is_empty());

    // The same first key, retired now: inside the grace window it still opens, and the
    // interaction is answered once.
    std::fs::write(&private, &first).expect("restore the first ring");
    reach_scribe::identities::rotate_interaction_seal(
        &body.manifest,
        &body.layout,
        SystemTime::now(),
    )
    .expect("rotation");
    restart_egress(&mut body).await;
    let i2 = em.post_interaction(CHANNEL, &asker, "ask", "How do I rotate the trust root?");
    trail_until(&mut operator, &i2.to_string(), "KNOWN_SENT", WAIT).await;
    assert_eq!(callbacks_for(&em, i2), 1);
    assert_eq!(callbacks_for(&em, i1), 0, "the refused one is never resent");
    println!("{trail}");
    body.stop().await;
}
