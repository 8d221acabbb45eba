//! What the compiler resolves a candidate against: the activated pack's vocabulary.
//!
//! `reach-taskpack` builds a [`Vocabulary`] from a verified pack; this crate reads no pack file.
//! (Interface fixed for issue #27's parallel work; the helper owning this crate may add fields
//! and methods but not rename these.)

use std::collections::{BTreeMap, BTreeSet};

use reach_digest::Sha256Digest;
use serde::{Deserialize, Serialize};

/// A step's effect class, derived by the host, never taken from a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EffectClass {
    Observation,
    ContainedMutation,
}

/// A command profile's effect mode as the pack declares it; `None` in [`CommandProfile::mode`]
/// means no enforced mode, which compiles as a mutation.
pub type EffectMode = EffectClass;

/// When the operator is asked: `each-step` (every step) or `each-mutation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HilMode {
    /// Every mutation asks; observations do not.
    EachMutation,
    /// Every step asks (the binding's safe default). Stricter than `EachMutation`.
    EachStep,
}

/// Which pack a plan was compiled against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackRef {
    pub name: String,
    pub version: u64,
    /// Digest of the signed `facts.json`.
    pub facts_digest: Sha256Digest,
    /// Digest of `task-profile.toml`.
    pub profile_digest: Sha256Digest,
}

/// One positional argument slot: the candidate's argument must be one of these values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArgSlot {
    pub one_of: Vec<String>,
}

/// An admitted command profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandProfile {
    /// The enforced effect mode; `None`: not enforced (compiled as a mutation).
    pub mode: Option<EffectMode>,
    pub args: Vec<ArgSlot>,
    /// Where it came from, e.g. `command-profiles.toml#service-status`.
    pub source: String,
}

/// The vocabulary of one activated pack.
#[derive(Debug, Clone)]
pub struct Vocabulary {
    pub pack: PackRef,
    pub commands: BTreeMap<String, CommandProfile>,
    /// Units a restart step may name.
    pub services: BTreeSet<String>,
    /// `sensorium-patch-policy.v1`, parsed.
    pub patch_policy: crate::patch_policy::PatchPolicy,
    /// Each patch target's content in the prepared system (from the image and prepared specs),
    /// keyed by relative target; a target absent here has no known baseline and is refused.
    pub baselines: BTreeMap<String, String>,
    /// The profile's HIL minimum.
    pub hil_minimum: HilMode,
    /// `recreate-prepared-system`.
    pub rollback: String,
    pub max_steps: usize,
}

/// What the binding adds at compile time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindingTerms {
    pub hil: HilMode,
    /// The pack generation the plan is compiled under (stamped into the plan).
    pub generation: u64,
}
