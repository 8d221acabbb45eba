//! `pack.toml` (`reach.taskpack.pack.v1`) and `task-profile.toml`
//! (`reach.taskpack.task-profile.v1`).

use std::collections::BTreeSet;

use reach_plan::{EffectClass, HilMode};
use serde::{Deserialize, Serialize};

use super::{
    COMMAND_PROFILES_FILE, FIXTURE_DIR, FLOW_FILE, PACK_FILE, PATCH_POLICY_FILE, PackFiles,
    REFUSAL_CORPUS_DIR, SourceError, TASK_PROFILE_FILE, VERIFIER_FILE, check_format, is_name,
    parse_toml, schema,
};

pub const PACK_FORMAT: &str = "reach.taskpack.pack.v1";
pub const TASK_PROFILE_FORMAT: &str = "reach.taskpack.task-profile.v1";

/// The most steps a pack may admit in one plan: a plan is read by a reviewer and approved
/// step by step by an operator.
pub const MAX_STEPS: usize = 64;

/// `pack.toml`: the pack's identity and lifetime.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackManifest {
    pub format: String,
    /// `[a-z0-9-]{1,64}`.
    pub name: String,
    /// Strictly increasing per name; at least 1.
    pub version: u64,
    /// RFC 3339 UTC, seconds precision: `2027-12-31T00:00:00Z`.
    pub expires: String,
}

impl PackManifest {
    pub fn parse(text: &str) -> Result<Self, SourceError> {
        let m: Self = parse_toml(PACK_FILE, text)?;
        check_format(PACK_FILE, &m.format, PACK_FORMAT)?;
        if !is_name(&m.name) {
            return Err(schema(PACK_FILE, "name", "expected [a-z0-9-]{1,64}"));
        }
        if m.version == 0 {
            return Err(schema(PACK_FILE, "version", "versions start at 1"));
        }
        m.expires_unix_s()?;
        Ok(m)
    }

    /// `expires` in seconds since the Unix epoch.
    pub fn expires_unix_s(&self) -> Result<u64, SourceError> {
        parse_rfc3339_utc(&self.expires).ok_or_else(|| {
            schema(
                PACK_FILE,
                "expires",
                "expected RFC 3339 UTC with seconds, e.g. `2027-12-31T00:00:00Z`",
            )
        })
    }
}

/// Parses exactly `YYYY-MM-DDTHH:MM:SSZ` (RFC 3339, UTC, no fraction, no offset other than
/// `Z`) into seconds since the Unix epoch. `None` for anything else, an impossible date
/// included.
pub fn parse_rfc3339_utc(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() != 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'Z'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u64> {
        let part = &s[r];
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())
            .flatten()
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days_in_month = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if year < 1970 || day == 0 || day > days_in_month || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm), March-based years.
    let (y, m) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hour * 3600 + minute * 60 + second)
}

/// One image variant's refs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageVariantRef {
    /// `[a-z0-9_-]{1,64}` (e.g. `debian-bookworm-x86_64`), unique in the profile.
    pub name: String,
    /// The `reach.vm.image-spec.v1` file.
    pub image: String,
    /// The `reach.vm.prepared-spec.v1` file.
    pub prepared: String,
}

/// `task-profile.toml`: what the pack is allowed to be. Its bytes' digest is the profile
/// digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskProfile {
    pub format: String,
    /// `corpus-profile:<name>`.
    pub thematic_profile: String,
    /// Exactly `["requester", "solver", "reviewer"]`.
    pub roles: Vec<String>,
    /// `none`: the only value a pack may name.
    pub runtime_network_ceiling: String,
    /// `test`: the only value a pack may name.
    pub impact_class_maximum: String,
    pub hil_minimum: HilMode,
    /// `observation`: the only value a pack may name (the compiler enforces it).
    pub first_step_class: EffectClass,
    /// `recreate-prepared-system`: the only rollback there is.
    pub rollback: String,
    /// Units a restart step may name (unit names, no duplicates).
    pub services: Vec<String>,
    /// At most [`MAX_STEPS`].
    pub max_steps: usize,
    pub flow: String,
    pub command_profiles: String,
    pub patch_policy: String,
    pub verifier: String,
    pub refusal_corpus: String,
    pub fixture: String,
    /// At least one.
    pub image_variants: Vec<ImageVariantRef>,
}

/// The values a profile field may take where the format admits exactly one.
pub const ROLES: [&str; 3] = ["requester", "solver", "reviewer"];
pub const NETWORK_CEILING: &str = "none";
pub const IMPACT_CLASS_MAXIMUM: &str = "test";
pub const ROLLBACK: &str = "recreate-prepared-system";
pub const THEMATIC_PREFIX: &str = "corpus-profile:";

impl TaskProfile {
    pub fn parse(text: &str, files: &PackFiles) -> Result<Self, SourceError> {
        const F: &str = TASK_PROFILE_FILE;
        let p: Self = parse_toml(F, text)?;
        check_format(F, &p.format, TASK_PROFILE_FORMAT)?;
        let one = |path: &str, found: &str, only: &str| {
            if found == only {
                Ok(())
            } else {
                Err(schema(
                    F,
                    path,
                    format!("`{found}`: the only value a pack may name is `{only}`"),
                ))
            }
        };
        match p.thematic_profile.strip_prefix(THEMATIC_PREFIX) {
            Some(rest) if is_name(rest) => {}
            _ => {
                return Err(schema(
                    F,
                    "thematic_profile",
                    format!("expected `{THEMATIC_PREFIX}<[a-z0-9-]{{1,64}}>`"),
                ));
            }
        }
        if p.roles != ROLES {
            return Err(schema(F, "roles", format!("expected exactly {ROLES:?}")));
        }
        one(
            "runtime_network_ceiling",
            &p.runtime_network_ceiling,
            NETWORK_CEILING,
        )?;
        one(
            "impact_class_maximum",
            &p.impact_class_maximum,
            IMPACT_CLASS_MAXIMUM,
        )?;
        if p.first_step_class != EffectClass::Observation {
            return Err(schema(
                F,
                "first_step_class",
                "the only value a pack may name is `observation`",
            ));
        }
        one("rollback", &p.rollback, ROLLBACK)?;
        let mut seen = BTreeSet::new();
        for (i, s) in p.services.iter().enumerate() {
            if !is_unit_name(s) {
                return Err(schema(F, format!("services[{i}]"), "not a unit name"));
            }
            if !seen.insert(s) {
                return Err(schema(
                    F,
                    format!("services[{i}]"),
                    format!("`{s}` listed twice"),
                ));
            }
        }
        if !(1..=MAX_STEPS).contains(&p.max_steps) {
            return Err(schema(F, "max_steps", format!("expected 1..={MAX_STEPS}")));
        }
        for (key, value, fixed) in [
            ("flow", &p.flow, FLOW_FILE),
            (
                "command_profiles",
                &p.command_profiles,
                COMMAND_PROFILES_FILE,
            ),
            ("patch_policy", &p.patch_policy, PATCH_POLICY_FILE),
            ("verifier", &p.verifier, VERIFIER_FILE),
            ("refusal_corpus", &p.refusal_corpus, REFUSAL_CORPUS_DIR),
            ("fixture", &p.fixture, FIXTURE_DIR),
        ] {
            if value != fixed {
                return Err(schema(
                    F,
                    key,
                    format!(
                        "`{value}`: the format's name is `{fixed}` (plans stamp it as a source)"
                    ),
                ));
            }
        }
        if p.image_variants.is_empty() {
            return Err(schema(
                F,
                "image_variants",
                "a pack has at least one image variant",
            ));
        }
        let mut names = BTreeSet::new();
        for (i, v) in p.image_variants.iter().enumerate() {
            if !is_variant_name(&v.name) {
                return Err(schema(
                    F,
                    format!("image_variants[{i}].name"),
                    "expected [a-z0-9_-]{1,64}",
                ));
            }
            if !names.insert(&v.name) {
                return Err(schema(
                    F,
                    format!("image_variants[{i}].name"),
                    format!("`{}` named twice", v.name),
                ));
            }
            for (key, path) in [("image", &v.image), ("prepared", &v.prepared)] {
                if files.get(path).is_none() {
                    return Err(schema(
                        F,
                        format!("image_variants[{i}].{key}"),
                        format!("`{path}` is not a file of the pack"),
                    ));
                }
            }
        }
        Ok(p)
    }
}

/// `[a-z0-9_-]{1,64}`, not starting with `-` or `_`.
fn is_variant_name(s: &str) -> bool {
    is_name(&s.replace('_', "-")) && !s.starts_with('_')
}

/// A systemd unit name as `reach-vm` admits one: the conservative set of package and unit
/// names.
pub(crate) fn is_unit_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && !s.starts_with('-')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '-' | '_' | '@'))
}

#[cfg(test)]
mod tests {
    use super::parse_rfc3339_utc;

    #[test]
    fn rfc3339_utc() {
        assert_eq!(parse_rfc3339_utc("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339_utc("2000-03-01T00:00:00Z"), Some(951_868_800));
        assert_eq!(
            parse_rfc3339_utc("2027-12-31T00:00:00Z"),
            Some(1_830_211_200)
        );
        assert_eq!(
            parse_rfc3339_utc("2024-02-29T23:59:59Z"),
            Some(1_709_251_199)
        );
        for bad in [
            "2023-02-29T00:00:00Z",
            "2027-12-31T00:00:00+00:00",
            "2027-12-31 00:00:00Z",
            "2027-12-31T00:00:00.5Z",
            "2027-13-01T00:00:00Z",
            "2027-12-31T24:00:00Z",
            "+027-12-31T00:00:00Z",
        ] {
            assert_eq!(parse_rfc3339_utc(bad), None, "{bad}");
        }
    }
}
