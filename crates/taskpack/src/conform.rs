//! Conformance at install: an archive in, a [`VerifiedPack`] or one [`InstallRefusal`] out.
//!
//! [`conform`] is pure: it reads no file and no clock (the time is a parameter), so core can
//! call it on the bytes an operator sent and store the archive inertly.

use std::collections::{BTreeMap, BTreeSet};

use reach_digest::Sha256Digest;
use reach_plan::{BindingTerms, CommandProfile, PackRef, Vocabulary, compile};
use serde::Serialize;

use crate::archive::{self, ArchiveError};
use crate::facts::{Facts, FileFact, first_difference};
use crate::sign::{FactsSignature, PublicKey, SignatureRefusal, Signer, TrustedKeys};
use crate::source::{
    FixtureKind, ImageVariant, PackFiles, SourceError, Sources, TASK_PROFILE_FILE,
};

/// The pack generation refusal fixtures are compiled under: none yet (install precedes any
/// activation).
pub const CONFORMANCE_GENERATION: u64 = 0;

/// Why a pack was refused at install. Each message names what and where; [`code`] is the
/// refusal code.
///
/// [`code`]: InstallRefusal::code
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstallRefusal {
    /// the archive is not a `reach.taskpack.v1` archive
    #[error("not a reach.taskpack.v1 archive: {0}")]
    ArchiveMalformed(#[from] ArchiveError),
    /// a source file is refused (`package/schema`, `verifier/check-missing`,
    /// `verifier/mutation-not-admitted`)
    #[error(transparent)]
    Source(#[from] SourceError),
    /// the facts derived from the archive's sources differ from the signed facts
    #[error("facts.json differs from the facts derived from the archive's sources at `{fact}`")]
    FactsMismatch { fact: String },
    /// the signer's key is not trusted
    #[error("{0}")]
    UnknownSigner(SignatureRefusal),
    /// the signature does not verify
    #[error("{0}")]
    BadSignature(SignatureRefusal),
    /// the version is not newer than the installed one
    #[error("{name} version {version} is not newer than the installed version {installed}")]
    Rollback {
        name: String,
        version: u64,
        installed: u64,
    },
    /// the pack expired
    #[error("{name} version {version} expired at {expires}")]
    Expired {
        name: String,
        version: u64,
        expires: String,
    },
    /// a refusal fixture did not reach its expected code
    #[error(
        "refusal fixture `{fixture}` (image variant `{variant}`): expected `{expected}`, the compiler {outcome}"
    )]
    ConformanceFailed {
        fixture: String,
        variant: String,
        expected: String,
        /// `accepted the candidate` or `refused it with <code>: <message>`.
        outcome: String,
    },
}

impl InstallRefusal {
    /// `package/archive-malformed`, `package/schema`, `package/facts-mismatch`,
    /// `package/unknown-signer`, `package/bad-signature`, `package/rollback`,
    /// `package/expired`, `package/conformance-failed`, `verifier/check-missing` or
    /// `verifier/mutation-not-admitted`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::ArchiveMalformed(_) => "package/archive-malformed",
            Self::Source(e) => e.code(),
            Self::FactsMismatch { .. } => "package/facts-mismatch",
            Self::UnknownSigner(_) => "package/unknown-signer",
            Self::BadSignature(_) => "package/bad-signature",
            Self::Rollback { .. } => "package/rollback",
            Self::Expired { .. } => "package/expired",
            Self::ConformanceFailed { .. } => "package/conformance-failed",
        }
    }
}

impl From<SignatureRefusal> for InstallRefusal {
    fn from(e: SignatureRefusal) -> Self {
        match e {
            SignatureRefusal::UnknownSigner(_) => Self::UnknownSigner(e),
            SignatureRefusal::BadSignature { .. } => Self::BadSignature(e),
        }
    }
}

/// A pack that passed [`conform`]: signed by a trusted key, its facts derived again from its
/// sources and equal to the signed ones, newer than the installed version, unexpired, and
/// every refusal fixture reaching its code.
#[derive(Debug, Clone)]
pub struct VerifiedPack {
    archive_digest: Sha256Digest,
    facts: Facts,
    facts_digest: Sha256Digest,
    signer: Signer,
    fixtures_checked: usize,
    files: PackFiles,
    sources: Sources,
    /// One per image variant, in the facts' order.
    vocabularies: Vec<(String, Vocabulary)>,
}

impl VerifiedPack {
    pub fn name(&self) -> &str {
        &self.facts.name
    }

    pub fn version(&self) -> u64 {
        self.facts.version
    }

    /// sha256 of the archive bytes.
    pub fn archive_digest(&self) -> Sha256Digest {
        self.archive_digest
    }

    pub fn facts(&self) -> &Facts {
        &self.facts
    }

    /// sha256 of `facts.json`.
    pub fn facts_digest(&self) -> Sha256Digest {
        self.facts_digest
    }

    /// sha256 of `task-profile.toml`.
    pub fn profile_digest(&self) -> Sha256Digest {
        self.facts.profile_digest
    }

    /// The key that signed the facts (one of the trusted keys).
    pub fn signer(&self) -> PublicKey {
        self.signer.key
    }

    /// The name the signer's key is trusted under.
    pub fn signer_name(&self) -> &str {
        &self.signer.name
    }

    /// `expires` in seconds since the Unix epoch.
    pub fn expires_at_s(&self) -> u64 {
        self.facts.expires_unix_s
    }

    /// How many refusal-corpus runs conformance checked (fixtures with a candidate, once per
    /// image variant).
    pub fn fixtures_checked(&self) -> usize {
        self.fixtures_checked
    }

    /// `task-profile.toml`'s text (what an operator accepting a profile change reads a diff
    /// of).
    pub fn task_profile_text(&self) -> &str {
        std::str::from_utf8(
            self.files
                .get(TASK_PROFILE_FILE)
                .expect("a verified pack has a task profile"),
        )
        .expect("a verified task profile is UTF-8")
    }

    /// The vocabulary of the first (default) image variant.
    pub fn vocabulary(&self) -> Vocabulary {
        self.vocabularies[0].1.clone()
    }

    /// The vocabulary of the image variant `name`.
    pub fn vocabulary_for(&self, variant: &str) -> Option<Vocabulary> {
        self.vocabularies
            .iter()
            .find(|(n, _)| n == variant)
            .map(|(_, v)| v.clone())
    }

    /// The bytes of the source file `path`.
    pub fn file(&self, path: &str) -> Option<&[u8]> {
        self.files.get(path)
    }

    pub fn files(&self) -> &PackFiles {
        &self.files
    }

    /// Every source, parsed (the flow, prompts, verifier and fixture answers the other
    /// boundaries run).
    pub fn sources(&self) -> &Sources {
        &self.sources
    }
}

/// The compiler's vocabulary of a pack under one image variant: the candidate's profiles
/// (every profile but the verifier's own), the services, the patch policy, and each target's
/// baseline content in that variant's prepared system.
pub fn vocabulary(sources: &Sources, facts: &Facts, variant: &ImageVariant) -> Vocabulary {
    let commands = sources
        .commands
        .profiles
        .iter()
        .filter(|p| !p.verifier_only)
        .map(|p| {
            (
                p.name.clone(),
                CommandProfile {
                    mode: p.mode,
                    args: p.arg_slots(),
                    source: p.source(),
                },
            )
        })
        .collect();
    let baselines = sources
        .patch_policy
        .targets()
        .filter_map(|t| {
            variant
                .baseline(t.as_str())
                .map(|f| (t.as_str().to_owned(), f.content.clone()))
        })
        .collect();
    Vocabulary {
        pack: PackRef {
            name: facts.name.clone(),
            version: facts.version,
            facts_digest: facts.digest(),
            profile_digest: facts.profile_digest,
        },
        commands,
        services: sources.services(),
        patch_policy: sources.patch_policy.clone(),
        baselines,
        hil_minimum: sources.profile.hil_minimum,
        rollback: sources.profile.rollback.clone(),
        max_steps: sources.profile.max_steps,
    }
}

/// A fixture that did not reach its code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CorpusFailure {
    pub fixture: String,
    pub variant: String,
    pub expected: String,
    pub outcome: String,
}

impl From<CorpusFailure> for InstallRefusal {
    fn from(f: CorpusFailure) -> Self {
        Self::ConformanceFailed {
            fixture: f.fixture,
            variant: f.variant,
            expected: f.expected,
            outcome: f.outcome,
        }
    }
}

/// Runs the refusal corpus under every variant's vocabulary, fixtures in path order: a
/// `compile` fixture must be refused with exactly its `expect`; an `owner` fixture's
/// candidate, when it has one, must compile (its owner's test executes it). Returns how many
/// fixture runs it checked.
pub fn run_corpus(
    sources: &Sources,
    vocabularies: &[(String, Vocabulary)],
) -> Result<usize, CorpusFailure> {
    let mut checked = 0;
    for (variant, vocab) in vocabularies {
        for (path, fixture) in &sources.fixtures {
            let Some(candidate) = &fixture.candidate else {
                continue;
            };
            let hil = fixture.hil.unwrap_or(sources.profile.hil_minimum);
            let terms = BindingTerms {
                hil,
                generation: CONFORMANCE_GENERATION,
            };
            let result = compile(vocab, &terms, candidate.as_bytes());
            checked += 1;
            let failure = |expected: &str, outcome: String| CorpusFailure {
                fixture: path.clone(),
                variant: variant.clone(),
                expected: expected.to_owned(),
                outcome,
            };
            match (fixture.kind, result) {
                (FixtureKind::Compile, Err(e)) if e.code() == fixture.expect => {}
                (FixtureKind::Compile, Err(e)) => {
                    return Err(failure(
                        &fixture.expect,
                        format!("refused it with {}: {e}", e.code()),
                    ));
                }
                (FixtureKind::Compile, Ok(_)) => {
                    return Err(failure(
                        &fixture.expect,
                        "accepted the candidate".to_owned(),
                    ));
                }
                (FixtureKind::Owner, Ok(_)) => {}
                (FixtureKind::Owner, Err(e)) => {
                    return Err(failure(
                        "the owner fixture's candidate to compile",
                        format!("refused it with {}: {e}", e.code()),
                    ));
                }
            }
        }
    }
    Ok(checked)
}

/// Every variant's vocabulary, in the facts' order.
pub(crate) fn vocabularies(sources: &Sources, facts: &Facts) -> Vec<(String, Vocabulary)> {
    sources
        .variants
        .iter()
        .map(|v| (v.name.clone(), vocabulary(sources, facts, v)))
        .collect()
}

/// The pack name an archive's `facts.json` claims, unverified: enough to look up the
/// installed version to pass to [`conform`], which verifies everything.
pub fn archive_name(archive: &[u8]) -> Result<String, InstallRefusal> {
    Ok(archive::read(archive)?.facts.name)
}

/// The first file fact where the signed facts and the archived bytes differ (`files.PATH` when
/// only one names the file, else `files.PATH.sha256`), or `None`.
fn files_differ(
    signed: &BTreeMap<String, FileFact>,
    archived: &BTreeMap<String, FileFact>,
) -> Option<String> {
    let paths: BTreeSet<&String> = signed.keys().chain(archived.keys()).collect();
    paths
        .into_iter()
        .find_map(|p| match (signed.get(p), archived.get(p)) {
            (Some(s), Some(a)) if s == a => None,
            (Some(s), Some(a)) if s.sha256 == a.sha256 => Some(format!("files.{p}.bytes")),
            (Some(_), Some(_)) => Some(format!("files.{p}.sha256")),
            _ => Some(format!("files.{p}")),
        })
}

/// Conformance at install. The checks, in order (the first that fails is the refusal):
///
/// 1. the archive's structure (`package/archive-malformed`);
/// 2. `facts.sig`: its key is trusted (`package/unknown-signer`) and its signature verifies
///    over `facts.json`'s bytes (`package/bad-signature`);
/// 3. every file's bytes match the digest the signed facts give it, before any is parsed
///    (`package/facts-mismatch`, naming the file);
/// 4. the sources under `src/` parse (`package/schema`, `verifier/check-missing`,
///    `verifier/mutation-not-admitted`) and the facts derived from them equal `facts.json`
///    byte for byte (`package/facts-mismatch`, naming the first differing fact);
/// 5. the version is newer than `installed_version` (`package/rollback`);
/// 6. the pack has not expired at `now_unix_s` (`package/expired`);
/// 7. the refusal corpus, under every image variant (`package/conformance-failed`).
pub fn conform(
    archive: &[u8],
    trusted: &TrustedKeys,
    installed_version: Option<u64>,
    now_unix_s: u64,
) -> Result<VerifiedPack, InstallRefusal> {
    let contents = archive::read(archive)?;
    let sig = FactsSignature::parse(&contents.facts_sig).map_err(|e| ArchiveError {
        entry: archive::SIG_ENTRY.to_owned(),
        reason: e.to_string(),
    })?;
    let signer = trusted.verify(&contents.facts_json, &sig)?;
    // Verify before parse: the signed facts name every file's digest, so a file that differs
    // from them is refused before any of it is read as TOML.
    let signed: Facts = serde_json::from_slice(&contents.facts_json).map_err(|_| {
        InstallRefusal::FactsMismatch {
            fact: "$ (the signed facts are not reach.taskpack.facts.v1)".to_owned(),
        }
    })?;
    if let Some(fact) = files_differ(&signed.files, &Facts::files_of(&contents.files)) {
        return Err(InstallRefusal::FactsMismatch { fact });
    }

    let sources = Sources::parse(&contents.files)?;
    let facts = Facts::derive(&contents.files, &sources);
    let canonical = facts.canonical_bytes();
    if canonical != contents.facts_json {
        let fact = first_difference(&contents.facts_json, &canonical)
            .unwrap_or_else(|| "$ (the same facts, not in canonical bytes)".to_owned());
        return Err(InstallRefusal::FactsMismatch { fact });
    }

    if let Some(installed) = installed_version
        && facts.version <= installed
    {
        return Err(InstallRefusal::Rollback {
            name: facts.name,
            version: facts.version,
            installed,
        });
    }
    if now_unix_s >= facts.expires_unix_s {
        return Err(InstallRefusal::Expired {
            name: facts.name,
            version: facts.version,
            expires: facts.expires,
        });
    }

    let vocabularies = vocabularies(&sources, &facts);
    let fixtures_checked = run_corpus(&sources, &vocabularies)?;
    Ok(VerifiedPack {
        fixtures_checked,
        archive_digest: archive::digest(archive),
        facts_digest: Sha256Digest::of(&canonical),
        facts,
        signer,
        files: contents.files,
        sources,
        vocabularies,
    })
}
