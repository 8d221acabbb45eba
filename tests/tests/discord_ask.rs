//! An `/ask` question end to end: the emulator dispatches INTERACTION_CREATE, ingress-edge seals
//! the interaction token to egress-discord's key and admits the event into core, core answers
//! it carrying only the sealed blob, and egress-discord opens it and answers with exactly one
//! interaction callback. A redelivered INTERACTION_CREATE and a lost callback outcome never
//! call back twice, and the token appears nowhere outside the two edge processes' memory: not
//! in the trail, not in any file of the body's state (vault, ward's store, logs).

use std::path::Path;
use std::time::{Duration, Instant};

use reach_discord::render::{ChannelPolicy, TurnView, render};
use reach_discord_emulator::{Fault, User};
use reach_model_emulator::{ModelEmulator, Script};
use reach_tests::{TestBody, cited_urls, configure_portal, eventually, trail_until};

const CHANNEL: u64 = 1_100_000_000_000_000_300;
/// A bound on waiting for an effect, so a failure is a clear message rather than a hang.
const WAIT: Duration = Duration::from_secs(30);

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            found.extend(files_containing(&path, needle));
        } else if kind.is_file()
            && std::fs::read(&path).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle))
        {
            found.push(path.display().to_string());
        }
    }
    found
}

/// Waits for the bot's reply to `interaction` in `channel` and checks that it cites the corpus.
async fn cited_reply(
    em: &reach_discord_emulator::Emulator,
    channel: u64,
    interaction: u64,
) -> reach_discord_emulator::EmulatedMessage {
    let reply = eventually(WAIT, "the interaction's reply", || {
        em.bot_messages(channel)
            .into_iter()
            .find(|m| m.interaction_id == Some(interaction))
    })
    .await;
    assert!(
        reply.content.contains("<https://reach.invalid/reach/blob/"),
        "{}",
        reply.content
    );
    reply
}

fn callbacks_for(em: &reach_discord_emulator::Emulator, interaction: u64) -> usize {
    em.callback_requests()
        .iter()
        .filter(|c| c.interaction_id == interaction)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_is_answered_by_one_callback_and_its_token_stays_sealed() {
    let (body, em) = TestBody::start_with_discord(CHANNEL).await;
    let mut operator = body.operator_after_genesis("emulated deployment").await;
    let asker = User::human(1_100_000_000_000_000_600, "asker");

    // One `/ask` -> exactly one callback, with the interaction's own token, carrying the cited
    // answer; no Create Message for it.
    let i1 = em.post_interaction(
        CHANNEL,
        &asker,
        "ask",
        "How does a port authenticate a call?",
    );
    let reply = cited_reply(&em, CHANNEL, i1).await;
    assert!(reply.mentions.is_empty(), "the bot never pings anyone");
    let calls: Vec<_> = em
        .callback_requests()
        .into_iter()
        .filter(|c| c.interaction_id == i1)
        .collect();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(
        calls[0].token_matched,
        "the callback carries the opened token"
    );
    assert!(
        !calls[0].authorization_sent,
        "a callback needs no bot token"
    );
    assert_eq!(calls[0].body["type"], 4);
    assert!(
        em.create_requests().is_empty(),
        "an `/ask` is answered by its callback, not a Create Message: {:?}",
        em.create_requests()
    );
    let trail = trail_until(&mut operator, &i1.to_string(), "KNOWN_SENT", WAIT).await;
    assert!(trail.contains("INTERACTION_CREATE"), "{trail}");
    assert!(
        trail.contains("/interactions/") && trail.contains(&format!("{{token:{i1}}}")),
        "the decision binds the token-free callback destination:\n{trail}"
    );

    // The same INTERACTION_CREATE redelivered after a resume: still one callback.
    em.script_redelivery_on_resume(3);
    assert!(em.drop_connection());
    let i2 = em.post_interaction(CHANNEL, &asker, "ask", "How do I rotate the trust root?");
    eventually(WAIT, "the second interaction's reply", || {
        em.bot_messages(CHANNEL)
            .into_iter()
            .find(|m| m.interaction_id == Some(i2))
    })
    .await;
    assert_eq!(
        callbacks_for(&em, i1),
        1,
        "a redelivered event must not call back again"
    );

    // The emulator accepts the callback, then drops the connection: UNKNOWN, never called back
    // again, reconciled from the interaction's original response.
    em.script_next_callback(Fault::CommitThenDrop);
    let i3 = em.post_interaction(CHANNEL, &asker, "ask", "What happens when a vault is lost?");
    let trail3 = trail_until(&mut operator, &i3.to_string(), "KNOWN_SENT", WAIT).await;
    assert!(trail3.contains("original_response"), "{trail3}");
    assert_eq!(
        callbacks_for(&em, i3),
        1,
        "a lost callback outcome is never called back again"
    );
    assert_eq!(
        em.bot_messages(CHANNEL)
            .into_iter()
            .filter(|m| m.interaction_id == Some(i3))
            .count(),
        1
    );

    // An expired interaction (10062): the callback is refused, the delivery is KNOWN_REJECTED
    // and nothing else is sent for it.
    em.script_next_callback(Fault::Reject {
        status: 404,
        code: 10062,
    });
    let i4 = em.post_interaction(
        CHANNEL,
        &asker,
        "ask",
        "How does a port authenticate a call?",
    );
    let trail4 = trail_until(&mut operator, &i4.to_string(), "KNOWN_REJECTED", WAIT).await;
    assert!(trail4.contains("10062"), "{trail4}");
    assert_eq!(callbacks_for(&em, i4), 1);
    assert!(
        !em.bot_messages(CHANNEL)
            .iter()
            .any(|m| m.interaction_id == Some(i4))
    );
    assert!(em.create_requests().is_empty());

    // The tokens exist in clear only in the two edge processes' memory: not on any trail, not
    // in any file of the body's state (core's vault, ward's store, every role's log).
    for id in [i1, i2, i3, i4] {
        let token = em.interaction_token(id);
        let t = reach_tests::trail_text(&mut operator, &id.to_string()).await;
        assert!(!t.contains(&token), "the token of {id} is on the trail");
        let leaked = files_containing(body.layout.root(), token.as_bytes());
        assert!(leaked.is_empty(), "the token of {id} is in {leaked:?}");
        for role in ["core", "ward", "ingress-edge", "egress-discord"] {
            assert!(
                !body.log(role).contains(&token),
                "the token of {id} is in {role}'s log"
            );
        }
    }
    println!("{trail}\n{trail3}");
    body.stop().await;
}

/// A cited answer longer than one Discord message (emoji count twice in UTF-16), as the
/// multi-part test builds it: only the model Portal writes past one message.
fn long_answer() -> String {
    let mut text = String::from("Each part of a long answer is its own delivery [1]. Rows [2].\n");
    for _ in 0..50 {
        text.push_str(&"🟩".repeat(20));
        text.push('\n');
    }
    text.push_str("Nothing is resent [1].");
    assert!(text.encode_utf16().count() > 2_000, "it needs two messages");
    text
}

/// A long answer to an `/ask`: part 1 is the interaction's one callback (Discord takes one per
/// interaction), every later part a follow-up message of the interaction, each sent once, in
/// order. Part 2's follow-up is committed by the emulator and its connection dropped: UNKNOWN,
/// never sent again, reconciled from the channel's pages (the message naming the interaction,
/// with exactly that content).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_ask_answer_is_one_callback_then_follow_ups() {
    let model = ModelEmulator::start().await.expect("model emulator");
    let (body, em) = TestBody::start_with_emulator_configured(
        Default::default(),
        &[CHANNEL],
        |manifest, layout| configure_portal(manifest, layout, &model, false),
        "info",
    )
    .await;
    let mut operator = body.operator_after_genesis("multi-part ask").await;
    let asker = User::human(1_100_000_000_000_000_601, "asker");
    let answer = long_answer();
    model.script(Script::Text(answer.clone()));
    em.script_next_follow_up(Fault::CommitThenDrop);
    let i1 = em.post_interaction(
        CHANNEL,
        &asker,
        "ask",
        "How does a port authenticate a call?",
    );
    eventually(WAIT, "the model call", || {
        (!model.requests().is_empty()).then_some(())
    })
    .await;
    let expected = render(
        &TurnView::Answer {
            text: answer,
            citations: cited_urls(&model),
        },
        ChannelPolicy::PostRefusals,
    );
    assert!(expected.len() >= 2, "{expected:?}");
    eventually(WAIT, "every part", || {
        (em.bot_messages(CHANNEL).len() >= expected.len()).then_some(())
    })
    .await;
    let trail = trail_until(&mut operator, &i1.to_string(), "channel_read", WAIT).await;
    // Give a duplicate the time to show up, should one be coming.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let got = em.bot_messages(CHANNEL);
    let contents: Vec<&str> = got.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(contents, expected, "the rendered parts, in order");
    assert_eq!(callbacks_for(&em, i1), 1, "part 1 is the callback");
    assert!(
        got.iter().all(|m| m.interaction_id == Some(i1)),
        "every part answers the interaction"
    );
    assert!(em.create_requests().is_empty(), "no channel message");
    let follow_ups = em.follow_up_requests();
    assert_eq!(
        follow_ups.len(),
        expected.len() - 1,
        "each later part once, the lost one never again"
    );
    for (m, r) in got[1..].iter().zip(&follow_ups) {
        assert_eq!(r.interaction_id, Some(i1));
        assert!(!r.authorization_sent);
        assert_eq!(r.body["content"].as_str(), Some(m.content.as_str()));
        assert_eq!(m.reply_to, None);
    }
    assert!(
        trail.contains(&format!(
            "/webhooks/{}/{{token:{i1}}}?wait=true",
            em.config().application_id
        )),
        "the follow-up's decision binds its token-free destination:\n{trail}"
    );
    let deadline = Instant::now() + WAIT;
    loop {
        let trail = reach_tests::trail_text(&mut operator, &i1.to_string()).await;
        let sent = trail
            .lines()
            .filter(|l| l.starts_with("ReachDelivery@1") && l.contains("outcome=KNOWN_SENT"))
            .count();
        if sent == expected.len() {
            break;
        }
        assert!(Instant::now() < deadline, "every part's delivery:\n{trail}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    body.stop().await;
}

/// A gate whose every message worker is held by Discord's rate limits (the channel's Create
/// Messages answered 429 sixteen times, each a retry after half a second, and the adapter
/// sending one request at a time into the channel's bucket) still answers an `/ask` inside
/// Discord's 3-second window: the interaction lane claims only interaction work, and an answer
/// committed inside the budget is claimed before older messages. The rate-limited replies
/// still land, each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_busy_with_rate_limited_messages_still_answers_an_ask_in_time() {
    const BUSY: u64 = 1_100_000_000_000_000_301;
    const HELD: usize = 8;
    let (body, em) = TestBody::start_with_discord(BUSY).await;
    let _operator = body.operator_after_genesis("busy gate").await;
    let bot = em.config().bot_user_id;
    for _ in 0..2 * HELD {
        em.script_next_create(Fault::RateLimit { retry_after: 0.5 });
    }
    let questions: Vec<u64> = (0..HELD as u64)
        .map(|k| {
            let asker = User::human(1_100_000_000_000_000_700 + k, "asker");
            em.post_user_message(
                BUSY,
                &asker,
                &format!("<@{bot}> How does a port authenticate a call? ({k})"),
            )
        })
        .collect();
    eventually(
        WAIT,
        "every message worker holding a rate-limited reply",
        || (em.create_requests().len() >= HELD).then_some(()),
    )
    .await;

    let asker = User::human(1_100_000_000_000_000_699, "asker");
    let i1 = em.post_interaction(BUSY, &asker, "ask", "How does a port authenticate a call?");
    cited_reply(&em, BUSY, i1).await;
    assert_eq!(callbacks_for(&em, i1), 1, "one callback, inside the window");

    for q in questions {
        let replies = eventually(WAIT, "the rate-limited reply", || {
            let n = em
                .bot_messages(BUSY)
                .into_iter()
                .filter(|m| m.reply_to == Some(q))
                .count();
            (n > 0).then_some(n)
        })
        .await;
        assert_eq!(replies, 1, "each rate-limited reply lands once");
    }
    body.stop().await;
}

/// Discord's 429 is waited out exactly: a short `retry_after` holds the next try back at least
/// that long, and one longer than a delivery's lease holds is never cut short — the reply is
/// settled rate-limited after that one request, and nothing more is sent (each early request
/// would be another 429, counted toward Discord's invalid-request ban).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_is_waited_out_and_never_cut_short() {
    const LIMITED: u64 = 1_100_000_000_000_000_302;
    let (body, em) = TestBody::start_with_discord(LIMITED).await;
    let mut operator = body.operator_after_genesis("rate limits").await;
    let bot = em.config().bot_user_id;
    let asker = User::human(1_100_000_000_000_000_720, "asker");
    let tries = |q: u64| -> Vec<Instant> {
        em.create_requests()
            .into_iter()
            .filter(|c| {
                c.body["message_reference"]["message_id"]
                    .as_str()
                    .and_then(|s| s.parse::<u64>().ok())
                    == Some(q)
            })
            .map(|c| c.received_at)
            .collect()
    };

    em.script_next_create(Fault::RateLimit { retry_after: 1.5 });
    let q1 = em.post_user_message(
        LIMITED,
        &asker,
        &format!("<@{bot}> How does a port authenticate a call?"),
    );
    trail_until(&mut operator, &q1.to_string(), "KNOWN_SENT", WAIT).await;
    let t = tries(q1);
    assert_eq!(t.len(), 2, "one 429, then the reply");
    let waited = t[1] - t[0];
    assert!(waited >= Duration::from_millis(1_500), "{waited:?}");

    em.script_next_create(Fault::RateLimit { retry_after: 30.0 });
    let q2 = em.post_user_message(
        LIMITED,
        &asker,
        &format!("<@{bot}> How do I rotate the trust root?"),
    );
    let trail = trail_until(&mut operator, &q2.to_string(), "KNOWN_REJECTED", WAIT).await;
    assert!(trail.contains("rate-limited"), "{trail}");
    // Past the point where a capped wait would have tried again.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        tries(q2).len(),
        1,
        "no request before Discord's retry_after"
    );
    assert!(
        !em.bot_messages(LIMITED)
            .iter()
            .any(|m| m.reply_to == Some(q2))
    );
    body.stop().await;
}
