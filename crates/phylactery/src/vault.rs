//! The vault marker and the vault-loss rule.
//!
//! Starting with an empty database proves nothing about effects the previous vault may have
//! caused (Discord messages, provider or peer calls). So a vault that this process had to create
//! refuses to serve until either an operator records a reconciliation (`reach vault reconcile`),
//! or the configured idempotency horizon has passed since its creation, after which no earlier
//! effect can still collide with a redelivered event.

use reach_digest::Sha256Digest;

use crate::Phylactery;
use crate::backend::args;
use crate::clock::UnixMillis;
use crate::error::{LedgerError, Result};
use crate::highwater::RollbackDetail;

/// Whether the vault may serve admissions and deliveries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VaultStatus {
    Serving {
        vault_id: String,
        epoch: i64,
    },
    AwaitingReconciliation {
        vault_id: String,
        created_at: UnixMillis,
        horizon_ends: UnixMillis,
        /// Set when the vault is older than this body's high-water mark (restored from a backup
        /// or snapshot, or another vault): only an `EFFECTS_RECONCILED` record lifts it, the
        /// horizon does not.
        rolled_back: Option<RollbackDetail>,
    },
}

/// What the operator asserts when reconciling a vault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconciliationKind {
    /// First deployment: no earlier body ever produced effects for this application.
    Genesis,
    /// The operator compared platform/provider state against the horizon and settled it.
    EffectsReconciled,
}

impl ReconciliationKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Genesis => "GENESIS",
            Self::EffectsReconciled => "EFFECTS_RECONCILED",
        }
    }
}

/// An operator's recorded reconciliation of a fresh or restored vault.
#[derive(Debug, Clone)]
pub struct OperatorReconciliation {
    pub kind: ReconciliationKind,
    /// Who (operator principal name; not a credential).
    pub operator: String,
    /// What was checked, in words; kept in the trail.
    pub note: String,
}

/// One recorded reason the vault serves: an operator's reconciliation, or the horizon's own
/// (`HORIZON_ELAPSED`). Secret-free: a kind, a principal name, the operator's words, a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconciliationRecord {
    pub kind: String,
    pub operator: String,
    pub note: String,
    pub recorded_at: UnixMillis,
}

impl Phylactery {
    /// Every reconciliation this vault recorded, oldest first (the live-host receipt's
    /// evidence for `recovery/reconciliation`).
    pub async fn reconciliations(&self) -> Result<Vec<ReconciliationRecord>> {
        self.pool()
            .fetch_all(
                "SELECT kind, operator, note, recorded_at FROM operator_reconciliation
                 ORDER BY reconciliation_id",
                &args![],
            )
            .await?
            .iter()
            .map(|r| {
                Ok(ReconciliationRecord {
                    kind: r.text("kind")?,
                    operator: r.text("operator")?,
                    note: r.text("note")?,
                    recorded_at: UnixMillis(r.int("recorded_at")?),
                })
            })
            .collect()
    }

    pub(crate) async fn ensure_marker(&self) -> Result<()> {
        let now = self.now();
        let vault_id = {
            let d = Sha256Digest::of_parts([
                now.0.to_be_bytes().as_slice(),
                std::process::id().to_be_bytes().as_slice(),
                format!("{:?}", std::time::SystemTime::now()).as_bytes(),
            ]);
            format!("vault_{}", &d.hex()[..24])
        };
        let horizon_ms = i64::try_from(self.horizon().as_millis()).unwrap_or(i64::MAX);
        self.pool()
            .execute(
                "INSERT INTO vault_marker (singleton, vault_id, epoch, state, created_at, horizon_ms)
                 VALUES (1, $1, 1, 'AWAITING_RECONCILIATION', $2, $3)
                 ON CONFLICT (singleton) DO NOTHING",
                &args![vault_id, now.0, horizon_ms],
            )
            .await?;
        Ok(())
    }

    /// Reads the marker; flips it to SERVING (with a durable record saying why) once the horizon
    /// recorded at creation has elapsed.
    pub async fn vault_status(&self) -> Result<VaultStatus> {
        let row = self
            .pool()
            .fetch_optional(
                "SELECT vault_id, epoch, state, created_at, horizon_ms FROM vault_marker WHERE singleton = 1",
                &[],
            )
            .await?
            .ok_or_else(|| LedgerError::Corrupt("vault marker missing".into()))?;
        let vault_id = row.text("vault_id")?;
        let epoch = row.int("epoch")?;
        let created_at = UnixMillis(row.int("created_at")?);
        let horizon_ends = UnixMillis(created_at.0.saturating_add(row.int("horizon_ms")?));
        if let Some(detail) = self.unresolved_rollback().await? {
            return Ok(VaultStatus::AwaitingReconciliation {
                vault_id,
                created_at,
                horizon_ends,
                rolled_back: Some(detail),
            });
        }
        if row.text("state")? == "SERVING" {
            self.set_serving_cached();
            return Ok(VaultStatus::Serving { vault_id, epoch });
        }
        if self.now() >= horizon_ends {
            self.mark_serving(
                epoch,
                "HORIZON_ELAPSED",
                "reach",
                "idempotency horizon elapsed since vault creation",
            )
            .await?;
            self.set_serving_cached();
            return Ok(VaultStatus::Serving { vault_id, epoch });
        }
        Ok(VaultStatus::AwaitingReconciliation {
            vault_id,
            created_at,
            horizon_ends,
            rolled_back: None,
        })
    }

    /// Refuses unless the vault serves. Cheap after the first success.
    pub(crate) async fn require_serving(&self) -> Result<()> {
        if self.is_serving_cached() {
            return Ok(());
        }
        match self.vault_status().await? {
            VaultStatus::Serving { .. } => Ok(()),
            VaultStatus::AwaitingReconciliation {
                rolled_back: Some(d),
                ..
            } => Err(LedgerError::VaultRolledBack {
                vault_seq: d.vault_seq,
                mark_vault_id: d.mark_vault_id,
                mark_seq: d.mark_seq,
            }),
            VaultStatus::AwaitingReconciliation {
                created_at,
                horizon_ends,
                ..
            } => Err(LedgerError::VaultUnreconciled {
                created_at,
                horizon_ends,
            }),
        }
    }

    /// Records the operator's reconciliation and lets the vault serve (`reach vault reconcile`).
    pub async fn record_operator_reconciliation(
        &self,
        rec: &OperatorReconciliation,
    ) -> Result<VaultStatus> {
        if rec.operator.is_empty() || rec.note.is_empty() {
            return Err(LedgerError::InvalidInput(
                "a reconciliation names its operator and what was checked",
            ));
        }
        let row = self
            .pool()
            .fetch_optional("SELECT epoch FROM vault_marker WHERE singleton = 1", &[])
            .await?
            .ok_or_else(|| LedgerError::Corrupt("vault marker missing".into()))?;
        let rolled_back = self.unresolved_rollback().await?.is_some();
        if rolled_back && rec.kind == ReconciliationKind::Genesis {
            return Err(LedgerError::InvalidInput(
                "a rolled-back vault has earlier effects: reconcile them (EFFECTS_RECONCILED), not GENESIS",
            ));
        }
        self.mark_serving(
            row.int("epoch")?,
            rec.kind.as_str(),
            &rec.operator,
            &rec.note,
        )
        .await?;
        if rolled_back {
            // The operator accepted this vault as it is: it becomes the new high-water mark.
            self.write_high_water(true).await?;
        }
        self.vault_status().await
    }

    /// Records why the vault serves and resolves any detected rollback with the same record.
    /// The horizon path never reaches here while a rollback is unresolved (`vault_status`
    /// answers before it), so only an operator record resolves one.
    async fn mark_serving(&self, epoch: i64, kind: &str, operator: &str, note: &str) -> Result<()> {
        let now = self.now();
        let mut tx = self.pool().begin().await?;
        let id = tx
            .fetch_optional(
                "INSERT INTO operator_reconciliation (epoch, kind, operator, note, recorded_at)
                 VALUES ($1, $2, $3, $4, $5) RETURNING reconciliation_id",
                &args![epoch, kind, operator, note, now.0],
            )
            .await?
            .ok_or_else(|| LedgerError::Corrupt("reconciliation insert returned nothing".into()))?
            .int("reconciliation_id")?;
        tx.execute(
            "UPDATE vault_rollback SET reconciliation_id = $1 WHERE reconciliation_id IS NULL",
            &args![id],
        )
        .await?;
        tx.execute(
            "UPDATE vault_marker SET state = 'SERVING' WHERE singleton = 1",
            &[],
        )
        .await?;
        tx.commit().await
    }
}
