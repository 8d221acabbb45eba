//! Room facts and what ward signs: the one signing input every signed Room record uses, and
//! its verification. (The fact types themselves follow below this section.)

use ring::signature::{ED25519, UnparsedPublicKey};

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
