//! Why the workbench executed nothing, or stopped: `area/reason` codes.

use reach_digest::Sha256Digest;

use crate::guest::GuestError;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// the step's bytes are not a stamped step
    #[error("workbench/step-malformed: the step is not a stamped step: {reason}")]
    StepMalformed { reason: String },
    /// the step's digest does not match its bytes
    #[error("workbench/step-digest-mismatch: step {index}'s digest does not match its bytes")]
    StepDigest { index: usize },
    /// the profile is not one the pack lets a plan run
    #[error("plan/outside-profile: `{profile}` is not a command profile of the pack")]
    OutsideProfile { profile: String },
    /// the profile has no enforced effect mode
    #[error("workbench/effect-mode-missing: `{profile}` has no enforced effect mode")]
    EffectModeMissing { profile: String },
    /// the step's class is not the profile's mode
    #[error(
        "workbench/effect-class-mismatch: step {index} is stamped {stamped} but `{profile}` is {mode}"
    )]
    EffectClass {
        index: usize,
        profile: String,
        stamped: String,
        mode: String,
    },
    /// an observation did not run confined
    #[error(
        "workbench/not-confined: `{profile}` did not run in the read-only sandbox (ran {argv:?})"
    )]
    NotConfined { profile: String, argv: Vec<String> },
    /// the patch is outside the pack's patch policy (nothing was written)
    #[error("workbench/patch-outside-policy: {reason}")]
    PatchOutsidePolicy { reason: String },
    /// the real file is not the pre-image the plan was compiled against (nothing was written)
    #[error(
        "workbench/pre-image-drifted: {target} is {found} in the guest, the plan was compiled against {expected}"
    )]
    PreImageDrifted {
        target: String,
        expected: Sha256Digest,
        found: Sha256Digest,
    },
    /// the patch applied to the real file does not make the stamped post-image
    #[error(
        "workbench/post-image-mismatch: {target} would become {found}, the plan stamped {expected}"
    )]
    PostImageMismatch {
        target: String,
        expected: Sha256Digest,
        found: Sha256Digest,
    },
    /// the guest's bytes after the write are not the post-image
    #[error("workbench/write-not-confirmed: {target} reads back as {found}, expected {expected}")]
    WriteNotConfirmed {
        target: String,
        expected: Sha256Digest,
        found: Sha256Digest,
    },
    /// the unit is not one the pack admits
    #[error("workbench/restart-not-admitted: `{service}` is not a service of the pack")]
    RestartNotAdmitted { service: String },
    /// the verifier lacks one of the seven checks
    #[error("verifier/check-missing: the verifier has no `{check}` check")]
    CheckMissing { check: String },
    /// a check timed out on every attempt, or the whole run overran
    #[error("verifier/timeout: {check} timed out after {attempts} attempts")]
    VerifierTimeout { check: String, attempts: u32 },
    /// the verifier changed what its observation profile does not admit
    #[error("verifier/mutation-not-admitted: {detail}")]
    MutationNotAdmitted { detail: String },
    /// the broker or the guest refused or failed
    #[error("{0}")]
    Guest(#[from] GuestError),
}

impl Refusal {
    pub fn code(&self) -> &str {
        match self {
            Refusal::StepMalformed { .. } => "workbench/step-malformed",
            Refusal::StepDigest { .. } => "workbench/step-digest-mismatch",
            Refusal::OutsideProfile { .. } => "plan/outside-profile",
            Refusal::EffectModeMissing { .. } => "workbench/effect-mode-missing",
            Refusal::EffectClass { .. } => "workbench/effect-class-mismatch",
            Refusal::NotConfined { .. } => "workbench/not-confined",
            Refusal::PatchOutsidePolicy { .. } => "workbench/patch-outside-policy",
            Refusal::PreImageDrifted { .. } => "workbench/pre-image-drifted",
            Refusal::PostImageMismatch { .. } => "workbench/post-image-mismatch",
            Refusal::WriteNotConfirmed { .. } => "workbench/write-not-confirmed",
            Refusal::RestartNotAdmitted { .. } => "workbench/restart-not-admitted",
            Refusal::CheckMissing { .. } => "verifier/check-missing",
            Refusal::VerifierTimeout { .. } => "verifier/timeout",
            Refusal::MutationNotAdmitted { .. } => "verifier/mutation-not-admitted",
            Refusal::Guest(e) => e.code(),
        }
    }
}
