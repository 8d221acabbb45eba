//! Shared parts of the workbench's guest tests: the preparable reference pack, verified as
//! core and the workbench verify it, its image and prepared system built once per spec
//! digest (cached across runs in the VM image cache, shared with every other guest test),
//! and instances of it in a real broker.
//!
//! Nothing here names the pack's service or files: the pack is found by
//! [`reach_taskpack::preparable_pack`], and candidates come from its own fixture answers.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use reach_digest::Sha256Digest;
use reach_plan::{BindingTerms, HilMode, StampedPlan};
use reach_taskpack::{PackFiles, PackKey, TrustedKeys, VerifiedPack};
use reach_vm::image::{self, Quiet};
use reach_vm::instance::{
    AccelChoice, Broker, BrokerConfig, CreateRequest, NetworkRequest, PinnedImage,
};
use reach_vm::prepared::{self, PrepareInputs};
use reach_vm::probe::{self, Accel};
use reach_workbench_steps::{BrokerInstance, Snapshots, Workbench, verifier};

/// The VM image cache every guest test shares.
pub const IMAGE_CACHE: &str = "/var/tmp/reach-vm-images";

pub fn pack_dir() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packs");
    reach_taskpack::preparable_pack(&root).expect("a preparable reference pack")
}

/// The pack, built with a fresh key and conformed against it, as core installs it.
pub fn pack() -> &'static VerifiedPack {
    static PACK: OnceLock<VerifiedPack> = OnceLock::new();
    PACK.get_or_init(|| {
        let key = PackKey::from_pkcs8(&PackKey::generate().unwrap()).unwrap();
        let files = PackFiles::read_dir(&pack_dir()).unwrap();
        let built = reach_taskpack::build_files(files, &key).unwrap();
        let mut trusted = TrustedKeys::new();
        trusted.insert("test", key.public());
        reach_taskpack::conform(&built.archive, &trusted, None, 1_800_000_000).unwrap()
    })
}

pub fn bench() -> Workbench {
    Workbench::new(pack(), 1, None).unwrap()
}

/// Runs `f`'s future on a runtime of its own thread (callers may be inside one).
fn block_on<T: Send + 'static, F: std::future::Future<Output = T>>(
    f: impl FnOnce() -> F + Send + 'static,
) -> T {
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f())
    })
    .join()
    .unwrap()
}

fn lock() -> nix::fcntl::Flock<std::fs::File> {
    std::fs::create_dir_all(IMAGE_CACHE).unwrap();
    let f = std::fs::File::create(Path::new(IMAGE_CACHE).join(".lock")).unwrap();
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive).unwrap()
}

/// (image dir, image digest, prepared dir, prepared digest, accelerator).
pub fn prepared() -> &'static (PathBuf, Sha256Digest, PathBuf, Sha256Digest, Accel) {
    static PREPARED: OnceLock<(PathBuf, Sha256Digest, PathBuf, Sha256Digest, Accel)> =
        OnceLock::new();
    PREPARED.get_or_init(|| {
        let variant = &pack().sources().variants[0];
        let _guard = lock();
        let (dir, manifest, digest) =
            image::cached_build(&variant.image, &pack_dir(), Path::new(IMAGE_CACHE), &Quiet)
                .unwrap_or_else(|e| panic!("building the pack's image: {e}"));
        let kernel = dir.join(&manifest.kernel.file);
        let accel = block_on(move || async move {
            probe::probe(
                Path::new("qemu-system-x86_64"),
                &kernel,
                Path::new(IMAGE_CACHE),
            )
            .await
        });
        let spec = variant.prepared.clone();
        let base = dir.clone();
        let (pdir, _, pdigest) = block_on(move || async move {
            prepared::cached_prepare(
                &spec,
                &PrepareInputs::new(&base, accel),
                Path::new(IMAGE_CACHE),
                &Quiet,
            )
            .await
        })
        .unwrap_or_else(|e| panic!("preparing the pack's system: {e}"));
        (dir, digest, pdir, pdigest, accel)
    })
}

/// A broker over the prepared system, in its own run directory.
pub async fn broker(run_dir: &Path) -> Arc<Broker> {
    let (dir, digest, pdir, pdigest, accel) = prepared().clone();
    let mut cfg = BrokerConfig::new(run_dir, vec![PinnedImage { digest, dir }]);
    cfg.prepared.push(PinnedImage {
        digest: pdigest,
        dir: pdir,
    });
    cfg.accel = AccelChoice::Force(accel);
    // No configured profiles: an instance runs only its pack's.
    cfg.profiles = reach_vm::profile::ProfileSet::default();
    let (b, _) = Broker::start(cfg, Arc::new(reach_clock::SystemClock))
        .await
        .unwrap();
    Arc::new(b)
}

/// An instance of the prepared system with the pack's profiles (or `profiles`), and its
/// instance-start snapshot.
pub async fn instance_with(
    broker: &Arc<Broker>,
    bench: &Workbench,
    profiles: reach_vm::profile::ProfileSet,
) -> (BrokerInstance, Snapshots) {
    let c = broker
        .create(&CreateRequest {
            image: prepared().3,
            network: NetworkRequest::None,
            memory_mib: 0,
            cpus: 0,
            wait_ready: true,
            profiles: Some(Arc::new(profiles)),
        })
        .await
        .unwrap();
    let g = BrokerInstance {
        broker: broker.clone(),
        id: c.id,
    };
    let snaps = verifier::snapshot(bench, &g, reach_taskpack::source::Snapshot::InstanceStart)
        .await
        .unwrap();
    (g, snaps)
}

pub async fn instance(broker: &Arc<Broker>, bench: &Workbench) -> (BrokerInstance, Snapshots) {
    instance_with(broker, bench, bench.broker_profiles()).await
}

/// The fixture answer `id`'s candidate, compiled for the binding each-mutation, gen 1.
pub fn plan(id: &str) -> StampedPlan {
    let answer = pack()
        .sources()
        .answers
        .solver
        .iter()
        .find(|a| a.id == id)
        .unwrap_or_else(|| panic!("no fixture answer {id}"));
    compile(answer.candidate.as_bytes())
}

pub fn compile(candidate: &[u8]) -> StampedPlan {
    reach_plan::compile(
        &pack().vocabulary(),
        &BindingTerms {
            hil: HilMode::EachMutation,
            generation: 1,
        },
        candidate,
    )
    .unwrap_or_else(|e| panic!("compiling: {e}"))
}
