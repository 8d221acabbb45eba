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
    let artifact = |file: &str| tiny_artifact(dir, file);
    let m = manifest(
        "bookworm",
        artifact("vmlinuz"),
        artifact("initrd.img"),
        artifact("rootfs.raw"),
    );
    std::fs::write(dir.join(MANIFEST_FILE), m.canonical_json()).unwrap();
    m
}

/// A tiny file in `dir` and the artifact record that verifies it.
fn tiny_artifact(dir: &Path, file: &str) -> Artifact {
    let bytes = format!("not a real {file}\n").into_bytes();
    std::fs::write(dir.join(file), &bytes).unwrap();
    Artifact {
        file: file.into(),
        sha256: Sha256Digest::of(&bytes),
        bytes: bytes.len() as u64,
    }
}

/// Stages, in the cache at `root`, an image built from the spec digest `image_spec` and a
/// prepared layer over it from `prepared_spec`, laid out as `reach image build|prepare
/// --cache` lays them out, with tiny artifacts: enough for [`crate::cache::find_prepared`]
/// (readiness), never enough to boot. Returns (image digest, prepared digest).
pub fn stage_prepared(
    root: &Path,
    image_spec: Sha256Digest,
    prepared_spec: Sha256Digest,
) -> (Sha256Digest, Sha256Digest) {
    use crate::prepared::{
        DISK_FILE, PREPARE_REVISION, PREPARED_MANIFEST_FILE, PREPARED_MANIFEST_FORMAT,
        PreparedManifest, STATE_FILE,
    };
    let image_dir = crate::cache::image_dir(root, &image_spec);
    let mut image = tiny_image(&image_dir);
    image.spec_digest = image_spec;
    std::fs::write(image_dir.join(MANIFEST_FILE), image.canonical_json()).unwrap();
    let key = Sha256Digest::of_parts([
        image_spec.as_bytes().as_slice(),
        prepared_spec.as_bytes().as_slice(),
    ]);
    let dir = crate::cache::prepared_dir(root, &key);
    std::fs::create_dir_all(&dir).unwrap();
    let artifact = |file: &str| tiny_artifact(&dir, file);
    let prepared = PreparedManifest {
        format: PREPARED_MANIFEST_FORMAT.into(),
        spec_digest: prepared_spec,
        base_image: image.digest(),
        prepare_revision: PREPARE_REVISION.into(),
        qemu_version: "staged".into(),
        machine_type: "pc".into(),
        accel: "tcg".into(),
        memory_mib: 384,
        cpus: 1,
        disk: artifact(DISK_FILE),
        state: artifact(STATE_FILE),
        files: vec![],
        system_state: "running".into(),
        notes: vec!["staged by reach_vm::testing::stage_prepared".into()],
    };
    std::fs::write(dir.join(PREPARED_MANIFEST_FILE), prepared.canonical_json()).unwrap();
    (image.digest(), prepared.digest())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_staged_prepared_system_is_found_by_its_spec_digests_only() {
        let dir = tempfile::tempdir().unwrap();
        let (i, p) = (
            Sha256Digest::of(b"image spec"),
            Sha256Digest::of(b"prepared spec"),
        );
        let (image, prepared) = stage_prepared(dir.path(), i, p);
        let search = crate::cache::Search {
            cache: Some(dir.path()),
            ..Default::default()
        };
        let found = crate::cache::find_prepared(search, &i, &p).expect("found");
        assert_eq!(
            (found.image_digest, found.prepared_digest),
            (image, prepared)
        );
        assert!(!found.pinned);
        assert!(crate::cache::find_prepared(search, &p, &i).is_none());
        assert!(crate::cache::find_prepared(search, &i, &i).is_none());
        let pinned = crate::cache::Search {
            pinned_images: &[crate::cache::image_dir(dir.path(), &i)],
            pinned_prepared: std::slice::from_ref(&found.prepared_dir),
            cache: None,
        };
        assert!(crate::cache::find_prepared(pinned, &i, &p).unwrap().pinned);
        assert!(crate::cache::find_prepared(Default::default(), &i, &p).is_none());
    }
}
