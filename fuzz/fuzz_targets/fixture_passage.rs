//! The deterministic inference fixture's reading of what it is sent (crates/inference-fixture
//! `read_request`, `Fixture::answer`, `Fixture::read_candidate`): it stands where a model
//! provider stands, so it must refuse, never guess, what the Room did not render.
//!
//! Input: a mode byte, then text. Mode bits 0–1: 0 a whole request body, 1 a Solver passage's
//! user message, 2 a Reviewer's, 3 a candidate to review; the other bits pick the fixture (every
//! pack under `packs/`, every variant).
//!
//! Promised: never a panic; an accepted request reads back the same from its own fields; an
//! answer comes only for a passage of the pack's own prompt documents, a Solver's is one of the
//! variant's answers verbatim and a Reviewer's is a review the Room's quarantine accepts; a
//! review of a candidate quotes it exactly; every refusal is a `fixture/` code answered 400.
#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use reach_inference_fixture::{Fixture, Role, read_request};
use reach_taskpack::{PackKey, TrustedKeys, VerifiedPack};
use serde_json::json;

/// Every pack beside the sources and every variant, as core holds them.
fn fixtures() -> &'static [(VerifiedPack, Fixture)] {
    static FIXTURES: OnceLock<Vec<(VerifiedPack, Fixture)>> = OnceLock::new();
    FIXTURES.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packs");
        let mut dirs: Vec<_> = std::fs::read_dir(root)
            .expect("packs/")
            .map(|e| e.expect("an entry").path())
            .filter(|p| p.join("task-profile.toml").is_file())
            .collect();
        dirs.sort();
        let key = PackKey::from_pkcs8(&PackKey::generate().expect("a key")).expect("the key");
        let mut trusted = TrustedKeys::new();
        trusted.insert("t", key.public());
        let mut out = Vec::new();
        for d in dirs {
            let built = reach_taskpack::build(&d, &key).expect("the pack builds");
            let pack =
                reach_taskpack::conform(&built.archive, &trusted, None, 0).expect("conforms");
            for variant in pack.sources().answers.variants.clone() {
                let fixture = Fixture::new(pack.sources(), &variant).expect("a fixture");
                out.push((pack.clone(), fixture));
            }
        }
        assert!(!out.is_empty());
        out
    })
}

fn prompt_system(pack: &VerifiedPack, role: Role) -> String {
    let s = pack.sources();
    s.prompts[&s.flow.turn(role).prompt].system.clone()
}

fn answer(pack: &VerifiedPack, fixture: &Fixture, system: &str, user: &str) {
    match fixture.answer(system, user) {
        Ok(a) => {
            assert_eq!(
                fixture.role_of(system),
                Some(a.role),
                "answered an unknown prompt"
            );
            match a.role {
                Role::Solver => {
                    let answers = &pack.sources().answers;
                    assert!(
                        answers.solver.iter().any(|e| e.id == a.id
                            && e.candidate == a.content
                            && e.variants.iter().any(|v| v == fixture.variant())),
                        "a Solver answer that is not the variant's"
                    );
                }
                Role::Reviewer => {
                    let review = reach_plan::Review::parse(a.content.as_bytes())
                        .expect("the quarantine reads the review");
                    let verdict = serde_json::to_value(review.verdict).expect("a verdict");
                    assert_eq!(
                        Some(a.id.as_str()),
                        verdict.as_str().map(|v| format!("review:{v}")).as_deref()
                    );
                }
            }
        }
        Err(r) => {
            assert!(r.code().starts_with("fixture/"));
            assert_eq!(r.status(), 400, "{r}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let all = fixtures();
    let (pack, fixture) = &all[usize::from(mode >> 2) % all.len()];
    match mode & 3 {
        0 => match read_request(rest) {
            Ok(chat) => {
                let again = json!({"model": chat.model, "max_tokens": 1, "stream": chat.stream,
                    "messages": [{"role": "system", "content": chat.system},
                                 {"role": "user", "content": chat.user}]});
                let again = read_request(again.to_string().as_bytes()).expect("reads again");
                assert_eq!(again, chat, "its own fields read as another request");
                answer(pack, fixture, &chat.system, &chat.user);
            }
            Err(r) => assert_eq!(r.code(), "fixture/bad-request"),
        },
        1 => answer(pack, fixture, &prompt_system(pack, Role::Solver), text),
        2 => answer(pack, fixture, &prompt_system(pack, Role::Reviewer), text),
        _ => match fixture.read_candidate(text) {
            Ok(review) => {
                let bytes = serde_json::to_vec(&review).expect("a review serializes");
                let parsed = reach_plan::Review::parse(&bytes).expect("the quarantine reads it");
                parsed
                    .check_quotes(text.as_bytes())
                    .expect("a review quotes its candidate exactly");
            }
            Err(r) => assert_eq!(r.code(), "fixture/candidate-malformed"),
        },
    }
});
