//! Data-driven tables (expect-test; regenerate with `UPDATE_EXPECT=1`): the admission filter's
//! refusals, rendering, outcome classification and gateway URL rules.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use expect_test::{Expect, expect};
use reach_discord::edge::{self, ADAPTER_REVISION, EdgePolicy};
use reach_discord::gateway::{GatewayEvent, GatewayUrl};
use reach_discord::model::{Author, InteractionCreate, InteractionToken, MessageCreate, Snowflake};
use reach_discord::render::{self, ChannelPolicy, Citation, TurnView};
use reach_discord::rest::{self, Nonce};

const APP: Snowflake = Snowflake(10);
const BOT: Snowflake = Snowflake(20);
const GUILD: Snowflake = Snowflake(30);
const CHANNEL: Snowflake = Snowflake(40);
const THREAD: Snowflake = Snowflake(41);

fn policy() -> EdgePolicy {
    EdgePolicy {
        application_id: APP,
        bot_user_id: BOT,
        guilds: BTreeSet::from([GUILD]),
        channels: BTreeSet::from([CHANNEL, THREAD]),
        max_question_bytes: 64,
        adapter_revisions: BTreeSet::from([ADAPTER_REVISION.to_owned()]),
    }
}

fn message(f: impl FnOnce(&mut MessageCreate)) -> GatewayEvent {
    let mut m = MessageCreate {
        id: Snowflake(1000),
        channel_id: CHANNEL,
        guild_id: Some(GUILD),
        author: Author {
            id: Snowflake(7),
            bot: false,
        },
        webhook: false,
        content: "<@20> how do I deploy?".into(),
        mentions: vec![BOT],
        nonce: None,
    };
    f(&mut m);
    GatewayEvent::MessageCreate { seq: 1, message: m }
}

fn interaction(f: impl FnOnce(&mut InteractionCreate)) -> GatewayEvent {
    let mut i = InteractionCreate {
        id: Snowflake(2000),
        application_id: APP,
        kind: 2,
        channel_id: Some(CHANNEL),
        guild_id: Some(GUILD),
        user: Some(Author {
            id: Snowflake(7),
            bot: false,
        }),
        command_name: Some("ask".into()),
        option_text: Some("  what is a sigil? ".into()),
        token: InteractionToken("t".into()),
    };
    f(&mut i);
    GatewayEvent::InteractionCreate {
        seq: 1,
        interaction: i,
    }
}

#[test]
fn admission_table() {
    let cases: Vec<(&str, EdgePolicy, GatewayEvent)> = vec![
        ("mention in admitted channel", policy(), message(|_| {})),
        (
            "mention with nickname form",
            policy(),
            message(|m| m.content = "<@!20>   why?  ".into()),
        ),
        (
            "mention in admitted thread",
            policy(),
            message(|m| m.channel_id = THREAD),
        ),
        ("/ask in admitted channel", policy(), interaction(|_| {})),
        ("dm", policy(), message(|m| m.guild_id = None)),
        (
            "other guild",
            policy(),
            message(|m| m.guild_id = Some(Snowflake(31))),
        ),
        (
            "other channel",
            policy(),
            message(|m| m.channel_id = Snowflake(42)),
        ),
        ("bot author", policy(), message(|m| m.author.bot = true)),
        ("ourselves", policy(), message(|m| m.author.id = BOT)),
        ("webhook", policy(), message(|m| m.webhook = true)),
        (
            "no mention",
            policy(),
            message(|m| {
                m.mentions.clear();
                m.content = "hello".into()
            }),
        ),
        (
            "mention of someone else",
            policy(),
            message(|m| m.mentions = vec![Snowflake(99)]),
        ),
        (
            "only the mention",
            policy(),
            message(|m| m.content = "<@20>".into()),
        ),
        (
            "oversized",
            policy(),
            message(|m| m.content = format!("<@20> {}", "x".repeat(65))),
        ),
        (
            "exactly the limit",
            policy(),
            message(|m| m.content = format!("<@20> {}", "x".repeat(64))),
        ),
        (
            "/ask other command",
            policy(),
            interaction(|i| i.command_name = Some("help".into())),
        ),
        (
            "/ask other application",
            policy(),
            interaction(|i| i.application_id = Snowflake(11)),
        ),
        ("/ask in dm", policy(), interaction(|i| i.guild_id = None)),
        (
            "/ask by bot",
            policy(),
            interaction(|i| {
                i.user = Some(Author {
                    id: Snowflake(8),
                    bot: true,
                })
            }),
        ),
        (
            "/ask oversized",
            policy(),
            interaction(|i| i.option_text = Some("y".repeat(65))),
        ),
        (
            "adapter not admitted",
            EdgePolicy {
                adapter_revisions: BTreeSet::new(),
                ..policy()
            },
            message(|_| {}),
        ),
        ("not a question", policy(), GatewayEvent::Resumed),
    ];
    let mut out = String::new();
    for (name, policy, event) in cases {
        let line = match edge::admit(&policy, &event) {
            Ok(e) => format!(
                "admit {} id={} guild={} channel={} subject={} reply_to={:?} question={:?}",
                e.kind.as_str(),
                e.external_event_id,
                e.guild_id,
                e.channel_id,
                e.subject,
                e.reply_to,
                e.question
            ),
            Err(r) => format!("refuse {}", r.code()),
        };
        writeln!(out, "{name:<28} {line}").unwrap();
    }
    expect![[r#"
        mention in admitted channel  admit MESSAGE_CREATE id=1000 guild=30 channel=40 subject=7 reply_to=Some(1000) question="how do I deploy?"
        mention with nickname form   admit MESSAGE_CREATE id=1000 guild=30 channel=40 subject=7 reply_to=Some(1000) question="why?"
        mention in admitted thread   admit MESSAGE_CREATE id=1000 guild=30 channel=41 subject=7 reply_to=Some(1000) question="how do I deploy?"
        /ask in admitted channel     admit INTERACTION_CREATE id=2000 guild=30 channel=40 subject=7 reply_to=None question="what is a sigil?"
        dm                           refuse edge/dm
        other guild                  refuse edge/guild-not-admitted
        other channel                refuse edge/channel-not-admitted
        bot author                   refuse edge/bot-author
        ourselves                    refuse edge/bot-author
        webhook                      refuse edge/bot-author
        no mention                   refuse edge/no-trigger
        mention of someone else      refuse edge/no-trigger
        only the mention             refuse edge/empty
        oversized                    refuse edge/oversized
        exactly the limit            admit MESSAGE_CREATE id=1000 guild=30 channel=40 subject=7 reply_to=Some(1000) question="xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
        /ask other command           refuse edge/no-trigger
        /ask other application       refuse edge/application-mismatch
        /ask in dm                   refuse edge/dm
        /ask by bot                  refuse edge/bot-author
        /ask oversized               refuse edge/oversized
        adapter not admitted         refuse edge/adapter-not-admitted
        not a question               refuse edge/not-a-question
    "#]]
    .assert_eq(&out);
}

#[test]
fn digest_binds_content_and_is_stable_across_redelivery() {
    let p = policy();
    let a = edge::admit(&p, &message(|_| {})).unwrap();
    let again = edge::admit(&p, &message(|m| m.nonce = Some("ignored".into()))).unwrap();
    let changed = edge::admit(&p, &message(|m| m.content = "<@20> something else".into())).unwrap();
    assert_eq!(a.payload_digest, again.payload_digest);
    assert_eq!(a.external_event_id, changed.external_event_id);
    assert_ne!(a.payload_digest, changed.payload_digest);
    expect![[r#"
        reach.discord.edge-event@1
        platform=7:discord
        adapter_revision=21:discord-gateway-v10@1
        application_id=2:10
        kind=14:MESSAGE_CREATE
        external_event_id=4:1000
        guild_id=2:30
        channel_id=2:40
        subject=1:7
        question=16:how do I deploy?
        reply_to=4:1000
    "#]]
    .assert_eq(&String::from_utf8(a.canonical_bytes()).unwrap());
}

fn show_parts(parts: &[String]) -> String {
    let mut out = String::new();
    for (i, p) in parts.iter().enumerate() {
        writeln!(
            out,
            "--- part {} ({} units)\n{p}",
            i + 1,
            p.encode_utf16().count()
        )
        .unwrap();
    }
    out
}

fn check(view: TurnView, policy: ChannelPolicy, expect: Expect) {
    expect.assert_eq(&show_parts(&render::render(&view, policy)));
}

#[test]
fn render_table() {
    let cites = vec![
        Citation::new("https://example.org/reach/blob/0123456789abcdef0123456789abcdef01234567/docs/deploy.md#L10").unwrap().titled("Deploying `reach up`"),
        Citation::new("https://example.org/reach/blob/0123456789abcdef0123456789abcdef01234567/README.md").unwrap(),
    ];
    check(
        TurnView::Answer {
            text: "Run `reach up` [1]. See the README [2].\n".into(),
            citations: cites,
        },
        ChannelPolicy::PostRefusals,
        expect![[r#"
            --- part 1 (257 units)
            Run `reach up` [1]. See the README [2].

            Sources:
            [1] Deploying \`reach up\` <https://example.org/reach/blob/0123456789abcdef0123456789abcdef01234567/docs/deploy.md#L10>
            [2] <https://example.org/reach/blob/0123456789abcdef0123456789abcdef01234567/README.md>
        "#]],
    );
    check(
        TurnView::Refused,
        ChannelPolicy::PostRefusals,
        expect![[r#"
        --- part 1 (135 units)
        I can't answer that from the documentation I'm allowed to use, so I won't guess. Try rephrasing, or ask about something the docs cover.
    "#]],
    );
    check(
        TurnView::DependencyUnavailable,
        ChannelPolicy::PostRefusals,
        expect![[r#"
        --- part 1 (134 units)
        I can't answer right now: my copy of the documentation is out of date or a service I depend on is unavailable. Please ask again later.
    "#]],
    );
    check(TurnView::Refused, ChannelPolicy::Silent, expect![""]);
    check(
        TurnView::DependencyUnavailable,
        ChannelPolicy::Silent,
        expect![""],
    );
}

#[test]
fn split_keeps_code_fences_whole_small_limit() {
    let text =
        "Intro line.\n```rust\nfn a() {}\nfn b() {}\nfn c() {}\nfn d() {}\n```\nAfter the fence.";
    expect![[r#"
        --- part 1 (33 units)
        Intro line.
        ```rust
        fn a() {}
        ```
        --- part 2 (31 units)
        ```rust
        fn b() {}
        fn c() {}
        ```
        --- part 3 (38 units)
        ```rust
        fn d() {}
        ```
        After the fence.
    "#]]
    .assert_eq(&show_parts(&render::split(text, 40)));
}

/// Every part within the limit, and every part's fences balanced.
fn assert_well_formed(parts: &[String]) {
    for p in parts {
        assert!(
            p.encode_utf16().count() <= render::MAX_PART_UNITS,
            "part too long"
        );
        let fences = p
            .lines()
            .filter(|l| l.trim_start().starts_with("```"))
            .count();
        assert_eq!(fences % 2, 0, "unbalanced fence in part:\n{p}");
    }
}

#[test]
fn long_answer_splits_at_2000_without_breaking_a_fence() {
    let mut text = String::new();
    for i in 0..30 {
        writeln!(
            text,
            "Prose line {i:02} explaining the deployment in some detail."
        )
        .unwrap();
    }
    text.push_str("```toml\n");
    for i in 0..60 {
        writeln!(text, "key_{i:02} = \"a value that takes some room\"").unwrap();
    }
    text.push_str("```\nClosing words [1].");
    let cites = vec![
        Citation::new("https://example.org/r/blob/0123456789abcdef0123456789abcdef01234567/a.md")
            .unwrap(),
    ];
    let parts = render::render(
        &TurnView::Answer {
            text,
            citations: cites,
        },
        ChannelPolicy::PostRefusals,
    );
    assert_well_formed(&parts);
    let mut summary = String::new();
    for (i, p) in parts.iter().enumerate() {
        let first = p.lines().next().unwrap_or("");
        let last = p.lines().last().unwrap_or("");
        writeln!(
            summary,
            "part {} units={} first={first:?} last={last:?}",
            i + 1,
            p.encode_utf16().count()
        )
        .unwrap();
    }
    expect![[r#"
        part 1 units=1971 first="Prose line 00 explaining the deployment in some detail." last="```"
        part 2 units=1971 first="```toml" last="```"
        part 3 units=279 first="```toml" last="[1] <https://example.org/r/blob/0123456789abcdef0123456789abcdef01234567/a.md>"
    "#]]
    .assert_eq(&summary);
}

#[test]
fn overlong_answer_is_cut_to_the_part_limit() {
    let line = "word ".repeat(399); // 1995 units per line
    let text = std::iter::repeat_n(line.trim_end(), 8)
        .collect::<Vec<_>>()
        .join("\n");
    let parts = render::render(
        &TurnView::Answer {
            text,
            citations: vec![],
        },
        ChannelPolicy::PostRefusals,
    );
    assert_well_formed(&parts);
    assert_eq!(parts.len(), render::MAX_PARTS);
    expect!["(answer shortened)"].assert_eq(parts.last().unwrap().lines().last().unwrap());
}

#[test]
fn a_citation_title_is_one_inert_line() {
    let url = "https://example.org/r/blob/0123456789abcdef0123456789abcdef01234567/a.md";
    let title = |t: &str| {
        Citation::new(url)
            .unwrap()
            .titled(t)
            .title()
            .map(str::to_owned)
    };
    // Markdown and mention syntax are escaped, so they read as written and format nothing.
    expect![[r#"Some("max\\_connections \\*and\\* \\`Vec\\<T>\\` \\[x\\](y) \\|\\|s\\|\\| \\~\\~z\\~\\~ \\<@123> a\\\\b")"#]]
        .assert_eq(&format!(
            "{:?}",
            title("max_connections *and* `Vec<T>` [x](y) ||s|| ~~z~~ <@123> a\\b")
        ));
    // Lines and control characters collapse to one line; a blank title adds nothing.
    assert_eq!(
        title("Two\n  lines\tand\u{7}bell").as_deref(),
        Some("Two lines and bell")
    );
    assert_eq!(title(" \n\t"), None);
    // A long title is cut to the limit, marked.
    let long = title(&"word ".repeat(40)).unwrap();
    assert_eq!(long.chars().count(), render::MAX_CITATION_TITLE_CHARS);
    assert!(long.ends_with('…'), "{long}");
}

#[test]
fn titles_are_left_out_rather_than_split_an_answer() {
    let url = "https://example.org/r/blob/0123456789abcdef0123456789abcdef01234567/a.md";
    let cites = |n: usize| -> Vec<Citation> {
        (0..n)
            .map(|i| {
                Citation::new(url)
                    .unwrap()
                    .titled(&format!("Section {i} {}", "t".repeat(60)))
            })
            .collect()
    };
    let answer = |len: usize| TurnView::Answer {
        text: "a".repeat(len),
        citations: cites(3),
    };
    // Room for the titles: one message with them.
    let short = render::render(&answer(1_000), ChannelPolicy::PostRefusals);
    assert_eq!(short.len(), 1);
    assert!(short[0].contains("[1] Section 0 "), "{}", short[0]);
    // Room for the links only: one message without them.
    let long = render::render(&answer(1_600), ChannelPolicy::PostRefusals);
    assert_eq!(long.len(), 1, "{long:?}");
    assert!(long[0].contains(&format!("[1] <{url}>")), "{}", long[0]);
    assert_well_formed(&long);
}

#[test]
fn citation_and_nonce_validation() {
    let mut out = String::new();
    for url in [
        "https://ok.example/a/b",
        "http://plain.example/",
        "https://has space",
        "https://x/<y>",
        "https://",
    ] {
        writeln!(out, "citation {url:?}: {}", Citation::new(url).is_ok()).unwrap();
    }
    for n in [
        "abc",
        "",
        "a-b_C9",
        "has space",
        "1234567890123456789012345",
        "12345678901234567890123456",
    ] {
        writeln!(out, "nonce {n:?}: {}", Nonce::new(n).is_ok()).unwrap();
    }
    let d = reach_digest::Sha256Digest::of(b"intent");
    writeln!(out, "derived nonce: {}", Nonce::derive(&d)).unwrap();
    expect![[r#"
        citation "https://ok.example/a/b": true
        citation "http://plain.example/": false
        citation "https://has space": false
        citation "https://x/<y>": false
        citation "https://": false
        nonce "abc": true
        nonce "": false
        nonce "a-b_C9": true
        nonce "has space": false
        nonce "1234567890123456789012345": true
        nonce "12345678901234567890123456": false
        derived nonce: 282bcbc3f0a34a8a4ac6f00c2
    "#]]
    .assert_eq(&out);
}

#[test]
fn outcome_classification_table() {
    let mut headers = http::HeaderMap::new();
    headers.insert("retry-after", http::HeaderValue::from_static("3"));
    let empty = http::HeaderMap::new();
    let cases: Vec<(u16, &http::HeaderMap, &str)> = vec![
        (200, &empty, r#"{"id":"123","content":"x"}"#),
        (201, &empty, r#"{"content":"no id"}"#),
        (
            400,
            &empty,
            r#"{"message":"Invalid Form Body","code":50035}"#,
        ),
        (
            403,
            &empty,
            r#"{"message":"Missing Permissions","code":50013}"#,
        ),
        (404, &empty, "not json"),
        (429, &empty, r#"{"retry_after":0.25,"global":true}"#),
        (429, &headers, "{}"),
        (429, &empty, r#"{"retry_after":1e300}"#),
        (500, &empty, "{}"),
        (503, &empty, "{}"),
        (302, &empty, "{}"),
    ];
    let mut out = String::new();
    for (status, h, body) in cases {
        writeln!(
            out,
            "{status} {body:<50} => {:?}",
            rest::classify(status, h, body.as_bytes())
        )
        .unwrap();
    }
    expect![[r#"
        200 {"id":"123","content":"x"}                         => KnownSent { message_id: 123 }
        201 {"content":"no id"}                                => Unknown { reason: "discord/2xx-without-id" }
        400 {"message":"Invalid Form Body","code":50035}       => KnownRejected { status: 400, code: Some(50035) }
        403 {"message":"Missing Permissions","code":50013}     => KnownRejected { status: 403, code: Some(50013) }
        404 not json                                           => KnownRejected { status: 404, code: None }
        429 {"retry_after":0.25,"global":true}                 => RateLimited { retry_after: 250ms, global: true }
        429 {}                                                 => RateLimited { retry_after: 3s, global: false }
        429 {"retry_after":1e300}                              => RateLimited { retry_after: 3600s, global: false }
        500 {}                                                 => Unknown { reason: "discord/status-500" }
        503 {}                                                 => Unknown { reason: "discord/status-503" }
        302 {}                                                 => Unknown { reason: "discord/status-302" }
    "#]]
    .assert_eq(&out);
}

#[test]
fn gateway_url_table() {
    let mut out = String::new();
    for url in [
        "wss://gateway.discord.gg",
        "wss://gateway-us-east1-b.discord.gg/?v=10&encoding=json",
        "ws://127.0.0.1:4000",
        "ws://[::1]:4000/x",
        "ws://localhost:4000",
        "ws://10.0.0.1:4000",
        "ws://127.0.0.2:4000",
        "https://gateway.discord.gg",
        "wss://user@gateway.discord.gg",
        // Found by the discord_gateway fuzz target: accepted as host `::01`, port 0.
        "ws://::01:0",
        "ws://[::01]:4000",
    ] {
        let r = GatewayUrl::parse(url).map(|u| u.connect_url());
        writeln!(out, "{url:<58} {r:?}").unwrap();
    }
    expect![[r#"
        wss://gateway.discord.gg                                   Ok("wss://gateway.discord.gg/?v=10&encoding=json")
        wss://gateway-us-east1-b.discord.gg/?v=10&encoding=json    Ok("wss://gateway-us-east1-b.discord.gg/?v=10&encoding=json")
        ws://127.0.0.1:4000                                        Ok("ws://127.0.0.1:4000/?v=10&encoding=json")
        ws://[::1]:4000/x                                          Ok("ws://[::1]:4000/x?v=10&encoding=json")
        ws://localhost:4000                                        Err(PlainNotLoopback("localhost"))
        ws://10.0.0.1:4000                                         Err(PlainNotLoopback("10.0.0.1"))
        ws://127.0.0.2:4000                                        Err(PlainNotLoopback("127.0.0.2"))
        https://gateway.discord.gg                                 Err(Scheme("https"))
        wss://user@gateway.discord.gg                              Err(Malformed("bad authority"))
        ws://::01:0                                                Err(Malformed("IPv6 literal without brackets"))
        ws://[::01]:4000                                           Ok("ws://[::01]:4000/?v=10&encoding=json")
    "#]]
    .assert_eq(&out);
}

/// The gateway `GET /gateway/bot` names is used only when it is the configured one (scheme,
/// host, port): a REST answer never moves the gateway connection.
#[test]
fn gateway_bot_url_table() {
    let configured = GatewayUrl::parse("wss://gateway.discord.gg/?v=10&encoding=json").unwrap();
    let mut out = String::new();
    for answered in [
        "wss://gateway.discord.gg",
        "wss://GATEWAY.discord.gg",
        "wss://gateway.discord.gg:443/",
        "wss://gateway.discord.gg:8443",
        "wss://gateway.discord.gg.example",
        "wss://evil.example",
        "ws://gateway.discord.gg",
        "ws://127.0.0.1:443",
        "not a url",
    ] {
        let r = configured.same_gateway(answered).map(|u| u.connect_url());
        writeln!(out, "{answered:<34} {r:?}").unwrap();
    }
    expect![[r#"
        wss://gateway.discord.gg           Some("wss://gateway.discord.gg/?v=10&encoding=json")
        wss://GATEWAY.discord.gg           Some("wss://gateway.discord.gg/?v=10&encoding=json")
        wss://gateway.discord.gg:443/      Some("wss://gateway.discord.gg/?v=10&encoding=json")
        wss://gateway.discord.gg:8443      None
        wss://gateway.discord.gg.example   None
        wss://evil.example                 None
        ws://gateway.discord.gg            None
        ws://127.0.0.1:443                 None
        not a url                          None
    "#]]
    .assert_eq(&out);
}
