//! The Gateway v10 client against the emulator: identify, heartbeat, resume with redelivery,
//! INVALID_SESSION, RECONNECT, zombie detection, a refused token, and the IDENTIFY budget by
//! Discord's `session_start_limit` across restarts and outages.

mod common;

use common::*;
use reach_discord::Snowflake;
use reach_discord::gateway::{self, GatewayConfig, GatewayEvent, GatewayUrl};
use reach_discord_emulator::User;

fn message_id(e: &GatewayEvent) -> Option<Snowflake> {
    match e {
        GatewayEvent::MessageCreate { message, .. } => Some(message.id),
        _ => None,
    }
}

#[tokio::test]
async fn identify_ready_and_heartbeat() {
    let em = emulator().await;
    let (handle, mut rx) = gateway(&em);
    let ready = ready(&mut rx).await;
    let GatewayEvent::Ready {
        user_id,
        application_id,
        ..
    } = ready
    else {
        unreachable!()
    };
    assert_eq!(user_id, Snowflake(em.config().bot_user_id));
    assert_eq!(application_id, Some(Snowflake(em.config().application_id)));
    // Minimal intents: GUILDS | GUILD_MESSAGES, no MESSAGE_CONTENT.
    assert_eq!(em.gateway_counts().last_intents, (1 << 0) | (1 << 9));
    eventually("three acknowledged heartbeats", || handle.stats().acks >= 3).await;
    assert!(em.gateway_counts().heartbeats >= 3);
    let stats = handle.stats();
    assert_eq!((stats.identifies, stats.resumes, stats.zombies), (1, 0, 0));

    // A user's mention arrives as a typed MESSAGE_CREATE.
    let bot = em.config().bot_user_id;
    let id = em.post_user_message(
        CHANNEL,
        &User::human(42, "ada"),
        &format!("<@{bot}> what is reach?"),
    );
    let e = next_matching(&mut rx, "MESSAGE_CREATE", |e| message_id(e).is_some()).await;
    let GatewayEvent::MessageCreate { message, .. } = e else {
        unreachable!()
    };
    assert_eq!(message.id, Snowflake(id));
    assert_eq!(message.mentions, vec![Snowflake(bot)]);
    assert_eq!(
        message.guild_id,
        Some(Snowflake(em.config().default_guild_id))
    );
    assert!(!message.author.bot);
    handle.shutdown().await;
}

#[tokio::test]
async fn resume_after_drop_replays_missed_and_redelivers_with_the_same_id() {
    let em = emulator().await;
    let (handle, mut rx) = gateway(&em);
    ready(&mut rx).await;
    let user = User::human(42, "ada");
    let first = em.post_user_message(CHANNEL, &user, "first");
    let e = next_matching(&mut rx, "first", |e| message_id(e).is_some()).await;
    assert_eq!(message_id(&e), Some(Snowflake(first)));

    // Discord redelivers the last dispatch after the resume, and one arrives while we are away.
    em.script_redelivery_on_resume(1);
    assert!(em.drop_connection());
    eventually("the emulator sees the drop", || !em.connected()).await;
    let missed = em.post_user_message(CHANNEL, &user, "while away");

    let reconnecting = next_matching(&mut rx, "Reconnecting", |e| {
        matches!(e, GatewayEvent::Reconnecting { .. })
    })
    .await;
    assert_eq!(
        reconnecting,
        GatewayEvent::Reconnecting {
            reason: "closed",
            resume: true
        }
    );
    let mut seen = Vec::new();
    loop {
        let e = next_matching(&mut rx, "replay", |e| {
            message_id(e).is_some() || *e == GatewayEvent::Resumed
        })
        .await;
        match e {
            GatewayEvent::Resumed => break,
            other => seen.push(message_id(&other).expect("message")),
        }
    }
    // The redelivered event carries the same id as its first delivery; the missed one comes
    // once. The client does not deduplicate: that is the ledger's job.
    assert_eq!(seen, vec![Snowflake(first), Snowflake(missed)]);
    let counts = em.gateway_counts();
    assert_eq!((counts.identifies, counts.resumes), (1, 1));
    // The resume went to READY's resume_gateway_url, not the identify URL.
    assert_eq!(counts.resume_connections, 1);
    assert_eq!(handle.stats().resumes, 1);
    handle.shutdown().await;
}

#[tokio::test]
async fn invalid_session_makes_the_client_identify_again() {
    let em = emulator().await;
    let (handle, mut rx) = gateway(&em);
    let GatewayEvent::Ready {
        session_id: first, ..
    } = ready(&mut rx).await
    else {
        unreachable!()
    };
    assert!(em.invalidate_session());
    let e = next_matching(&mut rx, "Reconnecting", |e| {
        matches!(e, GatewayEvent::Reconnecting { .. })
    })
    .await;
    assert_eq!(
        e,
        GatewayEvent::Reconnecting {
            reason: "invalid-session",
            resume: false
        }
    );
    let GatewayEvent::Ready {
        session_id: second, ..
    } = ready(&mut rx).await
    else {
        unreachable!()
    };
    assert_ne!(first, second);
    let counts = em.gateway_counts();
    assert_eq!((counts.identifies, counts.resumes), (2, 0));
    handle.shutdown().await;
}

#[tokio::test]
async fn reconnect_opcode_resumes_the_session() {
    let em = emulator().await;
    let (handle, mut rx) = gateway(&em);
    ready(&mut rx).await;
    assert!(em.force_reconnect());
    let e = next_matching(&mut rx, "Reconnecting", |e| {
        matches!(e, GatewayEvent::Reconnecting { .. })
    })
    .await;
    assert_eq!(
        e,
        GatewayEvent::Reconnecting {
            reason: "reconnect-opcode",
            resume: true
        }
    );
    next_matching(&mut rx, "RESUMED", |e| *e == GatewayEvent::Resumed).await;
    // Events keep flowing on the resumed session.
    let id = em.post_user_message(CHANNEL, &User::human(42, "ada"), "after");
    let e = next_matching(&mut rx, "MESSAGE_CREATE", |e| message_id(e).is_some()).await;
    assert_eq!(message_id(&e), Some(Snowflake(id)));
    assert_eq!(em.gateway_counts().resumes, 1);
    handle.shutdown().await;
}

#[tokio::test]
async fn unacknowledged_heartbeat_is_a_zombie_and_the_client_resumes() {
    let em = emulator().await;
    let (handle, mut rx) = gateway(&em);
    ready(&mut rx).await;
    em.stop_acking(true);
    let e = next_matching(&mut rx, "Reconnecting", |e| {
        matches!(e, GatewayEvent::Reconnecting { .. })
    })
    .await;
    assert_eq!(
        e,
        GatewayEvent::Reconnecting {
            reason: "zombie",
            resume: true
        }
    );
    em.stop_acking(false);
    next_matching(&mut rx, "RESUMED", |e| *e == GatewayEvent::Resumed).await;
    assert_eq!(handle.stats().zombies, 1);
    handle.shutdown().await;
}

#[tokio::test]
async fn wrong_token_is_fatal() {
    let em = emulator().await;
    let url = GatewayUrl::parse(&em.gateway_url()).expect("url");
    let token = reach_discord::BotToken::from_bytes(b"not-the-token").expect("token");
    let (handle, mut rx) =
        gateway::spawn(GatewayConfig::loopback(url, token, gateway::intents(false)));
    let e = next_matching(&mut rx, "Fatal", |e| {
        matches!(e, GatewayEvent::Fatal { .. })
    })
    .await;
    assert_eq!(e, GatewayEvent::Fatal { code: 4004 });
    assert_eq!(em.gateway_counts().bad_tokens, 1);
    handle.shutdown().await;
}

#[tokio::test]
async fn ask_interaction_arrives_typed() {
    let em = emulator().await;
    let (handle, mut rx) = gateway(&em);
    ready(&mut rx).await;
    let id = em.post_interaction(CHANNEL, &User::human(42, "ada"), "ask", "how do I deploy?");
    let e = next_matching(&mut rx, "INTERACTION_CREATE", |e| {
        matches!(e, GatewayEvent::InteractionCreate { .. })
    })
    .await;
    let GatewayEvent::InteractionCreate { interaction, .. } = e else {
        unreachable!()
    };
    assert_eq!(interaction.id, Snowflake(id));
    assert_eq!(interaction.command_name.as_deref(), Some("ask"));
    assert_eq!(interaction.option_text.as_deref(), Some("how do I deploy?"));
    assert_eq!(interaction.user.map(|u| u.id), Some(Snowflake(42)));
    handle.shutdown().await;
}

#[tokio::test]
async fn a_stalled_consumer_does_not_stop_the_heartbeat() {
    let em = emulator().await;
    let (handle, mut rx) = gateway(&em);
    ready(&mut rx).await;
    // Nobody reads events while 600 arrive: the event channel (256) fills and the reader waits.
    let user = User::human(42, "ada");
    let ids: Vec<u64> = (0..600)
        .map(|i| em.post_user_message(CHANNEL, &user, &format!("burst {i}")))
        .collect();
    let before = em.gateway_counts().heartbeats;
    // Heartbeats keep reaching Discord while the consumer is stalled, and no zombie is declared
    // for the ACKs the blocked reader cannot read yet.
    eventually("heartbeats while stalled", || {
        em.gateway_counts().heartbeats >= before + 5
    })
    .await;
    assert_eq!(handle.stats().zombies, 0);
    // Then every event arrives, in order, exactly once on this connection.
    let mut got = Vec::new();
    while got.len() < ids.len() {
        let e = next_matching(&mut rx, "burst", |e| message_id(e).is_some()).await;
        got.push(message_id(&e).unwrap().0);
    }
    assert_eq!(got, ids);
    let stats = handle.stats();
    assert_eq!((stats.zombies, stats.connections), (0, 1));
    // Lateness is recorded (its size is a benchmark's business, not a test's).
    let _ = stats.max_heartbeat_lateness;
    handle.shutdown().await;
}

#[tokio::test]
async fn wss_gateway_goes_through_admission_and_the_pinned_connector_and_resumes() {
    use std::sync::Arc;

    use reach_destination::{Admission, AdmissionPolicy, Host, PinnedConnector, StaticResolver};
    use reach_discord::gateway::WssDialer;
    use reach_discord_emulator::{Emulator, EmulatorConfig, REST_HOST};

    let em = Emulator::start(EmulatorConfig {
        gateway_tls: true,
        ..EmulatorConfig::default()
    })
    .await
    .expect("start");
    let (identify_addr, resume_addr) = em.gateway_addrs();
    let host = Host::Name(REST_HOST.to_owned());
    let policy = AdmissionPolicy::default()
        .with_local_road(host.clone(), identify_addr)
        .with_local_road(host, resume_addr);
    let resolver = StaticResolver::new().with(REST_HOST, [identify_addr.ip()]);
    let wss = WssDialer {
        admission: Arc::new(Admission::new(policy, resolver)),
        connector: PinnedConnector::new(em.root_store(), reach_destination::TcpDialer),
    };
    let url = GatewayUrl::parse(&em.gateway_url()).expect("url");
    assert!(url.is_secure());
    let mut config = GatewayConfig::loopback(url, token(&em), gateway::intents(false));
    config.wss = Some(wss);
    let (handle, mut rx) = gateway::spawn(config);
    ready(&mut rx).await;
    assert!(em.drop_connection());
    next_matching(&mut rx, "RESUMED", |e| *e == GatewayEvent::Resumed).await;
    assert_eq!(em.gateway_counts().resume_connections, 1);
    handle.shutdown().await;
}

#[tokio::test]
async fn wss_gateway_without_a_road_is_never_dialed() {
    use reach_discord_emulator::{Emulator, EmulatorConfig};
    let em = Emulator::start(EmulatorConfig {
        gateway_tls: true,
        ..EmulatorConfig::default()
    })
    .await
    .expect("start");
    // No wss dialer: the client refuses to open a wss connection it cannot admit.
    let url = GatewayUrl::parse(&em.gateway_url()).expect("url");
    let (handle, mut rx) = gateway::spawn(GatewayConfig::loopback(
        url,
        token(&em),
        gateway::intents(false),
    ));
    let e = next_matching(&mut rx, "Reconnecting", |e| {
        matches!(e, GatewayEvent::Reconnecting { .. })
    })
    .await;
    assert_eq!(
        e,
        GatewayEvent::Reconnecting {
            reason: "connect-failed",
            resume: false
        }
    );
    assert_eq!(em.gateway_counts().connections, 0);
    handle.shutdown().await;
}

/// Past its IDENTIFY allowance the client waits for the window rather than identify again
/// (Discord resets a token past 1,000 a day): here 2 per 1.5 s, sessions invalidated at once.
#[tokio::test]
async fn identifies_past_the_allowance_wait_for_the_window() {
    use reach_discord::identify::IdentifyAllowance;
    let em = emulator().await;
    let url = GatewayUrl::parse(&em.gateway_url()).expect("url");
    let mut config = GatewayConfig::loopback(url, token(&em), gateway::intents(false));
    let window = std::time::Duration::from_millis(1_500);
    config.identify_allowance = IdentifyAllowance {
        per_window: 2,
        window,
        spacing: std::time::Duration::ZERO,
    };
    let started = tokio::time::Instant::now();
    let (handle, mut rx) = gateway::spawn(config);
    ready(&mut rx).await;
    assert!(em.invalidate_session());
    ready(&mut rx).await;
    assert_eq!(em.gateway_counts().identifies, 2);
    assert!(em.invalidate_session());
    let e = next_matching(&mut rx, "the budget's wait", |e| {
        matches!(e, GatewayEvent::Reconnecting { .. })
            && *e
                != GatewayEvent::Reconnecting {
                    reason: "invalid-session",
                    resume: false,
                }
    })
    .await;
    assert_eq!(
        e,
        GatewayEvent::Reconnecting {
            reason: "identify-budget",
            resume: false
        }
    );
    assert_eq!(em.gateway_counts().identifies, 2, "no third IDENTIFY yet");
    ready(&mut rx).await;
    assert_eq!(em.gateway_counts().identifies, 3);
    assert!(
        started.elapsed() >= window,
        "the third IDENTIFY waited for the first to leave the window: {:?}",
        started.elapsed()
    );
    assert_eq!(handle.stats().identifies, 3);
    handle.shutdown().await;
}

/// Without the privileged MESSAGE_CONTENT intent (Reach's default) Discord sends a guild
/// message's content only when it mentions the bot: the mention trigger still reads its
/// question, and nothing else's text reaches the edge. Asking for the intent while the
/// application does not have it enabled is fatal (4014), never retried.
#[tokio::test]
async fn without_message_content_only_mentions_carry_their_text() {
    use reach_discord_emulator::EmulatorConfig;
    let em = emulator().await;
    let (handle, mut rx) = gateway(&em);
    ready(&mut rx).await;
    let bot = em.config().bot_user_id;
    let user = User::human(42, "ada");
    let chatter = em.post_user_message(CHANNEL, &user, "just chatting");
    let mention = em.post_user_message(CHANNEL, &user, &format!("<@{bot}> how do I deploy?"));
    let content = |want: u64| move |e: &GatewayEvent| message_id(e) == Some(Snowflake(want));
    let GatewayEvent::MessageCreate { message, .. } =
        next_matching(&mut rx, "the chatter", content(chatter)).await
    else {
        unreachable!()
    };
    assert_eq!(message.content, "", "no content without the intent");
    let GatewayEvent::MessageCreate { message, .. } =
        next_matching(&mut rx, "the mention", content(mention)).await
    else {
        unreachable!()
    };
    assert_eq!(message.content, format!("<@{bot}> how do I deploy?"));
    handle.shutdown().await;

    let em = reach_discord_emulator::Emulator::start(EmulatorConfig {
        message_content_enabled: false,
        ..EmulatorConfig::default()
    })
    .await
    .expect("start");
    let url = GatewayUrl::parse(&em.gateway_url()).expect("url");
    let (handle, mut rx) = gateway::spawn(GatewayConfig::loopback(
        url,
        token(&em),
        gateway::intents(true),
    ));
    let e = next_matching(&mut rx, "Fatal", |e| {
        matches!(e, GatewayEvent::Fatal { .. })
    })
    .await;
    assert_eq!(e, GatewayEvent::Fatal { code: 4014 });
    assert_eq!(
        em.gateway_counts().identifies,
        0,
        "no session for a disallowed intent"
    );
    handle.shutdown().await;
}

fn is_reconnecting(e: &GatewayEvent) -> bool {
    matches!(e, GatewayEvent::Reconnecting { .. })
}

/// The case the 100 session starts kept back for restarts could not cover: an earlier process
/// spent the window, and the restarted client — its own count empty — reads Discord's figure
/// and waits out `reset_after` instead of identifying (which would reset the token). The
/// emulator refuses any IDENTIFY with none remaining, so an early one cannot go unnoticed,
/// however the run is scheduled.
#[tokio::test]
async fn a_restarted_client_waits_for_reset_after_when_an_earlier_process_spent_the_limit() {
    use reach_discord::identify::IdentifyBasis;
    let em = limited_emulator(2, std::time::Duration::from_secs(3)).await;
    let (earlier, mut rx) = budgeted_gateway(&em);
    ready(&mut rx).await;
    assert!(em.invalidate_session());
    ready(&mut rx).await;
    earlier.shutdown().await;
    assert_eq!(em.session_starts_left().0, 0);

    let (handle, mut rx) = budgeted_gateway(&em);
    let first = next_matching(&mut rx, "the first event", |_| true).await;
    assert_eq!(
        first,
        GatewayEvent::Reconnecting {
            reason: "session-start-limit",
            resume: false
        }
    );
    assert_eq!(
        em.gateway_counts().identifies,
        2,
        "no IDENTIFY while none remains"
    );
    match handle.identify_basis() {
        IdentifyBasis::Discord(l) => assert_eq!((l.total, l.remaining), (2, 0)),
        other => panic!("{other:?}"),
    }
    // Past reset_after it reads the figure again and identifies.
    ready(&mut rx).await;
    let counts = em.gateway_counts();
    assert_eq!((counts.identifies, counts.session_start_refusals), (3, 0));
    assert!(!em.token_was_reset());
    assert!(handle.stats().session_limit_reads >= 2);
    handle.shutdown().await;
}

/// What the conservative default alone did (the client before it read Discord's figure): the
/// same restart identifies at once, and Discord resets the token.
#[tokio::test]
async fn without_discords_figure_a_restart_spends_a_session_start_that_is_not_there() {
    let em = limited_emulator(1, std::time::Duration::from_secs(3600)).await;
    let (earlier, mut rx) = budgeted_gateway(&em);
    ready(&mut rx).await;
    earlier.shutdown().await;
    let (handle, mut rx) = gateway(&em);
    let e = next_matching(&mut rx, "Fatal", |e| {
        matches!(e, GatewayEvent::Fatal { .. })
    })
    .await;
    assert_eq!(e, GatewayEvent::Fatal { code: 4004 });
    assert_eq!(em.gateway_counts().session_start_refusals, 1);
    assert!(em.token_was_reset());
    handle.shutdown().await;
}

/// Through an outage in which every IDENTIFY is spent and dropped before READY, and across
/// restarts (each process with a fresh count), the emulator never sees an IDENTIFY with no
/// session start remaining: the window's starts are used, then waited for.
#[tokio::test]
async fn restarts_and_outages_never_drive_remaining_below_zero() {
    let em = limited_emulator(3, std::time::Duration::from_secs(1)).await;
    em.set_identify_outage(true);
    for until in [2, 5, 8] {
        let (handle, _events) = budgeted_gateway(&em);
        eventually(&format!("{until} IDENTIFYs"), || {
            em.gateway_counts().identifies >= until
        })
        .await;
        handle.shutdown().await;
    }
    em.set_identify_outage(false);
    let (handle, mut rx) = budgeted_gateway(&em);
    ready(&mut rx).await;
    let counts = em.gateway_counts();
    assert_eq!(counts.session_start_refusals, 0, "{counts:?}");
    assert!(!em.token_was_reset());
    assert!(counts.identifies >= 9, "{counts:?}");
    handle.shutdown().await;
}

/// A 401, a malformed body, or an answer past the reader's bounds: the client says why, budgets
/// by the conservative allowance (here one IDENTIFY per hour), and still identifies within it —
/// never in a loop, and without asking again before `READ_RETRY`.
#[tokio::test]
async fn a_refused_or_malformed_gateway_bot_answer_falls_back_to_the_conservative_default() {
    use reach_discord::identify::{IdentifyAllowance, IdentifyBasis};
    use reach_discord_emulator::GatewayBotFault;
    let huge = format!(r#"{{"url":"{}"}}"#, "x".repeat(64 * 1024));
    let cases = [
        (
            GatewayBotFault::Reject {
                status: 401,
                code: 0,
            },
            "discord/gateway-bot-status-401",
        ),
        (
            GatewayBotFault::Body(r#"{"url":"wss://gateway.discord.gg","shards":1}"#.into()),
            "discord/gateway-bot-malformed: session_start_limit",
        ),
        (
            GatewayBotFault::Body(
                r#"{"url":"wss://g","shards":1,"session_start_limit":{"total":1000,"remaining":-5,"reset_after":1,"max_concurrency":1}}"#.into(),
            ),
            "discord/gateway-bot-malformed: remaining",
        ),
        (GatewayBotFault::Body(huge), "discord/gateway-bot-unread: bounded/"),
    ];
    for (fault, code) in cases {
        let em = emulator().await;
        em.script_next_gateway_bot(fault);
        let url = GatewayUrl::parse(&em.gateway_url()).expect("url");
        let mut config = GatewayConfig::loopback(url, token(&em), gateway::intents(false));
        config.session_limit = Some(session_limit_reader(&em));
        config.identify_allowance = IdentifyAllowance {
            per_window: 1,
            window: std::time::Duration::from_secs(3600),
            spacing: std::time::Duration::ZERO,
        };
        let (handle, mut rx) = gateway::spawn(config);
        ready(&mut rx).await;
        match handle.identify_basis() {
            IdentifyBasis::Fallback(refusal) => {
                assert!(refusal.to_string().starts_with(code), "{refusal}")
            }
            other => panic!("{code}: {other:?}"),
        }
        assert!(em.invalidate_session());
        let e = next_matching(&mut rx, "the hold", |e| {
            is_reconnecting(e)
                && *e
                    != GatewayEvent::Reconnecting {
                        reason: "invalid-session",
                        resume: false,
                    }
        })
        .await;
        assert_eq!(
            e,
            GatewayEvent::Reconnecting {
                reason: "identify-budget",
                resume: false
            },
            "{code}"
        );
        assert_eq!(em.gateway_counts().identifies, 1, "{code}");
        assert_eq!(handle.stats().session_limit_reads, 1, "{code}");
        handle.shutdown().await;
    }
}

/// `GET /gateway/bot` naming another gateway does not move the connection: the client
/// identifies at the configured one, and nothing dials the other.
#[tokio::test]
async fn a_gateway_bot_url_naming_another_gateway_is_not_followed() {
    use reach_discord::identify::IdentifyBasis;
    use reach_discord_emulator::{Emulator, EmulatorConfig};
    let trap = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let em = Emulator::start(EmulatorConfig {
        gateway_bot_url: Some(format!("ws://{}", trap.local_addr().unwrap())),
        ..EmulatorConfig::default()
    })
    .await
    .expect("start");
    let (handle, mut rx) = budgeted_gateway(&em);
    ready(&mut rx).await;
    assert!(matches!(handle.identify_basis(), IdentifyBasis::Discord(_)));
    assert_eq!(em.gateway_counts().connections, 1);
    let dialed = tokio::time::timeout(std::time::Duration::ZERO, trap.accept()).await;
    assert!(dialed.is_err(), "the other gateway was dialed");
    handle.shutdown().await;
}
