//! The only module that names a sqlx driver. Ledger logic above it speaks in [`Value`]s and
//! [`Row`]s, so every rule is written once and runs identically on SQLite and PostgreSQL.
//!
//! **Architecture Invariant:** SQL text is `&'static str` with `$N` placeholders, which both
//! SQLite and PostgreSQL accept; nothing is ever formatted into SQL.

pub(crate) mod migrate;

use sqlx::postgres::{PgPool, PgRow};
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{Postgres, Row as _, Sqlite, Transaction};

use crate::error::{LedgerError, Result};

/// Which database family a handle talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    Sqlite,
    Postgres,
}

#[derive(Debug, Clone)]
pub(crate) enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// A bound parameter. Nulls are typed because PostgreSQL checks parameter types.
#[derive(Debug, Clone)]
pub(crate) enum Value {
    Int(Option<i64>),
    Text(Option<String>),
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
}

/// An open write transaction.
#[derive(Debug)]
pub(crate) enum Tx {
    Sqlite(Transaction<'static, Sqlite>),
    Postgres(Transaction<'static, Postgres>),
}

impl Pool {
    pub(crate) fn kind(&self) -> BackendKind {
        match self {
            Pool::Sqlite(_) => BackendKind::Sqlite,
            Pool::Postgres(_) => BackendKind::Postgres,
        }
    }

    /// Begins a write transaction. SQLite takes the write lock up front (`BEGIN IMMEDIATE`):
    /// a deferred transaction that later upgrades to a writer can fail with SQLITE_BUSY without
    /// waiting, which would turn ordinary contention into spurious errors.
    pub(crate) async fn begin(&self) -> Result<Tx> {
        Ok(match self {
            Pool::Sqlite(p) => Tx::Sqlite(p.begin_with("BEGIN IMMEDIATE").await?),
            Pool::Postgres(p) => Tx::Postgres(p.begin().await?),
        })
    }

    /// One statement in its own implicit transaction; atomic by itself.
    pub(crate) async fn execute(&self, sql: &'static str, args: &[Value]) -> Result<u64> {
        Ok(match self {
            Pool::Sqlite(p) => bind_all!(sqlx::query(sql), args)
                .execute(p)
                .await?
                .rows_affected(),
            Pool::Postgres(p) => bind_all!(sqlx::query(sql), args)
                .execute(p)
                .await?
                .rows_affected(),
        })
    }

    pub(crate) async fn fetch_optional(
        &self,
        sql: &'static str,
        args: &[Value],
    ) -> Result<Option<Row>> {
        Ok(match self {
            Pool::Sqlite(p) => bind_all!(sqlx::query(sql), args)
                .fetch_optional(p)
                .await?
                .map(Row::Sqlite),
            Pool::Postgres(p) => bind_all!(sqlx::query(sql), args)
                .fetch_optional(p)
                .await?
                .map(Row::Postgres),
        })
    }

    pub(crate) async fn fetch_all(&self, sql: &'static str, args: &[Value]) -> Result<Vec<Row>> {
        Ok(match self {
            Pool::Sqlite(p) => bind_all!(sqlx::query(sql), args)
                .fetch_all(p)
                .await?
                .into_iter()
                .map(Row::Sqlite)
                .collect(),
            Pool::Postgres(p) => bind_all!(sqlx::query(sql), args)
                .fetch_all(p)
                .await?
                .into_iter()
                .map(Row::Postgres)
                .collect(),
        })
    }

    pub(crate) async fn close(&self) {
        match self {
            Pool::Sqlite(p) => p.close().await,
            Pool::Postgres(p) => p.close().await,
        }
    }
}

impl Tx {
    pub(crate) async fn execute(&mut self, sql: &'static str, args: &[Value]) -> Result<u64> {
        Ok(match self {
            Tx::Sqlite(t) => bind_all!(sqlx::query(sql), args)
                .execute(&mut **t)
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
            Tx::Sqlite(t) => bind_all!(sqlx::query(sql), args)
                .fetch_optional(&mut **t)
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
            Tx::Sqlite(t) => bind_all!(sqlx::query(sql), args)
                .fetch_all(&mut **t)
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
            Tx::Sqlite(t) => {
                sqlx::raw_sql(sql).execute(&mut **t).await?;
            }
            Tx::Postgres(t) => {
                sqlx::raw_sql(sql).execute(&mut **t).await?;
            }
        }
        Ok(())
    }

    pub(crate) async fn commit(self) -> Result<()> {
        match self {
            Tx::Sqlite(t) => t.commit().await?,
            Tx::Postgres(t) => t.commit().await?,
        }
        Ok(())
    }
}
