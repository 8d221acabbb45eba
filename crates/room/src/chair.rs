//! The Chair: what it decides on one proposal, from the review and the compiler's answer.
//!
//! The Chair admits an experiment or asks for a revision; it never approves a step. A HIL
//! request is answered by the operator alone, after admission, one step at a time: an
//! admission grants no HIL approval.

use reach_digest::Sha256Digest;
use reach_plan::{PlanRefusal, Review, StampedPlan, Verdict};

pub use crate::fact::Decision;

/// A reject or a compile refusal with no round left.
pub const ROUNDS_EXHAUSTED: &str = "chair/rounds-exhausted";
/// The review is not of the candidate decided on.
pub const REVIEW_NOT_OF_CANDIDATE: &str = "chair/review-not-of-candidate";
/// The compiled plan is not of the candidate decided on.
pub const PLAN_NOT_OF_CANDIDATE: &str = "chair/plan-not-of-candidate";

/// The Chair's decision on the candidate `candidate_digest`, given the `review` the Room bound
/// to `review_of` and the compiler's answer for the same candidate:
///
/// - `Admit` only when the review approves, is of this candidate, and the candidate compiled
///   (to a plan of this candidate);
/// - a reject: `RequestRevision` with the review's summary while `rounds_left`, else
///   `Refuse` `chair/rounds-exhausted`;
/// - a compile refusal: `RequestRevision` naming its code, likewise;
/// - a review or plan of another candidate: `Refuse` (mechanics bound the wrong bytes).
///
/// An admission grants no HIL approval.
pub fn decide(
    candidate_digest: Sha256Digest,
    review: &Review,
    review_of: Sha256Digest,
    compiled: Result<&StampedPlan, &PlanRefusal>,
    rounds_left: bool,
) -> Decision {
    if review_of != candidate_digest {
        return Decision::Refuse {
            code: REVIEW_NOT_OF_CANDIDATE.into(),
        };
    }
    let revise = |reason: String| {
        if rounds_left {
            Decision::RequestRevision { reason }
        } else {
            Decision::Refuse {
                code: ROUNDS_EXHAUSTED.into(),
            }
        }
    };
    if review.verdict == Verdict::Reject {
        return revise(review.summary.clone());
    }
    match compiled {
        Err(refusal) => revise(format!(
            "the candidate does not compile: {}",
            refusal.code()
        )),
        Ok(plan) if plan.candidate_digest != candidate_digest => Decision::Refuse {
            code: PLAN_NOT_OF_CANDIDATE.into(),
        },
        Ok(plan) => Decision::Admit {
            plan_digest: plan.digest,
        },
    }
}

#[cfg(test)]
mod tests {
    use reach_plan::testing::{terms, vocabulary};
    use reach_plan::{HilMode, compile};

    use super::*;

    const OBSERVE: &str = r#"{"format":"reach.plan.candidate.v1","diagnosis":"look","steps":[{"kind":"run","profile":"show-config","args":[]},{"kind":"verify"}]}"#;
    const OTHER: &str = r#"{"format":"reach.plan.candidate.v1","diagnosis":"other","steps":[{"kind":"run","profile":"show-config","args":[]},{"kind":"run","profile":"show-config","args":[]},{"kind":"verify"}]}"#;

    /// A verdict, what the review is bound to, the compiler's answer, rounds left, the decision.
    type Row<'a> = (
        &'static str,
        Sha256Digest,
        Result<&'a StampedPlan, &'a PlanRefusal>,
        bool,
        Decision,
    );

    fn review(verdict: &str) -> Review {
        Review::parse(
            format!(
                r#"{{"format":"reach.plan.review.v1","verdict":"{verdict}","findings":[],"summary":"the summary"}}"#
            )
            .as_bytes(),
        )
        .unwrap()
    }

    #[test]
    fn the_chair_table() {
        let d = Sha256Digest::of(OBSERVE);
        let plan = compile(&vocabulary(), &terms(HilMode::EachStep), OBSERVE.as_bytes()).unwrap();
        let other = compile(&vocabulary(), &terms(HilMode::EachStep), OTHER.as_bytes()).unwrap();
        let refusal = PlanRefusal::TooManySteps { count: 99, max: 16 };
        let admit = Decision::Admit {
            plan_digest: plan.digest,
        };
        let revise = |r: &str| Decision::RequestRevision { reason: r.into() };
        let refuse = |c: &str| Decision::Refuse { code: c.into() };
        let not_compiling = "the candidate does not compile: plan/too-many-steps";
        let table: [Row<'_>; 9] = [
            ("approve", d, Ok(&plan), true, admit.clone()),
            ("approve", d, Ok(&plan), false, admit),
            ("reject", d, Ok(&plan), true, revise("the summary")),
            ("reject", d, Ok(&plan), false, refuse(ROUNDS_EXHAUSTED)),
            ("reject", d, Err(&refusal), true, revise("the summary")),
            ("approve", d, Err(&refusal), true, revise(not_compiling)),
            ("approve", d, Err(&refusal), false, refuse(ROUNDS_EXHAUSTED)),
            (
                "approve",
                Sha256Digest::of(OTHER),
                Ok(&plan),
                true,
                refuse(REVIEW_NOT_OF_CANDIDATE),
            ),
            (
                "approve",
                d,
                Ok(&other),
                true,
                refuse(PLAN_NOT_OF_CANDIDATE),
            ),
        ];
        for (i, (verdict, review_of, compiled, rounds_left, want)) in table.into_iter().enumerate()
        {
            assert_eq!(
                decide(d, &review(verdict), review_of, compiled, rounds_left),
                want,
                "row {i}"
            );
        }
    }
}
