//! `ReachTurn@1`: the outcome of forming an answer, kept separate from the outcome of sending it.
//!
//! A turn terminates exactly once. Its terminal state and its `DiscordDeliveryIntent@1` (PENDING,
//! with effect, payload digest and deterministic nonce) commit in one transaction, so there is
//! never a committed answer without its intent, nor an intent without its answer.
//!
//! An answer longer than one Discord message is delivered in parts. The same statement records
//! parts 2..N (`delivery_part`) with the intent id and nonce each will carry; a part's PENDING
//! intent is written only when the previous part settles KNOWN_SENT (migration 6), so parts
//! reach the channel in order, each once, and a part after a refused one is never sent.

use std::sync::LazyLock;

use reach_digest::Sha256Digest;

use crate::Phylactery;
use crate::backend::{Durability, Value, args};
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

/// Most parts one turn may deliver (the database checks the same bound). Rendering stops well
/// before it (`reach_discord::render::MAX_PARTS`); this bounds the one commit statement.
pub const MAX_DELIVERY_PARTS: usize = 16;

/// What the commit wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedTurn {
    pub turn_id: TurnId,
    pub state: TurnState,
    /// The PENDING intent of part 1 and its nonce.
    pub intent: Option<(IntentId, String)>,
    /// Parts 2..N, in order: the id and nonce of the intent each will get once the part before
    /// it is KNOWN_SENT.
    pub later_parts: Vec<(IntentId, String)>,
}

/// Columns of one `turn_commit` row.
const TURN_COMMIT_COLUMNS: usize = 10;

/// The one `INSERT INTO turn_commit` for 1..=[`MAX_DELIVERY_PARTS`] rows (row k is part k), built
/// once so each shape is one cached statement.
static TURN_COMMIT_SQL: LazyLock<Vec<String>> = LazyLock::new(|| {
    (1..=MAX_DELIVERY_PARTS)
        .map(|rows| {
            let values: Vec<String> = (0..rows)
                .map(|r| {
                    let first = r * TURN_COMMIT_COLUMNS + 1;
                    let params: Vec<String> = (first..first + TURN_COMMIT_COLUMNS)
                        .map(|i| format!("${i}"))
                        .collect();
                    format!("({})", params.join(", "))
                })
                .collect();
            format!(
                "INSERT INTO turn_commit (turn_id, outcome, reason, answer_digest, terminal_at,
                    intent_id, effect, payload_digest, nonce, part_no)
                 VALUES {}",
                values.join(", ")
            )
        })
        .collect()
});

impl Phylactery {
    /// Terminates the turn and commits its delivery intent in one statement (one transaction).
    pub async fn commit_turn(
        &self,
        turn_id: &TurnId,
        commit: &TurnCommit,
    ) -> Result<CommittedTurn> {
        self.commit_turn_in_parts(turn_id, commit, &[]).await
    }

    /// Terminates the turn, commits part 1's PENDING intent (`commit.intent`) and records
    /// `later_parts` as parts 2..N, all in one statement (one transaction). Each later part gets
    /// its intent only when the part before it settles KNOWN_SENT.
    pub async fn commit_turn_in_parts(
        &self,
        turn_id: &TurnId,
        commit: &TurnCommit,
        later_parts: &[DeliveryIntentSpec],
    ) -> Result<CommittedTurn> {
        self.require_serving().await?;
        if !TurnState::Open.can_become(commit.outcome) {
            return Err(LedgerError::InvalidInput(
                "a turn terminates with a terminal outcome",
            ));
        }
        if commit.intent.is_none() && !later_parts.is_empty() {
            return Err(LedgerError::InvalidInput(
                "later parts follow a first part's intent",
            ));
        }
        if 1 + later_parts.len() > MAX_DELIVERY_PARTS {
            return Err(LedgerError::InvalidInput(
                "a turn delivers at most MAX_DELIVERY_PARTS parts",
            ));
        }
        let now = self.now();
        // Deferred (SQLite): lost only with the host, when recovery finds the turn OPEN and core
        // forms it again; the intent's SUBMITTING syncs this commit before anything is sent.
        // See `backend::Durability`.
        let parts: Vec<(i64, IntentId, String, &DeliveryIntentSpec)> = commit
            .intent
            .iter()
            .chain(later_parts)
            .zip(1_i64..)
            .map(|(spec, part)| {
                let intent_id = ids::intent_id(turn_id, part, 1);
                let nonce = ids::nonce(&intent_id, &spec.effect);
                (part, intent_id, nonce, spec)
            })
            .collect();
        let mut args = Vec::with_capacity(parts.len().max(1) * TURN_COMMIT_COLUMNS);
        let turn_row = |args: &mut Vec<Value>| {
            args.extend(args![
                &turn_id.0,
                commit.outcome.as_str(),
                commit.reason.clone(),
                commit.answer_digest.map(|d| d.to_string()),
                now.0
            ]);
        };
        if parts.is_empty() {
            turn_row(&mut args);
            args.extend(args![
                None::<String>,
                None::<String>,
                None::<String>,
                None::<String>,
                1_i64
            ]);
        }
        for (part, intent_id, nonce, spec) in &parts {
            if *part == 1 {
                turn_row(&mut args);
            } else {
                // Later rows only record their part; the turn's own columns are read from row 1.
                args.extend(args![
                    &turn_id.0,
                    None::<String>,
                    None::<String>,
                    None::<String>,
                    now.0
                ]);
            }
            args.extend(args![
                &intent_id.0,
                &spec.effect,
                spec.payload_digest.to_string(),
                nonce,
                *part
            ]);
        }
        let rows = parts.len().max(1);
        // One statement, atomic by itself: the `turn_commit` view's INSTEAD OF trigger
        // terminates the OPEN turn, inserts part 1's PENDING intent and records the later parts.
        // Nothing is written before it runs.
        self.fault(FaultPoint::TurnBeforeCommit);
        let written = self
            .pool()
            .execute_with(
                Durability::Deferred,
                TURN_COMMIT_SQL[rows - 1].as_str(),
                &args,
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
        let mut ids = parts.into_iter().map(|(_, id, nonce, _)| (id, nonce));
        let intent = ids.next();
        self.fault(FaultPoint::TurnCommitted);
        Ok(CommittedTurn {
            turn_id: turn_id.clone(),
            state: commit.outcome,
            intent,
            later_parts: ids.collect(),
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
