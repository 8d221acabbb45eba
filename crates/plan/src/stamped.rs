//! `reach.plan.stamped.v1`: a compiled candidate, every ref resolved and every class derived
//! by the host, bound by digests over its canonical bytes.
//!
//! Canonical bytes are `serde_json` of the struct: fields in declaration order, no map whose
//! order could vary, no float. A step's digest is over its canonical bytes without its
//! `digest` field; the plan's digest is over its canonical bytes without its own `digest`
//! field (the step digests included). The workbench recomputes a step's digest from the bytes
//! it receives with [`StampedStep::recompute_digest`].

use reach_digest::Sha256Digest;
use serde::{Deserialize, Serialize};

use crate::candidate::{Edit, RelativeTarget};
use crate::vocabulary::{EffectClass, HilMode, PackRef};

/// The stamped plan's format tag.
pub const STAMPED_FORMAT: &str = "reach.plan.stamped.v1";

/// The one admitted value of a stamped plan's `format` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StampedFormat {
    #[serde(rename = "reach.plan.stamped.v1")]
    V1,
}

/// A compiled plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StampedPlan {
    pub format: StampedFormat,
    pub pack: PackRef,
    /// The pack generation the plan was compiled under.
    pub generation: u64,
    /// The HIL mode in force: the stricter of the binding's and the pack's minimum.
    pub hil: HilMode,
    /// SHA-256 of the exact candidate bytes.
    pub candidate_digest: Sha256Digest,
    /// The candidate's diagnosis, inert.
    pub diagnosis: String,
    pub steps: Vec<StampedStep>,
    /// Over [`StampedPlan::canonical_bytes`].
    pub digest: Sha256Digest,
}

/// One compiled step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StampedStep {
    /// Position in the plan, from 0.
    pub index: usize,
    #[serde(deserialize_with = "action")]
    pub action: Action,
    /// Derived by the compiler from the pack, never from the candidate.
    pub effect_class: EffectClass,
    /// The pack file and entry the action resolved against, e.g.
    /// `command-profiles.toml#service-status`.
    pub source: String,
    /// Whether the operator must approve this step before it runs.
    pub hil_required: bool,
    /// How the step is undone (the pack's rollback, e.g. `recreate-prepared-system`).
    pub rollback: String,
    /// Over [`StampedStep::canonical_bytes`].
    pub digest: Sha256Digest,
}

/// A step's resolved action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Action {
    /// An admitted command profile with admitted arguments.
    Run { profile: String, args: Vec<String> },
    /// An admitted patch, checked on the baseline: the workbench applies `edits` to the real
    /// file with the same policy and refuses unless it finds `pre_digest` and makes
    /// `post_digest`.
    Patch {
        target: RelativeTarget,
        pre_digest: Sha256Digest,
        post_digest: Sha256Digest,
        diff: String,
        #[serde(deserialize_with = "crate::candidate::edits")]
        edits: Vec<Edit>,
    },
    /// An admitted service.
    Restart { service: String },
    /// The pack's verifier.
    Verify {},
}

impl Action {
    /// The step's kind as a candidate and a stamped plan write it (its serde tag).
    pub fn kind(&self) -> &'static str {
        match self {
            Action::Run { .. } => "run",
            Action::Patch { .. } => "patch",
            Action::Restart { .. } => "restart",
            Action::Verify {} => "verify",
        }
    }
}

/// A step's action, through [`crate::candidate::string_tagged`]: a `kind` that is a variant's
/// index is refused, not read as that variant.
fn action<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Action, D::Error> {
    crate::candidate::string_tagged(d, "kind")
}

/// Why a stamped plan's digests do not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DigestMismatch {
    /// step {index}'s digest does not match its bytes
    #[error("step {index}'s digest does not match its bytes")]
    Step { index: usize },
    /// the plan's digest does not match its bytes
    #[error("the plan's digest does not match its bytes")]
    Plan,
}

// The digest-less views. Field order and names must stay those of the structs above; a test
// compares each view with the struct's own serialization minus `digest`.

#[derive(Serialize)]
struct StepBody<'a> {
    index: usize,
    action: &'a Action,
    effect_class: EffectClass,
    source: &'a str,
    hil_required: bool,
    rollback: &'a str,
}

#[derive(Serialize)]
struct PlanBody<'a> {
    format: StampedFormat,
    pack: &'a PackRef,
    generation: u64,
    hil: HilMode,
    candidate_digest: Sha256Digest,
    diagnosis: &'a str,
    steps: &'a [StampedStep],
}

fn to_bytes(value: &impl Serialize) -> Vec<u8> {
    // Serializing these types cannot fail: every map key is a string and there is no float.
    serde_json::to_vec(value).unwrap_or_default()
}

impl StampedStep {
    /// The step's canonical bytes without its `digest` field.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        to_bytes(&StepBody {
            index: self.index,
            action: &self.action,
            effect_class: self.effect_class,
            source: &self.source,
            hil_required: self.hil_required,
            rollback: &self.rollback,
        })
    }

    /// The digest these bytes should carry.
    pub fn recompute_digest(&self) -> Sha256Digest {
        Sha256Digest::of(self.canonical_bytes())
    }
}

impl StampedPlan {
    /// The plan's canonical bytes without its own `digest` field (each step with its digest).
    pub fn canonical_bytes(&self) -> Vec<u8> {
        to_bytes(&PlanBody {
            format: self.format,
            pack: &self.pack,
            generation: self.generation,
            hil: self.hil,
            candidate_digest: self.candidate_digest,
            diagnosis: &self.diagnosis,
            steps: &self.steps,
        })
    }

    /// The digest these bytes should carry.
    pub fn recompute_digest(&self) -> Sha256Digest {
        Sha256Digest::of(self.canonical_bytes())
    }

    /// Checks every step's digest, then the plan's.
    pub fn verify_digests(&self) -> Result<(), DigestMismatch> {
        for step in &self.steps {
            if step.recompute_digest() != step.digest {
                return Err(DigestMismatch::Step { index: step.index });
            }
        }
        if self.recompute_digest() != self.digest {
            return Err(DigestMismatch::Plan);
        }
        Ok(())
    }
}
