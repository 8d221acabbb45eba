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

use reach_taskpack::source::Answer as AnswerKind;
use serde_json::Value;

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
