//! Shared test parts: the image and prepared system of the preparable reference task pack
//! (the first pack under `packs/`, in name order, whose image needs no operator-supplied
//! package), built once per spec digest and shared with every other guest test through the
//! image cache. The broker knows no task: these tests read the service, the placed files and
//! their contents from the pack's specs, never by name.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use reach_digest::Sha256Digest;
use reach_vm::image::{self, Quiet};
use reach_vm::manifest::ImageManifest;
use reach_vm::spec::ImageSpec;

/// Where built images are cached across test runs (CI builds the image once).
pub const IMAGE_CACHE: &str = "/var/tmp/reach-vm-images";

/// The preparable reference pack's directory.
pub fn pack_dir() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packs");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|d| d.join("image.toml").is_file() && d.join("prepared.toml").is_file())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .find(|d| {
            let text = std::fs::read_to_string(d.join("image.toml")).unwrap();
            ImageSpec::parse(&text).is_ok_and(|s| s.local_debs.is_empty())
        })
        .expect("a preparable reference pack under packs/")
}

pub fn spec_path() -> PathBuf {
    pack_dir().join("image.toml")
}

/// The service the image enables (the one the tests ask about and restart).
pub fn service() -> String {
    spec().services[0].clone()
}

/// The first file the image spec places: (path, content).
pub fn placed_file() -> (String, String) {
    let f = &spec().files[0];
    (f.path.clone(), f.content.clone())
}

pub fn spec() -> ImageSpec {
    ImageSpec::parse(&std::fs::read_to_string(spec_path()).unwrap()).unwrap()
}

/// The pack's image: (dir, manifest, image digest). Builds at most once per process;
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

use reach_vm::prepared::{self, PrepareInputs, PreparedManifest, PreparedSpec};

pub fn prepared_spec_path() -> PathBuf {
    pack_dir().join("prepared.toml")
}

/// The first file the prepared spec places (its path).
pub fn prepared_file() -> String {
    prepared_spec().files[0].path.clone()
}

pub fn prepared_spec() -> PreparedSpec {
    PreparedSpec::parse(&std::fs::read_to_string(prepared_spec_path()).unwrap()).unwrap()
}

/// The pack's prepared system over [`image`]: (dir, manifest, prepared digest). Prepared at
/// most once per process and cached across runs like the image.
pub fn prepared() -> &'static (PathBuf, PreparedManifest, Sha256Digest) {
    static PREPARED: OnceLock<(PathBuf, PreparedManifest, Sha256Digest)> = OnceLock::new();
    PREPARED.get_or_init(|| {
        let (dir, _, _) = image();
        let accel = accel();
        let lock = std::fs::File::create(Path::new(IMAGE_CACHE).join(".lock")).unwrap();
        let _guard = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive).unwrap();
        let dir = dir.clone();
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(prepared::cached_prepare(
                    &prepared_spec(),
                    &PrepareInputs::new(&dir, accel),
                    Path::new(IMAGE_CACHE),
                    &Quiet,
                ))
        })
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("preparing the test system: {e}"))
    })
}

use reach_vm::instance::{
    AccelChoice, Broker, BrokerConfig, CreateRequest, NetworkRequest, PinnedImage, StartReport,
};
use reach_vm::probe::{self, Accel};
use reach_vm::profile::{CommandProfile, ProfileSet};

/// The accelerator, probed once per test process (the answer is cached per host boot).
pub fn accel() -> Accel {
    static ACCEL: OnceLock<Accel> = OnceLock::new();
    *ACCEL.get_or_init(|| {
        let (dir, m, _) = image();
        let kernel = dir.join(&m.kernel.file);
        // Its own thread: callers may already be inside a runtime.
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(probe::probe(
                    Path::new("qemu-system-x86_64"),
                    &kernel,
                    Path::new(IMAGE_CACHE),
                ))
        })
        .join()
        .unwrap()
    })
}

/// The broker's built-in profiles plus `show-file` (`cat` of one path), the tests' own
/// observation (task profiles are a caller's, never built into the broker).
pub fn profiles() -> ProfileSet {
    let mut p = ProfileSet::builtin();
    p.insert(CommandProfile::new("show-file", &["/bin/cat", "--"], 1));
    p
}

pub fn config(run_dir: &Path) -> BrokerConfig {
    let (dir, _, digest) = image();
    let mut cfg = BrokerConfig::new(
        run_dir,
        vec![PinnedImage {
            digest: *digest,
            dir: dir.clone(),
        }],
    );
    cfg.accel = AccelChoice::Force(accel());
    cfg.profiles = profiles();
    cfg
}

/// [`config`] with the prepared system pinned too.
pub fn config_with_prepared(run_dir: &Path) -> BrokerConfig {
    let (dir, _, digest) = prepared();
    let mut cfg = config(run_dir);
    cfg.prepared.push(PinnedImage {
        digest: *digest,
        dir: dir.clone(),
    });
    cfg
}

pub async fn start_with_prepared(run_dir: &Path) -> (Broker, StartReport) {
    Broker::start(
        config_with_prepared(run_dir),
        std::sync::Arc::new(reach_clock::SystemClock),
    )
    .await
    .unwrap()
}

/// A create from the prepared system, in its captured shape.
pub fn prepared_request(wait_ready: bool) -> CreateRequest {
    CreateRequest {
        image: prepared().2,
        network: NetworkRequest::None,
        memory_mib: 0,
        cpus: 0,
        wait_ready,
        profiles: None,
    }
}

pub async fn start(run_dir: &Path) -> (Broker, StartReport) {
    Broker::start(
        config(run_dir),
        std::sync::Arc::new(reach_clock::SystemClock),
    )
    .await
    .unwrap()
}

pub fn request(wait_ready: bool) -> CreateRequest {
    CreateRequest {
        image: image().2,
        network: NetworkRequest::None,
        memory_mib: 384,
        cpus: 1,
        wait_ready,
        profiles: None,
    }
}

/// Live QEMU processes whose command line names `run_dir`.
pub fn qemu_processes(run_dir: &Path) -> Vec<i32> {
    let needle = run_dir.as_os_str().as_encoded_bytes().to_vec();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = stat
                .rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'));
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            !zombie
                && cmd.starts_with(b"qemu-system")
                && cmd.windows(needle.len()).any(|w| w == needle)
        })
        .collect()
}

/// Every file left under the instances directory (overlays, sockets, pidfiles).
pub fn leftovers(run_dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![run_dir.join("instances")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            }
            out.push(e.path());
        }
    }
    out
}

/// Kills any QEMU still naming `run_dir` when a test ends early (a failed assertion between
/// create and destroy), so a failing test does not leave a daemonized guest behind.
pub struct Reaper(pub PathBuf);

impl Drop for Reaper {
    fn drop(&mut self) {
        for pid in qemu_processes(&self.0) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// An image directory of three tiny files whose manifest verifies like a built one's: enough
/// to reach the host tools (qemu-img, QEMU's argument checks), never enough to boot.
pub fn tiny_image(dir: &Path) -> (ImageManifest, Sha256Digest) {
    let m = reach_vm::testing::tiny_image(dir);
    let d = m.digest();
    (m, d)
}
