//! A pack's sources, read strictly: every file of `docs/taskpacks.md`'s table parsed into
//! its type, every cross-reference checked.
//!
//! [`Sources::parse`] works on a [`PackFiles`] (the files in memory), so `reach pack build`
//! (files from a directory) and conformance at install (files from an archive's `src/`) run the
//! same code. An unknown key anywhere is [`SourceError::Schema`] naming the file and the key's
//! path (`command-profiles.toml: profiles[2].shell: unknown key`).

use std::collections::{BTreeMap, BTreeSet};

use reach_plan::PatchPolicy;
use reach_vm::prepared::PreparedSpec;
use reach_vm::spec::ImageSpec;
use serde::de::DeserializeOwned;

mod answers;
mod commands;
mod corpus;
mod files;
mod flow;
mod profile;
mod verifier;

pub use answers::{
    Concern, ExpectedReview, FIXTURE_ANSWERS_FORMAT, FixtureAnswers, ObservedLine, ReviewerRule,
    ReviewerSpec, SolverAnswer, When,
};
pub use commands::{
    COMMAND_PROFILES_FORMAT, CommandProfileSpec, CommandProfiles, DEFAULT_MAX_OUTPUT,
    DEFAULT_TIMEOUT_S, MAX_MAX_OUTPUT, MAX_TIMEOUT_S, STARTS_PROFILE, Slot,
};
pub use corpus::{
    BindingChoices, Event, FixtureKind, Owner, REFUSAL_FIXTURE_FORMAT, RefusalCase, RefusalFixture,
    Scope, SubstituteProfile,
};
pub use files::{
    FilesError, MAX_FILE_BYTES, MAX_FILES, MAX_PATH_BYTES, MAX_TOTAL_BYTES, PackFiles,
    ReadDirError, check_path,
};
pub use flow::{
    Answer, EvidenceKind, FLOW_FORMAT, Flow, Placeholder, PromptDocument, Role, SYSTEM_MARKER,
    Turn, USER_MARKER,
};
pub use profile::{
    ImageVariantRef, PACK_FORMAT, PackManifest, TASK_PROFILE_FORMAT, TaskProfile, parse_rfc3339_utc,
};
pub use verifier::{
    CHECKS, Capture, Check, Observe, Snapshot, VERIFIER_FORMAT, VERIFIER_RESULT_FORMAT, Verifier,
};

/// The fixed file names of a pack (`docs/taskpacks.md`, "A pack directory"). The task
/// profile's refs must name exactly these: the plan compiler stamps them as sources.
pub const PACK_FILE: &str = "pack.toml";
pub const TASK_PROFILE_FILE: &str = "task-profile.toml";
pub const FLOW_FILE: &str = "flow.toml";
pub const COMMAND_PROFILES_FILE: &str = "command-profiles.toml";
pub const PATCH_POLICY_FILE: &str = reach_plan::compile::PATCH_POLICY_SOURCE;
pub const VERIFIER_FILE: &str = reach_plan::compile::VERIFIER_SOURCE;
pub const REFUSAL_CORPUS_DIR: &str = "refusal-corpus";
pub const FIXTURE_DIR: &str = "fixture";
pub const FIXTURE_ANSWERS_FILE: &str = "fixture/answers.toml";
pub const PROMPTS_DIR: &str = "prompts";
pub const README_FILE: &str = "README.md";

/// Why a pack's sources were refused. Each message names the file and where in it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// `{file}: {path}: {reason}`: a file is missing, malformed, or holds an unknown key or a
    /// value outside its format
    #[error("{}", schema_text(file, path, reason))]
    Schema {
        /// The pack file (or directory) concerned, relative to the pack.
        file: String,
        /// Where in it (`profiles[2].shell`); empty for the whole file.
        path: String,
        reason: String,
    },
    /// the verifier lacks one of the seven checks
    #[error("verifier.toml: the check `{check}` is missing (a verifier has all seven: {})", CHECKS.join(", "))]
    CheckMissing { check: &'static str },
    /// a profile the verifier names is not an observation
    #[error("verifier.toml: {at}: the profile `{profile}` has mode {mode}, not observation")]
    MutationNotAdmitted {
        at: String,
        profile: String,
        mode: String,
    },
}

fn schema_text(file: &str, path: &str, reason: &str) -> String {
    if path.is_empty() {
        format!("{file}: {reason}")
    } else {
        format!("{file}: {path}: {reason}")
    }
}

impl SourceError {
    /// `package/schema`, `verifier/check-missing` or `verifier/mutation-not-admitted`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Schema { .. } => "package/schema",
            Self::CheckMissing { .. } => "verifier/check-missing",
            Self::MutationNotAdmitted { .. } => "verifier/mutation-not-admitted",
        }
    }
}

pub(crate) fn schema(
    file: impl Into<String>,
    path: impl Into<String>,
    reason: impl Into<String>,
) -> SourceError {
    SourceError::Schema {
        file: file.into(),
        path: path.into(),
        reason: reason.into(),
    }
}

/// The file's text: it must exist and be UTF-8.
pub(crate) fn text<'a>(files: &'a PackFiles, file: &str) -> Result<&'a str, SourceError> {
    let bytes = files
        .get(file)
        .ok_or_else(|| schema(file, "", "missing (a pack has this file)"))?;
    std::str::from_utf8(bytes).map_err(|e| schema(file, "", format!("not UTF-8: {e}")))
}

/// Strict TOML: an unknown key is refused naming its path, a type error naming the value's.
pub(crate) fn parse_toml<T: DeserializeOwned>(file: &str, text: &str) -> Result<T, SourceError> {
    let de = toml::Deserializer::parse(text)
        .map_err(|e| schema(file, "", format!("not TOML: {}", e.message())))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().message().to_owned();
        // serde says "unknown field `x`, expected one of ..."; the path already names `x`.
        let reason = if message.starts_with("unknown field") {
            "unknown key".to_owned()
        } else {
            message
        };
        schema(file, if path == "." { String::new() } else { path }, reason)
    })
}

/// Refuses a `format` other than `expected`.
pub(crate) fn check_format(file: &str, found: &str, expected: &str) -> Result<(), SourceError> {
    if found == expected {
        Ok(())
    } else {
        Err(schema(
            file,
            "format",
            format!("expected `{expected}`, found `{found}`"),
        ))
    }
}

/// `[a-z0-9-]{1,64}`, not starting with `-`: pack, profile, variant and check names.
pub(crate) fn is_name(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && !s.starts_with('-')
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Compiles a regex of a pack file (`regex` crate syntax), naming where it is on refusal.
pub(crate) fn compile_regex(
    file: &str,
    path: &str,
    pattern: &str,
) -> Result<regex::Regex, SourceError> {
    regex::Regex::new(pattern).map_err(|e| schema(file, path, format!("not a regex: {e}")))
}

/// One image variant, parsed by `reach-vm`'s own parsers.
#[derive(Debug, Clone)]
pub struct ImageVariant {
    pub name: String,
    /// The image spec's pack path and its parsed form.
    pub image_path: String,
    pub image: ImageSpec,
    pub prepared_path: String,
    pub prepared: PreparedSpec,
}

impl ImageVariant {
    /// The content of `target` (relative to the prepared system's root) in the prepared
    /// system: the last `files` entry whose path is `/` + target, the prepared spec's placed
    /// after the image's. `None`: the prepared system has no such file of the pack's making.
    pub fn baseline(&self, target: &str) -> Option<&reach_vm::spec::FileSpec> {
        let path = format!("/{target}");
        self.prepared
            .files
            .iter()
            .rev()
            .find(|f| f.path == path)
            .or_else(|| self.image.files.iter().rev().find(|f| f.path == path))
    }
}

/// Every source of a pack, parsed and cross-checked.
#[derive(Debug, Clone)]
pub struct Sources {
    pub pack: PackManifest,
    pub profile: TaskProfile,
    pub flow: Flow,
    /// Every `prompts/*.md`, by pack path.
    pub prompts: BTreeMap<String, PromptDocument>,
    pub commands: CommandProfiles,
    pub patch_policy: PatchPolicy,
    pub verifier: Verifier,
    /// Every `refusal-corpus/*.toml`, by pack path.
    pub fixtures: BTreeMap<String, RefusalFixture>,
    pub answers: FixtureAnswers,
    pub variants: Vec<ImageVariant>,
}

impl Sources {
    /// Parses and cross-checks every source. The order of the checks, and so which refusal
    /// a pack with several faults gets: `pack.toml`, `task-profile.toml`,
    /// `command-profiles.toml`, `patch-policy.toml`, the image variants (and every patch
    /// target's baseline), `verifier.toml`, `flow.toml` and `prompts/`, `refusal-corpus/`,
    /// `fixture/`, `README.md`.
    pub fn parse(files: &PackFiles) -> Result<Self, SourceError> {
        let pack = PackManifest::parse(text(files, PACK_FILE)?)?;
        let profile = TaskProfile::parse(text(files, TASK_PROFILE_FILE)?, files)?;
        let commands = CommandProfiles::parse(text(files, COMMAND_PROFILES_FILE)?)?;
        let patch_policy =
            PatchPolicy::parse(text(files, PATCH_POLICY_FILE)?).map_err(|e| match e {
                reach_plan::PolicyError::Syntax(reason) => schema(PATCH_POLICY_FILE, "", reason),
                reach_plan::PolicyError::Schema { path, reason } => {
                    let reason = if reason.starts_with("unknown field") {
                        "unknown key".to_owned()
                    } else {
                        reason
                    };
                    schema(PATCH_POLICY_FILE, path, reason)
                }
            })?;
        let variants = profile
            .image_variants
            .iter()
            .enumerate()
            .map(|(i, v)| parse_variant(files, i, v, &patch_policy))
            .collect::<Result<Vec<_>, _>>()?;
        let verifier = Verifier::parse(text(files, VERIFIER_FILE)?, &commands)?;
        let flow = Flow::parse(text(files, FLOW_FILE)?, files)?;
        let prompts = flow::parse_prompts(files, &flow)?;
        let fixtures = corpus::parse_corpus(files, &commands)?;
        let answers = FixtureAnswers::parse(files, &commands)?;
        let readme = text(files, README_FILE)?;
        if readme.trim().is_empty() {
            return Err(schema(
                README_FILE,
                "",
                "empty (it says what the pack expects of its environment)",
            ));
        }
        Ok(Self {
            pack,
            profile,
            flow,
            prompts,
            commands,
            patch_policy,
            verifier,
            fixtures,
            answers,
            variants,
        })
    }

    /// The admitted services, sorted.
    pub fn services(&self) -> BTreeSet<String> {
        self.profile.services.iter().cloned().collect()
    }
}

/// Strict deserialization of a `reach-vm` spec first (to name an unknown key's path, which
/// `reach-vm`'s parser does not), then `reach-vm`'s own parser (its validation, and the value
/// whose digest `reach image build/prepare` record).
fn parse_vm_spec<T: DeserializeOwned, U, E: std::fmt::Display>(
    file: &str,
    text: &str,
    parse: impl FnOnce(&str) -> Result<U, E>,
) -> Result<U, SourceError> {
    parse_toml::<T>(file, text)?;
    parse(text).map_err(|e| schema(file, "", e.to_string()))
}

fn parse_variant(
    files: &PackFiles,
    index: usize,
    v: &ImageVariantRef,
    policy: &PatchPolicy,
) -> Result<ImageVariant, SourceError> {
    let image =
        parse_vm_spec::<ImageSpec, _, _>(&v.image, text(files, &v.image)?, ImageSpec::parse)?;
    let prepared = parse_vm_spec::<PreparedSpec, _, _>(
        &v.prepared,
        text(files, &v.prepared)?,
        PreparedSpec::parse,
    )?;
    let variant = ImageVariant {
        name: v.name.clone(),
        image_path: v.image.clone(),
        image,
        prepared_path: v.prepared.clone(),
        prepared,
    };
    for file in policy.files() {
        let target = file.target.as_str();
        // The policy's files come sorted by target, not in file order: name the target.
        let at = format!("files[target = {target:?}]");
        let Some(baseline) = variant.baseline(target) else {
            return Err(schema(
                PATCH_POLICY_FILE,
                at,
                format!(
                    "`{target}` has no baseline in image variant `{}` (image_variants[{index}]): neither {} nor {} places /{target}",
                    v.name, v.image, v.prepared
                ),
            ));
        };
        // The workbench requires the policy's owner and mode of the real file: a baseline
        // placed otherwise would refuse every patch.
        let mode = reach_vm::spec::parse_mode(&baseline.mode);
        if (baseline.uid, baseline.gid, mode) != (file.uid, file.gid, Some(file.mode)) {
            return Err(schema(
                PATCH_POLICY_FILE,
                at,
                format!(
                    "`{target}` is {}:{} mode {} in image variant `{}`, the policy requires {}:{} mode {:04o}",
                    baseline.uid,
                    baseline.gid,
                    baseline.mode,
                    v.name,
                    file.uid,
                    file.gid,
                    file.mode
                ),
            ));
        }
    }
    Ok(variant)
}
