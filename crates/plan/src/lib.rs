//! The closed vocabulary of task-pack plans.
//!
//! A Solver proposes a [`Candidate`] (`reach.plan.candidate.v1`, published as the JSON Schema
//! [`CANDIDATE_SCHEMA`]): a diagnosis and steps of four closed kinds naming pack refs only.
//! [`compile`] resolves it against the [`Vocabulary`] that `reach-taskpack` derives from an
//! activated pack, under the binding's [`BindingTerms`], and yields a [`StampedPlan`]: every
//! ref resolved, every effect class derived, the HIL need of each step, and digests over
//! canonical bytes; or one [`PlanRefusal`] with its `area/reason` code. [`PatchPolicy`]
//! (`sensorium-patch-policy.v1`) is the one implementation of applying and checking a patch,
//! run by the compiler on the pack's baseline and by the workbench on the real file.
//!
//! **Architecture Invariant:** the compiler reads no file and no clock. Everything it knows
//! comes in through its arguments; the same arguments give the same plan, byte for byte.
//!
//! **Architecture Invariant:** the compiler derives every effect class and every HIL need
//! itself, from the pack and the binding. It never takes a class, a digest or a HIL flag from a
//! candidate: the candidate's types have no field to carry one.
//!
//! **Architecture Invariant:** this crate knows no particular service, program or file: every
//! profile, service and target it resolves is a pack's, and what a pack means lives in the
//! pack's files. (The `testing` vocabulary is made up: a service `svc` and its `etc/app.conf`.)

#![forbid(unsafe_code)]

pub mod candidate;
pub mod compile;
pub mod patch_policy;
pub mod refusal;
pub mod review;
pub mod stamped;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod vocabulary;

pub use candidate::{
    CANDIDATE_FORMAT, Candidate, CandidateFormat, Edit, Line, LineError, MAX_CANDIDATE_BYTES,
    MAX_DIAGNOSIS_CHARS, RelativeTarget, Step, TargetError,
};
pub use compile::compile;
pub use patch_policy::{
    LineShape, PATCH_POLICY_FORMAT, PatchOutcome, PatchPolicy, PolicyError, PolicyFile, text_diff,
};
pub use refusal::{OutsideProfile, PatchRefusal, PlanRefusal};
pub use review::{
    CandidatePath, Concern, Finding, MAX_PROSE_CHARS, MAX_REVIEW_BYTES, REVIEW_FORMAT,
    REVIEW_SCHEMA, Review, ReviewFormat, ReviewRefusal, Verdict,
};
pub use stamped::{
    Action, DigestMismatch, STAMPED_FORMAT, StampedFormat, StampedPlan, StampedStep,
};
pub use vocabulary::{
    ArgSlot, BindingTerms, CommandProfile, EffectClass, EffectMode, HilMode, PackRef, Vocabulary,
};

/// The JSON Schema (draft 2020-12) of `reach.plan.candidate.v1`, exactly the [`Candidate`]
/// type: the very text prompts quote and a real model's constrained decoding uses.
pub const CANDIDATE_SCHEMA: &str = include_str!("../schema/candidate.v1.json");
