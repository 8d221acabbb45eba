//! Task runs (issue #37): core opens a Room for a goal under a runnable binding and drives it
//! — passages through the inference boundary, the Chair's decisions, experiments through the
//! coordinator step, the recipe — storing every fact in the Phylactery as ward signed it.
//! Core holds no signing key and no model credential; the run goes on when the operator's
//! stream ends.

use std::pin::Pin;

use reach_proto::core::v1 as pb;
use tonic::Status;

/// What `AskTask` streams.
pub type EventStream =
    Pin<Box<dyn tokio_stream::Stream<Item = Result<pb::TaskEvent, Status>> + Send + 'static>>;

/// Core's task runs.
#[derive(Debug, Clone)]
pub struct TaskRuns {}

impl TaskRuns {
    pub async fn ask(&self, _pack: String, _goal: String) -> Result<EventStream, Status> {
        Err(Status::unavailable("tasks/unavailable"))
    }

    pub async fn list(&self) -> Result<pb::ListRunsResponse, Status> {
        Err(Status::unavailable("tasks/unavailable"))
    }

    pub async fn show(&self, _run: &str) -> Result<pb::RunView, Status> {
        Err(Status::unavailable("tasks/unavailable"))
    }

    pub async fn trail(&self, _run: &str) -> Result<pb::RunTrailResponse, Status> {
        Err(Status::unavailable("tasks/unavailable"))
    }

    pub async fn recipe(&self, _run: &str) -> Result<pb::RunRecipeResponse, Status> {
        Err(Status::unavailable("tasks/unavailable"))
    }
}
