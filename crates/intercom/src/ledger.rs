//! The Phylactery as the driver's journal (feature `ledger`): the outbound task is the
//! Phylactery's Intercom task/outbox record (`reach_phylactery::intercom`), committed with its
//! attempt under the initial send's decision before that decision is redeemed, SUBMITTING
//! before the first byte, then parked and settled with evidence.
//!
//! Phase → ledger state: Committed → OUTBOX, Sending → SUBMITTING, Submitted/Polling → PARKED,
//! Uncertain/Resending → UNCERTAIN, and every terminal to its namesake. The ledger checks each
//! transition again (in Rust and by its trigger); a refusal there stops the driver.
//!
//! The ledger records the initial send's decision; the decisions of polls and resends are
//! ward's records and the task's evidence trail.

use std::sync::Arc;
use std::time::Duration;

use reach_clock::{Clock, UnixMillis};
use reach_digest::Sha256Digest;
use reach_phylactery::{
    AttemptSettlement, EgressDecisionRef, IntercomTaskRecord, IntercomTaskSpec, IntercomTaskState,
    IntercomUpdate, LedgerError, Phylactery, RunId, TurnState,
};

use crate::decision::{Attempt, DecisionId};
use crate::journal::{Journal, JournalError};
use crate::refusal::IntercomRefusal;
use crate::state::Phase;
use crate::task::{Evidence, OutboundTask, PollBudget, TaskSpec};

/// How long the ledger keeps the send decision usable for persisting (ward's decision TTL).
pub const DECISION_TTL: Duration = Duration::from_secs(30);

/// The ledger state a phase is recorded as.
pub fn ledger_state(phase: Phase) -> IntercomTaskState {
    match phase {
        Phase::Committed => IntercomTaskState::Outbox,
        Phase::Sending => IntercomTaskState::Submitting,
        Phase::Submitted | Phase::Polling => IntercomTaskState::Parked,
        Phase::Uncertain | Phase::Resending => IntercomTaskState::Uncertain,
        Phase::Succeeded => IntercomTaskState::Succeeded,
        Phase::Refused => IntercomTaskState::Refused,
        Phase::Failed => IntercomTaskState::Failed,
        Phase::Cancelled => IntercomTaskState::Cancelled,
        Phase::Expired => IntercomTaskState::Expired,
        Phase::Revoked => IntercomTaskState::Revoked,
        Phase::Lost => IntercomTaskState::Lost,
        Phase::AbandonedBeforeSubmit => IntercomTaskState::AbandonedBeforeSubmit,
    }
}

/// The phase a ledger state is resumed in (PARKED polls on; OUTBOX and SUBMITTING are first
/// settled by [`PhylacteryJournal::resume`], see there).
pub fn resumed_phase(state: IntercomTaskState) -> Phase {
    match state {
        IntercomTaskState::Outbox => Phase::Committed,
        IntercomTaskState::Submitting => Phase::Sending,
        IntercomTaskState::Parked => Phase::Polling,
        IntercomTaskState::Uncertain => Phase::Uncertain,
        IntercomTaskState::Succeeded => Phase::Succeeded,
        IntercomTaskState::Refused => Phase::Refused,
        IntercomTaskState::Failed => Phase::Failed,
        IntercomTaskState::Cancelled => Phase::Cancelled,
        IntercomTaskState::Expired => Phase::Expired,
        IntercomTaskState::Revoked => Phase::Revoked,
        IntercomTaskState::Lost => Phase::Lost,
        IntercomTaskState::AbandonedBeforeSubmit => Phase::AbandonedBeforeSubmit,
    }
}

/// The `ReachTurn@1` terminal an operator task's turn settles in when its task settles in
/// `phase` for the reason `code` (the task's last evidence code); `None` while the task is not
/// terminal (UNCERTAIN included: only evidence or the deadline settles it).
///
/// | Intercom phase            | ReachTurn@1              | why                                    |
/// |---------------------------|--------------------------|----------------------------------------|
/// | SUCCEEDED                 | SUCCEEDED                | after the answer's quarantine passes   |
/// |                           | (REFUSED `quarantine/*`) | core's call when the quarantine fails  |
/// | REFUSED                   | REFUSED                  | REJECTED, INPUT/AUTH_REQUIRED, 4xx     |
/// | FAILED                    | FAILED                   | the peer's FAILED, or proved unsent    |
/// | CANCELLED                 | FAILED                   | no CANCELLED turn; the code keeps it   |
/// | EXPIRED                   | EXPIRED                  | the local deadline                     |
/// | REVOKED                   | REFUSED                  | authorization withdrawn (policy)       |
/// | LOST                      | INDETERMINATE            | work may have happened, nothing proves |
/// | ABANDONED_BEFORE_SUBMIT   | EXPIRED / REFUSED /      | deadline before the send / revoked     |
/// |                           | DEPENDENCY_UNAVAILABLE   | Sigil or decision / ward or egress     |
pub fn turn_outcome(phase: Phase, code: &str) -> Option<TurnState> {
    Some(match phase {
        Phase::Succeeded => TurnState::Succeeded,
        Phase::Refused | Phase::Revoked => TurnState::Refused,
        Phase::Failed | Phase::Cancelled => TurnState::Failed,
        Phase::Expired => TurnState::Expired,
        Phase::Lost => TurnState::Indeterminate,
        Phase::AbandonedBeforeSubmit => {
            if code.starts_with("intercom/deadline") {
                TurnState::Expired
            } else if code.ends_with("/revoked") {
                TurnState::Refused
            } else {
                TurnState::DependencyUnavailable
            }
        }
        Phase::Committed
        | Phase::Sending
        | Phase::Submitted
        | Phase::Polling
        | Phase::Uncertain
        | Phase::Resending => return None,
    })
}

/// Journals one run's outbound tasks in the Phylactery.
#[derive(Debug, Clone)]
pub struct PhylacteryJournal {
    pub vault: Arc<Phylactery>,
    /// The run the tasks belong to.
    pub run: RunId,
    pub clock: Arc<dyn Clock>,
}

fn failed(e: LedgerError) -> JournalError {
    JournalError {
        code: e.code().to_owned(),
    }
}

fn evidence_text(e: &Evidence) -> String {
    let mut text = e.code.clone();
    if let Some(a) = &e.attempt_id {
        text.push_str(&format!(" attempt={a}"));
    }
    if let Some(d) = &e.decision {
        text.push_str(&format!(" decision={d}"));
    }
    if let Some(d) = &e.response_digest {
        text.push_str(&format!(" response={d}"));
    }
    // The CancelTask of a task the peer left open, and its answer (issue #33 item 6).
    if let Some(c) = &e.cancel {
        text.push_str(&format!(" cancel={}", c.code));
        if let Some(a) = &c.attempt_id {
            text.push_str(&format!(" cancel_attempt={a}"));
        }
        if let Some(d) = &c.decision {
            text.push_str(&format!(" cancel_decision={d}"));
        }
        if let Some(d) = &c.response_digest {
            text.push_str(&format!(" cancel_response={d}"));
        }
    }
    text
}

impl Journal for PhylacteryJournal {
    async fn committed(
        &self,
        task: &OutboundTask,
        send: &Attempt,
        decision: &DecisionId,
    ) -> Result<(), JournalError> {
        let decision = reach_phylactery::DecisionId(decision.0.clone());
        self.vault
            .record_egress_decision(
                &self.run,
                &EgressDecisionRef {
                    decision_id: decision.clone(),
                    destination: send.destination.clone(),
                    purpose: crate::decision::PURPOSE.into(),
                    payload_digest: send.payload_digest,
                    expires_at: self.clock.now().plus(DECISION_TTL),
                },
            )
            .await
            .map_err(failed)?;
        self.vault
            .persist_intercom_task(
                &self.run,
                &decision,
                &IntercomTaskSpec {
                    task_id: task.spec().task_id.clone(),
                    peer: send.destination.clone(),
                    message_id: task.spec().message_id.clone(),
                    payload_digest: task.envelope_digest(),
                },
            )
            .await
            .map_err(failed)?;
        Ok(())
    }

    async fn transitioned(&self, task: &OutboundTask, e: &Evidence) -> Result<(), JournalError> {
        let task_id = &task.spec().task_id;
        let record = match self.vault.intercom_task(task_id).await {
            Ok(r) => r,
            // Abandoned before the outbox commit (deadline, revocation before a decision):
            // there is no record to move.
            Err(LedgerError::NotFound { .. })
                if e.from == Phase::Committed && e.to == Phase::AbandonedBeforeSubmit =>
            {
                return Ok(());
            }
            Err(err) => return Err(failed(err)),
        };
        let attempt = record.attempt_id.clone();
        let text = evidence_text(e);
        match (e.from, e.to) {
            (Phase::Committed, Phase::Sending) => self
                .vault
                .mark_attempt_submitting(&attempt)
                .await
                .map_err(failed),
            (Phase::Committed, Phase::AbandonedBeforeSubmit) => self
                .vault
                .settle_attempt(
                    &attempt,
                    &AttemptSettlement::AbandonedBeforeSubmit { detail: text },
                )
                .await
                .map_err(failed),
            // Re-polls and a resend in flight change nothing durable.
            (Phase::Submitted | Phase::Polling, Phase::Polling)
            | (Phase::Uncertain, Phase::Resending)
            | (Phase::Resending, Phase::Uncertain) => Ok(()),
            (Phase::Sending, to) => {
                let settlement = match (to, e.response_digest) {
                    (Phase::Uncertain, _) => AttemptSettlement::Indeterminate {
                        detail: text.clone(),
                    },
                    (_, Some(response_digest)) => AttemptSettlement::Completed { response_digest },
                    (_, None) => AttemptSettlement::Failed {
                        detail: text.clone(),
                    },
                };
                self.vault
                    .settle_attempt(&attempt, &settlement)
                    .await
                    .map_err(failed)?;
                self.advance(task, to, text).await
            }
            (_, to) => self.advance(task, to, text).await,
        }
    }
}

fn journal_refusal(e: LedgerError) -> IntercomRefusal {
    IntercomRefusal::Journal {
        code: e.code().to_owned(),
    }
}

impl PhylacteryJournal {
    /// Durable Stasis: rebuilds a journaled task after a restart from `spec` (which must fix
    /// the same envelope the ledger recorded).
    ///
    /// - OUTBOX: SUBMITTING was never durable, so no byte left: abandoned before submit.
    /// - SUBMITTING: the process died with the send in flight: UNCERTAIN (never resent
    ///   blindly).
    /// - PARKED: polling resumes with the peer's task id. UNCERTAIN and terminals as recorded.
    pub async fn resume(&self, spec: TaskSpec) -> Result<OutboundTask, IntercomRefusal> {
        let record = self
            .vault
            .intercom_task(&spec.task_id)
            .await
            .map_err(journal_refusal)?;
        let fresh = OutboundTask::new(spec.clone())?;
        if record.message_id != spec.message_id {
            return Err(IntercomRefusal::ResumeMismatch("message_id"));
        }
        if record.payload_digest != fresh.envelope_digest().to_string() {
            return Err(IntercomRefusal::ResumeMismatch("envelope digest"));
        }
        let phase = self.settle_interrupted(&record).await?;
        let before = self.polls_before(&record, spec.polls.interval);
        OutboundTask::restored(spec, phase, record.remote_task_id, before)
    }

    /// An upper bound of the polls any earlier process numbered for this task, so the next
    /// poll's attempt id is new (the ledger keeps no poll count: polls change nothing durable).
    /// Polls are at least `interval` apart and the first follows the outbox commit, so poll
    /// number `m` was sent no earlier than `created_at + (m - 2) * interval`, also across
    /// earlier restarts that continued this way; hence `m <= elapsed / interval + 2`. Assumes
    /// the interval did not shrink between restarts.
    fn polls_before(&self, record: &IntercomTaskRecord, interval: Duration) -> u32 {
        let elapsed = (self.clock.now().0 - record.created_at.0).max(0);
        let step = i64::try_from(interval.as_millis())
            .unwrap_or(i64::MAX)
            .max(1);
        u32::try_from(elapsed / step + 2).unwrap_or(u32::MAX / 2)
    }

    /// Durable Stasis without the text: rebuilds a task core's resumer found in the ledger
    /// (`Phylactery::unsettled_intercom_tasks`, or re-read by task id). OUTBOX and SUBMITTING are settled as in
    /// [`PhylacteryJournal::resume`]; the task keeps only its envelope's digest, so it is
    /// polled, expired or settled, never sent again. `deadline` is the task's local deadline
    /// (from its outbox commit), `polls` the budget of this drive.
    pub async fn resume_recorded(
        &self,
        record: &IntercomTaskRecord,
        deadline: UnixMillis,
        polls: PollBudget,
    ) -> Result<OutboundTask, IntercomRefusal> {
        let digest: Sha256Digest = record
            .payload_digest
            .parse()
            .map_err(|_| IntercomRefusal::ResumeMismatch("envelope digest"))?;
        let phase = self.settle_interrupted(record).await?;
        let spec = TaskSpec {
            task_id: record.task_id.clone(),
            message_id: record.message_id.clone(),
            context_id: None,
            parts: Vec::new(),
            deadline,
            polls,
        };
        let before = self.polls_before(record, polls.interval);
        OutboundTask::restored_without_envelope(
            spec,
            digest,
            phase,
            record.remote_task_id.clone(),
            before,
        )
    }

    /// The phase a journaled task resumes in, after settling what a crash interrupted:
    ///
    /// - OUTBOX: SUBMITTING was never durable, so no byte left: abandoned before submit.
    /// - SUBMITTING: the process died with the send in flight: UNCERTAIN (never resent
    ///   blindly).
    /// - PARKED: polling resumes with the peer's task id. UNCERTAIN and terminals as recorded.
    async fn settle_interrupted(
        &self,
        record: &IntercomTaskRecord,
    ) -> Result<Phase, IntercomRefusal> {
        let phase = match record.state {
            IntercomTaskState::Outbox => {
                self.vault
                    .settle_attempt(
                        &record.attempt_id,
                        &AttemptSettlement::AbandonedBeforeSubmit {
                            detail: "intercom/resumed-before-submit".into(),
                        },
                    )
                    .await
                    .map_err(journal_refusal)?;
                Phase::AbandonedBeforeSubmit
            }
            IntercomTaskState::Submitting => {
                let evidence = "intercom/resumed-after-crash-in-send".to_owned();
                self.vault
                    .settle_attempt(
                        &record.attempt_id,
                        &AttemptSettlement::Indeterminate {
                            detail: evidence.clone(),
                        },
                    )
                    .await
                    .map_err(journal_refusal)?;
                self.vault
                    .advance_intercom_task(
                        &record.task_id,
                        &IntercomUpdate {
                            to: IntercomTaskState::Uncertain,
                            remote_task_id: None,
                            evidence: Some(evidence),
                        },
                    )
                    .await
                    .map_err(journal_refusal)?;
                Phase::Uncertain
            }
            other => resumed_phase(other),
        };
        if phase == Phase::Polling && record.remote_task_id.is_none() {
            return Err(IntercomRefusal::ResumeMismatch("remote task id"));
        }
        Ok(phase)
    }

    async fn advance(
        &self,
        task: &OutboundTask,
        to: Phase,
        evidence: String,
    ) -> Result<(), JournalError> {
        let to = ledger_state(to);
        let remote = task.remote_task_id().map(str::to_owned);
        self.vault
            .advance_intercom_task(
                &task.spec().task_id,
                &IntercomUpdate {
                    to,
                    remote_task_id: remote,
                    evidence: Some(evidence),
                },
            )
            .await
            .map_err(failed)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_terminal_phase_has_a_turn_outcome_and_no_other_does() {
        let expect = [
            (
                Phase::Succeeded,
                "a2a/TASK_STATE_COMPLETED",
                TurnState::Succeeded,
            ),
            (
                Phase::Refused,
                "a2a/TASK_STATE_REJECTED",
                TurnState::Refused,
            ),
            (Phase::Failed, "a2a/TASK_STATE_FAILED", TurnState::Failed),
            (
                Phase::Cancelled,
                "a2a/TASK_STATE_CANCELED",
                TurnState::Failed,
            ),
            (Phase::Expired, "intercom/deadline", TurnState::Expired),
            (Phase::Revoked, "sigil/revoked", TurnState::Refused),
            (Phase::Lost, "a2a/task-not-found", TurnState::Indeterminate),
            (
                Phase::AbandonedBeforeSubmit,
                "intercom/deadline-before-send",
                TurnState::Expired,
            ),
            (
                Phase::AbandonedBeforeSubmit,
                "sigil/revoked",
                TurnState::Refused,
            ),
            (
                Phase::AbandonedBeforeSubmit,
                "decision/unknown",
                TurnState::DependencyUnavailable,
            ),
        ];
        for (phase, code, turn) in expect {
            assert_eq!(turn_outcome(phase, code), Some(turn), "{phase} {code}");
        }
        for &phase in Phase::ALL {
            assert_eq!(
                turn_outcome(phase, "").is_some(),
                phase.is_terminal(),
                "{phase}"
            );
        }
    }

    #[test]
    fn a_resumed_phase_is_recorded_in_the_same_state() {
        for &state in IntercomTaskState::ALL {
            assert_eq!(ledger_state(resumed_phase(state)), state, "{state}");
        }
    }
}
