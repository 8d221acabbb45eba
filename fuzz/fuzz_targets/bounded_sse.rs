//! The bounded reader's event-stream machine (crates/bounded `SseDecoder`), what every
//! streaming completion passes through.
//!
//! Promised: however the stream is cut into reads, the same events come out; no event's data
//! and no line exceeds `max_sse_line_bytes`; no more than `max_sse_events` events; a JSON
//! event passed the depth and items scan; every failure is a `bounded/...` code.
#![no_main]

use std::collections::VecDeque;

use libfuzzer_sys::fuzz_target;
use reach_bounded::scan::JsonScan;
use reach_bounded::{Bounds, SseDecoder, SseEvent};

/// Bytes: line bound (2, big-endian), events bound (1), read size (1), then the stream.
struct Input<'a> {
    line: u16,
    events: u8,
    cuts: Vec<u16>,
    body: &'a [u8],
}

fn run(chunks: &[&[u8]], b: &Bounds) -> (Vec<SseEvent>, Option<String>) {
    let mut d = SseDecoder::new();
    let mut pending = VecDeque::new();
    let mut out = Vec::new();
    for c in chunks {
        pending.extend(c.iter().copied());
        loop {
            match d.next_event(&mut pending, b) {
                Ok(Some(e)) => out.push(e),
                Ok(None) => break,
                Err(e) => return (out, Some(e.code())),
            }
        }
    }
    (out, None)
}

fn input(data: &[u8]) -> Option<Input<'_>> {
    let (h, body) = data.split_at_checked(4)?;
    let step = u16::from(h[3]) + 1;
    Some(Input {
        line: u16::from_be_bytes([h[0], h[1]]),
        events: h[2],
        cuts: vec![step; body.len() / usize::from(step) + 1],
        body,
    })
}

fuzz_target!(|data: &[u8]| {
    let Some(input) = input(data) else {
        return;
    };
    let b = Bounds {
        max_sse_line_bytes: u64::from(input.line % 512) + 1,
        max_sse_events: u64::from(input.events % 32) + 1,
        max_json_depth: 8,
        max_json_items: 64,
        ..Bounds::default()
    };
    let whole = run(&[input.body], &b);
    let mut chunks = Vec::new();
    let mut rest = input.body;
    for c in &input.cuts {
        if rest.is_empty() {
            break;
        }
        let (head, tail) = rest.split_at(usize::from(*c) % (rest.len() + 1));
        chunks.push(head);
        rest = tail;
    }
    chunks.push(rest);
    assert_eq!(
        whole,
        run(&chunks, &b),
        "events depend on how the stream was read"
    );
    let (events, failure) = whole;
    assert!(events.len() as u64 <= b.max_sse_events);
    for e in &events {
        assert!(
            e.data.len() as u64 <= b.max_sse_line_bytes,
            "event data past the bound"
        );
        let t = e.data.trim_start();
        if t.starts_with('{') || t.starts_with('[') {
            assert!(JsonScan::new().feed(e.data.as_bytes(), &b).is_ok());
        }
    }
    if let Some(code) = failure {
        assert!(
            matches!(
                code.as_str(),
                "bounded/sse-line-bytes"
                    | "bounded/sse-events"
                    | "bounded/json-depth"
                    | "bounded/json-items"
                    | "bounded/protocol"
            ),
            "untyped failure {code}"
        );
    }
});
