//! The typed state machines. Each transition the ledger writes is first checked here, and the
//! same table is enforced again by the database (CHECK constraints, triggers and conditional
//! `UPDATE ... WHERE state = ...`), so neither layer alone is trusted.

use crate::error::LedgerError;

macro_rules! str_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $s:literal),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($(#[$vm])* $v),* }
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$v),*];
            pub fn as_str(self) -> &'static str {
                match self { $($name::$v => $s),* }
            }
            pub fn parse(s: &str) -> Result<Self, LedgerError> {
                match s {
                    $($s => Ok($name::$v),)*
                    other => Err(LedgerError::Corrupt(format!("unknown {} {other:?}", stringify!($name)))),
                }
            }
        }
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

str_enum!(
    /// State of a `ReachTurn@1`: OPEN until it terminates, exactly once, with one outcome.
    TurnState {
        /// Admitted; the turn is still being formed.
        Open = "OPEN",
        /// An answer was formed, validated and committed.
        Succeeded = "SUCCEEDED",
        /// Reach declined to answer (policy, eligibility, missing Cut).
        Refused = "REFUSED",
        /// A required dependency (corpus, provider, Ward) was unavailable.
        DependencyUnavailable = "DEPENDENCY_UNAVAILABLE",
        /// The turn's deadline passed.
        Expired = "EXPIRED",
        /// The turn failed for a known reason.
        Failed = "FAILED",
        /// Remote work may have happened but its outcome is not proved.
        Indeterminate = "INDETERMINATE",
    }
);

impl TurnState {
    pub fn is_terminal(self) -> bool {
        self != TurnState::Open
    }

    /// Only OPEN may move, and only to a terminal state.
    pub fn can_become(self, to: TurnState) -> bool {
        self == TurnState::Open && to.is_terminal()
    }
}

str_enum!(
    /// State of a `DiscordDeliveryIntent@1`:
    /// PENDING -> CLAIMED -> SUBMITTING -> KNOWN_SENT | KNOWN_REJECTED | UNKNOWN, or
    /// CLAIMED -> NOT_ATTEMPTED when ward will never issue the claim's EgressDecision.
    IntentState {
        /// Committed with its turn; nobody holds it.
        Pending = "PENDING",
        /// A sender holds a generation-fenced lease; nothing was transmitted yet.
        Claimed = "CLAIMED",
        /// Durable before the first byte: bytes may have left, so it is never handed out again.
        Submitting = "SUBMITTING",
        /// The platform created the message (message id known).
        KnownSent = "KNOWN_SENT",
        /// The platform holds no such message: it rejected it, or absence was proved.
        KnownRejected = "KNOWN_REJECTED",
        /// A send may have happened; only independent evidence settles it.
        Unknown = "UNKNOWN",
        /// Never sent, and never will be: ward refused the claim's EgressDecision for good (the
        /// task's Sigil expired or was revoked, or a task budget is spent).
        NotAttempted = "NOT_ATTEMPTED",
    }
);

impl IntentState {
    /// Whether a claimer may be handed this intent (given whether the current lease expired).
    pub fn claimable(self, lease_expired: bool) -> bool {
        match self {
            IntentState::Pending => true,
            IntentState::Claimed => lease_expired,
            _ => false,
        }
    }

    /// Once SUBMITTING is durable, the effect may exist: no path leads back to a send.
    pub fn may_have_sent(self) -> bool {
        matches!(
            self,
            IntentState::Submitting
                | IntentState::KnownSent
                | IntentState::KnownRejected
                | IntentState::Unknown
        )
    }

    pub fn is_settled(self) -> bool {
        matches!(
            self,
            IntentState::KnownSent | IntentState::KnownRejected | IntentState::NotAttempted
        )
    }

    /// The transition table, identical to the database trigger.
    pub fn can_become(self, to: IntentState) -> bool {
        use IntentState::*;
        matches!(
            (self, to),
            (Pending, Claimed)
                | (Claimed, Claimed)
                | (Claimed, Submitting | NotAttempted)
                | (Submitting, KnownSent | KnownRejected | Unknown)
                | (Unknown, KnownSent | KnownRejected)
        )
    }
}

str_enum!(
    /// Outcome of a `ReachDelivery@1`; NOT_ATTEMPTED when the turn committed no intent.
    DeliveryOutcome {
        NotAttempted = "NOT_ATTEMPTED",
        KnownSent = "KNOWN_SENT",
        KnownRejected = "KNOWN_REJECTED",
        Unknown = "UNKNOWN",
    }
);

str_enum!(
    /// State of a `ServiceJobAttempt@1` (or Intercom task/outbox attempt).
    AttemptState {
        /// Persisted with its EgressDecision; nothing transmitted.
        Persisted = "PERSISTED",
        /// Durable before the first byte to the provider or peer.
        Submitting = "SUBMITTING",
        /// A validated response was received.
        Completed = "COMPLETED",
        /// The remote side answered with a known failure.
        Failed = "FAILED",
        /// Proved never transmitted; a new attempt (with a new decision) may follow.
        AbandonedBeforeSubmit = "ABANDONED_BEFORE_SUBMIT",
        /// May have been transmitted, outcome lost; stays until reconciled.
        Indeterminate = "INDETERMINATE",
    }
);

impl AttemptState {
    pub fn can_become(self, to: AttemptState) -> bool {
        use AttemptState::*;
        matches!(
            (self, to),
            (Persisted, Submitting | AbandonedBeforeSubmit)
                | (Submitting, Completed | Failed | Indeterminate)
                | (Indeterminate, Completed | Failed)
        )
    }

    /// An attempt whose outcome is proved; only then may the run start another.
    pub fn is_settled(self) -> bool {
        matches!(
            self,
            AttemptState::Completed | AttemptState::Failed | AttemptState::AbandonedBeforeSubmit
        )
    }
}

str_enum!(
    /// State of an Intercom (A2A) task/outbox record. The seed's law: commit the task/outbox
    /// before sending, SUBMITTING before the first byte, then park in Durable Stasis while
    /// waiting; an ambiguous initial send is preserved for reconciliation, never resent.
    IntercomTaskState {
        /// Committed with its attempt and EgressDecision; nothing transmitted.
        Outbox = "OUTBOX",
        /// Durable before the first byte to the peer.
        Submitting = "SUBMITTING",
        /// The peer accepted the task; waiting (polling) for its authenticated terminal.
        Parked = "PARKED",
        /// The initial send's outcome was lost: never resent, only reconciled.
        Uncertain = "UNCERTAIN",
        /// `TASK_STATE_COMPLETED`.
        Succeeded = "SUCCEEDED",
        /// `TASK_STATE_REJECTED`, or input/auth required for one-shot work.
        Refused = "REFUSED",
        /// `TASK_STATE_FAILED`.
        Failed = "FAILED",
        /// `TASK_STATE_CANCELED`.
        Cancelled = "CANCELLED",
        /// The local deadline passed.
        Expired = "EXPIRED",
        /// The peer's authorization was revoked (or it was tainted) while the task was live.
        Revoked = "REVOKED",
        /// Irreconcilable loss, settled with evidence.
        Lost = "LOST",
        /// Proved never transmitted.
        AbandonedBeforeSubmit = "ABANDONED_BEFORE_SUBMIT",
    }
);

impl IntercomTaskState {
    /// The transition table, identical to the database trigger `intercom_task_transition`.
    pub fn can_become(self, to: IntercomTaskState) -> bool {
        use IntercomTaskState::*;
        let settled_from_live = matches!(
            to,
            Succeeded | Refused | Failed | Cancelled | Expired | Revoked
        );
        match self {
            Outbox => matches!(to, Submitting | AbandonedBeforeSubmit),
            Submitting => settled_from_live || matches!(to, Parked | Uncertain),
            Parked => settled_from_live || to == Lost,
            Uncertain => settled_from_live || matches!(to, Parked | Lost),
            _ => false,
        }
    }

    /// No further transition exists.
    pub fn is_terminal(self) -> bool {
        IntercomTaskState::ALL
            .iter()
            .all(|&to| !self.can_become(to))
    }

    /// Bytes may have reached the peer: the task is never sent again.
    pub fn may_have_sent(self) -> bool {
        !matches!(
            self,
            IntercomTaskState::Outbox | IntercomTaskState::AbandonedBeforeSubmit
        )
    }
}

str_enum!(
    /// One row of a task pack's append-only event log (`task_pack_event`): a lifecycle
    /// transition of the pack, or a change of its local binding (see [`crate::taskpack`]).
    PackEventKind {
        /// A version was stored, inertly: nothing was activated, bound or changed.
        Installed = "installed",
        /// The first activation of the pack (generation 1).
        Activated = "activated",
        /// A newer version replaced the active one.
        Upgraded = "upgraded",
        /// The active version was revoked.
        Revoked = "revoked",
        /// A revoked pack was activated again (the same or a newer version).
        Reactivated = "reactivated",
        /// The local binding was written (first bound, or re-bound with new choices).
        Bound = "bound",
        /// The operator accepted the active version for the binding (`reach bind accept`).
        BindingAccepted = "binding-accepted",
        /// An upgrade with an unchanged profile digest carried the binding forward.
        BindingCarried = "binding-carried",
        BindingPaused = "binding-paused",
        BindingResumed = "binding-resumed",
    }
);

impl PackEventKind {
    /// Whether the event is a lifecycle transition (it bumped the generation).
    pub fn is_transition(self) -> bool {
        matches!(
            self,
            Self::Activated | Self::Upgraded | Self::Revoked | Self::Reactivated
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_turns_never_move() {
        for &from in TurnState::ALL {
            for &to in TurnState::ALL {
                assert_eq!(
                    from.can_become(to),
                    from == TurnState::Open && to != TurnState::Open
                );
            }
        }
    }

    #[test]
    fn nothing_after_submitting_is_claimable() {
        for &s in IntentState::ALL {
            if s.may_have_sent() {
                assert!(!s.claimable(true) && !s.claimable(false), "{s}");
                assert!(!s.can_become(IntentState::Claimed), "{s}");
                assert!(!s.can_become(IntentState::Submitting), "{s}");
            }
        }
    }

    #[test]
    fn intercom_never_returns_to_sending() {
        for &s in IntercomTaskState::ALL {
            if s.may_have_sent() {
                assert!(!s.can_become(IntercomTaskState::Outbox), "{s}");
                assert!(!s.can_become(IntercomTaskState::Submitting), "{s}");
            }
            if s.is_terminal() {
                assert!(IntercomTaskState::ALL.iter().all(|&t| !s.can_become(t)));
            }
        }
        assert!(!IntercomTaskState::Outbox.is_terminal());
        assert!(IntercomTaskState::Lost.is_terminal());
    }

    #[test]
    fn not_attempted_is_final_and_never_sent() {
        use IntentState::*;
        assert!(!NotAttempted.may_have_sent() && NotAttempted.is_settled());
        assert!(!NotAttempted.claimable(true));
        assert!(
            IntentState::ALL
                .iter()
                .all(|&t| !NotAttempted.can_become(t))
        );
        let from: Vec<_> = IntentState::ALL
            .iter()
            .filter(|&&s| s.can_become(NotAttempted))
            .collect();
        assert_eq!(from, [&Claimed], "only a claim ends NOT_ATTEMPTED");
    }

    #[test]
    fn names_round_trip() {
        for &s in IntentState::ALL {
            assert_eq!(IntentState::parse(s.as_str()).unwrap(), s);
        }
        for &s in TurnState::ALL {
            assert_eq!(TurnState::parse(s.as_str()).unwrap(), s);
        }
        for &s in AttemptState::ALL {
            assert_eq!(AttemptState::parse(s.as_str()).unwrap(), s);
        }
        for &s in IntercomTaskState::ALL {
            assert_eq!(IntercomTaskState::parse(s.as_str()).unwrap(), s);
        }
        for &s in PackEventKind::ALL {
            assert_eq!(PackEventKind::parse(s.as_str()).unwrap(), s);
        }
    }
}

str_enum!(
    /// State of one experiment of a task run: its instance, from creation to a destruction
    /// core has seen confirmed (seed 000's run journal; `crate::journal`). The outcome states
    /// (SUCCEEDED, VERIFICATION_FAILED, FAILED, REFUSED) are written only once the instance's
    /// destruction is confirmed; an experiment whose instance may still exist is
    /// ROLLBACK_PENDING until the broker confirms (or reaps) it, then DESTROYED.
    ExperimentState {
        /// Journaled before workbench is asked for an instance.
        Creating = "CREATING",
        /// The instance exists; steps run in order.
        Running = "RUNNING",
        /// The plan's verify step started.
        Verifying = "VERIFYING",
        /// Every check of the verifier passed; the instance is destroyed.
        Succeeded = "SUCCEEDED",
        /// The verifier ran and a check failed; the instance is destroyed.
        VerificationFailed = "VERIFICATION_FAILED",
        /// A step ran and did not succeed; the instance is destroyed.
        Failed = "FAILED",
        /// A step (or the instance) was refused before anything of it ran; destroyed if created.
        Refused = "REFUSED",
        /// The instance may exist and its destruction is not confirmed (a step's outcome is
        /// unknown, the run was interrupted, or the destroy's reply was lost): nothing final
        /// is published.
        RollbackPending = "ROLLBACK_PENDING",
        /// A pending rollback's destruction was confirmed.
        Destroyed = "DESTROYED",
    }
);

impl ExperimentState {
    /// The transition table, identical to the database trigger `run_experiment_transition`.
    pub fn can_become(self, to: ExperimentState) -> bool {
        use ExperimentState::*;
        match self {
            Creating => matches!(to, Running | Refused | RollbackPending),
            Running => matches!(to, Verifying | Failed | Refused | RollbackPending),
            Verifying => matches!(to, Succeeded | VerificationFailed | RollbackPending),
            RollbackPending => to == Destroyed,
            _ => false,
        }
    }

    /// No further transition exists.
    pub fn is_terminal(self) -> bool {
        ExperimentState::ALL.iter().all(|&to| !self.can_become(to))
    }

    /// Steps may be granted and started.
    pub fn runs_steps(self) -> bool {
        matches!(self, ExperimentState::Running | ExperimentState::Verifying)
    }
}

str_enum!(
    /// State of one stamped step of an experiment. STARTED is durable before the step is sent
    /// to workbench; a STARTED step whose outcome was lost becomes UNKNOWN and is never
    /// repeated.
    StepState {
        /// Not yet granted (it may wait for the operator's HIL answer).
        Pending = "PENDING",
        /// Ward minted its one-use grant.
        Granted = "GRANTED",
        /// Journaled before the step is sent to workbench: from here it may reach the guest.
        Started = "STARTED",
        /// Workbench reported it ran and succeeded.
        Applied = "APPLIED",
        /// Workbench reported it ran and failed, or refused it before any effect; or it was
        /// granted and never sent, its experiment ended by a crash first (`task/interrupted`).
        Failed = "FAILED",
        /// It may have reached the guest and its outcome is not known.
        Unknown = "UNKNOWN",
    }
);

impl StepState {
    /// The transition table, identical to the database trigger `run_step_transition`.
    pub fn can_become(self, to: StepState) -> bool {
        use StepState::*;
        match self {
            Pending => to == Granted,
            // A grant never redeemed dies with its instance: the step never ran.
            Granted => matches!(to, Started | Failed),
            Started => matches!(to, Applied | Failed | Unknown),
            _ => false,
        }
    }
}
