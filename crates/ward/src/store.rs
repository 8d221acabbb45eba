//! Ward's own SQLite store: opening, pragmas and embedded migrations.
//!
//! Why not `sqlx::migrate!`: it needs sqlx's proc-macro crate at build time. As in the
//! Phylactery, scripts are embedded with `include_str!` and each applied version is recorded
//! with a digest of its text, so an edited, already-applied migration is refused.

use std::path::Path;
use std::time::Duration;

use reach_digest::Sha256Digest;
use sqlx::Row;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::refusal::{DeskError, Result};

/// How long a writer waits for another writer's transaction before failing.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections in the pool. Writers serialize on SQLite's lock; readers run beside them.
pub const MAX_CONNECTIONS: u32 = 4;

const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("../migrations/0001_ward.sql")),
    (2, include_str!("../migrations/0002_duty_sigil.sql")),
    (3, include_str!("../migrations/0003_step_grant.sql")),
    (4, include_str!("../migrations/0004_hil.sql")),
];

/// Opens (creating if needed) the store at `path` and applies missing migrations.
pub async fn open(path: &Path) -> Result<SqlitePool> {
    let opts = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        // NORMAL: in WAL mode every commit survives a crash of ward itself; only an OS crash or
        // power loss can roll back the last commits. That cannot let a decision authorize a
        // second attempt, because a decision never outlives the ward process that issued it:
        // `Desk::open` voids every unredeemed decision and step grant (see
        // `desk::void_previous`). Revocations and pack fences, which must never be lost, commit
        // with FULL (`desk::Desk::revoke`, `desk::Desk::fence_pack`).
        .synchronous(SqliteSynchronous::Normal)
        .foreign_keys(true)
        // Deleted rows (expired counters, purged Sigils) are overwritten, not left in free pages.
        .pragma("secure_delete", "ON")
        .busy_timeout(BUSY_TIMEOUT);
    let pool = SqlitePoolOptions::new()
        .max_connections(MAX_CONNECTIONS)
        // An embedded connection cannot be dropped by a server: the ping before every acquire
        // would only add a worker round trip to each of ward's calls.
        .test_before_acquire(false)
        .connect_with(opts)
        .await?;
    migrate(&pool).await?;
    Ok(pool)
}

async fn migrate(pool: &SqlitePool) -> Result<()> {
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS ward_migration (version INTEGER PRIMARY KEY, digest TEXT NOT NULL) STRICT",
    )
    .execute(&mut *tx)
    .await?;
    for (version, sql) in MIGRATIONS {
        let digest = Sha256Digest::of(sql.as_bytes()).to_string();
        let existing = sqlx::query("SELECT digest FROM ward_migration WHERE version = ?1")
            .bind(version)
            .fetch_optional(&mut *tx)
            .await?;
        match existing {
            Some(row) if row.try_get::<String, _>("digest")? == digest => {}
            Some(_) => return Err(DeskError::Corrupt("an applied migration was edited")),
            None => {
                sqlx::raw_sql(*sql).execute(&mut *tx).await?;
                sqlx::query("INSERT INTO ward_migration (version, digest) VALUES (?1, ?2)")
                    .bind(version)
                    .bind(&digest)
                    .execute(&mut *tx)
                    .await?;
            }
        }
    }
    tx.commit().await?;
    Ok(())
}
