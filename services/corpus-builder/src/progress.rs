//! Build progress as `BuildEvent`s on the admin stream. The store calls [`Progress`] from the
//! blocking build thread; events are throttled so a large build does not flood the port.

use std::time::{Duration, Instant};

use reach_corpus::{Progress, Stage};
use reach_proto::corpus::v1 as pb;
use tokio::sync::mpsc;
use tonic::Status;

/// Least time between two events of the same phase (the last one is always sent).
const MIN_INTERVAL: Duration = Duration::from_millis(100);

pub type Events = mpsc::Sender<Result<pb::BuildEvent, Status>>;

#[derive(Debug)]
pub struct ChannelProgress {
    tx: Events,
    done: u64,
    total: u64,
    last: Option<Instant>,
}

fn phase_name(s: Stage) -> &'static str {
    match s {
        Stage::Fetch => "fetch",
        Stage::Parse => "parse",
        Stage::Index => "index",
        Stage::Validate => "validate",
        Stage::Activate => "activate",
    }
}

fn event(phase: &str, done: u64, total: u64, finished: bool) -> pb::BuildEvent {
    pb::BuildEvent {
        event: Some(pb::build_event::Event::Progress(pb::Progress {
            phase: phase.into(),
            done,
            total,
            finished,
        })),
    }
}

/// The final event of a refused build.
pub fn refusal(code: &str, detail: &str) -> pb::BuildEvent {
    pb::BuildEvent {
        event: Some(pb::build_event::Event::Refusal(pb::Refusal {
            code: code.into(),
            detail: detail.into(),
        })),
    }
}

impl ChannelProgress {
    pub fn new(tx: Events) -> Self {
        ChannelProgress {
            tx,
            done: 0,
            total: 0,
            last: None,
        }
    }

    /// Send one event from async code.
    pub async fn phase(tx: &Events, phase: &str, done: u64, total: u64, finished: bool) {
        let _ = tx.send(Ok(event(phase, done, total, finished))).await;
    }

    fn send(&mut self, stage: Stage, finished: bool) {
        let now = Instant::now();
        if !finished
            && self
                .last
                .is_some_and(|t| now.duration_since(t) < MIN_INTERVAL)
        {
            return;
        }
        self.last = Some(now);
        // A closed stream (the CLI went away) does not stop the build.
        let _ = self.tx.blocking_send(Ok(event(
            phase_name(stage),
            self.done,
            self.total,
            finished,
        )));
    }
}

impl Progress for ChannelProgress {
    fn start(&mut self, stage: Stage, total: Option<u64>) {
        self.done = 0;
        self.total = total.unwrap_or(0);
        self.last = None;
        self.send(stage, false);
    }

    fn advance(&mut self, stage: Stage, n: u64) {
        self.done = self.done.saturating_add(n);
        self.send(stage, false);
    }

    fn finish(&mut self, stage: Stage) {
        if self.total == 0 {
            self.total = self.done;
        }
        self.done = self.done.max(self.total);
        self.send(stage, true);
    }
}
