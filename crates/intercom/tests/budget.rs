//! The default poll budget against ward's real desk at its default policy (issue #33 item 5):
//! a task that stays live until its deadline, polled on the default pacing, gets every
//! decision it asks for (the send, each poll, and a `CancelTask` after any of them), so a task
//! the peer finishes before its deadline is read by a poll at most one interval later and no
//! `decision/over-budget` delays it.

mod common;

use std::time::Duration;

use common::*;
use reach_a2a_peer::Script;
use reach_digest::Sha256Digest;
use reach_intercom::task::{DECISIONS_BESIDES_POLLS, DEFAULT_DEADLINE, FINAL_POLL_LEAD};
use reach_intercom::{Attempt, AttemptKind, DecisionAuthority, PollBudget};
use reach_ward_desk::{DECISION_TTL, TaskBudgets, WardPolicy};

fn attempt(kind: AttemptKind) -> Attempt {
    Attempt {
        task_id: "t-budget".into(),
        kind,
        destination: "https://a2a-peer.test/a2a".into(),
        payload_digest: Sha256Digest::of(format!("{kind:?}").as_bytes()),
    }
}

#[tokio::test]
async fn the_default_poll_budget_fits_wards_default_task_budgets() {
    let budget = PollBudget::DEFAULT;
    let polls = budget.schedule(DEFAULT_DEADLINE);
    let ward = TaskBudgets::default();
    assert!(DEFAULT_DEADLINE.as_millis() as u64 <= ward.time_ms);
    assert!(
        polls.len() as u32 + DECISIONS_BESIDES_POLLS <= ward.retries,
        "{} polls",
        polls.len()
    );
    // Gaps of at most one interval, the last poll just before the deadline.
    let mut last = Duration::ZERO;
    for &t in &polls {
        assert!(t - last <= budget.interval, "gap before {t:?}");
        last = t;
    }
    assert_eq!(DEFAULT_DEADLINE - last, FINAL_POLL_LEAD);

    // At ward's real desk, its default policy: the cancel after each poll in turn (the worst
    // case for decisions live at once is wherever it lands).
    for cancel_after in 1..=polls.len() {
        let f = Fixture::with(Script::default(), WardPolicy::default()).await;
        let mut issued = Vec::new();
        let mut at = Duration::ZERO;
        let mut step = |to: Duration, kind: AttemptKind| {
            f.clock.advance(to - at);
            at = to;
            attempt(kind)
        };
        let a = step(Duration::ZERO, AttemptKind::Send);
        issued.push(f.authority.obtain_decision(&a).await);
        for (i, &t) in polls.iter().enumerate() {
            let n = i as u32 + 1;
            let a = step(t, AttemptKind::Poll(n));
            issued.push(f.authority.obtain_decision(&a).await);
            if i + 1 == cancel_after {
                let a = step(t, AttemptKind::Cancel);
                issued.push(f.authority.obtain_decision(&a).await);
                break;
            }
        }
        for (i, d) in issued.iter().enumerate() {
            assert!(
                d.is_ok(),
                "decision {i} (cancel after poll {cancel_after}): {d:?}"
            );
        }
    }
    // The reasoning the sizing rests on: ward's decision life.
    assert_eq!(DECISION_TTL, Duration::from_secs(30));
}
