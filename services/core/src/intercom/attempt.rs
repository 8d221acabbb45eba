//! How each physical attempt of an operator task is authorized and carried: [`WardIssuer`]
//! obtains one `a2a-task` decision at ward per attempt (bound to the attempt id, the peer URL
//! and the exact body's digest), and [`ProviderTransport`] hands `ProviderCall/Call` only that
//! body and the decision id; egress-provider redeems it at ward and carries the bytes once.

use std::sync::atomic::{AtomicBool, Ordering};

use reach_digest::Sha256Digest;
use reach_intercom::{
    Attempt, DecisionAuthority, DecisionId, DecisionRefusal, IntercomRefusal, Redeemed,
    Transmitted, Transport,
};
use reach_proto::egress::v1::CallRequest;
use reach_proto::egress::v1::provider_call_client::ProviderCallClient;
use reach_proto::ward::v1::IssueDecisionRequest;
use reach_proto::ward::v1::ward_client::WardClient;
use tonic::transport::Channel;

use super::POLICY_REVISION;

/// Issues one `a2a-task` decision per physical attempt at ward; redemption is egress-provider's.
pub(crate) struct WardIssuer {
    ward: WardClient<Channel>,
    /// The run's Sigil, or ward's refusal of the run's scope.
    sigil: Result<String, String>,
    run: String,
    /// Ward refused a decision for good (`refusal_final`: the Sigil expired, a budget other
    /// than concurrency is spent…): no later attempt of this run can be authorized.
    refused_for_good: AtomicBool,
}

impl WardIssuer {
    /// An issuer for `run` under its Sigil, or ward's refusal of the run's scope.
    pub(crate) fn new(
        ward: WardClient<Channel>,
        sigil: Result<String, String>,
        run: String,
    ) -> Self {
        WardIssuer {
            ward,
            sigil,
            run,
            refused_for_good: AtomicBool::new(false),
        }
    }

    /// Ward's refusal of the run's scope, if it refused.
    pub(crate) fn scope_refusal(&self) -> Option<&str> {
        self.sigil.as_ref().err().map(String::as_str)
    }

    /// Whether no decision can be issued for this run any more (see `refused_for_good`).
    pub(crate) fn refused_for_good(&self) -> bool {
        self.sigil.is_err() || self.refused_for_good.load(Ordering::Relaxed)
    }
}

impl DecisionAuthority for WardIssuer {
    async fn obtain_decision(&self, attempt: &Attempt) -> Result<DecisionId, DecisionRefusal> {
        let r = self
            .ward
            .clone()
            .issue_decision(IssueDecisionRequest {
                sigil_id: match &self.sigil {
                    Ok(s) => s.clone(),
                    Err(code) => return Err(decision_refusal(code.clone())),
                },
                run_id: self.run.clone(),
                attempt_id: attempt.attempt_id(),
                destination: attempt.destination.clone(),
                purpose: reach_intercom::decision::PURPOSE.into(),
                payload_digest: attempt.payload_digest.to_string(),
                labels: vec!["public".into()],
                // The operator's text goes as written: the receipt binds the body and says
                // nothing was withheld (there was no guest context to cut).
                cut_receipt_digest: operator_receipt(&attempt.payload_digest).to_string(),
                policy_revision: POLICY_REVISION.into(),
                max_tokens: 0,
                max_spend_micros: 0,
            })
            .await
            .map_err(|s| DecisionRefusal::Refused {
                code: format!("ward/unavailable: {:?}", s.code()),
            })?
            .into_inner();
        if r.refusal_code.is_empty() {
            return Ok(DecisionId(r.decision_id));
        }
        if r.refusal_final {
            self.refused_for_good.store(true, Ordering::Relaxed);
        }
        Err(decision_refusal(r.refusal_code))
    }

    async fn redeem(&self, _d: &DecisionId, _a: &Attempt) -> Result<(), DecisionRefusal> {
        // egress-provider redeems at ward, at byte time, with the digest it computes itself.
        Ok(())
    }
}

/// Ward's refusal code as the driver reads it: a revocation settles the task REVOKED, anything
/// else refuses this attempt only.
fn decision_refusal(code: String) -> DecisionRefusal {
    match code.as_str() {
        "sigil/revoked" | "decision/revoked" => DecisionRefusal::Revoked { code },
        _ => DecisionRefusal::Refused { code },
    }
}

/// The receipt of an operator task's payload: `reach.intercom.operator-receipt/1`, the body's
/// digest, nothing withheld.
fn operator_receipt(payload: &Sha256Digest) -> Sha256Digest {
    Sha256Digest::of(
        format!("{{\"kind\":\"reach.intercom.operator-receipt/1\",\"payload\":\"{payload}\",\"withheld\":[]}}")
            .as_bytes(),
    )
}

/// One attempt over `ProviderCall/Call`: the decision id, attempt id and exact body go to
/// egress-provider, which redeems and carries them.
pub(crate) struct ProviderTransport {
    pub(crate) provider: ProviderCallClient<Channel>,
    pub(crate) peer: String,
}

impl Transport for ProviderTransport {
    type Ready = CallRequest;

    fn url(&self) -> String {
        self.peer.clone()
    }

    async fn prepare(
        &self,
        redeemed: Redeemed,
        body: Vec<u8>,
    ) -> Result<CallRequest, IntercomRefusal> {
        Ok(CallRequest {
            decision_id: redeemed.decision().0.clone(),
            attempt_id: redeemed.attempt().attempt_id(),
            payload: body,
            kind: reach_intercom::decision::PURPOSE.into(),
        })
    }

    async fn transmit(&self, call: CallRequest) -> Transmitted {
        match self.provider.clone().call(call).await {
            Ok(r) => {
                let r = r.into_inner();
                match (r.transmitted, r.failure_code.is_empty()) {
                    (false, _) => Transmitted::NotSent {
                        code: r.failure_code,
                    },
                    (true, false) => Transmitted::Ambiguous {
                        code: r.failure_code,
                    },
                    (true, true) => Transmitted::Answered {
                        status: u16::try_from(r.http_status).unwrap_or(0),
                        digest: Sha256Digest::of(&r.body),
                        body: r.body,
                    },
                }
            }
            // The call may have reached egress-provider and its bytes the peer.
            Err(s) => Transmitted::Ambiguous {
                code: format!("egress/unavailable: {:?}", s.code()),
            },
        }
    }
}
