//! Answer-quality benchmark (issue 34): a bench binary that prints figures (harness = false).
//!
//! For every question set under `crates/corpus/eval/` (or the files named by
//! `REACH_EVAL_SETS`, colon-separated), reads the set's corpus from the toolchain's own
//! documentation (`$(rustc --print sysroot)/share/doc/rust/html/<root>`, the rust-docs
//! component), builds a snapshot of it exactly as corpus-builder would, asks every question
//! through the default answer path, and prints hit@1, hit@3, key-fact coverage of the rendered
//! answer, the out-of-corpus refusal rate, the in-corpus false-refusal rate and answer latency.
//! `REACH_EVAL_VERBOSE=1` lists every question that missed.
#![allow(clippy::disallowed_methods)] // Test, benchmark or build-script knobs, never secrets.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reach_corpus::eval::{Observed, QuestionSet, Tally, judge, parse_set};
use reach_corpus::{
    AcquiredTree, Ceilings, Clock, CorpusStore, EntryKind, NoProgress, Origin, Policy,
    RetrievalLimits, Revision, Snapshot, SourceSpec, SystemClock, TreeEntry, admit_url,
    extractive_answer,
};
use reach_digest::Sha256Digest;

/// Each question is asked this many times; the latency figures are over every ask.
const ROUNDS: usize = 5;

fn docs_root() -> Option<PathBuf> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = std::process::Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    let sysroot = String::from_utf8(out.stdout).ok()?;
    let root = Path::new(sysroot.trim()).join("share/doc/rust/html");
    root.is_dir().then_some(root)
}

fn walk(root: &Path, dir: &Path, exclude: &[String], out: &mut Vec<TreeEntry>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let Ok(rel) = p.strip_prefix(root) else {
            continue;
        };
        let rel = rel.to_string_lossy().replace('\\', "/");
        if exclude.contains(&rel) {
            continue;
        }
        if p.is_dir() {
            walk(root, &p, exclude, out);
        } else if let Ok(bytes) = std::fs::read(&p) {
            out.push(TreeEntry {
                path: rel,
                kind: EntryKind::File {
                    bytes,
                    executable: false,
                },
            });
        }
    }
}

fn spec(include: &[String]) -> SourceSpec {
    SourceSpec {
        name: "eval".into(),
        origin: Origin::ReleaseArchive {
            url: admit_url("https://releases.example.org/docs.tar.gz").unwrap(),
            digest: Sha256Digest::of(b"eval"),
        },
        include: include.to_vec(),
        ceilings: Ceilings::default(),
        citation_base: Some(admit_url("https://doc.rust-lang.org/stable").unwrap()),
        redirect_origins: vec![],
        historical: false,
    }
}

fn run_set(name: &str, set: &QuestionSet, docs: &Path, verbose: bool) -> Option<Tally> {
    let root = docs.join(&set.header.root);
    let mut entries = Vec::new();
    walk(&root, &root, &set.header.exclude, &mut entries);
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    if entries.is_empty() {
        println!("{name}: no documentation at {}, skipped", root.display());
        return None;
    }
    let raw: u64 = entries
        .iter()
        .map(|e| match &e.kind {
            EntryKind::File { bytes, .. } => bytes.len() as u64,
            _ => 0,
        })
        .sum();
    let dir = tempfile::tempdir().unwrap();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let store = CorpusStore::new(dir.path(), clock.clone()).unwrap();
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
    let t = Instant::now();
    let summary = store
        .build(
            &spec(&set.header.include),
            &tree,
            &Policy::default(),
            &mut NoProgress,
        )
        .unwrap();
    println!(
        "{name} ({}): {} files, {} passages, built in {:.2} s",
        set.header.corpus,
        summary.files_accepted,
        summary.passages,
        t.elapsed().as_secs_f64()
    );
    let snap = Snapshot::open_active(store.root()).unwrap();
    let limits = RetrievalLimits::default();
    let now = clock.now();
    let mut tally = Tally::default();
    for q in &set.questions {
        let mut observed = None;
        let mut gate = None;
        let mut best = Duration::MAX;
        let mut times = Vec::with_capacity(ROUNDS);
        for _ in 0..ROUNDS {
            let t = Instant::now();
            let grounded = snap.ground(&q.question, &limits, now).unwrap();
            gate = grounded.gate;
            let bundle = grounded.bundle;
            let answer = extractive_answer(&q.question, &bundle);
            let took = t.elapsed();
            times.push(took);
            best = best.min(took);
            observed = Some(Observed {
                retrieved: bundle
                    .passages
                    .iter()
                    .map(|p| (p.path.clone(), anchor_of(&p.section_url)))
                    .collect(),
                answer: answer.text,
                refused: answer.not_in_docs,
                latency: took,
            });
        }
        let o = observed.unwrap();
        let v = judge(q, &o);
        for took in times {
            tally.add_latency(took);
        }
        tally.add_verdict(&v);
        if verbose && !v.good() {
            println!(
                "  MISS {:?}\n       rank {:?}, facts {}/{}, refused {}, gate {:?}; got {:?}\n       answer: {}",
                q.question,
                v.rank,
                v.facts_found,
                v.facts_expected,
                v.refused,
                gate.map(|g| (g.coverage, g.terms, g.unknown)),
                o.retrieved.iter().take(3).collect::<Vec<_>>(),
                o.answer.chars().take(300).collect::<String>()
            );
        }
    }
    println!("{name}: {}", tally.figures());
    Some(tally)
}

/// The anchor of a section URL (`…/page.html#anchor`), empty without one.
fn anchor_of(url: &str) -> String {
    url.rsplit_once('#')
        .map(|(_, a)| a.to_string())
        .unwrap_or_default()
}

fn main() {
    let verbose = std::env::var("REACH_EVAL_VERBOSE").is_ok_and(|v| v == "1");
    let sets: Vec<PathBuf> = match std::env::var("REACH_EVAL_SETS") {
        Ok(v) if !v.is_empty() => v.split(':').map(PathBuf::from).collect(),
        _ => {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("eval");
            let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
                .map(|rd| rd.flatten().map(|e| e.path()).collect())
                .unwrap_or_default();
            v.retain(|p| p.extension().is_some_and(|e| e == "jsonl"));
            v.sort();
            v
        }
    };
    let Some(docs) = docs_root() else {
        println!("answers: no rust-docs under the toolchain's sysroot; nothing measured");
        return;
    };
    let mut all = Tally::default();
    for path in &sets {
        let name = path.file_stem().unwrap_or_default().to_string_lossy();
        let text = std::fs::read_to_string(path).unwrap();
        let set = match parse_set(&text) {
            Ok(s) => s,
            Err(e) => {
                println!("{name}: refused ({}): {e}", e.code());
                std::process::exit(2);
            }
        };
        if let Some(t) = run_set(&name, &set, &docs, verbose) {
            all.merge(&t);
        }
    }
    println!("all sets: {}", all.figures());
}
