//! reach-egress-provider: one model provider or A2A peer per instance; holds only its key file.
//!
//! Core calls `ProviderCall/Call` with a decision id and a payload, never a Sigil. The gate
//! ([`gate`]) dispatches by the call's kind to the instance's adapter; the model Portal
//! ([`portal`]) redeems the decision at ward for its own configured endpoint and the digest of
//! the bytes it received, then makes exactly one physical attempt and returns the bounded,
//! normalized return (or a typed failure code) for core to quarantine. The A2A adapter
//! ([`intercom`]) redeems likewise for its enrolled peer's URL and carries one Intercom request
//! (SendMessage or GetTask) per call; core drives the task.

mod gate;
mod intercom;
mod portal;

use anyhow::Context as _;
use reach_manifest::CredentialKind;
use reach_proto::egress::v1::provider_call_server::ProviderCallServer;
use reach_proto::ward::v1::ward_client::WardClient;

/// The role's settings: which adapters this instance runs.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    /// The model Portal (OpenAI-compatible chat completions). Absent: no model adapter.
    portal: Option<portal::PortalSettings>,
    /// The enrolled A2A peer (Intercom's egress side). Absent: no A2A adapter.
    intercom: Option<intercom::IntercomSettings>,
}

fn main() -> std::process::ExitCode {
    reach_runtime::run("egress-provider", async |role| {
        let settings: Settings = role
            .config
            .settings
            .clone()
            .try_into()
            .context("egress-provider settings (portal, intercom)")?;
        let portal = match settings.portal {
            Some(p) => {
                let key = role
                    .credential(CredentialKind::ProviderApiKey)
                    .ok_or_else(|| {
                        anyhow::anyhow!(
                            "settings.portal needs the provider-api-key credential file"
                        )
                    })?;
                Some(portal::Portal::new(p, key)?)
            }
            None => {
                tracing::info!("no model Portal configured: this instance calls no provider");
                None
            }
        };
        let peer = match settings.intercom {
            Some(s) => Some(intercom::Peer::new(
                s,
                role.credential(CredentialKind::PeerCredential),
            )?),
            None => None,
        };
        let ward = WardClient::new(role.client("ward.authority")?);
        role.serve(
            "egress-provider.call",
            ProviderCallServer::new(gate::Gate::new(ward, portal, peer)),
        )?;
        Ok(())
    })
}
