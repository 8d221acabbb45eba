//! A core restart between an `/ask`'s deferred acknowledgement and its answer's claim, with all
//! eight roles as processes: core knows the acknowledgement in memory until then, so after the
//! restart it must learn it from the ledger (the acknowledgement's decision is on the run) and
//! bind the answer to an edit of `@original`. A type-4 callback instead would be refused
//! (40060, already acknowledged) and leave the user with "thinking…" and no answer.

use std::time::Duration;

use reach_discord::delivery::FLAG_LOADING;
use reach_discord_emulator::{Fault, User};
use reach_model_emulator::{ModelEmulator, Script};
use reach_proto::core::v1::ListUnknownRequest;
use reach_proto::core::v1::delivery_client::DeliveryClient;
use reach_tests::{callback_types, eventually, start_deferring, trail_until};

const CHANNEL: u64 = 1_100_000_000_000_000_320;
const WAIT: Duration = Duration::from_secs(30);
const WINDOW: Duration = Duration::from_millis(2_000);
const BUDGET_MS: i64 = 800;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_claimed_after_a_core_restart_still_edits_the_acknowledged_original() {
    let model = ModelEmulator::start().await.expect("model emulator");
    let (mut body, em) = start_deferring(CHANNEL, &model, BUDGET_MS, WINDOW, |_| {}).await;
    let mut operator = body.operator_after_genesis("ask across a restart").await;
    let asker = User::human(1_100_000_000_000_000_620, "asker");

    // Slow enough to be acknowledged first.
    model.script(Script::Slow(WINDOW + Duration::from_millis(800)));
    let i1 = em.post_interaction(
        CHANNEL,
        &asker,
        "ask",
        "How does a port authenticate a call?",
    );
    eventually(WAIT, "the deferred acknowledgement", || {
        (callback_types(&em, i1) == [5]).then_some(())
    })
    .await;

    // No gate while the answer commits: its intent waits PENDING. Then core restarts and forgets
    // what it knew in memory.
    let running = body.body.as_mut().expect("running");
    running
        .kill_role("egress-discord")
        .await
        .expect("egress-discord was running");
    trail_until(&mut operator, &i1.to_string(), "SUCCEEDED", WAIT).await;
    let running = body.body.as_mut().expect("running");
    running.kill_role("core").await.expect("core was running");
    running.start_role("core").await.expect("core restarts");
    running
        .start_role("egress-discord")
        .await
        .expect("egress-discord restarts");

    let trail = trail_until(&mut operator, &i1.to_string(), "KNOWN_SENT", WAIT).await;
    assert_eq!(
        callback_types(&em, i1),
        vec![5],
        "no type-4 callback after the acknowledgement:\n{trail}"
    );
    let edits = em
        .edit_requests()
        .into_iter()
        .filter(|e| e.interaction_id == Some(i1))
        .count();
    assert_eq!(edits, 1, "the answer is one edit of the original");
    let mine: Vec<_> = em
        .bot_messages(CHANNEL)
        .into_iter()
        .filter(|m| m.interaction_id == Some(i1))
        .collect();
    assert_eq!(mine.len(), 1, "one message for the interaction: {mine:?}");
    assert_eq!(mine[0].flags & FLAG_LOADING, 0, "no longer 'thinking'");
    assert!(
        mine[0]
            .content
            .contains("<https://reach.invalid/reach/blob/"),
        "{}",
        mine[0].content
    );
    assert!(
        em.create_requests().is_empty(),
        "{:?}",
        em.create_requests()
    );
}

/// An acknowledged `/ask` whose answer edit of `@original` Discord commits but whose answer is
/// lost while reads are down: UNKNOWN. The gate that knew it dies, and a restarted gate knows
/// only what core's ListUnknown says. It must say, from the ledger, that this intent *edits* the
/// acknowledged original (the acknowledgement's decision is on the run): `@original` exists from
/// the acknowledgement on, so a gate that took the intent for a type-4 callback would count the
/// "thinking…" message as the answer. The restarted gate then finds the edit by reading
/// `@original`, and the edit is never sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_answer_edit_is_listed_as_an_edit_and_found_after_the_gate_restarts() {
    let channel = 1_100_000_000_000_000_321;
    let model = ModelEmulator::start().await.expect("model emulator");
    let (mut body, em) = start_deferring(channel, &model, BUDGET_MS, WINDOW, |_| {}).await;
    let mut operator = body.operator_after_genesis("unknown edit drill").await;
    let asker = User::human(1_100_000_000_000_000_621, "asker");

    model.script(Script::Slow(WINDOW + Duration::from_millis(800)));
    em.fail_reads(true);
    em.script_next_edit(Fault::CommitThenDrop);
    let i1 = em.post_interaction(
        channel,
        &asker,
        "ask",
        "How does a port authenticate a call?",
    );
    let trail = trail_until(&mut operator, &i1.to_string(), "outcome=UNKNOWN", WAIT).await;
    assert!(!trail.contains("KNOWN_SENT"), "{trail}");
    assert_eq!(callback_types(&em, i1), vec![5], "acknowledged first");

    let running = body.body.as_mut().expect("running");
    running
        .kill_role("egress-discord")
        .await
        .expect("egress-discord was running");

    // What a restarted gate learns, asked as the gate.
    let mut gate = DeliveryClient::new(reach_port::connect_lazy(
        body.socket("core.delivery"),
        &body.material("egress-discord"),
        body.manifest.principal("core"),
    ));
    let listed = gate
        .list_unknown(ListUnknownRequest {})
        .await
        .expect("ListUnknown")
        .into_inner()
        .intents;
    assert_eq!(listed.len(), 1, "one UNKNOWN intent");
    let u = &listed[0];
    assert_eq!(u.interaction_id, i1.to_string());
    assert!(
        u.interaction_deferred,
        "listed as an edit of @original: {u:?}"
    );
    assert!(
        !u.interaction_follow_up,
        "{} is not a follow-up",
        u.intent_id
    );
    assert!(
        !u.sealed_interaction_token.is_empty(),
        "the token stays sealed, not absent"
    );
    assert!(trail.contains(&format!("nonce={}", u.nonce)), "{trail}");
    assert_eq!(u.channel_id, channel.to_string());

    em.fail_reads(false);
    let reads_before = em.read_requests().len();
    let running = body.body.as_mut().expect("running");
    running
        .start_role("egress-discord")
        .await
        .expect("egress-discord restarts");
    let trail = trail_until(&mut operator, &i1.to_string(), "KNOWN_SENT", WAIT).await;
    assert!(trail.contains("MESSAGE_FOUND"), "{trail}");
    let original_reads = em.read_requests()[reads_before..]
        .iter()
        .filter(|r| r.channel_id == channel && r.query == "@original")
        .count();
    assert!(original_reads >= 1, "found by reading @original:\n{trail}");
    let edits = em
        .edit_requests()
        .into_iter()
        .filter(|e| e.interaction_id == Some(i1))
        .count();
    assert_eq!(
        edits, 1,
        "the edit was sent once and never resent:\n{trail}"
    );
    assert_eq!(
        callback_types(&em, i1),
        vec![5],
        "no callback after the acknowledgement"
    );
    let mine: Vec<_> = em
        .bot_messages(channel)
        .into_iter()
        .filter(|m| m.interaction_id == Some(i1))
        .collect();
    assert_eq!(mine.len(), 1, "one message for the interaction: {mine:?}");
    assert_eq!(
        mine[0].flags & FLAG_LOADING,
        0,
        "answered, no longer 'thinking'"
    );
    assert!(
        em.create_requests().is_empty(),
        "{:?}",
        em.create_requests()
    );
    body.stop().await;
}
