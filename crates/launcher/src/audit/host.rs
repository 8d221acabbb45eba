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
//! - `lifecycle/shutdown` (a Quadlet body that predates the boot): the journal of the boot
//!   before shows how the body last stopped: every role's unit stopped with no failure, kill
//!   or timeout, each role logged its own `stopped` (it drained), and callers stopped before
//!   the roles they need;
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
/// How long reading the boot before's journal may take (it holds every role's log).
const JOURNAL_TIMEOUT: Duration = Duration::from_secs(60);

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

/// `lifecycle/shutdown` for a body the launcher started: it is stopped by `reach down`, not by
/// a host's shutdown.
pub(super) fn shutdown_skipped() -> Check {
    Check::skipped(
        SHUTDOWN,
        "the launcher's dev profile is not stopped by a host's shutdown; a Quadlet body \
         (--podman) is judged from the journal of the boot before",
    )
}

/// `lifecycle/shutdown` for a Quadlet body run by `uid`: if the body predates the current
/// boot, the last boot's journal (the persistent journal the platform floor keeps) must show
/// how it stopped ([`shutdown_in`]).
pub(super) async fn shutdown(manifest: &Manifest, layout: &StateLayout, uid: u32) -> Check {
    let Some(boot) = boot_time() else {
        return Check::observed(SHUTDOWN, false, "/proc/stat has no boot time");
    };
    let dir = layout.scribe_dir();
    match std::fs::metadata(&dir).and_then(|m| m.created()) {
        Ok(created) if created >= boot => {
            return Check::skipped(
                SHUTDOWN,
                format!(
                    "no shutdown since the body was created ({} created {}, host booted {})",
                    dir.display(),
                    at(created),
                    at(boot)
                ),
            );
        }
        Ok(_) => {}
        Err(e) => {
            return Check::skipped(
                SHUTDOWN,
                format!("{}: no creation time ({e})", dir.display()),
            );
        }
    }
    let out = tokio::process::Command::new("journalctl")
        .args(["--boot=-1", "--output=json", "--no-pager"])
        .arg("--output-fields=MESSAGE,USER_UNIT,UNIT,SYSLOG_IDENTIFIER")
        .arg(format!("_UID={uid}"))
        .kill_on_drop(true)
        .output();
    let journal = match tokio::time::timeout(JOURNAL_TIMEOUT, out).await {
        Err(_) => Err("journalctl did not answer in time".to_owned()),
        Ok(Err(e)) => Err(format!("journalctl: {e}")),
        Ok(Ok(o)) if !o.status.success() => Err(format!(
            "journalctl --boot=-1: {} (is the journal persistent?)",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Ok(Ok(o)) => Ok(String::from_utf8_lossy(&o.stdout).into_owned()),
    };
    match journal {
        Ok(text) => shutdown_in(manifest, &text),
        Err(e) => Check::observed(
            SHUTDOWN,
            false,
            format!("no record of the last shutdown: {e}"),
        ),
    }
}

/// One journal entry, as `journalctl --output=json` prints it.
struct Entry {
    at_us: u64,
    message: String,
    /// The unit a service manager's message is about (`USER_UNIT`, or `UNIT` for the system's).
    unit: Option<String>,
    identifier: Option<String>,
}

fn entry(line: &str) -> Option<Entry> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let text = |k: &str| match &v[k] {
        serde_json::Value::String(s) => Some(s.clone()),
        // A field that is not UTF-8 comes as an array of its bytes.
        serde_json::Value::Array(bytes) => Some(
            String::from_utf8_lossy(
                &bytes
                    .iter()
                    .filter_map(|b| b.as_u64().map(|b| b as u8))
                    .collect::<Vec<u8>>(),
            )
            .into_owned(),
        ),
        _ => None,
    };
    Some(Entry {
        at_us: text("__REALTIME_TIMESTAMP")?.parse().ok()?,
        message: text("MESSAGE").unwrap_or_default(),
        unit: text("USER_UNIT").or_else(|| text("UNIT")),
        identifier: text("SYSLOG_IDENTIFIER"),
    })
}

/// Judges how the body last stopped from the journal of the boot it stopped in
/// (`journalctl --output=json` lines). For each role, from its unit's last start on: the
/// service manager stopped the unit (`Stopped reach-<role>.service`) and reported no failed
/// result, timeout, kill or dump; the role logged its own `stopped` (it answered SIGTERM and
/// drained); and it stopped no later than any role it is ordered after (what it needs).
pub fn shutdown_in(manifest: &Manifest, journal: &str) -> Check {
    let entries: Vec<Entry> = journal.lines().filter_map(entry).collect();
    let Some(last) = entries.iter().map(|e| e.at_us).max() else {
        return Check::observed(
            SHUTDOWN,
            false,
            "the journal of the boot before holds nothing of the body",
        );
    };
    let mut problems = Vec::new();
    let mut stopped_at = std::collections::BTreeMap::new();
    for role in &manifest.roles {
        let name = role.name.as_str();
        let unit = reach_scribe::quadlet::service_name(name);
        let about: Vec<&Entry> = entries
            .iter()
            .filter(|e| e.unit.as_deref() == Some(unit.as_str()))
            .collect();
        let since = about
            .iter()
            .rev()
            .find(|e| e.message.starts_with("Started "))
            .map_or(0, |e| e.at_us);
        let last_run: Vec<&&Entry> = about.iter().filter(|e| e.at_us >= since).collect();
        for e in &last_run {
            let m = &e.message;
            if m.contains("Failed with result")
                || m.contains("timed out")
                || m.contains("code=killed")
                || m.contains("code=dumped")
            {
                problems.push(format!("{name}: {m}"));
            }
        }
        match last_run.iter().find(|e| e.message.starts_with("Stopped ")) {
            Some(e) => {
                stopped_at.insert(name, e.at_us);
            }
            None => problems.push(format!(
                "{name}: its unit was not stopped before the boot ended"
            )),
        }
        // Quadlet's units log as their own name (`SyslogIdentifier=%N`).
        let ident = unit.trim_end_matches(".service");
        let drained = entries.iter().any(|e| {
            e.at_us >= since
                && e.identifier.as_deref() == Some(ident)
                && e.message.contains("\"message\":\"stopped\"")
        });
        if !drained {
            problems.push(format!(
                "{name}: logged no `stopped` of its own (it did not drain)"
            ));
        }
    }
    for role in &manifest.roles {
        let name = role.name.as_str();
        for needed in &role.after {
            if let (Some(a), Some(b)) = (stopped_at.get(name), stopped_at.get(needed.as_str()))
                && a > b
            {
                problems.push(format!("{name} stopped after {needed}, which it needs"));
            }
        }
    }
    let when = format!(
        "the boot before (its last entry at unix {} s)",
        last / 1_000_000
    );
    if problems.is_empty() {
        Check::observed(
            SHUTDOWN,
            true,
            format!(
                "{when}: all {} roles drained and their units stopped cleanly, callers before \
                 what they need",
                manifest.roles.len()
            ),
        )
    } else {
        Check::observed(SHUTDOWN, false, format!("{when}: {}", problems.join("; ")))
    }
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

    /// A boot's journal as `journalctl --output=json` prints it: each role started, then the
    /// body stopped in `order`, each role logging its drain before its unit's `Stopped`.
    fn journal(order: &[&str], extra: &[(usize, &str, &str)]) -> String {
        let mut t = 1_000_000u64;
        let mut lines = Vec::new();
        let mut push = |unit: Option<&str>, ident: &str, message: &str| {
            t += 1000;
            let mut v = serde_json::json!({
                "__REALTIME_TIMESTAMP": t.to_string(),
                "MESSAGE": message,
                "SYSLOG_IDENTIFIER": ident,
            });
            if let Some(u) = unit {
                v["USER_UNIT"] = u.into();
            }
            lines.push(v.to_string());
        };
        for role in order.iter().rev() {
            push(
                Some(&format!("reach-{role}.service")),
                "systemd",
                &format!("Started reach-{role}.service - Reach role {role}."),
            );
        }
        for (i, role) in order.iter().enumerate() {
            let unit = format!("reach-{role}.service");
            push(
                Some(&unit),
                "systemd",
                &format!("Stopping {unit} - Reach role {role}..."),
            );
            push(
                None,
                &format!("reach-{role}"),
                r#"{"level":"INFO","fields":{"message":"stopped"}}"#,
            );
            for (at, r, m) in extra {
                if *at == i && r == role {
                    push(Some(&unit), "systemd", m);
                }
            }
            push(
                Some(&unit),
                "systemd",
                &format!("Stopped {unit} - Reach role {role}."),
            );
        }
        lines.join("\n")
    }

    /// The manifest's roles in an order that stops every caller before what it needs.
    fn stop_order(m: &Manifest) -> Vec<&str> {
        let mut left: Vec<&str> = m.roles.iter().map(|r| r.name.as_str()).collect();
        let mut order = Vec::new();
        while !left.is_empty() {
            let free = *left
                .iter()
                .find(|r| {
                    !left
                        .iter()
                        .any(|o| m.role(o).unwrap().after.iter().any(|a| a.as_str() == **r))
                })
                .expect("no cycle");
            order.push(free);
            left.retain(|r| *r != free);
        }
        order
    }

    #[test]
    fn the_last_shutdown_is_judged_from_the_journal_of_the_boot_before() {
        let m = reach_manifest::load(reach_manifest::VPS_PUBLIC).unwrap();
        let order = stop_order(&m);
        let clean = shutdown_in(&m, &journal(&order, &[]));
        assert_eq!(clean.outcome, Outcome::Pass, "{}", clean.detail);

        // A unit whose stop failed, though its role drained.
        let failed = shutdown_in(
            &m,
            &journal(
                &order,
                &[(0, order[0], "reach-x: Failed with result 'exit-code'.")],
            ),
        );
        assert_eq!(failed.outcome, Outcome::Fail);
        assert!(
            failed
                .detail
                .contains(&format!("{}: reach-x: Failed with result", order[0])),
            "{}",
            failed.detail
        );

        // A role killed at its stop timeout.
        let killed = shutdown_in(
            &m,
            &journal(
                &order,
                &[(1, order[1], "State 'stop-sigterm' timed out. Killing.")],
            ),
        );
        assert_eq!(killed.outcome, Outcome::Fail);

        // A role that never logged its own stop did not drain.
        let text = journal(&order, &[]);
        let undrained: String = text
            .lines()
            .filter(|l| !l.contains("\"SYSLOG_IDENTIFIER\":\"reach-ward\""))
            .collect::<Vec<_>>()
            .join("\n");
        let quiet = shutdown_in(&m, &undrained);
        assert_eq!(quiet.outcome, Outcome::Fail);
        assert!(
            quiet.detail.contains("ward: logged no `stopped`"),
            "{}",
            quiet.detail
        );

        // What is needed stopped first: core stopped after ward.
        let reversed: Vec<&str> = order.iter().rev().copied().collect();
        let backwards = shutdown_in(&m, &journal(&reversed, &[]));
        assert_eq!(backwards.outcome, Outcome::Fail);
        assert!(
            backwards
                .detail
                .contains("core stopped after ward, which it needs"),
            "{}",
            backwards.detail
        );

        // A unit still running when the boot ended.
        let cut: String = text
            .lines()
            .filter(|l| !l.contains("Stopped reach-core.service"))
            .collect::<Vec<_>>()
            .join("\n");
        let running = shutdown_in(&m, &cut);
        assert!(
            running.detail.contains("core: its unit was not stopped"),
            "{}",
            running.detail
        );

        // A failure before the unit's last start belongs to an earlier run.
        let earlier = format!(
            "{}\n{text}",
            serde_json::json!({"__REALTIME_TIMESTAMP": "5", "MESSAGE": "reach-core.service: Failed with result 'exit-code'.", "USER_UNIT": "reach-core.service", "SYSLOG_IDENTIFIER": "systemd"})
        );
        assert_eq!(shutdown_in(&m, &earlier).outcome, Outcome::Pass);

        assert_eq!(shutdown_in(&m, "").outcome, Outcome::Fail);
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
