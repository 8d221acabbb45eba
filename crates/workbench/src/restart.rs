//! The exact restart: only a unit the pack admits, through the pack's restart profile, then
//! its state polled until systemd reports it `active` or `failed` (bounded), and reported.

use std::time::{Duration, Instant};

use crate::guest::{Guest, Observation};
use crate::{Refusal, Workbench};

/// The pack format's restart profile: a `contained-mutation` profile whose one argument
/// slot lists the units a restart step may name (`docs/taskpacks.md`).
pub const RESTART_PROFILE: &str = "service-restart";
/// The pack format's unit-state profile: an `observation` printing systemd's state of the
/// one unit it is given (`systemctl is-active`).
pub const STATUS_PROFILE: &str = "service-status";

/// The pack format's optional unit-starts profile, read after the verifier's checks as the
/// guest's own witness of how many restarts an instance saw ([`starts`]).
pub use reach_taskpack::source::STARTS_PROFILE;

/// How long a restarted unit may take to settle, and how often it is asked.
pub const SETTLE_TIMEOUT: Duration = Duration::from_secs(120);
pub const SETTLE_INTERVAL: Duration = Duration::from_millis(500);

/// The restart's report: what ran, and the unit's state at the end.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RestartReport {
    pub service: String,
    pub restart: Observation,
    /// The last state systemd reported: `active`, `failed`, or the one the wait ended on.
    pub state: String,
    pub polls: u32,
    pub settled_ms: u64,
}

impl RestartReport {
    /// The restart exited 0 and the unit is active.
    pub fn ok(&self) -> bool {
        self.restart.exit_code == Some(0) && self.state == "active"
    }
}

/// Restarts `service` exactly and waits for it to settle.
pub async fn restart<G: Guest>(
    bench: &Workbench,
    guest: &G,
    service: &str,
) -> Result<RestartReport, Refusal> {
    if !bench.vocabulary().services.contains(service) {
        return Err(Refusal::RestartNotAdmitted {
            service: service.to_owned(),
        });
    }
    let args = [service.to_owned()];
    let profile = bench.profile(RESTART_PROFILE)?;
    if !profile.admits(&args) {
        return Err(Refusal::RestartNotAdmitted {
            service: service.to_owned(),
        });
    }
    bench.profile(STATUS_PROFILE)?;
    let restart = guest.exec(RESTART_PROFILE, &args).await?;
    let started = Instant::now();
    let mut polls = 0;
    let state = loop {
        polls += 1;
        let o = guest.exec(STATUS_PROFILE, &args).await?;
        let state = o.lines().first().cloned().unwrap_or_default();
        if state == "active" || state == "failed" || started.elapsed() >= SETTLE_TIMEOUT {
            break state;
        }
        tokio::time::sleep(SETTLE_INTERVAL).await;
    };
    Ok(RestartReport {
        service: service.to_owned(),
        restart,
        state,
        polls,
        settled_ms: started.elapsed().as_millis() as u64,
    })
}

/// The guest's witness of its units' starts ([`STARTS_PROFILE`]), when the pack has the
/// profile. A restored instance begins with its prepared system's starts, identical in every
/// instance of it; each restart adds its own.
pub async fn starts<G: Guest>(
    bench: &Workbench,
    guest: &G,
) -> Result<Option<Observation>, Refusal> {
    if !bench.has_profile(STARTS_PROFILE) {
        return Ok(None);
    }
    bench.observe(guest, STARTS_PROFILE, &[]).await.map(Some)
}
