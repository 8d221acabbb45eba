//! The explicit evidence inputs of a passage: each one a kind and its exact content, fenced
//! as untrusted data when rendered and bound by its digest.

use reach_digest::Sha256Digest;
pub use reach_taskpack::source::EvidenceKind;

/// One evidence input: what the Room hands a passage, as the bytes the fence will carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evidence {
    pub kind: EvidenceKind,
    /// UTF-8 content exactly as fenced (JSON for every kind; see docs/taskpacks.md).
    pub content: String,
}

impl Evidence {
    pub fn new(kind: EvidenceKind, content: impl Into<String>) -> Self {
        Evidence {
            kind,
            content: content.into(),
        }
    }

    /// The digest the fence names: sha256 of the content bytes.
    pub fn digest(&self) -> Sha256Digest {
        Sha256Digest::of(self.content.as_bytes())
    }
}
