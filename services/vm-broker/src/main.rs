//! reach-vm-broker: serves its health port; its work arrives with later issues (see ARCHITECTURE.md).

fn main() -> std::process::ExitCode {
    reach_runtime::run("vm-broker", async |_role| Ok(()))
}
