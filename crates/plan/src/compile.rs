//! The plan compiler: candidate bytes in, a [`StampedPlan`] or one [`PlanRefusal`] out.

use std::collections::BTreeMap;

use reach_digest::Sha256Digest;

use crate::candidate::{Candidate, Step};
use crate::refusal::{OutsideProfile, PatchRefusal, PlanRefusal};
use crate::stamped::{Action, StampedFormat, StampedPlan, StampedStep};
use crate::vocabulary::{BindingTerms, EffectClass, HilMode, Vocabulary};

/// The pack file a patch's source names (the format's fixed file name).
pub const PATCH_POLICY_SOURCE: &str = "patch-policy.toml";
/// The pack file and entry a restart's source names.
pub const SERVICES_SOURCE: &str = "task-profile.toml#services";
/// The pack file a verify step's source names.
pub const VERIFIER_SOURCE: &str = "verifier.toml";

/// Compiles candidate bytes against a pack's vocabulary under a binding's terms.
///
/// The checks run in this order, and the first that fails is the refusal:
/// 1. the schema ([`Candidate::parse`]): `plan/schema`;
/// 2. the step count against `vocab.max_steps`: `plan/too-many-steps`;
/// 3. every ref, step by step: a profile, its argument count and each argument's admitted
///    values, a service: `plan/outside-profile`;
/// 4. the first step's derived class: `plan/first-step-not-observation`;
/// 5. every patch, step by step, under the patch policy on the baseline pre-image (a second
///    patch to the same target applies to the first one's post-image):
///    `workbench/patch-outside-policy`;
/// 6. the verifier: the last step is `verify` and no other is, so the verifier judges the
///    instance after every step (the packs' prompts promise the Solver the host enforces
///    this): `plan/verify-not-last`.
///
/// Each class is derived here: `run` takes its profile's enforced mode (none enforced:
/// [`EffectClass::ContainedMutation`]), `patch` and `restart` are contained mutations, `verify`
/// is an observation. HIL is the stricter of `terms.hil` and `vocab.hil_minimum`: `each-step`
/// marks every step, `each-mutation` every contained mutation; it never changes a class.
pub fn compile(
    vocab: &Vocabulary,
    terms: &BindingTerms,
    candidate: &[u8],
) -> Result<StampedPlan, PlanRefusal> {
    let parsed = Candidate::parse(candidate)?;
    if parsed.steps.len() > vocab.max_steps {
        return Err(PlanRefusal::TooManySteps {
            count: parsed.steps.len(),
            max: vocab.max_steps,
        });
    }

    let resolved = parsed
        .steps
        .iter()
        .enumerate()
        .map(|(index, step)| {
            resolve(vocab, step).map_err(|what| PlanRefusal::OutsideProfile { index, what })
        })
        .collect::<Result<Vec<_>, _>>()?;

    if let Some(first) = resolved.first()
        && first.class != EffectClass::Observation
    {
        return Err(PlanRefusal::FirstStepNotObservation { class: first.class });
    }

    let hil = terms.hil.max(vocab.hil_minimum);
    // The current image of each patched target, so successive patches chain.
    let mut images: BTreeMap<String, String> = BTreeMap::new();
    let mut steps = Vec::with_capacity(resolved.len());
    for (index, (step, r)) in parsed.steps.into_iter().zip(resolved).enumerate() {
        let action = match step {
            Step::Run { profile, args } => Action::Run { profile, args },
            Step::Restart { service } => Action::Restart { service },
            Step::Verify {} => Action::Verify {},
            Step::Patch { target, edits } => {
                let name = target.as_str();
                let pre = match (images.get(name), vocab.baselines.get(name)) {
                    (Some(image), _) | (None, Some(image)) => image,
                    // A target the policy does not admit is refused as that, baseline or not.
                    (None, None) if vocab.patch_policy.file(name).is_none() => {
                        let target = name.to_owned();
                        return Err(patch_refusal(
                            index,
                            PatchRefusal::TargetNotAdmitted { target },
                        ));
                    }
                    (None, None) => {
                        let target = name.to_owned();
                        return Err(patch_refusal(index, PatchRefusal::NoBaseline { target }));
                    }
                };
                let outcome = vocab
                    .patch_policy
                    .apply(&target, pre, &edits)
                    .map_err(|refusal| patch_refusal(index, refusal))?;
                images.insert(name.to_owned(), outcome.post_image);
                Action::Patch {
                    target,
                    pre_digest: outcome.pre_digest,
                    post_digest: outcome.post_digest,
                    diff: outcome.diff,
                    edits,
                }
            }
        };
        let hil_required = match hil {
            HilMode::EachStep => true,
            HilMode::EachMutation => r.class == EffectClass::ContainedMutation,
        };
        let mut stamped = StampedStep {
            index,
            action,
            effect_class: r.class,
            source: r.source,
            hil_required,
            rollback: vocab.rollback.clone(),
            digest: Sha256Digest::of([]),
        };
        stamped.digest = stamped.recompute_digest();
        steps.push(stamped);
    }

    let verifies = steps
        .iter()
        .filter(|s| matches!(s.action, Action::Verify {}))
        .count();
    match steps.last().map(|s| s.action.kind()) {
        Some("verify") if verifies == 1 => {}
        last => {
            return Err(PlanRefusal::VerifyNotLast {
                verifies,
                last: last.unwrap_or("nothing"),
            });
        }
    }

    let mut plan = StampedPlan {
        format: StampedFormat::V1,
        pack: vocab.pack.clone(),
        generation: terms.generation,
        hil,
        candidate_digest: Sha256Digest::of(candidate),
        diagnosis: parsed.diagnosis,
        steps,
        digest: Sha256Digest::of([]),
    };
    plan.digest = plan.recompute_digest();
    Ok(plan)
}

fn patch_refusal(index: usize, refusal: PatchRefusal) -> PlanRefusal {
    PlanRefusal::PatchOutsidePolicy { index, refusal }
}

/// A step's class and source, derived from the vocabulary.
struct Resolved {
    class: EffectClass,
    source: String,
}

fn resolve(vocab: &Vocabulary, step: &Step) -> Result<Resolved, OutsideProfile> {
    match step {
        Step::Run { profile, args } => {
            let p = vocab
                .commands
                .get(profile)
                .ok_or_else(|| OutsideProfile::UnknownProfile {
                    profile: profile.clone(),
                })?;
            if args.len() != p.args.len() {
                return Err(OutsideProfile::ArgCount {
                    profile: profile.clone(),
                    expected: p.args.len(),
                    got: args.len(),
                });
            }
            if let Some((position, value)) = args
                .iter()
                .zip(&p.args)
                .enumerate()
                .find(|(_, (arg, slot))| !slot.one_of.contains(arg))
                .map(|(i, (arg, _))| (i, arg))
            {
                return Err(OutsideProfile::ArgNotAdmitted {
                    profile: profile.clone(),
                    position,
                    value: value.clone(),
                });
            }
            Ok(Resolved {
                class: p.mode.unwrap_or(EffectClass::ContainedMutation),
                source: p.source.clone(),
            })
        }
        Step::Patch { target, .. } => Ok(Resolved {
            class: EffectClass::ContainedMutation,
            source: format!("{PATCH_POLICY_SOURCE}#{target}"),
        }),
        Step::Restart { service } => {
            if !vocab.services.contains(service) {
                return Err(OutsideProfile::UnknownService {
                    service: service.clone(),
                });
            }
            Ok(Resolved {
                class: EffectClass::ContainedMutation,
                source: SERVICES_SOURCE.to_owned(),
            })
        }
        Step::Verify {} => Ok(Resolved {
            class: EffectClass::Observation,
            source: VERIFIER_SOURCE.to_owned(),
        }),
    }
}
