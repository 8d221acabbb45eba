//! `reach up`, `reach status`, `reach down`.

use std::process::ExitCode;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use reach_launcher::{Body, LaunchOptions};
use reach_manifest::Manifest;
use reach_manifest::plan::StateLayout;

pub async fn up(m: &Manifest, layout: &StateLayout, log_level: &str) -> anyhow::Result<ExitCode> {
    let options = LaunchOptions {
        log_level: log_level.to_owned(),
        ..LaunchOptions::default()
    };
    use tokio::signal::unix::{SignalKind, signal};
    // Installed before the first role starts: a stop during start-up drops what started (its
    // children are killed on drop) instead of killing the launcher and orphaning them.
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut body = tokio::select! {
        body = Body::up(m, layout, options) => body?,
        _ = term.recv() => {
            eprintln!("stopped during start-up");
            return Ok(ExitCode::FAILURE);
        }
        _ = int.recv() => {
            eprintln!("stopped during start-up");
            return Ok(ExitCode::FAILURE);
        }
    };
    // Written once every role is ready: the launcher is up.
    let pid_file = layout.run_dir().join("launcher.pid");
    std::fs::write(&pid_file, std::process::id().to_string())?;
    for (role, pid) in body.pids() {
        println!("started {role:<16} pid {pid}");
    }
    println!(
        "all {} roles ready; state in {} (Ctrl-C stops)",
        m.roles.len(),
        layout.root().display()
    );

    let code = tokio::select! {
        _ = term.recv() => ExitCode::SUCCESS,
        _ = int.recv() => ExitCode::SUCCESS,
        (role, status) = body.wait_any_exit() => {
            eprintln!("role {role} exited ({status:?}); stopping the body");
            ExitCode::FAILURE
        }
    };
    let report = body.stop().await;
    for (role, code) in &report.stopped {
        println!(
            "stopped {role:<16} exit {}",
            code.map_or("signal".into(), |c| c.to_string())
        );
    }
    for role in &report.killed {
        println!("killed  {role:<16} (did not drain in time)");
    }
    let _ = std::fs::remove_file(&pid_file);
    Ok(code)
}

pub async fn print_status(m: &Manifest, layout: &StateLayout) -> anyhow::Result<ExitCode> {
    let health = reach_launcher::status(m, layout).await?;
    let mut healthy = 0;
    println!(
        "{:<16} {:<22} {:<9} {:>10}  leaf",
        "ROLE", "PORT", "STATUS", "UPTIME"
    );
    for h in &health {
        match &h.result {
            Ok(r) => {
                healthy += 1;
                println!(
                    "{:<16} {:<22} {:<9} {:>9}s  {}",
                    h.role,
                    h.port,
                    "healthy",
                    r.uptime_ms / 1000,
                    &r.leaf_serial[..r.leaf_serial.len().min(12)]
                );
            }
            Err(e) => println!(
                "{:<16} {:<22} {:<9} {:>10}  {e}",
                h.role, h.port, "DOWN", "-"
            ),
        }
    }
    println!("{healthy}/{} roles healthy", health.len());
    Ok(if healthy == health.len() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

pub async fn down(layout: &StateLayout) -> anyhow::Result<ExitCode> {
    let pid_file = layout.run_dir().join("launcher.pid");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .map_err(|e| anyhow::anyhow!("{}: {e} (is the body running?)", pid_file.display()))?
        .trim()
        .parse()?;
    kill(Pid::from_raw(pid), Signal::SIGTERM)?;
    for _ in 0..300 {
        if kill(Pid::from_raw(pid), None).is_err() {
            println!("body stopped");
            return Ok(ExitCode::SUCCESS);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    anyhow::bail!("launcher pid {pid} did not stop within 30 s")
}

/// How `reach audit` prints its receipt.
#[derive(Copy, Clone, Debug, clap::ValueEnum)]
pub enum ReceiptFormat {
    /// The receipt, pretty JSON.
    Json,
    /// JUnit XML, one testcase per check.
    Junit,
}

/// `reach audit`: the receipt on stdout (pretty JSON, or JUnit XML); failure when any check
/// failed.
pub async fn audit(
    body: &crate::BodyTarget,
    units: Option<&std::path::Path>,
    ruleset: Option<&std::path::Path>,
    format: ReceiptFormat,
) -> anyhow::Result<ExitCode> {
    // One read: the digest names exactly the bytes audited against.
    let text = match &body.target.manifest {
        Some(p) => std::fs::read_to_string(p)
            .map_err(|e| anyhow::anyhow!("manifest {}: {e}", p.display()))?,
        None => reach_manifest::VPS_PUBLIC.to_owned(),
    };
    let m = reach_manifest::load(&text)?;
    let digest = reach_digest::Sha256Digest::of(text.as_bytes()).to_string();
    let (layout, processes) = body.locate(&m)?;
    let mut receipt = reach_launcher::audit::audit(&m, digest, &layout, processes).await;
    if body.podman {
        receipt.push(crate::host_checks::secrets_rollout(&m, &body.target.state));
    }
    if let Some(dir) = units {
        let manifest = body.target.manifest.as_deref();
        for check in crate::host_checks::units(&m, manifest, &body.target.state, dir) {
            receipt.push(check);
        }
        receipt.push(crate::host_checks::reboot_linger());
        receipt.push(crate::host_checks::unit_core_dumps(&m, dir));
    }
    for check in crate::host_checks::firewall(&m, ruleset) {
        receipt.push(check);
    }
    match format {
        ReceiptFormat::Json => println!("{}", serde_json::to_string_pretty(&receipt)?),
        ReceiptFormat::Junit => print!("{}", receipt.to_junit()),
    }
    // The receipt is for machines; what failed is also said plainly.
    for c in &receipt.checks {
        if c.outcome == reach_launcher::audit::Outcome::Fail {
            eprintln!("FAIL {}: {}", c.id, c.detail);
        }
    }
    eprintln!(
        "{} passed, {} failed, {} skipped",
        receipt.passed, receipt.failed, receipt.skipped
    );
    Ok(if receipt.passes() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
