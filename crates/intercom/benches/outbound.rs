//! Load binary: one outbound A2A task end to end (SendMessage, then GetTask until COMPLETED)
//! against the loopback TLS peer, with decisions from the real ward desk and, for comparison,
//! from an authority that grants every attempt at no cost. Prints p50/p99 per task and per
//! physical attempt.
//!
//! Then the pacing (issue #33 item 5): the default poll schedule over the default deadline,
//! and, for a peer that finishes a task at a spread of moments after the send (held, then
//! released), the time from the peer's completion to Intercom's adoption, polled at the
//! default pacing scaled to a 200 ms interval (target: at most one interval). No target is
//! asserted here; SPECIFICATION.md records the figures.

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::*;
use reach_a2a_peer::{Script, state};
use reach_intercom::task::DEFAULT_DEADLINE;
use reach_intercom::{
    Attempt, DecisionAuthority, DecisionId, DecisionRefusal, Intercom, NoJournal, OutboundTask,
    Phase, PollBudget, TaskSpec,
};

const TASKS: usize = 200;
/// Completion moments sampled for the completion-to-adoption figure.
const FINISHES: usize = 40;
/// The scaled interval of that figure.
const SCALED_INTERVAL: Duration = Duration::from_millis(200);

/// Grants every attempt a fresh id without any store: isolates the exchange's own cost.
#[derive(Debug, Default)]
struct Free(AtomicU64);

impl DecisionAuthority for Free {
    async fn obtain_decision(&self, _a: &Attempt) -> Result<DecisionId, DecisionRefusal> {
        Ok(DecisionId(format!(
            "free-{}",
            self.0.fetch_add(1, Ordering::Relaxed)
        )))
    }
    async fn redeem(&self, _d: &DecisionId, _a: &Attempt) -> Result<(), DecisionRefusal> {
        Ok(())
    }
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn report(name: &str, mut per_task: Vec<Duration>, attempts_per_task: usize) {
    per_task.sort();
    let p50 = pct(&per_task, 0.50);
    let p99 = pct(&per_task, 0.99);
    println!(
        "{name}: {} tasks, per task p50 {:.2} ms p99 {:.2} ms; per physical attempt p50 {:.2} ms",
        per_task.len(),
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        p50.as_secs_f64() * 1e3 / attempts_per_task as f64,
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let f = Fixture::new(Script::ending(state::COMPLETED, 0)).await;
    let free = Free::default();
    let mut ward_times = Vec::with_capacity(TASKS);
    let mut free_times = Vec::with_capacity(TASKS);
    for i in 0..TASKS {
        // Alternate so load changes affect both alike.
        let mut task = f.task(&format!("bench-ward-{i}"), 5);
        let started = Instant::now();
        assert_eq!(f.intercom().run(&mut task).await.unwrap(), Phase::Succeeded);
        ward_times.push(started.elapsed());

        let ic = Intercom {
            client: &f.client,
            authority: &free,
            receipt: &f.receipt,
            journal: &NoJournal,
            clock: Arc::new(f.clock.clone()),
        };
        let mut task = f.task(&format!("bench-free-{i}"), 5);
        let started = Instant::now();
        assert_eq!(ic.run(&mut task).await.unwrap(), Phase::Succeeded);
        free_times.push(started.elapsed());
    }
    // Send + one poll per task.
    report("ward decisions (in-process desk, SQLite)", ward_times, 2);
    report("free decisions (exchange only)", free_times, 2);
    println!(
        "peer received {} SendMessage and {} GetTask",
        f.peer.count("SendMessage"),
        f.peer.count("GetTask")
    );
    pacing().await;
}

/// The default schedule, and completion → adoption at the scaled pacing.
async fn pacing() {
    let d = PollBudget::DEFAULT;
    let at: Vec<String> = d
        .schedule(DEFAULT_DEADLINE)
        .iter()
        .map(|t| format!("{:.1}", t.as_secs_f64()))
        .collect();
    println!(
        "default pacing: interval {} s, deadline {} s, polls at [{}] s ({} polls + send + cancel)",
        d.interval.as_secs(),
        DEFAULT_DEADLINE.as_secs(),
        at.join(", "),
        at.len()
    );
    let mut late = Vec::with_capacity(FINISHES);
    let span = SCALED_INTERVAL * 8;
    for i in 0..FINISHES {
        // Finishes spread over eight intervals after the send, off the poll grid.
        let finish = span.mul_f64((i as f64 + 0.37) / FINISHES as f64);
        let f = Fixture::new(Script {
            held: true,
            ..Script::ending(state::COMPLETED, 0)
        })
        .await;
        let mut task = OutboundTask::new(TaskSpec {
            polls: PollBudget {
                max_polls: 100,
                interval: SCALED_INTERVAL,
            },
            ..f.task(&format!("bench-pace-{i}"), 100).spec().clone()
        })
        .unwrap();
        let sent = Instant::now();
        let ic = f.intercom();
        let released = async {
            tokio::time::sleep(finish).await;
            f.peer.release();
            Instant::now()
        };
        let (phase, finished) = tokio::join!(ic.run(&mut task), released);
        assert_eq!(phase.unwrap(), Phase::Succeeded);
        let adopted = Instant::now();
        assert!(adopted >= finished && finished >= sent);
        late.push(adopted - finished);
    }
    late.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "completion to adoption ({} finishes over {} ms, interval {} ms): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (target <= {} ms)",
        FINISHES,
        span.as_millis(),
        SCALED_INTERVAL.as_millis(),
        ms(pct(&late, 0.50)),
        ms(pct(&late, 0.99)),
        ms(*late.last().unwrap()),
        SCALED_INTERVAL.as_millis(),
    );
}
