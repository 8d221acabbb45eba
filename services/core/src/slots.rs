//! Turn slots: the bound on admitted turns whose answer is not yet delivered.
//!
//! A turn takes a slot once ward admitted it (an event over the admitted rate is refused
//! before, at arrival speed, and never waits here), and gives it back when it ends without an
//! intent or when its first intent settles (any outcome: after that the reply is out of core's
//! hands). Under overload the admitted turns thus wait before they start rather than after
//! they commit: what is committed is delivered promptly instead of queueing behind a crowd of
//! newer turns competing for the same cores.
//!
//! A held slot is given back after [`MAX_HOLD`] even if no settlement came (egress-discord
//! down, or core restarted between commit and settlement): the bound is backpressure, never
//! a reason to stop admitting for good.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Turns in flight at once. A turn mostly waits (ward, grounding, the model, delivery); at the
/// admitted rate about a dozen are in flight, so this bound only bites under overload, and it
/// is wide enough that model-backed turns (seconds each) still run many at once.
pub const MAX_TURNS: usize = 64;
/// How long a committed intent may hold its slot without a settlement.
pub const MAX_HOLD: Duration = Duration::from_secs(30);

/// One turn's share of the bound; dropping it gives the slot back.
#[derive(Debug)]
pub struct TurnSlot {
    _permit: OwnedSemaphorePermit,
}

/// The slots and the intents holding one until they settle.
#[derive(Debug)]
pub struct TurnSlots {
    free: Arc<Semaphore>,
    held: Mutex<HashMap<String, (Instant, TurnSlot)>>,
    max_hold: Duration,
}

impl TurnSlots {
    pub fn new(n: usize, max_hold: Duration) -> Self {
        Self {
            free: Arc::new(Semaphore::new(n)),
            held: Mutex::default(),
            max_hold,
        }
    }

    /// Waits for a slot. Slots held past `max_hold` are given back while waiting.
    pub async fn acquire(&self) -> TurnSlot {
        loop {
            if let Ok(p) = self.free.clone().try_acquire_owned() {
                return TurnSlot { _permit: p };
            }
            self.expire();
            let wait = self.max_hold.max(Duration::from_millis(100));
            if let Ok(p) = tokio::time::timeout(wait, self.free.clone().acquire_owned()).await {
                return TurnSlot {
                    _permit: p.expect("turn slots are never closed"),
                };
            }
        }
    }

    /// Keeps `slot` until `intent` settles (or `max_hold` passes).
    pub fn hold_until_settled(&self, intent: &str, slot: TurnSlot) {
        self.lock()
            .insert(intent.to_owned(), (Instant::now(), slot));
    }

    /// `intent` settled: its slot, if it holds one, is free again.
    pub fn settled(&self, intent: &str) {
        self.lock().remove(intent);
    }

    /// Slots free now.
    #[cfg(test)]
    pub fn available(&self) -> usize {
        self.free.available_permits()
    }

    fn expire(&self) {
        let now = Instant::now();
        self.lock()
            .retain(|_, (since, _)| now.duration_since(*since) < self.max_hold);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, TurnSlot)>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn past_the_bound_a_turn_waits_until_one_settles() {
        let slots = Arc::new(TurnSlots::new(2, Duration::from_secs(3600)));
        let a = slots.acquire().await;
        let b = slots.acquire().await;
        slots.hold_until_settled("int_a", a);
        slots.hold_until_settled("int_b", b);
        assert_eq!(slots.available(), 0);
        let waiting = tokio::spawn({
            let slots = slots.clone();
            async move { slots.acquire().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "no slot until an intent settles");
        slots.settled("int_unknown");
        tokio::task::yield_now().await;
        assert!(
            !waiting.is_finished(),
            "an intent that holds no slot frees none"
        );
        slots.settled("int_a");
        let c = waiting.await.expect("acquired once int_a settled");
        drop(c);
        assert_eq!(slots.available(), 1);
    }

    #[tokio::test]
    async fn a_turn_without_an_intent_gives_its_slot_back() {
        let slots = TurnSlots::new(1, Duration::from_secs(3600));
        drop(slots.acquire().await);
        assert_eq!(slots.available(), 1);
    }

    #[tokio::test]
    async fn a_waiting_turn_gets_a_slot_once_a_hold_goes_stale() {
        let slots = TurnSlots::new(1, Duration::from_millis(50));
        let a = slots.acquire().await;
        slots.hold_until_settled("int_lost", a);
        // Fresh when the wait starts, stale while it waits: the wait itself sweeps.
        let b = tokio::time::timeout(Duration::from_secs(30), slots.acquire())
            .await
            .expect("the wait sweeps stale holds");
        drop(b);
        assert_eq!(slots.available(), 1);
    }

    #[tokio::test]
    async fn a_slot_never_settled_is_given_back_after_max_hold() {
        let slots = TurnSlots::new(1, Duration::ZERO);
        let a = slots.acquire().await;
        slots.hold_until_settled("int_lost", a);
        assert_eq!(slots.available(), 0);
        // The next acquire finds none free, expires the stale hold and takes its slot.
        let b = tokio::time::timeout(Duration::from_secs(5), slots.acquire())
            .await
            .expect("a stale hold does not block admission for good");
        drop(b);
        assert_eq!(slots.available(), 1);
    }
}
