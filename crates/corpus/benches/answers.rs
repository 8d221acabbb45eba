//! Answer-quality benchmark (issue 34): a bench binary that prints figures (harness = false).
//!
//! For every question set under `crates/corpus/eval/` (or the files named by
//! `REACH_EVAL_SETS`, colon-separated), reads the set's corpus from the toolchain's own
//! documentation (`$(rustc --print sysroot)/share/doc/rust/html/<root>`, the rust-docs
//! component) and runs [`reach_corpus::harness`] over it: a snapshot built exactly as
//! corpus-builder would, every question asked through the default answer path, and hit@1,
//! hit@3, key-fact coverage of the rendered answer, the out-of-corpus refusal rate, the
//! in-corpus false-refusal rate and answer latency printed. `reach corpus eval FILE` runs the
//! same harness on an operator's directory. `REACH_EVAL_VERBOSE=1` lists every question that
//! missed (`=2` also every question's gate coverage); `REACH_EVAL_ROUNDS=N` asks each question N times (default 5);
//! `REACH_EVAL_DUMP=FILE` appends each question's bundle to FILE as a JSON line.
#![allow(clippy::disallowed_methods)] // Test, benchmark or build-script knobs, never secrets.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use reach_corpus::embed::{StaticEmbedding, TEST_HOST_TABLE};
use reach_corpus::eval::{QuestionSet, Tally, parse_set};
use reach_corpus::harness;

/// Each question is asked this many times (`REACH_EVAL_ROUNDS` for another count, e.g. under a
/// profiler); the latency figures are over every ask.
const ROUNDS: usize = 5;

fn rounds() -> usize {
    std::env::var("REACH_EVAL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ROUNDS)
}

/// The static embedding table `REACH_EMBEDDING` names, else the setup's if it is there.
fn embedding() -> Option<(PathBuf, Arc<StaticEmbedding>)> {
    let path = std::env::var_os("REACH_EMBEDDING")
        .map(PathBuf::from)
        .or_else(|| {
            Path::new(TEST_HOST_TABLE)
                .exists()
                .then(|| TEST_HOST_TABLE.into())
        })?;
    match StaticEmbedding::load(&path) {
        Ok(t) => Some((path, Arc::new(t))),
        Err(e) => {
            println!("{}: {e}", path.display());
            std::process::exit(2);
        }
    }
}

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

fn run_set(
    name: &str,
    set: &QuestionSet,
    docs: &Path,
    verbose: bool,
    gates: bool,
    embedding: Option<Arc<StaticEmbedding>>,
) -> Option<Tally> {
    let root = docs.join(&set.header.root);
    let files = reach_corpus::local::dir_files(&root).unwrap_or_default();
    let entries = harness::file_entries(files, &set.header.exclude);
    if entries.is_empty() {
        println!("{name}: no documentation at {}, skipped", root.display());
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = match harness::run(set, entries, dir.path(), rounds(), embedding) {
        Ok(r) => r,
        Err(e) => {
            println!("{name}: refused ({}): {e}", e.code());
            std::process::exit(2);
        }
    };
    println!(
        "{name} ({}): {} files, {} passages, built in {:.2} s",
        set.header.corpus,
        run.files,
        run.passages,
        run.build_time.as_secs_f64()
    );
    if let Some(e) = run.embedding {
        println!(
            "{name}: passage vectors in {:.0} ms, {} KiB",
            e.time.as_secs_f64() * 1e3,
            e.bytes / 1024
        );
    }
    if verbose {
        for a in run.asked.iter().filter(|a| !a.verdict.good()) {
            println!("{}", harness::describe_miss(a));
        }
    }
    if gates {
        for a in &run.asked {
            let c = a.gate.map_or(f32::NAN, |g| g.coverage);
            let kind = if a.question.out_of_corpus {
                "out"
            } else {
                "in "
            };
            println!("  gate {kind} {c:.2} {:?}", a.question.question);
        }
    }
    if let Ok(path) = std::env::var("REACH_EVAL_DUMP") {
        dump(Path::new(&path), name, &run.asked);
    }
    println!("{name}: {}", run.tally.figures());
    Some(run.tally)
}

/// Appends one JSON line per question to `path`: the set, the question as asked and judged,
/// and every passage of its bundle with its score and text (for study outside Reach, e.g.
/// `eval/experiments/hybrid.py --rerank`).
fn dump(path: &Path, set: &str, asked: &[harness::Asked]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    for a in asked {
        let passages: Vec<serde_json::Value> = a
            .bundle
            .passages
            .iter()
            .map(|p| {
                serde_json::json!({
                    "path": p.path,
                    "anchor": p.section_url.rsplit_once('#').map_or("", |(_, a)| a),
                    "section": p.section,
                    "score": p.score,
                    "text": p.text,
                })
            })
            .collect();
        let line = serde_json::json!({
            "set": set,
            "question": a.question.question,
            "out_of_corpus": a.question.out_of_corpus,
            "expect": a.question.expect.iter().map(|e| [&e.path, &e.anchor]).collect::<Vec<_>>(),
            "refused": a.observed.refused,
            "passages": passages,
        });
        writeln!(f, "{line}").unwrap();
    }
}

fn main() {
    let verbose = std::env::var("REACH_EVAL_VERBOSE").is_ok_and(|v| v == "1" || v == "2");
    let gates = std::env::var("REACH_EVAL_VERBOSE").is_ok_and(|v| v == "2");
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
    let mut parsed = Vec::new();
    for path in &sets {
        let name = path.file_stem().unwrap_or_default().to_string_lossy();
        let text = std::fs::read_to_string(path).unwrap();
        match parse_set(&text) {
            Ok(s) => parsed.push((name.into_owned(), s)),
            Err(e) => {
                println!("{name}: refused ({}): {e}", e.code());
                std::process::exit(2);
            }
        }
    }
    // BM25 alone, then (when a table is there) BM25 with the static embedding's first stage,
    // in one run so their latencies compare.
    let table = embedding();
    let mut arms = vec![("bm25", None)];
    if let Some((path, t)) = &table {
        println!(
            "static embedding {} ({}): {} dims, {} KiB on disk, {} KiB in memory",
            path.display(),
            &t.digest().hex()[..16],
            t.dims(),
            std::fs::metadata(path).map_or(0, |m| m.len()) / 1024,
            t.heap_bytes() / 1024,
        );
        arms.push(("bm25+embedding", Some(t.clone())));
    } else {
        println!("no static embedding table (scripts/embedding-setup.sh): BM25 alone");
    }
    let mut p50s = Vec::new();
    for (arm, t) in arms {
        println!("== {arm}");
        let mut all = Tally::default();
        for (name, set) in &parsed {
            if let Some(t) = run_set(name, set, &docs, verbose, gates, t.clone()) {
                all.merge(&t);
            }
        }
        let figures = all.figures();
        println!("all sets ({arm}): {figures}");
        p50s.push(figures.p50);
    }
    if let [plain, with] = p50s[..] {
        println!(
            "answer p50 with the embedding / without: {:.2}x",
            with.as_secs_f64() / plain.as_secs_f64().max(1e-9)
        );
    }
}
