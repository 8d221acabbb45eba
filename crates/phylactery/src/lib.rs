//! Phylactery (Memory Vault): core's durable store for Reach truth.
//!
//! It holds every record of the seed's turn chain as a row whose foreign keys are the chain's
//! committed edges:
//!
//! ```text
//! DiscordEventAdmission -> Run / Pattern revision -> PublicCorpusSnapshot + CorpusEvidenceBundle
//!  -> Context lineage + Cut receipt + EgressDecision -> ServiceJobAttempt or Intercom task/outbox
//!  -> ReachTurn + DiscordDeliveryIntent -> ReachDelivery
//! ```
//!
//! Beside the chain it keeps the operator's task packs: installed versions, their lifecycle and
//! generation, and each pack's local binding ([`taskpack`]); and the task runs driven under
//! them, each with its Room's signed fact chain, passages and records ([`room`]), and the journal of
//! their experiments and steps ([`journal`]).
//!
//! One [`Phylactery`] handle wraps either an embedded SQLite file (the default; WAL, bundled
//! libsqlite3) or a PostgreSQL pool (the scale path); the rules are written once above the
//! [`backend`] module.
//!
//! **Architecture Invariant:** nothing is handed out for sending after SUBMITTING is durable.
//! A lost outcome becomes UNKNOWN and only independent evidence settles it.
//!
//! **Architecture Invariant:** the ledger never reads the wall clock; time comes from the
//! injected [`Clock`].
//!
//! **Architecture Invariant:** no record holds a secret; the trail prints every stored field.

pub mod admission;
pub mod attempt;
pub mod backend;
pub mod clock;
pub mod error;
pub mod fault;
pub mod highwater;
pub mod ids;
pub mod intent;
pub mod intercom;
pub mod journal;
pub mod recovery;
pub mod room;
pub mod state;
pub mod taint;
pub mod taskpack;
pub mod trail;
pub mod turn;
pub mod vault;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

pub use admission::{Admission, AdmissionFlush, AdmissionRequest, AdmissionStatus, EventKey};
pub use attempt::{
    AttemptChannel, AttemptEvidence, AttemptRecord, AttemptSettlement, AttemptSpec, ContextLineage,
    CorpusSnapshotRef, EgressDecisionRef, EvidenceBundleRef, PatternRevision,
};
pub use backend::BackendKind;
pub use clock::{Clock, ManualClock, SystemClock, UnixMillis};
pub use error::{LedgerError, Result, SecurityFaultKind};
pub use fault::FaultPoint;
pub use highwater::{HighWaterMark, RollbackDetail};
pub use ids::{AdmissionId, AttemptId, DecisionId, IntentId, MAX_NONCE_LEN, RunId, TurnId};
pub use intent::{ClaimedIntent, DeliveryEvidence, DeliveryReport, IntentRecord, Lease};
pub use intercom::{IntercomTaskRecord, IntercomTaskSpec, IntercomUpdate};
pub use journal::{ExperimentRow, NewExperiment, NewStep, StepRow};
pub use recovery::RecoveryReport;
pub use room::{
    NewPassage, NewRun, PassageCost, PassageRow, PassageSettlement, PassageState, RecordKind,
    RoomRefusal, RunRow, RunState, StoredFact, StoredRecord,
};
pub use state::{
    AttemptState, DeliveryOutcome, ExperimentState, IntentState, IntercomTaskState, PackEventKind,
    StepState, TurnState,
};
pub use taint::{TaintAction, TaintReport, TaintedRecord};
pub use taskpack::{
    BindingRecord, BindingStanding, Lifecycle, NewBinding, PackEvent, PackInstall, PackRecord,
    PackState, PackStatus, ProfileDigests, TaskPackRefusal,
};
pub use trail::{TrailEntry, TrailKey};
pub use turn::{CommittedTurn, DeliveryIntentSpec, TurnCommit};
pub use vault::{OperatorReconciliation, ReconciliationKind, ReconciliationRecord, VaultStatus};

use backend::Pool;

/// Connections per pool. Small on purpose: SQLite has one writer anyway, and core's load is a
/// handful of turns in flight on a 2-core VPS.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 4;

/// How often the high-water mark is written while the vault is open (see [`highwater`]).
pub const DEFAULT_HIGH_WATER_INTERVAL: Duration = Duration::from_secs(1);

/// How long a SQLite writer waits for the write lock before failing.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(30);
/// The page size of a new SQLite vault; see [`Phylactery::open`].
const SQLITE_PAGE_SIZE: u32 = 2048;

/// Where the vault lives.
#[derive(Debug, Clone)]
pub enum StoreLocation {
    /// An embedded SQLite file, created if missing (and then treated as a fresh vault).
    Sqlite { path: PathBuf },
    /// A PostgreSQL database; `schema`, when set, is created if missing and used as the search
    /// path (tests use one schema each so they can run in parallel).
    Postgres { url: String, schema: Option<String> },
}

/// Opening configuration.
#[derive(Debug, Clone)]
pub struct VaultConfig {
    pub location: StoreLocation,
    /// How long after an effect a duplicate could still matter (Discord nonce dedup, gateway
    /// redelivery). A fresh vault refuses to serve until this has passed since its creation or an
    /// operator reconciliation is recorded.
    pub idempotency_horizon: Duration,
    pub max_connections: u32,
    /// The sidecar file holding this body's high-water mark (rollback detection, see
    /// [`highwater`]). Beside the file for SQLite; `None` disables the check.
    pub high_water: Option<PathBuf>,
    /// How often the mark is written while open (also at open, reconciliation and close).
    pub high_water_interval: Duration,
}

impl VaultConfig {
    /// An embedded vault; its high-water mark is `<path>.high-water` beside it.
    pub fn sqlite(path: impl Into<PathBuf>) -> Self {
        let path: PathBuf = path.into();
        let mut mark = path.clone().into_os_string();
        mark.push(".high-water");
        Self {
            location: StoreLocation::Sqlite { path },
            idempotency_horizon: Duration::from_secs(24 * 3600),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            high_water: Some(PathBuf::from(mark)),
            high_water_interval: DEFAULT_HIGH_WATER_INTERVAL,
        }
    }

    pub fn postgres(url: impl Into<String>, schema: Option<String>) -> Self {
        Self {
            location: StoreLocation::Postgres {
                url: url.into(),
                schema,
            },
            idempotency_horizon: Duration::from_secs(24 * 3600),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            high_water: None,
            high_water_interval: DEFAULT_HIGH_WATER_INTERVAL,
        }
    }

    /// Sets the high-water sidecar (core keeps it in its own data directory).
    pub fn with_high_water(mut self, path: impl Into<PathBuf>) -> Self {
        self.high_water = Some(path.into());
        self
    }
}

/// The handle core holds. Cheap to clone; all clones share one pool.
#[derive(Debug, Clone)]
pub struct Phylactery {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    clock: Arc<dyn Clock>,
    horizon: Duration,
    /// Cached once the vault is known to serve; the marker never goes back.
    serving: AtomicBool,
    high_water: Option<PathBuf>,
    /// Serializes sidecar writes (periodic task, close, reconciliation).
    high_water_lock: tokio::sync::Mutex<()>,
    #[cfg(feature = "fault-injection")]
    hook: std::sync::OnceLock<fault::FaultHook>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("backend", &self.pool.kind())
            .field("clock", &self.clock)
            .field("horizon", &self.horizon)
            .finish_non_exhaustive()
    }
}

impl Phylactery {
    /// Opens (creating if needed) the vault, applies migrations and reads or writes the vault
    /// marker. A vault created by this call starts in AWAITING_RECONCILIATION.
    pub async fn open(config: VaultConfig, clock: Arc<dyn Clock>) -> Result<Self> {
        let pool = match &config.location {
            StoreLocation::Sqlite { path } => {
                let opts = SqliteConnectOptions::new()
                    .filename(path)
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal)
                    // NORMAL: a commit appends to the WAL without a flush; synced commits are
                    // flushed by the group commit (`backend::GroupCommit`), which is what
                    // FULL would do, shared between concurrent commits.
                    .synchronous(SqliteSynchronous::Normal)
                    .foreign_keys(true)
                    // 2 KiB pages (a new vault's; an existing file keeps its own): every page a
                    // step dirties is a WAL frame written and flushed, and a step dirties a few
                    // (row, index, commit sequence), so half-size pages halve what a synced step
                    // waits on, while a row of up to ~2 KB (an answer part's effect) still fits
                    // its leaf page. Issue 4's bench with 1.5 KB effects: 14.3-14.6% -> 16.6-16.9%
                    // of the bare insert; 1 KiB pages overflow such rows and lose with 8 workers.
                    .page_size(SQLITE_PAGE_SIZE)
                    .busy_timeout(SQLITE_BUSY_TIMEOUT)
                    // Checkpoint every 4096 WAL pages (16 MiB) instead of 1000: a checkpoint
                    // copies pages into the database file and syncs it, and a chain writes
                    // several index pages per step, so the default ran one every few dozen
                    // chains inside a commit. Durability is the WAL's (flushed per synced
                    // commit); checkpoints only bound its size and recovery time.
                    .pragma("wal_autocheckpoint", "4096");
                // The one writer connection (see `backend::SqliteWriter`).
                let writer =
                    backend::SqliteWriter::new(sqlx::ConnectOptions::connect(&opts).await?);
                // Readers open the file the writer created and switched to WAL.
                let readers = SqlitePoolOptions::new()
                    .max_connections(config.max_connections.max(1))
                    .test_before_acquire(false)
                    .connect_with(
                        // Read-only: no journal-mode or sync pragmas (WAL is a property of the
                        // file the writer switched), and a misrouted write fails loudly.
                        SqliteConnectOptions::new()
                            .filename(path)
                            .read_only(true)
                            .busy_timeout(SQLITE_BUSY_TIMEOUT),
                    )
                    .await?;
                Pool::Sqlite {
                    readers,
                    writer: Arc::new(writer),
                    flush: Arc::new(backend::GroupCommit::new(path)),
                }
            }
            StoreLocation::Postgres { url, schema } => {
                let mut opts: PgConnectOptions = url.parse()?;
                if let Some(schema) = schema {
                    if !schema
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_')
                    {
                        return Err(LedgerError::InvalidInput(
                            "schema name must be ASCII alphanumeric or '_'",
                        ));
                    }
                    // The schema must exist before a connection can use it as search path.
                    let boot = PgPoolOptions::new()
                        .max_connections(1)
                        .connect_with(opts.clone())
                        .await?;
                    let ddl = format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\"");
                    sqlx::raw_sql(sqlx::AssertSqlSafe(ddl))
                        .execute(&boot)
                        .await?;
                    boot.close().await;
                    opts = opts.options([("search_path", schema.as_str())]);
                }
                // Synced steps and transactions rely on synchronous commits, whatever the URL,
                // the role or the server's configuration say (startup options take precedence
                // over all three); only the `writes` lane below turns them off.
                opts = opts.options([("synchronous_commit", "on")]);
                let max = config.max_connections.max(1);
                // Opened now so a wrong URL or credentials fail `open`, not the first step.
                let transactions = PgPoolOptions::new()
                    .max_connections(max)
                    // No ping before every acquire: it doubled the round trips of each
                    // chain step. A connection the server dropped fails its next statement
                    // with a typed database error (the caller's retry gets a fresh one);
                    // no statement is ever half-applied by that.
                    .test_before_acquire(false)
                    .connect_with(opts.clone())
                    .await?;
                Pool::Postgres {
                    flushes: Arc::new(backend::PgLane::new(opts.clone(), max)),
                    // `synchronous_commit = off` for deferred writes; synced ones run on
                    // `flushes`, whose commit flushes the WAL through them and every earlier
                    // asynchronous commit (`backend::Durability`).
                    writes: Arc::new(backend::PgLane::new(
                        opts.options([("synchronous_commit", "off")]),
                        max,
                    )),
                    transactions,
                }
            }
        };
        let now = clock.now();
        backend::migrate::run(&pool, now.0).await?;
        let p = Phylactery {
            inner: Arc::new(Inner {
                pool,
                clock,
                horizon: config.idempotency_horizon,
                serving: AtomicBool::new(false),
                high_water: config.high_water.clone(),
                high_water_lock: tokio::sync::Mutex::new(()),
                #[cfg(feature = "fault-injection")]
                hook: std::sync::OnceLock::new(),
            }),
        };
        p.ensure_marker().await?;
        p.check_high_water().await?;
        let _ = p.vault_status().await?;
        if p.inner.high_water.is_some() {
            p.spawn_high_water_task(config.high_water_interval);
        }
        Ok(p)
    }

    /// Writes the high-water mark periodically until the last handle is dropped or closed.
    fn spawn_high_water_task(&self, every: Duration) {
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every.max(Duration::from_millis(10)));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(inner) = weak.upgrade() else { return };
                let p = Phylactery { inner };
                if p.inner.pool.is_closed() {
                    return;
                }
                if let Err(e) = p.checkpoint_high_water().await {
                    tracing::warn!(code = e.code(), "high-water mark not written: {e}");
                }
            }
        });
    }

    /// Writes the high-water mark, then closes the pool (waits for connections to return).
    pub async fn close(&self) {
        if let Err(e) = self.checkpoint_high_water().await {
            tracing::warn!(code = e.code(), "high-water mark not written at close: {e}");
        }
        self.inner.pool.close().await;
    }

    pub fn backend(&self) -> BackendKind {
        self.inner.pool.kind()
    }

    pub fn now(&self) -> UnixMillis {
        self.inner.clock.now()
    }

    /// How many flushes of the WAL this handle has led (SQLite's group commit: one per synced
    /// commit, fewer when concurrent commits share one). `None` on PostgreSQL, whose server
    /// flushes and counts them (`pg_stat_wal`).
    pub fn wal_flushes(&self) -> Option<u64> {
        self.inner.pool.wal_flushes()
    }

    pub(crate) fn pool(&self) -> &Pool {
        &self.inner.pool
    }

    /// Installs the test hook called at every [`FaultPoint`]. Only one hook per handle.
    #[cfg(feature = "fault-injection")]
    pub fn set_fault_hook(&self, hook: fault::FaultHook) {
        let _ = self.inner.hook.set(hook);
    }

    #[inline]
    pub(crate) fn fault(&self, _point: FaultPoint) {
        #[cfg(feature = "fault-injection")]
        if let Some(h) = self.inner.hook.get() {
            h(_point);
        }
    }

    pub(crate) fn high_water_path(&self) -> Option<&std::path::Path> {
        self.inner.high_water.as_deref()
    }

    pub(crate) fn high_water_lock(&self) -> &tokio::sync::Mutex<()> {
        &self.inner.high_water_lock
    }

    pub(crate) fn horizon(&self) -> Duration {
        self.inner.horizon
    }

    pub(crate) fn is_serving_cached(&self) -> bool {
        self.inner.serving.load(Ordering::Acquire)
    }

    pub(crate) fn set_serving_cached(&self) {
        self.inner.serving.store(true, Ordering::Release);
    }
}
