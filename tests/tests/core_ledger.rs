//! Core's ledger ports on the real body: a fresh vault refuses admissions until the operator
//! reconciles it; then admission is exactly-once, replay answers the committed status, a
//! changed payload is a security fault, and the operator reads the committed chain.

use reach_proto::core::v1::admission_client::AdmissionClient;
use reach_proto::core::v1::trail_client::TrailClient;
use reach_proto::core::v1::*;
use reach_tests::TestBody;

fn event(id: &str, payload: &[u8]) -> AdmitRequest {
    AdmitRequest {
        platform: "discord".into(),
        adapter_revision: "reach-discord@1".into(),
        application_id: "app-1".into(),
        event_kind: "MESSAGE_CREATE".into(),
        external_event_id: id.into(),
        payload_digest: reach_digest::Sha256Digest::of(payload).to_string(),
        guild_id: "g1".into(),
        channel_id: "c1".into(),
        subject_id: "u1".into(),
        question: "how do ports authenticate?".into(),
        reply_to_message_id: id.into(),
        sealed_interaction_token: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_replay_fault_and_trail_over_the_ports() {
    let body = TestBody::start().await;
    let core = body.manifest.principal("core");
    let edge = AdmissionClient::new(reach_port::connect_lazy(
        body.socket("core.admission"),
        &body.material("ingress-edge"),
        core.clone(),
    ));
    let mut edge = edge;
    let mut operator = TrailClient::new(reach_port::connect_lazy(
        body.socket("core.trail"),
        &body.material("operator"),
        core.clone(),
    ));

    // A fresh vault serves nothing until the operator reconciles it.
    let s = operator
        .vault_status(VaultStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(s.status, "AWAITING_RECONCILIATION");
    let refused = edge.admit(event("m-1", b"q")).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    assert!(
        refused.message().starts_with("vault/unreconciled"),
        "{}",
        refused.message()
    );
    let empty = operator
        .reconcile_vault(ReconcileVaultRequest {
            kind: "GENESIS".into(),
            note: " ".into(),
        })
        .await;
    assert_eq!(empty.unwrap_err().code(), tonic::Code::InvalidArgument);
    operator
        .reconcile_vault(ReconcileVaultRequest {
            kind: "GENESIS".into(),
            note: "new deployment, no earlier effects".into(),
        })
        .await
        .unwrap();

    // Exactly once; replay returns the committed admission.
    let first = edge.admit(event("m-1", b"q")).await.unwrap().into_inner();
    assert_eq!(first.outcome(), AdmissionOutcome::Admitted);
    let again = edge.admit(event("m-1", b"q")).await.unwrap().into_inner();
    assert_eq!(again.outcome(), AdmissionOutcome::Replayed);
    assert_eq!(again.admission_id, first.admission_id);

    // Same key, changed content: a security fault, and the committed admission is unchanged.
    let fault = edge
        .admit(event("m-1", b"changed"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(fault.outcome(), AdmissionOutcome::SecurityFault);
    assert_eq!(fault.refusal_code, "admission/payload-digest-mismatch");
    let still = edge.admit(event("m-1", b"q")).await.unwrap().into_inner();
    assert_eq!(
        (still.outcome(), still.admission_id),
        (AdmissionOutcome::Replayed, first.admission_id.clone())
    );

    // A malformed digest is refused at the adapter.
    let mut bad = event("m-2", b"q");
    bad.payload_digest = "md5:abc".into();
    assert_eq!(
        edge.admit(bad).await.unwrap_err().code(),
        tonic::Code::InvalidArgument
    );

    // The operator reads the committed chain by event id.
    let trail = operator
        .get_trail(GetTrailRequest { key: "m-1".into() })
        .await
        .unwrap()
        .into_inner();
    let records: Vec<_> = trail.edges.iter().map(|e| e.record.as_str()).collect();
    assert!(records.contains(&"DiscordEventAdmission@1"), "{records:?}");
    assert!(records.contains(&"ReachTurn@1"), "{records:?}");

    body.stop().await;
}
