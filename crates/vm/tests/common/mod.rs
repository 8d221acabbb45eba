//! Shared test parts: the postfix test image, built once per spec digest and reused.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use reach_digest::Sha256Digest;
use reach_vm::image::{self, Quiet};
use reach_vm::manifest::ImageManifest;
use reach_vm::spec::ImageSpec;

/// Where built images are cached across test runs (CI builds the image once).
pub const IMAGE_CACHE: &str = "/var/tmp/reach-vm-images";

pub fn spec_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("images/postfix-test.toml")
}

pub fn spec() -> ImageSpec {
    ImageSpec::parse(&std::fs::read_to_string(spec_path()).unwrap()).unwrap()
}

/// The postfix test image: (dir, manifest, image digest). Builds at most once per process;
/// a file lock keeps concurrent test binaries from building it twice.
pub fn image() -> &'static (PathBuf, ImageManifest, Sha256Digest) {
    static IMAGE: OnceLock<(PathBuf, ImageManifest, Sha256Digest)> = OnceLock::new();
    IMAGE.get_or_init(|| {
        std::fs::create_dir_all(IMAGE_CACHE).unwrap();
        let lock = std::fs::File::create(Path::new(IMAGE_CACHE).join(".lock")).unwrap();
        let _guard = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive).unwrap();
        let spec = spec();
        image::cached_build(
            &spec,
            spec_path().parent().unwrap(),
            Path::new(IMAGE_CACHE),
            &Quiet,
        )
        .unwrap_or_else(|e| panic!("building the test image: {e}"))
    })
}
