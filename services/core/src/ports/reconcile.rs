//! The EgressDecision for every reconciliation read (issue #6): a channel read is bytes to
//! Discord too, so each GET egress-discord makes to reconcile an UNKNOWN delivery is preceded by
//! its own fresh decision, redeemed at ward for that one read.
//!
//! The task Sigil that authorized the delivery may have expired by then (an UNKNOWN can outlive
//! its run by hours), so reads are authorized by a **duty Sigil**: ward mints it at core's
//! request for the duty `discord-reconcile-read` on this one intent, with its own expiry and a
//! budget of reads, and it can authorize nothing else (not a Create Message). Core keeps one per
//! intent in memory and reuses it across pages until it expires; after a restart ward hands the
//! same live Sigil back, with its budget as spent so far, so forgetting it refills nothing. Like
//! the task Sigil it is secret-free and never leaves core: the gate sees decision ids only.
//!
//! Core checks that the intent is UNKNOWN and that the caller is the principal that settled it,
//! builds the exact GET URL itself from the intent's own channel (a gate cannot get a decision
//! to read another channel), binds the digest of the exact request, records the decision on the
//! turn's run (it shows in the trail) and hands back the decision id.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use reach_digest::Sha256Digest;
use reach_discord::Snowflake;
use reach_discord::delivery::{
    channel_read_request, channel_read_url, original_response_url, token_placeholder,
};
use reach_phylactery as ledger;
use reach_phylactery::{IntentState, Phylactery, UnixMillis};
use reach_proto::core::v1 as pb;
use reach_proto::ward::v1::ward_client::WardClient;
use reach_proto::ward::v1::{IssueDecisionRequest, MintDutySigilRequest};
use tonic::Status;
use tonic::transport::Channel;

use super::DiscordEffect;

/// The duty purpose ward's policy maps to the one redeemer `egress-discord`.
pub const READ_PURPOSE: &str = "discord-reconcile-read";
/// The policy a reconciliation read is made under, bound into every read decision.
pub const READ_POLICY_REVISION: &str = "reach.reconcile-read/1";
/// A read sends nothing of the answer: only the channel and a cursor, which are public.
const LABELS: [&str; 1] = ["public"];

/// Ward's answer for one read.
type Decided = Result<pb::DecideReconcileReadResponse, Status>;

/// A duty Sigil core holds for one intent.
#[derive(Debug, Clone)]
struct Duty {
    sigil_id: String,
    expires_at: UnixMillis,
}

/// Decisions for reconciliation reads, on per-intent duty Sigils.
#[derive(Debug, Clone)]
pub struct ReadAuthority {
    ward: WardClient<Channel>,
    vault: Phylactery,
    /// The duty Sigil per intent id, until it expires or ward says it is gone.
    duties: Arc<Mutex<HashMap<String, Duty>>>,
    /// Numbers read attempts, so every decision names its own attempt, across restarts too
    /// (ward hands a restarted core the same live duty Sigil): see [`first_read_number`].
    reads: Arc<AtomicU64>,
}

/// Read numbers a process may use per millisecond of its life before it could reach the next
/// start's first number; each read waits for a ward decision, which takes far longer.
const READS_PER_MS: u64 = 1_000;

/// Where a process started at `now` numbers its reads from: a later start numbers above every
/// read an earlier one could have made, so no two decisions on a duty Sigil name the same
/// attempt (the numbers restarted at 1 before, after a core restart).
fn first_read_number(now: std::time::SystemTime) -> u64 {
    let ms = now.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| {
        u64::try_from(d.as_millis()).unwrap_or(u64::MAX / READS_PER_MS)
    });
    ms.saturating_mul(READS_PER_MS)
}

fn refused(code: String, detail: String) -> pb::DecideReconcileReadResponse {
    pb::DecideReconcileReadResponse {
        refusal_code: code,
        refusal_detail: detail,
        ..Default::default()
    }
}

fn ward_down(s: Status) -> Status {
    Status::unavailable(format!("ward: {:?}", s.code()))
}

impl ReadAuthority {
    pub fn new(ward: WardClient<Channel>, vault: Phylactery) -> Self {
        Self {
            ward,
            vault,
            duties: Arc::default(),
            reads: Arc::new(AtomicU64::new(first_read_number(
                std::time::SystemTime::now(),
            ))),
        }
    }

    /// One decision for one page read of `req.intent_id`'s channel by `caller`.
    pub async fn decide(&self, caller: &str, req: pb::DecideReconcileReadRequest) -> Decided {
        crate::authority::check_base(&req.destination_base)?;
        let rec = self
            .vault
            .intent(&ledger::IntentId(req.intent_id.clone()))
            .await
            .map_err(super::status)?;
        if rec.state != IntentState::Unknown {
            return Err(Status::failed_precondition(format!(
                "delivery/not-unknown: only an UNKNOWN delivery is reconciled (this one is {})",
                rec.state
            )));
        }
        if rec.lease_owner.as_deref() != Some(caller) {
            return Err(Status::permission_denied(
                "delivery/not-owner: only the gate that settled the delivery reconciles it",
            ));
        }
        let effect: DiscordEffect = serde_json::from_str(&rec.effect)
            .map_err(|e| Status::internal(format!("intent effect is not a Discord effect: {e}")))?;
        // An interaction callback is reconciled from its original response, named token-free
        // (the token is sealed; core never sees it); a Create Message from its channel's pages.
        // A follow-up (a later part of an `/ask` answer) is found in its channel's pages.
        let destination = match &effect.interaction {
            Some(i) if !i.follow_up => {
                let (app, id): (Snowflake, Snowflake) =
                    match (i.application_id.parse(), i.interaction_id.parse()) {
                        (Ok(app), Ok(id)) => (app, id),
                        _ => {
                            return Err(Status::internal("intent effect has no valid interaction"));
                        }
                    };
                original_response_url(&req.destination_base, app, &token_placeholder(id))
            }
            _ => channel_read_url(
                &req.destination_base,
                &effect.channel_id,
                Snowflake(req.after),
            ),
        };
        let request_digest = Sha256Digest::of(channel_read_request(&destination));

        let duty = match self.duty(&req.intent_id).await? {
            Ok(d) => d,
            Err(refusal) => return Ok(refusal),
        };
        let n = self.reads.fetch_add(1, Ordering::Relaxed) + 1;
        let r = self
            .ward
            .clone()
            .issue_decision(IssueDecisionRequest {
                sigil_id: duty.sigil_id.clone(),
                // A duty Sigil binds its subject: the intent, named as the decision's run.
                run_id: req.intent_id.clone(),
                attempt_id: format!("{}#read{n}", req.intent_id),
                destination: destination.clone(),
                purpose: READ_PURPOSE.into(),
                payload_digest: request_digest.to_string(),
                labels: LABELS.iter().map(|l| (*l).to_owned()).collect(),
                cut_receipt_digest: String::new(),
                policy_revision: READ_POLICY_REVISION.into(),
                max_tokens: 0,
                max_spend_micros: 0,
            })
            .await
            .map_err(ward_down)?
            .into_inner();
        if !r.refusal_code.is_empty() {
            // A Sigil ward no longer honours is forgotten, so the next read asks for a new one;
            // a spent budget is kept: the Sigil must expire before reads resume.
            if r.refusal_code.starts_with("sigil/") {
                self.forget(&req.intent_id, &duty.sigil_id);
            }
            tracing::warn!(intent = %req.intent_id, code = %r.refusal_code, detail = %r.refusal_detail, "ward refused a reconciliation read");
            return Ok(refused(r.refusal_code, r.refusal_detail));
        }
        let expires_at = UnixMillis(i64::try_from(r.expires_at_ms).unwrap_or(i64::MAX));
        let run = ledger::ids::run_id(
            &rec.turn_id,
            crate::pipeline::PATTERN.0,
            crate::pipeline::PATTERN.1,
        );
        self.vault
            .record_egress_decision(
                &run,
                &ledger::EgressDecisionRef {
                    decision_id: ledger::DecisionId(r.decision_id.clone()),
                    destination: destination.clone(),
                    purpose: READ_PURPOSE.into(),
                    payload_digest: request_digest,
                    expires_at,
                },
            )
            .await
            .map_err(|e| Status::unavailable(format!("{}: {e}", e.code())))?;
        Ok(pb::DecideReconcileReadResponse {
            egress_decision_id: r.decision_id,
            decision_expires_at_ms: r.expires_at_ms,
            destination,
            request_digest: request_digest.to_string(),
            ..Default::default()
        })
    }

    /// The intent's live duty Sigil: the one held, or one ward mints (or hands back).
    async fn duty(
        &self,
        intent_id: &str,
    ) -> Result<Result<Duty, pb::DecideReconcileReadResponse>, Status> {
        let now = self.vault.now();
        {
            let mut duties = self.duties.lock().unwrap_or_else(|e| e.into_inner());
            duties.retain(|_, d| d.expires_at > now);
            if let Some(d) = duties.get(intent_id) {
                return Ok(Ok(d.clone()));
            }
        }
        let r = self
            .ward
            .clone()
            .mint_duty_sigil(MintDutySigilRequest {
                subject_id: intent_id.to_owned(),
                purpose: READ_PURPOSE.into(),
            })
            .await
            .map_err(ward_down)?
            .into_inner();
        if !r.refusal_code.is_empty() {
            tracing::warn!(intent = %intent_id, code = %r.refusal_code, "ward minted no duty sigil");
            return Ok(Err(refused(r.refusal_code, r.refusal_detail)));
        }
        let duty = Duty {
            sigil_id: r.sigil_id,
            expires_at: UnixMillis(i64::try_from(r.expires_at_ms).unwrap_or(i64::MAX)),
        };
        tracing::info!(intent = %intent_id, sigil = %duty.sigil_id, reused = r.reused, reads_left = r.reads_left, "duty sigil held for reconciliation reads");
        self.duties
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(intent_id.to_owned(), duty.clone());
        Ok(Ok(duty))
    }

    fn forget(&self, intent_id: &str, sigil_id: &str) {
        let mut duties = self.duties.lock().unwrap_or_else(|e| e.into_inner());
        if duties
            .get(intent_id)
            .is_some_and(|d| d.sigil_id == sigil_id)
        {
            duties.remove(intent_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn a_later_start_numbers_its_reads_above_an_earlier_one() {
        let first = UNIX_EPOCH + Duration::from_secs(1_796_000_000);
        let base = first_read_number(first);
        // The earlier process lived 10 s and read as fast as it could: fewer than
        // READS_PER_MS reads per millisecond.
        let last_of_earlier = base + 10_000 * READS_PER_MS - 1;
        let restart = first + Duration::from_secs(10);
        assert!(first_read_number(restart) > last_of_earlier);
        assert!(first_read_number(restart + Duration::from_millis(1)) > first_read_number(restart));
        assert!(base > 0, "never 1 again");
    }
}
