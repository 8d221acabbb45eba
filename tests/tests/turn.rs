//! One public question through the real body, without Discord: ingress-edge's certificate admits
//! it, core grounds it in the activated default corpus (the project's docs), answers with the
//! local extractive cognition, and commits the turn with one PENDING delivery intent that
//! egress-discord's certificate claims. Out-of-corpus questions are refused with the honest text.
//! Every claim carries a fresh EgressDecision that only binds exactly what the gate will send.

use std::time::{Duration, Instant};

use reach_proto::core::v1::admission_client::AdmissionClient;
use reach_proto::core::v1::delivery_client::DeliveryClient;
use reach_proto::core::v1::*;
use reach_proto::ward::v1::RedeemDecisionRequest;
use reach_proto::ward::v1::ward_client::WardClient;
use reach_tests::TestBody;

/// The REST base the test claims for, as egress-discord would for its configured API.
const BASE: &str = "https://discord.test/api/v10";

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
        sealed_interaction_token: Vec::new(),
    }
}

type Channel = tonic::transport::Channel;

/// Core's admission port as ingress-edge and its delivery port as egress-discord.
fn edge_and_gate(body: &TestBody) -> (AdmissionClient<Channel>, DeliveryClient<Channel>) {
    let core = body.manifest.principal("core");
    let edge = AdmissionClient::new(reach_port::connect_lazy(
        body.socket("core.admission"),
        &body.material("ingress-edge"),
        core.clone(),
    ));
    let gate = DeliveryClient::new(reach_port::connect_lazy(
        body.socket("core.delivery"),
        &body.material("egress-discord"),
        core,
    ));
    (edge, gate)
}

/// One claim without waiting, as egress-discord makes it for `BASE`.
async fn claim_once(sender: &mut DeliveryClient<Channel>) -> ClaimResponse {
    sender
        .claim(ClaimRequest {
            lease_ms: 5_000,
            destination_base: BASE.into(),
            wait_ms: 0,
            interactions_only: false,
        })
        .await
        .unwrap()
        .into_inner()
}

async fn claim_within(
    sender: &mut DeliveryClient<tonic::transport::Channel>,
    limit: Duration,
) -> DeliveryIntent {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(i) = sender
            .claim(ClaimRequest {
                lease_ms: 5_000,
                destination_base: BASE.into(),
                wait_ms: 0,
                interactions_only: false,
            })
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
    let (mut edge, mut sender) = edge_and_gate(&body);
    let mut operator = body.operator_after_genesis("test deployment").await;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_claim_carries_a_fresh_decision_bound_to_what_is_sent() {
    let body = TestBody::start().await;
    let core = body.manifest.principal("core");
    let as_gate = |port: &str, server| {
        reach_port::connect_lazy(body.socket(port), &body.material("egress-discord"), server)
    };
    let mut edge = AdmissionClient::new(reach_port::connect_lazy(
        body.socket("core.admission"),
        &body.material("ingress-edge"),
        core.clone(),
    ));
    let mut sender = DeliveryClient::new(as_gate("core.delivery", core));
    let mut ward = WardClient::new(as_gate("ward.authority", body.manifest.principal("ward")));
    let mut operator = body.operator_after_genesis("test deployment").await;
    edge.admit(question("m-20", "How does a port authenticate a call?"))
        .await
        .unwrap();
    let intent = claim_within(&mut sender, Duration::from_secs(20)).await;

    // The decision binds this attempt: the URL under the gate's base, the exact content bytes.
    assert!(!intent.egress_decision_id.is_empty());
    assert_eq!(intent.destination, format!("{BASE}/channels/c1/messages"));
    let content = reach_digest::Sha256Digest::of(&intent.parts[0]).to_string();
    assert_eq!(intent.content_digest, content);

    // SUBMITTING needs exactly the decision core issued for this claim.
    let submit = |decision: &str| MarkSubmittingRequest {
        intent_id: intent.intent_id.clone(),
        generation: intent.generation,
        egress_decision_id: decision.into(),
    };
    let wrong = sender
        .mark_submitting(submit("dec_forged"))
        .await
        .unwrap_err();
    assert_eq!(wrong.code(), tonic::Code::FailedPrecondition);
    assert!(
        wrong.message().starts_with("egress/decision-mismatch"),
        "{}",
        wrong.message()
    );

    // Ward redeems it only for the same destination and content, exactly once.
    let redeem = |destination: &str, digest: &str| RedeemDecisionRequest {
        decision_id: intent.egress_decision_id.clone(),
        destination: destination.into(),
        payload_digest: digest.into(),
    };
    let altered = reach_digest::Sha256Digest::of("something else").to_string();
    let r = ward
        .redeem_decision(redeem(&intent.destination, &altered))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (r.admitted, r.refusal_code.as_str()),
        (false, "decision/payload-mismatch")
    );
    let elsewhere = format!("{BASE}/channels/c2/messages");
    let r = ward
        .redeem_decision(redeem(&elsewhere, &content))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (r.admitted, r.refusal_code.as_str()),
        (false, "decision/destination-mismatch")
    );
    let r = ward
        .redeem_decision(redeem(&intent.destination, &content))
        .await
        .unwrap()
        .into_inner();
    assert!(r.admitted, "{}", r.refusal_code);
    assert_eq!(
        r.attempt_id,
        format!("{}#g{}", intent.intent_id, intent.generation)
    );
    let again = ward
        .redeem_decision(redeem(&intent.destination, &content))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (again.admitted, again.refusal_code.as_str()),
        (false, "decision/already-redeemed")
    );
    sender
        .mark_submitting(submit(&intent.egress_decision_id))
        .await
        .unwrap();

    // The ledger holds the decision on the turn's chain.
    let trail = operator
        .get_trail(GetTrailRequest { key: "m-20".into() })
        .await
        .unwrap()
        .into_inner();
    let decision = trail
        .edges
        .iter()
        .find(|e| e.record == "EgressDecision")
        .unwrap_or_else(|| panic!("no EgressDecision on the trail: {:?}", trail.edges));
    assert_eq!(decision.id, intent.egress_decision_id);

    // A pre-submit reclaim is a new generation with a new decision; ward's concurrency budget
    // (4 live decisions per task) then refuses, and the refused claim hands nothing out.
    edge.admit(question("m-21", "How does a port authenticate a call?"))
        .await
        .unwrap();
    let mut seen = Vec::new();
    let refusal = loop {
        let r = sender
            .claim(ClaimRequest {
                lease_ms: 1,
                destination_base: BASE.into(),
                wait_ms: 0,
                interactions_only: false,
            })
            .await
            .unwrap()
            .into_inner();
        match r.intent {
            Some(i) => seen.push((i.generation, i.egress_decision_id)),
            None if !r.refusal_code.is_empty() => break r,
            None => {}
        }
        assert!(seen.len() <= 8, "ward never refused: {seen:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        (
            refusal.refusal_code.as_str(),
            refusal.refusal_detail.as_str()
        ),
        ("decision/over-budget", "concurrency")
    );
    let generations: Vec<_> = seen.iter().map(|(g, _)| *g).collect();
    assert_eq!(generations, [1, 2, 3, 4], "{seen:?}");
    let mut ids: Vec<_> = seen.iter().map(|(_, d)| d.clone()).collect();
    ids.dedup();
    assert_eq!(ids.len(), 4, "every claim has its own decision: {seen:?}");
    // A forged base is refused before ward is asked.
    let bad = sender
        .claim(ClaimRequest {
            lease_ms: 1,
            destination_base: "http://discord.test/api/v10".into(),
            wait_ms: 0,
            interactions_only: false,
        })
        .await;
    assert_eq!(bad.unwrap_err().code(), tonic::Code::InvalidArgument);
    body.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tainted_gate_cannot_submit_what_it_claimed() {
    let body = TestBody::start().await;
    let gate = body.manifest.principal("egress-discord");
    let (mut edge, mut sender) = edge_and_gate(&body);
    let mut operator = body.operator_after_genesis("test deployment").await;
    edge.admit(question("m-30", "How does a port authenticate a call?"))
        .await
        .unwrap();
    let intent = claim_within(&mut sender, Duration::from_secs(20)).await;

    // The operator must say who and why.
    let blank = operator
        .mark_tainted(MarkTaintedRequest {
            principal: gate.to_string(),
            reason: " ".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(blank.code(), tonic::Code::InvalidArgument);

    // The gate is compromised: its live lease is revoked before it could submit.
    let report = operator
        .mark_tainted(MarkTaintedRequest {
            principal: gate.to_string(),
            reason: "egress-discord host compromised".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let touched: Vec<_> = report
        .records
        .iter()
        .map(|r| (r.id.as_str(), r.action.as_str()))
        .collect();
    assert!(
        touched.contains(&(intent.intent_id.as_str(), "LEASE_REVOKED")),
        "{touched:?}"
    );
    let refused = sender
        .mark_submitting(MarkSubmittingRequest {
            intent_id: intent.intent_id.clone(),
            generation: intent.generation,
            egress_decision_id: intent.egress_decision_id.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::FailedPrecondition,
        "{refused:?}"
    );

    let trail = reach_tests::trail_text(&mut operator, "m-30").await;
    assert!(trail.contains("Tainted"), "{trail}");
    body.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_intent_whose_sigil_expired_ends_not_attempted_and_is_never_sent() {
    // Ward lets a task live 1.5 s: the intent is committed, then nobody claims it in time.
    let body = TestBody::start_configured(|m, _| {
        let ward = m
            .roles
            .iter_mut()
            .find(|r| r.name.as_str() == "ward")
            .expect("ward");
        let mut budgets = toml::Table::new();
        budgets.insert("time_ms".into(), toml::Value::Integer(1_500));
        ward.settings.insert("budgets".into(), budgets.into());
    })
    .await;
    let (mut edge, mut sender) = edge_and_gate(&body);
    let mut operator = body.operator_after_genesis("test deployment").await;
    edge.admit(question("m-30", "How does a port authenticate a call?"))
        .await
        .unwrap();
    // The turn commits its PENDING intent well inside the task's life...
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let trail = operator
            .get_trail(GetTrailRequest { key: "m-30".into() })
            .await
            .unwrap()
            .into_inner();
        if has(&trail.edges, "DiscordDeliveryIntent@1", "state", "PENDING") {
            break;
        }
        assert!(Instant::now() < deadline, "no intent: {:?}", trail.edges);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // ...and is claimed only after it: ward refuses the decision for good.
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let r = claim_once(&mut sender).await;
    assert!(
        r.intent.is_none(),
        "an expired task's intent was handed out"
    );
    assert_eq!(r.refusal_code, "sigil/expired");
    // The intent ended NOT_ATTEMPTED: nothing to claim, ever, and the trail says why.
    let again = claim_once(&mut sender).await;
    assert!(
        again.intent.is_none() && again.refusal_code.is_empty(),
        "{again:?}"
    );
    let trail = operator
        .get_trail(GetTrailRequest { key: "m-30".into() })
        .await
        .unwrap()
        .into_inner();
    assert!(
        has(
            &trail.edges,
            "DiscordDeliveryIntent@1",
            "state",
            "NOT_ATTEMPTED"
        ) && has(&trail.edges, "ReachDelivery@1", "outcome", "NOT_ATTEMPTED"),
        "{:?}",
        trail.edges
    );
    body.stop().await;
}

/// Whether the trail holds `record` with `field` = `value`.
fn has(edges: &[TrailEdge], record: &str, field: &str, value: &str) -> bool {
    edges
        .iter()
        .any(|e| e.record == record && e.fields.get(field).map(String::as_str) == Some(value))
}
