//! reach-egress-discord: serves its health port; its work arrives with later issues (see ARCHITECTURE.md).

fn main() -> std::process::ExitCode {
    reach_runtime::run("egress-discord", async |_role| Ok(()))
}
