//! reach-corpus-builder: acquires admitted sources and activates snapshots core reads.

use reach_proto::corpus::v1::corpus_admin_server::{CorpusAdmin, CorpusAdminServer};
use reach_proto::corpus::v1::*;
use tonic::{Request, Response, Status};

fn main() -> std::process::ExitCode {
    reach_runtime::run("corpus-builder", async |role| {
        role.serve("corpus-builder.admin", CorpusAdminServer::new(Builder))?;
        Ok(())
    })
}

/// Acquisition and activation land with issue #5.
#[derive(Debug)]
struct Builder;

fn pending() -> Status {
    Status::unimplemented("corpus acquisition lands with issue #5")
}

#[tonic::async_trait]
impl CorpusAdmin for Builder {
    async fn status(&self, _r: Request<StatusRequest>) -> Result<Response<StatusResponse>, Status> {
        Err(pending())
    }
    async fn admit(&self, _r: Request<AdmitRequest>) -> Result<Response<AdmitResponse>, Status> {
        Err(pending())
    }
}
