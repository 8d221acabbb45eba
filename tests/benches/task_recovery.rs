//! Recovery after SIGKILL of core mid-step (issue #30): every role a separate process, the
//! inference fixture as the model runtime, real guests of the reference pack (TCG unless KVM
//! boots), an operator leaf approving each HIL request at once. Each run is asked, core is
//! killed the moment the repair's first mutation is journaled STARTED, and started again.
//!
//! ```text
//! cargo build --bins && cargo bench --profile dev -p reach-tests --bench task_recovery
//! ```
//!
//! Printed, all from one process, per run and as p50: `restart` (SIGKILL → core ready),
//! `settle` (core ready → run terminal), of it `destroy` (recovery's destroy of the
//! instance, from the signed record), and `settle - destroy` (target ≤ 5 s).
//!
//! Knob (environment, bench only): REACH_RECOVERY_RUNS (3).
#![allow(clippy::disallowed_methods)] // Benchmark knobs, never secrets.

use std::time::{Duration, Instant};

use reach_proto::core::v1 as core_pb;
use reach_proto::ward::v1 as ward_pb;
use reach_tests::tasks::{GOAL, start};
use reach_tests::workbench::operator_ward;
use tokio_stream::StreamExt as _;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn p50(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::var("REACH_RECOVERY_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let mut story = start("reference", |_| {}).await;
    let mut packs = story.bind("each-mutation").await;
    let mut ward = operator_ward(&story.f.body);
    tokio::spawn(async move {
        let mut s = ward
            .watch_hil_requests(ward_pb::WatchHilRequestsRequest {})
            .await
            .unwrap()
            .into_inner();
        while let Some(Ok(h)) = s.next().await {
            if h.state == "pending" {
                let _ = ward
                    .answer_hil_request(ward_pb::AnswerHilRequestRequest {
                        id: h.id,
                        request_digest: h.digest,
                        approve: true,
                        reason: String::new(),
                    })
                    .await;
            }
        }
    });
    println!("task_recovery: {n} runs, core SIGKILLed at the repair's first STARTED step");
    let (mut restarts, mut settles, mut destroys, mut own) = (vec![], vec![], vec![], vec![]);
    for i in 0..n {
        let mut stream = packs
            .ask_task(core_pb::AskTaskRequest {
                pack: story.f.pack.clone(),
                goal: GOAL.into(),
            })
            .await
            .unwrap()
            .into_inner();
        let mut asked = false;
        let run = loop {
            let e = stream.next().await.expect("the run goes on").unwrap();
            assert_ne!(e.kind, "ended", "{e:?}");
            asked |= e.kind == "hil-waiting";
            if asked && e.kind == "step-started" {
                break e.run_id;
            }
        };
        let launcher = story.f.body.body.as_mut().unwrap();
        let killed = Instant::now();
        launcher.kill_role("core").await.unwrap();
        drop(stream);
        launcher.start_role("core").await.unwrap();
        let ready = Instant::now();
        let view = loop {
            if let Ok(v) = packs
                .show_run(core_pb::RunRef {
                    run_id: run.clone(),
                })
                .await
                && v.get_ref().run.as_ref().unwrap().state != "open"
            {
                break v.into_inner();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let settled = ready.elapsed();
        let end = view.run.unwrap().end_code;
        assert_eq!(end, "room/experiment-unknown");
        let trail = packs
            .run_trail(core_pb::RunRef { run_id: run })
            .await
            .unwrap()
            .into_inner();
        let record: serde_json::Value = trail
            .records
            .iter()
            .rev()
            .find(|r| r.kind == "execution-record")
            .map(|r| serde_json::from_slice(&r.bytes).unwrap())
            .unwrap();
        assert_eq!(record["destroyed"], true);
        let destroy = record["timings_ms"]["destroy"].as_u64().unwrap() as f64;
        let (restart, settle) = (ms(ready - killed), ms(settled));
        println!(
            "  run {i}: restart {restart:.0} ms, settle {settle:.0} ms (destroy {destroy:.0} ms, \
             the rest {:.0} ms), end {end}",
            settle - destroy
        );
        restarts.push(restart);
        settles.push(settle);
        destroys.push(destroy);
        own.push(settle - destroy);
    }
    println!(
        "p50: restart {:.0} ms, settle {:.0} ms, destroy {:.0} ms, settle - destroy {:.0} ms \
         (target ≤ 5000)",
        p50(&mut restarts),
        p50(&mut settles),
        p50(&mut destroys),
        p50(&mut own)
    );
    story.f.body.stop().await;
}
