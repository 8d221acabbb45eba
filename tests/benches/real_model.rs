//! The real-model class against the deterministic class (issue #31): the same story, the same
//! body, real guests of the reference pack, an operator approving at once; once with the
//! inference fixture answering, once with SmolLM2-135M on llama-cpp-python on this CPU
//! (`reach-local-runtime`, installed by `scripts/local-model-setup.sh`).
//!
//! ```text
//! cargo build --bins && cargo bench --profile dev -p reach-tests --bench real_model
//! ```
//!
//! Printed, from one process: per passage of the real model its prompt and completion tokens
//! (the runtime's usage), its wall time and completion tokens per second; each story's wall
//! time (ask → the run's end), its end and failure class; and the ratio of the two walls.

use std::time::Instant;

use reach_proto::core::v1 as core_pb;
use reach_tests::tasks::{GOAL, Runtime, Vault, start_with_runtime};
use reach_tests::workbench::{Verdict, operator};

async fn story(runtime: Runtime<'_>) -> (f64, serde_json::Value) {
    let story = start_with_runtime(runtime, |_| {}, Vault::Sqlite).await;
    let mut packs = story.bind("each-mutation").await;
    let approver = operator(&story.f.body, &story.f.pack, |_| Verdict::Approve);
    let t = Instant::now();
    let events = story.ask(&mut packs, GOAL).await;
    let wall = t.elapsed().as_secs_f64();
    approver.abort();
    let run = events.last().unwrap().run_id.clone();
    let v = packs
        .show_run(core_pb::RunRef { run_id: run })
        .await
        .unwrap()
        .into_inner();
    story.f.body.stop().await;
    (wall, serde_json::from_str(&v.json).unwrap())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let (fixture_wall, fixture) = story(Runtime::Fixture("reference")).await;
    let runtime = reach_tests::local_model::start();
    let (real_wall, real) = story(Runtime::Local(&runtime)).await;

    println!("real model {}:", runtime.model());
    println!(
        "  {:<34} {:>6} {:>10} {:>10} {:>9} {:>9}  outcome",
        "passage", "round", "prompt", "completion", "wall s", "tok/s"
    );
    for p in real["passages"].as_array().unwrap() {
        let completion = p["completion_tokens"].as_u64().unwrap_or(0);
        let wall_s = p["wall_ms"].as_u64().unwrap_or(0) as f64 / 1000.0;
        println!(
            "  {:<34} {:>6} {:>10} {:>10} {:>9.1} {:>9.1}  {} {}",
            p["attempt_id"].as_str().unwrap_or("?"),
            p["round"],
            p["prompt_tokens"],
            completion,
            wall_s,
            if wall_s > 0.0 {
                completion as f64 / wall_s
            } else {
                0.0
            },
            p["state"].as_str().unwrap_or("?"),
            p["code"].as_str().unwrap_or(""),
        );
    }
    for (name, wall, r) in [
        ("fixture", fixture_wall, &fixture),
        ("real model", real_wall, &real),
    ] {
        println!(
            "story with the {name:<10}: {wall:>7.1} s, {} passages, end {}, failure {}",
            r["usage"]["passages"],
            r["run"]["end_code"].as_str().unwrap_or("concluded"),
            r["failure"]["class"]
        );
    }
    println!(
        "real-model story wall / fixture story wall: {:.2}",
        real_wall / fixture_wall
    );
}
