//! `DiscordEventAdmission@1`: the atomic reservation of one gateway event.
//!
//! The key is (platform, adapter revision, application id, event kind, external event id). An
//! exact replay in the same Habitat answers with what is committed; the same key with another
//! payload digest or from another partition is a security fault, recorded in its own table and
//! refused, and nothing else changes.

use reach_digest::Sha256Digest;

use crate::Phylactery;
use crate::backend::{Durability, args};
use crate::clock::UnixMillis;
use crate::error::{LedgerError, Result, SecurityFaultKind};
use crate::fault::FaultPoint;
use crate::ids::{self, AdmissionId, IntentId, TurnId};
use crate::state::{DeliveryOutcome, IntentState, TurnState};

/// The admission key of one platform event.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventKey {
    pub platform: String,
    pub adapter_revision: String,
    pub application_id: String,
    pub event_kind: String,
    pub external_event_id: String,
}

impl EventKey {
    pub(crate) fn digest(&self) -> Sha256Digest {
        Sha256Digest::of_parts([
            self.platform.as_bytes(),
            self.adapter_revision.as_bytes(),
            self.application_id.as_bytes(),
            self.event_kind.as_bytes(),
            self.external_event_id.as_bytes(),
        ])
    }

    /// The id the admission of this key has (or will have).
    pub fn admission_id(&self) -> AdmissionId {
        ids::admission_id(self.digest())
    }
}

/// What the edge presents for admission.
#[derive(Debug, Clone)]
pub struct AdmissionRequest {
    pub key: EventKey,
    /// Digest of the validated event bytes.
    pub payload_digest: Sha256Digest,
    /// The Habitat/owner partition the event was received for.
    pub habitat: String,
}

/// The committed status of an admission, as a replay sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionStatus {
    pub admission_id: AdmissionId,
    pub turn_id: TurnId,
    pub payload_digest: Sha256Digest,
    pub habitat: String,
    pub admitted_at: UnixMillis,
    pub turn_state: TurnState,
    /// The latest delivery intent of the turn and its state, if the turn committed one.
    pub intent: Option<(IntentId, IntentState)>,
    pub delivery: DeliveryOutcome,
}

/// The answer to an admission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// First sight of this key: admission and an OPEN turn were committed together.
    Admitted(AdmissionStatus),
    /// Exact replay: nothing was written; this is what is committed.
    Replayed(AdmissionStatus),
}

impl Admission {
    pub fn status(&self) -> &AdmissionStatus {
        match self {
            Admission::Admitted(s) | Admission::Replayed(s) => s,
        }
    }
}

/// The flush an unflushed admission still owes (see [`Phylactery::admit_unflushed`]).
#[derive(Debug)]
#[must_use = "an admission is answered only once it is durable"]
pub struct AdmissionFlush {
    vault: Phylactery,
}

impl AdmissionFlush {
    /// Returns once the admission (and everything committed before it) is on stable storage.
    pub async fn durable(self) -> Result<()> {
        self.vault.pool().sync().await
    }
}

impl Phylactery {
    /// Reserves the event. Admission and its OPEN `ReachTurn@1` commit in one statement (the
    /// turn is written by the `admission_opens_turn` trigger), so an admitted event always has a
    /// turn to finish (no lost turn after a crash).
    pub async fn admit(&self, req: &AdmissionRequest) -> Result<Admission> {
        self.admit_with(req, Durability::Synced).await
    }

    /// As [`Phylactery::admit`], returning once the admission is written but before it is
    /// flushed, with the flush still to await. Core starts the turn beside the flush and
    /// answers the edge only after [`AdmissionFlush::durable`]: until then the edge keeps the
    /// event for redelivery, and nothing the turn does leaves the host before a synced
    /// SUBMITTING, which flushes the admission first (see `backend::Durability`).
    pub async fn admit_unflushed(
        &self,
        req: &AdmissionRequest,
    ) -> Result<(Admission, AdmissionFlush)> {
        let admission = self.admit_with(req, Durability::Deferred).await?;
        Ok((
            admission,
            AdmissionFlush {
                vault: self.clone(),
            },
        ))
    }

    async fn admit_with(
        &self,
        req: &AdmissionRequest,
        durability: Durability,
    ) -> Result<Admission> {
        self.require_serving().await?;
        if req.habitat.is_empty() || req.key.external_event_id.is_empty() {
            return Err(LedgerError::InvalidInput(
                "habitat and external event id are required",
            ));
        }
        let now = self.now();
        let admission_id = req.key.admission_id();
        let turn_id = ids::turn_id(&admission_id);
        let digest = req.payload_digest.to_string();
        let k = &req.key;
        // One statement, atomic by itself: the `admission_opens_turn` trigger writes the OPEN
        // turn (id `ids::turn_id`) with the admission, so there is no transaction to open and
        // no second round trip. Nothing is written before the statement runs.
        self.fault(FaultPoint::AdmissionBeforeCommit);
        let inserted = self
            .pool()
            .execute_with(
                durability,
                "INSERT INTO discord_event_admission (admission_id, platform, adapter_revision, application_id,
                    event_kind, external_event_id, payload_digest, habitat, admitted_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                 ON CONFLICT DO NOTHING",
                &args![
                    &admission_id.0,
                    &k.platform,
                    &k.adapter_revision,
                    &k.application_id,
                    &k.event_kind,
                    &k.external_event_id,
                    &digest,
                    &req.habitat,
                    now.0
                ],
            )
            .await?;
        if inserted == 1 {
            self.fault(FaultPoint::AdmissionCommitted);
            return Ok(Admission::Admitted(AdmissionStatus {
                admission_id,
                turn_id,
                payload_digest: req.payload_digest,
                habitat: req.habitat.clone(),
                admitted_at: now,
                turn_state: TurnState::Open,
                intent: None,
                delivery: DeliveryOutcome::NotAttempted,
            }));
        }
        // Its commit is flushed below only where it must be, once on either backend (a synced
        // SQLite transaction would flush at commit, and a read-only PostgreSQL one never does).
        let mut tx = self.pool().begin_with(Durability::Deferred).await?;
        // The key exists. Look it up by the key columns, not the derived id, so a digest collision
        // of ids could never make two keys share a row unnoticed.
        let row = tx
            .fetch_optional(
                "SELECT admission_id, payload_digest, habitat FROM discord_event_admission
                 WHERE platform = $1 AND adapter_revision = $2 AND application_id = $3
                   AND event_kind = $4 AND external_event_id = $5",
                &args![
                    &k.platform,
                    &k.adapter_revision,
                    &k.application_id,
                    &k.event_kind,
                    &k.external_event_id
                ],
            )
            .await?
            .ok_or_else(|| LedgerError::Corrupt("admission id taken by another key".into()))?;
        let committed_id = AdmissionId(row.text("admission_id")?);
        let fault = if row.text("habitat")? != req.habitat {
            Some(SecurityFaultKind::PartitionMismatch)
        } else if row.text("payload_digest")? != digest {
            Some(SecurityFaultKind::PayloadDigestMismatch)
        } else {
            None
        };
        if let Some(kind) = fault {
            let fault_row = tx
                .fetch_optional(
                    "INSERT INTO admission_security_fault (kind, admission_id, presented_payload_digest,
                        presented_habitat, recorded_at)
                     VALUES ($1, $2, $3, $4, $5) RETURNING fault_id",
                    &args![kind.as_str(), &committed_id.0, &digest, &req.habitat, now.0],
                )
                .await?
                .ok_or_else(|| LedgerError::Corrupt("fault insert returned nothing".into()))?;
            tx.commit().await?;
            self.pool().sync().await?;
            tracing::warn!(admission = %committed_id, kind = kind.as_str(), "admission security fault");
            return Err(LedgerError::SecurityFault {
                fault_id: fault_row.int("fault_id")?,
                kind,
                admission_id: committed_id.0,
            });
        }
        tx.commit().await?;
        // The admission may have been read before its writer's flush (a write is visible once
        // written, durable once flushed: `backend::Durability`). A synced replay answers the
        // edge only for a durable admission, as a first admission does; an unflushed one leaves
        // that to the caller's `AdmissionFlush`. The security fault above is always flushed.
        if durability == Durability::Synced {
            self.pool().sync().await?;
        }
        let status = self
            .admission_status(&committed_id)
            .await?
            .ok_or_else(|| LedgerError::Corrupt("admission vanished".into()))?;
        Ok(Admission::Replayed(status))
    }

    /// The committed status of one admission.
    pub async fn admission_status(&self, id: &AdmissionId) -> Result<Option<AdmissionStatus>> {
        let Some(row) = self
            .pool()
            .fetch_optional(
                "SELECT a.admission_id, a.payload_digest, a.habitat, a.admitted_at, t.turn_id, t.state AS turn_state,
                        i.intent_id, i.state AS intent_state, d.outcome
                 FROM discord_event_admission a
                 JOIN reach_turn t ON t.admission_id = a.admission_id
                 LEFT JOIN discord_delivery_intent i ON i.turn_id = t.turn_id
                      AND i.seq = (SELECT MAX(seq) FROM discord_delivery_intent WHERE turn_id = t.turn_id)
                 LEFT JOIN reach_delivery d ON d.intent_id = i.intent_id
                 WHERE a.admission_id = $1",
                &args![&id.0],
            )
            .await?
        else {
            return Ok(None);
        };
        let intent = match row.opt_text("intent_id")? {
            Some(i) => Some((IntentId(i), IntentState::parse(&row.text("intent_state")?)?)),
            None => None,
        };
        let delivery = match (&intent, row.opt_text("outcome")?) {
            (_, Some(o)) => DeliveryOutcome::parse(&o)?,
            (Some((_, IntentState::KnownSent)), None) => DeliveryOutcome::KnownSent,
            _ => DeliveryOutcome::NotAttempted,
        };
        Ok(Some(AdmissionStatus {
            admission_id: AdmissionId(row.text("admission_id")?),
            turn_id: TurnId(row.text("turn_id")?),
            payload_digest: row
                .text("payload_digest")?
                .parse()
                .map_err(|e| LedgerError::Corrupt(format!("payload digest: {e}")))?,
            habitat: row.text("habitat")?,
            admitted_at: UnixMillis(row.int("admitted_at")?),
            turn_state: TurnState::parse(&row.text("turn_state")?)?,
            intent,
            delivery,
        }))
    }

    /// Security faults recorded against one admission, oldest first: (fault id, kind text).
    pub async fn security_faults(&self, id: &AdmissionId) -> Result<Vec<(i64, String)>> {
        let rows = self
            .pool()
            .fetch_all(
                "SELECT fault_id, kind FROM admission_security_fault WHERE admission_id = $1 ORDER BY fault_id",
                &args![&id.0],
            )
            .await?;
        rows.iter()
            .map(|r| Ok((r.int("fault_id")?, r.text("kind")?)))
            .collect()
    }
}
