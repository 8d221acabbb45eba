//! Operator-triggered outbound A2A tasks (Intercom, issue #6 item 6): the only A2A workflow so
//! far. Core drives the task; egress-provider carries each attempt.
//!
//! `Trail/SendA2aTask` (operator only) admits the task as its own turn (platform `operator`, the
//! operator's task id as the event id, so a repeated request is a replay), begins its run, asks
//! ward for a Sigil, and runs the driver over [`ProviderTransport`]: for every physical attempt
//! (the send, each poll, an admitted resend) [`WardIssuer`] obtains a fresh `a2a-task`
//! decision at ward bound to the attempt id, the peer URL and the exact body's digest, and the
//! transport hands `ProviderCall/Call` only that body and the decision id; egress-provider
//! redeems it. The [`PhylacteryJournal`] commits the task (OUTBOX) before the send's decision
//! is redeemed and SUBMITTING before the first byte, so a parked task is durable.
//!
//! A task still parked or uncertain when the request's poll budget ends goes to the Stasis
//! ([`stasis`]), which polls it on (each poll its own decision) or, if uncertain, waits for its
//! local deadline, and terminates the turn when the task settles. At start core's resumer
//! hands every unsettled task in the ledger to the Stasis, without any operator call. The
//! turn's terminal follows `reach_intercom::ledger::turn_outcome`, after the answer's
//! quarantine (`reach_intercom::quarantine`): a refused answer settles the turn REFUSED and is
//! not adopted. Asked again with the same task id and text while no driver holds the task,
//! core rebuilds the same envelope and resumes from the ledger (`resume`: PARKED polls on,
//! SUBMITTING becomes UNCERTAIN and is never resent without the receipt, OUTBOX is abandoned
//! unsent); once the turn is terminal, the request reports the ledger and sends nothing, with
//! the adopted answer while core still holds it in memory ([`held`]).

mod attempt;
mod held;
mod stasis;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reach_digest::Sha256Digest;
use reach_intercom::ledger::{PhylacteryJournal, resumed_phase, turn_outcome};
use reach_intercom::{
    EnrollmentReceipt, Intercom, IntercomRefusal, OutboundTask, Part, Phase, PollBudget, TaskSpec,
    quarantine_answer, quarantine_status_message,
};
use reach_phylactery as ledger;
use reach_phylactery::{Clock, LedgerError, Phylactery, SystemClock, TurnState};
use reach_proto::core::v1 as pb;
use reach_proto::egress::v1::provider_call_client::ProviderCallClient;
use reach_proto::ward::v1::AdmitScopeRequest;
use reach_proto::ward::v1::ward_client::WardClient;
use tonic::Status;
use tonic::transport::Channel;

pub(crate) use attempt::{ProviderTransport, WardIssuer};

/// The Pattern an operator's A2A task runs under.
pub const PATTERN: (&str, &str) = ("intercom-operator-task", "1");
/// The policy revision bound into every A2A decision.
pub const POLICY_REVISION: &str = "reach.intercom.operator-task/1";
/// The ward subject of every operator A2A task's scope (see `IntercomRoute::sigil`).
const OPERATOR_SUBJECT: &str = "operator";
/// Longest operator text carried (one A2A text part).
const MAX_TEXT_BYTES: usize = 4096;

/// `settings.intercom` of core: the enrolled peer (the exact URL egress-provider's
/// `settings.intercom.peer` names; every decision binds it), its enrollment receipt, and the
/// polling budget.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntercomSettings {
    pub peer: String,
    /// What the operator admitted about the peer's resend guarantee. Absent: no resend, an
    /// ambiguous send stays UNCERTAIN.
    #[serde(default)]
    pub receipt: Option<EnrollmentReceipt>,
    /// GetTask polls per request; the Stasis then polls on at the same pace until the
    /// deadline. The defaults are `reach_intercom::PollBudget::DEFAULT`, sized there against
    /// ward's default task budgets so a task the peer finishes before its deadline is adopted
    /// within one interval of finishing (issue #33).
    #[serde(default = "default_max_polls")]
    pub max_polls: u32,
    #[serde(default = "default_poll_interval_ms")]
    pub poll_interval_ms: u64,
    /// The task's local deadline, from its first request.
    #[serde(default = "default_deadline_secs")]
    pub deadline_secs: u64,
}

fn default_max_polls() -> u32 {
    PollBudget::DEFAULT.max_polls
}
fn default_poll_interval_ms() -> u64 {
    PollBudget::DEFAULT.interval.as_millis() as u64
}
fn default_deadline_secs() -> u64 {
    reach_intercom::task::DEFAULT_DEADLINE.as_secs()
}

/// What core needs to run operator tasks.
#[derive(Debug, Clone)]
pub struct IntercomRoute {
    settings: Arc<IntercomSettings>,
    provider: ProviderCallClient<Channel>,
    ward: WardClient<Channel>,
    vault: Arc<Phylactery>,
    habitat: String,
    /// Task ids some driver in this process is moving (an operator request or the Stasis):
    /// one driver per task, so a request never polls or settles beside another.
    driving: Arc<Mutex<HashSet<String>>>,
    /// Adopted answers for the operator who was not waiting when their task settled.
    held: Arc<held::HeldAnswers>,
    /// The peer's quarantined status messages of tasks it settled FAILED, REJECTED or
    /// INPUT_REQUIRED (issue #33 item 7), held like answers, for `reach a2a status` only.
    peer_messages: Arc<held::HeldAnswers>,
}

/// This process drives the task while it is held; dropping it lets another driver take it.
#[derive(Debug)]
pub(crate) struct Driving {
    set: Arc<Mutex<HashSet<String>>>,
    task_id: String,
}

impl Drop for Driving {
    fn drop(&mut self) {
        self.set
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.task_id);
    }
}

/// Where a task stands, as the operator's response reports it.
pub(crate) struct Report {
    phase: String,
    code: String,
    answer: String,
    turn_state: TurnState,
}

impl IntercomRoute {
    pub fn new(
        settings: IntercomSettings,
        provider: Channel,
        ward: Channel,
        vault: Phylactery,
        habitat: String,
    ) -> Self {
        IntercomRoute {
            settings: Arc::new(settings),
            provider: ProviderCallClient::new(provider),
            ward: WardClient::new(ward),
            vault: Arc::new(vault),
            habitat,
            driving: Arc::new(Mutex::new(HashSet::new())),
            held: Arc::default(),
            peer_messages: Arc::default(),
        }
    }

    /// The peer's status message of `task_id`'s FAILED, REJECTED or INPUT_REQUIRED answer
    /// while core holds it: the text its quarantine passed, or `withheld: <quarantine code>`.
    /// For the operator's trail port only, never a delivery.
    pub fn peer_message(&self, task_id: &str) -> Option<String> {
        self.peer_messages.get(task_id, Instant::now())
    }

    /// Durable Stasis at start: a background task hands every unsettled operator task in the
    /// ledger to the Stasis once the vault serves ([`stasis::resume_all`]).
    pub fn resume_parked(&self) {
        tokio::spawn(stasis::resume_all(self.clone()));
    }

    /// Whether the operator's `peer` names the enrolled peer: empty, its exact URL, or the
    /// host of that URL.
    fn names_peer(&self, peer: &str) -> bool {
        let url = &self.settings.peer;
        let host = url
            .strip_prefix("https://")
            .and_then(|rest| rest.split(['/', ':']).next())
            .unwrap_or_default();
        peer.is_empty() || peer == url || (!host.is_empty() && peer == host)
    }

    /// Takes the task for this driver, unless another holds it.
    pub(crate) fn claim(&self, task_id: &str) -> Option<Driving> {
        let mut set = self.driving.lock().unwrap_or_else(|e| e.into_inner());
        set.insert(task_id.to_owned()).then(|| Driving {
            set: Arc::clone(&self.driving),
            task_id: task_id.to_owned(),
        })
    }

    /// The local deadline of a task committed at `created`.
    pub(crate) fn deadline(&self, created: ledger::UnixMillis) -> ledger::UnixMillis {
        created.plus(Duration::from_secs(self.settings.deadline_secs))
    }

    pub(crate) fn poll_budget(&self) -> PollBudget {
        PollBudget {
            max_polls: self.settings.max_polls,
            interval: Duration::from_millis(self.settings.poll_interval_ms),
        }
    }

    fn spec(&self, task_id: &str, text: &str, created: ledger::UnixMillis) -> TaskSpec {
        TaskSpec {
            task_id: task_id.to_owned(),
            message_id: format!("msg-{task_id}"),
            context_id: None,
            parts: vec![Part::text(text)],
            deadline: self.deadline(created),
            polls: self.poll_budget(),
        }
    }

    pub(crate) fn journal(&self, run: ledger::RunId) -> PhylacteryJournal {
        PhylacteryJournal {
            vault: Arc::clone(&self.vault),
            run,
            clock: Arc::new(SystemClock),
        }
    }

    pub(crate) fn transport(&self) -> ProviderTransport {
        ProviderTransport {
            provider: self.provider.clone(),
            peer: self.settings.peer.clone(),
        }
    }

    pub(crate) fn receipt(&self) -> EnrollmentReceipt {
        self.settings
            .receipt
            .clone()
            .unwrap_or_else(|| EnrollmentReceipt::without_resend(self.settings.peer.clone()))
    }

    pub(crate) fn vault(&self) -> &Phylactery {
        &self.vault
    }

    /// A decision issuer for the turn's run under the run's Sigil. When ward refuses the scope
    /// (an expired or revoked Sigil), the issuer refuses every decision with ward's code: the
    /// driver then settles the task at its deadline (or REVOKED), sending nothing.
    pub(crate) async fn issuer(&self, turn: &str) -> WardIssuer {
        WardIssuer::new(self.ward.clone(), self.sigil(turn).await, turn.to_owned())
    }

    /// Runs (or resumes) one operator task and reports where it stands. A task still parked
    /// or uncertain when this request's poll budget ends is handed to the Stasis, which
    /// drives it to a terminal and terminates its turn.
    pub async fn send(
        &self,
        operator: &str,
        r: pb::SendA2aTaskRequest,
    ) -> Result<pb::SendA2aTaskResponse, Status> {
        if r.text.trim().is_empty() || r.text.len() > MAX_TEXT_BYTES {
            return Err(Status::invalid_argument(
                "text must be non-empty and at most 4096 bytes",
            ));
        }
        if reach_portal::cut::contains_sigil(&r.text) {
            return Err(Status::invalid_argument("egress/sigil-presented"));
        }
        if !self.names_peer(&r.peer) {
            return Err(Status::invalid_argument(
                "intercom/unknown-peer: core enrolls one peer (settings.intercom.peer)",
            ));
        }
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        // Refuses a bad task id before anything is written.
        let fresh =
            OutboundTask::new(self.spec(&r.task_id, &r.text, clock.now())).map_err(refusal)?;
        let admitted = self
            .vault
            .admit(&ledger::AdmissionRequest {
                key: ledger::EventKey {
                    platform: "operator".into(),
                    adapter_revision: POLICY_REVISION.into(),
                    application_id: "reach".into(),
                    event_kind: "A2A_TASK".into(),
                    external_event_id: r.task_id.clone(),
                },
                payload_digest: Sha256Digest::of(r.text.as_bytes()),
                habitat: self.habitat.clone(),
            })
            .await
            .map_err(ledger_status)?;
        let turn = admitted.status().turn_id.clone();
        let respond = |rep: Report, polls: u32| pb::SendA2aTaskResponse {
            task_id: r.task_id.clone(),
            turn_id: turn.0.clone(),
            phase: rep.phase,
            code: rep.code,
            answer: rep.answer,
            polls,
            turn_state: rep.turn_state.to_string(),
        };
        let existing = match self.vault.intercom_task(&r.task_id).await {
            Ok(rec) => Some(rec),
            Err(LedgerError::NotFound { .. }) => None,
            Err(e) => return Err(ledger_status(e)),
        };
        let turn_state = self.vault.turn_state(&turn).await.map_err(ledger_status)?;
        // A settled turn, or a task another driver holds: report the ledger, send nothing.
        let guard = if turn_state.is_terminal() {
            None
        } else {
            self.claim(&r.task_id)
        };
        let Some(guard) = guard else {
            let code = if turn_state.is_terminal() {
                None
            } else {
                Some("intercom/in-stasis")
            };
            let mut report = ledger_report(existing.as_ref(), turn_state, code);
            if turn_state == TurnState::Succeeded {
                report.answer = self
                    .held
                    .get(&r.task_id, Instant::now())
                    .unwrap_or_default();
            }
            return Ok(respond(report, 0));
        };
        let run = self
            .vault
            .begin_run(
                &turn,
                &ledger::PatternRevision {
                    pattern_id: PATTERN.0.into(),
                    revision: PATTERN.1.into(),
                },
            )
            .await
            .map_err(ledger_status)?;
        let journal = self.journal(run);
        let mut task = match &existing {
            Some(rec) => journal
                .resume(self.spec(&r.task_id, &r.text, rec.created_at))
                .await
                .map_err(refusal)?,
            None => fresh,
        };
        let issuer = self.issuer(&turn.0).await;
        if let (Some(code), None) = (issuer.scope_refusal(), &existing) {
            // Nothing was committed and no decision can be issued for this run: the turn ends
            // REFUSED with ward's code. (A committed task is driven on: its issuer refuses
            // every decision, and the deadline settles it.)
            self.refuse_turn(&turn, code).await?;
            return Err(Status::failed_precondition(format!(
                "ward refused the task's scope: {code}"
            )));
        }
        tracing::debug!(operator, task = %r.task_id, "operator A2A task driven");
        let transport = self.transport();
        let receipt = self.receipt();
        let intercom = Intercom {
            client: &transport,
            authority: &issuer,
            receipt: &receipt,
            journal: &journal,
            clock,
        };
        // A resumed task's poll numbers continue from before; report this request's polls.
        let polls_before = task.polls();
        let stopped = match task.phase() {
            Phase::Committed => intercom.run(&mut task).await.err(),
            Phase::Submitted | Phase::Polling => intercom.poll(&mut task).await.err(),
            Phase::Uncertain => intercom.reconcile(&mut task).await.err(),
            _ => None,
        };
        let polls = task.polls() - polls_before;
        let phase = task.phase();
        let report = if phase.is_terminal() {
            self.settle_turn(&turn, &task).await?
        } else if let (Phase::Committed, Some(IntercomRefusal::DecisionRefused { code })) =
            (phase, &stopped)
            && issuer.refused_for_good()
        {
            // Ward will never authorize the send: nothing was committed or sent, and the turn
            // ends REFUSED with ward's code. A refusal for now (rate, concurrency) leaves the
            // turn OPEN: the same task id asked later tries again under a new decision.
            Report {
                phase: phase.to_string(),
                code: code.clone(),
                answer: String::new(),
                turn_state: self.refuse_turn(&turn, code).await?,
            }
        } else {
            let code = match &stopped {
                Some(e) => e.to_string(),
                None => last_code(&task),
            };
            if matches!(phase, Phase::Submitted | Phase::Polling | Phase::Uncertain) {
                tokio::spawn(stasis::drive(
                    self.clone(),
                    stasis::Parked {
                        task,
                        turn: turn.clone(),
                        journal,
                        issuer,
                        guard,
                    },
                ));
            }
            Report {
                phase: phase.to_string(),
                code,
                answer: String::new(),
                turn_state: TurnState::Open,
            }
        };
        tracing::info!(task = %r.task_id, turn = %turn.0, phase = %report.phase, code = %report.code, turn_state = %report.turn_state, "operator A2A task");
        Ok(respond(report, polls))
    }

    /// Terminates a turn whose task ward will never authorize: REFUSED with ward's `code`.
    async fn refuse_turn(&self, turn: &ledger::TurnId, code: &str) -> Result<TurnState, Status> {
        self.terminate(turn, TurnState::Refused, code.to_owned(), None)
            .await
    }

    /// Commits the turn's terminal (no delivery intent: the operator reads the response); a
    /// turn already terminated (a replay, another driver) is reported as it is.
    async fn terminate(
        &self,
        turn: &ledger::TurnId,
        outcome: TurnState,
        reason: String,
        answer_digest: Option<Sha256Digest>,
    ) -> Result<TurnState, Status> {
        let commit = ledger::TurnCommit {
            outcome,
            reason: Some(reason),
            answer_digest,
            intent: None,
        };
        match self.vault.commit_turn(turn, &commit).await {
            Ok(c) => Ok(c.state),
            Err(LedgerError::TurnAlreadyTerminal { .. }) => {
                self.vault.turn_state(turn).await.map_err(ledger_status)
            }
            Err(e) => Err(ledger_status(e)),
        }
    }

    /// Terminates the task's turn from its terminal phase (`ledger::turn_outcome`), after the
    /// quarantine of a SUCCEEDED task's answer: an adopted answer's digest is the turn's
    /// answer; a quarantined one settles REFUSED with its `quarantine/*` code and is kept
    /// nowhere. No delivery intent: the operator reads the response. A turn already
    /// terminated (a replay, another driver) is reported as it is.
    pub(crate) async fn settle_turn(
        &self,
        turn: &ledger::TurnId,
        task: &OutboundTask,
    ) -> Result<Report, Status> {
        let phase = task.phase();
        let mut code = last_code(task);
        if code.is_empty() {
            // Resumed already settled: this process saw no transition; the ledger holds the
            // code the settling one recorded (`<code> attempt=…`).
            if let Ok(record) = self.vault.intercom_task(&task.spec().task_id).await {
                code = recorded_code(&record).to_owned();
            }
        }
        let Some(outcome) = turn_outcome(phase, &code) else {
            return Err(Status::internal("intercom/not-terminal"));
        };
        let (outcome, reason, answer) = match (phase, task.answer()) {
            (Phase::Succeeded, None) => (
                TurnState::Failed,
                "intercom/answer-not-retained".to_owned(),
                None,
            ),
            (Phase::Succeeded, Some(a)) => match quarantine_answer(a) {
                Ok(text) => (outcome, code, Some(text)),
                Err(q) => (TurnState::Refused, q.code(), None),
            },
            _ => (outcome, code, None),
        };
        let digest = answer.as_ref().map(|t| Sha256Digest::of(t.as_bytes()));
        let turn_state = self
            .terminate(turn, outcome, reason.clone(), digest)
            .await?;
        tracing::info!(task = %task.spec().task_id, turn = %turn.0, phase = %phase, %turn_state, reason, "operator A2A turn settled");
        if let (Some(text), TurnState::Succeeded) = (&answer, turn_state) {
            self.held
                .hold(&task.spec().task_id, text.clone(), Instant::now());
        }
        // Why the peer failed, rejected or asked for input: quarantined like an answer, held
        // for the operator, never adopted, logged or delivered.
        if let Some(judged) = task.answer().and_then(quarantine_status_message) {
            let shown = judged.unwrap_or_else(|q| format!("withheld: {}", q.code()));
            self.peer_messages
                .hold(&task.spec().task_id, shown, Instant::now());
        }
        Ok(Report {
            phase: phase.to_string(),
            code: reason,
            answer: answer.unwrap_or_default(),
            turn_state,
        })
    }

    /// The Sigil of the task's run, held by core only, or ward's refusal code. The scope is
    /// keyed by the operator role ([`OPERATOR_SUBJECT`]), not by the caller's leaf: ward binds
    /// one scope to a run, and the Stasis must replay the same admission after a restart with
    /// no operator present (ward returns the run's live Sigil).
    async fn sigil(&self, run: &str) -> Result<String, String> {
        let r = self
            .ward
            .clone()
            .admit_scope(AdmitScopeRequest {
                platform: "operator".into(),
                application_id: "reach".into(),
                guild_id: "intercom".into(),
                channel_id: "intercom".into(),
                subject_id: OPERATOR_SUBJECT.into(),
                run_id: run.into(),
                expires_at_ms: 0,
            })
            .await
            .map_err(|s| format!("ward/unavailable: {:?}", s.code()))?
            .into_inner();
        if r.sigil_id.is_empty() {
            return Err(r.refusal_code);
        }
        Ok(r.sigil_id)
    }
}

/// The code of the task's last transition.
fn last_code(task: &OutboundTask) -> String {
    task.trail()
        .last()
        .map(|e| e.code.clone())
        .unwrap_or_default()
}

/// The code a task's record carries: its evidence is `<code> attempt=… decision=… response=…`,
/// so the code is the first word ("" without evidence).
fn recorded_code(record: &ledger::IntercomTaskRecord) -> &str {
    record
        .evidence
        .as_deref()
        .and_then(|e| e.split(' ').next())
        .unwrap_or_default()
}

/// What the ledger says of a task this request does not drive.
fn ledger_report(
    record: Option<&ledger::IntercomTaskRecord>,
    turn_state: TurnState,
    code: Option<&str>,
) -> Report {
    let phase = record
        .map(|r| resumed_phase(r.state).to_string())
        .unwrap_or_default();
    let recorded = record.map(recorded_code).unwrap_or_default();
    Report {
        phase,
        code: code.unwrap_or(recorded).to_owned(),
        answer: String::new(),
        turn_state,
    }
}

fn refusal(e: IntercomRefusal) -> Status {
    Status::failed_precondition(e.to_string())
}

fn ledger_status(e: LedgerError) -> Status {
    Status::failed_precondition(format!("{}: {e}", e.code()))
}
