//! reach-corpus: the public documentation corpus of the VPS profile.
//!
//! Seed 001, "Public corpus contract" and step 4 ("Ground") of the first E2E contract.
//!
//! The pipeline, one module per step:
//!
//! - [`source`]: which origins are admitted (canonical https git or release archive only), and
//!   which redirects may be followed.
//! - [`archive`] and [`git`]: acquisition of an exact revision into an in-memory [`tree`].
//! - [`process`] under [`rules`]: every path judged, skipped or refused by policy.
//! - [`passage`] and [`index`]: passages at headings (static HTML through [`html`], Markdown
//!   markup stripped by [`markup`] where it is indexed or quoted, the listings an mdBook page
//!   includes read from the tree by [`include`]), an offline BM25 index whose
//!   terms come from [`analysis`] (light stemming, code identifiers whole and split).
//! - [`store`]: staging, validation, atomic activation, `PublicCorpusSnapshot@1`, status.
//! - [`retrieve`]: read-only retrieval into `CorpusEvidenceBundle@1` behind the relevance gate
//!   (refused before any model call when the corpus does not cover the question), validation
//!   and fenced rendering; [`answer`]: the extractive answer.
//! - [`eval`]: question sets and the answer-quality figures; [`harness`]: the run that builds
//!   a set's corpus and asks it (`benches/answers.rs`, `reach corpus eval`).
//!
//! Core holds the active snapshot open (`retrieve::ActiveSnapshot`), reopened only when
//! `CURRENT` names another one. A git source's redirects are judged by the source rules before
//! gix sees a URL (a downgrade to plain HTTP or a non-admitted origin is a typed refusal), and
//! every admitted host is pinned to the address destination admission chose. Only
//! corpus-builder enables the `git` feature.
//!
//! **Architecture Invariant:** the library never reads the environment, git configuration,
//! credential helpers or proxy settings, and never fetches anything a document names.
//! **Architecture Invariant:** retrieval opens snapshots read-only and never sees staging.

pub mod abbreviation;
pub mod analysis;
pub mod answer;
pub mod archive;
pub mod embed;
pub mod error;
pub mod eval;
#[cfg(feature = "git")]
pub mod git;
pub mod harness;
pub mod html;
pub mod include;
pub mod index;
pub mod local;
pub mod markup;
pub mod passage;
pub mod process;
pub mod retrieve;
pub mod rules;
pub mod source;
pub mod store;
#[cfg(feature = "test-support")]
pub mod testing;
pub mod tree;

pub use answer::{Answer, NOT_IN_DOCS, extractive_answer};
pub use archive::{pack_entries, pack_release_archive, unpack_release_archive};
pub use error::BuildError;
pub use retrieve::{
    ActiveSnapshot, BundleOutcome, BundleRefusal, CorpusEvidenceBundle, EMBEDDING_FILE,
    EvidencePassage, Gate, Grounded, RetrievalLimits, RetrievalRefusal, Snapshot, render_fenced,
    validate,
};
pub use rules::{Action, Policy, Rejection, Rule};
pub use source::{
    AdmittedUrl, Ceilings, Origin, SourceRefusal, SourceSpec, admit_redirect, admit_url,
};
pub use store::{
    BuildSummary, Clock, CorpusStatus, CorpusStore, Freshness, ManualClock, NoProgress, Progress,
    PublicCorpusSnapshot, Stage, SystemClock,
};
pub use tree::{AcquiredTree, EntryKind, Revision, TreeEntry};

/// Acquire a release-archive source from its bytes (already fetched, or a local cached copy of
/// the default corpus): verify the published digest, then unpack within the source's ceilings.
pub fn acquire_release_archive(
    spec: &SourceSpec,
    bytes: &[u8],
) -> Result<AcquiredTree, BuildError> {
    let Origin::ReleaseArchive { digest, .. } = &spec.origin else {
        return Err(BuildError::UnsupportedArchive(
            "source is not a release archive".into(),
        ));
    };
    let un = unpack_release_archive(bytes, digest, &spec.ceilings)?;
    Ok(AcquiredTree {
        revision: Revision {
            commit: None,
            archive_digest: Some(*digest),
            citation_rev: digest.hex(),
        },
        entries: un.entries,
        compressed_bytes: un.compressed_bytes,
        expanded_bytes: un.expanded_bytes,
    })
}
