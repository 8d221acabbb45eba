//! `reach.plan.review.v1`: what a Reviewer's passage answers about one candidate.
//!
//! A review is a verdict, findings and a summary. Each finding points into the candidate
//! under review (`at`, a path such as `steps[1].edits[0].with`) and quotes what is there; a
//! quote that is not the candidate's value at that path byte for byte refuses the review
//! ([`Review::check_quotes`]). The review names no candidate digest: the Room binds it to the
//! candidate it was asked about.
//!
//! [`Review::parse`] is strict: an unknown or duplicate field, a concern outside the closed
//! set, prose over [`MAX_PROSE_CHARS`] characters or a malformed path is refused
//! `review/schema` naming the JSON path. The published schema is [`REVIEW_SCHEMA`].

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::candidate::Candidate;
use crate::refusal::PlanRefusal;

/// The review's format tag.
pub const REVIEW_FORMAT: &str = "reach.plan.review.v1";

/// The JSON Schema (draft 2020-12) of `reach.plan.review.v1`, exactly the [`Review`] type:
/// the text a Reviewer's prompt inlines.
pub const REVIEW_SCHEMA: &str = include_str!("../schema/review.v1.json");

/// The largest review read, in bytes.
pub const MAX_REVIEW_BYTES: usize = 64 * 1024;

/// The longest `note` or `summary`, in characters (Unicode scalar values, as JSON Schema's
/// `maxLength` counts them).
pub const MAX_PROSE_CHARS: usize = 2000;

/// The one admitted value of a review's `format` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReviewFormat {
    #[serde(rename = "reach.plan.review.v1")]
    V1,
}

/// A Reviewer's reading of one candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Review {
    pub format: ReviewFormat,
    pub verdict: Verdict,
    pub findings: Vec<Finding>,
    /// Prose, at most [`MAX_PROSE_CHARS`] characters; inert.
    #[serde(deserialize_with = "prose")]
    pub summary: String,
}

/// Whether the Reviewer would have the candidate executed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Approve,
    Reject,
}

/// One objection, pinned to a value of the candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Finding {
    /// Where in the candidate: `steps[1].edits[0].with`, `steps[0].target`.
    #[serde(deserialize_with = "path")]
    pub at: String,
    /// The candidate's string value at `at`, byte for byte.
    pub quote: String,
    pub concern: Concern,
    /// Prose, at most [`MAX_PROSE_CHARS`] characters; inert.
    #[serde(deserialize_with = "prose")]
    pub note: String,
}

/// What a finding is about (closed).
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

/// Why a review was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReviewRefusal {
    /// review refused at `{path}`: {reason}
    #[error("review refused at `{path}`: {reason}")]
    Schema { path: String, reason: String },
    /// finding {index}: `{at}` names no string of the candidate: {reason}
    #[error("finding {index}: `{at}` names no string of the candidate: {reason}")]
    BadPath {
        index: usize,
        at: String,
        reason: String,
    },
    /// finding {index}: the quote is not the candidate's value at `{at}`
    #[error("finding {index}: the quote is not the candidate's value at `{at}`")]
    QuoteMismatch { index: usize, at: String },
    /// the candidate under review is not a candidate: {0}
    #[error("the candidate under review is not a candidate: {0}")]
    Candidate(PlanRefusal),
}

impl ReviewRefusal {
    /// `review/schema`, `review/bad-path`, `review/quote-mismatch` or
    /// `review/candidate-invalid`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Schema { .. } => "review/schema",
            Self::BadPath { .. } => "review/bad-path",
            Self::QuoteMismatch { .. } => "review/quote-mismatch",
            Self::Candidate(_) => "review/candidate-invalid",
        }
    }
}

fn prose<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let text = String::deserialize(d)?;
    let chars = text.chars().count();
    if chars > MAX_PROSE_CHARS {
        return Err(serde::de::Error::custom(format!(
            "is {chars} characters; at most {MAX_PROSE_CHARS} are admitted"
        )));
    }
    Ok(text)
}

fn path<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let text = String::deserialize(d)?;
    CandidatePath::parse(&text).map_err(serde::de::Error::custom)?;
    Ok(text)
}

impl Review {
    /// Parses review bytes, refusing anything that is not exactly a `reach.plan.review.v1`
    /// with `review/schema` naming the offending value's JSON path.
    pub fn parse(bytes: &[u8]) -> Result<Self, ReviewRefusal> {
        let schema = |path: &str, reason: String| ReviewRefusal::Schema {
            path: if path.is_empty() || path == "." {
                "$".to_owned()
            } else {
                path.to_owned()
            },
            reason,
        };
        if bytes.len() > MAX_REVIEW_BYTES {
            return Err(schema(
                "$",
                format!(
                    "the review is {} bytes; at most {MAX_REVIEW_BYTES} are read",
                    bytes.len()
                ),
            ));
        }
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let review: Review = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let path = e.path().to_string();
            schema(&path, e.into_inner().to_string())
        })?;
        de.end()
            .map_err(|e| schema("$", format!("not one JSON value: {e}")))?;
        Ok(review)
    }

    /// Checks every finding's quote against `candidate` (the exact bytes under review): the
    /// candidate's value at `at` must be a string equal to `quote`, byte for byte.
    pub fn check_quotes(&self, candidate: &[u8]) -> Result<(), ReviewRefusal> {
        Candidate::parse(candidate).map_err(ReviewRefusal::Candidate)?;
        let value: Value = serde_json::from_slice(candidate).map_err(|e| {
            ReviewRefusal::Candidate(PlanRefusal::Schema {
                path: "$".to_owned(),
                reason: e.to_string(),
            })
        })?;
        for (index, f) in self.findings.iter().enumerate() {
            let bad = |reason: String| ReviewRefusal::BadPath {
                index,
                at: f.at.clone(),
                reason,
            };
            let path = CandidatePath::parse(&f.at).map_err(bad)?;
            let found = path.resolve(&value).map_err(bad)?;
            let Value::String(text) = found else {
                return Err(bad("the value there is not a string".to_owned()));
            };
            if text.as_bytes() != f.quote.as_bytes() {
                return Err(ReviewRefusal::QuoteMismatch {
                    index,
                    at: f.at.clone(),
                });
            }
        }
        Ok(())
    }
}

/// A path into a candidate's JSON: identifier keys joined by `.`, each followed by any number
/// of `[index]` (decimal, no leading zero), e.g. `steps[1].edits[0].with`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CandidatePath(Vec<PathSeg>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum PathSeg {
    Key(String),
    Index(usize),
}

impl CandidatePath {
    /// Parses the path syntax; the reason names what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut segs = Vec::new();
        for (n, part) in text.split('.').enumerate() {
            let key_end = part.find('[').unwrap_or(part.len());
            let key = &part[..key_end];
            let mut chars = key.chars();
            let identifier = chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !identifier {
                return Err(format!(
                    "component {n} of the path must start with a key (letters, digits, `_`)"
                ));
            }
            segs.push(PathSeg::Key(key.to_owned()));
            let mut rest = &part[key_end..];
            while !rest.is_empty() {
                let Some(close) = rest.find(']').filter(|_| rest.starts_with('[')) else {
                    return Err("an index must be written `[n]`".to_owned());
                };
                let digits = &rest[1..close];
                let canonical = !digits.is_empty()
                    && digits.bytes().all(|b| b.is_ascii_digit())
                    && (digits == "0" || !digits.starts_with('0'));
                let index = digits
                    .parse::<usize>()
                    .ok()
                    .filter(|_| canonical)
                    .ok_or_else(|| {
                        "an index is a decimal number without a leading zero".to_owned()
                    })?;
                segs.push(PathSeg::Index(index));
                rest = &rest[close + 1..];
            }
        }
        Ok(Self(segs))
    }

    /// The value at this path in `value`.
    pub fn resolve<'v>(&self, value: &'v Value) -> Result<&'v Value, String> {
        let mut at = value;
        for seg in &self.0 {
            at = match (seg, at) {
                (PathSeg::Key(k), Value::Object(map)) => map
                    .get(k)
                    .ok_or_else(|| format!("there is no field `{k}`"))?,
                (PathSeg::Index(i), Value::Array(items)) => items
                    .get(*i)
                    .ok_or_else(|| format!("there is no item {i} (there are {})", items.len()))?,
                (PathSeg::Key(k), _) => {
                    return Err(format!("`{k}` is looked up in something not an object"));
                }
                (PathSeg::Index(i), _) => {
                    return Err(format!("item {i} is looked up in something not an array"));
                }
            };
        }
        Ok(at)
    }
}

impl fmt::Display for CandidatePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, seg) in self.0.iter().enumerate() {
            match seg {
                PathSeg::Key(k) if n == 0 => f.write_str(k)?,
                PathSeg::Key(k) => write!(f, ".{k}")?,
                PathSeg::Index(i) => write!(f, "[{i}]")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_round_trip_and_refuse_malformed_ones() {
        for ok in [
            "steps[1].edits[0].with",
            "steps[0].target",
            "diagnosis",
            "a[10][2].b_c",
        ] {
            assert_eq!(CandidatePath::parse(ok).unwrap().to_string(), ok);
        }
        for bad in [
            "",
            ".steps",
            "steps.",
            "steps[]",
            "steps[01]",
            "steps[-1]",
            "steps[1",
            "steps]1[",
            "[0]",
            "steps[0]x",
            "1steps",
            "steps..with",
            "steps[0] .with",
        ] {
            assert!(CandidatePath::parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    use serde_json::json;

    fn validator() -> jsonschema::Validator {
        let schema: Value = serde_json::from_str(REVIEW_SCHEMA).expect("the schema is JSON");
        assert!(jsonschema::meta::is_valid(&schema), "a valid JSON Schema");
        jsonschema::draft202012::new(&schema).expect("the schema compiles")
    }

    /// Whether the schema and the parser accept `review`; panics when they disagree.
    fn verdict(v: &jsonschema::Validator, review: &Value) -> Result<Review, String> {
        let bytes = serde_json::to_vec(review).unwrap();
        let parsed = Review::parse(&bytes);
        assert_eq!(
            v.is_valid(review),
            parsed.is_ok(),
            "schema and parser disagree on {review}: {parsed:?}"
        );
        parsed.map_err(|e| format!("{}: {e}", e.code()))
    }

    fn finding(at: &str, concern: &str, note: Value) -> Value {
        json!({"at": at, "quote": "q", "concern": concern, "note": note})
    }

    fn with(findings: Value, summary: Value) -> Value {
        json!({"format": REVIEW_FORMAT, "verdict": "reject", "findings": findings, "summary": summary})
    }

    #[test]
    fn the_schema_agrees_with_the_parser() {
        let v = validator();
        let long = "\u{e9}".repeat(MAX_PROSE_CHARS);
        let longer = "\u{e9}".repeat(MAX_PROSE_CHARS + 1);
        let mut accepted = vec![
            with(json!([]), json!("s")),
            with(
                json!([finding("steps[1].edits[1].with", "relay-grant", json!("n"))]),
                json!(long),
            ),
            with(
                json!([finding("steps[0].target", "unrelated-file", json!(long))]),
                json!(""),
            ),
            json!({"format": REVIEW_FORMAT, "verdict": "approve", "findings": [], "summary": "s"}),
        ];
        for c in ["wildcard", "goal-mismatch", "unsafe-step", "other"] {
            accepted.push(with(
                json!([finding("diagnosis", c, json!("n"))]),
                json!("s"),
            ));
        }
        for r in &accepted {
            verdict(&v, r).unwrap();
        }
        let refused = [
            ("long summary", with(json!([]), json!(longer))),
            (
                "long note",
                with(
                    json!([finding("diagnosis", "other", json!(longer))]),
                    json!("s"),
                ),
            ),
            (
                "unknown concern",
                with(
                    json!([finding("diagnosis", "open-relay", json!("n"))]),
                    json!("s"),
                ),
            ),
            (
                "bad path",
                with(
                    json!([finding("steps[01]", "other", json!("n"))]),
                    json!("s"),
                ),
            ),
            (
                "dollar path",
                with(json!([finding("$.steps", "other", json!("n"))]), json!("s")),
            ),
            (
                "note null",
                with(
                    json!([finding("diagnosis", "other", json!(null))]),
                    json!("s"),
                ),
            ),
            ("summary number", with(json!([]), json!(1))),
            ("findings object", with(json!({}), json!("s"))),
            (
                "verdict maybe",
                json!({"format": REVIEW_FORMAT, "verdict": "maybe", "findings": [], "summary": "s"}),
            ),
            (
                "other format",
                json!({"format": "reach.plan.review.v0", "verdict": "approve", "findings": [], "summary": "s"}),
            ),
            (
                "no findings",
                json!({"format": REVIEW_FORMAT, "verdict": "approve", "summary": "s"}),
            ),
            (
                "a digest",
                json!({"format": REVIEW_FORMAT, "verdict": "approve", "findings": [], "summary": "s", "candidate_digest": "sha256:00"}),
            ),
            (
                "a finding's severity",
                with(
                    json!([{"at": "diagnosis", "quote": "q", "concern": "other", "note": "n", "severity": 1}]),
                    json!("s"),
                ),
            ),
            (
                "no quote",
                with(
                    json!([{"at": "diagnosis", "concern": "other", "note": "n"}]),
                    json!("s"),
                ),
            ),
            ("an array", json!([])),
        ];
        for (name, r) in &refused {
            let e = verdict(&v, r).expect_err(name);
            assert!(e.starts_with("review/schema: "), "{name}: {e}");
        }
    }

    #[test]
    fn parse_names_paths_and_refuses_duplicates_and_trailing_bytes() {
        let e = Review::parse(br#"{"format":"reach.plan.review.v1","verdict":"reject","findings":[{"at":"x","quote":"q","concern":"nope","note":"n"}],"summary":"s"}"#)
            .unwrap_err();
        assert!(
            matches!(&e, ReviewRefusal::Schema { path, .. } if path == "findings[0].concern"),
            "{e}"
        );
        let e = Review::parse(br#"{"format":"reach.plan.review.v1","verdict":"reject","verdict":"approve","findings":[],"summary":"s"}"#)
            .unwrap_err();
        assert_eq!(e.code(), "review/schema", "{e}");
        let e = Review::parse(br#"{"format":"reach.plan.review.v1","verdict":"approve","findings":[],"summary":"s"} {}"#)
            .unwrap_err();
        assert_eq!(e.code(), "review/schema", "{e}");
        let big = vec![b' '; MAX_REVIEW_BYTES + 1];
        assert_eq!(Review::parse(&big).unwrap_err().code(), "review/schema");
    }

    const CANDIDATE: &str = r#"{"format": "reach.plan.candidate.v1", "diagnosis": "d",
        "steps": [{"kind": "run", "profile": "show-config", "args": []},
                  {"kind": "patch", "target": "etc/app.conf", "edits": [
                      {"op": "replace", "line": "accept = localhost", "with": "accept = *"}]},
                  {"kind": "verify"}]}"#;

    fn one(at: &str, quote: &str) -> Review {
        Review {
            format: ReviewFormat::V1,
            verdict: Verdict::Reject,
            findings: vec![Finding {
                at: at.to_owned(),
                quote: quote.to_owned(),
                concern: Concern::Wildcard,
                note: "n".to_owned(),
            }],
            summary: "s".to_owned(),
        }
    }

    #[test]
    fn quotes_are_checked_byte_for_byte() {
        let c = CANDIDATE.as_bytes();
        one("steps[1].edits[0].with", "accept = *")
            .check_quotes(c)
            .unwrap();
        one("steps[1].target", "etc/app.conf")
            .check_quotes(c)
            .unwrap();
        let code = |r: Review| r.check_quotes(c).unwrap_err().code();
        assert_eq!(
            code(one("steps[1].edits[0].with", "accept = * ")),
            "review/quote-mismatch"
        );
        assert_eq!(
            code(one("steps[1].edits[0].line", "accept = *")),
            "review/quote-mismatch"
        );
        assert_eq!(
            code(one("steps[1].edits[1].with", "accept = *")),
            "review/bad-path"
        );
        assert_eq!(code(one("steps[1].edits", "accept = *")), "review/bad-path");
        assert_eq!(code(one("steps[1].nothing", "x")), "review/bad-path");
        assert_eq!(code(one("steps.with", "x")), "review/bad-path");
        assert_eq!(code(one("steps[0x]", "x")), "review/bad-path");
        assert_eq!(
            one("diagnosis", "d")
                .check_quotes(b"{}")
                .unwrap_err()
                .code(),
            "review/candidate-invalid"
        );
    }

    /// Every `[[reviews]]` review of every pack's fixture answers (and of the made-up test
    /// pack) parses; the packs are found, never named.
    #[test]
    fn every_fixture_review_parses() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(root.join("packs"))
            .map(|d| {
                d.map(|e| e.unwrap().path().join("fixture/answers.toml"))
                    .collect()
            })
            .unwrap_or_default();
        files.push(root.join("crates/taskpack/tests/data/app-local/fixture/answers.toml"));
        files.retain(|f| f.is_file());
        files.sort();
        let v = validator();
        let mut n = 0;
        for file in &files {
            let answers: toml::Table =
                toml::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
            for r in answers
                .get("reviews")
                .and_then(|r| r.as_array())
                .into_iter()
                .flatten()
            {
                let text = r["review"].as_str().unwrap();
                let value: Value = serde_json::from_str(text).unwrap();
                verdict(&v, &value).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
                Review::parse(text.as_bytes()).unwrap();
                n += 1;
            }
        }
        assert!(n >= 1, "no fixture review found");
    }
}
