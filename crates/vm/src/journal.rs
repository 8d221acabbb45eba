//! The instance journal: every instance's lifecycle, durable in SQLite (WAL, synchronous=FULL).
//!
//! A state changes only through [`Journal::transition`], which checks the enum's transition
//! table and fences on the current state in the same UPDATE, so two actors (or a recovery
//! after a crash) cannot both apply a step. A destruction or reap confirmation is a row keyed
//! by the instance id: it can be written once, in the same transaction as the terminal state.

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use reach_clock::{Clock, UnixMillis};
use reach_digest::Sha256Digest;
use sqlx::Row;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

/// The lifecycle of one instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InstanceState {
    /// A create was accepted and journaled; nothing exists yet.
    Requested,
    /// The overlay and the instance directory exist.
    Allocated,
    /// QEMU runs (its pid is journaled).
    Booted,
    /// The guest agent answered.
    Ready,
    /// Destruction started; the instance is never used again.
    Destroying,
    /// QEMU is gone and the overlay and sockets deleted; confirmation recorded.
    Destroyed,
    /// Torn down by the broker's start-up recovery without a destroy request.
    Reaped,
}

impl InstanceState {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Requested => "requested",
            Self::Allocated => "allocated",
            Self::Booted => "booted",
            Self::Ready => "ready",
            Self::Destroying => "destroying",
            Self::Destroyed => "destroyed",
            Self::Reaped => "reaped",
        }
    }

    pub const fn is_terminal(self) -> bool {
        matches!(self, Self::Destroyed | Self::Reaped)
    }

    /// The transition table.
    pub const fn may_become(self, next: Self) -> bool {
        use InstanceState::*;
        matches!(
            (self, next),
            (Requested, Allocated)
                | (Allocated, Booted)
                | (Booted, Ready)
                | (Requested | Allocated | Booted | Ready, Destroying)
                | (Destroying, Destroyed)
                | (Requested | Allocated | Booted | Ready, Reaped)
        )
    }
}

impl FromStr for InstanceState {
    type Err = JournalError;
    fn from_str(s: &str) -> Result<Self, JournalError> {
        use InstanceState::*;
        [
            Requested, Allocated, Booted, Ready, Destroying, Destroyed, Reaped,
        ]
        .into_iter()
        .find(|st| st.as_str() == s)
        .ok_or_else(|| JournalError::Corrupt(format!("state {s:?}")))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// the journal database failed
    #[error("journal: {0}")]
    Db(#[from] sqlx::Error),
    /// the transition is not in the table
    #[error("transition {from} → {to} is not allowed")]
    IllegalTransition {
        from: &'static str,
        to: &'static str,
    },
    /// the instance is not in the state the caller expected (another actor moved it)
    #[error("instance {id} is not {expected}")]
    Stale { id: String, expected: &'static str },
    /// the instance has no record
    #[error("instance {0} has no record")]
    Unknown(String),
    /// a stored value does not parse
    #[error("journal row is corrupt: {0}")]
    Corrupt(String),
}

/// One instance's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceRecord {
    pub id: String,
    /// The broker session that created it.
    pub session: String,
    pub image_digest: Sha256Digest,
    pub state: InstanceState,
    pub pid: Option<i32>,
    pub memory_mib: u32,
    pub cpus: u32,
    pub requested_at: UnixMillis,
}

/// The recorded end of an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirmation {
    pub instance_id: String,
    /// `Destroyed` or `Reaped`.
    pub outcome: InstanceState,
    /// The session that confirmed it (differs from the creator's after a crash).
    pub session: String,
    pub process_gone: bool,
    pub overlay_deleted: bool,
    pub sockets_deleted: bool,
    /// SIGKILL was needed because QMP quit did not end QEMU in time.
    pub killed: bool,
    /// From the start of destruction to QEMU's exit, and to the confirmation.
    pub stop_ms: i64,
    pub total_ms: i64,
    pub at: UnixMillis,
    /// Confirmed by start-up recovery rather than by the destroy call itself.
    pub recovered: bool,
}

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS instances (
    id TEXT PRIMARY KEY,
    session TEXT NOT NULL,
    image_digest TEXT NOT NULL,
    state TEXT NOT NULL,
    pid INTEGER,
    memory_mib INTEGER NOT NULL,
    cpus INTEGER NOT NULL,
    requested_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS transitions (
    instance_id TEXT NOT NULL REFERENCES instances(id),
    from_state TEXT,
    to_state TEXT NOT NULL,
    session TEXT NOT NULL,
    at_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS confirmations (
    instance_id TEXT PRIMARY KEY REFERENCES instances(id),
    outcome TEXT NOT NULL,
    session TEXT NOT NULL,
    process_gone INTEGER NOT NULL,
    overlay_deleted INTEGER NOT NULL,
    sockets_deleted INTEGER NOT NULL,
    killed INTEGER NOT NULL,
    stop_ms INTEGER NOT NULL,
    total_ms INTEGER NOT NULL,
    at_ms INTEGER NOT NULL,
    recovered INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS orphans (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    session TEXT NOT NULL,
    what TEXT NOT NULL,
    pid INTEGER,
    at_ms INTEGER NOT NULL
);
"#;

/// Something reaped that had no live record (a directory or a QEMU process).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrphanRecord {
    pub session: String,
    pub what: String,
    pub pid: Option<i32>,
}

#[derive(Debug, Clone)]
pub struct Journal {
    pool: SqlitePool,
    clock: Arc<dyn Clock>,
}

impl Journal {
    pub async fn open(path: &Path, clock: Arc<dyn Clock>) -> Result<Self, JournalError> {
        let opts = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // Every step is an effect on the host (a process, a file): a lost commit would
            // repeat or forget it, so each commit is on stable storage when it returns.
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(opts)
            .await?;
        sqlx::raw_sql(SCHEMA).execute(&pool).await?;
        Ok(Self { pool, clock })
    }

    fn now(&self) -> i64 {
        self.clock.now().0
    }

    /// Journals a new instance as `Requested`.
    pub async fn request(&self, rec: &InstanceRecord) -> Result<(), JournalError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("INSERT INTO instances (id, session, image_digest, state, pid, memory_mib, cpus, requested_ms, updated_ms) VALUES (?, ?, ?, ?, NULL, ?, ?, ?, ?)")
            .bind(&rec.id)
            .bind(&rec.session)
            .bind(rec.image_digest.to_string())
            .bind(InstanceState::Requested.as_str())
            .bind(rec.memory_mib as i64)
            .bind(rec.cpus as i64)
            .bind(rec.requested_at.0)
            .bind(rec.requested_at.0)
            .execute(&mut *tx)
            .await?;
        sqlx::query("INSERT INTO transitions (instance_id, from_state, to_state, session, at_ms) VALUES (?, NULL, ?, ?, ?)")
            .bind(&rec.id)
            .bind(InstanceState::Requested.as_str())
            .bind(&rec.session)
            .bind(rec.requested_at.0)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Moves `id` from `from` to `to` (fenced on `from`); `pid` is stored when given.
    pub async fn transition(
        &self,
        id: &str,
        session: &str,
        from: InstanceState,
        to: InstanceState,
        pid: Option<i32>,
    ) -> Result<(), JournalError> {
        let mut tx = self.pool.begin().await?;
        self.transition_in(&mut tx, id, session, from, to, pid)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn transition_in(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
        id: &str,
        session: &str,
        from: InstanceState,
        to: InstanceState,
        pid: Option<i32>,
    ) -> Result<(), JournalError> {
        if !from.may_become(to) {
            return Err(JournalError::IllegalTransition {
                from: from.as_str(),
                to: to.as_str(),
            });
        }
        let now = self.now();
        let r = sqlx::query("UPDATE instances SET state = ?, pid = COALESCE(?, pid), updated_ms = ? WHERE id = ? AND state = ?")
            .bind(to.as_str())
            .bind(pid)
            .bind(now)
            .bind(id)
            .bind(from.as_str())
            .execute(&mut **tx)
            .await?;
        if r.rows_affected() != 1 {
            return Err(JournalError::Stale {
                id: id.to_owned(),
                expected: from.as_str(),
            });
        }
        sqlx::query("INSERT INTO transitions (instance_id, from_state, to_state, session, at_ms) VALUES (?, ?, ?, ?, ?)")
            .bind(id)
            .bind(from.as_str())
            .bind(to.as_str())
            .bind(session)
            .bind(now)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// Records the terminal state and its confirmation in one transaction (once per id).
    pub async fn confirm(&self, from: InstanceState, c: &Confirmation) -> Result<(), JournalError> {
        let mut tx = self.pool.begin().await?;
        self.transition_in(&mut tx, &c.instance_id, &c.session, from, c.outcome, None)
            .await?;
        sqlx::query("INSERT INTO confirmations (instance_id, outcome, session, process_gone, overlay_deleted, sockets_deleted, killed, stop_ms, total_ms, at_ms, recovered) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
            .bind(&c.instance_id)
            .bind(c.outcome.as_str())
            .bind(&c.session)
            .bind(c.process_gone)
            .bind(c.overlay_deleted)
            .bind(c.sockets_deleted)
            .bind(c.killed)
            .bind(c.stop_ms)
            .bind(c.total_ms)
            .bind(c.at.0)
            .bind(c.recovered)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn get(&self, id: &str) -> Result<InstanceRecord, JournalError> {
        let row = sqlx::query("SELECT * FROM instances WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| JournalError::Unknown(id.to_owned()))?;
        record(&row)
    }

    /// Every instance not yet destroyed or reaped.
    pub async fn live(&self) -> Result<Vec<InstanceRecord>, JournalError> {
        let rows = sqlx::query("SELECT * FROM instances WHERE state NOT IN ('destroyed', 'reaped') ORDER BY requested_ms, id")
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(record).collect()
    }

    pub async fn confirmation(&self, id: &str) -> Result<Option<Confirmation>, JournalError> {
        let Some(r) = sqlx::query("SELECT * FROM confirmations WHERE instance_id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(Confirmation {
            instance_id: r.get("instance_id"),
            outcome: r.get::<String, _>("outcome").parse()?,
            session: r.get("session"),
            process_gone: r.get("process_gone"),
            overlay_deleted: r.get("overlay_deleted"),
            sockets_deleted: r.get("sockets_deleted"),
            killed: r.get("killed"),
            stop_ms: r.get("stop_ms"),
            total_ms: r.get("total_ms"),
            at: UnixMillis(r.get("at_ms")),
            recovered: r.get("recovered"),
        }))
    }

    /// The states `id` went through, in order.
    pub async fn history(&self, id: &str) -> Result<Vec<InstanceState>, JournalError> {
        let rows =
            sqlx::query("SELECT to_state FROM transitions WHERE instance_id = ? ORDER BY rowid")
                .bind(id)
                .fetch_all(&self.pool)
                .await?;
        rows.iter()
            .map(|r| r.get::<String, _>("to_state").parse())
            .collect()
    }

    pub async fn record_orphan(&self, o: &OrphanRecord) -> Result<(), JournalError> {
        sqlx::query("INSERT INTO orphans (session, what, pid, at_ms) VALUES (?, ?, ?, ?)")
            .bind(&o.session)
            .bind(&o.what)
            .bind(o.pid)
            .bind(self.now())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn orphans(&self) -> Result<Vec<OrphanRecord>, JournalError> {
        let rows = sqlx::query("SELECT session, what, pid FROM orphans ORDER BY seq")
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .iter()
            .map(|r| OrphanRecord {
                session: r.get("session"),
                what: r.get("what"),
                pid: r.get("pid"),
            })
            .collect())
    }

    /// How many confirmations exist for `id` (the schema allows at most one).
    pub async fn confirmation_count(&self, id: &str) -> Result<i64, JournalError> {
        Ok(
            sqlx::query("SELECT COUNT(*) AS n FROM confirmations WHERE instance_id = ?")
                .bind(id)
                .fetch_one(&self.pool)
                .await?
                .get("n"),
        )
    }
}

fn record(r: &sqlx::sqlite::SqliteRow) -> Result<InstanceRecord, JournalError> {
    Ok(InstanceRecord {
        id: r.get("id"),
        session: r.get("session"),
        image_digest: r
            .get::<String, _>("image_digest")
            .parse()
            .map_err(|e: reach_digest::DigestParseError| JournalError::Corrupt(e.to_string()))?,
        state: r.get::<String, _>("state").parse()?,
        pid: r.get("pid"),
        memory_mib: r.get::<i64, _>("memory_mib") as u32,
        cpus: r.get::<i64, _>("cpus") as u32,
        requested_at: UnixMillis(r.get("requested_ms")),
    })
}

#[cfg(test)]
mod tests {
    use super::InstanceState::*;
    use super::*;

    #[test]
    fn transition_table() {
        let all = [
            Requested, Allocated, Booted, Ready, Destroying, Destroyed, Reaped,
        ];
        let allowed: Vec<(&str, &str)> = all
            .iter()
            .flat_map(|a| all.iter().map(move |b| (*a, *b)))
            .filter(|(a, b)| a.may_become(*b))
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        assert_eq!(
            allowed,
            [
                ("requested", "allocated"),
                ("requested", "destroying"),
                ("requested", "reaped"),
                ("allocated", "booted"),
                ("allocated", "destroying"),
                ("allocated", "reaped"),
                ("booted", "ready"),
                ("booted", "destroying"),
                ("booted", "reaped"),
                ("ready", "destroying"),
                ("ready", "reaped"),
                ("destroying", "destroyed"),
            ]
        );
        for s in all {
            assert_eq!(s.as_str().parse::<InstanceState>().unwrap(), s);
        }
    }

    fn rec(id: &str) -> InstanceRecord {
        InstanceRecord {
            id: id.into(),
            session: "s1".into(),
            image_digest: Sha256Digest::of(b"img"),
            state: Requested,
            pid: None,
            memory_mib: 256,
            cpus: 1,
            requested_at: UnixMillis(1),
        }
    }

    #[tokio::test]
    async fn fenced_transitions_and_one_confirmation() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(reach_clock::ManualClock::new(UnixMillis(10)));
        let j = Journal::open(&dir.path().join("j.db"), clock)
            .await
            .unwrap();
        j.request(&rec("a")).await.unwrap();
        let err = j
            .transition("a", "s1", Requested, Ready, None)
            .await
            .unwrap_err();
        assert!(
            matches!(err, JournalError::IllegalTransition { .. }),
            "{err}"
        );
        j.transition("a", "s1", Requested, Allocated, None)
            .await
            .unwrap();
        let err = j
            .transition("a", "s1", Requested, Allocated, None)
            .await
            .unwrap_err();
        assert!(matches!(err, JournalError::Stale { .. }), "{err}");
        j.transition("a", "s1", Allocated, Booted, Some(42))
            .await
            .unwrap();
        assert_eq!(j.get("a").await.unwrap().pid, Some(42));
        j.transition("a", "s1", Booted, Destroying, None)
            .await
            .unwrap();
        let c = Confirmation {
            instance_id: "a".into(),
            outcome: Destroyed,
            session: "s1".into(),
            process_gone: true,
            overlay_deleted: true,
            sockets_deleted: true,
            killed: false,
            stop_ms: 1,
            total_ms: 2,
            at: UnixMillis(10),
            recovered: false,
        };
        j.confirm(Destroying, &c).await.unwrap();
        assert!(j.confirm(Destroying, &c).await.is_err());
        assert_eq!(j.confirmation_count("a").await.unwrap(), 1);
        assert_eq!(j.confirmation("a").await.unwrap().unwrap(), c);
        assert_eq!(
            j.history("a").await.unwrap(),
            [Requested, Allocated, Booted, Destroying, Destroyed]
        );
        assert!(j.live().await.unwrap().is_empty());
        assert!(matches!(
            j.get("zz").await.unwrap_err(),
            JournalError::Unknown(_)
        ));
    }
}
