//! reach-vm-broker: start the broker (reaping whatever an earlier run left), serve its port.

mod port;

use std::sync::Arc;

use anyhow::Context as _;
use reach_vm::settings::{RUN_DIR, Settings};

fn main() -> std::process::ExitCode {
    reach_runtime::run("vm-broker", async |role| {
        let settings = Settings::from_table(&role.config.settings).context("vm-broker settings")?;
        let cfg = settings.broker_config(&role.config.data_dir.join(RUN_DIR));
        let (broker, report) =
            reach_vm::instance::Broker::start(cfg, Arc::new(reach_clock::SystemClock)).await?;
        tracing::info!(
            accel = broker.accel().as_str(),
            reaped = report.reaped.len(),
            confirmed = report.confirmed.len(),
            orphans = report.orphans.len(),
            "vm broker started"
        );
        let keys = reach_taskpack::TrustedKeys::from_settings(&role.config.settings)
            .map_err(anyhow::Error::msg)?;
        role.serve(
            "vm-broker.instances",
            port::into_server(broker, settings, keys),
        )?;
        Ok(())
    })
}
