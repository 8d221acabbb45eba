//! Rollback detection: the vault's high-water mark, kept beside it by core.
//!
//! A vault restored from a backup or a snapshot is older than what this body already committed:
//! an intent it shows as CLAIMED may have been SUBMITTING (sent) since, so serving from it could
//! send twice. The fresh-vault rule does not catch it (the marker is old, not new), so:
//!
//! - Every write that moves the chain forward advances the vault's **commit sequence** in the
//!   same transaction (database triggers; a counter row on SQLite, a sequence on PostgreSQL), so
//!   an older copy carries a lower sequence.
//! - A small **sidecar file** owned by core (by default `<vault file>.high-water`) holds the
//!   highest (vault id, sequence) this body has seen, written atomically (temp file, fsync,
//!   rename, directory fsync).
//! - On open, a vault whose id differs from the mark, or whose sequence is below it, is recorded
//!   in `vault_rollback` and refuses to serve ([`crate::LedgerError::VaultRolledBack`]) until the
//!   operator records an `EFFECTS_RECONCILED` reconciliation (`reach vault reconcile`). The
//!   refusal is recorded in the vault itself, so it survives restarts; the mark is never lowered
//!   before that reconciliation.
//!
//! Trade-off, documented for the operator: the mark is written at open, every
//! [`crate::VaultConfig::high_water_interval`], after a reconciliation and at close, not after
//! every commit (an fsync'd file write per commit would halve the chain rate). A copy taken
//! within the last interval before the loss is therefore not detected; everything older is.
//! Losing the sidecar itself loses the check for that start (the next mark is written from the
//! vault as found), which is why it lives beside the vault, not in a temporary directory.

use std::path::Path;

use crate::Phylactery;
use crate::backend::{BackendKind, args};
use crate::error::{LedgerError, Result};

/// The (vault id, commit sequence) pair stored in the sidecar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HighWaterMark {
    pub vault_id: String,
    pub seq: i64,
}

const MAGIC: &str = "reach-phylactery-high-water/1";

impl HighWaterMark {
    fn render(&self) -> String {
        format!("{MAGIC} vault={} seq={}\n", self.vault_id, self.seq)
    }

    fn parse(text: &str) -> Option<Self> {
        let mut parts = text.trim_end().split(' ');
        if parts.next()? != MAGIC {
            return None;
        }
        let vault_id = parts.next()?.strip_prefix("vault=")?.to_owned();
        let seq = parts.next()?.strip_prefix("seq=")?.parse().ok()?;
        if parts.next().is_some() || vault_id.is_empty() || seq < 0 {
            return None;
        }
        Some(Self { vault_id, seq })
    }

    /// Reads the sidecar; `None` when it does not exist.
    pub fn read(path: &Path) -> Result<Option<Self>> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text).map(Some).ok_or_else(|| {
                LedgerError::Corrupt(format!("high-water mark {} is unreadable", path.display()))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(LedgerError::Corrupt(format!(
                "high-water mark {}: {e}",
                path.display()
            ))),
        }
    }

    /// Replaces the sidecar atomically and durably.
    fn write(&self, path: &Path) -> std::io::Result<()> {
        reach_durable_file::replace(path, self.render().as_bytes(), 0o644)
    }
}

/// An unresolved rollback as the vault recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollbackDetail {
    pub vault_seq: i64,
    pub mark_vault_id: String,
    pub mark_seq: i64,
}

impl Phylactery {
    /// The vault's current commit sequence.
    pub async fn commit_seq(&self) -> Result<i64> {
        let sql = match self.backend() {
            BackendKind::Sqlite => "SELECT seq FROM vault_commit_seq WHERE singleton = 1",
            BackendKind::Postgres => {
                "SELECT CASE WHEN is_called THEN last_value ELSE 0 END AS seq FROM vault_commit_seq"
            }
        };
        self.pool()
            .fetch_optional(sql, &[])
            .await?
            .ok_or_else(|| LedgerError::Corrupt("commit sequence missing".into()))?
            .int("seq")
    }

    /// The unresolved rollback, if one was detected.
    pub(crate) async fn unresolved_rollback(&self) -> Result<Option<RollbackDetail>> {
        let Some(r) = self
            .pool()
            .fetch_optional(
                "SELECT vault_seq, mark_vault_id, mark_seq FROM vault_rollback
                 WHERE reconciliation_id IS NULL ORDER BY rollback_id LIMIT 1",
                &[],
            )
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(RollbackDetail {
            vault_seq: r.int("vault_seq")?,
            mark_vault_id: r.text("mark_vault_id")?,
            mark_seq: r.int("mark_seq")?,
        }))
    }

    /// Compares the vault with the sidecar at open; records a rollback when it is older.
    pub(crate) async fn check_high_water(&self) -> Result<()> {
        let Some(path) = self.high_water_path() else {
            return Ok(());
        };
        let Some(mark) = HighWaterMark::read(path)? else {
            return self.checkpoint_high_water().await;
        };
        let vault_id = self.vault_id().await?;
        let seq = self.commit_seq().await?;
        if mark.vault_id == vault_id && seq >= mark.seq {
            return self.checkpoint_high_water().await;
        }
        if self.unresolved_rollback().await?.is_none() {
            self.pool()
                .execute(
                    "INSERT INTO vault_rollback (detected_at, vault_seq, mark_vault_id, mark_seq)
                     VALUES ($1, $2, $3, $4)",
                    &args![self.now().0, seq, &mark.vault_id, mark.seq],
                )
                .await?;
        }
        tracing::error!(
            vault_id,
            vault_seq = seq,
            mark_vault_id = mark.vault_id,
            mark_seq = mark.seq,
            "vault is older than this body's high-water mark (restored from a backup?): refusing to serve until reconciled"
        );
        Ok(())
    }

    /// Writes the sidecar with the vault's current (id, sequence), unless a rollback awaits
    /// reconciliation (the mark is never lowered before the operator has looked). Called at
    /// open, periodically, after a reconciliation and at close; core may call it at any time.
    pub async fn checkpoint_high_water(&self) -> Result<()> {
        self.write_high_water(false).await
    }

    /// Writes the mark; `accept_lower` (after an operator reconciliation only) lets the
    /// reconciled vault replace a higher mark.
    pub(crate) async fn write_high_water(&self, accept_lower: bool) -> Result<()> {
        let Some(path) = self.high_water_path() else {
            return Ok(());
        };
        let _guard = self.high_water_lock().lock().await;
        if self.unresolved_rollback().await?.is_some() {
            return Ok(());
        }
        let mark = HighWaterMark {
            vault_id: self.vault_id().await?,
            seq: self.commit_seq().await?,
        };
        // The sequence read may include deferred commits: make them durable before the mark
        // names them, or a host loss would leave the mark ahead of the vault (a false rollback).
        self.pool().sync().await?;
        if !accept_lower
            && let Some(old) = HighWaterMark::read(path)?
            && old.vault_id == mark.vault_id
            && old.seq >= mark.seq
        {
            return Ok(());
        }
        let path = path.to_owned();
        tokio::task::spawn_blocking(move || mark.write(&path))
            .await
            .map_err(|e| LedgerError::Corrupt(format!("high-water writer: {e}")))?
            .map_err(|e| LedgerError::Corrupt(format!("high-water mark write: {e}")))
    }

    async fn vault_id(&self) -> Result<String> {
        self.pool()
            .fetch_optional("SELECT vault_id FROM vault_marker WHERE singleton = 1", &[])
            .await?
            .ok_or_else(|| LedgerError::Corrupt("vault marker missing".into()))?
            .text("vault_id")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mark_round_trips_and_rejects_garbage() {
        let m = HighWaterMark {
            vault_id: "vault_abc".into(),
            seq: 42,
        };
        assert_eq!(HighWaterMark::parse(&m.render()), Some(m));
        for bad in [
            "",
            "reach-phylactery-high-water/1 vault= seq=1",
            "reach-phylactery-high-water/1 vault=v seq=-1",
            "reach-phylactery-high-water/1 vault=v seq=x",
            "reach-phylactery-high-water/2 vault=v seq=1",
            "reach-phylactery-high-water/1 vault=v seq=1 extra",
        ] {
            assert_eq!(HighWaterMark::parse(bad), None, "{bad:?}");
        }
    }
}
