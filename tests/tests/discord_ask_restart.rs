//! A core restart between an `/ask`'s deferred acknowledgement and its answer's claim, with all
//! eight roles as processes: core knows the acknowledgement in memory until then, so after the
//! restart it must learn it from the ledger (the acknowledgement's decision is on the run) and
//! bind the answer to an edit of `@original`. A type-4 callback instead would be refused
//! (40060, already acknowledged) and leave the user with "thinking…" and no answer.

use std::time::Duration;

use reach_discord::delivery::FLAG_LOADING;
use reach_discord_emulator::User;
use reach_model_emulator::{ModelEmulator, Script};
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
