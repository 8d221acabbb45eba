//! reach-ingress-edge: an outbound Discord Gateway v10 connection. It validates each event
//! against the admitted application, guilds, channels, trigger, size and adapter revision, then
//! calls core's admission port. It holds the bot credential and no database credential; a
//! resumed or redelivered event is admitted again under the same event id, and core's ledger
//! answers it with the committed status. Its one REST request is `GET /api/v10/gateway/bot`
//! (`gateway_bot_url`), for Discord's session start limit, by which the client budgets
//! IDENTIFYs.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use reach_destination::roads::Roads;
use reach_destination::{AdmissionPolicy, PinnedConnector, TcpDialer};
use reach_discord::edge::{self, EdgePolicy};
use reach_discord::gateway::{self, Backoff, GatewayConfig, GatewayEvent, GatewayUrl, WssDialer};
use reach_discord::identify::IdentifyAllowance;
use reach_discord::seal::{self, SealBinding, SealPublicKey};
use reach_discord::session_limit::SessionLimitReader;
use reach_discord::{BotToken, Snowflake};
use reach_manifest::CredentialKind;
use reach_proto::core::v1::AdmitRequest;
use reach_proto::core::v1::admission_client::AdmissionClient;

/// Discord's guidance: reconnect after a short random wait; re-IDENTIFY after INVALID_SESSION
/// between 1 and 5 s.
const RECONNECT_DELAY: Backoff = Backoff {
    min: Duration::from_millis(100),
    max: Duration::from_millis(1_000),
};
const REIDENTIFY_DELAY: Backoff = Backoff {
    min: Duration::from_secs(1),
    max: Duration::from_secs(5),
};
/// The loopback emulator's (a `ws://` gateway): short waits, and no IDENTIFY spacing, which it
/// does not enforce.
const LOOPBACK_DELAY: Backoff = Backoff {
    min: Duration::from_millis(10),
    max: Duration::from_millis(50),
};

/// Admissions in flight to core at once.
const MAX_IN_FLIGHT: usize = 64;

/// Largest question accepted, in bytes, unless the manifest says less.
const DEFAULT_MAX_QUESTION_BYTES: usize = 1_000;

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    gateway_url: String,
    /// `https://<REST host>/api/v10/gateway/bot`: where Discord's session start limit is read
    /// (the manifest's `discord-session-limit` destination), and nothing else.
    gateway_bot_url: String,
    application_id: Snowflake,
    bot_user_id: Snowflake,
    guilds: BTreeSet<Snowflake>,
    channels: BTreeSet<Snowflake>,
    #[serde(default)]
    max_question_bytes: Option<usize>,
    /// The privileged Message Content intent, off unless the manifest enables it.
    #[serde(default)]
    message_content: bool,
    /// Where a `wss://` gateway and `gateway_bot_url` may be dialed: public Discord through the
    /// named name servers, or exact local roads with their CA (the emulator). A loopback `ws://`
    /// gateway needs none.
    #[serde(default)]
    roads: Roads,
}

/// egress-discord's public sealing key (Scribe mints the pair: the private half goes to
/// egress-discord only). Without it an `/ask` is still admitted, and answered by a Create
/// Message in the channel instead of its interaction callback.
fn seal_key(role: &reach_runtime::Role) -> anyhow::Result<Option<SealPublicKey>> {
    role.credential(CredentialKind::InteractionSealPublic)
        .map(|bytes| {
            SealPublicKey::from_bytes(bytes)
                .map_err(|e| anyhow::anyhow!("interaction-seal-public: {e}"))
        })
        .transpose()
}

fn main() -> std::process::ExitCode {
    reach_runtime::run("ingress-edge", async |role| {
        if !role.config.settings.contains_key("gateway_url") {
            tracing::warn!("no Discord gateway configured: this edge admits nothing");
            return Ok(());
        }
        let settings: Settings = role.config.settings.clone().try_into().context(
            "ingress-edge settings (gateway_url, gateway_bot_url, application_id, bot_user_id, guilds, channels)",
        )?;
        let token = BotToken::from_bytes(
            role.credential(CredentialKind::DiscordBot)
                .unwrap_or_default(),
        )
        .map_err(|_| anyhow::anyhow!("the discord-bot credential file is not a bot token"))?;
        let seal_key = seal_key(role)?;
        let url = GatewayUrl::parse(&settings.gateway_url)
            .map_err(|e| anyhow::anyhow!("gateway_url: {e}"))?;
        let policy = EdgePolicy {
            application_id: settings.application_id,
            bot_user_id: settings.bot_user_id,
            guilds: settings.guilds,
            channels: settings.channels,
            max_question_bytes: settings
                .max_question_bytes
                .unwrap_or(DEFAULT_MAX_QUESTION_BYTES),
            adapter_revisions: [edge::ADAPTER_REVISION.to_owned()].into(),
        };
        let core = AdmissionClient::new(role.client("core.admission")?);
        let intents = gateway::intents(settings.message_content);
        // Every wss:// gateway, including READY's resume URL, and the session limit's one GET
        // pass destination admission on the role's roads.
        let roads = &settings.roads;
        let admission = Arc::new(
            roads
                .admission(AdmissionPolicy::default())
                .context("ingress-edge roads")?,
        );
        let connector =
            PinnedConnector::new(roads.roots().context("ingress-edge roads")?, TcpDialer);
        let session_limit = SessionLimitReader::new(
            &settings.gateway_bot_url,
            token.clone(),
            Arc::clone(&admission),
            connector.clone(),
        )
        .map_err(|e| anyhow::anyhow!("gateway_bot_url: {e}"))?;
        let secure = url.is_secure();
        let (handle, mut events) = gateway::spawn(GatewayConfig {
            url,
            token,
            intents,
            wss: secure.then(|| WssDialer {
                admission,
                connector,
            }),
            reconnect_delay: if secure {
                RECONNECT_DELAY
            } else {
                LOOPBACK_DELAY
            },
            reidentify_delay: if secure {
                REIDENTIFY_DELAY
            } else {
                LOOPBACK_DELAY
            },
            identify_allowance: if secure {
                IdentifyAllowance::default()
            } else {
                IdentifyAllowance {
                    spacing: Duration::ZERO,
                    ..IdentifyAllowance::default()
                }
            },
            session_limit: Some(session_limit),
        });
        let stop = role.shutdown_signal();
        let policy = Arc::new(policy);
        let seal_key = Arc::new(seal_key);
        tokio::spawn(async move {
            tokio::pin!(stop);
            // Admissions run concurrently up to a bound, so the gateway keeps being read while
            // core commits; beyond the bound the edge waits rather than queueing without limit.
            let in_flight = Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT));
            loop {
                let event = tokio::select! {
                    e = events.recv() => match e { Some(e) => e, None => break },
                    _ = &mut stop => break,
                };
                let Ok(permit) = in_flight.clone().acquire_owned().await else {
                    break;
                };
                let (policy, core, key) = (policy.clone(), core.clone(), seal_key.clone());
                tokio::spawn(async move {
                    relay(&policy, &core, key.as_ref().as_ref(), event).await;
                    drop(permit);
                });
            }
            // Let admissions in flight finish before the gateway closes.
            let _ = in_flight.acquire_many(MAX_IN_FLIGHT as u32).await;
            handle.shutdown().await;
        });
        Ok(())
    })
}

async fn relay(
    policy: &EdgePolicy,
    core: &AdmissionClient<tonic::transport::Channel>,
    seal_key: Option<&SealPublicKey>,
    event: GatewayEvent,
) {
    if !matches!(
        event,
        GatewayEvent::MessageCreate { .. } | GatewayEvent::InteractionCreate { .. }
    ) {
        return;
    }
    let e = match edge::admit(policy, &event) {
        Ok(e) => e,
        Err(refusal) => {
            tracing::info!(code = %refusal.code(), "event not admitted");
            return;
        }
    };
    // The interaction token is sealed here and its plaintext dropped with the event: core and
    // ward only ever carry the blob.
    let sealed_interaction_token = match (&event, seal_key) {
        (GatewayEvent::InteractionCreate { interaction, .. }, Some(key)) => {
            let binding = SealBinding {
                application_id: interaction.application_id,
                interaction_id: interaction.id,
            };
            match seal::seal(key, binding, &interaction.token) {
                Ok(blob) => blob.into_bytes(),
                Err(why) => {
                    tracing::warn!(code = %why, event = %e.external_event_id, "interaction token not sealed; not admitted");
                    return;
                }
            }
        }
        _ => Vec::new(),
    };
    drop(event);
    let request = AdmitRequest {
        platform: e.platform.to_owned(),
        adapter_revision: e.adapter_revision.to_owned(),
        application_id: e.application_id.to_string(),
        event_kind: e.kind.as_str().to_owned(),
        external_event_id: e.external_event_id.to_string(),
        payload_digest: e.payload_digest.to_string(),
        guild_id: e.guild_id.to_string(),
        channel_id: e.channel_id.to_string(),
        subject_id: e.subject.to_string(),
        question: e.question,
        reply_to_message_id: e.reply_to.map(|r| r.to_string()).unwrap_or_default(),
        sealed_interaction_token,
    };
    match core.clone().admit(request).await {
        Ok(r) => {
            tracing::info!(outcome = ?r.get_ref().outcome(), event = %e.external_event_id, "admission")
        }
        Err(s) => {
            tracing::warn!(code = ?s.code(), event = %e.external_event_id, "core refused the admission")
        }
    }
}
