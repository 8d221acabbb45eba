//! The image builder against the real Debian archive: manifest contents and verification.

mod common;

use reach_vm::manifest::{ImageManifest, ManifestError, verify_artifact};

#[test]
fn postfix_image_manifest_names_every_input_and_output() {
    let (dir, m, digest) = common::image();
    assert_eq!(*digest, m.digest());
    assert_eq!(m.spec_digest, common::spec().digest());
    let reread = ImageManifest::read(dir).unwrap();
    assert_eq!(&reread, m);
    m.verify_artifacts(dir).unwrap();
    let names: Vec<&str> = m.packages.iter().map(|p| p.name.as_str()).collect();
    for want in [
        "postfix",
        "qemu-guest-agent",
        "systemd-sysv",
        "linux-image-cloud-amd64",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let with_digest = m.packages.iter().filter(|p| p.deb_sha256.is_some()).count();
    assert_eq!(
        with_digest,
        m.packages.len(),
        "every archive package carries its .deb digest"
    );
    assert_eq!(m.guest_agent.channel, "org.qemu.guest_agent.0");
    assert!(!m.nondeterminism.is_empty());
}

#[test]
fn a_tampered_artifact_is_refused_by_verification() {
    let (dir, m, _) = common::image();
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join(&m.kernel.file);
    let mut bytes = std::fs::read(dir.join(&m.kernel.file)).unwrap();
    bytes[4096] ^= 1;
    std::fs::write(&copy, bytes).unwrap();
    let err = verify_artifact(tmp.path(), &m.kernel).unwrap_err();
    assert!(
        matches!(err, ManifestError::ArtifactMismatch { .. }),
        "{err}"
    );
}
