//! Properties of the compiler over generated vocabularies and candidates.

use proptest::prelude::*;
use proptest::sample::Index;
use reach_digest::Sha256Digest;
use reach_plan::testing::{TEN_STEPS, profile, terms, vocabulary};
use reach_plan::{
    Candidate, CandidateFormat, Edit, EffectClass, HilMode, Line, PlanRefusal, RelativeTarget,
    Step, Vocabulary, compile,
};

#[derive(Debug, Clone)]
struct GenProfile {
    mode: Option<EffectClass>,
    slots: Vec<Vec<String>>,
}

fn gen_profile() -> impl Strategy<Value = GenProfile> {
    let mode = prop_oneof![
        Just(Some(EffectClass::Observation)),
        Just(Some(EffectClass::ContainedMutation)),
        Just(None),
    ];
    let slot = prop::collection::vec("[a-z0-9./-]{1,8}", 1..4);
    (mode, prop::collection::vec(slot, 0..3)).prop_map(|(mode, slots)| GenProfile { mode, slots })
}

fn hil() -> impl Strategy<Value = HilMode> {
    prop_oneof![Just(HilMode::EachStep), Just(HilMode::EachMutation)]
}

#[derive(Debug, Clone)]
struct GenVocab {
    profiles: Vec<GenProfile>,
    services: usize,
    hil_minimum: HilMode,
}

fn gen_vocab() -> impl Strategy<Value = GenVocab> {
    (prop::collection::vec(gen_profile(), 1..8), 1..4usize, hil()).prop_map(
        |(profiles, services, hil_minimum)| GenVocab {
            profiles,
            services,
            hil_minimum,
        },
    )
}

impl GenVocab {
    /// The test vocabulary's patch policy and baselines, with generated profiles and services.
    fn build(&self) -> Vocabulary {
        let mut v = vocabulary();
        v.commands = self
            .profiles
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let name = format!("p{i}");
                let slots: Vec<Vec<&str>> = p
                    .slots
                    .iter()
                    .map(|s| s.iter().map(String::as_str).collect())
                    .collect();
                let slots: Vec<&[&str]> = slots.iter().map(Vec::as_slice).collect();
                let profile = profile(&name, p.mode, &slots);
                (name, profile)
            })
            .collect();
        v.services = (0..self.services).map(|i| format!("s{i}")).collect();
        v.hil_minimum = self.hil_minimum;
        v
    }
}

#[derive(Debug, Clone)]
enum GenStep {
    Run(Index, Vec<Index>),
    PatchApp(u16),
    PatchLimits(u16),
    Restart(Index),
    Verify,
}

fn gen_step() -> impl Strategy<Value = GenStep> {
    prop_oneof![
        4 => (any::<Index>(), prop::collection::vec(any::<Index>(), 3))
            .prop_map(|(p, a)| GenStep::Run(p, a)),
        1 => any::<u16>().prop_map(GenStep::PatchApp),
        1 => any::<u16>().prop_map(GenStep::PatchLimits),
        1 => any::<Index>().prop_map(GenStep::Restart),
        1 => Just(GenStep::Verify),
    ]
}

fn append(target: &str, with: String) -> Step {
    Step::Patch {
        target: RelativeTarget::new(target).unwrap(),
        edits: vec![Edit::Append {
            with: Line::new(with).unwrap(),
        }],
    }
}

/// The step, and the class and source the pack gives it.
fn realize(g: &GenStep, v: &GenVocab) -> (Step, EffectClass, String) {
    match g {
        GenStep::Run(p, args) => {
            let i = p.index(v.profiles.len());
            let profile = &v.profiles[i];
            let args = profile
                .slots
                .iter()
                .zip(args)
                .map(|(slot, a)| slot[a.index(slot.len())].clone())
                .collect();
            let name = format!("p{i}");
            let source = format!("command-profiles.toml#{name}");
            let class = profile.mode.unwrap_or(EffectClass::ContainedMutation);
            (
                Step::Run {
                    profile: name,
                    args,
                },
                class,
                source,
            )
        }
        GenStep::PatchApp(n) => (
            append("etc/app.conf", format!("# note {n}")),
            EffectClass::ContainedMutation,
            "patch-policy.toml#etc/app.conf".to_owned(),
        ),
        GenStep::PatchLimits(n) => (
            append("etc/app.d/limits.conf", format!("max_n = {n}")),
            EffectClass::ContainedMutation,
            "patch-policy.toml#etc/app.d/limits.conf".to_owned(),
        ),
        GenStep::Restart(s) => (
            Step::Restart {
                service: format!("s{}", s.index(v.services)),
            },
            EffectClass::ContainedMutation,
            "task-profile.toml#services".to_owned(),
        ),
        GenStep::Verify => (
            Step::Verify {},
            EffectClass::Observation,
            "verifier.toml".to_owned(),
        ),
    }
}

fn candidate_bytes(steps: Vec<Step>) -> Vec<u8> {
    serde_json::to_vec(&Candidate {
        format: CandidateFormat::V1,
        diagnosis: "generated".to_owned(),
        steps,
    })
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Every stamped class is the pack's: a run step's is its profile's mode (none enforced:
    /// a contained mutation), patch and restart are mutations, verify an observation; HIL
    /// follows the stricter mode and the first-step rule holds.
    #[test]
    fn classes_come_from_the_pack(
        v in gen_vocab(),
        steps in prop::collection::vec(gen_step(), 0..=15),
        binding in hil(),
    ) {
        let vocab = v.build();
        // The one verify step last, as the compiler requires (`verify_not_last` in
        // refusals.rs refuses the rest).
        let realized: Vec<_> = steps
            .iter()
            .filter(|s| !matches!(s, GenStep::Verify))
            .chain([&GenStep::Verify])
            .map(|s| realize(s, &v))
            .collect();
        let bytes = candidate_bytes(realized.iter().map(|r| r.0.clone()).collect());
        let strict = binding.max(v.hil_minimum);
        match compile(&vocab, &terms(binding), &bytes) {
            Ok(plan) => {
                prop_assert_eq!(realized[0].1, EffectClass::Observation);
                prop_assert_eq!(plan.hil, strict);
                prop_assert_eq!(plan.steps.len(), realized.len());
                for (stamped, (_, class, source)) in plan.steps.iter().zip(&realized) {
                    prop_assert_eq!(stamped.effect_class, *class);
                    prop_assert_eq!(&stamped.source, source);
                    let hil = strict == HilMode::EachStep || *class == EffectClass::ContainedMutation;
                    prop_assert_eq!(stamped.hil_required, hil);
                }
                prop_assert_eq!(plan.verify_digests(), Ok(()));
            }
            Err(e) => {
                prop_assert_ne!(realized[0].1, EffectClass::Observation);
                prop_assert_eq!(e, PlanRefusal::FirstStepNotObservation { class: realized[0].1 });
            }
        }
    }

    /// Flipping any byte of an admitted candidate either refuses it or changes the plan's
    /// digest and its candidate digest.
    #[test]
    fn any_byte_changes_the_plan_or_refuses(
        v in gen_vocab(),
        steps in prop::collection::vec(gen_step(), 0..=15),
        at in any::<Index>(),
        mask in 1..=255u8,
    ) {
        let vocab = v.build();
        // An observation first (the generated steps from their first observation on) and the
        // one verify step last, as the compiler requires.
        let realized: Vec<_> = steps
            .iter()
            .filter(|s| !matches!(s, GenStep::Verify))
            .map(|s| realize(s, &v))
            .skip_while(|r| r.1 != EffectClass::Observation)
            .chain([realize(&GenStep::Verify, &v)])
            .collect();
        let bytes = candidate_bytes(realized.into_iter().map(|r| r.0).collect());
        let plan = compile(&vocab, &terms(HilMode::EachStep), &bytes).unwrap();

        let mut flipped = bytes.clone();
        let i = at.index(flipped.len());
        flipped[i] ^= mask;
        if let Ok(other) = compile(&vocab, &terms(HilMode::EachStep), &flipped) {
            prop_assert_eq!(other.candidate_digest, Sha256Digest::of(&flipped));
            prop_assert_ne!(other.candidate_digest, plan.candidate_digest);
            prop_assert_ne!(other.digest, plan.digest);
        }
    }

    /// The same for the ten-step candidate of the benchmark, over every position.
    #[test]
    fn any_byte_of_the_ten_step_candidate(at in any::<Index>(), mask in 1..=255u8) {
        let vocab = vocabulary();
        let plan = compile(&vocab, &terms(HilMode::EachMutation), TEN_STEPS.as_bytes()).unwrap();
        let mut flipped = TEN_STEPS.as_bytes().to_vec();
        let i = at.index(flipped.len());
        flipped[i] ^= mask;
        if let Ok(other) = compile(&vocab, &terms(HilMode::EachMutation), &flipped) {
            prop_assert_ne!(other.candidate_digest, plan.candidate_digest);
            prop_assert_ne!(other.digest, plan.digest);
        }
    }
}
