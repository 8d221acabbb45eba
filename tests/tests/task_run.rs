//! Story 013's local profile end to end (issue #37): every role a process, real guests, the
//! reference pack, the deterministic inference fixture as the binding's model runtime, and an
//! operator at the real `reach hil watch` answering with the real CLI.
//!
//! The story: the Solver's open relay is rejected by the Reviewer in its own passage (no
//! plan, no instance); the observations run on VM₁ and the verifier fails; the repair runs
//! on VM₂ with exactly one HIL answer per mutation and all seven checks pass; each instance
//! is destroyed with confirmation; the signed recipe's patch is the admitted one, and the
//! guest received exactly it. Also: each-step asks for observations too; the retained
//! negative run (an in-policy open relay the Reviewer misses) fails the verifier's relay
//! check; a passage the fixture cannot answer ends the run with its code; and nothing the run
//! retained holds a prompt, a host path or raw output.

use reach_proto::core::v1 as core_pb;
use reach_room::fact::{FactBody, RoomFact, SignedKind};
use reach_tests::tasks::{GOAL, Vault, records, settled, start, start_on};
use reach_tests::workbench::{Verdict, operator};

fn facts(trail: &core_pb::RunTrailResponse) -> Vec<RoomFact> {
    trail
        .facts
        .iter()
        .map(|f| {
            reach_room::fact::verify(SignedKind::Fact, &f.bytes, &f.signature, &trail.public_key)
                .expect("every fact verifies under the node key");
            RoomFact::from_bytes(&f.bytes).unwrap()
        })
        .collect()
}

fn kinds(facts: &[RoomFact]) -> Vec<&'static str> {
    facts.iter().map(|f| f.body.kind()).collect()
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

/// The run's summary and `reach task show`'s JSON.
async fn show(
    packs: &mut reach_proto::core::v1::packs_client::PacksClient<tonic::transport::Channel>,
    run: &str,
) -> (core_pb::RunSummary, serde_json::Value) {
    let v = packs
        .show_run(core_pb::RunRef { run_id: run.into() })
        .await
        .unwrap()
        .into_inner();
    let json = serde_json::from_str(&v.json).unwrap();
    (v.run.unwrap(), json)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_story_reviews_observes_repairs_and_signs_a_recipe() {
    let story = start("reference", |_| {}).await;
    let mut packs = story.bind("each-mutation").await;
    let approver = operator(&story.f.body, &story.f.pack, |_| Verdict::Approve);
    let events = story.ask(&mut packs, GOAL).await;
    let last = events.last().unwrap();
    assert_eq!(last.code, "concluded", "{events:#?}");
    let run = last.run_id.clone();
    let t = trail(&mut packs, &run).await;
    let facts = facts(&t);
    assert_eq!(
        kinds(&facts),
        [
            "opened",
            // Round 1: the open relay, rejected in the Reviewer's own passage.
            "turn-opened",
            "passage",
            "proposal",
            "turn-opened",
            "passage",
            "review",
            "chair-decision",
            // Round 2: observations on VM1; the verifier fails.
            "turn-opened",
            "passage",
            "proposal",
            "turn-opened",
            "passage",
            "review",
            "chair-decision",
            "experiment",
            // Round 3: the repair on VM2; every check passes.
            "turn-opened",
            "passage",
            "proposal",
            "turn-opened",
            "passage",
            "review",
            "chair-decision",
            "experiment",
            "concluded",
        ]
    );
    let decisions: Vec<_> = facts
        .iter()
        .filter_map(|f| match &f.body {
            FactBody::ChairDecision(d) => Some(format!("{:?}", d.decision)),
            _ => None,
        })
        .collect();
    assert!(decisions[0].starts_with("RequestRevision"), "{decisions:?}");
    assert!(decisions[1].starts_with("Admit") && decisions[2].starts_with("Admit"));
    let experiments: Vec<_> = facts
        .iter()
        .filter_map(|f| match &f.body {
            FactBody::Experiment(e) => Some(e.verifier_passed),
            _ => None,
        })
        .collect();
    assert_eq!(experiments, [false, true]);

    // Each instance destroyed with the broker's confirmation; VM1's verifier failed exactly
    // local-delivery.
    let recs = records(&t, "execution-record");
    assert_eq!(recs.len(), 2);
    for r in &recs {
        assert_eq!(r["destroyed"], true, "{r}");
    }
    let failed: Vec<_> = recs[0]["verifier"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["passed"] == false)
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(failed, ["local-delivery"]);
    assert_ne!(recs[0]["instance"], recs[1]["instance"]);
    // Read in each guest after its verifier: VM1 saw no restart, VM2 exactly one.
    assert_eq!(
        reach_tests::tasks::restarts_witnessed(&recs),
        (2, 1),
        "{recs:#?}"
    );

    // One HIL answer per mutation: VM1 observed only (none), VM2 patched and restarted (two).
    approver.abort();
    let answered = approver.await.unwrap_or_default();
    let hil_in_records: usize = recs
        .iter()
        .map(|r| {
            r["steps"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|s| !s["hil_request"].is_null())
                .count()
        })
        .sum();
    assert_eq!(hil_in_records, 2, "{recs:?}");
    assert!(answered.is_empty() || answered.len() == 2, "{answered:?}");

    // The recipe: signed, the admitted patch exactly, every check passed.
    let recipe = packs
        .run_recipe(core_pb::RunRef {
            run_id: run.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    let r = recipe.recipe.unwrap();
    reach_room::fact::verify(
        SignedKind::Recipe,
        &r.bytes,
        &r.signature,
        &recipe.public_key,
    )
    .unwrap();
    let recipe: serde_json::Value = serde_json::from_slice(&r.bytes).unwrap();
    // Its disclosure names the evidence class and the very key it is signed under.
    assert_eq!(
        recipe["disclosure"]["evidence_class"],
        "deterministic-inference/real-execution"
    );
    assert_eq!(recipe["disclosure"]["signer"], r.key_id.as_str());
    assert!(
        recipe["verifier"]["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["passed"] == true)
    );
    let admitted = facts
        .iter()
        .rev()
        .find_map(|f| match &f.body {
            FactBody::Proposal(p) => Some(p.candidate.clone()),
            _ => None,
        })
        .unwrap();
    let admitted: serde_json::Value = serde_json::from_str(&admitted).unwrap();
    let patches: Vec<_> = admitted["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "patch")
        .cloned()
        .collect();
    assert_eq!(recipe["patch"]["steps"].as_array().unwrap(), &patches);
    // What the guest received: a patch step is `ok` only when workbench read the file back
    // from the guest with the stamped post-image's digest (the baseline with exactly the
    // recipe's edits); otherwise it is refused `workbench/write-not-confirmed`.
    let patched = recs[1]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == "patch")
        .unwrap()
        .clone();
    assert_eq!(patched["outcome"], "ok", "{patched}");

    // Retention: nothing retained holds a prompt, a host path or unbounded output.
    let state = story.f.body.layout.root().display().to_string();
    for rec in t.facts.iter().chain(&t.records) {
        let text = String::from_utf8_lossy(&rec.bytes);
        assert!(
            !text.contains("BEGIN UNTRUSTED"),
            "a prompt fence in {text}"
        );
        assert!(
            !text.contains("You are the Solver"),
            "prompt text in {text}"
        );
        assert!(!text.contains(&state), "a host path in {text}");
        assert!(!text.contains("/var/tmp/"), "a host path in {text}");
    }
    // Every file the body left (ledgers, ward's store, logs, configs), the installed pack
    // archive aside (the pack's own prompt documents are in it): no rendered prompt — its goal
    // fence — and no raw passage payload.
    let goal_fence = "----- BEGIN UNTRUSTED goal sha256:";
    let mut stack = vec![story.f.body.layout.root().to_owned()];
    let mut files = 0;
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n == "packs") {
                    continue;
                }
                stack.push(path);
            } else if path.is_file() {
                let bytes = std::fs::read(&path).unwrap_or_default();
                let text = String::from_utf8_lossy(&bytes);
                assert!(
                    !text.contains(goal_fence),
                    "a rendered prompt in {}",
                    path.display()
                );
                assert!(
                    !text.contains("reach.room.passage/1\",\"role"),
                    "a passage payload in {}",
                    path.display()
                );
                files += 1;
            }
        }
    }
    assert!(files > 10, "read only {files} files");
    for r in &recs {
        for s in r["steps"].as_array().unwrap() {
            if let Some(out) = s["observation"]["output"].as_str() {
                assert!(out.len() <= 4096 + 64, "unbounded output");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_step_asks_for_observations_and_a_denial_ends_the_run() {
    let story = start("reference", |_| {}).await;
    let mut packs = story.bind("each-step").await;
    let denier = operator(&story.f.body, &story.f.pack, |_| Verdict::Deny("not now"));
    // The binding runs one task at a time: a second ask while the first is driven (it waits
    // for the operator at its first step at the earliest) is refused before anything starts.
    let mut first = packs
        .ask_task(core_pb::AskTaskRequest {
            pack: story.f.pack.clone(),
            goal: GOAL.into(),
        })
        .await
        .unwrap()
        .into_inner();
    let opened = tokio_stream::StreamExt::next(&mut first)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(opened.kind, "opened");
    let second = packs
        .ask_task(core_pb::AskTaskRequest {
            pack: story.f.pack.clone(),
            goal: GOAL.into(),
        })
        .await
        .unwrap_err();
    assert!(
        second
            .message()
            .starts_with("local-binding/max-concurrent-runs"),
        "{second:?}"
    );
    let mut events = vec![opened];
    while let Some(e) = tokio_stream::StreamExt::next(&mut first).await {
        let e = e.unwrap();
        let end = e.kind == "ended";
        events.push(e);
        if end {
            break;
        }
    }
    let last = events.last().unwrap();
    assert_eq!(last.code, "hil/denied", "{events:#?}");
    denier.abort();
    let t = trail(&mut packs, &last.run_id).await;
    let recs = records(&t, "execution-record");
    assert_eq!(recs.len(), 1);
    // The first step is an observation, and each-step asked for it.
    let first = &recs[0]["steps"][0];
    assert!(!first["hil_request"].is_null(), "{first}");
    assert_eq!(recs[0]["destroyed"], true);
    assert!(records(&t, "recipe").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_verifier_not_prose_fails_a_missed_open_relay() {
    let story = start("missed-open-relay", |_| {}).await;
    let mut packs = story.bind("each-mutation").await;
    let approver = operator(&story.f.body, &story.f.pack, |_| Verdict::Approve);
    let events = story.ask(&mut packs, GOAL).await;
    approver.abort();
    let last = events.last().unwrap();
    assert_ne!(last.code, "concluded", "{events:#?}");
    let t = trail(&mut packs, &last.run_id).await;
    let recs = records(&t, "execution-record");
    assert_eq!(recs.len(), 2, "{events:#?}");
    let failed: Vec<_> = recs[1]["verifier"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["passed"] == false)
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(failed, ["relay-refused"], "{}", recs[1]);
    assert!(records(&t, "recipe").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passage_the_fixture_cannot_answer_ends_the_run_with_its_code() {
    // The pack's observe answer needs evidence the Room never sends: after the revision
    // request, the fixture has no answer, and nothing advances.
    let story = start("reference", |dir| {
        reach_tests::packs::replace_in(
            &dir.join("fixture/answers.toml"),
            "when = { evidence = [\"revision-request\", \"review\"] }",
            "when = { evidence = [\"revision-request\"] }",
        )
    })
    .await;
    let mut packs = story.bind("each-mutation").await;
    let events = story.ask(&mut packs, GOAL).await;
    let last = events.last().unwrap();
    // The fixture refused with its code (an OpenAI-style 400); the provider's answer is
    // definite, so the passage is refused and the Room ends with it.
    assert_eq!(last.code, "provider/http-400", "{events:#?}");
    let served = story.model.as_ref().unwrap().served();
    assert!(
        matches!(
            served.last().map(|s| &s.outcome),
            Some(reach_inference_fixture::Outcome::Refused(
                "fixture/no-answer"
            ))
        ),
        "{served:?}"
    );
    let t = trail(&mut packs, &last.run_id).await;
    assert!(t.records.is_empty(), "no experiment ran");
}

/// Core killed with SIGKILL the moment the repair's first mutation is journaled STARTED (it
/// may be in the guest): after core starts again that step is UNKNOWN and never sent again,
/// nothing after it runs, the instance is destroyed with the broker's confirmation, exactly
/// one signed record says so, and the run ends once, with the Room's code for an unknown
/// step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_killed_mid_step_leaves_it_unknown_and_the_instance_destroyed() {
    let (end, step) = killed_mid_step(Vault::Sqlite).await;
    assert_eq!(
        (end.as_str(), step.as_str()),
        ("room/experiment-unknown", "UNKNOWN")
    );
}

/// The same with core's Phylactery (Room, run journal, records) on PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_killed_mid_step_on_postgresql_leaves_it_unknown_and_the_instance_destroyed() {
    let (end, step) = killed_mid_step(Vault::fresh_postgres()).await;
    assert_eq!(
        (end.as_str(), step.as_str()),
        ("room/experiment-unknown", "UNKNOWN")
    );
}

/// Core's run rows as its PostgreSQL database holds them (`run_id state end_code` lines), so
/// a test proves the run went through PostgreSQL and not a SQLite file beside core; `None` on
/// SQLite.
fn postgres_runs(vault: &Vault) -> Option<String> {
    let Vault::Postgres(url) = vault else {
        return None;
    };
    let out = std::process::Command::new("psql")
        .args(["-X", "-q", "-A", "-t", "-F", " ", "-d", url, "-c"])
        .arg("SELECT run_id, state, coalesce(end_code, '') FROM task_runs ORDER BY run_id")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8(out.stdout).unwrap())
}

/// Asserts core kept its Phylactery where `vault` says: on PostgreSQL, the run's row there
/// in `state` and no SQLite file in core's data directory.
fn kept_in(story: &reach_tests::tasks::Story, vault: &Vault, run: &str, state: &str) {
    let sqlite = story
        .f
        .body
        .layout
        .data_dir("core")
        .join("phylactery.sqlite");
    match postgres_runs(vault) {
        Some(rows) => {
            assert!(
                rows.lines()
                    .any(|l| l.starts_with(&format!("{run} {state}"))),
                "{run} {state} in PostgreSQL: {rows}"
            );
            assert!(!sqlite.exists(), "{} exists", sqlite.display());
        }
        None => assert!(sqlite.exists(), "{} is missing", sqlite.display()),
    }
}

/// Kills core at the repair's first STARTED mutation and checks what recovery left; the run's
/// end code and that step's journal state, for the caller to judge.
async fn killed_mid_step(vault: Vault) -> (String, String) {
    use tokio_stream::StreamExt as _;
    let mut story = start_on("reference", |_| {}, vault.clone()).await;
    let mut packs = story.bind("each-mutation").await;
    let approver = operator(&story.f.body, &story.f.pack, |_| Verdict::Approve);
    let mut stream = story.ask_stream(&mut packs).await;
    let (mut asked, mut events) = (false, Vec::new());
    let started = loop {
        let e = stream.next().await.expect("the run goes on").unwrap();
        if e.kind == "ended" {
            // The end first: a long event list is cut in CI's output.
            let seen: Vec<String> = events
                .iter()
                .map(|e: &core_pb::TaskEvent| format!("{}: {}", e.kind, e.text))
                .collect();
            let (_, json) = show(&mut packs, &e.run_id).await;
            panic!(
                "the run ended ({}: {}) before its first mutation started\n{}\n{json:#}",
                e.code,
                e.text,
                seen.join("\n"),
            );
        }
        asked |= e.kind == "hil-waiting";
        let first_mutation = asked && e.kind == "step-started";
        events.push(e);
        if first_mutation {
            break events.last().unwrap().clone();
        }
    };
    let index: u32 = started
        .text
        .trim_start_matches("step ")
        .trim_end_matches(" started")
        .parse()
        .unwrap();
    let run = started.run_id.clone();
    let launcher = story.f.body.body.as_mut().unwrap();
    launcher.kill_role("core").await.unwrap();
    drop(stream);
    launcher.start_role("core").await.unwrap();

    // Recovery settles the run by itself.
    let view = settled(&mut packs, &run, std::time::Duration::from_secs(180))
        .await
        .expect("the run is settled after the restart");
    approver.abort();
    let summary = view.run.as_ref().unwrap();
    let end = summary.end_code.clone();
    let json: serde_json::Value = serde_json::from_str(&view.json).unwrap();
    let experiments = json["experiments"].as_array().unwrap();
    assert_eq!(experiments.len(), 2, "{json:#}");
    assert_eq!(experiments[0]["state"], "VERIFICATION_FAILED");
    let x = &experiments[1];
    assert_eq!(
        (x["state"].as_str(), x["code"].as_str()),
        (Some("DESTROYED"), Some("task/interrupted")),
        "{x:#}"
    );
    let mut interrupted = String::new();
    for s in x["steps"].as_array().unwrap() {
        let i = s["index"].as_u64().unwrap() as u32;
        let state = s["state"].as_str().unwrap();
        match i.cmp(&index) {
            std::cmp::Ordering::Less => assert_eq!(state, "APPLIED", "step {i}: {x:#}"),
            std::cmp::Ordering::Equal => interrupted = state.to_owned(),
            std::cmp::Ordering::Greater => assert_eq!(state, "PENDING", "step {i}: {x:#}"),
        }
    }
    // The instance is gone: no QEMU of it is left.
    let instance = x["instance_id"].as_str().unwrap();
    let left = std::process::Command::new("pgrep")
        .args(["-f", instance])
        .output()
        .unwrap();
    assert!(left.stdout.is_empty(), "QEMU of {instance} is left");

    // One signed record of the interrupted experiment, and the Room's chain ends once.
    let t = trail(&mut packs, &run).await;
    let facts = facts(&t);
    let k = kinds(&facts);
    assert_eq!(k[k.len() - 2..], ["experiment", "ended"], "{k:?}");
    assert_eq!(k.iter().filter(|k| **k == "ended").count(), 1);
    match &facts[facts.len() - 2].body {
        FactBody::Experiment(e) => assert_eq!((e.n, e.end.as_str()), (2, "unknown")),
        other => panic!("{other:?}"),
    }
    let recs = records(&t, "execution-record");
    assert_eq!(recs.len(), 2);
    let unknown = &recs[1];
    assert_eq!(unknown["destroyed"], true, "{unknown}");
    assert_eq!(unknown["steps"][index as usize]["outcome"], "unknown");
    assert!(records(&t, "recipe").is_empty());

    // Never repeated: ward was asked about that step once, and about no step after it.
    let asked = reach_tests::workbench::hil_requests(&story.f.body).await;
    let this: Vec<_> = asked
        .iter()
        .filter(|h| h.experiment_id == format!("{run}-e2"))
        .map(|h| h.step_index)
        .collect();
    assert_eq!(this, [index], "{asked:?}");
    kept_in(&story, &vault, &run, "ended");
    story.f.body.stop().await;
    (end, interrupted)
}

/// Issue #29 item 5 and #30 item 2: core is killed while a mutation waits for the operator,
/// the operator approves it while core is down, and core, restarted, resumes the run on the
/// same instance: the answer given meanwhile is honoured (ward returns the request already
/// filed, with its answer), no step applied before the restart is sent again, the experiment
/// is not admitted again, and the run concludes with one signed record per experiment and a
/// recipe naming every request, the one answered during the outage included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_given_while_core_is_down_is_honoured_when_it_returns() {
    answered_while_down(Vault::Sqlite).await;
}

/// The same with core's Phylactery on PostgreSQL: the resume reads the goal, the journal and
/// the step records back from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_an_answer_given_while_core_is_down_is_honoured_when_it_returns() {
    answered_while_down(Vault::fresh_postgres()).await;
}

async fn answered_while_down(vault: Vault) {
    use tokio_stream::StreamExt as _;
    let mut story = start_on("reference", |_| {}, vault.clone()).await;
    let mut packs = story.bind("each-mutation").await;
    let reach = reach_launcher::default_bin_dir().join("reach");
    let state = story.f.body.layout.root().to_owned();
    let answer = async |id: &str| {
        let out = tokio::process::Command::new(&reach)
            .args(["hil", "approve", id, "--state"])
            .arg(&state)
            .output()
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let mut stream = story.ask_stream(&mut packs).await;
    // The first mutation is approved while core runs; core dies while the second waits.
    let mut waiting = Vec::new();
    let mut events = Vec::new();
    let second = loop {
        let e = stream.next().await.expect("the run goes on").unwrap();
        assert_ne!(e.kind, "ended", "{events:#?}");
        events.push(e.clone());
        if e.kind == "hil-waiting" {
            waiting.push(e.hil_request_id.clone());
            if waiting.len() == 2 {
                break e;
            }
            answer(&e.hil_request_id).await;
        }
    };
    let run = second.run_id.clone();
    let launcher = story.f.body.body.as_mut().unwrap();
    launcher.kill_role("core").await.unwrap();
    drop(stream);
    answer(&second.hil_request_id).await;
    launcher.start_role("core").await.unwrap();
    let approver = operator(&story.f.body, &story.f.pack, |_| Verdict::Approve);

    let view = settled(&mut packs, &run, std::time::Duration::from_secs(900))
        .await
        .expect("the resumed run ends");
    approver.abort();
    let summary = view.run.as_ref().unwrap();
    assert_eq!(
        summary.state,
        "concluded",
        "{summary:?}\n{}",
        story.f.body.log("core")
    );
    assert!(
        story
            .f
            .body
            .log("core")
            .contains("open run resumed after a restart"),
        "{}",
        story.f.body.log("core")
    );

    // Every step of the repair ran once, the instance was the one created before the restart.
    let json: serde_json::Value = serde_json::from_str(&view.json).unwrap();
    let experiments = json["experiments"].as_array().unwrap();
    assert_eq!(experiments.len(), 2, "not admitted again: {json:#}");
    let x = &experiments[1];
    assert_eq!(x["state"], "SUCCEEDED", "{x:#}");
    for s in x["steps"].as_array().unwrap() {
        assert_eq!(s["state"], "APPLIED", "{x:#}");
    }

    // Each mutation was filed once: the filing after the restart returned the request filed
    // before it, with the answer given while core was down.
    let asked = reach_tests::workbench::hil_requests(&story.f.body).await;
    let filed: Vec<_> = asked
        .iter()
        .filter(|h| h.experiment_id == format!("{run}-e2"))
        .collect();
    let mut indexes: Vec<u32> = filed.iter().map(|h| h.step_index).collect();
    indexes.dedup();
    assert_eq!(indexes.len(), filed.len(), "{asked:?}");
    assert!(filed.iter().all(|h| h.state == "approved"), "{filed:?}");
    assert!(filed.iter().any(|h| h.id == second.hil_request_id));

    // One signed record per experiment, the Room's chain concluded once, and the record and
    // recipe name the requests answered before and during the outage.
    let t = trail(&mut packs, &run).await;
    let k = kinds(&facts(&t));
    assert_eq!(k.iter().filter(|k| **k == "experiment").count(), 2, "{k:?}");
    assert_eq!(k.last(), Some(&"concluded"), "{k:?}");
    let recs = records(&t, "execution-record");
    assert_eq!(recs.len(), 2);
    // The guest itself saw one restart, though core died between the repair's two requests.
    assert_eq!(
        reach_tests::tasks::restarts_witnessed(&recs),
        (2, 1),
        "{recs:#?}"
    );
    let named: Vec<&str> = recs[1]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["hil_request"].as_str())
        .collect();
    assert!(named.contains(&waiting[0].as_str()), "{:#}", recs[1]);
    assert!(
        named.contains(&second.hil_request_id.as_str()),
        "{:#}",
        recs[1]
    );
    assert!(
        recs[1]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["outcome"] == "ok"),
        "{:#}",
        recs[1]
    );
    let recipe = records(&t, "recipe");
    assert_eq!(recipe.len(), 1);
    let linked = recipe[0]["links"]["hil_requests"].as_array().unwrap();
    assert_eq!(linked.len(), filed.len(), "{:#}", recipe[0]);
    kept_in(&story, &vault, &run, "concluded");
    story.f.body.stop().await;
}

/// Issue #30 item 4: the broker is gone when a denied experiment's instance is to be
/// destroyed, so workbench cannot confirm the destruction. The experiment is ROLLBACK_PENDING
/// and the run stays open with nothing final published (no Experiment fact, record or end)
/// until, after the broker and core start again, recovery has the broker confirm the instance
/// gone: then exactly one signed record and one end, and no QEMU of it is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unconfirmed_destruction_publishes_nothing_final_until_a_restart_confirms_it() {
    use tokio_stream::StreamExt as _;
    let mut story = start("reference", |_| {}).await;
    let mut packs = story.bind("each-mutation").await;
    let mut stream = story.ask_stream(&mut packs).await;
    let mut events = Vec::new();
    let waiting = loop {
        let e = stream.next().await.expect("the run goes on").unwrap();
        assert_ne!(e.kind, "ended", "{events:#?}");
        events.push(e.clone());
        if e.kind == "hil-waiting" {
            break e;
        }
    };
    let run = waiting.run_id.clone();
    // The broker goes away, then the operator denies: the experiment ends and its instance
    // cannot be confirmed destroyed.
    let launcher = story.f.body.body.as_mut().unwrap();
    launcher.kill_role("vm-broker").await.unwrap();
    let out = tokio::process::Command::new(reach_launcher::default_bin_dir().join("reach"))
        .args([
            "hil",
            "deny",
            &waiting.hil_request_id,
            "--reason",
            "not now",
        ])
        .arg("--state")
        .arg(story.f.body.layout.root())
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    while let Some(e) = stream.next().await {
        events.push(e.unwrap());
    }
    let kinds_seen: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert!(kinds_seen.contains(&"rollback-pending"), "{events:#?}");
    assert!(!kinds_seen.contains(&"ended"), "{events:#?}");

    let (summary, json) = show(&mut packs, &run).await;
    assert_eq!(summary.state, "open", "{summary:?}");
    let x = &json["experiments"][1];
    assert_eq!(
        (x["state"].as_str(), x["code"].as_str()),
        (
            Some("ROLLBACK_PENDING"),
            Some("workbench/destroy-unconfirmed")
        ),
        "{json:#}"
    );
    let instance = x["instance_id"].as_str().unwrap().to_owned();
    let t = trail(&mut packs, &run).await;
    let k = kinds(&facts(&t));
    assert_eq!(k.last(), Some(&"chair-decision"), "nothing final: {k:?}");
    assert_eq!(records(&t, "execution-record").len(), 1, "only VM1's");
    assert!(records(&t, "recipe").is_empty());

    // Core and the broker start again; recovery settles the run once the broker confirms.
    let launcher = story.f.body.body.as_mut().unwrap();
    launcher.kill_role("core").await.unwrap();
    launcher.start_role("vm-broker").await.unwrap();
    launcher.start_role("core").await.unwrap();
    let view = settled(&mut packs, &run, std::time::Duration::from_secs(300))
        .await
        .unwrap_or_else(|| panic!("the run is settled\n{}", story.f.body.log("core")));
    let (summary, json): (_, serde_json::Value) =
        (view.run.unwrap(), serde_json::from_str(&view.json).unwrap());
    assert_eq!(summary.end_code, "task/interrupted", "{summary:?}");
    assert_eq!(json["experiments"][1]["state"], "DESTROYED", "{json:#}");
    let t = trail(&mut packs, &run).await;
    let k = kinds(&facts(&t));
    assert_eq!(k[k.len() - 2..], ["experiment", "ended"], "{k:?}");
    assert_eq!(k.iter().filter(|k| **k == "ended").count(), 1);
    let recs = records(&t, "execution-record");
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[1]["destroyed"], true, "{}", recs[1]);
    let left = std::process::Command::new("pgrep")
        .args(["-f", &instance])
        .output()
        .unwrap();
    assert!(left.stdout.is_empty(), "QEMU of {instance} is left");
    story.f.body.stop().await;
}
