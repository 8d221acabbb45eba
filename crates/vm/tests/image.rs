//! The image builder against the real Debian archive: manifest contents and verification.

mod common;

use reach_vm::manifest::{ImageManifest, ManifestError, verify_artifact};

#[test]
fn image_manifest_names_every_input_and_output() {
    let (dir, m, digest) = common::image();
    assert_eq!(*digest, m.digest());
    assert_eq!(m.spec_digest, common::spec().digest());
    let reread = ImageManifest::read(dir).unwrap();
    assert_eq!(&reread, m);
    m.verify_artifacts(dir).unwrap();
    let names: Vec<&str> = m.packages.iter().map(|p| p.name.as_str()).collect();
    let spec = common::spec();
    for want in [
        spec.packages[0].as_str(),
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
    // Reproducibility: no known byte differs between two builds of this spec (the bench
    // compares a second build byte for byte); the unpinned mirror is named as an input.
    assert_eq!(m.nondeterminism, Vec::<String>::new());
    assert_eq!(m.unpinned_inputs.len(), 1, "{:?}", m.unpinned_inputs);
    // What a maintainer script generated from randomness is not in the rootfs; the
    // first-boot unit that regenerates it is.
    let rootfs = dir.join(&m.rootfs.file);
    for (path, present) in [
        ("/etc/ssl/private/ssl-cert-snakeoil.key", false),
        ("/etc/ssl/certs/ssl-cert-snakeoil.pem", false),
        ("/etc/aliases.db", false),
        ("/etc/systemd/system/reach-first-boot.service", true),
    ] {
        assert_eq!(in_rootfs(&rootfs, path), present, "{path}");
    }
}

/// Whether `path` exists in the ext4 image (debugfs, read-only).
fn in_rootfs(rootfs: &std::path::Path, path: &str) -> bool {
    let out = std::process::Command::new("debugfs")
        .arg("-R")
        .arg(format!("stat {path}"))
        .arg(rootfs)
        .output()
        .unwrap();
    assert!(out.status.success());
    !String::from_utf8_lossy(&out.stderr).contains("File not found")
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
