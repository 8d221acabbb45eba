//! Readiness and liveness through the systemd notify protocol (`NOTIFY_SOCKET`), which both
//! systemd (`Notify=true` units) and `reach up` implement.

use std::time::Duration;

use sd_notify::NotifyState;

/// Sends `READY=1` and a status line. Without `NOTIFY_SOCKET` this does nothing.
pub fn ready(status: &str) {
    if let Err(e) = sd_notify::notify(&[NotifyState::Ready, NotifyState::Status(status)]) {
        tracing::warn!(error = %e, "readiness notification failed");
    }
}

/// Sends `STOPPING=1`.
pub fn stopping() {
    let _ = sd_notify::notify(&[NotifyState::Stopping]);
}

/// Pets the watchdog at half its period when `WATCHDOG_USEC` is set.
pub fn spawn_watchdog() -> Option<tokio::task::JoinHandle<()>> {
    let period = sd_notify::watchdog_enabled()?;
    let half = (period / 2).max(Duration::from_millis(100));
    Some(tokio::spawn(async move {
        let mut tick = tokio::time::interval(half);
        loop {
            tick.tick().await;
            let _ = sd_notify::notify(&[NotifyState::Watchdog]);
        }
    }))
}
