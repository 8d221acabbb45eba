//! The Intercom (A2A) task/outbox record: what Reach asked an enrolled peer to do.
//!
//! The seed's law for A2A: commit the task/outbox before sending, mark SUBMITTING before the
//! first byte, then park in Durable Stasis and poll; an ambiguous initial send is preserved for
//! reconciliation and never resent. So the task record is its own row, written in the **same
//! transaction** as its `ServiceJobAttempt@1` (channel `INTERCOM_TASK`) under one EgressDecision,
//! and it moves to SUBMITTING in the same transaction as the attempt.
//!
//! The attempt records the transport exchange (persisted, submitted, answered or lost); the task
//! records the protocol lifecycle (parked, the peer's authenticated terminal, expiry, revocation,
//! loss). Transitions are checked by [`IntercomTaskState::can_become`] and again by the database
//! trigger `intercom_task_transition`.

use reach_digest::Sha256Digest;

use crate::Phylactery;
use crate::attempt::{AttemptChannel, AttemptRecord, AttemptSpec, persist_attempt_in};
use crate::backend::{Row, args};
use crate::clock::UnixMillis;
use crate::error::{LedgerError, Result};
use crate::ids::{AttemptId, DecisionId, RunId, TurnId};
use crate::state::{IntercomTaskState, TurnState};

/// What Reach will send to a peer, fixed before any byte leaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntercomTaskSpec {
    /// Reach's task id for this exchange (survives restarts; the A2A task identity).
    pub task_id: String,
    /// The enrolled peer (its destination name, as the EgressDecision binds it).
    pub peer: String,
    /// The A2A message id of the initial Send Message; a retry preserves it exactly.
    pub message_id: String,
    /// Digest of the exact envelope that will be sent.
    pub payload_digest: Sha256Digest,
}

/// One task/outbox row, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntercomTaskRecord {
    pub task_id: String,
    pub attempt_id: AttemptId,
    pub decision_id: DecisionId,
    pub peer: String,
    pub message_id: String,
    pub payload_digest: String,
    pub state: IntercomTaskState,
    /// The peer's task id once it accepted the task.
    pub remote_task_id: Option<String>,
    /// Secret-free evidence of the latest transition.
    pub evidence: Option<String>,
    /// When the task was committed to the outbox: its local deadline counts from here.
    pub created_at: UnixMillis,
}

impl IntercomTaskRecord {
    fn from_row(r: &Row) -> Result<Self> {
        Ok(Self {
            task_id: r.text("task_id")?,
            attempt_id: AttemptId(r.text("attempt_id")?),
            decision_id: DecisionId(r.text("decision_id")?),
            peer: r.text("peer")?,
            message_id: r.text("message_id")?,
            payload_digest: r.text("payload_digest")?,
            state: IntercomTaskState::parse(&r.text("state")?)?,
            remote_task_id: r.opt_text("remote_task_id")?,
            evidence: r.opt_text("evidence")?,
            created_at: UnixMillis(r.int("created_at")?),
        })
    }
}

/// A task whose work is not finished: the task itself is not terminal, or it is and the turn it
/// runs in is still OPEN (core stopped between the two). What core's resumer drives at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsettledIntercomTask {
    pub record: IntercomTaskRecord,
    pub run_id: RunId,
    pub turn_id: TurnId,
    pub turn_state: TurnState,
    /// The Pattern the run executes (the resumer drives only its own).
    pub pattern_id: String,
}

/// A protocol-level update of a submitted task (SUBMITTING and abandonment move with the
/// attempt, not through here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntercomUpdate {
    pub to: IntercomTaskState,
    /// The peer's task id (required for PARKED).
    pub remote_task_id: Option<String>,
    /// Secret-free evidence: the authenticated terminal, deadline, revocation or loss proof.
    /// Required for every transition out of UNCERTAIN and for LOST.
    pub evidence: Option<String>,
}

const SELECT_TASK: &str =
    "SELECT task_id, attempt_id, decision_id, peer, message_id, payload_digest, state,
        remote_task_id, evidence, created_at FROM intercom_task WHERE task_id = $1";

/// Non-terminal tasks, and terminal ones whose turn is still OPEN, oldest first. A full scan of
/// `intercom_task`: one row per outbound A2A task, far fewer than turns, so no index is kept
/// for it (no migration); the joins go through primary and unique keys.
const SELECT_UNSETTLED: &str = "SELECT t.task_id AS task_id, t.attempt_id AS attempt_id,
        t.decision_id AS decision_id, t.peer AS peer, t.message_id AS message_id,
        t.payload_digest AS payload_digest, t.state AS state, t.remote_task_id AS remote_task_id,
        t.evidence AS evidence, t.created_at AS created_at, a.run_id AS run_id,
        r.turn_id AS turn_id, r.pattern_id AS pattern_id, u.state AS turn_state
     FROM intercom_task t
     JOIN service_job_attempt a ON a.attempt_id = t.attempt_id
     JOIN run r ON r.run_id = a.run_id
     JOIN reach_turn u ON u.turn_id = r.turn_id
     WHERE t.state IN ('OUTBOX', 'SUBMITTING', 'PARKED', 'UNCERTAIN') OR u.state = 'OPEN'
     ORDER BY t.created_at, t.task_id";

impl Phylactery {
    /// Every Intercom task whose work is not finished ([`UnsettledIntercomTask`]): the Stasis
    /// core resumes at start without an operator asking again.
    pub async fn unsettled_intercom_tasks(&self) -> Result<Vec<UnsettledIntercomTask>> {
        let rows = self.pool().fetch_all(SELECT_UNSETTLED, &args![]).await?;
        rows.iter()
            .map(|r| {
                Ok(UnsettledIntercomTask {
                    record: IntercomTaskRecord::from_row(r)?,
                    run_id: RunId(r.text("run_id")?),
                    turn_id: TurnId(r.text("turn_id")?),
                    turn_state: TurnState::parse(&r.text("turn_state")?)?,
                    pattern_id: r.text("pattern_id")?,
                })
            })
            .collect()
    }

    /// Persists the Intercom task/outbox record and its attempt (channel `INTERCOM_TASK`) in one
    /// transaction, under a recorded, unused, unexpired decision binding this peer and payload.
    pub async fn persist_intercom_task(
        &self,
        run: &RunId,
        decision: &DecisionId,
        task: &IntercomTaskSpec,
    ) -> Result<(AttemptRecord, IntercomTaskRecord)> {
        if task.task_id.is_empty() || task.peer.is_empty() || task.message_id.is_empty() {
            return Err(LedgerError::InvalidInput(
                "an Intercom task names its task id, peer and message id",
            ));
        }
        self.require_serving().await?;
        let now = self.now();
        let spec = AttemptSpec {
            channel: AttemptChannel::IntercomTask,
            destination: task.peer.clone(),
            request_digest: task.payload_digest,
            protocol_id: format!("a2a task={} message={}", task.task_id, task.message_id),
        };
        let mut tx = self.pool().begin().await?;
        let attempt = persist_attempt_in(&mut tx, run, decision, &spec, now).await?;
        let inserted = tx
            .execute(
                "INSERT INTO intercom_task (task_id, attempt_id, decision_id, peer, message_id, payload_digest,
                    state, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, 'OUTBOX', $7, $7) ON CONFLICT DO NOTHING",
                &args![
                    &task.task_id,
                    &attempt.attempt_id.0,
                    &decision.0,
                    &task.peer,
                    &task.message_id,
                    task.payload_digest.to_string(),
                    now.0
                ],
            )
            .await?;
        if inserted != 1 {
            return Err(LedgerError::InvalidInput(
                "the Intercom task id is already recorded",
            ));
        }
        tx.commit().await?;
        let record = IntercomTaskRecord {
            task_id: task.task_id.clone(),
            attempt_id: attempt.attempt_id.clone(),
            decision_id: decision.clone(),
            peer: task.peer.clone(),
            message_id: task.message_id.clone(),
            payload_digest: task.payload_digest.to_string(),
            state: IntercomTaskState::Outbox,
            remote_task_id: None,
            evidence: None,
            created_at: now,
        };
        Ok((attempt, record))
    }

    /// Reads one task/outbox record.
    pub async fn intercom_task(&self, task_id: &str) -> Result<IntercomTaskRecord> {
        let row = self
            .pool()
            .fetch_optional(SELECT_TASK, &args![task_id])
            .await?
            .ok_or_else(|| LedgerError::NotFound {
                record: "IntercomTask",
                id: task_id.to_owned(),
            })?;
        IntercomTaskRecord::from_row(&row)
    }

    /// Applies a checked protocol transition to a submitted task.
    pub async fn advance_intercom_task(
        &self,
        task_id: &str,
        update: &IntercomUpdate,
    ) -> Result<IntercomTaskRecord> {
        use IntercomTaskState::*;
        if matches!(update.to, Outbox | Submitting | AbandonedBeforeSubmit) {
            return Err(LedgerError::InvalidInput(
                "OUTBOX, SUBMITTING and abandonment move with the task's attempt",
            ));
        }
        if update.to == Parked && update.remote_task_id.as_deref().unwrap_or("").is_empty() {
            return Err(LedgerError::InvalidInput(
                "a parked task names the peer's task id",
            ));
        }
        let current = self.intercom_task(task_id).await?;
        let needs_evidence = current.state == Uncertain || update.to == Lost;
        if needs_evidence && update.evidence.as_deref().unwrap_or("").is_empty() {
            return Err(LedgerError::InvalidInput(
                "settling an uncertain or lost task needs independent evidence",
            ));
        }
        if !current.state.can_become(update.to) {
            return Err(LedgerError::WrongState {
                record: "IntercomTask",
                id: task_id.to_owned(),
                state: current.state.to_string(),
                expected: "a state that may become the requested one",
            });
        }
        let now = self.now();
        let changed = self
            .pool()
            .execute(
                "UPDATE intercom_task SET state = $1, remote_task_id = COALESCE($2, remote_task_id),
                    evidence = COALESCE($3, evidence), updated_at = $4
                 WHERE task_id = $5 AND state = $6",
                &args![
                    update.to.as_str(),
                    update.remote_task_id.clone(),
                    update.evidence.clone(),
                    now.0,
                    task_id,
                    current.state.as_str()
                ],
            )
            .await?;
        if changed != 1 {
            let now_state = self.intercom_task(task_id).await?.state;
            return Err(LedgerError::WrongState {
                record: "IntercomTask",
                id: task_id.to_owned(),
                state: now_state.to_string(),
                expected: current.state.as_str(),
            });
        }
        self.intercom_task(task_id).await
    }
}
