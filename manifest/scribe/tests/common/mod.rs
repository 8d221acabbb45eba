//! Shared fixtures of Scribe's tests: the checked-in manifest with the reference digests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use reach_manifest::plan::StateLayout;
use reach_manifest::{Manifest, VPS_PUBLIC};
use reach_scribe::Refusal;
use reach_scribe::images::{DigestSource, PinnedImage, pin_images};
use reach_scribe::quadlet::{Materialized, QuadletInput, derive};

/// The host state directory the reference output is rendered for.
pub const REFERENCE_STATE: &str = "/var/lib/reach";

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn reference_digests() -> PathBuf {
    repo().join("deploy/reference-digests.toml")
}

pub fn reference_dir() -> PathBuf {
    repo().join("deploy/quadlet")
}

pub fn load(text: &str) -> Manifest {
    reach_manifest::load(text).expect("valid manifest")
}

pub fn pinned(m: &Manifest) -> BTreeMap<String, PinnedImage> {
    pin_images(m, &DigestSource::File(reference_digests()))
        .expect("reference digests pin every image")
}

/// Derives units for `text` with the reference digests and `state`.
pub fn derive_text(text: &str, state: &Path) -> Result<Materialized, Refusal> {
    let m = load(text);
    let images = pinned(&m);
    derive(&QuadletInput::new(&m, images, StateLayout::new(state)))
}

/// The checked-in manifest with `from` replaced by `to` (once; the text must be there).
pub fn mutate(from: &str, to: &str) -> String {
    assert!(VPS_PUBLIC.contains(from), "fixture text `{from}` not found");
    VPS_PUBLIC.replacen(from, to, 1)
}

/// The checked-in manifest with `extra` TOML lines added to role `role`.
pub fn with_role_lines(role: &str, extra: &str) -> String {
    mutate(
        &format!("image = \"localhost/reach/{role}\"\n"),
        &format!("image = \"localhost/reach/{role}\"\n{extra}\n"),
    )
}
