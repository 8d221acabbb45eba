//! One passage of a task Room (Story 013, "Inference Classes"): the pack's prompt document
//! rendered ([`render`]) with the goal and the explicit evidence inputs ([`evidence`]), each
//! fenced and digest-bound ([`fence`]); the payload it travels as through the inference
//! boundary; and the quarantine ([`quarantine`]) that admits only a schema-valid candidate or
//! review. Nothing here does IO or reads a clock.
//!
//! **Architecture Invariant:** every untrusted text a prompt carries (the goal, the candidate
//! under review, each evidence input) is fenced with the digest of its exact bytes, and a text
//! that would break its fence is refused, never rewritten.
//!
//! **Architecture Invariant:** nothing leaves the quarantine but an [`Answer`]: the exact
//! accepted bytes and the candidate or review the plan's own parsers read from them.

#![forbid(unsafe_code)]

pub mod constraint;
pub mod evidence;
pub mod fence;
pub mod quarantine;
pub mod render;

pub use evidence::{Evidence, EvidenceKind, kind_name};
pub use fence::{BEGIN_MARKER, END_MARKER, FenceRefusal, Fenced, fence, read_fences};
pub use quarantine::{
    Answer, MAX_ANSWER_BYTES, MAX_PAYLOAD_BYTES, PASSAGE_SCHEMA, PassagePayload, PayloadRefusal,
    QuarantineRefusal, quarantine,
};
pub use reach_taskpack::source::Role;
pub use render::{
    EvidenceManifest, ManifestEntry, NO_EVIDENCE, RenderInputs, RenderRefusal, Rendered,
    contains_sigil, estimate_tokens, render, vocabulary_text,
};
