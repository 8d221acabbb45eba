//! What the fixture answers to one passage: a pure function of the system and the user
//! message, the pack's answers and the active variant.

use std::collections::BTreeSet;

use reach_taskpack::source::{
    EvidenceKind, FixtureAnswers, PromptDocument, ReviewerRule, Role, Sources,
};
use regex::Regex;
use serde::Serialize;
use serde_json::Value;

use crate::Refusal;
use crate::fence::{self, Fence};

const VERIFIER_RESULT_FORMAT: &str = "reach.room.verifier-result.v1";
const OBSERVATIONS_FORMAT: &str = "reach.room.observations.v1";
const EXECUTION_RECORD_FORMAT: &str = "reach.room.execution-record.v1";
const REVISION_REQUEST_FORMAT: &str = "reach.room.revision-request.v1";
const REVIEW_FORMAT: &str = "reach.plan.review.v1";
const CANDIDATE_FORMAT: &str = "reach.plan.candidate.v1";

/// The note of an `unrelated-file` finding (the answers give none: it is the fixture's own).
pub const UNRELATED_FILE_NOTE: &str =
    "Patches a file outside those the goal concerns: the change is not needed for the goal.";

/// Why a fixture could not be made from a pack's sources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// The variant is not one of the answers' variants.
    UnknownVariant(String),
    /// The flow names a prompt document the pack does not hold.
    PromptMissing(String),
    /// A reviewer rule's regex does not compile (the pack's build refuses this already).
    BadRegex(String),
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnknownVariant(v) => write!(f, "`{v}` is not a variant of fixture/answers.toml"),
            Self::PromptMissing(p) => write!(f, "the prompt document `{p}` is not in the pack"),
            Self::BadRegex(r) => write!(f, "the reviewer regex `{r}` does not compile"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// What a passage was answered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answered {
    pub role: Role,
    /// The Solver's answer id, or `review:approve` / `review:reject` for the Reviewer.
    pub id: String,
    /// The assistant message's content: the candidate bytes verbatim, or the review JSON.
    pub content: String,
}

/// One reviewer rule of the active variant, its regexes compiled.
#[derive(Debug, Clone)]
struct Rule {
    concern: Value,
    target: Option<String>,
    added: Option<Regex>,
    deleted: Option<Regex>,
    except: Vec<Regex>,
    note: String,
}

/// The fixture's knowledge: one pack's answers under one variant, and the two prompt
/// documents whose system messages decide the role.
#[derive(Debug, Clone)]
pub struct Fixture {
    variant: String,
    answers: FixtureAnswers,
    solver: PromptDocument,
    reviewer: PromptDocument,
    /// The kinds the flow's solver turn may be given.
    solver_evidence: BTreeSet<EvidenceKind>,
    rules: Vec<Rule>,
}

impl Fixture {
    /// The fixture of `sources` under `variant` (`""`: the answers' first variant).
    pub fn new(sources: &Sources, variant: &str) -> Result<Self, ConfigError> {
        let answers = sources.answers.clone();
        let variant = if variant.is_empty() {
            answers.variants[0].clone()
        } else if answers.variants.iter().any(|v| v == variant) {
            variant.to_owned()
        } else {
            return Err(ConfigError::UnknownVariant(variant.to_owned()));
        };
        let doc = |role: Role| {
            let path = &sources.flow.turn(role).prompt;
            sources
                .prompts
                .get(path)
                .cloned()
                .ok_or_else(|| ConfigError::PromptMissing(path.clone()))
        };
        let regex = |p: &str| Regex::new(p).map_err(|_| ConfigError::BadRegex(p.to_owned()));
        let rules = answers
            .reviewer
            .rules
            .iter()
            .filter(|r| r.variants.contains(&variant))
            .map(|r: &ReviewerRule| {
                Ok(Rule {
                    concern: serde_json::to_value(r.concern).unwrap_or(Value::Null),
                    target: r.target.clone(),
                    added: r.added_line.as_deref().map(regex).transpose()?,
                    deleted: r.deleted_line.as_deref().map(regex).transpose()?,
                    except: r
                        .except
                        .iter()
                        .map(|p| regex(p))
                        .collect::<Result<_, _>>()?,
                    note: r.note.clone(),
                })
            })
            .collect::<Result<Vec<_>, ConfigError>>()?;
        Ok(Fixture {
            solver_evidence: sources
                .flow
                .turn(Role::Solver)
                .evidence
                .iter()
                .copied()
                .collect(),
            solver: doc(Role::Solver)?,
            reviewer: doc(Role::Reviewer)?,
            variant,
            answers,
            rules,
        })
    }

    /// The active variant.
    pub fn variant(&self) -> &str {
        &self.variant
    }

    /// The role whose prompt document's system part `system` is, byte for byte.
    pub fn role_of(&self, system: &str) -> Option<Role> {
        if system == self.solver.system {
            Some(Role::Solver)
        } else if system == self.reviewer.system {
            Some(Role::Reviewer)
        } else {
            None
        }
    }

    /// Answers one passage, or refuses it.
    pub fn answer(&self, system: &str, user: &str) -> Result<Answered, Refusal> {
        let role = self.role_of(system).ok_or(Refusal::UnknownPrompt)?;
        let doc = match role {
            Role::Solver => &self.solver,
            Role::Reviewer => &self.reviewer,
        };
        if !follows_template(&doc.user, user) {
            return Err(Refusal::UnknownPrompt);
        }
        let fences = fence::read(user)?;
        let passage = Passage::of(&fences)?;
        match role {
            Role::Solver => self.solve(&passage),
            Role::Reviewer => self.review(&passage),
        }
    }

    fn solve(&self, p: &Passage) -> Result<Answered, Refusal> {
        if p.candidate.is_some() || p.kinds().any(|k| !self.solver_evidence.contains(&k)) {
            return Err(Refusal::EvidenceNotAdmitted);
        }
        let read = p.read_evidence()?;
        let kinds: BTreeSet<EvidenceKind> = p.kinds().collect();
        let entry = self
            .answers
            .solver
            .iter()
            .filter(|s| s.variants.contains(&self.variant))
            .find(|s| {
                let w = &s.when;
                let evidence: BTreeSet<EvidenceKind> = w.evidence.iter().copied().collect();
                let failed_ok = match (&w.verifier_failed, &read.failed) {
                    (None, _) => true,
                    (Some(want), Some(got)) => {
                        want.iter().cloned().collect::<BTreeSet<_>>() == *got
                    }
                    (Some(_), None) => false,
                };
                let lines_ok = w.observed_lines.iter().all(|l| {
                    read.observations.iter().any(|(profile, output)| {
                        *profile == l.profile && lines(output).any(|x| x == l.line)
                    })
                });
                evidence == kinds && failed_ok && lines_ok
            })
            .ok_or(Refusal::NoAnswer)?;
        Ok(Answered {
            role: Role::Solver,
            id: entry.id.clone(),
            content: entry.candidate.clone(),
        })
    }

    fn review(&self, p: &Passage) -> Result<Answered, Refusal> {
        let admitted = &self.answers.reviewer.evidence;
        if p.kinds().any(|k| !admitted.contains(&k)) {
            return Err(Refusal::EvidenceNotAdmitted);
        }
        let candidate = p.candidate.ok_or(Refusal::FenceMissing)?;
        p.read_evidence()?;
        let review = self.read_candidate(candidate)?;
        let id = format!("review:{}", review.verdict);
        let content = serde_json::to_string(&review).map_err(|_| Refusal::CandidateMalformed)?;
        Ok(Answered {
            role: Role::Reviewer,
            id,
            content,
        })
    }

    /// The Reviewer's reading (docs/taskpacks.md, "fixture/answers.toml"): per patch step, an
    /// `unrelated-file` finding for a target outside `targets`, then per edit every rule of
    /// the variant in order; a finding's `quote` is the whole value at `at`.
    pub fn read_candidate(&self, candidate: &str) -> Result<Review, Refusal> {
        let bad = || Refusal::CandidateMalformed;
        // Only what the Room's quarantine admits is a candidate under review: anything else
        // is refused, never read leniently (a finding could not quote it).
        reach_plan::Candidate::parse(candidate.as_bytes()).map_err(|_| bad())?;
        let c: Value = serde_json::from_str(candidate).map_err(|_| bad())?;
        if c["format"] != CANDIDATE_FORMAT {
            return Err(bad());
        }
        let steps = c["steps"].as_array().ok_or_else(bad)?;
        let spec = &self.answers.reviewer;
        let mut findings = Vec::new();
        for (i, step) in steps.iter().enumerate() {
            if step["kind"].as_str().ok_or_else(bad)? != "patch" {
                continue;
            }
            let target = step["target"].as_str().ok_or_else(bad)?;
            if !spec.targets.iter().any(|t| t == target) {
                findings.push(Finding {
                    at: format!("steps[{i}].target"),
                    quote: target.to_owned(),
                    concern: Value::from("unrelated-file"),
                    note: UNRELATED_FILE_NOTE.to_owned(),
                });
            }
            for (j, edit) in step["edits"].as_array().ok_or_else(bad)?.iter().enumerate() {
                let text = |key: &str| edit[key].as_str().ok_or_else(bad);
                let (added, deleted) = match edit["op"].as_str().ok_or_else(bad)? {
                    "replace" => {
                        text("line")?;
                        (Some(text("with")?), None)
                    }
                    "append" => (Some(text("with")?), None),
                    "delete" => (None, Some(text("line")?)),
                    _ => return Err(bad()),
                };
                for rule in &self.rules {
                    if rule.target.as_deref().is_some_and(|t| t != target) {
                        continue;
                    }
                    let hit = match (&rule.added, added, &rule.deleted, deleted) {
                        (Some(re), Some(line), _, _)
                            if re.is_match(line)
                                && !rule.except.iter().any(|e| e.is_match(line)) =>
                        {
                            Some(("with", line))
                        }
                        (_, _, Some(re), Some(line)) if re.is_match(line) => Some(("line", line)),
                        _ => None,
                    };
                    if let Some((key, line)) = hit {
                        findings.push(Finding {
                            at: format!("steps[{i}].edits[{j}].{key}"),
                            quote: line.to_owned(),
                            concern: rule.concern.clone(),
                            note: rule.note.clone(),
                        });
                    }
                }
            }
        }
        let (verdict, summary) = if findings.is_empty() {
            ("approve", &spec.approve_summary)
        } else {
            ("reject", &spec.reject_summary)
        };
        let mut review = Review {
            format: REVIEW_FORMAT,
            verdict,
            findings: Vec::new(),
            summary: summary.clone(),
        };
        // The Room reads at most MAX_REVIEW_BYTES of a review: the first findings that fit
        // stand (the verdict is a rejection either way).
        let mut total = serde_json::to_vec(&review).map_err(|_| bad())?.len();
        for f in findings {
            let more = serde_json::to_vec(&f).map_err(|_| bad())?.len() + 1;
            if total + more > reach_plan::MAX_REVIEW_BYTES {
                break;
            }
            total += more;
            review.findings.push(f);
        }
        Ok(review)
    }
}

/// A review (`reach.plan.review.v1`), its fields in the documented order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Review {
    pub format: &'static str,
    pub verdict: &'static str,
    pub findings: Vec<Finding>,
    pub summary: String,
}

/// One finding of a [`Review`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub at: String,
    pub quote: String,
    pub concern: Value,
    pub note: String,
}

/// The fences of one passage, sorted by what they are.
struct Passage<'a> {
    candidate: Option<&'a str>,
    evidence: Vec<(EvidenceKind, &'a str)>,
}

/// What the Solver reads of the evidence.
struct ReadEvidence {
    /// The verifier result's failed check names (`None`: no verifier result).
    failed: Option<BTreeSet<String>>,
    /// Every observation's profile and output.
    observations: Vec<(String, String)>,
}

impl<'a> Passage<'a> {
    /// Exactly one goal, at most one candidate, each evidence kind at most once.
    fn of(fences: &'a [Fence]) -> Result<Self, Refusal> {
        let mut goals = 0;
        let mut candidate = None;
        let mut evidence: Vec<(EvidenceKind, &str)> = Vec::new();
        for f in fences {
            match f.kind {
                "goal" => goals += 1,
                "candidate" if candidate.is_some() => return Err(Refusal::MalformedFence),
                "candidate" => candidate = Some(f.content.as_str()),
                other => {
                    let kind = evidence_kind(other).ok_or(Refusal::MalformedFence)?;
                    if evidence.iter().any(|(k, _)| *k == kind) {
                        return Err(Refusal::MalformedFence);
                    }
                    evidence.push((kind, f.content.as_str()));
                }
            }
        }
        match goals {
            0 => Err(Refusal::FenceMissing),
            1 => Ok(Passage {
                candidate,
                evidence,
            }),
            _ => Err(Refusal::MalformedFence),
        }
    }

    fn kinds(&self) -> impl Iterator<Item = EvidenceKind> + '_ {
        self.evidence.iter().map(|(k, _)| *k)
    }

    /// Parses every evidence input as the JSON the Room writes for its kind.
    fn read_evidence(&self) -> Result<ReadEvidence, Refusal> {
        let bad = || Refusal::EvidenceMalformed;
        let mut out = ReadEvidence {
            failed: None,
            observations: Vec::new(),
        };
        for (kind, content) in &self.evidence {
            let v: Value = serde_json::from_str(content).map_err(|_| bad())?;
            let format = v.get("format").and_then(Value::as_str).ok_or_else(bad)?;
            match kind {
                EvidenceKind::VerifierResult => {
                    if format != VERIFIER_RESULT_FORMAT || !v["passed"].is_boolean() {
                        return Err(bad());
                    }
                    let mut failed = BTreeSet::new();
                    for c in v["checks"].as_array().ok_or_else(bad)? {
                        let name = c["name"].as_str().ok_or_else(bad)?;
                        if !c["passed"].as_bool().ok_or_else(bad)? {
                            failed.insert(name.to_owned());
                        }
                    }
                    out.failed = Some(failed);
                }
                EvidenceKind::Observations => {
                    if format != OBSERVATIONS_FORMAT {
                        return Err(bad());
                    }
                    for o in v["observations"].as_array().ok_or_else(bad)? {
                        let profile = o["profile"].as_str().ok_or_else(bad)?;
                        let output = o["output"].as_str().ok_or_else(bad)?;
                        out.observations
                            .push((profile.to_owned(), output.to_owned()));
                    }
                }
                EvidenceKind::ExecutionRecord if format != EXECUTION_RECORD_FORMAT => {
                    return Err(bad());
                }
                EvidenceKind::RevisionRequest
                    if format != REVISION_REQUEST_FORMAT
                        || !v["round"].is_u64()
                        || !v["reason"].is_string() =>
                {
                    return Err(bad());
                }
                EvidenceKind::Review if format != REVIEW_FORMAT => return Err(bad()),
                _ => {}
            }
        }
        Ok(out)
    }
}

fn evidence_kind(name: &str) -> Option<EvidenceKind> {
    serde_json::from_value(Value::from(name)).ok()
}

/// The lines of an observation's output as the verifier reads them: split at `\n`, each
/// line's final `\r` dropped, a final empty line dropped.
fn lines(output: &str) -> impl Iterator<Item = &str> {
    let body = output.strip_suffix('\n').unwrap_or(output);
    let none = output.is_empty();
    body.split('\n')
        .filter(move |_| !none)
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
}

/// Whether `user` is the template `template` with each `{{...}}` replaced by some text: the
/// literal parts of the template appear in order, the first as a prefix, the last as a
/// suffix.
fn follows_template(template: &str, user: &str) -> bool {
    let mut literals = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        literals.push(&rest[..open]);
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            break;
        };
        rest = &after[close + 2..];
    }
    let last = rest;
    if literals.is_empty() {
        return user == last;
    }
    let Some(mut at) = user.strip_prefix(literals[0]).map(|r| user.len() - r.len()) else {
        return false;
    };
    for lit in &literals[1..] {
        match user[at..].find(lit) {
            Some(i) => at += i + lit.len(),
            None => return false,
        }
    }
    user.len() >= at + last.len() && user[at..].ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_are_followed_literally() {
        let t = "# Goal\n\n{{goal}}\n\n# Evidence\n\n{{evidence}}\n\nAnswer.\n";
        assert!(follows_template(
            t,
            "# Goal\n\nG\n\n# Evidence\n\n(none)\n\nAnswer.\n"
        ));
        assert!(follows_template(
            t,
            "# Goal\n\n\n\n# Evidence\n\n\n\nAnswer.\n"
        ));
        assert!(!follows_template(
            t,
            "# Goal\n\nG\n\n# Evidence\n\n(none)\n\nAnswer!\n"
        ));
        assert!(!follows_template(
            t,
            "Goal\n\nG\n\n# Evidence\n\n(none)\n\nAnswer.\n"
        ));
        assert!(!follows_template(t, "# Goal\n\nG\n\n(none)\n\nAnswer.\n"));
        assert!(follows_template("plain", "plain"));
        assert!(!follows_template("plain", "plain!"));
    }

    #[test]
    fn output_lines_are_the_verifier_lines() {
        let l: Vec<&str> = lines("a\r\nb\n\nc\n").collect();
        assert_eq!(l, ["a", "b", "", "c"]);
        assert_eq!(lines("").count(), 0);
        assert_eq!(lines("x").collect::<Vec<_>>(), ["x"]);
    }
}
