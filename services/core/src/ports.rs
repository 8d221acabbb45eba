//! Core's port adapters: protobuf in, Phylactery calls, protobuf out. Conversions are by hand
//! and stay here; the ledger knows nothing of the wire.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reach_digest::Sha256Digest;
use reach_phylactery as ledger;
use reach_phylactery::{LedgerError, Phylactery};
use reach_port::VerifiedPeer;
use reach_proto::core::v1 as pb;
use reach_proto::core::v1::admission_server::{Admission, AdmissionServer};
use reach_proto::core::v1::delivery_server::{Delivery, DeliveryServer};
use reach_proto::core::v1::trail_server::{Trail, TrailServer};
use tokio::sync::Notify;
use tonic::{Request, Response, Status};

use crate::authority::DeliveryAuthority;
use crate::deferral::Deferrals;
use crate::pipeline::Pipeline;

mod reconcile;

/// Longest lease a claimer may ask for; a crashed sender's pre-submit claim frees up after it.
const MAX_LEASE_MS: u32 = 60_000;
const DEFAULT_LEASE_MS: u32 = 15_000;
/// Longest a claim may wait for an intent to be committed before answering "nothing".
const MAX_WAIT_MS: u32 = 5_000;

/// The effect a Discord delivery intent carries: what will be posted, where, and under which
/// task Sigil. Committed with the turn; only `channel_id`, `reply_to_message_id` and `parts`
/// ever leave core (the Sigil is secret-free but stays here: it only asks ward for decisions).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscordEffect {
    pub channel_id: String,
    pub reply_to_message_id: String,
    pub parts: Vec<String>,
    pub sigil_id: String,
    /// Present when this part answers an `/ask` interaction with its callback; absent (and
    /// absent from the serialized effect, so a message's effect and digest are unchanged) for
    /// a Create Message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interaction: Option<InteractionEffect>,
}

/// The interaction a callback answers. The token is sealed to egress-discord's key
/// (`reach_discord::seal`): core stores and forwards the blob and never opens it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InteractionEffect {
    pub interaction_id: String,
    pub application_id: String,
    /// Hex of the sealed blob.
    pub sealed_token: String,
    /// A later part of the answer: a follow-up message rather than the callback (absent from
    /// the serialized effect for part 1, so its effect and digest are unchanged).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub follow_up: bool,
}

impl InteractionEffect {
    /// The proto fields of a delivery intent for `effect` (all empty for a Create Message).
    fn wire(effect: &Option<Self>) -> (String, String, Vec<u8>) {
        match effect {
            Some(i) => (
                i.interaction_id.clone(),
                i.application_id.clone(),
                hex::decode(&i.sealed_token).unwrap_or_default(),
            ),
            None => Default::default(),
        }
    }

    fn is_follow_up(effect: &Option<Self>) -> bool {
        effect.as_ref().is_some_and(|i| i.follow_up)
    }
}

#[derive(Debug, Clone)]
pub struct Core {
    vault: Phylactery,
    habitat: String,
    pipeline: Pipeline,
    authority: DeliveryAuthority,
    /// Decisions for reconciliation reads, on per-intent duty Sigils.
    reads: reconcile::ReadAuthority,
    /// Woken by the pipeline when a turn commits an intent (see `Delivery::claim`'s wait).
    committed: Arc<Notify>,
    /// Turns whose pipeline runs in this process, so a redelivery does not start a second one.
    running: Arc<Mutex<HashSet<String>>>,
    /// Operator A2A tasks (`settings.intercom`); absent: `SendA2aTask` is refused.
    intercom: Option<crate::intercom::IntercomRoute>,
    /// `/ask` interactions whose answer may need a deferred acknowledgement.
    deferrals: Arc<Deferrals>,
}

impl Core {
    pub fn new(
        vault: Phylactery,
        habitat: String,
        pipeline: Pipeline,
        authority: DeliveryAuthority,
        committed: Arc<Notify>,
    ) -> Self {
        let reads = reconcile::ReadAuthority::new(authority.ward(), vault.clone());
        let deferrals = Arc::new(Deferrals::new(
            crate::deferral::DEFAULT_BUDGET,
            committed.clone(),
        ));
        Self {
            vault,
            habitat,
            pipeline: pipeline.with_deferrals(deferrals.clone()),
            authority,
            reads,
            committed,
            running: Arc::default(),
            intercom: None,
            deferrals,
        }
    }

    /// Acknowledges an `/ask` whose answer is not committed within `budget` of its admission
    /// ([`crate::deferral`]).
    pub fn with_defer_budget(mut self, budget: Duration) -> Self {
        self.deferrals = Arc::new(Deferrals::new(budget, self.committed.clone()));
        self.pipeline = self.pipeline.with_deferrals(self.deferrals.clone());
        self
    }

    /// The next interaction due for its deferred acknowledgement, with its decision issued and
    /// recorded; `None` when none is due or ward refused (then the answer calls back).
    async fn deferral(&self, base: &str) -> Option<pb::ClaimResponse> {
        let due = self.deferrals.take_due()?;
        let issued = self.authority.issue_deferral(&due, base).await;
        let issued = match issued {
            Ok(Ok(issued)) => issued,
            Ok(Err(refused)) => {
                tracing::warn!(turn = %due.turn_id, code = %refused.code, "ward refused the interaction's acknowledgement; not deferred");
                self.deferrals.decided(&due.interaction_id, false);
                return None;
            }
            Err(s) => {
                tracing::warn!(turn = %due.turn_id, code = ?s.code(), "no decision for the interaction's acknowledgement; not deferred");
                self.deferrals.decided(&due.interaction_id, false);
                return None;
            }
        };
        self.deferrals.decided(&due.interaction_id, true);
        tracing::info!(turn = %due.turn_id, "interaction acknowledged before its answer (deferred)");
        Some(pb::ClaimResponse {
            deferral: Some(pb::InteractionDeferral {
                attempt_id: reach_discord::delivery::deferral_attempt_id(&due.turn_id),
                turn_id: due.turn_id,
                interaction_id: due.interaction_id,
                application_id: due.application_id,
                sealed_interaction_token: due.sealed_token,
                egress_decision_id: issued.decision_id,
                destination: issued.destination,
            }),
            ..Default::default()
        })
    }

    /// Claims an answer that calls back inside Discord's window first, then, unless the claimer
    /// serves interactions only, the oldest claimable intent.
    async fn claim_one(
        &self,
        owner: &str,
        lease_for: Duration,
        interactions_only: bool,
    ) -> Result<Option<ledger::ClaimedIntent>, Status> {
        while let Some(id) = self.deferrals.take_answer() {
            // `None`: another claimer took it first, or it already went out.
            let claimed = self
                .vault
                .claim_if_free(&ledger::IntentId(id), owner, lease_for)
                .await
                .map_err(status)?;
            if claimed.is_some() {
                return Ok(claimed);
            }
        }
        if interactions_only {
            return Ok(None);
        }
        self.vault
            .claim_next(owner, lease_for)
            .await
            .map_err(status)
    }

    /// Whether the effect's reply edits its interaction's deferred original: known in memory
    /// since the acknowledgement, or from the ledger after a restart (the acknowledgement's
    /// decision is on the run), so a restart never turns an edit into a second callback.
    async fn answer_edits(
        &self,
        turn: &ledger::TurnId,
        effect: &DiscordEffect,
    ) -> Result<bool, Status> {
        let Some(i) = effect.interaction.as_ref().filter(|i| !i.follow_up) else {
            return Ok(false);
        };
        if self.deferrals.answer_edits(&i.interaction_id) {
            return Ok(true);
        }
        self.authority.acknowledged(turn, &i.interaction_id).await
    }

    /// Serves operator A2A tasks through `route`.
    pub fn with_intercom(mut self, route: Option<crate::intercom::IntercomRoute>) -> Self {
        self.intercom = route;
        self
    }

    /// Starts the turn's pipeline unless it already runs here. A turn left OPEN by a crash is
    /// picked up when its event is redelivered; the ledger commits a turn exactly once anyway.
    fn start_turn(&self, turn: ledger::TurnId, req: pb::AdmitRequest) {
        if !self
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(turn.0.clone())
        {
            return;
        }
        let (pipeline, running) = (self.pipeline.clone(), self.running.clone());
        self.deferrals.admitted(&turn.0, &req);
        let deferrals = self.deferrals.clone();
        tokio::spawn(async move {
            let interaction = req.external_event_id.clone();
            pipeline.run(turn.clone(), req).await;
            deferrals.turn_ended(&interaction);
            running
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&turn.0);
        });
    }
    pub fn admission(&self) -> AdmissionServer<Self> {
        AdmissionServer::new(self.clone())
    }
    pub fn delivery(&self) -> DeliveryServer<Self> {
        DeliveryServer::new(self.clone())
    }
    pub fn trail(&self) -> TrailServer<Self> {
        TrailServer::new(self.clone())
    }
}

/// The one mapping from ledger refusals to gRPC status; the stable code leads the message.
pub(crate) fn status(e: LedgerError) -> Status {
    let msg = format!("{}: {e}", e.code());
    match e.code() {
        "ledger/not-found" | "package/not-installed" | "local-binding/missing" => {
            Status::not_found(msg)
        }
        "ledger/invalid-input" => Status::invalid_argument(msg),
        "ledger/database" => Status::unavailable(msg),
        "ledger/corrupt-row" | "vault/migration-mismatch" => Status::internal(msg),
        _ => Status::failed_precondition(msg),
    }
}

fn peer<T>(req: &Request<T>) -> Result<String, Status> {
    req.extensions()
        .get::<VerifiedPeer>()
        .map(|p| p.principal().to_string())
        .ok_or_else(|| Status::unauthenticated("no verified peer"))
}

fn digest(s: &str) -> Result<Sha256Digest, Status> {
    s.parse()
        .map_err(|e| Status::invalid_argument(format!("payload_digest: {e}")))
}

#[tonic::async_trait]
impl Admission for Core {
    async fn admit(
        &self,
        req: Request<pb::AdmitRequest>,
    ) -> Result<Response<pb::AdmitResponse>, Status> {
        let r = req.into_inner();
        let request = ledger::AdmissionRequest {
            key: ledger::EventKey {
                platform: r.platform.clone(),
                adapter_revision: r.adapter_revision.clone(),
                application_id: r.application_id.clone(),
                event_kind: r.event_kind.clone(),
                external_event_id: r.external_event_id.clone(),
            },
            payload_digest: digest(&r.payload_digest)?,
            habitat: self.habitat.clone(),
        };
        let (outcome, s, flush) = match self.vault.admit_unflushed(&request).await {
            Ok((ledger::Admission::Admitted(s), f)) => (pb::AdmissionOutcome::Admitted, s, f),
            Ok((ledger::Admission::Replayed(s), f)) => (pb::AdmissionOutcome::Replayed, s, f),
            Err(e @ LedgerError::SecurityFault { .. }) => {
                tracing::warn!(code = e.code(), "admission security fault recorded");
                return Ok(Response::new(pb::AdmitResponse {
                    outcome: pb::AdmissionOutcome::SecurityFault as i32,
                    refusal_code: e.code().to_owned(),
                    ..Default::default()
                }));
            }
            Err(e) => return Err(status(e)),
        };
        let terminal = s.turn_state.is_terminal();
        if !terminal {
            self.start_turn(s.turn_id.clone(), r);
        }
        // The turn runs beside the admission's flush; the edge is answered (and stops
        // redelivering) only once the admission is durable.
        flush.durable().await.map_err(status)?;
        Ok(Response::new(pb::AdmitResponse {
            outcome: outcome as i32,
            admission_id: s.admission_id.0,
            turn_status: if terminal {
                s.turn_state.as_str().to_owned()
            } else {
                String::new()
            },
            refusal_code: String::new(),
        }))
    }
}

fn lease(intent_id: String, generation: u64, owner: String) -> ledger::Lease {
    ledger::Lease {
        intent_id: ledger::IntentId(intent_id),
        generation: generation as i64,
        owner,
        // The ledger fences on its own stored expiry; this copy is informational.
        expires_at: ledger::UnixMillis(0),
    }
}

#[tonic::async_trait]
impl Delivery for Core {
    async fn claim(
        &self,
        req: Request<pb::ClaimRequest>,
    ) -> Result<Response<pb::ClaimResponse>, Status> {
        let owner = peer(&req)?;
        let base = req.get_ref().destination_base.clone();
        // Refused before anything is claimed: a bad base must not consume a generation.
        crate::authority::check_base(&base)?;
        let ms = match req.get_ref().lease_ms {
            0 => DEFAULT_LEASE_MS,
            n => n.min(MAX_LEASE_MS),
        };
        let lease_for = Duration::from_millis(u64::from(ms));
        let wait = Duration::from_millis(u64::from(req.get_ref().wait_ms.min(MAX_WAIT_MS)));
        let only = req.get_ref().interactions_only;
        // Registered before the first look, so a commit between the look and the wait wakes us.
        // The interaction lane waits for urgent work only: a message commit must wake a
        // message worker, not a claimer that would leave it.
        let wake = if only {
            self.deferrals.urgent().notified()
        } else {
            self.committed.notified()
        };
        tokio::pin!(wake);
        wake.as_mut().enable();
        // An interaction past its budget is acknowledged before any answer is claimed.
        if let Some(deferral) = self.deferral(&base).await {
            return Ok(Response::new(deferral));
        }
        let mut claimed = self.claim_one(&owner, lease_for, only).await?;
        if claimed.is_none() && !wait.is_zero() {
            let _ = tokio::time::timeout(wait, wake).await;
            if let Some(deferral) = self.deferral(&base).await {
                return Ok(Response::new(deferral));
            }
            claimed = self.claim_one(&owner, lease_for, only).await?;
        }
        let Some(c) = claimed else {
            return Ok(Response::new(pb::ClaimResponse::default()));
        };
        let effect: DiscordEffect = serde_json::from_str(&c.effect)
            .map_err(|e| Status::internal(format!("intent effect is not a Discord effect: {e}")))?;
        // No decision, no send. A refusal that can never lift ends the intent NOT_ATTEMPTED;
        // otherwise it stays leased (unsent) and a reclaim after the lease asks again.
        // The answer to an acknowledged interaction edits its original response.
        let edits = self.answer_edits(&c.turn_id, &effect).await?;
        let issued = match self.authority.issue(&c, &effect, &base, edits).await? {
            Ok(d) => d,
            Err(refused) => {
                tracing::warn!(intent = %c.lease.intent_id.0, code = %refused.code, "ward refused the delivery's EgressDecision");
                if refused.is_final {
                    let why = format!("{} {}", refused.code, refused.detail);
                    self.vault
                        .settle_not_attempted(&c.lease, why.trim_end())
                        .await
                        .map_err(status)?;
                }
                return Ok(Response::new(pb::ClaimResponse {
                    intent: None,
                    refusal_code: refused.code,
                    refusal_detail: refused.detail,
                    ..Default::default()
                }));
            }
        };
        let (interaction_id, application_id, sealed_interaction_token) =
            InteractionEffect::wire(&effect.interaction);
        Ok(Response::new(pb::ClaimResponse {
            intent: Some(pb::DeliveryIntent {
                intent_id: c.lease.intent_id.0,
                generation: c.lease.generation as u64,
                channel_id: effect.channel_id,
                reply_to_message_id: effect.reply_to_message_id,
                nonce: c.nonce,
                payload_digest: c.payload_digest.to_string(),
                parts: effect.parts,
                lease_expires_at_ms: c.lease.expires_at.0 as u64,
                egress_decision_id: issued.decision_id,
                decision_expires_at_ms: issued.expires_at_ms,
                destination: issued.destination,
                content_digest: issued.content_digest.to_string(),
                interaction_id,
                application_id,
                interaction_follow_up: InteractionEffect::is_follow_up(&effect.interaction),
                sealed_interaction_token,
                interaction_deferred: edits,
            }),
            ..Default::default()
        }))
    }

    async fn mark_submitting(
        &self,
        req: Request<pb::MarkSubmittingRequest>,
    ) -> Result<Response<pb::MarkSubmittingResponse>, Status> {
        let owner = peer(&req)?;
        let r = req.into_inner();
        self.authority
            .take(&r.intent_id, r.generation as i64, &r.egress_decision_id)?;
        self.vault
            .mark_submitting(&lease(r.intent_id, r.generation, owner))
            .await
            .map_err(status)?;
        Ok(Response::new(pb::MarkSubmittingResponse {}))
    }

    async fn settle(
        &self,
        req: Request<pb::SettleRequest>,
    ) -> Result<Response<pb::SettleResponse>, Status> {
        let owner = peer(&req)?;
        let r = req.into_inner();
        // Whatever the outcome, the reply is out of core's hands: the turn's slot is free.
        self.pipeline.slots().settled(&r.intent_id);
        let report = match pb::DeliveryOutcome::try_from(r.outcome) {
            Ok(pb::DeliveryOutcome::KnownSent) => ledger::DeliveryReport::Sent {
                message_id: r.message_id,
                platform_status: i64::from(r.platform_status),
            },
            Ok(pb::DeliveryOutcome::KnownRejected) => ledger::DeliveryReport::Rejected {
                platform_status: i64::from(r.platform_status),
                detail: r.platform_code,
            },
            Ok(pb::DeliveryOutcome::Unknown) => ledger::DeliveryReport::Unknown {
                detail: r.platform_code,
            },
            // The gate can never send this claim (e.g. an interaction token sealed to a retired
            // key): nothing left, and it is never claimed again.
            Ok(pb::DeliveryOutcome::NotAttempted) => {
                self.vault
                    .settle_not_attempted(
                        &lease(r.intent_id, r.generation, owner),
                        &r.platform_code,
                    )
                    .await
                    .map_err(status)?;
                return Ok(Response::new(pb::SettleResponse {}));
            }
            _ => {
                return Err(Status::invalid_argument(
                    "outcome must be KNOWN_SENT, KNOWN_REJECTED, UNKNOWN or NOT_ATTEMPTED",
                ));
            }
        };
        let sent = matches!(report, ledger::DeliveryReport::Sent { .. });
        self.vault
            .settle(&lease(r.intent_id, r.generation, owner), &report)
            .await
            .map_err(status)?;
        if sent {
            // KNOWN_SENT opened the answer's next part, if it has one: wake one waiting
            // claimer (waking all made every idle worker claim through the single writer).
            self.committed.notify_one();
        }
        Ok(Response::new(pb::SettleResponse {}))
    }

    async fn reconcile(
        &self,
        req: Request<pb::ReconcileRequest>,
    ) -> Result<Response<pb::ReconcileResponse>, Status> {
        let owner = peer(&req)?;
        let r = req.into_inner();
        let evidence = match (r.message_id.is_empty(), r.proved_absent) {
            (false, false) => ledger::DeliveryEvidence::MessageFound {
                message_id: r.message_id,
                evidence: r.evidence_kind,
            },
            (true, true) => ledger::DeliveryEvidence::ProvedAbsent {
                evidence: r.evidence_kind,
            },
            _ => {
                return Err(Status::invalid_argument(
                    "evidence names a message id or proves absence, not both",
                ));
            }
        };
        let found = matches!(evidence, ledger::DeliveryEvidence::MessageFound { .. });
        self.vault
            .reconcile_delivery(&ledger::IntentId(r.intent_id), &evidence, &owner)
            .await
            .map_err(status)?;
        // Found opened the next part, proved absence a successor: wake one waiting claimer.
        self.committed.notify_one();
        let outcome = if found {
            pb::DeliveryOutcome::KnownSent
        } else {
            pb::DeliveryOutcome::KnownRejected
        };
        Ok(Response::new(pb::ReconcileResponse {
            outcome: outcome as i32,
        }))
    }

    async fn list_unknown(
        &self,
        _req: Request<pb::ListUnknownRequest>,
    ) -> Result<Response<pb::ListUnknownResponse>, Status> {
        let records = self.vault.unknown_intents().await.map_err(status)?;
        let mut intents = Vec::with_capacity(records.len());
        for r in records {
            let effect: DiscordEffect = serde_json::from_str(&r.effect).map_err(|e| {
                Status::internal(format!("intent effect is not a Discord effect: {e}"))
            })?;
            let (interaction_id, application_id, sealed_interaction_token) =
                InteractionEffect::wire(&effect.interaction);
            intents.push(pb::DeliveryIntent {
                // A resumed gate reconciles an UNKNOWN edit by reading `@original` for it.
                interaction_deferred: self.answer_edits(&r.turn_id, &effect).await?,
                interaction_follow_up: InteractionEffect::is_follow_up(&effect.interaction),
                interaction_id,
                application_id,
                sealed_interaction_token,
                intent_id: r.intent_id.0,
                channel_id: effect.channel_id,
                reply_to_message_id: effect.reply_to_message_id,
                nonce: r.nonce,
                payload_digest: r.payload_digest,
                parts: effect.parts,
                ..Default::default()
            });
        }
        Ok(Response::new(pb::ListUnknownResponse { intents }))
    }

    async fn decide_reconcile_read(
        &self,
        req: Request<pb::DecideReconcileReadRequest>,
    ) -> Result<Response<pb::DecideReconcileReadResponse>, Status> {
        let caller = peer(&req)?;
        self.reads
            .decide(&caller, req.into_inner())
            .await
            .map(Response::new)
    }
}

#[tonic::async_trait]
impl Trail for Core {
    async fn get_trail(
        &self,
        req: Request<pb::GetTrailRequest>,
    ) -> Result<Response<pb::GetTrailResponse>, Status> {
        let key = req.into_inner().key;
        // An operator A2A task's key is its task id: the peer's quarantined status message,
        // while core holds it (memory, not the ledger).
        let a2a_peer_message = self
            .intercom
            .as_ref()
            .and_then(|route| route.peer_message(&key))
            .unwrap_or_default();
        let key = if key.starts_with("adm_") {
            ledger::TrailKey::AdmissionId(ledger::AdmissionId(key))
        } else if key.starts_with("turn_") {
            ledger::TrailKey::TurnId(ledger::TurnId(key))
        } else {
            ledger::TrailKey::ExternalEventId(key)
        };
        let entries = self.vault.trail(&key).await.map_err(status)?;
        let edges = entries
            .into_iter()
            .map(|e| pb::TrailEdge {
                record: e.record.to_owned(),
                id: e.id,
                fields: e
                    .fields
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect(),
                committed_at_ms: e.committed_at.max(0) as u64,
            })
            .collect();
        Ok(Response::new(pb::GetTrailResponse {
            edges,
            a2a_peer_message,
        }))
    }

    async fn vault_status(
        &self,
        _req: Request<pb::VaultStatusRequest>,
    ) -> Result<Response<pb::VaultStatusResponse>, Status> {
        let s = self.vault.vault_status().await.map_err(status)?;
        let text = match s {
            ledger::VaultStatus::Serving { .. } => "SERVING",
            ledger::VaultStatus::AwaitingReconciliation {
                rolled_back: Some(_),
                ..
            } => "ROLLED_BACK",
            ledger::VaultStatus::AwaitingReconciliation { .. } => "AWAITING_RECONCILIATION",
        };
        let reconciliations = self
            .vault
            .reconciliations()
            .await
            .map_err(status)?
            .into_iter()
            .map(|r| pb::VaultReconciliation {
                kind: r.kind,
                recorded_by: r.operator,
                note: r.note,
                recorded_at_ms: r.recorded_at.0.max(0) as u64,
            })
            .collect();
        Ok(Response::new(pb::VaultStatusResponse {
            status: text.to_owned(),
            backend: format!("{:?}", self.vault.backend()),
            reconciliations,
        }))
    }

    async fn reconcile_vault(
        &self,
        req: Request<pb::ReconcileVaultRequest>,
    ) -> Result<Response<pb::ReconcileVaultResponse>, Status> {
        let operator = peer(&req)?;
        let r = req.into_inner();
        let kind = match r.kind.as_str() {
            "GENESIS" => ledger::ReconciliationKind::Genesis,
            "EFFECTS_RECONCILED" => ledger::ReconciliationKind::EffectsReconciled,
            _ => {
                return Err(Status::invalid_argument(
                    "kind must be GENESIS or EFFECTS_RECONCILED",
                ));
            }
        };
        require_text(&r.note, "a reconciliation states what was checked (note)")?;
        self.vault
            .record_operator_reconciliation(&ledger::OperatorReconciliation {
                kind,
                operator,
                note: r.note,
            })
            .await
            .map_err(status)?;
        Ok(Response::new(pb::ReconcileVaultResponse {
            status: "SERVING".into(),
        }))
    }

    async fn send_a2a_task(
        &self,
        req: Request<pb::SendA2aTaskRequest>,
    ) -> Result<Response<pb::SendA2aTaskResponse>, Status> {
        let operator = peer(&req)?;
        let Some(route) = &self.intercom else {
            return Err(Status::failed_precondition(
                "intercom/not-configured: core has no settings.intercom",
            ));
        };
        route
            .send(&operator, req.into_inner())
            .await
            .map(Response::new)
    }

    async fn mark_tainted(
        &self,
        req: Request<pb::MarkTaintedRequest>,
    ) -> Result<Response<pb::MarkTaintedResponse>, Status> {
        let operator = peer(&req)?;
        let r = req.into_inner();
        require_text(&r.principal, "a taint names the principal")?;
        require_text(&r.reason, "a taint states its reason")?;
        let report = self
            .vault
            .mark_tainted(&r.principal, &r.reason, &operator)
            .await
            .map_err(status)?;
        tracing::warn!(principal = %r.principal, records = report.records.len(), "operator marked a principal tainted");
        Ok(Response::new(pb::MarkTaintedResponse {
            taint_id: report.taint_id,
            records: report
                .records
                .into_iter()
                .map(|t| pb::TaintedRecord {
                    record: t.record.to_owned(),
                    id: t.id,
                    state_at_taint: t.state_at_taint,
                    action: t.action.as_str().to_owned(),
                })
                .collect(),
        }))
    }
}

/// Refuses an empty or blank operator text (a note, a principal, a reason).
fn require_text(text: &str, refusal: &'static str) -> Result<(), Status> {
    if text.trim().is_empty() {
        return Err(Status::invalid_argument(refusal));
    }
    Ok(())
}
