//! The default corpus: the project's documentation, embedded at build time.

use reach_corpus::{Ceilings, Origin, SourceSpec, admit_url, pack_entries};
use reach_digest::Sha256Digest;

/// The embedded files, by their path in the repository.
const DOCS: &[(&str, &str)] = &[
    ("README.md", include_str!("../../../README.md")),
    ("ARCHITECTURE.md", include_str!("../../../ARCHITECTURE.md")),
    (
        "docs/identity-and-ports.md",
        include_str!("../../../docs/identity-and-ports.md"),
    ),
    ("docs/ledger.md", include_str!("../../../docs/ledger.md")),
    (
        "docs/operator-guide.md",
        include_str!("../../../docs/operator-guide.md"),
    ),
];

/// Where citations point: the canonical repository (`…/blob/<archive digest>/path#Lx-Ly`).
/// `.invalid` until the project publishes a canonical host; nothing ever dials it.
const CITATION_BASE: &str = "https://reach.invalid/reach";
const ARCHIVE_URL: &str = "https://reach.invalid/releases/reach-docs.tar.gz";

/// The packed archive and the spec that admits exactly its digest.
#[derive(Debug)]
pub struct Source {
    pub spec: SourceSpec,
    pub bytes: Vec<u8>,
    pub digest: Sha256Digest,
}

impl Source {
    pub fn pack() -> anyhow::Result<Self> {
        let bytes = pack_entries(DOCS.iter().map(|(p, t)| (*p, t.as_bytes())))?;
        let digest = Sha256Digest::of(&bytes);
        let spec = SourceSpec {
            name: "reach-docs".into(),
            origin: Origin::ReleaseArchive {
                url: admit_url(ARCHIVE_URL)?,
                digest,
            },
            include: vec!["**/*.md".into()],
            ceilings: Ceilings::default(),
            citation_base: Some(admit_url(CITATION_BASE)?),
            redirect_origins: vec![],
            historical: false,
        };
        Ok(Self {
            spec,
            bytes,
            digest,
        })
    }
}
