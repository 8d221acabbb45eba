//! Lifecycle load binary: create → guest-agent-ready and destroy → confirmed over 10 cycles
//! (p50/max) for instances restored from the prepared system, and for reference a few cold
//! boots of the base image; the image's build time and size, the prepared layer's capture
//! time and size, and whether KVM was used.
//!
//! `cargo bench -p reach-vm --bench lifecycle`; with `REACH_VM_BENCH_FRESH_BUILD=1` it also
//! builds the image a second time into a temporary directory, compares every artifact and
//! the manifest with the cached build byte for byte (reproducibility) and times that build.
//! `REACH_VM_BENCH_CYCLES` and `REACH_VM_BENCH_COLD_CYCLES` change the cycle counts.
#![allow(clippy::disallowed_methods)] // Benchmark knobs, never secrets.

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reach_vm::image::{self, Quiet};
use reach_vm::instance::{
    AccelChoice, Broker, BrokerConfig, CreateRequest, NetworkRequest, PinnedImage,
};
use reach_vm::prepared::{self, PrepareInputs, PreparedSpec};
use reach_vm::spec::ImageSpec;

const CYCLES: usize = 10;
const COLD_CYCLES: usize = 3;
// `REACH_VM_BENCH_CYCLES=0` measures only the image (reproducibility checks).
const CACHE: &str = "/var/tmp/reach-vm-images";

fn pct(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    (v[v.len() / 2], *v.last().unwrap())
}

fn allocated(p: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).map(|m| m.blocks() * 512).unwrap_or(0)
}

fn main() {
    // The preparable reference pack's image and prepared system, as the tests use them.
    let spec_path = common::spec_path();
    let spec = ImageSpec::parse(&std::fs::read_to_string(&spec_path).unwrap()).unwrap();
    let t = Instant::now();
    // The lock the tests and `reach image build --cache` take: one build per cache at a time.
    std::fs::create_dir_all(CACHE).unwrap();
    let lock = std::fs::File::create(Path::new(CACHE).join(".lock")).unwrap();
    let lock = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive).unwrap();
    let (dir, manifest, digest) =
        image::cached_build(&spec, spec_path.parent().unwrap(), Path::new(CACHE), &Quiet).unwrap();
    let cached_elapsed = t.elapsed();
    println!("image {digest}");
    println!(
        "image: rootfs {} MiB apparent / {} MiB allocated, kernel {} KiB, initrd {} KiB, {} packages (obtained in {:.1} s{})",
        manifest.rootfs.bytes >> 20,
        allocated(&dir.join(&manifest.rootfs.file)) >> 20,
        manifest.kernel.bytes >> 10,
        manifest.initrd.bytes >> 10,
        manifest.packages.len(),
        cached_elapsed.as_secs_f64(),
        if cached_elapsed < Duration::from_secs(30) {
            ", reused from cache"
        } else {
            ", built"
        }
    );
    if std::env::var("REACH_VM_BENCH_FRESH_BUILD").is_ok() {
        let tmp = tempfile::tempdir().unwrap();
        let built = image::build(
            &spec,
            spec_path.parent().unwrap(),
            &tmp.path().join("img"),
            &Quiet,
        )
        .unwrap();
        println!("image build (fresh): {:.1} s", built.elapsed.as_secs_f64());
        println!(
            "reproducible manifest (packages, artifacts, notes): {}",
            built.manifest.digest() == manifest.digest()
        );
        for (name, a, b) in [
            ("kernel", &manifest.kernel, &built.manifest.kernel),
            ("initrd", &manifest.initrd, &built.manifest.initrd),
            ("rootfs", &manifest.rootfs, &built.manifest.rootfs),
        ] {
            println!(
                "reproducible {name}: {} ({} vs {})",
                a.sha256 == b.sha256,
                a.sha256,
                b.sha256
            );
        }
        if manifest.rootfs.sha256 != built.manifest.rootfs.sha256 {
            // Keep the differing build for a byte-level comparison (debugfs rdump, cmp).
            let keep = Path::new(CACHE).join("fresh-differs");
            let _ = std::process::Command::new("rm")
                .arg("-rf")
                .arg(&keep)
                .status();
            let _ = std::process::Command::new("cp")
                .args(["-r", "--sparse=always"])
                .arg(&built.dir)
                .arg(&keep)
                .status();
            println!("kept the differing build in {}", keep.display());
        }
        let _ = std::process::Command::new("chmod")
            .args(["-R", "u+w"])
            .arg(tmp.path())
            .status();
    }

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let run = tempfile::tempdir().unwrap();
        let accel =
            reach_vm::probe::probe(Path::new("qemu-system-x86_64"), &dir.join(&manifest.kernel.file), Path::new(CACHE)).await;
        let pspec_path = common::prepared_spec_path();
        let pspec = PreparedSpec::parse(&std::fs::read_to_string(&pspec_path).unwrap()).unwrap();
        let t = Instant::now();
        let (pdir, pm, pdigest) = prepared::cached_prepare(
            &pspec,
            &PrepareInputs::new(&dir, accel),
            Path::new(CACHE),
            &Quiet,
        )
        .await
        .unwrap();
        drop(lock);
        println!("prepared system {pdigest}");
        println!(
            "prepared layer: disk {} MiB allocated, state {} MiB, shape {} MiB / {} CPU (obtained in {:.1} s{})",
            allocated(&pdir.join(&pm.disk.file)) >> 20,
            pm.state.bytes >> 20,
            pm.memory_mib,
            pm.cpus,
            t.elapsed().as_secs_f64(),
            if t.elapsed() < Duration::from_secs(20) { ", reused from cache" } else { ", captured" }
        );
        let mut cfg = BrokerConfig::new(
            run.path(),
            vec![PinnedImage {
                digest,
                dir: dir.clone(),
            }],
        );
        cfg.prepared.push(PinnedImage {
            digest: pdigest,
            dir: pdir.clone(),
        });
        cfg.accel = AccelChoice::Force(accel);
        let t = Instant::now();
        let (broker, _) = Broker::start(cfg, Arc::new(reach_clock::SystemClock))
            .await
            .unwrap();
        println!(
            "accelerator: {} (KVM used: {}; start incl. probe {:.1} s)",
            broker.accel().as_str(),
            broker.accel() == reach_vm::probe::Accel::Kvm,
            t.elapsed().as_secs_f64()
        );
        let count = |var: &str, default: usize| {
            std::env::var(var)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        let restored = CreateRequest {
            image: pdigest,
            network: NetworkRequest::None,
            memory_mib: 0,
            cpus: 0,
            wait_ready: true,
            profiles: None,
        };
        let cold = CreateRequest {
            image: digest,
            network: NetworkRequest::None,
            memory_mib: pm.memory_mib,
            cpus: pm.cpus,
            wait_ready: true,
            profiles: None,
        };
        cycles(&broker, "restored from the prepared system", &restored, count("REACH_VM_BENCH_CYCLES", CYCLES)).await;
        cycles(&broker, "cold boot of the base image (reference)", &cold, count("REACH_VM_BENCH_COLD_CYCLES", COLD_CYCLES)).await;
    });
}

async fn cycles(broker: &Broker, what: &str, req: &CreateRequest, cycles: usize) {
    if cycles == 0 {
        return;
    }
    println!("{what}:");
    let mut ready = Vec::new();
    let mut destroyed = Vec::new();
    for i in 0..cycles {
        let c = broker.create(req).await.unwrap();
        let r = c.ready_after.unwrap();
        let t = Instant::now();
        let conf = broker.destroy(&c.id).await.unwrap();
        let d = t.elapsed();
        println!(
            "cycle {i}: QEMU up {:.2} s, ready {:.2} s, destroy confirmed {:.0} ms (stop {} ms, killed {})",
            c.booted_after.as_secs_f64(),
            r.as_secs_f64(),
            d.as_secs_f64() * 1000.0,
            conf.stop_ms,
            conf.killed
        );
        ready.push(r);
        destroyed.push(d);
    }
    let (rp, rm) = pct(ready);
    let (dp, dm) = pct(destroyed);
    println!(
        "create→guest-agent-ready over {cycles}: p50 {:.2} s, max {:.2} s",
        rp.as_secs_f64(),
        rm.as_secs_f64()
    );
    println!(
        "destroy→confirmed over {cycles}: p50 {:.0} ms, max {:.0} ms",
        dp.as_secs_f64() * 1000.0,
        dm.as_secs_f64() * 1000.0
    );
}
