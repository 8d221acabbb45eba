//! Tainted marking after a service compromise.
//!
//! The seed: "For a service compromise, revoke leases/credentials, quarantine output, mark
//! tasks/deliveries as tainted". [`Phylactery::mark_tainted`] does the ledger's part in one synced
//! transaction, for one principal:
//!
//! - a CLAIMED intent leased to the principal has its lease revoked: the generation moves on and
//!   the lease ends now, so every later write of the holder fails the generation fence and
//!   another sender may claim the (core-committed) intent;
//! - a SUBMITTING intent of the principal becomes UNKNOWN: whatever the compromised sender
//!   reports is not evidence, so only independent evidence (reconciliation) settles it;
//! - an attempt whose destination is the principal: PERSISTED is abandoned (nothing left),
//!   SUBMITTING becomes INDETERMINATE (its answer is not trusted), INDETERMINATE is flagged;
//! - an Intercom task whose peer is the principal: a live task (SUBMITTING, PARKED, UNCERTAIN)
//!   is REVOKED, an OUTBOX one is abandoned with its attempt;
//! - an UNKNOWN intent of the principal is flagged.
//!
//! Each touched record gets a `tainted_record` row naming the taint and what was done; the flag is
//! a record, never a new state, so nothing tainted can be handed out for sending again. Stopping
//! the principal's future requests is credential revocation, outside the ledger.

use crate::Phylactery;
use crate::backend::{Tx, args};
use crate::error::{LedgerError, Result};
use crate::ids::IntentId;
use crate::intent::insert_delivery;
use crate::state::IntentState;

/// What a taint did to one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaintAction {
    /// A CLAIMED intent's lease was revoked (generation advanced, lease ended).
    LeaseRevoked,
    /// A SUBMITTING intent became UNKNOWN.
    OutcomeUnknown,
    /// A SUBMITTING attempt became INDETERMINATE.
    OutcomeIndeterminate,
    /// A never-submitted attempt (and its outbox record) was abandoned.
    AbandonedBeforeSubmit,
    /// A live Intercom task was REVOKED.
    Revoked,
    /// Already awaiting evidence; flagged only.
    Flagged,
}

impl TaintAction {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::LeaseRevoked => "LEASE_REVOKED",
            Self::OutcomeUnknown => "OUTCOME_UNKNOWN",
            Self::OutcomeIndeterminate => "OUTCOME_INDETERMINATE",
            Self::AbandonedBeforeSubmit => "ABANDONED_BEFORE_SUBMIT",
            Self::Revoked => "REVOKED",
            Self::Flagged => "FLAGGED",
        }
    }
}

/// One record a taint touched: (record name, id, state before, action).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaintedRecord {
    pub record: &'static str,
    pub id: String,
    pub state_at_taint: String,
    pub action: TaintAction,
}

/// What [`Phylactery::mark_tainted`] recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaintReport {
    pub taint_id: i64,
    pub records: Vec<TaintedRecord>,
}

impl TaintReport {
    /// The ids of records of one kind that received one action.
    pub fn ids(&self, record: &str, action: TaintAction) -> Vec<String> {
        self.records
            .iter()
            .filter(|r| r.record == record && r.action == action)
            .map(|r| r.id.clone())
            .collect()
    }
}

const INTENT: &str = "DiscordDeliveryIntent@1";
const ATTEMPT: &str = "ServiceJobAttempt@1";
const TASK: &str = "IntercomTask";

impl Phylactery {
    /// Marks a compromised principal's in-flight work as tainted and revokes its leases.
    /// `principal` is a lease owner (a sender's authenticated name) or an attempt destination /
    /// Intercom peer. Idempotent in effect: a second call finds nothing in flight to change.
    pub async fn mark_tainted(
        &self,
        principal: &str,
        reason: &str,
        recorded_by: &str,
    ) -> Result<TaintReport> {
        if principal.trim().is_empty() || reason.trim().is_empty() || recorded_by.is_empty() {
            return Err(LedgerError::InvalidInput(
                "a taint names the principal, the reason and who recorded it",
            ));
        }
        let now = self.now();
        let mut tx = self.pool().begin().await?;
        let taint_id = tx
            .fetch_optional(
                "INSERT INTO taint_mark (principal, reason, recorded_by, recorded_at)
                 VALUES ($1, $2, $3, $4) RETURNING taint_id",
                &args![principal, reason, recorded_by, now.0],
            )
            .await?
            .ok_or_else(|| LedgerError::Corrupt("taint insert returned nothing".into()))?
            .int("taint_id")?;
        let mut records = Vec::new();
        let detail = format!("tainted: {reason}");

        // Intents leased to the principal.
        let intents = tx
            .fetch_all(
                "SELECT intent_id, state, generation FROM discord_delivery_intent
                 WHERE lease_owner = $1 AND state IN ('CLAIMED', 'SUBMITTING', 'UNKNOWN') ORDER BY intent_id",
                &args![principal],
            )
            .await?;
        for r in &intents {
            let id = IntentId(r.text("intent_id")?);
            let generation = r.int("generation")?;
            let state = IntentState::parse(&r.text("state")?)?;
            let action = match state {
                IntentState::Claimed => {
                    tx.execute(
                        "UPDATE discord_delivery_intent SET generation = generation + 1, lease_expires_at = $1
                         WHERE intent_id = $2 AND state = 'CLAIMED' AND generation = $3",
                        &args![now.0, &id.0, generation],
                    )
                    .await?;
                    TaintAction::LeaseRevoked
                }
                IntentState::Submitting => {
                    tx.execute(
                        "UPDATE discord_delivery_intent SET state = 'UNKNOWN', settled_at = $1
                         WHERE intent_id = $2 AND state = 'SUBMITTING' AND generation = $3",
                        &args![now.0, &id.0, generation],
                    )
                    .await?;
                    insert_delivery(
                        &mut tx,
                        &id,
                        IntentState::Unknown,
                        None,
                        None,
                        Some(detail.clone()),
                        now,
                    )
                    .await?;
                    TaintAction::OutcomeUnknown
                }
                _ => TaintAction::Flagged,
            };
            records.push(TaintedRecord {
                record: INTENT,
                id: id.0,
                state_at_taint: state.to_string(),
                action,
            });
        }

        // Attempts to the principal, and their Intercom task records.
        for r in tx
            .fetch_all(
                "SELECT attempt_id, state FROM service_job_attempt
                 WHERE destination = $1 AND state IN ('PERSISTED', 'SUBMITTING', 'INDETERMINATE') ORDER BY attempt_id",
                &args![principal],
            )
            .await?
        {
            let id = r.text("attempt_id")?;
            let state = r.text("state")?;
            let (to, action) = match state.as_str() {
                "PERSISTED" => (
                    Some("ABANDONED_BEFORE_SUBMIT"),
                    TaintAction::AbandonedBeforeSubmit,
                ),
                "SUBMITTING" => (Some("INDETERMINATE"), TaintAction::OutcomeIndeterminate),
                _ => (None, TaintAction::Flagged),
            };
            if let Some(to) = to {
                tx.execute(
                    "UPDATE service_job_attempt SET state = $1, detail = $2, settled_at = $3
                     WHERE attempt_id = $4 AND state = $5",
                    &args![to, &detail, now.0, &id, &state],
                )
                .await?;
            }
            records.push(TaintedRecord {
                record: ATTEMPT,
                id,
                state_at_taint: state,
                action,
            });
        }
        for r in tx
            .fetch_all(
                "SELECT task_id, state FROM intercom_task
                 WHERE peer = $1 AND state IN ('OUTBOX', 'SUBMITTING', 'PARKED', 'UNCERTAIN') ORDER BY task_id",
                &args![principal],
            )
            .await?
        {
            let id = r.text("task_id")?;
            let state = r.text("state")?;
            let (to, action) = if state == "OUTBOX" {
                ("ABANDONED_BEFORE_SUBMIT", TaintAction::AbandonedBeforeSubmit)
            } else {
                ("REVOKED", TaintAction::Revoked)
            };
            tx.execute(
                "UPDATE intercom_task SET state = $1, evidence = $2, updated_at = $3
                 WHERE task_id = $4 AND state = $5",
                &args![to, &detail, now.0, &id, &state],
            )
            .await?;
            records.push(TaintedRecord {
                record: TASK,
                id,
                state_at_taint: state,
                action,
            });
        }
        for rec in &records {
            record(&mut tx, taint_id, rec).await?;
        }
        tx.commit().await?;
        tracing::warn!(
            taint_id,
            principal,
            touched = records.len(),
            "principal marked tainted"
        );
        Ok(TaintReport { taint_id, records })
    }
}

async fn record(tx: &mut Tx, taint_id: i64, r: &TaintedRecord) -> Result<()> {
    tx.execute(
        "INSERT INTO tainted_record (taint_id, record, record_id, state_at_taint, action)
         VALUES ($1, $2, $3, $4, $5)",
        &args![
            taint_id,
            r.record,
            &r.id,
            &r.state_at_taint,
            r.action.as_str()
        ],
    )
    .await?;
    Ok(())
}
