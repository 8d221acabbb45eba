//! The checked state machine of one outbound A2A task (seed 001, "Outbound A2A without an
//! inbound edge").
//!
//! ```text
//! Committed ──▶ Sending ──▶ Submitted ──▶ Polling ──▶ {Succeeded, Refused, Failed, Cancelled}
//!     │            │  └──────▶ terminal      │  ▲ │
//!     ▼            ▼                         └──┘ └──▶ {Expired, Revoked, Lost}
//! AbandonedBeforeSubmit   Uncertain ──▶ Resending (only under an enrollment receipt)
//!                            │   ▲          │
//!                            │   └──────────┤ (ambiguous again)
//!                            ▼              ▼
//!                 {Expired, Revoked, Lost}  Submitted | terminal
//! ```
//!
//! **Invariant:** once bytes may have left (`Sending` and after), the task never returns to
//! `Committed` or `Sending`: an ambiguous send becomes `Uncertain`, and the only way out that
//! transmits again is `Resending`, which the driver enters only when the peer's enrollment
//! receipt admits that the same message resolves to the original task.

use std::fmt;

use crate::wire::TaskState;

/// Where an outbound task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Committed to the outbox with its envelope; nothing transmitted.
    Committed,
    /// SendMessage is being written: bytes may reach the peer from here on.
    Sending,
    /// The peer answered with its task id; not yet polled.
    Submitted,
    /// Parked in Stasis, polled with GetTask.
    Polling,
    /// The initial send's outcome was lost; kept for reconciliation, never blindly resent.
    Uncertain,
    /// An admitted resend of the exact same envelope is being written.
    Resending,
    /// `TASK_STATE_COMPLETED` (or a direct Message answer).
    Succeeded,
    /// `TASK_STATE_REJECTED`, input/auth required for one-shot work, or a definitive refusal.
    Refused,
    /// `TASK_STATE_FAILED`.
    Failed,
    /// `TASK_STATE_CANCELED`.
    Cancelled,
    /// The local deadline passed before a terminal.
    Expired,
    /// Authorization was revoked while the task was live.
    Revoked,
    /// The peer no longer knows the task: irreconcilable loss.
    Lost,
    /// Proved never transmitted.
    AbandonedBeforeSubmit,
}

impl Phase {
    /// Every phase.
    pub const ALL: &'static [Phase] = &[
        Phase::Committed,
        Phase::Sending,
        Phase::Submitted,
        Phase::Polling,
        Phase::Uncertain,
        Phase::Resending,
        Phase::Succeeded,
        Phase::Refused,
        Phase::Failed,
        Phase::Cancelled,
        Phase::Expired,
        Phase::Revoked,
        Phase::Lost,
        Phase::AbandonedBeforeSubmit,
    ];

    /// The stable name (the Phylactery's state name where one exists).
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Committed => "COMMITTED",
            Phase::Sending => "SENDING",
            Phase::Submitted => "SUBMITTED",
            Phase::Polling => "POLLING",
            Phase::Uncertain => "UNCERTAIN",
            Phase::Resending => "RESENDING",
            Phase::Succeeded => "SUCCEEDED",
            Phase::Refused => "REFUSED",
            Phase::Failed => "FAILED",
            Phase::Cancelled => "CANCELLED",
            Phase::Expired => "EXPIRED",
            Phase::Revoked => "REVOKED",
            Phase::Lost => "LOST",
            Phase::AbandonedBeforeSubmit => "ABANDONED_BEFORE_SUBMIT",
        }
    }

    /// The transition table.
    pub fn can_become(self, to: Phase) -> bool {
        use Phase::*;
        let protocol_terminal = matches!(to, Succeeded | Refused | Failed | Cancelled);
        let local_terminal = matches!(to, Expired | Revoked);
        match self {
            Committed => matches!(to, Sending | AbandonedBeforeSubmit),
            Sending | Resending => protocol_terminal || matches!(to, Submitted | Uncertain),
            Submitted | Polling => {
                protocol_terminal || local_terminal || matches!(to, Polling | Lost)
            }
            Uncertain => local_terminal || matches!(to, Resending | Lost),
            _ => false,
        }
    }

    /// No transition leaves this phase.
    pub fn is_terminal(self) -> bool {
        Phase::ALL.iter().all(|&to| !self.can_become(to))
    }

    /// Bytes may have reached the peer.
    pub fn may_have_sent(self) -> bool {
        !matches!(self, Phase::Committed | Phase::AbandonedBeforeSubmit)
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a task state reported by the peer means for a one-shot task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateMeaning {
    /// Still running (`SUBMITTED`, `WORKING`): keep polling.
    Live,
    /// A terminal (or, for one-shot work, a refusal) to settle in this phase.
    Settle(Phase),
    /// `UNSPECIFIED`: a protocol violation, settles nothing.
    Violation,
}

/// The seed's mapping: COMPLETED → success, REJECTED → refusal, FAILED → failure, CANCELED →
/// cancellation; INPUT_REQUIRED and AUTH_REQUIRED refuse one-shot work (Intercom never supplies
/// more input or new credentials to a running task).
pub fn meaning(state: TaskState) -> StateMeaning {
    match state {
        TaskState::Submitted | TaskState::Working => StateMeaning::Live,
        TaskState::Completed => StateMeaning::Settle(Phase::Succeeded),
        TaskState::Rejected | TaskState::InputRequired | TaskState::AuthRequired => {
            StateMeaning::Settle(Phase::Refused)
        }
        TaskState::Failed => StateMeaning::Settle(Phase::Failed),
        TaskState::Canceled => StateMeaning::Settle(Phase::Cancelled),
        TaskState::Unspecified => StateMeaning::Violation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_that_may_have_sent_returns_to_sending() {
        for &from in Phase::ALL {
            if from.may_have_sent() {
                assert!(!from.can_become(Phase::Committed), "{from}");
                assert!(!from.can_become(Phase::Sending), "{from}");
            }
        }
        // The only retransmission is the receipt-admitted resend of an uncertain task.
        for &from in Phase::ALL {
            assert_eq!(from.can_become(Phase::Resending), from == Phase::Uncertain);
        }
    }

    #[test]
    fn terminals_are_exactly_the_settled_phases() {
        let terminal: Vec<Phase> = Phase::ALL
            .iter()
            .copied()
            .filter(|p| p.is_terminal())
            .collect();
        assert_eq!(
            terminal,
            vec![
                Phase::Succeeded,
                Phase::Refused,
                Phase::Failed,
                Phase::Cancelled,
                Phase::Expired,
                Phase::Revoked,
                Phase::Lost,
                Phase::AbandonedBeforeSubmit,
            ]
        );
    }

    #[test]
    fn every_task_state_has_a_meaning() {
        use TaskState::*;
        let expect = [
            (Unspecified, StateMeaning::Violation),
            (Submitted, StateMeaning::Live),
            (Working, StateMeaning::Live),
            (Completed, StateMeaning::Settle(Phase::Succeeded)),
            (Failed, StateMeaning::Settle(Phase::Failed)),
            (Canceled, StateMeaning::Settle(Phase::Cancelled)),
            (InputRequired, StateMeaning::Settle(Phase::Refused)),
            (Rejected, StateMeaning::Settle(Phase::Refused)),
            (AuthRequired, StateMeaning::Settle(Phase::Refused)),
        ];
        assert_eq!(expect.len(), TaskState::ALL.len());
        for (s, m) in expect {
            assert_eq!(meaning(s), m, "{}", s.as_str());
        }
    }
}
