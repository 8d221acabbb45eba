//! `refusal-corpus/*.toml` (`reach.taskpack.refusal-fixture.v1`).

use std::collections::BTreeMap;

use reach_plan::{EffectMode, HilMode};
use serde::{Deserialize, Serialize};

use super::{
    CHECKS, CommandProfiles, PackFiles, REFUSAL_CORPUS_DIR, SourceError, check_format, parse_toml,
    schema,
};

pub const REFUSAL_FIXTURE_FORMAT: &str = "reach.taskpack.refusal-fixture.v1";

/// The seed's thirteen refusal cases (traceability keys, not refusal codes), in its order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RefusalCase {
    CandidateShell,
    CandidateAuthority,
    FirstStep,
    PatchPolicy,
    Hil,
    Containment,
    Environment,
    Verifier,
    Interruption,
    ActivePause,
    PackageGeneration,
    ProfileChange,
    RemoteProfile,
}

impl RefusalCase {
    pub const ALL: [RefusalCase; 13] = [
        Self::CandidateShell,
        Self::CandidateAuthority,
        Self::FirstStep,
        Self::PatchPolicy,
        Self::Hil,
        Self::Containment,
        Self::Environment,
        Self::Verifier,
        Self::Interruption,
        Self::ActivePause,
        Self::PackageGeneration,
        Self::ProfileChange,
        Self::RemoteProfile,
    ];

    /// The case id as the seed writes it.
    pub fn id(self) -> &'static str {
        match self {
            Self::CandidateShell => "candidate-shell",
            Self::CandidateAuthority => "candidate-authority",
            Self::FirstStep => "first-step",
            Self::PatchPolicy => "patch-policy",
            Self::Hil => "hil",
            Self::Containment => "containment",
            Self::Environment => "environment",
            Self::Verifier => "verifier",
            Self::Interruption => "interruption",
            Self::ActivePause => "active-pause",
            Self::PackageGeneration => "package-generation",
            Self::ProfileChange => "profile-change",
            Self::RemoteProfile => "remote-profile",
        }
    }
}

/// Whether conformance runs the fixture through the compiler or an owner's test does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FixtureKind {
    Compile,
    Owner,
}

/// The boundary whose own test reaches an owner fixture's `expect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Owner {
    Workbench,
    Ward,
    Core,
}

/// What an owner test does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Event {
    Deny,
    Expire,
    Bind,
    SubstituteImage,
    SubstitutePrepared,
    DropCheck,
    StallProfile,
    MislabelProfile,
    CrashAfterAdmit,
    Pause,
    Reactivate,
    Revoke,
    UpgradeProfile,
    RemoteRequest,
}

/// Whether a fixture is in the local profile's scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    #[default]
    Local,
    Federated,
}

/// Binding choices that differ from the safe defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BindingChoices {
    /// The binding's network (the safe default is `none`).
    #[serde(default)]
    pub network: Option<String>,
}

/// A command profile an owner test substitutes for the pack's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubstituteProfile {
    /// A profile of the pack.
    pub name: String,
    pub argv: Vec<String>,
    #[serde(default)]
    pub mode: Option<EffectMode>,
}

/// One refusal fixture.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefusalFixture {
    pub format: String,
    pub case: RefusalCase,
    pub kind: FixtureKind,
    /// The refusal code the owning boundary reaches (`area/reason`).
    pub expect: String,
    /// Owner fixtures only.
    #[serde(default)]
    pub owner: Option<Owner>,
    /// The binding's HIL mode (required for a compile fixture).
    #[serde(default)]
    pub hil: Option<HilMode>,
    /// The candidate bytes (required for a compile fixture; an owner fixture's must compile).
    #[serde(default)]
    pub candidate: Option<String>,
    #[serde(default)]
    pub event: Option<Event>,
    #[serde(default)]
    pub at_step: Option<usize>,
    #[serde(default)]
    pub binding: Option<BindingChoices>,
    /// One of the seven checks.
    #[serde(default)]
    pub check: Option<String>,
    #[serde(default)]
    pub profile: Option<SubstituteProfile>,
    #[serde(default)]
    pub step_outcome: Option<String>,
    #[serde(default)]
    pub scope: Scope,
}

/// `area/reason`, each `[a-z0-9-]+`.
fn is_code(s: &str) -> bool {
    let part = |p: &str| {
        !p.is_empty()
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    matches!(s.split_once('/'), Some((a, r)) if part(a) && part(r))
}

impl RefusalFixture {
    pub fn parse(file: &str, text: &str, commands: &CommandProfiles) -> Result<Self, SourceError> {
        let f: Self = parse_toml(file, text)?;
        check_format(file, &f.format, REFUSAL_FIXTURE_FORMAT)?;
        if !is_code(&f.expect) {
            return Err(schema(
                file,
                "expect",
                "expected a refusal code `area/reason`",
            ));
        }
        match f.kind {
            FixtureKind::Compile => {
                if f.hil.is_none() {
                    return Err(schema(
                        file,
                        "hil",
                        "a compile fixture names the binding's HIL mode",
                    ));
                }
                if f.candidate.is_none() {
                    return Err(schema(
                        file,
                        "candidate",
                        "a compile fixture carries a candidate",
                    ));
                }
                let owner_only = [
                    ("owner", f.owner.is_some()),
                    ("event", f.event.is_some()),
                    ("at_step", f.at_step.is_some()),
                    ("binding", f.binding.is_some()),
                    ("check", f.check.is_some()),
                    ("profile", f.profile.is_some()),
                    ("step_outcome", f.step_outcome.is_some()),
                    ("scope", f.scope != Scope::Local),
                ];
                if let Some((key, _)) = owner_only.iter().find(|(_, set)| *set) {
                    return Err(schema(file, *key, "only an owner fixture carries it"));
                }
            }
            FixtureKind::Owner => {
                if f.owner.is_none() {
                    return Err(schema(file, "owner", "an owner fixture names its owner"));
                }
                if f.at_step.is_some() && f.candidate.is_none() {
                    return Err(schema(
                        file,
                        "at_step",
                        "a step index needs the candidate it indexes",
                    ));
                }
            }
        }
        if let Some(check) = &f.check
            && !CHECKS.contains(&check.as_str())
        {
            return Err(schema(
                file,
                "check",
                format!("`{check}` is not one of the seven checks"),
            ));
        }
        if let Some(p) = &f.profile {
            if commands.get(&p.name).is_none() {
                return Err(schema(
                    file,
                    "profile.name",
                    format!("no command profile `{}`", p.name),
                ));
            }
            if !p.argv.first().is_some_and(|a| a.starts_with('/')) {
                return Err(schema(
                    file,
                    "profile.argv",
                    "expected an absolute program first",
                ));
            }
        }
        if let Some(s) = &f.step_outcome
            && s.is_empty()
        {
            return Err(schema(file, "step_outcome", "empty"));
        }
        Ok(f)
    }
}

/// Every file under `refusal-corpus/` (each `refusal-corpus/<name>.toml`), parsed; at least
/// one fixture per case.
pub(crate) fn parse_corpus(
    files: &PackFiles,
    commands: &CommandProfiles,
) -> Result<BTreeMap<String, RefusalFixture>, SourceError> {
    let mut fixtures = BTreeMap::new();
    for (path, bytes) in files.under(REFUSAL_CORPUS_DIR) {
        if !path.ends_with(".toml") || path[REFUSAL_CORPUS_DIR.len() + 1..].contains('/') {
            return Err(schema(
                path,
                "",
                format!(
                    "{REFUSAL_CORPUS_DIR}/ holds refusal fixtures only (`{REFUSAL_CORPUS_DIR}/<name>.toml`)"
                ),
            ));
        }
        let text =
            std::str::from_utf8(bytes).map_err(|e| schema(path, "", format!("not UTF-8: {e}")))?;
        fixtures.insert(
            path.to_owned(),
            RefusalFixture::parse(path, text, commands)?,
        );
    }
    if let Some(case) = RefusalCase::ALL
        .into_iter()
        .find(|c| !fixtures.values().any(|f| f.case == *c))
    {
        return Err(schema(
            REFUSAL_CORPUS_DIR,
            "",
            format!(
                "no fixture for the case `{}` (a pack has at least one per seed case)",
                case.id()
            ),
        ));
    }
    Ok(fixtures)
}
