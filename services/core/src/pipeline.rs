//! The turn pipeline for one admitted question: guest scope and Sigil at ward, grounding in
//! the active corpus snapshot, the local extractive cognition, and the one transaction that
//! commits ReachTurn@1 with its DiscordDeliveryIntent@1.
//!
//! When core's config names a model Portal, the grounded turn is formed remotely instead: the
//! Privacy Cut (question and bundle only, with its receipt), a fresh EgressDecision, the
//! persisted ServiceJobAttempt@1 marked SUBMITTING, one call to egress-provider, and the
//! quarantine of the return before adoption. A quarantined return is refused honestly; it is
//! never replaced by the local answer, so the trail says what the user saw and why.
//!
//! A Sigil stays here: it is never forwarded to an egress role, a model or a peer.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use reach_corpus::{
    ActiveSnapshot, BundleOutcome, RetrievalLimits, RetrievalRefusal, extractive_answer,
};
use reach_digest::Sha256Digest;
use reach_discord::render::{
    ChannelPolicy, Citation, MAX_CITATION_TITLE_CHARS, RefusalPolicy, TurnView, render,
};
use reach_phylactery as ledger;
use reach_phylactery::{Phylactery, TurnState};
use reach_portal::{CutInput, EvidenceIn, Expectation, ProviderReturn};
use reach_proto::core::v1::AdmitRequest;
use reach_proto::egress::v1::provider_call_client::ProviderCallClient;
use reach_proto::egress::v1::{CallRequest, CallResponse};
use reach_proto::ward::v1::AdmitScopeRequest;
use reach_proto::ward::v1::ward_client::WardClient;
use tokio::sync::Notify;
use tonic::transport::Channel;

use crate::authority::{ModelAttempt, ModelAuthority};
use crate::ports::{DiscordEffect, InteractionEffect};
use crate::slots::{TurnSlot, TurnSlots};

/// How long the task may live: answering plus delivery. The Sigil expires with it, and with it
/// every chance of a fresh EgressDecision for the reply (ward caps it at its time budget).
pub const TASK_LIFETIME: Duration = Duration::from_secs(120);
/// The Pattern (workflow) revision every public question runs.
pub const PATTERN: (&str, &str) = ("reach.public-answer", "1");

/// Model attempts per run: a failure that may pass is tried again, twice at most, each time
/// under a new decision and attempt record (`reach_portal::worth_another_attempt`).
pub const MAX_MODEL_ATTEMPTS: u32 = 3;
/// The pause before attempt n + 1 is n times this.
const MODEL_RETRY_PAUSE: Duration = Duration::from_millis(250);

#[derive(Debug, Clone)]
pub struct Pipeline {
    vault: Phylactery,
    /// The active corpus snapshot, opened once per activation.
    corpus: Arc<ActiveSnapshot>,
    ward: WardClient<Channel>,
    policy: RefusalPolicy,
    /// Woken whenever a committed turn brings a new intent, so a waiting claimer sees it at once.
    committed: Arc<Notify>,
    /// The model Portal, when core's config names one; `None` keeps cognition local.
    portal: Option<PortalRoute>,
    /// Told when an interaction's turn has its Sigil and run, so a slow answer can be
    /// acknowledged first (`crate::deferral`).
    deferrals: Option<Arc<crate::deferral::Deferrals>>,
    /// Bounds the admitted turns whose answer is not yet delivered.
    slots: Arc<TurnSlots>,
}

/// Where a remote formation goes: the endpoint and model egress-provider is configured with
/// (the same strings, since every decision binds the endpoint), and the two ports it needs.
#[derive(Debug, Clone)]
pub struct PortalRoute {
    pub endpoint: String,
    pub model: String,
    /// The answer policy plus the digest of the admitted provider custody declaration.
    pub policy_revision: String,
    pub provider: ProviderCallClient<Channel>,
    pub authority: ModelAuthority,
}

/// The turn fields the Privacy Cut withholds from a model (named in its receipt).
const WITHHELD: [&str; 8] = [
    "platform",
    "application_id",
    "guild_id",
    "channel_id",
    "subject_id",
    "event_id",
    "reply_to_message_id",
    "sigil_id",
];

/// The interaction a turn's reply answers with its callback: an INTERACTION_CREATE admitted
/// with a sealed token. Without one (an edge with no sealing key) the reply is a Create Message.
fn interaction(req: &AdmitRequest) -> Option<InteractionEffect> {
    (req.event_kind == reach_discord::edge::EventKind::InteractionCreate.as_str()
        && !req.sealed_interaction_token.is_empty())
    .then(|| InteractionEffect {
        interaction_id: req.external_event_id.clone(),
        application_id: req.application_id.clone(),
        sealed_token: hex::encode(&req.sealed_interaction_token),
        follow_up: false,
    })
}

struct Outcome {
    state: TurnState,
    reason: Option<String>,
    view: Option<TurnView>,
}

impl Pipeline {
    pub fn new(
        vault: Phylactery,
        corpus_root: PathBuf,
        ward: Channel,
        policy: RefusalPolicy,
        committed: Arc<Notify>,
        portal: Option<PortalRoute>,
    ) -> Self {
        Self {
            vault,
            corpus: Arc::new(ActiveSnapshot::new(corpus_root)),
            ward: WardClient::new(ward),
            policy,
            committed,
            portal,
            deferrals: None,
            slots: Arc::new(TurnSlots::new(
                crate::slots::MAX_TURNS,
                crate::slots::MAX_HOLD,
            )),
        }
    }

    /// Reports each interaction's Sigil and run to `deferrals`.
    pub fn with_deferrals(mut self, deferrals: Arc<crate::deferral::Deferrals>) -> Self {
        self.deferrals = Some(deferrals);
        self
    }

    /// Runs the turn and commits its outcome exactly once. A failure to commit leaves the turn
    /// OPEN; a redelivered event or recovery picks it up.
    ///
    /// A turn ward admitted takes one of the [`TurnSlots`] and, if it commits an intent, holds
    /// it until that intent settles.
    pub async fn run(&self, turn: ledger::TurnId, req: AdmitRequest) {
        let (outcome, sigil_id, slot) = self.decide(&turn, &req).await;
        let interaction = interaction(&req);
        // An acknowledged `/ask` shows "thinking…" until its original is edited: silence is no
        // longer possible there, so its refusal is posted even in a silent channel. (Asking
        // also ends the chance of an acknowledgement from here on, so none can follow a
        // silent refusal.)
        let acknowledged = match (&interaction, &self.deferrals) {
            (Some(i), Some(d)) => d.answer_edits(&i.interaction_id),
            _ => false,
        };
        let policy = if acknowledged {
            ChannelPolicy::PostRefusals
        } else {
            self.policy.for_channel(&req.channel_id)
        };
        let mut parts = outcome
            .view
            .as_ref()
            .map(|v| render(v, policy))
            .unwrap_or_default();
        // One intent per part, each sending exactly its part (egress-discord posts `parts[0]`):
        // part 1 is PENDING with the turn, each later part only once the one before it is
        // KNOWN_SENT (the ledger's rule). Without a Sigil nothing can ever be delivered, so no
        // intent is committed.
        if sigil_id.is_empty() {
            parts.clear();
        }
        // An `/ask` interaction is answered by its callback (part 1, carrying the sealed token);
        // Discord takes one callback per interaction, so later parts are its follow-up messages
        // (each carrying the sealed token too).
        let specs: Vec<ledger::DeliveryIntentSpec> = parts
            .into_iter()
            .enumerate()
            .map(|(i, content)| {
                let effect = DiscordEffect {
                    channel_id: req.channel_id.clone(),
                    reply_to_message_id: req.reply_to_message_id.clone(),
                    parts: vec![content],
                    sigil_id: sigil_id.clone(),
                    interaction: interaction.clone().map(|x| InteractionEffect {
                        follow_up: i > 0,
                        ..x
                    }),
                };
                let effect = serde_json::to_string(&effect).expect("effect serializes");
                ledger::DeliveryIntentSpec {
                    payload_digest: Sha256Digest::of(&effect),
                    effect,
                }
            })
            .collect();
        // The answer's digest: its one effect's, or, for several parts, the digest of their
        // digests in order.
        let answer_digest = match specs.as_slice() {
            [] => None,
            [one] => Some(one.payload_digest),
            many => Some(Sha256Digest::of_parts(
                many.iter().map(|s| s.payload_digest.as_bytes().as_slice()),
            )),
        };
        let mut specs = specs.into_iter();
        let commit = ledger::TurnCommit {
            outcome: outcome.state,
            reason: outcome.reason,
            answer_digest,
            intent: specs.next(),
        };
        let later: Vec<_> = specs.collect();
        match self
            .vault
            .commit_turn_in_parts(&turn, &commit, &later)
            .await
        {
            Ok(c) => {
                tracing::info!(turn = %turn.0, state = c.state.as_str(), "turn committed");
                // One waiting claimer per committed intent: waking them all made every idle
                // claimer run a claim through the single writer for one intent.
                // Held before any claimer can see the intent, so its settlement finds it.
                if let (Some(slot), Some((intent, _))) = (slot, &c.intent) {
                    self.slots.hold_until_settled(&intent.0, slot);
                }
                // An unacknowledged interaction's answer calls back: Discord's window is
                // closing, so it is claimed before older intents.
                if let (Some(_), Some(d), Some((intent, _)), false) =
                    (&interaction, &self.deferrals, &c.intent, acknowledged)
                {
                    d.answer_committed(&intent.0);
                }
                if answer_digest.is_some() {
                    self.committed.notify_one();
                }
            }
            Err(e) => tracing::warn!(turn = %turn.0, code = e.code(), "turn commit refused"),
        }
    }

    /// The bound on turns whose answer is not yet delivered; settlements free their slot here.
    pub fn slots(&self) -> &TurnSlots {
        &self.slots
    }

    /// Decides the turn's outcome; also returns the task's Sigil id (empty when ward minted none)
    /// and, once ward admitted the turn, its slot.
    async fn decide(
        &self,
        turn: &ledger::TurnId,
        req: &AdmitRequest,
    ) -> (Outcome, String, Option<TurnSlot>) {
        let (mut sigil, mut slot) = (String::new(), None);
        let outcome = self.decide_with(turn, req, &mut sigil, &mut slot).await;
        (outcome, sigil, slot)
    }

    async fn decide_with(
        &self,
        turn: &ledger::TurnId,
        req: &AdmitRequest,
        sigil: &mut String,
        slot: &mut Option<TurnSlot>,
    ) -> Outcome {
        let refused = |state, reason: String, view| Outcome {
            state,
            reason: Some(reason),
            view,
        };

        // Admit: guest scope and task Sigil at ward (rate limits and budgets apply here).
        let expires = SystemTime::now() + TASK_LIFETIME;
        let expires_at_ms = expires
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64;
        let scope = self
            .ward
            .clone()
            .admit_scope(AdmitScopeRequest {
                platform: req.platform.clone(),
                application_id: req.application_id.clone(),
                guild_id: req.guild_id.clone(),
                channel_id: req.channel_id.clone(),
                subject_id: req.subject_id.clone(),
                run_id: turn.0.clone(),
                expires_at_ms,
            })
            .await;
        match scope {
            Ok(r) if r.get_ref().refusal_code.is_empty() => *sigil = r.into_inner().sigil_id,
            // Over the admitted rate: refused, counted at ward, and nothing is posted.
            Ok(r) => return refused(TurnState::Refused, r.into_inner().refusal_code, None),
            Err(s) => {
                return refused(
                    TurnState::DependencyUnavailable,
                    format!("ward: {:?}", s.code()),
                    Some(TurnView::DependencyUnavailable),
                );
            }
        }
        // Only a turn ward admitted waits for a slot: events over the admitted rate are refused
        // at arrival speed above, and what was admitted is answered and delivered before more
        // admitted turns pile up behind it (`crate::slots`).
        *slot = Some(self.slots.acquire().await);

        let pattern = ledger::PatternRevision {
            pattern_id: PATTERN.0.into(),
            revision: PATTERN.1.into(),
        };
        let run = match self.vault.begin_run(turn, &pattern).await {
            Ok(r) => r,
            Err(e) => return refused(TurnState::Failed, e.code().into(), None),
        };
        if let Some(d) = &self.deferrals {
            d.sigil_ready(&req.external_event_id, sigil);
        }

        // Ground: the active snapshot, bounded passages, a sealed bundle.
        let (corpus, question) = (self.corpus.clone(), req.question.clone());
        let grounded = tokio::task::spawn_blocking(move || {
            let snap = corpus.get()?;
            // The relevance gate runs here, before any model call; its figures (never the
            // question) become the refusal's reason on the trail.
            let grounded = snap.ground(
                &question,
                &RetrievalLimits::default(),
                time::OffsetDateTime::now_utc(),
            )?;
            Ok::<_, RetrievalRefusal>((snap.record().clone(), grounded))
        })
        .await;
        let (snapshot, grounded) = match grounded {
            Ok(Ok(g)) => g,
            Ok(Err(RetrievalRefusal::DependencyUnavailable(why))) => {
                tracing::info!(turn = %turn.0, %why, "corpus unavailable");
                return refused(
                    TurnState::DependencyUnavailable,
                    "corpus/unavailable".into(),
                    Some(TurnView::DependencyUnavailable),
                );
            }
            Ok(Err(e)) => return refused(TurnState::Failed, format!("corpus: {e}"), None),
            Err(_) => {
                return refused(
                    TurnState::Failed,
                    "corpus: retrieval task failed".into(),
                    None,
                );
            }
        };
        let refusal_reason = grounded.refusal_reason();
        let bundle = grounded.bundle;
        let snapshot_ref = ledger::CorpusSnapshotRef {
            snapshot_digest: snapshot.snapshot_digest,
            corpus_id: snapshot.snapshot_id.clone(),
            source_revision: snapshot.revision.citation_rev.clone(),
        };
        let bundle_ref = ledger::EvidenceBundleRef {
            bundle_digest: bundle.bundle_digest,
            passage_count: bundle.passages.len() as i64,
        };
        if let Err(e) = self
            .vault
            .record_grounding(&run, &snapshot_ref, &bundle_ref)
            .await
        {
            return refused(TurnState::Failed, e.code().into(), None);
        }
        if bundle.outcome == BundleOutcome::NotInDocs {
            // Refused before any model call: the docs do not cover it (the gate's figures).
            return refused(TurnState::Refused, refusal_reason, Some(TurnView::Refused));
        }

        // Form remotely when a Portal is configured (never for an out-of-corpus question: that
        // was refused above, before any model call).
        if let Some(portal) = &self.portal {
            return self
                .form_remotely(portal, turn, &run, req, &bundle, sigil)
                .await;
        }

        // Form: the embedded local cognition answers extractively, citing only bundle passages.
        let answer = extractive_answer(&req.question, &bundle);
        if answer.not_in_docs {
            return refused(
                TurnState::Refused,
                "corpus/not-in-docs".into(),
                Some(TurnView::Refused),
            );
        }
        let citations: Result<Vec<Citation>, _> = answer
            .citations
            .iter()
            .map(|(_, id, url)| cite(&bundle, id, url))
            .collect();
        match citations {
            Ok(citations) => Outcome {
                state: TurnState::Succeeded,
                reason: None,
                view: Some(TurnView::Answer {
                    text: answer.text,
                    citations,
                }),
            },
            Err(_) => refused(TurnState::Failed, "render/invalid-citation".into(), None),
        }
    }
}

/// The citation of bundle passage `id` at `url`, under its title (page › section).
fn cite(
    bundle: &reach_corpus::CorpusEvidenceBundle,
    id: &str,
    url: &str,
) -> Result<Citation, reach_discord::render::InvalidCitation> {
    titled_citation(bundle.passages.iter().find(|p| p.passage_id == id), url)
}

/// The citation at `url`, under `passage`'s title (its section kept whole) when it has one.
fn titled_citation(
    passage: Option<&reach_corpus::retrieve::EvidencePassage>,
    url: &str,
) -> Result<Citation, reach_discord::render::InvalidCitation> {
    let citation = Citation::new(url)?;
    Ok(match passage {
        Some(p) => citation.titled(&p.title_within(MAX_CITATION_TITLE_CHARS)),
        None => citation,
    })
}

fn refusal(state: TurnState, reason: String, view: Option<TurnView>) -> Outcome {
    Outcome {
        state,
        reason: Some(reason),
        view,
    }
}

fn refused(code: String) -> Outcome {
    refusal(TurnState::Refused, code, Some(TurnView::Refused))
}

fn unavailable(code: String) -> Outcome {
    refusal(
        TurnState::DependencyUnavailable,
        code,
        Some(TurnView::DependencyUnavailable),
    )
}

/// What every model attempt of one run shares.
struct ModelCall<'a> {
    portal: &'a PortalRoute,
    turn: &'a ledger::TurnId,
    run: &'a ledger::RunId,
    sigil: &'a str,
    cut: &'a reach_portal::PrivacyCut,
    receipt_digest: Sha256Digest,
}

/// How one model attempt ended.
enum AttemptEnd {
    /// The provider returned (settled COMPLETED).
    Returned(CallResponse),
    /// Proved failed (settled FAILED): whether request bytes left, and the code.
    Failed { code: String, transmitted: bool },
    /// Ward issued no decision: nothing was recorded or sent; the turn's outcome if it ends here.
    NotIssued(Outcome),
    /// The turn ends here (the attempt could not be recorded, or its outcome is unknown).
    Ended(Outcome),
}

impl Pipeline {
    /// One model attempt: its decision, its attempt record (SUBMITTING before the payload
    /// leaves core), the call, and its settlement.
    async fn attempt_model(&self, a: &ModelCall<'_>, attempt_no: u32) -> AttemptEnd {
        let attempt_id = format!("{}/model/{attempt_no}", a.run.0);
        let issued = a
            .portal
            .authority
            .issue(&ModelAttempt {
                sigil_id: a.sigil,
                turn_id: &a.turn.0,
                run: a.run,
                attempt_id: &attempt_id,
                destination: &a.portal.endpoint,
                payload_digest: a.cut.payload_digest(),
                cut_receipt_digest: a.receipt_digest,
                policy_revision: &a.portal.policy_revision,
            })
            .await;
        let decision = match issued {
            Ok(Ok(d)) => d,
            Ok(Err(r)) => return AttemptEnd::NotIssued(refused(r.code)),
            Err(s) => return AttemptEnd::NotIssued(unavailable(format!("ward: {}", s.message()))),
        };
        let spec = ledger::AttemptSpec {
            channel: ledger::AttemptChannel::ServiceJob,
            destination: a.portal.endpoint.clone(),
            request_digest: a.cut.payload_digest(),
            protocol_id: attempt_id.clone(),
        };
        let decision_id = ledger::DecisionId(decision.decision_id.clone());
        let attempt = match self.vault.persist_attempt(a.run, &decision_id, &spec).await {
            Ok(r) => r,
            Err(e) => return AttemptEnd::Ended(refusal(TurnState::Failed, e.code().into(), None)),
        };
        // SUBMITTING is durable before the payload leaves core.
        if let Err(e) = self
            .vault
            .mark_attempt_submitting(&attempt.attempt_id)
            .await
        {
            return AttemptEnd::Ended(refusal(TurnState::Failed, e.code().into(), None));
        }
        let call = a
            .portal
            .provider
            .clone()
            .call(CallRequest {
                decision_id: decision.decision_id,
                attempt_id,
                payload: a.cut.bytes.clone(),
                kind: crate::authority::MODEL_PURPOSE.into(),
            })
            .await;
        let (settlement, end) = match call {
            // The call may have reached the provider: the attempt's outcome is unknown, and so
            // never followed by another.
            Err(s) => (
                ledger::AttemptSettlement::Indeterminate {
                    detail: format!("egress-provider: {:?}", s.code()),
                },
                AttemptEnd::Ended(unavailable("provider/indeterminate".into())),
            ),
            Ok(r) => {
                let r = r.into_inner();
                if r.failure_code.is_empty() {
                    let response_digest = Sha256Digest::of(&r.body);
                    (
                        ledger::AttemptSettlement::Completed { response_digest },
                        AttemptEnd::Returned(r),
                    )
                } else {
                    let code = r.failure_code;
                    let detail = if r.transmitted {
                        code.clone()
                    } else {
                        format!("not-transmitted: {code}")
                    };
                    (
                        ledger::AttemptSettlement::Failed { detail },
                        AttemptEnd::Failed {
                            code,
                            transmitted: r.transmitted,
                        },
                    )
                }
            }
        };
        if let Err(e) = self
            .vault
            .settle_attempt(&attempt.attempt_id, &settlement)
            .await
        {
            tracing::warn!(attempt = %attempt.attempt_id.0, code = e.code(), "attempt settlement refused");
        }
        end
    }

    /// Cut, decision, attempt, call, quarantine, adoption.
    async fn form_remotely(
        &self,
        portal: &PortalRoute,
        turn: &ledger::TurnId,
        run: &ledger::RunId,
        req: &AdmitRequest,
        bundle: &reach_corpus::CorpusEvidenceBundle,
        sigil: &str,
    ) -> Outcome {
        let input = CutInput {
            question: req.question.clone(),
            bundle_digest: bundle.bundle_digest,
            revision: bundle.revision.clone(),
            passages: bundle
                .passages
                .iter()
                .map(|p| EvidenceIn {
                    passage_id: p.passage_id.clone(),
                    digest: p.digest,
                    // The section as a reader places it (`VACUUM › Description`).
                    section: p.title(),
                    url: p.url.clone(),
                    text: p.text.clone(),
                })
                .collect(),
            withheld: WITHHELD.to_vec(),
        };
        let cut = match reach_portal::cut(&input) {
            Ok(c) => c,
            Err(e) => return refused(e.code()),
        };
        let receipt_digest = cut.receipt.digest();
        let lineage = ledger::ContextLineage {
            lineage_digest: Sha256Digest::of_parts([
                bundle.bundle_digest.as_bytes().as_slice(),
                cut.receipt.question_digest.as_bytes().as_slice(),
            ]),
            labels: "public".into(),
            cut_receipt_digest: receipt_digest,
        };
        if let Err(e) = self.vault.record_context(run, &lineage).await {
            return refusal(TurnState::Failed, e.code().into(), None);
        }
        // Each attempt is its own decision, attempt record and physical call; a failed one is
        // followed by another only when `worth_another_attempt` says so.
        let attempt = ModelCall {
            portal,
            turn,
            run,
            sigil,
            cut: &cut,
            receipt_digest,
        };
        let mut last_failure: Option<String> = None;
        let mut attempt_no = 0;
        let response = loop {
            attempt_no += 1;
            match self.attempt_model(&attempt, attempt_no).await {
                AttemptEnd::Returned(response) => break response,
                // No decision for another attempt: the turn ends on the failure that asked
                // for it, not on ward's answer to the retry.
                AttemptEnd::NotIssued(outcome) => {
                    return last_failure.map_or(outcome, unavailable);
                }
                AttemptEnd::Ended(outcome) => return outcome,
                AttemptEnd::Failed { code, transmitted } => {
                    if attempt_no < MAX_MODEL_ATTEMPTS
                        && reach_portal::worth_another_attempt(transmitted, &code)
                    {
                        tracing::info!(turn = %turn.0, %code, attempt_no, "model call failed; another attempt under a new decision");
                        tokio::time::sleep(MODEL_RETRY_PAUSE * attempt_no).await;
                        last_failure = Some(code);
                        continue;
                    }
                    tracing::info!(turn = %turn.0, %code, attempt_no, "model call failed");
                    return match reach_portal::Quarantine::from_code(&code) {
                        Some(_) => refused(code),
                        None => unavailable(code),
                    };
                }
            }
        };
        let mut withheld: Vec<String> = [
            &req.application_id,
            &req.guild_id,
            &req.channel_id,
            &req.subject_id,
            &req.reply_to_message_id,
        ]
        .into_iter()
        .filter(|v| !v.is_empty())
        .cloned()
        .collect();
        withheld.push(sigil.to_owned());
        let judged = ProviderReturn::from_bytes(&response.body).and_then(|ret| {
            reach_portal::quarantine(
                &ret,
                &Expectation {
                    model: &portal.model,
                    payload: &cut.payload,
                    withheld: &withheld,
                },
            )
        });
        let adopted = match judged {
            Ok(a) => a,
            Err(q) => {
                tracing::info!(turn = %turn.0, code = %q, "model return quarantined");
                return refused(q.code());
            }
        };
        let citations: Result<Vec<Citation>, _> = adopted
            .citations
            .iter()
            .map(|c| cite(bundle, &c.passage_id, &c.url))
            .collect();
        match citations {
            Ok(citations) => Outcome {
                state: TurnState::Succeeded,
                reason: None,
                view: Some(TurnView::Answer {
                    text: adopted.text,
                    citations,
                }),
            },
            Err(_) => refusal(TurnState::Failed, "render/invalid-citation".into(), None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reach_corpus::retrieve::EvidencePassage;

    #[test]
    fn a_citation_under_a_long_page_title_keeps_its_section() {
        let passage = EvidencePassage {
            passage_id: "p-1".into(),
            digest: Sha256Digest::of(b"t"),
            path: "git-clean.html".into(),
            section: "OPTIONS".into(),
            context: "git-clean(1) Manual Page — Remove untracked files from the working tree"
                .into(),
            url: "https://docs.example/git-clean.html#L1-L2".into(),
            section_url: "https://docs.example/git-clean.html#_options".into(),
            line_start: 1,
            line_end: 2,
            score: 1.0,
            text: "t".into(),
        };
        let title = titled_citation(Some(&passage), &passage.url).unwrap();
        let title = title.title().unwrap();
        assert!(title.ends_with("… › OPTIONS"), "{title}");
        assert!(title.chars().count() <= MAX_CITATION_TITLE_CHARS, "{title}");
    }
}
