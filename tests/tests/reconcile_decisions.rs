//! Reconciliation reads are bytes to Discord too (issue #6): every channel read egress-discord
//! makes to reconcile an UNKNOWN delivery is preceded by its own `discord-reconcile-read`
//! EgressDecision, issued by ward on the intent's duty Sigil at core's request and redeemed at
//! ward for exactly that GET. A read whose decision is refused is not made: the emulator sees no
//! GET and the intent stays UNKNOWN. A duty Sigil authorizes nothing but its duty.

use std::time::{Duration, Instant};

use reach_discord_emulator::{EmulatorConfig, Fault, User};
use reach_manifest::Manifest;
use reach_proto::core::v1::DecideReconcileReadRequest;
use reach_proto::core::v1::delivery_client::DeliveryClient;
use reach_proto::ward::v1::ward_client::WardClient;
use reach_proto::ward::v1::{IssueDecisionRequest, MintDutySigilRequest, RedeemDecisionRequest};
use reach_tests::{TestBody, trail_text, trail_until};
use tonic::Code;
use tonic::transport::Channel;

const CHANNEL: u64 = 1_100_000_000_000_000_700;
const WAIT: Duration = Duration::from_secs(30);
const READ: &str = "discord-reconcile-read";

fn ward(body: &TestBody, caller: &str) -> WardClient<Channel> {
    WardClient::new(reach_port::connect_lazy(
        body.socket("ward.authority"),
        &body.material(caller),
        body.manifest.principal("ward"),
    ))
}

fn delivery(body: &TestBody, caller: &str) -> DeliveryClient<Channel> {
    DeliveryClient::new(reach_port::connect_lazy(
        body.socket("core.delivery"),
        &body.material(caller),
        body.manifest.principal("core"),
    ))
}

/// Sets ward's duty budgets (`settings.duty`).
fn duty_budgets(reads: i64, time_ms: i64) -> impl FnOnce(&mut Manifest) {
    move |m| {
        let ward = m
            .roles
            .iter_mut()
            .find(|r| r.name.as_str() == "ward")
            .expect("ward");
        let mut duty = toml::Table::new();
        duty.insert("reads".into(), reads.into());
        duty.insert("time_ms".into(), time_ms.into());
        ward.settings.insert("duty".into(), duty.into());
    }
}

/// One recorded decision on the trail: (id, field=value pairs).
fn decisions(trail: &str, purpose: &str) -> Vec<(String, Vec<(String, String)>)> {
    trail
        .lines()
        .filter(|l| l.starts_with("EgressDecision "))
        .map(|l| {
            let mut words = l.split(' ');
            words.next();
            let id = words.next().unwrap_or_default().to_owned();
            let fields = words
                .filter_map(|w| w.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            (id, fields)
        })
        .filter(|(_, f): &(String, Vec<(String, String)>)| {
            f.iter().any(|(k, v)| k == "purpose" && v == purpose)
        })
        .collect()
}

fn field<'a>(fields: &'a [(String, String)], key: &str) -> &'a str {
    fields
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no {key} in {fields:?}"))
}

/// The id of the (first) delivery intent on the trail.
fn intent_id(trail: &str) -> String {
    trail
        .lines()
        .find(|l| l.starts_with("DiscordDeliveryIntent@1 "))
        .and_then(|l| l.split(' ').nth(1))
        .unwrap_or_else(|| panic!("no intent on the trail:\n{trail}"))
        .to_owned()
}

/// Waits until `role`'s log names `code` at least `times` times (the gate kept trying).
async fn log_names(body: &TestBody, role: &str, code: &str, times: usize) {
    let deadline = Instant::now() + WAIT;
    while body.log(role).matches(code).count() < times {
        assert!(
            Instant::now() < deadline,
            "{role} never logged {code} {times} times:\n{}",
            body.log(role)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn reads_of(em: &reach_discord_emulator::Emulator) -> Vec<String> {
    em.read_requests()
        .into_iter()
        .filter(|r| r.channel_id == CHANNEL)
        .map(|r| r.query)
        .collect()
}

/// Posts a question whose reply Discord commits while the answer is lost: UNKNOWN.
async fn unknown_delivery(
    em: &reach_discord_emulator::Emulator,
    operator: &mut reach_proto::core::v1::trail_client::TrailClient<Channel>,
) -> (u64, String) {
    let bot = em.config().bot_user_id;
    em.script_next_create(Fault::CommitThenDrop);
    let q = em.post_user_message(
        CHANNEL,
        &User::human(1_100_000_000_000_000_800, "asker"),
        &format!("<@{bot}> How does a port authenticate a call?"),
    );
    let trail = trail_until(operator, &q.to_string(), "outcome=UNKNOWN", WAIT).await;
    (q, intent_id(&trail))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_reconciliation_read_redeems_its_own_decision() {
    let (mut body, em) = TestBody::start_with_discord(CHANNEL).await;
    let mut operator = body.operator_after_genesis("reconcile reads").await;
    // 250 messages land between the question and the reply (the gate is down meanwhile), so
    // the reconciliation walks three pages to find it.
    let running = body.body.as_mut().unwrap();
    running
        .kill_role("egress-discord")
        .await
        .expect("egress-discord was running");
    let bot = em.config().bot_user_id;
    let q = em.post_user_message(
        CHANNEL,
        &User::human(1_100_000_000_000_000_800, "asker"),
        &format!("<@{bot}> How does a port authenticate a call?"),
    );
    trail_until(
        &mut operator,
        &q.to_string(),
        "DiscordDeliveryIntent@1",
        WAIT,
    )
    .await;
    let bob = User::human(1_100_000_000_000_000_900, "bob");
    for i in 0..250 {
        em.post_user_message(CHANNEL, &bob, &format!("chatter {i}"));
    }
    em.script_next_create(Fault::CommitThenDrop);
    let running = body.body.as_mut().unwrap();
    running
        .start_role("egress-discord")
        .await
        .expect("egress-discord restarts");
    let trail = trail_until(&mut operator, &q.to_string(), "KNOWN_SENT", WAIT).await;
    let intent = intent_id(&trail);
    println!("{trail}");

    // One decision per GET, each bound to the exact URL the emulator then received.
    let reads = reads_of(&em);
    let recorded = decisions(&trail, READ);
    assert_eq!(reads.len(), 3, "three pages were read: {reads:?}");
    assert_eq!(
        recorded.len(),
        reads.len(),
        "one decision per read:\n{trail}"
    );
    assert!(reads[0].starts_with(&format!("after={q}&")), "{reads:?}");
    let base = em.rest_base_url();
    let mut discord = ward(&body, "egress-discord");
    for ((id, fields), query) in recorded.iter().zip(&reads) {
        let url = format!("{base}/channels/{CHANNEL}/messages?{query}");
        assert_eq!(field(fields, "destination"), url);
        // Ward holds it as redeemed: it admits no second attempt.
        let again = discord
            .redeem_decision(RedeemDecisionRequest {
                decision_id: id.clone(),
                destination: url.clone(),
                payload_digest: field(fields, "payload_digest").to_owned(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            (again.admitted, again.refusal_code.as_str()),
            (false, "decision/already-redeemed")
        );
    }
    // No read decision for any purpose but reads, and still exactly one Create Message.
    assert_eq!(em.create_requests().len(), 1);
    assert_eq!(em.bot_messages(CHANNEL).len(), 1);

    // A settled delivery is not read again, and core refuses to decide reads for it.
    let mut gate = delivery(&body, "egress-discord");
    let base = base.clone();
    let r = gate
        .decide_reconcile_read(DecideReconcileReadRequest {
            intent_id: intent.clone(),
            destination_base: base.clone(),
            after: q,
        })
        .await
        .unwrap_err();
    assert_eq!(r.code(), Code::FailedPrecondition);
    assert!(r.message().starts_with("delivery/not-unknown"), "{r:?}");
    let r = gate
        .decide_reconcile_read(DecideReconcileReadRequest {
            intent_id: "int_nosuchintent".into(),
            destination_base: base.clone(),
            after: q,
        })
        .await
        .unwrap_err();
    assert_eq!(r.code(), Code::NotFound, "{r:?}");
    let r = gate
        .decide_reconcile_read(DecideReconcileReadRequest {
            intent_id: intent.clone(),
            destination_base: "http://discord.com/api/v10".into(),
            after: q,
        })
        .await
        .unwrap_err();
    assert_eq!(r.code(), Code::InvalidArgument, "{r:?}");
    // Only the gate asks core for read decisions, and only core asks ward for duty Sigils.
    let mut edge = ward(&body, "egress-discord");
    let r = edge
        .mint_duty_sigil(MintDutySigilRequest {
            subject_id: intent.clone(),
            purpose: READ.into(),
        })
        .await
        .unwrap_err();
    assert_eq!(r.code(), Code::PermissionDenied);
    body.stop().await;
}

/// Also lets the operator call `Delivery/DecideReconcileRead` (the checked-in port table grants
/// it to egress-discord alone), to reach core's owner check with a caller that is not the gate.
fn with_operator_read_grant(m: &mut Manifest) {
    let port = m
        .ports
        .iter_mut()
        .find(|p| p.name == "core.delivery")
        .expect("core.delivery");
    let mut grant = port
        .grants
        .iter()
        .find(|g| g.method == "DecideReconcileRead")
        .expect("the gate's grant")
        .clone();
    grant.caller = "operator".into();
    port.grants.push(grant);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_read_budget_sends_no_get_and_the_duty_sigil_authorizes_no_create_message() {
    let (body, em) = TestBody::start_with_emulator(
        EmulatorConfig::default(),
        &[CHANNEL],
        |m| {
            duty_budgets(0, 600_000)(m);
            with_operator_read_grant(m);
        },
        "info",
    )
    .await;
    let mut operator = body.operator_after_genesis("spent read budget").await;
    let (q, intent) = unknown_delivery(&em, &mut operator).await;

    // The gate keeps asking; ward refuses every read; nothing reaches Discord.
    log_names(&body, "egress-discord", "decision/over-budget reads", 2).await;
    assert_eq!(
        reads_of(&em),
        Vec::<String>::new(),
        "no GET without a decision"
    );
    let mut gate = delivery(&body, "egress-discord");
    let r = gate
        .decide_reconcile_read(DecideReconcileReadRequest {
            intent_id: intent.clone(),
            destination_base: em.rest_base_url(),
            after: q,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (
            r.refusal_code.as_str(),
            r.refusal_detail.as_str(),
            r.egress_decision_id.as_str()
        ),
        ("decision/over-budget", "reads", "")
    );
    // Only the gate that settled the delivery UNKNOWN may have it read.
    let r = delivery(&body, "operator")
        .decide_reconcile_read(DecideReconcileReadRequest {
            intent_id: intent.clone(),
            destination_base: em.rest_base_url(),
            after: q,
        })
        .await
        .unwrap_err();
    assert_eq!(r.code(), Code::PermissionDenied);
    assert!(r.message().starts_with("delivery/not-owner"), "{r:?}");
    let trail = trail_text(&mut operator, &q.to_string()).await;
    assert!(trail.contains("outcome=UNKNOWN"), "{trail}");
    assert!(!trail.contains("KNOWN_SENT"), "{trail}");
    assert!(decisions(&trail, READ).is_empty(), "{trail}");

    // Ward hands core the same live duty Sigil (nothing refilled), and it cannot authorize a
    // Create Message.
    let mut core = ward(&body, "core");
    let duty = core
        .mint_duty_sigil(MintDutySigilRequest {
            subject_id: intent.clone(),
            purpose: READ.into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(duty.refusal_code, "");
    assert!(duty.reused && duty.reads_left == 0, "{duty:?}");
    let create = core
        .issue_decision(IssueDecisionRequest {
            sigil_id: duty.sigil_id.clone(),
            run_id: intent.clone(),
            attempt_id: format!("{intent}#g9"),
            destination: format!("{}/channels/{CHANNEL}/messages", em.rest_base_url()),
            purpose: "discord-delivery".into(),
            payload_digest: format!("sha256:{}", "ab".repeat(32)),
            labels: vec!["public".into()],
            cut_receipt_digest: String::new(),
            policy_revision: "reach.public-answer/1".into(),
            max_tokens: 0,
            max_spend_micros: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (create.refusal_code.as_str(), create.refusal_final),
        ("sigil/purpose-mismatch", true)
    );
    // A task purpose mints no duty Sigil either.
    let r = core
        .mint_duty_sigil(MintDutySigilRequest {
            subject_id: intent.clone(),
            purpose: "discord-delivery".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.refusal_code, "sigil/purpose-mismatch");
    assert_eq!(em.create_requests().len(), 1, "nothing was ever resent");
    assert_eq!(reads_of(&em), Vec::<String>::new());
    body.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_duty_sigil_sends_no_get() {
    // A duty Sigil that expires the moment it is minted: every read's decision is refused.
    let (body, em) = TestBody::start_with_emulator(
        EmulatorConfig::default(),
        &[CHANNEL],
        duty_budgets(40, 0),
        "info",
    )
    .await;
    let mut operator = body.operator_after_genesis("expired duty").await;
    let (q, intent) = unknown_delivery(&em, &mut operator).await;
    log_names(&body, "egress-discord", "sigil/expired", 2).await;
    assert_eq!(
        reads_of(&em),
        Vec::<String>::new(),
        "no GET without a decision"
    );
    let r = delivery(&body, "egress-discord")
        .decide_reconcile_read(DecideReconcileReadRequest {
            intent_id: intent,
            destination_base: em.rest_base_url(),
            after: q,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.refusal_code, "sigil/expired");
    let trail = trail_text(&mut operator, &q.to_string()).await;
    assert!(!trail.contains("KNOWN_SENT"), "{trail}");
    body.stop().await;
}
