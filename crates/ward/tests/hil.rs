//! HIL requests and the current-use fence at ward's desk, on a real SQLite store with a manual
//! clock: what a step grant requires (an approved, unexpired request for exactly that step
//! when the step asks; a standing that is not revoked, paused or changed), the first answer
//! standing, expiry, and a request surviving a restart of ward. The same refusals over the
//! real port, and who may call what there, are in `over_the_port_only_the_operator_answers`.

mod common;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use common::*;
use reach_digest::Sha256Digest;
use reach_identity::{Principal, TrustDomain, TrustRoot};
use reach_port::{PortAddress, PortMaterial, PortPolicy, PortServer};
use reach_proto::ward::v1 as pb;
use reach_proto::ward::v1::ward_client::WardClient;
use reach_ward_desk::{
    DEFAULT_HIL_TTL, Desk, DeskError, EffectClass, FenceRequest, GrantRefusal, HilFiling, HilMode,
    HilRefusal, HilRequest, HilState, StepAction, StepClaim, StepGrantRequest, WardKey, WardPolicy,
    WardService,
};

const OPERATOR: &str = "operator";
const WORKBENCH: &str = "workbench";

fn step(index: u32) -> StepClaim {
    StepClaim {
        experiment_id: "exp-1".into(),
        instance_id: "vm-1".into(),
        plan_digest: Sha256Digest::of(b"stamped plan"),
        step_index: index,
        step_digest: Sha256Digest::of(format!("step {index}").as_bytes()),
        pack_name: PACK.into(),
        pack_generation: 1,
    }
}

fn filing(step: StepClaim, class: EffectClass) -> HilFiling {
    let patch = class == EffectClass::ContainedMutation;
    HilFiling {
        step,
        effect_class: class,
        class_source: if patch {
            "patch-policy.toml".into()
        } else {
            "command-profiles.toml#queue".into()
        },
        action: if patch {
            StepAction::Patch
        } else {
            StepAction::Run
        },
        target: if patch {
            "etc/app/app.conf".into()
        } else {
            "queue".into()
        },
        argv: if patch {
            vec![]
        } else {
            vec!["queue-tool".into(), "-p".into()]
        },
        diff: if patch {
            "--- a/etc/app/app.conf\n+++ b/etc/app/app.conf\n@@ -1 +1 @@\n-mydestination = localhost\n+mydestination = localhost, example.test\n".into()
        } else {
            String::new()
        },
        rollback: "recreate-prepared-system".into(),
        ttl: None,
    }
}

fn grant_request(step: StepClaim, class: EffectClass) -> StepGrantRequest {
    StepGrantRequest {
        step,
        effect_class: class,
        ttl: None,
        profile_digest: profile(),
        hil_required: false,
    }
}

fn grant_refusal<T: std::fmt::Debug>(r: Result<T, DeskError>) -> GrantRefusal {
    match r {
        Err(DeskError::Grant(x)) => x,
        other => panic!("expected a step grant refusal, got {other:?}"),
    }
}

fn hil_refusal<T: std::fmt::Debug>(r: Result<T, DeskError>) -> HilRefusal {
    match r {
        Err(DeskError::Hil(x)) => x,
        other => panic!("expected a HIL refusal, got {other:?}"),
    }
}

async fn fixture(hil: HilMode) -> Fixture {
    let f = Fixture::new().await;
    f.desk.fence_pack(CORE, &standing(1, hil)).await.unwrap();
    f
}

async fn approve(f: &Fixture, h: &HilRequest) -> HilRequest {
    f.desk
        .answer_hil_request(OPERATOR, h.id.as_str(), &h.digest.to_string(), true, "")
        .await
        .unwrap()
}

/// Mints and redeems `step`'s grant; the refusal if either refuses.
async fn run(f: &Fixture, step: StepClaim, class: EffectClass) -> Result<(), GrantRefusal> {
    let g = f
        .desk
        .mint_step_grant(CORE, grant_request(step.clone(), class))
        .await
        .map_err(|e| grant_refusal::<()>(Err(e)))?;
    f.desk
        .redeem_step_grant(WORKBENCH, &g.token, &step)
        .await
        .map(|_| ())
        .map_err(|e| grant_refusal::<()>(Err(e)))
}

#[tokio::test]
async fn each_mutation_asks_for_mutations_only_and_each_step_for_every_step() {
    let f = fixture(HilMode::EachMutation).await;
    assert_eq!(run(&f, step(0), EffectClass::Observation).await, Ok(()));
    assert_eq!(
        run(&f, step(1), EffectClass::ContainedMutation).await,
        Err(GrantRefusal::HilMissing)
    );
    // A stamped plan that asks for an observation is asked, whatever the mode.
    let mut asks = grant_request(step(2), EffectClass::Observation);
    asks.hil_required = true;
    assert_eq!(
        grant_refusal(f.desk.mint_step_grant(CORE, asks).await),
        GrantRefusal::HilMissing
    );

    let f = fixture(HilMode::EachStep).await;
    assert_eq!(
        run(&f, step(0), EffectClass::Observation).await,
        Err(GrantRefusal::HilMissing)
    );
    // The request keeps the class the host derived: each-step asks, it does not reclassify.
    let h = f
        .desk
        .file_hil_request(CORE, filing(step(0), EffectClass::Observation))
        .await
        .unwrap();
    assert_eq!(h.filing.effect_class, EffectClass::Observation);
    approve(&f, &h).await;
    assert_eq!(run(&f, step(0), EffectClass::Observation).await, Ok(()));
}

#[tokio::test]
async fn an_approval_runs_exactly_its_step_once() {
    let f = fixture(HilMode::EachMutation).await;
    let mutation = EffectClass::ContainedMutation;
    let h = f
        .desk
        .file_hil_request(CORE, filing(step(1), mutation))
        .await
        .unwrap();
    assert_eq!(
        (h.state, h.expires_at),
        (HilState::Pending, START.plus(DEFAULT_HIL_TTL))
    );
    assert_eq!(
        run(&f, step(1), mutation).await,
        Err(GrantRefusal::HilPending)
    );
    let answered = approve(&f, &h).await;
    assert_eq!(
        (answered.state, answered.answered_by.as_deref()),
        (HilState::Approved, Some(OPERATOR))
    );
    // Another step's digest at the same position, another position, another experiment: none
    // is approved by it.
    let other_digest = StepClaim {
        step_digest: Sha256Digest::of(b"another step"),
        ..step(1)
    };
    let other_experiment = StepClaim {
        experiment_id: "exp-2".into(),
        ..step(1)
    };
    for other in [other_digest, step(2), other_experiment] {
        assert_eq!(
            run(&f, other.clone(), mutation).await,
            Err(GrantRefusal::HilMissing),
            "{other:?}"
        );
    }
    // Two grants under the one approval: the first to redeem runs the step, the other and any
    // later mint find the approval spent.
    let first = f
        .desk
        .mint_step_grant(CORE, grant_request(step(1), mutation))
        .await
        .unwrap();
    let second = f
        .desk
        .mint_step_grant(CORE, grant_request(step(1), mutation))
        .await
        .unwrap();
    f.desk
        .redeem_step_grant(WORKBENCH, &first.token, &step(1))
        .await
        .unwrap();
    let r = f
        .desk
        .redeem_step_grant(WORKBENCH, &second.token, &step(1))
        .await;
    assert_eq!(grant_refusal(r), GrantRefusal::HilSpent);
    assert_eq!(
        run(&f, step(1), mutation).await,
        Err(GrantRefusal::HilSpent)
    );
    // Filing the same step again returns the answered request; a different step at its
    // position is a conflict.
    let again = f
        .desk
        .file_hil_request(CORE, filing(step(1), mutation))
        .await
        .unwrap();
    assert_eq!((again.id, again.state), (h.id.clone(), HilState::Approved));
    let mut changed = filing(step(1), mutation);
    changed.diff.push_str("+relayhost = evil.example\n");
    assert_eq!(
        hil_refusal(f.desk.file_hil_request(CORE, changed).await),
        HilRefusal::Conflict
    );
}

#[tokio::test]
async fn a_denial_or_an_expiry_ends_the_step_and_the_first_answer_stands() {
    let f = fixture(HilMode::EachMutation).await;
    let mutation = EffectClass::ContainedMutation;
    let denied = f
        .desk
        .file_hil_request(CORE, filing(step(1), mutation))
        .await
        .unwrap();
    let digest = denied.digest.to_string();
    let id = denied.id.as_str();
    assert_eq!(
        hil_refusal(
            f.desk
                .answer_hil_request(OPERATOR, id, &digest, false, " ")
                .await
        ),
        HilRefusal::BadRequest("reason")
    );
    assert_eq!(
        hil_refusal(
            f.desk
                .answer_hil_request(OPERATOR, id, &Sha256Digest::of(b"x").to_string(), true, "")
                .await
        ),
        HilRefusal::OtherRequest
    );
    let d = f
        .desk
        .answer_hil_request(OPERATOR, id, &digest, false, "relays mail off the box")
        .await
        .unwrap();
    assert_eq!(
        (d.state, d.reason.as_str()),
        (HilState::Denied, "relays mail off the box")
    );
    assert_eq!(
        hil_refusal(
            f.desk
                .answer_hil_request(OPERATOR, id, &digest, true, "")
                .await
        ),
        HilRefusal::Answered(HilState::Denied)
    );
    assert_eq!(
        run(&f, step(1), mutation).await,
        Err(GrantRefusal::HilDenied)
    );

    // Unanswered past its expiry: the step is refused and the request takes no answer.
    let mut short = filing(step(2), mutation);
    short.ttl = Some(Duration::from_secs(60));
    let late = f.desk.file_hil_request(CORE, short).await.unwrap();
    f.advance(Duration::from_secs(60));
    assert_eq!(
        run(&f, step(2), mutation).await,
        Err(GrantRefusal::HilExpired)
    );
    assert_eq!(
        hil_refusal(
            f.desk
                .answer_hil_request(
                    OPERATOR,
                    late.id.as_str(),
                    &late.digest.to_string(),
                    true,
                    ""
                )
                .await
        ),
        HilRefusal::Expired
    );
    assert_eq!(
        f.desk.hil_request(late.id.as_str()).await.unwrap().state,
        HilState::Expired
    );
    // Pending lists drop it; the full list keeps it.
    assert!(f.desk.hil_requests(false).await.unwrap().is_empty());
    assert_eq!(f.desk.hil_requests(true).await.unwrap().len(), 2);
    assert_eq!(
        hil_refusal(f.desk.hil_request("hil_nope").await),
        HilRefusal::Unknown
    );
}

#[tokio::test]
async fn an_approval_that_expires_between_mint_and_redemption_stops_the_step() {
    let f = fixture(HilMode::EachMutation).await;
    let mutation = EffectClass::ContainedMutation;
    let mut fil = filing(step(1), mutation);
    fil.ttl = Some(Duration::from_secs(30));
    let h = f.desk.file_hil_request(CORE, fil).await.unwrap();
    approve(&f, &h).await;
    let g = f
        .desk
        .mint_step_grant(CORE, grant_request(step(1), mutation))
        .await
        .unwrap();
    f.advance(Duration::from_secs(30));
    let r = f
        .desk
        .redeem_step_grant(WORKBENCH, &g.token, &step(1))
        .await;
    assert_eq!(grant_refusal(r), GrantRefusal::HilExpired);
}

/// The race the fence exists for: ward minted the grant, then the standing changed, then the
/// workbench redeems. Each change stops the step with its own code, and a grant minted under
/// the old standing never redeems again (pause, then resume: still refused).
#[tokio::test]
async fn a_change_of_standing_between_mint_and_redemption_stops_the_step() {
    let obs = EffectClass::Observation;
    let paused = FenceRequest {
        paused: true,
        ..standing(1, HilMode::EachMutation)
    };
    let revoked = FenceRequest {
        revoked: true,
        generation: 2,
        ..standing(1, HilMode::EachMutation)
    };
    let reactivated = standing(3, HilMode::EachMutation);
    let upgraded = FenceRequest {
        active_profile_digest: Sha256Digest::of(b"task-profile.toml v2"),
        generation: 2,
        ..standing(1, HilMode::EachMutation)
    };
    let stricter = standing(1, HilMode::EachStep);
    for (change, want) in [
        (vec![paused.clone()], GrantRefusal::Paused),
        (
            vec![paused, standing(1, HilMode::EachMutation)],
            GrantRefusal::Paused,
        ),
        (vec![revoked.clone()], GrantRefusal::Revoked),
        (vec![revoked, reactivated], GrantRefusal::GenerationStale),
        (vec![upgraded], GrantRefusal::ProfileChanged),
        (vec![stricter], GrantRefusal::Paused),
    ] {
        let f = fixture(HilMode::EachMutation).await;
        let g = f
            .desk
            .mint_step_grant(CORE, grant_request(step(0), obs))
            .await
            .unwrap();
        let mut stale = 0;
        for c in &change {
            stale = f.desk.fence_pack(CORE, c).await.unwrap().stale_grants;
        }
        assert_eq!(stale, 1, "{change:?}");
        let r = f
            .desk
            .redeem_step_grant(WORKBENCH, &g.token, &step(0))
            .await;
        assert_eq!(grant_refusal(r), want, "{change:?}");
        // The same refusal again: the grant is dead, not waiting.
        let r = f
            .desk
            .redeem_step_grant(WORKBENCH, &g.token, &step(0))
            .await;
        assert_eq!(grant_refusal(r), want, "{change:?}");
    }

    // And at mint: nothing is minted under a standing that refuses.
    let f = fixture(HilMode::EachMutation).await;
    for (fence, want) in [
        (
            FenceRequest {
                paused: true,
                ..standing(1, HilMode::EachMutation)
            },
            GrantRefusal::Paused,
        ),
        (
            FenceRequest {
                bound_profile_digest: Sha256Digest::of(b"old profile"),
                ..standing(1, HilMode::EachMutation)
            },
            GrantRefusal::ProfileChanged,
        ),
        (
            standing(2, HilMode::EachMutation),
            GrantRefusal::GenerationStale,
        ),
    ] {
        f.desk.fence_pack(CORE, &fence).await.unwrap();
        let r = f
            .desk
            .mint_step_grant(CORE, grant_request(step(0), obs))
            .await;
        assert_eq!(grant_refusal(r), want, "{fence:?}");
    }
    // Resumed at the current generation: a fresh grant for a fresh step runs.
    f.desk
        .fence_pack(CORE, &standing(2, HilMode::EachMutation))
        .await
        .unwrap();
    let fresh = StepClaim {
        pack_generation: 2,
        ..step(0)
    };
    assert_eq!(run(&f, fresh, obs).await, Ok(()));
}

#[tokio::test]
async fn a_pending_request_survives_a_restart_of_ward_and_one_answer_works() {
    let f = fixture(HilMode::EachMutation).await;
    let mutation = EffectClass::ContainedMutation;
    let h = f
        .desk
        .file_hil_request(CORE, filing(step(1), mutation))
        .await
        .unwrap();
    let path = f.dir.path().join("ward.sqlite3");
    f.desk.close().await;
    let reopened = Desk::open(
        &path,
        WardKey::from_bytes(&[7; 32]).unwrap(),
        WardPolicy::default(),
        Arc::new(f.clock.clone()),
    )
    .await
    .unwrap();
    let listed = reopened.hil_requests(false).await.unwrap();
    assert_eq!(listed, vec![h.clone()]);
    let digest = h.digest.to_string();
    let approved = reopened
        .answer_hil_request(OPERATOR, h.id.as_str(), &digest, true, "")
        .await
        .unwrap();
    assert_eq!(approved.state, HilState::Approved);
    assert_eq!(
        hil_refusal(
            reopened
                .answer_hil_request(OPERATOR, h.id.as_str(), &digest, false, "changed my mind")
                .await
        ),
        HilRefusal::Answered(HilState::Approved)
    );
    // The standing survived too: the approved step mints and redeems on the new process.
    let g = reopened
        .mint_step_grant(CORE, grant_request(step(1), mutation))
        .await
        .unwrap();
    reopened
        .redeem_step_grant(WORKBENCH, &g.token, &step(1))
        .await
        .unwrap();
    // A store edited to change an answer is refused by the database itself.
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let edited = sqlx::query("UPDATE hil_request SET state = 'denied' WHERE id = ?1")
        .bind(h.id.as_str())
        .execute(&pool)
        .await;
    assert!(
        edited
            .unwrap_err()
            .to_string()
            .contains("an answered request is final")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_concurrent_answers_exactly_one_stands() {
    let f = fixture(HilMode::EachMutation).await;
    for round in 0..5u32 {
        let h = f
            .desk
            .file_hil_request(CORE, filing(step(round), EffectClass::ContainedMutation))
            .await
            .unwrap();
        let mut set = tokio::task::JoinSet::new();
        for i in 0..6 {
            let (desk, id, digest) = (f.desk.clone(), h.id.to_string(), h.digest.to_string());
            set.spawn(async move {
                desk.answer_hil_request(OPERATOR, &id, &digest, i % 2 == 0, "no")
                    .await
            });
        }
        let (mut won, mut answered) = (vec![], 0);
        while let Some(r) = set.join_next().await {
            match r.unwrap() {
                Ok(h) => won.push(h.state),
                Err(DeskError::Hil(HilRefusal::Answered(_))) => answered += 1,
                Err(e) => panic!("round {round}: {e:?}"),
            }
        }
        assert_eq!((won.len(), answered), (1, 5), "round {round}");
        assert_eq!(
            f.desk.hil_request(h.id.as_str()).await.unwrap().state,
            won[0]
        );
    }
}

#[tokio::test]
async fn a_filing_that_would_mislead_the_operator_is_refused() {
    let f = fixture(HilMode::EachMutation).await;
    let mutation = EffectClass::ContainedMutation;
    type Edit = fn(&mut HilFiling);
    let cases: [(&str, Edit); 6] = [
        ("patch without diff", |h| h.diff.clear()),
        ("escape in the target", |h| {
            h.target = "etc/app/app.conf\u{1b}]0;ok\u{7}".into()
        }),
        ("carriage return in diff", |h| h.diff.push_str("\r+ok\n")),
        ("oversized diff", |h| h.diff = "+x\n".repeat(30_000)),
        ("no rollback", |h| h.rollback.clear()),
        ("empty experiment", |h| h.step.experiment_id.clear()),
    ];
    let mut table = String::new();
    for (what, edit) in cases {
        let mut h = filing(step(1), mutation);
        edit(&mut h);
        let r = f.desk.file_hil_request(CORE, h).await;
        table += &format!("{what:<26} {}\n", hil_refusal(r));
    }
    expect_test::expect![[r#"
        patch without diff         hil/bad-request: diff
        escape in the target       hil/bad-request: target
        carriage return in diff    hil/bad-request: diff
        oversized diff             hil/bad-request: diff
        no rollback                hil/bad-request: rollback
        empty experiment           hil/bad-request: experiment_id
    "#]]
    .assert_eq(&table);
    assert!(f.desk.hil_requests(true).await.unwrap().is_empty());
}

/// Through the real port (mTLS on a Unix socket) with the manifest's allow-list for the new
/// methods: core files and reads, the operator lists, reads, answers and watches; nobody else
/// does any of it. A watcher sees what is pending, then each new request as it is filed.
#[tokio::test]
async fn over_the_port_only_the_operator_answers() {
    let f = fixture(HilMode::EachMutation).await;
    let td = TrustDomain::new("hil.test").unwrap();
    let root = TrustRoot::generate(&td, SystemTime::now()).unwrap();
    let p = |n: &str| Principal::new(td.clone(), n).unwrap();
    for who in ["ward", "core", OPERATOR, WORKBENCH] {
        root.provision(&f.dir.path().join(who), &p(who), Duration::from_secs(3600))
            .unwrap();
    }
    let m = |who: &str| PortMaterial::load(&f.dir.path().join(who), td.clone()).unwrap();
    let sock = f.dir.path().join("ward.sock");
    let method = |name: &str| format!("/reach.ward.v1.Ward/{name}");
    let manifest = reach_manifest::load(reach_manifest::VPS_PUBLIC).unwrap();
    let port = manifest
        .ports
        .iter()
        .find(|p| p.name == "ward.authority")
        .unwrap();
    let mut policy = PortPolicy::new("ward.authority");
    for g in &port.grants {
        policy = policy.allow(p(&g.caller), method(&g.method));
    }
    let server = PortServer::bind(&PortAddress::Unix(sock.clone()), m("ward"), policy).unwrap();
    tokio::spawn(
        server.serve(
            WardService::new(
                f.desk.clone(),
                Arc::new(reach_ward_desk::RoomKey::ephemeral().unwrap()),
            )
            .into_server(),
            std::future::pending(),
        ),
    );
    let connect = async |who: &str| {
        WardClient::new(
            reach_port::connect(PortAddress::Unix(sock.clone()), &m(who), p("ward"))
                .await
                .unwrap(),
        )
    };
    let (mut core, mut operator, mut workbench) = (
        connect("core").await,
        connect(OPERATOR).await,
        connect(WORKBENCH).await,
    );
    let file = |i: u32| {
        let s = step(i);
        pb::FileHilRequestRequest {
            experiment_id: s.experiment_id,
            instance_id: s.instance_id,
            plan_digest: s.plan_digest.to_string(),
            step_index: i,
            step_digest: s.step_digest.to_string(),
            pack_name: s.pack_name,
            pack_generation: 1,
            effect_class: "contained-mutation".into(),
            class_source: "patch-policy.toml".into(),
            action: "patch".into(),
            target: "etc/app/app.conf".into(),
            diff: "--- a\n+++ b\n@@ -1 +1 @@\n-a\n+b\n".into(),
            rollback: "recreate-prepared-system".into(),
            ..Default::default()
        }
    };
    let first = core.file_hil_request(file(1)).await.unwrap().into_inner();
    let mut watch = operator
        .watch_hil_requests(pb::WatchHilRequestsRequest {})
        .await
        .unwrap()
        .into_inner();
    let seen = watch.message().await.unwrap().unwrap();
    assert_eq!(
        (seen.id.as_str(), seen.state.as_str()),
        (first.id.as_str(), "pending")
    );
    let second = core.file_hil_request(file(2)).await.unwrap().into_inner();
    let seen = watch.message().await.unwrap().unwrap();
    assert_eq!(seen.id, second.id);
    assert_eq!(seen.diff, "--- a\n+++ b\n@@ -1 +1 @@\n-a\n+b\n");

    let answer = |id: &str, digest: &str| pb::AnswerHilRequestRequest {
        id: id.to_owned(),
        request_digest: digest.to_owned(),
        approve: true,
        reason: String::new(),
    };
    let ok = answer(&first.id, &first.digest);
    let mut table = String::new();
    let mut line = |what: &str, r: Result<(), tonic::Status>| {
        let shown = match r {
            Ok(()) => "ok".to_owned(),
            Err(s) => format!("{:?} {}", s.code(), s.message()),
        };
        table += &format!("{what:<28} {shown}\n");
    };
    let drop_ok = |r: Result<tonic::Response<_>, tonic::Status>| {
        r.map(|_: tonic::Response<pb::HilRequestView>| ())
    };
    line(
        "core answers",
        drop_ok(core.answer_hil_request(ok.clone()).await),
    );
    line(
        "workbench answers",
        drop_ok(workbench.answer_hil_request(ok.clone()).await),
    );
    line(
        "operator files",
        drop_ok(operator.file_hil_request(file(3)).await),
    );
    line(
        "workbench lists",
        workbench
            .list_hil_requests(pb::ListHilRequestsRequest { all: true })
            .await
            .map(|_| ()),
    );
    line(
        "another digest",
        drop_ok(
            operator
                .answer_hil_request(answer(&first.id, &second.digest))
                .await,
        ),
    );
    line(
        "unknown id",
        drop_ok(
            operator
                .answer_hil_request(answer("hil_0", &first.digest))
                .await,
        ),
    );
    line(
        "operator approves",
        drop_ok(operator.answer_hil_request(ok.clone()).await),
    );
    line(
        "operator approves again",
        drop_ok(operator.answer_hil_request(ok).await),
    );
    line(
        "core reads the answer",
        core.get_hil_request(pb::GetHilRequestRequest {
            id: first.id.clone(),
        })
        .await
        .map(|r| assert_eq!(r.into_inner().state, "approved")),
    );
    expect_test::expect![[r#"
        core answers                 PermissionDenied spiffe://hil.test/core may not call /reach.ward.v1.Ward/AnswerHilRequest
        workbench answers            PermissionDenied spiffe://hil.test/workbench may not call /reach.ward.v1.Ward/AnswerHilRequest
        operator files               PermissionDenied spiffe://hil.test/operator may not call /reach.ward.v1.Ward/FileHilRequest
        workbench lists              PermissionDenied spiffe://hil.test/workbench may not call /reach.ward.v1.Ward/ListHilRequests
        another digest               FailedPrecondition hil/other-request
        unknown id                   NotFound hil/unknown
        operator approves            ok
        operator approves again      FailedPrecondition hil/answered: approved
        core reads the answer        ok
    "#]]
    .assert_eq(&table);
    let pending = operator
        .list_hil_requests(pb::ListHilRequestsRequest { all: false })
        .await
        .unwrap()
        .into_inner()
        .requests;
    assert_eq!(
        pending.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        [second.id.as_str()]
    );
}
