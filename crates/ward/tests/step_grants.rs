//! Step grants: minted by core for exactly one stamped plan step, redeemed exactly once by the
//! workbench with what it computed itself. A forged, reused, expired, other-step, other-plan,
//! other-pack, other-instance, other-experiment or stale-generation grant runs nothing, and is
//! refused here, at ward's desk (the API the gRPC service calls), on a real SQLite store.
//!
//! A refusal consumes nothing: after every mismatch and every forged token the grant is still
//! redeemed once with the right claim (see `Desk::redeem_step_grant` for why).

mod common;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use common::*;
use reach_digest::Sha256Digest;
use reach_identity::{Principal, TrustDomain, TrustRoot};
use reach_port::{PortAddress, PortMaterial, PortPolicy, PortServer};
use reach_proto::ward::v1::ward_client::WardClient;
use reach_proto::ward::v1::{FencePackRequest, MintStepGrantRequest, RedeemStepGrantRequest};
use reach_ward_desk::{
    DeskError, EffectClass, GrantRefusal, HilMode, MintedGrant, StepClaim, StepGrantPolicy,
    StepGrantRequest, WardKey, WardPolicy, WardService,
};

const WORKBENCH: &str = "workbench";

fn claim() -> StepClaim {
    StepClaim {
        experiment_id: "exp-1".into(),
        instance_id: "vm-1".into(),
        plan_digest: Sha256Digest::of(b"stamped plan"),
        step_index: 2,
        step_digest: Sha256Digest::of(b"step 2 canonical bytes"),
        pack_name: PACK.into(),
        pack_generation: 3,
    }
}

/// An observation: under an each-mutation fence it needs no operator's answer (tests/hil.rs
/// covers the steps that do).
fn request(step: StepClaim) -> StepGrantRequest {
    StepGrantRequest {
        step,
        effect_class: EffectClass::Observation,
        ttl: None,
        profile_digest: profile(),
        hil_required: false,
    }
}

/// A desk whose pack core fenced at generation 3, each-mutation.
async fn fixture() -> Fixture {
    let f = Fixture::new().await;
    fence(&f, 3).await;
    f
}

async fn fence(f: &Fixture, generation: u64) -> reach_ward_desk::Fenced {
    f.desk
        .fence_pack(CORE, &standing(generation, HilMode::EachMutation))
        .await
        .unwrap()
}

async fn mint(f: &Fixture, step: StepClaim) -> MintedGrant {
    f.desk.mint_step_grant(CORE, request(step)).await.unwrap()
}

/// `token` with the hex digit at byte `at` changed to another one.
fn flip(token: &str, at: usize) -> String {
    let mut b = token.as_bytes().to_vec();
    b[at] = if b[at] == b'0' { b'1' } else { b'0' };
    String::from_utf8(b).unwrap()
}

/// A gRPC error as `<code> <message>`, panicking on success.
fn status<T>(r: Result<tonic::Response<T>, tonic::Status>) -> String {
    match r {
        Ok(_) => panic!("expected a gRPC error"),
        Err(s) => format!("{:?} {}", s.code(), s.message()),
    }
}

/// The grant refusal of `r`, panicking on success or on any other error.
fn grant_refusal<T: std::fmt::Debug>(r: Result<T, DeskError>) -> GrantRefusal {
    match r {
        Err(DeskError::Grant(x)) => x,
        other => panic!("expected a step grant refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn minted_grant_redeems_once_then_is_used() {
    let f = fixture().await;
    let g = mint(&f, claim()).await;
    assert_eq!(g.expires_at, START.plus(Duration::from_millis(60_000)));
    assert!(g.token.starts_with(&format!("{}.", g.id)), "{}", g.token);
    assert_eq!(g.token.len(), "stg_".len() + 32 + 1 + 64);

    let r = f
        .desk
        .redeem_step_grant(WORKBENCH, &g.token, &claim())
        .await
        .unwrap();
    assert_eq!(
        (r.id(), r.effect_class(), r.redeemed_at()),
        (&g.id, EffectClass::Observation, START)
    );
    let again = f
        .desk
        .redeem_step_grant(WORKBENCH, &g.token, &claim())
        .await;
    assert_eq!(grant_refusal(again), GrantRefusal::Used);
}

#[tokio::test]
async fn forged_tokens_are_refused_and_burn_nothing() {
    let f = fixture().await;
    // Tokens tagged under another ward key, for rows in this very store: a second desk with
    // another key, opened on the same file, mints them.
    let other_key = reach_ward_desk::Desk::open(
        &f.dir.path().join("ward.sqlite3"),
        WardKey::from_bytes(&[8; 32]).unwrap(),
        WardPolicy::default(),
        Arc::new(f.clock.clone()),
    )
    .await
    .unwrap();
    let g = mint(&f, claim()).await;
    let alien = other_key
        .mint_step_grant(CORE, request(claim()))
        .await
        .unwrap();

    let unknown_id = format!("stg_{}{}", "0".repeat(32), &g.token[g.token.len() - 65..]);
    let forged = [
        ("last tag byte flipped", flip(&g.token, g.token.len() - 1)),
        ("first tag byte flipped", flip(&g.token, g.token.len() - 64)),
        ("id byte flipped", flip(&g.token, 5)),
        ("made with another ward key", alien.token.clone()),
        ("this grant's id, another's tag", {
            let (id, _) = g.token.split_once('.').unwrap();
            let (_, tag) = alien.token.split_once('.').unwrap();
            format!("{id}.{tag}")
        }),
        ("an id nobody minted", unknown_id),
        ("the bare id", g.id.to_string()),
        ("empty", String::new()),
        (
            "a Sigil id",
            "sigil_00000000000000000000000000000000".into(),
        ),
    ];
    for (what, token) in &forged {
        let r = f.desk.redeem_step_grant(WORKBENCH, token, &claim()).await;
        assert_eq!(grant_refusal(r), GrantRefusal::Forged, "{what}");
    }
    // None of that touched the grant.
    f.desk
        .redeem_step_grant(WORKBENCH, &g.token, &claim())
        .await
        .unwrap();
}

#[tokio::test]
async fn each_mismatch_is_refused_with_its_code_and_leaves_the_grant_live() {
    let f = fixture().await;
    let g = mint(&f, claim()).await;
    type Edit = fn(&mut StepClaim);
    let cases: &[(&str, Edit)] = &[
        ("other step index", |c| c.step_index = 3),
        ("other step digest", |c| {
            c.step_digest = Sha256Digest::of(b"bytes changed on the way")
        }),
        ("other plan", |c| {
            c.plan_digest = Sha256Digest::of(b"other plan")
        }),
        ("other instance", |c| c.instance_id = "vm-2".into()),
        ("other experiment", |c| c.experiment_id = "exp-2".into()),
        ("other pack", |c| c.pack_name = "other-pack".into()),
        ("newer generation", |c| c.pack_generation = 4),
        ("older generation", |c| c.pack_generation = 2),
    ];
    let mut table = String::new();
    for (what, edit) in cases {
        let mut c = claim();
        edit(&mut c);
        let r = f.desk.redeem_step_grant(WORKBENCH, &g.token, &c).await;
        table += &format!("{what:<20} {}\n", grant_refusal(r));
    }
    expect_test::expect![[r#"
        other step index     grant/other-step
        other step digest    grant/other-step
        other plan           grant/other-plan
        other instance       grant/other-instance
        other experiment     grant/other-experiment
        other pack           grant/other-pack
        newer generation     package/generation-stale
        older generation     package/generation-stale
    "#]]
    .assert_eq(&table);
    // Refused eight times, still unredeemed: the right claim redeems it, once.
    let r = f
        .desk
        .redeem_step_grant(WORKBENCH, &g.token, &claim())
        .await
        .unwrap();
    assert_eq!(r.id(), &g.id);
    let again = f
        .desk
        .redeem_step_grant(WORKBENCH, &g.token, &claim())
        .await;
    assert_eq!(grant_refusal(again), GrantRefusal::Used);
}

#[tokio::test]
async fn a_fence_above_the_grant_makes_it_stale() {
    let f = fixture().await;
    let g = mint(&f, claim()).await;
    let other_step = mint(
        &f,
        StepClaim {
            step_index: 3,
            ..claim()
        },
    )
    .await;
    let fenced = fence(&f, 4).await;
    assert_eq!((fenced.current_generation, fenced.stale_grants), (4, 2));

    let r = f
        .desk
        .redeem_step_grant(WORKBENCH, &g.token, &claim())
        .await;
    assert_eq!(grant_refusal(r), GrantRefusal::GenerationStale);
    // Claiming the new generation does not revive a grant minted under the old one.
    let newer = StepClaim {
        pack_generation: 4,
        ..claim()
    };
    let r = f.desk.redeem_step_grant(WORKBENCH, &g.token, &newer).await;
    assert_eq!(grant_refusal(r), GrantRefusal::GenerationStale);
    let r = f
        .desk
        .redeem_step_grant(
            WORKBENCH,
            &other_step.token,
            &StepClaim {
                step_index: 3,
                ..claim()
            },
        )
        .await;
    assert_eq!(grant_refusal(r), GrantRefusal::GenerationStale);

    // A grant under the fenced generation mints and redeems.
    let fresh = mint(&f, newer.clone()).await;
    f.desk
        .redeem_step_grant(WORKBENCH, &fresh.token, &newer)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_mint_below_the_fence_is_refused_and_the_fence_only_rises() {
    let f = fixture().await;
    let up = fence(&f, 5).await;
    assert_eq!((up.current_generation, up.stale_grants), (5, 0));
    // Lower generations are ignored, whatever else they say; the recorded standing is returned.
    for lower in [3, 0, 5] {
        let late = reach_ward_desk::FenceRequest {
            paused: lower != 5,
            ..standing(lower, HilMode::EachMutation)
        };
        let f2 = f.desk.fence_pack(CORE, &late).await.unwrap();
        assert_eq!(
            (f2.current_generation, f2.epoch),
            (5, up.epoch),
            "fence at {lower}"
        );
    }
    let r = f.desk.mint_step_grant(CORE, request(claim())).await;
    assert_eq!(grant_refusal(r), GrantRefusal::GenerationStale);
    let at_fence = StepClaim {
        pack_generation: 5,
        ..claim()
    };
    mint(&f, at_fence).await;
    // Fences are per pack: one core never fenced mints nothing.
    let elsewhere = StepClaim {
        pack_name: "another-pack".into(),
        ..claim()
    };
    let r = f.desk.mint_step_grant(CORE, request(elsewhere)).await;
    assert_eq!(grant_refusal(r), GrantRefusal::Unfenced);
    // And they survive a restart of ward.
    let reopened = reach_ward_desk::Desk::open(
        &f.dir.path().join("ward.sqlite3"),
        WardKey::from_bytes(&[7; 32]).unwrap(),
        WardPolicy::default(),
        Arc::new(f.clock.clone()),
    )
    .await
    .unwrap();
    let r = reopened.mint_step_grant(CORE, request(claim())).await;
    assert_eq!(grant_refusal(r), GrantRefusal::GenerationStale);
    assert_eq!(
        reopened
            .fence_pack(CORE, &standing(1, HilMode::EachMutation))
            .await
            .unwrap()
            .current_generation,
        5
    );
}

#[tokio::test]
async fn an_expired_grant_is_refused() {
    let f = fixture().await;
    let ttl = Duration::from_secs(5);
    let step = |i| StepClaim {
        step_index: i,
        ..claim()
    };
    let mut early = request(step(0));
    early.ttl = Some(ttl);
    let mut late = request(step(1));
    late.ttl = Some(ttl);
    let early = f.desk.mint_step_grant(CORE, early).await.unwrap();
    let late = f.desk.mint_step_grant(CORE, late).await.unwrap();
    assert_eq!(late.expires_at, START.plus(ttl));

    f.advance(ttl - Duration::from_millis(1));
    f.desk
        .redeem_step_grant(WORKBENCH, &early.token, &step(0))
        .await
        .unwrap();
    f.advance(Duration::from_millis(1));
    let r = f
        .desk
        .redeem_step_grant(WORKBENCH, &late.token, &step(1))
        .await;
    assert_eq!(grant_refusal(r), GrantRefusal::Expired);
    // Redeemed before it expired, it says used, not expired.
    let r = f
        .desk
        .redeem_step_grant(WORKBENCH, &early.token, &step(0))
        .await;
    assert_eq!(grant_refusal(r), GrantRefusal::Used);
}

#[tokio::test]
async fn a_grant_never_outlives_the_ward_process_that_minted_it() {
    let f = fixture().await;
    let live = mint(&f, claim()).await;
    let used = mint(
        &f,
        StepClaim {
            step_index: 0,
            ..claim()
        },
    )
    .await;
    f.desk
        .redeem_step_grant(
            WORKBENCH,
            &used.token,
            &StepClaim {
                step_index: 0,
                ..claim()
            },
        )
        .await
        .unwrap();
    let reopened = reach_ward_desk::Desk::open(
        &f.dir.path().join("ward.sqlite3"),
        WardKey::from_bytes(&[7; 32]).unwrap(),
        WardPolicy::default(),
        Arc::new(f.clock.clone()),
    )
    .await
    .unwrap();
    // A redemption lost to an OS crash cannot let the step run twice: the grant is void.
    let r = reopened
        .redeem_step_grant(WORKBENCH, &live.token, &claim())
        .await;
    assert_eq!(grant_refusal(r), GrantRefusal::Expired);
    let r = reopened
        .redeem_step_grant(
            WORKBENCH,
            &used.token,
            &StepClaim {
                step_index: 0,
                ..claim()
            },
        )
        .await;
    assert_eq!(grant_refusal(r), GrantRefusal::Used);
}

#[tokio::test]
async fn a_row_edited_in_the_store_redeems_nothing() {
    let f = fixture().await;
    let g = mint(&f, claim()).await;
    let pool = sqlx::SqlitePool::connect(&format!(
        "sqlite://{}",
        f.dir.path().join("ward.sqlite3").display()
    ))
    .await
    .unwrap();
    // Someone with the store but not the key rebinds the grant to another step.
    let other = Sha256Digest::of(b"another step");
    sqlx::query(
        "UPDATE step_grant SET step_digest = ?1, effect_class = 'contained-mutation' WHERE id = ?2",
    )
    .bind(other.to_string())
    .bind(g.id.as_str())
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    let edited = StepClaim {
        step_digest: other,
        ..claim()
    };
    let r = f.desk.redeem_step_grant(WORKBENCH, &g.token, &edited).await;
    assert_eq!(grant_refusal(r), GrantRefusal::Forged);
}

#[tokio::test]
async fn malformed_or_out_of_policy_mints_are_bad_requests() {
    let f = Fixture::with_policy(WardPolicy {
        step_grants: StepGrantPolicy {
            default_ttl_ms: 1_000,
            max_ttl_ms: 10_000,
        },
        ..WardPolicy::default()
    })
    .await;
    fence(&f, 3).await;
    type Edit = fn(&mut StepGrantRequest);
    let cases: &[(&str, Edit)] = &[
        ("empty experiment", |r| r.step.experiment_id.clear()),
        ("spaced instance", |r| r.step.instance_id = "vm 1".into()),
        ("long pack name", |r| r.step.pack_name = "p".repeat(129)),
        ("generation past i64", |r| r.step.pack_generation = u64::MAX),
        ("ttl over the maximum", |r| {
            r.ttl = Some(Duration::from_millis(10_001))
        }),
        ("ttl zero", |r| r.ttl = Some(Duration::ZERO)),
    ];
    let mut table = String::new();
    for (what, edit) in cases {
        let mut r = request(claim());
        edit(&mut r);
        let refused = f.desk.mint_step_grant(CORE, r).await;
        table += &format!("{what:<22} {}\n", grant_refusal(refused));
    }
    expect_test::expect![[r#"
        empty experiment       grant/bad-request: experiment_id
        spaced instance        grant/bad-request: instance_id
        long pack name         grant/bad-request: pack_name
        generation past i64    grant/bad-request: pack_generation
        ttl over the maximum   grant/bad-request: ttl_ms
        ttl zero               grant/bad-request: ttl_ms
    "#]]
    .assert_eq(&table);
    let mut at_max = request(claim());
    at_max.ttl = Some(Duration::from_millis(10_000));
    let g = f.desk.mint_step_grant(CORE, at_max).await.unwrap();
    assert_eq!(g.expires_at, START.plus(Duration::from_millis(10_000)));
    assert_eq!(
        mint(&f, claim()).await.expires_at,
        START.plus(Duration::from_millis(1_000))
    );
    // A malformed claim at redemption is refused the same way and consumes nothing.
    let bad = StepClaim {
        experiment_id: String::new(),
        ..claim()
    };
    let r = f.desk.redeem_step_grant(WORKBENCH, &g.token, &bad).await;
    assert_eq!(grant_refusal(r), GrantRefusal::BadRequest("experiment_id"));
    f.desk
        .redeem_step_grant(WORKBENCH, &g.token, &claim())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_redeems_of_one_grant_admit_exactly_one() {
    let f = fixture().await;
    for round in 0..10u32 {
        let step = StepClaim {
            step_index: round,
            ..claim()
        };
        let g = mint(&f, step.clone()).await;
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..8 {
            let (desk, token, step) = (f.desk.clone(), g.token.clone(), step.clone());
            set.spawn(async move { desk.redeem_step_grant(WORKBENCH, &token, &step).await });
        }
        let (mut won, mut used) = (0, 0);
        while let Some(r) = set.join_next().await {
            match r.unwrap() {
                Ok(_) => won += 1,
                Err(DeskError::Grant(GrantRefusal::Used)) => used += 1,
                Err(e) => panic!("round {round}: unexpected {e:?}"),
            }
        }
        assert_eq!((won, used), (1, 7), "round {round}");
    }
}

/// Through the real port: mTLS on a Unix socket, the manifest's authorization (core mints and
/// fences, workbench redeems) and the gRPC adapter's one status mapping.
#[tokio::test]
async fn over_the_port_refusals_are_errors_that_start_with_their_code() {
    let f = fixture().await;
    let td = TrustDomain::new("grant.test").unwrap();
    let root = TrustRoot::generate(&td, SystemTime::now()).unwrap();
    let p = |n: &str| Principal::new(td.clone(), n).unwrap();
    for who in ["ward", "core", WORKBENCH] {
        root.provision(&f.dir.path().join(who), &p(who), Duration::from_secs(3600))
            .unwrap();
    }
    let m = |who: &str| PortMaterial::load(&f.dir.path().join(who), td.clone()).unwrap();
    let sock = f.dir.path().join("ward.sock");
    let policy = PortPolicy::new("ward.authority")
        .allow(p("core"), "/reach.ward.v1.Ward/MintStepGrant")
        .allow(p("core"), "/reach.ward.v1.Ward/FencePack")
        .allow(p(WORKBENCH), "/reach.ward.v1.Ward/RedeemStepGrant");
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
    let (mut core, mut workbench) = (connect("core").await, connect(WORKBENCH).await);
    let c = claim();
    let mint_req = MintStepGrantRequest {
        experiment_id: c.experiment_id.clone(),
        instance_id: c.instance_id.clone(),
        plan_digest: c.plan_digest.to_string(),
        step_index: c.step_index,
        step_digest: c.step_digest.to_string(),
        pack_name: c.pack_name.clone(),
        pack_generation: c.pack_generation,
        effect_class: "observation".into(),
        ttl_ms: 0,
        profile_digest: profile().to_string(),
        hil_required: false,
    };
    let minted = core
        .mint_step_grant(mint_req.clone())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        minted.expires_at_unix_ms,
        u64::try_from(START.0).unwrap() + 60_000
    );
    let redeem_req = RedeemStepGrantRequest {
        grant: minted.grant.clone(),
        experiment_id: c.experiment_id.clone(),
        instance_id: c.instance_id.clone(),
        plan_digest: c.plan_digest.to_string(),
        step_index: c.step_index,
        step_digest: c.step_digest.to_string(),
        pack_name: c.pack_name.clone(),
        pack_generation: c.pack_generation,
    };

    // Refusals first (they consume nothing), then the one redemption, then reuse.
    let mut table = String::new();
    let mut line = |what: &str, s: String| table += &format!("{what:<24} {s}\n");
    let other_step = RedeemStepGrantRequest {
        step_digest: Sha256Digest::of(b"other").to_string(),
        ..redeem_req.clone()
    };
    line(
        "other step digest",
        status(workbench.redeem_step_grant(other_step).await),
    );
    let malformed = RedeemStepGrantRequest {
        step_digest: "sha256:abc".into(),
        ..redeem_req.clone()
    };
    line(
        "malformed step digest",
        status(workbench.redeem_step_grant(malformed).await),
    );
    let forged = RedeemStepGrantRequest {
        grant: flip(&minted.grant, minted.grant.len() - 1),
        ..redeem_req.clone()
    };
    line("forged", status(workbench.redeem_step_grant(forged).await));
    let bad_class = MintStepGrantRequest {
        effect_class: "mutation".into(),
        ..mint_req.clone()
    };
    line(
        "mint, unknown class",
        status(core.mint_step_grant(bad_class).await),
    );
    line(
        "workbench mints",
        status(workbench.mint_step_grant(mint_req.clone()).await),
    );
    line(
        "core redeems",
        status(core.redeem_step_grant(redeem_req.clone()).await),
    );

    let redeemed = workbench
        .redeem_step_grant(redeem_req.clone())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (redeemed.grant_id.as_str(), redeemed.effect_class.as_str()),
        (minted.grant_id.as_str(), "observation")
    );
    assert_eq!(
        redeemed.redeemed_at_unix_ms,
        u64::try_from(START.0).unwrap()
    );
    line(
        "second redemption",
        status(workbench.redeem_step_grant(redeem_req.clone()).await),
    );

    let fenced = core
        .fence_pack(FencePackRequest {
            pack_name: PACK.into(),
            current_generation: 9,
            bound_profile_digest: profile().to_string(),
            active_profile_digest: profile().to_string(),
            hil: "each-mutation".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((fenced.current_generation, fenced.stale_grants), (9, 0));
    let unstated = FencePackRequest {
        pack_name: PACK.into(),
        current_generation: 10,
        ..Default::default()
    };
    line(
        "fence without a profile",
        status(core.fence_pack(unstated).await),
    );
    line(
        "mint below the fence",
        status(core.mint_step_grant(mint_req.clone()).await),
    );
    expect_test::expect![[r#"
        other step digest        FailedPrecondition grant/other-step
        malformed step digest    InvalidArgument grant/bad-request: step_digest
        forged                   PermissionDenied grant/forged
        mint, unknown class      InvalidArgument grant/bad-request: effect_class
        workbench mints          PermissionDenied spiffe://grant.test/workbench may not call /reach.ward.v1.Ward/MintStepGrant
        core redeems             PermissionDenied spiffe://grant.test/core may not call /reach.ward.v1.Ward/RedeemStepGrant
        second redemption        FailedPrecondition grant/used
        fence without a profile  InvalidArgument grant/bad-request: bound_profile_digest
        mint below the fence     FailedPrecondition package/generation-stale
    "#]]
    .assert_eq(&table);
}
