//! Pointing a body's Discord roles at a Discord API: the role settings and the bot credential.
//! `reach demo` and the cross-service tests use it with the loopback emulator; an operator sets
//! the same keys in the manifest for a real deployment.

use std::net::SocketAddr;

use reach_identity::files;
use reach_manifest::Manifest;
use reach_manifest::plan::StateLayout;

/// Where the Discord API is and who the bot is.
#[derive(Clone, Debug)]
pub struct DiscordEndpoints {
    pub gateway_url: String,
    pub application_id: u64,
    pub bot_user_id: u64,
    pub guild_id: u64,
    pub channels: Vec<u64>,
    pub rest_base_url: String,
    /// An exact local road for the REST host (the loopback emulator): egress-discord's, and
    /// ingress-edge's for its one `GET /gateway/bot`.
    pub rest_road: SocketAddr,
    /// The host name of the local roads (REST and a `wss://` gateway share it).
    pub rest_host: String,
    /// Exact local roads of a `wss://` gateway (identify and resume listeners); empty for a
    /// loopback `ws://` gateway.
    pub gateway_roads: Vec<SocketAddr>,
    /// The only CA the Discord roles trust on their local roads.
    pub rest_ca_pem: String,
}

/// Writes the settings of ingress-edge and egress-discord into `manifest`, and `token` as both
/// roles' `discord-bot-token` credential (0600), as `reach secret set` would.
pub fn configure(
    manifest: &mut Manifest,
    layout: &StateLayout,
    d: &DiscordEndpoints,
    token: &[u8],
) -> std::io::Result<()> {
    std::fs::create_dir_all(layout.root())?;
    let ca = layout.root().join("discord-ca.pem");
    std::fs::write(&ca, &d.rest_ca_pem)?;
    for role in manifest.roles.iter_mut() {
        let s = &mut role.settings;
        match role.name.as_str() {
            "ingress-edge" => {
                s.insert("gateway_url".into(), d.gateway_url.clone().into());
                s.insert("application_id".into(), d.application_id.to_string().into());
                s.insert("bot_user_id".into(), d.bot_user_id.to_string().into());
                s.insert(
                    "guilds".into(),
                    toml::Value::Array(vec![d.guild_id.to_string().into()]),
                );
                let channels = d.channels.iter().map(|c| c.to_string().into()).collect();
                s.insert("channels".into(), toml::Value::Array(channels));
                // Discord's session start limit is read from the REST host: its road, and the
                // gateway's when it is wss:// (the same host name).
                let bot = format!("{}/gateway/bot", d.rest_base_url.trim_end_matches('/'));
                s.insert("gateway_bot_url".into(), bot.into());
                let mut addrs = vec![d.rest_road];
                addrs.extend(&d.gateway_roads);
                s.insert("roads".into(), roads(&d.rest_host, &addrs, &ca));
            }
            "egress-discord" => {
                s.insert("rest_base_url".into(), d.rest_base_url.clone().into());
                s.insert("bot_user_id".into(), d.bot_user_id.to_string().into());
                s.insert("roads".into(), roads(&d.rest_host, &[d.rest_road], &ca));
            }
            _ => continue,
        }
        let dir = layout.secret_dir(role.name.as_str());
        files::ensure_secret_dir(&dir).map_err(std::io::Error::other)?;
        files::write_secret(&dir.join("discord-bot-token"), token)
            .map_err(std::io::Error::other)?;
    }
    Ok(())
}

/// A role's `roads` settings: `host` admitted at exactly `addrs`, trusting only `ca`.
fn roads(host: &str, addrs: &[SocketAddr], ca: &std::path::Path) -> toml::Value {
    let local: Vec<toml::Value> = addrs
        .iter()
        .map(|a| {
            let mut road = toml::Table::new();
            road.insert("host".into(), host.into());
            road.insert("addr".into(), a.to_string().into());
            road.into()
        })
        .collect();
    let mut t = toml::Table::new();
    t.insert("local_roads".into(), local.into());
    t.insert("ca_file".into(), ca.display().to_string().into());
    t.into()
}
