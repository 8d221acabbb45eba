//! The run journal (issue 30 item 1), each test on SQLite and on PostgreSQL: an experiment and
//! its steps follow their transition tables and nothing else; a refused move writes nothing;
//! a step is granted and started only while its experiment runs steps; a run with an
//! unfinished experiment is neither concluded nor ended; after a restart the unfinished
//! experiments and their STARTED steps are there to recover; the database alone refuses the
//! same moves.

mod common;

use std::sync::Arc;

use common::*;
use reach_digest::Sha256Digest;
use reach_phylactery::*;

const RUN: &str = "run-0a1b2c";
const EXP: &str = "run-0a1b2c-e1";

fn code<T: std::fmt::Debug>(r: Result<T>) -> &'static str {
    r.expect_err("expected a refusal").code()
}

async fn with_run(p: &Phylactery) {
    p.run_open(&NewRun {
        run_id: RUN.into(),
        pack: "app-local".into(),
        pack_generation: 3,
        goal_digest: Sha256Digest::of("goal"),
        goal: "goal".into(),
        opened_at: T0,
    })
    .await
    .unwrap();
}

fn experiment(id: &str, n: u32, steps: u32) -> NewExperiment {
    NewExperiment {
        experiment_id: id.into(),
        run_id: RUN.into(),
        n,
        plan_digest: Sha256Digest::of(format!("plan {id}")),
        steps: (0..steps)
            .map(|i| NewStep {
                index: i,
                digest: Sha256Digest::of(format!("step {i}")),
                kind: if i + 1 == steps { "verify" } else { "patch" }.into(),
            })
            .collect(),
    }
}

fn record(i: u32) -> Option<Sha256Digest> {
    Some(Sha256Digest::of(format!("record {i}")))
}

/// Grants, starts and applies step `i`.
async fn apply(p: &Phylactery, i: u32) {
    p.step_move(EXP, i, StepState::Granted, None, None)
        .await
        .unwrap();
    p.step_move(EXP, i, StepState::Started, None, None)
        .await
        .unwrap();
    p.step_move(EXP, i, StepState::Applied, record(i), None)
        .await
        .unwrap();
}

async fn an_experiment_runs_to_its_outcome(db: Db) {
    let (p, _clock, _g) = open(db, "journal_outcome").await;
    with_run(&p).await;
    let opened = p.experiment_open(&experiment(EXP, 1, 3)).await.unwrap();
    assert_eq!(opened.state, ExperimentState::Creating);
    assert_eq!(opened.instance_id, None);
    let steps = p.steps(EXP).await.unwrap();
    assert_eq!(steps.len(), 3);
    assert!(steps.iter().all(|s| s.state == StepState::Pending));
    assert_eq!(steps[2].step_digest, Sha256Digest::of("step 2"));
    assert_eq!(
        (steps[0].kind.as_str(), steps[2].kind.as_str()),
        ("patch", "verify")
    );

    // No step is granted before the instance exists.
    assert_eq!(
        code(p.step_move(EXP, 0, StepState::Granted, None, None).await),
        "journal/invalid-transition"
    );
    let running = p
        .experiment_move(EXP, ExperimentState::Running, Some("inst-1"), None)
        .await
        .unwrap();
    assert_eq!(running.instance_id.as_deref(), Some("inst-1"));
    apply(&p, 0).await;
    // Step 1's record is kept with its outcome, for a run resumed after a restart.
    p.step_move(EXP, 1, StepState::Granted, None, None)
        .await
        .unwrap();
    p.step_move(EXP, 1, StepState::Started, None, None)
        .await
        .unwrap();
    let ran = p.step_ran(EXP, 1, true, b"{\"step\":1}").await.unwrap();
    assert_eq!(
        (ran.state, ran.record_digest),
        (StepState::Applied, Some(Sha256Digest::of(b"{\"step\":1}")))
    );
    assert_eq!(
        p.step_record(EXP, 1).await.unwrap().as_deref(),
        Some(&b"{\"step\":1}"[..])
    );
    assert_eq!(p.step_record(EXP, 0).await.unwrap(), None, "digest only");
    assert_eq!(
        code(p.step_ran(EXP, 1, true, b"again").await),
        "journal/invalid-transition"
    );
    // A step never runs twice, and never skips a state.
    assert_eq!(
        code(p.step_move(EXP, 1, StepState::Started, None, None).await),
        "journal/invalid-transition"
    );
    assert_eq!(
        code(p.step_move(EXP, 2, StepState::Started, None, None).await),
        "journal/invalid-transition"
    );
    assert_eq!(
        code(p.step_move(EXP, 9, StepState::Granted, None, None).await),
        "journal/step-missing"
    );
    p.experiment_move(EXP, ExperimentState::Verifying, None, None)
        .await
        .unwrap();
    apply(&p, 2).await;
    // The run is not concluded while the experiment is unfinished, and nothing was written.
    assert_eq!(
        code(p.run_conclude(RUN, T0).await),
        "journal/experiment-unfinished"
    );
    assert_eq!(p.run(RUN).await.unwrap().unwrap().state, RunState::Open);
    let done = p
        .experiment_move(EXP, ExperimentState::Succeeded, None, None)
        .await
        .unwrap();
    assert_eq!(done.state, ExperimentState::Succeeded);
    assert_eq!(done.instance_id.as_deref(), Some("inst-1"), "kept");
    // An outcome is final.
    for to in ExperimentState::ALL {
        assert_eq!(
            code(p.experiment_move(EXP, *to, None, None).await),
            "journal/invalid-transition",
            "{to}"
        );
    }
    assert!(p.experiments_unfinished().await.unwrap().is_empty());
    p.run_conclude(RUN, T0).await.unwrap();
    let steps = p.steps(EXP).await.unwrap();
    assert!(steps.iter().all(|s| s.state == StepState::Applied));
    assert_eq!(steps[2].record_digest, record(2));
    // The goal is kept beside its digest, so core can resume the run.
    assert_eq!(
        p.run(RUN).await.unwrap().unwrap().goal.as_deref(),
        Some("goal")
    );
    let mut other = NewRun {
        run_id: "run-other".into(),
        pack: "app-local".into(),
        pack_generation: 3,
        goal_digest: Sha256Digest::of("goal"),
        goal: "another goal".into(),
        opened_at: T0,
    };
    assert_eq!(code(p.run_open(&other).await), "ledger/invalid-input");
    other.goal = String::new();
    other.goal_digest = Sha256Digest::of("");
    assert_eq!(code(p.run_open(&other).await), "ledger/invalid-input");
    assert_eq!(p.run("run-other").await.unwrap(), None, "nothing written");
    p.close().await;
}

async fn bad_moves_are_refused_and_write_nothing(db: Db) {
    let (p, _clock, _g) = open(db, "journal_refusals").await;
    // Without an open run.
    assert_eq!(
        code(p.experiment_open(&experiment(EXP, 1, 2)).await),
        "room/run-missing"
    );
    with_run(&p).await;
    p.experiment_open(&experiment(EXP, 1, 2)).await.unwrap();
    assert_eq!(
        code(p.experiment_open(&experiment(EXP, 2, 2)).await),
        "journal/experiment-exists"
    );
    assert_eq!(
        code(
            p.experiment_open(&experiment("run-0a1b2c-other", 1, 2))
                .await
        ),
        "journal/experiment-exists",
        "one experiment per number"
    );
    assert_eq!(
        code(
            p.experiment_move("nope", ExperimentState::Running, Some("i"), None)
                .await
        ),
        "journal/experiment-missing"
    );
    // CREATING cannot verify, succeed or be destroyed without a pending rollback.
    for to in [
        ExperimentState::Verifying,
        ExperimentState::Succeeded,
        ExperimentState::Destroyed,
    ] {
        assert_eq!(
            code(p.experiment_move(EXP, to, Some("i"), None).await),
            "journal/invalid-transition"
        );
    }
    let row = p.experiment(EXP).await.unwrap().unwrap();
    assert_eq!(
        (row.state, row.instance_id.as_deref()),
        (ExperimentState::Creating, None),
        "a refused move wrote nothing"
    );
    p.experiment_move(EXP, ExperimentState::Running, Some("inst-1"), None)
        .await
        .unwrap();
    // The instance id never changes.
    assert_eq!(
        code(
            p.experiment_move(
                EXP,
                ExperimentState::RollbackPending,
                Some("inst-2"),
                Some("x/y")
            )
            .await
        ),
        "ledger/invalid-input"
    );
    // An applied step names its record.
    p.step_move(EXP, 0, StepState::Granted, None, None)
        .await
        .unwrap();
    p.step_move(EXP, 0, StepState::Started, None, None)
        .await
        .unwrap();
    assert_eq!(
        code(p.step_move(EXP, 0, StepState::Applied, None, None).await),
        "ledger/invalid-input"
    );
    assert_eq!(
        p.steps(EXP).await.unwrap()[0].state,
        StepState::Started,
        "nothing written"
    );
    p.close().await;
}

async fn a_lost_outcome_is_recovered_once(db: Db) {
    let (cfg, _g) = config(db, "journal_restart");
    let clock = ManualClock::new(T0);
    let p = Phylactery::open(cfg.clone(), Arc::new(clock.clone()))
        .await
        .unwrap();
    genesis(&p).await;
    with_run(&p).await;
    p.experiment_open(&experiment(EXP, 1, 3)).await.unwrap();
    p.experiment_move(EXP, ExperimentState::Running, Some("inst-1"), None)
        .await
        .unwrap();
    apply(&p, 0).await;
    p.step_move(EXP, 1, StepState::Granted, None, None)
        .await
        .unwrap();
    p.step_move(EXP, 1, StepState::Started, None, None)
        .await
        .unwrap();
    p.close().await;
    drop(p);

    // The process died with step 1 STARTED: it may have reached the guest.
    let p = Phylactery::open(cfg, Arc::new(clock.clone()))
        .await
        .unwrap();
    let unfinished = p.experiments_unfinished().await.unwrap();
    assert_eq!(unfinished.len(), 1);
    assert_eq!(unfinished[0].state, ExperimentState::Running);
    let steps = p.steps(EXP).await.unwrap();
    assert_eq!(
        steps.iter().map(|s| s.state).collect::<Vec<_>>(),
        [StepState::Applied, StepState::Started, StepState::Pending]
    );
    p.step_move(EXP, 1, StepState::Unknown, None, Some("task/interrupted"))
        .await
        .unwrap();
    // An unknown step is never started again, nor settled otherwise.
    for to in StepState::ALL {
        assert_eq!(
            code(p.step_move(EXP, 1, *to, record(1), None).await),
            "journal/invalid-transition",
            "{to}"
        );
    }
    p.experiment_move(
        EXP,
        ExperimentState::RollbackPending,
        None,
        Some("task/interrupted"),
    )
    .await
    .unwrap();
    // Nothing final while the destruction is not confirmed; no step runs.
    assert_eq!(
        code(p.run_end(RUN, "task/interrupted", T0).await),
        "journal/experiment-unfinished"
    );
    assert_eq!(
        code(p.step_move(EXP, 2, StepState::Granted, None, None).await),
        "journal/invalid-transition"
    );
    let destroyed = p
        .experiment_move(EXP, ExperimentState::Destroyed, None, None)
        .await
        .unwrap();
    assert_eq!(destroyed.code.as_deref(), Some("task/interrupted"), "kept");
    assert_eq!(
        code(
            p.experiment_move(EXP, ExperimentState::Destroyed, None, None)
                .await
        ),
        "journal/invalid-transition",
        "destroyed once"
    );
    assert!(p.experiments_unfinished().await.unwrap().is_empty());
    p.run_end(RUN, "task/interrupted", T0).await.unwrap();
    assert_eq!(p.experiments(RUN).await.unwrap(), vec![destroyed]);
    p.close().await;
}

async fn the_database_alone_holds_the_rules(db: Db) {
    let (cfg, _g) = config(db, "journal_guards");
    let clock = ManualClock::new(T0);
    let p = Phylactery::open(cfg.clone(), Arc::new(clock.clone()))
        .await
        .unwrap();
    with_run(&p).await;
    let seq0 = p.commit_seq().await.unwrap();
    p.experiment_open(&experiment(EXP, 1, 2)).await.unwrap();
    p.experiment_move(EXP, ExperimentState::Running, Some("inst-1"), None)
        .await
        .unwrap();
    p.step_move(EXP, 0, StepState::Granted, None, None)
        .await
        .unwrap();
    assert!(p.commit_seq().await.unwrap() > seq0, "writes advance it");
    p.close().await;

    let raw = Raw::of(&cfg).await;
    let cases: [(&'static str, &str); 11] = [
        // A granted step is not unknown without being started: it never left core.
        (
            "UPDATE run_steps SET state = 'UNKNOWN' WHERE step_index = 0",
            "journal/invalid-transition",
        ),
        (
            "UPDATE task_runs SET goal = 'another goal'",
            "ledger/immutable-identity",
        ),
        (
            "UPDATE run_steps SET state = 'APPLIED', record_digest =
                'sha256:0000000000000000000000000000000000000000000000000000000000000000'
             WHERE step_index = 0",
            "journal/invalid-transition",
        ),
        (
            "UPDATE run_steps SET state = 'STARTED' WHERE step_index = 1",
            "journal/invalid-transition",
        ),
        (
            "UPDATE run_steps SET step_digest =
                'sha256:1111111111111111111111111111111111111111111111111111111111111111'",
            "ledger/immutable-identity",
        ),
        (
            "UPDATE run_steps SET kind = 'run'",
            "ledger/immutable-identity",
        ),
        (
            "UPDATE run_experiments SET state = 'DESTROYED'",
            "journal/invalid-transition",
        ),
        (
            "UPDATE run_experiments SET instance_id = 'inst-2'",
            "ledger/immutable-identity",
        ),
        ("DELETE FROM run_steps", "ledger/append-only"),
        ("DELETE FROM run_experiments", "ledger/append-only"),
        (
            "UPDATE run_experiments SET state = 'SUCCEEDED'",
            "journal/invalid-transition",
        ),
    ];
    for (sql, want) in cases {
        match raw.refused(sql).await {
            Some(e) => assert!(e.contains(want), "{sql}: {e}"),
            None => panic!("{sql} was accepted"),
        }
    }
    // The legal moves are accepted by the database too: a grant never sent fails (step 1).
    assert_eq!(
        raw.refused("UPDATE run_steps SET state = 'STARTED' WHERE step_index = 0")
            .await,
        None
    );
    for sql in [
        "UPDATE run_steps SET state = 'GRANTED' WHERE step_index = 1",
        "UPDATE run_steps SET state = 'FAILED', code = 'task/interrupted' WHERE step_index = 1",
    ] {
        assert_eq!(raw.refused(sql).await, None, "{sql}");
    }
    raw.close().await;
}

on_both!(
    an_experiment_runs_to_its_outcome,
    bad_moves_are_refused_and_write_nothing,
    a_lost_outcome_is_recovered_once,
    the_database_alone_holds_the_rules,
);

#[test]
fn the_rust_tables_are_the_documented_machines() {
    use ExperimentState::*;
    assert!(Creating.can_become(RollbackPending) && RollbackPending.can_become(Destroyed));
    for s in [Succeeded, VerificationFailed, Failed, Refused, Destroyed] {
        assert!(s.is_terminal(), "{s}");
    }
    for s in [Creating, Running, Verifying, RollbackPending] {
        assert!(!s.is_terminal(), "{s}");
    }
    assert!(!Running.can_become(Succeeded), "only the verifier succeeds");
    assert!(StepState::Started.can_become(StepState::Unknown));
    assert!(
        StepState::Granted.can_become(StepState::Failed),
        "a grant never sent"
    );
    for to in [StepState::Applied, StepState::Unknown, StepState::Pending] {
        assert!(!StepState::Granted.can_become(to), "{to}");
    }
    assert!(!StepState::Unknown.can_become(StepState::Started));
    assert!(!StepState::Pending.can_become(StepState::Started));
}
