//! The receipt's checks of the host under the body and of its lifecycle, each from what the
//! kernel, the account database or the state directory holds:
//!
//! - `host/swap`: swap is off, or every active swap area is on dm-crypt (a role's memory, its
//!   leaf key included, may be paged out: on a plain disk it would outlive the process);
//! - `host/account` (a Quadlet body): the user the body runs as is not root and has no login
//!   shell (the seed's platform floor; lingering is `reboot/linger`'s);
//! - `process/core-dumps`: every role process's core-file size limit is zero, soft and hard
//!   (`/proc/<pid>/limits`), so it cannot dump, nor turn dumps back on;
//! - `lifecycle/reboot` (a Quadlet body): a body older than the current boot answers again;
//! - `lifecycle/shutdown`: skipped, saying why (no record of a past shutdown is readable);
//! - `rotation/root`: every principal's bundle pins exactly Scribe's current root, so no
//!   rotation is half done and no retired root is still trusted.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use reach_manifest::Manifest;
use reach_manifest::plan::StateLayout;

use super::{Check, OPERATOR, RoleProcess};

const SWAP: &str = "host/swap";
const CORE_DUMPS: &str = "process/core-dumps";
const ACCOUNT: &str = "host/account";
const REBOOT: &str = "lifecycle/reboot";
const SHUTDOWN: &str = "lifecycle/shutdown";
const ROTATION: &str = "rotation/root";

/// `host/swap` on this host.
pub(super) fn swap() -> Check {
    swap_in(
        std::fs::read_to_string("/proc/swaps").map_err(|e| format!("/proc/swaps: {e}")),
        Path::new("/sys/class/block"),
    )
}

/// `host/swap` from a `/proc/swaps` text and the block class directory (`/sys/class/block`).
pub fn swap_in(swaps: Result<String, String>, block: &Path) -> Check {
    let text = match swaps {
        Ok(t) => t,
        Err(e) => return Check::observed(SWAP, false, e),
    };
    let mut areas = 0;
    let mut plain = Vec::new();
    let mut kept = Vec::new();
    for line in text.lines().skip(1) {
        let mut f = line.split_whitespace();
        let (Some(name), Some(kind)) = (f.next(), f.next()) else {
            continue;
        };
        areas += 1;
        // /proc/swaps escapes a space as \040.
        let path = PathBuf::from(name.replace("\\040", " "));
        match swap_device(&path, kind, block) {
            Ok(Device::Memory(d)) => kept.push(format!("{name} (in memory, {d})")),
            Ok(Device::Block(d)) if encrypted(block, &d, 0) => {
                kept.push(format!("{name} (on {d}, dm-crypt)"))
            }
            Ok(Device::Block(d)) => plain.push(format!("{name} on {d}, which is not dm-crypt")),
            Err(e) => plain.push(format!("{name}: {e}")),
        }
    }
    if areas == 0 {
        return Check::observed(SWAP, true, "swap is off");
    }
    if plain.is_empty() {
        Check::observed(
            SWAP,
            true,
            format!("every swap area is encrypted: {}", kept.join(", ")),
        )
    } else {
        Check::observed(
            SWAP,
            false,
            format!(
                "swap a role's memory may be written to unencrypted: {}; turn it off \
                 (`swapoff`) or put it on dm-crypt",
                plain.join("; ")
            ),
        )
    }
}

enum Device {
    /// zram: compressed memory, never written to a disk.
    Memory(String),
    /// The block device (its name in the block class) holding the area.
    Block(String),
}

/// The block device a swap area is on: the partition's own, or the file system's of a file.
fn swap_device(path: &Path, kind: &str, block: &Path) -> Result<Device, String> {
    let name = if kind == "partition" {
        let dev = std::fs::canonicalize(path).map_err(|e| e.to_string())?;
        dev.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or("no device name")?
    } else {
        let dev = std::fs::metadata(path).map_err(|e| e.to_string())?.dev();
        let (major, minor) = (
            ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0xfff),
            ((dev >> 12) & 0xffff_ff00) | (dev & 0xff),
        );
        // The block class's parent: /sys/class/block -> /sys/dev/block/<major>:<minor>.
        let by_number = block
            .parent()
            .and_then(Path::parent)
            .map(|sys| sys.join(format!("dev/block/{major}:{minor}")))
            .ok_or("no /sys")?;
        let dev = std::fs::canonicalize(&by_number).map_err(|_| {
            format!("its file system's device {major}:{minor} is no block device to inspect")
        })?;
        dev.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or("no device name")?
    };
    if name.starts_with("zram") {
        Ok(Device::Memory(name))
    } else {
        Ok(Device::Block(name))
    }
}

/// A device is encrypted if it is a dm-crypt target, or a device-mapper device (LVM) all of
/// whose underlying devices are.
fn encrypted(block: &Path, name: &str, depth: u8) -> bool {
    if depth > 8 {
        return false;
    }
    let dir = block.join(name);
    let uuid = std::fs::read_to_string(dir.join("dm/uuid")).unwrap_or_default();
    if uuid.starts_with("CRYPT-") {
        return true;
    }
    if uuid.is_empty() {
        return false;
    }
    let Ok(slaves) = std::fs::read_dir(dir.join("slaves")) else {
        return false;
    };
    let slaves: Vec<String> = slaves
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    !slaves.is_empty() && slaves.iter().all(|s| encrypted(block, s, depth + 1))
}

/// `process/core-dumps`: every role of the manifest has a process whose core-file size limit
/// is zero, soft and hard.
pub(super) fn core_dumps(manifest: &Manifest, processes: &[RoleProcess]) -> Check {
    if processes.is_empty() {
        return Check::observed(
            CORE_DUMPS,
            false,
            "no role process known (no run/roles, none listed)",
        );
    }
    let mut allowed = Vec::new();
    for role in &manifest.roles {
        let name = role.name.as_str();
        let Some(p) = processes.iter().find(|p| p.role == name) else {
            allowed.push(format!("{name}: no process"));
            continue;
        };
        if let Err(e) = core_limit_zero(p.pid) {
            allowed.push(format!("{name} (pid {}): {e}", p.pid));
        }
    }
    if allowed.is_empty() {
        Check::observed(
            CORE_DUMPS,
            true,
            format!(
                "{} role processes may not dump core (core-file size 0, soft and hard)",
                manifest.roles.len()
            ),
        )
    } else {
        Check::observed(CORE_DUMPS, false, allowed.join("; "))
    }
}

fn core_limit_zero(pid: u32) -> Result<(), String> {
    let path = format!("/proc/{pid}/limits");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let found: Vec<&str> = text
        .lines()
        .find_map(|l| l.strip_prefix("Max core file size"))
        .ok_or_else(|| format!("{path}: no `Max core file size` line"))?
        .split_whitespace()
        .take(2)
        .collect();
    if found == ["0", "0"] {
        Ok(())
    } else {
        Err(format!(
            "core dumps allowed: core-file size {} (soft, hard)",
            found.join(", ")
        ))
    }
}

/// Shells that refuse an interactive login.
const NO_LOGIN_SHELLS: &[&str] = &["nologin", "false"];

/// `host/account`: the body's user (the auditor's own for a Quadlet body: rootless Podman runs
/// the body as the user who runs it) is not root and cannot log in; whether it lingers is said
/// and judged by `reboot/linger`.
pub fn account(uid: nix::unistd::Uid, linger_dir: &Path) -> Check {
    if uid.is_root() {
        return Check::observed(
            ACCOUNT,
            false,
            "the body runs as root; run it as a non-root account without a login shell \
             (`useradd --shell /usr/sbin/nologin`)",
        );
    }
    let user = match nix::unistd::User::from_uid(uid) {
        Ok(Some(u)) => u,
        Ok(None) => return Check::observed(ACCOUNT, false, format!("uid {uid} has no user")),
        Err(e) => return Check::observed(ACCOUNT, false, format!("uid {uid}: {e}")),
    };
    let shell = user.shell.display().to_string();
    let lingers = if linger_dir.join(&user.name).exists() {
        "lingers"
    } else {
        "does not linger"
    };
    let login = !user
        .shell
        .file_name()
        .is_some_and(|s| NO_LOGIN_SHELLS.iter().any(|n| s == *n));
    if login {
        Check::observed(
            ACCOUNT,
            false,
            format!(
                "{} (uid {uid}) has the login shell {shell}; run `usermod --shell \
                 /usr/sbin/nologin {}` as root",
                user.name, user.name
            ),
        )
    } else {
        Check::observed(
            ACCOUNT,
            true,
            format!(
                "{} (uid {uid}): not root, shell {shell}, {lingers} (reboot/linger judges it)",
                user.name
            ),
        )
    }
}

/// `host/account` for a body the launcher started: not judged.
pub(super) fn account_skipped() -> Check {
    Check::skipped(
        ACCOUNT,
        "the launcher's dev profile runs as whoever started it; a Quadlet body (--podman) is \
         judged",
    )
}

/// When the host booted (`btime` of `/proc/stat`).
fn boot_time() -> Option<SystemTime> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let secs: u64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
}

fn at(t: SystemTime) -> String {
    let s = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    format!("unix {s}")
}

/// `lifecycle/reboot` for a Quadlet body: if its state directory was created before the
/// current boot, the body lived through a reboot and must answer again by itself.
pub(super) fn reboot(manifest: &Manifest, layout: &StateLayout, up: &[String]) -> Check {
    reboot_at(manifest, layout, up, boot_time())
}

fn reboot_at(
    manifest: &Manifest,
    layout: &StateLayout,
    up: &[String],
    boot: Option<SystemTime>,
) -> Check {
    let Some(boot) = boot else {
        return Check::observed(REBOOT, false, "/proc/stat has no boot time");
    };
    let dir = layout.scribe_dir();
    let created = match std::fs::metadata(&dir).and_then(|m| m.created()) {
        Ok(t) => t,
        Err(e) => {
            return Check::skipped(REBOOT, format!("{}: no creation time ({e})", dir.display()));
        }
    };
    if created >= boot {
        return Check::skipped(
            REBOOT,
            format!(
                "no reboot since the body was created ({} created {}, host booted {})",
                dir.display(),
                at(created),
                at(boot)
            ),
        );
    }
    let down: Vec<&str> = manifest
        .roles
        .iter()
        .map(|r| r.name.as_str())
        .filter(|r| !up.iter().any(|u| u == r))
        .collect();
    let when = format!(
        "the body predates this boot ({} created {}, host booted {})",
        dir.display(),
        at(created),
        at(boot)
    );
    if down.is_empty() {
        Check::observed(
            REBOOT,
            true,
            format!("{when} and every role answers: it came back by itself"),
        )
    } else {
        Check::observed(
            REBOOT,
            false,
            format!("{when}; {} did not come back", down.join(", ")),
        )
    }
}

/// `lifecycle/reboot` for a body the launcher started: it does not start at boot.
pub(super) fn reboot_skipped() -> Check {
    Check::skipped(
        REBOOT,
        "the launcher's dev profile does not start at boot; a Quadlet body (--podman) is judged",
    )
}

/// `lifecycle/shutdown`: nothing on a running host records how the body last stopped.
pub(super) fn shutdown() -> Check {
    Check::skipped(
        SHUTDOWN,
        "a running body keeps no record of how it last stopped; the drain is judged where the \
         body is stopped (tests/tests/deployed_host.rs) and the vault's last commit by \
         vault/serving and recovery/reconciliation",
    )
}

/// `rotation/root`: every principal's trust bundle pins exactly Scribe's current root: no
/// rotation half done, no retired root still trusted. The evidence is the root's file time and
/// how many roots each bundle holds.
pub(super) fn rotation(manifest: &Manifest, layout: &StateLayout) -> Check {
    let root_path = layout.scribe_dir().join("root.crt");
    let root = match std::fs::read_to_string(&root_path) {
        Ok(r) => r,
        Err(e) => {
            return Check::observed(ROTATION, false, format!("{}: {e}", root_path.display()));
        }
    };
    let certificates = |pem: &str| pem.matches("-----BEGIN CERTIFICATE-----").count();
    let mut wrong = Vec::new();
    let principals = manifest
        .roles
        .iter()
        .map(|r| r.name.as_str())
        .chain([OPERATOR]);
    let mut n = 0;
    for p in principals {
        let path = layout
            .secret_dir(p)
            .join(reach_identity::files::TRUST_BUNDLE);
        let bundle = match std::fs::read_to_string(&path) {
            Ok(b) => b,
            Err(e) => {
                wrong.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        n += 1;
        if !bundle.contains(root.trim()) {
            wrong.push(format!("{p}'s bundle does not pin the current root"));
        } else if certificates(&bundle) > 1 {
            wrong.push(format!(
                "{p}'s bundle still pins {} roots",
                certificates(&bundle)
            ));
        }
    }
    if wrong.is_empty() {
        let written = std::fs::metadata(&root_path)
            .and_then(|m| m.modified())
            .map(at)
            .unwrap_or_else(|_| "at an unknown time".into());
        Check::observed(
            ROTATION,
            true,
            format!(
                "{n} bundles pin exactly the current root ({} written {written})",
                root_path.display()
            ),
        )
    } else {
        Check::observed(
            ROTATION,
            false,
            format!(
                "{}; a rotation is unfinished: finish it with `reach scribe identities \
                 --rotate retire-previous-root`",
                wrong.join("; ")
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::Outcome;

    fn swaps(lines: &str) -> Result<String, String> {
        Ok(format!(
            "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n{lines}"
        ))
    }

    /// A fake block class: `dm-0` a dm-crypt target, `dm-1` an LVM volume on it, `dm-2` an
    /// LVM volume on a plain partition.
    fn block() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let dev = |name: &str, uuid: Option<&str>, slaves: &[&str]| {
            let d = dir.path().join(name);
            std::fs::create_dir_all(d.join("slaves")).unwrap();
            if let Some(u) = uuid {
                std::fs::create_dir_all(d.join("dm")).unwrap();
                std::fs::write(d.join("dm/uuid"), format!("{u}\n")).unwrap();
            }
            for s in slaves {
                std::fs::create_dir_all(d.join("slaves").join(s)).unwrap();
            }
        };
        dev("vda1", None, &[]);
        dev("dm-0", Some("CRYPT-LUKS2-abc-swap"), &["vda2"]);
        dev("dm-1", Some("LVM-xyz"), &["dm-0"]);
        dev("dm-2", Some("LVM-uvw"), &["vda1"]);
        dir
    }

    #[test]
    fn swap_passes_off_or_encrypted_and_fails_on_a_plain_device() {
        let b = block();
        let judge = |text: &str| swap_in(swaps(text), b.path());
        let off = judge("");
        assert_eq!(
            (off.outcome, off.detail.as_str()),
            (Outcome::Pass, "swap is off")
        );
        // Device names resolve through /dev; the fake class holds only the names, so the
        // partition lines name devices by a path whose file name is the class entry.
        let dev = tempfile::tempdir().unwrap();
        for n in ["dm-0", "dm-1", "dm-2", "vda1", "zram0"] {
            std::fs::write(dev.path().join(n), "").unwrap();
        }
        let line = |n: &str| format!("{}\tpartition\t1024\t0\t-2\n", dev.path().join(n).display());
        let crypt = judge(&(line("dm-0") + &line("dm-1") + &line("zram0")));
        assert_eq!(crypt.outcome, Outcome::Pass, "{}", crypt.detail);
        assert!(crypt.detail.contains("dm-crypt"), "{}", crypt.detail);
        assert!(crypt.detail.contains("in memory"), "{}", crypt.detail);
        let plain = judge(&(line("dm-0") + &line("dm-2")));
        assert_eq!(plain.outcome, Outcome::Fail);
        assert!(
            plain.detail.contains("on dm-2, which is not dm-crypt"),
            "{}",
            plain.detail
        );
        let raw = judge(&line("vda1"));
        assert_eq!(raw.outcome, Outcome::Fail, "{}", raw.detail);
        // Unreadable evidence is no pass.
        let none = swap_in(Err("/proc/swaps: gone".into()), b.path());
        assert_eq!(none.outcome, Outcome::Fail);
    }

    #[test]
    fn the_account_must_be_neither_root_nor_a_login() {
        let linger = tempfile::tempdir().unwrap();
        // nobody exists on every Debian host, with /usr/sbin/nologin.
        let nobody = account(nix::unistd::Uid::from_raw(65534), linger.path());
        assert_eq!(nobody.outcome, Outcome::Pass, "{}", nobody.detail);
        assert!(
            nobody.detail.contains("does not linger"),
            "{}",
            nobody.detail
        );
        std::fs::write(linger.path().join("nobody"), "").unwrap();
        let lingers = account(nix::unistd::Uid::from_raw(65534), linger.path());
        assert!(lingers.detail.contains(", lingers"), "{}", lingers.detail);
        let root = account(nix::unistd::Uid::from_raw(0), linger.path());
        assert_eq!(root.outcome, Outcome::Fail);
        let nameless = account(nix::unistd::Uid::from_raw(4_000_000_000), linger.path());
        assert_eq!(nameless.outcome, Outcome::Fail);
    }

    #[test]
    fn a_body_older_than_the_boot_must_answer_again() {
        let m = reach_manifest::load(reach_manifest::VPS_PUBLIC).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let layout = StateLayout::new(dir.path());
        std::fs::create_dir_all(layout.scribe_dir()).unwrap();
        let created = std::fs::metadata(layout.scribe_dir())
            .unwrap()
            .created()
            .unwrap();
        let all: Vec<String> = m.roles.iter().map(|r| r.name.as_str().to_owned()).collect();
        let hour = Duration::from_secs(3600);
        // Booted after the body was made: it lived through a reboot.
        let after = Some(created + hour);
        let back = reboot_at(&m, &layout, &all, after);
        assert_eq!(back.outcome, Outcome::Pass, "{}", back.detail);
        assert!(
            back.detail.ends_with("it came back by itself"),
            "{}",
            back.detail
        );
        let some: Vec<String> = all.iter().filter(|r| *r != "ward").cloned().collect();
        let missing = reboot_at(&m, &layout, &some, after);
        assert_eq!(missing.outcome, Outcome::Fail);
        assert!(
            missing.detail.ends_with("; ward did not come back"),
            "{}",
            missing.detail
        );
        // Made since the boot: no reboot to account for.
        let since = reboot_at(&m, &layout, &some, Some(created - hour));
        assert_eq!(since.outcome, Outcome::Skip, "{}", since.detail);
        assert!(
            since
                .detail
                .starts_with("no reboot since the body was created")
        );
        assert_eq!(reboot_at(&m, &layout, &all, None).outcome, Outcome::Fail);
    }

    #[test]
    fn a_process_that_may_dump_core_is_named() {
        // This test process inherited whatever limit the shell had; set none is no pass
        // unless it is zero both ways.
        let me = std::process::id();
        let text = std::fs::read_to_string(format!("/proc/{me}/limits")).unwrap();
        let zero = text
            .lines()
            .find_map(|l| l.strip_prefix("Max core file size"))
            .is_some_and(|v| v.split_whitespace().take(2).eq(["0", "0"]));
        assert_eq!(core_limit_zero(me).is_ok(), zero);
        assert!(core_limit_zero(u32::MAX).is_err());
    }
}
