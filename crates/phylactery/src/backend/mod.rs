//! The only module that names a sqlx driver. Ledger logic above it speaks in `Value`s and
//! `Row`s, so every rule is written once and runs identically on SQLite and PostgreSQL.
//!
//! **Architecture Invariant:** SQL text is `&'static str` with `$N` placeholders, which both
//! SQLite and PostgreSQL accept; nothing is ever formatted into SQL.

mod group_commit;
pub(crate) mod migrate;
mod pg_lane;

pub(crate) use group_commit::GroupCommit;
pub(crate) use pg_lane::PgLane;

use sqlx::postgres::{PgPool, PgRow};
use sqlx::sqlite::{SqliteConnection, SqlitePool, SqliteRow};
use std::sync::Arc;

use sqlx::{Postgres, Row as _, Transaction};
use tokio::sync::OwnedMutexGuard;

use crate::error::{LedgerError, Result};

/// Which database family a handle talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    Sqlite,
    Postgres,
}

/// How durable a commit must be when it returns.
///
/// On SQLite every commit is appended to the WAL with `synchronous=NORMAL` under the one
/// writer; a [`Durability::Synced`] commit then waits, after releasing the writer, for a
/// [`GroupCommit`] flush of the WAL that began after it, so concurrent synced commits share one
/// `fsync`. On PostgreSQL a deferred one-statement write commits with
/// `synchronous_commit = off`, and a synced one on a connection where it is on, so its own
/// commit flushes the WAL through it and through every earlier asynchronous commit (the server
/// groups concurrent flushes); [`Pool::sync`] is such a commit with nothing else in it. A
/// synced statement that changes no row writes no WAL and so flushes nothing: it has nothing of
/// its own to make durable, and a caller that goes on to act on earlier commits anyway (a
/// replayed admission) calls [`Pool::sync`] itself.
///
/// A synced write may be visible to readers before it is durable (on SQLite; on PostgreSQL a
/// synchronous commit becomes visible after its flush). That is safe because
/// every action outside the host follows a synced write of the actor itself (admission's
/// answer to the edge, attempt and intent SUBMITTING), whose flush covers everything written
/// before it, and a replayed admission is answered only after a flush (`admit_with`).
///
/// **Architecture Invariant:** every commit is [`Durability::Synced`] unless it is listed here
/// with the reason its loss is harmless. [`Durability::Deferred`] returns without waiting for a
/// flush. On SQLite a lost deferred commit implies that every process which could have acted on
/// it died too (below). On PostgreSQL the server can crash alone, so there it rests on the
/// fences instead: the WAL is flushed in order (a synchronous commit flushes every earlier
/// asynchronous one), and every deferred commit is followed, before any byte leaves the host,
/// by a synced step that checks it — SUBMITTING updates only a CLAIMED intent at the claim's
/// generation with the decision core issued for that claim, so a lost turn or claim refuses the
/// send, and a lost settlement leaves SUBMITTING, which is never resent. A loss there costs
/// liveness (a turn OPEN until recovery), never a second message (`tests/server_crash.rs`
/// kills a real server with SIGKILL after deferred settlements and checks exactly that).
///
/// - A deferred commit is written to the WAL (the OS page cache) before it returns, so it
///   survives the death of any process, including core's (SIGKILL: the crash harness). It is
///   lost only when the host itself loses its page cache (power loss, kernel crash).
/// - SQLite's WAL is recovered as a *prefix*: frames carry cumulative checksums and recovery stops
///   at the first frame that does not match, so a later commit that survives implies every
///   earlier one survives. A synced commit (a flush of the WAL) therefore makes every deferred
///   commit before it durable too.
/// - The vault is embedded in core, and every role that holds a lease or acts on a turn reaches
///   core over a Unix socket on the same host. A host loss that drops a deferred commit kills
///   all of them, so nobody survives holding what was lost.
/// - Every step that precedes an effect outside the host is synced: admission (the edge stops
///   redelivering), attempt SUBMITTING (bytes to a provider), intent SUBMITTING (bytes to
///   Discord) and every reconciliation. Since each of them flushes the WAL, a deferred commit is
///   durable before anything leaves the host because of it.
///
/// Deferred commits, and what a host loss before the next synced commit means for each:
/// - an admission written by `admit_unflushed`: core answers the edge only after its flush, so
///   until then the edge still holds the event and redelivers it; the turn core started beside
///   the flush sends nothing before a synced SUBMITTING, which flushes the admission first;
/// - the lookup of a replayed admission: `admit_with` flushes it ([`Pool::sync`]) before
///   answering a synced replay, and always after recording a security fault, so only an
///   unflushed replay (whose caller awaits the flush) returns before it;
/// - the run, its grounding (snapshot and evidence bundle refs), its context lineage and the
///   EgressDecision refs of its attempts: lost with everything after them (prefix), so the turn
///   is OPEN again and core forms it again; nothing left the host under them, since every
///   attempt or intent SUBMITTING is synced and would have flushed them first;
/// - the terminal turn with its PENDING intent: the turn is OPEN again after restart, recovery
///   returns it in `open_turns` and core forms it again (nothing was sent: sending needs
///   SUBMITTING, which would have synced this commit first);
/// - a claim: the intent is PENDING (or CLAIMED by an older, expired generation) again, and the
///   holder of the lost generation died with the host, so no stale holder can present it;
/// - a delivery settlement (KNOWN_SENT, KNOWN_REJECTED, UNKNOWN): the intent is SUBMITTING again,
///   held by a gate that died with the host; recovery turns it UNKNOWN, which is reconciled only
///   from independent evidence (the nonce in the channel) and never resent. The loss costs a
///   reconciliation read, never a second message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Durability {
    /// On stable storage when the commit returns.
    Synced,
    /// Survives any process crash; on stable storage at the next synced commit or checkpoint.
    /// See the type's documentation for where it is allowed.
    Deferred,
}

#[derive(Debug, Clone)]
pub(crate) enum Pool {
    /// The one writer connection behind its lock, a pool of readers beside it (WAL readers
    /// never wait for the writer), and the group commit that makes synced commits durable.
    Sqlite {
        readers: SqlitePool,
        writer: Arc<SqliteWriter>,
        flush: Arc<GroupCommit>,
    },
    /// Two lanes of connections (see [`PgLane`]: no ping per statement) and a pool for
    /// multi-statement transactions. A deferred one-statement write runs on `writes`
    /// (`synchronous_commit = off`), a synced one on `flushes` (on), whose commit is its
    /// flush: one round trip. Until session 10 a synced write ran on `writes` and was followed
    /// by a `txid_current()` commit on `flushes`, which flushed nothing ([`Pool::sync`]); issue
    /// 4's bench then read a ~200 µs server-time penalty for splitting a chain's writes across
    /// two backends, which a same-run A/B with real flushes no longer shows. Reads run on
    /// `flushes`.
    Postgres {
        flushes: Arc<PgLane>,
        writes: Arc<PgLane>,
        transactions: PgPool,
    },
}

/// A bound parameter. Nulls are typed because PostgreSQL checks parameter types.
#[derive(Debug, Clone)]
pub(crate) enum Value {
    Int(Option<i64>),
    Text(Option<String>),
    Bytes(Option<Vec<u8>>),
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(Some(v))
    }
}
impl From<Option<i64>> for Value {
    fn from(v: Option<i64>) -> Self {
        Value::Int(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(Some(v.to_owned()))
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Text(Some(v))
    }
}
impl From<&String> for Value {
    fn from(v: &String) -> Self {
        Value::Text(Some(v.clone()))
    }
}
impl From<Option<String>> for Value {
    fn from(v: Option<String>) -> Self {
        Value::Text(v)
    }
}
impl From<&[u8]> for Value {
    fn from(v: &[u8]) -> Self {
        Value::Bytes(Some(v.to_vec()))
    }
}
impl From<&Vec<u8>> for Value {
    fn from(v: &Vec<u8>) -> Self {
        Value::Bytes(Some(v.clone()))
    }
}
impl From<Option<Vec<u8>>> for Value {
    fn from(v: Option<Vec<u8>>) -> Self {
        Value::Bytes(v)
    }
}
impl From<Option<&str>> for Value {
    fn from(v: Option<&str>) -> Self {
        Value::Text(v.map(str::to_owned))
    }
}

/// Builds a `[Value; N]` from heterogeneous arguments.
macro_rules! args {
    ($($v:expr),* $(,)?) => { [$($crate::backend::Value::from($v)),*] };
}
pub(crate) use args;

macro_rules! bind_all {
    ($q:expr, $args:expr) => {{
        let mut q = $q;
        for a in $args {
            q = match a {
                Value::Int(v) => q.bind(*v),
                Value::Text(v) => q.bind(v.clone()),
                Value::Bytes(v) => q.bind(v.clone()),
            };
        }
        q
    }};
}

/// A fetched row; columns are read by name with the type the caller expects.
#[derive(Debug)]
pub(crate) enum Row {
    Sqlite(SqliteRow),
    Postgres(PgRow),
}

impl Row {
    pub(crate) fn int(&self, col: &str) -> Result<i64> {
        self.opt_int(col)?
            .ok_or_else(|| LedgerError::Corrupt(format!("{col} is null")))
    }
    pub(crate) fn opt_int(&self, col: &str) -> Result<Option<i64>> {
        Ok(match self {
            Row::Sqlite(r) => r.try_get(col)?,
            Row::Postgres(r) => r.try_get(col)?,
        })
    }
    pub(crate) fn text(&self, col: &str) -> Result<String> {
        self.opt_text(col)?
            .ok_or_else(|| LedgerError::Corrupt(format!("{col} is null")))
    }
    pub(crate) fn opt_text(&self, col: &str) -> Result<Option<String>> {
        Ok(match self {
            Row::Sqlite(r) => r.try_get(col)?,
            Row::Postgres(r) => r.try_get(col)?,
        })
    }
    pub(crate) fn bytes(&self, col: &str) -> Result<Vec<u8>> {
        let v: Option<Vec<u8>> = match self {
            Row::Sqlite(r) => r.try_get(col)?,
            Row::Postgres(r) => r.try_get(col)?,
        };
        v.ok_or_else(|| LedgerError::Corrupt(format!("{col} is null")))
    }
}

/// SQLite's one writer: a dedicated connection for the vault's life behind a fair (FIFO) lock.
///
/// - One connection keeps its page cache warm between commits (two writers re-read each other's
///   pages), and the WAL file the group commit flushes stays in place while it is open.
/// - Writers of this process queue on the lock instead of on SQLite's busy handler, which
///   sleeps in growing steps of milliseconds; `busy_timeout` still covers other processes.
///   Reads never take it (WAL readers run beside the writer).
/// - The connection is used directly, not through a pool: a pool's acquire and its release
///   (a spawned task) cost more than the statement itself on the ledger's hot path.
#[derive(Debug)]
pub(crate) struct SqliteWriter(Arc<tokio::sync::Mutex<WriterConn>>);

#[derive(Debug)]
pub(crate) struct WriterConn {
    /// `None` once the vault is closed.
    conn: Option<SqliteConnection>,
    /// A transaction was begun and neither committed nor rolled back (its [`Tx`] was dropped,
    /// or its `COMMIT` failed): the next holder rolls it back before anything else.
    in_tx: bool,
}

impl SqliteWriter {
    pub(crate) fn new(conn: SqliteConnection) -> Self {
        Self(Arc::new(tokio::sync::Mutex::new(WriterConn {
            conn: Some(conn),
            in_tx: false,
        })))
    }

    /// Takes the writer, first ending a transaction its last holder abandoned.
    async fn lock(&self) -> Result<OwnedMutexGuard<WriterConn>> {
        let mut w = self.0.clone().lock_owned().await;
        if w.in_tx {
            sqlx::query("ROLLBACK").execute(w.conn()?).await?;
            w.in_tx = false;
        }
        Ok(w)
    }

    async fn close(&self) {
        let mut w = self.0.lock().await;
        if let Some(conn) = w.conn.take() {
            use sqlx::Connection as _;
            if let Err(e) = conn.close().await {
                tracing::warn!(error = %e, "closing the vault's writer connection failed");
            }
        }
    }

    fn is_closed(&self) -> bool {
        self.0.try_lock().is_ok_and(|w| w.conn.is_none())
    }
}

impl WriterConn {
    fn conn(&mut self) -> Result<&mut SqliteConnection> {
        self.conn
            .as_mut()
            .ok_or_else(|| LedgerError::from(sqlx::Error::PoolClosed))
    }
}

/// Where a write goes: on SQLite the writer and the flush to wait for when synced.
enum Chosen<'a> {
    Sqlite(&'a SqliteWriter, Option<&'a Arc<GroupCommit>>),
    /// The lane whose `synchronous_commit` the write's durability needs.
    Postgres(&'a PgLane),
}

/// An open write transaction (on SQLite, holding the writer until it ends, and the flush its
/// commit waits for when synced).
#[derive(Debug)]
pub(crate) enum Tx {
    Sqlite(OwnedMutexGuard<WriterConn>, Option<Arc<GroupCommit>>),
    Postgres(Transaction<'static, Postgres>),
}

/// Whether a statement only reads (a write with `RETURNING` starts with its verb).
fn is_read(sql: &str) -> bool {
    sql.trim_start().starts_with("SELECT")
}

impl Pool {
    pub(crate) fn kind(&self) -> BackendKind {
        match self {
            Pool::Sqlite { .. } => BackendKind::Sqlite,
            Pool::Postgres { .. } => BackendKind::Postgres,
        }
    }

    /// Where a write with the given durability goes.
    fn choose(&self, durability: Durability) -> Chosen<'_> {
        match self {
            Pool::Sqlite { writer, flush, .. } => {
                Chosen::Sqlite(writer, (durability == Durability::Synced).then_some(flush))
            }
            Pool::Postgres {
                writes, flushes, ..
            } => Chosen::Postgres(match durability {
                Durability::Synced => flushes,
                Durability::Deferred => writes,
            }),
        }
    }

    /// Flushes of the WAL led so far, where this process leads them (SQLite).
    pub(crate) fn wal_flushes(&self) -> Option<u64> {
        match self {
            Pool::Sqlite { flush, .. } => Some(flush.flushes()),
            Pool::Postgres { .. } => None,
        }
    }

    /// Returns once every commit that returned before this call is on stable storage.
    pub(crate) async fn sync(&self) -> Result<()> {
        match self {
            Pool::Sqlite { flush, .. } => flush.sync().await,
            // Under `synchronous_commit = on` PostgreSQL flushes the WAL through a commit
            // record only for a transaction that wrote WAL before it; a bare transaction id
            // writes none (`txid_current()`, used here until session 10, flushed nothing:
            // `pg_stat_wal` counted 3 WAL syncs for 2,000 of them). A transactional logical
            // message takes a transaction id and writes a WAL record without touching a table,
            // so its commit is a flush, and every earlier asynchronous commit's record lies
            // before it. One round trip.
            Pool::Postgres { flushes, .. } => {
                let mut c = flushes.acquire().await?;
                let done =
                    sqlx::query("SELECT pg_logical_emit_message(true, 'reach.vault-sync', '')")
                        .execute(c.conn())
                        .await;
                c.keep_unless_broken(&done);
                done?;
                Ok(())
            }
        }
    }

    /// Begins a synced write transaction. SQLite takes the write lock up front
    /// (`BEGIN IMMEDIATE`): a deferred transaction that later upgrades to a writer can fail with
    /// SQLITE_BUSY without waiting, which would turn ordinary contention into spurious errors.
    pub(crate) async fn begin(&self) -> Result<Tx> {
        self.begin_with(Durability::Synced).await
    }

    /// Begins a write transaction whose commit has the given [`Durability`].
    pub(crate) async fn begin_with(&self, durability: Durability) -> Result<Tx> {
        Ok(match self.choose(durability) {
            Chosen::Sqlite(writer, flush) => {
                let mut w = writer.lock().await?;
                sqlx::query("BEGIN IMMEDIATE").execute(w.conn()?).await?;
                w.in_tx = true;
                Tx::Sqlite(w, flush.cloned())
            }
            Chosen::Postgres(..) => {
                let Pool::Postgres { transactions, .. } = self else {
                    unreachable!("a PostgreSQL choice comes from a PostgreSQL pool")
                };
                Tx::Postgres(match durability {
                    Durability::Synced => transactions.begin().await?,
                    // One round trip: both statements go in one simple query.
                    Durability::Deferred => {
                        transactions
                            .begin_with("BEGIN; SET LOCAL synchronous_commit = off")
                            .await?
                    }
                })
            }
        })
    }

    /// One statement in its own implicit transaction, synced; atomic by itself.
    pub(crate) async fn execute(&self, sql: &'static str, args: &[Value]) -> Result<u64> {
        self.execute_with(Durability::Synced, sql, args).await
    }

    /// One statement in its own implicit transaction with the given [`Durability`].
    pub(crate) async fn execute_with(
        &self,
        durability: Durability,
        sql: &'static str,
        args: &[Value],
    ) -> Result<u64> {
        Ok(match self.choose(durability) {
            Chosen::Sqlite(writer, flush) => {
                let affected = {
                    let mut w = writer.lock().await?;
                    bind_all!(sqlx::query(sql), args)
                        .execute(w.conn()?)
                        .await?
                        .rows_affected()
                };
                if let Some(flush) = flush {
                    flush.sync_in_place().await?;
                }
                affected
            }
            Chosen::Postgres(lane) => {
                let mut c = lane.acquire().await?;
                let done = bind_all!(sqlx::query(sql), args).execute(c.conn()).await;
                c.keep_unless_broken(&done);
                done?.rows_affected()
            }
        })
    }

    /// One statement (a read, or a write with `RETURNING`) in its own implicit transaction,
    /// synced.
    pub(crate) async fn fetch_optional(
        &self,
        sql: &'static str,
        args: &[Value],
    ) -> Result<Option<Row>> {
        self.fetch_optional_with(Durability::Synced, sql, args)
            .await
    }

    /// As [`Pool::fetch_optional`], with the given [`Durability`] for a write.
    pub(crate) async fn fetch_optional_with(
        &self,
        durability: Durability,
        sql: &'static str,
        args: &[Value],
    ) -> Result<Option<Row>> {
        if is_read(sql) {
            return self.read_optional(sql, args).await;
        }
        Ok(match self.choose(durability) {
            Chosen::Sqlite(writer, flush) => {
                let row = {
                    let mut w = writer.lock().await?;
                    bind_all!(sqlx::query(sql), args)
                        .fetch_optional(w.conn()?)
                        .await?
                        .map(Row::Sqlite)
                };
                if let Some(flush) = flush {
                    flush.sync_in_place().await?;
                }
                row
            }
            Chosen::Postgres(lane) => lane_fetch_optional(lane, sql, args).await?,
        })
    }

    /// One read: SQLite's reader pool (never waits for the writer), PostgreSQL's `flushes` lane.
    async fn read_optional(&self, sql: &'static str, args: &[Value]) -> Result<Option<Row>> {
        Ok(match self {
            Pool::Sqlite { readers, .. } => bind_all!(sqlx::query(sql), args)
                .fetch_optional(readers)
                .await?
                .map(Row::Sqlite),
            Pool::Postgres { flushes, .. } => lane_fetch_optional(flushes, sql, args).await?,
        })
    }

    pub(crate) async fn fetch_all(&self, sql: &'static str, args: &[Value]) -> Result<Vec<Row>> {
        Ok(match self {
            Pool::Sqlite { readers, .. } => bind_all!(sqlx::query(sql), args)
                .fetch_all(readers)
                .await?
                .into_iter()
                .map(Row::Sqlite)
                .collect(),
            Pool::Postgres { flushes, .. } => {
                let mut c = flushes.acquire().await?;
                let rows = bind_all!(sqlx::query(sql), args).fetch_all(c.conn()).await;
                c.keep_unless_broken(&rows);
                rows?.into_iter().map(Row::Postgres).collect()
            }
        })
    }

    pub(crate) fn is_closed(&self) -> bool {
        match self {
            Pool::Sqlite {
                readers, writer, ..
            } => readers.is_closed() || writer.is_closed(),
            Pool::Postgres { flushes, .. } => flushes.is_closed(),
        }
    }

    pub(crate) async fn close(&self) {
        match self {
            Pool::Sqlite {
                readers, writer, ..
            } => {
                readers.close().await;
                writer.close().await;
            }
            Pool::Postgres {
                flushes,
                writes,
                transactions,
            } => {
                writes.close().await;
                flushes.close().await;
                transactions.close().await;
            }
        }
    }
}

/// One statement returning at most one row on a lane's connection, which goes back to the lane
/// unless the statement broke it.
async fn lane_fetch_optional(
    lane: &PgLane,
    sql: &'static str,
    args: &[Value],
) -> Result<Option<Row>> {
    let mut c = lane.acquire().await?;
    let row = bind_all!(sqlx::query(sql), args)
        .fetch_optional(c.conn())
        .await;
    c.keep_unless_broken(&row);
    Ok(row?.map(Row::Postgres))
}

impl Tx {
    pub(crate) async fn execute(&mut self, sql: &'static str, args: &[Value]) -> Result<u64> {
        Ok(match self {
            Tx::Sqlite(w, _) => bind_all!(sqlx::query(sql), args)
                .execute(w.conn()?)
                .await?
                .rows_affected(),
            Tx::Postgres(t) => bind_all!(sqlx::query(sql), args)
                .execute(&mut **t)
                .await?
                .rows_affected(),
        })
    }

    pub(crate) async fn fetch_optional(
        &mut self,
        sql: &'static str,
        args: &[Value],
    ) -> Result<Option<Row>> {
        Ok(match self {
            Tx::Sqlite(w, _) => bind_all!(sqlx::query(sql), args)
                .fetch_optional(w.conn()?)
                .await?
                .map(Row::Sqlite),
            Tx::Postgres(t) => bind_all!(sqlx::query(sql), args)
                .fetch_optional(&mut **t)
                .await?
                .map(Row::Postgres),
        })
    }

    pub(crate) async fn fetch_all(
        &mut self,
        sql: &'static str,
        args: &[Value],
    ) -> Result<Vec<Row>> {
        Ok(match self {
            Tx::Sqlite(w, _) => bind_all!(sqlx::query(sql), args)
                .fetch_all(w.conn()?)
                .await?
                .into_iter()
                .map(Row::Sqlite)
                .collect(),
            Tx::Postgres(t) => bind_all!(sqlx::query(sql), args)
                .fetch_all(&mut **t)
                .await?
                .into_iter()
                .map(Row::Postgres)
                .collect(),
        })
    }

    /// Runs a multi-statement script without parameters (migrations only).
    pub(crate) async fn execute_script(&mut self, sql: &'static str) -> Result<()> {
        match self {
            Tx::Sqlite(w, _) => {
                sqlx::raw_sql(sql).execute(w.conn()?).await?;
            }
            Tx::Postgres(t) => {
                sqlx::raw_sql(sql).execute(&mut **t).await?;
            }
        }
        Ok(())
    }

    pub(crate) async fn commit(self) -> Result<()> {
        match self {
            Tx::Sqlite(mut w, flush) => {
                // A failed COMMIT leaves the transaction open (`in_tx`): the next holder rolls
                // it back.
                sqlx::query("COMMIT").execute(w.conn()?).await?;
                w.in_tx = false;
                // The next writer may start once this commit is in the WAL; the flush that
                // makes it durable runs beside the writers that follow.
                drop(w);
                if let Some(flush) = flush {
                    flush.sync_in_place().await?;
                }
            }
            Tx::Postgres(t) => t.commit().await?,
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::ConnectOptions as _;
    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};

    async fn sqlite(dir: &std::path::Path) -> Pool {
        let path = dir.join("w.sqlite");
        let opts = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal);
        let writer = SqliteWriter::new(opts.connect().await.unwrap());
        let readers = SqlitePoolOptions::new()
            .connect_with(SqliteConnectOptions::new().filename(&path).read_only(true))
            .await
            .unwrap();
        Pool::Sqlite {
            readers,
            writer: Arc::new(writer),
            flush: Arc::new(GroupCommit::new(&path)),
        }
    }

    async fn count(pool: &Pool) -> i64 {
        pool.fetch_optional("SELECT count(*) AS n FROM t", &[])
            .await
            .unwrap()
            .unwrap()
            .int("n")
            .unwrap()
    }

    #[tokio::test]
    async fn a_dropped_or_failed_transaction_is_rolled_back_by_the_next_writer() {
        let dir = tempfile::tempdir().unwrap();
        let pool = sqlite(dir.path()).await;
        pool.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)", &[])
            .await
            .unwrap();

        // Dropped without commit: nothing of it stays, and the writer is usable at once.
        let mut tx = pool.begin().await.unwrap();
        tx.execute("INSERT INTO t (id) VALUES (1)", &[])
            .await
            .unwrap();
        drop(tx);
        pool.execute("INSERT INTO t (id) VALUES (2)", &[])
            .await
            .unwrap();
        assert_eq!(count(&pool).await, 1, "only the committed row is there");

        // A statement error inside a transaction: the caller drops it; the next writer starts
        // clean instead of inheriting the open transaction.
        let mut tx = pool.begin().await.unwrap();
        tx.execute("INSERT INTO t (id) VALUES (3)", &[])
            .await
            .unwrap();
        assert!(
            tx.execute("INSERT INTO t (id) VALUES (2)", &[])
                .await
                .is_err()
        );
        drop(tx);
        let mut tx = pool.begin().await.unwrap();
        tx.execute("INSERT INTO t (id) VALUES (4)", &[])
            .await
            .unwrap();
        tx.commit().await.unwrap();
        assert_eq!(count(&pool).await, 2, "row 3 went with its transaction");

        pool.close().await;
        assert!(pool.is_closed());
        assert!(
            pool.execute("INSERT INTO t (id) VALUES (5)", &[])
                .await
                .is_err()
        );
    }
}
