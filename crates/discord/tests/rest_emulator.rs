//! The REST v10 Create Message adapter against the emulator: exactly-once with nonce,
//! deduplication, 429, 5xx, commit-then-drop and reconciliation, and what Discord received.

mod common;

use std::time::Duration;

use common::*;
use reach_discord::Snowflake;
use reach_discord::rest::{
    CreateMessage, CreateOutcome, Nonce, ReadGate, Reconciliation, RestError,
};
use reach_discord_emulator::{Emulator, EmulatorConfig, Fault, REST_HOST, RateLimits, User};
use serde_json::json;

fn reply(question: u64, nonce: &str, content: &str) -> CreateMessage {
    CreateMessage {
        channel_id: Snowflake(CHANNEL),
        content: content.to_owned(),
        nonce: Nonce::new(nonce).expect("nonce"),
        reply_to: Some(Snowflake(question)),
    }
}

/// A read gate that admits up to `budget` reads and records every URL it was asked about.
/// (In egress-discord each admission is a redeemed EgressDecision.)
struct Gate {
    budget: usize,
    asked: Vec<(String, Snowflake)>,
}

impl Gate {
    fn open() -> Self {
        Self::with_budget(usize::MAX)
    }
    fn with_budget(budget: usize) -> Self {
        Self {
            budget,
            asked: Vec::new(),
        }
    }
}

impl ReadGate for Gate {
    async fn admit(&mut self, url: &str, after: Snowflake) -> Result<(), String> {
        self.asked.push((url.to_owned(), after));
        if self.asked.len() > self.budget {
            return Err("decision/over-budget".into());
        }
        Ok(())
    }
}

fn question(em: &Emulator) -> u64 {
    let bot = em.config().bot_user_id;
    em.post_user_message(
        CHANNEL,
        &User::human(42, "ada"),
        &format!("<@{bot}> question"),
    )
}

#[tokio::test]
async fn nonce_sends_once_and_a_second_send_returns_the_original() {
    let em = emulator().await;
    let rest = rest(&em);
    let q = question(&em);
    let msg = reply(q, "n000000000000000000000001", "an answer <@42> @everyone");
    let first = rest.create_message(&msg).await;
    let CreateOutcome::KnownSent { message_id } = first else {
        panic!("{first:?}")
    };
    let second = rest.create_message(&msg).await;
    assert_eq!(second, CreateOutcome::KnownSent { message_id });
    let bot = em.bot_messages(CHANNEL);
    assert_eq!(bot.len(), 1, "one message although two requests");
    assert_eq!(bot[0].id, message_id.0);
    assert_eq!(bot[0].reply_to, Some(q));
    assert_eq!(em.create_requests().len(), 2);

    // What Discord received: no pings possible, no embeds, nonce enforced, a reply reference.
    let body = &em.create_requests()[0].body;
    assert_eq!(body["allowed_mentions"], json!({"parse": []}));
    assert!(body.get("embeds").is_none());
    assert_eq!(body["flags"], json!(4));
    assert_eq!(body["enforce_nonce"], json!(true));
    assert_eq!(body["nonce"], json!("n000000000000000000000001"));
    assert_eq!(
        body["message_reference"],
        json!({"message_id": q.to_string(), "fail_if_not_exists": false})
    );
    // Only loopback was ever dialed.
    assert!(
        rest.connector()
            .dialer()
            .dials()
            .iter()
            .all(|a| a.ip().is_loopback())
    );
}

#[tokio::test]
async fn rate_limit_is_classified_and_nothing_is_created() {
    let em = emulator().await;
    let rest = rest(&em);
    let q = question(&em);
    em.script_next_create(Fault::RateLimit { retry_after: 1.5 });
    let out = rest.create_message(&reply(q, "nonce429", "x")).await;
    assert_eq!(
        out,
        CreateOutcome::RateLimited {
            retry_after: Duration::from_millis(1500),
            global: false
        }
    );
    assert!(em.bot_messages(CHANNEL).is_empty());
}

#[tokio::test]
async fn server_error_is_unknown() {
    let em = emulator().await;
    let rest = rest(&em);
    let q = question(&em);
    em.script_next_create(Fault::ServerError { status: 502 });
    let out = rest.create_message(&reply(q, "nonce502", "x")).await;
    assert_eq!(
        out,
        CreateOutcome::Unknown {
            reason: "discord/status-502".into()
        }
    );
}

#[tokio::test]
async fn rejection_is_known_rejected_with_its_code() {
    let em = emulator().await;
    let rest = rest(&em);
    let q = question(&em);
    em.script_next_create(Fault::Reject {
        status: 403,
        code: 50013,
    });
    let out = rest.create_message(&reply(q, "nonce403", "x")).await;
    assert_eq!(
        out,
        CreateOutcome::KnownRejected {
            status: 403,
            code: Some(50013)
        }
    );
}

#[tokio::test]
async fn commit_then_drop_is_unknown_and_reconciliation_finds_our_nonce() {
    let em = emulator().await;
    let rest = rest(&em);
    let q = question(&em);
    // Someone else talks in the channel too.
    em.post_user_message(CHANNEL, &User::human(43, "bob"), "unrelated");
    em.script_next_create(Fault::CommitThenDrop);
    let msg = reply(q, "nonce-commit-drop", "the answer");
    let out = rest.create_message(&msg).await;
    assert!(matches!(out, CreateOutcome::Unknown { .. }), "{out:?}");
    let created = em.bot_messages(CHANNEL);
    assert_eq!(created.len(), 1, "the emulator committed the message");
    let found = rest.reconcile(&msg, Snowflake(q), &mut Gate::open()).await;
    assert_eq!(
        found,
        Reconciliation::Found {
            message_id: Snowflake(created[0].id)
        }
    );
}

#[tokio::test]
async fn drop_before_commit_is_unknown_and_reconciliation_proves_absence() {
    let em = emulator().await;
    let rest = rest(&em);
    let q = question(&em);
    // Another reply of ours (another intent) is in the window; it is not this one.
    rest.create_message(&reply(q, "other-intent", "part one"))
        .await;
    em.script_next_create(Fault::DropBeforeCommit);
    let msg = reply(q, "nonce-dropped", "part two");
    let out = rest.create_message(&msg).await;
    assert!(matches!(out, CreateOutcome::Unknown { .. }), "{out:?}");
    assert_eq!(
        rest.reconcile(&msg, Snowflake(q), &mut Gate::open()).await,
        Reconciliation::ProvedAbsent
    );
}

#[tokio::test]
async fn reconciliation_without_nonces_in_reads_matches_content_and_reference() {
    let em = Emulator::start(EmulatorConfig {
        nonce_in_reads: false,
        ..EmulatorConfig::default()
    })
    .await
    .expect("start");
    let rest = rest(&em);
    let q = question(&em);
    em.script_next_create(Fault::CommitThenDrop);
    let msg = reply(q, "nonce-no-read", "exact text");
    assert!(matches!(
        rest.create_message(&msg).await,
        CreateOutcome::Unknown { .. }
    ));
    let id = em.bot_messages(CHANNEL)[0].id;
    assert_eq!(
        rest.reconcile(&msg, Snowflake(q), &mut Gate::open()).await,
        Reconciliation::Found {
            message_id: Snowflake(id)
        }
    );
    let other = reply(q, "nonce-other", "different text");
    assert_eq!(
        rest.reconcile(&other, Snowflake(q), &mut Gate::open())
            .await,
        Reconciliation::ProvedAbsent
    );
}

/// Discord sends a reply whose question was deleted before it landed as a normal message (type
/// 0, no reference) when `fail_if_not_exists` is false, as every reply of Reach's is: reads
/// without nonces must still find it, and must not take another question's reply for it.
#[tokio::test]
async fn a_reply_to_a_deleted_question_is_a_normal_message_and_is_still_found() {
    let em = emulator().await;
    let rest = rest(&em);
    let q = question(&em);
    let other = question(&em);
    // Another question's reply with the same text: its reference names that question.
    let theirs = reply(other, "nonce-theirs", "the same answer");
    assert!(matches!(
        rest.create_message(&theirs).await,
        CreateOutcome::KnownSent { .. }
    ));
    assert!(em.delete_message(CHANNEL, q));
    assert!(!em.delete_message(CHANNEL, q), "already gone");
    // Before ours lands, the other question's reply (same text, its own reference) is not ours.
    let msg = reply(q, "nonce-deleted", "the same answer");
    assert_eq!(
        rest.reconcile(&msg, Snowflake(q), &mut Gate::open()).await,
        Reconciliation::ProvedAbsent
    );
    em.script_next_create(Fault::CommitThenDrop);
    assert!(matches!(
        rest.create_message(&msg).await,
        CreateOutcome::Unknown { .. }
    ));
    let ours = em
        .bot_messages(CHANNEL)
        .into_iter()
        .find(|m| m.nonce.as_deref() == Some("nonce-deleted"))
        .expect("the reply landed");
    assert_eq!(ours.reply_to, None, "no reference to a deleted question");
    assert_eq!(
        rest.reconcile(&msg, Snowflake(q), &mut Gate::open()).await,
        Reconciliation::Found {
            message_id: Snowflake(ours.id)
        }
    );
}

#[tokio::test]
async fn reconciliation_pages_through_a_busy_channel() {
    let em = emulator().await;
    let rest = rest(&em);
    let q = question(&em);
    let msg = reply(q, "nonce-busy", "needle");
    let CreateOutcome::KnownSent { message_id } = rest.create_message(&msg).await else {
        panic!()
    };
    // 250 later messages push ours off the first page.
    for i in 0..250 {
        em.post_user_message(CHANNEL, &User::human(43, "bob"), &format!("chatter {i}"));
    }
    assert_eq!(
        rest.reconcile(&msg, Snowflake(q), &mut Gate::open()).await,
        Reconciliation::Found { message_id }
    );
    let absent = reply(q, "nonce-absent", "never sent");
    assert_eq!(
        rest.reconcile(&absent, Snowflake(q), &mut Gate::open())
            .await,
        Reconciliation::ProvedAbsent
    );
}

#[tokio::test]
async fn every_read_is_admitted_for_its_exact_url_and_a_refused_read_is_not_made() {
    let em = emulator().await;
    let rest = rest(&em);
    let q = question(&em);
    let absent = reply(q, "nonce-gated", "never sent");
    for i in 0..150 {
        em.post_user_message(CHANNEL, &User::human(43, "bob"), &format!("chatter {i}"));
    }
    // Two pages, each admitted for the URL whose query the emulator then received.
    let mut gate = Gate::open();
    assert_eq!(
        rest.reconcile(&absent, Snowflake(q), &mut gate).await,
        Reconciliation::ProvedAbsent
    );
    let reads = em.read_requests();
    assert_eq!(gate.asked.len(), 2);
    assert_eq!(reads.len(), 2);
    for ((url, after), read) in gate.asked.iter().zip(&reads) {
        assert_eq!(url, &rest.read_url(Snowflake(CHANNEL), *after));
        assert_eq!(
            url,
            &format!(
                "{}/channels/{CHANNEL}/messages?{}",
                em.rest_base_url(),
                read.query
            )
        );
    }
    assert_eq!(gate.asked[0].1, Snowflake(q));

    // The gate admits one page and refuses the second: that GET never reaches Discord.
    let mut gate = Gate::with_budget(1);
    assert_eq!(
        rest.reconcile(&absent, Snowflake(q), &mut gate).await,
        Reconciliation::Inconclusive {
            reason: "decision/over-budget".into()
        }
    );
    assert_eq!(em.read_requests().len(), reads.len() + 1);
    let mut gate = Gate::with_budget(0);
    assert!(matches!(
        rest.reconcile(&absent, Snowflake(q), &mut gate).await,
        Reconciliation::Inconclusive { .. }
    ));
    assert_eq!(
        em.read_requests().len(),
        reads.len() + 1,
        "no GET without admission"
    );
}

#[tokio::test]
async fn a_base_url_that_is_not_a_canonical_https_destination_is_refused() {
    let em = emulator().await;
    let port = em.rest_addr().port();
    let cases = [
        (
            format!("http://{REST_HOST}:{port}/api/v10"),
            "destination/not-https",
        ),
        (
            format!("{REST_HOST}:{port}/api/v10"),
            "destination/not-absolute",
        ),
        (
            format!("HTTPS://{REST_HOST}:{port}/api/v10"),
            "destination/non-canonical",
        ),
        (
            format!("https://{REST_HOST}:{port}api/v10"),
            "destination/bad-port",
        ),
        (
            format!("https://bot:secret@{REST_HOST}:{port}/api/v10"),
            "destination/userinfo",
        ),
        (
            format!("https://{REST_HOST}:{port}/api/v10#top"),
            "destination/fragment",
        ),
    ];
    for (base, code) in cases {
        match rest_with_base(&em, &base) {
            Err(RestError::Base(e)) => assert_eq!(e.code(), code, "{base}: {e}"),
            Ok(_) => panic!("{base}: admitted as a REST base"),
        }
    }
    // The same adapter with the emulator's canonical base builds.
    assert!(rest_with_base(&em, &em.rest_base_url()).is_ok());
}

#[tokio::test]
async fn unreachable_api_is_not_sent() {
    let em = emulator().await;
    let rest = rest(&em);
    drop(em);
    // The listener is gone: connecting fails before any request byte.
    let out = rest.create_message(&reply(1, "nonce-gone", "x")).await;
    assert!(matches!(out, CreateOutcome::NotSent { .. }), "{out:?}");
}

#[tokio::test]
async fn the_bot_reply_is_dispatched_with_our_nonce() {
    // Independent evidence for reconciliation: our own MESSAGE_CREATE carries the nonce.
    let em = emulator().await;
    let (handle, mut rx) = gateway(&em);
    ready(&mut rx).await;
    let rest = rest(&em);
    let q = question(&em);
    em.script_next_create(Fault::CommitThenDrop);
    let msg = reply(q, "nonce-gateway", "answer");
    assert!(matches!(
        rest.create_message(&msg).await,
        CreateOutcome::Unknown { .. }
    ));
    let e = next_matching(&mut rx, "our MESSAGE_CREATE", |e| {
        matches!(e,
        reach_discord::gateway::GatewayEvent::MessageCreate { message, .. } if message.author.bot)
    })
    .await;
    let reach_discord::gateway::GatewayEvent::MessageCreate { message, .. } = e else {
        unreachable!()
    };
    assert_eq!(message.nonce.as_deref(), Some("nonce-gateway"));
    handle.shutdown().await;
}

/// Discord's bucket headers are kept: a request into a spent bucket is not sent (a 429 earned
/// is another strike toward Discord's invalid-request ban) — a short reset is waited out
/// first, a long one answered rate-limited unsent. Requests on one route go one at a time.
/// A global 429 holds the bot's other routes as well.
#[tokio::test]
async fn a_spent_bucket_or_a_global_limit_is_waited_out_without_a_request() {
    let em = emulator().await;
    let rest = rest(&em);
    let q = question(&em);
    let in_channel = |channel: u64, nonce: &str| CreateMessage {
        channel_id: Snowflake(channel),
        ..reply(q, nonce, "x")
    };
    let sends = |channel: u64| {
        em.create_requests()
            .iter()
            .filter(|c| c.channel_id == channel)
            .map(|c| c.received_at)
            .collect::<Vec<_>>()
    };
    // A short reset: the third request waits for it, then is sent and accepted.
    let short = 1_100_000_000_000_000_201;
    em.add_channel(short, None);
    let window = Duration::from_millis(700);
    em.set_rate_limits(RateLimits {
        per_route: 2,
        window,
        global_per_second: 10_000,
    });
    let m: Vec<CreateMessage> = (0..3)
        .map(|k| in_channel(short, &format!("nonce-short-{k}")))
        .collect();
    let (a, b, c) = tokio::join!(
        rest.create_message(&m[0]),
        rest.create_message(&m[1]),
        rest.create_message(&m[2]),
    );
    for out in [a, b, c] {
        assert!(matches!(out, CreateOutcome::KnownSent { .. }), "{out:?}");
    }
    let t = sends(short);
    assert_eq!(t.len(), 3);
    assert!(
        t[2] - t[0] >= window - Duration::from_millis(50),
        "{:?}",
        t[2] - t[0]
    );
    assert!(
        em.responses().iter().all(|r| r.status != 429),
        "no 429 earned"
    );

    // A long reset: answered rate-limited for it, nothing sent.
    em.set_rate_limits(RateLimits {
        per_route: 2,
        window: Duration::from_secs(30),
        global_per_second: 10_000,
    });
    for k in 0..2 {
        let out = rest
            .create_message(&reply(q, &format!("nonce-long-{k}"), "x"))
            .await;
        assert!(matches!(out, CreateOutcome::KnownSent { .. }), "{out:?}");
    }
    let out = rest.create_message(&reply(q, "nonce-long-2", "x")).await;
    let CreateOutcome::RateLimited { retry_after, .. } = out else {
        panic!("the spent bucket was not kept: {out:?}")
    };
    assert!(retry_after > Duration::from_secs(5), "{retry_after:?}");
    assert_eq!(sends(CHANNEL).len(), 2, "nothing sent into a spent bucket");
    assert!(
        em.responses().iter().all(|r| r.status != 429),
        "no 429 earned"
    );

    // The global limit: Discord's 429 says `global`, and every bot route then waits.
    let other = 1_100_000_000_000_000_202;
    em.add_channel(other, None);
    em.set_rate_limits(RateLimits {
        per_route: 10_000,
        window,
        global_per_second: 1,
    });
    assert!(matches!(
        rest.create_message(&in_channel(other, "nonce-global-0"))
            .await,
        CreateOutcome::KnownSent { .. }
    ));
    let out = rest
        .create_message(&in_channel(other, "nonce-global-1"))
        .await;
    assert!(
        matches!(out, CreateOutcome::RateLimited { global: true, .. }),
        "{out:?}"
    );
    let third = em.create_requests().len();
    let started = tokio::time::Instant::now();
    assert!(matches!(
        rest.create_message(&in_channel(short, "nonce-global-2"))
            .await,
        CreateOutcome::KnownSent { .. }
    ));
    assert_eq!(em.create_requests().len(), third + 1);
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "another route waited out the global limit first: {:?}",
        started.elapsed()
    );
}
