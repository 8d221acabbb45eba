//! reach-ward: the Security Desk. Its own store, its own keys, no network.

use reach_proto::ward::v1::ward_server::{Ward, WardServer};
use reach_proto::ward::v1::*;
use tonic::{Request, Response, Status};

fn main() -> std::process::ExitCode {
    reach_runtime::run("ward", |role| {
        let result = role.serve("ward.authority", WardServer::new(Desk)).map_err(Into::into);
        async move { result }
    })
}

/// Scopes, Sigils and EgressDecisions land with issue #6; until then every method answers
/// UNIMPLEMENTED after authorization.
#[derive(Debug)]
struct Desk;

fn pending() -> Status {
    Status::unimplemented("scopes, Sigils and EgressDecisions land with issue #6")
}

#[tonic::async_trait]
impl Ward for Desk {
    async fn admit_scope(&self, _r: Request<AdmitScopeRequest>) -> Result<Response<AdmitScopeResponse>, Status> {
        Err(pending())
    }
    async fn issue_decision(&self, _r: Request<IssueDecisionRequest>) -> Result<Response<IssueDecisionResponse>, Status> {
        Err(pending())
    }
    async fn redeem_decision(&self, _r: Request<RedeemDecisionRequest>) -> Result<Response<RedeemDecisionResponse>, Status> {
        Err(pending())
    }
    async fn revoke(&self, _r: Request<RevokeRequest>) -> Result<Response<RevokeResponse>, Status> {
        Err(pending())
    }
}
