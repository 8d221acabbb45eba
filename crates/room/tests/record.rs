//! Execution records, their evidence shapes, and the recipe's retention.

use reach_digest::Sha256Digest;
use reach_room::fact::RunId;
use reach_room::recipe::{
    Disclosure, Links, RETAINED, Recipe, RecipeFormat, RecipePatch, admitted_parts, retention_check,
};
use reach_room::record::{
    Check, ExecutionRecord, MAX_OUTPUT_BYTES, MAX_OUTPUT_LINES, Observation, RecordFormat,
    RecordTimings, Resources, RestartWitness, StepRecord, TRUNCATED_MARKER, VerifierResult,
    bound_output, restarts_witnessed, review_evidence, revision_request_evidence,
};
use reach_taskpack::source::EvidenceKind;
use serde_json::{Value, json};

fn record() -> ExecutionRecord {
    ExecutionRecord {
        format: RecordFormat::V1,
        room: RunId::new("run-abc").unwrap(),
        n: 1,
        instance: "inst-7f".into(),
        plan_digest: Sha256Digest::of(b"plan"),
        steps: vec![
            StepRecord {
                index: 0,
                step_digest: Sha256Digest::of(b"s0"),
                kind: "run".into(),
                outcome: "ok".into(),
                hil_request: Some("hil-1".into()),
                observation: Some(Observation::new(
                    "show-config",
                    vec![],
                    0,
                    "accept = localhost\n",
                )),
            },
            StepRecord {
                index: 1,
                step_digest: Sha256Digest::of(b"s1"),
                kind: "verify".into(),
                outcome: "ok".into(),
                hil_request: None,
                observation: None,
            },
        ],
        verifier: Some(VerifierResult {
            passed: false,
            checks: vec![
                Check::new("service-healthy", true, "active"),
                Check::new("local-delivery", false, &"x".repeat(400)),
            ],
        }),
        destroyed: true,
        destroy_confirmation: "destroyed".into(),
        timings_ms: RecordTimings {
            create: 1,
            steps: 2,
            hil_wait: 3,
            verifier: 4,
            destroy: 5,
        },
        resources: Resources {
            steps_run: 2,
            hil_requests: 1,
        },
    }
}

#[test]
fn record_bytes_are_canonical() {
    let r = record();
    let bytes = r.canonical_bytes();
    assert_eq!(ExecutionRecord::from_bytes(&bytes), Some(r.clone()));
    assert_eq!(r.digest(), Sha256Digest::of(&bytes));
    let text = String::from_utf8(bytes).unwrap();
    assert!(text.starts_with(r#"{"format":"reach.room.execution-record.v1","room":"run-abc","n":1,"instance":"inst-7f""#), "{text}");
    assert_eq!(
        r.verifier.as_ref().unwrap().checks[1]
            .detail
            .chars()
            .count(),
        300
    );
}

#[test]
fn evidence_has_exactly_three_shapes() {
    let r = record();
    let ev = r.evidence();
    let kinds: Vec<_> = ev.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            EvidenceKind::ExecutionRecord,
            EvidenceKind::VerifierResult,
            EvidenceKind::Observations
        ]
    );
    let parsed: Vec<Value> = ev
        .iter()
        .map(|e| serde_json::from_str(&e.content).unwrap())
        .collect();
    // The record without outputs, digests kept.
    let obs = &parsed[0]["steps"][0]["observation"];
    assert_eq!(obs.get("output"), None);
    assert_eq!(
        obs["output_digest"],
        json!(Sha256Digest::of(b"accept = localhost\n").to_string())
    );
    assert_eq!(parsed[0]["format"], "reach.room.execution-record.v1");
    assert!(!ev[0].content.contains("accept = localhost"));
    // The full record's JSON minus outputs, in the same field order.
    let mut full: Value = serde_json::from_slice(&r.canonical_bytes()).unwrap();
    full["steps"][0]["observation"]
        .as_object_mut()
        .unwrap()
        .remove("output");
    assert_eq!(parsed[0], full);
    assert!(
        ev[0]
            .content
            .starts_with(r#"{"format":"reach.room.execution-record.v1","room":"run-abc""#)
    );
    assert_eq!(
        parsed[1],
        json!({"format":"reach.room.verifier-result.v1","passed":false,"checks":[
            {"name":"service-healthy","passed":true,"detail":"active"},
            {"name":"local-delivery","passed":false,"detail":"x".repeat(300)}]})
    );
    assert!(ev[1].content.starts_with(r#"{"format":"reach.room.verifier-result.v1","passed":false,"checks":[{"name":"service-healthy","passed":true,"detail":"active"}"#));
    assert_eq!(
        ev[2].content,
        r#"{"format":"reach.room.observations.v1","observations":[{"step":0,"profile":"show-config","args":[],"exit":0,"output":"accept = localhost\n"}]}"#
    );
    // No verifier: a failed result with no checks.
    let mut r = record();
    r.verifier = None;
    assert_eq!(
        r.evidence()[1].content,
        r#"{"format":"reach.room.verifier-result.v1","passed":false,"checks":[]}"#
    );
}

#[test]
fn revision_and_review_evidence() {
    let e = revision_request_evidence(2, "a \"wildcard\" grant");
    assert_eq!(e.kind, EvidenceKind::RevisionRequest);
    assert_eq!(
        e.content,
        r#"{"format":"reach.room.revision-request.v1","round":2,"reason":"a \"wildcard\" grant"}"#
    );
    let v: Value = serde_json::from_str(&e.content).unwrap();
    assert_eq!(v["round"], 2);
    let bytes = r#"{"format":"reach.plan.review.v1","verdict":"reject"}"#;
    let e = review_evidence(bytes);
    assert_eq!(e.kind, EvidenceKind::Review);
    assert_eq!(e.content, bytes);
    assert_eq!(e.digest(), Sha256Digest::of(bytes));
}

#[test]
fn outputs_are_bounded() {
    assert_eq!(bound_output("a\nb\n"), "a\nb\n");
    let many = "line\n".repeat(500);
    let b = bound_output(&many);
    assert!(b.lines().count() <= MAX_OUTPUT_LINES);
    assert!(b.ends_with(TRUNCATED_MARKER));
    let long = "é".repeat(5000);
    let b = bound_output(&long);
    assert!(b.len() <= MAX_OUTPUT_BYTES, "{}", b.len());
    assert!(b.ends_with(TRUNCATED_MARKER));
    let wide = format!("{}\n", "w".repeat(100)).repeat(100);
    let b = bound_output(&wide);
    assert!(b.len() <= MAX_OUTPUT_BYTES && b.lines().count() <= MAX_OUTPUT_LINES);
    let o = Observation::new("p", vec![], 1, &many);
    assert_eq!(o.output_digest, Sha256Digest::of(many.as_bytes()));
}

const REPAIR: &str = r#"{"format":"reach.plan.candidate.v1","diagnosis":"the local domain is missing","steps":[{"kind":"run","profile":"show-config","args":[]},{"kind":"patch","target":"etc/app.conf","edits":[{"op":"replace","line":"accept = localhost","with":"accept = localhost, example.test"}]},{"kind":"restart","service":"svc"},{"kind":"verify"}]}"#;

fn recipe() -> Recipe {
    let (diagnosis, steps) = admitted_parts(REPAIR).unwrap();
    let r = record();
    Recipe {
        format: RecipeFormat::V1,
        room: RunId::new("run-abc").unwrap(),
        pack: "app-local".into(),
        pack_generation: 7,
        diagnosis,
        patch: RecipePatch {
            candidate_digest: Sha256Digest::of(REPAIR),
            plan_digest: Sha256Digest::of(b"plan"),
            steps,
        },
        verifier: r.verifier.clone().unwrap(),
        links: Links {
            facts: vec![Sha256Digest::of(b"f0"), Sha256Digest::of(b"f1")],
            execution_records: vec![r.digest()],
            hil_requests: vec!["hil-1".into()],
            verifier_evidence: r.evidence()[1].digest(),
        },
        disclosure: Disclosure {
            evidence_class: "deterministic-inference/real-execution".into(),
            model_runtime: "inference-fixture".into(),
            retained: RETAINED.into(),
            signer: "node-key-1".into(),
        },
    }
}

#[test]
fn recipe_carries_the_admitted_patch() {
    let r = recipe();
    assert_eq!(r.diagnosis, "the local domain is missing");
    assert_eq!(r.patch.steps.len(), 1);
    assert_eq!(r.patch.steps[0]["target"], "etc/app.conf");
    let bytes = r.canonical_bytes();
    assert_eq!(r.digest(), Sha256Digest::of(&bytes));
    let back: Recipe = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(back, r);
    assert!(
        bytes.starts_with(
            br#"{"format":"reach.room.recipe.v1","room":"run-abc","pack":"app-local""#
        )
    );
    assert!(admitted_parts("not json").is_err());
    assert_eq!(
        retention_check(&bytes, &["/var/lib/reach", "/home/op"]),
        Ok(())
    );
}

#[test]
fn retention_refuses_paths_and_prompt_text() {
    let mut r = recipe();
    r.diagnosis = "see /home/op/workspace/notes".into();
    let e = retention_check(&r.canonical_bytes(), &["", "/var/lib/reach", "/home/op"]).unwrap_err();
    assert_eq!(e.code(), "room/retention-host-path");
    let mut r = recipe();
    r.diagnosis = "----- BEGIN UNTRUSTED goal sha256:00 -----".into();
    let e = retention_check(&r.canonical_bytes(), &[]).unwrap_err();
    assert_eq!(e.code(), "room/retention-prompt-text");
}

/// A record whose verify step kept the unit-starts witness `lines`, with `restarts` restart
/// steps recorded `ok` (and one refused, which must not count).
fn witnessed(n: u32, lines: &[&str], restarts: usize) -> ExecutionRecord {
    let mut r = record();
    r.n = n;
    let mut steps = Vec::new();
    for i in 0..restarts {
        steps.push(StepRecord {
            index: i,
            step_digest: Sha256Digest::of(b"r"),
            kind: "restart".into(),
            outcome: "ok".into(),
            hil_request: Some(format!("hil-{i}")),
            observation: None,
        });
    }
    steps.push(StepRecord {
        index: restarts,
        step_digest: Sha256Digest::of(b"r"),
        kind: "restart".into(),
        outcome: "refused:workbench/restart-not-admitted".into(),
        hil_request: None,
        observation: None,
    });
    let output: String = lines.iter().map(|l| format!("{l}\n")).collect();
    steps.push(StepRecord {
        index: restarts + 1,
        step_digest: Sha256Digest::of(b"v"),
        kind: "verify".into(),
        outcome: "ok".into(),
        hil_request: None,
        observation: Some(Observation::new("service-starts", vec![], 0, &output)),
    });
    r.steps = steps;
    r
}

#[test]
fn the_guest_witness_counts_each_restart_once_beyond_the_prepared_system() {
    let boot = ["[ 58.7] Finished unit.", "[ 74.6] Finished unit."];
    let vm1 = witnessed(1, &boot, 0);
    let vm2 = witnessed(2, &[boot[0], boot[1], "[ 92.0] Finished unit."], 1);
    // A record without the witness (an interrupted experiment) is left out.
    let mut interrupted = record();
    interrupted.n = 3;
    assert_eq!(
        restarts_witnessed(&[vm1.clone(), vm2.clone(), interrupted]),
        Ok(RestartWitness {
            instances: 2,
            restarts: 1
        })
    );
    // One restart step, two starts seen: applied twice.
    let twice = witnessed(
        2,
        &[
            boot[0],
            boot[1],
            "[ 92.0] Finished unit.",
            "[ 93.1] Finished unit.",
        ],
        1,
    );
    let e = restarts_witnessed(&[vm1.clone(), twice]).unwrap_err();
    assert!(
        e.contains("saw 2 start(s)") && e.contains("for 1 restart"),
        "{e}"
    );
    // Another prepared system's starts (or a journal that lost them).
    let other = witnessed(2, &["[ 60.0] Finished unit.", "[ 92.0] Finished unit."], 1);
    let e = restarts_witnessed(&[vm1.clone(), other]).unwrap_err();
    assert!(e.contains("starts differ"), "{e}");
    // A witness that failed in the guest judges nothing: it is an error, not a pass.
    let mut failed = vm2.clone();
    let o = failed
        .steps
        .last_mut()
        .unwrap()
        .observation
        .as_mut()
        .unwrap();
    o.exit = 1;
    assert!(restarts_witnessed(&[vm1, failed]).is_err());
    // With no record free of restarts there is nothing to compare with.
    assert_eq!(
        restarts_witnessed(&[vm2]),
        Ok(RestartWitness {
            instances: 0,
            restarts: 0
        })
    );
}
