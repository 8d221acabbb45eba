//! `verifier.toml` (`reach.taskpack.verifier.v1`).

use std::collections::BTreeSet;

use reach_plan::EffectClass;
use serde::{Deserialize, Serialize};

use super::{
    CommandProfiles, SourceError, VERIFIER_FILE, check_format, compile_regex, parse_toml, schema,
};

pub const VERIFIER_FORMAT: &str = "reach.taskpack.verifier.v1";
/// The only result schema a verifier names.
pub const VERIFIER_RESULT_FORMAT: &str = "reach.taskpack.verifier-result.v1";

/// The seven checks of the seed, in its order. A verifier lacking one is
/// `verifier/check-missing`.
pub const CHECKS: [&str; 7] = [
    "service-healthy",
    "local-delivery",
    "listener-scope",
    "relay-refused",
    "control-files-unchanged",
    "network-none",
    "verifier-no-mutation",
];

/// The longest a whole verifier run may be given (seconds).
pub const MAX_VERIFIER_TIMEOUT_S: u32 = 3600;
/// The longest one attempt of a check may be given (seconds), and its default.
pub const MAX_CHECK_TIMEOUT_S: u32 = 300;
pub const DEFAULT_CHECK_TIMEOUT_S: u32 = 30;
/// Bounds on retries (after a timed-out attempt) and on polled attempts.
pub const MAX_RETRIES: u32 = 10;
pub const MAX_ATTEMPTS: u32 = 100;
pub const MAX_INTERVAL_MS: u64 = 60_000;
pub const DEFAULT_INTERVAL_MS: u64 = 500;

/// `verifier.toml`, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verifier {
    pub format: String,
    pub result_schema: String,
    /// The whole run, every check and retry included.
    pub timeout_s: u32,
    /// The default for checks that name none (default 0).
    #[serde(default)]
    pub retries: u32,
    pub checks: Vec<Check>,
}

/// One check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Check {
    /// One of [`CHECKS`].
    pub name: String,
    /// Prose for people; decides nothing.
    pub what: String,
    /// Exactly the profiles its observe entries name.
    pub profiles: Vec<String>,
    #[serde(default = "default_check_timeout")]
    pub timeout_s: u32,
    #[serde(default)]
    pub retries: Option<u32>,
    /// The network the broker must report (`none`).
    #[serde(default)]
    pub broker_network: Option<String>,
    pub observe: Vec<Observe>,
}

/// One observation of a check and what its output must be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observe {
    pub profile: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub exit: i32,
    #[serde(default)]
    pub lines: Vec<String>,
    #[serde(default)]
    pub no_lines: Vec<String>,
    #[serde(default)]
    pub only_lines: Vec<String>,
    #[serde(default)]
    pub capture: Option<Capture>,
    #[serde(default)]
    pub has_capture: Option<String>,
    #[serde(default)]
    pub same_as: Option<Snapshot>,
    #[serde(default)]
    pub ignore: Vec<String>,
    #[serde(default = "default_attempts")]
    pub attempts: u32,
    #[serde(default = "default_interval")]
    pub interval_ms: u64,
}

/// A value captured from an observation's output: group 1 of the first match.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Capture {
    pub name: String,
    pub regex: String,
}

/// The snapshot a `same_as` compares with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Snapshot {
    /// Right after the instance is created from the prepared system (before step 0).
    InstanceStart,
    /// Right before the verifier's first check.
    VerifierStart,
}

fn default_check_timeout() -> u32 {
    DEFAULT_CHECK_TIMEOUT_S
}

fn default_attempts() -> u32 {
    1
}

fn default_interval() -> u64 {
    DEFAULT_INTERVAL_MS
}

impl Check {
    /// Retries after a timed-out attempt: the check's own, or the verifier's default.
    pub fn retries(&self, verifier: &Verifier) -> u32 {
        self.retries.unwrap_or(verifier.retries)
    }
}

impl Verifier {
    /// Parses and checks against the command profiles. The order: the format, each check
    /// (its name, its profiles: existing, then `mode = "observation"`, else
    /// `verifier/mutation-not-admitted`; its observations), then every one of the seven checks
    /// present (`verifier/check-missing` naming the first missing in the seed's order).
    pub fn parse(text: &str, commands: &CommandProfiles) -> Result<Self, SourceError> {
        const F: &str = VERIFIER_FILE;
        let v: Self = parse_toml(F, text)?;
        check_format(F, &v.format, VERIFIER_FORMAT)?;
        if v.result_schema != VERIFIER_RESULT_FORMAT {
            return Err(schema(
                F,
                "result_schema",
                format!("expected `{VERIFIER_RESULT_FORMAT}`"),
            ));
        }
        if !(1..=MAX_VERIFIER_TIMEOUT_S).contains(&v.timeout_s) {
            return Err(schema(
                F,
                "timeout_s",
                format!("expected 1..={MAX_VERIFIER_TIMEOUT_S}"),
            ));
        }
        if v.retries > MAX_RETRIES {
            return Err(schema(F, "retries", format!("at most {MAX_RETRIES}")));
        }
        let mut seen = BTreeSet::new();
        for (i, check) in v.checks.iter().enumerate() {
            check_one(i, check, commands)?;
            if !seen.insert(check.name.as_str()) {
                return Err(schema(
                    F,
                    format!("checks[{i}].name"),
                    format!("`{}` defined twice", check.name),
                ));
            }
        }
        if let Some(missing) = CHECKS.iter().find(|c| !seen.contains(*c)) {
            return Err(SourceError::CheckMissing { check: missing });
        }
        Ok(v)
    }

    /// The check named `name`.
    pub fn check(&self, name: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.name == name)
    }
}

fn check_one(i: usize, check: &Check, commands: &CommandProfiles) -> Result<(), SourceError> {
    const F: &str = VERIFIER_FILE;
    let at = |key: &str| format!("checks[{i}].{key}");
    if !CHECKS.contains(&check.name.as_str()) {
        return Err(schema(
            F,
            at("name"),
            format!(
                "`{}` is not one of the seven checks ({})",
                check.name,
                CHECKS.join(", ")
            ),
        ));
    }
    if !(1..=MAX_CHECK_TIMEOUT_S).contains(&check.timeout_s) {
        return Err(schema(
            F,
            at("timeout_s"),
            format!("expected 1..={MAX_CHECK_TIMEOUT_S}"),
        ));
    }
    if check.retries.is_some_and(|r| r > MAX_RETRIES) {
        return Err(schema(F, at("retries"), format!("at most {MAX_RETRIES}")));
    }
    if let Some(n) = &check.broker_network
        && n != "none"
    {
        return Err(schema(
            F,
            at("broker_network"),
            "the only network a broker may report is `none`",
        ));
    }
    let mut listed = BTreeSet::new();
    for (j, name) in check.profiles.iter().enumerate() {
        let at = format!("checks[{i}].profiles[{j}]");
        let Some(profile) = commands.get(name) else {
            return Err(schema(F, at, format!("no command profile `{name}`")));
        };
        if profile.mode != Some(EffectClass::Observation) {
            let mode = match profile.mode {
                Some(EffectClass::ContainedMutation) => "contained-mutation",
                _ => "none (no enforced mode)",
            };
            return Err(SourceError::MutationNotAdmitted {
                at,
                profile: name.clone(),
                mode: mode.to_owned(),
            });
        }
        if !listed.insert(name.as_str()) {
            return Err(schema(F, at, format!("`{name}` listed twice")));
        }
    }
    if check.observe.is_empty() {
        return Err(schema(F, at("observe"), "a check observes at least once"));
    }
    let mut observed = BTreeSet::new();
    let mut captures = BTreeSet::new();
    for (j, o) in check.observe.iter().enumerate() {
        let at = |key: &str| format!("checks[{i}].observe[{j}].{key}");
        if !listed.contains(o.profile.as_str()) {
            return Err(schema(
                F,
                at("profile"),
                format!("`{}` is not in the check's `profiles`", o.profile),
            ));
        }
        observed.insert(o.profile.as_str());
        let profile = commands.get(&o.profile).expect("listed profiles exist");
        if !profile.admits(&o.args) {
            return Err(schema(
                F,
                at("args"),
                format!("not admitted by the slots of profile `{}`", o.profile),
            ));
        }
        for (key, patterns) in [
            ("lines", &o.lines),
            ("no_lines", &o.no_lines),
            ("only_lines", &o.only_lines),
            ("ignore", &o.ignore),
        ] {
            for (k, p) in patterns.iter().enumerate() {
                compile_regex(F, &format!("checks[{i}].observe[{j}].{key}[{k}]"), p)?;
            }
        }
        if !o.ignore.is_empty() && o.same_as.is_none() {
            return Err(schema(
                F,
                at("ignore"),
                "`ignore` drops lines before `same_as` compares: it needs `same_as`",
            ));
        }
        if let Some(name) = &o.has_capture
            && !captures.contains(name.as_str())
        {
            return Err(schema(
                F,
                at("has_capture"),
                format!("no earlier observation of the check captures `{name}`"),
            ));
        }
        if let Some(c) = &o.capture {
            let re = compile_regex(F, &at("capture.regex"), &c.regex)?;
            if re.captures_len() < 2 {
                return Err(schema(F, at("capture.regex"), "a capture needs group 1"));
            }
            if !super::is_name(&c.name) {
                return Err(schema(F, at("capture.name"), "expected [a-z0-9-]{1,64}"));
            }
            if !captures.insert(c.name.as_str()) {
                return Err(schema(
                    F,
                    at("capture.name"),
                    format!("`{}` captured twice", c.name),
                ));
            }
        }
        if !(1..=MAX_ATTEMPTS).contains(&o.attempts) {
            return Err(schema(
                F,
                at("attempts"),
                format!("expected 1..={MAX_ATTEMPTS}"),
            ));
        }
        if o.interval_ms > MAX_INTERVAL_MS {
            return Err(schema(
                F,
                at("interval_ms"),
                format!("at most {MAX_INTERVAL_MS}"),
            ));
        }
    }
    if let Some(unused) = listed.iter().find(|p| !observed.contains(*p)) {
        return Err(schema(
            F,
            at("profiles"),
            format!("`{unused}` is listed but no observation of the check names it"),
        ));
    }
    Ok(())
}
