//! The workbench: the owning boundary for every effect inside an instance.
//!
//! A [`Workbench`] holds one verified task pack (its command profiles with their effect
//! modes, its patch policy, its verifier and its admitted services) and executes exactly one
//! stamped step at a time in one instance, reached through a [`Guest`] (the vm-broker's
//! port in production). Every step is checked here again, at the owner, whatever the plan
//! compiler already checked: the step's digest is recomputed from its bytes ([`step`]), an
//! observation runs kernel-confined and the broker's reported argv proves it ([`guest`]), a
//! patch is applied with the pack's policy to the real file in the guest ([`patch`]), a
//! restart names only an admitted unit and is waited to `active` or `failed` ([`restart`]),
//! and the verifier's seven checks are judged by a host evaluator from the bounded
//! observations alone ([`verifier`]).
//!
//! **Architecture Invariant:** nothing here names a service, program or file of any
//! particular task: every such name comes from the pack's files (`tests/no_mta.rs` in
//! `crates/taskpack` holds this crate to it). The only fixed names are the pack format's own
//! conventions: the profiles [`restart::RESTART_PROFILE`] and [`restart::STATUS_PROFILE`], and
//! the optional [`restart::STARTS_PROFILE`].
//!
//! **Architecture Invariant:** a refused step writes nothing. Patch checks read the real
//! file, its owner and mode, and compute the post-image before the one atomic write.
//!
//! **API Boundary:** [`Workbench`], [`Guest`], the reports ([`step::StepRecord`],
//! [`verifier::VerifierReport`]) and [`Refusal`], whose codes are the seed's `area/reason`.

#![forbid(unsafe_code)]

pub mod guest;
pub mod patch;
pub mod refusal;
pub mod restart;
pub mod step;
pub mod verifier;

pub use guest::{BrokerInstance, Guest, GuestError, Observation};
pub use refusal::Refusal;
pub use step::{StepOutcome, StepRecord};
pub use verifier::{CheckReport, Snapshots, VerifierOutcome, VerifierReport};

use reach_plan::Vocabulary;
use reach_taskpack::VerifiedPack;
use reach_taskpack::source::{CommandProfileSpec, CommandProfiles, Verifier};

/// One verified pack, as the workbench executes it.
#[derive(Debug, Clone)]
pub struct Workbench {
    pack: String,
    generation: u64,
    commands: CommandProfiles,
    verifier: Verifier,
    vocabulary: Vocabulary,
}

impl Workbench {
    /// The workbench for `pack` (verified by the caller with [`reach_taskpack::conform`])
    /// at `generation`, for its image variant `variant` (`None`: the default one).
    pub fn new(pack: &VerifiedPack, generation: u64, variant: Option<&str>) -> Option<Self> {
        let vocabulary = match variant {
            Some(v) => pack.vocabulary_for(v)?,
            None => pack.vocabulary(),
        };
        Some(Self {
            pack: pack.name().to_owned(),
            generation,
            commands: pack.sources().commands.clone(),
            verifier: pack.sources().verifier.clone(),
            vocabulary,
        })
    }

    /// The workbench for sources the caller holds (a pack's, parsed), at `generation`.
    pub fn from_sources(
        pack: &str,
        generation: u64,
        sources: &reach_taskpack::Sources,
        vocabulary: Vocabulary,
    ) -> Self {
        Self {
            pack: pack.to_owned(),
            generation,
            commands: sources.commands.clone(),
            verifier: sources.verifier.clone(),
            vocabulary,
        }
    }

    pub fn pack(&self) -> &str {
        &self.pack
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The command profiles the broker may run in this pack's instances (observations
    /// confined read-only).
    pub fn broker_profiles(&self) -> reach_vm::profile::ProfileSet {
        self.commands.broker_profiles()
    }

    pub fn verifier(&self) -> &Verifier {
        &self.verifier
    }

    pub fn vocabulary(&self) -> &Vocabulary {
        &self.vocabulary
    }

    /// Runs the pack's observation `profile` and proves, from the argv the broker reports,
    /// that it ran inside the read-only sandbox (`workbench/not-confined` otherwise).
    pub(crate) async fn observe<G: Guest>(
        &self,
        guest: &G,
        profile: &str,
        args: &[String],
    ) -> Result<Observation, Refusal> {
        let spec = self.profile(profile)?;
        let obs = guest.exec(profile, args).await?;
        let mut argv = spec.argv.clone();
        argv.extend(args.iter().cloned());
        let timeout = std::time::Duration::from_secs(u64::from(spec.timeout_s));
        if !obs.ran_confined(&argv, timeout) {
            return Err(Refusal::NotConfined {
                profile: profile.to_owned(),
                argv: obs.argv,
            });
        }
        Ok(obs)
    }

    /// Whether the pack has a profile `name`.
    pub(crate) fn has_profile(&self, name: &str) -> bool {
        self.commands.get(name).is_some()
    }

    /// The pack's profile `name`, with an enforced mode, or the refusal.
    pub(crate) fn profile(&self, name: &str) -> Result<&CommandProfileSpec, Refusal> {
        let p = self
            .commands
            .get(name)
            .ok_or_else(|| Refusal::OutsideProfile {
                profile: name.to_owned(),
            })?;
        if p.mode.is_none() {
            return Err(Refusal::EffectModeMissing {
                profile: name.to_owned(),
            });
        }
        Ok(p)
    }
}
