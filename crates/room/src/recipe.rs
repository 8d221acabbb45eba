//! `reach.room.recipe.v1`: what the requester gets back from a concluded Room: the admitted
//! candidate's diagnosis and exact patch steps, the verifier result, and links (digests and
//! ids) to everything else. It retains links, not copies: no prompt, no raw output, no host
//! path ([`retention_check`]).

use reach_digest::Sha256Digest;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::fact::RunId;
use crate::record::VerifierResult;

pub const RECIPE_FORMAT: &str = "reach.room.recipe.v1";

/// What a recipe retains: links and digests, never copies.
pub const RETAINED: &str = "links-and-digests";

/// The fence marker of rendered prompt text; a recipe carrying it carries a prompt.
pub const FENCE_MARKER: &str = "BEGIN UNTRUSTED";

/// The one admitted value of a recipe's `format` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RecipeFormat {
    #[serde(rename = "reach.room.recipe.v1")]
    V1,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    pub format: RecipeFormat,
    pub room: RunId,
    pub pack: String,
    pub pack_generation: u64,
    /// The admitted candidate's diagnosis, inert.
    pub diagnosis: String,
    pub patch: RecipePatch,
    pub verifier: VerifierResult,
    pub links: Links,
    pub disclosure: Disclosure,
}

/// The admitted candidate's patch steps, as the candidate wrote them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecipePatch {
    pub candidate_digest: Sha256Digest,
    pub plan_digest: Sha256Digest,
    /// Every step of kind `patch`, in order, as JSON values of the candidate.
    pub steps: Vec<Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Links {
    /// Every fact of the Room up to the conclusion, by digest, in order.
    pub facts: Vec<Sha256Digest>,
    pub execution_records: Vec<Sha256Digest>,
    /// The ids of the HIL requests the operator answered.
    pub hil_requests: Vec<String>,
    /// The digest of the passing verifier's evidence (its `verifier-result` content).
    pub verifier_evidence: Sha256Digest,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Disclosure {
    /// E.g. `deterministic-inference/real-execution`.
    pub evidence_class: String,
    /// The model runtime's name (e.g. the fixture's), never its address.
    pub model_runtime: String,
    /// Always [`RETAINED`].
    pub retained: String,
    /// The id of the key that signs the recipe.
    pub signer: String,
}

/// Why a candidate's patch steps could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the admitted candidate is not a JSON object with `steps` and `diagnosis`")]
pub struct NotACandidate;

/// The admitted candidate's diagnosis and patch steps (each step whose `kind` is `patch`).
pub fn admitted_parts(candidate: &str) -> Result<(String, Vec<Value>), NotACandidate> {
    let v: Value = serde_json::from_str(candidate).map_err(|_| NotACandidate)?;
    let diagnosis = v
        .get("diagnosis")
        .and_then(Value::as_str)
        .ok_or(NotACandidate)?
        .to_owned();
    let steps = v
        .get("steps")
        .and_then(Value::as_array)
        .ok_or(NotACandidate)?
        .iter()
        .filter(|s| s.get("kind").and_then(Value::as_str) == Some("patch"))
        .cloned()
        .collect();
    Ok((diagnosis, steps))
}

impl Recipe {
    /// `serde_json` of the recipe: fields in declaration order, no whitespace.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        // Cannot fail: string keys only, no float.
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn digest(&self) -> Sha256Digest {
        Sha256Digest::of(self.canonical_bytes())
    }
}

/// What a retained record must not carry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RetentionViolation {
    #[error("the record carries a forbidden string (entry {index} of the caller's list)")]
    HostPath { index: usize },
    #[error("the record carries prompt text (a `{FENCE_MARKER}` fence)")]
    PromptText,
}

impl RetentionViolation {
    pub fn code(&self) -> &'static str {
        match self {
            Self::HostPath { .. } => "room/retention-host-path",
            Self::PromptText => "room/retention-prompt-text",
        }
    }
}

/// Refuses `bytes` if they contain any of `forbidden` (the host paths the caller knows: the
/// workspace, the state directory…) or a fence marker of rendered prompt text. An empty
/// forbidden string is ignored.
pub fn retention_check(bytes: &[u8], forbidden: &[&str]) -> Result<(), RetentionViolation> {
    let contains =
        |needle: &[u8]| !needle.is_empty() && bytes.windows(needle.len()).any(|w| w == needle);
    if let Some(index) = forbidden.iter().position(|f| contains(f.as_bytes())) {
        return Err(RetentionViolation::HostPath { index });
    }
    if contains(FENCE_MARKER.as_bytes()) {
        return Err(RetentionViolation::PromptText);
    }
    Ok(())
}
