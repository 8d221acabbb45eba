//! `command-profiles.toml` (`reach.taskpack.command-profiles.v1`).

use std::collections::{BTreeMap, BTreeSet};

use reach_plan::{ArgSlot, EffectMode};
use serde::{Deserialize, Serialize};

use super::{COMMAND_PROFILES_FILE, SourceError, check_format, is_name, parse_toml, schema};

pub const COMMAND_PROFILES_FORMAT: &str = "reach.taskpack.command-profiles.v1";

/// The format's optional unit-starts witness: an `observation` profile with no arguments that
/// prints one line per start, in the guest's current boot, of the units a restart step may
/// name. Workbench reads it after the verifier's checks; the execution record keeps it as the
/// `verify` step's observation.
pub const STARTS_PROFILE: &str = "service-starts";

/// A profile's run time when it names none, and the most it may name (seconds).
pub const DEFAULT_TIMEOUT_S: u32 = 30;
pub const MAX_TIMEOUT_S: u32 = 300;
/// A profile's bounded output when it names none, and the most it may name (bytes).
pub const DEFAULT_MAX_OUTPUT: u64 = 65_536;
pub const MAX_MAX_OUTPUT: u64 = 1 << 20;
/// Bounds on argv: a command profile is one program with a few fixed arguments.
pub const MAX_ARGV: usize = 64;
pub const MAX_ARG_BYTES: usize = 4096;

/// `command-profiles.toml`, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandProfiles {
    pub format: String,
    pub profiles: Vec<CommandProfileSpec>,
}

/// One command profile as the pack writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandProfileSpec {
    /// `[a-z0-9-]{1,64}`, unique.
    pub name: String,
    /// An absolute program first, then its fixed arguments.
    pub argv: Vec<String>,
    /// The enforced effect mode; absent: a mutation whose enforcement does not exist.
    #[serde(default)]
    pub mode: Option<EffectMode>,
    #[serde(default = "default_timeout")]
    pub timeout_s: u32,
    #[serde(default = "default_max_output")]
    pub max_output: u64,
    /// Positional argument slots.
    #[serde(default)]
    pub args: Vec<Slot>,
    /// The verifier's own: left out of the candidate vocabulary.
    #[serde(default)]
    pub verifier_only: bool,
}

/// One positional argument slot, strict (`reach_plan::ArgSlot` is the compiler's copy).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Slot {
    pub one_of: Vec<String>,
}

fn default_timeout() -> u32 {
    DEFAULT_TIMEOUT_S
}

fn default_max_output() -> u64 {
    DEFAULT_MAX_OUTPUT
}

impl CommandProfileSpec {
    /// The slots in the compiler's type.
    pub fn arg_slots(&self) -> Vec<ArgSlot> {
        self.args
            .iter()
            .map(|s| ArgSlot {
                one_of: s.one_of.clone(),
            })
            .collect()
    }

    /// Whether `args` fill the slots: one per slot, each one of its values.
    pub fn admits(&self, args: &[String]) -> bool {
        args.len() == self.args.len()
            && args
                .iter()
                .zip(&self.args)
                .all(|(a, slot)| slot.one_of.contains(a))
    }

    /// Where a plan says a profile came from.
    pub fn source(&self) -> String {
        format!("{COMMAND_PROFILES_FILE}#{}", self.name)
    }
}

impl CommandProfiles {
    pub fn parse(text: &str) -> Result<Self, SourceError> {
        const F: &str = COMMAND_PROFILES_FILE;
        let c: Self = parse_toml(F, text)?;
        check_format(F, &c.format, COMMAND_PROFILES_FORMAT)?;
        let mut names = BTreeSet::new();
        for (i, p) in c.profiles.iter().enumerate() {
            let at = |key: &str| format!("profiles[{i}].{key}");
            if !is_name(&p.name) {
                return Err(schema(F, at("name"), "expected [a-z0-9-]{1,64}"));
            }
            if !names.insert(p.name.as_str()) {
                return Err(schema(F, at("name"), format!("`{}` defined twice", p.name)));
            }
            match p.argv.first() {
                Some(program) if program.starts_with('/') => {}
                _ => return Err(schema(F, at("argv"), "expected an absolute program first")),
            }
            if p.argv.len() > MAX_ARGV {
                return Err(schema(F, at("argv"), format!("at most {MAX_ARGV} words")));
            }
            if let Some(j) = p
                .argv
                .iter()
                .position(|a| a.len() > MAX_ARG_BYTES || a.contains('\0'))
            {
                return Err(schema(
                    F,
                    format!("profiles[{i}].argv[{j}]"),
                    format!("at most {MAX_ARG_BYTES} bytes, no NUL"),
                ));
            }
            if !(1..=MAX_TIMEOUT_S).contains(&p.timeout_s) {
                return Err(schema(
                    F,
                    at("timeout_s"),
                    format!("expected 1..={MAX_TIMEOUT_S}"),
                ));
            }
            if !(1..=MAX_MAX_OUTPUT).contains(&p.max_output) {
                return Err(schema(
                    F,
                    at("max_output"),
                    format!("expected 1..={MAX_MAX_OUTPUT}"),
                ));
            }
            for (j, slot) in p.args.iter().enumerate() {
                let mut values = BTreeSet::new();
                if slot.one_of.is_empty() {
                    return Err(schema(
                        F,
                        format!("profiles[{i}].args[{j}].one_of"),
                        "a slot admits at least one value",
                    ));
                }
                for (k, v) in slot.one_of.iter().enumerate() {
                    let at = format!("profiles[{i}].args[{j}].one_of[{k}]");
                    if v.is_empty() || v.len() > MAX_ARG_BYTES || v.contains('\0') {
                        return Err(schema(F, at, format!("1..={MAX_ARG_BYTES} bytes, no NUL")));
                    }
                    if !values.insert(v) {
                        return Err(schema(F, at, format!("`{v}` listed twice")));
                    }
                }
            }
        }
        Ok(c)
    }

    /// The profile named `name`.
    /// The broker's command profiles for an instance of this pack: every profile that has
    /// an effect mode, an `observation` one confined read-only
    /// ([`reach_vm::profile::Confinement::ReadOnly`]), its argument slots closed to their
    /// listed values. A profile without a mode is left out: a mutation with no enforcement
    /// never runs (readiness blocks the pack `workbench/effect-mode-missing`).
    pub fn broker_profiles(&self) -> reach_vm::profile::ProfileSet {
        use reach_vm::profile::{CommandProfile, Confinement, ProfileSet};
        ProfileSet::new(self.profiles.iter().filter_map(|p| {
            let confinement = match p.mode? {
                EffectMode::Observation => Confinement::ReadOnly,
                EffectMode::ContainedMutation => Confinement::None,
            };
            let (program, fixed) = p.argv.split_first()?;
            let mut prefix = vec![program.clone()];
            prefix.extend(fixed.iter().cloned());
            Some(CommandProfile {
                name: p.name.clone(),
                prefix,
                max_args: p.args.len(),
                timeout: std::time::Duration::from_secs(u64::from(p.timeout_s)),
                max_output: usize::try_from(p.max_output).unwrap_or(usize::MAX),
                slots: p.args.iter().map(|s| s.one_of.clone()).collect(),
                confinement,
            })
        }))
    }

    pub fn get(&self, name: &str) -> Option<&CommandProfileSpec> {
        self.profiles.iter().find(|p| p.name == name)
    }

    /// Every profile by name.
    pub fn by_name(&self) -> BTreeMap<&str, &CommandProfileSpec> {
        self.profiles.iter().map(|p| (p.name.as_str(), p)).collect()
    }

    /// The profiles without an enforced mode, sorted: readiness blocks the binding
    /// `workbench/effect-mode-missing` while there is one.
    pub fn effect_modes_missing(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .profiles
            .iter()
            .filter(|p| p.mode.is_none())
            .map(|p| p.name.clone())
            .collect();
        v.sort();
        v
    }
}
