//! A long answer end to end (issue #7, rendering): all eight roles as processes, the Discord
//! emulator and the model emulator. An answer longer than one Discord message is delivered as
//! every one of its parts, in order, each exactly once under its own nonce, each replying to the
//! question; the messages are exactly what rendering produced (fences closed and reopened at
//! the split, never broken). A lost outcome of part 1 holds part 2 until reconciliation proves
//! part 1 was sent; nothing is resent. A part Discord refuses stops the rest.
//!
//! The answer comes through the model Portal because neither cognition writes past one message
//! in plain text (the local one quotes at most three sentences; the Portal asks for at most
//! 1,200 characters): it is emoji-heavy, so its 1,200 characters take more than 2,000 UTF-16
//! code units, the unit rendering counts in.

use std::time::{Duration, Instant};

use reach_discord::render::{ChannelPolicy, TurnView, render};
use reach_discord_emulator::{EmulatedMessage, Emulator, Fault, User};
use reach_model_emulator::{ModelEmulator, Script};
use reach_tests::{TestBody, cited_urls, configure_portal, eventually, trail_until};

const CHANNEL: u64 = 1_100_000_000_000_000_200;
/// A bound on waiting for an effect, so a failure is a clear message rather than a hang.
const WAIT: Duration = Duration::from_secs(45);

/// A cited answer of at most 1,200 characters whose emoji make it longer than one message, with
/// a code fence the split falls inside.
fn long_answer() -> String {
    let mut text = String::from(
        "Each part of a long answer is its own delivery [1]. The board below shows one row per \
         check [2].\n```text\n",
    );
    for _ in 0..50 {
        text.push_str(&"🟩".repeat(20));
        text.push('\n');
    }
    text.push_str("```\nNothing is resent [1].");
    assert!(text.chars().count() <= 1_200, "the Portal accepts it");
    assert!(text.encode_utf16().count() > 2_000, "it needs two messages");
    text
}

fn replies(em: &Emulator, q: u64) -> Vec<EmulatedMessage> {
    em.bot_messages(CHANNEL)
        .into_iter()
        .filter(|m| m.reply_to == Some(q))
        .collect()
}

/// How many Create Message requests carried `nonce`.
fn creates_with(em: &Emulator, nonce: &str) -> usize {
    em.create_requests()
        .iter()
        .filter(|r| r.body["nonce"].as_str() == Some(nonce))
        .count()
}

/// The trail without its effects (each repeats a part's whole text): record, id and the rest.
fn headlines(trail: &str) -> String {
    trail
        .lines()
        .map(|l| {
            let Some(a) = l.find(" effect=") else {
                return l.to_owned();
            };
            // The field after the effect: the next " key=" that starts a known field.
            let b = [" generation=", " message_id=", " nonce="]
                .iter()
                .filter_map(|k| l[a..].find(k).map(|i| a + i))
                .min()
                .unwrap_or(l.len());
            format!("{}{}", &l[..a], &l[b..])
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether every fence a message opens, it closes.
fn fences_balanced(text: &str) -> bool {
    text.lines()
        .filter(|l| l.trim_start().starts_with("```"))
        .count()
        % 2
        == 0
}

/// Waits for all `expected` parts replying to `q`, then checks what a user sees: exactly those
/// messages, in order, each within Discord's limit with its fences balanced, each under its own
/// nonce sent once, none pinging anyone.
async fn assert_delivered_in_parts(em: &Emulator, q: u64, expected: &[String]) {
    eventually(WAIT, "every part of the answer", || {
        (replies(em, q).len() >= expected.len()).then_some(())
    })
    .await;
    // Give a duplicate the time to show up, should one be coming.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let got = replies(em, q);
    let contents: Vec<&str> = got.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(
        contents, expected,
        "the messages are the rendered parts, in order"
    );
    assert_eq!(contents.concat(), expected.concat());
    let mut nonces = std::collections::HashSet::new();
    for m in &got {
        assert!(m.content.chars().count() <= 2_000, "{}", m.content.len());
        assert!(fences_balanced(&m.content), "{}", m.content);
        assert!(m.mentions.is_empty(), "the bot never pings anyone");
        let nonce = m.nonce.clone().expect("a nonce");
        assert!(!nonce.is_empty() && nonce.len() <= 25, "{nonce}");
        assert_eq!(creates_with(em, &nonce), 1, "part {nonce} was sent once");
        assert!(nonces.insert(nonce), "each part has its own nonce");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_answer_is_delivered_as_every_part_in_order_once() {
    let model = ModelEmulator::start().await.expect("model emulator");
    let (body, em) = TestBody::start_with_emulator_configured(
        Default::default(),
        &[CHANNEL],
        |manifest, layout| configure_portal(manifest, layout, &model, false),
        "info",
    )
    .await;
    let mut operator = body.operator_after_genesis("multi-part deployment").await;
    let bot = em.config().bot_user_id;
    let asker = User::human(1_100_000_000_000_000_500, "asker");
    let answer = long_answer();

    // A long answer: every part, in order, once.
    model.script(Script::Text(answer.clone()));
    let q1 = em.post_user_message(
        CHANNEL,
        &asker,
        &format!("<@{bot}> How does a port authenticate a call?"),
    );
    eventually(WAIT, "the model call", || {
        (!model.requests().is_empty()).then_some(())
    })
    .await;
    let view = TurnView::Answer {
        text: answer.clone(),
        citations: cited_urls(&model),
    };
    let expected = render(&view, ChannelPolicy::PostRefusals);
    assert!(expected.len() >= 2, "{expected:?}");
    assert_delivered_in_parts(&em, q1, &expected).await;
    let trail = trail_until(
        &mut operator,
        &q1.to_string(),
        "DeliveryPart",
        Duration::from_secs(5),
    )
    .await;
    let sent = trail
        .lines()
        .filter(|l| l.starts_with("ReachDelivery@1") && l.contains("outcome=KNOWN_SENT"))
        .count();
    assert_eq!(sent, expected.len(), "every part's delivery:\n{trail}");
    assert!(trail.contains("delivery=OPENED"), "{trail}");
    println!("{}", headlines(&trail));

    // Part 1's outcome is lost (the emulator commits it, then drops the connection): part 2
    // waits until the channel read finds part 1's nonce, and nothing is resent.
    model.script(Script::Text(answer.clone()));
    em.script_next_create(Fault::CommitThenDrop);
    let q2 = em.post_user_message(
        CHANNEL,
        &asker,
        &format!("<@{bot}> How does a port authenticate a call, once more?"),
    );
    eventually(WAIT, "the second model call", || {
        (model.requests().len() == 2).then_some(())
    })
    .await;
    let view = TurnView::Answer {
        text: answer,
        citations: cited_urls(&model),
    };
    let expected = render(&view, ChannelPolicy::PostRefusals);
    let deadline = Instant::now() + WAIT;
    let trail = loop {
        let trail = reach_tests::trail_text(&mut operator, &q2.to_string()).await;
        if trail.contains("DeliveryReconciliation") && replies(&em, q2).len() >= expected.len() {
            break trail;
        }
        assert!(
            Instant::now() < deadline,
            "part 1 reconciled and every part delivered within {WAIT:?}; {} of {} parts seen:\n{}",
            replies(&em, q2).len(),
            expected.len(),
            headlines(&trail)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        trail.contains("evidence_kind=MESSAGE_FOUND"),
        "{}",
        headlines(&trail)
    );
    assert_delivered_in_parts(&em, q2, &expected).await;
    println!("{}", headlines(&trail));

    // Discord refuses part 1 (a 400 with its code): the rest is never sent, and the trail says
    // so.
    model.script(Script::Text(long_answer()));
    em.script_next_create(Fault::Reject {
        status: 400,
        code: 50_035,
    });
    let q3 = em.post_user_message(
        CHANNEL,
        &asker,
        // Worded in the docs' own terms: a question padded with words they never use
        // ("a third time") is refused by the corpus gate before any model call.
        &format!("<@{bot}> How does a port authenticate a call between roles?"),
    );
    let trail = trail_until(&mut operator, &q3.to_string(), "NEVER_SENT", WAIT).await;
    assert!(
        trail.contains("outcome=KNOWN_REJECTED"),
        "{}",
        headlines(&trail)
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(replies(&em, q3).is_empty(), "nothing after a refused part");
    println!("{}", headlines(&trail));
    body.stop().await;
}
