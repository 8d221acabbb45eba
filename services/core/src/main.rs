//! reach-core: the turn owner. Holds the Phylactery; no network, no credential but the vault's.

mod authority;
mod pipeline;
mod ports;

use std::sync::Arc;
use std::time::Duration;

use reach_manifest::CredentialKind;
use reach_phylactery::{Phylactery, SystemClock, VaultConfig};

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
        let policy = match role
            .config
            .settings
            .get("refusals")
            .and_then(|v| v.as_str())
        {
            None | Some("post") => reach_discord::render::ChannelPolicy::PostRefusals,
            Some("silent") => reach_discord::render::ChannelPolicy::Silent,
            Some(other) => {
                anyhow::bail!("settings.refusals must be \"post\" or \"silent\", not {other:?}")
            }
        };
        let ward = role.client("ward.authority")?;
        let committed = Arc::new(tokio::sync::Notify::new());
        let pipeline = pipeline::Pipeline::new(
            vault.clone(),
            corpus_root,
            ward.clone(),
            policy,
            committed.clone(),
        );
        let authority = authority::DeliveryAuthority::new(ward, vault.clone());
        let core = ports::Core::new(
            vault,
            role.config.habitat.clone(),
            pipeline,
            authority,
            committed,
        );
        role.serve("core.admission", core.admission())?;
        role.serve("core.delivery", core.delivery())?;
        role.serve("core.trail", core.trail())?;
        Ok(())
    })
}
