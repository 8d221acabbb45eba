//! A slow `/ask` answer, with all eight roles as processes: Discord takes an interaction's first
//! response within a short window (3 s; shortened here through the emulator's script, with
//! core's budget shortened to match), so core hands egress-discord a deferred acknowledgement
//! (type 5, under its own decision, recorded on the run) when the answer is not committed
//! within its budget, and the answer then edits the interaction's original response — one
//! message, never a second callback. A fast answer is still one type-4 callback.

use std::time::Duration;

use reach_discord::delivery::FLAG_LOADING;
use reach_discord_emulator::{EarlyOriginal, Fault, User};
use reach_model_emulator::{ModelEmulator, Script};
use reach_tests::{callback_types, eventually, start_deferring, trail_until};

const CHANNEL: u64 = 1_100_000_000_000_000_310;
const WAIT: Duration = Duration::from_secs(30);
/// The emulator's response window and core's budget in this test.
const WINDOW: Duration = Duration::from_millis(2_000);
const BUDGET_MS: i64 = 800;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_ask_is_acknowledged_then_answered_by_editing_its_original() {
    let model = ModelEmulator::start().await.expect("model emulator");
    let (body, em) = start_deferring(CHANNEL, &model, BUDGET_MS, WINDOW, |_| {}).await;
    let mut operator = body.operator_after_genesis("deferred ask").await;
    let asker = User::human(1_100_000_000_000_000_610, "asker");

    // The model takes longer than the window: without an acknowledgement the answer would be
    // refused (10062) and lost.
    model.script(Script::Slow(WINDOW + Duration::from_millis(800)));
    let i1 = em.post_interaction(
        CHANNEL,
        &asker,
        "ask",
        "How does a port authenticate a call?",
    );
    let trail = trail_until(&mut operator, &i1.to_string(), "KNOWN_SENT", WAIT).await;
    assert_eq!(
        callback_types(&em, i1),
        vec![5],
        "one deferred acknowledgement, never a type-4 callback after it"
    );
    let edits: Vec<_> = em
        .edit_requests()
        .into_iter()
        .filter(|e| e.interaction_id == Some(i1))
        .collect();
    assert_eq!(edits.len(), 1, "the answer is one edit: {edits:?}");
    assert!(!edits[0].authorization_sent, "an edit needs no bot token");
    let mine: Vec<_> = em
        .bot_messages(CHANNEL)
        .into_iter()
        .filter(|m| m.interaction_id == Some(i1))
        .collect();
    assert_eq!(mine.len(), 1, "one message for the interaction: {mine:?}");
    assert!(
        mine[0]
            .content
            .contains("<https://reach.invalid/reach/blob/"),
        "{}",
        mine[0].content
    );
    assert_eq!(mine[0].flags & FLAG_LOADING, 0, "no longer 'thinking'");
    assert!(mine[0].mentions.is_empty());
    assert!(
        em.create_requests().is_empty(),
        "{:?}",
        em.create_requests()
    );
    // Both decisions are on the run, each bound to a token-free destination: the
    // acknowledgement's callback and the answer's `@original`.
    let token_free = format!("{{token:{i1}}}");
    assert!(
        trail.contains(&format!("/interactions/{i1}/{token_free}/callback")),
        "{trail}"
    );
    assert!(
        trail.contains(&format!("/{token_free}/messages/@original")),
        "{trail}"
    );
    assert!(!trail.contains(&em.interaction_token(i1)), "{trail}");

    // A fast answer is not deferred: one type-4 callback, no edit.
    let i2 = em.post_interaction(CHANNEL, &asker, "ask", "How do I rotate the trust root?");
    trail_until(&mut operator, &i2.to_string(), "KNOWN_SENT", WAIT).await;
    eventually(WAIT, "the fast reply", || {
        em.bot_messages(CHANNEL)
            .into_iter()
            .find(|m| m.interaction_id == Some(i2))
    })
    .await;
    assert_eq!(callback_types(&em, i2), vec![4]);
    assert!(
        !em.edit_requests()
            .iter()
            .any(|e| e.interaction_id == Some(i2))
    );

    // An edit that overtakes its acknowledgement (Discord slow to commit the type 5) finds no
    // original yet — 10015, what libraries report Discord answers, or 10008 — and is tried
    // again until the acknowledgement lands: one message, edited, under either answer.
    for early in [EarlyOriginal::UnknownWebhook, EarlyOriginal::UnknownMessage] {
        em.set_early_original(early);
        em.script_next_callback(Fault::LandLate {
            after: Duration::from_millis(2_500),
        });
        model.script(Script::Slow(WINDOW + Duration::from_millis(800)));
        let i = em.post_interaction(CHANNEL, &asker, "ask", "How is a lost answer found again?");
        trail_until(&mut operator, &i.to_string(), "KNOWN_SENT", WAIT).await;
        let edits = em
            .edit_requests()
            .iter()
            .filter(|e| e.interaction_id == Some(i))
            .count();
        assert!(edits >= 2, "{early:?}: the edit overtook its ack ({edits})");
        let mine: Vec<_> = em
            .bot_messages(CHANNEL)
            .into_iter()
            .filter(|m| m.interaction_id == Some(i))
            .collect();
        assert_eq!(mine.len(), 1, "{early:?}: {mine:?}");
        assert_eq!(
            mine[0].flags & FLAG_LOADING,
            0,
            "{early:?}: no longer 'thinking'"
        );
        assert!(!mine[0].content.is_empty());
        assert_eq!(callback_types(&em, i), vec![5]);
    }
    em.set_early_original(EarlyOriginal::UnknownWebhook);

    // An acknowledgement Discord refuses (10062) is never resent; the answer's edit then finds
    // no original (10015 while the token lives: nothing edited), tries a bounded number of
    // times, and settles KNOWN_REJECTED with that code. Nothing appears for the interaction.
    em.script_next_callback(Fault::Reject {
        status: 404,
        code: 10062,
    });
    model.script(Script::Slow(WINDOW + Duration::from_millis(800)));
    let i3 = em.post_interaction(CHANNEL, &asker, "ask", "What happens when a vault is lost?");
    let trail3 = trail_until(&mut operator, &i3.to_string(), "KNOWN_REJECTED", WAIT).await;
    assert!(trail3.contains("10015"), "{trail3}");
    assert_eq!(
        callback_types(&em, i3),
        vec![5],
        "the refused ack is not resent"
    );
    let edits = em
        .edit_requests()
        .iter()
        .filter(|e| e.interaction_id == Some(i3))
        .count();
    assert!((1..=10).contains(&edits), "{edits} bounded edit attempts");
    assert!(
        !em.bot_messages(CHANNEL)
            .iter()
            .any(|m| m.interaction_id == Some(i3))
    );
    println!("{trail}");
    body.stop().await;
}

/// In a channel whose refusals are silent, an `/ask` that was acknowledged before its answer was
/// refused cannot stay silent: Discord shows "thinking…" until the original is edited, so the
/// refusal text is the edit. Without the acknowledgement the same refusal posts nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledged_ask_refused_in_a_silent_channel_still_gets_the_refusal_text() {
    const SILENT: u64 = 1_100_000_000_000_000_330;
    let model = ModelEmulator::start().await.expect("model emulator");
    let (body, em) = start_deferring(SILENT, &model, BUDGET_MS, WINDOW, |core| {
        let mut by_channel = toml::Table::new();
        by_channel.insert(SILENT.to_string(), "silent".into());
        core.insert("refusals_by_channel".into(), by_channel.into());
    })
    .await;
    let mut operator = body.operator_after_genesis("silent deferred refusal").await;
    let asker = User::human(1_100_000_000_000_000_630, "asker");

    // Slow, then a hallucinated citation: quarantined, the turn is REFUSED after the ack.
    model.script(Script::Late(
        WINDOW + Duration::from_millis(800),
        Box::new(Script::Cites(7)),
    ));
    let i1 = em.post_interaction(SILENT, &asker, "ask", "How do I rotate the trust root?");
    let trail = trail_until(&mut operator, &i1.to_string(), "KNOWN_SENT", WAIT).await;
    assert!(trail.contains("state=REFUSED"), "{trail}");
    assert_eq!(callback_types(&em, i1), vec![5]);
    let mine: Vec<_> = em
        .bot_messages(SILENT)
        .into_iter()
        .filter(|m| m.interaction_id == Some(i1))
        .collect();
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert!(
        mine[0].content.contains("won't guess"),
        "{}",
        mine[0].content
    );
    assert_eq!(mine[0].flags & FLAG_LOADING, 0, "no longer 'thinking'");

    // The same refusal, fast (no acknowledgement): the silent channel gets nothing.
    model.script(Script::Cites(7));
    let i2 = em.post_interaction(SILENT, &asker, "ask", "What happens when a vault is lost?");
    let trail = trail_until(&mut operator, &i2.to_string(), "state=REFUSED", WAIT).await;
    assert!(!trail.contains("DiscordDeliveryIntent"), "{trail}");
    assert!(callback_types(&em, i2).is_empty());
    body.stop().await;
}
