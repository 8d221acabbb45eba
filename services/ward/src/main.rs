//! reach-ward: the Security Desk. Its own store, its own key, no network.
//!
//! Wiring only: read the key and the policy, open the desk and the node's room key (created on
//! first start) in ward's private data directory, serve the `ward.authority` port, and purge
//! expired counters and records in the background.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use reach_manifest::CredentialKind;
use reach_ward_desk::{
    Desk, ROOM_KEY_FILE, RoomKey, SystemClock, WardKey, WardPolicy, WardService,
};

/// How often expired rate-limit counters and records past retention are deleted.
const PURGE_INTERVAL: Duration = Duration::from_secs(60);
/// Ward's store, inside its private data directory.
const STORE_FILE: &str = "ward.sqlite3";

fn main() -> std::process::ExitCode {
    reach_runtime::run("ward", async |role| {
        let (desk, room_key) = open(role).await?;
        role.serve(
            "ward.authority",
            WardService::new(desk.clone(), room_key).into_server(),
        )?;
        tokio::spawn(purge_loop(desk, role.shutdown_signal()));
        Ok(())
    })
}

async fn open(role: &reach_runtime::Role) -> anyhow::Result<(Arc<Desk>, Arc<RoomKey>)> {
    let key = role
        .credential(CredentialKind::WardKey)
        .context("ward-key credential is absent")?;
    let key = WardKey::from_bytes(key).context("ward-key")?;
    let policy: WardPolicy = toml::Value::Table(role.config.settings.clone())
        .try_into()
        .context("ward settings do not match the ward policy schema")?;
    let dir = &role.config.data_dir;
    std::fs::create_dir_all(dir).with_context(|| format!("data dir {}", dir.display()))?;
    // The node's signing key: created here on first start, refused (never replaced) when the
    // file is corrupt or readable by anyone but ward.
    let room_key = RoomKey::open(&dir.join(ROOM_KEY_FILE))?;
    tracing::info!(key = room_key.key_id(), "room key loaded");
    let desk = Desk::open(&dir.join(STORE_FILE), key, policy, Arc::new(SystemClock))
        .await
        .context("ward store")?;
    Ok((Arc::new(desk), Arc::new(room_key)))
}

async fn purge_loop(desk: Arc<Desk>, stop: impl std::future::Future<Output = ()>) {
    let mut tick = tokio::time::interval(PURGE_INTERVAL);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = tick.tick() => match desk.purge().await {
                Ok(p) => tracing::debug!(counters = p.counters, sigils = p.sigils, grants = p.grants, "purged"),
                Err(e) => tracing::warn!(error = %e, "purge failed"),
            },
        }
    }
    // The store is not closed here: in-flight calls may still be draining. Every commit is
    // already durable (synchronous = FULL), so exiting without a checkpoint loses nothing.
}
