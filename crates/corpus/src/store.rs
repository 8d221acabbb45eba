//! The snapshot store: staging, validation, atomic activation, status.
//!
//! Layout under the corpus root:
//!
//! ```text
//! CURRENT                      the active snapshot id, replaced by rename(2)
//! snapshots/<id>/snapshot.json PublicCorpusSnapshot@1
//! snapshots/<id>/index/        tantivy index, read-only once activated
//! staging/<n>/                 builds in progress; never read by retrieval
//! state.json                   last build attempt (failure reason) and the git candidate
//! ```
//!
//! **Architecture Invariant:** the only write that changes what retrieval sees is the rename of
//! `CURRENT.tmp` onto `CURRENT`, and it happens after the staged snapshot was fully validated and
//! renamed into `snapshots/`. Any earlier failure leaves `CURRENT` untouched.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use reach_digest::Sha256Digest;
use serde::{Deserialize, Serialize};
use time::{Duration, OffsetDateTime};

use crate::error::BuildError;
use crate::include::Includes;
use crate::index::{INDEX_REVISION, dir_bytes, validate_index, write_index};
use crate::passage::{PARSER_REVISION, Passage, split_including};
use crate::process::process_tree;
use crate::rules::{Policy, Rejection, Rule};
use crate::source::{Ceilings, Origin, SourceSpec};
use crate::tree::{AcquiredTree, Revision};

pub const SNAPSHOT_SCHEMA: &str = "PublicCorpusSnapshot@1";
/// Revision of this builder; recorded in every snapshot.
pub const BUILDER_REVISION: &str = concat!("reach-corpus/", env!("CARGO_PKG_VERSION"));
/// A snapshot answers for 24 hours after activation (seed 001, "Public corpus contract").
pub const FRESHNESS: Duration = Duration::hours(24);

/// The time source. Injected so freshness is testable without sleeping.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> OffsetDateTime;
}

#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}

/// A settable clock for tests and replays.
#[derive(Debug)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    pub fn at(t: OffsetDateTime) -> Self {
        ManualClock(AtomicU64::new(t.unix_timestamp() as u64))
    }
    pub fn set(&self, t: OffsetDateTime) {
        self.0.store(t.unix_timestamp() as u64, Ordering::SeqCst);
    }
    pub fn advance(&self, d: Duration) {
        self.0.fetch_add(d.whole_seconds() as u64, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(self.0.load(Ordering::SeqCst) as i64)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH)
    }
}

/// Build stages, for progress reporting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Fetch,
    Parse,
    Index,
    Validate,
    Activate,
}

/// Progress callbacks, e.g. to drive indicatif bars. Every method has a no-op default.
pub trait Progress {
    /// A stage starts; `total` is the number of units when known.
    fn start(&mut self, _stage: Stage, _total: Option<u64>) {}
    /// `n` more units of `stage` are done.
    fn advance(&mut self, _stage: Stage, _n: u64) {}
    fn finish(&mut self, _stage: Stage) {}
}

/// Progress that reports nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProgress;
impl Progress for NoProgress {}

/// The source as recorded in a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRecord {
    pub name: String,
    pub kind: String,
    pub url: String,
    pub branch: Option<String>,
    pub include: Vec<String>,
    pub ceilings: Ceilings,
    pub citation_base: String,
    pub historical: bool,
    /// The published site (`site_base`, `site_root`) HTML pages are cited at; absent in a
    /// record without one (and in every record written before it existed, whose digest must
    /// not change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<(String, String)>,
}

impl SourceRecord {
    fn of(spec: &SourceSpec) -> Self {
        let (kind, branch) = match &spec.origin {
            Origin::Git { branch, .. } => ("git", Some(branch.clone())),
            Origin::ReleaseArchive { .. } => ("release_archive", None),
        };
        SourceRecord {
            name: spec.name.clone(),
            kind: kind.into(),
            url: spec.url().to_string(),
            branch,
            include: spec.include.clone(),
            ceilings: spec.ceilings.clone(),
            citation_base: spec.citation_base(),
            historical: spec.historical,
            site: spec.site(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcceptedPath {
    pub path: String,
    pub digest: Sha256Digest,
    pub bytes: u64,
    pub passages: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tools {
    pub builder: String,
    pub parser: String,
    pub index: String,
}

impl Tools {
    pub fn current() -> Self {
        Tools {
            builder: BUILDER_REVISION.into(),
            parser: PARSER_REVISION.into(),
            index: INDEX_REVISION.into(),
        }
    }
}

/// What the build did, for the record and for `reach corpus status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildReceipt {
    #[serde(with = "time::serde::rfc3339")]
    pub started_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub finished_at: OffsetDateTime,
    pub entries_seen: u64,
    pub files_accepted: u64,
    pub files_skipped: u64,
    pub not_pinned: u64,
    pub skipped_per_rule: Vec<(Rule, u64)>,
    pub passages: u64,
    pub bytes_accepted: u64,
    pub compressed_bytes: u64,
    pub expanded_bytes: u64,
    pub index_bytes: u64,
    pub policy: Policy,
    /// Build work time in milliseconds (measured, informational).
    pub work_millis: u64,
}

/// `PublicCorpusSnapshot@1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublicCorpusSnapshot {
    pub schema: String,
    pub snapshot_id: String,
    pub source: SourceRecord,
    pub revision: Revision,
    /// Digest over the accepted paths' digests.
    pub content_digest: Sha256Digest,
    /// Digest over the sorted `(passage id, passage digest)` pairs.
    pub passages_digest: Sha256Digest,
    pub accepted: Vec<AcceptedPath>,
    pub skipped: Vec<Rejection>,
    pub tools: Tools,
    pub receipt: BuildReceipt,
    #[serde(with = "time::serde::rfc3339")]
    pub activated_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub fresh_until: OffsetDateTime,
    /// Digest of this record with `snapshot_digest` empty-hashed; binds every field above.
    pub snapshot_digest: Sha256Digest,
}

impl PublicCorpusSnapshot {
    fn compute_digest(&self) -> Sha256Digest {
        let mut c = self.clone();
        c.snapshot_digest = Sha256Digest::from_bytes([0; 32]);
        c.snapshot_id = String::new();
        Sha256Digest::of(serde_json::to_vec(&c).unwrap_or_default())
    }

    /// Whether `snapshot_digest` binds the record as read.
    pub fn digest_holds(&self) -> bool {
        self.compute_digest() == self.snapshot_digest
            && self.snapshot_id == id_of(&self.snapshot_digest)
    }

    pub fn is_fresh(&self, now: OffsetDateTime) -> bool {
        now < self.fresh_until
    }
}

fn id_of(d: &Sha256Digest) -> String {
    format!("snap-{}", &d.hex()[..24])
}

/// A failed build attempt, kept so status can show degraded freshness.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedAttempt {
    pub source: String,
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    pub code: String,
    pub reason: String,
}

/// A commit a moving branch revealed; shown, never activated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    pub source: String,
    pub branch: String,
    pub commit: String,
    #[serde(with = "time::serde::rfc3339")]
    pub seen_at: OffsetDateTime,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct State {
    /// The latest failure of each source (a source's success clears its own only).
    #[serde(default)]
    failures: Vec<FailedAttempt>,
    /// One failure across all sources, as state files before per-source failures held it; read
    /// into `failures`, never written.
    #[serde(default, skip_serializing)]
    last_failure: Option<FailedAttempt>,
    candidate: Option<Candidate>,
}

impl State {
    fn fail(&mut self, f: FailedAttempt) {
        self.failures.retain(|o| o.source != f.source);
        self.failures.push(f);
        self.failures.sort_by(|a, b| a.source.cmp(&b.source));
    }

    fn failure_of(&self, source: &str) -> Option<&FailedAttempt> {
        self.failures.iter().find(|f| f.source == source)
    }
}

/// Freshness of the active snapshot, as status shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Freshness {
    /// No snapshot was ever activated.
    None,
    Fresh,
    /// Still within `fresh_until`, but the latest refresh failed; the older snapshot serves.
    Degraded {
        reason: String,
    },
    /// Past `fresh_until`: retrieval answers `DependencyUnavailable`.
    Expired,
}

/// `reach corpus status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorpusStatus {
    pub active: Option<PublicCorpusSnapshot>,
    pub freshness: Freshness,
    /// The most recent failure of any source.
    pub last_failure: Option<FailedAttempt>,
    /// The latest failure of each source that has one, by source name.
    #[serde(default)]
    pub failures: Vec<FailedAttempt>,
    pub candidate: Option<Candidate>,
}

/// A summary of one successful build, for the CLI's table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildSummary {
    pub snapshot_id: String,
    pub files_accepted: u64,
    pub skipped_per_rule: Vec<(Rule, u64)>,
    pub passages: u64,
    pub bytes: u64,
    pub index_bytes: u64,
    pub work_millis: u64,
    #[serde(with = "time::serde::rfc3339")]
    pub fresh_until: OffsetDateTime,
}

impl BuildSummary {
    /// A plain-text table (the CLI may draw its own).
    pub fn table(&self) -> String {
        let mut s = format!(
            "snapshot   {}\naccepted   {} files, {} bytes\npassages   {}\nindex      {} bytes\ntime       {} ms\nfresh until {}\n",
            self.snapshot_id,
            self.files_accepted,
            self.bytes,
            self.passages,
            self.index_bytes,
            self.work_millis,
            self.fresh_until
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default(),
        );
        for (rule, n) in &self.skipped_per_rule {
            s.push_str(&format!("skipped    {n:>6}  {rule}\n"));
        }
        s
    }
}

/// The corpus root: builds, activates and reports on snapshots.
#[derive(Debug, Clone)]
pub struct CorpusStore {
    root: PathBuf,
    clock: Arc<dyn Clock>,
    /// How long an activated snapshot serves before retrieval answers DependencyUnavailable.
    freshness: Duration,
}

static STAGING_SEQ: AtomicU64 = AtomicU64::new(0);

impl CorpusStore {
    pub fn new(root: impl Into<PathBuf>, clock: Arc<dyn Clock>) -> std::io::Result<Self> {
        let root = root.into();
        std::fs::create_dir_all(root.join("snapshots"))?;
        std::fs::create_dir_all(root.join("staging"))?;
        Ok(CorpusStore {
            root,
            clock,
            freshness: FRESHNESS,
        })
    }

    /// Snapshots activated from now on stay fresh for `freshness` instead of [`FRESHNESS`].
    pub fn with_freshness(mut self, freshness: Duration) -> Self {
        self.freshness = freshness;
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Process, index, validate and atomically activate `tree` for `spec`. On any error the
    /// previous snapshot stays active and the failure is recorded for status.
    pub fn build(
        &self,
        spec: &SourceSpec,
        tree: &AcquiredTree,
        policy: &Policy,
        progress: &mut dyn Progress,
    ) -> Result<BuildSummary, BuildError> {
        let started = Instant::now();
        let staging = self.root.join("staging").join(format!(
            "{}-{}",
            std::process::id(),
            STAGING_SEQ.fetch_add(1, Ordering::SeqCst)
        ));
        let result = self.build_inner(spec, tree, policy, progress, started, &staging);
        // Staging never survives: on success it was renamed away, on failure it is garbage.
        let _ = std::fs::remove_dir_all(&staging);
        match result {
            Ok(s) => {
                self.update_state(|st| st.failures.retain(|f| f.source != spec.name))?;
                Ok(s)
            }
            Err(e) => {
                self.record_failure(&spec.name, &e)?;
                Err(e)
            }
        }
    }

    fn build_inner(
        &self,
        spec: &SourceSpec,
        tree: &AcquiredTree,
        policy: &Policy,
        progress: &mut dyn Progress,
        started: Instant,
        staging: &Path,
    ) -> Result<BuildSummary, BuildError> {
        let started_at = self.clock.now();
        let deadline = started + spec.ceilings.max_work_time();
        progress.start(Stage::Parse, Some(tree.entries.len() as u64));
        let processed = process_tree(
            tree,
            &spec.include,
            &spec.ceilings,
            policy,
            deadline,
            &mut |n| progress.advance(Stage::Parse, n),
        )?;
        let mut passages: Vec<Passage> = Vec::new();
        let mut accepted = Vec::with_capacity(processed.accepted.len());
        let budget = spec
            .ceilings
            .max_bytes
            .saturating_sub(processed.bytes_accepted);
        let includes = Includes::of(tree, &spec.ceilings, budget);
        for f in &processed.accepted {
            let ps = split_including(f, Some(&includes));
            if includes.over_budget() {
                return Err(BuildError::refused(
                    Rule::TooManyBytes,
                    f.path.clone(),
                    format!(
                        "accepted bytes and the listings they include exceed {}",
                        spec.ceilings.max_bytes
                    ),
                ));
            }
            accepted.push(AcceptedPath {
                path: f.path.clone(),
                digest: f.digest,
                bytes: f.text.len() as u64,
                passages: ps.len() as u32,
            });
            passages.extend(ps);
        }
        progress.finish(Stage::Parse);
        if passages.is_empty() {
            return Err(BuildError::Empty {
                skipped: processed.skipped.len(),
            });
        }
        if Instant::now() >= deadline {
            return Err(BuildError::refused(
                Rule::WorkTime,
                "<build>",
                "work-time ceiling reached",
            ));
        }

        progress.start(Stage::Index, Some(passages.len() as u64));
        let index_dir = staging.join("index");
        std::fs::create_dir_all(&index_dir)?;
        write_index(&index_dir, &passages, &mut |n| {
            progress.advance(Stage::Index, n)
        })?;
        progress.finish(Stage::Index);
        if Instant::now() >= deadline {
            return Err(BuildError::refused(
                Rule::WorkTime,
                "<build>",
                "work-time ceiling reached",
            ));
        }

        progress.start(Stage::Validate, Some(passages.len() as u64));
        let count = validate_index(&index_dir, &passages)?;
        progress.finish(Stage::Validate);

        let mut pairs: Vec<(&str, Sha256Digest)> =
            passages.iter().map(|p| (p.id.as_str(), p.digest)).collect();
        pairs.sort();
        let passages_digest = Sha256Digest::of_parts(
            pairs
                .iter()
                .flat_map(|(id, d)| [id.as_bytes(), d.as_bytes().as_slice()]),
        );
        let content_digest = Sha256Digest::of_parts(
            accepted
                .iter()
                .flat_map(|a| [a.path.as_bytes(), a.digest.as_bytes().as_slice()]),
        );
        let mut per_rule = std::collections::BTreeMap::<Rule, u64>::new();
        for s in &processed.skipped {
            *per_rule.entry(s.rule).or_default() += 1;
        }
        let skipped_per_rule: Vec<(Rule, u64)> = per_rule.into_iter().collect();
        let index_bytes = dir_bytes(&index_dir)?;
        let work_millis = started.elapsed().as_millis() as u64;

        progress.start(Stage::Activate, None);
        let activated_at = self.clock.now();
        let mut record = PublicCorpusSnapshot {
            schema: SNAPSHOT_SCHEMA.into(),
            snapshot_id: String::new(),
            source: SourceRecord::of(spec),
            revision: tree.revision.clone(),
            content_digest,
            passages_digest,
            accepted,
            skipped: processed.skipped.clone(),
            tools: Tools::current(),
            receipt: BuildReceipt {
                started_at,
                finished_at: activated_at,
                entries_seen: tree.entries.len() as u64,
                files_accepted: processed.accepted.len() as u64,
                files_skipped: processed.skipped.len() as u64,
                not_pinned: processed.not_pinned,
                skipped_per_rule: skipped_per_rule.clone(),
                passages: count,
                bytes_accepted: processed.bytes_accepted,
                compressed_bytes: tree.compressed_bytes,
                expanded_bytes: tree.expanded_bytes,
                index_bytes,
                policy: policy.clone(),
                work_millis,
            },
            activated_at,
            fresh_until: activated_at + self.freshness,
            snapshot_digest: Sha256Digest::from_bytes([0; 32]),
        };
        record.snapshot_digest = record.compute_digest();
        record.snapshot_id = id_of(&record.snapshot_digest);
        reach_durable_file::replace(
            &staging.join("snapshot.json"),
            &serde_json::to_vec_pretty(&record).map_err(std::io::Error::other)?,
            0o644,
        )?;

        // Re-open the staged snapshot exactly as retrieval will before making it visible.
        crate::retrieve::Snapshot::open_dir(staging)
            .map_err(|e| BuildError::Validation(format!("staged snapshot does not open: {e}")))?;

        let final_dir = self.root.join("snapshots").join(&record.snapshot_id);
        std::fs::rename(staging, &final_dir)?;
        // Best effort: the rename is durable where the platform can flush a directory.
        let _ = reach_durable_file::sync_dir_of(&final_dir);
        reach_durable_file::replace(
            &self.root.join("CURRENT"),
            format!("{}\n", record.snapshot_id).as_bytes(),
            0o644,
        )?;
        progress.finish(Stage::Activate);

        Ok(BuildSummary {
            snapshot_id: record.snapshot_id.clone(),
            files_accepted: record.receipt.files_accepted,
            skipped_per_rule,
            passages: count,
            bytes: processed.bytes_accepted,
            index_bytes,
            work_millis,
            fresh_until: record.fresh_until,
        })
    }

    /// Acquire a release archive from `bytes` and build it; a failure at either step is
    /// recorded and keeps the previous snapshot active.
    pub fn refresh_archive(
        &self,
        spec: &SourceSpec,
        bytes: &[u8],
        policy: &Policy,
        progress: &mut dyn Progress,
    ) -> Result<BuildSummary, BuildError> {
        progress.start(Stage::Fetch, Some(bytes.len() as u64));
        let tree = match crate::acquire_release_archive(spec, bytes) {
            Ok(t) => t,
            Err(e) => {
                self.record_failure(&spec.name, &e)?;
                return Err(e);
            }
        };
        progress.advance(Stage::Fetch, bytes.len() as u64);
        progress.finish(Stage::Fetch);
        self.build(spec, &tree, policy, progress)
    }

    /// Record a failed build (or acquisition) so status shows degraded freshness.
    pub fn record_failure(&self, source: &str, e: &BuildError) -> std::io::Result<()> {
        self.record_failed_attempt(source, e.code(), &e.to_string())
    }

    /// Record a failure that happened before this crate saw any bytes (corpus-builder's HTTPS
    /// download: destination admission, bounded reading, a refused redirect), by its code.
    pub fn record_failed_attempt(
        &self,
        source: &str,
        code: &str,
        reason: &str,
    ) -> std::io::Result<()> {
        let at = self.clock.now();
        self.update_state(|st| {
            st.fail(FailedAttempt {
                source: source.into(),
                at,
                code: code.into(),
                reason: reason.into(),
            })
        })
    }

    /// Record a candidate commit revealed by a moving branch. Never activates anything.
    pub fn record_candidate(
        &self,
        source: &str,
        branch: &str,
        commit: &str,
    ) -> std::io::Result<()> {
        let seen_at = self.clock.now();
        self.update_state(|st| {
            st.candidate = Some(Candidate {
                source: source.into(),
                branch: branch.into(),
                commit: commit.into(),
                seen_at,
            })
        })
    }

    fn read_state(&self) -> State {
        let mut st: State = std::fs::read(self.root.join("state.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        if let Some(f) = st.last_failure.take()
            && st.failure_of(&f.source).is_none()
        {
            st.fail(f);
        }
        st
    }

    fn update_state(&self, f: impl FnOnce(&mut State)) -> std::io::Result<()> {
        let mut st = self.read_state();
        f(&mut st);
        reach_durable_file::replace(
            &self.root.join("state.json"),
            &serde_json::to_vec_pretty(&st).map_err(std::io::Error::other)?,
            0o644,
        )
    }

    /// The id in `CURRENT`, if any.
    pub fn active_id(&self) -> Option<String> {
        active_id(&self.root)
    }

    pub fn status(&self) -> CorpusStatus {
        let st = self.read_state();
        let active = crate::retrieve::Snapshot::open_active(&self.root)
            .ok()
            .map(|s| s.record().clone());
        let now = self.clock.now();
        let freshness = match &active {
            None => Freshness::None,
            Some(s) if !s.is_fresh(now) => Freshness::Expired,
            Some(s) => match st.failure_of(&s.source.name) {
                // Only a failed refresh of the active source degrades it; a failed first
                // build of another source leaves it as it was (that failure shows on its own
                // source's status line).
                Some(f) if f.at >= s.activated_at && f.source == s.source.name => {
                    Freshness::Degraded {
                        reason: format!("{}: {}", f.code, f.reason),
                    }
                }
                _ => Freshness::Fresh,
            },
        };
        CorpusStatus {
            active,
            freshness,
            last_failure: st.failures.iter().max_by_key(|f| f.at).cloned(),
            failures: st.failures,
            candidate: st.candidate,
        }
    }
}

pub(crate) fn active_id(root: &Path) -> Option<String> {
    let s = std::fs::read_to_string(root.join("CURRENT")).ok()?;
    let id = s.trim();
    let ok =
        id.starts_with("snap-") && id.len() == 29 && id[5..].bytes().all(|b| b.is_ascii_hexdigit());
    ok.then(|| id.to_string())
}
