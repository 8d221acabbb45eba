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

impl Phylactery {
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
        let _ = self.vault_status().await?;
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
        if row.text("state")? == "SERVING" {
            self.set_serving_cached();
            return Ok(VaultStatus::Serving { vault_id, epoch });
        }
        let created_at = UnixMillis(row.int("created_at")?);
        let horizon_ends = UnixMillis(created_at.0.saturating_add(row.int("horizon_ms")?));
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
        self.mark_serving(
            row.int("epoch")?,
            rec.kind.as_str(),
            &rec.operator,
            &rec.note,
        )
        .await?;
        self.vault_status().await
    }

    async fn mark_serving(&self, epoch: i64, kind: &str, operator: &str, note: &str) -> Result<()> {
        let now = self.now();
        let mut tx = self.pool().begin().await?;
        tx.execute(
            "INSERT INTO operator_reconciliation (epoch, kind, operator, note, recorded_at) VALUES ($1, $2, $3, $4, $5)",
            &args![epoch, kind, operator, note, now.0],
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
