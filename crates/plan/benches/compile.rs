//! Plan compilation of a ten-step candidate (two observations, three patches, a mutation
//! profile, a restart, two observations, the verifier) against the test vocabulary.
//! Target (issue #27): at most 1 ms on the project's machine.
//!
//! Run: `cargo bench -p reach-plan --bench compile`. Besides criterion's report it prints the
//! median of its own timing loop and the ratio to the target.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use reach_plan::testing::{TEN_STEPS, terms, vocabulary};
use reach_plan::{HilMode, compile};

const TARGET: Duration = Duration::from_millis(1);

fn bench(c: &mut Criterion) {
    let vocab = vocabulary();
    let terms = terms(HilMode::EachMutation);
    let candidate = TEN_STEPS.as_bytes();
    assert_eq!(
        compile(&vocab, &terms, candidate)
            .expect("the ten-step candidate compiles")
            .steps
            .len(),
        10
    );

    c.bench_function("compile ten steps", |b| {
        b.iter(|| compile(black_box(&vocab), black_box(&terms), black_box(candidate)))
    });

    // Criterion reports a mean and its interval; the target is stated as a median, so measure
    // one too: 201 samples of 50 compilations each.
    let mut samples: Vec<Duration> = (0..201)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..50 {
                black_box(compile(
                    black_box(&vocab),
                    black_box(&terms),
                    black_box(candidate),
                ))
                .ok();
            }
            start.elapsed() / 50
        })
        .collect();
    samples.sort();
    let median = samples[samples.len() / 2];
    println!(
        "compile ten steps: median {:.1} µs, {:.3} of the 1 ms target",
        median.as_secs_f64() * 1e6,
        median.as_secs_f64() / TARGET.as_secs_f64()
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
