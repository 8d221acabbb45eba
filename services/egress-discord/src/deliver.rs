//! The delivery loop: claim, SUBMITTING, send, settle; and reconciliation of UNKNOWN outcomes.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reach_destination::{StaticResolver, TcpDialer};
use reach_discord::Snowflake;
use reach_discord::delivery::{CreateMessage, CreateOutcome, Nonce, Reconciliation};
use reach_discord::rest::{RECONCILE_SETTLE, RestClient};
use reach_proto::core::v1::delivery_client::DeliveryClient;
use reach_proto::core::v1::{
    ClaimRequest, DeliveryIntent, DeliveryOutcome, MarkSubmittingRequest, ReconcileRequest,
    SettleRequest,
};
use tonic::transport::Channel;

type Rest = RestClient<StaticResolver, TcpDialer>;

/// How long a claim is leased; a crashed sender's pre-submit claim is reclaimable after it.
const LEASE_MS: u32 = 15_000;
/// Pause between empty claims.
const IDLE_POLL: Duration = Duration::from_millis(50);
/// Sends of one attempt that Discord provably did not accept (429, nothing sent) before giving up.
const MAX_UNACCEPTED_TRIES: u32 = 3;

struct Unknown {
    intent_id: String,
    message: CreateMessage,
    after: Snowflake,
    since: Instant,
}

pub async fn run(
    mut core: DeliveryClient<Channel>,
    rest: Arc<Rest>,
    stop: impl Future<Output = ()>,
) {
    tokio::pin!(stop);
    let mut unknown: Vec<Unknown> = Vec::new();
    let mut last_reconcile = Instant::now();
    loop {
        if last_reconcile.elapsed() > Duration::from_millis(500) && !unknown.is_empty() {
            reconcile(&mut core, &rest, &mut unknown).await;
            last_reconcile = Instant::now();
        }
        let claimed = tokio::select! {
            _ = &mut stop => return,
            c = core.claim(ClaimRequest { lease_ms: LEASE_MS }) => c,
        };
        match claimed.map(|r| r.into_inner().intent) {
            Ok(Some(intent)) => {
                if let Some(u) = deliver(&mut core, &rest, intent).await {
                    unknown.push(u);
                }
            }
            Ok(None) => tokio::time::sleep(IDLE_POLL).await,
            Err(s) => {
                tracing::warn!(code = ?s.code(), "claim failed");
                tokio::time::sleep(IDLE_POLL * 10).await;
            }
        }
    }
}

fn message(intent: &DeliveryIntent) -> Option<CreateMessage> {
    Some(CreateMessage {
        channel_id: intent.channel_id.parse().ok()?,
        content: intent.parts.first()?.clone(),
        nonce: Nonce::new(&intent.nonce).ok()?,
        reply_to: intent.reply_to_message_id.parse().ok(),
    })
}

async fn settle(
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

/// Sends one claimed intent. Returns the intent when its outcome is UNKNOWN.
async fn deliver(
    core: &mut DeliveryClient<Channel>,
    rest: &Rest,
    intent: DeliveryIntent,
) -> Option<Unknown> {
    let Some(msg) = message(&intent) else {
        tracing::warn!(intent = %intent.intent_id, "intent is not a sendable Discord message");
        return None;
    };
    // SUBMITTING is durable before any byte leaves; from here on this intent is never resent.
    let submitting = core
        .mark_submitting(MarkSubmittingRequest {
            intent_id: intent.intent_id.clone(),
            generation: intent.generation,
            egress_decision_id: String::new(),
        })
        .await;
    if let Err(s) = submitting {
        tracing::info!(intent = %intent.intent_id, code = ?s.code(), "lease lost before submitting; not sent");
        return None;
    }
    let mut tries = 0;
    loop {
        tries += 1;
        match rest.create_message(&msg).await {
            CreateOutcome::KnownSent { message_id } => {
                settle(
                    core,
                    &intent,
                    DeliveryOutcome::KnownSent,
                    200,
                    String::new(),
                    message_id.to_string(),
                )
                .await;
                return None;
            }
            CreateOutcome::KnownRejected { status, code } => {
                let code = code.map(|c| c.to_string()).unwrap_or_default();
                settle(
                    core,
                    &intent,
                    DeliveryOutcome::KnownRejected,
                    u32::from(status),
                    code,
                    String::new(),
                )
                .await;
                return None;
            }
            // Discord did not accept these bytes (429) or none left (NotSent): the same intent may
            // try again, a bounded number of times.
            CreateOutcome::RateLimited { retry_after, .. } if tries < MAX_UNACCEPTED_TRIES => {
                tokio::time::sleep(retry_after.min(Duration::from_secs(5))).await;
            }
            CreateOutcome::NotSent { .. } if tries < MAX_UNACCEPTED_TRIES => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            CreateOutcome::RateLimited { .. } | CreateOutcome::NotSent { .. } => {
                settle(
                    core,
                    &intent,
                    DeliveryOutcome::KnownRejected,
                    429,
                    "not-accepted".into(),
                    String::new(),
                )
                .await;
                return None;
            }
            CreateOutcome::Unknown { reason } => {
                tracing::warn!(intent = %intent.intent_id, %reason, "delivery outcome unknown; reconciling, never resending");
                settle(
                    core,
                    &intent,
                    DeliveryOutcome::Unknown,
                    0,
                    "unknown".into(),
                    String::new(),
                )
                .await;
                let after = msg.reply_to.unwrap_or(Snowflake(0));
                return Some(Unknown {
                    intent_id: intent.intent_id,
                    message: msg,
                    after,
                    since: Instant::now(),
                });
            }
        }
    }
}

async fn reconcile(core: &mut DeliveryClient<Channel>, rest: &Rest, unknown: &mut Vec<Unknown>) {
    let mut keep = Vec::new();
    for u in unknown.drain(..) {
        let evidence = match rest.reconcile(&u.message, u.after).await {
            Reconciliation::Found { message_id } => Some(ReconcileRequest {
                intent_id: u.intent_id.clone(),
                evidence_kind: "channel_read".into(),
                message_id: message_id.to_string(),
                proved_absent: false,
            }),
            Reconciliation::ProvedAbsent if u.since.elapsed() >= RECONCILE_SETTLE => {
                Some(ReconcileRequest {
                    intent_id: u.intent_id.clone(),
                    evidence_kind: "channel_read".into(),
                    message_id: String::new(),
                    proved_absent: true,
                })
            }
            _ => None,
        };
        match evidence {
            Some(req) => match core.reconcile(req).await {
                Ok(_) => {
                    tracing::info!(intent = %u.intent_id, "unknown delivery reconciled from independent evidence")
                }
                Err(s) => {
                    tracing::warn!(intent = %u.intent_id, code = ?s.code(), "reconciliation refused");
                    keep.push(u);
                }
            },
            None => keep.push(u),
        }
    }
    *unknown = keep;
}
