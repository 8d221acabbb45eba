//! Room facts and what ward signs: the one signing input every signed Room record uses, and
//! its verification. (The fact types themselves follow below this section.)

use std::fmt;

use reach_digest::Sha256Digest;
use reach_plan::HilMode;
use reach_taskpack::source::Role;
use ring::signature::{ED25519, UnparsedPublicKey};
use serde::{Deserialize, Serialize};

/// What a signed Room record is: each kind has its own format string and signing context, so
/// a signature over one kind never verifies as another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SignedKind {
    /// A Room fact (`reach.room.fact.v1`).
    Fact,
    /// An experiment's execution record (`reach.room.execution-record.v1`).
    ExecutionRecord,
    /// The recipe (`reach.room.recipe.v1`).
    Recipe,
}

impl SignedKind {
    pub const ALL: [SignedKind; 3] = [
        SignedKind::Fact,
        SignedKind::ExecutionRecord,
        SignedKind::Recipe,
    ];

    /// The wire name (`fact`, `execution-record`, `recipe`).
    pub fn name(self) -> &'static str {
        match self {
            SignedKind::Fact => "fact",
            SignedKind::ExecutionRecord => "execution-record",
            SignedKind::Recipe => "recipe",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The `format` the record's JSON must carry as its top-level `format` field.
    pub fn format(self) -> &'static str {
        match self {
            SignedKind::Fact => "reach.room.fact.v1",
            SignedKind::ExecutionRecord => "reach.room.execution-record.v1",
            SignedKind::Recipe => "reach.room.recipe.v1",
        }
    }
}

/// Largest record ward signs, in bytes.
pub const MAX_SIGNED_BYTES: usize = 256 * 1024;

/// The exact bytes the node's ed25519 key signs for a record of `kind`: a context naming the
/// kind, a NUL, then the record's canonical bytes.
pub fn signing_input(kind: SignedKind, bytes: &[u8]) -> Vec<u8> {
    let mut input = Vec::with_capacity(32 + bytes.len());
    input.extend_from_slice(b"reach.room.signed.v1/");
    input.extend_from_slice(kind.name().as_bytes());
    input.push(0);
    input.extend_from_slice(bytes);
    input
}

/// Why a record is not what ward would sign, or a signature does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureRefusal {
    #[error("record is larger than {MAX_SIGNED_BYTES} bytes")]
    TooLarge,
    #[error("record is not a JSON object whose format is {0}")]
    Format(&'static str),
    #[error("signature does not verify under the node's key")]
    BadSignature,
}

impl SignatureRefusal {
    pub fn code(&self) -> &'static str {
        match self {
            SignatureRefusal::TooLarge => "room-sign/too-large",
            SignatureRefusal::Format(_) => "room-sign/format",
            SignatureRefusal::BadSignature => "room-sign/bad-signature",
        }
    }
}

/// Whether `bytes` are a record ward may sign as `kind`: bounded, one JSON object whose
/// `format` is the kind's.
pub fn check_signable(kind: SignedKind, bytes: &[u8]) -> Result<(), SignatureRefusal> {
    if bytes.len() > MAX_SIGNED_BYTES {
        return Err(SignatureRefusal::TooLarge);
    }
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|_| SignatureRefusal::Format(kind.format()))?;
    match value.get("format").and_then(|f| f.as_str()) {
        Some(f) if f == kind.format() => Ok(()),
        _ => Err(SignatureRefusal::Format(kind.format())),
    }
}

/// Verify `signature` over a record of `kind` under the node's raw 32-byte ed25519 public key.
pub fn verify(
    kind: SignedKind,
    bytes: &[u8],
    signature: &[u8],
    public_key: &[u8],
) -> Result<(), SignatureRefusal> {
    UnparsedPublicKey::new(&ED25519, public_key)
        .verify(&signing_input(kind, bytes), signature)
        .map_err(|_| SignatureRefusal::BadSignature)
}

// ---------------------------------------------------------------------------------------------
// The facts.

/// The fact's format tag.
pub const FACT_FORMAT: &str = "reach.room.fact.v1";

/// The one admitted value of a fact's `format` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FactFormat {
    #[serde(rename = "reach.room.fact.v1")]
    V1,
}

/// A run's (a Room's) id: `run-` and 1 to 64 lowercase hex characters. Opaque: it names no
/// host, path or person.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RunId(String);

impl RunId {
    pub fn new(id: impl Into<String>) -> Result<Self, FactRefusal> {
        let id = id.into();
        let ok = id.strip_prefix("run-").is_some_and(|h| {
            (1..=64).contains(&h.len()) && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        });
        if ok {
            Ok(Self(id))
        } else {
            Err(FactRefusal::Malformed(format!(
                "`{id}` is not a run id (`run-<hex>`)"
            )))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for RunId {
    type Error = FactRefusal;
    fn try_from(s: String) -> Result<Self, FactRefusal> {
        Self::new(s)
    }
}

impl From<RunId> for String {
    fn from(r: RunId) -> String {
        r.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One fact of a Room: the `seq`th, chained to the one before by `prev`, the digest of that
/// fact's canonical bytes. `at_ms` is the caller's clock (Unix milliseconds); the Room reads
/// none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoomFact {
    pub format: FactFormat,
    pub room: RunId,
    /// 0 for the `opened` fact, then one more per fact.
    pub seq: u64,
    /// `None` only for the `opened` fact.
    pub prev: Option<Sha256Digest>,
    pub at_ms: i64,
    pub body: FactBody,
}

/// What happened, by kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum FactBody {
    /// The Room exists: which pack, profile, goal, participants and budget.
    Opened(Opened),
    /// Room mechanics opened a participant's turn (one passage each).
    TurnOpened(TurnOpened),
    /// One passage of the open turn went through the inference boundary.
    Passage(Passage),
    /// The Solver proposed the candidate its passage answered.
    Proposal(Proposal),
    /// The Reviewer reviewed exactly the round's proposal.
    Review(ReviewFact),
    /// The Chair decided on the round's proposal.
    ChairDecision(ChairDecision),
    /// An admitted plan ran on a fresh instance.
    Experiment(ExperimentFact),
    /// The verifier passed; the recipe is published.
    Concluded(Concluded),
    /// The Room ended without a recipe.
    Ended(Ended),
}

impl FactBody {
    /// The wire name of the kind (`opened`, `turn-opened`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Opened(_) => "opened",
            Self::TurnOpened(_) => "turn-opened",
            Self::Passage(_) => "passage",
            Self::Proposal(_) => "proposal",
            Self::Review(_) => "review",
            Self::ChairDecision(_) => "chair-decision",
            Self::Experiment(_) => "experiment",
            Self::Concluded(_) => "concluded",
            Self::Ended(_) => "ended",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Opened {
    /// The pack's name.
    pub pack: String,
    pub pack_generation: u64,
    pub profile_digest: Sha256Digest,
    pub thematic_profile: String,
    /// SHA-256 of the requester's goal text (the text itself is not retained here).
    pub goal_digest: Sha256Digest,
    /// Participant ids (opaque).
    pub requester: String,
    pub solver: String,
    pub reviewer: String,
    pub hil_mode: HilMode,
    pub budget: Budget,
}

/// The Room's budget, from the pack's flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    pub max_rounds: u32,
    pub max_experiments: u32,
    pub max_wall_s: u64,
    /// Carried from the flow; the Room opens one turn per passage.
    pub passages_per_turn: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnOpened {
    /// From 1.
    pub round: u32,
    pub role: Role,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Passage {
    pub round: u32,
    pub role: Role,
    /// The payload that crossed the inference boundary.
    pub payload_digest: Sha256Digest,
    /// The digest-bound manifest of the passage's evidence inputs.
    pub evidence_digest: Sha256Digest,
    pub decision_id: String,
    pub attempt_id: String,
    pub outcome: PassageOutcome,
}

/// What came back, after quarantine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case", deny_unknown_fields)]
pub enum PassageOutcome {
    /// A schema-valid answer: its exact bytes' digest.
    Answered { answer_digest: Sha256Digest },
    /// No admissible answer (`code` from the boundary or the quarantine).
    Refused { code: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Proposal {
    pub round: u32,
    /// SHA-256 of `candidate`'s bytes.
    pub candidate_digest: Sha256Digest,
    /// The candidate's exact bytes (`reach.plan.candidate.v1`).
    pub candidate: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewFact {
    pub round: u32,
    /// The proposal reviewed: the Room binds the review to it.
    pub candidate_digest: Sha256Digest,
    /// SHA-256 of `review`'s bytes.
    pub review_digest: Sha256Digest,
    pub verdict: VerdictText,
    /// The review's exact bytes (`reach.plan.review.v1`).
    pub review: String,
}

/// A review's verdict as the fact carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VerdictText {
    Approve,
    Reject,
}

impl From<reach_plan::Verdict> for VerdictText {
    fn from(v: reach_plan::Verdict) -> Self {
        match v {
            reach_plan::Verdict::Approve => Self::Approve,
            reach_plan::Verdict::Reject => Self::Reject,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChairDecision {
    pub round: u32,
    pub candidate_digest: Sha256Digest,
    pub decision: Decision,
}

/// The Chair's decision on one proposal. It admits an experiment; it grants no HIL approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Decision {
    /// Run the compiled plan with this digest on a fresh instance.
    Admit { plan_digest: Sha256Digest },
    /// Another round: the Solver gets the reason and the review as evidence.
    RequestRevision { reason: String },
    /// The Room ends with `code`.
    Refuse { code: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentFact {
    pub round: u32,
    /// From 1.
    pub n: u32,
    pub plan_digest: Sha256Digest,
    /// The execution record's digest.
    pub record_digest: Sha256Digest,
    pub verifier_passed: bool,
    /// `completed`, `step-failed`, `refused:<code>`, `not-created[:<code>]` or `unknown`.
    pub end: String,
}

/// How an experiment ended, read from [`ExperimentFact::end`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExperimentEnd {
    Completed,
    StepFailed,
    Refused {
        code: String,
    },
    NotCreated {
        code: Option<String>,
    },
    /// The outcome of a step is not known: the loop ends rather than trying again.
    Unknown,
}

impl ExperimentEnd {
    pub fn parse(end: &str) -> Option<Self> {
        let code_ok =
            |c: &str| !c.is_empty() && c.contains('/') && !c.contains(char::is_whitespace);
        Some(match end {
            "completed" => Self::Completed,
            "step-failed" => Self::StepFailed,
            "unknown" => Self::Unknown,
            "not-created" => Self::NotCreated { code: None },
            _ => {
                if let Some(c) = end.strip_prefix("refused:").filter(|c| code_ok(c)) {
                    Self::Refused { code: c.into() }
                } else if let Some(c) = end.strip_prefix("not-created:").filter(|c| code_ok(c)) {
                    Self::NotCreated {
                        code: Some(c.into()),
                    }
                } else {
                    return None;
                }
            }
        })
    }

    /// The text [`ExperimentFact::end`] carries.
    pub fn text(&self) -> String {
        match self {
            Self::Completed => "completed".into(),
            Self::StepFailed => "step-failed".into(),
            Self::Unknown => "unknown".into(),
            Self::Refused { code } => format!("refused:{code}"),
            Self::NotCreated { code: None } => "not-created".into(),
            Self::NotCreated { code: Some(c) } => format!("not-created:{c}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Concluded {
    pub recipe_digest: Sha256Digest,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ended {
    pub code: String,
    pub reason: String,
}

/// Why bytes are not a Room fact.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FactRefusal {
    #[error("not a room fact: {0}")]
    Malformed(String),
    #[error("the fact's bytes are not its canonical bytes")]
    NotCanonical,
    #[error(transparent)]
    Signature(#[from] SignatureRefusal),
}

impl FactRefusal {
    pub fn code(&self) -> &'static str {
        match self {
            Self::Malformed(_) => "room/fact-malformed",
            Self::NotCanonical => "room/fact-not-canonical",
            Self::Signature(s) => s.code(),
        }
    }
}

impl RoomFact {
    /// The first fact of the Room `room`.
    pub fn opened(room: RunId, at_ms: i64, opened: Opened) -> Self {
        Self {
            format: FactFormat::V1,
            room,
            seq: 0,
            prev: None,
            at_ms,
            body: FactBody::Opened(opened),
        }
    }

    /// `serde_json` of the fact: fields in declaration order, no whitespace, digests as
    /// `sha256:<hex>`. What ward signs and what [`RoomFact::digest`] is over.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        // Cannot fail: string keys only, no float.
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn digest(&self) -> Sha256Digest {
        Sha256Digest::of(self.canonical_bytes())
    }

    /// Reads a fact strictly: bounded, no unknown field, and the bytes must be exactly the
    /// fact's canonical bytes (no other spelling of the same fact).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, FactRefusal> {
        if bytes.len() > MAX_SIGNED_BYTES {
            return Err(SignatureRefusal::TooLarge.into());
        }
        let fact: Self =
            serde_json::from_slice(bytes).map_err(|e| FactRefusal::Malformed(e.to_string()))?;
        if fact.canonical_bytes() != bytes {
            return Err(FactRefusal::NotCanonical);
        }
        Ok(fact)
    }
}

/// A fact's canonical bytes with ward's signature over [`signing_input`] of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignedFact {
    pub bytes: Vec<u8>,
    pub signature: Vec<u8>,
    pub key_id: String,
}

impl SignedFact {
    /// Checks the signature as a fact's under the raw 32-byte ed25519 `public_key`, then reads
    /// the fact strictly.
    pub fn verify(&self, public_key: &[u8]) -> Result<RoomFact, FactRefusal> {
        check_signable(SignedKind::Fact, &self.bytes)?;
        verify(SignedKind::Fact, &self.bytes, &self.signature, public_key)?;
        RoomFact::from_bytes(&self.bytes)
    }
}
