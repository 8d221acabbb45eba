//! Typed refusals of the driver: it stopped without transmitting, and says why. The task's
//! phase is unchanged unless the variant says otherwise.

use crate::state::Phase;

/// Why the driver stopped without settling (or without starting).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IntercomRefusal {
    /// A task spec field is empty or not a printable ASCII id.
    #[error("intercom/invalid-spec: {0}")]
    InvalidSpec(&'static str),
    /// The peer URL is not a canonical HTTPS destination.
    #[error("intercom/peer-refused: {0}")]
    Peer(String),
    /// The operation is not possible from the task's phase.
    #[error("intercom/wrong-phase: {phase}")]
    WrongPhase { phase: Phase },
    /// The polling budget is spent: no further GetTask is sent. The task stays parked.
    #[error("intercom/poll-budget-exhausted after {polls} polls")]
    PollBudgetExhausted { polls: u32 },
    /// The decision authority refused (not a revocation): nothing was sent for this attempt.
    #[error("intercom/decision-refused: {code}")]
    DecisionRefused { code: String },
    /// Admission or connection failed before any request byte: nothing was sent. A later call
    /// may try again under a new decision.
    #[error("intercom/not-sent: {code}")]
    NotSent { code: String },
    /// The task is uncertain and the peer's enrollment receipt admits no resend: it stays
    /// UNCERTAIN for reconciliation.
    #[error("intercom/resend-not-admitted")]
    ResendNotAdmitted,
    /// The journal could not record a step; nothing further was sent.
    #[error("intercom/journal: {code}")]
    Journal { code: String },
    /// The journaled task does not match the spec offered to resume it.
    #[error("intercom/resume-mismatch: {0}")]
    ResumeMismatch(&'static str),
    /// The task was rebuilt from the ledger without its text: its exact envelope is unknown,
    /// so it is never resent (even under a receipt); the operator's request carries the text.
    #[error("intercom/envelope-not-retained")]
    EnvelopeNotRetained,
    /// Every resend the receipt admits was used.
    #[error("intercom/resends-exhausted after {resends}")]
    ResendsExhausted { resends: u32 },
}

impl IntercomRefusal {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            IntercomRefusal::InvalidSpec(_) => "intercom/invalid-spec",
            IntercomRefusal::Peer(_) => "intercom/peer-refused",
            IntercomRefusal::WrongPhase { .. } => "intercom/wrong-phase",
            IntercomRefusal::PollBudgetExhausted { .. } => "intercom/poll-budget-exhausted",
            IntercomRefusal::DecisionRefused { .. } => "intercom/decision-refused",
            IntercomRefusal::NotSent { .. } => "intercom/not-sent",
            IntercomRefusal::ResendNotAdmitted => "intercom/resend-not-admitted",
            IntercomRefusal::Journal { .. } => "intercom/journal",
            IntercomRefusal::ResumeMismatch(_) => "intercom/resume-mismatch",
            IntercomRefusal::ResendsExhausted { .. } => "intercom/resends-exhausted",
            IntercomRefusal::EnvelopeNotRetained => "intercom/envelope-not-retained",
        }
    }
}
