//! The reference story as Room facts: a rejected open grant, a revision, an observation whose
//! verifier fails, a repair that passes, the conclusion; replay equals incremental application;
//! every refusal and budget end reached.

use reach_digest::Sha256Digest;
use reach_plan::testing::{terms, vocabulary};
use reach_plan::{HilMode, Review, compile};
use reach_room::chair::{self, Decision};
use reach_room::fact::{
    Budget, ChairDecision, Concluded, Ended, ExperimentFact, FactBody, Opened, Passage,
    PassageOutcome, Proposal, ReviewFact, RoomFact, RunId, TurnOpened,
};
use reach_room::room::{self, End, Next, Room};
use reach_taskpack::source::{EvidenceKind, Role};

const OPEN_GRANT: &str = r#"{"format":"reach.plan.candidate.v1","diagnosis":"accept everything","steps":[{"kind":"run","profile":"show-config","args":[]},{"kind":"patch","target":"etc/app.conf","edits":[{"op":"replace","line":"accept = localhost","with":"accept = *"}]},{"kind":"verify"}]}"#;
const OBSERVE: &str = r#"{"format":"reach.plan.candidate.v1","diagnosis":"look first","steps":[{"kind":"run","profile":"show-config","args":[]},{"kind":"run","profile":"service-status","args":["svc"]},{"kind":"verify"}]}"#;
const REPAIR: &str = r#"{"format":"reach.plan.candidate.v1","diagnosis":"the local domain is missing from accept","steps":[{"kind":"run","profile":"show-config","args":[]},{"kind":"patch","target":"etc/app.conf","edits":[{"op":"replace","line":"accept = localhost","with":"accept = localhost, example.test"}]},{"kind":"restart","service":"svc"},{"kind":"verify"}]}"#;

fn review(verdict: &str, summary: &str) -> String {
    format!(
        r#"{{"format":"reach.plan.review.v1","verdict":"{verdict}","findings":[],"summary":"{summary}"}}"#
    )
}

fn budget(max_rounds: u32, max_experiments: u32) -> Budget {
    Budget {
        max_rounds,
        max_experiments,
        max_wall_s: 1800,
        passages_per_turn: 1,
    }
}

fn room_id() -> RunId {
    RunId::new("run-0a1b2c").unwrap()
}

fn opened(b: Budget) -> RoomFact {
    RoomFact::opened(
        room_id(),
        1_000,
        Opened {
            pack: "app-local".into(),
            pack_generation: 7,
            profile_digest: Sha256Digest::of(b"app-local task profile"),
            thematic_profile: "corpus-profile:app-administration".into(),
            goal_digest: Sha256Digest::of(b"make local delivery work"),
            requester: "requester-1".into(),
            solver: "solver-1".into(),
            reviewer: "reviewer-1".into(),
            hil_mode: HilMode::EachStep,
            budget: b,
        },
    )
}

/// Drafts and applies facts, keeping them.
struct Story {
    room: Room,
    facts: Vec<RoomFact>,
    at: i64,
}

impl Story {
    fn new(b: Budget) -> Self {
        let mut room = Room::new();
        let f = opened(b);
        room.apply(&f).unwrap();
        Story {
            room,
            facts: vec![f],
            at: 1_000,
        }
    }

    fn draft(&mut self, body: FactBody) -> RoomFact {
        self.at += 10;
        self.room.draft(self.at, body).unwrap()
    }

    fn push(&mut self, body: FactBody) {
        let f = self.draft(body);
        self.room
            .apply(&f)
            .unwrap_or_else(|e| panic!("{}: {e}", f.body.kind()));
        self.facts.push(f);
    }

    fn refused(&mut self, body: FactBody) -> &'static str {
        let f = self.draft(body);
        let before = self.room.clone();
        let code = self.room.apply(&f).unwrap_err().code();
        assert_eq!(self.room, before, "a refused fact changes nothing");
        code
    }

    fn round(&self) -> u32 {
        self.room.round()
    }

    fn passage(&mut self, role: Role, answer: &str) {
        let round = self.round();
        self.push(FactBody::TurnOpened(TurnOpened { round, role }));
        self.push(FactBody::Passage(passage(
            round,
            role,
            PassageOutcome::Answered {
                answer_digest: Sha256Digest::of(answer.as_bytes()),
            },
        )));
    }

    /// A Solver passage and its proposal.
    fn propose(&mut self, candidate: &str) {
        let round = self.round();
        assert!(matches!(
            self.room.next(),
            Next::OpenTurn {
                role: Role::Solver,
                ..
            }
        ));
        self.passage(Role::Solver, candidate);
        self.push(FactBody::Proposal(Proposal {
            round,
            candidate_digest: Sha256Digest::of(candidate.as_bytes()),
            candidate: candidate.into(),
        }));
    }

    /// A Reviewer passage, its review and the Chair's decision from the real compiler.
    fn review_and_decide(&mut self, review_text: &str) -> Decision {
        let round = self.round();
        let candidate = self.room.proposal().unwrap().candidate.clone();
        let digest = Sha256Digest::of(candidate.as_bytes());
        assert_eq!(
            self.room.next(),
            Next::OpenTurn {
                round,
                role: Role::Reviewer
            }
        );
        self.passage(Role::Reviewer, review_text);
        let parsed = Review::parse(review_text.as_bytes()).unwrap();
        self.push(FactBody::Review(ReviewFact {
            round,
            candidate_digest: digest,
            review_digest: Sha256Digest::of(review_text.as_bytes()),
            verdict: parsed.verdict.into(),
            review: review_text.into(),
        }));
        assert_eq!(
            self.room.next(),
            Next::Chair {
                round,
                candidate_digest: digest
            }
        );
        let compiled = compile(
            &vocabulary(),
            &terms(HilMode::EachStep),
            candidate.as_bytes(),
        );
        let review_of = self.room.review().unwrap().candidate_digest;
        let decision = chair::decide(
            digest,
            &parsed,
            review_of,
            compiled.as_ref(),
            self.room.rounds_left(),
        );
        self.push(FactBody::ChairDecision(ChairDecision {
            round,
            candidate_digest: digest,
            decision: decision.clone(),
        }));
        decision
    }

    fn experiment(&mut self, passed: bool, end: &str) {
        let Next::Experiment {
            round,
            n,
            plan_digest,
        } = self.room.next()
        else {
            panic!("expected an experiment, got {:?}", self.room.next());
        };
        self.push(FactBody::Experiment(ExperimentFact {
            round,
            n,
            plan_digest,
            record_digest: Sha256Digest::of(format!("record {n}")),
            verifier_passed: passed,
            end: end.into(),
        }));
    }
}

fn passage(round: u32, role: Role, outcome: PassageOutcome) -> Passage {
    Passage {
        round,
        role,
        payload_digest: Sha256Digest::of(b"payload"),
        evidence_digest: Sha256Digest::of(b"manifest"),
        decision_id: "decision-1".into(),
        attempt_id: "attempt-1".into(),
        outcome,
    }
}

/// The whole reference story; returns its facts.
fn reference() -> Story {
    let mut s = Story::new(budget(4, 2));
    assert_eq!(
        s.room.next(),
        Next::OpenTurn {
            round: 1,
            role: Role::Solver
        }
    );
    s.push(FactBody::TurnOpened(TurnOpened {
        round: 1,
        role: Role::Solver,
    }));
    assert_eq!(
        s.room.next(),
        Next::SolverPassage {
            round: 1,
            evidence: vec![]
        }
    );
    s.push(FactBody::Passage(passage(
        1,
        Role::Solver,
        PassageOutcome::Answered {
            answer_digest: Sha256Digest::of(OPEN_GRANT),
        },
    )));
    s.push(FactBody::Proposal(Proposal {
        round: 1,
        candidate_digest: Sha256Digest::of(OPEN_GRANT),
        candidate: OPEN_GRANT.into(),
    }));
    // Round 1: the reviewer rejects the open grant; no admission follows.
    let d = s.review_and_decide(&review("reject", "a wildcard grant"));
    assert_eq!(
        d,
        Decision::RequestRevision {
            reason: "a wildcard grant".into()
        }
    );
    assert_eq!(s.room.admitted_candidate(), None);
    // Round 2: with the request and the review, the solver observes.
    let next = s.room.next();
    assert_eq!(
        next,
        Next::OpenTurn {
            round: 2,
            role: Role::Solver
        }
    );
    s.push(FactBody::TurnOpened(TurnOpened {
        round: 2,
        role: Role::Solver,
    }));
    let next = s.room.next();
    assert_eq!(
        s.room.evidence_kinds_for(&next),
        vec![EvidenceKind::RevisionRequest, EvidenceKind::Review]
    );
    s.push(FactBody::Passage(passage(
        2,
        Role::Solver,
        PassageOutcome::Answered {
            answer_digest: Sha256Digest::of(OBSERVE),
        },
    )));
    s.push(FactBody::Proposal(Proposal {
        round: 2,
        candidate_digest: Sha256Digest::of(OBSERVE),
        candidate: OBSERVE.into(),
    }));
    let d = s.review_and_decide(&review("approve", "observation only"));
    assert!(matches!(d, Decision::Admit { .. }), "{d:?}");
    assert_eq!(s.room.admitted_candidate(), Some(OBSERVE));
    s.experiment(false, "completed");
    // Round 3: with the experiment's evidence, the solver repairs.
    assert_eq!(
        s.room.next(),
        Next::OpenTurn {
            round: 3,
            role: Role::Solver
        }
    );
    s.push(FactBody::TurnOpened(TurnOpened {
        round: 3,
        role: Role::Solver,
    }));
    assert_eq!(
        s.room.next(),
        Next::SolverPassage {
            round: 3,
            evidence: vec![
                EvidenceKind::ExecutionRecord,
                EvidenceKind::VerifierResult,
                EvidenceKind::Observations
            ]
        }
    );
    s.push(FactBody::Passage(passage(
        3,
        Role::Solver,
        PassageOutcome::Answered {
            answer_digest: Sha256Digest::of(REPAIR),
        },
    )));
    s.push(FactBody::Proposal(Proposal {
        round: 3,
        candidate_digest: Sha256Digest::of(REPAIR),
        candidate: REPAIR.into(),
    }));
    let next_reviewer = {
        s.push(FactBody::TurnOpened(TurnOpened {
            round: 3,
            role: Role::Reviewer,
        }));
        s.room.next()
    };
    assert_eq!(
        next_reviewer,
        Next::ReviewerPassage {
            round: 3,
            candidate_digest: Sha256Digest::of(REPAIR)
        }
    );
    assert_eq!(
        s.room.evidence_kinds_for(&next_reviewer).len(),
        3,
        "the reviewer reads the solver's evidence"
    );
    let text = review("approve", "a local domain only");
    s.push(FactBody::Passage(passage(
        3,
        Role::Reviewer,
        PassageOutcome::Answered {
            answer_digest: Sha256Digest::of(&text),
        },
    )));
    s.push(FactBody::Review(ReviewFact {
        round: 3,
        candidate_digest: Sha256Digest::of(REPAIR),
        review_digest: Sha256Digest::of(&text),
        verdict: reach_room::fact::VerdictText::Approve,
        review: text.clone(),
    }));
    let plan = compile(&vocabulary(), &terms(HilMode::EachStep), REPAIR.as_bytes()).unwrap();
    let parsed = Review::parse(text.as_bytes()).unwrap();
    let d = chair::decide(
        Sha256Digest::of(REPAIR),
        &parsed,
        Sha256Digest::of(REPAIR),
        Ok(&plan),
        s.room.rounds_left(),
    );
    assert_eq!(
        d,
        Decision::Admit {
            plan_digest: plan.digest
        }
    );
    s.push(FactBody::ChairDecision(ChairDecision {
        round: 3,
        candidate_digest: Sha256Digest::of(REPAIR),
        decision: d,
    }));
    assert_eq!(
        s.room.next(),
        Next::Experiment {
            round: 3,
            n: 2,
            plan_digest: plan.digest
        }
    );
    s.experiment(true, "completed");
    assert_eq!(s.room.next(), Next::Conclude);
    let recipe_digest = Sha256Digest::of(b"recipe");
    s.push(FactBody::Concluded(Concluded { recipe_digest }));
    assert_eq!(s.room.next(), Next::Done(End::Concluded { recipe_digest }));
    s
}

#[test]
fn reference_story_concludes() {
    let s = reference();
    assert_eq!(s.room.experiments().len(), 2);
    assert_eq!(s.room.admitted_candidate(), Some(REPAIR));
    assert_eq!(s.room.proposal().unwrap().round, 3);
    assert!(s.room.decision().is_some());
    assert_eq!(s.facts.len() as u64, s.room.next_seq());
}

#[test]
fn replay_equals_incremental() {
    let s = reference();
    let replayed = Room::replay(&s.facts).unwrap();
    assert_eq!(replayed, s.room);
    // Every prefix replays to a Room that accepts the rest.
    for k in 1..s.facts.len() {
        let mut r = Room::replay(&s.facts[..k]).unwrap();
        for f in &s.facts[k..] {
            r.apply(f).unwrap();
        }
        assert_eq!(r, s.room);
    }
    // Facts round-trip through their canonical bytes.
    for f in &s.facts {
        assert_eq!(RoomFact::from_bytes(&f.canonical_bytes()).unwrap(), *f);
    }
    assert_eq!(Room::replay(&[]).unwrap_err().code(), "room/empty");
}

#[test]
fn after_end_is_refused() {
    let mut s = reference();
    assert_eq!(
        s.refused(FactBody::Ended(Ended {
            code: "x/y".into(),
            reason: String::new()
        })),
        "room/after-end"
    );
}

#[test]
fn order_chain_and_room_are_checked() {
    let mut s = Story::new(budget(4, 2));
    // A passage before its turn opened.
    assert_eq!(
        s.refused(FactBody::Passage(passage(
            1,
            Role::Solver,
            PassageOutcome::Answered {
                answer_digest: Sha256Digest::of(OBSERVE)
            }
        ))),
        "room/out-of-order"
    );
    // The reviewer's turn first.
    assert_eq!(
        s.refused(FactBody::TurnOpened(TurnOpened {
            round: 1,
            role: Role::Reviewer
        })),
        "room/out-of-order"
    );
    // A second opening.
    let o = opened(budget(4, 2)).body;
    assert_eq!(s.refused(o), "room/out-of-order");
    let good = s.draft(FactBody::TurnOpened(TurnOpened {
        round: 1,
        role: Role::Solver,
    }));
    let mut wrong_seq = good.clone();
    wrong_seq.seq += 1;
    assert_eq!(
        s.room.apply(&wrong_seq).unwrap_err().code(),
        "room/out-of-order"
    );
    let mut broken = good.clone();
    broken.prev = Some(Sha256Digest::of(b"another fact"));
    assert_eq!(
        s.room.apply(&broken).unwrap_err().code(),
        "room/chain-broken"
    );
    let mut other = good.clone();
    other.room = RunId::new("run-ff").unwrap();
    assert_eq!(s.room.apply(&other).unwrap_err().code(), "room/wrong-room");
    s.room.apply(&good).unwrap();
    // A fact before opening.
    assert_eq!(
        Room::new().apply(&good).unwrap_err().code(),
        "room/out-of-order"
    );
    // Replay refuses a reordered story.
    let r = reference();
    let mut facts = r.facts.clone();
    facts.swap(3, 4);
    assert!(Room::replay(&facts).is_err());
}

#[test]
fn proposal_and_review_are_bound_to_their_passages() {
    let mut s = Story::new(budget(4, 2));
    s.passage(Role::Solver, OBSERVE);
    // A proposal of other bytes than the passage answered.
    assert_eq!(
        s.refused(FactBody::Proposal(Proposal {
            round: 1,
            candidate_digest: Sha256Digest::of(REPAIR),
            candidate: REPAIR.into(),
        })),
        "room/digest-mismatch"
    );
    // A digest that is not of the bytes.
    assert_eq!(
        s.refused(FactBody::Proposal(Proposal {
            round: 1,
            candidate_digest: Sha256Digest::of(OBSERVE),
            candidate: REPAIR.into(),
        })),
        "room/digest-mismatch"
    );
    s.push(FactBody::Proposal(Proposal {
        round: 1,
        candidate_digest: Sha256Digest::of(OBSERVE),
        candidate: OBSERVE.into(),
    }));
    let text = review("approve", "fine");
    s.passage(Role::Reviewer, &text);
    // A review of another candidate.
    assert_eq!(
        s.refused(FactBody::Review(ReviewFact {
            round: 1,
            candidate_digest: Sha256Digest::of(REPAIR),
            review_digest: Sha256Digest::of(&text),
            verdict: reach_room::fact::VerdictText::Approve,
            review: text.clone(),
        })),
        "room/out-of-order"
    );
    // A rejecting review admits nothing.
    let rejecting = review("reject", "no");
    let mut t = Story::new(budget(4, 2));
    t.propose(OBSERVE);
    t.passage(Role::Reviewer, &rejecting);
    t.push(FactBody::Review(ReviewFact {
        round: 1,
        candidate_digest: Sha256Digest::of(OBSERVE),
        review_digest: Sha256Digest::of(&rejecting),
        verdict: reach_room::fact::VerdictText::Reject,
        review: rejecting.clone(),
    }));
    assert_eq!(
        t.refused(FactBody::ChairDecision(ChairDecision {
            round: 1,
            candidate_digest: Sha256Digest::of(OBSERVE),
            decision: Decision::Admit {
                plan_digest: Sha256Digest::of(b"plan")
            },
        })),
        "room/out-of-order"
    );
    // A chair decision before the review.
    assert_eq!(
        s.refused(FactBody::ChairDecision(ChairDecision {
            round: 1,
            candidate_digest: Sha256Digest::of(OBSERVE),
            decision: Decision::Refuse { code: "x/y".into() },
        })),
        "room/out-of-order"
    );
}

#[test]
fn a_refused_passage_ends_the_room_with_its_code() {
    for role in [Role::Solver, Role::Reviewer] {
        let mut s = Story::new(budget(4, 2));
        if role == Role::Reviewer {
            s.propose(OBSERVE);
        }
        s.push(FactBody::TurnOpened(TurnOpened { round: 1, role }));
        s.push(FactBody::Passage(passage(
            1,
            role,
            PassageOutcome::Refused {
                code: "inference/quarantined".into(),
            },
        )));
        let Next::End { code, .. } = s.room.next() else {
            panic!("{:?}", s.room.next())
        };
        assert_eq!(code, "inference/quarantined");
        // Only an end with that code applies.
        assert_eq!(
            s.refused(FactBody::Ended(Ended {
                code: "other/code".into(),
                reason: String::new()
            })),
            "room/out-of-order"
        );
        s.push(FactBody::Ended(Ended {
            code,
            reason: "refused passage".into(),
        }));
        assert_eq!(
            s.room.next(),
            Next::Done(End::Ended {
                code: "inference/quarantined".into()
            })
        );
    }
}

#[test]
fn rounds_are_bounded() {
    let mut s = Story::new(budget(1, 2));
    s.propose(OPEN_GRANT);
    assert!(!s.room.rounds_left());
    let d = s.review_and_decide(&review("reject", "a wildcard"));
    assert_eq!(
        d,
        Decision::Refuse {
            code: "chair/rounds-exhausted".into()
        }
    );
    assert!(matches!(s.room.next(), Next::End { code, .. } if code == "chair/rounds-exhausted"));

    // A revision request in the last round: the Room must end.
    let mut s = Story::new(budget(1, 2));
    s.propose(OBSERVE);
    let text = review("reject", "no");
    s.passage(Role::Reviewer, &text);
    s.push(FactBody::Review(ReviewFact {
        round: 1,
        candidate_digest: Sha256Digest::of(OBSERVE),
        review_digest: Sha256Digest::of(&text),
        verdict: reach_room::fact::VerdictText::Reject,
        review: text,
    }));
    s.push(FactBody::ChairDecision(ChairDecision {
        round: 1,
        candidate_digest: Sha256Digest::of(OBSERVE),
        decision: Decision::RequestRevision {
            reason: "no".into(),
        },
    }));
    assert!(matches!(s.room.next(), Next::End { code, .. } if code == room::ROUNDS_EXHAUSTED));
    assert_eq!(
        s.refused(FactBody::TurnOpened(TurnOpened {
            round: 2,
            role: Role::Solver
        })),
        "room/out-of-order"
    );

    // A failed experiment in the last round: likewise.
    let mut s = Story::new(budget(1, 2));
    s.propose(OBSERVE);
    s.review_and_decide(&review("approve", "ok"));
    s.experiment(false, "step-failed");
    assert!(matches!(s.room.next(), Next::End { code, .. } if code == room::ROUNDS_EXHAUSTED));
}

#[test]
fn experiments_are_bounded() {
    let mut s = Story::new(budget(4, 1));
    s.propose(OBSERVE);
    s.review_and_decide(&review("approve", "ok"));
    s.experiment(false, "completed");
    s.propose(OBSERVE);
    s.review_and_decide(&review("approve", "ok"));
    assert!(matches!(s.room.next(), Next::End { code, .. } if code == room::EXPERIMENTS_EXHAUSTED));
}

#[test]
fn wall_time_is_bounded() {
    let s = Story::new(budget(4, 2));
    assert_eq!(s.room.over_wall(1_000 + 1_800_000), None);
    assert!(
        matches!(s.room.over_wall(1_000 + 1_800_001), Some(Next::End { code, .. }) if code == room::WALL_EXHAUSTED)
    );
    let mut s = s;
    s.push(FactBody::Ended(Ended {
        code: room::WALL_EXHAUSTED.into(),
        reason: "wall".into(),
    }));
    assert_eq!(s.room.over_wall(i64::MAX), None);
}

#[test]
fn experiment_ends() {
    for (end, code) in [
        ("refused:hil/denied", Some("hil/denied")),
        ("not-created", Some(room::NOT_CREATED)),
        ("not-created:vm/no-image", Some("vm/no-image")),
        ("unknown", Some(room::OUTCOME_UNKNOWN)),
        ("step-failed", None),
    ] {
        let mut s = Story::new(budget(4, 2));
        s.propose(OBSERVE);
        s.review_and_decide(&review("approve", "ok"));
        s.experiment(false, end);
        match (s.room.next(), code) {
            (Next::End { code: got, .. }, Some(want)) => assert_eq!(got, want),
            (Next::OpenTurn { round: 2, .. }, None) => {}
            (n, _) => panic!("{end}: {n:?}"),
        }
    }
    // A bad end, a passing verifier on a failed run, a wrong n.
    let mut s = Story::new(budget(4, 2));
    s.propose(OBSERVE);
    s.review_and_decide(&review("approve", "ok"));
    let Next::Experiment { plan_digest, .. } = s.room.next() else {
        panic!()
    };
    let x = |n, passed, end: &str| {
        FactBody::Experiment(ExperimentFact {
            round: 1,
            n,
            plan_digest,
            record_digest: Sha256Digest::of(b"r"),
            verifier_passed: passed,
            end: end.into(),
        })
    };
    assert_eq!(
        s.refused(x(1, false, "exploded")),
        "room/bad-experiment-end"
    );
    assert_eq!(
        s.refused(x(1, true, "step-failed")),
        "room/bad-experiment-end"
    );
    assert_eq!(s.refused(x(2, false, "completed")), "room/out-of-order");
    // A conclusion before a passing experiment.
    assert_eq!(
        s.refused(FactBody::Concluded(Concluded {
            recipe_digest: Sha256Digest::of(b"r")
        })),
        "room/out-of-order"
    );
}

#[test]
fn a_chair_refusal_ends_the_room() {
    let mut s = Story::new(budget(4, 2));
    s.propose(OBSERVE);
    let text = review("approve", "ok");
    s.passage(Role::Reviewer, &text);
    s.push(FactBody::Review(ReviewFact {
        round: 1,
        candidate_digest: Sha256Digest::of(OBSERVE),
        review_digest: Sha256Digest::of(&text),
        verdict: reach_room::fact::VerdictText::Approve,
        review: text,
    }));
    s.push(FactBody::ChairDecision(ChairDecision {
        round: 1,
        candidate_digest: Sha256Digest::of(OBSERVE),
        decision: Decision::Refuse {
            code: "chair/plan-not-of-candidate".into(),
        },
    }));
    assert!(
        matches!(s.room.next(), Next::End { code, .. } if code == "chair/plan-not-of-candidate")
    );
}

#[test]
fn evidence_is_filtered_by_the_turn() {
    let turn: reach_taskpack::source::Turn = serde_json::from_value(serde_json::json!({
        "role": "reviewer", "prompt": "prompts/reviewer.md", "answer": "review", "passages": 1,
        "max_prompt_tokens": 1, "max_completion_tokens": 1, "wall_s": 1,
        "evidence": ["revision-request", "execution-record"]
    }))
    .unwrap();
    assert_eq!(
        room::admitted_by(
            &[EvidenceKind::RevisionRequest, EvidenceKind::Review],
            &turn
        ),
        vec![EvidenceKind::RevisionRequest]
    );
}
