//! The driver of one run: Room mechanics decide what comes next (`Room::next`), core does it
//! and records the fact, one at a time. Every fact is checked by the Room before it is
//! signed and stored, so the ledger only ever holds a history the Room accepts.

use std::sync::Arc;

use reach_digest::Sha256Digest;
use reach_experiment::{Experiment, Setup};
use reach_passage::Evidence;
use reach_passage::quarantine::Answer;
use reach_phylactery as ledger;
use reach_plan::{BindingTerms, StampedPlan};
use reach_proto::core::v1 as pb;
use reach_room::fact::{
    Budget, ChairDecision, Concluded, Decision, Ended, ExperimentFact, FactBody, Opened,
    PassageOutcome, Proposal, ReviewFact, RoomFact, RunId, SignedKind, TurnOpened,
};
use reach_room::record::ExecutionRecord;
use reach_room::room::{Next, Room};
use reach_taskpack::source::Role;
use tokio::sync::broadcast;
use tonic::Status;

use super::journal::{self, VaultJournal};
use super::passage::{self, Outcome};
use super::{Inner, now_ms, record, signer};
use crate::packs::Runnable;

/// One run being driven.
pub struct Run {
    inner: Arc<Inner>,
    id: RunId,
    runnable: Runnable,
    goal: String,
    room: Room,
    facts: Vec<RoomFact>,
    events: broadcast::Sender<pb::TaskEvent>,
    /// The plan admitted in the current round, once compiled.
    plan: Option<StampedPlan>,
    /// Every experiment's record, in order, with its digest.
    records: Vec<(ExecutionRecord, Sha256Digest)>,
    /// HIL requests the operator answered, in order.
    hil_requests: Vec<String>,
    /// The key id ward signed this run's facts with.
    key_id: String,
    /// The experiment a restart interrupted between steps, resumed on its instance.
    resumed: Option<Resumed>,
}

/// An experiment core restarted in the middle of, while it waited between steps (for the
/// operator's answer, or for its next grant): its instance still exists, and the steps
/// before `done.len()` are journaled APPLIED with their records. The next one may be
/// journaled GRANTED (`regrant`): its grant was minted but it was never STARTED, so it never
/// reached workbench, and it is granted afresh (the dead core's token died with it).
struct Resumed {
    n: u32,
    instance_id: String,
    state: ledger::ExperimentState,
    done: Vec<reach_experiment::StepOutcome>,
    regrant: Option<u32>,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Run").field("id", &self.id).finish()
    }
}

/// How [`Run::drive`] left its run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Left {
    /// Concluded or ended.
    Over,
    /// Open: an experiment's instance is not confirmed destroyed (ROLLBACK_PENDING), so
    /// nothing final is published until it is.
    RollbackPending,
    /// Open: the run failed and its end could not be recorded (ward or the ledger away).
    Unsettled,
}

impl Run {
    /// Records the run and its Room's first fact (`Opened`).
    pub async fn open(
        inner: Arc<Inner>,
        runnable: Runnable,
        goal: String,
        events: broadcast::Sender<pb::TaskEvent>,
    ) -> Result<Run, Status> {
        let mut nonce = [0u8; 8];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut nonce)
            .map_err(|_| Status::internal("task/random: the system random source failed"))?;
        let id = RunId::new(format!("run-{}", hex::encode(nonce)))
            .map_err(|e| Status::internal(e.to_string()))?;
        let pack = &runnable.pack;
        let flow = &pack.sources().flow;
        let goal_digest = Sha256Digest::of(goal.as_bytes());
        inner
            .vault
            .run_open(&ledger::NewRun {
                run_id: id.to_string(),
                pack: pack.name().to_owned(),
                pack_generation: runnable.generation,
                goal_digest,
                goal: goal.clone(),
                opened_at: ledger::UnixMillis(now_ms()),
            })
            .await
            .map_err(crate::ports::status)?;
        let opened = RoomFact::opened(
            id.clone(),
            now_ms(),
            Opened {
                pack: pack.name().to_owned(),
                pack_generation: runnable.generation,
                profile_digest: pack.profile_digest(),
                thematic_profile: pack.sources().profile.thematic_profile.clone(),
                goal_digest,
                requester: "operator".into(),
                solver: format!("{}:solver", model_label(&runnable)),
                reviewer: format!("{}:reviewer", model_label(&runnable)),
                hil_mode: runnable.hil,
                budget: Budget {
                    max_rounds: flow.max_rounds,
                    max_experiments: flow.max_experiments,
                    max_wall_s: flow.max_wall_s,
                    passages_per_turn: flow.turn(Role::Solver).passages,
                },
            },
        );
        let mut room = Room::new();
        room.apply(&opened)
            .map_err(|e| Status::internal(format!("{}: {e}", e.code())))?;
        let mut run = Run {
            inner,
            id,
            runnable,
            goal,
            room,
            facts: Vec::new(),
            events,
            plan: None,
            records: Vec::new(),
            hil_requests: Vec::new(),
            key_id: String::new(),
            resumed: None,
        };
        run.store(opened).await?;
        Ok(run)
    }

    /// The open run `row` as core left it, to be driven on after a restart, or `None` when it
    /// cannot be resumed exactly (recovery then settles it and ends it). Resumable is a run
    /// whose goal the ledger kept, under the same binding (generation and HIL mode) as it
    /// opened, within its wall budget, every passage of which is in its Room (none was in
    /// flight or answered unrecorded: resuming never infers one again), and whose Room awaits
    /// a turn, a passage, the Chair or the conclusion with every experiment finished, or awaits
    /// an experiment that is either not journaled yet or journaled RUNNING on a live instance
    /// with its steps APPLIED (with their records) up to the first PENDING one, or up to one
    /// GRANTED but never STARTED (it never reached workbench; it is granted again). Nothing
    /// committed is redone: a plan is compiled again from the admitted candidate and must have
    /// the journaled digest, an experiment is not admitted again, no applied step is sent
    /// again, and the operator's answers given meanwhile stand (ward returns the request
    /// already filed).
    pub async fn resume(
        inner: Arc<Inner>,
        row: &ledger::RunRow,
        facts: Vec<RoomFact>,
        key_id: String,
    ) -> Result<Option<Run>, Status> {
        let Some(goal) = row.goal.clone() else {
            return Ok(None);
        };
        let room =
            Room::replay(&facts).map_err(|e| Status::internal(format!("{}: {e}", e.code())))?;
        if room.over_wall(now_ms()).is_some() {
            return Ok(None);
        }
        let vault = &inner.vault;
        let in_room: std::collections::HashSet<&str> = facts
            .iter()
            .filter_map(|f| match &f.body {
                FactBody::Passage(p) => Some(p.attempt_id.as_str()),
                _ => None,
            })
            .collect();
        if vault
            .passages(&row.run_id)
            .await
            .map_err(crate::ports::status)?
            .iter()
            .any(|p| !in_room.contains(p.attempt_id.as_str()))
        {
            return Ok(None);
        }
        let experiments = vault
            .experiments(&row.run_id)
            .await
            .map_err(crate::ports::status)?;
        let all_finished = experiments.iter().all(|x| x.state.is_terminal());
        let next = room.next();
        // Which experiment the Room awaits, and its journal row if it has one.
        let (n, journaled) = match &next {
            Next::Experiment { n, .. } => (*n, experiments.iter().find(|x| x.n == *n)),
            Next::OpenTurn { .. }
            | Next::SolverPassage { .. }
            | Next::ReviewerPassage { .. }
            | Next::Chair { .. }
            | Next::Conclude
                if all_finished =>
            {
                (u32::MAX, None)
            }
            _ => return Ok(None),
        };
        if journaled.is_none() && !all_finished {
            return Ok(None);
        }
        let runnable = match inner.packs.runnable(&row.pack).await {
            Ok(r) => r,
            // A role not up yet is asked again; a binding no longer runnable is not resumed.
            Err(e) if e.code() == tonic::Code::Unavailable => return Err(e),
            Err(_) => return Ok(None),
        };
        let opened = room
            .opened()
            .ok_or_else(|| Status::internal("room/not-opened"))?;
        if runnable.generation != opened.pack_generation || runnable.hil != opened.hil_mode {
            return Ok(None);
        }
        // The admitted plan, compiled again, when the Room awaits its experiment.
        let plan = match &next {
            Next::Experiment { plan_digest, .. } => {
                let Some(candidate) = room.admitted_candidate() else {
                    return Ok(None);
                };
                let Ok(plan) = reach_plan::compile(
                    &runnable.pack.vocabulary(),
                    &BindingTerms {
                        hil: runnable.hil,
                        generation: runnable.generation,
                    },
                    candidate.as_bytes(),
                ) else {
                    return Ok(None);
                };
                if plan.digest != *plan_digest {
                    return Ok(None);
                }
                Some(plan)
            }
            _ => None,
        };
        let resumed = match (journaled, &plan) {
            (None, _) => None,
            (Some(x), Some(plan)) => match Self::resumable(vault, x, plan).await? {
                Some(r) => Some(r),
                None => return Ok(None),
            },
            (Some(_), None) => return Ok(None),
        };
        // The experiments before, as their signed records say.
        let mut records = Vec::new();
        let mut hil_requests = Vec::new();
        for r in vault
            .records(&row.run_id)
            .await
            .map_err(crate::ports::status)?
        {
            if r.kind != ledger::RecordKind::ExecutionRecord || r.n >= n {
                continue;
            }
            let rec = ExecutionRecord::from_bytes(&r.bytes)
                .ok_or_else(|| Status::internal("room/stored-record"))?;
            hil_requests.extend(rec.steps.iter().filter_map(|s| s.hil_request.clone()));
            records.push((rec, r.digest));
        }
        let (events, _) = broadcast::channel(256);
        Ok(Some(Run {
            inner,
            id: RunId::new(row.run_id.clone()).map_err(|e| Status::internal(e.to_string()))?,
            runnable,
            goal,
            room,
            facts,
            events,
            plan,
            records,
            hil_requests,
            key_id,
            resumed,
        }))
    }

    /// Experiment `x` of `plan` as the journal holds it, when it can go on on its instance:
    /// RUNNING, its steps APPLIED with their records up to the first PENDING one.
    async fn resumable(
        vault: &ledger::Phylactery,
        x: &ledger::ExperimentRow,
        plan: &StampedPlan,
    ) -> Result<Option<Resumed>, Status> {
        let (ledger::ExperimentState::Running, Some(instance_id)) = (x.state, &x.instance_id)
        else {
            return Ok(None);
        };
        if plan.digest != x.plan_digest {
            return Ok(None);
        }
        let steps = vault
            .steps(&x.experiment_id)
            .await
            .map_err(crate::ports::status)?;
        if steps.len() != plan.steps.len() {
            return Ok(None);
        }
        let applied = steps
            .iter()
            .take_while(|s| s.state == ledger::StepState::Applied)
            .count();
        // A step granted but never STARTED never reached workbench: it is granted again.
        let regrant = steps
            .get(applied)
            .filter(|s| s.state == ledger::StepState::Granted)
            .map(|s| s.index);
        if steps[applied + usize::from(regrant.is_some())..]
            .iter()
            .any(|s| s.state != ledger::StepState::Pending)
        {
            return Ok(None);
        }
        let mut done = Vec::with_capacity(applied);
        for (s, step) in steps[..applied].iter().zip(&plan.steps) {
            let record = vault
                .step_record(&x.experiment_id, s.index)
                .await
                .map_err(crate::ports::status)?;
            let (Some(record), Some(record_digest)) = (record, s.record_digest) else {
                return Ok(None);
            };
            if s.step_digest != step.digest {
                return Ok(None);
            }
            done.push(reach_experiment::StepOutcome {
                index: step.index,
                step_digest: step.digest,
                effect_class: reach_experiment::class_text(step.effect_class),
                succeeded: true,
                hil_request: None,
                record_digest,
                record,
            });
        }
        Ok(Some(Resumed {
            n: x.n,
            instance_id: instance_id.clone(),
            state: x.state,
            done,
            regrant,
        }))
    }

    /// The run's id.
    pub fn id(&self) -> &str {
        self.id.as_str()
    }

    /// The pack the run is bound to.
    pub fn pack(&self) -> &str {
        self.runnable.pack.name()
    }

    /// How many runs its binding lets run at once.
    pub fn max_concurrent_runs(&self) -> u32 {
        self.runnable.max_concurrent_runs
    }

    /// Drives the Room to its end; a failure to record ends the run with its code. How it
    /// left the run: over, or open with an instance whose destruction is not confirmed.
    pub async fn drive(mut self) -> Left {
        loop {
            match self.step().await {
                Ok(true) => continue,
                Ok(false) => return Left::Over,
                Err(s) => {
                    let code = reach_experiment::refusal_code(&s);
                    if code == journal::DESTROY_UNCONFIRMED {
                        // An instance may still exist: nothing final is published, and the run
                        // stays open until recovery has the broker confirm the destruction.
                        tracing::error!(
                            run = self.id.as_str(),
                            code,
                            "run left open: rollback pending"
                        );
                        return Left::RollbackPending;
                    }
                    tracing::warn!(run = self.id.as_str(), code, "run ended by a failure");
                    return match self.end(&code, s.message()).await {
                        Ok(()) => Left::Over,
                        Err(e) => {
                            tracing::error!(
                                run = self.id.as_str(),
                                error = e.message(),
                                "run's end not recorded: left to recovery"
                            );
                            Left::Unsettled
                        }
                    };
                }
            }
        }
    }

    /// One thing Room mechanics demand; `false` once the run has ended.
    async fn step(&mut self) -> Result<bool, Status> {
        let next = match self.room.over_wall(now_ms()) {
            Some(end) => end,
            None => self.room.next(),
        };
        match next {
            Next::OpenTurn { round, role } => {
                self.append(FactBody::TurnOpened(TurnOpened { round, role }))
                    .await?;
            }
            Next::SolverPassage { round, evidence } => {
                let turn = self.runnable.pack.sources().flow.turn(Role::Solver);
                let kinds = reach_room::room::admitted_by(&evidence, turn);
                let inputs = self.evidence(&kinds)?;
                self.passage(round, Role::Solver, None, &inputs).await?;
            }
            Next::ReviewerPassage { round, .. } => {
                let candidate = self
                    .room
                    .proposal()
                    .map(|p| p.candidate.as_bytes().to_vec())
                    .ok_or_else(|| Status::internal("room/no-candidate"))?;
                self.passage(round, Role::Reviewer, Some(&candidate), &[])
                    .await?;
            }
            Next::Chair { round, .. } => self.chair(round).await?,
            Next::Experiment { round, n, .. } => self.experiment(round, n).await?,
            Next::Conclude => self.conclude().await?,
            Next::End { code, reason } => {
                self.end(&code, &reason).await?;
                return Ok(false);
            }
            Next::Done(_) => return Ok(false),
            // A proposal or review owed after its passage is appended with the passage
            // itself; meeting one here means the run cannot go on as recorded.
            other => {
                return Err(Status::internal(format!("room/unexpected-next: {other:?}")));
            }
        }
        Ok(true)
    }

    /// The evidence inputs the Room names for a Solver passage.
    fn evidence(
        &self,
        kinds: &[reach_passage::evidence::EvidenceKind],
    ) -> Result<Vec<Evidence>, Status> {
        use reach_passage::evidence::EvidenceKind as K;
        let mut out = Vec::new();
        if kinds.contains(&K::RevisionRequest) {
            let (round, reason) = match self.room.decision() {
                Some(ChairDecision {
                    round,
                    decision: Decision::RequestRevision { reason },
                    ..
                }) => (*round, reason.as_str()),
                _ => return Err(Status::internal("room/no-revision-request")),
            };
            out.push(reach_room::record::revision_request_evidence(round, reason));
        }
        if kinds.contains(&K::Review) {
            let review = self
                .room
                .review()
                .ok_or_else(|| Status::internal("room/no-review"))?;
            out.push(reach_room::record::review_evidence(&review.review));
        }
        if kinds.contains(&K::ExecutionRecord) {
            let (record, _) = self
                .records
                .last()
                .ok_or_else(|| Status::internal("room/no-execution-record"))?;
            out.extend(record.evidence());
        }
        Ok(out)
    }

    async fn passage(
        &mut self,
        round: u32,
        role: Role,
        candidate: Option<&[u8]>,
        evidence: &[Evidence],
    ) -> Result<(), Status> {
        let p = passage::run(
            &self.inner,
            self.id.as_str(),
            &self.runnable.pack,
            round,
            role,
            &self.goal,
            candidate,
            evidence,
        )
        .await;
        let outcome = match &p.outcome {
            Outcome::Answered(a) => PassageOutcome::Answered {
                answer_digest: Sha256Digest::of(a.bytes()),
            },
            Outcome::Refused(code) => PassageOutcome::Refused { code: code.clone() },
        };
        self.append(FactBody::Passage(reach_room::fact::Passage {
            round,
            role,
            payload_digest: p.payload_digest,
            evidence_digest: p.evidence_digest,
            decision_id: p.decision_id.clone(),
            attempt_id: p.attempt_id.clone(),
            outcome,
        }))
        .await?;
        match p.outcome {
            Outcome::Answered(Answer::Candidate { bytes, .. }) => {
                let text = String::from_utf8(bytes).map_err(|_| Status::internal("utf-8"))?;
                self.append(FactBody::Proposal(Proposal {
                    round,
                    candidate_digest: Sha256Digest::of(text.as_bytes()),
                    candidate: text,
                }))
                .await?;
            }
            Outcome::Answered(Answer::Review { bytes, review }) => {
                let text = String::from_utf8(bytes).map_err(|_| Status::internal("utf-8"))?;
                let candidate_digest = Sha256Digest::of(candidate.unwrap_or_default());
                self.append(FactBody::Review(ReviewFact {
                    round,
                    candidate_digest,
                    review_digest: Sha256Digest::of(text.as_bytes()),
                    verdict: review.verdict.into(),
                    review: text,
                }))
                .await?;
            }
            Outcome::Refused(_) => {}
        }
        Ok(())
    }

    /// The Chair: the exact candidate compiled, and the decision from the review of it.
    async fn chair(&mut self, round: u32) -> Result<(), Status> {
        let candidate = self
            .room
            .proposal()
            .ok_or_else(|| Status::internal("room/no-candidate"))?
            .candidate
            .clone();
        let candidate_digest = Sha256Digest::of(candidate.as_bytes());
        let recorded = self
            .room
            .review()
            .ok_or_else(|| Status::internal("room/no-review"))?;
        let review_of = recorded.candidate_digest;
        let review = reach_plan::Review::parse(recorded.review.as_bytes())
            .map_err(|e| Status::internal(format!("room/stored-review: {e}")))?;
        let compiled = reach_plan::compile(
            &self.runnable.pack.vocabulary(),
            &BindingTerms {
                hil: self.runnable.hil,
                generation: self.runnable.generation,
            },
            candidate.as_bytes(),
        );
        let decision = reach_room::chair::decide(
            candidate_digest,
            &review,
            review_of,
            compiled.as_ref(),
            self.room.rounds_left(),
        );
        self.plan = match (&decision, compiled) {
            (Decision::Admit { .. }, Ok(plan)) => Some(plan),
            _ => None,
        };
        self.append(FactBody::ChairDecision(ChairDecision {
            round,
            candidate_digest,
            decision,
        }))
        .await
    }

    /// The coordinator step: the admitted plan on a fresh instance, its record signed.
    async fn experiment(&mut self, round: u32, n: u32) -> Result<(), Status> {
        let plan = self
            .plan
            .take()
            .ok_or_else(|| Status::internal("room/no-admitted-plan"))?;
        self.emit(
            "experiment",
            format!("experiment {n}: plan {} on a fresh instance", plan.digest),
            "",
        );
        let setup = Setup {
            experiment_id: format!("{}-e{n}", self.id.as_str()),
            pack_name: self.runnable.pack.name().to_owned(),
            pack_archive: self.runnable.archive.clone(),
            prepared_digest: self.runnable.prepared_digest.clone(),
        };
        let mut coordinator = Experiment::new(
            self.inner.ward_channel.clone(),
            self.inner.workbench.clone(),
        );
        let mut progress = Progress {
            events: self.events.clone(),
            run: self.id.to_string(),
            hil: Vec::new(),
        };
        if let Some(r) = self.resumed.take().filter(|r| r.n == n) {
            self.emit(
                "experiment",
                format!(
                    "experiment {n} resumed after a restart on instance {}, at step {}",
                    r.instance_id,
                    r.done.len()
                ),
                "",
            );
            let mut marks = VaultJournal::resumed(
                self.inner.vault.clone(),
                setup.experiment_id.clone(),
                r.state,
                r.regrant,
            );
            let execution = coordinator
                .resume(
                    &setup,
                    &plan,
                    &r.instance_id,
                    r.done,
                    &mut progress,
                    &mut marks,
                )
                .await;
            return self
                .recorded(round, n, &setup, &plan, execution, &progress)
                .await;
        }
        // Journaled before anything is created: a crash from here on is settled by recovery.
        self.inner
            .vault
            .experiment_open(&ledger::NewExperiment {
                experiment_id: setup.experiment_id.clone(),
                run_id: self.id.to_string(),
                n,
                plan_digest: plan.digest,
                steps: plan
                    .steps
                    .iter()
                    .map(|s| ledger::NewStep {
                        index: s.index as u32,
                        digest: s.digest,
                        kind: s.action.kind().into(),
                    })
                    .collect(),
            })
            .await
            .map_err(crate::ports::status)?;
        let mut marks = VaultJournal::new(self.inner.vault.clone(), setup.experiment_id.clone());
        let execution = coordinator
            .run(&setup, &plan, &mut progress, &mut marks)
            .await;
        self.recorded(round, n, &setup, &plan, execution, &progress)
            .await
    }

    /// The experiment's end: its record signed and stored once the instance is confirmed
    /// destroyed, the journal settled, and the Room's Experiment fact.
    async fn recorded(
        &mut self,
        round: u32,
        n: u32,
        setup: &Setup,
        plan: &StampedPlan,
        execution: reach_experiment::Execution,
        progress: &Progress,
    ) -> Result<(), Status> {
        // A resumed experiment's steps applied before the restart name their requests first.
        let before: Vec<String> = execution
            .steps
            .iter()
            .filter_map(|o| o.hil_request.clone())
            .filter(|id| !progress.hil.iter().any(|(_, h)| h == id))
            .collect();
        self.hil_requests.extend(before);
        self.hil_requests
            .extend(progress.hil.iter().map(|(_, id)| id.clone()));
        let forbidden: Vec<&str> = self.inner.forbidden.iter().map(String::as_str).collect();
        let rec =
            record::execution_record(&self.id, n, plan, &execution, &progress.hil, &forbidden);
        let passed = rec.verifier.as_ref().is_some_and(|v| v.passed);
        let destroyed = execution
            .destruction
            .as_ref()
            .is_some_and(|d| d.confirmed());
        if execution.instance_id.is_some() && !destroyed {
            // The instance may still exist: nothing is published for it and the run stays
            // open (ROLLBACK_PENDING) until recovery has the broker confirm its destruction.
            journal::settle(&self.inner.vault, &setup.experiment_id, &execution, passed)
                .await
                .map_err(crate::ports::status)?;
            self.emit(
                "rollback-pending",
                format!(
                    "instance destruction not confirmed: {}",
                    execution.destroy_error.clone().unwrap_or_default()
                ),
                "",
            );
            return Err(Status::unavailable(format!(
                "{}: experiment {n}'s instance is not confirmed destroyed",
                journal::DESTROY_UNCONFIRMED
            )));
        }
        let bytes = rec.canonical_bytes();
        let digest = Sha256Digest::of(&bytes);
        let signed = signer::sign(&self.inner.ward, SignedKind::ExecutionRecord, &bytes).await?;
        self.inner
            .vault
            .record_put(&ledger::StoredRecord {
                run_id: self.id.to_string(),
                kind: ledger::RecordKind::ExecutionRecord,
                n,
                digest,
                bytes,
                signature: signed.signature,
                key_id: signed.key_id,
                at: ledger::UnixMillis(now_ms()),
            })
            .await
            .map_err(crate::ports::status)?;
        journal::settle(&self.inner.vault, &setup.experiment_id, &execution, passed)
            .await
            .map_err(crate::ports::status)?;
        self.emit(
            "destroyed",
            match &execution.destruction {
                Some(d) if d.confirmed() => {
                    format!("instance {} destroyed (confirmed)", d.instance_id)
                }
                _ => format!(
                    "instance destruction not confirmed: {}",
                    execution.destroy_error.clone().unwrap_or_default()
                ),
            },
            "",
        );
        self.emit(
            "verifier",
            match &rec.verifier {
                Some(v) if v.passed => "verifier: every check passed".to_owned(),
                // Each failed check with its detail (the first unmet expectation, bounded by
                // the record), on one line: a failure explains itself where it is seen.
                Some(v) => format!(
                    "verifier failed: {}",
                    v.checks
                        .iter()
                        .filter(|c| !c.passed)
                        .map(|c| match c.detail.trim() {
                            "" => c.name.clone(),
                            d => format!("{} ({})", c.name, d.replace(['\n', '\r'], " ")),
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None => "verifier did not run".to_owned(),
            },
            "",
        );
        self.records.push((rec, digest));
        self.append(FactBody::Experiment(ExperimentFact {
            round,
            n,
            plan_digest: plan.digest,
            record_digest: digest,
            verifier_passed: passed,
            end: record::end_text(&execution.end),
        }))
        .await
    }

    /// The recipe: the admitted patch, its diagnosis and the verifier's result, signed.
    async fn conclude(&mut self) -> Result<(), Status> {
        let (rec, rec_digest) = self
            .records
            .last()
            .ok_or_else(|| Status::internal("room/no-execution-record"))?;
        let candidate = self
            .room
            .admitted_candidate()
            .ok_or_else(|| Status::internal("room/no-admitted-candidate"))?
            .to_owned();
        let recipe = record::recipe(
            &self.id,
            &self.runnable,
            &candidate,
            rec,
            *rec_digest,
            &self.facts,
            &self.records,
            &self.hil_requests,
            &self.inner.settings,
            &self.key_id,
        )?;
        let bytes = recipe.canonical_bytes();
        let forbidden: Vec<&str> = self.inner.forbidden.iter().map(String::as_str).collect();
        reach_room::recipe::retention_check(&bytes, &forbidden)
            .map_err(|e| Status::internal(format!("{}: {e}", e.code())))?;
        let digest = Sha256Digest::of(&bytes);
        let signed = signer::sign(&self.inner.ward, SignedKind::Recipe, &bytes).await?;
        self.inner
            .vault
            .record_put(&ledger::StoredRecord {
                run_id: self.id.to_string(),
                kind: ledger::RecordKind::Recipe,
                n: 0,
                digest,
                bytes,
                signature: signed.signature,
                key_id: signed.key_id,
                at: ledger::UnixMillis(now_ms()),
            })
            .await
            .map_err(crate::ports::status)?;
        self.emit("recipe", format!("recipe {digest} signed"), "");
        self.append(FactBody::Concluded(Concluded {
            recipe_digest: digest,
        }))
        .await?;
        self.inner
            .vault
            .run_conclude(self.id.as_str(), ledger::UnixMillis(now_ms()))
            .await
            .map_err(crate::ports::status)?;
        self.ended("concluded");
        Ok(())
    }

    /// Ends the Room with `code` (a fact when the Room still takes one) and the run's row.
    async fn end(&mut self, code: &str, reason: &str) -> Result<(), Status> {
        if !matches!(self.room.next(), Next::Done(_)) {
            self.append(FactBody::Ended(Ended {
                code: code.to_owned(),
                reason: reason.chars().take(300).collect(),
            }))
            .await?;
        }
        let r = self
            .inner
            .vault
            .run_end(self.id.as_str(), code, ledger::UnixMillis(now_ms()))
            .await;
        self.ended(code);
        r.map(|_| ()).map_err(crate::ports::status)
    }

    /// Checks `body` against the Room, then has ward sign it and stores it.
    async fn append(&mut self, body: FactBody) -> Result<(), Status> {
        let fact = self
            .room
            .draft(now_ms(), body)
            .ok_or_else(|| Status::internal("room/not-open"))?;
        self.room
            .apply(&fact)
            .map_err(|e| Status::internal(format!("{}: {e}", e.code())))?;
        self.store(fact).await
    }

    async fn store(&mut self, fact: RoomFact) -> Result<(), Status> {
        self.key_id = super::store_fact(&self.inner, self.id.as_str(), &fact).await?;
        let (kind, text) = describe(&fact.body);
        self.emit(kind, text, "");
        self.facts.push(fact);
        Ok(())
    }

    fn emit(&self, kind: &str, text: String, hil: &str) {
        let _ = self.events.send(pb::TaskEvent {
            run_id: self.id.to_string(),
            kind: kind.into(),
            text,
            hil_request_id: hil.into(),
            code: String::new(),
        });
    }

    fn ended(&self, code: &str) {
        let _ = self.events.send(pb::TaskEvent {
            run_id: self.id.to_string(),
            kind: "ended".into(),
            text: format!("run {} ended: {code}", self.id.as_str()),
            hil_request_id: String::new(),
            code: code.into(),
        });
    }
}

/// The experiment's progress as the run's events.
struct Progress {
    events: broadcast::Sender<pb::TaskEvent>,
    run: String,
    /// Each request filed: its step index and id.
    hil: Vec<(u32, String)>,
}

impl reach_experiment::Progress for Progress {
    fn hil_filed(&mut self, view: &reach_proto::ward::v1::HilRequestView) {
        self.hil.push((view.step_index, view.id.clone()));
        let _ = self.events.send(pb::TaskEvent {
            run_id: self.run.clone(),
            kind: "hil-waiting".into(),
            text: format!(
                "HIL request {} waits: step {} ({}); answer with `reach hil approve {}` or `reach hil deny {} --reason …`",
                view.id, view.step_index, view.effect_class, view.id, view.id
            ),
            hil_request_id: view.id.clone(),
            code: String::new(),
        });
    }

    fn step_started(&mut self, index: usize) {
        let _ = self.events.send(pb::TaskEvent {
            run_id: self.run.clone(),
            kind: "step-started".into(),
            text: format!("step {index} started"),
            hil_request_id: String::new(),
            code: String::new(),
        });
    }

    fn step_done(&mut self, o: &reach_experiment::StepOutcome) {
        let _ = self.events.send(pb::TaskEvent {
            run_id: self.run.clone(),
            kind: "step".into(),
            text: format!(
                "step {} ({}) {}",
                o.index,
                o.effect_class,
                if o.succeeded { "ok" } else { "failed" }
            ),
            hil_request_id: String::new(),
            code: String::new(),
        });
    }

    fn step_refused(&mut self, index: usize, message: &str) {
        let _ = self.events.send(pb::TaskEvent {
            run_id: self.run.clone(),
            kind: "step".into(),
            // Bounded: the detail names observations, never a secret, but can be long.
            text: format!(
                "step {index} refused: {}",
                message.chars().take(1_000).collect::<String>()
            ),
            hil_request_id: String::new(),
            code: String::new(),
        });
    }
}

/// The event kind and line for a fact.
fn describe(body: &FactBody) -> (&'static str, String) {
    match body {
        FactBody::Opened(o) => (
            "opened",
            format!("Room opened under {} (HIL {:?})", o.pack, o.hil_mode),
        ),
        FactBody::TurnOpened(t) => (
            "turn",
            format!("round {}: the {} speaks", t.round, t.role.name()),
        ),
        FactBody::Passage(p) => (
            "passage",
            match &p.outcome {
                PassageOutcome::Answered { answer_digest } => {
                    format!("{} answered ({answer_digest})", p.role.name())
                }
                PassageOutcome::Refused { code } => {
                    format!("{} passage refused: {code}", p.role.name())
                }
            },
        ),
        FactBody::Proposal(p) => ("proposal", format!("candidate {}", p.candidate_digest)),
        FactBody::Review(r) => ("review", format!("review: {:?}", r.verdict)),
        FactBody::ChairDecision(d) => (
            "decision",
            match &d.decision {
                Decision::Admit { plan_digest } => format!("Chair admits plan {plan_digest}"),
                Decision::RequestRevision { reason } => {
                    format!("Chair requests a revision: {reason}")
                }
                Decision::Refuse { code } => format!("Chair refuses: {code}"),
            },
        ),
        FactBody::Experiment(e) => (
            "experiment",
            format!(
                "experiment {} recorded (verifier {})",
                e.n,
                if e.verifier_passed {
                    "passed"
                } else {
                    "failed"
                }
            ),
        ),
        FactBody::Concluded(c) => ("recipe", format!("concluded: recipe {}", c.recipe_digest)),
        FactBody::Ended(e) => ("ended-fact", format!("Room ended: {}", e.code)),
    }
}

/// Who answers a role: the binding's model runtime (its name, or the flow's default).
fn model_label(r: &Runnable) -> String {
    if r.model.is_empty() {
        "model-runtime".into()
    } else {
        r.model.clone()
    }
}
