//! The answer-quality harness: build a snapshot of a question set's documents exactly as
//! corpus-builder would, ask every question through the default answer path (the relevance
//! gate, the bundle, the extractive answer) and tally the figures of [`crate::eval`].
//!
//! `benches/answers.rs` runs it over the toolchain's documentation and `reach corpus eval FILE`
//! over an operator's directory or the default corpus, so both print the same figures.
//!
//! **Architecture Invariant:** the harness reads only the files it is handed and the scratch
//! directory it is given; it fetches nothing and writes nowhere else.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reach_digest::Sha256Digest;

use crate::embed::StaticEmbedding;
use crate::eval::{Observed, Question, QuestionSet, Tally, Verdict, judge};
use crate::retrieve::{CorpusEvidenceBundle, Gate, RetrievalLimits, RetrievalRefusal, Snapshot};
use crate::source::{Ceilings, Origin, SourceSpec, admit_url};
use crate::store::{Clock, CorpusStore, NoProgress, SystemClock};
use crate::tree::{AcquiredTree, EntryKind, Revision, TreeEntry};
use crate::{BuildError, Policy, extractive_answer};

/// Why a run could not measure anything.
#[derive(Debug, thiserror::Error)]
pub enum HarnessFailure {
    /// the set's corpus has no file to build from
    #[error("no documents to build the corpus from")]
    NoDocuments,
    /// the corpus did not build
    #[error("the corpus did not build ({code}): {0}", code = .0.code())]
    Build(#[from] BuildError),
    /// the built snapshot did not answer
    #[error("the snapshot did not answer ({code}): {0}", code = .0.code())]
    Retrieval(#[from] RetrievalRefusal),
}

impl HarnessFailure {
    pub const fn code(&self) -> &'static str {
        match self {
            HarnessFailure::NoDocuments => "eval/no-documents",
            HarnessFailure::Build(_) => "eval/build-failed",
            HarnessFailure::Retrieval(_) => "eval/retrieval-failed",
        }
    }
}

/// One question as asked: what the answer path did and how it was judged.
#[derive(Debug, Clone)]
pub struct Asked {
    pub question: Question,
    pub observed: Observed,
    pub verdict: Verdict,
    /// The relevance gate's figures (`None` only for a snapshot without a gate).
    pub gate: Option<Gate>,
    /// The bundle the answer was formed from (`REACH_EVAL_DUMP` writes it for offline study).
    pub bundle: CorpusEvidenceBundle,
}

/// A static embedding a run ranked with, and what its passage vectors cost.
#[derive(Debug, Clone, Copy)]
pub struct EmbeddingCost {
    /// The table, by digest.
    pub digest: Sha256Digest,
    /// How long every passage's vector took.
    pub time: Duration,
    /// Bytes the vectors take.
    pub bytes: usize,
}

/// A whole run over one set.
#[derive(Debug, Clone)]
pub struct Run {
    pub files: u64,
    pub passages: u64,
    pub build_time: Duration,
    /// The static embedding ranked with, when one was attached.
    pub embedding: Option<EmbeddingCost>,
    pub tally: Tally,
    pub asked: Vec<Asked>,
}

/// Files (path, bytes) as tree entries, leaving out the paths `exclude`'s globs match (globs
/// that do not compile, which [`crate::eval::parse_set`] refuses, leave out nothing).
pub fn file_entries<P: AsRef<str>, B: AsRef<[u8]>>(
    files: impl IntoIterator<Item = (P, B)>,
    exclude: &[String],
) -> Vec<TreeEntry> {
    let excluded = crate::process::glob_set(exclude).unwrap_or_default();
    let mut out: Vec<TreeEntry> = files
        .into_iter()
        .filter(|(p, _)| !excluded.is_match(p.as_ref()))
        .map(|(p, b)| TreeEntry {
            path: p.as_ref().to_string(),
            kind: EntryKind::File {
                bytes: b.as_ref().to_vec(),
                executable: false,
            },
        })
        .collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// The source a harness corpus is built as: the set's include globs, default ceilings.
pub(crate) fn spec(include: &[String]) -> Result<SourceSpec, HarnessFailure> {
    let invalid = |e: crate::SourceRefusal| HarnessFailure::Build(BuildError::Source(e));
    Ok(SourceSpec {
        name: "eval".into(),
        origin: Origin::ReleaseArchive {
            url: admit_url("https://eval.invalid/docs.tar.gz").map_err(invalid)?,
            digest: Sha256Digest::of(b"eval"),
        },
        include: include.to_vec(),
        ceilings: Ceilings::default(),
        citation_base: Some(admit_url("https://eval.invalid/docs").map_err(invalid)?),
        site_base: None,
        site_root: String::new(),
        redirect_origins: vec![],
        historical: false,
    })
}

/// The anchor of a section URL (`…/page.html#anchor`), empty without one.
fn anchor_of(url: &str) -> String {
    url.rsplit_once('#')
        .map(|(_, a)| a.to_string())
        .unwrap_or_default()
}

/// Build `entries` into a snapshot under `scratch` (an empty directory the caller owns) and ask
/// every question of `set` `rounds` times (at least once); the latency figures are over every
/// ask, the verdict is the last ask's (the answer path is deterministic).
pub fn run(
    set: &QuestionSet,
    entries: Vec<TreeEntry>,
    scratch: &Path,
    rounds: usize,
    embedding: Option<Arc<StaticEmbedding>>,
) -> Result<Run, HarnessFailure> {
    if entries.is_empty() {
        return Err(HarnessFailure::NoDocuments);
    }
    let raw: u64 = entries
        .iter()
        .map(|e| match &e.kind {
            EntryKind::File { bytes, .. } => bytes.len() as u64,
            _ => 0,
        })
        .sum();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let store =
        CorpusStore::new(scratch, clock.clone()).map_err(|e| HarnessFailure::Build(e.into()))?;
    let tree = AcquiredTree {
        revision: Revision {
            commit: None,
            archive_digest: None,
            citation_rev: "eval".into(),
        },
        entries,
        compressed_bytes: raw,
        expanded_bytes: raw,
    };
    let started = Instant::now();
    let summary = store.build(
        &spec(&set.header.include)?,
        &tree,
        &Policy::default(),
        &mut NoProgress,
    )?;
    let build_time = started.elapsed();
    let mut snap = Snapshot::open_active(store.root())?;
    let mut embedding_cost = None;
    if let Some(table) = embedding {
        let (digest, started) = (table.digest(), Instant::now());
        snap = snap.with_embedding(table)?;
        embedding_cost = Some(EmbeddingCost {
            digest,
            time: started.elapsed(),
            bytes: snap.embedding_bytes().unwrap_or(0),
        });
    }
    let limits = RetrievalLimits::default();
    let now = clock.now();
    let mut tally = Tally::default();
    let mut asked = Vec::with_capacity(set.questions.len());
    for q in &set.questions {
        let mut last = None;
        for _ in 0..rounds.max(1) {
            let t = Instant::now();
            let grounded = snap.ground(&q.question, &limits, now)?;
            let answer = extractive_answer(&q.question, &grounded.bundle);
            let took = t.elapsed();
            tally.add_latency(took);
            last = Some((grounded, answer, took));
        }
        let Some((grounded, answer, took)) = last else {
            continue;
        };
        let observed = Observed {
            retrieved: grounded
                .bundle
                .passages
                .iter()
                .map(|p| (p.path.clone(), anchor_of(&p.section_url)))
                .collect(),
            answer: answer.text,
            refused: answer.not_in_docs,
            latency: took,
        };
        let verdict = judge(q, &observed);
        tally.add_verdict(&verdict);
        asked.push(Asked {
            question: q.clone(),
            observed,
            verdict,
            gate: grounded.gate,
            bundle: grounded.bundle,
        });
    }
    Ok(Run {
        files: summary.files_accepted,
        passages: summary.passages,
        build_time,
        embedding: embedding_cost,
        tally,
        asked,
    })
}

/// The listing of one question that missed (`REACH_EVAL_VERBOSE=1`, `reach corpus eval
/// --verbose`): rank, facts, the gate's figures, the first three sections and the answer's
/// start.
pub fn describe_miss(a: &Asked) -> String {
    let v = &a.verdict;
    let gate = a.gate.map_or("none".to_string(), |g| {
        format!(
            "coverage {:.2}, {} terms, {} unknown",
            g.coverage, g.terms, g.unknown
        )
    });
    format!(
        "  MISS {:?}\n       rank {:?}, facts {}/{}, refused {}, gate {gate}; got {:?}\n       answer: {}",
        a.question.question,
        v.rank,
        v.facts_found,
        v.facts_expected,
        v.refused,
        a.observed.retrieved.iter().take(3).collect::<Vec<_>>(),
        a.observed.answer.chars().take(300).collect::<String>()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::parse_set;

    const SET: &str = r#"{"corpus": "c", "root": ".", "include": ["**/*.md"], "exclude": ["skip.md", "old/**"]}
{"question": "How do I rotate the signing key?", "expect": [{"path": "keys.md", "anchor": "rotating-the-signing-key"}], "facts": ["reach key rotate"]}
{"question": "What is the capital of Mongolia?", "out_of_corpus": true}
"#;

    const KEYS: &str = "# Keys\n\nKeys sign every release.\n\n## Rotating the signing key\n\n\
        Run `reach key rotate` to rotate the signing key; the old key stays valid for a day.\n";
    const SKIP: &str = "# Signing key rotation\n\nRotate the signing key with care.\n";

    #[test]
    fn a_run_builds_asks_and_tallies() {
        let set = parse_set(SET).unwrap();
        let entries = file_entries(
            [
                ("keys.md", KEYS.as_bytes()),
                ("skip.md", SKIP.as_bytes()),
                ("old/keys.md", KEYS.as_bytes()),
                ("notes.txt", b"not included".as_slice()),
            ],
            &set.header.exclude,
        );
        assert_eq!(entries.len(), 2);
        let dir = tempfile::tempdir().unwrap();
        let run = run(&set, entries, dir.path(), 2, None).unwrap();
        assert_eq!((run.files, run.asked.len()), (1, 2));
        let f = run.tally.figures();
        assert_eq!((f.in_corpus, f.out_of_corpus), (1, 1));
        assert_eq!((f.hit_at_1, f.fact_coverage), (1.0, 1.0));
        assert_eq!((f.ooc_refused, f.false_refusals), (1.0, 0.0));
        assert!(run.asked.iter().all(|a| a.verdict.good()));
        assert!(run.asked[1].gate.is_some_and(|g| !g.admitted));
    }

    #[test]
    fn nothing_to_build_is_refused() {
        let set = parse_set(SET).unwrap();
        let err = run(&set, vec![], Path::new("/nonexistent"), 1, None).unwrap_err();
        assert_eq!(err.code(), "eval/no-documents");
    }
}
