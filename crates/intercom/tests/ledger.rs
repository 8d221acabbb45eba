#![allow(clippy::disallowed_methods)] // The test server's URL, never a secret.
//! The outbound task persisted through the Phylactery's Intercom task/outbox table on real
//! SQLite: committed (OUTBOX) with its decision before the decision is redeemed, SUBMITTING
//! before the first byte, then PARKED and settled with evidence; an ambiguous send is UNCERTAIN
//! in the ledger too; a journal refusal stops the send.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use reach_a2a_peer::{A2aPeer, Script, state};
use reach_digest::Sha256Digest;
use reach_intercom::ledger::{PhylacteryJournal, ledger_state};
use reach_intercom::{
    Attempt, DecisionId, Evidence, Intercom, IntercomRefusal, Journal, JournalError, OutboundTask,
    Phase, PollBudget,
};
use reach_phylactery::{
    AdmissionRequest, Clock, EventKey, IntercomTaskState, OperatorReconciliation, PatternRevision,
    Phylactery, ReconciliationKind, TurnCommit, TurnState, VaultConfig,
};

async fn vault(f: &Fixture) -> (Arc<Phylactery>, PhylacteryJournal) {
    vault_in(f, VaultConfig::sqlite(f.dir.path().join("vault.db"))).await
}

/// A fresh schema on the test PostgreSQL server (`REACH_TEST_DATABASE_URL`, which
/// `scripts/test.sh` sets); a clear failure when it is missing, never a silent pass.
fn postgres() -> VaultConfig {
    let url = std::env::var("REACH_TEST_DATABASE_URL")
        .expect("REACH_TEST_DATABASE_URL names the test PostgreSQL server");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    VaultConfig::postgres(
        url,
        Some(format!("t_intercom_{}_{nanos}", std::process::id())),
    )
}

async fn vault_in(f: &Fixture, config: VaultConfig) -> (Arc<Phylactery>, PhylacteryJournal) {
    let p = Phylactery::open(config, Arc::new(f.clock.clone()))
        .await
        .unwrap();
    p.record_operator_reconciliation(&OperatorReconciliation {
        kind: ReconciliationKind::Genesis,
        operator: "test-operator".into(),
        note: "fresh test vault".into(),
    })
    .await
    .unwrap();
    let admitted = p
        .admit(&AdmissionRequest {
            key: EventKey {
                platform: "discord".into(),
                adapter_revision: "gw-v10/1".into(),
                application_id: "app-1".into(),
                event_kind: "MESSAGE_CREATE".into(),
                external_event_id: "evt-1".into(),
            },
            payload_digest: Sha256Digest::of("question"),
            habitat: "habitat-docs".into(),
        })
        .await
        .unwrap();
    let run = p
        .begin_run(
            &admitted.status().turn_id,
            &PatternRevision {
                pattern_id: "public-answer".into(),
                revision: "r1".into(),
            },
        )
        .await
        .unwrap();
    let p = Arc::new(p);
    let journal = PhylacteryJournal {
        vault: Arc::clone(&p),
        run,
        clock: Arc::new(f.clock.clone()),
    };
    (p, journal)
}

/// What the ledger and the peer looked like at each journal call.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    step: String,
    peer_requests: usize,
    ledger: Option<IntercomTaskState>,
}

/// Delegates to the Phylactery journal and records, after each write, the ledger state and how
/// many requests the peer had received.
struct Checking<'a> {
    inner: &'a PhylacteryJournal,
    peer: &'a A2aPeer,
    seen: Mutex<Vec<Seen>>,
}

impl Checking<'_> {
    async fn note(&self, task: &OutboundTask, step: String) {
        let ledger = self
            .inner
            .vault
            .intercom_task(&task.spec().task_id)
            .await
            .ok()
            .map(|r| r.state);
        self.seen.lock().unwrap().push(Seen {
            step,
            peer_requests: self.peer.requests().len(),
            ledger,
        });
    }
}

impl Journal for Checking<'_> {
    async fn committed(
        &self,
        task: &OutboundTask,
        send: &Attempt,
        decision: &DecisionId,
    ) -> Result<(), JournalError> {
        self.inner.committed(task, send, decision).await?;
        self.note(task, "committed".into()).await;
        Ok(())
    }

    async fn transitioned(&self, task: &OutboundTask, e: &Evidence) -> Result<(), JournalError> {
        self.inner.transitioned(task, e).await?;
        self.note(task, e.to.to_string()).await;
        Ok(())
    }
}

fn intercom<'a, J: Journal>(
    f: &'a Fixture,
    journal: &'a J,
) -> Intercom<'a, Client, WardAuthority, J> {
    Intercom {
        client: &f.client,
        authority: &f.authority,
        receipt: &f.receipt,
        journal,
        clock: Arc::new(f.clock.clone()),
    }
}

#[tokio::test]
async fn the_task_is_committed_before_sending_and_settled_in_the_ledger() {
    let f = Fixture::new(Script::ending(state::COMPLETED, 1)).await;
    let (vault, journal) = vault(&f).await;
    let checking = Checking {
        inner: &journal,
        peer: &f.peer,
        seen: Mutex::new(Vec::new()),
    };
    let mut task = f.task("t-ledger", 10);
    assert_eq!(
        intercom(&f, &checking).run(&mut task).await.unwrap(),
        Phase::Succeeded
    );
    let seen = checking.seen.lock().unwrap().clone();
    let at = |step: &str| seen.iter().find(|s| s.step == step).unwrap().clone();
    // OUTBOX and SUBMITTING were durable while the peer had received nothing.
    assert_eq!(
        at("committed"),
        Seen {
            step: "committed".into(),
            peer_requests: 0,
            ledger: Some(IntercomTaskState::Outbox)
        }
    );
    assert_eq!(
        at("SENDING"),
        Seen {
            step: "SENDING".into(),
            peer_requests: 0,
            ledger: Some(IntercomTaskState::Submitting)
        }
    );
    assert_eq!(at("SUBMITTED").ledger, Some(IntercomTaskState::Parked));
    // Every journaled phase is its ledger state.
    for s in &seen[1..] {
        let phase = Phase::ALL.iter().find(|p| p.as_str() == s.step).unwrap();
        assert_eq!(s.ledger, Some(ledger_state(*phase)), "{}", s.step);
    }

    let record = vault.intercom_task("t-ledger").await.unwrap();
    assert_eq!(record.state, IntercomTaskState::Succeeded);
    assert_eq!(record.remote_task_id.as_deref(), Some("peer-task-1"));
    assert_eq!(record.message_id, "msg-t-ledger");
    assert_eq!(record.peer, f.client.url());
    assert_eq!(record.payload_digest, task.envelope_digest().to_string());
    assert_eq!(record.decision_id.0, f.authority.granted()[0].decision.0);
    let evidence = record.evidence.unwrap();
    assert!(
        evidence.starts_with("a2a/TASK_STATE_COMPLETED attempt=t-ledger/poll-2"),
        "{evidence}"
    );
    assert!(evidence.contains("response=sha256:"), "{evidence}");
}

#[tokio::test]
async fn an_ambiguous_send_is_uncertain_in_the_ledger_and_revocation_settles_it() {
    let mut f = Fixture::new(Script {
        drop_after_commit: 1,
        ..Script::default()
    })
    .await;
    let (vault, journal) = vault(&f).await;
    let mut task = f.task("t-ledger-drop", 10);
    assert_eq!(
        intercom(&f, &journal).run(&mut task).await.unwrap(),
        Phase::Uncertain
    );
    let record = vault.intercom_task("t-ledger-drop").await.unwrap();
    assert_eq!(record.state, IntercomTaskState::Uncertain);
    assert!(record.evidence.unwrap().starts_with("bounded/protocol"));
    // A receipt now admits a resend, but the Sigil is revoked first: REVOKED, nothing sent.
    f.receipt = reach_intercom::EnrollmentReceipt::with_resend(f.peer.url(), 1);
    f.authority
        .desk
        .revoke(CORE, &f.authority.sigil)
        .await
        .unwrap();
    assert_eq!(
        intercom(&f, &journal).reconcile(&mut task).await.unwrap(),
        Phase::Revoked
    );
    let record = vault.intercom_task("t-ledger-drop").await.unwrap();
    assert_eq!(record.state, IntercomTaskState::Revoked);
    assert_eq!(record.evidence.as_deref(), Some("sigil/revoked"));
    assert_eq!(f.peer.count("SendMessage"), 1);
}

#[tokio::test]
async fn a_journal_refusal_stops_the_send_before_any_byte() {
    let f = Fixture::new(Script::default()).await;
    let (vault, journal) = vault(&f).await;
    let mut first = f.task("t-ledger-dup", 10);
    assert_eq!(
        intercom(&f, &journal).run(&mut first).await.unwrap(),
        Phase::Succeeded
    );
    // The same task id again: the ledger refuses the outbox commit.
    let mut again = f.task("t-ledger-dup", 10);
    let e = intercom(&f, &journal).run(&mut again).await.unwrap_err();
    assert_eq!(
        e,
        IntercomRefusal::Journal {
            code: "ledger/invalid-input".into()
        }
    );
    assert_eq!(e.code(), "intercom/journal");
    assert_eq!(again.phase(), Phase::Committed);
    assert_eq!(f.peer.count("SendMessage"), 1);
    assert_eq!(
        vault.intercom_task("t-ledger-dup").await.unwrap().state,
        IntercomTaskState::Succeeded
    );
}

/// Delegates to the Phylactery journal but "crashes" (fails without writing) at one phase.
struct CrashAt<'a> {
    inner: &'a PhylacteryJournal,
    at: Phase,
}

impl Journal for CrashAt<'_> {
    async fn committed(
        &self,
        task: &OutboundTask,
        send: &Attempt,
        decision: &DecisionId,
    ) -> Result<(), JournalError> {
        self.inner.committed(task, send, decision).await
    }

    async fn transitioned(&self, task: &OutboundTask, e: &Evidence) -> Result<(), JournalError> {
        if e.to == self.at {
            return Err(JournalError {
                code: "test/crash".into(),
            });
        }
        self.inner.transitioned(task, e).await
    }
}

#[tokio::test]
async fn a_parked_task_resumes_polling_after_a_restart() {
    let f = Fixture::new(Script::ending(state::COMPLETED, 3)).await;
    let (vault, journal) = vault(&f).await;
    let mut task = f.task("t-stasis", 2);
    assert_eq!(
        intercom(&f, &journal).run(&mut task).await.unwrap_err(),
        IntercomRefusal::PollBudgetExhausted { polls: 2 }
    );
    assert_eq!(
        vault.intercom_task("t-stasis").await.unwrap().state,
        IntercomTaskState::Parked
    );
    // The process is gone; only the spec and the ledger remain.
    let spec = task.spec().clone();
    drop(task);
    let mut resumed = journal.resume(spec).await.unwrap();
    assert_eq!(resumed.phase(), Phase::Polling);
    assert_eq!(resumed.remote_task_id(), Some("peer-task-1"));
    assert_eq!(
        intercom(&f, &journal).poll(&mut resumed).await.unwrap(),
        Phase::Succeeded
    );
    assert_eq!(
        vault.intercom_task("t-stasis").await.unwrap().state,
        IntercomTaskState::Succeeded
    );
    assert_eq!(f.peer.count("SendMessage"), 1);
    assert_eq!(f.peer.count("GetTask"), 4);
}

#[tokio::test]
async fn a_crash_with_the_send_in_flight_resumes_uncertain_and_is_not_resent() {
    let f = Fixture::new(Script::default()).await;
    let (vault, journal) = vault(&f).await;
    let crash = CrashAt {
        inner: &journal,
        at: Phase::Submitted,
    };
    let mut task = f.task("t-crash-send", 5);
    assert_eq!(
        intercom(&f, &crash).run(&mut task).await.unwrap_err(),
        IntercomRefusal::Journal {
            code: "test/crash".into()
        }
    );
    assert_eq!(f.peer.count("SendMessage"), 1, "the bytes had left");
    assert_eq!(
        vault.intercom_task("t-crash-send").await.unwrap().state,
        IntercomTaskState::Submitting
    );
    let mut resumed = journal.resume(task.spec().clone()).await.unwrap();
    assert_eq!(resumed.phase(), Phase::Uncertain);
    let record = vault.intercom_task("t-crash-send").await.unwrap();
    assert_eq!(record.state, IntercomTaskState::Uncertain);
    assert_eq!(
        record.evidence.as_deref(),
        Some("intercom/resumed-after-crash-in-send")
    );
    assert_eq!(
        intercom(&f, &journal)
            .reconcile(&mut resumed)
            .await
            .unwrap_err(),
        IntercomRefusal::ResendNotAdmitted
    );
    assert_eq!(f.peer.count("SendMessage"), 1);
}

#[tokio::test]
async fn a_crash_before_submitting_resumes_abandoned_unsent() {
    let f = Fixture::new(Script::default()).await;
    let (vault, journal) = vault(&f).await;
    let crash = CrashAt {
        inner: &journal,
        at: Phase::Sending,
    };
    let mut task = f.task("t-crash-outbox", 5);
    assert!(matches!(
        intercom(&f, &crash).run(&mut task).await,
        Err(IntercomRefusal::Journal { .. })
    ));
    assert!(
        f.peer.requests().is_empty(),
        "SENDING was not durable: nothing sent"
    );
    assert_eq!(
        vault.intercom_task("t-crash-outbox").await.unwrap().state,
        IntercomTaskState::Outbox
    );
    let resumed = journal.resume(task.spec().clone()).await.unwrap();
    assert_eq!(resumed.phase(), Phase::AbandonedBeforeSubmit);
    assert_eq!(
        vault.intercom_task("t-crash-outbox").await.unwrap().state,
        IntercomTaskState::AbandonedBeforeSubmit
    );
}

#[tokio::test]
async fn resuming_refuses_a_spec_that_is_not_the_journaled_one() {
    let f = Fixture::new(Script::default()).await;
    let (_vault, journal) = vault(&f).await;
    let mut task = f.task("t-resume-check", 5);
    intercom(&f, &journal).run(&mut task).await.unwrap();
    let altered = reach_intercom::TaskSpec {
        parts: vec![reach_intercom::Part::text("another question")],
        ..task.spec().clone()
    };
    let e = journal.resume(altered).await.unwrap_err();
    assert_eq!(e, IntercomRefusal::ResumeMismatch("envelope digest"));
    assert_eq!(e.code(), "intercom/resume-mismatch");
    let other_message = reach_intercom::TaskSpec {
        message_id: "msg-other".into(),
        ..task.spec().clone()
    };
    assert_eq!(
        journal.resume(other_message).await.unwrap_err(),
        IntercomRefusal::ResumeMismatch("message_id")
    );
    let unknown = reach_intercom::TaskSpec {
        task_id: "t-never".into(),
        ..task.spec().clone()
    };
    assert_eq!(
        journal.resume(unknown).await.unwrap_err(),
        IntercomRefusal::Journal {
            code: "ledger/not-found".into()
        }
    );
    // A settled task resumes settled.
    assert_eq!(
        journal.resume(task.spec().clone()).await.unwrap().phase(),
        Phase::Succeeded
    );
}

/// Core's resumer at start: the Phylactery lists the task by state, and the ledger alone (no
/// text) rebuilds it for polling; settling it and then its turn takes it off the list.
#[tokio::test]
async fn an_unsettled_task_is_listed_and_resumed_from_the_ledger_alone() {
    let f = Fixture::new(Script::ending(state::COMPLETED, 3)).await;
    let sqlite = VaultConfig::sqlite(f.dir.path().join("vault.db"));
    listed_and_resumed(f, sqlite).await;
}

/// The same on PostgreSQL.
#[tokio::test]
async fn an_unsettled_task_is_listed_and_resumed_from_the_ledger_alone_on_postgres() {
    let f = Fixture::new(Script::ending(state::COMPLETED, 3)).await;
    listed_and_resumed(f, postgres()).await;
}

async fn listed_and_resumed(f: Fixture, config: VaultConfig) {
    let (vault, journal) = vault_in(&f, config).await;
    assert!(vault.unsettled_intercom_tasks().await.unwrap().is_empty());
    let mut task = f.task("t-listed", 2);
    assert_eq!(
        intercom(&f, &journal).run(&mut task).await.unwrap_err(),
        IntercomRefusal::PollBudgetExhausted { polls: 2 }
    );
    drop(task);
    let listed = vault.unsettled_intercom_tasks().await.unwrap();
    assert_eq!(listed.len(), 1);
    let t = &listed[0];
    assert_eq!(
        (
            t.record.task_id.as_str(),
            t.record.state,
            t.turn_state,
            t.pattern_id.as_str(),
            &t.run_id
        ),
        (
            "t-listed",
            IntercomTaskState::Parked,
            TurnState::Open,
            "public-answer",
            &journal.run
        )
    );
    assert_eq!(t.record.created_at, START);
    let budget = PollBudget {
        max_polls: 5,
        interval: Duration::from_millis(1),
    };
    let deadline = START.plus(Duration::from_secs(60));
    let mut resumed = journal
        .resume_recorded(&t.record, deadline, budget)
        .await
        .unwrap();
    assert_eq!(resumed.phase(), Phase::Polling);
    assert!(!resumed.envelope_retained());
    assert_eq!(
        resumed.envelope_digest().to_string(),
        t.record.payload_digest
    );
    assert_eq!(
        intercom(&f, &journal).poll(&mut resumed).await.unwrap(),
        Phase::Succeeded
    );
    assert!(
        resumed.answer().is_some(),
        "the answer came with the terminal"
    );
    assert_eq!(f.peer.count("SendMessage"), 1, "resumed by polling only");
    // The resumed polls continue the numbering: no attempt id is used twice.
    let attempts: Vec<String> = f
        .authority
        .granted()
        .into_iter()
        .map(|g| g.attempt_id)
        .collect();
    assert_eq!(
        attempts,
        [
            "t-listed/send",
            "t-listed/poll-1",
            "t-listed/poll-2",
            "t-listed/poll-3",
            "t-listed/poll-4"
        ]
    );

    // A settled task whose turn is still OPEN stays listed (core stopped between the two).
    let listed = vault.unsettled_intercom_tasks().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].record.state, IntercomTaskState::Succeeded);
    vault
        .commit_turn(
            &t.turn_id,
            &TurnCommit {
                outcome: TurnState::Succeeded,
                reason: Some("a2a/TASK_STATE_COMPLETED".into()),
                answer_digest: None,
                intent: None,
            },
        )
        .await
        .unwrap();
    assert!(vault.unsettled_intercom_tasks().await.unwrap().is_empty());
}

/// An uncertain task rebuilt without its text is never resent, even when a receipt admits a
/// resend; its local deadline settles it EXPIRED with evidence, sending nothing.
#[tokio::test]
async fn a_task_resumed_without_its_text_is_never_resent_and_expires_at_its_deadline() {
    let mut f = Fixture::new(Script {
        drop_after_commit: 1,
        message_id_guarantee: true,
        ..Script::default()
    })
    .await;
    f.receipt = reach_intercom::EnrollmentReceipt::with_resend(f.peer.url(), 1);
    let (vault, journal) = vault(&f).await;
    let mut task = f.task("t-uncertain-restored", 5);
    assert_eq!(
        intercom(&f, &journal).run(&mut task).await.unwrap(),
        Phase::Uncertain
    );
    drop(task);
    let record = vault.intercom_task("t-uncertain-restored").await.unwrap();
    let budget = PollBudget {
        max_polls: 5,
        interval: Duration::from_millis(1),
    };
    let deadline = f.clock.now().plus(Duration::from_secs(10));
    let mut resumed = journal
        .resume_recorded(&record, deadline, budget)
        .await
        .unwrap();
    assert_eq!(resumed.phase(), Phase::Uncertain);
    assert_eq!(
        intercom(&f, &journal)
            .reconcile(&mut resumed)
            .await
            .unwrap_err(),
        IntercomRefusal::EnvelopeNotRetained
    );
    // Before the deadline nothing changes; after it, EXPIRED.
    assert_eq!(
        intercom(&f, &journal)
            .expire_if_due(&mut resumed)
            .await
            .unwrap(),
        Phase::Uncertain
    );
    f.clock.advance(Duration::from_secs(11));
    assert_eq!(
        intercom(&f, &journal)
            .expire_if_due(&mut resumed)
            .await
            .unwrap(),
        Phase::Expired
    );
    let record = vault.intercom_task("t-uncertain-restored").await.unwrap();
    assert_eq!(record.state, IntercomTaskState::Expired);
    assert_eq!(record.evidence.as_deref(), Some("intercom/deadline"));
    assert_eq!(
        intercom(&f, &journal)
            .expire_if_due(&mut resumed)
            .await
            .unwrap_err(),
        IntercomRefusal::WrongPhase {
            phase: Phase::Expired
        }
    );
    assert_eq!(f.peer.count("SendMessage"), 1, "never resent");
}
