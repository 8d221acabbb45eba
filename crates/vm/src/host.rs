//! Host process helpers: running tools, and finding, killing and confirming QEMU processes.
//!
//! A pid alone is never trusted: before a signal or a "still alive" verdict, the process's
//! command line must name the instance directory (pids are reused), and a zombie counts as
//! gone (it holds no memory, files or sockets; its reaping is its parent's business).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::Command;

use crate::refusal::BrokerError;

/// Bytes of a tool's stderr kept for an error report.
const STDERR_KEEP: usize = 2048;

pub(crate) fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// Runs a tool to completion; a failure carries the tail of its stderr.
pub(crate) async fn run(cmd: &mut Command) -> Result<(), BrokerError> {
    let out = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| BrokerError::Host(format!("{:?}: {e}", cmd.as_std().get_program())))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: String = err
            .chars()
            .rev()
            .take(STDERR_KEEP)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        return Err(BrokerError::Host(format!(
            "{:?} {}: {}",
            cmd.as_std().get_program(),
            out.status,
            tail.trim()
        )));
    }
    Ok(())
}

/// Fills `buf` from the host's random source.
pub(crate) fn fill_random(buf: &mut [u8]) -> Result<(), BrokerError> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(buf))
        .map_err(|e| BrokerError::Host(format!("/dev/urandom: {e}")))
}

pub(crate) fn read_pidfile(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Whether `pid` is a live (non-zombie) process whose command line names `dir`.
pub(crate) fn is_ours(pid: i32, dir: &Path) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the parenthesized command name.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    if matches!(state, Some('Z' | 'X') | None) {
        return false;
    }
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let needle = dir.as_os_str().as_encoded_bytes();
    cmdline.windows(needle.len()).any(|w| w == needle)
}

/// Waits until `pid` is no longer ours (see [`is_ours`]); false on timeout.
pub(crate) async fn wait_gone(pid: i32, dir: &Path, timeout: Duration) -> bool {
    let until = Instant::now() + timeout;
    loop {
        if !is_ours(pid, dir) {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// SIGKILLs `pid` if it is ours and waits for it to go.
pub(crate) async fn kill_and_wait(pid: i32, dir: &Path, timeout: Duration) -> bool {
    if is_ours(pid, dir) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
    wait_gone(pid, dir, timeout).await
}

/// Every live process whose command line names a path under `dir`.
pub(crate) fn processes_naming(dir: &Path) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id() as i32;
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me && is_ours(pid, dir))
        .collect()
}
