//! Restart recovery: reconcile in-flight work from what the records prove, nothing more.
//!
//! - An intent in SUBMITTING whose lease expired may have been sent: it becomes UNKNOWN (with a
//!   `ReachDelivery@1` saying so) and waits for evidence. It is never reclaimed as unsent.
//! - An intent in CLAIMED needs nothing: its lease expires and a claimer takes it with a higher
//!   generation.
//! - An attempt still PERSISTED never reached SUBMITTING, so no byte left: it is proved
//!   pre-submit and abandoned, and the run may start a new attempt under a new decision.
//! - An attempt in SUBMITTING lost its outcome with the process: INDETERMINATE until reconciled.
//! - An Intercom task still OUTBOX is abandoned with its attempt; one in SUBMITTING whose
//!   attempt became INDETERMINATE is UNCERTAIN: preserved for reconciliation, never resent.
//! - OPEN turns are returned so core can finish them (formation is re-driven, not lost).
//!
//! **Architecture Invariant:** `recover` is called by core at start, before it serves, and core
//! is the only owner of service job attempts; it must not be called while attempts run.

use crate::Phylactery;
use crate::backend::args;
use crate::error::Result;
use crate::ids::{AttemptId, IntentId, TurnId};
use crate::intent::insert_delivery;
use crate::state::IntentState;

/// What recovery found and changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Intents moved SUBMITTING -> UNKNOWN.
    pub marked_unknown: Vec<IntentId>,
    /// Intents in UNKNOWN (including those just marked) awaiting evidence.
    pub awaiting_evidence: Vec<IntentId>,
    /// Attempts proved pre-submit and abandoned.
    pub abandoned_attempts: Vec<AttemptId>,
    /// Attempts moved SUBMITTING -> INDETERMINATE.
    pub indeterminate_attempts: Vec<AttemptId>,
    /// Turns still OPEN, for core to finish.
    pub open_turns: Vec<TurnId>,
    /// Intents a claimer can take now (PENDING, or CLAIMED with an expired lease).
    pub claimable_intents: Vec<IntentId>,
}

impl Phylactery {
    /// Reconciles in-flight work after a restart. Idempotent.
    pub async fn recover(&self) -> Result<RecoveryReport> {
        let now = self.now();
        let mut report = RecoveryReport::default();
        let mut tx = self.pool().begin().await?;
        let stuck = tx
            .fetch_all(
                "SELECT intent_id, generation FROM discord_delivery_intent
                 WHERE state = 'SUBMITTING' AND lease_expires_at <= $1 ORDER BY intent_id",
                &args![now.0],
            )
            .await?;
        for r in &stuck {
            let id = IntentId(r.text("intent_id")?);
            let changed = tx
                .execute(
                    "UPDATE discord_delivery_intent SET state = 'UNKNOWN', settled_at = $1
                     WHERE intent_id = $2 AND state = 'SUBMITTING' AND generation = $3",
                    &args![now.0, &id.0, r.int("generation")?],
                )
                .await?;
            if changed == 1 {
                insert_delivery(
                    &mut tx,
                    &id,
                    IntentState::Unknown,
                    None,
                    None,
                    Some("recovery: outcome lost after SUBMITTING".into()),
                    now,
                )
                .await?;
                report.marked_unknown.push(id);
            }
        }
        for r in tx
            .fetch_all(
                "SELECT attempt_id FROM service_job_attempt WHERE state = 'PERSISTED' ORDER BY attempt_id",
                &[],
            )
            .await?
        {
            report.abandoned_attempts.push(AttemptId(r.text("attempt_id")?));
        }
        tx.execute(
            "UPDATE service_job_attempt SET state = 'ABANDONED_BEFORE_SUBMIT', detail = 'recovery: never submitted', settled_at = $1
             WHERE state = 'PERSISTED'",
            &args![now.0],
        )
        .await?;
        for r in tx
            .fetch_all(
                "SELECT attempt_id FROM service_job_attempt WHERE state = 'SUBMITTING' ORDER BY attempt_id",
                &[],
            )
            .await?
        {
            report.indeterminate_attempts.push(AttemptId(r.text("attempt_id")?));
        }
        tx.execute(
            "UPDATE service_job_attempt SET state = 'INDETERMINATE', detail = 'recovery: outcome lost after SUBMITTING', settled_at = $1
             WHERE state = 'SUBMITTING'",
            &args![now.0],
        )
        .await?;
        // Intercom task records follow their attempts: never sent, or sent with a lost outcome
        // (UNCERTAIN: preserved for reconciliation, never resent).
        tx.execute(
            "UPDATE intercom_task SET state = 'ABANDONED_BEFORE_SUBMIT', evidence = 'recovery: never submitted', updated_at = $1
             WHERE state = 'OUTBOX'",
            &args![now.0],
        )
        .await?;
        tx.execute(
            "UPDATE intercom_task SET state = 'UNCERTAIN', evidence = 'recovery: outcome of the initial send lost', updated_at = $1
             WHERE state = 'SUBMITTING'
               AND attempt_id IN (SELECT attempt_id FROM service_job_attempt WHERE state = 'INDETERMINATE')",
            &args![now.0],
        )
        .await?;
        tx.commit().await?;

        for r in self
            .pool()
            .fetch_all("SELECT intent_id FROM discord_delivery_intent WHERE state = 'UNKNOWN' ORDER BY intent_id", &[])
            .await?
        {
            report.awaiting_evidence.push(IntentId(r.text("intent_id")?));
        }
        for r in self
            .pool()
            .fetch_all(
                "SELECT turn_id FROM reach_turn WHERE state = 'OPEN' ORDER BY turn_id",
                &[],
            )
            .await?
        {
            report.open_turns.push(TurnId(r.text("turn_id")?));
        }
        for r in self
            .pool()
            .fetch_all(
                "SELECT intent_id FROM discord_delivery_intent
                 WHERE state = 'PENDING' OR (state = 'CLAIMED' AND lease_expires_at <= $1) ORDER BY intent_id",
                &args![now.0],
            )
            .await?
        {
            report.claimable_intents.push(IntentId(r.text("intent_id")?));
        }
        tracing::info!(
            marked_unknown = report.marked_unknown.len(),
            abandoned = report.abandoned_attempts.len(),
            indeterminate = report.indeterminate_attempts.len(),
            open_turns = report.open_turns.len(),
            "phylactery recovery"
        );
        Ok(report)
    }
}
