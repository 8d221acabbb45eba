//! Admission check of a cached name (target: p99 ≤ 50 µs, issue 6). Criterion measures the
//! mean; the p50/p99 lines are computed from individually timed samples and printed.

use std::hint::black_box;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use reach_destination::{Admission, AdmissionPolicy, Destination, Purpose, StaticResolver};

fn setup() -> (
    tokio::runtime::Runtime,
    Admission<StaticResolver>,
    Destination,
) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let public: IpAddr = "93.184.216.34".parse().unwrap();
    let resolver = StaticResolver::new()
        .with_ttl(Duration::from_secs(3600))
        .with(
            "api.example.com",
            [public, "2606:2800:220:1::1".parse().unwrap()],
        );
    let admission = Admission::new(AdmissionPolicy::default(), resolver);
    let dest = Destination::parse(
        "https://api.example.com/v1/chat/completions",
        Purpose::new("model-portal").unwrap(),
    )
    .unwrap();
    runtime.block_on(admission.admit(dest.clone())).unwrap();
    (runtime, admission, dest)
}

fn percentiles(runtime: &tokio::runtime::Runtime, admission: &Admission<StaticResolver>) {
    const SAMPLES: usize = 100_000;
    let purpose = Purpose::new("model-portal").unwrap();
    let mut cached = Vec::with_capacity(SAMPLES);
    let mut parsed = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let start = Instant::now();
        let d = Destination::parse(
            "https://api.example.com/v1/chat/completions",
            purpose.clone(),
        )
        .unwrap();
        let mid = Instant::now();
        black_box(runtime.block_on(admission.admit(d)).unwrap());
        let end = Instant::now();
        parsed.push(end - start);
        cached.push(end - mid);
    }
    for (label, mut samples) in [("admit(cached)", cached), ("parse+admit(cached)", parsed)] {
        samples.sort();
        let p = |q: f64| samples[((samples.len() as f64 - 1.0) * q) as usize];
        println!(
            "{label}: p50 {:?} p99 {:?} max {:?} over {SAMPLES} samples (target p99 <= 50us)",
            p(0.50),
            p(0.99),
            samples[samples.len() - 1]
        );
    }
}

fn bench(c: &mut Criterion) {
    let (runtime, admission, dest) = setup();
    percentiles(&runtime, &admission);
    c.bench_function("admit_cached_name", |b| {
        b.iter(|| black_box(runtime.block_on(admission.admit(dest.clone())).unwrap()))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
