//! Task runs and their Room (issue 37 item 1), each test on SQLite and on PostgreSQL: a run's
//! fact chain round trips its bytes exactly; an out-of-order, chain-breaking, duplicate or
//! orphan append, a second end and an end after conclusion are refused and write nothing;
//! passages go SUBMITTING then settle once, and the unsettled ones are listed for recovery;
//! records are idempotent and never overwritten; runs list newest first; two concurrent appends
//! of one seq have exactly one winner; a restart keeps everything.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use reach_digest::Sha256Digest;
use reach_phylactery::*;

const RUN: &str = "run-0a1b2c";

fn new_run(id: &str, at: UnixMillis) -> NewRun {
    NewRun {
        run_id: id.into(),
        pack: "app-local".into(),
        pack_generation: 3,
        goal_digest: Sha256Digest::of(format!("goal {id}")),
        goal: format!("goal {id}"),
        opened_at: at,
    }
}

/// Fact `seq` of a chain whose previous digest is `prev`; the bytes include every byte value.
fn fact(seq: u64, prev: Option<Sha256Digest>, tag: &str) -> StoredFact {
    let mut bytes: Vec<u8> = (0..=255u8).collect();
    bytes.extend_from_slice(format!("fact {seq} {tag}").as_bytes());
    StoredFact {
        seq,
        digest: Sha256Digest::of(&bytes),
        prev_digest: prev,
        kind: if seq == 0 { "opened" } else { "turn" }.into(),
        bytes,
        signature: format!("ed25519:{seq:064x}"),
        key_id: "ward-room-1".into(),
        at: UnixMillis(T0.0 + seq as i64),
    }
}

/// Appends facts 0..n and returns them.
async fn chain(p: &Phylactery, run: &str, n: u64) -> Vec<StoredFact> {
    let mut out: Vec<StoredFact> = Vec::new();
    for seq in 0..n {
        let f = fact(seq, out.last().map(|f| f.digest), "a");
        p.fact_append(run, &f).await.unwrap();
        out.push(f);
    }
    out
}

fn code<T: std::fmt::Debug>(r: Result<T>) -> &'static str {
    r.expect_err("expected a refusal").code()
}

fn passage(n: u32) -> NewPassage {
    NewPassage {
        attempt_id: format!("att-{n}"),
        run_id: RUN.into(),
        round: n,
        role: if n.is_multiple_of(2) {
            "builder"
        } else {
            "reviewer"
        }
        .into(),
        payload_digest: Sha256Digest::of(format!("payload {n}")),
        decision_id: format!("dec-{n}"),
    }
}

fn record(kind: RecordKind, n: u32, body: &str) -> StoredRecord {
    StoredRecord {
        run_id: RUN.into(),
        kind,
        n,
        digest: Sha256Digest::of(body),
        bytes: body.as_bytes().to_vec(),
        signature: format!("ed25519:sig-{body}"),
        key_id: "ward-room-1".into(),
        at: T0,
    }
}

async fn facts_round_trip_exactly(db: Db) {
    let (p, _clock, _g) = open(db, "room_facts").await;
    assert!(p.run(RUN).await.unwrap().is_none());
    let opened = p.run_open(&new_run(RUN, T0)).await.unwrap();
    assert_eq!(opened.state, RunState::Open);
    assert_eq!(p.run(RUN).await.unwrap().unwrap(), opened);
    assert!(p.facts(RUN).await.unwrap().is_empty());

    let written = chain(&p, RUN, 6).await;
    let read = p.facts(RUN).await.unwrap();
    assert_eq!(
        read, written,
        "every field, the bytes exactly, in seq order"
    );
    assert_eq!(read[0].prev_digest, None);
    for w in read.windows(2) {
        assert_eq!(w[1].prev_digest, Some(w[0].digest));
    }

    // The Concluded fact goes in while open, then the run is concluded.
    let last = fact(6, Some(written[5].digest), "concluded");
    p.fact_append(RUN, &last).await.unwrap();
    let concluded = p.run_conclude(RUN, UnixMillis(T0.0 + 100)).await.unwrap();
    assert_eq!(concluded.state, RunState::Concluded);
    assert_eq!(concluded.end_code, None);
    assert_eq!(concluded.ended_at, Some(UnixMillis(T0.0 + 100)));
    assert_eq!(p.run(RUN).await.unwrap().unwrap(), concluded);
    assert_eq!(p.facts(RUN).await.unwrap().len(), 7);
    p.close().await;
}

async fn bad_appends_are_refused_and_write_nothing(db: Db) {
    let (p, _clock, _g) = open(db, "room_bad_appends").await;
    // A missing run.
    assert_eq!(
        code(p.fact_append(RUN, &fact(0, None, "a")).await),
        "room/run-missing"
    );
    assert!(p.facts(RUN).await.unwrap().is_empty());

    p.run_open(&new_run(RUN, T0)).await.unwrap();
    // The first fact is seq 0, and it names no predecessor.
    assert_eq!(
        code(p.fact_append(RUN, &fact(1, None, "a")).await),
        "room/out-of-order"
    );
    assert_eq!(
        code(
            p.fact_append(RUN, &fact(0, Some(Sha256Digest::of("x")), "a"))
                .await
        ),
        "room/chain-broken"
    );
    assert!(p.facts(RUN).await.unwrap().is_empty());

    let written = chain(&p, RUN, 3).await;
    let tip = written[2].digest;
    // A gap, a duplicate seq, an older seq.
    for seq in [4, 2, 1, 0] {
        let prev = (seq > 0).then_some(tip);
        assert_eq!(
            code(p.fact_append(RUN, &fact(seq, prev, "b")).await),
            "room/out-of-order",
            "seq {seq}"
        );
    }
    // The right seq naming a wrong (or no) predecessor.
    assert_eq!(
        code(
            p.fact_append(RUN, &fact(3, Some(written[1].digest), "b"))
                .await
        ),
        "room/chain-broken"
    );
    assert_eq!(
        code(p.fact_append(RUN, &fact(3, None, "b")).await),
        "room/chain-broken"
    );
    assert_eq!(p.facts(RUN).await.unwrap(), written, "nothing was written");

    // The chain goes on where it was.
    p.fact_append(RUN, &fact(3, Some(tip), "b")).await.unwrap();
    assert_eq!(p.facts(RUN).await.unwrap().len(), 4);
    p.close().await;
}

async fn a_run_ends_once(db: Db) {
    let (p, _clock, _g) = open(db, "room_run_end").await;
    assert_eq!(
        code(p.run_end(RUN, "room/aborted", T0).await),
        "room/run-missing"
    );
    p.run_open(&new_run(RUN, T0)).await.unwrap();
    assert_eq!(
        code(p.run_open(&new_run(RUN, UnixMillis(T0.0 + 5))).await),
        "room/run-exists"
    );
    assert_eq!(p.runs(10).await.unwrap().len(), 1);
    let written = chain(&p, RUN, 2).await;

    let ended = p
        .run_end(RUN, "room/operator-stopped", UnixMillis(T0.0 + 9))
        .await
        .unwrap();
    assert_eq!(ended.state, RunState::Ended);
    assert_eq!(ended.end_code.as_deref(), Some("room/operator-stopped"));
    assert_eq!(ended.ended_at, Some(UnixMillis(T0.0 + 9)));

    // A second end, a conclusion after the end, an append after it: refused, nothing changes.
    assert_eq!(
        code(p.run_end(RUN, "room/other", UnixMillis(T0.0 + 10)).await),
        "room/run-not-open"
    );
    assert_eq!(
        code(p.run_conclude(RUN, UnixMillis(T0.0 + 10)).await),
        "room/run-not-open"
    );
    assert_eq!(
        code(
            p.fact_append(RUN, &fact(2, Some(written[1].digest), "late"))
                .await
        ),
        "room/run-not-open"
    );
    assert_eq!(p.run(RUN).await.unwrap().unwrap(), ended);
    assert_eq!(p.facts(RUN).await.unwrap(), written);

    // End from concluded.
    let other = "run-ff00";
    p.run_open(&new_run(other, T0)).await.unwrap();
    let concluded = p.run_conclude(other, UnixMillis(T0.0 + 3)).await.unwrap();
    assert_eq!(
        code(p.run_end(other, "room/late", UnixMillis(T0.0 + 4)).await),
        "room/run-not-open"
    );
    assert_eq!(p.run(other).await.unwrap().unwrap(), concluded);
    assert_eq!(
        code(p.fact_append(other, &fact(0, None, "a")).await),
        "room/run-not-open"
    );
    assert!(p.facts(other).await.unwrap().is_empty());
    p.close().await;
}

async fn passages_settle_once(db: Db) {
    let (p, clock, _g) = open(db, "room_passages").await;
    assert_eq!(
        code(p.passage_submitting(&passage(0)).await),
        "room/run-missing"
    );
    p.run_open(&new_run(RUN, T0)).await.unwrap();
    let sub = p.passage_submitting(&passage(0)).await.unwrap();
    assert_eq!(sub.state, PassageState::Submitting);
    assert_eq!(p.passage("att-0").await.unwrap().unwrap(), sub);
    assert_eq!(
        code(p.passage_submitting(&passage(0)).await),
        "room/passage-exists"
    );
    let mut reused = passage(9);
    reused.decision_id = "dec-0".into();
    assert_eq!(
        code(p.passage_submitting(&reused).await),
        "room/decision-reused"
    );
    clock.advance(Duration::from_millis(10));
    p.passage_submitting(&passage(1)).await.unwrap();
    clock.advance(Duration::from_millis(10));
    p.passage_submitting(&passage(2)).await.unwrap();
    assert_eq!(
        p.passages_unsettled()
            .await
            .unwrap()
            .iter()
            .map(|r| r.attempt_id.as_str())
            .collect::<Vec<_>>(),
        ["att-0", "att-1", "att-2"]
    );

    let answer = Sha256Digest::of("answer 0");
    clock.advance(Duration::from_millis(10));
    let settled = p
        .passage_settle(
            "att-0",
            &PassageSettlement::Answered {
                answer_digest: answer,
            },
        )
        .await
        .unwrap();
    assert_eq!(settled.state, PassageState::Answered);
    assert_eq!(settled.answer_digest, Some(answer));
    assert_eq!(settled.settled_at, Some(p.now()));
    // Settling twice, with the same or another outcome, is refused and changes nothing.
    for again in [
        PassageSettlement::Answered {
            answer_digest: answer,
        },
        PassageSettlement::Failed {
            code: "portal/timeout".into(),
        },
    ] {
        assert_eq!(
            code(p.passage_settle("att-0", &again).await),
            "room/passage-settled"
        );
    }
    assert_eq!(
        code(p.passage_mark_unknown("att-0").await),
        "room/passage-settled"
    );
    assert_eq!(p.passage("att-0").await.unwrap().unwrap(), settled);
    assert_eq!(
        code(
            p.passage_settle(
                "att-none",
                &PassageSettlement::Refused { code: "x/y".into() }
            )
            .await
        ),
        "room/passage-missing"
    );

    // What the call cost is written with the settlement, and read back.
    let cost = PassageCost {
        prompt_tokens: Some(1_234),
        completion_tokens: Some(56),
        wall_ms: Some(7_890),
    };
    let refused = p
        .passage_settle_costed(
            "att-1",
            &PassageSettlement::Refused {
                code: "quarantine/not-json".into(),
            },
            cost,
        )
        .await
        .unwrap();
    assert_eq!(refused.code.as_deref(), Some("quarantine/not-json"));
    assert_eq!(refused.cost, cost);
    assert_eq!(p.passage("att-1").await.unwrap().unwrap().cost, cost);
    assert_eq!(
        settled.cost,
        PassageCost::default(),
        "no usage said: none kept"
    );
    // Charged once: a second settlement, with another cost, is refused and changes nothing.
    assert_eq!(
        code(
            p.passage_settle_costed(
                "att-1",
                &PassageSettlement::Refused { code: "x/y".into() },
                PassageCost {
                    prompt_tokens: Some(1),
                    ..cost
                },
            )
            .await
        ),
        "room/passage-settled"
    );
    assert_eq!(p.passage("att-1").await.unwrap().unwrap().cost, cost);
    assert_eq!(
        p.passages_unsettled()
            .await
            .unwrap()
            .iter()
            .map(|r| r.attempt_id.as_str())
            .collect::<Vec<_>>(),
        ["att-2"]
    );
    // Recovery: the lost outcome becomes unknown, and is never settled by a late answer.
    let unknown = p.passage_mark_unknown("att-2").await.unwrap();
    assert_eq!(unknown.state, PassageState::Unknown);
    assert_eq!(
        code(
            p.passage_settle(
                "att-2",
                &PassageSettlement::Answered {
                    answer_digest: answer
                }
            )
            .await
        ),
        "room/passage-settled"
    );
    assert!(p.passages_unsettled().await.unwrap().is_empty());
    let all = p.passages(RUN).await.unwrap();
    assert_eq!(
        all.iter().map(|r| r.state).collect::<Vec<_>>(),
        [
            PassageState::Answered,
            PassageState::Refused,
            PassageState::Unknown
        ]
    );

    // No new passage once the run is not open.
    p.run_conclude(RUN, p.now()).await.unwrap();
    assert_eq!(
        code(p.passage_submitting(&passage(3)).await),
        "room/run-not-open"
    );
    assert_eq!(p.passages(RUN).await.unwrap().len(), 3);
    p.close().await;
}

async fn records_are_idempotent_and_never_overwritten(db: Db) {
    let (p, _clock, _g) = open(db, "room_records").await;
    let exec = record(RecordKind::ExecutionRecord, 0, "exec 0");
    assert_eq!(code(p.record_put(&exec).await), "room/run-missing");
    p.run_open(&new_run(RUN, T0)).await.unwrap();
    assert!(p.recipe(RUN).await.unwrap().is_none());
    assert!(p.record_put(&exec).await.unwrap());
    assert!(!p.record_put(&exec).await.unwrap(), "identical: idempotent");
    let conflicting = record(RecordKind::ExecutionRecord, 0, "exec 0 changed");
    assert_eq!(
        code(p.record_put(&conflicting).await),
        "room/record-conflict"
    );
    assert_eq!(p.records(RUN).await.unwrap(), std::slice::from_ref(&exec));

    // Records are stored after the run concluded too.
    p.run_conclude(RUN, UnixMillis(T0.0 + 1)).await.unwrap();
    let exec1 = record(RecordKind::ExecutionRecord, 1, "exec 1");
    let recipe = record(RecordKind::Recipe, 0, "recipe");
    assert!(p.record_put(&exec1).await.unwrap());
    assert!(p.record_put(&recipe).await.unwrap());
    assert_eq!(
        code(
            p.record_put(&record(RecordKind::Recipe, 0, "recipe 2"))
                .await
        ),
        "room/record-conflict"
    );
    assert_eq!(p.recipe(RUN).await.unwrap(), Some(recipe.clone()));
    assert_eq!(p.records(RUN).await.unwrap(), [exec, exec1, recipe]);
    p.close().await;
}

async fn runs_list_newest_first(db: Db) {
    let (p, _clock, _g) = open(db, "room_runs").await;
    assert!(p.runs(10).await.unwrap().is_empty());
    for (i, id) in ["run-03", "run-01", "run-02"].iter().enumerate() {
        p.run_open(&new_run(id, UnixMillis(T0.0 + 10 * i as i64)))
            .await
            .unwrap();
    }
    // Same open time: by id, descending.
    p.run_open(&new_run("run-00", UnixMillis(T0.0 + 20)))
        .await
        .unwrap();
    let ids = |rs: Vec<RunRow>| rs.into_iter().map(|r| r.run_id).collect::<Vec<_>>();
    assert_eq!(
        ids(p.runs(10).await.unwrap()),
        ["run-02", "run-00", "run-01", "run-03"]
    );
    assert_eq!(ids(p.runs(2).await.unwrap()), ["run-02", "run-00"]);
    assert!(p.runs(0).await.unwrap().is_empty());
    p.close().await;
}

async fn concurrent_appends_of_one_seq_have_one_winner(db: Db) {
    let (p, _clock, _g) = open(db, "room_race").await;
    for round in 0..8u64 {
        let run = format!("run-{round:02x}");
        p.run_open(&new_run(&run, T0)).await.unwrap();
        let written = chain(&p, &run, 1).await;
        let prev = Some(written[0].digest);
        let a = fact(1, prev, "left");
        let b = fact(1, prev, "right");
        let (ra, rb) = tokio::join!(
            {
                let p = p.clone();
                let run = run.clone();
                let a = a.clone();
                tokio::spawn(async move { p.fact_append(&run, &a).await })
            },
            {
                let p = p.clone();
                let run = run.clone();
                let b = b.clone();
                tokio::spawn(async move { p.fact_append(&run, &b).await })
            }
        );
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        assert!(ra.is_ok() != rb.is_ok(), "exactly one wins: {ra:?} {rb:?}");
        let loser = ra.err().or(rb.err()).unwrap();
        assert_eq!(loser.code(), "room/out-of-order");
        let stored = p.facts(&run).await.unwrap();
        assert_eq!(stored.len(), 2);
        assert!(stored[1] == a || stored[1] == b);
    }
    p.close().await;
}

async fn a_restart_keeps_everything(db: Db) {
    let (cfg, _g) = config(db, "room_restart");
    let clock = ManualClock::new(T0);
    let p = Phylactery::open(cfg.clone(), Arc::new(clock.clone()))
        .await
        .unwrap();
    genesis(&p).await;
    p.run_open(&new_run(RUN, T0)).await.unwrap();
    let written = chain(&p, RUN, 3).await;
    p.passage_submitting(&passage(0)).await.unwrap();
    let recipe = record(RecordKind::Recipe, 0, "recipe");
    p.record_put(&recipe).await.unwrap();
    let run = p.run(RUN).await.unwrap().unwrap();
    p.close().await;
    drop(p);

    // The process died between SUBMITTING and the settlement.
    let p = Phylactery::open(cfg, Arc::new(clock.clone()))
        .await
        .unwrap();
    assert_eq!(p.run(RUN).await.unwrap().unwrap(), run);
    assert_eq!(p.facts(RUN).await.unwrap(), written);
    assert_eq!(p.recipe(RUN).await.unwrap(), Some(recipe));
    let lost = p.passages_unsettled().await.unwrap();
    assert_eq!(lost.len(), 1);
    p.passage_mark_unknown(&lost[0].attempt_id).await.unwrap();
    assert!(p.passages_unsettled().await.unwrap().is_empty());
    p.fact_append(RUN, &fact(3, Some(written[2].digest), "after"))
        .await
        .unwrap();
    p.close().await;
}

async fn the_database_alone_holds_the_rules(db: Db) {
    let (cfg, _g) = config(db, "room_guards");
    let clock = ManualClock::new(T0);
    let p = Phylactery::open(cfg.clone(), Arc::new(clock.clone()))
        .await
        .unwrap();
    let seq0 = p.commit_seq().await.unwrap();
    p.run_open(&new_run(RUN, T0)).await.unwrap();
    chain(&p, RUN, 2).await;
    p.passage_submitting(&passage(0)).await.unwrap();
    p.passage_mark_unknown("att-0").await.unwrap();
    p.record_put(&record(RecordKind::Recipe, 0, "recipe"))
        .await
        .unwrap();
    assert!(
        p.commit_seq().await.unwrap() > seq0,
        "inserts advance the sequence"
    );
    p.close().await;

    let raw = Raw::of(&cfg).await;
    let cases: [(&'static str, &str); 9] = [
        // A fact that skips a seq (its predecessor's digest is no row's).
        (
            "INSERT INTO room_facts (run_id, seq, digest, prev_digest, kind, bytes, signature,
                key_id, at_ms) VALUES ('run-0a1b2c', 5,
                'sha256:0000000000000000000000000000000000000000000000000000000000000000',
                'sha256:0000000000000000000000000000000000000000000000000000000000000000',
                'turn', (SELECT bytes FROM room_facts WHERE seq = 0), 's', 'k', 0)",
            "room/chain-broken",
        ),
        ("UPDATE room_facts SET kind = 'other'", "ledger/append-only"),
        ("DELETE FROM room_facts", "ledger/append-only"),
        ("UPDATE room_records SET at_ms = 1", "ledger/append-only"),
        ("DELETE FROM task_runs", "ledger/append-only"),
        (
            "UPDATE room_passages SET state = 'answered', answer_digest =
                'sha256:0000000000000000000000000000000000000000000000000000000000000000'",
            "room/passage-settled",
        ),
        // A settled passage's cost is never rewritten.
        (
            "UPDATE room_passages SET prompt_tokens = 1",
            "room/passage-settled",
        ),
        (
            "UPDATE task_runs SET pack = 'other'",
            "ledger/immutable-identity",
        ),
        (
            "UPDATE task_runs SET state = 'ended', end_code = 'x/y', ended_at_ms = 1",
            "",
        ),
    ];
    for (sql, want) in cases {
        match raw.refused(sql).await {
            Some(e) => assert!(!want.is_empty() && e.contains(want), "{sql}: {e}"),
            None => assert!(want.is_empty(), "{sql} was accepted"),
        }
    }
    // Once ended, the run never moves again, and takes no fact.
    let again = raw
        .refused("UPDATE task_runs SET state = 'concluded', end_code = NULL")
        .await
        .unwrap();
    assert!(again.contains("room/run-not-open"), "{again}");
    let late = raw
        .refused(
            "INSERT INTO room_facts (run_id, seq, digest, prev_digest, kind, bytes, signature,
                key_id, at_ms) VALUES ('run-0a1b2c', 2,
                'sha256:0000000000000000000000000000000000000000000000000000000000000000',
                (SELECT digest FROM room_facts WHERE seq = 1), 'turn',
                (SELECT bytes FROM room_facts WHERE seq = 0), 's', 'k', 0)",
        )
        .await
        .unwrap();
    assert!(late.contains("room/run-not-open"), "{late}");
    raw.close().await;
}

on_both!(
    facts_round_trip_exactly,
    bad_appends_are_refused_and_write_nothing,
    a_run_ends_once,
    passages_settle_once,
    records_are_idempotent_and_never_overwritten,
    runs_list_newest_first,
    concurrent_appends_of_one_seq_have_one_winner,
    a_restart_keeps_everything,
    the_database_alone_holds_the_rules,
);
