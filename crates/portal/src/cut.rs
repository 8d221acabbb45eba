//! The Privacy Cut: what may leave the body for a model, and the receipt of what was cut.
//!
//! Only the question text and the bounded evidence bundle's passages (numbered `[1]..[n]`,
//! each with its id, digest and commit-pinned URL) travel. Everything else the turn holds —
//! the asker, guild, channel, message ids, the task Sigil, labels, the snapshot's local paths —
//! is cut, and the [`CutReceipt`] names each cut field (never its value: a snowflake's digest
//! could be brute-forced). The receipt binds the digest of the exact payload bytes, so the
//! EgressDecision that binds the receipt's digest binds the payload too.
//!
//! **Architecture Invariant:** the payload is built from [`CutInput`] only; a value that is not
//! a field of [`CutPayload`] cannot reach a provider. A Sigil id inside the question or a
//! passage refuses the Cut rather than being sent.

use reach_digest::Sha256Digest;
use serde::{Deserialize, Serialize};

/// Schema of the payload (what egress-provider receives and the provider sees, reformatted).
pub const PAYLOAD_SCHEMA: &str = "reach.portal.cut/1";
/// Schema of the receipt.
pub const RECEIPT_SCHEMA: &str = "reach.portal.cut-receipt/1";
/// Longest question that may leave, in bytes (Discord's message limit is 4,000 bytes of
/// UTF-8 at most for 2,000 characters; a question is far shorter).
pub const MAX_QUESTION_BYTES: usize = 4_000;
/// Most passages (the retrieval default is 5; headroom for a tuned corpus, not for a dump).
pub const MAX_PASSAGES: usize = 16;
/// Largest payload, in bytes (the bundle's own default ceiling is 6,000 bytes of text).
pub const MAX_PAYLOAD_BYTES: usize = 64 * 1024;
/// Longest answer the model is asked for and quarantine accepts, in characters: with the
/// sources list it must fit one 2,000-character Discord message.
pub const MAX_ANSWER_CHARS: u32 = 1_200;
/// The text form of a ward Sigil id starts with this; it must never appear in a payload.
pub const SIGIL_PREFIX: &str = "sigil_";

/// One bundle passage as the Cut receives it (converted by core from the corpus bundle).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvidenceIn {
    pub passage_id: String,
    pub digest: Sha256Digest,
    pub section: String,
    pub url: String,
    pub text: String,
}

/// Everything the Cut is given: what may travel plus the names of what it withholds.
#[derive(Debug, Clone)]
pub struct CutInput {
    pub question: String,
    pub bundle_digest: Sha256Digest,
    /// The source revision the snapshot was built from (public: it is in every citation URL).
    pub revision: String,
    pub passages: Vec<EvidenceIn>,
    /// Names of the turn's fields that stay in the body (e.g. `subject_id`, `sigil_id`).
    pub withheld: Vec<&'static str>,
}

/// One numbered passage in the payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CutPassage {
    /// The citation number the model must use: `[n]`.
    pub n: u32,
    pub passage_id: String,
    pub digest: Sha256Digest,
    pub section: String,
    pub url: String,
    pub text: String,
}

/// `reach.portal.cut/1`: the one payload that may leave the body for a model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CutPayload {
    pub schema: String,
    pub question: String,
    pub bundle_digest: Sha256Digest,
    pub revision: String,
    pub passages: Vec<CutPassage>,
    pub max_answer_chars: u32,
}

/// `reach.portal.cut-receipt/1`: what the Cut kept (by digest) and what it cut (by name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CutReceipt {
    pub schema: String,
    /// Digest of the exact payload bytes.
    pub payload_digest: Sha256Digest,
    pub question_digest: Sha256Digest,
    pub bundle_digest: Sha256Digest,
    /// `passage_id@digest` of every passage kept.
    pub kept: Vec<String>,
    /// Names of the fields cut.
    pub cut: Vec<String>,
}

impl CutReceipt {
    /// The digest the EgressDecision binds (`cut_receipt_digest`).
    pub fn digest(&self) -> Sha256Digest {
        Sha256Digest::of(serde_json::to_vec(self).expect("receipt serializes"))
    }
}

/// The Cut made: the exact payload bytes, the payload, and the receipt.
#[derive(Debug, Clone)]
pub struct PrivacyCut {
    pub payload: CutPayload,
    pub bytes: Vec<u8>,
    pub receipt: CutReceipt,
}

impl PrivacyCut {
    /// Digest of the payload bytes (the EgressDecision's payload digest).
    pub fn payload_digest(&self) -> Sha256Digest {
        self.receipt.payload_digest
    }
}

/// Why nothing may leave.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CutRefusal {
    /// the question is empty
    #[error("cut/empty-question")]
    EmptyQuestion,
    /// the question is longer than MAX_QUESTION_BYTES
    #[error("cut/question-too-long")]
    QuestionTooLong,
    /// the bundle holds no passage: remote formation needs evidence
    #[error("cut/no-evidence")]
    NoEvidence,
    /// more passages than MAX_PASSAGES
    #[error("cut/too-many-passages")]
    TooManyPassages,
    /// the payload would exceed MAX_PAYLOAD_BYTES
    #[error("cut/over-budget")]
    OverBudget,
    /// a Sigil id appears in the question or a passage
    #[error("cut/sigil-in-payload")]
    SigilInPayload,
    /// a passage's text does not match its digest (the bundle was altered)
    #[error("cut/passage-digest-mismatch")]
    PassageDigestMismatch,
}

impl CutRefusal {
    /// The seed-style code.
    pub fn code(&self) -> String {
        self.to_string()
    }
}

/// Whether `text` holds a Sigil id (`sigil_` followed by 32 lowercase hex digits).
pub fn contains_sigil(text: &str) -> bool {
    text.match_indices(SIGIL_PREFIX).any(|(i, _)| {
        let rest = &text.as_bytes()[i + SIGIL_PREFIX.len()..];
        rest.len() >= 32
            && rest[..32]
                .iter()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
    })
}

/// Makes the Cut.
pub fn cut(input: &CutInput) -> Result<PrivacyCut, CutRefusal> {
    let question = input.question.trim();
    if question.is_empty() {
        return Err(CutRefusal::EmptyQuestion);
    }
    if question.len() > MAX_QUESTION_BYTES {
        return Err(CutRefusal::QuestionTooLong);
    }
    if input.passages.is_empty() {
        return Err(CutRefusal::NoEvidence);
    }
    if input.passages.len() > MAX_PASSAGES {
        return Err(CutRefusal::TooManyPassages);
    }
    if contains_sigil(question) {
        return Err(CutRefusal::SigilInPayload);
    }
    let mut passages = Vec::with_capacity(input.passages.len());
    for (i, p) in input.passages.iter().enumerate() {
        if Sha256Digest::of(p.text.as_bytes()) != p.digest {
            return Err(CutRefusal::PassageDigestMismatch);
        }
        if contains_sigil(&p.text) || contains_sigil(&p.url) || contains_sigil(&p.section) {
            return Err(CutRefusal::SigilInPayload);
        }
        passages.push(CutPassage {
            n: i as u32 + 1,
            passage_id: p.passage_id.clone(),
            digest: p.digest,
            section: p.section.clone(),
            url: p.url.clone(),
            text: p.text.clone(),
        });
    }
    let payload = CutPayload {
        schema: PAYLOAD_SCHEMA.into(),
        question: question.to_owned(),
        bundle_digest: input.bundle_digest,
        revision: input.revision.clone(),
        passages,
        max_answer_chars: MAX_ANSWER_CHARS,
    };
    let bytes = serde_json::to_vec(&payload).expect("payload serializes");
    if bytes.len() > MAX_PAYLOAD_BYTES {
        return Err(CutRefusal::OverBudget);
    }
    let receipt = CutReceipt {
        schema: RECEIPT_SCHEMA.into(),
        payload_digest: Sha256Digest::of(&bytes),
        question_digest: Sha256Digest::of(question.as_bytes()),
        bundle_digest: input.bundle_digest,
        kept: payload
            .passages
            .iter()
            .map(|p| format!("{}@{}", p.passage_id, p.digest))
            .collect(),
        cut: input.withheld.iter().map(|s| (*s).to_owned()).collect(),
    };
    Ok(PrivacyCut {
        payload,
        bytes,
        receipt,
    })
}

/// Why a payload received by egress-provider is not a Cut payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadRefusal {
    /// the payload is not `reach.portal.cut/1` (unknown fields included)
    #[error("portal/payload-schema")]
    Schema,
    /// a Sigil id was presented to the egress role
    #[error("egress/sigil-presented")]
    SigilPresented,
    /// the payload is larger than MAX_PAYLOAD_BYTES
    #[error("portal/payload-too-large")]
    TooLarge,
}

/// Parses a payload at egress-provider: strictly, bounded, and never carrying a Sigil.
pub fn parse_payload(bytes: &[u8]) -> Result<CutPayload, PayloadRefusal> {
    if bytes.len() > MAX_PAYLOAD_BYTES {
        return Err(PayloadRefusal::TooLarge);
    }
    // Checked on the raw bytes first: whatever field it hides in, a Sigil is refused as such.
    if contains_sigil(&String::from_utf8_lossy(bytes)) {
        return Err(PayloadRefusal::SigilPresented);
    }
    let payload: CutPayload = serde_json::from_slice(bytes).map_err(|_| PayloadRefusal::Schema)?;
    if payload.schema != PAYLOAD_SCHEMA
        || payload.passages.is_empty()
        || payload.passages.len() > MAX_PASSAGES
        || payload
            .passages
            .iter()
            .enumerate()
            .any(|(i, p)| p.n != i as u32 + 1)
    {
        return Err(PayloadRefusal::Schema);
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passage(i: u32, text: &str) -> EvidenceIn {
        EvidenceIn {
            passage_id: format!("p-{i:020}"),
            digest: Sha256Digest::of(text.as_bytes()),
            section: format!("Section {i}"),
            url: format!("https://example.test/blob/abc/doc.md#L{i}"),
            text: text.into(),
        }
    }

    pub(crate) fn input(n: u32) -> CutInput {
        CutInput {
            question: "How does the ledger settle an unknown delivery?".into(),
            bundle_digest: Sha256Digest::of(b"bundle"),
            revision: "abc".into(),
            passages: (1..=n)
                .map(|i| passage(i, &format!("Passage number {i} says something.")))
                .collect(),
            withheld: vec!["subject_id", "sigil_id"],
        }
    }

    #[test]
    fn the_payload_holds_question_and_numbered_passages_and_the_receipt_binds_it() {
        let c = cut(&input(2)).unwrap();
        assert_eq!(c.payload.passages[1].n, 2);
        assert_eq!(c.receipt.payload_digest, Sha256Digest::of(&c.bytes));
        assert_eq!(c.receipt.cut, vec!["subject_id", "sigil_id"]);
        assert_eq!(c.receipt.kept.len(), 2);
        assert_eq!(parse_payload(&c.bytes).unwrap(), c.payload);
        // Nothing but the payload's fields: the receipt's cut names are not in the payload.
        let text = String::from_utf8(c.bytes).unwrap();
        assert!(!text.contains("subject_id") && !text.contains("sigil_id"));
    }

    #[test]
    fn each_refusal_of_the_cut() {
        let sigil = format!("{SIGIL_PREFIX}{}", "a".repeat(32));
        let cases: Vec<(CutInput, &str)> = vec![
            (
                CutInput {
                    question: "  ".into(),
                    ..input(1)
                },
                "cut/empty-question",
            ),
            (
                CutInput {
                    question: "x".repeat(MAX_QUESTION_BYTES + 1),
                    ..input(1)
                },
                "cut/question-too-long",
            ),
            (input(0), "cut/no-evidence"),
            (input(MAX_PASSAGES as u32 + 1), "cut/too-many-passages"),
            (
                CutInput {
                    question: format!("what is {sigil}?"),
                    ..input(1)
                },
                "cut/sigil-in-payload",
            ),
            (
                CutInput {
                    passages: vec![passage(1, &format!("leak {sigil}"))],
                    ..input(1)
                },
                "cut/sigil-in-payload",
            ),
            (
                CutInput {
                    passages: vec![EvidenceIn {
                        text: "altered".into(),
                        ..passage(1, "original")
                    }],
                    ..input(1)
                },
                "cut/passage-digest-mismatch",
            ),
            (
                CutInput {
                    passages: (1..=MAX_PASSAGES as u32)
                        .map(|i| passage(i, &"w ".repeat(3000)))
                        .collect(),
                    ..input(1)
                },
                "cut/over-budget",
            ),
        ];
        for (i, want) in cases {
            assert_eq!(cut(&i).unwrap_err().code(), want);
        }
    }

    #[test]
    fn egress_refuses_a_payload_that_is_not_a_cut() {
        let good = cut(&input(1)).unwrap();
        let mut v: serde_json::Value = serde_json::from_slice(&good.bytes).unwrap();
        v["subject_id"] = "1234".into();
        let extra = serde_json::to_vec(&v).unwrap();
        assert_eq!(parse_payload(&extra), Err(PayloadRefusal::Schema));
        let mut v: serde_json::Value = serde_json::from_slice(&good.bytes).unwrap();
        v["passages"][0]["n"] = 3.into();
        let misnumbered = serde_json::to_vec(&v).unwrap();
        assert_eq!(parse_payload(&misnumbered), Err(PayloadRefusal::Schema));
        let mut v: serde_json::Value = serde_json::from_slice(&good.bytes).unwrap();
        v["question"] = format!("{SIGIL_PREFIX}{}", "0123456789abcdef".repeat(2)).into();
        let sigil = serde_json::to_vec(&v).unwrap();
        assert_eq!(parse_payload(&sigil), Err(PayloadRefusal::SigilPresented));
        assert_eq!(
            parse_payload(&vec![b' '; MAX_PAYLOAD_BYTES + 1]),
            Err(PayloadRefusal::TooLarge)
        );
        assert_eq!(
            PayloadRefusal::SigilPresented.to_string(),
            "egress/sigil-presented"
        );
    }

    #[test]
    fn sigil_detection_needs_the_whole_id() {
        assert!(!contains_sigil("sigil_ is a word"));
        assert!(!contains_sigil(&format!("sigil_{}", "g".repeat(32))));
        assert!(contains_sigil(&format!("x sigil_{} y", "0".repeat(32))));
    }
}
