//! Durable steps at which a test may crash or stall the owning process.
//!
//! The points always exist so call sites stay unconditional; the hook that acts on them is only
//! compiled with the `fault-injection` feature, which no deployed build enables.

/// A durable step of admission -> turn -> intent -> claim -> submitting -> settle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultPoint {
    /// Admission and its OPEN turn are about to be committed (one statement: nothing durable yet).
    AdmissionBeforeCommit,
    /// Admission committed; the caller has not yet seen the answer.
    AdmissionCommitted,
    /// Terminal turn and its intent are written but not committed.
    TurnBeforeCommit,
    /// Terminal turn and PENDING intent committed.
    TurnCommitted,
    /// CLAIMED with a new generation committed.
    ClaimCommitted,
    /// SUBMITTING committed; the sender has not yet transmitted.
    SubmittingCommitted,
    /// Settlement about to be committed (one statement: nothing durable yet).
    SettleBeforeCommit,
    /// Settlement committed.
    SettleCommitted,
}

impl FaultPoint {
    pub const ALL: [FaultPoint; 8] = [
        FaultPoint::AdmissionBeforeCommit,
        FaultPoint::AdmissionCommitted,
        FaultPoint::TurnBeforeCommit,
        FaultPoint::TurnCommitted,
        FaultPoint::ClaimCommitted,
        FaultPoint::SubmittingCommitted,
        FaultPoint::SettleBeforeCommit,
        FaultPoint::SettleCommitted,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::AdmissionBeforeCommit => "admission-before-commit",
            Self::AdmissionCommitted => "admission-committed",
            Self::TurnBeforeCommit => "turn-before-commit",
            Self::TurnCommitted => "turn-committed",
            Self::ClaimCommitted => "claim-committed",
            Self::SubmittingCommitted => "submitting-committed",
            Self::SettleBeforeCommit => "settle-before-commit",
            Self::SettleCommitted => "settle-committed",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// Called at every fault point (test builds only).
#[cfg(feature = "fault-injection")]
pub type FaultHook = std::sync::Arc<dyn Fn(FaultPoint) + Send + Sync>;
