//! The run journal (issue 30 item 1): every experiment of a task run and every step of its
//! stamped plan, with checked states, so that after any restart core knows exactly what may
//! have reached a guest.
//!
//! # Records
//!
//! - `run_experiments` ([`ExperimentRow`]): one row per experiment (one instance), opened
//!   [`ExperimentState::Creating`] by [`Phylactery::experiment_open`] *before* workbench is
//!   asked for the instance, with one `run_steps` row per stamped step, all
//!   [`StepState::Pending`]. [`Phylactery::experiment_move`] follows
//!   [`ExperimentState::can_become`]; the instance id is written with RUNNING (or with
//!   ROLLBACK_PENDING, when known) and never changes after.
//! - `run_steps` ([`StepRow`]): [`Phylactery::step_move`] follows [`StepState::can_become`],
//!   and grants and starts a step only while its experiment runs steps. STARTED is committed
//!   before the step is sent: a STARTED step found after a restart may have reached the guest,
//!   is marked UNKNOWN and is never sent again. [`Phylactery::step_ran`] writes an outcome with
//!   workbench's step record (its digest is `record_digest`; PostgreSQL checks it), so a run
//!   resumed after a restart retains what its applied steps observed
//!   ([`Phylactery::step_record`]).
//!
//! # Rules
//!
//! A run with an unfinished experiment (CREATING, RUNNING, VERIFYING or ROLLBACK_PENDING) is
//! neither concluded nor ended (`journal/experiment-unfinished`): nothing final is published
//! while an instance may still exist. A refused move writes nothing. Migration `run_journal`
//! holds the same transition tables against raw SQL, and the identities; nothing is deleted.

use reach_digest::Sha256Digest;

use crate::Phylactery;
use crate::backend::{Row, Tx, args};
use crate::clock::UnixMillis;
use crate::error::{LedgerError, Result};
use crate::room::{MAX_ROOM_ID, RoomRefusal};
use crate::state::{ExperimentState, StepState};

/// An experiment to journal, before its instance is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewExperiment {
    pub experiment_id: String,
    pub run_id: String,
    /// 1 for the run's first experiment.
    pub n: u32,
    pub plan_digest: Sha256Digest,
    /// The plan's steps, in order.
    pub steps: Vec<NewStep>,
}

/// A stamped step as the journal knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewStep {
    pub index: u32,
    pub digest: Sha256Digest,
    /// `run`, `patch`, `restart` or `verify`.
    pub kind: String,
}

/// An experiment, as journaled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExperimentRow {
    pub experiment_id: String,
    pub run_id: String,
    pub n: u32,
    pub plan_digest: Sha256Digest,
    pub instance_id: Option<String>,
    pub state: ExperimentState,
    /// Why it was refused, or what left it rollback-pending.
    pub code: Option<String>,
    pub created_at: UnixMillis,
    pub updated_at: UnixMillis,
}

/// A step of an experiment, as journaled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRow {
    pub experiment_id: String,
    pub index: u32,
    pub step_digest: Sha256Digest,
    /// `run`, `patch`, `restart` or `verify`.
    pub kind: String,
    pub state: StepState,
    /// Digest of workbench's step record (APPLIED, and FAILED when it ran).
    pub record_digest: Option<Sha256Digest>,
    /// A refusal's code, or why the outcome is unknown.
    pub code: Option<String>,
    pub updated_at: UnixMillis,
}

impl ExperimentRow {
    fn from_row(r: &Row) -> Result<Self> {
        Ok(Self {
            experiment_id: r.text("experiment_id")?,
            run_id: r.text("run_id")?,
            n: small(r, "n")?,
            plan_digest: digest(r, "plan_digest")?,
            instance_id: r.opt_text("instance_id")?,
            state: ExperimentState::parse(&r.text("state")?)?,
            code: r.opt_text("code")?,
            created_at: UnixMillis(r.int("created_at_ms")?),
            updated_at: UnixMillis(r.int("updated_at_ms")?),
        })
    }
}

impl StepRow {
    fn from_row(r: &Row) -> Result<Self> {
        Ok(Self {
            experiment_id: r.text("experiment_id")?,
            index: small(r, "step_index")?,
            step_digest: digest(r, "step_digest")?,
            kind: r.text("kind")?,
            state: StepState::parse(&r.text("state")?)?,
            record_digest: r
                .opt_text("record_digest")?
                .map(|d| {
                    d.parse()
                        .map_err(|e| corrupt(&format!("record_digest: {e}")))
                })
                .transpose()?,
            code: r.opt_text("code")?,
            updated_at: UnixMillis(r.int("updated_at_ms")?),
        })
    }
}

/// The largest step record the journal stores.
pub const MAX_STEP_RECORD: usize = 1 << 20;

// The states in which an instance may still exist are CREATING, RUNNING, VERIFYING and
// ROLLBACK_PENDING ("unfinished").
const SELECT_EXPERIMENT: &str = "SELECT experiment_id, run_id, n, plan_digest, instance_id, state,
        code, created_at_ms, updated_at_ms
     FROM run_experiments WHERE experiment_id = $1";
/// PostgreSQL: the row is locked for the transaction (SQLite's `BEGIN IMMEDIATE` already holds
/// the one write lock).
const SELECT_EXPERIMENT_LOCKED: &str =
    "SELECT experiment_id, run_id, n, plan_digest, instance_id, state,
        code, created_at_ms, updated_at_ms
     FROM run_experiments WHERE experiment_id = $1 FOR UPDATE";
const SELECT_EXPERIMENTS: &str = "SELECT experiment_id, run_id, n, plan_digest, instance_id, state,
        code, created_at_ms, updated_at_ms
     FROM run_experiments WHERE run_id = $1 ORDER BY n";
const SELECT_UNFINISHED: &str = "SELECT experiment_id, run_id, n, plan_digest, instance_id, state,
        code, created_at_ms, updated_at_ms
     FROM run_experiments
     WHERE state IN ('CREATING', 'RUNNING', 'VERIFYING', 'ROLLBACK_PENDING')
     ORDER BY created_at_ms, experiment_id";
const SELECT_RUN_UNFINISHED: &str =
    "SELECT experiment_id, run_id, n, plan_digest, instance_id, state,
        code, created_at_ms, updated_at_ms
     FROM run_experiments
     WHERE run_id = $1 AND state IN ('CREATING', 'RUNNING', 'VERIFYING', 'ROLLBACK_PENDING')
     ORDER BY n LIMIT 1";
const SELECT_STEP: &str =
    "SELECT experiment_id, step_index, step_digest, kind, state, record_digest, code, updated_at_ms
     FROM run_steps WHERE experiment_id = $1 AND step_index = $2";
const SELECT_STEPS: &str =
    "SELECT experiment_id, step_index, step_digest, kind, state, record_digest, code, updated_at_ms
     FROM run_steps WHERE experiment_id = $1 ORDER BY step_index";

impl Phylactery {
    /// Journals an experiment CREATING with its steps PENDING, before workbench is asked for
    /// its instance. Refused `room/run-missing`, `room/run-not-open` or
    /// `journal/experiment-exists`.
    pub async fn experiment_open(&self, e: &NewExperiment) -> Result<ExperimentRow> {
        check_id(&e.experiment_id, "an experiment id is 1 to 128 bytes")?;
        if e.n == 0 {
            return Err(LedgerError::InvalidInput("experiments are numbered from 1"));
        }
        if e.steps.is_empty() {
            return Err(LedgerError::InvalidInput("an experiment has steps"));
        }
        if e.steps
            .iter()
            .any(|s| !matches!(s.kind.as_str(), "run" | "patch" | "restart" | "verify"))
        {
            return Err(LedgerError::InvalidInput(
                "a step is run, patch, restart or verify",
            ));
        }
        let now = self.now();
        let mut tx = self.pool().begin().await?;
        crate::room::open_run(&mut tx, &e.run_id).await?;
        if experiment_in(&mut tx, &e.experiment_id).await?.is_some()
            || tx
                .fetch_optional(
                    "SELECT experiment_id FROM run_experiments WHERE run_id = $1 AND n = $2",
                    &args![&e.run_id, i64::from(e.n)],
                )
                .await?
                .is_some()
        {
            return Err(RoomRefusal::ExperimentExists {
                experiment_id: e.experiment_id.clone(),
            }
            .into());
        }
        tx.execute(
            "INSERT INTO run_experiments (experiment_id, run_id, n, plan_digest, instance_id,
                state, code, created_at_ms, updated_at_ms)
             VALUES ($1, $2, $3, $4, NULL, 'CREATING', NULL, $5, $5)",
            &args![
                &e.experiment_id,
                &e.run_id,
                i64::from(e.n),
                e.plan_digest.to_string(),
                now.0
            ],
        )
        .await?;
        for step in &e.steps {
            tx.execute(
                "INSERT INTO run_steps (experiment_id, step_index, step_digest, kind, state,
                    record_digest, code, updated_at_ms)
                 VALUES ($1, $2, $3, $4, 'PENDING', NULL, NULL, $5)",
                &args![
                    &e.experiment_id,
                    i64::from(step.index),
                    step.digest.to_string(),
                    &step.kind,
                    now.0
                ],
            )
            .await?;
        }
        let row = experiment_in(&mut tx, &e.experiment_id)
            .await?
            .ok_or_else(|| corrupt("experiment vanished"))?;
        tx.commit().await?;
        Ok(row)
    }

    /// Moves an experiment to `to`, setting its instance id (when it has none yet) and code.
    /// Refused `journal/experiment-missing`, `journal/invalid-transition` (the table of
    /// [`ExperimentState::can_become`]), and then nothing is written.
    pub async fn experiment_move(
        &self,
        experiment_id: &str,
        to: ExperimentState,
        instance_id: Option<&str>,
        code: Option<&str>,
    ) -> Result<ExperimentRow> {
        if let Some(i) = instance_id {
            check_id(i, "an instance id is 1 to 128 bytes")?;
        }
        if code.is_some_and(|c| c.trim().is_empty()) {
            return Err(LedgerError::InvalidInput("a code is not empty"));
        }
        let now = self.now();
        let mut tx = self.pool().begin().await?;
        let row = experiment_locked(&mut tx, experiment_id).await?;
        if !row.state.can_become(to) {
            return Err(RoomRefusal::InvalidTransition {
                record: "experiment",
                id: experiment_id.to_owned(),
                from: row.state.as_str(),
                to: to.as_str(),
            }
            .into());
        }
        if let (Some(had), Some(new)) = (&row.instance_id, instance_id)
            && had != new
        {
            return Err(LedgerError::InvalidInput(
                "an experiment's instance id never changes",
            ));
        }
        let instance = row.instance_id.as_deref().or(instance_id);
        let changed = tx
            .execute(
                "UPDATE run_experiments SET state = $1, instance_id = $2, code = $3,
                    updated_at_ms = $4
                 WHERE experiment_id = $5 AND state = $6",
                &args![
                    to.as_str(),
                    instance,
                    code.or(row.code.as_deref()),
                    now.0,
                    experiment_id,
                    row.state.as_str()
                ],
            )
            .await?;
        if changed != 1 {
            return Err(corrupt(&format!(
                "experiment {experiment_id} moved under its lock"
            )));
        }
        let moved = experiment_in(&mut tx, experiment_id)
            .await?
            .ok_or_else(|| corrupt("experiment vanished"))?;
        tx.commit().await?;
        tracing::info!(experiment_id, state = %to, "experiment journaled");
        Ok(moved)
    }

    /// Moves step `index` of an experiment to `to`. Refused `journal/step-missing`,
    /// `journal/invalid-transition` (the table of [`StepState::can_become`], or a grant or
    /// start while the experiment does not run steps), and then nothing is written.
    pub async fn step_move(
        &self,
        experiment_id: &str,
        index: u32,
        to: StepState,
        record_digest: Option<Sha256Digest>,
        code: Option<&str>,
    ) -> Result<StepRow> {
        self.step_write(experiment_id, index, to, record_digest, None, code)
            .await
    }

    /// Moves STARTED step `index` to APPLIED (`succeeded`) or FAILED with workbench's step
    /// `record`, stored with its digest so that a run resumed after a restart retains what the
    /// step observed. Refused as [`Phylactery::step_move`] is.
    pub async fn step_ran(
        &self,
        experiment_id: &str,
        index: u32,
        succeeded: bool,
        record: &[u8],
    ) -> Result<StepRow> {
        if record.len() > MAX_STEP_RECORD {
            return Err(LedgerError::InvalidInput("a step record is at most 1 MiB"));
        }
        let to = if succeeded {
            StepState::Applied
        } else {
            StepState::Failed
        };
        let digest = Sha256Digest::of(record);
        self.step_write(experiment_id, index, to, Some(digest), Some(record), None)
            .await
    }

    /// The step record stored with step `index`'s outcome, `None` when there is none.
    pub async fn step_record(&self, experiment_id: &str, index: u32) -> Result<Option<Vec<u8>>> {
        let row = self
            .pool()
            .fetch_optional(
                "SELECT record FROM run_steps
                 WHERE experiment_id = $1 AND step_index = $2 AND record IS NOT NULL",
                &args![experiment_id, i64::from(index)],
            )
            .await?;
        row.map(|r| r.bytes("record")).transpose()
    }

    async fn step_write(
        &self,
        experiment_id: &str,
        index: u32,
        to: StepState,
        record_digest: Option<Sha256Digest>,
        record: Option<&[u8]>,
        code: Option<&str>,
    ) -> Result<StepRow> {
        if to == StepState::Applied && record_digest.is_none() {
            return Err(LedgerError::InvalidInput(
                "an applied step names its record",
            ));
        }
        if code.is_some_and(|c| c.trim().is_empty()) {
            return Err(LedgerError::InvalidInput("a code is not empty"));
        }
        let now = self.now();
        let mut tx = self.pool().begin().await?;
        let exp = experiment_locked(&mut tx, experiment_id).await?;
        let step = step_in(&mut tx, experiment_id, index)
            .await?
            .ok_or_else(|| RoomRefusal::StepMissing {
                experiment_id: experiment_id.to_owned(),
                index,
            })?;
        let runs = exp.state.runs_steps() || !matches!(to, StepState::Granted | StepState::Started);
        if !step.state.can_become(to) || !runs {
            return Err(RoomRefusal::InvalidTransition {
                record: "step",
                id: format!("{experiment_id}#{index}"),
                from: step.state.as_str(),
                to: to.as_str(),
            }
            .into());
        }
        let changed = tx
            .execute(
                "UPDATE run_steps SET state = $1, record_digest = $2, code = $3,
                    updated_at_ms = $4, record = $5
                 WHERE experiment_id = $6 AND step_index = $7 AND state = $8",
                &args![
                    to.as_str(),
                    record_digest.map(|d| d.to_string()),
                    code,
                    now.0,
                    record.map(<[u8]>::to_vec),
                    experiment_id,
                    i64::from(index),
                    step.state.as_str()
                ],
            )
            .await?;
        if changed != 1 {
            return Err(corrupt(&format!(
                "step {experiment_id}#{index} moved under its lock"
            )));
        }
        let moved = step_in(&mut tx, experiment_id, index)
            .await?
            .ok_or_else(|| corrupt("step vanished"))?;
        tx.commit().await?;
        Ok(moved)
    }

    /// The experiment, `None` if there is none.
    pub async fn experiment(&self, experiment_id: &str) -> Result<Option<ExperimentRow>> {
        self.pool()
            .fetch_optional(SELECT_EXPERIMENT, &args![experiment_id])
            .await?
            .as_ref()
            .map(ExperimentRow::from_row)
            .transpose()
    }

    /// The run's experiments, in order.
    pub async fn experiments(&self, run_id: &str) -> Result<Vec<ExperimentRow>> {
        self.pool()
            .fetch_all(SELECT_EXPERIMENTS, &args![run_id])
            .await?
            .iter()
            .map(ExperimentRow::from_row)
            .collect()
    }

    /// Every experiment whose instance may still exist, oldest first: what recovery settles.
    pub async fn experiments_unfinished(&self) -> Result<Vec<ExperimentRow>> {
        self.pool()
            .fetch_all(SELECT_UNFINISHED, &[])
            .await?
            .iter()
            .map(ExperimentRow::from_row)
            .collect()
    }

    /// The experiment's steps, in order.
    pub async fn steps(&self, experiment_id: &str) -> Result<Vec<StepRow>> {
        self.pool()
            .fetch_all(SELECT_STEPS, &args![experiment_id])
            .await?
            .iter()
            .map(StepRow::from_row)
            .collect()
    }
}

/// Refused `journal/experiment-unfinished` when the run has an experiment whose instance may
/// still exist (checked in the transaction that concludes or ends the run).
pub(crate) async fn check_finished(tx: &mut Tx, run_id: &str) -> Result<()> {
    if let Some(r) = tx
        .fetch_optional(SELECT_RUN_UNFINISHED, &args![run_id])
        .await?
    {
        let e = ExperimentRow::from_row(&r)?;
        return Err(RoomRefusal::ExperimentUnfinished {
            run_id: run_id.to_owned(),
            experiment_id: e.experiment_id,
            state: e.state.as_str(),
        }
        .into());
    }
    Ok(())
}

async fn experiment_in(tx: &mut Tx, id: &str) -> Result<Option<ExperimentRow>> {
    tx.fetch_optional(SELECT_EXPERIMENT, &args![id])
        .await?
        .as_ref()
        .map(ExperimentRow::from_row)
        .transpose()
}

/// The experiment's row, locked for the transaction on PostgreSQL (SQLite's `BEGIN IMMEDIATE`
/// already holds the one write lock); `journal/experiment-missing` without one.
async fn experiment_locked(tx: &mut Tx, id: &str) -> Result<ExperimentRow> {
    let sql = match tx {
        Tx::Postgres(_) => SELECT_EXPERIMENT_LOCKED,
        Tx::Sqlite(..) => SELECT_EXPERIMENT,
    };
    tx.fetch_optional(sql, &args![id])
        .await?
        .as_ref()
        .map(ExperimentRow::from_row)
        .transpose()?
        .ok_or_else(|| {
            RoomRefusal::ExperimentMissing {
                experiment_id: id.to_owned(),
            }
            .into()
        })
}

async fn step_in(tx: &mut Tx, experiment_id: &str, index: u32) -> Result<Option<StepRow>> {
    tx.fetch_optional(SELECT_STEP, &args![experiment_id, i64::from(index)])
        .await?
        .as_ref()
        .map(StepRow::from_row)
        .transpose()
}

fn check_id(id: &str, why: &'static str) -> Result<()> {
    if id.trim().is_empty() || id.len() > MAX_ROOM_ID {
        return Err(LedgerError::InvalidInput(why));
    }
    Ok(())
}

fn small(r: &Row, col: &str) -> Result<u32> {
    u32::try_from(r.int(col)?).map_err(|_| corrupt(&format!("{col} out of range")))
}

fn digest(r: &Row, col: &str) -> Result<Sha256Digest> {
    r.text(col)?
        .parse()
        .map_err(|e| corrupt(&format!("{col}: {e}")))
}

fn corrupt(what: &str) -> LedgerError {
    LedgerError::Corrupt(what.to_owned())
}
