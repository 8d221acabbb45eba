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
//! ready → the waiting step journaled past PENDING).
//!
//! Then every point where `tests/task_crash.rs` kills core (`reach_tests::tasks::CRASH_POINTS`),
//! one run each: core ready → the run's first progress (a passage, fact, experiment or step
//! state, or its end), beside the restart (SIGKILL → core ready). The target (≤ 5 s,
//! destruction excluded) is on that p50.
//!
//! Knob (environment, bench only): REACH_RECOVERY_RUNS (3).
#![allow(clippy::disallowed_methods)] // Benchmark knobs, never secrets.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use reach_proto::core::v1 as core_pb;
use reach_proto::ward::v1 as ward_pb;
use reach_tests::tasks::{CRASH_POINTS, settled, start};
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
        "waiting p50: resume {:.0} ms; p50 over both points {:.0} ms",
        p50(&mut resumes),
        p50(&mut both)
    );

    // Every point where tests/task_crash.rs kills core, one run each: the time from core
    // ready to the run's first progress (any passage, fact, experiment or step state, or the
    // run's end). What recovery does before core is ready is in its restart, printed beside.
    let points: Vec<_> = CRASH_POINTS.iter().filter(|p| p.0 == "core").collect();
    println!(
        "task_recovery: {} crash points of core, one run each",
        points.len()
    );
    let mut firsts = Vec::new();
    for (role, kind, nth, what) in points {
        let mut stream = story.ask_stream(&mut packs).await;
        let (mut seen, mut run) = (0, String::new());
        while let Some(e) = stream.next().await {
            let e = e.unwrap();
            run.clone_from(&e.run_id);
            assert_ne!(e.kind, "ended", "{kind} #{nth} never reached: {e:?}");
            if e.kind == *kind {
                seen += 1;
                if seen == *nth {
                    break;
                }
            }
        }
        let launcher = story.f.body.body.as_mut().unwrap();
        let killed = Instant::now();
        launcher.kill_role(role).await.unwrap();
        drop(stream);
        launcher.start_role(role).await.unwrap();
        let ready = Instant::now();
        let at_ready = progress(&mut packs, &run).await;
        let first = loop {
            let now = progress(&mut packs, &run).await;
            if now != at_ready || now.0 != "open" {
                break ready.elapsed();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let view = settled(&mut packs, &run, Duration::from_secs(600))
            .await
            .expect("the run ends");
        let end = view.run.unwrap();
        let end = if end.state == "concluded" {
            end.state
        } else {
            end.end_code
        };
        println!(
            "  {what} ({kind} #{nth}): restart {:.0} ms, first progress {:.0} ms after, \
             then {end}",
            ms(ready - killed),
            ms(first)
        );
        firsts.push(ms(first));
    }
    println!(
        "every core point p50: first progress {:.0} ms after core ready (target ≤ 5000)",
        p50(&mut firsts)
    );
    story.f.body.stop().await;
}

/// What a run has done, as its report shows: state, passages, facts, and each experiment's
/// state with its steps' states. Two reads differ once the run has made progress.
async fn progress(
    packs: &mut reach_proto::core::v1::packs_client::PacksClient<tonic::transport::Channel>,
    run: &str,
) -> (String, usize, usize, Vec<String>) {
    let Ok(v) = packs.show_run(core_pb::RunRef { run_id: run.into() }).await else {
        return ("unreadable".into(), 0, 0, vec![]);
    };
    let json: serde_json::Value = serde_json::from_str(&v.get_ref().json).unwrap();
    let experiments = json["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| format!("{}{}", x["state"], x["steps"]))
        .collect();
    (
        v.get_ref().run.as_ref().unwrap().state.clone(),
        json["passages"].as_array().unwrap().len(),
        json["facts"].as_array().map_or(0, Vec::len),
        experiments,
    )
}
