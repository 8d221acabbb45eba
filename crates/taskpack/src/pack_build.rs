//! `reach pack build DIR --key KEY`: a pack directory in, a signed archive out.
//!
//! Build parses the sources, derives the facts, runs the same refusal corpus install runs (a
//! pack that would not install is not built), signs the facts' canonical bytes and writes the
//! archive. The same sources and key give the same archive, byte for byte.

use std::path::{Path, PathBuf};

use reach_digest::Sha256Digest;

use crate::archive;
use crate::conform::{CorpusFailure, run_corpus, vocabularies};
use crate::facts::Facts;
use crate::sign::PackKey;
use crate::source::{FilesError, PackFiles, ReadDirError, SourceError, Sources};

/// A built pack.
#[derive(Debug, Clone)]
pub struct BuiltPack {
    /// The `reach.taskpack.v1` archive bytes.
    pub archive: Vec<u8>,
    /// sha256 of `archive`.
    pub digest: Sha256Digest,
    pub facts: Facts,
}

/// Why a pack was not built.
#[derive(Debug, thiserror::Error)]
pub enum BuildRefusal {
    /// the directory holds something a pack may not, or exceeds a bound
    #[error("{0}")]
    Files(#[from] FilesError),
    /// reading the directory failed
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// a source file is refused
    #[error(transparent)]
    Source(#[from] SourceError),
    /// a refusal fixture did not reach its code
    #[error("refusal fixture `{}` (image variant `{}`): expected `{}`, the compiler {}", .0.fixture, .0.variant, .0.expected, .0.outcome)]
    ConformanceFailed(CorpusFailure),
}

impl BuildRefusal {
    /// `package/schema` (files and sources), `verifier/check-missing`,
    /// `verifier/mutation-not-admitted`, `package/conformance-failed`, or `package/io`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Files(_) => "package/schema",
            Self::Io { .. } => "package/io",
            Self::Source(e) => e.code(),
            Self::ConformanceFailed(_) => "package/conformance-failed",
        }
    }
}

impl From<ReadDirError> for BuildRefusal {
    fn from(e: ReadDirError) -> Self {
        match e {
            ReadDirError::Files(e) => Self::Files(e),
            ReadDirError::Io { path, source } => Self::Io { path, source },
        }
    }
}

/// Builds the pack in `dir`, signed with `key`.
pub fn build(dir: &Path, key: &PackKey) -> Result<BuiltPack, BuildRefusal> {
    build_files(PackFiles::read_dir(dir)?, key)
}

/// Builds a pack from its files in memory (what [`build`] does after reading the directory).
pub fn build_files(files: PackFiles, key: &PackKey) -> Result<BuiltPack, BuildRefusal> {
    let sources = Sources::parse(&files)?;
    let facts = Facts::derive(&files, &sources);
    run_corpus(&sources, &vocabularies(&sources, &facts))
        .map_err(BuildRefusal::ConformanceFailed)?;
    let facts_json = facts.canonical_bytes();
    let sig = key.sign(&facts_json);
    let archive = archive::write(&facts_json, &sig.to_json(), &files);
    Ok(BuiltPack {
        digest: archive::digest(&archive),
        archive,
        facts,
    })
}
