//! `fixture/answers.toml` (`reach.taskpack.fixture-answers.v1`): what the deterministic
//! inference fixture answers for the pack.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::{
    CHECKS, CommandProfiles, EvidenceKind, FIXTURE_ANSWERS_FILE, FIXTURE_DIR, PackFiles,
    SourceError, check_format, compile_regex, is_name, parse_toml, schema, text,
};

pub const FIXTURE_ANSWERS_FORMAT: &str = "reach.taskpack.fixture-answers.v1";

/// `fixture/answers.toml`, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixtureAnswers {
    pub format: String,
    /// The fixture's variants; the first is its default.
    pub variants: Vec<String>,
    /// The first entry whose `when` holds answers; none: refuse.
    #[serde(default)]
    pub solver: Vec<SolverAnswer>,
    pub reviewer: ReviewerSpec,
    /// What the Reviewer's reading must yield.
    #[serde(default)]
    pub reviews: Vec<ExpectedReview>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SolverAnswer {
    pub id: String,
    pub variants: Vec<String>,
    pub when: When,
    /// The candidate bytes the fixture answers.
    pub candidate: String,
}

/// What a Solver passage must carry for an answer to apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct When {
    /// The exact set of evidence kinds the passage carries.
    pub evidence: Vec<EvidenceKind>,
    /// The verifier result's failed checks, exactly (absent: not looked at).
    #[serde(default)]
    pub verifier_failed: Option<Vec<String>>,
    /// Lines that must each equal a line of an observation of that profile.
    #[serde(default)]
    pub observed_lines: Vec<ObservedLine>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObservedLine {
    pub profile: String,
    pub line: String,
}

/// How the fixture's Reviewer reads a candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewerSpec {
    /// A patch to any other target is an `unrelated-file` finding.
    pub targets: Vec<String>,
    /// The evidence kinds a Reviewer passage may carry.
    pub evidence: Vec<EvidenceKind>,
    pub approve_summary: String,
    pub reject_summary: String,
    #[serde(default)]
    pub rules: Vec<ReviewerRule>,
}

/// A review finding's concern (closed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Concern {
    RelayGrant,
    Wildcard,
    UnrelatedFile,
    GoalMismatch,
    UnsafeStep,
    Other,
}

/// One rule: exactly one of `added_line` and `deleted_line`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewerRule {
    pub id: String,
    pub variants: Vec<String>,
    pub concern: Concern,
    #[serde(default)]
    pub added_line: Option<String>,
    #[serde(default)]
    pub deleted_line: Option<String>,
    /// The rule applies to this target's edits only (absent: every target's).
    #[serde(default)]
    pub target: Option<String>,
    /// An added line matching one of these is exempt.
    #[serde(default)]
    pub except: Vec<String>,
    pub note: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedReview {
    /// A solver answer's id.
    pub of: String,
    pub variants: Vec<String>,
    /// The review JSON the reading must yield (compared as JSON values).
    pub review: String,
}

impl FixtureAnswers {
    /// Parses `fixture/answers.toml`; the fixture directory holds nothing else.
    pub fn parse(files: &PackFiles, commands: &CommandProfiles) -> Result<Self, SourceError> {
        const F: &str = FIXTURE_ANSWERS_FILE;
        if let Some((other, _)) = files.under(FIXTURE_DIR).find(|(p, _)| *p != F) {
            return Err(schema(
                other,
                "",
                format!("{FIXTURE_DIR}/ holds `{F}` only"),
            ));
        }
        let a: Self = parse_toml(F, text(files, F)?)?;
        check_format(F, &a.format, FIXTURE_ANSWERS_FORMAT)?;
        if a.variants.is_empty() {
            return Err(schema(
                F,
                "variants",
                "at least one variant (the first is the default)",
            ));
        }
        let mut variants = BTreeSet::new();
        for (i, v) in a.variants.iter().enumerate() {
            if !is_name(v) {
                return Err(schema(
                    F,
                    format!("variants[{i}]"),
                    "expected [a-z0-9-]{1,64}",
                ));
            }
            if !variants.insert(v.as_str()) {
                return Err(schema(
                    F,
                    format!("variants[{i}]"),
                    format!("`{v}` listed twice"),
                ));
            }
        }
        let check_variants = |at: String, list: &[String]| {
            if list.is_empty() {
                return Err(schema(F, at, "at least one variant"));
            }
            match list.iter().find(|v| !variants.contains(v.as_str())) {
                Some(v) => Err(schema(F, at, format!("`{v}` is not one of `variants`"))),
                None => Ok(()),
            }
        };
        let mut ids = BTreeSet::new();
        for (i, s) in a.solver.iter().enumerate() {
            if !is_name(&s.id) {
                return Err(schema(
                    F,
                    format!("solver[{i}].id"),
                    "expected [a-z0-9-]{1,64}",
                ));
            }
            if !ids.insert(s.id.as_str()) {
                return Err(schema(
                    F,
                    format!("solver[{i}].id"),
                    format!("`{}` defined twice", s.id),
                ));
            }
            check_variants(format!("solver[{i}].variants"), &s.variants)?;
            unique_kinds(&format!("solver[{i}].when.evidence"), &s.when.evidence)?;
            for (j, c) in s.when.verifier_failed.iter().flatten().enumerate() {
                if !CHECKS.contains(&c.as_str()) {
                    return Err(schema(
                        F,
                        format!("solver[{i}].when.verifier_failed[{j}]"),
                        format!("`{c}` is not one of the seven checks"),
                    ));
                }
            }
            for (j, l) in s.when.observed_lines.iter().enumerate() {
                if commands.get(&l.profile).is_none() {
                    return Err(schema(
                        F,
                        format!("solver[{i}].when.observed_lines[{j}].profile"),
                        format!("no command profile `{}`", l.profile),
                    ));
                }
            }
        }
        let r = &a.reviewer;
        unique_kinds("reviewer.evidence", &r.evidence)?;
        for (i, t) in r.targets.iter().enumerate() {
            if reach_plan::RelativeTarget::new(t.clone()).is_err() {
                return Err(schema(
                    F,
                    format!("reviewer.targets[{i}]"),
                    "not a relative target",
                ));
            }
        }
        let mut rule_ids = BTreeSet::new();
        for (i, rule) in r.rules.iter().enumerate() {
            let at = |key: &str| format!("reviewer.rules[{i}].{key}");
            if !is_name(&rule.id) {
                return Err(schema(F, at("id"), "expected [a-z0-9-]{1,64}"));
            }
            if !rule_ids.insert(rule.id.as_str()) {
                return Err(schema(F, at("id"), format!("`{}` defined twice", rule.id)));
            }
            check_variants(at("variants"), &rule.variants)?;
            if let Some(t) = &rule.target
                && reach_plan::RelativeTarget::new(t.clone()).is_err()
            {
                return Err(schema(F, at("target"), "not a relative target"));
            }
            for (k, p) in rule.except.iter().enumerate() {
                compile_regex(F, &format!("reviewer.rules[{i}].except[{k}]"), p)?;
            }
            match (&rule.added_line, &rule.deleted_line) {
                (Some(p), None) => drop(compile_regex(F, &at("added_line"), p)?),
                (None, Some(p)) => drop(compile_regex(F, &at("deleted_line"), p)?),
                _ => {
                    return Err(schema(
                        F,
                        format!("reviewer.rules[{i}]"),
                        "exactly one of `added_line` and `deleted_line`",
                    ));
                }
            }
        }
        for (i, review) in a.reviews.iter().enumerate() {
            if !ids.contains(review.of.as_str()) {
                return Err(schema(
                    F,
                    format!("reviews[{i}].of"),
                    format!("no solver answer `{}`", review.of),
                ));
            }
            check_variants(format!("reviews[{i}].variants"), &review.variants)?;
            if serde_json::from_str::<serde_json::Value>(&review.review).is_err() {
                return Err(schema(F, format!("reviews[{i}].review"), "not JSON"));
            }
        }
        Ok(a)
    }
}

fn unique_kinds(at: &str, kinds: &[EvidenceKind]) -> Result<(), SourceError> {
    let mut seen = BTreeSet::new();
    match kinds.iter().find(|k| !seen.insert(**k)) {
        Some(k) => Err(schema(
            FIXTURE_ANSWERS_FILE,
            at,
            format!("`{k:?}` listed twice"),
        )),
        None => Ok(()),
    }
}
