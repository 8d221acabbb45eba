//! The payload a Room passage crosses the inference boundary as (crates/passage
//! `PassagePayload::from_bytes`), read back strictly wherever it is stored or relayed.
//!
//! Promised: never a panic; more than `MAX_PAYLOAD_BYTES` is `passage/too-large` unread; an
//! accepted payload carries the `reach.room.passage/1` tag and a role with its own answer kind,
//! and its canonical bytes read back to the same payload with the same digest; every refusal
//! is `passage/too-large` or `passage/schema`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reach_passage::quarantine::{MAX_PAYLOAD_BYTES, PASSAGE_SCHEMA, PassagePayload};
use reach_taskpack::source::{Answer, Role};

fuzz_target!(|data: &[u8]| {
    match PassagePayload::from_bytes(data) {
        Ok(p) => {
            assert!(data.len() <= MAX_PAYLOAD_BYTES, "read past the bound");
            assert_eq!(p.schema, PASSAGE_SCHEMA);
            assert!(matches!(
                (p.role, p.answer),
                (Role::Solver, Answer::Candidate) | (Role::Reviewer, Answer::Review)
            ));
            let canonical = p.to_bytes();
            let again = PassagePayload::from_bytes(&canonical).expect("canonical bytes read");
            assert_eq!(again, p, "canonical bytes read as another payload");
            assert_eq!(again.digest(), p.digest());
            assert_eq!(
                again.to_bytes(),
                canonical,
                "canonical bytes are not a fixed point"
            );
        }
        Err(e) => {
            let code = e.code();
            assert!(
                code == "passage/too-large" || code == "passage/schema",
                "untyped refusal {code}"
            );
            if data.len() > MAX_PAYLOAD_BYTES {
                assert_eq!(code, "passage/too-large");
            }
        }
    }
});
