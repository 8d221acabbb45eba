//! The turn pipeline for one admitted question: guest scope and Sigil at ward, grounding in
//! the active corpus snapshot, the local extractive cognition, and the one transaction that
//! commits ReachTurn@1 with its DiscordDeliveryIntent@1.
//!
//! A Sigil stays here: it is never forwarded to an egress role, a model or a peer.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use reach_corpus::{BundleOutcome, RetrievalLimits, RetrievalRefusal, Snapshot, extractive_answer};
use reach_digest::Sha256Digest;
use reach_discord::render::{ChannelPolicy, Citation, TurnView, render};
use reach_phylactery as ledger;
use reach_phylactery::{Phylactery, TurnState};
use reach_proto::core::v1::AdmitRequest;
use reach_proto::ward::v1::AdmitScopeRequest;
use reach_proto::ward::v1::ward_client::WardClient;
use tokio::sync::Notify;
use tonic::transport::Channel;

use crate::ports::DiscordEffect;

/// How long the task may live: answering plus delivery. The Sigil expires with it, and with it
/// every chance of a fresh EgressDecision for the reply (ward caps it at its time budget).
pub const TASK_LIFETIME: Duration = Duration::from_secs(120);
/// The Pattern (workflow) revision every public question runs.
pub const PATTERN: (&str, &str) = ("reach.public-answer", "1");

#[derive(Debug, Clone)]
pub struct Pipeline {
    vault: Phylactery,
    corpus_root: PathBuf,
    ward: WardClient<Channel>,
    policy: ChannelPolicy,
    /// Woken whenever a committed turn brings a new intent, so a waiting claimer sees it at once.
    committed: Arc<Notify>,
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
        policy: ChannelPolicy,
        committed: Arc<Notify>,
    ) -> Self {
        Self {
            vault,
            corpus_root,
            ward: WardClient::new(ward),
            policy,
            committed,
        }
    }

    /// Runs the turn and commits its outcome exactly once. A failure to commit leaves the turn
    /// OPEN; a redelivered event or recovery picks it up.
    pub async fn run(&self, turn: ledger::TurnId, req: AdmitRequest) {
        let (outcome, sigil_id) = self.decide(&turn, &req).await;
        let parts = outcome
            .view
            .as_ref()
            .map(|v| render(v, self.policy))
            .unwrap_or_default();
        // One intent per turn: the first part. Multi-part answers need one intent per part.
        // Without a Sigil nothing can ever be delivered, so no intent is committed.
        let first = if sigil_id.is_empty() {
            None
        } else {
            parts.into_iter().next()
        };
        let intent = first.map(|content| {
            let effect = DiscordEffect {
                channel_id: req.channel_id.clone(),
                reply_to_message_id: req.reply_to_message_id.clone(),
                parts: vec![content],
                sigil_id: sigil_id.clone(),
            };
            let effect = serde_json::to_string(&effect).expect("effect serializes");
            ledger::DeliveryIntentSpec {
                payload_digest: Sha256Digest::of(&effect),
                effect,
            }
        });
        let answer_digest = intent.as_ref().map(|i| i.payload_digest);
        let commit = ledger::TurnCommit {
            outcome: outcome.state,
            reason: outcome.reason,
            answer_digest,
            intent,
        };
        match self.vault.commit_turn(&turn, &commit).await {
            Ok(c) => {
                tracing::info!(turn = %turn.0, state = c.state.as_str(), "turn committed");
                if answer_digest.is_some() {
                    self.committed.notify_waiters();
                }
            }
            Err(e) => tracing::warn!(turn = %turn.0, code = e.code(), "turn commit refused"),
        }
    }

    /// Decides the turn's outcome; also returns the task's Sigil id (empty when ward minted none).
    async fn decide(&self, turn: &ledger::TurnId, req: &AdmitRequest) -> (Outcome, String) {
        let mut sigil = String::new();
        let outcome = self.decide_with(turn, req, &mut sigil).await;
        (outcome, sigil)
    }

    async fn decide_with(
        &self,
        turn: &ledger::TurnId,
        req: &AdmitRequest,
        sigil: &mut String,
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

        let pattern = ledger::PatternRevision {
            pattern_id: PATTERN.0.into(),
            revision: PATTERN.1.into(),
        };
        let run = match self.vault.begin_run(turn, &pattern).await {
            Ok(r) => r,
            Err(e) => return refused(TurnState::Failed, e.code().into(), None),
        };

        // Ground: the active snapshot, bounded passages, a sealed bundle.
        let (root, question) = (self.corpus_root.clone(), req.question.clone());
        let grounded = tokio::task::spawn_blocking(move || {
            let snap = Snapshot::open_active(&root)?;
            let bundle = snap.retrieve(
                &question,
                &RetrievalLimits::default(),
                time::OffsetDateTime::now_utc(),
            )?;
            Ok::<_, RetrievalRefusal>((snap.record().clone(), bundle))
        })
        .await;
        let (snapshot, bundle) = match grounded {
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
            // Refused before any model call: the docs do not cover it.
            return refused(
                TurnState::Refused,
                "corpus/not-in-docs".into(),
                Some(TurnView::Refused),
            );
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
            .map(|(_, _, url)| Citation::new(url))
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
