//! Property tests of the intent and turn state machines: no path reaches a second send, and no
//! terminal state ever changes. One property runs on the pure transition table; the other drives
//! random operation sequences from several claimers against a real vault on each backend.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use common::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use reach_phylactery::*;

proptest! {
    #[test]
    fn transition_table_never_resends(targets in proptest::collection::vec(0usize..IntentState::ALL.len(), 0..40)) {
        let mut s = IntentState::Pending;
        let mut entered_submitting = 0;
        for t in targets {
            let to = IntentState::ALL[t];
            if s.can_become(to) {
                if s.is_settled() {
                    prop_assert!(false, "settled {s} moved to {to}");
                }
                if to == IntentState::Submitting {
                    entered_submitting += 1;
                }
                if s.may_have_sent() {
                    prop_assert!(to.may_have_sent(), "{s} -> {to} would hand out a possible send");
                }
                s = to;
            }
        }
        prop_assert!(entered_submitting <= 1);
    }

    #[test]
    fn terminal_turns_stay(targets in proptest::collection::vec(0usize..TurnState::ALL.len(), 0..20)) {
        let mut s = TurnState::Open;
        let mut terminations = 0;
        for t in targets {
            let to = TurnState::ALL[t];
            if s.can_become(to) {
                terminations += 1;
                s = to;
            }
        }
        prop_assert!(terminations <= 1);
    }
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0usize..3).prop_map(Op::Claim),
        3 => (0usize..3).prop_map(Op::Submit),
        2 => (0usize..3).prop_map(Op::SettleSent),
        1 => (0usize..3).prop_map(Op::SettleRejected),
        1 => (0usize..3).prop_map(Op::SettleUnknown),
        2 => (0u64..45).prop_map(Op::Advance),
        1 => Just(Op::Recover),
        1 => Just(Op::ReconcileFound),
        1 => Just(Op::ReconcileAbsent),
        1 => Just(Op::RecommitTurn),
    ]
}

async fn run_case(
    p: &Phylactery,
    clock: &ManualClock,
    n: u64,
    ops: Vec<Op>,
) -> Result<(), TestCaseError> {
    let turn = p.admit(&request(n)).await.unwrap().status().turn_id.clone();
    p.commit_turn(&turn, &success(n)).await.unwrap();
    let mut claimers = Claimers::default();
    let mut settled: HashMap<IntentId, IntentState> = HashMap::new();
    let mut last_gen: HashMap<IntentId, i64> = HashMap::new();
    for op in ops {
        let current = p
            .intents_of_turn(&turn)
            .await
            .unwrap()
            .last()
            .unwrap()
            .intent_id
            .clone();
        if let Op::RecommitTurn = op {
            let mut c = success(n);
            c.outcome = TurnState::Failed;
            prop_assert_eq!(
                p.commit_turn(&turn, &c).await.unwrap_err().code(),
                "turn/already-terminal"
            );
        }
        claimers.apply(p, clock, &current, &op).await;
        prop_assert_eq!(p.turn_state(&turn).await.unwrap(), TurnState::Succeeded);
        let intents = p.intents_of_turn(&turn).await.unwrap();
        let mut possibly_sent = 0;
        for i in &intents {
            if let Some(prev) = settled.get(&i.intent_id) {
                prop_assert_eq!(*prev, i.state, "a settled intent changed");
            }
            if i.state.is_settled() {
                settled.insert(i.intent_id.clone(), i.state);
            }
            let g = last_gen.entry(i.intent_id.clone()).or_insert(0);
            prop_assert!(i.generation >= *g, "generation went back");
            *g = i.generation;
            if matches!(
                i.state,
                IntentState::Submitting | IntentState::Unknown | IntentState::KnownSent
            ) {
                possibly_sent += 1;
            }
        }
        // At most one intent of a turn may have produced the effect; a successor exists only after
        // its predecessor was proved absent.
        prop_assert!(possibly_sent <= 1, "{intents:?}");
    }
    for (id, count) in claimers.sends {
        prop_assert!(
            count <= 1,
            "intent {id} was handed out for sending {count} times"
        );
    }
    Ok(())
}

fn random_operation_sequences(db: Db) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (p, clock, _g) = rt.block_on(open(db, "machines"));
    let cases = match db {
        Db::Sqlite => 96,
        Db::Postgres => 64,
    };
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let n = AtomicU64::new(1_000);
    runner
        .run(&proptest::collection::vec(op(), 1..40), |ops| {
            rt.block_on(run_case(&p, &clock, n.fetch_add(1, Ordering::Relaxed), ops))
        })
        .unwrap();
}

#[test]
fn random_operation_sequences_sqlite() {
    random_operation_sequences(Db::Sqlite);
}

#[test]
fn random_operation_sequences_postgres() {
    random_operation_sequences(Db::Postgres);
}
