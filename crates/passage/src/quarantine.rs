//! The inference boundary: the payload a passage travels as ([`PassagePayload`]), and the
//! quarantine ([`quarantine`]) of what comes back. Only one JSON object of the turn's answer
//! schema passes: a `reach.plan.candidate.v1` (read by the plan's own parser) or a
//! `reach.plan.review.v1` whose every quote is the candidate under review's text at its path.
//! Prose, a Markdown fence, a second value or anything else is refused and reaches nothing.

use reach_digest::Sha256Digest;
use reach_plan::{Candidate, PlanRefusal, Review, ReviewRefusal};
use reach_taskpack::source::{Answer as AnswerKind, Role, Turn};
use serde::{Deserialize, Serialize};

use crate::render::Rendered;

/// The payload's schema tag.
pub const PASSAGE_SCHEMA: &str = "reach.room.passage/1";

/// The largest answer content the quarantine reads, in bytes.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// The largest payload [`PassagePayload::from_bytes`] reads, in bytes.
pub const MAX_PAYLOAD_BYTES: usize = 1024 * 1024;

/// One passage as it crosses the inference boundary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PassagePayload {
    /// [`PASSAGE_SCHEMA`].
    pub schema: String,
    pub role: Role,
    /// What the quarantine accepts back: `candidate` for a solver, `review` for a reviewer.
    pub answer: AnswerKind,
    pub system: String,
    pub user: String,
    pub max_completion_tokens: u64,
    /// What the answer may name beyond the published schema, for the runtime's decoding
    /// constraint ([`crate::constraint::narrowed`]). Absent: the published schema alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub narrowing: Option<crate::constraint::Narrowing>,
}

/// Why payload bytes were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadRefusal {
    /// the payload is {0} bytes; at most {MAX_PAYLOAD_BYTES} are read
    #[error("the payload is {0} bytes; at most {MAX_PAYLOAD_BYTES} are read")]
    TooLarge(usize),
    /// not a `reach.room.passage/1` payload: {0}
    #[error("not a `reach.room.passage/1` payload: {0}")]
    Schema(String),
}

impl PayloadRefusal {
    /// `passage/too-large` or `passage/schema`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::TooLarge(_) => "passage/too-large",
            Self::Schema(_) => "passage/schema",
        }
    }
}

impl PassagePayload {
    /// The payload of `rendered` under `turn` (its role, answer and completion bound).
    pub fn new(rendered: &Rendered, turn: &Turn) -> Self {
        Self {
            schema: PASSAGE_SCHEMA.to_owned(),
            role: turn.role,
            answer: turn.answer,
            system: rendered.system.clone(),
            user: rendered.user.clone(),
            max_completion_tokens: u64::from(turn.max_completion_tokens),
            narrowing: rendered.narrowing.clone(),
        }
    }

    /// Canonical bytes: serde_json of the struct, fields in declaration order.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a payload serializes")
    }

    /// sha256 of [`PassagePayload::to_bytes`].
    pub fn digest(&self) -> Sha256Digest {
        Sha256Digest::of(self.to_bytes())
    }

    /// Reads payload bytes strictly: no unknown or duplicate field, the schema tag, a role
    /// with its own answer kind.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, PayloadRefusal> {
        if bytes.len() > MAX_PAYLOAD_BYTES {
            return Err(PayloadRefusal::TooLarge(bytes.len()));
        }
        let p: Self =
            serde_json::from_slice(bytes).map_err(|e| PayloadRefusal::Schema(e.to_string()))?;
        if p.schema != PASSAGE_SCHEMA {
            return Err(PayloadRefusal::Schema(format!(
                "schema `{}`, expected `{PASSAGE_SCHEMA}`",
                p.schema
            )));
        }
        let paired = matches!(
            (p.role, p.answer),
            (Role::Solver, AnswerKind::Candidate) | (Role::Reviewer, AnswerKind::Review)
        );
        if !paired {
            return Err(PayloadRefusal::Schema(
                "a solver answers `candidate`, a reviewer `review`".to_owned(),
            ));
        }
        Ok(p)
    }
}

/// What the quarantine admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// `bytes`: the exact accepted bytes (the content without surrounding ASCII whitespace).
    Candidate {
        bytes: Vec<u8>,
        candidate: Candidate,
    },
    Review {
        bytes: Vec<u8>,
        review: Review,
    },
}

impl Answer {
    /// The exact accepted bytes.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Self::Candidate { bytes, .. } | Self::Review { bytes, .. } => bytes,
        }
    }
}

/// Why an answer was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuarantineRefusal {
    /// the answer is {0} bytes; at most {MAX_ANSWER_BYTES} are read
    #[error("the answer is {0} bytes; at most {MAX_ANSWER_BYTES} are read")]
    TooLarge(usize),
    /// the answer is not exactly one JSON object: {0}
    #[error("the answer is not exactly one JSON object: {0}")]
    NotJson(String),
    /// the candidate is refused ({code}): {refusal}
    #[error("the candidate is refused ({code}): {refusal}", code = .0.code(), refusal = .0)]
    Candidate(PlanRefusal),
    /// the review is refused ({code}): {refusal}
    #[error("the review is refused ({code}): {refusal}", code = .0.code(), refusal = .0)]
    Review(ReviewRefusal),
    /// a review is quarantined against the candidate under review, and none was given
    #[error("a review is quarantined against the candidate under review, and none was given")]
    NoCandidate,
    /// a candidate answer is quarantined against no candidate under review
    #[error("a candidate answer is quarantined against no candidate under review")]
    UnexpectedCandidate,
}

impl QuarantineRefusal {
    /// `quarantine/too-large`, `quarantine/not-json`, `quarantine/schema` (a candidate or
    /// review refused by its parser), `quarantine/quote-mismatch` (a review whose quote or
    /// path does not hold in the candidate under review), `quarantine/candidate-invalid`
    /// (the candidate under review is none), `quarantine/no-candidate` or
    /// `quarantine/unexpected-candidate`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::TooLarge(_) => "quarantine/too-large",
            Self::NotJson(_) => "quarantine/not-json",
            Self::Candidate(_) | Self::Review(ReviewRefusal::Schema { .. }) => "quarantine/schema",
            Self::Review(ReviewRefusal::QuoteMismatch { .. } | ReviewRefusal::BadPath { .. }) => {
                "quarantine/quote-mismatch"
            }
            Self::Review(ReviewRefusal::Candidate(_)) => "quarantine/candidate-invalid",
            Self::NoCandidate => "quarantine/no-candidate",
            Self::UnexpectedCandidate => "quarantine/unexpected-candidate",
        }
    }

    /// The code of the parser that refused, when one did (`plan/schema`, `review/bad-path`...).
    pub fn detail_code(&self) -> Option<&'static str> {
        match self {
            Self::Candidate(r) => Some(r.code()),
            Self::Review(r) => Some(r.code()),
            _ => None,
        }
    }
}

/// Quarantines `content`, a model's answer to `payload`. A review is checked against
/// `candidate_under_review` (the exact candidate bytes its passage carried).
pub fn quarantine(
    payload: &PassagePayload,
    content: &str,
    candidate_under_review: Option<&[u8]>,
) -> Result<Answer, QuarantineRefusal> {
    if content.len() > MAX_ANSWER_BYTES {
        return Err(QuarantineRefusal::TooLarge(content.len()));
    }
    let trimmed = content.trim_matches(|c: char| c.is_ascii_whitespace());
    if !(trimmed.starts_with('{') && trimmed.ends_with('}')) {
        return Err(QuarantineRefusal::NotJson(
            "it must start with `{` and end with `}` (no prose, no Markdown fence)".to_owned(),
        ));
    }
    serde_json::from_str::<serde::de::IgnoredAny>(trimmed)
        .map_err(|e| QuarantineRefusal::NotJson(e.to_string()))?;
    let bytes = trimmed.as_bytes().to_vec();
    match payload.answer {
        AnswerKind::Candidate => {
            if candidate_under_review.is_some() {
                return Err(QuarantineRefusal::UnexpectedCandidate);
            }
            let candidate = Candidate::parse(&bytes).map_err(QuarantineRefusal::Candidate)?;
            Ok(Answer::Candidate { bytes, candidate })
        }
        AnswerKind::Review => {
            let under = candidate_under_review.ok_or(QuarantineRefusal::NoCandidate)?;
            let review = Review::parse(&bytes).map_err(QuarantineRefusal::Review)?;
            review
                .check_quotes(under)
                .map_err(QuarantineRefusal::Review)?;
            Ok(Answer::Review { bytes, review })
        }
    }
}
