//! One EgressDecision per physical attempt (seed 001: "every physical attempt, including
//! retries and polls, needs a fresh byte-time EgressDecision and consumes its transmission
//! budget").
//!
//! The caller supplies a [`DecisionAuthority`]: in Reach, core obtains the decision from ward
//! and the egress role redeems it at ward. The driver asks for a decision immediately before
//! each physical attempt (the initial SendMessage, an admitted resend, every GetTask poll) and
//! redeems it before the connection is opened; only a successful redemption yields the private
//! [`Redeemed`] token that the send path requires, so this crate cannot transmit without one.

use std::fmt;
use std::future::Future;

use reach_digest::Sha256Digest;

/// The purpose every Intercom decision and admission names (ward's `a2a-task` rule).
pub const PURPOSE: &str = "a2a-task";

/// Which physical attempt of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttemptKind {
    /// The initial SendMessage.
    Send,
    /// The `n`th admitted resend of the exact same envelope (1-based).
    Resend(u32),
    /// The `n`th GetTask poll (1-based).
    Poll(u32),
    /// The one `CancelTask` of a task the peer left waiting for input (issue #33 item 6).
    Cancel,
}

/// Everything a decision for one physical attempt binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// Reach's task id.
    pub task_id: String,
    pub kind: AttemptKind,
    /// The exact destination URL (`https://authority/path`).
    pub destination: String,
    /// Digest of the exact request body bytes of this attempt.
    pub payload_digest: Sha256Digest,
}

impl Attempt {
    /// A stable attempt id: `<task>/send`, `<task>/resend-<n>`, `<task>/poll-<n>`,
    /// `<task>/cancel`.
    pub fn attempt_id(&self) -> String {
        match self.kind {
            AttemptKind::Send => format!("{}/send", self.task_id),
            AttemptKind::Resend(n) => format!("{}/resend-{n}", self.task_id),
            AttemptKind::Poll(n) => format!("{}/poll-{n}", self.task_id),
            AttemptKind::Cancel => format!("{}/cancel", self.task_id),
        }
    }
}

/// An EgressDecision id, as ward issued it (opaque here).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DecisionId(pub String);

impl fmt::Display for DecisionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why no decision (or no redemption) was granted. Nothing is transmitted either way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecisionRefusal {
    /// The task's authorization is revoked (Sigil or decision revoked): the task settles
    /// REVOKED (or, before any byte, ABANDONED_BEFORE_SUBMIT).
    #[error("{code}")]
    Revoked { code: String },
    /// Any other refusal (expired, over budget, rate limited, mismatch…), with ward's code.
    #[error("{code}")]
    Refused { code: String },
}

impl DecisionRefusal {
    /// The authority's code.
    pub fn code(&self) -> &str {
        match self {
            DecisionRefusal::Revoked { code } | DecisionRefusal::Refused { code } => code,
        }
    }
}

/// Obtains and redeems one decision per physical attempt.
pub trait DecisionAuthority: Send + Sync {
    /// A fresh decision binding exactly `attempt`.
    fn obtain_decision(
        &self,
        attempt: &Attempt,
    ) -> impl Future<Output = Result<DecisionId, DecisionRefusal>> + Send;

    /// Redeems `decision` for `attempt`, exactly once, immediately before its bytes.
    fn redeem(
        &self,
        decision: &DecisionId,
        attempt: &Attempt,
    ) -> impl Future<Output = Result<(), DecisionRefusal>> + Send;
}

/// Proof that a decision was obtained and redeemed for one attempt. Only [`authorize`] builds
/// it; the send path takes it by value, so one redemption carries one physical attempt.
#[derive(Debug)]
pub struct Redeemed {
    pub(crate) decision: DecisionId,
    pub(crate) attempt: Attempt,
}

impl Redeemed {
    /// The decision that carried the attempt.
    pub fn decision(&self) -> &DecisionId {
        &self.decision
    }

    /// The attempt it carried.
    pub fn attempt(&self) -> &Attempt {
        &self.attempt
    }
}

/// Obtains and redeems a decision for `attempt`.
pub async fn authorize<A: DecisionAuthority>(
    authority: &A,
    attempt: Attempt,
) -> Result<Redeemed, DecisionRefusal> {
    let decision = authority.obtain_decision(&attempt).await?;
    redeem(authority, decision, attempt).await
}

/// Redeems an obtained `decision` for `attempt`.
pub async fn redeem<A: DecisionAuthority>(
    authority: &A,
    decision: DecisionId,
    attempt: Attempt,
) -> Result<Redeemed, DecisionRefusal> {
    authority.redeem(&decision, &attempt).await?;
    Ok(Redeemed { decision, attempt })
}
