//! `flow.toml` and `prompts/*.md` (`reach.taskpack.flow.v1`).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{FLOW_FILE, PROMPTS_DIR, PackFiles, SourceError, check_format, parse_toml, schema};

pub const FLOW_FORMAT: &str = "reach.taskpack.flow.v1";

/// The marker lines of a prompt document, each exactly once, in this order, the first
/// opening the document.
pub const SYSTEM_MARKER: &str = "<!-- reach:system -->";
pub const USER_MARKER: &str = "<!-- reach:user -->";

/// `flow.toml`, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Flow {
    pub format: String,
    /// Proposal rounds: a Solver turn, a Reviewer turn, a Chair decision.
    pub max_rounds: u32,
    /// Fresh instances the loop may use.
    pub max_experiments: u32,
    /// First passage to the last instance's destruction.
    pub max_wall_s: u64,
    /// One per role: `solver`, then `reviewer`.
    pub turns: Vec<Turn>,
}

/// One participant's turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    pub role: Role,
    /// A file of the pack under `prompts/`.
    pub prompt: String,
    pub answer: Answer,
    pub passages: u32,
    pub max_prompt_tokens: u32,
    pub max_completion_tokens: u32,
    /// Per passage: request sent to answer quarantined.
    pub wall_s: u64,
    pub evidence: Vec<EvidenceKind>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    Solver,
    Reviewer,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Self::Solver => "solver",
            Self::Reviewer => "reviewer",
        }
    }
}

/// What a turn's answer is quarantined against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Answer {
    /// `reach.plan.candidate.v1`.
    Candidate,
    /// `reach.plan.review.v1`.
    Review,
}

/// The closed evidence kinds a passage may be given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EvidenceKind {
    RevisionRequest,
    Review,
    ExecutionRecord,
    VerifierResult,
    Observations,
}

/// A placeholder a prompt document may contain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Placeholder {
    Goal,
    Vocabulary,
    CandidateSchema,
    ReviewSchema,
    Candidate,
    Evidence,
}

impl Placeholder {
    pub const ALL: [Placeholder; 6] = [
        Self::Goal,
        Self::Vocabulary,
        Self::CandidateSchema,
        Self::ReviewSchema,
        Self::Candidate,
        Self::Evidence,
    ];

    /// The name between the braces.
    pub fn name(self) -> &'static str {
        match self {
            Self::Goal => "goal",
            Self::Vocabulary => "vocabulary",
            Self::CandidateSchema => "candidate_schema",
            Self::ReviewSchema => "review_schema",
            Self::Candidate => "candidate",
            Self::Evidence => "evidence",
        }
    }

    /// Whether a prompt of `role` may contain it.
    pub fn admitted_for(self, role: Role) -> bool {
        !matches!(
            (self, role),
            (Self::CandidateSchema, Role::Reviewer)
                | (Self::ReviewSchema, Role::Solver)
                | (Self::Candidate, Role::Solver)
        )
    }
}

/// A prompt document: the system and the user message, with the placeholders they contain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptDocument {
    /// The lines after the system marker, up to the user marker.
    pub system: String,
    /// The lines after the user marker.
    pub user: String,
    pub placeholders: BTreeSet<Placeholder>,
}

impl PromptDocument {
    /// Parses a prompt document: the markers exactly once each, in order, nothing before the
    /// first; every `{{...}}` one of [`Placeholder`] (the role's admission is checked against
    /// the flow by [`parse_prompts`]).
    pub fn parse(file: &str, text: &str) -> Result<Self, SourceError> {
        let mut lines = text.split_inclusive('\n');
        let first = lines.next().unwrap_or("");
        if first.trim_end_matches(['\n', '\r']) != SYSTEM_MARKER {
            return Err(schema(
                file,
                "",
                format!("the first line must be `{SYSTEM_MARKER}`"),
            ));
        }
        let (mut system, mut user) = (String::new(), String::new());
        let mut in_user = false;
        for line in lines {
            match line.trim_end_matches(['\n', '\r']) {
                SYSTEM_MARKER => return Err(schema(file, "", format!("`{SYSTEM_MARKER}` twice"))),
                USER_MARKER if in_user => {
                    return Err(schema(file, "", format!("`{USER_MARKER}` twice")));
                }
                USER_MARKER => in_user = true,
                _ if in_user => user.push_str(line),
                _ => system.push_str(line),
            }
        }
        if !in_user {
            return Err(schema(file, "", format!("no `{USER_MARKER}` line")));
        }
        let mut placeholders = BTreeSet::new();
        for part in [&system, &user] {
            let mut rest = part.as_str();
            while let Some(open) = rest.find("{{") {
                let after = &rest[open + 2..];
                let Some(close) = after.find("}}") else {
                    return Err(schema(file, "", "a `{{` without its `}}`"));
                };
                let name = &after[..close];
                let Some(p) = Placeholder::ALL.into_iter().find(|p| p.name() == name) else {
                    return Err(schema(
                        file,
                        "",
                        format!("unknown placeholder `{{{{{name}}}}}`"),
                    ));
                };
                placeholders.insert(p);
                rest = &after[close + 2..];
            }
        }
        Ok(Self {
            system,
            user,
            placeholders,
        })
    }
}

impl Flow {
    pub fn parse(text: &str, files: &PackFiles) -> Result<Self, SourceError> {
        const F: &str = FLOW_FILE;
        let f: Self = parse_toml(F, text)?;
        check_format(F, &f.format, FLOW_FORMAT)?;
        for (key, value) in [
            ("max_rounds", u64::from(f.max_rounds)),
            ("max_experiments", u64::from(f.max_experiments)),
            ("max_wall_s", f.max_wall_s),
        ] {
            if value == 0 {
                return Err(schema(F, key, "at least 1"));
            }
        }
        let roles: Vec<Role> = f.turns.iter().map(|t| t.role).collect();
        if roles != [Role::Solver, Role::Reviewer] {
            return Err(schema(
                F,
                "turns",
                "one turn per role: `solver`, then `reviewer`",
            ));
        }
        for (i, t) in f.turns.iter().enumerate() {
            let at = |key: &str| format!("turns[{i}].{key}");
            let answer = match t.role {
                Role::Solver => Answer::Candidate,
                Role::Reviewer => Answer::Review,
            };
            if t.answer != answer {
                return Err(schema(
                    F,
                    at("answer"),
                    "a solver answers `candidate`, a reviewer `review`",
                ));
            }
            let under_prompts = t
                .prompt
                .strip_prefix(PROMPTS_DIR)
                .is_some_and(|r| r.starts_with('/'));
            if !under_prompts || files.get(&t.prompt).is_none() {
                return Err(schema(
                    F,
                    at("prompt"),
                    format!(
                        "`{}` is not a file of the pack under {PROMPTS_DIR}/",
                        t.prompt
                    ),
                ));
            }
            for (key, value) in [
                ("passages", u64::from(t.passages)),
                ("max_prompt_tokens", u64::from(t.max_prompt_tokens)),
                ("max_completion_tokens", u64::from(t.max_completion_tokens)),
                ("wall_s", t.wall_s),
            ] {
                if value == 0 {
                    return Err(schema(F, at(key), "at least 1"));
                }
            }
            let mut seen = BTreeSet::new();
            for (j, e) in t.evidence.iter().enumerate() {
                if !seen.insert(e) {
                    return Err(schema(
                        F,
                        format!("turns[{i}].evidence[{j}]"),
                        "listed twice",
                    ));
                }
            }
        }
        Ok(f)
    }

    /// The turn of `role`.
    pub fn turn(&self, role: Role) -> &Turn {
        self.turns
            .iter()
            .find(|t| t.role == role)
            .expect("a parsed flow has one turn per role")
    }
}

/// Parses every file under `prompts/` as a prompt document (each must be `*.md`) and checks
/// each turn's prompt holds only placeholders its role admits.
pub(crate) fn parse_prompts(
    files: &PackFiles,
    flow: &Flow,
) -> Result<BTreeMap<String, PromptDocument>, SourceError> {
    let mut prompts = BTreeMap::new();
    for (path, bytes) in files.under(PROMPTS_DIR) {
        if !path.ends_with(".md") || path[PROMPTS_DIR.len() + 1..].contains('/') {
            return Err(schema(
                path,
                "",
                format!("{PROMPTS_DIR}/ holds prompt documents only (`{PROMPTS_DIR}/<name>.md`)"),
            ));
        }
        let text =
            std::str::from_utf8(bytes).map_err(|e| schema(path, "", format!("not UTF-8: {e}")))?;
        prompts.insert(path.to_owned(), PromptDocument::parse(path, text)?);
    }
    for t in &flow.turns {
        let doc = &prompts[&t.prompt];
        if let Some(p) = doc.placeholders.iter().find(|p| !p.admitted_for(t.role)) {
            return Err(schema(
                &t.prompt,
                "",
                format!(
                    "`{{{{{}}}}}` is not admitted in a {} prompt",
                    p.name(),
                    t.role.name()
                ),
            ));
        }
    }
    Ok(prompts)
}
