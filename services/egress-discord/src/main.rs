//! reach-egress-discord: claims PENDING delivery intents from core, persists SUBMITTING through
//! core before any byte leaves, sends Create Message with the intent's nonce and
//! `enforce_nonce`, and settles the outcome. An UNKNOWN outcome is never resent: it is
//! reconciled from a channel read that finds our nonce or proves its absence, each GET under its
//! own EgressDecision from core (`Delivery/DecideReconcileRead`) redeemed at ward first. Public Discord is
//! reached through the manifest's name servers only (`roads.name_servers`); the loopback
//! emulator through an exact local road with its CA.

mod callback;
mod deliver;
mod send;

use std::sync::Arc;

use anyhow::Context as _;
use reach_destination::AdmissionPolicy;
use reach_destination::roads::Roads;
use reach_discord::rest::{RestClient, RestConfig};
use reach_discord::seal::SealKeyring;
use reach_discord::{BotToken, Snowflake};
use reach_manifest::CredentialKind;
use reach_proto::core::v1::delivery_client::DeliveryClient;
use reach_proto::ward::v1::ward_client::WardClient;

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    /// `https://<host>[:port]/api/v10`.
    rest_base_url: String,
    bot_user_id: Snowflake,
    /// Where REST bytes may go: public Discord through the named name servers, or an exact
    /// local road with its CA (the loopback emulator).
    #[serde(default)]
    roads: Roads,
}

fn main() -> std::process::ExitCode {
    reach_runtime::run("egress-discord", async |role| {
        if !role.config.settings.contains_key("rest_base_url") {
            tracing::warn!("no Discord REST configured: this role delivers nothing");
            return Ok(());
        }
        let settings: Settings = role
            .config
            .settings
            .clone()
            .try_into()
            .context("egress-discord settings (rest_base_url, bot_user_id, roads)")?;
        let token = BotToken::from_bytes(
            role.credential(CredentialKind::DiscordBot)
                .unwrap_or_default(),
        )
        .map_err(|_| anyhow::anyhow!("the discord-bot credential file is not a bot token"))?;
        let admission = settings
            .roads
            .admission(AdmissionPolicy::default())
            .context("egress-discord roads")?;
        let connector = reach_destination::PinnedConnector::new(
            settings.roads.roots().context("egress-discord roads")?,
            reach_destination::TcpDialer,
        );
        let base_url = settings.rest_base_url.clone();
        let rest = RestClient::new(RestConfig {
            base_url: settings.rest_base_url,
            token,
            bot_user_id: settings.bot_user_id,
            admission: Arc::new(admission),
            connector,
        })?;
        // The keys that open `/ask` tokens sealed by ingress-edge: the current one and, for a
        // grace window after a rotation, the previous one (Scribe mints and rotates them).
        let seal_key = role
            .credential(CredentialKind::InteractionSealKey)
            .map(SealKeyring::from_bytes)
            .transpose()
            .map_err(|e| anyhow::anyhow!("interaction-seal-key: {e}"))?
            .map(Arc::new);
        let peers = deliver::Peers {
            core: DeliveryClient::new(role.client("core.delivery")?),
            ward: WardClient::new(role.client("ward.authority")?),
            base: base_url.trim_end_matches('/').to_owned(),
            seal_key,
        };
        tokio::spawn(deliver::run(peers, Arc::new(rest), role.shutdown_signal()));
        Ok(())
    })
}
