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

/// The name of an evidence kind as flow.toml writes it and as its fence names it.
pub fn kind_name(kind: EvidenceKind) -> &'static str {
    match kind {
        EvidenceKind::RevisionRequest => "revision-request",
        EvidenceKind::Review => "review",
        EvidenceKind::ExecutionRecord => "execution-record",
        EvidenceKind::VerifierResult => "verifier-result",
        EvidenceKind::Observations => "observations",
    }
}

impl Evidence {
    /// The name of its kind ([`kind_name`]).
    pub fn kind_name(&self) -> &'static str {
        kind_name(self.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_names_are_the_flow_names() {
        for kind in [
            EvidenceKind::RevisionRequest,
            EvidenceKind::Review,
            EvidenceKind::ExecutionRecord,
            EvidenceKind::VerifierResult,
            EvidenceKind::Observations,
        ] {
            let serde = serde_json::to_value(kind).unwrap();
            assert_eq!(serde.as_str(), Some(kind_name(kind)));
        }
    }
}
