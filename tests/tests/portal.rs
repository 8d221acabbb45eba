//! The model Portal end to end (issue #6 item 5, issue #7's Portal test): all eight roles as
//! processes, the Discord emulator, and the OpenAI-compatible model emulator over TLS on an
//! admitted local road. A question is answered through the Privacy Cut, an EgressDecision
//! redeemed by egress-provider, one ServiceJobAttempt, the quarantine and adoption; a
//! hallucinated citation is quarantined and the asker gets the refusal text; an out-of-corpus
//! question is refused before any model call; a Sigil never reaches egress-provider.

use std::time::Duration;

use reach_digest::Sha256Digest;
use reach_discord_emulator::User;
use reach_model_emulator::{ModelEmulator, Script};
use reach_proto::egress::v1::CallRequest;
use reach_proto::egress::v1::provider_call_client::ProviderCallClient;
use reach_proto::ward::v1::ward_client::WardClient;
use reach_proto::ward::v1::{AdmitScopeRequest, IssueDecisionRequest};
use reach_tests::{TestBody, configure_portal, eventually, set_ward_budget, trail_until};

/// Model attempts per run (core's `pipeline::MAX_MODEL_ATTEMPTS`).
const MAX_MODEL_ATTEMPTS: u32 = 3;

const CHANNEL: u64 = 1_100_000_000_000_000_200;
/// A bound on waiting for an effect, so a failure is a clear message rather than a hang.
const WAIT: Duration = Duration::from_secs(30);

/// Whether `text` holds a ward Sigil id.
fn has_sigil(text: &str) -> bool {
    reach_portal::cut::contains_sigil(text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn questions_go_through_cut_decision_quarantine_and_adoption() {
    let model = ModelEmulator::start().await.expect("model emulator");
    let (body, em) = TestBody::start_with_emulator_configured(
        Default::default(),
        &[CHANNEL],
        |manifest, layout| configure_portal(manifest, layout, &model, true),
        "info",
    )
    .await;
    let mut operator = body.operator_after_genesis("portal deployment").await;
    let bot = em.config().bot_user_id;
    let asker = User::human(1_100_000_000_000_000_500, "asker");
    // Ward rate-limits each asker; the last questions come from another.
    let other = User::human(1_100_000_000_000_000_501, "other asker");
    let reply_to = |q: u64| {
        let em = &em;
        move || {
            em.bot_messages(CHANNEL)
                .into_iter()
                .find(|m| m.reply_to == Some(q))
        }
    };

    // A good answer: cut, decided, attempted, quarantined, adopted, delivered with citations.
    let q1 = em.post_user_message(
        CHANNEL,
        &asker,
        &format!("<@{bot}> How does a port authenticate a call?"),
    );
    let reply = eventually(WAIT, "the adopted answer", reply_to(q1)).await;
    assert!(
        reply.content.contains("never resent [1]")
            && reply.content.contains("[2] Identity and ports <https://"),
        "{}",
        reply.content
    );
    let trail = trail_until(&mut operator, &q1.to_string(), "KNOWN_SENT", WAIT).await;
    for want in [
        "ContextLineage+CutReceipt",
        "purpose=model-completion",
        "ServiceJobAttempt@1",
        "state=COMPLETED",
        "state=SUCCEEDED",
    ] {
        assert!(
            trail.contains(want),
            "{want} missing from the trail:\n{trail}"
        );
    }
    let seen = model.requests();
    assert_eq!(seen.len(), 1, "one physical attempt");
    assert!(seen[0].streaming());
    assert!(
        seen[0]
            .user_message()
            .contains("How does a port authenticate a call?")
    );

    // A hallucinated citation ([7] with the bundle's passages) is quarantined: the asker gets
    // the honest refusal, and the trail names the quarantine code.
    model.script(Script::Cites(7));
    let q2 = em.post_user_message(
        CHANNEL,
        &asker,
        &format!("<@{bot}> How do I rotate the trust root?"),
    );
    let reply = eventually(WAIT, "the refusal", reply_to(q2)).await;
    assert!(reply.content.contains("won't guess"), "{}", reply.content);
    let trail = trail_until(
        &mut operator,
        &q2.to_string(),
        "reason=quarantine/citation-out-of-bundle",
        WAIT,
    )
    .await;
    assert!(trail.contains("state=REFUSED"), "{trail}");
    assert_eq!(model.requests().len(), 2);

    // Out of corpus: refused before any model call.
    let q3 = em.post_user_message(
        CHANNEL,
        &asker,
        &format!("<@{bot}> What is the airspeed velocity of an unladen swallow?"),
    );
    let reply = eventually(WAIT, "the out-of-corpus refusal", reply_to(q3)).await;
    assert!(reply.content.contains("won't guess"), "{}", reply.content);
    trail_until(
        &mut operator,
        &q3.to_string(),
        // The relevance gate's figures, never the question.
        "reason=corpus/not-in-docs coverage=",
        WAIT,
    )
    .await;
    assert_eq!(
        model.requests().len(),
        2,
        "no model call for an out-of-corpus question"
    );

    // No Sigil ever reached egress-provider or the model, nor its log.
    for r in model.requests() {
        assert!(!has_sigil(&r.body));
        assert_eq!(r.authorization.as_deref(), Some("Bearer sk-emulator-key"));
    }
    assert!(!has_sigil(&body.log("egress-provider")));

    // Presented directly (as core, the only admitted caller): a payload carrying a Sigil, and a
    // Cut payload under a decision ward never issued. Both refused, nothing transmitted.
    let mut provider = ProviderCallClient::new(reach_port::connect_lazy(
        body.socket("egress-provider.call"),
        &body.material("core"),
        body.manifest.principal("egress-provider"),
    ));
    let cut = cut_for("How does a port authenticate a call?");
    // The Cut's JSON object with one more field: the task's Sigil.
    let mut with_sigil = cut.bytes.clone();
    assert_eq!(with_sigil.pop(), Some(b'}'));
    with_sigil
        .extend_from_slice(format!(",\"sigil_id\":\"sigil_{}\"}}", "0a".repeat(16)).as_bytes());
    let cases = [
        (with_sigil, "egress/sigil-presented"),
        (cut.bytes.clone(), "decision/unknown"),
    ];
    for (payload, want) in cases {
        let r = provider
            .call(CallRequest {
                decision_id: format!("dec_{}", "1".repeat(32)),
                attempt_id: "a-1".into(),
                payload,
                kind: "model-completion".into(),
            })
            .await
            .expect("the handler answers")
            .into_inner();
        assert_eq!(r.failure_code, want);
        assert!(!r.transmitted && r.body.is_empty());
    }
    assert_eq!(model.requests().len(), 2, "refused calls send nothing");

    // Kinds: an instance without an A2A adapter says so; an unknown kind is malformed.
    let r = provider
        .call(CallRequest {
            kind: "a2a-task".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (r.failure_code.as_str(), r.transmitted),
        ("egress/adapter-not-configured", false)
    );
    let status = provider
        .call(CallRequest {
            kind: "telepathy".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);

    // Decisions ward issued (as core would), presented to egress-provider: each refusal sends
    // nothing; the one matching call sends exactly once.
    direct_decisions(&body, &model, &mut provider, &cut).await;

    // A failure that may pass (503) is followed by a new attempt under a new decision: the
    // asker gets the answer, and the trail keeps both attempts, the first FAILED.
    let before = model.requests().len();
    model.script(Script::Status(503));
    let q4 = em.post_user_message(
        CHANNEL,
        &asker,
        &format!("<@{bot}> How does a port authenticate a call?"),
    );
    let reply = eventually(WAIT, "the answer after a retried 503", reply_to(q4)).await;
    assert!(
        reply.content.contains("never resent [1]"),
        "{}",
        reply.content
    );
    let trail = trail_until(&mut operator, &q4.to_string(), "KNOWN_SENT", WAIT).await;
    let attempts = attempt_lines(&trail);
    assert_eq!(attempts.len(), 2, "two attempts:\n{trail}");
    assert!(
        attempts[0].contains("state=FAILED") && attempts[0].contains("provider/http-503"),
        "{trail}"
    );
    assert!(attempts[1].contains("state=COMPLETED"), "{trail}");
    assert_ne!(
        field(attempts[0], "decision_id"),
        field(attempts[1], "decision_id"),
        "each attempt redeems its own decision"
    );
    assert_eq!(model.requests().len(), before + 2, "two physical attempts");

    // A failure that outlasts the attempts is a dependency failure: the asker is told, every
    // attempt is FAILED.
    let before = model.requests().len();
    for _ in 0..MAX_MODEL_ATTEMPTS {
        model.script(Script::Status(503));
    }
    // Asks as `other`; the asker is told to ask again later, and the trail names `reason`.
    let mut unavailable = async |reason: &str| {
        let q = em.post_user_message(
            CHANNEL,
            &other,
            &format!("<@{bot}> How does a port authenticate a call?"),
        );
        let reply = eventually(WAIT, "the unavailable reply", reply_to(q)).await;
        assert!(
            reply.content.contains("ask again later"),
            "{}",
            reply.content
        );
        trail_until(&mut operator, &q.to_string(), reason, WAIT).await
    };
    let trail = unavailable("reason=provider/http-503").await;
    assert!(trail.contains("state=DEPENDENCY_UNAVAILABLE"), "{trail}");
    let attempts = attempt_lines(&trail);
    assert_eq!(attempts.len(), MAX_MODEL_ATTEMPTS as usize, "{trail}");
    assert!(
        attempts.iter().all(|a| a.contains("state=FAILED")),
        "{trail}"
    );
    assert_eq!(model.requests().len(), before + MAX_MODEL_ATTEMPTS as usize);

    // A failure that would only repeat (400: the provider refused the request) is not tried
    // again.
    let before = model.requests().len();
    model.script(Script::Status(400));
    let trail = unavailable("reason=provider/http-400").await;
    assert_eq!(attempt_lines(&trail).len(), 1, "{trail}");
    assert_eq!(model.requests().len(), before + 1, "one physical attempt");

    // With ward down nothing can be redeemed, so nothing is sent: the gate says ward could not
    // be asked, and the provider sees no request.
    let mut body = body;
    let before = model.requests().len();
    let running = body.body.as_mut().expect("the body is running");
    running.kill_role("ward").await.expect("ward was running");
    let r = provider
        .call(CallRequest {
            decision_id: format!("dec_{}", "2".repeat(32)),
            attempt_id: "a-1".into(),
            payload: cut.bytes.clone(),
            kind: "model-completion".into(),
        })
        .await
        .expect("the handler answers")
        .into_inner();
    assert!(
        r.failure_code.starts_with("ward/unavailable: "),
        "{}",
        r.failure_code
    );
    assert!(!r.transmitted && r.body.is_empty());
    assert_eq!(model.requests().len(), before, "nothing sent without ward");
    body.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_ward_will_not_authorize_ends_on_the_failure_that_asked_for_it() {
    // Ward's budget admits one decision per run: the first model attempt's. Its 503 asks for
    // another attempt, which ward refuses: the turn ends DEPENDENCY_UNAVAILABLE on the
    // provider's failure, not REFUSED on ward's answer to the retry, after one request.
    let model = ModelEmulator::start().await.expect("model emulator");
    model.script(Script::Status(503));
    let (body, em) = TestBody::start_with_emulator_configured(
        Default::default(),
        &[CHANNEL],
        |manifest, layout| {
            configure_portal(manifest, layout, &model, true);
            set_ward_budget(manifest, "retries", 1);
        },
        "info",
    )
    .await;
    let mut operator = body.operator_after_genesis("portal retry budget").await;
    let asker = User::human(1_100_000_000_000_000_502, "asker");
    let bot = em.config().bot_user_id;
    let q = em.post_user_message(
        CHANNEL,
        &asker,
        &format!("<@{bot}> How does a port authenticate a call?"),
    );
    let trail = trail_until(
        &mut operator,
        &q.to_string(),
        "state=DEPENDENCY_UNAVAILABLE",
        WAIT,
    )
    .await;
    assert!(trail.contains("reason=provider/http-503"), "{trail}");
    assert_eq!(attempt_lines(&trail).len(), 1, "{trail}");
    assert_eq!(model.requests().len(), 1, "one physical attempt");
    body.stop().await;
}

async fn direct_decisions(
    body: &TestBody,
    model: &ModelEmulator,
    provider: &mut ProviderCallClient<tonic::transport::Channel>,
    cut: &reach_portal::PrivacyCut,
) {
    let mut ward = WardClient::new(reach_port::connect_lazy(
        body.socket("ward.authority"),
        &body.material("core"),
        body.manifest.principal("ward"),
    ));
    let sigil = ward
        .admit_scope(AdmitScopeRequest {
            platform: "discord".into(),
            application_id: "111".into(),
            guild_id: "222".into(),
            channel_id: "333".into(),
            subject_id: "444".into(),
            run_id: "run-direct".into(),
            expires_at_ms: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .sigil_id;
    let mut issue = async |attempt: &str, destination: &str, payload: &[u8]| {
        let r = ward
            .issue_decision(IssueDecisionRequest {
                sigil_id: sigil.clone(),
                run_id: "run-direct".into(),
                attempt_id: attempt.into(),
                destination: destination.into(),
                purpose: "model-completion".into(),
                payload_digest: Sha256Digest::of(payload).to_string(),
                labels: vec!["public".into()],
                cut_receipt_digest: cut.receipt.digest().to_string(),
                policy_revision: "reach.public-answer/1".into(),
                max_tokens: 256,
                max_spend_micros: 0,
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.refusal_code, "");
        r.decision_id
    };
    let endpoint = model.endpoint();
    let other = cut_for("Which roles hold no credential?");
    let d_attempt = issue("att-1", &endpoint, &cut.bytes).await;
    let d_elsewhere = issue(
        "att-2",
        "https://elsewhere.test/v1/chat/completions",
        &cut.bytes,
    )
    .await;
    let d_good = issue("att-3", &endpoint, &cut.bytes).await;
    let before = model.requests().len();
    let cases = [
        (&d_attempt, "att-9", &cut.bytes, "decision/attempt-mismatch"),
        (
            &d_elsewhere,
            "att-2",
            &cut.bytes,
            "decision/destination-mismatch",
        ),
        (&d_good, "att-3", &other.bytes, "decision/payload-mismatch"),
    ];
    for (decision, attempt, payload, want) in cases {
        let r = provider
            .call(CallRequest {
                decision_id: decision.clone(),
                attempt_id: attempt.into(),
                payload: payload.clone(),
                kind: "model-completion".into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!((r.failure_code.as_str(), r.transmitted), (want, false));
    }
    assert_eq!(
        model.requests().len(),
        before,
        "nothing sent on a refused decision"
    );
    let call = CallRequest {
        decision_id: d_good.clone(),
        attempt_id: "att-3".into(),
        payload: cut.bytes.clone(),
        kind: "model-completion".into(),
    };
    let r = provider.call(call.clone()).await.unwrap().into_inner();
    assert!(r.failure_code.is_empty() && r.transmitted && !r.body.is_empty());
    assert_eq!(model.requests().len(), before + 1);
    // Exactly one physical attempt per decision.
    let r = provider.call(call).await.unwrap().into_inner();
    assert_eq!(
        (r.failure_code.as_str(), r.transmitted),
        ("decision/already-redeemed", false)
    );
    assert_eq!(model.requests().len(), before + 1);
}

fn cut_for(question: &str) -> reach_portal::PrivacyCut {
    let text = "A port checks the peer.";
    reach_portal::cut(&reach_portal::CutInput {
        question: question.into(),
        bundle_digest: Sha256Digest::of(b"bundle"),
        revision: "r".into(),
        passages: vec![reach_portal::EvidenceIn {
            passage_id: "p-1".into(),
            digest: Sha256Digest::of(text.as_bytes()),
            section: "Ports".into(),
            url: "https://reach.invalid/p".into(),
            text: text.into(),
        }],
        withheld: vec![],
    })
    .unwrap()
}

/// The trail's attempt lines, in attempt order.
fn attempt_lines(trail: &str) -> Vec<&str> {
    trail
        .lines()
        .filter(|l| l.contains("ServiceJobAttempt@1"))
        .collect()
}

/// The value of `name=` on a trail line.
fn field<'a>(line: &'a str, name: &str) -> &'a str {
    let at = line
        .find(&format!("{name}="))
        .unwrap_or_else(|| panic!("no {name} on: {line}"));
    line[at + name.len() + 1..].split(' ').next().unwrap_or("")
}
