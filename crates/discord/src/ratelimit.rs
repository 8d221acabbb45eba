//! Discord's rate limits as the REST adapter keeps them: what each response's bucket headers
//! (`X-RateLimit-Remaining`, `X-RateLimit-Reset-After`) and each 429 (`retry_after`, `global`)
//! said, so a request Discord would refuse is not sent — each one would be another 429, and
//! those count toward Discord's invalid-request ban. Requests on one route go one at a time
//! ([`RateLimits::turn`]); [`RateLimits::wait_before`] is how long a route must still wait: a
//! short wait is waited out before sending, a longer one is answered rate-limited without
//! sending, and the caller waits that out exactly.
//!
//! A route is keyed by its method and exact path, digested (an interaction's path carries its
//! token; the key does not). Discord's buckets group routes by their major parameter (a
//! channel, a webhook); an exact path is the same or finer, so a wait is never missed for a
//! path that was answered, only possibly for a sibling path sharing its bucket.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::HeaderMap;
use tokio::time::Instant;

/// The longest wait a header may ask for (a hostile value cannot park a route for ever).
const MAX_WAIT: Duration = Duration::from_secs(3600);

/// A route: method and exact path, digested.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Route(reach_digest::Sha256Digest);

impl Route {
    pub fn of(method: &http::Method, path: &str) -> Self {
        Route(reach_digest::Sha256Digest::of(format!("{method} {path}")))
    }
}

#[derive(Debug, Default)]
struct Limits {
    /// Per route: no request before this instant (its bucket is spent until its reset).
    routes: HashMap<Route, Instant>,
    /// Every bot-authorized route: no request before this instant (a global 429).
    global_until: Option<Instant>,
}

/// What the adapter has learned of Discord's limits; shared by every request of one client.
#[derive(Debug, Default)]
pub struct RateLimits {
    limits: Mutex<Limits>,
    /// One request in flight per route, as Discord's own libraries queue a bucket: the next
    /// request on a route is sent only once the last one's headers are known.
    queues: Mutex<HashMap<Route, Arc<tokio::sync::Mutex<()>>>>,
}

/// A wait of `s` seconds, bounded by [`MAX_WAIT`]; `None` for a negative or non-finite value.
fn bounded(s: f64) -> Option<Duration> {
    (s.is_finite() && s >= 0.0).then(|| Duration::from_secs_f64(s.min(MAX_WAIT.as_secs_f64())))
}

fn seconds(headers: &HeaderMap, name: &str) -> Option<Duration> {
    bounded(headers.get(name)?.to_str().ok()?.trim().parse().ok()?)
}

impl RateLimits {
    fn lock(&self) -> std::sync::MutexGuard<'_, Limits> {
        self.limits.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for `route`'s turn: held until the request is answered (drop the guard then).
    pub async fn turn(&self, route: &Route) -> tokio::sync::OwnedMutexGuard<()> {
        let queue = {
            let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(queues.entry(route.clone()).or_default())
        };
        queue.lock_owned().await
    }

    /// How long a request on `route` must still wait at `now` (zero: send it). `global`: the
    /// route counts toward the bot's global limit (interaction webhooks do not).
    pub fn wait_before(&self, route: &Route, global: bool, now: Instant) -> Duration {
        let limits = self.lock();
        let until = limits.routes.get(route).copied();
        let global_until = limits.global_until.filter(|_| global);
        [until, global_until]
            .into_iter()
            .flatten()
            .map(|t| t.saturating_duration_since(now))
            .max()
            .unwrap_or(Duration::ZERO)
    }

    /// Learns from one response on `route` at `now`: a spent bucket
    /// (`X-RateLimit-Remaining: 0`) waits `X-RateLimit-Reset-After`; a 429 waits its
    /// `retry_after` (`body_retry_after`, else `Retry-After`), on every route when global.
    pub fn observe(
        &self,
        route: &Route,
        status: u16,
        headers: &HeaderMap,
        body_retry_after: Option<f64>,
        body_global: bool,
        now: Instant,
    ) {
        let mut limits = self.lock();
        let remaining = headers
            .get("x-ratelimit-remaining")
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.trim().parse::<u64>().ok());
        let reset_after = seconds(headers, "x-ratelimit-reset-after");
        if status == 429 {
            let wait = body_retry_after
                .and_then(bounded)
                .or_else(|| seconds(headers, "retry-after"))
                .or(reset_after)
                .unwrap_or(Duration::from_secs(1));
            let global = body_global
                || headers
                    .get("x-ratelimit-global")
                    .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"true"));
            if global {
                limits.global_until = Some(now + wait);
            } else {
                limits.routes.insert(route.clone(), now + wait);
            }
            return;
        }
        match (remaining, reset_after) {
            (Some(0), Some(after)) => {
                limits.routes.insert(route.clone(), now + after);
            }
            (Some(_), _) => {
                limits.routes.remove(route);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn a_spent_bucket_waits_for_its_reset_and_only_its_route() {
        let l = RateLimits::default();
        let now = Instant::now();
        let a = Route::of(&http::Method::POST, "/channels/1/messages");
        let b = Route::of(&http::Method::POST, "/channels/2/messages");
        let spent = headers(&[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset-after", "1.5"),
        ]);
        l.observe(&a, 200, &spent, None, false, now);
        assert_eq!(l.wait_before(&a, true, now), Duration::from_millis(1500));
        assert_eq!(l.wait_before(&b, true, now), Duration::ZERO);
        let later = now + Duration::from_secs(2);
        assert_eq!(l.wait_before(&a, true, later), Duration::ZERO);
        // A response with room left clears the wait.
        l.observe(
            &a,
            200,
            &headers(&[("x-ratelimit-remaining", "3")]),
            None,
            false,
            now,
        );
        assert_eq!(l.wait_before(&a, true, now), Duration::ZERO);
    }

    #[test]
    fn a_global_429_holds_every_counted_route_and_a_hostile_value_is_bounded() {
        let l = RateLimits::default();
        let now = Instant::now();
        let a = Route::of(&http::Method::POST, "/channels/1/messages");
        let b = Route::of(&http::Method::GET, "/channels/2/messages");
        l.observe(&a, 429, &HeaderMap::new(), Some(2.0), true, now);
        assert_eq!(l.wait_before(&b, true, now), Duration::from_secs(2));
        assert_eq!(
            l.wait_before(&b, false, now),
            Duration::ZERO,
            "not counted globally"
        );
        l.observe(&a, 429, &HeaderMap::new(), Some(1e300), false, now);
        assert_eq!(l.wait_before(&a, true, now), MAX_WAIT);
        l.observe(&b, 429, &headers(&[("retry-after", "7")]), None, false, now);
        assert_eq!(l.wait_before(&b, false, now), Duration::from_secs(7));
    }
}
