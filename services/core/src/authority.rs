//! The EgressDecision for every Discord delivery claim.
//!
//! Core holds the task's Sigil; the gate (egress-discord) never sees it. When the gate claims an
//! intent, core asks ward for a fresh decision bound to this one physical attempt — this intent at
//! this claim generation, the exact URL the gate dials, the digest of the exact content bytes —
//! records it in the ledger, and hands the gate only the decision id. The gate redeems it at ward
//! (exactly once, only as `egress-discord`) before it marks SUBMITTING, and core accepts
//! SUBMITTING only with the decision it issued for that generation. A reclaim after a pre-submit
//! failure is a new generation and so needs a new decision.
//!
//! [`ModelAuthority`] does the same for a model Portal call: a decision bound to the run's one
//! model attempt, the configured endpoint, the Cut payload's digest and the Cut receipt.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use reach_digest::Sha256Digest;
use reach_discord::Snowflake;
use reach_discord::delivery::{
    DeferredAck, InteractionRoute, create_message_url, decision_attempt_id, deferral_attempt_id,
    interaction_callback_url, token_placeholder,
};
use reach_phylactery as ledger;
use reach_phylactery::{ClaimedIntent, Phylactery, UnixMillis};
use reach_proto::ward::v1::IssueDecisionRequest;
use reach_proto::ward::v1::ward_client::WardClient;
use tonic::Status;
use tonic::transport::Channel;

use crate::pipeline::PATTERN;
use crate::ports::DiscordEffect;

/// The purpose ward's policy maps to the one redeemer `egress-discord`.
pub const PURPOSE: &str = "discord-delivery";
/// The policy the public answer's payload was formed under, bound into every decision.
pub const POLICY_REVISION: &str = "reach.public-answer/1";
/// Labels of a public answer: formed from a public question and the public corpus only.
const LABELS: [&str; 1] = ["public"];
/// Longest accepted `destination_base` from a claimer.
const MAX_BASE_BYTES: usize = 512;

/// The destination and payload digest a delivery's decision binds: the channel's Create Message
/// URL and the content bytes, or, for an interaction's callback, the token-free callback URL
/// (the token is sealed; core never sees it) and the exact callback body; for the answer to a
/// deferred interaction (`edits`), its token-free `@original` and the exact edit body.
fn bound_send(
    base: &str,
    effect: &DiscordEffect,
    content: &str,
    edits: bool,
) -> Result<(String, Sha256Digest), Status> {
    let Some(interaction) = &effect.interaction else {
        return Ok((
            create_message_url(base, &effect.channel_id),
            Sha256Digest::of(content),
        ));
    };
    let id: Snowflake = interaction
        .interaction_id
        .parse()
        .map_err(|_| Status::internal("intent effect has no valid interaction id"))?;
    let route = if interaction.follow_up || edits {
        let application_id: Snowflake = interaction
            .application_id
            .parse()
            .map_err(|_| Status::internal("intent effect has no valid application id"))?;
        if interaction.follow_up {
            InteractionRoute::FollowUp { application_id }
        } else {
            InteractionRoute::EditOriginal { application_id }
        }
    } else {
        InteractionRoute::Callback
    };
    let (destination, body) = route.bound_send(base, id, content);
    Ok((destination, Sha256Digest::of(body)))
}

/// What ward bound for one claim.
#[derive(Debug, Clone)]
pub struct Issued {
    pub decision_id: String,
    pub expires_at_ms: u64,
    pub destination: String,
    pub content_digest: Sha256Digest,
}

/// Why a claim carries no decision: ward's typed refusal, passed through verbatim.
#[derive(Debug, Clone)]
pub struct Refused {
    pub code: String,
    pub detail: String,
    /// Ward says asking again cannot succeed while the task lives.
    pub is_final: bool,
}

/// Refuses a claimer's base URL that could not be a decision's destination.
pub fn check_base(base: &str) -> Result<(), Status> {
    if base.len() > MAX_BASE_BYTES
        || !base.starts_with("https://")
        || base.ends_with('/')
        || base.bytes().any(|b| !b.is_ascii_graphic())
    {
        return Err(Status::invalid_argument(
            "destination_base must be an https:// base URL without a trailing slash",
        ));
    }
    Ok(())
}

/// One claim: (intent id, generation).
type ClaimKey = (String, i64);

#[derive(Debug, Clone)]
pub struct DeliveryAuthority {
    ward: WardClient<Channel>,
    vault: Phylactery,
    /// Decisions issued per (intent, generation), until MarkSubmitting consumes them or their
    /// expiry passes. Lost on restart, which only refuses a pending MarkSubmitting: the gate then
    /// lets its lease lapse and the reclaim gets a new decision. Nothing is ever sent unbound.
    issued: Arc<Mutex<HashMap<ClaimKey, (String, UnixMillis)>>>,
}

impl DeliveryAuthority {
    pub fn new(ward: Channel, vault: Phylactery) -> Self {
        Self {
            ward: WardClient::new(ward),
            vault,
            issued: Arc::default(),
        }
    }

    /// The ward client, shared with the reconciliation reads' authority (`ports::reconcile`).
    pub fn ward(&self) -> WardClient<Channel> {
        self.ward.clone()
    }

    /// Obtains and records the decision for a fresh claim; `edits`: the answer to a deferred
    /// interaction ([`crate::deferral`]).
    pub async fn issue(
        &self,
        claimed: &ClaimedIntent,
        effect: &DiscordEffect,
        base: &str,
        edits: bool,
    ) -> Result<Result<Issued, Refused>, Status> {
        check_base(base)?;
        let content = effect
            .parts
            .first()
            .ok_or_else(|| Status::internal("intent effect has no content"))?;
        let (destination, content_digest) = bound_send(base, effect, content, edits)?;
        let generation = claimed.lease.generation;
        let attempt = decision_attempt_id(&claimed.lease.intent_id.0, generation as u64);
        let issued = self
            .issue_bound(
                &effect.sigil_id,
                &claimed.turn_id,
                attempt,
                destination,
                content_digest,
            )
            .await?;
        let Ok(issued) = issued else {
            return Ok(issued);
        };
        let mut map = self.issued.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.vault.now();
        map.retain(|_, (_, exp)| *exp > now);
        let expires_at = UnixMillis(i64::try_from(issued.expires_at_ms).unwrap_or(i64::MAX));
        map.insert(
            (claimed.lease.intent_id.0.clone(), generation),
            (issued.decision_id.clone(), expires_at),
        );
        Ok(Ok(issued))
    }

    /// Obtains and records the decision for an interaction's deferred acknowledgement (type 5):
    /// the token-free callback destination and the exact type-5 body, attempt `{turn}#defer`,
    /// recorded on the turn's run before the gate sees its id.
    pub async fn issue_deferral(
        &self,
        due: &crate::deferral::Due,
        base: &str,
    ) -> Result<Result<Issued, Refused>, Status> {
        check_base(base)?;
        let id: Snowflake = due
            .interaction_id
            .parse()
            .map_err(|_| Status::internal("deferral names no valid interaction id"))?;
        let ack = DeferredAck { interaction_id: id };
        let destination = interaction_callback_url(base, id, &token_placeholder(id));
        let turn = ledger::TurnId(due.turn_id.clone());
        self.issue_bound(
            &due.sigil_id,
            &turn,
            deferral_attempt_id(&due.turn_id),
            destination,
            Sha256Digest::of(ack.body_bytes()),
        )
        .await
    }

    /// Whether the turn's interaction was acknowledged (its type-5 decision is on the run): the
    /// ledger's answer to what [`crate::deferral::Deferrals`] knows in memory, for a core that
    /// restarted between the acknowledgement and the answer's claim.
    pub async fn acknowledged(
        &self,
        turn: &ledger::TurnId,
        interaction_id: &str,
    ) -> Result<bool, Status> {
        let Ok(interaction_id) = interaction_id.parse::<Snowflake>() else {
            return Ok(false);
        };
        let run = ledger::ids::run_id(turn, PATTERN.0, PATTERN.1);
        // The type-5 body is the same for every interaction; the run makes it this one's.
        let ack = DeferredAck { interaction_id };
        self.vault
            .decision_recorded_for(&run, &Sha256Digest::of(ack.body_bytes()))
            .await
            .map_err(|e| Status::unavailable(format!("ledger: {}", e.code())))
    }

    /// Asks ward for a decision bound to `destination` and `content_digest` on the turn's Sigil
    /// and records it on the turn's run.
    async fn issue_bound(
        &self,
        sigil_id: &str,
        turn: &ledger::TurnId,
        attempt_id: String,
        destination: String,
        content_digest: Sha256Digest,
    ) -> Result<Result<Issued, Refused>, Status> {
        let run = ledger::ids::run_id(turn, PATTERN.0, PATTERN.1);
        let r = self
            .ward
            .clone()
            .issue_decision(IssueDecisionRequest {
                sigil_id: sigil_id.to_owned(),
                // Ward knows the task by the turn id it admitted the scope for.
                run_id: turn.0.clone(),
                attempt_id,
                destination: destination.clone(),
                purpose: PURPOSE.into(),
                payload_digest: content_digest.to_string(),
                labels: LABELS.iter().map(|l| (*l).to_owned()).collect(),
                cut_receipt_digest: String::new(),
                policy_revision: POLICY_REVISION.into(),
                max_tokens: 0,
                max_spend_micros: 0,
            })
            .await
            .map_err(|s| Status::unavailable(format!("ward: {:?}", s.code())))?
            .into_inner();
        if !r.refusal_code.is_empty() {
            return Ok(Err(Refused {
                code: r.refusal_code,
                detail: r.refusal_detail,
                is_final: r.refusal_final,
            }));
        }
        let expires_at = UnixMillis(i64::try_from(r.expires_at_ms).unwrap_or(i64::MAX));
        self.vault
            .record_egress_decision(
                &run,
                &ledger::EgressDecisionRef {
                    decision_id: ledger::DecisionId(r.decision_id.clone()),
                    destination: destination.clone(),
                    purpose: PURPOSE.into(),
                    payload_digest: content_digest,
                    expires_at,
                },
            )
            .await
            .map_err(|e| Status::unavailable(format!("{}: {e}", e.code())))?;
        Ok(Ok(Issued {
            decision_id: r.decision_id,
            expires_at_ms: r.expires_at_ms,
            destination,
            content_digest,
        }))
    }

    /// Consumes the decision issued for this generation; SUBMITTING needs exactly that one.
    pub fn take(&self, intent_id: &str, generation: i64, decision_id: &str) -> Result<(), Status> {
        let mut issued = self.issued.lock().unwrap_or_else(|e| e.into_inner());
        let key = (intent_id.to_owned(), generation);
        match issued.get(&key) {
            Some((id, _)) if id == decision_id => {
                issued.remove(&key);
                Ok(())
            }
            _ => Err(Status::failed_precondition(
                "egress/decision-mismatch: SUBMITTING needs the EgressDecision core issued for this claim",
            )),
        }
    }
}

/// The purpose ward's policy maps to `egress-provider`, with a Cut receipt required.
pub const MODEL_PURPOSE: &str = "model-completion";
/// Tokens one model attempt may consume, reserved against the task's budget at issue.
pub const MODEL_MAX_TOKENS: u64 = 512;

/// What one model attempt's decision binds.
#[derive(Debug)]
pub struct ModelAttempt<'a> {
    pub sigil_id: &'a str,
    pub turn_id: &'a str,
    pub run: &'a ledger::RunId,
    pub attempt_id: &'a str,
    pub destination: &'a str,
    pub payload_digest: Sha256Digest,
    pub cut_receipt_digest: Sha256Digest,
    /// The answer policy and the admitted provider custody.
    pub policy_revision: &'a str,
}

/// The EgressDecision for a model Portal call: issued by ward immediately before core hands the
/// payload to egress-provider, recorded on the run, and redeemed by egress-provider alone.
#[derive(Debug, Clone)]
pub struct ModelAuthority {
    ward: WardClient<Channel>,
    vault: Phylactery,
}

impl ModelAuthority {
    pub fn new(ward: Channel, vault: Phylactery) -> Self {
        Self {
            ward: WardClient::new(ward),
            vault,
        }
    }

    /// Obtains and records the decision for one model attempt.
    pub async fn issue(&self, a: &ModelAttempt<'_>) -> Result<Result<Issued, Refused>, Status> {
        let r = self
            .ward
            .clone()
            .issue_decision(IssueDecisionRequest {
                sigil_id: a.sigil_id.to_owned(),
                run_id: a.turn_id.to_owned(),
                attempt_id: a.attempt_id.to_owned(),
                destination: a.destination.to_owned(),
                purpose: MODEL_PURPOSE.into(),
                payload_digest: a.payload_digest.to_string(),
                labels: LABELS.iter().map(|l| (*l).to_owned()).collect(),
                cut_receipt_digest: a.cut_receipt_digest.to_string(),
                policy_revision: a.policy_revision.to_owned(),
                max_tokens: MODEL_MAX_TOKENS,
                max_spend_micros: 0,
            })
            .await
            .map_err(|s| Status::unavailable(format!("ward: {:?}", s.code())))?
            .into_inner();
        if !r.refusal_code.is_empty() {
            return Ok(Err(Refused {
                code: r.refusal_code,
                detail: r.refusal_detail,
                is_final: r.refusal_final,
            }));
        }
        let expires_at = UnixMillis(i64::try_from(r.expires_at_ms).unwrap_or(i64::MAX));
        self.vault
            .record_egress_decision(
                a.run,
                &ledger::EgressDecisionRef {
                    decision_id: ledger::DecisionId(r.decision_id.clone()),
                    destination: a.destination.to_owned(),
                    purpose: MODEL_PURPOSE.into(),
                    payload_digest: a.payload_digest,
                    expires_at,
                },
            )
            .await
            .map_err(|e| Status::unavailable(format!("{}: {e}", e.code())))?;
        Ok(Ok(Issued {
            decision_id: r.decision_id,
            expires_at_ms: r.expires_at_ms,
            destination: a.destination.to_owned(),
            content_digest: a.payload_digest,
        }))
    }
}
