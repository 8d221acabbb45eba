//! The acquired tree: what acquisition hands to processing, whatever the origin.

use reach_digest::Sha256Digest;
use serde::{Deserialize, Serialize};

/// One entry of an acquired tree, with its raw (unjudged) path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    pub path: String,
    pub kind: EntryKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    File {
        bytes: Vec<u8>,
        executable: bool,
    },
    Symlink {
        target: String,
    },
    /// A git submodule (gitlink) pointing at a commit in another repository.
    Submodule {
        commit: String,
    },
    /// Anything else (hard link, device, fifo), named for the record.
    Other(String),
}

/// The exact revision a tree was read from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revision {
    /// The operator-admitted commit (git origins).
    pub commit: Option<String>,
    /// The verified release-archive digest (archive origins).
    pub archive_digest: Option<Sha256Digest>,
    /// The revision that appears in canonical URLs (`…/blob/<rev>/path`): the commit, or the
    /// archive digest's hex.
    pub citation_rev: String,
}

/// An acquired tree ready for processing.
#[derive(Debug, Clone)]
pub struct AcquiredTree {
    pub revision: Revision,
    pub entries: Vec<TreeEntry>,
    /// Bytes received over the wire (archive size or pack size), for the receipt.
    pub compressed_bytes: u64,
    pub expanded_bytes: u64,
}

impl AcquiredTree {
    /// The bytes of a file entry at exactly `path`, if present.
    pub fn file(&self, path: &str) -> Option<&[u8]> {
        self.entries.iter().find_map(|e| match &e.kind {
            EntryKind::File { bytes, .. } if e.path == path => Some(bytes.as_slice()),
            _ => None,
        })
    }
}
