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
//! is redeemed and SUBMITTING before the first byte, so a parked task is durable. Asked again
//! with the same task id and text (after a restart, or to continue a task whose poll budget
//! ran out), core rebuilds the same envelope and resumes from the ledger (`resume`): PARKED
//! polls on, SUBMITTING becomes UNCERTAIN (never resent without the receipt), OUTBOX is
//! abandoned unsent.

use std::sync::Arc;
use std::time::Duration;

use reach_digest::Sha256Digest;
use reach_intercom::ledger::PhylacteryJournal;
use reach_intercom::{
    Attempt, DecisionAuthority, DecisionId, DecisionRefusal, EnrollmentReceipt, Intercom,
    IntercomRefusal, OutboundTask, Part, Phase, PollBudget, Redeemed, TaskSpec, Transmitted,
    Transport, answer_text,
};
use reach_phylactery as ledger;
use reach_phylactery::{Clock, LedgerError, Phylactery, SystemClock};
use reach_proto::core::v1 as pb;
use reach_proto::egress::v1::CallRequest;
use reach_proto::egress::v1::provider_call_client::ProviderCallClient;
use reach_proto::ward::v1::ward_client::WardClient;
use reach_proto::ward::v1::{AdmitScopeRequest, IssueDecisionRequest};
use tonic::Status;
use tonic::transport::Channel;

/// The Pattern an operator's A2A task runs under.
pub const PATTERN: (&str, &str) = ("intercom-operator-task", "1");
/// The policy revision bound into every A2A decision.
pub const POLICY_REVISION: &str = "reach.intercom.operator-task/1";
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
    /// GetTask polls per request. Each needs a decision, and ward's default budgets admit four
    /// live decisions per Sigil (a decision lives 30 s, redeemed or not) and eight in all: the
    /// send and three polls.
    #[serde(default = "default_max_polls")]
    pub max_polls: u32,
    #[serde(default = "default_poll_interval_ms")]
    pub poll_interval_ms: u64,
    /// The task's local deadline, from its first request.
    #[serde(default = "default_deadline_secs")]
    pub deadline_secs: u64,
}

fn default_max_polls() -> u32 {
    3
}
fn default_poll_interval_ms() -> u64 {
    1_000
}
fn default_deadline_secs() -> u64 {
    120
}

/// What core needs to run operator tasks.
#[derive(Debug, Clone)]
pub struct IntercomRoute {
    settings: Arc<IntercomSettings>,
    provider: ProviderCallClient<Channel>,
    ward: WardClient<Channel>,
    vault: Arc<Phylactery>,
    habitat: String,
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
        }
    }

    fn spec(&self, task_id: &str, text: &str, now: ledger::UnixMillis) -> TaskSpec {
        TaskSpec {
            task_id: task_id.to_owned(),
            message_id: format!("msg-{task_id}"),
            context_id: None,
            parts: vec![Part::text(text)],
            deadline: now.plus(Duration::from_secs(self.settings.deadline_secs)),
            polls: PollBudget {
                max_polls: self.settings.max_polls,
                interval: Duration::from_millis(self.settings.poll_interval_ms),
            },
        }
    }

    /// Runs (or resumes) one operator task and reports where it stands.
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
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let spec = self.spec(&r.task_id, &r.text, clock.now());
        // Refuses a bad task id before anything is written.
        let fresh = OutboundTask::new(spec.clone()).map_err(refusal)?;
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
        let journal = PhylacteryJournal {
            vault: Arc::clone(&self.vault),
            run,
            clock: Arc::clone(&clock),
        };
        let mut task = match self.vault.intercom_task(&r.task_id).await {
            Ok(_) => journal.resume(spec).await.map_err(refusal)?,
            Err(LedgerError::NotFound { .. }) => fresh,
            Err(e) => return Err(ledger_status(e)),
        };
        let sigil = self.sigil(&turn.0, operator).await?;
        let issuer = WardIssuer {
            ward: self.ward.clone(),
            sigil,
            run: turn.0.clone(),
        };
        let transport = ProviderTransport {
            provider: self.provider.clone(),
            peer: self.settings.peer.clone(),
        };
        let no_receipt = EnrollmentReceipt::without_resend(self.settings.peer.clone());
        let intercom = Intercom {
            client: &transport,
            authority: &issuer,
            receipt: self.settings.receipt.as_ref().unwrap_or(&no_receipt),
            journal: &journal,
            clock,
        };
        let stopped = match task.phase() {
            Phase::Committed => intercom.run(&mut task).await.err(),
            Phase::Submitted | Phase::Polling => intercom.poll(&mut task).await.err(),
            Phase::Uncertain => intercom.reconcile(&mut task).await.err(),
            _ => None,
        };
        let code = match &stopped {
            Some(e) => e.to_string(),
            None => task
                .trail()
                .last()
                .map(|e| e.code.clone())
                .unwrap_or_default(),
        };
        tracing::info!(task = %r.task_id, turn = %turn.0, phase = %task.phase(), code, "operator A2A task");
        Ok(pb::SendA2aTaskResponse {
            task_id: r.task_id,
            turn_id: turn.0,
            phase: task.phase().to_string(),
            code,
            // Quarantined content for the operator; never posted anywhere by core.
            answer: task.answer().map(answer_text).unwrap_or_default(),
            polls: task.polls(),
        })
    }

    /// A Sigil for the task's run, held by core only.
    async fn sigil(&self, run: &str, operator: &str) -> Result<String, Status> {
        let r = self
            .ward
            .clone()
            .admit_scope(AdmitScopeRequest {
                platform: "operator".into(),
                application_id: "reach".into(),
                guild_id: "intercom".into(),
                channel_id: "intercom".into(),
                subject_id: operator.into(),
                run_id: run.into(),
                expires_at_ms: 0,
            })
            .await
            .map_err(|s| Status::unavailable(format!("ward: {:?}", s.code())))?
            .into_inner();
        if r.sigil_id.is_empty() {
            return Err(Status::failed_precondition(format!(
                "ward refused the task's scope: {}",
                r.refusal_code
            )));
        }
        Ok(r.sigil_id)
    }
}

fn refusal(e: IntercomRefusal) -> Status {
    Status::failed_precondition(e.to_string())
}

fn ledger_status(e: LedgerError) -> Status {
    Status::failed_precondition(format!("{}: {e}", e.code()))
}

/// Issues one `a2a-task` decision per physical attempt at ward; redemption is egress-provider's.
struct WardIssuer {
    ward: WardClient<Channel>,
    sigil: String,
    run: String,
}

impl DecisionAuthority for WardIssuer {
    async fn obtain_decision(&self, attempt: &Attempt) -> Result<DecisionId, DecisionRefusal> {
        let r = self
            .ward
            .clone()
            .issue_decision(IssueDecisionRequest {
                sigil_id: self.sigil.clone(),
                run_id: self.run.clone(),
                attempt_id: attempt.attempt_id(),
                destination: attempt.destination.clone(),
                purpose: reach_intercom::decision::PURPOSE.into(),
                payload_digest: attempt.payload_digest.to_string(),
                labels: vec!["public".into()],
                // The operator's text goes as written: the receipt binds the body and says
                // nothing was withheld (there was no guest context to cut).
                cut_receipt_digest: operator_receipt(&attempt.payload_digest).to_string(),
                policy_revision: POLICY_REVISION.into(),
                max_tokens: 0,
                max_spend_micros: 0,
            })
            .await
            .map_err(|s| DecisionRefusal::Refused {
                code: format!("ward/unavailable: {:?}", s.code()),
            })?
            .into_inner();
        match r.refusal_code.as_str() {
            "" => Ok(DecisionId(r.decision_id)),
            "sigil/revoked" | "decision/revoked" => Err(DecisionRefusal::Revoked {
                code: r.refusal_code,
            }),
            _ => Err(DecisionRefusal::Refused {
                code: r.refusal_code,
            }),
        }
    }

    async fn redeem(&self, _d: &DecisionId, _a: &Attempt) -> Result<(), DecisionRefusal> {
        // egress-provider redeems at ward, at byte time, with the digest it computes itself.
        Ok(())
    }
}

/// The receipt of an operator task's payload: `reach.intercom.operator-receipt/1`, the body's
/// digest, nothing withheld.
fn operator_receipt(payload: &Sha256Digest) -> Sha256Digest {
    Sha256Digest::of(
        format!("{{\"kind\":\"reach.intercom.operator-receipt/1\",\"payload\":\"{payload}\",\"withheld\":[]}}")
            .as_bytes(),
    )
}

/// One attempt over `ProviderCall/Call`: the decision id, attempt id and exact body go to
/// egress-provider, which redeems and carries them.
struct ProviderTransport {
    provider: ProviderCallClient<Channel>,
    peer: String,
}

impl Transport for ProviderTransport {
    type Ready = CallRequest;

    fn url(&self) -> String {
        self.peer.clone()
    }

    async fn prepare(
        &self,
        redeemed: Redeemed,
        body: Vec<u8>,
    ) -> Result<CallRequest, IntercomRefusal> {
        Ok(CallRequest {
            decision_id: redeemed.decision().0.clone(),
            attempt_id: redeemed.attempt().attempt_id(),
            payload: body,
            kind: reach_intercom::decision::PURPOSE.into(),
        })
    }

    async fn transmit(&self, call: CallRequest) -> Transmitted {
        match self.provider.clone().call(call).await {
            Ok(r) => {
                let r = r.into_inner();
                match (r.transmitted, r.failure_code.is_empty()) {
                    (false, _) => Transmitted::NotSent {
                        code: r.failure_code,
                    },
                    (true, false) => Transmitted::Ambiguous {
                        code: r.failure_code,
                    },
                    (true, true) => Transmitted::Answered {
                        status: u16::try_from(r.http_status).unwrap_or(0),
                        digest: Sha256Digest::of(&r.body),
                        body: r.body,
                    },
                }
            }
            // The call may have reached egress-provider and its bytes the peer.
            Err(s) => Transmitted::Ambiguous {
                code: format!("egress/unavailable: {:?}", s.code()),
            },
        }
    }
}
