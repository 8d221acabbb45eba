//! The admin port (`reach.corpus.v1.CorpusAdmin`, operator only): sources, admission of an
//! exact revision, builds streamed as progress events, status and search.
//!
//! Protobuf stays here: the domain types are `reach_corpus`'s, converted by hand.

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use reach_corpus::git::GitTls;
use reach_corpus::{
    BuildError, CorpusStore, Freshness, NoProgress, Origin, Policy, RetrievalLimits, Snapshot,
    SourceSpec,
};
use reach_proto::corpus::v1 as pb;
use reach_proto::corpus::v1::corpus_admin_server::{CorpusAdmin, CorpusAdminServer};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::embedded::Source;
use crate::fetch::{ArchiveFetcher, PURPOSE};
use crate::progress::{ChannelProgress, refusal};
use crate::sources::{Sources, SourcesError};

/// Most hits `Search` returns.
pub const MAX_SEARCH_HITS: u32 = 20;
/// Longest excerpt of a hit, in bytes.
const EXCERPT_BYTES: usize = 240;
/// Longest source name: it is a file name (git cache) and a column in status.
const MAX_NAME: usize = 64;

#[derive(Debug, Clone)]
pub struct Builder {
    store: Arc<CorpusStore>,
    embedded: Arc<Source>,
    sources: Sources,
    fetcher: Arc<ArchiveFetcher>,
    git_tls: GitTls,
    git_cache: PathBuf,
    /// One build at a time: builds share the store's single active pointer.
    build_lock: Arc<tokio::sync::Mutex<()>>,
}

/// What a build runs on.
#[derive(Debug)]
enum Job {
    Embedded,
    Configured(Box<SourceSpec>),
}

impl Builder {
    pub fn new(
        store: CorpusStore,
        embedded: Source,
        data_dir: &std::path::Path,
        fetcher: ArchiveFetcher,
        git_tls: GitTls,
    ) -> Self {
        Self {
            store: Arc::new(store),
            embedded: Arc::new(embedded),
            sources: Sources::at(data_dir),
            fetcher: Arc::new(fetcher),
            git_tls,
            git_cache: data_dir.join("git"),
            build_lock: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    pub fn into_server(self) -> CorpusAdminServer<Self> {
        CorpusAdminServer::new(self)
    }

    /// Builds and activates the embedded docs when nothing is active, or when the active
    /// snapshot is the embedded source at another digest or no longer fresh. A source the
    /// operator admitted is never replaced by the default.
    pub async fn ensure_embedded_active(&self) -> anyhow::Result<()> {
        let status = self.store.status();
        if let Some(active) = &status.active {
            let ours = active.source.name == self.embedded.spec.name;
            let same = active.revision.archive_digest == Some(self.embedded.digest);
            if !ours || (same && matches!(status.freshness, Freshness::Fresh)) {
                return Ok(());
            }
        }
        let (store, source) = (self.store.clone(), self.embedded.clone());
        tokio::task::spawn_blocking(move || {
            store.refresh_archive(
                &source.spec,
                &source.bytes,
                &Policy::default(),
                &mut NoProgress,
            )
        })
        .await?
        .map_err(|e| anyhow::anyhow!("default corpus did not build: {}: {e}", e.code()))?;
        Ok(())
    }

    fn job(&self, name: &str) -> Result<Job, SourcesError> {
        if name == self.embedded.spec.name {
            return Ok(Job::Embedded);
        }
        Ok(Job::Configured(Box::new(self.sources.get(name)?)))
    }

    fn stream(&self, job: Job) -> Response<BuildStream> {
        let (tx, rx) = mpsc::channel(64);
        let this = self.clone();
        tokio::spawn(async move {
            let last = this.run(job, tx.clone()).await;
            let _ = tx.send(Ok(last)).await;
        });
        Response::new(Box::pin(ReceiverStream::new(rx)))
    }

    /// Fetch, parse, index, validate and activate; the last event is the summary or the
    /// typed refusal (the previous snapshot stays active on any refusal).
    async fn run(
        &self,
        job: Job,
        tx: mpsc::Sender<Result<pb::BuildEvent, Status>>,
    ) -> pb::BuildEvent {
        let _guard = self.build_lock.lock().await;
        let (spec, bytes) = match job {
            Job::Embedded => (
                self.embedded.spec.clone(),
                Some(self.embedded.bytes.clone()),
            ),
            Job::Configured(spec) => match &spec.origin {
                Origin::ReleaseArchive { url, .. } => {
                    let spec = *spec.clone();
                    ChannelProgress::phase(&tx, "fetch", 0, 0, false).await;
                    match self.fetcher.fetch(&spec, url).await {
                        Ok(b) => (spec, Some(b.to_vec())),
                        Err(e) => {
                            let code = e.code();
                            let _ =
                                self.store
                                    .record_failed_attempt(&spec.name, &code, &e.to_string());
                            return refusal(&code, &e.to_string());
                        }
                    }
                }
                Origin::Git { .. } => match self.pins(&spec).await {
                    Ok(pins) => return self.run_git(*spec, pins, tx).await,
                    Err((code, detail)) => {
                        let _ = self.store.record_failed_attempt(&spec.name, &code, &detail);
                        return refusal(&code, &detail);
                    }
                },
            },
        };
        let bytes = bytes.unwrap_or_default();
        let store = self.store.clone();
        let outcome = tokio::task::spawn_blocking(move || {
            let mut progress = ChannelProgress::new(tx);
            store
                .refresh_archive(&spec, &bytes, &Policy::default(), &mut progress)
                .map(|s| (s, spec))
        })
        .await;
        self.finish(outcome)
    }

    async fn run_git(
        &self,
        spec: SourceSpec,
        pins: Vec<(String, std::net::SocketAddr)>,
        tx: mpsc::Sender<Result<pb::BuildEvent, Status>>,
    ) -> pb::BuildEvent {
        let (store, tls) = (self.store.clone(), self.git_tls.clone());
        let cache = self.git_cache.join(format!("{}.git", spec.name));
        let outcome = tokio::task::spawn_blocking(move || {
            let mut progress = ChannelProgress::new(tx);
            store
                .refresh_git_pinned(
                    &spec,
                    &cache,
                    &tls,
                    &pins,
                    &Policy::default(),
                    &mut progress,
                )
                .map(|(s, _)| (s, spec))
        })
        .await;
        self.finish(outcome)
    }

    /// Destination admission of every host a git source may reach: its own and its admitted
    /// redirect origins, each pinned to the one address admission chose.
    async fn pins(
        &self,
        spec: &SourceSpec,
    ) -> Result<Vec<(String, std::net::SocketAddr)>, (String, String)> {
        let mut urls = vec![spec.url().as_str().to_string()];
        urls.extend(spec.redirect_origins.iter().map(|o| format!("{o}/")));
        let mut pins = Vec::new();
        for u in urls {
            let admitted = async {
                let purpose = reach_destination::Purpose::new(PURPOSE)?;
                let d = reach_destination::Destination::parse(&u, purpose)?;
                self.fetcher.admission().admit(d).await
            }
            .await
            .map_err(|e| (e.code().to_string(), e.to_string()))?;
            let host = match admitted.destination().host() {
                reach_destination::Host::Name(n) => n.clone(),
                reach_destination::Host::Ip(ip) => ip.to_string(),
            };
            pins.push((host, admitted.pinned_addr()));
        }
        Ok(pins)
    }

    fn finish(
        &self,
        outcome: Result<
            Result<(reach_corpus::BuildSummary, SourceSpec), BuildError>,
            tokio::task::JoinError,
        >,
    ) -> pb::BuildEvent {
        match outcome {
            Err(e) => refusal("corpus/internal", &e.to_string()),
            Ok(Err(e)) => refusal(e.code(), &e.to_string()),
            Ok(Ok((s, spec))) => {
                // The spec that activated is the source's admitted state from now on (for an
                // admit, its new commit; for a build, what was already there).
                if spec.name != self.embedded.spec.name
                    && let Err(e) = self.sources.replace(spec.clone())
                {
                    tracing::warn!(source = %spec.name, code = e.code(), "admitted revision not recorded");
                }
                let revision = self
                    .store
                    .status()
                    .active
                    .map(|a| a.revision.citation_rev)
                    .unwrap_or_default();
                tracing::info!(source = %spec.name, snapshot = %s.snapshot_id, files = s.files_accepted, "corpus snapshot activated");
                pb::BuildEvent {
                    event: Some(pb::build_event::Event::Summary(pb::Summary {
                        snapshot_id: s.snapshot_id,
                        revision,
                        files_accepted: s.files_accepted,
                        skipped: s
                            .skipped_per_rule
                            .iter()
                            .map(|(r, n)| pb::SkippedRule {
                                rule: r.code().into(),
                                files: *n,
                            })
                            .collect(),
                        passages: s.passages,
                        bytes: s.bytes,
                        index_bytes: s.index_bytes,
                        elapsed_ms: s.work_millis,
                        fresh_until_ms: millis(s.fresh_until),
                        include: spec.include.clone(),
                    })),
                }
            }
        }
    }

    fn source_status(&self, spec: &SourceSpec, s: &reach_corpus::CorpusStatus) -> pb::SourceStatus {
        let (kind, admitted) = match &spec.origin {
            Origin::Git {
                admitted_commit, ..
            } => ("git", admitted_commit.clone().unwrap_or_default()),
            Origin::ReleaseArchive { digest, .. } => ("release_archive", digest.hex()),
        };
        let mut out = pb::SourceStatus {
            source: spec.name.clone(),
            kind: kind.into(),
            url: spec.url().to_string(),
            admitted_revision: admitted,
            candidate_revision: s
                .candidate
                .as_ref()
                .filter(|c| c.source == spec.name)
                .map(|c| c.commit.clone())
                .unwrap_or_default(),
            last_failure: s
                .failures
                .iter()
                .find(|f| f.source == spec.name)
                .map(|f| format!("{}: {}", f.code, f.reason))
                .unwrap_or_default(),
            ..Default::default()
        };
        if let Some(a) = s.active.as_ref().filter(|a| a.source.name == spec.name) {
            out.active_snapshot_id = a.snapshot_id.clone();
            out.fresh_until_ms = millis(a.fresh_until);
            out.freshness = match &s.freshness {
                Freshness::None => "none",
                Freshness::Fresh => "fresh",
                Freshness::Degraded { .. } => "degraded",
                Freshness::Expired => "expired",
            }
            .into();
        }
        out
    }
}

fn millis(t: time::OffsetDateTime) -> u64 {
    (t.unix_timestamp_nanos() / 1_000_000).max(0) as u64
}

type BuildStream =
    Pin<Box<dyn tokio_stream::Stream<Item = Result<pb::BuildEvent, Status>> + Send + 'static>>;

fn add_refused(code: &str, detail: impl std::fmt::Display) -> Response<pb::AddSourceResponse> {
    Response::new(pb::AddSourceResponse {
        refusal_code: code.into(),
        detail: detail.to_string(),
    })
}

/// The operator's request as the source config `SourceSpec::from_json` admits.
fn spec_json(r: &pb::AddSourceRequest) -> Result<serde_json::Value, (&'static str, String)> {
    let name_ok = !r.name.is_empty()
        && r.name.len() <= MAX_NAME
        && r.name.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_' || b == b'.'
        })
        && !r.name.starts_with('.');
    if !name_ok {
        return Err((
            "corpus/source-name",
            format!(
                "`{}` is not a source name ([a-z0-9._-], at most {MAX_NAME})",
                r.name
            ),
        ));
    }
    let origin = match r.kind.as_str() {
        "git" => serde_json::json!({
            "kind": "git",
            "url": r.url,
            "branch": if r.branch.is_empty() { "main" } else { r.branch.as_str() },
            "admitted_commit": null,
        }),
        "release_archive" | "archive" => {
            if r.digest.is_empty() {
                return Err((
                    "corpus/digest-required",
                    "a release archive is admitted only with its published sha256".into(),
                ));
            }
            let digest = if r.digest.contains(':') {
                r.digest.clone()
            } else {
                format!("sha256:{}", r.digest)
            };
            serde_json::json!({ "kind": "release_archive", "url": r.url, "digest": digest })
        }
        other => {
            return Err((
                "corpus/source-kind",
                format!("kind `{other}` is neither git nor release_archive"),
            ));
        }
    };
    let include: Vec<String> = if r.include.is_empty() {
        vec!["**/*.md".into()]
    } else {
        r.include.clone()
    };
    let mut v = serde_json::json!({
        "name": r.name,
        "origin": origin,
        "include": include,
        "redirect_origins": r.redirect_origins,
    });
    if !r.citation_base.is_empty() {
        v["citation_base"] = r.citation_base.clone().into();
    }
    if !r.site_base.is_empty() {
        v["site_base"] = r.site_base.clone().into();
    }
    if !r.site_root.is_empty() {
        v["site_root"] = r.site_root.clone().into();
    }
    if let Some(c) = &r.ceilings {
        v["ceilings"] = serde_json::to_value(ceilings(c)?).expect("ceilings serialize");
    }
    Ok(v)
}

/// Largest ceilings an operator may set: the role's container (memory, disk) bounds the rest.
const CEILING_MAX: pb::SourceCeilings = pb::SourceCeilings {
    max_files: 200_000,
    max_bytes: 2 * 1024 * 1024 * 1024,
    max_expansion_ratio: 1_000,
    max_depth: 64,
    max_work_time_secs: 3_600,
};

/// The operator's ceilings over the defaults; a zero field keeps the default.
fn ceilings(c: &pb::SourceCeilings) -> Result<reach_corpus::Ceilings, (&'static str, String)> {
    fn pick<T: Copy + PartialOrd + Default + std::fmt::Display>(
        name: &str,
        asked: T,
        default: T,
        max: T,
    ) -> Result<T, (&'static str, String)> {
        if asked == T::default() {
            Ok(default)
        } else if asked > max {
            Err((
                "corpus/ceiling-out-of-range",
                format!("{name} {asked} is above the most this role may take ({max})"),
            ))
        } else {
            Ok(asked)
        }
    }
    let d = reach_corpus::Ceilings::default();
    Ok(reach_corpus::Ceilings {
        max_files: pick("max_files", c.max_files, d.max_files, CEILING_MAX.max_files)?,
        max_bytes: pick("max_bytes", c.max_bytes, d.max_bytes, CEILING_MAX.max_bytes)?,
        max_expansion_ratio: pick(
            "max_expansion_ratio",
            c.max_expansion_ratio,
            d.max_expansion_ratio,
            CEILING_MAX.max_expansion_ratio,
        )?,
        max_depth: pick("max_depth", c.max_depth, d.max_depth, CEILING_MAX.max_depth)?,
        max_work_time_secs: pick(
            "max_work_time_secs",
            c.max_work_time_secs,
            d.max_work_time_secs,
            CEILING_MAX.max_work_time_secs,
        )?,
        ..d
    })
}

#[tonic::async_trait]
impl CorpusAdmin for Builder {
    async fn status(
        &self,
        _r: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        let s = self.store.status();
        let mut sources = vec![self.source_status(&self.embedded.spec, &s)];
        let configured = self
            .sources
            .load()
            .map_err(|e| Status::failed_precondition(format!("{}: {e}", e.code())))?;
        sources.extend(configured.iter().map(|spec| self.source_status(spec, &s)));
        Ok(Response::new(pb::StatusResponse { sources }))
    }

    async fn add_source(
        &self,
        r: Request<pb::AddSourceRequest>,
    ) -> Result<Response<pb::AddSourceResponse>, Status> {
        let r = r.into_inner();
        let json = match spec_json(&r) {
            Ok(j) => j,
            Err((code, detail)) => return Ok(add_refused(code, detail)),
        };
        let spec = match SourceSpec::from_json(&json.to_string()) {
            Ok(s) => s,
            Err(e) => return Ok(add_refused(e.code(), &e)),
        };
        match self.sources.add(spec, &[self.embedded.spec.name.as_str()]) {
            Ok(()) => {
                tracing::info!(source = %r.name, kind = %r.kind, "corpus source added");
                Ok(Response::new(pb::AddSourceResponse::default()))
            }
            Err(e) => Ok(add_refused(e.code(), &e)),
        }
    }

    type AdmitStream = BuildStream;

    async fn admit(&self, r: Request<pb::AdmitRequest>) -> Result<Response<BuildStream>, Status> {
        let r = r.into_inner();
        let job = match self.job(&r.source) {
            Ok(j) => j,
            Err(e) => return Ok(once(refusal(e.code(), &e.to_string()))),
        };
        let revision = r.revision.trim().to_ascii_lowercase();
        let published = |digest: &reach_digest::Sha256Digest| {
            revision == digest.hex() || revision == digest.to_string()
        };
        let job = match job {
            // Immutable archives: the only admissible revision is the published digest.
            Job::Embedded if published(&self.embedded.digest) => Job::Embedded,
            Job::Configured(spec) => match &spec.origin {
                Origin::ReleaseArchive { digest, .. } if published(digest) => Job::Configured(spec),
                Origin::Git { url, branch, .. } => {
                    if revision.len() != 40 || !revision.bytes().all(|b| b.is_ascii_hexdigit()) {
                        return Ok(once(refusal(
                            "corpus/revision-malformed",
                            "a git revision is a full 40-hex commit id",
                        )));
                    }
                    let admitted = SourceSpec {
                        origin: Origin::Git {
                            url: url.clone(),
                            branch: branch.clone(),
                            admitted_commit: Some(revision.clone()),
                        },
                        ..(*spec).clone()
                    };
                    // Recorded as the admitted commit only once it built and activated
                    // (`finish`): a refused admit keeps the good commit admitted.
                    Job::Configured(Box::new(admitted))
                }
                Origin::ReleaseArchive { .. } => {
                    return Ok(once(refusal(
                        "corpus/revision-not-published",
                        "the revision is not the source's published digest",
                    )));
                }
            },
            Job::Embedded => {
                return Ok(once(refusal(
                    "corpus/revision-not-published",
                    "the revision is not the embedded archive's digest",
                )));
            }
        };
        tracing::info!(source = %r.source, revision = %revision, "corpus revision admitted");
        Ok(self.stream(job))
    }

    type BuildStream = BuildStream;

    async fn build(&self, r: Request<pb::BuildRequest>) -> Result<Response<BuildStream>, Status> {
        let r = r.into_inner();
        match self.job(&r.source) {
            Ok(job) => Ok(self.stream(job)),
            Err(e) => Ok(once(refusal(e.code(), &e.to_string()))),
        }
    }

    async fn search(
        &self,
        r: Request<pb::SearchRequest>,
    ) -> Result<Response<pb::SearchResponse>, Status> {
        let r = r.into_inner();
        let limits = RetrievalLimits {
            max_passages: r.limit.clamp(1, MAX_SEARCH_HITS),
            ..RetrievalLimits::default()
        };
        let root = self.store.root().to_path_buf();
        let now = self.store.clock().now();
        let out = tokio::task::spawn_blocking(move || {
            let snap = Snapshot::open_active(&root)?;
            let bundle = snap.retrieve(&r.query, &limits, now)?;
            Ok::<_, reach_corpus::RetrievalRefusal>((snap.record().snapshot_id.clone(), bundle))
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?;
        Ok(Response::new(match out {
            Err(e) => pb::SearchResponse {
                refusal_code: e.code().into(),
                ..Default::default()
            },
            Ok((snapshot_id, bundle)) => pb::SearchResponse {
                snapshot_id,
                revision: bundle.revision.clone(),
                refusal_code: String::new(),
                hits: bundle
                    .passages
                    .iter()
                    .map(|p| pb::SearchHit {
                        passage_id: p.passage_id.clone(),
                        url: p.url.clone(),
                        section: p.section.clone(),
                        score: p.score,
                        excerpt: excerpt(&p.text),
                        line_start: p.line_start,
                        line_end: p.line_end,
                    })
                    .collect(),
            },
        }))
    }
}

/// A stream of one event (a refusal before any work).
fn once(event: pb::BuildEvent) -> Response<BuildStream> {
    Response::new(Box::pin(tokio_stream::once(Ok(event))))
}

/// The first words of a passage on one line, cut at a character boundary.
fn excerpt(text: &str) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.len() <= EXCERPT_BYTES {
        return flat;
    }
    let mut end = EXCERPT_BYTES;
    while !flat.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &flat[..end])
}
