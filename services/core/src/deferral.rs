//! Deferred acknowledgement of `/ask` interactions.
//!
//! Discord takes an interaction's first response within 3 seconds, else the interaction is
//! unknown (10062) and the user sees "The application did not respond". An answer that is not
//! committed within `budget` of its admission (a slow model, a busy ward) is therefore
//! acknowledged first: the next claimer gets an [`Due`] instead of an intent, with an
//! EgressDecision bound to the token-free callback destination and the type-5 body, recorded on
//! the turn's run before it is handed out. The answer then becomes an edit of `@original`.
//!
//! Why not a ledger intent: the acknowledgement carries no content and is never resent; what
//! proves it landed is the answer's edit (Discord refuses an edit of a response that does not
//! exist with 10008, which the gate reads as "not accepted"). So the fast path — an answer
//! committed inside the budget, by far the common case — costs one map entry for the turn's
//! duration and no extra write, decision or request.
//!
//! Interaction work is **urgent**: a due acknowledgement, and an answer committed inside the
//! budget (it calls back, so it must be sent before the window closes). Every claim takes urgent
//! work before the oldest claimable intent, and a claimer that asks for interaction work only
//! (egress-discord's interaction lane) waits on its own wake-up, [`Deferrals::urgent`], so a gate
//! whose message workers are all held (rate limits, a slow Discord) still answers in time.
//!
//! The state is this process's memory: a core restart between the acknowledgement and the
//! answer's claim forgets it, and the answer goes out as a callback, which Discord refuses with
//! 40060 (UNKNOWN), and reconciliation reads the LOADING placeholder in `@original` and settles
//! it proved absent. Nothing is ever sent twice; that answer is not delivered.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reach_proto::core::v1::AdmitRequest;
use tokio::sync::Notify;

/// Default time from admission to the deferred acknowledgement: well inside Discord's 3 s,
/// leaving room for a claim wait and one round trip.
pub const DEFAULT_BUDGET: Duration = Duration::from_millis(1_500);
/// Discord's interaction token lifetime; nothing about an interaction is kept longer.
const TOKEN_LIFETIME: Duration = Duration::from_secs(15 * 60);

/// Where one interaction stands. Transitions are checked in [`Deferrals`]'s methods:
/// `Waiting → Deferring → Deferred | Refused`, `Waiting → (removed)` when the answer or the turn
/// comes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Admitted; no acknowledgement yet.
    Waiting,
    /// A claimer took it; its decision is being issued.
    Deferring,
    /// The acknowledgement's decision was handed out: the answer edits `@original`.
    Deferred,
    /// Ward refused the acknowledgement's decision: nothing was sent; the answer calls back.
    Refused,
}

#[derive(Debug)]
struct Entry {
    turn_id: String,
    application_id: String,
    sealed_token: Vec<u8>,
    admitted: Instant,
    /// The task's Sigil, once ward admitted the scope and the run began (a decision needs it).
    sigil_id: Option<String>,
    stage: Stage,
}

/// One interaction due for its acknowledgement.
#[derive(Debug, Clone)]
pub struct Due {
    pub interaction_id: String,
    pub turn_id: String,
    pub application_id: String,
    pub sealed_token: Vec<u8>,
    pub sigil_id: String,
}

/// How long a committed callback answer stays urgent: Discord's window, after which a callback
/// can no longer land and the intent waits its turn like any other.
const CALLBACK_WINDOW: Duration = Duration::from_secs(3);

/// The interactions of the turns running in this core.
#[derive(Debug)]
pub struct Deferrals {
    budget: Duration,
    /// The claimers' wake-up (the same one a committed intent rings).
    wake: Arc<Notify>,
    /// The interaction lane's wake-up: rung only for urgent work.
    urgent: Notify,
    entries: Mutex<HashMap<String, Entry>>,
    /// Intent ids of answers committed inside the budget (callbacks), oldest first, with when.
    answers: Mutex<VecDeque<(String, Instant)>>,
}

impl Deferrals {
    pub fn new(budget: Duration, wake: Arc<Notify>) -> Self {
        Self {
            budget,
            wake,
            urgent: Notify::new(),
            entries: Mutex::default(),
            answers: Mutex::default(),
        }
    }

    /// Rung when urgent work appears: a due acknowledgement or a committed callback answer.
    pub fn urgent(&self) -> &Notify {
        &self.urgent
    }

    /// An interaction's answer was committed unacknowledged (it calls back) as `intent_id`:
    /// claimed before older intents while Discord's window is open.
    pub fn answer_committed(&self, intent_id: &str) {
        let now = Instant::now();
        let mut answers = self.answers.lock().unwrap_or_else(|e| e.into_inner());
        // Answers nobody claimed in time leave here, so a gate that is down for long never
        // grows the list: it holds at most one window's answers.
        while answers
            .front()
            .is_some_and(|(_, at)| now.saturating_duration_since(*at) >= CALLBACK_WINDOW)
        {
            answers.pop_front();
        }
        answers.push_back((intent_id.to_owned(), now));
        drop(answers);
        self.urgent.notify_one();
    }

    /// Takes the oldest committed callback answer still inside Discord's window.
    pub fn take_answer(&self) -> Option<String> {
        self.take_answer_at(Instant::now())
    }

    fn take_answer_at(&self, now: Instant) -> Option<String> {
        let mut answers = self.answers.lock().unwrap_or_else(|e| e.into_inner());
        while let Some((id, at)) = answers.pop_front() {
            if now.saturating_duration_since(at) < CALLBACK_WINDOW {
                return Some(id);
            }
        }
        None
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Tracks an admitted interaction whose turn starts now; a message is not tracked. Rings a
    /// claimer when the budget runs out.
    pub fn admitted(self: &Arc<Self>, turn_id: &str, req: &AdmitRequest) {
        if req.event_kind != reach_discord::edge::EventKind::InteractionCreate.as_str()
            || req.sealed_interaction_token.is_empty()
        {
            return;
        }
        let now = Instant::now();
        let mut entries = self.lock();
        entries.retain(|_, e| now.duration_since(e.admitted) < TOKEN_LIFETIME);
        entries
            .entry(req.external_event_id.clone())
            .or_insert_with(|| Entry {
                turn_id: turn_id.to_owned(),
                application_id: req.application_id.clone(),
                sealed_token: req.sealed_interaction_token.clone(),
                admitted: now,
                sigil_id: None,
                stage: Stage::Waiting,
            });
        drop(entries);
        let (me, budget) = (Arc::clone(self), self.budget);
        tokio::spawn(async move {
            tokio::time::sleep(budget).await;
            me.wake.notify_one();
            me.urgent.notify_one();
        });
    }

    /// The turn's Sigil and run exist: from now on an acknowledgement can be decided.
    pub fn sigil_ready(&self, interaction_id: &str, sigil_id: &str) {
        if let Some(e) = self.lock().get_mut(interaction_id) {
            e.sigil_id = Some(sigil_id.to_owned());
        }
    }

    /// The turn's pipeline ended (its answer committed, or nothing to send). An interaction not
    /// acknowledged by now never will be: the committed answer is claimed at once and calls
    /// back; a turn without an answer must not leave a LOADING placeholder.
    pub fn turn_ended(&self, interaction_id: &str) {
        let mut entries = self.lock();
        if entries
            .get(interaction_id)
            .is_some_and(|e| e.stage == Stage::Waiting)
        {
            entries.remove(interaction_id);
        }
    }

    /// Takes the oldest interaction past its budget (`Waiting → Deferring`).
    pub fn take_due(&self) -> Option<Due> {
        let now = Instant::now();
        let mut entries = self.lock();
        let (id, e) = entries
            .iter_mut()
            .filter(|(_, e)| {
                e.stage == Stage::Waiting
                    && e.sigil_id.is_some()
                    && now.duration_since(e.admitted) >= self.budget
            })
            .min_by_key(|(_, e)| e.admitted)?;
        e.stage = Stage::Deferring;
        Some(Due {
            interaction_id: id.clone(),
            turn_id: e.turn_id.clone(),
            application_id: e.application_id.clone(),
            sealed_token: e.sealed_token.clone(),
            sigil_id: e.sigil_id.clone().unwrap_or_default(),
        })
    }

    /// The acknowledgement's decision was handed out (`Deferring → Deferred`) or refused
    /// (`Deferring → Refused`). The sealed token is no longer needed either way.
    pub fn decided(&self, interaction_id: &str, handed_out: bool) {
        if let Some(e) = self.lock().get_mut(interaction_id)
            && e.stage == Stage::Deferring
        {
            e.stage = if handed_out {
                Stage::Deferred
            } else {
                Stage::Refused
            };
            e.sealed_token = Vec::new();
        }
    }

    /// Whether the answer to `interaction_id` edits `@original` (it was, or is being,
    /// acknowledged) rather than calling back. Asked at every claim of the answer, so a reclaim
    /// sends the same form; an interaction answered by its callback is forgotten here.
    pub fn answer_edits(&self, interaction_id: &str) -> bool {
        let mut entries = self.lock();
        match entries.get(interaction_id).map(|e| e.stage) {
            Some(Stage::Deferring | Stage::Deferred) => true,
            Some(Stage::Waiting | Stage::Refused) => {
                entries.remove(interaction_id);
                false
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(id: &str) -> AdmitRequest {
        AdmitRequest {
            event_kind: reach_discord::edge::EventKind::InteractionCreate
                .as_str()
                .into(),
            external_event_id: id.into(),
            application_id: "1".into(),
            sealed_interaction_token: vec![1, 2, 3],
            ..Default::default()
        }
    }

    fn deferrals(budget: Duration) -> Arc<Deferrals> {
        Arc::new(Deferrals::new(budget, Arc::default()))
    }

    #[tokio::test]
    async fn an_interaction_is_due_after_its_budget_and_once_its_sigil_exists() {
        let d = deferrals(Duration::ZERO);
        d.admitted("turn_1", &ask("11"));
        assert!(d.take_due().is_none(), "no Sigil yet: no decision possible");
        d.sigil_ready("11", "sig_1");
        let due = d.take_due().expect("due");
        assert_eq!(
            (due.turn_id.as_str(), due.sigil_id.as_str()),
            ("turn_1", "sig_1")
        );
        assert!(d.take_due().is_none(), "taken once");
        assert!(d.answer_edits("11"), "being acknowledged: the answer edits");
        d.decided("11", true);
        assert!(d.answer_edits("11"));
        assert!(d.answer_edits("11"), "a reclaim sends the same form");
    }

    #[tokio::test]
    async fn an_answer_before_the_budget_calls_back_and_is_never_deferred() {
        let d = deferrals(Duration::from_secs(60));
        d.admitted("turn_1", &ask("11"));
        d.sigil_ready("11", "sig_1");
        assert!(d.take_due().is_none(), "inside the budget");
        assert!(!d.answer_edits("11"));
        assert!(d.take_due().is_none());
    }

    #[tokio::test]
    async fn a_turn_that_ended_is_not_deferred_and_a_refusal_calls_back() {
        let d = deferrals(Duration::ZERO);
        d.admitted("turn_1", &ask("11"));
        d.sigil_ready("11", "sig_1");
        d.turn_ended("11");
        assert!(
            d.take_due().is_none(),
            "no LOADING placeholder for a finished turn"
        );
        d.admitted("turn_2", &ask("12"));
        d.sigil_ready("12", "sig_2");
        assert!(d.take_due().is_some());
        d.decided("12", false);
        d.turn_ended("12");
        assert!(
            !d.answer_edits("12"),
            "ward refused the acknowledgement: call back"
        );
    }

    #[tokio::test]
    async fn committed_callback_answers_are_taken_oldest_first_and_ring_the_lane() {
        let d = deferrals(Duration::from_secs(60));
        assert!(d.take_answer().is_none());
        d.answer_committed("int_1");
        d.answer_committed("int_2");
        // The lane's wake-up was rung (a stored permit: it returns at once).
        tokio::time::timeout(Duration::from_secs(1), d.urgent().notified())
            .await
            .expect("the interaction lane is woken");
        assert_eq!(d.take_answer().as_deref(), Some("int_1"));
        assert_eq!(d.take_answer().as_deref(), Some("int_2"));
        assert!(d.take_answer().is_none(), "each taken once");
    }

    #[tokio::test]
    async fn a_callback_answer_past_discords_window_is_no_longer_urgent() {
        let d = deferrals(Duration::from_secs(60));
        d.answer_committed("int_late");
        let later = Instant::now() + CALLBACK_WINDOW;
        assert!(d.take_answer_at(later).is_none(), "dropped, not handed out");
        d.answer_committed("int_fresh");
        assert_eq!(d.take_answer().as_deref(), Some("int_fresh"));
    }

    #[tokio::test]
    async fn a_message_is_not_tracked() {
        let d = deferrals(Duration::ZERO);
        let mut req = ask("11");
        req.event_kind = reach_discord::edge::EventKind::MessageCreate
            .as_str()
            .into();
        d.admitted("turn_1", &req);
        d.sigil_ready("11", "sig_1");
        assert!(d.take_due().is_none());
    }
}
