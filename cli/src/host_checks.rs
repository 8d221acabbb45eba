//! The live-host receipt's checks of what Scribe materialized on the host (`reach audit`):
//! the installed Quadlet directory (`units/drift`, `renewal/timer`, `units/shutdown`,
//! `units/core-dumps`), the
//! rollout of the state directory to Podman (`secrets/rollout`), reboots (`reboot/linger`) and
//! the egress firewall (`firewall/egress`, `network/dns`). The receipt's other checks are the launcher's
//! (`reach_launcher::audit`); these need Scribe, Podman or the host's systemd and nftables.

use std::path::{Path, PathBuf};

use anyhow::Context;
use reach_manifest::Manifest;
use reach_manifest::plan::StateLayout;
use reach_scribe::check::CheckOptions;
use reach_scribe::images::{DigestSource, pin_images};
use reach_scribe::quadlet::QuadletInput;

use crate::scribe::{drift_of, egress_destinations, resolve};

/// The audit's checks of an installed Quadlet directory `dir`, from one derivation:
/// `units/drift` (Scribe's drift report, with the images the local Podman store holds, its
/// Podman secrets and image digests included), `renewal/timer` and `units/shutdown`.
pub fn units(
    m: &Manifest,
    manifest: Option<&Path>,
    state: &Path,
    dir: &Path,
) -> [reach_launcher::audit::Check; 3] {
    use reach_launcher::audit::Check;
    const ID: &str = "units/drift";
    let podman = std::path::PathBuf::from("podman");
    let options = CheckOptions {
        podman: Some(podman.clone()),
        ruleset: None,
    };
    let report = pin_images(m, &DigestSource::LocalPodman(podman))
        .map_err(anyhow::Error::from)
        .and_then(|images| drift_of(m, manifest, images, state, dir, &options));
    let (derived, drift) = match report {
        Ok(r) => r,
        Err(e) => {
            let e = format!("{e:#}");
            return [
                Check::observed(ID, false, e.clone()),
                Check::observed(RENEWAL_TIMER, false, e.clone()),
                Check::observed(SHUTDOWN_UNIT, false, e),
            ];
        }
    };
    let drift_check = if drift.is_empty() {
        Check::observed(
            ID,
            true,
            format!(
                "{} files of {} match, {} roles",
                derived.files.len(),
                dir.display(),
                derived.containers.len()
            ),
        )
    } else {
        Check::observed(
            ID,
            false,
            drift
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        )
    };
    let uid = nix::unistd::getuid();
    let (timer, shutdown) = match manager_of(uid) {
        Ok(manager) => (
            renewal_timer_in(&manager, &derived, dir),
            shutdown_unit_in(
                &manager,
                &derived,
                dir,
                Path::new("/etc/systemd/system"),
                uid.as_raw(),
            ),
        ),
        Err(e) => (
            Check::observed(RENEWAL_TIMER, false, format!("{e:#}")),
            Check::observed(SHUTDOWN_UNIT, false, format!("{e:#}")),
        ),
    };
    [drift_check, timer, shutdown]
}

const RENEWAL_TIMER: &str = "renewal/timer";
const SHUTDOWN_UNIT: &str = "units/shutdown";

/// `units/shutdown` for a rootless body run by `uid`: the system unit Scribe wrote into `out`
/// ([`reach_scribe::shutdown`]) is enabled for that uid in the system manager's `units`
/// directory, exactly as Scribe derives it, so a host's shutdown stops the body in order
/// before the user's manager exits. Root's body is the system manager's own: skipped.
fn shutdown_unit_in(
    manager: &Manager,
    derived: &reach_scribe::quadlet::Materialized,
    out: &Path,
    units: &Path,
    uid: u32,
) -> reach_launcher::audit::Check {
    use reach_launcher::audit::Check;
    use reach_scribe::shutdown::{TEMPLATE, UNIT_FILE, instance};
    if !manager.user {
        return Check::skipped(
            SHUTDOWN_UNIT,
            "root's body is run by the system manager, which stops it in order itself",
        );
    }
    let unit = instance(uid);
    let install = format!(
        "as root: install -m 0644 {} {}/ && systemctl daemon-reload && systemctl enable --now {unit}",
        out.join(UNIT_FILE).display(),
        units.display()
    );
    // Read through the link `systemctl enable` makes to the template.
    let path = units.join("multi-user.target.wants").join(&unit);
    match std::fs::read_to_string(&path) {
        Ok(text) if Some(&text) == derived.files.get(UNIT_FILE) => Check::observed(
            SHUTDOWN_UNIT,
            true,
            format!(
                "{unit} enabled: a shutdown stops the body in order before its user's manager exits"
            ),
        ),
        Ok(_) => Check::observed(
            SHUTDOWN_UNIT,
            false,
            format!(
                "{} is not the unit Scribe derives ({TEMPLATE}); install Scribe's: `{install}`",
                path.display()
            ),
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Check::observed(
            SHUTDOWN_UNIT,
            false,
            format!(
                "{unit} is not enabled: at a shutdown the user's manager stops the body all at \
                 once and roles on a Podman network end failed; `{install}`"
            ),
        ),
        Err(e) => Check::observed(SHUTDOWN_UNIT, false, format!("{}: {e}", path.display())),
    }
}

/// The service manager that runs a body's units: the system's for root, else the user's own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Manager {
    /// Where `systemctl link`/`enable` put its units.
    pub(crate) units: PathBuf,
    /// A user's own manager (`systemctl --user`), not the system's.
    pub(crate) user: bool,
}

impl Manager {
    /// `systemctl`'s words for it, as an operator types them.
    pub(crate) fn systemctl(&self) -> &'static str {
        if self.user {
            "systemctl --user"
        } else {
            "systemctl"
        }
    }

    /// A `systemctl` command addressed to it.
    pub(crate) fn command(&self) -> std::process::Command {
        let mut systemctl = std::process::Command::new("systemctl");
        if self.user {
            systemctl.arg("--user");
        }
        systemctl
    }
}

pub(crate) fn manager_of(uid: nix::unistd::Uid) -> anyhow::Result<Manager> {
    if uid.is_root() {
        return Ok(Manager {
            units: PathBuf::from("/etc/systemd/system"),
            user: false,
        });
    }
    let user = nix::unistd::User::from_uid(uid)
        .with_context(|| format!("uid {uid}"))?
        .with_context(|| format!("uid {uid} has no user entry"))?;
    Ok(Manager {
        units: user.dir.join(".config/systemd/user"),
        user: true,
    })
}

/// The commands that link the renewal timer Scribe wrote into `out` into `manager` and start it.
pub(crate) fn timer_install(manager: &Manager, out: &Path) -> String {
    use reach_scribe::renewal::{SERVICE_FILE, TIMER_FILE, TIMER_UNIT};
    let systemctl = manager.systemctl();
    format!(
        "{systemctl} link {0} {1} && {systemctl} enable --now {TIMER_UNIT}",
        out.join(SERVICE_FILE).display(),
        out.join(TIMER_FILE).display()
    )
}

/// `renewal/timer`: the renewal timer Scribe wrote into `out` is enabled in `units` (the
/// manager's unit directory) and both its units, as systemd finds them there, are exactly
/// Scribe's. Without it every leaf of a Quadlet body ends a day after it was issued.
fn renewal_timer_in(
    manager: &Manager,
    derived: &reach_scribe::quadlet::Materialized,
    out: &Path,
) -> reach_launcher::audit::Check {
    use reach_launcher::audit::Check;
    use reach_scribe::renewal::{SERVICE_FILE, SERVICE_UNIT, TIMER_FILE, TIMER_UNIT};
    let units = &manager.units;
    let install = timer_install(manager, out);
    let found = [
        (
            units.join("timers.target.wants").join(TIMER_UNIT),
            TIMER_FILE,
        ),
        (units.join(SERVICE_UNIT), SERVICE_FILE),
    ];
    for (path, file) in found {
        // Read through the links `systemctl link` and `enable` make.
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Check::observed(
                    RENEWAL_TIMER,
                    false,
                    format!(
                        "no {}: the leaves are not renewed and end within a day; run `{install}`",
                        path.display()
                    ),
                );
            }
            Err(e) => {
                return Check::observed(RENEWAL_TIMER, false, format!("{}: {e}", path.display()));
            }
        };
        if Some(&text) != derived.files.get(file) {
            return Check::observed(
                RENEWAL_TIMER,
                false,
                format!(
                    "{} is not the unit Scribe derives ({file}); link Scribe's: `{install}`",
                    path.display()
                ),
            );
        }
    }
    Check::observed(
        RENEWAL_TIMER,
        true,
        format!(
            "{TIMER_UNIT} enabled in {}: `{}` every hour",
            units.display(),
            derived.files[SERVICE_FILE]
                .lines()
                .find_map(|l| l.strip_prefix("ExecStart="))
                .unwrap_or_default()
        ),
    )
}

/// The receipt's `secrets/rollout` for a Quadlet body: every running role reads the credentials
/// its state directory has now (leaves it reloads live). It fails while a credential set since a
/// role started waits for that role's restart, naming what `reach scribe renew --restart` would
/// do.
pub fn secrets_rollout(m: &Manifest, state: &Path) -> reach_launcher::audit::Check {
    use reach_launcher::audit::Check;
    const ID: &str = "secrets/rollout";
    let podman = reach_scribe::image_build::Podman::new("podman");
    let input = QuadletInput::new(m, Default::default(), StateLayout::new(state));
    match reach_scribe::deployed::rollout(&podman, &input) {
        Ok(r) if r.restart.is_empty() => Check::observed(
            ID,
            true,
            "every running role reads the secrets of the state directory",
        ),
        Ok(r) => {
            let stale: Vec<String> = r
                .restart
                .iter()
                .map(|role| format!("{role} started before a credential it reads was written"))
                .collect();
            Check::observed(
                ID,
                false,
                format!(
                    "{}; run `reach scribe renew --state {} --restart`",
                    stale.join("; "),
                    state.display()
                ),
            )
        }
        Err(e) => Check::observed(ID, false, e.to_string()),
    }
}

/// The receipt's firewall checks, `firewall/egress` and `network/dns`, from one listing of the
/// live `inet reach_egress` table; both skipped without a ruleset file.
pub fn firewall(m: &Manifest, ruleset: Option<&Path>) -> [reach_launcher::audit::Check; 2] {
    use reach_launcher::audit::Check;
    let Some(path) = ruleset else {
        let why = "no ruleset file given (--ruleset)";
        return [
            Check::skipped("firewall/egress", why),
            Check::skipped("network/dns", why),
        ];
    };
    let live = reach_scribe::live_ruleset::listing(std::process::Command::new("nft"))
        .map_err(|e| e.to_string());
    [firewall_egress(path, &live), network_dns(m, &live)]
}

/// The live table as [`reach_scribe::live_ruleset::listing`] gave it (`None`: not loaded).
type Listing = Result<Option<String>, String>;

/// `firewall/egress`: the live table against the ruleset file the host loaded
/// ([`reach_scribe::live_ruleset`]), named by its digest.
fn firewall_egress(path: &Path, live: &Listing) -> reach_launcher::audit::Check {
    use reach_launcher::audit::Check;
    use reach_scribe::live_ruleset::{Loaded, compare_listing};
    const ID: &str = "firewall/egress";
    let digest = match std::fs::read(path) {
        Ok(bytes) => reach_digest::Sha256Digest::of(&bytes),
        Err(e) => return Check::observed(ID, false, format!("{}: {e}", path.display())),
    };
    let file = format!("{} ({digest})", path.display());
    let live = match live {
        Ok(l) => l.as_deref(),
        Err(e) => return Check::observed(ID, false, format!("{file}: {e}")),
    };
    match compare_listing(live, path) {
        Ok(Loaded::Matches { lines }) => Check::observed(
            ID,
            true,
            format!("the live table matches {file}: {lines} lines as the kernel lists them"),
        ),
        Ok(Loaded::Absent) => Check::observed(
            ID,
            false,
            format!("no table inet reach_egress is loaded; expected {file}"),
        ),
        Ok(Loaded::Differs {
            line,
            within,
            expected,
            found,
        }) => Check::observed(
            ID,
            false,
            format!(
                "the live table differs from {file} at line {line} of the kernel's listing{}: \
                 expected `{expected}`, found `{found}`",
                within.map_or(String::new(), |w| format!(" ({w})"))
            ),
        ),
        Err(e) => Check::observed(ID, false, format!("{file}: {e}")),
    }
}

/// The line every role's unit carries (`reach_scribe::quadlet`): no core dump, soft or hard.
const NO_CORE_DUMPS: &str = "Ulimit=core=0:0";

/// `units/core-dumps`: every role's installed `.container` unit in `dir` asks for no core dumps
/// (the unit's half of `process/core-dumps`, which reads the running processes' limits). Any
/// edit of a unit also fails `units/drift`; this one names the property.
pub fn unit_core_dumps(m: &Manifest, dir: &Path) -> reach_launcher::audit::Check {
    use reach_launcher::audit::Check;
    const ID: &str = "units/core-dumps";
    let mut missing = Vec::new();
    for role in &m.roles {
        let file = dir.join(format!(
            "{}.container",
            reach_scribe::quadlet::container_name(role.name.as_str())
        ));
        match std::fs::read_to_string(&file) {
            Ok(text) if text.lines().any(|l| l.trim() == NO_CORE_DUMPS) => {}
            Ok(_) => missing.push(format!("{} has no `{NO_CORE_DUMPS}`", file.display())),
            Err(e) => missing.push(format!("{}: {e}", file.display())),
        }
    }
    if missing.is_empty() {
        Check::observed(
            ID,
            true,
            format!(
                "{} role units in {} ask `{NO_CORE_DUMPS}`",
                m.roles.len(),
                dir.display()
            ),
        )
    } else {
        Check::observed(ID, false, missing.join("; "))
    }
}

/// Where systemd-logind keeps one file per user whose service manager runs from boot (what
/// `loginctl enable-linger USER` creates).
const LINGER_DIR: &str = "/var/lib/systemd/linger";

/// The receipt's `reboot/linger` for a Quadlet body: its units are `WantedBy=default.target`
/// of the manager that runs them, and a rootless user's manager starts at boot only when the
/// user lingers; without it the body stays down after a reboot until the user logs in.
pub fn reboot_linger() -> reach_launcher::audit::Check {
    reboot_linger_in(Path::new(LINGER_DIR), nix::unistd::getuid())
}

fn reboot_linger_in(linger_dir: &Path, uid: nix::unistd::Uid) -> reach_launcher::audit::Check {
    use reach_launcher::audit::Check;
    const ID: &str = "reboot/linger";
    if uid.is_root() {
        return Check::observed(
            ID,
            true,
            "root's units run under the system manager, which starts them at boot",
        );
    }
    let name = match nix::unistd::User::from_uid(uid) {
        Ok(Some(u)) => u.name,
        Ok(None) => return Check::observed(ID, false, format!("uid {uid} has no user name")),
        Err(e) => return Check::observed(ID, false, format!("uid {uid}: {e}")),
    };
    let file = linger_dir.join(&name);
    if file.exists() {
        Check::observed(
            ID,
            true,
            format!(
                "{name} lingers ({}): the units start at boot",
                file.display()
            ),
        )
    } else {
        Check::observed(
            ID,
            false,
            format!(
                "{name} does not linger (no {}): the units start only when {name} logs in; \
                 run `loginctl enable-linger {name}` as root",
                file.display()
            ),
        )
    }
}

/// `network/dns`: every admitted destination resolves now, through the host's resolver, only
/// to addresses the live egress table admits for it. An answer outside them (the destination
/// moved since the ruleset was rendered) would be dropped by the firewall: the check says which
/// and that the ruleset must be rendered and loaded again. Judged only with a ruleset file
/// (`--ruleset`), i.e. where the body has a firewall.
fn network_dns(m: &Manifest, live: &Listing) -> reach_launcher::audit::Check {
    use reach_launcher::audit::Check;
    use reach_scribe::live_ruleset::admitted;
    const ID: &str = "network/dns";
    let live = match live {
        Ok(Some(l)) => l,
        Ok(None) => return Check::observed(ID, false, "no table inet reach_egress is loaded"),
        Err(e) => return Check::observed(ID, false, e.clone()),
    };
    let admitted = admitted(live);
    let mut broken = Vec::new();
    let mut stale = Vec::new();
    let destinations = egress_destinations(m);
    for d in &destinations {
        let allowed = admitted.get(&d.name).cloned().unwrap_or_default();
        match resolve(d) {
            Ok(now) => {
                let outside: Vec<String> =
                    now.difference(&allowed).map(ToString::to_string).collect();
                if !outside.is_empty() {
                    broken.push(format!(
                        "{} now resolves to {}, which the live firewall does not admit",
                        d.name,
                        outside.join(", ")
                    ));
                }
                stale.extend(
                    allowed
                        .difference(&now)
                        .map(|a| format!("{} ({a})", d.name)),
                );
            }
            Err(e) => broken.push(format!("{e:#}")),
        }
    }
    if broken.is_empty() {
        let mut detail = format!(
            "{} destinations resolve only to addresses the live firewall admits",
            destinations.len()
        );
        if !stale.is_empty() {
            detail.push_str(&format!(
                "; admitted but not in today's answer: {}",
                stale.join(", ")
            ));
        }
        Check::observed(ID, true, detail)
    } else {
        Check::observed(
            ID,
            false,
            format!(
                "{}: render the ruleset again (`reach scribe nftables`) and load it",
                broken.join("; ")
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scribe::tests::derived;
    use reach_launcher::audit::Outcome;
    use reach_scribe::renewal::{SERVICE_FILE, SERVICE_UNIT, TIMER_FILE, TIMER_UNIT};

    /// `units/shutdown` passes only when the system unit is enabled for the body's uid and is
    /// Scribe's; root's body needs none.
    #[test]
    fn the_shutdown_unit_must_be_enabled_for_the_body_and_scribes() {
        use reach_scribe::shutdown::{TEMPLATE, UNIT_FILE};
        let state = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let system = tempfile::tempdir().unwrap();
        let d = derived(state.path(), None);
        reach_scribe::quadlet::write_out(&d, out.path()).unwrap();
        let user = Manager {
            units: PathBuf::from("/home/reach/.config/systemd/user"),
            user: true,
        };
        let check = |uid| shutdown_unit_in(&user, &d, out.path(), system.path(), uid);
        let none = check(1500);
        assert_eq!(none.outcome, Outcome::Fail);
        assert!(
            none.detail
                .contains("reach-shutdown@1500.service is not enabled")
                && none
                    .detail
                    .contains("systemctl enable --now reach-shutdown@1500.service"),
            "{}",
            none.detail
        );
        // What `install` and `systemctl enable` leave behind.
        let template = system.path().join(TEMPLATE);
        std::fs::copy(out.path().join(UNIT_FILE), &template).unwrap();
        let wants = system.path().join("multi-user.target.wants");
        std::fs::create_dir_all(&wants).unwrap();
        std::os::unix::fs::symlink(&template, wants.join("reach-shutdown@1500.service")).unwrap();
        let on = check(1500);
        assert_eq!(on.outcome, Outcome::Pass, "{}", on.detail);
        // Enabled for another user only.
        assert_eq!(check(1501).outcome, Outcome::Fail);
        // Edited: not Scribe's.
        std::fs::write(
            &template,
            d.files[UNIT_FILE].replace("ExecStop=-", "ExecStop="),
        )
        .unwrap();
        let edited = check(1500);
        assert_eq!(edited.outcome, Outcome::Fail);
        assert!(
            edited.detail.contains("is not the unit Scribe derives"),
            "{}",
            edited.detail
        );
        // Root's body is stopped by the system manager itself.
        let root = Manager {
            units: PathBuf::from("/etc/systemd/system"),
            user: false,
        };
        let skipped = shutdown_unit_in(&root, &d, out.path(), system.path(), 0);
        assert_eq!(skipped.outcome, Outcome::Skip);
    }

    /// `renewal/timer` passes only when the timer is enabled and both units systemd finds are
    /// Scribe's, whether linked (`systemctl link`, symlinks) or copied.
    #[test]
    fn the_renewal_timer_must_be_enabled_and_scribes() {
        let state = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let units = tempfile::tempdir().unwrap();
        let d = derived(state.path(), None);
        reach_scribe::quadlet::write_out(&d, out.path()).unwrap();
        let manager = Manager {
            units: units.path().to_owned(),
            user: true,
        };
        let check = || renewal_timer_in(&manager, &d, out.path());

        let none = check();
        assert_eq!(none.outcome, Outcome::Fail);
        assert!(
            none.detail.contains(&format!(
                "run `systemctl --user link {} {} && systemctl --user enable --now {TIMER_UNIT}`",
                out.path().join(SERVICE_FILE).display(),
                out.path().join(TIMER_FILE).display()
            )),
            "{}",
            none.detail
        );
        // What `systemctl link` and `enable` leave behind.
        let wants = units.path().join("timers.target.wants");
        std::fs::create_dir_all(&wants).unwrap();
        std::os::unix::fs::symlink(
            out.path().join(SERVICE_FILE),
            units.path().join(SERVICE_UNIT),
        )
        .unwrap();
        std::os::unix::fs::symlink(out.path().join(TIMER_FILE), units.path().join(TIMER_UNIT))
            .unwrap();
        // Linked, not enabled: nothing starts it.
        assert_eq!(check().outcome, Outcome::Fail);
        std::os::unix::fs::symlink(units.path().join(TIMER_UNIT), wants.join(TIMER_UNIT)).unwrap();
        let on = check();
        assert_eq!(on.outcome, Outcome::Pass, "{}", on.detail);
        assert!(on.detail.contains("scribe renew --state"), "{}", on.detail);

        // A copy of the service that renews some other body's state directory is not Scribe's.
        std::fs::remove_file(units.path().join(SERVICE_UNIT)).unwrap();
        std::fs::write(
            units.path().join(SERVICE_UNIT),
            d.files[SERVICE_FILE].replace(&state.path().display().to_string(), "/elsewhere"),
        )
        .unwrap();
        let other = check();
        assert_eq!(other.outcome, Outcome::Fail);
        assert!(
            other.detail.contains("is not the unit Scribe derives"),
            "{}",
            other.detail
        );
        // An exact copy is.
        std::fs::write(units.path().join(SERVICE_UNIT), &d.files[SERVICE_FILE]).unwrap();
        assert_eq!(check().outcome, Outcome::Pass);
    }

    /// Root's units are the system manager's; anyone else's their own manager's.
    #[test]
    fn the_timer_is_looked_for_in_the_manager_that_runs_the_body() {
        let root = manager_of(nix::unistd::Uid::from_raw(0)).unwrap();
        assert_eq!(root.units, Path::new("/etc/systemd/system"));
        assert_eq!(root.systemctl(), "systemctl");
        // nobody exists on every Debian host.
        let nobody = manager_of(nix::unistd::Uid::from_raw(65534)).unwrap();
        assert_eq!(nobody.units, Path::new("/nonexistent/.config/systemd/user"));
        assert_eq!(nobody.systemctl(), "systemctl --user");
        // The command `renew --restart` runs: the same words, each its own argument.
        for m in [&root, &nobody] {
            let c = m.command();
            let words: Vec<_> = std::iter::once(c.get_program())
                .chain(c.get_args())
                .map(|w| w.to_str().unwrap())
                .collect();
            assert_eq!(words.join(" "), m.systemctl());
        }
        assert_eq!(nobody.command().get_args().count(), 1);
        assert!(manager_of(nix::unistd::Uid::from_raw(4_000_000_000)).is_err());
    }

    /// Scribe's units pass; one whose `Ulimit=core=0:0` line was taken out fails, naming it.
    #[test]
    fn every_role_unit_must_ask_for_no_core_dumps() {
        let state = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let d = derived(state.path(), None);
        reach_scribe::quadlet::write_out(&d, out.path()).unwrap();
        let m = reach_manifest::load(reach_manifest::VPS_PUBLIC).unwrap();
        let sound = unit_core_dumps(&m, out.path());
        assert_eq!(sound.outcome, Outcome::Pass, "{}", sound.detail);
        let ward = out.path().join("reach-ward.container");
        let text = std::fs::read_to_string(&ward).unwrap();
        std::fs::write(&ward, text.replace("Ulimit=core=0:0\n", "")).unwrap();
        let edited = unit_core_dumps(&m, out.path());
        assert_eq!(edited.outcome, Outcome::Fail);
        assert_eq!(
            edited.detail,
            format!("{} has no `Ulimit=core=0:0`", ward.display())
        );
    }

    #[test]
    fn a_rootless_body_survives_a_reboot_only_if_its_user_lingers() {
        let dir = tempfile::tempdir().unwrap();
        // nobody exists on every Debian host.
        let nobody = nix::unistd::Uid::from_raw(65534);
        let off = reboot_linger_in(dir.path(), nobody);
        assert_eq!(off.outcome, Outcome::Fail);
        assert!(
            off.detail
                .contains("run `loginctl enable-linger nobody` as root"),
            "{}",
            off.detail
        );
        std::fs::write(dir.path().join("nobody"), "").unwrap();
        let on = reboot_linger_in(dir.path(), nobody);
        assert_eq!(on.outcome, Outcome::Pass, "{}", on.detail);
        // Root's units are the system manager's.
        let root = reboot_linger_in(dir.path(), nix::unistd::Uid::from_raw(0));
        assert_eq!(root.outcome, Outcome::Pass);
        // A uid without a name is no evidence.
        let nameless = reboot_linger_in(dir.path(), nix::unistd::Uid::from_raw(4_000_000_000));
        assert_eq!(nameless.outcome, Outcome::Fail, "{}", nameless.detail);
    }
}
