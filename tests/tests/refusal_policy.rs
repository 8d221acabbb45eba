//! An expired corpus and the channel's refusal policy, end to end: once the active snapshot is
//! past its freshness, core answers DEPENDENCY_UNAVAILABLE without grounding anything; a channel
//! that posts refusals gets exactly the honest text as a reply, a silent channel gets nothing,
//! and both turns are on the trail.

use std::time::{Duration, Instant};

use reach_discord::render::UNAVAILABLE_TEXT;
use reach_discord_emulator::User;
use reach_tests::{TestBody, trail_until};

const POSTING: u64 = 1_100_000_000_000_000_410;
const SILENT: u64 = 1_100_000_000_000_000_420;
const WAIT: Duration = Duration::from_secs(30);

fn role<'m>(m: &'m mut reach_manifest::Manifest, name: &str) -> &'m mut toml::Table {
    &mut m
        .roles
        .iter_mut()
        .find(|r| r.name.as_str() == name)
        .unwrap_or_else(|| panic!("{name} role"))
        .settings
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_corpus_is_refused_per_channel_policy() {
    let (body, em) = TestBody::start_with_emulator(
        Default::default(),
        &[POSTING, SILENT],
        |m| {
            // The default corpus serves for one second after activation.
            role(m, "corpus-builder").insert("freshness_secs".into(), toml::Value::Integer(1));
            let mut by_channel = toml::Table::new();
            by_channel.insert(SILENT.to_string(), "silent".into());
            role(m, "core").insert("refusals_by_channel".into(), by_channel.into());
        },
        "info",
    )
    .await;
    let mut operator = body.operator_after_genesis("expired corpus drill").await;
    let bot = em.config().bot_user_id;
    let asker = User::human(1_100_000_000_000_000_430, "asker");
    tokio::time::sleep(Duration::from_millis(1_500)).await;

    let ask = |channel| {
        em.post_user_message(
            channel,
            &asker,
            &format!("<@{bot}> How does a port authenticate a call?"),
        )
    };
    let (posted, silent) = (ask(POSTING), ask(SILENT));

    // The posting channel gets the honest text, once, as a reply, with no citation.
    let deadline = Instant::now() + WAIT;
    let reply = loop {
        if let Some(m) = em
            .bot_messages(POSTING)
            .into_iter()
            .find(|m| m.reply_to == Some(posted))
        {
            break m;
        }
        assert!(Instant::now() < deadline, "no refusal was posted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(reply.content, UNAVAILABLE_TEXT);
    let trail = trail_until(&mut operator, &posted.to_string(), "KNOWN_SENT", WAIT).await;
    assert!(trail.contains("DEPENDENCY_UNAVAILABLE"), "{trail}");
    assert!(!trail.contains("CorpusEvidenceBundle"), "{trail}");

    // The silent channel's turn ends the same way, with no intent and nothing posted.
    let trail = trail_until(
        &mut operator,
        &silent.to_string(),
        "DEPENDENCY_UNAVAILABLE",
        WAIT,
    )
    .await;
    assert!(!trail.contains("DiscordDeliveryIntent"), "{trail}");
    assert!(em.bot_messages(SILENT).is_empty());
    assert_eq!(em.bot_messages(POSTING).len(), 1);
    body.stop().await;
}
