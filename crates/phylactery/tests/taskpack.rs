//! Task-pack lifecycle and local bindings (issue 27 items 4 and 5), each test on SQLite and on
//! PostgreSQL: install and the rollback fence (also under concurrency), generations across
//! activate / revoke / reactivate / upgrade, what each transition does to the binding, the
//! binding's refusals, the event log, a restart, and the database's own guards against raw SQL.
#![allow(clippy::disallowed_methods)] // Test knobs (the PostgreSQL URL), never secrets.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use reach_digest::Sha256Digest;
use reach_phylactery::*;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::SqliteConnectOptions;

const PACK: &str = "app-local";

fn profile(tag: &str) -> Sha256Digest {
    Sha256Digest::of(format!("task-profile {tag}"))
}

fn install_of(name: &str, version: u64, profile_tag: &str) -> PackInstall {
    PackInstall {
        name: name.into(),
        version,
        archive_digest: Sha256Digest::of(format!("archive {name} {version}")),
        facts_digest: Sha256Digest::of(format!("facts {name} {version}")),
        profile_digest: profile(profile_tag),
        signer: "operator-pack-key-1".into(),
        expires_at_s: 1_900_000_000,
        archive_path: format!("/var/lib/reach/packs/{name}-{version}.tar"),
    }
}

async fn install(p: &Phylactery, version: u64, profile_tag: &str) -> PackRecord {
    p.pack_install(&install_of(PACK, version, profile_tag))
        .await
        .unwrap()
}

fn binding_of(pack: &str) -> NewBinding {
    NewBinding {
        pack: pack.into(),
        workspace: "/home/operator/lab".into(),
        vm_backend: "qemu".into(),
        model: None,
        network: "none".into(),
        hil: "each-step".into(),
        max_concurrent_runs: 1,
        publication: false,
    }
}

fn code<T: std::fmt::Debug>(r: Result<T>) -> &'static str {
    r.expect_err("expected a refusal").code()
}

async fn status(p: &Phylactery) -> PackStatus {
    p.pack_status(PACK).await.unwrap().unwrap()
}

async fn binding(p: &Phylactery) -> BindingRecord {
    p.binding(PACK).await.unwrap().unwrap()
}

fn kinds(s: &PackStatus) -> Vec<(PackEventKind, u64, u64)> {
    s.events
        .iter()
        .map(|e| (e.event, e.version, e.generation))
        .collect()
}

async fn install_is_inert_and_refuses_rollback(db: Db) {
    let (p, clock, _g) = open(db, "pack_install").await;
    assert!(p.pack_status(PACK).await.unwrap().is_none());
    assert!(p.pack_list().await.unwrap().is_empty());

    let v2 = install(&p, 2, "A").await;
    assert_eq!((v2.version, v2.installed_at), (2, T0));
    assert_eq!(v2.profile_digest, profile("A"));
    let s = status(&p).await;
    assert_eq!(s.state, PackState::Inactive);
    assert_eq!(
        (s.active_version, s.generation, s.highest_version),
        (None, 0, 2)
    );
    assert_eq!(s.versions, vec![v2.clone()]);
    assert_eq!(kinds(&s), vec![(PackEventKind::Installed, 2, 0)]);

    // Not newer than the highest ever installed: the same version, an older one, version 0.
    for v in [2, 1, 0] {
        let err = p.pack_install(&install_of(PACK, v, "A")).await.unwrap_err();
        assert_eq!(err.code(), "package/rollback", "{err}");
        match err {
            LedgerError::TaskPack(TaskPackRefusal::Rollback {
                version, highest, ..
            }) => assert_eq!((version, highest), (v, 2)),
            e => panic!("expected a rollback refusal, got {e}"),
        }
    }
    assert_eq!(status(&p).await, s, "a refused install changes nothing");

    // A newer one is stored beside it; still nothing is active or bound.
    clock.advance(Duration::from_secs(5));
    let v3 = install(&p, 3, "B").await;
    assert_eq!(v3.installed_at, UnixMillis(T0.0 + 5_000));
    let s = status(&p).await;
    assert_eq!(s.state, PackState::Inactive);
    assert_eq!(s.versions, vec![v2, v3]);
    assert!(p.binding(PACK).await.unwrap().is_none());

    // Another name has its own versions; the list is by name.
    p.pack_install(&install_of("web-local", 1, "Q"))
        .await
        .unwrap();
    let names: Vec<_> = p
        .pack_list()
        .await
        .unwrap()
        .into_iter()
        .map(|s| (s.name, s.highest_version))
        .collect();
    assert_eq!(
        names,
        vec![(PACK.to_owned(), 3), ("web-local".to_owned(), 1)]
    );

    // Empty fields and out-of-range numbers are invalid input.
    for bad in [
        PackInstall {
            name: " ".into(),
            ..install_of(PACK, 9, "A")
        },
        PackInstall {
            signer: String::new(),
            ..install_of(PACK, 9, "A")
        },
        PackInstall {
            archive_path: String::new(),
            ..install_of(PACK, 9, "A")
        },
        PackInstall {
            version: u64::MAX,
            ..install_of(PACK, 9, "A")
        },
    ] {
        assert_eq!(code(p.pack_install(&bad).await), "ledger/invalid-input");
    }
    p.close().await;
}

async fn concurrent_installs_of_one_version_have_one_winner(db: Db) {
    let (p, _clock, _g) = open(db, "pack_race").await;
    for round in 1..=3u64 {
        // Eight installs of the same version at once: exactly one is stored.
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let p = p.clone();
                tokio::spawn(async move { p.pack_install(&install_of(PACK, round, "A")).await })
            })
            .collect();
        let mut won = 0;
        for t in tasks {
            match t.await.unwrap() {
                Ok(r) => {
                    assert_eq!(r.version, round);
                    won += 1;
                }
                Err(e) => assert_eq!(e.code(), "package/rollback", "{e}"),
            }
        }
        assert_eq!(won, 1, "round {round}");
    }
    let s = status(&p).await;
    assert_eq!(s.versions.len(), 3);
    assert_eq!(
        kinds(&s),
        (1..=3)
            .map(|v| (PackEventKind::Installed, v, 0))
            .collect::<Vec<_>>()
    );

    // Different versions at once: whatever wins, no version is stored after a higher one.
    let tasks: Vec<_> = (4..12u64)
        .rev()
        .map(|v| {
            let p = p.clone();
            tokio::spawn(async move { p.pack_install(&install_of(PACK, v, "A")).await })
        })
        .collect();
    for t in tasks {
        if let Err(e) = t.await.unwrap() {
            assert_eq!(e.code(), "package/rollback", "{e}");
        }
    }
    let installed: Vec<u64> = status(&p).await.events.iter().map(|e| e.version).collect();
    assert!(
        installed.windows(2).all(|w| w[0] < w[1]),
        "installed in increasing order: {installed:?}"
    );
    p.close().await;
}

async fn generations_across_activate_revoke_reactivate(db: Db) {
    let (p, clock, _g) = open(db, "pack_generations").await;
    install(&p, 1, "A").await;

    // Binding needs an active pack.
    let err = p.bind(&binding_of(PACK)).await.unwrap_err();
    assert_eq!(err.code(), "package/not-active");
    assert!(err.to_string().contains("inactive"), "{err}");
    assert_eq!(
        code(p.bind(&binding_of("no-such-pack")).await),
        "package/not-installed"
    );

    clock.advance(Duration::from_secs(1));
    let a = p.pack_activate(PACK, None).await.unwrap();
    assert_eq!(a.event, PackEventKind::Activated);
    assert_eq!(
        (a.from, a.state),
        (PackState::Inactive, PackState::Active { version: 1 })
    );
    assert_eq!((a.generation, a.binding), (1, None));
    assert_eq!(
        code(p.pack_activate(PACK, None).await),
        "package/already-active"
    );
    assert_eq!(
        code(p.pack_activate(PACK, Some(1)).await),
        "package/already-active"
    );

    let b = p.bind(&binding_of(PACK)).await.unwrap();
    assert_eq!((b.bound_generation, b.bound_version), (1, 1));
    assert_eq!(b.bound_profile_digest, profile("A"));
    assert_eq!(b.standing, BindingStanding::Current);
    assert!(!b.paused && !b.publication);
    assert_eq!(
        (b.hil.as_str(), b.network.as_str(), b.max_concurrent_runs),
        ("each-step", "none", 1)
    );
    // Accepting a current binding changes nothing and writes no event.
    assert_eq!(p.bind_accept(PACK).await.unwrap(), b);

    clock.advance(Duration::from_secs(1));
    let r = p.pack_revoke(PACK).await.unwrap();
    assert_eq!((r.event, r.generation), (PackEventKind::Revoked, 2));
    assert_eq!(r.state, PackState::Revoked { version: 1 });
    assert_eq!(r.binding, Some(BindingStanding::PackRevoked { version: 1 }));
    assert_eq!(binding(&p).await.standing.code(), Some("package/revoked"));
    assert_eq!(code(p.pack_revoke(PACK).await), "package/not-active");
    assert_eq!(code(p.bind(&binding_of(PACK)).await), "package/not-active");
    assert_eq!(code(p.bind_accept(PACK).await), "package/not-active");
    assert_eq!(code(p.profile_digests(PACK).await), "package/not-active");

    // Reactivation: generation 3, and the binding is stale (bound 1) until accepted.
    clock.advance(Duration::from_secs(1));
    let ra = p.pack_activate(PACK, None).await.unwrap();
    assert_eq!((ra.event, ra.generation), (PackEventKind::Reactivated, 3));
    assert_eq!(ra.from, PackState::Revoked { version: 1 });
    let stale = BindingStanding::GenerationStale {
        bound_generation: 1,
        generation: 3,
    };
    assert_eq!(ra.binding, Some(stale));
    let b = binding(&p).await;
    assert_eq!(
        (b.standing, b.standing.code()),
        (stale, Some("package/generation-stale"))
    );
    assert_eq!(b.bound_generation, 1);
    let d = p.profile_digests(PACK).await.unwrap();
    assert!(!d.changed());
    assert_eq!((d.bound_version, d.current_version), (1, 1));

    clock.advance(Duration::from_secs(1));
    let accepted = p.bind_accept(PACK).await.unwrap();
    assert_eq!(accepted.standing, BindingStanding::Current);
    assert_eq!((accepted.bound_generation, accepted.bound_version), (3, 1));
    assert_eq!(accepted.bound_at, UnixMillis(T0.0 + 4_000));
    assert_eq!(accepted.created_at, b.created_at);

    let s = status(&p).await;
    assert_eq!(
        (s.state, s.active_version, s.generation),
        (PackState::Active { version: 1 }, Some(1), 3)
    );
    use PackEventKind::*;
    assert_eq!(
        kinds(&s),
        vec![
            (Installed, 1, 0),
            (Activated, 1, 1),
            (Bound, 1, 1),
            (Revoked, 1, 2),
            (Reactivated, 1, 3),
            (BindingAccepted, 1, 3),
        ]
    );
    let at: Vec<i64> = s.events.iter().map(|e| e.at.0 - T0.0).collect();
    assert_eq!(at, vec![0, 1_000, 1_000, 2_000, 3_000, 4_000]);
    assert!(s.events.windows(2).all(|w| w[0].event_id < w[1].event_id));
    p.close().await;
}

async fn upgrade_with_the_same_profile_carries_the_binding(db: Db) {
    let (p, _clock, _g) = open(db, "pack_carry").await;
    install(&p, 1, "A").await;
    p.pack_activate(PACK, None).await.unwrap();
    let before = p.bind(&binding_of(PACK)).await.unwrap();

    // Installing v2 changes neither the state nor the binding.
    install(&p, 2, "A").await;
    assert_eq!(status(&p).await.state, PackState::Active { version: 1 });
    assert_eq!(binding(&p).await, before);

    let u = p.pack_activate(PACK, None).await.unwrap();
    assert_eq!((u.event, u.generation), (PackEventKind::Upgraded, 2));
    assert_eq!(u.binding, Some(BindingStanding::Current));
    let b = binding(&p).await;
    assert_eq!((b.bound_generation, b.bound_version), (2, 2));
    assert_eq!(b.bound_profile_digest, profile("A"));
    assert_eq!(b.bound_at, before.bound_at, "carried, not re-accepted");
    let last: Vec<_> = kinds(&status(&p).await).into_iter().skip(3).collect();
    assert_eq!(
        last,
        vec![
            (PackEventKind::Installed, 2, 1),
            (PackEventKind::Upgraded, 2, 2),
            (PackEventKind::BindingCarried, 2, 2),
        ]
    );

    // A downgrade is refused; so is a version never installed.
    assert_eq!(
        code(p.pack_activate(PACK, Some(1)).await),
        "package/downgrade"
    );
    let err = p.pack_activate(PACK, Some(7)).await.unwrap_err();
    assert_eq!(err.code(), "package/not-installed");
    assert!(matches!(
        err,
        LedgerError::TaskPack(TaskPackRefusal::NotInstalled {
            version: Some(7),
            ..
        })
    ));
    assert_eq!(
        code(p.pack_activate("no-such-pack", None).await),
        "package/not-installed"
    );
    assert_eq!(status(&p).await.generation, 2, "refusals change nothing");
    p.close().await;
}

async fn upgrade_with_a_changed_profile_waits_for_accept(db: Db) {
    let (p, _clock, _g) = open(db, "pack_profile").await;
    install(&p, 1, "A").await;
    p.pack_activate(PACK, None).await.unwrap();
    p.bind(&binding_of(PACK)).await.unwrap();

    install(&p, 2, "B").await;
    let u = p.pack_activate(PACK, None).await.unwrap();
    let changed = BindingStanding::ProfileChanged {
        bound_version: 1,
        bound: profile("A"),
        current_version: 2,
        current: profile("B"),
    };
    assert_eq!(
        (u.event, u.binding),
        (PackEventKind::Upgraded, Some(changed))
    );
    let b = binding(&p).await;
    assert_eq!(b.standing.code(), Some("local-binding/profile-changed"));
    assert_eq!((b.bound_generation, b.bound_version), (1, 1));
    assert_eq!(b.bound_profile_digest, profile("A"));
    let d = p.profile_digests(PACK).await.unwrap();
    assert!(d.changed());
    assert_eq!((d.bound, d.current), (profile("A"), profile("B")));

    // Still left behind by a further upgrade to yet another profile...
    install(&p, 3, "C").await;
    p.pack_activate(PACK, None).await.unwrap();
    assert!(matches!(
        binding(&p).await.standing,
        BindingStanding::ProfileChanged {
            bound_version: 1,
            current_version: 3,
            ..
        }
    ));
    // ...and carried again by an upgrade back to the profile it was pinned to.
    install(&p, 4, "A").await;
    let u = p.pack_activate(PACK, None).await.unwrap();
    assert_eq!(u.binding, Some(BindingStanding::Current));
    assert_eq!(binding(&p).await.bound_version, 4);

    // A changed profile, then accept: pinned to the new digest.
    install(&p, 5, "B").await;
    p.pack_activate(PACK, None).await.unwrap();
    let a = p.bind_accept(PACK).await.unwrap();
    assert_eq!(a.standing, BindingStanding::Current);
    assert_eq!((a.bound_generation, a.bound_version), (5, 5));
    assert_eq!(a.bound_profile_digest, profile("B"));
    assert!(!p.profile_digests(PACK).await.unwrap().changed());
    p.close().await;
}

async fn reactivation_is_never_carried(db: Db) {
    let (p, _clock, _g) = open(db, "pack_reactivate").await;
    install(&p, 1, "A").await;
    p.pack_activate(PACK, None).await.unwrap();
    p.bind(&binding_of(PACK)).await.unwrap();
    p.pack_revoke(PACK).await.unwrap();
    // Reactivating a newer version with the same profile: still stale.
    install(&p, 2, "A").await;
    let ra = p.pack_activate(PACK, Some(2)).await.unwrap();
    assert_eq!((ra.event, ra.generation), (PackEventKind::Reactivated, 3));
    // A later same-profile upgrade does not carry it either: the revocation needs an accept.
    install(&p, 3, "A").await;
    let u = p.pack_activate(PACK, None).await.unwrap();
    assert_eq!(
        u.binding,
        Some(BindingStanding::GenerationStale {
            bound_generation: 1,
            generation: 4
        })
    );
    // Reactivating below the revoked version is a downgrade.
    p.pack_revoke(PACK).await.unwrap();
    assert_eq!(
        code(p.pack_activate(PACK, Some(2)).await),
        "package/downgrade"
    );
    let ra = p.pack_activate(PACK, Some(3)).await.unwrap();
    assert_eq!((ra.event, ra.generation), (PackEventKind::Reactivated, 6));
    let a = p.bind_accept(PACK).await.unwrap();
    assert_eq!(
        (a.bound_generation, a.standing),
        (6, BindingStanding::Current)
    );
    p.close().await;
}

async fn binding_pause_resume_and_rebind(db: Db) {
    let (p, clock, _g) = open(db, "pack_binding").await;
    install(&p, 1, "A").await;
    assert_eq!(code(p.bind_pause(PACK).await), "local-binding/missing");
    assert_eq!(
        code(p.bind_pause("no-such-pack").await),
        "package/not-installed"
    );
    p.pack_activate(PACK, None).await.unwrap();
    assert_eq!(code(p.bind_pause(PACK).await), "local-binding/missing");
    assert_eq!(code(p.bind_resume(PACK).await), "local-binding/missing");
    assert_eq!(code(p.bind_accept(PACK).await), "local-binding/missing");
    assert_eq!(code(p.profile_digests(PACK).await), "local-binding/missing");
    assert!(p.binding(PACK).await.unwrap().is_none());

    let first = p.bind(&binding_of(PACK)).await.unwrap();
    assert_eq!(code(p.bind_resume(PACK).await), "local-binding/not-paused");
    let paused = p.bind_pause(PACK).await.unwrap();
    assert!(paused.paused);
    assert_eq!(
        paused.standing,
        BindingStanding::Current,
        "a pause is beside the standing"
    );
    assert_eq!(code(p.bind_pause(PACK).await), "local-binding/paused");

    // Re-binding replaces every choice and re-pins, but keeps the pause and the creation time.
    clock.advance(Duration::from_secs(10));
    let rebound = p
        .bind(&NewBinding {
            model: Some("local-llm".into()),
            hil: "each-mutation".into(),
            max_concurrent_runs: 2,
            publication: true,
            workspace: "/srv/lab".into(),
            ..binding_of(PACK)
        })
        .await
        .unwrap();
    assert!(rebound.paused);
    assert_eq!(rebound.model.as_deref(), Some("local-llm"));
    assert_eq!(
        (rebound.hil.as_str(), rebound.workspace.as_str()),
        ("each-mutation", "/srv/lab")
    );
    assert_eq!(
        (rebound.max_concurrent_runs, rebound.publication),
        (2, true)
    );
    assert_eq!(rebound.created_at, first.created_at);
    assert_eq!(rebound.bound_at, UnixMillis(T0.0 + 10_000));

    let resumed = p.bind_resume(PACK).await.unwrap();
    assert!(!resumed.paused);
    assert_eq!(code(p.bind_resume(PACK).await), "local-binding/not-paused");
    // A pause works on a revoked pack too (the operator stops everything).
    p.pack_revoke(PACK).await.unwrap();
    assert!(p.bind_pause(PACK).await.unwrap().paused);

    use PackEventKind::*;
    let events: Vec<_> = status(&p).await.events.iter().map(|e| e.event).collect();
    assert_eq!(
        events,
        vec![
            Installed,
            Activated,
            Bound,
            BindingPaused,
            Bound,
            BindingResumed,
            Revoked,
            BindingPaused
        ]
    );

    // Values: empty strings, an unknown HIL mode, zero runs.
    p.pack_activate(PACK, None).await.unwrap();
    for bad in [
        NewBinding {
            workspace: String::new(),
            ..binding_of(PACK)
        },
        NewBinding {
            vm_backend: " ".into(),
            ..binding_of(PACK)
        },
        NewBinding {
            network: String::new(),
            ..binding_of(PACK)
        },
        NewBinding {
            model: Some(String::new()),
            ..binding_of(PACK)
        },
        NewBinding {
            hil: "never".into(),
            ..binding_of(PACK)
        },
        NewBinding {
            max_concurrent_runs: 0,
            ..binding_of(PACK)
        },
        NewBinding {
            pack: String::new(),
            ..binding_of(PACK)
        },
    ] {
        assert_eq!(code(p.bind(&bad).await), "ledger/invalid-input", "{bad:?}");
    }
    p.close().await;
}

async fn a_restart_keeps_everything(db: Db) {
    let (cfg, _g) = config(db, "pack_restart");
    let clock = ManualClock::new(T0);
    let p = Phylactery::open(cfg.clone(), Arc::new(clock.clone()))
        .await
        .unwrap();
    install(&p, 1, "A").await;
    p.pack_activate(PACK, None).await.unwrap();
    p.bind(&binding_of(PACK)).await.unwrap();
    install(&p, 2, "B").await;
    p.pack_activate(PACK, None).await.unwrap();
    p.bind_pause(PACK).await.unwrap();
    p.pack_install(&install_of("web-local", 1, "Q"))
        .await
        .unwrap();
    let packs = p.pack_list().await.unwrap();
    let bound = binding(&p).await;
    assert_eq!(bound.standing.code(), Some("local-binding/profile-changed"));
    p.close().await;
    drop(p);

    let p = Phylactery::open(cfg, Arc::new(clock.clone()))
        .await
        .unwrap();
    assert_eq!(p.pack_list().await.unwrap(), packs);
    assert_eq!(binding(&p).await, bound);
    // And it goes on from there.
    let a = p.bind_accept(PACK).await.unwrap();
    assert_eq!(
        (a.bound_generation, a.bound_version, a.paused),
        (2, 2, true)
    );
    assert_eq!(
        code(p.pack_install(&install_of(PACK, 2, "B")).await),
        "package/rollback"
    );
    p.close().await;
}

/// A raw connection to the same database, bypassing every Rust check.
enum Raw {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

impl Raw {
    async fn of(cfg: &VaultConfig) -> Raw {
        match &cfg.location {
            StoreLocation::Sqlite { path } => Raw::Sqlite(
                sqlx::SqlitePool::connect_with(
                    SqliteConnectOptions::new()
                        .filename(path)
                        .foreign_keys(true),
                )
                .await
                .unwrap(),
            ),
            StoreLocation::Postgres { url, schema } => {
                let opts: PgConnectOptions = url.parse().unwrap();
                let opts = opts.options([("search_path", schema.as_deref().unwrap())]);
                Raw::Postgres(
                    PgPoolOptions::new()
                        .max_connections(1)
                        .connect_with(opts)
                        .await
                        .unwrap(),
                )
            }
        }
    }

    /// Runs one statement; returns the database's refusal text, or `None` if it was accepted.
    async fn refused(&self, sql: &'static str) -> Option<String> {
        let r = match self {
            Raw::Sqlite(p) => sqlx::raw_sql(sql).execute(p).await.map(|_| ()),
            Raw::Postgres(p) => sqlx::raw_sql(sql).execute(p).await.map(|_| ()),
        };
        r.err().map(|e| e.to_string())
    }

    async fn close(self) {
        match self {
            Raw::Sqlite(p) => p.close().await,
            Raw::Postgres(p) => p.close().await,
        }
    }
}

async fn the_database_alone_holds_the_rules(db: Db) {
    let (cfg, _g) = config(db, "pack_guards");
    let clock = ManualClock::new(T0);
    let p = Phylactery::open(cfg.clone(), Arc::new(clock.clone()))
        .await
        .unwrap();
    let seq0 = p.commit_seq().await.unwrap();
    install(&p, 1, "A").await;
    install(&p, 2, "B").await;
    p.pack_activate(PACK, Some(1)).await.unwrap();
    p.bind(&binding_of(PACK)).await.unwrap();
    let seq = p.commit_seq().await.unwrap();
    assert!(
        seq >= seq0 + 4,
        "every event advances the commit sequence: {seq0} -> {seq}"
    );
    let before = status(&p).await;

    let raw = Raw::of(&cfg).await;
    let cases: &[(&'static str, &str)] = &[
        ("DELETE FROM task_pack_event", "ledger/append-only"),
        (
            "UPDATE task_pack_event SET generation = 9",
            "ledger/append-only",
        ),
        ("DELETE FROM task_pack_version", "ledger/append-only"),
        ("DELETE FROM task_binding", "ledger/append-only"),
        ("DELETE FROM task_pack", "ledger/append-only"),
        (
            "UPDATE task_pack_version SET profile_digest = archive_digest",
            "package/immutable",
        ),
        (
            "UPDATE task_pack SET generation = 0, state = 'INACTIVE', active_version = NULL",
            "package/generation-regressed",
        ),
        (
            "UPDATE task_pack SET highest_version = 1",
            "package/rollback",
        ),
        // A transition that skips the generation bump, and one that bumps it by two.
        (
            "UPDATE task_pack SET active_version = 2",
            "package/invalid-transition",
        ),
        (
            "UPDATE task_pack SET active_version = 2, generation = 3",
            "package/invalid-transition",
        ),
        (
            "UPDATE task_pack SET name = 'other'",
            "ledger/immutable-identity",
        ),
        (
            "INSERT INTO task_pack_version (name, version, archive_digest, facts_digest,
                profile_digest, signer, expires_at_s, archive_path, installed_at)
             SELECT name, 0, archive_digest, facts_digest, profile_digest, signer, expires_at_s,
                archive_path, installed_at FROM task_pack_version WHERE version = 2",
            "package/rollback",
        ),
        (
            "INSERT INTO task_pack_event (name, version, event, generation, at_ms)
             VALUES ('app-local', 1, 'revoked', 7, 0)",
            "package/event-generation",
        ),
        (
            "UPDATE task_binding SET bound_generation = 5",
            "local-binding/pin-mismatch",
        ),
        (
            "UPDATE task_binding SET bound_version = 2",
            "local-binding/pin-mismatch",
        ),
        (
            "UPDATE task_binding SET pack = 'other'",
            "ledger/immutable-identity",
        ),
    ];
    for (sql, expect) in cases {
        let err = raw.refused(sql).await;
        assert!(
            err.as_deref().is_some_and(|e| e.contains(expect)),
            "{sql}: expected {expect}, got {err:?}"
        );
    }
    // Raw transitions the table admits (upgrade to 2, revoke, reactivate) are accepted; a
    // reactivation below the revoked version is not; a binding re-pinned by hand to the new
    // generation never moves back.
    let accept = [
        "UPDATE task_pack SET generation = 2, active_version = 2",
        "UPDATE task_pack SET state = 'REVOKED', generation = 3",
        "UPDATE task_pack SET state = 'ACTIVE', generation = 4",
        "UPDATE task_binding SET bound_generation = 4, bound_version = 2,
            bound_profile_digest = (SELECT profile_digest FROM task_pack_version WHERE version = 2)",
        "UPDATE task_pack SET state = 'REVOKED', generation = 5",
    ];
    let refuse = [
        (
            "UPDATE task_pack SET state = 'ACTIVE', generation = 6, active_version = 1",
            "package/invalid-transition",
        ),
        (
            "UPDATE task_binding SET bound_generation = 3",
            "local-binding/generation-regressed",
        ),
        (
            "UPDATE task_binding SET bound_version = 1, bound_profile_digest = (SELECT
                profile_digest FROM task_pack_version WHERE version = 1)",
            "local-binding/generation-regressed",
        ),
    ];
    for sql in accept {
        assert_eq!(raw.refused(sql).await, None, "{sql}");
    }
    for (sql, expect) in refuse {
        let err = raw.refused(sql).await;
        assert!(
            err.as_deref().is_some_and(|e| e.contains(expect)),
            "{sql}: expected {expect}, got {err:?}"
        );
    }
    raw.close().await;
    // Nothing refused left a trace: the events and versions are as before, and the pack is where
    // the accepted raw statements moved it.
    let after = status(&p).await;
    assert_eq!(after.events, before.events);
    assert_eq!(after.versions, before.versions);
    assert_eq!(after.generation, 5);
    assert_eq!(after.state, PackState::Revoked { version: 2 });
    p.close().await;
}

on_both!(
    install_is_inert_and_refuses_rollback,
    concurrent_installs_of_one_version_have_one_winner,
    generations_across_activate_revoke_reactivate,
    upgrade_with_the_same_profile_carries_the_binding,
    upgrade_with_a_changed_profile_waits_for_accept,
    reactivation_is_never_carried,
    binding_pause_resume_and_rebind,
    a_restart_keeps_everything,
    the_database_alone_holds_the_rules,
);
