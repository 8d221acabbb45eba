//! The fixture against the Room's real renderer (`reach-passage`), for every pack under
//! `packs/` and every variant: what the Room renders is what the fixture reads. The Solver's
//! answers follow the evidence exactly; the Reviewer's reading of every Solver candidate is
//! the pack's `[[reviews]]` oracle; missing, altered or unadmitted evidence is refused.

use std::path::Path;

use reach_inference_fixture::{Fixture, Refusal};
use reach_passage::Evidence;
use reach_passage::evidence::EvidenceKind as K;
use reach_passage::render::{RenderInputs, render};
use reach_taskpack::source::Role;

/// Every pack beside the sources, built and verified as core holds it.
fn packs() -> Vec<reach_taskpack::VerifiedPack> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packs");
    let mut dirs: Vec<_> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("task-profile.toml").is_file())
        .collect();
    dirs.sort();
    assert!(!dirs.is_empty());
    let key =
        reach_taskpack::PackKey::from_pkcs8(&reach_taskpack::PackKey::generate().unwrap()).unwrap();
    let mut trusted = reach_taskpack::TrustedKeys::new();
    trusted.insert("t", key.public());
    dirs.iter()
        .map(|d| {
            let built = reach_taskpack::build(d, &key).unwrap();
            reach_taskpack::conform(&built.archive, &trusted, None, 0).unwrap()
        })
        .collect()
}

fn rendered(
    pack: &reach_taskpack::VerifiedPack,
    role: Role,
    candidate: Option<&[u8]>,
    evidence: &[Evidence],
) -> (String, String) {
    let r = render(
        pack,
        &RenderInputs {
            role,
            goal: "Deliver mail for the local domain; relay nothing.",
            candidate,
            evidence,
            forbidden: &[],
        },
    )
    .unwrap();
    (r.system, r.user)
}

/// The evidence an execution record gives when `failed` checks failed and `output` was what
/// the profile `profile` printed.
fn experiment(failed: &[&str], profile: &str, output: &str) -> Vec<Evidence> {
    let checks: Vec<_> = ["a", "b"]
        .iter()
        .map(|n| serde_json::json!({"name": n, "passed": true, "detail": ""}))
        .chain(
            failed
                .iter()
                .map(|n| serde_json::json!({"name": n, "passed": false, "detail": "x"})),
        )
        .collect();
    vec![
        Evidence::new(
            K::ExecutionRecord,
            serde_json::json!({"format": "reach.room.execution-record.v1"}).to_string(),
        ),
        Evidence::new(
            K::VerifierResult,
            serde_json::json!({"format": "reach.room.verifier-result.v1", "passed": false, "checks": checks})
                .to_string(),
        ),
        Evidence::new(
            K::Observations,
            serde_json::json!({"format": "reach.room.observations.v1", "observations": [
                {"step": 0, "profile": profile, "args": [], "exit": 0, "output": output}
            ]})
            .to_string(),
        ),
    ]
}

#[test]
fn every_solver_answer_follows_its_evidence_and_every_review_is_the_oracle() {
    for pack in packs() {
        let answers = &pack.sources().answers;
        for variant in &answers.variants {
            let fixture = Fixture::new(pack.sources(), variant).unwrap();
            for entry in answers
                .solver
                .iter()
                .filter(|a| a.variants.contains(variant))
            {
                // The evidence this entry asks for, rendered by the Room's renderer.
                let w = &entry.when;
                let evidence: Vec<Evidence> = if w.evidence.contains(&K::ExecutionRecord) {
                    let failed: Vec<&str> = w
                        .verifier_failed
                        .iter()
                        .flatten()
                        .map(String::as_str)
                        .collect();
                    let mut e = experiment(&failed, "none", "");
                    // Every observed line, each in an observation of its profile.
                    let observations: Vec<_> = w
                        .observed_lines
                        .iter()
                        .enumerate()
                        .map(|(i, l)| serde_json::json!({"step": i, "profile": l.profile, "args": [], "exit": 0, "output": format!("x = 1\n{}\n", l.line)}))
                        .collect();
                    e[2] = Evidence::new(
                        K::Observations,
                        serde_json::json!({"format": "reach.room.observations.v1", "observations": observations})
                            .to_string(),
                    );
                    e
                } else if w.evidence.contains(&K::RevisionRequest) {
                    let mut e = vec![Evidence::new(
                        K::RevisionRequest,
                        serde_json::json!({"format": "reach.room.revision-request.v1", "round": 1, "reason": "r"})
                            .to_string(),
                    )];
                    if w.evidence.contains(&K::Review) {
                        e.push(Evidence::new(K::Review, answers.reviews[0].review.trim()));
                    }
                    e
                } else {
                    Vec::new()
                };
                let (system, user) = rendered(&pack, Role::Solver, None, &evidence);
                let a = fixture
                    .answer(&system, &user)
                    .unwrap_or_else(|r| panic!("{} {variant} {}: {r}", pack.name(), entry.id));
                assert_eq!(a.id, entry.id, "{} {variant}", pack.name());
                assert_eq!(a.content, entry.candidate);

                // The Reviewer reads that very candidate.
                let (system, user) =
                    rendered(&pack, Role::Reviewer, Some(entry.candidate.as_bytes()), &[]);
                let review = fixture.answer(&system, &user).unwrap();
                let got: serde_json::Value = serde_json::from_str(&review.content).unwrap();
                if let Some(oracle) = answers
                    .reviews
                    .iter()
                    .find(|r| r.of == entry.id && r.variants.contains(variant))
                {
                    let want: serde_json::Value = serde_json::from_str(&oracle.review).unwrap();
                    assert_eq!(
                        got,
                        want,
                        "{} {variant} review of {}",
                        pack.name(),
                        entry.id
                    );
                }
                // What the Room's quarantine accepts: the review parses and quotes exactly.
                let parsed = reach_plan::Review::parse(review.content.as_bytes()).unwrap();
                parsed.check_quotes(entry.candidate.as_bytes()).unwrap();
            }
        }
    }
}

#[test]
fn missing_altered_or_unadmitted_evidence_is_refused_and_nothing_advances() {
    for pack in packs() {
        let fixture = Fixture::new(pack.sources(), "").unwrap();
        // Missing: an execution record without the failed check the repair needs.
        let (system, user) = rendered(&pack, Role::Solver, None, &experiment(&[], "none", ""));
        assert_eq!(
            fixture.answer(&system, &user).unwrap_err(),
            Refusal::NoAnswer,
            "{}",
            pack.name()
        );
        // Altered: one byte of the goal changed after the digest was written.
        let (system, user) = rendered(&pack, Role::Solver, None, &[]);
        let altered = user.replacen("relay nothing", "relay anything", 1);
        assert_ne!(altered, user);
        assert_eq!(
            fixture.answer(&system, &altered).unwrap_err(),
            Refusal::EvidenceAltered
        );
        // Unknown prompt: any other system message.
        assert_eq!(
            fixture.answer("You are helpful.", &user).unwrap_err(),
            Refusal::UnknownPrompt
        );
        // A hand-made candidate patching a file the Reviewer does not know: rejected with an
        // unrelated-file finding naming exactly that target (the Reviewer reads, it does not
        // look answers up).
        let mut c: serde_json::Value =
            serde_json::from_str(&pack.sources().answers.solver[0].candidate).unwrap();
        let steps = c["steps"].as_array_mut().unwrap();
        let i = steps.iter().position(|s| s["kind"] == "patch").unwrap();
        steps[i]["target"] = "etc/unrelated.conf".into();
        let candidate = serde_json::to_string(&c).unwrap();
        let (system, user) = rendered(&pack, Role::Reviewer, Some(candidate.as_bytes()), &[]);
        let review: serde_json::Value =
            serde_json::from_str(&fixture.answer(&system, &user).unwrap().content).unwrap();
        assert_eq!(review["verdict"], "reject");
        assert!(
            review["findings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["concern"] == "unrelated-file"
                    && f["at"] == format!("steps[{i}].target")
                    && f["quote"] == "etc/unrelated.conf"),
            "{review}"
        );
        // A candidate the Room's quarantine would refuse (an unknown field, found by fuzzing:
        // fuzz/fuzz_targets/fixture_passage.rs) is refused, never reviewed: a finding's quote
        // could not be checked against it.
        let steps = c["steps"].as_array_mut().unwrap();
        let j = steps.iter().position(|s| s["kind"] == "run").unwrap();
        steps[j]["'profile"] = "show-config".into();
        let candidate = serde_json::to_string(&c).unwrap();
        assert!(reach_plan::Candidate::parse(candidate.as_bytes()).is_err());
        assert_eq!(
            fixture.read_candidate(&candidate).unwrap_err(),
            Refusal::CandidateMalformed
        );
    }
}

/// A candidate whose flagged edit is repeated until its findings, each quoting the edit's line,
/// would pass the 64 KiB the Room reads of a review (found by fuzzing with one 37 KB line:
/// `fuzz/corpus/fixture_passage/review-over-the-bound`): the review keeps the findings that fit,
/// still rejects, and still quotes exactly. Checked for every pack and variant with a flagged
/// edit; at least one must reach the bound.
#[test]
fn a_review_never_exceeds_what_the_room_reads() {
    let mut bounded = 0;
    for pack in packs() {
        let answers = &pack.sources().answers;
        for variant in &answers.variants {
            let fixture = Fixture::new(pack.sources(), variant).unwrap();
            for entry in answers
                .solver
                .iter()
                .filter(|a| a.variants.contains(variant))
            {
                let review = fixture.read_candidate(&entry.candidate).unwrap();
                // A finding on an edit: `steps[i].edits[j].<key>`.
                let Some((i, j)) = review.findings.iter().find_map(|f| {
                    let rest = f.at.strip_prefix("steps[")?;
                    let (i, rest) = rest.split_once("].edits[")?;
                    let (j, _) = rest.split_once(']')?;
                    Some((i.parse::<usize>().ok()?, j.parse::<usize>().ok()?))
                }) else {
                    continue;
                };
                let mut c: serde_json::Value = serde_json::from_str(&entry.candidate).unwrap();
                let edit = c["steps"][i]["edits"][j].clone();
                let size = serde_json::to_vec(&edit).unwrap().len() + 1;
                let base = entry.candidate.len();
                let copies = (reach_plan::MAX_CANDIDATE_BYTES - base - 512) / size;
                let edits = c["steps"][i]["edits"].as_array_mut().unwrap();
                edits.extend(std::iter::repeat_n(edit, copies));
                let candidate = serde_json::to_string(&c).unwrap();
                assert!(reach_plan::Candidate::parse(candidate.as_bytes()).is_ok());
                let review = fixture.read_candidate(&candidate).unwrap();
                assert_eq!(review.verdict, "reject");
                let bytes = serde_json::to_vec(&review).unwrap();
                assert!(
                    bytes.len() <= reach_plan::MAX_REVIEW_BYTES,
                    "{}",
                    bytes.len()
                );
                reach_plan::Review::parse(&bytes)
                    .unwrap()
                    .check_quotes(candidate.as_bytes())
                    .unwrap();
                if review.findings.len() <= copies {
                    bounded += 1;
                }
            }
        }
    }
    assert!(bounded > 0, "no pack's review reached the bound");
}
