//! `reach corpus eval FILE`: the answer-quality harness of `cargo bench -p reach-corpus --bench
//! answers` (`reach_corpus::harness`), run on one question set against an operator's directory
//! (`--docs DIR`, the files `reach demo --docs DIR` would pack) or the project's own docs (the
//! default corpus), printing the same figures.
//!
//! It builds a throwaway snapshot in a temporary directory and asks in-process: no body runs,
//! nothing is fetched, and no configured corpus is touched.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use reach_corpus::embed::StaticEmbedding;
use reach_corpus::eval::parse_set;
use reach_corpus::harness::{self, HarnessFailure, Run};
use reach_corpus::local::{PROJECT_DOCS, dir_files};

/// Why `reach corpus eval` measured nothing.
#[derive(Debug, thiserror::Error)]
pub enum EvalFailure {
    /// the question file could not be read
    #[error("{path}: {source}")]
    SetUnreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    /// the question file is not a question set
    #[error("{0}")]
    Set(#[from] reach_corpus::eval::EvalRefusal),
    /// the `--docs` directory could not be read
    #[error("--docs {path}: {source}")]
    DocsUnreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    /// the `--embedding` table could not be read or is not a table
    #[error("--embedding {path}: {source}")]
    Embedding {
        path: PathBuf,
        source: reach_corpus::embed::EmbeddingRefusal,
    },
    /// the harness could not build or ask the corpus
    #[error("{0}")]
    Harness(#[from] HarnessFailure),
}

impl EvalFailure {
    pub fn code(&self) -> &'static str {
        match self {
            EvalFailure::SetUnreadable { .. } => "eval/set-unreadable",
            EvalFailure::Set(r) => r.code(),
            EvalFailure::DocsUnreadable { .. } => "eval/docs-unreadable",
            EvalFailure::Embedding { .. } => "eval/embedding-refused",
            EvalFailure::Harness(h) => h.code(),
        }
    }
}

/// Run the set at `file` against `docs` (or the project's docs), `rounds` asks per question,
/// ranking with the static embedding table at `embedding` when one is named.
pub fn measure(
    file: &Path,
    docs: Option<&Path>,
    embedding: Option<&Path>,
    rounds: usize,
) -> Result<Run, EvalFailure> {
    let table = embedding
        .map(|path| {
            StaticEmbedding::load(path)
                .map(Arc::new)
                .map_err(|source| EvalFailure::Embedding {
                    path: path.to_path_buf(),
                    source,
                })
        })
        .transpose()?;
    let text = std::fs::read_to_string(file).map_err(|source| EvalFailure::SetUnreadable {
        path: file.to_path_buf(),
        source,
    })?;
    let set = parse_set(&text)?;
    let entries = match docs {
        Some(dir) => {
            let files = dir_files(dir).map_err(|source| EvalFailure::DocsUnreadable {
                path: dir.to_path_buf(),
                source,
            })?;
            harness::file_entries(files, &set.header.exclude)
        }
        None => harness::file_entries(
            PROJECT_DOCS.iter().map(|(p, t)| (*p, t.as_bytes())),
            &set.header.exclude,
        ),
    };
    let scratch = tempfile::tempdir().map_err(|e| HarnessFailure::Build(e.into()))?;
    Ok(harness::run(&set, entries, scratch.path(), rounds, table)?)
}

/// The report: what was built, every miss when `verbose`, then the figures line.
pub fn report(name: &str, run: &Run, verbose: bool) -> String {
    let mut out = format!(
        "{name}: {} files, {} passages, built in {:.2} s\n",
        run.files,
        run.passages,
        run.build_time.as_secs_f64()
    );
    if let Some(e) = run.embedding {
        out.push_str(&format!(
            "{name}: ranked with static embedding {}: {} passages' vectors in {:.0} ms\n",
            &e.digest.hex()[..16],
            run.passages,
            e.time.as_secs_f64() * 1e3
        ));
    }
    if verbose {
        for a in run.asked.iter().filter(|a| !a.verdict.good()) {
            out.push_str(&harness::describe_miss(a));
            out.push('\n');
        }
    }
    out.push_str(&format!("{name}: {}\n", run.tally.figures()));
    out
}

pub fn run(
    file: &Path,
    docs: Option<&Path>,
    embedding: Option<&Path>,
    rounds: usize,
    verbose: bool,
) -> ExitCode {
    match measure(file, docs, embedding, rounds) {
        Ok(run) => {
            let name = file.file_stem().unwrap_or_default().to_string_lossy();
            let mut out = std::io::stdout().lock();
            // A reader that went away early (`| head`) ends the report, not the command.
            match out
                .write_all(report(&name, &run, verbose).as_bytes())
                .and_then(|()| out.flush())
            {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    eprintln!("reach: writing the report: {e}");
                    ExitCode::FAILURE
                }
                _ => ExitCode::SUCCESS,
            }
        }
        Err(e) => {
            // Once, on stderr: stdout carries results only.
            eprintln!("refused: {}: {e}", e.code());
            ExitCode::FAILURE
        }
    }
}
