//! EgressDecisions across the real roles: the ward process, called with each role's real
//! certificate over the `ward.authority` mTLS port.
//!
//! Core admits a scope and issues decisions; only the egress role the purpose names can redeem,
//! exactly once; the operator's revocation refuses what is left. Refusals are answers
//! (`refusal_code`), not gRPC errors; the port table still refuses callers by method.

use reach_proto::ward::v1::ward_client::WardClient;
use reach_proto::ward::v1::{
    AdmitScopeRequest, IssueDecisionRequest, RedeemDecisionRequest, RevokeRequest,
};
use reach_tests::TestBody;
use tonic::Code;
use tonic::transport::Channel;

const DISCORD_REST: &str = "https://discord.com:443/api/v10/channels/c1/messages";

fn client(body: &TestBody, caller: &str) -> WardClient<Channel> {
    let server = body.manifest.principal("ward");
    WardClient::new(reach_port::connect_lazy(
        body.socket("ward.authority"),
        &body.material(caller),
        server,
    ))
}

/// A well-formed digest text; ward binds digests, it never sees the payload.
fn digest(fill: &str) -> String {
    format!("sha256:{}", fill.repeat(32))
}

fn decision_request(sigil: &str, run: &str, attempt: &str, payload: &str) -> IssueDecisionRequest {
    IssueDecisionRequest {
        sigil_id: sigil.into(),
        run_id: run.into(),
        attempt_id: attempt.into(),
        destination: DISCORD_REST.into(),
        purpose: "discord-delivery".into(),
        payload_digest: digest(payload),
        labels: vec!["public".into()],
        cut_receipt_digest: String::new(),
        policy_revision: "policy-1".into(),
        max_tokens: 0,
        max_spend_micros: 0,
    }
}

fn redeem(decision: &str, payload: &str) -> RedeemDecisionRequest {
    RedeemDecisionRequest {
        decision_id: decision.into(),
        destination: DISCORD_REST.into(),
        payload_digest: digest(payload),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_issues_the_named_egress_redeems_once_and_the_operator_revokes() {
    let body = TestBody::start().await;
    let (mut core, mut discord, mut provider, mut operator) = (
        client(&body, "core"),
        client(&body, "egress-discord"),
        client(&body, "egress-provider"),
        client(&body, "operator"),
    );

    let admitted = core
        .admit_scope(AdmitScopeRequest {
            platform: "discord".into(),
            application_id: "111".into(),
            guild_id: "222".into(),
            channel_id: "333".into(),
            subject_id: "444".into(),
            run_id: "run-1".into(),
            expires_at_ms: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(admitted.refusal_code, "");
    assert!(admitted.sigil_id.starts_with("sigil_") && admitted.scope_id.starts_with("scope_"));
    let sigil = admitted.sigil_id;

    let issued = core
        .issue_decision(decision_request(&sigil, "run-1", "att-1", "a1"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(issued.refusal_code, "");
    assert!(issued.decision_id.starts_with("egd_"));

    // egress-provider may call RedeemDecision, but a discord-delivery decision is not its own.
    let r = provider
        .redeem_decision(redeem(&issued.decision_id, "a1"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (r.admitted, r.refusal_code.as_str()),
        (false, "decision/wrong-redeemer")
    );

    // The Sigil is not a decision, whoever presents it.
    let r = discord
        .redeem_decision(redeem(&sigil, "a1"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (r.admitted, r.refusal_code.as_str()),
        (false, "decision/unknown")
    );

    // Another payload is refused; the decision is not burned by it.
    let r = discord
        .redeem_decision(redeem(&issued.decision_id, "b2"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (r.admitted, r.refusal_code.as_str()),
        (false, "decision/payload-mismatch")
    );

    let r = discord
        .redeem_decision(redeem(&issued.decision_id, "a1"))
        .await
        .unwrap()
        .into_inner();
    assert!(r.admitted, "refused: {}", r.refusal_code);
    assert_eq!(
        (r.run_id.as_str(), r.attempt_id.as_str()),
        ("run-1", "att-1")
    );
    let r = discord
        .redeem_decision(redeem(&issued.decision_id, "a1"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (r.admitted, r.refusal_code.as_str()),
        (false, "decision/already-redeemed")
    );

    // A second attempt, then the operator revokes the task before it is redeemed.
    let second = core
        .issue_decision(decision_request(&sigil, "run-1", "att-2", "c3"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(second.refusal_code, "");
    let revoked = operator
        .revoke(RevokeRequest {
            sigil_id: sigil.clone(),
            reason: "operator test".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (revoked.refusal_code.as_str(), revoked.decisions_revoked),
        ("", 1)
    );
    let r = discord
        .redeem_decision(redeem(&second.decision_id, "c3"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (r.admitted, r.refusal_code.as_str()),
        (false, "decision/revoked")
    );
    let refused = core
        .issue_decision(decision_request(&sigil, "run-1", "att-3", "d4"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (refused.decision_id.as_str(), refused.refusal_code.as_str()),
        ("", "sigil/revoked")
    );

    // The port table still decides who may call what.
    let denied = discord
        .issue_decision(decision_request(&sigil, "run-1", "att-4", "e5"))
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied);
    let denied = core
        .redeem_decision(redeem(&second.decision_id, "c3"))
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied);

    // Malformed input is the only gRPC error a permitted caller sees.
    let mut bad = decision_request(&sigil, "run-1", "att-5", "f6");
    bad.payload_digest = "md5:abc".into();
    assert_eq!(
        core.issue_decision(bad).await.unwrap_err().code(),
        Code::InvalidArgument
    );

    body.stop().await;
}
