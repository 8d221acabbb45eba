//! The health port every role serves to the operator.

use std::sync::Arc;
use std::time::Instant;

use reach_port::PortMaterial;
use reach_proto::health::v1::health_server::{Health, HealthServer};
use reach_proto::health::v1::{CheckRequest, CheckResponse, ServingStatus};
use tonic::{Request, Response, Status};

#[derive(Debug)]
pub(crate) struct HealthService {
    role: String,
    material: Arc<PortMaterial>,
    started: Instant,
}

impl HealthService {
    pub(crate) fn new(role: String, material: Arc<PortMaterial>) -> Self {
        Self {
            role,
            material,
            started: Instant::now(),
        }
    }
    pub(crate) fn into_server(self) -> HealthServer<Self> {
        HealthServer::new(self)
    }
}

#[tonic::async_trait]
impl Health for HealthService {
    async fn check(&self, _req: Request<CheckRequest>) -> Result<Response<CheckResponse>, Status> {
        let own = self.material.own();
        Ok(Response::new(CheckResponse {
            role: self.role.clone(),
            principal: own.principal.to_string(),
            status: ServingStatus::Serving as i32,
            uptime_ms: self.started.elapsed().as_millis() as u64,
            leaf_serial: own.serial_hex,
        }))
    }
}
