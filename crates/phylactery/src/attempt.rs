//! The middle of the chain: Run / Pattern revision, `PublicCorpusSnapshot@1` and
//! `CorpusEvidenceBundle@1` refs, context lineage with its Cut receipt, `EgressDecision` refs,
//! and `ServiceJobAttempt@1` (or the Intercom task/outbox attempt for A2A).
//!
//! An attempt is persisted, then marked SUBMITTING, before any byte goes to a provider or peer.
//! Each attempt consumes exactly one EgressDecision (unique in the table), and a run may start a
//! new attempt only when every earlier one has a proved outcome (a partial unique index), so a
//! retry always needs a fresh decision and never overlaps an attempt that may still be running.

use reach_digest::Sha256Digest;

use crate::Phylactery;
use crate::backend::{Durability, Row, Tx, args};
use crate::clock::UnixMillis;
use crate::error::{LedgerError, Result};
use crate::ids::{self, AttemptId, DecisionId, RunId, TurnId};
use crate::state::{AttemptState, TurnState};

/// The exact Pattern (workflow) revision a Run executes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternRevision {
    pub pattern_id: String,
    pub revision: String,
}

/// Reference to the active `PublicCorpusSnapshot@1` the run grounded in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorpusSnapshotRef {
    pub snapshot_digest: Sha256Digest,
    pub corpus_id: String,
    /// Source commit or tag the snapshot was built from.
    pub source_revision: String,
}

/// Reference to the sealed `CorpusEvidenceBundle@1` of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvidenceBundleRef {
    pub bundle_digest: Sha256Digest,
    pub passage_count: i64,
}

/// Context lineage and the Privacy Cut receipt of what may leave the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextLineage {
    pub lineage_digest: Sha256Digest,
    /// Disclosure labels, comma-separated, secret-free.
    pub labels: String,
    pub cut_receipt_digest: Sha256Digest,
}

/// Reference to a Ward-issued `EgressDecision` (the decision itself lives in Ward's store).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressDecisionRef {
    pub decision_id: DecisionId,
    pub destination: String,
    pub purpose: String,
    pub payload_digest: Sha256Digest,
    pub expires_at: UnixMillis,
}

/// Provider call or A2A Intercom task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptChannel {
    /// `ServiceJobAttempt@1` to a model provider (Portal).
    ServiceJob,
    /// Intercom task/outbox record for an enrolled A2A peer.
    IntercomTask,
}

impl AttemptChannel {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::ServiceJob => "SERVICE_JOB",
            Self::IntercomTask => "INTERCOM_TASK",
        }
    }
}

/// What an attempt will send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptSpec {
    pub channel: AttemptChannel,
    pub destination: String,
    pub request_digest: Sha256Digest,
    /// The protocol identity that survives restarts: provider request id / idempotency key, or the
    /// A2A task and message ids. Never an SDK object.
    pub protocol_id: String,
}

/// How the owner settles a submitted (or never-submitted) attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptSettlement {
    /// From PERSISTED: proved that nothing was transmitted.
    AbandonedBeforeSubmit { detail: String },
    /// From SUBMITTING: a validated response arrived.
    Completed { response_digest: Sha256Digest },
    /// From SUBMITTING: the remote side answered with a known failure.
    Failed { detail: String },
    /// From SUBMITTING: the outcome was lost.
    Indeterminate { detail: String },
}

/// Independent evidence settling an INDETERMINATE attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptEvidence {
    Completed {
        response_digest: Sha256Digest,
        evidence: String,
    },
    Failed {
        evidence: String,
    },
}

/// One attempt row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRecord {
    pub attempt_id: AttemptId,
    pub run_id: RunId,
    pub attempt_no: i64,
    pub decision_id: DecisionId,
    pub state: AttemptState,
}

impl AttemptRecord {
    fn from_row(r: &Row) -> Result<Self> {
        Ok(Self {
            attempt_id: AttemptId(r.text("attempt_id")?),
            run_id: RunId(r.text("run_id")?),
            attempt_no: r.int("attempt_no")?,
            decision_id: DecisionId(r.text("decision_id")?),
            state: AttemptState::parse(&r.text("state")?)?,
        })
    }
}

impl Phylactery {
    /// Starts (or, on redelivery, finds) the Run of an OPEN turn for an exact Pattern revision.
    pub async fn begin_run(&self, turn: &TurnId, pattern: &PatternRevision) -> Result<RunId> {
        self.require_serving().await?;
        let state = self.turn_state(turn).await?;
        if state != TurnState::Open {
            return Err(LedgerError::TurnAlreadyTerminal {
                turn_id: turn.0.clone(),
                state: state.to_string(),
            });
        }
        let run = ids::run_id(turn, &pattern.pattern_id, &pattern.revision);
        // Deferred, like every record that only leads up to the turn's commit or to a
        // SUBMITTING (which flushes it first). See `backend::Durability`.
        self.pool()
            .execute_with(
                Durability::Deferred,
                "INSERT INTO run (run_id, turn_id, pattern_id, pattern_revision, started_at)
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                &args![
                    &run.0,
                    &turn.0,
                    &pattern.pattern_id,
                    &pattern.revision,
                    self.now().0
                ],
            )
            .await?;
        // A different pattern revision for the same turn hits the UNIQUE(turn_id) and inserts
        // nothing; the lookup by run id then fails, which is the refusal.
        self.pool()
            .fetch_optional("SELECT run_id FROM run WHERE run_id = $1", &args![&run.0])
            .await?
            .ok_or(LedgerError::InvalidInput(
                "the turn already runs another pattern revision",
            ))?;
        Ok(run)
    }

    /// Records the snapshot the run grounded in and its sealed evidence bundle.
    pub async fn record_grounding(
        &self,
        run: &RunId,
        snapshot: &CorpusSnapshotRef,
        bundle: &EvidenceBundleRef,
    ) -> Result<()> {
        let now = self.now();
        let mut tx = self.pool().begin_with(Durability::Deferred).await?;
        tx.execute(
            "INSERT INTO public_corpus_snapshot_ref (snapshot_digest, corpus_id, source_revision, first_seen_at)
             VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
            &args![snapshot.snapshot_digest.to_string(), &snapshot.corpus_id, &snapshot.source_revision, now.0],
        )
        .await?;
        tx.execute(
            "INSERT INTO corpus_evidence_bundle_ref (run_id, bundle_digest, snapshot_digest, passage_count, recorded_at)
             VALUES ($1, $2, $3, $4, $5)",
            &args![
                &run.0,
                bundle.bundle_digest.to_string(),
                snapshot.snapshot_digest.to_string(),
                bundle.passage_count,
                now.0
            ],
        )
        .await?;
        tx.commit().await
    }

    /// Records the context lineage and Cut receipt of the run.
    pub async fn record_context(&self, run: &RunId, lineage: &ContextLineage) -> Result<()> {
        self.pool()
            .execute_with(
                Durability::Deferred,
                "INSERT INTO context_lineage (run_id, lineage_digest, labels, cut_receipt_digest, recorded_at)
                 VALUES ($1, $2, $3, $4, $5)",
                &args![
                    &run.0,
                    lineage.lineage_digest.to_string(),
                    &lineage.labels,
                    lineage.cut_receipt_digest.to_string(),
                    self.now().0
                ],
            )
            .await?;
        Ok(())
    }

    /// Records a Ward EgressDecision issued for this run.
    pub async fn record_egress_decision(&self, run: &RunId, d: &EgressDecisionRef) -> Result<()> {
        self.pool()
            .execute_with(
                Durability::Deferred,
                "INSERT INTO egress_decision_ref (decision_id, run_id, destination, purpose, payload_digest, expires_at, recorded_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
                &args![
                    &d.decision_id.0,
                    &run.0,
                    &d.destination,
                    &d.purpose,
                    d.payload_digest.to_string(),
                    d.expires_at.0,
                    self.now().0
                ],
            )
            .await?;
        Ok(())
    }

    /// Whether a decision bound to exactly `payload_digest` was recorded on the run. Core asks
    /// it after a restart, for effects it otherwise tracks in memory (an `/ask`'s deferred
    /// acknowledgement, whose answer must then edit the original instead of calling back).
    pub async fn decision_recorded_for(
        &self,
        run: &RunId,
        payload_digest: &Sha256Digest,
    ) -> Result<bool> {
        Ok(self
            .pool()
            .fetch_optional(
                "SELECT decision_id FROM egress_decision_ref WHERE run_id = $1 AND payload_digest = $2 LIMIT 1",
                &args![&run.0, payload_digest.to_string()],
            )
            .await?
            .is_some())
    }

    /// Persists a new attempt under a recorded, unused, unexpired decision whose destination and
    /// payload digest match the attempt exactly.
    ///
    /// An Intercom task is persisted with [`Phylactery::persist_intercom_task`], which writes
    /// its task/outbox record in the same transaction; this path refuses that channel.
    pub async fn persist_attempt(
        &self,
        run: &RunId,
        decision: &DecisionId,
        spec: &AttemptSpec,
    ) -> Result<AttemptRecord> {
        if spec.channel == AttemptChannel::IntercomTask {
            return Err(LedgerError::InvalidInput(
                "an Intercom attempt is persisted with its task record (persist_intercom_task)",
            ));
        }
        self.require_serving().await?;
        let now = self.now();
        let mut tx = self.pool().begin().await?;
        let record = persist_attempt_in(&mut tx, run, decision, spec, now).await?;
        tx.commit().await?;
        Ok(record)
    }
}

/// Checks the decision and the run's earlier attempts and inserts a PERSISTED attempt, inside
/// the caller's transaction (the Intercom path adds its task record to the same commit).
pub(crate) async fn persist_attempt_in(
    tx: &mut Tx,
    run: &RunId,
    decision: &DecisionId,
    spec: &AttemptSpec,
    now: UnixMillis,
) -> Result<AttemptRecord> {
    let d = tx
            .fetch_optional(
                "SELECT run_id, destination, payload_digest, expires_at FROM egress_decision_ref WHERE decision_id = $1",
                &args![&decision.0],
            )
            .await?
            .ok_or_else(|| LedgerError::NotFound {
                record: "EgressDecision",
                id: decision.0.clone(),
            })?;
    if d.text("run_id")? != run.0
        || d.text("destination")? != spec.destination
        || d.text("payload_digest")? != spec.request_digest.to_string()
    {
        return Err(LedgerError::InvalidInput(
            "the egress decision binds another run, destination or payload",
        ));
    }
    if UnixMillis(d.int("expires_at")?) <= now {
        return Err(LedgerError::InvalidInput("the egress decision expired"));
    }
    if tx
        .fetch_optional(
            "SELECT attempt_id FROM service_job_attempt WHERE decision_id = $1",
            &args![&decision.0],
        )
        .await?
        .is_some()
    {
        return Err(LedgerError::DecisionReused {
            decision_id: decision.0.clone(),
        });
    }
    if tx
        .fetch_optional(
            "SELECT attempt_id FROM service_job_attempt
                 WHERE run_id = $1 AND state IN ('PERSISTED', 'SUBMITTING', 'INDETERMINATE')",
            &args![&run.0],
        )
        .await?
        .is_some()
    {
        return Err(LedgerError::UnsettledAttempt {
            run_id: run.0.clone(),
        });
    }
    let no = tx
            .fetch_optional(
                "SELECT COALESCE(MAX(attempt_no), 0) + 1 AS next FROM service_job_attempt WHERE run_id = $1",
                &args![&run.0],
            )
            .await?
            .ok_or_else(|| LedgerError::Corrupt("no attempt count".into()))?
            .int("next")?;
    let id = ids::attempt_id(run, no);
    tx.execute(
            "INSERT INTO service_job_attempt (attempt_id, run_id, attempt_no, channel, decision_id, destination,
                request_digest, protocol_id, state, persisted_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'PERSISTED', $9)",
            &args![
                &id.0,
                &run.0,
                no,
                spec.channel.as_str(),
                &decision.0,
                &spec.destination,
                spec.request_digest.to_string(),
                &spec.protocol_id,
                now.0
            ],
        )
        .await?;
    Ok(AttemptRecord {
        attempt_id: id,
        run_id: run.clone(),
        attempt_no: no,
        decision_id: decision.clone(),
        state: AttemptState::Persisted,
    })
}

impl Phylactery {
    /// Persists SUBMITTING; only after this may the first byte leave.
    pub async fn mark_attempt_submitting(&self, id: &AttemptId) -> Result<()> {
        let now = self.now();
        let mut tx = self.pool().begin().await?;
        let changed = tx
            .execute(
                "UPDATE service_job_attempt SET state = 'SUBMITTING', submitting_at = $1 WHERE attempt_id = $2 AND state = 'PERSISTED'",
                &args![now.0, &id.0],
            )
            .await?;
        if changed != 1 {
            drop(tx);
            return Err(self.attempt_wrong_state(id, AttemptState::Persisted).await);
        }
        // An Intercom attempt's task record moves with it (no row for a provider call).
        tx.execute(
            "UPDATE intercom_task SET state = 'SUBMITTING', submitting_at = $1, updated_at = $1
             WHERE attempt_id = $2 AND state = 'OUTBOX'",
            &args![now.0, &id.0],
        )
        .await?;
        tx.commit().await
    }

    /// Settles an attempt from what its owner knows.
    pub async fn settle_attempt(&self, id: &AttemptId, s: &AttemptSettlement) -> Result<()> {
        let now = self.now();
        let (from, to, response, detail) = match s {
            AttemptSettlement::AbandonedBeforeSubmit { detail } => (
                AttemptState::Persisted,
                AttemptState::AbandonedBeforeSubmit,
                None,
                detail.clone(),
            ),
            AttemptSettlement::Completed { response_digest } => (
                AttemptState::Submitting,
                AttemptState::Completed,
                Some(response_digest.to_string()),
                String::new(),
            ),
            AttemptSettlement::Failed { detail } => (
                AttemptState::Submitting,
                AttemptState::Failed,
                None,
                detail.clone(),
            ),
            AttemptSettlement::Indeterminate { detail } => (
                AttemptState::Submitting,
                AttemptState::Indeterminate,
                None,
                detail.clone(),
            ),
        };
        debug_assert!(from.can_become(to));
        let mut tx = self.pool().begin().await?;
        let changed = tx
            .execute(
                "UPDATE service_job_attempt SET state = $1, response_digest = $2, detail = $3, settled_at = $4
                 WHERE attempt_id = $5 AND state = $6",
                &args![to.as_str(), response, &detail, now.0, &id.0, from.as_str()],
            )
            .await?;
        if changed != 1 {
            drop(tx);
            return Err(self.attempt_wrong_state(id, from).await);
        }
        if to == AttemptState::AbandonedBeforeSubmit {
            // Nothing left for the peer either: the outbox record is abandoned with it.
            tx.execute(
                "UPDATE intercom_task SET state = 'ABANDONED_BEFORE_SUBMIT', evidence = $1, updated_at = $2
                 WHERE attempt_id = $3 AND state = 'OUTBOX'",
                &args![&detail, now.0, &id.0],
            )
            .await?;
        }
        tx.commit().await
    }

    /// Settles an INDETERMINATE attempt from independent evidence.
    pub async fn reconcile_attempt(
        &self,
        id: &AttemptId,
        e: &AttemptEvidence,
        recorded_by: &str,
    ) -> Result<()> {
        let now = self.now();
        let (to, response, text) = match e {
            AttemptEvidence::Completed {
                response_digest,
                evidence,
            } => (
                AttemptState::Completed,
                Some(response_digest.to_string()),
                evidence.clone(),
            ),
            AttemptEvidence::Failed { evidence } => (AttemptState::Failed, None, evidence.clone()),
        };
        let mut tx = self.pool().begin().await?;
        let changed = tx
            .execute(
                "UPDATE service_job_attempt SET state = $1, response_digest = $2, settled_at = $3
                 WHERE attempt_id = $4 AND state = 'INDETERMINATE'",
                &args![to.as_str(), response, now.0, &id.0],
            )
            .await?;
        if changed != 1 {
            drop(tx);
            return Err(self
                .attempt_wrong_state(id, AttemptState::Indeterminate)
                .await);
        }
        tx.execute(
            "INSERT INTO attempt_reconciliation (attempt_id, outcome, evidence, recorded_by, recorded_at)
             VALUES ($1, $2, $3, $4, $5)",
            &args![&id.0, to.as_str(), &text, recorded_by, now.0],
        )
        .await?;
        tx.commit().await
    }

    /// Reads one attempt.
    pub async fn attempt(&self, id: &AttemptId) -> Result<AttemptRecord> {
        let row = self
            .pool()
            .fetch_optional(
                "SELECT attempt_id, run_id, attempt_no, decision_id, state FROM service_job_attempt WHERE attempt_id = $1",
                &args![&id.0],
            )
            .await?
            .ok_or_else(|| LedgerError::NotFound {
                record: "ServiceJobAttempt@1",
                id: id.0.clone(),
            })?;
        AttemptRecord::from_row(&row)
    }

    pub(crate) async fn attempt_wrong_state(
        &self,
        id: &AttemptId,
        expected: AttemptState,
    ) -> LedgerError {
        match self.attempt(id).await {
            Ok(r) => LedgerError::WrongState {
                record: "ServiceJobAttempt@1",
                id: id.0.clone(),
                state: r.state.to_string(),
                expected: expected.as_str(),
            },
            Err(e) => e,
        }
    }
}
