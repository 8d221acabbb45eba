//! A2A JSON-RPC answers (crates/intercom `task::classify_send`, `classify_poll`,
//! `classify_cancel`, over `wire::parse_response`) and the answer's quarantine
//! (`quarantine_answer`), read through the public parse API only.
//!
//! Promised: a non-200 never settles a task as anything but a refusal, and only a definitive
//! 4xx does that; a task is polled only under an id that passes the id rule; a poll settles only
//! the task it asked about; every code is a short `a2a/...` code carrying no peer text but a
//! state name or number; an adopted answer is at most `MAX_ANSWER_BYTES`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reach_intercom::quarantine::MAX_ANSWER_BYTES;
use reach_intercom::task::{MAX_ID_BYTES, classify_cancel, classify_poll, classify_send};
use reach_intercom::{Answer, Phase, PollVerdict, SendVerdict, quarantine_answer};
use reach_portal::Quarantine;

const SEND_ID: &str = "task-1/send";
const POLL_ID: &str = "task-1/poll/1";
const REMOTE: &str = "remote-1";

fn code_ok(code: &str) {
    assert!(code.starts_with("a2a/"), "untyped code {code}");
    assert!(
        code.len() <= 64 && code.bytes().all(|b| b.is_ascii_graphic()),
        "a code carries peer text: {code:?}"
    );
}

fn id_ok(id: &str) {
    assert!(!id.is_empty() && id.len() <= MAX_ID_BYTES);
    assert!(
        id.bytes().all(|b| b.is_ascii_graphic()),
        "a task id outside the id rule"
    );
}

fn adopt(answer: &Answer) {
    match quarantine_answer(answer) {
        Ok(text) => assert!(text.len() <= MAX_ANSWER_BYTES, "adopted past the bound"),
        Err(q) => assert_eq!(Quarantine::from_code(&q.code()), Some(q)),
    }
}

// Bytes: status (2, big-endian), then the body.
fuzz_target!(|data: &[u8]| {
    let Some((head, body)) = data.split_at_checked(2) else {
        return;
    };
    let status = 100 + u16::from_be_bytes([head[0], head[1]]) % 500;
    match classify_send(status, body, SEND_ID) {
        SendVerdict::Live { remote_task_id } => {
            assert_eq!(status, 200);
            id_ok(&remote_task_id);
        }
        SendVerdict::Settle {
            phase,
            code,
            remote_task_id,
            answer,
        } => {
            code_ok(&code);
            if status != 200 {
                assert_eq!(
                    phase,
                    Phase::Refused,
                    "a failed status settled as {phase:?}"
                );
                assert!((400..500).contains(&status) && !matches!(status, 408 | 425 | 429));
                assert!(answer.is_none() && remote_task_id.is_none());
            }
            if let Some(id) = &remote_task_id {
                id_ok(id);
            }
            if let Some(a) = answer {
                adopt(&a);
            }
        }
        SendVerdict::Uncertain { code } => code_ok(&code),
    }
    match classify_poll(status, body, POLL_ID, REMOTE) {
        PollVerdict::Live => assert_eq!(status, 200),
        PollVerdict::Settle { code, answer, .. } => {
            assert_eq!(status, 200);
            code_ok(&code);
            match answer.as_ref() {
                Answer::Task(t) => assert_eq!(t.id, REMOTE, "settled another task"),
                Answer::Message(_) => panic!("a poll answered with a message"),
            }
            adopt(&answer);
        }
        PollVerdict::Lost { code } | PollVerdict::Inconclusive { code } => code_ok(&code),
    }
    let cancel = classify_cancel(status, body, POLL_ID, REMOTE);
    assert!(
        cancel.starts_with("a2a/cancel/") && cancel.len() <= 64,
        "{cancel:?}"
    );
});
