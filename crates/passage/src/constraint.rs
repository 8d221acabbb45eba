//! The answer's shape as a runtime can constrain decoding to it: the very schema the plan
//! crate publishes for the turn's answer (`reach.plan.candidate.v1` or `reach.plan.review.v1`),
//! less the keywords a grammar compiler cannot take.
//!
//! llama.cpp's JSON-schema-to-grammar conversion refuses look-around in a `pattern` (the
//! candidate's `target` pattern has one) and expands `maxLength` into one rule per character
//! (a 2,000-character diagnosis makes a grammar the runtime rejects). So `pattern`,
//! `maxLength` and `minLength` are left out of the constraint; the structure (types, closed
//! objects, enums, consts, required fields, `anyOf` and `$ref`s) stays. The constraint only
//! narrows what a model may emit: the quarantine still reads every answer with the plan's
//! full parsers, so an answer the constraint let through and the schema does not admit is
//! refused there.
//!
//! A passage may also carry a [`Narrowing`]: what its pack and its turn let a model name at
//! all. For a Solver, the activated pack's vocabulary: each candidate profile with its
//! argument values, the services, each patch target with the lines its baseline holds (an
//! edit's `line`) and its line shapes (an added line); for a Reviewer, the candidate under
//! review's string values with their paths (a finding's `at` and `quote`), and the verdict
//! bound to the findings as the schema describes it (approve: none; reject: at least one).
//! [`narrowed`] writes these into the constraint as `const`s, `enum`s, `anyOf`s and patterns,
//! bounds prose at [`PROSE_MAX`] characters, and gives the steps the structure the compiler's
//! checks admit (an observation profile first, the one `verify` last, at most the pack's
//! `max_steps`): a small model then spends its tokens choosing among what the compiler could
//! admit instead of inventing names or repeating a sentence to its token bound. Everything narrowed is still a
//! subset of the published schema; the compiler and the quarantine decide as before.

use reach_plan::vocabulary::{EffectClass, Vocabulary};
use reach_taskpack::source::Answer as AnswerKind;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The keywords left out of a constraint.
pub const LEFT_OUT: [&str; 3] = ["pattern", "maxLength", "minLength"];

/// The published schema of `kind`'s answer.
pub fn published_schema(kind: AnswerKind) -> &'static str {
    match kind {
        AnswerKind::Candidate => reach_plan::CANDIDATE_SCHEMA,
        AnswerKind::Review => reach_plan::review::REVIEW_SCHEMA,
    }
}

/// The name a runtime's `response_format` gives the constraint.
pub fn constraint_name(kind: AnswerKind) -> &'static str {
    match kind {
        AnswerKind::Candidate => "reach_plan_candidate_v1",
        AnswerKind::Review => "reach_plan_review_v1",
    }
}

/// The decoding constraint for `kind`'s answer: [`published_schema`] without [`LEFT_OUT`].
pub fn constraint(kind: AnswerKind) -> Value {
    let schema: Value =
        serde_json::from_str(published_schema(kind)).expect("the plan crate's schema is JSON");
    without_left_out(schema)
}

fn without_left_out(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(k, _)| !LEFT_OUT.contains(&k.as_str()))
                .map(|(k, v)| (k, without_left_out(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(without_left_out).collect()),
        other => other,
    }
}

/// The longest prose (a diagnosis, a finding's note, a summary) a narrowed constraint lets a
/// model write, in characters: room for a real diagnosis (the packs' own run to about 550),
/// not for a sentence repeated to the token bound. The published schema admits 2,000;
/// llama.cpp expands a length bound into one nested rule per character, and at 2,000 the
/// runtime refused the grammar.
pub const PROSE_MAX: u64 = 1000;

/// The pattern a narrowed constraint gives prose: at most [`PROSE_MAX`] characters, none a
/// control character, a `"` or a `\`. llama-cpp-python's grammar lets a JSON string hold raw
/// control characters (its `char` rule is `[^"\\]`), so a model writing a line break in a
/// summary produced text that is not JSON; the pattern's class leaves it no such character,
/// and no escape to get one wrong.
pub fn prose_pattern() -> String {
    format!(r#"^[^"\\\x00-\x1f]{{0,{PROSE_MAX}}}$"#)
}

/// The most findings a narrowed review may hold: a small model otherwise lists one per value.
pub const FINDINGS_MAX: u64 = 4;

/// What a passage's answer may name, beyond the published schema (module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum Narrowing {
    /// A Solver's: the activated pack's vocabulary.
    Candidate {
        max_steps: u64,
        profiles: Vec<NarrowProfile>,
        services: Vec<String>,
        files: Vec<NarrowFile>,
    },
    /// A Reviewer's: the candidate under review's string values.
    Review { leaves: Vec<Leaf> },
}

/// A candidate profile, per positional slot its admitted values, and whether its enforced
/// mode is an observation (one may open a plan).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NarrowProfile {
    pub name: String,
    pub args: Vec<Vec<String>>,
    #[serde(default)]
    pub observation: bool,
}

/// A patch target: the lines of its baseline, and the shapes an added line must have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NarrowFile {
    pub target: String,
    pub lines: Vec<String>,
    pub shapes: Vec<String>,
}

/// One string value of a candidate and its path, as a finding names them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Leaf {
    pub at: String,
    pub quote: String,
}

impl Narrowing {
    /// A Solver's narrowing: `vocabulary`'s candidate profiles, services and patch targets
    /// (each with its distinct baseline lines, in order). A target with no baseline gets no
    /// `line` narrowing: the compiler refuses it anyway.
    pub fn candidate(vocabulary: &Vocabulary) -> Self {
        let profiles = vocabulary
            .commands
            .iter()
            .map(|(name, p)| NarrowProfile {
                name: name.clone(),
                args: p.args.iter().map(|s| s.one_of.clone()).collect(),
                observation: p.mode == Some(EffectClass::Observation),
            })
            .collect();
        let files = vocabulary
            .patch_policy
            .files()
            .map(|f| {
                let mut lines: Vec<String> = Vec::new();
                for l in vocabulary
                    .baselines
                    .get(f.target.as_str())
                    .map(|b| b.lines())
                    .into_iter()
                    .flatten()
                {
                    if !lines.iter().any(|x| x == l) {
                        lines.push(l.to_owned());
                    }
                }
                NarrowFile {
                    target: f.target.as_str().to_owned(),
                    lines,
                    shapes: f
                        .line_shapes
                        .iter()
                        .map(|s| s.source().to_owned())
                        .collect(),
                }
            })
            .collect();
        Narrowing::Candidate {
            max_steps: vocabulary.max_steps as u64,
            profiles,
            services: vocabulary.services.iter().cloned().collect(),
            files,
        }
    }

    /// A Reviewer's narrowing: every string value of `candidate` with its path, or `None`
    /// when the candidate is not a JSON object (the quarantine then refuses any quote).
    pub fn review(candidate: &[u8]) -> Option<Self> {
        let v: Value = serde_json::from_slice(candidate).ok()?;
        if !v.is_object() {
            return None;
        }
        let mut leaves = Vec::new();
        leaves_of(&v, String::new(), &mut leaves);
        Some(Narrowing::Review { leaves })
    }
}

/// Every string value under `v` with its path: keys joined by `.`, indices as `[i]`.
fn leaves_of(v: &Value, at: String, out: &mut Vec<Leaf>) {
    match v {
        Value::String(s) => out.push(Leaf {
            at,
            quote: s.clone(),
        }),
        Value::Object(m) => {
            for (k, x) in m {
                let p = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                leaves_of(x, p, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                leaves_of(x, format!("{at}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// The decoding constraint for `kind`'s answer, narrowed by `narrowing` when it is the
/// answer's own kind; [`constraint`] otherwise.
pub fn narrowed(kind: AnswerKind, narrowing: Option<&Narrowing>) -> Value {
    let mut c = constraint(kind);
    match (kind, narrowing) {
        (
            AnswerKind::Candidate,
            Some(Narrowing::Candidate {
                max_steps,
                profiles,
                services,
                files,
            }),
        ) => {
            c["properties"]["diagnosis"]["maxLength"] = PROSE_MAX.into();
            c["properties"]["diagnosis"]["pattern"] = prose_pattern().into();
            c["properties"]["steps"] = steps_of(*max_steps, profiles);
            let defs = &mut c["$defs"];
            defs["run"] = any_of(profiles.iter().map(run_of));
            defs["observe"] = any_of(profiles.iter().filter(|p| p.observation).map(run_of));
            defs["act"] = json!({"anyOf": [
                {"$ref": "#/$defs/run"},
                {"$ref": "#/$defs/patch"},
                {"$ref": "#/$defs/restart"},
            ]});
            defs["restart"]["properties"]["service"] = json!({ "enum": services });
            defs["patch"] = any_of(files.iter().map(patch_of));
        }
        (AnswerKind::Review, Some(Narrowing::Review { leaves })) => {
            c["$defs"]["prose"]["maxLength"] = PROSE_MAX.into();
            c["$defs"]["prose"]["pattern"] = prose_pattern().into();
            let finding = c["$defs"]["finding"].clone();
            c["$defs"]["finding"] = any_of(leaves.iter().map(|l| {
                let mut f = finding.clone();
                f["properties"]["at"] = json!({ "const": l.at });
                f["properties"]["quote"] = json!({ "const": l.quote });
                f
            }));
            let review = c.clone();
            let with = |verdict: &str, findings: Value| {
                let mut r = review.clone();
                if let Some(m) = r.as_object_mut() {
                    m.remove("$defs");
                    m.remove("$schema");
                    m.remove("$id");
                }
                r["properties"]["verdict"] = json!({ "const": verdict });
                r["properties"]["findings"] = findings;
                r
            };
            let approve = with("approve", json!({ "const": [] }));
            let reject = with(
                "reject",
                json!({
                    "type": "array",
                    "items": {"$ref": "#/$defs/finding"},
                    "minItems": 1,
                    "maxItems": FINDINGS_MAX.min(leaves.len() as u64).max(1),
                }),
            );
            let defs = c["$defs"].clone();
            let mut top = serde_json::Map::new();
            for k in ["$schema", "$id", "title", "description"] {
                if let Some(v) = c.get(k) {
                    top.insert(k.to_owned(), v.clone());
                }
            }
            top.insert("anyOf".to_owned(), json!([approve, reject]));
            top.insert("$defs".to_owned(), defs);
            c = Value::Object(top);
        }
        _ => {}
    }
    c
}

/// A run step of profile `p`: its name a `const`, each argument one of its slot's values.
fn run_of(p: &NarrowProfile) -> Value {
    let mut o = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["kind", "profile"],
        "properties": {
            "kind": {"const": "run"},
            "profile": {"const": p.name},
            "args": {"const": []},
        },
    });
    if !p.args.is_empty() {
        o["required"] = json!(["kind", "profile", "args"]);
        o["properties"]["args"] = json!({
            "type": "array",
            "prefixItems": p.args.iter().map(|one_of| json!({"enum": one_of})).collect::<Vec<_>>(),
        });
    }
    o
}

/// A plan's steps as the compiler's structural checks admit them: one tuple per length up
/// to `max_steps`, an observation profile first, a run, patch or restart between, and the one
/// `verify` last (a lone `verify` is itself an observation). A tuple, not `items` with
/// counts, because llama.cpp's converter turns `prefixItems` into a fixed sequence and a
/// grammar cannot otherwise say "last".
fn steps_of(max_steps: u64, profiles: &[NarrowProfile]) -> Value {
    let verify = json!({"$ref": "#/$defs/verify"});
    let lone = json!([verify]);
    let mut tuples = vec![lone];
    if profiles.iter().any(|p| p.observation) {
        for n in 2..=max_steps.max(1) {
            let mut t = vec![json!({"$ref": "#/$defs/observe"})];
            t.extend((2..n).map(|_| json!({"$ref": "#/$defs/act"})));
            t.push(verify.clone());
            tuples.push(Value::Array(t));
        }
    }
    any_of(tuples.into_iter().map(|t| {
        let n = t.as_array().map_or(0, Vec::len);
        json!({"type": "array", "prefixItems": t, "items": false, "minItems": n, "maxItems": n})
    }))
}

/// `{"anyOf": [...]}`, or a schema nothing satisfies when there is no alternative.
fn any_of(alternatives: impl Iterator<Item = Value>) -> Value {
    let alts: Vec<Value> = alternatives.collect();
    if alts.is_empty() {
        json!({ "enum": [] })
    } else {
        json!({ "anyOf": alts })
    }
}

/// A patch step on `f` only: its target as a `const`, an edit's `line` one of the baseline's
/// lines, an added line one of the shapes a grammar can take (unconstrained text when none
/// can: the compiler still checks every shape).
fn patch_of(f: &NarrowFile) -> Value {
    let shapes: Vec<String> = f.shapes.iter().filter_map(|s| grammar_pattern(s)).collect();
    let added = if shapes.is_empty() || shapes.len() != f.shapes.len() {
        json!({ "type": "string" })
    } else {
        any_of(
            shapes
                .iter()
                .map(|p| json!({ "type": "string", "pattern": p })),
        )
    };
    let old = if f.lines.is_empty() {
        json!({ "type": "string" })
    } else {
        json!({ "enum": f.lines })
    };
    let edits = json!({
        "type": "array",
        "minItems": 1,
        "items": {"anyOf": [
            {
                "type": "object", "additionalProperties": false,
                "required": ["op", "line", "with"],
                "properties": {"op": {"const": "replace"}, "line": old, "with": added},
            },
            {
                "type": "object", "additionalProperties": false,
                "required": ["op", "with"],
                "properties": {"op": {"const": "append"}, "with": added},
            },
            {
                "type": "object", "additionalProperties": false,
                "required": ["op", "line"],
                "properties": {"op": {"const": "delete"}, "line": old},
            },
        ]},
    });
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["kind", "target", "edits"],
        "properties": {"kind": {"const": "patch"}, "target": {"const": f.target}, "edits": edits},
    })
}

/// `shape` as a grammar compiler takes it, or `None`: anchored at both ends, no group
/// modifier (`(?`: look-around, non-capturing, flags), no back-reference or class escape
/// (`\d`, `\w`, `\1`...). An escaped punctuation character outside a class is rewritten as a
/// one-character class (`\.` as `[.]`): the same language, and llama.cpp's converter copies
/// such an escape into a literal its grammar parser refuses.
pub fn grammar_pattern(shape: &str) -> Option<String> {
    if !shape.starts_with('^') || !shape.ends_with('$') || shape.ends_with("\\$") {
        return None;
    }
    if shape.contains("(?") {
        return None;
    }
    let mut out = String::with_capacity(shape.len());
    let mut in_class = false;
    let mut chars = shape.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let e = chars.next()?;
                if !e.is_ascii_punctuation() {
                    return None;
                }
                if in_class {
                    out.push('\\');
                    out.push(e);
                } else if matches!(e, '\\' | ']' | '[' | '^' | '-') {
                    return None;
                } else {
                    out.push('[');
                    out.push(e);
                    out.push(']');
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push(c);
                // A `]` or `^]` right after the opening bracket is a member, not the end.
                if let Some(n) = chars.clone().next()
                    && n == '^'
                {
                    out.push(chars.next()?);
                }
                if let Some(']') = chars.clone().next() {
                    out.push(chars.next()?);
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    (!in_class).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every keyword path of `v`, as `a/b/c`.
    fn paths(v: &Value, at: String, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    let p = format!("{at}/{k}");
                    out.push(p.clone());
                    paths(x, p, out);
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    paths(x, format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn a_line_shape_becomes_a_pattern_a_grammar_takes_or_none() {
        let same = |shape: &str, samples: &[&str]| {
            let p = grammar_pattern(shape).unwrap_or_else(|| panic!("{shape}"));
            let (a, b) = (
                regex::Regex::new(shape).unwrap(),
                regex::Regex::new(&p).unwrap(),
            );
            for s in samples {
                assert_eq!(a.is_match(s), b.is_match(s), "{shape} vs {p} on {s:?}");
            }
            p
        };
        let net = r"^mynetworks = [0-9]{1,3}(\.[0-9]{1,3}){3}/[0-9]{1,2}$";
        assert_eq!(
            same(
                net,
                &["mynetworks = 10.0.0.1/32", "mynetworks = 10x0.0.1/32"]
            ),
            "^mynetworks = [0-9]{1,3}([.][0-9]{1,3}){3}/[0-9]{1,2}$"
        );
        // An escape inside a class stays; a class starting with `]` or `^]` is one class.
        same(r"^a[\.\-]b$", &["a.b", "a-b", "a\\b", "axb"]);
        same(r"^[]a]+$", &["]a", "b"]);
        same(r"^[^]a]+$", &["]a", "b"]);
        // Unanchored, look-around, class escapes, back-references: none.
        for shape in [
            r"mydestination = .*",
            r"^(?!x).*$",
            r"^\d+$",
            r"^(a)\1$",
            r"^a\$",
        ] {
            assert_eq!(grammar_pattern(shape), None, "{shape}");
        }
    }

    #[test]
    fn a_constraint_is_the_published_schema_less_only_what_grammars_cannot_take() {
        for kind in [AnswerKind::Candidate, AnswerKind::Review] {
            let full: Value = serde_json::from_str(published_schema(kind)).unwrap();
            let c = constraint(kind);
            let (mut all, mut kept) = (Vec::new(), Vec::new());
            paths(&full, String::new(), &mut all);
            paths(&c, String::new(), &mut kept);
            let dropped: Vec<&String> = all.iter().filter(|p| !kept.contains(p)).collect();
            assert!(!dropped.is_empty(), "{kind:?}: the schema has patterns");
            for p in &dropped {
                let last = p.rsplit('/').next().unwrap();
                assert!(LEFT_OUT.contains(&last), "{kind:?}: {p} was dropped");
            }
            assert!(
                kept.iter().all(|p| all.contains(p)),
                "{kind:?}: nothing added"
            );
            // The structure that makes a grammar stays.
            for must in [
                "/additionalProperties",
                "/required",
                "/properties/format/const",
            ] {
                assert!(kept.iter().any(|p| p == must), "{kind:?}: {must}");
            }
        }
    }
}
