//! Ledger throughput: the full chain (admission + turn + intent commit + claim + submitting +
//! settle) against a bare single-row insert loop on the same database in the same run.
//!
//! The bare loop is a plain sqlx `INSERT` on its own connection (SQLite `synchronous=FULL`,
//! PostgreSQL's synchronous commit), outside the Phylactery: the storage floor, not our code.
//! With concurrent workers the chain's synced steps share WAL flushes (group commit); the bare
//! loop's commits on SQLite's single writer each pay their own.
//!
//! Each backend runs the chain two ways: with the admission flushed beside the turn's commit
//! (`admit_unflushed`, what core's admission port does: the turn starts beside the flush and
//! the edge is answered after it), and with the admission synced before the turn starts
//! (`admit`). Both end with every step committed and the admission durable.
//!
//! A plain bench binary (`harness = false`) because the figures of interest are rates and their
//! ratio, not criterion's per-iteration statistics.
//!
//! The sequential comparison also times a *bare chain* ([`bare_chain`]): the chain's five
//! commits, two of them synced, as bare inserts. Its ratio to the bare insert is about the most a
//! chain with that commit structure could reach one at a time; the chain's rate as a share of it
//! is what the ledger's own work costs. With concurrent workers it is timed on PostgreSQL only,
//! where its inserts share the server's flushes as the chain's steps do, so it bounds a chain of
//! five commits there as well (on SQLite the vault's group commit shares flushes that the bare
//! chain's inserts each pay, so it would bound nothing).
//!
//! On SQLite the vault and the bare connections share one WAL, and a connection whose commit
//! takes the WAL past its auto-checkpoint threshold checkpoints every frame in it, whoever wrote
//! them. So every timed loop ends with a checkpoint of the whole WAL inside its own time
//! ([`Bare::checkpoint`]) and starts on an empty one: each loop pays for checkpointing what it
//! wrote. Until session 11 the bare loop's first insert of each round checkpointed the chain's
//! leftover frames, which flattered the chain's ratio (with 8 workers by about 1.4 points in a
//! same-run A/B; sequentially within the noise).
//!
//! Each backend also counts the WAL flushes of a run of sequential chains: the vault's own group
//! commit on SQLite (`Phylactery::wal_flushes`), the server's WAL syncs on PostgreSQL
//! (`pg_stat_wal`); about two per chain, one per synced step. PostgreSQL read 0.02 before session
//! 10, when a synced step's flush was a `txid_current()` commit that flushes nothing.
//!
//! Each backend ends with short sequential passes that read sqlx's own statement log
//! ([`StatementTime`]): the time each statement of the chain, and a bare insert synced and not,
//! took where sqlx times it. On SQLite that is inside the connection's worker thread, from the
//! statement's first step to its last reply sent: the ledger's own SQLite work, apart from the
//! thread hand-offs around every statement and the group commit's flushes. On PostgreSQL it is
//! the round trip, server work included. The passes run after the timed loops (bigger tables)
//! and pay the log's own formatting, so compare within their line, not with the lines above.
//!
//! Targets (issue 4): chain rate >= 25% of the bare insert rate, and >= 500 chains/s on SQLite.
//! `REACH_BENCH_EVENTS` sets N (default 2000), `REACH_BENCH_EFFECT_BYTES` pads each intent's
//! effect (default none), `REACH_BENCH_WORKERS` the concurrent workers of the second comparison
//! (default 8; the same for the bare loop and the chain). PostgreSQL runs
//! when `REACH_TEST_DATABASE_URL` is set. The load average is printed before and after: other
//! builds on the machine move every figure. `REACH_BENCH_KEEP_SCHEMA` keeps the PostgreSQL schema.
#![allow(clippy::disallowed_methods)] // Test, benchmark or build-script knobs, never secrets.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use reach_digest::Sha256Digest;
use reach_phylactery::*;
use sqlx::ConnectOptions as _;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use tracing_subscriber::layer::SubscriberExt as _;

/// A bare single-row insert into the `bench_baseline` table on plain sqlx connections, used
/// directly: a pool would add its ping on release (one more round trip per insert on
/// PostgreSQL, one more worker-thread hand-off on SQLite) and flatter the chain's ratio. The
/// vault's own connections are used directly too (`backend`).
///
/// Each backend has a second set of connections that commit without a flush (SQLite
/// `synchronous=NORMAL`, PostgreSQL `synchronous_commit = off`), for [`bare_chain`].
#[derive(Clone)]
enum Bare {
    /// One connection behind a FIFO lock: concurrent workers queue on it, as writers must on
    /// SQLite (the vault's writer does the same).
    Sqlite(
        Arc<tokio::sync::Mutex<sqlx::SqliteConnection>>,
        Arc<tokio::sync::Mutex<sqlx::SqliteConnection>>,
    ),
    /// One connection per worker (worker `w` uses connection `w`), so concurrent inserts
    /// commit side by side and share WAL flushes.
    Postgres(
        Arc<Vec<tokio::sync::Mutex<sqlx::PgConnection>>>,
        Arc<Vec<tokio::sync::Mutex<sqlx::PgConnection>>>,
    ),
}

/// Whether a bare insert's commit waits for a flush.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flush {
    Synced,
    Unsynced,
}

impl Flush {
    /// The connection (or connections) for this kind of commit.
    fn pick<'a, T>(self, synced: &'a T, unsynced: &'a T) -> &'a T {
        match self {
            Flush::Synced => synced,
            Flush::Unsynced => unsynced,
        }
    }
}

impl Bare {
    async fn sqlite(path: &std::path::Path) -> Self {
        let connect = |sync| async move {
            SqliteConnectOptions::new()
                .filename(path)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(sync)
                .connect()
                .await
                .expect("bare sqlite connection")
        };
        let synced = connect(SqliteSynchronous::Full).await;
        let unsynced = connect(SqliteSynchronous::Normal).await;
        Bare::Sqlite(
            Arc::new(tokio::sync::Mutex::new(synced)),
            Arc::new(tokio::sync::Mutex::new(unsynced)),
        )
    }

    async fn postgres(url: &str, schema: &str, connections: u32) -> Self {
        let opts = url
            .parse::<sqlx::postgres::PgConnectOptions>()
            .expect("url")
            .options([("search_path", schema)]);
        let unsynced_opts = opts.clone().options([("synchronous_commit", "off")]);
        let mut synced = Vec::new();
        let mut unsynced = Vec::new();
        for _ in 0..connections.max(1) {
            let conn = opts.connect().await.expect("bare postgres connection");
            synced.push(tokio::sync::Mutex::new(conn));
            let conn = unsynced_opts
                .connect()
                .await
                .expect("bare postgres connection");
            unsynced.push(tokio::sync::Mutex::new(conn));
        }
        Bare::Postgres(Arc::new(synced), Arc::new(unsynced))
    }

    /// Inserts row `id`, synced; `worker` picks the connection on PostgreSQL.
    async fn insert(&self, worker: u64, id: i64) {
        self.insert_with(Flush::Synced, worker, id).await
    }

    async fn insert_with(&self, flush: Flush, worker: u64, id: i64) {
        const SQL: &str = "INSERT INTO bench_baseline (id, payload) VALUES ($1, $2)";
        match self {
            Bare::Sqlite(synced, unsynced) => {
                let c = flush.pick(synced, unsynced);
                let insert = sqlx::query(SQL).bind(id).bind("baseline");
                insert.execute(&mut *c.lock().await).await.map(drop)
            }
            Bare::Postgres(synced, unsynced) => {
                let conns = flush.pick(synced, unsynced);
                let c = &conns[worker as usize % conns.len()];
                let insert = sqlx::query(SQL).bind(id).bind("baseline");
                insert.execute(&mut *c.lock().await).await.map(drop)
            }
        }
        .expect("bare insert");
    }

    /// Checkpoints the whole SQLite WAL and restarts it, returning the time it took (nothing to
    /// do on PostgreSQL, whose checkpointer is a server process of its own). The WAL is shared
    /// by the vault and the bare connections, and a connection that commits past its
    /// auto-checkpoint threshold checkpoints every frame in it, whoever wrote them; so each
    /// timed loop ends with this, inside its time, and pays for checkpointing what it wrote.
    async fn checkpoint(&self) -> Duration {
        let Bare::Sqlite(c, _) = self else {
            return Duration::ZERO;
        };
        let t = Instant::now();
        let (busy, _, _): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(RESTART)")
            .fetch_one(&mut *c.lock().await)
            .await
            .expect("checkpoint");
        assert_eq!(busy, 0, "every loop has ended, so nothing holds the WAL");
        t.elapsed()
    }

    /// The server's count of WAL syncs (`pg_stat_wal`, PostgreSQL only), as reported so far: a
    /// backend reports when it exits, and an idle one within `PGSTAT_IDLE_INTERVAL` (10 s).
    async fn wal_syncs(&self) -> i64 {
        let Bare::Postgres(conns, _) = self else {
            unreachable!("pg_stat_wal is PostgreSQL's")
        };
        sqlx::query_scalar("SELECT wal_sync FROM pg_stat_wal")
            .fetch_one(&mut *conns[0].lock().await)
            .await
            .expect("pg_stat_wal")
    }

    /// Runs one statement without parameters (the schema's drop).
    async fn run(&self, sql: String) {
        match self {
            Bare::Sqlite(c, _) => sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                .execute(&mut *c.lock().await)
                .await
                .map(drop),
            Bare::Postgres(conns, _) => sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                .execute(&mut *conns[0].lock().await)
                .await
                .map(drop),
        }
        .expect("bare statement");
    }
}

async fn open(cfg: VaultConfig) -> Phylactery {
    let p = Phylactery::open(cfg, Arc::new(SystemClock))
        .await
        .expect("open vault");
    p.record_operator_reconciliation(&OperatorReconciliation {
        kind: ReconciliationKind::Genesis,
        operator: "bench".into(),
        note: "benchmark vault".into(),
    })
    .await
    .expect("genesis");
    p
}

/// Bare and chain loops alternate in this many rounds.
const ROUNDS: u64 = 10;

/// Time spent in each step of the chain, summed over the timed loop.
#[derive(Default)]
struct Steps([Duration; 5]);

const STEP_NAMES: [&str; 5] = ["admit", "turn+intent", "claim", "submitting", "settle"];

/// How the chain makes its admission durable.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Admit {
    /// `admit`: synced before the turn starts.
    Synced,
    /// `admit_unflushed`, its flush awaited beside the turn's commit: what core's admission
    /// port does (the turn starts beside the flush; the edge is answered after it).
    BesideTurn,
}

impl Admit {
    fn label(self) -> &'static str {
        match self {
            Admit::Synced => "admission synced first",
            Admit::BesideTurn => "admission flushed beside the turn, as core does",
        }
    }

    /// Keeps the event ids (and bare ids) of the two variants apart in one database.
    fn id_base(self) -> u64 {
        match self {
            Admit::Synced => 0,
            Admit::BesideTurn => 100_000_000,
        }
    }
}

async fn chain(p: &Phylactery, n: u64, admit: Admit, steps: &mut Steps) {
    let mut t = Instant::now();
    let mut lap = |i: usize| {
        let now = Instant::now();
        steps.0[i] += now - t;
        t = now;
    };
    let req = AdmissionRequest {
        key: EventKey {
            platform: "discord".into(),
            adapter_revision: "gw-v10/1".into(),
            application_id: "app-1".into(),
            event_kind: "MESSAGE_CREATE".into(),
            external_event_id: format!("bench-{n}"),
        },
        payload_digest: Sha256Digest::of(n.to_be_bytes()),
        habitat: "habitat-docs".into(),
    };
    let (a, flush) = match admit {
        Admit::Synced => (p.admit(&req).await.expect("admit"), None),
        Admit::BesideTurn => {
            let (a, flush) = p.admit_unflushed(&req).await.expect("admit");
            (a, Some(flush))
        }
    };
    lap(0);
    let turn = TurnCommit {
        outcome: TurnState::Succeeded,
        reason: None,
        answer_digest: Some(Sha256Digest::of(b"answer")),
        intent: Some(DeliveryIntentSpec {
            effect: format!(
                "create_message channel=c reply_to=bench-{n}{}",
                effect_padding()
            ),
            payload_digest: Sha256Digest::of(b"body"),
        }),
    };
    let commit = p.commit_turn(&a.status().turn_id, &turn);
    let c = match flush {
        None => commit.await,
        Some(flush) => {
            let (durable, c) = tokio::join!(flush.durable(), commit);
            durable.expect("admission flush");
            c
        }
    }
    .expect("commit turn");
    lap(1);
    let intent = c.intent.expect("intent").0;
    let claimed = p
        .claim(&intent, "bench-edge", Duration::from_secs(30))
        .await
        .expect("claim");
    lap(2);
    p.mark_submitting(&claimed.lease).await.expect("submitting");
    lap(3);
    p.settle(
        &claimed.lease,
        &DeliveryReport::Sent {
            message_id: format!("m-{n}"),
            platform_status: 200,
        },
    )
    .await
    .expect("settle");
    lap(4);
}

/// A chain's commit structure made of bare inserts, in its order: admission and SUBMITTING
/// synced, the turn, the claim and the settlement not; no rule, fence or trigger runs. (On
/// SQLite the two kinds are two connections, so each switch revalidates the page cache: a
/// little slower than one connection could be.)
async fn bare_chain(bare_db: &Bare, worker: u64, n: u64) {
    const STRUCTURE: [Flush; 5] = [
        Flush::Synced,
        Flush::Unsynced,
        Flush::Unsynced,
        Flush::Synced,
        Flush::Unsynced,
    ];
    for (k, flush) in STRUCTURE.into_iter().enumerate() {
        let id = BARE_CHAIN_IDS + (n as i64) * 5 + k as i64;
        bare_db.insert_with(flush, worker, id).await;
    }
}

/// Where the bare chain's row ids start (the bare loop's ids are below it).
const BARE_CHAIN_IDS: i64 = 1 << 40;

/// Runs [`measure_here`] in a runtime task, where core's handlers run (the `block_on` thread is
/// not a runtime worker, so every wake-up there is an extra thread hand-off).
async fn measure(label: &'static str, p: &Phylactery, bare_db: &Bare, n: u64, admit: Admit) {
    let (p, bare_db) = (p.clone(), bare_db.clone());
    tokio::spawn(async move { measure_here(label, &p, &bare_db, n, admit).await })
        .await
        .expect("sequential loop");
}

async fn measure_here(label: &str, p: &Phylactery, bare_db: &Bare, n: u64, admit: Admit) {
    let base = admit.id_base();
    // Warm both paths (statement caches, pool connections) outside the timed loops.
    for i in 0..20 {
        bare_db.insert(0, -((base + i) as i64) - 1).await;
        chain(p, u64::MAX - base - i, admit, &mut Steps::default()).await;
        bare_chain(bare_db, 0, (1 << 30) + base + i).await;
    }
    // Interleaved rounds, so load drifting on the machine (other builds) weighs on both loops
    // alike instead of on whichever ran second.
    let mut bare_time = Duration::ZERO;
    let mut chain_time = Duration::ZERO;
    let mut bare_chain_time = Duration::ZERO;
    let mut steps = Steps::default();
    let chunk = (n / ROUNDS).max(1);
    // The warm-up's frames are nobody's to pay for.
    bare_db.checkpoint().await;
    for r in 0..ROUNDS {
        let t = Instant::now();
        for i in r * chunk..(r + 1) * chunk {
            bare_db.insert(0, (base + i) as i64).await;
        }
        bare_db.checkpoint().await;
        bare_time += t.elapsed();
        let t = Instant::now();
        for i in r * chunk..(r + 1) * chunk {
            chain(p, base + i, admit, &mut steps).await;
        }
        bare_db.checkpoint().await;
        chain_time += t.elapsed();
        let t = Instant::now();
        for i in r * chunk..(r + 1) * chunk {
            bare_chain(bare_db, 0, base + i).await;
        }
        bare_db.checkpoint().await;
        bare_chain_time += t.elapsed();
    }
    let n = chunk * ROUNDS;
    let bare = n as f64 / bare_time.as_secs_f64();
    let full = n as f64 / chain_time.as_secs_f64();
    let bare_chained = n as f64 / bare_chain_time.as_secs_f64();
    println!(
        "{label:<10} sequential   N={n:<6} bare insert {bare:>9.0}/s   full chain {full:>8.0} chains/s   ratio {:>5.1}%   ({})",
        100.0 * full / bare,
        admit.label()
    );
    print_bare_chain(label, "sequential", bare_chained, bare, full);
    let per = |d: Duration| d.as_secs_f64() * 1e6 / n as f64;
    let breakdown: Vec<String> = STEP_NAMES
        .iter()
        .zip(steps.0)
        .map(|(name, d)| format!("{name} {:.0}", per(d)))
        .collect();
    println!(
        "{label:<10} per chain (µs): {}   | bare insert {:.0}",
        breakdown.join(", "),
        1e6 / bare
    );
}

/// Counts the WAL flushes of `n` sequential chains: each has two synced steps (the admission's
/// flush and SUBMITTING), so about two per chain. On SQLite the vault counts those it led; on
/// PostgreSQL (`server`) the server counts its WAL syncs, the WAL writer's among them, and `p`
/// must be a vault of its own, which this closes: every other connection is idle first, long
/// enough to have reported its syncs, and the vault's report theirs as they close. A chain
/// whose synced steps flushed nothing would read about zero, as every PostgreSQL chain did
/// before session 10 (a bare `txid_current()` commit flushes nothing).
async fn flushes_per_chain(label: &str, p: &Phylactery, n: u64, server: Option<&Bare>) {
    let count = || async {
        match server {
            Some(bare_db) => bare_db.wal_syncs().await as u64,
            None => p.wal_flushes().expect("SQLite counts its flushes"),
        }
    };
    if server.is_some() {
        tokio::time::sleep(Duration::from_secs(11)).await;
    }
    let before = count().await;
    for i in 0..n {
        let mut steps = Steps::default();
        chain(p, 200_000_000 + i, Admit::BesideTurn, &mut steps).await;
    }
    if server.is_some() {
        p.close().await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let flushes = count().await - before;
    println!(
        "{label:<10} WAL flushes per chain {:.2} ({} over {n} sequential chains, two synced steps each)",
        flushes as f64 / n as f64,
        if server.is_some() {
            "pg_stat_wal"
        } else {
            "the vault's group commit"
        }
    );
}

/// The same comparison with `workers` concurrent tasks for both loops (same N, same workers),
/// so commits of different events can share a flush on both sides alike.
async fn measure_concurrent(
    label: &str,
    p: &Phylactery,
    bare_db: &Bare,
    n: u64,
    workers: u64,
    admit: Admit,
) {
    let per_worker = (n / workers / ROUNDS).max(1);
    // On PostgreSQL the bare chain's inserts run on one connection per worker and share the
    // server's flushes as the chain's steps do, so its rate bounds a chain of five commits
    // here too; on SQLite each of its synced inserts pays its own flush on the one writer,
    // where the vault's group commit shares them, so it bounds nothing and is not run.
    let bounded = matches!(bare_db, Bare::Postgres(..));
    let mut bare_time = Duration::ZERO;
    let mut chain_time = Duration::ZERO;
    let mut bare_chain_time = Duration::ZERO;
    for r in 0..ROUNDS {
        let base = admit.id_base() + 1_000_000 + r * workers * per_worker;
        let id = move |w: u64, i: u64| base + w * per_worker + i;
        let bare_db_ = bare_db.clone();
        bare_time += timed_workers(workers, per_worker, move |w, i| {
            let bare_db = bare_db_.clone();
            async move { bare_db.insert(w, id(w, i) as i64).await }
        })
        .await
            + bare_db.checkpoint().await;
        let p = p.clone();
        chain_time += timed_workers(workers, per_worker, move |w, i| {
            let p = p.clone();
            async move { chain(&p, id(w, i), admit, &mut Steps::default()).await }
        })
        .await
            + bare_db.checkpoint().await;
        if bounded {
            let bare_db_ = bare_db.clone();
            bare_chain_time += timed_workers(workers, per_worker, move |w, i| {
                let bare_db = bare_db_.clone();
                async move { bare_chain(&bare_db, w, id(w, i)).await }
            })
            .await
                + bare_db.checkpoint().await;
        }
    }
    let total = per_worker * workers * ROUNDS;
    let bare = total as f64 / bare_time.as_secs_f64();
    let full = total as f64 / chain_time.as_secs_f64();
    println!(
        "{label:<10} {workers} workers    N={:<6} bare insert {bare:>9.0}/s   full chain {full:>8.0} chains/s   ratio {:>5.1}%   ({})",
        total,
        100.0 * full / bare,
        admit.label()
    );
    if bounded {
        let bare_chained = total as f64 / bare_chain_time.as_secs_f64();
        let mode = format!("{workers} workers");
        print_bare_chain(label, &mode, bare_chained, bare, full);
    }
}

/// Runs `workers` concurrent tasks, worker `w` awaiting `step(w, i)` for each of its
/// `per_worker` items `i` in turn, and returns the time until all of them are done.
async fn timed_workers<F, Fut>(workers: u64, per_worker: u64, step: F) -> Duration
where
    F: Fn(u64, u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let t = Instant::now();
    let tasks: Vec<_> = (0..workers)
        .map(|w| {
            let step = step.clone();
            tokio::spawn(async move {
                for i in 0..per_worker {
                    step(w, i).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("worker");
    }
    t.elapsed()
}

/// The bare chain's line: its rate, its ratio to the bare insert (about the most a chain with
/// this commit structure could reach run this way, `mode`), and the chain's rate as a share of
/// it.
fn print_bare_chain(label: &str, mode: &str, bare_chained: f64, bare: f64, full: f64) {
    println!(
        "{label:<10} {mode:<12} bare chain (2 synced + 3 unsynced inserts) {bare_chained:>8.0}/s   of bare insert {:>5.1}%   full chain of it {:>5.1}%",
        100.0 * bare_chained / bare,
        100.0 * full / bare_chained
    );
}

/// The statements of the chain and the bare insert, by a phrase of their SQL, with the name
/// printed for each; in the chain's order.
const STATEMENTS: [(&str, &str); 6] = [
    ("INTO discord_event_admission", "admit"),
    ("INTO turn_commit", "turn+intent"),
    ("SET state = 'CLAIMED'", "claim"),
    ("SET state = 'SUBMITTING'", "submitting"),
    ("INTO reach_delivery", "settle"),
    ("INTO bench_baseline", "bare insert"),
];

/// Statement times from sqlx's own statement log (`sqlx::query` events at DEBUG, field
/// `elapsed_secs`), summed per entry of [`STATEMENTS`] while `on` is set. Off, the layer
/// declines every event, so the timed comparisons above run without the log's formatting.
#[derive(Default)]
struct StatementTime {
    on: AtomicBool,
    /// Statement name -> (count, seconds).
    totals: std::sync::Mutex<BTreeMap<&'static str, (u64, f64)>>,
}

impl StatementTime {
    /// Runs `work` with the log on and returns the statement times it logged.
    async fn measure<F, Fut>(&self, work: F) -> BTreeMap<&'static str, (u64, f64)>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        self.totals.lock().expect("totals").clear();
        self.on.store(true, Ordering::Relaxed);
        work().await;
        // A worker thread logs its statement after sending the last reply.
        tokio::time::sleep(Duration::from_millis(50)).await;
        self.on.store(false, Ordering::Relaxed);
        std::mem::take(&mut *self.totals.lock().expect("totals"))
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for &'static StatementTime {
    fn register_callsite(
        &self,
        meta: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        if meta.target() == "sqlx::query" {
            tracing::subscriber::Interest::sometimes()
        } else {
            tracing::subscriber::Interest::never()
        }
    }

    fn enabled(
        &self,
        meta: &tracing::Metadata<'_>,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        meta.target() == "sqlx::query" && self.on.load(Ordering::Relaxed)
    }

    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        #[derive(Default)]
        struct Fields {
            sql: String,
            secs: Option<f64>,
        }
        impl tracing::field::Visit for Fields {
            // `summary` holds short statements whole; `db.statement` the whole of longer ones.
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                if matches!(field.name(), "summary" | "db.statement") {
                    self.sql.push_str(value);
                }
            }
            fn record_f64(&mut self, field: &tracing::field::Field, value: f64) {
                if field.name() == "elapsed_secs" {
                    self.secs = Some(value);
                }
            }
            fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let (Some(secs), Some((_, name))) = (
            fields.secs,
            STATEMENTS
                .iter()
                .find(|(phrase, _)| fields.sql.contains(phrase)),
        ) else {
            return;
        };
        let mut totals = self.totals.lock().unwrap_or_else(|p| p.into_inner());
        let entry = totals.entry(name).or_default();
        entry.0 += 1;
        entry.1 += secs;
    }
}

/// The log's layer, installed once for the whole run.
fn statement_time() -> &'static StatementTime {
    static TIME: std::sync::OnceLock<&'static StatementTime> = std::sync::OnceLock::new();
    TIME.get_or_init(|| {
        let time: &'static StatementTime = Box::leak(Box::default());
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(time))
            .expect("the bench installs the only subscriber");
        time
    })
}

/// Short sequential passes with the statement log on: `n` synced bare inserts, `n` unsynced
/// ones, then `n` chains (admission flushed beside the turn). Prints each statement's mean time
/// as sqlx measures it: the ledger's own work per step, apart from the hand-offs around it. On
/// SQLite a synced bare insert's time includes its `fsync` (its connection is
/// `synchronous=FULL`); the chain's flushes run outside its statements (the group commit).
async fn statement_times(label: &str, p: &Phylactery, bare_db: &Bare, n: u64) {
    let time = statement_time();
    let base = 300_000_000;
    let bare_synced = time
        .measure(|| async {
            for i in 0..n {
                bare_db.insert(0, (base + i) as i64).await;
            }
        })
        .await;
    let bare_unsynced = time
        .measure(|| async {
            for i in 0..n {
                bare_db
                    .insert_with(Flush::Unsynced, 0, (base + n + i) as i64)
                    .await;
            }
        })
        .await;
    let chained = time
        .measure(|| async {
            for i in 0..n {
                chain(p, base + i, Admit::BesideTurn, &mut Steps::default()).await;
            }
        })
        .await;
    bare_db.checkpoint().await;
    let us = |totals: &BTreeMap<&str, (u64, f64)>, name: &str| {
        totals
            .get(name)
            .map(|(count, secs)| secs * 1e6 / *count as f64)
    };
    let mut chain_sum = 0.0;
    let steps: Vec<String> = STATEMENTS[..5]
        .iter()
        .map(|(_, name)| match us(&chained, name) {
            Some(t) => {
                chain_sum += t;
                format!("{name} {t:.0}")
            }
            None => format!("{name} -"),
        })
        .collect();
    let (where_, synced) = match bare_db {
        Bare::Sqlite(..) => ("in SQLite's worker thread", "synced, with its fsync"),
        Bare::Postgres(..) => ("round trip to the server", "synced"),
    };
    println!(
        "{label:<10} statement time (µs, sqlx's log, {where_}): {}, chain {chain_sum:.0}   | bare insert {synced} {:.0}, unsynced {:.0}",
        steps.join(", "),
        us(&bare_synced, "bare insert").unwrap_or(f64::NAN),
        us(&bare_unsynced, "bare insert").unwrap_or(f64::NAN),
    );
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// `REACH_BENCH_EFFECT_BYTES` pads each intent's effect to about an answer's size (a Discord
/// part is up to 2,000 characters); the default is a short effect, as in every earlier figure.
fn effect_padding() -> &'static str {
    static PAD: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PAD.get_or_init(|| {
        let bytes = std::env::var("REACH_BENCH_EFFECT_BYTES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        match bytes {
            0 => String::new(),
            n => format!(" text={}", "x".repeat(n)),
        }
    })
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs it with a tiny N as a smoke test.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let n: u64 = std::env::var("REACH_BENCH_EVENTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if smoke { 20 } else { 2000 });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let workers: u64 = std::env::var("REACH_BENCH_WORKERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if smoke { 2 } else { 8 })
        .max(1);
    statement_time();
    println!("load average before: {}", load_average());
    rt.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("bench.db");
        let mut cfg = VaultConfig::sqlite(&path);
        cfg.max_connections = workers as u32;
        let p = open(cfg).await;
        let bare_db = Bare::sqlite(&path).await;
        for admit in [Admit::BesideTurn, Admit::Synced] {
            measure("sqlite", &p, &bare_db, n, admit).await;
            measure_concurrent("sqlite", &p, &bare_db, n, workers, admit).await;
        }
        flushes_per_chain("sqlite", &p, n.min(1000), None).await;
        statement_times("sqlite", &p, &bare_db, n.min(1000)).await;
        p.close().await;
        match std::env::var("REACH_TEST_DATABASE_URL") {
            Ok(url) => {
                let schema = format!("bench_{}", std::process::id());
                let mut cfg = VaultConfig::postgres(url.clone(), Some(schema.clone()));
                cfg.max_connections = workers as u32;
                let p = open(cfg).await;
                let bare_db = Bare::postgres(&url, &schema, workers as u32).await;
                for admit in [Admit::BesideTurn, Admit::Synced] {
                    measure("postgres", &p, &bare_db, n, admit).await;
                    measure_concurrent("postgres", &p, &bare_db, n, workers, admit).await;
                }
                statement_times("postgres", &p, &bare_db, n.min(1000)).await;
                p.close().await;
                let fresh = open(VaultConfig::postgres(url.clone(), Some(schema.clone()))).await;
                flushes_per_chain("postgres", &fresh, n.min(1000), Some(&bare_db)).await;
                // The schema is this run's alone; leave the database as it was found, unless
                // `REACH_BENCH_KEEP_SCHEMA` asks to keep it for a look at the server's plans.
                let keep = std::env::var_os("REACH_BENCH_KEEP_SCHEMA").is_some();
                if keep {
                    println!("postgres   schema {schema} kept");
                } else {
                    bare_db
                        .run(format!("DROP SCHEMA \"{schema}\" CASCADE"))
                        .await;
                }
            }
            Err(_) => println!("postgres   skipped: REACH_TEST_DATABASE_URL is not set"),
        }
    });
    println!("load average after: {}", load_average());
}
