//! The one way an egress role redeems an EgressDecision at ward, immediately before bytes leave
//! (seed 001, step 6). The role passes the decision id core gave it, the destination it is about
//! to dial and the exact payload bytes; the payload digest is computed here, never taken from
//! core, so a decision bound to other bytes is refused by ward (`decision/payload-mismatch`).
//!
//! **Architecture Invariant:** a [`RedeemedDecision`] has no public constructor: holding one
//! proves ward admitted this one physical attempt. egress-discord and egress-provider both use
//! this crate; neither has a copy.

#![forbid(unsafe_code)]

use reach_digest::Sha256Digest;
use reach_proto::ward::v1::RedeemDecisionRequest;
use reach_proto::ward::v1::ward_client::WardClient;
use tonic::transport::Channel;

/// Ward admitted one physical attempt under this decision; these are its bindings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedeemedDecision {
    decision_id: String,
    run_id: String,
    attempt_id: String,
    max_tokens: u64,
    max_spend_micros: u64,
}

impl RedeemedDecision {
    pub fn decision_id(&self) -> &str {
        &self.decision_id
    }
    /// The run the decision was issued for.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }
    /// The one physical attempt the decision admits; the redeemer checks it is the one it makes.
    pub fn attempt_id(&self) -> &str {
        &self.attempt_id
    }
    /// Tokens this attempt may consume (0: not a metered attempt).
    pub fn max_tokens(&self) -> u64 {
        self.max_tokens
    }
    pub fn max_spend_micros(&self) -> u64 {
        self.max_spend_micros
    }
}

/// Why nothing may be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedeemRefusal {
    /// Ward refused the redemption with this typed code (`decision/expired`, …).
    Refused(String),
    /// Ward could not be asked (the gRPC status code); nothing is sent either.
    Unavailable(String),
}

impl RedeemRefusal {
    /// The code a gate reports.
    pub fn code(&self) -> String {
        match self {
            RedeemRefusal::Refused(code) => code.clone(),
            RedeemRefusal::Unavailable(status) => format!("ward/unavailable: {status}"),
        }
    }
}

/// Redeems `decision_id` at ward for sending `payload` to `destination`.
pub async fn redeem(
    ward: &mut WardClient<Channel>,
    decision_id: &str,
    destination: &str,
    payload: &[u8],
) -> Result<RedeemedDecision, RedeemRefusal> {
    let r = ward
        .redeem_decision(RedeemDecisionRequest {
            decision_id: decision_id.to_owned(),
            destination: destination.to_owned(),
            payload_digest: Sha256Digest::of(payload).to_string(),
        })
        .await
        .map_err(|s| RedeemRefusal::Unavailable(format!("{:?}", s.code())))?
        .into_inner();
    if !r.admitted {
        return Err(RedeemRefusal::Refused(r.refusal_code));
    }
    Ok(RedeemedDecision {
        decision_id: decision_id.to_owned(),
        run_id: r.run_id,
        attempt_id: r.attempt_id,
        max_tokens: r.max_tokens,
        max_spend_micros: r.max_spend_micros,
    })
}
