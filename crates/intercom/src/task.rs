//! One outbound task as a value: its fixed envelope, its phase, and the evidence trail of every
//! transition. Also the pure classification of what a peer answered, so every mapping is
//! testable without a network.

use std::time::Duration;

use reach_clock::UnixMillis;
use reach_digest::Sha256Digest;

use crate::decision::DecisionId;
use crate::refusal::IntercomRefusal;
use crate::state::{Phase, StateMeaning, meaning};
use crate::wire::{
    CancelTaskRequest, ERROR_TASK_NOT_FOUND, JsonRpcRequest, METHOD_CANCEL_TASK, METHOD_GET_TASK,
    METHOD_SEND_MESSAGE, Message, Part, Role, RpcAnswer, SendMessageConfiguration,
    SendMessageRequest, SendMessageResponse, Task, TaskState, parse_response,
};

/// Longest id Intercom accepts (task, message, context).
pub const MAX_ID_BYTES: usize = 128;

/// How long and how often a parked task is polled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollBudget {
    /// GetTask requests at most (each under its own decision).
    pub max_polls: u32,
    /// Pause between polls.
    pub interval: Duration,
}

/// How long before its deadline a task's last poll goes out: the pacing never waits past
/// `deadline - FINAL_POLL_LEAD`, so a task the peer finishes before then is seen by a poll
/// at most one interval later, the last one just before the deadline settles it EXPIRED.
pub const FINAL_POLL_LEAD: Duration = Duration::from_secs(1);

/// The default local deadline of an operator task (core's `settings.intercom.deadline_secs`):
/// ward's default task time budget, so the run's Sigil outlives the task.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(120);

/// Decisions one task spends besides its polls: the send, and the `CancelTask` of a task the
/// peer leaves waiting for input.
pub const DECISIONS_BESIDES_POLLS: u32 = 2;

impl PollBudget {
    /// The default poll budget (core's `settings.intercom`): per request two polls, then the
    /// Stasis polls on at the same pace until the deadline.
    ///
    /// Sized against ward's default task budgets (eight decisions per run, four live at once,
    /// each living 30 s) and [`DEFAULT_DEADLINE`]: at a 26 s interval the pacing makes six
    /// polls over 120 s (at 6.5, 19.5, 45.5, 71.5, 97.5 and 119 s), so the send, six polls
    /// and a `CancelTask` spend exactly eight decisions and at most four live in any 30 s;
    /// every gap is at most one interval, so a task the peer finishes before its deadline is
    /// adopted at most 26 s after it finished. A shorter interval would spend the run's
    /// budget before the deadline (issue #33: ward's `decision/over-budget` then left a
    /// finished task unread for half a minute). `tests::the_default_budget_fits_wards_defaults`
    /// checks it against `reach_ward_desk`'s own defaults.
    pub const DEFAULT: PollBudget = PollBudget {
        max_polls: 2,
        interval: Duration::from_secs(26),
    };

    /// The pause before GetTask number `n` (1-based): a quarter of the interval, then half,
    /// then the interval, and never past [`FINAL_POLL_LEAD`] before the deadline
    /// (`until_deadline`), so one last poll goes out just before it; inside that lead the
    /// pause runs to the deadline. The driver counts the first poll's pause from the peer's
    /// answer to the send and each later one from when the previous poll went out, so a slow
    /// answer does not stretch the gap. A peer that answers at once is not asked again at once
    /// (issue #33: the first poll went out immediately and three quick polls spent the run's
    /// decision budget); the backoff is bounded by the interval so a task that finishes is
    /// seen by the next poll, which goes out at most one interval after the last.
    pub fn pause_before(&self, n: u32, until_deadline: Duration) -> Duration {
        let pause = match n {
            0 | 1 => self.interval / 4,
            2 => self.interval / 2,
            _ => self.interval,
        };
        if until_deadline <= FINAL_POLL_LEAD {
            return until_deadline;
        }
        pause.min(until_deadline - FINAL_POLL_LEAD)
    }

    /// When each poll of a task that stays live goes out over `life` (its deadline, counted
    /// from the send's answer), by [`PollBudget::pause_before`]: the pacing as a schedule, for
    /// sizing a budget and for the bench.
    pub fn schedule(&self, life: Duration) -> Vec<Duration> {
        let mut at = Duration::ZERO;
        let mut polls = Vec::new();
        loop {
            let n = u32::try_from(polls.len())
                .unwrap_or(u32::MAX)
                .saturating_add(1);
            at += self.pause_before(n, life.saturating_sub(at));
            if at >= life {
                return polls;
            }
            polls.push(at);
        }
    }
}

/// What Reach asks a peer to do, fixed before anything is sent.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSpec {
    /// Reach's task id (the Phylactery's Intercom task id).
    pub task_id: String,
    /// The A2A message id; an admitted resend preserves it exactly.
    pub message_id: String,
    /// Optional A2A context id.
    pub context_id: Option<String>,
    /// The message content (already through the Privacy Cut).
    pub parts: Vec<Part>,
    /// The local deadline: no attempt starts at or after it.
    pub deadline: UnixMillis,
    pub polls: PollBudget,
}

/// The peer's final content, kept quarantined: the caller validates it before any adoption.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Task(Task),
    Message(Message),
}

/// One recorded transition, secret-free.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evidence {
    pub from: Phase,
    pub to: Phase,
    /// Why: an A2A state, a transport or bound code, a decision refusal, the deadline.
    pub code: String,
    /// The attempt that produced it, if any.
    pub attempt_id: Option<String>,
    /// The decision that carried that attempt.
    pub decision: Option<DecisionId>,
    /// Digest of the response body the transition rests on.
    pub response_digest: Option<Sha256Digest>,
    pub at: UnixMillis,
    /// The `CancelTask` sent before this transition settled a task the peer left waiting for
    /// input, and what the peer answered.
    pub cancel: Option<CancelOutcome>,
}

/// The one `CancelTask` of a task the peer left in `TASK_STATE_INPUT_REQUIRED` (issue #33
/// item 6): one-shot work is refused, so the open task is cancelled at the peer under its own
/// decision, one more physical attempt; the original SendMessage is never sent again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CancelOutcome {
    /// What came of it, one token: `a2a/cancel/<state>` (the task the peer returned, e.g.
    /// `a2a/cancel/TASK_STATE_CANCELED`), `a2a/cancel/jsonrpc-error/<code>` (e.g. -32002,
    /// `TaskNotCancelableError`), `a2a/cancel/http-<status>`, `a2a/cancel/malformed`,
    /// `a2a/cancel/correlation`; `intercom/cancel-unanswered` when the bytes may have left and
    /// no answer came; `intercom/cancel-unsent/<why>` when nothing was sent (the deadline, or
    /// ward's refusal, e.g. `intercom/cancel-unsent/decision/over-budget`).
    pub code: String,
    pub attempt_id: Option<String>,
    pub decision: Option<DecisionId>,
    pub response_digest: Option<Sha256Digest>,
}

/// One outbound task.
#[derive(Debug, Clone)]
pub struct OutboundTask {
    spec: TaskSpec,
    envelope: Vec<u8>,
    envelope_digest: Sha256Digest,
    /// False for a task rebuilt from the ledger alone: its text was never stored, so the
    /// envelope is unknown and it can only be polled, expired or settled, never (re)sent.
    envelope_retained: bool,
    phase: Phase,
    remote_task_id: Option<String>,
    polls: u32,
    resends: u32,
    answer: Option<Answer>,
    trail: Vec<Evidence>,
    /// When this process's last GetTask of the task went out: the next is paced from it, so
    /// a slow answer does not stretch the gap (memory only; a restart paces from scratch).
    last_poll: Option<std::time::Instant>,
}

fn check_id(value: &str, field: &'static str) -> Result<(), IntercomRefusal> {
    if value.is_empty()
        || value.len() > MAX_ID_BYTES
        || value.bytes().any(|b| !b.is_ascii_graphic())
    {
        return Err(IntercomRefusal::InvalidSpec(field));
    }
    Ok(())
}

impl OutboundTask {
    /// Fixes the SendMessage envelope (`return_immediately: true`) and commits the task in
    /// [`Phase::Committed`].
    pub fn new(spec: TaskSpec) -> Result<Self, IntercomRefusal> {
        check_id(&spec.task_id, "task_id")?;
        check_id(&spec.message_id, "message_id")?;
        if let Some(c) = &spec.context_id {
            check_id(c, "context_id")?;
        }
        if spec.parts.is_empty() {
            return Err(IntercomRefusal::InvalidSpec("parts"));
        }
        if spec.polls.max_polls == 0 {
            return Err(IntercomRefusal::InvalidSpec("polls.max_polls"));
        }
        let request = JsonRpcRequest::new(
            send_rpc_id(&spec.task_id),
            METHOD_SEND_MESSAGE,
            SendMessageRequest {
                message: Message {
                    message_id: spec.message_id.clone(),
                    context_id: spec.context_id.clone(),
                    task_id: None,
                    role: Role::User,
                    parts: spec.parts.clone(),
                },
                configuration: SendMessageConfiguration {
                    accepted_output_modes: vec!["text/plain".into(), "application/json".into()],
                    history_length: Some(0),
                    return_immediately: true,
                },
            },
        );
        let envelope = request.to_bytes();
        let envelope_digest = Sha256Digest::of(&envelope);
        Ok(OutboundTask {
            spec,
            envelope,
            envelope_digest,
            envelope_retained: true,
            phase: Phase::Committed,
            remote_task_id: None,
            polls: 0,
            resends: 0,
            answer: None,
            trail: Vec::new(),
            last_poll: None,
        })
    }

    /// Rebuilds a task in `phase` after a restart, from its spec and the protocol identities
    /// the journal kept (never SDK objects). Resends start counting again (ward's per-run
    /// decision budget bounds them); polls continue after `polls_before` (see
    /// [`OutboundTask::continue_polls`]).
    #[cfg_attr(not(feature = "ledger"), allow(dead_code))]
    pub(crate) fn restored(
        spec: TaskSpec,
        phase: Phase,
        remote_task_id: Option<String>,
        polls_before: u32,
    ) -> Result<Self, IntercomRefusal> {
        let mut task = OutboundTask::new(spec)?;
        task.phase = phase;
        task.remote_task_id = remote_task_id;
        task.continue_polls(polls_before);
        Ok(task)
    }

    /// Numbers the next poll after `before` (so a restarted process never reuses a poll's
    /// attempt id) without spending this drive's budget: the budget counts from here.
    fn continue_polls(&mut self, before: u32) {
        self.polls = before;
        self.spec.polls.max_polls = self.spec.polls.max_polls.saturating_add(before);
    }

    /// Rebuilds a task from the ledger alone (core's resumer at start): the task's text was
    /// never stored, so only the envelope's digest is known. Such a task is polled, expired or
    /// settled, never sent: [`Phase::Committed`] is refused, and `reconcile` refuses to resend
    /// it (`intercom/envelope-not-retained`). `spec.parts` is empty.
    #[cfg_attr(not(feature = "ledger"), allow(dead_code))]
    pub(crate) fn restored_without_envelope(
        spec: TaskSpec,
        envelope_digest: Sha256Digest,
        phase: Phase,
        remote_task_id: Option<String>,
        polls_before: u32,
    ) -> Result<Self, IntercomRefusal> {
        check_id(&spec.task_id, "task_id")?;
        check_id(&spec.message_id, "message_id")?;
        if phase == Phase::Committed || phase == Phase::Sending || phase == Phase::Resending {
            return Err(IntercomRefusal::ResumeMismatch(
                "a phase that needs the envelope",
            ));
        }
        if spec.polls.max_polls == 0 {
            return Err(IntercomRefusal::InvalidSpec("polls.max_polls"));
        }
        let mut task = OutboundTask {
            spec,
            envelope: Vec::new(),
            envelope_digest,
            envelope_retained: false,
            phase,
            remote_task_id,
            polls: 0,
            resends: 0,
            answer: None,
            trail: Vec::new(),
            last_poll: None,
        };
        task.continue_polls(polls_before);
        Ok(task)
    }

    /// Whether the exact SendMessage bytes are held (false after a ledger-only restore).
    pub fn envelope_retained(&self) -> bool {
        self.envelope_retained
    }

    /// Grants `more` GetTask polls beyond the budget the task was created with (core's Stasis
    /// keeps polling a parked task, each poll still under its own decision and the local
    /// deadline). Poll numbers keep counting, so attempt ids are not reused in one process.
    pub fn grant_polls(&mut self, more: u32) {
        self.spec.polls.max_polls = self.spec.polls.max_polls.saturating_add(more);
    }

    pub fn spec(&self) -> &TaskSpec {
        &self.spec
    }
    pub fn phase(&self) -> Phase {
        self.phase
    }
    /// The exact SendMessage bytes (identical for every admitted resend).
    pub fn envelope(&self) -> &[u8] {
        &self.envelope
    }
    pub fn envelope_digest(&self) -> Sha256Digest {
        self.envelope_digest
    }
    /// The peer's task id, once it answered with one.
    pub fn remote_task_id(&self) -> Option<&str> {
        self.remote_task_id.as_deref()
    }
    /// GetTask requests sent so far (after a restart: the number the next poll continues
    /// from).
    pub fn polls(&self) -> u32 {
        self.polls
    }
    /// Admitted resends sent so far.
    pub fn resends(&self) -> u32 {
        self.resends
    }
    /// The peer's final content, quarantined.
    pub fn answer(&self) -> Option<&Answer> {
        self.answer.as_ref()
    }
    /// Every transition, oldest first.
    pub fn trail(&self) -> &[Evidence] {
        &self.trail
    }

    /// The JSON-RPC id of SendMessage (the same on every resend).
    pub fn send_rpc_id(&self) -> String {
        send_rpc_id(&self.spec.task_id)
    }

    /// The body of poll `n` and its JSON-RPC id.
    pub fn poll_request(&self, n: u32) -> Option<(String, Vec<u8>)> {
        let remote = self.remote_task_id.as_ref()?;
        let id = format!("{}/poll-{n}", self.spec.task_id);
        let body = JsonRpcRequest::new(
            id.clone(),
            METHOD_GET_TASK,
            crate::wire::GetTaskRequest {
                id: remote.clone(),
                history_length: Some(0),
            },
        )
        .to_bytes();
        Some((id, body))
    }

    /// The body of the task's `CancelTask` and its JSON-RPC id (`<task>/cancel`).
    pub fn cancel_request(&self) -> Option<(String, Vec<u8>)> {
        let remote = self.remote_task_id.as_ref()?;
        let id = format!("{}/cancel", self.spec.task_id);
        let body = JsonRpcRequest::new(
            id.clone(),
            METHOD_CANCEL_TASK,
            CancelTaskRequest { id: remote.clone() },
        )
        .to_bytes();
        Some((id, body))
    }
}

// The mutators are the driver's (feature `net`).
#[cfg_attr(not(feature = "net"), allow(dead_code))]
impl OutboundTask {
    pub(crate) fn count_poll(&mut self) -> u32 {
        self.polls += 1;
        self.polls
    }

    /// When this process's last GetTask of the task went out.
    pub(crate) fn last_poll(&self) -> Option<std::time::Instant> {
        self.last_poll
    }

    pub(crate) fn poll_started(&mut self, at: std::time::Instant) {
        self.last_poll = Some(at);
    }

    pub(crate) fn count_resend(&mut self) -> u32 {
        self.resends += 1;
        self.resends
    }

    pub(crate) fn set_remote(&mut self, id: String) {
        self.remote_task_id = Some(id);
    }

    pub(crate) fn set_answer(&mut self, answer: Answer) {
        self.answer = Some(answer);
    }

    /// Applies a checked transition with its evidence.
    pub(crate) fn advance(&mut self, to: Phase, ev: Step) -> Result<(), IntercomRefusal> {
        if !self.phase.can_become(to) {
            return Err(IntercomRefusal::WrongPhase { phase: self.phase });
        }
        self.trail.push(Evidence {
            from: self.phase,
            to,
            code: ev.code,
            attempt_id: ev.attempt_id,
            decision: ev.decision,
            response_digest: ev.response_digest,
            at: ev.at,
            cancel: ev.cancel,
        });
        self.phase = to;
        Ok(())
    }
}

/// The evidence of one step, before it is bound to a transition.
#[cfg_attr(not(feature = "net"), allow(dead_code))]
#[derive(Debug, Clone)]
pub(crate) struct Step {
    pub code: String,
    pub attempt_id: Option<String>,
    pub decision: Option<DecisionId>,
    pub response_digest: Option<Sha256Digest>,
    pub at: UnixMillis,
    pub cancel: Option<CancelOutcome>,
}

impl Default for Step {
    fn default() -> Self {
        Step {
            code: String::new(),
            attempt_id: None,
            decision: None,
            response_digest: None,
            at: UnixMillis(0),
            cancel: None,
        }
    }
}

fn send_rpc_id(task_id: &str) -> String {
    format!("{task_id}/send")
}

/// What a SendMessage answer means.
#[derive(Debug, Clone, PartialEq)]
pub enum SendVerdict {
    /// The peer holds a live task: park and poll it.
    Live { remote_task_id: String },
    /// The answer settles the task.
    Settle {
        phase: Phase,
        code: String,
        remote_task_id: Option<String>,
        answer: Option<Box<Answer>>,
    },
    /// The peer may or may not hold the task.
    Uncertain { code: String },
}

/// Classifies a SendMessage answer (status and body) to request `rpc_id`.
///
/// A 4xx status (other than 408, 425 and 429) and a JSON-RPC error are the peer's definitive
/// refusal; 5xx, 408/425/429 and anything unparseable or uncorrelated leave the task uncertain,
/// because the peer may have created the task before failing to answer.
pub fn classify_send(status: u16, body: &[u8], rpc_id: &str) -> SendVerdict {
    if status != 200 {
        let code = format!("a2a/http-{status}");
        if (400..500).contains(&status) && !matches!(status, 408 | 425 | 429) {
            return SendVerdict::Settle {
                phase: Phase::Refused,
                code,
                remote_task_id: None,
                answer: None,
            };
        }
        return SendVerdict::Uncertain { code };
    }
    match parse_response::<SendMessageResponse>(body, rpc_id) {
        Err(e) => SendVerdict::Uncertain {
            code: wire_code(&e).into(),
        },
        Ok(RpcAnswer::Error(e)) => SendVerdict::Settle {
            phase: Phase::Refused,
            code: format!("a2a/jsonrpc-error/{}", e.code),
            remote_task_id: None,
            answer: None,
        },
        Ok(RpcAnswer::Result(SendMessageResponse::Message(m))) => SendVerdict::Settle {
            phase: Phase::Succeeded,
            code: "a2a/direct-message".into(),
            remote_task_id: None,
            answer: Some(Box::new(Answer::Message(m))),
        },
        Ok(RpcAnswer::Result(SendMessageResponse::Task(t))) => {
            if check_id(&t.id, "task.id").is_err() {
                return SendVerdict::Uncertain {
                    code: "a2a/malformed".into(),
                };
            }
            match meaning(t.status.state) {
                // An unspecified state still names the task: polling will tell.
                StateMeaning::Live | StateMeaning::Violation => SendVerdict::Live {
                    remote_task_id: t.id,
                },
                StateMeaning::Settle(phase) => SendVerdict::Settle {
                    phase,
                    code: format!("a2a/{}", t.status.state.as_str()),
                    remote_task_id: Some(t.id.clone()),
                    answer: Some(Box::new(Answer::Task(t))),
                },
            }
        }
    }
}

/// What a GetTask answer means.
#[derive(Debug, Clone, PartialEq)]
pub enum PollVerdict {
    /// Still running.
    Live,
    /// A terminal.
    Settle {
        phase: Phase,
        code: String,
        answer: Box<Answer>,
    },
    /// The peer says it has no such task.
    Lost { code: String },
    /// Nothing learned (bad status, malformed or uncorrelated body, other error); the poll
    /// counted.
    Inconclusive { code: String },
}

/// Classifies a GetTask answer to request `rpc_id` about peer task `remote_task_id`.
pub fn classify_poll(status: u16, body: &[u8], rpc_id: &str, remote_task_id: &str) -> PollVerdict {
    if status != 200 {
        return PollVerdict::Inconclusive {
            code: format!("a2a/http-{status}"),
        };
    }
    match parse_response::<Task>(body, rpc_id) {
        Err(e) => PollVerdict::Inconclusive {
            code: wire_code(&e).into(),
        },
        Ok(RpcAnswer::Error(e)) if e.code == ERROR_TASK_NOT_FOUND => PollVerdict::Lost {
            code: "a2a/task-not-found".into(),
        },
        Ok(RpcAnswer::Error(e)) => PollVerdict::Inconclusive {
            code: format!("a2a/jsonrpc-error/{}", e.code),
        },
        Ok(RpcAnswer::Result(t)) if t.id != remote_task_id => PollVerdict::Inconclusive {
            code: "a2a/correlation".into(),
        },
        Ok(RpcAnswer::Result(t)) => match meaning(t.status.state) {
            StateMeaning::Live => PollVerdict::Live,
            StateMeaning::Violation => PollVerdict::Inconclusive {
                code: "a2a/state-unspecified".into(),
            },
            StateMeaning::Settle(phase) => PollVerdict::Settle {
                phase,
                code: format!("a2a/{}", t.status.state.as_str()),
                answer: Box::new(Answer::Task(t)),
            },
        },
    }
}

/// Whether a settled answer leaves the task open at the peer: `TASK_STATE_INPUT_REQUIRED`
/// (Intercom never supplies more input, so the task is cancelled there).
pub fn leaves_task_open(answer: &Answer) -> bool {
    matches!(answer, Answer::Task(t) if t.status.state == TaskState::InputRequired)
}

/// Classifies a `CancelTask` answer to request `rpc_id` about peer task `remote_task_id`: the
/// [`CancelOutcome::code`] of an answered cancel.
pub fn classify_cancel(status: u16, body: &[u8], rpc_id: &str, remote_task_id: &str) -> String {
    if status != 200 {
        return format!("a2a/cancel/http-{status}");
    }
    match parse_response::<Task>(body, rpc_id) {
        Err(crate::wire::WireError::Malformed) => "a2a/cancel/malformed".into(),
        Err(crate::wire::WireError::Correlation) => "a2a/cancel/correlation".into(),
        Ok(RpcAnswer::Error(e)) => format!("a2a/cancel/jsonrpc-error/{}", e.code),
        Ok(RpcAnswer::Result(t)) if t.id != remote_task_id => "a2a/cancel/correlation".into(),
        Ok(RpcAnswer::Result(t)) => format!("a2a/cancel/{}", t.status.state.as_str()),
    }
}

fn wire_code(e: &crate::wire::WireError) -> &'static str {
    match e {
        crate::wire::WireError::Malformed => "a2a/malformed",
        crate::wire::WireError::Correlation => "a2a/correlation",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_answers_map_to_codes() {
        let id = "t1/cancel";
        let cases: [(u16, Vec<u8>, &str); 6] = [
            (
                200,
                task_body("r1", id, TaskState::Canceled, false),
                "a2a/cancel/TASK_STATE_CANCELED",
            ),
            (
                200,
                br#"{"jsonrpc":"2.0","id":"t1/cancel","error":{"code":-32002,"message":"no"}}"#
                    .to_vec(),
                "a2a/cancel/jsonrpc-error/-32002",
            ),
            (503, Vec::new(), "a2a/cancel/http-503"),
            (200, b"{".to_vec(), "a2a/cancel/malformed"),
            (
                200,
                task_body("r1", "t1/poll-1", TaskState::Canceled, false),
                "a2a/cancel/correlation",
            ),
            (
                200,
                task_body("r2", id, TaskState::Canceled, false),
                "a2a/cancel/correlation",
            ),
        ];
        for (status, body, want) in cases {
            assert_eq!(classify_cancel(status, &body, id, "r1"), want);
        }
    }

    #[test]
    fn polls_are_paced_and_bounded_by_the_interval_and_the_deadline() {
        let budget = PollBudget {
            max_polls: 10,
            interval: Duration::from_millis(1_000),
        };
        let hour = Duration::from_secs(3_600);
        let ms = Duration::from_millis;
        // (poll number, time left before the deadline) → pause in ms: one last poll goes out
        // FINAL_POLL_LEAD (1 s) before the deadline; inside the lead the pause runs out.
        let table: [(u32, Duration, u128); 8] = [
            (1, hour, 250),
            (2, hour, 500),
            (3, hour, 1_000),
            (50, hour, 1_000),
            (3, ms(1_300), 300),
            (1, ms(1_100), 100),
            (3, ms(600), 600),
            (2, Duration::ZERO, 0),
        ];
        for (n, left, want) in table {
            assert_eq!(
                budget.pause_before(n, left).as_millis(),
                want,
                "poll {n}, {left:?} left"
            );
        }
    }

    #[test]
    fn the_default_schedule_covers_the_deadline_with_gaps_of_one_interval() {
        let b = PollBudget::DEFAULT;
        let at: Vec<u64> = b
            .schedule(DEFAULT_DEADLINE)
            .iter()
            .map(|d| d.as_millis() as u64)
            .collect();
        assert_eq!(at, [6_500, 19_500, 45_500, 71_500, 97_500, 119_000]);
        let mut last = Duration::ZERO;
        for t in b.schedule(DEFAULT_DEADLINE) {
            assert!(
                t - last <= b.interval,
                "a gap over one interval before {t:?}"
            );
            last = t;
        }
        assert_eq!(DEFAULT_DEADLINE - last, FINAL_POLL_LEAD);
    }

    fn spec() -> TaskSpec {
        TaskSpec {
            task_id: "t1".into(),
            message_id: "m1".into(),
            context_id: None,
            parts: vec![Part::text("q")],
            deadline: UnixMillis(10),
            polls: PollBudget {
                max_polls: 3,
                interval: Duration::from_millis(1),
            },
        }
    }

    fn task_body(id: &str, rpc: &str, state: TaskState, wrap: bool) -> Vec<u8> {
        let task =
            serde_json::json!({"id": id, "contextId": "c", "status": {"state": state.as_str()}});
        let result = if wrap {
            serde_json::json!({ "task": task })
        } else {
            task
        };
        serde_json::to_vec(&serde_json::json!({"jsonrpc": "2.0", "id": rpc, "result": result}))
            .unwrap()
    }

    #[test]
    fn a_spec_with_bad_ids_is_refused() {
        for (s, field) in [
            (
                TaskSpec {
                    task_id: String::new(),
                    ..spec()
                },
                "task_id",
            ),
            (
                TaskSpec {
                    message_id: "has space".into(),
                    ..spec()
                },
                "message_id",
            ),
            (
                TaskSpec {
                    context_id: Some("x".repeat(200)),
                    ..spec()
                },
                "context_id",
            ),
            (
                TaskSpec {
                    parts: vec![],
                    ..spec()
                },
                "parts",
            ),
            (
                TaskSpec {
                    polls: PollBudget {
                        max_polls: 0,
                        interval: Duration::ZERO,
                    },
                    ..spec()
                },
                "polls.max_polls",
            ),
        ] {
            let e = OutboundTask::new(s).unwrap_err();
            assert_eq!(e, IntercomRefusal::InvalidSpec(field));
            assert_eq!(e.code(), "intercom/invalid-spec");
        }
    }

    #[test]
    fn an_unchecked_transition_is_refused() {
        let mut t = OutboundTask::new(spec()).unwrap();
        let e = t.advance(Phase::Polling, Step::default()).unwrap_err();
        assert_eq!(
            e,
            IntercomRefusal::WrongPhase {
                phase: Phase::Committed
            }
        );
        assert!(t.trail().is_empty());
    }

    #[test]
    fn send_answers_map_to_phases() {
        let id = "t1/send";
        for &s in TaskState::ALL {
            let v = classify_send(200, &task_body("r1", id, s, true), id);
            match meaning(s) {
                StateMeaning::Live | StateMeaning::Violation => assert_eq!(
                    v,
                    SendVerdict::Live {
                        remote_task_id: "r1".into()
                    }
                ),
                StateMeaning::Settle(p) => {
                    assert!(matches!(v, SendVerdict::Settle { phase, .. } if phase == p))
                }
            }
        }
        assert!(matches!(
            classify_send(403, b"", id),
            SendVerdict::Settle {
                phase: Phase::Refused,
                ..
            }
        ));
        for status in [408, 429, 500, 502, 503] {
            assert_eq!(
                classify_send(status, b"", id),
                SendVerdict::Uncertain {
                    code: format!("a2a/http-{status}")
                }
            );
        }
        assert_eq!(
            classify_send(200, b"{not json", id),
            SendVerdict::Uncertain {
                code: "a2a/malformed".into()
            }
        );
        assert_eq!(
            classify_send(200, &task_body("r1", "other", TaskState::Working, true), id),
            SendVerdict::Uncertain {
                code: "a2a/correlation".into()
            }
        );
        let err = br#"{"jsonrpc":"2.0","id":"t1/send","error":{"code":-32009,"message":"v"}}"#;
        assert!(matches!(
            classify_send(200, err, id),
            SendVerdict::Settle { phase: Phase::Refused, code, .. } if code == "a2a/jsonrpc-error/-32009"
        ));
        let msg = br#"{"jsonrpc":"2.0","id":"t1/send","result":{"message":{"messageId":"x","role":"ROLE_AGENT","parts":[{"text":"a"}]}}}"#;
        assert!(matches!(
            classify_send(200, msg, id),
            SendVerdict::Settle {
                phase: Phase::Succeeded,
                ..
            }
        ));
    }

    #[test]
    fn poll_answers_map_to_verdicts() {
        let id = "t1/poll-1";
        assert_eq!(
            classify_poll(
                200,
                &task_body("r1", id, TaskState::Working, false),
                id,
                "r1"
            ),
            PollVerdict::Live
        );
        assert!(matches!(
            classify_poll(
                200,
                &task_body("r1", id, TaskState::Canceled, false),
                id,
                "r1"
            ),
            PollVerdict::Settle {
                phase: Phase::Cancelled,
                ..
            }
        ));
        assert_eq!(
            classify_poll(
                200,
                &task_body("r2", id, TaskState::Completed, false),
                id,
                "r1"
            ),
            PollVerdict::Inconclusive {
                code: "a2a/correlation".into()
            }
        );
        let missing =
            br#"{"jsonrpc":"2.0","id":"t1/poll-1","error":{"code":-32001,"message":"nf"}}"#;
        assert_eq!(
            classify_poll(200, missing, id, "r1"),
            PollVerdict::Lost {
                code: "a2a/task-not-found".into()
            }
        );
        assert_eq!(
            classify_poll(503, b"", id, "r1"),
            PollVerdict::Inconclusive {
                code: "a2a/http-503".into()
            }
        );
    }
}
