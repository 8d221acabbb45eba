//! What an experiment retains: the coordinator's `Execution` and workbench's step records
//! reduced to the signed `ExecutionRecord` (bounded, digest-linked observations, the
//! verifier's checks, the broker's destruction confirmation, timings), and the recipe.

use reach_digest::Sha256Digest;
use reach_experiment::{Destruction, End, Execution};
use reach_phylactery::{ExperimentRow, StepRow, StepState};
use reach_plan::StampedPlan;
use reach_room::fact::{RoomFact, RunId};
use reach_room::recipe::{Disclosure, Links, Recipe, RecipeFormat, RecipePatch};
use reach_room::record::{
    Check, ExecutionRecord, Observation, RecordFormat, RecordTimings, Resources, StepRecord,
    VerifierResult,
};
use serde_json::Value;
use tonic::Status;

use super::TaskSettings;
use crate::packs::Runnable;

/// The end of an experiment as the Experiment fact states it.
pub fn end_text(end: &End) -> String {
    match end {
        End::Completed => "completed".into(),
        End::StepFailed { .. } => "step-failed".into(),
        End::Refused { code, .. } => format!("refused:{code}"),
        End::NotCreated { code } => format!("not-created:{code}"),
        End::Unknown { .. } => "unknown".into(),
    }
}

/// The end an Experiment fact gives for the experiment `rec` records, read back from the
/// record: the inverse of how [`execution_record`] writes each step's outcome (a refused
/// step's code, `denied`, `expired`, `failed`, `unknown`; every step `ok` is `completed`).
/// `code` is the journal's code of an experiment that never got an instance. For an
/// experiment whose signed record was published before a crash and whose fact was not.
pub fn end_of_record(rec: &ExecutionRecord, code: Option<&str>) -> String {
    if rec.instance.is_empty() {
        return format!(
            "not-created:{}",
            code.unwrap_or(super::journal::INTERRUPTED)
        );
    }
    for s in &rec.steps {
        match s.outcome.as_str() {
            "ok" | "not-run" => {}
            "unknown" => return "unknown".into(),
            "failed" => return "step-failed".into(),
            "denied" => return "refused:hil/denied".into(),
            "expired" => return "refused:hil/expired".into(),
            refused => return refused.to_owned(),
        }
    }
    "completed".into()
}

/// `text` with every host path of `forbidden` replaced (observations come from the guest,
/// but a host path must never be retained whatever produced it).
fn redact(text: &str, forbidden: &[&str]) -> String {
    let mut t = text.to_owned();
    for f in forbidden.iter().filter(|f| !f.is_empty()) {
        t = t.replace(f, "<host-path>");
    }
    t
}

/// The signed record of experiment `n` of run `run`.
pub fn execution_record(
    run: &RunId,
    n: u32,
    plan: &StampedPlan,
    x: &Execution,
    filed: &[(u32, String)],
    forbidden: &[&str],
) -> ExecutionRecord {
    let mut steps = Vec::with_capacity(plan.steps.len());
    let mut verifier = None;
    let mut verifier_ms = 0;
    for (index, step) in plan.steps.iter().enumerate() {
        let ran = x.steps.iter().find(|o| o.index == index);
        let outcome = match (ran, &x.end) {
            (Some(o), _) if o.succeeded => "ok".to_owned(),
            (Some(_), _) => "failed".to_owned(),
            (None, End::Refused { index: i, code }) if *i == index => {
                if code == "hil/denied" {
                    "denied".to_owned()
                } else if code == "hil/expired" {
                    "expired".to_owned()
                } else {
                    format!("refused:{code}")
                }
            }
            (None, End::Unknown { index: i, .. }) if *i == index => "unknown".to_owned(),
            (None, _) => "not-run".to_owned(),
        };
        let record: Value = ran
            .and_then(|o| serde_json::from_slice(&o.record).ok())
            .unwrap_or(Value::Null);
        let report = &record["outcome"]["report"];
        // A command's own observation; for the verifier, the pack's unit-starts witness
        // read after its checks (the guest's count of restarts, when the pack has one).
        let observed = match record["outcome"]["kind"].as_str() {
            Some("observed" | "ran") => Some(report),
            Some("verified") => Some(&report["unit_starts"]).filter(|o| o.is_object()),
            _ => None,
        };
        let observation = observed.map(|o| {
            Observation::new(
                o["profile"].as_str().unwrap_or_default(),
                o["args"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default(),
                o["exit_code"].as_i64().map(|c| c as i32).unwrap_or(-1),
                &redact(o["stdout"].as_str().unwrap_or_default(), forbidden),
            )
        });
        if record["outcome"]["kind"].as_str() == Some("verified") {
            verifier_ms = report["elapsed_ms"].as_u64().unwrap_or(0);
            let checks: Vec<Check> = report["checks"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    Check::new(
                        c["name"].as_str().unwrap_or_default(),
                        c["passed"].as_bool() == Some(true),
                        &redact(c["reason"].as_str().unwrap_or_default(), forbidden),
                    )
                })
                .collect();
            verifier = Some(VerifierResult {
                passed: checks.iter().all(|c| c.passed) && !checks.is_empty(),
                checks,
            });
        }
        steps.push(StepRecord {
            index,
            step_digest: step.digest,
            kind: step.action.kind().into(),
            outcome,
            // The request the operator answered; a denied or expired step keeps the one
            // filed for it.
            hil_request: ran.and_then(|o| o.hil_request.clone()).or_else(|| {
                filed
                    .iter()
                    .rev()
                    .find(|(i, _)| *i as usize == index)
                    .map(|(_, id)| id.clone())
            }),
            observation,
        });
    }
    let destroyed = x.destruction.as_ref().is_some_and(|d| d.confirmed());
    let destroy_confirmation = confirmation(x.destruction.as_ref(), x.destroy_error.as_deref());
    ExecutionRecord {
        format: RecordFormat::V1,
        room: run.clone(),
        n,
        instance: x.instance_id.clone().unwrap_or_default(),
        plan_digest: plan.digest,
        resources: Resources {
            steps_run: x.steps.len() as u32,
            hil_requests: x.steps.iter().filter(|s| s.hil_request.is_some()).count() as u32,
        },
        steps,
        verifier,
        destroyed,
        destroy_confirmation: redact(&destroy_confirmation, forbidden),
        timings_ms: RecordTimings {
            create: x.timings.create_ms,
            steps: x.timings.steps_ms,
            hil_wait: x.timings.hil_wait_ms,
            verifier: verifier_ms,
            destroy: x.timings.destroy_ms,
        },
    }
}

/// The broker's confirmation as a record states it, or why there is none.
fn confirmation(d: Option<&Destruction>, error: Option<&str>) -> String {
    match (d, error) {
        (Some(d), _) => format!(
            "{} process_gone={} overlay_deleted={} sockets_deleted={} at={}",
            d.outcome, d.process_gone, d.overlay_deleted, d.sockets_deleted, d.at_unix_ms
        ),
        (None, Some(e)) => e.to_owned(),
        (None, None) => "no instance".into(),
    }
}

/// The signed record of an experiment a crash interrupted, from its journal alone: each
/// step as the journal left it (UNKNOWN: it may have reached the guest), no observation and
/// no verifier result (their bytes went with the process), and the broker's confirmation with
/// how long recovery's destroy took.
pub fn interrupted_record(
    run: &RunId,
    row: &ExperimentRow,
    steps: &[StepRow],
    destruction: Option<&Destruction>,
    destroy_ms: u64,
) -> ExecutionRecord {
    ExecutionRecord {
        format: RecordFormat::V1,
        room: run.clone(),
        n: row.n,
        instance: row.instance_id.clone().unwrap_or_default(),
        plan_digest: row.plan_digest,
        resources: Resources {
            steps_run: steps
                .iter()
                .filter(|s| matches!(s.state, StepState::Applied | StepState::Failed))
                .count() as u32,
            hil_requests: 0,
        },
        steps: steps
            .iter()
            .map(|s| StepRecord {
                index: s.index as usize,
                step_digest: s.step_digest,
                kind: s.kind.clone(),
                outcome: match (s.state, s.code.as_deref()) {
                    (StepState::Applied, _) => "ok".to_owned(),
                    (StepState::Failed, Some(code)) => format!("refused:{code}"),
                    (StepState::Failed, None) => "failed".to_owned(),
                    (StepState::Unknown | StepState::Started, _) => "unknown".to_owned(),
                    (StepState::Pending | StepState::Granted, _) => "not-run".to_owned(),
                },
                hil_request: None,
                observation: None,
            })
            .collect(),
        verifier: None,
        destroyed: destruction.is_some_and(Destruction::confirmed),
        destroy_confirmation: confirmation(destruction, None),
        timings_ms: RecordTimings {
            create: 0,
            steps: 0,
            hil_wait: 0,
            verifier: 0,
            destroy: destroy_ms,
        },
    }
}

/// The recipe of a concluded run: the admitted candidate's diagnosis and patch, the last
/// experiment's verifier result, and links to everything it rests on.
#[allow(clippy::too_many_arguments)]
pub fn recipe(
    run: &RunId,
    runnable: &Runnable,
    candidate: &str,
    rec: &ExecutionRecord,
    rec_digest: Sha256Digest,
    facts: &[RoomFact],
    records: &[(ExecutionRecord, Sha256Digest)],
    hil_requests: &[String],
    settings: &TaskSettings,
    key_id: &str,
) -> Result<Recipe, Status> {
    let (diagnosis, patch_steps) = reach_room::recipe::admitted_parts(candidate)
        .map_err(|_| Status::internal("room/admitted-not-a-candidate"))?;
    let verifier = rec
        .verifier
        .clone()
        .ok_or_else(|| Status::internal("room/no-verifier-result"))?;
    Ok(Recipe {
        format: RecipeFormat::V1,
        room: run.clone(),
        pack: runnable.pack.name().to_owned(),
        pack_generation: runnable.generation,
        diagnosis,
        patch: RecipePatch {
            candidate_digest: Sha256Digest::of(candidate.as_bytes()),
            plan_digest: rec.plan_digest,
            steps: patch_steps,
        },
        verifier,
        links: Links {
            facts: facts.iter().map(RoomFact::digest).collect(),
            execution_records: records.iter().map(|(_, d)| *d).collect(),
            hil_requests: hil_requests.to_vec(),
            verifier_evidence: rec_digest,
        },
        disclosure: Disclosure {
            evidence_class: format!("{}/real-execution", settings.class),
            model_runtime: settings.model.clone(),
            retained: "links-and-digests".into(),
            signer: key_id.to_owned(),
        },
    })
}

#[cfg(test)]
mod tests {
    use reach_experiment::StepOutcome;
    use reach_plan::{Action, EffectClass, HilMode, PackRef, StampedFormat, StampedStep};

    use super::*;

    fn plan(steps: usize) -> StampedPlan {
        let d = Sha256Digest::of(b"x");
        StampedPlan {
            format: StampedFormat::V1,
            pack: PackRef {
                name: "p".into(),
                version: 1,
                facts_digest: d,
                profile_digest: d,
            },
            generation: 1,
            hil: HilMode::EachMutation,
            candidate_digest: d,
            diagnosis: String::new(),
            steps: (0..steps)
                .map(|index| StampedStep {
                    index,
                    action: Action::Restart {
                        service: "s".into(),
                    },
                    effect_class: EffectClass::ContainedMutation,
                    source: String::new(),
                    hil_required: true,
                    rollback: String::new(),
                    digest: Sha256Digest::of([index as u8]),
                })
                .collect(),
            digest: d,
        }
    }

    fn execution(plan: &StampedPlan, ran: &[bool], end: End) -> Execution {
        Execution {
            experiment_id: "run-1-e1".into(),
            plan_digest: plan.digest,
            instance_id: (!matches!(end, End::NotCreated { .. })).then(|| "vm-1".into()),
            steps: ran
                .iter()
                .enumerate()
                .map(|(index, &succeeded)| StepOutcome {
                    index,
                    step_digest: plan.steps[index].digest,
                    effect_class: "contained-mutation",
                    succeeded,
                    hil_request: Some(format!("hil-{index}")),
                    record_digest: Sha256Digest::of(b"{}"),
                    record: b"{}".to_vec(),
                })
                .collect(),
            end,
            destruction: None,
            destroy_error: None,
            timings: Default::default(),
        }
    }

    /// What recovery reads back from a published record is the end the live path gave the
    /// Experiment fact, for every way an experiment ends.
    #[test]
    fn a_records_end_reads_back_as_the_fact_gives_it() {
        let p = plan(3);
        let run = RunId::new("run-1").unwrap();
        let refused = |index, code: &str| End::Refused {
            index,
            code: code.into(),
        };
        let cases = [
            (vec![true, true, true], End::Completed),
            (vec![true, false], End::StepFailed { index: 1 }),
            (vec![true], refused(1, "hil/denied")),
            (vec![true], refused(1, "hil/expired")),
            (vec![], refused(0, "package/generation-stale")),
            (vec![true, true], refused(2, "local-binding/paused")),
            (
                vec![true, true],
                End::Unknown {
                    index: 2,
                    code: "port/unavailable".into(),
                },
            ),
            (
                vec![],
                End::NotCreated {
                    code: "workbench/capacity".into(),
                },
            ),
        ];
        for (ran, end) in cases {
            let x = execution(&p, &ran, end.clone());
            let rec = execution_record(&run, 1, &p, &x, &[], &[]);
            let code = match &end {
                End::NotCreated { code } | End::Refused { code, .. } => Some(code.as_str()),
                _ => None,
            };
            assert_eq!(end_of_record(&rec, code), end_text(&end), "{end:?}");
        }
    }
}
