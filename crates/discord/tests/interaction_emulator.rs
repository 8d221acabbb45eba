//! `/ask` interaction replies against the emulator: one callback (type 4) per interaction, a
//! second refused with 40060, an UNKNOWN callback reconciled from the original response, and
//! the interaction token only ever in the request line (never in a gate's destination, never
//! beside the bot token).

mod common;

use common::*;
use reach_discord::Snowflake;
use reach_discord::model::InteractionToken;
use reach_discord::rest::{
    CallbackOutcome, CreateOutcome, DeferredAck, FLAG_LOADING, FLAG_SUPPRESS_EMBEDS, FollowUp,
    InteractionReply, OriginalEdit, ReadGate, Reconciliation, TOKEN_MARGIN, judge_original,
    original_not_yet, unix_ms,
};
use reach_discord_emulator::{EarlyOriginal, Emulator, Fault, User};

/// Admits up to `budget` reads and records each destination.
struct Gate {
    budget: usize,
    asked: Vec<String>,
}

impl Gate {
    fn with_budget(budget: usize) -> Self {
        Self {
            budget,
            asked: Vec::new(),
        }
    }
}

impl ReadGate for Gate {
    async fn admit(&mut self, url: &str, _after: Snowflake) -> Result<(), String> {
        self.asked.push(url.to_owned());
        if self.asked.len() > self.budget {
            return Err("decision/over-budget".into());
        }
        Ok(())
    }
}

fn ask(em: &Emulator) -> (Snowflake, InteractionToken) {
    let id = em.post_interaction(CHANNEL, &User::human(42, "ada"), "ask", "a question");
    (Snowflake(id), InteractionToken(em.interaction_token(id)))
}

fn reply(id: Snowflake, text: &str) -> InteractionReply {
    InteractionReply {
        interaction_id: id,
        content: text.into(),
    }
}

fn app(em: &Emulator) -> Snowflake {
    Snowflake(em.config().application_id)
}

#[tokio::test]
async fn one_callback_per_interaction_and_a_second_is_acknowledged_not_resent() {
    let em = emulator().await;
    let rest = rest(&em);
    let (id, token) = ask(&em);
    let out = rest
        .interaction_callback(&reply(id, "the answer <@42> @everyone"), &token)
        .await;
    let CallbackOutcome::Sent { message_id } = out else {
        panic!("{out:?}")
    };
    let seen = em.bot_messages(CHANNEL);
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].id, message_id.0);
    assert_eq!(seen[0].interaction_id, Some(id.0));
    assert_eq!(seen[0].flags, FLAG_SUPPRESS_EMBEDS);
    let request = &em.callback_requests()[0];
    assert!(request.token_matched);
    assert!(
        !request.authorization_sent,
        "the bot token is not sent with a callback"
    );
    let body = &request.body;
    assert_eq!(body["type"], 4);
    assert_eq!(
        body["data"]["allowed_mentions"]["parse"],
        serde_json::json!([])
    );

    // The interaction id deduplicates: a second callback creates nothing.
    let again = rest.interaction_callback(&reply(id, "again"), &token).await;
    assert_eq!(again, CallbackOutcome::Acknowledged);
    assert_eq!(em.bot_messages(CHANNEL).len(), 1);
}

#[tokio::test]
async fn a_wrong_token_is_rejected_as_an_unknown_interaction() {
    let em = emulator().await;
    let rest = rest(&em);
    let (id, _) = ask(&em);
    let forged = InteractionToken("not-the-token".into());
    let out = rest.interaction_callback(&reply(id, "x"), &forged).await;
    assert_eq!(
        out,
        CallbackOutcome::Rejected {
            status: 404,
            code: Some(10062)
        }
    );
    assert!(em.bot_messages(CHANNEL).is_empty());
    assert!(!em.callback_requests()[0].token_matched);
    // A token that is not path-safe never reaches a request line.
    let odd = InteractionToken("../../channels".into());
    assert_eq!(
        rest.interaction_callback(&reply(id, "x"), &odd).await,
        CallbackOutcome::NotSent {
            reason: "discord/interaction-token".into()
        }
    );
    assert_eq!(em.callback_requests().len(), 1);
}

#[tokio::test]
async fn an_unknown_callback_is_reconciled_from_the_original_response() {
    let em = emulator().await;
    let rest = rest(&em);
    let (id, token) = ask(&em);
    em.script_next_callback(Fault::CommitThenDrop);
    let out = rest
        .interaction_callback(&reply(id, "answer"), &token)
        .await;
    assert!(matches!(out, CallbackOutcome::Unknown { .. }), "{out:?}");
    let created = em.bot_messages(CHANNEL);
    assert_eq!(created.len(), 1, "Discord committed the reply");

    let mut gate = Gate::with_budget(1);
    let found = rest
        .reconcile_interaction(app(&em), id, &token, "answer", false, &mut gate)
        .await;
    assert_eq!(
        found,
        Reconciliation::Found {
            message_id: Snowflake(created[0].id)
        }
    );
    // The gate (and so core and ward) saw a destination without the token.
    assert_eq!(gate.asked, vec![rest.original_destination(app(&em), id)]);
    assert!(!gate.asked[0].contains(&token.0), "{:?}", gate.asked);
    assert!(gate.asked[0].ends_with(&format!("/{{token:{id}}}/messages/@original")));
}

#[tokio::test]
async fn a_callback_dropped_before_commit_is_proved_absent_and_a_refused_read_is_not_made() {
    let em = emulator().await;
    let rest = rest(&em);
    let (id, token) = ask(&em);
    em.script_next_callback(Fault::DropBeforeCommit);
    let out = rest
        .interaction_callback(&reply(id, "answer"), &token)
        .await;
    assert!(matches!(out, CallbackOutcome::Unknown { .. }), "{out:?}");
    assert_eq!(
        rest.reconcile_interaction(
            app(&em),
            id,
            &token,
            "answer",
            false,
            &mut Gate::with_budget(1)
        )
        .await,
        Reconciliation::ProvedAbsent
    );
    let reads = em.read_requests().len();
    assert_eq!(reads, 1);
    let refused = rest
        .reconcile_interaction(
            app(&em),
            id,
            &token,
            "answer",
            false,
            &mut Gate::with_budget(0),
        )
        .await;
    assert_eq!(
        refused,
        Reconciliation::Inconclusive {
            reason: "decision/over-budget".into()
        }
    );
    assert_eq!(em.read_requests().len(), reads, "no GET without admission");
    // After proved absence the interaction may still be answered once.
    let out = rest
        .interaction_callback(&reply(id, "answer"), &token)
        .await;
    assert!(matches!(out, CallbackOutcome::Sent { .. }), "{out:?}");
}

#[tokio::test]
async fn a_rate_limited_callback_is_not_accepted() {
    let em = emulator().await;
    let rest = rest(&em);
    let (id, token) = ask(&em);
    em.script_next_callback(Fault::RateLimit { retry_after: 0.25 });
    let out = rest
        .interaction_callback(&reply(id, "answer"), &token)
        .await;
    assert!(
        matches!(out, CallbackOutcome::RateLimited { global: false, .. }),
        "{out:?}"
    );
    assert!(em.bot_messages(CHANNEL).is_empty());
}

#[test]
fn callback_returns_are_classified() {
    use reach_discord::rest::classify_callback;
    let h = http::HeaderMap::new();
    let sent = br#"{"resource":{"type":4,"message":{"id":"77"}}}"#;
    let table = [
        (
            200,
            &sent[..],
            CallbackOutcome::Sent {
                message_id: Snowflake(77),
            },
        ),
        // Accepted, but no message named: an earlier or this attempt holds the reply.
        (204, &b""[..], CallbackOutcome::Acknowledged),
        (
            400,
            &br#"{"code":40060}"#[..],
            CallbackOutcome::Acknowledged,
        ),
        (
            404,
            &br#"{"code":10062}"#[..],
            CallbackOutcome::Rejected {
                status: 404,
                code: Some(10062),
            },
        ),
        (
            503,
            &b"{}"[..],
            CallbackOutcome::Unknown {
                reason: "discord/status-503".into(),
            },
        ),
    ];
    for (status, body, want) in table {
        assert_eq!(classify_callback(status, &h, body), want, "{status}");
    }
}

fn edit(text: &str) -> OriginalEdit {
    OriginalEdit {
        content: text.into(),
    }
}

/// A slow answer: acknowledged (type 5) inside the window, then the original edited once.
#[tokio::test]
async fn a_deferred_interaction_is_answered_by_editing_its_original() {
    let em = emulator().await;
    let rest = rest(&em);
    let (id, token) = ask(&em);
    // Before any acknowledgement there is nothing to edit: 10015 by default (what libraries
    // report Discord answers) or 10008, nothing changed either way; and what the adapter reads
    // as "not yet" while the token lives.
    for (early, code) in [
        (EarlyOriginal::UnknownMessage, 10008),
        (EarlyOriginal::UnknownWebhook, 10015),
    ] {
        em.set_early_original(early);
        let out = rest
            .edit_original(app(&em), &edit("too early"), &token)
            .await;
        assert_eq!(
            out,
            CreateOutcome::KnownRejected {
                status: 404,
                code: Some(code)
            }
        );
        assert!(original_not_yet(Some(code), id, unix_ms()), "{code}");
        assert!(em.bot_messages(CHANNEL).is_empty());
    }
    // The emulator's ids tell their time, as Discord's do: this interaction's token is alive
    // now, and would not be sixteen minutes on.
    let later = unix_ms() + 16 * 60 * 1000;
    assert!(id.token_alive_at(unix_ms(), TOKEN_MARGIN));
    assert!(!id.token_alive_at(later, TOKEN_MARGIN));
    assert!(!original_not_yet(Some(10015), id, later));
    assert!(original_not_yet(Some(10008), id, later));
    let ack = rest
        .defer_interaction(&DeferredAck { interaction_id: id }, &token)
        .await;
    assert!(
        matches!(
            ack,
            CallbackOutcome::Acknowledged | CallbackOutcome::Sent { .. }
        ),
        "{ack:?}"
    );
    let placeholder = em.bot_messages(CHANNEL);
    assert_eq!(placeholder.len(), 1);
    assert_eq!(placeholder[0].content, "");
    assert_eq!(placeholder[0].flags & FLAG_LOADING, FLAG_LOADING);
    assert_eq!(em.callback_requests()[0].body["type"], 5);
    // A second acknowledgement or a late type-4 callback is refused: 40060.
    assert_eq!(
        rest.defer_interaction(&DeferredAck { interaction_id: id }, &token)
            .await,
        CallbackOutcome::Acknowledged
    );
    let out = rest
        .edit_original(app(&em), &edit("the answer <@42>"), &token)
        .await;
    let CreateOutcome::KnownSent { message_id } = out else {
        panic!("{out:?}")
    };
    let seen = em.bot_messages(CHANNEL);
    assert_eq!(seen.len(), 1, "the edit creates no second message");
    assert_eq!(seen[0].id, message_id.0);
    assert_eq!(seen[0].content, "the answer <@42>");
    assert_eq!(seen[0].flags, FLAG_SUPPRESS_EMBEDS, "LOADING is cleared");
    let edits = em.edit_requests();
    assert_eq!(edits.len(), 3);
    assert_eq!(edits[2].interaction_id, Some(id.0));
    assert!(!edits[2].authorization_sent, "an edit needs no bot token");
    assert_eq!(
        edits[2].body["allowed_mentions"]["parse"],
        serde_json::json!([])
    );
}

/// Discord's 3-second rule: a first callback after the window is refused (10062), whatever its
/// type, and nothing is created.
#[tokio::test]
async fn a_callback_after_the_response_window_is_an_unknown_interaction() {
    let em = emulator().await;
    let rest = rest(&em);
    em.set_interaction_window(std::time::Duration::from_millis(100));
    let (id, token) = ask(&em);
    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    let expired = CallbackOutcome::Rejected {
        status: 404,
        code: Some(10062),
    };
    assert_eq!(
        rest.interaction_callback(&reply(id, "late"), &token).await,
        expired
    );
    assert_eq!(
        rest.defer_interaction(&DeferredAck { interaction_id: id }, &token)
            .await,
        expired
    );
    assert!(em.bot_messages(CHANNEL).is_empty());
}

/// An edit whose outcome was lost is reconciled from `@original` by its content: our content
/// found, or the LOADING placeholder still there (proved absent); never edited again blindly.
#[tokio::test]
async fn an_unknown_edit_is_reconciled_by_the_content_of_the_original() {
    let em = emulator().await;
    let rest = rest(&em);
    let (id, token) = ask(&em);
    rest.defer_interaction(&DeferredAck { interaction_id: id }, &token)
        .await;
    em.script_next_edit(Fault::DropBeforeCommit);
    let out = rest.edit_original(app(&em), &edit("answer"), &token).await;
    assert!(matches!(out, CreateOutcome::Unknown { .. }), "{out:?}");
    assert_eq!(
        rest.reconcile_interaction(
            app(&em),
            id,
            &token,
            "answer",
            true,
            &mut Gate::with_budget(1)
        )
        .await,
        Reconciliation::ProvedAbsent,
        "the placeholder is still LOADING"
    );
    // For a callback the placeholder proves nothing: no callback can land any more.
    assert_eq!(
        rest.reconcile_interaction(
            app(&em),
            id,
            &token,
            "answer",
            false,
            &mut Gate::with_budget(1)
        )
        .await,
        Reconciliation::Inconclusive {
            reason: "discord/original-deferred".into()
        }
    );
    em.script_next_edit(Fault::CommitThenDrop);
    let out = rest.edit_original(app(&em), &edit("answer"), &token).await;
    assert!(matches!(out, CreateOutcome::Unknown { .. }), "{out:?}");
    let found = rest
        .reconcile_interaction(
            app(&em),
            id,
            &token,
            "answer",
            true,
            &mut Gate::with_budget(1),
        )
        .await;
    assert_eq!(
        found,
        Reconciliation::Found {
            message_id: Snowflake(em.bot_messages(CHANNEL)[0].id)
        }
    );
    // Another content in the original proves nothing about ours.
    assert!(matches!(
        rest.reconcile_interaction(
            app(&em),
            id,
            &token,
            "other",
            true,
            &mut Gate::with_budget(1)
        )
        .await,
        Reconciliation::Inconclusive { .. }
    ));
}

#[test]
fn original_reads_are_judged_by_content() {
    let ours = br#"{"id":"9","content":"ours","flags":4}"#;
    let loading = br#"{"id":"9","content":"","flags":128}"#;
    let other = br#"{"id":"9","content":"theirs","flags":0}"#;
    assert_eq!(
        judge_original(200, ours, "ours", true, true),
        Reconciliation::Found {
            message_id: Snowflake(9)
        }
    );
    assert_eq!(
        judge_original(200, loading, "ours", true, true),
        Reconciliation::ProvedAbsent
    );
    assert!(matches!(
        judge_original(200, loading, "ours", false, true),
        Reconciliation::Inconclusive { .. }
    ));
    assert_eq!(
        judge_original(200, other, "ours", true, true),
        Reconciliation::Inconclusive {
            reason: "discord/original-differs".into()
        }
    );
    assert_eq!(
        judge_original(404, br#"{"code":10008}"#, "ours", false, true),
        Reconciliation::ProvedAbsent
    );
    // 10015 proves absence only while the token lives: past it, a wrong or expired token
    // answers the same whether or not a reply exists.
    assert_eq!(
        judge_original(404, br#"{"code":10015}"#, "ours", true, true),
        Reconciliation::ProvedAbsent
    );
    assert_eq!(
        judge_original(404, br#"{"code":10015}"#, "ours", false, false),
        Reconciliation::Inconclusive {
            reason: "discord/token-expired".into()
        }
    );
    assert_eq!(
        judge_original(404, br#"{"code":10008}"#, "ours", true, false),
        Reconciliation::ProvedAbsent,
        "an unknown message is known to be absent whatever the token's age"
    );
    assert_eq!(
        judge_original(503, b"", "ours", true, true),
        Reconciliation::Inconclusive {
            reason: "discord/read-status-503".into()
        }
    );
}

fn follow(text: &str) -> FollowUp {
    FollowUp {
        content: text.into(),
    }
}

/// Later parts of an answer: follow-up messages, allowed once the interaction has a response,
/// each a message of the bot answering that interaction.
#[tokio::test]
async fn follow_ups_follow_the_response_and_name_their_interaction() {
    let em = emulator().await;
    let rest = rest(&em);
    let (id, token) = ask(&em);
    assert_eq!(
        rest.execute_follow_up(app(&em), &follow("part 2"), &token)
            .await,
        CreateOutcome::KnownRejected {
            status: 404,
            code: Some(10015)
        },
        "no follow-up before the interaction's response"
    );
    rest.interaction_callback(&reply(id, "part 1"), &token)
        .await;
    let out = rest
        .execute_follow_up(app(&em), &follow("part 2 <@42>"), &token)
        .await;
    let CreateOutcome::KnownSent { message_id } = out else {
        panic!("{out:?}")
    };
    let seen = em.bot_messages(CHANNEL);
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].id, message_id.0);
    assert_eq!(seen[1].interaction_id, Some(id.0));
    let sent = &em.follow_up_requests()[1];
    assert!(!sent.authorization_sent, "a follow-up needs no bot token");
    assert_eq!(
        sent.body["allowed_mentions"]["parse"],
        serde_json::json!([])
    );
}

/// An UNKNOWN follow-up is reconciled from channel pages: found by its interaction and exact
/// content, proved absent when the whole channel after the interaction lacks it; the same
/// content answering another interaction is not ours.
#[tokio::test]
async fn an_unknown_follow_up_is_reconciled_from_the_channel() {
    let em = emulator().await;
    let rest = rest(&em);
    let (id, token) = ask(&em);
    let (other, other_token) = ask(&em);
    for (i, t) in [(id, &token), (other, &other_token)] {
        rest.interaction_callback(&reply(i, "part 1"), t).await;
    }
    rest.execute_follow_up(app(&em), &follow("part 2"), &other_token)
        .await;
    let mut gate = Gate::with_budget(5);
    assert_eq!(
        rest.reconcile_follow_up(Snowflake(CHANNEL), id, "part 2", &mut gate)
            .await,
        Reconciliation::ProvedAbsent,
        "another interaction's identical part is not ours"
    );
    assert_eq!(gate.asked, vec![rest.read_url(Snowflake(CHANNEL), id)]);
    em.script_next_follow_up(Fault::CommitThenDrop);
    let out = rest
        .execute_follow_up(app(&em), &follow("part 2"), &token)
        .await;
    assert!(matches!(out, CreateOutcome::Unknown { .. }), "{out:?}");
    let mine = em
        .bot_messages(CHANNEL)
        .into_iter()
        .rfind(|m| m.interaction_id == Some(id.0))
        .unwrap();
    assert_eq!(
        rest.reconcile_follow_up(Snowflake(CHANNEL), id, "part 2", &mut Gate::with_budget(5))
            .await,
        Reconciliation::Found {
            message_id: Snowflake(mine.id)
        }
    );
}

/// An interaction's token lives 15 minutes (shortened here): past it, and for a token that
/// names no interaction, its webhook answers 401 50027 — never read as "no original yet", and
/// a read of `@original` then proves nothing. A Create Message to a channel that does not
/// exist is 10003, known rejected.
#[tokio::test]
async fn an_expired_or_unknown_token_is_50027_and_proves_nothing() {
    let em = emulator().await;
    let rest = rest(&em);
    em.set_token_lifetime(std::time::Duration::from_millis(300));
    let (id, token) = ask(&em);
    let ack = rest
        .defer_interaction(&DeferredAck { interaction_id: id }, &token)
        .await;
    assert!(matches!(
        ack,
        CallbackOutcome::Acknowledged | CallbackOutcome::Sent { .. }
    ));
    let bogus = InteractionToken("not-a-token".into());
    let invalid = CreateOutcome::KnownRejected {
        status: 401,
        code: Some(50027),
    };
    assert_eq!(
        rest.edit_original(app(&em), &edit("x"), &bogus).await,
        invalid
    );
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(
        rest.edit_original(app(&em), &edit("too late"), &token)
            .await,
        invalid
    );
    assert!(!original_not_yet(Some(50027), id, unix_ms()));
    assert_eq!(
        rest.reconcile_interaction(
            app(&em),
            id,
            &token,
            "too late",
            true,
            &mut Gate::with_budget(1)
        )
        .await,
        Reconciliation::Inconclusive {
            reason: "discord/read-status-401".into()
        }
    );
    let nowhere = reach_discord::rest::CreateMessage {
        channel_id: Snowflake(1_100_000_000_000_000_999),
        content: "hello".into(),
        nonce: reach_discord::rest::Nonce::new("n-nowhere").unwrap(),
        reply_to: None,
    };
    assert_eq!(
        rest.create_message(&nowhere).await,
        CreateOutcome::KnownRejected {
            status: 404,
            code: Some(10003)
        }
    );
}
