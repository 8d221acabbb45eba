//! The Room as a replayable state machine: every fact is applied through one checked
//! transition, and [`Room::next`] says what Room mechanics demand next. The same facts give
//! the same Room, whether replayed at once or applied one by one.
//!
//! Per round `r` (from 1): the Solver's turn opens, its passage, the proposal (only if the
//! passage answered), the Reviewer's turn, its passage, the review of exactly that proposal,
//! the Chair's decision; after an admission the experiment. A passing verifier concludes; a
//! failing one opens round `r + 1` with the experiment's evidence; a revision request opens it
//! with the request and the review. Anything else ends the Room with its code. An admission
//! needs the round's approving review; nothing skips the Reviewer's turn.

use reach_digest::Sha256Digest;
use reach_taskpack::source::{EvidenceKind, Role, Turn};

use crate::fact::{
    ChairDecision, Decision, ExperimentEnd, ExperimentFact, FactBody, Opened, Passage,
    PassageOutcome, Proposal, ReviewFact, RoomFact, RunId, VerdictText,
};

/// A round beyond the flow's `max_rounds`.
pub const ROUNDS_EXHAUSTED: &str = "room/rounds-exhausted";
/// An admission beyond the flow's `max_experiments`.
pub const EXPERIMENTS_EXHAUSTED: &str = "room/experiments-exhausted";
/// Past the flow's `max_wall_s` since the Room opened.
pub const WALL_EXHAUSTED: &str = "room/wall-exhausted";
/// An experiment whose outcome is not known ends the loop.
pub const OUTCOME_UNKNOWN: &str = "room/experiment-unknown";
/// An experiment whose instance was not created, with no code of its own.
pub const NOT_CREATED: &str = "room/experiment-not-created";

/// What Room mechanics demand next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Nothing yet: the `opened` fact.
    Open,
    /// Open the turn of `role` in `round`.
    OpenTurn { round: u32, role: Role },
    /// Run the Solver's passage with these evidence kinds (before the flow's turn filter).
    SolverPassage {
        round: u32,
        evidence: Vec<EvidenceKind>,
    },
    /// Record the Solver's proposal: the candidate whose digest its passage answered.
    Proposal {
        round: u32,
        answer_digest: Sha256Digest,
    },
    /// Run the Reviewer's passage on exactly this candidate.
    ReviewerPassage {
        round: u32,
        candidate_digest: Sha256Digest,
    },
    /// Record the review its passage answered, of this candidate.
    Review {
        round: u32,
        candidate_digest: Sha256Digest,
        answer_digest: Sha256Digest,
    },
    /// The Chair decides on the round's proposal.
    Chair {
        round: u32,
        candidate_digest: Sha256Digest,
    },
    /// Run the admitted plan as experiment `n` (from 1).
    Experiment {
        round: u32,
        n: u32,
        plan_digest: Sha256Digest,
    },
    /// The verifier passed: publish the recipe and record `concluded`.
    Conclude,
    /// The Room must end with this code (an `ended` fact carrying it).
    End { code: String, reason: String },
    /// The Room is over.
    Done(End),
}

/// How a Room ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    Concluded { recipe_digest: Sha256Digest },
    Ended { code: String },
}

/// Why a fact does not apply to the Room.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoomRefusal {
    #[error("fact {seq} ({kind}) is out of order: {why}")]
    OutOfOrder {
        seq: u64,
        kind: &'static str,
        why: String,
    },
    #[error("fact {seq} does not chain to the fact before it")]
    ChainBroken { seq: u64 },
    #[error("fact {seq} belongs to room {got}, not {room}")]
    WrongRoom { seq: u64, room: RunId, got: RunId },
    #[error("fact {seq} comes after the room ended")]
    AfterEnd { seq: u64 },
    #[error("fact {seq}: {what} does not match its bytes or its passage")]
    DigestMismatch { seq: u64, what: &'static str },
    #[error("fact {seq}: `{end}` is not an experiment end")]
    BadExperimentEnd { seq: u64, end: String },
    #[error("no facts")]
    Empty,
}

impl RoomRefusal {
    pub fn code(&self) -> &'static str {
        match self {
            Self::OutOfOrder { .. } => "room/out-of-order",
            Self::ChainBroken { .. } => "room/chain-broken",
            Self::WrongRoom { .. } => "room/wrong-room",
            Self::AfterEnd { .. } => "room/after-end",
            Self::DigestMismatch { .. } => "room/digest-mismatch",
            Self::BadExperimentEnd { .. } => "room/bad-experiment-end",
            Self::Empty => "room/empty",
        }
    }
}

/// Where the Room stands (private: [`Room::next`] is its public reading).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Fresh,
    AwaitTurn {
        round: u32,
        role: Role,
    },
    InTurn {
        round: u32,
        role: Role,
    },
    AwaitProposal {
        round: u32,
        answer: Sha256Digest,
    },
    AwaitReview {
        round: u32,
        candidate: Sha256Digest,
        answer: Sha256Digest,
    },
    AwaitChair {
        round: u32,
        candidate: Sha256Digest,
    },
    AwaitExperiment {
        round: u32,
        plan: Sha256Digest,
    },
    AwaitConclude,
    MustEnd {
        code: String,
        reason: String,
    },
    Done(End),
}

/// A Room: its opening, the facts' chain head and where the loop stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Room {
    id: Option<RunId>,
    opened: Option<Opened>,
    opened_at_ms: i64,
    next_seq: u64,
    head: Option<Sha256Digest>,
    phase: Phase,
    /// The evidence kinds the current round's passages get.
    evidence: Vec<EvidenceKind>,
    proposal: Option<Proposal>,
    review: Option<ReviewFact>,
    decision: Option<ChairDecision>,
    admitted: Option<Proposal>,
    experiments: Vec<ExperimentFact>,
}

impl Default for Room {
    fn default() -> Self {
        Self::new()
    }
}

impl Room {
    /// A Room with no facts yet.
    pub fn new() -> Self {
        Self {
            id: None,
            opened: None,
            opened_at_ms: 0,
            next_seq: 0,
            head: None,
            phase: Phase::Fresh,
            evidence: Vec::new(),
            proposal: None,
            review: None,
            decision: None,
            admitted: None,
            experiments: Vec::new(),
        }
    }

    /// The Room these facts make, every transition checked.
    pub fn replay(facts: &[RoomFact]) -> Result<Room, RoomRefusal> {
        if facts.is_empty() {
            return Err(RoomRefusal::Empty);
        }
        let mut room = Room::new();
        for f in facts {
            room.apply(f)?;
        }
        Ok(room)
    }

    /// The next fact of this Room, `seq` and `prev` filled in (the caller gives the time).
    pub fn draft(&self, at_ms: i64, body: FactBody) -> Option<RoomFact> {
        Some(RoomFact {
            format: crate::fact::FactFormat::V1,
            room: self.id.clone()?,
            seq: self.next_seq,
            prev: self.head,
            at_ms,
            body,
        })
    }

    /// Applies one fact; a refused fact changes nothing.
    pub fn apply(&mut self, fact: &RoomFact) -> Result<(), RoomRefusal> {
        let seq = fact.seq;
        if matches!(self.phase, Phase::Done(_)) {
            return Err(RoomRefusal::AfterEnd { seq });
        }
        if let Some(id) = &self.id
            && *id != fact.room
        {
            return Err(RoomRefusal::WrongRoom {
                seq,
                room: id.clone(),
                got: fact.room.clone(),
            });
        }
        let kind = fact.body.kind();
        let out = |why: String| RoomRefusal::OutOfOrder { seq, kind, why };
        if seq != self.next_seq {
            return Err(out(format!("expected seq {}", self.next_seq)));
        }
        if fact.prev != self.head {
            return Err(RoomRefusal::ChainBroken { seq });
        }
        let mut next = self.clone();
        next.transition(fact, &out)?;
        next.next_seq += 1;
        next.head = Some(fact.digest());
        *self = next;
        Ok(())
    }

    fn transition(
        &mut self,
        fact: &RoomFact,
        out: &dyn Fn(String) -> RoomRefusal,
    ) -> Result<(), RoomRefusal> {
        let seq = fact.seq;
        let expected = |phase: &Phase| out(format!("the room awaits {}", describe(phase)));
        match (&self.phase, &fact.body) {
            (Phase::Fresh, FactBody::Opened(o)) => {
                self.id = Some(fact.room.clone());
                self.opened = Some(o.clone());
                self.opened_at_ms = fact.at_ms;
                self.begin_round(1, Vec::new());
            }
            (Phase::MustEnd { code, .. }, FactBody::Ended(e)) => {
                if e.code != *code {
                    return Err(out(format!("the room must end with `{code}`")));
                }
                self.phase = Phase::Done(End::Ended {
                    code: e.code.clone(),
                });
            }
            (Phase::MustEnd { .. }, _) => return Err(expected(&self.phase)),
            // Any open Room may end (a cancel, the wall clock), with the caller's code.
            (p, FactBody::Ended(e)) if *p != Phase::Fresh => {
                self.phase = Phase::Done(End::Ended {
                    code: e.code.clone(),
                });
            }
            (&Phase::AwaitTurn { round, role }, FactBody::TurnOpened(t))
                if t.round == round && t.role == role =>
            {
                self.phase = Phase::InTurn { round, role };
            }
            (&Phase::InTurn { round, role }, FactBody::Passage(p))
                if p.round == round && p.role == role =>
            {
                self.passage(p);
            }
            (&Phase::AwaitProposal { round, answer }, FactBody::Proposal(p))
                if p.round == round =>
            {
                if p.candidate_digest != Sha256Digest::of(p.candidate.as_bytes()) {
                    return Err(RoomRefusal::DigestMismatch {
                        seq,
                        what: "candidate_digest",
                    });
                }
                if p.candidate_digest != answer {
                    return Err(RoomRefusal::DigestMismatch {
                        seq,
                        what: "the proposal",
                    });
                }
                self.proposal = Some(p.clone());
                self.review = None;
                self.decision = None;
                self.phase = Phase::AwaitTurn {
                    round,
                    role: Role::Reviewer,
                };
            }
            (
                &Phase::AwaitReview {
                    round,
                    candidate,
                    answer,
                },
                FactBody::Review(r),
            ) if r.round == round => {
                if r.candidate_digest != candidate {
                    return Err(out("the review is not of the round's proposal".into()));
                }
                if r.review_digest != Sha256Digest::of(r.review.as_bytes()) {
                    return Err(RoomRefusal::DigestMismatch {
                        seq,
                        what: "review_digest",
                    });
                }
                if r.review_digest != answer {
                    return Err(RoomRefusal::DigestMismatch {
                        seq,
                        what: "the review",
                    });
                }
                self.review = Some(r.clone());
                self.phase = Phase::AwaitChair { round, candidate };
            }
            (&Phase::AwaitChair { round, candidate }, FactBody::ChairDecision(d))
                if d.round == round =>
            {
                if d.candidate_digest != candidate {
                    return Err(out("the decision is not on the round's proposal".into()));
                }
                let approved = self
                    .review
                    .as_ref()
                    .is_some_and(|r| r.verdict == VerdictText::Approve);
                if matches!(d.decision, Decision::Admit { .. }) && !approved {
                    return Err(out("an admission needs the round's approving review".into()));
                }
                self.decision = Some(d.clone());
                self.decide(round, &d.decision);
            }
            (&Phase::AwaitExperiment { round, plan }, FactBody::Experiment(x))
                if x.round == round =>
            {
                let n = self.experiments.len() as u32 + 1;
                if x.n != n {
                    return Err(out(format!("expected experiment {n}")));
                }
                if x.plan_digest != plan {
                    return Err(out("the experiment is not of the admitted plan".into()));
                }
                let end = ExperimentEnd::parse(&x.end).ok_or(RoomRefusal::BadExperimentEnd {
                    seq,
                    end: x.end.clone(),
                })?;
                if x.verifier_passed && end != ExperimentEnd::Completed {
                    return Err(RoomRefusal::BadExperimentEnd {
                        seq,
                        end: x.end.clone(),
                    });
                }
                self.experiments.push(x.clone());
                self.experimented(round, x.verifier_passed, end);
            }
            (Phase::AwaitConclude, FactBody::Concluded(c)) => {
                self.phase = Phase::Done(End::Concluded {
                    recipe_digest: c.recipe_digest,
                });
            }
            (p, _) => return Err(expected(p)),
        }
        Ok(())
    }

    fn budget(&self) -> crate::fact::Budget {
        // Only called once opened.
        self.opened
            .as_ref()
            .map(|o| o.budget)
            .unwrap_or(crate::fact::Budget {
                max_rounds: 0,
                max_experiments: 0,
                max_wall_s: 0,
                passages_per_turn: 0,
            })
    }

    fn begin_round(&mut self, round: u32, evidence: Vec<EvidenceKind>) {
        if round > self.budget().max_rounds {
            self.phase = Phase::MustEnd {
                code: ROUNDS_EXHAUSTED.into(),
                reason: format!("{} rounds used", self.budget().max_rounds),
            };
            return;
        }
        self.evidence = evidence;
        self.phase = Phase::AwaitTurn {
            round,
            role: Role::Solver,
        };
    }

    fn passage(&mut self, p: &Passage) {
        self.phase = match (&p.outcome, p.role) {
            (PassageOutcome::Refused { code }, role) => Phase::MustEnd {
                code: code.clone(),
                reason: format!("the {} passage was refused", role.name()),
            },
            (PassageOutcome::Answered { answer_digest }, Role::Solver) => Phase::AwaitProposal {
                round: p.round,
                answer: *answer_digest,
            },
            (PassageOutcome::Answered { answer_digest }, Role::Reviewer) => {
                // The reviewer's turn opens only after a proposal.
                let candidate = self
                    .proposal
                    .as_ref()
                    .map(|x| x.candidate_digest)
                    .unwrap_or(Sha256Digest::from_bytes([0; 32]));
                Phase::AwaitReview {
                    round: p.round,
                    candidate,
                    answer: *answer_digest,
                }
            }
        };
    }

    fn decide(&mut self, round: u32, d: &Decision) {
        match d {
            Decision::Admit { plan_digest } => {
                if self.experiments.len() as u32 >= self.budget().max_experiments {
                    self.phase = Phase::MustEnd {
                        code: EXPERIMENTS_EXHAUSTED.into(),
                        reason: format!("{} experiments used", self.experiments.len()),
                    };
                    return;
                }
                self.admitted = self.proposal.clone();
                self.phase = Phase::AwaitExperiment {
                    round,
                    plan: *plan_digest,
                };
            }
            Decision::RequestRevision { .. } => self.begin_round(
                round + 1,
                vec![EvidenceKind::RevisionRequest, EvidenceKind::Review],
            ),
            Decision::Refuse { code } => {
                self.phase = Phase::MustEnd {
                    code: code.clone(),
                    reason: "the Chair refused the proposal".into(),
                }
            }
        }
    }

    fn experimented(&mut self, round: u32, passed: bool, end: ExperimentEnd) {
        let must_end = |code: String, reason: &str| Phase::MustEnd {
            code,
            reason: reason.into(),
        };
        match end {
            ExperimentEnd::Completed if passed => self.phase = Phase::AwaitConclude,
            ExperimentEnd::Completed | ExperimentEnd::StepFailed => self.begin_round(
                round + 1,
                vec![
                    EvidenceKind::ExecutionRecord,
                    EvidenceKind::VerifierResult,
                    EvidenceKind::Observations,
                ],
            ),
            ExperimentEnd::Refused { code } => {
                self.phase = must_end(code, "a step of the experiment was refused")
            }
            ExperimentEnd::NotCreated { code } => {
                self.phase = must_end(
                    code.unwrap_or_else(|| NOT_CREATED.into()),
                    "the experiment's instance was not created",
                )
            }
            ExperimentEnd::Unknown => {
                self.phase = must_end(
                    OUTCOME_UNKNOWN.into(),
                    "a step's outcome is unknown; the loop does not try again",
                )
            }
        }
    }

    /// What Room mechanics demand next.
    pub fn next(&self) -> Next {
        match &self.phase {
            Phase::Fresh => Next::Open,
            &Phase::AwaitTurn { round, role } => Next::OpenTurn { round, role },
            &Phase::InTurn {
                round,
                role: Role::Solver,
            } => Next::SolverPassage {
                round,
                evidence: self.evidence.clone(),
            },
            &Phase::InTurn {
                round,
                role: Role::Reviewer,
            } => Next::ReviewerPassage {
                round,
                candidate_digest: self
                    .proposal
                    .as_ref()
                    .map(|p| p.candidate_digest)
                    .unwrap_or(Sha256Digest::from_bytes([0; 32])),
            },
            &Phase::AwaitProposal { round, answer } => Next::Proposal {
                round,
                answer_digest: answer,
            },
            &Phase::AwaitReview {
                round,
                candidate,
                answer,
            } => Next::Review {
                round,
                candidate_digest: candidate,
                answer_digest: answer,
            },
            &Phase::AwaitChair { round, candidate } => Next::Chair {
                round,
                candidate_digest: candidate,
            },
            &Phase::AwaitExperiment { round, plan } => Next::Experiment {
                round,
                n: self.experiments.len() as u32 + 1,
                plan_digest: plan,
            },
            Phase::AwaitConclude => Next::Conclude,
            Phase::MustEnd { code, reason } => Next::End {
                code: code.clone(),
                reason: reason.clone(),
            },
            Phase::Done(end) => Next::Done(end.clone()),
        }
    }

    /// The evidence kinds the passage `next` demands gets, in the flow's order, before the
    /// turn's own `evidence` filter ([`admitted_by`]): the round's evidence for either role
    /// (the Reviewer reads the same evidence as the Solver), none for anything else.
    pub fn evidence_kinds_for(&self, next: &Next) -> Vec<EvidenceKind> {
        match next {
            Next::SolverPassage { .. } | Next::ReviewerPassage { .. } => self.evidence.clone(),
            _ => Vec::new(),
        }
    }

    /// `Some(Next::End { room/wall-exhausted })` when `now_ms` is past the budget's wall time
    /// since the `opened` fact, and the Room is still open.
    pub fn over_wall(&self, now_ms: i64) -> Option<Next> {
        if self.opened.is_none() || matches!(self.phase, Phase::Done(_)) {
            return None;
        }
        let limit =
            i64::try_from(self.budget().max_wall_s.saturating_mul(1000)).unwrap_or(i64::MAX);
        (now_ms.saturating_sub(self.opened_at_ms) > limit).then(|| Next::End {
            code: WALL_EXHAUSTED.into(),
            reason: format!(
                "more than {} s since the room opened",
                self.budget().max_wall_s
            ),
        })
    }

    /// Whether a revision could still be answered: the current round is not the last.
    pub fn rounds_left(&self) -> bool {
        self.round() < self.budget().max_rounds
    }

    /// The current round (0 before the Room opened).
    pub fn round(&self) -> u32 {
        match self.phase {
            Phase::AwaitTurn { round, .. }
            | Phase::InTurn { round, .. }
            | Phase::AwaitProposal { round, .. }
            | Phase::AwaitReview { round, .. }
            | Phase::AwaitChair { round, .. }
            | Phase::AwaitExperiment { round, .. } => round,
            _ => self.proposal.as_ref().map(|p| p.round).unwrap_or(0),
        }
    }

    pub fn id(&self) -> Option<&RunId> {
        self.id.as_ref()
    }

    pub fn opened(&self) -> Option<&Opened> {
        self.opened.as_ref()
    }

    /// The `seq` the next fact must carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The digest of the last fact applied (the next fact's `prev`).
    pub fn head(&self) -> Option<Sha256Digest> {
        self.head
    }

    /// The latest proposal.
    pub fn proposal(&self) -> Option<&Proposal> {
        self.proposal.as_ref()
    }

    /// The latest review (of [`Room::proposal`] once recorded).
    pub fn review(&self) -> Option<&ReviewFact> {
        self.review.as_ref()
    }

    /// The latest Chair decision.
    pub fn decision(&self) -> Option<&ChairDecision> {
        self.decision.as_ref()
    }

    /// Every experiment, in order.
    pub fn experiments(&self) -> &[ExperimentFact] {
        &self.experiments
    }

    /// The candidate bytes of the latest admitted proposal.
    pub fn admitted_candidate(&self) -> Option<&str> {
        self.admitted.as_ref().map(|p| p.candidate.as_str())
    }

    /// The latest admitted proposal.
    pub fn admitted(&self) -> Option<&Proposal> {
        self.admitted.as_ref()
    }
}

/// The kinds of `kinds` that `turn`'s `evidence` lists, in `kinds`' order: a turn is given
/// only kinds its flow lists.
pub fn admitted_by(kinds: &[EvidenceKind], turn: &Turn) -> Vec<EvidenceKind> {
    kinds
        .iter()
        .copied()
        .filter(|k| turn.evidence.contains(k))
        .collect()
}

fn describe(p: &Phase) -> String {
    match p {
        Phase::Fresh => "its opening".into(),
        Phase::AwaitTurn { round, role } => format!("the {} turn of round {round}", role.name()),
        Phase::InTurn { round, role } => format!("the {} passage of round {round}", role.name()),
        Phase::AwaitProposal { round, .. } => format!("the proposal of round {round}"),
        Phase::AwaitReview { round, .. } => format!("the review of round {round}"),
        Phase::AwaitChair { round, .. } => format!("the Chair's decision of round {round}"),
        Phase::AwaitExperiment { round, .. } => format!("the experiment of round {round}"),
        Phase::AwaitConclude => "its conclusion".into(),
        Phase::MustEnd { code, .. } => format!("its end with `{code}`"),
        Phase::Done(_) => "nothing".into(),
    }
}
