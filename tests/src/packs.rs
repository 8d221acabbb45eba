//! Pack sources for the `core.packs` tests (tests/tests/packs.rs, hil_fence.rs): the reference
//! pack's directory and edited copies of it.

use std::path::{Path, PathBuf};

/// The reference pack CI runs end to end.
pub const PACK: &str = "postfix-local-delivery";

/// Its source directory.
pub fn source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../packs")
        .join(PACK)
}

/// Copies the directory tree `from` to `to`.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// Replaces the first `from` in the file at `path` (which must contain it) with `to`.
pub fn replace_in(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{} has no {from:?}", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

/// A copy of the reference pack with `edit` applied, built and signed with `key`.
pub fn build_variant(
    key: &reach_taskpack::PackKey,
    edit: impl FnOnce(&Path),
) -> reach_taskpack::BuiltPack {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&source(), dir.path());
    edit(dir.path());
    reach_taskpack::build(dir.path(), key).unwrap()
}
