//! Recovery after SIGKILL of core mid-step (issue #30): every role a separate process, the
//! inference fixture as the model runtime, real guests of the reference pack (TCG unless KVM
//! boots), an operator leaf approving each HIL request at once. Two crash points, each run
//! asked afresh and core started again right after the kill:
//!
//! - `started`: core is killed the moment the repair's first approved mutation is journaled
//!   STARTED; recovery ends the run (`room/experiment-unknown`) after destroying the instance.
//! - `waiting`: core is killed while the repair's first mutation waits for the operator, who
//!   answers while core is down; recovery resumes the run on the same instance.
//!
//! ```text
//! cargo build --bins && cargo bench --profile dev -p reach-tests --bench task_recovery
//! ```
//!
//! Printed, all from one process, per run and as p50: `restart` (SIGKILL → core ready);
//! `started`: `settle` (core ready → run terminal), of it `destroy` (recovery's destroy of
//! the instance, from the signed record), and `settle - destroy`; `waiting`: `resume` (core
//! ready → the waiting step journaled past PENDING). The target (≤ 5 s) is on the p50 over
//! both points of `settle - destroy` and `resume`.
//!
//! Knob (environment, bench only): REACH_RECOVERY_RUNS (3).
#![allow(clippy::disallowed_methods)] // Benchmark knobs, never secrets.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use reach_proto::core::v1 as core_pb;
use reach_proto::ward::v1 as ward_pb;
use reach_tests::tasks::{settled, start};
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
    // While set, the operator leaves mutations to the bench (the `waiting` point).
    let hold = Arc::new(AtomicBool::new(false));
    let held = hold.clone();
    tokio::spawn(async move {
        let mut s = ward
            .watch_hil_requests(ward_pb::WatchHilRequestsRequest {})
            .await
            .unwrap()
            .into_inner();
        while let Some(Ok(h)) = s.next().await {
            let hold = held.load(Ordering::SeqCst) && h.effect_class == "contained-mutation";
            if h.state == "pending" && !hold {
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
        let mut stream = story.ask_stream(&mut packs).await;
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
        let view = settled(&mut packs, &run, Duration::from_secs(300))
            .await
            .expect("the run is settled");
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
        "started p50: restart {:.0} ms, settle {:.0} ms, destroy {:.0} ms, settle - destroy \
         {:.0} ms",
        p50(&mut restarts),
        p50(&mut settles),
        p50(&mut destroys),
        p50(&mut own.clone())
    );

    println!("task_recovery: {n} runs, core SIGKILLed while a mutation waits for the operator");
    let mut resumes = Vec::new();
    let mut answerer = operator_ward(&story.f.body);
    for i in 0..n {
        hold.store(true, Ordering::SeqCst);
        let mut stream = story.ask_stream(&mut packs).await;
        let waiting = loop {
            let e = stream.next().await.expect("the run goes on").unwrap();
            assert_ne!(e.kind, "ended", "{e:?}");
            if e.kind == "hil-waiting" && e.text.contains("contained-mutation") {
                break e;
            }
        };
        let launcher = story.f.body.body.as_mut().unwrap();
        let killed = Instant::now();
        launcher.kill_role("core").await.unwrap();
        drop(stream);
        // The operator answers while core is down.
        let h = answerer
            .get_hil_request(ward_pb::GetHilRequestRequest {
                id: waiting.hil_request_id.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        answerer
            .answer_hil_request(ward_pb::AnswerHilRequestRequest {
                id: h.id,
                request_digest: h.digest,
                approve: true,
                reason: String::new(),
            })
            .await
            .unwrap();
        hold.store(false, Ordering::SeqCst);
        let launcher = story.f.body.body.as_mut().unwrap();
        launcher.start_role("core").await.unwrap();
        let ready = Instant::now();
        let step = h.step_index as usize;
        let experiment = h.experiment_id.clone();
        let resumed = loop {
            if let Ok(v) = packs
                .show_run(core_pb::RunRef {
                    run_id: waiting.run_id.clone(),
                })
                .await
            {
                let json: serde_json::Value = serde_json::from_str(&v.get_ref().json).unwrap();
                let moved = json["experiments"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|x| x["experiment_id"] == experiment.as_str())
                    .any(|x| x["steps"][step]["state"] != "PENDING");
                if moved {
                    break ready.elapsed();
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        // The resumed run goes on to its recipe before the next one is asked.
        let end = settled(&mut packs, &waiting.run_id, Duration::from_secs(600))
            .await
            .expect("the resumed run ends")
            .run
            .unwrap()
            .state;
        assert_eq!(end, "concluded");
        let (restart, resume) = (ms(ready - killed), ms(resumed));
        println!("  run {i}: restart {restart:.0} ms, resume {resume:.0} ms, then {end}");
        resumes.push(resume);
    }
    let mut both: Vec<f64> = own.iter().chain(&resumes).copied().collect();
    println!(
        "waiting p50: resume {:.0} ms; p50 over both points {:.0} ms (target ≤ 5000)",
        p50(&mut resumes),
        p50(&mut both)
    );
    story.f.body.stop().await;
}
