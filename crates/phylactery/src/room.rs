//! Task runs and their Room (issue 37 item 1's durability).
//!
//! Core drives a task run (a Room) and stores everything about it here; ward signs the records
//! (core holds no key), so each row keeps the signature and the signing key's id beside the
//! canonical bytes. This module knows nothing of the Room's types: it stores bytes, digests and
//! a few indexed columns, and checks only what the records themselves can prove.
//!
//! # Records
//!
//! - `task_runs` ([`RunRow`]): one row per run (`run-<hex>`, minted by core), the pack and the
//!   pack generation it runs under, the goal and its digest (the text kept so core can resume
//!   the run), and its [`RunState`]: `open` until [`Phylactery::run_conclude`] or
//!   [`Phylactery::run_end`] moves it, once, to `concluded` or `ended` (with its end code).
//! - `room_facts` ([`StoredFact`]): the Room's signed facts, a hash chain per run.
//!   [`Phylactery::fact_append`] checks, in one transaction, that the run is open
//!   (`room/run-not-open`, `room/run-missing`), that the fact's seq is the next one (0 first,
//!   then last + 1: `room/out-of-order`) and that it names the last fact's digest
//!   (`room/chain-broken`); a refused append writes nothing. The Concluded or Ended fact is
//!   appended while the run is still open, and the run is concluded or ended after it.
//! - `room_passages` ([`PassageRow`]): each passage's ServiceJobAttempt, written `submitting`
//!   by [`Phylactery::passage_submitting`] before the call, then settled once
//!   ([`Phylactery::passage_settle`]: answered, refused or failed) or, after a crash between
//!   the two, marked `unknown` by recovery ([`Phylactery::passage_mark_unknown`], from the
//!   [`Phylactery::passages_unsettled`] listing). An egress decision authorizes one passage
//!   (`room/decision-reused`).
//! - `room_records` ([`StoredRecord`]): the run's signed execution records and its recipe, keyed
//!   by (run, kind, n) and immutable: putting identical bytes again changes nothing, different
//!   ones are `room/record-conflict`.
//!
//! # Time
//!
//! The times of signed things (a fact's, a record's, the run's open and end) are the caller's:
//! they are inside the bytes ward signed. A passage's times come from the vault's clock.
//!
//! # Guards
//!
//! Migration `task_runs` holds the rules against raw SQL too: a fact extends its run's chain and
//! only while the run is open, a run leaves `open` once, a passage leaves `submitting` once,
//! facts and records never change, nothing is deleted; every insert advances the vault's commit
//! sequence. Every write is one synced transaction; on PostgreSQL it first locks the run's row,
//! so concurrent appends to one run are serialized as on SQLite (two appends of one seq: one
//! wins, the other is `room/out-of-order`). The digests are not recomputed here: what a digest
//! covers is the Room's definition.

use reach_digest::Sha256Digest;

use crate::Phylactery;
use crate::backend::{Row, Tx, args};
use crate::clock::UnixMillis;
use crate::error::{LedgerError, Result};

/// The longest run, attempt or decision id the records accept (bytes).
pub const MAX_ROOM_ID: usize = 128;

/// A run's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunState {
    Open,
    Concluded,
    Ended,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Concluded => "concluded",
            Self::Ended => "ended",
        }
    }

    fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "open" => Self::Open,
            "concluded" => Self::Concluded,
            "ended" => Self::Ended,
            other => return Err(corrupt(&format!("run state {other:?}"))),
        })
    }
}

impl std::fmt::Display for RunState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A run to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRun {
    /// `run-<hex>`, minted by core; at most [`MAX_ROOM_ID`] bytes.
    pub run_id: String,
    pub pack: String,
    /// The pack's generation the run was admitted under.
    pub pack_generation: u64,
    pub goal_digest: Sha256Digest,
    /// The goal's text (1 to 4000 bytes; its digest is `goal_digest`), kept so that core can
    /// resume the run after a restart.
    pub goal: String,
    /// The time in the run's Opened fact.
    pub opened_at: UnixMillis,
}

/// A run, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRow {
    pub run_id: String,
    pub pack: String,
    pub pack_generation: u64,
    pub goal_digest: Sha256Digest,
    /// `None` for a run opened before the ledger kept goals (version 13/15).
    pub goal: Option<String>,
    pub state: RunState,
    /// Only for an ended run.
    pub end_code: Option<String>,
    pub opened_at: UnixMillis,
    /// When it was concluded or ended.
    pub ended_at: Option<UnixMillis>,
}

impl RunRow {
    fn from_row(r: &Row) -> Result<Self> {
        Ok(Self {
            run_id: r.text("run_id")?,
            pack: r.text("pack")?,
            pack_generation: unsigned(r, "pack_generation")?,
            goal_digest: digest(r, "goal_digest")?,
            goal: r.opt_text("goal")?,
            state: RunState::parse(&r.text("state")?)?,
            end_code: r.opt_text("end_code")?,
            opened_at: UnixMillis(r.int("opened_at_ms")?),
            ended_at: r.opt_int("ended_at_ms")?.map(UnixMillis),
        })
    }
}

/// One signed fact of a run's Room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFact {
    /// 0 for the first fact, then one more than the last.
    pub seq: u64,
    pub digest: Sha256Digest,
    /// The previous fact's digest; `None` exactly for seq 0.
    pub prev_digest: Option<Sha256Digest>,
    /// The fact body's kind string.
    pub kind: String,
    /// The canonical bytes, returned exactly.
    pub bytes: Vec<u8>,
    /// Ward's signature as ward encodes it (never key material).
    pub signature: String,
    pub key_id: String,
    pub at: UnixMillis,
}

impl StoredFact {
    fn from_row(r: &Row) -> Result<Self> {
        Ok(Self {
            seq: unsigned(r, "seq")?,
            digest: digest(r, "digest")?,
            prev_digest: r
                .opt_text("prev_digest")?
                .map(|d| d.parse().map_err(|e| corrupt(&format!("prev_digest: {e}"))))
                .transpose()?,
            kind: r.text("kind")?,
            bytes: r.bytes("bytes")?,
            signature: r.text("signature")?,
            key_id: r.text("key_id")?,
            at: UnixMillis(r.int("at_ms")?),
        })
    }
}

/// A passage attempt's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PassageState {
    /// Written before the call; the outcome is not known yet.
    Submitting,
    Answered,
    Refused,
    Failed,
    /// The process died between SUBMITTING and the settlement: only evidence settles it.
    Unknown,
}

impl PassageState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Submitting => "submitting",
            Self::Answered => "answered",
            Self::Refused => "refused",
            Self::Failed => "failed",
            Self::Unknown => "unknown",
        }
    }

    fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "submitting" => Self::Submitting,
            "answered" => Self::Answered,
            "refused" => Self::Refused,
            "failed" => Self::Failed,
            "unknown" => Self::Unknown,
            other => return Err(corrupt(&format!("passage state {other:?}"))),
        })
    }
}

impl std::fmt::Display for PassageState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A passage about to be sent (written before the call).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPassage {
    pub attempt_id: String,
    pub run_id: String,
    pub round: u32,
    pub role: String,
    pub payload_digest: Sha256Digest,
    /// The egress decision that authorizes this one passage.
    pub decision_id: String,
}

/// How a passage ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PassageSettlement {
    Answered { answer_digest: Sha256Digest },
    Refused { code: String },
    Failed { code: String },
}

/// What a passage cost, written with its settlement (once): the runtime's `usage` of the one
/// call, when it said, and the call's wall time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PassageCost {
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub wall_ms: Option<u64>,
}

/// A passage attempt, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassageRow {
    pub attempt_id: String,
    pub run_id: String,
    pub round: u32,
    pub role: String,
    pub payload_digest: Sha256Digest,
    pub decision_id: String,
    pub state: PassageState,
    /// Only for an answered passage.
    pub answer_digest: Option<Sha256Digest>,
    /// A refused or failed passage's code.
    pub code: Option<String>,
    pub created_at: UnixMillis,
    pub settled_at: Option<UnixMillis>,
    /// Written with the settlement.
    pub cost: PassageCost,
}

impl PassageRow {
    fn from_row(r: &Row) -> Result<Self> {
        Ok(Self {
            attempt_id: r.text("attempt_id")?,
            run_id: r.text("run_id")?,
            round: u32::try_from(r.int("round")?).map_err(|_| corrupt("round out of range"))?,
            role: r.text("role")?,
            payload_digest: digest(r, "payload_digest")?,
            decision_id: r.text("decision_id")?,
            state: PassageState::parse(&r.text("state")?)?,
            answer_digest: r
                .opt_text("answer_digest")?
                .map(|d| {
                    d.parse()
                        .map_err(|e| corrupt(&format!("answer_digest: {e}")))
                })
                .transpose()?,
            code: r.opt_text("code")?,
            created_at: UnixMillis(r.int("created_at_ms")?),
            settled_at: r.opt_int("settled_at_ms")?.map(UnixMillis),
            cost: PassageCost {
                prompt_tokens: opt_unsigned(r, "prompt_tokens")?,
                completion_tokens: opt_unsigned(r, "completion_tokens")?,
                wall_ms: opt_unsigned(r, "wall_ms")?,
            },
        })
    }
}

fn opt_unsigned(r: &Row, col: &str) -> Result<Option<u64>> {
    r.opt_int(col)?
        .map(|v| u64::try_from(v).map_err(|_| corrupt(&format!("{col} is negative"))))
        .transpose()
}

/// The kind of a run's signed record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordKind {
    ExecutionRecord,
    Recipe,
}

impl RecordKind {
    /// `execution-record` or `recipe`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ExecutionRecord => "execution-record",
            Self::Recipe => "recipe",
        }
    }

    fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "execution-record" => Self::ExecutionRecord,
            "recipe" => Self::Recipe,
            other => return Err(corrupt(&format!("record kind {other:?}"))),
        })
    }
}

impl std::fmt::Display for RecordKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A signed execution record or recipe of a run, keyed by (run, kind, n).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    pub run_id: String,
    pub kind: RecordKind,
    pub n: u32,
    pub digest: Sha256Digest,
    pub bytes: Vec<u8>,
    pub signature: String,
    pub key_id: String,
    pub at: UnixMillis,
}

impl StoredRecord {
    fn from_row(r: &Row) -> Result<Self> {
        Ok(Self {
            run_id: r.text("run_id")?,
            kind: RecordKind::parse(&r.text("kind")?)?,
            n: u32::try_from(r.int("n")?).map_err(|_| corrupt("n out of range"))?,
            digest: digest(r, "digest")?,
            bytes: r.bytes("bytes")?,
            signature: r.text("signature")?,
            key_id: r.text("key_id")?,
            at: UnixMillis(r.int("at_ms")?),
        })
    }
}

/// Why a run or Room operation was refused; [`RoomRefusal::code`] is its stable code. Nothing
/// was written when one is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoomRefusal {
    /// `room/run-exists`: a run with this id was already opened.
    #[error("run {run_id} already exists")]
    RunExists { run_id: String },
    /// `room/run-missing`: no such run.
    #[error("run {run_id} does not exist")]
    RunMissing { run_id: String },
    /// `room/run-not-open`: the run was concluded or ended.
    #[error("run {run_id} is {state}, not open")]
    RunNotOpen { run_id: String, state: RunState },
    /// `room/out-of-order`: the fact's seq is not the next one.
    #[error("fact {seq} of run {run_id} is out of order (the next is {expected})")]
    OutOfOrder {
        run_id: String,
        seq: u64,
        expected: u64,
    },
    /// `room/chain-broken`: the fact does not name the last fact's digest.
    #[error("fact {seq} of run {run_id} does not extend the chain")]
    ChainBroken { run_id: String, seq: u64 },
    /// `room/passage-exists`: an attempt with this id was already written.
    #[error("passage attempt {attempt_id} already exists")]
    PassageExists { attempt_id: String },
    /// `room/passage-missing`: no such attempt.
    #[error("passage attempt {attempt_id} does not exist")]
    PassageMissing { attempt_id: String },
    /// `room/passage-settled`: the attempt is no longer submitting.
    #[error("passage attempt {attempt_id} is {state}, not submitting")]
    PassageSettled {
        attempt_id: String,
        state: PassageState,
    },
    /// `room/decision-reused`: an egress decision authorizes one passage.
    #[error("egress decision {decision_id} was already used by a passage")]
    DecisionReused { decision_id: String },
    /// `journal/experiment-exists`: an experiment with this id (or this run and number) was
    /// already journaled.
    #[error("experiment {experiment_id} already exists")]
    ExperimentExists { experiment_id: String },
    /// `journal/experiment-missing`: no such experiment.
    #[error("experiment {experiment_id} does not exist")]
    ExperimentMissing { experiment_id: String },
    /// `journal/step-missing`: the experiment has no such step.
    #[error("experiment {experiment_id} has no step {index}")]
    StepMissing { experiment_id: String, index: u32 },
    /// `journal/invalid-transition`: the move is not in the record's transition table.
    #[error("{record} {id} cannot go from {from} to {to}")]
    InvalidTransition {
        record: &'static str,
        id: String,
        from: &'static str,
        to: &'static str,
    },
    /// `journal/experiment-unfinished`: the run has an experiment whose instance may still
    /// exist, so nothing final is published.
    #[error("run {run_id} has experiment {experiment_id} {state}")]
    ExperimentUnfinished {
        run_id: String,
        experiment_id: String,
        state: &'static str,
    },
    /// `room/record-conflict`: a record with this key holds other bytes.
    #[error("the {kind} {n} of run {run_id} is already stored with other bytes")]
    RecordConflict {
        run_id: String,
        kind: RecordKind,
        n: u32,
    },
}

impl RoomRefusal {
    /// The stable refusal code (`area/reason`).
    pub fn code(&self) -> &'static str {
        match self {
            Self::RunExists { .. } => "room/run-exists",
            Self::RunMissing { .. } => "room/run-missing",
            Self::RunNotOpen { .. } => "room/run-not-open",
            Self::OutOfOrder { .. } => "room/out-of-order",
            Self::ChainBroken { .. } => "room/chain-broken",
            Self::PassageExists { .. } => "room/passage-exists",
            Self::PassageMissing { .. } => "room/passage-missing",
            Self::PassageSettled { .. } => "room/passage-settled",
            Self::DecisionReused { .. } => "room/decision-reused",
            Self::RecordConflict { .. } => "room/record-conflict",
            Self::ExperimentExists { .. } => "journal/experiment-exists",
            Self::ExperimentMissing { .. } => "journal/experiment-missing",
            Self::StepMissing { .. } => "journal/step-missing",
            Self::InvalidTransition { .. } => "journal/invalid-transition",
            Self::ExperimentUnfinished { .. } => "journal/experiment-unfinished",
        }
    }
}

const SELECT_RUN: &str = "SELECT run_id, pack, pack_generation, goal_digest, goal, state,
        end_code, opened_at_ms, ended_at_ms FROM task_runs WHERE run_id = $1";
/// PostgreSQL: the run's row is locked for the transaction (SQLite's `BEGIN IMMEDIATE` already
/// holds the one write lock).
const SELECT_RUN_LOCKED: &str = "SELECT run_id, pack, pack_generation, goal_digest, goal,
        state, end_code, opened_at_ms, ended_at_ms FROM task_runs WHERE run_id = $1 FOR UPDATE";
const SELECT_RUNS: &str = "SELECT run_id, pack, pack_generation, goal_digest, goal, state,
        end_code, opened_at_ms, ended_at_ms FROM task_runs
     ORDER BY opened_at_ms DESC, run_id DESC LIMIT $1";

const SELECT_LAST_FACT: &str = "SELECT seq, digest FROM room_facts WHERE run_id = $1
     ORDER BY seq DESC LIMIT 1";
const SELECT_FACTS: &str = "SELECT seq, digest, prev_digest, kind, bytes, signature, key_id,
        at_ms FROM room_facts WHERE run_id = $1 ORDER BY seq";

const PASSAGE_SELECT: &str = "SELECT attempt_id, run_id, round, role, payload_digest,
        decision_id, state, answer_digest, code, created_at_ms, settled_at_ms, prompt_tokens,
        completion_tokens, wall_ms
     FROM room_passages WHERE attempt_id = $1";
const SELECT_PASSAGES: &str = "SELECT attempt_id, run_id, round, role, payload_digest,
        decision_id, state, answer_digest, code, created_at_ms, settled_at_ms, prompt_tokens,
        completion_tokens, wall_ms
     FROM room_passages WHERE run_id = $1 ORDER BY created_at_ms, attempt_id";
const SELECT_UNSETTLED: &str = "SELECT attempt_id, run_id, round, role, payload_digest,
        decision_id, state, answer_digest, code, created_at_ms, settled_at_ms, prompt_tokens,
        completion_tokens, wall_ms
     FROM room_passages WHERE state = 'submitting' ORDER BY created_at_ms, attempt_id";

const SELECT_RECORD: &str = "SELECT run_id, kind, n, digest, bytes, signature, key_id, at_ms
     FROM room_records WHERE run_id = $1 AND kind = $2 AND n = $3";
const SELECT_RECORDS: &str = "SELECT run_id, kind, n, digest, bytes, signature, key_id, at_ms
     FROM room_records WHERE run_id = $1 ORDER BY kind, n";
const SELECT_RECIPE: &str = "SELECT run_id, kind, n, digest, bytes, signature, key_id, at_ms
     FROM room_records WHERE run_id = $1 AND kind = 'recipe' ORDER BY n DESC LIMIT 1";

impl Phylactery {
    /// Opens a run (`open`). Refused `room/run-exists` when the id was used.
    pub async fn run_open(&self, run: &NewRun) -> Result<RunRow> {
        check_run_id(&run.run_id)?;
        if run.pack.trim().is_empty() || run.pack.len() > crate::taskpack::MAX_PACK_NAME {
            return Err(LedgerError::InvalidInput(
                "a run names its pack (1 to 256 bytes)",
            ));
        }
        if run.goal.is_empty() || run.goal.len() > 4000 {
            return Err(LedgerError::InvalidInput("a run's goal is 1 to 4000 bytes"));
        }
        if Sha256Digest::of(run.goal.as_bytes()) != run.goal_digest {
            return Err(LedgerError::InvalidInput(
                "a run's goal_digest is its goal's digest",
            ));
        }
        let inserted = self
            .pool()
            .execute(
                "INSERT INTO task_runs (run_id, pack, pack_generation, goal_digest, goal, state,
                    end_code, opened_at_ms, ended_at_ms)
                 VALUES ($1, $2, $3, $4, $5, 'open', NULL, $6, NULL)
                 ON CONFLICT (run_id) DO NOTHING",
                &args![
                    &run.run_id,
                    &run.pack,
                    signed(run.pack_generation)?,
                    run.goal_digest.to_string(),
                    &run.goal,
                    run.opened_at.0
                ],
            )
            .await?;
        if inserted != 1 {
            return Err(RoomRefusal::RunExists {
                run_id: run.run_id.clone(),
            }
            .into());
        }
        tracing::info!(run_id = %run.run_id, pack = %run.pack, "task run opened");
        Ok(RunRow {
            run_id: run.run_id.clone(),
            pack: run.pack.clone(),
            pack_generation: run.pack_generation,
            goal_digest: run.goal_digest,
            goal: Some(run.goal.clone()),
            state: RunState::Open,
            end_code: None,
            opened_at: run.opened_at,
            ended_at: None,
        })
    }

    /// The run, `None` if there is none.
    pub async fn run(&self, run_id: &str) -> Result<Option<RunRow>> {
        self.pool()
            .fetch_optional(SELECT_RUN, &args![run_id])
            .await?
            .as_ref()
            .map(RunRow::from_row)
            .transpose()
    }

    /// At most `limit` runs, newest first (by open time, then id).
    pub async fn runs(&self, limit: u32) -> Result<Vec<RunRow>> {
        self.pool()
            .fetch_all(SELECT_RUNS, &args![i64::from(limit)])
            .await?
            .iter()
            .map(RunRow::from_row)
            .collect()
    }

    /// Concludes an open run (after its Concluded fact). Refused `room/run-not-open` otherwise,
    /// `room/run-missing` without one.
    pub async fn run_conclude(&self, run_id: &str, at: UnixMillis) -> Result<RunRow> {
        self.run_finish(run_id, RunState::Concluded, None, at).await
    }

    /// Ends an open run with `code` (after its Ended fact). Refused `room/run-not-open` when it
    /// was concluded or ended already, `room/run-missing` without one.
    pub async fn run_end(&self, run_id: &str, code: &str, at: UnixMillis) -> Result<RunRow> {
        if code.trim().is_empty() {
            return Err(LedgerError::InvalidInput("an ended run carries its code"));
        }
        self.run_finish(run_id, RunState::Ended, Some(code), at)
            .await
    }

    async fn run_finish(
        &self,
        run_id: &str,
        to: RunState,
        code: Option<&str>,
        at: UnixMillis,
    ) -> Result<RunRow> {
        let mut tx = self.pool().begin().await?;
        open_run(&mut tx, run_id).await?;
        crate::journal::check_finished(&mut tx, run_id).await?;
        let changed = tx
            .execute(
                "UPDATE task_runs SET state = $1, end_code = $2, ended_at_ms = $3
                 WHERE run_id = $4 AND state = 'open'",
                &args![to.as_str(), code, at.0, run_id],
            )
            .await?;
        if changed != 1 {
            return Err(corrupt(&format!("run {run_id} moved under its row lock")));
        }
        let row = run_in(&mut tx, run_id)
            .await?
            .ok_or_else(|| corrupt("run vanished"))?;
        tx.commit().await?;
        tracing::info!(run_id, state = %to, code, "task run finished");
        Ok(row)
    }

    /// Appends the run's next fact, in one transaction: the run is open, `fact.seq` is the next
    /// seq (0 for the first) and `fact.prev_digest` is the last fact's digest. Refused
    /// `room/run-missing`, `room/run-not-open`, `room/out-of-order` or `room/chain-broken`, and
    /// then nothing is written.
    pub async fn fact_append(&self, run_id: &str, fact: &StoredFact) -> Result<()> {
        check_run_id(run_id)?;
        if fact.kind.trim().is_empty() {
            return Err(LedgerError::InvalidInput("a fact names its kind"));
        }
        check_signed(&fact.signature, &fact.key_id)?;
        let seq = signed(fact.seq)?;
        let mut tx = self.pool().begin().await?;
        open_run(&mut tx, run_id).await?;
        let last = tx
            .fetch_optional(SELECT_LAST_FACT, &args![run_id])
            .await?
            .map(|r| Ok::<_, LedgerError>((unsigned(&r, "seq")?, digest(&r, "digest")?)))
            .transpose()?;
        let expected = last.as_ref().map_or(0, |(s, _)| s + 1);
        if fact.seq != expected {
            return Err(RoomRefusal::OutOfOrder {
                run_id: run_id.to_owned(),
                seq: fact.seq,
                expected,
            }
            .into());
        }
        if last.map(|(_, d)| d) != fact.prev_digest {
            return Err(RoomRefusal::ChainBroken {
                run_id: run_id.to_owned(),
                seq: fact.seq,
            }
            .into());
        }
        let inserted = tx
            .execute(
                "INSERT INTO room_facts (run_id, seq, digest, prev_digest, kind, bytes,
                    signature, key_id, at_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                &args![
                    run_id,
                    seq,
                    fact.digest.to_string(),
                    fact.prev_digest.map(|d| d.to_string()),
                    &fact.kind,
                    &fact.bytes,
                    &fact.signature,
                    &fact.key_id,
                    fact.at.0
                ],
            )
            .await;
        match inserted {
            // Only reachable if the run's lock did not serialize the appends.
            Err(e) if is_unique_violation(&e) => {
                return Err(RoomRefusal::OutOfOrder {
                    run_id: run_id.to_owned(),
                    seq: fact.seq,
                    expected: fact.seq + 1,
                }
                .into());
            }
            Err(e) if e.is_database_refusal("room/chain-broken") => {
                return Err(RoomRefusal::ChainBroken {
                    run_id: run_id.to_owned(),
                    seq: fact.seq,
                }
                .into());
            }
            other => other?,
        };
        tx.commit().await?;
        Ok(())
    }

    /// The run's facts in seq order (none for an unknown run).
    pub async fn facts(&self, run_id: &str) -> Result<Vec<StoredFact>> {
        self.pool()
            .fetch_all(SELECT_FACTS, &args![run_id])
            .await?
            .iter()
            .map(StoredFact::from_row)
            .collect()
    }

    /// Writes a passage `submitting`, before the call. Refused `room/run-missing`,
    /// `room/run-not-open`, `room/passage-exists` or `room/decision-reused`.
    pub async fn passage_submitting(&self, passage: &NewPassage) -> Result<PassageRow> {
        check_run_id(&passage.run_id)?;
        check_id(
            &passage.attempt_id,
            "a passage attempt id is 1 to 128 bytes",
        )?;
        check_id(&passage.decision_id, "a decision id is 1 to 128 bytes")?;
        if passage.role.trim().is_empty() {
            return Err(LedgerError::InvalidInput("a passage names its role"));
        }
        let now = self.now();
        let mut tx = self.pool().begin().await?;
        open_run(&mut tx, &passage.run_id).await?;
        if tx
            .fetch_optional(PASSAGE_SELECT, &args![&passage.attempt_id])
            .await?
            .is_some()
        {
            return Err(RoomRefusal::PassageExists {
                attempt_id: passage.attempt_id.clone(),
            }
            .into());
        }
        if tx
            .fetch_optional(
                "SELECT attempt_id FROM room_passages WHERE decision_id = $1",
                &args![&passage.decision_id],
            )
            .await?
            .is_some()
        {
            return Err(RoomRefusal::DecisionReused {
                decision_id: passage.decision_id.clone(),
            }
            .into());
        }
        let inserted = tx
            .execute(
                "INSERT INTO room_passages (attempt_id, run_id, round, role, payload_digest,
                    decision_id, state, answer_digest, code, created_at_ms, settled_at_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, 'submitting', NULL, NULL, $7, NULL)",
                &args![
                    &passage.attempt_id,
                    &passage.run_id,
                    i64::from(passage.round),
                    &passage.role,
                    passage.payload_digest.to_string(),
                    &passage.decision_id,
                    now.0
                ],
            )
            .await;
        match inserted {
            Err(e) if is_unique_violation(&e) => {
                return Err(RoomRefusal::DecisionReused {
                    decision_id: passage.decision_id.clone(),
                }
                .into());
            }
            other => other?,
        };
        tx.commit().await?;
        Ok(PassageRow {
            attempt_id: passage.attempt_id.clone(),
            run_id: passage.run_id.clone(),
            round: passage.round,
            role: passage.role.clone(),
            payload_digest: passage.payload_digest,
            decision_id: passage.decision_id.clone(),
            state: PassageState::Submitting,
            answer_digest: None,
            code: None,
            created_at: now,
            settled_at: None,
            cost: PassageCost::default(),
        })
    }

    /// Settles a submitting passage. Refused `room/passage-missing`, or `room/passage-settled`
    /// when it was settled (or marked unknown) already.
    pub async fn passage_settle(
        &self,
        attempt_id: &str,
        settlement: &PassageSettlement,
    ) -> Result<PassageRow> {
        self.passage_settle_costed(attempt_id, settlement, PassageCost::default())
            .await
    }

    /// [`Phylactery::passage_settle`] with what the call cost, written with the settlement in
    /// one update, so once.
    pub async fn passage_settle_costed(
        &self,
        attempt_id: &str,
        settlement: &PassageSettlement,
        cost: PassageCost,
    ) -> Result<PassageRow> {
        let (state, answer, code) = match settlement {
            PassageSettlement::Answered { answer_digest } => (
                PassageState::Answered,
                Some(answer_digest.to_string()),
                None,
            ),
            PassageSettlement::Refused { code } => (PassageState::Refused, None, Some(code)),
            PassageSettlement::Failed { code } => (PassageState::Failed, None, Some(code)),
        };
        if code.is_some_and(|c| c.trim().is_empty()) {
            return Err(LedgerError::InvalidInput(
                "a refused or failed passage carries its code",
            ));
        }
        self.passage_move(attempt_id, state, answer, code.cloned(), cost)
            .await
    }

    /// Marks a passage whose outcome was lost (a crash between SUBMITTING and its settlement)
    /// `unknown`. Refused `room/passage-missing` or `room/passage-settled`.
    pub async fn passage_mark_unknown(&self, attempt_id: &str) -> Result<PassageRow> {
        self.passage_move(
            attempt_id,
            PassageState::Unknown,
            None,
            None,
            PassageCost::default(),
        )
        .await
    }

    async fn passage_move(
        &self,
        attempt_id: &str,
        to: PassageState,
        answer: Option<String>,
        code: Option<String>,
        cost: PassageCost,
    ) -> Result<PassageRow> {
        let now = self.now();
        let signed = |v: Option<u64>| -> Result<Option<i64>> {
            v.map(|v| {
                i64::try_from(v).map_err(|_| LedgerError::InvalidInput("a passage cost overflows"))
            })
            .transpose()
        };
        let (prompt, completion, wall) = (
            signed(cost.prompt_tokens)?,
            signed(cost.completion_tokens)?,
            signed(cost.wall_ms)?,
        );
        let mut tx = self.pool().begin().await?;
        let row = tx
            .fetch_optional(PASSAGE_SELECT, &args![attempt_id])
            .await?
            .as_ref()
            .map(PassageRow::from_row)
            .transpose()?
            .ok_or_else(|| RoomRefusal::PassageMissing {
                attempt_id: attempt_id.to_owned(),
            })?;
        // The conditional update decides between concurrent settlements (PostgreSQL's row lock;
        // SQLite's one writer): the loser changes no row.
        let changed = tx
            .execute(
                "UPDATE room_passages SET state = $1, answer_digest = $2, code = $3,
                    settled_at_ms = $4, prompt_tokens = $5, completion_tokens = $6, wall_ms = $7
                 WHERE attempt_id = $8 AND state = 'submitting'",
                &args![
                    to.as_str(),
                    answer,
                    code,
                    now.0,
                    prompt,
                    completion,
                    wall,
                    attempt_id
                ],
            )
            .await?;
        if changed != 1 {
            let state = match tx
                .fetch_optional(PASSAGE_SELECT, &args![attempt_id])
                .await?
            {
                Some(r) => PassageRow::from_row(&r)?.state,
                None => row.state,
            };
            return Err(RoomRefusal::PassageSettled {
                attempt_id: attempt_id.to_owned(),
                state,
            }
            .into());
        }
        let settled = tx
            .fetch_optional(PASSAGE_SELECT, &args![attempt_id])
            .await?
            .as_ref()
            .map(PassageRow::from_row)
            .transpose()?
            .ok_or_else(|| corrupt("passage vanished"))?;
        tx.commit().await?;
        Ok(settled)
    }

    /// The passage attempt, `None` if there is none.
    pub async fn passage(&self, attempt_id: &str) -> Result<Option<PassageRow>> {
        self.pool()
            .fetch_optional(PASSAGE_SELECT, &args![attempt_id])
            .await?
            .as_ref()
            .map(PassageRow::from_row)
            .transpose()
    }

    /// The run's passages, oldest first.
    pub async fn passages(&self, run_id: &str) -> Result<Vec<PassageRow>> {
        self.pool()
            .fetch_all(SELECT_PASSAGES, &args![run_id])
            .await?
            .iter()
            .map(PassageRow::from_row)
            .collect()
    }

    /// Every passage still submitting, oldest first: after a restart, recovery marks each one
    /// unknown ([`Phylactery::passage_mark_unknown`]).
    pub async fn passages_unsettled(&self) -> Result<Vec<PassageRow>> {
        self.pool()
            .fetch_all(SELECT_UNSETTLED, &[])
            .await?
            .iter()
            .map(PassageRow::from_row)
            .collect()
    }

    /// Stores a signed record of a run (whatever its state). Returns `true` when it was written,
    /// `false` when the identical record was already there; refused `room/record-conflict` when
    /// the key holds other bytes, `room/run-missing` without the run.
    pub async fn record_put(&self, record: &StoredRecord) -> Result<bool> {
        check_run_id(&record.run_id)?;
        check_signed(&record.signature, &record.key_id)?;
        let mut tx = self.pool().begin().await?;
        let _ = run_locked(&mut tx, &record.run_id).await?;
        let key = args![&record.run_id, record.kind.as_str(), i64::from(record.n)];
        if let Some(r) = tx.fetch_optional(SELECT_RECORD, &key).await? {
            let stored = StoredRecord::from_row(&r)?;
            if stored.bytes == record.bytes && stored.digest == record.digest {
                return Ok(false);
            }
            return Err(RoomRefusal::RecordConflict {
                run_id: record.run_id.clone(),
                kind: record.kind,
                n: record.n,
            }
            .into());
        }
        tx.execute(
            "INSERT INTO room_records (run_id, kind, n, digest, bytes, signature, key_id, at_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            &args![
                &record.run_id,
                record.kind.as_str(),
                i64::from(record.n),
                record.digest.to_string(),
                &record.bytes,
                &record.signature,
                &record.key_id,
                record.at.0
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// The run's records, by kind then n.
    pub async fn records(&self, run_id: &str) -> Result<Vec<StoredRecord>> {
        self.pool()
            .fetch_all(SELECT_RECORDS, &args![run_id])
            .await?
            .iter()
            .map(StoredRecord::from_row)
            .collect()
    }

    /// The run's recipe (the highest n if there are several), `None` before one is stored.
    pub async fn recipe(&self, run_id: &str) -> Result<Option<StoredRecord>> {
        self.pool()
            .fetch_optional(SELECT_RECIPE, &args![run_id])
            .await?
            .as_ref()
            .map(StoredRecord::from_row)
            .transpose()
    }
}

/// The run's row in a write transaction (locked on PostgreSQL).
async fn run_in(tx: &mut Tx, run_id: &str) -> Result<Option<RunRow>> {
    let sql = match tx {
        Tx::Postgres(_) => SELECT_RUN_LOCKED,
        Tx::Sqlite(..) => SELECT_RUN,
    };
    tx.fetch_optional(sql, &args![run_id])
        .await?
        .as_ref()
        .map(RunRow::from_row)
        .transpose()
}

/// The run's row, locked; `room/run-missing` if there is none.
async fn run_locked(tx: &mut Tx, run_id: &str) -> Result<RunRow> {
    run_in(tx, run_id).await?.ok_or_else(|| {
        RoomRefusal::RunMissing {
            run_id: run_id.to_owned(),
        }
        .into()
    })
}

/// The run's row, locked and open; `room/run-missing` or `room/run-not-open` otherwise.
pub(crate) async fn open_run(tx: &mut Tx, run_id: &str) -> Result<RunRow> {
    let run = run_locked(tx, run_id).await?;
    if run.state != RunState::Open {
        return Err(RoomRefusal::RunNotOpen {
            run_id: run_id.to_owned(),
            state: run.state,
        }
        .into());
    }
    Ok(run)
}

fn is_unique_violation(e: &LedgerError) -> bool {
    matches!(e, LedgerError::Database(sqlx::Error::Database(d)) if d.is_unique_violation())
}

fn check_run_id(run_id: &str) -> Result<()> {
    if !run_id.starts_with("run-") || run_id.len() <= 4 || run_id.len() > MAX_ROOM_ID {
        return Err(LedgerError::InvalidInput(
            "a run id is run-<hex>, at most 128 bytes",
        ));
    }
    Ok(())
}

fn check_id(id: &str, why: &'static str) -> Result<()> {
    if id.trim().is_empty() || id.len() > MAX_ROOM_ID {
        return Err(LedgerError::InvalidInput(why));
    }
    Ok(())
}

fn check_signed(signature: &str, key_id: &str) -> Result<()> {
    if signature.trim().is_empty() || key_id.trim().is_empty() {
        return Err(LedgerError::InvalidInput(
            "a signed row carries its signature and key id",
        ));
    }
    Ok(())
}

fn signed(v: u64) -> Result<i64> {
    i64::try_from(v).map_err(|_| LedgerError::InvalidInput("a number is at most 2^63 - 1"))
}

fn unsigned(r: &Row, col: &str) -> Result<u64> {
    u64::try_from(r.int(col)?).map_err(|_| corrupt(&format!("{col} is negative")))
}

fn digest(r: &Row, col: &str) -> Result<Sha256Digest> {
    r.text(col)?
        .parse()
        .map_err(|e| corrupt(&format!("{col}: {e}")))
}

fn corrupt(what: &str) -> LedgerError {
    LedgerError::Corrupt(what.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_and_kinds_round_trip_through_their_columns() {
        for s in [RunState::Open, RunState::Concluded, RunState::Ended] {
            assert_eq!(RunState::parse(s.as_str()).unwrap(), s);
        }
        for s in [
            PassageState::Submitting,
            PassageState::Answered,
            PassageState::Refused,
            PassageState::Failed,
            PassageState::Unknown,
        ] {
            assert_eq!(PassageState::parse(s.as_str()).unwrap(), s);
        }
        for k in [RecordKind::ExecutionRecord, RecordKind::Recipe] {
            assert_eq!(RecordKind::parse(k.as_str()).unwrap(), k);
        }
        assert!(RunState::parse("OPEN").is_err());
        assert!(check_run_id("run-").is_err());
        assert!(check_run_id("abc").is_err());
        assert!(check_run_id("run-0a1b").is_ok());
    }
}
