//! Shared test support: open a real vault on SQLite (temp dir) or PostgreSQL (own schema).
#![allow(dead_code, unreachable_pub)]
#![allow(clippy::disallowed_methods)] // Test, benchmark or build-script knobs, never secrets.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use reach_digest::Sha256Digest;
use reach_phylactery::*;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::SqliteConnectOptions;

pub const PG_ENV: &str = "REACH_TEST_DATABASE_URL";
pub const T0: UnixMillis = UnixMillis(1_700_000_000_000);
pub const LEASE: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Db {
    Sqlite,
    Postgres,
}

/// Keeps the temp dir alive for a SQLite vault.
#[derive(Debug)]
pub struct Guard(#[allow(dead_code)] Option<tempfile::TempDir>);

/// The PostgreSQL URL, or a clear failure: PostgreSQL tests never pass silently.
pub fn pg_url() -> String {
    std::env::var(PG_ENV).unwrap_or_else(|_| {
        panic!(
            "{PG_ENV} is not set: the PostgreSQL half of the phylactery suite needs a test server \
             (see crates/phylactery/README.md for the setup commands)"
        )
    })
}

/// A schema name unique to this process and call.
pub fn unique_schema(name: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "t_{}_{}_{}_{}",
        name.replace(|c: char| !c.is_ascii_alphanumeric(), "_"),
        std::process::id(),
        nanos,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

pub fn config(db: Db, name: &str) -> (VaultConfig, Guard) {
    match db {
        Db::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            (
                VaultConfig::sqlite(dir.path().join("vault.db")),
                Guard(Some(dir)),
            )
        }
        Db::Postgres => (
            VaultConfig::postgres(pg_url(), Some(unique_schema(name))),
            Guard(None),
        ),
    }
}

/// Opens a fresh vault and records a genesis reconciliation so it serves.
pub async fn open(db: Db, name: &str) -> (Phylactery, ManualClock, Guard) {
    let (cfg, guard) = config(db, name);
    let clock = ManualClock::new(T0);
    let p = Phylactery::open(cfg, Arc::new(clock.clone()))
        .await
        .unwrap();
    genesis(&p).await;
    (p, clock, guard)
}

pub async fn genesis(p: &Phylactery) {
    p.record_operator_reconciliation(&OperatorReconciliation {
        kind: ReconciliationKind::Genesis,
        operator: "test-operator".into(),
        note: "test vault, no earlier body".into(),
    })
    .await
    .unwrap();
}

pub fn key(n: u64) -> EventKey {
    EventKey {
        platform: "discord".into(),
        adapter_revision: "gw-v10/1".into(),
        application_id: "app-1".into(),
        event_kind: "MESSAGE_CREATE".into(),
        external_event_id: format!("evt-{n}"),
    }
}

pub fn request(n: u64) -> AdmissionRequest {
    AdmissionRequest {
        key: key(n),
        payload_digest: Sha256Digest::of(format!("payload-{n}")),
        habitat: "habitat-docs".into(),
    }
}

pub fn success(n: u64) -> TurnCommit {
    TurnCommit {
        outcome: TurnState::Succeeded,
        reason: None,
        answer_digest: Some(Sha256Digest::of(format!("answer-{n}"))),
        intent: Some(DeliveryIntentSpec {
            effect: format!("create_message channel=chan-1 reply_to=evt-{n}"),
            payload_digest: Sha256Digest::of(format!("body-{n}")),
        }),
    }
}

/// The sender's report that event `n`'s message went out (message id `m-<n>`, HTTP 200).
pub fn sent(n: u64) -> DeliveryReport {
    DeliveryReport::Sent {
        message_id: format!("m-{n}"),
        platform_status: 200,
    }
}

/// Admits event `n` and commits a successful turn; returns the intent id.
pub async fn admitted_intent(p: &Phylactery, n: u64) -> IntentId {
    let a = p.admit(&request(n)).await.unwrap();
    let c = p
        .commit_turn(&a.status().turn_id, &success(n))
        .await
        .unwrap();
    c.intent.unwrap().0
}

/// Generates `sqlite` and `postgres` tests for an `async fn(Db)`.
#[macro_export]
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name($crate::common::Db::Sqlite).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name($crate::common::Db::Postgres).await
            }
        }
    )*};
}

/// One step of a random delivery run (the property tests of `machines.rs` and `parts.rs`): a
/// claimer `w` claims, submits or settles; the clock moves; recovery or reconciliation runs.
#[derive(Debug, Clone)]
pub enum Op {
    Claim(usize),
    Submit(usize),
    SettleSent(usize),
    SettleRejected(usize),
    SettleUnknown(usize),
    NotAttempted(usize),
    Advance(u64),
    Recover,
    ReconcileFound,
    ReconcileAbsent,
    /// A second terminal commit of the turn: the caller's to apply and judge.
    RecommitTurn,
}

/// The claimers of a random run: each one's last lease, and how many times each intent was
/// handed out for sending (SUBMITTING granted).
#[derive(Debug, Default)]
pub struct Claimers {
    pub leases: std::collections::HashMap<usize, Lease>,
    pub sends: std::collections::HashMap<IntentId, u32>,
}

impl Claimers {
    /// Applies `op` to the turn's `current` intent as the ledger's users would, a refusal being
    /// one possible outcome: the properties are judged on what the ledger holds afterwards.
    /// [`Op::RecommitTurn`] is left to the caller.
    pub async fn apply(
        &mut self,
        p: &Phylactery,
        clock: &ManualClock,
        current: &IntentId,
        op: &Op,
    ) {
        match *op {
            Op::Claim(w) => {
                if let Ok(c) = p.claim(current, &format!("w{w}"), LEASE).await {
                    self.leases.insert(w, c.lease);
                }
            }
            Op::Submit(w) => {
                if let Some(l) = self.leases.get(&w)
                    && p.mark_submitting(l).await.is_ok()
                {
                    *self.sends.entry(l.intent_id.clone()).or_default() += 1;
                }
            }
            Op::SettleSent(w) | Op::SettleRejected(w) | Op::SettleUnknown(w) => {
                if let Some(l) = self.leases.get(&w) {
                    let report = match op {
                        Op::SettleSent(_) => DeliveryReport::Sent {
                            message_id: "m".into(),
                            platform_status: 200,
                        },
                        Op::SettleRejected(_) => DeliveryReport::Rejected {
                            platform_status: 400,
                            detail: "bad".into(),
                        },
                        _ => DeliveryReport::Unknown {
                            detail: "timeout".into(),
                        },
                    };
                    let _ = p.settle(l, &report).await;
                }
            }
            Op::NotAttempted(w) => {
                if let Some(l) = self.leases.get(&w) {
                    let _ = p.settle_not_attempted(l, "sigil/expired").await;
                }
            }
            Op::Advance(s) => clock.advance(Duration::from_secs(s)),
            Op::Recover => {
                p.recover().await.unwrap();
            }
            Op::ReconcileFound | Op::ReconcileAbsent => {
                let evidence = match op {
                    Op::ReconcileFound => DeliveryEvidence::MessageFound {
                        message_id: "m".into(),
                        evidence: "seen".into(),
                    },
                    _ => DeliveryEvidence::ProvedAbsent {
                        evidence: "absent".into(),
                    },
                };
                let _ = p.reconcile_delivery(current, &evidence, "t").await;
            }
            Op::RecommitTurn => {}
        }
    }
}

/// A raw connection to the same database, bypassing every Rust check.
pub enum Raw {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

impl Raw {
    pub async fn of(cfg: &VaultConfig) -> Raw {
        match &cfg.location {
            StoreLocation::Sqlite { path } => Raw::Sqlite(
                sqlx::SqlitePool::connect_with(
                    SqliteConnectOptions::new()
                        .filename(path)
                        .foreign_keys(true),
                )
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
    pub async fn refused(&self, sql: &'static str) -> Option<String> {
        let r = match self {
            Raw::Sqlite(p) => sqlx::raw_sql(sql).execute(p).await.map(|_| ()),
            Raw::Postgres(p) => sqlx::raw_sql(sql).execute(p).await.map(|_| ()),
        };
        r.err().map(|e| e.to_string())
    }

    pub async fn close(self) {
        match self {
            Raw::Sqlite(p) => p.close().await,
            Raw::Postgres(p) => p.close().await,
        }
    }
}
