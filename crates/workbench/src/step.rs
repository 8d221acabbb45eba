//! One stamped step, executed exactly.
//!
//! The step arrives as bytes; its digest is recomputed from them before anything runs (the
//! digest a step grant is redeemed with is this one, never the caller's). Then by kind:
//! `run` (a pack profile with an enforced mode whose class is the stamped one; an
//! observation must come back confined), `patch` ([`crate::patch`]), `restart`
//! ([`crate::restart`]), `verify` ([`crate::verifier`]).

use reach_digest::Sha256Digest;
use reach_plan::{Action, EffectClass, StampedStep};

use crate::guest::{Guest, Observation};
use crate::patch::{self, PatchReport};
use crate::restart::{self, RestartReport};
use crate::verifier::{self, Snapshots, VerifierReport};
use crate::{Refusal, Workbench};

/// What a step did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "report")]
pub enum StepOutcome {
    Observed(Observation),
    /// A contained mutation run through a profile.
    Ran(Observation),
    Patched(PatchReport),
    Restarted(RestartReport),
    Verified(VerifierReport),
}

/// The execution record of one step.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StepRecord {
    pub index: usize,
    /// Recomputed from the step's bytes.
    pub digest: Sha256Digest,
    pub effect_class: EffectClass,
    pub outcome: StepOutcome,
}

/// The execution record's format tag.
pub const STEP_RECORD_FORMAT: &str = "reach.workbench.step-record.v1";

impl StepRecord {
    /// The execution record (`reach.workbench.step-record.v1`) as JSON.
    pub fn to_json(&self) -> Vec<u8> {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        if let Some(m) = v.as_object_mut() {
            m.insert("format".into(), STEP_RECORD_FORMAT.into());
            m.insert("succeeded".into(), self.succeeded().into());
        }
        serde_json::to_vec(&v).unwrap_or_default()
    }

    /// Whether the step did what it is for: a command exited 0, a patch was confirmed, the
    /// restarted unit is active, the verifier passed.
    pub fn succeeded(&self) -> bool {
        match &self.outcome {
            StepOutcome::Observed(o) | StepOutcome::Ran(o) => o.exit_code == Some(0),
            StepOutcome::Patched(_) => true,
            StepOutcome::Restarted(r) => r.ok(),
            StepOutcome::Verified(v) => v.passed(),
        }
    }
}

/// Parses a stamped step and checks its digest against its own bytes.
pub fn verified_step(bytes: &[u8]) -> Result<StampedStep, Refusal> {
    let step: StampedStep = serde_json::from_slice(bytes).map_err(|e| Refusal::StepMalformed {
        reason: e.to_string(),
    })?;
    if step.recompute_digest() != step.digest {
        return Err(Refusal::StepDigest { index: step.index });
    }
    Ok(step)
}

fn class_name(c: EffectClass) -> &'static str {
    match c {
        EffectClass::Observation => "observation",
        EffectClass::ContainedMutation => "contained-mutation",
    }
}

/// Executes `step` (already digest-checked: [`verified_step`]) in `guest`.
pub async fn execute<G: Guest>(
    bench: &Workbench,
    guest: &G,
    step: &StampedStep,
    instance_start: &Snapshots,
) -> Result<StepRecord, Refusal> {
    if step.recompute_digest() != step.digest {
        return Err(Refusal::StepDigest { index: step.index });
    }
    let outcome = match &step.action {
        Action::Run { profile, args } => {
            let spec = bench.profile(profile)?;
            if spec.verifier_only {
                return Err(Refusal::OutsideProfile {
                    profile: profile.clone(),
                });
            }
            let mode = spec.mode.expect("bench.profile checked the mode");
            if mode != step.effect_class {
                return Err(Refusal::EffectClass {
                    index: step.index,
                    profile: profile.clone(),
                    stamped: class_name(step.effect_class).to_owned(),
                    mode: class_name(mode).to_owned(),
                });
            }
            match mode {
                EffectClass::Observation => {
                    StepOutcome::Observed(bench.observe(guest, profile, args).await?)
                }
                EffectClass::ContainedMutation => {
                    StepOutcome::Ran(guest.exec(profile, args).await?)
                }
            }
        }
        Action::Patch {
            target,
            pre_digest,
            post_digest,
            edits,
            ..
        } => StepOutcome::Patched(
            patch::apply(
                guest,
                &bench.vocabulary().patch_policy,
                target,
                pre_digest,
                post_digest,
                edits,
            )
            .await?,
        ),
        Action::Restart { service } => {
            StepOutcome::Restarted(restart::restart(bench, guest, service).await?)
        }
        Action::Verify {} => {
            StepOutcome::Verified(verifier::run(bench, guest, instance_start).await?)
        }
    };
    Ok(StepRecord {
        index: step.index,
        digest: step.digest,
        effect_class: step.effect_class,
        outcome,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_that_are_no_stamped_step_are_malformed_not_a_digest_mismatch() {
        for bytes in [&b""[..], b"{}", b"not json", br#"{"index":0}"#] {
            let e = verified_step(bytes).unwrap_err();
            assert_eq!(e.code(), "workbench/step-malformed", "{e}");
        }
    }
}
