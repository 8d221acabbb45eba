//! Readiness: a binding is [`Readiness::Runnable`], or blocked by exactly one decisive
//! [`Blocker`], the first of this fixed order that holds:
//!
//! 1. `package/not-installed`: no version of the pack is installed;
//! 2. `package/not-active`: installed, never activated (or deactivated);
//! 3. `package/revoked`: the operator revoked it;
//! 4. `local-binding/missing`: no binding (`reach bind PACK --workspace DIR --vm-backend qemu`);
//! 5. `local-binding/profile-changed`: the bound profile digest is not the active pack's
//!    (`reach bind accept PACK`, after reading the diff);
//! 6. `package/generation-stale`: the same profile, another generation (`reach bind accept
//!    PACK`);
//! 7. `local-binding/paused`: the operator paused the binding (`reach bind resume PACK`);
//! 8. `environment/prepared-system-missing`: the pack's prepared system does not exist (the
//!    exact command that makes it, from the lookup);
//! 9. `workbench/effect-mode-missing`: a command profile has no enforced mode (naming them);
//! 10. `inference/runtime-unreachable`: the binding's model runtime does not answer;
//! 11. `inference/model-not-served`: it answers, but does not serve the pinned model.
//!
//! The order goes from the pack to the binding to the environment: a blocker is decisive when
//! nothing before it holds, so the operator's next command is always the one that moves the
//! binding forward. Pure: every input is a plain value; nothing is looked up here.

use reach_digest::Sha256Digest;
use serde::{Deserialize, Serialize};

/// The pack's lifecycle state in core's ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PackLifecycle {
    NotInstalled,
    Installed,
    Active,
    Revoked,
}

/// What a binding recorded when it was made or last accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindingView {
    pub bound_generation: u64,
    pub bound_profile_digest: Sha256Digest,
    pub paused: bool,
}

/// Whether the pack's prepared system exists (the vm-broker's `FindPrepared`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum PreparedLookup {
    Found {
        image_digest: Sha256Digest,
        prepared_digest: Sha256Digest,
    },
    /// `command`: the exact command that makes it.
    Missing { command: String },
}

/// The binding's model runtime.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum ModelRuntime {
    /// The flow needs no model (the deterministic fixture answers).
    NotRequired,
    Reachable,
    Unreachable {
        why: String,
    },
    /// It answers, serving `served` and not the pinned `model`.
    OtherModel {
        model: String,
        served: Vec<String>,
    },
}

/// Everything readiness decides from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadinessInputs {
    /// The pack's name, as the operator's commands name it.
    pub pack: String,
    pub pack_state: PackLifecycle,
    pub binding: Option<BindingView>,
    /// The active pack's generation and profile digest.
    pub current_generation: u64,
    pub current_profile_digest: Sha256Digest,
    pub prepared: PreparedLookup,
    /// The pack's profiles without an enforced mode (`Facts::effect_modes_missing`).
    pub effect_modes_missing: Vec<String>,
    pub model: ModelRuntime,
}

/// The one decisive reason a binding is not runnable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocker {
    NotInstalled {
        pack: String,
    },
    NotActive {
        pack: String,
    },
    Revoked {
        pack: String,
    },
    BindingMissing {
        pack: String,
    },
    ProfileChanged {
        pack: String,
        bound: Sha256Digest,
        current: Sha256Digest,
    },
    GenerationStale {
        pack: String,
        bound: u64,
        current: u64,
    },
    Paused {
        pack: String,
    },
    PreparedSystemMissing {
        command: String,
    },
    EffectModeMissing {
        pack: String,
        profiles: Vec<String>,
    },
    RuntimeUnreachable {
        pack: String,
        why: String,
    },
    ModelNotServed {
        pack: String,
        model: String,
        served: Vec<String>,
    },
}

impl Blocker {
    /// The refusal code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotInstalled { .. } => "package/not-installed",
            Self::NotActive { .. } => "package/not-active",
            Self::Revoked { .. } => "package/revoked",
            Self::BindingMissing { .. } => "local-binding/missing",
            Self::ProfileChanged { .. } => "local-binding/profile-changed",
            Self::GenerationStale { .. } => "package/generation-stale",
            Self::Paused { .. } => "local-binding/paused",
            Self::PreparedSystemMissing { .. } => "environment/prepared-system-missing",
            Self::EffectModeMissing { .. } => "workbench/effect-mode-missing",
            Self::RuntimeUnreachable { .. } => "inference/runtime-unreachable",
            Self::ModelNotServed { .. } => "inference/model-not-served",
        }
    }

    /// What blocks, for people.
    pub fn message(&self) -> String {
        match self {
            Self::NotInstalled { pack } => format!("no version of the pack {pack} is installed"),
            Self::NotActive { pack } => format!("the pack {pack} is installed but not active"),
            Self::Revoked { pack } => format!("the pack {pack} is revoked"),
            Self::BindingMissing { pack } => format!("the pack {pack} has no local binding"),
            Self::ProfileChanged {
                pack,
                bound,
                current,
            } => format!(
                "the binding of {pack} was made for the task profile {bound}; the active pack's is {current}: read the diff and accept it"
            ),
            Self::GenerationStale {
                pack,
                bound,
                current,
            } => format!(
                "the binding of {pack} was made at generation {bound}; the pack is at generation {current} (same task profile)"
            ),
            Self::Paused { pack } => format!("the binding of {pack} is paused"),
            Self::PreparedSystemMissing { command } => {
                format!("the pack's prepared system does not exist yet; `{command}` makes it")
            }
            Self::EffectModeMissing { pack, profiles } => format!(
                "the command profiles {} of {pack} have no enforced effect mode: a version of the pack that gives each one is needed",
                profiles.join(", ")
            ),
            Self::RuntimeUnreachable { pack, why } => {
                format!("the model runtime of the binding of {pack} is unreachable: {why}")
            }
            Self::ModelNotServed {
                pack,
                model,
                served,
            } => format!(
                "the model runtime of the binding of {pack} does not serve {model}; it serves: {}",
                if served.is_empty() {
                    "nothing".to_owned()
                } else {
                    served.join(", ")
                }
            ),
        }
    }

    /// The operator's next command.
    pub fn next_command(&self) -> String {
        match self {
            Self::NotInstalled { .. } => "reach pack install FILE".to_owned(),
            Self::NotActive { pack } => format!("reach pack activate {pack}"),
            Self::Revoked { pack } => format!("reach pack activate {pack}"),
            Self::BindingMissing { pack } => {
                format!("reach bind {pack} --workspace DIR --vm-backend qemu")
            }
            Self::ProfileChanged { pack, .. } | Self::GenerationStale { pack, .. } => {
                format!("reach bind accept {pack}")
            }
            Self::Paused { pack } => format!("reach bind resume {pack}"),
            Self::PreparedSystemMissing { command } => command.clone(),
            Self::EffectModeMissing { .. } => "reach pack install FILE".to_owned(),
            Self::RuntimeUnreachable { pack, .. } | Self::ModelNotServed { pack, .. } => {
                format!("reach bind status {pack}")
            }
        }
    }
}

/// Runnable, or the decisive blocker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    Runnable,
    Blocked(Blocker),
}

/// The `--json` form: `{"state": "runnable"}` or
/// `{"state": "blocked", "code": …, "message": …, "next_command": …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum ReadinessReport {
    Runnable,
    Blocked {
        code: String,
        message: String,
        next_command: String,
    },
}

impl Serialize for Readiness {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.report().serialize(s)
    }
}

impl Readiness {
    /// The first blocker of the order in the module docs, or runnable.
    pub fn of(inputs: &ReadinessInputs) -> Self {
        match first_blocker(inputs) {
            Some(b) => Self::Blocked(b),
            None => Self::Runnable,
        }
    }

    pub fn is_runnable(&self) -> bool {
        matches!(self, Self::Runnable)
    }

    pub fn blocker(&self) -> Option<&Blocker> {
        match self {
            Self::Runnable => None,
            Self::Blocked(b) => Some(b),
        }
    }

    /// `runnable`, or the blocker's code.
    pub fn code(&self) -> &'static str {
        self.blocker().map_or("runnable", Blocker::code)
    }

    /// The blocker's message; empty when runnable.
    pub fn reason(&self) -> String {
        self.blocker().map(Blocker::message).unwrap_or_default()
    }

    /// The operator's next command; empty when runnable.
    pub fn next_command(&self) -> String {
        self.blocker()
            .map(Blocker::next_command)
            .unwrap_or_default()
    }

    /// The report `reach bind status --json` prints.
    pub fn report(&self) -> ReadinessReport {
        match self {
            Self::Runnable => ReadinessReport::Runnable,
            Self::Blocked(b) => ReadinessReport::Blocked {
                code: b.code().to_owned(),
                message: b.message(),
                next_command: b.next_command(),
            },
        }
    }
}

fn first_blocker(i: &ReadinessInputs) -> Option<Blocker> {
    let pack = i.pack.clone();
    match i.pack_state {
        PackLifecycle::NotInstalled => return Some(Blocker::NotInstalled { pack }),
        PackLifecycle::Installed => return Some(Blocker::NotActive { pack }),
        PackLifecycle::Revoked => return Some(Blocker::Revoked { pack }),
        PackLifecycle::Active => {}
    }
    let Some(b) = &i.binding else {
        return Some(Blocker::BindingMissing { pack });
    };
    if b.bound_profile_digest != i.current_profile_digest {
        return Some(Blocker::ProfileChanged {
            pack,
            bound: b.bound_profile_digest,
            current: i.current_profile_digest,
        });
    }
    if b.bound_generation != i.current_generation {
        return Some(Blocker::GenerationStale {
            pack,
            bound: b.bound_generation,
            current: i.current_generation,
        });
    }
    if b.paused {
        return Some(Blocker::Paused { pack });
    }
    if let PreparedLookup::Missing { command } = &i.prepared {
        return Some(Blocker::PreparedSystemMissing {
            command: command.clone(),
        });
    }
    if !i.effect_modes_missing.is_empty() {
        return Some(Blocker::EffectModeMissing {
            pack,
            profiles: i.effect_modes_missing.clone(),
        });
    }
    if let ModelRuntime::Unreachable { why } = &i.model {
        return Some(Blocker::RuntimeUnreachable {
            pack,
            why: why.clone(),
        });
    }
    if let ModelRuntime::OtherModel { model, served } = &i.model {
        return Some(Blocker::ModelNotServed {
            pack,
            model: model.clone(),
            served: served.clone(),
        });
    }
    None
}
