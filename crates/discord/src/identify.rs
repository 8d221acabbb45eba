//! The IDENTIFY budget: Discord allows a bot a number of session starts (IDENTIFYs) per window
//! — `session_start_limit` in `GET /gateway/bot`: `total` (1,000 a day for most bots),
//! `remaining`, `reset_after` — and past it terminates the bot's sessions and resets its
//! token. A client that re-identifies every few seconds through an outage spends that in under
//! an hour. [`IdentifyBudget`] keeps the client inside it.
//!
//! It goes by Discord's figure when it has one ([`IdentifyBudget::observe`]): no IDENTIFY while
//! `remaining`, less the client's own IDENTIFYs since the read, is 0 — it waits for
//! `reset_after` — and a fresh read is wanted before the first IDENTIFY, when a tenth or less
//! remains, and once `reset_after` has passed ([`IdentifyBudget::wants_read`]). Without a
//! figure (none configured, or the read refused) it falls back to the conservative
//! [`IdentifyAllowance`]: its own count in a sliding window, which a restarted process starts
//! afresh. Always: one IDENTIFY per [`IDENTIFY_SPACING`], and sessions that keep failing (no
//! READY, or ended within [`STABLE_SESSION`] of it) back off exponentially. Pure: the caller
//! passes the clock.

use std::collections::VecDeque;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

/// A session that lasted this long after READY proves the gateway works again: the failure
/// backoff starts over.
pub const STABLE_SESSION: Duration = Duration::from_secs(60);
/// The longest wait the failure backoff reaches.
pub const MAX_FAILURE_BACKOFF: Duration = Duration::from_secs(10 * 60);
/// Discord's IDENTIFY rate: `max_concurrency` IDENTIFYs per 5 seconds, one per rate-limit key
/// (`shard_id % max_concurrency`). This client runs one shard, whose key is always 0, so it
/// may identify once per 5 seconds whatever `max_concurrency` says; faster is answered with
/// INVALID_SESSION, an IDENTIFY spent for nothing.
pub const IDENTIFY_SPACING: Duration = Duration::from_secs(5);
/// How long after a refused read of Discord's figure the client asks again (a 429's longer
/// `retry_after` is waited out instead). The conservative allowance governs meanwhile.
pub const READ_RETRY: Duration = Duration::from_secs(60);
/// A figure with none remaining holds at least this long, whatever its `reset_after`: an answer
/// of 0 remaining that resets "now" again and again cannot make the client ask in a loop.
pub const MIN_SPENT_HOLD: Duration = Duration::from_secs(1);
/// Discord's figure is read again before each IDENTIFY once `remaining` is at most
/// `total / LOW_REMAINING_DIVISOR` (at least 1): near the end, another process spending the same
/// token must not surprise the client.
pub const LOW_REMAINING_DIVISOR: u32 = 10;

/// The conservative allowance: how many IDENTIFYs the client sends per window when it does not
/// have Discord's figure, and how far apart any two are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdentifyAllowance {
    /// IDENTIFYs per window: Discord's default `total` less what restarts of this process may
    /// spend outside the client's count.
    pub per_window: u32,
    /// Discord's window: a day.
    pub window: Duration,
    /// The least time between two IDENTIFYs ([`IDENTIFY_SPACING`]; a loopback emulator, which
    /// does not rate IDENTIFYs, may use zero).
    pub spacing: Duration,
}

impl Default for IdentifyAllowance {
    /// Discord's default 1,000 a day, with 100 kept back for process restarts (each starts a
    /// fresh count), one IDENTIFY per [`IDENTIFY_SPACING`].
    fn default() -> Self {
        Self {
            per_window: 900,
            window: Duration::from_secs(24 * 60 * 60),
            spacing: IDENTIFY_SPACING,
        }
    }
}

/// Discord's `session_start_limit`, as `GET /gateway/bot` answered it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionStartLimit {
    /// Session starts allowed per window.
    pub total: u32,
    /// Session starts left in this window.
    pub remaining: u32,
    /// Until `remaining` is back to `total`.
    pub reset_after: Duration,
    /// IDENTIFYs per 5 seconds across rate-limit keys (one shard: irrelevant, see
    /// [`IDENTIFY_SPACING`]).
    pub max_concurrency: u32,
}

/// `GET /gateway/bot`'s answer, checked against Discord's schema (`GatewayBotResponse`: `url`,
/// `shards`, `session_start_limit` with four int32 fields, all required).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayBot {
    /// The gateway URL Discord names. Used only when it names the configured gateway (a REST
    /// answer never redirects the gateway connection).
    pub url: String,
    /// Discord's recommended shard count.
    pub shards: u32,
    /// The session start limit.
    pub limit: SessionStartLimit,
}

/// Why Discord's figure could not be read: the client budgets by the conservative
/// [`IdentifyAllowance`] instead. Each message is a secret-free code.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SessionLimitRefusal {
    /// No byte of the request left: admission, connection or TLS failed.
    #[error("discord/gateway-bot-not-sent: {0}")]
    NotSent(String),
    /// The answer was lost, timed out or crossed a bound of the reader.
    #[error("discord/gateway-bot-unread: {0}")]
    Unread(String),
    /// Discord answered 429.
    #[error("discord/gateway-bot-rate-limited")]
    RateLimited {
        /// How long Discord asked the client to wait.
        retry_after: Duration,
    },
    /// Discord refused the request (401: the bot token).
    #[error("discord/gateway-bot-status-{status}")]
    Status {
        /// HTTP status.
        status: u16,
        /// Discord's JSON error code, if any.
        code: Option<u64>,
    },
    /// The body is not Discord's `GatewayBotResponse`.
    #[error("discord/gateway-bot-malformed: {0}")]
    Malformed(&'static str),
}

/// The longest `reset_after` and `retry_after` taken as Discord's word: int32 milliseconds, as
/// the spec types them (about 24.8 days).
const MAX_SPEC_MS: u64 = i32::MAX as u64;

impl GatewayBot {
    /// Parse a 200 answer's body. Anything but the spec's shape (a missing or mistyped field, a
    /// negative or out-of-range integer) or an inconsistent figure (`remaining` above `total`,
    /// a zero `total` or `max_concurrency`) is [`SessionLimitRefusal::Malformed`].
    pub fn parse(body: &[u8]) -> Result<Self, SessionLimitRefusal> {
        use SessionLimitRefusal::Malformed;
        let v: Value = serde_json::from_slice(body).map_err(|_| Malformed("not json"))?;
        let url = v
            .get("url")
            .and_then(Value::as_str)
            .ok_or(Malformed("url"))?
            .to_owned();
        let int32 = |v: &Value, k: &'static str| -> Result<u32, SessionLimitRefusal> {
            v.get(k)
                .and_then(Value::as_u64)
                .filter(|n| *n <= MAX_SPEC_MS)
                .map(|n| n as u32)
                .ok_or(Malformed(k))
        };
        let shards = int32(&v, "shards")?;
        let l = v
            .get("session_start_limit")
            .filter(|l| l.is_object())
            .ok_or(Malformed("session_start_limit"))?;
        let limit = SessionStartLimit {
            total: int32(l, "total")?,
            remaining: int32(l, "remaining")?,
            reset_after: Duration::from_millis(u64::from(int32(l, "reset_after")?)),
            max_concurrency: int32(l, "max_concurrency")?,
        };
        if limit.total == 0 {
            return Err(Malformed("total is 0"));
        }
        if limit.remaining > limit.total {
            return Err(Malformed("remaining above total"));
        }
        if limit.max_concurrency == 0 {
            return Err(Malformed("max_concurrency is 0"));
        }
        Ok(GatewayBot { url, shards, limit })
    }
}

/// Judge one complete answer of `GET /gateway/bot`: 200 with Discord's body is the figure; a
/// 429 says how long to wait before asking again; anything else is refused. Pure.
pub fn judge_gateway_bot(
    status: u16,
    retry_after_header: Option<&str>,
    body: &[u8],
) -> Result<GatewayBot, SessionLimitRefusal> {
    let json = || serde_json::from_slice::<Value>(body).ok();
    match status {
        200 => GatewayBot::parse(body),
        429 => {
            let body_secs = json()
                .as_ref()
                .and_then(|v| v.get("retry_after"))
                .and_then(Value::as_f64);
            let header_secs = retry_after_header.and_then(|s| s.trim().parse::<f64>().ok());
            let secs = body_secs.or(header_secs).unwrap_or(1.0);
            let secs = if secs.is_finite() {
                secs.clamp(0.0, MAX_SPEC_MS as f64 / 1000.0)
            } else {
                1.0
            };
            Err(SessionLimitRefusal::RateLimited {
                retry_after: Duration::from_secs_f64(secs),
            })
        }
        status => Err(SessionLimitRefusal::Status {
            status,
            code: json()
                .as_ref()
                .and_then(|v| v.get("code"))
                .and_then(Value::as_u64),
        }),
    }
}

/// What the client budgets its IDENTIFYs by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IdentifyBasis {
    /// The conservative [`IdentifyAllowance`]: no `GET /gateway/bot` is configured, or it has
    /// not been read yet.
    Allowance,
    /// Discord's figure: `remaining` less the client's IDENTIFYs since the read, and
    /// `reset_after` from now.
    Discord(SessionStartLimit),
    /// Discord's figure could not be read: the conservative allowance, and why.
    Fallback(SessionLimitRefusal),
}

/// Why the next IDENTIFY must wait, and for how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hold {
    /// Discord's `remaining` is spent: wait until its window resets.
    SessionStartLimit(Duration),
    /// The conservative allowance is spent: wait until the oldest counted IDENTIFY leaves the
    /// window.
    Allowance(Duration),
    /// The last IDENTIFY was less than the allowance's spacing ago.
    Spacing(Duration),
}

impl Hold {
    /// How long.
    pub fn wait(self) -> Duration {
        match self {
            Hold::SessionStartLimit(d) | Hold::Allowance(d) | Hold::Spacing(d) => d,
        }
    }

    /// The reason the client reports (`GatewayEvent::Reconnecting`).
    pub fn reason(self) -> &'static str {
        match self {
            Hold::SessionStartLimit(_) => "session-start-limit",
            Hold::Allowance(_) => "identify-budget",
            Hold::Spacing(_) => "identify-spacing",
        }
    }
}

/// Discord's figure as the client keeps it: what was read, and the client's own IDENTIFYs
/// since.
#[derive(Clone, Copy, Debug)]
struct Figure {
    read: SessionStartLimit,
    /// `read.remaining` less the client's IDENTIFYs since.
    remaining: u32,
    /// When `remaining` is back to `total` (the read's time plus `reset_after`).
    resets_at: Instant,
    identified_since_read: u32,
}

/// The client's IDENTIFY budget: Discord's figure when it has one, its own count, and its
/// backoff for failing sessions.
#[derive(Debug)]
pub struct IdentifyBudget {
    allowance: IdentifyAllowance,
    sent: VecDeque<Instant>,
    last: Option<Instant>,
    failures: u32,
    figure: Option<Figure>,
    /// A refused read: no other before this instant.
    read_again_at: Option<Instant>,
}

impl IdentifyBudget {
    pub fn new(allowance: IdentifyAllowance) -> Self {
        Self {
            allowance,
            sent: VecDeque::new(),
            last: None,
            failures: 0,
            figure: None,
            read_again_at: None,
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

    /// Discord's figure while it holds (before its reset).
    fn live_figure(&self, now: Instant) -> Option<&Figure> {
        self.figure.as_ref().filter(|f| now < f.resets_at)
    }

    /// Discord's figure, read at `now`: from here the budget goes by it (one with none
    /// remaining for at least [`MIN_SPENT_HOLD`]).
    pub fn observe(&mut self, limit: SessionStartLimit, now: Instant) {
        let hold = if limit.remaining == 0 {
            limit.reset_after.max(MIN_SPENT_HOLD)
        } else {
            limit.reset_after
        };
        self.figure = Some(Figure {
            read: limit,
            remaining: limit.remaining,
            resets_at: now + hold,
            identified_since_read: 0,
        });
        self.read_again_at = None;
    }

    /// A read of Discord's figure was refused at `now`: the conservative allowance governs
    /// until a read succeeds (a figure still before its reset is kept: it is still Discord's
    /// word), and none is tried before [`READ_RETRY`] — or a longer `retry_after` — has passed.
    pub fn read_refused(&mut self, refusal: &SessionLimitRefusal, now: Instant) {
        let wait = match refusal {
            SessionLimitRefusal::RateLimited { retry_after } => (*retry_after).max(READ_RETRY),
            _ => READ_RETRY,
        };
        self.read_again_at = Some(now + wait);
        if self.live_figure(now).is_none() {
            self.figure = None;
        }
    }

    /// Whether Discord's figure should be read before the next IDENTIFY at `now`: none yet,
    /// its window has reset, or a tenth or less remains and the client has identified since the
    /// last read. Never sooner than a refused read allows.
    pub fn wants_read(&self, now: Instant) -> bool {
        if self.read_again_at.is_some_and(|at| now < at) {
            return false;
        }
        match &self.figure {
            None => true,
            Some(f) if now >= f.resets_at => true,
            Some(f) => {
                let low = (f.read.total / LOW_REMAINING_DIVISOR).max(1);
                f.identified_since_read > 0 && f.remaining <= low
            }
        }
    }

    /// Why the next IDENTIFY must wait at `now`, if it must: Discord's figure while it holds
    /// (nothing while `remaining` is 0), else the conservative allowance; then the spacing.
    pub fn hold(&mut self, now: Instant) -> Option<Hold> {
        self.prune(now);
        match self.live_figure(now) {
            Some(f) if f.remaining == 0 => {
                return Some(Hold::SessionStartLimit(
                    f.resets_at.saturating_duration_since(now),
                ));
            }
            Some(_) => {}
            None => {
                if self.sent.len() >= self.allowance.per_window as usize
                    && let Some(oldest) = self.sent.front()
                {
                    let wait = (*oldest + self.allowance.window).saturating_duration_since(now);
                    if !wait.is_zero() {
                        return Some(Hold::Allowance(wait));
                    }
                }
            }
        }
        let spacing = self
            .last
            .map(|t| (t + self.allowance.spacing).saturating_duration_since(now))
            .unwrap_or_default();
        (!spacing.is_zero()).then_some(Hold::Spacing(spacing))
    }

    /// How long the next IDENTIFY must wait at `now` ([`Self::hold`]; zero: it may go).
    pub fn wait_for_allowance(&mut self, now: Instant) -> Duration {
        self.hold(now).map_or(Duration::ZERO, Hold::wait)
    }

    /// Counts an IDENTIFY sent at `now`: in the client's own window, and against Discord's
    /// `remaining` while its figure holds.
    pub fn identified(&mut self, now: Instant) {
        self.prune(now);
        self.sent.push_back(now);
        self.last = Some(now);
        if let Some(f) = self.figure.as_mut().filter(|f| now < f.resets_at) {
            f.remaining = f.remaining.saturating_sub(1);
            f.identified_since_read = f.identified_since_read.saturating_add(1);
        }
    }

    /// Discord's figure as the budget sees it at `now` (its `remaining` less the client's
    /// IDENTIFYs since the read, `reset_after` from now), while it holds.
    pub fn figure(&self, now: Instant) -> Option<SessionStartLimit> {
        self.live_figure(now).map(|f| SessionStartLimit {
            remaining: f.remaining,
            reset_after: f.resets_at.saturating_duration_since(now),
            ..f.read
        })
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
            spacing: Duration::ZERO,
        })
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn limit(total: u32, remaining: u32, reset_after_s: u64) -> SessionStartLimit {
        SessionStartLimit {
            total,
            remaining,
            reset_after: secs(reset_after_s),
            max_concurrency: 1,
        }
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

    #[test]
    fn a_restart_with_remaining_spent_waits_for_discords_reset() {
        // A fresh process: its own count is empty, so the conservative allowance alone would
        // identify at once. Discord says an earlier process spent the window.
        let mut b = IdentifyBudget::new(IdentifyAllowance::default());
        let t0 = Instant::now();
        assert!(b.wants_read(t0), "read before the first IDENTIFY");
        b.observe(limit(1000, 0, 3 * 3600), t0);
        assert!(!b.wants_read(t0));
        let now = t0 + secs(60);
        assert_eq!(
            b.hold(now),
            Some(Hold::SessionStartLimit(secs(3 * 3600 - 60)))
        );
        assert_eq!(b.hold(now).map(Hold::reason), Some("session-start-limit"));
        // At the reset the figure no longer holds: read again before identifying.
        let reset = t0 + secs(3 * 3600);
        assert!(b.wants_read(reset));
        b.observe(limit(1000, 1000, 24 * 3600), reset);
        assert_eq!(b.hold(reset), None);
    }

    #[test]
    fn identifies_never_exceed_discords_remaining() {
        let mut b = budget(900, 86_400);
        let t0 = Instant::now();
        b.observe(limit(1000, 3, 100), t0);
        for k in 0..3 {
            let t = t0 + secs(k);
            assert_eq!(b.hold(t), None, "identify {k}");
            b.identified(t);
        }
        assert_eq!(b.figure(t0 + secs(3)).map(|f| f.remaining), Some(0));
        assert_eq!(
            b.hold(t0 + secs(3)),
            Some(Hold::SessionStartLimit(secs(97)))
        );
        // A read that still says 0 (Discord's clock is a little behind ours) waits again —
        // at least MIN_SPENT_HOLD, however soon it says the reset is.
        b.observe(limit(1000, 0, 2), t0 + secs(100));
        assert_eq!(
            b.hold(t0 + secs(100)),
            Some(Hold::SessionStartLimit(secs(2)))
        );
        b.observe(limit(1000, 0, 0), t0 + secs(102));
        assert_eq!(
            b.hold(t0 + secs(102)),
            Some(Hold::SessionStartLimit(MIN_SPENT_HOLD))
        );
        assert!(!b.wants_read(t0 + secs(102)));
    }

    #[test]
    fn the_figure_is_read_first_when_low_and_after_its_reset() {
        let mut b = budget(900, 86_400);
        let t0 = Instant::now();
        assert!(b.wants_read(t0));
        b.observe(limit(100, 12, 1000), t0);
        // Plenty left: no read before the next IDENTIFY.
        assert!(!b.wants_read(t0));
        b.identified(t0);
        assert!(!b.wants_read(t0), "11 left of 100");
        b.identified(t0);
        // A tenth or less left, and the client identified since the read: read again.
        assert!(b.wants_read(t0), "10 left of 100");
        b.observe(limit(100, 7, 990), t0 + secs(10));
        assert!(!b.wants_read(t0 + secs(10)), "nothing identified since");
        assert_eq!(b.figure(t0 + secs(10)).map(|f| f.remaining), Some(7));
        b.identified(t0 + secs(10));
        assert!(b.wants_read(t0 + secs(11)));
        // Past the reset, read again whatever was left.
        let mut b = budget(900, 86_400);
        b.observe(limit(100, 90, 50), t0);
        assert!(!b.wants_read(t0 + secs(49)));
        assert!(b.wants_read(t0 + secs(50)));
    }

    #[test]
    fn a_refused_read_falls_back_to_the_allowance_and_is_retried_later() {
        let mut b = budget(2, 1000);
        let t0 = Instant::now();
        let refusal = SessionLimitRefusal::Status {
            status: 401,
            code: Some(0),
        };
        b.read_refused(&refusal, t0);
        assert!(!b.wants_read(t0 + READ_RETRY - secs(1)));
        assert!(b.wants_read(t0 + READ_RETRY));
        // The conservative allowance governs: 2 per 1,000 s.
        b.identified(t0);
        b.identified(t0 + secs(1));
        assert_eq!(b.hold(t0 + secs(2)), Some(Hold::Allowance(secs(998))));
        // A 429's longer retry_after is waited out before the next read.
        let limited = SessionLimitRefusal::RateLimited {
            retry_after: secs(300),
        };
        b.read_refused(&limited, t0);
        assert!(!b.wants_read(t0 + secs(299)));
        assert!(b.wants_read(t0 + secs(300)));
        // A figure still before its reset survives a refused read; a stale one does not.
        let mut b = budget(900, 86_400);
        b.observe(limit(1000, 0, 100), t0);
        b.read_refused(&refusal, t0 + secs(10));
        assert_eq!(
            b.hold(t0 + secs(10)),
            Some(Hold::SessionStartLimit(secs(90)))
        );
        b.read_refused(&refusal, t0 + secs(100));
        assert_eq!(b.figure(t0 + secs(100)), None);
        assert_eq!(b.hold(t0 + secs(100)), None);
    }

    #[test]
    fn identifies_are_spaced_by_discords_rate() {
        let mut b = IdentifyBudget::new(IdentifyAllowance::default());
        let t0 = Instant::now();
        b.observe(limit(1000, 1000, 86_400), t0);
        assert_eq!(b.hold(t0), None);
        b.identified(t0);
        assert_eq!(b.hold(t0 + secs(1)), Some(Hold::Spacing(secs(4))));
        assert_eq!(b.hold(t0 + IDENTIFY_SPACING), None);
    }

    #[test]
    fn gateway_bot_answers() {
        let ok = r#"{"url":"wss://gateway.discord.gg","shards":1,"session_start_limit":{"total":1000,"remaining":998,"reset_after":84686789,"max_concurrency":1}}"#;
        let cases: [(u16, Option<&str>, &str); 12] = [
            (200, None, ok),
            (200, None, r#"{"url":"wss://g","shards":1}"#),
            (200, None, r#"{"shards":1,"session_start_limit":{}}"#),
            (
                200,
                None,
                r#"{"url":"wss://g","shards":1,"session_start_limit":{"total":1000,"remaining":-1,"reset_after":1,"max_concurrency":1}}"#,
            ),
            (
                200,
                None,
                r#"{"url":"wss://g","shards":1,"session_start_limit":{"total":10,"remaining":11,"reset_after":1,"max_concurrency":1}}"#,
            ),
            (
                200,
                None,
                r#"{"url":"wss://g","shards":1,"session_start_limit":{"total":10,"remaining":1,"reset_after":2147483648,"max_concurrency":1}}"#,
            ),
            (
                200,
                None,
                r#"{"url":"wss://g","shards":1,"session_start_limit":{"total":10,"remaining":1,"reset_after":1.5,"max_concurrency":1}}"#,
            ),
            (200, None, "not json"),
            (401, None, r#"{"message":"401: Unauthorized","code":0}"#),
            (
                429,
                None,
                r#"{"message":"You are being rate limited.","retry_after":2.5,"global":false}"#,
            ),
            (429, Some("7"), ""),
            (502, None, ""),
        ];
        let out: String = cases
            .iter()
            .map(|(status, header, body)| {
                let verdict = match judge_gateway_bot(*status, *header, body.as_bytes()) {
                    Ok(g) => format!("{:?} url={} shards={}", g.limit, g.url, g.shards),
                    Err(e) => format!("{e} ({e:?})"),
                };
                format!("{status} {verdict}\n")
            })
            .collect();
        expect_test::expect![[r#"
            200 SessionStartLimit { total: 1000, remaining: 998, reset_after: 84686.789s, max_concurrency: 1 } url=wss://gateway.discord.gg shards=1
            200 discord/gateway-bot-malformed: session_start_limit (Malformed("session_start_limit"))
            200 discord/gateway-bot-malformed: url (Malformed("url"))
            200 discord/gateway-bot-malformed: remaining (Malformed("remaining"))
            200 discord/gateway-bot-malformed: remaining above total (Malformed("remaining above total"))
            200 discord/gateway-bot-malformed: reset_after (Malformed("reset_after"))
            200 discord/gateway-bot-malformed: reset_after (Malformed("reset_after"))
            200 discord/gateway-bot-malformed: not json (Malformed("not json"))
            401 discord/gateway-bot-status-401 (Status { status: 401, code: Some(0) })
            429 discord/gateway-bot-rate-limited (RateLimited { retry_after: 2.5s })
            429 discord/gateway-bot-rate-limited (RateLimited { retry_after: 7s })
            502 discord/gateway-bot-status-502 (Status { status: 502, code: None })
        "#]].assert_eq(&out);
    }
}
