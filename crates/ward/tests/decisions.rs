//! EgressDecisions: issued immediately before bytes, redeemed exactly once, by the one
//! principal their purpose names, for the exact destination and payload they bind.
//! A store ward cannot trust (an edited migration, a file that is no database) is refused at
//! open and left as it was; a row edited past its rules is refused as corrupt where it is read,
//! and burns nothing.

mod common;

use std::time::Duration;

use common::*;
use reach_digest::Sha256Digest;
use reach_ward_desk::{Budget, DECISION_TTL, DeskError, Refusal, TaskBudgets, WardPolicy};

#[tokio::test]
async fn issued_decision_redeems_once_with_its_bindings() {
    let f = Fixture::new().await;
    let a = f.admit("run-1").await;
    let d = f.issue(&a, "att-1", b"answer").await.unwrap();
    assert_eq!(d.redeemer, DISCORD);
    assert_eq!(d.expires_at, START.plus(DECISION_TTL));
    let r = f
        .desk
        .redeem(
            DISCORD,
            d.id.as_str(),
            DISCORD_REST,
            &Sha256Digest::of(b"answer"),
        )
        .await
        .unwrap();
    assert_eq!(
        (r.run_id(), r.attempt_id(), r.purpose()),
        ("run-1", "att-1", "discord-delivery")
    );
    assert_eq!(r.id(), &d.id);
    let again = f
        .desk
        .redeem(
            DISCORD,
            d.id.as_str(),
            DISCORD_REST,
            &Sha256Digest::of(b"answer"),
        )
        .await;
    assert_eq!(refusal(again), Refusal::AlreadyRedeemed);
}

#[tokio::test]
async fn expired_decision_is_refused() {
    let f = Fixture::new().await;
    let a = f.admit("run-1").await;
    let d = f.issue(&a, "att-1", b"answer").await.unwrap();
    f.advance(DECISION_TTL);
    let r = f
        .desk
        .redeem(
            DISCORD,
            d.id.as_str(),
            DISCORD_REST,
            &Sha256Digest::of(b"answer"),
        )
        .await;
    assert_eq!(refusal(r), Refusal::DecisionExpired);
}

#[tokio::test]
async fn concurrent_redeems_of_one_decision_admit_exactly_one() {
    let f = Fixture::new().await;
    for round in 0..10 {
        let a = f.admit(&format!("run-{round}")).await;
        let d = f.issue(&a, "att-1", b"answer").await.unwrap();
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let (desk, id) = (f.desk.clone(), d.id.to_string());
                tokio::spawn(async move {
                    desk.redeem(DISCORD, &id, DISCORD_REST, &Sha256Digest::of(b"answer"))
                        .await
                })
            })
            .collect();
        let mut admitted = 0;
        for t in tasks {
            match t.await.unwrap() {
                Ok(_) => admitted += 1,
                Err(DeskError::Refused(Refusal::AlreadyRedeemed)) => {}
                Err(e) => panic!("round {round}: unexpected {e:?}"),
            }
        }
        assert_eq!(admitted, 1, "round {round}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_redeems_on_threads_admit_exactly_one() {
    let f = Fixture::new().await;
    let a = f.admit("run-1").await;
    let d = f.issue(&a, "att-1", b"answer").await.unwrap();
    let tasks: Vec<_> = (0..32)
        .map(|_| {
            let (desk, id) = (f.desk.clone(), d.id.to_string());
            tokio::spawn(async move {
                desk.redeem(DISCORD, &id, DISCORD_REST, &Sha256Digest::of(b"answer"))
                    .await
                    .is_ok()
            })
        })
        .collect();
    let mut admitted = 0;
    for t in tasks {
        admitted += usize::from(t.await.unwrap());
    }
    assert_eq!(admitted, 1);
}

#[tokio::test]
async fn revocation_mid_task_refuses_unredeemed_decisions_and_new_ones() {
    let f = Fixture::new().await;
    let a = f.admit("run-1").await;
    let sent = f.issue(&a, "att-1", b"one").await.unwrap();
    f.desk
        .redeem(
            DISCORD,
            sent.id.as_str(),
            DISCORD_REST,
            &Sha256Digest::of(b"one"),
        )
        .await
        .unwrap();
    let pending = f.issue(&a, "att-2", b"two").await.unwrap();

    let rev = f
        .desk
        .revoke("operator", a.sigil.id.as_str())
        .await
        .unwrap();
    assert_eq!((rev.decisions_revoked, rev.already_revoked), (1, false));

    let r = f
        .desk
        .redeem(
            DISCORD,
            pending.id.as_str(),
            DISCORD_REST,
            &Sha256Digest::of(b"two"),
        )
        .await;
    assert_eq!(refusal(r), Refusal::DecisionRevoked);
    assert_eq!(
        refusal(f.issue(&a, "att-3", b"three").await),
        Refusal::SigilRevoked
    );
    // The attempt already redeemed may have left; revocation does not pretend otherwise.
    let r = f
        .desk
        .redeem(
            DISCORD,
            sent.id.as_str(),
            DISCORD_REST,
            &Sha256Digest::of(b"one"),
        )
        .await;
    assert_eq!(refusal(r), Refusal::AlreadyRedeemed);
    // Revoking twice succeeds and says so; an unknown Sigil is refused.
    let again = f.desk.revoke("core", a.sigil.id.as_str()).await.unwrap();
    assert_eq!((again.decisions_revoked, again.already_revoked), (0, true));
    assert_eq!(
        refusal(
            f.desk
                .revoke("operator", "sigil_00000000000000000000000000000000")
                .await
        ),
        Refusal::UnknownSigil
    );
    // A replayed admission of the revoked run does not mint a new Sigil.
    let replay = f
        .desk
        .admit(CORE, event("g1", "c-run-1", "u-run-1"), run_ref("run-1"))
        .await;
    assert_eq!(refusal(replay), Refusal::SigilRevoked);
}

fn budgets(b: TaskBudgets) -> WardPolicy {
    WardPolicy {
        budgets: b,
        ..WardPolicy::default()
    }
}

#[tokio::test]
async fn retries_budget_counts_every_decision_of_the_run() {
    let f = Fixture::with_policy(budgets(TaskBudgets {
        retries: 3,
        concurrency: 10,
        ..TaskBudgets::default()
    }))
    .await;
    let a = f.admit("run-1").await;
    for i in 0..3 {
        f.issue(&a, &format!("att-{i}"), b"p").await.unwrap();
    }
    assert_eq!(
        refusal(f.issue(&a, "att-3", b"p").await),
        Refusal::OverBudget(Budget::Retries)
    );
}

#[tokio::test]
async fn token_and_spend_budgets_are_reserved_at_issue() {
    let f = Fixture::with_policy(budgets(TaskBudgets {
        tokens: 1000,
        spend_micros: 500,
        concurrency: 10,
        ..TaskBudgets::default()
    }))
    .await;
    let a = f.admit("run-1").await;
    let mut req = discord_request(&a, "att-1", b"p");
    req.max_tokens = 600;
    req.max_spend_micros = 300;
    f.desk.issue(CORE, req.clone()).await.unwrap();
    req.attempt_id = "att-2".into();
    assert_eq!(
        refusal(f.desk.issue(CORE, req.clone()).await),
        Refusal::OverBudget(Budget::Tokens)
    );
    req.max_tokens = 400;
    assert_eq!(
        refusal(f.desk.issue(CORE, req.clone()).await),
        Refusal::OverBudget(Budget::Spend)
    );
    req.max_spend_micros = 200;
    f.desk.issue(CORE, req).await.unwrap();
}

#[tokio::test]
async fn concurrency_budget_frees_when_decisions_expire() {
    let f = Fixture::with_policy(budgets(TaskBudgets {
        concurrency: 1,
        ..TaskBudgets::default()
    }))
    .await;
    let a = f.admit("run-1").await;
    f.issue(&a, "att-1", b"p").await.unwrap();
    assert_eq!(
        refusal(f.issue(&a, "att-2", b"p").await),
        Refusal::OverBudget(Budget::Concurrency)
    );
    f.advance(DECISION_TTL);
    f.issue(&a, "att-2", b"p").await.unwrap();
}

#[tokio::test]
async fn sigil_expires_with_its_task_and_caps_decision_expiry() {
    let f = Fixture::with_policy(budgets(TaskBudgets {
        time_ms: 40_000,
        ..TaskBudgets::default()
    }))
    .await;
    let a = f.admit("run-1").await;
    assert_eq!(a.sigil.expires_at, START.plus(Duration::from_secs(40)));
    f.advance(Duration::from_secs(20));
    let d = f.issue(&a, "att-1", b"p").await.unwrap();
    assert_eq!(
        d.expires_at, a.sigil.expires_at,
        "a decision never outlives its Sigil"
    );
    f.advance(Duration::from_secs(20));
    assert_eq!(
        refusal(f.issue(&a, "att-2", b"p").await),
        Refusal::SigilExpired
    );
    let r = f
        .desk
        .redeem(
            DISCORD,
            d.id.as_str(),
            DISCORD_REST,
            &Sha256Digest::of(b"p"),
        )
        .await;
    assert_eq!(refusal(r), Refusal::DecisionExpired);

    // The run's own deadline wins when it is earlier.
    let mut run = run_ref("run-2");
    run.deadline = Some(START.plus(Duration::from_secs(45)));
    let b = f
        .desk
        .admit(CORE, event("g1", "c2", "u2"), run)
        .await
        .unwrap();
    assert_eq!(b.sigil.expires_at, START.plus(Duration::from_secs(45)));
    let mut past = run_ref("run-3");
    past.deadline = Some(START);
    assert_eq!(
        refusal(f.desk.admit(CORE, event("g1", "c3", "u3"), past).await),
        Refusal::SigilExpired
    );
}

#[tokio::test]
async fn mismatched_redemptions_are_refused_and_do_not_burn_the_decision() {
    let f = Fixture::new().await;
    let a = f.admit("run-1").await;
    let d = f.issue(&a, "att-1", b"answer").await.unwrap();
    let id = d.id.as_str();
    let good = Sha256Digest::of(b"answer");
    let cases = [
        (
            DISCORD,
            DISCORD_REST,
            Sha256Digest::of(b"other answer"),
            Refusal::PayloadMismatch,
        ),
        (
            DISCORD,
            "https://discord.com:443/api/v10/channels/c2/messages",
            good,
            Refusal::DestinationMismatch,
        ),
        (PROVIDER, DISCORD_REST, good, Refusal::WrongRedeemer),
        ("core", DISCORD_REST, good, Refusal::WrongRedeemer),
    ];
    for (who, dest, payload, want) in cases {
        assert_eq!(
            refusal(f.desk.redeem(who, id, dest, &payload).await),
            want,
            "{who} {dest}"
        );
    }
    f.desk
        .redeem(DISCORD, id, DISCORD_REST, &good)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_sigil_presented_as_a_decision_is_unknown() {
    let f = Fixture::new().await;
    let a = f.admit("run-1").await;
    let payload = Sha256Digest::of(b"answer");
    for who in [DISCORD, PROVIDER] {
        let r = f
            .desk
            .redeem(who, a.sigil.id.as_str(), DISCORD_REST, &payload)
            .await;
        assert_eq!(refusal(r), Refusal::UnknownDecision);
    }
    for bogus in [
        "",
        "egd_00000000000000000000000000000000",
        "egd_zz",
        "sigil_",
    ] {
        assert_eq!(
            refusal(f.desk.redeem(DISCORD, bogus, DISCORD_REST, &payload).await),
            Refusal::UnknownDecision
        );
    }
}

#[tokio::test]
async fn only_the_holder_issues_on_a_sigil_for_its_own_run() {
    let f = Fixture::new().await;
    let a = f.admit("run-1").await;
    let req = discord_request(&a, "att-1", b"p");
    assert_eq!(
        refusal(f.desk.issue(DISCORD, req.clone()).await),
        Refusal::UnknownSigil
    );
    let mut other_run = req.clone();
    other_run.run_id = "run-2".into();
    assert_eq!(
        refusal(f.desk.issue(CORE, other_run).await),
        Refusal::RunMismatch
    );
    let mut bad = req;
    bad.sigil_id = "egd_00000000000000000000000000000000".into();
    assert_eq!(
        refusal(f.desk.issue(CORE, bad).await),
        Refusal::UnknownSigil
    );
}

#[tokio::test]
async fn purpose_cut_receipt_and_labels_are_checked_at_issue() {
    let f = Fixture::new().await;
    let a = f.admit("run-1").await;
    let mut model = discord_request(&a, "att-1", b"prompt");
    model.purpose = "model-completion".into();
    model.destination = "https://provider.invalid:443/v1/chat/completions".into();
    assert_eq!(
        refusal(f.desk.issue(CORE, model.clone()).await),
        Refusal::CutReceiptMissing
    );
    model.cut_receipt_digest = Some(Sha256Digest::of(b"cut receipt"));
    let d = f.desk.issue(CORE, model.clone()).await.unwrap();
    assert_eq!(d.redeemer, PROVIDER);
    // egress-discord cannot carry a model call, and egress-provider can.
    let r = f
        .desk
        .redeem(
            DISCORD,
            d.id.as_str(),
            &model.destination,
            &model.payload_digest,
        )
        .await;
    assert_eq!(refusal(r), Refusal::WrongRedeemer);
    f.desk
        .redeem(
            PROVIDER,
            d.id.as_str(),
            &model.destination,
            &model.payload_digest,
        )
        .await
        .unwrap();

    let mut unknown = discord_request(&a, "att-2", b"p");
    unknown.purpose = "home-database".into();
    assert_eq!(
        refusal(f.desk.issue(CORE, unknown).await),
        Refusal::PurposeNotAdmitted
    );
    let mut private = discord_request(&a, "att-2", b"p");
    private.labels.push("private".into());
    assert_eq!(
        refusal(f.desk.issue(CORE, private).await),
        Refusal::LabelRefused
    );
}

#[tokio::test]
async fn malformed_requests_name_the_field() {
    let f = Fixture::new().await;
    let a = f.admit("run-1").await;
    let base = discord_request(&a, "att-1", b"p");
    let mut cases = Vec::new();
    let mut r = base.clone();
    r.attempt_id = String::new();
    cases.push((r, "attempt_id"));
    let mut r = base.clone();
    r.destination = "http://discord.com/api".into();
    cases.push((r, "destination"));
    let mut r = base.clone();
    r.policy_revision = String::new();
    cases.push((r, "policy_revision"));
    let mut r = base.clone();
    r.labels = vec!["a label with spaces".into()];
    cases.push((r, "labels"));
    let mut r = base;
    r.max_tokens = u64::MAX;
    cases.push((r, "max_tokens"));
    for (req, field) in cases {
        match f.desk.issue(CORE, req).await {
            Err(DeskError::Malformed(got)) => assert_eq!(got, field),
            other => panic!("{field}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn replayed_admission_returns_the_same_sigil() {
    let f = Fixture::new().await;
    let a = f.admit("run-1").await;
    let b = f.admit("run-1").await;
    assert!(!a.replayed && b.replayed);
    assert_eq!(a.sigil, b.sigil);
    // The same run in another scope is a conflict, not a second Sigil.
    let other = f
        .desk
        .admit(CORE, event("g1", "elsewhere", "u-run-1"), run_ref("run-1"))
        .await;
    assert_eq!(refusal(other), Refusal::RunMismatch);
}

#[test]
fn refusal_codes_are_stable() {
    use reach_ward_desk::Dimension;
    let all = [
        Refusal::DecisionExpired,
        Refusal::AlreadyRedeemed,
        Refusal::DecisionRevoked,
        Refusal::OverBudget(Budget::Tokens),
        Refusal::PayloadMismatch,
        Refusal::DestinationMismatch,
        Refusal::WrongRedeemer,
        Refusal::UnknownDecision,
        Refusal::PurposeNotAdmitted,
        Refusal::CutReceiptMissing,
        Refusal::LabelRefused,
        Refusal::SigilExpired,
        Refusal::SigilRevoked,
        Refusal::UnknownSigil,
        Refusal::RunMismatch,
        Refusal::PurposeMismatch,
        Refusal::OverBudget(Budget::Reads),
        Refusal::RateLimited(Dimension::Channel),
    ];
    let table: String = all
        .iter()
        .map(|r| format!("{:<32} {:<12} {r}\n", r.code(), r.detail()))
        .collect();
    expect_test::expect![[r#"
        decision/expired                              decision/expired
        decision/already-redeemed                     decision/already-redeemed
        decision/revoked                              decision/revoked
        decision/over-budget             tokens       decision/over-budget: tokens
        decision/payload-mismatch                     decision/payload-mismatch
        decision/destination-mismatch                 decision/destination-mismatch
        decision/wrong-redeemer                       decision/wrong-redeemer
        decision/unknown                              decision/unknown
        decision/purpose-not-admitted                 decision/purpose-not-admitted
        decision/cut-receipt-missing                  decision/cut-receipt-missing
        decision/label-refused                        decision/label-refused
        sigil/expired                                 sigil/expired
        sigil/revoked                                 sigil/revoked
        sigil/unknown                                 sigil/unknown
        sigil/run-mismatch                            sigil/run-mismatch
        sigil/purpose-mismatch                        sigil/purpose-mismatch
        decision/over-budget             reads        decision/over-budget: reads
        ward/rate-limited                channel      ward/rate-limited: channel
    "#]]
    .assert_eq(&table);
}

#[tokio::test]
async fn a_decision_never_outlives_the_ward_process_that_issued_it() {
    let f = Fixture::new().await;
    let a = f.admit("run-1").await;
    let unredeemed = f.issue(&a, "att-1", b"one").await.unwrap();
    let redeemed = f.issue(&a, "att-2", b"two").await.unwrap();
    f.desk
        .redeem(
            DISCORD,
            redeemed.id.as_str(),
            DISCORD_REST,
            &Sha256Digest::of(b"two"),
        )
        .await
        .unwrap();
    f.desk.close().await;

    // A restart (after a crash that may have lost the last commits) voids what was unredeemed.
    let key = reach_ward_desk::WardKey::from_bytes(&[7; 32]).unwrap();
    let clock = std::sync::Arc::new(f.clock.clone());
    let desk = reach_ward_desk::Desk::open(
        &f.dir.path().join("ward.sqlite3"),
        key,
        WardPolicy::default(),
        clock,
    )
    .await
    .unwrap();
    let r = desk
        .redeem(
            DISCORD,
            unredeemed.id.as_str(),
            DISCORD_REST,
            &Sha256Digest::of(b"one"),
        )
        .await;
    assert_eq!(refusal(r), Refusal::DecisionExpired);
    let r = desk
        .redeem(
            DISCORD,
            redeemed.id.as_str(),
            DISCORD_REST,
            &Sha256Digest::of(b"two"),
        )
        .await;
    assert_eq!(refusal(r), Refusal::AlreadyRedeemed);
    // The Sigil survives the restart; the next attempt gets a fresh decision.
    let next = desk
        .issue(CORE, discord_request(&a, "att-3", b"one"))
        .await
        .unwrap();
    desk.redeem(
        DISCORD,
        next.id.as_str(),
        DISCORD_REST,
        &Sha256Digest::of(b"one"),
    )
    .await
    .unwrap();
}

/// Reopens the store of `f` as a restarted ward would.
async fn reopen(f: &Fixture, path: &std::path::Path) -> Result<reach_ward_desk::Desk, DeskError> {
    reach_ward_desk::Desk::open(
        path,
        reach_ward_desk::WardKey::from_bytes(&[7; 32]).unwrap(),
        WardPolicy::default(),
        std::sync::Arc::new(f.clock.clone()),
    )
    .await
}

/// Runs `sql` on ward's store file directly and asserts it changed exactly one row.
async fn edit_one(path: &std::path::Path, sql: &'static str) {
    assert_eq!(raw(path, sql).await, 1, "{sql}");
}

/// Runs `sql` on ward's store file directly, bypassing the desk; returns the rows changed.
async fn raw(path: &std::path::Path, sql: &'static str) -> u64 {
    let pool =
        sqlx::SqlitePool::connect_with(sqlx::sqlite::SqliteConnectOptions::new().filename(path))
            .await
            .unwrap();
    let n = sqlx::raw_sql(sql).execute(&pool).await.unwrap();
    pool.close().await;
    n.rows_affected()
}

#[tokio::test]
async fn a_store_whose_applied_migration_was_edited_does_not_open() {
    let f = Fixture::new().await;
    let a = f.admit("run-1").await;
    f.desk.close().await;
    let path = f.dir.path().join("ward.sqlite3");
    assert_eq!(
        raw(
            &path,
            "UPDATE ward_migration SET digest = 'sha256:edited' || digest WHERE version = 2"
        )
        .await,
        1
    );
    match reopen(&f, &path).await {
        Err(DeskError::Corrupt(what)) => assert_eq!(what, "an applied migration was edited"),
        other => panic!("expected a corrupt store, got {other:?}"),
    }

    // The refusal changed nothing: with the record restored the store opens, and the run's
    // Sigil is still the one it was admitted with.
    assert_eq!(
        raw(
            &path,
            "UPDATE ward_migration SET digest = substr(digest, 14) WHERE version = 2"
        )
        .await,
        1
    );
    let desk = reopen(&f, &path).await.unwrap();
    let again = desk
        .admit(CORE, event("g1", "c-run-1", "u-run-1"), run_ref("run-1"))
        .await
        .unwrap();
    assert!(again.replayed);
    assert_eq!(again.sigil, a.sigil);
}

#[tokio::test]
async fn a_store_file_that_is_not_a_database_is_a_store_error() {
    let f = Fixture::new().await;
    f.desk.close().await;
    let path = f.dir.path().join("other.sqlite3");
    std::fs::write(&path, [0x5a_u8; 4096]).unwrap();
    match reopen(&f, &path).await {
        // SQLITE_NOTADB: the file is left as it was, not replaced by a fresh store.
        Err(DeskError::Store(sqlx::Error::Database(e))) => {
            assert_eq!(e.code().as_deref(), Some("26"), "{e}")
        }
        other => panic!("expected a store error, got {other:?}"),
    }
    assert_eq!(std::fs::read(&path).unwrap(), [0x5a_u8; 4096]);
}

#[tokio::test]
async fn rows_edited_past_their_rules_are_corrupt_and_burn_nothing() {
    let f = Fixture::new().await;
    let path = f.dir.path().join("ward.sqlite3");
    let a = f.admit("run-1").await;
    let d1 = f.issue(&a, "att-1", b"answer").await.unwrap();
    let d2 = f.issue(&a, "att-2", b"answer").await.unwrap();
    let redeem = |id: String| {
        let desk = &f.desk;
        async move {
            desk.redeem(DISCORD, &id, DISCORD_REST, &Sha256Digest::of(b"answer"))
                .await
        }
    };
    let corrupt = |r: Result<reach_ward_desk::RedeemedDecision, DeskError>| match r {
        Err(DeskError::Corrupt(what)) => what,
        other => panic!("expected a corrupt row, got {other:?}"),
    };

    // A decision in a state ward never writes (past the table's CHECK, by hand).
    edit_one(
        &path,
        "PRAGMA ignore_check_constraints = 1;
             UPDATE decision SET state = 'mislaid' WHERE attempt_id = 'att-1'",
    )
    .await;
    assert_eq!(
        corrupt(redeem(d1.id.as_str().into()).await),
        "decision state"
    );

    // A bound payload digest that is no digest.
    edit_one(
        &path,
        "UPDATE decision SET payload_digest = 'sha256:not-hex' WHERE attempt_id = 'att-2'",
    )
    .await;
    assert_eq!(
        corrupt(redeem(d2.id.as_str().into()).await),
        "payload digest"
    );

    // A Sigil of a kind ward does not know issues nothing.
    edit_one(
        &path,
        "PRAGMA ignore_check_constraints = 1;
             UPDATE sigil SET kind = 'other' WHERE run_id = 'run-1'",
    )
    .await;
    match f.issue(&a, "att-3", b"answer").await {
        Err(DeskError::Corrupt(what)) => assert_eq!(what, "sigil kind"),
        other => panic!("expected a corrupt Sigil, got {other:?}"),
    }

    // Nothing was burned: with the rows restored, each decision redeems once and the Sigil
    // issues again.
    raw(
        &path,
        "UPDATE decision SET state = 'issued' WHERE attempt_id = 'att-1';
         UPDATE decision SET payload_digest = (SELECT payload_digest FROM decision
             WHERE attempt_id = 'att-1') WHERE attempt_id = 'att-2';
         UPDATE sigil SET kind = 'task' WHERE run_id = 'run-1'",
    )
    .await;
    redeem(d1.id.as_str().into()).await.unwrap();
    redeem(d2.id.as_str().into()).await.unwrap();
    f.issue(&a, "att-3", b"answer").await.unwrap();
}
