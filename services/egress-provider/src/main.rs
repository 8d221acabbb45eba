//! reach-egress-provider: one model provider or A2A peer per instance; holds only its key file.

use reach_proto::egress::v1::provider_call_server::{ProviderCall, ProviderCallServer};
use reach_proto::egress::v1::*;
use tonic::{Request, Response, Status};

fn main() -> std::process::ExitCode {
    reach_runtime::run("egress-provider", async |role| {
        role.serve("egress-provider.call", ProviderCallServer::new(Gate))?;
        Ok(())
    })
}

/// The model Portal and A2A adapters land with issue #6.
#[derive(Debug)]
struct Gate;

#[tonic::async_trait]
impl ProviderCall for Gate {
    async fn call(&self, _r: Request<CallRequest>) -> Result<Response<CallResponse>, Status> {
        Err(Status::unimplemented(
            "the model Portal lands with issue #6",
        ))
    }
}
