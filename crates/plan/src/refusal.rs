//! Why a candidate or a patch is refused, each with its exact `area/reason` code.

use crate::vocabulary::EffectClass;

/// Why the compiler refused a candidate. Every variant names what and where; [`code`] gives the
/// refusal code the rest of Reach reports.
///
/// [`code`]: PlanRefusal::code
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanRefusal {
    /// candidate refused at `{path}`: {reason}
    #[error("candidate refused at `{path}`: {reason}")]
    Schema {
        /// The JSON path of the offending value, e.g. `steps[1].effect_class` (`$`: the whole
        /// candidate).
        path: String,
        reason: String,
    },
    /// step {index} is outside the pack's profile: {what}
    #[error("step {index} is outside the pack's profile: {what}")]
    OutsideProfile { index: usize, what: OutsideProfile },
    /// the first step is {class}, not an observation
    #[error("the first step is {class}, not an observation", class = class_name(.class))]
    FirstStepNotObservation { class: EffectClass },
    /// the candidate has {count} steps; the pack admits at most {max}
    #[error("the candidate has {count} steps; the pack admits at most {max}")]
    TooManySteps { count: usize, max: usize },
    /// step {index}: {refusal}
    #[error("step {index}: {refusal}")]
    PatchOutsidePolicy { index: usize, refusal: PatchRefusal },
    /// the candidate does not end with its one `verify` step ({verifies} verify steps, the
    /// last a `{last}`)
    #[error(
        "the candidate does not end with its one `verify` step ({verifies} verify steps, the last a `{last}`)"
    )]
    VerifyNotLast { verifies: usize, last: &'static str },
}

impl PlanRefusal {
    /// The refusal code: `plan/schema`, `plan/outside-profile`,
    /// `plan/first-step-not-observation`, `plan/too-many-steps`,
    /// `workbench/patch-outside-policy` or `plan/verify-not-last`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Schema { .. } => "plan/schema",
            Self::OutsideProfile { .. } => "plan/outside-profile",
            Self::FirstStepNotObservation { .. } => "plan/first-step-not-observation",
            Self::TooManySteps { .. } => "plan/too-many-steps",
            Self::PatchOutsidePolicy { refusal, .. } => refusal.code(),
            Self::VerifyNotLast { .. } => "plan/verify-not-last",
        }
    }

    pub(crate) fn schema(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Schema {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

/// What a step named that the pack's vocabulary does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutsideProfile {
    /// no command profile `{profile}`
    #[error("no command profile `{profile}`")]
    UnknownProfile { profile: String },
    /// profile `{profile}` takes {expected} arguments, not {got}
    #[error("profile `{profile}` takes {expected} arguments, not {got}")]
    ArgCount {
        profile: String,
        expected: usize,
        got: usize,
    },
    /// argument {position} of profile `{profile}` is not one of its admitted values: `{value}`
    #[error(
        "argument {position} of profile `{profile}` is not one of its admitted values: `{value}`"
    )]
    ArgNotAdmitted {
        profile: String,
        position: usize,
        value: String,
    },
    /// no restartable service `{service}`
    #[error("no restartable service `{service}`")]
    UnknownService { service: String },
}

/// Why [`PatchPolicy::apply`](crate::PatchPolicy::apply) refused a patch. Every variant is
/// `workbench/patch-outside-policy`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchRefusal {
    /// patch target `{target}` is not admitted by the patch policy
    #[error("patch target `{target}` is not admitted by the patch policy")]
    TargetNotAdmitted { target: String },
    /// patch target `{target}` has no known baseline in the prepared system
    #[error("patch target `{target}` has no known baseline in the prepared system")]
    NoBaseline { target: String },
    /// the patch to `{target}` has no edits
    #[error("the patch to `{target}` has no edits")]
    NoEdits { target: String },
    /// edit {edit}: the line `{line}` occurs {found} times in `{target}`, not exactly once
    #[error("edit {edit}: the line `{line}` occurs {found} times in `{target}`, not exactly once")]
    LineNotExactlyOnce {
        target: String,
        edit: usize,
        line: String,
        found: usize,
    },
    /// edit {edit}: the added line `{line}` contains the forbidden `{forbidden}`
    #[error("edit {edit}: the added line `{line}` contains the forbidden `{forbidden}`")]
    ForbiddenSubstring {
        edit: usize,
        line: String,
        forbidden: String,
    },
    /// edit {edit}: the added line `{line}` matches no line shape of `{target}`
    #[error("edit {edit}: the added line `{line}` matches no line shape of `{target}`")]
    ShapeMismatch {
        target: String,
        edit: usize,
        line: String,
    },
    /// the patched `{target}` would be {bytes} bytes; the policy admits at most {max}
    #[error("the patched `{target}` would be {bytes} bytes; the policy admits at most {max}")]
    TooLarge {
        target: String,
        bytes: u64,
        max: u64,
    },
}

impl PatchRefusal {
    /// Always `workbench/patch-outside-policy`: the compiler and the workbench refuse a patch
    /// with the same code.
    pub fn code(&self) -> &'static str {
        "workbench/patch-outside-policy"
    }
}

fn class_name(class: &EffectClass) -> &'static str {
    match class {
        EffectClass::Observation => "an observation",
        EffectClass::ContainedMutation => "a contained mutation",
    }
}
