//! reach-ingress-edge: serves its health port; its work arrives with later issues (see ARCHITECTURE.md).

fn main() -> std::process::ExitCode {
    reach_runtime::run("ingress-edge", async |_role| Ok(()))
}
