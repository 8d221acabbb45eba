//! Lifecycle load binary: create → guest-agent-ready and destroy → confirmed over 10 cycles
//! (p50/max), the image's build time and size, and whether KVM was used.
//!
//! `cargo bench -p reach-vm --bench lifecycle`; with `REACH_VM_BENCH_FRESH_BUILD=1` it also
//! builds the image a second time into a temporary directory and compares the rootfs digest
//! with the cached build (reproducibility) and times that build.
#![allow(clippy::disallowed_methods)] // Benchmark knobs, never secrets.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reach_vm::image::{self, Quiet};
use reach_vm::instance::{
    AccelChoice, Broker, BrokerConfig, CreateRequest, NetworkRequest, PinnedImage,
};
use reach_vm::spec::ImageSpec;

const CYCLES: usize = 10;
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
    let spec_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("images/postfix-test.toml");
    let spec = ImageSpec::parse(&std::fs::read_to_string(&spec_path).unwrap()).unwrap();
    let t = Instant::now();
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
        let mut cfg = BrokerConfig::new(
            run.path(),
            vec![PinnedImage {
                digest,
                dir: dir.clone(),
            }],
        );
        cfg.accel = AccelChoice::Probe;
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
        let req = CreateRequest {
            image: digest,
            network: NetworkRequest::None,
            memory_mib: 384,
            cpus: 1,
            wait_ready: true,
        };
        let mut ready = Vec::new();
        let mut destroyed = Vec::new();
        let cycles = std::env::var("REACH_VM_BENCH_CYCLES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(CYCLES);
        if cycles == 0 {
            return;
        }
        for i in 0..cycles {
            let c = broker.create(&req).await.unwrap();
            let r = c.ready_after.unwrap();
            let t = Instant::now();
            let conf = broker.destroy(&c.id).await.unwrap();
            let d = t.elapsed();
            println!(
                "cycle {i}: ready {:.2} s, destroy confirmed {:.0} ms (stop {} ms, killed {})",
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
    });
}
