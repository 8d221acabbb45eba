//! The bounded reader's JSON pre-scan (crates/bounded `scan::JsonScan`), the depth and items
//! check every JSON return passes before serde sees it.
//!
//! Promised: however the body is cut into reads, the verdict is the same; a body the scan
//! passes nests no deeper than `max_json_depth` and holds no more than `max_json_items`
//! values once serde parses it; a refusal names the JSON bound it crossed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reach_bounded::scan::JsonScan;
use reach_bounded::{Bound, BoundViolation, Bounds};
use serde_json::Value;

/// Bytes: depth bound (1), items bound (2, big-endian), read size (1), then the body.
struct Input<'a> {
    depth: u8,
    items: u16,
    cuts: Vec<u16>,
    body: &'a [u8],
}

fn input(data: &[u8]) -> Option<Input<'_>> {
    let (h, body) = data.split_at_checked(4)?;
    let step = u16::from(h[3]) + 1;
    Some(Input {
        depth: h[0],
        items: u16::from_be_bytes([h[1], h[2]]),
        cuts: vec![step; body.len() / usize::from(step) + 1],
        body,
    })
}

fn depth(v: &Value) -> u64 {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(m) => 1 + m.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

fn items(v: &Value) -> u64 {
    match v {
        Value::Array(a) => a.len() as u64 + a.iter().map(items).sum::<u64>(),
        Value::Object(m) => m.len() as u64 + m.values().map(items).sum::<u64>(),
        _ => 0,
    }
}

fn scan(chunks: &[&[u8]], b: &Bounds) -> Result<u64, BoundViolation> {
    let mut s = JsonScan::new();
    for c in chunks {
        s.feed(c, b)?;
    }
    Ok(s.items())
}

fuzz_target!(|data: &[u8]| {
    let Some(input) = input(data) else {
        return;
    };
    let b = Bounds {
        max_json_depth: u64::from(input.depth % 24) + 1,
        max_json_items: u64::from(input.items % 512) + 1,
        ..Bounds::default()
    };
    let whole = scan(&[input.body], &b);
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
    let cut = scan(&chunks, &b);
    assert_eq!(whole, cut, "the verdict depends on how the body was read");
    match whole {
        Ok(counted) => {
            if let Ok(v) = serde_json::from_slice::<Value>(input.body) {
                assert!(
                    depth(&v) <= b.max_json_depth,
                    "passed a body nested too deep"
                );
                assert!(items(&v) <= counted, "the scan under-counted items");
                assert!(counted <= b.max_json_items);
            }
        }
        Err(v) => {
            assert!(matches!(v.bound, Bound::JsonDepth | Bound::JsonItems));
            assert!(v.observed > v.limit);
        }
    }
});
