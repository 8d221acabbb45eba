//! Allow-listed command profiles: the only commands the broker runs in a guest.
//!
//! A profile is a fixed argv prefix (absolute program path first) plus at most `max_args`
//! caller arguments. Arguments come from a conservative character set and never start with
//! `-`, so a caller cannot turn an argument into an option; the prefix ends option parsing
//! (`--`) where the program supports it. A profile may also fix each argument to a closed
//! set ([`CommandProfile::slots`]). Which profiles an instance may use is its caller's: a task
//! pack's `command-profiles.toml`, verified and converted by the caller; the broker only
//! refuses what is not on the instance's list.
//!
//! **Architecture Invariant:** a [`Confinement::ReadOnly`] profile never runs bare. Its argv
//! is always wrapped by [`confined_argv`]: it runs inside the instance's observation session,
//! a systemd unit with a read-only view of the whole filesystem and IP traffic only to and
//! from the guest's loopback ([`crate::observe`]), so an observation is kernel-enforced, never
//! merely declared.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::agent::ExecBounds;
use crate::refusal::BrokerError;

/// Longest caller argument.
pub const MAX_ARG_LEN: usize = 256;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandProfile {
    pub name: String,
    pub prefix: Vec<String>,
    pub max_args: usize,
    pub timeout: Duration,
    pub max_output: usize,
    /// When not empty: exactly one argument per slot, each one of the slot's values.
    pub slots: Vec<Vec<String>>,
    pub confinement: Confinement,
}

/// How a profile's process is confined in the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Confinement {
    /// Runs as the guest agent runs it (a contained mutation: the instance is the boundary).
    #[default]
    None,
    /// An observation: read-only filesystem, loopback-only IP, no new privileges
    /// ([`confined_argv`]).
    ReadOnly,
}

impl Confinement {
    pub fn as_str(self) -> &'static str {
        match self {
            Confinement::None => "none",
            Confinement::ReadOnly => "read-only",
        }
    }
}

/// `argv` confined read-only: run as a child of the instance's observation session, the one
/// read-only sandbox of the instance ([`crate::observe`]), bounded by `timeout` there too.
/// The broker starts the session when a client finds none.
pub fn confined_argv(argv: &[String], timeout: Duration) -> Vec<String> {
    crate::observe::client_argv(argv, timeout)
}

impl CommandProfile {
    pub fn new(name: &str, prefix: &[&str], max_args: usize) -> Self {
        Self {
            name: name.to_owned(),
            prefix: prefix.iter().map(|s| (*s).to_owned()).collect(),
            max_args,
            timeout: Duration::from_secs(30),
            max_output: 64 * 1024,
            slots: Vec::new(),
            confinement: Confinement::None,
        }
    }

    /// The same profile, confined read-only (an observation).
    pub fn read_only(mut self) -> Self {
        self.confinement = Confinement::ReadOnly;
        self
    }

    pub fn bounds(&self) -> ExecBounds {
        ExecBounds {
            timeout: self.timeout,
            max_output: self.max_output,
        }
    }
}

/// The profile the broker's RestartService uses.
pub const SERVICE_RESTART: &str = "service-restart";

/// How long a restart may take: above systemd's own start timeout (`DefaultTimeoutStartSec`,
/// 90 s), so systemd, not the caller's deadline, decides that a slow start failed. The test
/// image's service restarts in 15–20 s under TCG alone and past 30 s on a loaded host. The
/// packs' own `service-restart` profiles give the same 120 s.
pub const RESTART_TIMEOUT: Duration = Duration::from_secs(120);

fn valid_arg(a: &str) -> bool {
    !a.is_empty()
        && a.len() <= MAX_ARG_LEN
        && !a.starts_with('-')
        && a.chars().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | ':' | '/' | '=' | '-' | '+')
        })
}

#[derive(Debug, Clone, Default)]
pub struct ProfileSet(BTreeMap<String, CommandProfile>);

impl ProfileSet {
    pub fn new(profiles: impl IntoIterator<Item = CommandProfile>) -> Self {
        Self(profiles.into_iter().map(|p| (p.name.clone(), p)).collect())
    }

    /// The broker's generic profiles: service status and restart, the guest's interfaces and
    /// clock. Nothing here knows a task: a task's own profiles (an MTA's configuration dump,
    /// say) come from its pack (`packs/<name>/command-profiles.toml`), and a caller adds them
    /// with [`ProfileSet::insert`].
    pub fn builtin() -> Self {
        Self::new([
            CommandProfile::new(
                "service-status",
                &["/usr/bin/systemctl", "is-active", "--"],
                1,
            ),
            CommandProfile {
                timeout: RESTART_TIMEOUT,
                ..CommandProfile::new(SERVICE_RESTART, &["/usr/bin/systemctl", "restart", "--"], 1)
            },
            CommandProfile::new("ip-link", &["/bin/ip", "-o", "link", "show"], 0),
            CommandProfile::new("net-interfaces", &["/bin/ls", "-1", "/sys/class/net"], 0),
            CommandProfile::new("sleep", &["/bin/sleep"], 1),
            // The guest's clock, to confirm a restored instance's time was set.
            CommandProfile::new("date-epoch", &["/bin/date", "+%s"], 0),
        ])
    }

    /// Whether a profile of that name is on the list.
    pub fn get(&self, name: &str) -> Option<&CommandProfile> {
        self.0.get(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// Adds `profile`, replacing one of the same name.
    pub fn insert(&mut self, profile: CommandProfile) {
        self.0.insert(profile.name.clone(), profile);
    }

    /// The full argv for `profile` with `args`, or a typed refusal.
    pub fn argv(
        &self,
        profile: &str,
        args: &[String],
    ) -> Result<(Vec<String>, &CommandProfile), BrokerError> {
        let p = self
            .0
            .get(profile)
            .ok_or_else(|| BrokerError::ProfileRefused(format!("no profile {profile:?}")))?;
        if args.len() > p.max_args {
            return Err(BrokerError::ProfileRefused(format!(
                "{profile} takes at most {} arguments",
                p.max_args
            )));
        }
        if let Some(bad) = args.iter().find(|a| !valid_arg(a)) {
            return Err(BrokerError::ProfileRefused(format!(
                "argument {bad:?} is not admitted"
            )));
        }
        if !p.slots.is_empty()
            && (args.len() != p.slots.len()
                || args.iter().zip(&p.slots).any(|(a, slot)| !slot.contains(a)))
        {
            return Err(BrokerError::ProfileRefused(format!(
                "{profile} admits only its listed arguments"
            )));
        }
        let mut argv = p.prefix.clone();
        argv.extend(args.iter().cloned());
        if p.confinement == Confinement::ReadOnly {
            argv = confined_argv(&argv, p.timeout);
        }
        Ok((argv, p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals() {
        let s = ProfileSet::builtin();
        let a = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            s.argv("service-status", &a(&["app"])).unwrap().0,
            ["/usr/bin/systemctl", "is-active", "--", "app"]
        );
        for (profile, args, want) in [
            ("rm", a(&[]), "no profile"),
            ("date-epoch", a(&["x"]), "at most 0"),
            ("service-status", a(&["--now"]), "not admitted"),
            ("service-status", a(&["a;b"]), "not admitted"),
            ("service-status", a(&[""]), "not admitted"),
        ] {
            let e = s.argv(profile, &args).unwrap_err();
            assert_eq!(e.code(), "broker/profile-refused");
            assert!(e.to_string().contains(want), "{e}");
        }
    }

    #[test]
    fn the_builtin_restart_outlasts_systemds_own_start_timeout() {
        let s = ProfileSet::builtin();
        let restart = s.get(SERVICE_RESTART).unwrap();
        // systemd's DefaultTimeoutStartSec: a start it has not yet given up on is not cut short.
        assert!(restart.bounds().timeout > Duration::from_secs(90));
        // The other built-in profiles keep the short default.
        assert_eq!(
            s.get("service-status").unwrap().bounds().timeout,
            Duration::from_secs(30)
        );
    }

    #[test]
    fn a_task_profile_is_the_callers_not_built_in() {
        let a = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let mut s = ProfileSet::builtin();
        assert!(s.argv("task-dump", &[]).is_err());
        s.insert(CommandProfile::new("task-dump", &["/bin/cat", "--"], 1));
        assert_eq!(
            s.argv("task-dump", &a(&["/etc/hostname"])).unwrap().0,
            ["/bin/cat", "--", "/etc/hostname"]
        );
        // The generic ones stay.
        assert!(s.argv("net-interfaces", &[]).is_ok());
    }

    #[test]
    fn slots_admit_only_their_values_and_read_only_is_always_wrapped() {
        let a = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let mut p = CommandProfile::new("status", &["/usr/bin/systemctl", "is-active", "--"], 1)
            .read_only();
        p.slots = vec![a(&["svc", "svc@-"])];
        let s = ProfileSet::new([p]);
        let (argv, _) = s.argv("status", &a(&["svc@-"])).unwrap();
        assert_eq!(argv[..3], ["/bin/sh", "-c", crate::observe::CLIENT]);
        // The deadline (30 s, the server's grace added), then the command.
        assert_eq!(
            argv[3..],
            [
                "reach-observe",
                "32",
                "/usr/bin/systemctl",
                "is-active",
                "--",
                "svc@-"
            ]
        );
        for bad in [a(&["other"]), a(&[])] {
            let e = s.argv("status", &bad).unwrap_err();
            assert_eq!(e.code(), "broker/profile-refused", "{bad:?}");
        }
        // Unconfined profiles run bare.
        let (argv, _) = ProfileSet::builtin().argv("date-epoch", &[]).unwrap();
        assert_eq!(argv, ["/bin/date", "+%s"]);
    }
}
