//! `DiscordDeliveryIntent@1` and `ReachDelivery@1`: exactly one send per committed turn.
//!
//! PENDING -> CLAIMED -> SUBMITTING -> KNOWN_SENT | KNOWN_REJECTED | UNKNOWN.
//!
//! A claim grants a generation-fenced lease. Every later write names its generation and is a
//! conditional `UPDATE ... WHERE state = ... AND generation = ...`, so a stale owner's write
//! matches no row and is refused. A CLAIMED intent whose lease expired may be claimed again with a
//! higher generation; once SUBMITTING is durable it never matches a claim again.
//!
//! A multi-part answer has one intent per part at a time: part k+1's PENDING intent is written
//! by the statement that settles part k KNOWN_SENT (`turn.rs`, migration 6), so every write here
//! stays about one intent, and the part order holds without anything in Rust scheduling it.

use std::time::Duration;

use reach_digest::Sha256Digest;

use crate::Phylactery;
use crate::backend::{Durability, Row, args};
use crate::clock::UnixMillis;
use crate::error::{LedgerError, Result};
use crate::fault::FaultPoint;
use crate::ids::{self, IntentId, TurnId};
use crate::state::IntentState;

/// How many times `claim_next` retries when another claimer wins the race for a candidate.
const CLAIM_NEXT_RACE_RETRIES: usize = 8;

/// A generation-fenced lease on one intent. Every write after the claim presents it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub intent_id: IntentId,
    pub generation: i64,
    pub owner: String,
    pub expires_at: UnixMillis,
}

/// What a claimer receives: the lease and exactly what it may send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedIntent {
    pub lease: Lease,
    pub turn_id: TurnId,
    pub effect: String,
    pub payload_digest: Sha256Digest,
    /// Deterministic Discord nonce (at most 25 characters), sent with `enforce_nonce=true`.
    pub nonce: String,
}

/// The sender's authenticated report after SUBMITTING.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryReport {
    /// The platform created the message.
    Sent {
        message_id: String,
        platform_status: i64,
    },
    /// The platform refused the request; no message exists.
    Rejected {
        platform_status: i64,
        detail: String,
    },
    /// The outcome was lost (timeout, reset); bytes may have left.
    Unknown { detail: String },
}

/// Independent evidence that settles an UNKNOWN delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryEvidence {
    /// The message exists on the platform (found by nonce/content in channel history).
    MessageFound {
        message_id: String,
        evidence: String,
    },
    /// The platform provably holds no such message; a successor intent may send it.
    ProvedAbsent { evidence: String },
}

/// One intent row, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentRecord {
    pub intent_id: IntentId,
    pub turn_id: TurnId,
    /// The intent's place in its turn: each part, and each successor after proved absence,
    /// takes the next number.
    pub seq: i64,
    /// Which part of the turn's answer it delivers (1..N).
    pub part_no: i64,
    pub state: IntentState,
    pub generation: i64,
    pub lease_owner: Option<String>,
    pub lease_expires_at: Option<UnixMillis>,
    pub effect: String,
    pub payload_digest: String,
    pub nonce: String,
}

impl IntentRecord {
    fn from_row(r: &Row) -> Result<Self> {
        Ok(Self {
            intent_id: IntentId(r.text("intent_id")?),
            turn_id: TurnId(r.text("turn_id")?),
            seq: r.int("seq")?,
            part_no: r.int("part_no")?,
            state: IntentState::parse(&r.text("state")?)?,
            generation: r.int("generation")?,
            lease_owner: r.opt_text("lease_owner")?,
            lease_expires_at: r.opt_int("lease_expires_at")?.map(UnixMillis),
            effect: r.text("effect")?,
            payload_digest: r.text("payload_digest")?,
            nonce: r.text("nonce")?,
        })
    }
}

impl Phylactery {
    /// Reads one intent.
    pub async fn intent(&self, id: &IntentId) -> Result<IntentRecord> {
        let row = self
            .pool()
            .fetch_optional(
                "SELECT intent_id, turn_id, seq, part_no, state, generation, lease_owner, lease_expires_at, effect, payload_digest, nonce
                 FROM discord_delivery_intent WHERE intent_id = $1",
                &args![&id.0],
            )
            .await?
            .ok_or_else(|| LedgerError::NotFound {
                record: "DiscordDeliveryIntent@1",
                id: id.0.clone(),
            })?;
        IntentRecord::from_row(&row)
    }

    /// The intents of a turn, oldest first.
    pub async fn intents_of_turn(&self, turn: &TurnId) -> Result<Vec<IntentRecord>> {
        let rows = self
            .pool()
            .fetch_all(
                "SELECT intent_id, turn_id, seq, part_no, state, generation, lease_owner, lease_expires_at, effect, payload_digest, nonce
                 FROM discord_delivery_intent WHERE turn_id = $1 ORDER BY seq",
                &args![&turn.0],
            )
            .await?;
        rows.iter().map(IntentRecord::from_row).collect()
    }

    /// Intents in UNKNOWN: each needs independent evidence before anything else happens.
    pub async fn unknown_intents(&self) -> Result<Vec<IntentRecord>> {
        let rows = self
            .pool()
            .fetch_all(
                "SELECT intent_id, turn_id, seq, part_no, state, generation, lease_owner, lease_expires_at, effect, payload_digest, nonce
                 FROM discord_delivery_intent WHERE state = 'UNKNOWN' ORDER BY created_at, intent_id",
                &[],
            )
            .await?;
        rows.iter().map(IntentRecord::from_row).collect()
    }

    /// Claims one intent for `lease_for`. PENDING, or CLAIMED with an expired lease, is granted
    /// with generation + 1; anything at or after SUBMITTING is refused forever.
    pub async fn claim(
        &self,
        id: &IntentId,
        owner: &str,
        lease_for: Duration,
    ) -> Result<ClaimedIntent> {
        self.require_serving().await?;
        let now = self.now();
        let expires = now.plus(lease_for);
        // Deferred (SQLite): lost only with the host, and with it every holder of the lease;
        // SUBMITTING syncs this commit before the holder may send. See `backend::Durability`.
        let row = self
            .pool()
            .fetch_optional_with(
                Durability::Deferred,
                "UPDATE discord_delivery_intent
                 SET state = 'CLAIMED', generation = generation + 1, lease_owner = $1, lease_expires_at = $2
                 WHERE intent_id = $3
                   AND (state = 'PENDING' OR (state = 'CLAIMED' AND lease_expires_at <= $4))
                 RETURNING turn_id, generation, effect, payload_digest, nonce",
                &args![owner, expires.0, &id.0, now.0],
            )
            .await?;
        let Some(row) = row else {
            let rec = self.intent(id).await?;
            return Err(match rec.state {
                IntentState::Claimed => LedgerError::LeaseHeld {
                    intent_id: id.0.clone(),
                    until: rec.lease_expires_at.unwrap_or(now),
                },
                // PENDING cannot fail the update; reaching here means it changed under us.
                IntentState::Pending => LedgerError::WrongState {
                    record: "DiscordDeliveryIntent@1",
                    id: id.0.clone(),
                    state: rec.state.to_string(),
                    expected: "PENDING",
                },
                s => LedgerError::NotClaimable {
                    intent_id: id.0.clone(),
                    state: s.to_string(),
                },
            });
        };
        self.fault(FaultPoint::ClaimCommitted);
        Ok(ClaimedIntent {
            lease: Lease {
                intent_id: id.clone(),
                generation: row.int("generation")?,
                owner: owner.to_owned(),
                expires_at: expires,
            },
            turn_id: TurnId(row.text("turn_id")?),
            effect: row.text("effect")?,
            payload_digest: row
                .text("payload_digest")?
                .parse()
                .map_err(|e| LedgerError::Corrupt(format!("payload digest: {e}")))?,
            nonce: row.text("nonce")?,
        })
    }

    /// Claims the oldest claimable intent, if any.
    pub async fn claim_next(
        &self,
        owner: &str,
        lease_for: Duration,
    ) -> Result<Option<ClaimedIntent>> {
        self.require_serving().await?;
        for _ in 0..CLAIM_NEXT_RACE_RETRIES {
            let now = self.now();
            let Some(row) = self
                .pool()
                .fetch_optional(
                    // The oldest of each branch through `intent_claim_order`, then the older of
                    // the two: one index entry per branch however long the queue is (an `OR`
                    // here made every claim collect and sort all waiting intents).
                    "SELECT intent_id FROM (
                        SELECT * FROM (SELECT intent_id, created_at FROM discord_delivery_intent
                            WHERE state = 'PENDING' ORDER BY created_at, intent_id LIMIT 1) AS pending
                        UNION ALL
                        SELECT * FROM (SELECT intent_id, created_at FROM discord_delivery_intent
                            WHERE state = 'CLAIMED' AND lease_expires_at <= $1
                            ORDER BY created_at, intent_id LIMIT 1) AS lapsed
                     ) AS candidates ORDER BY created_at, intent_id LIMIT 1",
                    &args![now.0],
                )
                .await?
            else {
                return Ok(None);
            };
            let id = IntentId(row.text("intent_id")?);
            if let Some(c) = self.claim_if_free(&id, owner, lease_for).await? {
                return Ok(Some(c));
            }
        }
        Ok(None)
    }

    /// As [`Phylactery::claim`], with `None` where another claimer won the race: the intent is
    /// leased to someone else, or already past claiming.
    pub async fn claim_if_free(
        &self,
        id: &IntentId,
        owner: &str,
        lease_for: Duration,
    ) -> Result<Option<ClaimedIntent>> {
        match self.claim(id, owner, lease_for).await {
            Ok(c) => Ok(Some(c)),
            Err(
                LedgerError::LeaseHeld { .. }
                | LedgerError::NotClaimable { .. }
                | LedgerError::WrongState { .. },
            ) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Persists SUBMITTING. The sender transmits only after this returns; the lease must still be
    /// live and current.
    pub async fn mark_submitting(&self, lease: &Lease) -> Result<()> {
        let now = self.now();
        let changed = self
            .pool()
            .execute(
                "UPDATE discord_delivery_intent SET state = 'SUBMITTING', submitting_at = $1
                 WHERE intent_id = $2 AND state = 'CLAIMED' AND generation = $3 AND lease_expires_at > $1",
                &args![now.0, &lease.intent_id.0, lease.generation],
            )
            .await?;
        if changed != 1 {
            return Err(self.fence_refusal(lease, IntentState::Claimed, now).await);
        }
        self.fault(FaultPoint::SubmittingCommitted);
        Ok(())
    }

    /// Records the sender's outcome as `ReachDelivery@1` (effect, digest, platform status,
    /// nonce, claim generation, message id). Only the current generation may settle, and only
    /// from SUBMITTING. A late report after recovery marked the intent UNKNOWN is refused: it
    /// must come back as reconciliation evidence instead.
    pub async fn settle(&self, lease: &Lease, report: &DeliveryReport) -> Result<IntentState> {
        let now = self.now();
        let (state, status, message_id, detail) = match report {
            DeliveryReport::Sent {
                message_id,
                platform_status,
            } => (
                IntentState::KnownSent,
                Some(*platform_status),
                Some(message_id.clone()),
                None,
            ),
            DeliveryReport::Rejected {
                platform_status,
                detail,
            } => (
                IntentState::KnownRejected,
                Some(*platform_status),
                None,
                Some(detail.clone()),
            ),
            DeliveryReport::Unknown { detail } => {
                (IntentState::Unknown, None, None, Some(detail.clone()))
            }
        };
        if let DeliveryReport::Sent { message_id, .. } = report
            && message_id.is_empty()
        {
            return Err(LedgerError::InvalidInput(
                "a sent delivery names its message id",
            ));
        }
        // One statement, atomic by itself: `ReachDelivery@1` is selected from the intent under
        // the generation fence (so effect, digest, nonce and generation are the committed ones),
        // and its `delivery_settles_intent` trigger moves the intent to the same outcome.
        // Nothing is written before the statement runs.
        self.fault(FaultPoint::SettleBeforeCommit);
        // Deferred: a settlement lost with the host leaves SUBMITTING, which recovery turns
        // UNKNOWN and reconciles from evidence, never by resending (`backend::Durability`).
        let changed = self
            .pool()
            .execute_with(
                Durability::Deferred,
                "INSERT INTO reach_delivery (intent_id, outcome, effect, payload_digest, nonce, claim_generation,
                    platform_status, message_id, detail, settled_at)
                 SELECT intent_id, $1, effect, payload_digest, nonce, generation, $2, $3, $4, $5
                 FROM discord_delivery_intent WHERE intent_id = $6 AND state = 'SUBMITTING' AND generation = $7",
                &args![
                    state.as_str(),
                    status,
                    message_id,
                    detail,
                    now.0,
                    &lease.intent_id.0,
                    lease.generation
                ],
            )
            .await?;
        if changed != 1 {
            return Err(self
                .fence_refusal(lease, IntentState::Submitting, now)
                .await);
        }
        self.fault(FaultPoint::SettleCommitted);
        Ok(state)
    }

    /// Settles a claimed intent NOT_ATTEMPTED: ward refused its EgressDecision for good, so no
    /// byte was sent and none ever will be. Writes `ReachDelivery@1` with that outcome and the
    /// refusal as detail; only the current generation, and only before SUBMITTING.
    pub async fn settle_not_attempted(&self, lease: &Lease, refusal: &str) -> Result<()> {
        if refusal.is_empty() {
            return Err(LedgerError::InvalidInput(
                "a NOT_ATTEMPTED delivery names why",
            ));
        }
        let now = self.now();
        // One statement, as `settle`: the record is selected from the intent under the fence,
        // and `delivery_settles_intent` moves the intent from CLAIMED in the same statement.
        let changed = self
            .pool()
            .execute(
                "INSERT INTO reach_delivery (intent_id, outcome, effect, payload_digest, nonce, claim_generation,
                    platform_status, message_id, detail, settled_at)
                 SELECT intent_id, 'NOT_ATTEMPTED', effect, payload_digest, nonce, generation, NULL, NULL, $1, $2
                 FROM discord_delivery_intent WHERE intent_id = $3 AND state = 'CLAIMED' AND generation = $4",
                &args![refusal, now.0, &lease.intent_id.0, lease.generation],
            )
            .await?;
        if changed != 1 {
            return Err(self.fence_refusal(lease, IntentState::Claimed, now).await);
        }
        Ok(())
    }

    /// Settles an UNKNOWN intent from independent evidence. Proved absence opens a successor
    /// intent (next sequence, new nonce) for the same turn, part and effect, which is returned;
    /// a found message opens the next part, if any, in the same transaction.
    pub async fn reconcile_delivery(
        &self,
        id: &IntentId,
        evidence: &DeliveryEvidence,
        recorded_by: &str,
    ) -> Result<Option<IntentId>> {
        let now = self.now();
        let (state, kind, message_id, text) = match evidence {
            DeliveryEvidence::MessageFound {
                message_id,
                evidence,
            } => (
                IntentState::KnownSent,
                "MESSAGE_FOUND",
                Some(message_id.clone()),
                evidence.clone(),
            ),
            DeliveryEvidence::ProvedAbsent { evidence } => (
                IntentState::KnownRejected,
                "PROVED_ABSENT",
                None,
                evidence.clone(),
            ),
        };
        if text.is_empty() || recorded_by.is_empty() {
            return Err(LedgerError::InvalidInput(
                "evidence and its recorder are required",
            ));
        }
        let mut tx = self.pool().begin().await?;
        let changed = tx
            .execute(
                "UPDATE discord_delivery_intent SET state = $1, settled_at = $2 WHERE intent_id = $3 AND state = 'UNKNOWN'",
                &args![state.as_str(), now.0, &id.0],
            )
            .await?;
        if changed != 1 {
            drop(tx);
            let rec = self.intent(id).await?;
            return Err(LedgerError::WrongState {
                record: "DiscordDeliveryIntent@1",
                id: id.0.clone(),
                state: rec.state.to_string(),
                expected: "UNKNOWN",
            });
        }
        tx.execute(
            "INSERT INTO delivery_reconciliation (intent_id, evidence_kind, message_id, evidence, recorded_by, recorded_at)
             VALUES ($1, $2, $3, $4, $5, $6)",
            &args![&id.0, kind, message_id.clone(), &text, recorded_by, now.0],
        )
        .await?;
        tx.execute(
            "UPDATE reach_delivery SET outcome = $1, message_id = $2, reconciled_at = $3
             WHERE intent_id = $4 AND outcome = 'UNKNOWN'",
            &args![state.as_str(), message_id, now.0, &id.0],
        )
        .await?;
        // Proved absence: the same part again under a successor intent (next place in the
        // turn, next attempt of the part, new nonce). Found: the UPDATE above already opened the
        // next part, if any (`intent_sent_opens_next_part`, migration 6).
        let successor = if matches!(evidence, DeliveryEvidence::ProvedAbsent { .. }) {
            let row = tx
                .fetch_optional(
                    "SELECT i.turn_id, i.seq, i.part_no, i.effect, i.payload_digest,
                        (SELECT COUNT(*) FROM discord_delivery_intent o
                         WHERE o.turn_id = i.turn_id AND o.part_no = i.part_no) AS part_intents
                     FROM discord_delivery_intent i WHERE i.intent_id = $1",
                    &args![&id.0],
                )
                .await?
                .ok_or_else(|| LedgerError::Corrupt("intent vanished".into()))?;
            let turn = TurnId(row.text("turn_id")?);
            let seq = row.int("seq")? + 1;
            let part = row.int("part_no")?;
            let effect = row.text("effect")?;
            let next = ids::intent_id(&turn, part, row.int("part_intents")? + 1);
            let nonce = ids::nonce(&next, &effect);
            tx.execute(
                "INSERT INTO discord_delivery_intent (intent_id, turn_id, part_no, seq, supersedes, effect, payload_digest, nonce,
                    state, generation, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'PENDING', 0, $9)",
                &args![&next.0, &turn.0, part, seq, &id.0, &effect, row.text("payload_digest")?, &nonce, now.0],
            )
            .await?;
            Some(next)
        } else {
            None
        };
        tx.commit().await?;
        Ok(successor)
    }

    /// Explains why a fenced write matched no row, in the order that matters to the caller.
    async fn fence_refusal(
        &self,
        lease: &Lease,
        expected: IntentState,
        now: UnixMillis,
    ) -> LedgerError {
        let rec = match self.intent(&lease.intent_id).await {
            Ok(r) => r,
            Err(e) => return e,
        };
        if rec.generation != lease.generation {
            return LedgerError::StaleGeneration {
                intent_id: lease.intent_id.0.clone(),
                presented: lease.generation,
                current: rec.generation,
            };
        }
        if rec.state != expected {
            return LedgerError::WrongState {
                record: "DiscordDeliveryIntent@1",
                id: lease.intent_id.0.clone(),
                state: rec.state.to_string(),
                expected: expected.as_str(),
            };
        }
        match rec.lease_expires_at {
            Some(t) if t <= now => LedgerError::LeaseExpired {
                intent_id: lease.intent_id.0.clone(),
                generation: lease.generation,
                expired_at: t,
            },
            _ => LedgerError::WrongState {
                record: "DiscordDeliveryIntent@1",
                id: lease.intent_id.0.clone(),
                state: rec.state.to_string(),
                expected: expected.as_str(),
            },
        }
    }
}

/// Writes `ReachDelivery@1` from the intent row itself, so effect, digest, nonce and generation
/// are the committed ones, not whatever a caller might pass.
pub(crate) async fn insert_delivery(
    tx: &mut crate::backend::Tx,
    intent: &IntentId,
    outcome: IntentState,
    platform_status: Option<i64>,
    message_id: Option<String>,
    detail: Option<String>,
    now: UnixMillis,
) -> Result<()> {
    tx.execute(
        "INSERT INTO reach_delivery (intent_id, outcome, effect, payload_digest, nonce, claim_generation,
            platform_status, message_id, detail, settled_at)
         SELECT intent_id, $1, effect, payload_digest, nonce, generation, $2, $3, $4, $5
         FROM discord_delivery_intent WHERE intent_id = $6",
        &args![outcome.as_str(), platform_status, message_id, detail, now.0, &intent.0],
    )
    .await?;
    Ok(())
}
