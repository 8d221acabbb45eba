//! The driver (feature `net`): moves an [`OutboundTask`] through its phases, one physical
//! attempt at a time, each under its own decision.
//!
//! - [`Intercom::send`]: Committed → (decision, redemption, connection) → Sending → Submitted,
//!   a terminal, or Uncertain.
//! - [`Intercom::poll`]: Submitted/Polling → GetTask under the poll budget and the local
//!   deadline → a terminal, Expired, Revoked or Lost; a spent budget is a typed refusal with no
//!   further request.
//! - A terminal that leaves the task open at the peer (`TASK_STATE_INPUT_REQUIRED`, refused as
//!   one-shot work) is preceded by one `CancelTask` under its own decision; the settling
//!   transition's evidence carries what the peer answered ([`CancelOutcome`]). The original
//!   SendMessage is never sent again.
//! - [`Intercom::reconcile`]: Uncertain → Resending only when the enrollment receipt admits
//!   that the same envelope resolves to the original task; otherwise a typed refusal and no
//!   request.
//!
//! **Invariant:** no request is written without a redeemed decision obtained for exactly that
//! attempt (body digest, destination, attempt id).
//!
//! The deadline is checked before each attempt; an attempt already in flight is bounded by the
//! transport (for `PeerClient`, `a2a_bounds`: 30 s at most).

use std::sync::Arc;
use std::time::Duration;

use reach_clock::Clock;
use reach_digest::Sha256Digest;

use crate::decision::{
    Attempt, AttemptKind, DecisionAuthority, DecisionId, DecisionRefusal, authorize, redeem,
};
use crate::journal::{Journal, NoJournal};
use crate::receipt::EnrollmentReceipt;
use crate::refusal::IntercomRefusal;
use crate::state::Phase;
use crate::task::{
    Answer, CancelOutcome, OutboundTask, PollVerdict, SendVerdict, Step, classify_cancel,
    classify_poll, classify_send, leaves_task_open,
};
use crate::transport::{Transmitted, Transport};

/// One peer's client, the decision authority, the peer's enrollment receipt, the journal and
/// the clock.
#[derive(Debug)]
pub struct Intercom<'a, T, A, J = NoJournal> {
    /// The transport to the peer (a `PeerClient` in-process).
    pub client: &'a T,
    pub authority: &'a A,
    pub receipt: &'a EnrollmentReceipt,
    pub journal: &'a J,
    pub clock: Arc<dyn Clock>,
}

fn refusal_code(e: IntercomRefusal) -> String {
    match e {
        IntercomRefusal::NotSent { code } => code,
        other => other.code().to_owned(),
    }
}

impl<T: Transport, A: DecisionAuthority, J: Journal> Intercom<'_, T, A, J> {
    /// Applies a checked transition and journals it.
    async fn move_to(
        &self,
        task: &mut OutboundTask,
        to: Phase,
        step: Step,
    ) -> Result<(), IntercomRefusal> {
        task.advance(to, step)?;
        if let Some(evidence) = task.trail().last().cloned() {
            // Ids and codes only: never the envelope, the answer or a credential.
            tracing::info!(
                task = %task.spec().task_id,
                from = %evidence.from,
                to = %evidence.to,
                code = %evidence.code,
                attempt = evidence.attempt_id.as_deref().unwrap_or(""),
                "intercom transition"
            );
            self.journal
                .transitioned(task, &evidence)
                .await
                .map_err(|e| IntercomRefusal::Journal { code: e.code })?;
        }
        Ok(())
    }

    fn step(&self, code: impl Into<String>) -> Step {
        Step {
            code: code.into(),
            at: self.clock.now(),
            ..Step::default()
        }
    }

    fn deadline_passed(&self, task: &OutboundTask) -> bool {
        self.clock.now() >= task.spec().deadline
    }

    /// Sends the task's SendMessage once, then polls it to a terminal. Returns the phase it
    /// ended in (a terminal or Uncertain), or the refusal that stopped it.
    pub async fn run(&self, task: &mut OutboundTask) -> Result<Phase, IntercomRefusal> {
        self.send(task).await?;
        if matches!(task.phase(), Phase::Submitted | Phase::Polling) {
            self.poll(task).await?;
        }
        Ok(task.phase())
    }

    /// The initial SendMessage.
    pub async fn send(&self, task: &mut OutboundTask) -> Result<Phase, IntercomRefusal> {
        if task.phase() != Phase::Committed {
            return Err(IntercomRefusal::WrongPhase {
                phase: task.phase(),
            });
        }
        if self.deadline_passed(task) {
            self.move_to(
                task,
                Phase::AbandonedBeforeSubmit,
                self.step("intercom/deadline-before-send"),
            )
            .await?;
            return Ok(task.phase());
        }
        let attempt = Attempt {
            task_id: task.spec().task_id.clone(),
            kind: AttemptKind::Send,
            destination: self.client.url(),
            payload_digest: task.envelope_digest(),
        };
        let decision = match self.authority.obtain_decision(&attempt).await {
            Ok(d) => d,
            Err(DecisionRefusal::Revoked { code }) => {
                self.move_to(task, Phase::AbandonedBeforeSubmit, self.step(code))
                    .await?;
                return Ok(task.phase());
            }
            Err(DecisionRefusal::Refused { code }) => {
                return Err(IntercomRefusal::DecisionRefused { code });
            }
        };
        // Committed to the outbox under its decision before the decision is redeemed.
        self.journal
            .committed(task, &attempt, &decision)
            .await
            .map_err(|e| IntercomRefusal::Journal { code: e.code })?;
        let attempt_id = attempt.attempt_id();
        let unsent = |code: String| Step {
            attempt_id: Some(attempt_id.clone()),
            decision: Some(decision.clone()),
            ..self.step(code)
        };
        let redeemed = match redeem(self.authority, decision.clone(), attempt).await {
            Ok(r) => r,
            Err(e) => {
                let step = unsent(e.code().to_owned());
                self.move_to(task, Phase::AbandonedBeforeSubmit, step)
                    .await?;
                return Ok(task.phase());
            }
        };
        let prepared = match self
            .client
            .prepare(redeemed, task.envelope().to_vec())
            .await
        {
            Ok(p) => p,
            Err(e) => {
                // Nothing was written: the task is abandoned unsent (a retry is a new task
                // under a new decision).
                let step = unsent(refusal_code(e));
                self.move_to(task, Phase::AbandonedBeforeSubmit, step)
                    .await?;
                return Ok(task.phase());
            }
        };
        // SENDING is durable before the first byte.
        self.move_to(task, Phase::Sending, unsent("intercom/sending".into()))
            .await?;
        let sent = self.client.transmit(prepared).await;
        self.settle_send(task, sent, attempt_id, decision).await?;
        Ok(task.phase())
    }

    /// Applies what a SendMessage (or an admitted resend) came back with.
    async fn settle_send(
        &self,
        task: &mut OutboundTask,
        sent: Transmitted,
        attempt_id: String,
        decision: DecisionId,
    ) -> Result<(), IntercomRefusal> {
        let (verdict, digest) = match sent {
            Transmitted::Answered {
                status,
                body,
                digest,
            } => (
                classify_send(status, &body, &task.send_rpc_id()),
                Some(digest),
            ),
            Transmitted::Ambiguous { code } => (SendVerdict::Uncertain { code }, None),
            Transmitted::NotSent { code } => {
                // Proved unsent after SENDING was journaled: an initial send ends FAILED (a
                // retry is a new task), a resend leaves the task UNCERTAIN as it was.
                let to = if task.phase() == Phase::Resending {
                    Phase::Uncertain
                } else {
                    Phase::Failed
                };
                let step = Step {
                    attempt_id: Some(attempt_id.clone()),
                    decision: Some(decision.clone()),
                    ..self.step(format!("intercom/not-transmitted: {code}"))
                };
                return self.move_to(task, to, step).await;
            }
        };
        let step = |code: String| Step {
            attempt_id: Some(attempt_id.clone()),
            decision: Some(decision.clone()),
            response_digest: digest,
            ..self.step(code)
        };
        match verdict {
            SendVerdict::Live { remote_task_id } => {
                task.set_remote(remote_task_id);
                self.move_to(task, Phase::Submitted, step("a2a/task-accepted".into()))
                    .await
            }
            SendVerdict::Settle {
                phase,
                code,
                remote_task_id,
                answer,
            } => {
                if let Some(id) = remote_task_id {
                    task.set_remote(id);
                }
                if let Some(a) = answer {
                    task.set_answer(*a);
                }
                let cancel = self.cancel_if_open(task).await;
                let step = Step {
                    cancel,
                    ..step(code)
                };
                self.move_to(task, phase, step).await
            }
            SendVerdict::Uncertain { code } => {
                self.move_to(task, Phase::Uncertain, step(code)).await
            }
        }
    }

    /// Polls a parked task with GetTask until a terminal, the deadline, a revocation, the
    /// peer's loss of the task, or the poll budget.
    pub async fn poll(&self, task: &mut OutboundTask) -> Result<Phase, IntercomRefusal> {
        loop {
            if !matches!(task.phase(), Phase::Submitted | Phase::Polling) {
                return Err(IntercomRefusal::WrongPhase {
                    phase: task.phase(),
                });
            }
            if self.deadline_passed(task) {
                self.move_to(task, Phase::Expired, self.step("intercom/deadline"))
                    .await?;
                return Ok(task.phase());
            }
            let max = task.spec().polls.max_polls;
            if task.polls() >= max {
                return Err(IntercomRefusal::PollBudgetExhausted {
                    polls: task.polls(),
                });
            }
            // Paced from when the last poll went out (the send's answer before the first),
            // bounded by the interval and the deadline.
            let until_deadline = Duration::from_millis(
                u64::try_from(task.spec().deadline.0 - self.clock.now().0).unwrap_or(0),
            );
            let since = task
                .last_poll()
                .map(|t| t.elapsed())
                .unwrap_or(Duration::ZERO);
            let pause = task
                .spec()
                .polls
                .pause_before(task.polls() + 1, until_deadline.saturating_add(since))
                .saturating_sub(since);
            tokio::time::sleep(pause).await;
            if self.deadline_passed(task) {
                self.move_to(task, Phase::Expired, self.step("intercom/deadline"))
                    .await?;
                return Ok(task.phase());
            }
            let Some((rpc_id, body, attempt)) = self.next_poll(task) else {
                return Err(IntercomRefusal::WrongPhase {
                    phase: task.phase(),
                });
            };
            task.poll_started(std::time::Instant::now());
            let redeemed = match authorize(self.authority, attempt).await {
                Ok(r) => r,
                Err(DecisionRefusal::Revoked { code }) => {
                    self.move_to(task, Phase::Revoked, self.step(code)).await?;
                    return Ok(task.phase());
                }
                Err(DecisionRefusal::Refused { code }) => {
                    return Err(IntercomRefusal::DecisionRefused { code });
                }
            };
            task.count_poll();
            let decision = redeemed.decision().clone();
            let attempt_id = redeemed.attempt().attempt_id();
            let step = |code: String, digest: Option<Sha256Digest>| Step {
                attempt_id: Some(attempt_id.clone()),
                decision: Some(decision.clone()),
                response_digest: digest,
                ..self.step(code)
            };
            let verdict = match self.client.prepare(redeemed, body).await {
                // A poll that could not connect is spent (its decision was redeemed).
                Err(e) => PollVerdict::Inconclusive {
                    code: refusal_code(e),
                },
                Ok(prepared) => match self.client.transmit(prepared).await {
                    Transmitted::Answered {
                        status,
                        body,
                        digest,
                    } => {
                        let remote = task.remote_task_id().unwrap_or_default().to_owned();
                        let v = classify_poll(status, &body, &rpc_id, &remote);
                        match v {
                            PollVerdict::Settle {
                                phase,
                                code,
                                answer,
                            } => {
                                task.set_answer(*answer);
                                let cancel = self.cancel_if_open(task).await;
                                let step = Step {
                                    cancel,
                                    ..step(code, Some(digest))
                                };
                                self.move_to(task, phase, step).await?;
                                return Ok(task.phase());
                            }
                            PollVerdict::Lost { code } => {
                                self.move_to(task, Phase::Lost, step(code, Some(digest)))
                                    .await?;
                                return Ok(task.phase());
                            }
                            other => other,
                        }
                    }
                    Transmitted::Ambiguous { code } | Transmitted::NotSent { code } => {
                        PollVerdict::Inconclusive { code }
                    }
                },
            };
            let code = match verdict {
                PollVerdict::Inconclusive { code } => code,
                _ => "a2a/task-live".to_owned(),
            };
            self.move_to(task, Phase::Polling, step(code, None)).await?;
        }
    }

    /// Cancels the task at the peer when the answer just settled leaves it open there
    /// (`TASK_STATE_INPUT_REQUIRED`): one `CancelTask` under its own decision, never a resend
    /// of the original. `None` when the task is not left open.
    async fn cancel_if_open(&self, task: &OutboundTask) -> Option<CancelOutcome> {
        if !task.answer().is_some_and(leaves_task_open) {
            return None;
        }
        let unsent = |why: &str| CancelOutcome {
            code: format!("intercom/cancel-unsent/{}", why.replace(' ', "_")),
            attempt_id: None,
            decision: None,
            response_digest: None,
        };
        if self.deadline_passed(task) {
            return Some(unsent("deadline"));
        }
        let Some((rpc_id, body)) = task.cancel_request() else {
            return Some(unsent("no-remote-task"));
        };
        let attempt = Attempt {
            task_id: task.spec().task_id.clone(),
            kind: AttemptKind::Cancel,
            destination: self.client.url(),
            payload_digest: Sha256Digest::of(&body),
        };
        let redeemed = match authorize(self.authority, attempt).await {
            Ok(r) => r,
            Err(e) => return Some(unsent(e.code())),
        };
        let decision = redeemed.decision().clone();
        let attempt_id = redeemed.attempt().attempt_id();
        let outcome = |code: String, response_digest| CancelOutcome {
            code,
            attempt_id: Some(attempt_id.clone()),
            decision: Some(decision.clone()),
            response_digest,
        };
        let prepared = match self.client.prepare(redeemed, body).await {
            Ok(p) => p,
            Err(e) => {
                return Some(outcome(
                    format!(
                        "intercom/cancel-unsent/{}",
                        refusal_code(e).replace(' ', "_")
                    ),
                    None,
                ));
            }
        };
        let remote = task.remote_task_id().unwrap_or_default().to_owned();
        let out = match self.client.transmit(prepared).await {
            Transmitted::Answered {
                status,
                body,
                digest,
            } => outcome(
                classify_cancel(status, &body, &rpc_id, &remote),
                Some(digest),
            ),
            Transmitted::Ambiguous { .. } => outcome("intercom/cancel-unanswered".into(), None),
            Transmitted::NotSent { code } => outcome(
                format!("intercom/cancel-unsent/{}", code.replace(' ', "_")),
                None,
            ),
        };
        tracing::info!(task = %task.spec().task_id, code = %out.code, "intercom cancelled an open task at the peer");
        Some(out)
    }

    /// The task's next GetTask: its JSON-RPC id, its body and the attempt its decision names;
    /// `None` while the task names no peer task.
    fn next_poll(&self, task: &OutboundTask) -> Option<(String, Vec<u8>, Attempt)> {
        let n = task.polls() + 1;
        let (rpc_id, body) = task.poll_request(n)?;
        let attempt = Attempt {
            task_id: task.spec().task_id.clone(),
            kind: AttemptKind::Poll(n),
            destination: self.client.url(),
            payload_digest: Sha256Digest::of(&body),
        };
        Some((rpc_id, body, attempt))
    }

    /// Reads again the answer of a task the journal shows SUCCEEDED but whose answer this
    /// process never held (the task settled just before a restart, and answers are not
    /// journaled): one GetTask under its own decision, exactly like a poll, which journals
    /// nothing. The task stays SUCCEEDED whatever the peer says. `Ok(true)` when the peer
    /// returned the completed task, whose answer is now the task's.
    pub async fn refetch_answer(&self, task: &mut OutboundTask) -> Result<bool, IntercomRefusal> {
        if task.phase() != Phase::Succeeded || task.answer().is_some() {
            return Err(IntercomRefusal::WrongPhase {
                phase: task.phase(),
            });
        }
        let Some((rpc_id, body, attempt)) = self.next_poll(task) else {
            return Ok(false);
        };
        let redeemed = match authorize(self.authority, attempt).await {
            Ok(r) => r,
            Err(DecisionRefusal::Revoked { code } | DecisionRefusal::Refused { code }) => {
                return Err(IntercomRefusal::DecisionRefused { code });
            }
        };
        task.count_poll();
        let Ok(prepared) = self.client.prepare(redeemed, body).await else {
            return Ok(false);
        };
        let Transmitted::Answered { status, body, .. } = self.client.transmit(prepared).await
        else {
            return Ok(false);
        };
        let remote = task.remote_task_id().unwrap_or_default().to_owned();
        match classify_poll(status, &body, &rpc_id, &remote) {
            PollVerdict::Settle {
                phase: Phase::Succeeded,
                answer,
                ..
            } => {
                task.set_answer(*answer);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Reconciles an uncertain task: resends the exact same envelope only when the peer's
    /// enrollment receipt admits that it resolves to the original task.
    pub async fn reconcile(&self, task: &mut OutboundTask) -> Result<Phase, IntercomRefusal> {
        if task.phase() != Phase::Uncertain {
            return Err(IntercomRefusal::WrongPhase {
                phase: task.phase(),
            });
        }
        if !task.envelope_retained() {
            return Err(IntercomRefusal::EnvelopeNotRetained);
        }
        let admitted = self.receipt.resends_admitted(&self.client.url());
        if admitted == 0 {
            return Err(IntercomRefusal::ResendNotAdmitted);
        }
        if task.resends() >= admitted {
            return Err(IntercomRefusal::ResendsExhausted {
                resends: task.resends(),
            });
        }
        if self.deadline_passed(task) {
            self.move_to(task, Phase::Expired, self.step("intercom/deadline"))
                .await?;
            return Ok(task.phase());
        }
        let n = task.resends() + 1;
        let attempt = Attempt {
            task_id: task.spec().task_id.clone(),
            kind: AttemptKind::Resend(n),
            destination: self.client.url(),
            payload_digest: task.envelope_digest(),
        };
        let redeemed = match authorize(self.authority, attempt).await {
            Ok(r) => r,
            Err(DecisionRefusal::Revoked { code }) => {
                self.move_to(task, Phase::Revoked, self.step(code)).await?;
                return Ok(task.phase());
            }
            Err(DecisionRefusal::Refused { code }) => {
                return Err(IntercomRefusal::DecisionRefused { code });
            }
        };
        let decision = redeemed.decision().clone();
        let attempt_id = redeemed.attempt().attempt_id();
        let prepared = self
            .client
            .prepare(redeemed, task.envelope().to_vec())
            .await?;
        task.count_resend();
        self.move_to(
            task,
            Phase::Resending,
            Step {
                attempt_id: Some(attempt_id.clone()),
                decision: Some(decision.clone()),
                ..self.step("intercom/resending-under-receipt")
            },
        )
        .await?;
        let sent = self.client.transmit(prepared).await;
        self.settle_send(task, sent, attempt_id, decision).await?;
        Ok(task.phase())
    }

    /// Settles a parked or uncertain task EXPIRED once its local deadline has passed (seed 001:
    /// "a local deadline ... settles EXPIRED ... with evidence"). No request is sent; before
    /// the deadline the task is left as it is and its phase returned.
    pub async fn expire_if_due(&self, task: &mut OutboundTask) -> Result<Phase, IntercomRefusal> {
        if !matches!(
            task.phase(),
            Phase::Submitted | Phase::Polling | Phase::Uncertain
        ) {
            return Err(IntercomRefusal::WrongPhase {
                phase: task.phase(),
            });
        }
        if self.deadline_passed(task) {
            self.move_to(task, Phase::Expired, self.step("intercom/deadline"))
                .await?;
        }
        Ok(task.phase())
    }

    /// Settles an uncertain task as LOST with operator-supplied evidence (for example, the
    /// peer's ListTasks shows no task for the message id). No request is sent.
    pub async fn settle_lost(
        &self,
        task: &mut OutboundTask,
        evidence: &str,
    ) -> Result<Phase, IntercomRefusal> {
        if evidence.is_empty() {
            return Err(IntercomRefusal::InvalidSpec("evidence"));
        }
        self.move_to(task, Phase::Lost, self.step(evidence)).await?;
        Ok(task.phase())
    }
}

/// The content of a settled task, if the peer gave one (quarantined: validate before use).
pub fn answer_text(answer: &Answer) -> String {
    let parts = match answer {
        Answer::Task(t) => t
            .artifacts
            .iter()
            .flat_map(|a| a.parts.iter())
            .chain(t.status.message.iter().flat_map(|m| m.parts.iter()))
            .collect::<Vec<_>>(),
        Answer::Message(m) => m.parts.iter().collect(),
    };
    parts
        .iter()
        .filter_map(|p| p.text.as_deref())
        .collect::<Vec<_>>()
        .join("\n")
}
