//! Crash at every commit point.
//!
//! The parent test re-executes this very test binary as a child (`REACH_CRASH_CHILD=1`) that
//! plays core and the Discord sender against one vault. In the crashing run a fault hook raises
//! SIGKILL at the chosen durable step (its n-th occurrence). The parent then restarts the child,
//! which recovers, redelivers every event and drives delivery again, and a third run checks that
//! replays answer with the committed status. The child appends to a "sends" file right after
//! SUBMITTING is durable, exactly where a real sender would transmit; across all runs each
//! admitted event must appear there exactly once.
//!
//! Unknown deliveries are settled the way the seed demands, by independent evidence: the child
//! looks for the intent's nonce in the sends file (standing in for the channel history) and
//! records MessageFound or ProvedAbsent. Proved absence opens a successor intent.
#![allow(clippy::disallowed_methods)] // Test, benchmark or build-script knobs, never secrets.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use common::*;
use reach_phylactery::*;

const CHILD_ENV: &str = "REACH_CRASH_CHILD";
const EVENTS: u64 = 3;
const HOUR_MS: i64 = 3_600_000;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("child needs {name}"))
}

fn child_config(db: &str) -> VaultConfig {
    match db.strip_prefix("pg:") {
        Some(schema) => VaultConfig::postgres(pg_url(), Some(schema.to_owned())),
        None => VaultConfig::sqlite(PathBuf::from(db)),
    }
}

fn append_send(path: &Path, nonce: &str, effect: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    writeln!(f, "{nonce} {effect}").unwrap();
    f.sync_all().unwrap();
}

async fn child_main() {
    let db = env("REACH_CRASH_DB");
    let sends = PathBuf::from(env("REACH_CRASH_SENDS"));
    let now: i64 = env("REACH_CRASH_NOW").parse().unwrap();
    let crash_at = std::env::var("REACH_CRASH_AT")
        .ok()
        .and_then(|s| FaultPoint::from_name(&s));
    let nth: u32 = std::env::var("REACH_CRASH_NTH")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);

    let clock = ManualClock::new(UnixMillis(now));
    let p = Phylactery::open(child_config(&db), Arc::new(clock.clone()))
        .await
        .unwrap();
    if matches!(
        p.vault_status().await.unwrap(),
        VaultStatus::AwaitingReconciliation { .. }
    ) {
        genesis(&p).await;
    }
    if let Some(point) = crash_at {
        let seen = Arc::new(AtomicU32::new(0));
        p.set_fault_hook(Arc::new(move |at| {
            if at == point && seen.fetch_add(1, Ordering::SeqCst) + 1 == nth {
                nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL).unwrap();
            }
        }));
    }

    p.recover().await.unwrap();
    let history = std::fs::read_to_string(&sends).unwrap_or_default();
    for intent in p.unknown_intents().await.unwrap() {
        let evidence = if history
            .lines()
            .any(|l| l.split(' ').next() == Some(intent.nonce.as_str()))
        {
            DeliveryEvidence::MessageFound {
                message_id: format!("msg-{}", intent.nonce),
                evidence: "nonce in channel history".into(),
            }
        } else {
            DeliveryEvidence::ProvedAbsent {
                evidence: "nonce absent from channel history".into(),
            }
        };
        p.reconcile_delivery(&intent.intent_id, &evidence, "crash-harness")
            .await
            .unwrap();
    }
    for n in 0..EVENTS {
        let a = p.admit(&request(n)).await.unwrap();
        if a.status().turn_state == TurnState::Open {
            p.commit_turn(&a.status().turn_id, &success(n))
                .await
                .unwrap();
        }
    }
    let owner = format!("child-{}", std::process::id());
    while let Some(c) = p.claim_next(&owner, LEASE).await.unwrap() {
        p.mark_submitting(&c.lease).await.unwrap();
        append_send(&sends, &c.nonce, &c.effect);
        p.settle(
            &c.lease,
            &DeliveryReport::Sent {
                message_id: format!("msg-{}", c.nonce),
                platform_status: 200,
            },
        )
        .await
        .unwrap();
    }
    p.close().await;
}

/// Child entry point: a no-op unless the parent started this binary in child mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_child() {
    if std::env::var(CHILD_ENV).is_ok() {
        child_main().await;
    }
}

fn run_child(
    db: &str,
    sends: &Path,
    run: i64,
    crash: Option<(FaultPoint, u32)>,
) -> std::process::ExitStatus {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .env("REACH_CRASH_DB", db)
        .env("REACH_CRASH_SENDS", sends)
        .env("REACH_CRASH_NOW", (T0.0 + run * HOUR_MS).to_string())
        .stdout(std::process::Stdio::null());
    if let Some((point, nth)) = crash {
        cmd.env("REACH_CRASH_AT", point.name())
            .env("REACH_CRASH_NTH", nth.to_string());
    }
    cmd.status().unwrap()
}

async fn crash_at_every_commit_point(db: Db) {
    let mut scenarios = 0;
    let mut runs = 0;
    for point in FaultPoint::ALL {
        for nth in [1u32, 2] {
            let dir = tempfile::tempdir().unwrap();
            let sends = dir.path().join("sends.log");
            let target = match db {
                Db::Sqlite => dir.path().join("vault.db").to_str().unwrap().to_owned(),
                Db::Postgres => format!("pg:{}", unique_schema("crash")),
            };
            let crashed = run_child(&target, &sends, 0, Some((point, nth)));
            runs += 1;
            assert_eq!(
                crashed.signal(),
                Some(9),
                "{point:?}#{nth} did not crash: {crashed:?}"
            );
            for run in 1..=2 {
                let s = run_child(&target, &sends, run, None);
                runs += 1;
                assert!(s.success(), "{point:?}#{nth} restart {run} failed: {s:?}");
            }
            scenarios += 1;

            // Exactly one send per admitted event across all runs.
            let mut per_event: BTreeMap<String, u32> = BTreeMap::new();
            for line in std::fs::read_to_string(&sends).unwrap().lines() {
                let effect = line.split_once(' ').unwrap().1.to_owned();
                *per_event.entry(effect).or_default() += 1;
            }
            assert_eq!(
                per_event.len() as u64,
                EVENTS,
                "{point:?}#{nth}: {per_event:?}"
            );
            assert!(
                per_event.values().all(|&c| c == 1),
                "{point:?}#{nth}: {per_event:?}"
            );

            // No lost turn, and replays answer with the committed status.
            let clock = ManualClock::new(UnixMillis(T0.0 + 10 * HOUR_MS));
            let p = Phylactery::open(child_config(&target), Arc::new(clock))
                .await
                .unwrap();
            for n in 0..EVENTS {
                let a = p.admit(&request(n)).await.unwrap();
                let Admission::Replayed(s) = a else {
                    panic!("{point:?}#{nth}: event {n} not committed")
                };
                assert_eq!(s.turn_state, TurnState::Succeeded, "{point:?}#{nth}");
                assert_eq!(s.delivery, DeliveryOutcome::KnownSent, "{point:?}#{nth}");
            }
            let r = p.recover().await.unwrap();
            assert!(
                r.open_turns.is_empty()
                    && r.awaiting_evidence.is_empty()
                    && r.claimable_intents.is_empty()
            );
            p.close().await;
        }
    }
    println!(
        "crash harness ({db:?}): {} crash points, {scenarios} scenarios, {runs} child runs, {EVENTS} events each, exactly one send per event",
        FaultPoint::ALL.len()
    );
    assert_eq!(scenarios, FaultPoint::ALL.len() * 2);
}

on_both!(crash_at_every_commit_point);
