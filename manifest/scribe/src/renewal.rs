//! The renewal timer of a Quadlet body: two user units that run `reach scribe renew --restart`
//! every hour, so no leaf outlives its day unrenewed.
//!
//! A Quadlet body's containers read their leaves from their secret directories, mounted
//! read-only, and reload them live; nothing inside them can renew a leaf (Scribe's CA key stays
//! in the host's state directory), so without this timer every role's leaf ends 24 hours after
//! it was issued and the body stops talking. A renewed leaf needs no restart: `--restart` is for
//! a credential the operator set since its role started. The units go in `systemd/` of the output directory: the Quadlet generator reads only
//! its own kinds of file, so systemd learns of them by `systemctl --user link` (see
//! deploy/README.md), and `reach audit --units` checks they are linked and enabled.
//!
//! The service is not sandboxed: it runs rootless Podman, whose user namespaces need the setuid
//! `newuidmap`, which `NoNewPrivileges=` (and every option that implies it) would break.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::identities::RENEW_BEFORE;
use crate::refusal::{self, Refusal, RefusalKind};

/// The renewal service, relative to the output directory.
pub const SERVICE_FILE: &str = "systemd/reach-renew.service";
/// The renewal timer, relative to the output directory.
pub const TIMER_FILE: &str = "systemd/reach-renew.timer";
/// The timer's unit name (what `systemctl enable` takes).
pub const TIMER_UNIT: &str = "reach-renew.timer";
/// The service's unit name.
pub const SERVICE_UNIT: &str = "reach-renew.service";
/// How often the timer fires (`OnCalendar=hourly`).
pub const EVERY: Duration = Duration::from_secs(3600);

// A leaf enters its renewal window RENEW_BEFORE ahead of its end; the timer must come round
// several times inside it, so a run that fails (a busy Podman, a host asleep) is retried in time.
const _: () = assert!(EVERY.as_secs() * 4 <= RENEW_BEFORE.as_secs());

/// How a body renews its leaves: the `reach` binary the timer runs and the manifest it names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Renewal {
    /// The `reach` binary, an absolute path.
    pub reach: PathBuf,
    /// The manifest file, an absolute path; `None` for the embedded one.
    pub manifest: Option<PathBuf>,
}

impl Default for Renewal {
    /// Where deploy/README.md installs the binary, with the embedded manifest.
    fn default() -> Self {
        Self {
            reach: PathBuf::from("/usr/local/bin/reach"),
            manifest: None,
        }
    }
}

impl Renewal {
    /// The service's command line, unquoted, for the body whose state directory is `state`.
    pub fn command(&self, state: &Path) -> Vec<String> {
        let mut words = vec![self.reach.display().to_string()];
        words.extend(["scribe", "renew", "--state"].map(String::from));
        words.push(state.display().to_string());
        if let Some(m) = &self.manifest {
            words.push("--manifest".to_owned());
            words.push(m.display().to_string());
        }
        words.push("--restart".to_owned());
        words
    }
}

/// The two units, as (file, text), for `header` (Scribe's generated-file header), the profile
/// and the body's state directory. Refuses a relative path (the service runs from no particular
/// directory) and a path systemd could not be given safely.
pub fn render(
    header: &str,
    profile: &str,
    renewal: &Renewal,
    state: &Path,
) -> Result<[(&'static str, String); 2], Refusal> {
    let paths = [
        Some(renewal.reach.as_path()),
        Some(state),
        renewal.manifest.as_deref(),
    ];
    for p in paths.into_iter().flatten() {
        let shown = p.display().to_string();
        refusal::vet_unit_word(&shown, || shown.clone()).map_err(|k| Refusal::new("renewal", k))?;
        if !p.is_absolute() {
            return Err(Refusal::new("renewal", RefusalKind::RelativePath(shown)));
        }
    }
    let exec: Vec<String> = renewal
        .command(state)
        .iter()
        .map(|w| crate::quadlet::quote(w))
        .collect();
    let service = format!(
        "{header}[Unit]\n\
         Description=Renews the leaves of Reach ({profile}) within {window} h of their end\n\
         \n[Service]\n\
         Type=oneshot\n\
         ExecStart={exec}\n",
        window = RENEW_BEFORE.as_secs() / 3600,
        exec = exec.join(" "),
    );
    let timer = format!(
        "{header}[Unit]\n\
         Description=Runs {SERVICE_UNIT} for Reach ({profile}) every hour\n\
         \n[Timer]\n\
         OnCalendar=hourly\n\
         # A run missed while the host was down or asleep happens at the next start.\n\
         Persistent=true\n\
         RandomizedDelaySec=5min\n\
         Unit={SERVICE_UNIT}\n\
         \n[Install]\n\
         WantedBy=timers.target\n"
    );
    Ok([(SERVICE_FILE, service), (TIMER_FILE, timer)])
}
