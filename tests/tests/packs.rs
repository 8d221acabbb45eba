//! Core's `core.packs` port on the real body (issue #27): a signed reference pack installed
//! inertly, refused when tampered, unsigned by a trusted key or rolled back; activated,
//! bound from safe defaults, and readiness walked from real states through every blocker a
//! lifecycle reaches — prepared system missing (naming the command), paused, revoked,
//! generation stale, profile changed — to `runnable`, with the prepared system staged in
//! vm-broker's cache and found by the pack's spec digests.

use std::path::PathBuf;

use reach_proto::core::v1 as pb;
use reach_proto::core::v1::packs_client::PacksClient;
use reach_tests::TestBody;
use reach_tests::packs::{PACK, build_variant, replace_in, source as pack_source};
use tonic::transport::Channel;

fn code(s: &tonic::Status) -> &str {
    s.message().split(':').next().unwrap_or_default()
}

async fn activate(c: &mut PacksClient<Channel>) -> pb::PackStatus {
    c.activate_pack(pb::ActivatePackRequest {
        name: PACK.into(),
        version: 0,
    })
    .await
    .unwrap()
    .into_inner()
}

async fn readiness(c: &mut PacksClient<Channel>) -> pb::BindStatusResponse {
    c.bind_status(pb::BindStatusRequest { pack: PACK.into() })
        .await
        .unwrap()
        .into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_lifecycle_binding_and_readiness_over_the_port() {
    let key =
        reach_taskpack::PackKey::from_pkcs8(&reach_taskpack::PackKey::generate().unwrap()).unwrap();
    let stranger =
        reach_taskpack::PackKey::from_pkcs8(&reach_taskpack::PackKey::generate().unwrap()).unwrap();
    let public = key.public().to_string();
    let cache: std::sync::Arc<std::sync::Mutex<Option<PathBuf>>> = Default::default();
    let cache_slot = cache.clone();
    let body = TestBody::start_configured(move |m, layout| {
        for role in &mut m.roles {
            match role.name.as_str() {
                "core" => {
                    let mut k = toml::Table::new();
                    k.insert("name".into(), "test-operator".into());
                    k.insert("key".into(), public.clone().into());
                    role.settings
                        .insert("pack_keys".into(), toml::Value::Array(vec![k.into()]));
                }
                "vm-broker" => {
                    let dir = layout.root().join("image-cache");
                    std::fs::create_dir_all(&dir).unwrap();
                    role.settings
                        .insert("cache".into(), dir.display().to_string().into());
                    *cache_slot.lock().unwrap() = Some(dir);
                }
                _ => {}
            }
        }
    })
    .await;
    let cache = cache.lock().unwrap().clone().expect("cache dir");
    let mut c = PacksClient::new(reach_port::connect_lazy(
        body.socket("core.packs"),
        &body.material("operator"),
        body.manifest.principal("core"),
    ))
    .max_decoding_message_size(reach_taskpack::MAX_ARCHIVE_BYTES * 2);

    let v1 = reach_taskpack::build(&pack_source(), &key).unwrap();

    // Refused at the install boundary, nothing stored: a stranger's signature, a flipped byte.
    let unsigned = reach_taskpack::build(&pack_source(), &stranger).unwrap();
    let e = c
        .install_pack(pb::InstallPackRequest {
            archive: unsigned.archive,
        })
        .await
        .unwrap_err();
    assert_eq!(code(&e), "package/unknown-signer", "{e:?}");
    let mut tampered = v1.archive.clone();
    let at = tampered.len() / 2;
    tampered[at] ^= 0x20;
    let e = c
        .install_pack(pb::InstallPackRequest { archive: tampered })
        .await
        .unwrap_err();
    assert!(
        matches!(
            code(&e),
            "package/archive-malformed" | "package/facts-mismatch" | "package/bad-signature"
        ),
        "{e:?}"
    );
    let listed = c.list_packs(pb::ListPacksRequest {}).await.unwrap();
    assert!(listed.into_inner().packs.is_empty());
    // Readiness of a pack never installed.
    assert_eq!(readiness(&mut c).await.readiness, "package/not-installed");

    // Installed inertly: not active, not bound.
    let r = c
        .install_pack(pb::InstallPackRequest {
            archive: v1.archive.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((r.name.as_str(), r.version), (PACK, 1));
    assert_eq!(r.archive_digest, v1.digest.to_string());
    assert_eq!(r.signer_name, "test-operator");
    assert!(r.fixtures_checked > 0, "{r:?}");
    assert_eq!(r.state, "inactive");
    assert_eq!(readiness(&mut c).await.readiness, "package/not-active");
    let e = c
        .bind(pb::BindRequest {
            pack: PACK.into(),
            workspace: "/tmp/reach-ws".into(),
            vm_backend: "qemu".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(code(&e), "package/not-active", "{e:?}");
    // The same version again is a rollback; the installed one stays.
    let e = c
        .install_pack(pb::InstallPackRequest {
            archive: v1.archive.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(code(&e), "package/rollback", "{e:?}");

    let s = activate(&mut c).await;
    assert_eq!((s.transition.as_str(), s.generation), ("activated", 1));
    let blocked = readiness(&mut c).await;
    assert_eq!(blocked.readiness, "local-binding/missing");
    assert!(blocked.next.contains("reach bind"), "{blocked:?}");

    // Bindings: never looser than the pack.
    let bind = |network: &str, hil: &str| pb::BindRequest {
        pack: PACK.into(),
        workspace: "/tmp/reach-ws".into(),
        vm_backend: "qemu".into(),
        network: network.into(),
        hil: hil.into(),
        ..Default::default()
    };
    let e = c.bind(bind("isolated", "")).await.unwrap_err();
    assert_eq!(code(&e), "environment/not-contained", "{e:?}");
    let e = c.bind(bind("", "never")).await.unwrap_err();
    assert_eq!(code(&e), "local-binding/hil-below-minimum", "{e:?}");
    let b = c.bind(bind("", "")).await.unwrap().into_inner();
    assert_eq!(
        (
            b.network.as_str(),
            b.hil.as_str(),
            b.max_concurrent_runs,
            b.publication
        ),
        ("none", "each-step", 1, false)
    );
    assert_eq!(b.bound_generation, 1);

    // No prepared system yet: the blocker names the command that makes it, in the cache the
    // broker searches.
    let missing = readiness(&mut c).await;
    assert_eq!(missing.readiness, "environment/prepared-system-missing");
    assert!(
        missing.next.contains("reach image prepare --pack")
            && missing.next.contains(&cache.display().to_string()),
        "{missing:?}"
    );

    // Staged in the cache with the pack's own spec digests: runnable, pins learned.
    let facts = &v1.facts;
    let variant = &facts.image_variants[0];
    let (image, prepared) = reach_vm::testing::stage_prepared(
        &cache,
        variant.image_spec_digest,
        variant.prepared_spec_digest,
    );
    let ready = readiness(&mut c).await;
    assert_eq!(ready.readiness, "runnable", "{ready:?}");
    assert_eq!(ready.image_digest, image.to_string());
    assert_eq!(ready.prepared_digest, prepared.to_string());
    let json: serde_json::Value = serde_json::from_str(&ready.json).unwrap();
    assert_eq!(json["state"], "runnable", "{json}");

    // Pause blocks, resume clears; no reactivation is needed.
    c.pause_binding(pb::BindingRef { pack: PACK.into() })
        .await
        .unwrap();
    assert_eq!(readiness(&mut c).await.readiness, "local-binding/paused");
    let e = c
        .pause_binding(pb::BindingRef { pack: PACK.into() })
        .await
        .unwrap_err();
    assert_eq!(code(&e), "local-binding/paused", "{e:?}");
    c.resume_binding(pb::BindingRef { pack: PACK.into() })
        .await
        .unwrap();
    assert_eq!(readiness(&mut c).await.readiness, "runnable");

    // Revoked, then reactivated: the binding waits for the operator's accept.
    let s = c
        .revoke_pack(pb::RevokePackRequest {
            name: PACK.into(),
            reason: "test".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((s.state.as_str(), s.generation), ("revoked", 2));
    assert_eq!(readiness(&mut c).await.readiness, "package/revoked");
    let s = activate(&mut c).await;
    assert_eq!((s.transition.as_str(), s.generation), ("reactivated", 3));
    let stale = readiness(&mut c).await;
    assert_eq!(stale.readiness, "package/generation-stale", "{stale:?}");
    assert!(stale.next.contains("reach bind accept"), "{stale:?}");
    let d = c
        .profile_diff(pb::BindingRef { pack: PACK.into() })
        .await
        .unwrap()
        .into_inner();
    assert!(d.diff.is_empty(), "{d:?}");
    c.accept_profile(pb::AcceptProfileRequest {
        pack: PACK.into(),
        profile_digest: d.active_profile_digest.clone(),
    })
    .await
    .unwrap();
    assert_eq!(readiness(&mut c).await.readiness, "runnable");

    // v2 changes only pack.toml's version: the upgrade carries the binding forward.
    let v2 = build_variant(&key, |dir| {
        replace_in(&dir.join("pack.toml"), "version = 1", "version = 2")
    })
    .archive;
    c.install_pack(pb::InstallPackRequest { archive: v2 })
        .await
        .unwrap();
    let s = activate(&mut c).await;
    assert_eq!(
        (s.transition.as_str(), s.active_version, s.profile_changed),
        ("upgraded", 2, false)
    );
    assert_eq!(readiness(&mut c).await.readiness, "runnable");

    // v3 changes the task profile: the binding waits until the operator accepts the diff.
    let v3 = build_variant(&key, |dir| {
        replace_in(&dir.join("pack.toml"), "version = 1", "version = 3");
        replace_in(
            &dir.join("task-profile.toml"),
            "max_steps = 16",
            "max_steps = 12",
        );
    })
    .archive;
    c.install_pack(pb::InstallPackRequest { archive: v3 })
        .await
        .unwrap();
    let s = activate(&mut c).await;
    assert_eq!(
        (s.transition.as_str(), s.active_version, s.profile_changed),
        ("upgraded", 3, true)
    );
    assert_eq!(
        readiness(&mut c).await.readiness,
        "local-binding/profile-changed"
    );
    let d = c
        .profile_diff(pb::BindingRef { pack: PACK.into() })
        .await
        .unwrap()
        .into_inner();
    assert!(
        d.diff.contains("-max_steps = 16") && d.diff.contains("+max_steps = 12"),
        "{d:?}"
    );
    // Accepting a digest other than the one the diff showed is refused.
    let e = c
        .accept_profile(pb::AcceptProfileRequest {
            pack: PACK.into(),
            profile_digest: d.bound_profile_digest.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(code(&e), "local-binding/profile-changed", "{e:?}");
    c.accept_profile(pb::AcceptProfileRequest {
        pack: PACK.into(),
        profile_digest: d.active_profile_digest.clone(),
    })
    .await
    .unwrap();
    assert_eq!(readiness(&mut c).await.readiness, "runnable");

    // The record of it all, in order, and the signed facts as installed.
    let shown = c
        .show_pack(pb::ShowPackRequest {
            name: PACK.into(),
            version: 1,
        })
        .await
        .unwrap()
        .into_inner();
    let events: Vec<&str> = shown
        .status
        .as_ref()
        .unwrap()
        .events
        .iter()
        .map(|e| e.event.as_str())
        .filter(|e| *e != "bound" && !e.starts_with("binding"))
        .collect();
    assert_eq!(
        events,
        [
            "installed",
            "activated",
            "revoked",
            "reactivated",
            "installed",
            "upgraded",
            "installed",
            "upgraded"
        ]
    );
    let facts: serde_json::Value = serde_json::from_str(&shown.facts_json).unwrap();
    assert_eq!(facts["name"], PACK);
    assert_eq!(facts["version"], 1);
    body.stop().await;
}
