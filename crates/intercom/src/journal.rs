//! Where the driver makes each step durable before it acts on it.
//!
//! Seed 001: "Commit the task/outbox before sending, then park in Durable Stasis while
//! waiting." The driver calls [`Journal::committed`] once the initial send's decision exists
//! and before it is redeemed, and [`Journal::transitioned`] after every transition; the
//! transition to SENDING is journaled before the first byte, so a journal failure there stops
//! the send. The Phylactery implementation is `ledger::PhylacteryJournal` (feature `ledger`).

use std::future::Future;

use crate::decision::{Attempt, DecisionId};
use crate::task::{Evidence, OutboundTask};

/// A journal write failed; the driver stops and reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}")]
pub struct JournalError {
    pub code: String,
}

/// Durable record of an outbound task.
pub trait Journal: Send + Sync {
    /// The task is committed to the outbox under the initial send's decision.
    fn committed(
        &self,
        task: &OutboundTask,
        send: &Attempt,
        decision: &DecisionId,
    ) -> impl Future<Output = Result<(), JournalError>> + Send;

    /// The task made the transition `evidence` records (its phase is already `evidence.to`).
    fn transitioned(
        &self,
        task: &OutboundTask,
        evidence: &Evidence,
    ) -> impl Future<Output = Result<(), JournalError>> + Send;
}

/// A journal that keeps nothing (the task value itself is the only record).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoJournal;

impl Journal for NoJournal {
    async fn committed(
        &self,
        _task: &OutboundTask,
        _send: &Attempt,
        _decision: &DecisionId,
    ) -> Result<(), JournalError> {
        Ok(())
    }

    async fn transitioned(
        &self,
        _task: &OutboundTask,
        _evidence: &Evidence,
    ) -> Result<(), JournalError> {
        Ok(())
    }
}
