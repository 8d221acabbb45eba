//! `reach-discord-emulator`: run the loopback Discord emulator until interrupted.
//!
//! It writes the run's CA certificate to `<dir>/ca.pem` and prints one JSON line with the
//! endpoints, so a separately started body can be pointed at it. Posting questions needs the
//! library's control API ([`reach_discord_emulator::Emulator`]); the binary only serves.
//!
//! Usage: `reach-discord-emulator --dir <dir> [--token-file <file>]`

use std::path::PathBuf;
use std::process::ExitCode;

use reach_discord_emulator::{Emulator, EmulatorConfig, REST_HOST};

fn main() -> ExitCode {
    let mut dir: Option<PathBuf> = None;
    let mut token_file: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--dir" => dir = args.next().map(PathBuf::from),
            "--token-file" => token_file = args.next().map(PathBuf::from),
            _ => {
                eprintln!("usage: reach-discord-emulator --dir <dir> [--token-file <file>]");
                return ExitCode::from(2);
            }
        }
    }
    let Some(dir) = dir else {
        eprintln!("usage: reach-discord-emulator --dir <dir> [--token-file <file>]");
        return ExitCode::from(2);
    };
    let mut config = EmulatorConfig::default();
    if let Some(file) = token_file {
        match std::fs::read_to_string(&file) {
            Ok(t) => config.token = t.trim_end().to_owned(),
            Err(e) => {
                eprintln!("cannot read token file: {e}");
                return ExitCode::from(1);
            }
        }
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(async move {
        let emulator = match Emulator::start(config).await {
            Ok(e) => e,
            Err(e) => {
                eprintln!("start: {e}");
                return ExitCode::from(1);
            }
        };
        let ca = dir.join("ca.pem");
        if let Err(e) = std::fs::write(&ca, emulator.ca_pem()) {
            eprintln!("write {}: {e}", ca.display());
            return ExitCode::from(1);
        }
        let line = serde_json::json!({
            "gateway_url": emulator.gateway_url(),
            "resume_gateway_url": emulator.resume_gateway_url(),
            "rest_base_url": emulator.rest_base_url(),
            "rest_host": REST_HOST,
            "rest_addr": emulator.rest_addr().to_string(),
            "ca_pem": ca.display().to_string(),
            "application_id": emulator.config().application_id.to_string(),
            "bot_user_id": emulator.config().bot_user_id.to_string(),
        });
        println!("{line}");
        let _ = tokio::signal::ctrl_c().await;
        ExitCode::SUCCESS
    })
}
