//! Shared by the integration tests: the test pack, the reference packs (found under the
//! repository's `packs/`, never named here), keys, and archive surgery.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use reach_taskpack::archive;
use reach_taskpack::{PackFiles, PackKey, TrustedKeys};

/// A time before every pack's expiry (2027-01-15).
pub const NOW: u64 = 1_800_000_000;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The MTA-neutral test pack.
pub fn test_pack_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/app-local")
}

/// Every reference pack: each directory under `packs/` with a `pack.toml`, sorted.
pub fn reference_pack_dirs() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(repo_root().join("packs")) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("pack.toml").is_file())
        .collect();
    dirs.sort();
    dirs
}

/// Every pack the tests build: the test pack first, then the reference packs.
pub fn all_pack_dirs() -> Vec<PathBuf> {
    let mut v = vec![test_pack_dir()];
    v.extend(reference_pack_dirs());
    v
}

fn key_from(cell: &'static OnceLock<Vec<u8>>) -> PackKey {
    PackKey::from_pkcs8(cell.get_or_init(|| PackKey::generate().unwrap())).unwrap()
}

/// The operator's trusted key.
pub fn key() -> PackKey {
    static K: OnceLock<Vec<u8>> = OnceLock::new();
    key_from(&K)
}

/// A key nobody trusts.
pub fn stranger() -> PackKey {
    static K: OnceLock<Vec<u8>> = OnceLock::new();
    key_from(&K)
}

pub fn trusted() -> TrustedKeys {
    let mut t = TrustedKeys::new();
    t.insert("operator", key().public());
    t
}

pub fn test_pack_files() -> PackFiles {
    PackFiles::read_dir(&test_pack_dir()).unwrap()
}

/// The test pack's files with `file` replaced by `edit` of its text.
pub fn edited(file: &str, edit: impl FnOnce(&str) -> String) -> PackFiles {
    let mut map: BTreeMap<String, Vec<u8>> = test_pack_files().into_map();
    let text = String::from_utf8(map[file].clone()).unwrap();
    let new = edit(&text);
    assert_ne!(new, text, "the edit of {file} changed nothing");
    map.insert(file.to_owned(), new.into_bytes());
    PackFiles::new(map).unwrap()
}

/// An archive of `files` with `facts_json`, signed by `key`: what a signer who signs
/// whatever it is given would send.
pub fn craft(files: &PackFiles, facts_json: &[u8], key: &PackKey) -> Vec<u8> {
    archive::write(facts_json, &key.sign(facts_json).to_json(), files)
}

/// `code: message` of a result.
pub fn outcome<T, E: std::fmt::Display>(
    r: Result<T, E>,
    code: impl Fn(&E) -> &'static str,
) -> String {
    match r {
        Ok(_) => "accepted".to_owned(),
        Err(e) => format!("{}: {e}", code(&e)),
    }
}
