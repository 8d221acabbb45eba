//! Shared fixtures of Scribe's tests: the checked-in manifest with the reference digests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

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

/// The generator: `REACH_QUADLET`, else where scripts/quadlet-setup.sh installs it.
#[allow(clippy::disallowed_methods)] // A test knob naming a binary, never a secret.
pub fn quadlet_binary() -> PathBuf {
    let path = std::env::var_os("REACH_QUADLET")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/local/libexec/reach/quadlet"));
    assert!(
        path.is_file(),
        "the Quadlet generator is not at {} — run scripts/quadlet-setup.sh (as root) or set REACH_QUADLET",
        path.display()
    );
    path
}

/// Runs `quadlet -dryrun` on `dir`; returns each generated service's text by name.
pub fn dryrun(dir: &Path) -> BTreeMap<String, String> {
    let out = Command::new(quadlet_binary())
        .arg("-dryrun")
        .env("QUADLET_UNIT_DIRS", dir)
        .output()
        .expect("quadlet runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "quadlet failed: {stderr}");
    assert!(
        !stderr.contains("converting"),
        "quadlet refused a unit: {stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut services = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in stdout.lines() {
        if let Some(name) = line.strip_prefix("---").and_then(|l| l.strip_suffix("---")) {
            if let Some((n, t)) = current.take() {
                services.insert(n, t);
            }
            current = Some((name.to_owned(), String::new()));
        } else if let Some((_, t)) = current.as_mut() {
            t.push_str(line);
            t.push('\n');
        }
    }
    if let Some((n, t)) = current {
        services.insert(n, t);
    }
    services
}

/// The words of the `ExecStart=` line of a service.
pub fn exec_start(service: &str) -> Vec<String> {
    exec_line(service, "ExecStart")
}

/// The words of a generated service's `key=` line (`ExecStop`, …).
pub fn exec_line(service: &str, key: &str) -> Vec<String> {
    let line = service
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("{key}"));
    line.split_whitespace().map(str::to_owned).collect()
}

pub mod podman;
