//! The ledger's hardening, each test on SQLite and on PostgreSQL: database guards that hold
//! against raw SQL, the Intercom task/outbox record, vault rollback detection and tainted marking.
#![allow(clippy::disallowed_methods)] // Test knobs (the PostgreSQL URL), never secrets.

mod common;

use std::sync::Arc;

use common::*;
use reach_digest::Sha256Digest;
use reach_phylactery::*;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::SqliteConnectOptions;

/// A raw connection to the same database, bypassing every Rust check.
enum Raw {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

impl Raw {
    async fn of(cfg: &VaultConfig) -> Raw {
        match &cfg.location {
            StoreLocation::Sqlite { path } => Raw::Sqlite(
                sqlx::SqlitePool::connect_with(SqliteConnectOptions::new().filename(path))
                    .await
                    .unwrap(),
            ),
            StoreLocation::Postgres { url, schema } => {
                let opts: PgConnectOptions = url.parse().unwrap();
                let opts = opts.options([("search_path", schema.as_deref().unwrap())]);
                Raw::Postgres(
                    PgPoolOptions::new()
                        .max_connections(1)
                        .connect_with(opts)
                        .await
                        .unwrap(),
                )
            }
        }
    }

    /// Runs one statement; returns the database's refusal text, or `None` if it was accepted.
    async fn refused(&self, sql: &'static str) -> Option<String> {
        let r = match self {
            Raw::Sqlite(p) => sqlx::raw_sql(sql).execute(p).await.map(|_| ()),
            Raw::Postgres(p) => sqlx::raw_sql(sql).execute(p).await.map(|_| ()),
        };
        r.err().map(|e| e.to_string())
    }

    /// The database's page size, as text.
    async fn page_size(&self) -> String {
        self.text("SELECT CAST(page_size AS TEXT) FROM pragma_page_size")
            .await
    }

    async fn text(&self, sql: &'static str) -> String {
        match self {
            Raw::Sqlite(p) => sqlx::query_scalar(sql).fetch_one(p).await.unwrap(),
            Raw::Postgres(p) => sqlx::query_scalar(sql).fetch_one(p).await.unwrap(),
        }
    }
}

async fn open_at(cfg: VaultConfig) -> (Phylactery, ManualClock) {
    let clock = ManualClock::new(T0);
    let p = Phylactery::open(cfg, Arc::new(clock.clone()))
        .await
        .unwrap();
    (p, clock)
}

/// A run with its grounding recorded, ready for attempts.
async fn run_for(p: &Phylactery, n: u64) -> RunId {
    let a = p.admit(&request(n)).await.unwrap();
    p.begin_run(
        &a.status().turn_id,
        &PatternRevision {
            pattern_id: "public-answer".into(),
            revision: "r1".into(),
        },
    )
    .await
    .unwrap()
}

fn task_spec(n: u32, peer: &str) -> IntercomTaskSpec {
    IntercomTaskSpec {
        task_id: format!("task-{n}"),
        peer: peer.into(),
        message_id: format!("msg-{n}"),
        payload_digest: Sha256Digest::of(format!("envelope-{n}")),
    }
}

async fn decision_for(p: &Phylactery, run: &RunId, id: &str, dest: &str, payload: Sha256Digest) {
    p.record_egress_decision(
        run,
        &EgressDecisionRef {
            decision_id: DecisionId(id.into()),
            destination: dest.into(),
            purpose: "a2a".into(),
            payload_digest: payload,
            expires_at: UnixMillis(T0.0 + 3_600_000),
        },
    )
    .await
    .unwrap();
}

async fn database_alone_refuses_forbidden_transitions(db: Db) {
    let (cfg, _g) = config(db, "raw_guards");
    let (p, _clock) = open_at(cfg.clone()).await;
    genesis(&p).await;
    // Intent 1 reaches KNOWN_SENT, intent 2 stays SUBMITTING; an attempt is COMPLETED and an
    // Intercom task SUCCEEDED.
    let i1 = admitted_intent(&p, 1).await;
    let c1 = p.claim(&i1, "edge", LEASE).await.unwrap();
    p.mark_submitting(&c1.lease).await.unwrap();
    p.settle(
        &c1.lease,
        &DeliveryReport::Sent {
            message_id: "m-1".into(),
            platform_status: 200,
        },
    )
    .await
    .unwrap();
    let i2 = admitted_intent(&p, 2).await;
    let c2 = p.claim(&i2, "edge", LEASE).await.unwrap();
    p.mark_submitting(&c2.lease).await.unwrap();
    let run = run_for(&p, 3).await;
    let spec = task_spec(1, "peer-a");
    decision_for(&p, &run, "dec-raw", "peer-a", spec.payload_digest).await;
    let (att, task) = p
        .persist_intercom_task(&run, &DecisionId("dec-raw".into()), &spec)
        .await
        .unwrap();
    p.mark_attempt_submitting(&att.attempt_id).await.unwrap();
    p.settle_attempt(
        &att.attempt_id,
        &AttemptSettlement::Completed {
            response_digest: Sha256Digest::of("resp"),
        },
    )
    .await
    .unwrap();
    p.advance_intercom_task(
        &task.task_id,
        &IntercomUpdate {
            to: IntercomTaskState::Succeeded,
            remote_task_id: Some("remote-1".into()),
            evidence: Some("TASK_STATE_COMPLETED".into()),
        },
    )
    .await
    .unwrap();

    // Intent 4 ends NOT_ATTEMPTED.
    let i4 = admitted_intent(&p, 4).await;
    let c4 = p.claim(&i4, "edge", LEASE).await.unwrap();
    p.settle_not_attempted(&c4.lease, "sigil/expired")
        .await
        .unwrap();

    let raw = Raw::of(&cfg).await;
    // Sanity: the raw connection can write where the rules allow (a new bench row).
    assert_eq!(
        raw.refused("INSERT INTO bench_baseline (id, payload) VALUES (1, 'x')")
            .await,
        None
    );
    let cases: [(&str, &'static str, &str); 14] = [
        (
            "NOT_ATTEMPTED -> CLAIMED (handed out again)",
            "UPDATE discord_delivery_intent SET state = 'CLAIMED', generation = generation + 1 WHERE state = 'NOT_ATTEMPTED'",
            "intent/invalid-transition",
        ),
        (
            "NOT_ATTEMPTED -> SUBMITTING",
            "UPDATE discord_delivery_intent SET state = 'SUBMITTING', submitting_at = 1 WHERE state = 'NOT_ATTEMPTED'",
            "intent/invalid-transition",
        ),
        (
            "SUBMITTING -> PENDING",
            "UPDATE discord_delivery_intent SET state = 'PENDING', generation = 0 WHERE state = 'SUBMITTING'",
            "intent/invalid-transition",
        ),
        (
            "SUBMITTING -> CLAIMED (handed out again)",
            "UPDATE discord_delivery_intent SET state = 'CLAIMED', generation = generation + 1 WHERE state = 'SUBMITTING'",
            "intent/invalid-transition",
        ),
        (
            "a second KNOWN_SENT",
            "UPDATE discord_delivery_intent SET state = 'KNOWN_SENT' WHERE state = 'KNOWN_SENT'",
            "intent/invalid-transition",
        ),
        (
            "a second ReachDelivery for a sent intent",
            "INSERT INTO reach_delivery (intent_id, outcome, effect, payload_digest, nonce, claim_generation, message_id, settled_at)
             SELECT intent_id, 'KNOWN_SENT', effect, payload_digest, nonce, 1, 'm-2', 1 FROM discord_delivery_intent WHERE state = 'KNOWN_SENT'",
            "",
        ),
        (
            "a settled delivery rewritten",
            "UPDATE reach_delivery SET message_id = 'm-forged', outcome = 'KNOWN_SENT' WHERE outcome = 'KNOWN_SENT'",
            "delivery/already-settled",
        ),
        (
            "a terminal turn changing",
            "UPDATE reach_turn SET state = 'FAILED' WHERE state = 'SUCCEEDED'",
            "turn/already-terminal",
        ),
        (
            "an admission's payload digest",
            "UPDATE discord_event_admission SET payload_digest = 'sha256:forged'",
            "admission/immutable",
        ),
        (
            "an intent's effect",
            "UPDATE discord_delivery_intent SET effect = 'create_message channel=evil' WHERE state = 'SUBMITTING'",
            "ledger/immutable-identity",
        ),
        (
            "deleting an admission",
            "DELETE FROM discord_event_admission",
            "ledger/append-only",
        ),
        (
            "a completed attempt submitting again",
            "UPDATE service_job_attempt SET state = 'SUBMITTING' WHERE state = 'COMPLETED'",
            "attempt/invalid-transition",
        ),
        (
            "a settled Intercom task sent again",
            "UPDATE intercom_task SET state = 'SUBMITTING' WHERE state = 'SUCCEEDED'",
            "intercom/invalid-transition",
        ),
        (
            "an Intercom task's peer",
            "UPDATE intercom_task SET peer = 'peer-evil'",
            "",
        ),
    ];
    for (what, sql, code) in cases {
        let err = raw
            .refused(sql)
            .await
            .unwrap_or_else(|| panic!("{db:?}: the database accepted {what}"));
        assert!(
            err.contains(code),
            "{db:?}: {what} refused for another reason: {err}"
        );
    }
    // Rows outside the row rules and edges without their parent: refused by CHECK constraints
    // and foreign keys on SQLite, by the row guard triggers on PostgreSQL (migration 10); the
    // two word their refusals alike.
    let i5 = admitted_intent(&p, 5).await;
    let rows: [(&str, &'static str, &str); 9] = [
        (
            "an intent nonce over 25 characters",
            "INSERT INTO discord_delivery_intent (intent_id, turn_id, part_no, seq, effect, payload_digest, nonce, state, generation, created_at)
             SELECT 'int-raw', turn_id, 1, 9, 'e', 'd', 'n1234567890123456789012345', 'PENDING', 0, 1 FROM discord_delivery_intent WHERE state = 'NOT_ATTEMPTED'",
            "check constraint",
        ),
        (
            "a claim without a lease",
            "UPDATE discord_delivery_intent SET state = 'CLAIMED', generation = generation + 1, lease_owner = NULL WHERE state = 'PENDING'",
            "check constraint",
        ),
        (
            "a claim at generation 0",
            "UPDATE discord_delivery_intent SET state = 'CLAIMED', lease_owner = 'x', lease_expires_at = 1 WHERE state = 'PENDING'",
            "check constraint",
        ),
        (
            "an outcome without its SUBMITTING time",
            "UPDATE discord_delivery_intent SET state = 'UNKNOWN', submitting_at = NULL WHERE state = 'SUBMITTING'",
            "check constraint",
        ),
        (
            "a sent delivery without its message id",
            "INSERT INTO reach_delivery (intent_id, outcome, effect, payload_digest, nonce, claim_generation, settled_at)
             SELECT intent_id, 'KNOWN_SENT', effect, payload_digest, nonce, generation, 1 FROM discord_delivery_intent WHERE state = 'SUBMITTING'",
            "check constraint",
        ),
        (
            "a terminal turn without its time",
            "UPDATE reach_turn SET state = 'FAILED' WHERE state = 'OPEN'",
            "check constraint",
        ),
        (
            "an intent of no turn",
            "INSERT INTO discord_delivery_intent (intent_id, turn_id, part_no, seq, effect, payload_digest, nonce, state, generation, created_at)
             VALUES ('int-orphan', 'turn_none', 1, 1, 'e', 'd', 'n-orphan', 'PENDING', 0, 1)",
            "foreign key constraint",
        ),
        (
            "a delivery of no intent",
            "INSERT INTO reach_delivery (intent_id, outcome, effect, payload_digest, nonce, claim_generation, message_id, settled_at)
             VALUES ('int-none', 'KNOWN_SENT', 'e', 'd', 'n', 1, 'm-x', 1)",
            "foreign key constraint",
        ),
        (
            "a turn of no admission",
            "INSERT INTO reach_turn (turn_id, admission_id, state, opened_at) VALUES ('turn_none', 'adm_none', 'OPEN', 1)",
            "foreign key constraint",
        ),
    ];
    for (what, sql, code) in rows {
        let err = raw
            .refused(sql)
            .await
            .unwrap_or_else(|| panic!("{db:?}: the database accepted {what}"));
        assert!(
            err.to_lowercase().contains(code),
            "{db:?}: {what} refused for another reason: {err}"
        );
    }
    assert_eq!(p.intent(&i5).await.unwrap().state, IntentState::Pending);

    // Nothing changed.
    assert_eq!(p.intent(&i1).await.unwrap().state, IntentState::KnownSent);
    assert_eq!(p.intent(&i2).await.unwrap().state, IntentState::Submitting);
    assert_eq!(
        raw.text("SELECT message_id FROM reach_delivery").await,
        "m-1"
    );
    assert_eq!(p.intercom_task(&task.task_id).await.unwrap().peer, "peer-a");
    assert_eq!(
        p.admission_status(&request(1).key.admission_id())
            .await
            .unwrap()
            .unwrap()
            .payload_digest,
        request(1).payload_digest
    );
}

async fn intercom_task_is_its_own_record(db: Db) {
    let (p, clock, _g) = open(db, "intercom").await;
    let run = run_for(&p, 1).await;
    let spec = task_spec(1, "peer-a");
    decision_for(&p, &run, "dec-1", "peer-a", spec.payload_digest).await;
    // The generic attempt path refuses the Intercom channel: the task must be in the commit.
    assert_eq!(
        p.persist_attempt(
            &run,
            &DecisionId("dec-1".into()),
            &AttemptSpec {
                channel: AttemptChannel::IntercomTask,
                destination: "peer-a".into(),
                request_digest: spec.payload_digest,
                protocol_id: "x".into(),
            },
        )
        .await
        .unwrap_err()
        .code(),
        "ledger/invalid-input"
    );
    assert_eq!(
        p.persist_intercom_task(
            &run,
            &DecisionId("dec-1".into()),
            &IntercomTaskSpec {
                peer: String::new(),
                ..spec.clone()
            }
        )
        .await
        .unwrap_err()
        .code(),
        "ledger/invalid-input"
    );
    // The decision binds the peer and the envelope digest.
    assert_eq!(
        p.persist_intercom_task(&run, &DecisionId("dec-1".into()), &task_spec(1, "peer-b"))
            .await
            .unwrap_err()
            .code(),
        "ledger/invalid-input"
    );
    let (att, task) = p
        .persist_intercom_task(&run, &DecisionId("dec-1".into()), &spec)
        .await
        .unwrap();
    assert_eq!(task.state, IntercomTaskState::Outbox);
    assert_eq!(task.attempt_id, att.attempt_id);
    assert_eq!(p.intercom_task("task-1").await.unwrap(), task);
    assert_eq!(
        p.intercom_task("task-none").await.unwrap_err().code(),
        "ledger/not-found"
    );
    // Only the attempt moves it to SUBMITTING, in the same commit.
    let to = |to, remote: Option<&str>, evidence: Option<&str>| IntercomUpdate {
        to,
        remote_task_id: remote.map(str::to_owned),
        evidence: evidence.map(str::to_owned),
    };
    assert_eq!(
        p.advance_intercom_task("task-1", &to(IntercomTaskState::Submitting, None, None))
            .await
            .unwrap_err()
            .code(),
        "ledger/invalid-input"
    );
    assert_eq!(
        p.advance_intercom_task("task-1", &to(IntercomTaskState::Parked, Some("r-1"), None))
            .await
            .unwrap_err()
            .code(),
        "ledger/wrong-state"
    );
    p.mark_attempt_submitting(&att.attempt_id).await.unwrap();
    assert_eq!(
        p.intercom_task("task-1").await.unwrap().state,
        IntercomTaskState::Submitting
    );
    assert_eq!(
        p.advance_intercom_task("task-1", &to(IntercomTaskState::Parked, None, None))
            .await
            .unwrap_err()
            .code(),
        "ledger/invalid-input"
    );
    // The process dies with the initial send in flight: UNCERTAIN, never resent.
    clock.advance(LEASE);
    let r = p.recover().await.unwrap();
    assert_eq!(r.indeterminate_attempts, vec![att.attempt_id.clone()]);
    assert_eq!(
        p.intercom_task("task-1").await.unwrap().state,
        IntercomTaskState::Uncertain
    );
    assert_eq!(
        p.advance_intercom_task("task-1", &to(IntercomTaskState::Parked, Some("r-1"), None))
            .await
            .unwrap_err()
            .code(),
        "ledger/invalid-input",
        "leaving UNCERTAIN needs evidence"
    );
    let parked = p
        .advance_intercom_task(
            "task-1",
            &to(
                IntercomTaskState::Parked,
                Some("r-1"),
                Some("peer lists task r-1 for message msg-1"),
            ),
        )
        .await
        .unwrap();
    assert_eq!(parked.state, IntercomTaskState::Parked);
    assert_eq!(parked.remote_task_id.as_deref(), Some("r-1"));
    p.advance_intercom_task(
        "task-1",
        &to(
            IntercomTaskState::Succeeded,
            None,
            Some("TASK_STATE_COMPLETED"),
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        p.advance_intercom_task("task-1", &to(IntercomTaskState::Failed, None, Some("late")))
            .await
            .unwrap_err()
            .code(),
        "ledger/wrong-state",
        "a terminal task never changes"
    );
    // A second task under a used decision is refused; a fresh decision is needed.
    p.reconcile_attempt(
        &att.attempt_id,
        &AttemptEvidence::Completed {
            response_digest: Sha256Digest::of("resp"),
            evidence: "peer task r-1".into(),
        },
        "ops",
    )
    .await
    .unwrap();
    let spec2 = task_spec(2, "peer-a");
    decision_for(&p, &run, "dec-2", "peer-a", spec2.payload_digest).await;
    let (att2, _) = p
        .persist_intercom_task(&run, &DecisionId("dec-2".into()), &spec2)
        .await
        .unwrap();
    assert_eq!(
        p.persist_intercom_task(
            &run,
            &DecisionId("dec-2".into()),
            &IntercomTaskSpec {
                task_id: "task-3".into(),
                ..spec2.clone()
            }
        )
        .await
        .unwrap_err()
        .code(),
        "attempt/decision-reused"
    );
    // Abandoned before submit: the outbox record is abandoned with its attempt.
    p.settle_attempt(
        &att2.attempt_id,
        &AttemptSettlement::AbandonedBeforeSubmit {
            detail: "deadline passed before send".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(
        p.intercom_task("task-2").await.unwrap().state,
        IntercomTaskState::AbandonedBeforeSubmit
    );
    // The trail shows the task beside its attempt.
    let trail = p
        .trail(&TrailKey::ExternalEventId("evt-1".into()))
        .await
        .unwrap();
    let task_entry = trail
        .iter()
        .find(|e| e.record == "IntercomTask" && e.id == "task-1")
        .expect("task in trail");
    assert!(task_entry.fields.contains(&("state", "SUCCEEDED".into())));
    assert!(task_entry.fields.contains(&("peer", "peer-a".into())));
    assert!(
        trail
            .iter()
            .any(|e| e.record == "IntercomTask" && e.id == "task-2")
    );
}

async fn rolled_back_vault_refuses_until_reconciled(db: Db) {
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("core.high-water");
    let (cfg, _g) = config(db, "rollback");
    let cfg = cfg.with_high_water(&mark);
    let (p, _clock) = open_at(cfg.clone()).await;
    genesis(&p).await;
    admitted_intent(&p, 1).await;
    p.close().await;
    let m1 = HighWaterMark::read(&mark)
        .unwrap()
        .expect("mark written at close");
    assert!(m1.seq >= 2, "admission and turn advanced the sequence");

    // Keep a copy of the vault as it is now (the "backup").
    let backup = dir.path().join("backup");
    std::fs::create_dir(&backup).unwrap();
    if let StoreLocation::Sqlite { path } = &cfg.location {
        copy_sqlite(path, &backup.join("vault.db"));
    }

    // The body moves on: a claim and a SUBMITTING that the backup does not have.
    let (p, _clock) = open_at(cfg.clone()).await;
    let c = p
        .claim(
            &p.intents_of_turn(
                &p.admission_status(&request(1).key.admission_id())
                    .await
                    .unwrap()
                    .unwrap()
                    .turn_id,
            )
            .await
            .unwrap()[0]
                .intent_id,
            "edge",
            LEASE,
        )
        .await
        .unwrap();
    p.mark_submitting(&c.lease).await.unwrap();
    p.checkpoint_high_water().await.unwrap();
    let m2 = HighWaterMark::read(&mark).unwrap().unwrap();
    assert!(m2.seq > m1.seq);
    p.close().await;

    // Restore the older vault.
    match &cfg.location {
        StoreLocation::Sqlite { path } => copy_sqlite(&backup.join("vault.db"), path),
        StoreLocation::Postgres { .. } => {
            // A dump or snapshot restore brings back the older sequence value with the rows;
            // the raw setval models exactly that part.
            let raw = Raw::of(&cfg).await;
            let sql: &'static str = Box::leak(
                format!("SELECT setval('vault_commit_seq', {})", m1.seq).into_boxed_str(),
            );
            assert_eq!(raw.refused(sql).await, None);
        }
    }
    let (p, _clock) = open_at(cfg.clone()).await;
    match p.vault_status().await.unwrap() {
        VaultStatus::AwaitingReconciliation {
            rolled_back: Some(d),
            ..
        } => {
            assert_eq!(d.mark_seq, m2.seq);
            assert!(d.vault_seq < m2.seq);
        }
        s => panic!("{db:?}: rollback not detected: {s:?}"),
    }
    assert_eq!(
        p.admit(&request(9)).await.unwrap_err().code(),
        "vault/rolled-back"
    );
    assert_eq!(
        p.claim_next("edge", LEASE).await.unwrap_err().code(),
        "vault/rolled-back"
    );
    // The mark is not lowered while the rollback is unresolved, even across restarts.
    p.close().await;
    assert_eq!(HighWaterMark::read(&mark).unwrap().unwrap(), m2);
    let (p, clock) = open_at(cfg.clone()).await;
    clock.advance(std::time::Duration::from_secs(48 * 3600));
    assert_eq!(
        p.admit(&request(9)).await.unwrap_err().code(),
        "vault/rolled-back",
        "the horizon does not lift a rollback"
    );
    assert_eq!(
        p.record_operator_reconciliation(&OperatorReconciliation {
            kind: ReconciliationKind::Genesis,
            operator: "ops".into(),
            note: "n".into(),
        })
        .await
        .unwrap_err()
        .code(),
        "ledger/invalid-input"
    );
    let s = p
        .record_operator_reconciliation(&OperatorReconciliation {
            kind: ReconciliationKind::EffectsReconciled,
            operator: "ops".into(),
            note: "checked channel history since the backup".into(),
        })
        .await
        .unwrap();
    assert!(matches!(s, VaultStatus::Serving { .. }));
    p.admit(&request(9)).await.unwrap();
    p.close().await;
    // The reconciled vault is the new mark; it opens serving.
    let (p, _clock) = open_at(cfg.clone()).await;
    assert!(matches!(
        p.vault_status().await.unwrap(),
        VaultStatus::Serving { .. }
    ));
    p.close().await;

    // Another vault presented with this body's mark is refused too.
    let (other, _g2) = config(db, "rollback_other");
    let (p, _clock) = open_at(other.with_high_water(&mark)).await;
    assert!(matches!(
        p.vault_status().await.unwrap(),
        VaultStatus::AwaitingReconciliation {
            rolled_back: Some(_),
            ..
        }
    ));
    // An unreadable mark is a clear refusal at open.
    std::fs::write(&mark, "garbage").unwrap();
    let (cfg3, _g3) = config(db, "rollback_garbage");
    assert_eq!(
        Phylactery::open(cfg3.with_high_water(&mark), Arc::new(ManualClock::new(T0)))
            .await
            .unwrap_err()
            .code(),
        "ledger/corrupt-row"
    );
}

/// Copies a closed SQLite vault (main file and any WAL left behind).
fn copy_sqlite(from: &std::path::Path, to: &std::path::Path) {
    std::fs::copy(from, to).unwrap();
    for ext in ["-wal", "-shm"] {
        let f = format!("{}{ext}", from.display());
        let t = format!("{}{ext}", to.display());
        let _ = std::fs::remove_file(&t);
        if std::path::Path::new(&f).exists() {
            std::fs::copy(&f, &t).unwrap();
        }
    }
}

async fn tainted_principal_is_fenced(db: Db) {
    let (p, _clock, _g) = open(db, "taint").await;
    assert_eq!(
        p.mark_tainted("", "x", "ops").await.unwrap_err().code(),
        "ledger/invalid-input"
    );
    // evil-edge holds a CLAIMED lease on 1 and is SUBMITTING 2; good-edge holds 3.
    let i1 = admitted_intent(&p, 1).await;
    let i2 = admitted_intent(&p, 2).await;
    let i3 = admitted_intent(&p, 3).await;
    let c1 = p.claim(&i1, "evil-edge", LEASE).await.unwrap();
    let c2 = p.claim(&i2, "evil-edge", LEASE).await.unwrap();
    p.mark_submitting(&c2.lease).await.unwrap();
    let c3 = p.claim(&i3, "good-edge", LEASE).await.unwrap();
    // A compromised peer with a parked task and a provider attempt in flight.
    let run = run_for(&p, 4).await;
    let spec = task_spec(1, "evil-peer");
    decision_for(&p, &run, "dec-1", "evil-peer", spec.payload_digest).await;
    let (att, _) = p
        .persist_intercom_task(&run, &DecisionId("dec-1".into()), &spec)
        .await
        .unwrap();
    p.mark_attempt_submitting(&att.attempt_id).await.unwrap();
    p.advance_intercom_task(
        "task-1",
        &IntercomUpdate {
            to: IntercomTaskState::Parked,
            remote_task_id: Some("r-1".into()),
            evidence: None,
        },
    )
    .await
    .unwrap();

    let report = p
        .mark_tainted("evil-edge", "credential leaked", "ops")
        .await
        .unwrap();
    assert_eq!(
        report.ids("DiscordDeliveryIntent@1", TaintAction::LeaseRevoked),
        vec![i1.0.clone()]
    );
    assert_eq!(
        report.ids("DiscordDeliveryIntent@1", TaintAction::OutcomeUnknown),
        vec![i2.0.clone()]
    );
    assert_eq!(report.records.len(), 2, "good-edge's lease is untouched");
    // The revoked holder's later writes fail the generation fence.
    assert_eq!(
        p.mark_submitting(&c1.lease).await.unwrap_err().code(),
        "ledger/stale-generation"
    );
    // Its report of the send it was making is not evidence.
    assert_eq!(
        p.settle(
            &c2.lease,
            &DeliveryReport::Sent {
                message_id: "m-forged".into(),
                platform_status: 200
            }
        )
        .await
        .unwrap_err()
        .code(),
        "ledger/wrong-state"
    );
    assert_eq!(p.intent(&i2).await.unwrap().state, IntentState::Unknown);
    // The core-committed intent 1 is delivered by an honest sender with a higher generation.
    let again = p.claim(&i1, "good-edge", LEASE).await.unwrap();
    assert!(again.lease.generation > c1.lease.generation);
    p.mark_submitting(&again.lease).await.unwrap();
    p.mark_submitting(&c3.lease).await.unwrap();

    let peer = p
        .mark_tainted("evil-peer", "peer compromise reported", "ops")
        .await
        .unwrap();
    assert_eq!(
        peer.ids("ServiceJobAttempt@1", TaintAction::OutcomeIndeterminate),
        vec![att.attempt_id.0.clone()]
    );
    assert_eq!(
        peer.ids("IntercomTask", TaintAction::Revoked),
        vec!["task-1".to_owned()]
    );
    assert_eq!(
        p.attempt(&att.attempt_id).await.unwrap().state,
        AttemptState::Indeterminate
    );
    assert_eq!(
        p.intercom_task("task-1").await.unwrap().state,
        IntercomTaskState::Revoked
    );
    // Visible in the trail, for the intent and for the task.
    let trail = p
        .trail(&TrailKey::ExternalEventId("evt-2".into()))
        .await
        .unwrap();
    let t = trail
        .iter()
        .find(|e| e.record == "Tainted")
        .expect("taint in trail");
    assert_eq!(t.id, i2.0);
    assert!(t.fields.contains(&("principal", "evil-edge".into())));
    assert!(t.fields.contains(&("action", "OUTCOME_UNKNOWN".into())));
    let trail = p
        .trail(&TrailKey::ExternalEventId("evt-4".into()))
        .await
        .unwrap();
    assert!(
        trail
            .iter()
            .any(|e| e.record == "Tainted" && e.id == "task-1")
    );
    // Nothing left in flight for the principal: a second mark touches nothing.
    assert!(
        p.mark_tainted("evil-edge", "again", "ops")
            .await
            .unwrap()
            .records
            .iter()
            .all(|r| r.action == TaintAction::Flagged)
    );
}

/// The admission key's unique index leads with the external event id, so one index serves
/// both the admission's key and `reach trail <event>` (SQLite's migration 9, PostgreSQL's 11):
/// the table has two indexes (primary key and key), and the trail's lookup uses one.
async fn the_admission_key_serves_the_trail_lookup(db: Db) {
    let (cfg, _guard) = config(db, "adm_key");
    let (p, _clock) = open_at(cfg.clone()).await;
    let raw = Raw::of(&cfg).await;
    const TRAIL: &str = "SELECT admission_id FROM discord_event_admission WHERE external_event_id = 'evt-1' ORDER BY admitted_at, admission_id";
    let (indexes, leading, plan) = match &raw {
        Raw::Sqlite(pool) => {
            let plan: Vec<(i64, i64, i64, String)> =
                sqlx::query_as(sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {TRAIL}")))
                    .fetch_all(pool)
                    .await
                    .unwrap();
            (
                raw.text("SELECT CAST(count(*) AS TEXT) FROM pragma_index_list('discord_event_admission')")
                    .await,
                raw.text(
                    "SELECT name FROM pragma_index_info((SELECT name FROM
                        pragma_index_list('discord_event_admission') WHERE origin = 'u'))
                     WHERE seqno = 0",
                )
                .await,
                plan.into_iter().map(|r| r.3).collect::<Vec<_>>().join("; "),
            )
        }
        Raw::Postgres(pool) => {
            // The table is nearly empty, so the planner would scan it whatever indexes exist.
            let mut c = pool.acquire().await.unwrap();
            sqlx::raw_sql("SET enable_seqscan = off")
                .execute(&mut *c)
                .await
                .unwrap();
            let plan: Vec<String> =
                sqlx::query_scalar(sqlx::AssertSqlSafe(format!("EXPLAIN {TRAIL}")))
                    .fetch_all(&mut *c)
                    .await
                    .unwrap();
            drop(c);
            (
                raw.text(
                    "SELECT CAST(count(*) AS TEXT) FROM pg_indexes
                     WHERE schemaname = current_schema() AND tablename = 'discord_event_admission'",
                )
                .await,
                raw.text(
                    "SELECT CAST(a.attname AS TEXT) FROM pg_index i
                     JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
                     WHERE i.indrelid = 'discord_event_admission'::regclass
                       AND i.indisunique AND NOT i.indisprimary",
                )
                .await,
                plan.join("; "),
            )
        }
    };
    assert_eq!(indexes, "2", "primary key and admission key only");
    assert_eq!(leading, "external_event_id");
    assert!(plan.contains("INDEX") || plan.contains("Index"), "{plan}");
    assert!(
        !plan.contains("SCAN discord_event_admission") && !plan.contains("Seq Scan"),
        "{plan}"
    );
    // The key still refuses a second row for the same event, whoever presents it.
    genesis(&p).await;
    p.admit(&request(1)).await.unwrap();
    let mut other = request(1);
    other.payload_digest = Sha256Digest::of(b"changed");
    assert_eq!(
        p.admit(&other).await.unwrap_err().code(),
        "admission/payload-digest-mismatch"
    );
}

on_both!(
    database_alone_refuses_forbidden_transitions,
    intercom_task_is_its_own_record,
    rolled_back_vault_refuses_until_reconciled,
    tainted_principal_is_fenced,
    the_admission_key_serves_the_trail_lookup,
);

/// A new SQLite vault is made of 2 KiB pages (fewer bytes in each synced step's flush); a vault
/// file made before keeps its own page size and its data when opened again.
#[tokio::test]
async fn a_new_sqlite_vault_has_small_pages_and_an_old_one_keeps_its_own() {
    let (cfg, _guard) = config(Db::Sqlite, "pages");
    let (p, _clock) = open_at(cfg.clone()).await;
    let raw = Raw::of(&cfg).await;
    assert_eq!(raw.page_size().await, "2048");
    drop(p);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let old = sqlx::SqlitePool::connect_with(
        SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .page_size(4096),
    )
    .await
    .unwrap();
    sqlx::raw_sql("CREATE TABLE made_before (x)")
        .execute(&old)
        .await
        .unwrap();
    old.close().await;
    let cfg = VaultConfig::sqlite(path);
    let (_p, _clock) = open_at(cfg.clone()).await;
    let raw = Raw::of(&cfg).await;
    assert_eq!(raw.page_size().await, "4096");
    assert_eq!(
        raw.text("SELECT name FROM sqlite_master WHERE name = 'made_before'")
            .await,
        "made_before"
    );
}

/// On PostgreSQL a synced step returns only once the WAL is flushed through it: an admission's
/// flush, an intent's SUBMITTING and a synced admission each leave the server's flush position
/// at or past everything written before them, including the deferred (asynchronous) commits
/// just before. Until session 10 the flush was a bare `txid_current()`, which PostgreSQL
/// commits without flushing, and the deferred commits waited for the WAL writer (up to about
/// 0.6 s): every check below then fails unless the WAL writer happens to run inside its window
/// of about a millisecond, in each of the rounds. The vault is opened with a URL that turns
/// synchronous commits off, which the vault overrides for everything but its deferred writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_synced_steps_flush_the_wal() {
    // The operator's URL turns synchronous commits off; the vault's synced steps still flush.
    let url = pg_url();
    let sep = if url.contains('?') { '&' } else { '?' };
    let cfg = VaultConfig::postgres(
        format!("{url}{sep}options=-c%20synchronous_commit%3Doff"),
        Some(unique_schema("flush")),
    );
    let (p, _clock) = open_at(cfg.clone()).await;
    genesis(&p).await;
    let Raw::Postgres(raw) = Raw::of(&cfg).await else {
        unreachable!("a PostgreSQL config")
    };
    let written = || async {
        sqlx::query_scalar::<_, String>("SELECT pg_current_wal_insert_lsn()::text")
            .fetch_one(&raw)
            .await
            .unwrap()
    };
    let flushed_through = |lsn: String| async {
        sqlx::query_scalar::<_, bool>("SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn")
            .bind(lsn)
            .fetch_one(&raw)
            .await
            .unwrap()
    };
    for n in 0..5 {
        // The admission is written, not flushed; its flush covers it.
        let (admission, flush) = p.admit_unflushed(&request(2 * n)).await.unwrap();
        let before = written().await;
        flush.durable().await.unwrap();
        assert!(flushed_through(before).await, "admission flush, round {n}");

        // Turn and claim commit asynchronously; SUBMITTING's own commit flushes them.
        let turn = p
            .commit_turn(&admission.status().turn_id, &success(2 * n))
            .await
            .unwrap();
        let claimed = p
            .claim(&turn.intent.unwrap().0, "edge", LEASE)
            .await
            .unwrap();
        let before = written().await;
        p.mark_submitting(&claimed.lease).await.unwrap();
        assert!(flushed_through(before).await, "SUBMITTING, round {n}");

        // A settlement commits asynchronously; a synced admission flushes it.
        p.settle(&claimed.lease, &sent(2 * n)).await.unwrap();
        let before = written().await;
        p.admit(&request(2 * n + 1)).await.unwrap();
        assert!(flushed_through(before).await, "synced admission, round {n}");
    }
}
