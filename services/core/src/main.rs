//! reach-core: the turn owner. Holds the Phylactery; no network, no credential but the vault's.

mod authority;
mod deferral;
mod intercom;
mod packs;
mod pipeline;
mod ports;
mod slots;
mod tasks;

use std::sync::Arc;
use std::time::Duration;

use reach_manifest::CredentialKind;
use reach_phylactery::{Phylactery, SystemClock, VaultConfig};
use reach_proto::egress::v1::provider_call_client::ProviderCallClient;

/// `settings.portal`: the model Portal core forms remotely through. The endpoint must be the
/// exact string egress-provider's `settings.portal.endpoint` names: every decision binds it.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PortalSettings {
    endpoint: String,
    model: String,
    /// The provider's storage, training, region, subcontractor and deletion policy, admitted
    /// before any egress (`reach_portal::custody`).
    custody: reach_portal::ProviderCustody,
}

fn main() -> std::process::ExitCode {
    reach_runtime::run("core", async |role| {
        let horizon = Duration::from_secs(u64::from(role.config.idempotency_horizon_hours) * 3600);
        let mut config = match role.config.settings.get("vault").and_then(|v| v.as_str()) {
            None | Some("sqlite") => {
                VaultConfig::sqlite(role.config.data_dir.join("phylactery.sqlite"))
            }
            Some("postgres") => {
                // The connection URL (with its password) is core's database credential file.
                let url = role.credential(CredentialKind::Database).ok_or_else(|| {
                    anyhow::anyhow!("vault = \"postgres\" needs a database credential file")
                })?;
                // The high-water mark lives beside core's state, outside the database it guards.
                VaultConfig::postgres(String::from_utf8(url.to_vec())?.trim().to_owned(), None)
                    .with_high_water(role.config.data_dir.join("phylactery.high-water"))
            }
            Some(other) => {
                anyhow::bail!("settings.vault must be \"sqlite\" or \"postgres\", not {other:?}")
            }
        };
        config.idempotency_horizon = horizon;
        let vault = Phylactery::open(config, Arc::new(SystemClock)).await?;
        let report = vault.recover().await?;
        tracing::info!(?report, "recovered in-flight work from the vault");
        let corpus_root = match role
            .config
            .settings
            .get("corpus_root")
            .and_then(|v| v.as_str())
        {
            Some(root) => std::path::PathBuf::from(root),
            None => anyhow::bail!("settings.corpus_root must name the corpus store core reads"),
        };
        let policy = refusal_policy(&role.config.settings)?;
        let ward = role.client("ward.authority")?;
        let portal = match role.config.settings.get("portal") {
            // Off by default: the embedded cognition stays local and needs no provider.
            None => None,
            Some(v) => {
                let s: PortalSettings = v
                    .clone()
                    .try_into()
                    .map_err(|e| anyhow::anyhow!("settings.portal: {e}"))?;
                let custody = reach_portal::admit_custody(&s.custody)
                    .map_err(|r| anyhow::anyhow!("settings.portal.custody refused: {r}"))?;
                Some(pipeline::PortalRoute {
                    endpoint: s.endpoint,
                    model: s.model,
                    policy_revision: custody.policy_revision(authority::POLICY_REVISION),
                    provider: ProviderCallClient::new(role.client("egress-provider.call")?),
                    authority: authority::ModelAuthority::new(ward.clone(), vault.clone()),
                })
            }
        };
        let committed = Arc::new(tokio::sync::Notify::new());
        let pipeline = pipeline::Pipeline::new(
            vault.clone(),
            corpus_root,
            ward.clone(),
            policy,
            committed.clone(),
            portal,
        );
        let intercom = match role.config.settings.get("intercom") {
            None => None,
            Some(v) => {
                let s: intercom::IntercomSettings = v
                    .clone()
                    .try_into()
                    .map_err(|e| anyhow::anyhow!("settings.intercom: {e}"))?;
                Some(intercom::IntercomRoute::new(
                    s,
                    role.client("egress-provider.call")?,
                    ward.clone(),
                    vault.clone(),
                    role.config.habitat.clone(),
                ))
            }
        };
        if let Some(route) = &intercom {
            // Durable Stasis: parked and uncertain A2A tasks resume without an operator call.
            route.resume_parked();
        }
        let authority = authority::DeliveryAuthority::new(ward.clone(), vault.clone());
        // `interaction_defer_ms`: how long an `/ask` answer may take before the interaction is
        // acknowledged (type 5) and the answer edits it; inside Discord's 3 s.
        let defer_budget = match role.config.settings.get("interaction_defer_ms") {
            None => deferral::DEFAULT_BUDGET,
            Some(v) => match v.as_integer() {
                Some(ms @ 1..=2_500) => std::time::Duration::from_millis(ms as u64),
                _ => anyhow::bail!(
                    "settings.interaction_defer_ms must be 1 to 2500 (Discord's window is 3 s)"
                ),
            },
        };
        let pack_port = packs::PackPort::new(
            vault.clone(),
            packs::trusted_keys(&role.config.settings)?,
            &role.config.data_dir,
            role.client("vm-broker.instances")
                .ok()
                .map(reach_proto::vm::v1::vm_broker_client::VmBrokerClient::new),
            ward.clone(),
        );
        // Ward may hold an older standing than the ledger (a change made while it was down).
        pack_port.keep_ward_fenced();
        // Task runs need the binding's model runtime (`settings.tasks`), the workbench and
        // egress-provider; without the setting, AskTask is refused `tasks/not-configured`.
        let pack_port = match role.config.settings.get("tasks") {
            None => pack_port,
            Some(v) => {
                let s: tasks::TaskSettings = v
                    .clone()
                    .try_into()
                    .map_err(|e| anyhow::anyhow!("settings.tasks: {e}"))?;
                let runs = tasks::TaskRuns::new(
                    vault.clone(),
                    pack_port.clone(),
                    ward.clone(),
                    role.client("workbench.steps")?,
                    role.client("egress-provider.call")?,
                    s,
                    &role.config.data_dir,
                );
                runs.recover();
                pack_port.with_tasks(runs)
            }
        };
        let core = ports::Core::new(
            vault,
            role.config.habitat.clone(),
            pipeline,
            authority,
            committed,
        )
        .with_defer_budget(defer_budget)
        .with_intercom(intercom);
        role.serve("core.admission", core.admission())?;
        role.serve("core.delivery", core.delivery())?;
        role.serve("core.trail", core.trail())?;
        role.serve("core.packs", pack_port.server())?;
        Ok(())
    })
}

/// `refusals = "post" | "silent"` (default post) and `refusals_by_channel = { "<channel id>" =
/// "post" | "silent" }` for the channels that differ.
fn refusal_policy(settings: &toml::Table) -> anyhow::Result<reach_discord::render::RefusalPolicy> {
    let parse = |what: &str, v: &toml::Value| {
        v.as_str()
            .ok_or_else(|| anyhow::anyhow!("{what} must be a string"))?
            .parse::<reach_discord::render::ChannelPolicy>()
            .map_err(|e| anyhow::anyhow!("{what}: {e}"))
    };
    let mut policy = reach_discord::render::RefusalPolicy::default();
    if let Some(v) = settings.get("refusals") {
        policy.default = parse("settings.refusals", v)?;
    }
    if let Some(v) = settings.get("refusals_by_channel") {
        let table = v
            .as_table()
            .ok_or_else(|| anyhow::anyhow!("settings.refusals_by_channel must be a table"))?;
        for (channel, v) in table {
            let p = parse(&format!("settings.refusals_by_channel.{channel}"), v)?;
            policy.channels.insert(channel.clone(), p);
        }
    }
    Ok(policy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reach_discord::render::ChannelPolicy;

    #[test]
    fn refusal_policy_defaults_to_post_and_reads_per_channel_exceptions() {
        let t: toml::Table = r#"
            refusals = "silent"
            refusals_by_channel = { "42" = "post" }
        "#
        .parse()
        .unwrap();
        let p = refusal_policy(&t).unwrap();
        assert_eq!(p.for_channel("42"), ChannelPolicy::PostRefusals);
        assert_eq!(p.for_channel("43"), ChannelPolicy::Silent);
        assert_eq!(
            refusal_policy(&toml::Table::new())
                .unwrap()
                .for_channel("1"),
            ChannelPolicy::PostRefusals
        );
        for bad in [
            r#"refusals = "loud""#,
            r#"refusals_by_channel = { "42" = "maybe" }"#,
            r#"refusals_by_channel = "silent""#,
        ] {
            let t: toml::Table = bad.parse().unwrap();
            assert!(refusal_policy(&t).is_err(), "{bad} was accepted");
        }
    }
}
