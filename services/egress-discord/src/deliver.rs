//! The delivery loop: claim (with core's fresh EgressDecision), redeem the decision at ward,
//! SUBMITTING, send, settle; and reconciliation of UNKNOWN outcomes, where every channel read
//! is preceded by its own decision from core, redeemed at ward the same way ([`ReadDecisions`]).

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reach_destination::TcpDialer;
use reach_destination::roads::ConfiguredResolver;
use reach_discord::Snowflake;
use reach_discord::seal::SealKeyring;

use crate::callback::Callback;
use crate::send::{self, Next};
use reach_discord::delivery::{CreateMessage, Nonce, Reconciliation, create_message_url};
use reach_discord::rest::{RECONCILE_SETTLE, ReadGate, RestClient, channel_read_request};
use reach_proto::core::v1::delivery_client::DeliveryClient;
use reach_proto::core::v1::{
    ClaimRequest, DecideReconcileReadRequest, DeliveryIntent, ListUnknownRequest, ReconcileRequest,
};
use reach_proto::ward::v1::ward_client::WardClient;
use tokio::sync::watch;
use tonic::transport::Channel;

pub(crate) type Rest = RestClient<ConfiguredResolver, TcpDialer>;

/// How long a claim is leased; a crashed sender's pre-submit claim is reclaimable after it.
const LEASE_MS: u32 = 15_000;
/// How long core holds an empty claim open for a commit; short enough to reconcile UNKNOWN
/// outcomes on time.
const CLAIM_WAIT_MS: u32 = 500;
/// Pause after a refused or failed claim.
const IDLE_POLL: Duration = Duration::from_millis(50);
/// How often the reconciler looks for UNKNOWN outcomes due for a read.
const RECONCILE_TICK: Duration = Duration::from_millis(500);
/// The wait before an UNKNOWN outcome's first read, doubled after each inconclusive pass up to
/// [`MAX_READ_BACKOFF`]. Every read costs a decision from the intent's duty Sigil, whose read
/// budget ward bounds, so reads thin out instead of polling at a fixed rate.
const FIRST_READ_BACKOFF: Duration = RECONCILE_TICK;
const MAX_READ_BACKOFF: Duration = Duration::from_secs(30);

/// What an UNKNOWN delivery tried to create, and so where the evidence of it is read.
pub(crate) enum Sent {
    /// A Create Message: found by its nonce in the channel.
    Message(CreateMessage),
    /// An interaction callback: found as the interaction's original response.
    Callback(Callback),
}

pub(crate) struct Unknown {
    intent_id: String,
    sent: Sent,
    after: Snowflake,
    since: Instant,
    /// When the next reconciliation pass may read, and the wait after it.
    next_read: Instant,
    backoff: Duration,
}

impl Unknown {
    pub(crate) fn new(intent_id: String, sent: Sent) -> Self {
        let now = Instant::now();
        let after = match &sent {
            Sent::Message(m) => m.reply_to.unwrap_or(Snowflake(0)),
            Sent::Callback(c) => c.reply.interaction_id,
        };
        Self {
            intent_id,
            after,
            sent,
            since: now,
            next_read: now,
            backoff: FIRST_READ_BACKOFF,
        }
    }

    fn read_later(&mut self) {
        self.next_read = Instant::now() + self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_READ_BACKOFF);
    }
}

/// The two ports this gate calls.
pub struct Peers {
    pub core: DeliveryClient<Channel>,
    pub ward: WardClient<Channel>,
    /// The exact base URL this gate dials; every decision binds a URL under it.
    pub base: String,
    /// The key that opens sealed interaction tokens (`reach_discord::seal`); absent: an
    /// interaction intent is not sent (its lease lapses, nothing leaves).
    pub seal_key: Option<Arc<SealKeyring>>,
}

/// Deliveries in flight at once. Each one waits on several durable commits (claim, decision,
/// redemption, SUBMITTING, settlement) and a TLS round trip; one at a time caps the gate far
/// below the admitted rate. Every worker claims its own intent under its own lease.
const WORKERS: usize = 8;

pub async fn run(peers: Peers, rest: Arc<Rest>, stop: impl Future<Output = ()>) {
    let Peers {
        mut core,
        ward,
        base,
        seal_key,
    } = peers;
    tokio::pin!(stop);
    // What an earlier run of this gate left UNKNOWN is still ours to reconcile, never to resend.
    let resumed = tokio::select! {
        _ = &mut stop => return,
        u = resume_unknown(&mut core, seal_key.as_deref()) => u,
    };
    let unknown = Arc::new(Mutex::new(resumed));
    let (stopping, stopped) = watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    // The message workers, then the interaction lane (see [`Lane`]).
    let lanes = std::iter::repeat_n(Lane::Any, WORKERS).chain([Lane::Interactions]);
    for lane in lanes {
        let (core, ward, rest, base) = (core.clone(), ward.clone(), rest.clone(), base.clone());
        let (unknown, stopped, key) = (unknown.clone(), stopped.clone(), seal_key.clone());
        tasks.spawn(worker(lane, core, ward, rest, base, key, unknown, stopped));
    }
    tasks.spawn(reconciler(core, ward, rest, base, unknown, stopped));
    stop.await;
    // Workers finish the delivery in hand (never leaving a send half-reported), then exit.
    let _ = stopping.send(true);
    while tasks.join_next().await.is_some() {}
}

type Unknowns = Arc<Mutex<Vec<Unknown>>>;

/// What a worker claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lane {
    /// Anything claimable; interaction work first (core's order).
    Any,
    /// Interaction work only (`ClaimRequest.interactions_only`): Discord answers an interaction
    /// only within 3 seconds, and every `Any` worker may be held for seconds by one message
    /// (rate-limit retries, a slow Discord), so one worker is kept for what cannot wait.
    Interactions,
}

#[allow(clippy::too_many_arguments)] // One worker's whole wiring; a struct would only rename it.
async fn worker(
    lane: Lane,
    mut core: DeliveryClient<Channel>,
    mut ward: WardClient<Channel>,
    rest: Arc<Rest>,
    base: String,
    seal_key: Option<Arc<SealKeyring>>,
    unknown: Unknowns,
    mut stopped: watch::Receiver<bool>,
) {
    while !*stopped.borrow() {
        let request = ClaimRequest {
            lease_ms: LEASE_MS,
            destination_base: base.clone(),
            wait_ms: CLAIM_WAIT_MS,
            interactions_only: lane == Lane::Interactions,
        };
        let claimed = tokio::select! {
            _ = stopped.changed() => return,
            c = core.claim(request) => c,
        };
        match claimed.map(|r| r.into_inner()) {
            Ok(r) if r.deferral.is_some() => {
                let gate = Gate {
                    core: &mut core,
                    ward: &mut ward,
                    rest: &rest,
                    base: &base,
                };
                let d = r.deferral.expect("checked");
                crate::callback::defer(gate, seal_key.as_deref(), d).await;
            }
            Ok(r) if r.intent.is_some() => {
                let intent = r.intent.expect("checked");
                let u = if intent.interaction_id.is_empty() {
                    deliver(&mut core, &mut ward, &rest, &base, intent).await
                } else {
                    let gate = Gate {
                        core: &mut core,
                        ward: &mut ward,
                        rest: &rest,
                        base: &base,
                    };
                    crate::callback::deliver(gate, seal_key.as_deref(), intent).await
                };
                if let Some(u) = u {
                    lock(&unknown).push(u);
                }
            }
            Ok(r) if !r.refusal_code.is_empty() => {
                tracing::warn!(code = %r.refusal_code, detail = %r.refusal_detail, "no EgressDecision for a claimable intent; nothing sent");
                tokio::time::sleep(IDLE_POLL).await;
            }
            Ok(_) => {}
            Err(s) => {
                tracing::warn!(code = ?s.code(), "claim failed");
                tokio::time::sleep(IDLE_POLL * 10).await;
            }
        }
    }
}

/// Reconciles UNKNOWN outcomes from channel reads, each when its backoff allows.
async fn reconciler(
    mut core: DeliveryClient<Channel>,
    mut ward: WardClient<Channel>,
    rest: Arc<Rest>,
    base: String,
    unknown: Unknowns,
    mut stopped: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = stopped.changed() => return,
            _ = tokio::time::sleep(RECONCILE_TICK) => {}
        }
        let now = Instant::now();
        let mut due = {
            let mut pending = lock(&unknown);
            let (due, later) = std::mem::take(&mut *pending)
                .into_iter()
                .partition(|u: &Unknown| u.next_read <= now);
            *pending = later;
            due
        };
        if due.is_empty() {
            continue;
        }
        let mut peers = ReadPeers {
            core: &mut core,
            ward: &mut ward,
            base: &base,
        };
        reconcile(&mut peers, &rest, &mut due).await;
        lock(&unknown).extend(due);
    }
}

fn lock(u: &Unknowns) -> std::sync::MutexGuard<'_, Vec<Unknown>> {
    u.lock().unwrap_or_else(|e| e.into_inner())
}

fn message(intent: &DeliveryIntent) -> Option<CreateMessage> {
    Some(CreateMessage {
        channel_id: intent.channel_id.parse().ok()?,
        content: intent.parts.first()?.clone(),
        nonce: Nonce::new(&intent.nonce).ok()?,
        reply_to: intent.reply_to_message_id.parse().ok(),
    })
}

/// Sends one claimed intent. Returns the intent when its outcome is UNKNOWN.
async fn deliver(
    core: &mut DeliveryClient<Channel>,
    ward: &mut WardClient<Channel>,
    rest: &Rest,
    base: &str,
    intent: DeliveryIntent,
) -> Option<Unknown> {
    let Some(msg) = message(&intent) else {
        tracing::warn!(intent = %intent.intent_id, "intent is not a sendable Discord message");
        return None;
    };
    let destination = create_message_url(base, &msg.channel_id.to_string());
    if !send::cleared(core, ward, &intent, &destination, msg.content.as_bytes()).await {
        return None;
    }
    let mut unaccepted = 0;
    loop {
        let verdict = rest.create_message(&msg).await.into();
        match send::conclude(core, &intent, verdict, &mut unaccepted, "create message").await {
            Next::Again => {}
            Next::Settled => return None,
            Next::Unknown => return Some(Unknown::new(intent.intent_id, Sent::Message(msg))),
        }
    }
}

/// Reads every UNKNOWN intent back from core, retrying until core answers: a gate that forgot
/// them would leave the channel unreconciled for ever.
async fn resume_unknown(
    core: &mut DeliveryClient<Channel>,
    seal_key: Option<&SealKeyring>,
) -> Vec<Unknown> {
    loop {
        match core.list_unknown(ListUnknownRequest {}).await {
            Ok(r) => {
                let intents = r.into_inner().intents;
                let resumed: Vec<Unknown> = intents
                    .into_iter()
                    .filter_map(|i| {
                        let sent = if i.interaction_id.is_empty() {
                            message(&i).map(Sent::Message)
                        } else {
                            crate::callback::Callback::open(&i, seal_key).ok().map(Sent::Callback)
                        };
                        let Some(sent) = sent else {
                            tracing::warn!(intent = %i.intent_id, "unknown intent is not a Discord message or callback this gate can open");
                            return None;
                        };
                        // When the outcome became unknown is not known here: absence is
                        // proved only after a full settle interval from now.
                        Some(Unknown::new(i.intent_id, sent))
                    })
                    .collect();
                if !resumed.is_empty() {
                    tracing::info!(
                        count = resumed.len(),
                        "resuming reconciliation of unknown deliveries"
                    );
                }
                return resumed;
            }
            Err(s) => {
                tracing::warn!(code = ?s.code(), "cannot list unknown deliveries yet");
                tokio::time::sleep(IDLE_POLL * 10).await;
            }
        }
    }
}

/// What one delivery uses: the two ports, the REST client and the base URL.
pub(crate) struct Gate<'a> {
    pub core: &'a mut DeliveryClient<Channel>,
    pub ward: &'a mut WardClient<Channel>,
    pub rest: &'a Rest,
    pub base: &'a str,
}

/// The ports a reconciliation pass uses.
struct ReadPeers<'a> {
    core: &'a mut DeliveryClient<Channel>,
    ward: &'a mut WardClient<Channel>,
    base: &'a str,
}

/// Admits each channel read of one intent's reconciliation: core issues a fresh
/// `discord-reconcile-read` decision for the exact URL (on the intent's duty Sigil), and it is
/// redeemed at ward through `reach_egress_gate`, with the URL and request digest computed here,
/// exactly as a send redeems. A refusal at either step means no GET.
struct ReadDecisions<'a, 'p> {
    peers: &'a mut ReadPeers<'p>,
    intent_id: &'a str,
}

impl ReadGate for ReadDecisions<'_, '_> {
    async fn admit(&mut self, url: &str, after: Snowflake) -> Result<(), String> {
        let decided = self
            .peers
            .core
            .decide_reconcile_read(DecideReconcileReadRequest {
                intent_id: self.intent_id.to_owned(),
                destination_base: self.peers.base.to_owned(),
                after: after.0,
            })
            .await
            .map_err(|s| format!("core/{:?}", s.code()))?
            .into_inner();
        if !decided.refusal_code.is_empty() {
            let why = format!("{} {}", decided.refusal_code, decided.refusal_detail);
            return Err(why.trim_end().to_owned());
        }
        let redeemed = reach_egress_gate::redeem(
            self.peers.ward,
            &decided.egress_decision_id,
            url,
            &channel_read_request(url),
        )
        .await
        .map_err(|r| r.code())?;
        // The decision names the intent it reconciles; one for another intent admits nothing.
        if redeemed.run_id() != self.intent_id {
            return Err(format!("decision/run-mismatch: {}", redeemed.run_id()));
        }
        Ok(())
    }
}

async fn reconcile(peers: &mut ReadPeers<'_>, rest: &Rest, unknown: &mut Vec<Unknown>) {
    let mut keep = Vec::new();
    for mut u in unknown.drain(..) {
        let mut gate = ReadDecisions {
            peers: &mut *peers,
            intent_id: &u.intent_id,
        };
        let (read, evidence_kind) = match &u.sent {
            Sent::Message(m) => (rest.reconcile(m, u.after, &mut gate).await, "channel_read"),
            Sent::Callback(c) if c.follow_up => (
                rest.reconcile_follow_up(
                    c.channel_id,
                    c.reply.interaction_id,
                    &c.reply.content,
                    &mut gate,
                )
                .await,
                "channel_read",
            ),
            Sent::Callback(c) => (
                rest.reconcile_interaction(
                    c.application_id,
                    c.reply.interaction_id,
                    &c.token,
                    &c.reply.content,
                    c.edit,
                    &mut gate,
                )
                .await,
                "original_response",
            ),
        };
        if let Reconciliation::Inconclusive { reason } = &read {
            tracing::warn!(intent = %u.intent_id, %reason, "reconciliation read inconclusive; still UNKNOWN");
        }
        let evidence = match read {
            Reconciliation::Found { message_id } => Some(ReconcileRequest {
                intent_id: u.intent_id.clone(),
                evidence_kind: evidence_kind.into(),
                message_id: message_id.to_string(),
                proved_absent: false,
            }),
            Reconciliation::ProvedAbsent if u.since.elapsed() >= RECONCILE_SETTLE => {
                Some(ReconcileRequest {
                    intent_id: u.intent_id.clone(),
                    evidence_kind: evidence_kind.into(),
                    message_id: String::new(),
                    proved_absent: true,
                })
            }
            _ => None,
        };
        match evidence {
            Some(req) => match peers.core.reconcile(req).await {
                Ok(_) => {
                    tracing::info!(intent = %u.intent_id, "unknown delivery reconciled from independent evidence")
                }
                Err(s) => {
                    tracing::warn!(intent = %u.intent_id, code = ?s.code(), "reconciliation refused");
                    u.read_later();
                    keep.push(u);
                }
            },
            None => {
                u.read_later();
                keep.push(u);
            }
        }
    }
    *unknown = keep;
}
