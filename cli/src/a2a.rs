//! `reach a2a`: the operator's outbound A2A tasks (Intercom), over core's trail port with the
//! operator's leaf. `send` asks core to send one text task to its enrolled peer and waits until
//! the task's turn terminates (core's Stasis keeps driving a task after the request returns),
//! then prints the adopted answer (asking core again, a replay, when the Stasis adopted it);
//! `status` reads the task and its turn from the ledger's trail, the `CancelTask` core sent to
//! a task the peer left waiting for input and the peer's answer to it, and the peer's
//! quarantined status message of a FAILED, REJECTED or INPUT_REQUIRED task while core holds it
//! (the operator's eyes only: it never reaches a Discord user).

use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reach_manifest::Manifest;
use reach_manifest::plan::StateLayout;
use reach_proto::core::v1::trail_client::TrailClient;
use reach_proto::core::v1::{GetTrailRequest, SendA2aTaskRequest, TrailEdge};

use crate::BodyTarget;

/// Core's trail port, dialed with the operator's leaf.
async fn client(
    m: &Manifest,
    layout: &StateLayout,
) -> anyhow::Result<TrailClient<tonic::transport::Channel>> {
    let material = reach_launcher::operator_material(m, layout)?;
    let ch = reach_launcher::operator_channel(m, layout, &material, "core.trail")
        .await
        .map_err(anyhow::Error::msg)?;
    Ok(TrailClient::new(ch))
}

#[derive(clap::Subcommand, Debug)]
pub enum A2aCommand {
    /// Send one text task to the enrolled peer; print its task id and terminal state.
    Send {
        /// The enrolled peer (its host name or URL, as core's settings.intercom.peer names it).
        #[arg(long)]
        peer: String,
        /// The one text part sent (at most 4096 bytes).
        #[arg(long)]
        text: String,
        /// The task id (the idempotency key: asking again reports or resumes the same task);
        /// a fresh one if omitted.
        #[arg(long)]
        task_id: Option<String>,
        /// How long to wait for the turn to terminate.
        #[arg(long, default_value_t = 150)]
        wait_secs: u64,
        #[command(flatten)]
        target: BodyTarget,
    },
    /// Where a task stands: its Intercom state and its turn's, from the ledger.
    Status {
        task_id: String,
        #[command(flatten)]
        target: BodyTarget,
    },
}

pub async fn run(command: A2aCommand) -> anyhow::Result<ExitCode> {
    match command {
        A2aCommand::Send {
            peer,
            text,
            task_id,
            wait_secs,
            target,
        } => {
            let m = target.manifest()?;
            let layout = target.layout(&m)?;
            send(&m, &layout, peer, text, task_id, wait_secs).await
        }
        A2aCommand::Status { task_id, target } => {
            let m = target.manifest()?;
            status(&m, &target.layout(&m)?, &task_id).await
        }
    }
}

/// A task id unique enough for one operator: `op-<unix millis>-<pid>`.
fn fresh_task_id() -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    format!("op-{ms}-{}", std::process::id())
}

async fn send(
    m: &Manifest,
    layout: &StateLayout,
    peer: String,
    text: String,
    task_id: Option<String>,
    wait_secs: u64,
) -> anyhow::Result<ExitCode> {
    let mut trail = client(m, layout).await?;
    let task_id = task_id.unwrap_or_else(fresh_task_id);
    let request = SendA2aTaskRequest {
        task_id: task_id.clone(),
        text,
        peer,
    };
    let r = trail
        .send_a2a_task(request.clone())
        .await
        .map_err(|s| anyhow::anyhow!("core refused the task: {}", s.message()))?
        .into_inner();
    println!("task {} (turn {})", r.task_id, r.turn_id);
    let (mut phase, mut turn, mut code) = (r.phase, r.turn_state, r.code);
    let deadline = Instant::now() + Duration::from_secs(wait_secs);
    // Still in Stasis: read the ledger until the turn terminates.
    while turn == "OPEN" && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let edges = trail
            .get_trail(GetTrailRequest {
                key: task_id.clone(),
            })
            .await?
            .into_inner()
            .edges;
        let s = TaskStatus::of(&edges);
        (phase, turn, code) = (s.task_state, s.turn_state, s.code);
    }
    println!("phase {phase}");
    println!("turn {turn}");
    println!("code {code}");
    let mut answer = r.answer;
    if answer.is_empty() && turn == "SUCCEEDED" {
        // Adopted by core's Stasis after the request returned: the same request again is a
        // replay, which sends nothing and returns the answer core holds.
        if let Ok(again) = trail.send_a2a_task(request).await {
            answer = again.into_inner().answer;
        }
    }
    if !answer.is_empty() {
        println!("answer:\n{answer}");
    }
    Ok(if turn == "SUCCEEDED" {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// A task's state as the trail shows it.
struct TaskStatus {
    task_state: String,
    turn_state: String,
    /// The turn's reason once terminal, else the task's latest evidence code.
    code: String,
    /// What came of the `CancelTask` of a task left open at the peer (`cancel=` of the task's
    /// evidence), if one was sent or tried.
    cancel: Option<String>,
}

impl TaskStatus {
    fn of(edges: &[TrailEdge]) -> TaskStatus {
        let field = |record: &str, key: &str| {
            edges
                .iter()
                .rev()
                .find(|e| e.record == record)
                .and_then(|e| e.fields.get(key).cloned())
                .unwrap_or_default()
        };
        let evidence = field("IntercomTask", "evidence");
        let reason = field("ReachTurn@1", "reason");
        let cancel = evidence
            .split(' ')
            .find_map(|w| w.strip_prefix("cancel="))
            .map(str::to_owned);
        TaskStatus {
            cancel,
            task_state: field("IntercomTask", "state"),
            turn_state: field("ReachTurn@1", "state"),
            code: if reason.is_empty() {
                evidence.split(' ').next().unwrap_or_default().to_owned()
            } else {
                reason
            },
        }
    }
}

async fn status(m: &Manifest, layout: &StateLayout, task_id: &str) -> anyhow::Result<ExitCode> {
    let trail = client(m, layout)
        .await?
        .get_trail(GetTrailRequest {
            key: task_id.to_owned(),
        })
        .await?
        .into_inner();
    let edges = trail.edges;
    if !edges.iter().any(|e| e.record == "IntercomTask") {
        println!("no A2A task {task_id}");
        return Ok(ExitCode::FAILURE);
    }
    let s = TaskStatus::of(&edges);
    println!("task {task_id}");
    println!("phase {}", s.task_state);
    println!("turn {}", s.turn_state);
    println!("code {}", s.code);
    if let Some(cancel) = &s.cancel {
        println!("cancel {cancel}");
    }
    if !trail.a2a_peer_message.is_empty() {
        println!("peer message:\n{}", trail.a2a_peer_message);
    }
    Ok(ExitCode::SUCCESS)
}
