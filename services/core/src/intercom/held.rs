//! Adopted answers of operator tasks, held in core's memory for the operator who was not
//! waiting when the task settled (the Stasis settled it after the request returned, or after a
//! restart). The ledger keeps only the answer's digest; the text is held here for
//! [`HOLD_FOR`], at most [`MAX_HELD`] answers, and is gone with the process: asking again with
//! the same task id returns it while held, and nothing is sent for it.
//!
//! Retention: operator data from the enrolled peer, quarantined before adoption; memory only,
//! never a file, a log or the trail.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long an adopted answer is held.
pub(crate) const HOLD_FOR: Duration = Duration::from_secs(3600);
/// The most answers held at once; the oldest goes first.
pub(crate) const MAX_HELD: usize = 256;

/// Task id → (answer text, when it was adopted).
#[derive(Debug, Default)]
pub(crate) struct HeldAnswers(Mutex<HashMap<String, (String, Instant)>>);

impl HeldAnswers {
    /// Holds `answer` for `task_id` from `now`.
    pub(crate) fn hold(&self, task_id: &str, answer: String, now: Instant) {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        held.retain(|_, (_, at)| now.saturating_duration_since(*at) < HOLD_FOR);
        if held.len() >= MAX_HELD && !held.contains_key(task_id) {
            let oldest = held
                .iter()
                .min_by_key(|(_, (_, at))| *at)
                .map(|(id, _)| id.clone());
            if let Some(id) = oldest {
                held.remove(&id);
            }
        }
        held.insert(task_id.to_owned(), (answer, now));
    }

    /// The answer held for `task_id` at `now`, if it is still held.
    pub(crate) fn get(&self, task_id: &str, now: Instant) -> Option<String> {
        let held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        held.get(task_id)
            .filter(|(_, at)| now.saturating_duration_since(*at) < HOLD_FOR)
            .map(|(text, _)| text.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_held_until_its_time_is_up() {
        let held = HeldAnswers::default();
        let t0 = Instant::now();
        held.hold("task-1", "the answer".into(), t0);
        assert_eq!(held.get("task-1", t0).as_deref(), Some("the answer"));
        let almost = t0 + HOLD_FOR - Duration::from_secs(1);
        assert_eq!(held.get("task-1", almost).as_deref(), Some("the answer"));
        assert_eq!(held.get("task-1", t0 + HOLD_FOR), None);
        assert_eq!(held.get("task-2", t0), None);
    }

    #[test]
    fn the_oldest_answer_goes_first_when_full() {
        let held = HeldAnswers::default();
        let t0 = Instant::now();
        for i in 0..MAX_HELD {
            held.hold(
                &format!("task-{i}"),
                format!("answer {i}"),
                t0 + Duration::from_millis(i as u64),
            );
        }
        let later = t0 + Duration::from_secs(1);
        held.hold("task-new", "newest".into(), later);
        assert_eq!(held.get("task-0", later), None, "the oldest made room");
        assert_eq!(held.get("task-1", later).as_deref(), Some("answer 1"));
        assert_eq!(held.get("task-new", later).as_deref(), Some("newest"));
    }
}
