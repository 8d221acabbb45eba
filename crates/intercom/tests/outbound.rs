//! Intercom against a real A2A 1.0 peer on loopback TLS, with decisions from the real ward
//! desk: every task-state mapping, the no-blind-resend rule, the receipt-admitted resend,
//! polling under budget, deadline, revocation, loss, one decision per physical attempt, and
//! the typed refusals.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::*;
use reach_a2a_peer::{Script, state};
use reach_digest::Sha256Digest;
use reach_intercom::{
    Answer, EnrollmentReceipt, IntercomRefusal, OutboundTask, Part, Phase, PollBudget, TaskSpec,
    answer_text,
};
use reach_ward_desk::{DeskError, Refusal};

/// Every request the peer saw spoke A2A 1.0 to the admitted authority and path.
fn assert_conforming(f: &Fixture) {
    for r in f.peer.requests() {
        assert_eq!(r.method, "POST");
        assert_eq!(r.path, "/a2a");
        assert_eq!(r.a2a_version.as_deref(), Some("1.0"));
        assert_eq!(r.content_type.as_deref(), Some("application/json"));
        assert_eq!(
            r.host.as_deref(),
            Some(format!("a2a-peer.test:{}", f.peer.addr().port()).as_str())
        );
        assert!(!r.push_config, "no push notification config is ever sent");
        if r.rpc_method.as_deref() == Some("SendMessage") {
            assert_eq!(r.return_immediately, Some(true));
        }
    }
}

#[tokio::test]
async fn every_task_state_maps_to_its_outcome() {
    let cases = [
        (state::COMPLETED, Phase::Succeeded),
        (state::REJECTED, Phase::Refused),
        (state::FAILED, Phase::Failed),
        (state::CANCELED, Phase::Cancelled),
        (state::INPUT_REQUIRED, Phase::Refused),
        (state::AUTH_REQUIRED, Phase::Refused),
    ];
    for (terminal, expected) in cases {
        let f = Fixture::new(Script::ending(terminal, 2)).await;
        let mut task = f.task("t-map", 10);
        let phase = f.intercom().run(&mut task).await.unwrap();
        assert_eq!(phase, expected, "{terminal}");
        // Two WORKING polls, then the terminal: three GetTask, one SendMessage.
        assert_eq!(f.peer.count("SendMessage"), 1, "{terminal}");
        assert_eq!(f.peer.count("GetTask"), 3, "{terminal}");
        assert_eq!(task.remote_task_id(), Some("peer-task-1"));
        let last = task.trail().last().unwrap();
        assert_eq!(last.code, format!("a2a/{terminal}"));
        assert!(
            last.response_digest.is_some(),
            "a terminal rests on a response digest"
        );
        assert_conforming(&f);
        let Some(Answer::Task(t)) = task.answer() else {
            panic!("the terminal task is kept (quarantined)");
        };
        assert_eq!(t.status.state.as_str(), terminal);
        if expected == Phase::Succeeded {
            assert_eq!(answer_text(task.answer().unwrap()), "answer to msg-t-map");
        }
    }
}

#[tokio::test]
async fn a_task_rejected_at_creation_settles_without_polling() {
    let f = Fixture::new(Script {
        initial: state::REJECTED,
        ..Script::default()
    })
    .await;
    let mut task = f.task("t-rej", 10);
    assert_eq!(f.intercom().run(&mut task).await.unwrap(), Phase::Refused);
    assert_eq!(f.peer.count("GetTask"), 0);
    assert_eq!(f.peer.count("SendMessage"), 1);
}

#[tokio::test]
async fn a_dropped_response_leaves_the_task_uncertain_and_it_is_never_resent() {
    let f = Fixture::new(Script {
        drop_after_commit: 1,
        ..Script::default()
    })
    .await;
    let mut task = f.task("t-drop", 10);
    assert_eq!(f.intercom().run(&mut task).await.unwrap(), Phase::Uncertain);
    assert_eq!(f.peer.count("SendMessage"), 1);
    assert_eq!(f.peer.tasks().len(), 1, "the peer did commit the task");
    assert_eq!(task.remote_task_id(), None);
    assert_eq!(task.trail().last().unwrap().code, "bounded/protocol");

    // Reconciliation without a receipt that admits it: typed refusal, nothing sent.
    let e = f.intercom().reconcile(&mut task).await.unwrap_err();
    assert_eq!(e, IntercomRefusal::ResendNotAdmitted);
    assert_eq!(e.code(), "intercom/resend-not-admitted");
    // A receipt for another peer admits nothing here either.
    let other = EnrollmentReceipt::with_resend("https://other-peer.test/a2a", 3);
    let ic = reach_intercom::Intercom {
        receipt: &other,
        ..f.intercom()
    };
    assert_eq!(
        ic.reconcile(&mut task).await.unwrap_err(),
        IntercomRefusal::ResendNotAdmitted
    );
    // Nor does sending again: the task is past Committed.
    assert_eq!(
        f.intercom().send(&mut task).await.unwrap_err(),
        IntercomRefusal::WrongPhase {
            phase: Phase::Uncertain
        }
    );
    // Polling needs a peer task id it never got.
    assert!(matches!(
        f.intercom().poll(&mut task).await,
        Err(IntercomRefusal::WrongPhase { .. })
    ));
    assert_eq!(f.peer.count("SendMessage"), 1, "no blind resend");
    assert_eq!(f.peer.requests().len(), 1);
    assert_eq!(task.phase(), Phase::Uncertain);

    // Reconciled only with evidence.
    assert_eq!(
        f.intercom()
            .settle_lost(&mut task, "")
            .await
            .unwrap_err()
            .code(),
        "intercom/invalid-spec"
    );
    assert_eq!(
        f.intercom()
            .settle_lost(
                &mut task,
                "operator: peer ListTasks shows no task for msg-t-drop"
            )
            .await
            .unwrap(),
        Phase::Lost
    );
}

#[tokio::test]
async fn the_receipt_admits_one_resend_that_resolves_to_the_original_task() {
    let mut f = Fixture::new(Script {
        drop_after_commit: 1,
        message_id_guarantee: true,
        working_polls: 1,
        ..Script::default()
    })
    .await;
    f.receipt = EnrollmentReceipt::with_resend(f.peer.url(), 1);
    let mut task = f.task("t-receipt", 10);
    assert_eq!(
        f.intercom().send(&mut task).await.unwrap(),
        Phase::Uncertain
    );
    assert_eq!(
        f.intercom().reconcile(&mut task).await.unwrap(),
        Phase::Submitted
    );
    let original = f.peer.tasks();
    assert_eq!(original.len(), 1, "the resend created no second task");
    assert_eq!(task.remote_task_id(), Some(original[0].id.as_str()));
    assert_eq!(
        f.intercom().poll(&mut task).await.unwrap(),
        Phase::Succeeded
    );

    // The resend preserved the exact envelope.
    let sends: Vec<_> = f
        .peer
        .requests()
        .into_iter()
        .filter(|r| r.rpc_method.as_deref() == Some("SendMessage"))
        .collect();
    assert_eq!(sends.len(), 2);
    assert_eq!(sends[0].body, sends[1].body);
    assert_eq!(sends[0].body, task.envelope());
    assert_eq!(task.resends(), 1);
    assert_conforming(&f);
}

#[tokio::test]
async fn an_admitted_resend_that_cannot_connect_sends_nothing_and_stays_uncertain() {
    let mut f = Fixture::new(Script {
        drop_after_commit: 1,
        message_id_guarantee: true,
        ..Script::default()
    })
    .await;
    let mut task = f.task("t-resend-unadmitted", 10);
    assert_eq!(
        f.intercom().send(&mut task).await.unwrap(),
        Phase::Uncertain
    );
    // The receipt covers an endpoint no road admits.
    let url = format!("https://a2a-peer.test:{}/a2a", f.peer.addr().port() + 1);
    f.receipt = EnrollmentReceipt::with_resend(url.clone(), 1);
    let client = client_for(&f.peer, &url);
    let ic = reach_intercom::Intercom {
        client: &client,
        ..f.intercom()
    };
    let e = ic.reconcile(&mut task).await.unwrap_err();
    assert_eq!(
        e,
        IntercomRefusal::NotSent {
            code: "destination/port-not-admitted".into()
        }
    );
    assert_eq!(e.code(), "intercom/not-sent");
    assert_eq!(task.phase(), Phase::Uncertain);
    assert_eq!(client.connector().dialer().dials().len(), 0);
    assert_eq!(f.peer.count("SendMessage"), 1);
}

#[tokio::test]
async fn admitted_resends_are_bounded_by_the_receipt() {
    let mut f = Fixture::new(Script {
        drop_after_commit: 2,
        message_id_guarantee: true,
        ..Script::default()
    })
    .await;
    f.receipt = EnrollmentReceipt::with_resend(f.peer.url(), 1);
    let mut task = f.task("t-resends", 10);
    f.intercom().send(&mut task).await.unwrap();
    assert_eq!(
        f.intercom().reconcile(&mut task).await.unwrap(),
        Phase::Uncertain
    );
    let e = f.intercom().reconcile(&mut task).await.unwrap_err();
    assert_eq!(e, IntercomRefusal::ResendsExhausted { resends: 1 });
    assert_eq!(e.code(), "intercom/resends-exhausted");
    assert_eq!(f.peer.count("SendMessage"), 2);
}

#[tokio::test]
async fn polling_stops_at_the_budget_with_a_typed_refusal() {
    let f = Fixture::new(Script::ending(state::COMPLETED, u32::MAX)).await;
    let mut task = f.task("t-budget", 3);
    let e = f.intercom().run(&mut task).await.unwrap_err();
    assert_eq!(e, IntercomRefusal::PollBudgetExhausted { polls: 3 });
    assert_eq!(e.code(), "intercom/poll-budget-exhausted");
    assert_eq!(task.phase(), Phase::Polling, "the task stays parked");
    assert_eq!(f.peer.count("GetTask"), 3);
    // Asking again sends nothing more.
    assert_eq!(
        f.intercom().poll(&mut task).await.unwrap_err(),
        IntercomRefusal::PollBudgetExhausted { polls: 3 }
    );
    assert_eq!(f.peer.count("GetTask"), 3);
    assert_eq!(f.authority.granted().len(), 4, "send + three polls");
}

#[tokio::test]
async fn the_local_deadline_expires_a_slow_task() {
    let mut f = Fixture::new(Script::ending(state::COMPLETED, u32::MAX)).await;
    // One second passes before each attempt's decision; the deadline is 2.5 s after the start.
    f.authority.advance = Some((f.clock.clone(), Duration::from_secs(1)));
    let mut task = OutboundTask::new(TaskSpec {
        deadline: START.plus(Duration::from_millis(2_500)),
        ..f.task("t-deadline", 100).spec().clone()
    })
    .unwrap();
    assert_eq!(f.intercom().run(&mut task).await.unwrap(), Phase::Expired);
    // The send goes at 1 s and the polls at 2 s and 3 s (each checked the deadline first, at
    // 0 s, 1 s and 2 s); the next check sees 3 s: expired, no fourth request.
    assert_eq!(f.peer.count("GetTask"), 2);
    assert_eq!(task.trail().last().unwrap().code, "intercom/deadline");
    assert_eq!(f.peer.requests().len(), 3);
}

#[tokio::test]
async fn a_deadline_passed_before_sending_abandons_the_task_unsent() {
    let f = Fixture::new(Script::default()).await;
    let mut task = OutboundTask::new(TaskSpec {
        deadline: START,
        ..f.task("t-late", 3).spec().clone()
    })
    .unwrap();
    assert_eq!(
        f.intercom().run(&mut task).await.unwrap(),
        Phase::AbandonedBeforeSubmit
    );
    assert!(f.peer.requests().is_empty());
    assert_eq!(f.dials(), 0);
    assert!(f.authority.granted().is_empty());
}

#[tokio::test]
async fn revocation_mid_task_settles_revoked_and_sends_nothing_more() {
    let mut f = Fixture::new(Script::ending(state::COMPLETED, u32::MAX)).await;
    // Decisions 1 (send), 2 and 3 (polls) are issued; the Sigil is revoked before the 4th.
    f.authority.revoke_before = Some(4);
    let mut task = f.task("t-revoke", 100);
    assert_eq!(f.intercom().run(&mut task).await.unwrap(), Phase::Revoked);
    assert_eq!(f.peer.count("GetTask"), 2);
    assert_eq!(task.trail().last().unwrap().code, "sigil/revoked");
}

#[tokio::test]
async fn revocation_before_the_send_abandons_the_task_unsent() {
    let mut f = Fixture::new(Script::default()).await;
    f.authority.revoke_before = Some(1);
    let mut task = f.task("t-revoked-early", 3);
    assert_eq!(
        f.intercom().run(&mut task).await.unwrap(),
        Phase::AbandonedBeforeSubmit
    );
    assert!(f.peer.requests().is_empty());
    assert_eq!(f.dials(), 0);
}

#[tokio::test]
async fn a_peer_that_forgot_the_task_settles_it_lost_with_evidence() {
    let f = Fixture::new(Script {
        forget_tasks: true,
        ..Script::default()
    })
    .await;
    let mut task = f.task("t-lost", 5);
    assert_eq!(f.intercom().run(&mut task).await.unwrap(), Phase::Lost);
    let last = task.trail().last().unwrap();
    assert_eq!(last.code, "a2a/task-not-found");
    assert!(last.response_digest.is_some());
    assert_eq!(f.peer.count("GetTask"), 1);
}

#[tokio::test]
async fn every_physical_attempt_carries_its_own_redeemed_decision() {
    let f = Fixture::new(Script::ending(state::COMPLETED, 3)).await;
    let mut task = f.task("t-decisions", 10);
    assert_eq!(f.intercom().run(&mut task).await.unwrap(), Phase::Succeeded);
    let granted = f.authority.granted();
    let requests = f.peer.requests();
    // One decision per request the peer received, and per connection opened.
    assert_eq!(granted.len(), requests.len());
    assert_eq!(granted.len(), f.dials());
    assert!(granted.iter().all(|g| g.redeemed));
    let ids: HashSet<_> = granted.iter().map(|g| g.decision.clone()).collect();
    assert_eq!(ids.len(), granted.len(), "decision ids are distinct");
    let attempts: Vec<_> = granted.iter().map(|g| g.attempt_id.as_str()).collect();
    assert_eq!(
        attempts,
        [
            "t-decisions/send",
            "t-decisions/poll-1",
            "t-decisions/poll-2",
            "t-decisions/poll-3",
            "t-decisions/poll-4"
        ]
    );
    // Each decision bound the digest of exactly the bytes the peer received.
    for (g, r) in granted.iter().zip(&requests) {
        assert_eq!(g.payload_digest, Sha256Digest::of(&r.body));
    }
    // The trail names each attempt's decision.
    let on_trail: HashSet<_> = task
        .trail()
        .iter()
        .filter_map(|e| e.decision.clone())
        .collect();
    assert_eq!(on_trail, ids);
    // Ward refuses every one of them a second time.
    for g in &granted {
        let again = f
            .authority
            .desk
            .redeem(PROVIDER, &g.decision.0, &f.client.url(), &g.payload_digest)
            .await;
        assert!(matches!(
            again,
            Err(DeskError::Refused(Refusal::AlreadyRedeemed))
        ));
    }
}

#[tokio::test]
async fn only_a_settled_task_without_its_answer_is_read_again() {
    // Parked (the peer never ends it): not settled, so there is nothing to read again.
    let f = Fixture::new(Script::ending(state::COMPLETED, u32::MAX)).await;
    let mut task = f.task("t-refetch-live", 1);
    f.intercom().run(&mut task).await.unwrap_err();
    assert_eq!(
        f.intercom().refetch_answer(&mut task).await.unwrap_err(),
        IntercomRefusal::WrongPhase {
            phase: Phase::Polling
        }
    );
    assert_eq!(f.peer.count("GetTask"), 1, "nothing sent for it");
    // Settled with its answer in hand: nothing to read again either.
    let f = Fixture::new(Script::ending(state::COMPLETED, 0)).await;
    let mut task = f.task("t-refetch-held", 3);
    assert_eq!(f.intercom().run(&mut task).await.unwrap(), Phase::Succeeded);
    assert!(task.answer().is_some());
    let polls = f.peer.count("GetTask");
    assert_eq!(
        f.intercom().refetch_answer(&mut task).await.unwrap_err(),
        IntercomRefusal::WrongPhase {
            phase: Phase::Succeeded
        }
    );
    assert_eq!(f.peer.count("GetTask"), polls, "nothing sent for it");
}

#[tokio::test]
async fn a_refused_decision_sends_nothing_and_is_typed() {
    // Ward admits two decisions for the run: the send and one poll.
    let f = Fixture::with(Script::ending(state::COMPLETED, u32::MAX), ward_policy(2)).await;
    let mut task = f.task("t-over", 10);
    let e = f.intercom().run(&mut task).await.unwrap_err();
    assert_eq!(
        e,
        IntercomRefusal::DecisionRefused {
            code: "decision/over-budget".into()
        }
    );
    assert_eq!(e.code(), "intercom/decision-refused");
    assert_eq!(f.peer.count("GetTask"), 1);
    assert_eq!(task.phase(), Phase::Polling);
}

#[tokio::test]
async fn an_unadmitted_peer_is_never_dialed() {
    let f = Fixture::new(Script::default()).await;
    // Same name, another port: no road admits it.
    let url = format!("https://a2a-peer.test:{}/a2a", f.peer.addr().port() + 1);
    let client = client_for(&f.peer, &url);
    let ic = reach_intercom::Intercom {
        client: &client,
        ..f.intercom()
    };
    let mut task = f.task("t-unadmitted", 3);
    // The decision was redeemed, nothing was written: abandoned unsent, with the typed
    // destination refusal as evidence.
    assert_eq!(
        ic.run(&mut task).await.unwrap(),
        Phase::AbandonedBeforeSubmit
    );
    let last = task.trail().last().unwrap();
    assert_eq!(last.code, "destination/port-not-admitted");
    assert!(last.decision.is_some());
    assert_eq!(client.connector().dialer().dials().len(), 0);
    assert!(f.peer.requests().is_empty());
}

#[tokio::test]
async fn malformed_peer_urls_and_specs_are_refused() {
    let f = Fixture::new(Script::default()).await;
    for url in ["http://a2a-peer.test/a2a", "https://user@a2a-peer.test/a2a"] {
        let config = reach_intercom::PeerConfig {
            url: url.into(),
            admission: std::sync::Arc::new(
                reach_destination::roads::Roads::default()
                    .admission(reach_destination::AdmissionPolicy::default())
                    .unwrap(),
            ),
            connector: reach_destination::PinnedConnector::new(
                f.peer.root_store(),
                reach_destination::RecordingDialer::new(),
            ),
            credential: None,
            bounds: reach_intercom::a2a_bounds(),
        };
        let e = reach_intercom::PeerClient::new(config).unwrap_err();
        assert_eq!(e.code(), "intercom/peer-refused", "{url}");
    }
    assert_eq!(
        reach_intercom::PeerCredential::new("has space".into())
            .unwrap_err()
            .code(),
        "intercom/invalid-spec"
    );
    let bad = OutboundTask::new(TaskSpec {
        task_id: "t".into(),
        message_id: "m".into(),
        context_id: None,
        parts: vec![Part::text("x")],
        deadline: START,
        polls: PollBudget {
            max_polls: 0,
            interval: Duration::ZERO,
        },
    });
    assert_eq!(
        bad.unwrap_err(),
        IntercomRefusal::InvalidSpec("polls.max_polls")
    );
}

/// The one CancelTask the peer received, if any, with its `params.id`.
fn cancels(f: &Fixture) -> Vec<reach_a2a_peer::Recorded> {
    f.peer
        .requests()
        .into_iter()
        .filter(|r| r.rpc_method.as_deref() == Some("CancelTask"))
        .collect()
}

#[tokio::test]
async fn a_task_left_waiting_for_input_is_cancelled_once_under_its_own_decision() {
    // WORKING at the first poll, INPUT_REQUIRED at the second (issue #33 item 6).
    let f = Fixture::new(Script::ending(state::INPUT_REQUIRED, 1)).await;
    let mut task = f.task("t-input", 10);
    assert_eq!(f.intercom().run(&mut task).await.unwrap(), Phase::Refused);
    let last = task.trail().last().unwrap().clone();
    assert_eq!(last.code, "a2a/TASK_STATE_INPUT_REQUIRED");
    let cancel = last.cancel.expect("the open task was cancelled");
    assert_eq!(cancel.code, "a2a/cancel/TASK_STATE_CANCELED");
    assert_eq!(cancel.attempt_id.as_deref(), Some("t-input/cancel"));
    assert!(cancel.response_digest.is_some());

    // One CancelTask for the peer's task, after the one SendMessage and the two polls.
    let sent = cancels(&f);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].task_id.as_deref(), Some("peer-task-1"));
    let methods: Vec<_> = f
        .peer
        .requests()
        .iter()
        .map(|r| r.rpc_method.clone().unwrap())
        .collect();
    assert_eq!(methods, ["SendMessage", "GetTask", "GetTask", "CancelTask"]);
    assert_conforming(&f);

    // Its own decision, bound to its attempt id and exact bytes, redeemed once.
    let granted = f.authority.granted();
    assert_eq!(granted.len(), 4, "send, two polls, the cancel");
    let g = granted.last().unwrap();
    assert_eq!(g.attempt_id, "t-input/cancel");
    assert_eq!(g.payload_digest, Sha256Digest::of(&sent[0].body));
    assert_eq!(Some(&g.decision), cancel.decision.as_ref());
    assert!(g.redeemed);
    let distinct: HashSet<_> = granted.iter().map(|g| g.decision.clone()).collect();
    assert_eq!(distinct.len(), 4);
}

#[tokio::test]
async fn a_task_created_waiting_for_input_is_cancelled_and_never_sent_again() {
    let f = Fixture::new(Script {
        initial: state::INPUT_REQUIRED,
        ..Script::default()
    })
    .await;
    let mut task = f.task("t-input-now", 10);
    assert_eq!(f.intercom().run(&mut task).await.unwrap(), Phase::Refused);
    let cancel = task.trail().last().unwrap().cancel.clone().unwrap();
    assert_eq!(cancel.code, "a2a/cancel/TASK_STATE_CANCELED");
    assert_eq!(
        (
            f.peer.count("SendMessage"),
            f.peer.count("GetTask"),
            cancels(&f).len()
        ),
        (1, 0, 1)
    );
    assert_eq!(f.peer.tasks().len(), 1, "one task at the peer");
    assert!(f.peer.tasks()[0].cancelled);
}

#[tokio::test]
async fn the_peers_answer_to_the_cancel_is_recorded_whatever_it_is() {
    // The peer refuses to cancel: TaskNotCancelableError, recorded; nothing resent.
    let f = Fixture::new(Script {
        refuse_cancel: true,
        ..Script::ending(state::INPUT_REQUIRED, 0)
    })
    .await;
    let mut task = f.task("t-stuck", 10);
    assert_eq!(f.intercom().run(&mut task).await.unwrap(), Phase::Refused);
    let cancel = task.trail().last().unwrap().cancel.clone().unwrap();
    assert_eq!(cancel.code, "a2a/cancel/jsonrpc-error/-32002");
    assert_eq!((f.peer.count("SendMessage"), cancels(&f).len()), (1, 1));

    // Ward has no decision left for the cancel (the send and one poll spent the run's two):
    // nothing is sent, and why is recorded.
    let f = Fixture::with(Script::ending(state::INPUT_REQUIRED, 0), ward_policy(2)).await;
    let mut task = f.task("t-no-budget", 10);
    assert_eq!(f.intercom().run(&mut task).await.unwrap(), Phase::Refused);
    let cancel = task.trail().last().unwrap().cancel.clone().unwrap();
    assert_eq!(cancel.code, "intercom/cancel-unsent/decision/over-budget");
    assert_eq!((cancel.attempt_id, cancel.decision), (None, None));
    assert!(cancels(&f).is_empty());
    assert_eq!(f.peer.count("SendMessage"), 1);
}

#[tokio::test]
async fn only_a_task_left_waiting_for_input_is_cancelled() {
    for terminal in [
        state::COMPLETED,
        state::FAILED,
        state::REJECTED,
        state::CANCELED,
        state::AUTH_REQUIRED,
    ] {
        let f = Fixture::new(Script::ending(terminal, 0)).await;
        let mut task = f.task("t-no-cancel", 10);
        f.intercom().run(&mut task).await.unwrap();
        assert!(cancels(&f).is_empty(), "{terminal}");
        assert_eq!(task.trail().last().unwrap().cancel, None, "{terminal}");
    }
}

#[tokio::test]
async fn the_peers_status_message_is_kept_quarantined_for_failed_rejected_and_input_required() {
    // Issue #33 item 7: the same quarantine as an answer; text only, bounded.
    let said = |parts: serde_json::Value, terminal: &'static str| Script {
        status_message: Some(parts),
        ..Script::ending(terminal, 0)
    };
    for terminal in [state::FAILED, state::REJECTED, state::INPUT_REQUIRED] {
        let f = Fixture::new(said(
            serde_json::json!([{"text": "The index is rebuilding; try after 14:00."}]),
            terminal,
        ))
        .await;
        let mut task = f.task("t-why", 10);
        f.intercom().run(&mut task).await.unwrap();
        assert_eq!(
            reach_intercom::quarantine_status_message(task.answer().unwrap()),
            Some(Ok("The index is rebuilding; try after 14:00.".to_owned())),
            "{terminal}"
        );
        // A message the quarantine refuses is withheld with its code.
        for (parts, code) in [
            (
                serde_json::json!([{"text": "mail ops@example.org"}]),
                "quarantine/privacy",
            ),
            (serde_json::json!([{"data": {"k": 1}}]), "quarantine/schema"),
            (
                // Five parts of 2 KB: each within one JSON token's bound, together over 8 KiB.
                serde_json::json!(
                    (0..5)
                        .map(|_| serde_json::json!({"text": "x".repeat(2_000)}))
                        .collect::<Vec<_>>()
                ),
                "quarantine/over-long",
            ),
        ] {
            let f = Fixture::new(said(parts, terminal)).await;
            let mut task = f.task("t-why-not", 10);
            f.intercom().run(&mut task).await.unwrap();
            let judged = reach_intercom::quarantine_status_message(task.answer().unwrap());
            assert_eq!(
                judged.map(|r| r.map_err(|q| q.code())),
                Some(Err(code.to_owned())),
                "{terminal}"
            );
        }
    }
}
