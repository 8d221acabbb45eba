//! `reach.taskpack.facts.v1`: everything a pack is, derived from its sources alone.
//!
//! Nothing in the facts is typed by hand: [`Facts::derive`] computes every digest and
//! capability list from the parsed [`Sources`] and the files' bytes. Build signs the facts'
//! canonical bytes ([`Facts::canonical_bytes`]: `serde_json` of the structs, fields in
//! declaration order, maps sorted); install derives them again from the archive's `src/`
//! with this same function and compares byte for byte.

use std::collections::{BTreeMap, BTreeSet};

use reach_digest::Sha256Digest;
use reach_plan::{ArgSlot, EffectClass, HilMode};
use serde::{Deserialize, Serialize};

use crate::source::{FixtureKind, Owner, PackFiles, RefusalCase, Sources};

pub const FACTS_FORMAT: &str = "reach.taskpack.facts.v1";

/// The facts of one pack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Facts {
    /// [`FACTS_FORMAT`].
    pub format: String,
    pub name: String,
    pub version: u64,
    /// As `pack.toml` writes it (RFC 3339 UTC).
    pub expires: String,
    pub expires_unix_s: u64,
    /// Every file of the pack.
    pub files: BTreeMap<String, FileFact>,
    /// sha256 of `task-profile.toml`'s bytes.
    pub profile_digest: Sha256Digest,
    pub thematic_profile: String,
    pub hil_minimum: HilMode,
    pub max_steps: usize,
    pub rollback: String,
    /// Units a restart step may name.
    pub services: BTreeSet<String>,
    pub command_profiles: BTreeMap<String, CommandProfileFact>,
    /// Profiles without an enforced mode (readiness: `workbench/effect-mode-missing`).
    pub effect_modes_missing: Vec<String>,
    /// The patch policy's forbidden substrings.
    pub patch_forbidden: Vec<String>,
    pub patch_targets: BTreeMap<String, PatchTargetFact>,
    /// The verifier's checks, in its order.
    pub verifier_checks: Vec<VerifierCheckFact>,
    /// In the task profile's order; the first is the default.
    pub image_variants: Vec<ImageVariantFact>,
    /// Every refusal fixture, by pack path.
    pub refusal_fixtures: BTreeMap<String, FixtureFact>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileFact {
    pub sha256: Sha256Digest,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandProfileFact {
    pub argv: Vec<String>,
    /// The enforced mode; `null`: none.
    pub mode: Option<EffectClass>,
    pub args: Vec<ArgSlot>,
    pub timeout_s: u32,
    pub max_output: u64,
    pub verifier_only: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchTargetFact {
    pub max_bytes: u64,
    pub uid: u32,
    pub gid: u32,
    /// Octal text, e.g. `0644`.
    pub mode: String,
    pub line_shapes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifierCheckFact {
    pub name: String,
    pub profiles: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageVariantFact {
    pub name: String,
    /// The image spec's pack path and `reach_vm::spec::ImageSpec::digest`.
    pub image: String,
    pub image_spec_digest: Sha256Digest,
    /// The prepared spec's pack path and `reach_vm::prepared::PreparedSpec::digest`.
    pub prepared: String,
    pub prepared_spec_digest: Sha256Digest,
    /// Each patch target's content digest in the prepared system.
    pub baselines: BTreeMap<String, Sha256Digest>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixtureFact {
    pub case: RefusalCase,
    pub kind: FixtureKind,
    pub expect: String,
    pub owner: Option<Owner>,
    pub hil: Option<HilMode>,
}

impl Facts {
    /// Derives the facts of parsed sources. `files` are the very files `sources` were parsed
    /// from.
    pub fn derive(files: &PackFiles, sources: &Sources) -> Self {
        let task_profile = files
            .get(crate::source::TASK_PROFILE_FILE)
            .expect("parsed sources have a task profile");
        let profile = &sources.profile;
        let command_profiles = sources
            .commands
            .profiles
            .iter()
            .map(|p| {
                (
                    p.name.clone(),
                    CommandProfileFact {
                        argv: p.argv.clone(),
                        mode: p.mode,
                        args: p.arg_slots(),
                        timeout_s: p.timeout_s,
                        max_output: p.max_output,
                        verifier_only: p.verifier_only,
                    },
                )
            })
            .collect();
        let patch_targets = sources
            .patch_policy
            .files()
            .map(|f| {
                (
                    f.target.as_str().to_owned(),
                    PatchTargetFact {
                        max_bytes: f.max_bytes,
                        uid: f.uid,
                        gid: f.gid,
                        mode: f.mode_text(),
                        line_shapes: f
                            .line_shapes
                            .iter()
                            .map(|s| s.source().to_owned())
                            .collect(),
                    },
                )
            })
            .collect();
        let image_variants = sources
            .variants
            .iter()
            .map(|v| ImageVariantFact {
                name: v.name.clone(),
                image: v.image_path.clone(),
                image_spec_digest: v.image.digest(),
                prepared: v.prepared_path.clone(),
                prepared_spec_digest: v.prepared.digest(),
                baselines: sources
                    .patch_policy
                    .targets()
                    .map(|t| {
                        let content = &v
                            .baseline(t.as_str())
                            .expect("parsed sources have every baseline")
                            .content;
                        (t.as_str().to_owned(), Sha256Digest::of(content))
                    })
                    .collect(),
            })
            .collect();
        Self {
            format: FACTS_FORMAT.to_owned(),
            name: sources.pack.name.clone(),
            version: sources.pack.version,
            expires: sources.pack.expires.clone(),
            expires_unix_s: sources
                .pack
                .expires_unix_s()
                .expect("parsed sources have a valid expiry"),
            files: Self::files_of(files),
            profile_digest: Sha256Digest::of(task_profile),
            thematic_profile: profile.thematic_profile.clone(),
            hil_minimum: profile.hil_minimum,
            max_steps: profile.max_steps,
            rollback: profile.rollback.clone(),
            services: sources.services(),
            command_profiles,
            effect_modes_missing: sources.commands.effect_modes_missing(),
            patch_forbidden: sources.patch_policy.forbidden().to_vec(),
            patch_targets,
            verifier_checks: sources
                .verifier
                .checks
                .iter()
                .map(|c| VerifierCheckFact {
                    name: c.name.clone(),
                    profiles: c.profiles.clone(),
                })
                .collect(),
            image_variants,
            refusal_fixtures: sources
                .fixtures
                .iter()
                .map(|(path, f)| {
                    (
                        path.clone(),
                        FixtureFact {
                            case: f.case,
                            kind: f.kind,
                            expect: f.expect.clone(),
                            owner: f.owner,
                            hil: f.hil,
                        },
                    )
                })
                .collect(),
        }
    }

    /// The canonical bytes: what `facts.json` holds and the signature covers.
    /// What the facts say of `files`: each one's sha256 and length, by pack path.
    pub fn files_of(files: &PackFiles) -> BTreeMap<String, FileFact> {
        files
            .iter()
            .map(|(p, b)| {
                (
                    p.to_owned(),
                    FileFact {
                        sha256: Sha256Digest::of(b),
                        bytes: b.len() as u64,
                    },
                )
            })
            .collect()
    }

    pub fn canonical_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("facts serialize")
    }

    /// sha256 of the canonical bytes.
    pub fn digest(&self) -> Sha256Digest {
        Sha256Digest::of(self.canonical_bytes())
    }

    /// The variant named `name`.
    pub fn variant(&self, name: &str) -> Option<&ImageVariantFact> {
        self.image_variants.iter().find(|v| v.name == name)
    }
}

/// The first fact (a JSON path, e.g. `command_profiles.show-config.mode`) where two facts
/// texts differ; `None` when they are the same JSON value. A text that is not JSON differs
/// at `$`.
pub fn first_difference(a: &[u8], b: &[u8]) -> Option<String> {
    let (Ok(a), Ok(b)) = (
        serde_json::from_slice::<serde_json::Value>(a),
        serde_json::from_slice::<serde_json::Value>(b),
    ) else {
        return Some("$".to_owned());
    };
    diff(&a, &b, String::new())
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn diff(a: &serde_json::Value, b: &serde_json::Value, path: String) -> Option<String> {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| match (x.get(k), y.get(k)) {
                (Some(u), Some(v)) => diff(u, v, join(&path, k)),
                _ => Some(join(&path, k)),
            })
        }
        (Value::Array(x), Value::Array(y)) => {
            let found = x
                .iter()
                .zip(y)
                .enumerate()
                .find_map(|(i, (u, v))| diff(u, v, format!("{path}[{i}]")));
            found.or_else(|| {
                (x.len() != y.len()).then(|| format!("{path}[{}]", x.len().min(y.len())))
            })
        }
        _ if a == b => None,
        _ => Some(if path.is_empty() {
            "$".to_owned()
        } else {
            path
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::first_difference;

    #[test]
    fn names_the_first_differing_fact() {
        let a = br#"{"a":1,"b":{"c":[1,2],"d":"x"}}"#;
        assert_eq!(first_difference(a, a), None);
        assert_eq!(
            first_difference(a, br#"{"a":1,"b":{"c":[1,3],"d":"y"}}"#).as_deref(),
            Some("b.c[1]")
        );
        assert_eq!(
            first_difference(a, br#"{"a":1,"b":{"c":[1,2,3],"d":"x"}}"#).as_deref(),
            Some("b.c[2]")
        );
        assert_eq!(first_difference(a, br#"{"a":1}"#).as_deref(), Some("b"));
        assert_eq!(first_difference(a, b"not json").as_deref(), Some("$"));
    }
}
