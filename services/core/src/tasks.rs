//! Task runs (issue #37): core opens a Room for a goal under a runnable binding and drives it
//! (`drive`): passages through the inference boundary (`passage`), the Chair's decisions,
//! experiments through the coordinator step (`reach-experiment`), the execution records and
//! the recipe (`record`), storing every fact in the Phylactery as ward signed it (`signer`).
//! Core holds no signing key and no model credential; a run goes on when the operator's
//! stream ends, and its readers (`ListRuns`, `ShowRun`, `RunTrail`, `RunRecipe`) read the
//! ledger only.

use std::collections::HashMap;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use reach_phylactery::Phylactery;
use reach_proto::core::v1 as pb;
use reach_proto::egress::v1::provider_call_client::ProviderCallClient;
use reach_proto::ward::v1::ward_client::WardClient;
use tokio::sync::broadcast;
use tonic::Status;
use tonic::transport::Channel;

use crate::packs::PackPort;
use crate::ports::status as ledger_status;

mod classify;
mod drive;
mod journal;
mod passage;
mod record;
mod signer;

/// What `AskTask` streams.
pub type EventStream =
    Pin<Box<dyn tokio_stream::Stream<Item = Result<pb::TaskEvent, Status>> + Send + 'static>>;

/// `settings.tasks`: the binding's model runtime, as egress-provider is configured for it.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSettings {
    /// The chat completions URL every passage's decision binds; egress-provider's
    /// `settings.portal.endpoint` must be the same string.
    pub endpoint: String,
    /// The model asked for (recorded in the recipe's disclosure).
    pub model: String,
    /// The inference class the runtime is (`deterministic-inference` for the fixture).
    #[serde(default = "default_class")]
    pub class: String,
}

fn default_class() -> String {
    "deterministic-inference".into()
}

/// Core's task runs.
#[derive(Debug, Clone)]
pub struct TaskRuns {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    vault: Phylactery,
    packs: PackPort,
    ward: WardClient<Channel>,
    ward_channel: Channel,
    workbench: Channel,
    provider: ProviderCallClient<Channel>,
    settings: TaskSettings,
    /// Host paths that never leave in a payload or a retained record.
    forbidden: Vec<String>,
    /// Runs being driven, per pack (the binding's `max_concurrent_runs` bounds them).
    running: Mutex<HashMap<String, u32>>,
}

impl TaskRuns {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        vault: Phylactery,
        packs: PackPort,
        ward: Channel,
        workbench: Channel,
        provider: Channel,
        settings: TaskSettings,
        data_dir: &Path,
    ) -> Self {
        let mut forbidden = vec![data_dir.display().to_string()];
        if let Some(parent) = data_dir.parent().filter(|p| p.as_os_str().len() > 1) {
            forbidden.push(parent.display().to_string());
        }
        TaskRuns {
            inner: Arc::new(Inner {
                vault,
                packs,
                ward: WardClient::new(ward.clone()),
                ward_channel: ward,
                workbench,
                provider: ProviderCallClient::new(provider),
                settings,
                forbidden,
                running: Mutex::default(),
            }),
        }
    }

    /// After a restart: a passage left SUBMITTING may or may not have reached the runtime
    /// (marked `unknown`, never resent). An open run that can go on exactly is resumed
    /// (`drive::Run::resume`: between facts, or between the steps of an experiment on its
    /// live instance); any other is settled — its unfinished experiment destroyed and
    /// recorded, then its end (`task/interrupted` unless the Room demands another).
    pub fn recover(&self) {
        let inner = self.inner.clone();
        tokio::spawn(async move {
            // A run resumed by one attempt is driven already: never twice. An open run is
            // never abandoned: a role still starting, or a host slow to answer, is waited for
            // (every second for a minute, then every ten), however long it takes.
            let mut resumed = std::collections::HashSet::new();
            for attempt in 0u64.. {
                match recover_once(&inner, &mut resumed).await {
                    Ok(()) => return,
                    Err(e) => {
                        tracing::warn!(attempt, error = e.message(), "task-run recovery");
                        let pause = if attempt < 60 { 1 } else { 10 };
                        tokio::time::sleep(std::time::Duration::from_secs(pause)).await;
                    }
                }
            }
        });
    }

    /// Opens a run for `goal` under `pack` and drives it in its own task; the stream follows
    /// it until it ends or the caller leaves.
    pub async fn ask(&self, pack: String, goal: String) -> Result<EventStream, Status> {
        if goal.trim().is_empty() {
            return Err(Status::invalid_argument("task/goal-empty: name the goal"));
        }
        if goal.len() > 4000 {
            return Err(Status::invalid_argument(
                "task/goal-too-long: a goal is at most 4000 bytes",
            ));
        }
        let runnable = self.inner.packs.runnable(&pack).await?;
        // A binding that names its model pins it: core's runtime must be configured for it.
        if !runnable.model.is_empty() && runnable.model != self.inner.settings.model {
            return Err(Status::failed_precondition(format!(
                "inference/model-not-served: the binding of {pack} pins the model {}; core's \
                 runtime is configured for {}",
                runnable.model, self.inner.settings.model
            )));
        }
        // Readiness's last blocker: the model runtime, probed before anything is recorded.
        let blocker = match passage::probe(&self.inner).await {
            reach_taskpack::ModelRuntime::Unreachable { why } => {
                Some(reach_taskpack::Blocker::RuntimeUnreachable {
                    pack: pack.clone(),
                    why,
                })
            }
            reach_taskpack::ModelRuntime::OtherModel { model, served } => {
                Some(reach_taskpack::Blocker::ModelNotServed {
                    pack: pack.clone(),
                    model,
                    served,
                })
            }
            _ => None,
        };
        if let Some(b) = blocker {
            return Err(Status::failed_precondition(format!(
                "{}: {}",
                b.code(),
                b.message()
            )));
        }
        // The binding's concurrency, counted and taken under one lock.
        let slot = RunSlot::take(&self.inner, &pack, runnable.max_concurrent_runs)?;
        let (tx, rx) = broadcast::channel(256);
        let run = drive::Run::open(self.inner.clone(), runnable, goal, tx).await?;
        tokio::spawn(drive_then_settle(self.inner.clone(), run, slot));
        let stream = tokio_stream::wrappers::BroadcastStream::new(rx);
        let stream = tokio_stream::StreamExt::filter_map(stream, |e| e.ok().map(Ok));
        // Ends after the run's "ended" event.
        Ok(Box::pin(EndAfterLast::new(stream)))
    }

    pub async fn list(&self) -> Result<pb::ListRunsResponse, Status> {
        let runs = self.inner.vault.runs(100).await.map_err(ledger_status)?;
        Ok(pb::ListRunsResponse {
            runs: runs.iter().map(summary).collect(),
        })
    }

    /// Readiness's view of the binding's model runtime (a probe for a real model).
    pub async fn runtime(&self) -> reach_taskpack::ModelRuntime {
        passage::probe(&self.inner).await
    }

    pub async fn show(&self, run: &str) -> Result<pb::RunView, Status> {
        let row = self.row(run).await?;
        let facts = self.inner.vault.facts(run).await.map_err(ledger_status)?;
        let mut parsed = Vec::with_capacity(facts.len());
        for f in &facts {
            let fact = reach_room::fact::RoomFact::from_bytes(&f.bytes)
                .map_err(|e| Status::internal(format!("room/stored-fact: {e}")))?;
            parsed.push(fact);
        }
        let mut experiments = Vec::new();
        for x in self
            .inner
            .vault
            .experiments(run)
            .await
            .map_err(ledger_status)?
        {
            let steps = self
                .inner
                .vault
                .steps(&x.experiment_id)
                .await
                .map_err(ledger_status)?;
            experiments.push(experiment_json(&x, &steps));
        }
        let passages = self
            .inner
            .vault
            .passages(run)
            .await
            .map_err(ledger_status)?;
        // A failure is classified once the run has left `open`.
        let failure = (row.state != reach_phylactery::RunState::Open)
            .then(|| classify::report(row.end_code.as_deref()));
        let json = serde_json::to_string(&serde_json::json!({
            "run": summary_json(&row),
            "evidence_class": format!("{}/real-execution", self.inner.settings.class),
            "model": self.inner.settings.model,
            "failure": failure,
            "usage": usage_json(&passages),
            "passages": passages.iter().map(passage_json).collect::<Vec<_>>(),
            "facts": parsed,
            "experiments": experiments,
        }))
        .map_err(|e| Status::internal(e.to_string()))?;
        Ok(pb::RunView {
            run: Some(summary(&row)),
            json,
        })
    }

    pub async fn trail(&self, run: &str) -> Result<pb::RunTrailResponse, Status> {
        self.row(run).await?;
        let facts = self.inner.vault.facts(run).await.map_err(ledger_status)?;
        let records = self.inner.vault.records(run).await.map_err(ledger_status)?;
        Ok(pb::RunTrailResponse {
            facts: facts
                .into_iter()
                .map(|f| {
                    Ok(pb::SignedRoomRecord {
                        kind: "fact".into(),
                        signature: signer::signature_bytes(&f.signature)?,
                        bytes: f.bytes,
                        key_id: f.key_id,
                    })
                })
                .collect::<Result<_, Status>>()?,
            records: records
                .into_iter()
                .map(|r| {
                    Ok(pb::SignedRoomRecord {
                        kind: r.kind.to_string(),
                        signature: signer::signature_bytes(&r.signature)?,
                        bytes: r.bytes,
                        key_id: r.key_id,
                    })
                })
                .collect::<Result<_, Status>>()?,
            public_key: signer::public_key(&self.inner.ward).await?,
        })
    }

    pub async fn recipe(&self, run: &str) -> Result<pb::RunRecipeResponse, Status> {
        let row = self.row(run).await?;
        let Some(r) = self.inner.vault.recipe(run).await.map_err(ledger_status)? else {
            return Err(Status::not_found(format!(
                "task/no-recipe: {run} is {}{}",
                row.state,
                row.end_code
                    .as_deref()
                    .map(|c| format!(" ({c})"))
                    .unwrap_or_default()
            )));
        };
        Ok(pb::RunRecipeResponse {
            recipe: Some(pb::SignedRoomRecord {
                kind: r.kind.to_string(),
                bytes: r.bytes,
                signature: signer::signature_bytes(&r.signature)?,
                key_id: r.key_id,
            }),
            public_key: signer::public_key(&self.inner.ward).await?,
        })
    }

    async fn row(&self, run: &str) -> Result<reach_phylactery::RunRow, Status> {
        self.inner
            .vault
            .run(run)
            .await
            .map_err(ledger_status)?
            .ok_or_else(|| Status::not_found(format!("task/unknown-run: {run}")))
    }
}

async fn recover_once(
    inner: &Arc<Inner>,
    resumed: &mut std::collections::HashSet<String>,
) -> Result<(), Status> {
    for p in inner
        .vault
        .passages_unsettled()
        .await
        .map_err(ledger_status)?
    {
        inner
            .vault
            .passage_mark_unknown(&p.attempt_id)
            .await
            .map_err(ledger_status)?;
    }
    let mut left = Ok(());
    for run in inner.vault.runs(1000).await.map_err(ledger_status)? {
        if run.state != reach_phylactery::RunState::Open {
            continue;
        }
        if resumed.contains(&run.run_id) {
            continue;
        }
        match resume_run(inner, &run).await {
            Ok(true) => {
                resumed.insert(run.run_id.clone());
                continue;
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(run = run.run_id, error = e.message(), "run not resumed yet");
                left = Err(e);
                continue;
            }
        }
        // One run's instance still waiting for its destruction does not hold up the others.
        if let Err(e) = recover_run(inner, &run.run_id, "core restarted during the run").await {
            tracing::warn!(run = run.run_id, error = e.message(), "run not settled yet");
            left = Err(e);
        }
    }
    left
}

/// Drives open run `row` on from where core left it, when it can be resumed exactly and its
/// binding has a free slot; `false` when it is to be settled instead.
async fn resume_run(inner: &Arc<Inner>, row: &reach_phylactery::RunRow) -> Result<bool, Status> {
    let stored = inner
        .vault
        .facts(&row.run_id)
        .await
        .map_err(ledger_status)?;
    let mut facts = Vec::with_capacity(stored.len());
    for f in &stored {
        facts.push(
            reach_room::fact::RoomFact::from_bytes(&f.bytes)
                .map_err(|e| Status::internal(format!("room/stored-fact: {e}")))?,
        );
    }
    let mut key_id = stored.last().map(|f| f.key_id.clone()).unwrap_or_default();
    if let Some(signed_by) = publish_recorded(inner, &row.run_id, &mut facts).await? {
        key_id = signed_by;
    }
    let Some(run) = drive::Run::resume(inner.clone(), row, facts, key_id).await? else {
        return Ok(false);
    };
    let Ok(slot) = RunSlot::take(inner, run.pack(), run.max_concurrent_runs()) else {
        return Ok(false);
    };
    tracing::info!(run = row.run_id, "open run resumed after a restart");
    tokio::spawn(drive_then_settle(inner.clone(), run, slot));
    Ok(true)
}

/// The Experiment fact of run `run_id`'s experiment that finished and whose signed record was
/// published, but whose fact was not (a crash between the two), appended to `facts` as the
/// live path would have appended it: its end and verifier result read back from the record.
/// The key id it was signed with, or `None` when the Room awaits no such experiment.
async fn publish_recorded(
    inner: &Inner,
    run_id: &str,
    facts: &mut Vec<reach_room::fact::RoomFact>,
) -> Result<Option<String>, Status> {
    use reach_phylactery::RecordKind;
    use reach_room::fact::{ExperimentFact, FactBody};
    let mut room = reach_room::room::Room::replay(facts)
        .map_err(|e| Status::internal(format!("{}: {e}", e.code())))?;
    let reach_room::room::Next::Experiment {
        round,
        n,
        plan_digest,
    } = room.next()
    else {
        return Ok(None);
    };
    let vault = &inner.vault;
    let experiments = vault.experiments(run_id).await.map_err(ledger_status)?;
    let Some(x) = experiments
        .iter()
        .find(|x| x.n == n && x.state.is_terminal() && x.plan_digest == plan_digest)
    else {
        return Ok(None);
    };
    let Some(stored) = vault
        .records(run_id)
        .await
        .map_err(ledger_status)?
        .into_iter()
        .find(|r| r.kind == RecordKind::ExecutionRecord && r.n == n)
    else {
        return Ok(None);
    };
    let rec = reach_room::record::ExecutionRecord::from_bytes(&stored.bytes)
        .ok_or_else(|| Status::internal("room/stored-record"))?;
    let body = FactBody::Experiment(ExperimentFact {
        round,
        n,
        plan_digest,
        record_digest: stored.digest,
        verifier_passed: rec.verifier.as_ref().is_some_and(|v| v.passed),
        end: record::end_of_record(&rec, x.code.as_deref()),
    });
    let (fact, key_id) = append_fact(inner, run_id, &mut room, body).await?;
    tracing::info!(
        run = run_id,
        n,
        "an experiment's fact published from its signed record"
    );
    facts.push(fact);
    Ok(Some(key_id))
}

/// How long the settling of a run left open by an unconfirmed destruction waits between its
/// attempts: doubling from the first, up to the last.
const SETTLE_BACKOFF: (std::time::Duration, std::time::Duration) = (
    std::time::Duration::from_secs(1),
    std::time::Duration::from_secs(60),
);

/// Drives `run` to its end. A run its drive leaves open — an instance's destruction not
/// confirmed (ROLLBACK_PENDING: the broker or workbench was away), or its end not recorded —
/// is settled as recovery settles it, asked again with backoff until that succeeds, without
/// waiting for core to restart. The binding's slot is held until then: the instance may still
/// exist.
async fn drive_then_settle(inner: Arc<Inner>, run: drive::Run, slot: RunSlot) {
    let run_id = run.id().to_owned();
    if run.drive().await != drive::Left::Over {
        let mut wait = SETTLE_BACKOFF.0;
        loop {
            tokio::time::sleep(wait).await;
            match recover_run(
                &inner,
                &run_id,
                "its end or a destruction was confirmed late",
            )
            .await
            {
                Ok(()) => break,
                Err(e) => {
                    tracing::warn!(run = run_id, error = e.message(), "run not settled yet");
                    wait = (wait * 2).min(SETTLE_BACKOFF.1);
                }
            }
        }
    }
    drop(slot);
}

/// Settles an open run after a restart, or after its drive left it open on an unconfirmed
/// destruction: each unfinished experiment (see [`settle_interrupted`]), then the Room's end
/// with the code it demands (`task/interrupted`, for `why`, unless an unknown step demands
/// more), then the run's row.
async fn recover_run(inner: &Inner, run_id: &str, why: &str) -> Result<(), Status> {
    use reach_room::room::{Next, Room};
    let stored = inner.vault.facts(run_id).await.map_err(ledger_status)?;
    let mut facts = Vec::with_capacity(stored.len());
    for f in &stored {
        facts.push(
            reach_room::fact::RoomFact::from_bytes(&f.bytes)
                .map_err(|e| Status::internal(format!("room/stored-fact: {e}")))?,
        );
    }
    let mut room =
        Room::replay(&facts).map_err(|e| Status::internal(format!("{}: {e}", e.code())))?;
    let id = reach_room::fact::RunId::new(run_id.to_owned())
        .map_err(|e| Status::internal(e.to_string()))?;
    for row in inner
        .vault
        .experiments(run_id)
        .await
        .map_err(ledger_status)?
    {
        if !row.state.is_terminal() {
            settle_interrupted(inner, &id, &mut room, &row).await?;
        }
    }
    let interrupted = || (journal::INTERRUPTED.to_owned(), why.to_owned());
    let (code, reason) = match room.next() {
        Next::End { code, reason } => (code, reason),
        // The Room's end is signed already: only the run's row is left to match it.
        Next::Done(reach_room::room::End::Ended { code }) => (code, String::new()),
        Next::Done(reach_room::room::End::Concluded { .. }) => {
            return conclude_row(inner, run_id).await;
        }
        // The recipe was signed and stored before the crash: it is concluded, not redone.
        Next::Conclude => match inner.vault.recipe(run_id).await.map_err(ledger_status)? {
            Some(recipe) => {
                let concluded =
                    reach_room::fact::FactBody::Concluded(reach_room::fact::Concluded {
                        recipe_digest: recipe.digest,
                    });
                append_fact(inner, run_id, &mut room, concluded).await?;
                return conclude_row(inner, run_id).await;
            }
            None => interrupted(),
        },
        _ => interrupted(),
    };
    if let Some(fact) = room.draft(
        now_ms(),
        reach_room::fact::FactBody::Ended(reach_room::fact::Ended {
            code: code.clone(),
            reason,
        }),
    ) {
        store_fact(inner, run_id, &fact).await?;
    }
    inner
        .vault
        .run_end(run_id, &code, reach_phylactery::UnixMillis(now_ms()))
        .await
        .map_err(ledger_status)?;
    tracing::info!(run = run_id, code, why, "open run settled and ended");
    Ok(())
}

/// The run's row concluded on recovery, its Room concluded already.
async fn conclude_row(inner: &Inner, run_id: &str) -> Result<(), Status> {
    inner
        .vault
        .run_conclude(run_id, reach_phylactery::UnixMillis(now_ms()))
        .await
        .map_err(ledger_status)?;
    tracing::info!(run = run_id, "open run concluded on recovery");
    Ok(())
}

/// An experiment a crash left unfinished: its STARTED steps become UNKNOWN (never sent
/// again), the broker confirms its instance destroyed (the broker's destroy is idempotent
/// and answers with its recorded confirmation, also for an instance its own restart
/// reaped), and exactly one signed record is published from the journal, with the Room's
/// Experiment fact when the Room still awaits it. While the destruction is not confirmed
/// the experiment stays ROLLBACK_PENDING and nothing is published.
async fn settle_interrupted(
    inner: &Inner,
    run: &reach_room::fact::RunId,
    room: &mut reach_room::room::Room,
    row: &reach_phylactery::ExperimentRow,
) -> Result<(), Status> {
    use reach_phylactery::{ExperimentState, RecordKind, StepState};
    let vault = &inner.vault;
    let mut coordinator =
        reach_experiment::Experiment::new(inner.ward_channel.clone(), inner.workbench.clone());
    let unconfirmed = |error: Option<String>| {
        Status::unavailable(format!(
            "{}: experiment {}: {}",
            journal::DESTROY_UNCONFIRMED,
            row.experiment_id,
            error.unwrap_or_else(|| "the broker did not confirm".into())
        ))
    };
    let destroying = std::time::Instant::now();
    let (row, steps, destruction) =
        if row.instance_id.is_none() && row.state == ExperimentState::Creating {
            // Workbench may have created the instance without core learning its id.
            match coordinator.destroy(&row.experiment_id, "").await {
                (Some(d), _) if d.confirmed() => {
                    let (row, steps) = journal::interrupt(vault, row)
                        .await
                        .map_err(ledger_status)?;
                    journal::destroyed(vault, &row)
                        .await
                        .map_err(ledger_status)?;
                    (row, steps, Some(d))
                }
                (_, Some(e)) if e.starts_with("workbench/unknown-experiment") => {
                    journal::never_created(vault, row)
                        .await
                        .map_err(ledger_status)?;
                    let steps = vault
                        .steps(&row.experiment_id)
                        .await
                        .map_err(ledger_status)?;
                    (row.clone(), steps, None)
                }
                (_, e) => return Err(unconfirmed(e)),
            }
        } else {
            let (row, steps) = journal::interrupt(vault, row)
                .await
                .map_err(ledger_status)?;
            let instance = row.instance_id.clone().unwrap_or_default();
            match coordinator.destroy(&row.experiment_id, &instance).await {
                (Some(d), _) if d.confirmed() => {
                    journal::destroyed(vault, &row)
                        .await
                        .map_err(ledger_status)?;
                    (row, steps, Some(d))
                }
                (_, e) => return Err(unconfirmed(e)),
            }
        };
    let published = vault
        .records(run.as_str())
        .await
        .map_err(ledger_status)?
        .into_iter()
        .find(|r| r.kind == RecordKind::ExecutionRecord && r.n == row.n);
    // A record published before the crash says how the experiment ended; the fact follows it.
    let (digest, from_record) = match published {
        Some(r) => {
            let rec = reach_room::record::ExecutionRecord::from_bytes(&r.bytes)
                .ok_or_else(|| Status::internal("room/stored-record"))?;
            let end = (
                rec.verifier.as_ref().is_some_and(|v| v.passed),
                record::end_of_record(&rec, row.code.as_deref()),
            );
            (r.digest, Some(end))
        }
        None => {
            let destroy_ms = destroying.elapsed().as_millis() as u64;
            let rec =
                record::interrupted_record(run, &row, &steps, destruction.as_ref(), destroy_ms);
            let bytes = rec.canonical_bytes();
            let digest = reach_digest::Sha256Digest::of(&bytes);
            let signed = signer::sign(
                &inner.ward,
                reach_room::fact::SignedKind::ExecutionRecord,
                &bytes,
            )
            .await?;
            vault
                .record_put(&reach_phylactery::StoredRecord {
                    run_id: run.to_string(),
                    kind: RecordKind::ExecutionRecord,
                    n: row.n,
                    digest,
                    bytes,
                    signature: signed.signature,
                    key_id: signed.key_id,
                    at: reach_phylactery::UnixMillis(now_ms()),
                })
                .await
                .map_err(ledger_status)?;
            (digest, None)
        }
    };
    if let reach_room::room::Next::Experiment { round, n, .. } = room.next()
        && n == row.n
    {
        let unknown = steps.iter().any(|s| s.state == StepState::Unknown);
        let (verifier_passed, end) = from_record.unwrap_or_else(|| {
            let end = if unknown {
                "unknown".into()
            } else {
                format!("refused:{}", journal::INTERRUPTED)
            };
            (false, end)
        });
        let body = reach_room::fact::FactBody::Experiment(reach_room::fact::ExperimentFact {
            round,
            n,
            plan_digest: row.plan_digest,
            record_digest: digest,
            verifier_passed,
            end,
        });
        append_fact(inner, run.as_str(), room, body).await?;
    }
    tracing::info!(
        run = run.as_str(),
        experiment = row.experiment_id,
        "interrupted experiment settled: instance destroyed, record published"
    );
    Ok(())
}

/// Drafts `body` as the next fact of `room`, checks it against the Room, and stores it signed
/// (recovery's path; a live run does the same in `drive::Run::append`): the fact and the key id
/// it was signed with.
async fn append_fact(
    inner: &Inner,
    run_id: &str,
    room: &mut reach_room::room::Room,
    body: reach_room::fact::FactBody,
) -> Result<(reach_room::fact::RoomFact, String), Status> {
    let fact = room
        .draft(now_ms(), body)
        .ok_or_else(|| Status::internal("room/not-open"))?;
    room.apply(&fact)
        .map_err(|e| Status::internal(format!("{}: {e}", e.code())))?;
    let key_id = store_fact(inner, run_id, &fact).await?;
    Ok((fact, key_id))
}

/// Has ward sign `fact` and appends it to run `run_id`'s chain; the key id it was signed
/// with.
async fn store_fact(
    inner: &Inner,
    run_id: &str,
    fact: &reach_room::fact::RoomFact,
) -> Result<String, Status> {
    let bytes = fact.canonical_bytes();
    let signed = signer::sign(&inner.ward, reach_room::fact::SignedKind::Fact, &bytes).await?;
    inner
        .vault
        .fact_append(
            run_id,
            &reach_phylactery::StoredFact {
                seq: fact.seq,
                digest: fact.digest(),
                prev_digest: fact.prev,
                kind: fact.body.kind().into(),
                bytes,
                signature: signed.signature,
                key_id: signed.key_id.clone(),
                at: reach_phylactery::UnixMillis(fact.at_ms),
            },
        )
        .await
        .map_err(ledger_status)?;
    Ok(signed.key_id)
}

fn summary(r: &reach_phylactery::RunRow) -> pb::RunSummary {
    pb::RunSummary {
        run_id: r.run_id.clone(),
        pack: r.pack.clone(),
        state: r.state.to_string(),
        end_code: r.end_code.clone().unwrap_or_default(),
        opened_at_ms: r.opened_at.0,
        ended_at_ms: r.ended_at.map(|t| t.0).unwrap_or(0),
    }
}

/// An experiment and its steps as the run journal holds them.
fn experiment_json(
    x: &reach_phylactery::ExperimentRow,
    steps: &[reach_phylactery::StepRow],
) -> serde_json::Value {
    serde_json::json!({
        "experiment_id": x.experiment_id,
        "n": x.n,
        "plan_digest": x.plan_digest.to_string(),
        "instance_id": x.instance_id,
        "state": x.state.to_string(),
        "code": x.code,
        "steps": steps.iter().map(|s| serde_json::json!({
            "index": s.index,
            "kind": s.kind,
            "state": s.state.to_string(),
            "code": s.code,
            "record_digest": s.record_digest.map(|d| d.to_string()),
        })).collect::<Vec<_>>(),
    })
}

/// One passage as the run report shows it: who, its outcome, and what it cost.
fn passage_json(p: &reach_phylactery::PassageRow) -> serde_json::Value {
    serde_json::json!({
        "attempt_id": p.attempt_id,
        "round": p.round,
        "role": p.role,
        "state": p.state.as_str(),
        "code": p.code,
        "prompt_tokens": p.cost.prompt_tokens,
        "completion_tokens": p.cost.completion_tokens,
        "wall_ms": p.cost.wall_ms,
    })
}

/// The run's charges: every passage's usage, summed once per passage.
fn usage_json(passages: &[reach_phylactery::PassageRow]) -> serde_json::Value {
    let sum = |f: fn(&reach_phylactery::PassageCost) -> Option<u64>| -> u64 {
        passages.iter().filter_map(|p| f(&p.cost)).sum()
    };
    serde_json::json!({
        "passages": passages.len(),
        "prompt_tokens": sum(|c| c.prompt_tokens),
        "completion_tokens": sum(|c| c.completion_tokens),
        "wall_ms": sum(|c| c.wall_ms),
    })
}

fn summary_json(r: &reach_phylactery::RunRow) -> serde_json::Value {
    serde_json::json!({
        "run_id": r.run_id,
        "pack": r.pack,
        "state": r.state.to_string(),
        "end_code": r.end_code,
        "opened_at_ms": r.opened_at.0,
        "ended_at_ms": r.ended_at.map(|t| t.0),
    })
}

/// One of a binding's concurrent runs, given back when dropped.
struct RunSlot {
    inner: Arc<Inner>,
    pack: String,
}

impl RunSlot {
    fn take(inner: &Arc<Inner>, pack: &str, max: u32) -> Result<RunSlot, Status> {
        let mut running = inner.running.lock().expect("running runs");
        let n = running.entry(pack.to_owned()).or_default();
        if *n >= max.max(1) {
            return Err(Status::failed_precondition(format!(
                "local-binding/max-concurrent-runs: {pack} already runs {n} of {} (wait for \
                 it to end: reach task list)",
                max.max(1)
            )));
        }
        *n += 1;
        Ok(RunSlot {
            inner: inner.clone(),
            pack: pack.to_owned(),
        })
    }
}

impl Drop for RunSlot {
    fn drop(&mut self) {
        let mut running = self.inner.running.lock().expect("running runs");
        if let Some(n) = running.get_mut(&self.pack) {
            *n = n.saturating_sub(1);
        }
    }
}

/// A stream that ends right after the item whose kind is `ended`.
struct EndAfterLast<S> {
    inner: S,
    done: bool,
}

impl<S> EndAfterLast<S> {
    fn new(inner: S) -> Self {
        EndAfterLast { inner, done: false }
    }
}

impl<S> tokio_stream::Stream for EndAfterLast<S>
where
    S: tokio_stream::Stream<Item = Result<pb::TaskEvent, Status>> + Unpin,
{
    type Item = Result<pb::TaskEvent, Status>;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        if self.done {
            return std::task::Poll::Ready(None);
        }
        let next = Pin::new(&mut self.inner).poll_next(cx);
        if let std::task::Poll::Ready(Some(Ok(e))) = &next
            && e.kind == "ended"
        {
            self.done = true;
        }
        next
    }
}

/// Milliseconds since the Unix epoch, now.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
