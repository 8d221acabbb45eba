//! The workbench's benchmark (issue #28): every role a separate process behind mTLS, a real
//! guest of the preparable reference pack's prepared system (TCG unless KVM boots).
//!
//! ```text
//! cargo build --bins && cargo bench -p reach-tests --bench workbench
//! ```
//!
//! Printed, all from one run:
//! 1. a step (the plan's first observation) through core → ward (mint) → workbench
//!    (redeem at ward, execute) → vm-broker → guest, against the same profile through
//!    vm-broker alone on the same instance: p50 of each over `N` runs, and the ratio
//!    (target ≤ 1.3×);
//! 2. the verifier's wall time, one run through the workbench (target ≤ 5 s; TCG is slower);
//! 3. one experiment's create → verify → destroy;
//! 4. the whole repair as core's coordinator runs it (`reach_experiment`): a fresh instance,
//!    every mutation's HIL request answered at once by an operator leaf watching ward, each
//!    step's grant, the verifier, destroy — wall time and its breakdown (create, steps, HIL
//!    from filing to the coordinator seeing the answer, destroy, everything else; the host's
//!    own orchestration target ≤ 10% of the total).
//!
//! Knob (environment, bench only): REACH_WORKBENCH_N (15).
#![allow(clippy::disallowed_methods)] // Benchmark knobs, never secrets.

use std::time::{Duration, Instant};

use reach_plan::Action;
use reach_proto::vm::v1 as vm_pb;
use reach_proto::vm::v1::vm_broker_client::VmBrokerClient;
use reach_proto::ward::v1 as ward_pb;
use reach_proto::workbench::v1 as pb;
use reach_tests::workbench::{Grant, execute, fence, mint, operator_ward, start, ward, workbench};
use tokio_stream::StreamExt as _;

fn p50(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::var("REACH_WORKBENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    let f = start().await;
    let body = &f.body;
    let plan = &f.plan;
    let mut wb = workbench(body, "core");
    let mut ward = ward(body);
    fence(&mut ward, plan, 1).await;
    let mut vm = VmBrokerClient::new(reach_port::connect_lazy(
        body.socket("vm-broker.instances"),
        &body.material("workbench"),
        body.manifest.principal("vm-broker"),
    ));
    let create = |id: &str| pb::CreateExperimentRequest {
        experiment_id: id.to_owned(),
        pack_archive: f.archive.clone(),
        pack_generation: 1,
        variant: String::new(),
        image_digest: f.prepared.clone(),
        network: "none".into(),
    };

    // 1. One observation step, both ways, on one instance.
    let started = Instant::now();
    let c = wb
        .create_experiment(create("bench-1"))
        .await
        .unwrap()
        .into_inner();
    let create_ms = ms(started.elapsed());
    let inst = c.instance_id.clone();
    let step = plan
        .steps
        .iter()
        .position(|s| matches!(s.action, Action::Run { .. }))
        .expect("an observation step");
    let Action::Run { profile, args } = &plan.steps[step].action else {
        unreachable!()
    };
    let (mut through, mut alone) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let t = Instant::now();
        let g = mint(
            &mut ward,
            &f.pack,
            Grant {
                experiment: "bench-1",
                instance: &inst,
                plan,
                step,
                generation: 1,
            },
        )
        .await;
        let r = wb
            .execute_step(execute("bench-1", &inst, plan, step, g))
            .await
            .unwrap()
            .into_inner();
        assert!(r.succeeded);
        through.push(t.elapsed());
        let t = Instant::now();
        let o = vm
            .exec(vm_pb::ExecRequest {
                instance_id: inst.clone(),
                profile: profile.clone(),
                args: args.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(o.exit_code, 0);
        alone.push(t.elapsed());
    }
    let (t50, a50) = (p50(through), p50(alone));
    println!(
        "step `{profile}` p50 over {n}: core→ward→workbench→vm-broker→guest {:.1} ms, vm-broker alone {:.1} ms, ratio {:.2}× (target ≤ 1.3×)",
        ms(t50),
        ms(a50),
        t50.as_secs_f64() / a50.as_secs_f64()
    );

    // 2. The verifier through the workbench (the instance is at the baseline: it fails).
    let verify = plan
        .steps
        .iter()
        .position(|s| matches!(s.action, Action::Verify {}))
        .expect("a verify step");
    let g = mint(
        &mut ward,
        &f.pack,
        Grant {
            experiment: "bench-1",
            instance: &inst,
            plan,
            step: verify,
            generation: 1,
        },
    )
    .await;
    let t = Instant::now();
    let r = wb
        .execute_step(execute("bench-1", &inst, plan, verify, g))
        .await
        .unwrap()
        .into_inner();
    let verify_ms = ms(t.elapsed());
    let t = Instant::now();
    wb.destroy_experiment(pb::DestroyExperimentRequest {
        experiment_id: "bench-1".into(),
        instance_id: inst.clone(),
    })
    .await
    .unwrap();
    let destroy_ms = ms(t.elapsed());
    println!(
        "verifier wall time {:.0} ms (seven checks, result {}; target ≤ 5000 ms, under {})",
        verify_ms,
        if r.succeeded { "passed" } else { "failed" },
        c.accel
    );
    println!("  baseline checks: {}", checks(&r.record));
    println!(
        "experiment create {:.0} ms (ready {} ms) → verify {:.0} ms → destroy {:.0} ms: {:.0} ms",
        create_ms,
        c.ready_after_ms,
        verify_ms,
        destroy_ms,
        create_ms + verify_ms + destroy_ms
    );

    // 4. The whole repair through the coordinator, the operator answering at once.
    let mut operator = operator_ward(body);
    let answering = tokio::spawn(async move {
        let mut pending = operator
            .watch_hil_requests(ward_pb::WatchHilRequestsRequest {})
            .await
            .unwrap()
            .into_inner();
        while let Some(Ok(h)) = pending.next().await {
            operator
                .answer_hil_request(ward_pb::AnswerHilRequestRequest {
                    id: h.id,
                    request_digest: h.digest,
                    approve: true,
                    reason: String::new(),
                })
                .await
                .unwrap();
        }
    });
    let mut coordinator = f.coordinator();
    let t = Instant::now();
    let x = coordinator
        .run(
            &f.setup("bench-repair"),
            plan,
            &mut reach_experiment::Quiet,
            &mut reach_experiment::Unjournaled,
        )
        .await;
    let total = ms(t.elapsed());
    answering.abort();
    assert_eq!(x.end, reach_experiment::End::Completed, "{x:?}");
    let tm = &x.timings;
    let parts = (tm.create_ms + tm.steps_ms + tm.hil_wait_ms + tm.destroy_ms) as f64;
    let asked = x.steps.iter().filter(|s| s.hil_request.is_some()).count();
    println!(
        "repair through the coordinator: {total:.0} ms = create {} + {} steps {} + HIL {} ({asked} requests, filed → seen approved) + destroy {} + everything else {:.0} ms ({:.1}% of the total; target ≤ 10%)",
        tm.create_ms,
        x.steps.len(),
        tm.steps_ms,
        tm.hil_wait_ms,
        tm.destroy_ms,
        total - parts,
        100.0 * (total - parts) / total
    );
    for o in &x.steps {
        let record: serde_json::Value = serde_json::from_slice(&o.record).unwrap_or_default();
        if !record["outcome"]["report"]["checks"].is_array() {
            continue;
        }
        println!(
            "verifier of the repair: {} ms, {}; checks: {}",
            record["outcome"]["report"]["elapsed_ms"],
            if o.succeeded { "passed" } else { "failed" },
            checks(&o.record)
        );
    }
    f.body.stop().await;
}

/// Each check of a verifier step record and its wall time, in the seed's order, with each
/// observation of its last attempt: `name ms [profile ms, …]`.
fn checks(record: &[u8]) -> String {
    let v: serde_json::Value = serde_json::from_slice(record).unwrap_or_default();
    v["outcome"]["report"]["checks"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    let obs: Vec<String> = c["observations"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|o| {
                            format!(
                                "{} {}",
                                o["profile"].as_str().unwrap_or("?"),
                                o["elapsed_ms"]
                            )
                        })
                        .collect();
                    format!(
                        "{} {} [{}]",
                        c["name"].as_str().unwrap_or("?"),
                        c["elapsed_ms"],
                        obs.join(", ")
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_else(|| format!("(no checks in {})", String::from_utf8_lossy(record)))
}
