//! Rendering a passage: the turn's prompt document with every placeholder substituted
//! (docs/taskpacks.md, "flow.toml and prompts/*.md"), the untrusted parts fenced, and the
//! manifest of the evidence it carries.
//!
//! The template is scanned once: text substituted for a placeholder is never scanned again, so
//! a goal holding `{{vocabulary}}` stays that text. The rendered system and user messages are
//! then checked whole: no caller-named host path, no Sigil id, at most the turn's
//! `max_prompt_tokens` (estimated as ceil(bytes / 4)).

use reach_digest::Sha256Digest;
use reach_plan::EffectClass;
use reach_taskpack::VerifiedPack;

use crate::constraint::Narrowing;
use reach_taskpack::source::{Placeholder, Role, Sources, Turn};
use serde::{Deserialize, Serialize};

use crate::evidence::{Evidence, EvidenceKind};
use crate::fence::{FenceRefusal, fence};

/// The text `{{evidence}}` becomes when the passage carries none.
pub const NO_EVIDENCE: &str = "(none)";

/// What one passage is rendered from. Everything but the role is untrusted text.
#[derive(Debug, Clone, Copy)]
pub struct RenderInputs<'a> {
    pub role: Role,
    /// The requester's goal.
    pub goal: &'a str,
    /// The exact candidate bytes under review: a reviewer's passage has them, a solver's not.
    pub candidate: Option<&'a [u8]>,
    /// At most one input of each kind, each a kind the turn lists.
    pub evidence: &'a [Evidence],
    /// Host text that must not reach a model (the state directory, the workspace...).
    pub forbidden: &'a [&'a str],
}

/// A rendered passage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub role: Role,
    pub system: String,
    pub user: String,
    pub evidence: EvidenceManifest,
    /// The answer's narrowing: the pack's vocabulary for a Solver, the candidate's values for
    /// a Reviewer.
    pub narrowing: Option<crate::constraint::Narrowing>,
}

/// Which evidence a passage carried, in the order it is fenced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvidenceManifest {
    pub entries: Vec<ManifestEntry>,
}

/// One fenced evidence input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestEntry {
    pub kind: EvidenceKind,
    /// sha256 of the content bytes, the digest its fence names.
    pub digest: Sha256Digest,
    pub bytes: u64,
}

impl EvidenceManifest {
    /// Canonical bytes: serde_json of the struct, fields in declaration order.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a manifest serializes")
    }

    /// sha256 of [`EvidenceManifest::to_bytes`].
    pub fn digest(&self) -> Sha256Digest {
        Sha256Digest::of(self.to_bytes())
    }
}

/// Why a passage was not rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderRefusal {
    /// the {role} turn does not admit `{kind}` evidence
    #[error("the {role} turn does not admit `{kind}` evidence", role = .role.name())]
    EvidenceNotAdmitted { role: Role, kind: &'static str },
    /// two `{0}` evidence inputs
    #[error("two `{0}` evidence inputs")]
    EvidenceTwice(&'static str),
    /// a reviewer's passage needs the candidate under review
    #[error("a reviewer's passage needs the candidate under review")]
    CandidateMissing,
    /// a solver's passage carries no candidate
    #[error("a solver's passage carries no candidate")]
    CandidateNotAdmitted,
    /// the candidate under review is not UTF-8
    #[error("the candidate under review is not UTF-8")]
    CandidateNotUtf8,
    /// the prompt document `{0}` is not a prompt of the pack
    #[error("the prompt document `{0}` is not a prompt of the pack")]
    PromptMissing(String),
    /// the prompt lacks the placeholder for something the passage carries
    #[error("the prompt `{prompt}` has no `{{{{{placeholder}}}}}` for what the passage carries")]
    PlaceholderMissing {
        prompt: String,
        placeholder: &'static str,
    },
    /// the prompt holds a placeholder the role has no value for
    #[error("the prompt `{prompt}` holds `{{{{{placeholder}}}}}`, which a {role} passage has no value for", role = .role.name())]
    PlaceholderNotAdmitted {
        prompt: String,
        placeholder: &'static str,
        role: Role,
    },
    /// {0}
    #[error(transparent)]
    Fence(FenceRefusal),
    /// the prompt is about {tokens} tokens; the turn admits {max}
    #[error("the prompt is about {tokens} tokens; the turn admits {max}")]
    PromptTooLarge { tokens: u64, max: u32 },
    /// the prompt would carry a host path the caller named
    #[error("the prompt would carry a host path the caller named")]
    HostPath,
    /// the prompt would carry a Sigil id
    #[error("the prompt would carry a Sigil id")]
    Sigil,
}

impl RenderRefusal {
    /// `render/<reason>`: `evidence-not-admitted`, `evidence-twice`, `candidate-missing`,
    /// `candidate-not-admitted`, `candidate-not-utf8`, `prompt-missing`,
    /// `placeholder-missing`, `placeholder-not-admitted`, `marker-in-content` (or
    /// `bad-kind`, an evidence kind no fence takes), `prompt-too-large`, `host-path`, `sigil`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::EvidenceNotAdmitted { .. } => "render/evidence-not-admitted",
            Self::EvidenceTwice(_) => "render/evidence-twice",
            Self::CandidateMissing => "render/candidate-missing",
            Self::CandidateNotAdmitted => "render/candidate-not-admitted",
            Self::CandidateNotUtf8 => "render/candidate-not-utf8",
            Self::PromptMissing(_) => "render/prompt-missing",
            Self::PlaceholderMissing { .. } => "render/placeholder-missing",
            Self::PlaceholderNotAdmitted { .. } => "render/placeholder-not-admitted",
            Self::Fence(FenceRefusal::MarkerInContent { .. }) => "render/marker-in-content",
            Self::Fence(_) => "render/bad-kind",
            Self::PromptTooLarge { .. } => "render/prompt-too-large",
            Self::HostPath => "render/host-path",
            Self::Sigil => "render/sigil",
        }
    }
}

/// The prefix of a Sigil id (`sigil_` and 32 lowercase hex digits).
const SIGIL_PREFIX: &str = "sigil_";

/// Whether `text` holds a Sigil id: `sigil_` followed by 32 lowercase hex digits (the shape
/// `reach-portal` refuses in a Cut; reimplemented here, not shared).
pub fn contains_sigil(text: &str) -> bool {
    text.match_indices(SIGIL_PREFIX).any(|(i, _)| {
        let rest = &text.as_bytes()[i + SIGIL_PREFIX.len()..];
        rest.len() >= 32
            && rest[..32]
                .iter()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
    })
}

/// The estimate of a prompt's tokens: ceil(bytes / 4).
pub fn estimate_tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

/// Renders the passage of `inputs.role` from `pack`.
pub fn render(pack: &VerifiedPack, inputs: &RenderInputs<'_>) -> Result<Rendered, RenderRefusal> {
    let sources = pack.sources();
    let turn = sources.flow.turn(inputs.role);
    let evidence = ordered_evidence(turn, inputs)?;
    let candidate = match (inputs.role, inputs.candidate) {
        (Role::Reviewer, None) => return Err(RenderRefusal::CandidateMissing),
        (Role::Solver, Some(_)) => return Err(RenderRefusal::CandidateNotAdmitted),
        (_, Some(bytes)) => {
            Some(std::str::from_utf8(bytes).map_err(|_| RenderRefusal::CandidateNotUtf8)?)
        }
        (_, None) => None,
    };
    let doc = sources
        .prompts
        .get(&turn.prompt)
        .ok_or_else(|| RenderRefusal::PromptMissing(turn.prompt.clone()))?;
    let needed = [
        (true, Placeholder::Goal),
        (candidate.is_some(), Placeholder::Candidate),
        (!evidence.is_empty(), Placeholder::Evidence),
    ];
    if let Some((_, p)) = needed
        .iter()
        .find(|(need, p)| *need && !doc.placeholders.contains(p))
    {
        return Err(RenderRefusal::PlaceholderMissing {
            prompt: turn.prompt.clone(),
            placeholder: p.name(),
        });
    }

    let fenced = |kind: &str, content: &str| fence(kind, content).map_err(RenderRefusal::Fence);
    let goal = fenced("goal", inputs.goal)?;
    let candidate = candidate.map(|c| fenced("candidate", c)).transpose()?;
    let evidence_text = if evidence.is_empty() {
        NO_EVIDENCE.to_owned()
    } else {
        evidence
            .iter()
            .map(|e| fenced(e.kind_name(), &e.content))
            .collect::<Result<Vec<_>, _>>()?
            .join("\n\n")
    };
    let vocab = vocabulary_text(sources);
    let value = |p: Placeholder| -> Option<&str> {
        match (p, inputs.role) {
            (Placeholder::Goal, _) => Some(&goal),
            (Placeholder::Vocabulary, _) => Some(&vocab),
            (Placeholder::CandidateSchema, Role::Solver) => Some(reach_plan::CANDIDATE_SCHEMA),
            (Placeholder::ReviewSchema, Role::Reviewer) => Some(reach_plan::REVIEW_SCHEMA),
            (Placeholder::Candidate, Role::Reviewer) => candidate.as_deref(),
            (Placeholder::Evidence, _) => Some(&evidence_text),
            _ => None,
        }
    };
    let substitute = |template: &str| -> Result<String, RenderRefusal> {
        let mut out = String::with_capacity(template.len());
        let mut rest = template;
        while let Some(open) = rest.find("{{") {
            out.push_str(&rest[..open]);
            let after = &rest[open + 2..];
            let close = after.find("}}").unwrap_or(after.len());
            let name = &after[..close];
            let refuse = || RenderRefusal::PlaceholderNotAdmitted {
                prompt: turn.prompt.clone(),
                placeholder: Placeholder::ALL
                    .into_iter()
                    .find(|p| p.name() == name)
                    .map_or("?", |p| p.name()),
                role: inputs.role,
            };
            let p = Placeholder::ALL
                .into_iter()
                .find(|p| p.name() == name)
                .ok_or_else(refuse)?;
            out.push_str(value(p).ok_or_else(refuse)?);
            rest = after.get(close + 2..).unwrap_or("");
        }
        out.push_str(rest);
        Ok(out)
    };
    let system = substitute(&doc.system)?;
    let user = substitute(&doc.user)?;

    for text in [&system, &user] {
        if inputs
            .forbidden
            .iter()
            .any(|f| !f.is_empty() && text.contains(f))
        {
            return Err(RenderRefusal::HostPath);
        }
        if contains_sigil(text) {
            return Err(RenderRefusal::Sigil);
        }
    }
    let tokens = estimate_tokens(system.len() + user.len());
    if tokens > u64::from(turn.max_prompt_tokens) {
        return Err(RenderRefusal::PromptTooLarge {
            tokens,
            max: turn.max_prompt_tokens,
        });
    }
    let entries = evidence
        .iter()
        .map(|e| ManifestEntry {
            kind: e.kind,
            digest: e.digest(),
            bytes: e.content.len() as u64,
        })
        .collect();
    Ok(Rendered {
        role: inputs.role,
        system,
        user,
        evidence: EvidenceManifest { entries },
        narrowing: match (inputs.role, inputs.candidate) {
            (Role::Reviewer, Some(c)) => Narrowing::review(c),
            _ => Some(Narrowing::candidate(&pack.vocabulary())),
        },
    })
}

/// The evidence inputs in the order of the turn's `evidence` list, each admitted, none twice.
fn ordered_evidence<'a>(
    turn: &Turn,
    inputs: &RenderInputs<'a>,
) -> Result<Vec<&'a Evidence>, RenderRefusal> {
    for (i, e) in inputs.evidence.iter().enumerate() {
        if !turn.evidence.contains(&e.kind) {
            return Err(RenderRefusal::EvidenceNotAdmitted {
                role: inputs.role,
                kind: e.kind_name(),
            });
        }
        if inputs.evidence[..i].iter().any(|o| o.kind == e.kind) {
            return Err(RenderRefusal::EvidenceTwice(e.kind_name()));
        }
    }
    Ok(turn
        .evidence
        .iter()
        .filter_map(|k| inputs.evidence.iter().find(|e| e.kind == *k))
        .collect())
}

fn mode_name(mode: Option<EffectClass>) -> &'static str {
    match mode {
        Some(EffectClass::Observation) => "observation",
        Some(EffectClass::ContainedMutation) => "contained-mutation",
        None => "no enforced mode: compiled as a mutation",
    }
}

fn quoted<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    items
        .into_iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a candidate may name, from the pack: deterministic text (profiles in the pack's
/// order, services and targets sorted).
pub fn vocabulary_text(sources: &Sources) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "At most {} steps; the first is an observation.\n\n",
        sources.profile.max_steps
    ));
    out.push_str(
        "Command profiles (a `run` step's `profile`; one argument per slot, one of its values):\n",
    );
    for p in sources
        .commands
        .profiles
        .iter()
        .filter(|p| !p.verifier_only)
    {
        out.push_str(&format!("- `{}` ({})", p.name, mode_name(p.mode)));
        if p.args.is_empty() {
            out.push_str(": no arguments\n");
        } else {
            out.push('\n');
            for (i, slot) in p.args.iter().enumerate() {
                out.push_str(&format!(
                    "  - args[{i}]: one of {}\n",
                    quoted(slot.one_of.iter().map(String::as_str))
                ));
            }
        }
    }
    let services = sources.services();
    out.push_str(&format!(
        "\nServices (a `restart` step's `service`): {}\n",
        if services.is_empty() {
            "(none)".to_owned()
        } else {
            quoted(services.iter().map(String::as_str))
        }
    ));
    out.push_str(
        "\nPatch targets (a `patch` step's `target`; every line a patch adds must match one of \
         the target's line shapes, anchored):\n",
    );
    for f in sources.patch_policy.files() {
        out.push_str(&format!(
            "- `{}` (at most {} bytes)\n",
            f.target, f.max_bytes
        ));
        for shape in &f.line_shapes {
            out.push_str(&format!("  - `{}`\n", shape.source()));
        }
    }
    let forbidden = sources.patch_policy.forbidden();
    out.push_str(&format!(
        "\nRefused in any added line: {}",
        if forbidden.is_empty() {
            "(nothing)".to_owned()
        } else {
            quoted(forbidden.iter().map(String::as_str))
        }
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigils_are_found_by_shape() {
        assert!(contains_sigil("x sigil_0123456789abcdef0123456789abcdef y"));
        assert!(!contains_sigil("sigil_0123456789abcdef0123456789abcde"));
        assert!(!contains_sigil("sigil_0123456789ABCDEF0123456789abcdef"));
        assert!(!contains_sigil("no sigil here"));
    }

    #[test]
    fn tokens_round_up() {
        assert_eq!(estimate_tokens(0), 0);
        assert_eq!(estimate_tokens(1), 1);
        assert_eq!(estimate_tokens(4), 1);
        assert_eq!(estimate_tokens(5), 2);
    }
}
