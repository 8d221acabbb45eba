//! Discord REST returns and error bodies (crates/discord `rest::classify`,
//! `classify_callback`, `judge_original`, `ratelimit::RateLimits::observe`, and the channel
//! read's message objects).
//!
//! Promised: a 2xx is never a rejection or a rate limit; a 429, or a bucket's headers, waits at
//! most an hour; a 4xx
//! keeps its status; every reason is a secret-free `discord/...` code; the classification
//! depends on the status and body only as the table says.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use reach_discord::MessageCreate;
use reach_discord::delivery::{CreateOutcome, Reconciliation};
use reach_discord::ratelimit::{RateLimits, Route};
use reach_discord::rest::{CallbackOutcome, classify, classify_callback, judge_original};

/// Bytes: status (2, big-endian), flags (1: bit 0 edit, bit 1 send a `retry-after` header
/// holding the first line of the body), then the body. The expected content is fixed.
struct Input<'a> {
    status: u16,
    retry_after: Option<&'a str>,
    expected: &'a str,
    edit: bool,
    /// Whether the interaction's token is still alive (10015 proves absence only then).
    token_alive: bool,
    body: &'a [u8],
}

fn input(data: &[u8]) -> Option<Input<'_>> {
    let (head, body) = data.split_at_checked(3)?;
    let retry_after = (head[2] & 2 != 0)
        .then(|| body.split(|b| *b == b'\n').next())
        .flatten()
        .and_then(|l| std::str::from_utf8(l).ok());
    Some(Input {
        status: u16::from_be_bytes([head[0], head[1]]),
        retry_after,
        expected: "The answer.",
        edit: head[2] & 1 != 0,
        token_alive: head[2] & 4 != 0,
        body,
    })
}

fn reason_ok(reason: &str) {
    assert!(reason.starts_with("discord/"), "untyped reason {reason}");
    assert!(
        reason.is_ascii() && reason.len() < 64,
        "reason carries text: {reason}"
    );
}

fuzz_target!(|data: &[u8]| {
    let Some(input) = input(data) else {
        return;
    };
    // Statuses as hyper would deliver them (three digits).
    let status = 100 + input.status % 500;
    let mut headers = http::HeaderMap::new();
    if let Some(v) = input
        .retry_after
        .and_then(|v| http::HeaderValue::from_str(v).ok())
    {
        headers.insert("retry-after", v.clone());
        // The same line as the bucket headers the rate-limit state reads.
        headers.insert("x-ratelimit-reset-after", v.clone());
        headers.insert("x-ratelimit-remaining", v);
    }
    match classify(status, &headers, input.body) {
        CreateOutcome::KnownSent { .. } => assert!((200..300).contains(&status)),
        CreateOutcome::KnownRejected { status: s, .. } => {
            assert_eq!(s, status);
            assert!((400..500).contains(&status) && status != 429);
        }
        CreateOutcome::RateLimited { retry_after, .. } => {
            assert_eq!(status, 429);
            assert!(retry_after <= Duration::from_secs(3600));
        }
        CreateOutcome::NotSent { reason } => panic!("a return is never NotSent: {reason}"),
        CreateOutcome::Unknown { reason } => {
            reason_ok(&reason);
            assert!(!(400..500).contains(&status), "a 4xx was not classified");
        }
    }
    match classify_callback(status, &headers, input.body) {
        CallbackOutcome::Sent { .. } => assert!((200..300).contains(&status)),
        CallbackOutcome::Acknowledged => {
            // A 2xx naming no message, or Discord's 40060 on a 4xx.
            assert!(
                (200..300).contains(&status) || ((400..500).contains(&status) && status != 429)
            );
        }
        CallbackOutcome::Rejected { status: s, .. } => {
            assert_eq!(s, status);
            assert!((400..500).contains(&status) && status != 429);
        }
        CallbackOutcome::RateLimited { retry_after, .. } => {
            assert_eq!(status, 429);
            assert!(retry_after <= Duration::from_secs(3600));
        }
        CallbackOutcome::NotSent { reason } => panic!("a return is never NotSent: {reason}"),
        CallbackOutcome::Unknown { reason } => {
            reason_ok(&reason);
            assert!(!(200..300).contains(&status));
        }
    }
    let judged = judge_original(
        status,
        input.body,
        input.expected,
        input.edit,
        input.token_alive,
    );
    match judged {
        Reconciliation::Found { .. } => assert_eq!(status, 200),
        Reconciliation::ProvedAbsent => {
            assert!(status == 200 || status == 404);
            // An expired token's 10015 proves nothing.
            let code = serde_json::from_slice::<serde_json::Value>(input.body)
                .ok()
                .and_then(|v| v.get("code").and_then(serde_json::Value::as_u64));
            assert!(input.token_alive || status != 404 || code != Some(10015));
        }
        Reconciliation::Inconclusive { reason } => reason_ok(&reason),
    }
    // What the rate-limit state learns from this return never parks a route past an hour,
    // nor panics on any header or body value.
    let limits = RateLimits::default();
    let route = Route::of(&http::Method::POST, "/channels/1/messages");
    let body: Option<serde_json::Value> = serde_json::from_slice(input.body).ok();
    let field = |k: &str| body.as_ref().and_then(|b| b.get(k)).cloned();
    let now = tokio::time::Instant::now();
    limits.observe(
        &route,
        status,
        &headers,
        field("retry_after").and_then(|v| v.as_f64()),
        field("global").and_then(|v| v.as_bool()).unwrap_or(false),
        now,
    );
    for global in [false, true] {
        assert!(limits.wait_before(&route, global, now) <= Duration::from_secs(3600));
    }
    // A channel read page: each element is read as a message object.
    if let Ok(values) = serde_json::from_slice::<Vec<serde_json::Value>>(input.body) {
        for v in values {
            let _ = MessageCreate::from_json(v);
        }
    }
});
