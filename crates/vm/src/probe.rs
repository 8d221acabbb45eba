//! Which accelerator this host can really boot a guest with.
//!
//! `/dev/kvm` existing, or even `KVM_CREATE_VM` succeeding, does not mean a guest boots: under
//! broken nested virtualization the guest hangs forever. So the probe boots the image's own
//! kernel under KVM with no root device and `panic=-1`: a working KVM panics and exits within
//! a second or two; a broken one is killed at [`PROBE_TIMEOUT`], and the broker uses TCG.
//! The answer is cached per host boot (`/proc/sys/kernel/random/boot_id`).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

/// Long enough for a kernel to reach its panic under KVM, far shorter than a hang.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(8);
const CACHE_FILE: &str = "accel-probe";

/// The accelerator instances are started with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    Kvm,
    Tcg,
}

impl Accel {
    pub const fn as_str(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
    /// The `-accel` argument.
    pub const fn qemu_arg(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg,thread=multi",
        }
    }
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// Probes (or reads the cached answer from `run_dir`) whether `kernel` boots under KVM.
pub async fn probe(qemu: &Path, kernel: &Path, run_dir: &Path) -> Accel {
    let cache = run_dir.join(CACHE_FILE);
    let id = boot_id();
    if let Ok(text) = std::fs::read_to_string(&cache) {
        match text.trim().split_once(' ') {
            Some((b, "kvm")) if b == id => return Accel::Kvm,
            Some((b, "tcg")) if b == id => return Accel::Tcg,
            _ => {}
        }
    }
    let accel = boot_under_kvm(qemu, kernel).await;
    let _ = std::fs::write(&cache, format!("{id} {}\n", accel.as_str()));
    accel
}

/// Boots `kernel` under KVM with nothing to mount; true only if it panicked and exited in time.
async fn boot_under_kvm(qemu: &Path, kernel: &Path) -> Accel {
    if !Path::new("/dev/kvm").exists() {
        return Accel::Tcg;
    }
    let child = Command::new(qemu)
        .args([
            "-nodefaults",
            "-no-user-config",
            "-M",
            "pc",
            "-accel",
            "kvm",
            "-m",
            "128",
        ])
        .args([
            "-display",
            "none",
            "-serial",
            "stdio",
            "-no-reboot",
            "-nic",
            "none",
        ])
        .arg("-kernel")
        .arg(kernel)
        .args(["-append", "console=ttyS0 panic=-1 root=/dev/null"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn();
    let Ok(child) = child else {
        return Accel::Tcg;
    };
    match tokio::time::timeout(PROBE_TIMEOUT, child.wait_with_output()).await {
        Ok(Ok(out))
            if out.status.success()
                && String::from_utf8_lossy(&out.stdout).contains("Kernel panic") =>
        {
            Accel::Kvm
        }
        // Timed out: the dropped future kills the child (kill_on_drop).
        _ => Accel::Tcg,
    }
}
