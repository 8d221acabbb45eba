//! Allow-listed command profiles: the only commands the broker runs in a guest.
//!
//! A profile is a fixed argv prefix (absolute program path first) plus at most `max_args`
//! caller arguments. Arguments come from a conservative character set and never start with
//! `-`, so a caller cannot turn an argument into an option; the prefix ends option parsing
//! (`--`) where the program supports it. Which profiles a binding may use is the caller's
//! policy; the broker only refuses what is not on its list.

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
}

impl CommandProfile {
    pub fn new(name: &str, prefix: &[&str], max_args: usize) -> Self {
        Self {
            name: name.to_owned(),
            prefix: prefix.iter().map(|s| (*s).to_owned()).collect(),
            max_args,
            timeout: Duration::from_secs(30),
            max_output: 64 * 1024,
        }
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
            CommandProfile::new(SERVICE_RESTART, &["/usr/bin/systemctl", "restart", "--"], 1),
            CommandProfile::new("ip-link", &["/bin/ip", "-o", "link", "show"], 0),
            CommandProfile::new("net-interfaces", &["/bin/ls", "-1", "/sys/class/net"], 0),
            CommandProfile::new("sleep", &["/bin/sleep"], 1),
            // The guest's clock, to confirm a restored instance's time was set.
            CommandProfile::new("date-epoch", &["/bin/date", "+%s"], 0),
        ])
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
        let mut argv = p.prefix.clone();
        argv.extend(args.iter().cloned());
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
}
