//! reach-egress-discord: claims PENDING delivery intents from core, persists SUBMITTING through
//! core before any byte leaves, sends Create Message with the intent's nonce and
//! `enforce_nonce`, and settles the outcome. An UNKNOWN outcome is never resent: it is
//! reconciled from a channel read that finds our nonce or proves its absence.

mod deliver;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use reach_destination::{
    Admission, AdmissionPolicy, Host, PinnedConnector, StaticResolver, TcpDialer,
};
use reach_discord::rest::{RestClient, RestConfig};
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
    /// An exact local road for the REST host, named by the manifest (the loopback emulator).
    local_road: Option<SocketAddr>,
    local_road_host: Option<String>,
    /// A CA this role trusts for the REST host instead of the public roots (the emulator's).
    rest_ca_file: Option<std::path::PathBuf>,
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
            .context("egress-discord settings (rest_base_url, bot_user_id)")?;
        let token = BotToken::from_bytes(
            role.credential(CredentialKind::DiscordBot)
                .unwrap_or_default(),
        )
        .map_err(|_| anyhow::anyhow!("the discord-bot credential file is not a bot token"))?;
        let (Some(road), Some(host)) = (settings.local_road, settings.local_road_host) else {
            anyhow::bail!(
                "public Discord REST is dialed through controlled DNS; that wiring lands with issue #7 \
                 (set local_road and local_road_host for the loopback emulator)"
            );
        };
        let roots = match &settings.rest_ca_file {
            Some(path) => {
                let pem = std::fs::read(path)
                    .with_context(|| format!("rest_ca_file {}", path.display()))?;
                let mut roots = rustls::RootCertStore::empty();
                for cert in rustls_pemfile::certs(&mut &pem[..]) {
                    roots.add(cert?)?;
                }
                roots
            }
            None => reach_destination::webpki_root_store(),
        };
        let policy = AdmissionPolicy::default().with_local_road(Host::Name(host.clone()), road);
        let resolver = StaticResolver::new().with(&host, [road.ip()]);
        let base_url = settings.rest_base_url.clone();
        let rest = RestClient::new(RestConfig {
            base_url: settings.rest_base_url,
            token,
            bot_user_id: settings.bot_user_id,
            admission: Arc::new(Admission::new(policy, resolver)),
            connector: PinnedConnector::new(roots, TcpDialer)?,
        })?;
        let peers = deliver::Peers {
            core: DeliveryClient::new(role.client("core.delivery")?),
            ward: WardClient::new(role.client("ward.authority")?),
            base: base_url.trim_end_matches('/').to_owned(),
        };
        tokio::spawn(deliver::run(peers, Arc::new(rest), role.shutdown_signal()));
        Ok(())
    })
}
