//! **API Boundary:** the Ward gRPC adapter. Protobuf types stop here; the desk sees plain Rust.
//!
//! Domain refusals travel in the response's `refusal_code` (and `refusal_detail`) with status
//! OK; only malformed input is `INVALID_ARGUMENT`, and only store failures are `INTERNAL`. Step
//! grant refusals are the exception, mapped in [`grant_status`] alone: each is a gRPC error
//! whose message starts with its code, so a redeemer cannot read a refusal as a grant; so is a
//! Room record ward will not sign (`room-sign/...`, INVALID_ARGUMENT). The
//! caller is the [`VerifiedPeer`] the port's handshake established, never anything in the
//! request. Logs carry codes, ids and principals only, never payloads, labels, reasons or
//! subject ids.

use std::sync::Arc;

use reach_digest::Sha256Digest;
use reach_port::VerifiedPeer;
use reach_proto::ward::v1::ward_server::{Ward, WardServer};
use reach_proto::ward::v1::{
    AdmitScopeRequest, AdmitScopeResponse, AnswerHilRequestRequest, FencePackRequest,
    FencePackResponse, FileHilRequestRequest, GetHilRequestRequest, HilRequestView,
    IssueDecisionRequest, IssueDecisionResponse, ListHilRequestsRequest, ListHilRequestsResponse,
    MintDutySigilRequest, MintDutySigilResponse, MintStepGrantRequest, MintStepGrantResponse,
    RedeemDecisionRequest, RedeemDecisionResponse, RedeemStepGrantRequest, RedeemStepGrantResponse,
    RevokeRequest, RevokeResponse, RoomKeyRequest, RoomKeyResponse, SignRoomRecordRequest,
    SignRoomRecordResponse, WatchHilRequestsRequest,
};
use reach_room::fact::SignedKind;
use tonic::{Request, Response, Status};

use crate::clock::UnixMillis;
use crate::desk::{DecisionRequest, Desk, DutyRequest, RunRef};
use crate::grant::{EffectClass, FenceRequest, GrantRefusal, HilMode, StepClaim, StepGrantRequest};
use crate::hil::{HilFiling, HilRefusal, HilRequest, StepAction};
use crate::refusal::{DeskError, Refusal};
use crate::room_key::RoomKey;
use crate::scope::GuestEvent;

/// The Ward service over one [`Desk`] and the node's [`RoomKey`].
#[derive(Debug, Clone)]
pub struct WardService {
    desk: Arc<Desk>,
    room_key: Arc<RoomKey>,
}

impl WardService {
    pub fn new(desk: Arc<Desk>, room_key: Arc<RoomKey>) -> Self {
        Self { desk, room_key }
    }

    /// The tonic server to hand to a port.
    pub fn into_server(self) -> WardServer<Self> {
        WardServer::new(self)
    }
}

/// The calling role's name, from the verified handshake.
fn caller<T>(req: &Request<T>) -> Result<String, Status> {
    req.extensions()
        .get::<VerifiedPeer>()
        .map(|p| p.principal().name().to_owned())
        .ok_or_else(|| Status::unauthenticated("no verified peer on this connection"))
}

/// Splits a desk result into an answer or a refusal; anything else becomes a gRPC error.
fn settle<T>(
    r: Result<T, DeskError>,
    method: &'static str,
    who: &str,
) -> Result<Result<T, Refusal>, Status> {
    match r {
        Ok(v) => Ok(Ok(v)),
        Err(DeskError::Refused(refusal)) => {
            tracing::info!(
                method,
                caller = who,
                code = refusal.code(),
                detail = refusal.detail(),
                "refused"
            );
            Ok(Err(refusal))
        }
        Err(DeskError::Grant(refusal)) => {
            tracing::info!(
                method,
                caller = who,
                code = refusal.code(),
                detail = refusal.detail(),
                "step grant refused"
            );
            Err(grant_status(refusal))
        }
        Err(DeskError::Hil(refusal)) => {
            tracing::info!(method, caller = who, code = refusal.code(), "hil refused");
            Err(hil_status(refusal))
        }
        Err(DeskError::Malformed(field)) => {
            tracing::info!(method, caller = who, field, "malformed request");
            Err(Status::invalid_argument(format!(
                "malformed field `{field}`"
            )))
        }
        Err(e @ (DeskError::Store(_) | DeskError::Corrupt(_))) => {
            tracing::error!(method, caller = who, error = %e, "ward store failed");
            Err(Status::internal("ward store failed"))
        }
    }
}

/// A step grant or HIL call's answer: every refusal is a gRPC error (see [`grant_status`] and
/// [`hil_status`]).
fn settle_grant<T>(r: Result<T, DeskError>, method: &'static str, who: &str) -> Result<T, Status> {
    match settle(r, method, who)? {
        Ok(v) => Ok(v),
        // The grant calls refuse with a `GrantRefusal` only; should one ever return a decision
        // refusal, it still grants nothing.
        Err(refusal) => {
            tracing::error!(
                method,
                caller = who,
                code = refusal.code(),
                "decision refusal from a step grant call"
            );
            Err(Status::internal("ward refused with an unexpected code"))
        }
    }
}

/// The one mapping of a step grant refusal to a gRPC status. The message is the code, then
/// `: <field>` for `grant/bad-request`; clients match the code, not the status.
pub fn grant_status(refusal: GrantRefusal) -> Status {
    let message = refusal.to_string();
    match refusal {
        GrantRefusal::BadRequest(_) => Status::invalid_argument(message),
        GrantRefusal::Forged => Status::permission_denied(message),
        GrantRefusal::Used
        | GrantRefusal::Expired
        | GrantRefusal::OtherStep
        | GrantRefusal::OtherPlan
        | GrantRefusal::OtherPack
        | GrantRefusal::OtherInstance
        | GrantRefusal::OtherExperiment
        | GrantRefusal::GenerationStale
        | GrantRefusal::Unfenced
        | GrantRefusal::Revoked
        | GrantRefusal::Paused
        | GrantRefusal::ProfileChanged
        | GrantRefusal::HilMissing
        | GrantRefusal::HilPending
        | GrantRefusal::HilDenied
        | GrantRefusal::HilExpired
        | GrantRefusal::HilSpent => Status::failed_precondition(message),
    }
}

/// The one mapping of a HIL refusal to a gRPC status; the message starts with the code.
pub fn hil_status(refusal: HilRefusal) -> Status {
    let message = refusal.to_string();
    match refusal {
        HilRefusal::BadRequest(_) => Status::invalid_argument(message),
        HilRefusal::Unknown => Status::not_found(message),
        HilRefusal::Answered(_)
        | HilRefusal::Expired
        | HilRefusal::OtherRequest
        | HilRefusal::Conflict => Status::failed_precondition(message),
    }
}

fn hil_bad(field: &'static str) -> Status {
    hil_status(HilRefusal::BadRequest(field))
}

/// A request as the operator (or core) reads it.
fn hil_view(h: &HilRequest) -> HilRequestView {
    let f = &h.filing;
    HilRequestView {
        id: h.id.as_str().to_owned(),
        digest: h.digest.to_string(),
        state: h.state.as_str().to_owned(),
        experiment_id: f.step.experiment_id.clone(),
        instance_id: f.step.instance_id.clone(),
        plan_digest: f.step.plan_digest.to_string(),
        step_index: f.step.step_index,
        step_digest: f.step.step_digest.to_string(),
        pack_name: f.step.pack_name.clone(),
        pack_generation: f.step.pack_generation,
        effect_class: f.effect_class.as_str().to_owned(),
        class_source: f.class_source.clone(),
        action: f.action.as_str().to_owned(),
        target: f.target.clone(),
        argv: f.argv.clone(),
        diff: f.diff.clone(),
        rollback: f.rollback.clone(),
        filed_at_unix_ms: millis(h.filed_at),
        expires_at_unix_ms: millis(h.expires_at),
        answered_at_unix_ms: h.answered_at.map(millis).unwrap_or(0),
        answered_by: h.answered_by.clone().unwrap_or_default(),
        reason: h.reason.clone(),
    }
}

/// A digest field of a step grant call.
fn grant_digest(text: &str, field: &'static str) -> Result<Sha256Digest, Status> {
    text.parse()
        .map_err(|_| grant_status(GrantRefusal::BadRequest(field)))
}

fn digest(text: &str, field: &'static str) -> Result<Sha256Digest, Status> {
    text.parse()
        .map_err(|_| Status::invalid_argument(format!("malformed field `{field}`")))
}

fn millis(at: UnixMillis) -> u64 {
    u64::try_from(at.0).unwrap_or(0)
}

#[tonic::async_trait]
impl Ward for WardService {
    async fn admit_scope(
        &self,
        req: Request<AdmitScopeRequest>,
    ) -> Result<Response<AdmitScopeResponse>, Status> {
        let who = caller(&req)?;
        let r = req.into_inner();
        let deadline = match r.expires_at_ms {
            0 => None,
            ms => Some(UnixMillis(i64::try_from(ms).map_err(|_| {
                Status::invalid_argument("malformed field `expires_at_ms`")
            })?)),
        };
        let event = GuestEvent {
            platform: r.platform,
            application: r.application_id,
            guild: r.guild_id,
            channel: r.channel_id,
            subject: r.subject_id,
        };
        let run = RunRef {
            run_id: r.run_id,
            deadline,
        };
        let answer = match settle(self.desk.admit(&who, event, run).await, "AdmitScope", &who)? {
            Ok(a) => {
                tracing::info!(
                    caller = %who, scope = %a.scope.id, sigil = %a.sigil.id, run = %a.sigil.run_id,
                    replayed = a.replayed, "scope admitted"
                );
                AdmitScopeResponse {
                    scope_id: a.scope.id.as_str().to_owned(),
                    sigil_id: a.sigil.id.as_str().to_owned(),
                    expires_at_ms: millis(a.sigil.expires_at),
                    ..Default::default()
                }
            }
            Err(refusal) => AdmitScopeResponse {
                refusal_code: refusal.code().to_owned(),
                refusal_detail: refusal.detail().to_owned(),
                ..Default::default()
            },
        };
        Ok(Response::new(answer))
    }

    async fn issue_decision(
        &self,
        req: Request<IssueDecisionRequest>,
    ) -> Result<Response<IssueDecisionResponse>, Status> {
        let who = caller(&req)?;
        let r = req.into_inner();
        let cut_receipt_digest = match r.cut_receipt_digest.as_str() {
            "" => None,
            text => Some(digest(text, "cut_receipt_digest")?),
        };
        let request = DecisionRequest {
            sigil_id: r.sigil_id,
            run_id: r.run_id,
            attempt_id: r.attempt_id,
            destination: r.destination,
            purpose: r.purpose,
            payload_digest: digest(&r.payload_digest, "payload_digest")?,
            labels: r.labels,
            policy_revision: r.policy_revision,
            cut_receipt_digest,
            max_tokens: r.max_tokens,
            max_spend_micros: r.max_spend_micros,
        };
        let (run, attempt) = (request.run_id.clone(), request.attempt_id.clone());
        let answer = match settle(self.desk.issue(&who, request).await, "IssueDecision", &who)? {
            Ok(d) => {
                tracing::info!(caller = %who, decision = %d.id, run, attempt, redeemer = d.redeemer, "decision issued");
                IssueDecisionResponse {
                    decision_id: d.id.as_str().to_owned(),
                    expires_at_ms: millis(d.expires_at),
                    ..Default::default()
                }
            }
            Err(refusal) => IssueDecisionResponse {
                refusal_code: refusal.code().to_owned(),
                refusal_detail: refusal.detail().to_owned(),
                refusal_final: refusal.is_final(),
                ..Default::default()
            },
        };
        Ok(Response::new(answer))
    }

    async fn redeem_decision(
        &self,
        req: Request<RedeemDecisionRequest>,
    ) -> Result<Response<RedeemDecisionResponse>, Status> {
        let who = caller(&req)?;
        let r = req.into_inner();
        let payload = digest(&r.payload_digest, "payload_digest")?;
        let result = self
            .desk
            .redeem(&who, &r.decision_id, &r.destination, &payload)
            .await;
        let answer = match settle(result, "RedeemDecision", &who)? {
            Ok(d) => {
                tracing::info!(caller = %who, decision = %d.id(), run = d.run_id(), attempt = d.attempt_id(), "decision redeemed");
                RedeemDecisionResponse {
                    admitted: true,
                    run_id: d.run_id().to_owned(),
                    attempt_id: d.attempt_id().to_owned(),
                    max_tokens: d.max_tokens(),
                    max_spend_micros: d.max_spend_micros(),
                    ..Default::default()
                }
            }
            Err(refusal) => RedeemDecisionResponse {
                refusal_code: refusal.code().to_owned(),
                ..Default::default()
            },
        };
        Ok(Response::new(answer))
    }

    async fn mint_duty_sigil(
        &self,
        req: Request<MintDutySigilRequest>,
    ) -> Result<Response<MintDutySigilResponse>, Status> {
        let who = caller(&req)?;
        let r = req.into_inner();
        let request = DutyRequest {
            subject: r.subject_id,
            purpose: r.purpose,
        };
        let answer = match settle(
            self.desk.mint_duty(&who, request).await,
            "MintDutySigil",
            &who,
        )? {
            Ok(d) => {
                tracing::info!(
                    caller = %who, sigil = %d.id, subject = d.subject, purpose = d.purpose,
                    reads_left = d.reads_left, reused = d.reused, "duty sigil held"
                );
                MintDutySigilResponse {
                    sigil_id: d.id.as_str().to_owned(),
                    expires_at_ms: millis(d.expires_at),
                    max_reads: d.reads,
                    reads_left: d.reads_left,
                    reused: d.reused,
                    ..Default::default()
                }
            }
            Err(refusal) => MintDutySigilResponse {
                refusal_code: refusal.code().to_owned(),
                refusal_detail: refusal.detail().to_owned(),
                ..Default::default()
            },
        };
        Ok(Response::new(answer))
    }

    async fn revoke(
        &self,
        req: Request<RevokeRequest>,
    ) -> Result<Response<RevokeResponse>, Status> {
        let who = caller(&req)?;
        let r = req.into_inner();
        // The reason is operator text: bounded, and never logged.
        if r.reason.len() > crate::desk::MAX_ID_BYTES * 4 {
            return Err(Status::invalid_argument("malformed field `reason`"));
        }
        let answer = match settle(self.desk.revoke(&who, &r.sigil_id).await, "Revoke", &who)? {
            Ok(v) => {
                tracing::info!(
                    caller = %who, sigil = r.sigil_id, decisions_revoked = v.decisions_revoked,
                    already_revoked = v.already_revoked, "sigil revoked"
                );
                RevokeResponse {
                    decisions_revoked: v.decisions_revoked,
                    ..Default::default()
                }
            }
            Err(refusal) => RevokeResponse {
                refusal_code: refusal.code().to_owned(),
                ..Default::default()
            },
        };
        Ok(Response::new(answer))
    }

    async fn mint_step_grant(
        &self,
        req: Request<MintStepGrantRequest>,
    ) -> Result<Response<MintStepGrantResponse>, Status> {
        let who = caller(&req)?;
        let r = req.into_inner();
        let request = StepGrantRequest {
            step: StepClaim {
                experiment_id: r.experiment_id,
                instance_id: r.instance_id,
                plan_digest: grant_digest(&r.plan_digest, "plan_digest")?,
                step_index: r.step_index,
                step_digest: grant_digest(&r.step_digest, "step_digest")?,
                pack_name: r.pack_name,
                pack_generation: r.pack_generation,
            },
            effect_class: EffectClass::parse(&r.effect_class)
                .ok_or_else(|| grant_status(GrantRefusal::BadRequest("effect_class")))?,
            ttl: match r.ttl_ms {
                0 => None,
                ms => Some(std::time::Duration::from_millis(ms)),
            },
            profile_digest: grant_digest(&r.profile_digest, "profile_digest")?,
            hil_required: r.hil_required,
        };
        let (experiment, step) = (request.step.experiment_id.clone(), request.step.step_index);
        let g = settle_grant(
            self.desk.mint_step_grant(&who, request).await,
            "MintStepGrant",
            &who,
        )?;
        // The token is a credential for one step: never logged.
        tracing::info!(caller = %who, grant = %g.id, experiment, step, "step grant minted");
        Ok(Response::new(MintStepGrantResponse {
            grant: g.token,
            grant_id: g.id.as_str().to_owned(),
            expires_at_unix_ms: millis(g.expires_at),
        }))
    }

    async fn redeem_step_grant(
        &self,
        req: Request<RedeemStepGrantRequest>,
    ) -> Result<Response<RedeemStepGrantResponse>, Status> {
        let who = caller(&req)?;
        let r = req.into_inner();
        let claim = StepClaim {
            experiment_id: r.experiment_id,
            instance_id: r.instance_id,
            plan_digest: grant_digest(&r.plan_digest, "plan_digest")?,
            step_index: r.step_index,
            step_digest: grant_digest(&r.step_digest, "step_digest")?,
            pack_name: r.pack_name,
            pack_generation: r.pack_generation,
        };
        let g = settle_grant(
            self.desk.redeem_step_grant(&who, &r.grant, &claim).await,
            "RedeemStepGrant",
            &who,
        )?;
        tracing::info!(
            caller = %who, grant = %g.id(), experiment = claim.experiment_id,
            step = claim.step_index, class = %g.effect_class(), "step grant redeemed"
        );
        Ok(Response::new(RedeemStepGrantResponse {
            grant_id: g.id().as_str().to_owned(),
            effect_class: g.effect_class().as_str().to_owned(),
            redeemed_at_unix_ms: millis(g.redeemed_at()),
        }))
    }

    async fn fence_pack(
        &self,
        req: Request<FencePackRequest>,
    ) -> Result<Response<FencePackResponse>, Status> {
        let who = caller(&req)?;
        let r = req.into_inner();
        let fence = FenceRequest {
            pack_name: r.pack_name,
            generation: r.current_generation,
            revoked: r.revoked,
            paused: r.paused,
            bound_profile_digest: grant_digest(&r.bound_profile_digest, "bound_profile_digest")?,
            active_profile_digest: grant_digest(&r.active_profile_digest, "active_profile_digest")?,
            hil: HilMode::parse(&r.hil)
                .ok_or_else(|| grant_status(GrantRefusal::BadRequest("hil")))?,
        };
        let f = settle_grant(self.desk.fence_pack(&who, &fence).await, "FencePack", &who)?;
        tracing::info!(
            caller = %who, pack = fence.pack_name, asked = fence.generation,
            current = f.current_generation, revoked = fence.revoked, paused = fence.paused,
            epoch = f.epoch, stale_grants = f.stale_grants, "pack fenced"
        );
        Ok(Response::new(FencePackResponse {
            current_generation: f.current_generation,
            stale_grants: f.stale_grants,
            epoch: f.epoch,
        }))
    }

    async fn file_hil_request(
        &self,
        req: Request<FileHilRequestRequest>,
    ) -> Result<Response<HilRequestView>, Status> {
        let who = caller(&req)?;
        let r = req.into_inner();
        let hil_digest = |text: &str, field| text.parse().map_err(|_| hil_bad(field));
        let filing = HilFiling {
            step: StepClaim {
                experiment_id: r.experiment_id,
                instance_id: r.instance_id,
                plan_digest: hil_digest(&r.plan_digest, "plan_digest")?,
                step_index: r.step_index,
                step_digest: hil_digest(&r.step_digest, "step_digest")?,
                pack_name: r.pack_name,
                pack_generation: r.pack_generation,
            },
            effect_class: EffectClass::parse(&r.effect_class)
                .ok_or_else(|| hil_bad("effect_class"))?,
            class_source: r.class_source,
            action: StepAction::parse(&r.action).ok_or_else(|| hil_bad("action"))?,
            target: r.target,
            argv: r.argv,
            diff: r.diff,
            rollback: r.rollback,
            ttl: match r.ttl_ms {
                0 => None,
                ms => Some(std::time::Duration::from_millis(ms)),
            },
        };
        let h = settle_grant(
            self.desk.file_hil_request(&who, filing).await,
            "FileHilRequest",
            &who,
        )?;
        tracing::info!(
            caller = %who, hil = %h.id, experiment = h.filing.step.experiment_id,
            step = h.filing.step.step_index, class = %h.filing.effect_class,
            state = %h.state, "hil request filed"
        );
        Ok(Response::new(hil_view(&h)))
    }

    async fn get_hil_request(
        &self,
        req: Request<GetHilRequestRequest>,
    ) -> Result<Response<HilRequestView>, Status> {
        let who = caller(&req)?;
        let id = req.into_inner().id;
        let h = settle_grant(self.desk.hil_request(&id).await, "GetHilRequest", &who)?;
        Ok(Response::new(hil_view(&h)))
    }

    async fn list_hil_requests(
        &self,
        req: Request<ListHilRequestsRequest>,
    ) -> Result<Response<ListHilRequestsResponse>, Status> {
        let who = caller(&req)?;
        let all = req.into_inner().all;
        let list = settle_grant(self.desk.hil_requests(all).await, "ListHilRequests", &who)?;
        Ok(Response::new(ListHilRequestsResponse {
            requests: list.iter().map(hil_view).collect(),
        }))
    }

    async fn answer_hil_request(
        &self,
        req: Request<AnswerHilRequestRequest>,
    ) -> Result<Response<HilRequestView>, Status> {
        let who = caller(&req)?;
        let r = req.into_inner();
        let h = settle_grant(
            self.desk
                .answer_hil_request(&who, &r.id, &r.request_digest, r.approve, &r.reason)
                .await,
            "AnswerHilRequest",
            &who,
        )?;
        // The reason is the operator's text: kept with the answer, never logged.
        tracing::info!(caller = %who, hil = %h.id, state = %h.state, "hil request answered");
        Ok(Response::new(hil_view(&h)))
    }

    async fn sign_room_record(
        &self,
        req: Request<SignRoomRecordRequest>,
    ) -> Result<Response<SignRoomRecordResponse>, Status> {
        let who = caller(&req)?;
        let r = req.into_inner();
        // The kind is the caller's text: never logged, only refused.
        let Some(kind) = SignedKind::from_name(&r.kind) else {
            tracing::info!(
                method = "SignRoomRecord",
                caller = who,
                code = "room-sign/kind",
                "room record refused"
            );
            return Err(Status::invalid_argument(
                "room-sign/kind: kind is not fact, execution-record or recipe",
            ));
        };
        // What is signed is logged by kind and digest only, never its bytes.
        let digest = Sha256Digest::of(&r.record);
        match self.room_key.sign(kind, &r.record) {
            Ok(signature) => {
                tracing::info!(
                    caller = who, kind = kind.name(), record = %digest,
                    key = self.room_key.key_id(), "room record signed"
                );
                Ok(Response::new(SignRoomRecordResponse {
                    signature: signature.to_vec(),
                    key_id: self.room_key.key_id().to_owned(),
                }))
            }
            Err(refusal) => {
                tracing::info!(
                    method = "SignRoomRecord", caller = who, kind = kind.name(),
                    record = %digest, code = refusal.code(), "room record refused"
                );
                Err(Status::invalid_argument(format!(
                    "{}: {refusal}",
                    refusal.code()
                )))
            }
        }
    }

    async fn room_key(
        &self,
        _req: Request<RoomKeyRequest>,
    ) -> Result<Response<RoomKeyResponse>, Status> {
        Ok(Response::new(RoomKeyResponse {
            public_key: self.room_key.public_key().to_vec(),
            key_id: self.room_key.key_id().to_owned(),
        }))
    }

    type WatchHilRequestsStream = std::pin::Pin<
        Box<dyn tokio_stream::Stream<Item = Result<HilRequestView, Status>> + Send + 'static>,
    >;

    async fn watch_hil_requests(
        &self,
        req: Request<WatchHilRequestsRequest>,
    ) -> Result<Response<Self::WatchHilRequestsStream>, Status> {
        let who = caller(&req)?;
        let desk = self.desk.clone();
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        tokio::spawn(async move {
            let mut filings = desk.hil_filings();
            let mut seen = 0;
            loop {
                filings.borrow_and_update();
                let batch = match desk.hil_pending_after(seen).await {
                    Ok(b) => b,
                    Err(e) => {
                        tracing::error!(caller = who, error = %e, "hil watch read failed");
                        let _ = tx.send(Err(Status::internal("ward store failed"))).await;
                        return;
                    }
                };
                for h in &batch {
                    seen = seen.max(h.seq);
                    if tx.send(Ok(hil_view(h))).await.is_err() {
                        return;
                    }
                }
                tokio::select! {
                    changed = filings.changed() => if changed.is_err() { return },
                    () = tx.closed() => return,
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }
}
