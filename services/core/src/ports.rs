//! Core's port handlers. The ledger behind them lands with the Phylactery issue (#4); until
//! then every method answers UNIMPLEMENTED after authorization, so the port table is enforced
//! on the real wire from day one.

use reach_proto::core::v1::admission_server::{Admission, AdmissionServer};
use reach_proto::core::v1::delivery_server::{Delivery, DeliveryServer};
use reach_proto::core::v1::trail_server::{Trail, TrailServer};
use reach_proto::core::v1::*;
use tonic::{Request, Response, Status};

#[derive(Debug, Default)]
pub struct Core;

fn pending() -> Status {
    Status::unimplemented("the ledger behind this port lands with issue #4")
}

pub fn admission() -> AdmissionServer<Core> {
    AdmissionServer::new(Core)
}
pub fn delivery() -> DeliveryServer<Core> {
    DeliveryServer::new(Core)
}
pub fn trail() -> TrailServer<Core> {
    TrailServer::new(Core)
}

#[tonic::async_trait]
impl Admission for Core {
    async fn admit(&self, _r: Request<AdmitRequest>) -> Result<Response<AdmitResponse>, Status> {
        Err(pending())
    }
}

#[tonic::async_trait]
impl Delivery for Core {
    async fn claim(&self, _r: Request<ClaimRequest>) -> Result<Response<ClaimResponse>, Status> {
        Err(pending())
    }
    async fn mark_submitting(
        &self,
        _r: Request<MarkSubmittingRequest>,
    ) -> Result<Response<MarkSubmittingResponse>, Status> {
        Err(pending())
    }
    async fn settle(&self, _r: Request<SettleRequest>) -> Result<Response<SettleResponse>, Status> {
        Err(pending())
    }
    async fn reconcile(&self, _r: Request<ReconcileRequest>) -> Result<Response<ReconcileResponse>, Status> {
        Err(pending())
    }
}

#[tonic::async_trait]
impl Trail for Core {
    async fn get_trail(&self, _r: Request<GetTrailRequest>) -> Result<Response<GetTrailResponse>, Status> {
        Err(pending())
    }
}
