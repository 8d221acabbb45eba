//! Test fixtures shared by the crate's unit tests and its integration tests (feature
//! `testing`, never enabled in a deployed build): image manifests that verify like built
//! ones without any build.

use std::path::Path;

use reach_digest::Sha256Digest;

use crate::manifest::{
    Artifact, GUEST_AGENT_CHANNEL, GuestAgent, ImageManifest, MANIFEST_FILE, MANIFEST_FORMAT,
};

/// A manifest naming `kernel`, `initrd` and `rootfs`; `suite` tells manifests apart (it is
/// also their spec digest's input).
pub fn manifest(
    suite: &str,
    kernel: Artifact,
    initrd: Artifact,
    rootfs: Artifact,
) -> ImageManifest {
    ImageManifest {
        format: MANIFEST_FORMAT.into(),
        spec_digest: Sha256Digest::of(suite.as_bytes()),
        builder_revision: "test".into(),
        suite: suite.into(),
        mirror: "http://deb.debian.org/debian".into(),
        source_date_epoch: 0,
        kernel,
        initrd,
        rootfs,
        kernel_cmdline: "console=ttyS0".into(),
        rootfs_uuid: String::new(),
        packages: vec![],
        local_debs: vec![],
        guest_agent: GuestAgent {
            package: "qemu-guest-agent".into(),
            version: "1".into(),
            binary: "/usr/sbin/qemu-ga".into(),
            binary_sha256: Sha256Digest::of(b"qemu-ga"),
            channel: GUEST_AGENT_CHANNEL.into(),
        },
        nondeterminism: vec![],
        unpinned_inputs: vec![],
        reproducibility_notes: vec![],
    }
}

/// An image directory of three tiny files whose manifest verifies like a built one's: enough
/// to reach the host tools (qemu-img, QEMU's argument checks), never enough to boot.
pub fn tiny_image(dir: &Path) -> ImageManifest {
    std::fs::create_dir_all(dir).unwrap();
    let artifact = |file: &str| {
        let bytes = format!("not a real {file}\n").into_bytes();
        std::fs::write(dir.join(file), &bytes).unwrap();
        Artifact {
            file: file.into(),
            sha256: Sha256Digest::of(&bytes),
            bytes: bytes.len() as u64,
        }
    };
    let m = manifest(
        "bookworm",
        artifact("vmlinuz"),
        artifact("initrd.img"),
        artifact("rootfs.raw"),
    );
    std::fs::write(dir.join(MANIFEST_FILE), m.canonical_json()).unwrap();
    m
}
