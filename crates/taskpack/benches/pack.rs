//! Build and conformance of every reference pack (each directory under the repository's
//! `packs/`). Target (issue #27): install, that is conformance (verify the signature,
//! derive the facts again from the archive's sources, run the refusal corpus through the
//! compiler), at most 1 s per reference pack on the project's machine.
//!
//! Run: `cargo bench -p reach-taskpack --bench pack`. Besides criterion's report it prints
//! the median of its own timing loop for each pack and the ratio to the target.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use reach_taskpack::{PackFiles, PackKey, TrustedKeys, build_files, conform};

const TARGET: Duration = Duration::from_secs(1);

/// A time before every reference pack's expiry.
const NOW: u64 = 1_800_000_000;

fn reference_packs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packs");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .expect("packs/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("pack.toml").is_file())
        .collect();
    dirs.sort();
    dirs
}

fn median(mut f: impl FnMut(), samples: usize) -> Duration {
    let mut times: Vec<Duration> = (0..samples)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn bench(c: &mut Criterion) {
    let key = PackKey::from_pkcs8(&PackKey::generate().unwrap()).unwrap();
    let mut trusted = TrustedKeys::new();
    trusted.insert("bench", key.public());
    let mut report = Vec::new();
    for dir in reference_packs() {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        // Build from files in memory: the directory read is I/O, not the pack code.
        let files = PackFiles::read_dir(&dir).unwrap();
        let built = build_files(files.clone(), &key).unwrap();
        let pack = conform(&built.archive, &trusted, None, NOW).unwrap();
        let fixtures = pack.fixtures_checked();

        let mut group = c.benchmark_group(&name);
        group.sample_size(20);
        group.bench_function("build", |b| {
            b.iter(|| build_files(black_box(files.clone()), &key).unwrap())
        });
        group.bench_function("conform", |b| {
            b.iter(|| conform(black_box(&built.archive), &trusted, None, NOW).unwrap())
        });
        group.finish();

        let build = median(|| drop(build_files(files.clone(), &key).unwrap()), 51);
        let install = median(
            || drop(conform(&built.archive, &trusted, None, NOW).unwrap()),
            51,
        );
        report.push(format!(
            "{name}: {} files, {} KiB archive, {fixtures} fixture runs; build median {:.2} ms; conform median {:.2} ms, {:.4} of the 1 s target",
            files.len(),
            built.archive.len() / 1024,
            build.as_secs_f64() * 1e3,
            install.as_secs_f64() * 1e3,
            install.as_secs_f64() / TARGET.as_secs_f64()
        ));
    }
    for line in report {
        println!("{line}");
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
