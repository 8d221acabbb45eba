//! Ledger behaviour on a real database, each test on SQLite and on PostgreSQL.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use reach_digest::Sha256Digest;
use reach_phylactery::*;

async fn exact_replay_returns_committed_status(db: Db) {
    let (p, _clock, _g) = open(db, "replay").await;
    let first = p.admit(&request(1)).await.unwrap();
    assert!(matches!(first, Admission::Admitted(_)));
    let again = p.admit(&request(1)).await.unwrap();
    let Admission::Replayed(s) = &again else {
        panic!("expected replay, got {again:?}")
    };
    assert_eq!(s.turn_state, TurnState::Open);
    assert_eq!(s.admission_id, first.status().admission_id);

    let c = p.commit_turn(&s.turn_id, &success(1)).await.unwrap();
    let intent = c.intent.unwrap().0;
    let claimed = p.claim(&intent, "edge-a", LEASE).await.unwrap();
    p.mark_submitting(&claimed.lease).await.unwrap();
    p.settle(
        &claimed.lease,
        &DeliveryReport::Sent {
            message_id: "m-1".into(),
            platform_status: 200,
        },
    )
    .await
    .unwrap();
    let Admission::Replayed(s) = p.admit(&request(1)).await.unwrap() else {
        panic!()
    };
    assert_eq!(s.turn_state, TurnState::Succeeded);
    assert_eq!(s.intent, Some((intent, IntentState::KnownSent)));
    assert_eq!(s.delivery, DeliveryOutcome::KnownSent);
}

async fn changed_payload_is_a_security_fault(db: Db) {
    let (p, _clock, _g) = open(db, "payload").await;
    let first = p.admit(&request(1)).await.unwrap();
    let mut changed = request(1);
    changed.payload_digest = Sha256Digest::of("tampered");
    let err = p.admit(&changed).await.unwrap_err();
    assert_eq!(err.code(), "admission/payload-digest-mismatch");
    let faults = p
        .security_faults(&first.status().admission_id)
        .await
        .unwrap();
    assert_eq!(faults.len(), 1);
    assert_eq!(faults[0].1, "PAYLOAD_DIGEST_MISMATCH");
    // Nothing else changed: the committed admission still answers with its own digest.
    let Admission::Replayed(s) = p.admit(&request(1)).await.unwrap() else {
        panic!()
    };
    assert_eq!(s.payload_digest, request(1).payload_digest);
    assert_eq!(s.turn_state, TurnState::Open);
}

async fn other_partition_is_a_security_fault(db: Db) {
    let (p, _clock, _g) = open(db, "partition").await;
    let first = p.admit(&request(1)).await.unwrap();
    let mut other = request(1);
    other.habitat = "habitat-other".into();
    let err = p.admit(&other).await.unwrap_err();
    assert_eq!(err.code(), "admission/partition-mismatch");
    assert_eq!(
        p.security_faults(&first.status().admission_id)
            .await
            .unwrap()
            .len(),
        1
    );
    // A different event id in the other partition is its own admission: partitions isolate.
    let mut fresh = request(2);
    fresh.habitat = "habitat-other".into();
    let a = p.admit(&fresh).await.unwrap();
    assert!(matches!(a, Admission::Admitted(_)));
    assert_ne!(a.status().admission_id, first.status().admission_id);
    // Key components all matter: another application id is another admission.
    let mut app2 = request(1);
    app2.key.application_id = "app-2".into();
    assert!(matches!(
        p.admit(&app2).await.unwrap(),
        Admission::Admitted(_)
    ));
}

async fn turn_terminates_exactly_once(db: Db) {
    let (p, _clock, _g) = open(db, "turn_once").await;
    let a = p.admit(&request(1)).await.unwrap();
    let turn = a.status().turn_id.clone();
    let c = p.commit_turn(&turn, &success(1)).await.unwrap();
    let (intent, nonce) = c.intent.unwrap();
    assert!(nonce.len() <= MAX_NONCE_LEN, "{nonce}");
    for outcome in [TurnState::Refused, TurnState::Succeeded, TurnState::Failed] {
        let mut again = success(1);
        again.outcome = outcome;
        let err = p.commit_turn(&turn, &again).await.unwrap_err();
        assert_eq!(err.code(), "turn/already-terminal");
    }
    let err = p
        .commit_turn(
            &turn,
            &TurnCommit {
                outcome: TurnState::Open,
                reason: None,
                answer_digest: None,
                intent: None,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ledger/invalid-input");
    let err = p
        .commit_turn(&TurnId("turn_missing".into()), &success(1))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ledger/not-found");
    assert_eq!(p.turn_state(&turn).await.unwrap(), TurnState::Succeeded);
    assert_eq!(p.intents_of_turn(&turn).await.unwrap().len(), 1);
    let rec = p.intent(&intent).await.unwrap();
    assert_eq!(rec.state, IntentState::Pending);
    assert_eq!(rec.nonce, nonce);
    // Every terminal outcome is accepted once; NOT_ATTEMPTED when no intent.
    for (n, outcome) in [
        TurnState::Refused,
        TurnState::DependencyUnavailable,
        TurnState::Expired,
        TurnState::Failed,
        TurnState::Indeterminate,
    ]
    .into_iter()
    .enumerate()
    {
        let a = p.admit(&request(10 + n as u64)).await.unwrap();
        p.commit_turn(
            &a.status().turn_id,
            &TurnCommit {
                outcome,
                reason: Some("test/reason".into()),
                answer_digest: None,
                intent: None,
            },
        )
        .await
        .unwrap();
        let Admission::Replayed(s) = p.admit(&request(10 + n as u64)).await.unwrap() else {
            panic!()
        };
        assert_eq!(s.turn_state, outcome);
        assert_eq!(s.delivery, DeliveryOutcome::NotAttempted);
    }
}

async fn nonce_is_deterministic(db: Db) {
    let (p1, _c1, _g1) = open(db, "nonce1").await;
    let (p2, _c2, _g2) = open(db, "nonce2").await;
    let i1 = admitted_intent(&p1, 7).await;
    let i2 = admitted_intent(&p2, 7).await;
    assert_eq!(i1, i2);
    let n1 = p1.intent(&i1).await.unwrap().nonce;
    assert_eq!(n1, p2.intent(&i2).await.unwrap().nonce);
    assert!(n1.len() <= MAX_NONCE_LEN);
    assert_ne!(
        n1,
        p1.intent(&admitted_intent(&p1, 8).await)
            .await
            .unwrap()
            .nonce
    );
}

async fn concurrent_claimers_one_generation_each(db: Db) {
    let (p, clock, _g) = open(db, "concurrent").await;
    for round in 0..10u64 {
        let intent = admitted_intent(&p, round).await;
        let (a, b) = tokio::join!(
            {
                let p = p.clone();
                let i = intent.clone();
                tokio::spawn(async move { p.claim(&i, "edge-a", LEASE).await })
            },
            {
                let p = p.clone();
                let i = intent.clone();
                tokio::spawn(async move { p.claim(&i, "edge-b", LEASE).await })
            }
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        let (winner, loser) = match (a, b) {
            (Ok(w), Err(e)) | (Err(e), Ok(w)) => (w, e),
            other => panic!("exactly one claimer must win: {other:?}"),
        };
        assert_eq!(loser.code(), "ledger/lease-held");
        assert_eq!(winner.lease.generation, 1);
        // The winner stalls past its lease; the other takes generation 2.
        clock.advance(LEASE + Duration::from_secs(1));
        let other = if winner.lease.owner == "edge-a" {
            "edge-b"
        } else {
            "edge-a"
        };
        let second = p.claim(&intent, other, LEASE).await.unwrap();
        assert_eq!(second.lease.generation, 2);
        let err = p.mark_submitting(&winner.lease).await.unwrap_err();
        assert_eq!(err.code(), "ledger/stale-generation");
        let err = p
            .settle(
                &winner.lease,
                &DeliveryReport::Sent {
                    message_id: "x".into(),
                    platform_status: 200,
                },
            )
            .await
            .unwrap_err();
        assert_eq!(err.code(), "ledger/stale-generation");
        p.mark_submitting(&second.lease).await.unwrap();
        let err = p.claim(&intent, "edge-c", LEASE).await.unwrap_err();
        assert_eq!(err.code(), "ledger/not-claimable");
        p.settle(
            &second.lease,
            &DeliveryReport::Sent {
                message_id: format!("m-{round}"),
                platform_status: 200,
            },
        )
        .await
        .unwrap();
        let rec = p.intent(&intent).await.unwrap();
        assert_eq!((rec.state, rec.generation), (IntentState::KnownSent, 2));
    }
}

/// Which durable step the owner stalls after.
#[derive(Debug, Clone, Copy)]
#[allow(clippy::enum_variant_names)]
enum Stall {
    AfterAdmission,
    AfterTurnCommit,
    AfterClaim,
    AfterSubmitting,
    AfterSend,
}

/// The owner stalls past its lease at each durable step while a second worker takes over.
async fn timeout_at_every_commit_point(db: Db) {
    let stalls = [
        Stall::AfterAdmission,
        Stall::AfterTurnCommit,
        Stall::AfterClaim,
        Stall::AfterSubmitting,
        Stall::AfterSend,
    ];
    let (p, clock, _g) = open(db, "timeout").await;
    for (n, stall) in stalls.into_iter().enumerate() {
        let n = n as u64 + 100;
        let mut sends = 0u32;
        let a = p.admit(&request(n)).await.unwrap();
        let turn = a.status().turn_id.clone();
        if let Stall::AfterAdmission = stall {
            clock.advance(LEASE * 2);
            // The taker sees the committed OPEN turn on redelivery and finishes it.
            let Admission::Replayed(s) = p.admit(&request(n)).await.unwrap() else {
                panic!()
            };
            assert_eq!(s.turn_state, TurnState::Open);
            p.commit_turn(&turn, &success(n)).await.unwrap();
            // The stalled owner's late turn commit is refused.
            let err = p.commit_turn(&turn, &success(n)).await.unwrap_err();
            assert_eq!(err.code(), "turn/already-terminal");
        } else {
            p.commit_turn(&turn, &success(n)).await.unwrap();
        }
        let intent = p.intents_of_turn(&turn).await.unwrap()[0].intent_id.clone();
        if let Stall::AfterAdmission | Stall::AfterTurnCommit = stall {
            clock.advance(LEASE * 2);
            let c = p.claim(&intent, "taker", LEASE).await.unwrap();
            p.mark_submitting(&c.lease).await.unwrap();
            sends += 1;
            p.settle(
                &c.lease,
                &DeliveryReport::Sent {
                    message_id: format!("m-{n}"),
                    platform_status: 200,
                },
            )
            .await
            .unwrap();
            assert_eq!(
                p.claim(&intent, "owner", LEASE).await.unwrap_err().code(),
                "ledger/not-claimable"
            );
        } else {
            let owner = p.claim(&intent, "owner", LEASE).await.unwrap();
            if let Stall::AfterClaim = stall {
                clock.advance(LEASE + Duration::from_millis(1));
                let taker = p.claim(&intent, "taker", LEASE).await.unwrap();
                assert_eq!(taker.lease.generation, owner.lease.generation + 1);
                assert_eq!(
                    p.mark_submitting(&owner.lease).await.unwrap_err().code(),
                    "ledger/stale-generation"
                );
                p.mark_submitting(&taker.lease).await.unwrap();
                sends += 1;
                p.settle(
                    &taker.lease,
                    &DeliveryReport::Sent {
                        message_id: format!("m-{n}"),
                        platform_status: 200,
                    },
                )
                .await
                .unwrap();
                let late = DeliveryReport::Rejected {
                    platform_status: 400,
                    detail: "late".into(),
                };
                assert_eq!(
                    p.settle(&owner.lease, &late).await.unwrap_err().code(),
                    "ledger/stale-generation"
                );
            } else {
                p.mark_submitting(&owner.lease).await.unwrap();
                if let Stall::AfterSend = stall {
                    sends += 1;
                }
                clock.advance(LEASE + Duration::from_millis(1));
                // SUBMITTING is never handed out again, however long the owner stalls.
                assert_eq!(
                    p.claim(&intent, "taker", LEASE).await.unwrap_err().code(),
                    "ledger/not-claimable"
                );
                assert_eq!(p.claim_next("taker", LEASE).await.unwrap(), None);
                let r = p.recover().await.unwrap();
                assert_eq!(r.marked_unknown, vec![intent.clone()]);
                let late = DeliveryReport::Sent {
                    message_id: format!("m-{n}"),
                    platform_status: 200,
                };
                assert_eq!(
                    p.settle(&owner.lease, &late).await.unwrap_err().code(),
                    "ledger/wrong-state"
                );
                // Independent evidence settles it: found if the owner did send, else absent and a
                // successor intent carries the one send.
                if sends == 1 {
                    let next = p
                        .reconcile_delivery(
                            &intent,
                            &DeliveryEvidence::MessageFound {
                                message_id: format!("m-{n}"),
                                evidence: "history".into(),
                            },
                            "reconciler",
                        )
                        .await
                        .unwrap();
                    assert_eq!(next, None);
                } else {
                    let next = p
                        .reconcile_delivery(
                            &intent,
                            &DeliveryEvidence::ProvedAbsent {
                                evidence: "history".into(),
                            },
                            "reconciler",
                        )
                        .await
                        .unwrap()
                        .unwrap();
                    let c = p.claim(&next, "taker", LEASE).await.unwrap();
                    p.mark_submitting(&c.lease).await.unwrap();
                    sends += 1;
                    p.settle(
                        &c.lease,
                        &DeliveryReport::Sent {
                            message_id: format!("m-{n}"),
                            platform_status: 200,
                        },
                    )
                    .await
                    .unwrap();
                }
            }
        }
        assert_eq!(sends, 1, "{stall:?}");
        let Admission::Replayed(s) = p.admit(&request(n)).await.unwrap() else {
            panic!()
        };
        assert_eq!(s.delivery, DeliveryOutcome::KnownSent, "{stall:?}");
    }
}

async fn lease_must_be_live_to_submit(db: Db) {
    let (p, clock, _g) = open(db, "lease_live").await;
    let intent = admitted_intent(&p, 1).await;
    let c = p.claim(&intent, "edge", LEASE).await.unwrap();
    clock.advance(LEASE);
    assert_eq!(
        p.mark_submitting(&c.lease).await.unwrap_err().code(),
        "ledger/lease-expired"
    );
    let again = p.claim_next("edge", LEASE).await.unwrap().unwrap();
    assert_eq!(again.lease.generation, 2);
    p.mark_submitting(&again.lease).await.unwrap();
}

async fn fresh_vault_refuses_until_reconciled(db: Db) {
    let (mut cfg, _g) = config(db, "vault_loss");
    cfg.idempotency_horizon = Duration::from_secs(3600);
    let clock = ManualClock::new(T0);
    let p = Phylactery::open(cfg.clone(), Arc::new(clock.clone()))
        .await
        .unwrap();
    assert!(matches!(
        p.vault_status().await.unwrap(),
        VaultStatus::AwaitingReconciliation { .. }
    ));
    assert_eq!(
        p.admit(&request(1)).await.unwrap_err().code(),
        "vault/unreconciled"
    );
    // Reopening does not make it serve.
    p.close().await;
    let p = Phylactery::open(cfg.clone(), Arc::new(clock.clone()))
        .await
        .unwrap();
    assert_eq!(
        p.admit(&request(1)).await.unwrap_err().code(),
        "vault/unreconciled"
    );
    assert_eq!(
        p.claim_next("edge", LEASE).await.unwrap_err().code(),
        "vault/unreconciled"
    );
    let s = p
        .record_operator_reconciliation(&OperatorReconciliation {
            kind: ReconciliationKind::EffectsReconciled,
            operator: "ops".into(),
            note: "checked channel history for the horizon".into(),
        })
        .await
        .unwrap();
    assert!(matches!(s, VaultStatus::Serving { .. }));
    p.admit(&request(1)).await.unwrap();
    // The reason it serves is on record, as the live-host receipt reads it.
    let recorded = p.reconciliations().await.unwrap();
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(
        (
            recorded[0].kind.as_str(),
            recorded[0].operator.as_str(),
            recorded[0].note.as_str()
        ),
        (
            "EFFECTS_RECONCILED",
            "ops",
            "checked channel history for the horizon"
        )
    );
    assert_eq!(recorded[0].recorded_at, clock.now());

    // A second fresh vault serves by itself only once the horizon has passed since creation.
    let (mut cfg2, _g2) = config(db, "vault_horizon");
    cfg2.idempotency_horizon = Duration::from_secs(3600);
    let p2 = Phylactery::open(cfg2, Arc::new(clock.clone()))
        .await
        .unwrap();
    clock.advance(Duration::from_secs(3599));
    assert_eq!(
        p2.admit(&request(1)).await.unwrap_err().code(),
        "vault/unreconciled"
    );
    assert!(p2.reconciliations().await.unwrap().is_empty());
    clock.advance(Duration::from_secs(1));
    p2.admit(&request(1)).await.unwrap();
    let recorded = p2.reconciliations().await.unwrap();
    assert_eq!(
        recorded
            .iter()
            .map(|r| (r.kind.as_str(), r.operator.as_str()))
            .collect::<Vec<_>>(),
        [("HORIZON_ELAPSED", "reach")]
    );
}

async fn attempts_follow_what_records_prove(db: Db) {
    let (p, clock, _g) = open(db, "attempts").await;
    let a = p.admit(&request(1)).await.unwrap();
    let turn = a.status().turn_id.clone();
    let run = p
        .begin_run(
            &turn,
            &PatternRevision {
                pattern_id: "public-answer".into(),
                revision: "r1".into(),
            },
        )
        .await
        .unwrap();
    let snapshot = CorpusSnapshotRef {
        snapshot_digest: Sha256Digest::of("snap"),
        corpus_id: "reach-docs".into(),
        source_revision: "abc123".into(),
    };
    p.record_grounding(
        &run,
        &snapshot,
        &EvidenceBundleRef {
            bundle_digest: Sha256Digest::of("bundle"),
            passage_count: 3,
        },
    )
    .await
    .unwrap();
    p.record_context(
        &run,
        &ContextLineage {
            lineage_digest: Sha256Digest::of("lineage"),
            labels: "public".into(),
            cut_receipt_digest: Sha256Digest::of("cut"),
        },
    )
    .await
    .unwrap();
    let req = Sha256Digest::of("request");
    let decision = |n: u32| EgressDecisionRef {
        decision_id: DecisionId(format!("dec-{n}")),
        destination: "provider-1".into(),
        purpose: "formation".into(),
        payload_digest: req,
        expires_at: UnixMillis(T0.0 + 3_600_000),
    };
    let spec = AttemptSpec {
        channel: AttemptChannel::ServiceJob,
        destination: "provider-1".into(),
        request_digest: req,
        protocol_id: "req-1".into(),
    };
    p.record_egress_decision(&run, &decision(1)).await.unwrap();
    let a1 = p
        .persist_attempt(&run, &DecisionId("dec-1".into()), &spec)
        .await
        .unwrap();
    // No second attempt while the first is unsettled, and a decision is used once.
    p.record_egress_decision(&run, &decision(2)).await.unwrap();
    assert_eq!(
        p.persist_attempt(&run, &DecisionId("dec-2".into()), &spec)
            .await
            .unwrap_err()
            .code(),
        "attempt/unsettled-predecessor"
    );
    // Crash before SUBMITTING: recovery proves pre-submit; a new attempt needs a new decision.
    let r = p.recover().await.unwrap();
    assert_eq!(r.abandoned_attempts, vec![a1.attempt_id.clone()]);
    assert_eq!(
        p.attempt(&a1.attempt_id).await.unwrap().state,
        AttemptState::AbandonedBeforeSubmit
    );
    assert_eq!(
        p.persist_attempt(&run, &DecisionId("dec-1".into()), &spec)
            .await
            .unwrap_err()
            .code(),
        "attempt/decision-reused"
    );
    let a2 = p
        .persist_attempt(&run, &DecisionId("dec-2".into()), &spec)
        .await
        .unwrap();
    assert_eq!(a2.attempt_no, 2);
    p.mark_attempt_submitting(&a2.attempt_id).await.unwrap();
    // Crash after SUBMITTING: INDETERMINATE, no new attempt until reconciled.
    let r = p.recover().await.unwrap();
    assert_eq!(r.indeterminate_attempts, vec![a2.attempt_id.clone()]);
    p.record_egress_decision(&run, &decision(3)).await.unwrap();
    assert_eq!(
        p.persist_attempt(&run, &DecisionId("dec-3".into()), &spec)
            .await
            .unwrap_err()
            .code(),
        "attempt/unsettled-predecessor"
    );
    assert_eq!(
        p.mark_attempt_submitting(&a2.attempt_id)
            .await
            .unwrap_err()
            .code(),
        "ledger/wrong-state"
    );
    p.reconcile_attempt(
        &a2.attempt_id,
        &AttemptEvidence::Completed {
            response_digest: Sha256Digest::of("resp"),
            evidence: "provider log".into(),
        },
        "ops",
    )
    .await
    .unwrap();
    // The turn commits INDETERMINATE-free now; trail shows the whole chain.
    p.commit_turn(&turn, &success(1)).await.unwrap();
    let c = p.claim_next("edge", LEASE).await.unwrap().unwrap();
    p.mark_submitting(&c.lease).await.unwrap();
    clock.advance(Duration::from_secs(1));
    p.settle(
        &c.lease,
        &DeliveryReport::Sent {
            message_id: "m-1".into(),
            platform_status: 200,
        },
    )
    .await
    .unwrap();

    let trail = p
        .trail(&TrailKey::ExternalEventId("evt-1".into()))
        .await
        .unwrap();
    let names: Vec<&str> = trail.iter().map(|e| e.record).collect();
    assert_eq!(
        names,
        [
            "DiscordEventAdmission@1",
            "Run",
            "PublicCorpusSnapshot@1",
            "CorpusEvidenceBundle@1",
            "ContextLineage+CutReceipt",
            "EgressDecision",
            "EgressDecision",
            "EgressDecision",
            "ServiceJobAttempt@1",
            "ServiceJobAttempt@1",
            "ReachTurn@1",
            "DiscordDeliveryIntent@1",
            "ReachDelivery@1",
        ]
    );
    let delivery = trail.last().unwrap().to_string();
    assert!(
        delivery.contains("outcome=KNOWN_SENT") && delivery.contains("message_id=m-1"),
        "{delivery}"
    );
    assert!(delivery.contains("claim_generation=1"), "{delivery}");
    assert_eq!(
        p.trail(&TrailKey::TurnId(turn.clone())).await.unwrap(),
        trail
    );
    assert_eq!(
        p.trail(&TrailKey::AdmissionId(a.status().admission_id.clone()))
            .await
            .unwrap(),
        trail
    );
    assert!(
        p.trail(&TrailKey::ExternalEventId("nope".into()))
            .await
            .unwrap()
            .is_empty()
    );
}

async fn database_refuses_forbidden_transitions(db: Db) {
    // Defence in depth: even a raw write that skips the Rust checks cannot move a terminal turn
    // or hand a SUBMITTING intent back out. Exercised through the public API's only raw path:
    // a second settle (conditional update matches nothing) and the trigger via recover twice.
    let (p, clock, _g) = open(db, "db_fence").await;
    let intent = admitted_intent(&p, 1).await;
    let c = p.claim(&intent, "edge", LEASE).await.unwrap();
    p.mark_submitting(&c.lease).await.unwrap();
    p.settle(
        &c.lease,
        &DeliveryReport::Rejected {
            platform_status: 403,
            detail: "missing access".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(
        p.settle(
            &c.lease,
            &DeliveryReport::Sent {
                message_id: "m".into(),
                platform_status: 200
            }
        )
        .await
        .unwrap_err()
        .code(),
        "ledger/wrong-state"
    );
    clock.advance(LEASE * 10);
    let r = p.recover().await.unwrap();
    assert!(r.marked_unknown.is_empty());
    assert_eq!(
        p.intent(&intent).await.unwrap().state,
        IntentState::KnownRejected
    );
    assert_eq!(
        p.reconcile_delivery(
            &intent,
            &DeliveryEvidence::ProvedAbsent {
                evidence: "x".into()
            },
            "ops"
        )
        .await
        .unwrap_err()
        .code(),
        "ledger/wrong-state"
    );
}

async fn a_claim_ward_never_authorizes_ends_not_attempted(db: Db) {
    let (p, clock, _g) = open(db, "not_attempted").await;
    let intent = admitted_intent(&p, 1).await;
    let c = p.claim(&intent, "edge", LEASE).await.unwrap();
    assert_eq!(
        p.settle_not_attempted(&c.lease, "")
            .await
            .unwrap_err()
            .code(),
        "ledger/invalid-input"
    );
    // Only the current generation: a stale claim cannot end a reclaimed intent.
    clock.advance(LEASE);
    let c2 = p.claim_next("edge", LEASE).await.unwrap().unwrap();
    assert_eq!(
        p.settle_not_attempted(&c.lease, "sigil/expired")
            .await
            .unwrap_err()
            .code(),
        "ledger/stale-generation"
    );
    p.settle_not_attempted(&c2.lease, "sigil/expired")
        .await
        .unwrap();
    let rec = p.intent(&intent).await.unwrap();
    assert_eq!(rec.state, IntentState::NotAttempted);
    // Final: never claimed again, never submitted, never settled otherwise.
    clock.advance(LEASE * 10);
    assert!(p.claim_next("edge", LEASE).await.unwrap().is_none());
    assert_eq!(
        p.mark_submitting(&c2.lease).await.unwrap_err().code(),
        "ledger/wrong-state"
    );
    assert_eq!(
        p.settle_not_attempted(&c2.lease, "again")
            .await
            .unwrap_err()
            .code(),
        "ledger/wrong-state"
    );
    let r = p.recover().await.unwrap();
    assert!(r.marked_unknown.is_empty() && r.awaiting_evidence.is_empty());
    // After SUBMITTING a send may have happened: NOT_ATTEMPTED is refused.
    let other = admitted_intent(&p, 2).await;
    let c = p.claim(&other, "edge", LEASE).await.unwrap();
    p.mark_submitting(&c.lease).await.unwrap();
    assert_eq!(
        p.settle_not_attempted(&c.lease, "sigil/expired")
            .await
            .unwrap_err()
            .code(),
        "ledger/wrong-state"
    );
}

/// An admission core answers after its flush: written (and readable, so the turn can start)
/// before the flush, the same replay and fault rules after it.
async fn an_unflushed_admission_is_the_same_admission(db: Db) {
    let (p, _clock, _g) = open(db, "unflushed").await;
    let (first, flush) = p.admit_unflushed(&request(1)).await.unwrap();
    let Admission::Admitted(s) = &first else {
        panic!("expected a first admission, got {first:?}")
    };
    // Visible to the turn before the flush: the OPEN turn is there to run.
    assert_eq!(p.turn_state(&s.turn_id).await.unwrap(), TurnState::Open);
    flush.durable().await.unwrap();
    let (again, flush) = p.admit_unflushed(&request(1)).await.unwrap();
    flush.durable().await.unwrap();
    assert_eq!(
        again,
        Admission::Replayed(first.status().clone()),
        "a replay answers with the committed status"
    );
    let mut changed = request(1);
    changed.payload_digest = Sha256Digest::of(b"other");
    let err = p.admit_unflushed(&changed).await.unwrap_err();
    assert_eq!(err.code(), "admission/payload-digest-mismatch");
}

on_both!(
    an_unflushed_admission_is_the_same_admission,
    a_claim_ward_never_authorizes_ends_not_attempted,
    exact_replay_returns_committed_status,
    changed_payload_is_a_security_fault,
    other_partition_is_a_security_fault,
    turn_terminates_exactly_once,
    nonce_is_deterministic,
    concurrent_claimers_one_generation_each,
    timeout_at_every_commit_point,
    lease_must_be_live_to_submit,
    fresh_vault_refuses_until_reconciled,
    attempts_follow_what_records_prove,
    database_refuses_forbidden_transitions,
);

/// On SQLite the chain's steps flush the WAL exactly where `backend::Durability` says: the
/// admission's flush and SUBMITTING each lead one flush; the turn with its intent, the claim
/// and the settlement lead none (deferred). A step that stopped flushing, or a deferred one that
/// started, changes the count. (PostgreSQL's server counts its own flushes: `None` here, and
/// `tests/guards.rs::postgres_synced_steps_flush_the_wal` reads its flush position instead.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_flushes_at_the_synced_steps_only() {
    let (p, _clock, _g) = open(Db::Sqlite, "flushes").await;
    let flushes = || p.wal_flushes().expect("SQLite counts its flushes");
    let mut seen = flushes();
    let mut step = |name: &str, expected: u64| {
        let now = flushes();
        assert_eq!(now - seen, expected, "flushes led by {name}");
        seen = now;
    };
    let (admission, flush) = p.admit_unflushed(&request(1)).await.unwrap();
    step("an unflushed admission", 0);
    flush.durable().await.unwrap();
    step("the admission's flush", 1);
    let turn = p
        .commit_turn(&admission.status().turn_id, &success(1))
        .await
        .unwrap();
    step("the turn with its intent", 0);
    let claimed = p
        .claim(&turn.intent.unwrap().0, "edge", LEASE)
        .await
        .unwrap();
    step("the claim", 0);
    p.mark_submitting(&claimed.lease).await.unwrap();
    step("SUBMITTING", 1);
    p.settle(&claimed.lease, &sent(1)).await.unwrap();
    step("the settlement", 0);
    p.admit(&request(2)).await.unwrap();
    step("a synced admission", 1);

    let (pg, _clock, _g) = open(Db::Postgres, "flushes").await;
    assert_eq!(pg.wal_flushes(), None, "PostgreSQL's server counts its own");
}
