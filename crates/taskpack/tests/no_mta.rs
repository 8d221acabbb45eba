//! Structural: no shared crate or service names a mail transfer agent (the seed's last Done
//! When item; `../shared/design/TASKPACKS.md` §3). What a pack means lives in `packs/`.
//!
//! The rule, exactly: every file under `crates/*/src`, `crates/*/tests`, `crates/*/benches`,
//! `services/*/src`, `proto/`, `manifest/src` and `cli/src` (the repository root is
//! `CARGO_MANIFEST_DIR/../..`), read as bytes and compared line by line in ASCII lowercase,
//! contains none of [`NEEDLES`]. Excepted: the directories of [`EXCEPTED`] (none
//! now), this file (it lists the needles), and the files of [`KNOWN`] (none now), each a
//! FIXME that may only shrink: a hit in any other file fails naming
//! `file:line`, and a file of [`KNOWN`] without a hit fails too, so the list is kept exact.

mod common;

use std::path::{Path, PathBuf};

/// The words no shared code may contain (case-insensitive).
const NEEDLES: [&str; 9] = [
    "postfix",
    "qmail",
    "smtp",
    "sendmail",
    "exim",
    "main.cf",
    "tcp.smtp",
    "/var/qmail",
    "maildir",
];

/// Directories left out of the scan, relative to the repository root: none.
const EXCEPTED: [&str; 0] = [];

/// This file: it names the needles.
const THIS_FILE: &str = "crates/taskpack/tests/no_mta.rs";

/// Files that still name an MTA, each with what is left to do. A FIXME list: remove an
/// entry when its file is clean (the test fails until you do).
const KNOWN: [(&str, &str); 0] = [];

/// The roots the rule scans: `crates/*/{src,tests,benches}`, `services/*/src`, `proto`,
/// `manifest/src`, `cli/src`.
fn roots(repo: &Path) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    for (parent, subs) in [
        ("crates", &["src", "tests", "benches"][..]),
        ("services", &["src"][..]),
    ] {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(repo.join(parent))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .collect();
        dirs.sort();
        for d in dirs {
            roots.extend(subs.iter().map(|s| d.join(s)).filter(|p| p.is_dir()));
        }
    }
    roots.extend(
        ["proto", "manifest/src", "cli/src"]
            .iter()
            .map(|p| repo.join(p))
            .filter(|p| p.is_dir()),
    );
    roots
}

fn relative(repo: &Path, path: &Path) -> String {
    path.strip_prefix(repo)
        .unwrap()
        .to_string_lossy()
        .replace(std::path::MAIN_SEPARATOR, "/")
}

fn walk(repo: &Path, dir: &Path, out: &mut Vec<String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let rel = relative(repo, &path);
        if EXCEPTED
            .iter()
            .any(|e| rel == *e || rel.starts_with(&format!("{e}/")))
        {
            continue;
        }
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            walk(repo, &path, out);
        } else if meta.is_file() && rel != THIS_FILE {
            out.push(rel);
        }
    }
}

/// Every `file:line: needle` hit of the rule, in path order.
fn hits(repo: &Path) -> Vec<(String, usize, &'static str)> {
    let mut files = Vec::new();
    for root in roots(repo) {
        walk(repo, &root, &mut files);
    }
    let mut hits = Vec::new();
    for rel in files {
        let bytes = std::fs::read(repo.join(&rel)).unwrap();
        for (n, line) in bytes.split(|&b| b == b'\n').enumerate() {
            let lower = line.to_ascii_lowercase();
            if let Some(needle) = NEEDLES
                .iter()
                .find(|w| lower.windows(w.len()).any(|x| x == w.as_bytes()))
            {
                hits.push((rel.clone(), n + 1, *needle));
            }
        }
    }
    hits
}

#[test]
fn no_shared_code_names_an_mta() {
    let repo = common::repo_root().canonicalize().unwrap();
    let hits = hits(&repo);
    let known = |f: &str| KNOWN.iter().any(|(k, _)| *k == f);
    let new: Vec<String> = hits
        .iter()
        .filter(|(f, _, _)| !known(f))
        .map(|(f, n, w)| format!("{f}:{n}: `{w}`"))
        .collect();
    assert!(
        new.is_empty(),
        "shared code names an MTA (move the meaning into the pack, or name no program):\n{}",
        new.join("\n")
    );
    let stale: Vec<&str> = KNOWN
        .iter()
        .map(|(f, _)| *f)
        .filter(|f| !hits.iter().any(|(h, _, _)| h == f))
        .collect();
    assert!(
        stale.is_empty(),
        "these files are clean now; remove them from KNOWN: {stale:?}"
    );
}

/// The scan sees what it must: the roots exist and a planted hit would be found.
#[test]
fn the_scan_covers_the_roots() {
    let repo = common::repo_root().canonicalize().unwrap();
    let roots: Vec<String> = roots(&repo).iter().map(|p| relative(&repo, p)).collect();
    for must in [
        "crates/taskpack/src",
        "crates/taskpack/tests",
        "crates/vm/src",
        "cli/src",
        "proto",
    ] {
        assert!(
            roots.iter().any(|r| r == must),
            "{must} not scanned: {roots:?}"
        );
    }
    let mut files = Vec::new();
    walk(&repo, &repo.join("crates/taskpack/tests"), &mut files);
    assert!(
        files
            .iter()
            .any(|f| f == "crates/taskpack/tests/data/app-local/verifier.toml")
    );
    assert!(!files.iter().any(|f| f == THIS_FILE));
}
