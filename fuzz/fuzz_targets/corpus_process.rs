//! Corpus processing (crates/corpus `process::process_tree`, then `passage::split`): the
//! Markdown, HTML and text of an acquired tree, with hostile paths, links, submodules,
//! control files and parser bombs, built structurally.
//!
//! Promised: only normal, pinned paths inside the depth ceiling are accepted, never
//! repository internals; accepted text obeys the byte, line and NUL rules; every rejection is
//! a rule whose action is what the policy says; passages cover real line ranges of their file.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use reach_corpus::{EntryKind, Revision, TreeEntry};

include!("corpus_common.rs");

#[derive(Debug, Arbitrary)]
enum Kind {
    File { text: String, executable: bool },
    Bytes(Vec<u8>),
    Symlink(String),
    Submodule,
    Other,
}

#[derive(Debug, Arbitrary)]
struct Entry {
    /// A path from a fixed alphabet of components (so globs and traversal are reached), or free.
    parts: Vec<u8>,
    free: Option<String>,
    ext: u8,
    kind: Kind,
}

const PARTS: &[&str] = &[
    "docs", "..", ".", "", ".git", "a", "hooks", "/", "\\", "C:", "sub",
];
const EXTS: &[&str] = &[
    ".md",
    ".html",
    ".txt",
    ".rst",
    ".png",
    "",
    ".gitattributes",
    ".gitmodules",
];

fuzz_target!(|input: (Vec<Entry>, bool)| {
    let (entries, docs_only) = input;
    let entries = entries
        .into_iter()
        .take(32)
        .map(|e| {
            let path = match e.free {
                Some(p) => p,
                None => {
                    let mut p: Vec<&str> = e
                        .parts
                        .iter()
                        .take(8)
                        .map(|b| PARTS[*b as usize % PARTS.len()])
                        .collect();
                    let ext = EXTS[e.ext as usize % EXTS.len()];
                    p.push("f");
                    format!("{}{ext}", p.join("/"))
                }
            };
            let kind = match e.kind {
                Kind::File { text, executable } => EntryKind::File {
                    bytes: text.into_bytes(),
                    executable,
                },
                Kind::Bytes(bytes) => EntryKind::File {
                    bytes,
                    executable: false,
                },
                Kind::Symlink(target) => EntryKind::Symlink { target },
                Kind::Submodule => EntryKind::Submodule {
                    commit: "0".repeat(40),
                },
                Kind::Other => EntryKind::Other("fifo".into()),
            };
            TreeEntry { path, kind }
        })
        .collect();
    let tree = AcquiredTree {
        revision: Revision {
            commit: Some("0".repeat(40)),
            archive_digest: None,
            citation_rev: "0".repeat(40),
        },
        entries,
        compressed_bytes: 0,
        expanded_bytes: 0,
    };
    let include = if docs_only {
        vec!["docs/**".to_owned()]
    } else {
        vec!["**".to_owned()]
    };
    if let Some(out) = check_processed(&tree, &include) {
        if docs_only {
            assert!(
                out.accepted.iter().all(|f| f.path.starts_with("docs/")),
                "accepted an unpinned path"
            );
        }
    }
});
