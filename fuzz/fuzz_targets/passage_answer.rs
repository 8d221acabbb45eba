//! A model's answer to a Room passage, untrusted (crates/passage `quarantine`, which reads a
//! candidate with `Candidate::parse` and a review with `Review::parse` and `check_quotes`).
//!
//! Promised: the quarantine never panics; what it accepts is exactly the content trimmed of
//! ASCII whitespace, one JSON object, and parses again to the same candidate or review; an
//! accepted review's every quote is the candidate's value at its path; every refusal is a
//! typed `quarantine/` code.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reach_passage::quarantine::{Answer, PassagePayload, quarantine};

/// The candidate under review: a made-up pack's (the test vocabulary's words).
const UNDER_REVIEW: &str = r#"{"format":"reach.plan.candidate.v1","diagnosis":"d","steps":[{"kind":"run","profile":"show-config","args":[]},{"kind":"patch","target":"etc/app.conf","edits":[{"op":"replace","line":"accept = localhost","with":"accept = *"}]},{"kind":"verify"}]}"#;

fn payload(answer: &str) -> PassagePayload {
    let role = if answer == "candidate" {
        "solver"
    } else {
        "reviewer"
    };
    PassagePayload::from_bytes(
        serde_json::json!({
            "schema": "reach.room.passage/1",
            "role": role,
            "answer": answer,
            "system": "s",
            "user": "u",
            "max_completion_tokens": 1024,
        })
        .to_string()
        .as_bytes(),
    )
    .expect("a well-formed payload")
}

// Bytes: a mode byte (bit 0: a review passage, else a candidate's), then the content.
fuzz_target!(|data: &[u8]| {
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    let Ok(content) = std::str::from_utf8(rest) else {
        return;
    };
    let review = mode & 1 != 0;
    let p = payload(if review { "review" } else { "candidate" });
    let under = review.then_some(UNDER_REVIEW.as_bytes());
    match quarantine(&p, content, under) {
        Ok(a) => {
            let trimmed = content.trim_matches(|c: char| c.is_ascii_whitespace());
            assert_eq!(a.bytes(), trimmed.as_bytes(), "accepted other bytes");
            match a {
                Answer::Candidate { bytes, candidate } => {
                    assert_eq!(
                        reach_plan::Candidate::parse(&bytes).as_ref(),
                        Ok(&candidate)
                    );
                }
                Answer::Review { bytes, review } => {
                    let again = reach_plan::Review::parse(&bytes).expect("parses again");
                    assert_eq!(again, review);
                    assert!(review.check_quotes(UNDER_REVIEW.as_bytes()).is_ok());
                }
            }
        }
        Err(e) => {
            let code = e.code();
            assert!(code.starts_with("quarantine/"), "untyped refusal {code}");
        }
    }
});
