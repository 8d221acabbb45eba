//! One passage through the inference boundary, exactly like a Portal call: the pack's prompt
//! rendered with the goal and the explicit evidence (`reach-passage`), a Sigil for the
//! passage and a `model-completion` EgressDecision bound to the payload's digest, the
//! passage's ServiceJobAttempt recorded SUBMITTING before the call, one call to
//! egress-provider, and the quarantine that admits only a schema-valid candidate or review.

use std::time::Duration;

use reach_digest::Sha256Digest;
use reach_passage::Evidence;
use reach_passage::quarantine::{Answer, PassagePayload};
use reach_passage::render::{RenderInputs, render};
use reach_phylactery as ledger;
use reach_proto::egress::v1::CallRequest;
use reach_proto::ward::v1::{AdmitScopeRequest, IssueDecisionRequest};
use reach_taskpack::VerifiedPack;
use reach_taskpack::source::Role;

use super::Inner;

/// The purpose ward maps to egress-provider.
const PURPOSE: &str = "model-completion";
/// The policy a passage's decision names: the Room's rendering and quarantine.
const POLICY_REVISION: &str = "reach.room.passage.v1";

/// How a passage ended.
#[derive(Debug)]
pub enum Outcome {
    /// The quarantine admitted the answer.
    Answered(Answer),
    /// Refused with a code, before the call or after it; nothing reached the compiler.
    Refused(String),
}

/// What the Passage fact records of it.
#[derive(Debug)]
pub struct Passage {
    pub attempt_id: String,
    pub decision_id: String,
    pub payload_digest: Sha256Digest,
    pub evidence_digest: Sha256Digest,
    pub outcome: Outcome,
    pub elapsed: Duration,
    /// What the runtime said the call used, and the call's wall time: charged once, with the
    /// passage's settlement.
    pub cost: ledger::PassageCost,
}

/// One passage of `role` in `round` of run `run_id`.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    inner: &Inner,
    run_id: &str,
    pack: &VerifiedPack,
    round: u32,
    role: Role,
    goal: &str,
    candidate: Option<&[u8]>,
    evidence: &[Evidence],
) -> Passage {
    let started = std::time::Instant::now();
    let attempt_id = format!("{run_id}-r{round}-{}", role.name());
    let mut p = Passage {
        attempt_id: attempt_id.clone(),
        decision_id: String::new(),
        payload_digest: Sha256Digest::of(b""),
        evidence_digest: Sha256Digest::of(b""),
        outcome: Outcome::Refused(String::new()),
        elapsed: Duration::ZERO,
        cost: ledger::PassageCost::default(),
    };
    let forbidden: Vec<&str> = inner.forbidden.iter().map(String::as_str).collect();
    let rendered = match render(
        pack,
        &RenderInputs {
            role,
            goal,
            candidate,
            evidence,
            forbidden: &forbidden,
        },
    ) {
        Ok(r) => r,
        Err(e) => {
            p.outcome = Outcome::Refused(e.code().to_string());
            p.elapsed = started.elapsed();
            return p;
        }
    };
    let turn = pack.sources().flow.turn(role);
    let payload = PassagePayload::new(&rendered, turn);
    let bytes = payload.to_bytes();
    p.payload_digest = Sha256Digest::of(&bytes);
    p.evidence_digest = rendered.evidence.digest();
    match call(
        inner,
        run_id,
        (round, role),
        &attempt_id,
        &mut p,
        &bytes,
        turn,
    )
    .await
    {
        Ok(content) => {
            p.outcome = match reach_passage::quarantine::quarantine(&payload, &content, candidate) {
                Ok(a) => Outcome::Answered(a),
                Err(e) => Outcome::Refused(e.code().to_string()),
            }
        }
        Err(code) => p.outcome = Outcome::Refused(code),
    }
    let settlement = match &p.outcome {
        Outcome::Answered(a) => ledger::PassageSettlement::Answered {
            answer_digest: Sha256Digest::of(a.bytes()),
        },
        Outcome::Refused(code) if code.starts_with("passage/unknown") => {
            ledger::PassageSettlement::Failed { code: code.clone() }
        }
        Outcome::Refused(code) => ledger::PassageSettlement::Refused { code: code.clone() },
    };
    if !p.decision_id.is_empty() {
        let r = match &settlement {
            ledger::PassageSettlement::Failed { code } if code.starts_with("passage/unknown") => {
                inner.vault.passage_mark_unknown(&attempt_id).await
            }
            s => {
                inner
                    .vault
                    .passage_settle_costed(&attempt_id, s, p.cost)
                    .await
            }
        };
        if let Err(e) = r {
            tracing::warn!(attempt = attempt_id, code = e.code(), "passage settle");
        }
    }
    p.elapsed = started.elapsed();
    p
}

/// The Sigil, the decision, SUBMITTING, and the one call; the answer's content or a code.
async fn call(
    inner: &Inner,
    run_id: &str,
    (round, role): (u32, Role),
    attempt_id: &str,
    p: &mut Passage,
    bytes: &[u8],
    turn: &reach_taskpack::source::Turn,
) -> Result<String, String> {
    let decision_id = decide(
        inner,
        Decide {
            attempt_id,
            channel: "room",
            destination: inner.settings.endpoint.clone(),
            payload_digest: p.payload_digest,
            // The passage's receipt: the digest of its evidence manifest (what was fenced in).
            receipt_digest: p.evidence_digest,
            labels: &["task-pack"],
            max_tokens: u64::from(turn.max_completion_tokens),
        },
    )
    .await?;
    p.decision_id = decision_id.clone();
    inner
        .vault
        .passage_submitting(&ledger::NewPassage {
            attempt_id: attempt_id.into(),
            run_id: run_id.into(),
            round,
            role: role.name().into(),
            payload_digest: p.payload_digest,
            decision_id: decision_id.clone(),
        })
        .await
        .map_err(|e| e.code().to_string())?;
    let mut provider = inner.provider.clone();
    let call = provider.call(CallRequest {
        decision_id,
        attempt_id: attempt_id.into(),
        payload: bytes.to_vec(),
        kind: PURPOSE.into(),
    });
    let wall = Duration::from_secs(turn.wall_s);
    let sent = std::time::Instant::now();
    let r = tokio::time::timeout(wall, call).await;
    p.cost.wall_ms = Some(sent.elapsed().as_millis() as u64);
    let r = match r {
        Err(_) => return Err("passage/unknown-wall".into()),
        Ok(Err(s)) => return Err(format!("passage/unknown-provider: {:?}", s.code())),
        Ok(Ok(r)) => r.into_inner(),
    };
    if !r.failure_code.is_empty() {
        // A provider's 4xx is its definite refusal of the request; anything else after bytes
        // left may or may not have been processed.
        let definite = r.failure_code.starts_with("provider/http-4");
        return Err(if r.transmitted && !definite {
            format!("passage/unknown: {}", r.failure_code)
        } else {
            r.failure_code
        });
    }
    let ret = reach_portal::ProviderReturn::from_bytes(&r.body).map_err(|q| q.code())?;
    if let Some(u) = ret.usage {
        p.cost.prompt_tokens = Some(u.prompt_tokens);
        p.cost.completion_tokens = Some(u.completion_tokens);
    }
    admit_return(&ret, &inner.settings.model, turn)?;
    Ok(ret.content)
}

/// What one `model-completion` decision binds.
struct Decide<'a> {
    attempt_id: &'a str,
    /// The scope's channel: `room` for a passage, `readiness` for a probe.
    channel: &'a str,
    destination: String,
    payload_digest: Sha256Digest,
    receipt_digest: Sha256Digest,
    labels: &'a [&'a str],
    max_tokens: u64,
}

/// A Sigil for the attempt and ward's `model-completion` decision bound to `d`: the decision's
/// id, or the refusal's code.
async fn decide(inner: &Inner, d: Decide<'_>) -> Result<String, String> {
    let mut ward = inner.ward.clone();
    let scope = ward
        .admit_scope(AdmitScopeRequest {
            platform: "operator".into(),
            application_id: "reach".into(),
            guild_id: "task-pack".into(),
            channel_id: d.channel.into(),
            // Each attempt is its own subject: a run's passages are bounded by its flow's
            // budget, not by the per-person rate limit public questions have.
            subject_id: d.attempt_id.into(),
            run_id: d.attempt_id.into(),
            expires_at_ms: 0,
        })
        .await
        .map_err(|s| format!("ward/unavailable: {:?}", s.code()))?
        .into_inner();
    if scope.sigil_id.is_empty() {
        return Err(scope.refusal_code);
    }
    let decision = ward
        .issue_decision(IssueDecisionRequest {
            sigil_id: scope.sigil_id,
            run_id: d.attempt_id.into(),
            attempt_id: d.attempt_id.into(),
            destination: d.destination,
            purpose: PURPOSE.into(),
            payload_digest: d.payload_digest.to_string(),
            labels: d.labels.iter().map(|l| (*l).to_owned()).collect(),
            cut_receipt_digest: d.receipt_digest.to_string(),
            policy_revision: POLICY_REVISION.into(),
            max_tokens: d.max_tokens,
            max_spend_micros: 0,
        })
        .await
        .map_err(|s| format!("ward/unavailable: {:?}", s.code()))?
        .into_inner();
    if !decision.refusal_code.is_empty() {
        return Err(decision.refusal_code);
    }
    Ok(decision.decision_id)
}

/// Readiness's probe of a real model runtime: one GET of its model list under its own
/// `model-completion` decision (bound to the list's URL and the probe's exact bytes), through
/// egress-provider like any passage. Reachable when the list names the pinned model; the
/// deterministic class needs no runtime.
pub async fn probe(inner: &Inner) -> reach_taskpack::ModelRuntime {
    use reach_taskpack::ModelRuntime;
    if inner.settings.class == "deterministic-inference" {
        return ModelRuntime::NotRequired;
    }
    let unreachable = |why: String| ModelRuntime::Unreachable { why };
    let Some(url) = reach_portal::openai::models_url(&inner.settings.endpoint) else {
        return unreachable("the endpoint does not end in /chat/completions".into());
    };
    let mut nonce = [0u8; 8];
    if ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut nonce).is_err() {
        return unreachable("no randomness for the probe's id".into());
    }
    let attempt_id = format!("probe-{}", hex::encode(nonce));
    let bytes = reach_portal::openai::probe_payload();
    let decision_id = match decide(
        inner,
        Decide {
            attempt_id: &attempt_id,
            channel: "readiness",
            destination: url,
            payload_digest: Sha256Digest::of(&bytes),
            receipt_digest: Sha256Digest::of(b""),
            labels: &["task-pack", "readiness"],
            max_tokens: 0,
        },
    )
    .await
    {
        Ok(id) => id,
        Err(why) => return unreachable(why),
    };
    let mut provider = inner.provider.clone();
    let call = provider.call(CallRequest {
        decision_id,
        attempt_id,
        payload: bytes,
        kind: PURPOSE.into(),
    });
    let r = match tokio::time::timeout(Duration::from_secs(15), call).await {
        Err(_) => return unreachable("no answer within 15 s".into()),
        Ok(Err(s)) => return unreachable(format!("egress-provider: {:?}", s.code())),
        Ok(Ok(r)) => r.into_inner(),
    };
    if !r.failure_code.is_empty() {
        return unreachable(r.failure_code);
    }
    match reach_portal::openai::ServedModels::from_bytes(&r.body) {
        Err(q) => unreachable(q.code()),
        Ok(m) if m.models.contains(&inner.settings.model) => ModelRuntime::Reachable,
        Ok(m) => ModelRuntime::OtherModel {
            model: inner.settings.model.clone(),
            served: m.models,
        },
    }
}

/// What core admits of a runtime's return before the answer's quarantine reads it: a whole
/// return, from the model the binding pins (exactly: a runtime serving another model, or
/// another build of it under another name, is refused), ended by `stop`, within the turn's
/// token bounds as the runtime itself counted them.
fn admit_return(
    ret: &reach_portal::ProviderReturn,
    model: &str,
    turn: &reach_taskpack::source::Turn,
) -> Result<(), String> {
    if !ret.complete {
        return Err("quarantine/incomplete".into());
    }
    if ret.model != model {
        return Err("inference/model-mismatch".into());
    }
    match ret.finish_reason.as_deref() {
        Some("stop") | None => {}
        Some("length") => return Err("quarantine/truncated".into()),
        Some(_) => return Err("quarantine/terminal".into()),
    }
    if let Some(u) = ret.usage
        && (u.completion_tokens > u64::from(turn.max_completion_tokens)
            || u.prompt_tokens > u64::from(turn.max_prompt_tokens))
    {
        return Err("inference/over-token-bound".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use reach_portal::{ProviderReturn, Usage};

    fn turn() -> reach_taskpack::source::Turn {
        let files = reach_taskpack::PackFiles::read_dir(
            &reach_taskpack::preparable_pack(
                &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packs"),
            )
            .unwrap(),
        )
        .unwrap();
        let sources = reach_taskpack::Sources::parse(&files).unwrap();
        sources.flow.turn(Role::Solver).clone()
    }

    #[test]
    fn a_return_is_admitted_only_whole_from_the_pinned_model_and_within_its_bounds() {
        let t = turn();
        let good = ProviderReturn {
            schema: reach_portal::openai::RETURN_SCHEMA.into(),
            id: "c-1".into(),
            model: "smollm2@sha256:b179".into(),
            content: "{}".into(),
            finish_reason: Some("stop".into()),
            complete: true,
            streamed: false,
            usage: Some(Usage {
                prompt_tokens: u64::from(t.max_prompt_tokens),
                completion_tokens: u64::from(t.max_completion_tokens),
            }),
        };
        assert_eq!(admit_return(&good, "smollm2@sha256:b179", &t), Ok(()));
        let over = |prompt: u32, completion: u32| ProviderReturn {
            usage: Some(Usage {
                prompt_tokens: u64::from(t.max_prompt_tokens + prompt),
                completion_tokens: u64::from(t.max_completion_tokens + completion),
            }),
            ..good.clone()
        };
        for (ret, code) in [
            (
                ProviderReturn {
                    complete: false,
                    ..good.clone()
                },
                "quarantine/incomplete",
            ),
            (
                ProviderReturn {
                    model: "smollm2@sha256:0000".into(),
                    ..good.clone()
                },
                "inference/model-mismatch",
            ),
            (
                ProviderReturn {
                    finish_reason: Some("length".into()),
                    ..good.clone()
                },
                "quarantine/truncated",
            ),
            (
                ProviderReturn {
                    finish_reason: Some("content_filter".into()),
                    ..good.clone()
                },
                "quarantine/terminal",
            ),
            (over(0, 1), "inference/over-token-bound"),
            (over(1, 0), "inference/over-token-bound"),
        ] {
            assert_eq!(
                admit_return(&ret, "smollm2@sha256:b179", &t),
                Err(code.to_owned())
            );
        }
    }
}
