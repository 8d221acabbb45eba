//! The build boundary's one error enum.

use reach_digest::Sha256Digest;

use crate::rules::Rule;
use crate::source::SourceRefusal;

/// Why a build (acquire, process, index, validate, activate) failed. Any of these keeps the
/// previous snapshot active.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// the source was refused
    #[error(transparent)]
    Source(#[from] SourceRefusal),
    /// a path violated a rule whose policy action is refuse
    #[error("{rule} at `{path}`: {detail}")]
    Refused {
        rule: Rule,
        path: String,
        detail: String,
    },
    /// the release archive does not match its published digest
    #[error("archive digest {actual} does not match the published {expected}")]
    DigestMismatch {
        expected: Sha256Digest,
        actual: Sha256Digest,
    },
    /// the archive format is not supported
    #[error("unsupported archive: {0}")]
    UnsupportedArchive(String),
    /// the archive is malformed
    #[error("malformed archive: {0}")]
    MalformedArchive(String),
    /// no operator-admitted commit for a git source
    #[error("no admitted commit; candidate {candidate} awaits `reach corpus admit`")]
    NotAdmitted { candidate: String },
    /// the admitted commit is not in the fetched history
    #[error("admitted commit {0} was not found in the fetched history")]
    CommitNotFound(String),
    /// git transport or object database failure
    #[error("git: {0}")]
    Git(String),
    /// nothing left to index after processing
    #[error("no passages after processing ({skipped} paths skipped)")]
    Empty { skipped: usize },
    /// the staged index failed validation
    #[error("staging validation failed: {0}")]
    Validation(String),
    /// index engine failure
    #[error("index: {0}")]
    Index(String),
    /// file system failure
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
}

impl BuildError {
    pub fn refused(rule: Rule, path: impl Into<String>, detail: impl Into<String>) -> Self {
        BuildError::Refused {
            rule,
            path: path.into(),
            detail: detail.into(),
        }
    }

    /// The stable code, e.g. `corpus/symlink-escape` or `corpus/digest-mismatch`.
    pub fn code(&self) -> &'static str {
        match self {
            BuildError::Source(r) => r.code(),
            BuildError::Refused { rule, .. } => rule.code(),
            BuildError::DigestMismatch { .. } => "corpus/digest-mismatch",
            BuildError::UnsupportedArchive(_) => "corpus/unsupported-archive",
            BuildError::MalformedArchive(_) => "corpus/malformed-archive",
            BuildError::NotAdmitted { .. } => "corpus/not-admitted",
            BuildError::CommitNotFound(_) => "corpus/commit-not-found",
            BuildError::Git(_) => "corpus/git",
            BuildError::Empty { .. } => "corpus/empty",
            BuildError::Validation(_) => "corpus/validation",
            BuildError::Index(_) => "corpus/index",
            BuildError::Io(_) => "corpus/io",
        }
    }
}

impl From<tantivy::TantivyError> for BuildError {
    fn from(e: tantivy::TantivyError) -> Self {
        BuildError::Index(e.to_string())
    }
}
