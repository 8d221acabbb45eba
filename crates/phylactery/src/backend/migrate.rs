//! A small versioned migration runner for both dialects.
//!
//! Why not `sqlx::migrate!`: it needs sqlx's proc-macro crate at build time; the scripts here are
//! embedded with `include_str!` instead, and the runner records each version with a digest of its
//! text so an edited, already-applied migration is refused rather than silently diverging.

use reach_digest::Sha256Digest;

use super::{Durability, Pool, Tx, args};
use crate::error::{LedgerError, Result};

/// One embedded migration.
#[derive(Debug)]
pub(crate) struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

pub(crate) const SQLITE: &[Migration] = &[
    Migration {
        version: 1,
        name: "ledger",
        sql: include_str!("../../migrations/sqlite/0001_ledger.sql"),
    },
    Migration {
        version: 2,
        name: "outbox_guards",
        sql: include_str!("../../migrations/sqlite/0002_outbox_guards.sql"),
    },
    Migration {
        version: 3,
        name: "chain_statements",
        sql: include_str!("../../migrations/sqlite/0003_chain_statements.sql"),
    },
    Migration {
        version: 4,
        name: "not_attempted",
        sql: include_str!("../../migrations/sqlite/0004_not_attempted.sql"),
    },
    Migration {
        version: 5,
        name: "claim_order",
        sql: include_str!("../../migrations/sqlite/0005_claim_order.sql"),
    },
    Migration {
        version: 6,
        name: "delivery_parts",
        sql: include_str!("../../migrations/sqlite/0006_delivery_parts.sql"),
    },
    Migration {
        version: 7,
        name: "part_claim_order",
        sql: include_str!("../../migrations/sqlite/0007_part_claim_order.sql"),
    },
    Migration {
        version: 8,
        name: "lean_intent_indexes",
        sql: include_str!("../../migrations/sqlite/0008_lean_intent_indexes.sql"),
    },
    Migration {
        version: 9,
        name: "admission_key_first",
        sql: include_str!("../../migrations/sqlite/0009_admission_key_first.sql"),
    },
    Migration {
        version: 10,
        name: "task_packs",
        sql: include_str!("../../migrations/sqlite/0010_task_packs.sql"),
    },
    Migration {
        version: 11,
        name: "task_runs",
        sql: include_str!("../../migrations/sqlite/0011_task_runs.sql"),
    },
    Migration {
        version: 12,
        name: "run_journal",
        sql: include_str!("../../migrations/sqlite/0012_run_journal.sql"),
    },
    Migration {
        version: 13,
        name: "run_resume",
        sql: include_str!("../../migrations/sqlite/0013_run_resume.sql"),
    },
    Migration {
        version: 14,
        name: "passage_usage",
        sql: include_str!("../../migrations/sqlite/0014_passage_usage.sql"),
    },
    Migration {
        version: 15,
        name: "granted_withdrawn",
        sql: include_str!("../../migrations/sqlite/0015_granted_withdrawn.sql"),
    },
];

pub(crate) const POSTGRES: &[Migration] = &[
    Migration {
        version: 1,
        name: "ledger",
        sql: include_str!("../../migrations/postgres/0001_ledger.sql"),
    },
    Migration {
        version: 2,
        name: "outbox_guards",
        sql: include_str!("../../migrations/postgres/0002_outbox_guards.sql"),
    },
    Migration {
        version: 3,
        name: "chain_statements",
        sql: include_str!("../../migrations/postgres/0003_chain_statements.sql"),
    },
    Migration {
        version: 4,
        name: "not_attempted",
        sql: include_str!("../../migrations/postgres/0004_not_attempted.sql"),
    },
    Migration {
        version: 5,
        name: "claim_order",
        sql: include_str!("../../migrations/postgres/0005_claim_order.sql"),
    },
    Migration {
        version: 6,
        name: "delivery_parts",
        sql: include_str!("../../migrations/postgres/0006_delivery_parts.sql"),
    },
    Migration {
        version: 7,
        name: "part_claim_order",
        sql: include_str!("../../migrations/postgres/0007_part_claim_order.sql"),
    },
    Migration {
        version: 8,
        name: "lean_guards",
        sql: include_str!("../../migrations/postgres/0008_lean_guards.sql"),
    },
    Migration {
        version: 9,
        name: "hot_turn_update",
        sql: include_str!("../../migrations/postgres/0009_hot_turn_update.sql"),
    },
    Migration {
        version: 10,
        name: "row_guards",
        sql: include_str!("../../migrations/postgres/0010_row_guards.sql"),
    },
    Migration {
        version: 11,
        name: "admission_key_first",
        sql: include_str!("../../migrations/postgres/0011_admission_key_first.sql"),
    },
    Migration {
        version: 12,
        name: "task_packs",
        sql: include_str!("../../migrations/postgres/0012_task_packs.sql"),
    },
    Migration {
        version: 13,
        name: "task_runs",
        sql: include_str!("../../migrations/postgres/0013_task_runs.sql"),
    },
    Migration {
        version: 14,
        name: "run_journal",
        sql: include_str!("../../migrations/postgres/0014_run_journal.sql"),
    },
    Migration {
        version: 15,
        name: "run_resume",
        sql: include_str!("../../migrations/postgres/0015_run_resume.sql"),
    },
    Migration {
        version: 16,
        name: "passage_usage",
        sql: include_str!("../../migrations/postgres/0016_passage_usage.sql"),
    },
    Migration {
        version: 17,
        name: "granted_withdrawn",
        sql: include_str!("../../migrations/postgres/0017_granted_withdrawn.sql"),
    },
];

const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS phylactery_migration (
    version BIGINT PRIMARY KEY,
    name TEXT NOT NULL,
    digest TEXT NOT NULL,
    applied_at BIGINT NOT NULL
)";

/// Applies every missing migration, each in its own transaction; returns how many ran.
///
/// On SQLite the runner works as SQLite's table-rebuild procedure requires
/// (<https://sqlite.org/lang_altertable.html#otheralter>): foreign keys off outside the
/// transactions (the pragma is a no-op inside one), `legacy_alter_table` on so a rename leaves
/// triggers and views naming tables as they did, and `PRAGMA foreign_key_check` empty before
/// each commit. There is one writer connection, so the pragmas and the transactions share it.
pub(crate) async fn run(pool: &Pool, now_ms: i64) -> Result<usize> {
    let sqlite = matches!(pool, Pool::Sqlite { .. });
    // Connection settings, not commits: nothing for the group commit to flush.
    let pragma = |sql| pool.execute_with(Durability::Deferred, sql, &[]);
    if sqlite {
        pragma("PRAGMA foreign_keys = OFF").await?;
        pragma("PRAGMA legacy_alter_table = ON").await?;
    }
    let applied = apply(pool, now_ms).await;
    if sqlite {
        pragma("PRAGMA legacy_alter_table = OFF").await?;
        pragma("PRAGMA foreign_keys = ON").await?;
    }
    applied
}

async fn apply(pool: &Pool, now_ms: i64) -> Result<usize> {
    let set = match pool {
        Pool::Sqlite { .. } => SQLITE,
        Pool::Postgres { .. } => POSTGRES,
    };
    let mut applied = 0;
    for m in set {
        let mut tx = pool.begin().await?;
        lock(&mut tx).await?;
        tx.execute(CREATE_TABLE, &[]).await?;
        let digest = Sha256Digest::of(m.sql.as_bytes()).to_string();
        let existing = tx
            .fetch_optional(
                "SELECT digest FROM phylactery_migration WHERE version = $1",
                &args![m.version],
            )
            .await?;
        match existing {
            Some(row) => {
                if row.text("digest")? != digest {
                    return Err(LedgerError::MigrationMismatch {
                        version: m.version,
                        name: m.name.to_owned(),
                    });
                }
            }
            None => {
                tx.execute_script(m.sql).await?;
                tx.execute(
                    "INSERT INTO phylactery_migration (version, name, digest, applied_at) VALUES ($1, $2, $3, $4)",
                    &args![m.version, m.name, digest, now_ms],
                )
                .await?;
                applied += 1;
            }
        }
        if let Tx::Sqlite(..) = tx
            && !tx
                .fetch_all("PRAGMA foreign_key_check", &[])
                .await?
                .is_empty()
        {
            return Err(LedgerError::Corrupt(format!(
                "migration {} ({}) leaves foreign keys unsatisfied",
                m.version, m.name
            )));
        }
        tx.commit().await?;
    }
    Ok(applied)
}

/// Serializes concurrent migrators. SQLite's `BEGIN IMMEDIATE` already holds the write lock;
/// PostgreSQL needs an advisory lock because two fresh transactions could both see no table.
async fn lock(tx: &mut Tx) -> Result<()> {
    if let Tx::Postgres(_) = tx {
        tx.fetch_optional("SELECT pg_advisory_xact_lock(7265616368)", &[])
            .await?;
    }
    Ok(())
}
