//! `ReachTurn@1`: the outcome of forming an answer, kept separate from the outcome of sending it.
//!
//! A turn terminates exactly once. Its terminal state and its `DiscordDeliveryIntent@1` (PENDING,
//! with effect, payload digest and deterministic nonce) commit in one transaction, so there is
//! never a committed answer without its intent, nor an intent without its answer.

use reach_digest::Sha256Digest;

use crate::Phylactery;
use crate::backend::{Durability, args};
use crate::error::{LedgerError, Result};
use crate::fault::FaultPoint;
use crate::ids::{self, IntentId, TurnId};
use crate::state::TurnState;

/// What a `DiscordDeliveryIntent@1` will do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryIntentSpec {
    /// The effect, secret-free and exact, e.g. `create_message channel=123 reply_to=456`.
    pub effect: String,
    /// Digest of the exact request body the sender will transmit.
    pub payload_digest: Sha256Digest,
}

/// The terminal commit of a turn.
#[derive(Debug, Clone)]
pub struct TurnCommit {
    /// Must be terminal.
    pub outcome: TurnState,
    /// Secret-free reason code (e.g. a refusal code); shown in the trail.
    pub reason: Option<String>,
    /// Digest of the committed answer, when one was formed.
    pub answer_digest: Option<Sha256Digest>,
    /// The message to deliver (answer or honest refusal); `None` means NOT_ATTEMPTED.
    pub intent: Option<DeliveryIntentSpec>,
}

/// What the commit wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedTurn {
    pub turn_id: TurnId,
    pub state: TurnState,
    /// The PENDING intent and its nonce.
    pub intent: Option<(IntentId, String)>,
}

impl Phylactery {
    /// Terminates the turn and commits its delivery intent in one statement (one transaction).
    pub async fn commit_turn(
        &self,
        turn_id: &TurnId,
        commit: &TurnCommit,
    ) -> Result<CommittedTurn> {
        self.require_serving().await?;
        if !TurnState::Open.can_become(commit.outcome) {
            return Err(LedgerError::InvalidInput(
                "a turn terminates with a terminal outcome",
            ));
        }
        let now = self.now();
        // Deferred (SQLite): lost only with the host, when recovery finds the turn OPEN and core
        // forms it again; the intent's SUBMITTING syncs this commit before anything is sent.
        // See `backend::Durability`.
        let intent = commit.intent.as_ref().map(|spec| {
            let intent_id = ids::intent_id(turn_id, 1);
            let nonce = ids::nonce(&intent_id, &spec.effect);
            (intent_id, nonce, spec)
        });
        // One statement, atomic by itself: the `turn_commit` view's INSTEAD OF trigger
        // terminates the OPEN turn and inserts the PENDING intent. Nothing is written before it
        // runs.
        self.fault(FaultPoint::TurnBeforeCommit);
        let written = self
            .pool()
            .execute_with(
                Durability::Deferred,
                "INSERT INTO turn_commit (turn_id, outcome, reason, answer_digest, terminal_at,
                    intent_id, effect, payload_digest, nonce)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                &args![
                    &turn_id.0,
                    commit.outcome.as_str(),
                    commit.reason.clone(),
                    commit.answer_digest.map(|d| d.to_string()),
                    now.0,
                    intent.as_ref().map(|(id, _, _)| id.0.clone()),
                    intent.as_ref().map(|(_, _, spec)| spec.effect.clone()),
                    intent
                        .as_ref()
                        .map(|(_, _, spec)| spec.payload_digest.to_string()),
                    intent.as_ref().map(|(_, nonce, _)| nonce.clone())
                ],
            )
            .await;
        match written {
            Ok(_) => {}
            Err(e) if e.is_database_refusal("turn/already-terminal") => {
                return Err(LedgerError::TurnAlreadyTerminal {
                    turn_id: turn_id.0.clone(),
                    state: self.turn_state(turn_id).await?.to_string(),
                });
            }
            Err(e) if e.is_database_refusal("ledger/not-found") => {
                return Err(LedgerError::NotFound {
                    record: "ReachTurn@1",
                    id: turn_id.0.clone(),
                });
            }
            Err(e) => return Err(e),
        }
        let intent = intent.map(|(id, nonce, _)| (id, nonce));
        self.fault(FaultPoint::TurnCommitted);
        Ok(CommittedTurn {
            turn_id: turn_id.clone(),
            state: commit.outcome,
            intent,
        })
    }

    /// The current state of a turn.
    pub async fn turn_state(&self, turn_id: &TurnId) -> Result<TurnState> {
        let row = self
            .pool()
            .fetch_optional(
                "SELECT state FROM reach_turn WHERE turn_id = $1",
                &args![&turn_id.0],
            )
            .await?
            .ok_or_else(|| LedgerError::NotFound {
                record: "ReachTurn@1",
                id: turn_id.0.clone(),
            })?;
        TurnState::parse(&row.text("state")?)
    }
}
