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

/// What one model attempt carries: a Privacy Cut (a public question's grounded passages) or
/// a task Room's rendered passage (`reach.room.passage/1`), told apart by their schema.
#[derive(Debug)]
pub enum ModelPayload {
    Cut(reach_portal::CutPayload),
    Passage(reach_passage::quarantine::PassagePayload),
    /// A readiness probe: which models the runtime serves (its exact bytes only).
    Probe,
}

impl ModelPayload {
    /// Either form, strictly; anything else (or a Sigil inside a passage) is refused with a
    /// code before any byte leaves.
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let schema = serde_json::from_slice::<serde_json::Value>(bytes)
            .ok()
            .and_then(|v| v.get("schema").and_then(|s| s.as_str()).map(str::to_owned));
        if schema.as_deref() == Some(reach_portal::openai::PROBE_SCHEMA) {
            return if bytes == reach_portal::openai::probe_payload() {
                Ok(ModelPayload::Probe)
            } else {
                Err("egress/probe-malformed".into())
            };
        }
        if schema.as_deref() == Some(reach_passage::quarantine::PASSAGE_SCHEMA) {
            let p = reach_passage::quarantine::PassagePayload::from_bytes(bytes)
                .map_err(|e| e.code().to_string())?;
            if reach_portal::cut::contains_sigil(&p.system)
                || reach_portal::cut::contains_sigil(&p.user)
            {
                return Err("egress/sigil-presented".into());
            }
            return Ok(ModelPayload::Passage(p));
        }
        reach_portal::cut::parse_payload(bytes)
            .map(ModelPayload::Cut)
            .map_err(|e| e.to_string())
    }
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
        // The payload must be a Cut or a task Room's passage and nothing else; a Sigil is
        // refused as such.
        let payload = match ModelPayload::parse(&r.payload) {
            Ok(p) => p,
            Err(code) => return refused(code),
        };
        // A probe reads the model list beside the endpoint; its decision binds that URL.
        let destination = match payload {
            ModelPayload::Probe => match portal.models_destination() {
                Some(d) => d,
                None => return refused("portal/no-models-url".into()),
            },
            _ => portal.destination(),
        };
        let mut ward = self.ward.clone();
        let decision =
            match reach_egress_gate::redeem(&mut ward, &r.decision_id, &destination, &r.payload)
                .await
            {
                Ok(d) => d,
                Err(e) => return refused(e.code()),
            };
        if decision.attempt_id() != r.attempt_id {
            return refused("decision/attempt-mismatch".into());
        }
        let result = match payload {
            ModelPayload::Probe => portal.probe().await.map(|m| m.to_bytes()),
            _ => portal
                .attempt(&decision, &payload)
                .await
                .map(|ret| ret.to_bytes()),
        };
        match result {
            Ok(body) => CallResponse {
                body,
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
    /// The attempt runs on its own task: a caller that goes away (core killed mid-call) drops
    /// only its wait, never an attempt between its bytes and its log line, so every transmitted
    /// attempt is logged with its decision.
    async fn call(&self, req: Request<CallRequest>) -> Result<Response<CallResponse>, Status> {
        let r = req.into_inner();
        let default = if self.portal.is_some() {
            Kind::Model
        } else {
            Kind::A2a
        };
        let kind = Kind::parse(&r.kind, default)?;
        let gate = self.clone();
        let answer = tokio::spawn(async move { gate.carry(kind, r).await })
            .await
            .map_err(|_| Status::internal("the attempt's task failed"))?;
        Ok(Response::new(answer))
    }
}

impl Gate {
    async fn carry(&self, kind: Kind, r: CallRequest) -> CallResponse {
        let (decision, attempt) = (r.decision_id.clone(), r.attempt_id.clone());
        let answer = match kind {
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
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::ModelPayload;

    fn passage(user: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "schema": reach_passage::quarantine::PASSAGE_SCHEMA,
            "role": "solver",
            "answer": "candidate",
            "system": "You are the Solver.",
            "user": user,
            "max_completion_tokens": 2048,
        }))
        .unwrap()
    }

    #[test]
    fn a_passage_is_told_from_a_cut_and_read_strictly() {
        assert!(matches!(
            ModelPayload::parse(&passage("the goal")),
            Ok(ModelPayload::Passage(p)) if p.user == "the goal" && p.max_completion_tokens == 2048
        ));
        // Neither form: refused before any byte, with the reader's code.
        assert!(ModelPayload::parse(b"{\"schema\":\"other\"}").is_err());
        assert!(ModelPayload::parse(b"not json").is_err());
        let mut extra: serde_json::Value = serde_json::from_slice(&passage("x")).unwrap();
        extra["tools"] = serde_json::json!([]);
        assert!(ModelPayload::parse(&serde_json::to_vec(&extra).unwrap()).is_err());
    }

    #[test]
    fn a_probe_is_its_exact_bytes_only() {
        assert!(matches!(
            ModelPayload::parse(&reach_portal::openai::probe_payload()),
            Ok(ModelPayload::Probe)
        ));
        assert_eq!(
            ModelPayload::parse(
                br#"{"schema":"reach.portal.probe/1","messages":[{"role":"user"}]}"#
            )
            .unwrap_err(),
            "egress/probe-malformed"
        );
    }

    #[test]
    fn a_passage_carrying_a_sigil_is_refused() {
        let sigil = format!("{}{}", reach_portal::cut::SIGIL_PREFIX, "a".repeat(32));
        assert_eq!(
            ModelPayload::parse(&passage(&format!("leak {sigil}"))).unwrap_err(),
            "egress/sigil-presented"
        );
    }
}
