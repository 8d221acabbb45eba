//! Gateway text frames (crates/discord `gateway::decode_dispatch`, the reader's own path) and
//! the edge admission filter (`edge::admit`) over what they yield.
//!
//! Promised: an admitted event carries a non-empty question of at most `max_question_bytes`,
//! from an admitted guild and channel, by a non-bot author, with the digest of its canonical
//! bytes; every refusal is one of `EdgeRefusal`'s `edge/...` codes.
#![no_main]

use std::collections::BTreeSet;

use libfuzzer_sys::fuzz_target;
use reach_digest::Sha256Digest;
use reach_discord::edge::{self, ADAPTER_REVISION, EdgePolicy, EdgeRefusal};
use reach_discord::gateway::{GatewayUrl, decode_dispatch};
use reach_discord::{GatewayEvent, InteractionCreate, MessageCreate, Snowflake};

const CODES: &[&str] = &[
    "edge/adapter-not-admitted",
    "edge/application-mismatch",
    "edge/dm",
    "edge/guild-not-admitted",
    "edge/channel-not-admitted",
    "edge/bot-author",
    "edge/no-trigger",
    "edge/empty",
    "edge/oversized",
    "edge/not-a-question",
];

fn policy() -> EdgePolicy {
    EdgePolicy {
        application_id: Snowflake(7),
        bot_user_id: Snowflake(42),
        guilds: BTreeSet::from([Snowflake(10)]),
        channels: BTreeSet::from([Snowflake(20), Snowflake(21)]),
        // Small, so the fuzzer reaches the bound.
        max_question_bytes: 64,
        adapter_revisions: BTreeSet::from([ADAPTER_REVISION.to_owned()]),
    }
}

fn check(policy: &EdgePolicy, event: &GatewayEvent) {
    match edge::admit(policy, event) {
        Ok(e) => {
            assert!(!e.question.is_empty(), "admitted an empty question");
            assert!(
                e.question.len() <= policy.max_question_bytes,
                "question over the bound"
            );
            assert!(policy.guilds.contains(&e.guild_id), "guild not admitted");
            assert!(
                policy.channels.contains(&e.channel_id),
                "channel not admitted"
            );
            assert_ne!(e.subject, policy.bot_user_id, "the bot asked itself");
            assert_eq!(e.application_id, policy.application_id);
            assert_eq!(e.payload_digest, Sha256Digest::of(e.canonical_bytes()));
            assert!(matches!(
                event,
                GatewayEvent::MessageCreate { .. } | GatewayEvent::InteractionCreate { .. }
            ));
        }
        Err(r) => {
            let code = r.code();
            assert!(CODES.contains(&code.as_str()), "untyped refusal {code}");
            if !matches!(
                event,
                GatewayEvent::MessageCreate { .. } | GatewayEvent::InteractionCreate { .. }
            ) {
                assert_eq!(r, EdgeRefusal::NotAQuestion);
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(frame) = std::str::from_utf8(data) else {
        return;
    };
    let url = GatewayUrl::parse("wss://gateway.discord.gg").expect("the default gateway URL");
    let policy = policy();
    if let Some(event) = decode_dispatch(frame, &url) {
        if let GatewayEvent::InteractionCreate { interaction, .. } = &event {
            assert_eq!(
                interaction.kind,
                reach_discord::model::INTERACTION_APPLICATION_COMMAND
            );
        }
        check(&policy, &event);
    }
    // The `d` object straight into both dispatch parsers (REST message objects too).
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(frame) {
        let d = value.get("d").cloned().unwrap_or(value);
        if let Ok(message) = MessageCreate::from_json(d.clone()) {
            check(&policy, &GatewayEvent::MessageCreate { seq: 1, message });
        }
        if let Ok(interaction) = InteractionCreate::from_json(d) {
            check(
                &policy,
                &GatewayEvent::InteractionCreate {
                    seq: 1,
                    interaction,
                },
            );
        }
    }
    // A resume URL is judged by the same rule as the configured one.
    if let Ok(u) = GatewayUrl::parse(frame) {
        let base = u.connect_url();
        assert!(base.starts_with("wss://") || base.starts_with("ws://"));
        // The authority is a name, an IPv4 address or a bracketed IPv6 literal, then a port.
        let rest = base.split_once("://").map_or("", |(_, r)| r);
        let authority = rest.split(['/', '?']).next().unwrap_or("");
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !authority.ends_with(']') => (h, Some(p)),
            _ => (authority, None),
        };
        assert!(
            port.is_none_or(|p| p.parse::<u16>().is_ok()),
            "bad port in {base}"
        );
        assert!(
            !host.contains(':') || (host.starts_with('[') && host.ends_with(']')),
            "{base}"
        );
        if !u.is_secure() {
            let ip: std::net::IpAddr = host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse()
                .expect("plain ws:// only to an IP literal");
            assert!(ip.is_loopback(), "plain ws:// to {ip}");
        }
    }
});
