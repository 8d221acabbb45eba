//! The run journal of one experiment in the Phylactery (`run_experiments`, `run_steps`): the
//! coordinator's marks as checked transitions, the experiment's end once its instance is
//! gone, and after a restart the settling of what a crash left unfinished.
//!
//! Invariants: a step is STARTED in the ledger before it is sent; a STARTED step whose
//! outcome was not journaled becomes UNKNOWN and is never sent again (a GRANTED one never
//! reached workbench: a resumed run grants it again, an interrupted one FAILS it with
//! `task/interrupted`, its grant dead with the instance); an experiment with an
//! UNKNOWN step, or whose destruction is not confirmed, is ROLLBACK_PENDING until the broker
//! confirms the instance destroyed (or reaped), then DESTROYED.

use reach_experiment::{End, Execution, Journal, Mark};
use reach_phylactery::{
    ExperimentRow, ExperimentState as X, LedgerError, Phylactery, StepRow, StepState as S,
};

/// Journals an experiment's marks in the Phylactery.
pub struct VaultJournal {
    vault: Phylactery,
    experiment_id: String,
    verifying: bool,
    /// The step a restart found GRANTED, never STARTED: its next grant finds it journaled so.
    regrant: Option<u32>,
}

impl VaultJournal {
    pub fn new(vault: Phylactery, experiment_id: String) -> Self {
        VaultJournal {
            vault,
            experiment_id,
            verifying: false,
            regrant: None,
        }
    }

    /// For an experiment resumed in `state` (VERIFYING once its verifier started), whose step
    /// `regrant`, if any, a crash left GRANTED and never STARTED.
    pub fn resumed(
        vault: Phylactery,
        experiment_id: String,
        state: X,
        regrant: Option<u32>,
    ) -> Self {
        VaultJournal {
            vault,
            experiment_id,
            verifying: state == X::Verifying,
            regrant,
        }
    }
}

/// A ledger refusal as an `area/reason` code (what an experiment's end may carry).
pub fn code_of(e: &LedgerError) -> String {
    let code = e.code();
    if code.contains('/') && !code.contains(char::is_whitespace) {
        code.to_owned()
    } else {
        "journal/unavailable".to_owned()
    }
}

impl Journal for VaultJournal {
    async fn mark<'a>(&'a mut self, mark: Mark<'a>) -> Result<(), String> {
        {
            let id = self.experiment_id.as_str();
            let v = &self.vault;
            let moved = match mark {
                Mark::Created { instance_id } => v
                    .experiment_move(id, X::Running, Some(instance_id), None)
                    .await
                    .map(drop),
                // Granted again after a restart: the step is journaled GRANTED already.
                Mark::Granted { index } if self.regrant == Some(index as u32) => {
                    self.regrant = None;
                    Ok(())
                }
                Mark::Granted { index } => v
                    .step_move(id, index as u32, S::Granted, None, None)
                    .await
                    .map(drop),
                Mark::Started { index, verify } => {
                    if verify && !self.verifying {
                        if let Err(e) = v.experiment_move(id, X::Verifying, None, None).await {
                            return Err(code_of(&e));
                        }
                        self.verifying = true;
                    }
                    v.step_move(id, index as u32, S::Started, None, None)
                        .await
                        .map(drop)
                }
                // The record is kept with the outcome: a run resumed after a restart
                // retains what the step observed.
                Mark::Ran {
                    index,
                    succeeded,
                    record,
                    ..
                } => v
                    .step_ran(id, index as u32, succeeded, record)
                    .await
                    .map(drop),
                Mark::Refused { index, code } => v
                    .step_move(id, index as u32, S::Failed, None, Some(code))
                    .await
                    .map(drop),
                Mark::Unknown { index, code } => v
                    .step_move(id, index as u32, S::Unknown, None, Some(code))
                    .await
                    .map(drop),
            };
            moved.map_err(|e| code_of(&e))
        }
    }
}

/// Why an experiment is left ROLLBACK_PENDING: its instance's destruction is not confirmed.
pub const DESTROY_UNCONFIRMED: &str = "workbench/destroy-unconfirmed";

/// Journals how experiment `id` ended, once `x` came back: the state its end and the
/// verifier (`passed`) prove, or ROLLBACK_PENDING while the instance may still exist. Returns
/// the row as journaled.
pub async fn settle(
    vault: &Phylactery,
    id: &str,
    x: &Execution,
    passed: bool,
) -> Result<ExperimentRow, LedgerError> {
    let row = vault
        .experiment(id)
        .await?
        .ok_or(LedgerError::InvalidInput("the experiment was never opened"))?;
    let confirmed = x.destruction.as_ref().is_some_and(|d| d.confirmed());
    if x.instance_id.is_some() && !confirmed {
        return to(vault, &row, X::RollbackPending, Some(DESTROY_UNCONFIRMED)).await;
    }
    let verifying = row.state == X::Verifying;
    match &x.end {
        End::Unknown { code, .. } => {
            let pending = to(vault, &row, X::RollbackPending, Some(code)).await?;
            to(vault, &pending, X::Destroyed, None).await
        }
        End::NotCreated { code } => to(vault, &row, X::Refused, Some(code)).await,
        End::Refused { code, .. } if verifying => {
            to(vault, &row, X::VerificationFailed, Some(code)).await
        }
        End::Refused { code, .. } => to(vault, &row, X::Refused, Some(code)).await,
        End::StepFailed { .. } if verifying => to(vault, &row, X::VerificationFailed, None).await,
        End::StepFailed { .. } => to(vault, &row, X::Failed, None).await,
        End::Completed => {
            let row = if verifying {
                row
            } else {
                to(vault, &row, X::Verifying, None).await?
            };
            let end = if passed {
                X::Succeeded
            } else {
                X::VerificationFailed
            };
            to(vault, &row, end, None).await
        }
    }
}

async fn to(
    vault: &Phylactery,
    row: &ExperimentRow,
    state: X,
    code: Option<&str>,
) -> Result<ExperimentRow, LedgerError> {
    if row.state == state {
        return Ok(row.clone());
    }
    vault
        .experiment_move(&row.experiment_id, state, None, code)
        .await
}

/// After a restart, the first half of settling an unfinished experiment: every STARTED step
/// becomes UNKNOWN (`task/interrupted`: it may have reached the guest; it is never sent
/// again) and the experiment ROLLBACK_PENDING. Returns its steps as journaled.
pub async fn interrupt(
    vault: &Phylactery,
    row: &ExperimentRow,
) -> Result<(ExperimentRow, Vec<StepRow>), LedgerError> {
    let id = row.experiment_id.as_str();
    for s in vault.steps(id).await? {
        // STARTED may have reached the guest: UNKNOWN, never sent again. GRANTED never left
        // core (STARTED is durable before a send): its grant dies with the instance.
        let to = match s.state {
            S::Started => S::Unknown,
            S::Granted => S::Failed,
            _ => continue,
        };
        vault
            .step_move(id, s.index, to, None, Some(INTERRUPTED))
            .await?;
    }
    let row = to(vault, row, X::RollbackPending, Some(INTERRUPTED)).await?;
    Ok((row, vault.steps(id).await?))
}

/// What a crash leaves an experiment's interrupted steps and its run.
pub const INTERRUPTED: &str = "task/interrupted";

/// The second half: the instance is confirmed gone.
pub async fn destroyed(vault: &Phylactery, row: &ExperimentRow) -> Result<(), LedgerError> {
    to(vault, row, X::Destroyed, None).await.map(drop)
}

/// An experiment interrupted while its instance was being created, of which workbench knows
/// nothing: no instance is known to exist, so it ends REFUSED (`task/interrupted`).
pub async fn never_created(vault: &Phylactery, row: &ExperimentRow) -> Result<(), LedgerError> {
    to(vault, row, X::Refused, Some(INTERRUPTED))
        .await
        .map(drop)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use reach_digest::Sha256Digest;
    use reach_phylactery::{
        NewExperiment, NewRun, NewStep, OperatorReconciliation, ReconciliationKind, SystemClock,
        UnixMillis, VaultConfig,
    };

    use super::*;

    /// A crash left step 0 APPLIED, step 1 STARTED, step 2 GRANTED (only one is in flight in a
    /// live run; both kinds are settled here) and step 3 PENDING. Interrupting settles each
    /// in-flight step to a terminal (STARTED → UNKNOWN, GRANTED → FAILED), both with
    /// `task/interrupted`, and leaves the rest as they were.
    #[tokio::test]
    async fn an_interrupted_experiment_leaves_no_step_in_flight() {
        let dir = tempfile::tempdir().unwrap();
        let vault = Phylactery::open(
            VaultConfig::sqlite(dir.path().join("vault.db")),
            Arc::new(SystemClock),
        )
        .await
        .unwrap();
        vault
            .record_operator_reconciliation(&OperatorReconciliation {
                kind: ReconciliationKind::Genesis,
                operator: "test".into(),
                note: "fresh vault".into(),
            })
            .await
            .unwrap();
        vault
            .run_open(&NewRun {
                run_id: "run-0a".into(),
                pack: "app-local".into(),
                pack_generation: 1,
                goal_digest: Sha256Digest::of("goal"),
                goal: "goal".into(),
                opened_at: UnixMillis(1),
            })
            .await
            .unwrap();
        let id = "run-0a-e1";
        vault
            .experiment_open(&NewExperiment {
                experiment_id: id.into(),
                run_id: "run-0a".into(),
                n: 1,
                plan_digest: Sha256Digest::of("plan"),
                steps: (0..4)
                    .map(|i| NewStep {
                        index: i,
                        digest: Sha256Digest::of(format!("step {i}")),
                        kind: "run".into(),
                    })
                    .collect(),
            })
            .await
            .unwrap();
        let row = vault
            .experiment_move(id, X::Running, Some("inst-1"), None)
            .await
            .unwrap();
        for (i, to) in [
            (0, S::Granted),
            (0, S::Started),
            (1, S::Granted),
            (1, S::Started),
            (2, S::Granted),
        ] {
            vault.step_move(id, i, to, None, None).await.unwrap();
        }
        vault.step_ran(id, 0, true, b"{\"step\":0}").await.unwrap();
        let (row, steps) = interrupt(&vault, &row).await.unwrap();
        assert_eq!(row.state, X::RollbackPending);
        let ends: Vec<_> = steps.iter().map(|s| (s.state, s.code.clone())).collect();
        let interrupted = Some(INTERRUPTED.to_owned());
        assert_eq!(
            ends,
            [
                (S::Applied, None),
                (S::Unknown, interrupted.clone()),
                (S::Failed, interrupted),
                (S::Pending, None),
            ]
        );
    }
}
