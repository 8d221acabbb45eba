//! Load binary: one outbound A2A task end to end (SendMessage, then GetTask until COMPLETED)
//! against the loopback TLS peer, with decisions from the real ward desk and, for comparison,
//! from an authority that grants every attempt at no cost. Prints p50/p99 per task and per
//! physical attempt. No target is asserted here; SPECIFICATION.md records the figures.

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::*;
use reach_a2a_peer::{Script, state};
use reach_intercom::{
    Attempt, DecisionAuthority, DecisionId, DecisionRefusal, Intercom, NoJournal, Phase,
};

const TASKS: usize = 200;

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
}
