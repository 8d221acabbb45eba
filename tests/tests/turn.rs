//! One public question through the real body, without Discord: ingress-edge's certificate admits
//! it, core grounds it in the activated default corpus (the project's docs), answers with the
//! local extractive cognition, and commits the turn with one PENDING delivery intent that
//! egress-discord's certificate claims. Out-of-corpus questions are refused with the honest text.

use std::time::{Duration, Instant};

use reach_proto::core::v1::admission_client::AdmissionClient;
use reach_proto::core::v1::delivery_client::DeliveryClient;
use reach_proto::core::v1::trail_client::TrailClient;
use reach_proto::core::v1::*;
use reach_tests::TestBody;

fn question(id: &str, text: &str) -> AdmitRequest {
    AdmitRequest {
        platform: "discord".into(),
        adapter_revision: "reach-discord@1".into(),
        application_id: "app-1".into(),
        event_kind: "MESSAGE_CREATE".into(),
        external_event_id: id.into(),
        payload_digest: reach_digest::Sha256Digest::of(text).to_string(),
        guild_id: "g1".into(),
        channel_id: "c1".into(),
        subject_id: "u1".into(),
        question: text.into(),
        reply_to_message_id: id.into(),
    }
}

async fn claim_within(
    sender: &mut DeliveryClient<tonic::transport::Channel>,
    limit: Duration,
) -> DeliveryIntent {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(i) = sender
            .claim(ClaimRequest { lease_ms: 5_000 })
            .await
            .unwrap()
            .into_inner()
            .intent
        {
            return i;
        }
        assert!(Instant::now() < deadline, "no intent became claimable");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_becomes_one_cited_intent_and_an_unknown_one_is_refused() {
    let body = TestBody::start().await;
    let core = body.manifest.principal("core");
    let mut edge = AdmissionClient::new(reach_port::connect_lazy(
        body.socket("core.admission"),
        &body.material("ingress-edge"),
        core.clone(),
    ));
    let mut operator = TrailClient::new(reach_port::connect_lazy(
        body.socket("core.trail"),
        &body.material("operator"),
        core.clone(),
    ));
    let mut sender = DeliveryClient::new(reach_port::connect_lazy(
        body.socket("core.delivery"),
        &body.material("egress-discord"),
        core,
    ));
    operator
        .reconcile_vault(ReconcileVaultRequest {
            kind: "GENESIS".into(),
            note: "test deployment".into(),
        })
        .await
        .unwrap();

    let admitted = edge
        .admit(question("m-10", "How does a port authenticate a call?"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(admitted.outcome(), AdmissionOutcome::Admitted);
    let intent = claim_within(&mut sender, Duration::from_secs(20)).await;
    assert_eq!(
        (
            intent.channel_id.as_str(),
            intent.reply_to_message_id.as_str()
        ),
        ("c1", "m-10")
    );
    assert!(intent.nonce.len() <= 25 && !intent.nonce.is_empty());
    let text = intent.parts.join("\n");
    assert!(
        text.contains("<https://reach.invalid/reach/blob/"),
        "answer must cite commit-pinned docs:\n{text}"
    );
    assert!(text.contains("[1]"), "{text}");

    // The replayed event answers with the committed turn status.
    let replay = edge
        .admit(question("m-10", "How does a port authenticate a call?"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (replay.outcome(), replay.turn_status.as_str()),
        (AdmissionOutcome::Replayed, "SUCCEEDED")
    );

    // Out of corpus: REFUSED with the honest text, before any model call.
    edge.admit(question(
        "m-11",
        "What is the airspeed velocity of an unladen swallow?",
    ))
    .await
    .unwrap();
    let refusal = claim_within(&mut sender, Duration::from_secs(20)).await;
    assert!(
        refusal.parts[0].contains("won't guess"),
        "{:?}",
        refusal.parts
    );

    let trail = operator
        .get_trail(GetTrailRequest { key: "m-10".into() })
        .await
        .unwrap()
        .into_inner();
    let records: Vec<_> = trail.edges.iter().map(|e| e.record.as_str()).collect();
    for r in [
        "DiscordEventAdmission@1",
        "ReachTurn@1",
        "DiscordDeliveryIntent@1",
    ] {
        assert!(records.contains(&r), "{r} missing from {records:?}");
    }
    println!("{records:?}");
    body.stop().await;
}
