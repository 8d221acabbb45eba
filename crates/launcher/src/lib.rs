//! The local launcher behind `reach up`, `reach status` and `reach down`.
//!
//! It compiles the manifest into a process plan, lets Scribe materialize identities, writes each
//! role's own config, and starts every role as a separate process in manifest order. It speaks
//! the systemd notify protocol (`NOTIFY_SOCKET`) so it waits for each role's `READY=1` exactly as
//! systemd would for the Quadlet units. Children get an empty environment: nothing secret can
//! leak into them that way, and nothing ambient steers them.

pub mod audit;
pub mod discord;
mod process;
mod status;

pub use process::{Body, LaunchError, LaunchOptions, StopReport, prepare};
pub use status::{RoleHealth, operator_channel, operator_material, status};

use std::path::PathBuf;

/// The directory holding the role binaries: the one `reach` itself runs from (or its parent,
/// when called from a test binary in `target/<profile>/deps`).
pub fn default_bin_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let dir = exe.parent().map(PathBuf::from).unwrap_or_default();
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.parent().map(PathBuf::from).unwrap_or(dir)
    } else {
        dir
    }
}
