//! The coordinator step of a run (seed 000, Flow steps 5–9): one stamped plan executed on one
//! fresh instance, under core's certificate.
//!
//! An [`Experiment`] asks workbench for an instance restored from the pack's pinned prepared
//! system, then takes the plan's steps strictly in order. A step that needs the operator's
//! answer gets a HIL request filed with ward ([`filing`]: the step, its class and where the
//! class came from, the diff, command or unit, the rollback) and waits for the answer; then ward
//! mints a grant for exactly that step, and workbench redeems it and executes the step. The
//! first refusal, denial, expiry or failed step ends the experiment: nothing after it runs.
//! Whatever the end, the instance is destroyed and the broker's confirmation is kept in the
//! [`Execution`].
//!
//! Every effect is journaled first ([`Journal`]): the instance once it exists, each grant, and
//! each step as STARTED before it is sent to workbench, then its outcome. A step whose reply
//! is lost (the transport failed, or workbench lost its broker mid-step) may have reached the
//! guest: it ends the experiment [`End::Unknown`] and is never sent again.
//!
//! A HIL wait outlives a ward restart: the request is durable at ward and filing the same step
//! again returns it, so an unreachable ward is asked again for a while ([`WARD_OUTAGE`]).
//!
//! Invariants: nothing here answers a HIL request or turns a refusal into a retry; each step's
//! grant is minted right before its execution and used once; the end's code is the one ward or
//! workbench gave (`hil/denied`, `local-binding/paused`, `package/generation-stale`, …); no step
//! is sent unless its STARTED mark was committed.

use std::time::{Duration, Instant};

use reach_digest::Sha256Digest;
use reach_plan::{Action, EffectClass, StampedPlan, StampedStep};
use reach_proto::ward::v1 as ward_pb;
use reach_proto::ward::v1::ward_client::WardClient;
use reach_proto::workbench::v1 as pb;
use reach_proto::workbench::v1::workbench_client::WorkbenchClient;
use tonic::transport::Channel;

/// How often a pending HIL request is read again while the operator decides.
const HIL_POLL: Duration = Duration::from_millis(250);

/// Where an experiment runs: its id, the pack (name and archive bytes, which workbench verifies
/// itself) and the prepared system it is restored from.
#[derive(Debug, Clone)]
pub struct Setup {
    pub experiment_id: String,
    pub pack_name: String,
    pub pack_archive: Vec<u8>,
    /// `sha256:<hex>` of the pinned prepared system.
    pub prepared_digest: String,
}

/// One step as ward and workbench know it: the step of `plan` on `instance`.
#[derive(Debug, Clone, Copy)]
pub struct StepRef<'a> {
    pub experiment_id: &'a str,
    pub instance_id: &'a str,
    pub pack_name: &'a str,
    pub plan: &'a StampedPlan,
    pub step: &'a StampedStep,
}

/// `observation` or `contained-mutation`, as the ports spell a class.
pub fn class_text(c: EffectClass) -> &'static str {
    match c {
        EffectClass::Observation => "observation",
        EffectClass::ContainedMutation => "contained-mutation",
    }
}

/// The HIL request core files for a step: everything a careful operator needs, nothing secret.
pub fn filing(s: StepRef<'_>) -> ward_pb::FileHilRequestRequest {
    let (action, target, argv, diff) = match &s.step.action {
        Action::Run { profile, args } => ("run", profile.clone(), args.clone(), String::new()),
        Action::Patch { target, diff, .. } => (
            "patch",
            target.as_str().to_owned(),
            Vec::new(),
            diff.clone(),
        ),
        Action::Restart { service } => ("restart", service.clone(), Vec::new(), String::new()),
        Action::Verify {} => ("verify", String::new(), Vec::new(), String::new()),
    };
    ward_pb::FileHilRequestRequest {
        experiment_id: s.experiment_id.to_owned(),
        instance_id: s.instance_id.to_owned(),
        plan_digest: s.plan.digest.to_string(),
        step_index: s.step.index as u32,
        step_digest: s.step.digest.to_string(),
        pack_name: s.pack_name.to_owned(),
        pack_generation: s.plan.generation,
        effect_class: class_text(s.step.effect_class).into(),
        class_source: s.step.source.clone(),
        action: action.into(),
        target,
        argv,
        diff,
        rollback: s.step.rollback.clone(),
        ttl_ms: 0,
    }
}

/// The grant core asks ward to mint for a step.
pub fn grant_request(s: StepRef<'_>) -> ward_pb::MintStepGrantRequest {
    ward_pb::MintStepGrantRequest {
        experiment_id: s.experiment_id.to_owned(),
        instance_id: s.instance_id.to_owned(),
        plan_digest: s.plan.digest.to_string(),
        step_index: s.step.index as u32,
        step_digest: s.step.digest.to_string(),
        pack_name: s.pack_name.to_owned(),
        pack_generation: s.plan.generation,
        effect_class: class_text(s.step.effect_class).into(),
        ttl_ms: 0,
        profile_digest: s.plan.pack.profile_digest.to_string(),
        hil_required: s.step.hil_required,
    }
}

/// The execution request for a step under `grant`: the step's own bytes, whose digest
/// workbench recomputes.
pub fn execute_request(s: StepRef<'_>, grant: String) -> pb::ExecuteStepRequest {
    pb::ExecuteStepRequest {
        experiment_id: s.experiment_id.to_owned(),
        instance_id: s.instance_id.to_owned(),
        plan_digest: s.plan.digest.to_string(),
        step: serde_json::to_vec(s.step).expect("a stamped step serializes"),
        grant,
    }
}

/// The stable code a refusing port put first in its message (`hil/denied: …`).
pub fn refusal_code(s: &tonic::Status) -> String {
    s.message()
        .split(':')
        .next()
        .filter(|c| c.contains('/'))
        .map(str::to_owned)
        .unwrap_or_else(|| format!("port/{:?}", s.code()).to_lowercase())
}

/// One step that ran: what workbench answered.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StepOutcome {
    pub index: usize,
    pub step_digest: Sha256Digest,
    pub effect_class: &'static str,
    pub succeeded: bool,
    /// The HIL request the operator approved for it, if it asked.
    pub hil_request: Option<String>,
    /// Digest of workbench's step record (the record itself stays with the run's evidence).
    pub record_digest: Sha256Digest,
    #[serde(skip)]
    pub record: Vec<u8>,
}

/// What the experiment journals as it goes. Each mark returns once it is durable; an error
/// stops the experiment before its next effect.
pub trait Journal: Send {
    fn mark<'a>(
        &'a mut self,
        mark: Mark<'a>,
    ) -> impl std::future::Future<Output = Result<(), String>> + Send + 'a;
}

/// One journaled moment of an experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark<'a> {
    /// The instance exists.
    Created { instance_id: &'a str },
    /// Ward minted step `index`'s grant.
    Granted { index: usize },
    /// Step `index` is about to be sent (`verify`: it is the plan's verifier).
    Started { index: usize, verify: bool },
    /// Workbench answered: the step ran, and its record (`record_digest` is its digest).
    Ran {
        index: usize,
        succeeded: bool,
        record_digest: Sha256Digest,
        record: &'a [u8],
    },
    /// Workbench refused the step with `code` before any effect.
    Refused { index: usize, code: &'a str },
    /// The step's outcome was lost (`code` says how): it may have reached the guest.
    Unknown { index: usize, code: &'a str },
}

/// Journals nothing (a caller without a ledger: benches and tools).
#[derive(Debug, Default)]
pub struct Unjournaled;
impl Journal for Unjournaled {
    fn mark<'a>(
        &'a mut self,
        _mark: Mark<'a>,
    ) -> impl std::future::Future<Output = Result<(), String>> + Send + 'a {
        std::future::ready(Ok(()))
    }
}

/// Whether a step refused with `code` after it was sent may still have had an effect: the
/// transport failed (`port/…`: the reply is lost) or workbench lost its broker mid-step.
/// Every other code is a refusal before any effect (workbench writes nothing it refuses).
pub fn outcome_lost(code: &str) -> bool {
    code.starts_with("port/") || code == "workbench/broker-unavailable"
}

/// How many times [`Experiment::destroy`] asks before it leaves the instance to recovery.
pub const DESTROY_TRIES: u32 = 3;
/// How long it waits between asks.
pub const DESTROY_RETRY: Duration = Duration::from_secs(1);

/// How an experiment ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "end", rename_all = "kebab-case")]
pub enum End {
    /// Every step ran and succeeded (the plan's last step is the verifier).
    Completed,
    /// A step ran and did not succeed; nothing after it ran.
    StepFailed { index: usize },
    /// A step was refused before it ran (`code` from ward or workbench); nothing after it ran.
    Refused { index: usize, code: String },
    /// No instance could be created.
    NotCreated { code: String },
    /// Step `index` was sent and its outcome is not known (`code`: how it was lost); nothing
    /// after it ran, and it is never sent again.
    Unknown { index: usize, code: String },
}

/// The broker's confirmation that the instance is gone.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Destruction {
    pub instance_id: String,
    pub outcome: String,
    pub process_gone: bool,
    pub overlay_deleted: bool,
    pub sockets_deleted: bool,
    pub at_unix_ms: i64,
}

impl Destruction {
    /// Destroyed (or reaped by the broker's start-up recovery), with every part of the
    /// confirmation.
    pub fn confirmed(&self) -> bool {
        matches!(self.outcome.as_str(), "destroyed" | "reaped")
            && self.process_gone
            && self.overlay_deleted
            && self.sockets_deleted
    }
}

/// Bounded timings of one experiment.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Timings {
    pub create_ms: u64,
    /// Waiting for the operator's answers (the human part).
    pub hil_wait_ms: u64,
    pub steps_ms: u64,
    pub destroy_ms: u64,
}

/// What one experiment did, for the run's ExecutionRecord.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Execution {
    pub experiment_id: String,
    pub plan_digest: Sha256Digest,
    pub instance_id: Option<String>,
    pub steps: Vec<StepOutcome>,
    pub end: End,
    /// `None` only when no instance was created, or its destruction was not confirmed (then
    /// `destroy_error` says why).
    pub destruction: Option<Destruction>,
    pub destroy_error: Option<String>,
    pub timings: Timings,
}

/// What the experiment reports as it goes (a terminal's progress, a test's hook).
pub trait Progress: Send {
    /// A HIL request was filed and waits for the operator.
    fn hil_filed(&mut self, _view: &ward_pb::HilRequestView) {}
    /// Step `index` is journaled STARTED and about to be sent.
    fn step_started(&mut self, _index: usize) {}
    /// A step ran.
    fn step_done(&mut self, _outcome: &StepOutcome) {}
    /// Step `index` was refused or its outcome lost; `message` is the port's whole refusal
    /// (its code, then the owner's detail: which check, which observation differed).
    fn step_refused(&mut self, _index: usize, _message: &str) {}
    /// The experiment ended with `end`; `instance_id` is destroyed next.
    fn ending(&mut self, _instance_id: &str, _end: &End) {}
}

/// Reports nothing.
#[derive(Debug, Default)]
pub struct Quiet;
impl Progress for Quiet {}

/// Core's clients for an experiment.
#[derive(Debug, Clone)]
pub struct Experiment {
    pub ward: WardClient<Channel>,
    pub workbench: WorkbenchClient<Channel>,
}

impl Experiment {
    pub fn new(ward: Channel, workbench: Channel) -> Self {
        Self {
            ward: WardClient::new(ward),
            workbench: WorkbenchClient::new(workbench).max_decoding_message_size(8 << 20),
        }
    }

    /// Runs `plan` on a fresh instance, then destroys it (see the module docs).
    pub async fn run<J: Journal>(
        &mut self,
        setup: &Setup,
        plan: &StampedPlan,
        progress: &mut dyn Progress,
        journal: &mut J,
    ) -> Execution {
        let mut timings = Timings::default();
        let started = Instant::now();
        let created = self
            .workbench
            .create_experiment(pb::CreateExperimentRequest {
                experiment_id: setup.experiment_id.clone(),
                pack_archive: setup.pack_archive.clone(),
                pack_generation: plan.generation,
                variant: String::new(),
                image_digest: setup.prepared_digest.clone(),
                network: "none".into(),
            })
            .await;
        timings.create_ms = elapsed_ms(started);
        let not_created = |code: String, timings: Timings| Execution {
            experiment_id: setup.experiment_id.clone(),
            plan_digest: plan.digest,
            instance_id: None,
            steps: Vec::new(),
            end: End::NotCreated { code },
            destruction: None,
            destroy_error: None,
            timings,
        };
        let instance = match created {
            Ok(r) => r.into_inner().instance_id,
            Err(e) => return not_created(refusal_code(&e), timings),
        };
        let mut steps = Vec::new();
        let end = match journal
            .mark(Mark::Created {
                instance_id: &instance,
            })
            .await
        {
            Ok(()) => {
                self.steps(
                    setup,
                    plan,
                    &instance,
                    &mut steps,
                    &mut timings,
                    progress,
                    journal,
                )
                .await
            }
            Err(code) => End::Refused { index: 0, code },
        };
        self.ended(setup, plan, &instance, steps, end, timings, progress)
            .await
    }

    /// The end of an experiment that has an instance: reported, the instance destroyed (its
    /// confirmation or the last error kept), and the whole `Execution`.
    #[allow(clippy::too_many_arguments)]
    async fn ended(
        &mut self,
        setup: &Setup,
        plan: &StampedPlan,
        instance: &str,
        steps: Vec<StepOutcome>,
        end: End,
        mut timings: Timings,
        progress: &mut dyn Progress,
    ) -> Execution {
        progress.ending(instance, &end);
        let started = Instant::now();
        let (destruction, destroy_error) = self.destroy(&setup.experiment_id, instance).await;
        timings.destroy_ms = elapsed_ms(started);
        Execution {
            experiment_id: setup.experiment_id.clone(),
            plan_digest: plan.digest,
            instance_id: Some(instance.to_owned()),
            steps,
            end,
            destruction,
            destroy_error,
            timings,
        }
    }

    /// Resumes `plan` on its `instance` after core restarted while the experiment waited
    /// between steps: `done` are the steps the journal holds APPLIED, in order from the first,
    /// with their records, and none of them is sent again. Each of them that needed the
    /// operator's answer is filed again, which ward answers with the request already filed
    /// (so the record names it); the next step's filing likewise returns the request filed
    /// before the restart, with any answer the operator gave meanwhile. Then as
    /// [`Experiment::run`]: the remaining steps, the end, the destruction.
    pub async fn resume<J: Journal>(
        &mut self,
        setup: &Setup,
        plan: &StampedPlan,
        instance: &str,
        mut done: Vec<StepOutcome>,
        progress: &mut dyn Progress,
        journal: &mut J,
    ) -> Execution {
        let mut timings = Timings::default();
        let mut end = None;
        for o in &mut done {
            let Some(step) = plan.steps.get(o.index).filter(|s| s.hil_required) else {
                continue;
            };
            let s = StepRef {
                experiment_id: &setup.experiment_id,
                instance_id: instance,
                pack_name: &setup.pack_name,
                plan,
                step,
            };
            let request = filing(s);
            let filed = ward_call(&self.ward, |mut ward| {
                let request = request.clone();
                async move { ward.file_hil_request(request).await }
            })
            .await;
            match filed {
                Ok(v) if v.state == "approved" => o.hil_request = Some(v.id),
                Ok(v) => {
                    // An applied step whose request is not approved: the journal and ward
                    // disagree, and nothing more may run.
                    end = Some(End::Refused {
                        index: o.index,
                        code: format!("hil/{}", v.state),
                    });
                    break;
                }
                Err(e) => {
                    end = Some(End::Refused {
                        index: o.index,
                        code: refusal_code(&e),
                    });
                    break;
                }
            }
        }
        let in_order = done.iter().enumerate().all(|(i, o)| o.index == i);
        let end = match end {
            Some(end) => end,
            None if !in_order => End::Refused {
                index: done.len(),
                code: "journal/resume-out-of-order".into(),
            },
            None => {
                self.steps(
                    setup,
                    plan,
                    instance,
                    &mut done,
                    &mut timings,
                    progress,
                    journal,
                )
                .await
            }
        };
        self.ended(setup, plan, instance, done, end, timings, progress)
            .await
    }

    /// Destroys `instance` of experiment `experiment_id` through workbench, asking again
    /// (up to [`DESTROY_TRIES`], [`DESTROY_RETRY`] apart) until the broker confirms it: the
    /// broker's destroy is idempotent and answers a second call with its recorded
    /// confirmation. The broker's confirmation, or the last error.
    pub async fn destroy(
        &mut self,
        experiment_id: &str,
        instance: &str,
    ) -> (Option<Destruction>, Option<String>) {
        let mut last = (None, None);
        for attempt in 0..DESTROY_TRIES {
            if attempt > 0 {
                tokio::time::sleep(DESTROY_RETRY).await;
            }
            let destroyed = self
                .workbench
                .destroy_experiment(pb::DestroyExperimentRequest {
                    experiment_id: experiment_id.to_owned(),
                    instance_id: instance.to_owned(),
                })
                .await;
            last = match destroyed {
                Ok(d) => {
                    let d = d.into_inner();
                    let d = Destruction {
                        instance_id: d.instance_id,
                        outcome: d.outcome,
                        process_gone: d.process_gone,
                        overlay_deleted: d.overlay_deleted,
                        sockets_deleted: d.sockets_deleted,
                        at_unix_ms: d.at_unix_ms,
                    };
                    (Some(d), None)
                }
                Err(e) => {
                    tracing::error!(instance, attempt, error = %e.message(), "instance destruction not confirmed");
                    (None, Some(e.message().to_owned()))
                }
            };
            if last.0.as_ref().is_some_and(Destruction::confirmed) {
                break;
            }
        }
        last
    }

    /// Takes the plan's steps from the first that is not in `outcomes` (a resumed
    /// experiment's applied steps), in order.
    #[allow(clippy::too_many_arguments)]
    async fn steps<J: Journal>(
        &mut self,
        setup: &Setup,
        plan: &StampedPlan,
        instance: &str,
        outcomes: &mut Vec<StepOutcome>,
        timings: &mut Timings,
        progress: &mut dyn Progress,
        journal: &mut J,
    ) -> End {
        for step in plan.steps.iter().skip(outcomes.len()) {
            let s = StepRef {
                experiment_id: &setup.experiment_id,
                instance_id: instance,
                pack_name: &setup.pack_name,
                plan,
                step,
            };
            let refused = |code: String| End::Refused {
                index: step.index,
                code,
            };
            let hil_request = if step.hil_required {
                let waited = Instant::now();
                let answer = self.answer(s, progress).await;
                timings.hil_wait_ms += elapsed_ms(waited);
                match answer {
                    Ok(id) => Some(id),
                    Err(code) => return refused(code),
                }
            } else {
                None
            };
            let started = Instant::now();
            let grant = match self.ward.mint_step_grant(grant_request(s)).await {
                Ok(g) => g.into_inner().grant,
                Err(e) => return refused(refusal_code(&e)),
            };
            if let Err(code) = journal.mark(Mark::Granted { index: step.index }).await {
                return refused(code);
            }
            let verify = matches!(step.action, Action::Verify {});
            // Durable before the step is sent: from here it may reach the guest.
            if let Err(code) = journal
                .mark(Mark::Started {
                    index: step.index,
                    verify,
                })
                .await
            {
                return refused(code);
            }
            progress.step_started(step.index);
            let executed = self.workbench.execute_step(execute_request(s, grant)).await;
            timings.steps_ms += elapsed_ms(started);
            let r = match executed {
                Ok(r) => r.into_inner(),
                Err(e) => {
                    let code = refusal_code(&e);
                    progress.step_refused(step.index, e.message());
                    let (mark, end) = if outcome_lost(&code) {
                        (
                            Mark::Unknown {
                                index: step.index,
                                code: &code,
                            },
                            End::Unknown {
                                index: step.index,
                                code: code.clone(),
                            },
                        )
                    } else {
                        (
                            Mark::Refused {
                                index: step.index,
                                code: &code,
                            },
                            refused(code.clone()),
                        )
                    };
                    // A mark that cannot be written leaves the step STARTED: recovery marks
                    // it unknown, which is what the journal can prove.
                    let _ = journal.mark(mark).await;
                    return end;
                }
            };
            let outcome = StepOutcome {
                index: step.index,
                step_digest: step.digest,
                effect_class: class_text(step.effect_class),
                succeeded: r.succeeded,
                hil_request,
                record_digest: Sha256Digest::of(&r.record),
                record: r.record,
            };
            if let Err(code) = journal
                .mark(Mark::Ran {
                    index: step.index,
                    succeeded: outcome.succeeded,
                    record_digest: outcome.record_digest,
                    record: &outcome.record,
                })
                .await
            {
                // Ran, but the journal still says STARTED: only unknown is provable.
                return End::Unknown {
                    index: step.index,
                    code,
                };
            }
            progress.step_done(&outcome);
            let succeeded = outcome.succeeded;
            outcomes.push(outcome);
            if !succeeded {
                return End::StepFailed { index: step.index };
            }
        }
        End::Completed
    }

    /// Files the step's HIL request and waits for the operator: the request's id once
    /// approved, else the refusal code (`hil/denied`, `hil/expired`, …). Ward keeps the
    /// request durably and answers a second filing of the same step with it, so a ward that is
    /// unreachable for a while (a restart) is asked again, up to [`WARD_OUTAGE`]; a refusal is
    /// never retried.
    async fn answer(
        &mut self,
        s: StepRef<'_>,
        progress: &mut dyn Progress,
    ) -> Result<String, String> {
        let request = filing(s);
        let filed = ward_call(&self.ward, |mut ward| {
            let request = request.clone();
            async move { ward.file_hil_request(request).await }
        })
        .await
        .map_err(|e| refusal_code(&e))?;
        progress.hil_filed(&filed);
        let id = filed.id;
        let mut state = filed.state;
        loop {
            match state.as_str() {
                "approved" => return Ok(id),
                "denied" => return Err("hil/denied".into()),
                "expired" => return Err("hil/expired".into()),
                _ => {}
            }
            tokio::time::sleep(HIL_POLL).await;
            state = ward_call(&self.ward, |mut ward| {
                let id = id.clone();
                async move {
                    ward.get_hil_request(ward_pb::GetHilRequestRequest { id })
                        .await
                }
            })
            .await
            .map_err(|e| refusal_code(&e))?
            .state;
        }
    }
}

/// How long a call that is safe to repeat rides out ward being unreachable (a restart) before
/// it fails with the transport's status (`port/unavailable`).
pub const WARD_OUTAGE: Duration = Duration::from_secs(60);

/// Whether `s` says the port could not be reached or its reply was lost, rather than a refusal
/// the port gave (every refusal leads with its own code).
pub fn unreachable(s: &tonic::Status) -> bool {
    refusal_code(s).starts_with("port/")
        && matches!(
            s.code(),
            tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Cancelled
        )
}

/// `call` on ward, asked again [`HIL_POLL`] apart while ward is unreachable, up to
/// [`WARD_OUTAGE`]; only for calls that are safe to repeat (a HIL filing, a read, a signature).
/// A refusal is returned at once.
pub async fn ward_call<T, F, Fut>(
    ward: &WardClient<Channel>,
    mut call: F,
) -> Result<T, tonic::Status>
where
    F: FnMut(WardClient<Channel>) -> Fut,
    Fut: std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
{
    let mut outage: Option<Instant> = None;
    loop {
        match call(ward.clone()).await {
            Ok(r) => return Ok(r.into_inner()),
            Err(e) if unreachable(&e) => {
                let since = *outage.get_or_insert_with(|| {
                    tracing::warn!(error = %e.message(), "ward unreachable; asking again");
                    Instant::now()
                });
                if since.elapsed() >= WARD_OUTAGE {
                    return Err(e);
                }
                tokio::time::sleep(HIL_POLL).await;
            }
            Err(e) => return Err(e),
        }
    }
}

fn elapsed_ms(since: Instant) -> u64 {
    since.elapsed().as_millis().min(u128::from(u64::MAX)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_code_is_the_ports_leading_code_or_names_the_transport() {
        let s = tonic::Status::failed_precondition("hil/denied: the operator said no");
        assert_eq!(refusal_code(&s), "hil/denied");
        let s = tonic::Status::unavailable("connection refused: tcp");
        assert_eq!(refusal_code(&s), "port/unavailable");
    }
}
