//! The OpenAI-compatible return (crates/portal `openai::parse_completion`), the streamed one
//! (event-stream bytes through crates/bounded `SseDecoder` into `openai::StreamAssembler`, the
//! adapter's path), `ProviderReturn::from_bytes` (what core reads from egress-provider) and
//! the quarantine judging all three.
//!
//! Promised: every refusal is one of `Quarantine`'s codes and reads back from its code; an
//! accepted return holds at most `MAX_CONTENT_BYTES`, says truthfully whether it was whole and
//! streamed, and survives `to_bytes` → `from_bytes` unchanged; an adopted answer is non-empty,
//! within the Cut's length, cites only passages of the payload and carries no withheld value.
#![no_main]

use std::collections::VecDeque;

use libfuzzer_sys::fuzz_target;
use reach_bounded::{Bounds, SseDecoder};
use reach_digest::Sha256Digest;
use reach_portal::cut::{CutInput, CutPayload, EvidenceIn, cut};
use reach_portal::openai::{MAX_CONTENT_BYTES, StreamAssembler, parse_completion};
use reach_portal::{Expectation, ProviderReturn, Quarantine, quarantine};

/// Bytes: a mode byte (0 completion, 1 event stream, 2 egress-provider's return), the body.
enum Input<'a> {
    Completion(&'a [u8]),
    Stream(&'a [u8]),
    Return(&'a [u8]),
}

const MODEL: &str = "reach-test-model";
const WITHHELD: &str = "123456789012345678";

fn payload() -> CutPayload {
    cut(&CutInput {
        question: "How are deliveries settled?".into(),
        bundle_digest: Sha256Digest::of(b"bundle"),
        revision: "abc".into(),
        passages: (1..=3)
            .map(|i| {
                let text = format!("Passage {i}.");
                EvidenceIn {
                    passage_id: format!("p-{i}"),
                    digest: Sha256Digest::of(text.as_bytes()),
                    section: "S".into(),
                    url: format!("https://example.test/doc.md#L{i}"),
                    text,
                }
            })
            .collect(),
        withheld: vec!["subject_id"],
    })
    .expect("a fixed cut")
    .payload
}

fn typed(q: Quarantine) {
    assert_eq!(
        Quarantine::from_code(&q.code()),
        Some(q),
        "untyped quarantine"
    );
}

fn judge(ret: &ProviderReturn) {
    assert!(
        ret.content.len() <= MAX_CONTENT_BYTES,
        "content past the bound"
    );
    let bytes = ret.to_bytes();
    let back = ProviderReturn::from_bytes(&bytes).expect("a return reads its own bytes");
    assert_eq!(&back, ret, "to_bytes/from_bytes changed the return");
    assert_eq!(back.to_bytes(), bytes);
    let p = payload();
    let withheld = vec![WITHHELD.to_owned()];
    let exp = Expectation {
        model: MODEL,
        payload: &p,
        withheld: &withheld,
    };
    match quarantine(ret, &exp) {
        Ok(a) => {
            assert!(ret.complete && ret.finish_reason.as_deref() == Some("stop"));
            assert!(!a.text.trim().is_empty());
            assert!(a.text.chars().count() <= p.max_answer_chars as usize + 16 * a.citations.len());
            assert!(!a.text.contains(WITHHELD), "a withheld value was adopted");
            assert!(!a.citations.is_empty());
            for c in &a.citations {
                assert!(
                    p.passages
                        .iter()
                        .any(|q| q.passage_id == c.passage_id && q.url == c.url),
                    "adopted a citation outside the bundle"
                );
            }
        }
        Err(q) => typed(q),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((mode, body)) = data.split_first() else {
        return;
    };
    let input = match mode % 3 {
        0 => Input::Completion(body),
        1 => Input::Stream(body),
        _ => Input::Return(body),
    };
    run(input);
});

fn run(input: Input<'_>) {
    match input {
        Input::Completion(body) => match parse_completion(body) {
            Ok(r) => {
                assert!(r.complete && !r.streamed);
                judge(&r);
            }
            Err(q) => typed(q),
        },
        Input::Stream(body) => {
            let b = Bounds {
                max_sse_line_bytes: 8 * 1024,
                max_sse_events: 256,
                ..Bounds::default()
            };
            let mut d = SseDecoder::new();
            let mut pending: VecDeque<u8> = body.iter().copied().collect();
            let mut a = StreamAssembler::new();
            let mut done = false;
            loop {
                match d.next_event(&mut pending, &b) {
                    Ok(Some(e)) => match a.feed(&e.data) {
                        Ok(true) => done = true,
                        Ok(false) => assert!(!done, "data after [DONE] was read"),
                        Err(q) => {
                            typed(q);
                            return;
                        }
                    },
                    Ok(None) => break,
                    Err(e) => {
                        assert!(e.code().starts_with("bounded/"));
                        return;
                    }
                }
            }
            match a.finish() {
                Ok(r) => {
                    assert!(r.streamed);
                    assert_eq!(r.complete, done, "complete without [DONE]");
                    judge(&r);
                }
                Err(q) => typed(q),
            }
        }
        Input::Return(bytes) => match ProviderReturn::from_bytes(bytes) {
            Ok(r) => {
                if r.content.len() <= MAX_CONTENT_BYTES {
                    judge(&r);
                }
            }
            Err(q) => assert_eq!(q, Quarantine::Schema),
        },
    }
}
