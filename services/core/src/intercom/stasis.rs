//! Durable Stasis (seed 001: "commit the task/outbox before sending, then park in Durable Stasis
//! while waiting"): core keeps driving an operator task after the request that started it
//! returned, and after a restart, until the task settles and its turn terminates.
//!
//! - A parked task (PARKED: the peer holds it) is polled on, each GetTask under its own fresh
//!   decision and the task's local deadline, one poll at a time at the driver's pacing
//!   (`PollBudget::pause_before`: never more than one interval between polls, the last just
//!   before the deadline; polls keep their numbers), so a task the peer finishes is adopted at
//!   most one interval later. The default budget is sized so ward's default task budgets cover
//!   every poll to the deadline (`reach_intercom::PollBudget::DEFAULT`). A decision ward
//!   refuses for now (rate, concurrency) is asked again after a pause doubling from the
//!   interval up to [`MAX_POLL_PAUSE`] (a refusal for good waits for the deadline), and the
//!   deadline settles EXPIRED.
//! - An uncertain task (the send's outcome was lost) is **never resent** from here: the Stasis
//!   lets go of it, so the operator may still reconcile it under a receipt, and at its local
//!   deadline takes it back and settles it EXPIRED unless something settled it meanwhile.
//! - At start, [`resume_all`] reads every unsettled task from the ledger
//!   (`Phylactery::unsettled_intercom_tasks`) once the vault serves and drives each, without
//!   any operator call. Such a task is rebuilt from the ledger alone (its text was never
//!   stored), so it can be polled or expired, never sent.
//!
//! One driver per task in this process ([`super::Driving`]); the ledger's checked transitions
//! refuse anything a second one would do.

use std::sync::Arc;
use std::time::Duration;

use reach_intercom::ledger::PhylacteryJournal;
use reach_intercom::{Intercom, IntercomRefusal, OutboundTask, Phase};
use reach_phylactery as ledger;
use reach_phylactery::{Clock, SystemClock, VaultStatus};

use super::{Driving, IntercomRoute, PATTERN, WardIssuer};

/// Least pause after ward refused a decision: rate limits and concurrency lift with time.
const REFUSED_PAUSE: Duration = Duration::from_secs(1);
/// The longest pause after ward refused a poll for now: one decision's lifetime at ward, so a
/// task asking at that pace holds at most one live decision.
const MAX_POLL_PAUSE: Duration = Duration::from_secs(30);
/// Pause while the vault does not serve yet (it awaits the operator's reconciliation).
const VAULT_PAUSE: Duration = Duration::from_secs(1);

/// A task held by the Stasis, with what drives it.
pub(crate) struct Parked {
    pub task: OutboundTask,
    pub turn: ledger::TurnId,
    pub journal: PhylacteryJournal,
    pub issuer: WardIssuer,
    pub guard: Driving,
}

/// At start: once the vault serves, hands every unsettled operator task to the Stasis.
pub(crate) async fn resume_all(route: IntercomRoute) {
    loop {
        match route.vault().vault_status().await {
            Ok(VaultStatus::Serving { .. }) => break,
            Ok(_) => {}
            Err(e) => tracing::warn!(code = e.code(), "stasis waits for the vault"),
        }
        tokio::time::sleep(VAULT_PAUSE).await;
    }
    let tasks = match route.vault().unsettled_intercom_tasks().await {
        Ok(t) => t,
        Err(e) => {
            tracing::error!(code = e.code(), "stasis could not list unsettled A2A tasks");
            return;
        }
    };
    for t in tasks.into_iter().filter(|t| t.pattern_id == PATTERN.0) {
        let Some(guard) = route.claim(&t.record.task_id) else {
            continue;
        };
        tracing::info!(task = %t.record.task_id, state = %t.record.state, turn = %t.turn_id.0, "stasis resumes A2A task");
        match prepare(&route, &t.record, t.run_id, t.turn_id, guard).await {
            Ok(parked) => {
                tokio::spawn(drive(route.clone(), parked));
            }
            Err(code) => {
                tracing::warn!(task = %t.record.task_id, code, "stasis cannot resume A2A task")
            }
        }
    }
}

/// Rebuilds a task from its ledger record under its run's Sigil (replayed at ward).
async fn prepare(
    route: &IntercomRoute,
    record: &ledger::IntercomTaskRecord,
    run: ledger::RunId,
    turn: ledger::TurnId,
    guard: Driving,
) -> Result<Parked, String> {
    let journal = route.journal(run);
    let task = journal
        .resume_recorded(
            record,
            route.deadline(record.created_at),
            route.poll_budget(),
        )
        .await
        .map_err(|e| e.to_string())?;
    let issuer = route.issuer(&turn.0).await;
    Ok(Parked {
        task,
        turn,
        journal,
        issuer,
        guard,
    })
}

/// Drives one task until it settles (then terminates its turn), or until a failure the next
/// start must pick up (a journal or ledger refusal).
pub(crate) async fn drive(route: IntercomRoute, mut p: Parked) {
    let interval = route.poll_budget().interval;
    let mut pause = interval;
    loop {
        let transport = route.transport();
        let receipt = route.receipt();
        let intercom = Intercom {
            client: &transport,
            authority: &p.issuer,
            receipt: &receipt,
            journal: &p.journal,
            clock: Arc::new(SystemClock),
        };
        if p.task.phase().is_terminal() {
            // SUCCEEDED in the ledger with the turn still OPEN and no answer in hand: the task
            // settled just before a restart. One GetTask reads the answer again.
            if p.task.phase() == Phase::Succeeded && p.task.answer().is_none() {
                let task_id = p.task.spec().task_id.clone();
                match intercom.refetch_answer(&mut p.task).await {
                    Ok(true) => {
                        tracing::info!(task = %task_id, "stasis read the settled task's answer again")
                    }
                    Ok(false) => {
                        tracing::warn!(task = %task_id, "the peer did not return the settled task's answer")
                    }
                    Err(e) => {
                        tracing::warn!(task = %task_id, code = %e, "the settled task's answer could not be read again")
                    }
                }
            }
            if let Err(s) = route.settle_turn(&p.turn, &p.task).await {
                tracing::warn!(task = %p.task.spec().task_id, code = s.message(), "stasis could not settle the turn");
            }
            return;
        }
        match p.task.phase() {
            Phase::Submitted | Phase::Polling => match intercom.poll(&mut p.task).await {
                Ok(_) => {}
                Err(IntercomRefusal::PollBudgetExhausted { .. }) => {
                    // One more poll; the driver paces it (no second pause here).
                    p.task.grant_polls(1);
                }
                Err(IntercomRefusal::DecisionRefused { code }) => {
                    // For now (rate, concurrency): ask again after a pause. For good (the
                    // Sigil expired, the run's budget is spent): nothing can be polled any
                    // more, so wait for the deadline, which settles the task EXPIRED.
                    let wait = if p.issuer.refused_for_good() {
                        until(p.task.spec().deadline)
                    } else {
                        pause = next_pause(pause.max(REFUSED_PAUSE));
                        pause.min(until(p.task.spec().deadline))
                    };
                    tracing::info!(task = %p.task.spec().task_id, code, pause_ms = wait.as_millis() as u64, "stasis: ward refused a poll");
                    tokio::time::sleep(wait).await;
                }
                Err(e) => {
                    tracing::warn!(task = %p.task.spec().task_id, code = %e, "stasis stops; the next start resumes");
                    return;
                }
            },
            Phase::Uncertain => {
                match intercom.expire_if_due(&mut p.task).await {
                    Ok(Phase::Uncertain) => {}
                    Ok(_) => continue,
                    Err(e) => {
                        tracing::warn!(task = %p.task.spec().task_id, code = %e, "stasis stops; the next start resumes");
                        return;
                    }
                }
                // Let go until the deadline: never resent from here.
                let Parked {
                    task,
                    turn,
                    journal,
                    guard,
                    ..
                } = p;
                let task_id = task.spec().task_id.clone();
                let pause = until(task.spec().deadline);
                drop(guard);
                tokio::time::sleep(pause).await;
                let Some(guard) = route.claim(&task_id) else {
                    return;
                };
                let record = match route.vault().intercom_task(&task_id).await {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::warn!(task = %task_id, code = e.code(), "stasis lost the task record");
                        return;
                    }
                };
                p = match prepare(&route, &record, journal.run, turn, guard).await {
                    Ok(p) => p,
                    Err(code) => {
                        tracing::warn!(task = %task_id, code, "stasis cannot resume A2A task");
                        return;
                    }
                };
            }
            other => {
                tracing::warn!(task = %p.task.spec().task_id, phase = %other, "stasis cannot drive this phase");
                return;
            }
        }
    }
}

/// The pause after `pause`: doubled, at most [`MAX_POLL_PAUSE`].
fn next_pause(pause: Duration) -> Duration {
    (pause * 2).min(MAX_POLL_PAUSE)
}

/// How long until `deadline` has passed (a little after it, so the deadline check holds).
fn until(deadline: ledger::UnixMillis) -> Duration {
    let left = deadline.0 - SystemClock.now().0;
    Duration::from_millis(u64::try_from(left.max(0)).unwrap_or(0) + 10)
}
