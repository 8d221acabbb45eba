//! Step grants: MintStepGrant (core) then RedeemStepGrant (workbench) through the desk, on a
//! real SQLite file (WAL, synchronous=NORMAL with the restart void; see `store.rs`) under
//! /var/tmp, the disk a deployment uses. Each step of a plan costs one of each.
//!
//! Run: `cargo bench -p reach-ward-desk --bench step_grant`. Prints p50 and p99 of each call
//! in µs; the mint includes the fence read, the redeem the tag check and the one `UPDATE`.
//! Target (SPECIFICATION.md): p50 at most 1 ms each, the budget of an EgressDecision round trip;
//! a step itself is a command in a VM, milliseconds at least.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reach_digest::Sha256Digest;
use reach_ward_desk::{
    Desk, EffectClass, StepClaim, StepGrantRequest, SystemClock, WardKey, WardPolicy,
};

const WARMUP: usize = 50;
const ITERATIONS: usize = 500;
const TARGET: Duration = Duration::from_millis(1);

fn pct(s: &[Duration], p: f64) -> Duration {
    s[((s.len() as f64 * p) as usize).min(s.len() - 1)]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn step(i: usize) -> StepClaim {
    StepClaim {
        experiment_id: format!("exp-{}", i / 10),
        instance_id: format!("vm-{}", i / 10),
        plan_digest: Sha256Digest::of(format!("plan {}", i / 10)),
        step_index: (i % 10) as u32,
        step_digest: Sha256Digest::of(format!("step {i}")),
        pack_name: "bench-pack".into(),
        pack_generation: 1,
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::Builder::new()
            .prefix("wsg")
            .tempdir_in("/var/tmp")
            .unwrap();
        let key = WardKey::from_bytes(&[9; 32]).unwrap();
        let desk = Arc::new(
            Desk::open(
                &dir.path().join("ward.sqlite3"),
                key,
                WardPolicy::default(),
                Arc::new(SystemClock),
            )
            .await
            .unwrap(),
        );
        let profile = reach_digest::Sha256Digest::of(b"task-profile.toml");
        desk.fence_pack(
            "core",
            &reach_ward_desk::FenceRequest {
                pack_name: "bench-pack".into(),
                generation: 1,
                revoked: false,
                paused: false,
                bound_profile_digest: profile,
                active_profile_digest: profile,
                hil: reach_ward_desk::HilMode::EachMutation,
            },
        )
        .await
        .unwrap();
        let (mut mints, mut redeems) = (
            Vec::with_capacity(ITERATIONS),
            Vec::with_capacity(ITERATIONS),
        );
        for i in 0..WARMUP + ITERATIONS {
            let claim = step(i);
            let request = StepGrantRequest {
                step: claim.clone(),
                // An observation under each-mutation: no approval to read (benches/hil.rs
                // measures the steps that spend one).
                effect_class: EffectClass::Observation,
                ttl: None,
                profile_digest: profile,
                hil_required: false,
            };
            let t = Instant::now();
            let g = desk.mint_step_grant("core", request).await.unwrap();
            let minted = t.elapsed();
            let t = Instant::now();
            desk.redeem_step_grant("workbench", &g.token, &claim)
                .await
                .unwrap();
            let redeemed = t.elapsed();
            if i >= WARMUP {
                mints.push(minted);
                redeems.push(redeemed);
            }
        }
        mints.sort();
        redeems.sort();
        println!(
            "Step grants, {ITERATIONS} each after {WARMUP} warm-up, desk only, \
             SQLite WAL synchronous=NORMAL on {}",
            dir.path().display()
        );
        for (name, s) in [("MintStepGrant  ", &mints), ("RedeemStepGrant", &redeems)] {
            let (p50, p99) = (micros(pct(s, 0.5)), micros(pct(s, 0.99)));
            println!("  {name} : p50 {p50:>7.1} µs  p99 {p99:>7.1} µs");
        }
        let met = pct(&mints, 0.5) <= TARGET && pct(&redeems, 0.5) <= TARGET;
        let verdict = if met { "met" } else { "NOT met" };
        println!("  target p50 <= 1 ms each : {verdict}");
    });
}
