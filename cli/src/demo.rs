//! `reach demo`: the main job on embedded defaults.
//!
//! Today it brings up the whole reach.vps.public@1 constellation from the embedded manifest in
//! a throwaway state directory, shows every role healthy over mTLS, shows the port table
//! enforced on the wire (an allowed call and a refused one), and stops the body. The Discord
//! question end to end joins it with issue #7.

use std::process::ExitCode;

use reach_launcher::{Body, LaunchOptions};
use reach_manifest::plan::StateLayout;
use reach_proto::ward::v1::AdmitScopeRequest;
use reach_proto::ward::v1::ward_client::WardClient;

pub async fn run() -> anyhow::Result<ExitCode> {
    let m = crate::load_manifest(None)?;
    let dir = tempfile::Builder::new().prefix("reach-demo-").tempdir()?;
    let layout = StateLayout::new(dir.path());
    // The demo talks to loopback emulators only; this placeholder token is what they accept.
    for role in ["ingress-edge", "egress-discord"] {
        let sd = layout.secret_dir(role);
        reach_identity::files::ensure_secret_dir(&sd)?;
        reach_identity::files::write_secret(&sd.join("discord-bot-token"), b"demo-emulator-token")?;
    }
    println!(
        "Reach demo — {} on embedded defaults, state in {}",
        m.profile,
        dir.path().display()
    );
    let started = std::time::Instant::now();
    let body = Body::up(
        &m,
        &layout,
        LaunchOptions {
            log_level: "warn".into(),
            ..LaunchOptions::default()
        },
    )
    .await?;
    println!(
        "{} roles started as separate processes in {:.2?}",
        body.pids().len(),
        started.elapsed()
    );
    let code = crate::body::print_status(&m, &layout).await?;

    let material = reach_launcher::operator_material(&m, &layout)?;
    let ch = reach_launcher::operator_channel(&m, &layout, &material, "ward.authority")
        .await
        .map_err(anyhow::Error::msg)?;
    let refused = WardClient::new(ch)
        .admit_scope(AdmitScopeRequest::default())
        .await
        .unwrap_err();
    println!(
        "operator → ward AdmitScope: {:?} ({}) — only core may call it",
        refused.code(),
        refused.message()
    );
    println!("The Discord question end to end joins this demo with issue #7.");
    let report = body.stop().await;
    println!(
        "stopped {} roles, {} killed",
        report.stopped.len(),
        report.killed.len()
    );
    Ok(code)
}
