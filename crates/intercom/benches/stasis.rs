//! Load binary: the start-up cost of core's Stasis and the cost of an answer's quarantine.
//!
//! - `Phylactery::unsettled_intercom_tasks` (the resumer's one query at start, a scan of
//!   `intercom_task` with no index of its own) over a SQLite vault holding `TASKS` Intercom
//!   tasks, half of them settled with their turns terminated, half parked in OUTBOX.
//! - `quarantine_answer` of an answer at the 8 KiB bound (16 parts), the worst accepted case.
//!
//! Prints p50/p99. No target is asserted; SPECIFICATION.md records the figures.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reach_digest::Sha256Digest;
use reach_intercom::quarantine::{MAX_ANSWER_BYTES, MAX_ANSWER_PARTS};
use reach_intercom::task::Answer;
use reach_intercom::wire::{Artifact, Task, TaskState, TaskStatus};
use reach_intercom::{Part, quarantine_answer};
use reach_phylactery::{
    AdmissionRequest, AttemptSettlement, Clock, DecisionId, EgressDecisionRef, EventKey,
    IntercomTaskSpec, OperatorReconciliation, PatternRevision, Phylactery, ReconciliationKind,
    SystemClock, TurnCommit, TurnState, VaultConfig,
};

const TASKS: usize = 2_000;
const RUNS: usize = 200;

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn report(name: &str, mut times: Vec<Duration>) {
    times.sort();
    println!(
        "{name}: {} runs, p50 {:.1} us, p99 {:.1} us",
        times.len(),
        pct(&times, 0.50).as_secs_f64() * 1e6,
        pct(&times, 0.99).as_secs_f64() * 1e6,
    );
}

async fn vault_with_tasks(dir: &std::path::Path) -> Phylactery {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let p = Phylactery::open(VaultConfig::sqlite(dir.join("vault.db")), clock.clone())
        .await
        .unwrap();
    p.record_operator_reconciliation(&OperatorReconciliation {
        kind: ReconciliationKind::Genesis,
        operator: "bench".into(),
        note: "fresh bench vault".into(),
    })
    .await
    .unwrap();
    for i in 0..TASKS {
        let admitted = p
            .admit(&AdmissionRequest {
                key: EventKey {
                    platform: "operator".into(),
                    adapter_revision: "bench/1".into(),
                    application_id: "reach".into(),
                    event_kind: "A2A_TASK".into(),
                    external_event_id: format!("task-{i}"),
                },
                payload_digest: Sha256Digest::of(format!("text {i}").as_bytes()),
                habitat: "bench".into(),
            })
            .await
            .unwrap();
        let turn = admitted.status().turn_id.clone();
        let run = p
            .begin_run(
                &turn,
                &PatternRevision {
                    pattern_id: "intercom-operator-task".into(),
                    revision: "1".into(),
                },
            )
            .await
            .unwrap();
        let decision = DecisionId(format!("egd_{i:032x}"));
        let payload = Sha256Digest::of(format!("envelope {i}").as_bytes());
        p.record_egress_decision(
            &run,
            &EgressDecisionRef {
                decision_id: decision.clone(),
                destination: "https://peer.test/a2a".into(),
                purpose: "a2a-task".into(),
                payload_digest: payload,
                expires_at: clock.now().plus(Duration::from_secs(600)),
            },
        )
        .await
        .unwrap();
        let (attempt, _) = p
            .persist_intercom_task(
                &run,
                &decision,
                &IntercomTaskSpec {
                    task_id: format!("task-{i}"),
                    peer: "https://peer.test/a2a".into(),
                    message_id: format!("msg-{i}"),
                    payload_digest: payload,
                },
            )
            .await
            .unwrap();
        if i % 2 == 0 {
            p.settle_attempt(
                &attempt.attempt_id,
                &AttemptSettlement::AbandonedBeforeSubmit {
                    detail: "bench".into(),
                },
            )
            .await
            .unwrap();
            p.commit_turn(
                &turn,
                &TurnCommit {
                    outcome: TurnState::DependencyUnavailable,
                    reason: Some("bench".into()),
                    answer_digest: None,
                    intent: None,
                },
            )
            .await
            .unwrap();
        }
    }
    p
}

fn worst_accepted_answer() -> Answer {
    let part = "a".repeat(MAX_ANSWER_BYTES / MAX_ANSWER_PARTS - 1);
    Answer::Task(Task {
        id: "r1".into(),
        context_id: "c".into(),
        status: TaskStatus {
            state: TaskState::Completed,
            message: None,
            timestamp: None,
        },
        artifacts: vec![Artifact {
            artifact_id: "a".into(),
            name: None,
            parts: (0..MAX_ANSWER_PARTS).map(|_| Part::text(&part)).collect(),
        }],
        history: vec![],
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let p = vault_with_tasks(dir.path()).await;
    assert_eq!(p.unsettled_intercom_tasks().await.unwrap().len(), TASKS / 2);
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let started = Instant::now();
        let listed = p.unsettled_intercom_tasks().await.unwrap();
        times.push(started.elapsed());
        assert_eq!(listed.len(), TASKS / 2);
    }
    report(
        &format!(
            "unsettled_intercom_tasks ({TASKS} tasks, {} unsettled, SQLite)",
            TASKS / 2
        ),
        times,
    );

    let answer = worst_accepted_answer();
    let mut times = Vec::with_capacity(RUNS * 10);
    for _ in 0..RUNS * 10 {
        let started = Instant::now();
        let adopted = quarantine_answer(&answer);
        times.push(started.elapsed());
        assert!(adopted.is_ok());
    }
    report(
        &format!("quarantine_answer ({MAX_ANSWER_PARTS} parts, ~{MAX_ANSWER_BYTES} bytes)"),
        times,
    );
}
