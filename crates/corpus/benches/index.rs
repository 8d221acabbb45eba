//! Index benchmark: a bench binary that prints figures (harness = false).
//!
//! Builds the index from a generated Markdown corpus (≥ 50 MB) and from the project's docs
//! (`docs/` and README files found in the workspace), then runs 1,000 queries.
//! Targets (issue 5): indexing ≥ 20 MB/s, query p50 ≤ 2 ms.
#![allow(clippy::disallowed_methods)] // Test, benchmark or build-script knobs, never secrets.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reach_corpus::{
    AcquiredTree, Ceilings, Clock, CorpusStore, EntryKind, Origin, Policy, Progress,
    RetrievalLimits, Revision, Snapshot, SourceSpec, Stage, SystemClock, TreeEntry, admit_url,
};
use reach_digest::Sha256Digest;

const WORDS: &[&str] = &[
    "reach",
    "corpus",
    "snapshot",
    "podman",
    "quadlet",
    "systemd",
    "discord",
    "gateway",
    "ward",
    "badge",
    "egress",
    "decision",
    "provider",
    "delivery",
    "intent",
    "nonce",
    "claim",
    "lease",
    "manifest",
    "scribe",
    "identity",
    "certificate",
    "rustls",
    "socket",
    "port",
    "tonic",
    "citation",
    "passage",
    "index",
    "tantivy",
    "freshness",
    "activation",
    "refusal",
    "operator",
    "approval",
    "verifier",
    "pack",
    "workbench",
    "instance",
    "budget",
    "token",
    "retention",
    "backup",
    "restore",
    "journal",
    "firewall",
    "nftables",
    "namespace",
    "container",
    "image",
    "digest",
    "commit",
    "branch",
    "candidate",
    "archive",
    "release",
    "limits",
    "timeout",
    "retry",
    "heartbeat",
];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn word(&mut self) -> &'static str {
        // Zipf-ish: square the uniform draw to favour early words.
        let u = (self.next() % 1000) as f64 / 1000.0;
        WORDS[((u * u) * WORDS.len() as f64) as usize]
    }
}

fn generated(target_bytes: usize) -> Vec<TreeEntry> {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut entries = Vec::new();
    let mut total = 0;
    let mut n = 0;
    while total < target_bytes {
        let mut doc = format!("# {} {} guide {n}\n\n", rng.word(), rng.word());
        for s in 0..8 {
            doc.push_str(&format!("## {} {} section {s}\n\n", rng.word(), rng.word()));
            for _ in 0..4 {
                let len = 8 + rng.next() % 20;
                let sentence: Vec<&str> = (0..len).map(|_| rng.word()).collect();
                doc.push_str(&sentence.join(" "));
                doc.push_str(".\n");
            }
            doc.push('\n');
        }
        total += doc.len();
        entries.push(TreeEntry {
            path: format!("docs/d{:03}/guide{n}.md", n / 500),
            kind: EntryKind::File {
                bytes: doc.into_bytes(),
                executable: false,
            },
        });
        n += 1;
    }
    entries
}

fn project_docs(root: &Path) -> Vec<TreeEntry> {
    let mut out = Vec::new();
    fn walk(root: &Path, dir: &Path, out: &mut Vec<TreeEntry>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with('.') || name == "target" {
                continue;
            }
            if p.is_dir() {
                walk(root, &p, out);
            } else if name.ends_with(".md")
                && let (Ok(bytes), Ok(rel)) = (std::fs::read(&p), p.strip_prefix(root))
            {
                out.push(TreeEntry {
                    path: rel.to_string_lossy().replace('\\', "/"),
                    kind: EntryKind::File {
                        bytes,
                        executable: false,
                    },
                });
            }
        }
    }
    walk(root, root, &mut out);
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

fn spec(include: &str) -> SourceSpec {
    SourceSpec {
        name: "bench".into(),
        origin: Origin::ReleaseArchive {
            url: admit_url("https://releases.example.org/bench.tar.gz").unwrap(),
            digest: Sha256Digest::of(b"bench"),
        },
        include: vec![include.into()],
        ceilings: Ceilings {
            max_files: 1_000_000,
            max_bytes: 1 << 34,
            ..Ceilings::default()
        },
        citation_base: Some(admit_url("https://github.com/reach-project/reach").unwrap()),
        site_base: None,
        site_root: String::new(),
        redirect_origins: vec![],
        historical: false,
    }
}

/// Times each build stage (start to finish) so the figures show where the build goes.
#[derive(Default)]
struct StageTimes {
    started: Option<(Stage, Instant)>,
    done: Vec<(Stage, Duration)>,
}

impl Progress for StageTimes {
    fn start(&mut self, stage: Stage, _total: Option<u64>) {
        self.started = Some((stage, Instant::now()));
    }
    fn finish(&mut self, stage: Stage) {
        if let Some((s, t)) = self.started.take()
            && s == stage
        {
            self.done.push((stage, t.elapsed()));
        }
    }
}

impl StageTimes {
    fn line(&self) -> String {
        self.done
            .iter()
            .map(|(s, d)| format!("{s:?} {:.2} s", d.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn run(name: &str, entries: Vec<TreeEntry>, include: &str) {
    let raw: u64 = entries
        .iter()
        .map(|e| match &e.kind {
            EntryKind::File { bytes, .. } => bytes.len() as u64,
            _ => 0,
        })
        .sum();
    if raw == 0 {
        println!("{name}: no Markdown found, skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let store = CorpusStore::new(dir.path(), clock.clone()).unwrap();
    let tree = AcquiredTree {
        revision: Revision {
            commit: None,
            archive_digest: None,
            citation_rev: "bench".into(),
        },
        entries,
        compressed_bytes: raw,
        expanded_bytes: raw,
    };
    let mut stages = StageTimes::default();
    let t = Instant::now();
    let summary = store
        .build(&spec(include), &tree, &Policy::default(), &mut stages)
        .unwrap();
    let secs = t.elapsed().as_secs_f64();
    let mb = raw as f64 / 1e6;
    println!(
        "{name}: {mb:.1} MB raw, {} files, {} passages; build (process+index+validate+activate) {secs:.2} s = {:.1} MB/s; index {:.1} MB, index/raw ratio {:.2}",
        summary.files_accepted,
        summary.passages,
        mb / secs,
        summary.index_bytes as f64 / 1e6,
        summary.index_bytes as f64 / raw as f64
    );
    println!("{name}: stages: {}", stages.line());
    let snap = Snapshot::open_active(store.root()).unwrap();
    let mut rng = Rng(0xDEAD_BEEF_CAFE_F00D);
    let questions: Vec<String> = (0..1000)
        .map(|i| {
            if i % 10 == 9 {
                "what is the airspeed of an unladen swallow".to_string()
            } else {
                format!(
                    "how does {} {} work with {}?",
                    rng.word(),
                    rng.word(),
                    rng.word()
                )
            }
        })
        .collect();
    let limits = RetrievalLimits::default();
    let now = clock.now();
    let mut lat = Vec::with_capacity(questions.len());
    let mut empty = 0;
    for q in &questions {
        let t = Instant::now();
        let b = snap.retrieve(q, &limits, now).unwrap();
        lat.push(t.elapsed().as_secs_f64() * 1e3);
        empty += usize::from(b.passages.is_empty());
    }
    lat.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| lat[((lat.len() as f64 - 1.0) * p) as usize];
    println!(
        "{name}: 1000 queries: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms ({empty} not-in-docs)",
        pct(0.50),
        pct(0.99),
        pct(1.0)
    );
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    let mb: usize = std::env::var("REACH_BENCH_CORPUS_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    run("project docs", project_docs(&workspace), "**/*.md");
    run(
        &format!("generated {mb} MB"),
        generated(mb * 1_000_000),
        "docs/**",
    );
}
