//! Intercom's egress side at the role boundary (issue #6 item 6): all roles as processes, the
//! A2A 1.0 test peer over TLS on an admitted local road. Decisions are issued at the real ward
//! as core would; egress-provider redeems each at ward for its own peer URL and the digest of
//! the bytes it received, then carries them once. A second use of a decision, a decision ward
//! never issued, and decisions bound to another attempt, payload or peer send nothing: the
//! peer's own record of requests is the witness.
//!
//! The whole body: the operator asks core (`Trail/SendA2aTask`) for one task; core commits it
//! in the Phylactery, issues a decision per attempt at ward and drives it over
//! `ProviderCall/Call`; egress-provider redeems and carries each.

use reach_a2a_peer::{A2aPeer, PEER_HOST, Script, state};
use reach_digest::Sha256Digest;
use reach_proto::egress::v1::provider_call_client::ProviderCallClient;
use reach_proto::egress::v1::{CallRequest, CallResponse};
use reach_proto::ward::v1::ward_client::WardClient;
use reach_proto::ward::v1::{AdmitScopeRequest, IssueDecisionRequest};
use reach_tests::{TestBody, set_ward_budget};
use serde_json::{Value, json};
use tonic::transport::Channel;

/// Also points core's Intercom at the same peer URL, polling every 50 ms.
fn configure_core_and_peer(
    manifest: &mut reach_manifest::Manifest,
    layout: &reach_manifest::plan::StateLayout,
    peer: &A2aPeer,
    max_polls: i64,
) {
    configure_peer(manifest, layout, peer);
    configure_core(manifest, &peer.url(), max_polls, 50);
}

/// Points core's Intercom at `url`, polling `max_polls` times per request every `interval_ms`.
fn configure_core(
    manifest: &mut reach_manifest::Manifest,
    url: &str,
    max_polls: i64,
    interval_ms: i64,
) {
    let core = manifest
        .roles
        .iter_mut()
        .find(|r| r.name.as_str() == "core")
        .expect("core role");
    let mut intercom = toml::Table::new();
    intercom.insert("peer".into(), url.into());
    intercom.insert("poll_interval_ms".into(), interval_ms.into());
    intercom.insert("max_polls".into(), max_polls.into());
    core.settings.insert("intercom".into(), intercom.into());
}

/// Points egress-provider's A2A adapter at `peer`: its URL, an exact local road to its
/// address, and its CA as the only trusted root.
fn configure_peer(
    manifest: &mut reach_manifest::Manifest,
    layout: &reach_manifest::plan::StateLayout,
    peer: &A2aPeer,
) {
    configure_road(manifest, layout, &peer.url(), peer.addr(), peer.ca_pem());
}

/// Points egress-provider's A2A adapter at the peer `url`: an exact local road from
/// [`PEER_HOST`] to `addr`, and `ca_pem` as the only trusted root.
fn configure_road(
    manifest: &mut reach_manifest::Manifest,
    layout: &reach_manifest::plan::StateLayout,
    url: &str,
    addr: std::net::SocketAddr,
    ca_pem: &str,
) {
    let ca = layout.root().join("a2a-peer-ca.pem");
    std::fs::write(&ca, ca_pem).unwrap();
    let role = manifest
        .roles
        .iter_mut()
        .find(|r| r.name.as_str() == "egress-provider")
        .expect("egress-provider role");
    let mut road = toml::Table::new();
    road.insert("host".into(), PEER_HOST.into());
    road.insert("addr".into(), addr.to_string().into());
    let mut roads = toml::Table::new();
    roads.insert("local_roads".into(), vec![toml::Value::from(road)].into());
    roads.insert("ca_file".into(), ca.display().to_string().into());
    let mut intercom = toml::Table::new();
    intercom.insert("peer".into(), url.into());
    intercom.insert("roads".into(), roads.into());
    role.settings.insert("intercom".into(), intercom.into());
}

/// The exact SendMessage body Intercom sends (returning immediately, no push config).
fn send_message(message_id: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "jsonrpc": "2.0", "id": "t-1/send", "method": "SendMessage",
        "params": {
            "message": {"messageId": message_id, "role": "ROLE_USER",
                "parts": [{"text": "What does the corpus say about leases?"}]},
            "configuration": {"returnImmediately": true}
        }
    }))
    .unwrap()
}

fn get_task(task_id: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "jsonrpc": "2.0", "id": "t-1/poll-1", "method": "GetTask", "params": {"id": task_id}
    }))
    .unwrap()
}

/// Ward as core uses it: one scope and Sigil for the run, then decisions for `a2a-task`.
struct CoreWard {
    ward: WardClient<Channel>,
    sigil: String,
    run: String,
}

impl CoreWard {
    /// A run of its own: ward's default budgets admit four live decisions per run.
    async fn new(body: &TestBody, run: &str) -> Self {
        let mut ward = WardClient::new(reach_port::connect_lazy(
            body.socket("ward.authority"),
            &body.material("core"),
            body.manifest.principal("ward"),
        ));
        let sigil = ward
            .admit_scope(AdmitScopeRequest {
                platform: "operator".into(),
                application_id: "reach".into(),
                guild_id: "-".into(),
                channel_id: "-".into(),
                subject_id: "operator".into(),
                run_id: run.into(),
                expires_at_ms: 0,
            })
            .await
            .unwrap()
            .into_inner()
            .sigil_id;
        CoreWard {
            ward,
            sigil,
            run: run.into(),
        }
    }

    async fn issue(&mut self, attempt: &str, destination: &str, payload: &[u8]) -> String {
        let r = self
            .ward
            .issue_decision(IssueDecisionRequest {
                sigil_id: self.sigil.clone(),
                run_id: self.run.clone(),
                attempt_id: attempt.into(),
                destination: destination.into(),
                purpose: "a2a-task".into(),
                payload_digest: Sha256Digest::of(payload).to_string(),
                labels: vec!["public".into()],
                cut_receipt_digest: Sha256Digest::of(b"operator task: nothing withheld")
                    .to_string(),
                policy_revision: "reach.a2a-task/1".into(),
                max_tokens: 0,
                max_spend_micros: 0,
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.refusal_code, "", "ward issues the decision");
        r.decision_id
    }
}

async fn call(
    provider: &mut ProviderCallClient<Channel>,
    decision: &str,
    attempt: &str,
    payload: &[u8],
) -> CallResponse {
    provider
        .call(CallRequest {
            decision_id: decision.into(),
            attempt_id: attempt.into(),
            payload: payload.to_vec(),
            kind: "a2a-task".into(),
        })
        .await
        .expect("the handler answers")
        .into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_a2a_attempt_is_carried_once_under_its_own_decision() {
    let peer = A2aPeer::start(Script::ending(state::COMPLETED, 0)).await;
    let body = TestBody::start_configured(|m, l| configure_peer(m, l, &peer)).await;
    let mut refused_run = CoreWard::new(&body, "run-a2a-refused").await;
    let mut provider = ProviderCallClient::new(reach_port::connect_lazy(
        body.socket("egress-provider.call"),
        &body.material("core"),
        body.manifest.principal("egress-provider"),
    ));
    let url = peer.url();
    let send = send_message("msg-1");

    // Refused before any byte: each says transmitted = false, and the peer saw nothing.
    let d_other_attempt = refused_run.issue("t-1/send", &url, &send).await;
    let d_other_peer = refused_run
        .issue("t-1/send", "https://elsewhere.test/a2a", &send)
        .await;
    let d_other_payload = refused_run
        .issue("t-1/send", &url, &send_message("msg-2"))
        .await;
    let push = serde_json::to_vec(&json!({
        "jsonrpc": "2.0", "id": "t-1/send", "method": "SendMessage",
        "params": {"message": {"messageId": "msg-1", "role": "ROLE_USER", "parts": []},
            "configuration": {"returnImmediately": true,
                "pushNotificationConfig": {"url": "https://callback.test/"}}}
    }))
    .unwrap();
    let forged = format!("dec_{}", "7".repeat(32));
    let cases: [(&str, &str, &[u8], &str); 5] = [
        (&forged, "t-1/send", &send, "decision/unknown"),
        (
            &d_other_attempt,
            "t-1/resend-1",
            &send,
            "decision/attempt-mismatch",
        ),
        (
            &d_other_peer,
            "t-1/send",
            &send,
            "decision/destination-mismatch",
        ),
        (
            &d_other_payload,
            "t-1/send",
            &send,
            "decision/payload-mismatch",
        ),
        (&forged, "t-1/send", &push, "egress/a2a-push-config"),
    ];
    for (decision, attempt, payload, want) in cases {
        let r = call(&mut provider, decision, attempt, payload).await;
        assert_eq!(
            (r.failure_code.as_str(), r.transmitted, r.http_status),
            (want, false, 0),
            "{attempt} under {decision}"
        );
        assert!(r.body.is_empty());
    }
    assert!(peer.requests().is_empty(), "refused calls send nothing");

    // The send, under its own decision: carried once, the peer's answer handed back whole.
    let mut ward = CoreWard::new(&body, "run-a2a-task").await;
    let d_send = ward.issue("t-1/send", &url, &send).await;
    let r = call(&mut provider, &d_send, "t-1/send", &send).await;
    assert_eq!(
        (r.failure_code.as_str(), r.transmitted, r.http_status),
        ("", true, 200)
    );
    let answer: Value = serde_json::from_slice(&r.body).unwrap();
    let task_id = answer["result"]["task"]["id"]
        .as_str()
        .expect("the peer's task id")
        .to_owned();
    assert_eq!(peer.count("SendMessage"), 1);
    let seen = &peer.requests()[0];
    assert_eq!(seen.body, send, "the exact bytes the decision bound");
    assert_eq!(seen.a2a_version.as_deref(), Some("1.0"));
    assert_eq!(seen.return_immediately, Some(true));
    assert!(!seen.push_config);

    // The same decision again: already redeemed, nothing sent.
    let r = call(&mut provider, &d_send, "t-1/send", &send).await;
    assert_eq!(
        (r.failure_code.as_str(), r.transmitted),
        ("decision/already-redeemed", false)
    );
    assert_eq!(peer.count("SendMessage"), 1, "one SendMessage at the peer");

    // A poll is its own attempt with its own decision.
    let poll = get_task(&task_id);
    let r = call(&mut provider, &d_send, "t-1/poll-1", &poll).await;
    assert_eq!(
        (r.failure_code.as_str(), r.transmitted),
        ("decision/already-redeemed", false),
        "the send's decision carries no poll"
    );
    let d_poll = ward.issue("t-1/poll-1", &url, &poll).await;
    let r = call(&mut provider, &d_poll, "t-1/poll-1", &poll).await;
    assert_eq!(
        (r.failure_code.as_str(), r.transmitted, r.http_status),
        ("", true, 200)
    );
    let answer: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(
        answer["result"]["status"]["state"].as_str(),
        Some(state::COMPLETED)
    );
    assert_eq!(peer.count("GetTask"), 1);
    assert_eq!(
        peer.requests().len(),
        2,
        "one send and one poll, nothing else"
    );

    // No Sigil reached egress-provider's log or the peer.
    assert!(!reach_portal::cut::contains_sigil(
        &body.log("egress-provider")
    ));
    for r in peer.requests() {
        assert!(!reach_portal::cut::contains_sigil(
            &String::from_utf8_lossy(&r.body)
        ));
    }

    // This core has no settings.intercom: the operator's task is refused, nothing sent.
    let status = body
        .operator_after_genesis("no intercom")
        .await
        .send_a2a_task(reach_proto::core::v1::SendA2aTaskRequest {
            task_id: "op-task-x".into(),
            text: "hello".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    assert!(status.message().starts_with("intercom/not-configured"));
    assert_eq!(peer.requests().len(), 2);
    body.stop().await;
}

/// Decision ids egress-provider logged for A2A calls it transmitted.
fn carried_decisions(log: &str) -> Vec<String> {
    carried(log, "decision")
}

/// The `field` of every A2A call egress-provider logged as transmitted.
fn carried(log: &str, field: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| {
            let f = &v["fields"];
            f["message"] == "provider call" && f["transmitted"] == true
        })
        .filter_map(|v| v["fields"][field].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_task_completes_with_one_send_and_a_decision_per_poll() {
    // WORKING at the first poll, COMPLETED at the second.
    let peer = A2aPeer::start(Script::ending(state::COMPLETED, 1)).await;
    let body = TestBody::start_configured(|m, l| configure_core_and_peer(m, l, &peer, 3)).await;
    let mut operator = body.operator_after_genesis("intercom deployment").await;
    let ask = reach_proto::core::v1::SendA2aTaskRequest {
        task_id: "op-task-1".into(),
        text: "Summarize the lease rules of the docs corpus.".into(),
        peer: reach_a2a_peer::PEER_HOST.into(),
    };
    let r = operator
        .send_a2a_task(ask.clone())
        .await
        .expect("the task runs")
        .into_inner();
    assert_eq!(
        (r.phase.as_str(), r.polls, r.turn_state.as_str()),
        ("SUCCEEDED", 2, "SUCCEEDED"),
        "{r:?}\n{}",
        body.log("core")
    );
    // The adopted answer (its quarantine passed), and the turn terminated with it.
    assert_eq!(r.answer, "answer to msg-op-task-1");
    assert_eq!(peer.count("SendMessage"), 1, "exactly one SendMessage");
    assert_eq!(peer.count("GetTask"), 2);
    let sent = &peer.requests()[0];
    assert_eq!(sent.message_id.as_deref(), Some("msg-op-task-1"));
    assert_eq!(sent.return_immediately, Some(true));
    assert!(!sent.push_config);

    // Each physical attempt was carried under its own decision, issued by ward for core.
    let decisions = carried_decisions(&body.log("egress-provider"));
    assert_eq!(decisions.len(), 3, "{}", body.log("egress-provider"));
    let mut distinct = decisions.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "one decision per attempt: {decisions:?}");

    // The task is on its turn's trail, committed in the Phylactery.
    let trail = reach_tests::trail_text(&mut operator, &r.turn_id).await;
    assert!(trail.contains("purpose=a2a-task"), "{trail}");
    let answer_digest = Sha256Digest::of(r.answer.as_bytes()).to_string();
    assert_eq!(
        turn_line(&trail),
        format!("answer_digest={answer_digest} reason=a2a/TASK_STATE_COMPLETED state=SUCCEEDED"),
        "{trail}"
    );

    // Asked again: a replay reports the settled task from the ledger and sends nothing.
    let again = operator.send_a2a_task(ask).await.unwrap().into_inner();
    assert_eq!(
        (again.phase.as_str(), again.turn_state.as_str()),
        ("SUCCEEDED", "SUCCEEDED")
    );
    assert_eq!(
        peer.requests().len(),
        3,
        "a settled task is never sent again"
    );

    // Refused before anything is written: an empty text, a Sigil in the text, a task id that
    // is not a printable ASCII id, a peer core does not enroll.
    let cases = [
        (
            "op-task-2",
            "  ".to_owned(),
            "",
            tonic::Code::InvalidArgument,
        ),
        (
            "op-task-2",
            format!("sigil_{}", "0a".repeat(16)),
            "",
            tonic::Code::InvalidArgument,
        ),
        (
            "op task",
            "hello".to_owned(),
            "",
            tonic::Code::FailedPrecondition,
        ),
        (
            "op-task-2",
            "hello".to_owned(),
            "other-peer.test",
            tonic::Code::InvalidArgument,
        ),
    ];
    for (task_id, text, peer, code) in cases {
        let status = operator
            .send_a2a_task(reach_proto::core::v1::SendA2aTaskRequest {
                task_id: task_id.into(),
                text,
                peer: peer.into(),
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), code, "{status:?}");
        if !peer.is_empty() {
            assert!(status.message().starts_with("intercom/unknown-peer"));
        }
    }
    assert_eq!(peer.requests().len(), 3);
    body.stop().await;
}

/// Generous ward budgets: the Stasis polls a held task every 50 ms, each poll under its own
/// decision, and ward's defaults (four live decisions, eight per run) would refuse most of
/// them (that refusal is ward's own tests' business; the Stasis only waits and asks again).
fn generous_ward(manifest: &mut reach_manifest::Manifest) {
    let ward = manifest
        .roles
        .iter_mut()
        .find(|r| r.name.as_str() == "ward")
        .expect("ward role");
    let mut budgets = toml::Table::new();
    budgets.insert("concurrency".into(), 1000.into());
    budgets.insert("retries".into(), 1000.into());
    ward.settings.insert("budgets".into(), budgets.into());
    // One operator asks for several tasks in a minute (ward's default: five per subject).
    let mut window = toml::Table::new();
    window.insert("limit".into(), 1000.into());
    window.insert("window_ms".into(), 60_000.into());
    window.insert("kind".into(), "sliding".into());
    let mut limits = toml::Table::new();
    limits.insert("subject".into(), window.clone().into());
    limits.insert("channel".into(), window.into());
    ward.settings.insert("rate_limits".into(), limits.into());
}

/// The `ReachTurn@1` line of a trail, without its turn id and times: `answer_digest=… reason=…
/// state=…` (the fields present).
fn turn_line(trail: &str) -> String {
    let line = trail
        .lines()
        .find(|l| l.starts_with("ReachTurn@1 "))
        .unwrap_or_default();
    line.split(' ')
        .skip(2)
        .filter(|f| !f.starts_with("opened_at=") && !f.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Reads the trail of `key` until its turn is no longer OPEN; panics after `wait`.
async fn settled_turn(
    body: &TestBody,
    operator: &mut reach_proto::core::v1::trail_client::TrailClient<Channel>,
    key: &str,
    wait: std::time::Duration,
) -> String {
    let deadline = std::time::Instant::now() + wait;
    loop {
        let trail = reach_tests::trail_text(operator, key).await;
        let turn = turn_line(&trail);
        if !turn.is_empty() && !turn.contains("state=OPEN") {
            return trail;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the turn of {key} never terminated:\n{trail}\n{}",
            body.log("core")
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// What [`park_a_task`] leaves: the peer, the body, the operator's trail port, the request (for
/// asking again) and core's response.
struct Parked {
    peer: A2aPeer,
    body: TestBody,
    operator: reach_proto::core::v1::trail_client::TrailClient<Channel>,
    ask: reach_proto::core::v1::SendA2aTaskRequest,
    response: reach_proto::core::v1::SendA2aTaskResponse,
}

/// A peer that holds every task WORKING until released, and a body whose core polls it twice
/// per request (50 ms apart) and whose ward is generous, then adjusted by `configure`.
async fn held_peer_and_body(
    configure: impl FnOnce(&mut reach_manifest::Manifest),
) -> (A2aPeer, TestBody) {
    let peer = A2aPeer::start(Script {
        held: true,
        ..Script::ending(state::COMPLETED, 0)
    })
    .await;
    let body = TestBody::start_configured(|m, l| {
        configure_core_and_peer(m, l, &peer, 2);
        generous_ward(m);
        configure(m);
    })
    .await;
    (peer, body)
}

/// A task sent by an operator and parked at [`held_peer_and_body`]'s peer.
async fn park_a_task(
    task_id: &str,
    session: &str,
    configure: impl FnOnce(&mut reach_manifest::Manifest),
) -> Parked {
    let (peer, body) = held_peer_and_body(configure).await;
    let mut operator = body.operator_after_genesis(session).await;
    let ask = reach_proto::core::v1::SendA2aTaskRequest {
        task_id: task_id.into(),
        text: "Which roles hold no credential?".into(),
        ..Default::default()
    };
    let r = operator
        .send_a2a_task(ask.clone())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (r.phase.as_str(), r.polls, r.turn_state.as_str()),
        ("POLLING", 2, "OPEN"),
        "{r:?}"
    );
    Parked {
        peer,
        body,
        operator,
        ask,
        response: r,
    }
}

/// Waits up to `wait_secs` for the turn of `task_id` to settle, asserts that it SUCCEEDED with
/// the peer's answer (`answer to msg-<task id>`) adopted, and returns the trail.
async fn adopted(
    body: &TestBody,
    operator: &mut reach_proto::core::v1::trail_client::TrailClient<Channel>,
    task_id: &str,
    wait_secs: u64,
) -> String {
    let trail = settled_turn(
        body,
        operator,
        task_id,
        std::time::Duration::from_secs(wait_secs),
    )
    .await;
    let answer = Sha256Digest::of(format!("answer to msg-{task_id}").as_bytes()).to_string();
    assert_eq!(
        turn_line(&trail),
        format!("answer_digest={answer} reason=a2a/TASK_STATE_COMPLETED state=SUCCEEDED"),
        "{trail}\n{}",
        body.log("core")
    );
    trail
}

/// The operator's trail port of a core started again.
fn operator_of(body: &TestBody) -> reach_proto::core::v1::trail_client::TrailClient<Channel> {
    reach_proto::core::v1::trail_client::TrailClient::new(reach_port::connect_lazy(
        body.socket("core.trail"),
        &body.material("operator"),
        body.manifest.principal("core"),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_task_resumes_by_itself_after_core_is_killed_without_a_second_send() {
    // The peer keeps the task WORKING until released; core's request polls twice.
    let Parked {
        peer,
        mut body,
        ask,
        response: r,
        ..
    } = park_a_task("op-task-parked", "intercom restart", |_| {}).await;
    assert!(r.code.contains("intercom/poll-budget-exhausted"), "{r:?}");
    // The Stasis polls on after the request returned.
    let before = peer.count("GetTask");
    tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while peer.count("GetTask") <= before {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the Stasis keeps polling");

    // SIGKILL while the task is parked: the ledger holds it (PARKED, the peer's task id).
    let running = body.body.as_mut().expect("running");
    running.kill_role("core").await;
    let polls_at_kill = peer.count("GetTask");
    peer.release();
    running.start_role("core").await.expect("core restarts");

    // No operator call: the resumer finds the task, polls it to COMPLETED and terminates the
    // turn with the adopted answer.
    let mut operator = operator_of(&body);
    let trail = adopted(&body, &mut operator, "op-task-parked", 60).await;
    assert!(
        trail
            .lines()
            .any(|l| l.starts_with("IntercomTask op-task-parked") && l.contains("state=SUCCEEDED")),
        "{trail}"
    );
    assert_eq!(
        peer.count("SendMessage"),
        1,
        "the resumed task polls; it is never sent again"
    );
    assert_eq!(peer.tasks().len(), 1);
    assert!(peer.count("GetTask") > polls_at_kill);
    // Every carried attempt had its own decision and its own attempt id, across the restart
    // too (the resumed polls continue the numbering).
    for field in ["decision", "attempt"] {
        let carried = carried(&body.log("egress-provider"), field);
        let mut distinct = carried.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(carried.len(), distinct.len(), "{field}: {carried:?}");
        assert_eq!(carried.len(), peer.requests().len(), "{field}: {carried:?}");
    }

    // Asked again: the settled turn is reported, with the answer the Stasis adopted while no
    // operator waited (held in core's memory; the ledger keeps its digest), and nothing is sent.
    let r = operator.send_a2a_task(ask).await.unwrap().into_inner();
    assert_eq!(
        (r.phase.as_str(), r.turn_state.as_str()),
        ("SUCCEEDED", "SUCCEEDED"),
        "{r:?}"
    );
    assert_eq!(r.answer, "answer to msg-op-task-parked", "{r:?}");
    assert_eq!(peer.count("SendMessage"), 1);
    // The answer is never written to a log.
    for role in ["core", "egress-provider"] {
        assert!(
            !body.log(role).contains("answer to msg-op"),
            "{role} logged the answer"
        );
    }
    body.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_settled_just_before_core_died_has_its_answer_read_again() {
    // Core commits a task's SUCCEEDED, then the turn's terminal: it dies between the two. The
    // answer was in its memory only. Emulated exactly: the task is parked, core is killed, and
    // the SUCCEEDED commit is written into its vault as its journal writes it.
    let Parked {
        peer,
        mut body,
        ask,
        ..
    } = park_a_task("op-task-settled", "intercom settled restart", |_| {}).await;
    let running = body.body.as_mut().expect("running");
    running.kill_role("core").await;
    peer.release();
    let vault_file = body.layout.data_dir("core").join("phylactery.sqlite");
    let vault = reach_phylactery::Phylactery::open(
        reach_phylactery::VaultConfig::sqlite(&vault_file),
        std::sync::Arc::new(reach_phylactery::SystemClock),
    )
    .await
    .expect("core's vault");
    vault
        .advance_intercom_task(
            "op-task-settled",
            &reach_phylactery::IntercomUpdate {
                to: reach_phylactery::IntercomTaskState::Succeeded,
                remote_task_id: None,
                evidence: Some("a2a/TASK_STATE_COMPLETED".into()),
            },
        )
        .await
        .expect("the task's SUCCEEDED commit");
    vault.close().await;
    let polls_at_restart = peer.count("GetTask");
    let running = body.body.as_mut().expect("running");
    running.start_role("core").await.expect("core restarts");

    // The resumer reads the answer again with one GetTask and adopts it: SUCCEEDED, not
    // FAILED for an answer it no longer held.
    let mut operator = operator_of(&body);
    adopted(&body, &mut operator, "op-task-settled", 30).await;
    assert_eq!(peer.count("GetTask"), polls_at_restart + 1, "one read");
    assert_eq!(peer.count("SendMessage"), 1, "never sent again");
    let r = operator.send_a2a_task(ask).await.unwrap().into_inner();
    assert_eq!(r.answer, "answer to msg-op-task-settled", "{r:?}");
    body.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ambiguous_send_stays_uncertain_and_is_never_resent_without_a_receipt() {
    // The peer commits the task, then drops the connection without answering.
    let peer = A2aPeer::start(Script {
        drop_after_commit: 1,
        ..Script::default()
    })
    .await;
    // A short local deadline, so the Stasis settles the uncertain task within the test.
    let body = TestBody::start_configured(|m, l| {
        configure_core_and_peer(m, l, &peer, 3);
        set_core_intercom(m, "deadline_secs", 4);
    })
    .await;
    let mut operator = body.operator_after_genesis("intercom uncertain").await;
    let ask = reach_proto::core::v1::SendA2aTaskRequest {
        task_id: "op-task-dropped".into(),
        text: "Which roles hold no credential?".into(),
        ..Default::default()
    };
    let r = operator
        .send_a2a_task(ask.clone())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.phase, "UNCERTAIN", "{r:?}");
    assert_eq!(peer.count("SendMessage"), 1);
    // egress-provider said the bytes may have left: transmitted, with the bound's code.
    let log = body.log("egress-provider");
    assert!(
        log.lines().any(|l| l.contains("provider call")
            && l.contains("\"transmitted\":true")
            && !l.contains("\"code\":\"\"")),
        "{log}"
    );
    // Asked again: no receipt admits a resend, so it stays UNCERTAIN and nothing is sent.
    let r = operator.send_a2a_task(ask).await.unwrap().into_inner();
    assert_eq!(
        (r.phase.as_str(), r.turn_state.as_str()),
        ("UNCERTAIN", "OPEN"),
        "{r:?}"
    );
    assert!(r.code.contains("intercom/resend-not-admitted"), "{r:?}");
    assert_eq!(peer.count("SendMessage"), 1, "never resent blindly");
    assert_eq!(peer.tasks().len(), 1);
    // The Stasis never resends it either: at the local deadline it settles EXPIRED, and the
    // turn with it.
    let trail = settled_turn(
        &body,
        &mut operator,
        "op-task-dropped",
        std::time::Duration::from_secs(30),
    )
    .await;
    assert_eq!(
        turn_line(&trail),
        "reason=intercom/deadline state=EXPIRED",
        "{trail}"
    );
    assert!(
        trail
            .lines()
            .any(|l| l.starts_with("IntercomTask op-task-dropped") && l.contains("state=EXPIRED")),
        "{trail}"
    );
    assert_eq!(peer.requests().len(), 1, "one SendMessage, nothing else");
    body.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_task_whose_run_budget_is_spent_expires_at_its_deadline_without_more_polls() {
    // The peer keeps the task WORKING; ward allows three decisions for the run (the send and
    // the request's two polls), so the Stasis can authorize no further poll.
    let Parked {
        peer,
        body,
        mut operator,
        ..
    } = park_a_task("op-task-budget", "intercom budget", |m| {
        set_core_intercom(m, "deadline_secs", 4);
        set_ward_budget(m, "retries", 3);
    })
    .await;
    let trail = settled_turn(
        &body,
        &mut operator,
        "op-task-budget",
        std::time::Duration::from_secs(30),
    )
    .await;
    assert_eq!(
        turn_line(&trail),
        "reason=intercom/deadline state=EXPIRED",
        "{trail}"
    );
    assert_eq!(
        (peer.count("SendMessage"), peer.count("GetTask")),
        (1, 2),
        "no request beyond ward's budget"
    );
    // Ward refused for good once; the Stasis then waited for the deadline instead of asking
    // again every second.
    let core = body.log("core");
    assert_eq!(
        core.matches("stasis: ward refused a poll").count(),
        1,
        "{core}"
    );
    body.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_peers_answer_is_adopted_within_one_poll_interval_on_the_runs_eight_decisions() {
    // Issue #33 item 5, scaled down: a 1 s interval and a 5 s deadline (the default's ratio,
    // 26 s and 120 s, less one poll), ward's default eight decisions per run (decisions live
    // 30 s whatever the scale, so concurrency stays generous here; `budget.rs` in
    // reach-intercom checks the unscaled default against ward's own defaults). The request
    // polls at 0.25 s and 0.75 s and hands the task to the Stasis, which polls on at the
    // driver's pace (1.75 s, 2.75 s, …), never doubling: the peer finishes after the fourth
    // poll and its answer is read by the next, within one interval.
    let interval = std::time::Duration::from_secs(1);
    let Parked {
        peer,
        body,
        mut operator,
        ..
    } = park_a_task("op-task-slow", "intercom pacing", |m| {
        set_core_intercom(m, "poll_interval_ms", 1_000);
        set_core_intercom(m, "deadline_secs", 5);
        set_ward_budget(m, "retries", 8);
    })
    .await;
    while peer.count("GetTask") < 4 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    peer.release();
    let finished = std::time::Instant::now();
    let trail = settled_turn(
        &body,
        &mut operator,
        "op-task-slow",
        std::time::Duration::from_secs(30),
    )
    .await;
    let adopted_after = finished.elapsed();
    assert!(
        turn_line(&trail).ends_with("reason=a2a/TASK_STATE_COMPLETED state=SUCCEEDED"),
        "{trail}\n{}",
        body.log("core")
    );
    // One interval, plus the 100 ms between this test's reads of the trail.
    assert!(
        adopted_after <= interval + std::time::Duration::from_millis(300),
        "adopted {adopted_after:?} after the peer finished"
    );
    assert_eq!((peer.count("SendMessage"), peer.count("GetTask")), (1, 5));
    let core = body.log("core");
    assert!(!core.contains("ward refused a poll"), "{core}");
    body.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_left_waiting_for_input_is_cancelled_and_only_the_operator_sees_why() {
    // Issue #33 items 6 and 7 at the role boundary: the peer asks for input; core sends one
    // CancelTask under its own decision (egress-provider carries it like any attempt), records
    // the peer's answer, and keeps the peer's status message quarantined for `reach a2a
    // status`. It reaches no log and no delivery.
    const WHY: &str = "Which of the two corpora do you mean?";
    let peer = A2aPeer::start(Script {
        status_message: Some(json!([{ "text": WHY }])),
        ..Script::ending(state::INPUT_REQUIRED, 1)
    })
    .await;
    let body = TestBody::start_configured(|m, l| {
        configure_core_and_peer(m, l, &peer, 3);
        generous_ward(m);
    })
    .await;
    body.operator_after_genesis("intercom input required").await;
    let (ok, out, err) = reach_a2a_send(&body, "cli-input", &[]).await;
    assert!(!ok, "one-shot work refused: {out}\n{err}");
    for line in [
        "phase REFUSED",
        "turn REFUSED",
        "code a2a/TASK_STATE_INPUT_REQUIRED",
    ] {
        assert!(out.lines().any(|l| l == line), "{line} in {out}");
    }
    assert!(!out.contains(WHY), "send prints no peer text: {out}");
    let methods: Vec<String> = peer
        .requests()
        .iter()
        .filter_map(|r| r.rpc_method.clone())
        .collect();
    assert_eq!(methods, ["SendMessage", "GetTask", "GetTask", "CancelTask"]);
    assert!(peer.tasks()[0].cancelled);
    // Its own decision, carried once by egress-provider for the cancel's attempt id.
    let attempts = carried(&body.log("egress-provider"), "attempt");
    assert_eq!(
        attempts,
        [
            "cli-input/send",
            "cli-input/poll-1",
            "cli-input/poll-2",
            "cli-input/cancel"
        ]
    );
    let decisions = carried_decisions(&body.log("egress-provider"));
    let mut distinct = decisions.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "{decisions:?}");

    let (ok, out, _) = reach_cli(&body, &["a2a", "status", "cli-input"]).await;
    assert!(ok, "{out}");
    assert_eq!(
        out,
        format!(
            "task cli-input\nphase REFUSED\nturn REFUSED\ncode a2a/TASK_STATE_INPUT_REQUIRED\n\
             cancel a2a/cancel/TASK_STATE_CANCELED\npeer message:\n{WHY}\n"
        )
    );
    for role in ["core", "egress-provider", "egress-discord", "ward"] {
        assert!(
            !body.log(role).contains(WHY),
            "the peer's text in {role}'s log"
        );
    }
    body.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_ward_will_never_authorize_refuses_its_turn_and_sends_nothing() {
    // Ward's policy refuses the `public` label every operator task carries: decision refused
    // for good (`decision/label-refused`).
    let peer = A2aPeer::start(Script::ending(state::COMPLETED, 0)).await;
    let body = TestBody::start_configured(|m, l| {
        configure_core_and_peer(m, l, &peer, 2);
        let ward = m
            .roles
            .iter_mut()
            .find(|r| r.name.as_str() == "ward")
            .expect("ward role");
        ward.settings.insert(
            "refused_labels".into(),
            vec![toml::Value::from("public")].into(),
        );
    })
    .await;
    let mut operator = body.operator_after_genesis("intercom refused").await;
    let r = operator
        .send_a2a_task(reach_proto::core::v1::SendA2aTaskRequest {
            task_id: "op-task-refused".into(),
            text: "Which roles hold no credential?".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (
            r.phase.as_str(),
            r.code.as_str(),
            r.turn_state.as_str(),
            r.polls
        ),
        ("COMMITTED", "decision/label-refused", "REFUSED", 0),
        "{r:?}"
    );
    let trail = reach_tests::trail_text(&mut operator, "op-task-refused").await;
    assert_eq!(
        turn_line(&trail),
        "reason=decision/label-refused state=REFUSED",
        "{trail}"
    );
    assert!(
        !trail.contains("IntercomTask"),
        "nothing committed: {trail}"
    );
    assert!(peer.requests().is_empty(), "nothing sent");
    body.stop().await;
}

/// Sets `settings.intercom.<key>` of core.
fn set_core_intercom(manifest: &mut reach_manifest::Manifest, key: &str, value: i64) {
    let core = manifest
        .roles
        .iter_mut()
        .find(|r| r.name.as_str() == "core")
        .expect("core role");
    core.settings
        .get_mut("intercom")
        .and_then(|v| v.as_table_mut())
        .expect("settings.intercom")
        .insert(key.into(), value.into());
}

/// Runs the real `reach` binary against the body.
async fn reach_cli(body: &TestBody, args: &[&str]) -> (bool, String, String) {
    let out = tokio::process::Command::new(reach_launcher::default_bin_dir().join("reach"))
        .args(args)
        .arg("--state")
        .arg(body.layout.root())
        .output()
        .await
        .expect("reach runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `reach a2a send` of "What are the lease rules?" to the peer as `task_id`, with `more`.
async fn reach_a2a_send(body: &TestBody, task_id: &str, more: &[&str]) -> (bool, String, String) {
    let mut args = vec![
        "a2a",
        "send",
        "--peer",
        reach_a2a_peer::PEER_HOST,
        "--text",
        "What are the lease rules?",
        "--task-id",
        task_id,
    ];
    args.extend_from_slice(more);
    reach_cli(body, &args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reach_a2a_send_prints_an_answer_the_stasis_adopted_while_it_waited() {
    // The peer works until released: core's request returns the task parked, the CLI waits on
    // the trail, the Stasis adopts the answer, and the CLI prints it (asking core again, a
    // replay that sends nothing).
    let (peer, body) = held_peer_and_body(|_| {}).await;
    body.operator_after_genesis("reach a2a send waits").await;
    let cli = reach_a2a_send(&body, "cli-slow", &["--wait-secs", "30"]);
    let release = async {
        while peer.count("GetTask") < 3 {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        peer.release();
    };
    let ((ok, out, err), ()) = tokio::join!(cli, release);
    assert!(ok, "{out}\n{err}");
    for line in [
        "phase SUCCEEDED",
        "turn SUCCEEDED",
        "answer:\nanswer to msg-cli-slow",
    ] {
        assert!(out.contains(line), "{line:?} missing:\n{out}");
    }
    assert_eq!(peer.count("SendMessage"), 1, "the replay sent nothing");
    body.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_answers_are_quarantined_before_adoption_and_reach_a2a_reports_them() {
    // Answers by message id: too long, not text, and carrying an e-mail address or a key.
    let answers = vec![
        (
            "msg-q-oversized".to_owned(),
            // Five parts of 2 KiB: each within egress-provider's bound on one JSON token, together
            // over the 8 KiB an answer may hold.
            json!(vec![json!({"text": "a".repeat(2048)}); 5]),
        ),
        (
            "msg-q-data".to_owned(),
            json!([{"data": {"rows": [1, 2]}, "mediaType": "application/json"}]),
        ),
        (
            "msg-q-email".to_owned(),
            json!([{"text": "Ask jane.doe@example.org for the lease rules."}]),
        ),
        (
            "msg-q-key".to_owned(),
            json!([{"text": "Use sk-live0123456789abcdefghijkl to call it."}]),
        ),
    ];
    let peer = A2aPeer::start(Script {
        answers,
        ..Script::ending(state::COMPLETED, 0)
    })
    .await;
    let body = TestBody::start_configured(|m, l| {
        configure_core_and_peer(m, l, &peer, 3);
        generous_ward(m);
    })
    .await;
    let mut operator = body.operator_after_genesis("intercom quarantine").await;
    for (task_id, want) in [
        ("q-oversized", "quarantine/over-long"),
        ("q-data", "quarantine/schema"),
        ("q-email", "quarantine/privacy"),
    ] {
        let r = operator
            .send_a2a_task(reach_proto::core::v1::SendA2aTaskRequest {
                task_id: task_id.into(),
                text: "What are the lease rules?".into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        // The peer completed the task; Reach refused its answer and adopted nothing.
        assert_eq!(
            (
                r.phase.as_str(),
                r.turn_state.as_str(),
                r.code.as_str(),
                r.answer.as_str()
            ),
            ("SUCCEEDED", "REFUSED", want, ""),
            "{task_id}: {r:?}"
        );
        let trail = reach_tests::trail_text(&mut operator, task_id).await;
        assert_eq!(
            turn_line(&trail),
            format!("reason={want} state=REFUSED"),
            "no answer digest is kept: {trail}"
        );
    }

    // The operator's verb: a good answer is adopted and printed, with the task id and state.
    let (ok, out, err) = reach_a2a_send(&body, "cli-good", &[]).await;
    assert!(ok, "{out}\n{err}");
    assert!(out.starts_with("task cli-good (turn "), "{out}");
    for line in [
        "phase SUCCEEDED",
        "turn SUCCEEDED",
        "code a2a/TASK_STATE_COMPLETED",
        "answer to msg-cli-good",
    ] {
        assert!(out.lines().any(|l| l == line), "{line} in {out}");
    }
    // A key-shaped token in the answer: quarantined, the turn REFUSED, the exit status fails.
    let (ok, out, err) = reach_cli(
        &body,
        &[
            "a2a",
            "send",
            "--peer",
            reach_a2a_peer::PEER_HOST,
            "--text",
            "Which key?",
            "--task-id",
            "q-key",
        ],
    )
    .await;
    assert!(!ok, "{out}\n{err}");
    assert!(out.lines().any(|l| l == "turn REFUSED"), "{out}");
    assert!(out.lines().any(|l| l == "code quarantine/privacy"), "{out}");
    assert!(
        !out.contains("sk-live"),
        "a quarantined answer is never shown: {out}"
    );
    // Status reads the ledger.
    let (ok, out, _) = reach_cli(&body, &["a2a", "status", "cli-good"]).await;
    assert!(ok, "{out}");
    assert_eq!(
        out,
        "task cli-good\nphase SUCCEEDED\nturn SUCCEEDED\ncode a2a/TASK_STATE_COMPLETED\n"
    );
    let (ok, out, _) = reach_cli(&body, &["a2a", "status", "never-sent"]).await;
    assert!(!ok);
    assert_eq!(out, "no A2A task never-sent\n");
    // A peer core does not enroll: refused, nothing sent.
    let sent = peer.requests().len();
    let (ok, _, err) = reach_cli(
        &body,
        &["a2a", "send", "--peer", "other.test", "--text", "hello"],
    )
    .await;
    assert!(!ok);
    assert!(err.contains("intercom/unknown-peer"), "{err}");
    assert_eq!(peer.requests().len(), sent);
    body.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_the_runs_sigil_settles_a_parked_task_revoked_and_sends_nothing_more() {
    // Core's reading of ward's refusal at the owning boundary: `sigil/revoked` ends the task
    // REVOKED (its turn REFUSED), where any other refusal would fail only that attempt.
    let Parked {
        peer,
        body,
        mut operator,
        ask,
        response: r,
    } = park_a_task("op-task-revoked", "intercom revoke", |_| {}).await;
    // The run's Sigil, as ward hands it to core again for the same run (the test holds every
    // principal's material; core's scope for operator tasks is fixed).
    let sigil = WardClient::new(reach_port::connect_lazy(
        body.socket("ward.authority"),
        &body.material("core"),
        body.manifest.principal("ward"),
    ))
    .admit_scope(AdmitScopeRequest {
        platform: "operator".into(),
        application_id: "reach".into(),
        guild_id: "intercom".into(),
        channel_id: "intercom".into(),
        subject_id: "operator".into(),
        run_id: r.turn_id.clone(),
        expires_at_ms: 0,
    })
    .await
    .unwrap()
    .into_inner();
    assert_eq!(sigil.refusal_code, "", "{sigil:?}");
    let revoked = WardClient::new(reach_port::connect_lazy(
        body.socket("ward.authority"),
        &body.material("operator"),
        body.manifest.principal("ward"),
    ))
    .revoke(reach_proto::ward::v1::RevokeRequest {
        sigil_id: sigil.sigil_id,
        reason: "operator test".into(),
    })
    .await
    .unwrap()
    .into_inner();
    assert_eq!(revoked.refusal_code, "", "{revoked:?}");
    let sent = peer.requests().len();

    // The Stasis polls the parked task on by itself; its next decision is refused as revoked.
    let trail = settled_turn(
        &body,
        &mut operator,
        "op-task-revoked",
        std::time::Duration::from_secs(30),
    )
    .await;
    assert_eq!(
        turn_line(&trail),
        "reason=sigil/revoked state=REFUSED",
        "{trail}\n{}",
        body.log("core")
    );
    // At most the one poll whose decision was redeemed before the revocation landed went out.
    let settled = peer.requests().len();
    assert!(settled <= sent + 1, "{sent} then {settled} requests");
    // Asked again, the task answers REVOKED, and nothing more is sent.
    let again = operator.send_a2a_task(ask).await.unwrap().into_inner();
    assert_eq!(
        (
            again.phase.as_str(),
            again.code.as_str(),
            again.turn_state.as_str()
        ),
        ("REVOKED", "sigil/revoked", "REFUSED"),
        "{again:?}"
    );
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert_eq!(peer.requests().len(), settled, "nothing sent once revoked");
    body.stop().await;
}

// The official SDK as the peer (issue #33 item 9).

/// The venv `scripts/setup-test-host.sh` installs the official `a2a-sdk` in.
const A2A_SDK_VENV: &str = "/var/tmp/reach-venvs/a2a";

/// A peer built only from the official A2A SDK (`tests/a2a-sdk-peer/peer.py`: the SDK's own
/// request handler, task store and JSON-RPC routes), serving HTTPS under a leaf for
/// [`PEER_HOST`] from a CA minted here. Stops with the test (its process is killed on drop).
struct SdkPeer {
    addr: std::net::SocketAddr,
    ca_pem: String,
    /// `request {json}` lines the peer printed, one per request it received.
    seen: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
    _child: tokio::process::Child,
    _dir: tempfile::TempDir,
}

impl SdkPeer {
    async fn start(working_secs: f64) -> SdkPeer {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
        use tokio::io::AsyncBufReadExt;

        let python = std::path::Path::new(A2A_SDK_VENV).join("bin/python");
        assert!(
            python.exists(),
            "the official A2A SDK venv is missing at {A2A_SDK_VENV}: run scripts/setup-test-host.sh \
             (scripts/test.sh runs it first); this interop test does not skip"
        );
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_key = KeyPair::generate().unwrap();
        let ca_pem = params.self_signed(&ca_key).unwrap().pem();
        let issuer = Issuer::new(params, ca_key);
        let leaf_key = KeyPair::generate().unwrap();
        let leaf = CertificateParams::new(vec![PEER_HOST.to_string()])
            .unwrap()
            .signed_by(&leaf_key, &issuer)
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("leaf.pem"), dir.path().join("leaf.key"));
        std::fs::write(&cert, leaf.pem()).unwrap();
        std::fs::write(&key, leaf_key.serialize_pem()).unwrap();
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("a2a-sdk-peer/peer.py");
        let mut child = tokio::process::Command::new(python)
            .arg(script)
            .arg("--cert")
            .arg(&cert)
            .arg("--key")
            .arg(&key)
            .args(["--host-name", PEER_HOST])
            .args(["--working-secs", &working_secs.to_string()])
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the SDK peer starts");
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
            .await
            .expect("the SDK peer prints its port within 30 s")
            .unwrap()
            .expect("the SDK peer exited before printing its port");
        let port: u16 = first
            .strip_prefix("port ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line from the SDK peer: {first}"));
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = std::sync::Arc::clone(&seen);
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(json) = line.strip_prefix("request ") {
                    sink.lock()
                        .unwrap()
                        .push(serde_json::from_str(json).unwrap());
                }
            }
        });
        SdkPeer {
            addr: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            ca_pem,
            seen,
            _child: child,
            _dir: dir,
        }
    }

    fn url(&self) -> String {
        format!("https://{PEER_HOST}:{}/a2a", self.addr.port())
    }

    /// The JSON-RPC methods the peer received, in order.
    fn methods(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|v| v["method"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    fn count(&self, method: &str) -> usize {
        self.methods().iter().filter(|m| *m == method).count()
    }
}

/// `reach a2a send` of `text` as `task_id` to the SDK peer, then `reach a2a status`: both
/// outputs.
async fn send_and_status(body: &TestBody, task_id: &str, text: &str) -> (bool, String, String) {
    let (ok, out, err) = reach_cli(
        body,
        &[
            "a2a",
            "send",
            "--peer",
            PEER_HOST,
            "--text",
            text,
            "--task-id",
            task_id,
            "--wait-secs",
            "60",
        ],
    )
    .await;
    let out = format!("{out}{err}");
    let (status_ok, status, _) = reach_cli(body, &["a2a", "status", task_id]).await;
    assert!(status_ok, "{status}");
    (ok, out, status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_body_interoperates_with_a_peer_built_from_the_official_a2a_sdk() {
    // Over TLS on an exact local road, through `reach a2a send`: completed, working then
    // completed, failed, input required (cancelled), rejected. Core polls every 400 ms.
    let peer = SdkPeer::start(2.0).await;
    let body = TestBody::start_configured(|m, l| {
        configure_road(m, l, &peer.url(), peer.addr, &peer.ca_pem);
        configure_core(m, &peer.url(), 2, 400);
        set_core_intercom(m, "deadline_secs", 30);
        generous_ward(m);
    })
    .await;
    body.operator_after_genesis("a2a-sdk interop").await;

    // Completed: the SDK's artifact is the adopted answer.
    let (ok, out, status) = send_and_status(
        &body,
        "sdk-completed",
        "completed: what are the lease rules?",
    )
    .await;
    assert!(ok, "{out}\n{}", body.log("core"));
    for line in [
        "phase SUCCEEDED",
        "turn SUCCEEDED",
        "code a2a/TASK_STATE_COMPLETED",
        "sdk answer to: completed: what are the lease rules?",
    ] {
        assert!(out.lines().any(|l| l == line), "{line} in {out}");
    }
    assert_eq!(
        status,
        "task sdk-completed\nphase SUCCEEDED\nturn SUCCEEDED\ncode a2a/TASK_STATE_COMPLETED\n"
    );

    // Working for 2 s, then completed: polled WORKING first, adopted after.
    let polls_before = peer.count("GetTask");
    let (ok, out, _) = send_and_status(&body, "sdk-working", "working: and the fences?").await;
    assert!(ok, "{out}");
    assert!(
        out.lines()
            .any(|l| l == "sdk answer to: working: and the fences?"),
        "{out}"
    );
    assert!(
        peer.count("GetTask") - polls_before >= 3,
        "WORKING polls before the answer: {:?}",
        peer.methods()
    );

    // Failed, rejected, input required: each refused or failed, the SDK's status message
    // quarantined and shown by status only; the input-required task cancelled at the peer.
    let cases = [
        (
            "sdk-failed",
            "failed: index it",
            "FAILED",
            "FAILED",
            "a2a/TASK_STATE_FAILED",
            None,
            "The SDK peer failed on purpose: no index.",
        ),
        (
            "sdk-rejected",
            "rejected: not for you",
            "REFUSED",
            "REFUSED",
            "a2a/TASK_STATE_REJECTED",
            None,
            "The SDK peer rejects this request.",
        ),
        (
            "sdk-input",
            "input: which one?",
            "REFUSED",
            "REFUSED",
            "a2a/TASK_STATE_INPUT_REQUIRED",
            Some("a2a/cancel/TASK_STATE_CANCELED"),
            "Which corpus do you mean?",
        ),
    ];
    for (task_id, text, phase, turn, code, cancel, why) in cases {
        let (ok, out, status) = send_and_status(&body, task_id, text).await;
        assert!(!ok, "{task_id}: {out}");
        for line in [
            format!("phase {phase}"),
            format!("turn {turn}"),
            format!("code {code}"),
        ] {
            assert!(out.lines().any(|l| l == line), "{task_id}: {line} in {out}");
        }
        assert!(!out.contains(why), "send shows no peer text: {out}");
        let cancel_line = cancel.map(|c| format!("cancel {c}\n")).unwrap_or_default();
        assert_eq!(
            status,
            format!(
                "task {task_id}\nphase {phase}\nturn {turn}\ncode {code}\n{cancel_line}\
                 peer message:\n{why}\n"
            ),
            "{task_id}"
        );
    }

    // What the SDK peer received: five SendMessage (never one twice), polls, and one
    // CancelTask, every request speaking A2A 1.0 to the endpoint.
    assert_eq!(peer.count("SendMessage"), 5, "{:?}", peer.methods());
    assert_eq!(peer.count("CancelTask"), 1, "{:?}", peer.methods());
    for r in peer.seen.lock().unwrap().iter() {
        assert_eq!(r["path"], "/a2a", "{r}");
        assert_eq!(r["a2a_version"], "1.0", "{r}");
        assert!(
            ["SendMessage", "GetTask", "CancelTask"].contains(&r["method"].as_str().unwrap()),
            "{r}"
        );
    }
    body.stop().await;
}
