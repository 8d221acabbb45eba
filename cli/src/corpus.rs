//! `reach corpus add|admit|build|status|search`: the operator's side of corpus-builder's admin
//! port, over the launcher's operator channel with the operator's leaf. `reach corpus eval`
//! (`eval.rs`) needs no body: it measures answers on a local build.
//!
//! **Architecture Invariant:** the CLI never fetches a source. It sends the operator's words
//! to corpus-builder, which owns the corpus egress, and renders what comes back: progress bars
//! for fetch, parse and index (on a terminal only), then the summary table.

use std::io::IsTerminal as _;
use std::process::ExitCode;

use comfy_table::Table;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use reach_manifest::Manifest;
use reach_manifest::plan::StateLayout;
use reach_proto::corpus::v1 as pb;
use reach_proto::corpus::v1::corpus_admin_client::CorpusAdminClient;
use tokio_stream::StreamExt as _;

use crate::BodyTarget;

mod eval;

/// Hits `search` asks for unless told.
const DEFAULT_HITS: u32 = 5;

// Parsed once per process; boxing `add`'s flags would only obscure clap's derive.
#[allow(clippy::large_enum_variant)]
#[derive(clap::Subcommand, Debug)]
pub enum CorpusCommand {
    /// Add a source to corpus-builder's sources (nothing is fetched yet).
    Add {
        /// The source's name (`[a-z0-9._-]`).
        name: String,
        /// Canonical https URL: a git repository, or a release archive (`.tar.gz`).
        url: String,
        /// A release archive's published digest (`sha256:<hex>`); without it the URL is git.
        #[arg(long)]
        digest: Option<String>,
        /// The git branch whose tip is shown as a candidate.
        #[arg(long, default_value = "main")]
        branch: String,
        /// Pinned paths (include globs, repeatable); `**/*.md` if none.
        #[arg(long)]
        include: Vec<String>,
        /// Base of citation URLs (`…/blob/<rev>/path`).
        #[arg(long)]
        citation_base: Option<String>,
        /// Where the source's static HTML site is published (`https://…`): its pages are then
        /// cited at the published page and section anchor instead of source lines.
        #[arg(long)]
        site_base: Option<String>,
        /// The directory of the tree the site is published from (with `--site-base`).
        #[arg(long)]
        site_root: Option<String>,
        /// An extra origin redirects may go to (`https://host[:port]`, repeatable).
        #[arg(long = "redirect-origin")]
        redirect_origins: Vec<String>,
        /// Ceilings of this source (0 keeps the default).
        #[arg(long, default_value_t = 0)]
        max_files: u64,
        #[arg(long, default_value_t = 0)]
        max_bytes: u64,
        #[arg(long, default_value_t = 0)]
        max_expansion_ratio: u64,
        #[arg(long, default_value_t = 0)]
        max_depth: u32,
        #[arg(long, default_value_t = 0)]
        max_work_time_secs: u64,
        #[command(flatten)]
        target: BodyTarget,
    },
    /// Admit an exact commit (git) or the published digest (release archive), then build and
    /// activate it.
    Admit {
        source: String,
        revision: String,
        #[command(flatten)]
        target: BodyTarget,
    },
    /// Rebuild a source at its admitted revision (a git source also shows its branch tip as a
    /// candidate).
    Build {
        source: String,
        #[command(flatten)]
        target: BodyTarget,
    },
    /// Each source: admitted and candidate revisions, active snapshot, freshness, last failure.
    Status {
        #[command(flatten)]
        target: BodyTarget,
    },
    /// Measure answers on a question set (JSON Lines, the format of `crates/corpus/eval/`):
    /// hit@1, hit@3, key facts, out-of-corpus refused, false refusals, latency. The corpus is
    /// built locally from `--docs DIR` (the files `reach demo --docs DIR` answers from) or the
    /// project's own docs; the set's `include` and `exclude` apply, its `root` is the bench's.
    Eval {
        /// The question set.
        file: std::path::PathBuf,
        /// A directory of Markdown or HTML to build the corpus from, instead of the project's
        /// docs.
        #[arg(long)]
        docs: Option<std::path::PathBuf>,
        /// Ask each question this many times (the latency figures are over every ask).
        #[arg(long, default_value_t = 1)]
        rounds: usize,
        /// List every question that missed, with its rank, facts and the gate's figures.
        #[arg(long)]
        verbose: bool,
        /// Rank with this static embedding table beside BM25 (`scripts/embedding-setup.sh`
        /// distils one; core uses it when placed at `<corpus root>/embedding.bin`).
        #[arg(long, value_name = "TABLE")]
        embedding: Option<std::path::PathBuf>,
    },
    /// The top passages of the active snapshot, with canonical pinned URLs.
    Search {
        query: String,
        #[arg(long, default_value_t = DEFAULT_HITS)]
        limit: u32,
        #[command(flatten)]
        target: BodyTarget,
    },
}

impl CorpusCommand {
    /// The body the command talks to (`eval` talks to none).
    fn target(&self) -> Option<&BodyTarget> {
        match self {
            CorpusCommand::Add { target, .. }
            | CorpusCommand::Admit { target, .. }
            | CorpusCommand::Build { target, .. }
            | CorpusCommand::Status { target }
            | CorpusCommand::Search { target, .. } => Some(target),
            CorpusCommand::Eval { .. } => None,
        }
    }
}

type Client = CorpusAdminClient<tonic::transport::Channel>;

async fn client(m: &Manifest, layout: &StateLayout) -> anyhow::Result<Client> {
    let material = reach_launcher::operator_material(m, layout)?;
    let ch = reach_launcher::operator_channel(m, layout, &material, "corpus-builder.admin")
        .await
        .map_err(anyhow::Error::msg)?;
    Ok(CorpusAdminClient::new(ch))
}

pub async fn run(command: CorpusCommand) -> anyhow::Result<ExitCode> {
    let Some(target) = command.target() else {
        let CorpusCommand::Eval {
            file,
            docs,
            rounds,
            verbose,
            embedding,
        } = command
        else {
            unreachable!("only eval has no target")
        };
        return Ok(tokio::task::spawn_blocking(move || {
            eval::run(
                &file,
                docs.as_deref(),
                embedding.as_deref(),
                rounds,
                verbose,
            )
        })
        .await?);
    };
    let m = target.manifest()?;
    let layout = target.layout(&m)?;
    let mut c = client(&m, &layout).await?;
    match command {
        CorpusCommand::Add {
            name,
            url,
            digest,
            branch,
            include,
            citation_base,
            site_base,
            site_root,
            redirect_origins,
            max_files,
            max_bytes,
            max_expansion_ratio,
            max_depth,
            max_work_time_secs,
            ..
        } => {
            let kind = if digest.is_some() {
                "release_archive"
            } else {
                "git"
            };
            let r = c
                .add_source(pb::AddSourceRequest {
                    name: name.clone(),
                    kind: kind.into(),
                    url,
                    branch,
                    digest: digest.unwrap_or_default(),
                    include,
                    citation_base: citation_base.unwrap_or_default(),
                    site_base: site_base.unwrap_or_default(),
                    site_root: site_root.unwrap_or_default(),
                    redirect_origins,
                    ceilings: Some(pb::SourceCeilings {
                        max_files,
                        max_bytes,
                        max_expansion_ratio,
                        max_depth,
                        max_work_time_secs,
                    }),
                })
                .await?
                .into_inner();
            if !r.refusal_code.is_empty() {
                eprintln!("refused: {}: {}", r.refusal_code, r.detail);
                return Ok(ExitCode::FAILURE);
            }
            println!(
                "added source {name} ({kind}); admit a revision with `reach corpus admit {name} <revision>`"
            );
            Ok(ExitCode::SUCCESS)
        }
        CorpusCommand::Admit {
            source, revision, ..
        } => {
            let stream = c
                .admit(pb::AdmitRequest { source, revision })
                .await?
                .into_inner();
            render_build(stream).await
        }
        CorpusCommand::Build { source, .. } => {
            let stream = c.build(pb::BuildRequest { source }).await?.into_inner();
            render_build(stream).await
        }
        CorpusCommand::Status { .. } => {
            let s = c.status(pb::StatusRequest {}).await?.into_inner();
            print!("{}", render_status(&s.sources));
            // A manifest naming a corpus no source provides must not pass silently.
            if let Some(warning) = habitat_mismatch(&m.habitat.corpus, &s.sources) {
                eprintln!("{warning}");
                return Ok(ExitCode::FAILURE);
            }
            Ok(ExitCode::SUCCESS)
        }
        CorpusCommand::Eval { .. } => unreachable!("eval was answered above"),
        CorpusCommand::Search { query, limit, .. } => {
            let r = c
                .search(pb::SearchRequest { query, limit })
                .await?
                .into_inner();
            if !r.refusal_code.is_empty() {
                eprintln!("refused: {}", r.refusal_code);
                return Ok(ExitCode::FAILURE);
            }
            print!("{}", render_search(&r));
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The bars: fetch, parse and index are drawn; validate and activate are brief and only
/// reported in the summary. Hidden unless stderr is a terminal (piped output stays clean).
struct Bars {
    multi: MultiProgress,
    bars: Vec<(String, ProgressBar)>,
}

impl Bars {
    fn new() -> Self {
        let target = if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        Bars {
            multi: MultiProgress::with_draw_target(target),
            bars: Vec::new(),
        }
    }

    fn update(&mut self, p: &pb::Progress) {
        if !matches!(p.phase.as_str(), "fetch" | "parse" | "index") {
            return;
        }
        let bar = match self.bars.iter().find(|(n, _)| *n == p.phase) {
            Some((_, b)) => b.clone(),
            None => {
                let unit = match p.phase.as_str() {
                    "fetch" => "{bytes}/{total_bytes}",
                    "parse" => "{pos}/{len} files",
                    _ => "{pos}/{len} passages",
                };
                let style = ProgressStyle::with_template(&format!(
                    "{{prefix:>6}} [{{bar:30}}] {unit} {{elapsed}}"
                ))
                .unwrap_or_else(|_| ProgressStyle::default_bar());
                let b = self.multi.add(ProgressBar::new(0).with_style(style));
                b.set_prefix(p.phase.clone());
                self.bars.push((p.phase.clone(), b.clone()));
                b
            }
        };
        bar.set_length(p.total.max(p.done));
        bar.set_position(p.done);
        if p.finished {
            bar.finish();
        }
    }

    fn clear(&self) {
        for (_, b) in &self.bars {
            b.finish();
        }
    }
}

async fn render_build(
    mut stream: tonic::codec::Streaming<pb::BuildEvent>,
) -> anyhow::Result<ExitCode> {
    let mut bars = Bars::new();
    while let Some(ev) = stream.next().await {
        match ev?.event {
            Some(pb::build_event::Event::Progress(p)) => bars.update(&p),
            Some(pb::build_event::Event::Summary(s)) => {
                bars.clear();
                print!("{}", render_summary(&s));
                return Ok(ExitCode::SUCCESS);
            }
            Some(pb::build_event::Event::Refusal(r)) => {
                bars.clear();
                // Once, on stderr: stdout carries results only.
                eprintln!("{}", build_refusal_line(&r));
                return Ok(ExitCode::FAILURE);
            }
            None => {}
        }
    }
    anyhow::bail!("corpus-builder ended the build stream without a summary")
}

/// The refusal when the manifest's `habitat.corpus` names no source corpus-builder has.
pub fn habitat_mismatch(corpus: &str, sources: &[pb::SourceStatus]) -> Option<String> {
    if sources.iter().any(|s| s.source == corpus) {
        return None;
    }
    let names: Vec<&str> = sources.iter().map(|s| s.source.as_str()).collect();
    Some(format!(
        "refused: corpus/habitat-unknown: habitat.corpus {corpus:?} names no source \
         of corpus-builder (sources: {})",
        names.join(", ")
    ))
}

/// A refused build or admit, as the operator reads it.
pub fn build_refusal_line(r: &pb::Refusal) -> String {
    format!(
        "refused: {}: {} (the previous snapshot stays active)",
        r.code, r.detail
    )
}

/// The summary table of one build.
pub fn render_summary(s: &pb::Summary) -> String {
    let mut t = Table::new();
    t.load_preset(comfy_table::presets::ASCII_MARKDOWN);
    t.set_header(vec!["build", "value"]);
    t.add_row(vec!["snapshot".to_string(), s.snapshot_id.clone()]);
    t.add_row(vec!["revision".to_string(), s.revision.clone()]);
    // The paths the build pinned: the default `**/*.md` takes every edition and translation.
    t.add_row(vec!["include".to_string(), s.include.join(", ")]);
    t.add_row(vec![
        "files accepted".to_string(),
        s.files_accepted.to_string(),
    ]);
    for r in &s.skipped {
        t.add_row(vec![format!("skipped ({})", r.rule), r.files.to_string()]);
    }
    t.add_row(vec!["passages".to_string(), s.passages.to_string()]);
    t.add_row(vec!["bytes".to_string(), s.bytes.to_string()]);
    t.add_row(vec!["index bytes".to_string(), s.index_bytes.to_string()]);
    t.add_row(vec!["elapsed".to_string(), format!("{} ms", s.elapsed_ms)]);
    t.add_row(vec!["fresh until".to_string(), when(s.fresh_until_ms)]);
    format!("{t}\n")
}

/// One line per source.
pub fn render_status(sources: &[pb::SourceStatus]) -> String {
    let mut out = String::new();
    for s in sources {
        let or_dash = |v: &str| {
            if v.is_empty() {
                "-".to_string()
            } else {
                v.to_string()
            }
        };
        out.push_str(&format!(
            "{} ({}) admitted {} candidate {} active {}",
            s.source,
            s.kind,
            or_dash(&s.admitted_revision),
            or_dash(&s.candidate_revision),
            or_dash(&s.active_snapshot_id),
        ));
        if !s.active_snapshot_id.is_empty() {
            out.push_str(&format!(
                " {} until {}",
                s.freshness,
                when(s.fresh_until_ms)
            ));
        }
        out.push_str(&format!(" last-failure {}\n", or_dash(&s.last_failure)));
    }
    out
}

pub fn render_search(r: &pb::SearchResponse) -> String {
    let mut out = format!("snapshot {} (revision {})\n", r.snapshot_id, r.revision);
    if r.hits.is_empty() {
        out.push_str("no passage clears the relevance threshold: not in the docs\n");
    }
    for (i, h) in r.hits.iter().enumerate() {
        out.push_str(&format!(
            "{:>2}. {} (score {:.2})\n    {}\n    {}\n",
            i + 1,
            h.section,
            h.score,
            h.url,
            h.excerpt
        ));
    }
    out
}

fn when(ms: u64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_show_admitted_candidate_active_and_failure() {
        let sources = [
            pb::SourceStatus {
                source: "reach-docs".into(),
                kind: "release_archive".into(),
                admitted_revision: "ab12".into(),
                ..Default::default()
            },
            pb::SourceStatus {
                source: "docs".into(),
                kind: "git".into(),
                admitted_revision: "c0ffee".into(),
                candidate_revision: "beef".into(),
                active_snapshot_id: "snap-1".into(),
                freshness: "degraded".into(),
                fresh_until_ms: 1_767_225_600_000,
                last_failure: "corpus/git: connection refused".into(),
                ..Default::default()
            },
        ];
        assert_eq!(
            render_status(&sources),
            "reach-docs (release_archive) admitted ab12 candidate - active - last-failure -\n\
             docs (git) admitted c0ffee candidate beef active snap-1 degraded until \
             2026-01-01T00:00:00Z last-failure corpus/git: connection refused\n"
        );
    }

    #[test]
    fn the_summary_table_lists_skipped_files_per_rule() {
        let table = render_summary(&pb::Summary {
            snapshot_id: "snap-1".into(),
            revision: "c0ffee".into(),
            files_accepted: 2,
            skipped: vec![pb::SkippedRule {
                rule: "corpus/unsupported-media".into(),
                files: 1,
            }],
            passages: 3,
            bytes: 214,
            index_bytes: 6549,
            elapsed_ms: 123,
            fresh_until_ms: 1_767_225_600_000,
            include: vec!["src/**/*.md".into(), "book/**/*.html".into()],
        });
        assert_eq!(
            table,
            "| build                              | value                       |\n\
             |------------------------------------|-----------------------------|\n\
             | snapshot                           | snap-1                      |\n\
             | revision                           | c0ffee                      |\n\
             | include                            | src/**/*.md, book/**/*.html |\n\
             | files accepted                     | 2                           |\n\
             | skipped (corpus/unsupported-media) | 1                           |\n\
             | passages                           | 3                           |\n\
             | bytes                              | 214                         |\n\
             | index bytes                        | 6549                        |\n\
             | elapsed                            | 123 ms                      |\n\
             | fresh until                        | 2026-01-01T00:00:00Z        |\n"
        );
    }

    #[test]
    fn a_habitat_corpus_naming_no_source_is_refused() {
        let sources = [pb::SourceStatus {
            source: "reach-docs".into(),
            ..Default::default()
        }];
        assert_eq!(habitat_mismatch("reach-docs", &sources), None);
        assert_eq!(
            habitat_mismatch("my-book", &sources).as_deref(),
            Some(
                "refused: corpus/habitat-unknown: habitat.corpus \"my-book\" names no \
                 source of corpus-builder (sources: reach-docs)"
            )
        );
    }

    #[test]
    fn a_refused_build_is_one_line_with_its_code() {
        let line = build_refusal_line(&pb::Refusal {
            code: "corpus/digest-mismatch".into(),
            detail: "archive digest differs".into(),
        });
        assert_eq!(
            line,
            "refused: corpus/digest-mismatch: archive digest differs (the previous snapshot \
             stays active)"
        );
        assert_eq!(line.lines().count(), 1);
    }
}
