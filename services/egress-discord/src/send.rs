//! The one send discipline every route shares (Create Message, the interaction callback, an
//! edit of `@original`, a follow-up): the decision redeemed at ward for exactly the bytes and
//! URL, and SUBMITTING made durable, before any byte leaves ([`cleared`]); then one outcome
//! settled — sent, rejected, never accepted, or UNKNOWN (reconciled, never resent). The
//! same intent is sent again only while Discord provably accepted nothing (a 429, or no byte
//! left): [`MAX_UNACCEPTED_TRIES`] sends in all.

use std::time::Duration;

use reach_discord::delivery::{CreateOutcome, decision_attempt_id};
use reach_discord::rest::CallbackOutcome;
use reach_proto::core::v1::delivery_client::DeliveryClient;
use reach_proto::core::v1::{
    DeliveryIntent, DeliveryOutcome, MarkSubmittingRequest, SettleRequest,
};
use reach_proto::ward::v1::ward_client::WardClient;
use tonic::transport::Channel;

/// Sends of one attempt that Discord provably did not accept (429, nothing sent) before giving up.
pub(crate) const MAX_UNACCEPTED_TRIES: u32 = 3;

/// The longest 429 `retry_after` a delivery waits out before its next try: two such waits
/// stay inside the 15-second lease. A longer one is never cut short (a request sent before
/// Discord said to would be another 429, and those count toward its invalid-request ban): the
/// intent is settled rate-limited at once, with nothing more sent.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(5);
/// The pause before the next try of a send that never left.
const NOT_SENT_PAUSE: Duration = Duration::from_millis(200);

/// Clears `intent` to send `payload` to `destination`: redeems its decision at ward for exactly
/// those, then persists SUBMITTING through core, after which the intent is never handed out for
/// sending again. `false`: nothing may be sent (no redeemed decision, so the lease lapses and a
/// reclaim gets a fresh one; or the lease was lost).
pub(crate) async fn cleared(
    core: &mut DeliveryClient<Channel>,
    ward: &mut WardClient<Channel>,
    intent: &DeliveryIntent,
    destination: &str,
    payload: &[u8],
) -> bool {
    if let Err(code) = redeem(ward, intent, destination, payload).await {
        tracing::warn!(intent = %intent.intent_id, %code, "EgressDecision not redeemed; not sent");
        return false;
    }
    submitting(core, intent).await
}

/// Reports an outcome to core (a refusal is logged: core holds the lease's truth).
pub(crate) async fn settle(
    core: &mut DeliveryClient<Channel>,
    intent: &DeliveryIntent,
    outcome: DeliveryOutcome,
    status: u32,
    code: String,
    message_id: String,
) {
    let r = core
        .settle(SettleRequest {
            intent_id: intent.intent_id.clone(),
            generation: intent.generation,
            outcome: outcome as i32,
            platform_status: status,
            platform_code: code,
            message_id,
        })
        .await;
    if let Err(s) = r {
        tracing::warn!(intent = %intent.intent_id, code = ?s.code(), "settlement refused");
    }
}

/// Redeems the claim's decision for `destination` and the exact `payload` bytes (their digest
/// computed by `reach_egress_gate`, not taken from core), and checks that it names this intent's
/// attempt.
async fn redeem(
    ward: &mut WardClient<Channel>,
    intent: &DeliveryIntent,
    destination: &str,
    payload: &[u8],
) -> Result<(), String> {
    let redeemed =
        reach_egress_gate::redeem(ward, &intent.egress_decision_id, destination, payload)
            .await
            .map_err(|r| r.code())?;
    // The decision names the one physical attempt it admits: this intent at this generation.
    let attempt = decision_attempt_id(&intent.intent_id, intent.generation);
    if redeemed.attempt_id() != attempt {
        return Err(format!(
            "decision/attempt-mismatch: {}",
            redeemed.attempt_id()
        ));
    }
    Ok(())
}

/// Persists SUBMITTING through core: from here on the intent is never handed out for sending
/// again. `false` when core refused (the lease was lost): nothing may be sent.
async fn submitting(core: &mut DeliveryClient<Channel>, intent: &DeliveryIntent) -> bool {
    let r = core
        .mark_submitting(MarkSubmittingRequest {
            intent_id: intent.intent_id.clone(),
            generation: intent.generation,
            egress_decision_id: intent.egress_decision_id.clone(),
        })
        .await;
    match r {
        Ok(_) => true,
        Err(s) => {
            tracing::info!(intent = %intent.intent_id, code = ?s.code(), "lease lost before submitting; not sent");
            false
        }
    }
}

/// One send's outcome in the ledger's terms, whichever route carried it.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Discord created the message.
    Sent { message_id: String },
    /// Discord refused the request: nothing was created.
    Rejected { status: u16, code: Option<u64> },
    /// 429: not accepted; the same intent may try again after the wait.
    RateLimited { retry_after: Duration },
    /// No byte left: the same intent may try again.
    NotSent { reason: String },
    /// It may have been accepted: reconciled from evidence, never sent again.
    Unknown { detail: String },
}

impl From<CreateOutcome> for Verdict {
    fn from(o: CreateOutcome) -> Self {
        match o {
            CreateOutcome::KnownSent { message_id } => Self::Sent {
                message_id: message_id.to_string(),
            },
            CreateOutcome::KnownRejected { status, code } => Self::Rejected { status, code },
            CreateOutcome::RateLimited { retry_after, .. } => Self::RateLimited { retry_after },
            CreateOutcome::NotSent { reason } => Self::NotSent { reason },
            CreateOutcome::Unknown { reason } => Self::Unknown { detail: reason },
        }
    }
}

impl From<CallbackOutcome> for Verdict {
    fn from(o: CallbackOutcome) -> Self {
        match o {
            CallbackOutcome::Sent { message_id } => Self::Sent {
                message_id: message_id.to_string(),
            },
            CallbackOutcome::Rejected { status, code } => Self::Rejected { status, code },
            CallbackOutcome::RateLimited { retry_after, .. } => Self::RateLimited { retry_after },
            CallbackOutcome::NotSent { reason } => Self::NotSent { reason },
            // 40060: Discord already holds a response (an earlier attempt of this intent was
            // accepted): its message id comes from the original response, like a lost answer's.
            o @ (CallbackOutcome::Acknowledged | CallbackOutcome::Unknown { .. }) => {
                Self::Unknown {
                    detail: format!("{o:?}"),
                }
            }
        }
    }
}

/// What the send loop does after a verdict.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Discord accepted nothing and tries remain: send the same bytes again.
    Again,
    /// The outcome is settled.
    Settled,
    /// The outcome is UNKNOWN (settled so): reconcile it from evidence.
    Unknown,
}

/// What a verdict leads to: the one decision of the discipline, kept apart from its effects.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// Wait this long, then send the same bytes again.
    Again(Duration),
    /// Settle the intent so.
    Settle {
        outcome: DeliveryOutcome,
        status: u32,
        code: String,
        message_id: String,
    },
}

/// Judges `verdict` after `unaccepted` earlier sends of this attempt that Discord did not accept.
fn judge(verdict: &Verdict, unaccepted: u32) -> Step {
    let settled = |outcome, status, code: &str, message_id: &str| Step::Settle {
        outcome,
        status,
        code: code.to_owned(),
        message_id: message_id.to_owned(),
    };
    let tries_left = unaccepted + 1 < MAX_UNACCEPTED_TRIES;
    match verdict {
        Verdict::Sent { message_id } => settled(DeliveryOutcome::KnownSent, 200, "", message_id),
        Verdict::Rejected { status, code } => {
            let code = code.map(|c| c.to_string()).unwrap_or_default();
            settled(DeliveryOutcome::KnownRejected, (*status).into(), &code, "")
        }
        Verdict::RateLimited { retry_after } if tries_left && *retry_after <= MAX_RETRY_AFTER => {
            Step::Again(*retry_after)
        }
        Verdict::NotSent { .. } if tries_left => Step::Again(NOT_SENT_PAUSE),
        // The trail shows why it was never accepted: 429s outlasted the tries or asked for a
        // longer wait than the lease holds, or no byte left (a refused destination, a failed
        // connect).
        Verdict::RateLimited { .. } => {
            settled(DeliveryOutcome::KnownRejected, 429, "rate-limited", "")
        }
        Verdict::NotSent { reason } => settled(DeliveryOutcome::KnownRejected, 0, reason, ""),
        Verdict::Unknown { .. } => settled(DeliveryOutcome::Unknown, 0, "unknown", ""),
    }
}

/// Settles `verdict` for `intent`, or waits before the next try when Discord accepted nothing
/// and `unaccepted` (the sends not accepted so far, this one excluded) leaves room. `route`
/// names the send in the log.
pub(crate) async fn conclude(
    core: &mut DeliveryClient<Channel>,
    intent: &DeliveryIntent,
    verdict: Verdict,
    unaccepted: &mut u32,
    route: &str,
) -> Next {
    match judge(&verdict, *unaccepted) {
        Step::Again(wait) => {
            *unaccepted += 1;
            tokio::time::sleep(wait).await;
            Next::Again
        }
        Step::Settle {
            outcome,
            status,
            code,
            message_id,
        } => {
            match &verdict {
                Verdict::NotSent { reason } => {
                    tracing::warn!(intent = %intent.intent_id, %route, %reason, "nothing was sent; settled rejected");
                }
                Verdict::Unknown { detail } => {
                    tracing::warn!(intent = %intent.intent_id, %route, %detail, "outcome unknown; reconciling from evidence, never sending again");
                }
                _ => {}
            }
            settle(core, intent, outcome, status, code, message_id).await;
            if outcome == DeliveryOutcome::Unknown {
                Next::Unknown
            } else {
                Next::Settled
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reach_discord::Snowflake;

    fn settled(outcome: DeliveryOutcome, status: u32, code: &str, message_id: &str) -> Step {
        Step::Settle {
            outcome,
            status,
            code: code.to_owned(),
            message_id: message_id.to_owned(),
        }
    }

    /// Sends `verdict` until it settles; returns the sends made and the settlement.
    fn sends_until_settled(verdict: &Verdict) -> (u32, Step) {
        let mut unaccepted = 0;
        loop {
            match judge(verdict, unaccepted) {
                Step::Again(_) => unaccepted += 1,
                step => return (unaccepted + 1, step),
            }
        }
    }

    #[test]
    fn an_accepted_or_refused_send_settles_at_once() {
        let sent = Verdict::Sent {
            message_id: "42".into(),
        };
        assert_eq!(
            judge(&sent, 0),
            settled(DeliveryOutcome::KnownSent, 200, "", "42")
        );
        let refused = Verdict::Rejected {
            status: 403,
            code: Some(50013),
        };
        let want = settled(DeliveryOutcome::KnownRejected, 403, "50013", "");
        assert_eq!(judge(&refused, 2), want);
        let bare = Verdict::Rejected {
            status: 400,
            code: None,
        };
        assert_eq!(
            judge(&bare, 0),
            settled(DeliveryOutcome::KnownRejected, 400, "", "")
        );
    }

    #[test]
    fn a_429_is_waited_out_exactly_or_not_at_all_and_outlasting_the_tries_is_a_rejection() {
        let rejected = settled(DeliveryOutcome::KnownRejected, 429, "rate-limited", "");
        // Longer than the lease holds: nothing more is sent, never a try cut short.
        let long = Verdict::RateLimited {
            retry_after: Duration::from_secs(60),
        };
        assert_eq!(judge(&long, 0), rejected);
        assert_eq!(sends_until_settled(&long), (1, rejected.clone()));
        let cap = Verdict::RateLimited {
            retry_after: MAX_RETRY_AFTER,
        };
        assert_eq!(judge(&cap, 0), Step::Again(MAX_RETRY_AFTER));
        let short = Verdict::RateLimited {
            retry_after: Duration::from_millis(30),
        };
        assert_eq!(judge(&short, 1), Step::Again(Duration::from_millis(30)));
        let (sends, step) = sends_until_settled(&short);
        assert_eq!(sends, MAX_UNACCEPTED_TRIES);
        assert_eq!(step, rejected);
    }

    #[test]
    fn a_send_that_never_left_is_tried_again_then_rejected_with_its_reason() {
        let v = Verdict::NotSent {
            reason: "destination/refused".into(),
        };
        assert_eq!(judge(&v, 0), Step::Again(NOT_SENT_PAUSE));
        let (sends, step) = sends_until_settled(&v);
        assert_eq!(sends, MAX_UNACCEPTED_TRIES);
        let want = settled(DeliveryOutcome::KnownRejected, 0, "destination/refused", "");
        assert_eq!(step, want);
    }

    #[test]
    fn an_unknown_outcome_is_never_tried_again() {
        let v = Verdict::Unknown {
            detail: "timeout after write".into(),
        };
        for unaccepted in 0..MAX_UNACCEPTED_TRIES {
            let step = judge(&v, unaccepted);
            assert_eq!(step, settled(DeliveryOutcome::Unknown, 0, "unknown", ""));
        }
    }

    #[test]
    fn an_acknowledged_callback_is_unknown_and_a_created_one_sent() {
        let v = Verdict::from(CallbackOutcome::Acknowledged);
        assert!(matches!(v, Verdict::Unknown { .. }), "{v:?}");
        let v = Verdict::from(CallbackOutcome::Sent {
            message_id: Snowflake(7),
        });
        assert!(
            matches!(&v, Verdict::Sent { message_id } if message_id == "7"),
            "{v:?}"
        );
        let v = Verdict::from(CreateOutcome::Unknown {
            reason: "reset".into(),
        });
        assert!(
            matches!(&v, Verdict::Unknown { detail } if detail == "reset"),
            "{v:?}"
        );
    }
}
