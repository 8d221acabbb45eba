//! Every way ward says no, with the stable codes the seed and the wire use.
//!
//! A [`Refusal`] is a domain answer, carried in the response's `refusal_code` field; the gRPC
//! status stays OK. Only malformed input ([`DeskError::Malformed`]) and store failures are gRPC
//! errors, and so is every step grant refusal ([`GrantRefusal`], `src/grant.rs`): it means
//! "execute nothing", so it must not look like an answer. Messages and details carry ids,
//! dimensions and budget names, never payloads or subject ids.

use std::fmt;

pub use crate::grant::GrantRefusal;

/// The rate-limit dimension that refused an admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dimension {
    Application,
    Guild,
    Channel,
    Subject,
}

impl Dimension {
    pub const ALL: [Dimension; 4] = [Self::Application, Self::Guild, Self::Channel, Self::Subject];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Application => "application",
            Self::Guild => "guild",
            Self::Channel => "channel",
            Self::Subject => "subject",
        }
    }
}

impl fmt::Display for Dimension {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The per-task budget a decision would exceed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Budget {
    /// decisions live at once (issued or redeemed, not yet expired)
    Concurrency,
    /// model tokens reserved across the task's decisions
    Tokens,
    /// decisions per run: every retry, fallback, redirect and poll is one
    Retries,
    /// provider spend reserved across the task's decisions
    Spend,
    /// decisions of a duty Sigil: each channel read of a reconciliation is one
    Reads,
}

impl Budget {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Concurrency => "concurrency",
            Self::Tokens => "tokens",
            Self::Retries => "retries",
            Self::Spend => "spend",
            Self::Reads => "reads",
        }
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A typed refusal. Nothing is minted, issued or sent when one is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// the decision's expiry has passed
    #[error("decision/expired")]
    DecisionExpired,
    /// the decision was already redeemed for its one physical attempt
    #[error("decision/already-redeemed")]
    AlreadyRedeemed,
    /// the decision was revoked with its Sigil
    #[error("decision/revoked")]
    DecisionRevoked,
    /// issuing would exceed a per-task budget
    #[error("decision/over-budget: {0}")]
    OverBudget(Budget),
    /// the payload digest presented at redemption is not the one the decision binds
    #[error("decision/payload-mismatch")]
    PayloadMismatch,
    /// the destination presented at redemption is not the one the decision binds
    #[error("decision/destination-mismatch")]
    DestinationMismatch,
    /// the redeeming principal is not the one the decision's purpose names
    #[error("decision/wrong-redeemer")]
    WrongRedeemer,
    /// no such decision (including any id that is not a decision id, such as a Sigil id)
    #[error("decision/unknown")]
    UnknownDecision,
    /// the purpose names no redeemer in ward's policy
    #[error("decision/purpose-not-admitted")]
    PurposeNotAdmitted,
    /// the purpose requires a Privacy Cut receipt and none was bound
    #[error("decision/cut-receipt-missing")]
    CutReceiptMissing,
    /// a label on the payload may not leave the body on this profile
    #[error("decision/label-refused")]
    LabelRefused,
    /// the Sigil's task has expired
    #[error("sigil/expired")]
    SigilExpired,
    /// the Sigil was revoked
    #[error("sigil/revoked")]
    SigilRevoked,
    /// no such Sigil held by this caller
    #[error("sigil/unknown")]
    UnknownSigil,
    /// the Sigil is bound to another run (or the run already holds a Sigil for another scope)
    #[error("sigil/run-mismatch")]
    RunMismatch,
    /// a duty Sigil presented for a purpose other than its duty, or a task Sigil presented for
    /// a duty purpose (a reconciliation read cannot authorize a Create Message, nor the reverse)
    #[error("sigil/purpose-mismatch")]
    PurposeMismatch,
    /// a rate limit on one dimension is exhausted in its current window
    #[error("ward/rate-limited: {0}")]
    RateLimited(Dimension),
}

impl Refusal {
    /// The stable code, exactly as it appears in `refusal_code` on the wire.
    pub fn code(&self) -> &'static str {
        match self {
            Self::DecisionExpired => "decision/expired",
            Self::AlreadyRedeemed => "decision/already-redeemed",
            Self::DecisionRevoked => "decision/revoked",
            Self::OverBudget(_) => "decision/over-budget",
            Self::PayloadMismatch => "decision/payload-mismatch",
            Self::DestinationMismatch => "decision/destination-mismatch",
            Self::WrongRedeemer => "decision/wrong-redeemer",
            Self::UnknownDecision => "decision/unknown",
            Self::PurposeNotAdmitted => "decision/purpose-not-admitted",
            Self::CutReceiptMissing => "decision/cut-receipt-missing",
            Self::LabelRefused => "decision/label-refused",
            Self::SigilExpired => "sigil/expired",
            Self::SigilRevoked => "sigil/revoked",
            Self::UnknownSigil => "sigil/unknown",
            Self::RunMismatch => "sigil/run-mismatch",
            Self::PurposeMismatch => "sigil/purpose-mismatch",
            Self::RateLimited(_) => "ward/rate-limited",
        }
    }

    /// Whether a decision refused with this can never be issued for the same task: its Sigil
    /// is gone or not the task's, a budget other than concurrency is spent, or the policy
    /// refuses the purpose or payload. Rate limits and concurrency lift with time.
    pub fn is_final(&self) -> bool {
        match self {
            Self::SigilExpired
            | Self::SigilRevoked
            | Self::UnknownSigil
            | Self::RunMismatch
            | Self::PurposeMismatch
            | Self::PurposeNotAdmitted
            | Self::CutReceiptMissing
            | Self::LabelRefused => true,
            Self::OverBudget(b) => !matches!(b, Budget::Concurrency),
            Self::RateLimited(_) => false,
            // Redemption refusals: a new decision is the remedy, not the end of the task.
            Self::DecisionExpired
            | Self::AlreadyRedeemed
            | Self::DecisionRevoked
            | Self::PayloadMismatch
            | Self::DestinationMismatch
            | Self::WrongRedeemer
            | Self::UnknownDecision => false,
        }
    }

    /// What the refusal names beyond its code (a dimension or budget), or `""`.
    pub fn detail(&self) -> &'static str {
        match self {
            Self::OverBudget(b) => b.as_str(),
            Self::RateLimited(d) => d.as_str(),
            _ => "",
        }
    }
}

/// Why a desk operation did not complete.
#[derive(Debug, thiserror::Error)]
pub enum DeskError {
    /// a domain refusal, answered in the response body
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// a step grant refusal, answered as a gRPC error (see [`crate::grpc`])
    #[error(transparent)]
    Grant(#[from] GrantRefusal),
    /// a HIL refusal, answered as a gRPC error (see [`crate::grpc`])
    #[error(transparent)]
    Hil(#[from] crate::hil::HilRefusal),
    /// the request is malformed; names the field, never its value
    #[error("malformed request: {0}")]
    Malformed(&'static str),
    /// ward's own store failed
    #[error("ward store: {0}")]
    Store(#[from] sqlx::Error),
    /// ward's store holds a row this code cannot read
    #[error("ward store is inconsistent: {0}")]
    Corrupt(&'static str),
}

pub type Result<T, E = DeskError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_refusals_that_cannot_lift_are_final() {
        let final_: Vec<_> = [
            Refusal::SigilExpired,
            Refusal::SigilRevoked,
            Refusal::OverBudget(Budget::Retries),
            Refusal::OverBudget(Budget::Tokens),
            Refusal::OverBudget(Budget::Reads),
            Refusal::PurposeNotAdmitted,
            Refusal::PurposeMismatch,
        ]
        .iter()
        .filter(|r| !r.is_final())
        .map(Refusal::code)
        .collect();
        assert!(final_.is_empty(), "{final_:?}");
        let passing: Vec<_> = [
            Refusal::OverBudget(Budget::Concurrency),
            Refusal::RateLimited(Dimension::Channel),
            Refusal::DecisionExpired,
            Refusal::AlreadyRedeemed,
        ]
        .iter()
        .filter(|r| r.is_final())
        .map(Refusal::code)
        .collect();
        assert!(passing.is_empty(), "{passing:?}");
    }
}
