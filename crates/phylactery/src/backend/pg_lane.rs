//! PostgreSQL connections for the ledger's one-statement steps, without sqlx's pool.
//!
//! sqlx's pool returns every released connection through a spawned task that first pings the
//! server (a Sync and its ReadyForQuery): one more server round trip, task hand-off and backend
//! wake-up per statement. Each chain step is one statement, so that doubled the messages the
//! server handles per step. A lane hands connections out from a plain idle list and takes them
//! back as they are, which is safe because:
//! - a lane never holds a transaction open (multi-statement transactions use the sqlx pool
//!   beside it), so a connection is idle between statements;
//! - `PgConnection` drains any answer still owed (a statement whose caller was cancelled
//!   mid-flight) before it sends the next one;
//! - a connection whose statement failed for any reason but a database refusal (an I/O or
//!   protocol error) is closed instead of returned.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};

use crate::error::Result;

/// How long an acquire waits for a free connection (sqlx's pool default).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);

/// Up to `max` connections, opened on demand and kept open.
#[derive(Debug)]
pub(crate) struct PgLane {
    opts: PgConnectOptions,
    permits: Arc<Semaphore>,
    idle: std::sync::Mutex<Vec<PgConnection>>,
    closed: AtomicBool,
}

/// A connection taken from a [`PgLane`]; returned when dropped unless [`LaneConn::discard`]ed.
pub(crate) struct LaneConn<'a> {
    lane: &'a PgLane,
    conn: Option<PgConnection>,
    _permit: OwnedSemaphorePermit,
}

impl PgLane {
    pub(crate) fn new(opts: PgConnectOptions, max: u32) -> Self {
        Self {
            opts,
            permits: Arc::new(Semaphore::new(max.max(1) as usize)),
            idle: std::sync::Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
        }
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<PgConnection>> {
        // A panic while holding this lock cannot leave the list half-changed (push/pop only).
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) async fn acquire(&self) -> Result<LaneConn<'_>> {
        // A free permit is taken without arming a timer (the common case on the hot path).
        let permit = match self.permits.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(TryAcquireError::Closed) => return Err(sqlx::Error::PoolClosed.into()),
            Err(TryAcquireError::NoPermits) => {
                tokio::time::timeout(ACQUIRE_TIMEOUT, self.permits.clone().acquire_owned())
                    .await
                    .map_err(|_| sqlx::Error::PoolTimedOut)?
                    .map_err(|_| sqlx::Error::PoolClosed)?
            }
        };
        let idle = self.idle().pop();
        let conn = match idle {
            Some(c) => c,
            None => sqlx::ConnectOptions::connect(&self.opts).await?,
        };
        Ok(LaneConn {
            lane: self,
            conn: Some(conn),
            _permit: permit,
        })
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Refuses new acquires and closes the idle connections (in-use ones close when returned).
    pub(crate) async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.permits.close();
        let idle = std::mem::take(&mut *self.idle());
        for conn in idle {
            use sqlx::Connection as _;
            if let Err(e) = conn.close().await {
                tracing::debug!(error = %e, "closing a vault connection failed");
            }
        }
    }
}

impl LaneConn<'_> {
    pub(crate) fn conn(&mut self) -> &mut PgConnection {
        self.conn
            .as_mut()
            .expect("a lane connection is present until dropped")
    }

    /// Keeps the connection unless `result` says it may be broken: an error outside the
    /// database (I/O, protocol), or a server error of class 08 (connection exception) or 57
    /// (operator intervention: the backend was terminated or the server is shutting down). Such
    /// a connection is dropped, and the lane opens a fresh one when next needed.
    pub(crate) fn keep_unless_broken<T>(&mut self, result: &std::result::Result<T, sqlx::Error>) {
        let broken = match result {
            Ok(_) => false,
            Err(sqlx::Error::Database(e)) => e
                .code()
                .is_some_and(|c| c.starts_with("08") || c.starts_with("57")),
            Err(_) => true,
        };
        if broken {
            self.conn = None;
        }
    }
}

impl Drop for LaneConn<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take()
            && !self.lane.is_closed()
        {
            self.lane.idle().push(conn);
        }
    }
}
