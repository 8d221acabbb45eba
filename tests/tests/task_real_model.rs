//! The real-model class (issue #31): the same story as `task_run.rs`, with a real model
//! (SmolLM2-135M-Instruct on llama-cpp-python's server, `reach_tests::local_model`) answering
//! the Solver and the Reviewer instead of the deterministic fixture. The mechanism does not
//! change: every passage goes through a ward decision and one egress-provider attempt, the
//! runtime is asked to constrain its answer to the turn's schema, every answer is quarantined,
//! and the Room, the compiler, the Reviewer, workbench and the verifier judge whatever the
//! model proposes. A 135M model will most likely not find the repair; what must hold is that
//! the run ends in one terminal with a failure class, each passage charged once, and that a
//! fresh run whose mutations the operator denies starts none of them.

use reach_proto::core::v1 as core_pb;
use reach_room::fact::{Decision, FactBody, PassageOutcome, RoomFact, SignedKind};
use reach_tests::local_model::LocalModel;
use reach_tests::tasks::{GOAL, Runtime, Story, Vault, records, settled, start_with_runtime};
use reach_tests::workbench::{Verdict, operator};

async fn show(
    packs: &mut reach_proto::core::v1::packs_client::PacksClient<tonic::transport::Channel>,
    run: &str,
) -> serde_json::Value {
    let v = packs
        .show_run(core_pb::RunRef { run_id: run.into() })
        .await
        .unwrap()
        .into_inner();
    serde_json::from_str(&v.json).unwrap()
}

async fn trail(
    packs: &mut reach_proto::core::v1::packs_client::PacksClient<tonic::transport::Channel>,
    run: &str,
) -> core_pb::RunTrailResponse {
    packs
        .run_trail(core_pb::RunRef { run_id: run.into() })
        .await
        .unwrap()
        .into_inner()
}

/// One ask of the goal, driven to its end (the real model is slow on this CPU); the events.
async fn ask_to_the_end(
    story: &Story,
    packs: &mut reach_proto::core::v1::packs_client::PacksClient<tonic::transport::Channel>,
    runtime: &LocalModel,
) -> Vec<core_pb::TaskEvent> {
    let events = tokio::time::timeout(std::time::Duration::from_secs(1500), story.ask(packs, GOAL))
        .await
        .unwrap_or_else(|_| panic!("the run did not end; runtime:\n{}", runtime.log_tail()));
    assert_eq!(events.last().unwrap().kind, "ended", "{events:#?}");
    events
}

async fn facts(
    packs: &mut reach_proto::core::v1::packs_client::PacksClient<tonic::transport::Channel>,
    run: &str,
) -> Vec<RoomFact> {
    let t = trail(packs, run).await;
    t.facts
        .iter()
        .map(|f| {
            reach_room::fact::verify(SignedKind::Fact, &f.bytes, &f.signature, &t.public_key)
                .unwrap();
            RoomFact::from_bytes(&f.bytes).unwrap()
        })
        .collect()
}

/// The codes a refused passage may carry: the quarantine's, the runtime's or a bound's, each
/// before anything reached the compiler.
fn refused_before_the_compiler(code: &str) -> bool {
    [
        "quarantine/",
        "inference/",
        "provider/",
        "passage/",
        "bounded/",
        "destination/",
    ]
    .iter()
    .any(|p| code.starts_with(p))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_model_is_judged_by_the_same_boundaries_and_charged_once_per_passage() {
    let runtime = reach_tests::local_model::start();
    let mut story = start_with_runtime(Runtime::Local(&runtime), |_| {}, Vault::Sqlite).await;
    let mut packs = story.bind("each-mutation").await;
    let approver = operator(&story.f.body, &story.f.pack, |_| Verdict::Approve);
    let events = ask_to_the_end(&story, &mut packs, &runtime).await;
    approver.abort();
    let last = events.last().unwrap();
    let run = last.run_id.clone();
    let report = show(&mut packs, &run).await;
    eprintln!(
        "real-model run {run}: end {}, failure {}, usage {}",
        last.code, report["failure"], report["usage"]
    );
    for p in report["passages"].as_array().unwrap() {
        eprintln!("  passage {p}");
    }

    // One terminal, and a failure class for it.
    assert_eq!(report["evidence_class"], "real-model/real-execution");
    assert_eq!(report["model"], runtime.model());
    let state = report["run"]["state"].as_str().unwrap();
    if last.code == "concluded" {
        assert_eq!(state, "concluded");
        assert_eq!(report["failure"]["class"], "none");
    } else {
        assert_eq!(state, "ended", "{report:#}");
        assert_eq!(report["run"]["end_code"], last.code.as_str());
        assert_eq!(report["failure"]["code"], last.code.as_str());
        let class = report["failure"]["class"].as_str().unwrap();
        assert_ne!(class, "none");
        // The runtime answered every passage: whatever failed, it was not the runtime.
        assert_ne!(class, "runtime", "{report:#}\n{}", runtime.log_tail());
    }

    // Every passage went through a decision and an attempt, and the runtime's usage of it was
    // charged once, with its settlement.
    let facts = facts(&mut packs, &run).await;
    let passage_facts: Vec<_> = facts
        .iter()
        .filter_map(|f| match &f.body {
            FactBody::Passage(p) => Some(p),
            _ => None,
        })
        .collect();
    let rows = report["passages"].as_array().unwrap();
    assert!(!passage_facts.is_empty(), "{report:#}");
    assert_eq!(rows.len(), passage_facts.len(), "{report:#}");
    let (mut prompt, mut completion) = (0, 0);
    for (p, row) in passage_facts.iter().zip(rows) {
        assert!(!p.decision_id.is_empty() && !p.attempt_id.is_empty());
        assert_eq!(row["attempt_id"], p.attempt_id.as_str());
        let (pt, ct) = (
            row["prompt_tokens"].as_u64().expect("usage recorded"),
            row["completion_tokens"].as_u64().expect("usage recorded"),
        );
        assert!(pt > 0 && ct > 0, "{row}");
        assert!(row["wall_ms"].as_u64().unwrap() > 0);
        prompt += pt;
        completion += ct;
        match &p.outcome {
            // An answer the quarantine admitted became the round's proposal or review.
            PassageOutcome::Answered { .. } => assert_eq!(row["state"], "answered"),
            // A refused answer never reached the compiler, and ended the Room with its code.
            PassageOutcome::Refused { code } => {
                assert!(refused_before_the_compiler(code), "{code}");
                assert_eq!(row["code"], code.as_str());
                assert_eq!(code, &last.code);
            }
        }
    }
    assert_eq!(report["usage"]["prompt_tokens"], prompt);
    assert_eq!(report["usage"]["completion_tokens"], completion);
    // Every answer the quarantine admitted as a proposal either compiles against the pack or
    // is refused by the compiler with its code; the Chair admitted only a proposal that
    // compiles and that its review approved; nothing the boundaries would not admit ran.
    let terms = reach_plan::BindingTerms {
        hil: reach_plan::HilMode::EachMutation,
        generation: 1,
    };
    let mut compiled = std::collections::BTreeMap::new();
    for f in &facts {
        match &f.body {
            FactBody::Proposal(p) => {
                let c = reach_plan::compile(story.f.vocabulary(), &terms, p.candidate.as_bytes());
                eprintln!(
                    "  proposal r{}: {}: {}",
                    p.round,
                    c.as_ref()
                        .map_or_else(|e| e.code().to_string(), |_| "compiles".into()),
                    p.candidate
                );
                compiled.insert(p.candidate_digest, c.is_ok());
            }
            FactBody::Review(r) => eprintln!("  review r{}: {:?}", r.round, r.verdict),
            FactBody::ChairDecision(d) => {
                eprintln!("  chair r{}: {:?}", d.round, d.decision);
                if let Decision::Admit { .. } = d.decision {
                    assert_eq!(compiled.get(&d.candidate_digest), Some(&true), "{d:?}");
                }
            }
            _ => {}
        }
    }

    // Whatever ran was judged by the verifier; a recipe exists only for a concluded run.
    let t = trail(&mut packs, &run).await;
    let mut asked = 0;
    for r in records(&t, "execution-record") {
        asked += r["steps"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| !s["hil_request"].is_null())
            .count();
        let failed: Vec<&str> = r["verifier"]["checks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["passed"] == false)
            .filter_map(|c| c["name"].as_str())
            .collect();
        let steps: Vec<String> = r["steps"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| format!("{} {}", s["kind"], s["outcome"]))
            .collect();
        // Every admitted plan ends with `verify`: an experiment whose steps all ran was judged.
        let all_ran = r["steps"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|s| !["not-run", "denied"].contains(&s["outcome"].as_str().unwrap_or("")));
        assert!(!all_ran || !r["verifier"].is_null(), "{r:#}");
        eprintln!(
            "  experiment: steps {steps:?}, verifier {}, failed {failed:?}",
            if r["verifier"].is_null() {
                "not run"
            } else {
                "ran"
            }
        );
        assert_eq!(r["destroyed"], true, "{r:#}");
    }
    assert_eq!(
        records(&t, "recipe").is_empty(),
        last.code != "concluded",
        "{report:#}"
    );

    // A restart replays the Room: nothing is inferred again, nothing charged again.
    let launcher = story.f.body.body.as_mut().unwrap();
    launcher.kill_role("core").await.unwrap();
    launcher.start_role("core").await.unwrap();
    let view = settled(&mut packs, &run, std::time::Duration::from_secs(60))
        .await
        .expect("the run is still settled after a restart");
    let again: serde_json::Value = serde_json::from_str(&view.json).unwrap();
    assert_eq!(again["usage"], report["usage"]);
    assert_eq!(again["passages"], report["passages"]);
    assert_eq!(again["failure"], report["failure"]);

    // The seed's "a fresh second passage refuses mutation HIL without starting a mutation":
    // a fresh run of the same model on the same body, the operator denying every request.
    // Whatever the model proposes and the Reviewer approves, no mutation runs: every step that
    // asked is `denied` or never ran, and every patch or restart is `denied` or `not-run`;
    // a denial ends the run `hil/denied` at that step, the instance destroyed, no recipe.
    // Decoding is greedy, so a fresh run proposes what this one did. The narrowed constraint
    // gives every candidate the structure the compiler requires (an observation first, the
    // one verify last), so SmolLM2's first candidate compiles, its Reviewer approves, and its
    // first mutation asks: the boundary is reached, and this run must show it.
    assert!(
        asked > 0,
        "the real model's run asked about no step, so the HIL denial cannot be exercised"
    );
    let denier = operator(&story.f.body, &story.f.pack, |_| {
        Verdict::Deny("not on this machine")
    });
    let events = ask_to_the_end(&story, &mut packs, &runtime).await;
    denier.abort();
    let last = events.last().unwrap();
    let t = trail(&mut packs, &last.run_id).await;
    let recs = records(&t, "execution-record");
    let mut denied = 0;
    for r in &recs {
        assert_eq!(r["destroyed"], true, "{r:#}");
        let steps = r["steps"].as_array().unwrap();
        for (i, s) in steps.iter().enumerate() {
            let outcome = s["outcome"].as_str().unwrap();
            if !s["hil_request"].is_null()
                || ["patch", "restart"].contains(&s["kind"].as_str().unwrap())
            {
                assert!(["denied", "not-run"].contains(&outcome), "step {i}: {r:#}");
            }
            if outcome == "denied" {
                denied += 1;
                assert!(!s["hil_request"].is_null(), "{r:#}");
                assert!(
                    steps[i + 1..].iter().all(|s| s["outcome"] == "not-run"),
                    "{r:#}"
                );
            }
        }
    }
    assert!(records(&t, "recipe").is_empty());
    eprintln!(
        "real-model denial run {}: end {}, {} record(s), {denied} step(s) denied",
        last.run_id,
        last.code,
        recs.len()
    );
    assert_eq!(denied, 1, "{events:#?}");
    assert_eq!(last.code, "hil/denied", "{events:#?}");
    story.f.body.stop().await;
}
