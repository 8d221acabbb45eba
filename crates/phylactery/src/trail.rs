//! `reach trail <event-or-turn>`: the committed chain for one question, record by record.
//!
//! Every field printed is secret-free by construction: the ledger stores digests, ids, states
//! and reason codes, never payloads or credentials.

use crate::Phylactery;
use crate::backend::{Row, args};
use crate::error::Result;
use crate::ids::{AdmissionId, TurnId};

/// What to look the chain up by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrailKey {
    /// The platform's event id (may match several admissions across platforms/applications).
    ExternalEventId(String),
    AdmissionId(AdmissionId),
    TurnId(TurnId),
}

/// One committed record of the chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrailEntry {
    /// The seed's record name, e.g. `ReachTurn@1`.
    pub record: &'static str,
    pub id: String,
    pub fields: Vec<(&'static str, String)>,
    /// When the record (or its latest committed transition) was written, Unix ms.
    pub committed_at: i64,
}

impl std::fmt::Display for TrailEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} @{}", self.record, self.id, self.committed_at)?;
        for (k, v) in &self.fields {
            write!(f, " {k}={v}")?;
        }
        Ok(())
    }
}

fn fields(
    r: &Row,
    text: &[&'static str],
    ints: &[&'static str],
) -> Result<Vec<(&'static str, String)>> {
    let mut out = Vec::new();
    for &c in text {
        if let Some(v) = r.opt_text(c)? {
            out.push((c, v));
        }
    }
    for &c in ints {
        if let Some(v) = r.opt_int(c)? {
            out.push((c, v.to_string()));
        }
    }
    Ok(out)
}

fn latest(r: &Row, cols: &[&'static str]) -> Result<i64> {
    let mut t = 0;
    for &c in cols {
        if let Some(v) = r.opt_int(c)? {
            t = t.max(v);
        }
    }
    Ok(t)
}

impl Phylactery {
    /// The committed chain(s) for a key, in chain order; empty when nothing matches.
    pub async fn trail(&self, key: &TrailKey) -> Result<Vec<TrailEntry>> {
        let admissions: Vec<String> = match key {
            TrailKey::ExternalEventId(e) => self
                .pool()
                .fetch_all(
                    "SELECT admission_id FROM discord_event_admission WHERE external_event_id = $1 ORDER BY admitted_at, admission_id",
                    &args![e],
                )
                .await?
                .iter()
                .map(|r| r.text("admission_id"))
                .collect::<Result<_>>()?,
            TrailKey::AdmissionId(a) => vec![a.0.clone()],
            TrailKey::TurnId(t) => self
                .pool()
                .fetch_all("SELECT admission_id FROM reach_turn WHERE turn_id = $1", &args![&t.0])
                .await?
                .iter()
                .map(|r| r.text("admission_id"))
                .collect::<Result<_>>()?,
        };
        let mut out = Vec::new();
        for a in &admissions {
            self.trail_of_admission(a, &mut out).await?;
        }
        Ok(out)
    }

    async fn trail_of_admission(&self, a: &str, out: &mut Vec<TrailEntry>) -> Result<()> {
        let p = self.pool();
        let Some(r) = p
            .fetch_optional(
                "SELECT * FROM discord_event_admission WHERE admission_id = $1",
                &args![a],
            )
            .await?
        else {
            return Ok(());
        };
        out.push(TrailEntry {
            record: "DiscordEventAdmission@1",
            id: a.to_owned(),
            fields: fields(
                &r,
                &[
                    "platform",
                    "adapter_revision",
                    "application_id",
                    "event_kind",
                    "external_event_id",
                    "payload_digest",
                    "habitat",
                ],
                &[],
            )?,
            committed_at: r.int("admitted_at")?,
        });
        for r in p
            .fetch_all(
                "SELECT * FROM admission_security_fault WHERE admission_id = $1 ORDER BY fault_id",
                &args![a],
            )
            .await?
        {
            out.push(TrailEntry {
                record: "AdmissionSecurityFault",
                id: r.int("fault_id")?.to_string(),
                fields: fields(
                    &r,
                    &["kind", "presented_payload_digest", "presented_habitat"],
                    &[],
                )?,
                committed_at: r.int("recorded_at")?,
            });
        }
        let Some(turn) = p
            .fetch_optional(
                "SELECT * FROM reach_turn WHERE admission_id = $1",
                &args![a],
            )
            .await?
        else {
            return Ok(());
        };
        let turn_id = turn.text("turn_id")?;
        if let Some(r) = p
            .fetch_optional("SELECT * FROM run WHERE turn_id = $1", &args![&turn_id])
            .await?
        {
            let run_id = r.text("run_id")?;
            out.push(TrailEntry {
                record: "Run",
                id: run_id.clone(),
                fields: fields(&r, &["turn_id", "pattern_id", "pattern_revision"], &[])?,
                committed_at: r.int("started_at")?,
            });
            if let Some(r) = p
                .fetch_optional(
                    "SELECT b.*, s.corpus_id, s.source_revision FROM corpus_evidence_bundle_ref b
                     JOIN public_corpus_snapshot_ref s ON s.snapshot_digest = b.snapshot_digest WHERE b.run_id = $1",
                    &args![&run_id],
                )
                .await?
            {
                out.push(TrailEntry {
                    record: "PublicCorpusSnapshot@1",
                    id: r.text("snapshot_digest")?,
                    fields: fields(&r, &["corpus_id", "source_revision"], &[])?,
                    committed_at: r.int("recorded_at")?,
                });
                out.push(TrailEntry {
                    record: "CorpusEvidenceBundle@1",
                    id: r.text("bundle_digest")?,
                    fields: fields(&r, &["snapshot_digest"], &["passage_count"])?,
                    committed_at: r.int("recorded_at")?,
                });
            }
            if let Some(r) = p
                .fetch_optional(
                    "SELECT * FROM context_lineage WHERE run_id = $1",
                    &args![&run_id],
                )
                .await?
            {
                out.push(TrailEntry {
                    record: "ContextLineage+CutReceipt",
                    id: r.text("lineage_digest")?,
                    fields: fields(&r, &["labels", "cut_receipt_digest"], &[])?,
                    committed_at: r.int("recorded_at")?,
                });
            }
            for r in p
                .fetch_all("SELECT * FROM egress_decision_ref WHERE run_id = $1 ORDER BY recorded_at, decision_id", &args![&run_id])
                .await?
            {
                out.push(TrailEntry {
                    record: "EgressDecision",
                    id: r.text("decision_id")?,
                    fields: fields(&r, &["destination", "purpose", "payload_digest"], &["expires_at"])?,
                    committed_at: r.int("recorded_at")?,
                });
            }
            for r in p
                .fetch_all(
                    "SELECT a.*, c.outcome AS reconciled_outcome, c.evidence AS reconciliation_evidence
                     FROM service_job_attempt a LEFT JOIN attempt_reconciliation c ON c.attempt_id = a.attempt_id
                     WHERE a.run_id = $1 ORDER BY a.attempt_no",
                    &args![&run_id],
                )
                .await?
            {
                let attempt_id = r.text("attempt_id")?;
                out.push(TrailEntry {
                    record: "ServiceJobAttempt@1",
                    id: attempt_id.clone(),
                    fields: fields(
                        &r,
                        &[
                            "channel",
                            "state",
                            "decision_id",
                            "destination",
                            "request_digest",
                            "protocol_id",
                            "response_digest",
                            "detail",
                            "reconciled_outcome",
                            "reconciliation_evidence",
                        ],
                        &["attempt_no", "submitting_at"],
                    )?,
                    committed_at: latest(&r, &["persisted_at", "submitting_at", "settled_at"])?,
                });
                self.taints_of(&attempt_id, out).await?;
                if let Some(t) = p
                    .fetch_optional(
                        "SELECT * FROM intercom_task WHERE attempt_id = $1",
                        &args![&attempt_id],
                    )
                    .await?
                {
                    let task_id = t.text("task_id")?;
                    out.push(TrailEntry {
                        record: "IntercomTask",
                        id: task_id.clone(),
                        fields: fields(
                            &t,
                            &[
                                "state",
                                "peer",
                                "attempt_id",
                                "decision_id",
                                "message_id",
                                "payload_digest",
                                "remote_task_id",
                                "evidence",
                            ],
                            &["submitting_at"],
                        )?,
                        committed_at: latest(&t, &["created_at", "updated_at"])?,
                    });
                    self.taints_of(&task_id, out).await?;
                }
            }
        }
        out.push(TrailEntry {
            record: "ReachTurn@1",
            id: turn_id.clone(),
            fields: fields(&turn, &["state", "reason", "answer_digest"], &["opened_at"])?,
            committed_at: latest(&turn, &["opened_at", "terminal_at"])?,
        });
        // Parts 2..N of a multi-part answer, recorded with the turn. Each is printed before its
        // first intent; a part without one says whether it waits for the part before it or will
        // never be sent (an earlier part ended KNOWN_REJECTED or NOT_ATTEMPTED).
        let mut parts = p
            .fetch_all(
                "SELECT * FROM delivery_part WHERE turn_id = $1 ORDER BY part_no",
                &args![&turn_id],
            )
            .await?
            .into_iter()
            .peekable();
        // The state of the newest intent of the part printed last.
        let mut last_state: Option<String> = None;
        for r in p
            .fetch_all(
                "SELECT * FROM discord_delivery_intent WHERE turn_id = $1 ORDER BY seq",
                &args![&turn_id],
            )
            .await?
        {
            let intent_id = r.text("intent_id")?;
            let part_no = r.int("part_no")?;
            while let Some(part) = parts.next_if(|d| d.int("part_no").is_ok_and(|n| n <= part_no)) {
                out.push(part_entry(&part, "OPENED")?);
            }
            last_state = Some(r.text("state")?);
            out.push(TrailEntry {
                record: "DiscordDeliveryIntent@1",
                id: intent_id.clone(),
                fields: fields(
                    &r,
                    &[
                        "state",
                        "effect",
                        "payload_digest",
                        "nonce",
                        "supersedes",
                        "lease_owner",
                    ],
                    &[
                        "seq",
                        "part_no",
                        "generation",
                        "lease_expires_at",
                        "submitting_at",
                    ],
                )?,
                committed_at: latest(&r, &["created_at", "submitting_at", "settled_at"])?,
            });
            self.taints_of(&intent_id, out).await?;
            if let Some(d) = p
                .fetch_optional(
                    "SELECT * FROM reach_delivery WHERE intent_id = $1",
                    &args![&intent_id],
                )
                .await?
            {
                out.push(TrailEntry {
                    record: "ReachDelivery@1",
                    id: intent_id.clone(),
                    fields: fields(
                        &d,
                        &[
                            "outcome",
                            "effect",
                            "payload_digest",
                            "nonce",
                            "message_id",
                            "detail",
                        ],
                        &["claim_generation", "platform_status"],
                    )?,
                    committed_at: latest(&d, &["settled_at", "reconciled_at"])?,
                });
            }
            if let Some(c) = p
                .fetch_optional(
                    "SELECT * FROM delivery_reconciliation WHERE intent_id = $1",
                    &args![&intent_id],
                )
                .await?
            {
                out.push(TrailEntry {
                    record: "DeliveryReconciliation",
                    id: intent_id.clone(),
                    fields: fields(
                        &c,
                        &["evidence_kind", "message_id", "evidence", "recorded_by"],
                        &[],
                    )?,
                    committed_at: c.int("recorded_at")?,
                });
            }
        }
        let stopped = matches!(
            last_state.as_deref(),
            Some("KNOWN_REJECTED" | "NOT_ATTEMPTED")
        );
        for part in parts {
            out.push(part_entry(
                &part,
                if stopped { "NEVER_SENT" } else { "WAITING" },
            )?);
        }
        Ok(())
    }
    /// The taint marks that touched one record, oldest first.
    async fn taints_of(&self, record_id: &str, out: &mut Vec<TrailEntry>) -> Result<()> {
        for r in self
            .pool()
            .fetch_all(
                "SELECT m.taint_id, m.principal, m.reason, m.recorded_by, m.recorded_at, t.record,
                        t.state_at_taint, t.action
                 FROM tainted_record t JOIN taint_mark m ON m.taint_id = t.taint_id
                 WHERE t.record_id = $1 ORDER BY m.taint_id",
                &args![record_id],
            )
            .await?
        {
            out.push(TrailEntry {
                record: "Tainted",
                id: record_id.to_owned(),
                fields: fields(
                    &r,
                    &[
                        "record",
                        "principal",
                        "reason",
                        "action",
                        "state_at_taint",
                        "recorded_by",
                    ],
                    &["taint_id"],
                )?,
                committed_at: r.int("recorded_at")?,
            });
        }
        Ok(())
    }
}

/// One recorded later part (`delivery_part`) with what became of it: OPENED (its intent exists),
/// WAITING (the part before it is not KNOWN_SENT yet) or NEVER_SENT.
fn part_entry(r: &Row, delivery: &str) -> Result<TrailEntry> {
    let mut f = fields(r, &["effect", "payload_digest", "nonce"], &["part_no"])?;
    f.push(("delivery", delivery.to_owned()));
    Ok(TrailEntry {
        record: "DeliveryPart",
        id: r.text("intent_id")?,
        fields: f,
        committed_at: r.int("recorded_at")?,
    })
}
