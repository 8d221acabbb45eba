//! Shared fixtures: a small docs corpus, a raw tar writer that can express hostile entries, and
//! archive source specs.
#![allow(dead_code)]

use std::sync::Arc;

use reach_corpus::{
    AcquiredTree, Ceilings, CorpusStore, ManualClock, Origin, SourceSpec, admit_url,
};
use reach_digest::Sha256Digest;
use time::OffsetDateTime;

pub const BASE: &str = "https://github.com/reach-project/reach";

pub fn good_docs() -> Vec<(String, Vec<u8>)> {
    vec![
        (
            "docs/install.md".into(),
            b"# Installing Reach\n\nReach runs as rootless Podman containers, one systemd unit per role.\n\n## Requirements\n\nYou need Podman 4.4 or newer and a non-login service account.\nThe operator runs Scribe to generate the Quadlet units.\n\n## Upgrading\n\nStop the units, replace the images by digest, then start them again.\n".to_vec(),
        ),
        (
            "docs/corpus.md".into(),
            b"# Public corpus\n\nThe corpus builder fetches an admitted commit over HTTPS and builds a BM25 index.\n\n## Freshness\n\nA snapshot is fresh for 24 hours after activation. After that Reach answers that the dependency is unavailable.\n\n## Citations\n\nEvery answer cites passages pinned to the commit with line ranges.\n".to_vec(),
        ),
        (
            "docs/discord.md".into(),
            b"# Discord\n\nMention the bot or use the ask command in an admitted channel.\nThe bot replies exactly once with citations, or refuses honestly.\n".to_vec(),
        ),
    ]
}

/// One raw tar entry, written without the tar crate's path sanitising.
pub enum Raw {
    File(String, Vec<u8>),
    Exec(String, Vec<u8>),
    Symlink(String, String),
    Hardlink(String, String),
}

pub fn raw_tgz(entries: &[Raw]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut b = tar::Builder::new(gz);
    for e in entries {
        let mut h = tar::Header::new_gnu();
        let (name, data, ty, mode, link): (&str, &[u8], tar::EntryType, u32, Option<&str>) = match e
        {
            Raw::File(n, d) => (n, d, tar::EntryType::Regular, 0o644, None),
            Raw::Exec(n, d) => (n, d, tar::EntryType::Regular, 0o755, None),
            Raw::Symlink(n, t) => (n, &[], tar::EntryType::Symlink, 0o777, Some(t)),
            Raw::Hardlink(n, t) => (n, &[], tar::EntryType::Link, 0o644, Some(t)),
        };
        {
            let old = h.as_old_mut();
            old.name[..name.len()].copy_from_slice(name.as_bytes());
            if let Some(l) = link {
                old.linkname[..l.len()].copy_from_slice(l.as_bytes());
            }
        }
        h.set_entry_type(ty);
        h.set_mode(mode);
        h.set_size(data.len() as u64);
        h.set_mtime(0);
        h.set_cksum();
        b.append(&h, data).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}

pub fn files(docs: &[(String, Vec<u8>)]) -> Vec<Raw> {
    docs.iter()
        .map(|(p, d)| Raw::File(p.clone(), d.clone()))
        .collect()
}

pub fn archive_spec(bytes: &[u8], ceilings: Ceilings) -> SourceSpec {
    SourceSpec {
        name: "reach-docs".into(),
        origin: Origin::ReleaseArchive {
            url: admit_url("https://releases.example.org/reach/docs.tar.gz").unwrap(),
            digest: Sha256Digest::of(bytes),
        },
        include: vec!["docs/**".into()],
        ceilings,
        citation_base: Some(admit_url(BASE).unwrap()),
        site_base: None,
        site_root: String::new(),
        redirect_origins: vec![],
        historical: false,
    }
}

pub fn t0() -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_767_225_600).unwrap() // 2026-01-01T00:00:00Z
}

pub fn store(dir: &std::path::Path) -> (CorpusStore, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::at(t0()));
    (CorpusStore::new(dir, clock.clone()).unwrap(), clock)
}

pub fn tree_of(bytes: &[u8], spec: &SourceSpec) -> AcquiredTree {
    reach_corpus::acquire_release_archive(spec, bytes).unwrap()
}

/// A deterministic pseudo-random ASCII stream (xorshift), incompressible enough that a large
/// line is not also a decompression bomb.
pub fn noise(len: usize) -> Vec<u8> {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ";
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ALPHABET[(x % ALPHABET.len() as u64) as usize]
        })
        .collect()
}

/// A store whose active snapshot is built from [`good_docs`] as a release archive, with its
/// clock and the archive's bytes.
pub fn built() -> (tempfile::TempDir, CorpusStore, Arc<ManualClock>, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let (store, clock) = store(dir.path());
    let bytes = raw_tgz(&files(&good_docs()));
    let spec = archive_spec(&bytes, Ceilings::default());
    store
        .refresh_archive(
            &spec,
            &bytes,
            &reach_corpus::Policy::default(),
            &mut reach_corpus::NoProgress,
        )
        .unwrap();
    (dir, store, clock, bytes)
}
