//! The IDENTIFY budget: Discord allows a bot a fixed number of session starts (IDENTIFYs) a day
//! — `session_start_limit.total` in `GET /gateway/bot`, 1,000 for most bots — and past it
//! resets the bot's token. A client that re-identifies every few seconds through an outage
//! spends that in under an hour. [`IdentifyBudget`] keeps the client inside it: every IDENTIFY
//! is counted in a sliding window, one past the allowance waits until the oldest leaves the
//! window, and sessions that keep failing (no READY, or ended within [`STABLE_SESSION`] of it)
//! back off exponentially. Pure: the caller passes the clock.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// A session that lasted this long after READY proves the gateway works again: the failure
/// backoff starts over.
pub const STABLE_SESSION: Duration = Duration::from_secs(60);
/// The longest wait the failure backoff reaches.
pub const MAX_FAILURE_BACKOFF: Duration = Duration::from_secs(10 * 60);

/// How many IDENTIFYs the client may send per window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdentifyAllowance {
    /// IDENTIFYs per window: Discord's `session_start_limit.total` less what restarts of this
    /// process may spend outside the client's count.
    pub per_window: u32,
    /// Discord's window: a day.
    pub window: Duration,
}

impl Default for IdentifyAllowance {
    /// Discord's default 1,000 a day, with 100 kept back for process restarts (each starts a
    /// fresh count).
    fn default() -> Self {
        Self {
            per_window: 900,
            window: Duration::from_secs(24 * 60 * 60),
        }
    }
}

/// The client's count of its own IDENTIFYs, and its backoff for failing sessions.
#[derive(Debug)]
pub struct IdentifyBudget {
    allowance: IdentifyAllowance,
    sent: VecDeque<Instant>,
    failures: u32,
}

impl IdentifyBudget {
    pub fn new(allowance: IdentifyAllowance) -> Self {
        Self {
            allowance,
            sent: VecDeque::new(),
            failures: 0,
        }
    }

    fn prune(&mut self, now: Instant) {
        while self
            .sent
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= self.allowance.window)
        {
            self.sent.pop_front();
        }
    }

    /// How long the next IDENTIFY must wait at `now` for the allowance: zero while it lasts,
    /// else until the oldest counted IDENTIFY leaves the window.
    pub fn wait_for_allowance(&mut self, now: Instant) -> Duration {
        self.prune(now);
        if self.sent.len() < self.allowance.per_window as usize {
            return Duration::ZERO;
        }
        match self.sent.front() {
            Some(oldest) => (*oldest + self.allowance.window).saturating_duration_since(now),
            None => Duration::ZERO,
        }
    }

    /// Counts an IDENTIFY sent at `now`.
    pub fn identified(&mut self, now: Instant) {
        self.prune(now);
        self.sent.push_back(now);
    }

    /// A connection that identified has ended; `ready_for`: how long it lasted after READY
    /// (`None`: no READY). A stable session resets the backoff; anything else is a failure.
    pub fn session_ended(&mut self, ready_for: Option<Duration>) {
        match ready_for {
            Some(d) if d >= STABLE_SESSION => self.failures = 0,
            _ => self.failures = self.failures.saturating_add(1),
        }
    }

    /// The wait before the next IDENTIFY after failures: `base` doubled per failure beyond the
    /// first, at most [`MAX_FAILURE_BACKOFF`] (and never less than `base`).
    pub fn failure_backoff(&self, base: Duration) -> Duration {
        let doublings = self.failures.saturating_sub(1).min(16);
        base.saturating_mul(1 << doublings)
            .min(MAX_FAILURE_BACKOFF)
            .max(base)
    }

    /// IDENTIFYs counted in the window at `now`.
    pub fn counted(&mut self, now: Instant) -> usize {
        self.prune(now);
        self.sent.len()
    }

    /// Consecutive failed sessions.
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(per_window: u32, window_s: u64) -> IdentifyBudget {
        IdentifyBudget::new(IdentifyAllowance {
            per_window,
            window: Duration::from_secs(window_s),
        })
    }

    #[test]
    fn the_allowance_waits_for_the_oldest_to_leave_the_window() {
        let mut b = budget(3, 100);
        let t0 = Instant::now();
        for k in 0..3 {
            assert_eq!(
                b.wait_for_allowance(t0 + Duration::from_secs(k)),
                Duration::ZERO
            );
            b.identified(t0 + Duration::from_secs(k));
        }
        let now = t0 + Duration::from_secs(10);
        assert_eq!(b.wait_for_allowance(now), Duration::from_secs(90));
        // Once the first leaves the window, one more is allowed, then the second's turn.
        let later = t0 + Duration::from_secs(100);
        assert_eq!(b.wait_for_allowance(later), Duration::ZERO);
        b.identified(later);
        assert_eq!(b.wait_for_allowance(later), Duration::from_secs(1));
        assert_eq!(b.counted(later), 3);
    }

    #[test]
    fn failing_sessions_back_off_exponentially_and_a_stable_one_resets() {
        let mut b = budget(1000, 86_400);
        let base = Duration::from_secs(1);
        assert_eq!(b.failure_backoff(base), base);
        b.session_ended(None);
        assert_eq!(b.failure_backoff(base), base);
        b.session_ended(Some(Duration::from_secs(5)));
        assert_eq!(b.failure_backoff(base), Duration::from_secs(2));
        for _ in 0..3 {
            b.session_ended(None);
        }
        assert_eq!(b.failures(), 5);
        assert_eq!(b.failure_backoff(base), Duration::from_secs(16));
        for _ in 0..40 {
            b.session_ended(None);
        }
        assert_eq!(b.failure_backoff(base), MAX_FAILURE_BACKOFF);
        b.session_ended(Some(STABLE_SESSION));
        assert_eq!(b.failures(), 0);
        assert_eq!(b.failure_backoff(base), base);
    }

    #[test]
    fn a_day_of_outage_stays_inside_discords_limit() {
        // Every session fails at once; the client waits what the budget says each time.
        let mut b = IdentifyBudget::new(IdentifyAllowance::default());
        let base = Duration::from_secs(1);
        let start = Instant::now();
        let mut now = start;
        let mut sent = 0u32;
        while now < start + Duration::from_secs(24 * 60 * 60) {
            now += b.wait_for_allowance(now);
            b.identified(now);
            sent += 1;
            b.session_ended(None);
            now += b.failure_backoff(base);
        }
        assert!(sent <= 1000, "{sent} identifies in a day");
        assert!(sent >= 100, "{sent}: still trying through the day");
    }
}
