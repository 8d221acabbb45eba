//! The `ProviderCall/Call` handler: dispatch by kind, payload check, redemption, one attempt.
//!
//! Every refusal before the attempt says `transmitted = false`, and nothing was sent: the payload
//! is not a Cut or an Intercom request (or carries a Sigil), the decision is not redeemed for
//! this destination and payload digest, or it admits another attempt.

use std::sync::Arc;

use reach_intercom::Transmitted;
use reach_proto::egress::v1::provider_call_server::ProviderCall;
use reach_proto::egress::v1::{CallRequest, CallResponse};
use reach_proto::ward::v1::ward_client::WardClient;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

use crate::intercom::Peer;
use crate::portal::Portal;

/// What a call asks this instance to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The model Portal (purpose `model-completion`).
    Model,
    /// An A2A task to an enrolled peer (purpose `a2a-task`), through Intercom.
    A2a,
}

impl Kind {
    fn parse(kind: &str, default: Kind) -> Result<Kind, Status> {
        match kind {
            "" => Ok(default),
            "model-completion" => Ok(Kind::Model),
            "a2a-task" => Ok(Kind::A2a),
            _ => Err(Status::invalid_argument(
                "kind must be model-completion or a2a-task",
            )),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Gate {
    ward: WardClient<Channel>,
    portal: Option<Arc<Portal>>,
    peer: Option<Arc<Peer>>,
}

/// A refusal before any byte.
fn refused(code: String) -> CallResponse {
    CallResponse {
        failure_code: code,
        transmitted: false,
        ..Default::default()
    }
}

impl Gate {
    pub fn new(
        ward: WardClient<Channel>,
        portal: Option<Arc<Portal>>,
        peer: Option<Arc<Peer>>,
    ) -> Self {
        Gate { ward, portal, peer }
    }

    /// One A2A attempt: the payload must be an Intercom request; `carry` redeems the decision
    /// for this instance's peer URL and the payload's digest, then writes the bytes once.
    async fn a2a(&self, peer: &Peer, r: CallRequest) -> CallResponse {
        if let Err(e) = crate::intercom::check_payload(&r.payload) {
            return refused(e.to_string());
        }
        match peer
            .attempt(self.ward.clone(), r.decision_id, &r.attempt_id, r.payload)
            .await
        {
            Transmitted::Answered { status, body, .. } => CallResponse {
                body,
                failure_code: String::new(),
                transmitted: true,
                http_status: u32::from(status),
            },
            Transmitted::Ambiguous { code } => CallResponse {
                failure_code: code,
                transmitted: true,
                ..Default::default()
            },
            Transmitted::NotSent { code } => refused(code),
        }
    }

    async fn model(&self, portal: &Portal, r: CallRequest) -> CallResponse {
        // The payload must be a Cut and nothing else; a Sigil is refused as such.
        let payload = match reach_portal::cut::parse_payload(&r.payload) {
            Ok(p) => p,
            Err(e) => return refused(e.to_string()),
        };
        let mut ward = self.ward.clone();
        let decision = match reach_egress_gate::redeem(
            &mut ward,
            &r.decision_id,
            &portal.destination(),
            &r.payload,
        )
        .await
        {
            Ok(d) => d,
            Err(e) => return refused(e.code()),
        };
        if decision.attempt_id() != r.attempt_id {
            return refused("decision/attempt-mismatch".into());
        }
        match portal.attempt(&decision, &payload).await {
            Ok(ret) => CallResponse {
                body: ret.to_bytes(),
                failure_code: String::new(),
                transmitted: true,
                http_status: 0,
            },
            Err(f) => CallResponse {
                body: Vec::new(),
                failure_code: f.code(),
                transmitted: f.transmitted(),
                http_status: 0,
            },
        }
    }
}

#[tonic::async_trait]
impl ProviderCall for Gate {
    async fn call(&self, req: Request<CallRequest>) -> Result<Response<CallResponse>, Status> {
        let r = req.into_inner();
        let default = if self.portal.is_some() {
            Kind::Model
        } else {
            Kind::A2a
        };
        let (decision, attempt) = (r.decision_id.clone(), r.attempt_id.clone());
        let answer = match Kind::parse(&r.kind, default)? {
            Kind::Model => match &self.portal {
                Some(portal) => self.model(portal, r).await,
                None => refused("egress/adapter-not-configured".into()),
            },
            Kind::A2a => match &self.peer {
                Some(peer) => self.a2a(peer, r).await,
                None => refused("egress/adapter-not-configured".into()),
            },
        };
        tracing::info!(
            decision,
            attempt,
            code = answer.failure_code,
            transmitted = answer.transmitted,
            "provider call"
        );
        Ok(Response::new(answer))
    }
}
