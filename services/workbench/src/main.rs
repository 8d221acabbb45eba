//! reach-workbench: the owning boundary for every effect inside an experiment's instance.
//!
//! Wiring only: read the trusted pack keys, open the clients of vm-broker.instances and
//! ward.authority, and serve `workbench.steps` (the behaviour is `crates/workbench`'s).
//! It holds no secret and has no network.

mod guest;
mod port;

use anyhow::Context as _;

fn main() -> std::process::ExitCode {
    reach_runtime::run("workbench", async |role| {
        let keys = reach_taskpack::TrustedKeys::from_settings(&role.config.settings)
            .map_err(anyhow::Error::msg)?;
        let broker = role
            .client("vm-broker.instances")
            .context("workbench calls vm-broker.instances")?;
        let ward = role
            .client("ward.authority")
            .context("workbench calls ward.authority")?;
        role.serve("workbench.steps", port::into_server(keys, broker, ward))?;
        Ok(())
    })
}
