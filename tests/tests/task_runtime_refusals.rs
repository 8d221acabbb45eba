//! A model runtime that misbehaves on the wire (issue #31): another model, a usage over the
//! turn's token bound, a stream cut before its end, a text that is not JSON, and no runtime at
//! all. Each is a typed refusal of the passage before anything reaches the compiler: the Room
//! ends with the code, no proposal is made, no instance is created, and the run report puts the
//! end down to its class. The model emulator plays the runtime, streaming, through the
//! production egress-provider adapter; core pins the model it asks for.

use reach_model_emulator::{ModelEmulator, Script};
use reach_proto::core::v1 as core_pb;
use reach_room::fact::{FactBody, RoomFact, SignedKind};
use reach_tests::tasks::{GOAL, Runtime, Vault, start_with_runtime};

async fn report(
    packs: &mut reach_proto::core::v1::packs_client::PacksClient<tonic::transport::Channel>,
    run: &str,
) -> (serde_json::Value, Vec<RoomFact>) {
    let v = packs
        .show_run(core_pb::RunRef { run_id: run.into() })
        .await
        .unwrap()
        .into_inner();
    let t = packs
        .run_trail(core_pb::RunRef { run_id: run.into() })
        .await
        .unwrap()
        .into_inner();
    let facts = t
        .facts
        .iter()
        .map(|f| {
            reach_room::fact::verify(SignedKind::Fact, &f.bytes, &f.signature, &t.public_key)
                .unwrap();
            RoomFact::from_bytes(&f.bytes).unwrap()
        })
        .collect();
    (serde_json::from_str(&v.json).unwrap(), facts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_runtime_failure_is_a_typed_refusal_before_the_compiler() {
    let emulator = ModelEmulator::start().await.unwrap();
    let story = start_with_runtime(Runtime::Emulator(&emulator), |_| {}, Vault::Sqlite).await;
    let mut packs = story.bind("each-mutation").await;
    // (what the runtime does, the code the run ends with, its class, whether usage was said)
    let cases: [(Script, &str, &str, bool); 4] = [
        (
            Script::WrongModel,
            "inference/model-mismatch",
            "runtime",
            true,
        ),
        (
            Script::OverTokenBound,
            "inference/over-token-bound",
            "budget",
            true,
        ),
        // The stream stops after its words: no terminal chunk, no usage, no `[DONE]`.
        (Script::Truncated, "quarantine/incomplete", "runtime", false),
        (
            Script::Text("I would patch main.cf.".into()),
            "quarantine/not-json",
            "model-capability",
            true,
        ),
    ];
    for (script, code, class, usage) in cases {
        emulator.script(script.clone());
        let events = story.ask(&mut packs, GOAL).await;
        let last = events.last().unwrap();
        assert!(
            last.kind == "ended" && last.code.starts_with(code),
            "{script:?}: {events:#?}"
        );
        let (r, facts) = report(&mut packs, &last.run_id).await;
        assert_eq!(r["failure"]["class"], class, "{script:?}: {r:#}");
        let passages = r["passages"].as_array().unwrap();
        assert_eq!(passages.len(), 1, "{script:?}: {r:#}");
        assert_eq!(passages[0]["state"], "refused", "{script:?}");
        assert_eq!(passages[0]["code"], last.code.as_str());
        assert_eq!(
            passages[0]["completion_tokens"].is_u64(),
            usage,
            "{script:?}: {r:#}"
        );
        // Nothing reached the compiler or a guest.
        assert!(
            !facts.iter().any(|f| matches!(
                f.body,
                FactBody::Proposal(_) | FactBody::ChairDecision(_) | FactBody::Experiment(_)
            )),
            "{script:?}: {facts:#?}"
        );
        assert!(r["experiments"].as_array().unwrap().is_empty());
    }
    // Readiness asked the runtime which models it serves before each run.
    assert!(emulator.model_lists() >= 4);
    story.f.body.stop().await;
}

/// Readiness probes the runtime before a run opens: one serving another model, or none at all,
/// blocks the binding with its code, and an ask is refused before anything is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_blocks_while_the_runtime_serves_another_model_or_is_down() {
    let emulator = ModelEmulator::start().await.unwrap();
    let story = start_with_runtime(Runtime::Emulator(&emulator), |_| {}, Vault::Sqlite).await;
    let mut packs = story.bind("each-mutation").await;
    let status = |packs: &mut reach_proto::core::v1::packs_client::PacksClient<_>| {
        let mut packs = packs.clone();
        let pack = story.f.pack.clone();
        async move {
            packs
                .bind_status(core_pb::BindStatusRequest { pack })
                .await
                .unwrap()
                .into_inner()
        }
    };
    assert_eq!(status(&mut packs).await.readiness, "runnable");
    emulator.serve_models(vec!["reach-emulated-model@sha256:0000".into()]);
    let s = status(&mut packs).await;
    assert_eq!(s.readiness, "inference/model-not-served", "{s:?}");
    assert!(
        s.reason.contains("reach-emulated-model@sha256:0000"),
        "{s:?}"
    );
    let refused = packs
        .ask_task(core_pb::AskTaskRequest {
            pack: story.f.pack.clone(),
            goal: GOAL.into(),
        })
        .await
        .expect_err("the ask is refused");
    assert!(
        refused.message().starts_with("inference/model-not-served"),
        "{refused:?}"
    );
    // A binding that pins another model than core's runtime is configured for runs nothing.
    emulator.serve_models(vec![reach_model_emulator::MODEL.into()]);
    assert_eq!(status(&mut packs).await.readiness, "runnable");
    packs
        .bind(core_pb::BindRequest {
            pack: story.f.pack.clone(),
            workspace: "/tmp/reach-ws".into(),
            vm_backend: "qemu".into(),
            model: "smollm2@sha256:b179".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let refused = packs
        .ask_task(core_pb::AskTaskRequest {
            pack: story.f.pack.clone(),
            goal: GOAL.into(),
        })
        .await
        .expect_err("the ask is refused");
    assert!(
        refused
            .message()
            .starts_with("inference/model-not-served: the binding of"),
        "{refused:?}"
    );
    drop(emulator);
    let s = status(&mut packs).await;
    assert_eq!(s.readiness, "inference/runtime-unreachable", "{s:?}");
    let runs = packs
        .list_runs(core_pb::ListRunsRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(runs.runs.is_empty(), "no run was opened: {runs:?}");
    story.f.body.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_is_asked_for_the_turns_schema() {
    let emulator = ModelEmulator::start().await.unwrap();
    emulator.script(Script::Text("{}".into()));
    let story = start_with_runtime(Runtime::Emulator(&emulator), |_| {}, Vault::Sqlite).await;
    let mut packs = story.bind("each-mutation").await;
    let events = story.ask(&mut packs, GOAL).await;
    // `{}` is JSON but no candidate: the quarantine, not the constraint, is the judge.
    assert_eq!(
        events.last().unwrap().code,
        "quarantine/schema",
        "{events:#?}"
    );
    let seen = emulator.requests();
    assert_eq!(seen.len(), 1);
    let f = &seen[0].json["response_format"];
    assert_eq!(f["type"], "json_schema");
    assert_eq!(f["json_schema"]["name"], "reach_plan_candidate_v1");
    // The published schema, narrowed to the bound pack's vocabulary.
    let narrowing = reach_passage::constraint::Narrowing::candidate(story.f.vocabulary());
    assert_eq!(
        f["json_schema"]["schema"],
        reach_passage::constraint::narrowed(
            reach_taskpack::source::Answer::Candidate,
            Some(&narrowing)
        )
    );
    assert_eq!(seen[0].json["stream_options"]["include_usage"], true);
    story.f.body.stop().await;
}
