//! The image manifest (`reach.vm.image-manifest.v1`) and the image digest.
//!
//! The manifest names every input and output of a build: the spec digest, the builder
//! revision, every installed package with its version (and the archive's .deb digest where
//! apt knew it), the kernel/initrd/rootfs digests, and the guest agent's identity. The image
//! digest is the digest of the manifest's canonical JSON, so pinning the image digest pins
//! every one of those facts, and a substituted rootfs is caught by re-hashing it.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use reach_digest::{Hasher, Sha256Digest};
use serde::{Deserialize, Serialize};

/// The only manifest format this crate reads or writes.
pub const MANIFEST_FORMAT: &str = "reach.vm.image-manifest.v1";
/// File names inside an image directory.
pub const MANIFEST_FILE: &str = "manifest.json";
pub const DIGEST_FILE: &str = "image.digest";
pub const KERNEL_FILE: &str = "vmlinuz";
pub const INITRD_FILE: &str = "initrd.img";
pub const ROOTFS_FILE: &str = "rootfs.raw";

/// The virtio-serial port name the guest agent listens on.
pub const GUEST_AGENT_CHANNEL: &str = "org.qemu.guest_agent.0";

/// One build output, by file name inside the image directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Artifact {
    pub file: String,
    pub sha256: Sha256Digest,
    pub bytes: u64,
}

/// One installed package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Package {
    pub name: String,
    pub version: String,
    pub architecture: String,
    /// The archive's SHA256 of the .deb, when apt's index named it (absent for local debs).
    pub deb_sha256: Option<String>,
}

/// Which guest agent the broker will talk to, and where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuestAgent {
    pub package: String,
    pub version: String,
    pub binary: String,
    pub binary_sha256: Sha256Digest,
    pub channel: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageManifest {
    pub format: String,
    pub spec_digest: Sha256Digest,
    pub builder_revision: String,
    pub suite: String,
    pub mirror: String,
    pub source_date_epoch: u64,
    pub kernel: Artifact,
    pub initrd: Artifact,
    pub rootfs: Artifact,
    /// The command line for direct kernel boot of this rootfs.
    pub kernel_cmdline: String,
    pub rootfs_uuid: String,
    pub packages: Vec<Package>,
    pub local_debs: Vec<LocalDebRecord>,
    pub guest_agent: GuestAgent,
    /// Every known byte that differs between two builds of the same spec from the same
    /// package set on the same host. The builder's goal is an empty list.
    pub nondeterminism: Vec<String>,
    /// Inputs the spec does not pin (an unpinned mirror resolves newer packages later).
    pub unpinned_inputs: Vec<String>,
    /// What the builder does to make builds agree, and what depends on the build host.
    pub reproducibility_notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalDebRecord {
    pub file: String,
    pub sha256: Sha256Digest,
}

/// Why an image directory was refused.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// the image directory could not be read
    #[error("image directory {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// the manifest is not a valid reach.vm.image-manifest.v1
    #[error("image manifest is invalid: {0}")]
    Invalid(String),
    /// an artifact's bytes do not match the manifest
    #[error("{file} digest {actual} differs from the manifest's {expected}")]
    ArtifactMismatch {
        file: String,
        expected: Sha256Digest,
        actual: Sha256Digest,
    },
}

impl ImageManifest {
    /// The image digest: digest of the canonical JSON form.
    pub fn digest(&self) -> Sha256Digest {
        Sha256Digest::of(self.canonical_json())
    }

    pub fn canonical_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("manifest serializes")
    }

    /// Reads `manifest.json` from an image directory (no artifact check).
    pub fn read(dir: &Path) -> Result<Self, ManifestError> {
        let m: ImageManifest = read_json(&dir.join(MANIFEST_FILE))?;
        check_layout(
            &m.format,
            MANIFEST_FORMAT,
            [&m.kernel, &m.initrd, &m.rootfs],
        )?;
        Ok(m)
    }

    /// Re-hashes kernel, initrd and rootfs against the manifest.
    pub fn verify_artifacts(&self, dir: &Path) -> Result<(), ManifestError> {
        for a in [&self.kernel, &self.initrd, &self.rootfs] {
            verify_artifact(dir, a)?;
        }
        Ok(())
    }
}

/// Re-hashes one artifact.
pub fn verify_artifact(dir: &Path, a: &Artifact) -> Result<(), ManifestError> {
    let actual = file_digest(&dir.join(&a.file))?;
    if actual != a.sha256 {
        return Err(ManifestError::ArtifactMismatch {
            file: a.file.clone(),
            expected: a.sha256,
            actual,
        });
    }
    Ok(())
}

/// Streams a file through SHA-256.
pub fn file_digest(path: &Path) -> Result<Sha256Digest, ManifestError> {
    let io = |source| ManifestError::Io {
        path: path.to_owned(),
        source,
    };
    let mut r = BufReader::with_capacity(1 << 20, File::open(path).map_err(io)?);
    let mut h = Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = r.read(&mut buf).map_err(io)?;
        if n == 0 {
            return Ok(h.finish());
        }
        h.update(&buf[..n]);
    }
}

/// Parses `apt-cache show` stanzas into (name, version) → SHA256.
pub fn parse_apt_show(text: &str) -> std::collections::BTreeMap<(String, String), String> {
    let mut out = std::collections::BTreeMap::new();
    for stanza in text.split("\n\n") {
        let mut name = None;
        let mut version = None;
        let mut sha = None;
        for line in stanza.lines() {
            if let Some(v) = line.strip_prefix("Package: ") {
                name = Some(v.trim().to_owned());
            } else if let Some(v) = line.strip_prefix("Version: ") {
                version = Some(v.trim().to_owned());
            } else if let Some(v) = line.strip_prefix("SHA256: ") {
                sha = Some(v.trim().to_owned());
            }
        }
        if let (Some(n), Some(v), Some(s)) = (name, version, sha) {
            out.insert((n, v), s);
        }
    }
    out
}

/// Reads and parses one manifest file.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, ManifestError> {
    let bytes = std::fs::read(path).map_err(|source| ManifestError::Io {
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_slice(&bytes).map_err(|e| ManifestError::Invalid(e.to_string()))
}

/// A manifest's format must be the expected one and its artifacts plain file names in its
/// directory (no path that could point elsewhere).
pub(crate) fn check_layout<const N: usize>(
    format: &str,
    expected: &str,
    artifacts: [&Artifact; N],
) -> Result<(), ManifestError> {
    if format != expected {
        return Err(ManifestError::Invalid(format!("format {format:?}")));
    }
    for a in artifacts {
        if a.file.contains('/') || a.file.starts_with('.') {
            return Err(ManifestError::Invalid(format!(
                "artifact file {:?}",
                a.file
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apt_show_stanzas() {
        let text =
            "Package: a\nVersion: 1.0\nSHA256: aa\nDescription: x\n\nPackage: b\nVersion: 2\n\n";
        let m = parse_apt_show(text);
        assert_eq!(m.len(), 1);
        assert_eq!(m[&("a".to_owned(), "1.0".to_owned())], "aa");
    }
}
