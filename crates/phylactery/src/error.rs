//! The one refusal enum of the ledger. Each variant has a stable string code (see
//! [`LedgerError::code`]) that core maps to its port status in one place.

use crate::clock::UnixMillis;
use crate::room::RoomRefusal;
use crate::taskpack::TaskPackRefusal;

/// Why the Phylactery refused or failed an operation.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// the same admission key arrived with a different payload digest or from another partition
    #[error("security fault {fault_id}: {kind} for admission {admission_id}")]
    SecurityFault {
        fault_id: i64,
        kind: SecurityFaultKind,
        admission_id: String,
    },
    /// the write carries a claim generation that is no longer current
    #[error("stale generation {presented} for intent {intent_id} (current {current})")]
    StaleGeneration {
        intent_id: String,
        presented: i64,
        current: i64,
    },
    /// the claim's lease expired before this write
    #[error("lease of generation {generation} on intent {intent_id} expired at {expired_at}")]
    LeaseExpired {
        intent_id: String,
        generation: i64,
        expired_at: UnixMillis,
    },
    /// another claimer holds a live lease on the intent
    #[error("intent {intent_id} is leased until {until}")]
    LeaseHeld {
        intent_id: String,
        until: UnixMillis,
    },
    /// the intent reached SUBMITTING or later and is never handed out for sending again
    #[error("intent {intent_id} is {state} and can never be claimed again")]
    NotClaimable { intent_id: String, state: String },
    /// the record is not in the state this write requires
    #[error("{record} {id} is {state}, not {expected}")]
    WrongState {
        record: &'static str,
        id: String,
        state: String,
        expected: &'static str,
    },
    /// the turn already terminated; a terminal outcome never changes
    #[error("turn {turn_id} already terminated as {state}")]
    TurnAlreadyTerminal { turn_id: String, state: String },
    /// an earlier attempt of this run has no proved outcome, so a new one could duplicate work
    #[error("run {run_id} has an attempt without a proved outcome")]
    UnsettledAttempt { run_id: String },
    /// an egress decision authorizes exactly one attempt
    #[error("egress decision {decision_id} was already used by an attempt")]
    DecisionReused { decision_id: String },
    /// no such record
    #[error("{record} {id} not found")]
    NotFound { record: &'static str, id: String },
    /// the vault is new or lost while the idempotency horizon may still hold effects
    #[error(
        "vault awaits operator reconciliation (created {created_at}, horizon ends {horizon_ends})"
    )]
    VaultUnreconciled {
        created_at: UnixMillis,
        horizon_ends: UnixMillis,
    },
    /// the vault is older than this body's high-water mark (restored from a backup or snapshot),
    /// or another vault; it serves again only after an operator reconciliation
    #[error(
        "vault rolled back: sequence {vault_seq} is below the high-water mark {mark_seq} of vault {mark_vault_id} (or another vault); reconcile effects before serving"
    )]
    VaultRolledBack {
        vault_seq: i64,
        mark_vault_id: String,
        mark_seq: i64,
    },
    /// an applied migration differs from the one this build carries
    #[error("migration {version} ({name}) differs from the applied one")]
    MigrationMismatch { version: i64, name: String },
    /// a task-pack lifecycle or binding rule refused the operation (its code is the refusal's)
    #[error(transparent)]
    TaskPack(#[from] TaskPackRefusal),
    /// a task run's or its Room's rule refused the operation (its code is the refusal's)
    #[error(transparent)]
    Room(#[from] RoomRefusal),
    /// the input is malformed
    #[error("invalid input: {0}")]
    InvalidInput(&'static str),
    /// a stored value is not one this build understands
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// the write-ahead log could not be flushed: a synced commit is not proved durable
    #[error("durability: {0}")]
    Durability(String),
    /// the database failed
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

impl LedgerError {
    /// Whether this is the database refusing a write with the given trigger code (the text a
    /// migration's `RAISE` carries).
    pub(crate) fn is_database_refusal(&self, code: &str) -> bool {
        match self {
            Self::Database(sqlx::Error::Database(e)) => e.message().contains(code),
            _ => false,
        }
    }

    /// The stable refusal code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::SecurityFault { kind, .. } => match kind {
                SecurityFaultKind::PayloadDigestMismatch => "admission/payload-digest-mismatch",
                SecurityFaultKind::PartitionMismatch => "admission/partition-mismatch",
            },
            Self::StaleGeneration { .. } => "ledger/stale-generation",
            Self::LeaseExpired { .. } => "ledger/lease-expired",
            Self::LeaseHeld { .. } => "ledger/lease-held",
            Self::NotClaimable { .. } => "ledger/not-claimable",
            Self::WrongState { .. } => "ledger/wrong-state",
            Self::TurnAlreadyTerminal { .. } => "turn/already-terminal",
            Self::UnsettledAttempt { .. } => "attempt/unsettled-predecessor",
            Self::DecisionReused { .. } => "attempt/decision-reused",
            Self::NotFound { .. } => "ledger/not-found",
            Self::VaultUnreconciled { .. } => "vault/unreconciled",
            Self::VaultRolledBack { .. } => "vault/rolled-back",
            Self::MigrationMismatch { .. } => "vault/migration-mismatch",
            Self::TaskPack(refusal) => refusal.code(),
            Self::Room(refusal) => refusal.code(),
            Self::InvalidInput(_) => "ledger/invalid-input",
            Self::Corrupt(_) => "ledger/corrupt-row",
            Self::Durability(_) => "ledger/durability",
            Self::Database(_) => "ledger/database",
        }
    }
}

/// Which admission rule a reused key broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityFaultKind {
    /// Same key, different payload digest.
    PayloadDigestMismatch,
    /// Same key, presented for another Habitat/owner partition.
    PartitionMismatch,
}

impl SecurityFaultKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PayloadDigestMismatch => "PAYLOAD_DIGEST_MISMATCH",
            Self::PartitionMismatch => "PARTITION_MISMATCH",
        }
    }
}

impl std::fmt::Display for SecurityFaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

pub type Result<T, E = LedgerError> = std::result::Result<T, E>;
